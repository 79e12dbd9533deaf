"""Several courses on one hub: ``course hub --courses FILE`` (Unix passwords) and ``course hub --lti FILE`` (LTI 1.3,
``coursekit/hub/lti.py``), and the hub's state that both keep.

    sudo .venv/bin/course hub --courses courses.toml [--create-users] [--exchange DIR] [--port 8000]

``courses.toml`` has one ``[[course]]`` table per course folder::

    [[course]]
    folder = "/srv/courses/enc101"        # a course folder; its nbgrader_config.py names its course id
    instructors = ["alice"]               # Unix users (one course each)
    roster = "enc101-roster.csv"          # id,name a row, as --roster (relative to this file)

    [[course]]
    folder = "/srv/courses/dec102"
    instructors = ["bob"]
    roster = "dec102-roster.csv"

Each course keeps what one course has on a hub (``coursekit/hub/setup.py``): its folder, the instructors' and the course
folder's group ``<course id>-staff``, its gradebook, its folder in the exchange (``<exchange>/<course id>/``), its
formgrader in each of its instructors' own servers, graded by the hub's one grading service, whose configuration
names every course with its instructors. What several courses add:

* a group ``<course id>-students`` per course (its students and its instructors): the exchange's outbound of the
  course is that group's alone (2750, ``coursekit.exchange.classes.outbound_access``), so a student of another
  course cannot fetch its assignments, nor list them;
* the students' servers name no course (nbgrader's pattern for several classes: ``Exchange.path_includes_course``,
  assignments fetched into ``~/<course id>/<assignment>/``): the Assignments tab lists every course whose outbound
  the student may read, one course at a time in its course menu;
* the reference answers (``solutions/``) are the group ``course-reference``'s, every course's instructors;
* a user is an instructor of one course, or a student of any number of them, never both on one hub.

The hub's state (``STATE/courses.json``, root's alone) says who is an instructor or a student of which course, each
student's LMS user id and each course's LTI context and line items (what ``course return --lms`` posts to); the
hub reads it at each server start (``spawn_hook``), the LTI launches bring it up to date, and the grading service
reads it to post grades.
"""
import grp
import os
from dataclasses import dataclass, field

from .root_files import listed, load_toml, write_atomic
from .setup import (LAB_EXTENSIONS, as_root, exchange_for_class, hub_command, machine_problems,
                    close_state, role_settings, setuid_warning, student_nbgrader_config, write_config)
from .access import (REFERENCE_FOLDER, UNIX_NAME, HubError, own_tree, course_problems, enrol_roster, ensure_group,
                     ensure_users, give_to_staff, not_listed, read_roster, stale_problems, staff_group, take_out,
                     users_python)
from ..groups import REFERENCE_GROUP, group_members, students_group
from ..words import counted
from .state import HubState, add_launched, instructor_course, record_courses

COURSE_KEYS = {"folder", "instructors", "roster", "context_id"}


@dataclass
class Course:
    id: str
    folder: str
    instructors: list = field(default_factory=list)
    roster: list = field(default_factory=list)  # [(student id, name)]
    context_id: str = None
    launched: list = field(default_factory=list)  # students an LTI launch brought (the hub's state), not on the roster

    @property
    def students(self):
        return [sid for sid, _ in self.roster] + self.launched


