"""Grades for the LMS: the gradebook written as the import file each platform documents.

``course export --lms canvas|moodle|generic [--out FILE] [ASSIGNMENT ...]`` runs it on a course folder, and the same
writers are nbgrader export plugins (``nbgrader.plugins.ExportPlugin``), so from a course folder

    nbgrader export --exporter coursekit.lms.export.CanvasExport --to canvas.csv --assignment "['03_softmax']"

writes the same file (``MoodleExport``, ``GenericExport`` likewise) and, like ``course export``, names each student
it leaves out (nbgrader's log, on stderr: ``LEFT OUT ...``) and then exits 1.

Every file holds points, never percentages: a student's score on an assignment is nbgrader's, the sum of its graded
cells less any late penalty (never below 0; 0 past the late policy's hard close: ``grader.late.submission_total``),
and a student with no submission scores 0, as in nbgrader's own CSV export, once their own due date (extension
included) has passed: before it their cell is blank, "not yet due" (a blank cell changes nothing in Canvas or Moodle).
The formats, as each platform reads them:

Each platform's importer finds the student of a row by a key, and a row it cannot match by key goes to someone
else: Canvas falls back to the name (two students of one name swap grades), Moodle gives a row whose key is blank to
the previous row's student. So a file for Canvas or Moodle holds only rows with a key the LMS itself uses, and a
student without one is left out and named (``left_out``), never written with a blank key. The keys come from the
LMS: the gradebook's ``lms_user_id``, which a launch wrote (Canvas's user id with the custom field
``canvas_user_id``, else the launch's ``sub``, Moodle's user id); for a class not launched from the LMS, from the
course folder's ``roster.csv`` (the file ``course hub --roster`` reads, ``id,name`` and more columns after them,
with a header row): its ``lms_user_id`` column (Canvas's user id or Moodle's), and for Canvas its ``sis_user_id``
and ``sis_login_id``. A roster key that differs from the launch's, or one key shared by two students, is refused.
A student the class list from the LMS took out of the course (``lms/departed.json``, coursekit/hub/enrol.py) is
left out of Canvas's and Moodle's files and named: the LMS no longer has them in the course.

* **canvas** -- the Gradebook import CSV (Grades > Import; Canvas reads it with ``lib/gradebook_importer.rb``): the
  header ``Student, ID, SIS User ID, SIS Login ID, Section`` and then one column per assignment; the row after it
  starts with ``Points Possible`` and holds each assignment's maximum (Canvas takes it as the new assignment's points
  possible). Canvas finds a student by ``ID`` (its numeric user id), else by ``SIS User ID``, else by ``SIS Login
  ID``, else by the name (``Student``, compared with the user's name and sortable name); a row is written only
  with one of the three ids (an ID of 0 is none; a SIS id that Canvas's CSV converter would change, ``1,5`` read as
  ``1.5``, is not written), and its ``Student`` cell is left empty: Ruby's CSV reads it as nil, and no Canvas user's
  name or sortable name is nil (app/models/user.rb ``infer_defaults``), so a row Canvas does not find by an id (a
  student removed from the Canvas course that no class list told the hub of) is a "missing" student the instructor
  resolves on the import page, never a namesake's grade. A column whose title matches no Canvas
  assignment becomes a new assignment of that title. There is no total column: Canvas computes its own, and would
  take a "Total" column for an assignment.
* **moodle** -- the CSV grade import (Grades > Import > CSV file; ``grade/import/csv/classes/load_data.php``): one
  row per student, nothing else (Moodle takes every row as a student and refuses the whole file when one key matches
  no user), with ``User ID, First name, Last name`` and one column per assignment. On the import page "Map from"
  ``User ID`` to ``userid`` (Moodle's user id, which its LTI 1.3 launches send as ``sub``), and each assignment
  column to its grade item or to "new grade item". ``userid`` is the one identifier of Moodle's four (userid,
  username, useridnumber, useremail) that the file carries: Moodle looks the mapped cell up among every user of the
  site, so ``User ID`` mapped to username or idnumber would find whoever has that number as their username or
  idnumber, or nobody (and then refuse the file). Moodle keeps an item's maximum on the item (a new item is out of
  100), so this command prints each assignment's maximum for the instructor to set, and says when a grade is above
  100, which Moodle refuses (the whole file) unless the site allows unlimited grades.
* **generic** -- one row per student, one column per assignment and a ``Total`` column, each headed with its
  maximum: ``03_softmax (out of 16)``, ``Total (out of 40)``; before them ``Student ID, First name, Last name,
  Email, LMS user ID``.

An assignment that has no grades (no submission in the gradebook, or not in it at all) is refused by name and
nothing is written. Names, emails and ids come from the roster or from the LMS at launch, so a student controls
some of them: a text cell that a spreadsheet would run as a formula (starting with ``= + - @``, a tab or a carriage
return) is written with a leading apostrophe, and the file is written whole or not at all.

Every reader in use reads each cell the same (the tests run them: PHP's ``fgetcsv`` as Moodle's
``csv_import_reader::load_csv_content`` calls it, Ruby's ``CSV`` as Canvas's importer does, Python's ``csv``).
PHP's ``fgetcsv`` takes a backslash inside a quoted cell as an escape by default (PHP < 9), so a name ending in a
backslash and holding a comma, written ``"Aback, \\"``, never closes its cell and swallows the rows after it. And
Moodle reads each file twice: as uploaded, then the copy it stores with PHP's ``fputcsv``, which doubles no quote
that follows a backslash, and reads back with ``fgetcsv`` (csv_import_reader's ``init`` and ``next``). So in a text
cell a run of backslashes at the end is made even (one more backslash: a pair escapes itself, in both readings),
and a run of backslashes before a double quote gets a space between them (no reading of a backslash then touches
the quote). PHP, with the backslash as escape or none, then reads the same text as Python and Ruby, in the upload
and in Moodle's copy. The name stays the student's, with one more backslash or a space, and the row still goes by
its key, which is never changed (a changed key would match another account or none): a key that would need it is
left out and named. A student whose name had to be written so is named in what the command prints.
"""
import csv
import os
import re
import tempfile
from dataclasses import dataclass, field

