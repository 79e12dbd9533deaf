"""What the hub does as root with a course folder its instructors write: it reads the course id without running
their nbgrader_config.py, gives the folder to the instructors without following a link, and enrols the roster by a
process of the folder's owner, and keeps an instructors' group to its instructors (coursekit/exchange/commands.py,
coursekit/hub/access.py, coursekit/hub/enrol.py). Cost: about 7 s, as root (the tests that give files to another user are skipped otherwise)."""
import os
import sqlite3
import shutil
import subprocess
import sys
import tempfile

import pytest

from coursekit.exchange.course_id import ExchangeError, course_id_of
from coursekit.hub.access import HubError, own_tree, enrol_roster

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another user: run as root (make test does)")


def config(folder, text):
    folder.mkdir(exist_ok=True)
    (folder / "nbgrader_config.py").write_text(text)
    return folder


def test_the_course_id_is_read_without_running_the_file(tmp_path):
    ran = tmp_path / "ran"
    course = config(tmp_path / "c", f"import pathlib\npathlib.Path({str(ran)!r}).write_text('x')\n"
                                    "c = get_config()\nc.CourseDirectory.course_id = 'first'\n"
                                    "c.CourseDirectory.course_id = 'enc101'\n")
    assert course_id_of(course) == "enc101"  # the last line counts, as when nbgrader runs it
    assert not ran.exists()


PLAIN = "plain string (the hub reads it without running the file)"
RULE = "must be 1 to 23 lowercase letters, digits, '_' or '-', starting with a letter"


@pytest.mark.parametrize("line, why", [
    ("c.CourseDirectory.course_id = os.environ['ID']", PLAIN),  # the hub would have to run the file
    ("# no course id at all", PLAIN),
    ("c.CourseDirectory.course_id = '../../etc'", RULE),  # a path, not one folder name
    ("c.CourseDirectory.course_id = 'Enc101'", RULE),
    ("c.CourseDirectory.course_id = 'a' * 30", PLAIN),  # an expression, even of strings
    ("c.CourseDirectory.course_id = 'a' + 'b' * 30", PLAIN),
    ("c.CourseDirectory.course_id = 'abcdefghijklmnopqrstuvwx'", RULE),  # 24 characters
    ("c.CourseDirectory.course_id = (", "cannot be read for its course id"),  # not Python
])
def test_a_course_id_the_hub_cannot_use_is_refused_with_the_rule(tmp_path, line, why):
    course = config(tmp_path / "c", "import os\nc = get_config()\n" + line + "\n")
    with pytest.raises(ExchangeError) as refused:
        course_id_of(course)
    said = str(refused.value)
    assert said.startswith(str(course / "nbgrader_config.py")) and why in said, said


