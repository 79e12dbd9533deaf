"""A class on a JupyterHub, on one machine: ``course hub``.

    sudo .venv/bin/course hub --instructor NAME --roster roster.csv [--create-users] [--port 8000]

The course's instructors and the students of a roster (a CSV of ``id,name``) are local Unix users; they log in
with their Unix passwords (PAM). Each user's server is the course's install (this project's ``.venv``,
``jupyterhub-singleuser``), started as that user by JupyterHub's ``LocalProcessSpawner``:

* an instructor's JupyterLab opens on the course folder, with the formgrader (Nbgrader > Formgrader) and the
  ``course`` commands in its terminal (``COURSE_ROOT`` and ``COURSE_EXCHANGE`` set);
* a student's JupyterLab opens on their home folder with the Assignments tab (Nbgrader > Assignment List: fetch,
  submit, fetch feedback) and the Validate button, without the instructor's panels (formgrader, create
  assignment, course list) and with the student bundle's packages (``course bundle``: the visible checks, no
  reference) ahead of the project's;
* nobody gets the news or the update pop-up.

nbgrader's exchange is a folder every user reaches (``--exchange``), root's (0755): the hub makes each course's
folder in it, and no user may add anything at its top level, so a student cannot invent a course. The hub's
own files (its database, cookie secret, generated configuration, the role settings) live in ``--state``; the
proxy is configurable-http-proxy and the course's lab plugin is built from ``node/hub-lab``, both by ``make node``
beforehand (pinned in ``node/package-lock.json`` and ``node/hub-lab/package-lock.json``): nothing is downloaded when
the hub starts.

Several courses on one hub (``--courses FILE``) and login from the LMS by LTI 1.3 (``--lti FILE``) are
``coursekit/hub/courses.py`` and ``coursekit/hub/lti.py``, built on what this module does for one course.
"""
import contextlib
import errno
import json
import os
import pwd
import shlex
import shutil
import socket
import stat
import sys

from learner.handin import LIMITS

from ..paths import ROOT
from ..words import counted
from . import formgrader_tab
from .root_files import listed, write_atomic
from .access import (REFERENCE_FOLDER, HubError, commands_giving_course, course_problems, enrol_roster, ensure_users,
                     give_to_staff, not_listed, read_roster, stale_problems, take_out, staff_group, users_python)

PROXY = os.path.join(ROOT, "node", "node_modules", ".bin", "configurable-http-proxy")

# what a student's JupyterLab leaves out (the Assignments tab, Validate and the Nbgrader menu stay)
STUDENT_HIDDEN_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                          "@jupyter/nbgrader:course-list",
                          "@attention-course/hub-lab:formgrader-tab")  # the course's Nbgrader > Formgrader (a 404)
STUDENT_OFF_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")
NO_NEWS = {"check_for_updates_class": "jupyterlab.NeverCheckForUpdate", "news_url": None}
# nbgrader's formgrader plugin frames the formgrader in the lab, which a hub's servers refuse; the course's hub-lab
# extension (on every user's JUPYTER_PATH) opens it in a browser tab of its own instead
INSTRUCTOR_FRAMED_FORMGRADER = "@jupyter/nbgrader:formgrader"
LAB_EXTENSIONS = os.path.join(ROOT, "node", "share", "jupyter")  # built by `make node` from node/hub-lab
# the hub's settings that reach its grading service: the sandbox's limits (COURSE_SANDBOX_MEMORY_MB, ...)
GRADING_SETTINGS = ("COURSE_SANDBOX_", "COURSE_GRADING_MEMORY_MB", "COURSE_SERVICE_MEMORY_MB")
# every user's terminal keeps its text in the page (xterm's screen-reader mode), for a screen reader to read
TERMINAL_SETTINGS = {"@jupyterlab/terminal-extension:plugin": {"screenReaderMode": True}}
# in the hub's state: the first password of each user --create-users made (access.ensure_users), root's alone
PASSWORDS = "passwords.csv"