# ------------------------------------------------------------------ the courses file
def read_courses(tables, path, lti=False):
    """([Course], problems) from the ``[[course]]`` tables of the file at ``path`` (paths in it are relative to its
    folder). Every problem is a sentence naming the course (its number in the file) and what to change."""
    from ..exchange.course_id import ExchangeError, course_id_of
    base = os.path.dirname(os.path.abspath(path))
    problems, courses = [], []
    if not isinstance(tables, list) or not tables:
        return [], [f"{path} names no course: add a [[course]] table for each (folder = ..., "
                    + ("context_id = ...)" if lti else "instructors = [...], roster = ...)")]
    for n, table in enumerate(tables, start=1):
        where = f"{path}, course {n}"
        if not isinstance(table, dict):
            problems.append(f"{where} is not a table")
            continue
        folder = table.get("folder")
        if isinstance(folder, str) and folder:
            folder = os.path.normpath(os.path.join(base, folder))
            where = f"{path}, course {n} ({folder})"
        unknown = sorted(set(table) - COURSE_KEYS)
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(unknown)} (a course has "
                            f"{', '.join(sorted(COURSE_KEYS))})")
        if not isinstance(folder, str) or not folder:
            problems.append(f"{where}: no folder = \"...\" (the course folder)")
            continue
        if not os.path.isfile(os.path.join(folder, "nbgrader_config.py")):
            problems.append(f"{where}: not a course folder (no nbgrader_config.py)")
            continue
        try:
            cid = course_id_of(folder)
        except ExchangeError as exc:
            problems.append(f"{where}: {exc}")
            continue
        course = Course(cid, folder)
        instructors = table.get("instructors", [])
        if not isinstance(instructors, list) or not all(isinstance(i, str) for i in instructors):
            problems.append(f"{where}: instructors must be a list of Unix user names, e.g. [\"alice\"]")
            instructors = []
        bad = [i for i in instructors if not UNIX_NAME.match(i)]
        if bad:
            problems.append(f"{where}: {', '.join(map(repr, bad))} is not a valid Unix user name")
        course.instructors = [i for i in dict.fromkeys(instructors) if UNIX_NAME.match(i)]
        if not course.instructors and not lti:
            problems.append(f"{where}: name its instructor(s): instructors = [\"NAME\"] (local Unix users)")
        roster = table.get("roster")
        if roster is not None:
            if not isinstance(roster, str):
                problems.append(f"{where}: roster must be the path of a CSV file of id,name")
            else:
                try:
                    course.roster = read_roster(os.path.join(base, roster))
                except HubError as exc:
                    problems.append(f"{where}: {exc}")
        elif not lti:
            problems.append(f"{where}: no roster = \"...\" (a CSV file of id,name, one student a row)")
        context = table.get("context_id")
        if lti:
            if not isinstance(context, str) or not context:
                problems.append(f"{where}: no context_id = \"...\" (the LMS course this course folder serves: the "
                                f"context id of its launches)")
            course.context_id = context if isinstance(context, str) else None
        elif context is not None:
            problems.append(f"{where}: context_id is for a hub with LTI login (course hub --lti FILE, whose file "
                            f"lists the courses)")
        courses.append(course)
    problems += _clashes(courses, path)
    return courses, list(dict.fromkeys(problems))


def _clashes(courses, path):
    """Two courses on one folder, id or LMS context; a user with two roles, or an instructor of two courses."""
    problems = []
    for attr, what in (("folder", "folder"), ("id", "course id"), ("context_id", "LMS context id")):
        seen = {}
        for c in courses:
            value = getattr(c, attr)
            if value is None:
                continue
            if value in seen:
                hint = (": give each course folder its own c.CourseDirectory.course_id in its nbgrader_config.py"
                        if attr == "id" else "")
                problems.append(f"{path}: the courses {seen[value]} and {c.folder} have the same {what} {value}{hint}")
            seen.setdefault(value, c.folder)
    teaches = {}
    for c in courses:
        for name in c.instructors:
            teaches.setdefault(name, []).append(c.id)
    for name, ids in teaches.items():
        if len(ids) > 1:
            problems.append(f"{name} is an instructor of {' and '.join(ids)}: an instructor's server serves one "
                            f"course on a hub (its formgrader, its terminal's course); give each course its own "
                            f"instructor account")
    for c in courses:
        for sid in c.students:
            if sid in teaches:
                problems.append(f"{sid} is an instructor of {teaches[sid][0]} and on the roster of {c.id}: one role "
                                f"each on a hub")
    return problems


# ------------------------------------------------------------------ groups
def give_reference(instructors, out=print):
    """The reference answers the group ``course-reference``'s to read (every course's instructors in it), closed to
    everyone else: on a hub of several courses they are not one course's."""
    ensure_group(REFERENCE_GROUP, instructors, out)
    own_tree(REFERENCE_FOLDER, -1, grp.getgrnam(REFERENCE_GROUP).gr_gid, 0o2750, 0o640, out)


def set_up_course(course, out=print):
    """As root: the course's groups with its members, and its folder given to its staff (its first instructor's, or
    root's until an instructor comes: a course of an LTI hub)."""
    give_to_staff(course.folder, course.instructors, reference=None, out=out, group=staff_group(course.folder))
    ensure_group(students_group(course.id), course.students + course.instructors, out)


def not_instructors(courses):
    """[(user, group)]: the members of a course's instructors' group (its folder's) or of the reference answers'
    group who are not that course's instructors (or no course's): a teaching assistant taken off a course's list
    keeps none of its rights."""
    every = {i for c in courses for i in c.instructors}
    return [s for c in courses for s in not_listed(staff_group(c.folder), c.instructors)] + not_listed(
        REFERENCE_GROUP, every)


def _course_fixes(courses):
    lines = []
    for c in courses:
        staff, students = staff_group(c.folder), students_group(c.id)
        lines.append(f"groupadd -f {staff} && groupadd -f {students}"
                     + "".join(f" && usermod -aG {staff},{students},{REFERENCE_GROUP} {i}" for i in c.instructors))
        if c.instructors:
            lines.append(f"chown -R {c.instructors[0]}:{staff} {c.folder} && chmod -R g+rwX,o-rwx {c.folder}")
    lines.append(f"groupadd -f {REFERENCE_GROUP} && chgrp -R {REFERENCE_GROUP} {REFERENCE_FOLDER} && "
                 f"chmod -R g+rX,o-rwx {REFERENCE_FOLDER}")
    return lines


