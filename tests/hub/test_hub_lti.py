"""Two courses on one hub, their people arriving from the LMS by LTI 1.3 (`course hub --lti FILE`): the LTI 1.3 test
platform (lti_platform.py) on 127.0.0.1 launches into the real JupyterHub with the course's authenticator
(coursekit/hub/lti.py, ltiauthenticator's LTI13Authenticator underneath).

* Bad launches, each refused with a page that says why (a browser's requests without Chromium: the platform's
  self-submitting forms followed as a browser follows them): a token signed by another key, an expired one, a
  replayed nonce, an issuer or a client id the hub does not know, a deployment id it does not know, a role the course
  does not know, an LMS course no course serves, an LMS user id that gives no valid Unix user name, one that names
  an account of the machine the hub did not make, and one that names an account another install of the course made
  (the same useradd comment). Nobody is logged in and no account is made.
* The platform's clock a minute ahead, or a minute behind with Moodle's 60 s token: let in (the hub's two minutes of
  leeway); five minutes either way: refused.
* /hub/lti13/config says what docs/lms.md says (scopes, custom fields), and a launch's Canvas ids are kept.
* In Chromium, the LMS's page framing the launch: a page of one button in the frame, which opens the hub in a window
  of its own.
* In Chromium, as the people do it: each instructor launches from their LMS course into JupyterLab on their course
  folder and releases in a terminal; the instructor of one course cannot list the other's course folder from their
  terminal (permission denied) nor open the other's formgrader; a student enrolled in both courses launches from
  each and fetches from each in the Assignments tab (its course menu lists both); a student of one course sees only
  that course and cannot list the other's outbound from their terminal; the students submit; the instructor
  collects, grades (the hub's grading service) and types `course return A --lms`: with the platform refusing one
  student's score (422) that student is named, the other posted, and the command exits 1; run again once the
  platform takes it, it exits 0 and the platform's recorded scores equal the gradebook's.
* Grade posts the platform refuses (401, 404, 422), each named for its student by the grading service while the
  others are posted; the service refuses a student and the other course's instructor.

Cost: 1 min 35 s to 2 min 45 s on 2 cores with other work on the machine (the Chromium test 1 min 25 s to 1 min
45 s of it: five JupyterLab starts, two submissions graded), about 50 CPU-s counted for the test and the processes
it waited for; the hub starts in about 3 s, the bad launches, clocks, configuration, framed initiations and class
list about 5 s together, the framed launch in Chromium about 2 s (run before the heavy Chromium test, so that a
failure there does not take them down with the hub). The whole module: 1 min 50 s on 2 cores (2026-12, alone).
"""
import html
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from hub_helpers import modes_of, restore_modes
from lti_hub import LtiHub
from lti_platform import LTI, Browser, LtiPlatform

from coursekit.hub.access import MADE_BY_HUB, REFERENCE_FOLDER
from coursekit.hub.service_client import service_url
from coursekit.hub.state import HubState

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(1800), pytest.mark.xdist_group("hub")]

PREFIX = "ltib-"
ENC, DEC = "ltib-enc", "ltib-dec"  # the two courses' ids
CONTEXTS = {ENC: "lms-course-enc-101", DEC: "lms-course-dec-102"}
TEACH_ENC, TEACH_DEC, ADA, BOB = "teach-enc", "teach-dec", "ada", "bob"  # LMS user ids (subs)
EXTRA = ["cy", "dee", "eve"]  # students of ENC who launch without a browser (the grade posts the platform refuses)
OUTSIDER = "admin"  # an account of the machine the hub did not make: ltib-admin
OTHER_INSTALL = "elsewhere"  # an account another install of the course made (its useradd comment): ltib-elsewhere
FAY = "fay"  # a Canvas student whose launches carry Canvas's ids as custom fields
CANVAS_IDS = {"canvas_user_id": "4211", "canvas_login_id": "fay.roe@uni.example",
              "canvas_sis_id": "$Canvas.user.sisSourceId"}  # Canvas sends a variable it cannot expand as it is
USERS = [TEACH_ENC, TEACH_DEC, ADA, BOB, *EXTRA, OUTSIDER, OTHER_INSTALL, FAY, "mentor"]
A = "03_softmax"


