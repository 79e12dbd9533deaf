"""The formgrader in a browser tab of its own: its links, and its pages escaped (a Jupyter server extension of the
instructors' servers on the hub: ``c.ServerApp.jpserver_extensions``).

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

nbgrader renders the formgrader's pages with a Jinja environment that escapes nothing, and several of them put a
part of the URL (a student id, an assignment name) into a script or the page as it is: a link to
``/formgrader/manage_students/<markup>`` would run that markup in the instructor's server. Here that environment
escapes every value (each is plain text: ids, names, paths), so a name is shown as text whatever it holds.
"""
import logging
import os

from tornado import web
from tornado.routing import PathMatches, Rule

CLASSIC_LINK = '.attr("href", prefix + path)'
LAB_LINK = ('.attr("href", base_url.replace(/\\/$/, "") + "/lab/tree/" + '
            'encodeURI(path.replace(/^(\\.\\/)+/, "")))')


def patched_utils():
    """nbgrader's formgrader ``utils.js`` with its top-frame links pointing at JupyterLab; None when this nbgrader's
    file no longer has the line (then it is served unchanged)."""
    import nbgrader
    path = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "static", "js",
                        "utils.js")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text.replace(CLASSIC_LINK, LAB_LINK, 1) if CLASSIC_LINK in text else None


class UtilsHandler(web.RequestHandler):
    def initialize(self, text):
        self.text = text

    def get(self):
        self.set_header("Content-Type", "application/javascript; charset=UTF-8")
        self.set_header("Cache-Control", "no-cache")
        self.finish(self.text)


def escape_pages(web_app):
    """The formgrader's page templates escaped (once nbgrader's extension has made its environment)."""
    env = web_app.settings.get("nbgrader_jinja2_env")
    if env is not None:
        env.autoescape = True
    return env is not None


def _jupyter_server_extension_points():
    return [{"module": "coursekit.hub.formgrader_tab"}]


def _escape_when_made():
    """nbgrader's formgrader extension makes its environment when it loads, which (extensions load by name) is after
    this one: its method that makes it escapes the pages too, from now on in this process."""
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension
    made = FormgradeExtension.init_tornado_settings
    if getattr(made, "escapes_pages", False):
        return

    def init_tornado_settings(self, webapp):
        made(self, webapp)
        escape_pages(webapp)
    init_tornado_settings.escapes_pages = True
    FormgradeExtension.init_tornado_settings = init_tornado_settings


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


def _load_jupyter_server_extension(serverapp):
    _quiet_dialogs()
    web_app = serverapp.web_app
    if not escape_pages(web_app):  # nbgrader's extension is not loaded yet
        _escape_when_made()
    text = patched_utils()
    if text is None:
        serverapp.log.warning("coursekit.hub.formgrader_tab: nbgrader's formgrader utils.js has changed; its links "
                              "are served unchanged")
        return
    base = serverapp.web_app.settings.get("base_url", "/")
    pattern = base.rstrip("/") + "/formgrader/static/js/utils\\.js"
    # ahead of nbgrader's own static handler, whichever extension loaded first
    serverapp.web_app.default_router.rules.insert(0, Rule(PathMatches(pattern), UtilsHandler, {"text": text}))
