"""Who may have what on a hub, as root: the users and their groups, the course folder and the reference answers
given to the course's instructors (never through a link), the roster in the gradebook (by the course folder's
owner), and every problem with them named in one list, each with the command that fixes it. ``course hub``
(coursekit/hub/setup.py) and a hub of several courses or of LTI login (coursekit/hub/courses.py, lti.py) use them."""
import csv
import grp
import os
import pwd
import re
import stat
import subprocess
import sys

from ..paths import ROOT
from ..groups import group_name
from ..words import counted
from .errors import HubError

# useradd's own rule (Debian's NAME_REGEX without --badname): a lowercase letter or '_', then lowercase letters,
# digits, '_' and '-', at most 32 characters. The whole string: \A and \Z, since `$` also matches before a final
# newline ("bob\n" would pass, and useradd then fails); .match and .fullmatch agree on it.
UNIX_NAME = re.compile(r"\A[a-z_][a-z0-9_-]{0,31}\Z")

REFERENCE_FOLDER = os.path.join(ROOT, "solutions")
# the comment `useradd` gives the users the hub makes, for an administrator reading /etc/passwd; every install writes
# it, so it proves nothing: which accounts this hub made is in its own state (coursekit.hub.state.made_accounts)
MADE_BY_HUB = "attention-course"


# ------------------------------------------------------------------ users
def read_roster(path):
    """[(id, name)] of a roster CSV (``id,name``; a header row is optional). A row whose id is not a valid Unix
    user name, a repeated id or an empty roster is refused with the row number."""
    if not os.path.isfile(path):
        raise HubError(f"no roster at {path}: a CSV file of id,name (one student a row)")
    rows, seen = [], {}
    with open(path, newline="", encoding="utf-8") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if not row or not "".join(row).strip():
                continue
            sid = row[0].strip()
            name = row[1].strip() if len(row) > 1 else ""
            if number == 1 and sid.lower() == "id":
                continue
            if not UNIX_NAME.fullmatch(sid):
                raise HubError(f"{path} row {number}: {sid!r} is not a valid Unix user name (lowercase letters, "
                               f"digits, '_' and '-', starting with a letter or '_', at most 32 characters)")
            if sid in seen:
                raise HubError(f"{path} row {number}: {sid!r} is already on row {seen[sid]}")
            seen[sid] = number
            rows.append((sid, name))
    if not rows:
        raise HubError(f"{path} names no student (expected rows of id,name)")
    return rows


def ensure_users(names, create=False, out=print, passwords=None):
    """Every name is a local Unix user; with ``create`` (as root) the missing ones are made with ``useradd``
    (a home folder only its owner may enter). With ``passwords`` (a file's path), each user made gets a first
    password of its own (the hub logs in with PAM: a user without one cannot log in), added to that file, root's alone,
    as ``id,password`` rows. Returns the names created."""
    for name in names:
        if not UNIX_NAME.fullmatch(name):
            raise HubError(f"{name!r} is not a valid Unix user name")
    missing = []
    for name in names:
        try:
            pwd.getpwnam(name)
        except KeyError:
            missing.append(name)
    if missing and not create:
        raise HubError(f"no Unix user for {', '.join(missing)}: create them (`sudo useradd -m NAME` and "
                       f"`sudo passwd NAME`), or let the hub create them with --create-users (as root)")
    if missing and os.geteuid() != 0:
        raise HubError(f"--create-users needs root (sudo) to create {', '.join(missing)}")
    made = {}
    for name in missing:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", "--comment", MADE_BY_HUB, name],
                       check=True, capture_output=True)
        os.chmod(pwd.getpwnam(name).pw_dir, 0o700)
        if passwords:
            made[name] = first_password()
            subprocess.run(["chpasswd"], input=f"{name}:{made[name]}\n", text=True, check=True, capture_output=True)
        else:
            out(f"created Unix user {name} (set a password with `passwd {name}`)")
    if made:
        write_passwords(passwords, made)
        out(f"created {counted(len(made), 'Unix user')}, each with a first password, listed in {passwords} (root's alone): "
            f"give each person theirs; `passwd` in their JupyterLab terminal changes it")
    return missing


def first_password():
    """Twelve characters from a CSPRNG (72 bits), in letters and digits a person can type and read out."""
    import secrets
    alphabet = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/l/I
    return "".join(secrets.choice(alphabet) for _ in range(12))


