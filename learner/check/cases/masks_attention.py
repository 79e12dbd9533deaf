"""Notebook 04, masks and attention: cases, properties and known mistakes.

The known mistakes live in ``solutions/mistakes/masks_attention.py``.
"""
import torch

from .common import (Case, Exercise, F64, dn, gen, learner_tensor, nested, no_future_leak, pick_dtype, pick_int,
                     seeded_randn, register, Choice, Integer, question)


def _bidir_case(g, big):
    T_q, T_k = pick_int(g, 0, 7), pick_int(g, 0, 7)
    return Case(f"T_q={T_q}, T_k={T_k}", (T_q, T_k))


def _causal_case(g, big):
    T = pick_int(g, 1, 12 if big else 8)
    return Case(f"T={T}", (T,))


def _causal_edge():
    return [Case("T = 1 (first decoder position only)", (1,)), Case("T = 0", (0,)),
            Case("T = 3: position i sees positions 0..i, itself included", (3,)),
            Case("T = -1 is an error", (-1,), raises="ValueError")]


def _pad_mask_case(g, big):
    B, T = pick_int(g, 1, 4), pick_int(g, 1, 8)
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    return Case(f"B={B}, T_k={T}, lengths {lengths.tolist()}", (torch.arange(T)[None, :] < lengths[:, None],))


def _pad_mask_edge():
    return [Case("no padding at all", (torch.ones(2, 3, dtype=torch.bool),)),
            Case("a sequence that is all padding", (torch.tensor([[True, False], [False, False]]),)),
            Case("a float mask is an error", (torch.ones(2, 3),), raises="ValueError"),
            Case("a 1-D key_valid (T_k,) is an error: it must be (B, T_k)", (torch.ones(3, dtype=torch.bool),),
                 raises="ValueError"),
            Case("a 3-D key_valid (B, 1, T_k), already a mask, is an error", (torch.ones(2, 1, 3, dtype=torch.bool),),
                 raises="ValueError")]


def _combine_case(g, big):
    B, T = pick_int(g, 1, 3), pick_int(g, 1, 6)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    pad = (torch.arange(T)[None, :] < lengths[:, None])[:, None, :]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    rand = torch.rand(B, T, T, generator=g) > 0.3
    choice = pick_int(g, 0, 2)
    masks = [(causal, pad), (pad, None, causal), (causal, rand, pad)][choice]
    names = [("causal", "padding"), ("padding", "None", "causal"), ("causal", "random", "padding")][choice]
    return Case(f"{' & '.join(names)} masks, B={B}, T={T}", masks)


def _combine_edge():
    c = torch.ones(3, 3, dtype=torch.bool).tril()
    return [Case("a single mask comes back unchanged", (c,)),
            Case("no masks at all gives None", ()),
            Case("only None gives None", (None, None)),
            Case("a float mask is an error", (c, torch.ones(3, 3)), raises="ValueError")]


def _additive_case(g, big):
    shape = tuple(pick_int(g, 1, 5) for _ in range(pick_int(g, 1, 3)))
    dtype = pick_dtype(g)
    return Case(f"mask of shape {shape}, dtype={dn(dtype)}", (torch.rand(*shape, generator=g) > 0.5,),
                {"dtype": dtype})


def _additive_edge():
    return [Case("causal mask, default dtype float32", (torch.ones(4, 4, dtype=torch.bool).tril(),)),
            Case("all allowed gives all zeros", (torch.ones(2, 3, dtype=torch.bool),), {"dtype": F64}),
            Case("a mask of any shape: 4-D, (B, H, T_q, T_k) = (2, 2, 3, 4)",
                 (torch.rand(2, 2, 3, 4, generator=gen(42)) > 0.5,)),
            Case("an integer mask is an error", (torch.ones(2, 2, dtype=torch.long),), raises="ValueError"),
            Case("an integer dtype cannot hold -inf: an error", (torch.ones(2, 2, dtype=torch.bool),),
                 {"dtype": torch.long}, raises="ValueError")]


def _mask_kind(g, B, T_q, T_k):
    kind = pick_int(g, 0, 3)
    if kind == 0:
        return None, "no mask"
    if kind == 1 and T_q == T_k:
        return torch.ones(T_q, T_k, dtype=torch.bool).tril(), "causal mask"
    if kind == 2:
        lengths = torch.randint(1, T_k + 1, (B,), generator=g)
        return (torch.arange(T_k)[None, :] < lengths[:, None])[:, None, :], f"padding mask (lengths {lengths.tolist()})"
    return torch.rand(B, T_q, T_k, generator=g) > 0.4, "random mask"


