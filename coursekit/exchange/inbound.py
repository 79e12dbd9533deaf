"""The exchange's inbound folder, read as untrusted input.

Every student may write into the inbound (nbgrader's exchange), so everything found there is some student's input:
the folder names (the student id and the time in them), who owns each folder, what it holds (links, pipes, other
people's files), sizes, counts, depth, and the text of ``timestamp.txt``. The instructor's commands read it with the
instructor's rights, so nothing there is taken on trust:

* a folder counts as student S's submission only when its name parses as ``S+assignment+time[+random]``, S is a
  valid student id (on the roster, when the course has one) with a Unix account, and that account owns the folder:
  checked on the folder once it is open, not on a name looked up before;
* the copy opens every folder and file relative to its parent's descriptor with ``O_NOFOLLOW`` and checks the open
  file's type and owner with ``fstat``: a link is never followed, wherever it stands, even one swapped in while the
  copy runs; anything that is not a regular file or a folder is left out, and so is a file the student does not own;
* limits per file and per submission, on the number of entries and on the depth;
  the copy, its limits and its sentences are ``learner.handin``'s, the one rule set that the student's submit also
  runs over their folder before anything reaches the exchange;
* a folder whose name ends in ``.incomplete`` (``learner.handin.BEING_WRITTEN``) is one the student's submit is
  still writing, or one it stopped writing: never collected, and named;
* the time: the one in the folder's name, unless the folder's contents changed after it (their ctimes, which nobody
  but root can set back), and never one in the future. ``timestamp.txt`` is not read: collect writes its own.

Each student is handled on their own: whatever one folder holds costs only that student, with a sentence naming
the folder, the file and the reason.
"""
import datetime
import os
import pwd
import re
import stat
from dataclasses import dataclass

from grader.plain import inert
from learner.handin import (  # noqa: F401 (the reader and its limits: one rule set with the student's submit)
    BEING_WRITTEN, Copied, InboundLimits, RefusedSubmission, copy_submission, kind_of, os_reason, owner_name)

# A student id: what nbgrader's exchange and this course accept in a folder name and build paths from. Unix user
# names (useradd's rule) are a subset; a '+', a '/', a leading '.', spaces and markup are never part of one.
STUDENT_ID = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\Z")
RANDOM_PART = re.compile(r"\A[A-Za-z0-9_=-]{1,64}\Z")  # nbgrader's urlsafe base64 of 9 random bytes
CLOCK_SKEW = datetime.timedelta(minutes=2)  # a submission's own writes after its time (copy, chmod) and clock drift
NAME_SHOWN = 120  # characters of a folder's or file's name shown in a message


def shown(name, most=NAME_SHOWN):
    """A name from the exchange as one inert line (``grader.plain.inert``: every control character shown escaped, a
    byte that is not UTF-8 as ``\\xNN``), cut to ``most`` characters."""
    text = inert(name)
    return text if len(text) <= most else text[:most - 1] + "…"


def valid_student_id(sid):
    return bool(sid) and STUDENT_ID.match(sid) is not None and ".." not in sid


def utc_naive(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).replace(tzinfo=None)


@dataclass
class Found:
    """One entry of the inbound folder, and what collect makes of it."""
    name: str
    student: str = None
    assignment: str = None
    claimed: datetime.datetime = None  # the time in its name (UTC)
    owner: str = None
    problem: str = None  # why it is not collected; None while it may be

    def refuse(self, why):
        self.problem = why
        return self


