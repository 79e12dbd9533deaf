"""Notebook 05, the RNN encoder-decoder: cases, properties and known mistakes.

The weights are random and seeded; a decoder's weights come as one dict with
the keys of ``solutions/rnn.py``. Token ids: <pad> 0, <bos> 1, <eos> 2.
"""
import math

import torch

from .. import safe
from ..compare import same
from .common import (Case, Exercise, F64, dn, gen, learner_call, logit_sum_scale, nested, pick_dtype, pick_int,
                     seeded_randn, register, tensor_in, Choice, IntTuple, question)
from .greedy import (greedy_contract_cases, greedy_contract_property)

BOS, EOS = 1, 2


def _params(g, V_src, V, D, d_h, dtype=F64, eos_bias=0.0, out_scale=2.0):
    """Encoder-decoder weights of the reference's layout; larger ``out_scale`` gives peakier softmaxes."""
    def w(rows, cols, scale=1.0):
        return seeded_randn(g, rows, cols, dtype=dtype, scale=scale / math.sqrt(cols))

    p = {"E_src": seeded_randn(g, V_src, D, dtype=dtype), "W_x_enc": w(d_h, D), "W_h_enc": w(d_h, d_h, 1.5),
         "b_enc": seeded_randn(g, d_h, dtype=dtype, scale=0.3),
         "E_tgt": seeded_randn(g, V, D, dtype=dtype), "W_x_dec": w(d_h, D), "W_h_dec": w(d_h, d_h, 1.5),
         "b_dec": seeded_randn(g, d_h, dtype=dtype, scale=0.3),
         "W_out": w(V, d_h, out_scale), "b_out": seeded_randn(g, V, dtype=dtype, scale=0.5)}
    p["b_out"][EOS] += eos_bias
    return p


def _dec(p):
    """Only the decoder's weights (what decoder_step and the decoders read)."""
    return {k: p[k] for k in ("E_tgt", "W_x_dec", "W_h_dec", "b_dec", "W_out", "b_out")}


def _context(g, *shape, dtype=F64):
    return torch.tanh(seeded_randn(g, *shape, dtype=dtype, scale=1.5))


def _padded_ids(g, B, T, V, lengths, pad_value=0):
    ids = torch.randint(3, V, (B, T), generator=g) if V > 3 else torch.randint(0, V, (B, T), generator=g)
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~mask, pad_value), mask


# ---------------------------------------------------------------- rnn_cell
def _cell_args(g, B, D, d_h, dtype=F64, scale=1.0):
    return (seeded_randn(g, B, D, dtype=dtype, scale=scale), _context(g, B, d_h, dtype=dtype),
            seeded_randn(g, d_h, D, dtype=dtype, scale=1 / math.sqrt(D)), seeded_randn(g, d_h, d_h, dtype=dtype, scale=1 / math.sqrt(d_h)),
            seeded_randn(g, d_h, dtype=dtype, scale=0.3))


def _cell_case(g, big):
    dtype = pick_dtype(g)
    B, D, d_h = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 8 if big else 6), pick_int(g, 1, 8 if big else 6)
    return Case(f"B={B}, D={D}, d_h={d_h}, {dn(dtype)}", _cell_args(g, B, D, d_h, dtype))


def _cell_edge():
    g = gen(51)
    x, h, W_x, W_h, b = _cell_args(g, 2, 3, 4)
    return [
        Case("the first step: h_prev = h_0 = 0", (x, torch.zeros_like(h), W_x, W_h, b)),
        Case("B = 1, d_h = 1", _cell_args(g, 1, 3, 1)),
        Case("square weights (D = d_h)", _cell_args(g, 3, 4, 4)),
        Case("huge inputs (x100): tanh saturates at +-1, no overflow", (x * 100, h, W_x, W_h, b)),
        Case("float32", _cell_args(g, 2, 5, 3, dtype=torch.float32)),
        Case("x_t of the wrong width D is an error", (x[:, :2], h, W_x, W_h, b), raises="ValueError"),
        Case("h_prev of width d_h = 3 for W_h of d_h = 4 is an error", (x, h[:, :3], W_x, W_h, b), raises="ValueError"),
        Case("W_x of d_h = 3 rows for W_h of d_h = 4 is an error", (x, h, W_x[:3], W_h, b), raises="ValueError"),
    ]


