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
* a working folder of their own (a copy of the submission), a private ``/tmp``,
  ``/dev/shm`` and an empty home: each a tmpfs of bounded size, together at most
  ``COURSE_SANDBOX_SCRATCH_MB`` (``Limits.scratch``); a student who fills one gets
  "No space left on device" and a fault that names the limit (``limit_fault``).
  Nothing else is writable but the audit notes' file and what the caller binds
  (the kernel's folder): the sandbox's root and ``/dev`` are read-only;
* no network (a network namespace of its own: only a loopback with nothing on it),
  no other process (a PID namespace of its own), no IPC of another sandbox (SysV,
  POSIX message queues: an IPC namespace of its own), a new session (no terminal to
  type into), and no kernel keyring (``seccomp_program``: the calls are refused).

The code runs as a non-root user with limits on memory (address space), processes,
CPU time, file size and open files (``prlimit``). ``Limits`` holds them; each can be
set through the environment variables named there.

Nothing one sandbox leaves reaches the next, even under the same uid: its mounts and
namespaces go with it, and the uid given back (``grader.slots``: ``Slot.release``)
has every process killed, its keyrings emptied and its control groups removed.

One student's sandbox never shares a budget with another's (``claim``; how, in
``grader.slots``): as root, each sandbox running at the same time has a user and, where
possible, control groups of its own. As a plain user the grader cannot switch users:
each sandbox then has a user namespace of its own (``--unshare-all``), in which the
kernel counts its processes apart from the others' (Linux 5.14 and later), and no
control group.

Nothing of the grading machine shows in the sandbox's process list: bubblewrap reads
its arguments from a file it was handed open and that is gone when the sandbox starts
(``--args``), and Python runs as ``/opt/course/python/bin/python`` (the installation
bound there too).

``hide`` (``masked``) replaces, inside one sandbox, chosen functions of the course's
own modules with ones that only raise: the ready-made versions of the exercises a
notebook asks for are not there while that notebook is graded, by any route.

``COURSE_ISOLATION=none`` (``course grade --no-isolation``) grades without the
sandbox, on purpose; any other value needs ``bwrap`` and stops at once, naming
the package to install, when it is missing.
"""
import ast
import atexit
import glob
import importlib.util
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field

from .audit import AUDIT_FILE

HOME = "/home/student"          # the sandbox's home folder (an empty tmpfs)
WORK = HOME + "/work"           # the sandbox's working folder: a tmpfs holding a copy of the submission's folder
SUBMISSION = "/run/course-submission"  # the submission's folder (the caller's ``workdir``), read-only, copied to WORK

INSTALL_HINT = ("grading runs student code in a sandbox made with bubblewrap, and `bwrap` is not installed on this "
                "machine. Install the Debian/Ubuntu package `bubblewrap` (`apt-get install bubblewrap`; "
                "Fedora: `dnf install bubblewrap`), or grade without isolation on purpose with "
                "`course grade --no-isolation` (COURSE_ISOLATION=none), which the summary then reports")


class SandboxUnavailable(RuntimeError):
    """Grading was asked to isolate student code, and this machine cannot."""


def isolated(env=None):
    """True unless the instructor asked to grade without the sandbox (COURSE_ISOLATION=none in ``env``, by default
    this process's environment)."""
    env = os.environ if env is None else env
    return env.get("COURSE_ISOLATION", "bwrap").strip().lower() not in ("none", "off", "0", "no")


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
    scratch_bytes: int = field(default_factory=lambda: _env_int("COURSE_SANDBOX_SCRATCH_MB", 1024) * 2 ** 20)

    def scratch(self):
        """{folder in the sandbox: the most its tmpfs holds, in bytes}: ``scratch_bytes`` shared out, so that what the
        sandbox can write holds that much at most as a whole (the working folder half, ``/tmp`` a quarter, the rest
        of the home and ``/dev/shm`` an eighth each)."""
        eighth = max(self.scratch_bytes // 8, 2 ** 20)
        return {WORK: 4 * eighth, "/tmp": 2 * eighth, "/home": eighth, "/dev/shm": eighth}

    def address_space(self):
        """The cap on address space (``--as``): ``memory_bytes`` above the CUDA libraries this install maps."""
        return self.memory_bytes + cuda_library_bytes()

    def prlimit(self):
        return ["prlimit", f"--as={self.address_space()}", f"--nproc={self.processes}", f"--cpu={self.cpu_seconds}",
                f"--fsize={self.file_bytes}", f"--nofile={self.open_files}", "--"]


_CUDA_LIBRARIES = []


def cuda_library_bytes():
    """The size of the CUDA libraries of this installation's PyTorch (0 for a CPU build), counted once from their files.

    A CUDA build (PyPI's on Linux) maps them at ``import torch``: about 3.2 GB of address space against 0.7 GB for the
    CPU build, most of it shared, read-only file mappings (its resident memory is about 0.75 GB). The address-space cap
    is set this much higher, so that ``COURSE_SANDBOX_MEMORY_MB`` is what the code may use on either build; counted
    from the files (the libraries under ``torch/lib`` named for CUDA and the ``nvidia`` packages beside it), an upper
    bound on what is mapped."""
    if not _CUDA_LIBRARIES:
        total = 0
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.submodule_search_locations:
            torch_dir = list(spec.submodule_search_locations)[0]
            site = os.path.dirname(torch_dir)
            files = glob.glob(os.path.join(torch_dir, "lib", "*cuda*.so*"))
            if files:  # a CUDA build: its own libraries, then those of the nvidia-* wheels it depends on
                files += glob.glob(os.path.join(site, "nvidia", "**", "*.so*"), recursive=True)
            total = sum(os.path.getsize(f) for f in files if os.path.isfile(f))
        _CUDA_LIBRARIES.append(total)
    return _CUDA_LIBRARIES[0]


PYTHON = "/opt/course/python"   # where the Python installation is bound too, so argv shows no host path


# errors that are the sandbox's limits' doing, not a student's logic: (fault kind, words), by the error's name, or by
# the words of an OSError (scratch space, a file's size)
LIMIT_ERRORS = {"MemoryError": ("memory", "the sandbox's limit on memory"),
                "BlockingIOError": ("processes", "the sandbox's limit on processes"),
                "No space left on device": ("scratch", "the sandbox's limit on scratch space (what its working "
                                                       "folder, /tmp, home and /dev/shm may hold, "
                                                       "COURSE_SANDBOX_SCRATCH_MB)"),
                "File too large": ("file size", "the sandbox's limit on the size of one file (COURSE_SANDBOX_FILE_MB)")}


def limit_fault(name, message):
    """(fault kind, words) when an error ``name: message`` raised in a sandbox is one of its limits' doing (memory,
    processes: a refused fork, or a thread that could not start; scratch space full; a file past its size), else
    None."""
    message = str(message)
    if "can't start new thread" in message:
        return LIMIT_ERRORS["BlockingIOError"]
    for words in ("No space left on device", "File too large"):
        if words in message:
            return LIMIT_ERRORS[words]
    return LIMIT_ERRORS.get(name)


KEYRING_CALLS = ("add_key", "request_key", "keyctl")  # the kernel's keyrings: they outlive a sandbox (a uid's own)

SECCOMP_HINT = ("the sandbox's seccomp filter is made with libseccomp (through the Python package pyseccomp, a "
                "dependency of the course), and {why}. Install the Debian/Ubuntu package `libseccomp2` (Fedora: "
                "`libseccomp`) and the course's dependencies (`make setup`), or grade without isolation on purpose "
                "with `course grade --no-isolation`")


def seccomp_program(arch=None):
    """The seccomp filter bubblewrap loads in the sandbox (``--seccomp``), as the classic-BPF program the kernel runs:
    the kernel keyring's system calls (``KEYRING_CALLS``) fail with EPERM, a system call made through another
    architecture's calling convention than ``arch``'s (x32 and i386 on x86_64, 32-bit ARM on aarch64) ends the
    process, and every other call is allowed. ``arch``: a ``pyseccomp.Arch`` value, this machine's by default.

    Why: a uid's keyrings (its user and user-session keyrings, its persistent keyring) outlive its processes, and
    the session keyring is the grader's own, the same in every sandbox; a key one sandbox wrote, the next could read.
    Made by libseccomp (``pyseccomp``), once per process and architecture; SandboxUnavailable when it is missing."""
    if arch not in _SECCOMP:
        try:
            import pyseccomp as seccomp
        except ImportError as exc:
            raise SandboxUnavailable(SECCOMP_HINT.format(why=f"pyseccomp is not installed ({exc})")) from exc
        except (OSError, RuntimeError) as exc:  # its import loads libseccomp.so.2
            raise SandboxUnavailable(SECCOMP_HINT.format(why=f"libseccomp could not be loaded ({exc})")) from exc
        import errno
        rules = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
        if arch is not None and arch != seccomp.system_arch():
            rules.add_arch(arch)
            rules.remove_arch(seccomp.system_arch())
        rules.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)
        for call in KEYRING_CALLS:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), call)
        with tempfile.TemporaryFile() as f:
            rules.export_bpf(f)
            f.seek(0)
            _SECCOMP[arch] = f.read()
    return _SECCOMP[arch]


