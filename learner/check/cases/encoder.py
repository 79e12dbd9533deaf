"""Notebook 06, the encoder: cases, properties and known mistakes.

The weights are random and seeded, in the dict layout of ``solutions/encoder.py``
(``common.attn_params``, ``common.block_params`` and friends). Masks are bool,
True = may attend; padding is on the right.

Random cases of the visible "basic" part are chosen so that every known mistake
shows: at least two heads (one head hides a wrong split or a per-head scale), at
least two positions (one position hides a causal mask and a rotation), padding
that leaves some row shorter than T, and widths of four and more (a layer norm
over two numbers keeps only their sign).
"""
import math

import torch

from .. import safe
from .common import (REVERSED_LESSON, Case, Exercise, F32, F64, dn, gen, learner_tensor, logit_sum_scale, nested,
                     pick_dtype, pick_int, seeded_randn, register, Choice, Integer, question)
from .transformer_parts import (as_float32, attn_params, block_case, block_edge, block_params, causal_mask,
                                pick_heads, random_padding_mask, valid_mask)
from .probe import probe_case, probe_edge, probe_reads_the_word_only



# ---------------------------------------------------------------- split_heads / merge_heads
def _split_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 4), pick_int(g, 0, 7) if big else pick_int(g, 2, 6)
    H, d_k = pick_heads(g, big)
    return Case(f"x ({B}, {T}, {H * d_k}), n_heads={H}, {dn(dtype)}", (seeded_randn(g, B, T, H * d_k, dtype=dtype), H))


def _split_edge():
    g = gen(61)
    return [
        Case("n = 1: B = T = 1, two heads", (seeded_randn(g, 1, 1, 4), 2)),
        Case("one head: only a heads axis is added", (seeded_randn(g, 2, 3, 4), 1)),
        Case("d_k = 1: one column per head (H = D)", (seeded_randn(g, 2, 3, 4), 4)),
        Case("an empty sequence (T = 0)", (seeded_randn(g, 2, 0, 6), 3)),
        Case("float32", (seeded_randn(g, 3, 5, 6, dtype=F32), 2)),
        Case("d_model=6 is not divisible by n_heads=4: an error", (seeded_randn(g, 2, 3, 6), 4), raises="ValueError"),
        Case("x without a batch axis, (T, D) = (3, 4): an error", (seeded_randn(g, 3, 4), 2), raises="ValueError"),
    ]


def _merge_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 4), pick_int(g, 0, 7) if big else pick_int(g, 2, 6)
    H, d_k = pick_heads(g, big)
    return Case(f"x ({B}, {H}, {T}, {d_k}), {dn(dtype)}", (seeded_randn(g, B, H, T, d_k, dtype=dtype),))


