"""The ready-made blocks of learner.blocks against the reference, and training by steps (learner.training,
transformer.fit)."""

import pytest
import torch

from learner import blocks, transformer
from learner.transformer import encoder_block_weights
from solutions import encoder, masks_attention as attention
from helpers import (DTYPES, assert_all_close, assert_close, causal, cotangent, flatten, gen, grads, randn,
                     random_dict, valid_from_lengths, with_grad)

# ================================================================== helpers

D, H, FF = 8, 2, 16  # model width, heads, feed-forward width of the small blocks below


# ---------------------------------------------------------------- learner.blocks, the given re-implementations

def blocks_attention_inputs(g, dtype, T_q, T_k):
    Q = randn(g, 2, 3, T_q, 4, dtype=dtype, requires_grad=True)
    K = randn(g, 2, 3, T_k, 4, dtype=dtype, requires_grad=True)
    V = randn(g, 2, 3, T_k, 5, dtype=dtype, requires_grad=True)
    return Q, K, V


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["no_mask", "random", "fully_masked_rows", "empty_source"])
def test_blocks_masked_attention_equals_the_reference(case, dtype):
    """learner.blocks.masked_attention gives the reference's output, weights and input gradients, fully masked
    rows (zero weights, no NaN) and T_k = 0 included."""
    g = gen(7)
    T_q, T_k = 4, (0 if case == "empty_source" else 6)
    Q, K, V = blocks_attention_inputs(g, dtype, T_q, T_k)
    mask = None
    if case in ("random", "fully_masked_rows"):
        mask = torch.rand(2, 3, T_q, T_k, generator=g) < 0.5
        mask[..., 0] = True
        if case == "fully_masked_rows":
            mask[:, :, 1] = False
            mask[0, 2, 3] = False
    out, w = blocks.masked_attention(Q, K, V, mask)
    ref_out, ref_w = attention.masked_attention(Q, K, V, mask)
    assert not out.isnan().any() and not w.isnan().any()
    assert_close(out, ref_out)
    assert_close(w, ref_w)
    if T_k:
        cot = [cotangent(g, out), cotangent(g, w)]
        assert_all_close(grads([out, w], [Q, K, V], cot), grads([ref_out, ref_w], [Q, K, V], cot))


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_blocks_split_and_merge_heads_equal_the_reference(n_heads):
    """learner.blocks.split_heads / merge_heads give exactly the reference's tensors."""
    x = randn(gen(8), 3, 5, D)
    assert torch.equal(blocks.split_heads(x, n_heads), encoder.split_heads(x, n_heads))
    s = encoder.split_heads(x, n_heads)
    assert torch.equal(blocks.merge_heads(s), encoder.merge_heads(s))


def blocks_mha_case(case, g):
    """(T_q, T_k or None for self-attention, mask (True = may attend) or None)."""
    if case == "self_no_mask":
        return 5, None, None
    if case == "self_causal":
        return 5, None, causal(5)
    if case == "cross_padding":
        return 4, 6, valid_from_lengths([6, 2], 6)[:, None, :]
    if case == "cross_fully_masked_rows":
        m = torch.rand(2, 4, 6, generator=g) < 0.5
        m[:, :, 0] = True
        m[0, 1] = False
        m[1, 3] = False
        return 4, 6, m
    if case == "cross_fully_padded_source":
        return 4, 6, valid_from_lengths([6, 0], 6)[:, None, :]
    if case == "empty_source":
        return 4, 0, None
    raise AssertionError(case)


