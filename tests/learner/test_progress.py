"""`course progress` (learner/progress.py) on workspaces built here from the course's notebooks, as nbgrader's
release makes them (its ClearSolutions and ClearHiddenTests, in this process): one of reference answers, one of
untouched stubs, and one broken every way a learner breaks one. Cost: about 40 s (three runs of the whole course,
a hanging function's call limit, an answer cell's own limit)."""
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from learner import progress
from learner.check import cells_of
from learner.syllabus import NOTEBOOKS, cell_points

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "course", "source")
COURSE_POINTS = sum(cell_points(ex, cell) for nb in NOTEBOOKS.values() for ex in nb.exercises for cell in cells_of(ex))


def released(folder, answers):
    """The notebook ``folder`` as the release gives it (hidden tests out; with ``answers`` False, the stubs)."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
    from traitlets.config import Config
    config = Config()
    config.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
    nb = nbformat.read(os.path.join(SOURCE, folder, folder + ".ipynb"), as_version=4)
    if not answers:
        nb, _ = ClearSolutions(config=config).preprocess(nb, {})
    nb, _ = ClearHiddenTests(config=config).preprocess(nb, {})
    return nb


def workspace(base, answers):
    for folder in NOTEBOOKS:
        os.makedirs(os.path.join(base, folder))
        nbformat.write(released(folder, answers), os.path.join(base, folder, folder + ".ipynb"))
    return base


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return workspace(str(tmp_path_factory.mktemp("reference")), True)


def alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except FileNotFoundError:
        return False


def answer_cell(nb, name):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == name)


def test_every_check_needs_only_the_set_up_and_the_answers_and_reference_answers_get_every_point(reference):
    """No training cell, no teaching cell: the set-up, the answers and the checks give every visible point."""
    report = progress.progress_report(reference, progress.course_progress(reference))
    assert report["max_points"] == COURSE_POINTS and report["points"] == COURSE_POINTS, progress.lines_of(report)
    assert report["to_do"] == 0
    for nb in report["notebooks"]:
        assert {i["state"] for i in nb["exercises"]} == {"passes"}, nb
        assert {i["state"] for i in nb["questions"]} <= {"right"}, nb


def test_an_untouched_workspace_is_every_exercise_not_started(tmp_path):
    base = workspace(str(tmp_path), False)
    report = progress.progress_report(base, progress.course_progress(base))
    assert report["points"] == 0 and report["max_points"] == COURSE_POINTS
    assert report["to_do"] == sum(len(nb.exercises) for nb in NOTEBOOKS.values())
    for nb in report["notebooks"]:
        assert {i["state"] for i in nb["exercises"]} == {"not started"}, nb
        assert {i["state"] for i in nb["questions"]} == {"not answered"}, nb


def test_a_broken_workspace_names_each_problem_and_reports_the_rest(reference, tmp_path, monkeypatch):
    base = str(tmp_path / "ws")
    shutil.copytree(reference, base)
    os.remove(os.path.join(base, "01_tokens", "01_tokens.ipynb"))                       # deleted
    os.rename(os.path.join(base, "02_dot_products", "02_dot_products.ipynb"),
              os.path.join(base, "02_dot_products", "02_dot_products-Copy1.ipynb"))     # renamed
    with open(os.path.join(base, "04_masks_attention", "04_masks_attention.ipynb"), "w") as f:
        f.write('{"cells": [')                                                           # half-written file

    def edit(folder, changes):
        path = os.path.join(base, folder, folder + ".ipynb")
        nb = nbformat.read(path, as_version=4)
        for name, source in changes.items():
            answer_cell(nb, name).source = source
        nbformat.write(nb, path)
    edit("03_softmax", {"softmax": "def softmax(x, dim=-1, temperature=1.0)\n    return x\n",        # a syntax error
                        "log_softmax": "def log_softmax(x, dim=-1, temperature=1.0):\n    while True:\n        pass\n"})
    edit("05_rnn", {"rnn_cell": "print('x' * 10_000_000)\nimport sys\nsys.exit(3)\n"})             # floods, exits
    edit("06_encoder", {"multi_head_attention": "while True:\n    pass\n"})                       # hangs at once
    edit("07_decoder", {"rope": "import os\nos._exit(0)\n"})                                       # ends the process
    edit("08_encoder_decoder", {"cross_attention": "def check(*args, **kwargs):\n    pass\n"      # a check of its own
                                                   "def cross_attention(*args, **kwargs):\n    return None\n"})
    pid_file = tmp_path / "sleeper.pid"
    path = os.path.join(base, "10_capstone", "10_capstone.ipynb")
    nb = nbformat.read(path, as_version=4)
    answer_cell(nb, "prefix_lm_mask").source += (f"\nimport subprocess as _sp\nopen({str(pid_file)!r}, 'w')"
                                                 f".write(str(_sp.Popen(['sleep', '300']).pid))\n")
    nbformat.write(nb, path)
    monkeypatch.setattr(progress, "CELL_LIMIT", 2)
    from learner.check import safe
    monkeypatch.setattr(safe, "DEFAULT_TIME_LIMIT", 2.0)
    report = progress.progress_report(base, progress.course_progress(base))
    nbs = {nb["notebook"]: nb for nb in report["notebooks"]}
    items = {i["name"]: i for nb in nbs.values() for i in nb.get("exercises", []) + nb.get("questions", [])}
    assert "course workspace" in nbs["01_tokens"]["error"]
    assert "02_dot_products-Copy1.ipynb: rename yours to 02_dot_products.ipynb" in nbs["02_dot_products"]["error"]
    assert "cannot be read as a notebook" in nbs["04_masks_attention"]["error"]
    assert items["softmax"]["state"] == "broken" and "syntax error in its answer cell, line 1" in items["softmax"][
        "message"]
    assert items["log_softmax"]["state"] == "failing" and "did not finish within" in items["log_softmax"]["message"]
    assert items["sequence_log_prob"]["state"] == "passes"  # the rest of the notebook, reported
    assert items["rnn_cell"]["state"] == "broken" and "SystemExit" in items["rnn_cell"]["message"]
    assert items["multi_head_attention"]["state"] == "broken" and "did not finish within 2 s" in items[
        "multi_head_attention"]["message"]
    assert "process ended while running the answer cell of rope" in nbs["07_decoder"]["error"]
    assert items["cross_attention"]["state"] == "failing"  # the course's check ran, not the answer cell's
    assert nbs["09_kv_cache"]["points"] == nbs["09_kv_cache"]["max_points"]
    assert nbs["10_capstone"]["points"] == nbs["10_capstone"]["max_points"]
    assert not alive(int(pid_file.read_text()))  # what an answer cell started did not outlive its notebook's run
    printed = "\n".join(progress.lines_of(report))
    assert "    softmax: broken: a syntax error in its answer cell, line 1" in printed


def test_the_command_refuses_a_missing_workspace(tmp_path):
    done = subprocess.run([sys.executable, "-m", "coursekit", "progress", "--dir", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no workspace at" in done.stderr and "course workspace" in done.stderr
