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
from .exercises import EXERCISES


def resolve(path, default_module):
    """The function a registry path names inside ``solutions``: "module:function", or
    "function" in ``default_module``."""
    module, _, attr = path.rpartition(":")
    return getattr(importlib.import_module("solutions." + (module or default_module)), attr)


def _load():
    """({exercise: reference function}, {mistake path: function}), or None without ``solutions``."""
    try:
        import solutions
    except ImportError:
        return None
    _safe.forbid_calls_into(os.path.dirname(os.path.abspath(solutions.__file__)))
    funcs = {name: resolve(ex.ref, "") for name, ex in EXERCISES.items()}
    mistakes = {m: resolve(m, "mistakes") for ex in EXERCISES.values() for m, _ in ex.mistakes}
    return funcs, mistakes


REFERENCE = _load()
_GIVEN = {}  # exercise -> {code object: "module.function"}, captured before learner code can replace them


def capture_given(name):
    """The code objects of the ready-made versions of exercise ``name`` (``Exercise.given``)."""
    if name not in _GIVEN:
        codes = {}
        for path in EXERCISES[name].given:
            module, _, attr = path.partition(":")
            try:
                codes[getattr(importlib.import_module(module), attr).__code__] = f"{module}.{attr}"
            except (ImportError, AttributeError):  # mid-import (coursekit.widgets imports the grader): later
                return codes
        _GIVEN[name] = codes
    return _GIVEN[name]


def available():
    """True on a machine with the reference (the grading machine)."""
    return REFERENCE is not None
