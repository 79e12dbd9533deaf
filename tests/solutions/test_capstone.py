"""Notebook 10: the prefix-LM mask and the capstone's ready-made parts, against PyTorch's own building blocks."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from learner import capstone_runs as capstone, data, rnn_models as rnn
from helpers import assert_close, gen
from solutions.capstone import prefix_lm_mask
from solutions.rnn_attention import attention_decoder_step


def prefix_mask_by_loops(prefix_lengths, T):
    return torch.tensor([[[j <= i or j < int(p) for j in range(T)] for i in range(T)] for p in prefix_lengths],
                        dtype=torch.bool).reshape(len(prefix_lengths), T, T)


@pytest.mark.parametrize("lengths,T", [([0, 3, 6], 6), ([1], 1), ([0, 0], 0), ([4, 2], 9)])
def test_prefix_lm_mask_equals_its_definition_by_loops(lengths, T):
    assert torch.equal(prefix_lm_mask(torch.tensor(lengths), T), prefix_mask_by_loops(lengths, T))


def test_prefix_lm_mask_is_pytorchs_causal_mask_with_no_prefix_and_all_open_with_the_whole_text():
    """p = 0: the complement of nn.Transformer.generate_square_subsequent_mask's -inf; p = T: every pair open."""
    causal = nn.Transformer.generate_square_subsequent_mask(5) == 0
    assert torch.equal(prefix_lm_mask(torch.tensor([0, 0]), 5), causal.expand(2, 5, 5))
    assert prefix_lm_mask(torch.tensor([5]), 5).all()
    assert torch.equal(capstone.causal_lm_mask(torch.tensor([3, 1]), 5), causal.expand(2, 5, 5))


def test_prefix_lm_mask_refuses_prefixes_outside_the_text():
    for lengths, T in (([7], 5), ([-1], 4)):
        with pytest.raises(ValueError, match="prefix lengths"):
            prefix_lm_mask(torch.tensor(lengths), T)


def test_the_ready_made_attention_step_equals_notebook_05bs_reference_step():
    g = gen(3)
    p = rnn.init_attention_params(7, 5, 6, 6, 4, seed=1, dtype=torch.float64)
    prev, s = torch.tensor([1, 4, 2]), torch.randn(3, 6, generator=g, dtype=torch.float64)
    states = torch.randn(3, 5, 6, generator=g, dtype=torch.float64)
    mask = torch.arange(5)[None] < torch.tensor([5, 2, 0])[:, None]
    for got, want in zip(capstone.attention_step(prev, s, states, mask, p),
                         attention_decoder_step(prev, s, states, mask, p)):
        assert_close(got, want)


def _task():
    return data.make_date_task(n_train=200, n_val=10, n_test=60, seed=0)


def test_the_prefix_decoder_with_the_causal_mask_equals_an_nn_transformer_encoder_with_a_causal_mask():
    """PrefixDecoder's blocks are post-norm nn.TransformerEncoderLayer's; with the causal mask and padding blocked,
    its logits equal those of nn.TransformerEncoder (weights copied) times the tied token table."""
    from learner.transformer import as_dict, weights_of
    task = _task()
    model = capstone.PrefixDecoder(len(data.lm_vocab(task)), 8, 2, 16, 2, 48, capstone.causal_lm_mask, seed=0).double()
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    net = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    with torch.no_grad():
        for ours, theirs in zip(model.layers, net.layers):
            mine, other = as_dict(ours), weights_of(theirs)
            for block in other:
                for k in other[block]:
                    other[block][k].copy_(mine[block][k])
    ids, valid = data.pad_rows([data.lm_ids(s, t, data.lm_vocab(task)) for s, t in task.test[:3]])
    T = ids.shape[1]
    x = F.embedding(ids, model.embed.E) * model.embed.scale + model.embed.P[:T]
    want = net(x, mask=torch.ones(T, T, dtype=torch.bool).triu(1),  # PyTorch: True = blocked
               src_key_padding_mask=~valid) @ model.embed.E.T
    got = model(ids, torch.zeros(3, dtype=torch.long), valid)
    assert_close(got[valid], want[valid])


def test_the_decoder_only_loss_is_the_cross_entropy_of_the_target_tokens_alone():
    task = _task()
    run = capstone.build("decoder_causal", 16, task)
    pairs = task.train[:4]
    vocab = data.lm_vocab(task)
    ids, valid = data.pad_rows([data.lm_ids(s, t, vocab) for s, t in pairs])
    logits = run.model(ids, torch.zeros(4, dtype=torch.long), valid)
    terms = []
    for b, (s, t) in enumerate(pairs):
        p = len(data.lm_ids(s, None, vocab))
        n = len(data.lm_ids(s, t, vocab))
        terms.append(F.cross_entropy(logits[b, p - 1:n - 1], ids[b, p:n], reduction="sum"))
    n_target = sum(len(data.lm_ids(s, t, vocab)) - len(data.lm_ids(s, None, vocab)) for s, t in pairs)
    assert_close(run.loss(pairs), torch.stack(terms).sum() / n_target)


def test_with_the_prefix_mask_a_source_token_reads_the_source_after_it_but_no_token_reads_a_later_target():
    task = _task()
    vocab = data.lm_vocab(task)
    run = capstone.build("decoder_prefix", 16, task, prefix_mask=prefix_lm_mask)
    a = torch.tensor([data.lm_ids("the 1st of may 2001", "2001-05-01", vocab)])
    p = torch.tensor([len(data.lm_ids("the 1st of may 2001", None, vocab))])
    b = a.clone()
    b[0, 6] = vocab["9"]  # a later source token
    with torch.no_grad():
        assert not torch.allclose(run.model(a, p)[0, 1:6], run.model(b, p)[0, 1:6])  # read both ways
        c = a.clone()
        c[0, -3] = vocab["9"]  # a late target token
        assert torch.equal(run.model(a, p)[0, :-3], run.model(c, p)[0, :-3])