# ---------------------------------------------------------------- rnn_encode
def _encode_args(g, B, T, lengths, V_src=7, D=3, d_h=4, dtype=F64, pad_value=0):
    p = _params(g, V_src, 5, D, d_h, dtype)
    ids, mask = _padded_ids(g, B, T, V_src, lengths, pad_value)
    return (ids, mask, p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])


def _encode_case(g, big):
    dtype = pick_dtype(g)
    B, T = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 10 if big else 7)
    lengths = [pick_int(g, 0 if big else 1, T) for _ in range(B)]
    V_src, D, d_h = pick_int(g, 4, 12), pick_int(g, 1, 6), pick_int(g, 1, 8)
    return Case(f"B={B}, T_x={T}, source lengths {lengths}, V_src={V_src}, D={D}, d_h={d_h}, {dn(dtype)}",
                _encode_args(g, B, T, lengths, V_src, D, d_h, dtype))


def _encode_edge():
    g = gen(52)
    full = _encode_args(g, 2, 5, [5, 5])
    return [
        Case("empty source (T_x = 0): the context is the initial state h_0 = 0", _encode_args(g, 2, 0, [0, 0])),
        Case("a length-1 source: c = h_1", _encode_args(g, 3, 1, [1, 1, 1])),
        Case("one sentence is all padding: its context is h_0 = 0", _encode_args(g, 3, 4, [4, 0, 2])),
        Case("padded batch, lengths [6, 3, 1]", _encode_args(g, 3, 6, [6, 3, 1])),
        Case("padding positions hold ids other than <pad>", _encode_args(g, 2, 5, [2, 5], pad_value=5)),
        Case("no padding (src_mask all True)", full),
        Case("src_mask=None means no padding", (full[0], None) + full[2:]),
        Case("float32, B = 1", _encode_args(g, 1, 4, [3], dtype=torch.float32)),
        Case("T_x = 0 in float32: both outputs stay float32", _encode_args(gen(56), 2, 0, [0, 0], dtype=torch.float32)),
        Case("padding positions hold id 999, outside the vocabulary: padding may hold any id",
             _encode_args(gen(54), 2, 5, [2, 4], pad_value=999)),
        Case("a src_mask of the wrong shape is an error", (full[0], full[1][:, :3]) + full[2:], raises="ValueError"),
    ]


def _padded_context_equals_unpadded(fn):
    """The context of a padded batch equals each sentence run alone, unpadded."""
    g = gen(53)
    lengths = [6, 3, 1, 0]
    args = _encode_args(g, 4, 6, lengths, V_src=8, D=3, d_h=5)
    ids, mask, rest = args[0], args[1], args[2:]
    out = learner_call(fn, args)
    states = None if out is None else tensor_in(out.value, 0, shape=(4, 6, 5))
    context = None if out is None else tensor_in(out.value, 1, shape=(4, 5))
    if states is None or context is None:
        return None  # reported by the case checks
    for b, n in enumerate(lengths):
        alone = safe.call(fn, (ids[b:b + 1, :n], mask[b:b + 1, :n]) + rest)
        if alone.error is not None or alone.timed_out or not (isinstance(alone.value, tuple) and len(alone.value) == 2):
            return f"running sentence b={b} alone ({n} tokens, no padding) failed: {alone.error or 'timeout'}"
        s1, c1 = alone.value
        if not same(c1[0], context[b]):
            return (f"the context of sentence b={b} ({n} real tokens, padded to T_x=6) is not the context of the same "
                    f"sentence run alone without padding: the padding changed it. c must be h_{{T_x}}, the state "
                    f"after the last real token" + (" (for no real token at all, h_0 = 0)" if n == 0 else ""))
        if n and not same(s1[0], states[b, :n]):
            return f"the states of sentence b={b} at its real positions differ from running it alone without padding"
    return None