@pytest.fixture(scope="module")
def lti_class(class_folder):
    """The platform with the two LMS courses (the instructor of each, Ada in both, Bob and three more in ENC, a
    mentor), and `course hub --lti` serving both course folders."""
    reference_modes = modes_of(REFERENCE_FOLDER)
    with LtiPlatform() as lms:
        for cid, ctx in CONTEXTS.items():
            lms.add_context(ctx, cid.upper(), f"Course {cid}")
        for sub, first, last in ((TEACH_ENC, "Grace", "Hopper"), (TEACH_DEC, "Alan", "Turing"),
                                 (ADA, "Ada", "Lovelace"), (BOB, "Bob", "Jones"), ("cy", "Cy", "Young"),
                                 ("dee", "Dee", "Ng"), ("eve", "Eve", "Moss"), ("mentor", "Max", "Mentor"),
                                 (OUTSIDER, "Ad", "Min"), ("Ada.Lovelace", "Ada", "L"), ("stranger", "S", "T"),
                                 (OTHER_INSTALL, "Else", "Where")):
            lms.add_user(sub, first, last, f"{sub.lower()}@uni.example")
        lms.add_user(FAY, "Fay", "Roe", "fay.roe@uni.example", custom=CANVAS_IDS)
        lms.enroll(TEACH_ENC, CONTEXTS[ENC], "Instructor")
        lms.enroll(TEACH_DEC, CONTEXTS[DEC], "TeachingAssistant")
        for sub in (ADA, BOB, *EXTRA, OUTSIDER, OTHER_INSTALL, FAY, "Ada.Lovelace"):
            lms.enroll(sub, CONTEXTS[ENC], "Learner")
        lms.enroll(ADA, CONTEXTS[DEC], "Learner")
        lms.enroll("mentor", CONTEXTS[ENC], "Mentor")
        lms.add_context("lms-course-elsewhere", "ELSE", "A course no course folder serves")
        lms.enroll("stranger", "lms-course-elsewhere", "Learner")
        hub = LtiHub(class_folder, lms, CONTEXTS, PREFIX)
        hub.clean_up(USERS)  # a run stopped half-way may have left them
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", hub.user(OUTSIDER)],
                       check=True, capture_output=True)
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", MADE_BY_HUB,
                        hub.user(OTHER_INSTALL)], check=True, capture_output=True)
        try:
            hub.start()
            yield lms, hub
        finally:
            hub.stop()
            hub.clean_up(USERS)
            restore_modes(reference_modes)


def launch(hub, sub, context, variant=None):
    """A browser's launch from the platform as ``sub``, up to the hub's answer to the callback (its redirect into
    the hub, or its page); returns (the answer, the browser)."""
    browser = Browser(stop_at=lambda target: target.startswith(hub.base) and "/lti13/" not in target)
    answer = browser.open(hub.lms.launch_url(sub, context, variant=variant))
    return answer, browser


def logged_in(browser):
    return any(c.name.startswith("jupyterhub-session") for c in browser.cookies)


def exists(name):
    return subprocess.run(["id", name], capture_output=True).returncode == 0


BAD = {  # name: (sub, context, variant, status, what the page says)
    "signed by another key": (BOB, ENC, "wrong_key", 400, "Signature verification failed"),
    "expired": (BOB, ENC, "expired", 400, "Signature has expired"),
    "unknown issuer": (BOB, ENC, "unknown_issuer", 400, "Invalid issuer"),
    "unknown client id": (BOB, ENC, "unknown_client_id", 401, "Audience doesn"),
    "unknown deployment": (BOB, ENC, "unknown_deployment", 403,
                           "This hub is not set up for the LMS deployment 'deployment-not-configured'"),
    "unknown role": (BOB, ENC, "unknown_role", 403,
                     "The LMS gave you the role(s) Mentor in 'Course ltib-enc', which this course does not know: "
                     "Instructor and TeachingAssistant are its instructors, Learner its students."),
    "a mentor": ("mentor", ENC, None, 403, "The LMS gave you the role(s) Mentor"),
    "no course for the context": ("stranger", None, None, 403,
                                  "This hub serves no course for the LMS course 'A course no course folder serves' "
                                  "(context id 'lms-course-elsewhere')"),
    "no valid Unix name": ("Ada.Lovelace", ENC, None, 403,
                           "Your LMS user id 'Ada.Lovelace' gives no valid Unix user name: a Unix user name here is "
                           "the LMS user id (sub) with 'ltib-' before it, unchanged, and must be 1 to 32 lowercase "
                           "letters, digits, '_' or '-', starting with a lowercase letter or '_'."),
    "an account the hub did not make": (OUTSIDER, ENC, None, 403,
                                        "Your LMS user id 'admin' names the Unix user ltib-admin, an account of this "
                                        "machine that the hub did not make"),
    "an account another install made": (OTHER_INSTALL, ENC, None, 403,
                                        "Your LMS user id 'elsewhere' names the Unix user ltib-elsewhere, an account "
                                        "of this machine that the hub did not make"),
}
EXISTING = (OUTSIDER, OTHER_INSTALL)  # accounts there before the hub: refused, never removed


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_launch_is_refused_with_a_page_that_says_why(lti_class, case):
    """Each bad launch gets the hub's page with its status and the sentence that says why; no session cookie; a
    launch refused after its token was verified (403) makes no account and leaves no trace in the hub's state."""
    lms, hub = lti_class
    sub, course, variant, status, why = BAD[case]
    context = CONTEXTS[course] if course else "lms-course-elsewhere"
    answer, browser = launch(hub, sub, context, variant)
    text = html.unescape(re.sub(r"\s+", " ", answer.text))
    assert answer.status_code == status and why in text, (answer.status_code, text[:3000])
    assert not logged_in(browser)
    if status == 403:
        name = hub.user(sub)
        assert (sub in EXISTING) == exists(name), f"{name}: an account was made for a refused launch"
        assert name not in HubState(hub.state).read()["users"]


