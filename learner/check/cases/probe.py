"""Notebook 06's probe_accuracy: a word's vector at each depth, a linear probe of its sense fitted on some sentences
and scored on the others; its cases and its property."""

import torch

from .common import Case, F32, F64, dn, gen, learner_call, pick_dtype, pick_int, seeded_randn


# ---------------------------------------------------------------- probe_accuracy
def _probe_args(g, B, T, D, n_train, dtype=F64, signal=1.0, at=None):
    """B sentences of T positions; the word, at a random position (or at ``at``), carries its sense along one
    direction (+/- ``signal`` against noise of variance 1: the probe gets some test sentences wrong), every other
    vector is noise. ``n_train`` of the sentences, both senses among them, fit the probe; the rest test it."""
    senses = torch.randint(0, 2, (B,), generator=g)
    senses[0], senses[1] = 0, 1  # both senses among the training sentences
    positions = torch.randint(0, T, (B,), generator=g) if at is None else torch.full((B,), at, dtype=torch.long)
    hidden = seeded_randn(g, B, T, D, dtype=dtype)
    direction = seeded_randn(g, D, dtype=dtype)
    direction = direction / direction.norm()
    hidden[torch.arange(B), positions] += (2 * senses - 1).to(dtype)[:, None] * signal * direction
    is_train = torch.zeros(B, dtype=torch.bool)
    is_train[:n_train] = True
    order = torch.randperm(B, generator=g)
    return hidden[order], positions[order], senses[order], is_train[order]


def probe_case(g, big):
    dtype = pick_dtype(g)
    T, D = pick_int(g, 1 if big else 3, 8), pick_int(g, 1 if big else 2, 6)
    n_train = pick_int(g, 2, 12 if big else 6)  # basic: few training sentences, so that a leak shows
    n_test = pick_int(g, 1 if big else 10, 24)
    args = _probe_args(g, n_train + n_test, T, D, n_train, dtype)
    return Case(f"B={n_train + n_test} sentences ({n_train} to fit the probe, {n_test} to test it), T={T}, D={D}, "
                f"{dn(dtype)}", args)


def probe_edge():
    g = gen(71)
    hidden, positions, senses, is_train = _probe_args(g, 16, 5, 4, 6)
    far = _probe_args(g, 12, 4, 3, 4, signal=50.0)
    first = _probe_args(g, 12, 5, 3, 5, at=0)
    last = _probe_args(g, 12, 5, 3, 5, at=4)
    swapped = hidden.clone()  # the test sentences' words moved to the other sense's side
    test = ~is_train
    word = swapped[torch.arange(16), positions]
    mean_0, mean_1 = word[is_train & (senses == 0)].mean(0), word[is_train & (senses == 1)].mean(0)
    swapped[torch.arange(16)[test], positions[test]] = torch.where((senses[test] == 1)[:, None], mean_0, mean_1)
    one_test = is_train.clone()
    one_test[int(test.nonzero()[0])] = True
    one_test[int(test.nonzero()[-1])] = False
    one_test[test.nonzero()[1:-1, 0]] = True
    return [
        Case("the senses far apart: every test sentence right", far),
        Case("the word at position 0 in every sentence", first),
        Case("the word at the last position (T - 1) in every sentence", last),
        Case("each test word lies on the other sense's mean: the probe gets none right (scored on its own training "
             "sentences it would get them all)", (swapped, positions, senses, is_train)),
        Case("one test sentence", (hidden, positions, senses, one_test)),
        Case("D = 1", _probe_args(g, 14, 3, 1, 6)),
        Case("float32", _probe_args(g, 14, 4, 3, 5, dtype=F32)),
        Case("a test word exactly as near to both sense means: sense 0 (sense 1 only when strictly nearer)",
             _tie()),
        Case("no sentence of sense 1 to fit the probe: an error",
             (hidden, positions, senses, is_train & (senses == 0)), raises="ValueError"),
        Case("no sentence of sense 0 to fit the probe: an error",
             (hidden, positions, senses, is_train & (senses == 1)), raises="ValueError"),
        Case("a negative position (-1): an error",
             (hidden, positions.masked_fill(torch.arange(16) == 3, -1), senses, is_train), raises="ValueError"),
        Case("no sentence left to test: an error", (hidden, positions, senses, torch.ones_like(is_train)),
             raises="ValueError"),
        Case("a position outside its sentence (T = 5): an error",
             (hidden, positions.masked_fill(torch.arange(16) == 3, 5), senses, is_train), raises="ValueError"),
        Case("a sense of 2: an error", (hidden, positions, senses.masked_fill(torch.arange(16) == 3, 2), is_train),
             raises="ValueError"),
        Case("positions for 15 sentences, hidden for 16: the shapes disagree, an error",
             (hidden, positions[:15], senses, is_train), raises="ValueError"),
    ]


def _tie():
    """Sense 0's mean (0, 0), sense 1's (2, 0); the test words (1, 0.5), of sense 0, at the same distance from both
    (exactly, in float64), and (3, 0), of sense 1: the probe gets both right only when a tie goes to sense 0."""
    words = torch.tensor([[0.0, 0.0], [2.0, 0.0], [1.0, 0.5], [3.0, 0.0]], dtype=F64)
    return (words[:, None, :], torch.zeros(4, dtype=torch.long), torch.tensor([0, 1, 0, 1]),
            torch.tensor([True, True, False, False]))


def probe_reads_the_word_only(fn):
    """Only the word's vector, hidden[b, positions[b]], decides: the other positions' vectors change nothing."""
    g = gen(72)
    hidden, positions, senses, is_train = _probe_args(g, 20, 6, 4, 8)
    other = seeded_randn(g, 20, 6, 4, scale=3.0)
    at_word = torch.zeros(20, 6, dtype=torch.bool)
    at_word[torch.arange(20), positions] = True
    moved = torch.where(at_word[:, :, None], hidden, other)
    out = learner_call(fn, (hidden, positions, senses, is_train))
    out_moved = learner_call(fn, (moved, positions, senses, is_train))
    if out is None or out_moved is None or type(out.value) not in (int, float) or type(out_moved.value) not in (
            int, float):
        return None  # reported by the case checks
    if abs(float(out.value) - float(out_moved.value)) > 1e-9:
        return (f"the accuracy changed ({float(out.value):.4g} to {float(out_moved.value):.4g}) when only the vectors "
                f"at positions other than the word's changed: the probe must read the word's vector, "
                f"hidden[b, positions[b]], and nothing else")
    return None