def _attn_case(g, big):
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 3)
    T_q = pick_int(g, 1, 8 if big else 5)
    T_k = T_q if pick_int(g, 0, 1) else pick_int(g, 1, 8 if big else 5)
    d_k, d_v = pick_int(g, 1, 16 if big else 8), pick_int(g, 1, 8)
    mask, mname = _mask_kind(g, B, T_q, T_k)
    Q, K = seeded_randn(g, B, T_q, d_k, dtype=dtype, scale=1.5), seeded_randn(g, B, T_k, d_k, dtype=dtype, scale=1.5)
    V = seeded_randn(g, B, T_k, d_v, dtype=dtype)
    if pick_int(g, 0, 4) == 0:  # scores in the thousands: exp() overflows unless each row's maximum is taken off first
        Q, K, V, dtype, mname = Q.to(F64) * 1000, K.to(F64), V.to(F64), F64, f"{mname}, scores x1000"
    return Case(f"B={B}, T_q={T_q}, T_k={T_k}, d_k={d_k}, d_v={d_v}, {mname}, {dn(dtype)}", (Q, K, V), {"mask": mask})


def _attn_edge():
    g = gen(41)
    q, k, v = seeded_randn(g, 1, 4), seeded_randn(g, 1, 4), seeded_randn(g, 1, 3)
    Q, K, V = seeded_randn(g, 2, 5, 4), seeded_randn(g, 2, 5, 4), seeded_randn(g, 2, 5, 3)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    full_row = causal.repeat(2, 1, 1)  # causal, and query 2 of sequence 1 may attend to no key at all
    full_row[1, 2] = False
    return [
        Case("n = 1: the token returns its own value", (q, k, v)),
        Case("causal mask: the first position attends to itself alone", (Q, K, V), {"mask": causal}),
        Case("all scores equal: the output is the plain average of the values",
             (torch.zeros(2, 3, 4, dtype=F64), seeded_randn(g, 2, 6, 4) * 0, seeded_randn(g, 2, 6, 3))),
        Case("empty source (T_k = 0): zero output, never NaN", (Q, K[:, :0], V[:, :0])),
        Case("a fully masked row: zero weights and zero output", (Q, K, V), {"mask": full_row}),
        Case("very large scores (x1000): no overflow", (Q * 1000, K, V), {"mask": causal}),
        Case("unbatched 2-D inputs with T_q != T_k", (Q[0, :2], K[0], V[0])),
        Case("d_k = 6, d_v = 2, T_k = 5 and T_q = 3 all differ", (seeded_randn(g, 2, 3, 6), seeded_randn(g, 2, 5, 6),
                                                                   seeded_randn(g, 2, 5, 2))),
        Case("a mask of the wrong shape, (4, 4) for scores (2, 5, 5), is an error: raise ValueError unless "
             "torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape", (Q, K, V),
             {"mask": torch.ones(4, 4, dtype=torch.bool)},
             raises="ValueError"),
        Case("a mask with extra leading axes (it would enlarge the output) is an error", (Q[0], K[0], V[0]),
             {"mask": torch.ones(7, 5, 5, dtype=torch.bool)}, raises="ValueError"),
        Case("a float mask (1.0 / 0.0) is an error: masks are bool, True = may attend", (Q, K, V),
             {"mask": causal.double()}, raises="ValueError"),
        Case("Q and K of different widths d_k (4 and 3) are an error", (Q, K[..., :3], V), raises="ValueError"),
        Case("K and V of different lengths T_k (5 and 4) are an error", (Q, K, V[:, :4]), raises="ValueError"),
    ]


def _attn_weights_sum_to_one(fn):
    """Each query's weights sum to 1 over the keys, and blocked keys get exactly 0."""
    g = gen(7)
    Q, K, V = seeded_randn(g, 3, 6, 4), seeded_randn(g, 3, 7, 4), seeded_randn(g, 3, 7, 2)
    mask = torch.rand(3, 6, 7, generator=g) > 0.5
    mask[:, :, 0] = True
    weights = learner_tensor(fn, (Q, K, V), {"mask": mask}, item=1, shape=(3, 6, 7))
    if weights is None:
        return None
    w, allowed = nested(weights), mask.tolist()
    for b in range(3):
        for i in range(6):
            total = sum(w[b][i])
            if not abs(total - 1) < 1e-6:
                return (f"the weights of query {i} (batch {b}) sum to {total:.6g}, not 1: the softmax must run over "
                        f"the keys (the last axis) and only over the allowed ones")
            for j in range(7):
                if not allowed[b][i][j] and w[b][i][j] != 0.0:
                    return f"query {i} (batch {b}) gives weight {w[b][i][j]:.3g} to key {j}, which the mask blocks"
    return None


def _attn_no_future_leak(fn):
    """Changing token j must not move the causal output at any position i < j."""
    g = gen(9)
    T = 6
    Q, K, V = seeded_randn(g, 1, T, 4), seeded_randn(g, 1, T, 4), seeded_randn(g, 1, T, 3)
    return no_future_leak(fn, (Q, K, V), (0, 1, 2), T, True, "the token",
                          {"mask": torch.ones(T, T, dtype=torch.bool).tril()})


