"""The export files read by the real CSV readers of the LMSs: PHP's own ``fgetcsv`` as Moodle's CSV grade import calls
it (``moodle_csv_reader.php``: moodle lib/csvlib.class.php, ``csv_import_reader::load_csv_content``, which
grade/import/csv's ``load_data::load_csv_content`` calls with the comma and the default enclosure), Ruby's ``CSV``
plainly and with Canvas's options (``canvas_csv_reader.rb``: canvas-lms app/models/gradebook_importer.rb), and
Python's ``csv``. Both scripts say what they follow and that it is written from memory of those sources.

PHP reads each file six ways: the escape character left out (as Moodle 4.x calls ``fgetcsv``; PHP < 9 then takes the
backslash), given as the backslash, and given as "" (none: PHP 9's default), each under the C locale and C.UTF-8
(Moodle sets its language's UTF-8 locale, and ``fgetcsv`` steps through multibyte characters by the locale).

Generated classes with hostile names (backslashes before quotes and at the end, quotes, commas, newlines, non-ASCII,
the empty string, very long, cells starting with ``= + - @``): every reader reads every row of every format the
same, each Moodle row PHP reads carries its student's user id and grades (no row lost to a neighbour, none
doubled), no cell starts a formula, and a student whose name had to be written with one more backslash is named in
the summary. The whole command on a real gradebook with the issue's name (``Bs "Aback, \\"`` among nine students)
gives Moodle its nine rows; the file Python's plain ``csv.writer`` used to write is shown to lose them in PHP.

A machine without ``php`` or ``ruby`` fails these tests, naming the package to install (``make test`` installs
both). Cost: about 4 s (one PHP and one Ruby process for all the examples, one gradebook).
"""
import contextlib
import csv
import io
import json
import os
import shutil
import subprocess
import tempfile

import pytest
from gradebooks import build_gradebook
from hypothesis import given, settings, strategies as st

from coursekit.cli import main
from grader.plain import inert
from coursekit.lms.export import (FORMULA_START, MOODLE_STUDENT_COLUMNS, ClassGrades, Student, number, platform_keys,
                                  summary, with_keys, write_export)

HERE = os.path.dirname(os.path.abspath(__file__))
A, B = "03_softmax", "05_rnn"
MAXIMA = {A: 16.0, B: 5.5}
PHP_WAYS = [f"{mode} {locale}" for locale in ("C", "C.UTF-8") for mode in ("default", "backslash", "none")]


