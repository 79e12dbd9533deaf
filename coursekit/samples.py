"""Sample submissions built from the reference: all answers right, or one known bug.

Used by ``course demo`` and by the pipeline tests. A bug is a small edit of the
reference source, so the submission is a learner's notebook with one mistake.
"""
import copy

from learner.check import EXERCISES
from solutions.sample_bugs import COSTS, SAMPLE_BUGS

from .sync import solution_source

# assignment -> (exercise, what the bug is, (old text, new text) in the reference source): the sample bugs
# (solutions/sample_bugs.py, instructor-only)
ONE_BUG = SAMPLE_BUGS
ONE_BUG_COSTS = COSTS


def edited_source(name, old, new):
    src = solution_source(name)
    if old not in src:
        raise ValueError(f"the reference of {name} no longer contains {old!r}; update its sample bug in "
                         f"solutions/sample_bugs.py")
    return src.replace(old, new, 1)


def answered(release_nb, overrides=None):
    """A copy of a released notebook with every answer cell holding the reference (or an override)."""
    nb = copy.deepcopy(release_nb)
    overrides = overrides or {}
    for cell in nb.cells:
        md = cell.metadata.get("nbgrader", {})
        if md.get("solution") and md.get("grade_id") in EXERCISES:
            cell.source = overrides.get(md["grade_id"], solution_source(md["grade_id"]))
    return nb


def with_bug(release_nb, assignment):
    name, _, (old, new) = ONE_BUG[assignment]
    return answered(release_nb, {name: edited_source(name, old, new)})


MATHS_CELLS = ("basic", "edge")  # the cells a bug in the computation costs (the errors cell checks the refused input)


def points_in_notebook(nb, exercise, cells=("basic", "edge", "errors")):
    """Total points of the test cells of ``exercise`` in a notebook (only those of the kinds in ``cells``: a bug in
    the maths costs the basic and edge cells, and leaves the errors cell, which checks the refused input)."""
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade")
               and c.metadata["nbgrader"]["grade_id"].rsplit("_", 1)[0] == exercise
               and c.metadata["nbgrader"]["grade_id"].rsplit("_", 1)[1] in cells)


def total_points(nb):
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade"))
