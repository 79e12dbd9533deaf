"""`course extend` as an instructor runs it, on a real SQLite gradebook through nbgrader's own extension
(Gradebook.grant_extension): the student's due date moves, everything that computes lateness reads it (the late
penalty, `course collect`, the feedback, the class report, the LMS export), and every bad input is refused with a
sentence that names it while the gradebook stays as it was."""
import datetime
import hashlib
import os
import shutil
import sqlite3
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coursekit.cli import main

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from gradebooks import build_gradebook  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A = "03_softmax"
NOW = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, second=0, microsecond=0)
DUE = NOW + datetime.timedelta(days=3)


def _course(root, due=DUE):
    """A course folder (the project's nbgrader_config.py) whose gradebook has 03_softmax (10 points, due ``due``),
    alice (no submission yet) and bob (graded 8, submitted 30 hours after ``due``), and 04_masks without a due date."""
    os.makedirs(root)
    shutil.copy(os.path.join(ROOT, "course", "nbgrader_config.py"), root)
    build_gradebook(root, {A: {"softmax_basic": 10}, "04_masks": {"mask_basic": 2}},
                    {"alice": ("Alice", "A", "", ""), "bob": ("Bob", "B", "", "")}, {"bob": {A: {"softmax_basic": 8}}},
                    submitted={("bob", A): due + datetime.timedelta(hours=30)})
    from coursekit.pipeline import gradebook
    with gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=due)
    return root


@pytest.fixture
def course(tmp_path):
    return _course(str(tmp_path / "course"))


def _rows(root):
    """The whole gradebook as SQL, to compare before and after."""
    with sqlite3.connect(os.path.join(root, "gradebook.db")) as db:
        return hashlib.sha256("\n".join(db.iterdump()).encode()).hexdigest()


def _extend(root, *args, capsys=None):
    code = main(["extend", "--course", root, *args])
    said = capsys.readouterr() if capsys else None
    return code, said


def test_an_extension_moves_the_students_due_date_everywhere_lateness_is_read(course, capsys):
    """Alice (no submission yet) and bob (graded, 30 hours late): `course extend --by 48` gives both nbgrader's
    extension; bob's late penalty under the course's policy is worked out again (2 points, then none); the report
    shows his minutes late and extension; the export counts alice as no submission and bob's score after the
    penalty; collect's due dates are each student's own."""
    from coursekit.class_report import as_table, assignment_report, class_overview
    from coursekit.extend import due_dates
    from coursekit.lms.export import read_grades
    from coursekit.pipeline import gradebook
    with open(os.path.join(course, "late_policy.toml"), "w") as f:
        f.write('kind = "per_day"\npercent = 10\ncap = 50\n')
    assert _extend(course, A, "bob", "--by", "1", capsys=capsys)[0] == 0   # still 29 hours late: 2 days begun
    with gradebook(course) as gb:
        assert gb.find_submission_notebook(A, A, "bob").late_submission_penalty == 2.0
    code, said = _extend(course, A, "alice", "bob", "--by", "48", capsys=capsys)
    assert code == 0, said
    assert f"{A}: alice due {DUE + datetime.timedelta(hours=48):%Y-%m-%d %H:%M} UTC" in said.out
    assert "bob's graded 03_softmax: late penalty 0 points (was 2)" in said.out
    with gradebook(course) as gb:
        assert gb.find_submission(A, "alice").extension == datetime.timedelta(hours=48)
        assert gb.find_submission(A, "bob").total_seconds_late == 0
        grades = read_grades(gb, [A])
    assert grades.submitted("bob", A) and not grades.submitted("alice", A)   # alice's row holds only an extension
    assert grades.score("bob", A) == 8.0 and ("alice", A) not in grades.submitted_at
    report = assignment_report(course, A)
    assert report.students == ["bob"] and report.late_columns("bob") == (0, "2 days", 0.0)
    assert ("alice", A) not in class_overview(course, [A]).scores
    due, own = due_dates(course, A)
    assert due == DUE and own == {s: DUE + datetime.timedelta(hours=48) for s in ("alice", "bob")}
    # a smaller extension: bob is late again, and the report and the export say so
    assert _extend(course, A, "bob", "--until", f"{DUE + datetime.timedelta(hours=6):%Y-%m-%dT%H:%M}+00:00",
                   capsys=capsys)[0] == 0
    report = assignment_report(course, A)
    assert report.late_columns("bob") == (24 * 60, "6 hours", 1.0)
    assert "late     bob: 1440 minutes past their due date (extension 6 hours), penalty 1" in as_table(report)
    with gradebook(course) as gb:
        assert read_grades(gb, [A]).score("bob", A) == 7.0
    code, said = _extend(course, A, "alice", "--remove", capsys=capsys)
    assert code == 0 and "alice has no extension" in said.out
    assert due_dates(course, A)[1] == {"bob": DUE + datetime.timedelta(hours=6)}
    with gradebook(course) as gb:  # her row held the extension alone: gone with it, as before `course extend`
        assert [s.student_id for s in gb.find_assignment(A).submissions] == ["bob"]


