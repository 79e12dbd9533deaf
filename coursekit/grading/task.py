"""The grading worker's task: one submission graded with real nbgrader in a private folder, returned as plain data."""
import json
import os
import shutil
import tempfile
import time

from .files import read_files, write_files
from grader.processes import Kept

from .server import Nbgrader

_NBGRADER = Kept(Nbgrader)  # this worker's nbgrader process, started again for other settings or when it died


def _nbgrader(passed):
    return _NBGRADER.get(passed)




def grade_submission(payload, task, timeout, passed):
    """Grade one submission with real nbgrader in a private folder; everything comes back as plain data.

    Returns ``{"student", "assignment", "ok", "autograded": {rel: bytes}, "feedback": {rel: bytes},
    "log": [records of grading_log.jsonl], "seed", "error", "host", "pid", "seconds"}``.
    """
    t0 = time.perf_counter()
    student, a = task["student"], task["assignment"]
    result = {"student": student, "assignment": a, "ok": False, "autograded": {}, "feedback": {}, "log": [],
              "seed": None, "error": None, "host": os.uname().nodename, "pid": os.getpid(), "separation": None}
    work = None
    try:
        from grader.seeds import student_seed
        result["seed"] = student_seed(student, a)
        nbgrader = _nbgrader(passed)
        result["separation"] = nbgrader.separation
        template = nbgrader.template(payload)
        work = tempfile.mkdtemp(prefix="grade-", dir=nbgrader.home)
        for name in ("nbgrader_config.py", "gradebook.db"):
            shutil.copy(os.path.join(template, name), work)
        for name in ("source", "release"):
            shutil.copytree(os.path.join(template, name), os.path.join(work, name))
        write_files(os.path.join(work, "submitted", student, a), task["files"])
        answer = nbgrader.call({"what": "grade", "root": work, "assignment": a, "student": student}, timeout)
        if answer is None:
            result["error"] = ("timeout", f"grading took over the time limit of {timeout} s per submission")
        elif not answer["ok"]:
            result["error"] = ("grading", f"nbgrader could not grade it: {answer['message']}")
        else:
            result["ok"] = True
        result["autograded"] = read_files(os.path.join(work, "autograded", student, a))
        result["feedback"] = read_files(os.path.join(work, "feedback", student, a))
        log = os.path.join(work, "grading_log.jsonl")
        if os.path.exists(log):
            with open(log) as f:
                result["log"] = [json.loads(line) for line in f if line.strip()]
    except Exception as exc:  # the worker's own trouble: reported for this submission only
        result["error"] = ("grading", f"{type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if work:
            shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = time.perf_counter() - t0
    return result