def _merge_edge():
    g = gen(62)
    return [
        Case("n = 1: B = T = 1, two heads", (seeded_randn(g, 1, 2, 1, 3),)),
        Case("one head: only the heads axis goes", (seeded_randn(g, 2, 1, 3, 4),)),
        Case("d_k = 1: one column per head", (seeded_randn(g, 2, 4, 3, 1),)),
        Case("an empty sequence (T = 0)", (seeded_randn(g, 2, 3, 0, 2),)),
        Case("float32", (seeded_randn(g, 3, 2, 5, 3, dtype=F32),)),
        Case("a 3-D input (B, T, D) = (2, 3, 4) is an error: merge_heads takes (B, H, T, d_k)",
             (seeded_randn(g, 2, 3, 4),), raises="ValueError"),
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
    B, T, H, d_k = 2, 3, 3, 2
    x = _coded(B, T, H * d_k)
    out = learner_tensor(fn, (x, H), shape=(B, H, T, d_k))
    if out is None:
        return None  # reported by the case checks
    got = nested(out)
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
    B, T, H, d_k = 2, 3, 3, 2
    x = _coded(B, T, H * d_k)
    heads = x.reshape(B, T, H, d_k).transpose(1, 2)  # (B, H, T, d_k), the right split
    out = learner_tensor(fn, (heads,), shape=(B, T, H * d_k))
    if out is None:
        return None
    got = nested(out)
    for b in range(B):
        for t in range(T):
            for c in range(H * d_k):
                if got[b][t][c] != 1000 * b + 100 * t + c:
                    return (f"merge_heads(split_heads(x)) is not x: with x[b, t, c] = 1000 b + 100 t + c, position "
                            f"({b}, {t}, {c}) holds {_where_from(got[b][t][c])}. Move the head axis back next to "
                            f"d_k (transpose (B, H, T, d_k) to (B, T, H, d_k)) before reshaping to (B, T, D)")
    return None


# ---------------------------------------------------------------- multi_head_attention
def _mha_case(g, big):
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 4 if big else 3)
    H, d_k = pick_heads(g, big, d_hi=4 if big else 3)
    D = H * d_k
    T_q = pick_int(g, 1, 7) if big else pick_int(g, 2, 5)
    cross = pick_int(g, 0, 1) == 0
    T_k = (pick_int(g, 0, 7) if big else pick_int(g, 2, 6)) if cross else T_q
    # without a mask only in cross-attention (or in the hidden part): a mask shows "mask ignored",
    # no mask lets "keys and values from x_q" run where T_k != T_q
    kind = pick_int(g, 0, 3) if big or cross else pick_int(g, 1, 3)
    if kind == 0 or T_k == 0:
        mask, mname = None, "no mask"
    elif kind == 1 and not cross:
        mask, mname = causal_mask(T_q), "causal mask"
    elif kind in (1, 2):
        mask, mname = random_padding_mask(g, B, T_k)
    else:
        mask, mname = torch.rand(B, T_q, T_k, generator=g) > 0.4, "random mask (B, T_q, T_k)"
    x_q = seeded_randn(g, B, T_q, D, dtype=dtype)
    x_kv = seeded_randn(g, B, T_k, D, dtype=dtype) if cross else x_q
    what = (f"{'cross' if cross else 'self'}-attention, B={B}, T_q={T_q}, T_k={T_k}, D={D}, n_heads={H}, {mname}, "
            f"{dn(dtype)}")
    return Case(what, (x_q, x_kv, attn_params(g, D, dtype), H), {"mask": mask})


def _mha_edge():
    g = gen(63)
    p6, p4 = attn_params(g, 6), attn_params(g, 4)
    x = seeded_randn(g, 2, 5, 6)
    src = seeded_randn(g, 2, 3, 6)
    dead = torch.ones(2, 5, 5, dtype=torch.bool)
    dead[1, 2] = False
    flat = dict(p6, W_q=torch.zeros(6, 6, dtype=F64), b_q=torch.zeros(6, dtype=F64))
    return [
        Case("n = 1: one query, one key", (x[:1, :1], x[:1, :1], p6, 2)),
        Case("one head (H = 1): single-head attention between projections", (x, x, p6, 1), {"mask": causal_mask(5)}),
        Case("d_k = 1 (H = D = 4)", (x[..., :4], x[..., :4], p4, 4), {"mask": causal_mask(5)}),
        Case("a causal mask (T, T) shared by the batch", (x, x, p6, 3), {"mask": causal_mask(5)}),
        Case("a padding mask (B, 1, T_k), lengths [5, 2]", (x, x, p6, 2), {"mask": valid_mask([5, 2], 5)[:, None, :]}),
        Case("cross-attention: T_q = 5 queries, T_k = 3 keys, source lengths [3, 1]", (x, src, p6, 3),
             {"mask": valid_mask([3, 1], 3)[:, None, :]}),
        Case("cross-attention without a mask: T_q = 5 queries read T_k = 3 keys", (x, src, p6, 2)),
        Case("a fully masked row: zero weights, output b_o", (x, x, p6, 2), {"mask": dead}),
        Case("an empty source (T_k = 0): zero weights, output b_o", (x, src[:, :0], p6, 2)),
        Case("all scores equal (W_q = 0, b_q = 0): uniform weights over the allowed keys", (x, x, flat, 2),
             {"mask": causal_mask(5)}),
        Case("float32", (x.float(), x.float(), as_float32(p6), 2), {"mask": causal_mask(5)}),
        Case("d_model=6 is not divisible by n_heads=4: an error", (x, x, p6, 4), raises="ValueError"),
        Case("x_q of width D=6 and x_kv of width 4: an error", (x, x[..., :4], p6, 2), raises="ValueError"),
    ]


