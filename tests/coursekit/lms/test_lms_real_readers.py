"""The export files read and imported by the LMSs' own importers, run in their own languages (lms_readers.py):
Moodle's CSV grade import in PHP (``moodle_csv_reader.php``: moodle lib/csvlib.class.php ``csv_import_reader``, which
reads the upload with PHP's ``fgetcsv`` and then Moodle's own stored copy of it, and
grade/import/csv/classes/load_data.php ``prepare_import_grade_data``, which maps each row to a user of the site),
Canvas's gradebook import in Ruby (``canvas_csv_reader.rb``: canvas-lms lib/gradebook_importer.rb, its CSV options
and converters and ``process_student``'s order), and Python's ``csv``. Each script cites the commit it follows.

PHP reads each file six ways: the escape character left out (as Moodle calls ``fgetcsv``; PHP < 9 then takes the
backslash), given as the backslash, and given as "" (none: PHP 9's default), each under the C locale and C.UTF-8
(Moodle sets its language's UTF-8 locale, and ``fgetcsv`` steps through multibyte characters by the locale).

Generated classes with hostile names (backslashes before quotes and at the end, quotes, commas, newlines, non-ASCII,
the empty string, very long, cells starting with ``= + - @``, ``Points Possible``, same-name students): every reader
reads every row of every format the same; Moodle's import (map from ``User ID`` to ``userid``, the identifier the
docs name) and Canvas's put each student's grades on their own account, every row by its key, none lost to a
neighbour and none doubled; a student Canvas would misread is left out and named; no cell starts a formula; and a
student whose name had to be written otherwise (a backslash more, or a space before a quote) is named. Moodle's
four "map to" identifiers are each tried on the file: only ``userid`` is one it carries. The whole command on a real gradebook with the issue's name
(``Bs "Aback, \\"`` among nine students) gives Moodle its nine rows; the file Python's plain ``csv.writer`` used to
write is shown to lose them in PHP.

Cost: about 6 s (one PHP and one Ruby process for all the examples, two gradebooks).
"""
import contextlib
import io
import os
import tempfile

from gradebooks import build_gradebook
from hypothesis import given, settings, strategies as st
from lms_readers import PHP_WAYS, canvas_import, moodle_import, php_rows, python_rows, ruby_rows, written

from coursekit.cli import main
from grader.plain import inert
from coursekit.lms.cells import canvas_name
from coursekit.lms.export import (FORMULA_START, MOODLE_STUDENT_COLUMNS, ClassGrades, Student, number, platform_keys,
                                  summary, with_keys, write_export)

A, B = "03_softmax", "05_rnn"
MAXIMA = {A: 16.0, B: 5.5}


# ------------------------------------------------------------------ generated classes
NASTY = ["\\", "\\\\", "\\\\\\", '"', '\\"', '"\\', ",", ", ", "\n", "\r\n", "\t", ";", "'", "=", "+", "-", "@",
         " ", "é", "Ž", "字", "😀", "\u00a0", "\u202e", "\x00", "\x1b[31m"]
NAME = st.one_of(
    st.lists(st.sampled_from(NASTY + list("abZ 09")), max_size=12).map("".join),
    st.text(max_size=8),
    st.sampled_from(["", "\\", 'Bs "Aback, \\"', "Aback, \\", "=1+1", "@SUM(A1)", "-2", "+3", '"', '""', "\\\"\\",
                     "Zhang, Wei", "x" * 3000 + "\\", "é" * 1500 + '\\"', "Points Possible", "Muted", "1,5", ","]),
    st.builds(lambda a, b: a + b, st.text(max_size=6), st.sampled_from(["\\", "\\\\\\", ', \\', '"\\'])),
)
STUDENT = st.tuples(NAME, NAME, st.sampled_from([0, 1, 2.5, 5.5, 16, 1 / 3]),
                    st.one_of(st.none(), st.sampled_from([0, 3, 5.5])))


