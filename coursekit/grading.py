"""Grading a class in parallel, on Dask.

    course grade [-j N] [--scheduler ADDRESS] [--timeout S] [--course DIR] [assignment ...]

The client (this process) reads ``<course>/submitted/<student>/<assignment>/``,
checks each submission (a valid notebook, of this assignment, one per folder,
a student on the roster) and sends one task per submission to Dask workers:
a local cluster of ``-j`` processes on 127.0.0.1 by default (one per core), or
the cluster whose scheduler is at ``--scheduler``. A task carries everything
it needs: its submission's files, and (once per worker, scattered) the
assignment's source and the course's nbgrader configuration. The worker grades
it with real nbgrader in a private folder of its own (``grade_submission``:
the sandboxed kernel and the trusted verdict of ``grader.nbgrader_plugin``),
under a time limit, and brings back the autograded notebook, the feedback, the
scores, the faults and the hidden-case seed as plain data. Workers need no
shared filesystem. A few tasks per worker are in flight at a time, and a task's
files are read when it is sent, so a class of thousands is never in memory at once.

Only the client writes: the gradebook (nbgrader's own ``SaveAutoGrades`` and
``AssignLatePenalties`` on the returned notebook, one submission at a time,
retried while SQLite is locked), the autograded and feedback folders,
``grading_log.jsonl`` and ``hidden_seeds.csv``. A worker that dies mid-task has
its tasks run again elsewhere by the scheduler; a result is written once, when
it arrives, so nothing is graded twice. A submission whose grading fails (a
time-out, a crash of nbgrader, workers dying under it) gets zero for every cell
and a reason in the log and the summary; the rest of the class goes on.
"""
import contextlib
import datetime
import hashlib
import html
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field

import nbformat

from . import COURSE_DIR

COURSE_ID = "attention-course"
MAX_FILE_BYTES = 10_000 * 1024  # nbgrader_config.py's max_file_size (10,000 kB): bigger files are not carried
PASSED_ENV = ("COURSE_ISOLATION", "COURSE_MAX_TRAIN_STEPS", "COURSE_TRAIN_THREADS", "COURSE_TORCH_THREADS",
              "COURSE_SANDBOX_MEMORY_MB", "COURSE_CALL_TIME_LIMIT", "COURSE_DEVICE", "OMP_NUM_THREADS",
              "MKL_NUM_THREADS")


@dataclass
class Problem:
    """A submission (or a file of one) reported by name in the summary."""
    student: str
    assignment: str
    reason: str
    graded: bool = False


@dataclass
class Summary:
    graded: dict = field(default_factory=dict)      # {(student, assignment): total score}
    graded_by: dict = field(default_factory=dict)   # {(student, assignment): (host, pid) of the worker}
    seeds: dict = field(default_factory=dict)       # {(student, assignment): the seed of the hidden cases}
    problems: list = field(default_factory=list)    # [Problem]
    faults: list = field(default_factory=list)      # [(student, assignment, kind, text)]
    seconds: float = 0.0
    workers: int = 0
    isolated: bool = True

    @property
    def ok(self):
        return not any(not p.graded for p in self.problems)


# ------------------------------------------------------------------ the client: what there is to grade
def _files_of(folder):
    """{relative path: bytes} of a submission folder (checkpoints and over-size files left out)."""
    files, skipped = {}, []
    for here, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if d not in (".ipynb_checkpoints", "__pycache__")]
        for name in names:
            path = os.path.join(here, name)
            rel = os.path.relpath(path, folder)
            if os.path.islink(path) or not os.path.isfile(path):
                skipped.append(f"{rel} (not a plain file)")
            elif os.path.getsize(path) > MAX_FILE_BYTES:
                skipped.append(f"{rel} (over {MAX_FILE_BYTES // 1024} kB)")
            else:
                with open(path, "rb") as f:
                    files[rel] = f.read()
    return files, skipped


