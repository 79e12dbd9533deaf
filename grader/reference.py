"""The reference and the ready-made versions, captured when the grader is imported.

The course's first, read-only notebook cell imports the grader before any
learner cell runs, so what is kept here is the genuine article even if learner
code later replaces a module attribute. On a student's machine (or in the
grading sandbox) there is no ``solutions`` package: ``REFERENCE`` is None and
only the visible parts, which ship their expected outputs, can run.
"""
import importlib
import os

from . import _safe
from .cases import EXERCISES


def resolve(path, package="solutions"):
    """The function a registry path "module:function" names inside ``package``: an exercise's reference
    (``Exercise.ref``) in ``solutions``, a known mistake in ``solutions.mistakes``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(f"{package}.{module}"), attr)


def _load():
    """({exercise: reference function}, {mistake path: function}), or None without ``solutions``."""
    try:
        import solutions
    except (ImportError, PermissionError):  # not installed; or closed to this user (a student on the course's hub)
        return None
    _safe.forbid_calls_into(os.path.dirname(os.path.abspath(solutions.__file__)))
    funcs = {name: resolve(ex.ref) for name, ex in EXERCISES.items()}
    mistakes = {m: resolve(m, "solutions.mistakes") for ex in EXERCISES.values() for m, _ in ex.mistakes}
    return funcs, mistakes


REFERENCE = _load()
_GIVEN = {}  # exercise -> {code object: "module.function"}, captured before learner code can replace them


def capture_given(name):
    """The code objects of the ready-made versions of exercise ``name`` (``Exercise.given``, from grader/course.py)."""
    if name not in _GIVEN:
        codes = {}
        for path in EXERCISES[name].given:
            module, _, attr = path.partition(":")
            try:
                codes[getattr(importlib.import_module(module), attr).__code__] = f"{module}.{attr}"
            except (ImportError, AttributeError):  # not importable now: nothing captured, try again next time
                return codes
        _GIVEN[name] = codes
    return _GIVEN[name]


def available():
    """True on a machine with the reference (the grading machine)."""
    return REFERENCE is not None