def test_the_formgrader_counts_an_extension_alone_as_no_submission(course, capsys):
    """nbgrader's API as the formgrader's handlers get it (``coursekit.formgrader_api.install_course_api`` gives them
    ``CourseAPI``; ``coursekit.pipeline.nbgrader_api`` the same): alice, given an extension before she submitted, is
    not among the submissions, her submission says "submitted": False as nbgrader's does for a missing one, and the
    assignment's and the notebook's averages and counts are bob's alone."""
    import nbgrader.server_extensions.formgrader.base as base

    from coursekit.formgrader_api import CourseAPI, install_course_api
    from coursekit.pipeline import nbgrader_api
    os.makedirs(os.path.join(course, "source", A))
    assert _extend(course, A, "alice", "--by", "48", capsys=capsys)[0] == 0
    api = nbgrader_api(course)
    assert isinstance(api, CourseAPI)
    assert [s["student"] for s in api.get_submissions(A)] == ["bob"]
    alice = api.get_submission(A, "alice")
    assert alice["submitted"] is False and alice["autograded"] is False
    assert {s["name"]: s["submitted"] for s in api.get_student_submissions("alice")}[A] is False
    assert api.get_assignment(A)["average_score"] == 8.0
    (notebook,) = api.get_notebooks(A)
    assert notebook["average_score"] == 8.0 and notebook["num_submissions"] == 1
    assert "alice" not in [nb.get("student") for nb in api.get_notebook_submissions(A, A)]
    original = base.NbGraderAPI
    try:
        install_course_api()
        assert base.NbGraderAPI is CourseAPI
        assert [s["student"] for s in _formgrader_answer(course, A)] == ["bob"]
    finally:
        base.NbGraderAPI = original


def _formgrader_answer(root, assignment):
    """What the formgrader's ``GET /formgrader/api/submissions/<assignment>`` answers (its handler's own code, past
    its login and XSRF checks), its API built as every formgrader handler builds it (``BaseHandler.api``)."""
    import inspect
    import json
    import logging

    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.server_extensions.formgrader import apihandlers, base
    from traitlets.config import LoggingConfigurable
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()

    class App(LoggingConfigurable):
        def load_config_file(self):
            pass

    class Handler:
        log = logging.getLogger("formgrader")
        coursedir = CourseDirectory(config=config, root=root, parent=App(config=config))
        authenticator = Authenticator(config=config)
        api = property(base.BaseHandler.api.fget)
        answer = None

        def write(self, text):
            self.answer = json.loads(text)

    handler = Handler()
    inspect.unwrap(apihandlers.SubmissionCollectionHandler.get)(handler, assignment)
    return handler.answer


IDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12).filter(
    lambda s: s not in ("alice", "bob") and not s.startswith("-"))
DATES = st.one_of(
    st.text(max_size=25),
    st.datetimes(min_value=datetime.datetime(1, 1, 2), max_value=NOW).map(lambda d: d.isoformat(sep=" ")),
    st.sampled_from(["2026-02-30 10:00", "tomorrow", "", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00+23:59",
                     f"{DUE:%Y-%m-%d %H:%M}", f"{DUE + datetime.timedelta(days=400):%Y-%m-%d}", "NaN", "1e9"]))
HOURS = st.one_of(st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e300", "9000", "", "48h", "٣"]),
                  st.text(max_size=8))


