"""A submission the instructor's collect would refuse is refused when it is made (learner/handin.py, the one rule set
of the student's submit, learner.submit.PrivateSubmit, and of collect, coursekit.exchange): with nbgrader's real
submit into a real exchange folder, the sentence the student gets is collect's for the same folder, nothing reaches
the inbound, and what the submit lets through collect takes. Folders with generated names, sizes and notebooks.

Cost: about 3 s (a few dozen submits in-process, as the user running the tests)."""
import os
import re
import shutil
import subprocess

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
from learner.handin import LIMITS, InboundLimits, RefusedSubmission, copy_submission, no_notebook
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