# ------------------------------------------------------------------ checks
def check_port(ip, port):
    """A clear error when ``ip:port`` is taken (a hub already running there, or anything else)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # as the proxy binds: a listener there refuses us, connections of a stopped hub still closing do not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise HubError(f"port {port} on {ip} is already in use (is a hub already running there? "
                               f"`course hub` twice on one port): stop the other one or pass --port") from None
            raise HubError(f"cannot listen on {ip}:{port}: {exc.strerror}") from None


def free_port(ip="127.0.0.1"):
    with socket.socket() as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def exchange_for_class(root, course, instructors, students, course_id=None):
    """nbgrader's exchange at ``root`` as a hub needs it (root's, mode 0755, reachable by everyone, nobody else
    adds to it), and the course's folder in it made now, as root, the first instructor's and the course folder's
    group's: no student can make a course folder of their own, nor this one before the hub. Returns the root. (``course_id``: the course's
    id when the caller knows it, rather than reading the course folder's nbgrader_config.py.)"""
    from ..exchange.classes import close_course_folder, problems_of_course_folder
    from ..exchange.commands import check_exchange
    from ..exchange.course_id import course_id_of
    root = check_exchange(root, create=True, shared=True)
    folder = os.path.join(root, course_id or course_id_of(course))
    owner, gid = pwd.getpwnam(instructors[0]).pw_uid, os.stat(course).st_gid
    if os.path.lexists(folder) and os.lstat(folder).st_uid not in (owner, 0):
        raise HubError(f"{folder} is owned by {pwd.getpwuid(os.lstat(folder).st_uid).pw_name}, not by the instructor "
                       f"{instructors[0]}: someone made it before the course; move it away and start the hub again")
    close_course_folder(folder, gid=gid, uid=owner)
    problems = problems_of_course_folder(folder, gid, students, owners=set(instructors))
    if problems:
        raise HubError("the exchange's course folder is not as a class needs it:\n  " + "\n  ".join(problems))
    return root


def proxy_command():
    if not os.access(PROXY, os.X_OK):
        raise HubError(f"the hub's proxy is not installed ({PROXY}): run `make -C {ROOT} node` (Node 20.19 or later; it "
                       f"installs configurable-http-proxy as pinned in node/package-lock.json and builds the lab plugin)")
    return PROXY


# ------------------------------------------------------------------ configuration
def login_shell_with_course(bin_dir):
    """The instructor's terminal: a login shell (the system's and the user's profile read as usual), then an
    interactive shell with the course's commands first on PATH. Debian's and Ubuntu's /etc/profile set PATH anew in
    every login shell, so a PATH given to the server alone does not reach a terminal."""
    return ["/bin/bash", "-l", "-c", f'PATH={shlex.quote(bin_dir)}:"$PATH"; export PATH; exec /bin/bash -i']


