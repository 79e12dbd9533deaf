"""A submission the instructor's collect would refuse is refused when it is made (learner/handin.py, the one rule set
of the student's submit, learner.submit.PrivateSubmit, and of collect, coursekit.exchange): with nbgrader's real
submit into a real exchange folder, the sentence the student gets is collect's for the same folder, nothing reaches
the inbound, and what the submit lets through collect takes: exactly the files and bytes the check counted, links,
pipes and unreadable files left out by both. A submit that fails half-way leaves nothing. Folders with generated
names, sizes, links, pipes and notebooks.

Cost: about 7 s (a hundred submits in-process, as the user running the tests)."""
import errno
import os
import re
import shutil
import subprocess
import types
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange import ExchangeError
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from coursekit.exchange.classes import CourseCollect
from coursekit.hub.setup import student_nbgrader_config
from coursekit.paths import COURSE_DIR
from learner import handin, submit as submit_module
from learner.handin import LIMITS, InboundLimits, RefusedSubmission, check_folder, copy_submission, no_notebook
from learner.inert_text import inert
from learner.submit import PrivateSubmit

A = "A"
COURSE = "c1"
FILE_KB, DIR_KB = 2, 6  # small limits, so that generated folders cross them
SMALL = InboundLimits(file_bytes=1000 * FILE_KB, total_bytes=1000 * DIR_KB)
lastline = re.compile(r"[^\n]+\Z")  # what the lab's notification shows of a failed submit: the traceback's last line


def exchange(tmp):
    """An exchange folder as one machine has it (1777), with ``A`` released (A.ipynb), and a student's home."""
    root = os.path.join(tmp, "exchange")
    os.makedirs(os.path.join(root, COURSE, "outbound", A))
    os.makedirs(os.path.join(root, COURSE, "inbound"))
    os.chmod(root, 0o1777)
    with open(os.path.join(root, COURSE, "outbound", A, A + ".ipynb"), "w") as f:
        f.write("{}")
    home = os.path.join(tmp, "home")
    os.makedirs(home, exist_ok=True)
    return root, home


def submit(root, home):
    """nbgrader's submit of ``A`` as the Assignments tab makes it (the hub's students' class): the error, or None."""
    config = Config()
    config.Exchange.root = root
    config.Exchange.assignment_dir = home
    config.Exchange.cache = os.path.join(home, ".cache")
    config.CourseDirectory.course_id = COURSE
    config.CourseDirectory.assignment_id = A
    config.CourseDirectory.max_file_size = FILE_KB
    config.CourseDirectory.max_dir_size = DIR_KB
    app = PrivateSubmit(coursedir=CourseDirectory(config=config), authenticator=Authenticator(config=config),
                        config=config)
    try:
        app.start()
    except ExchangeError as exc:
        return str(exc)
    return None


def collect_would(folder):
    """What collect makes of ``folder`` as a submission: its refusal (the sentence collect prints), or None."""
    parent = os.open(os.path.dirname(folder), os.O_RDONLY | os.O_DIRECTORY)
    out = folder + ".collected"
    try:
        copied = copy_submission(parent, os.path.basename(folder), os.geteuid(), out, SMALL,
                                 ignore=CourseDirectory().ignore, skip_names=(A + ".html",))
        return no_notebook([A + ".ipynb"], copied)
    except RefusedSubmission as exc:
        return str(exc)
    finally:
        os.close(parent)
        shutil.rmtree(out, ignore_errors=True)


def test_collect_the_submit_and_the_hubs_students_read_one_set_of_limits(tmp_path):
    """The course's nbgrader_config.py (collect's, and a student's submit off the hub) and the settings the hub
    writes for its students' servers both give learner.handin's LIMITS: no second copy of them."""
    course = PyFileConfigLoader("nbgrader_config.py", path=COURSE_DIR).load_config()
    assert CourseCollect(coursedir=CourseDirectory(config=course), config=course).limits() == LIMITS
    (tmp_path / "nbgrader_config.py").write_text(student_nbgrader_config([COURSE], str(tmp_path)))
    student = PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config()
    assert InboundLimits.of(CourseDirectory(config=student)) == LIMITS


names = st.sampled_from(["A.ipynb", "A-Copy1.ipynb", "a.ipynb", "notes.txt", "data.csv", "A.html", "sub/x.txt",
                         "sub/A.ipynb", "sub/deeper/y.bin", ".ipynb_checkpoints/A-checkpoint.ipynb",
                         "line\nbreak.ipynb", "\x1b[31mred.ipynb", "timestamp.txt"])
