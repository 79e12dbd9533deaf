"""A fresh copy of a released assignment, for a student who deleted or broke their notebook (``course fetch-again
ASSIGNMENT`` in a terminal of their JupyterLab on the hub, or wherever nbgrader's exchange is set up for them).

nbgrader's Fetch will not fetch an assignment whose folder exists, and the Assignments tab then offers only Submit.
Here the release is fetched with the course's own fetch (``learner.submit.CourseFetch``: only what the course's
instructors wrote, never a link) into a new folder beside the assignment's; only once it is complete is the
student's folder moved aside, whole, to ``<assignment>.moved-<UTC time>`` (a name claimed with ``mkdir``, so a
second run never lands on the first's), and the fresh copy put in its place. Nothing of the student's is deleted.
Anything that stops it (a name that is no assignment's, an assignment not released, a link or a file where the
folder should be, no room for the copy) is refused with a sentence before anything is moved; a fresh copy that
could not be made whole is removed, and the student's folder stays where it was.
"""
import contextlib
import datetime
import errno
import os
import re
import shutil
import stat
import sys
import tempfile

from .inert_text import inert

ASSIGNMENT_NAME = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\Z")
ASIDE_NAME = "{name}.moved-{time}"  # where the student's folder goes, beside it
ROOM_MARGIN = 1 << 20  # bytes of room wanted beyond the release's size


class FetchRefused(Exception):
    """Nothing was moved or fetched: the message says why."""


@contextlib.contextmanager
def _in_folder(path):
    here = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)


def student_fetch(assignment_id, course_id=None, where=None):
    """nbgrader's fetch of ``assignment_id`` with the settings the student's JupyterLab reads (its Jupyter
    configuration folders, then ``nbgrader_config.py`` in ``where``: the folder the Assignments tab works in, the
    home folder on a hub), as nbgrader's Assignments tab builds it."""
    from jupyter_core.paths import jupyter_config_path
    from nbgrader.apps import NbGrader
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange import ExchangeFactory
    with _in_folder(where):
        app = NbGrader()
        app.config_file_paths.append([os.getcwd()] + jupyter_config_path())  # nbgrader's AssignmentList's order
        app.load_config_file()
        config = app.config
        if course_id:
            config.CourseDirectory.course_id = course_id
        config.CourseDirectory.assignment_id = assignment_id
        coursedir = CourseDirectory(config=config)
        fetch = ExchangeFactory(config=config).FetchAssignment(
            coursedir=coursedir, authenticator=Authenticator(config=config), config=config)
        fetch.assignment_dir = os.path.abspath(fetch.assignment_dir)
    return fetch


def fetch_again(assignment_id, course_id=None, where=None, now=None):
    """Fetch ``assignment_id`` afresh into the student's assignment folder, moving the folder that is there aside
    (see the module). Returns the lines to print; raises ``FetchRefused`` with nothing changed."""
    from nbgrader.exchange import ExchangeError
    if not isinstance(assignment_id, str) or not ASSIGNMENT_NAME.match(assignment_id) or ".." in assignment_id:
        raise FetchRefused(f"{inert(repr(assignment_id))} is not an assignment's name (letters, digits, '_', '.' "
                           f"and '-'): nothing was fetched")
    where = os.path.abspath(where or os.path.expanduser("~"))
    fetch = student_fetch(assignment_id, course_id, where)
    courses = fetch.authenticator.get_student_courses(fetch.coursedir.student_id)  # None: any (off a hub)
    yours = f" (yours: {inert(', '.join(courses))})" if courses else ""
    if not fetch.coursedir.course_id:  # a student in several courses (the hub names none in their settings)
        raise FetchRefused(f"name the course with --course-id{yours}: nothing was fetched")
    if not fetch.authenticator.has_access(fetch.coursedir.student_id, fetch.coursedir.course_id):
        raise FetchRefused(f"you are not in the course {inert(fetch.coursedir.course_id)}{yours}: nothing was "
                           f"fetched")
    try:
        fetch.set_timestamp()
        fetch.init_src()  # the course: the student's, the hub's (CourseFetch); the assignment: released
    except ExchangeError as exc:
        raise FetchRefused(_not_released(fetch, assignment_id) or f"{inert(str(exc))}: nothing was fetched") \
            from None
    course = fetch.coursedir.course_id
    rel = os.path.join(course, assignment_id) if fetch.path_includes_course else assignment_id
    dest = os.path.join(fetch.assignment_dir, rel)
    parent = os.path.dirname(dest)
    shown = inert(os.path.relpath(dest, where) if dest.startswith(where + os.sep) else dest)
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        what = "a link" if stat.S_ISLNK(st.st_mode) else "not a folder"
        raise FetchRefused(f"{shown} is {what}, not the assignment's folder: nothing was moved or fetched (rename it "
                           f"yourself, then run this again)")
    os.makedirs(parent, exist_ok=True)
    _room_for(fetch.src_path, parent, shown)
    fresh = tempfile.mkdtemp(prefix=f".{assignment_id}.fetching-", dir=parent)
    try:
        os.chmod(fresh, 0o777 & ~_umask())
        fetch.dest_path = fresh
        fetch.do_copy(fetch.src_path, fresh)
    except (ExchangeError, OSError) as exc:
        shutil.rmtree(fresh, ignore_errors=True)  # the half-made copy, ours; the student's folder is untouched
        why = exc.strerror if isinstance(exc, OSError) else str(exc).replace(fresh, shown)
        raise FetchRefused(f"no fresh copy of {assignment_id} could be made ({inert(why)}): {shown} is as it "
                           f"was") from None
    lines = []
    if st is not None:
        try:
            aside = _move_aside(dest, now)
        except OSError as exc:
            shutil.rmtree(fresh, ignore_errors=True)
            raise FetchRefused(f"{shown} could not be moved aside ({exc.strerror}): it is as it was, and nothing was "
                               f"fetched") from None
        lines.append(f"moved your folder {shown} to {inert(os.path.relpath(aside, where))} (nothing in it was "
                     f"deleted)")
    try:
        os.rename(fresh, dest)
    except OSError as exc:  # something took the folder's place meanwhile: the fresh copy stays where it was made
        raise FetchRefused(f"the fresh copy could not be put at {shown} ({exc.strerror}): it is in "
                           f"{inert(os.path.relpath(fresh, where))}; " + "; ".join(lines)) from None
    lines.append(f"fetched a fresh copy of {assignment_id} (course {inert(course)}) into {shown}")
    return lines


