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
  return A --lms``: ``coursekit.lms.posting``) with the tool's private key, which stays root's; its settings name
  every course of the hub with its instructors, and are read again when an LTI launch adds an instructor.

    python -m coursekit.hub.service STATE/grading.json    # what the hub runs (as root)
"""
import binascii
import hashlib
import json
import logging
import math
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

from grader.graded import Graded, unb64
from grader.plain import inert
from grader.slots import join_group, make_group

from ..grading.server import grading_memory_bytes
from ..paths import COURSE_DIR
from .service_client import GRADING_TIMEOUT, SAFE_SETTINGS, TOKEN_HEADER

SERVICE_NAME = "course-grading"
MAX_BODY = 200 * 2 ** 20  # a submission of 50 MB, base64, and its assignment's source: read only from an instructor
MAX_TIMEOUT = 4 * 3600
log = logging.getLogger("course-grading")


# ------------------------------------------------------------------ the service (root)
def install_config():
    """The install's own ``course/nbgrader_config.py``: what the service grades with, whatever a course folder has."""
    with open(os.path.join(COURSE_DIR, "nbgrader_config.py"), "rb") as f:
        return f.read()


def payload_of(assignment, source):
    from ..exchange.inbound import valid_student_id
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
    LMS (``coursekit.lms.return_grades``); GET /due, the asker's own due dates (``coursekit.hub.due_service``). With
    ``config_path`` the settings are read again whenever that file changes (an LTI launch adds an instructor to a
    course).

    Who asks is checked before the body is read: the course is in the URL (``?course=FOLDER``) and the token in the
    header, so a request from anyone but an instructor of that course is refused (403) and its connection closed
    with its body unread; an instructor's body is read up to ``MAX_BODY`` and must name the same course."""
    import asyncio

    from tornado import web

    from ..grading.task import grade_submission
    from ..exchange.inbound import valid_student_id
    current = ServiceSettings(config_path, config)

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
                self.set_header("Content-Type", "text/plain; charset=utf-8")
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
            try:  # an instructor's request, checked whole before anything is graded: a bad one is a 400, not a 500
                task = body["task"]
                if not (valid_student_id(str(task.get("student"))) and task.get("assignment") == body["assignment"]):
                    raise web.HTTPError(400, "not a student id or not this assignment")
                payload = payload_of(body["assignment"], unb64(body["source"]))
                task = {"student": task["student"], "assignment": task["assignment"],
                        "timestamp": task.get("timestamp"), "files": unb64(task["files"])}
                limit = float(body.get("timeout", GRADING_TIMEOUT))
            except (KeyError, TypeError, ValueError, AttributeError, binascii.Error) as exc:
                raise web.HTTPError(400, f"not a grading request ({type(exc).__name__})") from None
            if not (math.isfinite(limit) and limit > 0):
                raise web.HTTPError(400, "the time limit must be a number of seconds above 0")
            limit = min(limit, MAX_TIMEOUT)
            passed = safe_settings(body.get("passed"))
            log.info("%s grades %s / %s of %s", self.user, task["student"], task["assignment"], inert(self.course))
            future = client.submit(grade_submission, payload, task, limit, passed, pure=False)
            result = await asyncio.get_running_loop().run_in_executor(None, future.result)
            self.set_header("Content-Type", "application/json")
            self.finish(Graded.from_plain(result).to_json())

    class PostScores(Asked):
        what = "a request to post grades"

        async def post(self):
            from ..lms.posting import Refusal, post_for_instructor
            body = self.body()
            log.info("%s posts the scores of %s / %s to the LMS", self.user, inert(self.course),
                     inert(body.get("assignment")))
            try:
                answer = await asyncio.get_running_loop().run_in_executor(None, post_for_instructor, self.config,
                                                                          self.course, body)
            except Refusal as exc:
                log.warning("grades of %s not posted: %s", inert(self.course), inert(exc.message))
                self.set_status(exc.status)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish(exc.message)
                return
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(answer))

    from .due_service import DueDates
    due_dates = DueDates(current)

    @web.stream_request_body
    class Due(web.RequestHandler):
        """GET /due: the due dates of whoever's token it is (a student's server asks, ``learner.lab_server``), in
        each course of theirs (``coursekit.hub.due_service``). A request with a body is refused before it is read."""

        def prepare(self):
            if self.request.headers.get("Transfer-Encoding") or self.request.headers.get("Content-Length", "0") != "0":
                self.set_status(400)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish("a request for due dates has no body")
                return
            self.request.connection.set_max_body_size(0)

        def data_received(self, chunk):
            pass  # refused above: what still arrives is dropped while the connection closes

        async def get(self):
            header = self.request.headers.get(TOKEN_HEADER) or ""
            token = header[len("token "):].strip() if header.startswith("token ") else ""
            loop = asyncio.get_running_loop()
            user = await loop.run_in_executor(due_dates.pool, whoami, api_url, token) if token else None
            if user is None or not valid_student_id(user):
                self.set_status(403)
                self.set_header("Content-Type", "text/plain; charset=utf-8")
                self.finish("no valid JupyterHub token")
                return
            # shielded: the read is shared by every request of this student's, and one request cancelled must not
            # cancel it for the others
            answer = await asyncio.shield(asyncio.wrap_future(due_dates.ask(user)))
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"value": answer}))

    return web.Application([(r"/grade", Grade), (r"/lms/scores", PostScores), (r"/due", Due)])


