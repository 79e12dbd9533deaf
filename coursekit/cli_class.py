"""The `course` commands of a class with nbgrader's exchange: ``course hub`` (a JupyterHub on this machine, as root:
coursekit/hub/setup.py, and several courses or LTI login: coursekit/hub/courses.py, lti.py), ``course release``, ``collect``
and ``return`` (coursekit/exchange/commands.py), ``course extend`` (nbgrader's extension) and ``course late`` (the
late penalties worked out again; both coursekit/extend.py) and ``course instructor-lab``. coursekit/cli.py adds them
to ``course``."""
import os
import sys

from .paths import COURSE_DIR, ROOT


def add_class_commands(sub):
    """The class's commands on ``course``'s subparsers."""
    p = sub.add_parser("hub", help="instructors: a JupyterHub for the course on this machine (as root)")
    p.add_argument("--roster", default=None, help="CSV of the students: id,name (ids are Unix user names)")
    p.add_argument("--instructor", action="append", default=[], help="an instructor's Unix user name (repeatable)")
    p.add_argument("--create-users", action="store_true", help="create the missing Unix users (useradd; root)")
    p.add_argument("--ip", default="127.0.0.1", help="address the hub listens on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or course/)")
    p.add_argument("--exchange", default="/srv/nbgrader/exchange",
                   help="nbgrader's exchange (made root's, 0755: the hub makes each course's folder in it, and no "
                        "user may add anything at its top level; a course's folder is 2755, its outbound 2755 (2750, "
                        "the course's students' group's, on a hub of several courses), its inbound 3773 (a student "
                        "adds a submission only they and the instructors read) and its feedback 2771; docs/hub.md "
                        "has the table)")
    p.add_argument("--state", default=os.path.join(ROOT, "hub", "state"),
                   help="the hub's database, secret and settings (keep it: users and servers survive a restart)")
    p.add_argument("--extra-config", default=None, help="a jupyterhub_config.py read after the course's")
    p.add_argument("--courses", default=None, help="several courses: a TOML file of [[course]] tables (folder, "
                                                   "instructors, roster), in place of --instructor and --roster")
    p.add_argument("--lti", default=None, help="login from the LMS by LTI 1.3: a TOML file naming the platform and "
                                               "its [[course]] tables (folder, context_id)")
    p.set_defaults(func=cmd_hub)
    for name, what in (("release", "generate, then release to the exchange"),
                       ("collect", "collect each student's latest submission from the exchange"),
                       ("return", "generate the feedback and release it to the exchange")):
        p = sub.add_parser(name, help=f"instructors: {what}")
        p.add_argument("assignment", nargs="+")
        p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or course/)")
        p.add_argument("--exchange", default=None, help="nbgrader's exchange (default: the course's setting)")
        if name == "return":
            p.add_argument("--lms", action="store_true", help="then post each student's score to the LMS (a hub "
                                                              "started with --lti)")
        p.set_defaults(func=_exchange_step(name))
    p = sub.add_parser("extend", help="instructors: a later due date for some students (nbgrader's extension)")
    p.add_argument("assignment")
    p.add_argument("student", nargs="+", help="student ids, as the gradebook has them")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--until", metavar="DATE", help="their due date: YYYY-MM-DD HH:MM in UTC, or ISO 8601 with an "
                                                      "offset (2026-12-10T17:00+01:00)")
    when.add_argument("--by", metavar="HOURS", help="hours past the assignment's due date")
    when.add_argument("--remove", action="store_true", help="take their extension away")
    p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or course/)")
    p.set_defaults(func=cmd_extend)
    p = sub.add_parser("late", help="instructors: the late penalties of an assignment worked out again (after a "
                                    "new due date or late policy), and the feedback made again; no regrading")
    p.add_argument("assignment")
    p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or course/)")
    p.set_defaults(func=cmd_late)
    p = sub.add_parser("instructor-lab", help="instructors: JupyterLab on the course folder with the formgrader")
    p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or course/)")
    p.add_argument("--exchange", default=None, help="nbgrader's exchange (default: the course's setting)")
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--port", default="8888")
    p.add_argument("--browser", action="store_true", help="open a browser window")
    p.add_argument("jupyter_args", nargs="*", help="passed on to `jupyter lab` (after --)")
    p.set_defaults(func=cmd_instructor_lab)


def write_json(path, data):
    import json
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=1)


def course_default():
    """The course folder: --course, else $COURSE_ROOT (set in an instructor's server on the hub), else course/."""
    return os.environ.get("COURSE_ROOT") or COURSE_DIR


def _with_exchange(args):
    if getattr(args, "exchange", None):  # the course's nbgrader_config.py reads it
        os.environ["COURSE_EXCHANGE"] = os.path.abspath(args.exchange)
    return os.path.abspath(args.course)