from nbgrader.plugins import ExportPlugin

from grader.plain import inert

from ..words import counted
from .cells import FORMULA_START, canvas_reads, number, numeric_id, text, unescaping

CANVAS_STUDENT_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_POINTS_POSSIBLE = "Points Possible"
MOODLE_STUDENT_COLUMNS = ["User ID", "First name", "Last name"]
MOODLE_MOST = 100  # a grade above it aborts Moodle's whole CSV import unless the site sets unlimitedgrades
ROSTER = "roster.csv"  # in the course folder: the keys of a class not launched from the LMS
ROSTER_KEYS = ("lms_user_id", "sis_user_id", "sis_login_id")
GENERIC_STUDENT_COLUMNS = ["Student ID", "First name", "Last name", "Email", "LMS user ID"]


class NoGrades(ValueError):
    """Assignments asked for that have no grades: their names are ``.assignments``."""

    def __init__(self, assignments, known=()):
        self.assignments = list(assignments)
        have = f"; graded: {', '.join(known)}" if known else "; nothing is graded yet"
        super().__init__(f"no grades for {', '.join(self.assignments) or 'any assignment'} in the gradebook{have} "
                         f"(grade first: course grade); nothing was written")


@dataclass(frozen=True)
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""


@dataclass
class ClassGrades:
    """What an export writes: each assignment with its maximum, the students, and the points of each submission."""
    assignments: list                              # [(assignment, max points)] in the order of the columns
    students: list                                 # [Student], sorted by last name, first name, id
    points: dict = field(default_factory=dict)     # {(student id, assignment): points} for the submissions
    left_out: list = field(default_factory=list)   # assignments of the gradebook with no grades (not asked for)
    submitted_at: dict = field(default_factory=dict)  # {(student id, assignment): ISO 8601 UTC} when they submitted
    keys: dict = field(default_factory=dict)       # {student id: {key: value}}: ROSTER_KEYS from the LMS or roster
    not_due: set = field(default_factory=set)      # {(student id, assignment)}: no submission, own due date to come

    def score(self, student, assignment):
        """``student``'s points on ``assignment``: 0 when they submitted nothing (nbgrader's rule), None (no grade
        yet: a blank cell, nothing posted) while their own due date, extension included, has not passed."""
        if (student, assignment) in self.not_due:
            return None
        return self.points.get((student, assignment), 0.0)

    def cell(self, student, assignment):
        """The file's cell of ``score``: its number, or blank while it is not yet due."""
        score = self.score(student, assignment)
        return "" if score is None else number(score)

    def submitted(self, student, assignment):
        return (student, assignment) in self.points

    def total(self, student):
        return sum(self.score(student, a) or 0.0 for a, _ in self.assignments)

    @property
    def max_total(self):
        return sum(m for _, m in self.assignments)


