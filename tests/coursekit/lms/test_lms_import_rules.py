"""The LMS's own importers, reproduced from their sources, read the files `course export --lms` writes: every grade
lands on the student's own account, even for two students of the same name and for a student known only to the
course's roster.csv; a student with no key is left out and named.

* ``canvas_import``: canvas-lms lib/gradebook_importer.rb. The header must have "Student" and "ID" first, then "SIS
  User ID" and "SIS Login ID"; a "Points Possible" row is no student; ``process_student`` takes a row's user by
  ``ID`` (Ruby's ``to_i`` of the cell, when it is not blank), else by SIS user id, else by SIS login id (pseudonyms
  of the course's root account), else the first user whose name or sortable name is the ``Student`` cell, else a
  new user (a "missing student").
* ``moodle_import``: moodle grade/import/csv/classes/load_data.php. ``prepare_import_grade_data`` walks the rows
  with one ``$this->studentid`` for the whole file; ``map_user_data_with_value`` sets it only when the mapped cell
  is not empty ("Skip invalid row with blank user field"), so a blank key keeps the previous row's user; a key that
  matches no user (``check_user_exists``) or a first row with none aborts the whole import.

Cost: about 3 s (one gradebook, a hundred generated rosters).
"""
import contextlib
import csv
import io
import re

import pytest
from gradebooks import build_gradebook
from hypothesis import given, settings, strategies as st

from coursekit.cli import main
from coursekit.lms.export import FORMULA_START, keyed, read_grades
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
OWN = {"alex1": 101, "alex2": 102, "rory": 303, "nia": 404}


class ImportAborted(Exception):
    pass


def _ruby_to_i(cell):
    match = re.match(r"\s*[+-]?\d+", cell or "")
    return int(match.group()) if match else 0


def _present(cell):
    return cell is not None and cell.strip() != ""


def canvas_import(rows, users):
    """{user id, or ("new", name): {assignment: grade}} as Canvas's gradebook importer reads ``rows``."""
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]  # row_has_student_headers?
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4]  # the last student column
    assignments = {i: name for i, name in enumerate(header) if i >= 5}
    by_id = {u["id"]: u for u in users}
    by_sis = {u["sis_user_id"]: u for u in users}
    by_login = {u["login"]: u for u in users}
    out = {}
    for row in rows[1:]:
        if row[0] and "Points Possible" in row[0]:
            continue
        student = by_id.get(_ruby_to_i(row[1])) if _present(row[1]) else None
        if student is None:
            pseudonym = by_sis.get(row[2]) if _present(row[2]) else None
            pseudonym = pseudonym or (by_login.get(row[3]) if _present(row[3]) else None)
            student = pseudonym or next((u for u in users if row[0] in (u["name"], u["sortable_name"])), None)
        key = student["id"] if student else ("new", row[0])
        out[key] = {name: row[i] for i, name in assignments.items()}
    return out


def moodle_import(rows, mapfrom, field, users):
    """{user id: {assignment: grade}} as Moodle's CSV grade import reads ``rows`` with "Map from" ``mapfrom`` (a
    column) to ``field`` (userid: the user's ``id``); ImportAborted as Moodle aborts the whole import."""
    header = rows[0]
    key = header.index(mapfrom)
    assignments = {i: name for i, name in enumerate(header) if name not in ("User ID", "First name", "Last name")}
    studentid, out = None, {}
    for line in rows[1:]:
        if len(line) <= 1:
            continue
        value = line[key].strip()
        if value:  # "Skip invalid row with blank user field": studentid stays the previous row's
            found = [u for u in users if str(u[field]) == value]
            if not found:
                raise ImportAborted(f"usermappingerror: {mapfrom} {value!r}")
            studentid = found[0]["id"]
        if studentid is None:
            raise ImportAborted("usermappingerrorusernotfound")
        out.setdefault(studentid, {}).update({name: line[i].strip() for i, name in assignments.items()})
    return out


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


def test_canvas_puts_two_same_name_students_and_a_roster_only_student_on_their_own_accounts(course, tmp_path):
    """Canvas's importer finds the two Alex Smiths by their Canvas user ids (their launches' canvas_user_id) and
    Rory, who never launched, by the SIS login id roster.csv gives; Nia, with no key, is not in the file and the
    command names her. Nobody's grade lands on another account and no row makes a "missing student"."""
    rows, printed = export(course, "canvas", "id,name,sis_login_id\nrory,Rory Roe,rroe\n", tmp_path / "c.csv")
    imported = canvas_import(rows, USERS)
    assert imported == {OWN[s]: {A: POINTS[s]} for s in ("alex1", "alex2", "rory")}
    assert "LEFT OUT nia (Nia Key): no key Canvas matches by" in printed
    assert all(any(row[1:4]) for row in rows[2:])  # every row has a key Canvas matches before the name


