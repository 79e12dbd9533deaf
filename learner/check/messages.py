"""The verdict of one part: what failed, in words, and the one message a learner reads."""
import os
import traceback
from dataclasses import dataclass

from . import safe

_HERE = os.path.dirname(os.path.abspath(__file__))

STOPPING = ("timeout", "crash")  # after one of these, the remaining cases of the part are skipped
# the kinds of failure whose name alone does not say what happened: "Other failing cases show" says it with the case
TOLD = {"error": "an error", "wrong-raise": "another error than asked for", "timeout": "a time-out", "crash": "a crash",
        "random-state": "a changed random state"}


def where_raised(exc):
    """Where the learner's code raised ``exc``: " (line N of your cell: `code`)", or "" when none of its frames
    was running."""
    where = getattr(exc, "course_where", None)  # raised in the sandbox: where it was raised came with it
    if isinstance(where, str):
        return where
    mine = _learners_frames(exc)
    if not mine:
        return ""
    f = mine[-1]
    place = "your cell" if f.filename.startswith("<") or "ipykernel" in f.filename else os.path.basename(f.filename)
    code = (f.line or "").strip()
    return f" (line {f.lineno} of {place}" + (f": `{code}`)" if code else ")")


def _learners_frames(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    return [f for f in frames if not f.filename.startswith(_HERE) and "site-packages" not in f.filename]


def stopped_in(exc):
    """Where a call was stopped at its time limit (``exc``, the TimeLimit raised there): " in `fn` (line N of your
    cell: `code`)", or "" when no frame of the learner's was running (it waited inside PyTorch, say)."""
    if exc is None:
        return ""
    where = getattr(exc, "course_where", None)  # stopped in the sandbox: the words came with it
    if isinstance(where, str):
        return where
    mine = _learners_frames(exc)
    return f" in `{mine[-1].name}`{where_raised(exc)}" if mine else ""


def timeout_text(outcome, time_limit=None):
    """What a call stopped at its time limit (``outcome``, a ``safe.Outcome``) did, in its own measurements: it
    waited on the clock (a sleep, an input, a lock), or computed past the limit (a loop that never ends; one
    PyTorch operation is stopped only once it returns); where it was stopped; the time it took."""
    limit = safe.DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    where = stopped_in(outcome.stop)
    if outcome.waited:
        return (f"it did not finish within {outcome.wall_s:.0f} s on the clock and was stopped{where}: it was "
                f"waiting, not computing ({outcome.cpu_s:.1f} s of CPU time in all), so look for a call that waits "
                f"(time.sleep, input(), a lock)")
    spent = ([f"{outcome.cpu_s:.0f} s of computing"] if outcome.cpu_s > limit + 1 else []) + \
        ([f"{outcome.wall_s:.0f} s on the clock"] if outcome.wall_s > max(outcome.cpu_s, limit) + 1 else [])
    spent = f" after {' and '.join(spent)}" if spent else ""
    return (f"it did not finish within {limit:g} s of computing and was stopped{where}{spent}: look for a loop "
            f"that never ends, or a tensor far larger than the task needs")


class CheckFailed(AssertionError):
    """A learner's function did not pass a check; the message says why."""

    def _render_traceback_(self):
        """What IPython shows for a failed check: its message alone, not a traceback through the checks.
        (The cell still ends in an error, which is what nbgrader reads.)"""
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {self}"]


@dataclass(frozen=True)
class Failure:
    """One failed case: its number and description, the device, the kind of problem (type, shape, dtype,
    device, nan, value, error, stub, timeout, crash, reference, no-raise, wrong-raise, mutated, random-state,
    property), the text that explains it, and the known mistake it matches (or None)."""
    index: int
    what: str
    device: str
    kind: str
    text: str
    mistake: str | None = None
    candidates: tuple = ()  # every known mistake whose output this case's equals (``mistake`` is the first)
    judged: tuple = ()  # every known mistake held against this case's output: those not in candidates differ


class Report:
    """Collects the cases of one part of one exercise, then passes (one printed line) or raises CheckFailed."""

    def __init__(self, name, part, question=False, matches_to_name=1):
        self.name, self.part, self.question = name, part, question
        self.matches_to_name = matches_to_name  # the failing cases a known mistake must match to be named
        self.n = 0
        self.failures = []
        self.notes = []
        self.printed = False
        self.warned = []
        self.stopped = False
        self._passed = []  # for each case passed: which known mistakes it rules out (``passed``)

    def record(self, index, what, device, outcome, problem, mistake, judged=()):
        """One case judged: ``problem`` is None (right) or (kind, text); ``outcome`` the call's, if any;
        ``mistake`` the explanation of the known mistake it matches, or a tuple of them, or None; ``judged`` the
        explanations of the known mistakes held against the output (``runner.compared``)."""
        self.n += 1
        candidates = tuple(mistake) if isinstance(mistake, (tuple, list)) else (mistake,) if mistake else ()
        mistake = candidates[0] if candidates else None
        if outcome is not None:
            self.printed = self.printed or bool(outcome.printed)
            self.warned.extend(outcome.warnings)
        if problem is not None:
            self.failures.append(Failure(index, what, device, problem[0], problem[1], mistake, candidates,
                                         tuple(judged)))
            if problem[0] in STOPPING:
                self.stopped = True

    def passed(self, ruled_out):
        """A case the function got right: ``ruled_out(explanations)`` gives those of the known mistakes that give
        another output on it (the function has none of them), computed only if a failure needs it."""
        self._passed.append(ruled_out)

    def _most_shared_mistake(self):
        """The known mistake that the most failing cases match (on a tie, the one registered first), among those
        that every failing case agrees with (``Failure.judged``), that no passed case rules out, and that match at
        least ``matches_to_name`` cases: a case may match several (with one key, a finite fill and a multiplied mask
        give the same output; two mistakes may raise the same error), the other cases tell them apart."""
        # a known mistake that gives another output than the learner's on any failing case is not theirs, however
        # many cases it matches: where the cases' sizes coincide (32 layers and 32 heads), another slip gives the
        # same output on one case and a different one on the next
        refuted = {why for f in self.failures for why in f.judged if why not in f.candidates}
        counts = {}
        for f in self.failures:
            for i, why in enumerate(f.candidates):
                if why in refuted:
                    continue
                n, order = counts.get(why, (0, (f.index, i)))
                counts[why] = (n + 1, order)
        if counts:
            ruled = set()
            for ruled_out in self._passed:
                ruled |= ruled_out(set(counts) - ruled)
                if not set(counts) - ruled:
                    break
            # a passed case where the mistake would have failed rules it out, the first failure's own match too: a
            # mistake made in some cases only (averaged when a mask is given) is a known mistake of its own
            counts = {why: c for why, c in counts.items() if why not in ruled}
        counts = {why: c for why, c in counts.items() if c[0] >= self.matches_to_name}
        if not counts:
            return None
        return min(counts, key=lambda why: (-counts[why][0], counts[why][1]))

    def _other_failures(self, first):
        """The kinds of failure the later cases show, other than the first case's, in words: a kind's name where it
        says enough (value, shape, dtype, ...); where it does not (an error, a time-out, a crash, the wrong error),
        the first later case of that kind that says something else than the first case, with what it says."""
        out = []
        for kind in sorted({f.kind for f in self.failures[1:]}):
            if kind in TOLD:
                f = next((f for f in self.failures[1:] if f.kind == kind and f.text != first.text), None)
                if f is not None:
                    out.append(f"{TOLD[kind]} (case {f.index}: {f.text.rstrip('.')})")
            elif kind != first.kind:
                out.append(kind)
        return out

    def finish(self):
        label = f"{self.name} [{self.part}]"
        extras = []
        if self.printed:
            extras.append("your function printed text; it was kept off the notebook during grading")
        if self.warned:
            extras.append(f"it raised a warning ({self.warned[0]}); warnings do not cost points")
        extra = (" Note: " + "; ".join(extras) + ".") if extras else ""
        if not self.failures:
            print(f"PASSED {label}: " + ("right." if self.question else
                                         f"{self.n} check{'s' if self.n != 1 else ''} passed.{extra}"))
            return
        first = self.failures[0]
        if self.question:  # one answer, one line: what is wrong with it, and the misunderstanding it shows
            raise CheckFailed(f"FAILED {label}: {first.text}" + (f": {first.mistake}." if first.mistake else "") +
                              (" Note: " + "; ".join(self.notes) + "." if self.notes else ""))
        lines = [f"FAILED {label}: {len(self.failures)} of {self.n} checks failed.",
                 f"First failure, case {first.index}: {first.what} (device {first.device}):",
                 f"  {first.text}"]
        named = self._most_shared_mistake()
        if named and named in first.candidates:
            lines.append(f"  This looks like a known mistake: {named}.")
        elif named:
            later = next(f for f in self.failures if named in f.candidates)
            lines.append(f"  Case {later.index} ({later.what}) matches a known mistake: {named}.")
        others = self._other_failures(first)
        if others:
            lines.append(f"  Other failing cases show: {'; '.join(others)}.")
        prop = next((f for f in self.failures[1:] if f.kind == "property"), None)
        if prop is not None and first.kind != "property":  # a property's words say the rule that was broken
            lines.append(f"  Case {prop.index} ({prop.what.rstrip('.')}) failed: {prop.text}.")
        for note in self.notes:
            lines.append(f"  Note: {note}.")
        if extra:
            lines.append(extra.strip())
        raise CheckFailed("\n".join(lines))