def role_settings(state, exchange, course):
    """The Jupyter configuration folders of the two roles (on each server's JUPYTER_CONFIG_PATH); returns
    {role: folder}."""
    folders = {}
    for role in ("student", "instructor"):
        folder = os.path.join(state, "jupyter", role)
        server = {"LabApp": dict(NO_NEWS)}
        hidden = {"@jupyterlab/apputils-extension:announcements": True}
        # a terminal's `python` is the course's (the kernels' Python), and an instructor's `course` the course's
        terminal = {"shell_command": login_shell_with_course(os.path.dirname(sys.executable))}
        if role == "instructor":
            # the formgrader in a tab of its own (hub-lab's command), with its links to this server's lab, its
            # pages escaped and under a Content-Security-Policy
            hidden[INSTRUCTOR_FRAMED_FORMGRADER] = True
            server["ServerApp"] = {"jpserver_extensions": {formgrader_tab.EXTENSION: True},
                                   "terminado_settings": terminal}
        if role == "student":
            server["ServerApp"] = {"jpserver_extensions": {**{n: False for n in STUDENT_OFF_SERVER_EXTENSIONS},
                                                           "learner.lab_server": True},  # due dates, fresh copy
                                   "terminado_settings": terminal}
            hidden.update({n: True for n in STUDENT_HIDDEN_PLUGINS})
            from ..exchange.course_id import course_id_of  # the course's own id: its folder in the exchange
            nbgrader = student_nbgrader_config([course_id_of(course)], exchange)
        else:
            nbgrader = (f"c = get_config()  # noqa: F821\n# the course folder's nbgrader_config.py is read on top\n"
                        f"c.CourseDirectory.root = {course!r}\n")
        write_atomic(os.path.join(folder, "jupyter_server_config.json"), json.dumps(server, indent=1))
        write_atomic(os.path.join(folder, "labconfig", "page_config.json"),
               json.dumps({"disabledExtensions": hidden}, indent=1))
        write_atomic(os.path.join(folder, "labconfig", "default_setting_overrides.json"),
               json.dumps(TERMINAL_SETTINGS, indent=1))
        write_atomic(os.path.join(folder, "nbgrader_config.py"), nbgrader)
        for d in (folder, os.path.join(folder, "labconfig")):
            os.chmod(d, 0o755)
        folders[role] = folder
    return folders


def student_nbgrader_config(course_ids, exchange):
    """A student's nbgrader settings: the hub's courses alone (``learner.submit``: the courses the hub gives the
    student, a fetch that copies only what instructors wrote, a private submission); one course, named; several, none
    named, so that the Assignments tab lists each of the student's courses (nbgrader's pattern for several
    classes)."""
    lines = ["c = get_config()  # noqa: F821", f"c.Exchange.root = {exchange!r}",
             "# the courses the hub gives this student (COURSE_IDS, set at each server start), and no other folder",
             "c.Authenticator.plugin_class = 'learner.submit.HubCourses'",
             "# a fetch that follows no link and copies only what the course's instructors wrote",
             "c.ExchangeFactory.fetch_assignment = 'learner.submit.CourseFetch'",
             "# the exchange's root is the hub's (root's): list and fetch feedback without writing there",
             "c.ExchangeFactory.list = 'learner.submit.CourseList'",
             "c.ExchangeFactory.fetch_feedback = 'learner.submit.CourseFetchFeedback'",
             "# a submission only its student and the instructors may read, refused as collect would refuse it",
             "c.ExchangeFactory.submit = 'learner.submit.PrivateSubmit'",
             f"c.CourseDirectory.max_file_size = {LIMITS.file_bytes // 1000}  # kB, learner.handin's, as collect's",
             f"c.CourseDirectory.max_dir_size = {LIMITS.total_bytes // 1000}  # kB"]
    if len(course_ids) == 1:
        lines.append(f"c.CourseDirectory.course_id = {course_ids[0]!r}")
    else:
        lines += ["# several courses: none named here; each assignment is fetched into ~/<course id>/<assignment>/",
                  "c.Exchange.path_includes_course = True"]
    return "\n".join(lines) + "\n"


def student_packages(state):
    """The student bundle's packages (``course bundle``'s package/: the visible checks and the learner's helpers,
    no reference), copied into ``state`` at each start: students' kernels import ``grader`` and ``coursekit``
    from here."""
    from ..bundle import copy_package
    out = os.path.join(state, "student-packages")
    if os.path.exists(out):
        shutil.rmtree(out)
    copy_package(out)
    for here, dirs, files in os.walk(out):
        os.chmod(here, 0o755)
        for f in files:
            os.chmod(os.path.join(here, f), 0o644)
    return out


