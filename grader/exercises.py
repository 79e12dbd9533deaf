"""Every graded exercise: its reference, its cases, its properties and its known mistakes.

Cases are made here from seeded generators, without the reference. The visible
parts ("basic", "edge") are computed once from the reference and shipped in
``grader/expected/`` so a learner's machine needs no ``solutions`` package; the
hidden part draws fresh cases and runs the live reference on the grading machine.
"""
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

F64, F32 = torch.float64, torch.float32
INF = float("inf")


@dataclass
class Case:
    """One call of the exercise function: ``fn(*args, **kwargs)``.

    ``what`` describes it for a person; ``raises`` names the exception class a
    correct function must raise (the reference raises it too).
    """
    what: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    raises: str | None = None


@dataclass
class Exercise:
    name: str
    notebook: str
    ref: str                                   # "module:function" inside the solutions package
    random_case: Callable | None = None        # (generator, big: bool) -> Case
    edge: Callable[[], list] = lambda: []      # fixed cases from the notes
    properties: list = field(default_factory=list)   # (part, callable(fn) -> message | None)
    mistakes: list = field(default_factory=list)     # ("[module:]function" in solutions, default module
    #                                                   solutions.mistakes; explanation)
    n_basic: int = 8
    n_hidden: int = 24
    tensor_inputs: bool = True                 # also probe the hidden part on the meta device (wrong-device tensors)
    uses: tuple = ()                           # other exercises the learner's function calls (named in failures)
    given: tuple = ()                          # "module:function" ready-made versions learners must not call
    conditioning: Callable | None = None       # (args, kwargs) -> size of the inputs the rounding error scales with


def logit_scale(args, kwargs):
    """The largest finite |logit| / temperature: log-softmax and friends are exact only to about eps times it."""
    from . import _safe
    x = args[0] if args else kwargs.get("x", kwargs.get("logits"))
    if not _safe.is_tensor(x) or not x.is_floating_point() or x.device.type == "meta" or x.numel() == 0:
        return 0.0
    values = [abs(v) for v in _safe.tolist(_safe.to(_safe.detach(x), "cpu", _safe.float64).flatten())
              if _safe._isfinite(v)]
    temperature = kwargs.get("temperature", args[2] if len(args) > 2 else 1.0)
    try:
        temperature = float(temperature)
    except (TypeError, ValueError):
        temperature = 1.0
    return max(values, default=0.0) / (temperature if temperature > 0 else 1.0)


def logit_sum_scale(args, kwargs):
    """``logit_scale`` times the number of positions: for log-probabilities summed over a sequence."""
    x = args[0] if args else kwargs.get("logits")
    rows = max(1, x.numel() // max(1, x.shape[-1])) if hasattr(x, "numel") and x.dim() else 1
    return logit_scale(args, kwargs) * rows


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _int(g, lo, hi):
    """Uniform int in [lo, hi]."""
    return int(torch.randint(lo, hi + 1, (1,), generator=g))


def _randn(g, *shape, dtype=F64, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=F64) * scale).to(dtype)


def _dtype(g):
    return F64 if _int(g, 0, 1) else F32


def _dn(dtype):
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------- notebook 01
_WORDS = ("the cat sat on mat a dog ran to river bank money we saw big small red blue it "
          "is was and of in".split())


def _sentence(g, n):
    return " ".join(_WORDS[_int(g, 0, len(_WORDS) - 1)] for _ in range(n))


def _corpus(g, big):
    return [_sentence(g, _int(g, 1, 12 if big else 6)) for _ in range(_int(g, 1, 8 if big else 4))]


def _vocab(texts):
    # the vocabulary handed to encode/decode is built here, not by the reference
    counts = {}
    for t in texts:
        for w in t.lower().split():
            counts[w] = counts.get(w, 0) + 1
    kept = sorted(counts, key=lambda w: (-counts[w], w))
    return {w: i for i, w in enumerate(["<pad>", "<bos>", "<eos>", "<unk>"] + kept)}


def _build_vocab_case(g, big):
    texts = _corpus(g, big)
    if _int(g, 0, 2) == 0:
        texts = [t.upper() if i % 2 else t for i, t in enumerate(texts)]
    min_freq = _int(g, 1, 2)
    return Case(f"{len(texts)} texts, min_freq={min_freq}", (texts,), {"min_freq": min_freq})