# ---------------------------------------------------------------- decoder_step
def _step_case(g, big):
    dtype = pick_dtype(g)
    B, V, D, d_h = pick_int(g, 1, 5 if big else 4), pick_int(g, 3, 10), pick_int(g, 1, 6), pick_int(g, 1, 8)
    p = _dec(_params(g, 4, V, D, d_h, dtype))
    prev = torch.randint(0, V, (B,), generator=g)
    return Case(f"B={B}, V={V}, D={D}, d_h={d_h}, {dn(dtype)}", (prev, _context(g, B, d_h, dtype=dtype), p))


def _step_edge():
    g = gen(54)
    p = _dec(_params(g, 4, 6, 3, 4))
    return [
        Case("the first step: <bos> and h = c", (torch.full((3,), BOS), _context(g, 3, 4), p)),
        Case("B = 1", (torch.tensor([4]), _context(g, 1, 4), p)),
        Case("a zero state", (torch.tensor([2, 5]), torch.zeros(2, 4, dtype=F64), p)),
        Case("float32", (torch.tensor([0, 3]), _context(g, 2, 3, dtype=torch.float32),
                         _dec(_params(g, 4, 5, 2, 3, torch.float32)))),
    ]


# ---------------------------------------------------------------- teacher_forced_logits
def _tgt_in(g, B, T, V, lengths):
    ids = torch.randint(3, V, (B, T), generator=g)
    ids[:, 0] = BOS
    return ids.masked_fill(torch.arange(T)[None, :] >= torch.tensor(lengths)[:, None], 0)


def _tf_case(g, big):
    dtype = pick_dtype(g)
    B, T, V, D, d_h = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 8 if big else 6), pick_int(g, 4, 10), \
        pick_int(g, 1, 5), pick_int(g, 1, 7)
    lengths = [pick_int(g, 1, T) for _ in range(B)]
    p = _dec(_params(g, 4, V, D, d_h, dtype))
    return Case(f"B={B}, T_y={T}, target lengths {lengths}, V={V}, D={D}, d_h={d_h}, {dn(dtype)}",
                (_context(g, B, d_h, dtype=dtype), _tgt_in(g, B, T, V, lengths), p))


def _tf_edge():
    g = gen(55)
    p = _dec(_params(g, 4, 7, 3, 5, out_scale=4.0))
    return [
        Case("T_y = 1: only <bos> is read", (_context(g, 2, 5), torch.full((2, 1), BOS), p)),
        Case("an empty target (T_y = 0)", (_context(g, 2, 5), torch.zeros(2, 0, dtype=torch.long), p)),
        Case("targets the decoder would not predict (teacher forcing must still read them)",
             (_context(g, 3, 5), _tgt_in(g, 3, 6, 7, [6, 6, 6]), p)),
        Case("padded targets", (_context(g, 3, 5), _tgt_in(g, 3, 5, 7, [5, 2, 1]), p)),
        Case("float32, B = 1", (_context(g, 1, 3, dtype=torch.float32), _tgt_in(g, 1, 4, 5, [4]),
                                _dec(_params(g, 4, 5, 2, 3, torch.float32)))),
        Case("an empty target in float32: the logits stay float32", (_context(gen(57), 2, 3, dtype=torch.float32),
             torch.zeros(2, 0, dtype=torch.long), _dec(_params(gen(57), 4, 5, 2, 3, torch.float32)))),
    ]


