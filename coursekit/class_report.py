"""The class report: what a graded class did, per assignment and across them, for the instructor.

``course report`` reads what grading left in the course folder (the gradebook, the autograded notebooks,
``grading_log.jsonl``, ``feedback/``) and writes into ``report/``:

* ``<assignment>.html`` and a CSV beside it: each exercise's and question's scores (mean as x / total) with their
  distribution, the items most students failed (exercises and questions alike), the known mistakes the checks named
  with the students who made each, the submissions flagged for a person (tampering, crashes, time-outs), and each
  student's score (x / total) linked to their feedback;
* ``index.html``: the class overview, a student x assignment table of scores (x / total), each cell linking to that
  student's feedback page.

It prints the same as tables in the terminal, with columns as wide as their data (long names are cut with an
ellipsis, so the columns stay aligned).

Everything here that a submission or the gradebook supplies (student ids and names, messages, fault texts) is
untrusted: in the HTML it is escaped, and the pages carry no script at all and a Content-Security-Policy that
forbids one; in the terminal its control characters (ANSI escape sequences included) are removed.
"""
import base64
import csv
import html
import io
import math
import os
import re
import textwrap
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import quote

import nbformat

from grader.plain import inert
from grader.untrusted import CSP  # the feedback pages' policy: no script, nothing from outside

from .pipeline import gradebook  # noqa: F401
from .lms.export import text as csv_text
from .words import counted
MISTAKE = re.compile(r"(?:looks like a known mistake|matches a known mistake): (.+?)\.?$", re.M)
STYLE = ("body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;margin-bottom:1.5em} "
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top} "
         "td.n{text-align:right;white-space:nowrap} .missing{color:#999}")
MOST_FAILED = 10   # items listed under "most failed"
NAME_COLUMN = 32   # terminal columns at most for a student id, a name or an exercise; longer ones end in an ellipsis
ASSIGNMENT_COLUMN = 12  # terminal columns at most for an assignment's name over the overview's column of scores

# ------------------------------------------------------------------ untrusted text
def one_line_text(text):
    """``text`` safe to print in a terminal, a page or a CSV cell on one line (``grader.plain.inert``: every control
    character, a newline and a tab too, shown escaped)."""
    return inert(text)


def esc(text):
    """``text`` as inert HTML text (attribute-safe too)."""
    return html.escape(one_line_text(text), quote=True)


def _width(text):
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def fit_columns(text, width, right=False):
    """``text`` (made plain) in exactly ``width`` terminal columns: padded, or cut short with an ellipsis."""
    text = one_line_text(text)
    if _width(text) > width:
        kept, used = [], 0
        for ch in text:
            if used + _width(ch) > width - 1:
                break
            kept.append(ch)
            used += _width(ch)
        text = "".join(kept) + "…"
    pad = " " * (width - _width(text))
    return pad + text if right else text + pad


def text_table(header, rows, right=(), caps=()):
    """Lines of an aligned table: each column as wide as its widest entry, at most ``caps[i]`` columns for column i
    (default ``NAME_COLUMN``; None: no cap), wider entries cut with an ellipsis; the columns whose index is in
    ``right`` are aligned right."""
    cells = [[one_line_text(c) for c in row] for row in [header, *rows]]
    caps = list(caps) + [NAME_COLUMN] * (len(header) - len(caps))
    widths = [max(_width(row[i]) for row in cells) for i in range(len(header))]
    widths = [w if cap is None else min(cap, w) for w, cap in zip(widths, caps)]
    return ["  ".join(fit_columns(c, w, i in right) for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in cells]


def num(x):
    return f"{round(x, 2):g}"


def out_of(score, total):
    return f"{num(score)} / {num(total)}"


def feedback_link(course_root, out_dir, student, assignment):
    """The relative URL from ``out_dir`` to ``student``'s feedback page of ``assignment``, or None when there is none
    yet. Every path part is percent-encoded, so a student id can make neither markup nor another scheme."""
    page = os.path.join(course_root, "feedback", student, assignment, assignment + ".html")
    if not os.path.isfile(page):
        return None
    return "/".join(quote(part, safe="") for part in os.path.relpath(page, out_dir).split(os.sep))


def page_html(title, body, style=""):
    """A report page: ``body`` (made inert by its maker) under the feedback pages' policy, with ``style`` added; marked
    as the class report's, whose links the course's lab plugin opens in the lab on a hub (``node/hub-lab``)."""
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP)}">'
            f'<meta name="referrer" content="no-referrer"><meta name="course-report" content="">'  # node/hub-lab
            f"<title>{esc(title)}</title><style>{STYLE}{style}</style></head><body>\n{body}\n</body></html>\n")


