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
import inspect

import torch

from .common import (CAUSAL_LESSON, REVERSED_LESSON, Case, Exercise, dn, gen, learner_tensor, nested, no_future_leak,
                     pick_dtype, pick_int, seeded_randn, register, Choice, IntTuple, learner_call, question, tensor_in)
from .transformer_parts import (as_float32, attn_params, encdec_params, pick_heads, random_lengths, valid_mask)
from .greedy import (greedy_contract_cases, greedy_contract_property)
from .toy_encdec import ToyEncDec, random_ids, toy_encdec



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
                (seeded_randn(g, B, T_y, D, dtype=dtype), seeded_randn(g, B, T_x, D, dtype=dtype), src_valid,
                 attn_params(g, D, dtype), H))


def _cross_edge():
    g = gen(74)
    p6 = attn_params(g, 6)
    y, mem = seeded_randn(g, 2, 4, 6), seeded_randn(g, 2, 5, 6)
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
    args = (seeded_randn(g, B, T_y, D), seeded_randn(g, B, T_x, D), valid_mask(lengths, T_x), attn_params(g, D), H)
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
                (seeded_randn(g, B, T_y, D, dtype=dtype), seeded_randn(g, B, T_x, D, dtype=dtype), tgt_valid, src_valid,
                 encdec_params(g, D, F, dtype), H))


def _encdec_edge():
    g = gen(76)
    p6 = encdec_params(g, 6, 5)
    y, mem = seeded_randn(g, 2, 4, 6), seeded_randn(g, 2, 5, 6)
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
    args = (seeded_randn(g, 1, T, 6), seeded_randn(g, 1, 4, 6), None, valid_mask([3], 4), encdec_params(g, 6, 5), 2)
    return no_future_leak(fn, args, 0, T, True, "the target token")


# ---------------------------------------------------------------- encdec_forward
def _forward_args(g, big):
    B = pick_int(g, 1, 3)
    T_x = pick_int(g, 0, 7) if big else pick_int(g, 2, 6)
    T_y = pick_int(g, 1, 7) if big else pick_int(g, 2, 6)
    V_src, V_tgt = pick_int(g, 4, 9), pick_int(g, 4, 9)
    parts = toy_encdec(g, V_src, V_tgt, D=pick_int(g, 2, 6))
    ls, lt = random_lengths(g, B, T_x, lo=0 if big else 1), random_lengths(g, B, T_y)
    return (B, T_x, T_y, ls, lt), (*parts, random_ids(g, B, T_x, V_src, ls, lo=3), valid_mask(ls, T_x),
                                   random_ids(g, B, T_y, V_tgt, lt, lo=1), valid_mask(lt, T_y))


def _forward_case(g, big):
    (B, T_x, T_y, ls, lt), args = _forward_args(g, big)
    return Case(f"B={B}, T_x={T_x} (source lengths {ls}), T_y={T_y} (target lengths {lt}), the checks' toy "
                f"model", args)


def _forward_edge():
    g = gen(78)
    enc, kv, dec = toy_encdec(g)
    src, tgt = random_ids(g, 2, 5, 8, [5, 3], lo=3), random_ids(g, 2, 4, 7, [4, 2], lo=1)
    sv, tv = valid_mask([5, 3], 5), valid_mask([4, 2], 4)
    return [
        Case("one target position (T_y = 1)", (enc, kv, dec, src, sv, tgt[:, :1], tv[:, :1])),
        Case("an empty source (T_x = 0)", (enc, kv, dec, src[:, :0], sv[:, :0], tgt, tv)),
        Case("one source is all padding, lengths [5, 0]",
             (enc, kv, dec, src.masked_fill(~valid_mask([5, 0], 5), 0), valid_mask([5, 0], 5), tgt, tv)),
        Case("no padding anywhere", (enc, kv, dec, src, torch.ones(2, 5, dtype=torch.bool), tgt,
                                     torch.ones(2, 4, dtype=torch.bool))),
        Case("one sentence (B = 1)", (enc, kv, dec, src[1:], sv[1:], tgt[1:], tv[1:])),
        Case("the toy model in float32: the logits stay float32", (*toy_encdec(gen(81), dtype=torch.float32), src,
                                                                   sv, tgt, tv)),
    ]


