"""The trusted verdict on one submission: the reference runs here, the student's code in the sandbox.

nbgrader scores a test cell by what the student's kernel printed, and that kernel
ran everything the student wrote. The judge decides instead, from outside:

1. It runs as ``python -I -m grader.judge`` in an empty folder, on the grading
   machine, with the reference (``solutions``) captured before any student code
   exists.
2. It starts one sandboxed worker (``grader.remote.Worker``, ``grader.worker``)
   holding the student's *definitions only* (``grader.worker.definitions``):
   every top-level statement that is not a definition is dropped.
3. For each graded cell it runs the cell's checks with the student's functions
   as ``RemoteFunction`` stand-ins: the cases, the reference and the comparison
   stay here; each call of the student's function crosses into the sandbox with
   fresh copies of its inputs and comes back as plain data.

``grader.nbgrader_plugin.TrustedVerdict`` replaces the outputs of every graded
cell with this verdict, so nbgrader records it and nothing the kernel printed.

``python -I -m grader.judge --serve`` is the same judge, started once per grading
process (``JudgeServer``): it captures the reference and loads what the checks load
lazily (PyTorch's meta-device kernels pull in sympy, and ``torch._dynamo`` unless it is spared),
then forks one child per submission. Each child is a judge that has seen no other
submission, as a fresh process would be, without paying for the imports again.

The request is ``{"prelude": set-up cell, "cells": [source, ...],
"checks": [[cell_id, exercise, function, part], ...], "seed": the student's seed of the hidden cases
(``grader.seeds``)}``; the verdict is ``{"results": {cell_id: [ok, message]}, "faults": [[kind, text], ...],
"isolated": bool}``, or ``{"error": words}`` when the grader itself failed. A forked judge reads the request from
``request.json`` in its folder and writes the verdict, whole, to ``verdict.json`` there (``VERDICT``: written to a
temporary name, then renamed); what it prints goes to ``stdout.txt`` and ``stderr.txt`` beside it, for diagnosis
only. ``python -I -m grader.judge`` alone reads the request on stdin and prints the verdict as its last line.
"""
import contextlib
import io
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import typing

from .processes import Kept
from .worker import definitions  # noqa: F401  (the rule for what of a cell is kept, documented there)


def run_checks(request):
    import learner.check  # first: the checks capture their primitives and the reference before student code exists
    from learner.check import CheckFailed

    from . import remote, sandbox

    results, faults = {}, []
    worker = remote.Worker(request.get("prelude"), request["cells"], hide=ready_made(request["checks"]))
    try:
        try:
            worker.start()
        except remote.SandboxFault as exc:
            faults.append(("crash", str(exc)))
            for cell_id, *_ in request["checks"]:
                results[cell_id] = (False, f"your code could not be loaded for grading: {exc}")
            return results, faults, sandbox.isolated()
        for cell_id, exercise, function, part in request["checks"]:
            ok, text = results.get(cell_id, (True, ""))
            if not ok:
                continue
            try:
                fn = worker.function(function, exercise)  # starts the worker again after a crash
            except remote.SandboxFault as exc:
                faults.append(("crash", str(exc)))
                results[cell_id] = (False, f"your code could not be loaded for grading: {exc}")
                continue
            if fn is None:
                results[cell_id] = (False, f"`{function}` is not defined by a `def` in your cells (graded on your "
                                           f"definitions only)")
                continue
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    learner.check.check(exercise, fn, part, seed=request.get("seed", 0))
            except CheckFailed as exc:
                results[cell_id] = (False, str(exc))
            except Exception as exc:
                results[cell_id] = (False, f"the check could not run: {type(exc).__name__}: {exc}")
            else:
                results[cell_id] = (True, (text + "\n" if text else "") + printed.getvalue().strip())
    finally:
        worker.stop()  # reads the sandbox's notes of refused attempts into worker.faults
        faults.extend(worker.faults)
    return results, faults, sandbox.isolated()


def ready_made(checks):
    """The course's ready-made versions ("module:function") of every exercise of the notebook these checks grade:
    none of them is in the sandbox while it is graded (``grader.sandbox.masked``), whatever route a student's code
    takes to them. (They are there for the notebooks after it.)"""
    from learner.check.cases import EXERCISES
    from learner.syllabus import NOTEBOOKS
    folders = sorted({EXERCISES[exercise].notebook for _, exercise, *_ in checks if exercise in EXERCISES})
    return [g for folder in folders for given in NOTEBOOKS[folder].given.values() for g in given]


VERDICT = "verdict.json"


def verdict_of(request):
    """(the verdict on ``request``, exit code): 0 when it was judged, 2 when the grader itself failed."""
    try:
        results, faults, isolated = run_checks(request)
    except Exception as exc:  # the sandbox is missing, or the grader itself failed: say so, grade nothing
        return {"error": f"{type(exc).__name__}: {exc}"}, 2
    return {"results": results, "faults": faults, "isolated": isolated}, 0