def write_passwords(path, made):
    """``id,password`` rows added to ``path``, a file of root's, 0600 from its creation, never through a link."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), mode=0o711, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        if os.fstat(fd).st_uid != os.geteuid() or os.fstat(fd).st_nlink != 1:
            raise HubError(f"{path} is not this hub's own file: move it away and start the hub again")
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "a", closefd=False) as f:
            if f.tell() == 0:
                f.write("id,password\n")
            f.writelines(f"{name},{pw}\n" for name, pw in made.items())
    finally:
        os.close(fd)


def _instructor_has(name, st, group_bits):
    """Whether the user ``name`` owns the file of ``st``, or is in its group and the group has ``group_bits``."""
    user = pwd.getpwnam(name)
    groups = {user.pw_gid, *os.getgrouplist(name, user.pw_gid)}
    return user.pw_uid == st.st_uid or (st.st_gid in groups and st.st_mode & group_bits == group_bits)


def staff_group(course):
    """The Unix group of the course's instructors: ``<course id>-staff``. The course folder, the exchange's course
    folder and the reference answers are theirs; no student may be in it."""
    from ..groups import staff_group_of
    from ..exchange.course_id import course_id_of
    return staff_group_of(course_id_of(course))


def commands_giving_course(course, instructors, group, reference):
    """The commands that give the course folder and the reference answers to the instructors' group."""
    add = " && ".join(f"usermod -aG {group} {name}" for name in instructors)
    return [f"groupadd -f {group} && {add}",
            f"chown -R {instructors[0]}:{group} {course} && chmod -R g+rwX,o-rwx {course}",
            f"chgrp -R {group} {reference} && chmod -R g+rX,o-rwx {reference}"]


def course_problems(course, instructors, students=(), reference=REFERENCE_FOLDER):
    """What keeps the course folder and the reference answers from being the instructors' alone, each a sentence:
    the course folder holds the source notebooks with the answers, the submissions and the gradebook; the reference
    (the install's ``solutions/``) is what ``course grade`` compares against. Students' servers import the student
    bundle's packages, which hold no answers, so they never need either."""
    if not os.path.isfile(os.path.join(course, "nbgrader_config.py")):
        return [f"{course} is not a course folder (no nbgrader_config.py)"]
    problems = []
    for path, what, bits, verb in ((course, "the course folder", 0o030, "write"),
                                   (reference, "the reference answers", 0o050, "read")):
        st = os.stat(path)
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o007:
            problems.append(f"students could read {what} {path} (permissions {mode:04o})")
        for name in instructors:
            if _instructor_has(name, st, bits):
                continue
            problems.append(f"the instructor {name} cannot {verb} {what} {path} "
                            f"(owned by {pwd.getpwuid(st.st_uid).pw_name}, group {group_name(st.st_gid)})")
    from ..groups import group_members
    inside = sorted(set(students) & group_members(os.stat(course).st_gid))
    if inside:
        problems.append(f"the students {', '.join(inside)} are in the group {group_name(os.stat(course).st_gid)} "
                        f"of the course folder, so they could read every submission and the answers")
    return problems


def own_tree(top, uid, gid, dirs_mode, files_mode, out=print):
    """As root, a tree its instructors may be writing to at the same time given to ``uid``:``gid``. It never follows
    a link, not even one that replaces a folder while it walks (``os.fwalk`` holds each folder open, and every change
    is made through a descriptor opened without following links); a file with a second hard link is left as it is
    and named (it may be someone else's file linked in)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    for here, _dirs, files, dirfd in os.fwalk(top, follow_symlinks=False):
        os.fchown(dirfd, uid, gid)
        os.fchmod(dirfd, dirs_mode)
        for name in files:
            try:
                fd = os.open(name, flags, dir_fd=dirfd)
            except OSError:  # a link (ELOOP), or gone
                continue
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue
                if st.st_nlink > 1:
                    out(f"left as it is: {os.path.join(here, name)} (a file with {st.st_nlink} hard links)")
                    continue
                os.fchown(fd, uid, gid)
                os.fchmod(fd, files_mode | (stat.S_IMODE(st.st_mode) & 0o100))
            finally:
                os.close(fd)


def ensure_group(group, members, out=print):
    """The Unix group ``group`` (made if missing) with ``members`` in it (added if missing); returns the names added."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        subprocess.run(["groupadd", group], check=True, capture_output=True)
        gid = grp.getgrnam(group).gr_gid
        out(f"created the group {group}")
    have = set(grp.getgrgid(gid).gr_mem)
    added = [m for m in members if m not in have]
    for name in added:
        subprocess.run(["usermod", "-aG", group, name], check=True, capture_output=True)
    return added


def not_listed(group, wanted):
    """[(user, group)] for each member of ``group`` not among ``wanted`` (none where there is no such group): on a
    hub, an instructors' group holds its instructors alone, so a teaching assistant taken off the list keeps nothing."""
    try:
        members = set(grp.getgrnam(group).gr_mem)
    except KeyError:
        return []
    return [(name, group) for name in sorted(members - set(wanted))]


