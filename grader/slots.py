"""Each sandbox's own budget (``grader.sandbox.claim``): a user of its own, and control groups where possible.

A process limit (RLIMIT_NPROC) counts per user, so sandboxes that run at the same time as the same user share one:
one student's fork bomb would stop another's kernel from starting a thread. When the grader runs as root, each
sandbox therefore claims a uid of its own (``COURSE_SANDBOX_UID_BASE``, 61000, and up; ``COURSE_SANDBOX_SLOTS`` of
them), held with a lock file (``COURSE_SANDBOX_LOCKS``) for the sandbox's life and taken only when no process of
that uid is left. It is given back (``Slot.release``) with nothing of the sandbox left in the kernel for the next one:
what still runs as the uid killed, its keyrings emptied (``scrub``), its control groups removed. Where the grader may make control groups (cgroup v1 ``pids`` and ``memory``, or v2 with those
controllers; ``COURSE_SANDBOX_CGROUPS=0`` turns them off), the sandbox also runs in one of its own, which caps its
processes and its memory together, across all its processes.
"""
import errno
import fcntl
import os
import subprocess
import sys
import time


class SlotsBusy(RuntimeError):
    """Every sandbox user is held by a running sandbox."""


def _env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


class Slot:
    """One sandbox's own budget: its uid (held with a lock for the sandbox's life) and its control groups."""

    def __init__(self, uid, lock=None, groups=()):
        self.uid, self.lock, self.groups = uid, lock, list(groups)

    def release(self):
        """Give the uid back with nothing of this sandbox left: its control groups emptied and removed, and (a uid
        claimed as root) every process of the uid killed and its keyrings emptied (``scrub``), then the lock let go."""
        for group in self.groups:
            empty_group(group)
        self.groups = []
        if self.lock is not None:
            scrub(self.uid)
            self.lock.close()
            self.lock = None

    def __repr__(self):
        return f"Slot(uid={self.uid}, groups={self.groups})"


def _uid_busy(uid):
    """Whether a process of ``uid`` is still alive (one a sandbox left would share the next one's budget)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            return True
                        break
        except OSError:
            continue
    return False


# run by root, as the uid being given back from its first lines on (``scrub``): what a uid keeps past its sandbox
_SCRUB = r"""
import ctypes, os, signal, sys, time
uid = int(sys.argv[1])
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)

def alive():
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/status") as f:
                    status = f.read()
            except OSError:
                continue
            if f"\nUid:\t{uid}\t" in status and "\nState:\tZ" not in status:
                return True
    return False

for _ in range(200):  # every process this uid may signal (its own), all at once: a fork bomb's too
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        break
    if not alive():
        break
    time.sleep(0.01)
left = alive()
nr = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)  # keyctl
if nr is not None:
    libc = ctypes.CDLL(None, use_errno=True)
    def keyctl(*args):
        return libc.syscall(nr, *(ctypes.c_long(a) for a in args))
    for ring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
        keyctl(7, ring)  # KEYCTL_CLEAR
    persistent = keyctl(22, -1, -2)  # KEYCTL_GET_PERSISTENT, linked to this process's keyring
    if persistent > 0:
        keyctl(21, persistent)  # KEYCTL_INVALIDATE: gone with what it holds
