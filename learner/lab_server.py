"""What the course's lab plugin (``node/hub-lab``) asks of a student's own server on the hub, for the Assignments tab
(a Jupyter server extension of the students' servers: ``coursekit.hub.setup.role_settings``).

* ``GET <base>course/due``: the student's due dates, their extension included, with the course's late policy, in
  each course of theirs: asked of the hub's grading service (``COURSE_GRADING_URL``, ``GET /due``) with this
  server's own JupyterHub token, so the service answers for this student alone. The tab shows them under each
  assignment. Without the service (off a hub), none.
* ``POST <base>course/fetch-again`` ``{course_id, assignment_id}``: ``course fetch-again`` (``learner.fetch_again``) run
  as the student, in a process of its own, in the server's folder: the student's folder moved aside, a fresh copy
  fetched; it answers ``{success, lines}`` (what was done) or ``{success: false, message}`` (why nothing was).

* ``GET <base>course/progress`` (JSON) and ``<base>course/progress.html`` (a page with no script): `course progress`
  (``learner.progress``) on the notebooks in the server's folder, in a process of the student's, again only when a
  notebook changed since. The Assignments tab shows each assignment's line; the page the whole.

* ``GET <base>course/returned``: what was returned to the student, read from the newest feedback page of each
  assignment folder (``<assignment>/feedback/<time>/*.html``, as nbgrader's Fetch Feedback puts it): its score and the
  graded parts that lost points. The Assignments tab shows it under each submitted assignment.

All need the server's login (and its XSRF check for the POST), as every route of the server does.
"""
import asyncio
import http.client
import json
import os
import re
import stat
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
    command = [sys.executable, "-P", "-m", "learner.fetch_again", assignment_id, "--dir", root]  # -P: not the folder's
    if isinstance(course_id, str) and course_id:
        if not ASSIGNMENT_NAME.match(course_id):
            return {"success": False, "message": f"{inert(repr(course_id))} is not a course id"}
        command += ["--course-id", course_id]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, timeout=FETCH_LIMIT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"success": False, "message": f"no fresh copy within {FETCH_LIMIT} s: try again, or ask your "
                                             f"instructor"}
    return command_answer(done, "course fetch-again")