class Reader:
    """One long-lived reader process: a file path in, one JSON line out."""

    def __init__(self, argv):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        encoding="utf-8")

    def read(self, path, **also):
        """What the script answers for ``path`` (with ``also``, e.g. the LMS's users, sent as one JSON line)."""
        self.process.stdin.write((json.dumps({"path": path, **also}) if also else path) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"{self.process.args[0]} stopped (exit {self.process.poll()})"
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def _reader(command, package, script):
    if shutil.which(command) is None:
        pytest.fail(f"{command} is not installed: these tests run the LMS's own CSV reader in it. Install it with "
                    f"`apt-get install -y {package}` (make test does, as root)", pytrace=False)
    reader = Reader([command, os.path.join(HERE, script)])
    yield reader
    reader.close()


@pytest.fixture(scope="module")
def php():
    yield from _reader("php", "php-cli", "moodle_csv_reader.php")


@pytest.fixture(scope="module")
def ruby():
    yield from _reader("ruby", "ruby", "canvas_csv_reader.rb")


def python_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def ruby_rows(ruby, path):
    """{"plain": rows, "canvas": rows} as Ruby's CSV reads ``path``, an empty cell as "" (Ruby reads an unquoted
    empty cell as nil, a quoted one as ""; Canvas treats both as blank)."""
    return {how: [[cell or "" for cell in row] for row in rows] if isinstance(rows, list) else rows
            for how, rows in ruby.read(path).items()}


def php_rows(php, path):
    """{way: rows} as PHP's fgetcsv reads ``path`` each way; fails naming the ways that refused the file."""
    read = php.read(path)
    refused = {way: rows["error"] for way, rows in read.items() if isinstance(rows, dict)}
    assert not refused, f"Moodle's reader refused {path}: {refused}"
    return read


# ------------------------------------------------------------------ generated classes
NASTY = ["\\", "\\\\", "\\\\\\", '"', '\\"', '"\\', ",", ", ", "\n", "\r\n", "\t", ";", "'", "=", "+", "-", "@",
         " ", "é", "Ž", "字", "😀", "\u00a0", "\u202e", "\x00", "\x1b[31m"]
NAME = st.one_of(
    st.lists(st.sampled_from(NASTY + list("abZ 09")), max_size=12).map("".join),
    st.text(max_size=8),
    st.sampled_from(["", "\\", 'Bs "Aback, \\"', "Aback, \\", "=1+1", "@SUM(A1)", "-2", "+3", '"', '""', "\\\"\\",
                     "Zhang, Wei", "x" * 3000 + "\\", "é" * 1500 + '\\"']),
    st.builds(lambda a, b: a + b, st.text(max_size=6), st.sampled_from(["\\", "\\\\\\", ', \\', '"\\'])),
)
STUDENT = st.tuples(NAME, NAME, st.sampled_from([0, 1, 2.5, 5.5, 16, 1 / 3]),
                    st.one_of(st.none(), st.sampled_from([0, 3, 5.5])))


def class_of(people):
    """ClassGrades of ``people`` [(first, last, points on A, points on B or None: no submission)], Moodle user ids
    101, 102, ... in that order, sorted by name as read_grades sorts them."""
    students, points = [], {}
    for i, (first, last, a, b) in enumerate(people):
        sid = f"s{i}"
        students.append(Student(sid, first, last, f"{sid}@uni.example", str(101 + i)))
        points[(sid, A)] = float(a)
        if b is not None:
            points[(sid, B)] = float(b)
    students.sort(key=lambda s: (s.last_name.lower(), s.first_name.lower(), s.id))
    grades = ClassGrades([(A, MAXIMA[A]), (B, MAXIMA[B])], students, points)
    assert not with_keys(grades, {})
    return grades


@given(st.lists(STUDENT, min_size=1, max_size=9))
@settings(max_examples=150, deadline=None, database=None)
def test_every_reader_reads_every_row_the_same_and_moodle_gets_each_grade_on_its_account(php, ruby, people):
    grades = class_of(people)
    with tempfile.TemporaryDirectory() as folder:
        for platform in ("moodle", "canvas", "generic"):
            cells, left_out = platform_keys(grades, platform)
            assert not left_out, left_out  # every student has a numeric user id of their own
            path = write_export(grades, platform, os.path.join(folder, f"{platform}.csv"), cells)
            rows = python_rows(path)
            read = php_rows(php, path)
            for way in PHP_WAYS:
                assert read[way] == rows, (platform, way)
            assert ruby_rows(ruby, path)["plain"] == rows, platform
            assert not [c for row in rows for c in row if c.startswith(FORMULA_START)], platform
            if platform == "moodle":
                assert rows[0] == MOODLE_STUDENT_COLUMNS + [A, B]
                got = {row[0]: row[3:] for row in rows[1:]}
                assert len(got) == len(rows) - 1 == len(grades.students)  # no row lost, none doubled
                assert got == {s.lms_user_id: [number(grades.score(s.id, a)) for a in (A, B)]
                               for s in grades.students}
                named = "\n".join(summary(grades, platform, path, left_out))
                for row in rows[1:]:  # a name written otherwise than shown escaped (inert) and as text is named
                    s = next(s for s in grades.students if s.lms_user_id == row[0])
                    shown = ["'" * inert(n).startswith(FORMULA_START) + inert(n) for n in (s.first_name, s.last_name)]
                    assert (row[1:3] != shown) == (f"NAME WRITTEN WITH ONE MORE BACKSLASH {s.id}:" in named), row


def test_a_backslash_before_the_closing_quote_no_longer_swallows_the_rows_after_it(php):
    """The rule the export now avoids, in PHP itself: the row Python's plain csv.writer wrote for ``Bs "Aback, \\"``
    (``46,Bs,"Aback, \\",14``) leaves its cell open with the backslash as escape, and the rows after it are read
    into it (or the file refused); written with the backslash doubled, every way reads all three rows."""
    with tempfile.TemporaryDirectory() as folder:
        old = os.path.join(folder, "old.csv")
        with open(old, "w", newline="", encoding="utf-8") as f:
            csv.writer(f).writerows([MOODLE_STUDENT_COLUMNS + [A], ["46", "Bs", 'Aback, \\', "14"],
                                     ["47", "Ann", "Lee", "3"], ["48", "Ben", "Ng", "5"]])
        read = php.read(old)
        for way in PHP_WAYS:
            if not way.startswith("none"):
                assert read[way] != python_rows(old), way
                assert isinstance(read[way], dict) or len(read[way]) < 4, way
        grades = class_of([("Bs", 'Aback, \\', 14, None), ("Ann", "Lee", 3, None), ("Ben", "Ng", 5, None)])
        new = write_export(grades, "moodle", os.path.join(folder, "new.csv"))
        read = php_rows(php, new)
        for way in PHP_WAYS:
            assert {row[0]: row[3] for row in read[way][1:]} == {"101": "14", "102": "3", "103": "5"}, way


# ------------------------------------------------------------------ the whole command on a real gradebook
CLASS = {  # id: (first, last, email, Moodle user id), as the nine
    "bs": ("Bs", 'Aback, \\', "bs@uni.example", "46"),
    **{f"p{i}": (f"P{i}", f"Person{i}", f"p{i}@uni.example", str(50 + i)) for i in range(7)},
    "quote": ('"Q', 'Quote \\"x\\"', "q@uni.example", "60"),
}
SCORES = {sid: {A: {"softmax_basic": i % 3, "log_softmax_basic": 1.5}} for i, sid in enumerate(CLASS)}


def test_course_export_for_moodle_gives_php_every_row_and_names_the_student_whose_name_changed(tmp_path, php):
    """`course export --lms moodle` on a gradebook of nine, one named ``Bs "Aback, \\"`` and one with backslashed
    quotes: PHP's fgetcsv, each way, reads nine rows, each user id with its own grade, and the command names the
    two students whose names were written with one more backslash."""
    root = str(tmp_path / "course")
    os.makedirs(root)
    build_gradebook(root, {A: {"softmax_basic": 2, "log_softmax_basic": 2.5}}, CLASS, SCORES)
    out, printed = tmp_path / "moodle.csv", io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["export", "--course", root, "--lms", "moodle", "--out", str(out), A]) == 0
    read = php_rows(php, str(out))
    want = {CLASS[sid][3]: number(sum(SCORES[sid][A].values())) for sid in CLASS}
    for way in PHP_WAYS:
        assert len(read[way]) == 1 + 9, way
        assert {row[0]: row[3] for row in read[way][1:]} == want, way
    assert "NAME WRITTEN WITH ONE MORE BACKSLASH bs: 'Aback, \\\\' as 'Aback, \\\\\\\\'" in printed.getvalue()
    assert "NAME WRITTEN WITH ONE MORE BACKSLASH quote:" in printed.getvalue()