def test_canvas_matches_a_row_without_a_key_by_name_so_the_old_file_swapped_the_namesakes():
    """The rule the export now avoids: the row the export used to write for alex2 (a blank ID, the Unix name as SIS
    Login ID, which is no Canvas login) falls through to the name, and Canvas gives it to the first Alex Smith."""
    old = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A],
           ["Smith, Alex", "", "", "alex2", "", POINTS["alex2"]]]
    assert canvas_import(old, USERS) == {101: {A: POINTS["alex2"]}}


def test_moodle_puts_two_same_name_students_and_a_roster_only_student_on_their_own_accounts(course, tmp_path):
    """Moodle's import (Map from User ID to userid) finds each Alex Smith by the user id of their launch and Rory
    by roster.csv's lms_user_id; Nia, with none, is not in the file (a blank key would give her grade to the user
    of the row before) and the command names her."""
    rows, printed = export(course, "moodle", "id,name,lms_user_id\nrory,Rory Roe,303\n", tmp_path / "m.csv")
    assert moodle_import(rows, "User ID", "id", USERS) == {OWN[s]: {A: POINTS[s]} for s in ("alex1", "alex2", "rory")}
    assert "LEFT OUT nia (Nia Key): no Moodle user id" in printed
    assert all(row[0].strip() for row in rows[1:])


def test_moodle_gives_a_blank_key_row_to_the_previous_rows_user():
    """The rule the export now avoids: a row with a blank User ID after alex1's row is imported as alex1 (her
    grade replaced by Nia's); a blank first row aborts the whole import."""
    header = ["User ID", "First name", "Last name", A]
    rows = [header, ["101", "Alex", "Smith", POINTS["alex1"]], ["", "Nia", "Key", POINTS["nia"]]]
    assert moodle_import(rows, "User ID", "id", USERS) == {101: {A: POINTS["nia"]}}
    with pytest.raises(ImportAborted):
        moodle_import([header, ["", "Nia", "Key", "2"]], "User ID", "id", USERS)


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
                     st.sampled_from(["101", "102", "303", "=1+1", "@x", "-5", "\t7", "rroe", "S303", "7\n"]))


@given(st.dictionaries(st.sampled_from(sorted(STUDENTS)),
                       st.fixed_dictionaries({}, optional={"lms_user_id": KEY_TEXT, "sis_user_id": KEY_TEXT,
                                                           "sis_login_id": KEY_TEXT})),
       st.sampled_from(["canvas", "moodle"]))
@settings(max_examples=100, deadline=None, database=None)
def test_no_roster_makes_a_row_without_a_key_or_one_a_spreadsheet_would_run(course, roster, platform):
    """Generated roster keys (blank, spaces, formulas, control characters, another student's id): every student is
    either written with a key the LMS matches by, or left out and named; no written key is blank, starts a
    formula, holds a control character or is written for two students."""
    with gradebook(course) as gb:
        grades = read_grades(gb, [A])
    keys = {sid: {k: v.strip() for k, v in cols.items() if v.strip()} for sid, cols in roster.items()}
    cells, left_out = keyed_from(grades, platform, keys)
    assert set(cells) | set(left_out) == set(STUDENTS) and not set(cells) & set(left_out)
    for sid, row in cells.items():
        assert any(row) and all(not c.startswith(FORMULA_START) and c.isprintable() for c in row), (sid, row)
        if platform == "moodle":
            assert row[0].isdigit()
    for i in range(len(next(iter(cells.values()), ()))):
        column = [row[i] for row in cells.values() if row[i]]
        assert len(column) == len(set(column))


def keyed_from(grades, platform, roster):
    """``coursekit.lms.export.keyed`` with the roster given as {student: {key: value}} instead of a file."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "roster.csv")
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "name", "lms_user_id", "sis_user_id", "sis_login_id"])
            for sid, cols in roster.items():
                writer.writerow([sid, ""] + [cols.get(k, "") for k in ("lms_user_id", "sis_user_id", "sis_login_id")])
        return keyed(grades, platform, path)
