"""What one sandbox leaves for the next (``grader.sandbox``, ``grader.slots``): nothing.

Two submissions run one after the other through the real sandbox, the way grading starts a kernel (a claimed slot, its
folder bound in, ``grader.sandbox.command``), with one sandbox user (``COURSE_SANDBOX_SLOTS=1``), so the second runs
under the uid the first had. The first leaves every kind of state it can: keys in its keyrings, SysV shared memory,
semaphores and messages, a POSIX message queue, a process that outlives it holding an abstract unix socket, control
groups, a file in every folder it can write, and its scratch full. The second looks for each and finds none. As root
(``make test``) it also checks what giving the uid back does: the uid's processes killed, its keyrings emptied, its
control groups gone. The seccomp filter that keeps the keyrings out of reach is read back as the kernel runs it, for
x86_64 (and its x32 calls) and aarch64. A missing part (bubblewrap, libseccomp, control groups as root) fails here,
loudly. Cost: about 3 s.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from grader import sandbox, slots

MARK = "course-leftover"
IPC_KEY = 0x636F7572

# ---------------------------------------------------------------- the submissions (run in the sandbox)
PROBE = r'''
import ctypes, errno, json, os, socket, stat, sys, time
mode, MARK, KEY = sys.argv[1], "course-leftover", 0x636F7572
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL, ADD_KEY = {"x86_64": (250, 248), "aarch64": (219, 217)}[os.uname().machine]
RINGS = {"session": -3, "user": -4, "user-session": -5}
found = {"uid": os.getuid()}

def call(fn, *args):
    ctypes.set_errno(0)
    r = fn(*args)
    return "ok" if r != -1 else errno.errorcode[ctypes.get_errno()]

def keyctl(*args):
    return call(libc.syscall, KEYCTL, *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))

def mounts():
    out = []
    for line in open("/proc/self/mountinfo"):
        left, right = line.split(" - ")
        fields = left.split()
        point = fields[4].encode().decode("unicode_escape")
        out.append((point, "rw" in fields[5].split(","), right.split()[0]))
    return out

status = open("/proc/self/status").read()
found["seccomp"] = status.split("Seccomp:")[1].split()[0]
points = {p for p, _, _ in mounts()}
writable = [(p, t) for p, rw, t in mounts() if rw and t not in ("proc", "devpts")
            and not stat.S_ISCHR(os.stat(p).st_mode)]  # /dev/null and the like: bound devices, not places
found["rw mounts"] = sorted(p for p, _ in writable)
SCRATCH = ("/home/student/work", "/tmp", "/home/student", "/dev/shm")

if mode == "leave":
    found["keys"] = {name: call(libc.syscall, ADD_KEY, b"user", MARK.encode(), b"secret", ctypes.c_size_t(6),
                                ctypes.c_long(ring)) for name, ring in RINGS.items()}
    found["keys"]["persistent"] = keyctl(22, -1, -3)  # KEYCTL_GET_PERSISTENT
    found["sysv"] = {"shm": call(libc.shmget, KEY, 4096, 0o1600), "sem": call(libc.semget, KEY, 1, 0o1600),
                     "msg": call(libc.msgget, KEY, 0o1600)}
    found["mqueue"] = call(libc.mq_open, b"/" + MARK.encode(), os.O_CREAT | os.O_RDWR, ctypes.c_uint(0o600), None)
    ready, tell = os.pipe()
    if os.fork() == 0:  # a process that outlives this one, detached, holding an abstract unix socket
        os.setsid()
        if os.fork() == 0:
            libc.prctl(15, MARK.encode(), 0, 0, 0)  # PR_SET_NAME
            server = socket.socket(socket.AF_UNIX)
            server.bind("\0" + MARK)
            server.listen()
            devnull = os.open("/dev/null", os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.write(tell, b"x")
            time.sleep(3600)
        os._exit(0)
    os.read(ready, 1)
    found["cgroups"] = {}
    for top in ("/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"):
        try:
            os.mkdir(os.path.join(top, MARK))
            found["cgroups"][top] = "ok"
        except OSError as exc:
            found["cgroups"][top] = errno.errorcode[exc.errno]
    found["wrote"] = []  # a file in every folder of every writable mount this process can write in
    for point, _ in writable:
        if not os.path.isdir(point):
            with open(point, "a") as f:
                f.write("[]\n")
            found["wrote"].append(point)
            continue
        for folder, dirs, _ in os.walk(point):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in points]
            try:
                os.close(os.open(os.path.join(folder, "." + MARK), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                found["wrote"].append(folder)
            except OSError:
                pass
    found["filled"] = {}
    for place in SCRATCH:  # each until the file system says no
        written, error = 0, None
        with open(os.path.join(place, MARK + "-fill"), "wb", buffering=0) as f:
            try:
                while written < 2 ** 31:
                    written += f.write(b"x" * 2 ** 20)
            except OSError as exc:
                error = f"{type(exc).__name__}: {exc}"
        found["filled"][place] = [written, error]
else:
    found["keys"] = {name: keyctl(10, ring, b"user", MARK.encode(), 0) for name, ring in RINGS.items()}  # KEYCTL_SEARCH
    found["keys"]["user ring read"] = keyctl(11, -4, 0, 0)  # KEYCTL_READ
    found["sysv"] = {"shm": call(libc.shmget, KEY, 0, 0), "sem": call(libc.semget, KEY, 0, 0),
                     "msg": call(libc.msgget, KEY, 0)}
    found["sysv"]["listed"] = sum(len(open(f"/proc/sysvipc/{k}").readlines()) - 1 for k in ("shm", "sem", "msg"))
    found["mqueue"] = call(libc.mq_open, b"/" + MARK.encode(), os.O_RDONLY)
    try:
        socket.socket(socket.AF_UNIX).connect("\0" + MARK)
        found["abstract socket"] = "connected"
    except OSError as exc:
        found["abstract socket"] = errno.errorcode[exc.errno]
    found["abstract socket listed"] = "@" + MARK in open("/proc/net/unix").read()
    found["processes"] = sorted(open(f"/proc/{p}/comm").read().strip() for p in os.listdir("/proc") if p.isdigit())
    found["files"] = set()
    for point, _ in writable:
        for folder, dirs, files in ([(os.path.dirname(point), [], [os.path.basename(point)])]
                                    if not os.path.isdir(point) else os.walk(point)):
            dirs[:] = [d for d in dirs if os.path.join(folder, d) not in points]
            found["files"] |= {os.path.join(folder, f) for f in files}
    found["files"] = sorted(found["files"])
    found["scratch"] = {}
    for place in SCRATCH:
        st = os.statvfs(place)
        found["scratch"][place] = [st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize]
print(json.dumps(found))
'''

BOX = "/run/course-kernel"  # where grading binds the kernel's folder (grader.nbgrader_plugin)


def grade_like_the_kernel(mode, submission_files):
    """Run the probe in ``mode`` the way grading runs a kernel: a folder of its own holding a copy of the submission,
    a claimed slot, the folder bound at ``BOX``; the folder removed and the slot given back after. What the probe
    found, the slot (given back) and what the uid held just before it was given back (``before_release``)."""
    box = tempfile.mkdtemp(prefix="course-kernel-")
    try:
        work = os.path.join(box, "work")
        os.makedirs(work)
        for name, text in submission_files.items():
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        slot = sandbox.claim()
        sandbox.prepare_folder(work, slot.uid)
        os.chmod(box, 0o777)
        cmd = sandbox.command([sys.executable, "-I", "-c", PROBE, mode], work, binds=[(box, BOX)], slot=slot)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stdout + proc.stderr[-3000:]
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        before = before_release(slot.uid) if os.geteuid() == 0 else {}
    finally:
        shutil.rmtree(box, ignore_errors=True)
    groups = list(slot.groups)
    slot.release()
    return found, slot, groups, before


# ---------------------------------------------------------------- what root sees of the uid
AS_UID = r'''
import ctypes, errno, json, os, sys
uid = int(sys.argv[1])
os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
libc = ctypes.CDLL(None, use_errno=True)
KEYCTL, ADD_KEY = {"x86_64": (250, 248), "aarch64": (219, 217)}[os.uname().machine]
def ok(r):
    return r if r != -1 else errno.errorcode[ctypes.get_errno()]
'''
PLANT = AS_UID + r'''
for ring in (-4, -5):  # the user and user-session keyrings, as an earlier version's sandbox could fill them
    ok(libc.syscall(ADD_KEY, b"user", b"course-leftover", b"secret", ctypes.c_size_t(6), ctypes.c_long(ring)))
if os.fork() == 0:  # a process of the uid, left running outside any sandbox
    os.setsid()
    devnull = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.execv("/bin/sleep", ["sleep", "600"])
'''
READ = AS_UID + r'''
print(json.dumps({ring: ok(libc.syscall(KEYCTL, ctypes.c_long(10), ctypes.c_long(ring), b"user", b"course-leftover",
                                        ctypes.c_long(0))) for ring in (-4, -5)}))  # KEYCTL_SEARCH
'''


def as_uid(uid, code):
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(uid)], capture_output=True, text=True,
                          timeout=60, cwd="/", stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def processes_of(uid):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/status") as f:
                status = f.read()
        except OSError:
            continue
        if f"\nUid:\t{uid}\t" in status and "\nState:\tZ" not in status:
            found.append(int(pid))
    return found


def before_release(uid):
    """Keys planted in the uid's keyrings and a process of the uid started, as root, just before it is given back:
    what an earlier version of the course, or a sandbox the filter had missed, could have left. Their ids."""
    as_uid(uid, PLANT)
    planted = json.loads(as_uid(uid, READ))
    for _ in range(100):
        if processes_of(uid):
            break
        time.sleep(0.02)
    return {"keys": planted, "processes": processes_of(uid)}


# ---------------------------------------------------------------- the test
def test_a_sandbox_leaves_nothing_for_the_next_one_under_the_same_uid(monkeypatch):
    """The first submission leaves every kind of state; the second, under the same uid, finds none of it, and each
    scratch folder empty at its full size. As root, giving the uid back kills what still runs as it, empties its
    keyrings and removes its control groups."""
    assert shutil.which("bwrap"), "bubblewrap is not installed: the sandbox cannot be tried (make test installs it)"
    root = os.geteuid() == 0
    monkeypatch.setenv("COURSE_SANDBOX_SLOTS", "1")
    monkeypatch.setenv("COURSE_SANDBOX_UID_BASE", "61900")  # a uid no other test's sandbox takes
    monkeypatch.setenv("COURSE_SANDBOX_SCRATCH_MB", "64")
    sizes = sandbox.Limits().scratch()
    first, slot1, groups1, before = grade_like_the_kernel("leave", {"data.txt": "the first student's data\n"})

    uid = first["uid"]
    assert uid == (61900 if root else os.getuid()), first
    assert first["seccomp"] == "2", first  # a filter is loaded
    # nothing reaches a keyring: the system calls are refused (EPERM)
    assert set(first["keys"].values()) == {"EPERM"}, first["keys"]
    # SysV IPC and POSIX message queues are made, in the sandbox's own IPC namespace
    assert set(first["sysv"].values()) == {"ok"} and first["mqueue"] == "ok", first
    assert not any(f"{IPC_KEY:x}" in line or str(IPC_KEY) in line for kind in ("shm", "sem", "msg")
                   for line in open(f"/proc/sysvipc/{kind}")), "a SysV object of the sandbox reached the host"
    assert not any(v == "ok" for v in first["cgroups"].values()), first["cgroups"]  # no control group made
    # every place the sandbox can write: its scratch tmpfs mounts, the audit notes' file and the kernel's folder
    work = sandbox.WORK
    assert first["rw mounts"] == sorted([work, os.path.join(work, ".course-audit.jsonl"), "/tmp", "/home",
                                         "/dev/shm", BOX]), first["rw mounts"]
    assert {work, "/tmp", "/home/student", "/dev/shm", BOX} <= set(first["wrote"]), first["wrote"]
    assert BOX + "/work" not in first["wrote"]  # the submission's folder on the host's disk: read-only
    for place, (written, error) in first["filled"].items():  # each scratch folder bounded as a whole
        size = sizes["/home" if place == sandbox.HOME else place]
        assert size - 2 ** 21 <= written <= size and "No space left on device" in error, (place, written, error)
        assert sandbox.limit_fault(error.split(":")[0], error)[0] == "scratch"  # a sentence in the student's record

    if root:  # the uid given back: nothing of it runs, its keyrings are empty, its control groups gone
        assert groups1, "this machine gives the grader no control groups (cgroup v1 pids and memory, or v2)"
        assert before["processes"] and all(isinstance(key, int) for key in before["keys"].values()), before
        assert processes_of(uid) == [], "a process of the sandbox's uid outlived its slot"
        assert json.loads(as_uid(uid, READ)) == {"-4": "ENOKEY", "-5": "ENOKEY"}
        assert not any(os.path.exists(g) for g in groups1), groups1
    else:
        assert not [p for p in os.listdir("/proc") if p.isdigit() and _comm(p) == MARK[:15]]

    second, slot2, _, _ = grade_like_the_kernel("look", {"data.txt": "the second student's data\n"})
    assert second["uid"] == uid
    assert set(second["keys"].values()) == {"EPERM"}, second["keys"]  # not even readable
    assert second["sysv"] == {"shm": "ENOENT", "sem": "ENOENT", "msg": "ENOENT", "listed": 0}, second["sysv"]
    assert second["mqueue"] == "ENOENT", second
    assert second["abstract socket"] == "ECONNREFUSED" and not second["abstract socket listed"], second
    assert MARK[:15] not in second["processes"], second["processes"]
    # of every file in every writable place, only its own: its submission's copy and the audit notes' file, in its
    # working folder and as the kernel's folder holds them (read-only but for the notes)
    assert second["files"] == sorted(os.path.join(folder, name) for folder in (work, BOX + "/work")
                                     for name in (".course-audit.jsonl", "data.txt")), second["files"]
    for place, (total, free) in second["scratch"].items():
        assert total == sizes["/home" if place == sandbox.HOME else place] and total - free <= 2 ** 16, \
            (place, total, free)


def _comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------- the filter, read back
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
EPERM = 1
# AUDIT_ARCH_* (linux/audit.h) and the system calls' numbers (arch/x86/entry/syscalls/syscall_64.tbl and
# syscall_32.tbl; include/uapi/asm-generic/unistd.h for aarch64; arch/arm/tools/syscall.tbl)
X86_64, I386, X32_BIT = 0xC000003E, 0x40000003, 0x40000000
AARCH64, ARM = 0xC00000B7, 0x40000028
KEYRING = {X86_64: (248, 249, 250), AARCH64: (217, 218, 219), I386: (286, 287, 288), ARM: (309, 310, 311)}
ORDINARY = {X86_64: (0, 1, 2, 9, 56, 59, 231, 257, 435), AARCH64: (56, 63, 64, 93, 220, 221, 222, 435)}


def run_bpf(program, nr, arch):
    """What classic-BPF ``program`` (struct sock_filter, 8 bytes each) returns for a system call ``nr`` of ``arch``
    (struct seccomp_data: nr, arch, instruction pointer, six arguments): the kernel's interpreter, for the
    instructions a seccomp filter may hold (linux/filter.h; an unknown one fails the test)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *[0] * 6)
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    a = x = pc = 0
    mem = [0] * 16
    while True:
        code, jt, jf, k = insns[pc]
        pc += 1
        cls = code & 0x07
        if code == 0x20:                           # ld [k]
            a = struct.unpack_from("=I", data, k)[0]
        elif code == 0x00:                         # ld #k
            a = k
        elif code == 0x01:                         # ldx #k
            x = k
        elif code == 0x60:                         # ld M[k]
            a = mem[k]
        elif code == 0x61:                         # ldx M[k]
            x = mem[k]
        elif code == 0x02:                         # st M[k]
            mem[k] = a
        elif code == 0x03:                         # stx M[k]
            mem[k] = x
        elif cls == 0x04:                          # alu
            operand = x if code & 0x08 else k
            op = code & 0xF0
            a = {0x00: a + operand, 0x10: a - operand, 0x20: a * operand, 0x40: a | operand, 0x50: a & operand,
                 0x60: a << operand, 0x70: a >> operand, 0xA0: a ^ operand}[op] & 0xFFFFFFFF
        elif cls == 0x05:                          # jumps
            operand = x if code & 0x08 else k
            op = code & 0xF0
            if op == 0x00:
                pc += k
                continue
            taken = {0x10: a == operand, 0x20: a > operand, 0x30: a >= operand, 0x40: bool(a & operand)}[op]
            pc += jt if taken else jf
        elif code == 0x06:                         # ret #k
            return k
        elif code == 0x16:                         # ret a
            return a
        elif code == 0x87:                         # txa
            a = x
        elif code == 0x07:                         # tax
            x = a
        else:
            raise AssertionError(f"instruction {code:#x} at {pc - 1}: not one this reader knows")