def test_a_replayed_nonce_is_refused(lti_class):
    """A token carrying the nonce of an earlier launch: refused by ltiauthenticator (the nonce is bound to the
    browser's login), and the user of the earlier launch is not logged in by it."""
    lms, hub = lti_class
    good, _ = launch(hub, BOB, CONTEXTS[ENC])
    assert good.status_code == 302, good.text[:2000]
    answer, browser = launch(hub, BOB, CONTEXTS[ENC], "replayed_nonce")
    assert answer.status_code == 400 and "nonce mismatch" in answer.text, answer.text[:2000]
    assert not logged_in(browser)


def test_good_launches_make_the_accounts_groups_and_gradebook_entries(lti_class):
    """What a good launch makes, as root, before the hub logs the user in: a student's Unix user (a home only they
    may enter), their place in the course's students' group and, with their LMS user id, in its gradebook; the
    course's line items URL in the hub's state. The course's first instructor gets the course folder and its folder
    in the exchange, the staff group, and the grading service's settings name them."""
    import grp
    import pwd
    import stat

    from coursekit.groups import students_group
    from coursekit.pipeline import gradebook
    lms, hub = lti_class
    for sub, course in ((TEACH_ENC, ENC), (BOB, ENC)):
        answer, browser = launch(hub, sub, CONTEXTS[course])
        assert answer.status_code == 302 and logged_in(browser), answer.text[:2000]
    teacher, student = hub.user(TEACH_ENC), hub.user(BOB)
    for name in (teacher, student):
        home = pwd.getpwnam(name).pw_dir
        assert stat.S_IMODE(os.stat(home).st_mode) == 0o700, name
    assert student in grp.getgrnam(students_group(ENC)).gr_mem
    assert student not in grp.getgrnam(f"{ENC}-staff").gr_mem
    assert teacher in grp.getgrnam(f"{ENC}-staff").gr_mem and teacher in grp.getgrnam(students_group(ENC)).gr_mem
    folder = hub.courses[ENC]
    st = os.stat(folder)
    assert pwd.getpwuid(st.st_uid).pw_name == teacher and grp.getgrgid(st.st_gid).gr_name == f"{ENC}-staff"
    assert stat.S_IMODE(st.st_mode) & 0o007 == 0
    outbound = os.stat(os.path.join(hub.exchange, ENC, "outbound"))
    assert grp.getgrgid(outbound.st_gid).gr_name == students_group(ENC) and stat.S_IMODE(outbound.st_mode) == 0o2750
    with gradebook(folder) as gb:
        bob = gb.find_student(student)
        assert (bob.lms_user_id, bob.first_name, bob.last_name) == (BOB, "Bob", "Jones")
    state = HubState(hub.state).read()
    assert state["courses"][ENC]["lineitems"] == lms.lineitems_url(CONTEXTS[ENC])
    assert state["courses"][ENC]["students"][student] == BOB and state["courses"][ENC]["instructors"] == [teacher]
    grading = json.load(open(os.path.join(hub.state, "grading.json")))
    assert grading["courses"][folder]["instructors"] == [teacher]
    assert grading["courses"][hub.courses[DEC]]["instructors"] == []
    # the other course has no instructor yet: its folder is root's and its staff's, closed to everyone else
    st = os.stat(hub.courses[DEC])
    assert st.st_uid == 0 and grp.getgrgid(st.st_gid).gr_name == f"{DEC}-staff" and st.st_mode & 0o007 == 0
    # an instructor of one course launching as a student elsewhere, or as an instructor of a second course: refused
    lms.enroll(TEACH_ENC, CONTEXTS[DEC], "Learner")
    answer, _ = launch(hub, TEACH_ENC, CONTEXTS[DEC])
    assert answer.status_code == 403 and f"You are an instructor of {ENC} on this hub" in answer.text
    lms.enroll(TEACH_ENC, CONTEXTS[DEC], "Instructor")
    answer, _ = launch(hub, TEACH_ENC, CONTEXTS[DEC])
    assert answer.status_code == 403 and f"You are already an instructor of {ENC} on this hub" in answer.text
    del lms.contexts[CONTEXTS[DEC]]["members"][TEACH_ENC]


CLOCKS = {  # the platform's clock: (seconds ahead of the hub's, its id_token's lifetime, status, what the page says)
    "a minute ahead": (60, 300, 302, None),
    "a minute behind, with Moodle's 60 s token": (-60, 60, 302, None),
    "five minutes ahead": (300, 300, 400, "The token is not yet valid (iat)"),
    "five minutes behind, with Moodle's 60 s token": (-300, 60, 400, "Signature has expired"),
}


