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
the course's own log (``<course>/lms/ags_log.jsonl``) and turns into its exit status: 1 when a post failed. A
student the class list from the LMS took out of the course (``lms/departed.json``) is not sent: the LMS no longer
has them, so nothing can be posted, which is no failure (exit 0 when every other score went where it belongs); each
run names them among those not posted.

This module is the instructor's side; the service's (root's) is ``coursekit.lms.posting``.
"""
import json
import os
import urllib.error
import urllib.request

from ..hub.service_client import TOKEN_HEADER, service_url

REQUEST_TIMEOUT = 600


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
    from ..hub.enrol import read_departed
    departed = read_departed(root)  # the class list took them out: the LMS has them no more, nothing to post to
    here = [s for s in grades.students if s.id not in departed]
    maximum = dict(grades.assignments)[assignment]
    body = {"course": root, "assignment": assignment, "maximum": maximum,
            "students": [s.id for s in here],
            "scores": {s.id: grades.score(s.id, assignment) for s in here if grades.submitted(s.id, assignment)},
            "not_due": [s.id for s in here if (s.id, assignment) in grades.not_due],
            "submitted_at": {s.id: grades.submitted_at[(s.id, assignment)] for s in here
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
                        answer.get("failed", {}), answer.get("not_posted", {}), log.path,
                        [i for i in answer.get("passed_over", []) if isinstance(i, dict)],
                        answer.get("unchanged", {}))
    for line in result.lines():
        out(line)
    for s in grades.students:  # not a failure: nothing was placed wrongly, and the LMS would refuse them anyway
        if s.id in departed:
            out(f"  not posted {s.id}: {departed[s.id]}; the LMS no longer has them in the course (enter their grade "
                f"there by hand if it is still wanted)")
    return 0 if result.ok else 1
