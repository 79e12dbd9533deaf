"""A submission is untrusted HTML (grader/untrusted.py): what nbgrader stores of it is inert, and the pages made from it
(the feedback, the formgrader's) carry none of its markup live.

These tests build the outputs a kernel would have produced for each payload of ``tests/attacks.py`` by hand, so they
run in-process; ``tests/coursekit/pipeline/test_formgrader.py`` grades the same payloads through real nbgrader and opens the
pages in Chromium.
"""
import base64
import html.parser
import io
import os
import re

import nbformat
import pytest
from attacks import MARKUP_CELLS

from grader.untrusted import (CSP, FeedbackExporter, as_plain_text, clean_output, maths_to_mathml, neutralise,
                              trusted_cells)

MARK = "__pwned"
A = "01_tokens"
HERE = os.path.dirname(os.path.abspath(__file__))
COURSE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "course")


def _png():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1], [0, 1])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _js(name):
    return f"window.{MARK}='{name}'"


def raw_outputs(png):
    """The outputs IPython writes for the payloads of tests/attacks.py (MARKUP_OUTPUTS), written out by hand."""
    d = lambda data, **md: {"output_type": "display_data", "data": data, "metadata": md}  # noqa: E731
    return [
        d({"text/html": f"<script>{_js('script')}</script>", "text/plain": "<IPython.core.display.HTML object>"}),
        d({"text/html": f"<ScRiPt>{_js('mixed')}</sCrIpT>"}),
        d({"text/html": f"<img src=x onerror=\"{_js('handler')}\">"}),
        d({"text/html": f"<img src=x onerror=\"{_js('broken')}\" <b"}),
        d({"text/html": "<img src=x onerror=\"window.__pwned=&#39;entity&#39;\">"}),
        d({"text/html": f"<a href=\" JaVaScRiPt:{_js('link')}\">x</a>"}),
        d({"text/html": "<object data=\"data:text/html;base64,PHNjcmlwdD4=\"></object>__pwned"}),
        d({"image/svg+xml": f"<svg onload=\"{_js('svg')}\"><script>{_js('svg2')}</script></svg>"}),
        d({"text/html": f"<iframe srcdoc=\"<script>parent.{MARK}=1</script>\"></iframe>"}),
        d({"text/markdown": f"<img src=x onerror=\"{_js('md')}\"> [l](javascript:{_js('mdlink')})"}),
        d({"application/javascript": _js("js")}),
        d({"text/latex": f"$x$<script>{_js('latex')}</script>"}),
        d({"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0},
           "text/plain": "IntSlider(value=0)"}),
        d({"image/png": f"x\" onerror=\"{_js('fakepng')}"}),
        d({"image/png": png}, **{"image/png": {"width": f"1 onerror={_js('meta')}", "height": 40}}),
        {"output_type": "stream", "name": f"stdout\" onmouseover=\"{_js('stream')}", "text": f"<b onclick=1>{MARK}"},
        {"output_type": "error", "ename": f"<img src=x onerror=\"{_js('ename')}\">", "evalue": f"<script>{MARK}",
         "traceback": [f"<img src=x onerror=\"{_js('tb')}\">"]},
        {"output_type": "execute_result", "execution_count": 3, "metadata": {},
         "data": {"text/html": f"<script>{_js('result')}</script>", "text/plain": "3"}},
    ]


def submission(png):
    nb = nbformat.read(os.path.join(COURSE, "source", A, A + ".ipynb"), as_version=4)
    cell = nbformat.v4.new_code_cell("# a learner's cell")
    cell.outputs = [nbformat.from_dict(o) for o in raw_outputs(png)]
    cell.metadata["tags"] = [f"x\"><script>{_js('tag')}</script>"]
    nb.cells.append(cell)
    for kind, source, extra in MARKUP_CELLS:
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_raw_cell
        nb.cells.append(make(source.replace("CANARY", "http://127.0.0.1:9"), **extra))
    md = nbformat.v4.new_markdown_cell("a picture ![p](attachment:p.png)")
    md["attachments"] = {"p.png": {"image/svg+xml": f"<svg onload=\"{_js('attachment')}\"/>"}}
    nb.cells.append(md)
    nb.cells[-1]["id"] = "bad id\"><script>"
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    nb.metadata["title"] = f"<script>{_js('title')}</script>"
    return nb


