"""``course return A --lms``: after the feedback, each student's score for A posted to the LMS (Assignment and Grade
Services, ``coursekit.lms.ags.post_assignment``), through the hub's grading service.

The tool's private key, which signs its requests to the platform, is root's alone on the hub (``tool_key`` of the
LTI file) and never reaches an instructor: the instructor's ``course return`` (a plain user, in a terminal of their
JupyterLab on the hub) reads the assignment's scores from the course's gradebook and sends them to the grading
service (``coursekit.hub.service``, root), which already checks that the JupyterHub token of the instructor's server
is an instructor's of this course. The service posts them with the key and the platform's token URL of the LTI file,
to the line items URL that the course's last launch brought, and to each student's LMS user id as their own launch
gave it (the hub's state, not the request); it writes what it posted to its log (``STATE/lms/<course id>.jsonl``,
root's) and sends back the result, which the command prints (a line per failure, naming the student), appends to
the course's own log (``<course>/lms/ags_log.jsonl``) and turns into its exit status: 1 when a post failed.
"""
import json
import os
import urllib.error
import urllib.request

from ..hub.service_client import TOKEN_HEADER, service_url

REQUEST_TIMEOUT = 600


class Refusal(Exception):
    """The service will not post (``status``: its HTTP answer)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message


# ------------------------------------------------------------------ the instructor's side
def post_scores(course_root, assignment, out=print, err=print):
    """Send ``assignment``'s scores of the course's gradebook to the hub's grading service to be posted to the LMS;
    returns the exit status (0 all posted, 1 a post failed, 2 nothing posted)."""
    from .export import NoGrades, read_grades
    from ..pipeline import gradebook
    url, token = os.environ.get("COURSE_GRADING_URL"), os.environ.get("JUPYTERHUB_API_TOKEN")
    if not url or not token:
        err("course return --lms: grades go to the LMS through the hub that students launch from (course hub --lti): "
            "run it in a terminal of your JupyterLab there; elsewhere, `course export --lms canvas|moodle|generic` "
            "writes the file the LMS imports")
        return 2
    root = os.path.abspath(course_root)
    if not os.path.isfile(os.path.join(root, "gradebook.db")):
        err(f"course return --lms: no gradebook in {root}: grade first (course grade {assignment})")
        return 2
    try:
        with gradebook(root) as gb:
            grades = read_grades(gb, [assignment])
    except NoGrades as exc:
        err(f"course return --lms: {exc}")
        return 2
    maximum = dict(grades.assignments)[assignment]
    body = {"course": root, "assignment": assignment, "maximum": maximum,
            "students": [s.id for s in grades.students],
            "scores": {s.id: grades.score(s.id, assignment) for s in grades.students
                       if grades.submitted(s.id, assignment)},
            "submitted_at": {s.id: grades.submitted_at[(s.id, assignment)] for s in grades.students
                             if (s.id, assignment) in grades.submitted_at}}
    request = urllib.request.Request(service_url(url, "/lms/scores", root), data=json.dumps(body).encode(),
                                     method="POST",
                                     headers={TOKEN_HEADER: f"token {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        err(f"course return --lms: nothing posted: {exc.read().decode('utf-8', 'replace')[:500]}")
        return 2
    except (OSError, ValueError) as exc:
        err(f"course return --lms: the hub's grading service could not be reached at {url}: {exc}")
        return 2
    from .ags import JsonLines, PostResult
    log = JsonLines(os.path.join(root, "lms", "ags_log.jsonl"), mode=0o660)  # the instructors' group reads it too
    for rec in answer.get("log", []):
        log.add(rec)
    result = PostResult(assignment, answer.get("lineitem"), bool(answer.get("created")), answer.get("posted", {}),
                        answer.get("failed", {}), answer.get("not_posted", {}), log.path)
    for line in result.lines():
        out(line)
    return 0 if result.ok else 1


# ------------------------------------------------------------------ the service's side (root)
def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _submitted_at(value):
    """An ISO 8601 time with its zone, not in the future (Canvas refuses a submitted_at over a minute ahead)."""
    from datetime import datetime, timedelta, timezone
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) and len(value) <= 40 else None
    except ValueError:
        return False
    return when is not None and when.tzinfo is not None and when <= datetime.now(timezone.utc) + timedelta(minutes=1)


def assignment_lineitems(course, assignment):
    """The line items that launches from the LMS's own assignment titled ``assignment`` brought (the hub's state
    keeps each resource link's title and ``lineitem``): the column the LMS made for it."""
    return [link["lineitem"] for _, link in sorted(course.get("links", {}).items())
            if str(link.get("title", "")).strip() == assignment and link.get("lineitem")]


