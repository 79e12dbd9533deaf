"""Known mistakes of notebook 10 (the capstone): wrong variants of ``solutions/capstone.py``.

Each is built from torch only, so it can also be compiled as learner code in the tests, and keeps the
signature of the reference it imitates.
"""
import torch


def _check(prefix_lengths, T):
    if T < 0:
        raise ValueError(f"T must be >= 0, got {T}")
    if prefix_lengths.numel() and (int(prefix_lengths.min()) < 0 or int(prefix_lengths.max()) > T):
        raise ValueError(f"prefix lengths must lie in 0 .. T={T}, got {prefix_lengths.tolist()}")
    return torch.arange(T, device=prefix_lengths.device)


# --- prefix_lm_mask ----------------------------------------------------------
def prefix_lm_mask_reversed(prefix_lengths, T):
    """The right pairs with the polarity reversed: True where attending is blocked."""
    pos = _check(prefix_lengths, T)
    return ~((pos[None, :] <= pos[:, None])[None] | (pos[None, :] < prefix_lengths[:, None])[:, None, :])


def prefix_lm_mask_causal_only(prefix_lengths, T):
    """The fully causal mask: the prefix reads only backwards."""
    pos = _check(prefix_lengths, T)
    return (pos[None, :] <= pos[:, None])[None].expand(prefix_lengths.shape[0], T, T).clone()


def prefix_lm_mask_all_bidirectional(prefix_lengths, T):
    """Every token reads every token: the target sees its own future."""
    _check(prefix_lengths, T)
    return torch.ones(prefix_lengths.shape[0], T, T, dtype=torch.bool, device=prefix_lengths.device)


def prefix_lm_mask_one_too_many(prefix_lengths, T):
    """The prefix taken as p + 1 tokens: the first target token is read by the prefix."""
    pos = _check(prefix_lengths, T)
    return (pos[None, :] <= pos[:, None])[None] | (pos[None, :] <= prefix_lengths[:, None])[:, None, :]


def prefix_lm_mask_queries_in_prefix(prefix_lengths, T):
    """The prefix's *queries* read everything: the source reads the target."""
    pos = _check(prefix_lengths, T)
    return (pos[None, :] <= pos[:, None])[None] | (pos[None, :] < prefix_lengths[:, None])[:, :, None]


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_prefix_reads_later_source_both():
    return "a"


def answer_prefix_reads_later_source_causal():
    return "c"


def answer_prefix_reads_later_source_neither():
    return "d"


def answer_pairs_the_prefix_adds_square():
    return 25


def answer_pairs_the_prefix_adds_with_diagonal():
    return 15


def answer_pairs_the_prefix_adds_ordered():
    return 20
