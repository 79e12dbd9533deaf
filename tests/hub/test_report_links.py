"""The class report's links where the instructor reads it (issue 61: on the hub, inside the lab, a score's link gave
"127.0.0.1 refused to connect"): `course instructor-lab` as the README starts it, with the course's lab plugin as on
the hub, and JupyterHub's own header on every answer of the server, ``Content-Security-Policy: frame-ancestors
'none'`` (jupyterhub/singleuser/extension.py), which refuses the HTML viewer's frame a link it follows.

In the lab's HTML viewer a report's links open in the lab (node/hub-lab): a student's feedback and another order of
the who-failed-what table, each in a viewer of its own, the report left where it was; and from the class overview,
a score's link to the student's feedback. (Followed in the viewer's
frame, a link fails on one machine too: Jupyter's /files/ answers a request without a Referer of its own host 403,
"Blocking request from unknown origin", and the viewer's frame is a blob: document, which sends none.)

Cost: one JupyterLab server and Chromium; measured 32 s to 100 s on 2 cores while other suites ran."""
import os
import sys
import urllib.request

import pytest

from browser import CHROMIUM, CHROMIUM_ARGS
from gradebooks import build_gradebook
from lab import instructor_lab, screenshot_on_failure
from coursekit.cli import main
from coursekit.pipeline import CourseCopy
from coursekit.report_students import page_name

pytestmark = [pytest.mark.browser]
A = "03_softmax"
CELLS = {A: {"softmax_basic": 2, "log_softmax_basic": 2}}
STUDENTS = {"ada": ("Ada", "Lovelace", "", ""), "bob": ("Bob", "Jones", "", "")}
SCORES = {"ada": {A: {"softmax_basic": 2, "log_softmax_basic": 2}},
          "bob": {A: {"softmax_basic": 0, "log_softmax_basic": 2}}}
HUB_HEADER = "c.ServerApp.tornado_settings = {'headers': {'Content-Security-Policy': \"frame-ancestors 'none'\"}}\n"


@pytest.fixture
def course(tmp_path):
    """A course folder with a graded class of two, each with a feedback page, and `course report` run on it."""
    root = CourseCopy(str(tmp_path / "course")).root
    build_gradebook(root, CELLS, STUDENTS, SCORES)
    for s in STUDENTS:
        os.makedirs(os.path.join(root, "feedback", s, A))
        with open(os.path.join(root, "feedback", s, A, A + ".html"), "w") as f:
            f.write(f"<!DOCTYPE html><title>feedback</title><p>feedback of {s}</p>")
    assert main(["report", "--course", root]) == 0
    config = os.path.join(root, ".jupyter", "config")
    os.makedirs(config, exist_ok=True)
    with open(os.path.join(config, "jupyter_server_config.py"), "w") as f:  # the .json is instructor-lab's own
        f.write(HUB_HEADER)
    return root


def test_a_reports_links_open_in_the_lab_where_the_server_refuses_frames(course, tmp_path):
    from playwright.sync_api import sync_playwright
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_EXCHANGE", "JUPYTER_PATH")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    with instructor_lab(course, tmp_path / "lab.log", env) as (base, token), sync_playwright() as pw:
        with urllib.request.urlopen(f"{base}/files/feedback/bob/{A}/{A}.html?token={token}", timeout=60) as answer:
            assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]  # as on the hub
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context()
            page = context.new_page()
            with screenshot_on_failure(page, "report links in the lab"):
                page.goto(f"{base}/lab/tree/report/{page_name(A, 'student')}?token={token}")
                report = page.frame_locator(".jp-HTMLViewer iframe").first
                report.locator("h1", has_text="who failed what").wait_for(timeout=180_000)
                report.locator("tr", has_text="Bob Jones").locator("a").click()  # bob's total: his feedback
                page.wait_for_function("document.querySelectorAll('.jp-HTMLViewer iframe').length === 2",
                                       timeout=60_000)
                page.frame_locator(".jp-HTMLViewer iframe").nth(1).locator("text=feedback of bob").wait_for(
                    timeout=60_000)
                page.locator(".lm-TabBar-tab", has_text=page_name(A, "student")).click()  # back to the report
                report.locator("th a", has_text="total").click()  # another order of the table
                page.wait_for_function("document.querySelectorAll('.jp-HTMLViewer iframe').length === 3",
                                       timeout=60_000)
                page.frame_locator(".jp-HTMLViewer iframe").nth(2).locator("th.sorted", has_text="total").wait_for(
                    timeout=60_000)
                assert report.locator("h1", has_text="who failed what").count() == 1  # the report stayed
                page.locator(".lm-TabBar-tab", has_text=page_name(A, "student")).click()
                report.locator("a", has_text="class overview").click()  # the issue's page: its scores' links
                page.wait_for_function("document.querySelectorAll('.jp-HTMLViewer iframe').length === 4",
                                       timeout=60_000)
                overview = page.frame_locator(".jp-HTMLViewer iframe").nth(3)
                overview.locator("tr", has_text="Ada Lovelace").locator("a").first.click()
                page.wait_for_function("document.querySelectorAll('.jp-HTMLViewer iframe').length === 5",
                                       timeout=60_000)
                page.frame_locator(".jp-HTMLViewer iframe").nth(4).locator("text=feedback of ada").wait_for(
                    timeout=60_000)
        finally:
            browser.close()
