"""The pipeline tests' shared fixtures: the course copies, the Dask cluster they are graded on, and each notebook's
sample submissions graded once per run (whichever test worker asks first grades them; the others read the result)."""
import contextlib
import os

import pytest
from pipeline_helpers import Courses, grade, release_nb, sample_submissions


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """The shared course copies (see Courses); xdist workers' temporary folders share a parent."""
    base = tmp_path_factory.getbasetemp()
    folder = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    os.makedirs(folder / "pipeline", exist_ok=True)
    return Courses(str(folder / "pipeline"))


@pytest.fixture(scope="session")
def cluster():
    """``cluster()``: the address of a Dask scheduler on 127.0.0.1 with this process's grading workers, started the
    first time a class must be graded here: one worker per test worker (side by side they fill 2 cores), one per
    core otherwise. Every class below is graded by `course grade`'s parallel grader on it."""
    started = []
    with contextlib.ExitStack() as stack:
        def address():
            if not started:
                from coursekit.grading import local_cluster
                workers = 1 if os.environ.get("PYTEST_XDIST_WORKER") else (os.cpu_count() or 1)
                started.append(stack.enter_context(local_cluster(workers)).scheduler_address)
            return started[0]
        yield address


@pytest.fixture(scope="session")
def samples(course, cluster):
    """``samples(a)``: {student: scores} of an assignment's sample submissions (``sample_submissions``), graded as a
    class is (one parallel `course grade` call, feedback included), the first time a test asks."""
    def graded(a):
        def build():
            cc = course[a]
            submissions = sample_submissions(release_nb(course, a), a)
            for student, nb in submissions.items():
                cc.submit(student, a, nb)
            summary = grade(cc, a, list(submissions), cluster)
            print(f"graded {a}, {len(submissions)} samples: {summary.seconds:.1f} s")
            return {s: cc.scores(s, a) for s in submissions}
        return course.once(f"samples-{a}", build)
    return graded