def _build_vocab_edge():
    return [
        Case("one text with one word", (["hello"],)),
        Case("ties in count are broken alphabetically", (["b a c", "c a b"],)),
        Case("upper and lower case are the same word", (["The the THE cat"],)),
        Case("min_freq=2 drops words seen once", (["a a b", "c a b d"],), {"min_freq": 2}),
        Case("an empty corpus still has the four special tokens", ([],)),
        Case("min_freq=0 is an error", (["a b"],), {"min_freq": 0}, raises="ValueError"),
    ]


def _encode_case(g, big):
    texts = _corpus(g, big)
    vocab = _vocab(texts[:-1] or texts)
    return Case(f"a {len(texts[-1].split())}-word sentence, vocabulary of {len(vocab)}", (texts[-1], vocab))


def _encode_edge():
    v = _vocab(["the cat sat"])
    return [
        Case("empty string gives just <bos> <eos>", ("", v)),
        Case("unknown words become <unk>", ("the zebra sat", v)),
        Case("capital letters are lower-cased", ("The CAT", v)),
    ]


def _decode_case(g, big):
    texts = _corpus(g, big)
    vocab = _vocab(texts)
    ids = [1] + [_int(g, 3, len(vocab) - 1) for _ in range(_int(g, 0, 8))] + [2] + [0] * _int(g, 0, 3)
    as_tensor = _int(g, 0, 1) == 1
    return Case(f"{len(ids)} ids{' as a tensor' if as_tensor else ''}, vocabulary of {len(vocab)}",
                (torch.tensor(ids) if as_tensor else ids, vocab))


def _decode_edge():
    v = _vocab(["the cat sat"])
    return [
        Case("stops at the first <eos>", ([1, v["the"], 2, v["cat"], 2], v)),
        Case("skips padding and <bos>", ([1, v["cat"], 0, v["sat"], 0, 0], v)),
        Case("keeps <unk> as a word", ([1, 3, v["sat"], 2], v)),
        Case("an empty list gives an empty string", ([], v)),
        Case("an id outside the vocabulary is an error", ([1, 99], v), raises="ValueError"),
    ]


def _pad_case(g, big):
    B = _int(g, 1, 6 if big else 4)
    seqs = [[_int(g, 1, 30) for _ in range(_int(g, 1, 9 if big else 6))] for _ in range(B)]
    pad = 0 if _int(g, 0, 2) else _int(g, 1, 5)
    return Case(f"B={B} sequences of lengths {[len(s) for s in seqs]}, pad_id={pad}", (seqs,), {"pad_id": pad})


def _pad_edge():
    return [
        Case("one sequence, nothing to pad", ([[5, 6, 7]],)),
        Case("sequences of equal length", ([[1, 2], [3, 4]],)),
        Case("a sequence of length 0 is all padding", ([[4, 5], []],)),
        Case("an empty batch is an error", ([],), raises="ValueError"),
    ]


def _embed_case(g, big):
    V, D = _int(g, 2, 20), _int(g, 1, 8)
    dtype = _dtype(g)
    shape = tuple(_int(g, 1, 5) for _ in range(_int(g, 1, 3)))
    ids = torch.randint(0, V, shape, generator=g)
    return Case(f"ids of shape {shape}, E of shape ({V}, {D}), {_dn(dtype)}", (ids, _randn(g, V, D, dtype=dtype)))


def _embed_edge():
    g = _gen(11)
    E = _randn(g, 5, 3)
    return [
        Case("a single id (0-d tensor)", (torch.tensor(4), E)),
        Case("V = D (a square matrix)", (torch.tensor([[0, 1, 2], [2, 1, 0]]), _randn(g, 3, 3))),
        Case("the first and last rows", (torch.tensor([0, 4]), E)),
        Case("no ids at all", (torch.zeros(0, dtype=torch.long), E)),
        Case("an id outside [0, V) is an error", (torch.tensor([5]), E), raises="ValueError"),
    ]


# ---------------------------------------------------------------- notebook 02
def _qk_case(g, big):
    dtype = _dtype(g)
    B, T_q, T_k, d = _int(g, 1, 3), _int(g, 1, 9 if big else 5), _int(g, 1, 9 if big else 5), _int(g, 1, 16 if big else 8)
    lead = (B,) if _int(g, 0, 1) else (B, _int(g, 1, 3))
    return Case(f"Q {lead + (T_q, d)}, K {lead + (T_k, d)}, {_dn(dtype)}",
                (_randn(g, *lead, T_q, d, dtype=dtype), _randn(g, *lead, T_k, d, dtype=dtype)))


