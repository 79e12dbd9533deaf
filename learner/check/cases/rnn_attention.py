"""Notebook 05b, attention in the RNN encoder-decoder: cases, properties and known mistakes
(``solutions/mistakes/rnn_attention.py``)."""
import math

import torch

from .common import (Case, Exercise, F64, dn, gen, learner_call, learner_tensor, pick_dtype, pick_int, seeded_randn,
                     register, tensor_in, Choice, Integer, question)


def _states(g, B, T, d_enc, lengths=None, dtype=F64):
    """Encoder states (B, T, d_enc) in (-1, 1), 0 on padding, and the mask of the real positions."""
    lengths = [T] * B if lengths is None else lengths
    mask = torch.arange(T)[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]
    H = torch.tanh(seeded_randn(g, B, T, d_enc, dtype=dtype, scale=1.5)) * mask[:, :, None]
    return H, mask


def _lengths(g, B, T, allow_empty):
    return [pick_int(g, 0 if allow_empty else min(1, T), T) for _ in range(B)]


# ---------------------------------------------------------------- additive_score
def _additive_args(g, B, T, d_dec, d_enc, d_a, dtype=F64, lengths=None):
    H, _ = _states(g, B, T, d_enc, lengths, dtype)
    return (torch.tanh(seeded_randn(g, B, d_dec, dtype=dtype, scale=1.5)), H,
            seeded_randn(g, d_a, d_dec, dtype=dtype, scale=1 / math.sqrt(d_dec)),
            seeded_randn(g, d_a, d_enc, dtype=dtype, scale=1 / math.sqrt(d_enc)), seeded_randn(g, d_a, dtype=dtype))


def _additive_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6)
    d_dec, d_enc, d_a = pick_int(g, 1, 7), pick_int(g, 1, 7), pick_int(g, 1, 6)
    return Case(f"B={B}, T_x={T}, d_dec={d_dec}, d_enc={d_enc}, d_a={d_a}, {dn(dtype)}",
                _additive_args(g, B, T, d_dec, d_enc, d_a, dtype))


def _additive_edge():
    g = gen(61)
    args = _additive_args(g, 2, 5, 3, 4, 6)
    h, H, W_q, W_k, u = args
    return [
        Case("T_x = 1: one score per sentence", _additive_args(g, 3, 1, 3, 4, 2)),
        Case("T_x = 0: no score", _additive_args(g, 2, 0, 3, 4, 2)),
        Case("d_a = 1, d_dec != d_enc", _additive_args(g, 2, 4, 2, 5, 1)),
        Case("a zero decoder state still scores each h_j by u . tanh(W_k h_j)", (torch.zeros_like(h), H, W_q, W_k, u)),
        Case("huge states (x100): tanh saturates, the scores stay within |u|_1", (h * 100, H * 100, W_q, W_k, u)),
        Case("float32", _additive_args(g, 2, 3, 3, 3, 3, dtype=torch.float32)),
        Case("W_k of the wrong width is an error", (h, H, W_q, W_k[:, :2], u), raises="ValueError"),
        Case("u of the wrong length is an error", (h, H, W_q, W_k, u[:2]), raises="ValueError"),
    ]


def _additive_is_per_position(fn):
    """The score of position j depends on h_j alone: moving the encoder states moves their scores."""
    g = gen(62)
    h, H, W_q, W_k, u = _additive_args(g, 2, 5, 3, 4, 3)
    perm = torch.tensor([3, 0, 4, 1, 2])
    out = learner_tensor(fn, (h, H, W_q, W_k, u), shape=(2, 5))
    moved = learner_tensor(fn, (h, H[:, perm], W_q, W_k, u), shape=(2, 5))
    if out is None or moved is None:
        return None
    if not torch.allclose(moved, out[:, perm], rtol=1e-9, atol=1e-12):
        return "moving the encoder states h_j to other positions changed their scores: s_tj must read h_j only"
    return None