@pytest.mark.parametrize("args, named", [
    (["nope", "alice", "--by", "3"], "no assignment 'nope' in the gradebook"),
    (["04_masks", "alice", "--by", "3"], "04_masks has no due date"),
    ([A, "zed", "alice", "carol", "--by", "3"], "no student 'zed', 'carol' in the gradebook"),
    ([A, "alice", "--until", "2020-01-01 10:00"], "is in the past"),
    ([A, "alice", "--until", "tomorrow"], "the date 'tomorrow' does not parse"),
    ([A, "alice", "--by", "-2"], "a positive number of hours"),
    ([A, "alice", "--by", "two"], "not a number of hours"),
    ([A, "alice", "--by", "1e-300"], "less than a minute: an extension is at least one minute"),
    ([A, "alice", "--by", "0.00001"], "less than a minute"),
    ([A, "alice", "--until", f"{DUE + datetime.timedelta(days=2):%Y-%m-%d}"], "has no time: write one, as"),
    ([A, "alice", "--until", f"{DUE + datetime.timedelta(seconds=30):%Y-%m-%dT%H:%M:%S}"], "is not a minute after"),
    ([A, "bob", "alice", "--remove"], "nothing"),
    ([A, "alice", "--by", "2", "policy"], "late_policy.toml: kind = 'weekly' is not one of"),
])
def test_bad_input_is_refused_with_a_sentence_naming_it_and_nothing_changes(course, capsys, args, named):
    """Each refused with exit 2 and a sentence naming it; `--remove` for students without an extension (bob's row
    has none, alice has no row) is no refusal, and changes nothing either: no row is made."""
    if named == "nothing":
        before = _rows(course)
        code, said = _extend(course, *args, capsys=capsys)
        assert code == 0 and "alice has no extension" in said.out and _rows(course) == before, said
        return
    if args[-1] == "policy":
        args = args[:-1]
        with open(os.path.join(course, "late_policy.toml"), "w") as f:
            f.write('kind = "weekly"\n')
    before = _rows(course)
    code, said = _extend(course, *args, capsys=capsys)
    assert code == 2 and named in said.err and said.err.startswith("course extend: "), said
    assert _rows(course) == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(assignment=st.one_of(st.just(A), IDS), students=st.lists(st.one_of(st.just("alice"), IDS), min_size=1,
                                                                  max_size=3),
       until=st.one_of(st.none(), DATES), hours=HOURS)
def test_generated_bad_input_is_refused_with_a_sentence_and_the_gradebook_stays_as_it_was(course, capsys, assignment,
                                                                                        students, until, hours):
    """An unknown assignment or student, a date that does not parse, is in the past, is not after the due date or
    is more than a year past it, hours that are not a positive number: exit 2, one sentence that names the input,
    the gradebook's rows unchanged."""
    bad_people = assignment != A or any(s != "alice" for s in students)
    option = [f"--until={until}"] if until is not None else [f"--by={hours}"]  # a value may start with "-"
    before = _rows(course)
    code, said = _extend(course, assignment, *students, *option, capsys=capsys)
    if code == 0:  # only a good request may pass: then it changed alice's due date and nothing else
        assert not bad_people
        return
    assert code == 2, said
    assert said.err.startswith("course extend: ") and said.err.count("\n") == 1, said.err
    assert _rows(course) == before
    if assignment != A:
        assert "no assignment" in said.err
    elif bad_people:
        assert "no student" in said.err
    else:
        assert any(why in said.err for why in ("does not parse", "is in the past", "is not a minute after",
                                               "more than a year", "positive number of hours", "less than a minute",
                                               "not a number of hours", "out of range", "has no time")), \
            said.err