def _qk_edge():
    g = _gen(21)
    return [
        Case("n = 1: one query, one key", (_randn(g, 1, 4), _randn(g, 1, 4))),
        Case("no batch dimension, T_q != T_k", (_randn(g, 2, 3), _randn(g, 5, 3))),
        Case("d_k = 1", (_randn(g, 3, 1), _randn(g, 3, 1))),
        Case("large width d_k = 256", (_randn(g, 2, 256), _randn(g, 4, 256))),
        Case("Q and K of different widths is an error", (_randn(g, 2, 3), _randn(g, 2, 4)), raises="ValueError"),
    ]


def _proj_case(g, big):
    dtype = _dtype(g)
    B, T, D, d_k, d_v = _int(g, 1, 3), _int(g, 1, 6), _int(g, 2, 8), _int(g, 1, 8), _int(g, 1, 8)
    return Case(f"X ({B}, {T}, {D}), d_k={d_k}, d_v={d_v}, {_dn(dtype)}",
                (_randn(g, B, T, D, dtype=dtype), _randn(g, d_k, D, dtype=dtype), _randn(g, d_k, D, dtype=dtype),
                 _randn(g, d_v, D, dtype=dtype)))


def _proj_edge():
    g = _gen(22)
    X = _randn(g, 3, 4)
    return [
        Case("square matrices (d_k = D)", (X, _randn(g, 4, 4), _randn(g, 4, 4), _randn(g, 4, 4))),
        Case("one token", (X[:1], _randn(g, 2, 4), _randn(g, 2, 4), _randn(g, 5, 4))),
        Case("identity W_Q gives Q = X", (X, torch.eye(4, dtype=F64), _randn(g, 4, 4), _randn(g, 4, 4))),
        Case("W_K with the wrong input width is an error", (X, _randn(g, 2, 4), _randn(g, 2, 3), _randn(g, 2, 4)),
             raises="ValueError"),
    ]


def _variance_case(g, big):
    d = [1, 2, 8, 32, 128, 512][_int(g, 0, 5)]
    return Case(f"d_k = {d}", (d,), {"n_pairs": 4000, "seed": _int(g, 0, 10_000)})


def _variance_property(fn):
    """The variance of q . k is about d_k, and about 1 after dividing by sqrt(d_k)."""
    from . import _safe
    for d_k in (1, 16, 256):
        out = _safe.call(fn, (d_k,), {"n_pairs": 20000, "seed": 3})
        if out.timed_out:
            return f"score_variance({d_k}, n_pairs=20000) did not finish within {_safe.DEFAULT_TIME_LIMIT:g} s"
        if isinstance(out.error, NotImplementedError):
            return ("`score_variance` is not implemented yet: it still raises NotImplementedError. Replace the "
                    "`raise NotImplementedError()` line in the exercise cell with your code.")
        if out.error is not None:
            return f"score_variance({d_k}, n_pairs=20000) raised {type(out.error).__name__}: {out.error}"
        v = out.value
        if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, float) for x in v)):
            return f"score_variance({d_k}) should return a tuple of two Python floats, got {type(v).__name__}"
        raw, scaled = v
        if not abs(raw - d_k) <= 0.1 * d_k:
            return (f"for d_k={d_k} the variance of raw scores q . k should be close to d_k = {d_k} "
                    f"(within 10%), got {raw:.4g}")
        if not abs(scaled - 1) <= 0.1:
            return (f"for d_k={d_k} the variance of q . k / sqrt(d_k) should be close to 1 (within 0.1), "
                    f"got {scaled:.4g}")
    return None


# ---------------------------------------------------------------- notebook 03
def _logits_case(g, big):
    dtype = _dtype(g)
    nd = _int(g, 1, 3)
    shape = tuple(_int(g, 1, 7 if big else 5) for _ in range(nd))
    dim = _int(g, -nd, nd - 1)
    tau = [0.1, 0.5, 1.0, 1.0, 2.0, 7.0][_int(g, 0, 5)]
    scale = [1.0, 3.0, 30.0][_int(g, 0, 2)]
    return Case(f"x of shape {shape}, dim={dim}, temperature={tau}, {_dn(dtype)}",
                (_randn(g, *shape, dtype=dtype, scale=scale),), {"dim": dim, "temperature": tau})


