"""`course validate` says what each exercise is worth and what the learner's checks earn, as grading counts it.

The lines come from the notebook's graded cells and the course table's points (``learner.syllabus``), which are the
gradebook's (tests/learner/check/test_checks.py holds the table and the source notebooks' points together). Reads one
notebook, runs no kernel: well under 1 s.
"""
import re

import nbformat
import pytest

from coursekit.cli import points_lines
from coursekit.sync import notebook_path
from learner.check import cells_of
from learner.syllabus import NOTEBOOKS, cell_points


def _rows(lines):
    return {m[1]: (int(m[2]), int(m[3])) for m in (re.match(r"    (\S+)\s+(\d+) of (\d+)$", line) for line in lines)
            if m}


@pytest.mark.parametrize("folder", ["04_masks_attention", "08_encoder_decoder"])
def test_every_exercise_and_the_total_are_listed_with_the_course_tables_points(folder):
    rows = _rows(points_lines(notebook_path(folder), failed=[]))
    worth = {name: sum(cell_points(name, cell) for cell in cells_of(name)) for name in NOTEBOOKS[folder].exercises}
    assert rows == {**{name: (w, w) for name, w in worth.items()}, "total": (sum(worth.values()),) * 2}


def test_a_failed_cell_costs_its_exercise_that_cells_points_and_no_more():
    path = notebook_path("04_masks_attention")
    cells = {c.metadata["nbgrader"]["grade_id"]: c for c in nbformat.read(path, as_version=4).cells
             if c.metadata.get("nbgrader", {}).get("grade")}
    failed = [{"source": cells[g].source.strip()} for g in ("masked_attention_edge", "causal_mask_errors")]
    rows = _rows(points_lines(path, failed))
    full = {name: sum(cell_points(name, cell) for cell in cells_of(name)) for name in NOTEBOOKS["04_masks_attention"].exercises}
    assert rows["masked_attention"] == (full["masked_attention"] - cell_points("masked_attention", "edge"),
                                        full["masked_attention"])
    assert rows["causal_mask"] == (full["causal_mask"] - 1, full["causal_mask"])
    assert rows["padding_mask"] == (full["padding_mask"],) * 2
    lost = cell_points("masked_attention", "edge") + 1
    assert rows["total"] == (sum(full.values()) - lost, sum(full.values()))


def test_the_lines_say_that_hidden_checks_can_still_take_points_away():
    lines = points_lines(notebook_path("03_softmax"), failed=[])
    assert "hidden checks" in lines[0] and lines[-1].lstrip().startswith("total")
