"""The inbound folder read as untrusted input (coursekit/exchange/inbound.py), piece by piece: names, owners, times, and a
copy that follows no link and keeps to its limits. The same attacks run as real Unix users through `course collect`
in tests/hub/test_exchange_attacks.py; here each rule is tried on its own, with the edge cases a class would take
minutes to reach. Cost: under a second."""
import datetime
import os
import pathlib
import shutil
import socket
import stat
import tempfile

import pytest

from coursekit.exchange import inbound
from learner import handin
from coursekit.exchange.inbound import InboundLimits, RefusedSubmission, copy_submission, parse_name, scan, submission_time

NOW = datetime.datetime(2026, 12, 6, 12, 0, 0)
NOBODY = 65534
# giving a file to another user (the attacker's files in these tests) needs root, as CI runs the tests
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another user: run as root (make test does)")


@pytest.fixture
def box(tmp_path):
    """An inbound folder (its descriptor) and a folder to copy into."""
    root = tmp_path / "inbound"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    yield root, fd, tmp_path / "out"
    os.close(fd)


def test_a_name_parses_only_as_student_assignment_time_and_nbgraders_random_part():
    assert parse_name("ann+03_softmax+2026-12-06 11:00:00.000001 UTC+AbC_d-9=") == (
        "ann", "03_softmax", datetime.datetime(2026, 12, 6, 11, 0, 0, 1))
    for name, why in [("ann+03_softmax", "is not student+assignment+time"),
                      ("a+b+c+d+e", "is not student+assignment+time (it has 4 '+')"),
                      ("..+03_softmax+2026-12-06 11:00:00 UTC", "the student id in its name is not a valid id"),
                      (".hidden+03_softmax+2026-12-06 11:00:00 UTC", "the student id in its name is not a valid id"),
                      ("<b>x</b>+03_softmax+2026-12-06 11:00:00 UTC", "the student id in its name is not a valid id"),
                      ("ann+03_softmax+yesterday", "the time in its name does not parse"),
                      ("ann+03_softmax+2026-12-06 11:00:00 UTC+not random!", "not nbgrader's random string"),
                      ("ann+../x+2026-12-06 11:00:00 UTC", "the assignment in its name is not a valid")]:
        assert why in parse_name(name), name


@as_root
def test_scan_keeps_only_folders_their_student_owns_and_names_every_other_entry(box):
    root, fd, _ = box
    ok = "root+A+2026-12-06 11:00:00.000000 UTC+r1"
    forged = "nobody+A+2026-12-06 11:30:00.000000 UTC+r2"  # named as nobody's, made by root
    (root / ok).mkdir()
    (root / forged).mkdir()
    (root / "root+A+2026-12-09 11:00:00 UTC").mkdir()  # three days ahead
    (root / "root+A+2026-12-06 11:00:01 UTC").write_text("")  # a file
    os.symlink(root / ok, root / "root+A+2026-12-06 11:00:02 UTC")  # a link to a folder
    (root / "ghost+A+2026-12-06 11:00:00 UTC").mkdir()  # a name on no roster
    (root / "root+B+2026-12-06 11:00:00 UTC").mkdir()  # another assignment's: left for its own collect
    (root / "root+Z+2026-12-06 11:00:00 UTC").mkdir()  # no assignment of the course
    os.chown(root / "ghost+A+2026-12-06 11:00:00 UTC", NOBODY, NOBODY)
    found = {e.name: e for e in scan(fd, "A", roster={"root", "nobody"}, others={"B"}, now=NOW)}
    assert found[ok].problem is None and found[ok].student == "root"
    assert found[forged].problem == "it is owned by root, not by nobody" and found[forged].owner == "root"
    assert "is in the future" in found["root+A+2026-12-09 11:00:00 UTC"].problem
    assert found["root+A+2026-12-06 11:00:01 UTC"].problem == "it is a file, not a folder"
    assert found["root+A+2026-12-06 11:00:02 UTC"].problem == "it is a link, not a folder"
    assert found["ghost+A+2026-12-06 11:00:00 UTC"].problem == "ghost is not on the course's roster"
    assert found["ghost+A+2026-12-06 11:00:00 UTC"].owner == "nobody"
    assert found["root+Z+2026-12-06 11:00:00 UTC"].problem == "'Z' is no assignment of this course"
    assert "root+B+2026-12-06 11:00:00 UTC" not in found
    # a later folder that a submit is still writing, or stopped writing (learner.submit): named, never collected,
    # so the student's complete one stays the latest
    (root / "root+A+2026-12-06 11:40:00.000000 UTC+r3.incomplete").mkdir()
    found = {e.name: e for e in scan(fd, "A", roster={"root", "nobody"}, others={"B"}, now=NOW)}
    assert found["root+A+2026-12-06 11:40:00.000000 UTC+r3.incomplete"].problem.startswith(
        "it is not complete: a submit is writing it, or stopped before it was done")
    assert [name for name, e in found.items() if e.problem is None] == [ok]
    # with no roster, a name with no Unix account behind it cannot have been written by its student
    (root / "nosuchuser-ck+A+2026-12-06 11:00:00 UTC").mkdir()
    found = {e.name: e for e in scan(fd, "A", roster=set(), others={"B"}, now=NOW)}
    assert "there is no Unix user nosuchuser-ck" in found["nosuchuser-ck+A+2026-12-06 11:00:00 UTC"].problem


