"""Known mistakes of notebook 02 (dot products): wrong variants of ``solutions/dot_products.py``.

The checks run them on the same inputs as the learner's function; when the
learner's output matches one of them, the failure message names the mistake.
Each is one edit away from a correct answer; some call the reference itself (the
tests compile them as learner code calling the learner's own functions).
"""


import math

import torch


def scores_keys_first(Q, K):
    return K @ Q.transpose(-2, -1)


def project_k_v_swapped(X, W_Q, W_K, W_V):
    return X @ W_Q.T, X @ W_V.T, X @ W_K.T


def project_qkv_no_transpose(X, W_Q, W_K, W_V):
    """The (out, D) matrices used as they are: X @ W_Q raises unless d_k = D, and is wrong when it does not."""
    return X @ W_Q, X @ W_K, X @ W_V


def project_q_no_transpose(X, W_Q, W_K, W_V):
    """The same slip made once, for W_Q alone (the other two transposed): named as the one above."""
    return X @ W_Q, X @ W_K.T, X @ W_V.T


def project_k_no_transpose(X, W_Q, W_K, W_V):
    return X @ W_Q.T, X @ W_K, X @ W_V.T


def project_v_no_transpose(X, W_Q, W_K, W_V):
    return X @ W_Q.T, X @ W_K.T, X @ W_V


def project_qk_no_transpose(X, W_Q, W_K, W_V):
    """The slip made twice, the third matrix transposed: named as the ones above."""
    return X @ W_Q, X @ W_K, X @ W_V.T


def project_qv_no_transpose(X, W_Q, W_K, W_V):
    return X @ W_Q, X @ W_K.T, X @ W_V


def project_kv_no_transpose(X, W_Q, W_K, W_V):
    return X @ W_Q.T, X @ W_K, X @ W_V


def scaled_scores_no_sqrt(Q, K):
    return Q @ K.transpose(-2, -1)


def scaled_scores_by_d_k(Q, K):
    return Q @ K.transpose(-2, -1) / Q.shape[-1]


def scaled_scores_by_sqrt_T_k(Q, K):
    """Divided by the square root of the keys' count T_k instead of their width d_k."""
    return Q @ K.transpose(-2, -1) / math.sqrt(K.shape[-2])


def score_variance_all_pairs(d_k, n_pairs=20000, seed=0):
    """Every query scored against every key: an (n_pairs, n_pairs) matrix of scores instead of n_pairs."""
    if int(d_k) < 1:
        raise ValueError(f"d_k must be >= 1, got {d_k}")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64)
    raw = q @ k.T  # (n_pairs, n_pairs)
    return raw.var().item(), (raw / math.sqrt(d_k)).var().item()


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_why_scale_positive():
    return "b"


def answer_why_scale_sum_to_one():
    return "c"


def answer_why_scale_cheaper():
    return "d"


def answer_score_std_variance():
    return 64


def answer_score_std_scaled():
    return 1
