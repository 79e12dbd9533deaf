"""Grades to the LMS by Assignment and Grade Services (coursekit/lms/ags.py) against the LTI 1.3 test platform over HTTP
on 127.0.0.1: the tool's signed client assertion buys an access token, the assignment's line item is found or
created, each student's score is posted once and what the platform records equals the gradebook; a student whose
score the platform refuses (401, 404, 422) is named and the others are still posted; every post is in the log.
Scores go with the time each student submitted (AGS timestamp and Canvas's submission extension), so that a
platform that marks late the way Canvas does marks late only who submitted after the due date, though the scores
are posted after it; an assignment made in the LMS keeps its own column (the launch's ``lineitem``), a column that
only shares the assignment's label is never written and is named, and the hub's grading service posts to it
(coursekit.lms.posting.post_for_instructor, in this process).

The class is a real nbgrader gradebook (tests/gradebooks.py), read with the exporter's reader. Cost: about 6 s
(RSA keys, a platform per test).
"""
import json
import os
from datetime import datetime, timedelta, timezone

import pytest
from gradebooks import build_gradebook
from hypothesis import given, settings, strategies as st
from lti_platform import ASSERTION_TYPE, AGS_SCOPES, CANVAS_SUBMISSION, LtiPlatform

from coursekit.lms.ags import (AgsClient, AgsError, ToolCredentials, access_token, generate_key, load_key,
                               post_assignment, scores_url)
from coursekit.lms.export import read_grades
from coursekit.pipeline import gradebook

A = "03_softmax"
CELLS = {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2.5}}
STUDENTS = {  # id: (first, last, email, lms_user_id = the sub of their launches)
    "ada": ("Ada", "Lovelace", "ada@uni.example", "sub-ada"),
    "bob": ("Bob", "Jones", "bob@uni.example", "sub-bob"),
    "cy": ("Cy", "Young", "cy@uni.example", "sub-cy"),
    "dee": ("Dee", "Ng", "dee@uni.example", "sub-dee"),
    "eve": ("Eve", "Moss", "eve@uni.example", "sub-eve"),   # did not submit
    "fay": ("Fay", "Roe", "fay@uni.example", ""),           # submitted, never launched from the LMS
}
SCORES = {"ada": {A: {"softmax_basic": 2, "softmax_edge": 1, "log_softmax_basic": 2.5}},
          "bob": {A: {"softmax_basic": 1, "softmax_edge": 0, "log_softmax_basic": 1.5}},
          "cy": {A: {"softmax_basic": 0, "softmax_edge": 1, "log_softmax_basic": 0}},
          "dee": {A: {"softmax_basic": 2, "softmax_edge": 0, "log_softmax_basic": 0}},
          "fay": {A: {"softmax_basic": 1, "softmax_edge": 1, "log_softmax_basic": 1}}}
LATE = {("dee", A): 0.5}
MAX = 5.5
NOW = datetime.now(timezone.utc).replace(microsecond=0)
DUE = NOW - timedelta(days=1)  # the assignment was due yesterday: every score is posted after the due date
SUBMITTED = {(s, A): (DUE + timedelta(hours=3) if s == "dee" else DUE - timedelta(hours=5)).replace(tzinfo=None)
             for s in SCORES}  # nbgrader's times: UTC without the zone; dee submitted after the due date


def points(student):
    """The gradebook's points of ``student`` on A, less their late penalty; 0 with no submission (nbgrader's rule)."""
    if student not in SCORES:
        return 0.0
    return max(0.0, sum(SCORES[student][A].values()) - LATE.get((student, A), 0.0))


@pytest.fixture(scope="module")
def grades(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("ags-course"))
    build_gradebook(root, CELLS, STUDENTS, SCORES, LATE, submitted=SUBMITTED)
    with gradebook(root) as gb:
        return read_grades(gb, [A])


@pytest.fixture
def tool_key(tmp_path):
    path = tmp_path / "tool-key.pem"
    jwk = generate_key(str(path))
    return load_key(str(path)), jwk, path


@pytest.fixture
def lms(tool_key):
    """A platform with the course's context, every student with an LMS id enrolled as a learner, and the tool
    registered with its public key."""
    _, jwk, _ = tool_key
    with LtiPlatform() as platform:
        platform.add_context("course-1", "ENC101")
        for sid, (first, last, email, sub) in STUDENTS.items():
            if sub:
                platform.add_user(sub, first, last, email)
                platform.enroll(sub, "course-1", "Learner")
        platform.register_tool("http://127.0.0.1:9/login", ["http://127.0.0.1:9/callback"], public_jwks=jwk)
        yield platform


