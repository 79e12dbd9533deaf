"""nbgrader's exchange, with what a class needs when every student can write into it (the course's
``nbgrader_config.py`` names these classes in ``ExchangeFactory``, so ``course release / collect / return``, the
formgrader's buttons and ``nbgrader collect`` all go through them).

The exchange's course folder, as these classes leave it (``G``: the course folder's group, the instructors'):

    <root>/                      0755  on a hub: root's, holding only the courses the hub made (one machine: 1777)
    <root>/<course>/             2755  the instructor's; G, inherited by what is made inside
    <root>/<course>/outbound/    2755  released assignments: every student reads them (2750 and the group
                                       ``<course>-students`` where a hub of several courses made that group:
                                       its students alone read them)
    <root>/<course>/inbound/     3773  a student may add a folder and enter one whose name they know; only G lists
                                       it, and only a folder's owner (or the instructor) removes or renames it
    <root>/<course>/inbound/S+A+T+R/   2770 S:G, files 0640  (``learner.submit.PrivateSubmit``): S and G only
    <root>/<course>/feedback/    2771  students enter it, never list it
    <root>/<course>/feedback/<md5>.html  0640 with a POSIX ACL entry giving S read: S and G only

``CourseCollect`` reads the inbound as untrusted input (``coursekit.exchange.inbound``); ``CourseReleaseFeedback`` releases
only the feedback pages that grading wrote.
"""
import datetime
import grp
import os
import pwd
import shutil
import stat
import struct
import tempfile

from nbgrader.exchange.default import ExchangeCollect, ExchangeReleaseAssignment, ExchangeReleaseFeedback
from traitlets import Integer, List, Unicode

from learner.handin import LIMITS, InboundLimits, no_notebook
from learner.submit import HubRoot
from learner.syllabus import NOTATION

from . import inbound as untrusted
from ..groups import course_group, group_members, group_name, students_group

COURSE_FOLDER_MODE = 0o2755
OUTBOUND_MODE = 0o2755
OUTBOUND_STUDENTS_MODE = 0o2750  # the outbound of a course with a students' group: that group reads it, nobody else
INBOUND_MODE = 0o3773
FEEDBACK_MODE = 0o2771
PAGE_MODE = 0o640
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp format, in UTC


def outbound_access(course_path):
    """(gid, mode) of the exchange course folder's outbound: its course's students' group and 2750 where that group
    exists, else (None: the course folder's group) and 2755, every user reads it."""
    try:
        return grp.getgrnam(students_group(os.path.basename(course_path))).gr_gid, OUTBOUND_STUDENTS_MODE
    except KeyError:
        return None, OUTBOUND_MODE


def _folders(course_path, gid):
    """(path, gid, mode) of the exchange's course folder and its three subfolders."""
    out_gid, out_mode = outbound_access(course_path)
    return ((course_path, gid, COURSE_FOLDER_MODE),
            (os.path.join(course_path, "outbound"), gid if out_gid is None else out_gid, out_mode),
            (os.path.join(course_path, "inbound"), gid, INBOUND_MODE),
            (os.path.join(course_path, "feedback"), gid, FEEDBACK_MODE))


def close_course_folder(course_path, gid=None, uid=None):
    """The exchange's course folder and its three subfolders with the owners and modes above (made if missing).
    As root, ``uid`` and ``gid`` give them to the instructor; otherwise ``gid`` is used where the caller may."""
    for path, want_gid, mode in _folders(course_path, gid):
        if not os.path.isdir(path):
            os.mkdir(path, 0o700)
        st = os.lstat(path)
        if (uid is not None and st.st_uid != uid) or (want_gid is not None and st.st_gid != want_gid):
            try:
                os.chown(path, -1 if uid is None else uid, -1 if want_gid is None else want_gid,
                         follow_symlinks=False)
            except PermissionError:
                pass  # not a group of ours: the folder keeps the caller's
        if stat.S_IMODE(os.lstat(path).st_mode) != mode:
            os.chmod(path, mode)