FINITE_FILL = ("blocked pairs got a finite number (such as -1e9, -1e4 or torch.finfo(dtype).min), not -inf; the "
               "notes' M uses -inf so that exp() gives exactly 0 and a row with no allowed key is seen as one: "
               "torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float('-inf'))")
NO_MAX = ("the softmax did not subtract each row's maximum first: exp() of a large score overflows to inf and "
          "inf / inf is NaN. Compute exp(scores - scores.max(dim=-1, keepdim=True).values) (or use torch.softmax, "
          "which does), and give a row with no allowed key zero weights")


def _additive_fill_is_minus_inf(fn):
    """Every blocked pair gets exactly -inf, every allowed pair 0."""
    mask = torch.tensor([[True, False, True], [False, False, True]])
    for dtype in (torch.float32, F64):
        out = learner_tensor(fn, (mask,), {"dtype": dtype}, shape=(2, 3))
        if out is None:
            return None
        values = nested(out)
        for i in range(2):
            for j in range(3):
                v = values[i][j]
                if mask[i, j] and v != 0.0:
                    return f"the allowed pair ({i}, {j}) got {v:.6g}, not 0 (dtype={dn(dtype)})"
                if not mask[i, j] and v != float("-inf"):
                    if v == v and v < 0:
                        return (f"the blocked pair ({i}, {j}) got the finite number {v:.6g}, not -inf "
                                f"(dtype={dn(dtype)}): {FINITE_FILL}")
                    return f"the blocked pair ({i}, {j}) got {v:.6g}, not -inf (dtype={dn(dtype)})"
    return None


MASK_REVERSED = ("the mask's polarity is reversed: masked_fill(mask, -inf) blocks exactly the pairs the mask "
                 "allows (that is nn.MultiheadAttention's convention, True = blocked). In this course True means "
                 "'may attend', so fill where the mask is False: scores.masked_fill(~mask, float('-inf'))")

