"""A real JupyterLab server and Debian's headless Chromium, for the tests that drive a browser.

``Lab(root)`` starts JupyterLab on 127.0.0.1 with its own token, folders and
settings under ``root`` (serving ``work``, or a copy of the widget notebooks);
``need_browser()`` fails in CI and skips elsewhere when /usr/bin/chromium is
missing. ``playwright install`` is never run: Playwright drives that binary.
"""
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from coursekit import SOURCE_DIR

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
NOTEBOOKS = ["03_softmax", "04_masks_attention", "07_decoder", "08_encoder_decoder", "09_kv_cache"]


def need_browser():
    if os.path.exists(CHROMIUM):
        return
    message = f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium chromium-driver)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(base, token, path, method="GET"):
    req = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:  # a DELETE waits for its kernel to stop (slow when busy)
        body = resp.read()
    return json.loads(body) if body else None


class Lab:
    """A JupyterLab server on 127.0.0.1 with its own token, folders and settings, all under ``root``."""

    def __init__(self, root, work=None, env=None):
        self.root = root
        self.work = work or os.path.join(root, "notebooks")
        if work is None:
            os.makedirs(self.work)
            for nb in NOTEBOOKS:
                shutil.copy(os.path.join(SOURCE_DIR, nb, nb + ".ipynb"), self.work)
        env = dict(env or os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                         ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"), ("HOME", "home")):
            env[var] = os.path.join(root, sub)
            os.makedirs(env[var], exist_ok=True)
        env["COURSE_MAX_TRAIN_STEPS"] = "20"
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTER_CONFIG_PATH", None)
        # silence the news / update pop-up: JupyterLab reads overrides.json from its app settings dir
        app_settings = os.path.join(root, "app-settings")
        os.makedirs(app_settings)
        with open(os.path.join(app_settings, "overrides.json"), "w") as f:
            json.dump({"@jupyterlab/apputils-extension:notification":
                       {"fetchNews": "false", "checkForUpdates": False}}, f)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(root, "jupyter-lab.log")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
             f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.work}",
             f"--LabApp.app_settings_dir={app_settings}",
             f"--LabApp.user_settings_dir={os.path.join(root, 'user-settings')}",
             f"--LabApp.workspaces_dir={os.path.join(root, 'workspaces')}",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.expose_app_in_browser=True",
             *(["--ServerApp.allow_root=True"] if os.geteuid() == 0 else [])],  # CI containers run as root
            cwd=self.work, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def log_tail(self, n=3000):
        with open(self.log_path) as f:
            return f.read()[-n:]

    def _wait_ready(self, timeout=120):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                api(self.base, self.token, "/api/status")
                return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"jupyter lab did not answer within {timeout} s:\n{self.log_tail()}")

    def url(self, workspace, notebook):
        return f"{self.base}/lab/workspaces/{workspace}/tree/{notebook}.ipynb?token={self.token}"

    def shutdown_kernels(self):
        for session in api(self.base, self.token, "/api/sessions"):
            api(self.base, self.token, f"/api/sessions/{session['id']}", method="DELETE")

    def stop(self):
        try:
            self.shutdown_kernels()
        except OSError:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()