@pytest.mark.parametrize("case", sorted(CLOCKS))
def test_a_platform_clock_off_by_a_minute_is_allowed_and_beyond_the_leeway_refused(lti_class, case):
    """The platform's clock a minute ahead (its token issued "in the future") or a minute behind with Moodle's 60 s
    token (expired by the hub's clock on arrival): the launch logs the user in, within the hub's two minutes of
    leeway; five minutes either way: refused with ltiauthenticator's page, nobody logged in. Cost: a launch each."""
    lms, hub = lti_class
    offset, lifetime, status, why = CLOCKS[case]
    lms.clock_offset, lms.token_lifetime = offset, lifetime
    try:
        answer, browser = launch(hub, BOB, CONTEXTS[ENC])
    finally:
        lms.clock_offset, lms.token_lifetime = 0, 300
    claims = lms.issued[-1]["claims"]
    assert claims["exp"] - claims["iat"] == lifetime and abs(claims["iat"] - time.time() - offset) < 30
    assert answer.status_code == status, (answer.status_code, answer.text[:2000])
    assert logged_in(browser) == (status == 302)
    if why:
        assert why in html.unescape(answer.text), answer.text[:2000]


def class_lists(hub):
    """How many times the hub has said what the LMS's class list changed (its log, since it started)."""
    return hub.log_tail(10 ** 7).count("class list from the LMS")


def wait_for_class_list(hub, before, seconds=60):
    deadline = time.monotonic() + seconds
    while class_lists(hub) == before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert class_lists(hub) > before, hub.log_tail(3000)


def docs_section(start, end):
    from coursekit import ROOT
    text = open(os.path.join(ROOT, "docs", "lms.md")).read()
    return text[text.index(start):text.index(end)]


def test_the_config_url_says_what_the_docs_say_and_the_hub_reads_those_fields(lti_class):
    """/hub/lti13/config (what Canvas's "Enter URL" reads) against the section of docs/lms.md that lists the scopes
    and custom fields: the same scopes, the same custom fields with the same Canvas variables, nothing more; every
    placement opens in a new window; the tool's own URLs (the same when the request names another Host) and public
    key. A launch carrying those fields has them kept in the hub's state (the one Canvas could not expand left out)
    and Canvas's user id is the gradebook's lms_user_id, what Canvas's gradebook import matches by. Cost: a launch
    and a gradebook read."""
    import requests

    from coursekit.pipeline import gradebook
    lms, hub = lti_class
    config = requests.get(f"{hub.base}/hub/lti13/config", timeout=30).json()
    section = docs_section("**What the tool asks of the platform.**", "**Open the link in a new window.**")
    scopes = re.findall(r"^\| `(https://purl\.imsglobal\.org/[^`]+)` \|", section, re.M)
    fields = dict(re.findall(r"^\| `([a-z_]+)` \| `(\$[A-Za-z.]+)` \|", section, re.M))
    assert len(scopes) == 5 and len(fields) == 3, section
    assert sorted(config["scopes"]) == sorted(scopes)
    assert config["custom_fields"] == fields
    placements = [p for ext in config["extensions"] for p in ext["settings"]["placements"]]
    assert placements and all(p["windowTarget"] == "_blank" and "custom_fields" not in p for p in placements)
    assert config["oidc_initiation_url"] == f"{hub.base}/hub/lti13/oauth_login"
    assert config["target_link_uri"] == f"{hub.base}/hub/"
    assert config["public_jwk"] == json.load(open(os.path.join(hub.state, "lti-tool-public-key.json")))["jwk"]
    # the URLs are the hub's as configured, whatever Host the request names (its own, or another site's)
    for host in ("evil.example", "evil.example:443"):
        forged = requests.get(f"{hub.base}/hub/lti13/config", headers={"Host": host}, timeout=30)
        assert forged.status_code == 200 and forged.json() == config, (host, forged.text[:500])
    answer, _ = launch(hub, FAY, CONTEXTS[ENC])
    assert answer.status_code == 302, answer.text[:2000]
    kept = HubState(hub.state).read()["users"][hub.user(FAY)]
    assert kept == {"sub": FAY, "lms_ids": {"canvas_user_id": "4211", "canvas_login_id": "fay.roe@uni.example"}}
    with gradebook(hub.courses[ENC]) as gb:
        assert gb.find_student(hub.user(FAY)).lms_user_id == "4211"


