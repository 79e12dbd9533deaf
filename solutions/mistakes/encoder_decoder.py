"""Known mistakes of notebook 08 (the encoder-decoder): wrong variants of ``solutions/encoder_decoder.py``.

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


# --- cross_attention ---------------------------------------------------------
def _src_mask(src_valid):
    return None if src_valid is None else src_valid[:, None, :]


def cross_attention_kv_from_decoder(y, memory, src_valid, params, n_heads):
    """Self-attention on y: keys and values from the decoder instead of the encoder's memory."""
    return _mha(y, y, params, n_heads, _src_mask(src_valid))


def cross_attention_causal(y, memory, src_valid, params, n_heads):
    """A causal (T_y, T_x) mask added to cross-attention."""
    mask = _causal(y.shape[1], memory.shape[1], y.device)
    if src_valid is not None:
        mask = mask & src_valid[:, None, :]
    return _mha(y, memory, params, n_heads, mask)


def cross_attention_padding_ignored(y, memory, src_valid, params, n_heads):
    return _mha(y, memory, params, n_heads, None)


# --- encdec_decoder_block ----------------------------------------------------
def _self_mask(y, tgt_valid, causal=True):
    T = y.shape[1]
    mask = _causal(T, T, y.device) if causal else None
    if tgt_valid is not None:
        mask = tgt_valid[:, None, :] if mask is None else mask & tgt_valid[:, None, :]
    return mask


def _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_first=False, kv_from_decoder=False,
                  causal_cross=False, causal_self=True, cross_residual=True):
    cross_mask = _src_mask(src_valid)
    if causal_cross:
        c = _causal(y.shape[1], memory.shape[1], y.device)
        cross_mask = c if cross_mask is None else c & cross_mask

    def self_sub(h, ln):
        return _ln(h + _mha(h, h, params["self_attn"], n_heads, _self_mask(h, tgt_valid, causal_self))[0], ln)

    def cross_sub(h, ln):
        source = h if kv_from_decoder else memory
        c, w = _mha(h, source, params["cross_attn"], n_heads, cross_mask)
        return _ln(h + c if cross_residual else c, ln), w

    if cross_first:
        h1, w = cross_sub(y, params["ln1"])
        h2 = self_sub(h1, params["ln2"])
    else:
        h1 = self_sub(y, params["ln1"])
        h2, w = cross_sub(h1, params["ln2"])
    return _ln(h2 + _ffn(h2, params["ffn"]), params["ln3"]), w


def encdec_cross_before_self(y, memory, tgt_valid, src_valid, params, n_heads):
    """Cross-attention first (with ln1), then self-attention (with ln2), then the FFN."""
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_first=True)


def encdec_kv_from_decoder(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, kv_from_decoder=True)


def encdec_causal_cross(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, causal_cross=True)


def encdec_no_causal_self(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, causal_self=False)


def encdec_no_cross_residual(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_residual=False)
