"""Known mistakes of notebook 09 (the KV cache): wrong variants of ``solutions/kv_cache.py``.

The checks run them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is built from torch and the private
parts in ``_parts.py`` only, so it can also be compiled as learner code in the tests, and keeps the
signature of the reference it imitates.
"""
import math

import torch
import torch.nn.functional as F

from ._parts import merge_heads, split_heads


# --- private helpers (correct unless an argument says otherwise) -------------
def _attend(q, k, v, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v


def _cached(q, k_new, v_new, cache, use_cache=True, offset=True, causal=True, new_first=False, grow=True,
            reversed_mask=False, shift=0):
    if cache is None:
        K, V = k_new, v_new
    elif new_first:
        K, V = torch.cat([k_new, cache[0]], dim=-2), torch.cat([v_new, cache[1]], dim=-2)
    else:
        K, V = torch.cat([cache[0], k_new], dim=-2), torch.cat([cache[1], v_new], dim=-2)
    T_new = q.shape[-2]
    keys, values = (K, V) if use_cache else (k_new, v_new)
    T_all = keys.shape[-2]
    mask = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device)
    if causal:
        mask = mask.tril(diagonal=(T_all - T_new if offset else 0) + shift)
    out = _attend(q, keys, values, ~mask if reversed_mask else mask)
    return out, ((K, V) if grow else cache)


# --- cached_attention ----------------------------------------------------------
def cached_attention_ignores_cache(q, k_new, v_new, cache=None):
    return _cached(q, k_new, v_new, cache, use_cache=False)


def cached_attention_mask_top_left(q, k_new, v_new, cache=None):
    return _cached(q, k_new, v_new, cache, offset=False)


def cached_attention_no_mask(q, k_new, v_new, cache=None):
    return _cached(q, k_new, v_new, cache, causal=False)


def cached_attention_new_first(q, k_new, v_new, cache=None):
    return _cached(q, k_new, v_new, cache, new_first=True)


def cached_attention_new_first_stored(q, k_new, v_new, cache=None):
    """The same slip in the cache returned only: attention over the right order, the new positions stored first."""
    out, grown = _cached(q, k_new, v_new, cache)
    if cache is None:
        return out, grown
    return out, (torch.cat([k_new, cache[0]], dim=-2), torch.cat([v_new, cache[1]], dim=-2))


def cached_attention_cache_not_grown(q, k_new, v_new, cache=None):
    return _cached(q, k_new, v_new, cache, grow=False)


def cached_attention_mask_without_diagonal(q, k_new, v_new, cache=None):
    """tril(diagonal=T_past - 1): each new query reads the positions before it, not itself."""
    return _cached(q, k_new, v_new, cache, shift=-1)


def cached_attention_mask_one_too_far(q, k_new, v_new, cache=None):
    """tril(diagonal=T_past + 1): each new query also reads the next new position."""
    return _cached(q, k_new, v_new, cache, shift=1)


def cached_attention_mask_reversed(q, k_new, v_new, cache=None):
    """The shifted causal mask's polarity reversed (True taken for "blocked"): each query reads only its future."""
    return _cached(q, k_new, v_new, cache, reversed_mask=True)


# --- decoder_block_step ---------------------------------------------------------
def _step(x_new, params, n_heads, cache, pass_cache=True, offset=True, attn_residual=True, merged_cache=False):
    D = x_new.shape[-1]
    a = params["attn"]
    q = split_heads(x_new @ a["W_q"].T + a["b_q"], n_heads)
    k_flat, v_flat = x_new @ a["W_k"].T + a["b_k"], x_new @ a["W_v"].T + a["b_v"]  # (B, T_new, D)
    if merged_cache:  # the cache keeps (B, T, D) projections
        if cache is not None and cache[0].dim() == 3:
            k_flat, v_flat = torch.cat([cache[0], k_flat], dim=1), torch.cat([cache[1], v_flat], dim=1)
        elif cache is not None:
            k_flat = torch.cat([merge_heads(cache[0]), k_flat], dim=1)
            v_flat = torch.cat([merge_heads(cache[1]), v_flat], dim=1)
        T_new, T_all = x_new.shape[1], k_flat.shape[1]
        mask = torch.ones(T_new, T_all, dtype=torch.bool, device=x_new.device).tril(diagonal=T_all - T_new)
        heads = _attend(q, split_heads(k_flat, n_heads), split_heads(v_flat, n_heads), mask)
        new_cache = (k_flat, v_flat)
    else:
        heads, new_cache = _cached(q, split_heads(k_flat, n_heads), split_heads(v_flat, n_heads),
                                   cache if pass_cache else None, offset=offset)
    attn = merge_heads(heads) @ a["W_o"].T + a["b_o"]
    h = F.layer_norm((x_new + attn) if attn_residual else attn, (D,), params["ln1"]["weight"],
                     params["ln1"]["bias"], 1e-5)
    f = params["ffn"]
    ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
    return F.layer_norm(h + ff, (D,), params["ln2"]["weight"], params["ln2"]["bias"], 1e-5), new_cache


