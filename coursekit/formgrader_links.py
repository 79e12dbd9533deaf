"""The formgrader's links, when it has a browser tab of its own (a Jupyter server extension of the instructors'
servers on the hub: ``c.ServerApp.jpserver_extensions``).

On the hub the formgrader cannot be framed inside JupyterLab (every user's server forbids framing: they share the
hub's origin), so the instructor's "Nbgrader > Formgrader" opens it in a tab of its own
(``hub/share/jupyter/labextensions/@attention-course/hub-lab``). There nbgrader's links to an assignment's folders
("source", "release") are written for the classic notebook at the server's root (``/tree/<path>``), which on a hub
is not this user's server (nbgrader's issue #1794). This extension serves nbgrader's ``utils.js`` with those links
pointing at this server's JupyterLab instead (``<base_url>/lab/tree/<path>``), and changes nothing else.
"""
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


def _jupyter_server_extension_points():
    return [{"module": "coursekit.formgrader_links"}]


def _load_jupyter_server_extension(serverapp):
    text = patched_utils()
    if text is None:
        serverapp.log.warning("coursekit.formgrader_links: nbgrader's formgrader utils.js has changed; its links "
                              "are served unchanged")
        return
    base = serverapp.web_app.settings.get("base_url", "/")
    pattern = base.rstrip("/") + "/formgrader/static/js/utils\\.js"
    # ahead of nbgrader's own static handler, whichever extension loaded first
    serverapp.web_app.default_router.rules.insert(0, Rule(PathMatches(pattern), UtilsHandler, {"text": text}))
