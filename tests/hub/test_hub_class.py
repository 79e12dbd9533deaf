"""A class on the hub, end to end, as its people use it, in headless Chromium: `course hub` set up as the README
writes it (it creates the users, the instructors' group and the ownership itself, and names every problem in one run
when it must refuse), then the instructor and three students in JupyterLab through its own menus and terminals:

* the instructor types `course release` in a terminal opened from the Launcher (a login shell) and reads its output;
* each student fetches in the Assignments tab, opens the untouched notebook (it opens unmodified, and closes
  without "Save changes?"; its link to the notation page opens the page that came with the release, in the lab),
  uploads their answers into the folder with the file browser and submits: a notification says the assignment was
  submitted, at the time the Assignments tab then lists (the course's hub-lab plugin, issue 55);
* the instructor opens Nbgrader > Formgrader (a browser tab of its own), sees the assignment, collects with its
  button, autogrades one submission with its button, then types `course grade` for the class: the hub's grading
  service grades as root, a user and a control group of its own per sandbox, so a fork bomb and a memory bomb
  cost only their own students, named in the output, and the honest student keeps full marks;
* the formgrader's buttons generate and release the feedback; each student fetches it and clicks "(view
  feedback)", which opens the page in the lab, and reads the score by exercise; an entry of the page's table of
  contents moves the page to its cell and the page stays (not "127.0.0.1 refused to connect");
* the students' terminals cannot read the reference, and the hub's grading service refuses a student's token.

Nothing here sets a user's PATH, calls an API that a person reaches through the lab, or starts a process as a user
that the person would not start: the hub's REST API is used only to stop the servers at the end.

Cost: about 6 to 9 minutes on 2 cores (grading three submissions as root 1 to 2 minutes).
"""
import calendar
import json
import os
import re
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import nbformat
import pytest
from attacks import ALLOCATE_UNTIL_REFUSED, FORK_UNTIL_REFUSED
from hub_helpers import Hub, course_copy_for, modes_of, remove_users, restore_modes, service_memory
from lab import (TALL, Terminal, button_in, close_current_tab, launch, login, menu, open_assignments,
                 open_file, open_folder, press_in_assignments, screenshot_on_failure, upload, wait_for_lab,
                 wait_in_assignments)

from coursekit.hub.access import REFERENCE_FOLDER, staff_group
from coursekit.hub.service_client import service_url
from coursekit.samples import answered, total_points

# one test worker for the hub's tests: they open the way to this install's Python for the time they run
pytestmark = [pytest.mark.pipeline, pytest.mark.browser, pytest.mark.timeout(1800), pytest.mark.xdist_group("hub")]

A = "03_softmax"
INSTRUCTOR = "ckhub-teach"
HONEST, FORK, MEMORY = "ckhub-right", "ckhub-fork", "ckhub-memory"
STUDENTS = [HONEST, FORK, MEMORY]
SERVICE_PEAK = 3 * 2 ** 30  # the bound docs/threat-model.md states for the hub's service with two workers
BOMB = {FORK: (FORK_UNTIL_REFUSED, "processes"), MEMORY: (ALLOCATE_UNTIL_REFUSED, "memory")}


def answers(release, name):
    nb = answered(release)
    if name in BOMB:
        cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
        cell.source += "\n\n" + BOMB[name][0].strip()
    return nb


def close_modal(page, expected, timeout):
    """Wait for the formgrader's answer to a button (a success or an error dialog), check it is ``expected``, and
    close it with its OK button."""
    page.locator("#success-modal, #error-modal").first.wait_for(timeout=timeout * 1000)
    modal = page.locator("#success-modal, #error-modal").first
    assert page.locator(expected).count() == 1, modal.inner_text()
    modal.locator(".modal-footer button").first.click()
    modal.wait_for(state="detached", timeout=30_000)


def text_of(html_text):
    import html
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", html_text)))


