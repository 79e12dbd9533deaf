"""Notes of what the sandbox refused, for the instructor's record.

Installed first thing in the sandboxed kernel and worker (``python -m
grader.audit KERNEL-ARGS`` or ``install()``), a Python audit hook writes one
line to ``AUDIT_FILE`` in the submission's scratch folder for each attempt to
open a file outside what the sandbox shows (the submission, the installed
packages, the system) and each attempt to reach the network. The sandbox blocks
both anyway; this only makes them visible. Student code can delete the file, so
the record is a hint for a human, never a verdict.
"""
import os
import sys

AUDIT_FILE = ".course-audit.jsonl"
READ_NOTES, NOTE_BYTES = 100, 4096  # what the trusted side reads back of it, at most
_ALLOWED = ("/usr/", "/etc/", "/proc/", "/sys/", "/dev/", "/tmp/", "/home/student/", "/bin/", "/lib",
            "/run/course-kernel/")  # the last: the kernel's own connection file (grader.nbgrader_plugin)
_state = {"n": 0}


def install(path=None):
    import json
    here = os.path.dirname(os.path.abspath(__file__))
    packages = {os.path.join(os.path.dirname(here), name) for name in ("learner", "grader", "coursekit")}  # the
    # course's own packages, nothing more
    allowed = tuple({os.path.join(os.path.realpath(p), "") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
                    | {os.path.join(p, "") for p in packages}) + _ALLOWED
    # the reference, wherever the course lives (under /tmp too, which is otherwise the sandbox's own)
    refused = (os.path.join(os.path.dirname(here), "solutions", ""),)
    log_path = os.path.abspath(path or AUDIT_FILE)
    write, dumps, getcwd, join, normpath = os.write, json.dumps, os.getcwd, os.path.join, os.path.normpath
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def note(kind, what):
        if _state["n"] < 50:
            _state["n"] += 1
            write(fd, (dumps([kind, what]) + "\n").encode())

    def hook(event, args):
        try:
            if event == "open" and isinstance(args[0], str):
                target = args[0] if args[0].startswith("/") else join(getcwd(), args[0])
                target = normpath(target)
                if (target + "/").startswith(refused) or (not (target + "/").startswith(allowed)
                                                         and target != log_path):
                    note("read-outside", target)
            elif event in ("glob.glob", "os.listdir", "os.scandir") and isinstance(args[0], str):
                target = normpath(args[0] if args[0].startswith("/") else join(getcwd(), args[0]))
                if not (target + "/").startswith(allowed) and target not in ("/", "."):
                    note("read-outside", target)
            elif event in ("socket.connect", "socket.sendto"):
                note("network", repr(args[1])[:200])
            elif event == "socket.getaddrinfo":
                note("network", f"name lookup of {args[0]!r}"[:200])
        except Exception:
            pass
    sys.addaudithook(hook)


def read(folder):
    """The notes written in ``folder``: a list of (kind, what)."""
    import json
    notes = []
    try:  # the student's code can write this file: read at most READ_NOTES notes of at most NOTE_BYTES each
        with open(os.path.join(folder, AUDIT_FILE), "rb") as f:
            while len(notes) < READ_NOTES:
                line = f.readline(NOTE_BYTES)
                if not line:
                    break
                if not line.endswith(b"\n") and len(line) == NOTE_BYTES:
                    while line and not line.endswith(b"\n"):  # the rest of an over-long line, in pieces
                        line = f.readline(NOTE_BYTES)
                    continue
                try:
                    kind, what = json.loads(line.decode("utf-8", "replace"))
                    notes.append((str(kind)[:40], str(what)[:300]))
                except (ValueError, TypeError):
                    continue
    except OSError:
        pass
    return list(dict.fromkeys(notes))


def end(code):
    """End this process now: what ``atexit`` holds runs and the standard streams are flushed, then ``os._exit``.

    A process that has imported PyTorch and matplotlib spends about a second of CPU tearing its modules and
    PyTorch's C++ state down at a normal exit, and a graded submission's kernel exits once per submission. Its
    outputs have all gone to nbgrader by then (the kernel answered the shutdown request), so nothing is lost.
    """
    import atexit
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _exit_code(exc):
    """The exit status ``sys.exit(exc.code)`` gives: 0 for None, the number, else 1 (the message printed)."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


if __name__ == "__main__":  # the kernel's launcher: python -m grader.audit -f CONNECTION_FILE ...
    import learner.check  # noqa: F401  (the checks and PyTorch, imported before the hook: the set-up cell uses both)
    install()
    import runpy
    try:
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        status = 0
    except SystemExit as exc:
        status = _exit_code(exc)
    except BaseException:
        import traceback
        traceback.print_exc()
        status = 1
    end(status)
