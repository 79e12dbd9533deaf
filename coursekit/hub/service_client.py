"""The instructor's side of the hub's grading service (coursekit/hub/service.py, root's): ``course grade`` and the
formgrader's Autograde on the hub send each submission there (``grade_by_service``), and ``course return --lms``
asks it to post the scores (coursekit/lms/return_grades.py). What both sides share: the token header, the settings a
request may pass, the service's URL of a course; the files travel as base64 and the answer as a ``Graded``'s JSON
(``grader.graded``)."""
import json
import os
import urllib.error
import urllib.parse
import urllib.request

TOKEN_HEADER = "Authorization"
GRADING_TIMEOUT = 1200  # seconds one submission may take to grade, by default, on every route
# settings a request may pass to the grading, each with what its value must look like; the sandbox's own limits and
# COURSE_ISOLATION are the service's
SAFE_SETTINGS = {"COURSE_MAX_TRAIN_STEPS": str.isdigit, "COURSE_TRAIN_THREADS": str.isdigit,
                 "COURSE_TORCH_THREADS": str.isdigit, "OMP_NUM_THREADS": str.isdigit, "MKL_NUM_THREADS": str.isdigit,
                 "COURSE_DEVICE": lambda v: v in ("cpu", "cuda"),
                 "COURSE_CALL_TIME_LIMIT": lambda v: v.replace(".", "", 1).isdigit()}


def grade_by_service(course_root, payload, task, timeout, passed):
    """``grade_submission``'s counterpart on the hub: the submission graded by the hub's grading service, as root
    (``COURSE_GRADING_URL``, with the token of the instructor's server, ``JUPYTERHUB_API_TOKEN``). Returns a
    ``grader.graded.Graded`` (the service answers with its JSON); a refusal or an unreachable service is this
    submission's error."""
    from grader.graded import Graded, b64
    url, token = os.environ.get("COURSE_GRADING_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
    body = json.dumps({"course": os.path.abspath(course_root), "assignment": payload["assignment"],
                       "source": b64(payload["source"]), "timeout": timeout, "passed": passed,
                       "task": {k: v for k, v in task.items() if k != "files"} | {"files": b64(task["files"])}})
    req = urllib.request.Request(service_url(url, "/grade", os.path.abspath(course_root)), data=body.encode(),
                                 method="POST",
                                 headers={TOKEN_HEADER: f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2 * timeout + 600) as resp:
            return Graded.from_json(resp.read())
    except urllib.error.HTTPError as exc:
        return Graded.failed(task["student"], task["assignment"], "grading",
                             f"the hub's grading service refused it ({exc.code}): "
                             f"{exc.read().decode('utf-8', 'replace')[:300]}")
    except (OSError, ValueError) as exc:
        return Graded.failed(task["student"], task["assignment"], "grading",
                             f"the hub's grading service could not be reached at {url}: {exc}")


def on_the_hub():
    """Whether this process is an instructor's on the hub, where grading goes to the hub's grading service."""
    return bool(os.environ.get("COURSE_GRADING_URL")) and os.geteuid() != 0


def service_url(url, path, course):
    """The service's ``path`` for ``course``: the course in the URL, so that the service checks who asks before it
    reads the body."""
    return url.rstrip("/") + path + "?" + urllib.parse.urlencode({"course": course})


def graded_by_hub_preprocessor():
    """nbgrader's Autograde on the hub (the formgrader's button, ``nbgrader autograde``), as a preprocessor that
    sends the submission to the hub's grading service and takes back the notebook it graded: what runs in the
    instructor's server is then only the writing of what came back, by the writers `course grade` uses (the lines of
    the grading log and the seed: ``Graded.write_log_and_seed``; the gradebook row: ``coursekit.pipeline.save_grades``)
    (made here so that importing this module costs no nbgrader)."""
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Unicode

    class GradedByHub(NbGraderPreprocessor):
        """The submission graded by the hub's grading service, as root (``coursekit.hub.service``, through ``grade_by_service``)."""

        course_root = Unicode("", help="the course folder").tag(config=True)

        def preprocess(self, nb, resources):
            import nbformat

            from ..grading.files import files_of
            from ..pipeline import save_grades
            info = resources["nbgrader"]
            student, assignment = info["student"], info["assignment"]
            root = self.course_root or os.getcwd()
            files, _ = files_of(os.path.join(root, "submitted", student, assignment))
            files[info["notebook"] + ".ipynb"] = nbformat.writes(nb).encode()
            source, _ = files_of(os.path.join(root, "source", assignment))
            passed = {k: os.environ[k] for k in SAFE_SETTINGS if k in os.environ}
            graded = grade_by_service(root, {"assignment": assignment, "source": source},
                                      {"student": student, "assignment": assignment, "files": files},
                                      float(os.environ.get("COURSE_GRADING_TIMEOUT", GRADING_TIMEOUT)), passed)
            graded.write_log_and_seed(root)
            nb = graded.notebook(info["notebook"] + ".ipynb")
            if nb is None:  # zero for every cell, as `course grade` writes it: no earlier scores stand for this one
                save_grades(None, resources, parent=self)
                kind, text = graded.error or ("grading", "no graded notebook came back")
                raise RuntimeError(f"the hub's grading service could not grade {student} / {assignment}: {text}")
            # the gradebook row, as `course grade` writes it (nbgrader's SaveAutoGrades and AssignLatePenalties)
            return save_grades(nb, resources, parent=self)

    return GradedByHub
