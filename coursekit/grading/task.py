"""The grading worker's task: one submission graded with real nbgrader in a private folder, returned as plain data."""
import os
import shutil
import tempfile
import time

from .files import read_results, write_files
from grader.processes import Kept

from .server import Nbgrader
from ..paths import ROOT

# the code a worker's nbgrader process grades with: the checks and their cases, the reference, the grader
GRADED_BY = ("learner", "solutions", "grader")
# this worker's nbgrader process, started again for other settings, for other code, or when it died
_NBGRADER = Kept(lambda key: Nbgrader(key[0]))


def code_version(root=ROOT, parts=GRADED_BY):
    """A fingerprint of the code under ``parts`` of ``root`` (each file's path, size and modification time). A check
    fixed mid-term changes it, so the next submission a long-lived worker grades (the hub's grading service's, a
    cluster's at ``--scheduler``) starts a fresh nbgrader process that imports the fix; a few hundred ``stat``s."""
    seen = []
    for part in parts:
        for here, dirs, files in os.walk(os.path.join(root, part)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                st = os.stat(os.path.join(here, name))
                seen.append((os.path.relpath(os.path.join(here, name), root), st.st_size, st.st_mtime_ns))
    return hash(tuple(seen))


def _nbgrader(passed):
    return _NBGRADER.get((passed, code_version()))


def grade_submission(payload, task, timeout, passed):
    """Grade one submission with real nbgrader in a private folder; everything comes back as plain data: a
    ``grader.graded.Graded``'s ``to_plain()`` (the autograded notebook and the feedback as {relative path: bytes},
    the lines the grading wrote in its private folder's grading log, the seed, the error, the worker)."""
    from grader.graded import Graded, read_log
    from grader.seeds import student_seed
    t0 = time.perf_counter()
    graded = Graded(task["student"], task["assignment"], host=os.uname().nodename, pid=os.getpid())
    student, a = graded.student, graded.assignment
    work = None
    try:
        graded.seed = student_seed(student, a)
        nbgrader = _nbgrader(passed)
        graded.separation, graded.bound = nbgrader.separation, nbgrader.bound
        template = nbgrader.template(payload)
        work = tempfile.mkdtemp(prefix="grade-", dir=nbgrader.home)
        for name in ("nbgrader_config.py", "gradebook.db"):
            shutil.copy(os.path.join(template, name), work)
        for name in ("source", "release"):
            shutil.copytree(os.path.join(template, name), os.path.join(work, name))
        write_files(os.path.join(work, "submitted", student, a), task["files"])
        answer = nbgrader.call({"what": "grade", "root": work, "assignment": a, "student": student}, timeout)
        if answer is None:
            graded.error = ("timeout", f"grading took over the time limit of {timeout} s per submission")
        elif not answer["ok"]:
            graded.error = ("grading", f"nbgrader could not grade it: {answer['message']}")
        else:
            graded.ok = True
        graded.autograded, too_big = read_results(os.path.join(work, "autograded", student, a))
        graded.feedback, too_big_too = read_results(os.path.join(work, "feedback", student, a))
        if too_big + too_big_too:
            graded.ok = False
            graded.error = ("grading", "what grading wrote was too large to carry back: "
                                       + ", ".join(too_big + too_big_too)[:300])
        graded.log = read_log(work)
    except Exception as exc:  # the worker's own trouble: reported for this submission only
        graded.error = ("grading", f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    graded.seconds = time.perf_counter() - t0
    return graded.to_plain()
