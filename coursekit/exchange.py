"""The instructor's loop over nbgrader's exchange, run on the course folder.

    course release A   generate the student version of A, then release it to the exchange
    course collect A   collect each student's latest submission of A into submitted/ (earlier ones kept)
    course grade A     grade what was collected (coursekit.grading: parallel and sandboxed)
    course return A    generate the feedback of A and release it to the exchange

The exchange is nbgrader's own (``nbgrader.exchange.default``) at the root that the course's
``nbgrader_config.py`` names (``$COURSE_EXCHANGE``, else ``<course>/exchange``): what these commands do is what
the formgrader's Release, Collect and Release-feedback buttons do, plus the checks and the names a class needs
(who has not submitted, who submitted late, which submission is of another assignment, what an earlier
submission became). nbgrader documents the exchange root as writable by everyone (``chmod ugo+rw``; its release
sets it to 0777): ``check_exchange`` says what to change when it is not.
"""
import os
import shutil
import stat

from nbgrader.utils import capture_log, parse_utc, temp_attrs

from .pipeline import gradebook

EXCHANGE_MODE = 0o777  # nbgrader's release_assignment sets the root to this (everyone reads, writes, enters)


class ExchangeError(Exception):
    """Something about the exchange a person has to change, said in plain words."""


def _api(course_root):
    from .pipeline import nbgrader_api
    return nbgrader_api(course_root)


def assignments_of(course_root):
    """The assignments of the course folder ``course_root``: one per ``source/<A>/<A>.ipynb``."""
    source = os.path.join(course_root, "source")
    return sorted(a for a in (os.listdir(source) if os.path.isdir(source) else [])
                  if os.path.isfile(os.path.join(source, a, a + ".ipynb")))


def exchange_root(course_root):
    """The exchange root that the course's ``nbgrader_config.py`` names (it reads ``$COURSE_EXCHANGE``)."""
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=course_root).load_config()
    return os.path.abspath(config.Exchange.root)


def check_exchange(root, create=False, shared=False):
    """The exchange root as nbgrader needs it, or an ``ExchangeError`` that says what to change. With ``create``, a
    missing root is made (mode 0777, as nbgrader's release makes it); with ``shared`` (a hub: several users), every
    folder above it must also let others in."""
    if not os.path.exists(root):
        if not create:
            raise ExchangeError(f"the exchange {root} does not exist: create it with `mkdir -p {root} && "
                                f"chmod 0777 {root}` (or run `course release`, which creates it)")
        os.makedirs(root)
        os.chmod(root, EXCHANGE_MODE)
    if not os.path.isdir(root):
        raise ExchangeError(f"the exchange {root} is not a folder: move that file away, or name another "
                            f"exchange (--exchange)")
    mode = stat.S_IMODE(os.stat(root).st_mode)
    if mode & 0o777 != EXCHANGE_MODE:
        raise ExchangeError(f"the exchange {root} has permissions {mode & 0o7777:04o}; nbgrader needs everyone to "
                            f"read, write and enter it (students submit into it): run `chmod 0777 {root}` "
                            f"(as its owner or root)")
    parent = os.path.dirname(root)
    while shared and parent and parent != os.path.dirname(parent):
        pmode = stat.S_IMODE(os.stat(parent).st_mode)
        if not pmode & 0o001:
            raise ExchangeError(f"students cannot reach the exchange {root}: {parent} has permissions "
                                f"{pmode:04o}, so others may not enter it: run `chmod o+x {parent}`, or put the "
                                f"exchange elsewhere (--exchange)")
        parent = os.path.dirname(parent)
    return root


def _ok(outcome, what):
    if not outcome["success"]:
        raise ExchangeError(f"nbgrader {what} failed:\n{outcome.get('log', '')[-3000:]}\n"
                            f"{outcome.get('error', '')[-3000:]}")
    return outcome