# ---------------------------------------------------------------- dot_score
def _dot_case(g, big):
    dtype = pick_dtype(g)
    B, T, d = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6), pick_int(g, 1, 8)
    H, _ = _states(g, B, T, d, dtype=dtype)
    return Case(f"B={B}, T_x={T}, d_dec = d_enc = {d}, {dn(dtype)}", (torch.tanh(seeded_randn(g, B, d, dtype=dtype, scale=1.5)), H))


def _dot_edge():
    g = gen(63)
    H, _ = _states(g, 2, 4, 3)
    s = torch.tanh(seeded_randn(g, 2, 3))
    return [
        Case("T_x = 1", (s, H[:, :1])),
        Case("T_x = 0: no score", (s, H[:, :0])),
        Case("the state equal to h_2 scores |h_2|^2 there", (H[:, 1].clone(), H)),
        Case("a zero state scores 0 everywhere", (torch.zeros_like(s), H)),
        Case("float32, d_dec = d_enc = 1", (torch.tanh(seeded_randn(g, 3, 1, dtype=torch.float32)),
                                _states(g, 3, 5, 1, dtype=torch.float32)[0])),
        Case("widths that differ (d_dec != d_enc) are an error", (s[:, :2], H), raises="ValueError"),
        Case("batches that differ are an error", (s[:1], H), raises="ValueError"),
    ]


# ---------------------------------------------------------------- attend
def _attend_args(g, B, T, d_enc, lengths=None, dtype=F64, scale=2.0, mask=True):
    H, m = _states(g, B, T, d_enc, lengths, dtype)
    scores = seeded_randn(g, B, T, dtype=dtype, scale=scale)
    return (scores, H, m if mask else None)


def _attend_case(g, big):
    dtype = pick_dtype(g)
    B, T, d_enc = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6), pick_int(g, 1, 7)
    lengths = _lengths(g, B, T, allow_empty=big)
    return Case(f"B={B}, T_x={T}, d_enc={d_enc}, source lengths {lengths}, {dn(dtype)}",
                _attend_args(g, B, T, d_enc, lengths, dtype))


def _attend_edge():
    g = gen(64)
    scores, H, mask = _attend_args(g, 2, 5, 3, [5, 3])
    return [
        Case("T_x = 1: all the weight on the one position", _attend_args(g, 3, 1, 4)),
        Case("equal scores: the plain average of the real states", (torch.zeros(2, 5, dtype=F64), H, mask)),
        Case("padding gets weight 0 however high its score", (scores.masked_fill(~mask, 50.0), H, mask)),
        Case("a sentence that is all padding: weights and context 0", _attend_args(g, 3, 4, 2, [4, 0, 2])),
        Case("T_x = 0: an empty source gives weights (B, 0) and a zero context", _attend_args(g, 2, 0, 3, [0, 0])),
        Case("huge scores (1e4) stay finite", (scores * 5e3, H, mask)),
        Case("src_mask=None: every position is real", (scores, H, None)),
        Case("float32", _attend_args(g, 2, 6, 4, [6, 2], dtype=torch.float32)),
        Case("scores and states of different lengths are an error", (scores[:, :4], H, mask), raises="ValueError"),
        Case("a src_mask of the wrong shape is an error", (scores, H, mask[:, :3]), raises="ValueError"),
    ]


def _weights_sum_to_one(fn):
    """Each sentence's weights sum to 1 over its real positions and are 0 on its padding."""
    g = gen(65)
    args = _attend_args(g, 4, 6, 3, [6, 4, 1, 2])
    out = learner_tensor(fn, args, item=1, shape=(4, 6))
    if out is None:
        return None
    mask = args[2]
    if not torch.allclose(out.sum(-1), torch.ones(4, dtype=out.dtype), atol=1e-9):
        return f"the weights of a sentence do not sum to 1: row sums {[round(x, 6) for x in out.sum(-1).tolist()]}"
    if (out[~mask] != 0).any():
        return "a padding position got a weight other than 0"
    return None


