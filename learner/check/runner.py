"""Running one part of one exercise: the cases, the learner's calls, the reference, the diagnosis.

``run_part(report, ex, fn, part)`` judges ``fn`` on the part's cases: the visible
ones (``basic``, ``edge``, ``errors``) against the shipped expected outputs, the
hidden ones (``hidden-basic``, ``hidden``, ``hidden-errors``) against the live
reference on every grading device, then the properties. Every call of the learner's function goes through
``safe.call`` (time limit, printed text and warnings kept, calls of the
reference noticed); at grading time ``fn`` is a ``grader.remote.RemoteFunction``
and each call runs in the sandbox.
"""
import os
import traceback
from dataclasses import dataclass

from . import safe, given, hidden
from .compare import compare, same
from .devices import GPU_FAULT, gpu_fault, grading_devices, move, tensors
from .cases import EXERCISES, hidden_cases, visible_cases
from .cases.common import GAVE_UP, RANDOM_STATE, Case, NotAnAnswer, digest_of, stub_message
from .messages import Report, timeout_text, where_raised
from .shipped import load_expected

_CHECKS = os.path.dirname(os.path.abspath(__file__))  # the checks' own frames, between the call and the learner's
# the kinds of failure that leave no output or error to hold a known mistake against (``diagnose``, ``compared``)
NO_OUTPUT = ("stub", "timeout", "crash", "reference", "no-raise", "wrong-raise")


def problem(fn_name, outcome, expected, raises, ref_message, device, input_scale=0.0):
    """Return (kind, text) describing what is wrong with one call, or None when it is right."""
    if outcome.called_reference:
        what = outcome.called_reference
        what = f"{what}" if "ready-made" in what else f"the reference solution ({what})"
        return "reference", (f"it called {what}. The checks need your own implementation, so this counts as a "
                             f"failure.")
    if outcome.timed_out:
        return "timeout", timeout_text(outcome) + ". The remaining cases of this check were skipped."
    err = outcome.error
    if gpu_fault(err):
        return "crash", (GPU_FAULT.format(what=gpu_fault(err)) + ". The remaining cases of this check were skipped "
                         "(in a notebook, restart the kernel: the GPU stays unusable in it).")
    if type(err).__name__ == "SandboxFault":
        return "crash", f"{err}. The remaining cases of this check were skipped."
    if type(err).__name__ == "NotPlain":
        return "type", f"{err}."
    if isinstance(err, NotImplementedError) and not str(err):  # the stub; torch's own have a message
        frames = traceback.extract_tb(err.__traceback__) if err.__traceback__ else []
        mine = [f for f in frames if not f.filename.startswith(_CHECKS) and "site-packages" not in f.filename]
        inner = mine[-1].name if len(mine) >= 2 else fn_name  # raised in a function the learner's function called
        if inner != fn_name and inner.isidentifier():
            return "error", (f"it called `{inner}`, which still raises NotImplementedError: write `{inner}` "
                             f"first{where_raised(err)}.")
        return "stub", stub_message(fn_name)
    if raises:
        if err is None:
            return "no-raise", (f"this input is invalid, so it should raise {raises} (the reference says: "
                                f"\"{ref_message}\"), but it returned a {type(outcome.value).__name__}.")
        if type(err).__name__ != raises and raises not in [c.__name__ for c in type(err).__mro__]:
            return "wrong-raise", (f"this input is invalid and should raise {raises}, but it raised "
                                   f"{type(err).__name__}: {err}{where_raised(err)}.")
        return None
    if err is not None:
        return "error", f"it raised {type(err).__name__}: {str(err)[:300]}{where_raised(err)}."
    mismatch = compare(expected, outcome.value, "output", input_scale=input_scale)
    if mismatch is None:
        return None
    return mismatch.kind, mismatch.text


RAISED = "__raised__"  # a known mistake's output on a case where it raises: {RAISED: "TypeName: message"}


def raised(exc):
    """What a known mistake that raised ``exc`` gives, to be told apart from any output (``is_raised``)."""
    return {RAISED: f"{type(exc).__name__}: {str(exc)[:300]}"}


def is_raised(out):
    return isinstance(out, dict) and list(out) == [RAISED]


