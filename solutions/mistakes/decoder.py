"""Known mistakes of notebook 07 (the decoder): wrong variants of ``solutions/decoder.py``.

The grader runs them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is self-contained (torch only,
plus the private helpers below), so it can also be compiled as learner code in
the tests. Each keeps the signature of the reference it imitates.
"""
import math

import torch
import torch.nn.functional as F

_EPS = 1e-5


# --- private helpers (correct unless an argument says otherwise) -------------
def _split(x, n_heads):
    B, T, D = x.shape
    return x.reshape(B, T, n_heads, D // n_heads).transpose(1, 2)  # (B, H, T, d_k)


def _merge(x):
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, D)


def _attend(q, k, v, mask=None, width=None):
    """softmax(q k^T / sqrt(width) + M) v; a row with no allowed key gets zero weights."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1] if width is None else width)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return weights @ v, weights


def _head_mask(mask):
    if mask is None:
        return None
    return mask.reshape((1,) * (3 - mask.dim()) + tuple(mask.shape))[:, None]  # (B or 1, 1, T_q, T_k)


def _mha(x_q, x_kv, p, n_heads, mask=None, width=None, project_out=True):
    q = _split(x_q @ p["W_q"].T + p["b_q"], n_heads)
    k = _split(x_kv @ p["W_k"].T + p["b_k"], n_heads)
    v = _split(x_kv @ p["W_v"].T + p["b_v"], n_heads)
    out, weights = _attend(q, k, v, _head_mask(mask), width)
    out = _merge(out)
    return (out @ p["W_o"].T + p["b_o"] if project_out else out), weights


def _ln(x, ln):
    return F.layer_norm(x, x.shape[-1:], ln["weight"], ln["bias"], _EPS)


def _ffn(h, f):
    return torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]


def _causal(T_q, T_k, device):
    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril()


def _rope(x, positions=None, base=10000.0, freq_exponent=2, sign=1.0, halves=False):
    T, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    i = torch.arange(d // 2, dtype=torch.float64, device=x.device)
    theta = base ** (-freq_exponent * i / d)
    angle = positions.to(torch.float64)[:, None] * theta  # (T, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), sign * torch.sin(angle).to(x.dtype)
    if halves:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


# --- rope --------------------------------------------------------------------
def rope_wrong_frequencies(x, positions=None, base=10000.0):
    """theta_i = base^(-i / d) instead of base^(-2i / d)."""
    return _rope(x, positions, base, freq_exponent=1)


def rope_rotates_backwards(x, positions=None, base=10000.0):
    """The sine's sign flipped: rotation by -p theta_i."""
    return _rope(x, positions, base, sign=-1.0)


def rope_pairs_halves(x, positions=None, base=10000.0):
    """Column i rotated with column i + d/2 (the two halves) instead of with its neighbour."""
    return _rope(x, positions, base, halves=True)


# --- rope_attention ----------------------------------------------------------
def _rope_attention(x, params, n_heads, mask=None, rot_q=True, rot_k=True, rot_v=False, before_split=False):
    q = x @ params["W_q"].T + params["b_q"]
    k = x @ params["W_k"].T + params["b_k"]
    v = x @ params["W_v"].T + params["b_v"]
    if before_split:
        q, k = _rope(q), _rope(k)  # over the whole width D
        q, k, v = _split(q, n_heads), _split(k, n_heads), _split(v, n_heads)
    else:
        q, k, v = _split(q, n_heads), _split(k, n_heads), _split(v, n_heads)
        q = _rope(q) if rot_q else q
        k = _rope(k) if rot_k else k
        v = _rope(v) if rot_v else v
    out, weights = _attend(q, k, v, _head_mask(mask))
    return _merge(out) @ params["W_o"].T + params["b_o"], weights


def rope_attention_values_rotated(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, rot_v=True)


def rope_attention_queries_only(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, rot_k=False)


def rope_attention_before_split(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, before_split=True)


def rope_attention_without_rope(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, rot_q=False, rot_k=False)


# --- decoder_block -----------------------------------------------------------
def _decoder_block(x, valid, params, n_heads, causal="tril", use_padding=True, attn_residual=True,
                   ffn_residual=True):
    T = x.shape[1]
    mask = None
    if causal == "tril":
        mask = _causal(T, T, x.device)
    elif causal == "triu":
        mask = _causal(T, T, x.device).T
    if valid is not None and use_padding:
        mask = valid[:, None, :] if mask is None else mask & valid[:, None, :]
    a = _mha(x, x, params["attn"], n_heads, mask)[0]
    h = _ln(x + a if attn_residual else a, params["ln1"])
    ff = _ffn(h, params["ffn"])
    return _ln(h + ff if ffn_residual else ff, params["ln2"])


def decoder_block_no_causal_mask(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal=None)


def decoder_block_causal_transposed(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal="triu")


def decoder_block_padding_ignored(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, use_padding=False)


def decoder_block_no_attn_residual(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, attn_residual=False)


def decoder_block_no_ffn_residual(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, ffn_residual=False)


# --- lm_log_prob -------------------------------------------------------------
def _picked(logits, ids, valid, shift=True, use_valid=True):
    if valid is None or not use_valid:
        valid = torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
    if shift:
        logits, ids, valid = logits[:, :-1], ids[:, 1:], valid[:, 1:]
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, torch.where(valid, ids, torch.zeros_like(ids))[..., None])[..., 0]
    return torch.where(valid, picked, torch.zeros_like(picked)), valid


def lm_log_prob_not_shifted(logits, ids, valid=None):
    """logits[:, t] scored against ids[:, t] (the token it has just read) instead of ids[:, t + 1]."""
    picked, _ = _picked(logits, ids, valid, shift=False)
    return picked.sum(dim=-1)


def lm_log_prob_counts_padding(logits, ids, valid=None):
    picked, _ = _picked(logits, ids, valid, use_valid=False)
    return picked.sum(dim=-1)


def lm_log_prob_mean(logits, ids, valid=None):
    picked, real = _picked(logits, ids, valid)
    return picked.sum(dim=-1) / real.sum(dim=-1).clamp_min(1)
