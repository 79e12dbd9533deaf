"""Known mistakes of notebook 07 (the decoder): wrong variants of ``solutions/decoder.py``.

The checks run them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is built from torch and the private parts
in ``_parts.py`` only, so it can also be compiled as learner code in the tests. Each keeps the signature of the reference it imitates.
"""

import torch

from ._parts import attend_heads, causal_mask, feed_forward, head_mask, layer_norm, merge_heads, mha, split_heads


def _rope(x, positions=None, base=10000.0, freq_exponent=2, sign=1.0, halves=False):
    T, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    i = torch.arange(d // 2, dtype=torch.float64, device=x.device)
    omega = base ** (-freq_exponent * i / d)
    angle = positions.to(torch.float64)[:, None] * omega  # (T, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), sign * torch.sin(angle).to(x.dtype)
    if halves:
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


# --- rope --------------------------------------------------------------------
def rope_float32_angles(x, positions=None, base=10000.0):
    """The frequencies and angles computed in float32, not float64."""
    T, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)
    angle = positions.to(device=x.device, dtype=torch.float32)[:, None] * omega
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def rope_wrong_frequencies(x, positions=None, base=10000.0):
    """omega_i = base^(-i / d) instead of base^(-2i / d)."""
    return _rope(x, positions, base, freq_exponent=1)


def rope_rotates_backwards(x, positions=None, base=10000.0):
    """The sine's sign flipped: rotation by -p omega_i."""
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
        q, k, v = split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads)
    else:
        q, k, v = split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads)
        q = _rope(q) if rot_q else q
        k = _rope(k) if rot_k else k
        v = _rope(v) if rot_v else v
    out, weights = attend_heads(q, k, v, head_mask(mask))
    return merge_heads(out) @ params["W_o"].T + params["b_o"], weights


def rope_attention_values_rotated(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, rot_v=True)


def rope_attention_queries_only(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, rot_k=False)


def rope_attention_before_split(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, before_split=True)


def rope_attention_without_rope(x, params, n_heads, mask=None):
    return _rope_attention(x, params, n_heads, mask, rot_q=False, rot_k=False)


def rope_attention_mask_reversed(x, params, n_heads, mask=None):
    """nn.MultiheadAttention's polarity: the mask's True taken for "blocked" (``~mask`` passed on)."""
    return _rope_attention(x, params, n_heads, None if mask is None else ~mask)


# --- decoder_block -----------------------------------------------------------
def _decoder_block(x, valid, params, n_heads, causal="tril", use_padding=True, attn_residual=True,
                   ffn_residual=True, pad_over_queries=False):
    T = x.shape[1]
    mask = None
    if causal == "tril":
        mask = causal_mask(T, T, x.device)
    elif causal == "triu":
        mask = causal_mask(T, T, x.device).T
    elif causal == "reversed":  # ~tril, triu(1): True on the blocked pairs
        mask = ~causal_mask(T, T, x.device)
    elif causal == "strict":  # tril(-1): the diagonal blocked too
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril(-1)
    elif causal == "shifted":  # tril(1): each token also reads the next
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril(1)
    if valid is not None and use_padding:
        pad = valid[:, :, None] if pad_over_queries else valid[:, None, :]
        mask = pad if mask is None else mask & pad
    a = mha(x, x, params["attn"], n_heads, mask)[0]
    h = layer_norm(x + a if attn_residual else a, params["ln1"])
    ff = feed_forward(h, params["ffn"])
    return layer_norm(h + ff if ffn_residual else ff, params["ln2"])


def decoder_block_padding_reversed(x, valid, params, n_heads):
    """causal & ~valid[:, None, :]: the padding mask's polarity reversed."""
    return _decoder_block(x, None if valid is None else ~valid, params, n_heads)


def decoder_block_no_causal_mask(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal=None)


def decoder_block_causal_transposed(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal="triu")


def decoder_block_causal_reversed(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal="reversed")


def decoder_block_causal_strict(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal="strict")


def decoder_block_causal_shifted(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, causal="shifted")


