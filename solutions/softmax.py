"""Notebook 03: softmax, temperature, log-softmax and the probability of a sequence."""
import torch


def softmax(x, dim=-1, temperature=1.0):
    """Numerically stable softmax of ``x / temperature`` along ``dim``.

    alpha_j = exp(x_j / tau) / sum_j' exp(x_j' / tau), computed after subtracting
    the maximum so that huge logits do not overflow. Entries equal to -inf get
    weight 0; a slice whose entries are all -inf (nothing to attend to) gives
    all zeros rather than NaN.

    Args:
        x: float tensor of any shape.
        dim: the axis that sums to 1.
        temperature: tau > 0. tau -> 0 approaches a one-hot argmax, tau -> inf
            approaches the uniform distribution.

    Returns:
        tensor with x's shape, dtype and device.
    """
    ### BEGIN SOLUTION
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = x / temperature
    if z.shape[dim] == 0:  # nothing to normalise over
        return torch.zeros_like(z)
    m = z.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # all -inf slice: avoid inf - inf
    e = torch.exp(z - m)
    total = e.sum(dim=dim, keepdim=True)
    return torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))
    ### END SOLUTION


def log_softmax(x, dim=-1, temperature=1.0):
    """Numerically stable log of ``softmax(x, dim, temperature)``.

    log alpha_j = z_j - m - log sum_j' exp(z_j' - m) with z = x / tau and m the
    maximum of z. Finite for any finite input, however large; -inf where the
    input is -inf.

    Args and returns as ``softmax``.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = x / temperature
    if z.shape[dim] == 0:
        return torch.zeros_like(z)
    m = z.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    lse = torch.log(torch.exp(z - m).sum(dim=dim, keepdim=True))
    return torch.where(torch.isfinite(lse), z - m - lse, torch.full_like(z, float("-inf")))
    ### END SOLUTION


def sequence_log_prob(logits, targets, mask=None):
    """log P(x_1..x_T) = sum_t log P(x_t | x_<t), the chain rule in log space.

    Args:
        logits: (B, T, V) scores; row t is the model's prediction for token t.
        targets: LongTensor (B, T), the tokens that actually came.
        mask: optional BoolTensor (B, T), True for real tokens; positions with
            False (padding) add nothing, whatever id they hold.

    Returns:
        (B,) tensor of log-probabilities (<= 0), in logits' dtype.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T, V) and targets (B, T); got {tuple(logits.shape)} "
                         f"and {tuple(targets.shape)}")
    if mask is not None and mask.shape != targets.shape:
        raise ValueError(f"mask must have the shape of targets {tuple(targets.shape)}, got {tuple(mask.shape)}")
    if targets.dtype != torch.long:
        raise ValueError(f"targets must be token ids (torch.long), got {targets.dtype}")
    if mask is not None:
        targets = targets.masked_fill(~mask, 0)  # padding may hold any id (even -100); it is not scored
    log_p = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    picked = log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    if mask is not None:
        picked = picked.masked_fill(~mask, 0.0)
    return picked.sum(dim=-1)  # (B,)
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_temperature_top_probability():
    """Your answer to the question above: a number (compared to 2 decimal places)."""
    ### BEGIN SOLUTION
    return 0.51
    ### END SOLUTION


def answer_why_log_probabilities():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "d"
    ### END SOLUTION