def _score_cell(score, total, href):
    text = esc(out_of(score, total))
    return f'<td class="n"><a href="{html.escape(href)}">{text}</a></td>' if href else f'<td class="n">{text}</td>'


def _names(gb):
    return {s.id: " ".join(p for p in (s.first_name, s.last_name) if p) for s in gb.students}


# ------------------------------------------------------------------ one assignment
@dataclass
class AssignmentReport:
    assignment: str
    students: list                                       # student ids, sorted
    scores: dict                                         # {item: {student: score}}; an item is an exercise or question
    max_points: dict                                     # {item: points}
    questions: frozenset = frozenset()                   # the items that are self-check questions
    names: dict = field(default_factory=dict)            # {student: name in the gradebook}
    mistakes: Counter = field(default_factory=Counter)   # {(item, explanation): students}
    mistake_students: dict = field(default_factory=dict)  # {(item, explanation): [students]}
    flagged: list = field(default_factory=list)          # [(student, kind, reason)]
    seeds: dict = field(default_factory=dict)            # {student: the seed of their hidden cases}
    totals: dict = field(default_factory=dict)           # {student: total score}
    max_total: float = 0.0                               # the assignment's points
    course_root: str = ""
    late: dict = field(default_factory=dict)             # {student: grader.late.Lateness}, nbgrader's due date
    penalties: dict = field(default_factory=dict)        # {student: late penalty taken from the total}
    stale: list = field(default_factory=list)            # students whose penalty the gradebook's dates now change

    def late_columns(self, student):
        """(minutes late past the student's own due date, their extension in words or "", the late penalty)."""
        from grader.late import duration
        lateness = self.late.get(student)
        if lateness is None:
            return 0, "", 0.0
        return (math.ceil(lateness.seconds_late / 60), duration(lateness.extension) if lateness.extension else "",
                self.penalties.get(student, 0.0))

    def kind(self, item):
        return "question" if item in self.questions else "exercise"

    def failed_students(self, item):
        """The students who did not get every point of ``item``."""
        return [s for s, score in self.scores[item].items() if score < self.max_points[item]]

    def failed_by(self, item):
        """How many students did not get every point of ``item``."""
        return len(self.failed_students(item))

    def mean(self, item):
        scores = list(self.scores[item].values())
        return sum(scores) / len(scores) if scores else 0.0

    def rows(self):
        """One row per item: item, kind, points, mean, students with every point, students who failed."""
        return [(item, self.kind(item), self.max_points[item], round(self.mean(item), 2),
                 len(self.scores[item]) - self.failed_by(item), self.failed_by(item)) for item in self.scores]

    def most_failed(self, n=MOST_FAILED):
        """The items (exercises and questions alike) that most students failed, those nobody failed left out: by
        students who failed, then by the smaller share of the points the class got."""
        order = {item: i for i, item in enumerate(self.scores)}
        failed = [item for item in self.scores if self.failed_by(item)]
        share = {item: self.mean(item) / self.max_points[item] if self.max_points[item] else 1.0 for item in failed}
        return sorted(failed, key=lambda item: (-self.failed_by(item), share[item], order[item]))[:n]

    def class_mean(self):
        return sum(self.totals.values()) / len(self.totals) if self.totals else 0.0


