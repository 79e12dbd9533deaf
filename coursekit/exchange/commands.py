"""The instructor's loop over nbgrader's exchange, run on the course folder.

    course release A   generate the student version of A, then release it to the exchange
    course collect A   collect each student's latest submission of A into submitted/ (earlier ones kept)
    course grade A     grade what was collected (coursekit.grading: parallel and sandboxed)
    course return A    release the feedback that grading wrote for A to the exchange

The exchange is nbgrader's own at the root that the course's ``nbgrader_config.py`` names (``$COURSE_EXCHANGE``,
else ``<course>/exchange``), through the course's classes (``coursekit.exchange.classes``: the same ones the
formgrader's Release, Collect and Release-feedback buttons use), which read what students wrote as untrusted
input. These commands add the checks and the names a class needs (who has not submitted, who submitted late,
which folder was refused and why, which submission is of another assignment, what an earlier submission became).
On one machine the root is writable by everyone with the sticky bit (1777); on a hub it is root's (0755) and holds
only the courses the hub made: ``check_exchange`` says what to change when it is not.
"""
import contextlib
import logging
import os
import stat
from dataclasses import dataclass, field

from nbgrader.utils import capture_log, temp_attrs

from grader.late import duration
from grader.plain import inert

from .inbound import shown
from ..extend import due_dates
from ..pipeline import gradebook
from ..words import counted
from .course_id import ExchangeError

# nbgrader's release makes the root 0777 (everyone reads, writes and enters it); the sticky bit on top lets only an
# entry's owner remove or rename it, so no student can move the course's folder aside and put one of their own there
EXCHANGE_MODE = 0o1777
# on a hub the root is root's: the hub makes each course's folder, and no student may add one of their own
HUB_EXCHANGE_MODE = 0o755


def _api(course_root):
    from ..pipeline import nbgrader_api
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


# A course id a hub accepts: "<id>-students" stays within a Unix group name's 32 characters, and the id is one plain
# folder name in the exchange.


def check_exchange(root, create=False, shared=False):
    """The exchange root as a class needs it, or an ``ExchangeError`` that says what to change.

    On one machine (the default) the root is everyone's to add to with the sticky bit (1777, as nbgrader makes it),
    or a hub's. On a hub (``shared``) it is root's and nobody else may write at its top level (0755): the hub makes
    each course's folder in it, so no student can invent a course. With ``create`` (as root, for a hub) a missing
    root is made so and a 1777 one closed."""
    if not os.path.exists(root):
        if not create:
            raise ExchangeError(f"the exchange {root} does not exist: create it with `mkdir -p {root} && "
                                f"chmod 1777 {root}` (or run `course release`, which creates it)")
        os.makedirs(root)
        os.chmod(root, HUB_EXCHANGE_MODE if shared else EXCHANGE_MODE)
    if not os.path.isdir(root) or os.path.islink(root):
        raise ExchangeError(f"the exchange {root} is not a folder: move that file away, or name another "
                            f"exchange (--exchange)")
    st = os.stat(root)
    mode = stat.S_IMODE(st.st_mode)
    if shared and create and os.geteuid() == 0 and (st.st_uid != 0 or mode != HUB_EXCHANGE_MODE):
        os.chown(root, 0, -1)  # a hub's: root's alone to add to (a 1777 root of an earlier version is closed)
        os.chmod(root, HUB_EXCHANGE_MODE)
        st, mode = os.stat(root), HUB_EXCHANGE_MODE
    closed = st.st_uid == 0 and not mode & 0o022
    if shared and not closed:
        raise ExchangeError(f"the exchange {root} of a hub must be root's and closed to everyone else's writes "
                            f"({HUB_EXCHANGE_MODE:04o}; it is {mode:04o}, owned by uid {st.st_uid}): a student could "
                            f"make a course of their own there. Run `course hub` as root, which makes it so, or "
                            f"`chown root {root} && chmod {HUB_EXCHANGE_MODE:o} {root}`")
    if not shared and not closed and mode & 0o1777 != EXCHANGE_MODE:
        raise ExchangeError(f"the exchange {root} has permissions {mode:04o}; a class needs {EXCHANGE_MODE:04o}: "
                            f"everyone reads, writes and enters it (students submit into it), and only the owner of "
                            f"an entry may remove or rename it (the sticky bit): run `chmod 1777 {root}` (as its "
                            f"owner or root)")
    parent = os.path.dirname(root)
    while shared and parent and parent != os.path.dirname(parent):
        pmode = stat.S_IMODE(os.stat(parent).st_mode)
        if not pmode & 0o001:
            raise ExchangeError(f"students cannot reach the exchange {root}: {parent} has permissions "
                                f"{pmode:04o}, so others may not enter it: run `chmod o+x {parent}`, or put the "
                                f"exchange elsewhere (--exchange)")
        if pmode & 0o002 and not pmode & 0o1000:  # anyone could move the exchange aside and put their own there
            raise ExchangeError(f"{parent}, above the exchange {root}, has permissions {pmode:04o}: anyone may rename "
                                f"what is in it, the exchange too: run `chmod o-w {parent}` (or `chmod +t`), or put "
                                f"the exchange elsewhere (--exchange)")
        parent = os.path.dirname(parent)
    return root


