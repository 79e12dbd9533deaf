"""Known mistakes of notebook 05b (attention in the RNN encoder-decoder): wrong variants of
``solutions/rnn_attention.py``, self-contained (torch only)."""
import math

import torch


def _scores(h_prev, states, W_q, W_k, u):
    return torch.tanh((h_prev @ W_q.T)[:, None, :] + states @ W_k.T) @ u


def _attend(scores, states, src_mask):
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return (alpha[:, :, None] * states).sum(dim=1), alpha


def additive_score_no_tanh(h_prev, states, W_q, W_k, u):
    return ((h_prev @ W_q.T)[:, None, :] + states @ W_k.T) @ u


def additive_score_sum_not_v(h_prev, states, W_q, W_k, u):
    return torch.tanh((h_prev @ W_q.T)[:, None, :] + states @ W_k.T).sum(-1)


def additive_score_no_new_axis(h_prev, states, W_q, W_k, u):
    """W_q h (B, d_a) added to W_k h_j (B, T_x, d_a) without query[:, None, :]: PyTorch lines (B, d_a) up with
    (T_x, d_a), which raises unless B = T_x (or B = 1) and then adds sentence j's query at position j."""
    return torch.tanh(h_prev @ W_q.T + states @ W_k.T) @ u


def additive_score_swapped_weights(h_prev, states, W_q, W_k, u):
    if W_q.shape[1] != states.shape[2] or W_k.shape[1] != h_prev.shape[1]:
        raise ValueError("shapes")
    return torch.tanh((h_prev @ W_k.T)[:, None, :] + states @ W_q.T) @ u


def dot_score_scaled(h_dec, states):
    return (states @ h_dec[:, :, None])[:, :, 0] / math.sqrt(h_dec.shape[-1])


def dot_score_over_the_batch(h_dec, states):
    return (states @ h_dec.flip(0)[:, :, None])[:, :, 0]


def attend_padding_not_masked(scores, states, src_mask=None):
    return _attend(scores, states, None)


def attend_softmax_over_the_batch(scores, states, src_mask=None):
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))
    alpha = torch.softmax(scores, dim=0).nan_to_num(0.0)
    return (alpha[:, :, None] * states).sum(dim=1), alpha


def attend_sum_not_average(scores, states, src_mask=None):
    _, alpha = _attend(scores, states, src_mask)
    mask = torch.ones_like(scores, dtype=torch.bool) if src_mask is None else src_mask
    return (states * mask[:, :, None]).sum(dim=1), alpha


def attend_nan_when_empty(scores, states, src_mask=None):
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))
    alpha = torch.softmax(scores, dim=-1)
    return (alpha[:, :, None] * states).sum(dim=1), alpha


def step_scores_the_new_state(prev_ids, h_prev, states, src_mask, params):
    p = params
    x = p["E_tgt"][prev_ids]
    h = torch.tanh(x @ p["W_x"].T + h_prev @ p["W_h"].T + p["b"])
    context, alpha = _attend(_scores(h, states, p["W_q"], p["W_k"], p["u"]), states, src_mask)
    h = torch.tanh(x @ p["W_x"].T + context @ p["W_c"].T + h_prev @ p["W_h"].T + p["b"])
    return torch.cat([h, context], dim=-1) @ p["W_out"].T + p["b_out"], h, alpha


def step_output_ignores_context(prev_ids, h_prev, states, src_mask, params):
    p = params
    context, alpha = _attend(_scores(h_prev, states, p["W_q"], p["W_k"], p["u"]), states, src_mask)
    h = torch.tanh(p["E_tgt"][prev_ids] @ p["W_x"].T + context @ p["W_c"].T + h_prev @ p["W_h"].T + p["b"])
    return torch.cat([h, torch.zeros_like(context)], dim=-1) @ p["W_out"].T + p["b_out"], h, alpha


def step_update_ignores_context(prev_ids, h_prev, states, src_mask, params):
    p = params
    context, alpha = _attend(_scores(h_prev, states, p["W_q"], p["W_k"], p["u"]), states, src_mask)
    h = torch.tanh(p["E_tgt"][prev_ids] @ p["W_x"].T + h_prev @ p["W_h"].T + p["b"])
    return torch.cat([h, context], dim=-1) @ p["W_out"].T + p["b_out"], h, alpha


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


def answer_alignment_weights_source_squared():
    return 100


def answer_alignment_weights_target_squared():
    return 121
