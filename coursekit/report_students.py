"""Who failed what: one assignment's student x exercise table, for the instructor (`course report`).

A row per student of the gradebook (one who has not handed it in: "no submission" or "not yet due"): their points in
each exercise and question (its graded cells summed), the known mistake the checks named for them in it (the
grader's message in their autograded notebook, as the class report reads it), their total after the late penalty,
and their lateness as the class report reads it from nbgrader's gradebook (``grader.late.lateness_of``): minutes
past their own due date (``SubmittedAssignment.total_seconds_late``, which counts the extension), the extension
itself (``SubmittedAssignment.extension``, what ``Gradebook.grant_extension`` writes) and the late penalty
(``late_submission_penalty``). Nothing here computes lateness a second way.

The pages carry no script (the class report's Content-Security-Policy forbids one), so the table is sorted without
one: ``<assignment>-students.html`` is sorted by student, and ``<assignment>-students-by-<column>.html`` by each
other column, every column's heading a link to the page sorted by it. ``<assignment>-students.csv`` holds the same
rows, each text cell written as the grade export writes one (``coursekit.lms.export.text``: no formula, no control
character). Every link is relative, so the pages work from the file system, and in the lab (the hub's, `course
instructor-lab`) the course's lab plugin opens them (node/hub-lab).
"""
import csv
import html
import math
import os
import re
from dataclasses import dataclass
from urllib.parse import quote

from grader.late import duration, utc

from .class_report import esc, feedback_link, num, one_line_text, out_of, page_html
from .lms.export import text as csv_text
from .words import counted

TABLE_STYLE = ("td.lost{background:#fde8e8} td.late{background:#fff3cd} td.ext{white-space:nowrap} "
               ".why{display:block;font-size:85%;color:#7a1f1f;max-width:22em;white-space:normal;text-align:left} "
               "th a{color:inherit} th.sorted{background:#eef}")
SLUG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
SUBMITTED, NO_SUBMISSION, NOT_YET_DUE = "submitted", "no submission", "not yet due"


@dataclass
class StudentRow:
    student: str
    name: str
    points: dict                                    # {item: points}
    mistakes: dict                                  # {item: [what the checks named]}
    total: float                                    # after the late penalty
    late_minutes: int = 0                           # whole minutes past their own due date, rounded up
    extension: object = None                        # a datetime.timedelta, or None
    due: object = None                              # their due date, extension included (naive UTC), or None
    penalty: float = 0.0
    status: str = SUBMITTED                         # or NO_SUBMISSION, NOT_YET_DUE: a student of the gradebook's


@dataclass
class StudentTable:
    assignment: str
    items: list                                      # exercises and questions, in the notebook's order
    kinds: dict                                      # {item: "exercise" | "question"}
    max_points: dict                                 # {item: points}
    max_total: float
    rows: list                                       # [StudentRow], by student id
    course_root: str = ""


def student_table(report):
    """The table of a ``coursekit.class_report.AssignmentReport``: its points, named mistakes and lateness."""
    named = {}
    for (item, why), students in report.mistake_students.items():
        for s in students:
            named.setdefault((s, item), []).append(why)
    rows = []
    for s in report.students:
        minutes, _, penalty = report.late_columns(s)
        late = report.late.get(s)
        rows.append(StudentRow(s, report.names.get(s, ""),
                               {item: report.scores[item].get(s, 0.0) for item in report.scores},
                               {item: sorted(named.get((s, item), [])) for item in report.scores},
                               report.totals.get(s, 0.0), minutes, late and late.extension, late and late.due, penalty))
    rows += _not_submitted(report)
    return StudentTable(report.assignment, list(report.scores), {i: report.kind(i) for i in report.scores},
                        dict(report.max_points), report.max_total, rows, report.course_root)


