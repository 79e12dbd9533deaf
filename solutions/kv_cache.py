"""Notebook 09: the KV cache (notes 004, last section): generation that computes each key and value once.

A decoder generates one token at a time. Without a cache, step t feeds the
whole text x_0 .. x_t through the model again, recomputing the keys and values
of every earlier position, although causal attention guarantees they cannot
have changed: position j reads only positions <= j, so its k_j and v_j are fixed
once x_j is known. The cache keeps them. Each step then feeds only the new
token: one query, one key and one value per head and layer, and the new query
reads the cached keys plus its own.

A cache for one attention layer is the pair (K, V) of the keys and values
already computed, after the projections and the split into heads:
K (B, H, T_past, d_k), V (B, H, T_past, d_v). ``None`` is the empty cache
(T_past = 0). Feeding T_new positions returns the grown cache,
(B, H, T_past + T_new, ...). The new position i sits at absolute position
T_past + i.

Shape letters as in notebook 06; the weight dicts are those of
``solutions/encoder.py``.
"""
import torch
import torch.nn.functional as F

from .masks_attention import masked_attention
from .encoder import merge_heads, split_heads


def cached_attention(q, k_new, v_new, cache=None):
    """Causal attention of T_new new positions over the cached keys and values and their own.

    The keys and values of the new positions are appended to the cache; the new
    query i (absolute position T_past + i) may attend to key j of the grown
    cache iff j <= T_past + i: every cached position and the new positions up
    to itself.

    Args:
        q: (B, H, T_new, d_k), the new positions' queries.
        k_new: (B, H, T_new, d_k), their keys.
        v_new: (B, H, T_new, d_v), their values.
        cache: (K_past (B, H, T_past, d_k), V_past (B, H, T_past, d_v)), or None (T_past = 0).

    Returns:
        out (B, H, T_new, d_v) and the grown cache (K (B, H, T_past + T_new, d_k),
        V (B, H, T_past + T_new, d_v)).

    Raises:
        ValueError when q, k_new, v_new and the cache do not fit together (B, H, T_new, widths).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if q.dim() != 4 or k_new.shape[:-1] != q.shape[:-1] or v_new.shape[:-1] != q.shape[:-1]:
        raise ValueError(f"q {tuple(q.shape)}, k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} must all "
                         f"be (B, H, T_new, width) with the same B, H and T_new")
    if cache is None:
        K, V = k_new, v_new
    else:
        K_past, V_past = cache
        if K_past.shape[:2] != q.shape[:2] or K_past.shape[-1] != k_new.shape[-1] \
                or V_past.shape[:-1] != K_past.shape[:-1] or V_past.shape[-1] != v_new.shape[-1]:
            raise ValueError(f"the cache holds K {tuple(K_past.shape)} and V {tuple(V_past.shape)}, which do not "
                             f"fit the new k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)}: the same B, H "
                             f"and widths are needed")
        K = torch.cat([K_past, k_new], dim=-2)  # (B, H, T_past + T_new, d_k)
        V = torch.cat([V_past, v_new], dim=-2)  # (B, H, T_past + T_new, d_v)
    T_new, T_all = q.shape[-2], K.shape[-2]
    T_past = T_all - T_new
    # query i is position T_past + i: it may read keys j <= T_past + i (the causal mask, shifted right)
    mask = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device).tril(diagonal=T_past)  # (T_new, T_all)
    out, _ = masked_attention(q, K, V, mask)  # (B, H, T_new, d_v)
    return out, (K, V)
    ### END SOLUTION


def decoder_block_step(x_new, params, n_heads, cache=None):
    """Notebook 07's decoder block for T_new new positions, with this block's KV cache.

    The same computation as ``decoder_block`` (post-norm, causal, no padding), but
    only for the new positions: they are projected to queries, keys and values,
    split into heads, and attend through ``cached_attention`` to the cached keys
    and values and their own. Then, as in the block, the output projection,
    r' = LN1(x_new + attention), and LN2(r' + FFN(r')) with eps 1e-5.

    Running a text through this function in pieces, passing each call's cache to
    the next, gives the rows of ``decoder_block`` on the whole text.

    Args:
        x_new: (B, T_new, D), the block's input at the new positions.
        params: {"attn": ..., "ln1": ..., "ffn": ..., "ln2": ...}.
        n_heads: H, which must divide D.
        cache: (K (B, H, T_past, d_k), V (B, H, T_past, d_k)) from the previous call, or None.

    Returns:
        out (B, T_new, D) and the grown cache (K, V), each (B, H, T_past + T_new, d_k).

    Raises:
        ValueError when n_heads does not divide D, or the cache does not fit (B, H, d_k).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    D = x_new.shape[-1]
    a = params["attn"]
    q = split_heads(x_new @ a["W_q"].T + a["b_q"], n_heads)  # (B, H, T_new, d_k)
    k = split_heads(x_new @ a["W_k"].T + a["b_k"], n_heads)  # (B, H, T_new, d_k)
    v = split_heads(x_new @ a["W_v"].T + a["b_v"], n_heads)  # (B, H, T_new, d_k)
    heads, cache = cached_attention(q, k, v, cache)  # (B, H, T_new, d_k), the grown cache
    attn = merge_heads(heads) @ a["W_o"].T + a["b_o"]  # (B, T_new, D)
    x = F.layer_norm(x_new + attn, (D,), params["ln1"]["weight"], params["ln1"]["bias"], 1e-5)  # r'
    f = params["ffn"]
    ff = torch.relu(x @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]  # (B, T_new, D)
    return F.layer_norm(x + ff, (D,), params["ln2"]["weight"], params["ln2"]["bias"], 1e-5), cache
    ### END SOLUTION


def greedy_generate(step, prompt, eos_id, max_len):
    """Greedy generation with a KV cache: the prompt once, then one token per call.

    ``step(ids, cache)`` runs a model on new tokens: ids (B, T_new) LongTensor and
    the cache its previous call returned (None the first time) give logits
    (B, T_new, V), where row t predicts the token after ids[:, t], and the grown
    cache. The cache is opaque: pass it back as it came.

    The first call feeds the whole prompt with cache None; the prediction after
    its last token is the first new token. Each later call feeds only the newest
    token (B, 1) with the cache from the call before. The course's one contract
    of greedy decoding (the same in notebooks 05, 08 and 09): at most ``max_len``
    tokens are written after the prompt, a row's <eos> included; a row that has
    written <eos> holds 0 (<pad>) from then on; the loop stops as soon as every
    row has written <eos>, or after ``max_len`` tokens; ``max_len = 0`` writes
    nothing, a (B, 0) result. So ``step`` is called once per token written: the
    last token needs no call of its own.

    Args:
        step: the model, as above.
        prompt: (B, T_p) LongTensor, T_p >= 1.
        eos_id: the id of <eos>.
        max_len: the most tokens to write, >= 0.

    Returns:
        (B, L) LongTensor of the new tokens, L <= max_len (greedy: the argmax of each
        prediction), 0 after a row's <eos>.

    Raises:
        ValueError for a prompt that is not (B, T_p) with T_p >= 1 (checked first: also when max_len = 0),
            and for max_len < 0.
    """
    ### BEGIN SOLUTION
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(f"prompt must be (B, T_p) with T_p >= 1 (a model needs a token to condition on), got "
                         f"shape {tuple(prompt.shape)}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    B = prompt.shape[0]
    out = prompt.new_zeros(B, 0)  # (B, 0): nothing written yet
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
    ids, cache = prompt, None  # the first call feeds the whole prompt, with no cache
    for _ in range(max_len):
        logits, cache = step(ids, cache)  # (B, T_new, V) and the grown cache
        nxt = logits[:, -1].argmax(dim=-1).masked_fill(done, 0)  # (B,): 0 after a row's <eos>
        out = torch.cat([out, nxt[:, None]], dim=1)
        done = done | (nxt == eos_id)
        if bool(done.all()):
            break
        ids = nxt[:, None]  # (B, 1): only the newest token from now on
    return out
    ### END SOLUTION


def kv_cache_bytes(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
    """The memory a decoder's KV cache takes, in bytes.

    Every layer keeps a key and a value vector of width d_k, per head, per
    position, per sequence of the batch, each entry ``bytes_per_value`` bytes
    (2 for float16 / bfloat16, 4 for float32).

    Args:
        n_layers: the number of decoder blocks (each keeps its own cache).
        n_heads: H, the key/value heads of a block.
        d_k: the width of one head's keys and values.
        n_positions: T, the positions cached (prompt and generated tokens).
        batch: B, the sequences generated together.
        bytes_per_value: bytes of one number.

    Returns:
        int, 2 * n_layers * batch * n_heads * n_positions * d_k * bytes_per_value.

    Raises:
        ValueError when an argument is not a whole number >= 0 (a Python int, not a bool or a float).
    """
    ### BEGIN SOLUTION
    sizes = {"n_layers": n_layers, "n_heads": n_heads, "d_k": d_k, "n_positions": n_positions,
             "batch": batch, "bytes_per_value": bytes_per_value}
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return 2 * n_layers * batch * n_heads * n_positions * d_k * bytes_per_value  # keys and values
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_positions_without_cache():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 95
    ### END SOLUTION


def answer_what_the_cache_keeps():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "b"
    ### END SOLUTION
