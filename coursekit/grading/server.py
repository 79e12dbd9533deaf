"""The nbgrader process of a grading worker: ``python -m coursekit.grading serve``.

It imports nbgrader and the grader once, then runs one request at a time through nbgrader's own API (release an
assignment into a private course folder; autograde and generate feedback for one student) and answers each with
one JSON line. ``Nbgrader`` is the worker's handle on it.
"""
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from grader.processes import descendants
from grader.slots import empty_group, make_group, remove_stale_groups

from .files import write_files
from ..hub.service_client import SAFE_SETTINGS

HOME_PREFIX, SERVE_TMP = "course-nbgrader-", "course-tmp-"  # an nbgrader process's home and temporary folder
TMP_NOTE = "tmp-folder"  # the file in its home that names its temporary folder
# the settings a worker's nbgrader takes from the client: those a request to the hub's grading service may carry
# too (SAFE_SETTINGS, one list), and the three that the service keeps for itself (the sandbox on, its memory, the
# memory of the nbgrader process)
PASSED_ENV = (*SAFE_SETTINGS, "COURSE_ISOLATION", "COURSE_SANDBOX_MEMORY_MB", "COURSE_GRADING_MEMORY_MB")
# what one grading worker's nbgrader process (with its judge server and forked judges, not its sandboxes) may hold,
# in MB: read by whoever starts it (COURSE_GRADING_MEMORY_MB in its environment)
GRADING_MEMORY_MB = 3072
GROUP_PREFIX = "course-grading-"  # a worker's nbgrader process's control group: the prefix, the worker's pid, ...


def grading_memory_bytes(passed=None):
    """The bound on one nbgrader process, in bytes: ``passed`` (the client's settings), else this process's
    environment (the hub's service: its own), else ``GRADING_MEMORY_MB``."""
    value = (passed or {}).get("COURSE_GRADING_MEMORY_MB") or os.environ.get("COURSE_GRADING_MEMORY_MB", "")
    return int(str(value).strip() or GRADING_MEMORY_MB) * 2 ** 20


def bounded(argv, memory_bytes, name):
    """``argv`` run with its memory bounded, the best way this process has: (argv, control groups it runs in, the
    bound in words for the grading summary). As root, a memory control group of its own (``grader.slots``), below
    this process's own (cgroup v1) so that a limit on this one holds it too; as a plain user, a systemd scope with
    ``MemoryMax`` where the user's systemd delegates one, else a limit on its address space (a soft RLIMIT_AS, which
    the judge server lifts for itself, and each sandbox sets its own)."""
    size = f"{memory_bytes / 2 ** 30:g} GB"
    groups = []
    if os.geteuid() == 0:
        remove_stale_groups(GROUP_PREFIX, parent="course-grading", nested=True, then=_remove_stale_folders)
        groups = make_group(name, memory_bytes, parent="course-grading", nested=True)
    if groups:
        join = "".join(f'echo $$ > "{g}/cgroup.procs" && ' for g in groups)
        return (["/bin/sh", "-c", f'{join}exec "$@"', "sh", *argv], groups,
                f"a memory control group of its own ({size}, with its judge)")
    if _user_scopes():
        return (["systemd-run", "--user", "--scope", "--quiet", "--collect", "-p", f"MemoryMax={memory_bytes}",
                 "--", *argv], [], f"a systemd scope of the user's ({size}, MemoryMax, with its judge)")
    return (["prlimit", f"--as={memory_bytes}:", "--", *argv], [],
            f"an address-space limit ({size}, RLIMIT_AS; no control group as a plain user here)")


