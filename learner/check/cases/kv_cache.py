"""Notebook 09, the KV cache: cases, properties and known mistakes.

A cache is the pair (K, V) of one attention layer's keys and values, (B, H,
T_past, d_k) each, or None. Random caches are random tensors: the functions must
be right for any cached keys and values, not only for ones a model produced.

``greedy_generate`` takes a model as its ``step`` argument. The checks' model
is ``ToyLM``, a tiny recurrent language model in plain torch whose cache is
honest (feeding a token twice changes its state), so a loop that feeds the
wrong tokens produces the wrong text; a property wraps it to count what each
call feeds, so a loop that recomputes everything without the cache is caught
even though its text is right.
"""
import math

import torch

from ..compare import flatten
from .common import (REVERSED_LESSON, Case, Exercise, F64, allow_in_shipped, dn, gen, learner_call, nested,
                     no_future_leak, pick_dtype, pick_int, seeded_randn, register, tensor_in, Choice, Integer, question)
from .greedy import (greedy_contract_cases, greedy_contract_property)
from .transformer_parts import (as_float32, block_params)


# ---------------------------------------------------------------- the checks' toy model
class ToyLM:
    """step(ids (B, T_new), cache) -> (logits (B, T_new, V), cache): h_t = tanh(E[x_t] + P[t] + h_{t-1} A), logits
    h_t W + b.

    The cache is (h (B, D), the number of positions read so far). Plain torch, no
    reference: learners' machines run it in the visible checks.
    """

    def __init__(self, E, P, A, W, b=None):
        self.E, self.P, self.A, self.W = E, P, A, W
        self.b = torch.zeros(W.shape[1], dtype=W.dtype) if b is None else b

    def __eq__(self, other):
        return type(other) is ToyLM and all(torch.equal(getattr(self, n), getattr(other, n)) for n in "EPAWb")

    def __repr__(self):
        return f"ToyLM(vocabulary {self.E.shape[0]}, width {self.E.shape[1]}, {self.P.shape[0]} positions)"

    def __call__(self, ids, cache=None):
        if not torch.is_tensor(ids) or ids.dtype != torch.long or ids.dim() != 2 or ids.shape[1] < 1:
            what = f"a tensor of shape {tuple(ids.shape)} and dtype {ids.dtype}" if torch.is_tensor(ids) \
                else type(ids).__name__
            raise ValueError(f"step takes ids as a LongTensor of shape (B, T_new) with T_new >= 1, got {what} "
                             f"(one new token per row is ids of shape (B, 1), e.g. next_id[:, None])")
        B, T_new = ids.shape
        E, P, A, W, b = (t.to(ids.device) for t in (self.E, self.P, self.A, self.W, self.b))  # it follows its input
        if cache is None:
            h, t0 = torch.zeros(B, E.shape[1], dtype=E.dtype, device=ids.device), 0
        else:
            if not (isinstance(cache, tuple) and len(cache) == 2 and torch.is_tensor(cache[0])
                    and isinstance(cache[1], int)):
                raise ValueError("step was given a cache it did not make: pass back the cache the previous call "
                                 "returned, unchanged (None on the first call)")
            h, t0 = cache
            if h.shape[0] != B:
                raise ValueError(f"the cache belongs to a batch of {h.shape[0]} rows, but ids has {B}")
        if t0 + T_new > self.P.shape[0]:
            raise ValueError(f"this model reads at most {self.P.shape[0]} positions; the text would reach "
                             f"{t0 + T_new}")
        rows = []
        for i in range(T_new):
            h = torch.tanh(E[ids[:, i]] + P[t0 + i] + h @ A)  # (B, D)
            rows.append(h @ W + b)  # (B, V)
        return torch.stack(rows, dim=1), (h, t0 + T_new)


def toy_lm(g, V=7, D=6, T_max=40, eos_bias=0.0, eos_id=2):
    """A random ToyLM that never writes padding (0) or <bos> (1); ``eos_bias`` is added to the logit of <eos> (-60: never
    written, +60: always)."""
    b = torch.zeros(V, dtype=F64)
    b[:eos_id] -= 20.0
    b[eos_id] += eos_bias
    return ToyLM(seeded_randn(g, V, D, scale=1.5), seeded_randn(g, T_max, D), seeded_randn(g, D, D, scale=1.2 / math.sqrt(D)),
                 seeded_randn(g, D, V, scale=2.0), b)


