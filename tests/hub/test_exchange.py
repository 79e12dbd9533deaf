"""The instructor's loop over nbgrader's real exchange, and what it says about bad input: a roster with a name that is
no Unix user name, an exchange folder with the wrong permissions, nothing submitted, a student who submits twice, a
late submission, a submission of the wrong assignment, a student on the roster who did not submit. Students are real
Unix users (made here, removed after) who fetch and submit with nbgrader's own exchange classes in a process that
runs as them.

Cost: about 20 s on 2 cores beside other suites (one release, four submissions, three collects); the whole loop through `course` commands and a
browser is tests/hub/test_hub_class.py.
"""
import datetime
import grp
import os
import stat
import pwd
import re
import subprocess
import traceback

import nbformat
import pytest
from hub_helpers import course_copy_for, need_hub_parts, remove_users

from coursekit import ROOT
from coursekit.exchange import commands as exchange
from coursekit.hub import access as hub_access

pytestmark = [pytest.mark.pipeline, pytest.mark.xdist_group("hub")]  # one worker: see test_hub_class.py
A = "03_softmax"
STUDENTS = ["ckex-twice", "ckex-wrong", "ckex-none"]


def as_student(name, exchange_root, step, edit=None):
    """``step`` ("fetch" or "submit") of ``A`` with nbgrader's exchange, in a child process running as ``name``;
    ``edit(path)`` changes the fetched notebook before a submit."""
    pid = os.fork()
    if pid == 0:  # the child: become the student, then do what nbgrader's Assignments tab does
        code = 1
        try:
            from nbgrader.auth import Authenticator
            from nbgrader.coursedir import CourseDirectory
            from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeSubmit
            from traitlets.config import Config
            user = pwd.getpwnam(name)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.environ.update(HOME=user.pw_dir, USER=name, LOGNAME=name)
            os.chdir(user.pw_dir)
            config = Config()
            config.CourseDirectory.course_id = "attention-course"
            config.CourseDirectory.assignment_id = A
            config.Exchange.root = exchange_root
            config.Exchange.cache = os.path.join(user.pw_dir, ".nbgrader-cache")
            config.Exchange.assignment_dir = user.pw_dir
            coursedir = CourseDirectory(config=config)
            app = {"fetch": ExchangeFetchAssignment, "submit": ExchangeSubmit}[step](
                coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
            if edit:
                edit(os.path.join(user.pw_dir, A, A + ".ipynb"))
            app.start()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert status == 0, f"{name}: nbgrader {step} failed"


def test_a_roster_row_that_is_no_unix_user_name_is_refused_with_its_row_number(tmp_path):
    need_hub_parts()
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\nann,Ann Lee\nBob Smith,Bob Smith\n")
    proc = subprocess.run(["make", "-s", "hub", f"HUB_ARGS=--instructor teach --roster {roster}"], cwd=ROOT,
                          capture_output=True, text=True)  # as the README writes it, without sudo: the tests are root
    assert proc.returncode != 0
    assert f"{roster} row 3: 'Bob Smith' is not a valid Unix user name" in proc.stderr, proc.stdout + proc.stderr


def test_an_exchange_with_the_wrong_permissions_is_named_with_what_to_change(tmp_path):
    root = tmp_path / "exchange"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    os.chown(root, 65534, -1)  # someone's 0755 folder: neither one machine's exchange (1777) nor a hub's (root's)
    with pytest.raises(exchange.ExchangeError, match=re.escape(f"run `chmod 1777 {root}`")):
        exchange.check_exchange(str(root))
    os.chown(root, 0, -1)
    os.chmod(root, 0o1777)
    os.chmod(tmp_path, 0o700)  # others may not enter the folder above it
    assert exchange.check_exchange(str(root)) == str(root)  # one person's exchange: nobody else comes in
    with pytest.raises(exchange.ExchangeError, match=re.escape(f"chmod 755 {root}")):
        exchange.check_exchange(str(root), shared=True)  # a hub's is root's alone to add to: no invented course
    # `course hub` (root) closes it; then every student must still reach it
    with pytest.raises(exchange.ExchangeError, match=re.escape(f"run `chmod o+x {tmp_path}`")):
        exchange.check_exchange(str(root), create=True, shared=True)
    assert (os.stat(root).st_uid, stat.S_IMODE(os.stat(root).st_mode)) == (0, 0o755)
    assert exchange.check_exchange(str(root)) == str(root)  # the instructor's commands take a hub's root


def test_a_course_folder_or_reference_others_could_read_or_an_instructor_could_not_is_refused_all_at_once(tmp_path):
    """`course hub` checks the course folder and the install's solutions/ before it starts (here folders standing in
    for them): closed to others, open to every instructor; every problem is named in one list."""
    course, reference = tmp_path / "course", tmp_path / "solutions"
    for folder in (course, reference):
        folder.mkdir()
    (course / "nbgrader_config.py").write_text("c = get_config()\n")
    nobody = pwd.getpwuid(65534).pw_name  # in no group of root's folders
    os.chmod(course, 0o755)
    os.chmod(reference, 0o754)
    problems = hub_access.course_problems(str(course), ["root", nobody], reference=str(reference))
    assert problems == [f"students could read the course folder {course} (permissions 0755)",
                        f"the instructor {nobody} cannot write the course folder {course} (owned by root, group root)",
                        f"students could read the reference answers {reference} (permissions 0754)",
                        f"the instructor {nobody} cannot read the reference answers {reference} (owned by root, group "
                        f"root)"]
    os.chmod(course, 0o2770)
    os.chmod(reference, 0o2750)
    os.chown(course, 0, pwd.getpwuid(65534).pw_gid)
    os.chown(reference, 0, pwd.getpwuid(65534).pw_gid)
    assert hub_access.course_problems(str(course), ["root", nobody], reference=str(reference)) == []
    # a student in the instructors' group reads everything
    assert hub_access.course_problems(str(course), ["root"], students=[nobody], reference=str(reference)) == [
        f"the students {nobody} are in the group {grp.getgrgid(pwd.getpwuid(65534).pw_gid).gr_name} of the course "
        f"folder, so they could read every submission and the answers"]


def test_collect_names_nothing_submitted_takes_the_latest_keeps_the_history_and_refuses_the_wrong_assignment(
        class_folder, capsys):
    remove_users(STUDENTS + ["ckex-teach"])
    try:
        hub_access.ensure_users(STUDENTS, create=True)
        root = course_copy_for(class_folder)
        ex = os.path.join(class_folder, "exchange")
        os.environ["COURSE_EXCHANGE"] = ex
        exchange.release(root, A)
        assert exchange.collect(root, A).status == {}
        assert f"nothing submitted for {A} yet" in capsys.readouterr().out

        def mark(text):
            def edit(path):
                nb = nbformat.read(path, as_version=4)
                nb.cells.append(nbformat.v4.new_markdown_cell(text))
                nbformat.write(nb, path)
            return edit

        def other_assignment(path):  # the notebook of 02_dot_products, handed in as 03_softmax
            nbformat.write(nbformat.read(os.path.join(root, "source", "02_dot_products", "02_dot_products.ipynb"),
                                         as_version=4), path)
        for name in STUDENTS[:2]:
            as_student(name, ex, "fetch")
        as_student("ckex-twice", ex, "submit", mark("first try"))
        as_student("ckex-wrong", ex, "submit", other_assignment)
        first = exchange.collect(root, A, roster=STUDENTS).status
        said = capsys.readouterr().out
        assert first == {"ckex-twice": "new", "ckex-wrong": "new"}, said
        assert re.search(r"NOT GRADED: ckex-wrong / 03_softmax: 03_softmax.ipynb is the notebook of assignment "
                         r"02_dot_products", said), said
        assert "no submission from 1 student on the roster: ckex-none" in said, said

        from nbgrader.api import Gradebook
        with Gradebook("sqlite:///" + os.path.join(root, "gradebook.db"), course_id="attention-course") as gb:
            now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            gb.update_or_create_assignment(A, duedate=now)  # due now: the next submission is late
        as_student("ckex-twice", ex, "submit", mark("second try"))
        second = exchange.collect(root, A, roster=STUDENTS).status
        said = capsys.readouterr().out
        assert second == {"ckex-twice": "updated", "ckex-wrong": "unchanged"}, said
        assert re.search(r"ckex-twice +updated +submitted .*; 2 submissions, the latest collected; LATE by ", said), \
            said
        assert not re.search(r"ckex-wrong .*LATE", said), said
        latest = nbformat.read(os.path.join(root, "submitted", "ckex-twice", A, A + ".ipynb"), as_version=4)
        assert latest.cells[-1].source == "second try"
        history = os.path.join(root, "submitted_history", "ckex-twice", A)
        (kept,) = os.listdir(history)
        earlier = nbformat.read(os.path.join(history, kept, A + ".ipynb"), as_version=4)
        assert earlier.cells[-1].source == "first try"
    finally:
        os.environ.pop("COURSE_EXCHANGE", None)
        remove_users(STUDENTS)
