"""Notebook 10, the capstone: cases and known mistakes of the prefix-LM mask.

The known mistakes live in ``solutions/mistakes/capstone.py``. Random cases of the visible "basic"
part hold at least two rows and a prefix strictly inside the text in some row, so that a causal mask,
a bidirectional one, a prefix one token too long and a mask by query all differ from the right one.
"""
import torch

from .common import (REVERSED_LESSON, Case, Choice, Exercise, Integer, pick_int, question, register)


def _lengths(g, B, T, lo=0):
    return torch.tensor([pick_int(g, lo, T) for _ in range(B)], dtype=torch.long)


def _prefix_case(g, big):
    B = pick_int(g, 1, 4) if big else pick_int(g, 2, 4)
    T = pick_int(g, 0, 9) if big else pick_int(g, 3, 8)
    lengths = _lengths(g, B, T)
    if not big:
        lengths[0] = pick_int(g, 1, T - 2)  # a prefix with a later prefix token and a target token after it
    return Case(f"B={B}, T={T}, prefix lengths {lengths.tolist()}", (lengths, T))


def _prefix_edge():
    return [
        Case("prefix length 0: the causal mask", (torch.tensor([0, 0]), 5)),
        Case("prefix length T: the bidirectional mask", (torch.tensor([4]), 4)),
        Case("rows with different prefixes, [2, 5, 3]", (torch.tensor([2, 5, 3]), 6)),
        Case("T = 1", (torch.tensor([1, 0]), 1)),
        Case("T = 0: an empty (B, 0, 0) mask", (torch.tensor([0, 0]), 0)),
        Case("a prefix of 7 tokens in a text of 5: an error", (torch.tensor([2, 7]), 5), raises="ValueError"),
        Case("a prefix length of -1: an error", (torch.tensor([-1]), 4), raises="ValueError"),
        Case("T = -1: an error", (torch.tensor([0]), -1), raises="ValueError"),
        Case("T = -1 and no rows: an error", (torch.zeros(0, dtype=torch.long), -1), raises="ValueError"),
    ]


register(
    __name__,
    Exercise("prefix_lm_mask", "capstone:prefix_lm_mask", _prefix_case, _prefix_edge,
             mistakes=[("capstone:prefix_lm_mask_reversed", REVERSED_LESSON.format(
                           fix="True where key j may be read: j <= i, or j in the prefix, j < ℓ_b")),
                       ("capstone:prefix_lm_mask_causal_only",
                        "this is the fully causal mask: inside the prefix every token may also read the prefix "
                        "tokens after it (key j < ℓ_b)"),
                       ("capstone:prefix_lm_mask_all_bidirectional",
                        "every token reads every token, so the target reads its own future: only keys in the "
                        "prefix (j < ℓ_b) are open to all; after the prefix the mask stays causal (j <= i)"),
                       ("capstone:prefix_lm_mask_one_too_many",
                        "the prefix has ℓ_b tokens, positions 0 .. ℓ_b - 1: open keys j < ℓ_b, not j <= ℓ_b (that "
                        "lets the source read the first target token)"),
                       ("capstone:prefix_lm_mask_queries_in_prefix",
                        "the prefix's queries were opened instead of its keys, so the source reads the target: "
                        "[b, i, j] is open when key j is in the prefix, whatever the query i")],
             n_basic=8, n_hidden=16),
    question("answer_prefix_reads_later_source", "capstone:answer_prefix_reads_later_source",
             Choice("a", "b", "c", "d"), wrong=[
        ("capstone:answer_prefix_reads_later_source_both",
         "the causal mask lets a token read only the tokens before it, source or not"),
        ("capstone:answer_prefix_reads_later_source_causal",
         "the causal mask is the one that blocks it: key 6 comes after query 5"),
        ("capstone:answer_prefix_reads_later_source_neither",
         "both tokens are in the prefix, which the prefix-LM mask opens both ways")]),
    question("answer_pairs_the_prefix_adds", "capstone:answer_pairs_the_prefix_adds", Integer(), wrong=[
        ("capstone:answer_pairs_the_prefix_adds_square",
         "25 is every pair inside the prefix; the causal mask already allows the 15 with j <= i"),
        ("capstone:answer_pairs_the_prefix_adds_with_diagonal",
         "15 are the pairs the causal mask already allows inside the prefix (j <= i); the new ones have j > i"),
        ("capstone:answer_pairs_the_prefix_adds_ordered",
         "each new pair (i, j) has j > i: count each of the ℓ (ℓ - 1) / 2 pairs once")]),
)
