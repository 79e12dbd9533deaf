"""The maintainers' guide's walk-throughs (docs/maintainers.md), followed step by step on a scratch copy of the course.

Each ```python block of a walk-through starts with a comment saying where it goes
(``# <path>: add at the end``, ``a new file``, ``add before the line `X```,
``add before the last line `X```, or ``replace`` ... ``# with``); this test
applies the blocks exactly as written, runs what ``make sync`` runs, and checks
that the new exercise (or notebook) is graded like every other.
"""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from coursekit import ROOT
from learner.syllabus import NOTEBOOKS

GUIDE = os.path.join(ROOT, "docs", "maintainers.md")
TESTS = os.path.join(ROOT, "tests")


def walkthrough(name):
    """The ```python blocks of the maintainers' guide's walk-through ``name``."""
    text = open(GUIDE).read()
    start = f"<!-- walkthrough: {name}"
    assert start in text, f"the maintainers' guide has no walk-through {name!r}"
    body = text.split(start, 1)[1].split("<!-- /walkthrough -->", 1)[0]
    return re.findall(r"```python\n(.*?)```", body, re.S)


def apply(root, block):
    """Apply one block of a walk-through to the copy at ``root``."""
    first, _, body = block.partition("\n")
    m = re.fullmatch(r"# (\S+): (.+)", first)
    assert m, f"a walk-through block must start with '# <path>: <where>', not {first!r}"
    path, where = os.path.join(root, m.group(1)), m.group(2)
    if where == "a new file":
        assert not os.path.exists(path), f"{m.group(1)} exists already"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").write(body)
        return
    text = open(path).read()
    lines = text.splitlines(keepends=True)
    if where == "add at the end":
        text = text.rstrip("\n") + "\n\n\n" + body
    elif where == "replace":
        old, new = body.split("# with\n")
        assert text.count(old) == 1, f"{m.group(1)} does not hold exactly one {old!r}"
        text = text.replace(old, new)
    elif (found := re.fullmatch(r"add before the (last )?line `(.+)`", where)):
        last, marker = found.groups()
        at = [i for i, line in enumerate(lines) if line.strip().startswith(marker)
              and (not last or line.strip() == marker)]
        assert at, f"{m.group(1)} has no line {marker!r}"
        i = at[-1] if last else at[0]
        text = "".join(lines[:i]) + body + "".join(lines[i:])
    else:
        raise AssertionError(f"unknown place {where!r} in the walk-through")
    open(path, "w").write(text)


@pytest.fixture
def scratch(tmp_path):
    """A copy of the course's packages and source notebooks; commands run in it import it, not the project."""
    root = tmp_path / "course-copy"
    for folder in ("solutions", "learner", "grader", "coursekit"):
        shutil.copytree(os.path.join(ROOT, folder), root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.join(ROOT, "course", "source"), root / "course" / "source")
    shutil.copy(os.path.join(ROOT, "course", "nbgrader_config.py"), root / "course")
    shutil.copy(os.path.join(ROOT, "README.md"), root / "README.md")
    return str(root)


def run(root, *args, code=None):
    # the copy first; then tests/ for the helpers module (which imports the copy's packages)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, TESTS]), COURSE_ISOLATION="none")
    cmd = [sys.executable, "-c", code, *args] if code else [sys.executable, "-m", *args]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{'a script' if code else ' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def make_sync(root):
    """What `make sync` runs."""
    run(root, "coursekit", "sync")
    run(root, "coursekit", "expected")
    assert "notebooks agree" in run(root, "coursekit", "sync", "--check")


GRADED = '''
import json, sys
from learner.check import CheckFailed, EXERCISES, check, parts_of
from helpers import as_learner
from coursekit.sync import drift, exercises_in, notebook_path
name, notebook, wrong = sys.argv[1], sys.argv[2], sys.argv[3]
mine = as_learner({name: None})[name]
passed = []
for part in parts_of(name):
    check(name, mine, part)
    passed.append(part)
bad = as_learner({name: wrong})[name]
messages = []
for part in ("basic", "edge"):
    try:
        check(name, bad, part)
    except CheckFailed as exc:
        messages.append(str(exc))
print(json.dumps({"notebook": EXERCISES[name].notebook, "passed": passed, "wrong": messages,
                  "in_notebook": exercises_in(notebook_path(notebook)), "drift": drift()}))
'''


def graded(root, name, notebook, wrong):
    out = run(root, name, notebook, wrong, code=GRADED)
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.pipeline
def test_the_add_an_exercise_walkthrough_gives_a_graded_exercise(scratch):
    for block in walkthrough("add-an-exercise"):
        apply(scratch, block)
    make_sync(scratch)
    got = graded(scratch, "entropy", "03_softmax",
                 "def entropy(p, dim=-1):\n    return (p * p.clamp_min(1e-300).log()).sum(dim=dim)\n")
    assert got["notebook"] == "03_softmax" and got["drift"] == []
    assert got["passed"] == ["basic", "hidden-basic", "edge", "hidden"]  # no input to refuse: no errors cell
    questions = list(NOTEBOOKS["03_softmax"].questions)  # the new exercise comes before the self-check questions
    assert got["in_notebook"] == ["softmax", "log_softmax", "sequence_log_prob", "entropy", *questions]
    assert got["wrong"] and all("the minus sign is missing" in m for m in got["wrong"]), got["wrong"]
    assert os.path.exists(os.path.join(scratch, "learner", "check", "expected", "entropy.pt"))


@pytest.mark.pipeline
def test_the_add_a_notebook_walkthrough_gives_a_notebook_that_runs_and_grades(scratch):
    for block in walkthrough("add-a-notebook"):
        apply(scratch, block)
    make_sync(scratch)
    got = graded(scratch, "double", "11_toy", "def double(x):\n    return x * x\n")
    assert got["notebook"] == "11_toy" and got["in_notebook"] == ["double"] and got["drift"] == []
    assert got["passed"] == ["basic", "hidden-basic", "edge", "hidden"]
    assert got["wrong"] and all("it squared x; double it" in m for m in got["wrong"]), got["wrong"]
    # the new notebook, top to bottom in a real kernel: the set-up cell, then the reference's answer and checks
    printed = run(scratch, code='''
import nbformat
from nbclient import NotebookClient
nb = nbformat.read("course/source/11_toy/11_toy.ipynb", as_version=4)
NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": "course/source/11_toy"}}).execute()
print("".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs))
''')
    assert printed.count("PASSED") == 4 and "FAILED" not in printed