def decoder_block_step_ignores_cache(x_new, params, n_heads, cache=None):
    return _step(x_new, params, n_heads, cache, pass_cache=False)


def decoder_block_step_mask_top_left(x_new, params, n_heads, cache=None):
    return _step(x_new, params, n_heads, cache, offset=False)


def decoder_block_step_caches_merged(x_new, params, n_heads, cache=None):
    return _step(x_new, params, n_heads, cache, merged_cache=True)


def decoder_block_step_no_attn_residual(x_new, params, n_heads, cache=None):
    return _step(x_new, params, n_heads, cache, attn_residual=False)


# --- greedy_generate --------------------------------------------------------------
def _generate(step, prompt, eos_id, max_len, refeed_all=False, row=-1, pass_cache=True, with_prompt=False,
              stop=True, pad=True):
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError("prompt must be (B, T_p) with T_p >= 1")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    B = prompt.shape[0]
    out = prompt.new_zeros(B, 0)
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
    ids, cache = prompt, None
    for _ in range(max_len):
        logits, new_cache = step(ids, cache)
        cache = new_cache if pass_cache else None
        nxt = logits[:, row].argmax(dim=-1)
        if pad:
            nxt = nxt.masked_fill(done, 0)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done = done | (nxt == eos_id)
        if stop and bool(done.all()):
            break
        ids = torch.cat([prompt, out], dim=1) if refeed_all else nxt[:, None]
    return torch.cat([prompt, out], dim=1) if with_prompt else out


def greedy_generate_refeeds_all(step, prompt, eos_id, max_len):
    """Feeds the whole text again at every step, together with the cache."""
    return _generate(step, prompt, eos_id, max_len, refeed_all=True)


def greedy_generate_first_row(step, prompt, eos_id, max_len):
    """Reads the prediction after the prompt's first token instead of its last."""
    return _generate(step, prompt, eos_id, max_len, row=0)


def greedy_generate_no_cache_passed(step, prompt, eos_id, max_len):
    """Feeds the newest token alone, but with cache=None: the model forgets the text."""
    return _generate(step, prompt, eos_id, max_len, pass_cache=False)


def greedy_generate_with_prompt(step, prompt, eos_id, max_len):
    """Returns the prompt followed by the new tokens."""
    return _generate(step, prompt, eos_id, max_len, with_prompt=True)


def greedy_generate_writes_after_eos(step, prompt, eos_id, max_len):
    """Stops once every row has written <eos>, but a row that is done goes on writing tokens, not <pad>."""
    return _generate(step, prompt, eos_id, max_len, pad=False)


def greedy_generate_ignores_eos(step, prompt, eos_id, max_len):
    """Writes max_len tokens whatever comes: <eos> neither ends a row nor the loop."""
    return _generate(step, prompt, eos_id, max_len, stop=False, pad=False)


# --- kv_cache_bytes ----------------------------------------------------------------
def kv_cache_bytes_keys_only(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
    return n_layers * batch * n_heads * n_positions * d_k * bytes_per_value


def kv_cache_bytes_values_not_bytes(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
    return 2 * n_layers * batch * n_heads * n_positions * d_k


def kv_cache_bytes_one_sequence(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
    return 2 * n_layers * n_heads * n_positions * d_k * bytes_per_value


def kv_cache_bytes_one_layer(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
    return 2 * batch * n_heads * n_positions * d_k * bytes_per_value


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_positions_without_cache_with_cache():
    return 14


def answer_positions_without_cache_fixed_length():
    return 150


def answer_positions_without_cache_prompt_only():
    return 50


def answer_what_the_cache_keeps_queries():
    return "a"


def answer_what_the_cache_keeps_weights():
    return "c"


def answer_what_the_cache_keeps_logits():
    return "d"


def answer_positions_without_cache_one_step_late():
    return 105
