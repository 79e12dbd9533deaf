"""The formgrader's pages show what a link or the gradebook holds as text, never as markup that runs: what
``coursekit.hub.formgrader_tab`` (the server extension of every server the project starts with a formgrader: the
hub's instructor servers and `course instructor-lab`) does to nbgrader's formgrader when it loads.

A student reaches the instructor's formgrader in two ways: a link they send (a student id, an assignment or a
notebook name in its path, a ``?path=`` folder), and what they put in the gradebook (their name, from the roster or
the LMS; on a machine without a hub, their id). nbgrader 0.9.6 shows both as markup in several places, and the
formgrader runs on the instructor's Jupyter server, whose API opens a terminal as them. Closed here:

* nbgrader's page templates (its own Jinja environment, which escapes nothing) are escaped, every value put
  into a script as a JavaScript string (``tojson``), and the shell commands a page shows quote their values;
* the page of a submission (nbconvert's exporter with nbgrader's template, which escapes nothing either) is given
  nbgrader's values (the student's id and names, the assignment, the notebook) escaped;
* nbgrader's scripts that put a value in the page as markup (a dialog's message, a notebook whose file is missing)
  are served with the value put in as text;
* ``/formgrader?path=<folder>`` (which makes the server read ``<folder>/nbgrader_config.py``, Python, as the
  instructor) is refused unless the folder is the course itself;
* every formgrader answer carries a Content-Security-Policy: its pages load nothing from another origin and have no
  ``object``, ``<base>`` or form posted elsewhere; its API's JSON and a submission's files run no script at all (the
  files in a sandbox); the server's own ``frame-ancestors`` stays (the hub's ``'none'``; a lab's ``'self'``, where
  nbgrader's menu frames the formgrader). nbgrader's pages keep their inline scripts, so escaping is the defence
  and the policy what stops the rest.

nbgrader's page of a submission loads MathJax 2 from a CDN, which the policy refuses (and a hub may have no
internet): its maths showed as TeX. The page loads it from this server instead (``/formgrader/mathjax/``: npm's
``mathjax`` 2.7.9, which `make node` copies beside the course's lab plugin), through the same template macro, with
nbconvert's settings and the ``Safe`` extension (no ``javascript:`` link or style from a submission's TeX); its
configuration is a plain script, not a ``text/x-mathjax-config`` block, which MathJax would ``eval`` (the policy has
no ``'unsafe-eval'``).
"""
import functools
import html
import os
import re
import shlex

import jinja2
from tornado import web
from tornado.routing import PathMatches, Rule

# the formgrader's pages: nbgrader's scripts and styles (its own and inline), images and fonts (its own, inline
# ones), nothing from elsewhere
PAGES = ("default-src 'self'", "script-src 'self' 'unsafe-inline'", "style-src 'self' 'unsafe-inline'",
         "img-src 'self' data:", "font-src 'self' data:", "connect-src 'self'", "object-src 'none'",
         "base-uri 'none'", "form-action 'self'")
# its API's JSON (nbgrader sends it as text/html, so a person who opens one sees it as a page): nothing runs
DATA = ("default-src 'none'", "base-uri 'none'", "form-action 'none'", "sandbox")
# a file of a submission (``/formgrader/submissions/<id>/<path>``: the student's): shown, never run
FILES = ("default-src 'none'", "img-src 'self' data:", "media-src 'self'", "style-src 'self' 'unsafe-inline'",
         "font-src 'self' data:", "base-uri 'none'", "form-action 'none'", "sandbox")
RELATIVE_REPORT = re.compile(r"report-uri (?=api/)")
NOT_FRAMED_ELSEWHERE = "frame-ancestors 'self'"  # when the server's own policy says nothing of framing

# nbgrader's scripts that put a value into the page as markup (a string given to jQuery's append is parsed as HTML)
MODAL_BODY = 'content.append($("<div/>").addClass("modal-body").append(body));'
MODAL_TEXT = ('content.append($("<div/>").addClass("modal-body")'
              '.append(typeof body === "string" ? $("<p/>").text(body) : body));')