allow_in_shipped(ToyLM)  # shipped expectations hold ToyLM cases (ToyLM.__eq__ lets build.stale compare them)


# ---------------------------------------------------------------- cached_attention
def _kv_cache(g, B, H, T_past, d_k, d_v, dtype=F64):
    return seeded_randn(g, B, H, T_past, d_k, dtype=dtype), seeded_randn(g, B, H, T_past, d_v, dtype=dtype)


def _cached_case(g, big):
    dtype = pick_dtype(g)
    B, H = pick_int(g, 1, 3), pick_int(g, 1, 3)
    d_k, d_v = pick_int(g, 1, 4), pick_int(g, 1, 4)
    T_past = pick_int(g, 0, 7) if big else pick_int(g, 1, 5)  # basic: a cache to read, so that ignoring it shows
    T_new = pick_int(g, 1, 4) if big else pick_int(g, 2, 3)  # basic: a chunk, so that an unmasked chunk shows
    cache = None if T_past == 0 and pick_int(g, 0, 1) else _kv_cache(g, B, H, T_past, d_k, d_v, dtype)
    q = seeded_randn(g, B, H, T_new, d_k, dtype=dtype, scale=1.5)
    what = (f"B={B}, H={H}, T_past={T_past}{' (cache None)' if cache is None else ''}, T_new={T_new}, d_k={d_k}, "
            f"d_v={d_v}, {dn(dtype)}")
    return Case(what, (q, seeded_randn(g, B, H, T_new, d_k, dtype=dtype), seeded_randn(g, B, H, T_new, d_v, dtype=dtype),
                       cache))


def _cached_edge():
    g = gen(91)
    B, H, d = 2, 2, 3
    q, k, v = seeded_randn(g, B, H, 5, d, scale=1.5), seeded_randn(g, B, H, 5, d), seeded_randn(g, B, H, 5, d)
    cache = _kv_cache(g, B, H, 4, d, d)
    empty = _kv_cache(g, B, H, 0, d, d)
    return [
        Case("the first decoder position: no cache, one query (T_new = 1) that attends to itself alone",
             (q[:, :, :1], k[:, :, :1], v[:, :, :1], None)),
        Case("the prompt at once: no cache, T_new = 5 (plain causal attention)", (q, k, v, None)),
        Case("one new position after T_past = 4 cached ones (a generation step)",
             (q[:, :, :1], k[:, :, :1], v[:, :, :1], cache)),
        Case("a chunk of T_new = 3 after T_past = 4", (q[:, :, :3], k[:, :, :3], v[:, :, :3], cache)),
        Case("an empty cache given as tensors (T_past = 0)", (q[:, :, :2], k[:, :, :2], v[:, :, :2], empty)),
        Case("values of another width (d_v = 5 != d_k = 3)",
             (q[:, :, :2], k[:, :, :2], seeded_randn(g, B, H, 2, 5), _kv_cache(g, B, H, 3, d, 5))),
        Case("all scores equal (q = 0): uniform weights over the cache and the position itself",
             (torch.zeros(B, H, 1, d, dtype=F64), k[:, :, :1], v[:, :, :1], cache)),
        Case("float32", (q[:, :, :2].float(), k[:, :, :2].float(), v[:, :, :2].float(),
                         (cache[0].float(), cache[1].float()))),
        Case("q has T_new = 2 positions but k_new has 3: an error", (q[:, :, :2], k[:, :, :3], v[:, :, :3], None),
             raises="ValueError"),
        Case("a cache of another batch size (3 rows for a batch of 2): an error",
             (q[:, :, :1], k[:, :, :1], v[:, :, :1], _kv_cache(g, 3, H, 4, d, d)), raises="ValueError"),
        Case("v_new of T_new = 1 for q and k_new of T_new = 2: an error", (q[:, :, :2], k[:, :, :2], v[:, :, :1], None),
             raises="ValueError"),
        Case("a cache of keys of width 2 for queries of width d_k = 3: an error",
             (q[:, :, :1], k[:, :, :1], v[:, :, :1], _kv_cache(gen(95), B, H, 4, 2, d)), raises="ValueError"),
        Case("a cache of another number of heads: an error",
             (q[:, :, :1], k[:, :, :1], v[:, :, :1], _kv_cache(gen(96), B, H + 1, 4, d, d)), raises="ValueError"),
    ]