HUB_CONFIG = '''\
# Generated by `course hub` at each start: change the command's options, not this file.
c = get_config()  # noqa: F821

c.JupyterHub.bind_url = {bind_url!r}
c.JupyterHub.hub_bind_url = {hub_bind_url!r}
c.JupyterHub.db_url = {db_url!r}
c.JupyterHub.cookie_secret_file = {cookie!r}
c.JupyterHub.pid_file = {pid!r}
c.ConfigurableHTTPProxy.command = [{proxy!r}]
c.ConfigurableHTTPProxy.api_url = {proxy_api!r}
c.ConfigurableHTTPProxy.pid_file = {proxy_pid!r}

# local passwords; the users are the course's Unix users
c.JupyterHub.authenticator_class = "pam"
c.Authenticator.allowed_users = {users!r}

# each user's server is the course's install, started as that user
c.JupyterHub.spawner_class = "localprocess"
SERVER = [{python!r}, "-m", "jupyterhub.singleuser"]
IN_COURSE_FOLDER = ["/bin/sh", "-c", 'cd -- "$0" && exec "$@"', {course!r}]
c.Spawner.cmd = SERVER
c.Spawner.default_url = "/lab"
# a user who logs in lands in their JupyterLab: their server starts by itself (JupyterHub's default since 4 is a page
# with a "Launch Server" button)
c.JupyterHub.implicit_spawn_seconds = 1
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 180

# grading with the full separation: the course's grading service, run by the hub as root
# (coursekit/hub/service.py); the instructors' `course grade` and Autograde send each submission there
c.JupyterHub.services = [{{"name": "course-grading", "command": [{python!r}, "-m", "coursekit.hub.service",
                                                                {grading_config!r}], "cwd": {state!r},
                           "environment": {grading_env!r}}}]
GRADING_URL = {grading_url!r}

INSTRUCTORS = {instructors!r}
ROLE_CONFIG = {roles!r}
COURSE = {course!r}
EXCHANGE = {exchange!r}
STUDENT_PACKAGES = {packages!r}
COURSE_IDS = {course_ids!r}
PATH = {path!r}
LAB_EXTENSIONS = {lab_extensions!r}


def course_environment(spawner):
    """The role's settings, and the instructor's course folder."""
    name = spawner.user.name
    env = dict(spawner.environment)
    env["PATH"] = PATH
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["JUPYTER_PATH"] = LAB_EXTENSIONS  # the course's hub-lab plugins
    if name in INSTRUCTORS:
        env.update(JUPYTER_CONFIG_PATH=ROLE_CONFIG["instructor"], COURSE_ROOT=COURSE, COURSE_EXCHANGE=EXCHANGE,
                   COURSE_GRADING_URL=GRADING_URL)
        spawner.notebook_dir = COURSE
        # the server started in the course folder (JupyterHub starts it in the home folder): a terminal opened at
        # the file browser's top is asked for "", which jupyter_server_terminals resolves against that folder
        spawner.cmd = IN_COURSE_FOLDER + SERVER
    else:
        env.update(JUPYTER_CONFIG_PATH=ROLE_CONFIG["student"], PYTHONPATH=STUDENT_PACKAGES, COURSE_IDS=COURSE_IDS,
                   COURSE_GRADING_URL=GRADING_URL)  # their due dates (learner.lab_server asks GET /due)
        spawner.notebook_dir = "~"
    spawner.environment = env


c.Spawner.pre_spawn_hook = course_environment
'''


# what of the hub's state every user's server reads (the role settings, the student bundle's packages, the tool's public
# key); everything else in it (the database, the cookie secret, tokens, logs, the hub's own state) is root's alone
PUBLIC_STATE = ("jupyter", "courses", "student-packages", "lti-tool-public-key.json")
# the database, which JupyterHub would create with its umask (0644): made 0600 first (SQLite gives its journal files
# the database's mode); the cookie secret, which JupyterHub would write with its umask and chmod only afterwards:
# made here, 0600 from the start; the pid files, which JupyterHub removes and writes anew at each start, are in a
# folder of root's alone
MADE_PRIVATE = ("jupyterhub.sqlite",)
COOKIE_SECRET = "jupyterhub_cookie_secret"
RUN = "run"