def class_of(people):
    """ClassGrades of ``people`` [(first, last, points on A, points on B or None: no submission)], LMS user ids
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


def moodle_site(grades):
    """Moodle's users for the class: each student's account (their user id, a username, an idnumber and an email
    that two students may share, as Moodle allows), and site users whose username or idnumber is another
    student's user id, which a wrong "map to" would find."""
    users = [{"id": int(s.lms_user_id), "username": f"u{s.lms_user_id}", "idnumber": inert(s.last_name)[:100],
              "email": "same@uni.example", "enrolled": True} for s in grades.students]
    return users + [{"id": 2, "username": "admin", "idnumber": "", "email": "admin@uni.example"},
                    {"id": 9001, "username": "101", "idnumber": "102", "email": "x@uni.example"}]


def canvas_course(grades):
    """Canvas's students for the class: each by their user id, their name and sortable name as written."""
    return [{"id": int(s.lms_user_id), "name": " ".join(p for p in (s.first_name, s.last_name) if p),
             "sortable_name": canvas_name(s)} for s in grades.students]


@given(st.lists(STUDENT, min_size=1, max_size=9))
@settings(max_examples=150, deadline=None, database=None)
def test_every_reader_reads_every_row_the_same_and_moodle_gets_each_grade_on_its_account(php, ruby, people):
    grades = class_of(people)
    own = {s.lms_user_id: {a: number(grades.score(s.id, a)) for a in (A, B)} for s in grades.students}
    with tempfile.TemporaryDirectory() as folder:
        for platform in ("moodle", "canvas", "generic"):
            cells, left_out = platform_keys(grades, platform)
            assert left_out == {}, left_out  # a name ("Points Possible" too) costs no row: Canvas's has none
            path = write_export(grades, platform, os.path.join(folder, f"{platform}.csv"), cells)
            rows = python_rows(path)
            read = php_rows(php, path)
            for way in PHP_WAYS:
                assert read[way] == rows, (platform, way)
            assert ruby_rows(ruby, path)["plain"] == rows, platform
            assert not [c for row in rows for c in row if c.startswith(FORMULA_START)], platform
            if platform == "moodle":
                assert rows[0] == MOODLE_STUDENT_COLUMNS + [A, B]
                imported = moodle_import(php, path, moodle_site(grades))
                assert imported["error"] is None, imported
                assert imported["grades"] == own  # each on their own account, none lost to a neighbour
                assert sorted(user for _, user in imported["rows"]) == sorted(own)  # none doubled
                named = "\n".join(summary(grades, platform, path, left_out))
                for row in rows[1:]:  # a name written otherwise than shown escaped (inert) and as text is named
                    s = next(s for s in grades.students if s.lms_user_id == row[0])
                    shown = ["'" * inert(n).startswith(FORMULA_START) + inert(n) for n in (s.first_name, s.last_name)]
                    assert (row[1:3] != shown) == (f"NAME WRITTEN OTHERWISE {s.id}:" in named), row
            if platform == "canvas":
                imported = canvas_import(ruby, path, canvas_course(grades))
                assert imported["imported"] == own
                assert sorted(row[1] for row in imported["rows"]) == sorted(own)
                assert all(row[0] == "" for row in rows[2:])  # no Student cell: nothing to match by name
                assert {how for _, _, how in imported["rows"]} <= {"id"}  # by ID, never by name