def _softmax_edge():
    g = _gen(31)
    ninf = float("-inf")
    return [
        Case("n = 1: a single logit gets all the weight", (torch.tensor([[3.5]], dtype=F64),)),
        Case("all scores equal: uniform weights", (torch.full((2, 5), 0.7, dtype=F64),)),
        Case("very large logits (1e4): no overflow", (torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4 - 1, 5.0]]),)),
        Case("-inf entries get weight 0", (torch.tensor([[1.0, ninf, 2.0, ninf]], dtype=F64),)),
        Case("a row of all -inf (nothing allowed) gives zeros, not NaN", (torch.tensor([[ninf, ninf], [0.0, 1.0]]),)),
        Case("temperature 0.01 is close to argmax", (torch.tensor([1.0, 3.0, 2.0], dtype=F64),), {"temperature": 0.01}),
        Case("temperature 1000 is close to uniform", (torch.tensor([1.0, 3.0, 2.0], dtype=F64),), {"temperature": 1000.0}),
        Case("dim=0 on a matrix", (_randn(g, 3, 4),), {"dim": 0}),
        Case("an axis of size 0: an empty result", (torch.zeros(3, 0, dtype=F64),)),
        Case("temperature 0 is an error", (_randn(g, 3),), {"temperature": 0.0}, raises="ValueError"),
        Case("a negative temperature is an error", (_randn(g, 3),), {"temperature": -1.0}, raises="ValueError"),
    ]


def _log_softmax_edge():
    g = _gen(32)
    ninf = float("-inf")
    return [
        Case("n = 1: log of a certain event is 0", (torch.tensor([[3.5]], dtype=F64),)),
        Case("all scores equal: log(1/n) everywhere", (torch.full((2, 5), 0.7, dtype=F64),)),
        Case("very large logits (1e4): finite, no overflow", (torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4 - 1, 5.0]]),)),
        Case("an entry 2000 below the max: about -2000, not -inf", (torch.tensor([[0.0, -2000.0]], dtype=F64),)),
        Case("-inf entries stay -inf", (torch.tensor([[1.0, ninf, 2.0, ninf]], dtype=F64),)),
        Case("a row of all -inf gives -inf (log 0), not NaN", (torch.tensor([[ninf, ninf], [0.0, 1.0]]),)),
        Case("temperature 0.01", (torch.tensor([1.0, 3.0, 2.0], dtype=F64),), {"temperature": 0.01}),
        Case("dim=0 on a matrix", (_randn(g, 3, 4),), {"dim": 0}),
        Case("an axis of size 0: an empty result", (torch.zeros(0, 4),), {"dim": 0}),
        Case("temperature 0 is an error", (_randn(g, 3),), {"temperature": 0.0}, raises="ValueError"),
    ]


def _nested(t):
    """A learner's tensor as nested Python lists, through the grader's captured primitives."""
    from . import _safe
    return _safe.tolist(_safe.to(_safe.detach(t), "cpu"))


def _rows_sum_to_one(fn):
    """Every slice along `dim` sums to 1 and every weight lies in [0, 1]."""
    from . import _safe
    g = _gen(5)
    for dim in (-1, 0, 1):
        x = _randn(g, 4, 6, 3, scale=5.0)
        out = _safe.call(fn, (x,), {"dim": dim})
        if out.error is not None or out.timed_out or type(out.value) is not _safe.Tensor:
            return None  # reported by the case checks
        if tuple(out.value.shape) != tuple(x.shape):
            return None
        w = _nested(out.value)  # [4][6][3]
        idx = [(a, b, c) for a in range(4) for b in range(6) for c in range(3)]
        if any(not (0.0 <= w[a][b][c] <= 1.0) for a, b, c in idx):
            return "softmax gave a weight outside [0, 1]; every weight must be a probability"
        axis = dim % 3
        sums = {}
        for a, b, c in idx:
            key = tuple(v for k, v in enumerate((a, b, c)) if k != axis)
            sums[key] = sums.get(key, 0.0) + w[a][b][c]
        for key, total in sums.items():
            if not abs(total - 1.0) < 1e-6:
                return f"with dim={dim} the weights should sum to 1 along that axis, but one slice sums to {total:.6g}"
    return None


def _seq_case(g, big):
    dtype = _dtype(g)
    B, T, V = _int(g, 1, 4), _int(g, 1, 8 if big else 5), _int(g, 2, 12)
    logits = _randn(g, B, T, V, dtype=dtype, scale=2.0)
    targets = torch.randint(0, V, (B, T), generator=g)
    kwargs, what = {}, ""
    if _int(g, 0, 1):
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        kwargs["mask"] = torch.arange(T)[None, :] < lengths[:, None]
        what = f", padded to lengths {lengths.tolist()}"
    return Case(f"B={B}, T={T}, V={V}{what}, {_dn(dtype)}", (logits, targets), kwargs)


