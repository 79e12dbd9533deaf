"""Notebooks 06-08, the transformers (encoder, decoder, encoder-decoder): cases, properties and known mistakes.

The weights are random and seeded, in the dict layout of ``solutions/encoder.py``:
attention {"W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o"}, feed-forward
{"W_1", "b_1", "W_2", "b_2"}, layer norm {"weight", "bias"}; a block's dict holds
those under "attn"/"ln1"/"ffn"/"ln2" (encoder, decoder) or
"self_attn"/"ln1"/"cross_attn"/"ln2"/"ffn"/"ln3" (encoder-decoder). Masks are
bool, True = may attend; padding is on the right.

Random cases of the visible "basic" part are chosen so that every known mistake
shows: at least two heads (one head hides a wrong split or a per-head scale), at
least two positions (one position hides a causal mask and a rotation), padding
that leaves some row shorter than T, and widths of four and more (a layer norm
over two numbers keeps only their sign).
"""
import math

import torch

from .exercises import F64, Case, Exercise, _dn, _dtype, _gen, _int, _nested, _no_future_leak, _randn, logit_sum_scale, register

NB6, NB7, NB8 = "06_encoder", "07_decoder", "08_encoder_decoder"
M = "transformer_mistakes:"  # the known mistakes live in solutions/transformer_mistakes.py
F32 = torch.float32


# ---------------------------------------------------------------- weights and masks
def _attn_params(g, D, dtype=F64, scale=1.5):
    """An attention dict; ``scale`` > 1 gives peaky weights, so scaling mistakes show."""
    p = {}
    for n in "qkvo":
        p[f"W_{n}"] = _randn(g, D, D, dtype=dtype, scale=scale / math.sqrt(D))
        p[f"b_{n}"] = _randn(g, D, dtype=dtype, scale=0.3)
    return p


def _ln_params(g, D, dtype=F64):
    return {"weight": 1.0 + _randn(g, D, dtype=dtype, scale=0.2), "bias": _randn(g, D, dtype=dtype, scale=0.2)}


def _ffn_params(g, D, F, dtype=F64):
    return {"W_1": _randn(g, F, D, dtype=dtype, scale=1.5 / math.sqrt(D)), "b_1": _randn(g, F, dtype=dtype, scale=0.3),
            "W_2": _randn(g, D, F, dtype=dtype, scale=1.5 / math.sqrt(F)), "b_2": _randn(g, D, dtype=dtype, scale=0.3)}


def _block_params(g, D, F, dtype=F64):
    return {"attn": _attn_params(g, D, dtype), "ln1": _ln_params(g, D, dtype), "ffn": _ffn_params(g, D, F, dtype),
            "ln2": _ln_params(g, D, dtype)}


def _encdec_params(g, D, F, dtype=F64):
    return {"self_attn": _attn_params(g, D, dtype), "ln1": _ln_params(g, D, dtype),
            "cross_attn": _attn_params(g, D, dtype), "ln2": _ln_params(g, D, dtype),
            "ffn": _ffn_params(g, D, F, dtype), "ln3": _ln_params(g, D, dtype)}


def _float32(params):
    """A weight dict (nested or flat) in float32."""
    return {k: _float32(v) if isinstance(v, dict) else v.float() for k, v in params.items()}


def _lengths(g, B, T, lo=1, force_pad=True):
    """Random lengths in [lo, T]; with ``force_pad`` one row is shorter than T whenever T allows."""
    lengths = [_int(g, min(lo, T), T) for _ in range(B)]
    if force_pad and T >= 2 and all(n == T for n in lengths):
        lengths[_int(g, 0, B - 1)] = _int(g, max(1, min(lo, T - 1)), T - 1)
    return lengths


def _valid(lengths, T):
    return torch.arange(T)[None, :] < torch.tensor(lengths, dtype=torch.long).reshape(-1, 1)


def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def _heads(g, big, lo_basic=2, d_lo=1, d_hi=4, min_D=1):
    """(H, d_k) with H >= lo_basic in the basic part, and D = H * d_k >= min_D."""
    while True:
        H = _int(g, 1 if big else lo_basic, 4 if big else 3)
        d_k = _int(g, d_lo, d_hi)
        if H * d_k >= min_D:
            return H, d_k


# ---------------------------------------------------------------- split_heads / merge_heads
def _split_case(g, big):
    dtype = _dtype(g)
    B, T = _int(g, 1, 4), _int(g, 0, 7) if big else _int(g, 2, 6)
    H, d_k = _heads(g, big)
    return Case(f"x ({B}, {T}, {H * d_k}), n_heads={H}, {_dn(dtype)}", (_randn(g, B, T, H * d_k, dtype=dtype), H))


def _split_edge():
    g = _gen(61)
    return [
        Case("n = 1: B = T = 1, two heads", (_randn(g, 1, 1, 4), 2)),
        Case("one head: only a heads axis is added", (_randn(g, 2, 3, 4), 1)),
        Case("d_k = 1: one column per head (H = D)", (_randn(g, 2, 3, 4), 4)),
        Case("an empty sequence (T = 0)", (_randn(g, 2, 0, 6), 3)),
        Case("float32", (_randn(g, 3, 5, 6, dtype=F32), 2)),
        Case("d_model=6 is not divisible by n_heads=4: an error", (_randn(g, 2, 3, 6), 4), raises="ValueError"),
        Case("x without a batch axis, (T, D) = (3, 4): an error", (_randn(g, 3, 4), 2), raises="ValueError"),
    ]


def _merge_case(g, big):
    dtype = _dtype(g)
    B, T = _int(g, 1, 4), _int(g, 0, 7) if big else _int(g, 2, 6)
    H, d_k = _heads(g, big)
    return Case(f"x ({B}, {H}, {T}, {d_k}), {_dn(dtype)}", (_randn(g, B, H, T, d_k, dtype=dtype),))


def _merge_edge():
    g = _gen(62)
    return [
        Case("n = 1: B = T = 1, two heads", (_randn(g, 1, 2, 1, 3),)),
        Case("one head: only the heads axis goes", (_randn(g, 2, 1, 3, 4),)),
        Case("d_k = 1: one column per head", (_randn(g, 2, 4, 3, 1),)),
        Case("an empty sequence (T = 0)", (_randn(g, 2, 3, 0, 2),)),
        Case("float32", (_randn(g, 3, 2, 5, 3, dtype=F32),)),
        Case("a 3-D input (B, T, D) = (2, 3, 4) is an error: merge_heads takes (B, H, T, d_k)",
             (_randn(g, 2, 3, 4),), raises="ValueError"),
    ]