_SECCOMP = {}


def sandbox_uid():
    """The uid of a sandbox when none was claimed (``COURSE_SANDBOX_UID``, 65534): see ``claim``."""
    return _env_int("COURSE_SANDBOX_UID", 65534)


def claim(limits=None):
    """A ``Slot`` (``grader.slots``) for one sandbox: as root, a uid no other sandbox holds and control groups of its
    own where the grader may make them; as a plain user (or with isolation off), the user's own uid."""
    from .slots import Slot, SlotsBusy
    from .slots import claim_slot as claim_as_root
    if os.geteuid() != 0 or not isolated():
        return Slot(os.getuid())
    try:
        return claim_as_root(limits or Limits())
    except SlotsBusy as exc:
        raise SandboxUnavailable(str(exc)) from exc


def separation(env=None):
    """What keeps the sandboxes this process starts (with the settings ``env``) apart from one another, in words
    (``course grade`` prints it)."""
    from .slots import cgroups_available
    if not isolated(env):
        return "none: grading without the sandbox (--no-isolation)"
    if os.geteuid() == 0:
        if cgroups_available(Limits()):
            return ("a Unix user and a control group of its own per sandbox (its processes and its memory capped "
                    "together)")
        return ("a Unix user of its own per sandbox (no control group on this machine: memory is held by the "
                "per-process limit)")
    return ("a user namespace of its own per sandbox (its processes counted apart), no control group: memory is held "
            "only by the per-process limit (grade as root, or on the hub, for a user and a control group per sandbox)")


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
    for package in ("learner", "grader", "coursekit"):
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
        "PATH": os.path.join(PYTHON, "bin") + ":/usr/local/bin:/usr/bin:/bin",
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