def read_grades(gb, assignments=(), students=()):
    """The grades of ``assignments`` (default: every assignment with grades, in the gradebook's order) for
    ``students`` (default: all) from nbgrader's ``Gradebook`` ``gb``. Raises ``NoGrades`` naming each asked
    assignment that has none (and when no assignment has any)."""
    from grader.late import extension_only, not_yet_due, policy_or_none, submission_total
    database = gb.engine.url.database  # the course folder's gradebook.db: its late policy is beside it
    policy = policy_or_none(os.path.dirname(database)) if database and database != ":memory:" else None
    in_gradebook = {a.name: a for a in gb.assignments}
    graded = [name for name, a in in_gradebook.items() if any(not extension_only(s) for s in a.submissions)]
    asked = [str(a) for a in assignments]
    if asked:
        missing = [a for a in asked if a not in graded]
        if missing:
            raise NoGrades(missing, graded)
        chosen, left_out = list(dict.fromkeys(asked)), []
    else:
        if not graded:
            raise NoGrades([], graded)
        chosen, left_out = graded, [a for a in in_gradebook if a not in graded]
    wanted = {str(s) for s in students}
    roster = [Student(s.id, s.first_name or "", s.last_name or "", s.email or "", (s.lms_user_id or "").strip())
              for s in gb.students if not wanted or s.id in wanted]
    roster.sort(key=lambda s: (s.last_name.lower(), s.first_name.lower(), s.id))
    grades = ClassGrades([(a, float(in_gradebook[a].max_score or 0.0)) for a in chosen], roster, left_out=left_out)
    ids = {s.id for s in roster}
    for a in chosen:
        for sub in in_gradebook[a].submissions:
            if sub.student_id in ids and not extension_only(sub):  # `course extend`'s row alone: no submission
                grades.points[(sub.student_id, a)] = submission_total(sub, policy)  # the report's total
                if sub.timestamp is not None:  # nbgrader keeps it in UTC, without its zone
                    grades.submitted_at[(sub.student_id, a)] = iso_utc(sub.timestamp)
        grades.not_due.update((s, a) for s in ids if (s, a) not in grades.points and not_yet_due(gb, a, s))
    return grades


def iso_utc(when):
    """A gradebook time (naive, UTC) as ISO 8601 with its zone and milliseconds, as AGS asks."""
    from datetime import timezone
    when = when.astimezone(timezone.utc) if when.tzinfo else when.replace(tzinfo=timezone.utc)
    return when.isoformat(timespec="milliseconds")


# ------------------------------------------------------------------ the keys the LMS matches by
def roster_keys(path):
    """{student id: {key: value}} of the ``ROSTER_KEYS`` columns of a roster CSV whose header row names them
    (``id,name,lms_user_id``); {} when there is no such file or header."""
    if not path or not os.path.isfile(path):
        return {}
    with open(path, newline="", encoding="utf-8-sig") as f:  # a spreadsheet may save it with a BOM
        rows = [row for row in csv.reader(f) if row and "".join(row).strip()]
    header = [h.strip().lower() for h in rows[0]] if rows else []
    if not header or header[0] != "id":
        return {}
    return {row[0].strip(): {h: row[i].strip() for i, h in enumerate(header)
                             if h in ROSTER_KEYS and i < len(row) and row[i].strip()} for row in rows[1:]}


