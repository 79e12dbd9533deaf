"""Known mistakes of notebook 06 (the encoder): wrong variants of ``solutions/encoder.py``.

The checks run them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is built from torch and the private parts
in ``_parts.py`` only, so it can also be compiled as learner code in the tests. Each keeps the signature of the reference it imitates.
"""

import torch

from ._parts import attend_heads, causal_mask, feed_forward, layer_norm, merge_heads, mha, split_heads


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
    return mha(x_q, x_kv, params, n_heads, mask, project_out=False)


def mha_no_output_bias(x_q, x_kv, params, n_heads, mask=None):
    """The output projection without its bias b_o."""
    return mha(x_q, x_kv, params, n_heads, mask, out_bias=False)


def mha_mask_ignored(x_q, x_kv, params, n_heads, mask=None):
    return mha(x_q, x_kv, params, n_heads, None)


def mha_scaled_by_sqrt_D(x_q, x_kv, params, n_heads, mask=None):
    return mha(x_q, x_kv, params, n_heads, mask, width=x_q.shape[-1])


def mha_kv_from_queries(x_q, x_kv, params, n_heads, mask=None):
    """Keys and values projected from x_q instead of x_kv."""
    return mha(x_q, x_q, params, n_heads, mask)


def mha_mask_reversed(x_q, x_kv, params, n_heads, mask=None):
    """nn.MultiheadAttention's polarity: the mask's True taken for "blocked" (``~mask`` passed on)."""
    return mha(x_q, x_kv, params, n_heads, None if mask is None else ~mask)


def mha_2d_mask_head_axis_in_the_middle(x_q, x_kv, params, n_heads, mask=None):
    """mask[:, None] whatever the mask: right for (B, T_q, T_k), but a (T_q, T_k) mask becomes (T_q, 1, T_k), whose
    first axis lines up with the heads."""
    return mha_mask_without_head_axis(x_q, x_kv, params, n_heads, None if mask is None else mask[:, None])


def mha_mask_without_head_axis(x_q, x_kv, params, n_heads, mask=None):
    """A (B, T_q, T_k) or (B, 1, T_k) mask passed to attention as it came: against scores (B, H, T_q, T_k) its
    batch axis lines up with the heads (it broadcasts only when B is 1 or H; it raises otherwise)."""
    q = split_heads(x_q @ params["W_q"].T + params["b_q"], n_heads)
    k = split_heads(x_kv @ params["W_k"].T + params["b_k"], n_heads)
    v = split_heads(x_kv @ params["W_v"].T + params["b_v"], n_heads)
    out, weights = attend_heads(q, k, v, mask)
    if weights.shape != q.shape[:-1] + k.shape[-2:-1]:
        raise ValueError("the mask enlarged the scores")
    return merge_heads(out) @ params["W_o"].T + params["b_o"], weights


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