def prepare_folder(path, uid=None):
    """Make ``path`` (a folder the grader created, the submission's copy) readable by the sandbox's user (``uid``:
    its slot's) and by no other; as root, through its group (root's files, the uid's group: the sandbox reads them
    to copy them into its working folder, and writes nothing on the host's disk there). No link is followed."""
    if os.geteuid() == 0:
        uid = sandbox_uid() if uid is None else uid
        for root, dirs, files in os.walk(path):
            os.chown(root, 0, uid, follow_symlinks=False)
            os.chmod(root, 0o750)
            for name in files:
                f = os.path.join(root, name)
                mode = os.lstat(f).st_mode
                if not os.path.islink(f):
                    os.chown(f, 0, uid, follow_symlinks=False)
                    os.chmod(f, 0o640 | (0o110 if mode & 0o100 else 0))
    else:
        os.chmod(path, 0o700)


def masked(functions):
    """{host path of a module file: the file to show in its place} for ``functions`` ("module:function", in the
    course's own packages): each named function keeps its signature and only raises, saying why. The copies are
    made once per process; a module's compiled files are hidden beside them (see ``command``)."""
    wanted = {}
    for path in functions:
        module, _, name = path.partition(":")
        top, *rest = module.split(".")
        d = _package_dir(top)
        if d is None:
            continue
        file = os.path.join(d, *rest) + ".py" if rest else os.path.join(d, "__init__.py")
        if os.path.isfile(file):
            wanted.setdefault(file, set()).add(name)
    out = {}
    for file, names in wanted.items():
        key = (file, tuple(sorted(names)))
        if key not in _MASKED or not os.path.exists(_MASKED[key]):
            tree = ast.parse(open(file).read(), file)
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
                    why = (f"{node.name} is the course's ready-made version of an exercise of the notebook being "
                           f"graded: it is not available while that notebook is graded, so write your own")
                    node.body = [ast.parse(f"raise NotImplementedError({why!r})").body[0]]
            folder = tempfile.mkdtemp(prefix="course-masked-")
            atexit.register(shutil.rmtree, folder, True)  # one folder per mask and process, gone with the process
            os.chmod(folder, 0o755)
            copy = os.path.join(folder, os.path.basename(file))
            with open(copy, "w") as f:
                f.write(f"# {os.path.basename(file)} as a sandbox sees it: functions masked (grader/sandbox.py)\n")
                f.write(ast.unparse(tree) + "\n")
            os.chmod(copy, 0o644)
            _MASKED[key] = copy
        out[file] = _MASKED[key]
    return out


