"""The course's grader: ``check("softmax", softmax, part="basic")`` under each exercise.

A part is one graded test cell:

* ``basic``  seeded random cases, compared with outputs of the reference that
  ship with the grader (works without the ``solutions`` package);
* ``edge``   the notes' edge cases and bad inputs, plus property checks;
* ``hidden-basic`` fresh random cases of the basic kind, on CPU and CUDA when
  present, compared with the live reference (grading machine only);
* ``hidden`` the edge cases and fresh, larger random cases on every device, a
  meta-device probe for tensors created on the wrong device, hidden properties.

Each graded cell pairs a visible part with a hidden one (basic with hidden-basic,
edge with hidden), so a function that only looks up the shipped expectations
earns nothing.

A failed check raises ``CheckFailed`` (an AssertionError) whose message names the
case, the first wrong position, expected vs got, and the known mistake it
matches; a passed check prints one line. The grader never crashes on a bad
learner function: errors, hangs, wrong shapes, dtypes, devices and NaN are all
reported as failures in words.
"""
import os
import sys
import traceback

from . import _safe
from .compare import compare, same
from .exercises import EXERCISES, hidden_cases, visible_cases

__all__ = ["check", "CheckFailed", "EXERCISES", "reference_available"]

PARTS = ("basic", "edge", "hidden-basic", "hidden")
_HERE = os.path.dirname(os.path.abspath(__file__))
_EXPECTED_DIR = os.path.join(_HERE, "expected")


def resolve(path, default_module):
    """The function a registry path names inside ``solutions``: "module:function", or
    "function" in ``default_module``."""
    import importlib
    module, _, attr = path.rpartition(":")
    return getattr(importlib.import_module("solutions." + (module or default_module)), attr)


def _load_reference():
    """Capture the reference functions now, before any learner code can touch them."""
    try:
        import solutions
    except ImportError:
        return None
    _safe.forbid_calls_into(os.path.dirname(os.path.abspath(solutions.__file__)))
    funcs = {name: resolve(ex.ref, "") for name, ex in EXERCISES.items()}
    mistakes = {m: resolve(m, "mistakes") for ex in EXERCISES.values() for m, _ in ex.mistakes}
    return funcs, mistakes


_REFERENCE = _load_reference()
_GIVEN = {}  # exercise -> {code object: "module.function"}, captured before learner code can replace them


def _capture_given(name):
    """The code objects of the ready-made versions of exercise ``name`` (``Exercise.given``)."""
    import importlib
    if name not in _GIVEN:
        codes = {}
        for path in EXERCISES[name].given:
            module, _, attr = path.partition(":")
            try:
                codes[getattr(importlib.import_module(module), attr).__code__] = f"{module}.{attr}"
            except (ImportError, AttributeError):  # mid-import (coursekit.widgets imports the grader): later
                return codes
        _GIVEN[name] = codes
    return _GIVEN[name]


for _name in EXERCISES:
    _capture_given(_name)


def reference_available():
    return _REFERENCE is not None


class CheckFailed(AssertionError):
    """A learner's function did not pass a check; the message says why."""


# ------------------------------------------------------------------ devices
def grading_devices():
    """CPU always; CUDA too when present or asked for with COURSE_DEVICE=cuda."""
    import torch
    want = os.environ.get("COURSE_DEVICE", "auto")
    devices = ["cpu"]
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("COURSE_DEVICE=cuda was asked for, but torch sees no CUDA device")
        devices.append("cuda")
    return devices


def _move(obj, device):
    if _safe.is_tensor(obj):
        return _safe.to(obj, device)
    if isinstance(obj, tuple):
        return tuple(_move(o, device) for o in obj)
    if isinstance(obj, list):
        return [_move(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: _move(v, device) for k, v in obj.items()}
    return obj


def _tensors(obj):
    if _safe.is_tensor(obj):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o)


# ------------------------------------------------------------------ shipped expectations
def expected_path(name):
    return os.path.join(_EXPECTED_DIR, f"{name}.pt")


def load_expected(name):
    import torch
    path = expected_path(name)
    if not os.path.exists(path):
        raise RuntimeError(f"the grader's expected outputs for {name!r} are missing ({path}); "
                           f"run `python -m grader.build` on a machine with the reference")
    return read_expected(path)


def read_expected(path):
    """A shipped file: tensors and plain data only, plus the grader's own toy models (``SAFE_GLOBALS``)."""
    import torch
    from .exercises import SAFE_GLOBALS
    with torch.serialization.safe_globals(SAFE_GLOBALS):
        return torch.load(path, weights_only=True)


