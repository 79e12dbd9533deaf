"""No link a student sends and no name they put in the gradebook runs a script in an instructor's formgrader, on each
server the project starts with one: `course instructor-lab` and the hub's instructor server (issue 59, item 3).
Both load coursekit.hub.formgrader_tab, which escapes nbgrader's pages, serves its scripts that put a value in as
markup with the value put in as text, refuses a ``?path=`` that is not the course, and gives every formgrader
answer a Content-Security-Policy (coursekit/hub/formgrader_pages.py); tests/hub/formgrader_attacks.py holds the
attacks, tried in headless Chromium: every reflected path with a script in it, a student's folder as ``?path=``,
and a gradebook whose students' ids and names, assignment and notebook names are markup (on the hub the names come
from the roster, as an LMS's display names would).

The first three tests read nbgrader's installed files (under a second). Cost of the two in Chromium, on 2 cores
shared with other work: `course instructor-lab` about 26 s, the hub about 40 s (one hub, one instructor's server)."""
import csv
import json
import os
import pwd
import subprocess

import pytest
from formgrader_attacks import ASSIGNMENT, FIRST, LAST, fill_gradebook, try_the_formgrader
from gradebooks import stamp_alembic_head
from hub_helpers import Hub, course_copy_for, remove_users
from lab import SHOTS, instructor_lab, launch, login, wait_for_lab

from coursekit.cli_class import instructor_settings
from coursekit.hub.access import staff_group
from coursekit.hub import formgrader_pages, formgrader_tab
from coursekit.hub import setup as hub_setup
from coursekit.paths import COURSE_DIR
from coursekit.pipeline import CourseCopy



def test_every_value_nbgrader_puts_in_a_script_is_a_javascript_string_and_in_a_command_shell_quoted():
    """nbgrader's templates as the formgrader renders them: no quoted value is left in an inline script (each is
    ``tojson``) nor in a shown command (each ``shell_quote``), and the environment escapes the rest."""
    import re

    from nbgrader.server_extensions.formgrader.handlers import template_path
    seen = 0
    for name in sorted(os.listdir(template_path)):
        if not name.endswith(".tpl"):
            continue
        text = formgrader_pages.rewrite_template(open(os.path.join(template_path, name)).read())
        for m in formgrader_pages.SCRIPT_BLOCK.finditer(text):
            values = re.findall(r"\{\{[^}]*\}\}", m.group(2))
            seen += len(values)
            assert all("|tojson" in v for v in values), (name, values)
        for m in formgrader_pages.PRE_BLOCK.finditer(text):
            assert not formgrader_pages.QUOTED_VALUE.search(m.group(2)), (name, m.group(2))
    assert seen >= 10, seen  # base_url, student_id, assignment_id, notebook_id, ... in seven templates


def test_every_change_to_nbgraders_scripts_finds_its_line():
    """The installed nbgrader's scripts still have each line the course serves changed (an nbgrader that no longer
    has one is named here, and in the server's log, rather than served unchanged in silence)."""
    texts, missing = formgrader_pages.patched_scripts(formgrader_tab.LINKS + formgrader_pages.SCRIPT_PATCHES)
    assert missing == []
    assert formgrader_pages.MODAL_TEXT in texts["utils.js"] and formgrader_tab.LAB_LINK in texts["utils.js"]


def test_course_instructor_lab_and_the_hubs_instructor_servers_load_the_formgraders_protection(tmp_path):
    """Both servers' settings enable the extension (a student's server has no formgrader at all)."""
    env = instructor_settings({"JUPYTER_CONFIG_DIR": str(tmp_path / "lab")})
    lab = json.load(open(os.path.join(env["JUPYTER_CONFIG_DIR"], "jupyter_server_config.json")))
    assert lab["ServerApp"]["jpserver_extensions"] == {"coursekit.hub.formgrader_tab": True}
    roles = hub_setup.role_settings(str(tmp_path / "state"), str(tmp_path / "exchange"), COURSE_DIR)
    hub = json.load(open(os.path.join(roles["instructor"], "jupyter_server_config.json")))
    assert hub["ServerApp"]["jpserver_extensions"] == {"coursekit.hub.formgrader_tab": True}
    student = json.load(open(os.path.join(roles["student"], "jupyter_server_config.json")))
    assert student["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"] is False


