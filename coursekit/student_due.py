"""One student's due dates in one course, as the student's Assignments tab shows them on the hub.

Each released assignment's due date for ``student`` is nbgrader's (the assignment's, plus the extension `course
extend` granted them: ``grader.late.lateness_of``), in the words the feedback page uses (``Lateness.lines``), with the
course's late policy. An assignment not released (no ``release/<assignment>`` folder) is left out: a student learns
no name of one before the instructor releases it. A student the gradebook does not list gets nothing.

The hub's grading service (root) asks this of the gradebook's owner, the instructor, in a process of theirs
(``python -m coursekit.student_due COURSE STUDENT``, run with their user id): root opens no file of a course folder.
It prints ``{"course_id": ..., "assignments": [{"assignment_id", "due", "extension", "lines"}]}`` as JSON.
"""
import json
import os
import sys
import warnings

from grader.late import lateness_of, policy_or_none, utc

from .exchange.course_id import course_id_of


def student_due_dates(root, student):
    """``student``'s due dates in the course folder ``root`` (see the module); ``assignments`` is empty for a student
    the gradebook does not list."""
    from nbgrader.api import Gradebook, MissingEntry
    from sqlalchemy.exc import SAWarning
    out = {"course_id": course_id_of(root), "assignments": []}
    policy = policy_or_none(root)
    with warnings.catch_warnings(), Gradebook("sqlite:///" + os.path.join(root, "gradebook.db"),
                                              course_id=out["course_id"]) as gb:
        warnings.simplefilter("ignore", SAWarning)
        try:
            gb.find_student(student)
        except MissingEntry:
            return out
        for a in sorted(gb.assignments, key=lambda a: (a.duedate is None, a.duedate or 0, a.name)):
            if not os.path.isdir(os.path.join(root, "release", a.name)):
                continue
            late = lateness_of(gb, a.name, student)
            out["assignments"].append({
                "assignment_id": a.name, "due": utc(late.due) if late.due else None,
                "extension": bool(late.extension), "lines": late.lines(policy)})
    return out


def main(argv=None):
    root, student = (argv or sys.argv[1:])[:2]
    json.dump(student_due_dates(root, student), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
