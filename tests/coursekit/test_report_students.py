"""Who failed what (coursekit/report_students.py): `course report`'s student x exercise table per assignment holds
the gradebook's numbers (each exercise's points, the total after the late penalty, minutes late past the student's
own due date, the extension nbgrader's ``grant_extension`` wrote), names the known mistake the checks named for that
student in that exercise, sorts by every column on a page of its own (no script: the pages forbid one), links only
relatively, and writes the same rows as CSV whose text cells a spreadsheet does not run.

The class is a real nbgrader gradebook (``tests/gradebooks.py``) with autograded notebooks carrying the grader's
messages, as ``tests/coursekit/test_report.py`` builds one; the hostile names are also drawn by hypothesis and put
through the page and the CSV in memory. Cost, measured while the full suite ran beside it (load 12 on 2 cores):
7 s for the class and `course report` on it, 5 s for the other tests, 1 s of them for the 25 drawn classes. The
report's links in the lab: tests/hub/test_report_links.py."""
import contextlib
import csv
import datetime
import html
import io
import math
import os
import re
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coursekit.cli import main
from coursekit.class_report import CSP, one_line_text
from coursekit.lms.export import FORMULA_START, text as csv_text
from coursekit.report_students import StudentRow, StudentTable, orders, page_name, table_html, table_rows_csv
from gradebooks import build_gradebook
from test_report import Page

A = "03_softmax"
CELLS = {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2,
             "answer_temperature_top_probability_basic": 1}}
ITEMS = ["softmax", "log_softmax", "answer_temperature_top_probability"]
EVIL = '<img src=x onerror="window.pwned=1">'
FORMULA_NAME = ("=HYPERLINK(\"http://evil.example\",\"x\")", "<script>window.pwned=2</script>\x1b[31m")
MISTAKE = "-inf filled after the softmax <b onmouseover=window.pwned=3>rows</b>"  # starts like a formula
DUE = datetime.datetime(2026, 12, 1, 17, 0)
STUDENTS = {"ada": ("Ada", "Lovelace", "", ""), "bob": ("Bob", "Jones", "", ""), "cy": ("Cy", "Young", "", ""),
            "dee": ("Dee", "Dee", "", ""), EVIL: (*FORMULA_NAME, "", "")}
POINTS = {"ada": (2, 1, 2, 1), "bob": (0, 1, 2, 0), "cy": (2, 0, 1.5, 1), "dee": (2, 1, 2, 1), EVIL: (0, 0, 2, 0)}
SUBMITTED = {"ada": DUE - datetime.timedelta(hours=2),
             "bob": DUE + datetime.timedelta(minutes=95, seconds=10),  # late, no extension: 96 minutes
             "cy": DUE + datetime.timedelta(days=1),                     # within a 2-day extension: not late
             "dee": DUE + datetime.timedelta(hours=3),                   # 1-hour extension: 120 minutes late
             EVIL: DUE - datetime.timedelta(minutes=1)}
