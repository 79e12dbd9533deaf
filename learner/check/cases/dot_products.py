"""Notebook 02, dot products: cases, properties and known mistakes (``solutions/mistakes/dot_products.py``)."""
import torch

from .. import safe
from ..messages import timeout_text
from .common import (RANDOM_STATE, Case, Exercise, F64, dn, gen, pick_dtype, pick_int, seeded_randn, register,
                     stub_message, Choice, Integer, question)


def _qk_case(g, big):
    dtype = pick_dtype(g)
    B, T_q, T_k = pick_int(g, 1, 3), pick_int(g, 1, 9 if big else 5), pick_int(g, 1, 9 if big else 5)
    d = pick_int(g, 1, 16 if big else 8)
    lead = (B,) if pick_int(g, 0, 1) else (B, pick_int(g, 1, 3))
    return Case(f"Q {lead + (T_q, d)}, K {lead + (T_k, d)}, {dn(dtype)}",
                (seeded_randn(g, *lead, T_q, d, dtype=dtype), seeded_randn(g, *lead, T_k, d, dtype=dtype)))


def _qk_edge():
    g = gen(21)
    return [
        Case("n = 1: one query, one key", (seeded_randn(g, 1, 4), seeded_randn(g, 1, 4))),
        Case("no batch dimension, T_q != T_k", (seeded_randn(g, 2, 3), seeded_randn(g, 5, 3))),
        Case("d_k = 1", (seeded_randn(g, 3, 1), seeded_randn(g, 3, 1))),
        Case("large width d_k = 256", (seeded_randn(g, 2, 256), seeded_randn(g, 4, 256))),
        Case("Q and K of different widths is an error", (seeded_randn(g, 2, 3), seeded_randn(g, 2, 4)), raises="ValueError"),
    ]


def _proj_case(g, big):
    dtype = pick_dtype(g)
    B, T, D, d_k, d_v = pick_int(g, 1, 3), pick_int(g, 1, 6), pick_int(g, 2, 8), pick_int(g, 1, 8), pick_int(g, 1, 8)
    return Case(f"X ({B}, {T}, {D}), d_k={d_k}, d_v={d_v}, {dn(dtype)}",
                (seeded_randn(g, B, T, D, dtype=dtype), seeded_randn(g, d_k, D, dtype=dtype), seeded_randn(g, d_k, D, dtype=dtype),
                 seeded_randn(g, d_v, D, dtype=dtype)))


def _proj_edge():
    g = gen(22)
    X = seeded_randn(g, 3, 4)
    return [
        Case("square matrices (d_k = D)", (X, seeded_randn(g, 4, 4), seeded_randn(g, 4, 4), seeded_randn(g, 4, 4))),
        Case("one token", (X[:1], seeded_randn(g, 2, 4), seeded_randn(g, 2, 4), seeded_randn(g, 5, 4))),
        Case("identity W_Q gives Q = X", (X, torch.eye(4, dtype=F64), seeded_randn(g, 4, 4), seeded_randn(g, 4, 4))),
        Case("any leading dimensions: X of shape (2, 2, 3, 4)", (seeded_randn(gen(26), 2, 2, 3, 4), seeded_randn(gen(27), 2, 4),
                                                                 seeded_randn(gen(28), 2, 4), seeded_randn(gen(29), 3, 4))),
        Case("W_K with the wrong input width is an error", (X, seeded_randn(g, 2, 4), seeded_randn(g, 2, 3), seeded_randn(g, 2, 4)),
             raises="ValueError"),
        Case("a W_V that is not 2-D is an error", (X, seeded_randn(gen(23), 2, 4), seeded_randn(gen(24), 2, 4),
                                                   seeded_randn(gen(25), 2, 4, 1)), raises="ValueError"),
        Case("W_Q and W_K of different output widths (2 and 3) are an error",
             (X, seeded_randn(gen(23), 2, 4), seeded_randn(gen(24), 3, 4), seeded_randn(gen(25), 2, 4)), raises="ValueError"),
    ]


