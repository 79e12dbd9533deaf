"""What the hub tests do in Chromium, as a person does it in JupyterLab: log in, open a terminal from the Launcher and
type in it, open the Assignments tab and press its buttons, upload a notebook into a folder, open the formgrader from
the Nbgrader menu. Debian's /usr/bin/chromium through Playwright (never `playwright install`)."""
import contextlib
import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
TALL = {"width": 1400, "height": 2400}  # a terminal of about 150 rows: a command's whole output stays in view


def need_chromium():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium); never `playwright "
                    f"install`")


def launch(p):
    need_chromium()
    return p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def login(page, hub, name, password=None):
    """The hub's login page, as a person fills it in; JupyterLab opens (the hub starts the user's server)."""
    page.goto(f"{hub.base}/hub/login?next=/user/{name}/lab")
    page.fill("#username_input", name)
    page.fill("#password_input", password or hub.password)
    page.click("#login_submit")


def wait_for_lab(page, timeout=240_000):
    page.wait_for_selector("#jp-main-dock-panel", timeout=timeout)
    page.wait_for_selector(".jp-DirListing-content", timeout=timeout)


def menu(page, *path):
    """Click through the menu bar: menu(page, "Nbgrader", "Formgrader")."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(path[0])}$")).click()
    for label in path[1:]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")).last.click()


class Terminal:
    """A terminal opened from the Launcher; ``run`` types a command and waits for what it prints."""

    def __init__(self, page):
        self.page = page
        menu(page, "File", "New Launcher")
        page.locator('.jp-LauncherCard[title="Start a new terminal session"]').last.click()
        self.tree = page.locator(".jp-Terminal .xterm-accessibility-tree").last
        self.tree.wait_for(timeout=60_000)
        self.wait_for(re.compile(r"[$#]\s*$", re.M), 60)  # the prompt

    def text(self):
        return self.tree.inner_text().replace("\xa0", " ")

    def wait_for(self, pattern, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.text()
            if re.search(pattern, text):
                return text
            time.sleep(0.5)
        raise AssertionError(f"the terminal did not show {pattern!r} within {timeout} s:\n{self.text()}")

    def run(self, command, until, timeout=120):
        """Type ``command`` and Enter; the terminal's text once ``until`` (a regex) shows after it and the command has
        finished (the prompt is back, as the last line)."""
        self.page.locator(".jp-Terminal .xterm-helper-textarea").last.focus()
        self.page.keyboard.type("clear\n")
        time.sleep(0.5)
        self.page.keyboard.type(command + "\n")
        self.wait_for(until, timeout)
        return self.wait_for(re.compile(r"\n[^\n]*[$#] *(\n *)*$"), timeout)


def open_assignments(page, timeout=120):
    """The Assignments tab (Nbgrader > Assignment List), in front: the menu again while it is not (a notebook
    JupyterLab opens after an upload can come in front of it between the menu and the wait)."""
    end = time.monotonic() + timeout
    while True:
        try:
            menu(page, "Nbgrader", "Assignment List")
            page.locator("#released_assignments_list:visible").wait_for(timeout=15_000)
            return
        except Exception:
            if time.monotonic() > end:
                raise


def close_current_tab(page):
    """File > Close Tab, as a person closes the document in front."""
    menu(page, "File", "Close Tab")


def button_in(page, list_id, label):
    return page.locator(f"#{list_id}:visible button", has_text=re.compile(f"^{label}$"))


def in_assignments(page, list_id, label, act, timeout=120):
    """``act`` (a locator's ``click`` or ``wait_for``) on a button of the Assignments tab, bringing the tab to the
    front again while it fails: after an upload, JupyterLab opens the uploaded notebook seconds later, in front of
    it (on a busy machine after the Submit too)."""
    end = time.monotonic() + timeout
    while True:
        try:
            open_assignments(page, timeout=0)
            getattr(button_in(page, list_id, label), act)(timeout=5_000)
            return
        except Exception:
            if time.monotonic() > end:
                raise


def press_in_assignments(page, list_id, label, timeout=120):
    """Press a button of the Assignments tab (``in_assignments``)."""
    in_assignments(page, list_id, label, "click", timeout)


def wait_in_assignments(page, list_id, label, timeout=120):
    """Wait until the Assignments tab shows a button (``in_assignments``)."""
    in_assignments(page, list_id, label, "wait_for", timeout)


def open_folder(page, name):
    """Open a folder of the home folder in the file browser: select it, then Enter. (A double-click opens it too, but
    its second click can land on the folder's first file once the listing has changed, and open that.)"""
    page.locator(".jp-BreadCrumbs-home").first.click()
    item = page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=re.compile(
        f"^{re.escape(name)}$")))
    item.click()
    page.keyboard.press("Enter")
    page.locator(".jp-BreadCrumbs", has_text=name).first.wait_for(timeout=30_000)


def open_file(page, name):
    """Open a file of the file browser's folder: select it, then Enter."""
    page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=re.compile(
        f"^{re.escape(name)}$"))).click()
    page.keyboard.press("Enter")


def upload(page, local_path):
    """Upload ``local_path`` into the file browser's folder with its Upload button, replacing a file of that name."""
    with page.expect_file_chooser() as chooser:
        page.locator('.jp-FileBrowser-toolbar [title="Upload Files"]').first.click()
    chooser.value.set_files(local_path)
    overwrite = page.locator(".jp-Dialog button", has_text="Overwrite")
    try:
        overwrite.wait_for(timeout=10_000)
        overwrite.click()
    except Exception:
        pass  # no file of that name: nothing to confirm
    page.locator(".jp-DirListing-item", has_text=os.path.basename(local_path)).first.wait_for(timeout=60_000)


@contextlib.contextmanager
def jupyter_server(command, log_path, env, port, token, cwd=None):
    """A Jupyter server started by ``command`` (on 127.0.0.1:``port``, with ``token``): its URL once it answers
    (within 180 s: it starts beside the rest of make test), stopped after (killed if it takes over 60 s)."""
    with open(log_path, "w") as log:
        server = subprocess.Popen(command, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 180
        while True:
            assert server.poll() is None, open(log_path).read()
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=30).read()
                break
            except OSError:
                assert time.monotonic() < end, open(log_path).read()
                time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # busy beside the rest of make test: it is stopped all the same
            server.kill()
            server.wait(timeout=30)


@contextlib.contextmanager
def instructor_lab(root, log_path, env):
    """`course instructor-lab` on the course folder ``root``, as the README starts it, with a token of the test's:
    (its URL, the token) once it answers (``jupyter_server``)."""
    from coursekit.hub.setup import free_port
    port, token = free_port(), secrets.token_hex(16)
    course = os.path.join(os.path.dirname(sys.executable), "course")
    with jupyter_server([course, "instructor-lab", "--course", root, "--port", str(port), "--",
                         f"--IdentityProvider.token={token}"], log_path, env, port, token) as base:
        yield base, token


SHOTS = os.environ.get("COURSE_TEST_SHOTS", "/tmp/course-hub-shots")


@contextlib.contextmanager
def screenshot_on_failure(page, what):
    """A screenshot of ``page`` in ``SHOTS`` when the block fails (what the browser showed is in the failure)."""
    try:
        yield
    except BaseException as exc:
        os.makedirs(SHOTS, exist_ok=True)
        path = os.path.join(SHOTS, re.sub(r"[^A-Za-z0-9_.-]+", "-", what) + ".png")
        with contextlib.suppress(Exception):
            page.screenshot(path=path)
        exc.add_note(f"screenshot of the page: {path}")
        raise