MISSING_FILE = 'this.$name.append(name + " (file missing)");'
MISSING_TEXT = 'this.$name.text(name + " (file missing)");'
SCRIPT_PATCHES = (("utils.js", MODAL_BODY, MODAL_TEXT),
                  ("manage_students_notebook_submissions.js", MISSING_FILE, MISSING_TEXT))
# what nbgrader passes to the page of a submission and its template writes as it is
SUBMISSION_VALUES = ("assignment_id", "notebook_id", "submission_id", "student", "first_name", "last_name",
                     "notebook_path", "filename")


# ------------------------------------------------------------------ nbgrader's page templates
SCRIPT_BLOCK = re.compile(r"(<script\b[^>]*>)(.*?)(</script>)", re.S | re.I)
PRE_BLOCK = re.compile(r"(<pre\b[^>]*>)(.*?)(</pre>)", re.S | re.I)
QUOTED_VALUE = re.compile(r'"\{\{-?\s*([A-Za-z_][\w.]*)\s*-?\}\}"')


def rewrite_template(source):
    """An nbgrader page template with each quoted value in an inline script written as a JavaScript string
    (``tojson``: any value, quotes, backslashes, ``</script>`` and line breaks included) and each quoted value in a
    shown command quoted for the shell (a link's ``$(...)`` is text when pasted)."""
    def in_script(m):
        if "src=" in m.group(1):
            return m.group(0)
        return m.group(1) + QUOTED_VALUE.sub(r"{{ \1|tojson }}", m.group(2)) + m.group(3)

    def in_pre(m):
        return m.group(1) + QUOTED_VALUE.sub(r"{{ \1|shell_quote }}", m.group(2)) + m.group(3)
    return PRE_BLOCK.sub(in_pre, SCRIPT_BLOCK.sub(in_script, source))


class RewrittenLoader(jinja2.BaseLoader):
    """nbgrader's template loader, its templates passed through ``rewrite_template``."""

    def __init__(self, loader):
        self.loader = loader

    def get_source(self, environment, template):
        source, filename, uptodate = self.loader.get_source(environment, template)
        return rewrite_template(source), filename, uptodate

    def list_templates(self):
        return self.loader.list_templates()


class EscapedSubmission:
    """nbgrader's exporter of a submission's page, given nbgrader's values escaped (its template, nbconvert's,
    writes them as they are: a student's name from the LMS would be markup in the instructor's page)."""

    def __init__(self, exporter):
        self.exporter = exporter

    def from_filename(self, filename, resources=None, **kw):
        resources = dict(resources or {})
        for key in SUBMISSION_VALUES:
            if isinstance(resources.get(key), str):
                resources[key] = html.escape(resources[key])
        return self.exporter.from_filename(filename, resources=resources, **kw)

    def __getattr__(self, name):
        return getattr(self.exporter, name)


def escape_pages(web_app):
    """The formgrader's pages escaped (and MathJax loaded from this server), once nbgrader's extension has made its environment and exporter; False when
    it has not yet."""
    env = web_app.settings.get("nbgrader_jinja2_env")
    if env is None:
        return False
    if not isinstance(env.loader, RewrittenLoader):
        env.autoescape = True
        env.filters["shell_quote"] = lambda value: shlex.quote(str(value))
        env.loader = RewrittenLoader(env.loader)
        if env.cache is not None:  # nothing rendered yet, but a template compiled before this is compiled again
            env.cache.clear()
    exporter = web_app.settings.get("nbgrader_exporter")
    if exporter is not None and not isinstance(exporter, EscapedSubmission):
        local_mathjax(exporter, web_app.settings.get("base_url", "/"), mathjax_folder() is not None)
        web_app.settings["nbgrader_exporter"] = EscapedSubmission(exporter)
    return True