def test_a_backslash_before_the_closing_quote_no_longer_swallows_the_rows_after_it(php):
    """The rule the export now avoids, in PHP itself: the row Python's plain csv.writer wrote for ``Bs "Aback, \\"``
    (``46,Bs,"Aback, \\",14``) leaves its cell open with the backslash as escape, and the rows after it are read
    into it (or the file refused); written with the backslash doubled, every way reads all three rows."""
    with tempfile.TemporaryDirectory() as folder:
        old = written([MOODLE_STUDENT_COLUMNS + [A], ["46", "Bs", 'Aback, \\', "14"], ["47", "Ann", "Lee", "3"],
                       ["48", "Ben", "Ng", "5"]])
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
    two students whose names were written otherwise for PHP (a backslash more; a space before a quote)."""
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
    site = [{"id": int(c[3]), "username": sid, "idnumber": "", "email": c[2], "enrolled": True}
            for sid, c in CLASS.items()]
    imported = moodle_import(php, str(out), site)
    assert imported["error"] is None and imported["grades"] == {u: {A: g} for u, g in want.items()}
    assert "NAME WRITTEN OTHERWISE bs: 'Aback, \\\\' as 'Aback, \\\\\\\\'" in printed.getvalue()
    assert "NAME WRITTEN OTHERWISE quote:" in printed.getvalue()


# ------------------------------------------------------------------ Moodle's "map to" identifiers
MOODLE_CLASS = [("s46", "Bs", 'Aback, \\', "46", 14.0), ("s50", "Wei", "Zhang", "50", 15.0),
                ("s51", "Wei", "Zhang", "51", 1.0)]  # id, first, last, Moodle user id, points
MOODLE_SITE = [  # the class's accounts (the two Wei Zhangs share an email, as Moodle allows), and three other
    # users of the site whose username, idnumber and email are the class's user ids (a numeric username or an
    # idnumber that is a number is common: a student number)
    {"id": 46, "username": "bs", "idnumber": "S46", "email": "bs@uni.example", "enrolled": True},
    {"id": 50, "username": "wz1", "idnumber": "S50", "email": "wz@uni.example", "enrolled": True},
    {"id": 51, "username": "wz2", "idnumber": "S51", "email": "wz@uni.example", "enrolled": True},
    *({"id": 900 + int(u), "username": u, "idnumber": u, "email": f"{u}@other.example"} for u in ("46", "50", "51"))]


def test_moodle_imports_the_file_by_userid_the_identifier_the_docs_name(tmp_path, php):
    """Moodle's "Map to" offers userid, username, useridnumber and useremail (grade_import_mapping_form), and
    looks the mapped cell up among every user of the site. The file carries one of them, the Moodle user id
    (``User ID``): mapped to userid, each grade lands on its own account, the two Wei Zhangs apart. Mapped to
    username or useridnumber, the same column finds the site's users whose username or idnumber is that number,
    and every grade lands on another account with no error; to useremail, it matches nobody and Moodle refuses
    the file. So the docs and the command's summary name userid. Cost: well under a second."""
    students = [Student(sid, first, last, "", uid) for sid, first, last, uid, _ in MOODLE_CLASS]
    grades = ClassGrades([(A, MAXIMA[A])], students, {(sid, A): p for sid, _, _, _, p in MOODLE_CLASS})
    with_keys(grades, {})
    path = write_export(grades, "moodle", str(tmp_path / "moodle.csv"))
    own = {uid: {A: number(p)} for _, _, _, uid, p in MOODLE_CLASS}
    by_userid = moodle_import(php, path, MOODLE_SITE, mapto="userid")
    assert by_userid["error"] is None and by_userid["grades"] == own and not by_userid["unenrolled"]
    for mapto in ("username", "useridnumber"):
        wrong = moodle_import(php, path, MOODLE_SITE, mapto=mapto)
        assert wrong["error"] is None and wrong["grades"] == {str(900 + int(u)): g for u, g in own.items()}, mapto
    assert moodle_import(php, path, MOODLE_SITE, mapto="useremail")["error"].startswith("usermappingerror")
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "lms.md"), encoding="utf-8").read()
    assert "map from\n  `User ID` to `userid`" in docs or "map from `User ID` to `userid`" in " ".join(docs.split())
    assert "map from User ID to userid" in "\n".join(summary(grades, "moodle", path))