def _pieces_agree(fn, whole_args, piece_args, T, cut_points, what, out_of, lesson):
    """Run ``fn`` on the whole text, then in pieces (``piece_args(a, b, cache)``), and compare the rows.

    ``out_of(value)`` is the output with positions on axis 1 in what a call returned, or None when that
    has the wrong form (the case checks report that, and failed calls); ``lesson`` ends the message.
    """
    whole = learner_call(fn, whole_args)
    got = None if whole is None else out_of(whole.value)
    if got is None:
        return None  # reported by the case checks
    rows_whole = nested(got)
    for cuts in cut_points:
        bounds = [0, *cuts, T]
        cache, rows = None, []
        for a, b in zip(bounds, bounds[1:]):
            out = learner_call(fn, piece_args(a, b, cache))
            piece = None if out is None else out_of(out.value)
            if piece is None or not (isinstance(out.value, tuple) and len(out.value) == 2):
                return None
            if piece.shape[1] != b - a or piece.shape[0] != len(rows_whole):
                return None
            cache = out.value[1]
            for b_row, r in enumerate(nested(piece)):  # r: the rows of positions a .. b - 1
                if len(rows) <= b_row:
                    rows.append([])
                rows[b_row].extend(r)
        pieces = " + ".join(str(b - a) for a, b in zip(bounds, bounds[1:]))
        for t in range(T):  # the first position that differs, in any row of the batch
            for b_row in range(len(rows_whole)):
                u, w = flatten(rows_whole[b_row][t]), flatten(rows[b_row][t])
                wrong = [c for c, (x, y) in enumerate(zip(u, w)) if not abs(x - y) <= 1e-9 * (1 + abs(x))]
                if wrong:
                    c = wrong[0]
                    return (f"the cache does not reproduce the whole computation: fed in pieces of {pieces} "
                            f"positions, each call given the cache the previous one returned, the {what} of batch "
                            f"row {b_row} at position t={t} differs from feeding all {T} positions at once "
                            f"(entry {c}: {u[c]:.6g} at once, {w[c]:.6g} in pieces). {lesson}")
    return None


def _cached_out(value):
    out = tensor_in(value, 0, dim=4)
    if out is None:
        return None
    return out.transpose(1, 2)  # (B, T_new, H, d_v): positions second, like the block's output


CACHED_LESSON = ("Query i of a call sits at position T_past + i and may read every cached key and the new keys up to "
                 "itself: keys j <= T_past + i of the grown cache.")
STEP_LESSON = ("Cache the keys and values after the projections and the split into heads, and let the new positions' "
               "queries read the cached keys and their own (cached_attention).")


def _cached_pieces_agree(fn):
    """Feeding 6 positions in pieces (with the cache) equals feeding them at once."""
    g = gen(92)
    B, H, T, d = 2, 2, 6, 3
    q, k, v = seeded_randn(g, B, H, T, d, scale=1.5), seeded_randn(g, B, H, T, d), seeded_randn(g, B, H, T, d)
    return _pieces_agree(fn, (q, k, v, None), lambda a, b, c: (q[:, :, a:b], k[:, :, a:b], v[:, :, a:b], c), T,
                         [(1, 2, 3, 4, 5), (2, 5), (3,)], "attention output", _cached_out, CACHED_LESSON)


# ---------------------------------------------------------------- decoder_block_step
def _step_case(g, big):
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 3)
    H, d_k = pick_int(g, 1 if big else 2, 3), pick_int(g, 2, 3)
    D, F = H * d_k, pick_int(g, 2, 8)
    T_past = pick_int(g, 0, 6) if big else pick_int(g, 1, 5)
    T_new = pick_int(g, 1, 4) if big else pick_int(g, 1, 3)
    cache = None if T_past == 0 and pick_int(g, 0, 1) else _kv_cache(g, B, H, T_past, d_k, d_k, dtype)
    what = (f"B={B}, T_past={T_past}{' (cache None)' if cache is None else ''}, T_new={T_new}, D={D}, n_heads={H}, "
            f"F={F}, {dn(dtype)}")
    return Case(what, (seeded_randn(g, B, T_new, D, dtype=dtype), block_params(g, D, F, dtype), H, cache))