def _mha_weights_sum_to_one(fn):
    """Each head's weights of a query sum to 1 over the allowed keys; blocked keys get exactly 0."""
    g = gen(64)
    B, T_q, T_k, D, H = 2, 4, 5, 6, 3
    x_q, x_kv = seeded_randn(g, B, T_q, D), seeded_randn(g, B, T_k, D)
    mask = torch.rand(B, T_q, T_k, generator=g) > 0.5
    mask[:, :, 0] = True
    weights = learner_tensor(fn, (x_q, x_kv, attn_params(g, D), H), {"mask": mask}, item=1, shape=(B, H, T_q, T_k))
    if weights is None:
        return None
    w, allowed = nested(weights), mask.tolist()
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
    dtype = pick_dtype(g)
    T, D = (pick_int(g, 0, 9), pick_int(g, 1, 12)) if big else (pick_int(g, 2, 8), pick_int(g, 3, 10))
    base = BASES[pick_int(g, 0, 3)]
    return Case(f"T={T}, D={D}, base={base:g}, {dn(dtype)}", (T, D), {"base": base, "dtype": dtype})


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


SINUSOID_FLOAT32_ANGLES = ("the angles were computed in float32: float32 keeps about 7 digits, so p / base^(2c / D) is off in "
                  "its last digits and so is every sine and cosine (the two numbers printed above differ past the "
                  "digits shown). Compute the positions, frequencies and angles in float64 (torch.arange(..., "
                  "dtype=torch.float64)) and convert the result to dtype at the end")


def _sin_angles_in_float64(fn):
    """A float64 table is right to float64's digits, not to float32's (the angles are computed in float64)."""
    T, D = 64, 16
    out = learner_tensor(fn, (T, D), {"dtype": F64}, shape=(T, D))
    if out is None or out.dtype != F64:  # a float32 result: its dtype is said by the cases
        return None
    truth = _sinusoid_table(T, D)
    p, two_c = torch.arange(T, dtype=F32)[:, None], torch.arange(0, D, 2, dtype=F32)  # the table made in float32
    angle = p / 10000.0 ** (two_c / D)
    in_float32 = torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2).double()
    off32 = (in_float32 - truth).abs().max().item()
    off = max(abs(a - b) for ra, rb in zip(nested(out), truth.tolist()) for a, b in zip(ra, rb))
    if off32 / 100 < off <= 100 * off32:  # off by about as much as float32's rounding: the angles were float32
        return f"the largest difference from the exact table is {off:.3g}, float32's rounding: {SINUSOID_FLOAT32_ANGLES}"
    return None


def _embed_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 4), pick_int(g, 0, 7) if big else pick_int(g, 2, 6)
    V, D = pick_int(g, 2, 10), pick_int(g, 1, 6)
    T_max = max(T, V) + pick_int(g, 0, 3)  # >= V, so that P[ids] (a known mistake) can be computed
    ids = torch.randint(0, V, (B, T), generator=g)
    return Case(f"ids ({B}, {T}), E ({V}, {D}), learned P ({T_max}, {D}), {dn(dtype)}",
                (ids, seeded_randn(g, V, D, dtype=dtype), seeded_randn(g, T_max, D, dtype=dtype)))


def _embed_pos_edge():
    g = gen(65)
    E, P = seeded_randn(g, 6, 4), seeded_randn(g, 8, 4)
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