def _stale(policy, notebook):
    """True when the penalty nbgrader's ``AssignLatePenalties`` wrote for ``notebook`` (a ``SubmittedNotebook``) is
    not the one the course's ``policy`` gives it now (a due date, an extension or the policy changed since): `course
    late` works it out again. nbgrader keeps a penalty between 0 and the score."""
    score = float(notebook.score or 0.0)
    now = min(score, max(0.0, policy.penalty(score, notebook.max_score or 0.0,
                                             notebook.assignment.total_seconds_late) or 0.0))
    return abs(now - float(notebook.late_submission_penalty or 0.0)) > 1e-6


def assignment_report(course_root, assignment):
    """The report of ``assignment`` from the gradebook, the autograded notebooks and the grading log."""
    from nbgrader.api import MissingEntry

    from learner.syllabus import NOTEBOOKS
    from grader.seeds import recorded
    from grader.late import extension_only, lateness_of, policy_or_none, submission_total
    policy = policy_or_none(course_root)
    scores, max_points, students, totals, max_total = defaultdict(dict), {}, [], {}, 0.0
    late, penalties, stale = {}, {}, []
    with gradebook(course_root) as gb:
        names = _names(gb)
        for student in sorted(names):
            try:
                sub = gb.find_submission_notebook(assignment, assignment, student)
            except MissingEntry:
                continue
            if extension_only(sub.assignment):  # `course extend` before they submitted: no submission yet
                continue
            students.append(student)
            late[student] = lateness_of(gb, assignment, student)
            per_item, per_max = defaultdict(float), defaultdict(float)
            for g in sub.grades:
                item = g.name.rsplit("_", 1)[0]
                per_item[item] += g.score or 0.0
                per_max[item] += g.max_score or 0.0
            max_points.update(per_max)
            for item, score in per_item.items():
                scores[item][student] = score
            totals[student] = submission_total(sub, policy)  # the one total: the export and the LMS count it so
            penalties[student] = float(sub.score or 0.0) - totals[student]  # what was taken from the score now
            if policy is not None and _stale(policy, sub):
                stale.append(student)
            max_total = sub.max_score
    entry = NOTEBOOKS.get(assignment)
    questions = frozenset(entry.questions) if entry else frozenset()
    seeds = {s: seed for (s, a), seed in recorded(course_root).items() if a == assignment and s in totals}
    report = AssignmentReport(assignment, students, dict(scores), max_points, questions=questions,
                              names={s: names[s] for s in students}, seeds=seeds, totals=totals,
                              max_total=max_total, course_root=course_root, late=late, penalties=penalties,
                              stale=stale)
    who = defaultdict(list)
    for student in students:
        path = os.path.join(course_root, "autograded", student, assignment, assignment + ".ipynb")
        if not os.path.exists(path):
            continue
        named = set()
        for cell in nbformat.read(path, as_version=4).cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
                continue
            text = "".join(o.get("text", "") + o.get("evalue", "") for o in cell.get("outputs", []))
            named |= {(gid.rsplit("_", 1)[0], m.strip()) for m in MISTAKE.findall(text)}
        for key in sorted(named):
            who[key].append(student)
    report.mistakes.update({key: len(s) for key, s in who.items()})
    report.mistake_students = dict(who)
    from grader.graded import read_log
    seen = set()
    for record in read_log(course_root):
        if record.get("assignment") != assignment:
            continue
        for kind, reason in record.get("faults", []):
            key = (record.get("student"), kind, reason)
            if key not in seen:
                seen.add(key)
                report.flagged.append(key)
    return report