def _coded(B, T, D):
    """x[b, t, c] = 1000 b + 100 t + c: every value says where it came from."""
    return torch.tensor([[[1000.0 * b + 100 * t + c for c in range(D)] for t in range(T)] for b in range(B)],
                        dtype=F64)


def _where_from(v):
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0 and v == int(v)):
        return f"the value {v:.6g}"
    v = int(v)
    return f"x[{v // 1000}, {(v % 1000) // 100}, {v % 100}]"


def _split_heads_keeps_columns(fn):
    """Head h holds columns h*d_k .. (h+1)*d_k - 1 of the same position."""
    from . import _safe
    B, T, H, d_k = 2, 3, 3, 2
    x = _coded(B, T, H * d_k)
    out = _safe.call(fn, (x, H))
    if out.error is not None or out.timed_out or type(out.value) is not _safe.Tensor \
            or tuple(out.value.shape) != (B, H, T, d_k):
        return None  # reported by the case checks
    got = _nested(out.value)
    for b in range(B):
        for h in range(H):
            for t in range(T):
                for j in range(d_k):
                    want = 1000 * b + 100 * t + h * d_k + j
                    if got[b][h][t][j] != want:
                        return (f"with x[b, t, c] = 1000 b + 100 t + c of shape ({B}, {T}, {H * d_k}) and n_heads={H}, "
                                f"head h={h} at position t={t}, column {j} holds {_where_from(got[b][h][t][j])}; it "
                                f"must hold x[{b}, {t}, {h * d_k + j}]: head h is columns h*d_k .. (h+1)*d_k - 1 of "
                                f"the same position (reshape to (B, T, H, d_k), then swap the T and H axes)")
    return None


def _split_then_merge_is_identity(fn):
    """Merging the heads of split_heads(x) gives back x."""
    from . import _safe
    B, T, H, d_k = 2, 3, 3, 2
    x = _coded(B, T, H * d_k)
    heads = x.reshape(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k), the right split
    out = _safe.call(fn, (heads,))
    if out.error is not None or out.timed_out or type(out.value) is not _safe.Tensor \
            or tuple(out.value.shape) != (B, T, H * d_k):
        return None
    got = _nested(out.value)
    for b in range(B):
        for t in range(T):
            for c in range(H * d_k):
                if got[b][t][c] != 1000 * b + 100 * t + c:
                    return (f"merge_heads(split_heads(x)) is not x: with x[b, t, c] = 1000 b + 100 t + c, position "
                            f"({b}, {t}, {c}) holds {_where_from(got[b][t][c])}. Move the head axis back next to "
                            f"d_k (transpose (B, H, T, d_k) to (B, T, H, d_k)) before reshaping to (B, T, D)")
    return None


# ---------------------------------------------------------------- multi_head_attention
def _pad_mask(g, B, T_k):
    lengths = _lengths(g, B, T_k)
    return _valid(lengths, T_k)[:, None, :], f"padding mask (source lengths {lengths})"


def _mha_case(g, big):
    dtype = _dtype(g)
    B = _int(g, 1, 4 if big else 3)
    H, d_k = _heads(g, big, d_hi=4 if big else 3)
    D = H * d_k
    T_q = _int(g, 1, 7) if big else _int(g, 2, 5)
    cross = _int(g, 0, 1) == 0
    T_k = (_int(g, 0, 7) if big else _int(g, 2, 6)) if cross else T_q
    # without a mask only in cross-attention (or in the hidden part): a mask shows "mask ignored",
    # no mask lets "keys and values from x_q" run where T_k != T_q
    kind = _int(g, 0, 3) if big or cross else _int(g, 1, 3)
    if kind == 0 or T_k == 0:
        mask, mname = None, "no mask"
    elif kind == 1 and not cross:
        mask, mname = _causal(T_q), "causal mask"
    elif kind in (1, 2):
        mask, mname = _pad_mask(g, B, T_k)
    else:
        mask, mname = torch.rand(B, T_q, T_k, generator=g) > 0.4, "random mask (B, T_q, T_k)"
    x_q = _randn(g, B, T_q, D, dtype=dtype)
    x_kv = _randn(g, B, T_k, D, dtype=dtype) if cross else x_q
    what = (f"{'cross' if cross else 'self'}-attention, B={B}, T_q={T_q}, T_k={T_k}, D={D}, n_heads={H}, {mname}, "
            f"{_dn(dtype)}")
    return Case(what, (x_q, x_kv, _attn_params(g, D, dtype), H), {"mask": mask})


def _mha_edge():
    g = _gen(63)
    p6, p4 = _attn_params(g, 6), _attn_params(g, 4)
    x = _randn(g, 2, 5, 6)
    src = _randn(g, 2, 3, 6)
    dead = torch.ones(2, 5, 5, dtype=torch.bool)
    dead[1, 2] = False
    flat = dict(p6, W_q=torch.zeros(6, 6, dtype=F64), b_q=torch.zeros(6, dtype=F64))
    return [
        Case("n = 1: one query, one key", (x[:1, :1], x[:1, :1], p6, 2)),
        Case("one head (H = 1): single-head attention between projections", (x, x, p6, 1), {"mask": _causal(5)}),
        Case("d_k = 1 (H = D = 4)", (x[..., :4], x[..., :4], p4, 4), {"mask": _causal(5)}),
        Case("a causal mask (T, T) shared by the batch", (x, x, p6, 3), {"mask": _causal(5)}),
        Case("a padding mask (B, 1, T_k), lengths [5, 2]", (x, x, p6, 2), {"mask": _valid([5, 2], 5)[:, None, :]}),
        Case("cross-attention: T_q = 5 queries, T_k = 3 keys, source lengths [3, 1]", (x, src, p6, 3),
             {"mask": _valid([3, 1], 3)[:, None, :]}),
        Case("cross-attention without a mask: T_q = 5 queries read T_k = 3 keys", (x, src, p6, 2)),
        Case("a fully masked row: zero weights, output b_o", (x, x, p6, 2), {"mask": dead}),
        Case("an empty source (T_k = 0): zero weights, output b_o", (x, src[:, :0], p6, 2)),
        Case("all scores equal (W_q = 0, b_q = 0): uniform weights over the allowed keys", (x, x, flat, 2),
             {"mask": _causal(5)}),
        Case("float32", (x.float(), x.float(), _float32(p6), 2), {"mask": _causal(5)}),
        Case("d_model=6 is not divisible by n_heads=4: an error", (x, x, p6, 4), raises="ValueError"),
        Case("x_q of width D=6 and x_kv of width 4: an error", (x, x[..., :4], p6, 2), raises="ValueError"),
    ]


