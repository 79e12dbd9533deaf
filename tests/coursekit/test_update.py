"""`course update`: a learner's notebooks brought up to the current release, their answers carried over."""
import os
import subprocess
import sys

import nbformat
import pytest

from coursekit import ROOT
from coursekit.notebooks import solution_source
from coursekit.pipeline import CourseCopy
from coursekit.update import answer_cells, update_workspace

A = "03_softmax"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    cc = CourseCopy(tmp_path_factory.mktemp("course"))
    return cc.release(A)


def _older_copy(release_path):
    """What a learner who started on an older release has: another version, an exercise this release does not
    have any more, one this release added missing, their own answer and their own cell."""
    nb = nbformat.read(release_path, as_version=4)
    nb.metadata["course_version"] = "0.0.9"
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(
        "sequence_log_prob")]  # added by the newer release
    answer_cells(nb)["softmax"].source = solution_source("softmax")
    retired = nbformat.v4.new_code_cell("def old_exercise():\n    return 42\n")
    retired.metadata["nbgrader"] = {"grade_id": "old_exercise", "solution": True, "grade": False, "locked": False,
                                    "schema_version": 3}
    nb.cells.append(retired)
    nb.cells.append(nbformat.v4.new_code_cell("my_notes = 'softmax is shift-invariant'"))
    return nb


@pytest.mark.pipeline
def test_update_carries_answers_over_keeps_the_old_file_and_reports_what_it_could_not_carry(tmp_path, release):
    ws = tmp_path / "ws"
    (ws / A).mkdir(parents=True)
    path = ws / A / f"{A}.ipynb"
    nbformat.write(_older_copy(release), path)
    before = path.read_bytes()

    lines = update_workspace(str(ws), {A: release})
    said = "\n".join(lines)
    new = nbformat.read(path, as_version=4)
    current = nbformat.read(release, as_version=4)
    assert new.metadata["course_version"] == current.metadata["course_version"]
    answers = answer_cells(new)
    assert answers["softmax"].source == solution_source("softmax")  # carried over by exercise name
    assert answers["sequence_log_prob"].source == answer_cells(current)["sequence_log_prob"].source  # arrived
    assert [c.source for c in new.cells if c.cell_type == "markdown"] == \
        [c.source for c in current.cells if c.cell_type == "markdown"]
    kept = ws / A / f"{A}.before-0.0.9.ipynb"
    assert kept.read_bytes() == before  # nothing of theirs is lost
    assert "1 answer(s) carried over" in said and "old_exercise" in said and "code cell(s) of your own" in said

    again = update_workspace(str(ws), {A: release})
    assert again == [f"current  {A}: already the current release"]
    assert sorted(os.listdir(ws / A)) == sorted([f"{A}.ipynb", f"{A}.before-0.0.9.ipynb"])


@pytest.mark.pipeline
def test_update_command_creates_what_is_missing_and_never_touches_an_unreadable_notebook(tmp_path):
    ws = tmp_path / "ws"
    (ws / A).mkdir(parents=True)
    (ws / A / f"{A}.ipynb").write_text("{ this is not json")
    proc = subprocess.run([sys.executable, "-m", "coursekit", "update", "--dir", str(ws)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"skipped  {A}: your notebook cannot be read" in proc.stdout
    assert (ws / A / f"{A}.ipynb").read_text() == "{ this is not json"
    assert "created  01_tokens" in proc.stdout and (ws / "01_tokens" / "01_tokens.ipynb").exists()
