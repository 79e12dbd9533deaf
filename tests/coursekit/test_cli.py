"""The `course` command as learners, instructors and maintainers call it (real subprocesses)."""
import inspect
import os
import re
import shutil
import subprocess
import sys

import nbformat
import pytest
from helpers import stop_group

from coursekit import ROOT
from learner.check import check
from learner.check.messages import CheckFailed
from solutions.mistakes.softmax import softmax_no_max_subtraction
import learner.check

COURSE = [sys.executable, "-m", "coursekit"]


def run(*args, timeout=900):
    return subprocess.run([*COURSE, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.pipeline
def test_workspace_is_built_once_and_never_overwrites_a_learners_notebook(tmp_path):
    ws = tmp_path / "workspace"
    first = run("workspace", "--dir", str(ws))
    assert first.returncode == 0, first.stderr
    nb_path = ws / "03_softmax" / "03_softmax.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    assert "BEGIN SOLUTION" not in nbformat.writes(nb)
    nb.cells.append(nbformat.v4.new_code_cell("my_own_work = 42"))
    nbformat.write(nb, nb_path)
    (ws / "01_tokens" / "01_tokens.ipynb").unlink()

    second = run("workspace", "--dir", str(ws))
    assert second.returncode == 0, second.stderr
    assert "my_own_work = 42" in nb_path.read_text()
    assert re.search(r"kept\s+\S*03_softmax", second.stdout)
    assert re.search(r"created\s+\S*01_tokens", second.stdout)  # a deleted notebook comes back fresh
    # the notation page every notebook links (../notation.md) sits beside the notebooks' folders
    assert (ws / "notation.md").read_text() == open(os.path.join(ROOT, "course", "source", "notation.md")).read()


@pytest.mark.pipeline
def test_demo_grades_sample_submissions_of_several_assignments_headless(tmp_path):
    """The headless main job (`make demo` runs `course demo` on every notebook): release, autograde reference /
    untouched / one-bug of three assignments in one run of the `course` command, feedback, grades.csv; every score
    is the one it must be (the demo checks each and says so)."""
    several = ["01_tokens", "02_dot_products", "03_softmax"]
    course = os.path.join(os.path.dirname(sys.executable), "course")  # the README's `.venv/bin/course`
    proc = subprocess.run([course, "demo", "--out", str(tmp_path / "demo"), "--no-progress", *several],
                          capture_output=True, text=True, timeout=1500, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "demo passed" in proc.stdout and "WRONG" not in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] and line.split()[0] in several]
    assert {(r[0], r[1]) for r in rows} == {(a, s) for a in several for s in ("reference", "untouched", "one-bug")}
    assert os.path.exists(tmp_path / "demo" / "course" / "grades.csv")
    for a in several:
        assert os.path.exists(tmp_path / "demo" / "course" / "feedback" / "one-bug" / a / f"{a}.html")


def test_sync_and_expected_checks_report_no_drift():
    for cmd in (("sync", "--check"), ("expected", "--check")):
        proc = run(*cmd)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_readme_opens_with_the_two_commands_and_ci_runs_the_second():
    readme = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make lab", "make test"]
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    commands = [line for line in ci.splitlines() if line.strip() and not line.startswith("#")]
    assert commands[-1] == "exec make test", ci  # the README's second command, and nothing before it but cd
    assert all(c.startswith(("set ", "cd ")) for c in commands[:-1]), ci


@pytest.mark.pipeline
def test_lab_serves_the_workspace_notebooks(tmp_path):
    """The first README command's main job: JupyterLab serving the learner's workspace."""
    import json
    import socket
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = tmp_path / "ws"
    proc = subprocess.Popen([*COURSE, "lab", "--dir", str(ws), "--port", str(port), "--",
                             "--IdentityProvider.token=course-test"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline, listing = time.time() + 300, None
        while time.time() < deadline and proc.poll() is None:
            try:
                url = f"http://127.0.0.1:{port}/api/contents/03_softmax?token=course-test"
                listing = json.load(urllib.request.urlopen(url, timeout=5))
                break
            except OSError:
                time.sleep(1)
        assert listing is not None, f"JupyterLab did not answer (exit {proc.poll()})"
        assert [c["name"] for c in listing["content"]] == ["03_softmax.ipynb"]
        page = urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token=course-test", timeout=10).read()
        assert b"JupyterLab" in page
        # the learner's screen: no instructor panels, no news pop-up; the Validate button stays
        config = json.loads(re.search(rb'id="jupyter-config-data"[^>]*>(.*?)</script>', page, re.S).group(1))
        disabled = config.get("disabledExtensions", [])
        assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"} <= set(disabled), disabled
        assert "@jupyter/nbgrader:validate-assignment" not in disabled
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/formgrader?token=course-test", timeout=10)
        assert missing.value.code == 404
        news = json.loads((ws / ".jupyter" / "lab-settings" / "@jupyterlab" / "apputils-extension" /
                           "notification.jupyterlab-settings").read_text())
        assert news == {"fetchNews": "false", "checkForUpdates": False}
    finally:
        stop_group(proc)  # the server and any kernel it started


@pytest.mark.pipeline
def test_validate_exits_non_zero_when_a_check_fails_and_names_it(tmp_path):
    """`course validate` is the learner's self-check for scripts and CI: 0 when every check passes, 1 (with the
    failing check in words) when one fails, 2 for a file that is not there."""
    from coursekit.sync import notebook_path
    good = tmp_path / "good" / "03_softmax.ipynb"
    good.parent.mkdir()
    shutil.copy(notebook_path("03_softmax"), good)
    nb = nbformat.read(good, as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}
    answers["log_softmax"].source = "def log_softmax(x, dim=-1, temperature=1.0):\n    raise NotImplementedError()\n"
    # a softmax that passes its basic part and fails its edge part (exp() overflows on large logits)
    answers["softmax"].source = "import torch\n\n" + inspect.getsource(softmax_no_max_subtraction).replace(
        "def softmax_no_max_subtraction(", "def softmax(")
    bad = tmp_path / "bad" / "03_softmax.ipynb"
    bad.parent.mkdir()
    nbformat.write(nb, bad)
    shown = {}  # what the notebook shows under each failing softmax check: the grader's own message, here
    learner = {}
    exec(answers["softmax"].source, learner)
    for part in ("edge", "errors"):
        with pytest.raises(CheckFailed) as failure:
            check("softmax", learner["softmax"], part=part)
        shown[part] = str(failure.value).splitlines()

    passed = run("validate", str(good))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "every check passed" in passed.stdout
    failed = run("validate", str(bad))
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "a check failed: check(\"log_softmax\"" in failed.stdout and "not implemented yet" in failed.stdout
    said = failed.stdout.splitlines()
    for part, message in shown.items():  # every line of the message, the first failing case included, in order
        at = said.index(f"  a check failed: check(\"softmax\", softmax, part=\"{part}\")")
        assert said[at + 1:at + 1 + len(message)] == [f"    {line}" for line in message], (message, said[at:])
    assert any(line.startswith("First failure, case ") for line in shown["edge"])
    assert run("validate", str(tmp_path / "missing.ipynb")).returncode == 2