def _seq_edge():
    g = _gen(33)
    V = 4
    return [
        Case("T = 1: just log P(x_1)", (_randn(g, 2, 1, V), torch.tensor([[1], [3]]))),
        Case("uniform logits: T * log(1/V)", (torch.zeros(1, 5, V, dtype=F64), torch.tensor([[0, 1, 2, 3, 0]]))),
        Case("confident logits (1e3) stay finite", (torch.tensor([[[1e3, 0.0], [0.0, 1e3]]], dtype=F64),
                                                    torch.tensor([[1, 0]]))),
        Case("an all-padding row scores 0", (_randn(g, 2, 3, V), torch.tensor([[1, 2, 3], [0, 0, 0]])),
             {"mask": torch.tensor([[True, True, False], [False, False, False]])}),
        Case("padding may hold any id, even -100", (_randn(g, 1, 3, V), torch.tensor([[1, -100, -100]])),
             {"mask": torch.tensor([[True, False, False]])}),
        Case("targets of the wrong shape are an error", (_randn(g, 2, 3, V), torch.tensor([[1, 2], [0, 0]])),
             raises="ValueError"),
    ]


# ---------------------------------------------------------------- notebook 04
def _bidir_case(g, big):
    T_q, T_k = _int(g, 0, 7), _int(g, 0, 7)
    return Case(f"T_q={T_q}, T_k={T_k}", (T_q, T_k))


def _causal_case(g, big):
    T = _int(g, 1, 12 if big else 8)
    return Case(f"T={T}", (T,))


def _causal_edge():
    return [Case("T = 1 (first decoder position only)", (1,)), Case("T = 0", (0,)),
            Case("T = -1 is an error", (-1,), raises="ValueError")]


def _pad_mask_case(g, big):
    B, T = _int(g, 1, 4), _int(g, 1, 8)
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    return Case(f"B={B}, T_k={T}, lengths {lengths.tolist()}", (torch.arange(T)[None, :] < lengths[:, None],))


def _pad_mask_edge():
    return [Case("no padding at all", (torch.ones(2, 3, dtype=torch.bool),)),
            Case("a sequence that is all padding", (torch.tensor([[True, False], [False, False]]),)),
            Case("a float mask is an error", (torch.ones(2, 3),), raises="ValueError")]


def _combine_case(g, big):
    B, T = _int(g, 1, 3), _int(g, 1, 6)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    pad = (torch.arange(T)[None, :] < lengths[:, None])[:, None, :]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    rand = torch.rand(B, T, T, generator=g) > 0.3
    choice = _int(g, 0, 2)
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
    shape = tuple(_int(g, 1, 5) for _ in range(_int(g, 1, 3)))
    dtype = _dtype(g)
    return Case(f"mask of shape {shape}, dtype={_dn(dtype)}", (torch.rand(*shape, generator=g) > 0.5,),
                {"dtype": dtype})


def _additive_edge():
    return [Case("causal mask, default dtype float32", (torch.ones(4, 4, dtype=torch.bool).tril(),)),
            Case("all allowed gives all zeros", (torch.ones(2, 3, dtype=torch.bool),), {"dtype": F64}),
            Case("an integer mask is an error", (torch.ones(2, 2, dtype=torch.long),), raises="ValueError"),
            Case("an integer dtype cannot hold -inf: an error", (torch.ones(2, 2, dtype=torch.bool),),
                 {"dtype": torch.long}, raises="ValueError")]


def _mask_kind(g, B, T_q, T_k):
    kind = _int(g, 0, 3)
    if kind == 0:
        return None, "no mask"
    if kind == 1 and T_q == T_k:
        return torch.ones(T_q, T_k, dtype=torch.bool).tril(), "causal mask"
    if kind == 2:
        lengths = torch.randint(1, T_k + 1, (B,), generator=g)
        return (torch.arange(T_k)[None, :] < lengths[:, None])[:, None, :], f"padding mask (lengths {lengths.tolist()})"
    return torch.rand(B, T_q, T_k, generator=g) > 0.4, "random mask"


def _attn_case(g, big):
    dtype = _dtype(g)
    B = _int(g, 1, 3)
    T_q = _int(g, 1, 8 if big else 5)
    T_k = T_q if _int(g, 0, 1) else _int(g, 1, 8 if big else 5)
    d_k, d_v = _int(g, 1, 16 if big else 8), _int(g, 1, 8)
    mask, mname = _mask_kind(g, B, T_q, T_k)
    return Case(f"B={B}, T_q={T_q}, T_k={T_k}, d_k={d_k}, d_v={d_v}, {mname}, {_dn(dtype)}",
                (_randn(g, B, T_q, d_k, dtype=dtype, scale=1.5), _randn(g, B, T_k, d_k, dtype=dtype, scale=1.5),
                 _randn(g, B, T_k, d_v, dtype=dtype)), {"mask": mask})