def credentials(lms, tool_key):
    key, jwk, _ = tool_key
    return ToolCredentials(lms.client_id, key, lms.token_url, kid=jwk["kid"])


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def test_the_key_file_is_the_tools_alone(tool_key):
    _, jwk, path = tool_key
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert jwk["kty"] == "RSA" and jwk["alg"] == "RS256" and jwk["kid"] and "d" not in jwk  # public half only


def test_the_signed_assertion_buys_a_token_with_the_scopes_asked(lms, tool_key):
    """The client credentials grant with the tool's signed JWT (iss = sub = client id, aud = the token URL, a fresh
    jti): the platform verifies it with the registered public key and grants the AGS scopes asked for; an assertion
    signed by a key the platform does not know buys nothing."""
    creds = credentials(lms, tool_key)
    assert access_token(creds, AGS_SCOPES)
    assert access_token(creds, AGS_SCOPES)  # each assertion has its own jti, so asking again works
    stranger = ToolCredentials(lms.client_id, load_key(_other_key_pem()), lms.token_url)
    with pytest.raises(AgsError) as refused:
        access_token(stranger, AGS_SCOPES)
    assert refused.value.status == 401 and "refused the tool an access token" in str(refused.value)
    assert [r["status"] for r in lms.refused if r["path"] == "/token"] == [401]


def test_an_assertion_is_good_once(lms, tool_key):
    """The platform keeps the jti of each assertion: the same assertion sent twice is refused the second time."""
    import requests
    creds = credentials(lms, tool_key)
    form = {"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": creds.assertion(), "scope": " ".join(AGS_SCOPES)}
    assert requests.post(lms.token_url, data=form, timeout=10).status_code == 200
    assert requests.post(lms.token_url, data=form, timeout=10).status_code == 401


def test_each_score_is_posted_once_and_the_platform_records_the_gradebooks(lms, tool_key, grades, tmp_path):
    """One assignment to the LMS: a line item labelled like it, out of its maximum, with it as resourceId; one score
    per student (Completed, FullyGraded, a timestamp, their LMS user id) equal to the gradebook's points, the student
    with no submission 0 as in the export files (one rule), posted as a grade and never as a submission; the one
    with no LMS user id is named as failed; every step is a line of the log."""
    log = tmp_path / "ags.jsonl"
    result = post_assignment(grades, A, lms.lineitems_url("course-1"), credentials(lms, tool_key), str(log))
    assert result.created
    assert lms.line_items("course-1") == [{"label": A, "scoreMaximum": MAX, "resourceId": A,
                                           "id": result.lineitem}]
    posted = {s: p for s, p in STUDENTS.items() if p[3]}  # everyone with an LMS user id
    assert "eve" in posted and "eve" not in SCORES and points("eve") == 0
    assert lms.recorded("course-1", A) == {STUDENTS[s][3]: (points(s), MAX) for s in posted}
    eve = next(score for score in lms.scores if score["userId"] == STUDENTS["eve"][3])
    assert eve["scoreGiven"] == 0 and eve[CANVAS_SUBMISSION] == {"new_submission": False}  # no attempt made
    assert sorted(score["userId"] for score in lms.scores) == sorted(STUDENTS[s][3] for s in posted)  # once each
    for score in lms.scores:
        assert (score["activityProgress"], score["gradingProgress"]) == ("Completed", "FullyGraded")
        assert datetime.fromisoformat(score["timestamp"]).tzinfo is not None
        assert score["scoreMaximum"] == MAX
    assert result.posted == {s: points(s) for s in posted}
    assert result.posted["dee"] == 1.5  # 2, less the late penalty of 0.5
    assert result.not_posted == {"eve": "no submission: 0"}
    assert list(result.failed) == ["fay"] and "no LMS user id" in result.failed["fay"]
    assert not result.ok
    lines = read_log(log)
    assert lines[0]["event"] == "lineitem" and lines[0]["created"] is True and lines[0]["lineitem"] == result.lineitem
    scores = {line["student"]: line for line in lines[1:]}
    assert set(scores) == set(posted) and all(line["status"] == 204 and line["ok"] for line in scores.values())
    assert {s: line["scoreGiven"] for s, line in scores.items()} == {s: points(s) for s in posted}
    assert os.stat(log).st_mode & 0o777 == 0o600
    text = "\n".join(result.lines())
    assert "5 scores posted" in text and "FAILED fay" in text and "no submission eve: 0 posted" in text