@pytest.mark.pipeline
def test_the_release_and_the_feedback_tell_the_student_their_due_date_and_the_late_policy(tmp_path, monkeypatch,
                                                                                           capsys):
    """`course release` puts due_date.md (the due date, the policy in words) beside the notebook, and refuses a
    policy that does not parse before anything is released; after `course extend`, the student's feedback page
    (nbgrader's generate_feedback with the course's LatenessNote) names their own due date, their extension, how
    late they were and the policy, and the score after the penalty."""
    import nbformat

    from coursekit.exchange import commands as exchange
    from coursekit.pipeline import CourseCopy, gradebook
    a = "01_tokens"
    cc = CourseCopy(str(tmp_path / "course"))
    monkeypatch.setenv("COURSE_EXCHANGE", str(tmp_path / "exchange"))
    policy = os.path.join(cc.root, "late_policy.toml")
    with open(policy, "w") as f:
        f.write('kind = "per_day"\npercent = 10\n')
    with pytest.raises(exchange.ExchangeError, match="does not parse as TOML"):
        with open(policy, "a") as f:
            f.write("cap = \n")
        exchange.release(cc.root, a)
    assert not os.path.exists(os.path.join(cc.root, "release")) and not os.path.exists(tmp_path / "exchange")
    with open(policy, "w") as f:
        f.write('kind = "per_day"\npercent = 10\ncap = 50\n')
    cc.generate_release(a)
    with gradebook(cc.root) as gb:
        gb.update_or_create_assignment(a, duedate=DUE)
        gb.update_or_create_student("alice")
        gb.update_or_create_submission(a, "alice", timestamp=DUE + datetime.timedelta(hours=30))
    exchange.release(cc.root, a)
    note = open(tmp_path / "exchange" / "attention-course" / "outbound" / a / "due_date.md").read()
    assert f"Due: **{DUE:%Y-%m-%d %H:%M} UTC**" in note and "10% of the notebook's points for each day" in note
    # alice's notebook graded, written as `course grade` writes what a worker sends back (write_graded: the
    # gradebook row by save_grades with the course's plugin, 30 hours late; the worker's page, made without a
    # gradebook, made again here)
    from coursekit.grading.client import write_graded
    from grader.graded import Graded
    release = nbformat.read(cc.release_path(a), as_version=4)
    graded = Graded("alice", a, ok=True, autograded={f"{a}.ipynb": nbformat.writes(release).encode()},
                    feedback={f"{a}.html": b"<p>the worker's page</p>"})
    write_graded(cc.root, {"student": "alice", "assignment": a,
                           "timestamp": f"{DUE + datetime.timedelta(hours=30)} UTC"}, graded)
    page = open(cc.feedback_path("alice", a)).read()
    assert "the worker's page" not in page and "1 day 6 hours late" in page and "(Score: -" in page, page[-3000:]
    with gradebook(cc.root) as gb:
        nb = gb.find_submission_notebook(a, a, "alice")
        full, penalty, most = nb.score, nb.late_submission_penalty, nb.max_score
    assert penalty == pytest.approx(0.2 * most)
    assert main(["extend", "--course", cc.root, a, "alice", "--by", "24"]) == 0
    said = capsys.readouterr().out
    assert "late penalty" in said and "feedback page made again" in said, said
    page = open(cc.feedback_path("alice", a)).read()
    assert f"with your extension of 1 day (the assignment&#39;s: {DUE:%Y-%m-%d %H:%M} UTC)" in page, page[-3000:]
    assert "6 hours late" in page and "Late policy: Late work loses 10%" in page
    with gradebook(cc.root) as gb:
        assert gb.find_submission_notebook(a, a, "alice").late_submission_penalty == pytest.approx(0.1 * most)
    assert f"(Score: {round(full - 0.1 * most, 2)}" in page
    # collect counts from each student's own due date: this account's submission, a minute old, two days late
    import pwd
    me = pwd.getpwuid(os.getuid()).pw_name
    # times from now, not from the module's import: on a busy machine minutes may have passed since
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)
    with gradebook(cc.root) as gb:
        gb.update_or_create_assignment(a, duedate=now - datetime.timedelta(days=2))
        gb.update_or_create_student(me)
    if os.getuid() == 0:  # the course folder's group holds no student (collect refuses one that does)
        import grp
        os.chown(cc.root, -1, grp.getgrnam("nogroup").gr_gid)
    stamp = now - datetime.timedelta(minutes=1)
    inbox = tmp_path / "exchange" / "attention-course" / "inbound" / f"{me}+{a}+{stamp:%Y-%m-%d %H:%M:%S.%f} UTC"
    inbox.mkdir()
    nbformat.write(release, str(inbox / f"{a}.ipynb"))
    lines = []
    exchange.collect(cc.root, a, out=lines.append)
    mine = [line for line in lines if line.lstrip().startswith(me + " ")]
    assert len(mine) == 1 and "; LATE by 1 day 23 hours 59 minutes" in mine[0] and "extended" not in mine[0], lines
    assert main(["extend", "--course", cc.root, a, me, "--by", "72"]) == 0
    lines = []
    exchange.collect(cc.root, a, out=lines.append)
    mine = [line for line in lines if line.lstrip().startswith(me + " ")]
    assert "LATE" not in mine[0] and f"(extended to {now + datetime.timedelta(days=1):%Y-%m-%d %H:%M} UTC)" in mine[0]
