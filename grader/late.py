"""Due dates and late work: the course's late policy, declared once, applied by nbgrader's own late penalty.

The policy is a small file beside the gradebook, ``late_policy.toml`` in the course folder (none: late work gets
full marks, nbgrader's default)::

    kind = "per_day"          # "none", "per_hour", "per_day" or "close"
    percent = 10              # per_hour / per_day: the share of the notebook's points taken for each hour or day begun
    cap = 50                  # per_hour / per_day: at most this share in all
    close_after_hours = 168   # per_hour / per_day (optional), close (required): no marks for work this long past due

Lateness is nbgrader's own: a student's due date is the assignment's plus their extension
(``Gradebook.grant_extension``, ``SubmittedAssignment.duedate``), and ``total_seconds_late`` counts from it. The
penalty is written by nbgrader's ``AssignLatePenalties`` with ``CourseLatePolicy`` as its plugin (the course's
``nbgrader_config.py`` names it); nbgrader keeps a penalty between 0 and the notebook's score. ``LatenessNote`` puts
the same facts on the feedback page, ``describe`` says the policy in words (beside each release, in the feedback).
"""
import datetime
import math
import os
import tomllib
from dataclasses import dataclass

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

POLICY_FILE = "late_policy.toml"
KINDS = ("none", "per_hour", "per_day", "close")
UNIT_SECONDS = {"per_hour": 3600, "per_day": 86400}
KEYS = {"kind", "percent", "cap", "close_after_hours"}


class PolicyError(ValueError):
    """A late policy that does not parse; its message is a sentence that names the file and what is wrong."""


@dataclass(frozen=True)
class LatePolicy:
    kind: str = "none"
    percent: float = 0.0            # per hour or day begun, of the notebook's points
    cap: float = 100.0              # at most, of the notebook's points
    close_after_hours: float = None  # no marks past the student's due date by more than this

    def penalty(self, score, max_score, seconds_late):
        """The points taken from a notebook that scored ``score`` of ``max_score``, ``seconds_late`` past the
        student's due date (extension included); None when nothing is taken."""
        if seconds_late <= 0 or self.kind == "none":
            return None
        if self.closed(seconds_late):
            return score
        if self.kind == "close":
            return None
        units = math.ceil(seconds_late / UNIT_SECONDS[self.kind])
        share = min(self.cap, self.percent * units) / 100.0
        return min(score, round(share * max_score, 6))

    def closed(self, seconds_late):
        """True for work handed in past the hard close (``close_after_hours`` past the student's due date)."""
        return self.close_after_hours is not None and (seconds_late or 0) > self.close_after_hours * 3600

    def describe(self):
        """The policy in one sentence, as students read it."""
        close = ("" if self.close_after_hours is None else
                 f"work handed in more than {hours_text(self.close_after_hours)} after your due date gets no marks")
        if self.kind == "none":
            return "Late work gets full marks: there is no late penalty."
        if self.kind == "close":
            return f"Late work gets full marks until the assignment closes: {close}."
        unit = {"per_hour": "hour", "per_day": "day (24 hours)"}[self.kind]
        text = (f"Late work loses {plain_number(self.percent)}% of the notebook's points for each {unit} begun "
                f"after your due date, at most {plain_number(self.cap)}%")
        return text + (f"; {close}." if close else ".")


def plain_number(x):
    return f"{round(float(x), 4):g}"


def hours_text(hours):
    """``hours`` in words: "36 hours", "7 days", "1 hour"."""
    if hours >= 48 and float(hours / 24).is_integer():
        return f"{plain_number(hours / 24)} days"
    return f"{plain_number(hours)} hour{'' if hours == 1 else 's'}"


def _number(data, key, where, low, high, required):
    if key not in data:
        if required:
            raise PolicyError(f"the late policy {where} has kind = {data['kind']!r}, which needs {key} (a number of "
                              f"{'hours' if key == 'close_after_hours' else 'percent'}); add it, or see docs/term.md")
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyError(f"the late policy {where}: {key} = {value!r} is not a number; write it as 10 or 2.5")
    if not low < value <= high:
        raise PolicyError(f"the late policy {where}: {key} = {plain_number(value)} is out of range; it must be more "
                          f"than {plain_number(low)} and at most {plain_number(high)}")
    return float(value)


