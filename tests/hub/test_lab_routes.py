"""What the course's lab plugin asks of a server, on real Jupyter servers over HTTP with their token:

* an instructor's (`course instructor-lab`, the hub's instructor servers): ``POST course/extend`` is `course extend`,
  with its refusals as the command's and the gradebook unchanged by one;
* a student's (``learner.lab_server``, as the hub's student servers load it): ``POST course/fetch-again`` is `course
  fetch-again` in the server's folder, ``GET course/due`` is empty with no grading service to ask, ``GET
  course/progress`` is `course progress` on the notebooks there, again after a change, and its page has no script;
* a student's due dates as the hub's grading service reads them (``coursekit.hub.due_service``): by the
  gradebook's owner when an instructor of the course, a real Unix user, never root nor a link's owner; and ``coursekit.student_due`` itself: released assignments only,
  each with the student's own extension, nothing for a student the gradebook does not list.

The buttons and menus themselves are walked in Chromium by test_hub_class.py. Cost: about 40 s (two servers' start).
"""
import datetime
import html
import json
import os
import secrets
import shutil
import sys
import tempfile
import urllib.error
import urllib.request

import nbformat
import pytest
from lab import instructor_lab, jupyter_server
from unix_users import python_reachable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "learner"))
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))
from gradebooks import build_gradebook  # noqa: E402
from test_fetch_again import A as RELEASED, COURSE as EXCHANGE_COURSE, class_of  # noqa: E402
from test_progress import released  # noqa: E402

from coursekit.hub.setup import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
A = "03_softmax"
DUE = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, second=0, microsecond=0) + \
    datetime.timedelta(days=3)


def course_folder(root):
    """A course folder whose gradebook has 03_softmax (due in 3 days, released) and 04_masks (not released), alice
    and bob, none submitted."""
    os.makedirs(root)
    shutil.copy(os.path.join(ROOT, "course", "nbgrader_config.py"), root)
    build_gradebook(root, {A: {"softmax_basic": 10}, "04_masks": {"mask_basic": 2}},
                    {"alice": ("Alice", "A", "", ""), "bob": ("Bob", "B", "", "")}, {})
    from coursekit.pipeline import gradebook
    with gradebook(root) as gb:
        gb.update_or_create_assignment(A, duedate=DUE)
    os.makedirs(os.path.join(root, "release", A))
    return root