@pytest.mark.parametrize("dest", ["iframe", "frame", None])  # None: a browser that does not say (older Safari)
def test_a_framed_login_initiation_gets_the_page_of_one_button_and_a_top_level_one_the_login(lti_class, dest):
    """The login initiation the platform's page sends (its form, as a browser posts it): from a frame (the browser's
    Sec-Fetch-Dest), a page that may be framed by any page, runs no script, and holds one form that sends the
    platform's own fields, escaped, to the same URL in a new window; from a window of its own, the redirect to the
    platform's authorization URL as before. Cost: two requests."""
    import requests

    from lti_platform import autosubmit_form
    lms, hub = lti_class
    step1 = autosubmit_form(requests.get(lms.launch_url(BOB, CONTEXTS[ENC]), timeout=30).text)
    fields = dict(step1["fields"], login_hint='bob"><script>x()</script>')
    framed = requests.post(step1["action"], data=fields, headers={"Sec-Fetch-Dest": dest} if dest else {},
                           allow_redirects=False, timeout=30)
    assert framed.status_code == 200, framed.text[:2000]
    policy = framed.headers["Content-Security-Policy"]
    assert "frame-ancestors *" in policy and "default-src 'none'" in policy and "script-src" not in policy
    form = re.findall(r'<form method="post" action="([^"]+)" target="_blank">', framed.text)
    assert form == ["/hub/lti13/oauth_login"] and framed.text.count("<button") == 1 and "<script" not in framed.text
    assert autosubmit_form(framed.text.replace('target="_blank"', 'id="autosubmit"'))["fields"] == fields
    top = requests.post(step1["action"], data=step1["fields"], headers={"Sec-Fetch-Dest": "document"},
                        allow_redirects=False, timeout=30)
    assert top.status_code == 302 and top.headers["Location"].startswith(lms.authorize_url)


@pytest.mark.browser
def test_a_framed_launch_opens_the_hub_in_a_window_of_its_own(lti_class):
    """The LMS's course page frames the launch (its iframe on another site, as Canvas and Moodle embed a link by
    default), in Chromium: the frame shows the hub's page of one button, and no hub page; the button opens a
    window in which the same login goes through and the hub shows, logged in; the hub's own pages still refuse to
    be framed. Cost: Chromium and a launch, about 10 s."""
    from lab import launch as chromium
    from playwright.sync_api import sync_playwright

    from coursekit.hub.lti_pages import FRAMED_BUTTON
    lms, hub = lti_class
    with sync_playwright() as p:
        browser = chromium(p)
        try:
            page = browser.new_context().new_page()
            page.goto(lms.course_page_url(BOB, CONTEXTS[ENC], target_link_uri=f"{hub.base}/hub/home"))
            frame = page.frame_locator("#tool_content")
            frame.locator("#open-course").wait_for(timeout=60_000)
            assert frame.locator("button").all_inner_texts() == [FRAMED_BUTTON]
            framed = next(f for f in page.frames if f.url.startswith(hub.base))
            assert framed.url == f"{hub.base}/hub/lti13/oauth_login" and framed.parent_frame == page.main_frame
            assert not framed.locator("#login_widget, #jupyterhub-logo, .navbar").count()
            with page.expect_popup() as opened:
                frame.locator("#open-course").click()
            window = opened.value
            window.wait_for_url(f"{hub.base}/hub/home", timeout=60_000)
            assert hub.user(BOB) in window.content()  # the hub's page, logged in as the launch's user
            answer = window.goto(f"{hub.base}/hub/home")
            assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
        finally:
            browser.close()
    assert lms.issued[-1]["claims"][LTI + "launch_presentation"]["document_target"] == "iframe"
    assert "LTI login initiation in a frame (login_hint 'bob')" in hub.log_tail(10 ** 7)


def test_an_instructors_launch_brings_the_class_list_from_the_lms(lti_class):
    """The platform offers Names and Role Provisioning Services: an instructor's launch has the hub read the
    course's members (in the background, once the instructor is in) and say what changed in its log; the LMS's
    learners are the course's students in the hub's state, but for those whose id gives no Unix name or names an
    account the hub did not make, which are named. Cost: a launch and a class list, about 2 s."""
    lms, hub = lti_class
    before = class_lists(hub)
    answer, _ = launch(hub, TEACH_ENC, CONTEXTS[ENC])
    assert answer.status_code == 302, answer.text[:2000]
    wait_for_class_list(hub, before)
    log = hub.log_tail(10 ** 7)
    students = HubState(hub.state).read()["courses"][ENC]["students"]
    learners = {s for s, role in lms.contexts[CONTEXTS[ENC]]["members"].items() if role == "Learner"}
    assert {hub.user(s) for s in learners - {OUTSIDER, OTHER_INSTALL, "Ada.Lovelace"}} <= set(students)
    assert not {hub.user(OUTSIDER), hub.user(OTHER_INSTALL)} & set(students)
    assert f"not added 'admin': {hub.user(OUTSIDER)} is an account of this machine that the hub did not make" in log
    assert "not added 'Ada.Lovelace': their LMS user id gives no valid Unix user name" in log


def select_course(page, course):
    """The Assignments tab's course menu: open it, choose ``course``; the lists show that course's assignments."""
    from lab import open_assignments
    open_assignments(page)
    default = page.locator("#course_list_default:visible")
    if default.inner_text().strip() != course:
        page.locator("#course_list_dropdown:visible").click()
        page.locator("#course_list:visible li a", has_text=re.compile(f"^{re.escape(course)}$")).click()
    page.locator("#course_list_default:visible", has_text=re.compile(f"^{re.escape(course)}$")).wait_for(
        timeout=60_000)


