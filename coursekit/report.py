"""The class report: what a graded class did, per assignment, for the instructor.

``course report`` reads what grading left in the course folder (the gradebook, the
autograded notebooks, ``grading_log.jsonl``) and writes ``report/<assignment>.html``
(scores per exercise with their distribution, the known mistakes the grader named
and how many students made each, the exercises most students failed, and the
submissions flagged for a person: tampering, crashes, time-outs), a CSV beside each,
and prints the same as a table in the terminal.
"""
import base64
import csv
import html
import io
import json
import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import nbformat

MISTAKE = re.compile(r"(?:looks like a known mistake|matches a known mistake): (.+?)\.?$", re.M)


@dataclass
class AssignmentReport:
    assignment: str
    students: list
    scores: dict                                   # {exercise: [score of each student]}
    max_points: dict                               # {exercise: points}
    mistakes: Counter = field(default_factory=Counter)   # {(exercise, explanation): students}
    flagged: list = field(default_factory=list)          # [(student, kind, reason)]
    seeds: dict = field(default_factory=dict)            # {student: the seed of their hidden cases}
    totals: dict = field(default_factory=dict)           # {student: total score}

    def failed_by(self, exercise):
        """How many students did not get every point of ``exercise``."""
        return sum(s < self.max_points[exercise] for s in self.scores[exercise])

    def rows(self):
        """One row per exercise: exercise, points, mean, students with every point, students who failed."""
        out = []
        for ex, scores in self.scores.items():
            mean = sum(scores) / len(scores) if scores else 0.0
            full = sum(s >= self.max_points[ex] for s in scores)
            out.append((ex, self.max_points[ex], round(mean, 2), full, self.failed_by(ex)))
        return out


def collect(course_root, assignment):
    """The report of ``assignment`` from the gradebook, the autograded notebooks and the grading log."""
    from nbgrader.api import Gradebook, MissingEntry
    scores, max_points, students, totals = defaultdict(list), {}, [], {}
    with Gradebook("sqlite:///" + os.path.join(course_root, "gradebook.db"), course_id="attention-course") as gb:
        for student in sorted(s.id for s in gb.students):
            try:
                sub = gb.find_submission_notebook(assignment, assignment, student)
            except MissingEntry:
                continue
            students.append(student)
            per_exercise, per_max = defaultdict(float), defaultdict(float)
            for g in sub.grades:
                exercise = g.name.rsplit("_", 1)[0]
                per_exercise[exercise] += g.score or 0.0
                per_max[exercise] += g.max_score or 0.0
            max_points.update(per_max)
            for exercise, score in per_exercise.items():
                scores[exercise].append(score)
            totals[student] = sub.score
    from grader.seeds import recorded
    seeds = {s: seed for (s, a), seed in recorded(course_root).items() if a == assignment and s in totals}
    report = AssignmentReport(assignment, students, dict(scores), max_points, seeds=seeds, totals=totals)
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
        report.mistakes.update(named)
    log = os.path.join(course_root, "grading_log.jsonl")
    if os.path.exists(log):
        seen = set()
        for line in open(log):
            record = json.loads(line)
            if record.get("assignment") != assignment:
                continue
            for kind, reason in record.get("faults", []):
                key = (record.get("student"), kind, reason)
                if key not in seen:
                    seen.add(key)
                    report.flagged.append(key)
    return report