# ------------------------------------------------------------------ course hub --courses / --lti
def prepare_courses(args, out=print):
    """``course hub --courses FILE`` or ``--lti FILE``: everything checked and written before the hub starts;
    returns (command, cwd, env) as ``coursekit.hub.setup.prepare_one_course``."""
    as_root()
    if args.instructor or args.roster:
        raise HubError("with --courses or --lti the file names each course's instructors and roster: leave out "
                       "--instructor and --roster")
    if args.courses and args.lti:
        raise HubError("give the courses in one file: with --lti they are the [[course]] tables of the LTI file")
    lti = None
    if args.lti:
        from .lti_config import read_lti_config
        lti = read_lti_config(args.lti)
        courses, problems = read_courses(lti.courses, args.lti, lti=True)
    else:
        courses, problems = read_courses(load_toml(args.courses, "courses file").get("course"), args.courses)
    problems += machine_problems(args)
    if problems:
        raise HubError(listed(problems))
    state = os.path.abspath(args.state)
    hub_state = HubState(state)
    add_launched(courses, hub_state.read())
    create = args.create_users or lti is not None  # an LTI hub makes its users at their first launch
    instructors = [i for c in courses for i in c.instructors]
    students = list(dict.fromkeys(s for c in courses for s in c.students))
    ensure_users(instructors + students, create=create, out=out)
    if create:
        for c in courses:
            set_up_course(c, out)
        give_reference(instructors, out)
    stale = not_instructors(courses)
    if create:
        take_out(stale, out)
        stale = []
    stale_said, stale_fixes = stale_problems(stale)
    problems = [p for c in courses for p in course_problems(c.folder, c.instructors, c.students)]
    problems += _group_problems(courses) + stale_said
    if problems:
        fixes = "\n".join(f"    {line}" for line in _course_fixes(courses) + stale_fixes)
        raise HubError(listed(problems) + f"\nas root, either run `course hub` with --create-users, which does "
                                           f"this itself, or:\n{fixes}")
    for c in courses:
        if c.roster:
            enrol_roster(c.folder, c.roster, out=out)
    from ..exchange.commands import check_exchange
    exchange = check_exchange(os.path.abspath(args.exchange), create=True, shared=True)
    for c in courses:
        if c.instructors:
            exchange_for_class(exchange, c.folder, c.instructors, c.students, course_id=c.id)
    os.makedirs(state, exist_ok=True)
    if lti:
        from .lti_config import ensure_tool_key
        ensure_tool_key(lti, state, out)
    with hub_state.change() as data:
        record_courses(data, courses)
    config = write_hub_config(state, courses, exchange, lti, args, hub_state)
    cmd, env = hub_command(config, exchange)
    warning = setuid_warning(instructors + students)
    if warning:
        out(warning)
    login = f"LTI 1.3 from {lti.issuer}" if lti else "Unix passwords"
    out(f"JupyterHub for {counted(len(courses), 'course')} ({', '.join(c.id for c in courses)}) on http://{args.ip}:"
        f"{args.port}, login by {login}; exchange {exchange}; state {state}")
    return cmd, state, env


def _group_problems(courses):
    """The students' groups as several courses need them: each course's students and instructors in its own."""
    problems = []
    for c in courses:
        group = students_group(c.id)
        try:
            members = group_members(grp.getgrnam(group).gr_gid)
        except KeyError:
            problems.append(f"there is no group {group} of the course {c.id}'s students")
            continue
        missing = [n for n in c.students + c.instructors if n not in members]
        if missing:
            problems.append(f"{', '.join(missing)} not in the group {group} (the course {c.id}'s outbound is its "
                            f"alone)")
    return problems


# ------------------------------------------------------------------ the hub's configuration
OVERRIDE = '''
# ------------------------------------------------------------------ several courses (coursekit/hub/courses.py)
# The settings above are those of one course; these replace them: each user's role and course come from the hub's
# state ({state_file}, root's alone), which `course hub` writes and each LTI launch brings up to date.
from coursekit.hub.courses import spawn_hook  # noqa: E402

c.Spawner.pre_spawn_hook = spawn_hook({spawn!r})
'''

PAM_USERS = '''c.Authenticator.allowed_users = {users!r}
'''