def _attn_edge():
    g = _gen(41)
    q, k, v = _randn(g, 1, 4), _randn(g, 1, 4), _randn(g, 1, 3)
    Q, K, V = _randn(g, 2, 5, 4), _randn(g, 2, 5, 4), _randn(g, 2, 5, 3)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    full_row = torch.ones(2, 5, 5, dtype=torch.bool)
    full_row[1, 2] = False
    return [
        Case("n = 1: the token returns its own value", (q, k, v)),
        Case("causal mask: the first position attends to itself alone", (Q, K, V), {"mask": causal}),
        Case("all scores equal: the output is the plain average of the values",
             (torch.zeros(2, 3, 4, dtype=F64), _randn(g, 2, 6, 4) * 0, _randn(g, 2, 6, 3))),
        Case("empty source (T_k = 0): zero output, never NaN", (Q, K[:, :0], V[:, :0])),
        Case("a fully masked row: zero weights and zero output", (Q, K, V), {"mask": full_row}),
        Case("very large scores (x1000): no overflow", (Q * 1000, K, V), {"mask": causal}),
        Case("unbatched 2-D inputs with T_q != T_k", (Q[0, :2], K[0], V[0])),
        Case("a mask of the wrong shape is an error", (Q, K, V), {"mask": torch.ones(4, 4, dtype=torch.bool)},
             raises="ValueError"),
        Case("a mask with extra leading axes (it would enlarge the output) is an error", (Q[0], K[0], V[0]),
             {"mask": torch.ones(7, 5, 5, dtype=torch.bool)}, raises="ValueError"),
    ]


def _attn_weights_sum_to_one(fn):
    """Each query's weights sum to 1 over the keys, and blocked keys get exactly 0."""
    from . import _safe
    g = _gen(7)
    Q, K, V = _randn(g, 3, 6, 4), _randn(g, 3, 7, 4), _randn(g, 3, 7, 2)
    mask = torch.rand(3, 6, 7, generator=g) > 0.5
    mask[:, :, 0] = True
    out = _safe.call(fn, (Q, K, V), {"mask": mask})
    if out.error is not None or out.timed_out:
        return None
    v = out.value
    if not (isinstance(v, tuple) and len(v) == 2 and type(v[1]) is _safe.Tensor and tuple(v[1].shape) == (3, 6, 7)):
        return None
    w, allowed = _nested(v[1]), mask.tolist()
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


def _leak_message(i, j, what):
    return (f"the future leaks: the output at position i={i} changed when {what} at j={j} (a later position) "
            f"changed. With the causal mask, position i may only depend on positions j <= i.")


def _no_future_leak(fn, args, x_index, T, first_of_tuple, what="the input", kwargs=None):
    """Perturb position j of args[x_index] for j = T-1 .. 1; rows i < j of the output must not move.

    ``x_index`` is one index into ``args`` or a tuple of them (all perturbed together);
    ``first_of_tuple``: the output is the first of a returned pair (out, weights).
    Returns the message naming the leaking pair (i, j), or None.
    """
    from . import _safe
    kwargs = kwargs or {}
    indices = x_index if isinstance(x_index, tuple) else (x_index,)

    def output(value):
        if first_of_tuple:
            if not (isinstance(value, tuple) and len(value) == 2):
                return None
            value = value[0]
        if type(value) is not _safe.Tensor or value.dim() != 3 or value.shape[1] != T:
            return None
        return _nested(value)

    base = _safe.call(fn, args, kwargs)
    if base.error is not None or base.timed_out or output(base.value) is None:
        return None  # reported by the case checks
    out0 = output(base.value)
    for j in range(T - 1, 0, -1):
        moved_args = list(args)
        for k in indices:
            x = _safe.clone(args[k])
            x[:, j] += 3.0
            moved_args[k] = x
        moved = _safe.call(fn, tuple(moved_args), kwargs)
        if moved.error is not None or moved.timed_out or output(moved.value) is None:
            return None
        out1 = output(moved.value)
        for b in range(len(out0)):
            for i in range(j):
                if any(abs(u - w) > 1e-9 * (1 + abs(u)) for u, w in zip(out0[b][i], out1[b][i])):
                    return _leak_message(i, j, what)
    return None


def _attn_no_future_leak(fn):
    """Changing token j must not move the causal output at any position i < j."""
    g = _gen(9)
    T = 6
    Q, K, V = _randn(g, 1, T, 4), _randn(g, 1, T, 4), _randn(g, 1, T, 3)
    return _no_future_leak(fn, (Q, K, V), (0, 1, 2), T, True, "the token",
                           {"mask": torch.ones(T, T, dtype=torch.bool).tril()})