# ------------------------------------------------------------------ judging one call
def _where_raised(exc):
    where = getattr(exc, "course_where", None)  # raised in the sandbox: where it was raised came with it
    if isinstance(where, str):
        return where
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if not f.filename.startswith(_HERE) and "site-packages" not in f.filename]
    if not mine:
        return ""
    f = mine[-1]
    place = "your cell" if f.filename.startswith("<") or "ipykernel" in f.filename else os.path.basename(f.filename)
    code = (f.line or "").strip()
    return f" (line {f.lineno} of {place}" + (f": `{code}`)" if code else ")")


def _problem(fn_name, outcome, expected, raises, ref_message, device, input_scale=0.0):
    """Return (kind, text) describing what is wrong with one call, or None when it is right."""
    if outcome.called_reference:
        what = outcome.called_reference
        what = f"{what}" if "ready-made" in what else f"the reference solution ({what})"
        return "reference", (f"it called {what}. The grader needs your own implementation, so this counts as a "
                             f"failure.")
    if outcome.timed_out:
        return "timeout", (f"it did not finish within {_safe.DEFAULT_TIME_LIMIT:g} s and was stopped: look for a loop "
                           f"that never ends. The remaining cases of this check were skipped.")
    err = outcome.error
    if type(err).__name__ == "SandboxFault":
        return "crash", f"{err}. The remaining cases of this check were skipped."
    if type(err).__name__ == "NotPlain":
        return "type", f"{err}."
    if isinstance(err, NotImplementedError) and not str(err):  # the stub; torch's own have a message
        return "stub", (f"`{fn_name}` is not implemented yet: it still raises NotImplementedError. Replace the "
                        f"`raise NotImplementedError()` line in the exercise cell with your code.")
    if raises:
        if err is None:
            return "no-raise", (f"this input is invalid, so it should raise {raises} (the reference says: "
                                f"\"{ref_message}\"), but it returned a {type(outcome.value).__name__}.")
        if type(err).__name__ != raises and raises not in [c.__name__ for c in type(err).__mro__]:
            return "wrong-raise", (f"this input is invalid and should raise {raises}, but it raised "
                                   f"{type(err).__name__}: {err}{_where_raised(err)}.")
        return None
    if err is not None:
        return "error", f"it raised {type(err).__name__}: {str(err)[:300]}{_where_raised(err)}."
    mismatch = compare(expected, outcome.value, "output", input_scale=input_scale)
    if mismatch is None:
        return None
    return mismatch.kind, mismatch.text


def _diagnose(kind, got, mistake_outputs, explanations):
    """Name the known mistake whose output the learner's output equals.

    A NaN output cannot equal anything, so for NaN the mistake named is the first
    one that also produces NaN on this case (overflow, a 0/0 row).
    """
    if kind in ("stub", "error", "timeout", "crash", "reference", "no-raise", "wrong-raise"):
        return None
    for mname, mout in mistake_outputs.items():
        if mout is None or mname not in explanations:
            continue
        if kind == "nan":
            if any(t.is_floating_point() and t.device.type != "meta" and any(v != v for v in _flat(t))
                   for t in _tensors(mout)):
                return explanations[mname]
        elif same(mout, got):
            return explanations[mname]
    return None


def _flat(t):
    values = _safe.tolist(_safe.to(_safe.detach(t), "cpu"))
    stack, out = [values], []
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        else:
            out.append(v)
    return out


class _Run:
    def __init__(self, name, part):
        self.name, self.part = name, part
        self.n = 0
        self.failures = []      # (index, what, device, kind, text, mistake)
        self.notes = []
        self.printed = False
        self.warned = []
        self.stopped = False

    def record(self, index, what, device, outcome, problem, mistake):
        self.n += 1
        if outcome is not None:
            self.printed = self.printed or bool(outcome.printed)
            self.warned.extend(outcome.warnings)
        if problem is not None:
            self.failures.append((index, what, device, problem[0], problem[1], mistake))
            if problem[0] in ("timeout", "crash"):
                self.stopped = True

    def finish(self):
        label = f"{self.name} [{self.part}]"
        extras = []
        if self.printed:
            extras.append("your function printed text; it was kept off the notebook during grading")
        if self.warned:
            extras.append(f"it raised a warning ({self.warned[0]}); warnings do not cost points")
        extra = (" Note: " + "; ".join(extras) + ".") if extras else ""
        if not self.failures:
            print(f"PASSED {label}: {self.n} check{'s' if self.n != 1 else ''} passed.{extra}")
            return
        index, what, device, kind, text, mistake = self.failures[0]
        lines = [f"FAILED {label}: {len(self.failures)} of {self.n} checks failed.",
                 f"First failure, case {index}: {what} (device {device}):",
                 f"  {text}"]
        if mistake:
            lines.append(f"  This looks like a known mistake: {mistake}.")
        else:
            later = next((f for f in self.failures if f[5]), None)
            if later:
                lines.append(f"  Case {later[0]} ({later[1]}) matches a known mistake: {later[5]}.")
        kinds = sorted({f[3] for f in self.failures[1:]} - {kind})
        if kinds:
            lines.append(f"  Other failing cases show: {', '.join(kinds)}.")
        for note in self.notes:
            lines.append(f"  Note: {note}.")
        if extra:
            lines.append(extra.strip())
        raise CheckFailed("\n".join(lines))


