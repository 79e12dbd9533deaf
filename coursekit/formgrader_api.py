"""nbgrader's API as the formgrader reads it, with `course extend`'s rows counted as what they are: no submission.

nbgrader keeps an extension on the student's submission row (``SubmittedAssignment.extension``) and has no other
place for one, so `course extend` for a student who has not submitted makes a row that holds only the extension
(``grader.late.extension_only``: no time of submission, no score in any cell). nbgrader's own views take every row
for a submission: the formgrader's Manage Submissions listed such a student as submitted and autograded with 0
points, and the assignment's and each notebook's average counted them (``Gradebook.average_assignment_score``
divides by every row). ``CourseAPI`` answers as nbgrader answers for a student who has not submitted: the student
is not in ``get_submissions`` (nbgrader lists the students it has rows or submitted folders of), their
``get_submission`` says ``"submitted": False`` (nbgrader's own answer for a missing submission), and the averages and
``num_submissions`` of ``get_assignment`` and ``get_notebooks`` are those of the real submissions. An extension-only
row scores 0 in every cell (nbgrader's ``score`` sums them, none set), so an average over the real submissions is
nbgrader's average times the rows over the real submissions.

Every formgrader handler gets its API from ``nbgrader.server_extensions.formgrader.base.NbGraderAPI``:
``install_course_api`` (run by ``coursekit.hub.formgrader_tab`` when the server loads it) puts ``CourseAPI`` there, and
``coursekit.pipeline.nbgrader_api`` gives it to the ``course`` commands.
"""
from nbgrader.apps import NbGraderAPI

AVERAGES = ("average_score", "average_code_score", "average_written_score", "average_task_score")


def _extension_only_students(gb, assignment_id):
    """The students of ``assignment_id`` whose row holds only `course extend`'s extension; set() without it."""
    from nbgrader.api import MissingEntry

    from grader.late import extension_only
    try:
        assignment = gb.find_assignment(assignment_id)
    except MissingEntry:
        return set()
    return {s.student_id for s in assignment.submissions if extension_only(s)}


def _scaled(record, rows, real):
    """``record``'s averages over ``rows`` rows, as averages over the ``real`` submissions among them (the other rows
    score 0)."""
    for key in AVERAGES:
        if record.get(key) is not None:
            record[key] = record[key] * rows / real if real else 0.0
    return record


class CourseAPI(NbGraderAPI):
    """nbgrader's API without `course extend`'s extension-only rows as submissions (the module says how)."""

    def _waiting(self, assignment_id):
        with self.gradebook as gb:
            return _extension_only_students(gb, assignment_id)

    def get_submissions(self, assignment_id):
        waiting = self._waiting(assignment_id)
        return [s for s in super().get_submissions(assignment_id)
                if not (s["student"] in waiting and s.get("autograded") and s.get("submitted"))]

    def get_submission(self, assignment_id, student_id, ungraded=None, students=None):
        submission = super().get_submission(assignment_id, student_id, ungraded=ungraded, students=students)
        if submission is not None and student_id in self._waiting(assignment_id) and submission.get("autograded"):
            submission.update(submitted=False, autograded=False, id=None, timestamp=None, display_timestamp=None)
        return submission

    def get_assignment(self, assignment_id, released=None):
        assignment = super().get_assignment(assignment_id, released=released)
        if assignment is None:
            return None
        with self.gradebook as gb:
            waiting = _extension_only_students(gb, assignment_id)
            if waiting:
                rows = len(gb.find_assignment(assignment_id).submissions)
                _scaled(assignment, rows, rows - len(waiting))
        return assignment

    def get_notebooks(self, assignment_id):
        notebooks = super().get_notebooks(assignment_id)
        with self.gradebook as gb:
            waiting = _extension_only_students(gb, assignment_id)
            if not waiting:
                return notebooks
            for nb in notebooks:
                if nb.get("id") is None:
                    continue
                rows = nb.get("num_submissions") or 0
                real = max(0, rows - len(waiting))
                _scaled(nb, rows, real)
                nb["num_submissions"] = real
        return notebooks

    def get_notebook_submissions(self, assignment_id, notebook_id):
        waiting = self._waiting(assignment_id)
        return [nb for nb in super().get_notebook_submissions(assignment_id, notebook_id)
                if nb.get("student") not in waiting]


def install_course_api():
    """Every formgrader handler of this server gets ``CourseAPI`` (``BaseHandler.api`` builds its API from the name
    ``NbGraderAPI`` of its module)."""
    import nbgrader.server_extensions.formgrader.base as base
    base.NbGraderAPI = CourseAPI
