"""Primitives captured when the checks are imported, and a guarded call of learner code.

The course's first, read-only notebook cell imports the checks before any
learner cell runs, so the references kept here are the genuine ones even if a
learner later replaces ``torch.allclose``, ``torch.Tensor.tolist``,
``sys.setprofile`` and so on. All comparisons in the checks go through these.
"""
import contextlib
import io
import math
import os
import signal
import sys
import threading
import time
import warnings

import torch
from torch.overrides import TorchFunctionMode

Tensor = torch.Tensor
tolist = torch.Tensor.tolist
detach = torch.Tensor.detach
to = torch.Tensor.to
clone = torch.Tensor.clone
is_tensor = torch.is_tensor
zeros = torch.zeros
randn = torch.randn
Generator = torch.Generator
finfo = torch.finfo
equal = torch.equal
where = torch.where
float32, float64, bool_, long = torch.float32, torch.float64, torch.bool, torch.long
_cuda_initialized = torch.cuda.is_initialized
_cuda_synchronize = torch.cuda.synchronize
_get_rng_state = torch.get_rng_state
_set_rng_state = torch.set_rng_state
_cpu_generator = torch.default_generator
_urandom = os.urandom
_cuda_get_rng_state = torch.cuda.get_rng_state
_cuda_get_rng_state_all = torch.cuda.get_rng_state_all
_cuda_set_rng_state_all = torch.cuda.set_rng_state_all
_numel = torch.Tensor.numel
_setprofile = sys.setprofile
_getprofile = sys.getprofile
_setitimer = signal.setitimer
_getitimer = signal.getitimer
_process_time = time.process_time
_monotonic = time.monotonic
_signal = signal.signal
_StringIO = io.StringIO
isfinite = math.isfinite
_isnan = math.isnan
_main_thread = threading.main_thread
_current_thread = threading.current_thread
# seconds the calls of this process spent waiting for their caller to answer a callback (``away``), and when the
# wait now under way began (None: none is)
_AWAY = [0.0, None]


def _away_so_far():
    return _AWAY[0] + (_monotonic() - _AWAY[1] if _AWAY[1] is not None else 0.0)

DEFAULT_TIME_LIMIT = float(os.environ.get("COURSE_CALL_TIME_LIMIT", "10"))
# A call's limit counts the CPU time the process spends (ITIMER_PROF), not the clock: on a busy machine a correct
# function only waits longer for a core, and is never stopped for it. A call that blocks without computing (a sleep,
# a wait) is stopped on the clock after WALL_FACTOR times its limit; one that computed for at least COMPUTING_SHARE
# of that time is computing, only slowed down by the machine, and gets another WALL_FACTOR times its limit.
WALL_FACTOR = 3.0
COMPUTING_SHARE = 0.02


def wall_limit(time_limit):
    """Seconds on the clock after which a call of ``time_limit`` CPU seconds is stopped anyway."""
    return time_limit * WALL_FACTOR


class TimeLimit(BaseException):
    """Raised inside learner code when a call runs past its time limit."""


IMPORT_GRACE = 10.0  # seconds past its limit a call may spend finishing an import it is in the middle of
_POLL = 0.05


def _importing(frame):
    """Whether ``frame`` is inside an import (importlib's machinery is on the stack): a library that PyTorch loads
    on first use (torch._dynamo, sympy) stopped half-way stays half-loaded in this process, and every later call
    that needs it fails, whoever makes it."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


class Outcome:
    """What one call of a learner function did: its value or error; whether it was stopped (``timed_out``), after
    how many CPU and clock seconds (``cpu_s``, ``wall_s``), because it waited rather than computed (``waited``), and
    where (``stop``: the TimeLimit it was stopped with); its printed text and warnings; a call of the reference it
    made; whether it changed PyTorch's global random state (``rng_changed``); and, when the call was asked to
    ``measure``, the number of elements of the largest tensor a torch function returned inside it (``largest``)."""

    __slots__ = ("value", "error", "timed_out", "printed", "warnings", "called_reference", "cpu_s", "wall_s",
                 "waited", "stop", "rng_changed", "largest")

    def __init__(self):
        self.value = None
        self.error = None
        self.timed_out = False
        self.printed = ""
        self.warnings = []
        self.called_reference = None
        self.cpu_s = 0.0
        self.wall_s = 0.0
        self.waited = False
        self.stop = None
        self.rng_changed = False
        self.largest = None


class _Largest(TorchFunctionMode):
    """While active, keeps the number of elements of the largest tensor any torch function returns (one level of
    tuples and lists looked into: ``sort``, ``topk``)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in (out if isinstance(out, (tuple, list)) else (out,)):
            if isinstance(t, Tensor):
                n = _numel(t)
                if n > self.largest:
                    self.largest = n
        return out


