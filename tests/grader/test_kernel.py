"""The sandboxed kernel nbgrader runs a submission in (``grader.nbgrader_plugin.SandboxedExecute``), driven on small
notebooks: a real ipykernel inside the real sandbox, without a course around it. What a cell does to the kernel ends
the run of that notebook with a note, never the grading of the submission (the grade is decided outside the kernel,
by the judge; the tamper class in tests/coursekit/pipeline/ checks that through nbgrader)."""
import subprocess
import sys

import nbformat
import pytest

from grader.nbgrader_plugin import SandboxedExecute

pytestmark = pytest.mark.timeout(300)


def run(tmp_path, *cells, timeout=3):
    """The notebook of ``cells`` (sources, or code cells) after the sandboxed kernel ran it; its faults."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) if isinstance(c, str) else c for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ex = SandboxedExecute(timeout=timeout, interrupt_on_timeout=True)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb, nb.metadata["course"]["faults"]


def names(cell):
    return [out.get("ename") or out.get("text", "").strip() for out in cell.outputs]


def test_a_cell_that_ignores_the_interrupt_ends_the_notebook_not_the_grading(tmp_path):
    """A cell still busy after the interrupt (here a loop that ignores SIGINT; in the tamper class, seconds of zeroing
    pages up to the memory limit on a busy machine) made nbclient raise, and nbgrader gave up on the submission."""
    ignores = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.01)"
    nb, faults = run(tmp_path, "print('before')", ignores, "print('after')")
    assert names(nb.cells[0]) == ["before"]
    assert "CellTimeoutError" in names(nb.cells[1])
    assert nb.cells[2].outputs == []  # not run
    assert [kind for kind, _ in faults] == ["timeout"], faults  # once
    assert "cell 1 ran past its time limit (3 s)" in faults[0][1] and "did not stop when interrupted" in faults[0][1]


def test_a_loop_that_stops_when_interrupted_is_a_timeout_too(tmp_path):
    nb, faults = run(tmp_path, "import time\nwhile True:\n    time.sleep(0.01)", "print('after')")
    assert "CellTimeoutError" in names(nb.cells[0]) and nb.cells[1].outputs == []
    assert any(kind == "timeout" and "cell 0 ran past its time limit" in text for kind, text in faults), faults


def test_a_kernel_that_dies_ends_the_notebook_with_a_note(tmp_path):
    nb, faults = run(tmp_path, "import os\nos._exit(3)", "print('after')", timeout=30)
    assert "DeadKernelError" in names(nb.cells[0]) and nb.cells[1].outputs == []
    assert any(kind == "kernel" and "the kernel died while running cell 0" in text for kind, text in faults), faults


def test_running_out_of_memory_in_a_cell_is_noted_and_the_next_cells_run(tmp_path):
    """The kernel's address space is limited: a huge allocation is a MemoryError in that cell, for the instructor."""
    nb, faults = run(tmp_path, "blocks = bytearray(2 ** 40)", "print('after')", timeout=30)
    assert "MemoryError" in names(nb.cells[0]) and names(nb.cells[1]) == ["after"]
    assert faults == [["memory", "cell 0 in the kernel: MemoryError (the sandbox's limit on memory)"]], faults


def test_a_student_who_fills_the_scratch_gets_a_sentence_and_the_next_student_an_empty_scratch(tmp_path, monkeypatch):
    """The sandbox's scratch is bounded as a whole (COURSE_SANDBOX_SCRATCH_MB shared out over its working folder,
    /tmp, its home and /dev/shm; 64 MB here, /tmp a quarter): a cell that fills /tmp stops with "No space left on
    device", the instructor's record names the limit, the cells after it run; the next kernel's /tmp is empty."""
    monkeypatch.setenv("COURSE_SANDBOX_SCRATCH_MB", "64")
    fill = "f = open('/tmp/fill', 'wb', buffering=0)\nwhile True:\n    f.write(b'x' * 2 ** 20)"
    nb, faults = run(tmp_path, fill, "print('after')", timeout=30)
    assert "OSError" in names(nb.cells[0]) and names(nb.cells[1]) == ["after"]
    assert [kind for kind, _ in faults] == ["scratch"], faults
    assert "No space left on device" in faults[0][1] and "limit on scratch space" in faults[0][1], faults
    nb, faults = run(tmp_path, "import os\nst = os.statvfs('/tmp')\n"
                               "print('fill' in os.listdir('/tmp'), st.f_blocks * st.f_frsize, st.f_bfree > st.f_blocks * 0.9)",
                     timeout=30)
    assert names(nb.cells[0]) == [f"False {16 * 2 ** 20} True"] and faults == [], (nb.cells[0].outputs, faults)


def test_graded_test_cells_never_run_in_the_students_kernel(tmp_path):
    """The judge grades them from outside: the kernel neither computes the checks nor sees the hidden tests' source
    (an earlier cell that hooks the kernel would otherwise read it)."""
    test_cell = nbformat.v4.new_code_cell(
        "print('the test ran')\n### BEGIN HIDDEN TESTS\nsecret = 1\n### END HIDDEN TESTS",
        metadata={"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "t", "points": 1}})
    nb, faults = run(tmp_path, "seen = []\nget_ipython().events.register('pre_run_cell', "
                               "lambda info: seen.append(info.raw_cell))",
                     test_cell,
                     "print(any('END HIDDEN' + ' TESTS' in s for s in seen), 'secret' in globals())", timeout=30)
    assert nb.cells[1].outputs == [] and faults == []
    assert names(nb.cells[2]) == ["False False"]


def test_the_kernels_launcher_ends_with_atexit_run_output_flushed_and_the_exit_status_ipykernel_gives(tmp_path):
    """The sandboxed kernel's launcher (``python -m grader.audit``) ends its process with ``os._exit`` once ipykernel
    returns, skipping the second of CPU that tearing down PyTorch and matplotlib costs a kernel at every graded
    submission; what ``atexit`` holds still runs, buffered output still comes out, and the exit status is the one
    ipykernel's own launcher gives."""
    ended = subprocess.run([sys.executable, "-c", "import atexit, sys\nfrom grader import audit\n"
                            "atexit.register(lambda: print('atexit ran'))\nsys.stdout.write('buffered, ')\n"
                            "audit.end(3)\nprint('not reached')"], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path)
    assert (ended.returncode, ended.stdout) == (3, "buffered, atexit ran\n"), ended.stderr[-2000:]
    plain, launched = (subprocess.run([sys.executable, "-m", module, "--no-such-option"], capture_output=True,
                                      text=True, timeout=120, cwd=tmp_path)
                       for module in ("ipykernel_launcher", "grader.audit"))
    assert launched.returncode == plain.returncode != 0
    assert "unrecognized arguments: --no-such-option" in launched.stderr