def test_moodle_refuses_a_whole_file_with_a_grade_above_100_and_the_export_says_so(tmp_path, php):
    """Moodle's insert_grade_record aborts the whole import at a grade above 100 unless the site allows
    unlimited grades (gradepointmax): an assignment out of 150 with a score of 120 is refused by the import, taken
    with gradepointmax 200, and the export's summary says so before anyone tries. Cost: well under a second."""
    students = [Student("a", "Ann", "Lee", "", "46"), Student("b", "Ben", "Ng", "", "50")]
    grades = ClassGrades([("big", 150.0)], students, {("a", "big"): 120.0, ("b", "big"): 90.0})
    with_keys(grades, {})
    path = write_export(grades, "moodle", str(tmp_path / "moodle.csv"))
    assert moodle_import(php, path, MOODLE_SITE)["error"] == "gradevaluetoobig: 100"
    assert moodle_import(php, path, MOODLE_SITE, gradepointmax=200)["grades"] == {"46": {"big": "120"},
                                                                                   "50": {"big": "90"}}
    said = "\n".join(summary(grades, "moodle", path))
    assert "Moodle refuses the whole import when a grade is above 100 (big)" in said
    grades.points[("a", "big")] = 100.0
    assert "above 100" not in "\n".join(summary(grades, "moodle", path))


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
    imported = canvas_import(ruby, str(tmp_path / "before.csv"), CANVAS_USERS)
    assert imported["imported"]["4211"] == {A: "15"}  # wz2's row, with no departed list: a missing student,
    assert ["missing: ", "missing"] in [row[1:] for row in imported["rows"]]  # never wz1's by name
    assert imported["imported"]["missing: "] == {A: "1"}
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
    site = [{"id": u["id"], "username": u["login"], "idnumber": u["sis_user_id"], "email": "", "enrolled": True}
            for u in CANVAS_USERS] + [{"id": 4299, "username": "wz2", "idnumber": "", "email": ""}]  # unenrolled
    assert moodle_import(php, str(tmp_path / "m.csv"), site)["grades"] == {"4211": {A: "15"}, "4300": {A: "4"}}
    assert "LEFT OUT wz2 (Wei Zhang): left the LMS course" in printed.getvalue()

    departed_here(root, {}, ["wz2"])  # listed by the LMS again: back in the Canvas course
    canvas_export(root, tmp_path / "back.csv")
    back = ruby.read(str(tmp_path / "back.csv"), users=CANVAS_USERS + [
        {"id": 4299, "name": "Wei Zhang", "sortable_name": "Zhang, Wei", "sis_user_id": "S4299", "login": "wz2"}])
    assert back["imported"] == {"4211": {A: "15"}, "4299": {A: "1"}, "303": {A: "3"}, "4300": {A: "4"}}


SAME_NAMES = st.sampled_from(["Wei", "Zhang", "", "Wei Zhang", "Zhang, Wei", "User", "\\", "Points Possible"])


@given(st.lists(st.tuples(SAME_NAMES, SAME_NAMES, st.booleans(), st.sampled_from([0, 1, 5.5, 16])), min_size=1,
                max_size=8))
@settings(max_examples=100, deadline=None, database=None)
def test_a_row_canvas_finds_by_no_id_is_a_missing_student_never_a_namesakes_grade(ruby, people):
    """Students removed from the Canvas course that nothing told the hub of (no class list, or one a small class
    keeps): their rows are still written, with their IDs, and Canvas finds no current student by the ID. Generated
    classes of namesakes (names from a handful, the empty one and Canvas's default "User" among them), some removed:
    Canvas's import puts each enrolled student's grade on their own account by ID, and every removed student's row
    becomes a missing student for the instructor to resolve, never matched by name (the Student cell is empty, read
    as nil, and no Canvas user's name or sortable name is nil). Cost: about 1 s."""
    grades = class_of([(first, last, points, None) for first, last, _, points in people])
    removed = {str(101 + i) for i, (_, _, gone, _) in enumerate(people) if gone}  # class_of's ids, in order
    users = [u for u in canvas_course(grades) if str(u["id"]) not in removed]
    users += [{"id": 9000 + i, "name": name, "sortable_name": name} for i, name in enumerate(("", "User", "Zhang, Wei"))]
    with tempfile.TemporaryDirectory() as folder:
        path = write_export(grades, "canvas", os.path.join(folder, "canvas.csv"))
        imported = canvas_import(ruby, path, users)
    own = {s.lms_user_id: {A: number(grades.score(s.id, A)), B: "0"} for s in grades.students}
    assert {u: g for u, g in imported["imported"].items() if not u.startswith("missing")} == {
        u: g for u, g in own.items() if u not in removed}
    assert sorted(how for _, _, how in imported["rows"]) == sorted(
        "missing" if s.lms_user_id in removed else "id" for s in grades.students)