EXERCISES = {e.name: e for e in [
    # 01 tokens & embeddings
    Exercise("build_vocab", "01_tokens", "tokens:build_vocab", _build_vocab_case, _build_vocab_edge,
             mistakes=[("build_vocab_no_specials", "the special tokens <pad> <bos> <eos> <unk> are missing: they take ids 0-3"),
                       ("build_vocab_alphabetical", "the tokens are sorted alphabetically; sort by decreasing count first, "
                                                    "alphabetically only to break ties")],
             tensor_inputs=False),
    Exercise("encode", "01_tokens", "tokens:encode", _encode_case, _encode_edge,
             mistakes=[("encode_no_bos_eos", "the ids lack <bos> at the start and <eos> at the end")],
             tensor_inputs=False),
    Exercise("decode", "01_tokens", "tokens:decode", _decode_case, _decode_edge,
             mistakes=[("decode_keeps_specials", "special tokens were kept: skip <pad>/<bos> and stop at <eos>")],
             tensor_inputs=False),
    Exercise("pad_batch", "01_tokens", "tokens:pad_batch", _pad_case, _pad_edge,
             mistakes=[("pad_batch_mask_inverted", "the mask is inverted: True must mark real tokens, False padding"),
                       ("pad_batch_left", "the padding went on the left; pad on the right")],
             tensor_inputs=False),
    Exercise("embed_one_hot", "01_tokens", "tokens:embed_one_hot", _embed_case, _embed_edge,
             mistakes=[("embed_off_by_one", "each token got the row after its own: ids count from 0"),
                       ("embed_transposed", "the embedding matrix was used transposed: E is (V, D), one row per token")]),
    Exercise("embed_lookup", "01_tokens", "tokens:embed_lookup", _embed_case, _embed_edge,
             mistakes=[("embed_off_by_one", "each token got the row after its own: ids count from 0"),
                       ("embed_transposed", "the embedding matrix was used transposed: E is (V, D), one row per token")]),
    # 02 dot products
    Exercise("pairwise_scores", "02_dot_products", "dot_products:pairwise_scores", _qk_case, _qk_edge,
             mistakes=[("scores_keys_first", "you computed K Q^T (keys x queries); the scores are Q K^T, rows are queries")]),
    Exercise("project_qkv", "02_dot_products", "dot_products:project_qkv", _proj_case, _proj_edge,
             mistakes=[("project_k_v_swapped", "K and V are swapped: K comes from W_K and V from W_V")]),
    Exercise("scaled_scores", "02_dot_products", "dot_products:scaled_scores", _qk_case, _qk_edge,
             mistakes=[("scaled_scores_no_sqrt", "the scores were not divided by sqrt(d_k)"),
                       ("scaled_scores_by_d_k", "the scores were divided by d_k; divide by sqrt(d_k)")]),
    Exercise("score_variance", "02_dot_products", "dot_products:score_variance", None, lambda: [
             Case("d_k = 0 is an error", (0,), raises="ValueError")],
             properties=[("basic", _variance_property), ("hidden-basic", _variance_property),
                         ("hidden", _variance_property)],
             tensor_inputs=False, n_basic=0, n_hidden=0),
    # 03 softmax
    Exercise("softmax", "03_softmax", "softmax:softmax", _logits_case, _softmax_edge,
             conditioning=logit_scale,
             given=("coursekit.widgets:reference_softmax",),
             properties=[("edge", _rows_sum_to_one), ("hidden", _rows_sum_to_one)],
             mistakes=[("softmax_no_max_subtraction", "exp() overflowed: subtract the maximum before exponentiating"),
                       ("softmax_wrong_axis", "the softmax ran over the wrong axis: use the `dim` argument"),
                       ("softmax_times_temperature", "the logits were multiplied by the temperature; divide by it"),
                       ("softmax_ignores_temperature", "the temperature argument was ignored")]),
    Exercise("log_softmax", "03_softmax", "softmax:log_softmax", _logits_case, _log_softmax_edge,
             conditioning=logit_scale,
             mistakes=[("log_softmax_as_log_of_softmax", "log(softmax(x)) underflows to -inf for very unlikely entries; "
                                                         "compute z - max - log(sum(exp(z - max))) directly"),
                       ("softmax_wrong_axis", "the normalisation ran over the wrong axis: use the `dim` argument"),
                       ("log_softmax_ignores_temperature", "the temperature argument was ignored")]),
    Exercise("sequence_log_prob", "03_softmax", "softmax:sequence_log_prob", _seq_case, _seq_edge,
             conditioning=logit_sum_scale,
             mistakes=[("sequence_log_prob_ignores_mask", "padding positions were counted: use the mask"),
                       ("sequence_log_prob_mean", "the log-probabilities were averaged; the chain rule sums them"),
                       ("sequence_log_prob_shifted", "the targets are off by one position: logits[:, t] scores "
                                                     "targets[:, t]")]),
    # 04 masks & attention
    Exercise("bidirectional_mask", "04_masks_attention", "attention:bidirectional_mask", _bidir_case,
             lambda: [Case("T_q = T_k = 1", (1, 1)), Case("an empty source, T_k = 0", (3, 0))]),
    Exercise("causal_mask", "04_masks_attention", "attention:causal_mask", _causal_case, _causal_edge,
             mistakes=[("causal_mask_transposed", "the mask is upper-triangular: query i may see keys j <= i, so True "
                                                  "belongs on and below the diagonal"),
                       ("causal_mask_strict", "the diagonal is blocked: every position may attend to itself")]),
    Exercise("padding_mask", "04_masks_attention", "attention:padding_mask", _pad_mask_case, _pad_mask_edge,
             mistakes=[("padding_mask_inverted", "the mask is inverted: True means 'may attend', i.e. a real token"),
                       ("padding_mask_over_queries", "the new axis went after the keys: the result is (B, 1, T_k), "
                                                     "blocking keys, not queries")]),
    Exercise("combine_masks", "04_masks_attention", "attention:combine_masks", _combine_case, _combine_edge,
             mistakes=[("combine_masks_or", "masks were combined with OR; a pair may attend only if every mask "
                                            "allows it (AND)")]),
    Exercise("additive_mask", "04_masks_attention", "attention:additive_mask", _additive_case, _additive_edge,
             mistakes=[("additive_mask_inverted", "the polarity is inverted: True (may attend) maps to 0, False to -inf"),
                       ("additive_mask_large_negative", "blocked pairs got a large negative number, not -inf; the notes' "
                                                        "M uses -inf so exp() gives exactly 0")]),
    Exercise("masked_attention", "04_masks_attention", "attention:masked_attention",
             _attn_case, _attn_edge,
             given=("coursekit.blocks:masked_attention", "coursekit.widgets:reference_attention"),
             properties=[("edge", _attn_weights_sum_to_one), ("edge", _attn_no_future_leak),
                         ("hidden", _attn_weights_sum_to_one), ("hidden", _attn_no_future_leak)],
             mistakes=[("attention_no_sqrt", "the scores were not divided by sqrt(d_k)"),
                       ("attention_softmax_over_queries", "the softmax ran over the queries (dim=-2); it must run over "
                                                          "the keys (dim=-1)"),
                       ("attention_mask_transposed", "the mask was applied transposed: mask[i, j] is query i, key j"),
                       ("attention_mask_after_softmax", "the mask was applied after the softmax, so the remaining "
                                                        "weights no longer sum to 1; add -inf before the softmax"),
                       ("attention_mask_ignored", "the mask was ignored")]),
]}