def run_fetch_again(assignment_id, course_id=None, where=None):
    """``course fetch-again``: prints what was done, or the refusal on stderr; the exit status."""
    try:
        lines = fetch_again(assignment_id, course_id, where)
    except FetchRefused as exc:
        print(f"course fetch-again: {exc}", file=sys.stderr)
        return 1
    for line in lines:
        print(line)
    return 0


def _not_released(fetch, assignment_id):
    """The sentence for an assignment that is not in the course's outbound, naming those that are; None when it
    is there (the fetch failed for another reason)."""
    outbound = os.path.join(fetch.root, fetch.coursedir.course_id, "outbound")
    if not fetch.coursedir.course_id or os.path.isdir(os.path.join(outbound, assignment_id)):
        return None
    try:
        released = sorted(n for n in os.listdir(outbound) if ASSIGNMENT_NAME.match(n))
    except OSError:
        released = []
    return (f"{assignment_id} is not released in the course {inert(fetch.coursedir.course_id)} (released: "
            f"{', '.join(released) or 'none yet'}): nothing was fetched")


def _room_for(src, parent, shown):
    need = ROOM_MARGIN
    for here, dirs, files in os.walk(src):
        for name in files:
            with contextlib.suppress(OSError):
                need += os.lstat(os.path.join(here, name)).st_size
    vfs = os.statvfs(parent)
    free = vfs.f_bavail * vfs.f_frsize
    if free < need:
        raise FetchRefused(f"there is no room for a fresh copy: it needs {need / 1e6:.1f} MB and {free / 1e6:.1f} MB "
                           f"are free; {shown} is as it was (make room, then run this again)")


def _move_aside(dest, now=None):
    """Move the folder ``dest`` to a new name beside it and return that name: the name is claimed by making an
    empty folder there (``mkdir`` fails on any name that exists), which the rename then replaces."""
    when = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y-%m-%dT%H-%M-%SZ")
    base = ASIDE_NAME.format(name=dest, time=when)
    for n in range(1, 1000):
        aside = base if n == 1 else f"{base}-{n}"
        try:
            os.mkdir(aside, 0o700)
        except FileExistsError:
            continue
        try:
            os.rename(dest, aside)
        except OSError:
            os.rmdir(aside)
            raise
        return aside
    raise OSError(errno.EEXIST, "a thousand moved copies of it are there already")


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def main(argv=None):
    """``python -m learner.fetch_again ASSIGNMENT [--course-id ID] [--dir FOLDER]``: what `course fetch-again` runs,
    and what the Assignments tab's "Fresh copy" runs (``learner.lab_server``) where only the learner's side is."""
    import argparse
    p = argparse.ArgumentParser(prog="course fetch-again")
    p.add_argument("assignment")
    p.add_argument("--course-id", default=None)
    p.add_argument("--dir", default=None)
    args = p.parse_args(argv)
    return run_fetch_again(args.assignment, args.course_id, args.dir)


if __name__ == "__main__":
    sys.exit(main())