def take_out(stale, out=print):
    """As root: each (user, group) of ``stale`` taken out of that group (``gpasswd -d``), and said."""
    for name, group in stale:
        subprocess.run(["gpasswd", "-d", name, group], check=True, capture_output=True)
        out(f"{name} taken out of the group {group}: no longer an instructor there")


def stale_problems(stale):
    """A sentence for each (user, group) of ``stale`` and the command that fixes it."""
    return ([f"{name} is in the group {group} but is no instructor there: they could read what only instructors "
             f"may" for name, group in stale], [f"gpasswd -d {name} {group}" for name, group in stale])


def give_to_staff(course, instructors, reference=REFERENCE_FOLDER, out=print, group=None):
    """As root: the instructors' group (made if missing, the instructors added), the course folder the first
    instructor's and the group's (closed to others), the reference answers the group's to read (closed to others).
    What `course hub --create-users` does instead of asking for the commands of ``commands_giving_course``. With no instructor (a
    course of an LTI hub before its first instructor's launch) the course folder is root's and the group's;
    ``reference=None`` leaves the reference answers as they are (a hub of several courses gives them to a group of
    every course's instructors)."""
    group = group or staff_group(course)
    ensure_group(group, instructors, out)
    gid = grp.getgrnam(group).gr_gid
    owner = pwd.getpwnam(instructors[0]).pw_uid if instructors else 0
    for top, uid, dirs_mode, files_mode in ((course, owner, 0o2770, 0o660), (reference, -1, 0o2750, 0o640)):
        if top is not None:
            own_tree(top, uid, gid, dirs_mode, files_mode, out)
    out(f"the course folder {course} is {instructors[0] if instructors else 'root'}'s and {group}'s"
        + (f", the reference answers {reference} {group}'s to read; both closed to everyone else" if reference
           else ", closed to everyone else"))


def enrol_roster(course, roster, out=print):
    """The roster's students in the course's gradebook (``course collect`` names those who did not submit, the
    formgrader lists them): added, or their names brought up to date, by a process of the course folder's owner
    (coursekit/hub/enrol.py): root never opens a gradebook an instructor may have replaced with a link."""
    from .enrol import enrol_records
    records = []
    for sid, name in roster:
        first, _, last = name.partition(" ")
        records.append({"id": sid, "first_name": first, "last_name": last})
    try:
        added = enrol_records(sys.executable, course, records)
    except RuntimeError as exc:
        raise HubError(f"the roster could not be enrolled in {course}: {exc}") from None
    out(f"gradebook: {counted(len(roster), 'student')} on the roster, {len(added)} new")
    return added


def closed_folders(path):
    """The folders above ``path`` (its real path) that other users may not enter, top first."""
    closed, parent = [], os.path.dirname(os.path.realpath(path))
    while True:
        if not os.stat(parent).st_mode & 0o001:
            closed.append(parent)
        if parent == os.path.dirname(parent):
            return closed[::-1]
        parent = os.path.dirname(parent)


def users_python():
    """This install's Python, which every user's server runs; a HubError when other users cannot reach it (its
    interpreter, the virtual environment's packages, or the course's own packages)."""
    course = closed_folders(os.path.join(ROOT, "x"))
    if course:
        raise HubError(f"other users cannot reach the course's install ({ROOT}): {', '.join(course)} may not be "
                       f"entered by them: clone the course outside it (say /srv/attention-course) and set it up there")
    closed = sorted(set(closed_folders(sys.executable)) | set(closed_folders(os.path.join(sys.prefix, "x"))))
    if closed:
        raise HubError(f"other users cannot run this install's Python ({os.path.realpath(sys.executable)}): "
                       f"{', '.join(closed)} may not be entered by them. Set the course up again with a Python they "
                       f"reach: `{python_for_everyone()}`")
    return sys.executable


def python_for_everyone():
    """The one command that sets the course up with a Python 3.11 to 3.13 every user can run: the system's, where it
    has one (Debian 12: 3.11, Ubuntu 24.04: 3.12, Debian 13: 3.13), else the package that brings one."""
    for version in ("3.13", "3.12", "3.11"):
        python = f"/usr/bin/python{version}"
        if os.access(python, os.X_OK) and not closed_folders(python):
            return f"rm -rf {os.path.join(ROOT, '.venv')} && make -C {ROOT} setup PYTHON={python}"
    return (f"sudo apt-get install -y python3.11-venv && rm -rf {os.path.join(ROOT, '.venv')} && "
            f"make -C {ROOT} setup PYTHON=/usr/bin/python3.11")
