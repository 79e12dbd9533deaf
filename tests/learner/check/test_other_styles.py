"""Correct answers in other styles than the reference: the grader must accept every one of them.

For every exercise of ``learner.check.EXERCISES`` this file holds at least two correct answers written the way other
students might: einsum instead of matmul, explicit Python loops, library calls (torch.softmax, torch.logsumexp,
F.cross_entropy, F.scaled_dot_product_attention, pad_sequence, ...), preallocated outputs filled in a loop, float64
inside and a cast back, other validation code raising the same exception class. Each follows the rules of the
reference's docstring (shapes, dtype kept, new tensors on the inputs' device, zeros rather than NaN for a query with
nothing to attend to, the exception class for bad inputs) and uses nothing from ``solutions``, ``learner.blocks``
or ``learner.widgets``.

Each answer is compiled as a notebook cell would be: the read-only set-up (``LEARNER_PRELUDE``), the notebook's
ready-made parts (the course table's ``setup``, ``learner/syllabus.py``), the notebook's other answer cells (the reference's source, as a
learner who got them right), then the answer itself. It must pass all four parts: basic, edge, hidden-basic, hidden.
"""
import re
import textwrap

import pytest

import learner.check
from coursekit.sync import solution_source
from helpers import LEARNER_PRELUDE
from learner.check import EXERCISES, CheckFailed, check
from learner.syllabus import NOTEBOOKS


def learner_function(name, src):
    """Exercise ``name`` answered with ``src``, compiled in its notebook's namespace like a notebook cell."""
    notebook = EXERCISES[name].notebook
    ns = {"__name__": "__main__"}
    exec(LEARNER_PRELUDE, ns)
    exec(NOTEBOOKS[notebook].setup, ns)
    for other, ex in EXERCISES.items():
        if ex.notebook == notebook and other != name:
            exec(compile(solution_source(other), f"<cell {other}>", "exec"), ns)
    exec(compile(textwrap.dedent(src), f"<cell {name}>", "exec"), ns)
    return ns[name]


# exercise -> [(what makes the style different, source of the answer cell)], one module a notebook
from answer_styles import STYLES  # noqa: E402  (tests/learner/check/answer_styles/)

# (exercise, style) -> why the checks wrongly reject that correct answer (pytest.mark.xfail(strict=True))
UNFAIR = {}


def _slug(label):
    return re.sub(r"[^0-9A-Za-z.*]+", "-", label).strip("-")


PARAMS = [pytest.param(name, i, id=f"{name}-{_slug(label)}",
                       marks=[pytest.mark.xfail(strict=True, reason=UNFAIR[name, label])] if (name, label) in UNFAIR
                       else [])
          for name, styles in STYLES.items() for i, (label, _) in enumerate(styles)]


@pytest.mark.parametrize("name,index", PARAMS)
def test_a_correct_answer_in_another_style_passes_every_part(name, index):
    """A correct answer written another way than the reference (einsum, loops, library calls, preallocated
    outputs, float64 inside, other validation raising the same exception class), compiled as a notebook cell in its
    notebook's namespace, passes every part of its cells."""
    label, src = STYLES[name][index]
    fn = learner_function(name, src)
    failures = []
    for part in learner.check.parts_of(name):
        try:
            check(name, fn, part)
        except CheckFailed as exc:
            failures.append(str(exc))
    assert not failures, f"the grader rejected the correct style {label!r} of {name}:\n" + "\n---\n".join(failures)


def test_every_exercise_has_at_least_two_other_styles():
    """Each exercise of the grader has two or more correct styles above, with distinct labels."""
    assert set(STYLES) <= set(EXERCISES), sorted(set(STYLES) - set(EXERCISES))
    few = {name: len(STYLES.get(name, [])) for name in EXERCISES if len(STYLES.get(name, [])) < 2}
    assert not few, f"exercises with fewer than two styles: {few}"
    for name, styles in STYLES.items():
        labels = [label for label, _ in styles]
        assert len(set(labels)) == len(labels), f"{name} has two styles with the same label"


# ---------------------------------------------------------------- the same answers, graded as at grading time
# One style per notebook through the sandbox, the first and the second in turn: every style of every exercise passes
# in-process above, and what the sandbox adds (the definitions rebuilt from the cell's text, fresh copies of the
# inputs, the value sent back as plain data and compared on the trusted side) does not depend on how the body
# computes. Each notebook's reference goes the same way in the pipeline tests.
NOTEBOOK_STYLES = [(notebook, k % 2) for k, notebook in enumerate(NOTEBOOKS)]


@pytest.mark.pipeline  # grades a whole notebook through the sandbox, as grading does: make test, not test-fast
@pytest.mark.parametrize("notebook,index", NOTEBOOK_STYLES, ids=[f"{n}-style{i}" for n, i in NOTEBOOK_STYLES])
def test_a_notebook_answered_in_other_styles_passes_every_part_through_the_sandbox(notebook, index):
    """Every exercise of a notebook answered in its ``index``-th other style, held by a sandboxed worker as at
    grading time (the trusted side computes the reference's outputs and compares), passes all four parts."""
    from coursekit.sync import setup_source
    from grader import remote
    names = [name for name, ex in EXERCISES.items() if ex.notebook == notebook]
    cells = [textwrap.dedent(STYLES[name][index][1]) for name in names]
    with remote.Worker(setup_source(notebook), cells) as w:
        w.start()
        failures = []
        for name in names:
            fn = w.function(name, name)
            assert fn is not None, f"{name} was not defined in the sandbox: {w.define_errors}"
            for part in learner.check.parts_of(name):
                try:
                    check(name, fn, part)
                except CheckFailed as exc:
                    failures.append(str(exc))
        assert not failures, "\n---\n".join(failures)
        assert not w.faults, w.faults
