"""Given building blocks for the later notebooks, written with PyTorch's own functions.

Notebook 06 has the learner write multi-head attention and the encoder block;
notebooks 07-09 need them again without asking for them twice, so they import
these (09 also gets notebook 07's decoder block, and the KV-cache stepper a
ready-made cached block). Each is a different implementation from the
reference (it leans on ``F.multi_head_attention_forward``,
``F.scaled_dot_product_attention`` and ``F.layer_norm``) with the same
signature and the same conventions: bool masks with True = may attend, weight
dicts laid out like ``nn.Linear`` (``W`` is (out, in), applied as ``x @ W.T + b``),
and a query with no allowed key gets zero attention weights, never NaN. The tests
check that each equals the reference. ``help()`` on each says its shapes, its
mask and its parameter keys.
"""
import torch
import torch.nn.functional as F

LN_EPS = 1e-5


def masked_attention(Q, K, V, mask=None):
    """Masked scaled dot-product attention, softmax(Q K^T / sqrt(d_k) + M) V (notebook 04's exercise).

    Args:
        Q: (..., T_q, d_k); K: (..., T_k, d_k); V: (..., T_k, d_v); the leading axes (B, or B and H) are shared.
        mask: None, or a bool tensor that broadcasts to (..., T_q, T_k), True = may attend (the polarity of
            F.scaled_dot_product_attention; nn.MultiheadAttention's is the opposite, True = blocked). With heads,
            give it a head axis: (B, 1, T_q, T_k) or (B, 1, 1, T_k).

    Returns:
        (out, weights): out (..., T_q, d_v), weights (..., T_q, T_k). A query with no allowed key (or T_k = 0)
        gets zero weights and a zero output, never NaN.
    """
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same width d_k, got {Q.shape[-1]} and {K.shape[-1]}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must have the same length T_k, got {K.shape[-2]} and {V.shape[-2]}")
    scores = torch.matmul(Q, K.transpose(-2, -1)) * Q.shape[-1] ** -0.5  # (..., T_q, T_k)
    if mask is not None:
        checked_mask(mask, tuple(scores.shape), "(..., T_q, T_k)")
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no allowed key: NaN -> 0
    return torch.matmul(weights, V), weights


def checked_mask(mask, shape, named, heads=""):
    """A ValueError in the words of notebook 04 unless ``mask`` is a bool tensor that broadcasts to ``shape`` (named
    ``named``): the ready-made blocks keep 04's rules, so a mask given the wrong way is said, not a PyTorch error
    from inside them."""
    if not isinstance(mask, torch.Tensor):
        raise ValueError(f"mask must be None or a bool tensor (True = may attend), got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}: a 0/1 mask gives "
                         f"mask.bool(), an additive one of 0 and -inf gives mask == 0")
    fits = mask.dim() <= len(shape) and all(m in (1, s) for m, s in zip(reversed(mask.shape), reversed(shape)))
    if not fits:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to {named} = {shape}{heads}")


