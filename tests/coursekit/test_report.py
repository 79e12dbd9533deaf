"""`course report` at class scale: scores out of their totals, integer histograms with labelled axes, questions among
the most failed, aligned terminal tables for long names, the class overview across assignments linking each score to
its feedback, who made each named mistake; and nothing a submission or the gradebook supplies is live markup in the
report's pages or a control sequence in the terminal.

The class is a real nbgrader gradebook, built through nbgrader's Gradebook API (no grading run: the pipeline tests
grade real classes and run the report on them), with autograded notebooks whose graded cells carry the grader's
messages, a grading log and feedback pages, as grading leaves them.
"""
import contextlib
import io
import json
import os
import re
import sqlite3
import warnings
from collections import Counter
from html.parser import HTMLParser
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from sqlalchemy.exc import SAWarning

from coursekit.cli import main
from coursekit.class_report import (CSP, assignment_report, class_overview, histogram_figure, overview_table, one_line_text, as_table,
                              _width)

EVIL = '<img src=x onerror="window.pwned=1">'                  # a student id that is markup
LONG = "a-student-id-that-runs-on-and-on-for-sixty-characters-xyzw"
LONG_NAME = ("Maximiliane-Theodora", "Featherstonehaugh-Wolfeschlegelstein-Xy")  # 60 characters with the space
NAME_PAYLOAD = ("\x1b[31mRed\x1b[0m", "<script>window.pwned=2</script>")
MISTAKE_TEXT = "<b onmouseover=window.pwned=4>no division</b> by sqrt(d_k)\x1b[2J"
FAULT = "<svg onload=window.pwned=3></svg> \x1b]0;owned\x07\x1b[31mfork bomb\x1b[0m"

A, B = "03_softmax", "02_dot_products"
CELLS = {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2,
             "answer_temperature_top_probability_basic": 1, "answer_why_log_probabilities_basic": 1},
         B: {"scaled_scores_basic": 1, "answer_why_scale_basic": 1}}
# {student: {assignment: {grade cell: score}}}; bob submitted only 03_softmax
SCORES = {
    "alice": {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2,
                  "answer_temperature_top_probability_basic": 0, "answer_why_log_probabilities_basic": 1},
              B: {"scaled_scores_basic": 1, "answer_why_scale_basic": 1}},
    "bob": {A: {"softmax_basic": 0, "softmax_edge": 1, "log_softmax_basic": 2,
                "answer_temperature_top_probability_basic": 0, "answer_why_log_probabilities_basic": 1}},
    EVIL: {A: {"softmax_basic": 0, "softmax_edge": 0, "log_softmax_basic": 2,
               "answer_temperature_top_probability_basic": 0, "answer_why_log_probabilities_basic": 0},
           B: {"scaled_scores_basic": 0, "answer_why_scale_basic": 1}},
    LONG: {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 1.5,
               "answer_temperature_top_probability_basic": 0, "answer_why_log_probabilities_basic": 1},
           B: {"scaled_scores_basic": 1, "answer_why_scale_basic": 0}},
}
MADE_THE_MISTAKE = ["bob", EVIL]  # the softmax mistake the grader named


