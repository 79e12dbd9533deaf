"""What a class grading run found: the scores, the problems with the submissions, the faults; and its printout."""
import os
import sys
from dataclasses import dataclass, field

from grader.graded import LOG_NAME
from grader.seeds import FILE as SEEDS_FILE
from grader.plain import inert

from ..words import counted


@dataclass
class Problem:
    """A submission (or a file of one) reported by name in the summary."""
    student: str
    assignment: str
    reason: str
    graded: bool = False


@dataclass
class Summary:
    graded: dict = field(default_factory=dict)      # {(student, assignment): total score}
    graded_by: dict = field(default_factory=dict)   # {(student, assignment): (host, pid) of the worker}
    seeds: dict = field(default_factory=dict)       # {(student, assignment): the seed of the hidden cases}
    problems: list = field(default_factory=list)    # [Problem]
    faults: list = field(default_factory=list)      # [(student, assignment, kind, text)]
    again: list = field(default_factory=list)       # [(student, assignment)] stopped by the time limit once
    seconds: float = 0.0
    workers: int = 0
    isolated: bool = True
    separations: set = field(default_factory=set)   # what kept the sandboxes apart, in words (each worker's)
    bounds: set = field(default_factory=set)        # what bounded each worker's nbgrader process, in words
    by_service: bool = False                        # graded by the hub's grading service (as root)

    @property
    def ok(self):
        return not any(not p.graded for p in self.problems)


def print_summary(summary, course_root, out=None):
    # one record a line, inert: names, reasons and faults come from submissions (``grader.plain.inert``)
    p = lambda line: print(inert(line), file=out or sys.stdout)  # noqa: E731
    p(f"graded {counted(len(summary.graded), 'submission')} in {summary.seconds:.1f} s on "
      f"{counted(summary.workers, 'worker')}"
      f"{' of the hub' + chr(39) + 's grading service (as root)' if summary.by_service else ''}; "
      f"isolation: {'bubblewrap sandbox' if summary.isolated else 'NONE (--no-isolation)'}")
    for words in sorted(summary.separations):
        p(f"  each sandbox: {words}")
    for words in sorted(summary.bounds):
        p(f"  the grading side: each worker's nbgrader process in {words}")
    p(f"  {'student':<24} {'assignment':<22} {'score':>13}  hidden-case seed")
    totals = _max_scores(course_root, {a for _, a in summary.graded})
    for (student, a), score in sorted(summary.graded.items()):
        shown = f"{score:g} / {totals[a]:g}" if totals.get(a) is not None else f"{score:g}"
        p(f"  {student:<24} {a:<22} {shown:>13}  {summary.seeds.get((student, a), '')}")
    if summary.problems:
        p(f"{counted(len(summary.problems), 'problem')} with the submissions:")
        for pr in summary.problems:
            p(f"  {pr.student} / {pr.assignment}: {pr.reason}")
    if summary.again:
        p(f"{counted(len(summary.again), 'submission')} ran past the time limit once and were graded again after the others, "
          f"with twice the limit (a busy machine, or a limit too tight: see --timeout):")
        named = [f"{student} / {a}" for student, a in summary.again]
        p("  " + ", ".join(named[:20]) + (f", and {len(named) - 20} more" if len(named) > 20 else ""))
    if summary.faults:
        p(f"{counted(len(summary.faults), 'fault')} flagged for a human (details in "
          f"{os.path.join(course_root, LOG_NAME)}):")
        for student, a, kind, text in summary.faults:
            p(f"  {student} / {a}: {kind}: {str(text)[:200]}")
    elif summary.graded:
        p("no graded submission was flagged (no dead kernel, time-out, or blocked attempt)")
    p(f"hidden-case seeds: {os.path.join(course_root, SEEDS_FILE)}")


def _max_scores(course_root, assignments):
    """{assignment: its total points} from the course's gradebook (None where it does not know the assignment)."""
    from nbgrader.api import MissingEntry

    from ..pipeline import gradebook
    out = {}
    if not os.path.exists(os.path.join(course_root, "gradebook.db")):
        return out
    with gradebook(course_root) as gb:
        for a in assignments:
            try:
                out[a] = gb.find_assignment(a).max_score
            except MissingEntry:
                out[a] = None
    return out
