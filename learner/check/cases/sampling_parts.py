"""Notebook 07's sampling exercises (top_k_filter, top_p_filter, sample_next): their cases and properties.

Kept apart from ``decoder.py``, which registers them with notebook 07's other exercises. Logits are seeded; a draw is
checked against the distribution it must follow, in plain Python.
"""
import math

import torch

from .common import (INF, Case, F64, dn, gen, learner_tensor, nested, pick_dtype, pick_int, seeded_randn)

# ---------------------------------------------------------------- sampling: top_k_filter, top_p_filter, sample_next
def _sampling_logits(g, big, dtype):
    """(B, V) or (B, T, V) logits; some rows with ties (integer logits) or blocked tokens (-inf)."""
    lead = [(pick_int(g, 1, 4),), (pick_int(g, 1, 3), pick_int(g, 1, 3))][pick_int(g, 0, 1)] if big \
        else (pick_int(g, 2, 4),)
    V = pick_int(g, 2, 10) if big else pick_int(g, 4, 9)
    kind = pick_int(g, 0, 2) if big else 1
    if kind == 1:  # ties: small integers (every visible basic case, where a tie at the k-th place shows)
        x = torch.randint(-2, 3, lead + (V,), generator=g).to(dtype)
        what = "integer logits (ties)"
    else:
        x = seeded_randn(g, *lead, V, dtype=dtype, scale=2.0)
        what = "logits"
    if kind == 2 and V > 2:  # a few tokens blocked before sampling (a mask), never a whole row
        x[..., pick_int(g, 1, V - 1)] = -INF
        what = "logits with a token at -inf"
    return x, f"{what} {tuple(x.shape)}, {dn(dtype)}"


def _softmax_row(row):
    """softmax of one row of logits (a list; -inf allowed, not all of it), in plain Python."""
    m = max(row)
    e = [math.exp(v - m) if v != -INF else 0.0 for v in row]
    return [q / sum(e) for q in e]


def _nucleus_margin(x, p):
    """How close p is to a boundary of the nucleus of ``x`` (float64, pure Python): the smallest |mass - p|."""
    worst = INF
    for row in nested(x.double().reshape(-1, x.shape[-1])):
        if all(v == -INF for v in row):
            continue
        mass = 0.0
        for q in sorted(_softmax_row(row), reverse=True):
            mass += q
            worst = min(worst, abs(mass - p))
    return worst


def _away_from_the_boundary(x, p):
    """``p`` moved (by 0.004 at a time) until no token's running mass is within 1e-4 of it, so that every correct
    way of adding up the probabilities keeps the same tokens."""
    while p < 1 and _nucleus_margin(x, p) < 1e-4:
        p = round(p + 0.004, 6)
    return min(p, 1.0)


def top_k_case(g, big):
    dtype = pick_dtype(g)
    x, what = _sampling_logits(g, big, dtype)
    k = pick_int(g, 1, x.shape[-1] + (1 if big else -1))
    return Case(f"{what}, k={k}", (x, k))


def top_k_edge():
    g = gen(74)
    x = seeded_randn(g, 3, 6, scale=2.0)
    blocked = x.clone()
    blocked[:, 2] = -INF
    return [
        Case("k = 1: only the largest logit of each row stays", (x, 1)),
        Case("k = 3 of V = 6", (x, 3)),
        Case("k = V: nothing is removed", (x, 6)),
        Case("k > V: nothing is removed", (x, 9)),
        Case("a tie at the k-th place, [3, 1, 1, 0] with k = 2: both 1s stay (3 tokens kept)",
             (torch.tensor([[3.0, 1.0, 1.0, 0.0]], dtype=F64), 2)),
        Case("a row of equal logits: every token ties, all stay", (torch.zeros(1, 5, dtype=F64), 2)),
        Case("logits (B, T, V) = (2, 3, 6): each row on its own", (seeded_randn(g, 2, 3, 6), 2)),
        Case("a token already at -inf stays -inf", (blocked, 4)),
        Case("float32", (x.float(), 2)),
        Case("k = 0 keeps nothing: an error", (x, 0), raises="ValueError"),
        Case("k = -1: an error", (x, -1), raises="ValueError"),
        Case("k = 2.5 is not a whole number of tokens: an error", (x, 2.5), raises="ValueError"),
    ]