_MASKED = {}


def command(argv, workdir, *, binds=(), env=None, limits=None, chdir=WORK, slot=None, hide=()):
    """``argv`` wrapped in the sandbox.

    ``workdir`` (a host folder the caller made for this run, see ``prepare_folder``)
    is mounted read-write at ``WORK``; ``binds`` are more (host path, sandbox path)
    read-write mounts, for the kernel's sockets. ``slot`` (``claim``) gives the sandbox
    its own user and control groups; ``hide`` names functions ("module:function") to
    mask (``masked``). When isolation is off (the instructor's explicit choice)
    ``argv`` comes back unchanged.
    """
    if not isolated():
        return list(argv)
    bwrap = bwrap_path()
    limits = limits or Limits()
    args = []
    if os.geteuid() == 0:
        # as root: namespaces without a user namespace, then drop to a plain user inside (RLIMIT_NPROC
        # means nothing to root), keeping no capability
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
                 "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        uid = slot.uid if slot is not None else sandbox_uid()
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--"]
    else:
        args += ["--unshare-all"]  # a user namespace too: the instructor's own uid, no privilege
        drop = []
    args += ["--die-with-parent", "--new-session", "--seccomp", "4"]  # the launcher opens the filter as fd 4
    args += _system_binds()
    # the scratch: each writable folder a tmpfs of its own size (Limits.scratch), /tmp and home first: the course
    # itself may live under /tmp (a CI clone), bound over them below
    sizes = limits.scratch()
    args += ["--perms", "01777", "--size", str(sizes["/dev/shm"]), "--tmpfs", "/dev/shm",
             "--perms", "01777", "--size", str(sizes["/tmp"]), "--tmpfs", "/tmp",
             "--perms", "0755", "--size", str(sizes["/home"]), "--tmpfs", "/home", "--perms", "01777", "--dir", HOME,
             "--perms", "01777", "--size", str(sizes[WORK]), "--tmpfs", WORK]
    ro, hidden = visible_paths()
    made = set()
    for path in ro + [SUBMISSION] + [p for _, p in binds]:
        args += _parents(path, made)
    args += ["--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/course"]
    for path in ro:
        args += ["--ro-bind", path, path]
    prefix = os.path.realpath(sys.prefix)
    args += ["--ro-bind", prefix, PYTHON]  # the same installation, at a path that says nothing of this machine
    for path in hidden:
        args += ["--tmpfs", path, "--remount-ro", path]
    for original, copy in masked(hide).items():
        args += ["--ro-bind", copy, original]
        stem = os.path.splitext(os.path.basename(original))[0]
        for compiled in glob.glob(os.path.join(os.path.dirname(original), "__pycache__", stem + ".*.pyc")):
            args += ["--ro-bind", "/dev/null", compiled]  # not read back from its compiled form either
    # the submission's folder read-only, copied into WORK as the sandbox starts (``_copied``), and of the host's
    # disk only the audit notes' file writable there (grader.audit)
    workdir = os.path.realpath(workdir)
    args += ["--ro-bind", workdir, SUBMISSION, "--bind", _audit_file(workdir, slot), os.path.join(WORK, AUDIT_FILE)]
    for host, inside in binds:
        args += ["--bind", host, inside]
    # nothing else writable: the sandbox's own root and /dev (tmpfs mounts bwrap makes, its user's own when it runs
    # unprivileged) read-only; what is mounted below them stays as it is
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    args += ["--clearenv"]
    for key, value in environment(env).items():
        args += ["--setenv", key, value]
    args += ["--chdir", chdir]
    argv = list(argv)
    if argv and os.path.realpath(os.path.dirname(argv[0])) == os.path.realpath(os.path.dirname(sys.executable)):
        argv[0] = os.path.join(PYTHON, "bin", os.path.basename(argv[0]))
    return _launcher(bwrap, args, limits.prlimit() + drop + _copied(workdir, argv), slot)


