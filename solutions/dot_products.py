"""Notebook 02: dot products, the projections W_Q, W_K, W_V and the sqrt(d_k) scale."""
import math

import torch


def pairwise_scores(Q, K):
    """Raw scores s_ij = q_i . k_j for every query i and key j.

    Args:
        Q: queries (..., T_q, d_k).
        K: keys (..., T_k, d_k); leading dimensions broadcast with Q's.

    Returns:
        S: (..., T_q, T_k) with S[..., i, j] = sum_d Q[..., i, d] * K[..., j, d].

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same width d_k, got Q (..., {Q.shape[-1]}) "
                         f"and K (..., {K.shape[-1]})")
    return Q @ K.transpose(-2, -1)  # (..., T_q, T_k)
    ### END SOLUTION


def project_qkv(X, W_Q, W_K, W_V):
    """The three roles of each token: q_i = W_Q e_i, k_i = W_K e_i, v_i = W_V e_i.

    Args:
        X: token vectors (..., T, D), one row per token.
        W_Q: (d_k, D), W_K: (d_k, D), W_V: (d_v, D) -- the notes' matrices,
            which multiply a column vector e_i (the layout of nn.Linear.weight).

    Returns:
        Q (..., T, d_k), K (..., T, d_k), V (..., T, d_v).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    D = X.shape[-1]
    for name, W in (("W_Q", W_Q), ("W_K", W_K), ("W_V", W_V)):
        if W.dim() != 2 or W.shape[1] != D:
            raise ValueError(f"{name} must have shape (out, D={D}), got {tuple(W.shape)}")
    if W_Q.shape[0] != W_K.shape[0]:
        raise ValueError(f"W_Q and W_K must give the same width d_k, got {W_Q.shape[0]} and {W_K.shape[0]}")
    Q = X @ W_Q.T  # (..., T, d_k)
    K = X @ W_K.T  # (..., T, d_k)
    V = X @ W_V.T  # (..., T, d_v)
    return Q, K, V
    ### END SOLUTION


def scaled_scores(Q, K):
    """Scores divided by sqrt(d_k): s'_ij = q_i . k_j / sqrt(d_k).

    Args:
        Q: (..., T_q, d_k); K: (..., T_k, d_k).

    Returns:
        (..., T_q, T_k).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same width d_k, got Q (..., {Q.shape[-1]}) "
                         f"and K (..., {K.shape[-1]})")
    d_k = Q.shape[-1]
    return (Q @ K.transpose(-2, -1)) / math.sqrt(d_k)  # (..., T_q, T_k)
    ### END SOLUTION


def score_variance(d_k, n_pairs=20000, seed=0):
    """Measure how the spread of q . k grows with d_k, and how sqrt(d_k) cancels it.

    Draw ``n_pairs`` pairs of vectors q, k in R^{d_k} with independent standard
    normal entries (from ``torch.Generator().manual_seed(seed)``) and return the
    sample variance of the raw scores q . k and of the scaled scores
    q . k / sqrt(d_k), as a tuple of two Python floats.

    In theory the first is d_k and the second is 1.
    """
    ### BEGIN SOLUTION
    if int(d_k) < 1:
        raise ValueError(f"d_k must be >= 1, got {d_k}")
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(n_pairs, d_k, generator=g, dtype=torch.float64)
    raw = (q * k).sum(-1)  # (n_pairs,)
    return raw.var().item(), (raw / math.sqrt(d_k)).var().item()
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_why_scale():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "a"
    ### END SOLUTION


def answer_score_std():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 8
    ### END SOLUTION
