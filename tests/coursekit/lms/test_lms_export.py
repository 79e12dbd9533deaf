"""`course export --lms canvas|moodle|generic` and the same writers as nbgrader export plugins: each file is read
back by the rules its platform reads it with (Canvas's gradebook importer, Moodle's CSV grade import), and every
score in it is the gradebook's, in points, out of the assignment's maximum; an assignment with no grades is refused
by name and nothing is written; a student without a key the LMS matches by is left out and named, never written
with a blank key.

Here the files are read by the columns Canvas's importer takes (``canvas_columns``: canvas-lms
lib/gradebook_importer.rb's header rules); the importers themselves, run in Ruby and PHP on these files, are
test_lms_import_rules.py's and test_lms_real_readers.py's (two students of the same name, a student known only to
the roster, a removed student, generated hostile names and keys: each grade on its own account).

The class is a real nbgrader gradebook built through nbgrader's Gradebook API (no grading run), with a late penalty,
a student who did not submit one assignment, an assignment nobody submitted, and a student whose name is a
spreadsheet formula. Cost: about 5 s (nbgrader's own export command twice).
"""
import contextlib
import csv
import io
import os
import re
import subprocess
import sys

import pytest
from gradebooks import build_gradebook

from coursekit.cli import main
from coursekit.lms.export import CANVAS_STUDENT_COLUMNS, GENERIC_HEADER, GENERIC_STUDENT_COLUMNS, MOODLE_STUDENT_COLUMNS

A, B, EMPTY = "03_softmax", "05_rnn", "07_decoder"   # EMPTY: in the gradebook, never submitted
CELLS = {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2.5}, B: {"rnn_cell_basic": 1,
         "beam_search_basic": 5}, EMPTY: {"rope_basic": 3}}
FORMULA = "=HYPERLINK(\"http://evil.example\",\"x\")"
STUDENTS = {  # id: (first, last, email, lms_user_id)
    "alice": ("Alice", "Smith", "alice@uni.example", "4211"),                 # a Canvas user id
    "bob": ("Bob", "Jones", "bob@uni.example", "f1c2d3e4-0000-4000-8000-00000000b0b0"),  # an opaque LTI sub
    "carol": (FORMULA, "Evans", "carol@uni.example", "88"),
    "dave": ("Dave", "Brown", "dave@uni.example", "77"),
}
SCORES = {  # {student: {assignment: {cell: score}}}; dave did not submit B
    "alice": {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2.5},
              B: {"rnn_cell_basic": 1, "beam_search_basic": 3}},
    "bob": {A: {"softmax_basic": 2, "softmax_edge": 0, "log_softmax_basic": 1.5},
            B: {"rnn_cell_basic": 0, "beam_search_basic": 5}},
    "carol": {A: {"softmax_basic": 0, "softmax_edge": 0, "log_softmax_basic": 0},
              B: {"rnn_cell_basic": 1, "beam_search_basic": 0}},
    "dave": {A: {"softmax_basic": 1, "softmax_edge": 1, "log_softmax_basic": 0}},
}
LATE = {("bob", A): 1.0}  # bob's late penalty on A
MAX = {a: sum(c.values()) for a, c in CELLS.items()}


def expected(student, a):
    """The gradebook's points, as nbgrader computes them: the cells, less the late penalty, never below 0; 0 when
    nothing was submitted."""
    if a not in SCORES[student]:
        return 0.0
    return max(0.0, sum(SCORES[student][a].values()) - LATE.get((student, a), 0.0))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("lms-export-course"))
    build_gradebook(root, CELLS, STUDENTS, SCORES, LATE)
    with open(os.path.join(root, "nbgrader_config.py"), "w") as f:  # what `nbgrader export` reads in the folder
        f.write("c = get_config()\nc.CourseDirectory.course_id = 'attention-course'\n"
                f"c.CourseDirectory.root = {root!r}\n")
    return root