def histogram_figure(report):
    """One bar chart per item, four to a row: how many students got each score (integer counts, labelled axes)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    items = list(report.scores)
    ncols = max(1, min(4, len(items)))
    nrows = max(1, math.ceil(len(items) / ncols))
    fig = Figure(figsize=(2.8 * ncols, 2.3 * nrows), dpi=80)
    for i, item in enumerate(items, 1):
        ax = fig.add_subplot(nrows, ncols, i)
        counts = Counter(report.scores[item].values())
        points = sorted(set(counts) | {0.0, report.max_points[item]})
        ax.bar([num(p) for p in points], [counts.get(p, 0) for p in points], color="#4c72b0")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(0, max(1, max(counts.values(), default=0)) * 1.1)
        title = item if len(item) <= 30 else item[:29] + "…"
        ax.set_title(f"{title} ({report.kind(item)})", fontsize=8, parse_math=False)
        ax.set_xlabel(f"points (of {num(report.max_points[item])})", fontsize=7)
        ax.set_ylabel("students", fontsize=7)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return fig


def _histogram_png(report):
    buf = io.BytesIO()
    histogram_figure(report).savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode()


def _who(report, students):
    return ", ".join(esc(s) + (f" ({esc(report.names[s])})" if report.names.get(s) else "") for s in students)


def to_html(report, out_dir=None):
    """The assignment's page. With ``out_dir`` (where the page goes), each student's score links to their feedback."""
    rows = "".join(f"<tr><td>{esc(item)}</td><td>{kind}</td><td class=n>{esc(out_of(mean, pts))}</td>"
                   f"<td class=n>{full}</td><td class=n>{failed}</td></tr>"
                   for item, kind, pts, mean, full, failed in report.rows())
    n = len(report.students)
    hardest = "".join(f"<tr><td>{esc(item)}</td><td>{report.kind(item)}</td><td class=n>{report.failed_by(item)} of "
                      f"{n}</td><td class=n>{esc(out_of(report.mean(item), report.max_points[item]))}</td></tr>"
                      for item in report.most_failed()) or "<tr><td colspan=4>none</td></tr>"
    mistakes = "".join(f"<tr><td>{esc(item)}</td><td>{esc(why)}</td><td class=n>{count}</td>"
                       f"<td>{_who(report, report.mistake_students.get((item, why), []))}</td></tr>"
                       for (item, why), count in report.mistakes.most_common()) \
        or "<tr><td colspan=4>none</td></tr>"
    flagged = "".join(f"<tr><td>{esc(s)}</td><td>{esc(k)}</td><td>{esc(str(r)[:300])}</td></tr>"
                      for s, k, r in report.flagged) or "<tr><td colspan=3>none</td></tr>"
    students = "".join(
        f"<tr><td>{esc(s)}</td><td>{esc(report.names.get(s, ''))}</td>"
        + _score_cell(report.totals.get(s, 0), report.max_total,
                      out_dir and feedback_link(report.course_root, out_dir, s, report.assignment))
        + "".join(f'<td class="n">{esc(num(v) if isinstance(v, float) else v)}</td>' for v in report.late_columns(s))
        + f"<td>{esc(report.seeds.get(s, ''))}</td></tr>" for s in report.students)
    chart = (f'<img alt="how many students got each score, per exercise and question" '
             f'src="data:image/png;base64,{_histogram_png(report)}">') if report.scores else ""
    table = html.escape(quote(report.assignment + "-students.html", safe=""))  # coursekit/report_students.py's
    return page_html(f"{report.assignment}: class report", f"""<p><a href="index.html">class overview</a> ·
