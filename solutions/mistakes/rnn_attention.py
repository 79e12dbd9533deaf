"""Known mistakes of notebook 05b (attention in the RNN encoder-decoder): wrong variants of
``solutions/rnn_attention.py``, self-contained (torch only)."""
import math

import torch


def _scores(s_prev, H, W_s, W_h, v):
    return torch.tanh((s_prev @ W_s.T)[:, None, :] + H @ W_h.T) @ v


def _attend(scores, H, src_mask):
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return (alpha[:, :, None] * H).sum(dim=1), alpha


def additive_score_no_tanh(s_prev, H, W_s, W_h, v):
    return ((s_prev @ W_s.T)[:, None, :] + H @ W_h.T) @ v


def additive_score_sum_not_v(s_prev, H, W_s, W_h, v):
    return torch.tanh((s_prev @ W_s.T)[:, None, :] + H @ W_h.T).sum(-1)


def additive_score_swapped_weights(s_prev, H, W_s, W_h, v):
    if W_s.shape[1] != H.shape[2] or W_h.shape[1] != s_prev.shape[1]:
        raise ValueError("shapes")
    return torch.tanh((s_prev @ W_h.T)[:, None, :] + H @ W_s.T) @ v


def dot_score_scaled(s, H):
    return (H @ s[:, :, None])[:, :, 0] / math.sqrt(s.shape[-1])


def dot_score_over_the_batch(s, H):
    return (H @ s.flip(0)[:, :, None])[:, :, 0]


def attend_padding_not_masked(scores, H, src_mask=None):
    return _attend(scores, H, None)


def attend_softmax_over_the_batch(scores, H, src_mask=None):
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))
    alpha = torch.softmax(scores, dim=0).nan_to_num(0.0)
    return (alpha[:, :, None] * H).sum(dim=1), alpha


def attend_sum_not_average(scores, H, src_mask=None):
    _, alpha = _attend(scores, H, src_mask)
    mask = torch.ones_like(scores, dtype=torch.bool) if src_mask is None else src_mask
    return (H * mask[:, :, None]).sum(dim=1), alpha


def attend_nan_when_empty(scores, H, src_mask=None):
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    return (alpha[:, :, None] * H).sum(dim=1), alpha


def step_scores_the_new_state(prev_ids, s_prev, H, src_mask, params):
    p = params
    x = p["E_tgt"][prev_ids]
    s = torch.tanh(x @ p["W_x"].T + s_prev @ p["W_hh"].T + p["b"])
    context, alpha = _attend(_scores(s, H, p["W_s"], p["W_h"], p["v"]), H, src_mask)
    s = torch.tanh(x @ p["W_x"].T + context @ p["W_c"].T + s_prev @ p["W_hh"].T + p["b"])
    return torch.cat([s, context], dim=-1) @ p["W_out"].T + p["b_out"], s, alpha


def step_output_ignores_context(prev_ids, s_prev, H, src_mask, params):
    p = params
    context, alpha = _attend(_scores(s_prev, H, p["W_s"], p["W_h"], p["v"]), H, src_mask)
    s = torch.tanh(p["E_tgt"][prev_ids] @ p["W_x"].T + context @ p["W_c"].T + s_prev @ p["W_hh"].T + p["b"])
    return torch.cat([s, torch.zeros_like(context)], dim=-1) @ p["W_out"].T + p["b_out"], s, alpha


def step_update_ignores_context(prev_ids, s_prev, H, src_mask, params):
    p = params
    context, alpha = _attend(_scores(s_prev, H, p["W_s"], p["W_h"], p["v"]), H, src_mask)
    s = torch.tanh(p["E_tgt"][prev_ids] @ p["W_x"].T + s_prev @ p["W_hh"].T + p["b"])
    return torch.cat([s, context], dim=-1) @ p["W_out"].T + p["b_out"], s, alpha


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_alignment_weights_one_context():
    return 1


def answer_alignment_weights_sum():
    return 21


def answer_bottleneck_bigger_h():
    return "a"


def answer_bottleneck_faster():
    return "c"


def answer_bottleneck_no_encoder():
    return "d"
