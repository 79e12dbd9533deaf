"""`course grade`: a class graded in parallel on a real Dask cluster (127.0.0.1), into the real gradebook.

The class mixes honest, buggy, crashing and looping submissions with broken files; every submission that can be
graded is graded with real nbgrader in the sandbox, each problem is named in the summary, and only the client
writes the gradebook. A worker killed mid-task has its submission graded again elsewhere, once.
"""
import os
import re
import pathlib
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import nbformat
import pytest
from pipeline_helpers import COURSE_COMMAND, TOGETHER, release_nb, with_test_env

from coursekit.grading import grade_class, local_cluster, print_summary
from coursekit.pipeline import CourseCopy
from coursekit.samples import MATHS_CELLS, ONE_BUG, answered, points_in_notebook, total_points, with_bug

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(1200)]
A = "01_tokens"


def _course(root):
    cc = CourseCopy(root).for_class_grading()
    cc.env["COURSE_SANDBOX_MEMORY_MB"] = "4096"
    return cc, nbformat.read(cc.generate_release(A), as_version=4)


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


def _kill_a_busy_worker(client, avoid):
    """Kill (SIGKILL) a worker in the middle of grading a submission whose task key does not contain ``avoid``;
    returns (its pid, the student whose grading it was doing)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        busy = {w: keys for w, keys in client.processing().items() if keys and not any(avoid in k for k in keys)}
        if busy:
            worker, keys = next(iter(busy.items()))
            time.sleep(2)  # well into its grading (a submission takes longer)
            if client.processing().get(worker) != keys:
                continue  # it finished meanwhile: pick again
            pid = client.run(os.getpid, workers=[worker])[worker]
            os.kill(pid, signal.SIGKILL)
            return pid, keys[0].split("-")[2]
        time.sleep(0.2)
    raise AssertionError("no worker was grading an ordinary submission")


def test_a_class_with_broken_files_and_a_dying_worker_is_graded_once_and_every_problem_is_named(tmp_path, capsys,
                                                                                                monkeypatch, request):
    """One class on a real Dask cluster (two workers on 127.0.0.1): honest, buggy, crashing and looping
    submissions, broken files, a student off the roster; one worker is killed in the middle of a task. The
    grading leaves nothing of its own in the temporary folder, not even for the processes killed."""
    import tempfile
    from distributed import Client
    scratch = pathlib.Path(tempfile.mkdtemp(dir="/tmp"))  # short: a kernel's socket path is at most 107 bytes
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read again from TMPDIR, here and in the workers
    cc, release = _course(tmp_path / "course")
    full, (bug, _, _) = total_points(release), ONE_BUG[A]
    with cc.gradebook() as gb:  # the roster: everyone but "stranger"
        for student in ("ref", "bug", "crash", "loop", "two", "json", "other", "missing"):
            gb.update_or_create_student(student)
    cc.submit("ref", A, answered(release))
    cc.submit("bug", A, with_bug(release, A))
    cc.submit("crash", A, _with_cell(answered(release), "import os\nos._exit(3)"))
    # a kernel that never finishes: it waits rather than computes, so that the minutes it holds one grading worker
    # cost no CPU that the tests beside it need (a computing loop is stopped in the tamper class of test_pipeline);
    # it ignores the interrupt of its cell's own limit (120 s), so only the per-submission limit can stop it
    cc.submit("loop", A, _with_cell(answered(release), "import signal, time\nsignal.signal(signal.SIGINT, "
                                                       "signal.SIG_IGN)\nwhile True:\n    time.sleep(1)"))
    cc.submit("stranger", A, release)  # the untouched release: cheap to grade, and enough to be named
    cc.submit("two", A, release)
    _put(cc, "two", {"01_tokens (copy).ipynb": nbformat.writes(answered(release))})
    _put(cc, "json", {f"{A}.ipynb": '{"cells": [ not json'})
    _put(cc, "other", {f"{A}.ipynb": open(os.path.join(cc.root, "source", "03_softmax", "03_softmax.ipynb")).read()})
    _put(cc, "missing", {"answers.txt": "I forgot the notebook"})
    _put(cc, "x<img src=y>", {f"{A}.ipynb": nbformat.writes(release)})  # a folder name that is no student id

    with local_cluster(2) as cluster, Client(cluster) as client:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        out = {}
        # the per-submission time limit (60 s: honest submissions take 10-25 s on a quiet machine, and one stopped
        # by it under load is graded again after the others, with 120 s) stops the looping kernel, twice
        grading = threading.Thread(target=lambda: out.update(summary=grade_class(
            cc.root, [A], scheduler=cluster.scheduler_address, timeout=60, env=cc.env, progress=False,
            release_first=False)))
        grading.start()
        victim, interrupted = _kill_a_busy_worker(client, avoid="-loop-")
        grading.join(900)
        assert not grading.is_alive()
    # each grading process's folders (its kernels', its judges', masked modules) go with it, killed or not; a
    # process whose worker was killed notices within a second
    deadline = time.monotonic() + 30
    while (left := sorted(n for n in os.listdir(scratch) if n.startswith("course-"))) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, left
    summary = out["summary"]
    print_summary(summary, cc.root)
    said = capsys.readouterr().out
    graded = {s: score for (s, _), score in summary.graded.items()}
    assert graded == {"ref": full, "bug": full - points_in_notebook(release, bug, MATHS_CELLS), "crash": full, "loop": 0,
                      "stranger": 0, "two": 0}, said
    assert re.search(rf"^  ref +{A} +{full:g} / {full:g}  ", said, re.M), said  # the score out of the total
    assert re.search(rf"^  loop +{A} +0 / {full:g}  ", said, re.M), said
    assert summary.graded_by[(interrupted, A)][1] != victim  # graded again, by another worker process
    assert all(n == 1 for n in _submissions_per_student(cc.root).values())  # and written once
    assert set(_submissions_per_student(cc.root)) == set(graded)
    assert sum(sc for sc, _ in cc.scores("bug", A).values()) == full - points_in_notebook(release, bug, MATHS_CELLS)

    problems = _problems(summary)
    assert set(problems) == {"stranger", "two", "json", "other", "missing", "x<img src=y>"}, problems
    assert "is not a valid student id" in problems["x<img src=y>"].reason and not problems["x<img src=y>"].graded
    assert "not on the roster" in problems["stranger"].reason and problems["stranger"].graded
    assert "01_tokens (copy).ipynb" in problems["two"].reason and problems["two"].graded
    assert "not a valid notebook" in problems["json"].reason and not problems["json"].graded
    assert "03_softmax" in problems["other"].reason and not problems["other"].graded
    assert "missing notebook" in problems["missing"].reason and not problems["missing"].graded
    faults = {(s, kind) for s, _, kind, _ in summary.faults}
    assert ("crash", "kernel") in faults and ("loop", "timeout") in faults
    assert "twice" in next(t for s, _, k, t in summary.faults if (s, k) == ("loop", "timeout"))
    assert ("loop", A) in summary.again and "were graded again after the others" in said
    assert not any(s in ("ref", "bug", "stranger") for s, _ in faults)
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
    # a submission that could not be graded has no autograded notebook, and feedback that says why
    assert not os.path.exists(cc.autograded_path("loop", A))
    told = open(cc.feedback_path("loop", A)).read()
    assert "could not be graded" in told and "time limit of 60 s" in told and "(120 s)" in told

    # a later submission that cannot be read loses nothing already in the gradebook
    _put(cc, "ref", {f"{A}.ipynb": "not a notebook"})
    again = grade_class(cc.root, [A], jobs=1, timeout=40, env=cc.env, progress=False, only_students=["ref"],
                        release_first=False)
    assert again.graded == {} and "not a valid notebook" in _problems(again)["ref"].reason
    assert sum(sc for sc, _ in cc.scores("ref", A).values()) == full


WRITER = """
import os, sys, time
i, end = 0, time.monotonic() + 60
while time.monotonic() < end:  # a kernel and a judge still at work: new folders and files in both, flat out
    for folder in sys.argv[1:]:
        os.makedirs(os.path.join(folder, f"box{i % 50}", "work"), exist_ok=True)
        with open(os.path.join(folder, f"box{i % 50}", "work", f"out{i}.txt"), "w") as f:
            f.write("x" * 1000)
    i += 1