def with_keys(grades, roster):
    """``grades`` with each student's keys: the gradebook's ``lms_user_id`` (from their launch) and the roster's
    columns; returns {student: why} of those whose roster key differs from their launch's (no key is kept)."""
    problems = {}
    for s in grades.students:
        keys = dict(roster.get(s.id, {}))
        if s.lms_user_id and keys.get("lms_user_id", s.lms_user_id) != s.lms_user_id:
            problems[s.id] = (f"the LMS user id of their launch ({s.lms_user_id!r}) and roster.csv's "
                              f"({keys['lms_user_id']!r}) differ")
            continue
        if s.lms_user_id:
            keys["lms_user_id"] = s.lms_user_id
        grades.keys[s.id] = keys
    return problems


def platform_keys(grades, platform):
    """({student: the key cells of their row}, {student: why they are left out}) for ``platform``: Canvas's (ID,
    SIS User ID, SIS Login ID), one at least; Moodle's (User ID, numeric). A key that two students were given
    leaves both out (even when one is left out for another reason: which of them it is, nobody knows). The generic
    file leaves nobody out (its first column is the course's own student id)."""
    cells, left_out, claimed = {}, {}, {}
    for s in grades.students:
        keys = grades.keys.get(s.id, {})
        if platform == "canvas":
            sis = [keys.get("sis_user_id", ""), keys.get("sis_login_id", "")]
            changed = [c for c in sis if canvas_reads(c) != c]
            row = (numeric_id(keys.get("lms_user_id")), *("" if c in changed else c for c in sis))
            why = ("no key Canvas matches by (its user ID, SIS User ID or SIS Login ID): Canvas would match the row "
                   "by name; launch from Canvas with the custom field canvas_user_id, or give roster.csv an "
                   "lms_user_id, sis_user_id or sis_login_id column"
                   + "".join(f"; the SIS id {c!r} is not written, as Canvas's importer would read it as "
                             f"{canvas_reads(c)!r}" for c in changed))
        elif platform == "moodle":
            row = (numeric_id(keys.get("lms_user_id")),)
            why = ("no Moodle user id: Moodle would give the row to the student of the row before it; launch from "
                   "Moodle, or give roster.csv an lms_user_id column")
        else:
            row, why = (keys.get("lms_user_id", ""),), None
        claimed[s.id] = row
        if why and not any(row):
            left_out[s.id] = why
        elif any(c.startswith(FORMULA_START) or not c.isprintable() or unescaping(c) != c for c in row):
            left_out[s.id] = (f"a key ({', '.join(repr(c) for c in row if c)}) that a spreadsheet would run as a "
                              f"formula, that holds a control character or that ends in a backslash (or has one "
                              f"before a quote), which PHP's CSV reader takes as an escape: written safely it would "
                              f"match nobody")
        else:
            cells[s.id] = row
    if platform in ("canvas", "moodle"):  # a key two students were given is neither's, whoever else is left out
        for i, name in enumerate(("ID", "SIS User ID", "SIS Login ID") if platform == "canvas" else ("User ID",)):
            owners = {}
            for sid, row in claimed.items():
                if row[i]:
                    owners.setdefault(row[i], []).append(sid)
            for value, sids in owners.items():
                for sid in sids if len(sids) > 1 else ():
                    left_out.setdefault(sid, f"shares the {name} {value!r} with "
                                             f"{', '.join(o for o in sids if o != sid)}")
        cells = {sid: row for sid, row in cells.items() if sid not in left_out}
    return cells, left_out


# ------------------------------------------------------------------ the formats
def canvas_rows(grades, cells):
    names = [a for a, _ in grades.assignments]
    yield CANVAS_STUDENT_COLUMNS + names
    yield [CANVAS_POINTS_POSSIBLE, "", "", "", ""] + [number(m) for _, m in grades.assignments]
    for s in grades.students:
        if s.id in cells:
            yield (["", *cells[s.id], ""]  # no name: Canvas would match a row it cannot find by id by its name
                   + [grades.cell(s.id, a) for a in names])


def moodle_rows(grades, cells):
    names = [a for a, _ in grades.assignments]
    yield MOODLE_STUDENT_COLUMNS + names
    for s in grades.students:
        if s.id in cells:
            yield ([cells[s.id][0], text(s.first_name), text(s.last_name)]
                   + [grades.cell(s.id, a) for a in names])


