"""`course progress` (learner/progress.py) on workspaces built here from the course's notebooks, as nbgrader's
release makes them (its ClearSolutions and ClearHiddenTests, in this process): one of reference answers, one of
untouched stubs, and one broken every way a learner breaks one. Cost: about 40 s (three runs of the whole course,
a hanging function's call limit, an answer cell's own limit)."""
import json
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
    edit("05_rnn", {"rnn_cell": "print('x' * 10_000_000)\nimport sys\nsys.exit(3)\n"})     # no def: grading keeps none
    edit("06_encoder", {"multi_head_attention": "import os\n_ = os.write(1, b'to fd 1')\nwhile True:\n    pass\n"})
    edit("07_decoder", {"rope": "def rope(*args, **kwargs):\n    import os\n    os._exit(0)\n"})  # ends the process

    def wrapped(folder, name, extra, body):
        """The reference of ``name`` renamed, and ``name`` calling it with ``body`` around (the learner's own)."""
        path = os.path.join(base, folder, folder + ".ipynb")
        nb = nbformat.read(path, as_version=4)
        cell = answer_cell(nb, name)
        cell.source = cell.source.replace(f"def {name}(", f"def _ref_{name}(") + extra + \
            f"\ndef {name}(*args, **kwargs):\n" + body.format(ref=f"_ref_{name}(*args, **kwargs)")
        nbformat.write(nb, path)
        return nb
    # a top-level value the function uses: grading keeps only what is inert, so it fails there, and here
    wrapped("08_encoder_decoder", "cross_attention", "\n_OFFSET = torch.tensor(0.0)\n",
            "    return {ref} + _OFFSET\n")
    pid_file = tmp_path / "sleeper.pid"   # a process the learner's function starts must not outlive the run
    wrapped("10_capstone", "prefix_lm_mask", "", f"    import subprocess as _sp\n    open({str(pid_file)!r}, 'w')"
                                                 f".write(str(_sp.Popen(['sleep', '300']).pid))\n    return {{ref}}\n")
    # check cells taken out, and a check of its own: the course's checks run all the same
    path = os.path.join(base, "09_kv_cache", "09_kv_cache.ipynb")
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if "kv_cache_bytes" not in c.metadata.get("nbgrader", {}).get("grade_id", "x")
                or c.metadata["nbgrader"].get("solution")]
    answer_cell(nb, "kv_cache_bytes").source = "def check(*args, **kwargs):\n    pass\n" \
                                               "def kv_cache_bytes(*args, **kwargs):\n    return 0\n"
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
    assert items["rnn_cell"]["state"] == "failing" and "defines no function `rnn_cell`" in items["rnn_cell"][
        "message"]
    assert items["multi_head_attention"]["state"] == "failing", items["multi_head_attention"]
    assert "process ended while running the check of rope" in nbs["07_decoder"]["error"]
    assert items["cross_attention"]["state"] == "failing" and "_OFFSET" in items["cross_attention"]["message"]
    assert items["kv_cache_bytes"]["state"] == "failing"  # its checks ran, though taken out of the notebook
    assert nbs["10_capstone"]["points"] == nbs["10_capstone"]["max_points"]
    assert not alive(int(pid_file.read_text()))  # what the learner's function started did not outlive the run
    printed = "\n".join(progress.lines_of(report))
    assert "    softmax: broken: a syntax error in its answer cell, line 1" in printed


def test_the_report_as_json_is_whole_whatever_the_learners_code_writes(reference, tmp_path):
    """A learner's function that writes to the process's own output (os.write, a subprocess) does not spoil the
    JSON the lab reads."""
    base = tmp_path / "ws"
    shutil.copytree(os.path.join(reference, "03_softmax"), base / "03_softmax")
    path = base / "03_softmax" / "03_softmax.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    cell = answer_cell(nb, "softmax")
    cell.source = cell.source.replace("def softmax(", "def _ref_softmax(") + (
        "\ndef softmax(*args, **kwargs):\n    import os, subprocess\n    os.write(1, b'to fd 1')\n"
        "    subprocess.run(['echo', 'from a child'])\n    return _ref_softmax(*args, **kwargs)\n")
    nbformat.write(nb, str(path))
    done = subprocess.run([sys.executable, "-m", "learner.progress", "--json", "--present", "--dir", str(base)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    report = json.loads(done.stdout)
    assert [nb["notebook"] for nb in report["notebooks"]] == ["03_softmax"]
    assert report["points"] == report["max_points"], report


def test_the_command_refuses_a_missing_workspace(tmp_path):
    done = subprocess.run([sys.executable, "-m", "coursekit", "progress", "--dir", str(tmp_path / "none")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no workspace at" in done.stderr and "course workspace" in done.stderr
