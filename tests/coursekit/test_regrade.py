"""Regrading mid-term (docs/grading.md, "Regrade mid-term"): after a check is fixed, `course grade A` grades every
submission of A again with the fixed check, also where the grading workers stay up between runs (the hub's grading
service, a cluster at ``--scheduler``): a worker's long-lived nbgrader process is started again when the code it
grades with changed (``coursekit.grading.task.code_version``).

Cost: well under a second for the fingerprint; the second test starts two real nbgrader processes of a worker
(``python -m coursekit.grading serve``), a few seconds."""
import functools
import os
import time

import pytest

from coursekit.grading import task
from coursekit.grading.task import GRADED_BY, code_version


def tree(root):
    for path in ("learner/check/cases/softmax.py", "solutions/softmax.py", "grader/judge.py", "coursekit/cli.py",
                 "docs/grading.md"):
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write("x = 1\n")


def test_the_fingerprint_follows_the_checks_the_reference_and_the_grader_and_nothing_else(tmp_path):
    tree(tmp_path)
    assert set(GRADED_BY) == {"learner", "solutions", "grader"}
    first = code_version(str(tmp_path))
    with open(tmp_path / "coursekit" / "cli.py", "a") as f:  # not what grades
        f.write("y = 2\n")
    (tmp_path / "docs" / "notes.md").write_text("a new page")
    assert code_version(str(tmp_path)) == first
    with open(tmp_path / "learner" / "check" / "cases" / "softmax.py", "w") as f:  # a check fixed: same size
        f.write("x = 2\n")
    later = time.time() + 5
    os.utime(tmp_path / "learner" / "check" / "cases" / "softmax.py", (later, later))
    fixed = code_version(str(tmp_path))
    assert fixed != first
    (tmp_path / "solutions" / "mistakes.py").write_text("a new known mistake")
    assert code_version(str(tmp_path)) not in (first, fixed)


@pytest.mark.pipeline
def test_a_worker_grades_with_a_fresh_nbgrader_process_once_a_check_changed(tmp_path, monkeypatch):
    tree(tmp_path)
    monkeypatch.setattr(task, "code_version", functools.partial(code_version, str(tmp_path)))
    try:
        first = task._nbgrader({})
        assert first.alive() and task._nbgrader({}) is first  # kept between submissions
        with open(tmp_path / "grader" / "judge.py", "a") as f:
            f.write("# fixed\n")
        again = task._nbgrader({})
        assert again is not first and again.alive() and not first.alive()
    finally:
        task._NBGRADER.stop()