@pytest.mark.parametrize("arch", [X86_64, AARCH64], ids=["x86_64", "aarch64"])
def test_the_seccomp_filter_refuses_the_keyring_calls_and_every_other_architectures_calls(arch):
    """The program bwrap loads (``sandbox.seccomp_program``), run as the kernel runs it: the three keyring calls get
    EPERM, ordinary calls pass, and a call through another calling convention (x32 and i386 on x86_64, 32-bit ARM on
    aarch64) or of another architecture ends the process."""
    import pyseccomp
    program = sandbox.seccomp_program(pyseccomp.Arch.X86_64 if arch == X86_64 else pyseccomp.Arch.AARCH64)
    assert len(program) % 8 == 0 and program
    for nr in KEYRING[arch]:
        assert run_bpf(program, nr, arch) == SECCOMP_RET_ERRNO | EPERM, nr
    for nr in ORDINARY[arch]:
        assert run_bpf(program, nr, arch) == SECCOMP_RET_ALLOW, nr
    others = {X86_64: [I386, AARCH64, ARM], AARCH64: [ARM, X86_64, I386]}[arch]
    for other in others:
        for nr in KEYRING[other] + (0, 3):
            assert run_bpf(program, nr, other) == SECCOMP_RET_KILL_PROCESS, (hex(other), nr)
    if arch == X86_64:
        for nr in KEYRING[X86_64] + (0, 1, 59):
            assert run_bpf(program, nr | X32_BIT, arch) == SECCOMP_RET_KILL_PROCESS, nr
