"""The reference, as the grading machine provides it to the checks (``learner.check.hidden``).

``provide`` is the instructor's install's entry point ``attention_course.reference`` (pyproject.toml): the checks call
it when they are imported, before any learner code exists. It reads ``solutions/`` (each exercise's reference and
known mistakes) and forbids a learner's function to call into it; where ``solutions/`` cannot be imported (a
student's process on the hub, the grading sandbox) it provides nothing and only the visible parts run.
"""
import importlib
import os


def resolve(path, package="solutions"):
    """The function a registry path "module:function" names inside ``package``: an exercise's reference
    (``Exercise.ref``) in ``solutions``, a known mistake in ``solutions.mistakes``."""
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(f"{package}.{module}"), attr)


def provide():
    """({exercise: reference function}, {mistake path: function}), or None without a readable ``solutions``."""
    try:
        import solutions
    except PermissionError:  # closed to this user (a student on the course's hub)
        return None
    except ModuleNotFoundError as exc:
        if exc.name != "solutions":  # the reference is there, and broken: say so
            raise
        return None  # not installed (a student's install, the grading sandbox)
    from learner.check import safe
    from learner.check.cases import EXERCISES
    safe.forbid_calls_into(os.path.dirname(os.path.abspath(solutions.__file__)))
    funcs = {name: resolve(ex.ref) for name, ex in EXERCISES.items()}
    mistakes = {m: resolve(m, "solutions.mistakes") for ex in EXERCISES.values() for m, _ in ex.mistakes}
    return funcs, mistakes
