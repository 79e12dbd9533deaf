"""Grading on the hub with the full separation: a service the hub runs as root, for each instructor's own course.

Grading as a plain user gives each sandbox a user namespace of its own (Linux counts its processes apart from the
others') but no control group: a memory bomb is then held only by the per-process limit. Grading as root gives each
sandbox a Unix user and a control group of its own (``grader.slots``). On the hub the instructor is a plain user, so
``course hub`` starts this service with the hub (a JupyterHub service, run as root); the instructor's ``course
grade`` (in a terminal of their lab) and the formgrader's Autograde button send each submission here, and only the
grading itself runs as root:

* the instructor's side (their ``course grade``, as them) reads the course folder, sends one submission at a time
  (its files, the assignment's source notebook) and writes what comes back (gradebook, autograded, feedback, log);
* this service checks who asks (the JupyterHub token of the instructor's server, asked of the hub: a student, a
  stranger or an instructor of another course is refused and named in the hub's log), then grades the submission
  as ``course grade`` does on a worker (``coursekit.grading.task.grade_submission``: real nbgrader, the sandboxed
  kernel, the trusted verdict), with the install's own ``nbgrader_config.py`` (never the course folder's, which the
  instructor may edit and which nbgrader would run as root), the sandbox always on, and only the settings that
  cannot weaken it taken from the request;
* its Dask workers run on 127.0.0.1 with TLS and a key that exists only in this process and its workers
  (``Security.temporary``): nobody else on the machine can hand them a task;
* on a hub with LTI login it also posts an instructor's scores to the LMS (``POST /lms/scores``, from ``course
  return A --lms``: ``coursekit.lms_return``) with the tool's private key, which stays root's; its settings name
  every course of the hub with its instructors, and are read again when an LTI launch adds an instructor.

    python -m coursekit.hub_grading STATE/grading.json    # what the hub runs (as root)
"""
import base64
import hashlib
import json
import logging
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

from grader.plain import inert

from . import COURSE_DIR

SERVICE_NAME = "course-grading"
TOKEN_HEADER = "Authorization"
MAX_BODY = 200 * 2 ** 20  # a submission of 50 MB, base64, and its assignment's source: read only from an instructor
MAX_TIMEOUT = 4 * 3600
# settings a request may pass to the grading, each with what its value must look like; the sandbox's own limits and
# COURSE_ISOLATION are the service's
SAFE_SETTINGS = {"COURSE_MAX_TRAIN_STEPS": str.isdigit, "COURSE_TRAIN_THREADS": str.isdigit,
                 "COURSE_TORCH_THREADS": str.isdigit, "OMP_NUM_THREADS": str.isdigit, "MKL_NUM_THREADS": str.isdigit,
                 "COURSE_DEVICE": lambda v: v in ("cpu", "cuda"),
                 "COURSE_CALL_TIME_LIMIT": lambda v: v.replace(".", "", 1).isdigit()}

log = logging.getLogger("course-grading")


def _b64(files):
    return {rel: base64.b64encode(data).decode("ascii") for rel, data in files.items()}


def _unb64(files):
    return {str(rel): base64.b64decode(data) for rel, data in files.items()}