folders = st.dictionaries(names, st.integers(0, 3000), max_size=6)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=folders)
def test_a_submission_collect_would_refuse_is_refused_with_collects_sentence_and_nothing_reaches_the_exchange(
        tmp_path_factory, files):
    tmp = str(tmp_path_factory.mktemp("handin"))
    root, home = exchange(tmp)
    folder = os.path.join(home, A)
    os.makedirs(folder)
    for name, size in files.items():
        os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(b"x" * size)
    as_handed_in = os.path.join(tmp, "as-handed-in")  # the folder with what nbgrader's submit adds to it
    shutil.copytree(folder, as_handed_in)
    with open(os.path.join(as_handed_in, "submission_secret.txt"), "w") as f:
        f.write("0" * 128)
    expected = collect_would(as_handed_in)
    said = submit(root, home)
    inbound = os.listdir(os.path.join(root, COURSE, "inbound"))
    if expected is None:
        assert said is None and len(inbound) == 1
        assert collect_would(os.path.join(root, COURSE, "inbound", inbound[0])) is None  # collect takes it
    else:
        assert said is not None and inbound == [], (expected, said)
        assert lastline.search(f"Traceback ...\nnbgrader.exchange.abc.exchange.ExchangeError: {said}")
        assert "\n" not in said and "\x1b" not in said  # one line: the notification shows all of it
        assert said == "the instructor would refuse it: " + expected.replace("\n", "\\n").replace("\x1b", "\\x1b")


def test_each_refusal_names_what_to_do(tmp_path):
    root, home = exchange(str(tmp_path))
    folder = os.path.join(home, A)
    os.makedirs(folder)
    assert submit(root, home) == "the instructor would refuse it: it holds no notebook of the assignment (A.ipynb)"
    with open(os.path.join(folder, "A-Copy1.ipynb"), "w") as f:
        f.write("{}")
    assert submit(root, home).endswith("(A.ipynb); it holds A-Copy1.ipynb: the notebook must keep its name")
    with open(os.path.join(folder, "A.ipynb"), "wb") as f:
        f.write(b"x" * 2500)
    assert submit(root, home).endswith("(A.ipynb); left out: A.ipynb: 0.0 MB, over the limit of 0.002 MB a file")
    with open(os.path.join(folder, "A.ipynb"), "wb") as f:
        f.write(b"{}")
    for i in range(4):
        with open(os.path.join(folder, f"d{i}.bin"), "wb") as f:
            f.write(b"x" * 1900)
    assert submit(root, home) == "the instructor would refuse it: its files come to more than 0.006 MB (at d3.bin)"
    for i in range(4):
        os.remove(os.path.join(folder, f"d{i}.bin"))
    for i in range(LIMITS.entries):
        open(os.path.join(folder, f"n{i}.txt"), "w").close()
    assert submit(root, home) == "the instructor would refuse it: it holds more than 1000 files and folders"
    assert os.listdir(os.path.join(root, COURSE, "inbound")) == []
    shutil.rmtree(folder)
    os.makedirs(folder)
    with open(os.path.join(folder, "A.ipynb"), "w") as f:
        f.write("{}")
    assert submit(root, home) is None and len(os.listdir(os.path.join(root, COURSE, "inbound"))) == 1


@pytest.mark.parametrize("where", ["a link", "a file"])
def test_an_assignment_folder_that_is_a_link_or_a_file_is_not_submitted(tmp_path, where):
    root, home = exchange(str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "A.ipynb").write_text("{}")
    if where == "a link":
        os.symlink(elsewhere, os.path.join(home, A))
    else:
        (tmp_path / "home" / A).write_text("")
    said = submit(root, home)
    assert said is not None and os.listdir(os.path.join(root, COURSE, "inbound")) == []


