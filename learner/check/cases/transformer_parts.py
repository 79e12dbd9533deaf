"""Transformer weights, masks and block cases shared by notebooks 06 to 09's exercises."""
import math

import torch

from .common import F64, Case, dn, gen, pick_dtype, pick_int, seeded_randn


# The weights are random and seeded, in the dict layout of ``solutions/encoder.py``:
# attention {"W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o"}, feed-forward
# {"W_1", "b_1", "W_2", "b_2"}, layer norm {"weight", "bias"}; a block's dict holds
# those under "attn"/"ln1"/"ffn"/"ln2" (encoder, decoder) or
# "self_attn"/"ln1"/"cross_attn"/"ln2"/"ffn"/"ln3" (encoder-decoder). Masks are
# bool, True = may attend; padding is on the right.
def attn_params(g, D, dtype=F64, scale=1.5):
    """An attention dict; ``scale`` > 1 gives peaky weights, so scaling mistakes show."""
    p = {}
    for n in "qkvo":
        p[f"W_{n}"] = seeded_randn(g, D, D, dtype=dtype, scale=scale / math.sqrt(D))
        p[f"b_{n}"] = seeded_randn(g, D, dtype=dtype, scale=0.3)
    return p


def ln_params(g, D, dtype=F64):
    return {"weight": 1.0 + seeded_randn(g, D, dtype=dtype, scale=0.2), "bias": seeded_randn(g, D, dtype=dtype, scale=0.2)}


def ffn_params(g, D, F, dtype=F64):
    return {"W_1": seeded_randn(g, F, D, dtype=dtype, scale=1.5 / math.sqrt(D)), "b_1": seeded_randn(g, F, dtype=dtype, scale=0.3),
            "W_2": seeded_randn(g, D, F, dtype=dtype, scale=1.5 / math.sqrt(F)), "b_2": seeded_randn(g, D, dtype=dtype, scale=0.3)}


def block_params(g, D, F, dtype=F64):
    return {"attn": attn_params(g, D, dtype), "ln1": ln_params(g, D, dtype), "ffn": ffn_params(g, D, F, dtype),
            "ln2": ln_params(g, D, dtype)}


def encdec_params(g, D, F, dtype=F64):
    return {"self_attn": attn_params(g, D, dtype), "ln1": ln_params(g, D, dtype),
            "cross_attn": attn_params(g, D, dtype), "ln2": ln_params(g, D, dtype),
            "ffn": ffn_params(g, D, F, dtype), "ln3": ln_params(g, D, dtype)}


def as_float32(params):
    """A weight dict (nested or flat) in float32."""
    return {k: as_float32(v) if isinstance(v, dict) else v.float() for k, v in params.items()}


def random_lengths(g, B, T, lo=1, force_pad=True):
    """Random lengths in [lo, T]; with ``force_pad`` one row is shorter than T whenever T allows."""
    lengths = [pick_int(g, min(lo, T), T) for _ in range(B)]
    if force_pad and T >= 2 and all(n == T for n in lengths):
        lengths[pick_int(g, 0, B - 1)] = pick_int(g, max(1, min(lo, T - 1)), T - 1)
    return lengths


def valid_mask(lengths, T):
    """(B, T) bool: True at the real tokens of rows of the given lengths."""
    return torch.arange(T)[None, :] < torch.tensor(lengths, dtype=torch.long).reshape(-1, 1)


def causal_mask(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def pick_heads(g, big, lo_basic=2, d_lo=1, d_hi=4, min_D=1):
    """(H, d_k) with H >= lo_basic in the basic part, and D = H * d_k >= min_D."""
    while True:
        H = pick_int(g, 1 if big else lo_basic, 4 if big else 3)
        d_k = pick_int(g, d_lo, d_hi)
        if H * d_k >= min_D:
            return H, d_k


def random_padding_mask(g, B, T_k):
    """A (B, 1, T_k) padding mask with random lengths, and its description."""
    lengths = random_lengths(g, B, T_k)
    return valid_mask(lengths, T_k)[:, None, :], f"padding mask (source lengths {lengths})"


def block_case(g, big, T_lo=2):
    """A random case of a transformer block (x, valid, params, n_heads): encoder_block and decoder_block."""
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 3)
    T = pick_int(g, 1, 7) if big else pick_int(g, T_lo, 6)
    H, d_k = pick_heads(g, big, d_lo=2, d_hi=3, min_D=4)
    D, F = H * d_k, pick_int(g, 2, 8)
    if big and pick_int(g, 0, 3) == 0:
        valid, vname = None, "no padding"
    else:
        lengths = random_lengths(g, B, T, lo=0 if big else 1)
        valid, vname = valid_mask(lengths, T), f"lengths {lengths}"
    return Case(f"B={B}, T={T}, D={D}, n_heads={H}, F={F}, {vname}, {dn(dtype)}",
                (seeded_randn(g, B, T, D, dtype=dtype), valid, block_params(g, D, F, dtype), H))


def block_edge(seed, first="n = 1: one token, which attends to itself"):
    """The edge cases of a transformer block: encoder_block and decoder_block."""
    g = gen(seed)
    p6, p8 = block_params(g, 6, 5), block_params(g, 8, 7)
    x, x8 = seeded_randn(g, 3, 5, 6), seeded_randn(g, 2, 4, 8)
    return [
        Case(first, (x[:1, :1], None, p6, 2)),
        Case("no padding (valid=None)", (x, None, p6, 3)),
        Case("a padded batch, lengths [5, 3, 1]", (x, valid_mask([5, 3, 1], 5), p6, 2)),
        Case("one sequence is all padding, lengths [4, 0]", (x8, valid_mask([4, 0], 4), p8, 2)),
        Case("one head (H = 1)", (x, valid_mask([5, 4, 2], 5), p6, 1)),
        Case("four heads of width d_k = 2", (x8, valid_mask([2, 4], 4), p8, 4)),
        Case("float32", (x8.float(), valid_mask([3, 4], 4), as_float32(p8), 2)),
    ]