def _mha_weights_sum_to_one(fn):
    """Each head's weights of a query sum to 1 over the allowed keys; blocked keys get exactly 0."""
    from . import _safe
    g = _gen(64)
    B, T_q, T_k, D, H = 2, 4, 5, 6, 3
    x_q, x_kv = _randn(g, B, T_q, D), _randn(g, B, T_k, D)
    mask = torch.rand(B, T_q, T_k, generator=g) > 0.5
    mask[:, :, 0] = True
    out = _safe.call(fn, (x_q, x_kv, _attn_params(g, D), H), {"mask": mask})
    if out.error is not None or out.timed_out:
        return None
    v = out.value
    if not (isinstance(v, tuple) and len(v) == 2 and type(v[1]) is _safe.Tensor
            and tuple(v[1].shape) == (B, H, T_q, T_k)):
        return None
    w, allowed = _nested(v[1]), mask.tolist()
    for b in range(B):
        for h in range(H):
            for i in range(T_q):
                total = sum(w[b][h][i])
                if not abs(total - 1) < 1e-6:
                    return (f"the weights of query {i} in head {h} (batch {b}) sum to {total:.6g}, not 1: every "
                            f"head runs its own softmax over the keys (the last axis)")
                for j in range(T_k):
                    if not allowed[b][i][j] and w[b][h][i][j] != 0.0:
                        return (f"head {h}, query {i} (batch {b}) gives weight {w[b][h][i][j]:.3g} to key {j}, which "
                                f"the mask blocks: the same mask applies to every head")
    return None


# ---------------------------------------------------------------- sinusoidal_positions
BASES = (10000.0, 100.0, 1000.0, 10.0)


def _sin_case(g, big):
    dtype = _dtype(g)
    T, D = (_int(g, 0, 9), _int(g, 1, 12)) if big else (_int(g, 2, 8), _int(g, 3, 10))
    base = BASES[_int(g, 0, 3)]
    return Case(f"T={T}, D={D}, base={base:g}, {_dn(dtype)}", (T, D), {"base": base, "dtype": dtype})


def _sin_edge():
    return [
        Case("T = 1: position 0 is [sin 0, cos 0, ...] = [0, 1, 0, 1, ...]", (1, 6)),
        Case("an empty table (T = 0)", (0, 4)),
        Case("D = 1: a single sine column", (5, 1)),
        Case("D = 2: one frequency (1), sin p and cos p", (5, 2)),
        Case("an odd D keeps the last sine without its cosine", (4, 7)),
        Case("float64", (6, 8), {"dtype": F64}),
        Case("base = 100", (6, 8), {"base": 100.0, "dtype": F64}),
        Case("a longer table: T = 20, D = 64", (20, 64)),
        Case("D = 0 is an error", (3, 0), raises="ValueError"),
        Case("T = -1 is an error", (-1, 4), raises="ValueError"),
    ]


# ---------------------------------------------------------------- embed_with_positions
def _sinusoid_table(T, D):
    """The fixed table, written out here from the formula (not by the reference)."""
    return torch.tensor([[math.sin(p / 10000 ** (c / D)) if c % 2 == 0 else math.cos(p / 10000 ** ((c - 1) / D))
                          for c in range(D)] for p in range(T)], dtype=F64)


def _embed_case(g, big):
    dtype = _dtype(g)
    B, T = _int(g, 1, 4), _int(g, 0, 7) if big else _int(g, 2, 6)
    V, D = _int(g, 2, 10), _int(g, 1, 6)
    T_max = max(T, V) + _int(g, 0, 3)  # >= V, so that P[ids] (a known mistake) can be computed
    ids = torch.randint(0, V, (B, T), generator=g)
    return Case(f"ids ({B}, {T}), E ({V}, {D}), learned P ({T_max}, {D}), {_dn(dtype)}",
                (ids, _randn(g, V, D, dtype=dtype), _randn(g, T_max, D, dtype=dtype)))


def _embed_pos_edge():
    g = _gen(65)
    E, P = _randn(g, 6, 4), _randn(g, 8, 4)
    ids = torch.tensor([[1, 4, 4, 2], [5, 0, 3, 3]])
    return [
        Case("n = 1: B = T = 1", (torch.tensor([[3]]), E, P)),
        Case("T = T_max: the whole table is used", (torch.randint(0, 6, (2, 8), generator=g), E, P)),
        Case("an empty sequence (T = 0)", (torch.zeros(2, 0, dtype=torch.long), E, P)),
        Case("the same token at two positions gets two different vectors", (ids, E, P)),
        Case("a fixed sinusoidal table", (ids, E, _sinusoid_table(8, 4))),
        Case("float32", (ids, E.float(), P.float())),
        Case("T = 9 is longer than the positional table (T_max = 8): an error",
             (torch.zeros(1, 9, dtype=torch.long), E, P), raises="ValueError"),
        Case("E of width 4 and P of width 3: an error", (ids, E, P[:, :3]), raises="ValueError"),
    ]


# ---------------------------------------------------------------- encoder_block / decoder_block
def _block_case(g, big, T_lo=2):
    dtype = _dtype(g)
    B = _int(g, 1, 3)
    T = _int(g, 1, 7) if big else _int(g, T_lo, 6)
    H, d_k = _heads(g, big, d_lo=2, d_hi=3, min_D=4)
    D, F = H * d_k, _int(g, 2, 8)
    if big and _int(g, 0, 3) == 0:
        valid, vname = None, "no padding"
    else:
        lengths = _lengths(g, B, T, lo=0 if big else 1)
        valid, vname = _valid(lengths, T), f"lengths {lengths}"
    return Case(f"B={B}, T={T}, D={D}, n_heads={H}, F={F}, {vname}, {_dn(dtype)}",
                (_randn(g, B, T, D, dtype=dtype), valid, _block_params(g, D, F, dtype), H))


