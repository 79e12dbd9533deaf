"""Notebook 05b, attention in the RNN encoder-decoder: cases, properties and known mistakes
(``solutions/mistakes/rnn_attention.py``)."""
import math

import torch

from .common import (Case, Exercise, F64, dn, gen, learner_call, learner_tensor, pick_dtype, pick_int, randn, register,
                     tensor_in)
from .common import Choice, Integer, question


def _states(g, B, T, H_e, lengths=None, dtype=F64):
    """Encoder states (B, T, H_e) in (-1, 1), 0 on padding, and the mask of the real positions."""
    lengths = [T] * B if lengths is None else lengths
    mask = torch.arange(T)[None, :] < torch.tensor(lengths, dtype=torch.long)[:, None]
    H = torch.tanh(randn(g, B, T, H_e, dtype=dtype, scale=1.5)) * mask[:, :, None]
    return H, mask


def _lengths(g, B, T, allow_empty):
    return [pick_int(g, 0 if allow_empty else min(1, T), T) for _ in range(B)]


# ---------------------------------------------------------------- additive_score
def _additive_args(g, B, T, H_d, H_e, A, dtype=F64, lengths=None):
    H, _ = _states(g, B, T, H_e, lengths, dtype)
    return (torch.tanh(randn(g, B, H_d, dtype=dtype, scale=1.5)), H,
            randn(g, A, H_d, dtype=dtype, scale=1 / math.sqrt(H_d)),
            randn(g, A, H_e, dtype=dtype, scale=1 / math.sqrt(H_e)), randn(g, A, dtype=dtype))


def _additive_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6)
    H_d, H_e, A = pick_int(g, 1, 7), pick_int(g, 1, 7), pick_int(g, 1, 6)
    return Case(f"B={B}, T_x={T}, H_d={H_d}, H_e={H_e}, A={A}, {dn(dtype)}",
                _additive_args(g, B, T, H_d, H_e, A, dtype))


def _additive_edge():
    g = gen(61)
    args = _additive_args(g, 2, 5, 3, 4, 6)
    s, H, W_s, W_h, v = args
    return [
        Case("T_x = 1: one score per sentence", _additive_args(g, 3, 1, 3, 4, 2)),
        Case("T_x = 0: no score", _additive_args(g, 2, 0, 3, 4, 2)),
        Case("A = 1, H_d != H_e", _additive_args(g, 2, 4, 2, 5, 1)),
        Case("a zero decoder state still scores each h_j by v . tanh(W_h h_j)", (torch.zeros_like(s), H, W_s, W_h, v)),
        Case("huge states (x100): tanh saturates, the scores stay within |v|_1", (s * 100, H * 100, W_s, W_h, v)),
        Case("float32", _additive_args(g, 2, 3, 3, 3, 3, dtype=torch.float32)),
        Case("W_h of the wrong width is an error", (s, H, W_s, W_h[:, :2], v), raises="ValueError"),
        Case("v of the wrong length is an error", (s, H, W_s, W_h, v[:2]), raises="ValueError"),
    ]


def _additive_is_per_position(fn):
    """The score of position j depends on h_j alone: moving the encoder states moves their scores."""
    g = gen(62)
    s, H, W_s, W_h, v = _additive_args(g, 2, 5, 3, 4, 3)
    perm = torch.tensor([3, 0, 4, 1, 2])
    out = learner_tensor(fn, (s, H, W_s, W_h, v), shape=(2, 5))
    moved = learner_tensor(fn, (s, H[:, perm], W_s, W_h, v), shape=(2, 5))
    if out is None or moved is None:
        return None
    if not torch.allclose(moved, out[:, perm], rtol=1e-9, atol=1e-12):
        return "moving the encoder states h_j to other positions changed their scores: e_j must read h_j only"
    return None


# ---------------------------------------------------------------- dot_score
def _dot_case(g, big):
    dtype = pick_dtype(g)
    B, T, Hd = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6), pick_int(g, 1, 8)
    H, _ = _states(g, B, T, Hd, dtype=dtype)
    return Case(f"B={B}, T_x={T}, H={Hd}, {dn(dtype)}", (torch.tanh(randn(g, B, Hd, dtype=dtype, scale=1.5)), H))


def _dot_edge():
    g = gen(63)
    H, _ = _states(g, 2, 4, 3)
    s = torch.tanh(randn(g, 2, 3))
    return [
        Case("T_x = 1", (s, H[:, :1])),
        Case("T_x = 0: no score", (s, H[:, :0])),
        Case("the state equal to h_2 scores |h_2|^2 there", (H[:, 1].clone(), H)),
        Case("a zero state scores 0 everywhere", (torch.zeros_like(s), H)),
        Case("float32, H = 1", (torch.tanh(randn(g, 3, 1, dtype=torch.float32)),
                                _states(g, 3, 5, 1, dtype=torch.float32)[0])),
        Case("widths that differ (H_d != H_e) are an error", (s[:, :2], H), raises="ValueError"),
        Case("batches that differ are an error", (s[:1], H), raises="ValueError"),
    ]