def ask(url, token, body=None):
    """(status, parsed JSON or text) of a request with the server's token."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Authorization": f"token {token}"},
                                 method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(req, timeout=600) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def extension_of(root, student):
    from nbgrader.api import MissingEntry

    from coursekit.pipeline import gradebook
    with gradebook(root) as gb:
        try:
            return gb.find_submission(A, student).extension
        except MissingEntry:
            return None


@pytest.mark.pipeline
def test_an_instructor_gives_an_extension_from_the_lab_as_course_extend_does(tmp_path):
    root = course_folder(str(tmp_path / "course"))
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXCHANGE"}
    with instructor_lab(root, tmp_path / "lab.log", env) as (base, token):
        assert ask(f"{base}/course/extend", token)[0] == 405  # how the plugin knows an instructor's server
        status, answer = ask(f"{base}/course/extend", token, {"assignment": A, "students": ["alice"], "hours": "48"})
        assert status == 200 and answer["success"], answer
        assert any(line.startswith(f"{A}: alice due {DUE + datetime.timedelta(hours=48):%Y-%m-%d %H:%M} UTC")
                   for line in answer["lines"]), answer
        assert extension_of(root, "alice") == datetime.timedelta(hours=48)
        # refused as the command refuses, each with its sentence; the gradebook as it was
        for asked, named in (({"assignment": A, "students": ["mallory"], "hours": "1"}, "no student 'mallory'"),
                             ({"assignment": "09_nope", "students": ["bob"], "hours": "1"}, "09_nope"),
                             ({"assignment": A, "students": ["bob"], "until": "2001-01-01 10:00"}, "in the past"),
                             ({"assignment": A, "students": ["bob"], "hours": "-3"}, "-3"),
                             ({"assignment": A, "students": ["bob"], "hours": "1", "remove": True}, "one of"),
                             ({"assignment": A, "students": []}, "at least one student"),
                             ({"assignment": A, "students": ["--remove"], "hours": "1"}, "--remove"),
                             ({"assignment": f"--course={tmp_path}", "students": [A, "bob"], "hours": "1"},
                              "is not an assignment's name"),
                             ({"assignment": "-h", "students": ["bob"], "hours": "1"}, "is not an assignment's name"),
                             ({"assignment": A, "students": ["b\0b"], "hours": "1"}, "at most 5,000 student ids")):
            status, answer = ask(f"{base}/course/extend", token, asked)
            assert status == 200 and not answer["success"] and named in answer["message"], (asked, answer)
            assert extension_of(root, "bob") is None and extension_of(root, "alice") == datetime.timedelta(hours=48)
        status, answer = ask(f"{base}/course/extend", token, {"assignment": A, "students": ["alice"], "remove": True})
        assert answer["success"] and extension_of(root, "alice") is None, answer
        assert ask(f"{base}/course/extend", "not-the-token", {"assignment": A, "students": ["bob"], "hours": "1"})[0] \
            == 403
        assert extension_of(root, "bob") is None


@pytest.mark.pipeline
def test_a_students_server_fetches_a_fresh_copy_and_has_no_due_dates_without_the_service(tmp_path):
    root_of_exchange, home = class_of(str(tmp_path))
    os.makedirs(os.path.join(home, RELEASED))
    with open(os.path.join(home, RELEASED, RELEASED + ".ipynb"), "w") as f:
        f.write("mine, broken")
    port, token = free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COURSE_", "JUPYTER"))}
    env.update(HOME=home, PYTHONPATH=ROOT, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    os.makedirs(env["JUPYTER_CONFIG_DIR"])
    with open(os.path.join(env["JUPYTER_CONFIG_DIR"], "jupyter_server_config.json"), "w") as f:
        json.dump({"ServerApp": {"jpserver_extensions": {"learner.lab_server": True}}}, f)  # as the hub's settings
    log_path = tmp_path / "server.log"
    command = [sys.executable, "-m", "jupyter_server", "--no-browser", f"--port={port}",
               f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={home}",
               "--allow-root"]  # make test runs as root; the hub runs it as the student
    with jupyter_server(command, log_path, env, port, token, cwd=home) as base:
        assert ask(f"{base}/course/due", token) == (200, {"value": []})
        status, answer = ask(f"{base}/course/fetch-again", token,
                             {"course_id": EXCHANGE_COURSE, "assignment_id": RELEASED})
        assert status == 200 and answer["success"], (answer, open(log_path).read())
        aside = [n for n in os.listdir(home) if n.startswith(f"{RELEASED}.moved-")]
        assert answer["lines"] == [f"moved your folder {RELEASED} to {aside[0]} (nothing in it was deleted)",
                                   f"fetched a fresh copy of {RELEASED} (course {EXCHANGE_COURSE}) into {RELEASED}"]
        assert open(os.path.join(home, aside[0], RELEASED + ".ipynb")).read() == "mine, broken"
        for asked, named in (({"course_id": EXCHANGE_COURSE, "assignment_id": "../x"}, "is not an assignment's name"),
                             ({"course_id": EXCHANGE_COURSE, "assignment_id": "B"}, "B"),
                             ({"course_id": EXCHANGE_COURSE, "assignment_id": ["A"]}, "not an assignment's name")):
            before = sorted(os.listdir(home))
            status, answer = ask(f"{base}/course/fetch-again", token, asked)
            assert status == 200 and not answer["success"] and named in answer["message"], (asked, answer)
            assert sorted(os.listdir(home)) == before
        assert ask(f"{base}/course/fetch-again", "wrong", {"assignment_id": RELEASED})[0] == 403
        # the learner's progress: the notebooks there, worked out again after a change
        os.makedirs(os.path.join(home, "03_softmax"))
        nbformat.write(released("03_softmax", True), os.path.join(home, "03_softmax", "03_softmax.ipynb"))
        status, report = ask(f"{base}/course/progress", token)
        assert status == 200 and [nb["notebook"] for nb in report["notebooks"]] == ["03_softmax"], report
        assert report["points"] == report["max_points"] > 0, report
        nbformat.write(released("03_softmax", False), os.path.join(home, "03_softmax", "03_softmax.ipynb"))
        status, report = ask(f"{base}/course/progress", token)
        assert report["points"] == 0 and {i["state"] for i in report["notebooks"][0]["exercises"]} == {"not started"}
        page = urllib.request.urlopen(urllib.request.Request(f"{base}/course/progress.html",
                                                             headers={"Authorization": f"token {token}"}), timeout=600)
        assert page.headers["Content-Security-Policy"].startswith("default-src 'none'")
        text = page.read().decode()
        assert "<h2>03_softmax: 0 / " in text and "<script" not in text


def test_a_students_due_dates_are_their_own_and_only_the_released_assignments(tmp_path):
    from coursekit.extend import extend
    from coursekit.student_due import student_due_dates
    root = course_folder(str(tmp_path / "course"))
    extend(root, A, ["alice"], hours="48", out=lambda line: None)
    alice = student_due_dates(root, "alice")
    assert [a["assignment_id"] for a in alice["assignments"]] == [A]  # 04_masks: not released, not named
    due = DUE + datetime.timedelta(hours=48)
    assert alice["assignments"][0]["due"] == f"{due:%Y-%m-%d %H:%M} UTC" and alice["assignments"][0]["extension"]
    assert alice["assignments"][0]["lines"][0] == (f"Your due date: {due:%Y-%m-%d %H:%M} UTC, with your extension of "
                                                   f"2 days (the assignment's: {DUE:%Y-%m-%d %H:%M} UTC).")
    bob = student_due_dates(root, "bob")["assignments"]
    assert bob[0]["lines"][0] == f"Due: {DUE:%Y-%m-%d %H:%M} UTC." and not bob[0]["extension"]
    assert student_due_dates(root, "mallory")["assignments"] == []
    os.makedirs(os.path.join(root, "release", "04_masks"))
    assert student_due_dates(root, "bob")["assignments"][1]["lines"] == ["This assignment has no due date."]


@pytest.mark.pipeline  # it opens the folders above this Python to every user for a moment: never the fast loop
@pytest.mark.skipif(os.geteuid() != 0, reason="as root (make test): it reads as another Unix user")
def test_the_grading_service_reads_due_dates_as_an_instructor_never_as_root_nor_a_links_owner():
    """Each course's gradebook is read by its owner when the owner is one of the course's instructors (nobody here),
    read-only (the file's bytes unchanged); a gradebook that is a link (to another course's, of daemon's) or owned by
    someone who is no instructor of the course is not read, and the other course's file is unchanged."""
    import hashlib

    from coursekit.hub.due_service import DueDates
    base = tempfile.mkdtemp(prefix="course-due-", dir="/tmp")  # pytest's folders are closed to nobody
    try:
        os.chmod(base, 0o755)
        mine, theirs, linked, roots = (course_folder(os.path.join(base, n)) for n in ("mine", "theirs", "linked",
                                                                                       "roots"))
        for folder, uid in ((mine, 65534), (linked, 65534), (theirs, 1)):  # nobody, nobody, daemon
            for here, dirs, files in os.walk(folder):
                for name in [here] + [os.path.join(here, f) for f in files]:
                    os.chown(name, uid, uid)
            os.chmod(os.path.join(folder, "gradebook.db"), 0o600)  # the owner alone reads it
        os.remove(os.path.join(linked, "gradebook.db"))
        os.symlink(os.path.join(theirs, "gradebook.db"), os.path.join(linked, "gradebook.db"))
        os.lchown(os.path.join(linked, "gradebook.db"), 65534, 65534)
        digest = {f: hashlib.sha256(open(os.path.join(f, "gradebook.db"), "rb").read()).hexdigest()
                  for f in (mine, theirs)}
        config = {"courses": {mine: {"instructors": ["nobody"]}, linked: {"instructors": ["nobody"]},
                              theirs: {"instructors": ["nobody"]}, roots: {"instructors": ["nobody"]},
                              os.path.join(base, "none"): {"instructors": ["nobody"]}}}
        with python_reachable():
            answer = DueDates(lambda: config).of("alice")
            assert DueDates(lambda: config).of("mallory") == []
        assert [c["assignments"][0]["assignment_id"] for c in answer] == [A], answer  # mine alone
        assert {f: hashlib.sha256(open(os.path.join(f, "gradebook.db"), "rb").read()).hexdigest()
                for f in (mine, theirs)} == digest
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_due_date_read_finished_before_its_asker_waits_for_it_answers():
    """A read that is done before ``DueDates.ask`` adds its callback (a loaded host's order of threads, forced here)
    answers, and the next ask reads again. The callback ran at once under the lock it takes, and the service's event
    loop hung for good: CI's run of the service's refusals timed out on ``/due``. Cost: milliseconds."""
    import concurrent.futures
    import threading

    from coursekit.hub.due_service import DueDates

    class DoneFirst(concurrent.futures.ThreadPoolExecutor):
        def submit(self, *args, **kwargs):
            future = super().submit(*args, **kwargs)
            concurrent.futures.wait([future])
            return future

    reads = []

    def settings():  # read once by each read of due dates
        reads.append(1)
        return {"courses": {}}

    due = DueDates(settings)
    due.pool = DoneFirst(max_workers=1)
    answers = []
    asker = threading.Thread(target=lambda: answers.extend(due.ask("bob").result(timeout=10) for _ in range(2)),
                             daemon=True)
    asker.start()
    asker.join(20)
    assert not asker.is_alive(), "DueDates.ask waited for its own lock"
    assert answers == [[], []] and len(reads) == 2 and due.asking == {}


def test_an_assignment_generated_but_not_in_the_exchange_is_not_named(tmp_path):
    """With the exchange given (the hub's), released means the exchange holds it: `course grade` and the formgrader's
    Generate write release/ for every assignment before any is released."""
    from coursekit.exchange.course_id import course_id_of
    from coursekit.student_due import student_due_dates
    root = course_folder(str(tmp_path / "course"))
    exchange = tmp_path / "exchange"
    assert student_due_dates(root, "alice", str(exchange))["assignments"] == []  # release/03_softmax alone
    (exchange / course_id_of(root) / "outbound" / A).mkdir(parents=True)
    assert [a["assignment_id"] for a in student_due_dates(root, "alice", str(exchange))["assignments"]] == [A]


def test_what_was_returned_is_the_newest_feedback_pages_score_and_lost_parts(tmp_path):
    """The newest feedback folder of each assignment, its page's score and the parts listed as having lost points
    (the markup of grader/templates/course_feedback); a link where the folder should be is not followed, and a
    folder, a pipe or a page that is not one of the course's among the pages costs nothing but itself."""
    from learner.lab_server import returned
    template = open(os.path.join(ROOT, "grader", "templates", "course_feedback", "index.html.j2")).read()
    assert "(Score: {{" in template and "course-failed" in template  # the markup read below is the template's

    def page(score, lost):
        items = "".join(f'<li class="course-failed"><label class="course-link" for="go-x">{html.escape(label)}'
                        f"</label> 0 / 1</li>" for label in lost)
        return (f"<html><body><h4>03_softmax (Score: {score} / 16.0)</h4><div id='toc'><ol>"
                f'<li class="course-passed"><label class="course-link" for="go-y">softmax · basic</label> 2 / 2</li>'
                f"{items}</ol></div></body></html>")
    for when, score, lost in (("2026-12-01 10:00:00.000000 UTC", 9.0, ["softmax · edge", "log_softmax · basic"]),
                              ("2026-12-02 10:00:00.000000 UTC", 15.0, ["Question 2 · <b>why</b>"])):
        folder = tmp_path / "03_softmax" / "feedback" / when
        folder.mkdir(parents=True)
        (folder / "03_softmax.html").write_text(page(score, lost))
    (tmp_path / "04_masks_attention").mkdir()
    os.symlink(tmp_path / "03_softmax" / "feedback", tmp_path / "04_masks_attention" / "feedback")
    newest = tmp_path / "03_softmax" / "feedback" / "2026-12-02 10:00:00.000000 UTC"
    (newest / "sub.html").mkdir()                     # a folder, a pipe, and a page html.parser gives up on
    os.mkfifo(newest / "pipe.html")
    (newest / "broken.html").write_text("<![<![" * 1000)
    (tmp_path / "05_rnn" / "feedback" / "t").mkdir(parents=True)
    (tmp_path / "05_rnn" / "feedback" / "t" / "05_rnn.html").write_text("<" * 3_000_000)
    assert returned(str(tmp_path)) == {"03_softmax": {"time": "2026-12-02 10:00:00.000000 UTC", "score": 15.0,
                                                      "max_score": 16.0, "lost": ["Question 2 · <b>why</b>"]}}