def parse_name(name):
    """(student, assignment, time) of an inbound folder's name ``student+assignment+time[+random]``, or a sentence
    saying what does not parse. The time is nbgrader's (``%Y-%m-%d %H:%M:%S.%f %Z``), returned in naive UTC."""
    from nbgrader.utils import parse_utc
    parts = name.split("+")
    if len(parts) not in (3, 4):
        return f"its name is not student+assignment+time (it has {len(parts) - 1} '+')"
    student, assignment, stamp = parts[:3]
    if len(parts) == 4 and not RANDOM_PART.match(parts[3]):
        return "the last part of its name is not nbgrader's random string"
    if not valid_student_id(student):
        return "the student id in its name is not a valid id (letters, digits, '_', '.', '@' and '-')"
    if not STUDENT_ID.match(assignment):
        return "the assignment in its name is not a valid assignment name"
    try:
        when = parse_utc(stamp)
    except (ValueError, OverflowError, TypeError):
        return "the time in its name does not parse"
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return student, assignment, when


def scan(inbound_fd, assignment, roster=None, others=(), now=None):
    """Every entry of the inbound folder (open as ``inbound_fd``) that concerns ``assignment``, or no assignment of
    the course (``others``: the course's other assignments, whose entries are left for their own collect): [Found].
    An entry whose name, student, time, type or owner is wrong has its ``problem`` set; the rest are folders that
    the student of their name owns."""
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    found = []
    for name in sorted(os.listdir(inbound_fd)):
        parts = name.split("+")
        if len(parts) > 1 and parts[1] in others:
            continue  # another assignment's, however broken: named when that one is collected
        entry = _owned(Found(name), inbound_fd)
        incomplete = name.endswith(BEING_WRITTEN)
        parsed = parse_name(name[:-len(BEING_WRITTEN)] if incomplete else name)
        if isinstance(parsed, str):
            found.append(entry.refuse(parsed))
            continue
        entry.student, entry.assignment, entry.claimed = parsed
        if incomplete:  # the student's submit writes it, or stopped before it was complete (learner.submit)
            found.append(entry.refuse("it is not complete: a submit is writing it, or stopped before it was done "
                                      "(it takes its own name when it is complete); the student's latest complete "
                                      "submission is collected"))
            continue
        if entry.assignment != assignment:
            found.append(entry.refuse(f"{entry.assignment!r} is no assignment of this course"))
            continue
        if entry.claimed > now + CLOCK_SKEW:
            found.append(entry.refuse(f"the time in its name, {entry.claimed:%Y-%m-%d %H:%M:%S} UTC, is in the future"))
            continue
        if roster and entry.student not in roster:
            found.append(entry.refuse(f"{entry.student} is not on the course's roster"))
            continue
        try:
            uid = pwd.getpwnam(entry.student).pw_uid
        except KeyError:
            found.append(entry.refuse(f"there is no Unix user {entry.student}, so nobody can have submitted as them"))
            continue
        try:
            st = os.stat(name, dir_fd=inbound_fd, follow_symlinks=False)
        except OSError as exc:
            found.append(entry.refuse(os_reason(exc, "it")))
            continue
        if not stat.S_ISDIR(st.st_mode):
            found.append(entry.refuse(f"it is {kind_of(st.st_mode)}, not a folder"))
        elif st.st_uid != uid:
            found.append(entry.refuse(f"it is owned by {entry.owner}, not by {entry.student}"))
        else:
            found.append(entry)
    return found


def _owned(entry, dir_fd):
    try:
        entry.owner = owner_name(os.stat(entry.name, dir_fd=dir_fd, follow_symlinks=False).st_uid)
    except OSError:
        entry.owner = "nobody (it is gone)"
    return entry


def submission_time(claimed, copied):
    """(time, note): the submission's time for grading and lateness. The time in its name, unless what was copied
    changed later than that (beyond ``CLOCK_SKEW``): then the time of the latest change, and a note saying so."""
    changed = utc_naive(copied.latest_change) if copied.latest_change else None
    if changed is not None and changed > claimed + CLOCK_SKEW:
        return changed, (f"its files changed after the time in its name ({claimed:%Y-%m-%d %H:%M:%S}): counted as "
                         f"submitted at {changed:%Y-%m-%d %H:%M:%S} UTC, when they last changed")
    return claimed, None
