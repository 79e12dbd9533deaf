"""The student's side of the exchange (learner/submit.py), piece by piece: which courses a student sees, which course
folders a fetch or a submit will use, and a fetch that copies only what the course's instructors wrote, never
following a link. The same run as real Unix users on a class in tests/hub/test_exchange_attacks.py. Cost: under a
second (a group is made and removed, as root)."""
import os
import subprocess

import pytest
from nbgrader.auth import Authenticator
from traitlets.config import Config

from learner.submit import ExchangeRefused, HubCourses, copy_release, course_writers

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another user: run as root (make test does)")


def test_a_student_is_in_the_courses_the_hub_gives_and_no_other(monkeypatch):
    config = Config()
    config.Authenticator.plugin_class = HubCourses
    auth = Authenticator(config=config)
    monkeypatch.setenv("COURSE_IDS", "enc101,dec102")
    assert auth.get_student_courses("*") == ["enc101", "dec102"]
    assert auth.has_access("*", "enc101") and not auth.has_access("*", "zz-fake")
    monkeypatch.setenv("COURSE_IDS", "")  # the hub knows the user, in no course yet
    assert auth.get_student_courses("*") == [] and not auth.has_access("*", "enc101")
    monkeypatch.delenv("COURSE_IDS")  # off a hub: nbgrader's default, every course
    assert auth.get_student_courses("*") is None and auth.has_access("*", "anything")


@as_root
def test_only_a_course_folder_of_its_staff_the_hub_or_this_user_is_used(tmp_path):
    root = tmp_path / "exchange"
    (root / "mine").mkdir(parents=True)
    os.chmod(root, 0o1777)  # one machine's exchange: anyone may add a folder
    assert course_writers(str(root), "mine") == {0, os.geteuid()}
    (root / "invented").mkdir()
    os.chown(root / "invented", NOBODY, NOBODY)  # a course some other user made
    with pytest.raises(ExchangeRefused, match="owned by nobody, who is no instructor of invented"):
        course_writers(str(root), "invented")
    os.symlink(root / "mine", root / "linked")
    with pytest.raises(ExchangeRefused, match="is not a folder of the exchange"):
        course_writers(str(root), "linked")
    # a hub's exchange (root's, 0755): only root made the folder, for its owner and its group
    os.chmod(root, 0o755)
    assert {0, NOBODY} <= course_writers(str(root), "invented")
    # a course with a staff group in an exchange everyone writes to: its members (and root) wrote it, nobody else
    os.chmod(root, 0o1777)
    group = "cksub-staff"
    subprocess.run(["groupdel", group], capture_output=True)
    subprocess.run(["groupadd", group], check=True)
    try:
        subprocess.run(["gpasswd", "-a", "nobody", group], check=True, capture_output=True)
        (root / "cksub").mkdir()
        os.chown(root / "cksub", NOBODY, NOBODY)
        assert course_writers(str(root), "cksub") == {0, NOBODY}
        subprocess.run(["gpasswd", "-d", "nobody", group], check=True, capture_output=True)
        with pytest.raises(ExchangeRefused, match="no instructor of cksub"):
            course_writers(str(root), "cksub")
    finally:
        subprocess.run(["groupdel", group], capture_output=True)


@as_root
def test_a_fetch_copies_the_instructors_regular_files_and_follows_no_link(tmp_path):
    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    (release / "A.ipynb").write_text("the notebook")
    (release / "data" / "table.csv").write_text("1,2")
    secret = tmp_path / "victims-notebook.ipynb"
    secret.write_text("the victim's own work")
    os.symlink(secret, release / "link.ipynb")  # fetch as the victim would copy the victim's file
    os.symlink(tmp_path, release / "linked-folder")
    (release / "planted.py").write_text("by a student")
    os.chown(release / "planted.py", NOBODY, NOBODY)
    os.mkfifo(release / "pipe")
    ignored = release / ".ipynb_checkpoints"
    ignored.mkdir()
    (ignored / "x").write_text("")
    dest = tmp_path / "fetched"
    left_out = copy_release(str(release), str(dest), {0}, ignore=[".ipynb_checkpoints"])
    got = sorted(os.path.relpath(os.path.join(h, f), dest) for h, _, fs in os.walk(dest) for f in fs)
    assert got == ["A.ipynb", "data/table.csv"]
    why = {os.path.basename(path): reason for path, reason in left_out}
    assert why == {"link.ipynb": "a link", "linked-folder": "a link",
                   "planted.py": "written by nobody, not by the course's instructors",
                   "pipe": "not a regular file or folder"}
    # fetched again after a file was lost: what is there stays, what is missing comes back
    (dest / "A.ipynb").write_text("the student's answers")
    os.remove(dest / "data" / "table.csv")
    copy_release(str(release), str(dest), {0}, ignore=[".ipynb_checkpoints"], only_missing=True)
    assert (dest / "A.ipynb").read_text() == "the student's answers" and (dest / "data" / "table.csv").exists()
