"""`course extend A STUDENT... (--until DATE | --by HOURS | --remove)`: a later due date for some students.

The extension is nbgrader's own (``Gradebook.grant_extension``): a student's due date is the assignment's plus it
(``SubmittedAssignment.duedate``), and everything that computes lateness reads it there: nbgrader's late penalty
(with the course's policy, ``grader.late``), `course collect`, the feedback page, the class report, the LMS export.
nbgrader keeps an extension on the student's submission row; for a student who has not submitted yet the row is made
now, holding nothing else (``grader.late.extension_only``: the readers of grades and the formgrader,
``coursekit.formgrader_api``, count it as no submission), and ``--remove`` takes it away again; ``--remove`` for a
student without an extension writes nothing. nbgrader keeps the extension, not the date, so a new due date for the
assignment moves every student's date with it; ``late_again`` (`course late A`) works every graded submission's
penalty out again after such a change, or a new policy.

Every input is checked before anything is written: an assignment or a student the gradebook does not know, an
assignment without a due date, a date that does not parse, one in the past or not after the assignment's due date,
a number of hours that is not a positive number, an extension of more than a year, a late policy that does not
parse: each is refused with a sentence that names it, and the gradebook stays as it was. A student whose
submission was graded gets the late penalty worked out again (nbgrader's ``AssignLatePenalties``, the course's
policy) and a new feedback page.
"""
import datetime
import math
import os
import re
import warnings

from grader.late import PolicyError, duration, extension_only, read_policy, utc

from .pipeline import course_config, gradebook
from .words import counted

LONGEST = datetime.timedelta(days=366)
SHORTEST = datetime.timedelta(minutes=1)


class ExtendRefused(ValueError):
    """What `course extend` refuses; its message is the sentence the instructor reads."""


def parse_until(text, now):
    """``text`` (ISO 8601: ``2026-12-10 17:00``, ``2026-12-10T17:00+01:00``, ``2026-12-10 17:00 UTC``; without a zone:
    UTC, as nbgrader takes it) as a naive UTC datetime later than ``now``."""
    raw = text.strip()
    body = raw[:-len(" UTC")] if raw.upper().endswith(" UTC") else raw
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", body):
        raise ExtendRefused(f"the date {text!r} has no time: write one, as {body} 23:59 (UTC) or {body}T23:59+01:00 "
                            f"(a date alone would be its midnight, the start of the day)")
    try:
        when = datetime.datetime.fromisoformat(body)
    except ValueError:
        raise ExtendRefused(f"the date {text!r} does not parse: write it as YYYY-MM-DD HH:MM (UTC) or with its "
                            f"offset, as 2026-12-10T17:00+01:00") from None
    if when.tzinfo is not None:
        try:
            when = (when - when.utcoffset()).replace(tzinfo=None)
        except OverflowError:
            raise ExtendRefused(f"the date {text!r} is out of range") from None
    if when <= now:
        raise ExtendRefused(f"the date {utc(when)} ({text!r}) is in the past (it is {utc(now)} now): an extension "
                            f"ends in the future")
    return when


def parse_hours(text):
    """``text`` as a positive, finite number of hours."""
    try:
        hours = float(text)
    except ValueError:
        raise ExtendRefused(f"--by {text!r} is not a number of hours (write 48 or 1.5)") from None
    if not math.isfinite(hours) or hours <= 0:
        raise ExtendRefused(f"--by {text!r}: an extension is a positive number of hours")
    if hours * 60 < 1:
        raise ExtendRefused(f"--by {text!r} is less than a minute: an extension is at least one minute (1/60 hour); "
                            f"write 0.5 for half an hour")
    if hours > LONGEST.total_seconds() / 3600:
        raise ExtendRefused(f"--by {text!r}: an extension of more than a year is refused; give the assignment a new "
                            f"due date instead")
    return hours