def close_state(state):
    """The hub's state folder closed to its users: the folder itself 0711 (entered, never listed), the public parts
    above as they are, everything else without group or other permissions, and the files JupyterHub will create
    made 0600 beforehand."""
    os.chmod(state, 0o711)
    os.makedirs(os.path.join(state, RUN), mode=0o700, exist_ok=True)
    for name in MADE_PRIVATE:
        path = os.path.join(state, name)
        if not os.path.lexists(path):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    if not os.path.lexists(os.path.join(state, COOKIE_SECRET)):
        import secrets
        write_atomic(os.path.join(state, COOKIE_SECRET), secrets.token_hex(32) + "\n", mode=0o600)
    for entry in os.scandir(state):
        if entry.name in PUBLIC_STATE:
            continue
        _close(entry.path)


def _close(path):
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    if stat.S_ISDIR(st.st_mode):
        for entry in os.scandir(path):
            _close(entry.path)


def write_config(state, *, course, exchange, students, instructors, ip, port, extra_config=None):
    """The hub's configuration in ``state`` (and the role settings beside it); returns its path."""
    state = os.path.abspath(state)
    os.makedirs(state, exist_ok=True)
    os.chmod(state, 0o711)  # the users' servers read the role settings in it, by name; everything else is root's
    roles = role_settings(state, exchange, course)
    packages = student_packages(state)
    python = users_python()
    commands = os.path.dirname(python)
    from . import service
    grading_port, hub_port = free_port(), free_port()
    grading_config = service.write_service_config(state, grading_port, f"http://127.0.0.1:{hub_port}/hub/api",
                                              {course: instructors}, extra={"exchange": exchange})
    text = HUB_CONFIG.format(
        grading_config=grading_config, grading_url=f"http://127.0.0.1:{grading_port}", state=state,
        grading_env={k: v for k, v in os.environ.items() if k.startswith(GRADING_SETTINGS)},
        bind_url=f"http://{ip}:{port}", hub_bind_url=f"http://127.0.0.1:{hub_port}",
        db_url="sqlite:///" + os.path.join(state, "jupyterhub.sqlite"),
        cookie=os.path.join(state, COOKIE_SECRET), pid=os.path.join(state, RUN, "jupyterhub.pid"),
        proxy=proxy_command(), proxy_api=f"http://127.0.0.1:{free_port()}",
        proxy_pid=os.path.join(state, RUN, "proxy.pid"), users=set(students) | set(instructors),
        python=python, instructors=set(instructors), roles=roles,
        course=course, exchange=exchange, packages=packages, course_ids=_course_id(course),
        path=os.pathsep.join([commands, "/usr/local/bin", "/usr/bin", "/bin"]), lab_extensions=LAB_EXTENSIONS)
    if extra_config:
        text += f"\n# --extra-config\nload_subconfig({os.path.abspath(extra_config)!r})  # noqa: F821\n"
    path = os.path.join(state, "jupyterhub_config.py")
    write_atomic(path, text, mode=0o600)
    close_state(state)
    return path


def _course_id(course):
    from ..exchange.course_id import course_id_of
    return course_id_of(course)


def as_root():
    """A HubError unless this process is root: the hub starts each user's server as that user."""
    if os.geteuid() != 0:
        raise HubError("the hub starts each user's server as that user, so it runs as root: "
                       "`sudo .venv/bin/course hub ...`")


def machine_problems(args):
    """What this machine lacks for a hub, each a sentence: the port free, the install's Python open to every user,
    the proxy installed."""
    problems = []
    for check in (lambda: check_port(args.ip, args.port), users_python, proxy_command):
        try:
            check()
        except HubError as exc:
            problems.append(str(exc))
    return problems


