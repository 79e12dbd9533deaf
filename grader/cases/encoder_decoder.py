"""Notebook 08, the encoder-decoder: cases, properties and known mistakes.

The weights are random and seeded, in the dict layout of ``solutions/encoder.py``
(``common.attn_params``, ``common.block_params`` and friends). Masks are bool,
True = may attend; padding is on the right.

Random cases of the visible "basic" part are chosen so that every known mistake
shows: at least two heads (one head hides a wrong split or a per-head scale), at
least two positions (one position hides a causal mask and a rotation), padding
that leaves some row shorter than T, and widths of four and more (a layer norm
over two numbers keeps only their sign).
"""

from .common import (CAUSAL_LESSON, Case, Exercise, as_float32, attn_params, dn, encdec_params, gen, learner_tensor,
                     nested, no_future_leak, pick_dtype, pick_heads, pick_int, randn, random_lengths, register,
                     valid_mask)
from .common import Choice, IntTuple, question


# ---------------------------------------------------------------- cross_attention
def _cross_case(g, big):
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 3)
    H, d_k = pick_heads(g, big, d_hi=4 if big else 3)
    D = H * d_k
    T_y = pick_int(g, 1, 7) if big else pick_int(g, 2, 5)
    # T_x = T_y in a third of the cases: that is where "keys and values from the decoder" even runs with a mask
    T_x = T_y if pick_int(g, 0, 2) == 0 else (pick_int(g, 0, 7) if big else pick_int(g, 2, 6))
    if (big and pick_int(g, 0, 3) == 0) or T_x == 0:
        src_valid, sname = None, "no source padding"
    else:
        lengths = random_lengths(g, B, T_x, lo=0 if big else 1)
        src_valid, sname = valid_mask(lengths, T_x), f"source lengths {lengths}"
    return Case(f"B={B}, T_y={T_y}, T_x={T_x}, D={D}, n_heads={H}, {sname}, {dn(dtype)}",
                (randn(g, B, T_y, D, dtype=dtype), randn(g, B, T_x, D, dtype=dtype), src_valid,
                 attn_params(g, D, dtype), H))


def _cross_edge():
    g = gen(74)
    p6 = attn_params(g, 6)
    y, mem = randn(g, 2, 4, 6), randn(g, 2, 5, 6)
    return [
        Case("T_y = 1: one target position", (y[:, :1], mem, valid_mask([5, 3], 5), p6, 2)),
        Case("T_x = 1: one source token takes all the weight", (y, mem[:, :1], None, p6, 2)),
        Case("an empty source (T_x = 0): zero weights, output b_o", (y, mem[:, :0], valid_mask([0, 0], 0), p6, 2)),
        Case("one source is all padding, lengths [5, 0]", (y, mem, valid_mask([5, 0], 5), p6, 3)),
        Case("src_valid=None: every source token is real", (y, mem, None, p6, 3)),
        Case("T_y = 4 targets, T_x = 5 sources, lengths [5, 2]", (y, mem, valid_mask([5, 2], 5), p6, 2)),
        Case("T_y = T_x = 4, lengths [4, 2]", (y, mem[:, :4], valid_mask([4, 2], 4), p6, 2)),
        Case("one head (H = 1)", (y, mem, valid_mask([4, 5], 5), p6, 1)),
        Case("float32", (y.float(), mem.float(), valid_mask([5, 2], 5), as_float32(p6), 2)),
        Case("d_model=6 is not divisible by n_heads=4: an error", (y, mem, None, p6, 4), raises="ValueError"),
        Case("memory for B = 1 sentence, y for B = 2: an error", (y, mem[:1], None, p6, 2), raises="ValueError"),
        Case("src_valid of shape (2, 4) for memory (2, 5, 6): an error", (y, mem, valid_mask([4, 2], 4), p6, 2),
             raises="ValueError"),
    ]


def _cross_weights_sum_to_one(fn):
    """Every row of weights sums to 1 over the real source tokens and is 0 on source padding."""
    g = gen(75)
    B, T_y, T_x, D, H = 3, 3, 5, 6, 2
    lengths = [5, 2, 0]
    args = (randn(g, B, T_y, D), randn(g, B, T_x, D), valid_mask(lengths, T_x), attn_params(g, D), H)
    weights = learner_tensor(fn, args, item=1, shape=(B, H, T_y, T_x))
    if weights is None:
        return None
    w = nested(weights)
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
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 3)
    H, d_k = pick_heads(g, big, d_lo=2, d_hi=3, min_D=4)
    D, F = H * d_k, pick_int(g, 2, 8)
    T_y = pick_int(g, 1, 6) if big else pick_int(g, 2, 5)
    T_x = T_y if pick_int(g, 0, 2) == 0 else (pick_int(g, 0, 6) if big else pick_int(g, 2, 6))
    if big and pick_int(g, 0, 3) == 0:
        tgt_valid, src_valid, vname = None, None, "no padding"
    else:
        lt, ls = random_lengths(g, B, T_y), random_lengths(g, B, T_x, lo=0 if big else 1)
        tgt_valid, src_valid = valid_mask(lt, T_y), valid_mask(ls, T_x)
        vname = f"target lengths {lt}, source lengths {ls}"
    return Case(f"B={B}, T_y={T_y}, T_x={T_x}, D={D}, n_heads={H}, F={F}, {vname}, {dn(dtype)}",
                (randn(g, B, T_y, D, dtype=dtype), randn(g, B, T_x, D, dtype=dtype), tgt_valid, src_valid,
                 encdec_params(g, D, F, dtype), H))


