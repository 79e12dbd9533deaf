"""nbgrader's formgrader on this course, in the instructor's JupyterLab, in headless Chromium.

The sample submissions of 01_tokens, graded once by `course grade`'s parallel grader for the pipeline tests,
include one with the sample bug; JupyterLab is started on that course folder, and the browser finds the assignment listed, the submission's score in the gradebook, each
graded cell's automatic score on the submission's page, and the feedback naming the mistake without hidden
tests.
"""
import html
import re

import pytest
from browser import CHROMIUM, CHROMIUM_ARGS, Lab, need_browser
from pipeline_helpers import SECOND_BUG, bug_students

from coursekit.samples import MATHS, ONE_BUG
from grader import EXERCISES

pytestmark = [pytest.mark.pipeline, pytest.mark.browser, pytest.mark.timeout(900)]
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
                maths = {f"{bug}_{cell}" for cell in MATHS}
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