# ---------------------------------------------------------------- seq2seq_loss
def _loss_case(g, big):
    dtype = pick_dtype(g)
    B, T, V = pick_int(g, 1, 5 if big else 4), pick_int(g, 1, 8 if big else 6), pick_int(g, 3, 12)
    logits = seeded_randn(g, B, T, V, dtype=dtype, scale=2.0)
    targets = torch.randint(0, V, (B, T), generator=g)
    if pick_int(g, 0, 3) == 0:
        return Case(f"B={B}, T_y={T}, V={V}, no mask, {dn(dtype)}", (logits, targets))
    lengths = [pick_int(g, 1, T) for _ in range(B)]
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]
    return Case(f"B={B}, T_y={T}, V={V}, target lengths {lengths}, {dn(dtype)}",
                (logits, targets.masked_fill(~mask, 0), mask))


def _loss_edge():
    g = gen(56)
    logits = seeded_randn(g, 3, 5, 6, scale=2.0)
    targets = torch.randint(0, 6, (3, 5), generator=g)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 2, 0])[:, None]
    return [
        Case("T_y = 1", (seeded_randn(g, 2, 1, 4), torch.tensor([[1], [3]]), torch.ones(2, 1, dtype=torch.bool))),
        Case("uniform logits: each real token costs log V",
             (torch.zeros(2, 3, 5, dtype=F64), torch.tensor([[1, 2, 0], [4, 0, 0]]),
              torch.tensor([[True, True, False], [True, False, False]]))),
        Case("one example is all padding: it adds 0 but still counts in N", (logits, targets.masked_fill(~mask, 0),
                                                                             mask)),
        Case("padding targets hold -100 (ignore_index style)", (logits, targets.masked_fill(~mask, -100), mask)),
        Case("padding targets hold 999, outside the vocabulary", (logits, targets.masked_fill(~mask, 999), mask)),
        Case("confident logits (1e3) stay finite", (torch.tensor([[[1e3, 0.0], [0.0, 1e3]]], dtype=F64),
                                                    torch.tensor([[1, 0]]), torch.tensor([[True, True]]))),
        Case("no mask: every position counts", (logits, targets)),
        Case("a mask of the wrong shape is an error", (logits, targets, mask[:, :3]), raises="ValueError"),
        Case("2-D logits (T_y, V) are an error", (logits[0], targets[:1], mask[:1]), raises="ValueError"),
        Case("targets of another shape than (B, T_y) are an error", (logits, targets[:, :3], mask[:, :3]),
             raises="ValueError"),
    ]


# ---------------------------------------------------------------- greedy_decode
EOS_BIAS = (-0.5, 0.0, 0.5, 1.0)


def _greedy_case(g, big):
    dtype = pick_dtype(g)
    B, V, D, d_h = pick_int(g, 1, 5 if big else 4), pick_int(g, 3, 8), pick_int(g, 1, 5), pick_int(g, 1, 6)
    max_len = pick_int(g, 0, 9) if big else pick_int(g, 1, 6)
    p = _dec(_params(g, 4, V, D, d_h, dtype, eos_bias=EOS_BIAS[pick_int(g, 0, 3)]))
    return Case(f"B={B}, V={V}, D={D}, d_h={d_h}, max_len={max_len}, {dn(dtype)}",
                (_context(g, B, d_h, dtype=dtype), p, BOS, EOS), {"max_len": max_len})


def _greedy_models():
    """(what, (context, decoder weights)): the contract's three kinds of decoder (learner/check/cases/greedy.py)."""
    g = gen(157)  # a seed whose four sentences end after 1, 10, 5 and 2 tokens
    params = _dec(_params(g, 4, 6, 3, 5))
    mixed = (_context(g, 4, 5), params)
    g = gen(57)
    never = _dec(_params(g, 4, 6, 3, 5, eos_bias=-60.0))
    at_once = _dec(_params(g, 4, 6, 3, 5, eos_bias=60.0))
    return {"mixed": ("a decoder whose 4 sentences end after 1, 10, 5 and 2 tokens", mixed),
            "never": ("a decoder that never writes <eos>", (mixed[0], never)),
            "at_once": ("a decoder that writes <eos> first", (mixed[0], at_once))}