def test_a_second_run_finds_the_line_item_and_posts_only_the_scores_that_changed(lms, tool_key, grades, tmp_path):
    """Run again, the line item is found by its resourceId (not created twice) and the LMS's results (AGS's result
    service) say it holds every score already: nothing is posted. A regrade of bob's posts his new score alone,
    which replaces the old, as no new attempt; with the log lost (a fresh hub state) a regrade of cy's is no new
    attempt either, where the log alone would have made one. The records a post hands back (what the hub's service
    returns to `course return --lms`) are its own, not the log's earlier lines."""
    import copy
    creds, url = credentials(lms, tool_key), lms.lineitems_url("course-1")
    lms.moodle_timestamps = True  # a score not later than the one on record is refused (409), as Moodle does
    first = post_assignment(grades, A, url, creds, str(tmp_path / "log"))
    written = []
    again = post_assignment(grades, A, url, creds, str(tmp_path / "log"), written=written)
    assert first.created and not again.created and again.lineitem == first.lineitem
    assert len(lms.line_items("course-1")) == 1
    assert again.posted == {} and again.unchanged == first.posted and again.failed == first.failed
    assert len(lms.scores) == len(first.posted)
    assert again.lines()[0].startswith(f"{A}: 0 scores posted to the LMS, {len(first.posted)} it holds already")
    assert len(read_log(tmp_path / "log")) == 1 + len(first.posted) + 1
    assert written == read_log(tmp_path / "log")[1 + len(first.posted):]
    regraded = copy.deepcopy(grades)
    regraded.points[("bob", A)] = 4.0
    bob = post_assignment(regraded, A, url, creds, str(tmp_path / "log"))
    assert bob.posted == {"bob": 4.0} and lms.scores[-1][CANVAS_SUBMISSION]["new_submission"] is False
    regraded.points[("cy", A)] = 2.0
    cy = post_assignment(regraded, A, url, creds, str(tmp_path / "fresh-log"))  # the hub's state lost
    assert cy.posted == {"cy": 2.0} and lms.scores[-1][CANVAS_SUBMISSION]["new_submission"] is False
    results = lms.contexts["course-1"]["results"][first.lineitem]
    assert {u: r["scoreGiven"] for u, r in results.items()} == {
        STUDENTS[s][3]: {"bob": 4.0, "cy": 2.0}.get(s, points(s)) for s in first.posted}
    assert {u: r.get("attempts", 0) for u, r in results.items()} == {  # eve, who submitted nothing: no attempt
        STUDENTS[s][3]: 0 if s == "eve" else 1 for s in first.posted}


@pytest.mark.parametrize("status", [401, 404, 422])
def test_a_refused_score_names_the_student_and_the_rest_are_posted(lms, tool_key, grades, tmp_path, status):
    """The platform refuses bob's score (401, 404 or 422): bob is named with the status, the log says so, and
    every other score is posted and recorded."""
    lms.refuse_scores("sub-bob", status)
    log = tmp_path / "ags.jsonl"
    result = post_assignment(grades, A, lms.lineitems_url("course-1"), credentials(lms, tool_key), str(log))
    assert set(result.failed) == {"bob", "fay"} and result.failed["bob"].startswith(f"HTTP {status}")
    assert set(result.posted) == {"ada", "cy", "dee", "eve"}
    recorded = lms.recorded("course-1", A)
    assert "sub-bob" not in recorded and recorded == {STUDENTS[s][3]: (points(s), MAX)
                                                      for s in ("ada", "cy", "dee", "eve")}
    bob = [line for line in read_log(log) if line.get("student") == "bob"]
    assert len(bob) == 1 and bob[0]["status"] == status and bob[0]["ok"] is False and bob[0]["error"]
    assert "FAILED bob: HTTP " + str(status) in "\n".join(result.lines())
    tries = [r for r in lms.refused if r.get("userId") == "sub-bob"]
    assert len(tries) == (2 if status == 401 else 1)  # a 401 is tried once more with a fresh token


def test_a_platform_that_refuses_the_tool_posts_nothing(lms, grades, tmp_path):
    """A tool key the platform does not know: no token, so no line item and no score; the error says the platform
    refused the token, and the log records it."""
    stranger = ToolCredentials(lms.client_id, load_key(_other_key_pem()), lms.token_url)
    with pytest.raises(AgsError) as refused:
        post_assignment(grades, A, lms.lineitems_url("course-1"), stranger, str(tmp_path / "log"))
    assert refused.value.status == 401
    assert lms.line_items("course-1") == [] and lms.scores == []
    assert read_log(tmp_path / "log")[0]["status"] == 401


def test_the_line_item_service_filters_and_needs_its_scope(lms, tool_key):
    """The client lists line items by resource_id as AGS defines the filter, and the scores URL keeps the line
    item's query (AGS 2.0: /scores after the path)."""
    client = AgsClient(lms.lineitems_url("course-1"), credentials(lms, tool_key))
    item, created = client.find_or_create_line_item("05_rnn", 38)
    other, _ = client.find_or_create_line_item("06_encoder", 31)
    assert created and client.line_items(resource_id="05_rnn") == [item]
    assert {i["resourceId"] for i in client.line_items()} == {"05_rnn", "06_encoder"} and other != item
    assert scores_url("https://lms.example/li/7?type_id=3") == "https://lms.example/li/7/scores?type_id=3"