def _step_edge():
    g = gen(93)
    p6 = block_params(g, 6, 5)
    x = seeded_randn(g, 2, 5, 6)
    cache = _kv_cache(g, 2, 2, 4, 3, 3)
    return [
        Case("the first decoder position (no cache, T_new = 1): it attends to itself alone",
             (x[:, :1], p6, 2, None)),
        Case("the prompt at once: no cache, T_new = 5 (notebook 07's decoder_block)", (x, p6, 2, None)),
        Case("one new position after T_past = 4 cached ones", (x[:, :1], p6, 2, cache)),
        Case("a chunk of T_new = 3 after T_past = 4", (x[:, :3], p6, 2, cache)),
        Case("an empty cache given as tensors (T_past = 0)", (x[:, :2], p6, 2, _kv_cache(g, 2, 2, 0, 3, 3))),
        Case("one head (H = 1, d_k = 6)", (x[:, :2], p6, 1, _kv_cache(g, 2, 1, 3, 6, 6))),
        Case("float32", (x[:, :2].float(), as_float32(p6), 2, (cache[0].float(), cache[1].float()))),
        Case("d_model=6 is not divisible by n_heads=4: an error", (x[:, :1], p6, 4, None), raises="ValueError"),
        Case("a cache of 3 heads for a block of 2: an error", (x[:, :1], p6, 2, _kv_cache(g, 2, 3, 4, 2, 2)),
             raises="ValueError"),
    ]


def _step_out(value):
    return tensor_in(value, 0, dim=3)


def _step_pieces_agree(fn):
    """Token by token (and in chunks) with the cache equals the whole text at once: decoding = recomputation."""
    g = gen(94)
    x, p = seeded_randn(g, 2, 6, 6), block_params(g, 6, 5)
    return _pieces_agree(fn, (x, p, 2, None), lambda a, b, c: (x[:, a:b], p, 2, c), 6,
                         [(1, 2, 3, 4, 5), (4,), (2, 3)], "block's output", _step_out, STEP_LESSON)


def _step_no_future_leak(fn):
    """Fed at once (no cache), a later token must not move an earlier output."""
    g = gen(95)
    return no_future_leak(fn, (seeded_randn(g, 1, 6, 6), block_params(g, 6, 5), 2, None), 0, 6, True)


# ---------------------------------------------------------------- greedy_generate
EOS = 2  # the ids of the checks' toy language models: <eos> is 2


def _gen_case(g, big):
    B, T_p = pick_int(g, 1, 3), pick_int(g, 1, 6 if big else 4)
    max_len = pick_int(g, 0, 12) if big else pick_int(g, 3, 7)
    V = pick_int(g, 4, 9)
    return Case(f"B={B}, prompt of T_p={T_p} tokens, eos_id={EOS}, max_len={max_len}, vocabulary of {V}",
                (toy_lm(g, V=V), torch.randint(0, V, (B, T_p), generator=g), EOS, max_len))


def _gen_models():
    """(what, (model, prompt)): the contract's three kinds of model (learner/check/cases/greedy.py)."""
    g = gen(103)  # a seed whose three rows end after 1, 5 and 3 tokens
    lm = toy_lm(g, eos_bias=0.5)
    prompt = torch.randint(0, 7, (3, 4), generator=g)
    g = gen(98)
    return {"mixed": (f"the checks' toy model, whose 3 rows end after {_ENDS} tokens", (lm, prompt)),
            "never": ("a model that never writes <eos>", (toy_lm(g, eos_bias=-60.0), prompt)),
            "at_once": ("a model that writes <eos> first", (toy_lm(g, eos_bias=60.0), prompt))}


_ENDS = "1, 5 and 3"  # where _gen_models' mixed model ends its rows


def _gen_call(model, max_len):
    lm, prompt = model
    return (lm, prompt, EOS, max_len), {}