def _block_edge(seed, first="n = 1: one token, which attends to itself"):
    g = _gen(seed)
    p6, p8 = _block_params(g, 6, 5), _block_params(g, 8, 7)
    x, x8 = _randn(g, 3, 5, 6), _randn(g, 2, 4, 8)
    return [
        Case(first, (x[:1, :1], None, p6, 2)),
        Case("no padding (valid=None)", (x, None, p6, 3)),
        Case("a padded batch, lengths [5, 3, 1]", (x, _valid([5, 3, 1], 5), p6, 2)),
        Case("one sequence is all padding, lengths [4, 0]", (x8, _valid([4, 0], 4), p8, 2)),
        Case("one head (H = 1)", (x, _valid([5, 4, 2], 5), p6, 1)),
        Case("four heads of width d_k = 2", (x8, _valid([2, 4], 4), p8, 4)),
        Case("float32", (x8.float(), _valid([3, 4], 4), _float32(p8), 2)),
    ]


def _decoder_no_future_leak(fn):
    """Changing the token at j must not move the decoder block's output at any i < j."""
    g = _gen(66)
    return _no_future_leak(fn, (_randn(g, 1, 6, 6), None, _block_params(g, 6, 5), 2), 0, 6, False)


def _encoder_padding_is_invisible(fn):
    """Changing a padding token does not move the output at any real position."""
    from . import _safe
    g = _gen(67)
    x, p = _randn(g, 2, 5, 6), _block_params(g, 6, 5)
    lengths = [5, 2]
    valid = _valid(lengths, 5)
    base = _safe.call(fn, (x, valid, p, 2))
    if base.error is not None or base.timed_out or type(base.value) is not _safe.Tensor \
            or tuple(base.value.shape) != (2, 5, 6):
        return None
    out0 = _nested(base.value)
    for j in (4, 3, 2):
        x2 = _safe.clone(x)
        x2[1, j] += 3.0
        moved = _safe.call(fn, (x2, valid, p, 2))
        if moved.error is not None or moved.timed_out or type(moved.value) is not _safe.Tensor \
                or tuple(moved.value.shape) != (2, 5, 6):
            return None
        out1 = _nested(moved.value)
        for i in range(lengths[1]):
            if any(abs(u - w) > 1e-9 * (1 + abs(u)) for u, w in zip(out0[1][i], out1[1][i])):
                return (f"padding leaks: in a sequence of length 2 padded to T=5, the output at the real position "
                        f"i={i} changed when the padding token at j={j} changed. Keys where valid is False must "
                        f"be blocked (mask valid[:, None, :], shape (B, 1, T))")
    return None


# ---------------------------------------------------------------- masked_lm_loss
def _mlm_case(g, big):
    dtype = _dtype(g)
    B, T, V = _int(g, 1, 4), _int(g, 2, 7), _int(g, 2, 10)
    is_masked = torch.rand(B, T, generator=g) < 0.4
    flat = is_masked.view(-1)
    if not big:  # at least two masked and one unmasked position, so that every known mistake shows
        order = torch.randperm(flat.numel(), generator=g)
        flat[order[:2]] = True
        flat[order[-1]] = False
    return Case(f"B={B}, T={T}, V={V}, {int(is_masked.sum())} masked positions, {_dn(dtype)}",
                (_randn(g, B, T, V, dtype=dtype, scale=2.0), torch.randint(0, V, (B, T), generator=g), is_masked))


def _mlm_edge():
    g = _gen(68)
    logits, targets = _randn(g, 2, 4, 5, scale=2.0), torch.randint(0, 5, (2, 4), generator=g)
    some = torch.tensor([[True, False, False, True], [False, True, False, False]])
    return [
        Case("no position is masked: the loss is 0, never NaN",
             (logits, targets, torch.zeros(2, 4, dtype=torch.bool))),
        Case("every position is masked: the plain mean", (logits, targets, torch.ones(2, 4, dtype=torch.bool))),
        Case("exactly one masked position",
             (logits, targets, torch.tensor([[False, False, True, False], [False] * 4]))),
        Case("unmasked targets hold -100 (ignore_index style)", (logits, targets.masked_fill(~some, -100), some)),
        Case("uniform logits: each masked token costs log V", (torch.zeros(2, 4, 5, dtype=F64), targets, some)),
        Case("confident logits (1e3) stay finite",
             (torch.tensor([[[1e3, 0.0], [0.0, 1e3]]], dtype=F64), torch.tensor([[1, 1]]),
              torch.tensor([[True, True]]))),
        Case("float32", (logits.float(), targets, some)),
        Case("is_masked of shape (2, 3) for targets (2, 4): an error", (logits, targets, some[:, :3]),
             raises="ValueError"),
        Case("logits for T = 3 positions, targets for T = 4: an error", (logits[:, :3], targets, some),
             raises="ValueError"),
    ]


# ---------------------------------------------------------------- rope
def _rope_case(g, big):
    dtype = _dtype(g)
    T = _int(g, 0, 7) if big else _int(g, 2, 6)
    d = 2 * (_int(g, 1, 4) if big else _int(g, 2, 4))
    lead = [(), (_int(g, 1, 3),), (_int(g, 1, 3), _int(g, 1, 3))][_int(g, 0, 2)]
    kind = _int(g, 0, 2)
    if kind == 0:
        positions, pname = None, "positions 0 .. T-1"
    elif kind == 1:
        start = _int(g, 1, 20)
        positions, pname = torch.arange(start, start + T), f"positions {start} .. {start + T - 1}"
    else:
        positions = torch.randperm(T, generator=g) * _int(g, 1, 5)
        pname = f"positions {positions.tolist()}"
    base = (10000.0, 100.0)[_int(g, 0, 1)]
    return Case(f"x {lead + (T, d)}, {pname}, base={base:g}, {_dn(dtype)}",
                (_randn(g, *lead, T, d, dtype=dtype),), {"positions": positions, "base": base})


def _rope_edge():
    g = _gen(69)
    x = _randn(g, 2, 3, 4, 8)
    return [
        Case("n = 1: position 0 is not rotated", (_randn(g, 1, 4),)),
        Case("d = 2: one pair, rotated by the angle p", (_randn(g, 5, 2),)),
        Case("the queries of every head at once, (B, H, T, d)", (x,)),
        Case("continuing at positions 5 .. 8 (a KV cache)", (x,), {"positions": torch.arange(5, 9)}),
        Case("an empty sequence (T = 0)", (_randn(g, 2, 0, 4),)),
        Case("large positions (1000 .. 1003)", (x,), {"positions": torch.arange(1000, 1004)}),
        Case("base = 100", (x,), {"base": 100.0}),
        Case("float32", (x.float(),)),
        Case("an odd width d = 5 is an error", (_randn(g, 3, 5),), raises="ValueError"),
        Case("3 positions for 4 rows: an error", (x,), {"positions": torch.arange(3)}, raises="ValueError"),
    ]