def _other_key_pem():
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def iso(naive_utc):
    return naive_utc.replace(tzinfo=timezone.utc).isoformat(timespec="milliseconds")


def test_scores_carry_the_submission_time_and_only_the_late_submitter_is_marked_late(lms, tool_key, grades, tmp_path):
    """The assignment was due yesterday and the scores are posted now: Canvas's submitted_at is the time the student
    submitted (nbgrader's), a new submission, and the score's timestamp the time of posting (AGS: when the tool
    changed it), so the platform, which marks late as Canvas does, marks dee (submitted 3 h after the due date) late
    and nobody else. A score posted without the extension, as before, is dated at posting and marked late although
    ada submitted on time: the rule the test platform copies."""
    item = lms.add_assignment("course-1", "link-a", A, MAX, due=DUE.timestamp())
    before = datetime.now(timezone.utc)
    result = post_assignment(grades, A, lms.lineitems_url("course-1"), credentials(lms, tool_key), str(tmp_path / "l"),
                             lineitem_urls=[item["id"]])
    after = datetime.now(timezone.utc)
    posted = {score["userId"]: score for score in lms.scores}
    for sid in result.posted:
        sub = STUDENTS[sid][3]
        assert posted[sub][CANVAS_SUBMISSION] == ({"submitted_at": iso(SUBMITTED[(sid, A)]), "new_submission": True}
                                                  if (sid, A) in SUBMITTED else {"new_submission": False})
        assert before - timedelta(seconds=1) <= datetime.fromisoformat(posted[sub]["timestamp"]) <= after
    assert lms.late("course-1", A) == {STUDENTS[s][3]: s == "dee" for s in result.posted if s != "eve"}
    assert set(result.posted) == {"ada", "bob", "cy", "dee", "eve"}  # eve submitted nothing: a 0, no submission
    client = AgsClient(lms.lineitems_url("course-1"), credentials(lms, tool_key))
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    assert client.post_score(item["id"], "sub-ada", 5.5, MAX, now) == (204, None)  # no extension: dated now
    assert lms.late("course-1", A)["sub-ada"] is True


def test_a_submission_time_in_the_future_is_refused_as_canvas_refuses_it(lms, tool_key):
    """Canvas refuses a submitted_at over a minute ahead of its clock (400): the platform does too, and the client
    names the answer."""
    item = lms.add_assignment("course-1", "link-a", A, MAX)
    client = AgsClient(lms.lineitems_url("course-1"), credentials(lms, tool_key))
    later = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat(timespec="milliseconds")
    status, why = client.post_score(item["id"], "sub-ada", 1, MAX, later, submitted_at=later)
    assert status == 400 and "in the future" in why


def test_the_lms_assignments_own_line_item_is_used_and_none_is_created(lms, tool_key, grades, tmp_path):
    """An assignment made in the LMS (its line item labelled with its title, tied to its link, no resourceId): with
    the line item a launch from its link brought, the scores go there and none is created, again on a second run;
    a line item is created only for an assignment the LMS has none of."""
    creds, url = credentials(lms, tool_key), lms.lineitems_url("course-1")
    item = lms.add_assignment("course-1", "link-a", A, 10)
    by_claim = post_assignment(grades, A, url, creds, str(tmp_path / "log"), lineitem_urls=[item["id"]])
    again = post_assignment(grades, A, url, creds, str(tmp_path / "log"), lineitem_urls=[item["id"]])
    assert (by_claim.lineitem, by_claim.created) == (again.lineitem, again.created) == (item["id"], False)
    assert by_claim.passed_over == again.passed_over == []
    assert lms.line_items("course-1") == [item]
    assert lms.recorded("course-1", A) == {STUDENTS[s][3]: (points(s), MAX) for s in by_claim.posted}
    other = read_grades_for("05_rnn")
    made = post_assignment(other, "05_rnn", url, creds, str(tmp_path / "log"))
    assert made.created and [i["label"] for i in lms.line_items("course-1")] == [A, "05_rnn"]


