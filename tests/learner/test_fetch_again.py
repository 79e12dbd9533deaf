"""A fresh copy of a lost or broken notebook (learner/fetch_again.py, `course fetch-again`): fetched with the course's
own fetch from a real exchange folder, the student's folder moved aside whole and never clobbered, and bad input (a
name that is no assignment's, one not released, a link or a file where the folder should be, a full disk) refused
with a sentence and nothing changed. The command itself runs once as a real Unix user (nobody).

Cost: about 4 s (in-process fetches; one `course` process as nobody; a 64 kB tmpfs mounted where root may)."""
import datetime
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from unix_users import python_reachable

from learner.fetch_again import FetchRefused, fetch_again, run_fetch_again

A = "A"
COURSE = "c1"
NOW = datetime.datetime(2026, 12, 7, 9, 15, 0, tzinfo=datetime.timezone.utc)


def class_of(base, release_bytes=10):
    """An exchange (one machine's, 1777) with ``A`` released in the course ``c1``, and a student's home whose
    nbgrader_config.py names them, as the hub's student settings do."""
    root = os.path.join(base, "exchange")
    out = os.path.join(root, COURSE, "outbound", A)
    os.makedirs(os.path.join(out, "data"))
    os.chmod(root, 0o1777)
    with open(os.path.join(out, A + ".ipynb"), "w") as f:
        f.write('{"the": "release"}')
    with open(os.path.join(out, "data", "table.bin"), "wb") as f:
        f.write(b"x" * release_bytes)
    for here, dirs, files in os.walk(os.path.join(root, COURSE)):
        os.chmod(here, 0o755)
    home = os.path.join(base, "home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "nbgrader_config.py"), "w") as f:
        f.write(f"c = get_config()\nc.Exchange.root = {root!r}\nc.CourseDirectory.course_id = {COURSE!r}\n"
                f"c.ExchangeFactory.fetch_assignment = 'learner.submit.CourseFetch'\n")
    return root, home


def tree(path):
    """Everything under ``path`` as it is: kind, and a file's bytes' digest or a link's target."""
    seen = {}
    for here, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(here, name)
            st_ = os.lstat(full)
            if stat.S_ISREG(st_.st_mode):
                seen[os.path.relpath(full, path)] = hashlib.sha256(open(full, "rb").read()).hexdigest()
            elif stat.S_ISLNK(st_.st_mode):
                seen[os.path.relpath(full, path)] = "-> " + os.readlink(full)
            else:
                seen[os.path.relpath(full, path)] = stat.S_IFMT(st_.st_mode)
    return seen


def test_a_broken_notebook_comes_back_fresh_and_every_earlier_folder_is_kept_aside(tmp_path):
    root, home = class_of(str(tmp_path))
    assert fetch_again(A, where=home) == [f"fetched a fresh copy of {A} (course {COURSE}) into {A}"]  # none yet
    with open(os.path.join(home, A, A + ".ipynb"), "w") as f:
        f.write("broken by the student")
    os.remove(os.path.join(home, A, "data", "table.bin"))
    said = fetch_again(A, where=home, now=NOW)
    aside = f"{A}.moved-2026-12-07T09-15-00Z"
    assert said == [f"moved your folder {A} to {aside} (nothing in it was deleted)",
                    f"fetched a fresh copy of {A} (course {COURSE}) into {A}"]
    assert open(os.path.join(home, aside, A + ".ipynb")).read() == "broken by the student"
    assert open(os.path.join(home, A, A + ".ipynb")).read() == '{"the": "release"}'
    assert os.path.isfile(os.path.join(home, A, "data", "table.bin"))
    first = tree(os.path.join(home, aside))
    # again in the same second: a new name, the first moved copy untouched
    said = fetch_again(A, where=home, now=NOW)
    assert said[0] == f"moved your folder {A} to {aside}-2 (nothing in it was deleted)"
    assert tree(os.path.join(home, aside)) == first
    assert sorted(os.listdir(home)) == sorted([A, aside, aside + "-2", "nbgrader_config.py"])  # no copy half-made


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.text(max_size=12), st.sampled_from(["..", ".", "../A", "A/..", "/etc", "A/x", "a", "B",
                                                             "A\n", "-A", "A+x", "*", "A" * 101])))
def test_a_name_that_is_no_released_assignment_is_refused_and_nothing_changes(tmp_path_factory, name):
    root, home = class_of(str(tmp_path_factory.mktemp("again")))
    os.makedirs(os.path.join(home, A))
    with open(os.path.join(home, A, A + ".ipynb"), "w") as f:
        f.write("mine")
    before = tree(home), tree(root)
    if name == A:
        return
    with pytest.raises(FetchRefused) as refused:
        fetch_again(name, where=home)
    said = str(refused.value)
    assert "\n" not in said and said.endswith(("nothing was fetched", "nothing was fetched)")), said
    assert (tree(home), tree(root)) == before


