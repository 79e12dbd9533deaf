"""One grading record (``grader.graded.Graded``): its two wire forms give it back whole, it leaves the grading log's
lines and the seed through one writer each, and on the hub `course grade` sends each submission to the grading
service from a thread of its own, with no Dask cluster, and writes what comes back as it writes a Dask worker's
result (``write_graded``: the gradebook row by ``coursekit.pipeline.save_grades``). Cost: about 3 s (one release)."""
import csv
import http.server
import json
import os
import threading

import nbformat

from coursekit.pipeline import CourseCopy
from grader import seeds
from grader.graded import Graded, log_record, read_log

A = "01_tokens"


def _graded(**others):
    return Graded("amy", A, ok=True, autograded={f"{A}.ipynb": b"{}", "data/x.bin": bytes(range(256))},
                  feedback={f"{A}.html": b"<p>ok</p>"}, log=[log_record("amy", A, A, 7, [["kernel", "died"]])],
                  seed=7, host="h", pid=3, separation="words", seconds=1.5, **others)


def test_a_graded_submission_crosses_each_wire_whole():
    graded = _graded(error=("timeout", "took over 1 s"))
    assert Graded.from_plain(graded.to_plain()) == graded  # Dask: bytes as they are
    text = graded.to_json()  # HTTP: JSON, the files in base64
    assert isinstance(text, str) and Graded.from_json(text.encode()) == graded
    assert Graded.from_json(text).error == ("timeout", "took over 1 s")  # a tuple again, though JSON has none


def test_its_log_lines_and_seed_are_written_once_each_by_one_writer(tmp_path):
    graded = _graded(error=("grading", "nbgrader could not grade it"))
    graded.write_log_and_seed(str(tmp_path))
    graded.write_log_and_seed(str(tmp_path))  # the seed's row once, whatever writes it again
    lines = read_log(str(tmp_path))
    assert [line["faults"] for line in lines] == [[["kernel", "died"]],
                                                  [["grading", "nbgrader could not grade it"]]] * 2
    assert {(line["student"], line["assignment"], line["notebook"], line["seed"]) for line in lines} == {
        ("amy", A, A, 7)}
    assert graded.faults() == [("kernel", "died"), ("grading", "nbgrader could not grade it")]
    assert seeds.recorded(str(tmp_path)) == {("amy", A): 7}
    with open(tmp_path / seeds.FILE, newline="") as f:
        assert len(list(csv.reader(f))) == 2
    assert Graded.failed("bo", A, "worker", "gone").log_records()[0]["faults"] == [["worker", "gone"]]


def test_course_grade_on_the_hub_sends_to_the_service_from_threads_without_a_dask_cluster(tmp_path, monkeypatch):
    from coursekit.grading import client
    cc = CourseCopy(str(tmp_path / "course"))
    release = nbformat.read(cc.generate_release(A), as_version=4)
    for student in ("amy", "bo"):
        cc.submit(student, A, release)
    asked = []

    class Service(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            student = body["task"]["student"]
            asked.append((self.path, self.headers["Authorization"], student, threading.current_thread().name))
            answer = Graded(student, A, ok=True, autograded={f"{A}.ipynb": nbformat.writes(release).encode()},
                            feedback={f"{A}.html": b"<p>graded</p>"}, seed=seeds.student_seed(student, A),
                            log=[log_record(student, A, A, 1, [["blocked", "network: x"]])] if student == "bo" else [],
                            host="service", pid=1, separation="a user of its own").to_json().encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("COURSE_GRADING_URL", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "the-token")
    monkeypatch.setattr(client, "on_the_hub", lambda: True)  # (as root here: the hub's instructors are not)

    def no_cluster(*args):
        raise AssertionError("a Dask cluster was started on the hub")
    monkeypatch.setattr(client, "dask_client", no_cluster)
    try:
        summary = client.grade_class(cc.root, [A], jobs=2, progress=False, release_first=False)
    finally:
        server.shutdown()
    assert summary.by_service and summary.workers == 2 and summary.ok
    assert sorted(s for _, _, s, _ in asked) == ["amy", "bo"]
    assert all(path.startswith("/grade?course=") and token == "token the-token" for path, token, _, _ in asked)
    assert set(summary.graded) == {("amy", A), ("bo", A)} and summary.graded_by[("bo", A)] == ("service", 1)
    assert summary.faults == [("bo", A, "blocked", "network: x")] and summary.separations == {"a user of its own"}
    assert seeds.recorded(cc.root) == {(s, A): seeds.student_seed(s, A) for s in ("amy", "bo")}
    assert [line["student"] for line in read_log(cc.root)] == ["bo"]
    assert open(cc.feedback_path("amy", A)).read() == "<p>graded</p>" and os.path.exists(cc.autograded_path("bo", A))
    with cc.gradebook() as gb:  # the gradebook row, written by save_grades as for a Dask worker's result
        assert {(s.student.id, A): s.score for s in gb.find_assignment(A).submissions} == summary.graded