@pytest.mark.parametrize("resource_id", ["03_softmax-2023", None])
def test_a_column_that_only_shares_the_label_is_never_written_and_is_named(lms, tool_key, grades, tmp_path,
                                                                           resource_id):
    """The issue's column: a line item labelled 03_softmax, out of 100, whose resourceId is another's
    (03_softmax-2023, last year's) or that has none (made by hand, or another link's, with no launch bringing it
    here). Three runs of the post: the first creates the assignment's own line item (resourceId 03_softmax) and
    says it passed the other over (printed and in the log), the next two find their own by resourceId; the other
    column holds no score and keeps its maximum. Cost: about 2 s."""
    creds, url = credentials(lms, tool_key), lms.lineitems_url("course-1")
    foreign = {"label": A, "scoreMaximum": 100, **({"resourceId": resource_id} if resource_id else {})}
    foreign = lms._create_lineitem("course-1", foreign)
    log = tmp_path / "log"
    runs = [post_assignment(grades, A, url, creds, str(log)) for _ in range(3)]
    assert [r.created for r in runs] == [True, False, False]
    own = runs[0].lineitem
    assert own != foreign["id"] and {r.lineitem for r in runs} == {own}
    assert lms.line_items("course-1") == [foreign, {"label": A, "scoreMaximum": MAX, "resourceId": A, "id": own}]
    results = lms.contexts["course-1"]["results"]  # {line item: {userId: score}}: the platform's gradebook
    assert results.get(foreign["id"], {}) == {}
    assert {u: r["scoreGiven"] for u, r in results[own].items()} == {STUDENTS[s][3]: points(s)
                                                                     for s in runs[0].posted}
    assert runs[1].posted == runs[2].posted == {} and runs[1].unchanged == runs[0].posted  # held already
    assert [[i["id"] for i in r.passed_over] for r in runs] == [[foreign["id"]], [], []]
    assert (f"  not written: line item {foreign['id']} is labelled {A} but is not this course's column for it "
            f"(resourceId {resource_id!r}, not the launch's line item)") in runs[0].lines()
    passed = [rec for rec in read_log(log) if rec["event"] == "lineitem passed over"]
    assert [(rec["lineitem"], rec.get("resourceId")) for rec in passed] == [(foreign["id"], resource_id)]
    assert not [rec for rec in read_log(log) if rec.get("lineitem") == foreign["id"] and rec["event"] == "score"]


def read_grades_for(assignment):
    from coursekit.lms.export import ClassGrades, Student
    return ClassGrades([(assignment, 4.0)], [Student("ada", lms_user_id="sub-ada")], {("ada", assignment): 3.0})


def test_the_hub_service_posts_to_the_column_a_launch_brought(lms, tool_key, tmp_path):
    """The hub's side, in this process: ada's and dee's launches from the LMS assignment's link (the platform's own
    id_tokens, whose signatures ltiauthenticator checks in test_hub_lti.py) pass the hub's checks and leave the
    link's line item in the hub's state with the assignment its custom parameter names (coursekit.hub.lti.check_launch
    and record_launch); then posting.post_for_instructor, as
    the grading service calls it for an instructor, posts the assignment of that title there, each score with its
    submission time, and creates no line item. A submission time that is no ISO 8601 time is refused (400)."""
    import jwt

    from coursekit.hub.lti import check_launch, record_launch
    from coursekit.hub.state import HubState
    from coursekit.lms.posting import Refusal, post_for_instructor
    _, _, key_path = tool_key
    item = lms.add_assignment("course-1", "link-a", A, MAX, due=DUE.timestamp(), custom={"assignment": A})
    state = str(tmp_path / "state")
    os.makedirs(state)
    with HubState(state).change() as data:
        data["courses"]["enc"] = {"folder": "/srv/enc", "context_id": "course-1", "instructors": [], "students": {},
                                  "lineitems": None, "links": {}}
    settings = {"deployment_ids": [lms.deployment_id], "username_claim": "sub", "username_prefix": "ltiags-",
                "configured": [], "state": state}
    for sub in ("sub-ada", "sub-dee"):
        token = lms.id_token({"variant": None, "sub": sub, "context": "course-1", "link": "link-a", "title": "?",
                              "target": "http://127.0.0.1:9/hub/"}, nonce="n")
        record_launch(settings, check_launch(settings, HubState(state).read(), jwt.decode(
            token, options={"verify_signature": False})))
    course = HubState(state).read()["courses"]["enc"]
    assert course["links"] == {"link-a": {"title": A, "lineitem": item["id"], "assignment": A}}
    assert course["students"] == {"ltiags-sub-ada": "sub-ada", "ltiags-sub-dee": "sub-dee"}
    config = {"hub_state": state, "lti": {"client_id": lms.client_id, "tool_key": str(key_path),
                                          "token_url": lms.token_url}}
    ada, dee = "ltiags-sub-ada", "ltiags-sub-dee"
    body = {"assignment": A, "maximum": MAX, "students": [ada, dee], "scores": {ada: 5.5, dee: 1.5},
            "submitted_at": {ada: iso(SUBMITTED[("ada", A)]), dee: iso(SUBMITTED[("dee", A)])}}
    answer = post_for_instructor(config, "/srv/enc", body)
    assert (answer["lineitem"], answer["created"], answer["posted"]) == (item["id"], False, {ada: 5.5, dee: 1.5})
    assert lms.late("course-1", A) == {"sub-ada": False, "sub-dee": True}
    assert len(lms.line_items("course-1")) == 1
    with pytest.raises(Refusal) as refused:
        post_for_instructor(config, "/srv/enc", dict(body, submitted_at={ada: "yesterday"}))
    assert refused.value.status == 400 and "each submission's time in ISO 8601" in refused.value.message


