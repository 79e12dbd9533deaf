"""The verdict of one part: what failed, in words, and the one message a learner reads."""
from dataclasses import dataclass

STOPPING = ("timeout", "crash")  # after one of these, the remaining cases of the part are skipped


class CheckFailed(AssertionError):
    """A learner's function did not pass a check; the message says why."""

    def _render_traceback_(self):
        """What IPython shows for a failed check: its message alone, not a traceback through the checks.
        (The cell still ends in an error, which is what nbgrader reads.)"""
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {self}"]


@dataclass(frozen=True)
class Failure:
    """One failed case: its number and description, the device, the kind of problem (type, shape, dtype,
    device, nan, value, error, stub, timeout, crash, reference, no-raise, wrong-raise, property), the text
    that explains it, and the known mistake it matches (or None)."""
    index: int
    what: str
    device: str
    kind: str
    text: str
    mistake: str | None = None
    candidates: tuple = ()  # every known mistake whose output this case's equals (``mistake`` is the first)


class Report:
    """Collects the cases of one part of one exercise, then passes (one printed line) or raises CheckFailed."""

    def __init__(self, name, part, question=False):
        self.name, self.part, self.question = name, part, question
        self.n = 0
        self.failures = []
        self.notes = []
        self.printed = False
        self.warned = []
        self.stopped = False

    def record(self, index, what, device, outcome, problem, mistake):
        """One case judged: ``problem`` is None (right) or (kind, text); ``outcome`` the call's, if any;
        ``mistake`` the explanation of the known mistake it matches, or a tuple of them, or None."""
        self.n += 1
        candidates = tuple(mistake) if isinstance(mistake, (tuple, list)) else (mistake,) if mistake else ()
        mistake = candidates[0] if candidates else None
        if outcome is not None:
            self.printed = self.printed or bool(outcome.printed)
            self.warned.extend(outcome.warnings)
        if problem is not None:
            self.failures.append(Failure(index, what, device, problem[0], problem[1], mistake, candidates))
            if problem[0] in STOPPING:
                self.stopped = True

    def _most_shared_mistake(self):
        """The known mistake that the most failing cases match (on a tie, the one registered first): a case may
        match several (with one key, a finite fill and a multiplied mask give the same output), the others tell
        them apart."""
        counts = {}
        for f in self.failures:
            for i, why in enumerate(f.candidates):
                n, order = counts.get(why, (0, (f.index, i)))
                counts[why] = (n + 1, order)
        if not counts:
            return None
        return min(counts, key=lambda why: (-counts[why][0], counts[why][1]))

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
        kinds = sorted({f.kind for f in self.failures[1:]} - {first.kind})
        if kinds:
            lines.append(f"  Other failing cases show: {', '.join(kinds)}.")
        prop = next((f for f in self.failures[1:] if f.kind == "property"), None)
        if prop is not None and first.kind != "property":  # a property's words say the rule that was broken
            lines.append(f"  Case {prop.index} ({prop.what.rstrip('.')}) failed: {prop.text}.")
        for note in self.notes:
            lines.append(f"  Note: {note}.")
        if extra:
            lines.append(extra.strip())
        raise CheckFailed("\n".join(lines))