register(
    __name__,
    Exercise("bidirectional_mask", "masks_attention:bidirectional_mask", _bidir_case,
             lambda: [Case("T_q = T_k = 1", (1, 1)), Case("an empty source, T_k = 0", (3, 0)),
                      Case("T_q = 2 queries and T_k = 5 keys differ", (2, 5)), Case("no queries, T_q = 0", (0, 4)),
                      Case("a negative length T_q = -1 is an error", (-1, 3), raises="ValueError"),
                      Case("a negative length T_k = -2 is an error", (2, -2), raises="ValueError"),
                      Case("a negative length T_k = -1 is an error", (2, -1), raises="ValueError")]),
    Exercise("causal_mask", "masks_attention:causal_mask", _causal_case, _causal_edge,
             mistakes=[("masks_attention:causal_mask_transposed",
                        "the mask is upper-triangular: query i may see keys j <= i, so True "
                        "belongs on and below the diagonal"),
                       ("masks_attention:causal_mask_reversed",
                        "the polarity is reversed: True marks the blocked pairs (j > i), nn.MultiheadAttention's "
                        "convention. In this course True means 'may attend': True on and below the diagonal (tril)"),
                       ("masks_attention:causal_mask_strict",
                        "the diagonal is blocked: every position may attend to itself")]),
    Exercise("padding_mask", "masks_attention:padding_mask", _pad_mask_case, _pad_mask_edge,
             mistakes=[("masks_attention:padding_mask_inverted",
                        "the mask is inverted: True means 'may attend', i.e. a real token"),
                       ("masks_attention:padding_mask_over_queries",
                        "the new axis went after the keys: the result is (B, 1, T_k), "
                        "blocking keys, not queries")]),
    Exercise("combine_masks", "masks_attention:combine_masks", _combine_case, _combine_edge,
             mistakes=[("masks_attention:combine_masks_or",
                        "masks were combined with OR; a pair may attend only if every mask "
                        "allows it (AND)")]),
    Exercise("additive_mask", "masks_attention:additive_mask", _additive_case, _additive_edge,
             properties=[("basic", _additive_fill_is_minus_inf), ("edge", _additive_fill_is_minus_inf),
                         ("hidden", _additive_fill_is_minus_inf)],
             mistakes=[("masks_attention:additive_mask_inverted",
                        "the polarity is inverted: True (may attend) maps to 0, False to -inf"),
                       ("masks_attention:additive_mask_large_negative", FINITE_FILL),
                       ("masks_attention:additive_mask_float16_floor", FINITE_FILL),
                       ("masks_attention:additive_mask_finfo_min", FINITE_FILL)]),
    Exercise("masked_attention", "masks_attention:masked_attention",
             _attn_case, _attn_edge,
             properties=[("edge", _attn_weights_sum_to_one), ("edge", _attn_no_future_leak),
                         ("hidden", _attn_weights_sum_to_one), ("hidden", _attn_no_future_leak)],
             mistakes=[("masks_attention:attention_no_sqrt", "the scores were not divided by sqrt(d_k)"),
                       ("masks_attention:attention_scaled_by_d_k",
                        "the scores were divided by d_k; divide by its square root, sqrt(d_k)"),
                       ("masks_attention:attention_scaled_by_sqrt_T_k",
                        "the scores were divided by the square root of a number of positions (the keys' T_k, "
                        "K.shape[-2], or the queries' T_q where the two are equal); the scale is sqrt(d_k), the width "
                        "of the queries and keys (Q.shape[-1])"),
                       ("masks_attention:attention_scaled_by_sqrt_d_v",
                        "the scores were divided by sqrt(d_v), the width of the values (V.shape[-1]); the scale is "
                        "sqrt(d_k), the width of the queries and keys (Q.shape[-1])"),
                       ("masks_attention:attention_softmax_over_queries",
                        "the softmax ran over the queries (dim=-2); it must run over "
                        "the keys (dim=-1)"),
                       ("masks_attention:attention_sum_over_queries",
                        "the softmax's sum ran over the queries (dim=-2), so each weight was divided by its key's "
                        "column total; divide by each query's own total over the keys: e.sum(dim=-1, keepdim=True)"),
                       ("masks_attention:attention_mask_transposed",
                        "the mask was applied transposed: mask[i, j] is query i, key j"),
                       ("masks_attention:attention_mask_after_softmax",
                        "the mask was applied after the softmax, so the remaining "
                        "weights no longer sum to 1; add -inf before the softmax"),
                       ("masks_attention:attention_plain_softmax",
                        "a row with no allowed key came out NaN: torch.softmax of a row that is all -inf is 0/0. "
                        "Give such a row zero weights and a zero output (for example torch.softmax(...)"
                        ".nan_to_num(0.0), or your own softmax with a finite maximum and a sum kept away from 0)"),
                       ("masks_attention:attention_softmax_without_max", NO_MAX),
                       ("masks_attention:attention_softmax_without_max_zeroed", NO_MAX),
                       ("masks_attention:attention_mask_reversed", MASK_REVERSED),
                       ("masks_attention:attention_mask_reversed_plain_softmax", MASK_REVERSED),
                       ("masks_attention:attention_finite_fill",
                        "the blocked scores got a finite fill (such as -1e9), not -inf. The mask did its work on "
                        "every row with an allowed key; but on a fully blocked row every score is the same finite "
                        "number, so the softmax spreads the weight evenly and the query averages all the values. "
                        "Fill with float('-inf') and give a row with no allowed key zero weights and a zero output "
                        "(the 'nothing to attend to' rule), never NaN"),
                       ("masks_attention:attention_mask_multiplied",
                        "the bool mask was used as a float factor (scores * mask): a blocked score becomes 0, and "
                        "exp(0) still gives it weight. Blocked scores must become -inf: "
                        "scores.masked_fill(~mask, float('-inf'))"),
                       ("masks_attention:attention_mask_added",
                        "the bool mask was added to the scores as if it were M (scores + mask): True adds 1, False "
                        "adds 0, so nothing is blocked. Turn it into M first (additive_mask(mask)) or use "
                        "scores.masked_fill(~mask, float('-inf'))"),
                       ("masks_attention:attention_mask_ignored", "the mask was ignored")]),
    question("answer_causal_pairs", "masks_attention:answer_causal_pairs", Integer(), wrong=[
        ("masks_attention:answer_causal_pairs_all_pairs",
         "36 is every pair, the bidirectional mask: the causal mask allows j <= i only"),
        ("masks_attention:answer_causal_pairs_no_diagonal",
         "15 leaves out the diagonal: a token may attend to itself (j = i)"),
        ("masks_attention:answer_causal_pairs_diagonal_only",
         "each position attends to itself and to every earlier position, not to itself alone"),
        ("masks_attention:answer_causal_pairs_one_position_too_many",
         "28 is 1 + 2 + ... + 7, one position too many: with T = 6 the pairs are 1 + 2 + ... + 6")]),
    question("answer_why_minus_infinity", "masks_attention:answer_why_minus_infinity", Choice("a", "b", "c", "d"), wrong=[
        ("masks_attention:answer_why_minus_infinity_faster",
         "both are one masked fill; the difference is in what the allowed weights sum to"),
        ("masks_attention:answer_why_minus_infinity_nan",
         "zeros after the softmax give finite outputs; the trouble is that each row's weights then sum to less than 1"),
        ("masks_attention:answer_why_minus_infinity_same",
         "zeroing after the softmax leaves the blocked positions' share in the denominator: the allowed weights sum "
         "to less than 1")]),
)
