"""The hub's state is root's alone, also while it is written (coursekit/hub/root_files.py: ``write_atomic``; coursekit/hub/setup.py: ``close_state``), and
`course hub` says when the users' homes let a student hand their group to anyone. The whole state of a running hub,
tried as a student, is in test_hub_courses.py::test_course_hub_with_a_courses_file. Cost: about 3 s, as root."""
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

from coursekit.hub.root_files import write_atomic
from coursekit.hub.setup import COOKIE_SECRET, close_state, setuid_warning
from coursekit.hub.state import HubState

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="reads as another user: run as root (make test does)")
pytestmark = [pytest.mark.xdist_group("hub")]  # opens the folders above the install's Python: one worker, as the hub's
SPY = """
import os, sys, time  # a student's process, reading by name
folder, end = sys.argv[1], time.monotonic() + float(sys.argv[2])
names = ["courses.json", "courses.json.tmp", "grading.json.tmp", "courses.json.lock"]
read = set()
print("ready", flush=True)
while time.monotonic() < end:
    for name in names:
        try:
            with open(os.path.join(folder, name)) as f:
                f.read(1)
            read.add(name)
        except OSError:
            pass
print(" ".join(sorted(read)))
"""


@as_root
@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_nothing_of_the_state_is_readable_by_a_student_even_while_it_is_written():
    """A student's process reads by name, over and over, the files the hub writes, while the hub writes its state
    300 times: it never gets a byte (writing a known temporary name and making it private afterwards lost 13 of 300
    copies to such a reader)."""
    from hub_helpers import python_reachable
    folder = tempfile.mkdtemp(prefix="course-state-test-", dir="/tmp")  # a folder every user may enter
    os.chmod(folder, 0o755)
    try:
        with python_reachable():
            _race(pathlib.Path(folder) / "state")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _race(state):
    state.mkdir()
    close_state(str(state))
    assert oct(os.stat(state).st_mode & 0o777) == "0o711"
    assert os.stat(state / "jupyterhub.sqlite").st_mode & 0o077 == 0
    assert os.stat(state / COOKIE_SECRET).st_mode & 0o077 == 0 and len((state / COOKIE_SECRET).read_text()) == 65
    spy = subprocess.Popen(["runuser", "-u", "nobody", "--", sys.executable, "-c", SPY, str(state), "3"],
                           stdout=subprocess.PIPE, text=True)
    assert spy.stdout.readline() == "ready\n"
    hub_state = HubState(str(state))
    roster = {f"student{i}": f"lms-secret-id-{i}" for i in range(3000)}  # a class's worth: a longer write

    def write():
        for n in range(300):
            with hub_state.change() as data:
                data["courses"]["enc"] = {"students": roster}
            write_atomic(str(state / "grading.json"), "{}" + " " * 100_000, mode=0o600)
            if spy.poll() is not None:
                break
    writer = threading.Thread(target=write)
    writer.start()
    writer.join()
    said, _ = spy.communicate(timeout=60)
    assert said.strip() == "", f"a student read {said.strip()} of the hub's state"
    assert {p.name for p in state.iterdir()} >= {"courses.json", "grading.json"}
    assert not [p.name for p in state.iterdir() if ".tmp" in p.name or p.name.startswith("courses.json.")
                and p.name != "courses.json.lock"], "a temporary file was left behind"


def test_course_hub_says_when_homes_or_tmp_allow_set_group_id_files():
    """The warning names /tmp exactly when the kernel's mount table says /tmp is mounted without nosuid."""
    def mount_of(path):
        best = ("", "")
        for line in open("/proc/self/mountinfo"):
            fields = line.split()
            point, options = fields[4], fields[5]
            if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(best[0]):
                best = (point, options)
        return best[1].split(",")
    warning = setuid_warning([])
    assert (warning is not None and "/tmp" in warning) == ("nosuid" not in mount_of("/tmp")), warning
    if warning:
        assert "mount the users' homes and /tmp with nosuid" in warning
