"""The trusted side of the boundary: the student's functions, called in a sandboxed worker.

``Worker`` starts ``grader.worker`` inside the sandbox (``grader.sandbox``),
hands it the notebook's set-up cell and the student's cells, and
``Worker.function(name, exercise)`` returns a ``RemoteFunction``: a stand-in the
grader's ``check`` calls exactly as it calls a local function. Each call sends
fresh copies of the inputs and gets back plain data (``grader.wire``), or the
error in words; the reference runs here, never there.

A worker that dies (memory limit, ``os._exit``, a signal) or does not answer in
time is stopped and started again for the next call, and the fault is kept in
``Worker.faults`` for the instructor's record.
"""
import builtins
import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from learner.check import safe, devices

from . import audit, processes, sandbox, wire

GRACE = 5.0          # seconds past a call's limit on the clock (safe.wall_limit) before the worker is stopped
START_LIMIT = 120.0  # seconds the worker may take to start and define the student's functions
KEPT_RETURNS = 512   # a call's latest callback results kept to hand back by identity (a model's cache is the last)


class SandboxFault(Exception):
    """The process running the student's code died, or was stopped; the message says how."""


class _Reader:
    """Frames from a pipe, with a deadline."""

    def __init__(self, fd):
        self.fd, self.buf = fd, b""

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, max(65536, n - len(self.buf)))
            if not chunk:
                raise EOFError
            self.buf += chunk

    def _take(self, n, deadline):
        self._fill(n, deadline)
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def frame(self, deadline):
        return wire.read_frame(lambda n: self._take(n, deadline))


def _signal_name(code):
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _exception(desc):
    """A local exception standing for the one the student's code raised (same name, same bases)."""
    name, mro, message = str(desc.get("type")), [str(n) for n in desc.get("mro", [])], str(desc.get("message", ""))
    cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        base = next((getattr(builtins, n) for n in mro[1:] if isinstance(getattr(builtins, n, None), type)
                     and issubclass(getattr(builtins, n), Exception)), Exception)
        cls = type(name, (base,), {})
    try:
        exc = cls(message) if message else cls()
    except Exception:
        exc = type(name, (Exception,), {})(message)
    exc.course_where = str(desc.get("where", ""))
    return exc