def extend(course_root, assignment, students, until=None, hours=None, remove=False, now=None, out=print):
    """Give ``students`` of ``assignment`` the due date ``until`` (text, see ``parse_until``), or the assignment's
    plus ``hours`` (text), or take their extension away (``remove``), in the gradebook of ``course_root``. Raises
    ``ExtendRefused`` and changes nothing when any input is refused; returns {student: their due date}."""
    if sum((until is not None, hours is not None, bool(remove))) != 1:
        raise ExtendRefused("give one of --until DATE, --by HOURS or --remove")
    if not students:
        raise ExtendRefused("name at least one student")
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    try:
        read_policy(course_root)  # a graded student's penalty is worked out again with it
    except PolicyError as exc:
        raise ExtendRefused(str(exc)) from None
    if not os.path.isfile(os.path.join(course_root, "gradebook.db")):
        raise ExtendRefused(f"there is no gradebook in {course_root}: release the assignment first "
                            f"(`course release {assignment}`)")
    with gradebook(course_root) as gb:
        known = {a.name: a for a in gb.assignments}
        if assignment not in known:
            raise ExtendRefused(f"there is no assignment {assignment!r} in the gradebook of {course_root} (it has: "
                                f"{', '.join(sorted(known)) or 'none'})")
        due = known[assignment].duedate
        if due is None:
            raise ExtendRefused(f"the assignment {assignment} has no due date, so there is nothing to extend: set one "
                                f"first (the formgrader's Manage Assignments, or `nbgrader db assignment add "
                                f"{assignment} --duedate='2026-12-10 17:00:00 UTC'` in the course folder)")
        ids = {s.id for s in gb.students}
        unknown = [s for s in dict.fromkeys(students) if s not in ids]
        if unknown:
            raise ExtendRefused(f"no student {', '.join(repr(s) for s in unknown)} in the gradebook of {course_root}; "
                                f"its students are those of the roster (`course hub --roster`) or `nbgrader db "
                                f"student add`")
        if remove:
            extension = datetime.timedelta(0)
        elif hours is not None:
            extension = datetime.timedelta(hours=parse_hours(hours))
        else:
            extension = parse_until(until, now) - due
            if extension < SHORTEST:
                raise ExtendRefused(f"{utc(due + extension)} is not a minute after {assignment}'s own due date, "
                                    f"{utc(due)}: an extension gives a later date")
            if extension > LONGEST:
                raise ExtendRefused(f"{utc(due + extension)} is more than a year after {assignment}'s due date; give "
                                    f"the assignment a new due date instead")
        graded, done = [], {}
        from nbgrader.api import MissingEntry
        from sqlalchemy.exc import SAWarning
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SAWarning)  # add_submission's own autoflush notes; nothing is lost
            for student in dict.fromkeys(students):
                if remove:
                    try:
                        sub = gb.find_submission(assignment, student)
                    except MissingEntry:  # no row, so no extension: nothing to write
                        done[student] = due
                        continue
                    if extension_only(sub):  # the row held the extension alone: back to no row, as before it
                        gb.remove_submission(assignment, student)
                    if extension_only(sub) or not sub.extension:  # (or it has none: nothing to change)
                        done[student] = due
                        continue
                sub = gb.update_or_create_submission(assignment, student)
                gb.grant_extension(assignment, student, minutes=extension.total_seconds() / 60)
                done[student] = sub.duedate
                if not extension_only(sub):
                    graded.append(student)
    for student, when in done.items():
        if remove:
            out(f"{assignment}: {student} has no extension; due {utc(when)}")
        else:
            past = " (already past: it excuses work handed in before now)" if when <= now else ""
            out(f"{assignment}: {student} due {utc(when)}{past}, an extension of {duration(extension)} past "
                f"{utc(due)}, the assignment's due date now (nbgrader keeps the extension, not the date: a new due "
                f"date for the assignment moves this one, and the LMS's date must follow)")
    for student in graded:
        for line in _penalties_again(course_root, assignment, student):
            out(line)
    return done