def _grade_ids(nb):
    return {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def _source_ids(source_dir):
    """{assignment: the grade ids of its source notebook}."""
    out = {}
    for a in sorted(os.listdir(source_dir)):
        path = os.path.join(source_dir, a, a + ".ipynb")
        if os.path.isfile(path):
            out[a] = _grade_ids(nbformat.read(path, as_version=4))
    return out


def collect(course_root, only=None, roster=None, students=None):
    """(tasks, problems): one task per submission that can be graded, and every problem found on the way.

    A task is plain data: ``{"student", "assignment", "folder", "ignored", "timestamp"}``; its files are read
    when it is sent (``with_files``), so that a class of thousands is never held in memory at once.
    ``roster``: the student ids of the gradebook, or None when it has none (then nobody is "not on the roster").
    ``only``/``students``: only these assignments/students (default: everyone's every assignment).
    """
    submitted = os.path.join(course_root, "submitted")
    known = _source_ids(os.path.join(course_root, "source"))
    shared = set.intersection(*known.values()) if len(known) > 1 else set()
    tasks, problems = [], []
    found = sorted(os.listdir(submitted)) if os.path.isdir(submitted) else []
    for student in (s for s in found if not students or s in students):
        if not os.path.isdir(os.path.join(submitted, student)):
            continue
        for a in sorted(os.listdir(os.path.join(submitted, student))):
            folder = os.path.join(submitted, student, a)
            if not os.path.isdir(folder) or (only and a not in only):
                continue
            if a not in known:
                problems.append(Problem(student, a, f"there is no assignment {a!r} in source/ (folder not graded)"))
                continue
            files, skipped = _files_of(folder)
            for what in skipped:
                problems.append(Problem(student, a, f"file not carried: {what}", graded=True))
            notebooks = sorted(p for p in files if p.endswith(".ipynb"))
            name = a + ".ipynb"
            if name not in notebooks:
                found = f" (found {', '.join(notebooks)})" if notebooks else ""
                problems.append(Problem(student, a, f"missing notebook {name}{found}: not graded"))
                continue
            ignored = [p for p in notebooks if p != name]
            if ignored:
                problems.append(Problem(student, a, f"{len(notebooks)} notebooks in one submission: graded {name}, "
                                                    f"ignored {', '.join(ignored)}", graded=True))
            try:
                nb = nbformat.reads(files[name].decode("utf-8"), as_version=4)
            except Exception as exc:  # not UTF-8, not JSON, not a notebook
                problems.append(Problem(student, a, f"{name} is not a valid notebook ({type(exc).__name__}: "
                                                    f"{str(exc).splitlines()[0][:160] if str(exc) else ''}): "
                                                    f"not graded"))
                continue
            ids = _grade_ids(nb) - shared  # "setup" and the like say nothing of the assignment
            if not ids & known[a]:
                other = max(known, key=lambda k: len(ids & known[k]))
                whose = f"the notebook of assignment {other}" if ids & known[other] else "a notebook of no assignment"
                problems.append(Problem(student, a, f"{name} is {whose}, not of {a} (none of its graded cells is "
                                                    f"there): not graded"))
                continue
            if roster is not None and student not in roster:
                problems.append(Problem(student, a, "not on the roster: graded, and added to the gradebook",
                                        graded=True))
            stamp = files.get("timestamp.txt", b"").decode("utf-8", "replace").strip() or None
            tasks.append({"student": student, "assignment": a, "folder": folder, "ignored": ignored,
                          "timestamp": stamp})
    return tasks, problems


def with_files(task):
    """The task as it is sent: its submission's files read now (checkpoints, links, over-size files and the
    ignored extra notebooks left out)."""
    files, _ = _files_of(task["folder"])
    for other in task["ignored"]:
        files.pop(other, None)
    return {k: v for k, v in task.items() if k not in ("folder", "ignored")} | {"files": files}


def course_payload(course_root, assignment):
    """What a worker needs of the course to grade ``assignment``: the nbgrader configuration and the source."""
    with open(os.path.join(course_root, "nbgrader_config.py"), "rb") as f:
        config = f.read()
    source, _ = _files_of(os.path.join(course_root, "source", assignment))
    digest = hashlib.sha256(config)
    for rel in sorted(source):
        digest.update(rel.encode() + b"\0" + source[rel])
    return {"assignment": assignment, "config": config, "source": source, "digest": digest.hexdigest()[:16]}


# ------------------------------------------------------------------ the worker: one submission
class _Nbgrader:
    """One long-lived nbgrader process per grading worker (``python -m coursekit.grading serve``).

    It imports nbgrader and the grader once, then runs one request at a time through nbgrader's own API
    (release an assignment into a private course folder; autograde and generate feedback for one student) and
    answers each with one JSON line. A request past its time limit kills the process (and with it the kernels
    and judges it started) and the next request starts a fresh one. It exits when the worker that started it
    goes.
    """

    def __init__(self, passed):
        self.passed = passed
        self.home = tempfile.mkdtemp(prefix="course-nbgrader-")
        self.log = open(os.path.join(self.home, "nbgrader.log"), "w+b")
        self.proc = subprocess.Popen([sys.executable, "-m", "coursekit.grading", "serve"], cwd=self.home,
                                     env=_env(self.home, passed), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)
        self.templates = {}  # {source digest: a private course folder with the assignment released}

    def alive(self):
        return self.proc.poll() is None

    def call(self, request, timeout):
        """The process's answer ``{"ok", "message"}``, or None when it ran past ``timeout`` seconds."""
        import select
        self.log.seek(0, os.SEEK_END)
        start = self.log.tell()
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.stop()
            return None
        line = self.proc.stdout.readline()
        if line:
            return json.loads(line)
        self.proc.wait()
        self.log.seek(start)
        tail = self.log.read().decode("utf-8", "replace").strip().splitlines()
        return {"ok": False, "message": f"nbgrader stopped (exit status {self.proc.returncode})"
                                        + (f": {tail[-1][:300]}" if tail else "")}

    def stop(self):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.home, ignore_errors=True)

    def template(self, payload):
        """The private course folder where ``payload``'s assignment is released, made once per process."""
        root = self.templates.get(payload["digest"])
        if root and os.path.isdir(root):
            return root
        root = tempfile.mkdtemp(prefix=f"template-{payload['assignment']}-", dir=self.home)
        with open(os.path.join(root, "nbgrader_config.py"), "wb") as f:
            f.write(payload["config"])
        _write_files(os.path.join(root, "source", payload["assignment"]), payload["source"])
        answer = self.call({"what": "release", "root": root, "assignment": payload["assignment"]}, timeout=600)
        if not answer or not answer["ok"]:
            raise RuntimeError(f"the worker could not release {payload['assignment']}: "
                               f"{answer['message'] if answer else 'it took over 600 s'}")
        self.templates[payload["digest"]] = root
        return root