def make_submission(root, name="root+A+2026-12-06 11:00:00 UTC"):
    sub = root / name
    sub.mkdir()
    (sub / "A.ipynb").write_text("{}")
    (sub / "notes").mkdir()
    (sub / "notes" / "n.txt").write_text("mine")
    return sub


@as_root
def test_a_copy_follows_no_link_anywhere_and_takes_only_regular_files_and_folders_the_student_owns(box, tmp_path):
    root, fd, out = box
    sub = make_submission(root)
    secret = tmp_path / "instructors-key"
    secret.write_text("KEY")
    os.symlink(secret, sub / "key")
    os.symlink(secret, sub / "notes" / "key")
    os.symlink(tmp_path, sub / "up")
    os.mkfifo(sub / "pipe")
    listener = socket.socket(socket.AF_UNIX)
    here = os.getcwd()
    os.chdir(sub)  # a socket's path is at most 107 bytes: bound by its short relative name
    try:
        listener.bind("sock")
    finally:
        os.chdir(here)
    theirs = sub / "theirs.txt"
    theirs.write_text("someone else's")
    os.chown(theirs, NOBODY, NOBODY)
    (sub / "other").mkdir()
    os.chown(sub / "other", NOBODY, NOBODY)
    (sub / "A.html").write_text("<p>a page that would pass for the feedback</p>")
    copied = copy_submission(fd, sub.name, 0, str(out), InboundLimits(), skip_names=("A.html",))
    listener.close()
    assert sorted(os.path.relpath(os.path.join(h, f), out) for h, _, fs in os.walk(out) for f in fs) == \
        ["A.ipynb", "notes/n.txt"]
    assert dict(copied.left_out) == {
        "key": "a link, never followed", "notes/key": "a link, never followed", "up": "a link, never followed",
        "pipe": "a pipe, not a regular file", "sock": "a socket, not a regular file",
        "theirs.txt": "owned by nobody, not by the student", "other/": "owned by nobody, not by the student",
        "A.html": "it has the name of a page that grading writes"}
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o700 and stat.S_IMODE(os.stat(out / "A.ipynb").st_mode) == 0o600


def test_a_file_swapped_for_a_link_after_it_was_listed_is_not_followed_when_it_is_opened(box, tmp_path):
    """What was listed as a regular file is opened with O_NOFOLLOW and checked with fstat: a link put there in
    between is refused at the open, whatever it points at."""
    root, fd, out = box
    sub = make_submission(root)
    secret = tmp_path / "instructors-key"
    secret.write_text("KEY")
    os.symlink(secret, sub / "swapped")
    dir_fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY)
    out.mkdir()
    copied = inbound.Copied()
    try:
        handin._copy_file(dir_fd, "swapped", str(out / "swapped"), "swapped", 0, InboundLimits(), copied)
    finally:
        os.close(dir_fd)
    assert copied.left_out == [("swapped", "it is a link, never followed")]
    assert not (out / "swapped").exists()
    # the submission's own folder, replaced by a link once listed: refused whole, nothing copied
    os.rename(sub, root / "moved")
    os.symlink(tmp_path, sub)
    with pytest.raises(RefusedSubmission, match=r"its folder is no longer a folder \(a link or a file took its place\), never"):
        copy_submission(fd, sub.name, 0, str(tmp_path / "out2"), InboundLimits())
    assert not (tmp_path / "out2").exists()