EXTENSIONS = {"cy": {"days": 2}, "dee": {"hours": 1}}
PENALTY = {("bob", A): 1.0}
MADE_THE_MISTAKE = {"bob", EVIL}  # in softmax


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The class graded, with the assignment's due date, two extensions (nbgrader's grant_extension) and a late
    penalty, and `course report` run on it; returns (course folder, what it printed)."""
    from nbgrader.api import Gradebook
    root = str(tmp_path_factory.mktemp("who-failed-what"))
    scores = {s: {A: dict(zip(CELLS[A], p))} for s, p in POINTS.items()}
    db = build_gradebook(root, CELLS, STUDENTS, scores, late=PENALTY,
                         submitted={(s, A): t for s, t in SUBMITTED.items()})
    with Gradebook("sqlite:///" + db) as gb:
        gb.update_or_create_assignment(A, duedate=DUE)
        for s, by in EXTENSIONS.items():
            gb.grant_extension(A, s, **by)
    for s, p in POINTS.items():  # the autograded notebooks: the grader's verdict in each graded cell
        nb = nbformat.v4.new_notebook()
        for (cell, points), got in zip(CELLS[A].items(), p):
            said = "PASSED\n" if got == points else "wrong\n"
            if s in MADE_THE_MISTAKE and cell == "softmax_basic":
                said = f"softmax: this looks like a known mistake: {MISTAKE}.\n"
            nb.cells.append(nbformat.v4.new_code_cell("check(...)", metadata={"nbgrader": {
                "grade": True, "grade_id": cell, "points": points, "solution": False}},
                outputs=[nbformat.v4.new_output("stream", name="stdout", text=said)]))
        os.makedirs(os.path.join(root, "autograded", s, A))
        nbformat.write(nb, os.path.join(root, "autograded", s, A, A + ".ipynb"))
        if s != "dee":  # dee's feedback is not generated yet: no link
            os.makedirs(os.path.join(root, "feedback", s, A))
            with open(os.path.join(root, "feedback", s, A, A + ".html"), "w") as f:
                f.write(f"<!DOCTYPE html><title>feedback</title><p>feedback of {html.escape(s)}</p>")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--course", root]) == 0, out.getvalue()
    return root, out.getvalue()


def from_gradebook(root):
    """{student: ({item: points}, total after the penalty, minutes late, extension minutes or None)}, read here
    through nbgrader's API on its own."""
    from nbgrader.api import Gradebook
    out = {}
    with Gradebook("sqlite:///" + os.path.join(root, "gradebook.db")) as gb:
        for sub in gb.assignment_submissions(A):
            points = {}
            for g in gb.find_submission_notebook(A, A, sub.student_id).grades:
                item = g.name.rsplit("_", 1)[0]
                points[item] = points.get(item, 0.0) + g.score
            out[sub.student_id] = (points, sub.score - (sub.late_submission_penalty or 0.0),
                                   math.ceil(sub.total_seconds_late / 60),
                                   None if sub.extension is None else sub.extension.total_seconds() / 60)
    return out


def test_the_table_and_its_csv_hold_the_gradebooks_numbers(course):
    root, printed = course
    truth = from_gradebook(root)
    assert {s: v[2] for s, v in truth.items()} == {"ada": 0, "bob": 96, "cy": 0, "dee": 120, EVIL: 0}
    assert {s: v[3] for s, v in truth.items() if v[3]} == {"cy": 2 * 24 * 60, "dee": 60}
    report = os.path.join(root, "report")
    page = Page(open(os.path.join(report, page_name(A, "student"))).read())
    assert [h.rstrip(" ▲") for h in page.rows[0][:2 + len(ITEMS)]] == ["student", "name", *ITEMS]
    rows = {r[0]: r for r in page.rows[1:]}
    assert set(rows) == set(STUDENTS)
    with open(os.path.join(report, A + "-students.csv"), newline="") as f:
        table = list(csv.reader(f))
    header, maxima, lines = table[0], table[1], {r[0]: r for r in table[2:]}
    assert header[:2 + len(ITEMS)] == ["student", "name", *ITEMS] and maxima[2:5] == ["3", "2", "1"]
    for s, (points, total, late, extension) in truth.items():
        row, line = rows[s], lines[csv_text(s)]
        for i, item in enumerate(ITEMS):
            maximum = {"softmax": 3, "log_softmax": 2, "answer_temperature_top_probability": 1}[item]
            assert row[2 + i].startswith(f"{points[item]:g} / {maximum}"), (s, item, row)
            assert float(line[2 + i]) == points[item], (s, item, line)
        assert row[2 + len(ITEMS)] == f"{total:g} / 6" and float(line[header.index("total")]) == total
        assert row[3 + len(ITEMS)].split(" ")[0] == (str(late) if late else "")
        assert int(line[header.index("late minutes")]) == late
        assert line[header.index("extension minutes")] == ("" if extension is None else f"{math.ceil(extension)}")
    assert "(penalty 1)" in rows["bob"][3 + len(ITEMS)] and float(lines["bob"][header.index("late penalty")]) == 1.0
    assert rows["cy"][4 + len(ITEMS)] == "2 days (due 2026-12-03 17:00 UTC)"
    assert rows["dee"][4 + len(ITEMS)] == "1 hour (due 2026-12-01 18:00 UTC)"
    assert "who failed what: 5 submissions x 3 items; 2 late submissions: bob (96 min), dee (120 min)" in printed


