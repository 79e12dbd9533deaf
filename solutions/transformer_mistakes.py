"""Deliberately wrong variants of the notebook 06-08 reference functions (encoder, decoder, encoder-decoder).

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


# --- split_heads / merge_heads -----------------------------------------------
def split_heads_no_transpose(x, n_heads):
    """The (B, T, H, d_k) layout read as (B, H, T, d_k): a plain reshape, no transpose."""
    B, T, D = x.shape
    return x.reshape(B, n_heads, T, D // n_heads)


def merge_heads_no_transpose(x):
    """(B, H, T, d_k) reshaped straight to (B, T, D), without moving the head axis back."""
    B, H, T, d_k = x.shape
    return x.reshape(B, T, H * d_k)


# --- multi_head_attention ----------------------------------------------------
def mha_no_output_projection(x_q, x_kv, params, n_heads, mask=None):
    return _mha(x_q, x_kv, params, n_heads, mask, project_out=False)


def mha_mask_ignored(x_q, x_kv, params, n_heads, mask=None):
    return _mha(x_q, x_kv, params, n_heads, None)


def mha_scaled_by_sqrt_D(x_q, x_kv, params, n_heads, mask=None):
    return _mha(x_q, x_kv, params, n_heads, mask, width=x_q.shape[-1])


def mha_kv_from_queries(x_q, x_kv, params, n_heads, mask=None):
    """Keys and values projected from x_q instead of x_kv."""
    return _mha(x_q, x_q, params, n_heads, mask)


# --- sinusoidal_positions ----------------------------------------------------
def _angles(T, D, base, device, two=2):
    p = torch.arange(T, dtype=torch.float64, device=device)[:, None]
    i = torch.arange((D + 1) // 2, dtype=torch.float64, device=device)
    return p / base ** (two * i / D)  # (T, ceil(D/2))


def sinusoidal_freq_i_over_D(T, D, base=10000.0, dtype=torch.float32, device=None):
    """Pair i uses base^(i / D) instead of base^(2i / D)."""
    angle = _angles(T, D, base, device, two=1)
    pe = torch.zeros(T, D, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : D // 2])
    return pe.to(dtype)


def sinusoidal_halves(T, D, base=10000.0, dtype=torch.float32, device=None):
    """All the sines in the first half of the columns, all the cosines in the second."""
    angle = _angles(T, D, base, device)
    return torch.cat([torch.sin(angle), torch.cos(angle[:, : D // 2])], dim=1).to(dtype)


def sinusoidal_sin_cos_swapped(T, D, base=10000.0, dtype=torch.float32, device=None):
    """Cosines in the even columns, sines in the odd ones."""
    angle = _angles(T, D, base, device)
    pe = torch.zeros(T, D, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.cos(angle)
    pe[:, 1::2] = torch.sin(angle[:, : D // 2])
    return pe.to(dtype)


# --- embed_with_positions ----------------------------------------------------
def embed_positions_added_twice(ids, E, P):
    T = ids.shape[1]
    return E[ids] + P[:T] + P[:T]


def embed_positions_by_token_id(ids, E, P):
    """The positional table indexed by the token ids, P[ids], instead of by the position t."""
    return E[ids] + P[ids]


# --- encoder_block -----------------------------------------------------------
def _encoder_block(x, valid, params, n_heads, attn_residual=True, ffn_residual=True, pre_norm=False,
                   use_padding=True, causal=False):
    T = x.shape[1]
    mask = valid[:, None, :] if (valid is not None and use_padding) else None
    if causal:
        mask = _causal(T, T, x.device) if mask is None else _causal(T, T, x.device) & mask
    if pre_norm:
        h = x + _mha(_ln(x, params["ln1"]), _ln(x, params["ln1"]), params["attn"], n_heads, mask)[0]
        return h + _ffn(_ln(h, params["ln2"]), params["ffn"])
    a = _mha(x, x, params["attn"], n_heads, mask)[0]
    h = _ln(x + a if attn_residual else a, params["ln1"])
    ff = _ffn(h, params["ffn"])
    return _ln(h + ff if ffn_residual else ff, params["ln2"])


def encoder_block_no_attn_residual(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, attn_residual=False)


def encoder_block_no_ffn_residual(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, ffn_residual=False)


def encoder_block_pre_norm(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, pre_norm=True)


def encoder_block_padding_ignored(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, use_padding=False)


def encoder_block_causal(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, causal=True)


# --- masked_lm_loss ----------------------------------------------------------
def _token_nll(logits, targets):
    logp = torch.log_softmax(logits, dim=-1)
    return -logp.gather(-1, targets.clamp_min(0)[..., None])[..., 0]  # (B, T)


def masked_lm_loss_mean_over_all(logits, targets, is_masked):
    """Cross-entropy averaged over every position, masked or not."""
    return _token_nll(logits, targets).mean()


def masked_lm_loss_sum(logits, targets, is_masked):
    nll = _token_nll(logits, targets)
    return torch.where(is_masked, nll, torch.zeros_like(nll)).sum()


def masked_lm_loss_divided_by_all(logits, targets, is_masked):
    """The masked positions' losses summed, then divided by B * T."""
    nll = _token_nll(logits, targets)
    return torch.where(is_masked, nll, torch.zeros_like(nll)).sum() / max(1, nll.numel())


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
