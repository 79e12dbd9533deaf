"""nbgrader's formgrader on this course, in the instructor's JupyterLab, in headless Chromium.

The sample submissions of 01_tokens, graded once by `course grade`'s parallel grader for the pipeline tests,
include one with the sample bug; JupyterLab is started on that course folder, and the browser finds the assignment listed, the submission's score in the gradebook, each
graded cell's automatic score on the submission's page, and the feedback naming the mistake without hidden
tests.
"""
import html
import http.server
import re
import threading

import pytest
from attacks import MARKUP_CELLS, MARKUP_OUTPUTS, with_markup
from browser import CHROMIUM, CHROMIUM_ARGS, Lab, need_browser
from pipeline_helpers import SECOND_BUG, bug_students, grade, release_nb

from coursekit.samples import MATHS_CELLS, ONE_BUG, answered
from learner.check import EXERCISES

# one test worker for both: they share 01_tokens' course copy and its gradebook
pytestmark = [pytest.mark.pipeline, pytest.mark.browser, pytest.mark.timeout(900), pytest.mark.xdist_group("formgrader")]
A = "01_tokens"
PAGE_MS = 60_000


def test_formgrader_lists_the_assignment_and_shows_scores_and_feedback(tmp_path, course, samples):
    """The sample submissions of 01_tokens, graded once for the pipeline tests (test_pipeline.samples), seen in
    formgrader: the one with the known bug (and, in another exercise, a learner-written one)."""
    need_browser()
    from playwright.sync_api import sync_playwright
    cc = course[A]
    student, other = bug_students(A)[0], SECOND_BUG[A][0]
    scores = samples(A)[student]
    bug, _, _ = ONE_BUG[A]
    with cc.gradebook() as gb:
        submission = gb.find_submission_notebook(A, A, student)
        sub_id = submission.id
        auto = {g.name: (g.auto_score, g.max_score) for g in submission.grades}
    assert auto == {gid: tuple(score) for gid, score in scores.items()}
    full, got = sum(m for _, m in auto.values()), sum(s for s, _ in auto.values())
    assert bug == "pad_batch"  # the sample bug of 01_tokens, which the grader names:
    mistake = dict(EXERCISES[bug].mistakes)["tokens:pad_batch_mask_inverted"]

    lab = Lab(str(tmp_path / "lab"), work=cc.root, env=cc.env)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_navigation_timeout(120_000)  # a page of a server busy beside make test
            try:
                # the assignment is listed
                page.goto(f"{lab.base}/formgrader/manage_assignments?token={lab.token}")
                page.locator("#main-table").get_by_text(A, exact=True).first.wait_for(timeout=PAGE_MS)

                # its gradebook shows the submission's score, in the student's row
                page.goto(f"{lab.base}/formgrader/gradebook/{A}/{A}")
                score = page.locator("#main-table tr", has_text=student).locator("td.score").first
                score.wait_for(timeout=PAGE_MS)
                assert re.sub(r"\s", "", score.inner_text()) == f"{got:g}/{full:g}"

                # the submission's page: each graded cell's automatic score, and the verdict naming the mistake
                page.goto(f"{lab.base}/formgrader/submissions/{sub_id}/")
                page.locator("input.score").first.wait_for(timeout=PAGE_MS)
                page.wait_for_function("() => [...document.querySelectorAll('input.score')]"
                                       ".every(i => i.getAttribute('placeholder') !== null)", timeout=PAGE_MS)
                shown = {el.get_attribute("id"): float(el.get_attribute("placeholder"))
                         for el in page.locator("input.score").element_handles()}
                assert shown == {gid: score for gid, (score, _) in auto.items()}
                maths = {f"{bug}_{cell}" for cell in MATHS_CELLS}
                assert all(shown[gid] == 0 for gid in maths)
                assert all(shown[gid] == mx for gid, (_, mx) in auto.items()
                           if gid not in maths and gid.rsplit("_", 1)[0] != other)
                assert mistake in html.unescape(page.content())

                # the feedback the student gets names the mistake and holds no hidden test
                page.goto(f"{lab.base}/files/feedback/{student}/{A}/{A}.html?token={lab.token}")
                page.get_by_text(mistake[:40]).first.wait_for(timeout=PAGE_MS)
                text = html.unescape(page.content())
                assert "HIDDEN TESTS" not in text and not re.search(r'part\s*=\s*"hidden"', text)
            except Exception:
                page.screenshot(path=str(tmp_path / "formgrader-failure.png"))
                raise
            finally:
                browser.close()
    finally:
        lab.stop()