sys.exit(3 if left else 0)
"""


def scrub(uid):
    """Leave nothing of sandbox user ``uid`` in the kernel (as root, before the uid is handed out again): every
    process of the uid killed, and its keyrings (user, user-session, persistent) emptied. Done by a short Python
    process that becomes the uid first (only the uid reaches its keyrings; it starts as root, since the uid may not
    be able to reach this Python's files); True when no process of the uid is left."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _SCRUB, str(int(uid))], env={}, cwd="/",
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    return done.returncode == 0


CGROUP_ROOT = "/sys/fs/cgroup"


def _cgroups_off():
    return os.environ.get("COURSE_SANDBOX_CGROUPS", "1").strip().lower() in ("0", "no", "off", "none")


def _own_group(controller):
    """This process's control group in cgroup v1's ``controller`` hierarchy ("/" at the top)."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if controller in controllers.split(","):
                    return path
    except (OSError, ValueError):
        pass
    return "/"


def _group_dirs(name, parent, nested=False):
    """The folders of control group ``name`` for the pids and memory controllers (v1: one in each hierarchy, at its
    top, or with ``nested`` below this process's own group there; v2: ``parent/name`` in the one tree), or [] when
    none can be made."""
    if _cgroups_off():
        return []
    v1 = [os.path.join(CGROUP_ROOT, c) for c in ("pids", "memory")]
    if all(os.path.isfile(os.path.join(d, "cgroup.procs")) for d in v1):
        if nested:
            return [os.path.join(d, _own_group(os.path.basename(d)).lstrip("/"), name) for d in v1]
        return [os.path.join(d, name) for d in v1]
    try:  # cgroup v2: one tree, its controllers enabled for the children of the course's group
        with open(os.path.join(CGROUP_ROOT, "cgroup.controllers")) as f:
            if not {"pids", "memory"} <= set(f.read().split()):
                return []
    except OSError:
        return []
    return [os.path.join(CGROUP_ROOT, parent, name)]


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


_CGROUPS = []


def cgroups_available(limits):
    """Whether this process may make the sandboxes' control groups (tried once, with a group made with ``limits``, the
    sandbox's, and removed)."""
    if not _CGROUPS:
        if _cgroups_off() or os.geteuid() != 0:
            _CGROUPS.append(False)
        else:
            made = _make_group(f"course-sandbox-probe-{os.getpid()}", limits)
            for group in made:
                empty_group(group)
            _CGROUPS.append(bool(made))
    return _CGROUPS[0]


def _make_group(name, limits):
    """The control group(s) ``name`` with the sandbox's process and memory limits; [] when this machine has none
    the grader may make."""
    return make_group(name, limits.memory_bytes, limits.processes)


def make_group(name, memory_bytes, processes=None, parent="course-sandbox", nested=False):
    """Control group ``name`` (v2: under ``parent``; v1 with ``nested``: under this process's own group, whose limit
    then holds it too) capping the memory of its processes together at ``memory_bytes`` (no swap beyond it) and,
    when given, their number; its folders, or [] when this machine has none this process may make (not root, no
    controllers, or ``COURSE_SANDBOX_CGROUPS=0``)."""
    dirs = _group_dirs(name, parent, nested)
    made = []
    try:
        for d in dirs:
            top = os.path.dirname(d)
            if os.path.basename(top) == parent and not os.path.isdir(top):
                os.makedirs(top, exist_ok=True)
                _write(os.path.join(top, "cgroup.subtree_control"), "+pids +memory")
            os.makedirs(d, exist_ok=True)
            if processes and os.path.exists(os.path.join(d, "pids.max")):
                _write(os.path.join(d, "pids.max"), str(processes))
            # v1 refuses a limit above the memory-and-swap limit, and that one below the limit: a group made
            # before with another size takes them in the order that fits (the first try may be refused)
            memsw = os.path.join(d, "memory.memsw.limit_in_bytes")
            for attempt in ("before", "limit", "after"):
                if attempt == "limit":
                    for knob in ("memory.limit_in_bytes", "memory.max"):  # v1, v2
                        if os.path.exists(os.path.join(d, knob)):
                            _write(os.path.join(d, knob), str(memory_bytes))
                elif os.path.exists(memsw):
                    try:
                        _write(memsw, str(memory_bytes))
                    except OSError:  # before: below the old limit; after: no swap accounting
                        pass
            if os.path.exists(os.path.join(d, "memory.swap.max")):  # v2: no swap beyond it
                try:
                    _write(os.path.join(d, "memory.swap.max"), "0")
                except OSError:
                    pass
            made.append(d)
    except OSError:
        for d in made:
            empty_group(d)
        return []
    return made


def remove_stale_groups(prefix, parent="course-grading", nested=False, then=None):
    """Remove the control groups ``<prefix><pid>-...`` (where ``make_group`` with ``parent`` and ``nested`` puts
    them) whose process ``pid``, the one that made them, is gone: a process killed, or one that never stopped
    what it started, leaves its groups behind. ``then(name)``, where given, runs after each group's processes are
    killed, once for each group gone from every hierarchy (what they would have removed as they ended, removed for
    them; never while one of them is still alive)."""
    emptied = {}  # {name: gone from every hierarchy so far}
    for d in _group_dirs("x", parent, nested):
        top = os.path.dirname(d)
        try:
            names = os.listdir(top)
        except OSError:
            continue
        for name in names:
            pid = name[len(prefix):].split("-", 1)[0] if name.startswith(prefix) else ""
            if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                emptied[name] = empty_group(os.path.join(top, name)) and emptied.get(name, True)
    for name, gone in emptied.items():
        if gone and then is not None:
            then(name)


def join_group(groups, pid):
    """Move process ``pid`` into the control groups ``groups`` (``make_group``'s folders)."""
    for group in groups:
        _write(os.path.join(group, "cgroup.procs"), str(pid))


def memory_peak(groups):
    """The most memory the processes of ``groups`` have held together so far, in bytes (None: not recorded)."""
    for group in groups:
        for knob in ("memory.max_usage_in_bytes", "memory.peak"):  # v1, v2 (Linux 5.19 and later)
            try:
                with open(os.path.join(group, knob)) as f:
                    return int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return None


def empty_group(d):
    """Kill what is left in control group ``d`` and the groups below it, and remove them (quietly: a group that
    cannot go stays, empty). True when they are gone (or were), False when a process outlasted the kills."""
    try:
        below = [e.path for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        below = []
    gone = all([empty_group(child) for child in below])
    for _ in range(50):
        try:
            with open(os.path.join(d, "cgroup.procs")) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            return gone
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        time.sleep(0.02)
    try:
        os.rmdir(d)
    except OSError:
        return False
    return gone


def claim_slot(limits, wait=600):
    """A ``Slot`` for one sandbox run by root: a uid no other sandbox holds, and control groups of its own where the
    grader may make them. ``limits`` (``grader.sandbox.Limits``) sizes the groups; waits up to ``wait`` seconds for
    a free uid."""
    base, count = _env_int("COURSE_SANDBOX_UID_BASE", 61000), _env_int("COURSE_SANDBOX_SLOTS", 512)
    locks = os.environ.get("COURSE_SANDBOX_LOCKS", "/tmp/course-sandbox-slots")
    os.makedirs(locks, mode=0o700, exist_ok=True)
    deadline = time.monotonic() + wait
    while True:
        for uid in range(base, base + count):
            lock = open(os.path.join(locks, f"{uid}.lock"), "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                lock.close()
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    continue
                raise
            if _uid_busy(uid):
                lock.close()
                continue
            groups = _make_group(f"course-sandbox-{uid}", limits)
            return Slot(uid, lock, groups)
        if time.monotonic() > deadline:
            raise SlotsBusy(f"all {count} sandbox users ({base}-{base + count - 1}) are busy; set "
                            f"COURSE_SANDBOX_SLOTS to more")
        time.sleep(0.5)