# ---------------------------------------------------------------- encoder_block (cases: common.block_case)
def _encoder_padding_is_invisible(fn):
    """Changing a padding token does not move the output at any real position."""
    g = gen(67)
    x, p = seeded_randn(g, 2, 5, 6), block_params(g, 6, 5)
    lengths = [5, 2]
    valid = valid_mask(lengths, 5)
    base = learner_tensor(fn, (x, valid, p, 2), shape=(2, 5, 6))
    if base is None:
        return None
    out0 = nested(base)
    for j in (4, 3, 2):
        x2 = safe.clone(x)
        x2[1, j] += 3.0
        moved = learner_tensor(fn, (x2, valid, p, 2), shape=(2, 5, 6))
        if moved is None:
            return None
        out1 = nested(moved)
        for i in range(lengths[1]):
            if any(abs(u - w) > 1e-9 * (1 + abs(u)) for u, w in zip(out0[1][i], out1[1][i])):
                return (f"padding leaks: in a sequence of length 2 padded to T=5, the output at the real position "
                        f"i={i} changed when the padding token at j={j} changed. Keys where valid is False must "
                        f"be blocked (mask valid[:, None, :], shape (B, 1, T))")
    return None


# ---------------------------------------------------------------- masked_lm_loss
def _mlm_case(g, big):
    dtype = pick_dtype(g)
    B, T, V = pick_int(g, 1, 4), pick_int(g, 2, 7), pick_int(g, 2, 10)
    is_masked = torch.rand(B, T, generator=g) < 0.4
    flat = is_masked.view(-1)
    if not big:  # at least two masked and one unmasked position, so that every known mistake shows
        order = torch.randperm(flat.numel(), generator=g)
        flat[order[:2]] = True
        flat[order[-1]] = False
    return Case(f"B={B}, T={T}, V={V}, {int(is_masked.sum())} masked positions, {dn(dtype)}",
                (seeded_randn(g, B, T, V, dtype=dtype, scale=2.0), torch.randint(0, V, (B, T), generator=g), is_masked))