"""
REMOVE_WHILE_WRITING = """
import os, subprocess, sys, time
from coursekit.grading.server import _remove_own_folders
home, tmp = sys.argv[1], os.environ["TMPDIR"]
writer = subprocess.Popen([sys.executable, "-c", sys.argv[2], home, tmp], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
while not all(os.path.isdir(os.path.join(f, "box49")) for f in (home, tmp)):
    time.sleep(0.05)
_remove_own_folders(home)
print("writer stopped:", writer.wait(timeout=90) != 0)  # killed, not at the end of its minute
"""


def test_a_grading_server_removes_its_folders_though_its_kernels_still_write_in_them(tmp_path):
    """A grading server whose worker died in the middle of a submission removes its home and its temporary folder
    while that submission's kernel and judge are still at work in them: it stops every process below it first,
    so no file they write leaves a folder behind (the class with a dying worker above left two)."""
    home, tmp = tmp_path / "course-nbgrader-x", tmp_path / "course-tmp-x"
    home.mkdir()
    tmp.mkdir()
    proc = subprocess.run([sys.executable, "-c", REMOVE_WHILE_WRITING, str(home), WRITER], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "TMPDIR": str(tmp)})
    assert proc.returncode == 0 and "writer stopped: True" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert not home.exists() and not tmp.exists()


STOPPED_SERVER_CONFIG = """
import os, subprocess, sys, time
# a submission's kernel: a process in a session of its own (jupyter_client starts kernels so), writing into the
# server's home and temporary folder
writer = subprocess.Popen([sys.executable, "-c", {writer!r}, {home!r}, {tmp!r}], start_new_session=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
while not all(os.path.isdir(os.path.join(f, "box49")) for f in ({home!r}, {tmp!r})):
    time.sleep(0.05)
with open({pid_file!r}, "w") as f:
    f.write(str(writer.pid))
time.sleep(600)  # the request runs past its time limit
"""


def test_a_grading_server_stopped_at_a_time_limit_takes_its_kernels_and_folders_with_it(tmp_path, monkeypatch):
    """A request past its time limit stops the grading server (``Nbgrader.stop``): a kernel it started, in a session
    of its own and still writing into the server's home and temporary folder, is killed too, and both folders are
    gone. (Killing the server's process group alone left the kernel writing, and the class with a dying worker
    above left a home and a temporary folder.)"""
    import json
    import tempfile

    from coursekit.grading.server import Nbgrader
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    server = Nbgrader({})
    root = os.path.join(server.home, "course")
    os.makedirs(root)
    pid_file = tmp_path / "kernel.pid"
    with open(os.path.join(root, "nbgrader_config.py"), "w") as f:  # nbgrader runs its config: the request starts it
        f.write(STOPPED_SERVER_CONFIG.format(writer=WRITER, home=server.home, tmp=server.tmp, pid_file=str(pid_file)))
    server.proc.stdin.write(json.dumps({"what": "release", "root": root, "assignment": "a"}).encode() + b"\n")
    server.proc.stdin.flush()
    deadline = time.monotonic() + 300
    while not pid_file.exists() and server.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), "the server did not start the request's kernel"
    kernel = int(pid_file.read_text())
    server.stop()
    assert not os.path.exists(server.home) and not os.path.exists(server.tmp), os.listdir(tmp_path)
    assert _killed(kernel), "the kernel still runs"


def _killed(pid, wait=30):
    """Whether process ``pid`` is gone, or killed and not yet reaped, within ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


KILLED_WORKER = """
import json, sys, tempfile, time
tempfile.tempdir = sys.argv[1]
from coursekit.grading.server import Nbgrader
server = Nbgrader({})
print(json.dumps({"home": server.home, "tmp": server.tmp, "pid": server.proc.pid, "groups": server.groups}), flush=True)
time.sleep(600)
"""


def test_a_killed_workers_grading_server_and_its_folders_go_when_the_next_one_starts(tmp_path, monkeypatch,
                                                                                   request):
    """A grading worker is killed while its nbgrader process has not yet noticed (here: it is frozen). The next
    worker's start of an nbgrader process removes the dead worker's control group, as before, and now with it that
    process's home and temporary folder: the group's removal killed the process before it removed them itself, and
    the class with a dying worker above left both on CI."""
    import json
    import tempfile

    from coursekit.grading.server import Nbgrader
    if os.geteuid() != 0:
        pytest.fail("this test grades as root, in memory control groups of its own: run it as make test does")
    worker = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(tmp_path)], stdout=subprocess.PIPE)
    old = None
    try:
        old = json.loads(worker.stdout.readline())
        assert old["groups"], "no memory control group was made for the nbgrader process"
        deadline = time.monotonic() + 60  # in its group before it is frozen (its shell puts it there)
        while str(old["pid"]) not in open(os.path.join(old["groups"][0], "cgroup.procs")).read().split():
            assert time.monotonic() < deadline, "the nbgrader process never joined its control group"
            time.sleep(0.05)
        os.kill(old["pid"], signal.SIGSTOP)  # it has not run its own clean-up yet
    finally:
        worker.kill()
        worker.wait()
    request.addfinalizer(lambda: os.path.exists(f"/proc/{old['pid']}") and os.kill(old["pid"], signal.SIGKILL))
    assert os.path.isdir(old["home"]) and os.path.isdir(old["tmp"])
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    server = Nbgrader({})
    try:
        assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(f) for f in (server.home, server.tmp))
        assert not any(os.path.exists(g) for g in old["groups"])
        assert _killed(old["pid"]), "the old nbgrader process still runs"
    finally:
        server.stop()


