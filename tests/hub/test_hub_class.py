"""A class on the hub, end to end, in a real browser: `course hub` on 127.0.0.1 with Unix users it creates (who log
in with the Unix passwords the test sets, through the hub's PAM login, which refuses a wrong one), the
instructor's loop (`course release / collect / grade / return`, as the instructor, in the environment of a terminal
of their JupyterLab on the hub) and three students who fetch, submit and fetch their feedback in the Assignments
tab of their own JupyterLab in headless Chromium.

What stays out of the browser, and why: the answers are written into each student's fetched notebook through
that student's Jupyter server API (typing a notebook through the editor would cost minutes and test JupyterLab's
editor, not the class), and the permission checks run in each student's own kernel through the same API.

Cost, measured on 2 cores while other suites ran beside it (load 9-11): 8 min 10 s, of which collecting and grading
the three submissions 3 min 50 s, the three students' JupyterLab in Chromium up to their fetch 1 min, the restart
1 min 10 s. Not yet measured on a quiet machine.
"""
import html
import json
import os
import re
import subprocess
import time
import urllib.parse

import nbformat
import pytest
from hub_helpers import Hub, as_instructor, course_copy_for, modes_of, remove_users, restore_modes, run_in_kernel

from coursekit.hub import REFERENCE
from coursekit.samples import ONE_BUG_COSTS, answered, points_of, total_points, with_bug
from grader import EXERCISES

# one test worker for the hub's tests: they open the way to this install's Python for the time they run
pytestmark = [pytest.mark.pipeline, pytest.mark.browser, pytest.mark.timeout(1500), pytest.mark.xdist_group("hub")]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
A = "03_softmax"
INSTRUCTOR = "ckhub-teach"
STUDENTS = {"ckhub-right": "right", "ckhub-mistake": "known mistake", "ckhub-tamper": "tampering cell"}
MISTAKE = dict(EXERCISES["softmax"].mistakes)["softmax:softmax_times_temperature"]
TAMPER = """

import torch.testing
torch.allclose = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
"""


def answer(release, kind):
    """The student's notebook: the reference, the course's known mistake, or that mistake with a cell that
    patches torch's comparisons and test cells emptied (nbgrader restores them from the source)."""
    if kind == "right":
        return answered(release)
    nb = with_bug(release, A)
    if kind == "tampering cell":
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
        cell.source += TAMPER
        for c in nb.cells:
            if c.metadata.get("nbgrader", {}).get("grade"):
                c.source = "pass"
    return nb


def login(page, hub, name, password=None):
    page.goto(f"{hub.base}/hub/login?next=/user/{name}/lab")
    page.fill("#username_input", name)
    page.fill("#password_input", password or hub.password)
    page.click("#login_submit")


def open_assignments(page):
    page.wait_for_selector("#jp-main-dock-panel", timeout=180_000)
    page.get_by_text("Nbgrader", exact=True).click()
    page.get_by_text("Assignment List", exact=True).click()
    page.wait_for_selector("#released_assignments_list", timeout=60_000)


def button_in(page, list_id, label):
    return page.locator(f"#{list_id} button", has_text=re.compile(f"^{label}$"))


def text_of(html_text):
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", html_text)))