def _ok(outcome, what):
    if not outcome["success"]:
        raise ExchangeError(f"nbgrader {what} failed:\n{outcome.get('log', '')[-3000:]}\n"
                            f"{outcome.get('error', '')[-3000:]}")
    return outcome


def release(course_root, assignment, out=print):
    """Generate the student version of ``assignment`` and release it to the exchange (again, if it was)."""
    from ..pipeline import generate_release
    if assignment not in assignments_of(course_root):
        raise ExchangeError(f"there is no assignment {assignment!r} in {os.path.join(course_root, 'source')} "
                            f"(there are: {', '.join(assignments_of(course_root))})")
    from grader.late import PolicyError, read_policy
    try:
        read_policy(course_root)  # shown beside the release: refused before anything is generated or released
    except PolicyError as exc:
        raise ExchangeError(str(exc)) from None
    from .classes import CourseReleaseAssignment
    root = check_exchange(exchange_root(course_root), create=True)
    generate_release(course_root, assignment)
    api = _api(course_root)
    with temp_attrs(api.coursedir, assignment_id=assignment):
        app = CourseReleaseAssignment(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
        app.force = True  # a release after a fix replaces the previous one; students' fetched copies stay theirs
        _ok(capture_log(app), f"release_assignment {assignment}")
    out(f"released {assignment} to {os.path.join(root, api.coursedir.course_id, 'outbound', assignment)}")
    return root


def _inbound(course_root):
    api = _api(course_root)
    return os.path.join(exchange_root(course_root), api.coursedir.course_id, "inbound"), api


@dataclass
class Collected:
    """What ``collect`` did: {student: "new" | "updated" | "unchanged"}, and the refused inbound entries."""
    status: dict = field(default_factory=dict)
    refused: list = field(default_factory=list)


REFUSALS_SHOWN_PER_OWNER = 10   # the refused entries named for each owner, past them a count
REFUSALS_SHOWN_PER_STUDENT = 3  # the folders claiming to be one student's, and their own refused ones, named
LEFT_OUT_SHOWN = 10  # the files left out of one submission that are named, past them a count


def collect(course_root, assignment, roster=None, out=print):
    """Collect each student's latest submission of ``assignment`` into ``submitted/`` (``CourseCollect``: the
    exchange read as untrusted input); an earlier submission already collected is moved to
    ``submitted_history/<student>/<assignment>/<time>/`` first, and every submission stays in the exchange. Prints
    who was collected, every refused folder (its name, its owner, why), what was left out of a submission, who has
    not submitted, who submitted late, and every submission that will not be graded. Returns a ``Collected``."""
    from nbgrader.exchange import ExchangeError as NbgraderExchangeError

    from .classes import CourseCollect
    from ..grading import gradable
    out = _inert_lines(out)
    inbound, api = _inbound(course_root)
    if not os.path.isdir(inbound):
        out(f"nothing submitted: {assignment} has not been released to {os.path.dirname(inbound)} yet "
            f"(`course release {assignment}`)")
        return Collected()
    check_exchange(os.path.dirname(os.path.dirname(inbound)))
    with temp_attrs(api.coursedir, assignment_id=assignment):
        app = CourseCollect(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
        if roster is not None:
            app.roster = list(roster)
        try:
            with _quiet(app):
                app.start()
        except NbgraderExchangeError as exc:
            raise ExchangeError(str(exc)) from None
    result = app.result
    status = {s: state for s, (state, _) in result["collected"].items()}
    done = Collected(status, result["refused"])
    if not status and not done.refused:
        out(f"nothing submitted for {assignment} yet (the exchange's inbound folder {inbound} holds none)")
        _name_missing(course_root, roster, set(), out)
        return done
    due, extended = due_dates(course_root, assignment)  # the assignment's, and each extended student's own
    out(f"collected {assignment}: {sum(s != 'unchanged' for s in status.values())} new or updated, "
        f"{sum(s == 'unchanged' for s in status.values())} unchanged, {len(done.refused)} refused")
    telling, rest = refusal_lines(done.refused, result.get("roster"))
    for line in telling:  # before anything a flood could lengthen
        out(line)
    for student, (state, stamp) in sorted(result["collected"].items()):
        count = result["counts"].get(student, 1)
        extra = f"; {count} submissions, the latest collected" if count > 1 else ""
        own = extended.get(student, due)
        late = f"; LATE by {duration(stamp - own)}" if own is not None and stamp > own else ""  # as feedback says
        late += f" (extended to {own:%Y-%m-%d %H:%M} UTC)" if student in extended else ""
        history = (f"; the earlier one kept in submitted_history/{student}/{assignment}/" if state == "updated"
                   else "")
        out(f"  {student:<24} {state:<9} submitted {stamp:%Y-%m-%d %H:%M:%S}{extra}{late}{history}")
        if student in result["notes"]:
            out(f"    note: {result['notes'][student]}")
        left_out = result["left_out"].get(student, [])
        for path, why in left_out[:LEFT_OUT_SHOWN]:
            out(f"    left out of {student}'s submission: {shown(path)}: {why}")
        if len(left_out) > LEFT_OUT_SHOWN:
            out(f"    left out of {student}'s submission: {len(left_out) - LEFT_OUT_SHOWN} more files and folders")
    for line in rest:
        out(line)
    _, problems = gradable(course_root, {assignment}, None, set(status))
    for p in problems:
        out(f"  {'NOT GRADED' if not p.graded else 'note'}: {p.student} / {p.assignment}: {p.reason}")
    # a student who submitted is one whose own folder was found, never one named by someone else's folder
    _name_missing(course_root, roster, set(status) | {e.student for e in done.refused if e.owner == e.student}, out)
    if done.refused:
        out(f"{counted(len(done.refused), 'folder')} in the exchange {'was' if len(done.refused) == 1 else 'were'} refused: each stays there, untouched, for you to "
            f"look at; nothing of them was collected, and no submission collected before was replaced by one")
    return done


def refusal_lines(refused, roster=None):
    """(telling, rest): the lines that name the refused entries, the most telling first, so that no flood of other
    entries hides one. ``telling``, printed before anything else: each folder that claims to be a student's of the
    roster (any account's, without one) but someone else owns, by the student it claims, then each student's own
    refused submissions, the latest first, ``REFUSALS_SHOWN_PER_STUDENT`` named for each student and the rest
    counted; ``rest``: the others (names that do not parse, students on no roster), ``REFUSALS_SHOWN_PER_OWNER``
    named for each owner and the rest counted."""
    def claims(student):
        return student in roster if roster else _has_account(student)

    forged, own, other = {}, {}, {}
    for entry in refused:
        if entry.student and entry.owner == entry.student:
            own.setdefault(entry.student, []).append(entry)
        elif entry.student and claims(entry.student):
            forged.setdefault(entry.student, []).append(entry)
        else:
            other.setdefault(entry.owner or "?", []).append(entry)

    def named(groups, most, more):
        lines = []
        for key, entries in sorted(groups.items()):
            entries.sort(key=lambda e: (e.claimed is not None, e.claimed or 0, e.name), reverse=True)
            lines += [f"  REFUSED: {shown(e.name)} (owned by {e.owner or '?'}): {e.problem}; not collected"
                      for e in entries[:most]]
            if len(entries) > most:
                owners = sorted({e.owner or "?" for e in entries[most:]})
                lines.append(f"  REFUSED: {len(entries) - most} more {more.format(key=key)} (owned by "
                             f"{', '.join(owners[:5])}{', ...' if len(owners) > 5 else ''}), not collected")
        return lines
    return (named(forged, REFUSALS_SHOWN_PER_STUDENT, "folders claiming to be {key}'s")
            + named(own, REFUSALS_SHOWN_PER_STUDENT, "folders of {key}'s own"),
            named(other, REFUSALS_SHOWN_PER_OWNER, "folders of {key}'s"))


def _has_account(name):
    import pwd
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _inert_lines(out):
    """``out`` for records built from what students wrote (names, files, fields of a notebook): each one line, every
    control character in it shown escaped (``grader.plain.inert``), so nothing a student wrote moves the cursor,
    retitles the window or starts a line of its own in the instructor's terminal."""
    return lambda line: out(inert(line))


@contextlib.contextmanager
def _quiet(app):
    """nbgrader's log lines of the app off the terminal: ``collect`` prints its own summary of the same things."""
    level = app.log.level
    app.log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        app.log.setLevel(level)


def _roster(course_root):
    if not os.path.exists(os.path.join(course_root, "gradebook.db")):
        return set()
    with gradebook(course_root) as gb:
        return {s.id for s in gb.students}


def _name_missing(course_root, roster, submitted, out):
    """Say who on the roster (``roster``, or the gradebook's students) has not submitted."""
    missing = sorted(set(roster if roster is not None else _roster(course_root)) - submitted)
    if missing:
        out(f"  no submission from {counted(len(missing), 'student')} on the roster: {', '.join(missing)}")


def return_feedback(course_root, assignment, out=print):
    """Release to the exchange the feedback that grading wrote for ``assignment`` (``CourseReleaseFeedback``: each
    notebook's page and nothing else, readable by its student alone), where each student fetches their own. A
    submission graded without its feedback page (nbgrader's own autograde, the formgrader's button) gets it made
    first. Returns the students it was released for."""
    from nbgrader.exchange import ExchangeError as NbgraderExchangeError

    from .classes import CourseReleaseFeedback
    out = _inert_lines(out)
    check_exchange(exchange_root(course_root))
    api = _api(course_root)
    missing = _without_feedback(course_root, assignment)
    for student in missing:
        _ok(api.generate_feedback(assignment, student), f"generate_feedback {assignment} for {student}")
    with temp_attrs(api.coursedir, assignment_id=assignment, student_id="*"):
        app = CourseReleaseFeedback(coursedir=api.coursedir, authenticator=api.authenticator, parent=api)
        try:
            with _quiet(app):
                app.start()
        except NbgraderExchangeError as exc:
            raise ExchangeError(str(exc)) from None
    released, skipped = app.result["released"], app.result["skipped"]
    if not released and not skipped:
        out(f"no feedback to return for {assignment}: nothing has been graded (`course grade {assignment}`)")
        return []
    if released:
        out(f"returned the feedback of {assignment} to {counted(len(released), 'student')}: {', '.join(released)}")
    for student, why in skipped:
        out(f"  not returned: {student}: {why}")
    return released


def _without_feedback(course_root, assignment):
    """The students whose autograded notebook of ``assignment`` has no feedback page, or one older than it."""
    autograded = os.path.join(course_root, "autograded")
    out = []
    for student in sorted(os.listdir(autograded)) if os.path.isdir(autograded) else []:
        folder = os.path.join(autograded, student, assignment)
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            if name.endswith(".ipynb"):
                page = os.path.join(course_root, "feedback", student, assignment, name[:-len(".ipynb")] + ".html")
                if not os.path.exists(page) or os.path.getmtime(page) < os.path.getmtime(os.path.join(folder, name)):
                    out.append(student)
                    break
    return out
