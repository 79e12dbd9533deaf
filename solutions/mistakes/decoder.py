"""Known mistakes of notebook 07 (the decoder): wrong variants of ``solutions/decoder.py``.

The grader runs them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is built from torch and the private parts
in ``_parts.py`` only, so it can also be compiled as learner code in the tests. Each keeps the signature of the reference it imitates.
"""

import torch

from ._parts import _attend, _causal, _ffn, _head_mask, _ln, _merge, _mha, _split


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