class _Counting:
    """The toy model's three parts, each recording its calls (for the properties)."""

    def __init__(self, parts):
        self.parts, self.calls, self.kv = parts, [], []

    def part(self, k):
        def call(*args, **kwargs):
            value = self.parts[k](*args, **kwargs)
            which = self.parts[k].which
            if which == "cross_kv":
                self.kv.append(value)
            elif which == "run_decoder":
                given = inspect.signature(ToyEncDec.run_decoder).bind(None, *args, **kwargs).arguments
                tgt_in, kv = given["tgt_in"], given["kv"]
                which = ("run_decoder", tuple(tgt_in.shape) if torch.is_tensor(tgt_in) else None,
                         "fresh" if self.kv and kv is self.kv[-1] else "other")
            self.calls.append(which)
            return value
        return call

    def three(self):
        return tuple(self.part(k) for k in range(3))

    def count(self, which):
        return sum(1 for c in self.calls if (c if isinstance(c, str) else c[0]) == which)


SOURCE_ONCE = ("the source side depends on the source alone: call encode once and cross_kv once, before anything "
               "reads them, and hand the same keys and values to every run_decoder call")


def _source_side_once(counting, what):
    n_enc, n_kv = counting.count("encode"), counting.count("cross_kv")
    if n_enc != 1:
        return f"encode was called {n_enc} times for {what}: {SOURCE_ONCE}"
    if n_kv != 1:
        return (f"cross_kv was called {n_kv} times for {what}: computing the cross-attention keys and values again "
                f"recomputes the same numbers; {SOURCE_ONCE}")
    return None


def _forward_calls_once(fn):
    """The encoder once, cross_kv once, and the decoder once for every target position at once."""
    (_, _, T_y, _, _), args = _forward_args(gen(79), False)
    counting = _Counting(args[:3])
    if learner_call(fn, (*counting.three(), *args[3:])) is None:
        return None  # reported by the case checks
    wrong = _source_side_once(counting, "one batch")
    if wrong:
        return wrong
    n_dec = counting.count("run_decoder")
    if n_dec != 1:
        return (f"run_decoder was called {n_dec} times for one batch of T_y={T_y} target positions: the decoder "
                f"reads the true target (teacher forcing), so one call scores every position (the causal mask keeps "
                f"each position from seeing later ones)")
    return None


# ---------------------------------------------------------------- translation_loss
def _loss_batch(g, B, T_x, T_y, V_src, V_tgt, src_lengths, tgt_lengths, bos_id=1, eos_id=2):
    """tgt_in = <bos> y_1 ... y_n, tgt_out = y_1 ... y_n <eos>, padding 0; ``tgt_lengths`` counts n + 1."""
    tgt_in, tgt_out = torch.zeros(B, T_y, dtype=torch.long), torch.zeros(B, T_y, dtype=torch.long)
    for b, n in enumerate(tgt_lengths):
        y = torch.randint(3, V_tgt, (n - 1,), generator=g)
        tgt_in[b, :n] = torch.cat([torch.tensor([bos_id]), y])
        tgt_out[b, :n] = torch.cat([y, torch.tensor([eos_id])])
    return {"src": random_ids(g, B, T_x, V_src, src_lengths, lo=3), "src_mask": valid_mask(src_lengths, T_x),
            "tgt_in": tgt_in, "tgt_out": tgt_out, "tgt_mask": valid_mask(tgt_lengths, T_y)}


def _loss_case(g, big):
    B = pick_int(g, 1, 4) if big else pick_int(g, 2, 4)
    T_x, T_y = pick_int(g, 1 if big else 2, 6), pick_int(g, 1 if big else 3, 7)
    V_src, V_tgt = pick_int(g, 4, 9), pick_int(g, 4, 9)
    ls = random_lengths(g, B, T_x)
    lt = random_lengths(g, B, T_y)
    if not big and len(set(lt)) == 1:  # sentences of different lengths: a mean of means differs then
        lt[0] = T_y - 1 if lt[0] == T_y else T_y
    parts = toy_encdec(g, V_src, V_tgt, D=pick_int(g, 2, 6))
    return Case(f"B={B}, T_x={T_x} (source lengths {ls}), T_y={T_y} (target lengths {lt}, <eos> included), the "
                f"checks' toy model", (*parts, _loss_batch(g, B, T_x, T_y, V_src, V_tgt, ls, lt)))