def _gen_edge():
    m = _gen_models()
    lm, prompt = m["mixed"][1]
    g = gen(99)
    return greedy_contract_cases(_gen_call, m["mixed"][1], m["never"][1], m["at_once"][1]) + [
        Case("a prompt of one token (<bos> alone)", (lm, prompt[:, :1], EOS, 6)),
        Case("one row (B = 1)", (lm, prompt[:1], EOS, 5)),
        Case("a batch of 4, prompts of 6 tokens", (lm, torch.randint(0, 7, (4, 6), generator=g), EOS, 10)),
        Case("an empty prompt (T_p = 0), even with max_len = 0: an error (there is nothing to condition on)",
             (lm, prompt[:, :0], EOS, 0), raises="ValueError"),
    ]


def _gen_keeps_the_contract(fn):
    """The contract of greedy decoding, with the three kinds of model."""
    return greedy_contract_property(_gen_call, list(_gen_models().values()), EOS)(fn)


class _Recorder:
    """Wraps a step function and records what each call fed."""

    def __init__(self, step):
        self.step, self.calls, self.returned = step, [], []

    def __call__(self, ids, cache=None):
        shape = tuple(ids.shape) if torch.is_tensor(ids) else None
        given = "none" if cache is None else ("last" if self.returned and cache is self.returned[-1] else "other")
        self.calls.append((shape, given))
        logits, new_cache = self.step(ids, cache)
        self.returned.append(new_cache)
        return logits, new_cache


def _generate_feeds_one_token(fn):
    """The prompt once with cache None, then exactly one token per call with the last cache; a call per token."""
    g = gen(97)
    B, T_p, max_len = 2, 4, 5
    rec = _Recorder(toy_lm(g, eos_bias=-60.0))  # never writes <eos>: five tokens, five calls
    out = learner_call(fn, (rec, torch.randint(0, 7, (B, T_p), generator=g), EOS, max_len))
    written = None if out is None else tensor_in(out.value, dim=2)
    if written is None or not rec.calls:
        return None  # reported by the case checks
    (shape, given), later = rec.calls[0], rec.calls[1:]
    if shape != (B, T_p) or given != "none":
        return (f"the first call of step fed ids of shape {shape} with "
                f"{'cache None' if given == 'none' else 'a cache'}; it must feed the whole prompt ({B}, {T_p}) "
                f"with cache None, once")
    for k, (shape, given) in enumerate(later, 2):
        if given == "none" and shape == (B, 1):
            return (f"call {k} of step fed the newest token with cache=None: the model then reads that one token "
                    f"alone and forgets the text. Pass the cache the previous call returned")
        if given == "none":
            return (f"call {k} of step was given cache=None (it fed ids of shape {shape}): that is generation "
                    f"without a cache, recomputing every key and value of the text at every step. Pass the cache "
                    f"the previous call returned and feed only the newest token, ids of shape ({B}, 1)")
        if given == "other":
            return (f"call {k} of step was given a cache other than the one call {k - 1} returned; pass back the "
                    f"cache exactly as the previous call returned it")
        if shape != (B, 1):
            return (f"call {k} of step fed ids of shape {shape}; with the cache only the newest token is fed, ids "
                    f"of shape ({B}, 1): the earlier tokens' keys and values are already in the cache")
    if len(rec.calls) != written.shape[1]:
        return (f"step was called {len(rec.calls)} times to write {written.shape[1]} tokens; it takes one call per "
                f"token: the prompt's call predicts the first new token, and the last token needs no call of its own")
    return None


# ---------------------------------------------------------------- kv_cache_bytes
def _bytes_case(g, big):
    # L, B >= 3 and L != B: one layer or one sequence must not hide a missing factor, nor equal a missing factor 2
    L, B = pick_int(g, 3, 48), [3, 4, 5, 6, 8, 12, 16][pick_int(g, 0, 6)]
    L += L == B
    H, d, T = pick_int(g, 1, 64), [32, 64, 80, 128][pick_int(g, 0, 3)], pick_int(g, 1, 8192)
    nb = [2, 4][pick_int(g, 0, 1)]  # not 1: a missing factor bytes_per_value would not show
    return Case(f"n_layers={L}, n_heads={H}, d_k={d}, n_positions={T}, batch={B}, bytes_per_value={nb}",
                (L, H, d, T), {"batch": B, "bytes_per_value": nb})