def read_config(path):
    with open(path) as f:
        return json.load(f)


class ServiceSettings:
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

    from ..grading.client import QUIET_DASK
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s %(asctime)s course-grading] %(message)s")
    with open(config_path) as f:
        config = json.load(f)
    if os.geteuid() != 0:
        log.warning("not running as root: sandboxes get no user or control group of their own")
    workers = config.get("workers") or os.cpu_count() or 1
    log.info("memory: %s", bound_service(workers))
    import dask
    security = Security.temporary()
    with dask.config.set(QUIET_DASK), LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True,
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


def service_memory_bytes(workers):
    """What the service may hold with everything below it but the sandboxes (its Dask cluster, each worker's nbgrader
    process and judge): ``COURSE_SERVICE_MEMORY_MB``, else 1 GB and each worker's bound (``grading_memory_bytes``)."""
    value = os.environ.get("COURSE_SERVICE_MEMORY_MB", "").strip()
    return int(value) * 2 ** 20 if value else 2 ** 30 + workers * grading_memory_bytes()


def bound_service(workers):
    """This process (the service, as root) moved into a memory control group of its own, below the hub's: what it
    starts from now on is held with it; the nbgrader processes have groups of their own below it (cgroup v1; on
    v2 beside it). Says what applied, in words."""
    limit = service_memory_bytes(workers)
    groups = make_group("course-grading-service", limit, parent="course-grading", nested=True) \
        if os.geteuid() == 0 else []
    if not groups:
        return "no control group for the service (not root, or none on this machine)"
    join_group(groups, os.getpid())
    return f"the service in a memory control group of {limit / 2 ** 30:g} GB ({', '.join(groups)})"


def write_service_config(state, port, hub_api, courses, workers=None, extra=None):
    """The service's settings in ``state`` (root's alone): its port, the hub's API and {course: instructors}; on a
    hub of several courses or with LTI, ``extra`` adds the hub's state folder (``hub_state``) and the tool's LTI
    credentials (``lti``: client id, token URL, the path of its private key), with which it posts grades."""
    from .root_files import write_atomic
    path = os.path.join(state, "grading.json")
    write_atomic(path, json.dumps({"port": port, "hub_api": hub_api, "workers": workers,
                             "courses": {c: {"instructors": sorted(i)} for c, i in courses.items()}, **(extra or {})},
                            indent=1), mode=0o600)
    return path


if __name__ == "__main__":
    serve(sys.argv[1])