def _loss_edge():
    g = gen(80)
    parts = toy_encdec(g)
    return [
        Case("one sentence (B = 1), no padding", (*parts, _loss_batch(g, 1, 4, 5, 8, 7, [4], [5]))),
        Case("a target that is <eos> alone (tgt_in = <bos>)", (*parts, _loss_batch(g, 2, 4, 3, 8, 7, [4, 2], [1, 3]))),
        Case("sentences of equal length", (*parts, _loss_batch(g, 3, 5, 4, 8, 7, [5, 5, 2], [4, 4, 4]))),
        Case("much padding: target lengths [6, 1, 2]", (*parts, _loss_batch(g, 3, 5, 6, 8, 7, [5, 3, 1], [6, 1, 2]))),
        Case("the toy model in float32: the loss stays float32",
             (*toy_encdec(gen(82), dtype=torch.float32), _loss_batch(g, 2, 4, 5, 8, 7, [4, 2], [5, 3]))),
    ]


# ---------------------------------------------------------------- greedy_translate
def _greedy_case(g, big):
    B = pick_int(g, 1, 4) if big else pick_int(g, 2, 4)
    T_x = pick_int(g, 0, 7) if big else pick_int(g, 2, 6)
    max_len = pick_int(g, 0, 14) if big else pick_int(g, 5, 12)
    V_src, V_tgt = pick_int(g, 5, 9), pick_int(g, 5, 9)
    parts = toy_encdec(g, V_src, V_tgt, D=pick_int(g, 2, 6))
    ls = random_lengths(g, B, T_x, lo=0 if big else 1)
    return Case(f"B={B}, T_x={T_x} (source lengths {ls}), max_len={max_len}, <bos>=1, <eos>=2, the checks' toy "
                f"model", (*parts, random_ids(g, B, T_x, V_src, ls, lo=3), valid_mask(ls, T_x), 1, 2, max_len))


def _greedy_models():
    """(what, (parts, src, src_valid)): the contract's three kinds of model (learner/check/cases/greedy.py)."""
    g = gen(83)  # a seed whose three rows end after 15, 7 and 12 tokens
    parts = toy_encdec(g)
    src, sv = random_ids(g, 3, 6, 8, [6, 4, 2], lo=3), valid_mask([6, 4, 2], 6)
    g = gen(84)
    return {"mixed": ("the checks' toy model, whose 3 rows end after 15, 7 and 12 tokens", (parts, src, sv)),
            "never": ("a model that never writes <eos>", (toy_encdec(g, eos_bias=-60.0), src, sv)),
            "at_once": ("a model that writes <eos> first", (toy_encdec(g, eos_bias=60.0), src, sv))}


def _greedy_call(model, max_len):
    parts, src, sv = model
    return (*parts, src, sv, 1, 2, max_len), {}


def _greedy_edge():
    m = _greedy_models()
    parts, src, sv = m["mixed"][1]
    return greedy_contract_cases(_greedy_call, m["mixed"][1], m["never"][1], m["at_once"][1]) + [
        Case("one sentence (B = 1)", (*parts, src[:1], sv[:1], 1, 2, 12)),
        Case("an empty source (T_x = 0)", (*parts, src[:, :0], sv[:, :0], 1, 2, 12)),
        Case("src_valid=None: no padding", (*parts, src, None, 1, 2, 12)),
        Case("src of shape (6,), not (B, T_x): an error", (*parts, src[0], sv[0], 1, 2, 5), raises="ValueError"),
    ]


def _greedy_keeps_the_contract(fn):
    """The contract of greedy decoding, with the three kinds of model."""
    return greedy_contract_property(_greedy_call, list(_greedy_models().values()), 2)(fn)


def _recomputed(parts, src, src_valid, bos_id, eos_id, max_len):
    """Greedy decoding that runs encode and cross_kv again at every step: what the cached version must equal."""
    enc, kv, dec = parts
    written = [torch.full((src.shape[0],), bos_id, dtype=torch.long)]
    ended = torch.zeros(src.shape[0], dtype=torch.bool)
    while len(written) <= max_len and not ended.all():
        token = dec(torch.stack(written, dim=1), kv(enc(src, src_valid)), src_valid, None)[:, -1].argmax(-1)
        written.append(torch.where(ended, torch.zeros_like(token), token))
        ended = ended | (written[-1] == eos_id)
    return torch.stack(written[1:], dim=1) if len(written) > 1 else torch.zeros(src.shape[0], 0, dtype=torch.long)