def _judge_case(run, fn, fn_name, index, what, args, kwargs, raises, expected, ref_message, mistakes, explanations,
                device):
    if run.stopped:
        return
    outcome = _safe.call(fn, args, kwargs)
    ex = EXERCISES.get(fn_name)
    scale = ex.conditioning(args, kwargs) if ex is not None and ex.conditioning and not raises else 0.0
    problem = _problem(fn_name, outcome, expected() if callable(expected) else expected, raises, ref_message, device,
                       scale)
    mistake = None
    if problem is not None:
        mistake = _diagnose(problem[0], outcome.value, mistakes() if callable(mistakes) else mistakes, explanations)
    run.record(index, what, device, outcome, problem, mistake)


def _run_properties(run, ex, fn, part):
    for ppart, prop in ex.properties:
        if ppart != part or run.stopped:
            continue
        try:
            message = prop(fn)
        except Exception as exc:  # a property that cannot even run the learner code
            message = f"the property check could not run your function: {type(exc).__name__}: {exc}"
        doc = (prop.__doc__ or prop.__name__.strip("_").replace("_", " ")).strip().splitlines()[0]
        run.record(run.n + 1, f"property: {doc}", "cpu", None, ("property", message) if message else None, None)


# ------------------------------------------------------------------ the public call
def check(name, fn, part="basic"):
    """Check the learner's ``fn`` for exercise ``name`` on one part (basic, edge or hidden).

    Prints one line when every check passes; raises CheckFailed with a message
    that explains the first failure otherwise.
    """
    __tracebackhide__ = True
    if name not in EXERCISES:
        raise ValueError(f"unknown exercise {name!r}; known: {', '.join(EXERCISES)}")
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; use one of {PARTS}")
    ex = EXERCISES[name]
    if not callable(fn):
        raise CheckFailed(f"FAILED {name} [{part}]: expected a function, got {type(fn).__name__}. Run the exercise "
                          f"cell that defines `{name}` first.")
    if os.environ.get("COURSE_SANDBOX") == "1":
        # the kernel nbgrader runs at grading time, in the sandbox: the trusted side (grader.judge) grades every
        # part from outside and replaces this cell's outputs, so nothing here would count; running the student's
        # function here would only cost time (or hang the kernel)
        print(f"{name} [{part}]: graded outside this kernel")
        return
    run = _Run(name, part)
    explanations = dict(ex.mistakes)
    with _safe.forbid_given(_capture_given(name)):
        _check_part(run, ex, fn, name, part, explanations)
    if run.n == 0:  # a part that judges nothing would pass anything
        raise RuntimeError(f"the grader has no checks for {name} [{part}]: fix grader/exercises.py")
    if run.failures:
        run.notes.extend(_failing_dependencies(ex, fn))
    run.finish()


def _check_part(run, ex, fn, name, part, explanations):
    if part in ("basic", "edge"):
        data = load_expected(name)
        for i, rec in enumerate(data["parts"][part], 1):
            _judge_case(run, fn, name, i, rec["what"], rec["args"], rec["kwargs"], rec["raises"], rec["expected"],
                        rec["message"], rec["mistakes"], explanations, "cpu")
    else:
        _check_hidden(run, ex, fn, explanations, part)
    _run_properties(run, ex, fn, part)


def _failing_dependencies(ex, fn):
    """Notes for the exercises ``fn`` calls (``ex.uses``) that fail their own basic checks.

    A block built on a wrong helper fails too; saying which helper is wrong
    points the learner at the cause rather than the symptom.
    """
    notes = []
    for dep in ex.uses:
        dep_fn = _learner_function(fn, dep)
        if not callable(dep_fn):
            continue
        probe = _Run(dep, "basic")
        explanations = dict(EXERCISES[dep].mistakes)
        with _safe.forbid_given(_capture_given(dep)):
            for i, rec in enumerate(load_expected(dep)["parts"]["basic"], 1):
                _judge_case(probe, dep_fn, dep, i, rec["what"], rec["args"], rec["kwargs"], rec["raises"],
                            rec["expected"], rec["message"], rec["mistakes"], explanations, "cpu")
        if probe.failures:
            notes.append(f"your {ex.name} calls your {dep}, which fails its own checks ({len(probe.failures)} of "
                         f"{probe.n} basic cases): fix {dep} first, its test cell says what is wrong")
    return notes