def export(course, *args):
    """`course export ...` in this process: (exit status, what it printed, what it said on stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["export", "--course", course, *args])
    return code, out.getvalue(), err.getvalue()


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def points(cell):
    return float(cell)


# ------------------------------------------------------------------ Canvas
def canvas_columns(header):
    """The columns Canvas's gradebook importer (lib/gradebook_importer.rb) takes: it accepts the header only when
    row[0] holds "Student" and row[1] "ID", finds "SIS User ID" then "SIS Login ID" next, wants "Section" as the
    last student column, and takes every later column as an assignment unless its title is one of the read-only
    totals (Current/Final Score, Points, Grade, Override ...)."""
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4]
    totals = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                        "Override Score|Override Grade|Override Status")
    return {i: name for i, name in enumerate(header) if i >= 5 and not totals.search(name)}


def test_canvas_file_is_read_by_canvas_rules_and_holds_the_gradebooks_points(course, tmp_path):
    """The Canvas file: its header and Points Possible row as Canvas's importer reads them, one row per student,
    each found by Canvas's ID (a numeric Canvas user id only) or the login, each score the gradebook's in points;
    no total column (Canvas would make it an assignment)."""
    out = tmp_path / "canvas.csv"
    code, printed, err = export(course, "--lms", "canvas", "--out", str(out), A, B)
    assert code == 1 and "1 student left out of the file" in err, err  # bob
    rows = read_csv(out)
    header, possible, students = rows[0], rows[1], rows[2:]
    assert header == CANVAS_STUDENT_COLUMNS + [A, B]
    assignments = canvas_columns(header)
    assert list(assignments.values()) == [A, B]
    assert "Points Possible" in possible[0] and possible[1:5] == ["", "", "", ""]
    assert {assignments[i]: points(possible[i]) for i in assignments} == {A: MAX[A], B: MAX[B]} == {A: 5.5, B: 6}
    by_id = {row[1]: row for row in students}
    ids = {STUDENTS[s][3]: s for s in STUDENTS}
    assert sorted(by_id) == ["4211", "77", "88"]  # bob's launch gave no Canvas user id: left out, never blank
    for canvas_id, row in by_id.items():
        sid = ids[canvas_id]
        first, last, _, _ = STUDENTS[sid]
        assert row[2:5] == ["", "", ""]                      # no SIS ids: the class has no roster.csv
        assert row[0] == ""                                  # no name: Canvas would match a row by it
        assert {assignments[i]: points(row[i]) for i in assignments} == {a: expected(sid, a) for a in (A, B)}
    assert by_id["77"][6] == "0"   # no submission of B: 0, as nbgrader's own export
    assert f"-> {out}" in printed and "canvas: 3 students" in printed and "3 of 4 submitted" in printed
    assert "LEFT OUT bob (Bob Jones): no key Canvas matches by" in printed


def test_a_name_that_is_a_formula_is_written_as_text(course, tmp_path):
    """A name from the LMS that a spreadsheet would run (=HYPERLINK(...)) never starts a cell: Moodle's and the
    generic file write it with a leading apostrophe (Canvas's file writes no name); the scores beside it are the
    gradebook's."""
    for lms, cell in (("moodle", "'" + FORMULA), ("generic", "'" + FORMULA)):  # Canvas's file has no names
        out = tmp_path / f"{lms}.csv"
        assert export(course, "--lms", lms, "--out", str(out), A)[0] == (lms == "moodle")  # bob left out
        rows = read_csv(out)
        assert not [c for row in rows for c in row if c.startswith(("=", "+", "-", "@", "\t", "\r"))], lms
        carol = [row for row in rows if cell in row]
        assert len(carol) == 1, lms
        score = [h for h in rows[0] if GENERIC_HEADER.match(h)] or [A]  # the generic file heads it with its maximum
        assert points(carol[0][rows[0].index(score[0])]) == expected("carol", A) == 0.0


# ------------------------------------------------------------------ Moodle
def test_moodle_file_is_one_row_per_student_that_moodle_maps_by_user_id(course, tmp_path):
    """Moodle's CSV grade import takes every row as a student and refuses the file when one key matches nobody: the
    file is the header and one row per student with a Moodle user id (Map from User ID to userid), with one numeric
    column per assignment holding the gradebook's points; bob, whose id is no Moodle user id, is left out and
    named; the maxima, which Moodle keeps on the grade item, are printed."""
    out = tmp_path / "moodle.csv"
    code, printed, err = export(course, "--lms", "moodle", "--out", str(out), A, B)
    assert code == 1, err  # bob left out, named
    rows = read_csv(out)
    header, students = rows[0], rows[1:]
    assert header == MOODLE_STUDENT_COLUMNS + [A, B]
    col = {name: i for i, name in enumerate(header)}
    ids = {STUDENTS[s][3]: s for s in STUDENTS}
    assert sorted(row[col["User ID"]] for row in students) == ["4211", "77", "88"]
    for row in students:
        sid = ids[row[col["User ID"]]]
        assert row[col["Last name"]] == STUDENTS[sid][1]
        for a in (A, B):
            assert points(row[col[a]]) == expected(sid, a)
    assert f"{A}: out of 5.5" in printed and f"{B}: out of 6" in printed and "Maximum grade" in printed
    assert "map from User ID to userid" in printed and "LEFT OUT bob (Bob Jones): no Moodle user id" in printed


# ------------------------------------------------------------------ generic
def test_generic_file_is_one_row_per_student_with_each_maximum_and_the_total(course, tmp_path):
    """Generic: one row per student, one column per assignment headed with its maximum, and the total out of the
    sum of the maxima; every number is the gradebook's."""
    out = tmp_path / "generic.csv"
    assert export(course, "--lms", "generic", "--out", str(out), A, B)[0] == 0
    rows = read_csv(out)
    header, students = rows[0], rows[1:]
    assert header[:5] == GENERIC_STUDENT_COLUMNS
    parsed = [GENERIC_HEADER.match(h).groupdict() for h in header[5:]]
    assert [(p["name"], float(p["max"])) for p in parsed] == [(A, MAX[A]), (B, MAX[B]), ("Total", MAX[A] + MAX[B])]
    assert len(students) == len(STUDENTS)  # every student: the generic file's key is the course's own id
    for row in students:
        sid = row[0]
        assert [points(c) for c in row[5:]] == [expected(sid, A), expected(sid, B),
                                                 expected(sid, A) + expected(sid, B)]


def test_every_graded_assignment_by_default_and_the_one_with_no_grades_left_out(course, tmp_path):
    """With no assignment named, the file holds every assignment with grades, in the gradebook's order, and says
    which it left out for having none."""
    out = tmp_path / "all.csv"
    code, printed, _ = export(course, "--lms", "generic", "--out", str(out))
    assert code == 0
    assert [GENERIC_HEADER.match(h)["name"] for h in read_csv(out)[0][5:]] == [A, B, "Total"]
    assert f"left out, no grades yet: {EMPTY}" in printed


def test_default_file_is_in_the_course_folder(course):
    code, printed, _ = export(course, "--lms", "canvas", A)
    assert code == 1  # bob left out, named
    assert os.path.isfile(os.path.join(course, "lms", "canvas_grades.csv"))
    assert os.stat(os.path.join(course, "lms", "canvas_grades.csv")).st_mode & 0o077 == 0  # the instructor's alone


# ------------------------------------------------------------------ no grades
@pytest.mark.parametrize("asked", [[EMPTY], [A, EMPTY], ["99_nothing"]])
def test_an_assignment_with_no_grades_is_named_and_nothing_is_written(course, tmp_path, asked):
    """An assignment nobody submitted (or that the gradebook lacks), alone or beside a graded one: the command
    names it, exits 2, creates no file and leaves an earlier file at --out as it was."""
    fresh, earlier = tmp_path / "fresh.csv", tmp_path / "earlier.csv"
    earlier.write_text("an earlier export\n")
    for out in (fresh, earlier):
        code, printed, err = export(course, "--lms", "canvas", "--out", str(out), *asked)
        assert code == 2 and printed == ""
        assert f"no grades for {asked[-1]}" in err and "nothing was written" in err and A in err
    assert not fresh.exists() and earlier.read_text() == "an earlier export\n"
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".lms-export-")]


