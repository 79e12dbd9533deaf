"""Notebook 05b's reference against PyTorch's own building blocks, and its ready-made models (learner.rnn_models)."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from learner import data
from learner.rnn_models import AttentionSeq2Seq, FixedContextSeq2Seq, RNNEncoder, init_attention_params
from helpers import DTYPES, assert_close, gen, randn
from solutions import rnn
from solutions.rnn_attention import additive_score, attend, attention_decoder_step, dot_score


def _states(g, B, T, H, lengths, dtype=torch.float64):
    mask = torch.arange(T)[None] < torch.tensor(lengths)[:, None]
    return torch.tanh(randn(g, B, T, H, dtype=dtype)) * mask[..., None], mask


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_additive_score_is_two_linear_layers_a_tanh_and_a_third(dtype):
    g = gen(1)
    s, (H, _) = randn(g, 3, 4, dtype=dtype), _states(g, 3, 6, 5, [6, 6, 6], dtype)
    W_s, W_h, v = nn.Linear(4, 7, bias=False, dtype=dtype), nn.Linear(5, 7, bias=False, dtype=dtype), \
        nn.Linear(7, 1, bias=False, dtype=dtype)
    with torch.no_grad():
        want = v(torch.tanh(W_s(s)[:, None, :] + W_h(H)))[..., 0]
        assert_close(additive_score(s, H, W_s.weight, W_h.weight, v.weight[0]), want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dot_score_and_attend_are_scaled_dot_product_attention_with_scale_1(dtype):
    """One query per sentence (the decoder's state) against the encoder's states as keys and values: PyTorch's
    F.scaled_dot_product_attention with scale=1 and the padding blocked gives the same context."""
    g = gen(2)
    s, (H, mask) = randn(g, 3, 5, dtype=dtype), _states(g, 3, 6, 5, [6, 2, 4], dtype)
    assert_close(dot_score(s, H), torch.bmm(H, s[:, :, None])[:, :, 0])
    context, alpha = attend(dot_score(s, H), H, mask)
    want = F.scaled_dot_product_attention(s[:, None, None], H[:, None], H[:, None], attn_mask=mask[:, None, None],
                                          scale=1.0)[:, 0, 0]
    assert_close(context, want)
    assert_close(alpha, torch.softmax(dot_score(s, H).masked_fill(~mask, float("-inf")), -1))


def test_attend_gives_zeros_not_nan_for_a_source_without_a_real_token():
    g = gen(3)
    H, mask = _states(g, 2, 4, 3, [4, 0])
    context, alpha = attend(randn(g, 2, 4), H, mask)
    assert torch.equal(alpha[1], torch.zeros(4, dtype=alpha.dtype)) and torch.equal(context[1], torch.zeros(3,
                                                                                          dtype=context.dtype))
    context, alpha = attend(torch.zeros(2, 0, dtype=torch.float64), H[:, :0], mask[:, :0])
    assert alpha.shape == (2, 0) and torch.equal(context, torch.zeros(2, 3, dtype=torch.float64))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_decoder_step_is_an_rnn_cell_reading_the_token_and_the_context(dtype):
    """h^dec_t = tanh(W_x x + W_c c_t + W_h h^dec_{t-1} + b) is nn.RNNCell fed [x ; c_t]; z_t an nn.Linear of
    [h^dec_t ; c_t]; the same gradients too."""
    g = gen(4)
    V, D, d_dec, d_enc, A = 7, 3, 4, 5, 6
    p = {k: t.to(dtype).requires_grad_() for k, t in init_attention_params(V, D, d_dec, d_enc, A, seed=1).items()}
    prev, s = torch.tensor([1, 4, 6]), randn(g, 3, d_dec, dtype=dtype, requires_grad=True)
    H, mask = _states(g, 3, 5, d_enc, [5, 3, 1], dtype)
    logits, s_new, alpha = attention_decoder_step(prev, s, H, mask, p)

    context, _ = attend(additive_score(s, H, p["W_q"], p["W_k"], p["u"]), H, mask)
    cell = nn.RNNCell(D + d_enc, d_dec, dtype=dtype)
    out = nn.Linear(d_dec + d_enc, V, dtype=dtype)
    with torch.no_grad():
        cell.weight_ih.copy_(torch.cat([p["W_x"], p["W_c"]], dim=1))
        cell.weight_hh.copy_(p["W_h"])
        cell.bias_ih.copy_(p["b"])
        cell.bias_hh.zero_()
        out.weight.copy_(p["W_out"])
        out.bias.copy_(p["b_out"])
    want_s = cell(torch.cat([F.embedding(prev, p["E_tgt"]), context], dim=1), s)
    assert_close(s_new, want_s)
    assert_close(logits, out(torch.cat([want_s, context], dim=1)))
    grads = torch.autograd.grad(logits.sum(), [s, p["W_q"], p["u"], p["W_c"]])
    assert all(gr.abs().sum() > 0 for gr in grads)  # every part of the step reaches the loss
    assert torch.allclose(alpha.sum(-1), torch.ones(3, dtype=dtype))


def test_the_ready_made_encoder_is_notebook_05s_rnn_encode():
    """RNNEncoder (nn.RNN over a packed batch) gives rnn_encode's states and context with the same weights."""
    torch.manual_seed(0)
    enc = RNNEncoder(9, 3, 5).double()
    ids = torch.tensor([[4, 5, 6, 7], [8, 4, 0, 0], [0, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    states, context = enc(ids, mask)
    r = enc.rnn
    want_states, want_context = rnn.rnn_encode(ids, mask, enc.emb.weight, r.weight_ih_l0, r.weight_hh_l0,
                                               r.bias_ih_l0 + r.bias_hh_l0)
    assert_close(states, want_states)
    assert_close(context, want_context)


@pytest.mark.parametrize("make", [
    lambda V_src, V: AttentionSeq2Seq(V_src, V, D=8, d_h=16, d_a=8, seed=0, step=attention_decoder_step),
    lambda V_src, V: FixedContextSeq2Seq(V_src, V, D=8, d_h=16, seed=0)], ids=["attention", "fixed-context"])
def test_greedy_decoding_is_the_argmax_of_the_teacher_forced_pass_on_its_own_output(make):
    task = data.make_date_task(n_train=50, n_val=10, n_test=10, seed=0)
    model = make(len(task.src_vocab), len(task.tgt_vocab)).double()
    b = data.make_batch(task.test[:4], task.src_vocab, task.tgt_vocab)
    out = model.greedy(b["src"], b["src_mask"], data.BOS_ID, data.EOS_ID, 6)
    tokens = out[0] if isinstance(out, tuple) else out
    tgt_in = torch.cat([torch.full((4, 1), data.BOS_ID), tokens[:, :-1]], dim=1)
    with torch.no_grad():
        logits = model(b["src"], b["src_mask"], tgt_in)
    first_eos = [next((t for t in range(tokens.shape[1]) if tokens[i, t] == data.EOS_ID), tokens.shape[1])
                 for i in range(4)]
    for i in range(4):  # up to and including each sentence's <eos>
        n = min(first_eos[i] + 1, tokens.shape[1])
        assert torch.equal(logits[i, :n].argmax(-1), tokens[i, :n])
    if isinstance(out, tuple):
        weights = out[1]
        assert weights.shape == (4, tokens.shape[1], b["src"].shape[1])
        assert torch.allclose(weights.sum(-1), torch.ones(weights.shape[:2], dtype=weights.dtype))
        assert (weights[~b["src_mask"][:, None, :].expand_as(weights)] == 0).all()
