"""Notebook 07, the decoder: cases, properties and known mistakes.

The weights are random and seeded, in the dict layout of ``solutions/encoder.py``
(``common.attn_params``, ``common.block_params`` and friends). Masks are bool,
True = may attend; padding is on the right.

Random cases of the visible "basic" part are chosen so that every known mistake
shows: at least two heads (one head hides a wrong split or a per-head scale), at
least two positions (one position hides a causal mask and a rotation), padding
that leaves some row shorter than T, and widths of four and more (a layer norm
over two numbers keeps only their sign).
"""
import torch

from .common import (CAUSAL_LESSON, REVERSED_LESSON, Case, Exercise, F64, dn, gen, learner_tensor,
                     logit_sum_scale, nested, no_future_leak, pick_dtype, pick_int, seeded_randn, register, Choice, IntTuple,
                     Integer, question)
from .sampling_parts import (draws_follow_the_distribution, sample_case, sample_edge, top_k_case, top_k_edge,
                             top_p_case, top_p_edge)
from .transformer_parts import (as_float32, attn_params, block_case, block_edge, block_params, causal_mask,
                                pick_heads, random_lengths, random_padding_mask, valid_mask)


# ---------------------------------------------------------------- rope
def _rope_case(g, big):
    dtype = pick_dtype(g)
    T = pick_int(g, 0, 7) if big else pick_int(g, 2, 6)
    d = 2 * (pick_int(g, 1, 4) if big else pick_int(g, 2, 4))
    lead = [(), (pick_int(g, 1, 3),), (pick_int(g, 1, 3), pick_int(g, 1, 3))][pick_int(g, 0, 2)]
    kind = pick_int(g, 0, 2)
    if kind == 0:
        positions, pname = None, "positions 0 .. T-1"
    elif kind == 1:
        start = pick_int(g, 1, 20)
        positions, pname = torch.arange(start, start + T), f"positions {start} .. {start + T - 1}"
    else:
        positions = torch.randperm(T, generator=g) * pick_int(g, 1, 5)
        pname = f"positions {positions.tolist()}"
    base = (10000.0, 100.0)[pick_int(g, 0, 1)]
    return Case(f"x {lead + (T, d)}, {pname}, base={base:g}, {dn(dtype)}",
                (seeded_randn(g, *lead, T, d, dtype=dtype),), {"positions": positions, "base": base})


def _rope_edge():
    g = gen(69)
    x = seeded_randn(g, 2, 3, 4, 8)
    return [
        Case("n = 1: position 0 is not rotated", (seeded_randn(g, 1, 4),)),
        Case("d = 2: one pair, rotated by the angle p", (seeded_randn(g, 5, 2),)),
        Case("the queries of every head at once, (B, H, T, d)", (x,)),
        Case("continuing at positions 5 .. 8 (a KV cache)", (x,), {"positions": torch.arange(5, 9)}),
        Case("an empty sequence (T = 0)", (seeded_randn(g, 2, 0, 4),)),
        Case("large positions (1000 .. 1003)", (x,), {"positions": torch.arange(1000, 1004)}),
        Case("base = 100", (x,), {"base": 100.0}),
        Case("float32", (x.float(),)),
        Case("an odd width d = 5 is an error", (seeded_randn(g, 3, 5),), raises="ValueError"),
        Case("3 positions for 4 rows: an error", (x,), {"positions": torch.arange(3)}, raises="ValueError"),
    ]


ROPE_FLOAT32_ANGLES = ("the angles were computed in float32: float32 keeps about 7 digits, so at large positions "
                  "p * omega_c is off in its last digits and so is every rotation (the two numbers printed above "
                  "differ past the digits shown). Compute omega and the angles in float64 (torch.arange(..., "
                  "dtype=torch.float64), positions.double()) and convert cos and sin to x.dtype at the end")