# ------------------------------------------------------------------ a term's class, imported by Canvas's rules in Ruby
TERM = {  # id: (first, last, email, Canvas user id from their launch)
    "wz1": ("Wei", "Zhang", "wz1@uni.example", "4211"),       # enrolled
    "wz2": ("Wei", "Zhang", "wz2@uni.example", "4299"),       # the same name, removed from the Canvas course
    "rory": ("Rory", "Roe", "rory@uni.example", ""),          # never launched: roster.csv's SIS login id
    "odd": ('=cmd|"/c calc"!A1', 'Aback, \\', "odd@uni.example", "4300"),
}
TERM_SCORES = {"wz1": {A: {"softmax_basic": 2, "log_softmax_basic": 13}},   # 15
               "wz2": {A: {"softmax_basic": 1, "log_softmax_basic": 0}},    # 1
               "rory": {A: {"softmax_basic": 2, "log_softmax_basic": 1}},   # 3
               "odd": {A: {"softmax_basic": 0, "log_softmax_basic": 4}}}    # 4
CANVAS_USERS = [  # the Canvas course's current students (wz2 was removed)
    {"id": 4211, "name": "Wei Zhang", "sortable_name": "Zhang, Wei", "sis_user_id": "S4211", "login": "wzhang"},
    {"id": 303, "name": "Rory Roe", "sortable_name": "Roe, Rory", "sis_user_id": "S303", "login": "rroe"},
    {"id": 4300, "name": "Odd", "sortable_name": "Odd", "sis_user_id": "S4300", "login": "odd"}]