# ------------------------------------------------------------------ the instructor's side
def grade_by_service(course_root, payload, task, timeout, passed):
    """``grade_submission``'s counterpart on the hub: the submission graded by the hub's grading service, as root
    (``COURSE_GRADING_URL``, with the token of the instructor's server, ``JUPYTERHUB_API_TOKEN``). Returns the
    result as ``grade_submission`` does; a refusal or an unreachable service is this submission's error."""
    url, token = os.environ.get("COURSE_GRADING_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
    result = {"student": task["student"], "assignment": task["assignment"], "ok": False, "autograded": {},
              "feedback": {}, "log": [], "seed": None, "error": None, "host": None, "pid": None}
    body = json.dumps({"course": os.path.abspath(course_root), "assignment": payload["assignment"],
                       "source": _b64(payload["source"]), "timeout": timeout, "passed": passed,
                       "task": {k: v for k, v in task.items() if k != "files"} | {"files": _b64(task["files"])}})
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
    answer["autograded"], answer["feedback"] = _unb64(answer["autograded"]), _unb64(answer["feedback"])
    return answer


def on_the_hub():
    """Whether this process is an instructor's on the hub, where grading goes to the hub's grading service."""
    return bool(os.environ.get("COURSE_GRADING_URL")) and os.geteuid() != 0


# ------------------------------------------------------------------ the service (root)
def install_config():
    """The install's own ``course/nbgrader_config.py``: what the service grades with, whatever a course folder has."""
    with open(os.path.join(COURSE_DIR, "nbgrader_config.py"), "rb") as f:
        return f.read()


def payload_of(assignment, source):
    from .inbound import valid_student_id
    if not valid_student_id(assignment):
        raise ValueError(f"{assignment!r} is not an assignment name")
    config = install_config()
    digest = hashlib.sha256(config)
    for rel in sorted(source):
        digest.update(rel.encode() + b"\0" + source[rel])
    return {"assignment": assignment, "config": config, "source": source, "digest": digest.hexdigest()[:16]}


def safe_settings(passed):
    return {k: str(v) for k, v in (passed or {}).items()
            if k in SAFE_SETTINGS and isinstance(v, str) and SAFE_SETTINGS[k](v)}


def whoami(api_url, token):
    """The hub's name for the owner of ``token`` (None when the hub does not know the token)."""
    req = urllib.request.Request(api_url.rstrip("/") + "/user", headers={TOKEN_HEADER: f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read()).get("name")
    except (urllib.error.HTTPError, OSError, ValueError):
        return None


def authorise(config, api_url, header, course):
    """(user, None) when the owner of the request's token is an instructor of ``course``; else (user or None, why)."""
    token = header[len("token "):].strip() if header and header.startswith("token ") else ""
    user = whoami(api_url, token) if token else None
    if user is None:
        return None, "no valid JupyterHub token (grade from a terminal of your JupyterLab on the hub)"
    courses = config["courses"]
    if course not in courses:
        return user, f"{course} is no course of this hub"
    if user not in courses[course]["instructors"]:
        return user, f"{user} is not an instructor of {course}"
    return user, None


def make_app(config, client, api_url, config_path=None):
    """The service's web application: POST /grade, one submission; POST /lms/scores, an assignment's scores to the
    LMS (``coursekit.lms_return``). With ``config_path`` the settings are read again whenever that file changes (an
    LTI launch adds an instructor to a course).

    Who asks is checked before the body is read: the course is in the URL (``?course=FOLDER``) and the token in the
    header, so a request from anyone but an instructor of that course is refused (403) and its connection closed
    with its body unread; an instructor's body is read up to ``MAX_BODY`` and must name the same course."""
    import asyncio

    from tornado import web

    from .grading.task import grade_submission
    from .inbound import valid_student_id
    current = Settings(config_path, config)

    @web.stream_request_body
    class Asked(web.RequestHandler):
        """A request whose asker is known before its body is read (``prepare``); ``body()`` is the JSON it sent."""
        what = "a request"

        async def prepare(self):
            self.chunks, self.size, self.user = [], 0, None
            self.course = self.get_query_argument("course", "")
            self.config = current()
            user, refused = await asyncio.get_running_loop().run_in_executor(
                None, authorise, self.config, api_url, self.request.headers.get(TOKEN_HEADER), self.course)
            if refused:
                log.warning("refused %s from %s for %s: %s", self.what, inert(user or "an unknown token"),
                            inert(self.course), inert(refused))
                self.set_status(403)
                self.finish(refused)
                return
            self.user = user
            self.request.connection.set_max_body_size(MAX_BODY)

        def data_received(self, chunk):
            if self._finished or self.chunks is None:
                return  # refused: what still arrives is dropped while the connection closes
            self.size += len(chunk)
            if self.size > MAX_BODY:
                self.chunks = None
                raise web.HTTPError(413, f"more than {MAX_BODY} bytes")
            self.chunks.append(chunk)

        def body(self):
            try:
                body = json.loads(b"".join(self.chunks))
                same = str(body["course"]) == self.course
            except (ValueError, KeyError, TypeError):
                raise web.HTTPError(400, f"not {self.what}")
            finally:
                self.chunks = None
            if not same:
                raise web.HTTPError(400, "the body names another course than the URL")
            return body

    class Grade(Asked):
        what = "a grading request"

        async def post(self):
            body = self.body()
            task = body["task"]
            if not (valid_student_id(str(task.get("student"))) and task.get("assignment") == body["assignment"]):
                raise web.HTTPError(400, "not a student id or not this assignment")
            payload = payload_of(body["assignment"], _unb64(body["source"]))
            task = {"student": task["student"], "assignment": task["assignment"],
                    "timestamp": task.get("timestamp"), "files": _unb64(task["files"])}
            limit = min(float(body.get("timeout", 1200)), MAX_TIMEOUT)
            passed = safe_settings(body.get("passed"))
            log.info("%s grades %s / %s of %s", self.user, task["student"], task["assignment"], inert(self.course))
            future = client.submit(grade_submission, payload, task, limit, passed, pure=False)
            result = await asyncio.get_running_loop().run_in_executor(None, future.result)
            result["autograded"], result["feedback"] = _b64(result["autograded"]), _b64(result["feedback"])
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(result))

    class PostScores(Asked):
        what = "a request to post grades"

        async def post(self):
            from .lms_return import Refusal, post_for_instructor
            body = self.body()
            log.info("%s posts the scores of %s / %s to the LMS", self.user, inert(self.course),
                     inert(body.get("assignment")))
            try:
                answer = await asyncio.get_running_loop().run_in_executor(None, post_for_instructor, self.config,
                                                                          self.course, body)
            except Refusal as exc:
                log.warning("grades of %s not posted: %s", inert(self.course), inert(exc.message))
                self.set_status(exc.status)
                self.finish(exc.message)
                return
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(answer))

    return web.Application([(r"/grade", Grade), (r"/lms/scores", PostScores)])