def decoder_block_padding_over_queries(x, valid, params, n_heads):
    """causal & valid[:, :, None]: the padding blocks the pad positions' queries instead of the pad keys."""
    return _decoder_block(x, valid, params, n_heads, pad_over_queries=True)


def decoder_block_padding_ignored(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, use_padding=False)


def decoder_block_no_attn_residual(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, attn_residual=False)


def decoder_block_no_ffn_residual(x, valid, params, n_heads):
    return _decoder_block(x, valid, params, n_heads, ffn_residual=False)


# --- lm_log_prob -------------------------------------------------------------
def _picked(logits, ids, valid, shift=True, use_valid=True, axis=-1, index_padding=False):
    if valid is None or not use_valid:
        valid = torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
    if shift:
        logits, ids, valid = logits[:, :-1], ids[:, 1:], valid[:, 1:]
    logp = torch.log_softmax(logits, dim=axis)
    index = ids if index_padding else torch.where(valid, ids, torch.zeros_like(ids))
    picked = logp.gather(-1, index[..., None])[..., 0]
    return torch.where(valid, picked, torch.zeros_like(picked)), valid


def lm_log_prob_not_shifted(logits, ids, valid=None):
    """logits[:, t] scored against ids[:, t] (the token it has just read) instead of ids[:, t + 1]."""
    picked, _ = _picked(logits, ids, valid, shift=False)
    return picked.sum(dim=-1)


def lm_log_prob_softmax_over_positions(logits, ids, valid=None):
    """log_softmax over the positions (dim=1) instead of the vocabulary."""
    picked, _ = _picked(logits, ids, valid, axis=1)
    return picked.sum(dim=-1)


def lm_log_prob_counts_padding(logits, ids, valid=None):
    picked, _ = _picked(logits, ids, valid, use_valid=False)
    return picked.sum(dim=-1)


def lm_log_prob_gathers_padding(logits, ids, valid=None):
    """The padding kept out of the sum, but its ids still used to index: an id outside [0, V) raises."""
    picked, _ = _picked(logits, ids, valid, index_padding=True)
    return picked.sum(dim=-1)


def lm_log_prob_mean(logits, ids, valid=None):
    picked, real = _picked(logits, ids, valid)
    return picked.sum(dim=-1) / real.sum(dim=-1).clamp_min(1)


# --- top_k_filter ------------------------------------------------------------
def _keep(logits, keep):
    return logits.masked_fill(~keep, float("-inf"))


def top_k_filter_unchanged(logits, k):
    """The mask computed and never applied (``logits.masked_fill(...)`` not kept): every logit as it was."""
    return logits.clone()


def top_p_filter_unchanged(logits, p):
    return logits.clone()


def top_k_filter_keeps_smallest(logits, k):
    """The k smallest logits kept instead of the k largest."""
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = (-logits).topk(k, dim=-1).values[..., -1:]
    return _keep(logits, -logits >= kth)


def top_k_filter_zero_not_inf(logits, k):
    """The removed logits set to 0, which leaves them a probability, instead of -inf."""
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, 0.0)


def top_k_filter_large_negative(logits, k):
    """The removed logits set to -1e9, a finite number, instead of -inf."""
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, -1e9)


def top_k_filter_one_too_many(logits, k):
    """k + 1 tokens kept (the (k+1)-th largest as the threshold)."""
    if k + 1 >= logits.shape[-1]:
        return logits.clone()
    kth = logits.topk(k + 1, dim=-1).values[..., -1:]
    return _keep(logits, logits >= kth)


def top_k_filter_drops_ties(logits, k):
    """Exactly the k indices torch.topk returns kept: a tie at the k-th place loses some of its tokens."""
    if k >= logits.shape[-1]:
        return logits.clone()
    idx = logits.topk(k, dim=-1).indices
    keep = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device).scatter(-1, idx, True)
    return _keep(logits, keep)


