"""Two courses on one hub, their people arriving from the LMS by LTI 1.3 (`course hub --lti FILE`): the LTI 1.3 test
platform (lti_platform.py) on 127.0.0.1 launches into the real JupyterHub with the course's authenticator
(coursekit/hub_lti.py, ltiauthenticator's LTI13Authenticator underneath).

* Bad launches, each refused with a page that says why (a browser's requests without Chromium: the platform's
  self-submitting forms followed as a browser follows them): a token signed by another key, an expired one, a
  replayed nonce, an issuer or a client id the hub does not know, a deployment id it does not know, a role the course
  does not know, an LMS course no course serves, an LMS user id that gives no valid Unix user name, and one that names
  an account of the machine the hub did not make. Nobody is logged in and no account is made.
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

Cost: see the README's hub tests (measured there).
"""
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
import json

import pytest
from hub_helpers import modes_of, restore_modes
from lti_hub import LtiHub
from lti_platform import Browser, LtiPlatform

from coursekit.hub import REFERENCE
from coursekit.hub_courses import HubState

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(1800), pytest.mark.xdist_group("hub")]

PREFIX = "ltib-"
ENC, DEC = "ltib-enc", "ltib-dec"  # the two courses' ids
CONTEXTS = {ENC: "lms-course-enc-101", DEC: "lms-course-dec-102"}
TEACH_ENC, TEACH_DEC, ADA, BOB = "teach-enc", "teach-dec", "ada", "bob"  # LMS user ids (subs)
EXTRA = ["cy", "dee", "eve"]  # students of ENC who launch without a browser (the grade posts the platform refuses)
OUTSIDER = "admin"  # an account of the machine the hub did not make: ltib-admin
USERS = [TEACH_ENC, TEACH_DEC, ADA, BOB, *EXTRA, OUTSIDER, "mentor"]
A = "03_softmax"


@pytest.fixture(scope="module")
def lti_class(class_folder):
    """The platform with the two LMS courses (the instructor of each, Ada in both, Bob and three more in ENC, a
    mentor), and `course hub --lti` serving both course folders."""
    reference_modes = modes_of(REFERENCE)
    with LtiPlatform() as lms:
        for cid, ctx in CONTEXTS.items():
            lms.add_context(ctx, cid.upper(), f"Course {cid}")
        for sub, first, last in ((TEACH_ENC, "Grace", "Hopper"), (TEACH_DEC, "Alan", "Turing"),
                                 (ADA, "Ada", "Lovelace"), (BOB, "Bob", "Jones"), ("cy", "Cy", "Young"),
                                 ("dee", "Dee", "Ng"), ("eve", "Eve", "Moss"), ("mentor", "Max", "Mentor"),
                                 (OUTSIDER, "Ad", "Min"), ("Ada.Lovelace", "Ada", "L"), ("stranger", "S", "T")):
            lms.add_user(sub, first, last, f"{sub.lower()}@uni.example")
        lms.enroll(TEACH_ENC, CONTEXTS[ENC], "Instructor")
        lms.enroll(TEACH_DEC, CONTEXTS[DEC], "TeachingAssistant")
        for sub in (ADA, BOB, *EXTRA, OUTSIDER, "Ada.Lovelace"):
            lms.enroll(sub, CONTEXTS[ENC], "Learner")
        lms.enroll(ADA, CONTEXTS[DEC], "Learner")
        lms.enroll("mentor", CONTEXTS[ENC], "Mentor")
        lms.add_context("lms-course-elsewhere", "ELSE", "A course no course folder serves")
        lms.enroll("stranger", "lms-course-elsewhere", "Learner")
        hub = LtiHub(class_folder, lms, CONTEXTS, PREFIX)
        hub.clean_up(USERS)  # a run stopped half-way may have left them
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", hub.user(OUTSIDER)],
                       check=True, capture_output=True)
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
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_launch_is_refused_with_a_page_that_says_why(lti_class, case):
    lms, hub = lti_class
    sub, course, variant, status, why = BAD[case]
    context = CONTEXTS[course] if course else "lms-course-elsewhere"
    answer, browser = launch(hub, sub, context, variant)
    text = re.sub(r"\s+", " ", answer.text)
    import html
    text = html.unescape(text)
    assert answer.status_code == status and why in text, (answer.status_code, text[:3000])
    assert not logged_in(browser)
    if status == 403:
        name = hub.user(sub)
        assert (name == hub.user(OUTSIDER)) == exists(name), f"{name}: an account was made for a refused launch"
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

    from coursekit.course_exchange import students_group
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
