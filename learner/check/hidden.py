"""The reference for the hidden parts, where the install provides one.

The learner's side holds no reference and names none: the hidden parts (fresh cases compared with the live
reference) run only where an installed distribution plugs one in, through the entry point group ``REFERENCE_ENTRY_POINTS``
(the instructor's install, ``attention-course``, plugs in ``grader.reference:provide``, which reads ``solutions/``).
A student's install has no such entry point; on the hub, a student's process finds the instructor's install's entry
point but no reference it may read (``solutions/`` is closed to students), and in the grading sandbox the reference
is hidden: in each case the visible parts, which ship their expected outputs, are what runs.

The reference is looked for once, when the checks are imported, before any learner code exists.
"""
from importlib.metadata import entry_points

REFERENCE_ENTRY_POINTS = "attention_course.reference"


def _discover():
    """({exercise: reference function}, {mistake path: function}) from the first provider that has one, else
    None."""
    for point in entry_points(group=REFERENCE_ENTRY_POINTS):
        try:
            found = point.load()()
        except Exception:  # a provider that cannot run here (the reference closed to this user, say): none
            continue
        if found is not None:
            return found
    return None


REFERENCE = _discover()


def available():
    """True where the hidden parts can run (the grading machine, the instructor's install)."""
    return REFERENCE is not None