def test_a_student_in_several_courses_names_one_and_gets_it_in_its_folder(tmp_path, monkeypatch):
    """The hub's settings for a student in several courses name none and put each in ~/<course id>/<assignment>."""
    root, home = class_of(str(tmp_path))
    with open(os.path.join(home, "nbgrader_config.py"), "w") as f:
        f.write(f"c = get_config()\nc.Exchange.root = {root!r}\nc.Exchange.path_includes_course = True\n"
                f"c.Authenticator.plugin_class = 'learner.submit.HubCourses'\n"
                f"c.ExchangeFactory.fetch_assignment = 'learner.submit.CourseFetch'\n")
    monkeypatch.setenv("COURSE_IDS", f"{COURSE},c2")
    with pytest.raises(FetchRefused, match=rf"^name the course with --course-id \(yours: {COURSE}, c2\): nothing"):
        fetch_again(A, where=home)
    with pytest.raises(FetchRefused, match=rf"^you are not in the course c3 \(yours: {COURSE}, c2\): nothing was fetched$"):
        fetch_again(A, "c3", where=home)
    assert fetch_again(A, COURSE, where=home) == [f"fetched a fresh copy of {A} (course {COURSE}) into {COURSE}/{A}"]
    assert os.path.isfile(os.path.join(home, COURSE, A, A + ".ipynb"))


def test_an_assignment_not_released_is_named_with_those_that_are(tmp_path):
    root, home = class_of(str(tmp_path))
    with pytest.raises(FetchRefused, match=rf"^B is not released in the course {COURSE} \(released: A\): nothing "
                                           rf"was fetched$"):
        fetch_again("B", where=home)
    assert not os.path.exists(os.path.join(home, "B"))


@pytest.mark.parametrize("what", ["a link to a folder", "a link to a file", "a link to nowhere", "a file", "a pipe"])
def test_a_link_or_a_file_where_the_folder_should_be_is_refused_and_nothing_changes(tmp_path, what):
    root, home = class_of(str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.ipynb").write_text("the student's other work")
    path = os.path.join(home, A)
    {"a link to a folder": lambda: os.symlink(elsewhere, path),
     "a link to a file": lambda: os.symlink(elsewhere / "precious.ipynb", path),
     "a link to nowhere": lambda: os.symlink(tmp_path / "gone", path),
     "a file": lambda: open(path, "w").close(),
     "a pipe": lambda: os.mkfifo(path)}[what]()
    before = tree(str(tmp_path))
    kind = "a link" if "link" in what else "not a folder"
    with pytest.raises(FetchRefused, match=rf"^{A} is {kind}, not the assignment's folder: nothing was moved or "
                                           rf"fetched"):
        fetch_again(A, where=home)
    assert tree(str(tmp_path)) == before


@pytest.mark.pipeline  # it changes the machine for a moment: make test runs it, never the fast loop
@pytest.mark.skipif(os.geteuid() != 0, reason="as root (make test): it mounts a tmpfs or runs as another user")
def test_with_no_room_for_a_fresh_copy_the_folder_stays_as_it_was(tmp_path):
    root, _ = class_of(str(tmp_path), release_bytes=200_000)
    home = tmp_path / "full"
    home.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(home)]).returncode:
        pytest.skip("no tmpfs may be mounted here")
    try:
        shutil.copy(tmp_path / "home" / "nbgrader_config.py", home)
        (home / A).mkdir()
        (home / A / (A + ".ipynb")).write_text("mine, broken")
        before = tree(str(home))
        with pytest.raises(FetchRefused, match=rf"^there is no room for a fresh copy: it needs 1.2 MB and 0.\d MB are "
                                               rf"free; {A} is as it was"):
            fetch_again(A, where=str(home))
        assert tree(str(home)) == before
    finally:
        subprocess.run(["umount", str(home)], check=True)


@pytest.mark.pipeline  # it changes the machine for a moment: make test runs it, never the fast loop
@pytest.mark.skipif(os.geteuid() != 0, reason="as root (make test): it mounts a tmpfs or runs as another user")
def test_a_student_runs_it_in_their_terminal_as_themselves():
    """`course fetch-again` as a real Unix user (nobody) in a home of theirs: the moved folder and the fresh copy are
    theirs (one process: the command's refusals are the function's, below)."""
    base = tempfile.mkdtemp(prefix="course-fetch-again-", dir="/tmp")  # pytest's folders are closed to nobody
    try:
        os.chmod(base, 0o755)
        root, home = class_of(base)
        os.makedirs(os.path.join(home, A))
        with open(os.path.join(home, A, A + ".ipynb"), "w") as f:
            f.write("mine, broken")
        for here, dirs, files in os.walk(home):
            for name in [here] + [os.path.join(here, f) for f in files]:
                os.chown(name, 65534, 65534)
        course = os.path.join(os.path.dirname(sys.executable), "course")
        run = ["runuser", "-u", "nobody", "--", "env", f"HOME={home}", course, "fetch-again"]
        with python_reachable():
            done = subprocess.run(run + [A, "--dir", home], capture_output=True, text=True, timeout=120, cwd=home)
        assert done.returncode == 0, done.stderr
        aside = [n for n in os.listdir(home) if n.startswith(f"{A}.moved-")]
        assert done.stdout.splitlines() == [f"moved your folder {A} to {aside[0]} (nothing in it was deleted)",
                                            f"fetched a fresh copy of {A} (course {COURSE}) into {A}"]
        assert os.stat(os.path.join(home, A, A + ".ipynb")).st_uid == 65534
        assert open(os.path.join(home, aside[0], A + ".ipynb")).read() == "mine, broken"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_command_says_a_refusal_on_stderr_and_exits_1(tmp_path, capsys):
    root, home = class_of(str(tmp_path))
    assert run_fetch_again("../A", where=home) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == "course fetch-again: '../A' is not an assignment's name (letters, digits, '_', '.' " \
                                "and '-'): nothing was fetched\n"
    assert run_fetch_again(A, where=home) == 0 and capsys.readouterr().out.startswith("fetched a fresh copy of A")
