"""The self-check questions: graded through the same ``check`` as the exercises, their answers shipped only as salted
digests, every known wrong answer named with what it misunderstands."""
import inspect
import os
import re

import pytest
import torch

import learner.check
from learner.check import EXERCISES, CheckFailed, check
from learner.check.cases.common import Choice, Decimal, IntTuple, Integer, NotAnAnswer, answer_digest
from learner.syllabus import NOTEBOOKS, QUESTION_POINTS, cell_points
from learner.check.shipped import load_expected
from helpers import as_learner, failure, reference_as_learner
from grader import reference

QUESTIONS = [name for name, ex in EXERCISES.items() if ex.answer is not None]
WRONG = [(name, m, why) for name in QUESTIONS for m, why in EXERCISES[name].mistakes]


def test_every_notebook_asks_questions_and_the_table_lists_them_after_its_exercises():
    for folder, nb in NOTEBOOKS.items():
        assert len(nb.questions) >= 2, f"{folder} asks {len(nb.questions)} questions"
        assert list(nb.exercises)[-len(nb.questions):] == list(nb.questions)
        for q in nb.questions:
            assert EXERCISES[q].answer is not None and EXERCISES[q].notebook == folder
            assert learner.check.cells_of(q) == ["basic"] and cell_points(q, "basic") == QUESTION_POINTS
    assert sorted(QUESTIONS) == sorted(q for nb in NOTEBOOKS.values() for q in nb.questions)


@pytest.mark.parametrize("name", QUESTIONS)
def test_the_right_answer_passes_the_visible_and_the_hidden_check(name, capsys):
    for part in learner.check.parts_of(name):
        check(name, reference_as_learner(name), part)
    assert capsys.readouterr().out.count(": right.") == 2


@pytest.mark.parametrize("name", QUESTIONS)
def test_the_untouched_answer_cell_is_named_not_implemented(name):
    def stub():
        raise NotImplementedError()
    stub.__name__ = name
    assert "is not implemented yet" in failure(name, stub, "basic")


@pytest.mark.parametrize("name,mistake,why", WRONG, ids=[m for _, m, _ in WRONG])
def test_each_known_wrong_answer_fails_both_checks_and_is_named(name, mistake, why):
    function = mistake.split(":")[1]
    wrong = as_learner({function: inspect.getsource(reference.resolve(mistake, "solutions.mistakes"))})[function]
    for part in learner.check.parts_of(name):
        message = failure(name, wrong, part)
        assert "is not the right answer" in message and why in message, message


@pytest.mark.parametrize("name", QUESTIONS)
def test_wrong_answers_are_distinct_from_the_right_one_and_from_each_other(name):
    ex = EXERCISES[name]
    right = ex.answer.canonical(reference.resolve(ex.ref)())
    wrongs = [ex.answer.canonical(reference.resolve(m, "solutions.mistakes")()) for m, _ in ex.mistakes]
    assert right not in wrongs and len(set(wrongs)) == len(wrongs), (right, wrongs)
    assert len(wrongs) >= (len(ex.answer.letters) - 1 if isinstance(ex.answer, Choice) else 2)  # every wrong choice


# the slips a learner is likely to make on a count or a shape (an off-by-one, a swapped axis, the wrong one of two
# lengths), each of which must get a hint of its own
LIKELY_SLIPS = {
    "answer_causal_pairs": [28, 15, 36],          # T + 1 positions; the diagonal left out; every pair
    "answer_next_token_targets": [12],            # T predictions, forgetting the last token has no target
    "answer_alignment_weights": [100, 121],       # T_x x T_x, T_y x T_y instead of T_y x T_x
    "answer_positions_without_cache": [105, 14],  # each step counted with its new token; the cache's count
    "answer_context_shape": [(32, 4), (4, 9), (4, 9, 32)],  # swapped axes; the ids' shape; every state
    "answer_cross_weights_shape": [(2, 4, 7, 5), (2, 5, 4, 7), (2, 4, 7, 7)],  # swapped; heads after tokens; encoder's
}


@pytest.mark.parametrize("name", sorted(LIKELY_SLIPS))
def test_each_likely_slip_gets_a_hint_of_its_own(name):
    """An off-by-one or a swapped axis is named with what it misunderstands, each slip with its own words."""
    ex = EXERCISES[name]
    hints = {ex.answer.canonical(reference.resolve(m, "solutions.mistakes")()): why for m, why in ex.mistakes}
    assert len(set(hints.values())) == len(hints), "two wrong answers share one hint"
    assert [slip for slip in LIKELY_SLIPS[name] if ex.answer.canonical(slip) not in hints] == []


@pytest.mark.parametrize("name", [q for q in QUESTIONS if "shape" in q])
def test_a_shape_question_names_its_last_two_axes_swapped(name):
    ex = EXERCISES[name]
    right = list(reference.resolve(ex.ref)())
    swapped = tuple(right[:-2] + right[:-3:-1])
    assert ex.answer.canonical(swapped) in {ex.answer.canonical(reference.resolve(m, "solutions.mistakes")())
                                            for m, _ in ex.mistakes}