def post_for_instructor(config, course, body):
    """What the grading service answers an instructor of ``course`` (already checked) who asks to post ``body``'s
    scores: the PostResult as a dict, with the log records written; Refusal when nothing can be posted."""
    from ..hub.state import HubState, course_of_folder
    from ..exchange.inbound import valid_student_id
    from .ags import AgsError, ToolCredentials, load_key, post_assignment
    from .export import ClassGrades, Student
    lti = config.get("lti")
    if not lti:
        raise Refusal(409, "this hub was started without --lti, so it knows no LMS to post to (course export --lms "
                           "writes the file the LMS imports)")
    assignment, maximum = body.get("assignment"), body.get("maximum")
    students, scores = body.get("students"), body.get("scores")
    submitted = body.get("submitted_at", {})
    if not (isinstance(assignment, str) and valid_student_id(assignment) and _number(maximum) and maximum > 0
            and isinstance(students, list) and all(isinstance(s, str) and valid_student_id(s) for s in students)
            and isinstance(scores, dict) and all(s in students and _number(v) and 0 <= v <= maximum
                                                  for s, v in scores.items())
            and isinstance(submitted, dict) and all(s in scores and _submitted_at(t) for s, t in submitted.items())):
        raise Refusal(400, "not a request to post an assignment's scores (an assignment, its maximum, the students, "
                           "each score between 0 and the maximum, each submission's time in ISO 8601 with its zone "
                           "and not in the future)")
    state_dir = config["hub_state"]
    cid, known = course_of_folder(HubState(state_dir).read(), course)
    if known is None:
        raise Refusal(404, f"{course} is no course of this hub")
    if not known.get("lineitems"):
        raise Refusal(409, f"no launch from the LMS has brought {cid}'s line items URL yet (the platform grants "
                           f"Assignment and Grade Services at launch): launch the course from the LMS once, then "
                           f"run it again")
    subs = known.get("students", {})
    grades = ClassGrades([(assignment, float(maximum))],
                         [Student(sid, lms_user_id=subs.get(sid) or "") for sid in students],
                         {(sid, assignment): float(v) for sid, v in scores.items()},
                         submitted_at={(sid, assignment): t for sid, t in submitted.items()})
    try:
        credentials = ToolCredentials(lti["client_id"], load_key(lti["tool_key"]), lti["token_url"])
    except (OSError, ValueError) as exc:
        raise Refusal(500, f"the tool's key could not be read ({exc}): tell the hub's administrator")
    log_path = os.path.join(state_dir, "lms", f"{cid}.jsonl")
    os.makedirs(os.path.dirname(log_path), mode=0o700, exist_ok=True)
    records = []  # what this post wrote to the log (two posts for one course may write it at once)
    try:
        result = post_assignment(grades, assignment, known["lineitems"], credentials, log_path, written=records,
                                 lineitem_urls=assignment_lineitems(known, assignment))
        failure = None
    except AgsError as exc:
        result, failure = None, exc
    if failure is not None:
        raise Refusal(502, f"the LMS refused before any score was posted: {failure}")
    return {"assignment": assignment, "lineitem": result.lineitem, "created": result.created,
            "posted": result.posted, "failed": result.failed, "not_posted": result.not_posted, "log": records}
