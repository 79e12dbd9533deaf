"""`course update`: a learner's notebooks brought up to the current release, their answers carried over, their old
files kept in one folder (`.previous/<version>/`), and a warning about notebooks open in JupyterLab."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest
from helpers import stop_group

from coursekit import ROOT
from coursekit.sync import solution_source
from coursekit.pipeline import CourseCopy, assignments
from coursekit.update import answer_cells, update_workspace

A = "03_softmax"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    cc = CourseCopy(tmp_path_factory.mktemp("course"))
    return cc.generate_release(A)


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


def _untouched_older_copy(release_path):
    """An older release the learner opened and ran but never wrote in: its first cell has an output."""
    nb = nbformat.read(release_path, as_version=4)
    nb.metadata["course_version"] = "0.0.9"
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="set up\n")]
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("grade_id", "").startswith(
        "sequence_log_prob")]
    return nb


@pytest.mark.pipeline
def test_update_carries_answers_over_replaces_untouched_notebooks_and_keeps_old_files_in_one_folder(
        tmp_path, release):
    ws = tmp_path / "ws"
    U = "untouched"  # a second notebook (the same release under another name) that the learner never wrote in
    for name, nb in ((A, _older_copy(release)), (U, _untouched_older_copy(release))):
        (ws / name).mkdir(parents=True)
        nbformat.write(nb, ws / name / f"{name}.ipynb")
    before = {name: (ws / name / f"{name}.ipynb").read_bytes() for name in (A, U)}

    lines = update_workspace(str(ws), {A: release, U: release}, labs=[])
    said = "\n".join(lines)
    current = nbformat.read(release, as_version=4)
    for name in (A, U):
        new = nbformat.read(ws / name / f"{name}.ipynb", as_version=4)
        assert new.metadata["course_version"] == current.metadata["course_version"]
        assert [c.source for c in new.cells if c.cell_type == "markdown"] == \
            [c.source for c in current.cells if c.cell_type == "markdown"]
        # nothing of theirs is lost: the old file, unchanged, in .previous/<its version>/, and nothing beside it
        assert (ws / ".previous" / "0.0.9" / f"{name}.ipynb").read_bytes() == before[name]
        assert os.listdir(ws / name) == [f"{name}.ipynb"]
    answers = answer_cells(nbformat.read(ws / A / f"{A}.ipynb", as_version=4))
    assert answers["softmax"].source == solution_source("softmax")  # carried over by exercise name
    assert answers["sequence_log_prob"].source == answer_cells(current)["sequence_log_prob"].source  # arrived
    assert nbformat.read(ws / U / f"{U}.ipynb", as_version=4) == current  # replaced by the release as it is

    by_name = {line.split()[1].rstrip(":"): line for line in lines if line.startswith(("updated", "replaced"))}
    assert by_name[A] == f"updated   {A}: your answer to softmax carried over"
    assert by_name[U] == f"replaced  {U}: you had not started it; it is now the current release"
    assert "left in your old copy: your answer to 'old_exercise' (this release has no such exercise)" in said
    assert "left in your old copy: 1 cell you added, the first starting \"my_notes" in said
    assert "(s)" not in said and "0 answer" not in said
    assert "1 notebook updated, 1 replaced (not started)." in lines
    assert f"Your notebooks as they were before this update are in {ws}/.previous/0.0.9/" in lines
    assert lines[-1].startswith("If JupyterLab has one of these notebooks open, close its tab without saving, "
                                "or reload it from disk")

    again = update_workspace(str(ws), {A: release, U: release}, labs=[])
    assert again == [f"current   {A}: already the current release", f"current   {U}: already the current release",
                     "", "2 notebooks already current."]
    nbformat.write(_older_copy(release), ws / A / f"{A}.ipynb")  # an older copy again: a second old file
    update_workspace(str(ws), {A: release}, labs=[])
    assert sorted(os.listdir(ws / ".previous" / "0.0.9")) == [f"{A}-2.ipynb", f"{A}.ipynb", f"{U}.ipynb"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(port, path, data=None):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/{path}", headers={
        "Authorization": "token course-test", "Content-Type": "application/json"},
        data=None if data is None else json.dumps(data).encode(), method="GET" if data is None else "POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


@pytest.mark.pipeline
def test_update_command_warns_about_a_notebook_open_in_jupyterlab_creates_what_is_missing_and_skips_the_unreadable(
        tmp_path, release):
    """The README's `course update` with the learner's `course lab` running and 03 open in it (a session with a
    kernel, as JupyterLab makes when a notebook is opened): the command names the open notebook and says what to
    do; the learner's version is in .previous; an unreadable notebook is left as it is; a missing one is created."""
    ws = tmp_path / "ws"
    (ws / A).mkdir(parents=True)
    nbformat.write(_older_copy(release), ws / A / f"{A}.ipynb")
    before = (ws / A / f"{A}.ipynb").read_bytes()
    (ws / "01_tokens").mkdir()
    (ws / "01_tokens" / "01_tokens.ipynb").write_text("{ this is not json")
    port = _free_port()
    lab = subprocess.Popen([sys.executable, "-m", "coursekit", "lab", "--dir", str(ws), "--port", str(port), "--",
                            "--IdentityProvider.token=course-test"], cwd=ROOT, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline and lab.poll() is None:
            try:
                _api(port, "status")
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail(f"JupyterLab did not answer (exit {lab.poll()})")
        _api(port, "sessions", {"path": f"{A}/{A}.ipynb", "type": "notebook", "name": "",
                                "kernel": {"name": "python3"}})
        (ws / "02_dot_products" / "02_dot_products.ipynb").unlink()  # the learner deleted one
        proc = subprocess.run([sys.executable, "-m", "coursekit", "update", "--dir", str(ws)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
    finally:
        stop_group(lab)  # the server and the kernel it started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"updated   {A}: your answer to softmax carried over" in out
    assert f"JupyterLab at http://127.0.0.1:{port}/ has {A}/{A}.ipynb open. For each, close its tab without " \
           f"saving, or reload it from disk (File > Reload Notebook from Disk) before you save" in out
    assert (ws / ".previous" / "0.0.9" / f"{A}.ipynb").read_bytes() == before
    assert "skipped   01_tokens: your notebook cannot be read" in out
    assert (ws / "01_tokens" / "01_tokens.ipynb").read_text() == "{ this is not json"
    assert "created   02_dot_products: new to your workspace" in out
    assert (ws / "02_dot_products" / "02_dot_products.ipynb").exists()
    assert f"1 notebook updated, 1 created, {len(assignments()) - 3} already current, 1 skipped." in out
