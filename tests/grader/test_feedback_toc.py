"""The feedback page's table of contents (issue 52, item 5): each entry takes the reader to its cell without leaving
the page, its text has no raw TeX, and only a comment that says something is listed, named by its cell.

The page is made as grading makes it (FeedbackPage, then FeedbackExporter) for 03_softmax, whose Question 1 writes
$\\tau$. The browser test opens it as JupyterLab's HTML viewer does (a blob: URL, and a <base> element set to the
file's download URL, as jlab_core's HTMLViewer._setupDocument writes it), where an entry that was a link to "#id"
loaded the download URL into the frame ("127.0.0.1 refused to connect"). Cost: about 2 s; the browser test about
5 s more (marked ``browser``).
"""
import html
import os
import re
import socket

import nbformat
import pytest

from grader.untrusted import FeedbackExporter, FeedbackPage

COURSE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "course")
A = "03_softmax"


def feedback_page(comments=None):
    """The feedback page of the reference's 03_softmax, with softmax_basic failed and ``comments`` {grade id:
    comment} on its cells (what a grader typed in the formgrader)."""
    nb = nbformat.read(os.path.join(COURSE, "source", A, A + ".ipynb"), as_version=4)
    for cell in nb.cells:  # what nbgrader's GetGrades adds before the page is made
        md = cell.metadata.get("nbgrader", {})
        if md.get("grade") or md.get("solution"):
            md.update(score=0.0 if md.get("grade_id") == "softmax_basic" else float(md.get("points", 0)),
                      points=float(md.get("points", 0)))
        if md.get("grade_id") in (comments or {}):
            md["comment"] = comments[md["grade_id"]]
    resources = {"nbgrader": {"notebook": A, "assignment": A, "student": "s", "score": 14, "max_score": 16,
                              "late_penalty": 0}}
    nb, resources = FeedbackPage(course_root=COURSE).preprocess(nb, resources)
    return FeedbackExporter().from_notebook_node(nb, resources=resources)[0]


def toc_of(page):
    return page[page.index('<div id="toc">'):page.index("</ol>")]


def test_every_entry_and_top_link_goes_to_a_box_of_the_page_and_none_is_a_fragment_link():
    page = feedback_page()
    assert 'href="#' not in page, re.findall(r'.{60}href="#.{40}', page)[:3]
    targets = re.findall(r'<label class="course-link" for="([^"]+)"', page)
    ids = set(re.findall(r'<input class="course-anchor" type="checkbox" id="([^"]+)"', page))
    assert len(re.findall(r"<li", toc_of(page))) >= 4 and "go-softmax_basic" in targets and "go-top" in targets
    assert set(targets) <= ids, sorted(set(targets) - ids)


def test_the_entries_show_no_raw_tex():
    toc = html.unescape(re.sub(r"<[^>]+>", " ", toc_of(feedback_page())))
    question = re.search(r"Question 1 · [^\n]*", toc).group(0)
    assert "τ = 2" in question and "\\" not in toc and "$" not in toc, question


def test_only_a_comment_that_says_something_is_listed_and_it_names_its_cell():
    answers = [c.metadata["nbgrader"]["grade_id"] for c in nbformat.read(
        os.path.join(COURSE, "source", A, A + ".ipynb"), as_version=4).cells
        if c.metadata.get("nbgrader", {}).get("solution")]
    said, empty = answers[0], answers[1]
    toc = html.unescape(re.sub(r"<[^>]+>", " ", toc_of(feedback_page({said: "Nice work.", empty: "  \n"}))))
    entries = re.findall(r"Comment on [^\n]*?(?=\s{2}|$)", toc)
    assert len(entries) == 1 and said in entries[0], entries
    page = feedback_page({said: "Nice work."})
    assert f'for="go-comment-{said}"' in page and f'id="go-comment-{said}"' in page


@pytest.mark.browser
def test_in_jupyterlabs_html_viewer_an_entry_moves_the_page_and_stays_on_it():
    """As the lab shows the page (blob: URL, <base href> the download URL, target _self): clicking an entry scrolls
    the frame to its cell and the frame stays on the page; an old-style "#id" link, clicked the same way, leaves it
    (the check can fail)."""
    from browser import CHROMIUM, CHROMIUM_ARGS, need_browser
    need_browser()
    from playwright.sync_api import sync_playwright
    with socket.socket() as s:  # a port nothing listens on: the download URL the lab's base would point at
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    page_html = feedback_page()
    old_html = page_html.replace('<label class="course-link" for="go-softmax_basic">',
                                 '<a class="course-old" href="#softmax_basic">', 1)
    base = f"http://127.0.0.1:{port}/user/s/files/{A}/feedback.html"
    viewer = """async ([html, base]) => {
        const doc = new DOMParser().parseFromString(html, "text/html");
        const b = doc.createElement("base"); doc.head.insertBefore(b, doc.head.firstChild);
        b.href = base; b.target = "_self";
        const url = URL.createObjectURL(new Blob([doc.documentElement.innerHTML], {type: "text/html"}));
        const frame = document.createElement("iframe");
        frame.setAttribute("sandbox", "allow-same-origin");
        frame.style.width = "900px"; frame.style.height = "500px";
        document.body.appendChild(frame);
        await new Promise(done => { frame.onload = done; frame.src = url; });
        return url; }"""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            results = {}
            for name, content, selector in (("labels", page_html, 'label[for="go-softmax_basic"]'),
                                            ("old", old_html, "a.course-old")):
                tab = browser.new_page()
                tab.set_content("<html><body></body></html>")
                url = tab.evaluate(viewer, [content, base])
                frame = next(f for f in tab.frames if f.url == url)
                frame.locator(selector).first.click()
                tab.wait_for_timeout(1500)
                frame = tab.frames[1]
                results[name] = (frame.url, frame.evaluate("() => window.scrollY") if frame.url == url else None)
                tab.close()
        finally:
            browser.close()
    url, scrolled = results["labels"]
    assert url.startswith("blob:") and scrolled and scrolled > 200, results
    assert not results["old"][0].startswith("blob:"), f"the old link stayed on the page: {results}"
