"""The LMS's own importers read the files `course export --lms` writes: every grade lands on the student's own
account, even for two students of the same name and for a student known only to the course's roster.csv; a student
with no key is left out and named.

The importers run in their own languages (lms_readers.py; each script cites the source and commit it follows):

* Canvas's (``canvas_csv_reader.rb``): canvas-lms lib/gradebook_importer.rb. The header must have "Student" and "ID"
  first, then "SIS User ID" and "SIS Login ID"; a "Points Possible" row is no student; ``process_student`` takes a
  row's user by ``ID`` (Ruby's ``to_i`` of the cell, when it is not blank) among the course's students, else by SIS
  user id, else by SIS login id (each cell as Canvas's CSV converters leave it: ``1,5`` is read ``1.5``), else the
  first student whose name or sortable name is the ``Student`` cell, else a new user (a "missing student").
* Moodle's (``moodle_csv_reader.php``): moodle grade/import/csv/classes/load_data.php. ``prepare_import_grade_data``
  walks the rows with one ``$this->studentid`` for the whole file; ``map_user_data_with_value`` sets it only when the
  mapped cell is not PHP-``empty()`` ("Skip invalid row with blank user field": "" and "0"), so a blank key or "0"
  keeps the previous row's user; a key that matches no user of the site (``check_user_exists``) or a first row with
  none aborts the whole import.

Cost: about 4 s (one gradebook, read once; a hundred generated rosters, each file imported by its LMS).
"""
import contextlib
import copy
import csv
import functools
import io
import os
import re
import tempfile
from collections import Counter

import pytest
from gradebooks import build_gradebook
from hypothesis import given, settings, strategies as st
from lms_readers import canvas_import, moodle_import

from coursekit.cli import main
from coursekit.lms.export import FORMULA_START, canvas_reads, keyed, read_grades, write_export
from coursekit.pipeline import gradebook

A = "03_softmax"
CELLS = {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2.5}}
STUDENTS = {  # id: (first, last, email, lms_user_id from their launch)
    "alex1": ("Alex", "Smith", "a1@uni.example", "101"),
    "alex2": ("Alex", "Smith", "a2@uni.example", "102"),  # the same name
    "rory": ("Rory", "Roe", "rory@uni.example", ""),      # never launched: known to roster.csv only
    "nia": ("Nia", "Key", "nia@uni.example", ""),         # never launched, no key anywhere
}
SCORES = {"alex1": {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2.5}},   # 5.5
          "alex2": {A: {"softmax_basic": 1, "softmax_edge": 0, "log_softmax_basic": 0}},     # 1
          "rory": {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 0}},      # 3
          "nia": {A: {"softmax_basic": 0, "softmax_edge": 1, "log_softmax_basic": 1}}}       # 2
POINTS = {"alex1": "5.5", "alex2": "1", "rory": "3", "nia": "2"}
# the LMS's accounts: id, name, sortable name, SIS user id, login (Canvas); Moodle's ids are the same numbers
USERS = [{"id": 101, "name": "Alex Smith", "sortable_name": "Smith, Alex", "sis_user_id": "S101", "login": "as1"},
         {"id": 102, "name": "Alex Smith", "sortable_name": "Smith, Alex", "sis_user_id": "S102", "login": "as2"},
         {"id": 303, "name": "Rory Roe", "sortable_name": "Roe, Rory", "sis_user_id": "S303", "login": "rroe"},
         {"id": 404, "name": "Nia Key", "sortable_name": "Key, Nia", "sis_user_id": "S404", "login": "nkey"}]
MOODLE_USERS = [{"id": u["id"], "username": u["login"], "idnumber": u["sis_user_id"], "email": "", "enrolled": True}
                for u in USERS]
OWN = {"alex1": "101", "alex2": "102", "rory": "303", "nia": "404"}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("lms-import-course"))
    build_gradebook(root, CELLS, STUDENTS, SCORES)
    return root


def export(course, platform, roster, out):
    """`course export --lms PLATFORM` with ``roster`` (its text) as the course folder's roster.csv; it exits 1, as
    a student is left out every time here."""
    with open(f"{course}/roster.csv", "w") as f:
        f.write(roster)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["export", "--course", course, "--lms", platform, "--out", str(out), A]) == 1
    with open(out, newline="", encoding="utf-8") as f:
        return list(csv.reader(f)), printed.getvalue()


def test_canvas_puts_two_same_name_students_and_a_roster_only_student_on_their_own_accounts(course, tmp_path, ruby):
    """Canvas's importer finds the two Alex Smiths by their Canvas user ids (their launches' canvas_user_id) and
    Rory, who never launched, by the SIS login id roster.csv gives; Nia, with no key, is not in the file and the
    command names her. Nobody's grade lands on another account and no row makes a "missing student"."""
    rows, printed = export(course, "canvas", "id,name,sis_login_id\nrory,Rory Roe,rroe\n", tmp_path / "c.csv")
    imported = canvas_import(ruby, str(tmp_path / "c.csv"), USERS)
    assert imported["imported"] == {OWN[s]: {A: POINTS[s]} for s in ("alex1", "alex2", "rory")}
    assert [row[2] for row in imported["rows"]] == ["sis_login_id", "id", "id"]  # Roe, Smith, Smith
    assert "LEFT OUT nia (Nia Key): no key Canvas matches by" in printed
    assert all(any(row[1:4]) for row in rows[2:])  # every row has a key Canvas matches before the name


