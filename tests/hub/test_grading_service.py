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


def send_big(port, token, outcome):
    """One request of ``BODY`` bytes; records (status line or None, bytes the service let us send)."""
    head = (f"POST /grade?course={COURSE} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
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
        outcome = []
        senders = [threading.Thread(target=send_big, args=(port, None if i % 2 else f"made-up-{i}", outcome))
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
