"""The instructor's side of the hub's grading service (coursekit/hub/service.py, root's): ``course grade`` and the
formgrader's Autograde on the hub send each submission there (``grade_by_service``), and ``course return --lms``
asks it to post the scores (coursekit/lms/return_grades.py). What both sides share: the token header, the settings a
request may pass, the service's URL of a course, the files as base64."""
import base64
import json
import os
import urllib.error
import urllib.parse
import urllib.request

TOKEN_HEADER = "Authorization"
# settings a request may pass to the grading, each with what its value must look like; the sandbox's own limits and
# COURSE_ISOLATION are the service's
SAFE_SETTINGS = {"COURSE_MAX_TRAIN_STEPS": str.isdigit, "COURSE_TRAIN_THREADS": str.isdigit,
                 "COURSE_TORCH_THREADS": str.isdigit, "OMP_NUM_THREADS": str.isdigit, "MKL_NUM_THREADS": str.isdigit,
                 "COURSE_DEVICE": lambda v: v in ("cpu", "cuda"),
                 "COURSE_CALL_TIME_LIMIT": lambda v: v.replace(".", "", 1).isdigit()}


def b64(files):
    return {rel: base64.b64encode(data).decode("ascii") for rel, data in files.items()}


def unb64(files):
    return {str(rel): base64.b64decode(data) for rel, data in files.items()}


def grade_by_service(course_root, payload, task, timeout, passed):
    """``grade_submission``'s counterpart on the hub: the submission graded by the hub's grading service, as root
    (``COURSE_GRADING_URL``, with the token of the instructor's server, ``JUPYTERHUB_API_TOKEN``). Returns the
    result as ``grade_submission`` does; a refusal or an unreachable service is this submission's error."""
    url, token = os.environ.get("COURSE_GRADING_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
    result = {"student": task["student"], "assignment": task["assignment"], "ok": False, "autograded": {},
              "feedback": {}, "log": [], "seed": None, "error": None, "host": None, "pid": None}
    body = json.dumps({"course": os.path.abspath(course_root), "assignment": payload["assignment"],
                       "source": b64(payload["source"]), "timeout": timeout, "passed": passed,
                       "task": {k: v for k, v in task.items() if k != "files"} | {"files": b64(task["files"])}})
    req = urllib.request.Request(service_url(url, "/grade", os.path.abspath(course_root)), data=body.encode(),
                                 method="POST",
                                 headers={TOKEN_HEADER: f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=2 * timeout + 600) as resp:
            answer = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        result["error"] = ("grading", f"the hub's grading service refused it ({exc.code}): "
                                      f"{exc.read().decode('utf-8', 'replace')[:300]}")
        return result
    except (OSError, ValueError) as exc:
        result["error"] = ("grading", f"the hub's grading service could not be reached at {url}: {exc}")
        return result
    answer["autograded"], answer["feedback"] = unb64(answer["autograded"]), unb64(answer["feedback"])
    return answer


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
    instructor's server is then only nbgrader's saving of the grades (made here so that importing this module costs
    no nbgrader)."""
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Unicode

    class GradedByHub(NbGraderPreprocessor):
        """The submission graded by the hub's grading service, as root (``coursekit.hub.service``, through ``grade_by_service``)."""

        course_root = Unicode("", help="the course folder").tag(config=True)

        def preprocess(self, nb, resources):
            import nbformat
            from grader import seeds
            from grader.nbgrader_plugin import append_log

            from ..grading.files import files_of
            info = resources["nbgrader"]
            student, assignment = info["student"], info["assignment"]
            root = self.course_root or os.getcwd()
            files, _ = files_of(os.path.join(root, "submitted", student, assignment))
            files[info["notebook"] + ".ipynb"] = nbformat.writes(nb).encode()
            source, _ = files_of(os.path.join(root, "source", assignment))
            passed = {k: os.environ[k] for k in SAFE_SETTINGS if k in os.environ}
            result = grade_by_service(root, {"assignment": assignment, "source": source},
                                      {"student": student, "assignment": assignment, "files": files},
                                      float(os.environ.get("COURSE_GRADING_TIMEOUT", "1200")), passed)
            for rec in result.get("log", []):
                append_log(root, rec)
            if result.get("seed") is not None:
                seeds.record(root, student, assignment, result["seed"])
            name = info["notebook"] + ".ipynb"
            if not result.get("ok") or name not in result["autograded"]:
                kind, text = result.get("error") or ("grading", "no graded notebook came back")
                raise RuntimeError(f"the hub's grading service could not grade {student} / {assignment}: {text}")
            return nbformat.reads(result["autograded"][name].decode("utf-8"), as_version=4), resources

    return GradedByHub