def test_canvas_matches_a_row_without_a_key_by_name_so_the_old_file_swapped_the_namesakes(ruby):
    """The rule the export now avoids: the row the export used to write for alex2 (a blank ID, the Unix name as SIS
    Login ID, which is no Canvas login) falls through to the name, and Canvas gives it to the first Alex Smith."""
    old = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A],
           ["Smith, Alex", "", "", "alex2", "", POINTS["alex2"]]]
    assert canvas_import(ruby, old, USERS)["imported"] == {"101": {A: POINTS["alex2"]}}


def test_moodle_puts_two_same_name_students_and_a_roster_only_student_on_their_own_accounts(course, tmp_path, php):
    """Moodle's import (Map from User ID to userid) finds each Alex Smith by the user id of their launch and Rory
    by roster.csv's lms_user_id; Nia, with none, is not in the file (a blank key would give her grade to the user
    of the row before) and the command names her."""
    rows, printed = export(course, "moodle", "id,name,lms_user_id\nrory,Rory Roe,303\n", tmp_path / "m.csv")
    imported = moodle_import(php, str(tmp_path / "m.csv"), MOODLE_USERS)
    assert imported["grades"] == {OWN[s]: {A: POINTS[s]} for s in ("alex1", "alex2", "rory")}
    assert "LEFT OUT nia (Nia Key): no Moodle user id" in printed
    assert all(row[0].strip() for row in rows[1:])


@pytest.mark.parametrize("blank", ["", "0", " 0 "])
def test_moodle_gives_a_blank_key_row_to_the_previous_rows_user(php, blank):
    """The rule the export now avoids: a row whose User ID is blank, or "0" (PHP's ``empty()`` holds both), after
    alex1's row is imported as alex1 (her grade replaced by Nia's); such a first row aborts the whole import."""
    header = ["User ID", "First name", "Last name", A]
    rows = [header, ["101", "Alex", "Smith", POINTS["alex1"]], [blank, "Nia", "Key", POINTS["nia"]]]
    assert moodle_import(php, rows, MOODLE_USERS)["grades"] == {"101": {A: POINTS["nia"]}}
    aborted = moodle_import(php, [header, [blank, "Nia", "Key", "2"]], MOODLE_USERS)
    assert aborted["error"] == "usermappingerrorusernotfound"


@pytest.mark.parametrize("platform", ["canvas", "moodle"])
def test_a_roster_key_that_contradicts_the_launch_or_is_shared_leaves_those_students_out(course, tmp_path, platform):
    """roster.csv giving alex1 another LMS user id than her launch did, and Rory alex2's id: alex1, alex2 and Rory
    are each left out and named with the reason; the file holds nobody else's grade on their accounts."""
    roster = "id,name,lms_user_id\nalex1,Alex Smith,999\nrory,Rory Roe,102\n"
    rows, printed = export(course, platform, roster, tmp_path / "x.csv")
    assert "LEFT OUT alex1 (Alex Smith): the LMS user id of their launch ('101') and roster.csv's ('999') differ" \
        in printed
    key = "ID" if platform == "canvas" else "User ID"
    assert f"LEFT OUT alex2 (Alex Smith): shares the {key} '102' with rory" in printed
    assert f"LEFT OUT rory (Rory Roe): shares the {key} '102' with alex2" in printed
    assert len(rows) == (2 if platform == "canvas" else 1)  # the header (and Points Possible): no student row


KEY_TEXT = st.one_of(st.just(""), st.just(" "), st.text(min_size=1, max_size=12),
                     st.sampled_from(["101", "102", "303", "=1+1", "@x", "-5", "\t7", "rroe", "S303", "7\n", "0", "00",
                                      "0101", "1,5", "5.", ",", "1.234,5", "Muted", "a\\"]))


def lms_accounts(grades):
    """The LMS's account of each student, as the keys the launches and roster.csv gave them say (``grades.keys``,
    after ``keyed``): their user id (as the LMS reads a number: 0101 is 101), SIS user id and login, each only when
    no other student was given it; an id of their own otherwise. {student: account}."""
    def numeric(v):
        return int(v) if re.fullmatch(r"[0-9]{1,18}", v or "") and int(v) else None
    given = {s.id: grades.keys.get(s.id, {}) for s in grades.students}
    counts = Counter((k, numeric(v) if k == "lms_user_id" else v) for keys in given.values() for k, v in keys.items())

    def own(sid, key):
        v = given[sid].get(key)
        v = numeric(v) if key == "lms_user_id" else v
        return v if v is not None and counts[(key, v)] == 1 else None
    return {s.id: {"id": own(s.id, "lms_user_id") or 10 ** 15 + i, "name": f"{s.first_name} {s.last_name}",
                   "sortable_name": f"{s.last_name}, {s.first_name}", "sis_user_id": own(s.id, "sis_user_id"),
                   "login": own(s.id, "sis_login_id")} for i, s in enumerate(grades.students)}