# score_variance: one score per pair. The check first calls it on a few pairs, watching the size of every tensor
# it makes: scoring every query against every key shows as an n_pairs x n_pairs tensor there (a megabyte), where
# the default 20000 pairs would make 3.2 GB. Then the spread, on as many pairs as its 10% holds 5 standard errors:
# the sample variance of q . k has a relative standard error sqrt((2 + 6 / d_k) / n).
PROBE = (4, 500)  # (d_k, n_pairs) of the first call
PROBE_LIMIT = 2.0  # seconds of computing the first call may take
SPREAD = ((1, 20000), (16, 20000), (256, 5000))  # (d_k, n_pairs) of the calls that judge the variances
ALL_PAIRS = ("every query was scored against every key (n_pairs x n_pairs scores), which the exercise rules out: "
             "score query p with key p only, (q * k).sum(-1), n_pairs scores")


def _all_pairs_at(n_pairs):
    """The size of the all-pairs matrix at ``n_pairs``, in words."""
    return f"{n_pairs * n_pairs:,} float64 numbers, {n_pairs * n_pairs * 8 / 1e9:.1f} GB"


def _variance_property(fn):
    """The variance of q . k is about d_k, and about 1 after dividing by sqrt(d_k), from one score per pair."""
    d_k, n = PROBE
    call = f"score_variance({d_k}, n_pairs={n}, seed=3)"
    out = safe.call(fn, (d_k,), {"n_pairs": n, "seed": 3}, time_limit=PROBE_LIMIT, measure=True)
    if out.timed_out:
        return f"{call}: {timeout_text(out, PROBE_LIMIT)}; a loop over every query and every key takes {n * n:,} steps"
    if isinstance(out.error, NotImplementedError):
        return stub_message("score_variance")
    if out.error is not None:
        return f"{call} raised {type(out.error).__name__}: {out.error}"
    if out.rng_changed:
        return f"{call}: {RANDOM_STATE}"
    if out.largest is not None and out.largest >= n * n:
        return (f"{call} made a tensor of {out.largest:,} numbers (n_pairs x n_pairs = {n * n:,}; one score per "
                f"pair is {n:,} numbers): {ALL_PAIRS} (at the default n_pairs=20000 that matrix would hold "
                f"{_all_pairs_at(20000)})")
    told = _arguments_used(fn, out.value)
    if told:
        return told
    for d_k, n in SPREAD:
        out = safe.call(fn, (d_k,), {"n_pairs": n, "seed": 3})
        if out.timed_out:
            return f"score_variance({d_k}, n_pairs={n}): {timeout_text(out)}"
        if out.error is not None:
            return f"score_variance({d_k}, n_pairs={n}) raised {type(out.error).__name__}: {out.error}"
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


ONE_SIDED = ("the scores are the sums of one vector's entries ({side}.sum(-1)), not of the products of q and k: "
             "their variance is d_k too, but they are not the scores. Score pair p as (q[p] * k[p]).sum(), for every "
             "p at once (q * k).sum(-1)")


