"""Root's side holds what a student's output makes it hold only up to a bound (issue 59; docs/threat-model.md, "what a
student's code can make root's processes hold"). `course grade` grades a class as root in which each attacker's
notebook tries at least 2 GB of output (1 MB pieces, one piece, 13 MB images, HTML, JSON and other MIME types)
beside honest students, the whole command in a memory control group of its own (this test's limit, so that a
regression fails the test rather than the machine), whose peak is read at the end."""
import os
import subprocess
import tempfile

import nbformat
import pytest
from pipeline_helpers import COURSE_COMMAND

from grader.slots import empty_group, make_group, memory_peak
from coursekit.pipeline import CourseCopy
from coursekit.samples import answered, total_points

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(1500)]

A = "01_tokens"
GB = 2 ** 30
TEST_LIMIT = 6 * GB    # the test's own group: the whole `course grade` with its workers, never their sandboxes
GRADING_SIDE = 3 * GB  # the bound docs/threat-model.md states for `course grade` with two workers

ATTACKS = {  # each tries 2 GB or more
    "pieces": "for _ in range(2048):\n    print('x' * 2 ** 20)",
    # 600 MB a message, four times (a 2 GB piece stops in the kernel itself: it cannot encode it within the sandbox's
    # memory); the first is refused at the socket, unread
    "one-piece": "import sys\nfor _ in range(4):\n    sys.stdout.write('y' * (600 * 2 ** 20))\n    sys.stdout.flush()",
    "images": ("import base64\nfrom IPython.display import display\n"
               "png = base64.b64encode(b'\\x89PNG' + bytes(13 * 2 ** 20 * 3 // 4)).decode()\n"
               "for _ in range(160):\n    display({'image/png': png}, raw=True)"),
    "html": "from IPython.display import HTML, display\nfor _ in range(2048):\n    display(HTML('<p>' + 'h' * 2 ** 20))",
    "json-and-others": ("from IPython.display import display\nfor i in range(2048):\n"
                        "    display({'application/json': {'v': 'j' * 2 ** 20}} if i % 2 else"
                        " {'application/x-anything': 'a' * 2 ** 20, 'text/latex': 'l'}, raw=True)"),
}


def with_cell(nb, source, at=3):
    nb = nbformat.reads(nbformat.writes(nb), as_version=4)
    nb.cells.insert(at, nbformat.v4.new_code_cell(source))
    return nb


def test_students_flooding_output_cost_root_a_bounded_amount_and_only_their_own_grade(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("this test grades as root, in memory control groups of its own: run it as make test does")
    root = tempfile.mkdtemp(dir="/tmp", prefix="flood-")  # short: a kernel's socket path is at most 107 bytes
    cc = CourseCopy(os.path.join(root, "course")).for_class_grading()
    cc.env["COURSE_SANDBOX_MEMORY_MB"] = "4096"
    release = nbformat.read(cc.generate_release(A), as_version=4)
    honest = answered(release)
    students = {"honest-1": honest, "honest-2": honest}
    students.update({f"attacker-{kind}": with_cell(honest, source) for kind, source in ATTACKS.items()})
    with cc.gradebook() as gb:
        for student in students:
            gb.update_or_create_student(student)
    for student, nb in students.items():
        cc.submit(student, A, nb)

    group = make_group(f"course-test-flood-{os.getpid()}", TEST_LIMIT, parent="course-grading", nested=True)
    assert group, "no memory control group could be made here (cgroup v1 or v2 with the memory controller, as root)"
    try:
        join = "".join(f'echo $$ > "{g}/cgroup.procs" && ' for g in group)
        proc = subprocess.run(["/bin/sh", "-c", f'{join}exec "$@"', "sh", COURSE_COMMAND, "grade", "--course",
                               cc.root, "--no-progress", "-j", "2", A], capture_output=True, text=True, env=cc.env,
                              timeout=1400)
        peak = memory_peak(group)
    finally:
        for g in group:
            empty_group(g)
    said = proc.stdout + proc.stderr
    print(said[-4000:], f"\npeak of the grading side: {peak / GB:.2f} GB")
    assert proc.returncode == 0, said[-3000:]
    assert peak < GRADING_SIDE, f"the grading side held {peak / GB:.2f} GB at its peak"
    assert "the grading side: each worker's nbgrader process in a memory control group of its own (3 GB" in said

    full = total_points(release)
    for student in students:
        scores = cc.scores(student, A)
        assert sum(s for s, _ in scores.values()) == full, (student, scores)  # graded on the functions, not output
    for student in (s for s in students if s.startswith("attacker-")):
        feedback = open(cc.feedback_path(student, A), encoding="utf-8").read()
        assert os.path.getsize(cc.feedback_path(student, A)) < 30 * 2 ** 20
        # the feedback and the summary name cell 3 and what stopped it: the output cap, or, on a busy machine where
        # the kernel took longer to make its 600 MB messages than the cell may run, the time limit
        timed_out = f"{student} / {A}: timeout: cell 3 ran past its time limit" in said
        # or, on a loaded host, the cell finished while its messages were still on their way after the grader's wait
        # for them (nbgrader_plugin's "output" fault): named in the summary and the feedback alike
        late = f"{student} / {A}: output: cell 3 finished, but its outputs were still arriving" in said
        if timed_out:
            assert "cell 3 ran past its time limit" in feedback, student
        elif late:
            assert "[Output cut: cell 3 finished, but its outputs were still arriving" in feedback, student
        else:
            assert "[Output cut: " in feedback and " MB" in feedback and "cell 3" in feedback, student
            assert f"{student} / {A}: output: cell 3" in said, student
    for student in ("honest-1", "honest-2"):
        assert "[Output cut" not in open(cc.feedback_path(student, A), encoding="utf-8").read()
    subprocess.run(["rm", "-rf", root])
