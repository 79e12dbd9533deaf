"""The sandbox that learner code runs in at grading time (bubblewrap).

At grading time two things run a student's code: the Jupyter kernel nbgrader
executes the notebook in, and the worker (``grader.worker``) the trusted side
calls the student's functions in. Both start through ``command()``, which wraps
them in ``bwrap`` so that they see

* the system (``/usr``, ``/etc``), the Python installation and its packages,
  read-only, with the ``solutions`` package masked out: no reference;
* the course's own ``grader`` and ``coursekit`` packages, read-only, and
  nothing else of the project: no ``course/source``, no gradebook, no other
  student's folder;
* one scratch folder of their own (a copy of the submission), a private
  ``/tmp`` and an empty home;
* no network (a network namespace of its own: only a loopback with nothing on it),
  no other process (a PID namespace of its own), and a new session (no terminal to
  type into).

The code runs as a non-root user (``COURSE_SANDBOX_UID``, 65534 by default, when
the grader runs as root; the instructor's own user otherwise, inside a user
namespace) with limits on memory (address space), processes, CPU time, file size
and open files (``prlimit``). ``Limits`` holds them; each can be set through the
environment variables named there.

``COURSE_ISOLATION=none`` (``course grade --no-isolation``) grades without the
sandbox, on purpose; any other value needs ``bwrap`` and stops at once, naming
the package to install, when it is missing.
"""
import glob
import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass, field

HOME = "/home/student"          # the sandbox's home folder (an empty tmpfs)
WORK = HOME + "/work"           # where the submission's scratch copy is mounted

INSTALL_HINT = ("grading runs student code in a sandbox made with bubblewrap, and `bwrap` is not installed on this "
                "machine. Install the Debian/Ubuntu package `bubblewrap` (`apt-get install bubblewrap`; "
                "Fedora: `dnf install bubblewrap`), or grade without isolation on purpose with "
                "`course grade --no-isolation` (COURSE_ISOLATION=none), which the summary then reports")


class SandboxUnavailable(RuntimeError):
    """Grading was asked to isolate student code, and this machine cannot."""


def isolated():
    """True unless the instructor asked to grade without the sandbox (COURSE_ISOLATION=none)."""
    return os.environ.get("COURSE_ISOLATION", "bwrap").strip().lower() not in ("none", "off", "0", "no")


def bwrap_path():
    """The ``bwrap`` executable; SandboxUnavailable, naming the package, when it is missing."""
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(INSTALL_HINT)
    return path


def _env_int(name, default):
    value = os.environ.get(name)
    return int(value) if value else default


@dataclass(frozen=True)
class Limits:
    """What one sandboxed process may use (``prlimit``), read from the environment when made."""
    memory_bytes: int = field(default_factory=lambda: _env_int("COURSE_SANDBOX_MEMORY_MB", 8192) * 2 ** 20)
    processes: int = field(default_factory=lambda: _env_int("COURSE_SANDBOX_NPROC", 1024))  # threads count too
    cpu_seconds: int = field(default_factory=lambda: _env_int("COURSE_SANDBOX_CPU_S", 3600))
    file_bytes: int = field(default_factory=lambda: _env_int("COURSE_SANDBOX_FILE_MB", 512) * 2 ** 20)
    open_files: int = 1024

    def prlimit(self):
        return ["prlimit", f"--as={self.memory_bytes}", f"--nproc={self.processes}", f"--cpu={self.cpu_seconds}",
                f"--fsize={self.file_bytes}", f"--nofile={self.open_files}", "--"]


def sandbox_uid():
    return _env_int("COURSE_SANDBOX_UID", 65534)


def _package_dir(name):
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def _inside(path, folder):
    return os.path.commonpath([path, folder]) == folder


def visible_paths():
    """(read-only folders to mount at their own paths, folders to hide inside them)."""
    prefixes = []
    for p in (sys.base_prefix, sys.prefix, sys.exec_prefix):
        p = os.path.realpath(p)
        if p not in prefixes:
            prefixes.append(p)
    binds = list(prefixes)
    for package in ("grader", "coursekit"):
        d = _package_dir(package)
        if d and not any(_inside(d, b) for b in binds):
            binds.append(d)
    hidden = []
    ref = _package_dir("solutions")
    if ref and any(_inside(ref, b) for b in binds):
        hidden.append(ref)  # a regular install: the reference sits among the packages
    return binds, hidden