def courses_in_menu(page):
    page.locator("#course_list_dropdown:visible").click()
    items = page.locator("#course_list:visible li a").all_inner_texts()
    page.keyboard.press("Escape")
    page.locator("#course_list_dropdown:visible").click()  # closed again
    return sorted(set(items) | {page.locator("#course_list_default:visible").inner_text().strip()})


def open_path(page, *folders):
    """Open ``folders`` one in another from the home folder in the file browser (select, then Enter)."""
    page.locator(".jp-BreadCrumbs-home").first.click()
    for name in folders:
        page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=re.compile(
            f"^{re.escape(name)}$"))).click()
        page.keyboard.press("Enter")
        page.locator(".jp-BreadCrumbs", has_text=name).first.wait_for(timeout=30_000)


def run(terminal, command, timeout=300):
    """Type ``command`` in the terminal and wait until it has finished (its exit status shown after its output as
    `=END<n>=<status>`, n new for each command: the text of the command before may still be on the screen); returns
    (the terminal's text from the command on, the exit status)."""
    run.count = getattr(run, "count", 0) + 1
    end = f"=END{run.count}="
    said = terminal.run(f'{command}; echo "{end[:4]}""{end[4:]}$?"', re.escape(end) + r"\d+", timeout=timeout)
    said = said[said.rindex(command[:40]):]
    return said, int(re.search(re.escape(end) + r"(\d+)", said).group(1))


def upload_answers(page, path):
    """Upload ``path`` into the file browser's folder; JupyterLab then opens the notebook in front, a few seconds
    later: wait for its tab, so that the Assignments tab is brought back after it, not before."""
    from lab import upload
    upload(page, path)
    try:
        page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=os.path.basename(path)).first.wait_for(
            timeout=30_000)
    except Exception:
        pass  # not opened: nothing in front of the Assignments tab