def test_the_students_notification_shows_the_whole_sentence(tmp_path, monkeypatch):
    """The route a refusal takes to the student: nbgrader's Assignments tab server side (AssignmentList, reading the
    settings in the student's folder as on the hub) answers {success: false, value: the traceback}, and the course's
    lab plugin (node/hub-lab/src/index.js, its lastLine, run by Node) shows the traceback's last line: collect's
    sentence, whole."""
    from nbgrader.server_extensions.assignment_list.handlers import AssignmentList
    node = shutil.which("node")
    if node is None:
        pytest.fail("Node is not installed (make test installs it for the hub's lab plugin)")
    root, home = exchange(str(tmp_path))
    os.makedirs(os.path.join(home, A))
    with open(os.path.join(home, A, "A-Copy1.ipynb"), "w") as f:
        f.write("{}")
    with open(os.path.join(home, "nbgrader_config.py"), "w") as f:
        f.write(f"c = get_config()\nc.Exchange.root = {root!r}\nc.CourseDirectory.course_id = {COURSE!r}\n"
                f"c.Exchange.cache = {os.path.join(home, '.cache')!r}\n"
                f"c.ExchangeFactory.submit = 'learner.submit.PrivateSubmit'\n")
    monkeypatch.chdir(home)
    tab = AssignmentList()
    tab.root_dir = home
    answer = tab.submit_assignment(COURSE, A)
    assert answer["success"] is False and os.listdir(os.path.join(root, COURSE, "inbound")) == []
    plugin = open(os.path.join(os.path.dirname(COURSE_DIR), "node", "hub-lab", "src", "index.js")).read()
    last_line = re.search(r"^function lastLine\(text\) \{\n.*?^\}\n", plugin, re.M | re.S).group(0)
    shown = subprocess.run([node, "-e", last_line + "process.stdout.write(lastLine(require('fs')"
                                                    ".readFileSync(0, 'utf8')))"],
                           input=answer["value"], capture_output=True, text=True, check=True).stdout
    assert shown == ("ExchangeError: the instructor would refuse it: it holds no notebook of the assignment "
                     "(A.ipynb); it holds A-Copy1.ipynb: the notebook must keep its name")