_NBGRADER = None  # this worker's nbgrader process


def _nbgrader(passed):
    global _NBGRADER
    if _NBGRADER is None or not _NBGRADER.alive() or _NBGRADER.passed != passed:
        if _NBGRADER is not None:
            _NBGRADER.stop()
        _NBGRADER = _Nbgrader(passed)
    return _NBGRADER


def _env(root, passed):
    from .pipeline import nbgrader_env
    env = nbgrader_env(root)
    for var in PASSED_ENV:
        env.pop(var, None)
    env.update(passed)
    return env


def _write_files(folder, files):
    for rel, data in files.items():
        path = os.path.join(folder, rel)
        if os.path.relpath(os.path.abspath(path), folder).startswith(".."):
            continue  # never outside the folder
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _read_files(folder):
    return _files_of(folder)[0] if os.path.isdir(folder) else {}


def grade_submission(payload, task, timeout, passed):
    """Grade one submission with real nbgrader in a private folder; everything comes back as plain data.

    Returns ``{"student", "assignment", "ok", "autograded": {rel: bytes}, "feedback": {rel: bytes},
    "log": [records of grading_log.jsonl], "seed", "error", "host", "pid", "seconds"}``.
    """
    t0 = time.perf_counter()
    student, a = task["student"], task["assignment"]
    result = {"student": student, "assignment": a, "ok": False, "autograded": {}, "feedback": {}, "log": [],
              "seed": None, "error": None, "host": os.uname().nodename, "pid": os.getpid()}
    work = None
    try:
        from grader.seeds import student_seed
        result["seed"] = student_seed(student, a)
        nbgrader = _nbgrader(passed)
        template = nbgrader.template(payload)
        work = tempfile.mkdtemp(prefix="grade-", dir=nbgrader.home)
        for name in ("nbgrader_config.py", "gradebook.db"):
            shutil.copy(os.path.join(template, name), work)
        for name in ("source", "release"):
            shutil.copytree(os.path.join(template, name), os.path.join(work, name))
        _write_files(os.path.join(work, "submitted", student, a), task["files"])
        answer = nbgrader.call({"what": "grade", "root": work, "assignment": a, "student": student}, timeout)
        if answer is None:
            result["error"] = ("timeout", f"grading took over the time limit of {timeout} s per submission")
        elif not answer["ok"]:
            result["error"] = ("grading", f"nbgrader could not grade it: {answer['message']}")
        else:
            result["ok"] = True
        result["autograded"] = _read_files(os.path.join(work, "autograded", student, a))
        result["feedback"] = _read_files(os.path.join(work, "feedback", student, a))
        log = os.path.join(work, "grading_log.jsonl")
        if os.path.exists(log):
            with open(log) as f:
                result["log"] = [json.loads(line) for line in f if line.strip()]
    except Exception as exc:  # the worker's own trouble: reported for this submission only
        result["error"] = ("grading", f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = time.perf_counter() - t0
    return result


def _steps(request):
    """Run one request with nbgrader's API in this process; (ok, message)."""
    from .pipeline import nbgrader_api
    root, a = request["root"], request["assignment"]
    os.chdir(root)
    api = nbgrader_api(root)
    if request["what"] == "release":
        steps = [("generate_assignment", lambda: api.generate_assignment(a, force=True))]
    else:
        steps = [("autograde", lambda: api.autograde(a, request["student"], force=True, create=True)),
                 ("generate_feedback", lambda: api.generate_feedback(a, request["student"], force=True))]
    for name, step in steps:
        outcome = step()
        if not outcome["success"]:
            print(outcome.get("log", "")[-3000:], file=sys.stderr)
            error = (outcome.get("error") or "").strip().splitlines()
            return False, f"{name} failed: {error[-1][:300] if error else 'no reason given'}"
    return True, ""


def _serve():
    """The loop of ``python -m coursekit.grading serve``: one JSON request a line in, one JSON answer a line out."""
    import threading
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever nbgrader or a library prints goes to the log, never into the answers
    parent, home = os.getppid(), os.getcwd()

    def orphaned():  # the worker that started us is gone: so are we, and our private folder
        while os.getppid() == parent:
            time.sleep(1)
        shutil.rmtree(home, ignore_errors=True)
        os._exit(1)
    threading.Thread(target=orphaned, daemon=True).start()
    import nbgrader.apps  # noqa: F401  (imported once, for every request)
    import grader.nbgrader_plugin  # noqa: F401
    for line in sys.stdin:
        try:
            ok, message = _steps(json.loads(line))
        except Exception as exc:
            ok, message = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        print(json.dumps({"ok": ok, "message": message}), file=answers, flush=True)
    shutil.rmtree(home, ignore_errors=True)
    return 0


# ------------------------------------------------------------------ the client: writing what comes back
def _gradebook(course_root):
    from nbgrader.api import Gradebook
    return Gradebook("sqlite:///" + os.path.join(course_root, "gradebook.db"), course_id=COURSE_ID)


def _retry_locked(write, tries=20):
    """Run ``write()``, again while another process holds SQLite's lock (a formgrader open beside us)."""
    from sqlalchemy.exc import OperationalError
    for attempt in range(tries):
        try:
            return write()
        except OperationalError as exc:
            if "locked" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(min(0.1 * 2 ** attempt, 5))


def _replace_folder(folder, files):
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    _write_files(folder, files)


def record(course_root, task, result):
    """Write one graded submission into the course: gradebook, autograded and feedback folders, log, seed.

    Returns the submission's total score, and the faults to report."""
    from grader import seeds
    from grader.nbgrader_plugin import append_log
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
    from sqlalchemy.exc import SAWarning
    student, a = task["student"], task["assignment"]
    db_url = "sqlite:///" + os.path.join(course_root, "gradebook.db")
    name = a + ".ipynb"
    nb = None
    if result["ok"] and name in result["autograded"]:
        nb = nbformat.reads(result["autograded"][name].decode("utf-8"), as_version=4)

    def write():
        with _gradebook(course_root) as gb:
            gb.update_or_create_student(student)
        with _gradebook(course_root) as gb:
            if task.get("timestamp"):
                gb.update_or_create_submission(a, student, timestamp=task["timestamp"])
            else:
                gb.update_or_create_submission(a, student)
            if nb is None:  # grading failed: zero for every cell, as nbgrader does for a missing notebook
                for grade in gb.find_submission_notebook(a, a, student).grades:
                    grade.auto_score = 0
                    grade.needs_manual_grade = False
                gb.db.commit()
        if nb is not None:
            resources = {"nbgrader": {"notebook": a, "assignment": a, "student": student, "db_url": db_url}}
            SaveAutoGrades().preprocess(nb, resources)
            AssignLatePenalties().preprocess(nb, resources)
        with _gradebook(course_root) as gb:
            return gb.find_submission_notebook(a, a, student).score
    with warnings.catch_warnings():  # nbgrader's own add_submission makes SQLAlchemy warn about its autoflush
        warnings.simplefilter("ignore", category=SAWarning)
        score = _retry_locked(write)
    if nb is not None:
        _replace_folder(os.path.join(course_root, "autograded", student, a), result["autograded"])
        _replace_folder(os.path.join(course_root, "feedback", student, a), result["feedback"])
    else:  # nothing of an earlier submission may stand for this one: no autograded notebook, feedback that says why
        shutil.rmtree(os.path.join(course_root, "autograded", student, a), ignore_errors=True)
        reason = html.escape(result["error"][1] if result["error"] else "nbgrader returned no graded notebook")
        _replace_folder(os.path.join(course_root, "feedback", student, a), {f"{a}.html": (
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(a)}</title></head><body>"
            f"<h1>{html.escape(a)}</h1><p>This submission could not be graded, so it scores 0: {reason}.</p>"
            f"<p>Your instructor has been told; ask them before you submit again.</p></body></html>").encode()})
    faults = []
    for rec in result["log"]:
        append_log(course_root, rec)
        faults += [tuple(f) for f in rec.get("faults", [])]
    if result["error"]:
        kind, text = result["error"]
        append_log(course_root, {
            "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "student": student, "assignment": a, "notebook": a, "isolated": True, "seed": result["seed"],
            "faults": [[kind, text]]})
        faults.append((kind, text))
    if result["seed"] is not None:
        seeds.record(course_root, student, a, result["seed"])
    return score, faults