def problems_of_course_folder(course_path, gid, roster=(), owners=None):
    """What is wrong with the exchange's course folder for a class (a student could list, change or replace what
    others hand in), each as a sentence with the command that fixes it; [] when all is well. ``gid``: the
    instructors' group (the course folder's), whose members may own these folders and read what students hand in;
    ``roster``: the students, none of whom may be in it; ``owners``: who may own the folders (default: the group's
    members and the caller)."""
    problems = []
    me = os.geteuid()
    staff = group_members(gid)
    owners = set(owners) if owners is not None else staff | {untrusted.owner_name(me)}
    students = sorted(set(roster) & staff)
    if students:
        group = group_name(gid)
        problems.append(f"the students {', '.join(students)} are in the group {group} of the course folder, so they "
                        f"could read every submission: take them out of it (`gpasswd -d NAME {group}`), or give the "
                        f"course folder a group of the instructors alone (`chgrp -R GROUP COURSE`)")
    for path, _, mode in _folders(course_path, gid):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            problems.append(f"{path} is {untrusted.kind_of(st.st_mode)}, not a folder: remove it (as root) and run "
                            f"`course release` again")
            continue
        if st.st_uid != 0 and untrusted.owner_name(st.st_uid) not in owners:
            problems.append(f"{path} is owned by {untrusted.owner_name(st.st_uid)}, not by an instructor: a student "
                            f"may have made it before the first release; remove it (as root) and run `course release` "
                            f"again")
        have = stat.S_IMODE(st.st_mode)
        if have & 0o7777 != mode:
            problems.append(f"{path} has permissions {have:04o}; a class needs {mode:04o}: run `chmod {mode:04o} "
                            f"{path}`")
    return problems


class CourseReleaseAssignment(HubRoot, ExchangeReleaseAssignment):
    """nbgrader's release, with the exchange's course folder closed as the module's table says, and the course's
    notation page released with each assignment (the notebooks link ``../notation.md``: a fetch puts it beside the
    assignment's folder, ``learner.submit.CourseFetch``)."""

    def init_dest(self):
        super().init_dest()
        close_course_folder(self.course_path, gid=course_group(self.coursedir.root))

    def copy_files(self):
        from grader.late import DUE_NOTE, PolicyError, read_policy
        try:
            policy = read_policy(self.coursedir.root)  # refused before anything is released
        except PolicyError as exc:
            self.fail(str(exc))
        super().copy_files()
        write_due_note(self.coursedir, self.dest_path, policy, DUE_NOTE)
        page = os.path.join(self.coursedir.root, self.coursedir.source_directory, NOTATION)
        if os.path.isfile(page) and not os.path.islink(page):
            shutil.copyfile(page, os.path.join(self.dest_path, NOTATION))
            os.chmod(os.path.join(self.dest_path, NOTATION), 0o644)


def write_due_note(coursedir, dest, policy, name):
    """The release's page ``name`` in ``dest``: the assignment's due date (the gradebook's) and the late policy
    (``grader.late.release_note``)."""
    from nbgrader.api import Gradebook, MissingEntry

    from grader.late import release_note
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        try:
            due = gb.find_assignment(coursedir.assignment_id).duedate
        except MissingEntry:
            due = None
    with open(os.path.join(dest, name), "w") as f:
        f.write(release_note(coursedir.assignment_id, due, policy))
    os.chmod(os.path.join(dest, name), 0o644)


