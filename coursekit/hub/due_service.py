"""``GET /due`` of the hub's grading service: a student's own due dates, for their Assignments tab.

Root never opens a file of a course folder. For each course the student is in (the hub's state on a hub of several
courses; the gradebook's students on a hub of one), the gradebook is read by one of that course's instructors, in a
process of theirs (``python -P -m coursekit.student_due``: read-only, no nbgrader constructor, which would write):

* the gradebook must be a regular file with one link, owned by an instructor of the course (named in the service's
  settings), opened without following a link: the reader runs as that instructor, never as whoever a link points at;
* the reader has a plain environment, ``/`` as its folder, a session of its own and a memory control group of its own
  where root can make one (``READER_MEMORY``), both killed whole when it ends; its answer is read up to
  ``READER_OUTPUT`` bytes within ``READER_TIMEOUT`` seconds;
* an assignment counts as released when the exchange holds it (``<exchange>/<course id>/outbound/<name>``).

Answers are kept ``KEEP`` seconds per (course, student) while the gradebook is unchanged, one read runs per student at
a time (a second asks the first's answer), and the reads have a pool of their own: students asking cannot hold up
grading, nor grading them.
"""
import concurrent.futures
import json
import logging
import os
import pwd
import select
import signal
import stat
import subprocess
import sys
import threading
import time

from grader.plain import inert

READER_TIMEOUT = 60
READER_OUTPUT = 1 << 20
READER_MEMORY = 1 << 30
KEEP = 60
_log = logging.getLogger("course-grading")  # the service's own


def _gradebook_owner(folder, instructors):
    """(uid, gid) of the instructor who owns ``folder``'s gradebook; None when there is none; raises ValueError for
    one that is not a plain file of one of ``instructors``."""
    try:
        fd = os.open(os.path.join(folder, "gradebook.db"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"its gradebook cannot be opened ({exc.strerror}: a link is refused)") from None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        raise ValueError("its gradebook is not a plain file of one link")
    uids = {}
    for name in instructors:
        try:
            uids[pwd.getpwnam(name).pw_uid] = pwd.getpwnam(name).pw_gid
        except KeyError:
            continue
    if st.st_uid == 0 or st.st_uid not in uids:
        raise ValueError("its gradebook is not owned by an instructor of the course")
    return st.st_uid, uids[st.st_uid]


def _run_reader(command, uid, gid):
    """The reader's output (bytes), run as ``uid`` in a session and a control group of its own, bounded."""
    from grader.slots import empty_group, join_group, make_group
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/nonexistent",
           **{k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ}}
    groups = make_group(f"course-due-{os.getpid()}-{threading.get_ident()}", READER_MEMORY, processes=32,
                        parent="course-due")
    proc = subprocess.Popen(command, env=env, cwd="/", user=uid, group=gid, extra_groups=[], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        if groups:
            join_group(groups, proc.pid)
        out, end = [], time.monotonic() + READER_TIMEOUT
        size = 0
        while True:
            left = end - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {READER_TIMEOUT} s")
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > READER_OUTPUT:
                raise ValueError(f"an answer of over {READER_OUTPUT} bytes")
            out.append(chunk)
        if proc.wait(timeout=max(1.0, end - time.monotonic())) != 0:
            raise ValueError(f"the reader ended with status {proc.returncode}")
        return b"".join(out)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for group in groups:
            empty_group(group)
        proc.stdout.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _students_of(config, folder):
    """The students the hub's state gives the course in ``folder``, or None on a hub of one course (its gradebook's
    students are its roster's)."""
    if not config.get("hub_state"):
        return None
    from ..exchange.course_id import course_id_of
    from .state import HubState
    courses = HubState(config["hub_state"]).read()["courses"]
    try:
        return set(courses.get(course_id_of(folder), {}).get("students", {}))
    except Exception:  # a course folder whose id cannot be read: nobody is in it here
        return set()


class DueDates:
    """The service's reads of due dates (see the module), with their own pool, one read per student at a time, and
    answers kept ``KEEP`` seconds while each gradebook is unchanged."""

    def __init__(self, current):
        self.current = current  # the service's settings, as they are now
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="course-due")
        self.lock = threading.Lock()
        self.asking = {}  # {student: the future of their read}
        self.kept = {}    # {(folder, student): (gradebook's time of change, when read, answer or None)}

    def ask(self, student):
        """A future of ``student``'s due dates (a list, a course each)."""
        with self.lock:
            future = self.asking.get(student)
            if future is not None:
                return future
            future = self.asking[student] = self.pool.submit(self.of, student)
        # outside the lock: a read done already runs the callback here and now, and under the lock that call waited
        # for the lock it held (the service's event loop hung; CI's loaded host met it)
        future.add_done_callback(lambda done: self._done(student, done))
        return future

    def _done(self, student, future):
        with self.lock:
            if self.asking.get(student) is future:
                del self.asking[student]

    def of(self, student):
        config = self.current()
        out = []
        for folder, course in sorted(config["courses"].items()):
            members = _students_of(config, folder)
            if members is not None and student not in members:
                continue
            found = self.one(folder, course.get("instructors", []), student, config.get("exchange") or "")
            if found and found.get("assignments"):
                out.append(found)
        return out

    def one(self, folder, instructors, student, exchange):
        try:
            changed = os.lstat(os.path.join(folder, "gradebook.db")).st_mtime_ns
        except OSError:
            return None
        kept = self.kept.get((folder, student))
        if kept and kept[0] == changed and time.monotonic() - kept[1] < KEEP:
            return kept[2]
        answer = None
        try:
            owner = _gradebook_owner(folder, instructors)
            if owner is not None:
                raw = _run_reader([sys.executable, "-P", "-m", "coursekit.student_due", folder, student, exchange],
                                  *owner)
                answer = json.loads(raw)
                if not isinstance(answer, dict) or not isinstance(answer.get("assignments"), list):
                    raise ValueError("not an answer of due dates")
        except (OSError, ValueError, TimeoutError, subprocess.SubprocessError) as exc:
            _log.warning("due dates of %s for %s not read: %s", inert(folder), inert(student), inert(str(exc)[:300]))
            answer = None
        self.kept[(folder, student)] = (changed, time.monotonic(), answer)
        return answer
