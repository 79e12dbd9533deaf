"""One total after the late penalty, everywhere (``grader.late.submission_total``): the report, the who-failed-what
table, the class overview and the LMS export agree after a failed grading (the penalty is reset with the scores),
after a score raised in the formgrader past the hard close (still 0), and after the due date moved (`course late`
works every penalty out again without grading); a student whose own due date has not passed gets no 0 in the
export (a blank cell, "not yet due"). A real SQLite gradebook (tests/gradebooks.py); about 20 s on 2 shared cores."""
import datetime
import os
import shutil
import sys

from coursekit.cli import main

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from gradebooks import build_gradebook  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A = "03_softmax"
NOW = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, second=0, microsecond=0)


def _course(root, due, policy):
    """bob graded 8 of 10, submitted 30 hours after ``due``; alice and carol have not submitted."""
    os.makedirs(root)
    shutil.copy(os.path.join(ROOT, "course", "nbgrader_config.py"), root)
    build_gradebook(root, {A: {"softmax_basic": 10}},
                    {s: (s.title(), "X", "", "") for s in ("alice", "bob", "carol")},
                    {"bob": {A: {"softmax_basic": 8}}}, submitted={("bob", A): due + datetime.timedelta(hours=30)})
    from coursekit.pipeline import gradebook
    with gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=due)
    with open(os.path.join(root, "late_policy.toml"), "w") as f:
        f.write(policy)
    return root


def _totals(root):
    """bob's total as each reader shows it: the report, the who-failed-what table, the overview, the export."""
    from coursekit.class_report import assignment_report, class_overview
    from coursekit.lms.export import read_grades
    from coursekit.pipeline import gradebook
    from coursekit.report_students import student_table
    report = assignment_report(root, A)
    table = {r.student: r.total for r in student_table(report).rows}
    with gradebook(root) as gb:
        export = read_grades(gb, [A]).score("bob", A)
    return {report.totals["bob"], table["bob"], class_overview(root, [A]).scores[("bob", A)], export}


def _penalty(root):
    from coursekit.pipeline import gradebook
    with gradebook(root) as gb:
        return gb.find_submission_notebook(A, A, "bob").late_submission_penalty


def test_a_failed_grading_resets_the_penalty_and_every_reader_says_0(tmp_path, capsys):
    from coursekit.pipeline import save_grades
    root = _course(str(tmp_path / "c"), NOW - datetime.timedelta(days=5), 'kind = "per_day"\npercent = 10\n')
    assert main(["late", "--course", root, A]) == 0
    assert _penalty(root) == 2.0 and _totals(root) == {6.0}
    db_url = "sqlite:///" + os.path.join(root, "gradebook.db")
    save_grades(None, {"nbgrader": {"db_url": db_url, "notebook": A, "assignment": A, "student": "bob"}})
    assert _penalty(root) is None and _totals(root) == {0.0}


def test_the_hard_close_holds_on_the_score_the_formgrader_raised(tmp_path, capsys):
    from coursekit.class_report import assignment_report
    from coursekit.pipeline import gradebook
    root = _course(str(tmp_path / "c"), NOW - datetime.timedelta(days=5), 'kind = "close"\nclose_after_hours = 24\n')
    assert main(["late", "--course", root, A]) == 0
    assert _penalty(root) == 8.0 and _totals(root) == {0.0}
    with gradebook(root) as gb:  # the instructor's manual score, as the formgrader writes it
        gb.find_grade("softmax_basic", A, A, "bob").manual_score = 10
        gb.db.commit()
    assert _totals(root) == {0.0}
    assert assignment_report(root, A).late_columns("bob")[2] == 10.0  # what was taken is the whole score now


def test_course_late_works_the_penalties_out_again_after_the_due_date_moved(tmp_path, capsys):
    from coursekit.class_report import as_table, assignment_report
    from coursekit.pipeline import gradebook
    due = NOW - datetime.timedelta(days=5)
    root = _course(str(tmp_path / "c"), due, 'kind = "per_day"\npercent = 10\n')
    assert main(["late", "--course", root, A]) == 0
    said = capsys.readouterr().out
    assert "late penalties worked out again for 1 graded submission" in said
    assert "bob's graded 03_softmax: late penalty 2 points" in said and _totals(root) == {6.0}
    assert assignment_report(root, A).stale == []
    with gradebook(root) as gb:  # the due date moved a day and a half later: bob is on time
        gb.update_or_create_assignment(A, duedate=due + datetime.timedelta(hours=36))
    report = assignment_report(root, A)  # lateness is read live, the penalty is grading's: the report says so
    assert report.stale == ["bob"] and "run `course late 03_softmax`" in as_table(report)
    assert main(["late", "--course", root, A]) == 0
    assert "late penalty 0 points (was 2)" in capsys.readouterr().out
    assert _penalty(root) is None and _totals(root) == {8.0} and assignment_report(root, A).stale == []
    assert main(["late", "--course", root, "nope"]) == 2
    assert "no assignment 'nope'" in capsys.readouterr().err


def test_a_student_whose_own_due_date_is_to_come_gets_no_0(tmp_path, capsys):
    """The assignment was due 5 days ago; alice's extension runs 3 days more, carol has none: carol's missing
    submission scores 0, alice's cell is blank and named "not yet due" (and AGS posts nothing for her:
    tests/hub/test_lms_not_yet_due.py)."""
    from coursekit.lms.export import generic_rows, read_grades, summary
    from coursekit.pipeline import gradebook
    root = _course(str(tmp_path / "c"), NOW - datetime.timedelta(days=5), 'kind = "none"\n')
    assert main(["extend", "--course", root, A, "alice", "--by", str(8 * 24)]) == 0
    with gradebook(root) as gb:
        grades = read_grades(gb, [A])
    assert grades.score("alice", A) is None and grades.score("carol", A) == 0.0 and grades.score("bob", A) == 8.0
    rows = {row[0]: row[5] for row in list(generic_rows(grades))[1:]}
    assert rows == {"alice": "", "bob": "8", "carol": "0"}
    text = "\n".join(summary(grades, "generic", "out.csv"))
    assert "1 of 3 submitted (1 without a submission score 0)" in text
    assert "not yet due (their own due date, extension included, has not passed), left blank: alice" in text
