"""What the course's lab plugin (``node/hub-lab``) asks of a student's own server on the hub, for the Assignments tab
(a Jupyter server extension of the students' servers: ``coursekit.hub.setup.role_settings``).

* ``GET <base>course/due``: the student's due dates, their extension included, with the course's late policy, in
  each course of theirs: asked of the hub's grading service (``COURSE_GRADING_URL``, ``GET /due``) with this
  server's own JupyterHub token, so the service answers for this student alone. The tab shows them under each
  assignment. Without the service (off a hub), none.
* ``POST <base>course/fetch-again`` ``{course_id, assignment_id}``: ``course fetch-again`` (``learner.fetch_again``) run
  as the student, in a process of its own, in the server's folder: the student's folder moved aside, a fresh copy
  fetched; it answers ``{success, lines}`` (what was done) or ``{success: false, message}`` (why nothing was).

Both need the server's login (and its XSRF check for the POST), as every route of the server does.
"""
import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

from .fetch_again import ASSIGNMENT_NAME
from .inert_text import inert

FETCH_LIMIT = 300  # seconds a fresh copy may take


def ask_due(url, token):
    """The grading service's answer to GET /due for ``token``'s owner: a list, one entry per course."""
    req = urllib.request.Request(url.rstrip("/") + "/due", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=90) as resp:
        answer = json.loads(resp.read())
    value = answer.get("value") if isinstance(answer, dict) else None
    if not isinstance(value, list):
        raise ValueError("not a list of due dates")
    return value


def fetch_again_in_a_process(root, course_id, assignment_id):
    """``course fetch-again`` of ``assignment_id`` in ``root``: {success, lines} or {success: False, message}."""
    if not isinstance(assignment_id, str) or not ASSIGNMENT_NAME.match(assignment_id):
        return {"success": False, "message": f"{inert(repr(assignment_id))} is not an assignment's name"}
    command = [sys.executable, "-m", "learner.fetch_again", assignment_id, "--dir", root]
    if isinstance(course_id, str) and course_id:
        command += ["--course-id", course_id]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, timeout=FETCH_LIMIT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"success": False, "message": f"no fresh copy within {FETCH_LIMIT} s: try again, or ask your "
                                             f"instructor"}
    said = [line for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if done.returncode == 0:
        return {"success": True, "lines": said}
    why = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    message = why[-1] if why else f"course fetch-again ended with status {done.returncode}"
    return {"success": False, "message": message.removeprefix("course fetch-again: ")}


def _handlers():
    from jupyter_server.base.handlers import APIHandler
    from tornado import web

    class Due(APIHandler):
        @web.authenticated
        async def get(self):
            url, token = os.environ.get("COURSE_GRADING_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
            answer = {"value": []}
            if url and token:
                try:
                    answer["value"] = await asyncio.get_running_loop().run_in_executor(None, ask_due, url, token)
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    answer["message"] = f"the due dates could not be read ({type(exc).__name__})"
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(answer))

    class FetchAgain(APIHandler):
        @web.authenticated
        async def post(self):
            try:
                asked = json.loads(self.request.body or b"{}")
                course_id, assignment_id = asked.get("course_id"), asked.get("assignment_id")
            except (ValueError, AttributeError):
                raise web.HTTPError(400, "not a request for a fresh copy") from None
            root = self.settings.get("server_root_dir") or os.getcwd()
            answer = await asyncio.get_running_loop().run_in_executor(
                None, fetch_again_in_a_process, os.path.expanduser(root), course_id, assignment_id)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(answer))

    return [("course/due", Due), ("course/fetch-again", FetchAgain)]


def _jupyter_server_extension_points():
    return [{"module": "learner.lab_server"}]


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [(url_path_join(base, path), handler) for path, handler in _handlers()])
