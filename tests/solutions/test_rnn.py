"""Notebook 05, the RNN encoder-decoder: the reference against PyTorch, and the decoders against search by hand."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import solutions.rnn as rnn
from learner import data
from learner.check import EXERCISES
from helpers import BOS, EOS, all_sequences, contexts, rnn_log_prob, rnn_params
import learner.check

NOTEBOOK = "05_rnn"
# the exercises, not the self-check questions
NAMES = [name for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK and ex.answer is None]


# ---------------------------------------------------------------- the cell and the encoder
def test_hand_cell_equals_nn_rnn_tanh_forward_and_gradients():
    """rnn_encode with nn.RNN's weights copied in gives nn.RNN's outputs, final state and gradients."""
    torch.manual_seed(0)
    B, T, V_src, D, H = 3, 6, 9, 4, 5
    ref = nn.RNN(D, H, nonlinearity="tanh", batch_first=True).double()
    E = torch.randn(V_src, D, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, V_src, (B, T))
    W_x, W_h = ref.weight_ih_l0, ref.weight_hh_l0
    b = ref.bias_ih_l0 + ref.bias_hh_l0

    states, context = rnn.rnn_encode(ids, None, E, W_x, W_h, b)
    out, h_n = ref(E[ids])
    torch.testing.assert_close(states, out)
    torch.testing.assert_close(context, h_n[0])

    mine = torch.autograd.grad((states ** 2).sum() + context.sum(), [E, W_x, W_h, ref.bias_ih_l0])
    theirs = torch.autograd.grad((out ** 2).sum() + h_n[0].sum(), [E, W_x, W_h, ref.bias_ih_l0])
    for g_mine, g_theirs in zip(mine, theirs):
        torch.testing.assert_close(g_mine, g_theirs)


def test_rnn_cell_is_one_step_of_nn_rnn_cell():
    torch.manual_seed(1)
    cell = nn.RNNCell(3, 4, nonlinearity="tanh").double()
    x, h = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    ours = rnn.rnn_cell(x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih + cell.bias_hh)
    torch.testing.assert_close(ours, cell(x, h))
    g1 = torch.autograd.grad(ours.sum(), cell.weight_hh)[0]
    g2 = torch.autograd.grad(cell(x, h).sum(), cell.weight_hh)[0]
    torch.testing.assert_close(g1, g2)


def test_context_of_a_padded_batch_equals_the_unpadded_run_of_each_sentence():
    """c = h_{T_x} is the state after each sentence's last real token, whatever padding follows it."""
    p = rnn_params()
    lengths = [6, 4, 1, 0]
    ids = torch.randint(3, 7, (4, 6), generator=torch.Generator().manual_seed(2))
    mask = torch.arange(6)[None, :] < torch.tensor(lengths)[:, None]
    ids = ids.masked_fill(~mask, 0)
    enc = (p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])
    states, context = rnn.rnn_encode(ids, mask, *enc)
    for b, n in enumerate(lengths):
        s_alone, c_alone = rnn.rnn_encode(ids[b:b + 1, :n], None, *enc)
        torch.testing.assert_close(context[b], c_alone[0])
        torch.testing.assert_close(states[b, :n], s_alone[0])
        assert not states[b, n:].any(), "padding positions hold 0"
    # and the same as nn.RNN on a packed batch
    ref = nn.RNN(3, 5, batch_first=True).double()
    with torch.no_grad():
        ref.weight_ih_l0.copy_(p["W_x_enc"]), ref.weight_hh_l0.copy_(p["W_h_enc"])
        ref.bias_ih_l0.copy_(p["b_enc"]), ref.bias_hh_l0.zero_()
    packed = nn.utils.rnn.pack_padded_sequence(p["E_src"][ids[:3]], torch.tensor(lengths[:3]), batch_first=True)
    _, h_n = ref(packed)
    torch.testing.assert_close(context[:3], h_n[0])


def test_an_empty_source_or_an_all_padding_sentence_gets_the_initial_state():
    p = rnn_params()
    enc = (p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])
    states, context = rnn.rnn_encode(torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, 0, dtype=torch.bool), *enc)
    assert states.shape == (2, 0, 5) and torch.equal(context, torch.zeros(2, 5, dtype=torch.float64))
    states, context = rnn.rnn_encode(torch.tensor([[4, 5], [0, 0]]), torch.tensor([[True, True], [False, False]]),
                                     *enc)
    assert torch.equal(context[1], torch.zeros(5, dtype=torch.float64)) and context[0].abs().sum() > 0


# ---------------------------------------------------------------- decoder, teacher forcing, loss
def test_teacher_forced_logits_equal_decoder_steps_on_the_true_tokens():
    p, c = rnn_params(), contexts(3, 5)
    tgt_in = torch.tensor([[BOS, 4, 5, 3], [BOS, 3, 0, 0], [BOS, 5, 5, 4]])
    logits = rnn.teacher_forced_logits(c, tgt_in, p)
    h = c
    for t in range(4):
        step_logits, h = rnn.decoder_step(tgt_in[:, t], h, p)
        torch.testing.assert_close(logits[:, t], step_logits)