def stamp_alembic_head(path):
    """What nbgrader's Gradebook writes first into a new database, its schema's alembic revision, found here in this
    process: nbgrader runs `alembic heads` in a subprocess for it (8 s on a busy machine, 0.6 s here)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR
    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)")
        db.execute("INSERT INTO alembic_version (version_num) VALUES (?)",
                   (ScriptDirectory.from_config(config).get_current_head(),))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A graded class of four in a course folder: gradebook, autograded notebooks, grading log, some feedback."""
    from nbgrader.api import Gradebook
    root = str(tmp_path_factory.mktemp("report-course"))
    db = os.path.join(root, "gradebook.db")
    stamp_alembic_head(db)
    with warnings.catch_warnings(), Gradebook("sqlite:///" + db, course_id="attention-course") as gb:
        warnings.simplefilter("ignore", SAWarning)  # add_submission's own autoflush notes; nothing is lost
        for a, cells in CELLS.items():
            gb.add_assignment(a)
            gb.add_notebook(a, a)
            for cell, points in cells.items():
                gb.add_grade_cell(cell, a, a, max_score=points, cell_type="code")
        gb.add_student("alice", first_name="Alice", last_name="Smith")
        gb.add_student("bob", first_name="Bob", last_name="Jones")
        gb.add_student(EVIL, first_name=NAME_PAYLOAD[0], last_name=NAME_PAYLOAD[1])
        gb.add_student(LONG, first_name=LONG_NAME[0], last_name=LONG_NAME[1])
        for student, by_assignment in SCORES.items():
            for a, scores in by_assignment.items():
                gb.add_submission(a, student)
                for cell, score in scores.items():
                    gb.find_grade(cell, a, a, student).auto_score = score
                gb.db.commit()
    for student, by_assignment in SCORES.items():
        for a, scores in by_assignment.items():  # the autograded notebook: the grader's verdict in each graded cell
            nb = nbformat.v4.new_notebook()
            for cell, score in scores.items():
                text = "PASSED\n" if score == CELLS[a][cell] else "wrong\n"
                if student in MADE_THE_MISTAKE and cell == "softmax_basic":
                    text = f"softmax: this looks like a known mistake: {MISTAKE_TEXT}.\n"
                nb.cells.append(nbformat.v4.new_code_cell("check(...)", metadata={"nbgrader": {
                    "grade": True, "grade_id": cell, "points": CELLS[a][cell], "solution": False}},
                    outputs=[nbformat.v4.new_output("stream", name="stdout", text=text)]))
            os.makedirs(os.path.join(root, "autograded", student, a))
            nbformat.write(nb, os.path.join(root, "autograded", student, a, a + ".ipynb"))
            if student != "alice" or a != B:  # alice's 02_dot_products feedback is not generated yet
                os.makedirs(os.path.join(root, "feedback", student, a))
                with open(os.path.join(root, "feedback", student, a, a + ".html"), "w") as f:
                    f.write(f"feedback of {student} on {a}")
    with open(os.path.join(root, "grading_log.jsonl"), "w") as f:
        f.write(json.dumps({"student": EVIL, "assignment": A, "faults": [["processes", FAULT]]}) + "\n")
    return root


