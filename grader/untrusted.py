"""A submission is untrusted HTML: what of it may reach a page a person opens, and in what form.

nbgrader stores the autograded notebook, and every page that shows a submission is made from that file: the
feedback (nbconvert's HTML exporter with nbgrader's feedback template), the formgrader's pages for the instructor
(its own template, on the Jupyter server's origin, with the instructor's session), and anything an instructor
opens or converts later. So the notebook is made inert *before* nbgrader stores it (``NeutraliseSubmission``, in
the autograde preprocessors right before ``SaveAutoGrades``), and not in one template or another:

* outputs are rebuilt from an allow-list: printed text, errors (as text), ``text/plain`` values and raster images
  (PNG, JPEG, GIF) whose data is strict base64 of an image of that kind. HTML, Markdown, SVG, JavaScript, LaTeX,
  JSON and any other kind become a line of plain text saying what was there, followed by its source as text; a
  widget becomes a short static note. Output metadata is dropped except an image's integer width and height;
* a Markdown or raw cell is kept as it is only when its source is exactly that of a cell of the instructor's
  source or release notebook (the course's own prose); any other (a learner's own, or an edited one) is shown as
  plain text in a fenced block whose fence is longer than any run of backticks inside;
* cell attachments, unknown cell and notebook metadata (such as a widget state, which would make the exporters
  load the widget manager from a CDN) are dropped; ``nbgrader`` metadata stays only on cells whose ``grade_id``
  the source notebook has; execution counts are integers and cell ids match nbformat's pattern.

Nothing is escaped here: escaping is the templates' job, and every field left is one that nbconvert's templates
escape (text, tracebacks through ``ansi2html``, code through Pygments). What would not be escaped (raw HTML, an
attribute built from metadata) is not left.

``FeedbackPage`` makes the feedback page load nothing from outside: no MathJax from a CDN (the course's own maths
in the instructor's Markdown is rendered to MathML when the feedback is written, which browsers draw without a
script), and a Content-Security-Policy that forbids every script, frame and request other than inline images and
styles, should anything get past the rules above.
"""
import base64
import binascii
import copy
import os
import re

import nbformat
from jinja2 import BytecodeCache
from nbconvert.exporters import HTMLExporter
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode
from traitlets.config import Config

TEXT_KINDS = ("text/plain",)
IMAGE_KINDS = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff", "image/gif": b"GIF8"}
KNOWN_NOTEBOOK_METADATA = ("kernelspec", "language_info", "nbgrader", "course", "course_version")
WIDGET = "application/vnd.jupyter.widget-view+json"
CELL_ID = re.compile(r"\A[a-zA-Z0-9-_]{1,64}\Z")
BASE64 = re.compile(r"^[A-Za-z0-9+/\s]*={0,2}\s*$")
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; base-uri 'none'; form-action 'none'"


def _text(value):
    if isinstance(value, list):
        value = "".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value)