# ------------------------------------------------------------------ the client: the whole class
def _passed_env(isolated, env=None):
    """The settings a worker's nbgrader gets from the client's environment (``env``, or this process's)."""
    env = os.environ if env is None else env
    passed = {var: env[var] for var in PASSED_ENV if var in env}
    if isolated:
        passed.pop("COURSE_ISOLATION", None)
    else:
        passed["COURSE_ISOLATION"] = "none"
    return passed


# What a local cluster's processes would do between tasks and nobody here looks at: Dask's sampling profiler (every
# 10 ms), its event-loop watchdog (every 20 ms) and its system monitor (every 0.5 s). Idle, they cost each worker and
# the scheduler's process about 4% of a core, which the cores grading beside them need.
QUIET_DASK = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s",
              "distributed.admin.system-monitor.interval": "5s"}


@contextlib.contextmanager
def local_cluster(n_workers, **kwargs):
    """A Dask cluster of ``n_workers`` grading processes on 127.0.0.1, one thread each, as `course grade` starts one
    (``kwargs`` go to ``LocalCluster``: a protocol, a security, ...). ``memory_limit=0``: the sandbox limits each
    kernel's memory; the nanny must not kill a worker for its children."""
    import dask
    from distributed import LocalCluster
    with dask.config.set(QUIET_DASK), LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address="127.0.0.1:0", memory_limit=0, **kwargs) as cluster:
        yield cluster


