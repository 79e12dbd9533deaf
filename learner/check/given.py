"""The ready-made versions of each exercise, captured when the checks are imported.

A notebook's first, read-only cell imports the checks before any learner cell runs, so what is kept here is the
genuine article even if learner code later replaces a module attribute: a learner's answer that calls the
ready-made version of its own exercise (``Exercise.given``, from ``learner/syllabus.py``) earns nothing.
"""
import importlib

from .cases import EXERCISES

_GIVEN = {}  # exercise -> {code object: "module.function"}, captured before learner code can replace them


def capture_given(name):
    """The code objects of the ready-made versions of exercise ``name`` (``Exercise.given``)."""
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