def service_url(url, path, course):
    """The service's ``path`` for ``course``: the course in the URL, so that the service checks who asks before it
    reads the body."""
    return url.rstrip("/") + path + "?" + urllib.parse.urlencode({"course": course})


def read_config(path):
    with open(path) as f:
        return json.load(f)


class Settings:
    """The service's settings, read again from ``path`` when the file changes (or the dict given, with no path)."""

    def __init__(self, path, config):
        self.path, self.config, self.stamp = path, config, None

    def __call__(self):
        if self.path:
            try:
                st = os.stat(self.path)
                if (st.st_mtime_ns, st.st_size) != self.stamp:
                    self.config, self.stamp = read_config(self.path), (st.st_mtime_ns, st.st_size)
            except (OSError, ValueError) as exc:  # keep the last good settings, and say so
                log.error("could not read the settings %s again: %s", self.path, exc)
        return self.config


def serve(config_path):
    """Run the service (as root): a Dask cluster on 127.0.0.1 that only it can reach, and the web application."""
    import asyncio

    from distributed import Client, LocalCluster
    from distributed.security import Security
    from tornado.httpserver import HTTPServer

    from .grading.client import QUIET_DASK
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s %(asctime)s course-grading] %(message)s")
    with open(config_path) as f:
        config = json.load(f)
    if os.geteuid() != 0:
        log.warning("not running as root: sandboxes get no user or control group of their own")
    import dask
    security = Security.temporary()
    with dask.config.set(QUIET_DASK), LocalCluster(
            n_workers=config.get("workers") or os.cpu_count() or 1, threads_per_worker=1, processes=True,
            host="127.0.0.1", protocol="tls://", security=security, dashboard_address=None, memory_limit=0,
            silence_logs=logging.ERROR) as cluster, Client(cluster, security=security) as client:
        api_url = os.environ.get("JUPYTERHUB_API_URL") or config["hub_api"]
        app = make_app(config, client, api_url, config_path=config_path)

        async def main():
            server = HTTPServer(app, max_body_size=MAX_BODY)
            server.listen(config["port"], "127.0.0.1")
            log.info("grading for %s on 127.0.0.1:%s", ", ".join(config["courses"]), config["port"])
            await asyncio.Event().wait()
        asyncio.run(main())


def write_config(state, port, hub_api, courses, workers=None, extra=None):
    """The service's settings in ``state`` (root's alone): its port, the hub's API and {course: instructors}; on a
    hub of several courses or with LTI, ``extra`` adds the hub's state folder (``hub_state``) and the tool's LTI
    credentials (``lti``: client id, token URL, the path of its private key), with which it posts grades."""
    from .hub import _write
    path = os.path.join(state, "grading.json")
    _write(path, json.dumps({"port": port, "hub_api": hub_api, "workers": workers,
                             "courses": {c: {"instructors": sorted(i)} for c, i in courses.items()}, **(extra or {})},
                            indent=1), mode=0o600)
    return path


if __name__ == "__main__":
    serve(sys.argv[1])


def graded_by_hub_preprocessor():
    """nbgrader's Autograde on the hub (the formgrader's button, ``nbgrader autograde``), as a preprocessor that
    sends the submission to the hub's grading service and takes back the notebook it graded: what runs in the
    instructor's server is then only nbgrader's saving of the grades (made here so that importing this module costs
    no nbgrader)."""
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Unicode

    class GradedByHub(NbGraderPreprocessor):
        """The submission graded by the hub's grading service, as root (``coursekit.hub_grading``)."""

        course_root = Unicode("", help="the course folder").tag(config=True)

        def preprocess(self, nb, resources):
            import nbformat
            from grader import seeds
            from grader.nbgrader_plugin import append_log

            from .grading.files import files_of
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