@pytest.mark.browser
def test_two_courses_from_the_lms_in_chromium(lti_class, tmp_path):
    import nbformat
    from lab import (TALL, Terminal, button_in, launch as chromium, press_in_assignments, screenshot_on_failure,
                     wait_in_assignments)
    from lab import wait_for_lab
    from playwright.sync_api import sync_playwright

    from coursekit.pipeline import gradebook
    from coursekit.samples import answered, with_bug
    lms, hub = lti_class
    t0 = time.monotonic()
    phase = lambda what: print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)  # noqa: E731
    with sync_playwright() as p:
        browser = chromium(p)
        pages = {who: browser.new_context(viewport=TALL).new_page() for who in (TEACH_ENC, TEACH_DEC, ADA, BOB)}

        def from_lms(who, course):  # the course's link in the LMS, clicked
            pages[who].goto(lms.launch_url(who, CONTEXTS[course]))

        from_lms(TEACH_ENC, ENC)
        from_lms(TEACH_DEC, DEC)
        from_lms(ADA, ENC)
        from_lms(BOB, ENC)
        teach = pages[TEACH_ENC]
        with screenshot_on_failure(teach, "lti-instructor-release"):
            wait_for_lab(teach)
            assert teach.url.startswith(f"{hub.base}/user/{hub.user(TEACH_ENC)}/lab"), teach.url
            terminal = Terminal(teach)
            said, status = run(terminal, f"course release {A}")
            assert status == 0 and f"released {A} to {hub.exchange}/{ENC}/outbound/{A}" in said, said
        with screenshot_on_failure(pages[TEACH_DEC], "lti-other-instructor-release"):
            wait_for_lab(pages[TEACH_DEC])
            said, status = run(Terminal(pages[TEACH_DEC]), f"course release {A}")
            assert status == 0 and f"released {A} to {hub.exchange}/{DEC}/outbound/{A}" in said, said
        phase("both instructors launched and released")
        # the instructor of one course sees nothing of the other's: its folder, its exchange folders, its formgrader
        said, status = run(terminal, f"ls {hub.courses[DEC]} {hub.exchange}/{DEC}/outbound "
                                     f"{hub.exchange}/{DEC}/inbound {hub.exchange}/{DEC}/feedback")
        assert status != 0 and said.count("Permission denied") == 4, said
        other = teach.context.new_page()
        answer = other.goto(f"{hub.base}/user/{hub.user(TEACH_DEC)}/formgrader/")
        assert answer.status == 403 and "formgrader" not in other.title().lower(), (answer.status, other.content())
        other.close()
        phase("the other course closed to the instructor")

        release = nbformat.read(os.path.join(hub.courses[ENC], "release", A, f"{A}.ipynb"), as_version=4)
        for who, nb in ((ADA, answered(release)), (BOB, with_bug(release, A))):
            nbformat.write(nb, tmp_path / f"{who}.ipynb")
        # Ada, in both courses: her first launch from DEC restarts her server with DEC's group; the course menu
        # lists both, and she fetches from each
        ada = pages[ADA]
        with screenshot_on_failure(ada, "lti-student-in-two-courses"):
            wait_for_lab(ada)
            from_lms(ADA, DEC)
            wait_for_lab(ada)
            select_course(ada, ENC)
            assert courses_in_menu(ada) == sorted([ENC, DEC])
            for course in (DEC, ENC):
                select_course(ada, course)
                button_in(ada, "released_assignments_list", "Fetch").click()
                button_in(ada, "fetched_assignments_list", "Submit").wait_for(timeout=120_000)
            os.rename(tmp_path / f"{ADA}.ipynb", tmp_path / f"{A}.ipynb")
            open_path(ada, ENC, A)
            upload_answers(ada, str(tmp_path / f"{A}.ipynb"))
            select_course(ada, ENC)
            press_in_assignments(ada, "fetched_assignments_list", "Submit")
            wait_in_assignments(ada, "submitted_assignments_list", "Fetch Feedback")
        for course in (ENC, DEC):
            assert os.path.isfile(os.path.join(os.path.expanduser(f"~{hub.user(ADA)}"), course, A, f"{A}.ipynb")), \
                course
        assert f"stopping {hub.user(ADA)}'s server: it starts again with the groups of the new course" in \
            hub.log_tail(10 ** 7)
        phase("Ada fetched from both courses and submitted to ENC")
        # Bob, in ENC only: no DEC in his menu, DEC's outbound closed to his terminal
        bob = pages[BOB]
        with screenshot_on_failure(bob, "lti-student-in-one-course"):
            wait_for_lab(bob)
            select_course(bob, ENC)
            assert courses_in_menu(bob) == [ENC]
            button_in(bob, "released_assignments_list", "Fetch").click()
            button_in(bob, "fetched_assignments_list", "Submit").wait_for(timeout=120_000)
            said, status = run(Terminal(bob), f"ls {hub.exchange}/{DEC}/outbound")
            assert status != 0 and "Permission denied" in said, said
            os.makedirs(tmp_path / "bob")
            os.rename(tmp_path / f"{BOB}.ipynb", tmp_path / "bob" / f"{A}.ipynb")
            open_path(bob, ENC, A)
            upload_answers(bob, str(tmp_path / "bob" / f"{A}.ipynb"))
            press_in_assignments(bob, "fetched_assignments_list", "Submit")
            wait_in_assignments(bob, "submitted_assignments_list", "Fetch Feedback")
        phase("Bob fetched and submitted; DEC closed to him")

        # the instructor: collect, grade, return with --lms (the platform refuses Bob's score once)
        with screenshot_on_failure(teach, "lti-instructor-grade-and-return"):
            said, status = run(terminal, f"course collect {A}")
            assert status == 0 and re.search(rf"{hub.user(ADA)}\s+new", said), said
            assert re.search(rf"{hub.user(BOB)}\s+new", said), said
            said, status = run(terminal, f"course grade {A} -j 2 --no-progress", timeout=900)
            assert status == 0 and "of the hub's grading service (as root)" in said, said
            phase("collected and graded")
            lms.refuse_scores(BOB, 422)
            said, status = run(terminal, f"course return {A} --lms")
            # Ada's points, and a 0 for each student of the course who submitted nothing (one rule with the export)
            assert f"{A}: 5 scores posted to the LMS" in said, said
            assert re.search(rf"no submission {hub.user('cy')}: 0 posted", said), said
            assert re.search(rf"FAILED {hub.user(BOB)}: HTTP 422", said) and status == 1, said
            assert f"log: {hub.courses[ENC]}/lms/ags_log.jsonl" in said, said
            lms.refuse_scores(BOB, None)
            said, status = run(terminal, f"course return {A} --lms")
            # the LMS holds the five it took (its results say so): Bob's alone is posted
            assert f"{A}: 1 score posted to the LMS, 5 it holds already left as they are" in said, said
            assert status == 0 and "FAILED" not in said, said
        phase("returned with --lms")
        browser.close()
    with gradebook(hub.courses[ENC]) as gb:
        book = {}
        for sub in (ADA, BOB):
            submission = gb.find_submission(A, hub.user(sub))
            book[sub] = (max(0.0, submission.score - (submission.late_submission_penalty or 0.0)),
                         gb.find_assignment(A).max_score)
    recorded = {sub: got for sub, got in lms.recorded(CONTEXTS[ENC], A).items() if got[0] or sub in book}
    assert recorded == book and book[ADA][0] == book[ADA][1] and 0 < book[BOB][0] < book[BOB][1], (recorded, book)
    posts = [s["userId"] for s in lms.scores if s["scoreGiven"]]
    assert posts == [ADA, BOB]  # Ada alone (Bob refused), then Bob alone (the LMS holds the rest); the others a 0 once