def _audit_file(workdir, slot):
    """The audit notes' file in ``workdir`` (``grader.audit``), made afresh (whatever the submission's copy had by that
    name goes) for the sandbox's user to write."""
    path = os.path.join(workdir, AUDIT_FILE)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        if os.geteuid() == 0:
            uid = slot.uid if slot is not None else sandbox_uid()
            os.fchown(fd, uid, uid)
    finally:
        os.close(fd)
    return path


def _copied(workdir, argv):
    """``argv``, run after the submission's folder (``workdir``, seen at ``SUBMISSION``) is copied into the working
    folder (the audit notes' file left out: it is bound there); ``argv`` alone when there is nothing to copy."""
    if not [name for name in os.listdir(workdir) if name != AUDIT_FILE]:
        return argv
    copy = (f"find {SUBMISSION} -mindepth 1 -maxdepth 1 ! -name {AUDIT_FILE} -exec cp -PR -t {WORK} {{}} + "
            f'&& exec "$0" "$@"')
    return ["/bin/sh", "-c", copy, *argv]


def _launcher(bwrap, options, argv, slot):
    """The command that starts bwrap with its ``options`` read from a file it is handed open (``--args``), removed
    before bwrap starts, so that neither the sandbox's process list nor its files show them (the command, ``argv``,
    names no folder of the grading machine), and its seccomp filter (``seccomp_program``) the same way; it joins
    ``slot``'s control groups first."""
    program, paths = seccomp_program(), []
    for data in (b"".join(a.encode() + b"\0" for a in options), program):
        fd, path = tempfile.mkstemp(prefix="course-bwrap-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        paths.append(path)
    join = "".join(f'echo $$ > "{g}/cgroup.procs" && ' for g in (slot.groups if slot is not None else ()))
    script = f'exec 3< "$1" 4< "$2" && rm -f "$1" "$2" && {join}shift 3 && exec "$0" --args 3 -- "$@"'
    return ["/bin/sh", "-c", script, bwrap, *paths, "--", *argv]
