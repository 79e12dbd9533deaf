"""The formgrader's dialogs on the hub say what happened, without log noise: the instructor's server with the hub's
instructor settings (coursekit.hub.setup.role_settings: the course's formgrader_tab extension), and the formgrader's own
API, which its Generate, Autograde and Generate Feedback buttons call and whose "log" the dialog shows. Without
the extension those logs hold every DEBUG line (each cell's checksum, nbconvert's template paths) and, for
feedback, traitlets' warnings that `display_data_priority` is not recognized by nbgrader's preprocessors.

Cost: one JupyterLab server, one release and one submission autograded in the sandbox (about 30 to 60 s)."""
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request

import pytest

from coursekit.hub import setup as hub
from coursekit.pipeline import CourseCopy

pytestmark = [pytest.mark.pipeline]
COURSE = os.path.join(os.path.dirname(sys.executable), "course")


def test_the_formgrader_dialogs_show_info_and_warnings_without_debug_or_exporter_noise(tmp_path):
    root = CourseCopy(str(tmp_path / "course")).root
    roles = hub.role_settings(str(tmp_path / "state"), os.path.join(root, "exchange"), root)
    port, token = hub.free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXCHANGE"}
    env["JUPYTER_CONFIG_PATH"] = roles["instructor"]  # as the hub starts the instructor's server
    with open(tmp_path / "lab.log", "w") as log:
        lab = subprocess.Popen([COURSE, "instructor-lab", "--course", root, "--port", str(port), "--",
                                f"--IdentityProvider.token={token}"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"

    def call(path, method="GET"):
        req = urllib.request.Request(base + path, method=method, data=b"" if method == "POST" else None,
                                     headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=600) as resp:
            return json.loads(resp.read())
    try:
        end = time.monotonic() + 180
        while True:
            assert lab.poll() is None, (tmp_path / "lab.log").read_text()
            try:
                call("/api/status")
                break
            except OSError:
                assert time.monotonic() < end, (tmp_path / "lab.log").read_text()
                time.sleep(0.5)
        assert "coursekit.hub.formgrader_tab" in (tmp_path / "lab.log").read_text()  # the extension is loaded
        made = call("/formgrader/api/assignment/03_softmax/assign", "POST")
        assert made["success"], made
        assert "[INFO] Writing" in made["log"] and "[DEBUG]" not in made["log"], made["log"][:2000]
        folder = os.path.join(root, "submitted", "amy", "03_softmax")
        os.makedirs(folder)
        shutil.copy(os.path.join(root, "release", "03_softmax", "03_softmax.ipynb"), folder)
        with open(os.path.join(folder, "timestamp.txt"), "w") as f:
            f.write("2026-01-05 10:00:00.000000 UTC")
        graded = call("/formgrader/api/submission/03_softmax/amy/autograde", "POST")
        assert graded["success"], graded
        assert "[DEBUG]" not in graded.get("log", ""), graded["log"][:2000]
        feedback = call("/formgrader/api/assignment/03_softmax/amy/generate_feedback", "POST")
        assert feedback["success"], feedback
        text = feedback.get("log", "")
        assert "[DEBUG]" not in text and "Template paths" not in text and "display_data_priority" not in text, text
        assert os.path.exists(os.path.join(root, "feedback", "amy", "03_softmax", "03_softmax.html"))
    finally:
        lab.terminate()
        lab.wait(timeout=30)