def service_post(hub, token, body):
    """POST /lms/scores to the hub's grading service, as `course return --lms` does; (status, answer)."""
    config = json.load(open(os.path.join(hub.state, "grading.json")))
    request = urllib.request.Request(service_url(f"http://127.0.0.1:{config['port']}", "/lms/scores", body["course"]),
                                     data=json.dumps(body).encode(),
                                     method="POST", headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_grade_posts_the_platform_refuses_are_named_per_student(lti_class):
    """The grading service posts an instructor's scores with the tool's key (root's): the platform refusing three
    students' scores (401 twice, as a stale token would be tried once more; 404; 422), each is named with its status
    and the fourth is posted; the log (root's) holds every post. A student's token and the other course's
    instructor's are refused."""
    lms, hub = lti_class
    for sub in (TEACH_ENC, TEACH_DEC, BOB, *EXTRA):
        answer, _ = launch(hub, sub, CONTEXTS[DEC if sub == TEACH_DEC else ENC])
        assert answer.status_code == 302, (sub, answer.text[:2000])
    for sub, status in zip(EXTRA, (401, 404, 422)):
        lms.refuse_scores(sub, status)
    body = {"course": hub.courses[ENC], "assignment": "02_dot_products", "maximum": 10,
            "students": [hub.user(s) for s in (BOB, *EXTRA)],
            "scores": {hub.user(BOB): 7.5, hub.user("cy"): 1, hub.user("dee"): 2, hub.user("eve"): 3}}
    try:
        status, answer = service_post(hub, hub.user_token(hub.user(TEACH_ENC)), body)
    finally:
        for sub in EXTRA:
            lms.refuse_scores(sub, None)
    assert status == 200, answer
    assert answer["posted"] == {hub.user(BOB): 7.5} and answer["created"], answer
    assert {s: why.split(":")[0] for s, why in answer["failed"].items()} == {
        hub.user("cy"): "HTTP 401", hub.user("dee"): "HTTP 404", hub.user("eve"): "HTTP 422"}, answer
    assert lms.recorded(CONTEXTS[ENC], "02_dot_products") == {BOB: (7.5, 10)}
    scores = [r for r in answer["log"] if r["event"] == "score"]
    assert sorted((r["userId"], r["ok"], r["status"]) for r in scores) == [
        (BOB, True, 204), ("cy", False, 401), ("dee", False, 404), ("eve", False, 422)]
    root_log = os.path.join(hub.state, "lms", f"{ENC}.jsonl")
    assert os.stat(root_log).st_mode & 0o077 == 0 and os.stat(os.path.dirname(root_log)).st_mode & 0o077 == 0
    # a student, and the instructor of the other course
    for who, why in ((BOB, f"{hub.user(BOB)} is not an instructor of {hub.courses[ENC]}"),
                     (TEACH_DEC, f"{hub.user(TEACH_DEC)} is not an instructor of {hub.courses[ENC]}")):
        status, answer = service_post(hub, hub.user_token(hub.user(who)), body)
        assert status == 403 and why in answer, (status, answer)
    # a score above the maximum (nbgrader's extra credit) is posted as given; a negative one is no request to post
    status, answer = service_post(hub, hub.user_token(hub.user(TEACH_ENC)),
                                  dict(body, scores={hub.user(BOB): 11}))
    assert status == 200 and answer["posted"][hub.user(BOB)] == 11, (status, answer)
    assert lms.recorded(CONTEXTS[ENC], "02_dot_products")[BOB] == (11, 10)
    status, answer = service_post(hub, hub.user_token(hub.user(TEACH_ENC)),
                                  dict(body, scores={hub.user(BOB): -1}))
    assert status == 400 and "each score a number of at least 0" in answer, (status, answer)


def test_a_restart_keeps_what_the_launches_brought(lti_class):
    """`course hub --lti` started again with the same file: the instructor who came by launch keeps the course folder
    and the grading service's trust, the students keep their groups and gradebook entries (names and LMS user ids
    untouched), the line items URL stays, and they launch again."""
    import grp
    import pwd

    from coursekit.groups import students_group
    from coursekit.pipeline import gradebook
    lms, hub = lti_class
    lists = class_lists(hub)
    for sub in (TEACH_ENC, BOB):
        answer, _ = launch(hub, sub, CONTEXTS[ENC])
        assert answer.status_code == 302, answer.text[:2000]
    wait_for_class_list(hub, lists)  # the instructor's launch reads the class list in the background: done first
    before = HubState(hub.state).read()
    hub.stop()
    hub.start()
    assert HubState(hub.state).read()["courses"] == before["courses"]
    folder = hub.courses[ENC]
    assert pwd.getpwuid(os.stat(folder).st_uid).pw_name == hub.user(TEACH_ENC)
    grading = json.load(open(os.path.join(hub.state, "grading.json")))
    assert grading["courses"][folder]["instructors"] == [hub.user(TEACH_ENC)]
    assert hub.user(BOB) in grp.getgrnam(students_group(ENC)).gr_mem
    with gradebook(folder) as gb:
        bob = gb.find_student(hub.user(BOB))
        assert (bob.first_name, bob.last_name, bob.lms_user_id) == ("Bob", "Jones", BOB)
    for sub in (TEACH_ENC, BOB):
        answer, _ = launch(hub, sub, CONTEXTS[ENC])
        assert answer.status_code == 302, answer.text[:2000]