def _bytes_edge():
    return [
        Case("a 7-billion-parameter model of 2023 (32 layers, 32 heads of 128, 4096 positions, float16)",
             (32, 32, 128, 4096)),
        Case("GPT-2 small (12 layers, 12 heads of 64) at 1024 positions in float32, a batch of 8",
             (12, 12, 64, 1024), {"batch": 8, "bytes_per_value": 4}),
        Case("notebook 09's translator (2 layers, 4 heads of 16, 48 positions, float32)", (2, 4, 16, 48),
             {"bytes_per_value": 4}),
        Case("an empty text (0 positions): 0 bytes", (12, 12, 64, 0)),
        Case("n_positions = -1: an error", (12, 12, 64, -1), raises="ValueError"),
        Case("n_positions = 2.5: an error (sizes are whole numbers)", (12, 12, 64, 2.5), raises="ValueError"),
    ]


# ---------------------------------------------------------------- the registry
register(
    __name__,
    Exercise("cached_attention", "kv_cache:cached_attention", _cached_case, _cached_edge,
             properties=[("edge", _cached_pieces_agree), ("hidden", _cached_pieces_agree)],
             mistakes=[("kv_cache:cached_attention_ignores_cache",
                        "the new queries read only the new keys: concatenate the cached keys and values in front of "
                        "the new ones (torch.cat along the T axis, -2) and attend over all of them"),
                       ("kv_cache:cached_attention_mask_top_left",
                        "the causal mask is aligned at the top left: with T_past cached positions, new query i is "
                        "position T_past + i and may read keys j <= T_past + i, so shift the triangle right "
                        "(tril(diagonal=T_past) on a (T_new, T_past + T_new) mask)"),
                       ("kv_cache:cached_attention_no_mask",
                        "there is no causal mask among the new positions: when several arrive at once (the "
                        "prompt), new query i must not read the new keys after it; allow keys j <= T_past + i"),
                       *((f"kv_cache:{m}", "the new keys and values were put before the cached ones; the cache "
                                           "holds the earlier positions, so the new ones go after it: "
                                           "torch.cat([K_past, k_new], dim=-2)")
                         for m in ("cached_attention_new_first", "cached_attention_new_first_stored")),
                       ("kv_cache:cached_attention_cache_not_grown",
                        "the cache returned is the old one: return the grown (K, V), with the new positions' keys "
                        "and values appended, so that the next call can read them"),
                       ("kv_cache:cached_attention_mask_without_diagonal",
                        "each new query was kept from its own key: new query i is position T_past + i and reads keys "
                        "j <= T_past + i, itself included (tril(diagonal=T_past), not T_past - 1)"),
                       ("kv_cache:cached_attention_mask_one_too_far",
                        "each new query also read the key after it: new query i reads keys j <= T_past + i, no "
                        "further (tril(diagonal=T_past), not T_past + 1)"),
                       ("kv_cache:cached_attention_mask_reversed",
                        REVERSED_LESSON.format(fix="tril(diagonal=T_past) of a (T_new, T_past + T_new) mask of "
                                                   "ones is True where a query may read: pass it as it is"))],
             n_basic=8, n_hidden=16),
    Exercise("decoder_block_step", "kv_cache:decoder_block_step", _step_case, _step_edge,
             properties=[("edge", _step_pieces_agree), ("edge", _step_no_future_leak),
                         ("hidden", _step_pieces_agree), ("hidden", _step_no_future_leak)],
             uses=("cached_attention",),
             mistakes=[("kv_cache:decoder_block_step_ignores_cache",
                        "the cache was not used: pass the cache to cached_attention, so the new positions read the "
                        "cached keys and values too, and return the grown cache it gives back"),
                       ("kv_cache:decoder_block_step_mask_top_left",
                        "the causal mask is aligned at the top left: new position i is position T_past + i and may "
                        "read every cached key and the new keys up to itself"),
                       ("kv_cache:decoder_block_step_caches_merged",
                        "the cache holds keys and values before the split into heads, (B, T, D); keep them split, "
                        "(B, H, T, d_k), as cached_attention returns them"),
                       ("kv_cache:decoder_block_step_no_attn_residual",
                        "the residual around attention is missing: r' = LayerNorm(x_new + attention output)")],
             n_basic=6, n_hidden=12),
    Exercise("greedy_generate", "kv_cache:greedy_generate", _gen_case, _gen_edge,
             properties=[("basic", _generate_feeds_one_token), ("edge", _generate_feeds_one_token),
                         ("edge", _gen_keeps_the_contract), ("hidden", _generate_feeds_one_token),
                         ("hidden", _gen_keeps_the_contract)],
             mistakes=[("kv_cache:greedy_generate_refeeds_all",
                        "the whole text was fed again at every step, with the cache: the cache already holds the "
                        "earlier tokens, so they were read twice; feed only the newest token, ids of shape (B, 1)"),
                       ("kv_cache:greedy_generate_first_row",
                        "the prediction was read from the first row of the logits; row t predicts the token after "
                        "ids[:, t], so the next token is the argmax of the last row, logits[:, -1]"),
                       ("kv_cache:greedy_generate_no_cache_passed",
                        "each step fed the newest token with cache=None, so the model read that one token alone "
                        "and forgot the text; pass the cache the previous call returned"),
                       ("kv_cache:greedy_generate_with_prompt",
                        "the prompt was returned too: return only the new tokens, shape (B, L) with L <= max_len"),
                       ("kv_cache:greedy_generate_writes_after_eos",
                        "a row went on writing after its <eos>: from then on it holds 0 (<pad>) while the other rows "
                        "go on, nxt.masked_fill(done, 0) before it is appended"),
                       ("kv_cache:greedy_generate_ignores_eos",
                        "<eos> was ignored: it wrote max_len tokens in every row. A row that has written <eos> holds "
                        "0 (<pad>) from then on, and the loop stops once every row has written <eos>")],
             tensor_inputs=False, n_basic=8, n_hidden=16),
    Exercise("kv_cache_bytes", "kv_cache:kv_cache_bytes", _bytes_case, _bytes_edge,
             mistakes=[("kv_cache:kv_cache_bytes_keys_only",
                        "only the keys were counted: each layer caches a key and a value per head and position, "
                        "hence the factor 2"),
                       ("kv_cache:kv_cache_bytes_one_layer",
                        "one layer was counted: every layer keeps its own cache, so multiply by n_layers"),
                       ("kv_cache:kv_cache_bytes_one_sequence",
                        "one sequence was counted: each of the batch's sequences keeps its own keys and values, so "
                        "multiply by batch"),
                       ("kv_cache:kv_cache_bytes_values_not_bytes",
                        "this counts the numbers, not the bytes: multiply by bytes_per_value (2 for float16, 4 for "
                        "float32)")],
             tensor_inputs=False, n_basic=8, n_hidden=16),
    question("answer_positions_without_cache", "kv_cache:answer_positions_without_cache", Integer(), wrong=[
        ("kv_cache:answer_positions_without_cache_with_cache",
         "14 is with the cache: the prompt once, then one new token a step"),
        ("kv_cache:answer_positions_without_cache_fixed_length",
         "the text grows by one token a step: 5, 6, ..., 14 positions, not 15 every time"),
        ("kv_cache:answer_positions_without_cache_prompt_only",
         "the text grows at every step: the tokens generated so far go through the model too"),
        ("kv_cache:answer_positions_without_cache_one_step_late",
         "105 counts each step's text with its new token (6 + ... + 15): a step feeds the text so far, the prompt and "
         "the tokens written before it, 5 + 6 + ... + 14")]),
    question("answer_what_the_cache_keeps", "kv_cache:answer_what_the_cache_keeps", Choice("a", "b", "c", "d"), wrong=[
        ("kv_cache:answer_what_the_cache_keeps_queries",
         "a query is used once, by its own token's step; later steps never read it again"),
        ("kv_cache:answer_what_the_cache_keeps_weights",
         "the weights change at every step: each new query weighs every key again"),
        ("kv_cache:answer_what_the_cache_keeps_logits",
         "earlier positions' logits are never needed again; the new token's attention needs the earlier keys and "
         "values")]),
)