@pytest.mark.parametrize("refused", [False, True])
def test_extra_credit_is_posted_and_a_platform_that_refuses_it_fails_that_student_alone(lms, tool_key, tmp_path,
                                                                                        refused):
    """nbgrader's extra credit gives a score above the assignment's maximum. The grading service takes it (AGS
    allows a scoreGiven above the scoreMaximum) and posts it; a platform that refuses it (a gradebook without extra
    credit) fails that student alone, named with its answer, and the others are posted. Cost: about 1 s."""
    from coursekit.hub.state import HubState
    from coursekit.lms.posting import post_for_instructor
    _, _, key_path = tool_key
    lms.refuse_above_maximum = refused
    state = str(tmp_path / "state")
    os.makedirs(state)
    with HubState(state).change() as data:
        data["courses"]["enc"] = {"folder": "/srv/enc", "context_id": "course-1", "instructors": [], "links": {},
                                  "students": {"ada": "sub-ada", "bob": "sub-bob"},
                                  "lineitems": lms.lineitems_url("course-1")}
    config = {"hub_state": state, "lti": {"client_id": lms.client_id, "tool_key": str(key_path),
                                          "token_url": lms.token_url}}
    answer = post_for_instructor(config, "/srv/enc", {"assignment": A, "maximum": MAX, "students": ["ada", "bob"],
                                                      "scores": {"ada": MAX + 1, "bob": 2.5}})
    if refused:
        assert answer["posted"] == {"bob": 2.5}
        assert answer["failed"] == {"ada": "HTTP 400: scoreGiven is above scoreMaximum"}
    else:
        assert answer["posted"] == {"ada": MAX + 1, "bob": 2.5} and answer["failed"] == {}
        assert lms.recorded("course-1", A)["sub-ada"] == (MAX + 1, MAX)


def test_a_student_the_lms_no_longer_lists_is_named_and_the_others_are_posted(lms, tool_key, grades, tmp_path):
    """One rule for who gets a score: a student who submitted is posted their points; one who did not, 0 (as the
    export files give them); one the LMS no longer has in the course (cy, unenrolled since) is refused by the
    platform (422) and named, the others posted."""
    del lms.contexts["course-1"]["members"]["sub-cy"]
    result = post_assignment(grades, A, lms.lineitems_url("course-1"), credentials(lms, tool_key), str(tmp_path / "l"))
    assert result.failed["cy"] == "HTTP 422: sub-cy is not in the context"
    assert set(result.posted) == {"ada", "bob", "dee", "eve"} and result.not_posted == {"eve": "no submission: 0"}
    assert result.posted["eve"] == 0
    assert "sub-cy" not in lms.recorded("course-1", A)
    assert "  FAILED cy: HTTP 422: sub-cy is not in the context" in result.lines()


TITLES = st.text(max_size=40) | st.sampled_from([A, f"Homework 3: softmax ({A})", f"Homework 4: attention (builds on {A})",
                                                 f"{A}-2023", ""])
NAMED = st.sampled_from([A, "04_attention", "03_softmax-2023", None])


@given(st.lists(st.tuples(TITLES, NAMED, st.booleans()), min_size=1, max_size=6))
@settings(max_examples=100, deadline=None, database=None)
def test_a_links_line_item_is_the_assignment_its_launch_names_whatever_its_title_says(links):
    """Each resource link's line item is kept with the assignment its launch names (the link's custom parameter
    ``assignment``, or its target link URI's ``?assignment=``): generated links, titled anything (the assignment's
    name among other words, ``Homework 4: attention (builds on 03_softmax)``, a longer name, nothing), each made for
    an assignment or for none: 03_softmax's line items are exactly those of the links made for it, whatever their
    titles; a link of another context (last term's course) is never one. Cost: well under a second."""
    from coursekit.hub.lti_claims import LTI, link_assignment
    from coursekit.lms.posting import assignment_lineitems
    items = "https://canvas.example/api/lti/courses/7/line_items"
    course = {"lineitems": items, "links": {}}
    for n, (title, named, by_target) in enumerate(links):
        claims = {LTI + "resource_link": {"id": f"l{n}", "title": title},
                  LTI + "target_link_uri": "https://hub.example/hub/" + (f"?assignment={named}" if named and by_target
                                                                         else "")}
        if named and not by_target:
            claims[LTI + "custom"] = {"assignment": named, "canvas_user_id": "17"}
        course["links"][f"l{n}"] = {"title": title, "lineitem": f"{items}/{n}", "assignment": link_assignment(claims)}
    assert assignment_lineitems(course, A) == sorted(f"{items}/{n}" for n, (_, named, _) in enumerate(links)
                                                     if named == A)
    assert assignment_lineitems(dict(course, lineitems=items.replace("/7/", "/70/")), A) == []
    from coursekit.lms.posting import in_context  # Moodle's URLs: the line item's path under the context's
    moodle = "https://moodle.example/mod/lti/services.php/2/lineitems?type_id=1"
    assert in_context("https://moodle.example/mod/lti/services.php/2/lineitems/5/lineitem?type_id=1", moodle)
    assert not in_context("https://moodle.example/mod/lti/services.php/3/lineitems/5/lineitem?type_id=1", moodle)