LTI_LOGIN = '''
# login from the LMS by LTI 1.3 (coursekit/hub/lti.py): ltiauthenticator's LTI13Authenticator, with the course's
# checks (deployment, context, role, user name) and the accounts, groups and gradebooks made at launch
c.JupyterHub.authenticator_class = "coursekit.hub.lti.CourseLTI13Authenticator"
c.Authenticator.allowed_users = set()
c.Authenticator.allow_all = True  # who may come in is decided at each launch by the checks above
c.LTI13Authenticator.issuer = {issuer!r}
c.LTI13Authenticator.client_id = {{{client_id!r}}}
c.LTI13Authenticator.authorize_url = {authorize_url!r}
c.LTI13Authenticator.jwks_endpoint = {jwks_url!r}
c.LTI13Authenticator.username_key = "sub"  # not used: CourseLTI13Authenticator names the user by its own rule
c.CourseLTI13Authenticator.settings_file = {settings!r}
'''


def write_hub_config(state, courses, exchange, lti, args, hub_state):
    """The hub's configuration for several courses: ``coursekit.hub.setup.write_config``'s for the first course, the
    grading service's settings rewritten with every course, and the block above. Returns its path."""
    first = courses[0]
    instructors = [i for c in courses for i in c.instructors]
    students = list(dict.fromkeys(s for c in courses for s in c.students))
    path = write_config(state, course=first.folder, exchange=exchange, students=students,
                        instructors=instructors, ip=args.ip, port=args.port, extra_config=None)
    from . import service
    grading = service.read_config(os.path.join(state, "grading.json"))
    extra = {"hub_state": state, "exchange": exchange}
    if lti:
        extra["lti"] = {"client_id": lti.client_id, "token_url": lti.token_url, "tool_key": lti.tool_key}
    service.write_service_config(state, grading["port"], grading["hub_api"],
                             {c.folder: c.instructors for c in courses}, extra=extra)
    instructor_config = {}
    for c in courses:
        folders = role_settings(os.path.join(state, "courses", c.id), exchange, c.folder)
        instructor_config[c.id] = folders["instructor"]
    student_config = role_settings(os.path.join(state, "courses", "students"), exchange, first.folder)["student"]
    write_atomic(os.path.join(student_config, "nbgrader_config.py"),
           student_nbgrader_config([c.id for c in courses], exchange))
    with open(path) as f:
        text = f.read()
    spawn = {"state": state, "exchange": exchange, "instructor_config": instructor_config,
             "student_config": student_config, "packages": os.path.join(state, "student-packages"),
             "path": os.pathsep.join([os.path.dirname(users_python()), "/usr/local/bin", "/usr/bin", "/bin"]),
             "lab_extensions": LAB_EXTENSIONS, "grading_url": f"http://127.0.0.1:{grading['port']}"}
    text += OVERRIDE.format(state_file=hub_state.path, spawn=spawn)
    if lti:
        from .lti_config import write_settings
        settings = write_settings(state, lti, courses, exchange)
        text += LTI_LOGIN.format(issuer=lti.issuer, client_id=lti.client_id, authorize_url=lti.login_url,
                                 jwks_url=lti.jwks_url, settings=settings)
    else:
        text += PAM_USERS.format(users=set(students) | set(instructors))
    if args.extra_config:
        text += f"\n# --extra-config\nload_subconfig({os.path.abspath(args.extra_config)!r})  # noqa: F821\n"
    write_atomic(path, text, mode=0o600)
    close_state(state)
    return path


def spawn_hook(settings):
    """The hub's ``pre_spawn_hook``: the user's role and course read from the hub's state at each start (an LTI
    launch may have made them an instructor or a student of a course since the hub started)."""
    hub_state = HubState(settings["state"])

    def course_environment(spawner):
        data = hub_state.read()
        name = spawner.user.name
        env = dict(spawner.environment)
        env.update(PATH=settings["path"], PYTHONDONTWRITEBYTECODE="1", JUPYTER_PATH=settings["lab_extensions"])
        cid = instructor_course(data, name)
        if cid and cid in settings["instructor_config"]:
            folder = data["courses"][cid]["folder"]
            env.update(JUPYTER_CONFIG_PATH=settings["instructor_config"][cid], COURSE_ROOT=folder,
                       COURSE_EXCHANGE=settings["exchange"], COURSE_GRADING_URL=settings["grading_url"])
            spawner.notebook_dir = folder
        else:
            # the courses the hub's state gives this student: the Assignments tab's, and no other (learner.submit)
            mine = [c for c, course in sorted(data.get("courses", {}).items()) if name in course.get("students", [])]
            env.update(JUPYTER_CONFIG_PATH=settings["student_config"], PYTHONPATH=settings["packages"],
                       COURSE_IDS=",".join(mine), COURSE_GRADING_URL=settings["grading_url"])  # their due dates
            spawner.notebook_dir = "~"
        spawner.environment = env
    return course_environment
