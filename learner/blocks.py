"""Given building blocks for the later notebooks, written with PyTorch's own functions.

Notebook 06 has the learner write multi-head attention and the encoder block;
notebooks 07-09 need them again without asking for them twice, so they import
these (09 also gets notebook 07's decoder block, and the KV-cache stepper a
ready-made cached block). Each is a different implementation from the
reference (it leans on ``F.multi_head_attention_forward``,
``F.scaled_dot_product_attention`` and ``F.layer_norm``) with the same
signature and the same conventions: bool masks with True = may attend, weight
dicts laid out like ``nn.Linear`` (see ``solutions/encoder.py``), and a query
with no allowed key gets zero attention weights, never NaN. The tests check
that each equals the reference.
"""
import torch
import torch.nn.functional as F

LN_EPS = 1e-5


def masked_attention(Q, K, V, mask=None):
    """softmax(Q K^T / sqrt(d_k) + M) V with a bool mask; returns (out, weights)."""
    scores = torch.matmul(Q, K.transpose(-2, -1)) * Q.shape[-1] ** -0.5  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no allowed key: NaN -> 0
    return torch.matmul(weights, V), weights


def split_heads(x, n_heads):
    """(B, T, D) -> (B, H, T, D / H)."""
    B, T, D = x.shape
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
    return x.unflatten(-1, (n_heads, D // n_heads)).permute(0, 2, 1, 3)


def merge_heads(x):
    """(B, H, T, d_k) -> (B, T, H * d_k)."""
    return x.permute(0, 2, 1, 3).flatten(-2)


def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
    """Multi-head attention through ``F.multi_head_attention_forward``; returns (out (B, T_q, D), weights (B, H, T_q, T_k))."""
    B, T_q, D = x_q.shape
    T_k = x_kv.shape[1]
    if n_heads < 1 or D % n_heads:
        raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
    allowed = torch.ones(B, T_q, T_k, dtype=torch.bool, device=x_q.device)
    if mask is not None:
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
    """Token rows plus position rows, (B, T) ids -> (B, T, D)."""
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
    """The post-norm encoder block of notebook 06: bidirectional self-attention (padding blocked), then the FFN."""
    mask = None if valid is None else valid.unsqueeze(1)
    h = add_norm(x, multi_head_attention(x, x, params["attn"], n_heads, mask)[0], params["ln1"])
    return add_norm(h, feed_forward(h, params["ffn"]), params["ln2"])


def decoder_block(x, valid, params, n_heads):
    """The post-norm decoder block of notebook 07: causal self-attention (padding blocked), then the FFN."""
    T = x.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
    if valid is not None:
        mask = mask & valid.unsqueeze(1)
    h = add_norm(x, multi_head_attention(x, x, params["attn"], n_heads, mask)[0], params["ln1"])
    return add_norm(h, feed_forward(h, params["ffn"]), params["ln2"])


def decoder_block_step(x_new, params, n_heads, cache=None):
    """The decoder block for new positions with a KV cache (notebook 09), through ``F.scaled_dot_product_attention``.

    Used where the course needs a ready-made cached step (the KV-cache stepper's
    reference side); returns (out (B, T_new, D), (K, V) each (B, H, T_past + T_new, d_k)).
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
