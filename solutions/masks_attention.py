"""Notebook 04: masks (True = may attend), the additive mask M and masked attention."""
import math

import torch


def bidirectional_mask(T_q, T_k, device=None):
    """The encoder's mask: every query may attend to every key.

    Returns:
        BoolTensor (T_q, T_k), all True, on ``device``.
    """
    ### BEGIN SOLUTION
    if T_q < 0 or T_k < 0:
        raise ValueError(f"lengths must be >= 0, got T_q={T_q}, T_k={T_k}")
    return torch.ones((T_q, T_k), dtype=torch.bool, device=device)
    ### END SOLUTION


def causal_mask(T, device=None):
    """The decoder's mask: position i may attend to positions j <= i only.

    Returns:
        BoolTensor (T, T), lower-triangular True (diagonal included), on ``device``.
    """
    ### BEGIN SOLUTION
    if T < 0:
        raise ValueError(f"T must be >= 0, got {T}")
    return torch.ones((T, T), dtype=torch.bool, device=device).tril()
    ### END SOLUTION


def padding_mask(key_valid):
    """Turn a per-token validity mask into an attention mask over keys.

    Args:
        key_valid: BoolTensor (B, T_k), True for real tokens (as ``pad_batch`` returns).

    Returns:
        BoolTensor (B, 1, T_k): query i of sequence b may attend to key j iff
        key j is real; broadcasts against (B, T_q, T_k).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if key_valid.dim() != 2 or key_valid.dtype != torch.bool:
        raise ValueError(f"key_valid must be a (B, T_k) bool tensor, got {tuple(key_valid.shape)} "
                         f"of {key_valid.dtype}")
    return key_valid[:, None, :]  # (B, 1, T_k)
    ### END SOLUTION


def combine_masks(*masks):
    """A pair may attend only if every mask allows it (logical AND, broadcasting).

    ``None`` entries are skipped; with no mask at all the result is None.
    Example: ``combine_masks(causal_mask(T), padding_mask(valid))`` is (B, T, T).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    result = None
    for m in masks:
        if m is None:
            continue
        if m.dtype != torch.bool:
            raise ValueError(f"masks must be bool tensors (True = may attend), got {m.dtype}")
        result = m if result is None else result & m
    return result
    ### END SOLUTION


def additive_mask(mask, dtype=torch.float32):
    """The notes' M: 0 where attending is allowed, -inf where it is blocked.

    Args:
        mask: BoolTensor of any shape, True = may attend.
        dtype: floating dtype of the result.

    Returns:
        tensor of mask's shape and device, values in {0, -inf}.
    """
    ### BEGIN SOLUTION
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}")
    if not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating dtype (it has to hold -inf), got {dtype}")
    zeros = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    return zeros.masked_fill(~mask, float("-inf"))
    ### END SOLUTION


def masked_attention(Q, K, V, mask=None):
    """Masked scaled dot-product attention: softmax(Q K^T / sqrt(d_k) + M) V.

    Args:
        Q: queries (..., T_q, d_k).
        K: keys (..., T_k, d_k).
        V: values (..., T_k, d_v).
        mask: optional BoolTensor broadcastable to (..., T_q, T_k), True = may attend.

    Returns:
        out: (..., T_q, d_v), out_i = sum_j alpha_ij v_j.
        weights: (..., T_q, T_k), the alpha_ij; each row sums to 1 over the
            allowed keys. A query with no allowed key (a fully masked row, or
            T_k = 0) gets zero weights and a zero output, never NaN.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if Q.shape[-1] != K.shape[-1]:
        raise ValueError(f"Q and K must have the same width d_k, got {Q.shape[-1]} and {K.shape[-1]}")
    if K.shape[-2] != V.shape[-2]:
        raise ValueError(f"K and V must have the same length T_k, got {K.shape[-2]} and {V.shape[-2]}")
    T_q, T_k = Q.shape[-2], K.shape[-2]
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])  # (..., T_q, T_k)
    if mask is not None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor (True = may attend), got {mask.dtype}")
        try:
            fits = torch.broadcast_shapes(mask.shape, scores.shape) == scores.shape
        except RuntimeError:
            fits = False
        if not fits:
            raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores' "
                             f"shape (..., T_q={T_q}, T_k={T_k}) = {tuple(scores.shape)}")
        scores = scores.masked_fill(~mask, float("-inf"))
    m = scores.amax(dim=-1, keepdim=True) if T_k > 0 else scores.sum(-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # fully masked row: avoid inf - inf
    e = torch.exp(scores - m)  # blocked pairs become exactly 0
    total = e.sum(dim=-1, keepdim=True)
    weights = torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
    out = weights @ V  # (..., T_q, d_v)
    return out, weights
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_causal_pairs():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 21
    ### END SOLUTION


def answer_why_minus_infinity():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "b"
    ### END SOLUTION