def test_limits_leave_out_a_big_file_refuse_a_big_or_crowded_submission_and_cut_deep_folders(box):
    root, fd, out = box
    sub = make_submission(root)
    with open(sub / "huge.bin", "wb") as f:  # sparse: 900 MB that take no disk
        f.truncate(900 * 1024 * 1024)
    deep = sub / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "x.txt").write_text("deep")
    copied = copy_submission(fd, sub.name, 0, str(out), InboundLimits(file_bytes=1000, depth=2))
    assert dict(copied.left_out) == {"huge.bin": "943.7 MB, over the limit of 0.001 MB a file",
                                     "a/b/c/": "deeper than 2 folders"}
    assert (out / "a" / "b").is_dir() and not (out / "a" / "b" / "c").exists()
    with pytest.raises(RefusedSubmission, match=r"its files come to more than 2e-06 MB \(at "):
        copy_submission(fd, sub.name, 0, str(out) + "2", InboundLimits(total_bytes=2))
    for i in range(5):
        (sub / f"f{i}").write_text("x")
    with pytest.raises(RefusedSubmission, match="it holds more than 4 files and folders"):
        copy_submission(fd, sub.name, 0, str(out) + "3", InboundLimits(entries=4))


@as_root
def test_a_folder_the_instructor_cannot_read_costs_only_what_is_in_it():
    """As a plain user (root reads everything, so a child process drops to nobody): a closed subfolder is named and
    left out, a closed submission is refused with a sentence; neither raises."""
    base = tempfile.mkdtemp(prefix="course-inbound-test-", dir="/tmp")  # pytest's folders are closed to nobody
    try:
        os.chmod(base, 0o755)
        root = pathlib.Path(base) / "inbound"
        root.mkdir()
        sub = make_submission(root)
        (sub / "closed").mkdir()
        outs = pathlib.Path(base) / "outs"
        outs.mkdir()
        for path in (root, sub, sub / "notes", sub / "closed", sub / "A.ipynb", sub / "notes" / "n.txt", outs):
            os.chown(path, NOBODY, NOBODY)
        os.chmod(sub / "closed", 0)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            said = []
            try:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
                fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
                said.append(repr(copy_submission(fd, sub.name, NOBODY, str(outs / "one"), InboundLimits()).left_out))
                os.chmod(sub, 0)
                try:
                    copy_submission(fd, sub.name, NOBODY, str(outs / "two"), InboundLimits())
                except RefusedSubmission as exc:
                    said.append(str(exc))
            except BaseException as exc:
                said.append(f"raised {exc!r}")
            finally:
                os.write(w, "\n".join(said).encode())
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        said = os.read(r, 10000).decode().splitlines()
        os.close(r)
        assert said == [repr([("closed/", "this folder cannot be read by the instructor (permission denied): the "
                                          "student can submit again")]),
                        "its folder cannot be read by the instructor (permission denied): the student can submit "
                        "again"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_time_in_a_name_earlier_than_the_files_is_not_believed(box):
    root, fd, out = box
    sub = make_submission(root)
    copied = copy_submission(fd, sub.name, 0, str(out), InboundLimits())
    changed = inbound.utc_naive(copied.latest_change)
    # an honest name: its time a moment before its files were written
    assert submission_time(changed - datetime.timedelta(seconds=3), copied) == \
        (changed - datetime.timedelta(seconds=3), None)
    when, note = submission_time(changed - datetime.timedelta(hours=1), copied)
    assert when == changed and "its files changed after the time in its name" in note


def test_names_are_shown_as_one_inert_line_with_every_control_character_escaped():
    assert inbound.shown("a\x1b[2Jb\nc\u202e") == "a\\x1b[2Jb\\nc\\u202e"
    assert inbound.shown("x" * 500) == "x" * 119 + "…"
    assert inbound.shown(os.fsdecode(b"bad\xffname")) == "bad\\xffname"
