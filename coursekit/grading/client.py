"""The client of a class grading run: the Dask cluster (on the hub: threads, each calling the hub's grading service),
the tasks sent to it, and what comes back (a ``grader.graded.Graded``) written into the course (only the client
writes: gradebook, autograded, feedback, grading log, hidden seeds)."""
import collections
import concurrent.futures
import contextlib
import functools
import html
import itertools
import os
import queue
import shutil
import sys
import time
import warnings

from grader.graded import Graded

from ..paths import COURSE_DIR
from .files import write_files
from .server import PASSED_ENV
from .submissions import course_payload, gradable, with_files
from .summary import Problem, Summary
from .task import grade_submission

from ..hub.service_client import GRADING_TIMEOUT, grade_by_service, on_the_hub
from ..pipeline import gradebook as _gradebook, save_grades


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
    write_files(folder, files)


def write_graded(course_root, task, graded):
    """Write one graded submission (a ``grader.graded.Graded``) into the course: its gradebook row, autograded and
    feedback folders, lines of the grading log and seed.

    Returns the submission's total score, and the faults to report."""
    from grader.untrusted import CSP
    from sqlalchemy.exc import SAWarning
    student, a = task["student"], task["assignment"]
    db_url = "sqlite:///" + os.path.join(course_root, "gradebook.db")
    nb = graded.notebook()

    def write():
        with _gradebook(course_root) as gb:
            gb.update_or_create_student(student)
        with _gradebook(course_root) as gb:
            if task.get("timestamp"):
                gb.update_or_create_submission(a, student, timestamp=task["timestamp"])
            else:
                gb.update_or_create_submission(a, student)
        # the scores, or zero for every cell when grading failed (as nbgrader does for a missing notebook)
        save_grades(nb, {"nbgrader": {"notebook": a, "assignment": a, "student": student, "db_url": db_url}})
        with _gradebook(course_root) as gb:
            return gb.find_submission_notebook(a, a, student).score
    with warnings.catch_warnings():  # nbgrader's own add_submission makes SQLAlchemy warn about its autoflush
        warnings.simplefilter("ignore", category=SAWarning)
        score = _retry_locked(write)
    if nb is not None:
        _replace_folder(os.path.join(course_root, "autograded", student, a), graded.autograded)
        _replace_folder(os.path.join(course_root, "feedback", student, a), graded.feedback)
        # the worker knows no due date, extension or penalty (it has no gradebook): with a due date, the page is made
        # here from the gradebook (nbgrader's generate_feedback; coursekit/extend.py)
        from ..extend import feedback_with_due_date
        feedback_with_due_date(course_root, a, student)
    else:  # nothing of an earlier submission may stand for this one: no autograded notebook, feedback that says why
        shutil.rmtree(os.path.join(course_root, "autograded", student, a), ignore_errors=True)
        reason = html.escape(graded.error[1] if graded.error else "nbgrader returned no graded notebook")
        _replace_folder(os.path.join(course_root, "feedback", student, a), {f"{a}.html": (
            f"<!DOCTYPE html><html><head><meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
            f"<meta charset='utf-8'><title>{html.escape(a)}</title></head><body>"
            f"<h1>{html.escape(a)}</h1><p>This submission could not be graded, so it scores 0: {reason}.</p>"
            f"<p>Your instructor has been told; ask them before you submit again.</p></body></html>").encode()})
    graded.write_log_and_seed(course_root)
    return score, graded.faults()


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
def dask_client(jobs, scheduler, security):
    """A Dask client: on the scheduler at ``scheduler``, or on a local cluster of ``jobs`` processes."""
    import logging

    from distributed import Client
    if scheduler:
        with Client(scheduler, security=security, timeout="30s") as client:
            yield client
        return
    with local_cluster(jobs, silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


class _DaskPool:
    """The grading tasks on a Dask cluster (``dask_client``): each comes back as a ``Graded``'s plain data."""

    def __init__(self, client):
        from distributed import as_completed
        self.client, self.workers = client, len(client.scheduler_info()["workers"])
        self.done = as_completed(loop=client.loop)

    def share(self, payload):
        return _scatter(self.client, payload)

    def submit(self, fn, *args, key):
        future = self.client.submit(fn, *args, pure=False, key=key)
        self.done.add(future)
        return future

    def completed(self):
        """Each future as it finishes, those submitted meanwhile included."""
        return iter(self.done)

    @staticmethod
    def result(future):
        return Graded.from_plain(future.result())

    @staticmethod
    def release(future):
        future.release()


class _ThreadPool:
    """The grading tasks on the hub: each an HTTP call to the hub's grading service (``grade_by_service``), which
    waits in a thread of this process; no Dask cluster is started for them."""

    def __init__(self, executor, workers):
        self.executor, self.workers = executor, workers
        self.finished, self.pending = queue.SimpleQueue(), 0

    @staticmethod
    def share(payload):
        return payload

    def submit(self, fn, *args, key=None):
        future = self.executor.submit(fn, *args)
        self.pending += 1
        future.add_done_callback(self.finished.put)
        return future

    def completed(self):
        """Each future as it finishes, those submitted meanwhile included."""
        while self.pending:
            future = self.finished.get()
            self.pending -= 1
            yield future

    @staticmethod
    def result(future):
        return future.result()

    @staticmethod
    def release(future):
        pass


@contextlib.contextmanager
def _pool(jobs, scheduler, security, by_service):
    """Where the tasks go: threads calling the hub's grading service, or a Dask cluster (``dask_client``)."""
    if by_service:
        with concurrent.futures.ThreadPoolExecutor(jobs, thread_name_prefix="grade-by-service") as executor:
            yield _ThreadPool(executor, jobs)
        return
    with dask_client(jobs, scheduler, security) as client:
        yield _DaskPool(client)


def _scatter(client, payload):
    """One future for the whole of an assignment's payload, on every worker. (A dict given to ``scatter`` is read as
    {key: data}: each of its entries would become a future keyed by the entry's name, and every assignment's
    payload has the same names, so all assignments after the first would be graded with the first one's.)"""
    key = f"course-payload-{payload['assignment']}-{payload['digest']}"
    return client.scatter({key: payload}, broadcast=True)[key]


def grade_class(course_root=COURSE_DIR, assignments=None, *, jobs=None, scheduler=None, security=None,
                timeout=GRADING_TIMEOUT, isolated=True, progress=True, release_first=True, env=None, only_students=None):
    """Grade every submission in ``<course_root>/submitted`` (or only ``assignments``); returns a ``Summary``."""
    from tqdm import tqdm

    from grader.plain import raw_stream
    from grader.late import read_policy
    t0 = time.perf_counter()
    course_root = os.path.abspath(course_root)
    read_policy(course_root)  # a late policy that does not parse stops grading before anything is graded
    summary = Summary(isolated=isolated)
    source = os.path.join(course_root, "source")
    wanted = sorted(assignments or [a for a in os.listdir(source) if os.path.isdir(os.path.join(source, a))])
    unreleased = {}  # {assignment: why it could not be released}: its submissions are named, not graded
    if release_first:  # the gradebook learns the assignments' cells
        from ..pipeline import generate_release
        for a in wanted:
            if os.path.isdir(os.path.join(source, a)):
                try:
                    generate_release(course_root, a)
                except Exception as exc:  # one assignment's trouble: the others are graded
                    first = str(exc).strip().splitlines()
                    unreleased[a] = f"{type(exc).__name__}: {first[-1][:300] if first else 'no reason given'}"
    roster = None
    if os.path.exists(os.path.join(course_root, "gradebook.db")):
        with _gradebook(course_root) as gb:
            roster = {s.id for s in gb.students} or None
    summary.problems = [Problem("(every student)", a, f"the assignment could not be released, so none of its "
                                                      f"submissions was graded: {why}")
                        for a, why in sorted(unreleased.items())]
    tasks, problems = gradable(course_root, set(assignments) if assignments else None, roster, only_students,
                              set(unreleased))
    summary.problems += problems
    passed = _passed_env(isolated, env)
    # one worker per core, and no more than there are submissions: each worker starts PyTorch, nbgrader and a
    # judge before its first submission (a late submission graded alone needs one)
    jobs = jobs or max(1, min(os.cpu_count() or 1, len(tasks)))
    by_service = on_the_hub() and not scheduler  # an instructor on the hub: the hub's grading service grades, as root
    summary.by_service = by_service
    if tasks:
        with _pool(jobs, scheduler, security, by_service) as pool:
            grade = functools.partial(grade_by_service, course_root) if by_service else grade_submission
            summary.workers = pool.workers
            payloads = {a: pool.share(course_payload(course_root, a))
                        for a in sorted({t["assignment"] for t in tasks})}
            # at most a few tasks per worker in flight: their files are read when they are sent
            waiting, futures, numbers = iter(tasks), {}, itertools.count()
            # a submission stopped by the time limit is graded once more, with twice the limit, once every first
            # grading has finished and with at most half the workers on such retries: a loaded machine (other work
            # beside the grading, a worker restarting) must not zero an honest submission
            again = collections.deque()
            cap, retry_slots = max(4, 3 * summary.workers), max(1, summary.workers // 2)

            def next_task():
                task = next(waiting, None)
                if task is not None:
                    return task
                in_flight = list(futures.values())
                if again and len(in_flight) < retry_slots and all(t.get("again") for t in in_flight):
                    return again.popleft()
                return None

            def top_up():
                while len(futures) < cap and (task := next_task()) is not None:
                    limit = 2 * timeout if task.get("again") else timeout
                    future = pool.submit(grade, payloads[task["assignment"]], with_files(task), limit, passed,
                                         key=f"grade-{task['assignment']}-{task['student']}-{os.getpid()}-"
                                             f"{next(numbers)}")
                    futures[future] = task
            top_up()
            # the bar draws with carriage returns: on the terminal itself, past the command's inert output
            bar = tqdm(total=len(tasks), unit="submission", desc="grading", disable=not progress,
                       file=raw_stream(sys.stderr))
            for future in pool.completed():
                task = futures.pop(future)
                try:
                    graded = pool.result(future)
                except Exception as exc:  # workers died under it more often than the scheduler allows
                    graded = Graded.failed(task["student"], task["assignment"], "worker",
                                           f"the grading workers failed on it: {type(exc).__name__}: "
                                           f"{str(exc)[:200]}")
                pool.release(future)
                timed_out = (graded.error or ("",))[0] == "timeout"
                if timed_out and not task.get("again"):  # once more, after the others
                    again.append(dict(task, again=True))
                    summary.again.append((task["student"], task["assignment"]))
                top_up()
                if timed_out and not task.get("again"):
                    continue
                if timed_out:  # the second time
                    graded.error = ("timeout", f"grading took over the time limit of {timeout} s per submission, "
                                               f"and over twice that ({2 * timeout} s) graded again after the "
                                               f"others")
                score, faults = write_graded(course_root, task, graded)
                summary.graded[(task["student"], task["assignment"])] = score
                summary.graded_by[(task["student"], task["assignment"])] = (graded.host, graded.pid)
                summary.seeds[(task["student"], task["assignment"])] = graded.seed
                if graded.separation:
                    summary.separations.add(graded.separation)
                if graded.bound:
                    summary.bounds.add(graded.bound)
                summary.faults += [(task["student"], task["assignment"], k, t) for k, t in faults]
                bar.update(1)
            bar.close()
    summary.seconds = time.perf_counter() - t0
    return summary



def security_from(args):
    """Dask TLS settings from ``--tls-ca-file``/``--tls-cert``/``--tls-key`` (None when not given)."""
    if not getattr(args, "tls_ca_file", None):
        return None
    from distributed.security import Security
    return Security(tls_ca_file=args.tls_ca_file, tls_client_cert=args.tls_cert, tls_client_key=args.tls_key,
                    require_encryption=True)