def _rng_state():
    """PyTorch's global random state: the CPU generator's, and the current GPU's once CUDA is in use (None where it
    cannot be read: a GPU that an earlier CUDA error left unusable)."""
    try:
        gpu = _cuda_get_rng_state() if _cuda_initialized() else None
    except Exception:
        gpu = None
    return (_get_rng_state(), gpu)


def _same_rng(a, b):
    """Whether two ``_rng_state()`` readings agree (a GPU first used by the call meanwhile has nothing to compare)."""
    return all(x is None or y is None or equal(x, y) for x, y in zip(a, b))


REMOTE_TYPES = ()  # grader.remote.RemoteFunction: a student's function run in the sandbox (``run_elsewhere``)


def run_elsewhere(kind):
    """Calls of a ``kind`` of function keep their own time (a student's function run in the sandbox: the grading
    machine, ``grader.remote``, says so here), so ``call`` adds no clock of its own."""
    global REMOTE_TYPES
    if kind not in REMOTE_TYPES:
        REMOTE_TYPES = REMOTE_TYPES + (kind,)
_reference_dirs = []
_given = {}  # code object -> its name: ready-made versions of the exercise being checked (see forbid_given)


def forbid_calls_into(directory):
    """Report any call, made by learner code, of a function defined under ``directory``."""
    if directory and directory not in _reference_dirs:
        _reference_dirs.append(os.path.join(os.path.realpath(directory), ""))


@contextlib.contextmanager
def forbid_given(code_labels):
    """While checking one exercise, report calls of the course's ready-made versions of it.

    ``code_labels`` maps code objects to names; a call made inside ``call`` of any
    of them is reported like a call into the reference.
    """
    _given.clear()
    _given.update(code_labels)
    try:
        yield
    finally:
        _given.clear()


@contextlib.contextmanager
def away():
    """Time spent in this block is the caller's: the sandboxed worker waiting for the trusted side to run a callback
    (the checks' model, ``grader.worker._Callback``). A call's clock limit leaves it out, as neither its computing
    nor its waiting: on a busy machine the answers come slowly, and a call that mostly waited for them was stopped
    as one that waits (the reference's greedy_translate lost its points in a loaded `make demo`). What the callbacks
    compute is charged to the call on the trusted side (``grader.remote.Worker.call``)."""
    _AWAY[1] = _monotonic()
    try:
        yield
    finally:
        _AWAY[0], _AWAY[1] = _away_so_far(), None