def toc_entry_moves_the_page(page):
    """In the lab's HTML viewer (a frame showing the page from a blob: URL, with the file's download URL as its
    <base>), the feedback page's last table-of-contents entry moves the frame to its cell, and the frame stays on the
    page: an entry that was a link to "#id" loaded the download URL instead ("127.0.0.1 refused to connect")."""
    page.set_viewport_size({"width": 1400, "height": 900})  # a frame shorter than the page
    try:
        viewer = page.locator(".jp-HTMLViewer iframe").first.element_handle().content_frame()
        shown = viewer.url
        assert shown.startswith("blob:"), shown
        entry = viewer.locator("#toc label.course-link").last
        target = entry.get_attribute("for")
        entry.scroll_into_view_if_needed()
        where = "id => [window.scrollY, document.getElementById(id).getBoundingClientRect().top, window.innerHeight]"
        before = viewer.evaluate(where, target)
        assert before[1] > before[2], f"{target} is in view before the click: {before}"
        entry.click()
        time.sleep(1.5)
        viewer = page.locator(".jp-HTMLViewer iframe").first.element_handle().content_frame()
        assert viewer.url == shown and viewer.locator("#toc").count() == 1, f"the frame left the page: {viewer.url}"
        after = viewer.evaluate(where, target)
        assert after[0] > before[0] and 0 <= after[1] < after[2], f"{target}: {before} -> {after}"
    finally:
        page.set_viewport_size(TALL)


def dialog(page, text):
    """Answer the lab's input dialog in front: ``text`` typed into it (None: its choice as it is), then OK."""
    page.locator(".jp-Dialog").last.wait_for(timeout=60_000)
    title = page.locator(".jp-Dialog .jp-Dialog-header").last.inner_text().strip()
    box = page.locator(".jp-Dialog", has=page.locator(".jp-Dialog-header", has_text=title))  # the next has another
    if text is not None:
        box.locator("input").fill(text)
    box.locator("button.jp-mod-accept").click()
    box.wait_for(state="detached", timeout=30_000)