def test_a_launchs_line_item_that_says_it_is_anothers_is_never_written(lms, tool_key, grades, tmp_path):
    """A line item a link brought is tried only for the assignment the link was made for, and even then not when the
    line item itself says it is another assignment's (its resourceId, which the tool wrote): it is passed over and
    named, and 03_softmax gets its own column. Cost: about 1 s."""
    creds, url = credentials(lms, tool_key), lms.lineitems_url("course-1")
    other = lms._create_lineitem("course-1", {"label": "Homework 4", "scoreMaximum": 20, "resourceId": "04_attention",
                                              "resourceLinkId": "link-4"})
    result = post_assignment(grades, A, url, creds, str(tmp_path / "log"), lineitem_urls=[other["id"]])
    assert result.created and result.lineitem != other["id"]
    assert [i["id"] for i in result.passed_over] == [other["id"]]
    assert lms.contexts["course-1"]["results"].get(other["id"], {}) == {}


def test_a_course_copy_gets_its_own_columns_and_last_terms_are_never_written(lms, tool_key, grades, tmp_path):
    """A new term's course copied from last term's (a new context): the copy carries last term's line item for the
    assignment (its resourceId 03_softmax and the tag the tool gave it there, last term's context) and the hub's
    state still holds last term's link to last term's column. Posting for the new context (the hub's service tags
    what it makes with the context) creates the course's own line item, names the copied one as passed over, and
    writes neither it nor last term's column; a second run finds its own. A line item the tool made before it
    tagged (resourceId 03_softmax, no tag), as this context's log shows, is still the assignment's. Cost: about
    1 s."""
    from coursekit.lms.posting import assignment_lineitems
    creds = credentials(lms, tool_key)
    last_term = lms._create_lineitem("course-1", {"label": A, "scoreMaximum": MAX, "resourceId": A,
                                                  "tag": "coursekit:course-1"})
    lms.add_context("course-2", "ENC101-next")
    for sid, (_, _, _, sub) in STUDENTS.items():
        if sub:
            lms.enroll(sub, "course-2", "Learner")
    copied = lms._create_lineitem("course-2", {k: v for k, v in last_term.items() if k != "id"})
    state = {"lineitems": lms.lineitems_url("course-2"),
             "links": {"last-term-link": {"title": A, "lineitem": last_term["id"]}}}
    known = assignment_lineitems(state, A)
    assert known == []  # last term's link is another context's: never used
    runs = [post_assignment(grades, A, lms.lineitems_url("course-2"), creds, str(tmp_path / "log"),
                            lineitem_urls=known, tag="coursekit:course-2") for _ in range(2)]
    assert [r.created for r in runs] == [True, False] and runs[0].lineitem == runs[1].lineitem
    assert runs[0].lineitem not in (copied["id"], last_term["id"])
    assert [i["id"] for i in runs[0].passed_over] == [copied["id"]]
    assert "tag 'coursekit:course-1'" in "\n".join(runs[0].lines())
    results = lms.contexts["course-2"]["results"]
    assert results.get(copied["id"], {}) == {} and lms.contexts["course-1"]["results"].get(last_term["id"]) is None
    assert set(results[runs[0].lineitem]) == {STUDENTS[s][3] for s in runs[0].posted}
    lms.add_context("course-3", "ENC101-legacy")
    legacy = lms._create_lineitem("course-3", {"label": A, "scoreMaximum": MAX, "resourceId": A})
    client = AgsClient(lms.lineitems_url("course-3"), creds)
    found, created = client.find_or_create_line_item(A, MAX, tag="coursekit:course-3", ours={legacy["id"]})
    assert (found["id"], created) == (legacy["id"], False)  # the tool made it (this context's log), before tagging