class CourseCollect(HubRoot, ExchangeCollect):
    """Collect each student's latest submission as untrusted input (``coursekit.exchange.inbound``): only a folder its
    student's account owns, only the regular files and folders that student owns, never a link, within limits,
    each student on their own. ``self.result`` says what became of each student and of each refused entry."""

    max_entries = Integer(LIMITS.entries,
                          help="A submission with more files and folders than this is refused whole.").tag(config=True)
    max_depth = Integer(LIMITS.depth, help="Folders nested deeper than this are left out of a submission.")\
        .tag(config=True)
    roster = List(Unicode(), allow_none=True, default_value=None,
                  help="The students who may submit; default: the gradebook's (nobody is refused when it has none)")

    def limits(self):
        return InboundLimits.of(self.coursedir, self.max_entries, self.max_depth)

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        self.students = self._roster()
        problems = problems_of_course_folder(self.course_path, course_group(self.coursedir.root), self.students)
        if problems:
            self.fail("the exchange's course folder is not as a class needs it:\n  " + "\n  ".join(problems))

    def init_dest(self):
        pass

    def _roster(self):
        """Who may submit: the roster given, else the gradebook's students, else (a course of a hub whose gradebook
        has none yet) the members of the course's students' group; nobody is refused only where none of these
        exists."""
        if self.roster is not None:
            return set(self.roster)
        from nbgrader.api import Gradebook
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            ids = {s.id for s in gb.students}
        if ids:
            return ids
        try:
            return group_members(grp.getgrnam(students_group(self.coursedir.course_id)).gr_gid)
        except KeyError:
            return ids

    def _notebooks(self):
        release = self.coursedir.format_path(self.coursedir.release_directory, ".", self.coursedir.assignment_id)
        source = self.coursedir.format_path(self.coursedir.source_directory, ".", self.coursedir.assignment_id)
        for folder in (release, source):
            if os.path.isdir(folder):
                names = sorted(n for n in os.listdir(folder) if n.endswith(".ipynb"))
                if names:
                    return names
        return [self.coursedir.assignment_id + ".ipynb"]

    def copy_files(self):
        assignment = self.coursedir.assignment_id
        notebooks = self._notebooks()
        pages = {n[:-len(".ipynb")] + ".html" for n in notebooks}
        self.result = result = {"collected": {}, "refused": [], "left_out": {}, "notes": {}, "counts": {},
                                "roster": self.students}
        try:
            fd = os.open(self.inbound_path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            self.fail(f"cannot read the exchange's inbound folder {self.inbound_path} ({exc.strerror}): collect as "
                      f"the instructor who released the course")
        try:
            source = os.path.join(self.coursedir.root, self.coursedir.source_directory)
            others = {a for a in (os.listdir(source) if os.path.isdir(source) else []) if a != assignment}
            found = untrusted.scan(fd, assignment, self.students, others)
            latest = {}
            for entry in found:
                if entry.problem:
                    result["refused"].append(entry)
                    self.log.warning("Refused %s (owned by %s): %s", untrusted.shown(entry.name), entry.owner,
                                     entry.problem)
                    continue
                result["counts"][entry.student] = result["counts"].get(entry.student, 0) + 1
                if entry.student not in latest or entry.claimed > latest[entry.student].claimed:
                    latest[entry.student] = entry
            for student, entry in sorted(latest.items()):
                try:
                    self._collect_one(fd, entry, notebooks, pages)
                except untrusted.RefusedSubmission as exc:
                    entry.refuse(str(exc))
                    result["refused"].append(entry)
                    self.log.warning("Refused %s (owned by %s): %s", untrusted.shown(entry.name), entry.owner, exc)
                except OSError as exc:  # our own side: the course folder (disk full, permissions)
                    entry.refuse(f"it could not be written into the course folder ({exc.strerror}: "
                                 f"{exc.filename or ''})")
                    result["refused"].append(entry)
                    self.log.error("Could not collect %s: %s", untrusted.shown(entry.name), entry.problem)
        finally:
            os.close(fd)

    def _collect_one(self, fd, entry, notebooks, pages):
        assignment, student = self.coursedir.assignment_id, entry.student
        uid = pwd.getpwnam(student).pw_uid
        dest = self.coursedir.format_path(self.coursedir.submitted_directory, student, assignment)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        before = self.coursedir.get_existing_timestamp(dest) if os.path.isdir(dest) else None
        staging = tempfile.mkdtemp(prefix=".collecting-", dir=os.path.dirname(dest))
        try:
            copied = untrusted.copy_submission(fd, entry.name, uid, os.path.join(staging, "copy"), self.limits(),
                                               ignore=self.coursedir.ignore,
                                               skip_names=tuple(sorted(pages)))
            when, note = untrusted.submission_time(entry.claimed, copied)
            copy = os.path.join(staging, "copy")
            refused = no_notebook(notebooks, copied)  # the sentence the student's submit shows (learner.handin)
            if refused:
                raise untrusted.RefusedSubmission(refused + (f"; the one collected before "
                                                             f"({before:%Y-%m-%d %H:%M:%S}) stays" if before else ""))
            if before is not None and before.strftime(TIME_FORMAT) == when.strftime(TIME_FORMAT):
                state = "unchanged"
            else:
                with open(os.path.join(copy, "timestamp.txt"), "w") as f:
                    f.write(when.strftime(TIME_FORMAT))
                state = "new" if before is None and not os.path.exists(dest) else "updated"
                if os.path.exists(dest):
                    self._keep_in_history(dest, student, assignment, before)
                _open_to_group(copy)
                os.rename(copy, dest)
                self.log.info("Collected %s %s (%s) from %s", student, assignment, state, untrusted.shown(entry.name))
            self.result["collected"][student] = (state, when)
            if copied.left_out:
                self.result["left_out"][student] = copied.left_out
                for path, why in copied.left_out:
                    self.log.warning("Left out of %s's submission: %s: %s", student, untrusted.shown(path), why)
            if note:
                self.result["notes"][student] = note
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _keep_in_history(self, dest, student, assignment, before):
        stamp = before.strftime("%Y-%m-%dT%H-%M-%S.%f") if before else "unknown-time"
        keep = os.path.join(self.coursedir.root, "submitted_history", student, assignment, stamp)
        os.makedirs(os.path.dirname(keep), exist_ok=True)
        n = 1
        while os.path.exists(keep):
            n += 1
            keep = os.path.join(os.path.dirname(keep), f"{stamp}-{n}")
        os.rename(dest, keep)


# POSIX ACL, as Linux stores it in the extended attribute system.posix_acl_access (acl_ea.h): a version, then
# (tag, permissions, id) entries
_ACL_VERSION, _USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 2, 0x01, 0x02, 0x04, 0x10, 0x20
_UNDEFINED = 0xFFFFFFFF


def readable_by(path, uid):
    """Give the user ``uid`` read access to ``path`` (mode 0640, plus a POSIX ACL entry); False where the filesystem
    keeps no ACLs."""
    entries = [(_USER_OBJ, 6, _UNDEFINED), (_USER, 4, uid), (_GROUP_OBJ, 4, _UNDEFINED), (_MASK, 4, _UNDEFINED),
               (_OTHER, 0, _UNDEFINED)]
    data = struct.pack("<I", _ACL_VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)
    try:
        os.setxattr(path, "system.posix_acl_access", data, follow_symlinks=False)
        return True
    except OSError:
        return False


class CourseReleaseFeedback(HubRoot, ExchangeReleaseFeedback):
    """Release the feedback pages that grading wrote, and nothing else: for each student, ``<notebook>.html`` of
    each of the assignment's notebooks, a regular file the instructor owns, never a link and never another file of
    the submission. Each page is readable by its student alone (and the instructors' group). ``self.result``:
    {"released": [student], "skipped": [(student, why)]}."""

    def init_dest(self):
        super().init_dest()
        close_course_folder(self.course_path, gid=course_group(self.coursedir.root))

    def _notebooks(self):
        return CourseCollect._notebooks(self)

    def copy_files(self):
        assignment = self.coursedir.assignment_id
        exclude = set(filter(None, (self.coursedir.student_id_exclude or "").split(",")))
        only = self.coursedir.student_id if self.coursedir.student_id not in ("", "*") else None
        feedback_root = os.path.join(self.coursedir.root, self.coursedir.feedback_directory)
        self.result = result = {"released": [], "skipped": []}
        students = sorted(os.listdir(feedback_root)) if os.path.isdir(feedback_root) else []
        no_acl = False
        for student in students:
            if (only and student != only) or student in exclude:
                continue
            if not untrusted.valid_student_id(student):
                result["skipped"].append((untrusted.shown(student), "not a valid student id"))
                continue
            folder = os.path.join(feedback_root, student, assignment)
            if not os.path.isdir(folder):
                continue
            try:
                secret = self._secret(student)
                uid = pwd.getpwnam(student).pw_uid if _has_user(student) else None
                for notebook in self._notebooks():
                    nb_id = notebook[:-len(".ipynb")]
                    data = _own_regular_file(os.path.join(folder, nb_id + ".html"))
                    from nbgrader.utils import notebook_hash
                    page = os.path.join(self.dest_path, notebook_hash(secret=secret, notebook_id=nb_id) + ".html")
                    fd, tmp = tempfile.mkstemp(prefix=".releasing-", dir=self.dest_path)
                    with os.fdopen(fd, "wb") as f:
                        f.write(data)
                    os.chmod(tmp, PAGE_MODE if uid is not None else 0o644)
                    if uid is not None and not readable_by(tmp, uid):
                        os.chmod(tmp, 0o644)
                        no_acl = True
                    os.replace(tmp, page)
                    self.log.info("Released feedback for %s on %s/%s", student, assignment, nb_id)
                result["released"].append(student)
            except (OSError, ValueError) as exc:
                why = str(exc) if isinstance(exc, ValueError) else f"{exc.strerror}: {exc.filename}"
                result["skipped"].append((student, why))
                self.log.warning("Feedback of %s not released: %s", student, why)
        if no_acl:
            self.log.warning("This filesystem keeps no POSIX ACLs: the feedback pages are readable by anyone who "
                             "knows their names (each named by a hash of the submission's 512-bit secret)")

    def _secret(self, student):
        for root in (self.coursedir.feedback_directory, self.coursedir.submitted_directory):
            path = os.path.join(self.coursedir.root, root, student, self.coursedir.assignment_id,
                                "submission_secret.txt")
            if os.path.isfile(path) and not os.path.islink(path):
                text = _own_regular_file(path, most=4096).decode("ascii", "replace").strip()
                if text and text.isprintable():
                    return text
        raise ValueError("the submission was not collected through the exchange (no submission_secret.txt), so "
                         "there is no place to return its feedback to")


def _has_user(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _own_regular_file(path, most=200_000_000):
    """The bytes of ``path``, a regular file this process's user owns (never a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise ValueError(f"{os.path.basename(path)} is not a page that grading wrote ({untrusted.kind_of(st.st_mode)}"
                             f" owned by {untrusted.owner_name(st.st_uid)})")
        if st.st_size > most:
            raise ValueError(f"{os.path.basename(path)} is {st.st_size / 1e6:.0f} MB, too big for a feedback page")
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read()
    finally:
        os.close(fd)


def _open_to_group(folder):
    """The collected copy (made 0700/0600 while it was written) readable and writable by the course folder's group,
    the instructors: the course folder itself is closed to everyone else."""
    for here, dirs, files in os.walk(folder):
        os.chmod(here, 0o770)
        for name in files:
            os.chmod(os.path.join(here, name), 0o660)


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
