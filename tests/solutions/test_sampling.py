"""Notebook 07, sampling: the reference top_k_filter, top_p_filter and sample_next against PyTorch's own building
blocks (torch.topk, torch.multinomial with a seeded torch.Generator), against the definitions the docstrings state
(the nucleus is the smallest most-probable set whose mass reaches p), and over many draws; and the model's
``complete(..., choose=...)`` that the notebook samples with.
"""
import math

import pytest
import torch

from learner import data, transformer
from solutions.decoder import sample_next, top_k_filter, top_p_filter


def _logits(seed, *shape, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype) * 2


@pytest.mark.parametrize("k", [1, 2, 5, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_top_k_keeps_exactly_what_torch_topk_returns_when_there_are_no_ties(k, dtype):
    x = _logits(k, 4, 3, 7, dtype=dtype)
    out = top_k_filter(x, k)
    kept = torch.zeros_like(x, dtype=torch.bool).scatter(-1, x.topk(k, dim=-1).indices, True)
    assert torch.equal(torch.isfinite(out), kept)
    assert torch.equal(out[kept], x[kept]) and bool((out[~kept] == -math.inf).all()) and out.dtype == dtype


def test_top_k_keeps_every_logit_tied_with_the_kth_largest():
    x = torch.tensor([[3.0, 1.0, 1.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    out = top_k_filter(x, 2)
    assert torch.isfinite(out).tolist() == [[True, True, True, False], [True, True, True, True]]
    assert torch.equal(top_k_filter(x, 4), x) and torch.equal(top_k_filter(x, 9), x)


@pytest.mark.parametrize("k", [0, -2, 1.5, True])
def test_top_k_rejects_a_k_that_is_not_a_positive_whole_number(k):
    with pytest.raises(ValueError, match="k"):
        top_k_filter(_logits(0, 2, 5), k)


@pytest.mark.parametrize("p", [0.05, 0.3, 0.5, 0.77, 0.9, 0.99])
def test_top_p_keeps_the_smallest_most_probable_set_whose_mass_reaches_p(p):
    x = _logits(int(p * 100), 6, 9)
    keep = torch.isfinite(top_p_filter(x, p))
    probs = torch.softmax(x, dim=-1)
    for row, kept in zip(probs, keep):
        mass = float(row[kept].sum())
        assert mass >= p - 1e-12  # it reaches p
        assert bool(kept[row.argmax()])  # the most probable token is always in
        # every kept token is at least as probable as every dropped one, and dropping the least probable kept
        # token falls below p: no smaller most-probable set reaches p
        if not bool(kept.all()):
            assert float(row[kept].min()) >= float(row[~kept].max())
        assert mass - float(row[kept].min()) < p


def test_top_p_breaks_ties_by_the_lower_token_index_and_p_1_keeps_everything():
    x = torch.tensor([[0.4, 0.3, 0.3], [0.3, 0.4, 0.3]], dtype=torch.float64).log()
    assert torch.isfinite(top_p_filter(x, 0.5)).tolist() == [[True, True, False], [True, True, False]]
    assert torch.equal(top_p_filter(x, 1.0), x)


@pytest.mark.parametrize("p", [0.0, -0.1, 1.01])
def test_top_p_rejects_a_mass_outside_0_to_1(p):
    with pytest.raises(ValueError, match="p"):
        top_p_filter(_logits(0, 2, 5), p)


@pytest.mark.parametrize("tau", [0.5, 1.0, 2.0])
def test_sample_next_is_torch_multinomial_on_the_softmax_with_a_generator_seeded_as_told(tau):
    x = _logits(3, 50, 8)
    g = torch.Generator().manual_seed(17)
    want = torch.multinomial(torch.softmax(x / tau, dim=-1), 1, generator=g)[:, 0]
    got = sample_next(x, 17, temperature=tau)
    assert torch.equal(got, want) and got.dtype == torch.long and got.shape == (50,)
    assert torch.equal(sample_next(x, 17, temperature=tau), got)  # the same seed, the same draws


def test_sample_next_with_top_k_1_or_a_tiny_top_p_is_the_argmax():
    x = _logits(4, 30, 10)
    assert torch.equal(sample_next(x, 5, top_k=1), x.argmax(-1))
    assert torch.equal(sample_next(x, 5, temperature=3.0, top_p=1e-6), x.argmax(-1))


def test_sample_next_draws_follow_the_filtered_distribution():
    """Over 20,000 draws each token's frequency is within 5 standard errors of its probability after the
    temperature, top-k and top-p; tokens the filters removed never come up."""
    row = _logits(6, 1, 7)
    n = 20_000
    x = row.expand(n, 7)
    tau, k, p = 1.3, 5, 0.8
    z = top_p_filter(top_k_filter(row / tau, k), p)
    probs = torch.softmax(z, dim=-1)[0]
    counts = torch.bincount(sample_next(x, 99, temperature=tau, top_k=k, top_p=p), minlength=7).double()
    assert bool((counts[probs == 0] == 0).all())
    se = (probs * (1 - probs) / n).sqrt()
    assert bool(((counts / n - probs).abs() <= 5 * se + 1e-12).all()), (counts / n, probs)


@pytest.mark.parametrize("tau", [0.0, -1.0])
def test_sample_next_refuses_a_temperature_that_is_not_positive_and_names_greedy_decoding(tau):
    with pytest.raises(ValueError, match="greedy"):
        sample_next(_logits(0, 2, 5), 0, temperature=tau)


def test_complete_samples_with_the_given_choice_and_is_greedy_without_one():
    task = data.make_date_task(seed=0)
    vocab = data.lm_vocab(task)
    cfg = transformer.TransformerConfig(vocab_size=len(vocab), d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=40)
    from learner import blocks
    gpt = transformer.DecoderLM(cfg, blocks.decoder_block, blocks.embed_with_positions, seed=0)
    prompts = [data.lm_ids(s, None, vocab) for s, _ in task.test[:4]]
    greedy = gpt.complete(prompts, 6, data.EOS_ID)
    assert gpt.complete(prompts, 6, data.EOS_ID, choose=lambda logits: logits.argmax(-1)) == greedy
    assert gpt.complete(prompts, 6, data.EOS_ID, choose=lambda logits: sample_next(logits, 0, top_k=1)) == greedy
    seen = []
    gpt.complete(prompts, 3, data.EOS_ID, choose=lambda logits: seen.append(logits.shape) or logits.argmax(-1))
    assert all(len(s) == 2 and s[1] == len(vocab) for s in seen)
