"""The class list from the LMS by Names and Role Provisioning Services (coursekit/lms/roster.py), in this process,
against the LTI 1.3 test platform over HTTP on 127.0.0.1 (lti_platform.py: its NRPS 2.0 memberships service, two
members a page with a ``Link: rel="next"`` header, behind the ``contextmembership.readonly`` scope), with the hub's
real state file, a real nbgrader gradebook and real Unix users and groups (as root).

The course had five students who came from the LMS and one the LTI file's roster named; the LMS now lists two of
them, two joiners, one Inactive, one as an Instructor, one gone, a learner whose id gives no Unix name and one whose
name is an account the hub did not make: the sync says each change, the hub's state, the students' group and the
gradebook follow, and the roster's own student is left as they are. A launch carries the service's URL only from a
platform that offers it. A list's ``rel="differences"`` link (NRPS 2.0 section 2.4.3) is kept and read at the next
sync: once a platform sends them, a student leaves only as the LMS's differences or its list mark them, never for
missing from a list that may not be whole. Cost: about 3 s (an RSA key, a gradebook, two useradd/userdel pairs).
"""
import json
import os
import subprocess
import sys

import jwt
import pytest
from hypothesis import given, settings, strategies as st
from gradebooks import build_gradebook
from hub_helpers import remove_users
from lti_platform import NRPS_CLAIM, NRPS_PAGE, LtiPlatform

from coursekit.groups import students_group
from coursekit.hub.lti import check_launch
from coursekit.hub.state import HubState
from coursekit.lms.ags import ToolCredentials, generate_key, load_key
from coursekit.lms.roster import read_members, sync_course

PREFIX = "ltir-"
COURSE = "ltir-course"
CONTEXT = "lms-roster-course"
CELLS = {"03_softmax": {"softmax_basic": 2}}
BEFORE = {"ada": "Learner", "bob": "Learner", "eve": "Learner", "fay": "Learner", "gus": "Learner"}
NOW = {"ada": "Learner", "bob": "Learner", "cy": "Learner", "dee": "Learner", "eve": "Learner",
       "gus": "Instructor", "teach": "Instructor", "Bad.Name": "Learner", "other": "Learner"}
ACCOUNTS = [PREFIX + "eve", PREFIX + "other"]  # eve's launch made hers; "other" is another install's


@pytest.fixture
def lms(tmp_path):
    key = str(tmp_path / "tool.pem")
    jwk = generate_key(key)
    with LtiPlatform() as platform:
        platform.add_context(CONTEXT, "ROSTER", "The roster course")
        for sub, role in NOW.items():
            platform.add_user(sub, sub.capitalize(), "Lms", f"{sub.lower()}@uni.example")
            platform.enroll(sub, CONTEXT, role)
        platform.set_inactive("eve", CONTEXT)
        platform.register_tool("http://127.0.0.1:9/login", ["http://127.0.0.1:9/callback"], public_jwks=jwk)
        yield platform, ToolCredentials(platform.client_id, load_key(key), platform.token_url)


def test_the_class_list_is_read_page_by_page(lms):
    """Every member of the context, over all pages (two a page), with status, names and roles."""
    platform, credentials = lms
    members = read_members(platform.memberships_url(CONTEXT), credentials)
    assert len(NOW) > 2 * NRPS_PAGE
    assert sorted(m["user_id"] for m in members) == sorted(NOW)
    assert {m["user_id"]: m["status"] for m in members}["eve"] == "Inactive"
    assert next(m for m in members if m["user_id"] == "cy")["given_name"] == "Cy"