@as_root
def test_giving_the_folder_to_its_instructors_follows_no_link_and_leaves_hard_links(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "shadow"
    secret.write_text("root's")
    os.chmod(secret, 0o600)
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    (course / "source" / "a.ipynb").write_text("{}")
    os.symlink(secret, course / "link-to-a-file")
    os.symlink(outside, course / "source" / "link-to-a-folder")
    os.link(secret, course / "hard")
    said = []
    own_tree(str(course), NOBODY, NOBODY, 0o2770, 0o660, out=said.append)
    for path in (course, course / "source"):
        assert (os.stat(path).st_uid, os.stat(path).st_mode & 0o7777) == (NOBODY, 0o2770)
    assert os.stat(course / "source" / "a.ipynb").st_uid == NOBODY
    for path in (secret, outside):
        assert os.stat(path).st_uid == 0, f"{path} was given away through a link"
    assert os.stat(secret).st_mode & 0o777 == 0o600
    assert said == [f"left as it is: {course / 'hard'} (a file with 2 hard links)"]


SWAP_FOLDERS_FOR_LINKS = r"""
import os, sys
course, outside = sys.argv[1], sys.argv[2]
names = sorted(os.path.join(course, n) for n in os.listdir(course))
print("ready", flush=True)
while True:
    for d in names:
        try:
            os.rename(d, d + ".old")
            os.symlink(outside, d)
            os.unlink(d)
            os.rename(d + ".old", d)
        except OSError:
            pass
"""


@as_root
def test_a_folder_swapped_for_a_link_while_it_walks_gives_nothing_outside_away(tmp_path):
    """An instructor's process (another process, so that it runs beside the walk on the other core) swaps folders
    for links to root's folder as fast as it can while root walks the course 200 times: nothing outside the course
    changes owner. A walk by path (os.walk, os.chown after os.path.islink) gave root's folder away in 5 of 6 runs of
    this test when tried."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "key").write_text("root's")
    course = tmp_path / "course"
    course.mkdir()
    for i in range(200):
        (course / f"d{i}").mkdir()
        (course / f"d{i}" / "f").write_text("")
    attacker = subprocess.Popen([sys.executable, "-c", SWAP_FOLDERS_FOR_LINKS, str(course), str(outside)],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout.readline().strip() == "ready"
        for _ in range(200):
            own_tree(str(course), NOBODY, NOBODY, 0o2770, 0o660, out=lambda s: None)
        assert attacker.poll() is None, "the swapping process stopped before the walks ended"
    finally:
        attacker.kill()
        attacker.wait()
    assert os.stat(outside).st_uid == 0 and os.stat(outside / "key").st_uid == 0


@pytest.fixture
def open_tmp():
    """A folder under /tmp that another user may enter (pytest's own are root's alone)."""
    import pathlib
    path = tempfile.mkdtemp(prefix="hub-trust-")
    os.chmod(path, 0o755)
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


@as_root
@pytest.mark.pipeline  # changes the machine for a moment: make test runs it, never the fast loop
@pytest.mark.xdist_group("hub")  # opens the folders above this install's Python to other users while it runs
def test_the_roster_is_enrolled_by_the_folders_owner_never_through_a_link(open_tmp):
    from hub_helpers import python_reachable
    with python_reachable():
        enrolled_by_owner(open_tmp)


def enrolled_by_owner(tmp_path):
    """`course hub` enrols the roster (collect then names who did not submit): the gradebook it makes is the course
    folder's owner's and group's (0660), and enrolling again updates names and adds only the new students."""
    course = config(tmp_path / "course", "c = get_config()\nc.CourseDirectory.course_id = 'enc101'\n")
    os.chown(course, NOBODY, NOBODY)
    said = []
    assert enrol_roster(str(course), [("s1", "Ada Lovelace"), ("s2", "Bo")], out=said.append) == ["s1", "s2"]
    db = course / "gradebook.db"
    assert (os.stat(db).st_uid, os.stat(db).st_gid, os.stat(db).st_mode & 0o777) == (NOBODY, NOBODY, 0o660)
    assert enrol_roster(str(course), [("s1", "Ada King"), ("s3", "Cy Young")], out=said.append) == ["s3"]
    assert said == ["gradebook: 2 students on the roster, 2 new", "gradebook: 2 students on the roster, 1 new"]
    with sqlite3.connect(db) as con:
        assert sorted(con.execute("select id, first_name, last_name from student")) == [
            ("s1", "Ada", "King"), ("s2", "Bo", None), ("s3", "Cy", "Young")]
    assert os.stat(db).st_uid == NOBODY
    # the instructor links the gradebook to a file of root's: the owner's process cannot open it, root never does
    other = tmp_path / "roots.db"
    with sqlite3.connect(other) as con:
        con.execute("create table t (x)")
    os.chmod(other, 0o600)
    db.unlink()
    os.symlink(other, db)
    with pytest.raises(HubError, match="could not be enrolled"):
        enrol_roster(str(course), [("s4", "Di")], out=lambda s: None)
    with sqlite3.connect(other) as con:
        assert [r[0] for r in con.execute("select name from sqlite_master")] == ["t"]


@as_root
@pytest.mark.pipeline  # makes Unix users and a group for a moment: make test runs it, never the fast loop
def test_an_instructors_group_holds_its_instructors_alone():
    """A teaching assistant who is no longer an instructor (``--instructor`` or a course's ``instructors``) but is
    still in the course's staff group is named with the command that fixes it, and taken out by ``take_out`` (what
    `course hub --create-users` does), the others left in."""
    from coursekit.hub.access import not_listed, stale_problems, take_out
    group, users = "ckt-staff", ["ckt-alice", "ckt-tara"]
    try:
        subprocess.run(["groupadd", group], check=True, capture_output=True)
        for name in users:
            subprocess.run(["useradd", "--no-create-home", "-G", group, name], check=True, capture_output=True)
        stale = not_listed(group, ["ckt-alice"])
        assert stale == [("ckt-tara", group)]
        said, fixes = stale_problems(stale)
        assert said == [f"ckt-tara is in the group {group} but is no instructor there: they could read what only "
                        f"instructors may"] and fixes == [f"gpasswd -d ckt-tara {group}"]
        told = []
        take_out(stale, out=told.append)
        assert not_listed(group, ["ckt-alice"]) == [] and not_listed(group, []) == [("ckt-alice", group)]
        assert told == [f"ckt-tara taken out of the group {group}: no longer an instructor there"]
        assert not_listed("ckt-no-such-group", []) == []
    finally:
        for name in users:
            subprocess.run(["userdel", name], capture_output=True)
        subprocess.run(["groupdel", group], capture_output=True)