def test_loss_equals_cross_entropy_summed_with_ignore_index_and_divided_by_B():
    torch.manual_seed(3)
    B, T, V = 4, 7, 11
    logits = torch.randn(B, T, V, dtype=torch.float64) * 2
    targets = torch.randint(0, V, (B, T))
    mask = torch.arange(T)[None, :] < torch.tensor([7, 3, 1, 0])[:, None]
    ours = rnn.seq2seq_loss(logits, targets, mask)
    with_pad = targets.masked_fill(~mask, data.PAD_ID)
    padded_out = logits.masked_fill(~mask[..., None], 0.0)  # whatever the padded logits are
    theirs = F.cross_entropy(logits.reshape(-1, V), targets.masked_fill(~mask, -100).reshape(-1),
                             ignore_index=-100, reduction="sum") / B
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(rnn.seq2seq_loss(padded_out, with_pad, mask), theirs)
    # with real targets that are never <pad>, ignore_index=pad gives the same number
    real = targets.clamp_min(1).masked_fill(~mask, data.PAD_ID)
    torch.testing.assert_close(rnn.seq2seq_loss(logits, real, mask),
                               F.cross_entropy(logits.reshape(-1, V), real.reshape(-1), ignore_index=data.PAD_ID,
                                               reduction="sum") / B)
    torch.testing.assert_close(rnn.seq2seq_loss(logits, targets),
                               F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="sum") / B)


# ---------------------------------------------------------------- greedy and beam search
def test_greedy_stops_at_max_len_when_eos_never_comes_and_pads_after_eos():
    p = rnn_params(out_scale=3.0)
    p["b_out"] = p["b_out"].clone()
    p["b_out"][EOS] = -80.0
    tokens, lp = rnn.greedy_decode(contexts(3, 5), p, BOS, EOS, max_len=9)
    assert tokens.shape == (3, 9) and (tokens != EOS).all()
    p["b_out"][EOS] = 80.0
    tokens, lp = rnn.greedy_decode(contexts(3, 5), p, BOS, EOS, max_len=9)
    assert tokens.tolist() == [[EOS]] * 3 and torch.allclose(lp, torch.zeros(3, dtype=torch.float64))
    from learner.check.cases.rnn import _greedy_edge
    case = next(c for c in _greedy_edge() if "different steps" in c.what)
    tokens, lp = rnn.greedy_decode(*case.args, **case.kwargs)
    ends = [row.index(EOS) if EOS in row else None for row in tokens.tolist()]
    assert len(set(ends)) > 2
    for row, end in zip(tokens.tolist(), ends):
        if end is not None:
            assert all(t == 0 for t in row[end + 1:])


@pytest.mark.parametrize("seed", range(6))
def test_beam_width_one_equals_greedy(seed):
    p, C = rnn_params(seed=seed, out_scale=2.0), contexts(4, 5, seed)
    tokens, lp = rnn.greedy_decode(C, p, BOS, EOS, max_len=8)
    for i in range(4):
        seqs, scores = rnn.beam_search(C[i], p, BOS, EOS, beam_width=1, max_len=8)
        row = tokens[i].tolist()
        row = row[:row.index(EOS) + 1] if EOS in row else row
        assert seqs == [row]
        torch.testing.assert_close(scores[0], lp[i])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("length_norm", [False, True])
def test_a_vocabulary_wide_beam_finds_the_exhaustive_optimum(seed, length_norm):
    """V = 4: width V at max_len 2, and width V^2 (every prefix kept) at max_len 3, equal searching everything."""
    V = 4
    p, c = rnn_params(V=V, seed=seed, out_scale=3.0), contexts(1, 5, seed)[0]
    for width, max_len in ((V, 2), (V * V, 3)):
        every = all_sequences(V, max_len)
        score = {tuple(s): rnn_log_prob(p, c, s) / (len(s) if length_norm else 1) for s in every}
        best = max(score, key=score.get)
        seqs, scores = rnn.beam_search(c, p, BOS, EOS, beam_width=width, max_len=max_len, length_norm=length_norm)
        assert tuple(seqs[0]) == best
        assert math.isclose(scores[0].item(), rnn_log_prob(p, c, seqs[0]), rel_tol=1e-9, abs_tol=1e-12)
        assert len(seqs) == min(width, len(every))


def test_a_wider_beam_can_beat_greedy():
    """The edge case shipped with the grader: width 5 finds a more probable sentence than greedy."""
    from learner.check.cases.rnn import _beam_edge
    case = next(c for c in _beam_edge() if "better sequence than greedy" in c.what)
    c, p = case.args[0], case.args[1]
    greedy, _ = rnn.beam_search(c, p, BOS, EOS, beam_width=1, max_len=6)
    wide, scores = rnn.beam_search(c, p, BOS, EOS, **case.kwargs)
    assert wide[0] != greedy[0] and rnn_log_prob(p, c, wide[0]) > rnn_log_prob(p, c, greedy[0])


def test_finished_hypotheses_are_never_extended():
    p = rnn_params(seed=4, out_scale=2.0)
    seqs, _ = rnn.beam_search(contexts(1, 5, 4)[0], p, BOS, EOS, beam_width=6, max_len=6)
    assert all(EOS not in s[:-1] for s in seqs)


@pytest.mark.parametrize("call, argument", [
    (lambda p, c: rnn.beam_search(c[0], p, BOS, EOS, beam_width=0, max_len=5), "beam_width"),
    (lambda p, c: rnn.beam_search(c[0], p, BOS, EOS, beam_width=-2, max_len=5), "beam_width"),
    (lambda p, c: rnn.beam_search(c[0], p, BOS, EOS, beam_width=2, max_len=-1), "max_len"),
    (lambda p, c: rnn.greedy_decode(c, p, BOS, EOS, max_len=-1), "max_len"),
    (lambda p, c: rnn.beam_search(c, p, BOS, EOS, beam_width=2, max_len=3), "context"),
    (lambda p, c: rnn.rnn_cell(torch.zeros(2, 4), torch.zeros(2, 5), p["W_x_enc"], p["W_h_enc"], p["b_enc"]), "D"),
    (lambda p, c: rnn.seq2seq_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long),
                                   torch.ones(2, 2, dtype=torch.bool)), "mask"),
])
def test_bad_arguments_raise_value_errors_that_name_them(call, argument):
    with pytest.raises(ValueError, match=argument):
        call(rnn_params(), contexts(2, 5))