def _image(kind, data):
    """``data`` as clean base64 when it is strict base64 of an image of ``kind``; else None."""
    data = _text(data)
    if len(data) > 20_000_000 or not BASE64.match(data):
        return None
    try:
        raw = base64.b64decode("".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return None
    if not raw.startswith(IMAGE_KINDS[kind]):
        return None
    return base64.b64encode(raw).decode("ascii")


def _note(kind, source=""):
    if kind == WIDGET:
        return "[an interactive widget was here: it shows only in a running notebook]"
    head = f"[{kind} output, shown as text: a submission's markup is never shown live]"
    source = _text(source).strip()
    return head + ("\n" + source[:20_000] if source else "")


def clean_output(out):
    """One output rebuilt from the allow-list (a new dict: nothing of the original is kept by reference)."""
    kind = out.get("output_type")
    if kind == "stream":
        name = out.get("name") if out.get("name") in ("stdout", "stderr") else "stdout"
        return nbformat.v4.new_output("stream", name=name, text=_text(out.get("text", "")))
    if kind == "error":
        return nbformat.v4.new_output("error", ename=_text(out.get("ename", "Error"))[:200],
                                      evalue=_text(out.get("evalue", ""))[:20_000],
                                      traceback=[_text(t) for t in (out.get("traceback") or [])][:200])
    if kind not in ("display_data", "execute_result"):
        return nbformat.v4.new_output("stream", name="stdout", text=_note(f"unknown ({_text(kind)[:40]})") + "\n")
    data, metadata, notes = {}, {}, []
    raw = out.get("data") if isinstance(out.get("data"), dict) else {}
    for key, value in raw.items():
        if key in TEXT_KINDS:
            data[key] = _text(value)
        elif key in IMAGE_KINDS and _image(key, value) is not None:
            data[key] = _image(key, value)
            size = (out.get("metadata") or {}).get(key)
            if isinstance(size, dict):
                kept = {k: int(v) for k, v in size.items() if k in ("width", "height")
                        and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 100_000}
                if kept:
                    metadata[key] = kept
        else:
            notes.append(_note(key, "" if key == WIDGET else value))
    if notes:
        # what was not shown, said in words; a plain value the output also carried stays after it
        data["text/plain"] = "\n".join(notes + ([data["text/plain"]] if "text/plain" in data else []))
    if not data:
        data["text/plain"] = ""
    if kind == "execute_result":
        count = out.get("execution_count")
        return nbformat.v4.new_output("execute_result", data=data, metadata=metadata,
                                      execution_count=count if isinstance(count, int) and count >= 0 else None)
    return nbformat.v4.new_output("display_data", data=data, metadata=metadata)


def as_plain_text(source):
    """Markdown that shows ``source`` as plain text (a fenced block longer than any run of backticks in it)."""
    source = _text(source)
    longest = max((len(m) for m in re.findall(r"`+", source)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"*(text from the submission, shown as written)*\n\n{fence}text\n{source}\n{fence}"


def trusted_cells(course_root, assignment):
    """(the sources of the Markdown and raw cells of the instructor's source and release notebooks, the grade ids
    of the source notebook)."""
    texts, ids = set(), set()
    for folder in ("source", "release"):
        path = os.path.join(course_root, folder, assignment, assignment + ".ipynb")
        if not os.path.isfile(path):
            continue
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type in ("markdown", "raw"):
                texts.add(_text(cell.source))
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if folder == "source" and grade_id:
                ids.add(grade_id)
    return texts, ids


def neutralise(nb, trusted_texts, known_ids):
    """``nb`` made inert in place (see the module's docstring); returns it."""
    for key in list(nb.metadata):
        if key not in KNOWN_NOTEBOOK_METADATA:
            del nb.metadata[key]
    cells = []
    for index, cell in enumerate(nb.cells):
        kind = cell.get("cell_type")
        source = _text(cell.get("source", ""))
        md = cell.get("metadata") or {}
        nbgrader_md = md.get("nbgrader") if isinstance(md.get("nbgrader"), dict) else None
        keep_md = {}
        if nbgrader_md and nbgrader_md.get("grade_id") in known_ids:
            keep_md["nbgrader"] = copy.deepcopy(nbgrader_md)
        if kind == "code":
            new = nbformat.v4.new_code_cell(source, metadata=keep_md)
            new.outputs = [clean_output(o) for o in (cell.get("outputs") or []) if isinstance(o, dict)]
            count = cell.get("execution_count")
            new.execution_count = count if isinstance(count, int) and count >= 0 else None
        elif kind in ("markdown", "raw") and source in trusted_texts:
            # the course's own cell; a raw cell's mimetype is not carried, so nothing is emitted raw
            new = (nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_raw_cell)(
                source, metadata=keep_md)
        else:
            new = nbformat.v4.new_markdown_cell(as_plain_text(source), metadata=keep_md)
        cell_id = cell.get("id")
        new["id"] = cell_id if isinstance(cell_id, str) and CELL_ID.match(cell_id) else f"cell-{index}"
        cells.append(new)
    nb.cells = cells
    return nb


class NeutraliseSubmission(NbGraderPreprocessor):
    """Autograde: the submission made inert before nbgrader stores it (see the module's docstring)."""

    course_root = Unicode("", help="the course folder: source/ and release/ say which cells are the course's own"
                          ).tag(config=True)

    def preprocess(self, nb, resources):
        assignment = resources.get("nbgrader", {}).get("assignment") or ""
        texts, ids = trusted_cells(self.course_root or os.getcwd(), assignment)
        return neutralise(nb, texts, ids), resources


# ------------------------------------------------------------------ the feedback page
MATHS = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<![\\$])\$(?!\s)([^$\n]+?)(?<![\s\\])\$(?!\$)", re.S)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def maths_to_mathml(source):
    """The course's Markdown with its ``$...$`` and ``$$...$$`` maths as MathML (left as it is where it cannot
    be converted, and inside code)."""
    from latex2mathml.converter import convert

    def one(m):
        tex, display = (m.group(1), "block") if m.group(1) is not None else (m.group(2), "inline")
        try:
            return convert(tex.strip(), display=display).replace("\n", "")
        except Exception:  # a macro the converter does not know: the TeX stays as text
            return m.group(0)

    pieces, last = [], 0
    for code in list(FENCE.finditer(source)) + [None]:
        end = code.start() if code else len(source)
        chunk = source[last:end]
        # inline code spans stay as they are
        parts = re.split(r"(`+[^`]*?`+)", chunk)
        pieces.append("".join(p if p.startswith("`") else MATHS.sub(one, p) for p in parts))
        if code:
            pieces.append(code.group(0))
            last = code.end()
    return "".join(pieces)


class FeedbackPage(NbGraderPreprocessor):
    """Feedback: the course's own maths as MathML (no MathJax, no CDN). Only cells whose source is the
    instructor's (``trusted_cells``) are touched; a learner's text was made plain at autograde time."""

    course_root = Unicode("", help="the course folder: source/ and release/ say which cells are the course's own"
                          ).tag(config=True)

    def preprocess(self, nb, resources):
        assignment = resources.get("nbgrader", {}).get("assignment") or ""
        texts, _ = trusted_cells(self.course_root or os.getcwd(), assignment)
        resources["course_toc_labels"] = toc_labels(nb, texts)
        for cell in nb.cells:
            if cell.cell_type == "markdown" and cell.source in texts and "$" in cell.source:
                cell.source = maths_to_mathml(cell.source)
        return nb, resources


CELL_KINDS = ("basic", "edge", "errors")
QUESTION = re.compile(r"^\s*\*\*(Question \d+)\*\*\.?\s*(.*)", re.S)


def toc_labels(nb, course_texts):
    """{grade id: what the feedback's table of contents calls the graded cell}: an exercise's cells by its name and
    part ("softmax · basic"), a question's by its number and the start of its text ("Question 1 · The logits…").
    Only the course's own Markdown is read for a title (``course_texts``), never a learner's."""
    labels, title = {}, None
    for cell in nb.cells:
        md = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "markdown" and cell.source in course_texts:
            found = QUESTION.match(cell.source)
            title = (found.group(1), found.group(2)) if found else None
        if not md.get("grade") or md.get("solution") or not md.get("grade_id"):
            continue
        name, _, part = md["grade_id"].rpartition("_")
        if part not in CELL_KINDS:
            continue
        if name.startswith("answer_") and title:
            text = re.sub(r"\s+", " ", re.sub(r"[$*`]", "", tex_as_text(title[1]))).strip()
            labels[md["grade_id"]] = f"{title[0]} · {text[:70] + '…' if len(text) > 70 else text}"
        else:
            labels[md["grade_id"]] = f"{name} · {part}"
    return labels


TEX_SYMBOLS = {"alpha": "α", "beta": "β", "tau": "τ", "theta": "θ", "omega": "ω", "ell": "ℓ", "sqrt": "√",
               "times": "×", "cdot": "·", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "infty": "∞",
               "dots": "…", "ldots": "…", "to": "→", "in": "∈", "approx": "≈", "pm": "±", "lvert": "|", "rvert": "|",
               "mid": "|", "sum": "Σ", "top": "ᵀ", "ast": "*"}


def tex_as_text(source):
    """The course's maths as plain text, for a line that shows no maths (the table of contents): ``$\\tau = 2$``
    becomes "τ = 2", ``\\mathbf{x}`` "x", ``\\lvert\\mathcal{V}\\rvert`` "|V|"; a command it does not know loses its
    backslash."""
    def command(m):
        if m.group(1) in FONTS:
            return ""
        return TEX_SYMBOLS.get(m.group(1), m.group(1))
    text = re.sub(r"\\(?:left|right|big|Big|quad|qquad)(?![A-Za-z])|\\[,;!]", " ", source)
    text = re.sub(r"\\([A-Za-z]+)", command, text)
    return text.replace("{", "").replace("}", "")


FONTS = {"text", "mathrm", "mathbf", "mathcal", "boldsymbol", "texttt", "operatorname"}


def template_dir():
    """The folder of the course's feedback template (``course_feedback``: nbgrader's, with the policy above)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")



class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter with the course's feedback template (nbgrader's, with the policy above).

    Its settings sit in its own configuration section, which wins over the ``HTMLExporter`` section that nbgrader's
    GenerateFeedback writes (and over the course's, which the formgrader shares)."""

    def __init__(self, config=None, **kw):
        import nbgrader
        c = Config(config) if config is not None else Config()
        formgrader = os.path.join(os.path.dirname(os.path.abspath(nbgrader.__file__)), "server_extensions",
                                  "formgrader")
        c.FeedbackExporter.template_name = "course_feedback"
        c.FeedbackExporter.extra_template_basedirs = [template_dir()]
        # nbgrader's feedback template (extended as 'feedback/index.html.j2'), and the Bootstrap CSS it inlines
        c.FeedbackExporter.extra_template_paths = [
            os.path.join(formgrader, "templates"),
            os.path.join(formgrader, "static", "node_modules", "bootstrap", "dist", "css")]
        c.FeedbackExporter.mathjax_url = ""
        c.FeedbackExporter.exclude_anchor_links = True  # a heading's "#id" link leaves the page in the lab's viewer
        super().__init__(config=c, **kw)

    def _init_resources(self, resources):
        resources = super()._init_resources(resources)
        resources["course_csp"] = CSP
        return resources

    def default_filters(self):
        yield from super().default_filters()
        yield "course_anchor_boxes", anchors_as_boxes  # the template's cells, each place given its box

    def _create_environment(self):
        """nbconvert's template environment, with the templates compiled once per process (``_COMPILED``) rather
        than once per feedback page: a grading server writes one page per submission, and compiling the ten
        templates of the page took about 0.3 s of CPU each time."""
        environment = super()._create_environment()
        environment.bytecode_cache = _COMPILED
        return environment

    def from_notebook_node(self, nb, resources=None, **kw):
        """The page as ``HTMLExporter`` writes it, without its last pass: that parses the whole page with
        BeautifulSoup (about 0.45 s of CPU a page, with Bootstrap's CSS inlined) to give an ``alt`` text to images
        that lack one and a ``tabindex`` to JupyterLab's cells, which the classic template this one extends has
        not. The ``alt`` text is added here to every ``<img`` tag that has none."""
        from nbconvert.exporters.templateexporter import TemplateExporter
        from nbconvert.filters.highlight import Highlight2HTML
        from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        resources = self._init_resources(resources)
        self.register_filter("highlight_code", self.filters.get("highlight_code",
                                                                Highlight2HTML(pygments_lexer=lexer, parent=self)))
        self.register_filter("filter_data_type", WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata,
                                                                       parent=self, resources=resources))
        html, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        return IMG_WITHOUT_ALT.sub(f'<img alt="{IMG_ALT}"', html), resources


class _CompiledTemplates(BytecodeCache):
    """Jinja's compiled templates kept in memory, keyed by Jinja (template name and a checksum of its source)."""

    def __init__(self):
        self.compiled = {}

    def load_bytecode(self, bucket):
        code = self.compiled.get(bucket.key)
        if code is not None and code[0] == bucket.checksum:
            bucket.code = code[1]

    def dump_bytecode(self, bucket):
        self.compiled[bucket.key] = (bucket.checksum, bucket.code)


_COMPILED = _CompiledTemplates()
IMG_ALT = "No description has been provided for this image"
ANCHOR = re.compile(r'<a name="([A-Za-z0-9_-]+)"></a>')
TOP_LINK = '<a href="#top">(Top)</a>'


def anchors_as_boxes(html):
    """Every place the page's table of contents and its "(Top)" links go to gets a hidden box, ``go-<name>``, and
    "(Top)" becomes a label of the top's box: a label moves the page to its box wherever the page is shown (in
    JupyterLab's HTML viewer, whose base URL makes "#name" another page), and it needs no script."""
    html = ANCHOR.sub(lambda m: f'{m.group(0)}<input class="course-anchor" type="checkbox" id="go-{m.group(1)}" '
                                f'tabindex="-1" aria-hidden="true">', html)
    return html.replace(TOP_LINK, '<label class="course-link" for="go-top">(Top)</label>')
IMG_WITHOUT_ALT = re.compile(r"<img(?=[\s/>])(?![^>]*\salt=)", re.IGNORECASE)