def top_p_case(g, big):
    dtype = pick_dtype(g)
    x, what = _sampling_logits(g, big, dtype)
    # 0.2 as well: sorted from low to high, the nucleus drops the top token only when p <= 1 - its probability, so
    # with p >= 0.5 alone that mistake kept every token on every case, and a filter that filtered nothing was
    # named by it
    p = (0.2, 0.5, 0.8, 0.9, 0.95, None)[pick_int(g, 0, 5)]
    if p is None:
        p = round(float(torch.rand((), generator=g, dtype=F64)) * 0.98 + 0.01, 3)
    p = _away_from_the_boundary(x, p)
    return Case(f"{what}, p={p:g}", (x, p))


def _probs_as_logits(*probs):
    return torch.tensor([probs], dtype=F64).log()


def top_p_edge():
    g = gen(75)
    x = seeded_randn(g, 3, 6, scale=2.0)
    blocked = x.clone()
    blocked[:, 1] = -INF
    return [
        Case("p = 1: every token stays", (x, 1.0)),
        Case("p = 1 on float32 logits: every token stays, in float32", (x.float(), 1.0)),
        Case("p = 1 with a token of tiny probability, float32: it stays too (the mass before it rounds to 1 in "
             "float32, so p = 1 keeps every token without adding up)",
             (torch.tensor([[0.0, -20.0, 1.0, 2.0]]), 1.0)),
        Case("two tokens of probability 0.5 (logits [0, 0, -1e9]), p = 0.5: the first reaches p exactly and is kept "
             "alone", (torch.tensor([[0.0, 0.0, -1e9]], dtype=F64), 0.5)),
        Case("40 equal logits, p = 0.31: the 13 of lowest index (a stable sort keeps ties in index order)",
             (torch.zeros(1, 40, dtype=F64), 0.31)),
        Case("probabilities [0.5, 0.3, 0.2], p = 0.6: 0.5 falls short, so the second token (crossing 0.6) is kept "
             "too", (_probs_as_logits(0.5, 0.3, 0.2), 0.6)),
        Case("probabilities [0.5, 0.3, 0.2], p = 0.79: the first two (mass 0.8) reach it",
             (_probs_as_logits(0.5, 0.3, 0.2), 0.79)),
        Case("probabilities [0.5, 0.3, 0.2], p = 0.81: all three are needed",
             (_probs_as_logits(0.5, 0.3, 0.2), 0.81)),
        Case("p = 0.01, smaller than any probability: the most probable token alone", (x, 0.01)),
        Case("probabilities [0.2, 0.5, 0.3] (not sorted), p = 0.7: tokens 1 and 2",
             (_probs_as_logits(0.2, 0.5, 0.3), 0.7)),
        Case("a tie, probabilities [0.4, 0.3, 0.3], p = 0.5: of the two 0.3s the lower index (1) is kept",
             (_probs_as_logits(0.4, 0.3, 0.3), 0.5)),
        Case("a tie, probabilities [0.3, 0.4, 0.3], p = 0.5: tokens 1 and then 0",
             (_probs_as_logits(0.3, 0.4, 0.3), 0.5)),
        Case("logits (B, T, V) = (2, 3, 6), p = 0.9: each row on its own", (seeded_randn(g, 2, 3, 6, scale=2.0), 0.9)),
        Case("a token already at -inf stays -inf", (blocked, 0.9)),
        Case("float32", (x.float(), 0.9)),
        Case("p = 0 keeps nothing: an error", (x, 0.0), raises="ValueError"),
        Case("p = 1.5 is not a probability: an error", (x, 1.5), raises="ValueError"),
    ]


def sample_case(g, big):
    """Big (hidden) cases: any mix of the settings. Visible basic cases: many rows, a temperature other than 1 and
    both filters, so that a wrong order of the three steps changes some draws."""
    dtype = pick_dtype(g)
    B = pick_int(g, 1, 8) if big else pick_int(g, 16, 24)
    V = pick_int(g, 2, 10) if big else pick_int(g, 5, 9)
    x = seeded_randn(g, B, V, dtype=dtype, scale=2.0)
    if big:
        tau = (0.5, 1.0, 2.0, 0.8)[pick_int(g, 0, 3)]
        top_k = None if pick_int(g, 0, 1) else pick_int(g, 1, V)
        top_p = None if pick_int(g, 0, 1) else (0.5, 0.8, 0.9)[pick_int(g, 0, 2)]
    else:
        tau, top_k, top_p = (0.4, 2.5)[pick_int(g, 0, 1)], pick_int(g, 3, V - 1), (0.6, 0.8)[pick_int(g, 0, 1)]
    if top_p is not None:
        z = x / tau
        if top_k is not None and top_k < V:
            z = z.masked_fill(z < z.topk(top_k, dim=-1).values[..., -1:], -INF)
        top_p = _away_from_the_boundary(z, top_p)
    seed = pick_int(g, 0, 10_000)
    return Case(f"B={B}, V={V}, seed={seed}, temperature={tau:g}, top_k={top_k}, top_p={top_p}, {dn(dtype)}",
                (x, seed), {"temperature": tau, "top_k": top_k, "top_p": top_p})


