"""Known mistakes of notebook 04 (masks and attention): wrong variants of ``solutions/masks_attention.py``.

The checks run them on the same inputs as the learner's function; when the
learner's output matches one of them, the failure message names the mistake.
Each is one edit away from a correct answer; some call the reference itself (the
tests compile them as learner code calling the learner's own functions).
"""
import math

import torch

from .. import masks_attention as attention


def causal_mask_transposed(T, device=None):
    return attention.causal_mask(T, device).T.contiguous()


def causal_mask_reversed(T, device=None):
    # nn.MultiheadAttention's polarity: True where attending is blocked (j > i)
    return ~attention.causal_mask(T, device)


def causal_mask_strict(T, device=None):
    return torch.ones((T, T), dtype=torch.bool, device=device).tril(-1)


def additive_mask_inverted(mask, dtype=torch.float32):
    return attention.additive_mask(~mask, dtype)


def additive_mask_large_negative(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, -1e9)


def additive_mask_float16_floor(mask, dtype=torch.float32):
    # masked_fill(~mask, -1e4): a "large" negative that still fits float16
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, -1e4)


def additive_mask_finfo_min(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def padding_mask_inverted(key_valid):
    return ~key_valid[:, None, :]


def padding_mask_over_queries(key_valid):
    return key_valid[:, :, None]


def combine_masks_or(*masks):
    result = None
    for m in masks:
        if m is not None:
            result = m if result is None else result | m
    return result


def attention_no_sqrt(Q, K, V, mask=None):
    return attention.masked_attention(Q * math.sqrt(Q.shape[-1]), K, V, mask)


def attention_scaled_by_d_k(Q, K, V, mask=None):
    return attention.masked_attention(Q / math.sqrt(Q.shape[-1]), K, V, mask)


def attention_scaled_by_sqrt_T_k(Q, K, V, mask=None):
    T_k = K.shape[-2]
    return attention.masked_attention(Q * math.sqrt(Q.shape[-1] / T_k) if T_k else Q, K, V, mask)


def attention_scaled_by_sqrt_d_v(Q, K, V, mask=None):
    return attention.masked_attention(Q * math.sqrt(Q.shape[-1] / V.shape[-1]) if V.shape[-1] else Q, K, V, mask)


def attention_softmax_without_max(Q, K, V, mask=None):
    # exp(scores) / sum: exp of a large score is inf, and inf / inf is NaN
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()
    weights = e / e.sum(dim=-1, keepdim=True)
    return weights @ V, weights


def attention_softmax_without_max_zeroed(Q, K, V, mask=None):
    # the same, with the NaN of an empty row turned into 0: an overflowing row becomes all zeros
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    e = scores.exp()
    weights = (e / e.sum(dim=-1, keepdim=True)).nan_to_num(0.0)
    return weights @ V, weights


def attention_softmax_over_queries(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
    return weights @ V, weights


def attention_sum_over_queries(Q, K, V, mask=None):
    """A softmax of one's own whose maximum is taken over the keys but whose sum runs over the queries (dim=-2)."""
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True) if K.shape[-2] > 0 else scores.sum(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    e = torch.exp(scores - m)
    total = e.sum(dim=-2, keepdim=True)
    weights = torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
    return weights @ V, weights


def attention_mask_transposed(Q, K, V, mask=None):
    if mask is None or mask.shape[-1] != mask.shape[-2]:
        return attention.masked_attention(Q, K, V, mask)
    return attention.masked_attention(Q, K, V, mask.transpose(-2, -1))


def attention_mask_after_softmax(Q, K, V, mask=None):
    _, weights = attention.masked_attention(Q, K, V, None)
    if mask is not None:
        weights = weights * mask
    return weights @ V, weights


def attention_mask_ignored(Q, K, V, mask=None):
    return attention.masked_attention(Q, K, V, None)


def attention_plain_softmax(Q, K, V, mask=None):
    # the right polarity, with torch.softmax: a fully blocked row is 0/0, NaN
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_mask_reversed(Q, K, V, mask=None):
    # masked_fill(mask, -inf): nn.MultiheadAttention's polarity, with a softmax that handles an empty row
    return attention.masked_attention(Q, K, V, None if mask is None else ~mask)


def attention_mask_reversed_plain_softmax(Q, K, V, mask=None):
    # the same, with torch.softmax: a row the reversed mask blocks entirely becomes NaN
    if mask is None:
        return attention.masked_attention(Q, K, V, None)
    scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])).masked_fill(mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_finite_fill(Q, K, V, mask=None):
    # masked_fill(~mask, -1e9): right wherever a row has an allowed key; a fully blocked row averages every value
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_mask_multiplied(Q, K, V, mask=None):
    # the bool mask used as a float factor: a blocked score becomes 0, which still gets exp(0) of the weight
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores * mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


def attention_mask_added(Q, K, V, mask=None):
    # the bool mask added as if it were M: an allowed score gains 1, a blocked one 0, so nothing is blocked
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ V, weights


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_causal_pairs_all_pairs():
    return 36


def answer_causal_pairs_no_diagonal():
    return 15


def answer_causal_pairs_diagonal_only():
    return 6


def answer_why_minus_infinity_faster():
    return "a"


def answer_why_minus_infinity_nan():
    return "c"


def answer_why_minus_infinity_same():
    return "d"


def answer_causal_pairs_one_position_too_many():
    return 28