def escape_when_made():
    """nbgrader's formgrader extension makes its environment when it loads, which (extensions load by name) is after
    the course's: its method that makes it escapes the pages too, from now on in this process."""
    from nbgrader.server_extensions.formgrader.formgrader import FormgradeExtension
    made = FormgradeExtension.init_tornado_settings
    if getattr(made, "escapes_pages", False):
        return

    def init_tornado_settings(self, webapp):
        made(self, webapp)
        escape_pages(webapp)
    init_tornado_settings.escapes_pages = True
    FormgradeExtension.init_tornado_settings = init_tornado_settings


# ------------------------------------------------------------------ MathJax, from this server
MATHJAX_URL = "/formgrader/mathjax/"
MATHJAX_PARTS = ("labextensions", "@attention-course", "hub-lab", "mathjax")  # under a JUPYTER_PATH folder
# nbconvert's MathJax macro (its base template's mathjax.html.j2, which nbgrader's page of a submission calls with
# the CDN's address), its settings kept, MathJax loaded from ``src``
MATHJAX_MACRO = """{%- macro mathjax(url=None) -%}
<script>
window.MathJax = {
  TeX: {equationNumbers: {autoNumber: "AMS", useLabelIds: true}},
  tex2jax: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]],
            processEscapes: true, processEnvironments: true},
  displayAlign: "center", messageStyle: "none", CommonHTML: {linebreaks: {automatic: true}}
};
</script>
<script src="SRC"></script>
{%- endmacro %}
"""
NO_MATHJAX = "{%- macro mathjax(url=None) -%}{%- endmacro %}"


def mathjax_folder():
    """The copy of MathJax that `make node` puts beside the course's lab plugin, found where JupyterLab finds the
    plugin (the server's JUPYTER_PATH); None when it is not built."""
    from jupyter_core.paths import jupyter_path
    for folder in jupyter_path(*MATHJAX_PARTS):
        if os.path.isfile(os.path.join(folder, "MathJax.js")):
            return folder
    return None


def local_mathjax(exporter, base_url, found=True):
    """nbgrader's exporter of a submission's page, its MathJax macro loading this server's copy (``found``), or
    nothing (no copy: no request to a CDN the policy refuses)."""
    src = base_url.rstrip("/") + MATHJAX_URL + "MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    macro = MATHJAX_MACRO.replace("SRC", html.escape(src)) if found else NO_MATHJAX
    if not any(getattr(loader, "course_mathjax", False) for loader in exporter.extra_loaders):
        loader = jinja2.DictLoader({"mathjax.html.j2": macro})
        loader.course_mathjax = True
        exporter.extra_loaders = [loader, *exporter.extra_loaders]  # tried first; the environment is made again


def serve_mathjax(serverapp):
    """``/formgrader/mathjax/`` serving the copy of ``mathjax_folder``; the folder, or None (said in the log)."""
    folder = mathjax_folder()
    if folder is None:
        serverapp.log.warning("coursekit.hub.formgrader_tab: MathJax is not built (make node): the formgrader shows "
                              "a submission's maths as TeX")
        return None
    base = serverapp.web_app.settings.get("base_url", "/").rstrip("/")
    serverapp.web_app.default_router.rules.insert(0, Rule(PathMatches(base + MATHJAX_URL + "(.*)"),
                                                          web.StaticFileHandler, {"path": folder}))
    return folder


# ------------------------------------------------------------------ the policy and the one course
def policy_of(handler, server_policy):
    """The Content-Security-Policy of a formgrader answer: the server's own (its ``frame-ancestors``, its report
    URL) and the formgrader's, by what ``handler`` answers."""
    from nbgrader.server_extensions.formgrader.base import BaseApiHandler
    from nbgrader.server_extensions.formgrader.handlers import SubmissionFilesHandler
    if isinstance(handler, BaseApiHandler):
        ours = DATA
    elif isinstance(handler, SubmissionFilesHandler):
        ours = FILES
    else:
        ours = PAGES
    if "frame-ancestors" not in server_policy:
        ours = (NOT_FRAMED_ELSEWHERE,) + ours
    return "; ".join(p for p in (server_policy.strip().rstrip(";"), *ours) if p)