def generic_header(name, maximum):
    return f"{name} (out of {number(maximum)})"


GENERIC_HEADER = re.compile(r"^(?P<name>.*) \(out of (?P<max>[0-9.]+)\)$")


def generic_rows(grades, cells=None):
    names = [a for a, _ in grades.assignments]
    yield (GENERIC_STUDENT_COLUMNS + [generic_header(a, m) for a, m in grades.assignments]
           + [generic_header("Total", grades.max_total)])
    for s in grades.students:
        yield ([text(s.id), text(s.first_name), text(s.last_name), text(s.email), text(s.lms_user_id)]
               + [grades.cell(s.id, a) for a in names] + [number(grades.total(s.id))])


ROWS = {"canvas": canvas_rows, "moodle": moodle_rows, "generic": generic_rows}


def write_export(grades, platform, path, cells=None):
    """Write ``grades`` as ``platform``'s import file at ``path`` (UTF-8, whole or not at all), the rows of the
    students in ``cells`` (``platform_keys``; default: every student with a key); returns the path."""
    if cells is None:
        cells = platform_keys(grades, platform)[0]
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".lms-export-", suffix=".csv", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows(ROWS[platform](grades, cells))
        os.chmod(tmp, 0o600)  # grades: the instructor's alone until they choose to share them
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def default_name(platform):
    return f"{platform}_grades.csv"


def name_cells(s, platform):
    """The text cells of student ``s``'s row in ``platform``'s file, as given (before ``text``)."""
    if platform == "canvas":
        return []  # its Student cell is left empty (canvas_rows)
    if platform == "moodle":
        return [s.first_name, s.last_name]
    return [s.id, s.first_name, s.last_name, s.email, s.lms_user_id]


def renamed(grades, platform, left_out=()):
    """{student: [(cell as given, as written)]} of the written students whose name (or other text cell) had to be
    written with one more backslash or a space (``unescaping``)."""
    changed = {}
    for s in grades.students:
        if s.id not in left_out:
            for given in name_cells(s, platform):
                shown = inert(given or "")
                shown = "'" + shown if shown.startswith(FORMULA_START) else shown
                if unescaping(shown) != shown:
                    changed.setdefault(s.id, []).append((given, text(given)))
    return changed


def summary(grades, platform, path, left_out=None):
    """Lines that say what was written (and, for Moodle, the maxima its grade items need), who was left out, and
    whose name was written otherwise for PHP's reader (``unescaping``)."""
    left_out = left_out or {}
    written = len(grades.students) - len(left_out)
    lines = [f"{platform}: {counted(written, 'student')} x {counted(len(grades.assignments), 'assignment')} -> {path}"]
    for a, maximum in grades.assignments:
        submitted = sum(grades.submitted(s.id, a) for s in grades.students)
        waiting = sorted(s.id for s in grades.students if (s.id, a) in grades.not_due)
        missing = len(grades.students) - submitted - len(waiting)
        lines.append(f"  {a}: out of {number(maximum)}, {submitted} of {len(grades.students)} submitted"
                     + (f" ({missing} without a submission score 0)" if missing else ""))
        if waiting:
            lines.append(f"  {a}: not yet due (their own due date, extension included, has not passed), left blank: "
                         + ", ".join(waiting))
    if platform == "canvas":
        lines.append("  the Student column is left empty, so that Canvas never matches a row by name: a row it finds "
                     "by no id is a missing student on its import page (`course export --lms generic` pairs names "
                     "with LMS user ids)")
    if platform == "moodle":
        lines.append("  Moodle keeps the maximum on the grade item: set each item's Maximum grade as above "
                     "(a new grade item is out of 100); map from User ID to userid")
        over = [a for a, _ in grades.assignments
                if any((grades.score(s.id, a) or 0) > MOODLE_MOST for s in grades.students if s.id not in left_out)]
        if over:
            lines.append(f"  Moodle refuses the whole import when a grade is above {MOODLE_MOST} ({', '.join(over)}), "
                         f"unless the site allows unlimited grades (Site administration > Grades > General "
                         f"settings > Unlimited grades)")
    if grades.left_out:
        lines.append(f"  left out, no grades yet: {', '.join(grades.left_out)}")
    names = {s.id: " ".join(p for p in (s.first_name, s.last_name) if p) for s in grades.students}
    for sid, why in sorted(left_out.items()):
        lines.append(f"  LEFT OUT {sid}" + (f" ({names[sid]})" if names.get(sid) else "") + f": {why}")
    for sid, cells in sorted(renamed(grades, platform, left_out).items()):
        for given, written in cells:
            lines.append(f"  NAME WRITTEN OTHERWISE {sid}: {given!r} as {written!r}, so that PHP's CSV reader "
                         f"(Moodle's) does not take a backslash of it as an escape; the row is matched by its key")
    return [inert(line) for line in lines]