def _rope_relative_offset(fn):
    """The score of a rotated query at m and a rotated key at n depends on m - n only."""
    from . import _safe
    g = _gen(70)
    q, k = _randn(g, 1, 8), _randn(g, 1, 8)

    def rotated(x, p):
        out = _safe.call(fn, (x,), {"positions": torch.tensor([p])})
        if out.error is not None or out.timed_out or type(out.value) is not _safe.Tensor \
                or tuple(out.value.shape) != (1, 8):
            return None
        return _nested(out.value)[0]

    for m, n, s in ((3, 1, 5), (0, 4, 7), (2, 2, 11), (6, 0, 40)):
        rows = [rotated(q, m), rotated(k, n), rotated(q, m + s), rotated(k, n + s)]
        if any(r is None for r in rows):
            return None
        s1 = sum(a * b for a, b in zip(rows[0], rows[1]))
        s2 = sum(a * b for a, b in zip(rows[2], rows[3]))
        if not abs(s1 - s2) <= 1e-9 * (1 + abs(s1)):
            return (f"the score of a rotated query and key must depend on their offset m - n only: at m={m}, n={n} "
                    f"it is {s1:.6g}, shifted by {s} to m={m + s}, n={n + s} it is {s2:.6g}. Rotate each pair of "
                    f"columns by the angle p * theta_i of the row's own position p")
    return None


# ---------------------------------------------------------------- rope_attention
def _rope_attn_case(g, big):
    dtype = _dtype(g)
    B = _int(g, 1, 3)
    T = _int(g, 1, 7) if big else _int(g, 2, 6)
    H, d_k = _heads(g, big, d_lo=1, d_hi=2)
    d_k *= 2
    D = H * d_k
    kind = _int(g, 0, 3) if big else _int(g, 1, 3)
    if kind == 0:
        mask, mname = None, "no mask"
    elif kind == 1:
        mask, mname = _causal(T), "causal mask"
    elif kind == 2:
        mask, mname = _pad_mask(g, B, T)
    else:
        lengths = _lengths(g, B, T)
        mask, mname = _causal(T) & _valid(lengths, T)[:, None, :], f"causal and padding mask (lengths {lengths})"
    return Case(f"B={B}, T={T}, D={D}, n_heads={H}, {mname}, {_dn(dtype)}",
                (_randn(g, B, T, D, dtype=dtype), _attn_params(g, D, dtype), H), {"mask": mask})


def _rope_attn_edge():
    g = _gen(71)
    p8 = _attn_params(g, 8)
    x = _randn(g, 2, 5, 8)
    dead = torch.ones(2, 5, 5, dtype=torch.bool)
    dead[0, 3] = False
    return [
        Case("n = 1: one token at position 0, nothing is rotated", (x[:1, :1], p8, 2)),
        Case("a causal mask", (x, p8, 2), {"mask": _causal(5)}),
        Case("no mask: RoPE alone tells the positions apart", (x, p8, 2)),
        Case("one head (H = 1, d_k = 8)", (x, p8, 1), {"mask": _causal(5)}),
        Case("four heads of width d_k = 2", (x, p8, 4), {"mask": _causal(5)}),
        Case("a padding mask (B, 1, T), lengths [5, 2]", (x, p8, 2), {"mask": _valid([5, 2], 5)[:, None, :]}),
        Case("a fully masked row: zero weights, output b_o", (x, p8, 2), {"mask": dead}),
        Case("float32", (x.float(), _float32(p8), 2), {"mask": _causal(5)}),
        Case("d_model=8 is not divisible by n_heads=3: an error", (x, p8, 3), raises="ValueError"),
        Case("an odd head width d_k = 3 (D = 6, n_heads = 2) cannot be rotated: an error",
             (x[..., :6], _attn_params(g, 6), 2), raises="ValueError"),
    ]


def _rope_attention_no_future_leak(fn):
    """With a causal mask, changing the token at j must not move the output at any i < j."""
    g = _gen(72)
    T = 6
    return _no_future_leak(fn, (_randn(g, 1, T, 8), _attn_params(g, 8), 2), 0, T, True,
                           kwargs={"mask": _causal(T)})


# ---------------------------------------------------------------- lm_log_prob
def _lm_case(g, big):
    dtype = _dtype(g)
    B, V = _int(g, 1, 4), _int(g, 2, 10)
    T = _int(g, 0, 7) if big else _int(g, 3, 7)
    logits = _randn(g, B, T, V, dtype=dtype, scale=2.0)
    ids = torch.randint(0, V, (B, T), generator=g)
    if big and _int(g, 0, 3) == 0:
        return Case(f"B={B}, T={T}, V={V}, no padding (valid=None), {_dn(dtype)}", (logits, ids))
    lengths = _lengths(g, B, T, lo=0 if big else 3)
    valid = _valid(lengths, T)
    return Case(f"B={B}, T={T}, V={V}, lengths {lengths}, {_dn(dtype)}", (logits, ids.masked_fill(~valid, 0), valid))


def _lm_edge():
    g = _gen(73)
    logits = _randn(g, 3, 5, 6, scale=2.0)
    ids = torch.randint(0, 6, (3, 5), generator=g)
    valid = _valid([5, 3, 1], 5)
    return [
        Case("T = 1: nothing to predict, log P = 0", (logits[:, :1], ids[:, :1])),
        Case("T = 2: one next token", (logits[:, :2], ids[:, :2])),
        Case("uniform logits: log P = -(T - 1) log V", (torch.zeros(2, 4, 6, dtype=F64), ids[:2, :4])),
        Case("a padded batch, lengths [5, 3, 1] (the last has only its first token)",
             (logits, ids.masked_fill(~valid, 0), valid)),
        Case("a sequence that is all padding", (logits[:2], ids[:2], _valid([4, 0], 5))),
        Case("valid=None: every token is real", (logits, ids)),
        Case("an unlikely next token under confident logits (1e3): log P = -1000, finite (log of softmax "
             "would give -inf)", (torch.tensor([[[1e3, 0.0], [0.0, 1e3]]], dtype=F64), torch.tensor([[0, 1]]))),
        Case("float32", (logits.float(), ids, valid)),
        Case("logits for T = 4 positions, ids for T = 5: an error", (logits[:, :4], ids), raises="ValueError"),
        Case("valid of shape (3, 4) for ids (3, 5): an error", (logits, ids, valid[:, :4]), raises="ValueError"),
    ]