# A learner function whose failure message carries markup: the grader's verdict quotes it.
RAISES_MARKUP = """
def decode(ids, vocab):
    raise ValueError('<img src=x onerror="window.__pwned=1;(new Image()).src=\\'CANARY/failure-message\\'">')
"""


class Canary:
    """An HTTP server on 127.0.0.1 that notes every request it gets (a payload that ran would ask it for a file)."""

    def __init__(self):
        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


NOT_RUN = """() => {
    const frames = [window, ...[...document.querySelectorAll('iframe')].map(f => f.contentWindow).filter(Boolean)];
    return frames.map(w => { try { return w.__pwned; } catch (e) { return undefined; } }).filter(v => v !== undefined);
}"""
LIVE_LINKS = r"""() => [...document.querySelectorAll('a[href], area[href], iframe, object, embed, svg script, base')]
    .map(e => e.tagName + ' ' + (e.getAttribute('href') || e.getAttribute('src') || e.getAttribute('data') || ''))
    .filter(t => !/^A (#|https?:|\/|\.|[a-z0-9_]+\.html)/i.test(t) || /javascript:|data:/i.test(t))"""
PNG_SHOWN = """() => [...document.querySelectorAll('img[src^="data:image/png"]')]
    .filter(i => i.naturalWidth > 0 && i.getBoundingClientRect().width > 0).length"""


def test_no_markup_from_a_submission_runs_in_the_formgrader_or_the_feedback(tmp_path, course, cluster):
    """A submission carrying every kind of live markup (tests/attacks.py: scripts, event handlers, javascript: and
    data: links, SVG, iframes, Markdown with HTML, JavaScript and LaTeX outputs, a fake PNG, the learner's own
    Markdown and raw cells, a failure message with HTML), graded by real nbgrader, then opened as the instructor
    opens it (the formgrader's page of the submission) and as the student does (the feedback, served by Jupyter and
    as a file): no payload ran (no flag on ``window``, no request to the canary) and the submission's plot shows."""
    need_browser()
    from playwright.sync_api import sync_playwright
    cc = course[A]
    canary = Canary()
    student = "markup"
    try:
        nb = with_markup(answered(release_nb(course, A), {"decode": RAISES_MARKUP.replace("CANARY", canary.url)}),
                         canary.url)
        cc.submit(student, A, nb)
        grade(cc, A, [student], cluster)
        scores = cc.scores(student, A)
        assert scores["decode_basic"][0] == 0 and scores["encode_basic"][0] == scores["encode_basic"][1]
        with cc.gradebook() as gb:
            sub_id = gb.find_submission_notebook(A, A, student).id
        feedback = cc.feedback_path(student, A)
        assert "window.__pwned" in html.unescape(open(feedback).read())  # the payloads are there, as text
        lab = Lab(str(tmp_path / "lab"), work=cc.root, env=cc.env)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_navigation_timeout(120_000)  # a page of a server busy beside make test
                pages = {"formgrader": f"{lab.base}/formgrader/submissions/{sub_id}/?token={lab.token}",
                         "feedback served by Jupyter": f"{lab.base}/files/feedback/{student}/{A}/{A}.html"
                                                       f"?token={lab.token}",
                         "feedback as a file": f"file://{feedback}"}
                try:
                    for name, url in pages.items():
                        page.goto(url, wait_until="load")
                        page.get_by_text("text from the submission", exact=False).first.wait_for(timeout=PAGE_MS)
                        page.wait_for_timeout(1500)  # time for anything that would run late (onload, timers)
                        assert page.evaluate(NOT_RUN) == [], name
                        assert page.evaluate(LIVE_LINKS) == [], name
                        assert page.evaluate(PNG_SHOWN) >= 1, name  # the learner's plot
                        text = page.inner_text("body")
                        assert "window.__pwned" in text, name  # shown as text
                        for link in page.locator("a").element_handles():
                            href = (link.get_attribute("href") or "").strip().lower()
                            assert not href.startswith(("javascript:", "data:")), (name, href)
                finally:
                    page.screenshot(path=str(tmp_path / "markup.png"))
                    browser.close()
        finally:
            lab.stop()
        assert canary.seen == [], canary.seen  # no payload fetched anything
        kinds = len(MARKUP_OUTPUTS) + len(MARKUP_CELLS)
        assert html.unescape(open(feedback).read()).count("__pwned") >= kinds
    finally:
        canary.stop()