@contextlib.contextmanager
def _cluster(jobs, scheduler, security):
    """A Dask client: on the scheduler at ``scheduler``, or on a local cluster of ``jobs`` processes."""
    import logging

    from distributed import Client
    if scheduler:
        with Client(scheduler, security=security, timeout="30s") as client:
            yield client
        return
    with local_cluster(jobs, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def grade_class(course_root=COURSE_DIR, assignments=None, *, jobs=None, scheduler=None, security=None,
                timeout=1200, isolated=True, progress=True, release_first=True, env=None, only_students=None):
    """Grade every submission in ``<course_root>/submitted`` (or only ``assignments``); returns a ``Summary``."""
    from distributed import as_completed
    from tqdm import tqdm
    t0 = time.perf_counter()
    course_root = os.path.abspath(course_root)
    summary = Summary(isolated=isolated)
    source = os.path.join(course_root, "source")
    wanted = sorted(assignments or [a for a in os.listdir(source) if os.path.isdir(os.path.join(source, a))])
    if release_first:  # the gradebook learns the assignments' cells
        from .pipeline import release
        for a in wanted:
            if os.path.isdir(os.path.join(source, a)):
                release(course_root, a)
    roster = None
    if os.path.exists(os.path.join(course_root, "gradebook.db")):
        with _gradebook(course_root) as gb:
            roster = {s.id for s in gb.students} or None
    tasks, summary.problems = collect(course_root, set(assignments) if assignments else None, roster, only_students)
    passed = _passed_env(isolated, env)
    jobs = jobs or os.cpu_count() or 1
    if tasks:
        with _cluster(jobs, scheduler, security) as client:
            summary.workers = len(client.scheduler_info()["workers"])
            payloads = {a: client.scatter(course_payload(course_root, a), broadcast=True)
                        for a in sorted({t["assignment"] for t in tasks})}
            # at most a few tasks per worker in flight: their files are read when they are sent
            waiting, futures, numbers = iter(tasks), {}, itertools.count()
            done = as_completed(loop=client.loop)

            def send():
                task = next(waiting, None)
                if task is not None:
                    future = client.submit(grade_submission, payloads[task["assignment"]], with_files(task), timeout,
                                           passed, pure=False, key=f"grade-{task['assignment']}-{task['student']}-"
                                                                   f"{os.getpid()}-{next(numbers)}")
                    futures[future] = task
                    done.add(future)
            for _ in range(max(4, 3 * summary.workers)):
                send()
            bar = tqdm(total=len(tasks), unit="submission", desc="grading", disable=not progress, file=sys.stderr)
            for future in done:
                task = futures.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # workers died under it more often than the scheduler allows
                    result = {"ok": False, "autograded": {}, "feedback": {}, "log": [], "seed": None,
                              "error": ("worker", f"the grading workers failed on it: {type(exc).__name__}: "
                                                  f"{str(exc)[:200]}")}
                future.release()
                send()
                score, faults = record(course_root, task, result)
                summary.graded[(task["student"], task["assignment"])] = score
                summary.graded_by[(task["student"], task["assignment"])] = (result.get("host"), result.get("pid"))
                summary.seeds[(task["student"], task["assignment"])] = result.get("seed")
                summary.faults += [(task["student"], task["assignment"], k, t) for k, t in faults]
                bar.update(1)
            bar.close()
    summary.seconds = time.perf_counter() - t0
    return summary


def print_summary(summary, course_root, out=None):
    p = lambda *a: print(*a, file=out or sys.stdout)  # noqa: E731
    p(f"graded {len(summary.graded)} submission(s) in {summary.seconds:.1f} s on {summary.workers} worker(s); "
      f"isolation: {'bubblewrap sandbox' if summary.isolated else 'NONE (--no-isolation)'}")
    p(f"  {'student':<24} {'assignment':<22} {'score':>6}  hidden-case seed")
    for (student, a), score in sorted(summary.graded.items()):
        p(f"  {student:<24} {a:<22} {score:>6g}  {summary.seeds.get((student, a), '')}")
    if summary.problems:
        p(f"{len(summary.problems)} problem(s) with the submissions:")
        for pr in summary.problems:
            p(f"  {pr.student} / {pr.assignment}: {pr.reason}")
    if summary.faults:
        p(f"{len(summary.faults)} fault(s) flagged for a human (details in "
          f"{os.path.join(course_root, 'grading_log.jsonl')}):")
        for student, a, kind, text in summary.faults:
            p(f"  {student} / {a}: {kind}: {str(text)[:200]}")
    elif summary.graded:
        p("no graded submission was flagged (no dead kernel, time-out, or blocked attempt)")
    p(f"hidden-case seeds: {os.path.join(course_root, 'hidden_seeds.csv')}")


def security_from(args):
    """Dask TLS settings from ``--tls-ca-file``/``--tls-cert``/``--tls-key`` (None when not given)."""
    if not getattr(args, "tls_ca_file", None):
        return None
    from distributed.security import Security
    return Security(tls_ca_file=args.tls_ca_file, tls_client_cert=args.tls_cert, tls_client_key=args.tls_key,
                    require_encryption=True)


if __name__ == "__main__":
    sys.exit(_serve() if sys.argv[1:] == ["serve"] else "usage: python -m coursekit.grading serve")
