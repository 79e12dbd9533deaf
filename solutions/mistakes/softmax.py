"""Known mistakes of notebook 03 (softmax): wrong variants of ``solutions/softmax.py``.

The checks run them on the same inputs as the learner's function; when the
learner's output matches one of them, the failure message names the mistake.
Each is one edit away from a correct answer; some call the reference itself (the
tests compile them as learner code calling the learner's own functions).
"""
import torch

from .. import softmax as _sm


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


def log_softmax_no_shift(x, dim=-1, temperature=1.0):
    """The log-sum-exp without the shift: exp(z) overflows to inf for large logits."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = x / temperature
    return z - torch.log(torch.exp(z).sum(dim=dim, keepdim=True))


def log_softmax_shift_outside_exp(x, dim=-1, temperature=1.0):
    """The maximum subtracted outside the exponential only: z - m - log(sum(exp(z))), off by m."""
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = x / temperature
    m = z.amax(dim=dim, keepdim=True)
    return z - m - torch.log(torch.exp(z).sum(dim=dim, keepdim=True))


def sequence_log_prob_ignores_mask(logits, targets, mask=None):
    return _sm.sequence_log_prob(logits, targets, None)


def sequence_log_prob_gathers_padding(logits, targets, mask=None):
    """The padding masked out of the sum, but its ids still used to index: an id outside [0, V) raises."""
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T, V) and targets (B, T); got {tuple(logits.shape)} "
                         f"and {tuple(targets.shape)}")
    if mask is not None and mask.shape != targets.shape:
        raise ValueError(f"mask must have the shape of targets {tuple(targets.shape)}, got {tuple(mask.shape)}")
    if targets.dtype != torch.long:
        raise ValueError(f"targets must be token ids (torch.long), got {targets.dtype}")
    picked = _sm.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    if mask is not None:
        picked = picked.masked_fill(~mask, 0.0)
    return picked.sum(dim=-1)


def sequence_log_prob_mean(logits, targets, mask=None):
    total = _sm.sequence_log_prob(logits, targets, mask)
    count = mask.sum(-1) if mask is not None else torch.full_like(total, targets.shape[-1])
    return total / count.to(total.dtype)


def sequence_log_prob_mean_when_masked(logits, targets, mask=None):
    """The same slip in the masked branch only (a row with nothing real divided by 1): the sum without a mask."""
    total = _sm.sequence_log_prob(logits, targets, mask)
    return total if mask is None else total / mask.sum(-1).clamp_min(1).to(total.dtype)


def sequence_log_prob_shifted(logits, targets, mask=None):
    return _sm.sequence_log_prob(logits, targets.roll(1, dims=-1), mask)


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_temperature_top_probability_tau_ignored():
    return 0.67


def answer_temperature_top_probability_tau_multiplied():
    return 0.87


def answer_temperature_top_probability_uniform():
    return 0.33


def answer_why_log_probabilities_faster():
    return "a"


def answer_why_log_probabilities_positive():
    return "b"


def answer_why_log_probabilities_exceeds_one():
    return "c"
