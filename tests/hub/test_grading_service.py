"""The hub's grading service (coursekit/hub/service.py, root's on a hub) checks who asks before it reads a request.

The real service process (its TLS Dask cluster of one worker, its web application) is started on 127.0.0.1 with
settings naming one course. Ten requests of 200 MB each arrive at once, as a student could send them: five with no
token, five with a made-up one (the hub's API, which would be asked about a token, is a closed port here, so no
token is anyone's; a student's real token is refused by the hub class test, test_hub_class.py). Each must be refused
(403) with its body unread: the senders manage to push only what the sockets buffer before the connection closes,
and the service's peak memory (VmHWM of its process) stays under 300 MB. Before the check came first, the service
read and parsed each body: about 2 GB for these ten. Cost: about 10 s (the service's start is most of it).
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

from coursekit.hub.setup import free_port
from coursekit.hub.service import MAX_BODY

COURSE = "/srv/some-course"
BODY = 200 * 2 ** 20
CHUNK = 2 ** 20
REQUESTS = 10
PEAK_MB = 300


def peak_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def send_big(port, token, outcome, request=f"POST /grade?course={COURSE}"):
    """One request of ``BODY`` bytes; records (status line or None, bytes the service let us send)."""
    head = (f"{request} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {BODY}\r\n" + (f"Authorization: token {token}\r\n" if token else "") + "\r\n")
    sent, status = 0, None
    with socket.create_connection(("127.0.0.1", port), timeout=120) as s:
        s.sendall(head.encode())
        chunk = b"x" * CHUNK
        try:
            while sent < BODY:
                s.sendall(chunk)
                sent += len(chunk)
        except OSError:
            pass  # the service closed the connection: the rest is never read
        try:
            status = s.recv(4096).split(b"\r\n", 1)[0].decode()
        except OSError:
            pass
    outcome.append((status, sent))


def test_ten_big_requests_without_a_valid_token_are_refused_unread(tmp_path):
    assert BODY <= MAX_BODY  # as big as an instructor may send: only who asks decides whether it is read
    port = free_port()
    config = tmp_path / "grading.json"
    config.write_text(json.dumps({"port": port, "hub_api": f"http://127.0.0.1:{free_port()}/hub/api", "workers": 1,
                                  "courses": {COURSE: {"instructors": ["alice"]}}}))
    log = open(tmp_path / "service.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "coursekit.hub.service", str(config)], stdout=log,
                            stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, open(tmp_path / "service.log").read()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the grading service did not start in 120 s"
                time.sleep(0.2)
        before = peak_mb(proc.pid)
        outcome, due = [], []
        senders = [threading.Thread(target=send_big, args=(port, None if i % 2 else f"made-up-{i}", outcome))
                   for i in range(REQUESTS)]
        # and as many to GET /due, which has no body to read: refused before any of it is
        senders += [threading.Thread(target=send_big, args=(port, None if i % 2 else f"made-up-{i}", due, "GET /due"))
                    for i in range(REQUESTS)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(300)
        peak = peak_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
        log.close()
    said = open(tmp_path / "service.log").read()
    assert len(outcome) == REQUESTS
    for status, sent in outcome:
        assert status is None or status.endswith("403 Forbidden"), status
        assert sent < BODY // 4, f"the service let {sent} bytes in before refusing"
    assert sum(status is not None for status, _ in outcome) >= REQUESTS // 2, outcome  # the refusal is said
    assert peak < PEAK_MB, f"the service's memory peaked at {peak:.0f} MB (it started at {before:.0f} MB)"
    assert said.count("refused a grading request from an unknown token") == REQUESTS, said[-3000:]
    assert len(due) == REQUESTS and all(status is None or status.endswith("400 Bad Request") for status, _ in due), due
    assert all(sent < BODY // 4 for _, sent in due), due


# ---------------------------------------------------------------- what an asker with a token may send
def test_the_service_refuses_other_courses_and_malformed_requests_and_logs_them_inert():
    """The service's application in this process, with a stand-in hub API that knows four tokens: a student's, an
    instructor's of course A, another course's instructor's, and one whose user name carries escapes. ``/due``
    answers a student's own token and refuses no token, a made-up one and a name that is no student id. Refusals come
    before anything is graded: a student or another course's instructor (403, as plain text), a body naming another
    course than the URL, a body that is not a grading request, a time limit that is not a number of seconds above 0
    (400; ``nan`` got through ``min()`` before). Nothing reaches the grading client, and every line the service logs
    is one inert line. Cost: about 1 s."""
    import asyncio
    import io
    import logging

    from tornado import httpserver, web

    from coursekit.hub import service

    users = {"stud": "bob", "inst": "alice", "other": "carol", "evil": "ev\x1b[2J\u202eil\nFAKE"}

    class User(web.RequestHandler):
        def get(self):
            token = self.request.headers.get("Authorization", "")[len("token "):]
            if token not in users:
                raise web.HTTPError(403)
            self.write({"name": users[token]})

    class NoGrading:
        submitted = []

        def submit(self, *args, **kwargs):
            self.submitted.append(args)
            raise AssertionError("a refused request reached the grading client")

    a, b = "/srv/course-a", "/srv/course-b"
    config = {"courses": {a: {"instructors": ["alice"]}, b: {"instructors": ["carol"]}}}

    def request(port, path, token, body):
        data = b"" if body is None else json.dumps(body).encode() if not isinstance(body, bytes) else body
        head = (f"{'GET' if body is None else 'POST'} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n"
                + (f"Authorization: token {token}\r\n" if token else "") + "\r\n")
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(head.encode() + data)
            answer = b""
            while b"\r\n\r\n" not in answer:
                chunk = s.recv(65536)
                if not chunk:
                    break
                answer += chunk
        head = answer.split(b"\r\n\r\n", 1)[0].decode()
        return int(head.split()[1]), head.lower()

    task = {"student": "s1", "assignment": "ps1", "files": {}}
    grading = {"course": a, "assignment": "ps1", "source": {}, "task": task}
    cases = [  # (what, path, token, body, status)
        ("a student", f"/grade?course={a}", "stud", grading, 403),
        ("another course's instructor", f"/grade?course={a}", "other", grading, 403),
        ("another course's scores", f"/lms/scores?course={b}", "inst", {"course": b}, 403),
        ("a user name with escapes", f"/grade?course={a}%1b[31m%0aINJ", "evil", grading, 403),
        ("a body naming another course", f"/grade?course={a}", "inst", dict(grading, course=b), 400),
        ("scores naming another course", f"/lms/scores?course={a}", "inst", {"course": b}, 400),
        ("no task", f"/grade?course={a}", "inst", {"course": a, "assignment": "ps1"}, 400),
        ("a task that is a list", f"/grade?course={a}", "inst", dict(grading, task=[1]), 400),
        ("no source", f"/grade?course={a}", "inst", {k: v for k, v in grading.items() if k != "source"}, 400),
        ("files that are not base64", f"/grade?course={a}", "inst", dict(grading, task=dict(task, files={"x": "!"})),
         400),
        ("a time limit of nan", f"/grade?course={a}", "inst", dict(grading, timeout="nan"), 400),
        ("a negative time limit", f"/grade?course={a}", "inst", dict(grading, timeout=-5), 400),
        ("an escaped student id", f"/grade?course={a}", "inst", dict(grading, task=dict(task, student="s\x1b[2J\n")),
         400),
        ("not JSON", f"/grade?course={a}", "inst", b"\x00{not json", 400),
        ("due dates, no token", "/due", None, None, 403),
        ("due dates, a made-up token", "/due", "made-up", None, 403),
        ("due dates of a user name with escapes", "/due", "evil", None, 403),
        ("a student's own due dates (no gradebook here: none)", "/due", "stud", None, 200),
    ]
    said = io.StringIO()
    handler = logging.StreamHandler(said)
    logging.getLogger().addHandler(handler)
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.INFO)

    async def main():
        hub_port, port = free_port(), free_port()
        hub = web.Application([(r"/hub/api/user", User)]).listen(hub_port, "127.0.0.1")
        app = service.make_app(config, NoGrading(), f"http://127.0.0.1:{hub_port}/hub/api")
        server = httpserver.HTTPServer(app, max_body_size=MAX_BODY)
        server.listen(port, "127.0.0.1")
        loop = asyncio.get_running_loop()
        try:
            return [(what, status, await loop.run_in_executor(None, request, port, path, token, body))
                    for what, path, token, body, status in cases]
        finally:
            server.stop()
            hub.stop()
    try:
        got = asyncio.run(main())
    finally:
        logging.getLogger().removeHandler(handler)
        logging.getLogger().setLevel(level)
    assert [(what, answer[0]) for what, _, answer in got] == [(what, status) for what, status, _ in got]
    assert all("content-type: text/plain" in answer[1] for _, status, answer in got if status == 403)
    assert NoGrading.submitted == []
    lines = said.getvalue().splitlines()
    assert any("ev\\x1b[2J" in line for line in lines), lines  # the escapes were logged, escaped
    assert not [line for line in lines if any(ord(c) < 32 or c in "\u202e\u200b\x7f" for c in line)], lines
