"""The formgrader in a browser tab of its own: its links, and its pages escaped (a Jupyter server extension of the
instructors' servers on the hub and of `course instructor-lab`: ``c.ServerApp.jpserver_extensions``).

On the hub the formgrader cannot be framed inside JupyterLab (every user's server forbids framing: they share the
hub's origin), so the instructor's "Nbgrader > Formgrader" opens it in a tab of its own
(``node/hub-lab``, built into ``node/share/jupyter/labextensions/@attention-course/hub-lab``). There nbgrader's links to an assignment's folders
("source", "release") are written for the classic notebook at the server's root (``/tree/<path>``), which on a hub
is not this user's server (nbgrader's issue #1794). This extension serves nbgrader's ``utils.js`` with those links
pointing at this server's JupyterLab instead (``<base_url>/lab/tree/<path>``).

The formgrader's dialogs (Generate, Release, Collect, Autograde, Generate Feedback) show the log of the nbgrader
command they ran, which nbgrader captures at whatever level its handler's logger has: DEBUG on an instructor's
server (each cell's checksum, the preprocessors, nbconvert's template paths), and, for feedback, traitlets'
warnings that nbgrader's own exporter settings are "not recognized" by its preprocessors. Here that capture keeps
INFO and above, without those warnings (``quiet_capture_log``): what the dialog shows is what happened.

nbgrader's formgrader shows what a link or the gradebook holds as markup in several places (a link to
``/formgrader/manage_students/<markup>`` ran that markup in the instructor's server, whose API opens a terminal):
this extension escapes its pages, serves its scripts that did so with the value put in as text, refuses a
``?path=`` that is not the course and gives every formgrader answer a Content-Security-Policy
(``coursekit.hub.formgrader_pages`` says each). Every server the project starts with a formgrader loads it: the
hub's instructor servers (``coursekit.hub.setup.role_settings``) and `course instructor-lab`
(``coursekit.cli_class.instructor_settings``), both by ``EXTENSION``.
"""
import logging

from learner.lab_server import command_answer

from . import formgrader_pages

EXTENSION = "coursekit.hub.formgrader_tab"  # the name the servers' settings enable
CLASSIC_LINK = '.attr("href", prefix + path)'
LAB_LINK = ('.attr("href", base_url.replace(/\\/$/, "") + "/lab/tree/" + '
            'encodeURI(path.replace(/^(\\.\\/)+/, "")))')
LINKS = (("utils.js", CLASSIC_LINK, LAB_LINK),)  # nbgrader's top-frame links, pointing at this server's lab


def patched_utils():
    """nbgrader's formgrader ``utils.js`` as this extension serves it (its links pointing at JupyterLab, a dialog's
    message put in as text)."""
    texts, _ = formgrader_pages.patched_scripts(LINKS + formgrader_pages.SCRIPT_PATCHES)
    return texts["utils.js"]


def _jupyter_server_extension_points():
    return [{"module": EXTENSION}]


# traitlets' warning when nbconvert's exporter passes its own settings (display_data_priority) on to nbgrader's
# preprocessors, which have no such option: nbgrader's doing, on every feedback page
NOT_RECOGNIZED = "Config option `display_data_priority` not recognized by"


class _Quiet(logging.Filter):
    def filter(self, record):
        return record.levelno >= logging.INFO and not str(record.msg).startswith(NOT_RECOGNIZED)


def quiet_capture_log(app, fmt="[%(levelname)s] %(message)s"):
    """nbgrader's ``capture_log`` (``nbgrader.utils``: run ``app``, return {success, log, error}), its handler keeping
    INFO and above without the warning above."""
    import io
    import traceback

    from nbgrader.utils import LogFormatter
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(LogFormatter(fmt=fmt))
    handler.addFilter(_Quiet())
    app.log.addHandler(handler)
    try:
        app.start()
        result = {"success": True}
    except BaseException:
        result = {"success": False, "error": traceback.format_exc()}
    finally:
        app.log.removeHandler(handler)
    if buffer.getvalue():
        result["log"] = buffer.getvalue()
    return result


def _quiet_dialogs():
    import nbgrader.apps.api as api
    api.capture_log = quiet_capture_log


EXTEND_LIMIT = 600  # seconds `course extend` may take (it regrades the late penalty of graded submissions)


def extend_in_a_process(root, asked):
    """`course extend` in the course folder ``root`` as the lab's Extension dialog asks it (``asked``: assignment,
    students, and one of until, hours, remove): {success, lines} or {success: False, message}."""
    import subprocess
    import sys
    import re
    students, assignment = asked.get("students"), asked.get("assignment")
    if not (isinstance(assignment, str) and isinstance(students, list) and students
            and all(isinstance(s, str) and s for s in students)):
        return {"success": False, "message": "name an assignment and at least one student"}
    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}", assignment):
        return {"success": False, "message": f"{assignment[:100]!r} is not an assignment's name"}
    if len(students) > 5000 or any("\0" in s or len(s) > 200 for s in students):
        return {"success": False, "message": "at most 5,000 student ids of at most 200 characters each"}
    when = [(flag, asked.get(key)) for key, flag in (("until", "--until"), ("hours", "--by"))
            if isinstance(asked.get(key), str) and asked.get(key).strip()]
    if asked.get("remove") is True:
        when.append(("--remove", None))
    if len(when) != 1 or any("\0" in v for _, v in when if v):
        return {"success": False, "message": "give one of: a date (until), a number of hours, or remove"}
    flag, value = when[0]
    command = [sys.executable, "-P", "-m", "coursekit", "extend", flag if value is None else f"{flag}={value.strip()}",
               "--course", root, "--", assignment, *students]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, timeout=EXTEND_LIMIT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"success": False, "message": f"course extend did not finish within {EXTEND_LIMIT} s"}
    except (OSError, ValueError) as exc:
        return {"success": False, "message": f"course extend could not be started ({type(exc).__name__})"}
    return command_answer(done, "course extend")  # as the student's routes answer theirs


def _extend_handler(root):
    import asyncio
    import json

    from jupyter_server.base.handlers import APIHandler
    from tornado import web

    class Extend(APIHandler):
        """POST <base>course/extend: `course extend` from the lab (Nbgrader > Extension...)."""

        @web.authenticated
        async def post(self):
            try:
                asked = json.loads(self.request.body or b"{}")
            except ValueError:
                asked = None
            if not isinstance(asked, dict):
                raise web.HTTPError(400, "not a request for an extension")
            answer = await asyncio.get_running_loop().run_in_executor(None, extend_in_a_process, root, asked)
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(answer))

    return Extend


def _load_jupyter_server_extension(serverapp):
    import os

    from jupyter_server.utils import url_path_join
    root = os.environ.get("COURSE_ROOT") or serverapp.root_dir
    serverapp.web_app.add_handlers(".*$", [(url_path_join(serverapp.web_app.settings["base_url"], "course/extend"),
                                            _extend_handler(os.path.abspath(root)))])
    _quiet_dialogs()
    from ..formgrader_api import install_course_api
    install_course_api()  # `course extend`'s rows alone are no submission in the formgrader's lists and averages
    formgrader_pages.protect(serverapp, LINKS)
