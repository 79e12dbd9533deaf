"""The grading machine (``grader/``) beside the checks: a CUDA error in the sandboxed worker costs only its own check,
a new gradebook is stamped in-process, the processes that grade a class import no PyTorch, a process's CPU is read
from its own line."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from helpers import SOFTMAX_TRIPPING_ON_CUDA, failure
from learner.check import EXERCISES, check



@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_error_in_the_sandboxed_worker_is_named_and_costs_only_its_own_check(monkeypatch):
    """A function that trips a device-side assert on the GPU fails its check with the cause in words, its worker is
    started again, and the next exercise, graded by the same Worker, passes every case on CUDA. (Without bwrap on
    the GPU machine, the worker runs unsandboxed: what is tested is the worker's process, not the sandbox.)"""
    import shutil

    from coursekit.sync import setup_source, solution_source
    from grader import remote
    if shutil.which("bwrap") is None:
        monkeypatch.setenv("COURSE_ISOLATION", "none")
    cells = [textwrap.dedent(SOFTMAX_TRIPPING_ON_CUDA), solution_source("log_softmax")]
    with remote.Worker(setup_source("03_softmax"), cells) as w:
        w.start()
        msg = failure("softmax", w.function("softmax", "softmax"), "hidden")
        assert "(device cuda)" in msg and "cannot use the GPU again" in msg and "index out of range" in msg, msg
        assert any(kind == "crash" and "CUDA error" in text for kind, text in w.faults), w.faults
        before = len(w.faults)
        check("log_softmax", w.function("log_softmax", "log_softmax"), "hidden")  # a fresh worker, on CUDA too
        assert len(w.faults) == before, w.faults[before:]


def test_a_new_gradebook_is_stamped_with_nbgraders_alembic_head_without_a_subprocess(tmp_path, monkeypatch):
    """The course's nbgrader plugin reads the gradebook schema's revision in-process: the same revision nbgrader's
    own `alembic heads` command prints, written into a new gradebook without starting that command."""
    import os
    import subprocess
    import sys

    import nbgrader.api
    from nbgrader.dbutil import _temp_alembic_ini
    from sqlalchemy import create_engine, text

    from grader import nbgrader_plugin
    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'scratch.db'}") as ini:
        printed = subprocess.check_output([os.path.join(os.path.dirname(sys.executable), "alembic"), "-c", ini,
                                           "heads"], text=True)
    assert nbgrader_plugin.alembic_head() == printed.split()[0]

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"nbgrader started {args[0]}")
    monkeypatch.setattr(nbgrader.api.sp, "check_output", no_subprocess)
    nbgrader.api.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}", course_id="c").close()
    with create_engine(f"sqlite:///{tmp_path / 'gradebook.db'}").connect() as db:
        assert db.execute(text("SELECT version_num FROM alembic_version")).scalar() == printed.split()[0]


def test_the_processes_that_grade_a_class_without_a_check_never_import_pytorch():
    """The `course` client, the Dask workers, nbgrader's process and the nbgrader apps that load the course's plugin
    import only the instructor's side (coursekit, and the grading machine, grader), which never imports the learner's
    checks: each would otherwise spend 2 CPU-s importing PyTorch for nothing. This needs no lazy loader: the split
    itself keeps PyTorch out. A notebook's set-up cell (``from learner.check import check``) imports the checks, with
    PyTorch, the cases and every ready-made version captured, before any learner code exists."""
    script = textwrap.dedent("""
        import json, sys
        import coursekit.grading, coursekit.grading.server, coursekit.cli, coursekit.pipeline, coursekit.exchange.commands
        import coursekit.exchange.classes, coursekit.hub.setup, coursekit.class_report, coursekit.hub.service
        import grader.nbgrader_plugin, grader.untrusted, grader.judge, grader.audit, grader.sandbox, grader.reference
        from grader import seeds, processes
        seeds.student_seed("ada", "03_softmax")
        light = {"torch": "torch" in sys.modules, "checks": "learner.check" in sys.modules}
        from learner.check import check
        import learner.check.given
        print(json.dumps({"light": light, "torch": "torch" in sys.modules,
                          "captured": sorted(learner.check.given._GIVEN)}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    assert run["light"] == {"torch": False, "checks": False}, run
    assert run["torch"], run
    assert set(run["captured"]) == set(EXERCISES), run  # every exercise's ready-made versions, before learner code


def test_a_processs_cpu_is_read_from_its_own_line_and_grows_only_while_it_computes():
    """What the judge reads at each call of a sandboxed worker (``grader.remote.Worker._cpu``): the CPU of the
    worker's own processes, found once (a scan of every process at each of a notebook's hundreds of calls cost the
    judge more than the checks did). A process that computes gains its CPU; one that sleeps gains none; one that has
    gone counts nothing."""
    import time

    from grader import processes
    # each says when it is ready; the spinner computes 0.6 s of CPU only when told, and says when it has, so the
    # readings below wait on the processes, not on the clock (a busy machine only makes the test take longer)
    spin = subprocess.Popen([sys.executable, "-c", "import sys, time\nprint('ready', flush=True)\nsys.stdin.readline()\n"
                                                   "t = time.process_time()\nwhile time.process_time() - t < 0.6:\n    pass\n"
                                                   "print('done', flush=True)\ntime.sleep(60)"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    nap = subprocess.Popen([sys.executable, "-c", "import time\nprint('ready', flush=True)\ntime.sleep(60)"],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert spin.stdout.readline().strip() == "ready" and nap.stdout.readline().strip() == "ready"
        before = processes.cpu_of([spin.pid]), processes.cpu_of([nap.pid])
        spin.stdin.write("go\n")
        spin.stdin.flush()
        assert spin.stdout.readline().strip() == "done"
        after = processes.cpu_of([spin.pid]), processes.cpu_of([nap.pid])
        assert after[0] - before[0] >= 0.5, (before, after)  # 0.6 s of CPU, read in clock ticks
        assert after[1] - before[1] < 0.05, (before, after)
        assert processes.cpu_of([spin.pid, nap.pid]) == sum(after)
        time.sleep(0.5)
        assert processes.cpu_of([spin.pid]) - after[0] < 0.05  # asleep now: no more
        assert spin.pid in processes.descendants(os.getpid()) and nap.pid in processes.descendants(os.getpid())
    finally:
        for p in (spin, nap):
            p.kill()
            p.wait()
    assert processes.cpu_of([spin.pid, nap.pid]) == 0
