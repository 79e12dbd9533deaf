"""The pipeline tests' shared fixtures: the course copies, the Dask cluster they are graded on, and each notebook's
sample submissions graded once per run (whichever test worker asks first grades them; the others read the result)."""
import contextlib
import os

import pytest
from pipeline_helpers import TOGETHER, Courses, grade, grade_on_a_dask_cluster, release_nb, sample_submissions


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
def together(course):
    """The ``TOGETHER`` assignments' sample submissions, graded in one course copy by one `course grade` run over
    the three, on the README's cluster (``grade_on_a_dask_cluster``: a scheduler and two workers, on 127.0.0.1),
    the first time a test asks: {"scores": {assignment: {student: scores}}, "students": {assignment: [student]},
    "printed": what `course grade` printed}."""
    def build():
        cc = course[TOGETHER[0]]
        students = {}
        for a in TOGETHER:
            submissions = sample_submissions(release_nb(course, a), a)
            for student, nb in submissions.items():
                cc.submit(student, a, nb)
            students[a] = list(submissions)
        proc = grade_on_a_dask_cluster(cc, TOGETHER, os.path.join(course.folder, "together-dask.log"))
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return {"scores": {a: {s: cc.scores(s, a) for s in students[a]} for a in TOGETHER}, "students": students,
                "printed": proc.stdout}
    return lambda: course.once("samples-together", build)


@pytest.fixture(scope="session")
def samples(course, cluster, together):
    """``samples(a)``: {student: scores} of an assignment's sample submissions (``sample_submissions``), graded as a
    class is (one parallel `course grade` call, feedback included), the first time a test asks; those of the
    ``TOGETHER`` assignments by one run over the three (``together``)."""
    def graded(a):
        if a in TOGETHER:
            return together()["scores"][a]

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