def parse_policy(text, where=POLICY_FILE):
    """The ``LatePolicy`` that the TOML ``text`` declares, or a ``PolicyError`` naming ``where`` and the fault."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(f"the late policy {where} does not parse as TOML: {exc}; see docs/term.md") from None
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise PolicyError(f"the late policy {where} has {', '.join(repr(k) for k in unknown)}, which is not a "
                          f"setting; the settings are kind, percent, cap and close_after_hours")
    if data.get("kind") not in KINDS:
        raise PolicyError(f"the late policy {where}: kind = {data.get('kind', '(missing)')!r} is not one of "
                          f"{', '.join(repr(k) for k in KINDS)}")
    kind = data["kind"]
    if kind in ("none", "close"):
        extra = sorted({"percent", "cap"} & set(data)) + (["close_after_hours"] if kind == "none" and
                                                           "close_after_hours" in data else [])
        if extra:
            raise PolicyError(f"the late policy {where}: kind = {kind!r} takes no {', '.join(extra)} (a penalty per "
                              f"hour or day is kind = 'per_hour' or 'per_day'; a hard close is kind = 'close')")
        if kind == "none":
            return LatePolicy()
        return LatePolicy("close", close_after_hours=_number(data, "close_after_hours", where, 0, 24 * 366, True))
    percent = _number(data, "percent", where, 0, 100, True)
    cap = _number(data, "cap", where, 0, 100, False)
    if cap is not None and cap < percent:
        raise PolicyError(f"the late policy {where}: cap = {plain_number(cap)} is less than percent = "
                          f"{plain_number(percent)}, so the first {kind[4:]} late would already pass it; raise cap or "
                          f"lower percent")
    return LatePolicy(kind, percent, 100.0 if cap is None else cap,
                      _number(data, "close_after_hours", where, 0, 24 * 366, False))


def read_policy(course_root):
    """The course folder's ``LatePolicy`` (its ``late_policy.toml``; none without one), or a ``PolicyError``."""
    path = os.path.join(course_root, POLICY_FILE)
    try:
        with open(path, "rb") as f:
            raw = f.read(64_000)
    except FileNotFoundError:
        return LatePolicy()
    except OSError as exc:
        raise PolicyError(f"the late policy {path} cannot be read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PolicyError(f"the late policy {path} is not UTF-8 text") from None
    return parse_policy(text, path)


def course_root_of(db_url):
    """The course folder of a gradebook URL ``sqlite:///<course>/gradebook.db``."""
    return os.path.dirname(db_url[len("sqlite:///"):])


class CourseLatePolicy(LateSubmissionPlugin):
    """nbgrader's late submission plugin with the course's policy (``late_policy.toml`` beside the gradebook):
    ``AssignLatePenalties`` (its parent) gives the seconds late past the student's due date, extension included."""

    def late_submission_penalty(self, student_id, score, total_seconds_late):
        parent = self.parent
        policy = read_policy(course_root_of(parent.db_url))
        notebook = parent.gradebook.find_submission_notebook(parent.notebook_id, parent.assignment_id, student_id)
        penalty = policy.penalty(score, notebook.max_score or 0.0, total_seconds_late)
        self.log.info("Late policy %s: penalty %s", policy, penalty)
        return penalty


# ------------------------------------------------------------------ a submission's total
def total_after_penalty(score, penalty, seconds_late=0.0, policy=None):
    """The one total every reader shows (report, who-failed-what, overview, export, AGS): ``score`` less the late
    ``penalty`` nbgrader's ``AssignLatePenalties`` wrote, never below 0; and 0 past the ``policy``'s hard close
    whatever the score is now (a score raised in the formgrader after grading stays closed)."""
    if policy is not None and policy.closed(seconds_late):
        return 0.0
    return max(0.0, float(score or 0.0) - float(penalty or 0.0))


def submission_total(sub, policy=None):
    """``total_after_penalty`` of nbgrader's ``SubmittedAssignment`` or ``SubmittedNotebook`` ``sub``."""
    row = getattr(sub, "assignment", None) if not hasattr(sub, "total_seconds_late") else sub
    return total_after_penalty(sub.score, sub.late_submission_penalty, row.total_seconds_late if row else 0.0, policy)


def policy_or_none(course_root):
    """The course's ``LatePolicy`` for a reader of grades, or None where it does not parse (grading refuses it; a
    reader then shows the penalties as nbgrader wrote them)."""
    try:
        return read_policy(course_root)
    except PolicyError:
        return None


def not_yet_due(gb, assignment, student, now=None):
    """True when ``student`` has no submission of ``assignment`` (none, or ``course extend``'s row alone) and their
    own due date (the assignment's plus their extension) has not passed: no 0 for them yet."""
    from nbgrader.api import MissingEntry
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    try:
        a = gb.find_assignment(assignment)
    except MissingEntry:
        return False
    if a.duedate is None:
        return False
    try:
        sub = gb.find_submission(assignment, student)
    except MissingEntry:
        return a.duedate > now
    return extension_only(sub) and sub.duedate > now


# ------------------------------------------------------------------ a student's due date
def extension_only(submission):
    """True for a gradebook row that holds only an extension (``course extend`` before the student submitted):
    no time of submission and no score, auto or manual, in any cell. Readers of grades count it as no submission. Every submission this course collects has a time (collect writes
    ``timestamp.txt``, nbgrader's autograde reads it into the row), so a row without one was not collected."""
    if submission.timestamp is not None:
        return False
    return all(g.auto_score is None and g.manual_score is None for nb in submission.notebooks for g in nb.grades)


@dataclass(frozen=True)
class Lateness:
    """One student's due date on one assignment, as nbgrader computes it."""
    assignment_due: datetime.datetime   # naive UTC, or None
    extension: datetime.timedelta       # or None
    submitted: datetime.datetime        # naive UTC, or None
    seconds_late: float

    @property
    def due(self):
        if self.assignment_due is None:
            return None
        return self.assignment_due + (self.extension or datetime.timedelta(0))

    def lines(self, policy=None):
        """What the student reads about it (each line plain text)."""
        out = []
        if self.due is None:
            out.append("This assignment has no due date.")
        elif self.extension:
            out.append(f"Your due date: {utc(self.due)}, with your extension of {duration(self.extension)} "
                       f"(the assignment's: {utc(self.assignment_due)}).")
        else:
            out.append(f"Due: {utc(self.due)}.")
        if self.submitted is not None:
            late = f", {duration(datetime.timedelta(seconds=self.seconds_late))} late" if self.seconds_late else \
                ", on time" if self.due is not None else ""
            out.append(f"Submitted: {utc(self.submitted)}{late}.")
        if policy is not None and self.due is not None:
            out.append(f"Late policy: {policy.describe()}")
        return out


def lateness_of(gb, assignment, student):
    """``Lateness`` of ``student``'s ``assignment`` in nbgrader's Gradebook ``gb`` (no row: the assignment's date)."""
    from nbgrader.api import MissingEntry
    due = gb.find_assignment(assignment).duedate
    try:
        sub = gb.find_submission(assignment, student)
    except MissingEntry:
        return Lateness(due, None, None, 0.0)
    return Lateness(due, sub.extension, sub.timestamp, sub.total_seconds_late)


def utc(when):
    return f"{when:%Y-%m-%d %H:%M} UTC"


def duration(delta):
    """A time span in words: "2 days 3 hours", "45 minutes", "1 minute" (to the minute, rounded up)."""
    minutes = math.ceil(delta.total_seconds() / 60)
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    parts = [f"{n} {unit}{'' if n == 1 else 's'}" for n, unit in ((days, "day"), (hours, "hour"), (minutes, "minute"))
             if n]
    return " ".join(parts) or "0 minutes"


class LatenessNote(NbGraderPreprocessor):
    """Feedback: the student's due date (extension included), when they submitted, how late, and the course's late
    policy, from the gradebook (``resources["course_lateness"]``: lines of plain text the template shows)."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook
        info = resources.get("nbgrader", {})
        try:
            policy = read_policy(course_root_of(info["db_url"]))
        except PolicyError:
            policy = None  # grading refused it already; the page still shows the dates
        with Gradebook(info["db_url"]) as gb:
            resources["course_lateness"] = lateness_of(gb, info["assignment"], info["student"]).lines(policy)
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        return cell, resources


DUE_NOTE = "due_date.md"  # beside each released notebook (`course release`)


def release_note(assignment, due, policy):
    """The page released beside ``assignment``'s notebook: its due date (naive UTC, or None) and the late policy."""
    lines = [f"# {assignment}: due date and late work", ""]
    if due is None:
        lines.append("This assignment has no due date yet.")
    else:
        lines += [f"Due: **{utc(due)}**.", "",
                  "An extension your instructor gives you moves your own due date; your feedback shows it, and "
                  "how late your submission was counted."]
    lines += ["", f"Late policy: {policy.describe()}", ""]
    return "\n".join(lines)
