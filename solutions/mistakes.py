"""Deliberately wrong variants of the reference functions.

The grader runs these on the same inputs as the learner's function; when the
learner's output matches one of them, the failure message names the mistake.
They live beside the reference (not in the grader) because each is one edit
away from a correct answer.
"""
import math

import torch

from . import attention, softmax as _sm, tokens


# --- notebook 01 -----------------------------------------------------------
def build_vocab_no_specials(texts, min_freq=1):
    v = tokens.build_vocab(texts, min_freq)
    kept = [t for t in v if t not in tokens.SPECIALS]
    return {t: i for i, t in enumerate(kept)}


def build_vocab_alphabetical(texts, min_freq=1):
    v = tokens.build_vocab(texts, min_freq)
    kept = sorted(t for t in v if t not in tokens.SPECIALS)
    return {t: i for i, t in enumerate(list(tokens.SPECIALS) + kept)}


def encode_no_bos_eos(text, vocab):
    return tokens.encode(text, vocab)[1:-1]


def decode_keeps_specials(ids, vocab):
    inverse = {i: t for t, i in vocab.items()}
    return " ".join(inverse[int(i)] for i in (ids.tolist() if torch.is_tensor(ids) else ids))


def pad_batch_mask_inverted(sequences, pad_id=0):
    ids, mask = tokens.pad_batch(sequences, pad_id)
    return ids, ~mask


def pad_batch_left(sequences, pad_id=0):
    ids, mask = tokens.pad_batch([list(s)[::-1] for s in sequences], pad_id)
    return ids.flip(-1), mask.flip(-1)


def embed_off_by_one(ids, E):
    return E[(ids + 1) % E.shape[0]]


def embed_transposed(ids, E):
    return E.T[ids % E.shape[1]] if E.shape[0] != E.shape[1] else E.T[ids]


# --- notebook 02 -----------------------------------------------------------
def scores_keys_first(Q, K):
    return K @ Q.transpose(-2, -1)


def project_k_v_swapped(X, W_Q, W_K, W_V):
    return X @ W_Q.T, X @ W_V.T, X @ W_K.T


def scaled_scores_no_sqrt(Q, K):
    return Q @ K.transpose(-2, -1)


def scaled_scores_by_d_k(Q, K):
    return Q @ K.transpose(-2, -1) / Q.shape[-1]


# --- notebook 03 -----------------------------------------------------------
def softmax_no_max_subtraction(x, dim=-1, temperature=1.0):
    e = torch.exp(x / temperature)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_wrong_axis(x, dim=-1, temperature=1.0):
    other = 0 if (dim % x.dim()) != 0 else x.dim() - 1
    return _sm.softmax(x, dim=other, temperature=temperature) if x.dim() > 1 else _sm.softmax(x, dim, temperature)


def softmax_times_temperature(x, dim=-1, temperature=1.0):
    return _sm.softmax(x * temperature * temperature, dim=dim, temperature=temperature)


def softmax_ignores_temperature(x, dim=-1, temperature=1.0):
    return _sm.softmax(x, dim=dim)


def log_softmax_as_log_of_softmax(x, dim=-1, temperature=1.0):
    return torch.log(_sm.softmax(x, dim=dim, temperature=temperature))


def log_softmax_ignores_temperature(x, dim=-1, temperature=1.0):
    return _sm.log_softmax(x, dim=dim)


def sequence_log_prob_ignores_mask(logits, targets, mask=None):
    return _sm.sequence_log_prob(logits, targets, None)


def sequence_log_prob_mean(logits, targets, mask=None):
    total = _sm.sequence_log_prob(logits, targets, mask)
    count = mask.sum(-1) if mask is not None else torch.full_like(total, targets.shape[-1])
    return total / count.to(total.dtype)


def sequence_log_prob_shifted(logits, targets, mask=None):
    return _sm.sequence_log_prob(logits, targets.roll(1, dims=-1), mask)


# --- notebook 04 -----------------------------------------------------------
def causal_mask_transposed(T, device=None):
    return attention.causal_mask(T, device).T.contiguous()


def causal_mask_strict(T, device=None):
    return torch.ones((T, T), dtype=torch.bool, device=device).tril(-1)


def additive_mask_inverted(mask, dtype=torch.float32):
    return attention.additive_mask(~mask, dtype)


def additive_mask_large_negative(mask, dtype=torch.float32):
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, -1e9)


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


def attention_softmax_over_queries(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-2).nan_to_num(0.0)
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