def _greedy_call(model, max_len):
    context, params = model
    return (context, params, BOS, EOS), {"max_len": max_len}


def _greedy_edge():
    m = _greedy_models()
    c, p = m["mixed"][1]
    return greedy_contract_cases(_greedy_call, m["mixed"][1], m["never"][1], m["at_once"][1]) + [
        Case("B = 1, float32", (c[:1].float(), {k: v.float() for k, v in p.items()}, BOS, EOS), {"max_len": 6})]


def _greedy_keeps_the_contract(fn):
    """The contract of greedy decoding, with the three kinds of decoder."""
    return greedy_contract_property(_greedy_call, list(_greedy_models().values()), EOS, item=0)(fn)


# ---------------------------------------------------------------- beam_search
def _beam_case(g, big):
    dtype = pick_dtype(g)
    V, D, d_h = pick_int(g, 3, 7), pick_int(g, 1, 5), pick_int(g, 1, 6)
    beam_width, max_len = pick_int(g, 1, V + 1), pick_int(g, 1, 6 if big else 5)
    length_norm = pick_int(g, 0, 2) == 0
    p = _dec(_params(g, 4, V, D, d_h, dtype, eos_bias=EOS_BIAS[pick_int(g, 0, 3)]))
    return Case(f"V={V}, D={D}, d_h={d_h}, beam_width={beam_width}, max_len={max_len}, length_norm={length_norm}, "
                f"{dn(dtype)}", (_context(g, d_h, dtype=dtype), p, BOS, EOS),
                {"beam_width": beam_width, "max_len": max_len, "length_norm": length_norm})


def _beam_edge():
    g = gen(167)  # a seed where a beam of 5 finds a better sequence than greedy
    p = _dec(_params(g, 4, 5, 3, 4))
    c = _context(g, 4)
    g = gen(58)
    never = _dec(_params(g, 4, 5, 3, 4, eos_bias=-60.0))
    at_once = _dec(_params(g, 4, 5, 3, 4, eos_bias=60.0))
    ln = _length_norm_case()
    g_short = gen(300)  # a seed where [<eos>] ranks fourth by its score / 1, first by its score / 2
    short_p, short_c = _dec(_params(g_short, 4, 5, 3, 4, eos_bias=1.0)), _context(g_short, 4)

    def kw(bw, ml, norm=False):  # norm None: length_norm left to its default
        return {"beam_width": bw, "max_len": ml} | ({} if norm is None else {"length_norm": norm})
    return [
        Case("beam width 1 (greedy)", (c, p, BOS, EOS), kw(1, 6)),
        Case("a beam as wide as the vocabulary (5); it finds a better sequence than greedy", (c, p, BOS, EOS),
             kw(5, 6)),
        Case("a beam wider than the vocabulary can fill at the first step", (c, p, BOS, EOS), kw(8, 4)),
        Case("max_len = 1", (c, p, BOS, EOS), kw(3, 1)),
        Case("a decoder that never emits <eos> stops at max_len", (c, never, BOS, EOS), kw(3, 4)),
        Case("a decoder that emits <eos> at once", (c, at_once, BOS, EOS), kw(3, 4)),
        Case("length_norm=True changes the winner", (ln[0], ln[1], BOS, EOS), kw(3, 5, True)),
        Case("the same case with length_norm=False", (ln[0], ln[1], BOS, EOS), kw(3, 5, False)),
        Case("the same case with length_norm left out: its default is False", (ln[0], ln[1], BOS, EOS), kw(3, 5, None)),
        Case("length_norm=True with a one-token hypothesis (<eos> at once) just below the top three: its score is "
             "divided by its length, 1", (short_c, short_p, BOS, EOS), kw(3, 4, True)),
        Case("float32", (c.float(), {k: v.float() for k, v in p.items()}, BOS, EOS), kw(2, 5)),
        Case("beam_width = 0 is an error", (c, p, BOS, EOS), kw(0, 5), raises="ValueError"),
        Case("max_len = 0: nothing to write, one empty hypothesis of score 0", (c, p, BOS, EOS), kw(2, 0)),
        Case("max_len = -1 is an error", (c, p, BOS, EOS), kw(2, -1), raises="ValueError"),
        Case("a batch of contexts (2-D) is an error: beam search decodes one sentence", (c[None], p, BOS, EOS),
             kw(2, 3), raises="ValueError"),
    ]