def diagnose(kind, got, mistake_outputs, explanations, error=None):
    """The known mistakes whose output the learner's output equals, as their explanations in the order they are
    registered (several mistakes can give the same output on one case: the report then names the one that most
    failing cases share, ``Report.finish``).

    An output with NaN equals a mistake's with NaN at the same places and the same values elsewhere; when no
    mistake gives exactly that, the mistake named is the first one with NaN at exactly the same places (overflow,
    a 0/0 row), never one with NaN elsewhere (a learner's NaN of a row with no allowed key is no overflow). A
    function that raised is named by the mistakes that raise the same error, with the same message,
    on this case (a mask without its head axis meets PyTorch's own size check).
    """
    if kind == "error" and error is not None:
        said = raised(error)[RAISED]
        found = [explanations[m] for m, out in mistake_outputs.items() if m in explanations and is_raised(out)
                 and out[RAISED] == said]
        return tuple(dict.fromkeys(found))
    if kind == "error" or kind in NO_OUTPUT:
        return ()
    found, same_nan = [], None
    got_nan = _nan_places(got) if kind == "nan" else None
    for mname, mout in mistake_outputs.items():
        if mout is None or is_raised(mout) or mname not in explanations or explanations[mname] in found:
            continue
        if same(mout, got):
            found.append(explanations[mname])
        elif kind == "nan" and same_nan is None:
            places = _nan_places(mout)
            if places is not None and any(any(p) for p in places) and places == got_nan:  # NaN exactly there
                same_nan = explanations[mname]
    if found:
        return tuple(found)
    return (same_nan,) if same_nan else ()


def compared(kind, mistake_outputs, explanations, error=None):
    """The explanations of the known mistakes that ``diagnose`` held against the learner's output (or error) on a
    failing case, each of which had an output or an error there: one of them that ``diagnose`` did not give back
    does something else than the learner's function here (another output, an error where the function returned,
    another error), so the function is not that mistake (``Report`` names none such). A slip the mistake makes in
    one place of several is a known mistake of its own with the same explanation (``project_q_no_transpose``)."""
    if kind in NO_OUTPUT or (kind == "error" and error is None):
        return ()
    return tuple(dict.fromkeys(explanations[m] for m, out in (mistake_outputs or {}).items()
                               if m in explanations and out is not None))


def _nan_places(value):
    """Where each floating tensor of ``value`` holds NaN, as lists of bools (None when one cannot be read)."""
    try:
        return [[v != v for v in _flat(t)] for t in tensors(value) if t.is_floating_point()
                and t.device.type != "meta"]
    except Exception:
        return None


def _flat(t):
    values = safe.tolist(safe.to(safe.detach(t), "cpu"))
    stack, out = [values], []
    while stack:
        v = stack.pop()
        if isinstance(v, list):
            stack.extend(v)
        else:
            out.append(v)
    return out



@dataclass
class Expected:
    """What the reference says about one case: its output (or a function that computes it once the learner's
    call is over), its error message when the case must raise, and the known mistakes' outputs (or a function)."""
    value: object = None
    message: str = ""
    mistakes: object = None


def judge_case(run, ex, fn, index, case, expected, device):
    """Call ``fn`` on ``case`` (a Case), compare with ``expected`` and record the verdict in ``run``. The function
    gets copies of the case's tensors (the reference and the known mistakes see the case as it was made), and a
    copy it changed in place is named before anything else."""
    if run.stopped:
        return
    args, kwargs = copies(case.args), copies(case.kwargs)
    outcome = safe.call(fn, args, kwargs)
    changed = changed_inputs(fn, (case.args, case.kwargs), (args, kwargs)) if outcome.error is None else []
    if changed and ex.answer is None and not case.raises:
        return run.record(index, case.what, device, outcome, ("mutated", mutated_message(changed)), None)
    if ex.own_random and outcome.rng_changed and not case.raises and outcome.error is None and not outcome.timed_out:
        return run.record(index, case.what, device, outcome, ("random-state", RANDOM_STATE), None)
    if ex.answer is not None:
        return judge_answer(run, ex, index, case, outcome, expected, device)
    if gpu_fault(outcome.error):  # nothing more on this process's GPU: no reference, no comparison
        return run.record(index, case.what, device, outcome, problem(ex.name, outcome, None, None, "", device), None)
    scale = ex.conditioning(case.args, case.kwargs) if ex.conditioning and not case.raises else 0.0
    value = expected.value() if callable(expected.value) else expected.value
    wrong = problem(ex.name, outcome, value, case.raises, expected.message, device, scale)
    mistake, judged = None, ()
    if wrong is not None and not case.raises:  # a case that must raise names no mistake: the known mistakes are
        # not run on its bad input (where they could only fail, or warn on the grading side's stderr)
        mistakes = expected.mistakes() if callable(expected.mistakes) else expected.mistakes
        mistake = diagnose(wrong[0], outcome.value, mistakes, dict(ex.mistakes), outcome.error)
        judged = compared(wrong[0], mistakes, dict(ex.mistakes), outcome.error)
    run.record(index, case.what, device, outcome, wrong, mistake, judged)
    if wrong is None and not case.raises and ex.mistakes:
        run.passed(ruled_out_by(ex, value, expected.mistakes, scale))


