"""Shared fixtures: learner-style copies of the reference, and Jupyter kept out of $HOME."""
import os

import pytest
import torch

from helpers import TOGETHER, as_learner
from learner.check import EXERCISES, CheckFailed, check, parts_of


if os.environ.get("PYTEST_XDIST_WORKER"):
    # Test workers side by side on 2 cores: one torch thread each, here and in every kernel, sandbox and nbgrader
    # process they start. Two threads each would make four or six on two cores, and torch's spinning threads then
    # slow each other down many times over.
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "COURSE_TORCH_THREADS", "COURSE_TRAIN_THREADS"):
        os.environ[_var] = "1"
    torch.set_num_threads(1)


def _start_rank(item):
    """Longest first, so the workers finish together (``--no-loadscope-reorder`` keeps this order): the tamper
    class (each worker grades a part of it at once), the browser and the widgets' group, the pipeline, the
    rest."""
    module = item.module.__name__.rsplit(".", 1)[-1]
    if module == "test_pipeline" and "tampered" in item.fixturenames:
        return 0
    if module in ("test_browser", "test_widgets"):  # the widgets: one group of a minute, which started last would
        return 1                                     # keep one worker busy after the others are done
    return 2 if item.get_closest_marker("pipeline") else 3


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks this adds
def pytest_collection_modifyitems(items):
    """Side by side (``pytest -n 2 --dist loadgroup``): the tests of one pipeline assignment stay on one worker,
    so the other rarely waits for the grading they share (which runs once anyway, under a file lock); the tamper
    class is graded in parts by both workers; the browser and widget tests each keep their own worker. The
    assignments whose samples are graded together (``TOGETHER``) share one group."""
    for item in items:
        module = item.module.__name__.rsplit(".", 1)[-1]
        if module == "test_pipeline":
            params = getattr(item, "callspec", None)
            if "tampered" in item.fixturenames:
                continue  # both workers grade a part of the tamper class, then share the results
            group = params.params["a"] if params and "a" in params.params else "03_softmax"
            item.add_marker(pytest.mark.xdist_group(f"pipeline-{'together' if group in TOGETHER else group}"))
        elif module == "test_grading" and "together" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("pipeline-together"))  # graded together (conftest's together)
        elif module in ("test_browser", "test_widgets"):
            item.add_marker(pytest.mark.xdist_group(module))
    items.sort(key=_start_rank)  # stable: the order within each rank is the collection's


UNGROUPED = pytest.StashKey[bool]()


def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` pytest-xdist keeps a group on one worker by adding ``@group`` to its tests' ids.
    A pytest it does not match (9.2 with xdist 3.8.0) drops that silently, and the groups' shared set-ups (the
    student's environment, the hub) then run on every worker: each such test fails instead, saying why."""
    if os.environ.get("PYTEST_XDIST_WORKER") and getattr(session.config.option, "loadgroup", False):
        for item in session.items:
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid:
                item.stash[UNGROUPED] = True


def pytest_runtest_setup(item):
    if item.stash.get(UNGROUPED, False):
        pytest.fail("pytest-xdist did not keep this test's xdist_group on one worker (its id has no @group): "
                    "install the pytest and pytest-xdist that constraints.txt pins (make setup)", pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def _jupyter_dirs_in_tmp(tmp_path_factory):
    """Kernels started by the tests write their runtime files here, never under $HOME."""
    root = tmp_path_factory.mktemp("jupyter")
    old = {k: os.environ.get(k) for k in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR")}
    for k, sub in (("JUPYTER_RUNTIME_DIR", "runtime"), ("JUPYTER_DATA_DIR", "data"), ("IPYTHONDIR", "ipython")):
        os.environ[k] = str(root / sub)
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def learner():
    """Every exercise's reference, compiled as notebook code would be (so the grader accepts it)."""
    return as_learner({name: None for name in EXERCISES})


@pytest.fixture(scope="session")
def failures_of():
    """``failures_of(name, fn)``: the messages of every part of exercise ``name`` that ``fn`` fails, in order; with
    ``until``, up to the first message that contains it (the later parts are not run)."""
    def run(name, fn, until=None):
        messages = []
        for part in parts_of(name):
            try:
                check(name, fn, part)
            except CheckFailed as exc:
                messages.append(str(exc))
                if until is not None and until in messages[-1]:
                    break
        return messages
    return run