def _length_norm_case():
    """A seeded decoder for which length normalisation changes the best hypothesis (found by search once)."""
    return _context(gen(1907), 4), _dec(_params(gen(1907), 4, 5, 3, 4, eos_bias=0.5))


# ------------------------------------------------- decoding oracles (plain loops, independent of the reference)
def _step(p, prev, h):
    e = p["E_tgt"][prev]
    h = torch.tanh(h @ p["W_h_dec"].T + e @ p["W_x_dec"].T + p["b_dec"])
    return torch.log_softmax(h @ p["W_out"].T + p["b_out"], dim=-1), h


def _score(p, c, tokens):
    h, prev, total = c, BOS, 0.0
    for tok in tokens:
        lp, h = _step(p, torch.tensor(prev), h)
        total += float(lp[tok])
        prev = tok
    return total


def _greedy_oracle(p, c, max_len):
    h, prev, toks = c, BOS, []
    for _ in range(max_len):
        lp, h = _step(p, torch.tensor(prev), h)
        prev = int(lp.argmax())
        toks.append(prev)
        if prev == EOS:
            break
    return toks, _score(p, c, toks)


def _beam_out(fn, c, p, bw, ml, norm=False):
    out = learner_call(fn, (c, p, BOS, EOS), {"beam_width": bw, "max_len": ml, "length_norm": norm})
    scores = None if out is None else tensor_in(out.value, 1)
    if scores is None:
        return None
    seqs = out.value[0]
    if not (isinstance(seqs, (list, tuple)) and seqs and isinstance(seqs[0], (list, tuple))
            and all(type(t) is int for t in seqs[0]) and scores.numel() >= 1):
        return None  # reported by the case checks
    return list(seqs[0]), nested(scores)[0]


def _beam_width_one_is_greedy(fn):
    """Beam width 1 equals greedy decoding."""
    for seed in (61, 62, 63):
        g = gen(seed)
        p, c = _dec(_params(g, 4, 6, 3, 5, eos_bias=0.5)), _context(g, 5)
        got = _beam_out(fn, c, p, 1, 6)
        if got is None:
            return None
        toks, logp = _greedy_oracle(p, c, 6)
        if got[0] != toks or not abs(got[1] - logp) <= 1e-7 * max(1.0, abs(logp)):
            return (f"with beam_width=1 beam search must be greedy decoding: the greedy sequence is {toks} "
                    f"(log-prob {logp:.6g}), your best is {got[0]} (log-prob {got[1]:.6g})")
    return None


def _wide_beam_is_exhaustive(fn):
    """With max_len=2, a beam as wide as the vocabulary finds the best of all sequences."""
    V = 4
    for seed in (71, 72, 73, 74):
        g = gen(seed)
        p, c = _dec(_params(g, 4, V, 3, 4, eos_bias=0.3, out_scale=3.0)), _context(g, 4)
        candidates = [[EOS]] + [[a, b] for a in range(V) if a != EOS for b in range(V)]
        for norm in (False, True):
            scored = [(_score(p, c, s) / (len(s) if norm else 1), s) for s in candidates]
            best_score, best = max(scored, key=lambda x: x[0])
            got = _beam_out(fn, c, p, V, 2, norm)
            if got is None:
                return None
            if got[0] != best:
                return (f"V={V}, max_len=2, beam_width={V}, length_norm={norm}: searching all {len(candidates)} "
                        f"sequences, the best is {best} ({'average ' if norm else ''}log-prob {best_score:.6g}); "
                        f"your beam search returned {got[0]} first")
    return None