# ---------------------------------------------------------------- cross_attention
def _cross_case(g, big):
    dtype = _dtype(g)
    B = _int(g, 1, 3)
    H, d_k = _heads(g, big, d_hi=4 if big else 3)
    D = H * d_k
    T_y = _int(g, 1, 7) if big else _int(g, 2, 5)
    # T_x = T_y in a third of the cases: that is where "keys and values from the decoder" even runs with a mask
    T_x = T_y if _int(g, 0, 2) == 0 else (_int(g, 0, 7) if big else _int(g, 2, 6))
    if (big and _int(g, 0, 3) == 0) or T_x == 0:
        src_valid, sname = None, "no source padding"
    else:
        lengths = _lengths(g, B, T_x, lo=0 if big else 1)
        src_valid, sname = _valid(lengths, T_x), f"source lengths {lengths}"
    return Case(f"B={B}, T_y={T_y}, T_x={T_x}, D={D}, n_heads={H}, {sname}, {_dn(dtype)}",
                (_randn(g, B, T_y, D, dtype=dtype), _randn(g, B, T_x, D, dtype=dtype), src_valid,
                 _attn_params(g, D, dtype), H))


def _cross_edge():
    g = _gen(74)
    p6 = _attn_params(g, 6)
    y, mem = _randn(g, 2, 4, 6), _randn(g, 2, 5, 6)
    return [
        Case("T_y = 1: one target position", (y[:, :1], mem, _valid([5, 3], 5), p6, 2)),
        Case("T_x = 1: one source token takes all the weight", (y, mem[:, :1], None, p6, 2)),
        Case("an empty source (T_x = 0): zero weights, output b_o", (y, mem[:, :0], _valid([0, 0], 0), p6, 2)),
        Case("one source is all padding, lengths [5, 0]", (y, mem, _valid([5, 0], 5), p6, 3)),
        Case("src_valid=None: every source token is real", (y, mem, None, p6, 3)),
        Case("T_y = 4 targets, T_x = 5 sources, lengths [5, 2]", (y, mem, _valid([5, 2], 5), p6, 2)),
        Case("T_y = T_x = 4, lengths [4, 2]", (y, mem[:, :4], _valid([4, 2], 4), p6, 2)),
        Case("one head (H = 1)", (y, mem, _valid([4, 5], 5), p6, 1)),
        Case("float32", (y.float(), mem.float(), _valid([5, 2], 5), _float32(p6), 2)),
        Case("d_model=6 is not divisible by n_heads=4: an error", (y, mem, None, p6, 4), raises="ValueError"),
        Case("memory for B = 1 sentence, y for B = 2: an error", (y, mem[:1], None, p6, 2), raises="ValueError"),
        Case("src_valid of shape (2, 4) for memory (2, 5, 6): an error", (y, mem, _valid([4, 2], 4), p6, 2),
             raises="ValueError"),
    ]


def _cross_weights_sum_to_one(fn):
    """Every row of weights sums to 1 over the real source tokens and is 0 on source padding."""
    from . import _safe
    g = _gen(75)
    B, T_y, T_x, D, H = 3, 3, 5, 6, 2
    lengths = [5, 2, 0]
    out = _safe.call(fn, (_randn(g, B, T_y, D), _randn(g, B, T_x, D), _valid(lengths, T_x), _attn_params(g, D), H))
    if out.error is not None or out.timed_out:
        return None
    v = out.value
    if not (isinstance(v, tuple) and len(v) == 2 and type(v[1]) is _safe.Tensor
            and tuple(v[1].shape) == (B, H, T_y, T_x)):
        return None
    w = _nested(v[1])
    for b, n in enumerate(lengths):
        for h in range(H):
            for i in range(T_y):
                pad = [j for j in range(n, T_x) if w[b][h][i][j] != 0.0]
                if pad:
                    return (f"target position {i} (head {h}, batch {b}) gives weight {w[b][h][i][pad[0]]:.3g} to "
                            f"source token {pad[0]}, which is padding (the source has {n} real tokens): block it "
                            f"with src_valid[:, None, :]")
                total = sum(w[b][h][i][:n])
                want = 1.0 if n else 0.0
                if not abs(total - want) < 1e-6:
                    return (f"target position {i} (head {h}, batch {b}) has weights summing to {total:.6g} over the "
                            f"{n} real source tokens; they must sum to {want:g}"
                            + (" (no real source token: nothing to attend to, all weights 0)" if not n else
                               ": every target position may attend to every real source token, no causal mask"))
    return None


# ---------------------------------------------------------------- encdec_decoder_block
def _encdec_case(g, big):
    dtype = _dtype(g)
    B = _int(g, 1, 3)
    H, d_k = _heads(g, big, d_lo=2, d_hi=3, min_D=4)
    D, F = H * d_k, _int(g, 2, 8)
    T_y = _int(g, 1, 6) if big else _int(g, 2, 5)
    T_x = T_y if _int(g, 0, 2) == 0 else (_int(g, 0, 6) if big else _int(g, 2, 6))
    if big and _int(g, 0, 3) == 0:
        tgt_valid, src_valid, vname = None, None, "no padding"
    else:
        lt, ls = _lengths(g, B, T_y), _lengths(g, B, T_x, lo=0 if big else 1)
        tgt_valid, src_valid = _valid(lt, T_y), _valid(ls, T_x)
        vname = f"target lengths {lt}, source lengths {ls}"
    return Case(f"B={B}, T_y={T_y}, T_x={T_x}, D={D}, n_heads={H}, F={F}, {vname}, {_dn(dtype)}",
                (_randn(g, B, T_y, D, dtype=dtype), _randn(g, B, T_x, D, dtype=dtype), tgt_valid, src_valid,
                 _encdec_params(g, D, F, dtype), H))