def setuid_warning(users):
    """A sentence when the users' homes or /tmp are on a filesystem mounted without ``nosuid``: there a student can
    hand a group of theirs (their course's students' group) to anyone, and keep it after leaving the course, with a
    set-group-id file of their own; None when every one is ``nosuid``."""
    import pwd
    places = {"/tmp"}
    for name in users:
        with contextlib.suppress(KeyError):
            places.add(pwd.getpwnam(name).pw_dir)
    open_ones = sorted(p for p in places if os.path.isdir(p) and not os.statvfs(p).f_flag & os.ST_NOSUID)
    if not open_ones:
        return None
    return (f"note: {', '.join(open_ones[:5])}{' and more' if len(open_ones) > 5 else ''} "
            f"{'is' if len(open_ones) == 1 else 'are'} on a filesystem mounted without nosuid: a student could give "
            f"anyone their course group's access with a set-group-id file (and keep it after leaving the course); "
            f"mount the users' homes and /tmp with nosuid (docs/threat-model.md)")


def hub_command(config, exchange):
    """(command, env) that start JupyterHub on ``config``, with this install's commands on its PATH and the
    exchange its users' nbgrader reads."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["COURSE_EXCHANGE"] = exchange
    return [sys.executable, "-m", "jupyterhub", "-f", config], env


def prepare_one_course(args, out=print):
    """Everything ``course hub`` checks and writes before the hub starts; returns (command, cwd, env). Every problem
    it finds is named in one HubError, each with what to change."""
    as_root()
    if not args.instructor:
        raise HubError("name the course's instructor(s): --instructor NAME (a local Unix user)")
    problems, students, roster = [], [], []
    course = os.path.abspath(args.course)
    try:
        roster = read_roster(args.roster)
        students = [sid for sid, _ in roster]
    except HubError as exc:
        problems.append(str(exc))
    both = sorted(set(students) & set(args.instructor))
    if both:
        problems.append(f"{', '.join(both)} is both an instructor and on the roster: one role each")
    problems += machine_problems(args)
    if not os.path.isfile(os.path.join(course, "nbgrader_config.py")):
        problems.append(f"{course} is not a course folder (no nbgrader_config.py): give --course")
    if problems:  # nothing is created while the basics are wrong
        raise HubError(listed(problems))
    ensure_users(list(args.instructor) + students, create=args.create_users, out=out,
                 passwords=os.path.join(os.path.abspath(args.state), PASSWORDS))
    stale = not_listed(staff_group(course), args.instructor)  # a teaching assistant no longer named --instructor
    if args.create_users:
        give_to_staff(course, args.instructor, out=out)
        take_out(stale, out)
        stale = []
    stale_said, stale_fixes = stale_problems(stale)
    problems = course_problems(course, args.instructor, students) + stale_said
    if problems:
        fixes = "\n".join(f"    {c}" for c in commands_giving_course(course, args.instructor, staff_group(course),
                                                                     REFERENCE_FOLDER) + stale_fixes)
        raise HubError(listed(problems) + f"\nas root, either run `course hub` with --create-users, which does "
                                           f"this itself, or:\n{fixes}")
    enrol_roster(course, roster, out=out)
    exchange = exchange_for_class(os.path.abspath(args.exchange), course, args.instructor, students)
    config = write_config(args.state, course=course, exchange=exchange, students=students,
                          instructors=args.instructor, ip=args.ip, port=args.port, extra_config=args.extra_config)
    cmd, env = hub_command(config, exchange)
    warning = setuid_warning(list(args.instructor) + students)
    if warning:
        out(warning)
    out(f"JupyterHub for {counted(len(students), 'student')} and {counted(len(args.instructor), 'instructor')} on "
        f"http://{args.ip}:{args.port}; course {course}; exchange {exchange}; state {os.path.abspath(args.state)}")
    return cmd, os.path.abspath(args.state), env
