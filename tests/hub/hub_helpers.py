"""Helpers of the hub tests: a class on a real JupyterHub on 127.0.0.1. The course folder, the exchange and the hub's
state live in a folder of their own under /tmp (every user must be able to enter it), Unix users that the hub
creates (``course hub --create-users``) and that the tests remove afterwards, and the helpers that act as one of
those users: the hub's REST API (through a test-only service token, ``hub_test_config.py``), each user's Jupyter
server API, and a Python statement run in that user's own kernel.

The hub tests need root (the hub starts each user's server as that user), Node with the pinned proxy and the
course's lab plugin for the hub built (``make node``, which ``make test`` and so .ci/run do) and /usr/bin/chromium:
a missing one fails the test, it never skips.
"""
import json
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

from unix_users import python_reachable  # noqa: F401 (the hub tests' import of it)

from coursekit.hub.setup import PROXY, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
COURSE_BIN = os.path.join(os.path.dirname(sys.executable), "course")


def need_hub_parts():
    """Root, the pinned proxy, the course's lab plugin for the hub and Chromium: the hub tests fail loudly without
    them."""
    if os.geteuid() != 0:
        pytest.fail("the hub tests start a JupyterHub that runs each user's server as that user: run them as root")
    if not os.access(PROXY, os.X_OK):
        pytest.fail(f"configurable-http-proxy is not installed at {PROXY}: run `make node` (make test does)")
    hub_lab_build()


def hub_lab_build():
    """The course's JupyterLab plugin for the hub as the hub's users load it: the package.json and the text of the
    JavaScript that ``make node`` builds from node/hub-lab into the folder the hub puts on their JUPYTER_PATH. It
    fails, with the command that builds it, when the build is not there."""
    import glob

    from coursekit.hub.setup import LAB_EXTENSIONS
    folder = os.path.join(LAB_EXTENSIONS, "labextensions", "@attention-course", "hub-lab")
    try:
        with open(os.path.join(folder, "package.json")) as f:
            meta = json.load(f)
        with open(os.path.join(folder, meta["jupyterlab"]["_build"]["load"])) as f:
            f.read()
    except (OSError, ValueError, KeyError, TypeError) as exc:
        pytest.fail(f"the course's JupyterLab plugin for the hub is not built in {folder} ({exc}): run `make node` "
                    f"(make test and make hub build it from node/hub-lab)")
    scripts = sorted(glob.glob(os.path.join(folder, "static", "*.js")))
    return meta, "\n".join(open(path).read() for path in scripts)


def remove_users(names):
    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)  # only these test users' processes
        subprocess.run(["userdel", "--remove", name], capture_output=True)