def _not_submitted(report):
    """A row for each student of the gradebook with no submission of the assignment (none, or `course extend`'s row
    alone): no points, their extension if they have one, and whether their own due date has passed ("no
    submission", a 0 in the total as the grade export gives it) or not ("not yet due", no total yet)."""
    from grader.late import lateness_of, not_yet_due

    from .pipeline import gradebook
    if not report.course_root or not os.path.isfile(os.path.join(report.course_root, "gradebook.db")):
        return []
    rows, have = [], set(report.students)
    with gradebook(report.course_root) as gb:
        for student in sorted(gb.students, key=lambda s: s.id):
            if student.id in have:
                continue
            late = lateness_of(gb, report.assignment, student.id)
            waiting = not_yet_due(gb, report.assignment, student.id)
            rows.append(StudentRow(student.id, " ".join(p for p in (student.first_name, student.last_name) if p),
                                   {item: 0.0 for item in report.scores}, {item: [] for item in report.scores}, 0.0,
                                   0, late.extension, late.due, 0.0, NOT_YET_DUE if waiting else NO_SUBMISSION))
    return rows


# ------------------------------------------------------------------ the orders
def orders(table):
    """[(key, heading, sort key of a row)]: the student first (the table's own page), then their name, each item and
    the total (fewest points first: who failed comes first), lateness and the extension (most first)."""
    out = [("student", "student", lambda r: r.student),
           ("name", "name", lambda r: (r.name.casefold(), r.student))]
    for i, item in enumerate(table.items):
        share = (lambda item: lambda r: (r.points[item] / (table.max_points[item] or 1), r.student))(item)
        out.append((item if SLUG.fullmatch(item) and item not in ("student", "name", "total", "late", "extension")
                    else f"column{i}", item, share))
    out += [("total", "total", lambda r: (r.total, r.student)),
            ("late", "late (minutes)", lambda r: (-r.late_minutes, r.student)),
            ("extension", "extension", lambda r: (-(r.extension.total_seconds() if r.extension else 0), r.student))]
    return out


def page_name(assignment, key):
    return f"{assignment}-students.html" if key == "student" else f"{assignment}-students-by-{key}.html"


def _href(name):
    return html.escape(quote(name, safe=""))


