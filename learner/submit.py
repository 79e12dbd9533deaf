"""The student's side of nbgrader's exchange: the courses a student is in, a fetch that copies only what the course's
instructors wrote, and a submission that only its student and the course's instructors may read (the hub sets
these in every student's server: ``c.Authenticator.plugin_class``, ``c.ExchangeFactory.fetch_assignment`` and
``.submit``; they ship in the student bundle).

The hub's courses alone exist for a student: ``HubCourses`` answers nbgrader's question "which courses is this
student in" with the courses the hub's state gives them (``COURSE_IDS``, set by the hub at each server start), so
the Assignments tab lists, fetches from and submits to those and no other folder of the exchange, whoever made it.
``CourseFetch`` copies a released assignment without following a link, and only regular files that the course's
instructors (the owner of the exchange's course folder, its group's members) or root wrote: anything else in the
outbound is left out and named. A course folder that the hub did not make (a link, or a folder owned by someone
who is not in the course's staff group) is refused.

nbgrader's own submit copies the assignment into the inbound with the student's umask (files 0644, folders 0755)
and then opens the submission's folder to everyone (0777, "so the instructor can delete later"): whoever learns its
name could read it or write into it; and a failure half-way (a pipe, a file the student cannot read) leaves a part of
a submission in the inbound, which collect would take as the latest. Here the submission is copied by collect's own
reader (``learner.handin.copy_submission``: no link followed, only regular files and folders, the same limits, what
it leaves out named in the log), private while it is written (folders 0700, files 0600, under the name
``<its name>.incomplete``, which collect never takes), with nbgrader's secret and time, and the copy in the student's
cache made from it; only then is it opened to the inbound's group, the instructors (folders 0770, files 0640: the
inbound gives new entries its group), and renamed to its own name in one step. On any failure nothing of it is left
in the inbound or the cache, and the student reads a sentence. The names, the time, the secret and the cache are
nbgrader's.
"""
import errno
import fnmatch
import grp
import os
import pwd
import secrets
import shutil
import stat

from nbgrader.auth.base import BaseAuthPlugin
from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeFetchFeedback, ExchangeList, ExchangeSubmit
from nbgrader.utils import check_directory

from .handin import BEING_WRITTEN, InboundLimits, RefusedSubmission, check_folder
from .inert_text import inert
from .syllabus import NOTATION

COURSES_ENV = "COURSE_IDS"  # the student's courses, comma-separated, as the hub's state gives them
MAX_DEPTH = 8  # folders nested deeper than this in a release are left out

FOLDER_MODE = 0o770
FILE_MODE = 0o640


def open_to_group(dest):
    """Folders 0770 and files 0640 under ``dest``: its owner and its group (the inbound's: the instructors)."""
    for here, dirs, files in os.walk(dest, topdown=False):
        for name in files:
            os.chmod(os.path.join(here, name), FILE_MODE)
        os.chmod(here, FOLDER_MODE)


class HubCourses(BaseAuthPlugin):
    """nbgrader's "which courses is this student in", answered by the hub: the courses in ``COURSE_IDS`` (the hub
    sets it in each student's server from its state); without it (off a hub) every course, as nbgrader's default."""

    def get_student_courses(self, student_id):
        ids = os.environ.get(COURSES_ENV)
        return None if ids is None else [c for c in ids.split(",") if c]

    def add_student_to_course(self, student_id, course_id):
        pass  # the hub's state and groups say who is in a course, not nbgrader

    def remove_student_from_course(self, student_id, course_id):
        pass


def hub_root(root):
    """Whether the exchange root is a hub's: root's, and nobody else may write at its top level (0755)."""
    try:
        st = os.stat(root)
    except OSError:
        return False
    return st.st_uid == 0 and not stat.S_IMODE(st.st_mode) & 0o022


class HubRoot:
    """nbgrader's exchange classes check that every user may write at the exchange's root (and its release makes it
    0777); a hub's root is root's, and what users write goes into the course folders the hub made in it: entering
    it is enough."""

    def ensure_root(self):
        if not hub_root(self.root):
            return super().ensure_root()
        if not check_directory(self.root, read=True, execute=True):
            self.fail(f"Unreadable directory, please contact your instructor: {self.root}")


class CourseList(HubRoot, ExchangeList):
    """nbgrader's list, on a hub's exchange (the courses listed are the student's: ``HubCourses``)."""


class CourseFetchFeedback(HubRoot, ExchangeFetchFeedback):
    """nbgrader's fetch of feedback, on a hub's exchange."""