# ---------------------------------------------------------------- attention_decoder_step
def _step_params(g, V, D, d_dec, d_enc, d_a, dtype=F64):
    def w(rows, cols, scale=1.0):
        return seeded_randn(g, rows, cols, dtype=dtype, scale=scale / math.sqrt(cols))
    return {"E_tgt": seeded_randn(g, V, D, dtype=dtype), "W_q": w(d_a, d_dec), "W_k": w(d_a, d_enc),
            "u": seeded_randn(g, d_a, dtype=dtype),
            "W_x": w(d_dec, D), "W_c": w(d_dec, d_enc), "W_h": w(d_dec, d_dec, 1.5),
            "b": seeded_randn(g, d_dec, dtype=dtype, scale=0.3),
            "W_out": w(V, d_dec + d_enc, 2.0), "b_out": seeded_randn(g, V, dtype=dtype, scale=0.5)}


def _step_args(g, B, T, V, D, d_dec, d_enc, d_a, lengths=None, dtype=F64):
    H, mask = _states(g, B, T, d_enc, lengths, dtype)
    prev = torch.randint(0, V, (B,), generator=g)
    return (prev, torch.tanh(seeded_randn(g, B, d_dec, dtype=dtype, scale=1.5)), H, mask,
            _step_params(g, V, D, d_dec, d_enc, d_a, dtype))


def _step_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6)
    V, D, d_dec, d_enc = pick_int(g, 3, 10), pick_int(g, 1, 5), pick_int(g, 1, 6), pick_int(g, 1, 6)
    d_a = pick_int(g, 1, 5)
    lengths = _lengths(g, B, T, allow_empty=False)
    return Case(f"B={B}, T_x={T}, lengths {lengths}, V={V}, D={D}, d_dec={d_dec}, d_enc={d_enc}, d_a={d_a}, "
                f"{dn(dtype)}",
                _step_args(g, B, T, V, D, d_dec, d_enc, d_a, lengths, dtype))


def _step_edge():
    g = gen(66)
    args = _step_args(g, 3, 5, 7, 3, 4, 5, 3, [5, 2, 1])
    return [
        Case("a padded batch, lengths [5, 2, 1]", args),
        Case("T_x = 1", _step_args(g, 2, 1, 6, 2, 3, 3, 2)),
        Case("src_mask=None: no padding", args[:3] + (None, args[4])),
        Case("the first step: prev_ids = <bos> (1), a zero state", (torch.ones(3, dtype=torch.long),
                                                                    torch.zeros_like(args[1])) + args[2:]),
        Case("float32", _step_args(g, 2, 4, 5, 3, 3, 2, 2, [4, 3], dtype=torch.float32)),
    ]


def _step_reads_the_context(fn):
    """The step's logits change when an encoder state it weighs changes (the decoder reads the source)."""
    g = gen(67)
    prev, h, H, mask, p = _step_args(g, 2, 4, 6, 3, 4, 4, 3)
    out = _logits(fn, (prev, h, H, mask, p))
    H2 = H.clone()
    H2[:, 2] = -H2[:, 2]
    out2 = _logits(fn, (prev, h, H2, mask, p))
    if out is None or out2 is None:
        return None
    if torch.allclose(out, out2):
        return "the logits did not change when the encoder states changed: the step must read the source"
    return None


def _logits(fn, args):
    """The logits of a step (the first of its three outputs), or None when the call failed (the cases say why)."""
    out = learner_call(fn, args)
    if out is None or not (isinstance(out.value, tuple) and len(out.value) == 3):
        return None
    return tensor_in(out.value[0], dim=2)