def sample_edge():
    g = gen(76)
    x = seeded_randn(g, 6, 5, scale=2.0)
    one = torch.full((3, 4), -INF, dtype=F64)
    one[:, 2] = 0.0
    return [
        Case("temperature 1, no filter: one draw per row", (x, 0)),
        Case("another seed, other draws", (x, 1)),
        Case("one finite logit per row: always that token", (one, 3)),
        Case("top_k = 1: the argmax, whatever the seed", (x, 7), {"top_k": 1}),
        Case("top_p = 0.01: the argmax, whatever the seed", (x, 7), {"top_p": 0.01}),
        Case("temperature 0.5 with top_k = 3", (x, 11), {"temperature": 0.5, "top_k": 3}),
        Case("temperature 2 with top_p = 0.9 (the nucleus is taken after the temperature)", (x, 12),
             {"temperature": 2.0, "top_p": _away_from_the_boundary(x / 2.0, 0.9)}),
        Case("top_k = 4 and top_p = 0.8 together (top-k first)", (x, 13), {"top_k": 4, "top_p": 0.8}),
        Case("float32", (x.float(), 5), {"temperature": 0.8}),
        Case("temperature 0 is not a distribution (greedy decoding is the argmax): an error", (x, 0),
             {"temperature": 0.0}, raises="ValueError"),
        Case("a negative temperature: an error", (x, 0), {"temperature": -1.0}, raises="ValueError"),
        Case("top_k = 0: an error", (x, 0), {"top_k": 0}, raises="ValueError"),
        Case("top_p = 0: an error", (x, 0), {"top_p": 0.0}, raises="ValueError"),
    ]


DRAWS = 4000
_ROW = [2.0, 1.0, 0.5, 0.0, -1.0, -3.0]


def _row_probabilities(row, tau, top_k, top_p):
    """softmax of one row after the temperature, top-k and top-p, in plain Python (as the docstring says)."""
    z = [v / tau for v in row]
    if top_k is not None:
        kth = sorted(z, reverse=True)[top_k - 1]
        z = [v if v >= kth else -INF for v in z]
    probs = _softmax_row(z)
    if top_p is not None:
        order = sorted(range(len(probs)), key=lambda j: (-probs[j], j))
        mass, keep = 0.0, set()
        for j in order:
            if mass >= top_p:
                break
            keep.add(j)
            mass += probs[j]
        e = [q if j in keep else 0.0 for j, q in enumerate(probs)]
        probs = [q / sum(e) for q in e]
    return probs


def draws_follow_the_distribution(fn):
    """Over DRAWS rows of the same logits, each token comes up about as often as the distribution says, and a
    token that the temperature, top-k or top-p removed never does."""
    for tau, top_k, top_p in ((1.0, None, None), (0.7, 4, None), (1.5, None, 0.8)):
        probs = _row_probabilities(_ROW, tau, top_k, top_p)
        x = torch.tensor([_ROW] * DRAWS, dtype=F64)
        out = learner_tensor(fn, (x, 2024), {"temperature": tau, "top_k": top_k, "top_p": top_p}, shape=(DRAWS,))
        if out is None:
            return None
        drawn = nested(out)
        setting = (f"temperature {tau:g}" + (f", top_k={top_k}" if top_k else "")
                   + (f", top_p={top_p}" if top_p else ""))
        if any(type(t) is not int or not 0 <= t < len(_ROW) for t in drawn):
            return f"with {setting} some draws are not token ids from 0 to {len(_ROW) - 1}"
        counts = [drawn.count(j) for j in range(len(_ROW))]
        for j, (c, q) in enumerate(zip(counts, probs)):
            if q == 0 and c:
                return (f"with {setting} token {j} was drawn {c} times in {DRAWS}, yet it is not allowed (its "
                        f"probability after the filters is 0)")
            sigma = math.sqrt(q * (1 - q) / DRAWS)
            if abs(c / DRAWS - q) > 5 * sigma + 2e-3:
                return (f"with {setting} token {j} came up in {c / DRAWS:.1%} of {DRAWS} draws, but its probability "
                        f"is {q:.1%}: draw from softmax(z) after dividing by the temperature and filtering "
                        f"(top-k, then top-p)")
    return None