def _remove_stale_folders(group):
    """The folders of the nbgrader process of stale control group ``group`` (``Nbgrader`` names it after its home),
    removed once the group's processes are killed. Its worker was killed, and the next worker's start here can come
    before that process removed them itself (``serve``'s ``orphaned``): the class with a dying worker left a home and
    a temporary folder on CI. The home holds the path of the temporary folder (``TMP_NOTE``), and both must lie in
    this process's temporary folder, where ``Nbgrader`` made them; anything else stays."""
    home = group[len(GROUP_PREFIX):].partition("-")[2]
    tmp_root = tempfile.gettempdir()
    if not home.startswith(HOME_PREFIX) or os.sep in home:
        return
    home = os.path.join(tmp_root, home)
    if not _ours(home):  # gone already, or not the one it made (a shared /tmp)
        return
    try:
        fd = os.open(os.path.join(home, TMP_NOTE), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as f:
            tmp = f.read(4096)
    except OSError:
        tmp = ""
    folders = [home]
    if os.path.dirname(tmp) == tmp_root and os.path.basename(tmp).startswith(SERVE_TMP) and _ours(tmp):
        folders.append(tmp)
    remove_below(None, folders)


def _ours(path):
    """Whether ``path`` is a folder of this user's, not a link (in a shared temporary folder)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


_SCOPES = []


def _user_scopes():
    """Whether this user's systemd makes scopes with a memory limit (tried once)."""
    if not _SCOPES:
        ok = False
        if shutil.which("systemd-run"):
            try:
                ok = subprocess.run(["systemd-run", "--user", "--scope", "--quiet", "--collect", "-p", "MemoryMax=1G",
                                     "--", "true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, timeout=10).returncode == 0
            except (OSError, subprocess.TimeoutExpired):
                ok = False
        _SCOPES.append(ok)
    return _SCOPES[0]


class Nbgrader:
    """One long-lived nbgrader process per grading worker (``python -m coursekit.grading serve``).

    It imports nbgrader and the grader once, then runs one request at a time through nbgrader's own API
    (release an assignment into a private course folder; autograde and generate feedback for one student) and
    answers each with one JSON line. A request past its time limit kills the process (and with it the kernels
    and judges it started) and the next request starts a fresh one. It exits when the worker that started it
    goes.
    """

    def __init__(self, passed):
        self.passed = passed
        self.home = tempfile.mkdtemp(prefix=HOME_PREFIX)
        # the process's temporary folder (its kernels' folders, the judge's, masked modules): its own, removed with
        # it even when it is killed at a time limit; beside home, not in it, as a kernel's socket path must stay short
        self.tmp = tempfile.mkdtemp(prefix=SERVE_TMP)
        with open(os.path.join(self.home, TMP_NOTE), "w") as f:
            f.write(self.tmp)
        self.log = open(os.path.join(self.home, "nbgrader.log"), "w+b")
        argv, self.groups, self.bound = bounded([sys.executable, "-m", "coursekit.grading", "serve"],
                                                grading_memory_bytes(passed),
                                                f"{GROUP_PREFIX}{os.getpid()}-{os.path.basename(self.home)}")
        self.proc = subprocess.Popen(argv, cwd=self.home,
                                     env=_env(self.home, self.tmp, passed), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)
        self.templates = {}  # {source digest: a private course folder with the assignment released}
        from grader.sandbox import separation
        self.separation = separation(passed)  # what keeps the sandboxes it starts apart, in words

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
        self.log.seek(max(start, os.fstat(self.log.fileno()).st_size - 4096))  # its last lines, never all of it
        tail = self.log.read(4096).decode("utf-8", "replace").strip().splitlines()
        return {"ok": False, "message": f"nbgrader stopped (exit status {self.proc.returncode})"
                                        + (f": {tail[-1][:300]}" if tail else "")}

    def stop(self):
        """Kill the process and every process below it, then remove its folders. Its kernels run in sessions of
        their own (jupyter_client starts each so), so killing its process group alone left a kernel at work in
        them, and a file it wrote as they were removed left a folder behind. It is stopped first, so that it starts
        nothing more; then what is below it is found through it, while it is there."""
        if self.proc.poll() is None:  # still ours (a process reaped already may have given its id to another)
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGSTOP)
            remove_below(self.proc.pid, [self.home, self.tmp])
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        remove_below(None, [self.home, self.tmp])  # what the last kill left (its id may be another's by now)
        for group in self.groups:
            empty_group(group)

    def template(self, payload):
        """The private course folder where ``payload``'s assignment is released, made once per process."""
        root = self.templates.get(payload["digest"])
        if root and os.path.isdir(root):
            return root
        root = tempfile.mkdtemp(prefix=f"template-{payload['assignment']}-", dir=self.home)
        with open(os.path.join(root, "nbgrader_config.py"), "wb") as f:
            f.write(payload["config"])
        write_files(os.path.join(root, "source", payload["assignment"]), payload["source"])
        answer = self.call({"what": "release", "root": root, "assignment": payload["assignment"]}, timeout=600)
        if not answer or not answer["ok"]:
            raise RuntimeError(f"the worker could not release {payload['assignment']}: "
                               f"{answer['message'] if answer else 'it took over 600 s'}")
        self.templates[payload["digest"]] = root
        return root




def _env(root, tmp, passed):
    from ..pipeline import nbgrader_env
    env = nbgrader_env(root)
    for var in PASSED_ENV:
        env.pop(var, None)
    env.update(passed)
    env["TMPDIR"] = tmp
    return env


def remove_below(pid, folders, attempts=20):
    """Kill every process below ``pid`` (None: none) and remove ``folders``, again while anything is left (a process
    still at work in them could write a file as they are removed); True when they are gone. A folder is removed
    only while it is the one it was at the start: in a shared /tmp, another user can make a folder of the same name
    once ours is gone, and that one is not ours to empty."""
    first = {}
    for folder in folders:
        with contextlib.suppress(OSError):
            st = os.lstat(folder)
            first[folder] = (st.st_dev, st.st_ino)
    for attempt in range(attempts):
        for below in descendants(pid) if pid is not None else ():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(below, signal.SIGKILL)
        left = []
        for folder in folders:
            try:
                st = os.lstat(folder)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) != first.get(folder):
                continue  # gone, and another in its place
            shutil.rmtree(folder, ignore_errors=True)
            if os.path.lexists(folder):
                left.append(folder)
        if not left:
            return True
        time.sleep(0.25)
    return False


def _remove_own_folders(home, attempts=20):
    """The serving process's folders, as it ends: its home and its temporary folder (``Nbgrader`` made both).

    A server whose worker died in the middle of a submission still has that submission's kernel and judge running,
    writing into these folders: they are stopped first (every process below this one), or a file they write while
    the folders are being removed would leave them behind."""
    tmp = os.environ.get("TMPDIR", "")
    remove_below(os.getpid(), [home] + ([tmp] if os.path.basename(tmp).startswith(SERVE_TMP) else []), attempts)




def _steps(request):
    """Run one request with nbgrader's API in this process; (ok, message)."""
    from ..pipeline import nbgrader_api
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


def serve():
    """The loop of ``python -m coursekit.grading serve``: one JSON request a line in, one JSON answer a line out."""
    import threading
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever nbgrader or a library prints goes to the log, never into the answers
    parent, home = os.getppid(), os.getcwd()

    def orphaned():  # the worker that started us is gone: so are we, and our private folder
        while os.getppid() == parent:
            time.sleep(1)
        _remove_own_folders(home)
        os._exit(1)
    threading.Thread(target=orphaned, daemon=True).start()
    import nbgrader.apps  # noqa: F401  (imported once, for every request)
    import grader.nbgrader_plugin  # noqa: F401
    try:
        for line in sys.stdin:
            try:
                ok, message = _steps(json.loads(line))
            except Exception as exc:
                ok, message = False, f"{type(exc).__name__}: {str(exc)[:300]}"
            print(json.dumps({"ok": ok, "message": message}), file=answers, flush=True)
    except BrokenPipeError:  # the worker went while we answered
        return 1
    finally:
        _remove_own_folders(home)
    return 0


