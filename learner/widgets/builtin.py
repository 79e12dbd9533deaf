"""The widgets' reference sides, written with PyTorch's built-ins (never the ``solutions`` package, which
learners do not have): softmax with a temperature, the masks of notebook 04, masked attention, and the
top-k and top-p filters of notebook 07 (as the sets of tokens they keep).

The course's convention holds throughout: a row with nothing allowed (every logit -inf, or every key
blocked) gets zero probabilities, zero weights and a zero output, never NaN.
"""
import math

import torch
import torch.nn.functional as F

NINF = float("-inf")


def reference_probabilities(x, temperature):
    """The reference: ``torch.softmax(x / τ, dim=-1)`` in float64, x (..., n) -> (..., n).

    The course's rule for a row with nothing allowed (every logit -inf): all zeros, never NaN.
    """
    p = torch.softmax(x.to(torch.float64) / temperature, dim=-1)
    nothing_allowed = (x == NINF).all(dim=-1, keepdim=True)
    return p.masked_fill(nothing_allowed, 0.0)


def reference_mask(kind, n_queries, n_keys, key_valid, prefix=0):
    """The boolean mask (T_q, T_k) of each rule, True = may attend; ``key_valid`` (T_k,) is False on pads."""
    i = torch.arange(n_queries)[:, None]
    j = torch.arange(n_keys)[None, :]
    if kind == "bidirectional":
        return torch.ones(n_queries, n_keys, dtype=torch.bool)
    if kind == "causal":
        return torch.ones(n_queries, n_keys, dtype=torch.bool).tril()
    if kind in ("padding", "cross"):
        return key_valid[None, :].expand(n_queries, n_keys).clone()
    if kind == "prefix":
        return ((j <= i) | (j < prefix)) & key_valid[None, :]
    raise ValueError(f"unknown mask kind {kind!r}")


def attention_weights(Q, K, mask, scale=True, dim=-1):
    """softmax over ``dim`` of the masked (and, with ``scale``, scaled) scores, in float64, with torch's
    softmax: Q (T_q, d_k), K (T_k, d_k), mask (T_q, T_k) True = may attend -> weights (T_q, T_k).

    A row (along ``dim``) with nothing allowed gets zero weights, never NaN: the course's rule.
    ``scale=False`` and ``dim=-2`` model the learner's known mistakes.
    """
    scores = Q.to(torch.float64) @ K.to(torch.float64).T
    if scale:
        scores = scores / math.sqrt(Q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~mask, NINF), dim=dim)
    return weights.masked_fill(~mask.any(dim=dim, keepdim=True), 0.0)


def reference_masked_attention(Q, K, V, mask):
    """The reference: (out (T_q, d_v), weights (T_q, T_k)) in float64, out from torch's
    ``scaled_dot_product_attention`` with the boolean ``mask`` (True = may attend).

    A query with nothing allowed gets a zero output and zero weights, never NaN.
    """
    Q, K, V = (t.to(torch.float64) for t in (Q, K, V))
    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return out, attention_weights(Q, K, mask)


def reference_top_k(z, k):
    """What top-k keeps of the logits ``z`` (..., V): a bool (..., V), True = kept, from ``torch.topk``.

    Notebook 07's rule: the ``k`` largest logits of each row, and every logit equal to the k-th largest (a tie
    at the boundary keeps them all); ``k`` >= V keeps every token. A -inf logit is never kept.
    """
    if k >= z.shape[-1]:
        return torch.isfinite(z)
    kth = z.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit of each row
    return (z >= kth) & torch.isfinite(z)


def reference_top_p(z, p, crossing=True):
    """What top-p keeps of the logits ``z`` (..., V): a bool (..., V), True = kept, from ``torch.sort``.

    Notebook 07's rule: the tokens in order of softmax(z), from high to low (a stable sort: among equal
    probabilities the lower index first), kept while the mass ranked above them is below ``p``; so the token
    that crosses ``p`` is kept, the most probable token always, and ``p`` = 1 keeps every token. A -inf logit
    (probability 0) is never kept. ``crossing=False`` models a known mistake: the token that crosses ``p`` removed.
    """
    probs = torch.softmax(z.to(torch.float64), dim=-1)  # (..., V)
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    mass = sorted_probs.cumsum(dim=-1)  # (..., V): the mass of each token and of those ranked above it
    above = mass - sorted_probs if crossing else mass  # the mass ranked above each token (the mistake: with it)
    keep = torch.zeros_like(above, dtype=torch.bool).scatter(-1, order, (above < p) | (p >= 1))
    return keep & torch.isfinite(z)