def release(course_root, assignment, out=print):
    """Generate the student version of ``assignment`` and release it to the exchange (again, if it was)."""
    from .pipeline import release as generate
    if assignment not in assignments_of(course_root):
        raise ExchangeError(f"there is no assignment {assignment!r} in {os.path.join(course_root, 'source')} "
                            f"(there are: {', '.join(assignments_of(course_root))})")
    root = check_exchange(exchange_root(course_root), create=True)
    generate(course_root, assignment)
    api = _api(course_root)
    with temp_attrs(api.coursedir, assignment_id=assignment):
        app = api.exchange.ReleaseAssignment(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
        app.force = True  # a release after a fix replaces the previous one; students' fetched copies stay theirs
        _ok(capture_log(app), f"release_assignment {assignment}")
    out(f"released {assignment} to {os.path.join(root, api.coursedir.course_id, 'outbound', assignment)}")
    return root


def _inbound(course_root):
    api = _api(course_root)
    return os.path.join(exchange_root(course_root), api.coursedir.course_id, "inbound"), api


def _records(inbound):
    """[(student, assignment, timestamp, entry name)] of every submission in the inbound folder, as nbgrader's
    collect parses its names (``student+assignment+timestamp[+random]``); unparsable names come back with None."""
    out = []
    for name in sorted(os.listdir(inbound)):
        parts = name.rsplit("+", 3)
        if len(parts) == 4:
            student, a, stamp = parts[0], parts[1], parts[2]
        elif len(parts) == 3:
            student, a, stamp = parts
        else:
            out.append((None, None, None, name))
            continue
        try:
            out.append((student, a, parse_utc(stamp), name))
        except Exception:
            out.append((student, a, None, name))
    return out


def _timestamp_of(folder):
    try:
        with open(os.path.join(folder, "timestamp.txt")) as f:
            return parse_utc(f.read().strip())
    except Exception:
        return None


def _roster(course_root):
    if not os.path.exists(os.path.join(course_root, "gradebook.db")):
        return set()
    with gradebook(course_root) as gb:
        return {s.id for s in gb.students}


def _duedate(course_root, assignment):
    from nbgrader.api import MissingEntry
    if not os.path.exists(os.path.join(course_root, "gradebook.db")):
        return None
    with gradebook(course_root) as gb:
        try:
            return gb.find_assignment(assignment).duedate
        except MissingEntry:
            return None


def collect(course_root, assignment, roster=None, out=print):
    """Collect each student's latest submission of ``assignment`` into ``submitted/`` (nbgrader's collect); an
    earlier submission already collected is moved to ``submitted_history/<student>/<assignment>/<timestamp>/``
    first, and every submission stays in the exchange. Returns {student: "new" | "updated" | "unchanged"}; prints
    who has not submitted, who submitted late, and every submission that will not be graded, by name."""
    from .grading import collect as gradable
    inbound, api = _inbound(course_root)
    if not os.path.isdir(inbound):
        out(f"nothing submitted: {assignment} has not been released to {os.path.dirname(inbound)} yet "
            f"(`course release {assignment}`)")
        return {}
    try:
        records = _records(inbound)
    except PermissionError:
        raise ExchangeError(f"cannot list {inbound}: collect as the instructor who released the course (its owner)")
    known = set(assignments_of(course_root))
    for student, a, stamp, name in records:
        if student is None:
            out(f"  not collected: {name} in the exchange is not a submission (student+assignment+time)")
        elif a not in known:
            out(f"  not collected: {student} submitted {a!r}, which is no assignment of this course ({name})")
    mine = [r for r in records if r[1] == assignment and r[0] is not None]
    if not mine:
        out(f"nothing submitted for {assignment} yet (the exchange's inbound folder {inbound} holds none)")
        _name_missing(course_root, roster, set(), out)
        return {}
    latest, counts = {}, {}
    for student, _, stamp, name in mine:
        counts[student] = counts.get(student, 0) + 1
        if stamp is None:
            out(f"  not collected: {name} has no readable time in its name")
            continue
        if student not in latest or stamp > latest[student][0]:
            latest[student] = (stamp, name)
    status = {}
    for student, (stamp, name) in sorted(latest.items()):
        folder = os.path.join(course_root, "submitted", student, assignment)
        if not os.access(os.path.join(inbound, name), os.R_OK | os.X_OK):
            out(f"  not collected: {student}'s submission {name} cannot be read (permissions)")
            continue
        if not os.path.isdir(folder):
            status[student] = "new"
            continue
        before = _timestamp_of(folder)
        if before is not None and before >= stamp:
            status[student] = "unchanged"
            continue
        keep = os.path.join(course_root, "submitted_history", student, assignment,
                            (before.strftime("%Y-%m-%dT%H-%M-%S.%f") if before else "unknown-time"))
        os.makedirs(os.path.dirname(keep), exist_ok=True)
        if os.path.exists(keep):
            shutil.rmtree(keep)
        shutil.copytree(folder, keep)
        status[student] = "updated"
    with temp_attrs(api.coursedir, assignment_id=assignment):
        app = api.exchange.Collect(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
        app.update = True
        app.check_owner = True
        _ok(capture_log(app), f"collect {assignment}")
    due = _duedate(course_root, assignment)
    out(f"collected {assignment}: {sum(s != 'unchanged' for s in status.values())} new or updated, "
        f"{sum(s == 'unchanged' for s in status.values())} unchanged")
    for student, state in sorted(status.items()):
        stamp = latest[student][0]
        extra = f"; {counts[student]} submissions, the latest collected" if counts[student] > 1 else ""
        late = f"; LATE by {stamp - due}" if due is not None and stamp > due else ""
        history = (f"; the earlier one kept in submitted_history/{student}/{assignment}/" if state == "updated"
                   else "")
        out(f"  {student:<24} {state:<9} submitted {stamp:%Y-%m-%d %H:%M:%S}{extra}{late}{history}")
    _, problems = gradable(course_root, {assignment}, None, set(status))
    for p in problems:
        out(f"  {'NOT GRADED' if not p.graded else 'note'}: {p.student} / {p.assignment}: {p.reason}")
    _name_missing(course_root, roster, set(latest), out)
    return status


def _name_missing(course_root, roster, submitted, out):
    """Say who on the roster (``roster``, or the gradebook's students) has not submitted."""
    missing = sorted(set(roster if roster is not None else _roster(course_root)) - submitted)
    if missing:
        out(f"  no submission from {len(missing)} student(s) on the roster: {', '.join(missing)}")


def return_feedback(course_root, assignment, out=print):
    """Generate the feedback of every graded submission of ``assignment`` (nbgrader's generate_feedback) and
    release it to the exchange, where each student fetches their own. Returns the students it was released for."""
    autograded = os.path.join(course_root, "autograded")
    graded = sorted(s for s in (os.listdir(autograded) if os.path.isdir(autograded) else [])
                    if os.path.isdir(os.path.join(autograded, s, assignment)))
    check_exchange(exchange_root(course_root))
    api = _api(course_root)
    if graded:
        _ok(api.generate_feedback(assignment), f"generate_feedback {assignment}")
    # a submission whose grading failed has a feedback page saying why (course grade) but none of the files
    # nbgrader's release needs: they come from the submission itself
    feedback = os.path.join(course_root, "feedback")
    students = sorted(s for s in (os.listdir(feedback) if os.path.isdir(feedback) else [])
                      if os.path.isdir(os.path.join(feedback, s, assignment)))
    released, skipped = [], []
    for student in students:
        folder = os.path.join(feedback, student, assignment)
        submitted = os.path.join(course_root, "submitted", student, assignment)
        for name in ("timestamp.txt", "submission_secret.txt"):
            if not os.path.exists(os.path.join(folder, name)) and os.path.exists(os.path.join(submitted, name)):
                shutil.copy(os.path.join(submitted, name), os.path.join(folder, name))
        if all(os.path.exists(os.path.join(folder, n)) for n in ("timestamp.txt", "submission_secret.txt")):
            released.append(student)
        else:
            skipped.append(student)
    if not released:
        out(f"no feedback to return for {assignment}: nothing has been graded (`course grade {assignment}`)")
        return []
    api.coursedir.student_id_exclude = ",".join(skipped)
    _ok(api.release_feedback(assignment), f"release_feedback {assignment}")
    out(f"returned the feedback of {assignment} to {len(released)} student(s): {', '.join(released)}")
    for student in skipped:
        out(f"  not returned: {student}: the submission was not collected through the exchange (no "
            f"submission_secret.txt), so there is no place to return its feedback to")
    return released