@pytest.mark.pipeline
@pytest.mark.browser
def test_no_link_or_name_runs_a_script_in_the_formgrader_of_course_instructor_lab(tmp_path):
    from playwright.sync_api import sync_playwright
    root = CourseCopy(str(tmp_path / "course")).root
    stamp_alembic_head(os.path.join(root, "gradebook.db"))  # what nbgrader would find in a subprocess, made here
    submission = fill_gradebook(root, "ckfg-amy")
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXCHANGE"}
    log_path = tmp_path / "lab.log"
    with instructor_lab(root, log_path, env) as (base, token):
        with sync_playwright() as p:
            browser = launch(p)
            try:
                page = browser.new_page()
                page.set_default_navigation_timeout(120_000)  # a page of a server busy beside make test
                page.goto(f"{base}/lab?token={token}")  # logged in, as the link `course instructor-lab` prints
                # the lab frames the formgrader (nbgrader's menu): framed by its own origin, and no other
                try_the_formgrader(page, f"{base}/formgrader", "'self'", str(tmp_path), "ckfg-amy", submission,
                                   SHOTS)
            finally:
                browser.close()
        assert "no longer has" not in log_path.read_text()  # every change to nbgrader's scripts applied


INSTRUCTOR, STUDENT = "ckfg-teach", "ckfg-student"


def own_like(path, like):
    """``path`` and everything in it given the owner, group and modes the hub gives the course folder's files."""
    st = os.stat(like)
    for d, dirs, files in os.walk(path):
        os.chown(d, st.st_uid, st.st_gid)
        os.chmod(d, 0o2770)
        for name in files:
            os.chown(os.path.join(d, name), st.st_uid, st.st_gid)
            os.chmod(os.path.join(d, name), 0o660)


@pytest.mark.pipeline
@pytest.mark.browser
@pytest.mark.xdist_group("hub")  # one worker for the hub's tests: see test_hub_class.py
def test_no_link_or_name_runs_a_script_in_the_formgrader_on_the_hub(class_folder):
    from playwright.sync_api import sync_playwright
    remove_users([INSTRUCTOR, STUDENT])
    hub = Hub(class_folder, INSTRUCTOR, [STUDENT])
    with open(hub.roster, "w", newline="") as f:  # the student's name as their LMS display name may be
        csv.writer(f).writerows([("id", "name"), (STUDENT, f"{FIRST} {LAST}")])
    try:
        course_copy_for(class_folder)
        hub.start()
        subprocess.run(["chpasswd"], input=f"{INSTRUCTOR}:{hub.password}\n", text=True, check=True)
        from nbgrader.api import Gradebook
        db = os.path.join(hub.course, "gradebook.db")
        with Gradebook("sqlite:///" + db, course_id="attention-course") as gb:  # the roster's names, enrolled
            s = gb.find_student(STUDENT)
            assert (s.first_name, s.last_name) == (FIRST, LAST)
        submission = fill_gradebook(hub.course, STUDENT)  # as root: then the instructor's again
        for made in ("autograded", os.path.join("source", ASSIGNMENT)):
            own_like(os.path.join(hub.course, made), hub.course)
        os.chown(db, pwd.getpwnam(INSTRUCTOR).pw_uid, os.stat(hub.course).st_gid)
        with sync_playwright() as p:
            browser = launch(p)
            try:
                page = browser.new_page()
                page.set_default_navigation_timeout(120_000)  # a page of a server busy beside make test
                login(page, hub, INSTRUCTOR)
                wait_for_lab(page)
                # the hub's own rule for every user's server: framed by nobody
                try_the_formgrader(page, f"{hub.base}/user/{INSTRUCTOR}/formgrader", "'none'", class_folder,
                                   STUDENT, submission, SHOTS)
            finally:
                browser.close()
    finally:
        hub.stop()
        remove_users([INSTRUCTOR, STUDENT])
        # the course's staff group it made, as test_hub_class does: the next hub test makes it anew and says so
        subprocess.run(["groupdel", staff_group(hub.course)], capture_output=True)