def late_again(course_root, assignment, out=print):
    """`course late A`: every graded submission's late penalty of ``assignment`` worked out again from the gradebook
    as it is now (the assignment's due date, each student's extension, the course's late policy, the current score)
    by nbgrader's ``AssignLatePenalties``, without grading again, and each feedback page made again; run it after
    moving the due date or changing the policy. Raises ``ExtendRefused`` (nothing changed) for a policy that does not
    parse or an assignment the gradebook does not know; returns the students worked out again."""
    from nbgrader.api import MissingEntry
    try:
        read_policy(course_root)
    except PolicyError as exc:
        raise ExtendRefused(str(exc)) from None
    if not os.path.isfile(os.path.join(course_root, "gradebook.db")):
        raise ExtendRefused(f"there is no gradebook in {course_root}: nothing was graded yet")
    with gradebook(course_root) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            raise ExtendRefused(f"there is no assignment {assignment!r} in the gradebook of {course_root} (it has: "
                                f"{', '.join(sorted(x.name for x in gb.assignments)) or 'none'})") from None
        students = sorted(s.student_id for s in a.submissions if not extension_only(s))
        due = a.duedate
    out(f"{assignment}: due {utc(due) if due else '(no due date)'}; late penalties worked out again for "
        f"{counted(len(students), 'graded submission')}")
    for student in students:
        for line in _penalties_again(course_root, assignment, student):
            out(line)
    return students


def _penalties_again(course_root, assignment, student):
    """The late penalty of ``student``'s graded ``assignment`` worked out again with their new due date (nbgrader's
    ``AssignLatePenalties`` with the course's configuration), and their feedback page made again; lines to print."""
    import nbformat
    from nbgrader.preprocessors import AssignLatePenalties

    db_url = "sqlite:///" + os.path.join(course_root, "gradebook.db")
    config = course_config(course_root)
    lines = []
    with gradebook(course_root) as gb:
        notebooks = [nb.name for nb in gb.find_submission(assignment, student).notebooks]
    for name in notebooks:
        with gradebook(course_root) as gb:
            before = gb.find_submission_notebook(name, assignment, student).late_submission_penalty or 0.0
        resources = {"nbgrader": {"notebook": name, "assignment": assignment, "student": student, "db_url": db_url}}
        AssignLatePenalties(config=config).preprocess(nbformat.v4.new_notebook(), resources)
        with gradebook(course_root) as gb:
            after = gb.find_submission_notebook(name, assignment, student).late_submission_penalty or 0.0
        lines.append(f"  {student}'s graded {name}: late penalty {counted(after, 'point')}"
                     + ("" if after == before else f" (was {before:g})"))
    if os.path.isdir(os.path.join(course_root, "autograded", student, assignment)):
        problem = feedback_again(course_root, assignment, student)
        lines.append(f"  {student}'s feedback page made again; `course return {assignment}` gives it to them"
                     if problem is None else f"  {student}'s feedback page could not be made again: {problem}")
    return lines


def feedback_again(course_root, assignment, student):
    """``student``'s feedback page of ``assignment`` made from the course folder's gradebook and autograded
    notebook (nbgrader's generate_feedback, in this process); None, or what went wrong."""
    from .pipeline import nbgrader_api
    outcome = nbgrader_api(course_root).generate_feedback(assignment, student)
    return None if outcome["success"] else (outcome.get("error") or outcome.get("log") or "")[-300:]


def feedback_with_due_date(course_root, assignment, student):
    """After `course grade` wrote ``student``'s graded ``assignment``: where the assignment has a due date, its
    feedback page made again here (``feedback_again``), since the worker that made it had no gradebook to tell the
    student's due date, extension and late penalty; the worker's page stays where that fails."""
    if due_dates(course_root, assignment)[0] is not None:
        feedback_again(course_root, assignment, student)


def due_dates(course_root, assignment):
    """(the assignment's due date, {student: their due date} for the students with an extension), naive UTC; (None,
    {}) when the gradebook or the assignment is not there or it has no due date."""
    from nbgrader.api import MissingEntry
    if not os.path.isfile(os.path.join(course_root, "gradebook.db")):
        return None, {}
    with gradebook(course_root) as gb:
        try:
            a = gb.find_assignment(assignment)
        except MissingEntry:
            return None, {}
        if a.duedate is None:
            return None, {}
        return a.duedate, {s.student_id: s.duedate for s in a.submissions if s.extension}