def command_answer(done, name):
    """A finished `course` command (``done``, a ``CompletedProcess`` of bytes) as a route answers it: {success,
    lines} (what it printed) or {success: False, message} (its last line of refusal, without ``name: ``)."""
    said = [line for line in done.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if done.returncode == 0:
        return {"success": True, "lines": said}
    why = [line for line in done.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    message = why[-1] if why else f"{name} ended with status {done.returncode}"
    return {"success": False, "message": message.removeprefix(f"{name}: ")}


PROGRESS_LIMIT = 900  # seconds the whole course's checks may take (each call and answer cell is bounded on its own)
_progress = {}  # {folder of the server: (the notebooks' times of change, the report)}


def _changes(root):
    from .syllabus import NOTEBOOKS
    out = []
    for folder in NOTEBOOKS:
        try:
            out.append(os.stat(os.path.join(root, folder, folder + ".ipynb")).st_mtime_ns)
        except OSError:
            out.append(os.path.isdir(os.path.join(root, folder)))
    return tuple(out)


def progress_of(root):
    """`course progress --json --present` on ``root``, again only when a notebook there changed."""
    stamp = _changes(root)
    kept = _progress.get(root)
    if kept and kept[0] == stamp:
        return kept[1]
    command = [sys.executable, "-P", "-m", "learner.progress", "--json", "--present", "--dir", root]
    proc = subprocess.Popen(command, cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True)  # its group, killed with all it started
    try:
        out, err = proc.communicate(timeout=PROGRESS_LIMIT)
    finally:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        proc.wait()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise ValueError(why[0])
    report = json.loads(done.stdout)
    _progress[root] = (stamp, report)
    return report


def _feedback_of(page):
    """(score, out of, [the labels of the graded parts that lost points]) of a feedback page of the course's
    (grader/templates/course_feedback), or None."""
    from html.parser import HTMLParser

    class Reader(HTMLParser):
        def __init__(self):
            super().__init__()
            self.heading, self.lost, self.where, self.text = None, [], None, []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "h4" and self.heading is None:
                self.where, self.text = "h4", []
            elif tag == "li" and "course-failed" in (attrs.get("class") or "").split():
                self.where, self.text = "li", []
            elif tag == "label" and self.where == "li":
                self.where = "label"

        def handle_data(self, data):
            if self.where in ("h4", "label"):
                self.text.append(data)

        def handle_endtag(self, tag):
            if tag == "h4" and self.where == "h4":
                self.heading, self.where = "".join(self.text), None
            elif tag == "label" and self.where == "label":
                self.lost.append(" ".join("".join(self.text).split()))
                self.where = None

    start = page.find("<h4")  # the score and the contents come first in the body, after the page's own style
    if start < 0:
        return None
    reader = Reader()
    reader.feed(page[start:start + 262_144])
    found = re.search(r"\(Score: ([0-9.]+) / ([0-9.]+)\)", reader.heading or "")
    return (float(found.group(1)), float(found.group(2)), reader.lost) if found else None


PAGE_LIMIT = 2_000_000  # bytes of a feedback page read
_pages = {}  # {path: ((time of change, size), what it says)}


def _page(path):
    """``_feedback_of`` the page at ``path``: a regular file (no link, no pipe), its first ``PAGE_LIMIT`` bytes, kept
    while it is unchanged; None for anything else or a page that cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        key = (st.st_mtime_ns, st.st_size)
        if path in _pages and _pages[path][0] == key:
            return _pages[path][1]
        text = os.read(fd, PAGE_LIMIT).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        found = _feedback_of(text)
    except Exception:  # html.parser's own errors on a page that is not one of the course's
        found = None
    _pages[path] = (key, found)
    return found


def returned(root):
    """{assignment folder: {"time", "score", "max_score", "lost"}} of the newest feedback page in each folder of
    ``root`` (see the module); folders without one are left out."""
    out = {}
    for name in sorted(os.listdir(root)):
        feedback = os.path.join(root, name, "feedback")
        if name.startswith(".") or not os.path.isdir(feedback) or os.path.islink(feedback):
            continue
        try:
            times = sorted(t for t in os.listdir(feedback) if os.path.isdir(os.path.join(feedback, t)))
        except OSError:
            continue  # a folder it may not read: nothing returned to show
        for when in reversed(times):
            try:
                pages = sorted(p for p in os.listdir(os.path.join(feedback, when)) if p.endswith(".html"))
            except OSError:
                continue
            read = [_page(os.path.join(feedback, when, page)) for page in pages]
            read = [r for r in read if r]
            if read:
                out[name] = {"time": when, "score": sum(r[0] for r in read), "max_score": sum(r[1] for r in read),
                             "lost": [label for r in read for label in r[2]]}
                break
    return out


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
                except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
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

    from jupyter_server.base.handlers import JupyterHandler

    from .progress import PAGE_POLICY, page_of

    async def progress(handler):
        root = os.path.expanduser(handler.settings.get("server_root_dir") or os.getcwd())
        try:
            return await asyncio.get_running_loop().run_in_executor(None, progress_of, root)
        except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
            raise web.HTTPError(500, f"your progress could not be worked out ({inert(str(exc))[:300]})") from None

    class Progress(APIHandler):
        @web.authenticated
        async def get(self):
            report = await progress(self)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(report))

    class ProgressPage(JupyterHandler):
        @web.authenticated
        async def get(self):
            report = await progress(self)
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header("Content-Security-Policy", PAGE_POLICY)
            self.finish(page_of(report))

    class Returned(APIHandler):
        @web.authenticated
        async def get(self):
            root = os.path.expanduser(self.settings.get("server_root_dir") or os.getcwd())
            found = await asyncio.get_running_loop().run_in_executor(None, returned, root)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"value": found}))

    return [("course/due", Due), ("course/fetch-again", FetchAgain), ("course/returned", Returned),
            ("course/progress", Progress),
            ("course/progress.html", ProgressPage)]


def _jupyter_server_extension_points():
    return [{"module": "learner.lab_server"}]


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join
    base = serverapp.web_app.settings["base_url"]
    serverapp.web_app.add_handlers(".*$", [(url_path_join(base, path), handler) for path, handler in _handlers()])