def canvas_export(root, out, code=0):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        assert main(["export", "--course", root, "--lms", "canvas", "--out", str(out), A]) == code
    return printed.getvalue()


def test_a_removed_student_is_left_out_and_never_matched_by_name_by_canvas(tmp_path, ruby, php):
    """The issue's Wei Zhang: the class list took wz2 out of the course (coursekit.hub.enrol's departed list, as the
    sync writes it), and Canvas no longer has them. Canvas's importer (Ruby's CSV with Canvas's options, then
    process_student's order: ID among the current students, SIS user id, SIS login id, then the name) puts wz1's 15,
    Rory's 3 (by roster.csv's SIS login id) and the hostile name's 4 on their own accounts; wz2 is left out and named,
    in Moodle's file too (PHP reads it whole). The file written as before the departed list (wz2's row with their
    ID) is shown to give wz1 wz2's 1 point by name; when wz2 comes back, their row is written again and lands on
    their own account. Cost: about 2 s."""
    from coursekit.hub.enrol import departed_here
    root = str(tmp_path / "course")
    os.makedirs(root)
    build_gradebook(root, {A: {"softmax_basic": 2, "log_softmax_basic": 14}}, TERM, TERM_SCORES)
    with open(os.path.join(root, "roster.csv"), "w") as f:
        f.write("id,name,sis_login_id\nrory,Rory Roe,rroe\n")
    before = canvas_export(root, tmp_path / "before.csv")
    imported = ruby.read(str(tmp_path / "before.csv"), users=CANVAS_USERS)["imported"]
    assert imported["4211"] == {A: "1"}  # the rule the departed list avoids: wz2's row, not found by ID, by name
    assert "LEFT OUT" not in before

    departed_here(root, {"wz2": "left the LMS course: no longer in the LMS course"}, [])
    printed = canvas_export(root, tmp_path / "canvas.csv", code=1)  # wz2 left out: exit 1
    imported = ruby.read(str(tmp_path / "canvas.csv"), users=CANVAS_USERS)["imported"]
    assert imported == {"4211": {A: "15"}, "303": {A: "3"}, "4300": {A: "4"}}
    assert "LEFT OUT wz2 (Wei Zhang): left the LMS course: no longer in the LMS course" in printed
    assert ruby_rows(ruby, str(tmp_path / "canvas.csv"))["plain"] == python_rows(tmp_path / "canvas.csv")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        assert main(["export", "--course", root, "--lms", "moodle", "--out", str(tmp_path / "m.csv"), A]) == 1
    for way, rows in php_rows(php, str(tmp_path / "m.csv")).items():
        assert {row[0]: row[3] for row in rows[1:]} == {"4211": "15", "4300": "4"}, way
    assert "LEFT OUT wz2 (Wei Zhang): left the LMS course" in printed.getvalue()

    departed_here(root, {}, ["wz2"])  # listed by the LMS again: back in the Canvas course
    canvas_export(root, tmp_path / "back.csv")
    back = ruby.read(str(tmp_path / "back.csv"), users=CANVAS_USERS + [
        {"id": 4299, "name": "Wei Zhang", "sortable_name": "Zhang, Wei", "sis_user_id": "S4299", "login": "wz2"}])
    assert back["imported"] == {"4211": {A: "15"}, "4299": {A: "1"}, "303": {A: "3"}, "4300": {A: "4"}}