def call(fn, args=(), kwargs=None, time_limit=None, measure=False):
    """Call ``fn(*args, **kwargs)`` and record what happened, never raising.

    stdout / stderr are captured and warnings recorded, so correct code that
    warns does not put text on the notebook's stderr (which nbgrader scores 0).
    A call that computes for more than ``time_limit`` seconds of CPU time, or blocks for more than
    ``wall_limit(time_limit)`` seconds on the clock (computing less than ``COMPUTING_SHARE`` of a core meanwhile),
    is interrupted (main thread). Whether the call changed PyTorch's global random state is always recorded;
    with ``measure``, so is the size of the largest tensor it made (``Outcome.largest``).
    """
    if REMOTE_TYPES and type(fn) in REMOTE_TYPES:  # runs in the sandbox, which keeps its own time
        return fn.remote_call(tuple(args), dict(kwargs or {}), time_limit, measure)
    out = Outcome()
    kwargs = kwargs or {}
    time_limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    sink = _StringIO()
    seen = {}

    def profiler(frame, event, arg):
        if event == "call" and "ref" not in seen:
            code = frame.f_code
            if code in _given:
                seen["ref"] = f"{_given[code]}, the course's ready-made version of this exercise"
                return
            filename = code.co_filename
            for d in _reference_dirs:
                if filename.startswith(d):
                    seen["ref"] = f"{code.co_name} in {os.path.basename(filename)}"

    use_alarm = _current_thread() is _main_thread() and time_limit
    waited = []  # stopped on the clock while it was not computing
    old_handlers = {}
    # the caller's own alarm (pytest-timeout's, say) is put back afterwards, less the time the call took
    outer_alarm, called_at = (_getitimer(signal.ITIMER_REAL), _monotonic()) if use_alarm else ((0.0, 0.0), 0.0)
    if use_alarm:
        grace = [int(IMPORT_GRACE / _POLL)]

        start = _process_time()
        mark = [start, _monotonic(), _away_so_far()]  # CPU time, clock and time away at the start, then at each look

        def on_alarm(signum, frame):
            if grace[0] > 0 and _importing(frame):  # past the limit in an import: stop once it is done
                grace[0] -= 1
                _setitimer(signal.ITIMER_REAL, _POLL)
                return
            if signum == signal.SIGALRM:  # on the clock: stop a call that waits, not one waiting for a core
                cpu, now, off = _process_time(), _monotonic(), _away_so_far()
                computing = cpu - mark[0] >= COMPUTING_SHARE * max(now - mark[1] - (off - mark[2]), 0.0)
                mark[:] = [cpu, now, off]
                # slow because the machine is busy: its CPU time limit (SIGPROF) decides; unless it computed past
                # that limit already (the call turned SIGPROF off), when the clock stops it as before
                if computing and cpu - start < time_limit + _POLL:
                    _setitimer(signal.ITIMER_REAL, wall_limit(time_limit))
                    return
                if not computing:
                    waited.append(True)
            raise TimeLimit()
        old_handlers = {sig: _signal(sig, on_alarm) for sig in (signal.SIGPROF, signal.SIGALRM)}
    old_profile = _getprofile()
    # the call starts from a CPU random state no constant seed gives, so that one that seeds is seen even where the
    # caller's state was freshly seeded with the same number; the caller's own state is put back after the call
    rng_kept = (_get_rng_state(), _cuda_get_rng_state_all() if _cuda_initialized() else None)
    _cpu_generator.manual_seed(int.from_bytes(_urandom(8), "little") >> 1)
    rng_before = _rng_state()
    sizes = _Largest() if measure else contextlib.nullcontext()
    cpu_at, clock_at = _process_time(), _monotonic()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                try:
                    if use_alarm:
                        _setitimer(signal.ITIMER_PROF, time_limit)  # computing
                        _setitimer(signal.ITIMER_REAL, wall_limit(time_limit))  # blocking
                    if _reference_dirs or _given:
                        _setprofile(profiler)
                    try:
                        with sizes:
                            out.value = fn(*args, **kwargs)
                        if _cuda_initialized():  # a CUDA error surfaces at the next synchronisation: as this call's
                            _cuda_synchronize()
                    finally:
                        _setprofile(old_profile)
                        if use_alarm:
                            _setitimer(signal.ITIMER_PROF, 0)
                            _setitimer(signal.ITIMER_REAL, 0)
                except TimeLimit as exc:
                    out.timed_out, out.stop, out.waited = True, exc, bool(waited)
                except Exception as exc:  # the learner's own error, reported in words
                    out.error = exc
        out.warnings = [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        out.rng_changed = not _same_rng(rng_before, _rng_state())
        _set_rng_state(rng_kept[0])  # whatever the call did, SystemExit included (torch.manual_seed seeds the GPUs too)
        if rng_kept[1] is not None:
            _cuda_set_rng_state_all(rng_kept[1])
        for sig, handler in old_handlers.items():
            _signal(sig, handler)
        if outer_alarm[0] > 0:  # the caller's alarm, less the call's time (one due meanwhile goes off at once)
            _setitimer(signal.ITIMER_REAL, max(outer_alarm[0] - (_monotonic() - called_at), 0.001), outer_alarm[1])
    out.cpu_s, out.wall_s = _process_time() - cpu_at, _monotonic() - clock_at
    out.printed = sink.getvalue()
    out.called_reference = seen.get("ref")
    out.largest = sizes.largest if measure else None
    return out