def ruled_out_by(ex, value, mistakes, scale):
    """For a case the learner's function got right (``value``, the reference's output): a function that takes a set
    of known mistakes' explanations and gives back those whose mistakes all give another output here (or raise),
    so that the learner's function is none of them. ``mistakes``: their outputs, or a function that computes the
    ones it is asked for (``only``)."""
    def ruled(wanted):
        names = [m for m, why in ex.mistakes if why in wanted]
        if not names:
            return set()
        outs = (mistakes(only=set(names)) if callable(mistakes) else mistakes) or {}
        differs = {}
        for m, why in ex.mistakes:
            if m in names:
                try:
                    other = m in outs and outs[m] is not None and \
                        compare(value, outs[m], check_device=False, input_scale=scale) is not None
                except Exception:
                    other = False
                differs[why] = differs.get(why, True) and other
        return {why for why, other in differs.items() if other}
    return ruled


def copies(value):
    """``value`` (a case's arguments) with every tensor in it copied (through tuples, lists and dicts); anything else
    as it is."""
    if safe.is_tensor(value):
        copy = safe.clone(safe.detach(value))
        return copy.requires_grad_(value.requires_grad) if value.is_leaf else copy
    if isinstance(value, (tuple, list)):
        return type(value)(copies(v) for v in value)
    if isinstance(value, dict):
        return {k: copies(v) for k, v in value.items()}
    return value


def changed_inputs(fn, made, given):
    """The names of the arguments whose tensors the call changed in place: ``given`` (the copies the function got)
    against ``made`` (the case), each an (args, kwargs) pair."""
    try:
        import inspect
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        names = []
    found = []

    def walk(before, after, label):
        if safe.is_tensor(before):
            if not (safe.is_tensor(after) and same_bits(before, after)):
                found.append(label)
        elif isinstance(before, (tuple, list)):  # a list padded or emptied in place is changed too
            if not (isinstance(after, (tuple, list)) and len(before) == len(after)):
                found.append(label)
                return
            for i, (b, a) in enumerate(zip(before, after)):
                walk(b, a, f"{label}[{i}]")
        elif isinstance(before, dict):
            if not (isinstance(after, dict) and set(before) == set(after)):
                found.append(label)
                return
            for k in before:
                walk(before[k], after[k], f"{label}[{k!r}]")
        elif type(before) in (int, float, str, bool) and before == before and not (  # a number in a list, say
                type(after) is type(before) and after == before):
            found.append(label)
    (args, kwargs), (got_args, got_kwargs) = made, given
    for i, (b, a) in enumerate(zip(args, got_args)):
        walk(b, a, names[i] if i < len(names) else f"argument {i + 1}")
    for k in kwargs:
        walk(kwargs[k], got_kwargs.get(k), k)
    return found