def _rope_relative_offset(fn):
    """The score of a rotated query at m and a rotated key at n depends on m - n only."""
    g = gen(70)
    q, k = seeded_randn(g, 1, 8), seeded_randn(g, 1, 8)

    def rotated(x, p):
        out = learner_tensor(fn, (x,), {"positions": torch.tensor([p])}, shape=(1, 8))
        return None if out is None else nested(out)[0]

    for m, n, s in ((3, 1, 5), (0, 4, 7), (2, 2, 11), (6, 0, 40)):
        rows = [rotated(q, m), rotated(k, n), rotated(q, m + s), rotated(k, n + s)]
        if any(r is None for r in rows):
            return None
        s1 = sum(a * b for a, b in zip(rows[0], rows[1]))
        s2 = sum(a * b for a, b in zip(rows[2], rows[3]))
        if not abs(s1 - s2) <= 1e-9 * (1 + abs(s1)):
            return (f"the score of a rotated query and key must depend on their offset m - n only: at m={m}, n={n} "
                    f"it is {s1:.6g}, shifted by {s} to m={m + s}, n={n + s} it is {s2:.6g}. Rotate each pair of "
                    f"columns by the angle p * omega_i of the row's own position p")
    return None


# ---------------------------------------------------------------- rope_attention
def _rope_angles_in_float64(fn):
    """In float64, at large positions, the rotation is right to float64's digits, not float32's."""
    x, positions, d = seeded_randn(gen(71), 4, 8), torch.arange(1000, 1004), 8

    def rotated(dtype):  # the rotation written out here, its angles in ``dtype``
        angle = positions.to(dtype)[:, None] * 10000.0 ** (-torch.arange(0, d, 2, dtype=dtype) / d)
        cos, sin = angle.cos().double(), angle.sin().double()
        even, odd = x[:, 0::2], x[:, 1::2]
        return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)

    out = learner_tensor(fn, (x,), {"positions": positions}, shape=(4, 8))
    if out is None or out.dtype != F64:  # a float32 result: its dtype is said by the cases
        return None
    truth = rotated(F64)
    off32 = (rotated(torch.float32) - truth).abs().max().item()
    off = max(abs(a - b) for ra, rb in zip(nested(out), truth.tolist()) for a, b in zip(ra, rb))
    if off32 / 100 < off <= 100 * off32:  # off by about as much as float32's rounding: the angles were float32
        return (f"at positions 1000 .. 1003 the largest difference from the exact rotation is {off:.3g}: "
                f"{ROPE_FLOAT32_ANGLES}")
    return None


def _rope_attn_case(g, big):
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 3)
    T = pick_int(g, 1, 7) if big else pick_int(g, 2, 6)
    H, d_k = pick_heads(g, big, d_lo=1, d_hi=2)
    d_k *= 2
    D = H * d_k
    kind = pick_int(g, 0, 3) if big else pick_int(g, 1, 3)
    if kind == 0:
        mask, mname = None, "no mask"
    elif kind == 1:
        mask, mname = causal_mask(T), "causal mask"
    elif kind == 2:
        mask, mname = random_padding_mask(g, B, T)
    else:
        lengths = random_lengths(g, B, T)
        mask = causal_mask(T) & valid_mask(lengths, T)[:, None, :]
        mname = f"causal and padding mask (lengths {lengths})"
    return Case(f"B={B}, T={T}, D={D}, n_heads={H}, {mname}, {dn(dtype)}",
                (seeded_randn(g, B, T, D, dtype=dtype), attn_params(g, D, dtype), H), {"mask": mask})