register(__name__,
    Exercise("rnn_cell", "rnn:rnn_cell", _cell_case, _cell_edge,
             mistakes=[("rnn:rnn_cell_no_tanh", "the tanh is missing: h_t = tanh(W_h h_{t-1} + W_x x_t + b), which "
                                                "keeps every entry of the state in (-1, 1)"),
                       ("rnn:rnn_cell_ignores_h_prev", "the previous state h_{t-1} was ignored: without W_h h_{t-1} "
                                                       "there is no memory, each step sees only its own token"),
                       *((f"rnn:{m}", "a weight matrix was applied untransposed: W_x is (d_h, D) and W_h (d_h, d_h), "
                                     "so a batch of rows gives h_prev @ W_h.T + x_t @ W_x.T (B, d_h); W_h is square, so "
                                     "a missing .T on it raises no error")
                         for m in ("rnn_cell_weights_transposed", "rnn_cell_w_x_transposed",
                                   "rnn_cell_w_h_transposed"))]),
    Exercise("rnn_encode", "rnn:rnn_encode", _encode_case, _encode_edge,
             properties=[("edge", _padded_context_equals_unpadded), ("hidden", _padded_context_equals_unpadded)],
             mistakes=[("rnn:rnn_encode_context_after_padding",
                        "the context was taken after the padding: the cell kept running over the <pad> tokens. A "
                        "padding position must leave the state unchanged, so that c = h_{T_x}, the state after the "
                        "last real token"),
                       ("rnn:rnn_encode_context_last_column",
                        "the context is the state at the last position, T_x, which is padding for every shorter "
                        "sentence (its state 0, or reset to 0): c = h_{T_x} is the state after each sentence's last "
                        "real token, and a padding position leaves the state unchanged"),
                       ("rnn:rnn_encode_padding_states_kept",
                        "the states at padding positions repeat the last real state; they must be 0 (only the "
                        "context carries the last real state)")]),
    Exercise("decoder_step", "rnn:decoder_step", _step_case, _step_edge,
             mistakes=[("rnn:decoder_step_logits_from_old_state",
                        "the logits were computed from the previous state h_{t-1}; update the state first, then "
                        "score the next token from the new h_t"),
                       ("rnn:decoder_step_probabilities",
                        "you returned probabilities (a softmax); decoder_step returns the raw logits z_t"),
                       ("rnn:decoder_step_log_probabilities",
                        "you returned log-probabilities (a log_softmax); decoder_step returns the raw logits z_t")]),
    Exercise("teacher_forced_logits", "rnn:teacher_forced_logits", _tf_case, _tf_edge,
             mistakes=[("rnn:teacher_forced_own_predictions",
                        "teacher forcing was fed the model's own predictions: at step t the decoder must read the "
                        "true previous token tgt_in[:, t], not the argmax of its last output"),
                       ("rnn:teacher_forced_logits_from_old_state",
                        "the logits were taken from the old state h_{t-1}: update the state first, then score the "
                        "next token from the new one, z_t = W_out h_t + b_out (as decoder_step does)"),
                       ("rnn:teacher_forced_reads_previous_column",
                        "step t read tgt_in[:, t - 1], one column too early (step 0 read tgt_in[:, -1], the last "
                        "column): tgt_in is already shifted, <bos> y_1 ... y_{T_y - 1}, so step t reads tgt_in[:, t]"),
                       ("rnn:teacher_forced_zero_start",
                        "the decoder started from a zero state; its first state is the context vector, h_0 = c")]),
    Exercise("seq2seq_loss", "rnn:seq2seq_loss", _loss_case, _loss_edge, conditioning=logit_sum_scale,
             mistakes=[("rnn:seq2seq_loss_mean_over_tokens",
                        "the loss was averaged over the real tokens (F.cross_entropy's default 'mean'); the notes' "
                        "loss sums over each sequence's tokens and divides by the number of examples N only"),
                       ("rnn:seq2seq_loss_mean_over_all",
                        "the loss was averaged over every position, padding included: the padding must not count, "
                        "and the notes' loss sums each example's token losses and divides by the number of "
                        "examples N"),
                       ("rnn:seq2seq_loss_mean_of_sentences",
                        "each example was averaged over its own tokens first, then the examples: the notes' loss sums "
                        "each example's token losses (a long sentence weighs more) and divides by the number N"),
                       ("rnn:seq2seq_loss_padding_counted",
                        "the padding positions were scored too: use the mask so that padding adds nothing"),
                       ("rnn:seq2seq_loss_not_divided",
                        "the summed loss was not divided by the number of examples N (the batch size B)")]),
    Exercise("greedy_decode", "rnn:greedy_decode", _greedy_case, _greedy_edge,
             properties=[("edge", _greedy_keeps_the_contract), ("hidden", _greedy_keeps_the_contract)],
             mistakes=[("rnn:greedy_decode_finished_keep_going",
                        "sentences that already emitted <eos> kept generating: after its <eos> a sentence gets only "
                        "padding (0) and its log-probability stops growing"),
                       ("rnn:greedy_decode_finished_keep_scoring",
                        "a sentence that already emitted <eos> kept adding to its log-probability: its tokens are "
                        "padding from then on and add nothing (mask the step's log-probability to 0 where done is "
                        "True)"),
                       ("rnn:greedy_decode_no_feedback",
                        "the emitted token was not fed back: at step t the decoder reads y_{t-1}, the token it has "
                        "just emitted (<bos> only at the first step)")]),
    Exercise("beam_search", "rnn:beam_search", _beam_case, _beam_edge,
             properties=[("edge", _beam_width_one_is_greedy), ("edge", _wide_beam_is_exhaustive),
                         ("hidden", _beam_width_one_is_greedy), ("hidden", _wide_beam_is_exhaustive)],
             mistakes=[("rnn:beam_search_no_cumulative",
                        "beam search forgot to add the log-probabilities: a hypothesis' score is the sum of "
                        "log P over all its tokens, not the log-probability of its last token"),
                       ("rnn:beam_search_finished_keep_growing",
                        "finished hypotheses kept growing: one that emits <eos> is complete; set it aside and never "
                        "extend it"),
                       ("rnn:beam_search_ignores_length_norm",
                        "length_norm=True was ignored: rank the final hypotheses by log-probability divided by "
                        "their number of tokens"),
                       ("rnn:beam_search_scores_normalised",
                        "the scores came back length-normalised: length_norm changes only the ranking; each score "
                        "returned is the sequence's total log-probability, not divided by its number of tokens")]),
    question("answer_context_shape", "rnn:answer_context_shape", IntTuple(), wrong=[
        ("rnn:answer_context_shape_every_state",
         "(B, T_x, d_h) is every state h_1 ... h_{T_x}; the context is one vector per source, its last real state"),
        ("rnn:answer_context_shape_no_batch",
         "the context has no time axis, and the batch has one context per source: (B, d_h)"),
        ("rnn:answer_context_shape_one_vector", "each source of the batch has its own context: (B, d_h)"),
        ("rnn:answer_context_shape_swapped", "the axes are swapped: one row per source, (B, d_h)"),
        ("rnn:answer_context_shape_of_the_ids",
         "(B, T_x) is the shape of the source ids; the context holds d_h numbers per source, (B, d_h)")]),
    question("answer_teacher_forcing", "rnn:answer_teacher_forcing", Choice("a", "b", "c", "d"), wrong=[
        ("rnn:answer_teacher_forcing_own_prediction",
         "feeding its own predictions is what greedy decoding does when it writes; teacher forcing feeds the true "
         "previous token"),
        ("rnn:answer_teacher_forcing_context_only",
         "the context sets the decoder's first state; every step also reads the previous target token"),
        ("rnn:answer_teacher_forcing_source_token",
         "the decoder reads the target side; the source reaches it only through the context")]),
)
