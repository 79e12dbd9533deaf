"""Notebook 10, the capstone: the prefix-LM mask of a decoder-only model that reads the source as a prefix.

A decoder-only transformer translates by reading ``<bos> source = target <eos>`` as one text. With the
fully causal mask (notebook 04) every token reads only the tokens before it, the source too. A prefix-LM
(T5's "prefix LM", UniLM) lets the prefix, ``<bos> source =``, read itself both ways, as an encoder would,
while the target stays causal: then one stack of blocks does the encoder's and the decoder's work.
Masks are bool, True = may attend.
"""
import torch


def prefix_lm_mask(prefix_lengths, T):
    """The prefix-LM mask of a batch: query i may attend to key j when j <= i or when j is in the prefix.

    Args:
        prefix_lengths: LongTensor (B,), the prefix length ℓ_b of each row (0 <= ℓ_b <= T).
        T: the text length.

    Returns:
        BoolTensor (B, T, T), [b, i, j] True when j <= i or j < ℓ_b: the prefix reads itself both ways,
        every later token reads the prefix and the tokens before it, nothing reads a later token outside the
        prefix. ℓ_b = 0 gives the causal mask, ℓ_b = T the bidirectional one.

    Raises:
        ValueError when a prefix length is below 0 or above T, or when T < 0.

    Device: make every tensor you create on the inputs' device (``device=prefix_lengths.device``).
    """
    ### BEGIN SOLUTION
    if T < 0:
        raise ValueError(f"T must be >= 0, got {T}")
    if prefix_lengths.numel() and (int(prefix_lengths.min()) < 0 or int(prefix_lengths.max()) > T):
        raise ValueError(f"prefix lengths must lie in 0 .. T={T}, got {prefix_lengths.tolist()}")
    positions = torch.arange(T, device=prefix_lengths.device)
    causal = positions[None, :] <= positions[:, None]  # (T, T): j <= i
    in_prefix = positions[None, :] < prefix_lengths[:, None]  # (B, T): key j is in row b's prefix
    return causal[None] | in_prefix[:, None, :]  # (B, T, T)
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_prefix_reads_later_source():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "b"
    ### END SOLUTION


def answer_pairs_the_prefix_adds():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 10
    ### END SOLUTION