# --- top_p_filter ------------------------------------------------------------
def _nucleus(logits, p, descending=True, crossing=True, sort=True, scatter=True):
    probs = torch.softmax(logits, dim=-1)
    if sort:
        sorted_probs, order = probs.sort(dim=-1, descending=descending, stable=True)
    else:
        sorted_probs, order = probs, torch.arange(probs.shape[-1], device=probs.device).expand(probs.shape)
    cum = sorted_probs.cumsum(dim=-1)
    keep_sorted = (cum - sorted_probs < p) if crossing else (cum < p)
    if scatter == "gather":  # the permutation applied the wrong way round
        keep = keep_sorted.gather(-1, order)
    else:
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted) if scatter else keep_sorted
    return _keep(logits, keep)


def top_p_filter_drops_the_crossing_token(logits, p):
    """Tokens kept while the running mass is below p: the token that reaches p is dropped (the kept mass
    stays under p, and a row whose top token has more than p keeps nothing)."""
    if p == 1:
        return logits.clone()
    return _nucleus(logits, p, crossing=False)


def top_p_filter_unsorted(logits, p):
    """The running mass taken in token order, without sorting by probability first."""
    if p == 1:
        return logits.clone()
    return _nucleus(logits, p, sort=False)


def top_p_filter_not_scattered_back(logits, p):
    """Sorted, but the kept set applied in sorted order to the tokens in their own order: the first n tokens are
    kept, n the size of the nucleus, instead of the n most probable."""
    if p == 1:
        return logits.clone()
    return _nucleus(logits, p, scatter=False)


def top_p_filter_gathered_back(logits, p):
    """Sorted, and the kept set mapped back with gather(-1, order), the permutation the wrong way round: token j
    gets the verdict of rank order[j], not of its own rank."""
    if p == 1:
        return logits.clone()
    return _nucleus(logits, p, scatter="gather")


def top_p_filter_least_probable_first(logits, p):
    """Sorted from the least probable up (ascending) instead of from the most probable down."""
    if p == 1:
        return logits.clone()
    return _nucleus(logits, p, descending=False)


# --- sample_next -------------------------------------------------------------
def _filtered(z, top_k, top_p):
    if top_k is not None and top_k < z.shape[-1]:
        z = z.masked_fill(z < z.topk(top_k, dim=-1).values[..., -1:], float("-inf"))
    if top_p is not None and top_p < 1:
        z = _nucleus(z, top_p)
    return z


def _draw(z, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.multinomial(torch.softmax(z, dim=-1), 1, generator=g)[:, 0]


def sample_next_multiplies_temperature(logits, seed, temperature=1.0, top_k=None, top_p=None):
    """logits * temperature instead of logits / temperature."""
    return _draw(_filtered(logits * temperature, top_k, top_p), seed, logits.device)


def sample_next_ignores_temperature(logits, seed, temperature=1.0, top_k=None, top_p=None):
    """The temperature left out: the logits filtered and drawn as they came."""
    return _draw(_filtered(logits, top_k, top_p), seed, logits.device)


def sample_next_greedy(logits, seed, temperature=1.0, top_k=None, top_p=None):
    """The argmax: greedy decoding, no draw."""
    return _filtered(logits / temperature, top_k, top_p).argmax(dim=-1)


def sample_next_temperature_after_the_filters(logits, seed, temperature=1.0, top_k=None, top_p=None):
    """The nucleus chosen on softmax(logits), before the temperature reshaped the distribution."""
    return _draw(_filtered(logits, top_k, top_p) / temperature, seed, logits.device)


def sample_next_top_p_before_top_k(logits, seed, temperature=1.0, top_k=None, top_p=None):
    """top-p applied before top-k: the nucleus is then measured on a distribution top-k has not cut yet."""
    z = logits / temperature
    z = _filtered(z, None, top_p)
    return _draw(_filtered(z, top_k, None), seed, logits.device)


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_encoder_to_decoder_layers():
    return "a"


def answer_encoder_to_decoder_positions():
    return "b"


def answer_encoder_to_decoder_cross():
    return "c"


def answer_next_token_targets_every_position():
    return 12


def answer_next_token_targets_one():
    return 1


def answer_nucleus_crossing_dropped():
    return (0, 1)


def answer_nucleus_all():
    return (0, 1, 2, 3)