def _learner_function(fn, name):
    """The learner's function ``name``, defined beside ``fn`` (in its module, or in its sandbox), or None."""
    if _safe.REMOTE_TYPES and type(fn) in _safe.REMOTE_TYPES:
        return fn.sibling(name)
    try:
        namespace = fn.__globals__ if type(fn).__name__ == "function" else {}
    except Exception:
        namespace = {}
    found = namespace.get(name) if isinstance(namespace, dict) else None
    return found if callable(found) else None


def _reference_call(ref, args, kwargs):
    """Run the reference: (value, None) or (None, exception)."""
    try:
        return ref(*args, **kwargs), None
    except Exception as exc:
        return None, exc


def _check_hidden(run, ex, fn, explanations, part):
    if _REFERENCE is None:
        raise RuntimeError("hidden checks need the reference solutions, which are only installed on the grading "
                           "machine (pip install the course with its `solutions` package)")
    refs, mistake_fns = _REFERENCE
    ref = refs[ex.name]
    seed = 7919 + sum(map(ord, ex.name)) * 31
    if part == "hidden-basic":
        cases = hidden_cases(ex, seed + 1, big=False, n=ex.n_basic)
    else:
        cases = visible_cases(ex, "edge") + hidden_cases(ex, seed)
    index = 0
    for device in grading_devices():
        for case in cases:
            index += 1
            args, kwargs = _move(case.args, device), _move(case.kwargs, device)

            # the learner's function runs first; the reference only afterwards, so no expected
            # value exists anywhere while learner code runs
            def expected(args=args, kwargs=kwargs):
                value, _ = _reference_call(ref, args, kwargs)
                return value

            def mistakes(args=args, kwargs=kwargs):
                out = {}
                for mname, _ in ex.mistakes:
                    value, err = _reference_call(mistake_fns[mname], args, kwargs)
                    out[mname] = None if err is not None else value
                return out

            message = ""
            if case.raises:
                _, err = _reference_call(ref, args, kwargs)
                message = str(err)
            _judge_case(run, fn, ex.name, index, case.what, args, kwargs, case.raises, expected, message, mistakes,
                        explanations, device)
    if part == "hidden" and ex.tensor_inputs and not run.stopped:
        _meta_probe(run, ex, fn, ref, cases)


def _meta_probe(run, ex, fn, ref, cases):
    """Catch tensors created on the wrong device, even without a GPU.

    Inputs go to PyTorch's "meta" device (shapes without data). A function that
    builds a helper tensor without ``device=`` gets a CPU tensor and mixes
    devices. Functions that need real data (``.item()``, Python ``if`` on values)
    cannot run on meta at all; for them the probe says nothing.
    """
    probed = 0
    for case in cases:
        if case.raises or run.stopped:
            continue
        args, kwargs = _move(case.args, "meta"), _move(case.kwargs, "meta")
        if not any(True for _ in _tensors((args, kwargs))):
            if "device" not in ref.__code__.co_varnames[:ref.__code__.co_argcount]:
                return
            kwargs = dict(kwargs, device="meta")
        ref_value, ref_err = _reference_call(ref, args, kwargs)
        if ref_err is not None:
            continue
        outcome = _safe.call(fn, args, kwargs)
        probed += 1
        problem = None
        if outcome.error is not None:
            text = str(outcome.error)
            if "device" in text and ("meta" in text or "same device" in text):
                problem = ("device", f"it mixes devices: with inputs on device X, a tensor made inside the function "
                                     f"without device=X lands on the CPU. PyTorch said: {text[:200]}")
        elif not outcome.timed_out:
            for t in _tensors(outcome.value):
                if t.device.type != "meta":
                    problem = ("device", f"with inputs on the 'meta' device the output came back on {t.device}: "
                                         f"create new tensors with device=<input>.device (and dtype=...)")
                    break
        if problem is not None:  # one failure is enough to teach the rule
            run.record(run.n + 1, f"device probe on: {case.what}", "meta", outcome, problem, None)
            return
    if probed:
        run.record(run.n + 1, f"device probe on {probed} cases", "meta", None, None, None)