<a href="{table}">who failed what: every student's points per exercise, the mistakes named, lateness</a></p>
<h1>{esc(report.assignment)}: {counted(n, 'student')}, class mean
{esc(out_of(report.class_mean(), report.max_total))}</h1>
<h2>Scores per exercise and question</h2>
<table><tr><th>item</th><th>kind</th><th>mean / points</th><th>every point</th><th>failed</th></tr>{rows}</table>
{chart}
<h2>Most failed</h2>
<table><tr><th>item</th><th>kind</th><th>students who failed</th><th>mean / points</th></tr>{hardest}</table>
<h2>Known mistakes the checks named</h2>
<p>For the instructor: who made each mistake.</p>
<table><tr><th>item</th><th>mistake</th><th>students</th><th>who</th></tr>{mistakes}</table>
<h2>Flagged for a person</h2>
<table><tr><th>student</th><th>what</th><th>reason</th></tr>{flagged}</table>
<h2>Students</h2>
<p>Each score links to the student's feedback. Each student's hidden cases are drawn from their seed;
<code>check(name, fn, part, seed=...)</code> reproduces any grade. Minutes late count from the student's own due date
(the assignment's plus their extension, nbgrader's); the score is after the late penalty.</p>
<table><tr><th>student</th><th>name</th><th>score</th><th>minutes late</th><th>extension</th><th>late penalty</th>
<th>hidden-case seed</th></tr>{students}</table>""")


def write_report(report, out_dir):
    """``<assignment>.html`` and ``<assignment>.csv`` in ``out_dir``; returns their paths. Each text cell of the CSV is
    written as the grade export writes one (``coursekit.lms.export.text``: a formula's start made text, inert)."""
    os.makedirs(out_dir, exist_ok=True)
    html_path = os.path.join(out_dir, report.assignment + ".html")
    with open(html_path, "w") as f:
        f.write(to_html(report, out_dir))
    csv_path = os.path.join(out_dir, report.assignment + ".csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["section", "item", "what", "value"])
        for item, kind, pts, mean, full, failed in report.rows():
            w.writerows([["score", item, "kind", kind], ["score", item, "points", pts], ["score", item, "mean", mean],
                         ["score", item, "students with every point", full],
                         ["score", item, "students who failed", failed]])
        for (item, why), n in report.mistakes.most_common():
            w.writerow(["mistake", item, csv_text(why), n])
            w.writerows([["mistake by", item, csv_text(why), csv_text(s)]
                         for s in report.mistake_students.get((item, why), [])])
        for student, kind, reason in report.flagged:
            w.writerow(["flagged", csv_text(student), csv_text(kind), csv_text(reason)])
        for student in report.students:
            w.writerows([["student", csv_text(student), "name", csv_text(report.names.get(student, ""))],
                         ["student", csv_text(student), "score", report.totals.get(student, 0)],
                         ["student", csv_text(student), "of", report.max_total],
                         ["student", csv_text(student), "seed", report.seeds.get(student, "")]])
            minutes, extension, penalty = report.late_columns(student)
            w.writerows([["student", csv_text(student), "minutes late", minutes],
                         ["student", csv_text(student), "extension", extension],
                         ["student", csv_text(student), "late penalty", penalty]])
    return html_path, csv_path


def as_table(report):
    """The terminal's view: one line per exercise and question, the most failed, the named mistakes with the students
    who made each, and the flags."""
    n = len(report.students)
    lines = [f"{one_line_text(report.assignment)}: {counted(n, 'student')}, class mean {out_of(report.class_mean(), report.max_total)}"]
    lines += ["  " + line for line in text_table(
        ["item", "kind", "mean / points", "every point", "failed"],
        [(item, kind, out_of(mean, pts), full, failed) for item, kind, pts, mean, full, failed in report.rows()],
        right={2, 3, 4}, caps=[NAME_COLUMN, None, None, None, None])]
    hardest = ", ".join(f"{one_line_text(item)} ({report.kind(item)}, {report.failed_by(item)} of {n})"
                        for item in report.most_failed())
    lines += textwrap.wrap(f"most failed: {hardest or 'none'}", 110, initial_indent="  ", subsequent_indent="    ")
    for (item, why), count in report.mistakes.most_common():
        students = ", ".join(one_line_text(s) for s in report.mistake_students.get((item, why), []))
        lines += textwrap.wrap(f"mistake  {one_line_text(item)}: {one_line_text(why)} ({counted(count, 'student')}: "
                               f"{students})", 110, initial_indent="  ", subsequent_indent="    ")
    for student, kind, reason in report.flagged:
        lines.append(f"  flagged  {one_line_text(student)}: {one_line_text(kind)}: {one_line_text(reason)[:120]}")
    for student in report.students:
        minutes, extension, penalty = report.late_columns(student)
        if minutes or extension:
            lines.append(f"  late     {one_line_text(student)}: {counted(minutes, 'minute')} past their due date"
                         + (f" (extension {extension})" if extension else "") + f", penalty {num(penalty)}")
    if report.stale:
        lines += textwrap.wrap(f"  STALE    the late penalty of {', '.join(one_line_text(s) for s in report.stale)} "
                               f"was worked out before the due date, an extension or the late policy changed: run "
                               f"`course late {one_line_text(report.assignment)}`", 110, subsequent_indent="    ")
    return "\n".join(lines)


# ------------------------------------------------------------------ across assignments
@dataclass
class Overview:
    course_root: str
    assignments: list                                    # in the order given
    students: list                                       # student ids, sorted
    names: dict                                          # {student: name}
    scores: dict                                         # {(student, assignment): score}, submitted ones only
    max_scores: dict                                     # {assignment: points}

    def size(self):
        n, m = len(self.students), len(self.assignments)
        return f"{counted(n, 'student')}, {counted(m, 'assignment')}"

    def total(self, student):
        """(score, points) over every assignment; a missing submission scores 0 of its points."""
        return (sum(self.scores.get((student, a), 0.0) for a in self.assignments),
                sum(self.max_scores[a] for a in self.assignments))


def class_overview(course_root, assignments=None):
    """Every student's score in each of ``assignments`` (default: every assignment in the gradebook), after the late
    penalty."""
    from nbgrader.api import MissingEntry

    from grader.late import extension_only, policy_or_none, submission_total
    policy = policy_or_none(course_root)
    with gradebook(course_root) as gb:
        names = _names(gb)
        known = {a.name: a for a in gb.assignments}
        assignments = list(assignments) if assignments else sorted(known)
        max_scores = {a: known[a].max_score if a in known else 0.0 for a in assignments}
        scores = {}
        for student in names:
            for a in assignments:
                try:
                    sub = gb.find_submission(a, student)
                except MissingEntry:
                    continue
                if not extension_only(sub):  # a row of `course extend` alone is no submission
                    scores[(student, a)] = submission_total(sub, policy)
    return Overview(course_root, assignments, sorted(names), names, scores, max_scores)


def overview_html(overview, out_dir):
    head = "".join(f'<th><a href="{html.escape(quote(a + ".html", safe=""))}">{esc(a)}</a></th>'
                   if os.path.isfile(os.path.join(out_dir, a + ".html")) else f"<th>{esc(a)}</th>"
                   for a in overview.assignments)
    rows = []
    for s in overview.students:
        cells = "".join(_score_cell(overview.scores[(s, a)], overview.max_scores[a],
                                    feedback_link(overview.course_root, out_dir, s, a))
                        if (s, a) in overview.scores else '<td class="missing">no submission</td>'
                        for a in overview.assignments)
        rows.append(f"<tr><td>{esc(s)}</td><td>{esc(overview.names.get(s, ''))}</td>{cells}"
                    f'<td class="n">{esc(out_of(*overview.total(s)))}</td></tr>')
    return page_html("Class overview", f"""<h1>Class overview: {overview.size()}</h1>
<p>Each score links to that student's feedback; each assignment to its class report. A missing submission counts
0 in the total.</p>
<table><tr><th>student</th><th>name</th>{head}<th>total</th></tr>{"".join(rows)}</table>""")


def write_overview(overview, out_dir):
    """``index.html`` in ``out_dir``; returns its path."""
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "index.html")
    with open(path, "w") as f:
        f.write(overview_html(overview, out_dir))
    return path


def overview_table(overview):
    """The terminal's view of the overview: a row per student, a column per assignment (— for no submission)."""
    header = ["student", "name", *(fit_columns(a, ASSIGNMENT_COLUMN).rstrip() for a in overview.assignments), "total"]
    rows = [[s, overview.names.get(s, ""),
             *(out_of(overview.scores[(s, a)], overview.max_scores[a]) if (s, a) in overview.scores else "—"
               for a in overview.assignments), out_of(*overview.total(s))] for s in overview.students]
    caps = [NAME_COLUMN, 24] + [None] * (len(header) - 2)  # the scores are never cut
    lines = text_table(header, rows, right=set(range(2, len(header))), caps=caps)
    return "\n".join([f"class overview: {overview.size()}",
                      *("  " + line for line in lines)])