@pytest.mark.skipif(os.geteuid() != 0, reason="groups and users need root (the hub tests run as root)")
@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_joiners_leavers_and_a_role_change_are_said_and_followed(lms, tmp_path):
    platform, credentials = lms
    folder = str(tmp_path / "course")
    os.makedirs(folder)
    build_gradebook(folder, CELLS, {PREFIX + s: (s, "Lms", "", s) for s in BEFORE}, {})
    state = str(tmp_path / "state")
    os.makedirs(state)
    students = {PREFIX + s: s for s in BEFORE}
    students["rostered"] = ""  # the LTI file's roster named them: not the LMS's to remove
    with HubState(state).change() as data:
        data["courses"][COURSE] = {"folder": folder, "context_id": CONTEXT, "instructors": [PREFIX + "teach"],
                                   "students": students, "lineitems": None, "links": {},
                                   "memberships": platform.memberships_url(CONTEXT)}
        data["made"] = [PREFIX + "eve"]
    group = students_group(COURSE)
    remove_users(ACCOUNTS)
    subprocess.run(["groupadd", group], capture_output=True)
    for name in ACCOUNTS:
        subprocess.run(["useradd", "--no-create-home", "-G", group, name], check=True, capture_output=True)
    from coursekit.hub.enrol import departed_here, read_departed
    departed_here(folder, {PREFIX + "ada": "left the LMS course: no longer in the LMS course"}, [])  # back by launch
    platform.differences = True  # each list links the changes since it: kept, and read at the next sync
    said = []
    try:
        settings = {"state": state, "username_claim": "sub", "username_prefix": PREFIX, "configured": [],
                    "python": sys.executable}
        change = sync_course(settings, COURSE, credentials, out=said.append)
        import grp
        members = set(grp.getgrnam(group).gr_mem)
        again = sync_course(settings, COURSE, credentials, out=lambda line: None)  # in step: nothing more changes
    finally:
        remove_users(ACCOUNTS)
        subprocess.run(["groupdel", group], capture_output=True)
    assert sorted(change.joined) == [PREFIX + "cy", PREFIX + "dee"]
    assert change.left == {PREFIX + "eve": "Inactive in the LMS course", PREFIX + "gus": "now Instructor/Faculty in the LMS"}
    assert list(change.kept) == [PREFIX + "fay"]  # missing from the list of a class under 10: kept, named
    assert change.roles == {PREFIX + "gus": "Instructor/Faculty"}
    assert set(change.unnamed) == {"Bad.Name", "other"}
    assert "is an account of this machine that the hub did not make" in change.unnamed["other"]
    assert said[0] == f"{COURSE}: class list from the LMS: 2 joined, 2 left, 1 changed role, 1 missing kept"
    assert f"  joined {PREFIX}cy (Cy Lms)" in said and f"  left {PREFIX}eve: Inactive in the LMS course" in said
    assert f"  kept {PREFIX}fay: not in the LMS's list, but a class under 10" in "\n".join(said)
    assert f"  role {PREFIX}gus: Instructor/Faculty in the LMS now; an instructor at their next launch" in said
    course = HubState(state).read()["courses"][COURSE]
    assert course["students"] == {PREFIX + "ada": "ada", PREFIX + "bob": "bob", PREFIX + "cy": "cy",
                                  PREFIX + "dee": "dee", PREFIX + "fay": "fay", "rostered": ""}
    assert course["roster_sync"]["joined"] == []  # the last sync's: nothing
    url = platform.memberships_url(CONTEXT)
    assert course["memberships_differences"]["list"] == url
    assert course["memberships_differences"]["url"].startswith(url + "?since=")
    assert again.kept == {PREFIX + "fay": "not in the LMS's list, but the LMS's changes since its last list (its "
                                          "differences link) do not have them leaving"}  # read: fay never left
    assert PREFIX + "eve" not in members and PREFIX + "other" in members  # out of the group: eve only
    from coursekit.pipeline import gradebook
    with gradebook(folder) as gb:
        cy = gb.find_student(PREFIX + "cy")
        assert (cy.first_name, cy.last_name, cy.email, cy.lms_user_id) == ("Cy", "Lms", "cy@uni.example", "cy")
        assert gb.find_student(PREFIX + "eve")  # a leaver's grades stay
    # the export files leave a leaver's row out; ada, whom an earlier sync took out and a launch brought back, and
    # whom this list has as an Active Learner, is back in them
    assert read_departed(folder) == {name: f"left the LMS course: {why}" for name, why in change.left.items()}
    log = os.path.join(state, "lms", f"{COURSE}-roster.jsonl")
    assert os.stat(log).st_mode & 0o077 == 0
    first, last = [json.loads(line) for line in open(log).read().splitlines()]
    assert first["joined"] == [PREFIX + "cy", PREFIX + "dee"] and first["roles"] == {PREFIX + "gus": "Instructor/Faculty"}
    assert last["joined"] == [] and last["left"] == {} and list(last["kept"]) == [PREFIX + "fay"]
    assert (again.joined, again.left, set(again.unnamed)) == ({}, {}, {"Bad.Name", "other"})