def split_heads(x, n_heads):
    """Split the width into heads: x (B, T, D) -> (B, H, T, d_k), d_k = D / H (notebook 06's exercise).

    Raises ValueError when n_heads = H does not divide D.
    """
    B, T, D = x.shape
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
    return x.unflatten(-1, (n_heads, D // n_heads)).permute(0, 2, 1, 3)


def merge_heads(x):
    """Undo split_heads: x (B, H, T, d_k) -> (B, T, H * d_k), each position's heads side by side (notebook 06)."""
    return x.permute(0, 2, 1, 3).flatten(-2)


def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
    """Multi-head attention (notebook 06's exercise), through ``F.multi_head_attention_forward``.

    multi_head_attention(x_q, x_kv, params, n_heads, mask=None) -> (out, weights)

    Args:
        x_q: (B, T_q, D), the positions that ask (queries); x_kv: (B, T_k, D), the positions that answer (keys and
            values). Self-attention passes the same tensor twice; cross-attention passes the decoder's states as
            x_q and the encoder's output (the memory) as x_kv.
        params: a dict with the keys W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o: each W is (D, D), each b is (D,),
            applied as x @ W.T + b.
        n_heads: H, which must divide D (else ValueError); each head attends over d_k = D / H columns.
        mask: None, or a bool tensor that broadcasts to (B, T_q, T_k): (T_q, T_k), (B, T_q, T_k) or (B, 1, T_k);
            True = may attend (not nn.MultiheadAttention's polarity). The same mask applies to every head: give it
            no head axis.

    Returns:
        (out, weights): out (B, T_q, D); weights (B, H, T_q, T_k), each head's attention weights. A query with no
        allowed key gets zero weights, and its output is b_o.
    """
    B, T_q, D = x_q.shape
    T_k = x_kv.shape[1]
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
    allowed = torch.ones(B, T_q, T_k, dtype=torch.bool, device=x_q.device)
    if mask is not None:
        checked_mask(mask, (B, T_q, T_k), "(B, T_q, T_k)", heads=" (no head axis: the same mask serves every head)")
        allowed = allowed & mask
    if T_k == 0:  # nothing to attend to: zero weights, the output is the projection of 0
        weights = x_q.new_zeros(B, n_heads, T_q, 0)
        return params["b_o"].expand(B, T_q, D).clone(), weights
    dead = ~allowed.any(dim=-1)  # (B, T_q): queries with no allowed key
    # let them attend anywhere (so no NaN appears, not even in the backward pass), then overwrite them
    allowed = allowed | dead[:, :, None]
    p = params
    out, weights = F.multi_head_attention_forward(
        x_q.transpose(0, 1), x_kv.transpose(0, 1), x_kv.transpose(0, 1), D, n_heads,
        in_proj_weight=None, in_proj_bias=torch.cat([p["b_q"], p["b_k"], p["b_v"]]),
        bias_k=None, bias_v=None, add_zero_attn=False, dropout_p=0.0,
        out_proj_weight=p["W_o"], out_proj_bias=p["b_o"], training=False,
        attn_mask=(~allowed).repeat_interleave(n_heads, dim=0),  # PyTorch's polarity: True = blocked
        need_weights=True, average_attn_weights=False, use_separate_proj_weight=True,
        q_proj_weight=p["W_q"], k_proj_weight=p["W_k"], v_proj_weight=p["W_v"])
    out = torch.where(dead[:, :, None], p["b_o"], out.transpose(0, 1))  # no allowed key: attention gives 0
    return out, weights.masked_fill(dead[:, None, :, None], 0.0)


def embed_with_positions(ids, E, P):
    """Token rows plus position rows (notebook 06's exercise): x[b, t] = E[ids[b, t]] + P[t].

    Args: ids (B, T) LongTensor; E (V, D) the token table; P (T_max, D) the positions' table.
    Returns: (B, T, D). Raises ValueError when T > T_max.
    """
    T = ids.shape[-1]
    if T > P.shape[0]:
        raise ValueError(f"a sequence of length T={T} is longer than the positional table, which has "
                         f"T_max={P.shape[0]} rows")
    return F.embedding(ids, E) + P.narrow(0, 0, T)


def feed_forward(h, f):
    return F.linear(torch.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])


def add_norm(x, sub, ln):
    """LayerNorm(x + sublayer(x)), the post-norm residual wrapper."""
    return F.layer_norm(x + sub, x.shape[-1:], ln["weight"], ln["bias"], LN_EPS)


def encoder_block(x, valid, params, n_heads):
    """The post-norm encoder block of notebook 06 (its exercise): bidirectional self-attention, then the FFN.

    h = LayerNorm(x + MultiHeadAttention(x, x, mask)), out = LayerNorm(h + FFN(h)), FFN(h) = relu(h W_1^T + b_1) W_2^T + b_2.

    Args:
        x: (B, T, D). valid: (B, T) bool, True = a real token, or None (no padding); the mask is
            valid[:, None, :], (B, 1, T): every query may attend to every real key.
        params: {"attn": multi_head_attention's keys, "ln1": {"weight", "bias"} (D,) each,
            "ffn": {"W_1" (F, D), "b_1" (F,), "W_2" (D, F), "b_2" (D,)}, "ln2": {"weight", "bias"}}.
        n_heads: H.

    Returns:
        out (B, T, D) (the attention weights are not returned).
    """
    mask = None if valid is None else valid.unsqueeze(1)
    h = add_norm(x, multi_head_attention(x, x, params["attn"], n_heads, mask)[0], params["ln1"])
    return add_norm(h, feed_forward(h, params["ffn"]), params["ln2"])


def decoder_block(x, valid, params, n_heads):
    """The post-norm decoder block of notebook 07 (its exercise): causal self-attention, then the FFN.

    As encoder_block(x, valid, params, n_heads), with the mask causal & valid[:, None, :], (B, T, T): query i may
    attend to key j when j <= i and key j is real (True = may attend). Same params keys ("attn", "ln1", "ffn",
    "ln2"); returns out (B, T, D).
    """
    T = x.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    if valid is not None:
        mask = mask & valid.unsqueeze(1)
    h = add_norm(x, multi_head_attention(x, x, params["attn"], n_heads, mask)[0], params["ln1"])
    return add_norm(h, feed_forward(h, params["ffn"]), params["ln2"])


def decoder_block_step(x_new, params, n_heads, cache=None):
    """The decoder block for new positions with a KV cache (notebook 09), through ``F.scaled_dot_product_attention``.

    Used where the course needs a ready-made cached step (the KV-cache stepper's
    reference side). x_new (B, T_new, D): the new positions; params: decoder_block's keys; cache: None or
    (K, V), each (B, H, T_past, d_k), the earlier positions' keys and values. New query i is position T_past + i
    and may attend to keys j <= T_past + i (the causal mask shifted right; True = may attend). Returns
    (out (B, T_new, D), (K, V) each (B, H, T_past + T_new, d_k)), the grown cache; ValueError for a cache that
    does not fit.
    """
    T_new = x_new.shape[1]
    a = params["attn"]
    q, k, v = (split_heads(F.linear(x_new, a["W_" + n], a["b_" + n]), n_heads) for n in "qkv")  # (B, H, T_new, d_k)
    if cache is not None:
        if tuple(cache[0].shape[:2]) + tuple(cache[0].shape[3:]) != tuple(k.shape[:2]) + tuple(k.shape[3:]):
            raise ValueError(f"a cache of shape {tuple(cache[0].shape)} does not fit keys of shape {tuple(k.shape)}")
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    T_past = k.shape[2] - T_new
    allowed = torch.ones(T_new, T_past + T_new, dtype=torch.bool, device=x_new.device).tril(T_past)
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # every row allows itself: no NaN
    attn = F.linear(merge_heads(heads), a["W_o"], a["b_o"])
    h = add_norm(x_new, attn, params["ln1"])
    return add_norm(h, feed_forward(h, params["ffn"]), params["ln2"]), (k, v)


def cross_keys_values(memory, params, n_heads):
    """Cross-attention's keys and values from the encoder's output: (K, V), each (B, H, T_x, d_k).

    They depend on the source alone, so a translation computes them once per source
    (notebook 08) and every decoding step reads the same ones.
    """
    return tuple(split_heads(F.linear(memory, params["W_" + n], params["b_" + n]), n_heads) for n in "kv")


def encdec_decoder_block_kv(y, kv, tgt_valid, src_valid, params, n_heads):
    """Notebook 08's decoder block, given cross-attention's keys and values instead of the memory.

    ``kv`` is ``cross_keys_values(memory, params["cross_attn"], n_heads)``; the result
    equals ``encdec_decoder_block(y, memory, ...)``: (out (B, T_y, D), cross weights (B, H, T_y, T_x)).
    y (B, T_y, D); tgt_valid (B, T_y) and src_valid (B, T_x): bool, True = a real token, or None (no padding).
    Self-attention's mask is causal & tgt_valid[:, None, :]; cross-attention's is src_valid (True = may attend).
    params: {"self_attn", "ln1", "cross_attn", "ln2", "ffn", "ln3"} (the attentions with multi_head_attention's
    keys, the LayerNorms with "weight" and "bias", the FFN with W_1, b_1, W_2, b_2).
    """
    T = y.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()
    if tgt_valid is not None:
        mask = mask & tgt_valid.unsqueeze(1)
    h1 = add_norm(y, multi_head_attention(y, y, params["self_attn"], n_heads, mask)[0], params["ln1"])
    c = params["cross_attn"]
    q = split_heads(F.linear(h1, c["W_q"], c["b_q"]), n_heads)  # (B, H, T_y, d_k)
    heads, weights = masked_attention(q, kv[0], kv[1], None if src_valid is None else src_valid[:, None, None, :])
    h2 = add_norm(h1, F.linear(merge_heads(heads), c["W_o"], c["b_o"]), params["ln2"])
    return add_norm(h2, feed_forward(h2, params["ffn"]), params["ln3"]), weights