def test_a_class_on_the_hub_releases_submits_grades_returns_and_survives_a_restart(class_folder):
    from playwright.sync_api import sync_playwright
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); never `playwright "
                    f"install`")
    users = [INSTRUCTOR, *STUDENTS]
    remove_users(users)  # a run stopped half-way may have left them
    hub = Hub(class_folder, INSTRUCTOR, list(STUDENTS))
    reference_modes = None
    try:
        course_copy_for(class_folder)
        # --create-users makes the users; the course folder is not yet the instructor's, so the hub refuses to start
        refused = subprocess.run(hub.command(), env=hub.env(), capture_output=True, text=True, timeout=300)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"chown -R {INSTRUCTOR} {hub.course}" in refused.stderr, refused.stderr
        for name in users:
            home = os.path.expanduser(f"~{name}")
            assert os.path.isdir(home) and os.stat(home).st_mode & 0o077 == 0, f"{name}: home not made private"
        # each user's Unix password, as an administrator sets it (`passwd NAME`): the hub logs them in with PAM
        subprocess.run(["chpasswd"], input="".join(f"{name}:{hub.password}\n" for name in users), text=True,
                       check=True)
        for command in (["chown", "-R", INSTRUCTOR, hub.course], ["chmod", "o-rwx", hub.course]):  # as the README
            subprocess.run(command, check=True)
        # the install's reference answers are readable by everyone in a fresh checkout: refused too, until closed
        refused = subprocess.run(hub.command(), env=hub.env(), capture_output=True, text=True, timeout=300)
        fix = f"chgrp -R {INSTRUCTOR} {REFERENCE} && chmod -R g+rX,o-rwx {REFERENCE}"
        assert refused.returncode == 2 and f"run `{fix}`" in refused.stderr, refused.stdout + refused.stderr
        reference_modes = modes_of(REFERENCE)
        subprocess.run(fix, shell=True, check=True)  # as the README
        hub.start()
        for name in users:  # the servers start side by side while the browser logs in
            hub.spawn(name)
        twice = subprocess.run(hub.command(), env=hub.env(), capture_output=True, text=True, timeout=300)
        assert twice.returncode == 2 and f"port {hub.port} on 127.0.0.1 is already in use" in twice.stderr, \
            twice.stdout + twice.stderr

        t0 = time.monotonic()
        phase = lambda what: print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)  # noqa: E731
        done = as_instructor(hub, "release", A)
        phase("released")
        nothing = as_instructor(hub, "collect", A)
        assert nothing.returncode == 0 and f"nothing submitted for {A} yet" in nothing.stdout, \
            nothing.stdout + nothing.stderr
        # course hub put the roster in the gradebook: collect names who has not submitted
        assert f"no submission from {len(STUDENTS)} student(s) on the roster: {', '.join(sorted(STUDENTS))}" in \
            nothing.stdout, nothing.stdout
        assert done.returncode == 0, done.stdout + done.stderr
        tokens = {name: hub.user_token(name) for name in users}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            pages = {}
            for name in STUDENTS:
                pages[name] = browser.new_context().new_page()
                if len(pages) == 1:  # PAM refuses a wrong password (the first student tries one)
                    login(pages[name], hub, name, password=hub.password[::-1])
                    pages[name].get_by_text("Invalid username or password").wait_for(timeout=60_000)
                login(pages[name], hub, name)
            for name, page in pages.items():  # fetch in the Assignments tab
                open_assignments(page)
                button_in(page, "released_assignments_list", "Fetch").click()
                button_in(page, "fetched_assignments_list", "Submit").wait_for(timeout=120_000)
            phase("fetched in the browser")
            for name, kind in STUDENTS.items():  # the answers, written into the fetched notebook as that student
                path = f"/api/contents/{A}/{A}.ipynb"
                fetched = hub.server(name, "GET", path, token=tokens[name])
                release = nbformat.from_dict(fetched["content"])
                hub.server(name, "PUT", path, {"type": "notebook", "format": "json",
                                               "content": json.loads(nbformat.writes(answer(release, kind)))},
                           token=tokens[name])
            for name, page in pages.items():  # submit in the Assignments tab
                button_in(page, "fetched_assignments_list", "Submit").click()
                button_in(page, "submitted_assignments_list", "Fetch Feedback").wait_for(timeout=120_000)

            phase("submitted in the browser")
            # the instructor collects, grades and returns, in a terminal of their JupyterLab on the hub
            collected = as_instructor(hub, "collect", A)
            assert collected.returncode == 0, collected.stdout + collected.stderr
            for name in STUDENTS:
                assert re.search(rf"{name}\s+new\s+submitted", collected.stdout), collected.stdout
            graded = as_instructor(hub, "grade", A, "-j", "2", "--no-progress")
            assert graded.returncode == 0, graded.stdout + graded.stderr
            phase("collected and graded")
            returned = as_instructor(hub, "return", A)
            assert returned.returncode == 0, returned.stdout + returned.stderr
            phase("returned")

            total = total_points(release)
            want = {"ckhub-right": total, "ckhub-mistake": total - points_of(release, "softmax", ONE_BUG_COSTS[A]),
                    "ckhub-tamper": total - points_of(release, "softmax", ONE_BUG_COSTS[A])}
            for name, page in pages.items():  # fetch the feedback in the Assignments tab, and read it
                page.click("#refresh_assignments_list")
                button_in(page, "submitted_assignments_list", "Fetch Feedback").click()
                page.locator("#submitted_assignments_list a", has_text="view feedback").wait_for(timeout=120_000)
                folder = hub.server(name, "GET", f"/api/contents/{A}/feedback", token=tokens[name])
                stamp = folder["content"][0]["path"]
                feedback = hub.server(name, "GET", "/api/contents/" + urllib.parse.quote(f"{stamp}/{A}.html"),
                                      token=tokens[name])
                text = text_of(feedback["content"])
                score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", text)
                assert score, text[:2000]
                assert (float(score.group(1)), float(score.group(2))) == (want[name], total), (name, score.group(0))
                if STUDENTS[name] != "right":
                    assert MISTAKE in text, f"{name}'s feedback does not name the mistake {MISTAKE!r}"
            browser.close()
            phase("feedback fetched and read in the browser")

        # a student cannot read another's submission or feedback, from their own kernel
        other = "ckhub-mistake"
        probe = f"""
import json, os
out = {{}}
for what, path in {{"the exchange's submissions": {os.path.join(hub.exchange, 'attention-course', 'inbound')!r},
                    "the exchange's feedback": {os.path.join(hub.exchange, 'attention-course', 'feedback')!r},
                    "the other's home": os.path.expanduser("~{other}"),
                    "the collected submissions": {os.path.join(hub.course, 'submitted')!r},
                    "the graded feedback": {os.path.join(hub.course, 'feedback')!r},
                    "the reference answers": {REFERENCE!r}}}.items():
    try:
        os.listdir(path)
        out[what] = "read"
    except PermissionError:
        out[what] = "permission denied"
try:
    open(os.path.expanduser("~{other}/{A}/{A}.ipynb")).read()
    out["the other's notebook"] = "read"
except PermissionError:
    out["the other's notebook"] = "permission denied"
import grader  # the notebooks' set-up cell: it runs, with no reference for this student
print(json.dumps({{"paths": out, "reference": grader.reference_available()}}))
"""
        seen = json.loads(run_in_kernel(hub, "ckhub-right", tokens["ckhub-right"], probe))
        assert set(seen["paths"].values()) == {"permission denied"}, seen
        assert len(seen["paths"]) == 7 and seen["reference"] is False, seen

        # the instructor's formgrader on the hub shows the assignment as released
        listed = hub.server(INSTRUCTOR, "GET", "/formgrader/api/assignments", token=tokens[INSTRUCTOR])
        assert {a["name"]: a["status"] for a in listed}.get(A) == "released", listed

        phase("permissions checked")
        # after a restart of the hub, everything is still there
        hub.stop()
        hub.start()
        name = "ckhub-mistake"
        hub.spawn(name)
        hub.wait_ready(name)
        token = hub.user_token(name)  # the user and its tokens are in the hub's database
        listed = hub.server(name, "GET", "/assignments?course_id=attention-course", token=token)["value"]
        mine = [x for x in listed if x["assignment_id"] == A and x["status"] == "submitted"]
        assert mine and mine[0]["submissions"][0]["has_local_feedback"], listed
        again = as_instructor(hub, "collect", A)
        assert again.returncode == 0 and re.search(rf"{name}\s+unchanged", again.stdout), again.stdout
        phase("restarted and checked")
    finally:
        hub.stop()
        if reference_modes:
            restore_modes(reference_modes)
        remove_users(users)