def _mlm_edge():
    g = gen(68)
    logits, targets = seeded_randn(g, 2, 4, 5, scale=2.0), torch.randint(0, 5, (2, 4), generator=g)
    some = torch.tensor([[True, False, False, True], [False, True, False, False]])
    return [
        Case("no position is masked: the loss is 0, never NaN",
             (logits, targets, torch.zeros(2, 4, dtype=torch.bool))),
        Case("every position is masked: the plain mean", (logits, targets, torch.ones(2, 4, dtype=torch.bool))),
        Case("exactly one masked position",
             (logits, targets, torch.tensor([[False, False, True, False], [False] * 4]))),
        Case("unmasked targets hold -100 (ignore_index style)", (logits, targets.masked_fill(~some, -100), some)),
        Case("unmasked targets hold 999, outside the vocabulary: they may hold any id",
             (logits, targets.masked_fill(~some, 999), some)),
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


# ---------------------------------------------------------------- the registry
register(
    __name__,
    Exercise("split_heads", "encoder:split_heads", _split_case, _split_edge,
             properties=[("edge", _split_heads_keeps_columns), ("hidden", _split_heads_keeps_columns)],
             mistakes=[("encoder:split_heads_no_transpose",
                        "the heads were cut from the wrong columns: reshaping (B, T, D) straight to (B, H, T, d_k) "
                        "mixes positions; reshape to (B, T, H, d_k) first, then swap the T and H axes with "
                        "transpose(1, 2)")]),
    Exercise("merge_heads", "encoder:merge_heads", _merge_case, _merge_edge,
             properties=[("edge", _split_then_merge_is_identity), ("hidden", _split_then_merge_is_identity)],
             mistakes=[("encoder:merge_heads_no_transpose",
                        "the heads were merged in the wrong order: transpose (B, H, T, d_k) back to (B, T, H, d_k) "
                        "before reshaping to (B, T, D), so that each position gets its own heads side by side")]),
    Exercise("multi_head_attention", "encoder:multi_head_attention", _mha_case, _mha_edge,
             properties=[("edge", _mha_weights_sum_to_one), ("hidden", _mha_weights_sum_to_one)],
             uses=("split_heads", "merge_heads"),
             mistakes=[("encoder:mha_no_output_projection",
                        "the output projection is missing: after merging the heads, multiply by W_o^T and add b_o"),
                       ("encoder:mha_no_output_bias",
                        "the output projection's bias b_o was not added: merged heads @ W_o^T + b_o"),
                       ("encoder:mha_mask_ignored",
                        "the mask was ignored: pass it to masked attention, with a head axis added "
                        "(mask[:, None]) so that the same mask applies to every head"),
                       ("encoder:mha_scaled_by_sqrt_D",
                        "the scores were divided by sqrt(D), the model width; each head divides its scores by "
                        "sqrt(d_k), its own width d_k = D / H"),
                       ("encoder:mha_kv_from_queries",
                        "the keys and values were projected from x_q; they come from x_kv (the positions that "
                        "answer), only the queries come from x_q"),
                       ("encoder:mha_mask_reversed", REVERSED_LESSON.format(fix="pass the mask on unchanged")),
                       ("encoder:mha_mask_without_head_axis",
                        "the mask went to attention without a head axis: the scores are (B, H, T_q, T_k), so a "
                        "(B, T_q, T_k) or (B, 1, T_k) mask lines its batch axis up with the heads (sequence b's mask "
                        "lands on head b). Add the head axis, mask[:, None] (a 2-D (T_q, T_k) mask first becomes "
                        "(1, T_q, T_k)), so the same mask applies to every head"),
                       ("encoder:mha_2d_mask_head_axis_in_the_middle",
                        "a 2-D (T_q, T_k) mask got its head axis in the middle: mask[:, None] makes it (T_q, 1, T_k), "
                        "whose first axis then lines up with the heads. Only a mask with a batch axis takes "
                        "mask[:, None]; a 2-D one broadcasts as it is (or give it both leading axes, mask[None, None])")],
             n_basic=8, n_hidden=16),
    Exercise("sinusoidal_positions", "encoder:sinusoidal_positions", _sin_case, _sin_edge,
             properties=[("basic", _sin_angles_in_float64), ("edge", _sin_angles_in_float64),
                         ("hidden", _sin_angles_in_float64)],
             mistakes=[("encoder:sinusoidal_freq_i_over_D",
                        "the frequencies are wrong: column pair i uses the angle p / base^(2i / D), with 2i (the "
                        "even column's index) in the exponent, not i"),
                       ("encoder:sinusoidal_halves",
                        "the sines and cosines were put in two halves; they interleave: column 2i holds the sine "
                        "and column 2i + 1 the cosine of the same frequency"),
                       ("encoder:sinusoidal_float32_angles", SINUSOID_FLOAT32_ANGLES),
                       ("encoder:sinusoidal_sin_cos_swapped",
                        "sine and cosine are swapped: the even columns 2i hold sin(p / base^(2i / D)) and the odd "
                        "columns 2i + 1 the cosine, so that position 0 reads [0, 1, 0, 1, ...]")],
             n_basic=8, n_hidden=16),
    Exercise("embed_with_positions", "encoder:embed_with_positions", _embed_case, _embed_pos_edge,
             mistakes=[("encoder:embed_positions_added_twice",
                        "the positional encodings were added twice: x[b, t] = E[ids[b, t]] + P[t], once"),
                       ("encoder:embed_positions_by_token_id",
                        "the positional table was indexed by the token ids (P[ids]); it is indexed by the position: "
                        "x[b, t] = E[ids[b, t]] + P[t], i.e. add P[:T]")]),
    Exercise("encoder_block", "encoder:encoder_block", block_case, lambda: block_edge(78),
             properties=[("edge", _encoder_padding_is_invisible), ("hidden", _encoder_padding_is_invisible)],
             uses=("multi_head_attention",),
             mistakes=[("encoder:encoder_block_no_attn_residual",
                        "the residual around attention is missing: h = LayerNorm(x + MultiHeadAttention(x)), "
                        "adding the block's input x back before the first layer norm"),
                       ("encoder:encoder_block_no_ffn_residual",
                        "the residual around the feed-forward network is missing: out = LayerNorm(h + FFN(h))"),
                       ("encoder:encoder_block_pre_norm",
                        "this is a pre-norm block (x + Attention(LayerNorm(x))); the notes' block is post-norm: "
                        "LayerNorm(x + Attention(x)), the layer norm after the residual sum"),
                       ("encoder:encoder_block_padding_ignored",
                        "the padding was not blocked: keys where valid is False must get no attention, with the "
                        "mask valid[:, None, :] of shape (B, 1, T)"),
                       ("encoder:encoder_block_causal",
                        "a causal mask was applied, but an encoder is bidirectional: every position may attend to "
                        "every real token, before and after it; only padding is blocked"),
                       ("encoder:encoder_block_padding_over_queries",
                        "the padding mask went over the queries, valid[:, :, None] of shape (B, T, 1): it blocks the "
                        "pad positions' rows, not the pad keys. Mask the keys (columns): valid[:, None, :], (B, 1, T)"),
                       ("encoder:encoder_block_mask_without_query_axis",
                        "valid went to attention as it is, (B, T): a mask must broadcast to (B, T_q, T_k), so its "
                        "batch axis lined up with the queries. Give it the query axis: valid[:, None, :], (B, 1, T)"),
                       ("encoder:encoder_block_padding_reversed",
                        REVERSED_LESSON.format(fix="valid is True on the real tokens: valid[:, None, :], no ~"))],
             n_basic=6, n_hidden=12),
    Exercise("masked_lm_loss", "encoder:masked_lm_loss", _mlm_case, _mlm_edge,
             conditioning=logit_sum_scale,
             mistakes=[("encoder:masked_lm_loss_mean_over_all",
                        "the loss was averaged over every position; BERT scores only the masked positions, so "
                        "average the cross-entropy over the positions where is_masked is True"),
                       ("encoder:masked_lm_loss_sum",
                        "the masked positions' losses were summed; the loss is their mean: divide by the number "
                        "of masked positions"),
                       ("encoder:masked_lm_loss_divided_by_all",
                        "the masked positions' losses were divided by B * T, the number of all positions; divide by "
                        "the number of masked positions"),
                       ("encoder:masked_lm_loss_log_of_softmax",
                        "the log-probabilities were taken as torch.log(torch.softmax(...)): with confident logits "
                        "a probability rounds to 0 and log 0 = -inf, an infinite loss. Use torch.log_softmax(logits, "
                        "dim=-1), which subtracts the log-sum-exp and stays finite")]),
    Exercise("probe_accuracy", "encoder:probe_accuracy", probe_case, probe_edge,
             properties=[("edge", probe_reads_the_word_only), ("hidden", probe_reads_the_word_only)],
             tensor_inputs=False, matches_to_name=3,
             mistakes=[("encoder:probe_accuracy_tested_on_train",
                        "the probe was scored on the sentences it was fitted on: fit the sense means on the "
                        "sentences where is_train is True and count the right answers on the others only"),
                       ("encoder:probe_accuracy_means_from_all",
                        "the sense means were taken over every sentence, the test ones too: the probe saw the answers "
                        "it is scored on. Take the means over the training sentences only"),
                       ("encoder:probe_accuracy_last_position",
                        "the probe read the sentence's last vector, not the word's: take hidden[b, positions[b]]"),
                       ("encoder:probe_accuracy_first_position",
                        "the probe read the vector at position 0, not the word's: take hidden[b, positions[b]]"),
                       ("encoder:probe_accuracy_mean_over_sentence",
                        "the probe read the mean over the sentence, not the word's vector: take "
                        "hidden[b, positions[b]]"),
                       ("encoder:probe_accuracy_token_before",
                        "the probe read the vector one position before the word: take hidden[b, positions[b]]")],
             n_basic=8, n_hidden=16),
    question("answer_head_width", "encoder:answer_head_width", Integer(), wrong=[
        ("encoder:answer_head_width_multiplied",
         "the heads split the width D among them, they do not multiply it: D / n_heads"),
        ("encoder:answer_head_width_whole_width", "64 is the whole width D, shared by the 8 heads")]),
    question("answer_shuffled_tokens", "encoder:answer_shuffled_tokens", Choice("a", "b", "c", "d"), wrong=[
        ("encoder:answer_shuffled_tokens_different",
         "self-attention scores each pair the same way wherever the pair sits: without positions, moving the tokens "
         "only moves their outputs"),
        ("encoder:answer_shuffled_tokens_original_order",
         "each output belongs to its token: when the token moves, its output moves with it"),
        ("encoder:answer_shuffled_tokens_all_equal",
         "different tokens still get different outputs; only their order is invisible")]),
)