def one_course(get):
    """nbgrader's ``/formgrader?path=<folder>`` (the lab's "Formgrader (local)"), which reads
    ``<folder>/nbgrader_config.py`` (Python, run as the instructor), refused for any folder but the course's."""
    @functools.wraps(get)
    def checked(self, *args, **kwargs):
        path = self.get_argument("path", "")
        if path and os.path.realpath(os.path.abspath(path)) != os.path.realpath(self.coursedir.root):
            self.log.warning("formgrader: refused ?path= naming a folder that is not the course")
            raise web.HTTPError(400, "this formgrader grades its own course: a link may not name another folder")
        return get(self, *args, **kwargs)
    checked.one_course = True
    return checked


def protect_handlers():
    """Every formgrader handler of this process answers with ``policy_of``'s policy, and ``?path=`` names the course
    or nothing (nbgrader's handler classes, changed once)."""
    from nbgrader.server_extensions.formgrader import base, handlers
    if getattr(base.BaseHandler, "course_policy", False):
        return

    def content_security_policy(self):
        server = super(base.BaseHandler, self).content_security_policy
        # Jupyter's report URL, made from nbgrader's base_url (stripped of its "/"): relative, so made absolute
        server = RELATIVE_REPORT.sub("report-uri " + self.settings.get("base_url", "/"), server)
        return policy_of(self, server)
    base.BaseHandler.content_security_policy = property(content_security_policy)
    base.BaseHandler.course_policy = True
    if not getattr(handlers.FormgraderHandler.get, "one_course", False):
        handlers.FormgraderHandler.get = one_course(handlers.FormgraderHandler.get)


# ------------------------------------------------------------------ nbgrader's scripts, changed
def nbgrader_script(name):
    import nbgrader
    path = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "static", "js", name)
    with open(path, encoding="utf-8") as f:
        return f.read()


def patched_scripts(patches):
    """{file: text} of nbgrader's formgrader scripts with ``patches`` ((file, old, new), ...) applied, and the
    patches whose text this nbgrader's file no longer has (its file is served with the rest applied)."""
    texts, missing = {}, []
    for name, old, new in patches:
        text = texts.get(name) or nbgrader_script(name)
        if old in text:
            texts[name] = text.replace(old, new)
        else:
            texts.setdefault(name, text)
            missing.append((name, old))
    return texts, missing


class ScriptHandler(web.RequestHandler):
    def initialize(self, text):
        self.text = text

    def get(self):
        self.set_header("Content-Type", "application/javascript; charset=UTF-8")
        self.set_header("Cache-Control", "no-cache")
        self.finish(self.text)


def serve_scripts(serverapp, texts):
    """``texts`` ({file: text}) served in place of nbgrader's files of those names, ahead of nbgrader's own static
    handler whichever extension loaded first."""
    base = serverapp.web_app.settings.get("base_url", "/").rstrip("/")
    for name, text in texts.items():
        pattern = base + "/formgrader/static/js/" + re.escape(name)
        serverapp.web_app.default_router.rules.insert(0, Rule(PathMatches(pattern), ScriptHandler, {"text": text}))


def protect(serverapp, script_patches=()):
    """All of the above, on ``serverapp`` (the extension's load), with ``script_patches`` of the caller's applied
    beside the course's own. Returns the patches nbgrader's files no longer match (said in the server's log)."""
    protect_handlers()
    serve_mathjax(serverapp)
    if not escape_pages(serverapp.web_app):  # nbgrader's extension is not loaded yet
        escape_when_made()
    texts, missing = patched_scripts(tuple(script_patches) + SCRIPT_PATCHES)
    serve_scripts(serverapp, texts)
    for name, old in missing:
        serverapp.log.warning("coursekit.hub.formgrader_tab: nbgrader's formgrader %s no longer has %r; that part "
                              "of it is served unchanged", name, old[:60])
    return missing
