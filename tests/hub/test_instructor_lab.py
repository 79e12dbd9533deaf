"""The instructor's JupyterLab, as the README starts it (`course instructor-lab`): on a course folder that has never
released anything, the exchange is made (no warning that it is missing), there is no news and no update check,
the formgrader answers, and an assignment released with `course release` shows there as released; and, in
Chromium, nbgrader's Validate dialog wraps a long line (the course's lab plugin's style).

Cost: one JupyterLab server and one release; measured 37 s to 2 min 45 s on 2 cores while other suites ran. The
Validate test: one more server and a kernel, 18 s alone on 2 cores."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from lab import instructor_lab
from coursekit.pipeline import CourseCopy

pytestmark = [pytest.mark.pipeline]
COURSE = os.path.join(os.path.dirname(sys.executable), "course")


def get(base, token, path, raw=False):
    req = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        body = resp.read()
    return body.decode() if raw else json.loads(body)


def test_instructor_lab_has_the_exchange_no_news_and_shows_a_release_as_released(tmp_path):
    root = CourseCopy(str(tmp_path / "course")).root
    exchange = os.path.join(root, "exchange")
    assert not os.path.exists(exchange)
    log_path = tmp_path / "lab.log"
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXCHANGE"}
    with instructor_lab(root, log_path, env) as (base, token):
        assert os.stat(exchange).st_mode & 0o777 == 0o777
        page = get(base, token, "/lab", raw=True)
        assert '"news": {"disabled": true}' in page
        assert "@jupyterlab/apputils-extension:announcements" in page  # among the disabled extensions
        # the Assignments tab's list: where JupyterLab said the exchange "does not exist and could not be created"
        listing = get(base, token, "/assignments?course_id=attention-course")
        assert listing["success"] is True, listing
        released = subprocess.run([COURSE, "release", "03_softmax", "--course", root], env=env,
                                  capture_output=True, text=True)
        assert released.returncode == 0, released.stdout + released.stderr
        listed = {a["name"]: a["status"] for a in get(base, token, "/formgrader/api/assignments")}
        assert listed.get("03_softmax") == "released", listed
        text = log_path.read_text()
        assert "ExchangeError" not in text and "Unwritable directory" not in text, text[-3000:]


# a check's message as the checks write it: one long line, the known mistake named at its end
HINT = ("softmax, basic case 2 of 4 (x of shape (3, 5), float64, cpu): the output differs from the reference at "
        "position (0, 1): expected 0.1234, got 0.4321; this is what softmax over the wrong axis gives: "
        "THE-KNOWN-MISTAKE-AT-THE-END")


def failing_notebook(path):
    """A notebook with one graded test cell that fails with ``HINT``, as nbgrader's Validate runs it."""
    import nbformat
    test = nbformat.v4.new_code_cell(f"raise AssertionError({HINT!r})")
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "softmax_basic", "locked": True, "points": 1,
                                 "schema_version": 3, "solution": False, "task": False}
    nbformat.write(nbformat.v4.new_notebook(cells=[test], metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), path)


@pytest.mark.browser
def test_validates_dialog_wraps_a_long_line_so_the_named_mistake_shows(tmp_path):
    """nbgrader's Validate button in the lab of the hub's plugin (node/hub-lab, here in `course instructor-lab`; a
    student's server on the hub loads the same): its dialog wraps a check's long message inside the dialog, so the
    known mistake at the end of the line is in view, not cut at the right edge (issue 61, item 5). Cost: one
    JupyterLab server, one kernel."""
    from lab import launch
    from playwright.sync_api import sync_playwright
    root = CourseCopy(str(tmp_path / "course")).root
    failing_notebook(os.path.join(root, "validate-me.ipynb"))
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXCHANGE"}
    with instructor_lab(root, tmp_path / "lab.log", env) as (base, token):
        with sync_playwright() as p:
            browser = launch(p)
            try:
                page = browser.new_page(viewport={"width": 1200, "height": 900})
                page.set_default_navigation_timeout(120_000)  # a server busy beside make test
                page.goto(f"{base}/lab/tree/validate-me.ipynb?token={token}")
                page.locator(".validate-button").first.click(timeout=120_000)
                end = page.locator("#validation-message pre", has_text="THE-KNOWN-MISTAKE-AT-THE-END").last
                end.wait_for(timeout=120_000)
                cut = page.evaluate("""() => [...document.querySelectorAll('#validation-message pre')]
                    .filter(pre => pre.scrollWidth > pre.clientWidth + 1).map(pre => pre.innerText)""")
                assert cut == [], cut
                box, dialog = end.bounding_box(), page.locator(".jp-Dialog-content").bounding_box()
                assert box["x"] + box["width"] <= dialog["x"] + dialog["width"], (box, dialog)
            finally:
                browser.close()