@pytest.mark.parametrize("name", [q for q in QUESTIONS if not isinstance(EXERCISES[q].answer, Choice)])
def test_an_answer_that_no_mistake_explains_is_wrong_in_plain_words(name):
    """A wrong answer that is none of the known wrong ones gets the plain message, and no mistake is named (every
    wrong letter of a multiple choice is a known one, so only the other kinds have such answers)."""
    ex = EXERCISES[name]
    taken = {ex.answer.canonical(reference.resolve(ex.ref)())} | {
        ex.answer.canonical(reference.resolve(m, "solutions.mistakes")()) for m, _ in ex.mistakes}
    other = next(v for v in {Integer: [123457, 123458], Decimal: [123.25, 124.5],
                             IntTuple: [(9, 9, 9), (8, 8, 8)]}[type(ex.answer)] if ex.answer.canonical(v) not in taken)
    message = failure(name, lambda: other, "basic")
    assert "is not the right answer; read the question and its section again" in message, message
    assert not any(why in message for _, why in ex.mistakes), message


@pytest.mark.parametrize("name", QUESTIONS)
def test_the_shipped_file_holds_salted_digests_not_the_answers(name):
    """What ships for the visible check is the digest of the canonical answer, salted with the question's name, and
    the digests of the known wrong answers: the answer is nowhere in it in clear."""
    ex = EXERCISES[name]
    shipped = load_expected(name)["parts"]
    (record,) = shipped["basic"]
    assert shipped["edge"] == [] and shipped["errors"] == []
    right = ex.answer.canonical(reference.resolve(ex.ref)())
    assert record["expected"] == answer_digest(name, right) and len(record["expected"]) == 64
    assert record["expected"] != answer_digest(name + "x", right)  # the salt includes the question
    for m, digest in record["mistakes"].items():
        assert digest == answer_digest(name, ex.answer.canonical(reference.resolve(m, "solutions.mistakes")()))
    hexdigest = re.compile(r"[0-9a-f]{64}")
    assert record["args"] == () and record["kwargs"] == {} and record["what"] == "your answer"
    assert all(hexdigest.fullmatch(d) for d in [record["expected"], *record["mistakes"].values()])  # nothing else


@pytest.mark.parametrize("kind,good,bad", [
    (Choice("a", "b", "c", "d"), [("b", "b"), ("B", "b"), (" (b) ", "b"), ("d)", "d")],
     ["e", "", 2, None, ["b"], "ab"]),
    (Integer(), [(21, "21"), (21.0, "21"), (torch.tensor(21), "21"), (torch.tensor([21.0]), "21")],
     [21.5, "21", True, float("nan"), torch.ones(2), None]),
    (Decimal(2), [(0.5065, "0.51"), (0.51, "0.51"), (torch.tensor(0.5065, dtype=torch.float64), "0.51"), (1, "1.00")],
     ["0.51", float("inf"), None]),
    (IntTuple(), [((2, 4, 5, 7), "(2, 4, 5, 7)"), ([4, 32], "(4, 32)"), (torch.Size([4, 32]), "(4, 32)"),
                  ((32,), "(32)")],
     [(2.0, 3), "(4, 32)", (True, 2), 4]),
], ids=["choice", "integer", "decimal", "int-tuple"])
def test_an_answer_is_compared_in_one_canonical_form_and_a_value_of_another_kind_is_refused(kind, good, bad):
    for value, text in good:
        assert kind.canonical(value) == text
    for value in bad:
        with pytest.raises(NotAnAnswer, match="return "):
            kind.canonical(value)


def test_a_value_of_the_wrong_kind_fails_saying_what_kind_the_question_wants():
    message = failure("answer_causal_pairs", lambda: "21", "basic")
    assert "return a whole number (an int), not '21'" in message
    assert 'one of "a", "b", "c", "d"' in failure("answer_why_scale", lambda: 2, "hidden-basic")


def test_the_hidden_check_grades_without_the_shipped_file(monkeypatch, tmp_path):
    """hidden-basic compares with the live reference: a learner who edits the shipped digest gains nothing."""
    name = "answer_causal_pairs"
    monkeypatch.setattr(learner.check.runner, "load_expected", lambda n: {"parts": {"basic": [
        {"what": "your answer", "args": (), "kwargs": {}, "raises": None, "expected": answer_digest(n, "36"),
         "message": "", "mistakes": {}}]}})
    check(name, lambda: 36, "basic")  # the visible check believes the edited file
    with pytest.raises(CheckFailed, match="36 is not the right answer"):
        check(name, lambda: 36, "hidden-basic")
    assert os.path.exists(learner.check.expected_path(name))
