"""Notebook 06's probe_accuracy: each known mistake (a probe scored on the sentences it was fitted on, the test
sentences let into the sense means, the word's vector read at the wrong position) is named on the visible basic
part in words, and in the words the class report collects; the property names a probe that reads other positions."""
import pytest

from coursekit.class_report import MISTAKE
from learner.check import EXERCISES
from learner.check.cases import encoder as ex6
from helpers import failure, learner_namespace, mistakes_as_learner
import learner.check

NAME = "probe_accuracy"
MISTAKES = dict(EXERCISES[NAME].mistakes)


def as_learner(source):
    return learner_namespace("06_encoder", {NAME: source})[NAME]


def mistake_fn(mistake):
    """A known mistake compiled as a learner's cell (the grader refuses the reference's own functions)."""
    topic, name = mistake.split(":")
    return mistakes_as_learner(topic)[name]


@pytest.mark.parametrize("mistake", list(MISTAKES), ids=[m.split(":")[1] for m in MISTAKES])
def test_each_known_mistake_is_named_and_reaches_the_class_report(mistake):
    """The basic part names a known mistake on its first failing case, in the words the class report collects. (An
    accuracy is a ratio of small counts, so two wrong positions can score alike on one case; then the first of them
    is named. tests/learner/check/test_checks.py checks that each is the one named on some basic case.)"""
    message = failure(NAME, mistake_fn(mistake), "basic")
    named = [m.strip().rstrip(".") for m in MISTAKE.findall(message)]
    assert named and named[0] in [why.rstrip(".") for why in MISTAKES.values()], message
    wrong_place = {"last_position", "first_position", "mean_over_sentence", "token_before"}
    family = [why for m, why in MISTAKES.items() if (m.split("probe_accuracy_")[1] in wrong_place)
              == (mistake.split("probe_accuracy_")[1] in wrong_place)]
    assert named[0] in [why.rstrip(".") for why in family], message  # a wrong position is named as one


def test_a_probe_scored_on_its_training_sentences_is_told_so_on_the_edge_case_made_for_it():
    """The edge case whose test words lie on the other sense's mean: the honest probe scores 0, the one scored on its
    own training sentences 1, and the message says which mistake that is."""
    message = failure(NAME, mistake_fn("encoder:probe_accuracy_tested_on_train"), "edge")
    assert "scored on the sentences it was fitted on" in message, message


def test_a_probe_that_reads_the_whole_sentence_is_told_to_read_the_word():
    src = '''
def probe_accuracy(hidden, positions, senses, is_train):
    """Reads the last position's vector: right only when the word is last."""
    word = hidden.sum(dim=1)
    fit, test = is_train, ~is_train
    if not (fit & (senses == 0)).any() or not (fit & (senses == 1)).any() or not test.any():
        raise ValueError("both senses to fit, and a sentence to test")
    if ((positions < 0) | (positions >= hidden.shape[1])).any() or ((senses != 0) & (senses != 1)).any():
        raise ValueError("positions in 0 .. T-1, senses 0 or 1")
    m0, m1 = word[fit & (senses == 0)].mean(0), word[fit & (senses == 1)].mean(0)
    guess = (((word[test] - m1) ** 2).sum(-1) < ((word[test] - m0) ** 2).sum(-1)).long()
    return (guess == senses[test]).double().mean().item()
'''
    fn = as_learner(src)
    assert "the probe must read the word's vector" in ex6.probe_reads_the_word_only(fn)
    assert "FAILED" in failure(NAME, fn, "edge")