def _one_sided(d_k, n_pairs, seed):
    """The variances a learner gets from the scores q.sum(-1) or k.sum(-1), drawn as the text says (q, then k, from
    torch.Generator().manual_seed(seed), float64): a slip no statistic tells from the right answer, told exactly."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_pairs, d_k, generator=g, dtype=F64)
    k = torch.randn(n_pairs, d_k, generator=g, dtype=F64)
    return {side: v.sum(-1).var().item() for side, v in (("q", q), ("k", k))}


def _arguments_used(fn, probed):
    """The probe's value against the same call with another seed, and the defaults against the signature's values:
    the variances come from the pairs drawn for ``seed`` and ``n_pairs``, and the scores from both q and k."""
    d_k, n = PROBE
    if not (isinstance(probed, tuple) and len(probed) == 2 and all(isinstance(x, float) for x in probed)):
        return f"score_variance({d_k}) should return a tuple of two Python floats, got {type(probed).__name__}"
    for side, raw in _one_sided(d_k, n, 3).items():
        if abs(probed[0] - raw) <= 1e-9 * raw:
            return f"score_variance({d_k}, n_pairs={n}, seed=3): {ONE_SIDED.format(side=side)}"
    calls = {"seed=4": ((d_k,), {"n_pairs": n, "seed": 4}), "defaults": ((d_k,), {}),
             "n_pairs=20000, seed=0": ((d_k,), {"n_pairs": 20000, "seed": 0})}
    got = {}
    for label, (args, kwargs) in calls.items():
        out = safe.call(fn, args, kwargs)
        if out.timed_out or out.error is not None:
            what = timeout_text(out) if out.timed_out else f"raised {type(out.error).__name__}: {out.error}"
            return f"score_variance({d_k}{', ' + label if kwargs else ''}): {what}"
        got[label] = out.value
    if got["seed=4"] == probed:
        return (f"score_variance({d_k}, n_pairs={n}) gave the same variances for seed=3 and seed=4: draw the pairs "
                f"from torch.Generator().manual_seed(seed), with the seed it is given")
    if got["defaults"] != got["n_pairs=20000, seed=0"]:
        return (f"score_variance({d_k}) gave {got['defaults']}, and score_variance({d_k}, n_pairs=20000, seed=0) "
                f"gave {got['n_pairs=20000, seed=0']}: keep the signature's defaults, n_pairs=20000 and seed=0")
    return None


# the slip for all three matrices or for one of them: one lesson
NOT_TRANSPOSED = ("a projection matrix was not transposed: W_Q and W_K are (d_k, D), W_V (d_v, D), and each "
                  "multiplies a column vector, q_i = W_Q e_i; for the rows of X that is X @ W_Q.T, X @ W_K.T and "
                  "X @ W_V.T, all three")


register(
    __name__,
    Exercise("pairwise_scores", "dot_products:pairwise_scores", _qk_case, _qk_edge,
             mistakes=[("dot_products:scores_keys_first",
                        "you computed K Q^T (keys x queries); the scores are Q K^T, rows are queries")]),
    Exercise("project_qkv", "dot_products:project_qkv", _proj_case, _proj_edge,
             mistakes=[("dot_products:project_k_v_swapped", "K and V are swapped: K comes from W_K and V from W_V"),
                       *((f"dot_products:{m}", NOT_TRANSPOSED) for m in (
                           "project_qkv_no_transpose", "project_q_no_transpose", "project_k_no_transpose",
                           "project_v_no_transpose", "project_qk_no_transpose", "project_qv_no_transpose",
                           "project_kv_no_transpose"))]),
    Exercise("scaled_scores", "dot_products:scaled_scores", _qk_case, _qk_edge,
             mistakes=[("dot_products:scaled_scores_no_sqrt", "the scores were not divided by sqrt(d_k)"),
                       ("dot_products:scaled_scores_by_d_k", "the scores were divided by d_k; divide by sqrt(d_k)"),
                       ("dot_products:scaled_scores_by_sqrt_T_k",
                        "the scores were divided by the square root of a number of positions (the keys' T_k, "
                        "K.shape[-2], or the queries' T_q where the two are equal); the scale is sqrt(d_k), the width "
                        "of the queries and keys (Q.shape[-1])")]),
    Exercise("score_variance", "dot_products:score_variance", None, lambda: [
             Case("d_k = 0 is an error", (0,), raises="ValueError")],
             properties=[("basic", _variance_property), ("hidden-basic", _variance_property),
                         ("hidden", _variance_property)],
             mistakes=[("dot_products:score_variance_all_pairs", ALL_PAIRS)],
             tensor_inputs=False, n_basic=0, n_hidden=0, own_random=True),
    question("answer_why_scale", "dot_products:answer_why_scale", Choice("a", "b", "c", "d"), wrong=[
        ("dot_products:answer_why_scale_positive",
         "dividing by a positive number keeps every sign: a negative score stays negative"),
        ("dot_products:answer_why_scale_sum_to_one",
         "the softmax makes the weights sum to 1, whatever the scale of the scores"),
        ("dot_products:answer_why_scale_cheaper",
         "the division is one more operation on the scores: it costs a little time and saves none")]),
    question("answer_score_std", "dot_products:answer_score_std", Integer(), wrong=[
        ("dot_products:answer_score_std_variance",
         "64 is the variance (d_k terms of variance 1 add up); the standard deviation is its square root"),
        ("dot_products:answer_score_std_scaled",
         "1 is the spread after dividing by sqrt(d_k) = 8; before the scaling it is sqrt(d_k)")]),
)