def same_bits(a, b):
    """Whether two tensors hold the same shape, dtype and bits (NaN equal to itself)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.numel() == 0 or a.device.type == "meta":
        return True
    a, b = safe.detach(a), safe.detach(b)
    if a.is_floating_point() or a.is_complex():
        return safe.equal(a != a, b != b) and safe.equal(safe.where(a != a, 0, a), safe.where(b != b, 0, b))
    return safe.equal(a, b)


def mutated_message(names):
    shown = ", ".join(f"`{n}`" for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"it changed its input {shown} in place: a caller's tensor, list or dict is not the function's to change "
            f"(the next line of their code reads it as it was). Work on a new one: the out-of-place form "
            f"(`masked_fill`, not `masked_fill_`; `x = x / s`, not `x /= s`; no `copy_`, `div_`, `logical_not_` or "
            f"`[...] =` on an input; `seq + [pad_id] * n`, not `seq.extend(...)` or `append`), or a copy first "
            f"(`x = x.clone()`, `seq = list(seq)`, `dict(params)`).")


def judge_answer(run, ex, index, case, outcome, expected, device):
    """A self-check question: the learner's answer, written canonically and hashed, against the digest of the
    right one (``expected``); a wrong answer that a known mistake gives is named with its explanation."""
    wrong, mistake = None, None
    if outcome.called_reference or outcome.timed_out or outcome.error is not None:
        wrong = problem(ex.name, outcome, None, None, "", device)  # the stub, an error, a time-out: in words
    else:
        try:
            got = digest_of(ex, outcome.value)
        except NotAnAnswer as exc:
            wrong = ("type", f"{exc}.")
        else:
            if got != (expected.value() if callable(expected.value) else expected.value):
                mistakes = expected.mistakes() if callable(expected.mistakes) else expected.mistakes
                mistake = next((why for m, why in ex.mistakes if (mistakes or {}).get(m) == got), None)
                wrong = ("answer", f"{outcome.value!r} is not the right answer" +
                         ("" if mistake else "; read the question and its section again, then try another."))
    run.record(index, case.what, device, outcome, wrong, mistake)


def judge_shipped(run, ex, fn, part):
    """The cases of a visible part against their shipped expected outputs."""
    for i, rec in enumerate(load_expected(ex.name)["parts"][part], 1):
        case = Case(rec["what"], rec["args"], rec["kwargs"], rec["raises"])
        judge_case(run, ex, fn, i, case, Expected(rec["expected"], rec["message"], rec["mistakes"]), "cpu")


def run_properties(run, ex, fn, part):
    for ppart, prop in ex.properties:
        if ppart != part or run.stopped:
            continue
        gave_up = GAVE_UP[0]
        try:
            message = prop(fn)
        except Exception as exc:  # a property that cannot even run the learner code
            message = f"the property check could not run your function: {type(exc).__name__}: {exc}"
        if message is None and GAVE_UP[0] > gave_up:  # it checked nothing: no credit for it
            message = ("not checked: your function gave no usable result on this check's input (the failures above "
                       "say why), so nothing could be checked")
        doc = (prop.__doc__ or prop.__name__.strip("_").replace("_", " ")).strip().splitlines()[0]
        run.record(run.n + 1, f"property: {doc}", "cpu", None, ("property", message) if message else None, None)



def run_part(run, ex, fn, part, seed=0):
    if part in ("basic", "edge", "errors"):
        judge_shipped(run, ex, fn, part)
    else:
        run_hidden(run, ex, fn, part, seed)
    run_properties(run, ex, fn, part)



def failing_dependencies(ex, fn):
    """Notes for the exercises ``fn`` calls (``ex.uses``) that fail their own basic checks.

    A block built on a wrong helper fails too; saying which helper is wrong
    points the learner at the cause rather than the symptom.
    """
    notes = []
    for dep in ex.uses:
        dep_fn = learner_function(fn, dep)
        if not callable(dep_fn):
            continue
        probe = Report(dep, "basic")
        with safe.forbid_given(given.capture_given(dep)):
            judge_shipped(probe, EXERCISES[dep], dep_fn, "basic")
        if probe.failures:
            notes.append(f"your {ex.name} calls your {dep}, which fails its own checks ({len(probe.failures)} of "
                         f"{probe.n} basic cases): fix {dep} first, its test cell says what is wrong")
    return notes


def learner_function(fn, name):
    """The learner's function ``name``, defined beside ``fn`` (in its module, or in its sandbox), or None."""
    if safe.REMOTE_TYPES and type(fn) in safe.REMOTE_TYPES:
        return fn.sibling(name)
    try:
        namespace = fn.__globals__ if type(fn).__name__ == "function" else {}
    except Exception:
        namespace = {}
    found = namespace.get(name) if isinstance(namespace, dict) else None
    return found if callable(found) else None


def reference_call(ref, args, kwargs):
    """Run the reference: (value, None) or (None, exception)."""
    try:
        return ref(*args, **kwargs), None
    except Exception as exc:
        return None, exc