def _rope_attn_edge():
    g = gen(71)
    p8 = attn_params(g, 8)
    x = seeded_randn(g, 2, 5, 8)
    dead = torch.ones(2, 5, 5, dtype=torch.bool)
    dead[0, 3] = False
    return [
        Case("n = 1: one token at position 0, nothing is rotated", (x[:1, :1], p8, 2)),
        Case("a causal mask", (x, p8, 2), {"mask": causal_mask(5)}),
        Case("no mask: RoPE alone tells the positions apart", (x, p8, 2)),
        Case("one head (H = 1, d_k = 8)", (x, p8, 1), {"mask": causal_mask(5)}),
        Case("four heads of width d_k = 2", (x, p8, 4), {"mask": causal_mask(5)}),
        Case("a padding mask (B, 1, T), lengths [5, 2]", (x, p8, 2), {"mask": valid_mask([5, 2], 5)[:, None, :]}),
        Case("a fully masked row: zero weights, output b_o", (x, p8, 2), {"mask": dead}),
        Case("float32", (x.float(), as_float32(p8), 2), {"mask": causal_mask(5)}),
        Case("d_model=8 is not divisible by n_heads=3: an error", (x, p8, 3), raises="ValueError"),
        Case("an odd head width d_k = 3 (D = 6, n_heads = 2) cannot be rotated: an error",
             (x[..., :6], attn_params(g, 6), 2), raises="ValueError"),
    ]


def _rope_attention_no_future_leak(fn):
    """With a causal mask, changing the token at j must not move the output at any i < j."""
    g, T = gen(72), 6
    return no_future_leak(fn, (seeded_randn(g, 1, T, 8), attn_params(g, 8), 2), 0, T, True,
                          kwargs={"mask": causal_mask(T)})


# ---------------------------------------------------------------- decoder_block (cases: common.block_case)
def _decoder_no_future_leak(fn):
    """Changing the token at j must not move the decoder block's output at any i < j."""
    g = gen(66)
    return no_future_leak(fn, (seeded_randn(g, 1, 6, 6), None, block_params(g, 6, 5), 2), 0, 6, False)


# ---------------------------------------------------------------- lm_log_prob
def _lm_case(g, big):
    dtype = pick_dtype(g)
    B, V = pick_int(g, 1, 4), pick_int(g, 2, 10)
    T = pick_int(g, 0, 7) if big else pick_int(g, 3, 7)
    logits = seeded_randn(g, B, T, V, dtype=dtype, scale=2.0)
    ids = torch.randint(0, V, (B, T), generator=g)
    if big and pick_int(g, 0, 3) == 0:
        return Case(f"B={B}, T={T}, V={V}, no padding (valid=None), {dn(dtype)}", (logits, ids))
    lengths = random_lengths(g, B, T, lo=0 if big else 3)
    valid = valid_mask(lengths, T)
    return Case(f"B={B}, T={T}, V={V}, lengths {lengths}, {dn(dtype)}", (logits, ids.masked_fill(~valid, 0), valid))


def _lm_edge():
    g = gen(73)
    logits = seeded_randn(g, 3, 5, 6, scale=2.0)
    ids = torch.randint(0, 6, (3, 5), generator=g)
    valid = valid_mask([5, 3, 1], 5)
    return [
        Case("T = 1: nothing to predict, log P = 0", (logits[:, :1], ids[:, :1])),
        Case("T = 2: one next token", (logits[:, :2], ids[:, :2])),
        Case("uniform logits: log P = -(T - 1) log V", (torch.zeros(2, 4, 6, dtype=F64), ids[:2, :4])),
        Case("a padded batch, lengths [5, 3, 1] (the last has only its first token); padding holds 999, out of range",
             (logits, ids.masked_fill(~valid, 999), valid)),
        Case("a sequence that is all padding", (logits[:2], ids[:2], valid_mask([4, 0], 5))),
        Case("valid=None: every token is real", (logits, ids)),
        Case("an unlikely next token under confident logits (1e3): log P = -1000, finite (log of softmax "
             "would give -inf)", (torch.tensor([[[1e3, 0.0], [0.0, 1e3]]], dtype=F64), torch.tensor([[0, 1]]))),
        Case("float32", (logits.float(), ids, valid)),
        Case("logits for T = 4 positions, ids for T = 5: an error", (logits[:, :4], ids), raises="ValueError"),
        Case("valid of shape (3, 4) for ids (3, 5): an error", (logits, ids, valid[:, :4]), raises="ValueError"),
    ]