class Worker:
    """One sandboxed process holding one student's functions for one notebook."""

    def __init__(self, prelude, cells, label="submission", hide=()):
        self.prelude, self.cells, self.label = prelude, list(cells), label
        self.hide = tuple(hide)  # ready-made versions not there while this notebook is graded (sandbox.masked)
        self.slot = None  # this sandbox's own user and control groups (sandbox.claim)
        self.proc = None
        self.folder = None
        self.reader = None
        self.defined = None
        self.define_errors = []
        self.faults = []          # (kind, text): crashes, time-outs, refused outputs
        self.calls = 0
        self._returned = []
        self._tree = None  # the worker's processes (sandbox and Python), found once: see _cpu

    # ---------------------------------------------------------- process
    def start(self):
        self.folder = tempfile.mkdtemp(prefix="course-worker-")
        work = os.path.join(self.folder, "work")
        os.makedirs(work)
        self.slot = sandbox.claim() if sandbox.isolated() else None
        sandbox.prepare_folder(work, self.slot.uid if self.slot else None)
        argv = [sys.executable, "-I", "-m", "grader.worker"]
        cmd = sandbox.command(argv, work, slot=self.slot, hide=self.hide)
        self.stderr = open(os.path.join(self.folder, "stderr.txt"), "w+b")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     cwd=work, start_new_session=True)
        self.reader = _Reader(self.proc.stdout.fileno())
        reply = self._request({"op": "define", "prelude": self.prelude, "cells": self.cells}, START_LIMIT)
        if reply is None:
            raise SandboxFault(self._why_stopped("while defining your functions"))
        self.defined = set(reply.get("defined", []))
        self.define_errors = list(reply.get("errors", []))
        self._tree = None

    def stop(self):
        if self.proc is not None:
            # the worker's own processes first (those with none below them): the sandbox's first process reaps them
            # and ends, and bwrap with it, so the CPU time they used goes to whoever reaps that first process (the
            # nearest subreaper: ``bench/grading.py``'s core-seconds). Killed from the top, the first process goes
            # with its pid namespace and the kernel reaps what was inside itself: their time is counted nowhere.
            if self.proc.poll() is None:
                tree = self._tree or [self.proc.pid, *processes.descendants(self.proc.pid)]
                parent = processes.parents_of(tree)
                ours = {pid for pid in tree[1:] if parent.get(pid) in tree}  # (an id another process took: not)
                for pid in ours - set(parent.values()):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(timeout=2)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.kill()
            self.proc.wait()
            for f in (self.proc.stdin, self.proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.stderr.close()
            self.proc = None
            self._tree = None
        if self.slot is not None:
            self.slot.release()
            self.slot = None
        if self.folder:
            for kind, what in audit.read(os.path.join(self.folder, "work")):
                if ("blocked", f"{kind}: {what}") not in self.faults:
                    self.faults.append(("blocked", f"{kind}: {what}"))
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _stderr_tail(self):
        try:  # the last 2,000 bytes only: the sandboxed code may have written up to its file-size limit there
            self.stderr.seek(max(0, os.fstat(self.stderr.fileno()).st_size - 2000))
            return self.stderr.read(2000).decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def _why_stopped(self, when):
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(timeout=5)  # the pipe closed: the process is exiting, let it be reaped
            except subprocess.TimeoutExpired:
                code = None
        if code is None:
            return f"the process running your code stopped answering {when}"
        tail = self._stderr_tail()
        if code < 0:
            why = f"it was killed by {_signal_name(code)}"
            if -code == signal.SIGKILL:
                why += " (most often the memory limit, or too many processes)"
        else:
            why = f"it exited with code {code} (something called exit or os._exit, or the process ran out of memory)"
        if "MemoryError" in tail or "Cannot allocate memory" in tail:
            why += "; it ran out of memory"
        return f"the process running your code died {when}: {why}"

    def _request(self, msg, limit):
        deadline = time.monotonic() + limit
        try:
            wire.write_frame(self.proc.stdin, msg)
            return self.reader.frame(deadline)
        except (BrokenPipeError, EOFError, OSError, TimeoutError):
            return None

    def _cpu(self):
        """CPU seconds the worker's processes have used. Which processes those are is read from /proc once per
        worker (a scan of every process: milliseconds on a busy grading machine, too much for each of a
        notebook's hundreds of calls); each call then reads only their own lines. (A process a student's function
        starts is not counted: a call that waits for it is a call that waits.)"""
        if self._tree is None:
            self._tree = [self.proc.pid, *processes.descendants(self.proc.pid)]
        return processes.cpu_of(self._tree)

    # ---------------------------------------------------------- calls
    def function(self, name, exercise):
        """The student's ``name`` as a RemoteFunction, or None when no ``def`` defines it."""
        if self.proc is None:
            self.start()
        return RemoteFunction(self, name, exercise) if name in self.defined else None

    def call(self, function, exercise, args, kwargs, time_limit=None, measure=False):
        """Call the student's ``function`` in the worker; an ``safe.Outcome``, never raising. With ``measure`` the
        worker also measures the largest tensor the call made (``safe.call``)."""
        out = safe.Outcome()
        time_limit = safe.DEFAULT_TIME_LIMIT if time_limit is None else time_limit
        if self.proc is None:
            try:
                self.start()
            except SandboxFault as exc:
                self.faults.append(("crash", str(exc)))
                out.error = exc
                return out
        self.calls += 1
        call_id = self.calls
        callables, self._returned = [], []
        msg = {"op": "call", "id": call_id, "function": function, "exercise": exercise, "time_limit": time_limit,
               "measure": bool(measure), "args": _marked(args, callables), "kwargs": _marked(kwargs or {}, callables)}
        # the worker counts CPU time itself; from outside, a worker still computing when the clock runs out (a busy
        # machine) gets more time, as the worker's own clock limit gives it (safe.call), and one that waits does not
        window = safe.wall_limit(time_limit) + GRACE
        started = time.monotonic()
        deadline = started + window
        cpu = start_cpu = self._cpu()
        answering = 0.0  # CPU seconds this process spent running the call's callbacks: the call's computing too
        try:
            wire.write_frame(self.proc.stdin, msg)
            while True:
                try:
                    reply = self.reader.frame(deadline)
                except TimeoutError:
                    now_cpu = self._cpu()
                    # waiting, or computed past its limit (the worker's own CPU limit was turned off): stopped
                    if now_cpu - cpu < safe.COMPUTING_SHARE * window or now_cpu - start_cpu > time_limit + GRACE:
                        raise
                    deadline, cpu = time.monotonic() + window, now_cpu
                    continue
                if type(reply) is not dict:
                    continue
                if reply.get("op") == "callback" and reply.get("id") == call_id:
                    clock, own = time.monotonic(), time.process_time()
                    self._answer_callback(callables, reply)
                    answering += time.process_time() - own
                    deadline += time.monotonic() - clock  # the worker waited for us: not its time on the clock
                    if answering > time_limit + GRACE:  # a call that only asks for callbacks, without end
                        raise TimeoutError
                    continue
                if reply.get("op") == "result" and reply.get("id") == call_id:
                    break
        except TimeoutError:
            out.timed_out = True
            out.cpu_s, out.wall_s = max(self._cpu() - start_cpu, 0.0) + answering, time.monotonic() - started
            out.waited = out.cpu_s < time_limit
            out.stop = safe.TimeLimit()
            self.faults.append(("timeout", f"`{function}` did not finish within {time_limit:g} s of computing "
                                           f"({safe.wall_limit(time_limit):g} s on the clock); its process was "
                                           f"stopped"))
            self.stop()
            return out
        except (EOFError, BrokenPipeError, OSError) as exc:
            why = self._why_stopped(f"while running `{function}`")
            self.faults.append(("crash", why))
            self.stop()
            out.error = SandboxFault(why)
            return out
        except Exception as exc:  # an unreadable frame: not plain data
            self.faults.append(("refused", f"`{function}`: {exc}"))
            self.stop()
            out.error = wire.NotPlain(f"what your function returned could not be read back as plain data ({exc})")
            return out
        out.timed_out = bool(reply.get("timed_out"))
        _measures(out, reply)
        if out.timed_out:  # stopped by its own CPU-time limit inside the sandbox: recorded like one stopped from here
            self.faults.append(("timeout", f"`{function}` did not finish within {time_limit:g} s of computing; it "
                                           f"was stopped"))
        out.printed = str(reply.get("printed") or "")
        out.warnings = [str(w) for w in reply.get("warnings") or []]
        out.called_reference = reply.get("called") if isinstance(reply.get("called"), str) else None
        if "error" in reply and type(reply["error"]) is dict:
            out.error = _exception(reply["error"])
            limit = sandbox.limit_fault(type(out.error).__name__, out.error)
            if limit:
                self.faults.append((limit[0], f"`{function}` reached {limit[1]}: {type(out.error).__name__}: "
                                              f"{str(out.error)[:200]}"))
            elif devices.gpu_fault(out.error):
                # the worker's GPU is unusable from now on: its next call gets a fresh worker, so this costs only
                # the exercise it happened in
                self.faults.append(("crash", f"`{function}` caused a CUDA error on the GPU "
                                             f"({devices.gpu_fault(out.error)}); its process was started again"))
                self.stop()
        elif "not_plain" in reply:
            out.error = wire.NotPlain(str(reply["not_plain"]))
        elif not out.timed_out:
            try:
                out.value = wire.check_plain(reply.get("value"))
            except wire.NotPlain as exc:
                out.error = exc
        return out

    def _original(self, value):
        for kept in reversed(self._returned):
            if _identical(kept, value):
                return kept
        return value

    def _answer_callback(self, callables, msg):
        index = msg.get("index")
        if type(index) is not int or not 0 <= index < len(callables):
            wire.write_frame(self.proc.stdin, {"op": "return", "error": "no such callable"})
            return
        try:
            args = wire.check_plain(msg.get("args", ()), "the arguments")
            kwargs = wire.check_plain(msg.get("kwargs", {}), "the arguments")
            # a value a callback returned, handed back unchanged, is the very object it returned (a
            # recording model tells "the cache I gave you" from another one by identity)
            args = tuple(self._original(a) for a in args)
            kwargs = {k: self._original(v) for k, v in kwargs.items()}
            value = callables[index](*args, **kwargs)
            self._returned.append(value)
            if type(value) in (tuple, list):
                self._returned.extend(value)
            del self._returned[:-KEPT_RETURNS]  # a call that asks without end makes root hold no more than these
            wire.write_frame(self.proc.stdin, {"op": "return", "value": wire.check_plain(value)})
        except Exception as exc:
            wire.write_frame(self.proc.stdin, {"op": "return", "error": f"{type(exc).__name__}: {exc}"})


def _measures(out, reply):
    """What the worker measured of a call, read into ``out`` as plain numbers and a short text (anything else in
    their place is the student's doing and is dropped)."""
    for name in ("cpu_s", "wall_s"):
        value = reply.get(name)
        if type(value) in (int, float) and value == value and 0 <= value < 1e9:
            setattr(out, name, float(value))
    out.waited = reply.get("waited") is True
    out.rng_changed = reply.get("rng_changed") is True
    if type(reply.get("largest")) is int:
        out.largest = reply["largest"]
    if out.timed_out:
        out.stop = safe.TimeLimit()
        where = reply.get("stopped_in")
        out.stop.course_where = where[:300] if type(where) is str else ""


def _identical(a, b):
    """Same structure, and tensors equal element for element (same shape, dtype and device)."""
    if type(a) is not type(b):
        return False
    if safe.is_tensor(a):
        return (a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
                and (a.device.type == "meta" or safe.equal(a, b)))
    if type(a) in (tuple, list):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    return a == b


def _marked(obj, callables):
    """``obj`` with every grader-owned callable replaced by a callback marker (kept in ``callables``)."""
    if type(obj) in (tuple, list):
        return type(obj)(_marked(o, callables) for o in obj)
    if type(obj) is dict:
        return {k: _marked(v, callables) for k, v in obj.items()}
    try:
        return wire.check_plain(obj)
    except wire.NotPlain:
        if callable(obj):
            callables.append(obj)
            return wire.callback_marker(len(callables) - 1)
        raise


class RemoteFunction:
    """The student's function ``name``, called in the worker; ``check`` treats it as the function."""

    def __init__(self, worker, name, exercise):
        self.worker, self.__name__, self.exercise = worker, name, exercise

    def remote_call(self, args, kwargs, time_limit=None, measure=False):
        return self.worker.call(self.__name__, self.exercise, args, kwargs, time_limit, measure)

    def __call__(self, *args, **kwargs):
        out = self.remote_call(args, kwargs)
        if out.error is not None:
            raise out.error
        if out.timed_out:
            raise safe.TimeLimit()
        return out.value

    def sibling(self, name):
        """The student's function ``name`` from the same worker, or None."""
        return RemoteFunction(self.worker, name, name) if name in (self.worker.defined or ()) else None

    def __repr__(self):
        return f"<your {self.__name__}, run in the sandbox>"


safe.run_elsewhere(RemoteFunction)