def test_a_class_on_the_hub_as_its_people_use_it(class_folder):
    from playwright.sync_api import sync_playwright
    users = [INSTRUCTOR, *STUDENTS]
    remove_users(users)  # a run stopped half-way may have left them
    hub = Hub(class_folder, INSTRUCTOR, STUDENTS)
    hub.extra_env = {"COURSE_SANDBOX_MEMORY_MB": "2560", "COURSE_SANDBOX_NPROC": "256"}
    reference_modes = modes_of(REFERENCE_FOLDER)
    try:
        course_copy_for(class_folder)
        # without --create-users: refused, every problem in one run, nothing created
        refused = subprocess.run(hub.command(create_users=False), env=hub.env(), capture_output=True, text=True,
                                 timeout=300)
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert f"no Unix user for {', '.join(users)}" in refused.stderr, refused.stderr
        # as the README: --create-users makes the users, the instructors' group, and gives them the course folder
        # and the reference answers; then each user's Unix password, as an administrator sets it (`passwd NAME`)
        hub.start()
        # each user it made has a first password, listed for root alone (the test then sets its own, as an
        # administrator may)
        listing = os.path.join(hub.state, "passwords.csv")
        assert os.stat(listing).st_mode & 0o777 == 0o600 and os.stat(listing).st_uid == 0
        assert {row.split(",")[0] for row in open(listing).read().split()[1:]} >= set(users)
        subprocess.run(["chpasswd"], input="".join(f"{n}:{hub.password}\n" for n in users), text=True, check=True)
        log = hub.log_tail(20000)
        assert f"created the group {staff_group(hub.course)}" in log, log
        for name in users:
            home = os.path.expanduser(f"~{name}")
            assert os.path.isdir(home) and os.stat(home).st_mode & 0o077 == 0, f"{name}: home not made private"
        assert os.stat(REFERENCE_FOLDER).st_mode & 0o007 == 0 and os.stat(hub.course).st_mode & 0o007 == 0
        twice = subprocess.run(hub.command(), env=hub.env(), capture_output=True, text=True, timeout=300)
        assert twice.returncode == 2 and f"port {hub.port} on 127.0.0.1 is already in use" in twice.stderr, \
            twice.stdout + twice.stderr

        t0 = time.monotonic()
        phase = lambda what: print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)  # noqa: E731
        with sync_playwright() as p:
            browser = launch(p)
            pages = {name: browser.new_context(viewport=TALL).new_page() for name in users}
            # PAM refuses a wrong password
            login(pages[HONEST], hub, HONEST, password=hub.password[::-1])
            pages[HONEST].get_by_text("Invalid username or password").wait_for(timeout=60_000)
            for name in users:
                login(pages[name], hub, name)
            teach = pages[INSTRUCTOR]
            wait_for_lab(teach)
            terminal = Terminal(teach)
            said = terminal.run("pwd", re.escape(hub.course))  # a terminal from the Launcher opens in the course
            said = terminal.run(f"course release {A}", rf"released {A} to \S+|course: .*", timeout=300)
            assert f"released {A} to {hub.exchange}/attention-course/outbound/{A}" in said, said
            phase("released in the instructor's terminal")

            release = nbformat.read(os.path.join(hub.course, "release", A, A + ".ipynb"), as_version=4)
            total = total_points(release)
            for name in STUDENTS:  # fetch in the Assignments tab
                wait_for_lab(pages[name])
                if name == HONEST:  # a student's Nbgrader menu: the Assignments tab, no Formgrader
                    pages[name].locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Nbgrader$")).click()
                    items = pages[name].locator(".lm-Menu-itemLabel")
                    items.first.wait_for(timeout=30_000)
                    labels = [t.strip() for t in items.all_inner_texts()]
                    assert "Assignment List" in labels and "Formgrader" not in labels, labels
                    pages[name].keyboard.press("Escape")
                open_assignments(pages[name])
                button_in(pages[name], "released_assignments_list", "Fetch").click()
                button_in(pages[name], "fetched_assignments_list", "Submit").wait_for(timeout=120_000)
            phase("fetched")
            # a due date (in the instructor's terminal, as docs/term.md says), then an extension for one student
            # from the instructor's lab (Nbgrader > Extension...): each student's Assignments tab shows their own
            said = terminal.run(f"nbgrader db assignment add {A} --duedate='2031-01-10 17:00:00 UTC'",
                                r"Creating/updating assignment|rror", timeout=300)
            assert "Creating/updating assignment" in said, said
            menu(teach, "Nbgrader", "Extension...")
            dialog(teach, None)  # the one assignment, chosen already
            dialog(teach, HONEST)
            dialog(teach, "+48")
            teach.locator(".Toastify__toast", has_text=f"{A}: {HONEST} due 2031-01-12 17:00 UTC").wait_for(
                timeout=300_000)
            for name, told in ((HONEST, "Your due date: 2031-01-12 17:00 UTC, with your extension of 2 days (the "
                                        "assignment's: 2031-01-10 17:00 UTC)."), (FORK, "Due: 2031-01-10 17:00 UTC.")):
                open_assignments(pages[name])
                pages[name].locator("#refresh_assignments_list").click()
                note = pages[name].locator("#fetched_assignments_list .course-due", has_text=told)
                try:
                    note.wait_for(timeout=120_000)
                except Exception as exc:  # what the servers and the grading service said about it
                    exc.add_note("\n".join(line for line in hub.log_tail(200_000).splitlines()
                                           if re.search(r"due|lab_server|course/|Traceback|Error", line))[-6000:])
                    raise
                assert "Late policy:" in note.inner_text(), note.inner_text()
            phase("an extension from the lab, each student's due date in their Assignments tab")
            # a student who lost their notebook: "Fresh copy" beside Submit moves their folder aside and fetches again
            home = os.path.expanduser(f"~{FORK}")
            os.remove(os.path.join(home, A, f"{A}.ipynb"))  # as the student deletes it
            button_in(pages[FORK], "fetched_assignments_list", "Fresh copy").click()
            pages[FORK].locator(".jp-Dialog button.jp-mod-accept", has_text="Fresh copy").click()
            pages[FORK].locator(".Toastify__toast", has_text=f"fetched a fresh copy of {A}").wait_for(timeout=120_000)
            aside = [n for n in os.listdir(home) if n.startswith(f"{A}.moved-")]
            assert len(aside) == 1 and os.path.isfile(os.path.join(home, A, f"{A}.ipynb")), os.listdir(home)
            assert os.stat(os.path.join(home, A, f"{A}.ipynb")).st_uid == os.stat(home).st_uid  # the student's own
            phase("a lost notebook fetched afresh from the Assignments tab")
            # the learner's progress: a line under the assignment, and the whole course's page from the menu
            pages[FORK].locator("#refresh_assignments_list").click()
            button_in(pages[FORK], "fetched_assignments_list", "Progress").click()
            line = pages[FORK].locator("#fetched_assignments_list .course-progress",
                                       has_text=f"Your notebook: 0 / {total:g} points from the visible checks; to do:")
            line.wait_for(timeout=300_000)
            assert "softmax (not started)" in line.inner_text(), line.inner_text()
            with pages[FORK].context.expect_page() as opened:
                menu(pages[FORK], "Nbgrader", "Your Progress")
            mine = opened.value
            mine.get_by_text(f"{A}: 0 / {total:g}").wait_for(timeout=300_000)
            assert mine.evaluate("() => document.scripts.length") == 0
            mine.close()
            phase("the learner's progress in the Assignments tab and on its page")
            # the untouched notebook opens unmodified (the release carries the kernel's language_info) and closes
            # without a question
            page = pages[HONEST]
            open_folder(page, A)
            open_file(page, f"{A}.ipynb")
            page.locator(".jp-Notebook").first.wait_for(timeout=120_000)
            page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle'], "
                         ".jp-Toolbar-kernelStatus[title*='Idle']").first.wait_for(timeout=120_000)
            time.sleep(3)
            tab = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=f"{A}.ipynb")
            assert "jp-mod-dirty" not in (tab.get_attribute("class") or ""), tab.get_attribute("class")
            # its introduction's link to the notation page (../notation.md, which the release put beside the
            # assignment's folder) opens the page in the lab, not a 404
            with screenshot_on_failure(page, "notation-link"):
                page.locator(".jp-Notebook .jp-RenderedMarkdown a", has_text="the notation page").first.click()
                notation = page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="notation.md")
                notation.wait_for(timeout=60_000)
                page.locator(".jp-MarkdownViewer .jp-RenderedMarkdown h1",
                             has_text="Notation: one symbol, one meaning").wait_for(timeout=60_000)
                assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").first.inner_text()
                close_current_tab(page)
                notation.wait_for(state="detached", timeout=30_000)
                tab.click()  # the notebook in front again
            close_current_tab(page)
            time.sleep(2)
            assert page.locator(".jp-Dialog").count() == 0, "closing the untouched notebook asked a question"
            assert tab.count() == 0, "the notebook's tab did not close"
            # each student uploads their answers into the assignment's folder and submits
            local = tempfile.mkdtemp(prefix="answers-")
            for name in STUDENTS:
                os.makedirs(os.path.join(local, name))
                path = os.path.join(local, name, f"{A}.ipynb")
                nbformat.write(answers(release, name), path)
                with screenshot_on_failure(pages[name], f"{name}-upload-and-submit"):
                    open_folder(pages[name], A)
                    upload(pages[name], path)
                    press_in_assignments(pages[name], "fetched_assignments_list", "Submit")
                    # the notification: submitted, at the time nbgrader recorded, which the tab then lists
                    told = pages[name].locator(".Toastify__toast", has_text=f"{A} submitted at ")
                    told.wait_for(timeout=120_000)
                    said = told.inner_text()
                    wait_in_assignments(pages[name], "submitted_assignments_list", "Fetch Feedback")
                    stamp = re.search(rf"{A} submitted at (\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", said)
                    assert stamp, said
                    open_assignments(pages[name])
                    listed = pages[name].locator("#submitted_assignments_list:visible").inner_text()
                    assert stamp.group(1) in listed, (said, listed)
                    age = time.time() - calendar.timegm(time.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S"))
                    assert -60 < age < 600, (said, age)
            phase("uploaded and submitted")

            # the formgrader, from the menu, in a tab of its own: the assignment, collected with its button
            with teach.context.expect_page() as opened:
                menu(teach, "Nbgrader", "Formgrader")
            fg = opened.value
            fg.wait_for_load_state()
            assert fg.url.startswith(f"{hub.base}/user/{INSTRUCTOR}/formgrader"), fg.url
            row = fg.locator("tr", has=fg.locator("td.name", has_text=A))
            row.locator("td.status", has_text="released").wait_for(timeout=60_000)
            source_link = row.locator("td.name a").first  # the assignment's folder, in this server's lab
            assert source_link.get_attribute("href").startswith(f"/user/{INSTRUCTOR}/lab/tree/"), \
                source_link.get_attribute("href")
            row.locator("td.collect a").click()
            close_modal(fg, "#success-modal", 120)
            row.locator("td.num-submissions a", has_text="3").wait_for(timeout=60_000)
            phase("collected with the formgrader's button")
            # Autograde one submission with its button: the hub's grading service grades it, as root
            row.locator("td.num-submissions a").click()
            honest_row = fg.locator("tr", has=fg.locator("td", has_text=HONEST))
            honest_row.locator("td.autograde a").click()
            close_modal(fg, "#success-modal", 600)
            honest_row.locator("td.score", has_text=f"{total:g} / {total:g}").wait_for(timeout=60_000)
            phase("one submission autograded with the formgrader's button")

            # the class, graded from the terminal: the grading service, as root
            said = terminal.run(f"course grade {A} -j 2 --no-progress", r"grades written to|course grade: .*",
                                timeout=900)
            assert "of the hub's grading service (as root)" in said, said
            assert "each sandbox: a Unix user and a control group of its own per sandbox" in said, said
            assert re.search(rf"{HONEST} +{A} +{total:g} / {total:g}", said), said
            for name, (_, kind) in BOMB.items():
                assert re.search(rf"{name} / {A}: {kind}:", said), (name, said)
            assert not re.search(rf"{HONEST} / {A}: ", said), said  # nothing flagged for the honest student
            # root's grading service ran in a memory control group of its own, and held far less than its bound
            peak, limit = service_memory()
            print(f"the grading service peaked at {peak / 2 ** 30:.2f} GB (its group's limit: {limit / 2 ** 30:g} GB)")
            assert peak < SERVICE_PEAK, f"root's grading service held {peak / 2 ** 30:.2f} GB"
            phase("graded in the instructor's terminal")

            # a name in a formgrader page is text: a link carrying markup for a student id runs nothing
            evil = urllib.parse.quote('"; window.__pwned = 1; "</script><script>window.__pwned = 2</script>', safe="")
            fg.goto(f"{hub.base}/user/{INSTRUCTOR}/formgrader/manage_students/{evil}")
            fg.wait_for_load_state()
            assert fg.evaluate("() => window.__pwned === undefined"), "markup in a formgrader URL ran"
            # the feedback, generated and released with the formgrader's buttons
            fg.goto(f"{hub.base}/user/{INSTRUCTOR}/formgrader/manage_assignments")
            row = fg.locator("tr", has=fg.locator("td.name", has_text=A))
            for button in ("generate-feedback", "release-feedback"):
                row.locator(f"td.{button} a").click()
                close_modal(fg, "#success-modal", 300)
            phase("feedback generated and released with the formgrader's buttons")

            for name in STUDENTS:  # fetch it, then one click: the page opens in the lab
                page = pages[name]
                open_assignments(page)
                page.locator("#refresh_assignments_list:visible").click()
                button_in(page, "submitted_assignments_list", "Fetch Feedback").click()
                link = page.locator("#submitted_assignments_list:visible a", has_text="view feedback")
                link.wait_for(timeout=120_000)
                link.click()
                frame = page.frame_locator(".jp-HTMLViewer iframe").first
                frame.locator("#toc").wait_for(timeout=60_000)
                toc = frame.locator("#toc").inner_text()
                header = frame.locator(".panel-heading h4").first.inner_text()
                score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", header)
                assert float(score.group(2)) == total, header
                if name == HONEST:
                    assert float(score.group(1)) == total, header
                assert re.search(r"softmax · basic \d+(\.\d+)? / 2\.0", toc), toc
                assert "Question 1 · " in toc and "Test cell" not in toc, toc
                if name == HONEST:
                    with screenshot_on_failure(page, "feedback-toc"):
                        toc_entry_moves_the_page(page)
                # what was returned, under the assignment in the tab: the page's score, the parts that lost points
                open_assignments(page)
                page.locator("#refresh_assignments_list:visible").click()
                got = page.locator("#submitted_assignments_list .course-returned")
                got.wait_for(timeout=120_000)
                said = got.inner_text()
                assert f": {float(score.group(1)):g} / {total:g}; " in said, (said, header)
                parts = [re.fullmatch(r"(.*\S) ([\d.]+) / ([\d.]+)", line.strip()) for line in toc.splitlines()]
                lost = [m.group(1) for m in parts if m and float(m.group(2)) < float(m.group(3))]
                assert all(label in said for label in lost) and ("every point" in said) == (not lost), (said, toc)
            phase("feedback read in the lab")

            # a student's terminal: the reference is out of reach, and the grading service refuses their token
            student_terminal = Terminal(pages[HONEST])
            said = student_terminal.run(
                "python -c \"import learner.check; print('reference', learner.check.reference_available())\"; "
                f"ls {REFERENCE_FOLDER} {hub.course} 2>&1 | head -3",
                r"reference (True|False)[\s\S]*\$\s*$", timeout=120)
            assert "reference False" in said and said.count("Permission denied") >= 2, said
            browser.close()

        # the grading service as a student would try it: with their own server's token, refused and logged
        config = json.load(open(os.path.join(hub.state, "grading.json")))
        body = json.dumps({"course": hub.course, "assignment": A, "source": {}, "timeout": 60, "passed": {},
                           "task": {"student": HONEST, "assignment": A, "files": {}}}).encode()
        url = f"http://127.0.0.1:{config['port']}"
        req = urllib.request.Request(service_url(url, "/grade", hub.course), data=body, method="POST",
                                     headers={"Authorization": f"token {hub.user_token(HONEST)}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=60)
        assert refused.value.code == 403
        assert f"{HONEST} is not an instructor of {hub.course}" in refused.value.read().decode()
        assert re.search(rf"refused a grading request from {HONEST} for {re.escape(hub.course)}", hub.log_tail(200000))
        # and an instructor asking to grade a course that is not theirs
        other = dict(json.loads(body), course="/srv/another-course")
        req = urllib.request.Request(service_url(url, "/grade", other["course"]), data=json.dumps(other).encode(),
                                     method="POST", headers={"Authorization": f"token {hub.user_token(INSTRUCTOR)}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=60)
        assert refused.value.code == 403 and "/srv/another-course is no course of this hub" in \
            refused.value.read().decode()
        # a user's server still refuses to be framed by another's page (JupyterHub's policy, left as it is)
        req = urllib.request.Request(f"{hub.base}/user/{INSTRUCTOR}/formgrader/manage_assignments",
                                     headers={"Authorization": f"token {hub.user_token(INSTRUCTOR)}"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            assert "frame-ancestors 'none'" in resp.headers.get("Content-Security-Policy", ""), dict(resp.headers)
        phase("the grading service refused a student and a course not the instructor's")

        # after a restart of the hub, everything is still there: the instructor's collect finds nothing new
        hub.stop()
        hub.start()
        with sync_playwright() as p:
            browser = launch(p)
            teach = browser.new_context(viewport=TALL).new_page()
            login(teach, hub, INSTRUCTOR)
            wait_for_lab(teach)
            said = Terminal(teach).run(f"course collect {A}", rf"collected {A}: .*|course collect: .*", timeout=300)
            for name in STUDENTS:
                assert re.search(rf"{name}\s+unchanged", said), said
            browser.close()
        phase("restarted and checked")
    finally:
        hub.stop()
        restore_modes(reference_modes)
        remove_users(users)
        subprocess.run(["groupdel", staff_group(hub.course)], capture_output=True)
