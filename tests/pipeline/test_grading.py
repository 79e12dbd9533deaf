"""`course grade`: a class graded in parallel on a real Dask cluster (127.0.0.1), into the real gradebook.

The class mixes honest, buggy, crashing and looping submissions with broken files; every submission that can be
graded is graded with real nbgrader in the sandbox, each problem is named in the summary, and only the client
writes the gradebook. A worker killed mid-task has its submission graded again elsewhere, once.
"""
import os
import signal
import sqlite3
import threading
import time

import nbformat
import pytest

from coursekit.grading import grade_class, print_summary
from coursekit.pipeline import CourseCopy
from coursekit.samples import ONE_BUG, answered, points_of, total_points, with_bug

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(1200)]
A = "01_tokens"


def _course(root):
    cc = CourseCopy(root)
    cc.env.update(COURSE_MAX_TRAIN_STEPS="20", COURSE_TORCH_THREADS="1", OMP_NUM_THREADS="1",
                  COURSE_SANDBOX_MEMORY_MB="4096")
    return cc, nbformat.read(cc.release(A), as_version=4)


def _with_cell(nb, source, at=3):
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


def _put(cc, student, files):
    folder = os.path.join(cc.root, "submitted", student, A)
    os.makedirs(folder, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(data)


def _submissions_per_student(root):
    with sqlite3.connect(os.path.join(root, "gradebook.db")) as db:
        return dict(db.execute("select student_id, count(*) from submitted_assignment group by student_id"))


def _problems(summary):
    return {p.student: p for p in summary.problems}


def test_a_class_with_broken_files_is_graded_and_every_problem_is_named(tmp_path, capsys):
    cc, release = _course(tmp_path / "course")
    full, (bug, _, _) = total_points(release), ONE_BUG[A]
    with cc.gradebook() as gb:  # the roster: everyone but "stranger"
        for student in ("ref", "bug", "crash", "loop", "two", "json", "other", "missing", "kept"):
            gb.update_or_create_student(student)
    cc.submit("ref", A, answered(release))
    cc.submit("bug", A, with_bug(release, A))
    cc.submit("crash", A, _with_cell(answered(release), "import os\nos._exit(3)"))
    cc.submit("loop", A, _with_cell(answered(release), "while True:\n    pass"))
    cc.submit("stranger", A, release)  # the untouched release: cheap to grade, and enough to be named
    cc.submit("two", A, release)
    _put(cc, "two", {"01_tokens (copy).ipynb": nbformat.writes(answered(release))})
    _put(cc, "json", {f"{A}.ipynb": '{"cells": [ not json'})
    _put(cc, "other", {f"{A}.ipynb": open(os.path.join(cc.root, "source", "03_softmax", "03_softmax.ipynb")).read()})
    _put(cc, "missing", {"answers.txt": "I forgot the notebook"})
    cc.submit("kept", A, answered(release))

    # the per-submission time limit (40 s) stops the looping kernel before its cell's own limit (120 s)
    summary = grade_class(cc.root, [A], jobs=2, timeout=40, env=cc.env, progress=False)
    print_summary(summary, cc.root)
    said = capsys.readouterr().out
    graded = {s: score for (s, _), score in summary.graded.items()}
    assert graded == {"ref": full, "bug": full - points_of(release, bug), "crash": full, "loop": 0,
                      "stranger": 0, "two": 0, "kept": full}, said
    assert all(n == 1 for n in _submissions_per_student(cc.root).values())
    assert sum(sc for sc, _ in cc.scores("bug", A).values()) == full - points_of(release, bug)

    problems = _problems(summary)
    assert set(problems) == {"stranger", "two", "json", "other", "missing"}, problems
    assert "not on the roster" in problems["stranger"].reason and problems["stranger"].graded
    assert "01_tokens (copy).ipynb" in problems["two"].reason and problems["two"].graded
    assert "not a valid notebook" in problems["json"].reason and not problems["json"].graded
    assert "03_softmax" in problems["other"].reason and not problems["other"].graded
    assert "missing notebook" in problems["missing"].reason and not problems["missing"].graded
    faults = {(s, kind) for s, _, kind, _ in summary.faults}
    assert ("crash", "kernel") in faults and ("loop", "timeout") in faults
    assert not any(s in ("ref", "bug", "stranger", "kept") for s, _ in faults)
    for student in ("json", "other", "missing", "stranger", "loop", "crash"):
        assert student in said, f"the summary does not name {student}"

    # what comes back is written where nbgrader and the instructor look for it
    assert os.path.exists(cc.feedback_path("bug", A)) and os.path.exists(cc.autograded_path("bug", A))
    autograded = nbformat.read(cc.autograded_path("bug", A), as_version=4)
    from grader.seeds import recorded, student_seed
    assert autograded.metadata["course"]["seed"] == student_seed("bug", A) == recorded(cc.root)[("bug", A)]
    assert "HIDDEN TESTS" not in open(cc.feedback_path("bug", A)).read()
    rows = {r["student_id"]: float(r["score"]) for r in cc.export("grades.csv")}
    assert rows["ref"] == full and rows["loop"] == 0

    # a later submission that cannot be read loses nothing already in the gradebook
    _put(cc, "kept", {f"{A}.ipynb": "not a notebook"})
    again = grade_class(cc.root, [A], jobs=1, timeout=40, env=cc.env, progress=False, only_students=["kept"])
    assert again.graded == {} and "not a valid notebook" in _problems(again)["kept"].reason
    assert sum(sc for sc, _ in cc.scores("kept", A).values()) == full


def test_a_worker_killed_mid_task_has_its_submission_graded_again_elsewhere_once(tmp_path):
    from distributed import Client, LocalCluster
    cc, release = _course(tmp_path / "course")
    full, (bug, _, _) = total_points(release), ONE_BUG[A]
    want = {}
    for i in range(4):
        student = f"s{i}"
        cc.submit(student, A, answered(release) if i % 2 == 0 else with_bug(release, A))
        want[student] = full if i % 2 == 0 else full - points_of(release, bug)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", memory_limit=0) as cluster, Client(cluster) as client:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        out = {}
        grading = threading.Thread(target=lambda: out.update(summary=grade_class(
            cc.root, [A], scheduler=cluster.scheduler_address, timeout=300, env=cc.env, progress=False,
            release_first=False)))
        grading.start()
        deadline, busy = time.monotonic() + 120, []
        while time.monotonic() < deadline and not busy:
            busy = [w for w, tasks in client.processing().items() if tasks]
            time.sleep(0.2)
        assert busy, "no worker started a task"
        time.sleep(3)  # well into its grading (a submission takes longer)
        victim = client.run(os.getpid, workers=[busy[0]])[busy[0]]
        os.kill(victim, signal.SIGKILL)
        grading.join(600)
        assert not grading.is_alive()
    summary = out["summary"]
    assert {s: score for (s, _), score in summary.graded.items()} == want
    assert all(pid != victim for _, pid in summary.graded_by.values()), summary.graded_by
    assert _submissions_per_student(cc.root) == {s: 1 for s in want}
    assert not summary.faults and not summary.problems