def test_the_mistake_named_for_a_student_is_in_their_cell(course):
    root, _ = course
    page = Page(open(os.path.join(root, "report", page_name(A, "student"))).read())
    rows = {r[0]: r for r in page.rows[1:]}
    for s in STUDENTS:
        assert (one_line_text(MISTAKE) in rows[s][2]) == (s in MADE_THE_MISTAKE), (s, rows[s][2])
        assert MISTAKE not in rows[s][3] and MISTAKE not in rows[s][4]
    with open(os.path.join(root, "report", A + "-students.csv"), newline="") as f:
        table = list(csv.reader(f))
    column = table[0].index("softmax: mistake")
    named = {r[0]: r[column] for r in table[2:]}
    assert named[csv_text(EVIL)] == "'" + one_line_text(MISTAKE)  # a formula's start, written as text
    assert named["ada"] == ""


def test_the_assignments_own_csv_writes_a_formula_as_text_too(course):
    """The class report's CSV beside the table (``coursekit.class_report.write_report``) by the same rule."""
    root, _ = course
    with open(os.path.join(root, "report", A + ".csv"), newline="") as f:
        rows = list(csv.reader(f))
    name = next(r[3] for r in rows if r[0] == "student" and r[2] == "name" and r[1] == csv_text(EVIL))
    assert name == "'" + one_line_text(" ".join(FORMULA_NAME)) and name.startswith("'=HYPERLINK")
    assert all(not cell.startswith(FORMULA_START) for r in rows for cell in r), rows


def test_every_column_sorts_on_a_page_of_its_own_linked_from_its_heading(course):
    root, _ = course
    report = os.path.join(root, "report")
    truth = from_gradebook(root)
    want = {"student": sorted(STUDENTS),
            "total": sorted(STUDENTS, key=lambda s: (truth[s][1], s)),
            "late": sorted(STUDENTS, key=lambda s: (-truth[s][2], s)),
            "softmax": sorted(STUDENTS, key=lambda s: (truth[s][0]["softmax"], s))}
    keys = [key for key, _, _ in orders_of(root)]
    for key in keys:
        raw = open(os.path.join(report, page_name(A, key))).read()
        page = Page(raw)
        assert page.live == [] and page.csp == [CSP], (key, page.live)
        assert EVIL not in raw and FORMULA_NAME[1].split("\x1b")[0] not in raw
        order = [r[0] for r in page.rows[1:]]
        if key in want:
            assert order == want[key], key
        headings = page.rows[0]
        assert sum(h.endswith(("▲", "▼")) for h in headings) == 1, headings  # the page's own order, not a link
        links = [h for h in page.hrefs if h.startswith(A + "-students")]
        assert sorted(unquote(h) for h in links if h.endswith(".html")) == sorted(
            page_name(A, k) for k in keys if k != key)
        for href in page.hrefs:  # relative, and to a file that is there
            assert not urlsplit(href).scheme and not href.startswith("/"), href
            assert os.path.isfile(os.path.normpath(os.path.join(report, unquote(href)))), href
    feedback = [h for h in Page(open(os.path.join(report, page_name(A, "student"))).read()).hrefs if "feedback" in h]
    assert len(feedback) == len(STUDENTS) - 1  # dee's is not generated yet
    assert any(A + "-students.html" == h for h in Page(open(os.path.join(report, A + ".html")).read()).hrefs)


def orders_of(root):
    from coursekit.class_report import assignment_report
    from coursekit.report_students import student_table
    return orders(student_table(assignment_report(root, A)))


def test_a_class_of_one_is_one_student(tmp_path):
    build_gradebook(str(tmp_path), CELLS, {"ada": STUDENTS["ada"]}, {"ada": {A: dict(zip(CELLS[A], POINTS["ada"]))}})
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--course", str(tmp_path)]) == 0
    assert f"{A}: 1 student, class mean" in out.getvalue() and "1 students" not in out.getvalue()
    assert "who failed what: 1 submission x 3 items; 0 late submissions" in out.getvalue()
    assert "who failed what (1 submission)" in open(tmp_path / "report" / page_name(A, "student")).read()