def files_in(folder):
    """{relative path: bytes} of the regular files under ``folder``."""
    out = {}
    for here, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(here, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = f.read()
    return out


# what a student's folder may hold besides files and folders: links to a file (outside the folder or in it), to a
# folder, to nothing, and named pipes; the reader takes none of them, and the submit's copy is that same reader
entries = st.one_of(st.tuples(st.just("file"), st.integers(0, 2500)), st.tuples(st.just("link"), st.integers(0, 2500)),
                    st.tuples(st.sampled_from(["link to A.ipynb", "link to a folder", "dangling link", "pipe"]),
                              st.just(0)))
mixed = st.dictionaries(st.sampled_from(["A.ipynb", "a.ipynb", "data.csv", "notes.txt", "A.html", "sub/x.txt",
                                         "sub/A.ipynb", "sub/deeper/y.bin", "submission_secret.txt"]),
                        entries, max_size=7)


def build(folder, spec, elsewhere):
    """The folder ``spec`` describes: {path: (what, bytes)}, links pointing into ``elsewhere``."""
    for name, (what, size) in spec.items():
        path = os.path.join(folder, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if what == "file":
            with open(path, "wb") as f:
                f.write(b"x" * size)
        elif what == "link":
            target = os.path.join(elsewhere, name.replace("/", "_"))
            os.makedirs(elsewhere, exist_ok=True)
            with open(target, "wb") as f:
                f.write(b"y" * size)
            os.symlink(target, path)
        elif what == "link to A.ipynb":
            os.symlink(os.path.join(folder, "A.ipynb"), path)
        elif what == "link to a folder":
            os.makedirs(elsewhere, exist_ok=True)
            os.symlink(elsewhere, path)
        elif what == "dangling link":
            os.symlink(os.path.join(elsewhere, "nothing"), path)
        else:
            os.mkfifo(path)


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=mixed)
def test_what_reaches_the_inbound_is_what_the_check_counted_and_collect_takes_it(tmp_path_factory, spec):
    """Links, pipes, files and folders mixed: the submit's verdict is collect's for the same folder; what reaches the
    inbound is exactly the files and the bytes the check counted (nbgrader's secret and time added), no link's
    target among them, the cache holds the same, and collect takes it whole."""
    tmp = str(tmp_path_factory.mktemp("mixed"))
    root, home = exchange(tmp)
    folder = os.path.join(home, A)
    os.makedirs(folder)
    build(folder, spec, os.path.join(tmp, "elsewhere"))
    as_handed_in = os.path.join(tmp, "as-handed-in")
    os.makedirs(as_handed_in)
    build(as_handed_in, spec, os.path.join(tmp, "elsewhere-too"))
    secret = os.path.join(as_handed_in, "submission_secret.txt")  # nbgrader's submit writes it, in place of any
    if os.path.lexists(secret):
        os.remove(secret)
    with open(secret, "w") as f:
        f.write("0" * 128)
    expected = collect_would(as_handed_in)
    try:
        counted = check_folder(folder, [A + ".ipynb"], SMALL, CourseDirectory().ignore)
    except RefusedSubmission as exc:
        counted = exc
    said = submit(root, home)
    inbound = os.path.join(root, COURSE, "inbound")
    if expected is not None:
        assert said == inert("the instructor would refuse it: " + expected) and os.listdir(inbound) == []
        assert str(counted) == expected
        return
    assert said is None, said
    [name] = os.listdir(inbound)
    got = files_in(os.path.join(inbound, name))
    assert len(got.pop("timestamp.txt")) > 0
    assert sorted(got) == sorted(counted.taken) and sum(map(len, got.values())) == counted.bytes
    assert not any(b"y" in data for data in got.values())  # no link's target
    [cached] = os.listdir(os.path.join(home, ".cache", COURSE))
    assert files_in(os.path.join(home, ".cache", COURSE, cached)) == dict(got, **{"timestamp.txt": mock.ANY})
    parent = os.open(inbound, os.O_RDONLY | os.O_DIRECTORY)
    try:
        collected = copy_submission(parent, name, os.geteuid(), os.path.join(tmp, "collected"), SMALL,
                                    ignore=CourseDirectory().ignore, skip_names=(A + ".html",))
    finally:
        os.close(parent)
    assert no_notebook([A + ".ipynb"], collected) is None and collected.left_out == []
    assert collected.bytes == counted.bytes


def unreadable(monkeypatch, *names):
    """The student cannot read ``names`` (as chmod 000 makes them for the student; the tests run as root, whom no
    mode stops): the reader's open of them fails as the kernel's would."""
    proxy = types.ModuleType("os")
    proxy.__dict__.update(os.__dict__)

    def student_open(path, flags, *args, **kwargs):
        if path in names and "dir_fd" in kwargs:
            raise PermissionError(errno.EACCES, "Permission denied")
        return os.open(path, flags, *args, **kwargs)
    proxy.open = student_open
    monkeypatch.setattr(handin, "os", proxy)


def test_a_file_the_student_cannot_read_is_left_out_and_named_and_an_unreadable_notebook_refused(tmp_path, monkeypatch,
                                                                                                  caplog):
    root, home = exchange(str(tmp_path))
    folder = os.path.join(home, A)
    os.makedirs(folder)
    for name in (A + ".ipynb", "locked.csv"):
        with open(os.path.join(folder, name), "w") as f:
            f.write("{}")
    os.mkfifo(os.path.join(folder, "pipe"))
    unreadable(monkeypatch, "locked.csv")
    assert submit(root, home) is None
    [name] = os.listdir(os.path.join(root, COURSE, "inbound"))
    assert sorted(files_in(os.path.join(root, COURSE, "inbound", name))) == [A + ".ipynb", "submission_secret.txt",
                                                                           "timestamp.txt"]
    assert ("The instructor will not get locked.csv: it cannot be read (permission denied): make it readable "
            "(chmod u+r) and submit again") in caplog.text
    assert "The instructor will not get pipe: a pipe, not a regular file" in caplog.text
    unreadable(monkeypatch, A + ".ipynb")
    assert submit(root, home) == ("the instructor would refuse it: it holds no notebook of the assignment (A.ipynb); "
                                  "left out: A.ipynb: it cannot be read (permission denied): make it readable "
                                  "(chmod u+r) and submit again")
    assert os.listdir(os.path.join(root, COURSE, "inbound")) == [name]


@pytest.mark.parametrize("fails", ["the copy", "the cache", "the permissions", "the rename", "an interrupt"])
def test_a_submit_that_fails_half_way_leaves_nothing_and_the_earlier_submission_stays_the_latest(tmp_path,
                                                                                               monkeypatch, fails):
    root, home = exchange(str(tmp_path))
    folder = os.path.join(home, A)
    os.makedirs(folder)
    with open(os.path.join(folder, A + ".ipynb"), "w") as f:
        f.write("{}")
    assert submit(root, home) is None
    inbound, cache = os.path.join(root, COURSE, "inbound"), os.path.join(home, ".cache", COURSE)
    before = (os.listdir(inbound), os.listdir(cache))
    full = OSError(errno.ENOSPC, "No space left on device")
    if fails == "the copy":
        monkeypatch.setattr(handin, "_read_at_most", mock.Mock(side_effect=full))
    elif fails == "the cache":
        monkeypatch.setattr(submit_module.shutil, "copytree", mock.Mock(side_effect=shutil.Error("a named pipe")))
    elif fails == "the permissions":
        monkeypatch.setattr(submit_module, "open_to_group", mock.Mock(side_effect=full))
    elif fails == "the rename":
        monkeypatch.setattr(submit_module.os, "rename", mock.Mock(side_effect=full))
    else:
        monkeypatch.setattr(submit_module, "open_to_group", mock.Mock(side_effect=KeyboardInterrupt))
    if fails == "an interrupt":
        with pytest.raises(KeyboardInterrupt):
            submit(root, home)
    else:
        said = submit(root, home)
        assert said is not None and said.startswith("nothing was handed in: ") and said.endswith("; submit again")
    assert (os.listdir(inbound), os.listdir(cache)) == before
