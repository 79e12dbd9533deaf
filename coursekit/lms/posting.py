"""The grading service's side of ``course return A --lms`` (root's, with the tool's private key): the scores an
instructor of the course sent (``coursekit.lms.return_grades``, the instructor's side) checked and posted to the
LMS's line item for the assignment, to each student's LMS user id as the hub's state has it (``post_for_instructor``),
with what it posted written to the service's log."""
import os


class Refusal(Exception):
    """The service will not post (``status``: its HTTP answer)."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message


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


def in_context(lineitem, lineitems):
    """Whether the line item URL ``lineitem`` is one of the context whose line items are at ``lineitems`` (its
    path under theirs, on the same host: Canvas's ``.../courses/7/line_items/3``, Moodle's
    ``.../services.php/2/lineitems/5/lineitem``): a link kept from last term's course is another context's."""
    from urllib.parse import urlsplit
    item, items = urlsplit(str(lineitem or "")), urlsplit(str(lineitems or ""))
    return (bool(items.netloc) and (item.scheme, item.netloc) == (items.scheme, items.netloc)
            and item.path.startswith(items.path.rstrip("/") + "/"))


def assignment_lineitems(course, assignment):
    """The line items that launches from the LMS's own assignment for ``assignment`` brought: the hub's state keeps
    each resource link's ``lineitem`` by the link's id, with the assignment the link was made for as its launch
    said it (``coursekit.hub.lti_claims.link_assignment``: the link's custom parameter ``assignment``, or its target
    link URI's), and only a link made for ``assignment`` exactly is its. A link's title never counts: ``Homework 4:
    attention (builds on 03_softmax)`` is Homework 4's, and a link retitled in the LMS keeps its assignment. Only
    those of the course's context now (``in_context`` of its ``lineitems``): after a course copy, last term's links
    and columns are never written."""
    return [link["lineitem"] for _, link in sorted(course.get("links", {}).items())
            if isinstance(link, dict) and link.get("assignment") == assignment and link.get("lineitem")
            and in_context(link["lineitem"], course.get("lineitems"))]


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
    not_due = body.get("not_due", [])  # no submission and their own due date to come: nothing posted
    if not (isinstance(assignment, str) and valid_student_id(assignment) and _number(maximum) and maximum > 0
            and isinstance(students, list) and all(isinstance(s, str) and valid_student_id(s) for s in students)
            and isinstance(scores, dict) and all(s in students and _number(v) and v >= 0 for s, v in scores.items())
            and isinstance(submitted, dict) and all(s in scores and _submitted_at(t) for s, t in submitted.items())
            and isinstance(not_due, list) and all(s in students and s not in scores for s in not_due)):
        raise Refusal(400, "not a request to post an assignment's scores (an assignment, its maximum, the students, "
                           "each score a number of at least 0, each submission's time in ISO 8601 with its zone "
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
                         submitted_at={(sid, assignment): t for sid, t in submitted.items()},
                         not_due={(sid, assignment) for sid in not_due})
    try:
        credentials = ToolCredentials(lti["client_id"], load_key(lti["tool_key"]), lti["token_url"])
    except (OSError, ValueError) as exc:
        raise Refusal(500, f"the tool's key could not be read ({exc}): tell the hub's administrator")
    log_path = os.path.join(state_dir, "lms", f"{cid}.jsonl")
    os.makedirs(os.path.dirname(log_path), mode=0o700, exist_ok=True)
    records = []  # what this post wrote to the log (two posts for one course may write it at once)
    try:
        result = post_assignment(grades, assignment, known["lineitems"], credentials, log_path, written=records,
                                 tag=f"coursekit:{known.get('context_id') or cid}",
                                 lineitem_urls=assignment_lineitems(known, assignment))
        failure = None
    except AgsError as exc:
        result, failure = None, exc
    if failure is not None:
        raise Refusal(502, f"the LMS refused before any score was posted: {failure}")
    return {"assignment": assignment, "lineitem": result.lineitem, "created": result.created,
            "posted": result.posted, "failed": result.failed, "not_posted": result.not_posted, "log": records,
            "unchanged": result.unchanged,
            "passed_over": [{k: i.get(k) for k in ("id", "label", "resourceId")} for i in result.passed_over]}