def sinusoidal_float32_angles(T, D, base=10000.0, dtype=torch.float32, device=None):
    """The positions and angles computed in float32 (torch.arange's default for a float range), not float64."""
    p = torch.arange(T, dtype=torch.float32, device=device)[:, None]
    two_c = torch.arange(0, D, 2, dtype=torch.float32, device=device)
    angle = p / base ** (two_c / D)
    pe = torch.zeros(T, D, dtype=torch.float32, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : D // 2])
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
        mask = causal_mask(T, T, x.device) if mask is None else causal_mask(T, T, x.device) & mask
    if pre_norm:
        h = x + mha(layer_norm(x, params["ln1"]), layer_norm(x, params["ln1"]), params["attn"], n_heads, mask)[0]
        return h + feed_forward(layer_norm(h, params["ln2"]), params["ffn"])
    a = mha(x, x, params["attn"], n_heads, mask)[0]
    h = layer_norm(x + a if attn_residual else a, params["ln1"])
    ff = feed_forward(h, params["ffn"])
    return layer_norm(h + ff if ffn_residual else ff, params["ln2"])


def encoder_block_no_attn_residual(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, attn_residual=False)


def encoder_block_no_ffn_residual(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, ffn_residual=False)


def encoder_block_pre_norm(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, pre_norm=True)


def encoder_block_padding_ignored(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, use_padding=False)


def encoder_block_padding_over_queries(x, valid, params, n_heads):
    """valid[:, :, None], (B, T, 1): the padding blocks the pad positions' queries instead of the pad keys."""
    if valid is None:
        return _encoder_block(x, None, params, n_heads)
    a = mha(x, x, params["attn"], n_heads, valid[:, :, None])[0]
    h = layer_norm(x + a, params["ln1"])
    return layer_norm(h + feed_forward(h, params["ffn"]), params["ln2"])


def encoder_block_mask_without_query_axis(x, valid, params, n_heads):
    """valid (B, T) passed to attention as the mask: its batch axis lines up with the queries."""
    if valid is None:
        return _encoder_block(x, None, params, n_heads)
    a = mha(x, x, params["attn"], n_heads, valid)[0]
    h = layer_norm(x + a, params["ln1"])
    return layer_norm(h + feed_forward(h, params["ffn"]), params["ln2"])


def encoder_block_padding_reversed(x, valid, params, n_heads):
    """The padding mask's polarity reversed: (~valid)[:, None, :], so only the padding may be read."""
    return _encoder_block(x, None if valid is None else ~valid, params, n_heads)


def encoder_block_causal(x, valid, params, n_heads):
    return _encoder_block(x, valid, params, n_heads, causal=True)


# --- masked_lm_loss ----------------------------------------------------------
def _token_nll(logits, targets, is_masked=None):
    """Each position's -log p(target), (B, T). With ``is_masked``, the other positions' ids are not used as indices
    (they may be any id), as in a learner's answer that scores the masked positions only."""
    ids = targets.clamp_min(0) if is_masked is None else targets.masked_fill(~is_masked, 0)
    return -torch.log_softmax(logits, dim=-1).gather(-1, ids[..., None])[..., 0]


def masked_lm_loss_mean_over_all(logits, targets, is_masked):
    """Cross-entropy averaged over every position, masked or not."""
    return _token_nll(logits, targets).mean()


def masked_lm_loss_sum(logits, targets, is_masked):
    nll = _token_nll(logits, targets, is_masked)
    return torch.where(is_masked, nll, torch.zeros_like(nll)).sum()


def masked_lm_loss_divided_by_all(logits, targets, is_masked):
    """The masked positions' losses summed, then divided by B * T."""
    nll = _token_nll(logits, targets, is_masked)
    return torch.where(is_masked, nll, torch.zeros_like(nll)).sum() / max(1, nll.numel())


def masked_lm_loss_log_of_softmax(logits, targets, is_masked):
    """torch.log(torch.softmax(logits)): a probability that rounds to 0 gives log 0 = -inf, an infinite loss."""
    logp = torch.log(torch.softmax(logits, dim=-1))
    nll = -logp.gather(-1, torch.where(is_masked, targets, torch.zeros_like(targets))[..., None])[..., 0]
    return torch.where(is_masked, nll, torch.zeros_like(nll)).sum() / is_masked.sum().clamp_min(1)


# ---------------------------------------------------------------- probe_accuracy
def _probe(word, senses, fit, test):
    mean_0, mean_1 = word[fit & (senses == 0)].mean(dim=0), word[fit & (senses == 1)].mean(dim=0)
    guess = (((word[test] - mean_1) ** 2).sum(-1) < ((word[test] - mean_0) ** 2).sum(-1)).long()
    return (guess == senses[test]).double().mean().item()


def _at(hidden, positions):
    return hidden[torch.arange(hidden.shape[0]), positions]


def probe_accuracy_tested_on_train(hidden, positions, senses, is_train):
    """Scored on the sentences it was fitted on."""
    return _probe(_at(hidden, positions), senses, is_train, is_train)


def probe_accuracy_means_from_all(hidden, positions, senses, is_train):
    """The sense means taken over every sentence, the test ones too."""
    return _probe(_at(hidden, positions), senses, torch.ones_like(is_train), ~is_train)


def probe_accuracy_last_position(hidden, positions, senses, is_train):
    """The vector of the sentence's last token instead of the word's."""
    return _probe(hidden[:, -1], senses, is_train, ~is_train)


def probe_accuracy_first_position(hidden, positions, senses, is_train):
    """The vector at position 0 (as BERT's [CLS]) instead of the word's."""
    return _probe(hidden[:, 0], senses, is_train, ~is_train)


def probe_accuracy_mean_over_sentence(hidden, positions, senses, is_train):
    """The mean over the sentence's positions instead of the word's vector."""
    return _probe(hidden.mean(dim=1), senses, is_train, ~is_train)


def probe_accuracy_token_before(hidden, positions, senses, is_train):
    """The vector one position before the word's (positions - 1)."""
    return _probe(_at(hidden, (positions - 1).clamp_min(0)), senses, is_train, ~is_train)


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_head_width_multiplied():
    return 512


def answer_head_width_whole_width():
    return 64


def answer_shuffled_tokens_different():
    return "a"


def answer_shuffled_tokens_original_order():
    return "b"


def answer_shuffled_tokens_all_equal():
    return "d"