# ------------------------------------------------------------------ the page
def table_html(table, key, out_dir=None):
    """The page sorted by ``key`` (one of ``orders``); with ``out_dir``, each student's total links to their
    feedback."""
    known = orders(table)
    by = dict((k, f) for k, _, f in known)[key]
    heads = "".join(f'<th class="sorted" aria-sort="{"descending" if k in ("late", "extension") else "ascending"}">'
                    f"{esc(label)} {'▼' if k in ('late', 'extension') else '▲'}</th>" if k == key else
                    f'<th><a href="{_href(page_name(table.assignment, k))}">{esc(label)}</a></th>'
                    for k, label, _ in known)
    rows = []
    for r in sorted(table.rows, key=by):
        link = out_dir and feedback_link(table.course_root, out_dir, r.student, table.assignment)
        cells = [f"<td>{esc(r.student)}</td>", f"<td>{esc(r.name)}</td>"]
        if r.status != SUBMITTED:  # a student of the gradebook's who has not handed it in
            cells += [f'<td class="n{" lost" if r.status == NO_SUBMISSION else ""}">—</td>'] * len(table.items)
            cells.append(f'<td class="n{" lost" if r.status == NO_SUBMISSION else ""}">{esc(r.status)}</td><td></td>')
            cells.append(f'<td class="ext">{esc(duration(r.extension)) if r.extension else ""}'
                         + (f" (due {esc(utc(r.due))})" if r.extension and r.due else "") + "</td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
            continue
        for item in table.items:
            lost = r.points[item] < table.max_points[item]
            why = "".join(f'<span class="why">{esc(m)}</span>' for m in r.mistakes[item])
            cells.append(f'<td class="n{" lost" if lost else ""}">{esc(out_of(r.points[item], table.max_points[item]))}'
                         f"{why}</td>")
        total = esc(out_of(r.total, table.max_total))
        cells.append(f'<td class="n"><a href="{html.escape(link)}">{total}</a></td>' if link else
                     f'<td class="n">{total}</td>')
        cells.append(f'<td class="n{" late" if r.late_minutes else ""}">{r.late_minutes or ""}'
                     + (f" (penalty {esc(num(r.penalty))})" if r.penalty else "") + "</td>")
        cells.append(f'<td class="ext">{esc(duration(r.extension)) if r.extension else ""}'
                     + (f" (due {esc(utc(r.due))})" if r.extension and r.due else "") + "</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    n = sum(r.status == SUBMITTED for r in table.rows)
    missing = len(table.rows) - n
    without = f", {missing} without" if missing else ""
    body = f"""<p><a href="index.html">class overview</a> ·
<a href="{_href(table.assignment + '.html')}">{esc(table.assignment)}'s report</a> ·
<a href="{_href(table.assignment + '-students.csv')}">this table as CSV</a></p>
<h1>{esc(table.assignment)}: who failed what ({counted(n, 'submission')}{without})</h1>
<p>Each column's heading sorts the table by it (points: fewest first; lateness and extensions: most first). A shaded
score lost points; under it, the known mistake the checks named. Late: whole minutes past the student's own due date
(their extension included), as nbgrader's gradebook counts them. Each total links to the student's feedback. A
student of the gradebook who has not handed it in is listed with "no submission" (0, as the grade export gives it)
or, while their own due date has not passed, "not yet due".</p>
<table><tr>{heads}</tr>{"".join(rows) or f'<tr><td colspan={len(known)}>no submission</td></tr>'}</table>"""
    return page_html(f"{table.assignment}: who failed what", body, TABLE_STYLE)


def table_rows_csv(table):
    """The CSV's rows: a header (each text cell as the grade export writes one), the points of each item, then a
    row per student in the order of the student id. Numbers are written as numbers (``num``: 1.5, 2)."""
    header = ["student", "name", *table.items, *(f"{item}: mistake" for item in table.items),
              "total", "of", "late minutes", "late penalty", "extension minutes", "due", "status"]
    rows = [[csv_text(h) for h in header],
            ["", "points of", *(num(table.max_points[i]) for i in table.items), *([""] * len(table.items)),
             "", num(table.max_total), "", "", "", "", ""]]
    for r in table.rows:
        done = r.status == SUBMITTED
        rows.append([csv_text(r.student), csv_text(r.name), *(num(r.points[i]) if done else "" for i in table.items),
                     *(csv_text("; ".join(r.mistakes[i])) for i in table.items),
                     num(r.total) if r.status != NOT_YET_DUE else "", num(table.max_total),
                     r.late_minutes if done else "", num(r.penalty) if done else "",
                     math.ceil(r.extension.total_seconds() / 60) if r.extension else "",
                     utc(r.due) if r.extension and r.due else "", r.status])
    return rows


def write_student_table(table, out_dir):
    """Every order's page and the CSV of ``table`` in ``out_dir``; returns (the page by student, the CSV)."""
    os.makedirs(out_dir, exist_ok=True)
    for key, _, _ in orders(table):
        with open(os.path.join(out_dir, page_name(table.assignment, key)), "w") as f:
            f.write(table_html(table, key, out_dir))
    csv_path = os.path.join(out_dir, table.assignment + "-students.csv")
    with open(csv_path, "w", newline="") as f:
        csv.writer(f).writerows(table_rows_csv(table))
    return os.path.join(out_dir, page_name(table.assignment, "student")), csv_path


def summary_line(table):
    """The terminal's line about the table: its size, and who was late."""
    late = [r for r in table.rows if r.late_minutes]
    missing = [r for r in table.rows if r.status != SUBMITTED]
    return (f"  who failed what: {counted(len(table.rows) - len(missing), 'submission')} x "
            f"{counted(len(table.items), 'item')}"
            + (f", {counted(len(missing), 'student')} without one" if missing else "") + "; "
            f"{counted(len(late), 'late submission')}"
            + (": " + ", ".join(f"{one_line_text(r.student)} ({r.late_minutes} min)" for r in late[:10])
               + (f", and {len(late) - 10} more" if len(late) > 10 else "") if late else ""))


def who_failed_what(report, out_dir, shown=os.path.relpath):
    """`course report`'s part: ``report``'s table written in ``out_dir``; returns what it prints (``summary_line`` and
    the files, each path as ``shown`` gives it)."""
    table = student_table(report)
    page, csv_path = write_student_table(table, out_dir)
    return f"{summary_line(table)}\n  -> {shown(page)} (and a page per order), {shown(csv_path)}"