def test_no_gradebook_is_said(tmp_path):
    code, _, err = export(str(tmp_path), "--lms", "moodle")
    assert code == 2 and "no gradebook" in err


# ------------------------------------------------------------------ nbgrader export --exporter
def nbgrader_export(course, *args):
    return subprocess.run([sys.executable, "-m", "nbgrader", "export", *args], cwd=course, capture_output=True,
                          text=True, timeout=120)


def test_nbgrader_export_with_the_plugin_writes_the_same_file(course, tmp_path):
    """`nbgrader export --exporter coursekit.lms.export.CanvasExport` (nbgrader's own command, in the course folder)
    writes the file `course export --lms canvas` writes and, like it, names the student it leaves out (bob, with no
    key Canvas matches by) on stderr and exits 1; asked for an assignment with no grades it names it, exits 1 and
    writes nothing."""
    ours, theirs, refused = tmp_path / "ours.csv", tmp_path / "theirs.csv", tmp_path / "refused.csv"
    assert export(course, "--lms", "canvas", "--out", str(ours), A, B)[0] == 1  # bob left out, named
    done = nbgrader_export(course, "--exporter", "coursekit.lms.export.CanvasExport", "--to", str(theirs),
                           "--assignment", f"['{A}', '{B}']")
    assert done.returncode == 1, done.stderr
    assert "LEFT OUT bob (Bob Jones): no key Canvas matches by" in done.stderr
    assert "1 student left out of" in done.stderr and "enter their grades in the LMS by hand" in done.stderr
    assert read_csv(theirs) == read_csv(ours)
    done = nbgrader_export(course, "--exporter", "coursekit.lms.export.MoodleExport", "--to", str(refused),
                           "--assignment", f"['{EMPTY}']")
    assert done.returncode == 1 and f"no grades for {EMPTY}" in done.stderr and not refused.exists()