BLOCKS_MHA_CASES = ["self_no_mask", "self_causal", "cross_padding", "cross_fully_masked_rows",
                    "cross_fully_padded_source", "empty_source"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", BLOCKS_MHA_CASES)
def test_blocks_multi_head_attention_equals_the_reference(case, dtype):
    """learner.blocks.multi_head_attention gives the reference's output and per-head weights (fully masked rows:
    zero weights and output b_o; T_k = 0 too), and, where every query has a key, the same gradients."""
    g = gen(9)
    T_q, T_k, mask = blocks_mha_case(case, g)
    p = with_grad(random_dict(lambda g: encoder_block_weights(g, D, FF)["attn"], g, dtype))
    x_q = randn(g, 2, T_q, D, dtype=dtype, requires_grad=True)
    x_kv = x_q if T_k is None else randn(g, 2, T_k, D, dtype=dtype, requires_grad=True)
    out, w = blocks.multi_head_attention(x_q, x_kv, p, H, mask)
    ref_out, ref_w = encoder.multi_head_attention(x_q, x_kv, p, H, mask)
    assert not out.isnan().any() and not w.isnan().any()
    assert_close(out, ref_out)
    assert_close(w, ref_w)
    if mask is not None and x_kv.shape[1]:
        dead = ~torch.broadcast_to(mask, w.shape[:1] + w.shape[2:]).any(-1)  # (B, T_q)
        assert (w.permute(0, 2, 1, 3)[dead] == 0).all()
        assert_close(out[dead], p["b_o"].expand_as(out[dead]))
    # fully masked rows included: their gradients are finite too
    inputs = [x_q] + ([] if x_kv is x_q else [x_kv]) + [v for _, v in flatten(p)]
    if x_kv.shape[1]:
        cot = [cotangent(g, out), cotangent(g, w)]
        assert_all_close(grads([out, w], inputs, cot), grads([ref_out, ref_w], inputs, cot))
    else:  # no weights to differentiate; the output is b_o, and only b_o gets a gradient
        cot = cotangent(g, out)
        assert_all_close(grads(out, inputs, cot, unused_is_zero=True), grads(ref_out, inputs, cot, True))


def test_blocks_multi_head_attention_gradients_stay_finite_with_fully_masked_rows():
    """Backpropagating through learner.blocks.multi_head_attention with a query that may attend to nothing gives
    finite gradients equal to the reference's (the course's "never NaN")."""
    g = gen(10)
    T_q, T_k, mask = blocks_mha_case("cross_fully_masked_rows", g)
    p = with_grad(random_dict(lambda g: encoder_block_weights(g, D, FF)["attn"], g, torch.float64))
    x_q = randn(g, 2, T_q, D, requires_grad=True)
    x_kv = randn(g, 2, T_k, D, requires_grad=True)
    inputs = [x_q, x_kv] + [v for _, v in flatten(p)]
    out = blocks.multi_head_attention(x_q, x_kv, p, H, mask)[0]
    ref_out = encoder.multi_head_attention(x_q, x_kv, p, H, mask)[0]
    cot = cotangent(g, out)
    assert_all_close(grads(out, inputs, cot), grads(ref_out, inputs, cot))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("T,lengths", [(5, None), (5, [5, 3, 1]), (5, [5, 0, 2]), (0, None), (0, [0, 0, 0])],
                         ids=str)
def test_blocks_encoder_block_equals_the_reference(T, lengths, dtype):
    """learner.blocks.encoder_block gives the reference encoder_block's output (a fully padded sequence and T = 0
    too), and the same gradients when every sequence has a real token."""
    g = gen(11)
    p = with_grad(random_dict(lambda g: encoder_block_weights(g, D, FF), g, dtype))
    x = randn(g, 3, T, D, dtype=dtype, requires_grad=True)
    valid = None if lengths is None else valid_from_lengths(lengths, T)
    out = blocks.encoder_block(x, valid, p, H)
    ref = encoder.encoder_block(x, valid, p, H)
    assert not out.isnan().any()
    assert out.shape == (3, T, D)
    assert_close(out, ref)
    if T and (lengths is None or min(lengths) > 0):
        inputs, cot = [x] + [v for _, v in flatten(p)], cotangent(g, out)
        assert_all_close(grads(out, inputs, cot), grads(ref, inputs, cot))


# ================================================================== 5. the notebooks' training loop
def _tiny_fit(monkeypatch, steps, cap=None):
    if cap is None:
        monkeypatch.delenv("COURSE_MAX_TRAIN_STEPS", raising=False)
    else:
        monkeypatch.setenv("COURSE_MAX_TRAIN_STEPS", str(cap))
    model = torch.nn.Linear(3, 1)
    seen_lr = []
    data_stream = iter(lambda: torch.randn(8, 3), None)

    def loss_of(batch):
        opt = loss_of.optimizer
        if opt is not None:
            seen_lr.append(opt.param_groups[0]["lr"])
        return model(batch).pow(2).mean()
    loss_of.optimizer = None
    real_adamw = torch.optim.AdamW

    def spy(*args, **kwargs):
        loss_of.optimizer = real_adamw(*args, **kwargs)
        return loss_of.optimizer
    monkeypatch.setattr(torch.optim, "AdamW", spy)
    history = transformer.fit(model, loss_of, data_stream, steps=steps, lr=1e-2, report_every=10_000)
    return history, seen_lr, loss_of.optimizer


def test_fit_trains_every_step_however_slow_the_machine_and_completes_its_schedule(monkeypatch):
    """Training is fixed by its steps, never by the clock: on a machine where every step seems to take a second,
    fit still trains all the steps asked, and its one-cycle schedule reaches its peak and comes back down."""
    import time
    real = time.perf_counter
    clock = {"t": 0.0}

    def slow_clock():  # every reading advances 0.5 s: each step "takes" about a second
        clock["t"] += 0.5
        return clock["t"]
    monkeypatch.setattr(time, "perf_counter", slow_clock)
    try:
        history, lrs, opt = _tiny_fit(monkeypatch, steps=300)
    finally:
        monkeypatch.setattr(time, "perf_counter", real)
    assert [s for s, _ in history] == list(range(1, 301))
    assert max(lrs) == pytest.approx(1e-2, rel=0.05)        # the schedule reached its peak ...
    assert opt.param_groups[0]["lr"] < 1e-3                  # ... and came back down


def test_fit_uses_a_fixed_thread_count_and_restores_the_callers(monkeypatch):
    seen = []
    before = torch.get_num_threads()
    model = torch.nn.Linear(3, 1)
    monkeypatch.delenv("COURSE_MAX_TRAIN_STEPS", raising=False)

    def loss_of(batch):
        seen.append(torch.get_num_threads())
        return model(batch).pow(2).mean()
    transformer.fit(model, loss_of, iter(lambda: torch.randn(4, 3), None), steps=3, report_every=10, threads=1)
    assert seen == [1, 1, 1] and torch.get_num_threads() == before


def test_fit_is_reproducible_given_its_seeds(monkeypatch):
    monkeypatch.delenv("COURSE_MAX_TRAIN_STEPS", raising=False)
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        g = torch.Generator().manual_seed(1)
        runs.append(transformer.fit(model, lambda b: model(b).pow(2).mean(),
                                    iter(lambda: torch.randn(8, 3, generator=g), None), steps=40, report_every=100))
    assert runs[0] == runs[1]


def test_fit_obeys_the_graders_cap(monkeypatch, capsys):
    history, _, _ = _tiny_fit(monkeypatch, steps=40)
    assert len(history) == 40 and "COURSE_MAX_TRAIN_STEPS" not in capsys.readouterr().out
    for cap in (7, 10, 11, 20, 29, 30):  # below, at and just above the warm steps, and too short for a one-cycle
        history, _, _ = _tiny_fit(monkeypatch, steps=800, cap=cap)
        assert len(history) == cap and f"COURSE_MAX_TRAIN_STEPS={cap}" in capsys.readouterr().out


def test_training_threads_come_from_the_environment_and_are_given_back(monkeypatch):
    from learner.training import THREADS, training_threads
    before = torch.get_num_threads()
    monkeypatch.delenv("COURSE_TRAIN_THREADS", raising=False)
    with training_threads() as n:
        assert n == THREADS == torch.get_num_threads()
    monkeypatch.setenv("COURSE_TRAIN_THREADS", "1")
    with training_threads() as n:
        assert n == 1 == torch.get_num_threads()
    assert torch.get_num_threads() == before


def test_step_cap_caps_only_downwards_and_says_so(monkeypatch, capsys):
    from learner.training import step_cap
    monkeypatch.delenv("COURSE_MAX_TRAIN_STEPS", raising=False)
    assert step_cap(2500) == 2500 and capsys.readouterr().out == ""
    monkeypatch.setenv("COURSE_MAX_TRAIN_STEPS", "30")
    assert step_cap(2500) == 30 and "training 30 of 2500 steps only" in capsys.readouterr().out
    assert step_cap(12) == 12 and capsys.readouterr().out == ""