def _encdec_edge():
    g = gen(76)
    p6 = encdec_params(g, 6, 5)
    y, mem = randn(g, 2, 4, 6), randn(g, 2, 5, 6)
    tv, sv = valid_mask([4, 2], 4), valid_mask([5, 3], 5)
    return [
        Case("the first decoder position (T_y = 1)", (y[:, :1], mem, tv[:, :1], sv, p6, 2)),
        Case("an empty source (T_x = 0): cross-attention adds only b_o",
             (y, mem[:, :0], tv, valid_mask([0, 0], 0), p6, 2)),
        Case("padded targets [4, 2] and sources [5, 3]", (y, mem, tv, sv, p6, 2)),
        Case("no padding (both masks None)", (y, mem, None, None, p6, 3)),
        Case("one source is all padding, lengths [5, 0]", (y, mem, tv, valid_mask([5, 0], 5), p6, 2)),
        Case("T_x = T_y = 4", (y, mem[:, :4], tv, valid_mask([4, 1], 4), p6, 2)),
        Case("one head (H = 1)", (y, mem, tv, sv, p6, 1)),
        Case("float32", (y.float(), mem.float(), tv, sv, as_float32(p6), 2)),
        Case("d_model=6 is not divisible by n_heads=4: an error", (y, mem, tv, sv, p6, 4), raises="ValueError"),
    ]


def _encdec_no_future_leak(fn):
    """Changing the target token at j must not move the block's output at any i < j (the source stays)."""
    g = gen(77)
    T = 5
    args = (randn(g, 1, T, 6), randn(g, 1, 4, 6), None, valid_mask([3], 4), encdec_params(g, 6, 5), 2)
    return no_future_leak(fn, args, 0, T, True, "the target token")


# ---------------------------------------------------------------- the registry
register(
    __name__,
    Exercise("cross_attention", "encoder_decoder:cross_attention", _cross_case, _cross_edge,
             properties=[("edge", _cross_weights_sum_to_one), ("hidden", _cross_weights_sum_to_one)],
             mistakes=[("encoder_decoder:cross_attention_kv_from_decoder",
                        "the keys and values came from the decoder (this is self-attention on y); in "
                        "cross-attention only the queries come from y, the keys and values from the encoder's "
                        "memory"),
                       ("encoder_decoder:cross_attention_causal",
                        "a causal mask was applied to cross-attention; the whole source is known, so every target "
                        "position may attend to every real source token, only source padding is blocked"),
                       ("encoder_decoder:cross_attention_padding_ignored",
                        "the source padding was not blocked: mask the keys with src_valid[:, None, :], shape "
                        "(B, 1, T_x)")],
             n_basic=8, n_hidden=16),
    Exercise("encdec_decoder_block", "encoder_decoder:encdec_decoder_block", _encdec_case, _encdec_edge,
             properties=[("edge", _encdec_no_future_leak), ("hidden", _encdec_no_future_leak)],
             uses=("cross_attention",),
             mistakes=[("encoder_decoder:encdec_cross_before_self",
                        "the sub-layers are in the wrong order: causal self-attention comes first (with ln1), "
                        "then cross-attention on its output (with ln2), then the feed-forward network (ln3)"),
                       ("encoder_decoder:encdec_kv_from_decoder",
                        "cross-attention took its keys and values from the decoder; they come from the encoder's "
                        "memory, only the queries from the decoder's h1"),
                       ("encoder_decoder:encdec_causal_cross",
                        "a causal mask was applied to cross-attention; only self-attention is causal, cross-"
                        "attention may read every real source token"),
                       ("encoder_decoder:encdec_no_causal_self",
                        f"self-attention has no causal mask, so the future leaks: {CAUSAL_LESSON} (and key j is a "
                        f"real target token)"),
                       ("encoder_decoder:encdec_no_cross_residual",
                        "the residual around cross-attention is missing: h2 = LayerNorm(h1 + CrossAttention(h1, "
                        "memory))")],
             n_basic=6, n_hidden=12),
    question("answer_cross_attention_sources", "encoder_decoder:answer_cross_attention_sources",
             Choice("a", "b", "c", "d"), wrong=[
        ("encoder_decoder:answer_cross_attention_sources_all_decoder",
         "that is the decoder's self-attention; cross-attention reads the encoder"),
        ("encoder_decoder:answer_cross_attention_sources_swapped",
         "the decoder asks (its queries), and the source answers (the encoder's keys and values): one output row per "
         "target token"),
        ("encoder_decoder:answer_cross_attention_sources_all_encoder",
         "that is the encoder's self-attention; cross-attention's queries come from the decoder")]),
    question("answer_cross_weights_shape", "encoder_decoder:answer_cross_weights_shape", IntTuple(), wrong=[
        ("encoder_decoder:answer_cross_weights_shape_transposed",
         "one row per query (the T_y target tokens), one column per key (the T_x source tokens)"),
        ("encoder_decoder:answer_cross_weights_shape_self",
         "(T_y, T_y) is the self-attention's: cross-attention's keys are the T_x source tokens"),
        ("encoder_decoder:answer_cross_weights_shape_no_heads",
         "each head has its own weights: (B, heads, T_y, T_x)")]),
    question("answer_empty_source", "encoder_decoder:answer_empty_source", Choice("a", "b", "c", "d"), wrong=[
        ("encoder_decoder:answer_empty_source_error",
         "with no key to read, every cross-attention weight is 0 and the sub-layer adds its output bias: section 5 "
         "runs it"),
        ("encoder_decoder:answer_empty_source_encoder",
         "the decoder's self-attention stays causal; the empty source takes away cross-attention, not the mask"),
        ("encoder_decoder:answer_empty_source_uniform",
         "the self-attention's weights still come from the scores; only cross-attention has nothing to read")]),
)
