"""AGS posts no 0 for a student whose own due date has not passed (coursekit/lms/ags.py): the assignment was due
yesterday, eve has no submission and an extension that runs two days more, so nothing is posted for her and the
result names her "not yet due"; the others are posted as before. The LTI 1.3 test platform of test_lms_ags.py, over
HTTP on 127.0.0.1; about 3 s in the suite (20 s alone on 2 shared cores, most of it imports)."""
import datetime

from test_lms_ags import A, CELLS, DUE, LATE, SCORES, STUDENTS, SUBMITTED, credentials, lms, tool_key  # noqa: F401
from gradebooks import build_gradebook

from coursekit.lms.ags import post_assignment
from coursekit.lms.export import read_grades
from coursekit.pipeline import gradebook


def test_no_0_is_posted_before_the_students_own_due_date(lms, tool_key, tmp_path):  # noqa: F811
    root = str(tmp_path)
    build_gradebook(root, CELLS, STUDENTS, SCORES, LATE, submitted=SUBMITTED)
    with gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=DUE.replace(tzinfo=None))
        gb.update_or_create_submission(A, "eve")  # what `course extend` writes for a student yet to submit
        gb.grant_extension(A, "eve", days=3)
        grades = read_grades(gb, [A])
    assert grades.score("eve", A) is None
    result = post_assignment(grades, A, lms.lineitems_url("course-1"), credentials(lms, tool_key),
                             str(tmp_path / "log"))
    assert "sub-eve" not in {score["userId"] for score in lms.scores}
    assert result.not_posted == {"eve": "not yet due: no submission, and their due date has not passed"}
    assert "not posted eve: not yet due" in "\n".join(result.lines())
    assert set(result.posted) == {s for s in SCORES if STUDENTS[s][3]}
    assert datetime.datetime.now(datetime.timezone.utc) > DUE  # the assignment's own date has passed