def _greedy_once_and_same(fn):
    """Writes exactly what recomputing the source side at every step writes, calling encode and cross_kv once."""
    g = gen(82)
    parts = toy_encdec(g)
    src, sv = random_ids(g, 3, 6, 8, [6, 4, 2], lo=3), valid_mask([6, 4, 2], 6)
    counting = _Counting(parts)
    out = learner_call(fn, (*counting.three(), src, sv, 1, 2, 12))
    got = None if out is None else tensor_in(out.value, dim=2)
    if got is None:
        return None  # reported by the case checks
    want = _recomputed(parts, src, sv, 1, 2, 12)
    if tuple(got.shape) != tuple(want.shape) or nested(got) != want.tolist():
        return (f"it wrote {nested(got)} where greedy decoding that recomputes the encoder at every step writes "
                f"{want.tolist()}: computing the source side once must change the time, never the tokens")
    wrong = _source_side_once(counting, f"a batch of 3 sources and {want.shape[1]} decoding steps")
    if wrong:
        return wrong
    decodes = [c for c in counting.calls if not isinstance(c, str)]
    if any(c[2] != "fresh" for c in decodes):
        return "run_decoder was given keys and values other than the ones cross_kv returned: pass them on unchanged"
    if len(decodes) != want.shape[1]:
        return (f"run_decoder was called {len(decodes)} times to write {want.shape[1]} tokens: one call per token "
                f"(each reads the target written so far), and none once every row has written <eos>")
    return None


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
                       ("encoder_decoder:cross_attention_mask_reversed",
                        REVERSED_LESSON.format(fix="src_valid is already the mask's polarity: src_valid[:, None, :], "
                                                   "no ~")),
                       ("encoder_decoder:cross_attention_mask_without_query_axis",
                        "src_valid went to attention as it is, (B, T_x): a mask must broadcast to (B, T_y, T_x), so "
                        "its batch axis lined up with the queries. Give it the query axis: src_valid[:, None, :], "
                        "(B, 1, T_x)"),
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
                        "memory, only the queries from the decoder's r' (the first sub-layer's output)"),
                       ("encoder_decoder:encdec_causal_cross",
                        "a causal mask was applied to cross-attention; only self-attention is causal, cross-"
                        "attention may read every real source token"),
                       ("encoder_decoder:encdec_no_causal_self",
                        f"self-attention has no causal mask, so the future leaks: {CAUSAL_LESSON} (and key j is a "
                        f"real target token)"),
                       ("encoder_decoder:encdec_no_cross_residual",
                        "the residual around cross-attention is missing: r'' = LayerNorm(r' + CrossAttention(r', "
                        "memory))"),
                       ("encoder_decoder:encdec_cross_reads_y",
                        "cross-attention was fed y, the block's input; it is fed r', the output of the first "
                        "sub-layer: cross_attention(r', memory, src_valid, ...), so the queries have read the "
                        "target's past first"),
                       ("encoder_decoder:encdec_causal_reversed",
                        f"self-attention's causal mask has its polarity reversed (triu(1) or ~tril: True on the "
                        f"blocked pairs, nn.MultiheadAttention's convention): {CAUSAL_LESSON}, so True belongs on "
                        f"and below the diagonal (tril)"),
                       ("encoder_decoder:encdec_causal_strict",
                        "self-attention's causal mask blocks the diagonal too (tril(diagonal=-1)): every target "
                        "position may attend to itself, so keep the diagonal: tril() with diagonal=0"),
                       ("encoder_decoder:encdec_no_src_mask",
                        "cross-attention read the source's padding: pass src_valid on to cross_attention, so that "
                        "each query reads the real source tokens only"),
                       ("encoder_decoder:encdec_cross_residual_from_y",
                        "the residual around cross-attention added y, the block's input; it adds r', the first "
                        "sub-layer's output: r'' = LayerNorm(r' + CrossAttention(r', memory))"),
                       ("encoder_decoder:encdec_no_target_padding",
                        "self-attention's mask is causal only: the target padding is not blocked. Combine the two: "
                        "causal & tgt_valid[:, None, :], shape (B, T_y, T_y)")],
             n_basic=6, n_hidden=12),
    Exercise("encdec_forward", "encoder_decoder:encdec_forward", _forward_case, _forward_edge,
             properties=[("basic", _forward_calls_once), ("edge", _forward_calls_once),
                         ("hidden", _forward_calls_once)],
             mistakes=[("encoder_decoder:encdec_forward_no_src_mask",
                        "run_decoder was not given src_valid, so cross-attention read the source padding: pass "
                        "src_valid to run_decoder (and to encode)"),
                       ("encoder_decoder:encdec_forward_encoder_unmasked",
                        "encode was not given src_valid, so the encoder read the source padding as text: "
                        "encode(src, src_valid)"),
                       ("encoder_decoder:encdec_forward_no_tgt_mask",
                        "run_decoder was not given tgt_valid, so the rows at target padding differ: pass both masks "
                        "on as they came")],
             tensor_inputs=False, n_basic=6, n_hidden=12),
    Exercise("translation_loss", "encoder_decoder:translation_loss", _loss_case, _loss_edge,
             uses=("encdec_forward",),
             mistakes=[("encoder_decoder:translation_loss_padding_counted",
                        "the padding was counted: average the cross-entropy over the real target tokens only "
                        "(batch['tgt_mask']), so that a batch's padding changes nothing"),
                       ("encoder_decoder:translation_loss_targets_not_shifted",
                        "the logits were scored against tgt_in, the tokens the decoder reads; row t predicts the "
                        "next token, tgt_out[:, t] (tgt_in shifted by one)"),
                       ("encoder_decoder:translation_loss_decoder_reads_tgt_out",
                        "the decoder was fed tgt_out, the very tokens it must predict (each row t then reads its "
                        "own answer); it reads tgt_in, <bos> y_1 ... y_n, and is scored against tgt_out"),
                       ("encoder_decoder:translation_loss_mean_of_sentences",
                        "each sentence was averaged first, then the sentences: every real target token of the "
                        "batch weighs the same, so divide the sum by the number of real tokens"),
                       ("encoder_decoder:translation_loss_summed",
                        "the cross-entropies were summed, not averaged over the real target tokens")],
             tensor_inputs=False, n_basic=6, n_hidden=12),
    Exercise("greedy_translate", "encoder_decoder:greedy_translate", _greedy_case, _greedy_edge,
             properties=[("basic", _greedy_once_and_same), ("edge", _greedy_once_and_same),
                         ("edge", _greedy_keeps_the_contract), ("hidden", _greedy_once_and_same),
                         ("hidden", _greedy_keeps_the_contract)],
             mistakes=[("encoder_decoder:greedy_translate_first_row",
                        "the next token was read from the first row of the logits; row t predicts the token after "
                        "position t, so the next token is the argmax of the last row, logits[:, -1]"),
                       ("encoder_decoder:greedy_translate_no_pad_after_eos",
                        "a row that has written <eos> went on writing: after its <eos> a row gets 0 (padding), "
                        "e.g. next.masked_fill(done, 0)"),
                       ("encoder_decoder:greedy_translate_to_max_len",
                        "the loop went on after every row had written <eos>: stop as soon as all have"),
                       ("encoder_decoder:greedy_translate_stops_at_first_eos",
                        "the loop stopped when the first row wrote <eos>; the other rows were still writing, so "
                        "stop only when every row has"),
                       ("encoder_decoder:greedy_translate_with_bos",
                        "<bos> was returned too: return only the tokens written after it")],
             tensor_inputs=False, n_basic=8, n_hidden=16),
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
         "each head has its own weights: (B, heads, T_y, T_x)"),
        ("encoder_decoder:answer_cross_weights_shape_encoder_self",
         "(T_x, T_x) is the encoder's self-attention: cross-attention's queries are the T_y target tokens"),
        ("encoder_decoder:answer_cross_weights_shape_heads_after_tokens",
         "the head axis comes right after the batch: (B, heads, T_y, T_x)")]),
    question("answer_empty_source", "encoder_decoder:answer_empty_source", Choice("a", "b", "c", "d"), wrong=[
        ("encoder_decoder:answer_empty_source_error",
         "with no key to read, every cross-attention weight is 0 and the sub-layer adds its output bias: section 7 "
         "runs it"),
        ("encoder_decoder:answer_empty_source_encoder",
         "the decoder's self-attention stays causal; the empty source takes away cross-attention, not the mask"),
        ("encoder_decoder:answer_empty_source_uniform",
         "the self-attention's weights still come from the scores; only cross-attention has nothing to read")]),
)