def test_an_untagged_copied_line_item_is_last_terms_unless_this_contexts_log_shows_the_tool_wrote_it(
        lms, tool_key, grades, tmp_path):
    """A course copy of last term's course made with a tool version that set no tag: the copied line item has
    resourceId 03_softmax and no tag. Nothing of this context's log names it, so it is last term's: passed over and
    named, and this term's scores go to a column of the course's own. A line item this context's log shows the tool
    made (or posted to) is still taken untagged. Cost: about 1 s."""
    creds = credentials(lms, tool_key)
    lms.add_context("course-4", "ENC101-copy")
    for _, (_, _, _, sub) in STUDENTS.items():
        if sub:
            lms.enroll(sub, "course-4", "Learner")
    copied = lms._create_lineitem("course-4", {"label": A, "scoreMaximum": MAX, "resourceId": A})
    log = str(tmp_path / "log")
    runs = [post_assignment(grades, A, lms.lineitems_url("course-4"), creds, log, tag="coursekit:course-4")
            for _ in range(2)]
    assert [r.created for r in runs] == [True, False] and runs[0].lineitem == runs[1].lineitem != copied["id"]
    assert [i["id"] for i in runs[0].passed_over] == [copied["id"]]
    assert lms.contexts["course-4"]["results"].get(copied["id"], {}) == {}
    with open(log, "a") as f:  # the log of a tool version that made it without a tag, in this context
        f.write(json.dumps({"event": "lineitem", "assignment": A, "lineitem": copied["id"], "created": True}) + "\n")
    lms.contexts["course-4"]["lineitems"] = [i for i in lms.line_items("course-4") if i["id"] == copied["id"]]
    again = post_assignment(grades, A, lms.lineitems_url("course-4"), creds, log, tag="coursekit:course-4")
    assert (again.lineitem, again.created) == (copied["id"], False)


@given(st.lists(st.tuples(st.integers(min_value=1, max_value=10 ** 12), st.booleans(), st.sampled_from([1, 2.5, 16])),
                min_size=1, max_size=6, unique_by=lambda t: t[0]))
@settings(max_examples=50, deadline=None, database=None)
def test_results_whose_user_ids_are_json_numbers_are_read_as_their_strings(held):
    """An older Canvas sends a result's ``userId`` as a JSON number: each is read as its digits, the string the hub
    keeps and posts to, so a score the LMS holds already is not posted again (and a re-post after a lost log is no
    new attempt). Generated ids, as numbers or strings. Cost: well under a second (no platform: the answer is
    given to the client in this process)."""
    import email.message

    from coursekit.lms import ags
    page = [{"userId": uid if as_number else str(uid), "resultScore": score, "resultMaximum": 16}
            for uid, as_number, score in held]
    original = ags.http_request, ags.access_token
    ags.http_request = lambda method, url, **kwargs: (200, email.message.Message(), json.dumps(page).encode())
    ags.access_token = lambda *a, **k: "token"
    try:
        read = AgsClient("https://lms.example/items", None).results("https://lms.example/items/1")
    finally:
        ags.http_request, ags.access_token = original
    assert read == {str(uid): score / 16 for uid, _, score in held}


def test_a_student_the_class_list_took_out_is_named_and_not_a_failure(tmp_path, monkeypatch):
    """A student the class list from the LMS took out of the course (lms/departed.json) who had submitted: `course
    return --lms` sends no score for them (the LMS has them no more), names them among those not posted, and exits
    0 when the others are posted; a real failure still exits 1. The hub's grading service is a small server here
    that answers as post_for_instructor does for a course whose students are ada and bob. Cost: about 1 s."""
    import http.server
    import threading

    from coursekit.hub.enrol import departed_here
    from coursekit.lms.return_grades import post_scores
    root = str(tmp_path / "course")
    os.makedirs(root)
    build_gradebook(root, CELLS, {s: STUDENTS[s] for s in ("ada", "bob", "cy")},
                    {s: SCORES[s] for s in ("ada", "bob", "cy")})
    departed_here(root, {"cy": "left the LMS course: no longer in the LMS course"}, [])
    asked, refuse = [], {}

    class Service(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(body)
            failed = {s: "no LMS user id" for s in body["scores"] if s not in ("ada", "bob")}
            failed.update({s: why for s, why in refuse.items() if s in body["scores"]})
            answer = json.dumps({"lineitem": "https://lms.example/items/1", "failed": failed, "log": [],
                                 "posted": {s: v for s, v in body["scores"].items() if s not in failed}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("COURSE_GRADING_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "t")
    try:
        said = []
        assert post_scores(root, A, out=said.append, err=said.append) == 0
        assert "cy" not in asked[0]["students"] and "cy" not in asked[0]["scores"]
        assert [line for line in said if "cy" in line] == [
            "  not posted cy: left the LMS course: no longer in the LMS course; the LMS no longer has them in the "
            "course (enter their grade there by hand if it is still wanted)"]
        refuse["bob"] = "HTTP 422"
        assert post_scores(root, A, out=said.append, err=said.append) == 1
    finally:
        server.shutdown()