def _encdec_edge():
    g = _gen(76)
    p6 = _encdec_params(g, 6, 5)
    y, mem = _randn(g, 2, 4, 6), _randn(g, 2, 5, 6)
    tv, sv = _valid([4, 2], 4), _valid([5, 3], 5)
    return [
        Case("the first decoder position (T_y = 1)", (y[:, :1], mem, tv[:, :1], sv, p6, 2)),
        Case("an empty source (T_x = 0): cross-attention adds only b_o", (y, mem[:, :0], tv, _valid([0, 0], 0), p6, 2)),
        Case("padded targets [4, 2] and sources [5, 3]", (y, mem, tv, sv, p6, 2)),
        Case("no padding (both masks None)", (y, mem, None, None, p6, 3)),
        Case("one source is all padding, lengths [5, 0]", (y, mem, tv, _valid([5, 0], 5), p6, 2)),
        Case("T_x = T_y = 4", (y, mem[:, :4], tv, _valid([4, 1], 4), p6, 2)),
        Case("one head (H = 1)", (y, mem, tv, sv, p6, 1)),
        Case("float32", (y.float(), mem.float(), tv, sv, _float32(p6), 2)),
        Case("d_model=6 is not divisible by n_heads=4: an error", (y, mem, tv, sv, p6, 4), raises="ValueError"),
    ]


def _encdec_no_future_leak(fn):
    """Changing the target token at j must not move the block's output at any i < j (the source stays)."""
    g = _gen(77)
    T = 5
    args = (_randn(g, 1, T, 6), _randn(g, 1, 4, 6), None, _valid([3], 4), _encdec_params(g, 6, 5), 2)
    return _no_future_leak(fn, args, 0, T, True, "the target token")


# ---------------------------------------------------------------- the registry
CAUSAL_LESSON = "query i may attend to key j only if j <= i"