def run_hidden(run, ex, fn, part, seed=0):
    if hidden.REFERENCE is None:
        raise RuntimeError("hidden checks need the reference solutions, which are only installed on the grading "
                           "machine (pip install the course with its `solutions` package)")
    refs, mistake_fns = hidden.REFERENCE
    ref = refs[ex.name]
    seed = 7919 + sum(map(ord, ex.name)) * 31 + seed * 1_000_003  # seed 0: the cases of a learner's own run
    if part == "hidden-basic":
        cases = hidden_cases(ex, seed + 1, big=False, n=ex.n_basic)
    elif part == "hidden-errors":
        cases = visible_cases(ex, "errors")  # live, on every grading device
    else:
        cases = visible_cases(ex, "edge") + hidden_cases(ex, seed)
    index = 0
    for device in (["cpu"] if ex.answer is not None else grading_devices()):  # a question has no tensors
        if device != "cpu" and run.failures:
            # a function wrong on the CPU is not run on the GPU: there its failures would only repeat, and an
            # index out of range stops the process's GPU for good instead of raising (devices.gpu_fault)
            break
        for case in cases:
            if run.stopped:
                break
            index += 1
            try:
                args, kwargs = move(case.args, device), move(case.kwargs, device)
            except Exception as exc:  # an earlier CUDA error in this process (a learner's own kernel)
                if not gpu_fault(exc):
                    raise
                run.record(index, case.what, device, None, ("crash", (
                    f"this process cannot use the GPU since an earlier CUDA error ({gpu_fault(exc)}). Restart the "
                    f"kernel to check on the GPU again; the remaining cases were skipped.")), None)
                break

            # the learner's function runs first; the reference only afterwards, so no expected
            # value exists anywhere while learner code runs
            def expected(args=args, kwargs=kwargs):
                value, _ = reference_call(ref, args, kwargs)
                return digest_of(ex, value)

            def mistakes(args=args, kwargs=kwargs, device=device, only=None):
                # on CPU copies: a known mistake may index past a table, which on a GPU would stop this (trusted)
                # process's GPU for good; ``same`` compares across devices
                if device != "cpu":
                    args, kwargs = move(args, "cpu"), move(kwargs, "cpu")
                out = {}
                for mname, _ in ex.mistakes:
                    if only is not None and mname not in only:
                        continue
                    value, err = reference_call(mistake_fns[mname], args, kwargs)
                    out[mname] = raised(err) if err is not None else digest_of(ex, value)
                return out

            message = ""
            if case.raises:
                _, err = reference_call(ref, args, kwargs)
                message = str(err)
            judge_case(run, ex, fn, index, Case(case.what, args, kwargs, case.raises),
                       Expected(expected, message, mistakes), device)
    if part == "hidden" and ex.tensor_inputs and not run.stopped:
        meta_probe(run, ex, fn, ref, cases)


def meta_probe(run, ex, fn, ref, cases):
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
        args, kwargs = move(case.args, "meta"), move(case.kwargs, "meta")
        if not any(True for _ in tensors((args, kwargs))):
            if "device" not in ref.__code__.co_varnames[:ref.__code__.co_argcount]:
                return
            kwargs = dict(kwargs, device="meta")
        ref_value, ref_err = reference_call(ref, args, kwargs)
        if ref_err is not None:
            continue
        outcome = safe.call(fn, args, kwargs)
        wrong = None
        if outcome.error is not None:
            text = str(outcome.error)
            if not ("device" in text and ("meta" in text or "same device" in text)):
                continue  # it raised for another reason (it needs real data, or it is a stub): nothing probed
            wrong = ("device", f"it mixes devices: with inputs on device X, a tensor made inside the function "
                               f"without device=X lands on the CPU. PyTorch said: {text[:200]}")
        elif outcome.timed_out:
            continue
        else:
            for t in tensors(outcome.value):
                if t.device.type != "meta":
                    wrong = ("device", f"with inputs on the 'meta' device the output came back on {t.device}: "
                                       f"create new tensors with device=<input>.device (and dtype=...)")
                    break
        probed += 1
        if wrong is not None:  # one failure is enough to teach the rule
            run.record(run.n + 1, f"device probe on: {case.what}", "meta", outcome, wrong, None)
            return
    if probed:
        run.record(run.n + 1, f"device probe on {probed} cases", "meta", None, None, None)