def write_verdict(path, verdict):
    """The verdict as a file of its own, whole or not at all (written beside, then renamed)."""
    with open(path + ".part", "w") as f:
        json.dump(verdict, f)
    os.replace(path + ".part", path)


def read_verdict(path):
    """The verdict a judge wrote at ``path``, or None when it wrote none."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    verdict, code = verdict_of(json.loads(sys.stdin.read()))
    sys.stdout.write("\n" + json.dumps(verdict) + "\n")
    sys.stdout.flush()
    return code


# ------------------------------------------------------------------ one judge per submission, forked
def _warm():
    """Load, before any submission, what the checks would otherwise load on first use in every judge."""
    import learner.check  # noqa: F401  (the reference and the checks' primitives, captured)
    import torch

    from learner.check import devices
    devices.spare_dynamo()  # the meta device's Python kernels would import torch._dynamo on their first call
    x = torch.ones(2, 3, device="meta")
    (x / 2).softmax(-1).masked_fill(x > 0, 0.0).matmul(x.T)  # no thread pool starts for the meta device


def _child(folder):
    """In the forked child: judge ``folder``/request.json into ``folder``/verdict.json; what it prints goes to
    stdout.txt and stderr.txt there."""
    os.chdir(folder)
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with open("request.json") as f:
        request = json.load(f)
    verdict, code = verdict_of(request)
    write_verdict(os.path.join(folder, VERDICT), verdict)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def serve():
    """The loop of ``--serve``: a folder a line in; ``{"pid": n}`` when its judge starts, ``{"exit": code}`` when it
    ends (negative: killed by that signal)."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != hard:  # a plain user's nbgrader process runs under a soft address-space limit; its judge maps PyTorch
        resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
    _warm()
    answers = sys.stdout
    for line in sys.stdin:
        folder = json.loads(line)["folder"]
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(folder)
            finally:
                os._exit(code or 0)
        print(json.dumps({"pid": pid}), file=answers, flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"exit": os.waitstatus_to_exitcode(status)}), file=answers, flush=True)
    return 0


class JudgeServer:
    """A ``--serve`` process; ``judge(request, timeout)`` returns a ``Judged``.

    It is started with the environment of its first use and again whenever that environment changes (the
    judge reads its limits from it), or after it died."""

    def __init__(self, env):
        self.env = env
        self.proc = subprocess.Popen([sys.executable, "-I", "-m", "grader.judge", "--serve"], env=env,
                                     cwd=tempfile.gettempdir(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def _line(self, deadline):
        ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError("the judge server stopped")
        return json.loads(line)

    def judge(self, request, timeout):
        with tempfile.TemporaryDirectory(prefix="course-judge-") as folder:
            with open(os.path.join(folder, "request.json"), "w") as f:
                json.dump(request, f)
            self.proc.stdin.write(json.dumps({"folder": folder}).encode() + b"\n")
            self.proc.stdin.flush()
            deadline = time.monotonic() + timeout
            started = self._line(deadline + 60)
            if started is None:
                raise EOFError("the judge server did not start a judge")
            pid = started["pid"]
            done = self._line(deadline)
            if done is None:  # past its time: the judge and, with it, its sandboxed worker (--die-with-parent)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                self._line(time.monotonic() + 60)
            outputs = [_read(os.path.join(folder, name)) for name in ("stdout.txt", "stderr.txt")]
            return Judged(None if done is None else read_verdict(os.path.join(folder, VERDICT)), *outputs,
                          None if done is None else done["exit"])


class Judged(typing.NamedTuple):
    """What a forked judge left: its verdict (None when it wrote none: killed past its time, or crashed), what it
    printed (for diagnosis only), and its exit code (None: stopped past its time)."""
    verdict: dict
    stdout: str
    stderr: str
    code: int


TAIL_BYTES = 64 * 1024  # of what a judge printed, the most read back


def _read(path, tail=TAIL_BYTES):
    """The last ``tail`` bytes of ``path`` as text (what a judge printed: for diagnosis, never all of it)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - tail))
            return f.read(tail).decode("utf-8", "replace")
    except OSError:
        return ""


_SERVER = Kept(JudgeServer)  # this process's judge server, started again for another environment or when it died


def judge(request, env, timeout):
    """The ``Judged`` of a judge on ``request`` (its exit code None past ``timeout``), forked from this process's
    judge server (started, or started again, as needed)."""
    for attempt in (1, 2):
        try:
            return _SERVER.get(env).judge(request, timeout)
        except (OSError, EOFError, ValueError):  # BrokenPipeError is an OSError
            _SERVER.stop()  # it died between two submissions: once more with a fresh one
            if attempt == 2:
                raise


if __name__ == "__main__":
    sys.exit(serve() if sys.argv[1:] == ["--serve"] else main())