def test_a_launch_brings_the_class_lists_url_only_from_a_platform_that_offers_it(lms, tmp_path):
    """The NRPS claim of a launch is kept (check_launch's ``memberships``); a platform without the service sends
    none, and the hub reads no class list."""
    platform, _ = lms
    state = str(tmp_path)
    with HubState(state).change() as data:
        data["courses"][COURSE] = {"folder": "/srv/x", "context_id": CONTEXT, "instructors": [], "students": {}}
    settings = {"deployment_ids": [platform.deployment_id], "username_claim": "sub", "username_prefix": PREFIX,
                "configured": []}
    for offers in (True, False):
        platform.nrps = offers
        token = platform.id_token({"variant": None, "sub": "teach", "context": CONTEXT, "link": "l", "title": "t",
                                   "target": "http://127.0.0.1:9/hub/"}, nonce="n")
        claims = jwt.decode(token, options={"verify_signature": False})
        assert (NRPS_CLAIM in claims) == offers
        adm = check_launch(settings, HubState(state).read(), claims)
        assert adm.memberships == (platform.memberships_url(CONTEXT) if offers else None)


def test_a_list_that_would_empty_the_course_or_half_a_class_is_not_applied():
    """An LMS that lists no one for a moment (or a page of its list lost) must not take the class out of the course:
    a change that takes every student out, or half or more of a class of ten or more (a list of two pages that
    lost one), is refused and nothing changes; an ordinary leaver goes. Members as Moodle and an older Canvas send them (short role names, numeric
    ids) count as the learners they are."""
    from coursekit.lms.roster import SMALL_CLASS, implausible_change, plan
    settings = {"username_claim": "sub", "username_prefix": PREFIX, "configured": []}
    small = {"students": {PREFIX + "a": "a", PREFIX + "b": "b", PREFIX + "c": "c"}, "instructors": []}
    empty = plan(COURSE, small, [], settings)  # a class under 10: nobody missing is taken out, each is named
    assert not empty.left and sorted(empty.kept) == sorted(small["students"]) and not implausible_change(small, empty)
    marked = [{"user_id": s, "roles": ["Learner"], "status": "Inactive"} for s in "abc"]
    assert "take all 3 students out" in implausible_change(small, plan(COURSE, small, marked, settings))
    one_left = plan(COURSE, small, [{"user_id": "a", "roles": ["Learner"]}, {"user_id": "b", "roles": ["Learner"]},
                                    {"user_id": "c", "roles": ["Learner"], "status": "Deleted"}], settings)
    assert list(one_left.left) == [PREFIX + "c"] and implausible_change(small, one_left) is None
    two_missing = plan(COURSE, small, [{"user_id": "a", "roles": ["Learner"]}], settings)
    assert not two_missing.left and sorted(two_missing.kept) == [PREFIX + "b", PREFIX + "c"]
    assert f"  kept {PREFIX}b: not in the LMS's list, but a class under 10 is changed only for students the LMS " \
           f"marks Inactive, Deleted or in another role" in two_missing.lines()
    big = {"students": {f"{PREFIX}{n}": str(n) for n in range(12)}, "instructors": []}
    members = [{"user_id": n, "roles": ["Learner"]} for n in range(5)]  # numbers, short role names
    change = plan(COURSE, big, members, settings)
    assert len(change.left) == 7 and "take 7 of 12 students out of the course at once" in implausible_change(big, change)
    for size in range(SMALL_CLASS, 40):  # exactly half (one page of two lost) is refused; one fewer is applied
        course = {"students": {f"{PREFIX}{n}": str(n) for n in range(size)}, "instructors": []}
        for gone, refused in (((size + 1) // 2, True), ((size + 1) // 2 - 1, False)):
            change = plan(COURSE, course, [{"user_id": str(n), "roles": ["Learner"]} for n in range(gone, size)],
                          settings)
            assert len(change.left) == gone and bool(implausible_change(course, change)) == refused, (size, gone)


MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
LEARNER = st.sampled_from(["Learner", f"{MEMBERSHIP}#Learner"])
TA = st.sampled_from(["TeachingAssistant", f"{MEMBERSHIP}/Instructor#TeachingAssistant",
                      f"{MEMBERSHIP}/instructor#TeachingAssistant"])
STATUS = st.sampled_from(["Active", "active", "ACTIVE", None])


@given(LEARNER, TA, STATUS, st.booleans())
@settings(max_examples=60, deadline=None, database=None)
def test_role_changes_are_said_as_they_are(learner, ta, status, ta_first):
    """A student the LMS lists as a Learner and a TeachingAssistant at once stays the course's student (their grades
    go on to the LMS) and is named as such; an instructor of the course the LMS now lists as a Learner only is named
    as that, not as "someone else's"; a status in any case is the status the spec names. Generated role forms
    (full URIs, Canvas's lower-case sub-role, short names) and orders. Cost: well under a second."""
    from coursekit.lms.roster import plan
    settings_ = {"username_claim": "sub", "username_prefix": PREFIX, "configured": []}
    course = {"students": {PREFIX + "a": "a", PREFIX + "b": "b"}, "instructors": [PREFIX + "t"]}
    data = {"users": {PREFIX + "t": {"sub": "t"}, PREFIX + "a": {"sub": "a"}, PREFIX + "b": {"sub": "b"}}}
    both = [ta, learner] if ta_first else [learner, ta]
    members = [{"user_id": "a", "roles": both, **({"status": status} if status else {})},
               {"user_id": "b", "roles": [learner], "status": status or "Active"},
               {"user_id": "t", "roles": [learner]}]
    change = plan(COURSE, course, members, settings_, data)
    assert change.left == {} and change.joined == {} and change.roles == {}
    assert list(change.also) == [PREFIX + "a"]
    assert any(line.startswith(f"  still a student {PREFIX}a: ") for line in change.lines())
    assert "is this course's instructor here and the LMS now lists them as a Learner only" in change.unnamed["t"]


@pytest.mark.parametrize("kept", [5003, "5003"])
@pytest.mark.parametrize("sent", [5003, "5003", 5003.0])
def test_user_ids_are_compared_and_kept_as_strings_whatever_json_type_the_platform_sends(kept, sent):
    """The issue's Active Learner 5003: the hub kept their id as a number (as a sync before this one did) or as a
    string, and the platform sends it as a JSON number, a string or 5003.0. Listed as an Active Learner they stay
    (no leaver, no joiner); listed as an Instructor they are a role change; a joiner sent as a number is kept as
    the string "5004". Cost: well under a second (in this process, no platform)."""
    from coursekit.lms.roster import plan, user_id
    settings = {"username_claim": "sub", "username_prefix": PREFIX, "configured": []}
    course = {"students": {PREFIX + "5003": kept, PREFIX + "a": "a"}, "instructors": []}
    stays = plan(COURSE, course, [{"user_id": sent, "roles": ["Learner"], "status": "Active"},
                                  {"user_id": "a", "roles": ["Learner"]}], settings)
    assert (stays.left, stays.joined, stays.roles, stays.unnamed) == ({}, {}, {}, {})
    teaches = plan(COURSE, course, [{"user_id": sent, "roles": ["Instructor"]}, {"user_id": "a", "roles": ["Learner"]}],
                   settings)
    assert list(teaches.roles) == list(teaches.left) == [PREFIX + "5003"]
    joins = plan(COURSE, course, [{"user_id": sent, "roles": ["Learner"]}, {"user_id": "a", "roles": ["Learner"]},
                                  {"user_id": 5004, "roles": ["Learner"]}], settings)
    assert list(joins.joined) == [PREFIX + "5004"] and joins.joined[PREFIX + "5004"]["user_id"] == "5004"
    assert [user_id(v) for v in (5003, "5003", 5003.0, 5003.5, True, "", None, [5003])] == [
        "5003", "5003", "5003", None, None, None, None, None]


def test_a_student_one_list_took_out_is_back_with_the_next_as_the_same_lms_user():
    """A short list took ltir-5003 out of the course (the hub keeps the user, whose sub is 5003); the next full
    list has them as an Active Learner, their id sent as a number: they are back (joined, said as back), not
    "already someone else's here". A different LMS user whose id gives the same Unix name is still refused.
    Cost: well under a second (in this process)."""
    from coursekit.lms.roster import plan
    settings = {"username_claim": "sub", "username_prefix": PREFIX, "configured": []}
    course = {"students": {PREFIX + "a": "a"}, "instructors": []}
    data = {"users": {PREFIX + "5003": {"sub": "5003"}, PREFIX + "a": {"sub": "a"}}, "made": [PREFIX + "5003"]}
    members = [{"user_id": 5003, "roles": ["Learner"], "name": "Five"}, {"user_id": "a", "roles": ["Learner"]}]
    change = plan(COURSE, course, members, settings, data)
    assert list(change.joined) == change.back == [PREFIX + "5003"] and not change.unnamed and not change.left
    assert change.joined[PREFIX + "5003"]["user_id"] == "5003"
    assert f"  back {PREFIX}5003 (Five)" in change.lines()
    data["users"][PREFIX + "5003"] = {"sub": "someone-else"}
    other = plan(COURSE, course, members, settings, data)
    assert not other.joined and other.unnamed == {"5003": f"{PREFIX}5003 is already someone else's here"}


LEARNERS = [f"l{i}" for i in range(8)]  # with ada, bob, cy, dee: a class of twelve from the LMS


def test_a_list_takes_a_student_out_only_as_the_lms_differences_say_once_the_platform_sends_them(lms):
    """NRPS 2.0 section 2.4.3: the platform sends each list with a ``rel="differences"`` link (the changes since
    that list); the hub keeps it and reads it at the next sync. Since then bob's enrolment was deleted, and the new
    list, read in full, also lacks ada by the platform's slip. In a class of twelve, the list alone would take ada
    out with bob (a student merely missing from a list of ten or more leaves); with the differences, bob, whom they
    give as Deleted, leaves (in a class of three too, where missing alone takes nobody out), and ada, whom they do
    not have leaving, is kept and named. Differences the platform refuses take nobody out for missing. A
    differences link on another site than the list's is never followed. Cost: well under a second (in this
    process, the platform over HTTP)."""
    from coursekit.lms.roster import plan, read_differences
    platform, credentials = lms
    for sub in LEARNERS:
        platform.add_user(sub, sub.upper(), "Lms")
        platform.enroll(sub, CONTEXT, "Learner")
    platform.differences = True
    url = platform.memberships_url(CONTEXT)
    before = read_members(url, credentials)
    assert before.differences.startswith(url + "?since=")
    kept = {"list": url, "url": before.differences}  # what the hub's state keeps with the list
    platform.unenroll("bob", CONTEXT)
    platform.list_leaves_out = {"ada"}
    now = read_members(url, credentials)
    assert {m["user_id"] for m in now} == set(NOW) - {"ada", "bob"} | set(LEARNERS)
    marks, unsure = read_differences(kept, url, credentials)
    assert [(m["user_id"], m["status"]) for m in marks] == [("bob", "Deleted")]
    settings = {"username_claim": "sub", "username_prefix": PREFIX, "configured": []}
    big = {"students": {PREFIX + s: s for s in ["ada", "bob", "cy", "dee"] + LEARNERS}, "instructors": []}
    alone = plan(COURSE, big, now, settings)  # a platform without differences: the slip takes ada out
    assert sorted(alone.left) == [PREFIX + "ada", PREFIX + "bob"]
    change = plan(COURSE, big, now, settings, marks=marks, unsure=unsure)
    assert change.left == {PREFIX + "bob": "Deleted in the LMS course (the LMS's changes since its last list)"}
    assert change.kept == {PREFIX + "ada": "not in the LMS's list, but the LMS's changes since its last list (its "
                                           "differences link) do not have them leaving"}
    assert f"  kept {PREFIX}ada: not in the LMS's list, but the LMS's changes" in "\n".join(change.lines())
    small = {"students": {PREFIX + s: s for s in ("ada", "bob", "cy")}, "instructors": []}
    assert list(plan(COURSE, small, now, settings, marks=marks, unsure=unsure).left) == [PREFIX + "bob"]
    platform.refuse_differences = 500
    marks, unsure = read_differences(kept, url, credentials)
    refused = plan(COURSE, big, now, settings, marks=marks, unsure=unsure)
    assert not refused.left and sorted(refused.kept) == [PREFIX + "ada", PREFIX + "bob"]
    assert "could not be read (500: the platform refused the class list (HTTP 500: refused))" in \
        refused.kept[PREFIX + "bob"]
    assert read_differences({"list": "http://elsewhere/list", "url": before.differences}, url, credentials) == \
        ((), None)  # kept for another class list (a new term's context): not this list's


def test_a_differences_link_is_read_from_any_of_the_link_headers_and_only_on_the_lists_own_site(monkeypatch):
    """The ``rel`` of a link is a list of types, in one ``Link`` header or several; a differences link to another
    site than the class list's is not kept (the hub's token would go with it). Cost: milliseconds."""
    import email.message
    from coursekit.lms import roster
    pages = {"https://lms.example/m": '<https://lms.example/m?p=2>; rel="next last", '
                                      '<https://evil.example/d?since=1>; rel="differences"',
             "https://lms.example/m?p=2": ['<https://lms.example/m?since=7>; rel=differences']}

    def answer(method, url, **kwargs):
        headers = email.message.Message()
        for value in [pages[url]] if isinstance(pages[url], str) else pages[url]:
            headers["Link"] = value
        return 200, headers, json.dumps({"members": [{"user_id": url[-1], "roles": ["Learner"]}]}).encode()
    monkeypatch.setattr(roster, "access_token", lambda *a, **k: "token")
    monkeypatch.setattr(roster, "http_request", answer)
    members = roster.read_members("https://lms.example/m", None)
    assert [m["user_id"] for m in members] == ["m", "2"]
    assert members.differences == "https://lms.example/m?since=7"  # the foreign one passed over