# ---------------------------------------------------------------- attend
def _attend_args(g, B, T, H_e, lengths=None, dtype=F64, scale=2.0, mask=True):
    H, m = _states(g, B, T, H_e, lengths, dtype)
    scores = randn(g, B, T, dtype=dtype, scale=scale)
    return (scores, H, m if mask else None)


def _attend_case(g, big):
    dtype = pick_dtype(g)
    B, T, H_e = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6), pick_int(g, 1, 7)
    lengths = _lengths(g, B, T, allow_empty=big)
    return Case(f"B={B}, T_x={T}, H_e={H_e}, source lengths {lengths}, {dn(dtype)}",
                _attend_args(g, B, T, H_e, lengths, dtype))


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
def _step_params(g, V, D, H_d, H_e, A, dtype=F64):
    def w(rows, cols, scale=1.0):
        return randn(g, rows, cols, dtype=dtype, scale=scale / math.sqrt(cols))
    return {"E_tgt": randn(g, V, D, dtype=dtype), "W_s": w(A, H_d), "W_h": w(A, H_e), "v": randn(g, A, dtype=dtype),
            "W_x": w(H_d, D), "W_c": w(H_d, H_e), "W_hh": w(H_d, H_d, 1.5), "b": randn(g, H_d, dtype=dtype, scale=0.3),
            "W_out": w(V, H_d + H_e, 2.0), "b_out": randn(g, V, dtype=dtype, scale=0.5)}


def _step_args(g, B, T, V, D, H_d, H_e, A, lengths=None, dtype=F64):
    H, mask = _states(g, B, T, H_e, lengths, dtype)
    prev = torch.randint(0, V, (B,), generator=g)
    return (prev, torch.tanh(randn(g, B, H_d, dtype=dtype, scale=1.5)), H, mask,
            _step_params(g, V, D, H_d, H_e, A, dtype))


def _step_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 9 if big else 6)
    V, D, H_d, H_e, A = pick_int(g, 3, 10), pick_int(g, 1, 5), pick_int(g, 1, 6), pick_int(g, 1, 6), pick_int(g, 1, 5)
    lengths = _lengths(g, B, T, allow_empty=False)
    return Case(f"B={B}, T_x={T}, lengths {lengths}, V={V}, D={D}, H_d={H_d}, H_e={H_e}, A={A}, {dn(dtype)}",
                _step_args(g, B, T, V, D, H_d, H_e, A, lengths, dtype))


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
    prev, s, H, mask, p = _step_args(g, 2, 4, 6, 3, 4, 4, 3)
    out = _logits(fn, (prev, s, H, mask, p))
    H2 = H.clone()
    H2[:, 2] = -H2[:, 2]
    out2 = _logits(fn, (prev, s, H2, mask, p))
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
                        "the tanh is missing: e_j = v . tanh(W_s s + W_h h_j)"),
                       ("rnn_attention:additive_score_sum_not_v",
                        "the hidden units were summed instead of weighted by v: e_j = v . tanh(...)"),
                       ("rnn_attention:additive_score_swapped_weights",
                        "W_s and W_h were swapped: W_s reads the decoder state, W_h the encoder states")]),
    Exercise("dot_score", "rnn_attention:dot_score", _dot_case, _dot_edge,
             mistakes=[("rnn_attention:dot_score_scaled",
                        "the scores were divided by sqrt(H): Luong's dot score is the plain dot product s . h_j"),
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
                        "the scores read the new state s_t; Bahdanau's read s_{t-1}, the state before the step"),
                       ("rnn_attention:step_output_ignores_context",
                        "the output layer read s_t alone: z_t = W_out [s_t ; c_t] + b_out"),
                       ("rnn_attention:step_update_ignores_context",
                        "the state update ignored the context: s_t = tanh(W_x x + W_c c_t + W_hh s_{t-1} + b)")],
             n_basic=6, n_hidden=12),
    question("answer_alignment_weights", "rnn_attention:answer_alignment_weights", Integer(), wrong=[
        ("rnn_attention:answer_alignment_weights_one_context", "one context is notebook 05's: here every output "
         "step weighs every source position, T_y x T_x weights"),
        ("rnn_attention:answer_alignment_weights_sum", "the weights of one step are T_x numbers, one per source "
         "position, for each of the T_y steps: a product, not a sum")]),
    question("answer_bottleneck", "rnn_attention:answer_bottleneck", Choice("a", "b", "c", "d"), wrong=[
        ("rnn_attention:answer_bottleneck_bigger_h", "a bigger H helps, but the decoder still reads one vector for "
         "the whole sentence; attention gives it every state"),
        ("rnn_attention:answer_bottleneck_faster", "attention adds work at every step (a score per source "
         "position); it is not faster"),
        ("rnn_attention:answer_bottleneck_no_encoder", "the encoder still runs: attention reads its states")]),
)