class ExchangeRefused(Exception):
    """A course folder of the exchange that a student's fetch or submit must not use."""


def course_writers(root, course_id):
    """The uids that may have written a course's folder in the exchange and what it holds, or ``ExchangeRefused``
    for a course folder that is not the hub's (a link, something not a folder, a folder of anyone else):

    * in a hub's exchange (root's, closed to others' writes: only root made the folder): root, the folder's owner,
      its group's members (the hub gives it to the course folder's group, the instructors') and the members of the
      course's staff group ``<course id>-staff`` where there is one;
    * elsewhere, where the course has a staff group (only root makes or fills a group): root and its members, and
      the folder must be one of theirs;
    * elsewhere (one machine, an exchange everyone writes to): root and this user."""
    path = os.path.join(root, course_id)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ExchangeRefused(f"{path} is not a folder of the exchange (a link or a file): not used")
    staff = _members(f"{course_id}-staff")
    if hub_root(root):
        writers = {0, st.st_uid} | (_members(st.st_gid) or set()) | (staff or set())
    elif staff is not None:
        writers = staff | {0}
    else:
        writers = {0, os.geteuid()}
    if st.st_uid not in writers:
        raise ExchangeRefused(f"{path} is owned by {_user(st.st_uid)}, who is no instructor of {course_id}: not "
                              f"a course of this hub, not used (ask your instructor)")
    return writers


def _members(group):
    """The uids of a group's members (by membership or as their primary group), the group given by name or gid;
    None when there is no such group."""
    try:
        entry = grp.getgrnam(group) if isinstance(group, str) else grp.getgrgid(group)
    except KeyError:
        return None
    uids = {user.pw_uid for user in pwd.getpwall() if user.pw_gid == entry.gr_gid}
    for name in entry.gr_mem:
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    return uids


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def copy_release(src, dest, writers, ignore=(), only_missing=False, depth=0, left_out=None):
    """Copy the released folder ``src`` into ``dest`` without following a link: every entry is opened relative to
    its folder with ``O_NOFOLLOW`` and checked on the open file; only folders and regular files that a uid of
    ``writers`` owns are copied, the rest named in ``left_out`` [(path, why)]. Returns ``left_out``."""
    left_out = [] if left_out is None else left_out
    fd = src if isinstance(src, int) else os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.makedirs(dest, exist_ok=True)
        for name in sorted(os.listdir(fd)):
            if any(fnmatch.fnmatch(name, pattern) for pattern in ignore):
                continue
            target = os.path.join(dest, name)
            try:
                child = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                left_out.append((target, "a link" if exc.errno == errno.ELOOP else exc.strerror))
                continue
            try:
                st = os.fstat(child)
                if st.st_uid not in writers:
                    left_out.append((target, f"written by {_user(st.st_uid)}, not by the course's instructors"))
                elif stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH:
                    copy_release(os.dup(child), target, writers, ignore, only_missing, depth + 1, left_out)
                elif stat.S_ISREG(st.st_mode):
                    if not (only_missing and os.path.lexists(target)):
                        _copy_file(child, target)
                else:
                    left_out.append((target, "not a regular file or folder" if not stat.S_ISDIR(st.st_mode)
                                     else "folders nested too deep"))
            finally:
                os.close(child)
    finally:
        os.close(fd)
    return left_out