class Markup(html.parser.HTMLParser):
    """Where the mark shows up in a page: in text (inert), or in a tag's attributes, a script or a style (live)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.live, self.tags, self._in, self.loads, self.metas = [], [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "meta" and dict(attrs).get("http-equiv"):
            self.metas.append(dict(attrs))
        self._in.append(tag)
        for name, value in attrs:
            if tag != "a" and name in ("src", "href", "data", "srcset", "poster") and not (value or "").startswith(
                    ("data:", "#")):
                self.loads.append((tag, name, value))
            # (the page's own handlers, such as the formgrader's onclick, carry no mark)
            if MARK in (value or "") or (value or "").strip().lower().startswith(("javascript:", "data:text")):
                self.live.append((tag, name, value))

    def handle_endtag(self, tag):
        if tag in self._in:
            while self._in and self._in.pop() != tag:
                pass

    def handle_data(self, data):
        if MARK in data and self._in and self._in[-1] in ("script", "style"):
            self.live.append((self._in[-1], "content", data[:80]))


def test_every_output_of_a_submission_is_rebuilt_from_the_allow_list():
    png = _png()
    for raw in raw_outputs(png):
        out = clean_output(raw)
        assert out["output_type"] in ("stream", "error", "display_data", "execute_result")
        for kind in out.get("data", {}):
            assert kind in ("text/plain", "image/png"), (raw, out)
        if out.get("output_type") == "stream":
            assert out["name"] in ("stdout", "stderr")
    kept = clean_output(raw_outputs(png)[14])
    assert kept["data"]["image/png"] == png and kept["metadata"] == {"image/png": {"height": 40}}
    fake = clean_output(raw_outputs(png)[13])
    assert "image/png" not in fake["data"] and "image/png" in fake["data"]["text/plain"]
    html_out = clean_output(raw_outputs(png)[0])
    assert html_out["data"]["text/plain"].startswith("[text/html output, shown as text")
    assert "<script>" in html_out["data"]["text/plain"]  # as text, which the templates escape
    widget = clean_output(raw_outputs(png)[12])["data"]["text/plain"]
    assert widget.startswith("[an interactive widget") and widget.endswith("IntSlider(value=0)")


def test_the_courses_own_prose_stays_and_a_learners_markup_becomes_text():
    png = _png()
    nb = submission(png)
    texts, ids = trusted_cells(COURSE, A)
    source_md = [c.source for c in nb.cells if c.cell_type == "markdown" and c.source in texts]
    assert source_md  # the course's own Markdown is recognised...
    clean = neutralise(nb, texts, ids)
    kept = [c.source for c in clean.cells if c.cell_type == "markdown" and c.source in texts]
    assert kept == source_md  # ...and kept as written
    learner = [c for c in clean.cells if c.cell_type in ("markdown", "raw") and c.source not in texts]
    assert len(learner) == len(MARKUP_CELLS) + 1 and all(c.cell_type == "markdown" for c in learner)
    assert all("attachments" not in c and c.source.startswith("*(text from the submission") for c in learner)
    assert set(clean.metadata) <= {"kernelspec", "language_info", "nbgrader", "course", "course_version"}
    assert all(set(c.metadata) <= {"nbgrader"} for c in clean.cells)
    graded = [c for c in clean.cells if "nbgrader" in c.metadata]
    assert {c.metadata["nbgrader"]["grade_id"] for c in graded} == ids
    assert clean.cells[-1]["id"] != "bad id\"><script>"
    nbformat.validate(clean)


def test_a_fence_in_a_learners_text_cannot_close_the_block_around_it():
    block = as_plain_text("```` ``` <script>x</script>\n`````\nmore")
    fence = block.split("\n")[2][:6]
    assert fence == "``````" and block.endswith("\n" + fence)


@pytest.fixture(scope="module")
def pages():
    """The feedback page of the payload submission, and the formgrader's page of it (nbgrader's own template), made
    by nbconvert in this process."""
    from nbconvert.exporters import HTMLExporter
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config
    png = _png()
    texts, ids = trusted_cells(COURSE, A)
    nb = neutralise(submission(png), texts, ids)
    for cell in nb.cells:  # what nbgrader's GetGrades adds before the page is made
        md = cell.metadata.get("nbgrader", {})
        if md.get("grade") or md.get("solution"):
            md.update(score=0.0, points=float(md.get("points", 0)))
    resources = {"nbgrader": {"notebook": A, "assignment": A, "student": "s", "score": 1, "max_score": 2, "late_penalty": 0}}
    feedback, _ = FeedbackExporter().from_notebook_node(nb, resources=dict(resources))
    c = Config()
    c.HTMLExporter.template_name = "formgrade"
    c.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    formgrade, _ = HTMLExporter(config=c).from_notebook_node(
        nb, resources={**resources, "base_url": "", "mathjax_url": "", "submission_id": "1", "index": 0,
                       "total": 1, "notebook_id": A, "assignment_id": A, "last_name": "", "first_name": "",
                       "student": "s"})
    return {"feedback": feedback, "formgrade": formgrade, "png": png, "nb": nb, "resources": resources}


@pytest.mark.parametrize("page", ["feedback", "formgrade"])
def test_no_payload_is_live_in_the_pages_made_from_it(pages, page):
    parser = Markup()
    parser.feed(pages[page])
    assert parser.live == []
    assert MARK in html.unescape(pages[page])  # shown, as text
    assert f"data:image/png;base64,{pages['png']}" in pages[page]  # the plot is still there
    assert "iframe" not in parser.tags and "object" not in parser.tags and "svg" not in parser.tags


def test_the_feedback_page_loads_nothing_from_outside_and_forbids_scripts(pages):
    page = pages["feedback"]
    parser = Markup()
    parser.feed(page)
    assert "script" not in parser.tags  # not even MathJax or the widget manager
    assert parser.loads == []  # no stylesheet, image, frame or font from a URL
    assert parser.metas == [{"http-equiv": "Content-Security-Policy", "content": CSP}]  # the page's only policy
    assert "script-src" not in CSP and "default-src 'none'" in CSP  # so no script of any kind may run


def test_the_feedback_page_is_nbconverts_with_alt_text_and_its_templates_compiled_once_per_process(pages):
    """The course's exporter leaves out HTMLExporter's BeautifulSoup pass over the page and compiles its templates
    once per process: the page holds the same text and the same elements as nbconvert's own exporter makes, each
    image has its alternative text, and a second page from a fresh exporter is the same page."""
    from bs4 import BeautifulSoup
    from nbconvert.exporters import HTMLExporter

    from grader.untrusted import _COMPILED, IMG_ALT

    class Nbconverts(FeedbackExporter):
        from_notebook_node = HTMLExporter.from_notebook_node
    ours, theirs = (BeautifulSoup(page, "html.parser") for page in (
        pages["feedback"], Nbconverts().from_notebook_node(pages["nb"], resources=dict(pages["resources"]))[0]))
    assert ours.get_text() == theirs.get_text()
    assert [t.name for t in ours.find_all(True)] == [t.name for t in theirs.find_all(True)]
    images = ours.find_all("img")
    assert images and all(i.get("alt") == IMG_ALT for i in images)
    assert [i.get("alt") for i in images] == [i.get("alt") for i in theirs.find_all("img")]
    assert len(_COMPILED.compiled) >= 5  # the page's templates (the page extends a chain of them)
    again, _ = FeedbackExporter().from_notebook_node(pages["nb"], resources=dict(pages["resources"]))
    assert again == pages["feedback"]


def test_the_courses_maths_becomes_mathml_and_code_keeps_its_dollars():
    out = maths_to_mathml("scale by $\\sqrt{d_k}$; `x = $y$`; $$\\frac{a}{b}$$\n```\n$z$\n```\n5 $ and 6 $")
    assert out.count("<math") == 2 and "<msqrt>" in out and "<mfrac>" in out
    assert "`x = $y$`" in out and "```\n$z$\n```" in out and "5 $ and 6 $" in out


def test_text_from_a_submission_reaches_a_terminal_without_escape_sequences():
    """`course grade`'s summary (and `course validate`) print names and messages a submission chose: no escape
    sequence survives to clear the screen, move the cursor or retitle the window, and no newline in a name or a
    message starts a line of its own (the summary's records are one inert line each: `grader.plain.inert`)."""
    from coursekit.grading import Problem, Summary, print_summary
    from grader.plain import plain
    evil = "ada\x1b[2J\x1b[1;1Hscore 100\x1b]0;pwned\x07\r"
    assert plain(evil) == "adascore 100\\x0d"
    forged = "bob\n  REFUSED: nothing"
    summary = Summary(graded={(evil, A): 1.0}, problems=[Problem(evil, A, "why \x1b[31mred"), Problem(forged, A, "x")],
                      faults=[(evil, A, "crash", "it said \x1b[8mhidden\x9b2J")])
    out = io.StringIO()
    print_summary(summary, "/course", out=out)
    printed = out.getvalue()
    assert "\x1b" not in printed and "\x9b" not in printed and "\r" not in printed
    assert "ada\\x1b[2J\\x1b[1;1Hscore 100\\x1b]0;pwned\\x07\\r" in printed  # what the student wrote, shown
    assert "why \\x1b[31mred" in printed and "it said \\x1b[8mhidden\\x9b2J" in printed
    assert "bob\\n  REFUSED: nothing" in printed
    assert not any(line.lstrip().startswith("REFUSED") for line in printed.splitlines())


def test_feedback_names_each_graded_cell_shows_an_ungraded_cells_error_in_one_line_and_wraps_messages():
    """The table of contents names an exercise's cells by exercise and part and a question by its number and text;
    a plot cell that stopped because a function is still its stub says so in one line, not a stack into the
    course's modules; a failure message wraps inside its box."""
    from grader.nbgrader_plugin import ShortenTracebacks
    from grader.untrusted import FeedbackPage
    a = "03_softmax"
    nb = nbformat.read(os.path.join(COURSE, "source", a, a + ".ipynb"), as_version=4)
    plot = next(c for c in nb.cells if c.cell_type == "code" and not c.metadata.get("nbgrader"))
    plot.outputs = [nbformat.v4.new_output("error", ename="NotImplementedError", evalue="", traceback=[
        "\x1b[31mTraceback\x1b[0m", "File learner/widgets/temperature.py:88, in draw", "raise NotImplementedError"])]
    failed = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax_basic")
    failed.outputs = [nbformat.v4.new_output("error", ename="CheckFailed", evalue="FAILED softmax [basic]: " + "x" * 400,
                                             traceback=["a", "stack"])]
    for cell in nb.cells:  # what nbgrader's GetGrades adds before the page is made
        md = cell.metadata.get("nbgrader", {})
        if md.get("grade") or md.get("solution"):
            md.update(score=0.0 if md.get("grade_id") == "softmax_basic" else float(md.get("points", 0)),
                      points=float(md.get("points", 0)))
    resources = {"nbgrader": {"notebook": a, "assignment": a, "student": "s", "score": 14, "max_score": 16,
                              "late_penalty": 0}}
    nb, resources = ShortenTracebacks().preprocess(nb, resources)
    nb, resources = FeedbackPage(course_root=COURSE).preprocess(nb, resources)
    page, _ = FeedbackExporter().from_notebook_node(nb, resources=resources)
    toc = html.unescape(page[page.index('<div id="toc">'):page.index("</ol>")])
    items = [" ".join(re.sub(r"<[^>]+>", " ", li).split()) for li in re.findall(r"<li[^>]*>(.*?)</li>", toc, re.S)]
    assert items[:3] == ["softmax · basic 0.0 / 2.0", "softmax · edge 1.0 / 1.0", "softmax · errors 1.0 / 1.0"]
    assert "Test cell" not in toc
    question = next(i for i in items if i.startswith("Question 1 · "))
    assert question.startswith("Question 1 · The logits [2, 1, 0] at temperature") and question.endswith("1.0 / 1.0")
    assert 'class="course-failed"><label class="course-link" for="go-softmax_basic">' in toc
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert ("This cell stopped with NotImplementedError: a function it calls is still its stub (write the exercise "
            "above it, then run the cell again).") in text
    assert "temperature.py:88" not in text and "stack" not in text.split("FAILED softmax [basic]")[1][:500]
    assert "white-space: pre-wrap" in page