def visible_cases(ex, part):
    """The cases of a visible part, made from fixed seeds."""
    if part == "basic":
        g = _gen(1000 + sum(map(ord, ex.name)))
        return [ex.random_case(g, False) for _ in range(ex.n_basic)] if ex.random_case else []
    if part == "edge":
        return ex.edge()
    raise ValueError(f"unknown visible part {part!r}")


def hidden_cases(ex, seed, big=True, n=None):
    """Fresh random cases for the hidden parts (larger ones unless ``big`` is False)."""
    g = _gen(seed)
    return [ex.random_case(g, big) for _ in range(ex.n_hidden if n is None else n)] if ex.random_case else []


SAFE_GLOBALS = []  # classes (beyond tensors and plain data) that shipped expectations may hold; modules add theirs


def register(*exercises):
    """Add exercises of a later notebook; each notebook's module calls this on import."""
    for ex in exercises:
        if ex.name in EXERCISES:
            raise ValueError(f"exercise {ex.name!r} is registered twice")
        EXERCISES[ex.name] = ex


# Later notebooks keep their exercises in a module of their own (grader/exercises_<NN_topic>.py,
# built from Case / Exercise and the helpers above, ending with `register(...)`), imported here:
from . import exercises_05_rnn  # noqa: E402,F401
from . import exercises_06_08  # noqa: E402,F401
from . import exercises_09_kv  # noqa: E402,F401