@given(st.dictionaries(st.sampled_from(sorted(STUDENTS)),
                       st.fixed_dictionaries({}, optional={"lms_user_id": KEY_TEXT, "sis_user_id": KEY_TEXT,
                                                           "sis_login_id": KEY_TEXT})),
       st.sampled_from(["canvas", "moodle"]))
@settings(max_examples=100, deadline=None, database=None)
def test_no_roster_makes_a_row_without_a_key_or_one_a_spreadsheet_would_run(course, php, ruby, roster, platform):
    """Generated roster keys (blank, spaces, formulas, control characters, 0, numbers Canvas's CSV converter would
    change, another student's id): every student is either written with a key the LMS matches by, or left out and
    named; no written key is blank, "0", starts a formula, holds a control character, is changed by the reader or
    is written for two students. The file is then imported by the LMS's own importer into accounts that carry the
    keys roster.csv gave: each written row lands on its own student's account, by a key (never by name), and no
    two rows on one."""
    grades = copy.deepcopy(class_grades(course))
    keys = {sid: {k: v.strip() for k, v in cols.items() if v.strip()} for sid, cols in roster.items()}
    cells, left_out = keyed_from(grades, platform, keys)
    assert set(cells) | set(left_out) == set(STUDENTS) and not set(cells) & set(left_out)
    for sid, row in cells.items():
        assert any(row) and all(not c.startswith(FORMULA_START) and c.isprintable() for c in row), (sid, row)
        assert row[0] != "0" and all(canvas_reads(c) == c for c in row), (sid, row)
        if platform == "moodle":
            assert row[0].isdigit()
    for i in range(len(next(iter(cells.values()), ()))):
        column = [row[i] for row in cells.values() if row[i]]
        assert len(column) == len(set(column))
    accounts = lms_accounts(grades)
    want = {str(accounts[sid]["id"]): {A: POINTS[sid]} for sid in cells}
    with tempfile.TemporaryDirectory() as folder:
        path = write_export(grades, platform, os.path.join(folder, "x.csv"), cells)
        if platform == "canvas":
            imported = canvas_import(ruby, path, accounts.values())
            assert imported["imported"] == want
            assert sorted(row[1] for row in imported["rows"]) == sorted(want)
            assert {how for _, _, how in imported["rows"]} <= {"id", "sis_user_id", "sis_login_id"}
        else:
            site = [{"id": a["id"], "username": f"u{a['id']}", "idnumber": "", "email": "", "enrolled": True}
                    for a in accounts.values()]
            imported = moodle_import(php, path, site)
            assert imported["error"] is None and imported["grades"] == want
            assert sorted(user for _, user in imported["rows"]) == sorted(want)


@functools.lru_cache
def class_grades(course):
    """The course's grades, read from its gradebook once (each example takes a copy: ``keyed`` sets its keys)."""
    with gradebook(course) as gb:
        return read_grades(gb, [A])


def keyed_from(grades, platform, roster):
    """``coursekit.lms.export.keyed`` with the roster given as {student: {key: value}} instead of a file."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "roster.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "name", "lms_user_id", "sis_user_id", "sis_login_id"])
            for sid, cols in roster.items():
                writer.writerow([sid, ""] + [cols.get(k, "") for k in ("lms_user_id", "sis_user_id", "sis_login_id")])
        return keyed(grades, platform, path)


@given(st.lists(st.tuples(st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True), st.integers(1, 10 ** 9)), min_size=1,
                max_size=6, unique_by=lambda t: t[0]), st.booleans())
@settings(max_examples=50, deadline=None, database=None)
def test_a_roster_saved_with_a_bom_gives_the_same_keys(tmp_path_factory, rows, crlf):
    """A spreadsheet saves roster.csv as UTF-8 with a byte order mark (Excel's "CSV UTF-8"), and perhaps CRLF line
    ends: its keys are those of the same file without them (the header's ``id`` is still ``id``), never {} and every
    student left out. Generated rosters. Cost: well under a second."""
    from coursekit.lms.export import roster_keys
    folder = tmp_path_factory.mktemp("bom")
    end = "\r\n" if crlf else "\n"
    text = end.join(["id,name,lms_user_id"] + [f"{sid},{sid.title()},{uid}" for sid, uid in rows]) + end
    plain, marked = folder / "plain.csv", folder / "marked.csv"
    plain.write_text(text, encoding="utf-8")
    marked.write_text(text, encoding="utf-8-sig")
    assert roster_keys(str(marked)) == roster_keys(str(plain)) == {sid: {"lms_user_id": str(uid)} for sid, uid in rows}
