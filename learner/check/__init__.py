"""The checks under each exercise: ``check("softmax", softmax, part="basic")``.

A part is one graded test cell:

* ``basic``  seeded random cases, compared with outputs of the reference that
  ship with the checks (works without the ``solutions`` package);
* ``edge``   the notes' edge cases, plus property checks;
* ``errors`` the bad inputs the function must refuse with an error (its own cell,
  so that the maths and the validation score apart);
* ``hidden-basic`` fresh random cases of the basic kind, on CPU and CUDA when
  present, compared with the live reference (grading machine only);
* ``hidden`` the edge cases and fresh, larger random cases on every device, a
  meta-device probe for tensors created on the wrong device, hidden properties;
* ``hidden-errors`` the bad inputs again, on every device, against the live reference.

Each graded cell pairs a visible part with a hidden one (basic with hidden-basic,
edge with hidden, errors with hidden-errors), so a function that only looks up the
shipped expectations earns nothing. ``cells_of(name)`` says which cells an exercise
has (an exercise that refuses no input has no errors cell) and ``parts_of(name)``
their parts.

A failed check raises ``CheckFailed`` (an AssertionError) whose message names the
case, the first wrong position, expected vs got, and the known mistake it
matches; a passed check prints one line. The checks never crash on a bad
learner function: errors, hangs, wrong shapes, dtypes, devices and NaN are all
reported as failures in words.
"""
import os

from . import safe, given, hidden, runner
from .cases import CELLS, EXERCISES, graded_cells
from .devices import grading_devices
from .messages import CheckFailed, Failure, Report, timeout_text
from .shipped import expected_path, load_expected, read_expected
from ..syllabus import NOTEBOOKS

__all__ = ["check", "call_learner", "CheckFailed", "EXERCISES", "PARTS", "CELLS", "cells_of", "parts_of",
           "reference_available", "timeout_text"]

PARTS = ("basic", "edge", "errors", "hidden-basic", "hidden", "hidden-errors")
_CELLS_OF = {}

# The checks' modules, one job each:
#   cases (cases/<topic>.py)   the cases, properties and known mistakes of each notebook's exercises (shared
#                              helpers and the registry in cases/common.py)
#   given                      the ready-made versions of each exercise, captured at import
#   hidden                     the reference for the hidden parts, where the install provides one
#   runner                     one part of one exercise: cases, calls, comparison, diagnosis
#   messages                   Failure records and the message a learner reads (CheckFailed)
#   shipped                    the visible parts' expected outputs (expected/)
#   devices                    CPU, CUDA and moving cases between them
#   compare, safe             comparisons in words; primitives captured before learner code runs
# Importing this package captures them all (a notebook's read-only set-up cell imports it before any learner code
# runs, and so do the grading side's sandboxed worker, judge and kernel launcher). The processes that grade a class
# without running a check import only the grading machine (``grader``), which does not import this package, so
# they never load PyTorch.

for _name in EXERCISES:
    given.capture_given(_name)

# the one guarded call of a learner's function (time limit, prints and warnings kept, errors as values): the checks
# use it, and so do the widgets
call_learner = safe.call
reference_available = hidden.available


def cells_of(name):
    """The graded cells of exercise ``name``: ["basic"], then "edge" and "errors" when it has them."""
    if name not in _CELLS_OF:
        _CELLS_OF[name] = graded_cells(EXERCISES[name])
    return list(_CELLS_OF[name])


def parts_of(name):
    """The parts of exercise ``name``'s graded cells, visible then hidden, cell by cell."""
    return [part for cell in cells_of(name) for part in CELLS[cell]]


# ------------------------------------------------------------------ the public call
def check(name, fn, part="basic", seed=0):
    """Check the learner's ``fn`` for exercise ``name`` on one part (basic, edge or hidden).

    Prints one line when every check passes; raises CheckFailed with a message
    that explains the first failure otherwise. ``seed`` varies the hidden parts'
    random cases: grading uses one per student and assignment
    (``grader.seeds.student_seed``), so a grade can be reproduced from it.
    """
    __tracebackhide__ = True
    if name not in EXERCISES:
        raise ValueError(f"unknown exercise {name!r}; known: {', '.join(EXERCISES)}")
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; use one of {PARTS}")
    ex = EXERCISES[name]
    if not callable(fn):
        raise CheckFailed(f"FAILED {name} [{part}]: expected a function, got {type(fn).__name__}. Run the exercise "
                          f"cell that defines `{name}` first.")
    if os.environ.get("COURSE_SANDBOX") == "1":
        # the kernel nbgrader runs at grading time, in the sandbox: the trusted side (grader.judge) grades every
        # part from outside and replaces this cell's outputs, so nothing here would count; running the student's
        # function here would only cost time (or hang the kernel)
        print(f"{name} [{part}]: graded outside this kernel")
        return
    run = Report(name, part, question=ex.answer is not None, matches_to_name=ex.matches_to_name)
    with safe.forbid_given(given.capture_given(name)):
        runner.run_part(run, ex, fn, part, seed)
    if run.n == 0:  # a part that judges nothing would pass anything
        raise RuntimeError(f"the course has no checks for {name} [{part}]: fix learner/check/cases/"
                           f"{NOTEBOOKS[ex.notebook].topic}.py")
    if run.failures and not run.stopped:  # after a time-out, the helpers' checks could each wait as long again
        run.notes.extend(runner.failing_dependencies(ex, fn))
    run.finish()