def _certificates(folder):
    """A CA and one certificate for 127.0.0.1 signed by it (openssl), for every role of a TLS cluster."""
    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=course-test-ca")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=127.0.0.1")
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            "node.pem", "-days", "2", "-extfile", "san.ext")
    return str(folder / "ca.pem"), str(folder / "node.pem"), str(folder / "node.key")


def test_course_grade_reaches_a_scheduler_over_tls(tmp_path):
    """`course grade --scheduler tls://... --tls-ca-file --tls-cert --tls-key` grades on a cluster that only speaks
    TLS (encryption required), as the README tells an instructor to run one."""
    from distributed.security import Security
    cc, release = _course(tmp_path / "course")
    ca, cert, key = _certificates(tmp_path)
    tls = Security(tls_ca_file=ca, tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert,
                   tls_worker_key=key, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
    cc.submit("ada", A, answered(release))
    with local_cluster(1, protocol="tls://", security=tls) as cluster:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        proc = subprocess.run([sys.executable, "-m", "coursekit", "grade", "--course", cc.root, "--no-progress",
                               "--scheduler", cluster.scheduler_address, "--tls-ca-file", ca, "--tls-cert", cert,
                               "--tls-key", key, A], capture_output=True, text=True, timeout=600, env=cc.env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "graded 1 submission " in proc.stdout
    assert sum(score for score, _ in cc.scores("ada", A).values()) == total_points(release)


def test_a_local_clusters_workers_run_without_dasks_profiler_and_with_slower_watchdogs():
    """`course grade`'s local cluster runs its workers with QUIET_DASK: Dask's sampling profiler off, its event-loop
    watchdog and system monitor slowed. Nothing here reads them, and idle they cost each process about 4% of a
    core, which the kernels grading beside them need."""
    import dask

    from coursekit.grading import QUIET_DASK, dask_client
    with dask_client(2, None, None) as client:
        seen = client.run(lambda: {key: dask.config.get(key) for key in QUIET_DASK})
    assert len(seen) == 2 and all(config == QUIET_DASK for config in seen.values()), seen


SEVERAL = TOGETHER


def test_course_grade_over_several_assignments_grades_each_submission_on_its_own_assignment_then_reports(course, together):
    """`course grade --scheduler ADDRESS A B C` on the README's cluster (`dask scheduler`, `dask worker --nworkers 2
    --nthreads 1 --memory-limit 0`, here on 127.0.0.1): one course, three assignments, the sample submissions of
    each (several students), in one run (``together`` in conftest). Each assignment's submissions are graded on its
    own cells, the reference's with full marks; test_pipeline checks every cell of every one of them as it checks
    an assignment graded alone (the reference full, each bug costing exactly its exercise, feedback naming it).
    (Each assignment after the first used to get the first one's payload, and scored 0.)
    Then `course report` (the README's next command) over the three."""
    graded = together()
    printed, students = graded["printed"], graded["students"]
    cc = course[SEVERAL[0]]
    assert f"graded {sum(map(len, students.values()))} submissions" in printed, printed[-3000:]
    assert "on 2 workers" in printed
    for a in SEVERAL:
        release = release_nb(course, a)
        cells = {c.metadata["nbgrader"]["grade_id"] for c in release.cells
                 if c.metadata.get("nbgrader", {}).get("grade")}
        assert len(students[a]) >= 2
        for student in students[a]:
            assert set(graded["scores"][a][student]) == cells, (a, student)
        assert sum(s for s, _ in graded["scores"][a]["sample-reference"].values()) == total_points(release)
    # a page per assignment, and the class overview across the three, each score linking to that student's feedback
    report = subprocess.run([COURSE_COMMAND, "report", "--course", cc.root], capture_output=True, text=True,
                            timeout=600, env=cc.env)
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    index = open(os.path.join(cc.root, "report", "index.html")).read()
    for a in SEVERAL:
        assert os.path.exists(os.path.join(cc.root, "report", f"{a}.html"))
        for student in students[a]:
            assert f'href="../feedback/{student}/{a}/{a}.html"' in index, (a, student)


def test_an_assignment_that_cannot_be_released_is_named_and_the_others_are_graded(tmp_path, course):
    """`make grade COURSE=dir ASSIGNMENTS="a b"`: several assignments in one run, one of whose source notebooks is
    broken: its submissions are named, not graded; the other assignments' are."""
    cc = with_test_env(CourseCopy(str(tmp_path / "course")))
    good, bad = SEVERAL[0], SEVERAL[1]
    cc.submit("ada", good, answered(release_nb(course, good)))
    cc.submit("ada", bad, answered(release_nb(course, bad)))
    with open(cc.source_path(bad), "w") as f:
        f.write("{ this is not a notebook")
    # as the README's `make grade` runs it, on this course folder and these assignments
    from coursekit import ROOT
    proc = subprocess.run(["make", "-C", ROOT, "--no-print-directory", "grade", f"COURSE={cc.root}",
                           f"ASSIGNMENTS={good} {bad}"], capture_output=True, text=True, timeout=900, env=cc.env)
    assert f"(every student) / {bad}: the assignment could not be released" in proc.stdout, proc.stdout[-3000:]
    assert f"ada / {bad}: not graded: its assignment could not be released" in proc.stdout
    assert "graded 1 submission " in proc.stdout
    assert "on 1 worker;" in proc.stdout  # one worker per core, but no more than there are submissions
    assert sum(score for score, _ in cc.scores("ada", good).values()) == total_points(release_nb(course, good))
