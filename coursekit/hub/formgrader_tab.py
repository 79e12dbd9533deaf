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


def _load_jupyter_server_extension(serverapp):
    _quiet_dialogs()
    from ..formgrader_api import install_course_api
    install_course_api()  # `course extend`'s rows alone are no submission in the formgrader's lists and averages
    formgrader_pages.protect(serverapp, LINKS)
