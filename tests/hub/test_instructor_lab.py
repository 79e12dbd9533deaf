"""The instructor's JupyterLab, as the README starts it (`course instructor-lab`): on a course folder that has never
released anything, the exchange is made (no warning that it is missing), there is no news and no update check,
the formgrader answers, and an assignment released with `course release` shows there as released.

Cost: one JupyterLab server and one release; measured 37 s to 2 min 45 s on 2 cores while other suites ran."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from lab import instructor_lab
from coursekit.pipeline import CourseCopy

pytestmark = [pytest.mark.pipeline]
COURSE = os.path.join(os.path.dirname(sys.executable), "course")


def get(base, token, path, raw=False):
    req = urllib.request.Request(base + path, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        body = resp.read()
    return body.decode() if raw else json.loads(body)


def test_instructor_lab_has_the_exchange_no_news_and_shows_a_release_as_released(tmp_path):
    root = CourseCopy(str(tmp_path / "course")).root
    exchange = os.path.join(root, "exchange")
    assert not os.path.exists(exchange)
    log_path = tmp_path / "lab.log"
    env = {k: v for k, v in os.environ.items() if k != "COURSE_EXCHANGE"}
    with instructor_lab(root, log_path, env) as (base, token):
        assert os.stat(exchange).st_mode & 0o777 == 0o777
        page = get(base, token, "/lab", raw=True)
        assert '"news": {"disabled": true}' in page
        assert "@jupyterlab/apputils-extension:announcements" in page  # among the disabled extensions
        # the Assignments tab's list: where JupyterLab said the exchange "does not exist and could not be created"
        listing = get(base, token, "/assignments?course_id=attention-course")
        assert listing["success"] is True, listing
        released = subprocess.run([COURSE, "release", "03_softmax", "--course", root], env=env,
                                  capture_output=True, text=True)
        assert released.returncode == 0, released.stdout + released.stderr
        listed = {a["name"]: a["status"] for a in get(base, token, "/formgrader/api/assignments")}
        assert listed.get("03_softmax") == "released", listed
        text = log_path.read_text()
        assert "ExchangeError" not in text and "Unwritable directory" not in text, text[-3000:]