HOSTILE = st.text(alphabet=st.sampled_from(list("<>&\"'=+-@/\\;, aZé\t\r\n\x1b\x07\u202e\u200b\x00"))
                  | st.characters(), min_size=1, max_size=24)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids=st.lists(HOSTILE, min_size=1, max_size=4, unique=True), names=st.lists(HOSTILE, min_size=4, max_size=4),
       item=HOSTILE, why=HOSTILE)
def test_drawn_names_are_text_in_every_page_and_inert_in_the_csv(ids, names, item, why):
    rows = [StudentRow(s, names[i], {item: 0.5 * i}, {item: [why] if i % 2 == 0 else []}, 0.5 * i, 3 * i,
                       datetime.timedelta(hours=i) if i else None, DUE + datetime.timedelta(hours=i), 0.0)
            for i, s in enumerate(ids)]
    table = StudentTable(A, [item], {item: "exercise"}, {item: 2.0}, 2.0, rows)
    for key, _, _ in orders(table):
        page = Page(table_html(table, key))
        assert page.live == [] and page.csp == [CSP], page.live
        text = "".join(page.text)
        assert all(one_line_text(s) in text for s in ids) and all(one_line_text(n) in text for n in names[:len(ids)])
        assert one_line_text(why) in text and one_line_text(item) in text
        assert all(not urlsplit(h).scheme and not h.startswith("/") for h in page.hrefs), page.hrefs
        if key != "student":
            assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", key), key  # a file name of its own, whatever the item
    buf = io.StringIO()
    csv.writer(buf).writerows(table_rows_csv(table))
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", buf.getvalue())
    read = list(csv.reader(io.StringIO(buf.getvalue())))
    for line in read:
        for cell in line:
            assert not cell.startswith(FORMULA_START), line  # "'" first where a formula would start
    assert [line[0] for line in read[2:]] == [csv_text(s) for s in ids]
    assert [line[1] for line in read[2:]] == [csv_text(n) for n in names[:len(ids)]]



def test_a_student_who_has_not_handed_it_in_is_a_row_no_submission_or_not_yet_due(tmp_path):
    """The gradebook's students without a submission are rows too: "no submission" (0 in the total, as the grade
    export gives it) once their own due date has passed, "not yet due" (no total) while an extension runs."""
    from coursekit.extend import extend
    from coursekit.pipeline import gradebook
    root = str(tmp_path)
    build_gradebook(root, CELLS, {"ada": STUDENTS["ada"], "bob": STUDENTS["bob"], "cy": STUDENTS["cy"]},
                    {"ada": {A: dict(zip(CELLS[A], POINTS["ada"]))}})
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    with gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=now - datetime.timedelta(hours=1))
    extend(root, A, ["cy"], hours="48", out=lambda line: None)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", "--course", root]) == 0
    assert "who failed what: 1 submission x 3 items, 2 students without one; 0 late submissions" in out.getvalue()
    page = Page(open(os.path.join(root, "report", page_name(A, "student"))).read())
    rows = {r[0]: r for r in page.rows[1:]}
    assert rows["ada"][2 + len(ITEMS)] == "6 / 6"
    assert rows["bob"][2:3 + len(ITEMS)] == ["—"] * len(ITEMS) + ["no submission"]
    assert rows["cy"][2 + len(ITEMS)] == "not yet due" and rows["cy"][4 + len(ITEMS)].startswith("2 days (due ")
    with open(os.path.join(root, "report", A + "-students.csv"), newline="") as f:
        table = list(csv.reader(f))
    header, lines = table[0], {r[0]: r for r in table[2:]}
    status, total = header.index("status"), header.index("total")
    assert [(s, lines[s][status], lines[s][total]) for s in ("ada", "bob", "cy")] == [
        ("ada", "submitted", "6"), ("bob", "no submission", "0"), ("cy", "not yet due", "")]
    assert lines["bob"][2:2 + len(ITEMS)] == [""] * len(ITEMS)
