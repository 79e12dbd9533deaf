"""One student's due dates in one course, as the student's Assignments tab shows them on the hub.

Each released assignment's due date for ``student`` is nbgrader's (the assignment's, plus the extension `course
extend` granted them, as ``grader.late.lateness_of`` reads it), in the words the feedback page uses
(``Lateness.lines``), with the course's late policy. An assignment counts as released when nbgrader's exchange holds
it (``<exchange>/<course id>/outbound/<assignment>``; without an exchange, the course folder's ``release/``): a
student learns no name of one before the instructor releases it. A student the gradebook does not list gets nothing.

The hub's grading service (root) asks this of one of the course's instructors, the gradebook's owner, in a process of
theirs (``python -P -m coursekit.student_due COURSE STUDENT [EXCHANGE]``, ``coursekit.hub.due_service``): root
opens no file of a course folder. The gradebook is opened read-only through nbgrader's tables (nbgrader's
``Gradebook`` would create what is missing: a write). It prints ``{"course_id": ..., "assignments": [{"assignment_id",
"due", "extension", "lines"}]}`` as JSON.
"""
import json
import os
import sqlite3
import sys
import urllib.parse
import warnings

from grader.late import lateness_of, policy_or_none, utc

from .exchange.course_id import course_id_of


class _ReadOnly:
    """What ``grader.late.lateness_of`` asks of nbgrader's Gradebook, over a read-only session."""

    def __init__(self, session):
        self.session = session

    def find_assignment(self, name):
        from nbgrader.api import Assignment, MissingEntry
        found = self.session.query(Assignment).filter(Assignment.name == name).one_or_none()
        if found is None:
            raise MissingEntry()
        return found

    def find_submission(self, assignment, student):
        from nbgrader.api import Assignment, MissingEntry, SubmittedAssignment
        found = self.session.query(SubmittedAssignment).join(Assignment).filter(
            Assignment.name == assignment, SubmittedAssignment.student_id == student).one_or_none()
        if found is None:
            raise MissingEntry()
        return found


def student_due_dates(root, student, exchange=""):
    """``student``'s due dates in the course folder ``root`` (see the module); ``assignments`` is empty for a student
    the gradebook does not list."""
    from nbgrader.api import Assignment, Student
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SAWarning
    from sqlalchemy.orm import Session
    course_id = course_id_of(root)
    out = {"course_id": course_id, "assignments": []}
    policy = policy_or_none(root)
    uri = "file:" + urllib.parse.quote(os.path.join(root, "gradebook.db")) + "?mode=ro"
    engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(uri, uri=True))
    with warnings.catch_warnings(), Session(engine) as session:
        warnings.simplefilter("ignore", SAWarning)
        if session.query(Student).filter(Student.id == student).one_or_none() is None:
            return out
        gb = _ReadOnly(session)
        for a in sorted(session.query(Assignment).all(), key=lambda a: (a.duedate is None, a.duedate or 0, a.name)):
            released = os.path.join(exchange, course_id, "outbound", a.name) if exchange else \
                os.path.join(root, "release", a.name)
            if not os.path.isdir(released):
                continue
            late = lateness_of(gb, a.name, student)
            out["assignments"].append({
                "assignment_id": a.name, "due": utc(late.due) if late.due else None,
                "extension": bool(late.extension), "lines": late.lines(policy)})
    engine.dispose()
    return out


def main(argv=None):
    args = (argv or sys.argv[1:]) + [""]
    json.dump(student_due_dates(args[0], args[1], args[2]), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