def _histogram_png(report):
    """One small bar chart per exercise: how many students got each score."""
    from matplotlib.figure import Figure
    n = max(1, len(report.scores))
    fig = Figure(figsize=(min(12, 2.2 * n), 2.2), dpi=80)
    for i, (ex, scores) in enumerate(report.scores.items(), 1):
        ax = fig.add_subplot(1, n, i)
        counts = Counter(scores)
        points = sorted(set(counts) | {0.0, report.max_points[ex]})
        ax.bar([str(p) for p in points], [counts.get(p, 0) for p in points], color="#4c72b0")
        ax.set_title(ex, fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return base64.b64encode(buf.getvalue()).decode()


def to_html(report):
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(ex)}</td><td>{pts:g}</td><td>{mean:g}</td><td>{full}</td><td>{failed}</td></tr>"
                   for ex, pts, mean, full, failed in report.rows())
    mistakes = "".join(f"<tr><td>{esc(ex)}</td><td>{esc(why)}</td><td>{n}</td></tr>"
                       for (ex, why), n in report.mistakes.most_common()) or "<tr><td colspan=3>none</td></tr>"
    hardest = sorted(report.scores, key=report.failed_by, reverse=True)[:3]
    flagged = "".join(f"<tr><td>{esc(str(s))}</td><td>{esc(k)}</td><td>{esc(str(r))[:300]}</td></tr>"
                      for s, k, r in report.flagged) or "<tr><td colspan=3>none</td></tr>"
    students = "".join(f"<tr><td>{esc(s)}</td><td>{report.totals.get(s, 0):g}</td><td>{report.seeds.get(s, '')}</td>"
                       f"</tr>" for s in report.students)
    chart = f'<img alt="score distributions" src="data:image/png;base64,{_histogram_png(report)}">' \
        if report.scores else ""
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{esc(report.assignment)}: class report</title>
<style>body{{font-family:sans-serif;margin:2em}} table{{border-collapse:collapse;margin-bottom:1.5em}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left}}</style></head><body>
<h1>{esc(report.assignment)}: {len(report.students)} students</h1>
<h2>Scores per exercise</h2>
<table><tr><th>exercise</th><th>points</th><th>mean</th><th>every point</th><th>failed</th></tr>{rows}</table>
{chart}
<h2>Most failed</h2><p>{esc(", ".join(f"{ex} ({report.failed_by(ex)})" for ex in hardest)) or "none"}</p>
<h2>Known mistakes the grader named</h2>
<table><tr><th>exercise</th><th>mistake</th><th>students</th></tr>{mistakes}</table>
<h2>Flagged for a person</h2>
<table><tr><th>student</th><th>what</th><th>reason</th></tr>{flagged}</table>
<h2>Students</h2>
<p>Each student's hidden cases are drawn from their seed; <code>check(name, fn, part, seed=...)</code> reproduces
any grade.</p>
<table><tr><th>student</th><th>score</th><th>hidden-case seed</th></tr>{students}</table>
</body></html>"""


def write(report, out_dir):
    """``<assignment>.html`` and ``<assignment>.csv`` in ``out_dir``; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    html_path = os.path.join(out_dir, report.assignment + ".html")
    with open(html_path, "w") as f:
        f.write(to_html(report))
    csv_path = os.path.join(out_dir, report.assignment + ".csv")
    with open(csv_path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["section", "exercise", "what", "value"])
        for ex, pts, mean, full, failed in report.rows():
            w.writerows([["score", ex, "points", pts], ["score", ex, "mean", mean],
                         ["score", ex, "students with every point", full], ["score", ex, "students who failed", failed]])
        for (ex, why), n in report.mistakes.most_common():
            w.writerow(["mistake", ex, why, n])
        for student, kind, reason in report.flagged:
            w.writerow(["flagged", student, kind, reason])
        for student in report.students:
            w.writerows([["student", student, "score", report.totals.get(student, 0)],
                         ["student", student, "seed", report.seeds.get(student, "")]])
    return html_path, csv_path


def as_table(report):
    """The terminal's view: one line per exercise, then the named mistakes and the flags."""
    lines = [f"{report.assignment}: {len(report.students)} students",
             f"  {'exercise':24s} {'points':>6s} {'mean':>6s} {'full':>5s} {'failed':>6s}"]
    lines += [f"  {ex:24s} {pts:6g} {mean:6g} {full:5d} {failed:6d}" for ex, pts, mean, full, failed in report.rows()]
    for (ex, why), n in report.mistakes.most_common():
        lines.append(f"  mistake  {ex}: {why} ({n} student{'s' if n != 1 else ''})")
    for student, kind, reason in report.flagged:
        lines.append(f"  flagged  {student}: {kind}: {str(reason)[:120]}")
    return "\n".join(lines)