class Hub:
    """``course hub`` as a process: started the way the README starts it (plus the test's login), stopped with
    SIGTERM as Ctrl-C would."""

    def __init__(self, folder, instructor, students, port=None):
        self.folder, self.instructor, self.students = folder, instructor, students
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_hex(12)
        self.token = secrets.token_hex(20)
        self.course = os.path.join(folder, "course")
        self.exchange = os.path.join(folder, "exchange")
        self.state = os.path.join(folder, "state")
        self.roster = os.path.join(folder, "roster.csv")
        with open(self.roster, "w") as f:
            f.write("id,name\n" + "".join(f"{s},Student {s}\n" for s in students))
        self.proc = None
        self.extra_env = {}  # what an administrator sets when starting `course hub` (the sandbox's limits, ...)
        self.starts = 0
        self.log_path = None

    def command(self, *extra, create_users=True):
        return [COURSE_BIN, "hub", "--roster", self.roster, "--instructor", self.instructor,
                *(["--create-users"] if create_users else []),
                "--port", str(self.port), "--course", self.course, "--exchange", self.exchange,
                "--state", self.state, "--extra-config", os.path.join(HERE, "hub_test_config.py"), *extra]

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "IPYTHON"))}
        env.update(COURSE_HUB_TEST_PASSWORD=self.password, COURSE_HUB_TEST_TOKEN=self.token, **self.extra_env)
        return env

    def start(self, timeout=180):
        self.starts += 1
        self.log_path = os.path.join(self.folder, f"hub-{self.starts}.log")  # the users' servers write there too
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(self.command(), env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"course hub exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "/hub/api/")
                return self
            except (OSError, urllib.error.HTTPError):
                time.sleep(1)
        raise RuntimeError(f"the hub did not answer within {timeout} s:\n{self.log_tail()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def log_tail(self, n=4000):
        with open(self.log_path, errors="replace") as f:
            return f.read()[-n:]

    # ------------------------------------------------------------ the hub's REST API, and each user's server
    def api(self, method, path, body=None, token=None, raw=False):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Authorization": f"token {token or self.token}"})
        with urllib.request.urlopen(req, timeout=120) as resp:
            out = resp.read()
        if raw:
            return out
        return json.loads(out) if out else None

    def user_token(self, name):
        return self.api("POST", f"/hub/api/users/{name}/tokens", {"note": "hub test", "expires_in": 3600})["token"]

    def spawn(self, name):
        """Ask for ``name``'s server (it starts in the background)."""
        try:
            self.api("POST", f"/hub/api/users/{name}/server")
        except urllib.error.HTTPError as exc:
            if exc.code != 400:  # 400: already running
                raise

    def wait_ready(self, name, timeout=240):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            user = self.api("GET", f"/hub/api/users/{name}")
            if user.get("server") and not user.get("pending"):
                return
            time.sleep(1)
        raise RuntimeError(f"{name}'s server did not start within {timeout} s:\n{self.log_tail()}")

    def server(self, name, method, path, body=None, token=None):
        return self.api(method, f"/user/{name}{path}", body, token=token)


def modes_of(folder):
    """{path: (mode, gid)} of ``folder`` and everything in it, to put back with ``restore_modes``."""
    paths = [folder] + [os.path.join(d, n) for d, dirs, files in os.walk(folder) for n in dirs + files]
    return {p: (stat.S_IMODE(os.lstat(p).st_mode), os.lstat(p).st_gid) for p in paths}


def restore_modes(modes):
    for path, (mode, gid) in modes.items():
        if os.path.exists(path):
            os.chown(path, -1, gid)
            os.chmod(path, mode)


def run_in_kernel(hub, name, token, code, timeout=120):
    """Run ``code`` in a new kernel of ``name``'s own server (as that user); returns what it printed."""
    import asyncio

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect
    kernel = hub.server(name, "POST", "/api/kernels", {"name": "python3"}, token=token)

    async def go():
        url = f"ws://127.0.0.1:{hub.port}/user/{name}/api/kernels/{kernel['id']}/channels"
        ws = await websocket_connect(HTTPRequest(url, headers={"Authorization": f"token {token}"}))
        msg_id = uuid.uuid4().hex
        await ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": name, "session": uuid.uuid4().hex, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        # the reply comes on the shell channel and the printed text on iopub: their order is not fixed (under load
        # the reply can come first), so wait for both the reply and iopub's "idle", which follows the last output
        printed, error, replied, idle = [], None, False, False
        while not (replied and idle):
            msg = json.loads(await asyncio.wait_for(ws.read_message(), timeout))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg["header"]["msg_type"]
            if kind == "stream":
                printed.append(msg["content"]["text"])
            elif kind == "error":
                error = "\n".join(msg["content"]["traceback"])
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
        ws.close()
        return "".join(printed), error
    try:
        printed, error = asyncio.run(go())
    finally:
        hub.server(name, "DELETE", f"/api/kernels/{kernel['id']}", token=token)
    assert error is None, f"the code failed in {name}'s kernel:\n{error}"
    return printed


def as_instructor(hub, *args, timeout=900):
    """A `course` command run as the instructor, with the environment of a terminal in the instructor's JupyterLab
    on the hub (the hub's commands first on PATH, COURSE_ROOT and COURSE_EXCHANGE set)."""
    home = pwd.getpwnam(hub.instructor).pw_dir
    env = ["HOME=" + home, "USER=" + hub.instructor, "LANG=C.UTF-8",
           "PATH=" + os.pathsep.join([os.path.dirname(COURSE_BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
           "COURSE_ROOT=" + hub.course, "COURSE_EXCHANGE=" + hub.exchange,
           "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1"]
    proc = subprocess.run(["runuser", "-u", hub.instructor, "--", "env", "-i", *env, "course", *args],
                          cwd=home, capture_output=True, text=True, timeout=timeout)
    return proc


def course_copy_for(folder):
    """The course folder of the class: a copy of the project's course, the instructor's own, closed to others."""
    from coursekit.pipeline import CourseCopy
    root = os.path.join(folder, "course")
    CourseCopy(root)
    shutil.rmtree(os.path.join(root, ".jupyter"), ignore_errors=True)
    return root


# 2 GB of output in 1 MB pieces (each passes the socket): what a student's notebook makes root's grading side receive
FLOOD = "from IPython.display import HTML, display\nfor _ in range(2048):\n    display(HTML('<p>' + 'h' * 2 ** 20))"


def service_memory():
    """(the most memory the hub's grading service's control group has held, its limit), read from cgroup v1 or v2:
    the service with its Dask cluster and (v1) every nbgrader process below it."""
    from grader.slots import CGROUP_ROOT, memory_peak
    seen = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"coursekit.hub.service" not in f.read():
                    continue
            with open(f"/proc/{pid}/cgroup") as f:
                lines = [line.rstrip("\n").split(":", 2) for line in f]
        except OSError:
            continue
        path = next((p for _, c, p in lines if "memory" in c.split(",")), None)
        group = os.path.join(CGROUP_ROOT, "memory", path.lstrip("/")) if path is not None else \
            os.path.join(CGROUP_ROOT, next(p for n, _, p in lines if n == "0").lstrip("/"))
        if os.path.basename(group) != "course-grading-service":  # another hub's, still ending, or not a service
            seen.append((pid, group))
            continue
        knob = next(k for k in ("memory.limit_in_bytes", "memory.max") if os.path.exists(os.path.join(group, k)))
        with open(os.path.join(group, knob)) as f:
            return memory_peak([group]), int(f.read().strip())
    raise AssertionError(f"no grading service runs in a group of its own: {seen}")
