"""The course's late policy (grader/late.py): declared once in late_policy.toml, refused with a sentence when it does
not parse, and applied by nbgrader's own AssignLatePenalties (the plugin the course's nbgrader_config.py names) on a
real SQLite gradebook, from the student's due date with their extension (Gradebook.grant_extension)."""
import datetime
import os
import shutil
import sys

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from grader.late import LatePolicy, PolicyError, parse_policy, read_policy

sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from gradebooks import build_gradebook  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DUE = datetime.datetime(2026, 12, 10, 17, 0)
A = "03_softmax"


def test_each_kind_parses_and_says_what_it_takes():
    assert read_policy("/nonexistent-course") == LatePolicy()  # no file: late work gets full marks
    per_day = parse_policy('kind = "per_day"\npercent = 10\ncap = 30\nclose_after_hours = 120\n')
    assert per_day.penalty(8, 10, 1) == 1.0                    # a day begun costs 10% of the points
    assert per_day.penalty(8, 10, 86400 + 1) == 2.0
    assert per_day.penalty(8, 10, 4 * 86400 + 1) == 3.0  # 5 days begun, 50%, capped at 30%
    assert per_day.penalty(8, 10, 120 * 3600 + 1) == 8             # past the close: no marks
    assert parse_policy('kind = "per_hour"\npercent = 2.5\n').penalty(10, 10, 3 * 3600) == 0.75
    close = parse_policy('kind = "close"\nclose_after_hours = 48\n')
    assert close.penalty(7, 10, 47 * 3600) is None and close.penalty(7, 10, 49 * 3600) == 7
    assert "10% of the notebook's points for each day (24 hours) begun" in per_day.describe()
    assert "5 days" in per_day.describe() and "2 days" in close.describe()
    assert LatePolicy().describe() == "Late work gets full marks: there is no late penalty."


@pytest.mark.parametrize("text, named", [
    ('kind = "weekly"\n', "kind = 'weekly' is not one of"),
    ('kind = "per_day"\n', "needs percent"),
    ('kind = "per_day"\npercent = "10%"\n', "percent = '10%' is not a number"),
    ('kind = "per_day"\npercent = true\n', "percent = True is not a number"),
    ('kind = "per_day"\npercent = nan\n', "percent = nan is not a number"),
    ('kind = "per_day"\npercent = 150\n', "percent = 150 is out of range"),
    ('kind = "per_day"\npercent = 20\ncap = 10\n', "cap = 10 is less than percent = 20"),
    ('kind = "per_day"\nprecent = 10\n', "'precent', which is not a setting"),
    ('kind = "close"\n', "needs close_after_hours"),
    ('kind = "none"\nclose_after_hours = 3\n', "takes no close_after_hours"),
    ('kind = per_day\n', "does not parse as TOML"),
])
def test_a_policy_that_does_not_parse_is_refused_with_a_sentence_naming_it(text, named):
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "/c/late_policy.toml")
    assert named in str(caught.value) and "/c/late_policy.toml" in str(caught.value)


VALUES = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.booleans(), st.text(max_size=8),
                   st.just("per_day"), st.just("close"), st.just("none"), st.just("per_hour"))


@settings(max_examples=150, deadline=None)
@given(pairs=st.dictionaries(st.sampled_from(["kind", "percent", "cap", "close_after_hours", "x", "kind "]), VALUES),
       noise=st.text(max_size=30))
def test_any_policy_file_parses_to_a_policy_or_is_refused_with_a_sentence(pairs, noise):
    """Generated policy files, well formed or not: each gives a LatePolicy whose penalty stays within [0, score], or a
    PolicyError that names the file; never another exception."""
    import json
    lines = [f"{json.dumps(k)} = {repr(v) if isinstance(v, float) else json.dumps(v)}" for k, v in pairs.items()]
    for text in ("\n".join(lines) + "\n", "\n".join(lines) + "\n" + noise):
        try:
            policy = parse_policy(text, "late_policy.toml")
        except PolicyError as exc:
            assert "late_policy.toml" in str(exc)
            continue
        for late in (0, 1, 3600, 86400 * 400):
            got = policy.penalty(7.5, 10, late)
            assert got is None or 0 <= got <= 7.5
        assert policy.describe().endswith(".")


@pytest.fixture
def course(tmp_path):
    """A course folder with the project's nbgrader_config.py and a gradebook: 03_softmax (10 points, due DUE) graded
    8 for alice and bob, who submitted 30 hours after DUE."""
    root = str(tmp_path / "course")
    os.makedirs(root)
    shutil.copy(os.path.join(ROOT, "course", "nbgrader_config.py"), root)
    late = DUE + datetime.timedelta(hours=30)
    build_gradebook(root, {A: {"softmax_basic": 10}}, {"alice": ("", "", "", ""), "bob": ("", "", "", "")},
                    {s: {A: {"softmax_basic": 8}} for s in ("alice", "bob")},
                    submitted={("alice", A): late, ("bob", A): late})
    from coursekit.pipeline import gradebook
    with gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=DUE)
    return root


def _penalise(root, student):
    """nbgrader's AssignLatePenalties as `course grade` runs it (coursekit.pipeline.save_grades: the course's own
    configuration, its plugin); returns the penalty the gradebook holds."""
    from nbgrader.preprocessors import AssignLatePenalties

    from coursekit.pipeline import course_config, gradebook
    resources = {"nbgrader": {"notebook": A, "assignment": A, "student": student,
                              "db_url": "sqlite:///" + os.path.join(root, "gradebook.db")}}
    AssignLatePenalties(config=course_config(root)).preprocess(nbformat.v4.new_notebook(), resources)
    with gradebook(root) as gb:
        return gb.find_submission_notebook(A, A, student).late_submission_penalty


def test_nbgraders_late_penalty_applies_the_courses_policy_from_each_students_own_due_date(course):
    """30 hours late with 10% a day begun: 2 of 10 points; bob's extension of 2 days (nbgrader's grant_extension)
    makes him on time; without a policy file nobody loses a point; past the hard close the whole score goes."""
    assert _penalise(course, "alice") is None  # no policy file: full marks
    with open(os.path.join(course, "late_policy.toml"), "w") as f:
        f.write('kind = "per_day"\npercent = 10\ncap = 50\n')
    from coursekit.pipeline import gradebook
    with gradebook(course) as gb:
        gb.grant_extension(A, "bob", days=2)
    assert _penalise(course, "alice") == 2.0
    assert _penalise(course, "bob") is None
    with open(os.path.join(course, "late_policy.toml"), "w") as f:
        f.write('kind = "close"\nclose_after_hours = 24\n')
    assert _penalise(course, "alice") == 8.0      # nbgrader keeps it at most the score
    with open(os.path.join(course, "late_policy.toml"), "w") as f:
        f.write('kind = "per_day"\npercent = ten\n')
    with pytest.raises(PolicyError, match="does not parse as TOML"):
        _penalise(course, "alice")