@pytest.fixture(scope="module")
def cli(course):
    """`course report --course <folder>` (in this process; the pipeline tests run the command itself): what it
    printed and the report folder."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["report", "--course", course])
    assert code == 0, out.getvalue()
    return out.getvalue(), os.path.join(course, "report")


def total(student, a):
    return sum(SCORES[student][a].values())


def test_scores_are_out_of_their_totals_per_item_and_per_assignment(course, cli):
    report = assignment_report(course, A)
    assert report.max_total == sum(CELLS[A].values()) == 7
    assert report.totals == {s: total(s, A) for s in SCORES}
    assert report.max_points == {"softmax": 3, "log_softmax": 2, "answer_temperature_top_probability": 1,
                                 "answer_why_log_probabilities": 1}
    table = as_table(report)
    mean = sum(total(s, A) for s in SCORES) / len(SCORES)
    assert f"class mean {round(mean, 2):g} / 7" in table
    softmax_mean = sum(SCORES[s][A]["softmax_basic"] + SCORES[s][A]["softmax_edge"] for s in SCORES) / len(SCORES)
    assert re.search(rf"softmax\s+exercise\s+{round(softmax_mean, 2):g} / 3\s", table), table
    page = open(os.path.join(cli[1], A + ".html")).read()
    assert f"{round(softmax_mean, 2):g} / 3" in page
    for student in SCORES:
        assert f"{total(student, A):g} / 7" in page


def test_histograms_count_students_in_integers_with_labelled_axes(course):
    report = assignment_report(course, A)
    fig = histogram_figure(report)
    assert len(fig.axes) == len(report.scores)
    for ax, item in zip(fig.axes, report.scores):
        low, high = ax.get_ylim()
        ticks = [t for t in ax.get_yticks() if low <= t <= high]
        assert len(ticks) >= 2 and all(t == int(t) for t in ticks), (item, ticks)
        assert ax.get_ylabel() == "students" and ax.get_xlabel().startswith("points"), item
        heights = {p.get_x(): p.get_height() for p in ax.patches}
        assert sorted(h for h in heights.values() if h) == sorted(Counter(report.scores[item].values()).values())


def test_questions_count_among_the_most_failed(course):
    report = assignment_report(course, A)
    hardest = report.most_failed()
    failed = {item: report.failed_by(item) for item in report.scores if report.failed_by(item)}
    assert set(hardest) == set(failed)  # both questions and every exercise anyone failed
    assert hardest[0] == "answer_temperature_top_probability" and report.kind(hardest[0]) == "question"
    assert failed[hardest[0]] == len(SCORES)
    assert [failed[item] for item in hardest] == sorted(failed.values(), reverse=True)
    assert "answer_why_log_probabilities" in hardest


def test_the_terminal_tables_stay_aligned_for_long_names(cli):
    out = cli[0]
    lines = out.splitlines()
    items = lines[lines.index(next(l for l in lines if l.startswith(A + ":"))) + 1:][:5]  # header and four items
    assert len({_width(line) for line in items}) == 1, "\n".join(items)  # the last column is aligned right
    start = lines.index(next(l for l in lines if l.startswith("class overview:")))
    overview = lines[start + 1:start + 2 + len(SCORES)]
    assert len({_width(line) for line in overview}) == 1, "\n".join(overview)
    question = "answer_temperature_top_probability"
    assert len(question) == 34 and question[:31] + "…" in items[-2]  # cut to the column's 32
    assert len(LONG) > 32 and LONG[:31] + "…" in out and LONG not in out
    name = " ".join(LONG_NAME)
    assert len(name) == 60 and name[:23] + "…" in out and LONG_NAME[1] not in out  # the names' column is 24 wide


def test_the_class_overview_links_every_score_to_the_students_feedback(course, cli):
    out, report_dir = cli
    overview = class_overview(course)
    assert overview.assignments == sorted(CELLS) and overview.students == sorted(SCORES)
    parsed = Page(open(os.path.join(report_dir, "index.html")).read())
    rows = {row[0]: row for row in parsed.rows[1:]}
    assert parsed.rows[0] == ["student", "name", B, A, "total"]
    assert set(rows) == set(SCORES)
    for student in SCORES:
        for column, a in ((2, B), (3, A)):
            if a in SCORES[student]:
                assert rows[student][column] == f"{total(student, a):g} / {sum(CELLS[a].values())}"
            else:
                assert rows[student][column] == "no submission"
        grand = sum(total(student, a) for a in SCORES[student])
        assert rows[student][4] == f"{grand:g} / 9"
    assert [h for h in parsed.hrefs if "/" not in h] == [B + ".html", A + ".html"]  # each assignment's report
    targets = {os.path.normpath(os.path.join(report_dir, unquote(href))) for href in parsed.hrefs if "/" in href}
    expected = {os.path.join(course, "feedback", s, a, a + ".html") for s in SCORES for a in SCORES[s]
                if (s, a) != ("alice", B)}  # alice's feedback of 02 does not exist yet: no link
    assert targets == expected and all(os.path.isfile(t) for t in targets)
    assert f"{total('alice', A):g} / 7" in overview_table(overview)
    assert re.search(r"bob\s+Bob Jones\s+—\s+" + f"{total('bob', A):g} / 7", out), out


def test_the_instructor_sees_who_made_each_named_mistake(course, cli):
    report = assignment_report(course, A)
    (key, students), = report.mistake_students.items()
    assert key[0] == "softmax" and students == sorted(MADE_THE_MISTAKE) and report.mistakes[key] == 2
    page = Page(open(os.path.join(cli[1], A + ".html")).read())
    row = next(r for r in page.rows if r[0] == "softmax" and len(r) == 4 and r[2] == "2")
    assert "bob (Bob Jones)" in row[3] and EVIL in row[3]
    assert re.search(r"mistake softmax: .*\(2 students: " + re.escape(", ".join(sorted(MADE_THE_MISTAKE))),
                     " ".join(cli[0].split()))


class Page(HTMLParser):
    """A page's tables as text, its links, and everything that could run: scripts, handlers, URLs with a scheme."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.rows, self.hrefs, self.live, self.csp, self.text = [], [], [], [], []
        self._cell = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag in ("script", "iframe", "object", "embed", "svg", "base", "form", "link"):
            self.live.append(tag)
        self.live += [f"{tag} {k}" for k in attrs if k.startswith("on")]
        for k in ("href", "src", "action", "formaction", "xlink:href"):
            url = attrs.get(k)
            if url is not None and urlsplit(url).scheme and not url.startswith("data:image/png;base64,"):
                self.live.append(f"{tag} {k}={url}")
        if "href" in attrs:
            self.hrefs.append(attrs["href"])
        if tag == "meta" and attrs.get("http-equiv", "").lower() == "content-security-policy":
            self.csp.append(attrs.get("content"))
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def test_nothing_from_a_submission_or_the_gradebook_is_live_in_the_report(cli):
    out, report_dir = cli
    pages = sorted(os.listdir(report_dir))
    assert {"index.html", A + ".html", B + ".html"} <= set(pages)
    for name in (p for p in pages if p.endswith(".html")):
        raw = open(os.path.join(report_dir, name)).read()
        page = Page(raw)
        assert page.live == [], (name, page.live)
        assert page.csp == [CSP] and CSP.startswith("default-src 'none'; img-src data:; style-src 'unsafe-inline';")
        assert "script-src" not in CSP, CSP  # scripts fall under default-src 'none'
        assert "\x1b" not in raw and "\x07" not in raw, name
        text = "".join(page.text)
        assert EVIL in text and NAME_PAYLOAD[1] in text, name  # shown as text, escaped in the markup
        assert EVIL not in raw and NAME_PAYLOAD[1] not in raw, name
    page = "".join(Page(open(os.path.join(report_dir, A + ".html")).read()).text)
    assert one_line_text(FAULT) in page and "<svg onload=window.pwned=3></svg>" in page
    assert "<b onmouseover=window.pwned=4>no division</b>" in page
    for csv_name in (p for p in pages if p.endswith(".csv")):
        assert "\x1b" not in open(os.path.join(report_dir, csv_name)).read()
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), repr(out[:2000])  # no control character at all
    # a fault's text shown as one inert line: its escape sequences visible, none acting
    assert "processes: <svg onload=window.pwned=3></svg> \\x1b]0;owned\\x07\\x1b[31mfork bomb" in out


@pytest.mark.browser
def test_the_report_pages_run_no_payload_in_a_browser(cli):
    """Debian's Chromium opens every page of the report: no payload sets its flag, and each is shown as text."""
    from playwright.sync_api import sync_playwright

    from browser import CHROMIUM, CHROMIUM_ARGS
    report_dir = cli[1]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            for name in ("index.html", A + ".html"):
                page.goto("file://" + os.path.join(report_dir, name))
                page.wait_for_timeout(300)
                assert page.evaluate("window.pwned") is None, name
                body = page.inner_text("body")
                assert EVIL in body and NAME_PAYLOAD[1] in body, name
                assert page.locator("img").count() == (1 if name != "index.html" else 0)
        finally:
            browser.close()


def test_an_assignment_the_gradebook_does_not_hold_is_named_with_those_it_does(course, tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["report", "--course", course, "--out", str(tmp_path), A, "04_masks"])
    assert code == 2 and f"no assignment 04_masks in the gradebook of {course}; it has: {B}, {A}" in out.getvalue()
    assert os.listdir(tmp_path) == []  # nothing half-written
