"""What a new instructor meets setting up `course hub` as the README writes it, part by part, without a hub running:
the users it creates can log in (a first password each, which PAM accepts as JupyterHub's PAMAuthenticator asks
it), a Python under /root is refused with the one command that sets the course up with one every user reaches,
the instructor's server starts in the course folder (where a terminal then opens), and a student's Nbgrader menu
has no Formgrader entry. (The whole hub in a browser: test_hub_class.py.) Cost: under 2 s."""
import os
import re
import secrets
import string
import subprocess
import sys
import types

import pytest
from hub_helpers import remove_users

from coursekit import ROOT
from coursekit.hub import setup as hub, access as hub_access

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates a Unix user: run as root (make test does)")


@as_root
@pytest.mark.pipeline  # makes Unix users or opens folders outside the clone: make test, not the fast loop
def test_the_users_the_hub_creates_get_a_first_password_that_pam_accepts(tmp_path):
    import pamela
    name = "ckpw-" + secrets.token_hex(3)
    listing = tmp_path / "state" / hub.PASSWORDS
    said = []
    try:
        made = hub_access.ensure_users([name], create=True, out=said.append, passwords=str(listing))
        assert made == [name]
        st = os.stat(listing)
        assert st.st_uid == 0 and st.st_mode & 0o777 == 0o600  # root's alone
        rows = listing.read_text().splitlines()
        assert rows[0] == "id,password" and rows[1].startswith(name + ",")
        password = rows[1].split(",", 1)[1]
        assert len(password) == 12 and set(password) <= set(string.ascii_letters + string.digits)
        pamela.authenticate(name, password, service="login")  # JupyterHub's PAMAuthenticator: service "login"
        with pytest.raises(pamela.PAMError):
            pamela.authenticate(name, password + "x", service="login")
        assert said == [f"created 1 Unix user, each with a first password, listed in {listing} (root's alone): "
                        f"give each person theirs; `passwd` in their JupyterLab terminal changes it"]
        assert password not in "".join(said)  # never printed
    finally:
        remove_users([name])


def test_a_python_other_users_cannot_reach_is_named_with_the_one_command_that_fixes_it(monkeypatch, tmp_path):
    """pyenv's Python under /root (0700): the message gives the command that sets the course up again with the
    system's Python (or the package that brings one), not a chmod that opens /root to every user."""
    closed = tmp_path / "home" / "pyenv"
    (closed / "bin").mkdir(parents=True)
    os.chmod(tmp_path / "home", 0o700)
    python = closed / "bin" / "python3"
    python.symlink_to(sys.executable)
    monkeypatch.setattr(hub_access.sys, "executable", str(python))
    monkeypatch.setattr(hub_access.sys, "prefix", str(closed))
    monkeypatch.setattr(hub_access, "closed_folders",
                        lambda p: [str(tmp_path / "home")] if str(p).startswith(str(closed)) else [])
    with pytest.raises(hub_access.HubError) as err:
        hub_access.users_python()
    text = str(err.value)
    assert "chmod" not in text and f"{tmp_path / 'home'} may not be entered by them" in text
    command = re.search(r"`([^`]+)`$", text).group(1)
    assert command == hub_access.python_for_everyone()
    assert command.endswith((f"make -C {ROOT} setup PYTHON=/usr/bin/python3.13",
                             f"make -C {ROOT} setup PYTHON=/usr/bin/python3.12",
                             f"make -C {ROOT} setup PYTHON=/usr/bin/python3.11"))


def _spawn_hook(course):
    """The generated jupyterhub_config.py's pre_spawn_hook and settings, read as JupyterHub reads the file."""
    from traitlets.config import Config
    keys = {k for _, k, _, _ in string.Formatter().parse(hub.HUB_CONFIG) if k}
    values = {k: f"/x/{k}" for k in keys}
    values.update(course=course, instructors={"teach"}, roles={"instructor": "/x/i", "student": "/x/s"},
                  python=sys.executable, users={"teach", "amy"}, grading_env={})
    c = Config()
    namespace = {"get_config": lambda: c, "c": c}
    exec(compile(hub.HUB_CONFIG.format(**values), "jupyterhub_config.py", "exec"), namespace)
    return c.Spawner.pre_spawn_hook, c