def cmd_hub(args):
    """Start a JupyterHub for the course on this machine (coursekit/hub/setup.py says what each user gets; several courses
    and LTI login: coursekit/hub/courses.py and coursekit/hub/lti.py)."""
    from .exchange.commands import ExchangeError
    from .hub.access import HubError
    if args.courses or args.lti:
        from .hub.courses import prepare_courses as prepare
    elif args.roster:
        from .hub.setup import prepare_one_course as prepare
    else:
        print("course hub: give the class: --instructor NAME --roster roster.csv (one course), --courses FILE "
              "(several), or --lti FILE (login from the LMS)", file=sys.stderr)
        return 2
    from grader import sandbox
    try:  # before anything is made: the hub's grading service runs every submission in the sandbox
        sandbox.bwrap_path()
    except sandbox.SandboxUnavailable as exc:
        print(f"course hub: the hub grades in a sandbox: {exc}. Nothing was set up.", file=sys.stderr)
        return 2
    try:
        cmd, cwd, env = prepare(args)
    except (HubError, ExchangeError) as exc:
        print(f"course hub: {exc}", file=sys.stderr)
        return 2
    print("starting JupyterHub; stop it with Ctrl-C", flush=True)
    os.chdir(cwd)
    os.execve(sys.executable, cmd, env)  # become the hub: stopping this process stops it (and the users' servers)


def _exchange_step(name):
    """The command `course NAME A ...`: ``coursekit.exchange.commands``'s step for each assignment in turn (release, collect,
    return_feedback); exits 2 on the exchange's refusal, 1 when collect refused a folder or return returned
    nothing. `course return A --lms` then posts each student's score for A to the LMS (coursekit/lms/return_grades.py),
    exiting 1 when a post failed and 2 when nothing could be posted."""
    def command(args):
        from .exchange import commands as exchange
        step = getattr(exchange, {"return": "return_feedback"}.get(name, name))
        root = _with_exchange(args)
        worst = 0
        try:
            for a in args.assignment:
                done = step(root, a)
                if (name == "return" and not done) or (name == "collect" and done.refused):  # said, and exit 1
                    worst = 1
                if name == "return" and args.lms:
                    from .lms.return_grades import post_scores
                    worst = max(worst, post_scores(root, a, err=lambda line: print(line, file=sys.stderr)))
        except exchange.ExchangeError as exc:
            print(f"course {name}: {exc}", file=sys.stderr)
            return 2
        return worst
    return command


def cmd_extend(args):
    """`course extend A STUDENT... (--until DATE | --by HOURS | --remove)`: nbgrader's extension (coursekit/extend.py);
    exits 2, having changed nothing, on what it refuses."""
    from .extend import ExtendRefused, extend
    try:
        extend(os.path.abspath(args.course), args.assignment, args.student, until=args.until, hours=args.by,
               remove=args.remove)
    except ExtendRefused as exc:
        print(f"course extend: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_late(args):
    """`course late A`: every graded submission's late penalty worked out again (coursekit/extend.py late_again)."""
    from .extend import ExtendRefused, late_again
    try:
        late_again(os.path.abspath(args.course), args.assignment)
    except ExtendRefused as exc:
        print(f"course late: {exc}", file=sys.stderr)
        return 2
    return 0


def instructor_settings(env):
    """The instructor's JupyterLab settings under ``env``'s JUPYTER_CONFIG_DIR (the course's .jupyter, never
    $HOME): no news, no update check, and the formgrader's pages escaped and under a Content-Security-Policy (the
    extension the hub's instructor servers load, ``coursekit.hub.formgrader_tab``); the course's lab plugins, as on the
    hub (the class report's links opened in the lab), but for the formgrader's: here nbgrader's own menu item frames
    it."""
    from .hub.formgrader_tab import EXTENSION
    from .hub.setup import LAB_EXTENSIONS, NO_NEWS
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (LAB_EXTENSIONS, env.get("JUPYTER_PATH")) if p)
    config = env["JUPYTER_CONFIG_DIR"]
    write_json(os.path.join(config, "jupyter_server_config.json"),
               {"LabApp": dict(NO_NEWS), "ServerApp": {"jpserver_extensions": {EXTENSION: True}}})
    write_json(os.path.join(config, "labconfig", "page_config.json"),
                {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True,
                                        "@attention-course/hub-lab:formgrader-tab": True}})
    return env


def cmd_instructor_lab(args):
    """Instructors: JupyterLab on the course folder, with the formgrader and the exchange ready."""
    from .exchange.commands import ExchangeError, check_exchange, exchange_root
    from .pipeline import nbgrader_env
    root = _with_exchange(args)
    try:
        exchange = check_exchange(exchange_root(root), create=True)
    except ExchangeError as exc:
        print(f"course instructor-lab: {exc}", file=sys.stderr)
        return 2
    env = instructor_settings(nbgrader_env(root))
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={root}", f"--ServerApp.ip={args.ip}",
           f"--ServerApp.port={args.port}", f"--ServerApp.open_browser={args.browser}", *args.jupyter_args]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    print(f"starting JupyterLab on the course {root} (exchange {exchange}); the formgrader is in the Nbgrader "
          f"menu, or at http://{args.ip}:{args.port}/formgrader; stop it with Ctrl-C", flush=True)
    os.chdir(root)  # the formgrader reads nbgrader_config.py from here
    os.execve(sys.executable, cmd, env)