def keyed(grades, platform, roster_path, departed=None):
    """The keys of ``grades`` from the LMS and the roster at ``roster_path``: (cells, left out) for the file. The
    ``departed`` students ({student: why}: the class list from the LMS took them out) are left out of Canvas's and
    Moodle's files: the LMS finds no account by their key and Canvas would match the row by name, giving the grade
    to an enrolled student of the same name."""
    refused = with_keys(grades, roster_keys(roster_path))
    cells, left_out = platform_keys(grades, platform)
    if platform == "generic":
        cells.update({sid: ("",) for sid in refused})
        return cells, {}
    left_out.update(refused)
    known = {s.id for s in grades.students}
    left_out.update({sid: f"{why}; the LMS no longer has them in the course: enter their grade by hand if it is "
                          f"still wanted"
                     for sid, why in (departed or {}).items() if sid in known})
    return {sid: row for sid, row in cells.items() if sid not in left_out}, left_out


def export_course(root, platform, out=None, assignments=()):
    """``course export --lms``: write ``platform``'s file for the course folder ``root`` (default
    ``<root>/lms/<platform>_grades.csv``); returns the lines to print. Raises ``NoGrades`` (nothing written) and
    FileNotFoundError when the course has no gradebook."""
    from ..pipeline import gradebook
    root = os.path.abspath(root)
    if not os.path.isfile(os.path.join(root, "gradebook.db")):
        raise FileNotFoundError(f"no gradebook in {root}: grade first (course grade)")
    from ..hub.enrol import read_departed
    with gradebook(root) as gb:
        grades = read_grades(gb, assignments)
    cells, left_out = keyed(grades, platform, os.path.join(root, ROSTER), read_departed(root))
    path = write_export(grades, platform, out or os.path.join(root, "lms", default_name(platform)), cells)
    return summary(grades, platform, path, left_out)


# ------------------------------------------------------------------ nbgrader's export plugins
class LmsExportPlugin(ExportPlugin):
    """Base of the three: ``--to`` (default ``<platform>_grades.csv``), ``--assignment``, ``--student``."""
    platform = "generic"

    def export(self, gradebook):
        try:
            grades = read_grades(gradebook, self.assignment, self.student)
        except NoGrades as exc:
            if hasattr(self.parent, "fail"):  # nbgrader's app: log it and exit 1
                self.parent.fail(str(exc))
            raise
        from ..hub.enrol import read_departed
        root = self.parent.coursedir.root
        cells, left_out = keyed(grades, self.platform, os.path.join(root, ROSTER), read_departed(root))
        path = write_export(grades, self.platform, self.to or default_name(self.platform), cells)
        for line in summary(grades, self.platform, path, left_out):
            (self.log.warning if line.lstrip().startswith("LEFT OUT") else self.log.info)(line)
        if left_out and hasattr(self.parent, "fail"):  # as `course export`: the file is written, and exit 1
            self.parent.fail(f"{counted(len(left_out), 'student')} left out of {path}, each named above (LEFT "
                             f"OUT): enter their grades in the LMS by hand")


class CanvasExport(LmsExportPlugin):
    """Canvas's gradebook import CSV."""
    platform = "canvas"


class MoodleExport(LmsExportPlugin):
    """Moodle's CSV grade import."""
    platform = "moodle"


class GenericExport(LmsExportPlugin):
    """One row per student, one column per assignment and the total, each out of its maximum."""
    platform = "generic"