def test_the_instructors_server_starts_in_the_course_folder_where_a_terminal_opens(tmp_path):
    """JupyterHub starts a server in the user's home; the instructor's command changes to the course folder first,
    so the terminal JupyterLab asks for at the file browser's top (cwd "", which jupyter_server_terminals resolves
    against the server's own folder) opens there. A student's server is left as it is."""
    course = tmp_path / "my course"
    course.mkdir()
    hook, c = _spawn_hook(str(course))
    teach = types.SimpleNamespace(user=types.SimpleNamespace(name="teach"), environment={}, cmd=list(c.Spawner.cmd))
    hook(teach)
    assert teach.notebook_dir == str(course) and teach.cmd[-3:] == [sys.executable, "-m", "jupyterhub.singleuser"]
    # the command as the spawner runs it (its arguments after), from the home folder, as JupyterHub starts it
    probe = teach.cmd[:-3] + [sys.executable, "-c", "import os, pathlib, sys; print(os.getcwd()); "
                              "print(pathlib.Path('').resolve()); print(sys.argv[1:])", "--port=1"]
    out = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == [str(course), str(course), "['--port=1']"]
    amy = types.SimpleNamespace(user=types.SimpleNamespace(name="amy"), environment={}, cmd=list(c.Spawner.cmd))
    hook(amy)
    assert amy.notebook_dir == "~" and amy.cmd == [sys.executable, "-m", "jupyterhub.singleuser"]


@pytest.mark.pipeline  # reads the lab plugin `make node` builds (make test does; the fast loop does not)
def test_a_students_nbgrader_menu_has_no_formgrader_entry(tmp_path):
    """nbgrader's menu lists Formgrader whenever a plugin registers its command; on the hub the course's hub-lab
    extension registers it (a tab of its own): a student's lab disables that plugin, by the id the extension gives
    it, as it disables nbgrader's own. The extension is read as the hub's labs load it: what `make node` built from
    node/hub-lab into hub.LAB_EXTENSIONS (a missing build fails with that command)."""
    import json

    from hub_helpers import hub_lab_build
    meta, built = hub_lab_build()
    name, plugin = meta["name"], ":formgrader-tab"
    assert f'"{name}' in built and f'{plugin}"' in built, f"no {plugin} plugin in the build of {name}"
    assert '"nbgrader:open-formgrader"' in built.split(f'{plugin}"')[1].split(':view-feedback"')[0]
    folders = hub.role_settings(str(tmp_path / "state"), str(tmp_path / "exchange"), os.path.join(ROOT, "course"))
    disabled = {r: json.load(open(os.path.join(f, "labconfig", "page_config.json")))["disabledExtensions"]
                for r, f in folders.items()}
    assert disabled["student"].get(name + plugin) is True and "@jupyter/nbgrader:formgrader" in disabled["student"]
    assert name + plugin not in disabled["instructor"]  # the instructor's Formgrader is that plugin's
    for role, off in disabled.items():  # everyone keeps the feedback's link and the submission's notification
        assert not {name + ":view-feedback", name + ":submit-notification"} & set(off), (role, off)


def test_course_hub_help_states_the_exchanges_modes_as_the_code_makes_them(capsys):
    """`course hub --help` says the modes the exchange's folders get (coursekit.exchange.commands, coursekit.exchange.classes),
    so an administrator reading it sees what the hub will do."""
    import re

    from coursekit.exchange import classes as ce
    from coursekit.cli import main
    from coursekit.exchange.commands import HUB_EXCHANGE_MODE
    with pytest.raises(SystemExit):
        main(["hub", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    for mode in (HUB_EXCHANGE_MODE, ce.COURSE_FOLDER_MODE, ce.OUTBOUND_MODE, ce.OUTBOUND_STUDENTS_MODE,
                 ce.INBOUND_MODE, ce.FEEDBACK_MODE):
        assert re.search(rf"\b{mode:04o}\b|\b{mode:o}\b", said), (oct(mode), said)