register(
    __name__,
    Exercise("additive_score", "rnn_attention:additive_score", _additive_case, _additive_edge,
             properties=[("edge", _additive_is_per_position)],
             mistakes=[("rnn_attention:additive_score_no_tanh",
                        "the tanh is missing: s_tj = u . tanh(W_q h^dec_{t-1} + W_k h_j)"),
                       ("rnn_attention:additive_score_sum_not_v",
                        "the hidden units were summed instead of weighted by u: s_tj = u . tanh(...)"),
                       ("rnn_attention:additive_score_no_new_axis",
                        "W_q h^dec (B, d_a) was added to W_k h_j (B, T_x, d_a) without an axis for the positions: "
                        "PyTorch lines (B, d_a) up with (T_x, d_a), which fails unless B = T_x and then adds "
                        "sentence j's query at position j. Give it the axis: (h_prev @ W_q.T)[:, None, :]"),
                       ("rnn_attention:additive_score_swapped_weights",
                        "W_q and W_k were swapped: W_q reads the decoder state, W_k the encoder states")]),
    Exercise("dot_score", "rnn_attention:dot_score", _dot_case, _dot_edge,
             mistakes=[("rnn_attention:dot_score_scaled",
                        "the scores were divided by sqrt(d_dec): Luong's dot score is the plain dot product "
                        "h^dec_t . h_j"),
                       ("rnn_attention:dot_score_over_the_batch",
                        "the state was dotted with the states of another sentence of the batch")]),
    Exercise("attend", "rnn_attention:attend", _attend_case, _attend_edge,
             properties=[("edge", _weights_sum_to_one), ("hidden", _weights_sum_to_one)],
             mistakes=[("rnn_attention:attend_padding_not_masked",
                        "padding positions got weight: put -inf in their scores before the softmax"),
                       ("rnn_attention:attend_softmax_over_the_batch",
                        "the softmax ran over the batch, not over the source positions (dim=-1)"),
                       ("rnn_attention:attend_sum_not_average",
                        "the context summed the states: weigh each by its alpha_j"),
                       ("rnn_attention:attend_nan_when_empty",
                        "a sentence with no real token gave NaN (a softmax over only -inf): its weights and "
                        "context are 0")]),
    Exercise("attention_decoder_step", "rnn_attention:attention_decoder_step", _step_case, _step_edge,
             properties=[("edge", _step_reads_the_context)],
             uses=("additive_score", "attend"),
             mistakes=[("rnn_attention:step_scores_the_new_state",
                        "the scores read the new state h^dec_t; Bahdanau's read h^dec_{t-1}, the state before the "
                        "step"),
                       ("rnn_attention:step_output_ignores_context",
                        "the output layer read h^dec_t alone: z_t = W_out [h^dec_t ; c_t] + b_out"),
                       ("rnn_attention:step_update_ignores_context",
                        "the state update ignored the context: h^dec_t = tanh(W_x x + W_c c_t + W_h h^dec_{t-1} + b)")],
             n_basic=6, n_hidden=12),
    question("answer_alignment_weights", "rnn_attention:answer_alignment_weights", Integer(), wrong=[
        ("rnn_attention:answer_alignment_weights_one_context", "one context is notebook 05's: here every output "
         "step weighs every source position, T_y x T_x weights"),
        ("rnn_attention:answer_alignment_weights_sum", "the weights of one step are T_x numbers, one per source "
         "position, for each of the T_y steps: a product, not a sum"),
        ("rnn_attention:answer_alignment_weights_source_squared", "T_x x T_x: the weights are one row per output "
         "step (T_y of them) and one column per source position (T_x), T_y x T_x"),
        ("rnn_attention:answer_alignment_weights_target_squared", "T_y x T_y is the target's own grid: each of the "
         "T_y output steps weighs the T_x source positions, T_y x T_x")]),
    question("answer_bottleneck", "rnn_attention:answer_bottleneck", Choice("a", "b", "c", "d"), wrong=[
        ("rnn_attention:answer_bottleneck_bigger_h", "a bigger d_h helps, but the decoder still reads one vector for "
         "the whole sentence; attention gives it every state"),
        ("rnn_attention:answer_bottleneck_faster", "attention adds work at every step (a score per source "
         "position); it is not faster"),
        ("rnn_attention:answer_bottleneck_no_encoder", "the encoder still runs: attention reads its states")]),
)