register(
    # 06 encoder
    Exercise("split_heads", NB6, "encoder:split_heads", _split_case, _split_edge,
             given=("coursekit.blocks:split_heads",),
             properties=[("edge", _split_heads_keeps_columns), ("hidden", _split_heads_keeps_columns)],
             mistakes=[(M + "split_heads_no_transpose",
                        "the heads were cut from the wrong columns: reshaping (B, T, D) straight to (B, H, T, d_k) "
                        "mixes positions; reshape to (B, T, H, d_k) first, then swap the T and H axes with "
                        "transpose(1, 2)")]),
    Exercise("merge_heads", NB6, "encoder:merge_heads", _merge_case, _merge_edge,
             given=("coursekit.blocks:merge_heads",),
             properties=[("edge", _split_then_merge_is_identity), ("hidden", _split_then_merge_is_identity)],
             mistakes=[(M + "merge_heads_no_transpose",
                        "the heads were merged in the wrong order: transpose (B, H, T, d_k) back to (B, T, H, d_k) "
                        "before reshaping to (B, T, D), so that each position gets its own heads side by side")]),
    Exercise("multi_head_attention", NB6, "encoder:multi_head_attention", _mha_case, _mha_edge,
             given=("coursekit.blocks:multi_head_attention",),
             properties=[("edge", _mha_weights_sum_to_one), ("hidden", _mha_weights_sum_to_one)],
             uses=("split_heads", "merge_heads"),
             mistakes=[(M + "mha_no_output_projection",
                        "the output projection is missing: after merging the heads, multiply by W_o^T and add b_o"),
                       (M + "mha_mask_ignored",
                        "the mask was ignored: pass it to masked attention, with a head axis added "
                        "(mask[:, None]) so that the same mask applies to every head"),
                       (M + "mha_scaled_by_sqrt_D",
                        "the scores were divided by sqrt(D), the model width; each head divides its scores by "
                        "sqrt(d_k), its own width d_k = D / H"),
                       (M + "mha_kv_from_queries",
                        "the keys and values were projected from x_q; they come from x_kv (the positions that "
                        "answer), only the queries come from x_q")],
             n_basic=8, n_hidden=16),
    Exercise("sinusoidal_positions", NB6, "encoder:sinusoidal_positions", _sin_case, _sin_edge,
             given=("coursekit.transformer:sinusoidal_table",),
             mistakes=[(M + "sinusoidal_freq_i_over_D",
                        "the frequencies are wrong: column pair i uses the angle p / base^(2i / D), with 2i (the "
                        "even column's index) in the exponent, not i"),
                       (M + "sinusoidal_halves",
                        "the sines and cosines were put in two halves; they interleave: column 2i holds the sine "
                        "and column 2i + 1 the cosine of the same frequency"),
                       (M + "sinusoidal_sin_cos_swapped",
                        "sine and cosine are swapped: the even columns 2i hold sin(p / base^(2i / D)) and the odd "
                        "columns 2i + 1 the cosine, so that position 0 reads [0, 1, 0, 1, ...]")],
             n_basic=8, n_hidden=16),
    Exercise("embed_with_positions", NB6, "encoder:embed_with_positions", _embed_case, _embed_pos_edge,
             given=("coursekit.blocks:embed_with_positions",),
             mistakes=[(M + "embed_positions_added_twice",
                        "the positional encodings were added twice: x[b, t] = E[ids[b, t]] + P[t], once"),
                       (M + "embed_positions_by_token_id",
                        "the positional table was indexed by the token ids (P[ids]); it is indexed by the position: "
                        "x[b, t] = E[ids[b, t]] + P[t], i.e. add P[:T]")]),
    Exercise("encoder_block", NB6, "encoder:encoder_block", _block_case, lambda: _block_edge(78),
             given=("coursekit.blocks:encoder_block",),
             properties=[("edge", _encoder_padding_is_invisible), ("hidden", _encoder_padding_is_invisible)],
             uses=("multi_head_attention",),
             mistakes=[(M + "encoder_block_no_attn_residual",
                        "the residual around attention is missing: h = LayerNorm(x + MultiHeadAttention(x)), "
                        "adding the block's input x back before the first layer norm"),
                       (M + "encoder_block_no_ffn_residual",
                        "the residual around the feed-forward network is missing: out = LayerNorm(h + FFN(h))"),
                       (M + "encoder_block_pre_norm",
                        "this is a pre-norm block (x + Attention(LayerNorm(x))); the notes' block is post-norm: "
                        "LayerNorm(x + Attention(x)), the layer norm after the residual sum"),
                       (M + "encoder_block_padding_ignored",
                        "the padding was not blocked: keys where valid is False must get no attention, with the "
                        "mask valid[:, None, :] of shape (B, 1, T)"),
                       (M + "encoder_block_causal",
                        "a causal mask was applied, but an encoder is bidirectional: every position may attend to "
                        "every real token, before and after it; only padding is blocked")],
             n_basic=6, n_hidden=12),
    Exercise("masked_lm_loss", NB6, "encoder:masked_lm_loss", _mlm_case, _mlm_edge,
             conditioning=logit_sum_scale,
             mistakes=[(M + "masked_lm_loss_mean_over_all",
                        "the loss was averaged over every position; BERT scores only the masked positions, so "
                        "average the cross-entropy over the positions where is_masked is True"),
                       (M + "masked_lm_loss_sum",
                        "the masked positions' losses were summed; the loss is their mean: divide by the number "
                        "of masked positions"),
                       (M + "masked_lm_loss_divided_by_all",
                        "the masked positions' losses were divided by B * T, the number of all positions; divide by "
                        "the number of masked positions")]),
    # 07 decoder
    Exercise("rope", NB7, "decoder:rope", _rope_case, _rope_edge,
             properties=[("edge", _rope_relative_offset), ("hidden", _rope_relative_offset)],
             mistakes=[(M + "rope_wrong_frequencies",
                        "the frequencies are wrong: pair i turns by theta_i = base^(-2i / d), with 2i (the even "
                        "column's index) in the exponent, not i"),
                       (M + "rope_rotates_backwards",
                        "the rotation goes the wrong way (the sine's sign is flipped): out[2i] = x[2i] cos - "
                        "x[2i+1] sin and out[2i+1] = x[2i] sin + x[2i+1] cos"),
                       (M + "rope_pairs_halves",
                        "the columns were paired across the two halves (i with i + d/2); the notes' RoPE rotates "
                        "adjacent columns, the pair (2i, 2i + 1)")]),
    Exercise("rope_attention", NB7, "decoder:rope_attention", _rope_attn_case, _rope_attn_edge,
             properties=[("edge", _rope_attention_no_future_leak), ("hidden", _rope_attention_no_future_leak)],
             uses=("rope",),
             mistakes=[(M + "rope_attention_values_rotated",
                        "the values were rotated too; RoPE rotates only the queries and the keys, whose dot "
                        "product then depends on the offset, and leaves the values as they are"),
                       (M + "rope_attention_queries_only",
                        "only the queries were rotated; rotate the keys too, so that the score q_m . k_n depends "
                        "on the offset m - n"),
                       (M + "rope_attention_before_split",
                        "RoPE was applied over the whole width D before splitting into heads; split first, then "
                        "rotate each head's queries and keys over its own d_k columns"),
                       (M + "rope_attention_without_rope",
                        "nothing was rotated: this is plain multi-head attention; rotate every head's queries and "
                        "keys with rope after splitting the heads")],
             n_basic=6, n_hidden=12),
    Exercise("decoder_block", NB7, "decoder:decoder_block", _block_case,
             lambda: _block_edge(79, "the first decoder position (T = 1): it attends to itself alone"),
             given=("coursekit.blocks:decoder_block",),
             properties=[("edge", _decoder_no_future_leak), ("hidden", _decoder_no_future_leak)],
             mistakes=[(M + "decoder_block_no_causal_mask",
                        f"the causal mask is missing, so the future leaks: {CAUSAL_LESSON} (and key j is real)"),
                       (M + "decoder_block_causal_transposed",
                        f"the causal mask is transposed (upper-triangular): {CAUSAL_LESSON}, so True belongs on "
                        f"and below the diagonal (tril)"),
                       (M + "decoder_block_padding_ignored",
                        f"the padding was not blocked: combine the causal mask with the padding mask, {CAUSAL_LESSON} "
                        f"and key j is a real token (valid[:, None, :])"),
                       (M + "decoder_block_no_attn_residual",
                        "the residual around attention is missing: h = LayerNorm(x + CausalSelfAttention(x))"),
                       (M + "decoder_block_no_ffn_residual",
                        "the residual around the feed-forward network is missing: out = LayerNorm(h + FFN(h))")],
             n_basic=6, n_hidden=12),
    Exercise("lm_log_prob", NB7, "decoder:lm_log_prob", _lm_case, _lm_edge,
             conditioning=logit_sum_scale,
             mistakes=[(M + "lm_log_prob_not_shifted",
                        "the targets are not shifted: logits[:, t] predicts the next token ids[:, t + 1], so score "
                        "logits[:, :-1] against ids[:, 1:]"),
                       (M + "lm_log_prob_counts_padding",
                        "padding tokens were scored too: only real next tokens (valid[:, 1:] True) count"),
                       (M + "lm_log_prob_mean",
                        "the log-probabilities were averaged; by the chain rule log P(x) is their sum over the "
                        "real next tokens")]),
    # 08 encoder-decoder
    Exercise("cross_attention", NB8, "encoder_decoder:cross_attention", _cross_case, _cross_edge,
             properties=[("edge", _cross_weights_sum_to_one), ("hidden", _cross_weights_sum_to_one)],
             mistakes=[(M + "cross_attention_kv_from_decoder",
                        "the keys and values came from the decoder (this is self-attention on y); in "
                        "cross-attention only the queries come from y, the keys and values from the encoder's "
                        "memory"),
                       (M + "cross_attention_causal",
                        "a causal mask was applied to cross-attention; the whole source is known, so every target "
                        "position may attend to every real source token, only source padding is blocked"),
                       (M + "cross_attention_padding_ignored",
                        "the source padding was not blocked: mask the keys with src_valid[:, None, :], shape "
                        "(B, 1, T_x)")],
             n_basic=8, n_hidden=16),
    Exercise("encdec_decoder_block", NB8, "encoder_decoder:encdec_decoder_block", _encdec_case, _encdec_edge,
             properties=[("edge", _encdec_no_future_leak), ("hidden", _encdec_no_future_leak)],
             uses=("cross_attention",),
             mistakes=[(M + "encdec_cross_before_self",
                        "the sub-layers are in the wrong order: causal self-attention comes first (with ln1), "
                        "then cross-attention on its output (with ln2), then the feed-forward network (ln3)"),
                       (M + "encdec_kv_from_decoder",
                        "cross-attention took its keys and values from the decoder; they come from the encoder's "
                        "memory, only the queries from the decoder's h1"),
                       (M + "encdec_causal_cross",
                        "a causal mask was applied to cross-attention; only self-attention is causal, cross-"
                        "attention may read every real source token"),
                       (M + "encdec_no_causal_self",
                        f"self-attention has no causal mask, so the future leaks: {CAUSAL_LESSON} (and key j is a "
                        f"real target token)"),
                       (M + "encdec_no_cross_residual",
                        "the residual around cross-attention is missing: h2 = LayerNorm(h1 + CrossAttention(h1, "
                        "memory))")],
             n_basic=6, n_hidden=12),
)
