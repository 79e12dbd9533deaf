"""The course's grader: ``check("softmax", softmax, part="basic")`` under each exercise.

A part is one graded test cell:

* ``basic``  seeded random cases, compared with outputs of the reference that
  ship with the grader (works without the ``solutions`` package);
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
matches; a passed check prints one line. The grader never crashes on a bad
learner function: errors, hangs, wrong shapes, dtypes, devices and NaN are all
reported as failures in words.
"""
import importlib
import importlib.util
import os
import threading

__all__ = ["check", "call_learner", "CheckFailed", "EXERCISES", "PARTS", "CELLS", "cells_of", "parts_of",
           "reference_available"]

PARTS = ("basic", "edge", "errors", "hidden-basic", "hidden", "hidden-errors")
_CELLS_OF = {}


def cells_of(name):
    """The graded cells of exercise ``name``: ["basic"], then "edge" and "errors" when it has them."""
    if name not in _CELLS_OF:
        load()
        _CELLS_OF[name] = _cells_of(EXERCISES[name])
    return list(_CELLS_OF[name])


def parts_of(name):
    """The parts of exercise ``name``'s graded cells, visible then hidden, cell by cell."""
    return [part for cell in cells_of(name) for part in CELLS[cell]]

# The grader's modules, one job each:
#   course                     the table of notebooks: exercises, points, ready-made parts, set-up, sample bug
#   cases (cases/<topic>.py)   the cases, properties and known mistakes of each notebook's exercises (shared
#                              helpers and the registry in cases/common.py)
#   reference                  the reference and the ready-made versions, captured at import
#   runner                     one part of one exercise: cases, calls, comparison, diagnosis
#   report                     Failure records and the message a learner reads (CheckFailed)
#   shipped                    the visible parts' expected outputs (grader/expected/)
#   devices                    CPU, CUDA and moving cases between them
#   compare, _safe             comparisons in words; primitives captured before learner code runs
#   sandbox, worker, remote,   grading time: the sandbox, the student's functions inside it, the trusted
#   wire, audit, judge,        side's stand-ins for them, what may cross, notes of refused attempts, the
#   nbgrader_plugin, seeds     verdict of one notebook, nbgrader's side of it, and each student's hidden seed

# ------------------------------------------------------------------ the grader's half that needs PyTorch
# Importing ``grader`` is light: the processes that grade a class without running a check (the `course` command's
# client, the Dask workers, nbgrader's process and the nbgrader apps that load grader.nbgrader_plugin) use only its
# light modules (course, seeds, processes, sandbox, audit, untrusted, plain, nbgrader_plugin), and each would
# otherwise spend 2 CPU-s importing PyTorch for nothing. The rest (the checks, the reference captured, the guarded
# call) is loaded by ``load()``, on first use of any of its names (``from grader import check``, ``grader.EXERCISES``)
# or explicitly: a process that must capture its primitives before student code exists (the sandboxed worker, the
# judge, the grading kernel's launcher) calls ``load()`` first.
_HEAVY = {"check", "CELLS", "EXERCISES", "NOTEBOOKS", "grading_devices", "CheckFailed",
          "Failure", "Report", "expected_path", "load_expected", "read_expected", "call_learner", "resolve",
          "reference_available", "_where_raised", "_capture_given", "_cells_of"}
_LOADING = threading.RLock()
_loaded = False
_loading = False  # this thread is inside load(): a module it imports asks for the grader's names


def load():
    """Import the grader's half that needs PyTorch (once): the reference and the ready-made versions captured, the
    guarded call's primitives captured, the cases."""
    global _loaded, _loading
    if _loaded:
        return
    with _LOADING:
        if _loaded or _loading:
            return
        _loading = True
        try:
            _safe, reference, runner = (importlib.import_module(f"{__name__}.{m}")
                                        for m in ("_safe", "reference", "runner"))
            from .cases import CELLS, EXERCISES, cells_of as _cells_of
            from .course import NOTEBOOKS
            from .devices import grading_devices
            from .report import CheckFailed, Failure, Report
            from .shipped import expected_path, load_expected, read_expected
            for name in EXERCISES:
                reference.capture_given(name)
            globals().update(
                CELLS=CELLS, EXERCISES=EXERCISES, _cells_of=_cells_of, NOTEBOOKS=NOTEBOOKS,
                grading_devices=grading_devices, CheckFailed=CheckFailed, Failure=Failure, Report=Report,
                expected_path=expected_path, load_expected=load_expected, read_expected=read_expected,
                # the one guarded call of a learner's function (time limit, prints and warnings kept, errors as
                # values): the checks use it, and so do the widgets
                call_learner=_safe.call,
                resolve=reference.resolve, reference_available=reference.available,
                # names the grading worker and older callers use
                _where_raised=runner.where_raised, _capture_given=reference.capture_given, check=_check)
            _loaded = True
        finally:
            _loading = False


def __getattr__(name):
    if name in _HEAVY:
        load()
        if name in globals():
            return globals()[name]
    if name.isidentifier() and importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a module of the
        return importlib.import_module(f"{__name__}.{name}")                                 # grader's: grader.devices
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _HEAVY)


# ------------------------------------------------------------------ the public call
def check(name, fn, part="basic", seed=0):
    """Check the learner's ``fn`` for exercise ``name`` on one part (basic, edge or hidden).

    Prints one line when every check passes; raises CheckFailed with a message
    that explains the first failure otherwise. ``seed`` varies the hidden parts'
    random cases: grading uses one per student and assignment
    (``grader.seeds.student_seed``), so a grade can be reproduced from it.
    """
    __tracebackhide__ = True
    load()
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
    run = Report(name, part, question=ex.answer is not None)
    with _safe.forbid_given(reference.capture_given(name)):
        runner.run_part(run, ex, fn, part, seed)
    if run.n == 0:  # a part that judges nothing would pass anything
        raise RuntimeError(f"the grader has no checks for {name} [{part}]: fix grader/cases/"
                           f"{NOTEBOOKS[ex.notebook].topic}.py")
    if run.failures:
        run.notes.extend(runner.failing_dependencies(ex, fn))
    run.finish()


# ``from grader import check`` loads the grader (``__getattr__``): a notebook's set-up cell captures the reference and
# the grader's primitives before the learner's code exists, as it always did
_check = check
del check