# a filter that gave the logits back as they were (its mask computed, never applied)
UNCHANGED = ("nothing was filtered: every logit came back as it was, none became -inf. Check the threshold (the "
             "k-th largest logit for top-k, the mass ranked above each token for top-p), that the kept set is taken "
             "along the vocabulary axis (dim=-1), that no early return (for k >= V or p = 1) catches every input, "
             "and that the filtered tensor is the one returned (logits.masked_fill(~keep, float('-inf')) gives a new "
             "tensor and leaves logits unchanged)")


register(
    __name__,
    Exercise("rope", "decoder:rope", _rope_case, _rope_edge,
             properties=[("edge", _rope_angles_in_float64), ("edge", _rope_relative_offset),
                         ("hidden", _rope_angles_in_float64), ("hidden", _rope_relative_offset)],
             mistakes=[("decoder:rope_wrong_frequencies",
                        "the frequencies are wrong: pair i turns by omega_i = base^(-2i / d), with 2i (the even "
                        "column's index) in the exponent, not i"),
                       ("decoder:rope_rotates_backwards",
                        "the rotation goes the wrong way (the sine's sign is flipped): out[2i] = x[2i] cos - "
                        "x[2i+1] sin and out[2i+1] = x[2i] sin + x[2i+1] cos"),
                       ("decoder:rope_float32_angles", ROPE_FLOAT32_ANGLES),
                       ("decoder:rope_pairs_halves",
                        "the columns were paired across the two halves (i with i + d/2); the notes' RoPE rotates "
                        "adjacent columns, the pair (2i, 2i + 1)")]),
    Exercise("rope_attention", "decoder:rope_attention", _rope_attn_case, _rope_attn_edge,
             properties=[("edge", _rope_attention_no_future_leak), ("hidden", _rope_attention_no_future_leak)],
             uses=("rope",),
             mistakes=[("decoder:rope_attention_values_rotated",
                        "the values were rotated too; RoPE rotates only the queries and the keys, whose dot "
                        "product then depends on the offset, and leaves the values as they are"),
                       ("decoder:rope_attention_queries_only",
                        "only the queries were rotated; rotate the keys too, so that the score q_m . k_n depends "
                        "on the offset m - n"),
                       ("decoder:rope_attention_before_split",
                        "RoPE was applied over the whole width D before splitting into heads; split first, then "
                        "rotate each head's queries and keys over its own d_k columns"),
                       ("decoder:rope_attention_without_rope", "nothing was rotated: this is plain multi-head "
                        "attention; rotate every head's queries and keys with rope after splitting the heads"),
                       ("decoder:rope_attention_mask_reversed", REVERSED_LESSON.format(fix="pass it on unchanged"))],
             n_basic=6, n_hidden=12),
    Exercise("decoder_block", "decoder:decoder_block", block_case,
             lambda: block_edge(79, "the first decoder position (T = 1): it attends to itself alone"),
             properties=[("edge", _decoder_no_future_leak), ("hidden", _decoder_no_future_leak)],
             mistakes=[("decoder:decoder_block_no_causal_mask",
                        f"the causal mask is missing, so the future leaks: {CAUSAL_LESSON} (and key j is real)"),
                       ("decoder:decoder_block_causal_transposed",
                        f"the causal mask is transposed (upper-triangular): {CAUSAL_LESSON}, so True belongs on "
                        f"and below the diagonal (tril)"),
                       ("decoder:decoder_block_causal_reversed",
                        f"the causal mask's polarity is reversed (triu(1) or ~tril: True on the blocked pairs, "
                        f"nn.MultiheadAttention's convention): {CAUSAL_LESSON}, so True belongs on and below the "
                        f"diagonal: torch.ones(T, T, dtype=torch.bool).tril()"),
                       ("decoder:decoder_block_causal_strict",
                        "the causal mask blocks the diagonal too (tril(diagonal=-1)): every position may attend to "
                        "itself, so keep the diagonal: tril() with diagonal=0"),
                       ("decoder:decoder_block_causal_shifted",
                        "the causal mask shifted one step (tril(diagonal=1)): each token reads the next. Query i "
                        "may see keys j <= i only: tril() with diagonal=0"),
                       ("decoder:decoder_block_padding_over_queries",
                        "the padding mask went over the queries, valid[:, :, None] of shape (B, T, 1): it blocks the "
                        "pad positions' rows, not the pad keys. Mask the keys (columns): valid[:, None, :], (B, 1, T)"),
                       ("decoder:decoder_block_padding_ignored",
                        f"the padding was not blocked: combine the causal mask with the padding mask, {CAUSAL_LESSON} "
                        f"and key j is a real token (valid[:, None, :])"),
                       ("decoder:decoder_block_no_attn_residual",
                        "the residual around attention is missing: h = LayerNorm(x + CausalSelfAttention(x))"),
                       ("decoder:decoder_block_no_ffn_residual",
                        "the residual around the feed-forward network is missing: out = LayerNorm(h + FFN(h))"),
                       ("decoder:decoder_block_padding_reversed", REVERSED_LESSON.format(fix="valid needs no ~"))],
             n_basic=6, n_hidden=12),
    Exercise("lm_log_prob", "decoder:lm_log_prob", _lm_case, _lm_edge,
             conditioning=logit_sum_scale,
             mistakes=[("decoder:lm_log_prob_not_shifted",
                        "the targets are not shifted: logits[:, t] predicts the next token ids[:, t + 1], so score "
                        "logits[:, :-1] against ids[:, 1:]"),
                       ("decoder:lm_log_prob_counts_padding",
                        "padding tokens were scored too: only real next tokens (valid[:, 1:] True) count"),
                       ("decoder:lm_log_prob_gathers_padding",
                        "the padding was kept out of the sum, but its ids still went into gather, which raises for "
                        "an id outside [0, V) such as 999: replace the padding ids with a valid one first, "
                        "torch.where(valid, ids, 0), then gather"),
                       ("decoder:lm_log_prob_softmax_over_positions",
                        "the log-softmax ran over the positions (dim=1); each position's logits are a distribution "
                        "over the vocabulary, the last axis: log_softmax(logits, dim=-1)"),
                       ("decoder:lm_log_prob_mean",
                        "the log-probabilities were averaged; by the chain rule log P(x) is their sum over the "
                        "real next tokens")]),
    Exercise("top_k_filter", "decoder:top_k_filter", top_k_case, top_k_edge,
             mistakes=[("decoder:top_k_filter_keeps_smallest",
                        "the k smallest logits were kept; keep the k largest (the k most probable tokens)"),
                       ("decoder:top_k_filter_zero_not_inf",
                        "the removed logits were set to 0, and softmax still gives them a probability; set them "
                        "to -inf, which softmax turns into a probability of exactly 0"),
                       ("decoder:top_k_filter_large_negative",
                        "the removed logits were set to a finite number (such as -1e9), not -inf: the filter's rule "
                        "is that a removed token's logit is -inf (a later filter or a sum of logits then sees it as "
                        "removed, and in float16 -1e9 is already -inf while -1e4 is not); fill with float('-inf')"),
                       ("decoder:top_k_filter_one_too_many",
                        "k + 1 tokens were kept: the threshold is the k-th largest logit, values[..., k - 1] of "
                        "the sorted row"),
                       ("decoder:top_k_filter_drops_ties",
                        "exactly k tokens were kept where several tie for the k-th place; the rule keeps every "
                        "logit equal to the k-th largest (compare each logit with it: logits < kth goes to -inf)"),
                       ("decoder:top_k_filter_unchanged", UNCHANGED)]),
    Exercise("top_p_filter", "decoder:top_p_filter", top_p_case, top_p_edge,
             mistakes=[("decoder:top_p_filter_drops_the_crossing_token",
                        "the token whose probability makes the kept mass reach p was dropped; the nucleus is the "
                        "smallest set whose mass reaches p, so it includes that token (keep a token when the mass "
                        "ranked above it is still below p) and the most probable token is always kept"),
                       ("decoder:top_p_filter_not_scattered_back",
                        "the probabilities were sorted, but the kept set was not mapped back to the tokens: "
                        "keep_sorted[j] says whether the j-th most probable token is kept, not token j; send it back "
                        "with torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)"),
                       ("decoder:top_p_filter_gathered_back",
                        "the kept set was mapped back with gather(-1, order), the permutation the wrong way round: "
                        "keep_sorted[r] is the verdict on token order[r], so send it there with "
                        "torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)"),
                       ("decoder:top_p_filter_unsorted",
                        "the mass was added up in token order; sort the probabilities from high to low first "
                        "(stable, so ties keep the lower index first) and map the kept set back to the tokens"),
                       ("decoder:top_p_filter_least_probable_first",
                        "the probabilities were sorted from low to high; the nucleus starts from the most "
                        "probable token (descending=True)"),
                       ("decoder:top_p_filter_unchanged", UNCHANGED)]),
    Exercise("sample_next", "decoder:sample_next", sample_case, sample_edge,
             properties=[("edge", draws_follow_the_distribution), ("hidden", draws_follow_the_distribution)],
             uses=("top_k_filter", "top_p_filter"), own_random=True,
             matches_to_name=4,  # a few drawn tokens agree with another slip's by chance on a case or three
             mistakes=[("decoder:sample_next_multiplies_temperature",
                        "the logits were multiplied by the temperature; divide them: softmax(logits / temperature)"),
                       ("decoder:sample_next_ignores_temperature",
                        "the temperature was left out: divide the logits by it before the filters and the softmax, "
                        "softmax(logits / temperature)"),
                       ("decoder:sample_next_greedy",
                        "the most probable token was taken (greedy decoding); sampling draws with "
                        "torch.multinomial(probs, 1, generator=g)"),
                       ("decoder:sample_next_temperature_after_the_filters",
                        "the nucleus (top-p) was chosen before the temperature reshaped the distribution; divide by "
                        "the temperature first, then filter"),
                       ("decoder:sample_next_top_p_before_top_k",
                        "top-p was applied before top-k; the order is the temperature, then top-k, then top-p")]),
    question("answer_encoder_to_decoder", "decoder:answer_encoder_to_decoder", Choice("a", "b", "c", "d"), wrong=[
        ("decoder:answer_encoder_to_decoder_layers",
         "encoders and decoders stack the same blocks; depth says nothing about who may read whom"),
        ("decoder:answer_encoder_to_decoder_positions",
         "positions tell a token where it is, not which tokens it may read"),
        ("decoder:answer_encoder_to_decoder_cross",
         "cross-attention joins a decoder to an encoder (notebook 08); GPT has none")]),
    question("answer_next_token_targets", "decoder:answer_next_token_targets", Integer(), wrong=[
        ("decoder:answer_next_token_targets_every_position",
         "the last position has no next token in the text: T - 1 predictions"),
        ("decoder:answer_next_token_targets_one",
         "the causal mask lets every position predict its next token in the same pass: T - 1 at once")]),
    question("answer_nucleus", "decoder:answer_nucleus", IntTuple(), wrong=[
        ("decoder:answer_nucleus_crossing_dropped",
         "0.5 + 0.3 = 0.8 has not reached 0.9: the token whose probability carries the mass past p is kept"),
        ("decoder:answer_nucleus_all", "the mass reached 0.9 with token 2 (0.95): the rest is cut")]),
)
