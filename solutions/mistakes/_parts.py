"""Private parts the known mistakes of notebooks 06-09 are built from: correct unless an argument says otherwise.

``tests/helpers.py`` compiles this module and then a mistakes module as learner
code (the checks must not take them for the reference), so the modules import
nothing else of the course.
"""
import math

import torch
import torch.nn.functional as F

_EPS = 1e-5


def split_heads(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_k)


def merge_heads(x):
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, D)


def attend_heads(q, k, v, mask=None, width=None):
    """softmax(q k^T / sqrt(width) + M) v; a row with no allowed key gets zero weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1] if width is None else width)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


def head_mask(mask):
    if mask is None:
        return None
    return mask.reshape((1,) * (3 - mask.dim()) + tuple(mask.shape))[:, None]  # (B or 1, 1, T_q, T_k)


def mha(x_q, x_kv, p, n_heads, mask=None, width=None, project_out=True, out_bias=True):
    q = split_heads(x_q @ p["W_q"].T + p["b_q"], n_heads)
    k = split_heads(x_kv @ p["W_k"].T + p["b_k"], n_heads)
    v = split_heads(x_kv @ p["W_v"].T + p["b_v"], n_heads)
    out, weights = attend_heads(q, k, v, head_mask(mask), width)
    out = merge_heads(out)
    if not project_out:
        return out, weights
    return (out @ p["W_o"].T + p["b_o"] if out_bias else out @ p["W_o"].T), weights


def layer_norm(x, ln):
    return F.layer_norm(x, x.shape[-1:], ln["weight"], ln["bias"], _EPS)


def feed_forward(h, f):
    return torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]


def causal_mask(T_q, T_k, device):
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril()