def _system_binds():
    args = ["--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    args += ["--ro-bind-try", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev"]
    for dev in sorted(glob.glob("/dev/nvidia*")) + ["/dev/dri"]:  # a GPU, when the grading machine has one
        args += ["--dev-bind-try", dev, dev]
    args += ["--ro-bind-try", "/proc/driver/nvidia", "/proc/driver/nvidia"]
    return args


def _parents(path, made):
    """Mount points' parent folders, made traversable (bwrap would make them 0700, root's alone)."""
    args, parent = [], os.path.dirname(path)
    chain = []
    while parent not in ("/", "") and parent not in made:
        chain.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(chain):
        if d in ("/usr", "/etc", "/sys", "/proc", "/dev", "/tmp", "/home"):
            continue
        made.add(d)
        args += ["--perms", "0755", "--dir", d]
    return args


def environment(extra=None):
    """The sandbox's whole environment: nothing of the grader's but what the code needs."""
    env = {
        "PATH": os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": HOME, "USER": "student", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
        "MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython",
        "JUPYTER_CONFIG_DIR": "/tmp/jupyter", "JUPYTER_DATA_DIR": "/tmp/jupyter/data",
        "JUPYTER_RUNTIME_DIR": "/tmp/jupyter/runtime", "PYTHONDONTWRITEBYTECODE": "1",
        "MALLOC_ARENA_MAX": "2", "COURSE_SANDBOX": "1",
    }
    for var in ("COURSE_MAX_TRAIN_STEPS", "COURSE_DEVICE", "COURSE_CALL_TIME_LIMIT", "OMP_NUM_THREADS",
                "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "COURSE_TORCH_THREADS",
                "COURSE_TRAIN_THREADS"):
        if var in os.environ:
            env[var] = os.environ[var]
    env.update(extra or {})
    return env


def prepare_folder(path):
    """Make ``path`` (a folder the grader created) writable by the sandbox's user."""
    if os.geteuid() == 0:
        uid = sandbox_uid()
        for root, dirs, files in os.walk(path):
            os.chown(root, uid, uid)
            for f in files:
                os.chown(os.path.join(root, f), uid, uid)
    os.chmod(path, 0o700)


def command(argv, workdir, *, binds=(), env=None, limits=None, chdir=WORK):
    """``argv`` wrapped in the sandbox.

    ``workdir`` (a host folder the caller made for this run, see ``prepare_folder``)
    is mounted read-write at ``WORK``; ``binds`` are more (host path, sandbox path)
    read-write mounts, for the kernel's sockets. When isolation is off (the
    instructor's explicit choice) ``argv`` comes back unchanged.
    """
    if not isolated():
        return list(argv)
    bwrap = bwrap_path()
    limits = limits or Limits()
    args = [bwrap]
    if os.geteuid() == 0:
        # as root: namespaces without a user namespace, then drop to a plain user inside (RLIMIT_NPROC
        # means nothing to root), keeping no capability
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        uid = sandbox_uid()
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--"]
    else:
        args += ["--unshare-all"]  # a user namespace too: the instructor's own uid, no privilege
        drop = []
    args += ["--die-with-parent", "--new-session"]
    args += _system_binds()
    # private /tmp and home first: the course itself may live under /tmp (a CI clone), bound over them below
    args += ["--perms", "01777", "--tmpfs", "/tmp", "--perms", "0755", "--tmpfs", "/home",
             "--perms", "01777", "--dir", HOME]
    ro, hidden = visible_paths()
    made = set()
    for path in ro + [p for _, p in binds]:
        args += _parents(path, made)
    for path in ro:
        args += ["--ro-bind", path, path]
    for path in hidden:
        args += ["--tmpfs", path]
    args += ["--bind", os.path.realpath(workdir), WORK]
    for host, inside in binds:
        args += ["--bind", host, inside]
    args += ["--clearenv"]
    for key, value in environment(env).items():
        args += ["--setenv", key, value]
    args += ["--chdir", chdir, "--"]
    return args + limits.prlimit() + drop + list(argv)