def _copy_file(fd, target):
    out = os.open(target + ".fetching", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(out, "wb") as w:
        while chunk := os.read(fd, 1 << 20):
            w.write(chunk)
    os.replace(target + ".fetching", target)


class CourseFetch(HubRoot, ExchangeFetchAssignment):
    """nbgrader's fetch, from a course the hub made, copying only what its instructors wrote and never a link."""

    def init_src(self):
        super().init_src()
        try:
            self.writers = course_writers(self.root, self.coursedir.course_id)
        except ExchangeRefused as exc:
            self.fail(str(exc))

    def do_copy(self, src, dest):
        writers = self.writers
        try:
            fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            self.fail(f"the release {src} cannot be fetched ({'a link' if exc.errno == errno.ELOOP else exc.strerror})")
        if os.fstat(fd).st_uid not in writers:
            os.close(fd)
            self.fail(f"the release {src} was not written by the course's instructors: not fetched")
        try:
            left_out = copy_release(fd, dest, writers, ignore=self.coursedir.ignore, only_missing=os.path.isdir(dest))
        except OSError as exc:
            self.fail(f"the assignment could not be fetched into {dest}: {exc.strerror} ({exc.filename or dest})")
        for path, why in left_out:
            self.log.warning("Left out of the assignment: %r: %s", os.path.relpath(path, dest), why)
        # the notation page that came with the release, where the notebooks' link ../notation.md opens it
        page, beside = os.path.join(dest, NOTATION), os.path.join(os.path.dirname(dest), NOTATION)
        if os.path.isfile(page) and not os.path.islink(page) and not os.path.lexists(beside):
            try:
                with open(page, "rb") as r:
                    fd = os.open(beside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                    with os.fdopen(fd, "wb") as w:
                        w.write(r.read())
            except OSError as exc:
                self.log.warning("The notation page could not be put at %s: %s", beside, exc.strerror)


class PrivateSubmit(HubRoot, ExchangeSubmit):
    """nbgrader's submit, with the submission readable by its student and the instructors alone, into a course the
    hub made; one that the instructor's collect would refuse (no notebook of the assignment, too many files, too
    large: ``learner.handin``'s rules) is refused when it is made, with collect's sentence."""

    def init_dest(self):
        super().init_dest()
        try:
            course_writers(self.root, self.coursedir.course_id)
        except ExchangeRefused as exc:
            self.fail(str(exc))

    def notebooks(self):
        names = sorted(n for n in os.listdir(self.release_path) if n.endswith(".ipynb"))
        return names or [self.coursedir.assignment_id + ".ipynb"]

    def check_filename_diff(self):
        """nbgrader's check of the notebooks (a warning, unless ``strict``), then collect's rules
        (``learner.handin``): a submission the instructor's collect would refuse is refused here, with collect's
        sentence, before anything reaches the exchange."""
        super().check_filename_diff()
        try:
            check_folder(self.src_path, self.notebooks(), InboundLimits.of(self.coursedir), self.coursedir.ignore)
        except RefusedSubmission as exc:
            self.fail(inert(f"the instructor would refuse it: {exc}"))
        except OSError as exc:
            self.fail(inert(f"your folder {self.src_path} cannot be read ({exc.strerror})"))

    def copy_files(self):
        """nbgrader's submit (``ExchangeSubmit.copy_files``: the inbound, then the cache in the student's home, the
        same secret and time in both), with the submission written as the module says: checked, copied by collect's
        reader under a name collect never takes, and renamed into place only when it and the cache are complete."""
        self.init_release()
        secret = secrets.token_hex(64)
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        writing = dest + BEING_WRITTEN
        cache = os.path.join(self.cache_path, self.assignment_filename.rsplit("+", 1)[0] if self.add_random_string
                             else self.assignment_filename)
        self.log.info("Source: %s", self.src_path)
        self.log.info("Destination: %s", dest)
        self.check_filename_diff()
        made = []  # what this submit wrote, removed again unless the submission is complete
        try:
            copied = self._write(writing, cache, secret, made)
            if os.path.lexists(dest):
                raise FileExistsError(errno.EEXIST, "a folder of its name is already there", dest)
            os.rename(writing, dest)
        except RefusedSubmission as exc:  # the folder changed since it was checked
            self._remove(made)
            self.fail(inert(f"the instructor would refuse it: {exc}"))
        except OSError as exc:
            self._remove(made)
            self.fail(inert(f"nothing was handed in: {exc.filename or dest} could not be written or read "
                               f"({exc.strerror or exc}); submit again"))
        except BaseException:
            self._remove(made)
            raise
        for path, why in copied.left_out:
            self.log.warning("The instructor will not get %s: %s", inert(path), why)
        self.log.info("Submitted as: %s %s %s", self.coursedir.course_id, self.coursedir.assignment_id,
                      self.timestamp)

    def _write(self, writing, cache, secret, made):
        """The submission into the inbound's folder ``writing`` (made 0700: nobody else enters it while it is written)
        by collect's reader, nbgrader's time and secret in it, and its copy in the cache: the ``Copied``."""
        made.append(writing)
        copied = check_folder(self.src_path, self.notebooks(), InboundLimits.of(self.coursedir), self.coursedir.ignore,
                              dest=writing)
        for name, text in (("timestamp.txt", self.timestamp), ("submission_secret.txt", secret)):
            fd = os.open(os.path.join(writing, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(text)
        os.makedirs(self.cache_path, exist_ok=True)
        if os.path.lexists(cache):  # never one of an earlier submit's, which this one's failure would remove
            raise FileExistsError(errno.EEXIST, "a folder of its name is already there", cache)
        made.append(cache)
        shutil.copytree(writing, cache)  # the student's record of what was handed in, from the private copy
        open_to_group(writing)
        return copied

    def _remove(self, made):
        for path in made:
            shutil.rmtree(path, ignore_errors=True)
