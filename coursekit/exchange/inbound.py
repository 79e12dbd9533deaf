"""The exchange's inbound folder, read as untrusted input.

Every student may write into the inbound (nbgrader's exchange), so everything found there is some student's input:
the folder names (the student id and the time in them), who owns each folder, what it holds (links, pipes, other
people's files), sizes, counts, depth, and the text of ``timestamp.txt``. The instructor's commands read it with the
instructor's rights, so nothing there is taken on trust:

* a folder counts as student S's submission only when its name parses as ``S+assignment+time[+random]``, S is a
  valid student id (on the roster, when the course has one) with a Unix account, and that account owns the folder:
  checked on the folder once it is open, not on a name looked up before;
* the copy opens every folder and file relative to its parent's descriptor with ``O_NOFOLLOW`` and checks the open
  file's type and owner with ``fstat``: a link is never followed, wherever it stands, even one swapped in while the
  copy runs; anything that is not a regular file or a folder is left out, and so is a file the student does not own;
* limits per file and per submission, on the number of entries and on the depth;
* the time: the one in the folder's name, unless the folder's contents changed after it (their ctimes, which nobody
  but root can set back), and never one in the future. ``timestamp.txt`` is not read: collect writes its own.

Each student is handled on their own: whatever one folder holds costs only that student, with a sentence naming
the folder, the file and the reason.
"""
import datetime
import errno
import fnmatch
import os
import pwd
import re
import stat
from dataclasses import dataclass, field

from grader.plain import inert

# A student id: what nbgrader's exchange and this course accept in a folder name and build paths from. Unix user
# names (useradd's rule) are a subset; a '+', a '/', a leading '.', spaces and markup are never part of one.
STUDENT_ID = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}\Z")
RANDOM_PART = re.compile(r"\A[A-Za-z0-9_=-]{1,64}\Z")  # nbgrader's urlsafe base64 of 9 random bytes
CLOCK_SKEW = datetime.timedelta(minutes=2)  # a submission's own writes after its time (copy, chmod) and clock drift
NAME_SHOWN = 120  # characters of a folder's or file's name shown in a message

# what nbgrader's submit writes and collect replaces or checks itself
WRITTEN_BY_COLLECT = ("timestamp.txt",)


def shown(name, most=NAME_SHOWN):
    """A name from the exchange as one inert line (``grader.plain.inert``: every control character shown escaped, a
    byte that is not UTF-8 as ``\\xNN``), cut to ``most`` characters."""
    text = inert(name)
    return text if len(text) <= most else text[:most - 1] + "…"


def valid_student_id(sid):
    return bool(sid) and STUDENT_ID.match(sid) is not None and ".." not in sid


def owner_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def utc_naive(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).replace(tzinfo=None)


@dataclass
class InboundLimits:
    """What one submission may hold. ``file_bytes``: a bigger file is left out (named), the rest collected;
    ``total_bytes``, ``entries``: a submission over either is refused whole; ``depth``: deeper folders are left out."""
    file_bytes: int = 10_000 * 1000
    total_bytes: int = 50_000 * 1000
    entries: int = 1000
    depth: int = 8

    def describe(self):
        return (f"at most {self.file_bytes / 1e6:g} MB a file, {self.total_bytes / 1e6:g} MB and {self.entries} "
                f"files and folders a submission, {self.depth} folders deep")


@dataclass
class Found:
    """One entry of the inbound folder, and what collect makes of it."""
    name: str
    student: str = None
    assignment: str = None
    claimed: datetime.datetime = None  # the time in its name (UTC)
    owner: str = None
    problem: str = None  # why it is not collected; None while it may be

    def refuse(self, why):
        self.problem = why
        return self


def parse_name(name):
    """(student, assignment, time) of an inbound folder's name ``student+assignment+time[+random]``, or a sentence
    saying what does not parse. The time is nbgrader's (``%Y-%m-%d %H:%M:%S.%f %Z``), returned in naive UTC."""
    from nbgrader.utils import parse_utc
    parts = name.split("+")
    if len(parts) not in (3, 4):
        return f"its name is not student+assignment+time (it has {len(parts) - 1} '+')"
    student, assignment, stamp = parts[:3]
    if len(parts) == 4 and not RANDOM_PART.match(parts[3]):
        return "the last part of its name is not nbgrader's random string"
    if not valid_student_id(student):
        return "the student id in its name is not a valid id (letters, digits, '_', '.', '@' and '-')"
    if not STUDENT_ID.match(assignment):
        return "the assignment in its name is not a valid assignment name"
    try:
        when = parse_utc(stamp)
    except (ValueError, OverflowError, TypeError):
        return "the time in its name does not parse"
    if when.tzinfo is not None:
        when = when.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return student, assignment, when


def scan(inbound_fd, assignment, roster=None, others=(), now=None):
    """Every entry of the inbound folder (open as ``inbound_fd``) that concerns ``assignment``, or no assignment of
    the course (``others``: the course's other assignments, whose entries are left for their own collect): [Found].
    An entry whose name, student, time, type or owner is wrong has its ``problem`` set; the rest are folders that
    the student of their name owns."""
    now = now or datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    found = []
    for name in sorted(os.listdir(inbound_fd)):
        parts = name.split("+")
        if len(parts) > 1 and parts[1] in others:
            continue  # another assignment's, however broken: named when that one is collected
        entry = _owned(Found(name), inbound_fd)
        parsed = parse_name(name)
        if isinstance(parsed, str):
            found.append(entry.refuse(parsed))
            continue
        entry.student, entry.assignment, entry.claimed = parsed
        if entry.assignment != assignment:
            found.append(entry.refuse(f"{entry.assignment!r} is no assignment of this course"))
            continue
        if entry.claimed > now + CLOCK_SKEW:
            found.append(entry.refuse(f"the time in its name, {entry.claimed:%Y-%m-%d %H:%M:%S} UTC, is in the future"))
            continue
        if roster and entry.student not in roster:
            found.append(entry.refuse(f"{entry.student} is not on the course's roster"))
            continue
        try:
            uid = pwd.getpwnam(entry.student).pw_uid
        except KeyError:
            found.append(entry.refuse(f"there is no Unix user {entry.student}, so nobody can have submitted as them"))
            continue
        try:
            st = os.stat(name, dir_fd=inbound_fd, follow_symlinks=False)
        except OSError as exc:
            found.append(entry.refuse(_os_reason(exc, "it")))
            continue
        if not stat.S_ISDIR(st.st_mode):
            found.append(entry.refuse(f"it is {kind_of(st.st_mode)}, not a folder"))
        elif st.st_uid != uid:
            found.append(entry.refuse(f"it is owned by {entry.owner}, not by {entry.student}"))
        else:
            found.append(entry)
    return found


def _owned(entry, dir_fd):
    try:
        entry.owner = owner_name(os.stat(entry.name, dir_fd=dir_fd, follow_symlinks=False).st_uid)
    except OSError:
        entry.owner = "nobody (it is gone)"
    return entry


def kind_of(mode):
    for test, what in ((stat.S_ISLNK, "a link"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file"),
                       (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device")):
        if test(mode):
            return what
    return "something that is neither a file nor a folder"


class RefusedSubmission(Exception):
    """The whole submission is refused: the message says why, naming the file."""


@dataclass
class Copied:
    """What a copy took and what it left out."""
    files: int = 0
    bytes: int = 0
    latest_change: float = 0.0  # the latest ctime of what was copied (and of the folders it was in)
    left_out: list = field(default_factory=list)  # (relative path, why)


def copy_submission(inbound_fd, name, uid, dest, limits=InboundLimits(), ignore=(), skip_names=()):
    """Copy the inbound folder ``name`` (its owner must be ``uid``) into the new folder ``dest`` (which must not
    exist; made 0700), following no link, taking only regular files and folders that ``uid`` owns. ``ignore``:
    name patterns left out silently (the course's ``CourseDirectory.ignore``); ``skip_names``: names at the top that
    are left out and named (pages that would pass for grading's own). Returns a
    ``Copied``; raises ``RefusedSubmission`` when the submission as a whole is over its limits or cannot be read."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(name, flags, dir_fd=inbound_fd)
    except OSError as exc:
        raise RefusedSubmission(_os_reason(exc, "its folder")) from None
    out = Copied()
    try:
        st = os.fstat(top)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:  # swapped since it was listed
            raise RefusedSubmission(f"it changed while it was read: it is now {kind_of(st.st_mode)} owned by "
                          f"{owner_name(st.st_uid)}")
        os.mkdir(dest, 0o700)
        _copy_dir(top, dest, "", 0, uid, limits, ignore, skip_names, out, st)
    finally:
        os.close(top)
    return out


def _copy_dir(src_fd, dest, rel, depth, uid, limits, ignore, skip_names, out, st):
    out.latest_change = max(out.latest_change, st.st_ctime)
    try:
        names = sorted(os.listdir(src_fd))
    except OSError as exc:
        if not rel:
            raise RefusedSubmission(_os_reason(exc, "its folder")) from None
        out.left_out.append((rel + "/", _os_reason(exc, "this folder")))
        return
    for name in names:
        path = f"{rel}/{name}" if rel else name
        if any(fnmatch.fnmatch(name, pattern) for pattern in ignore):
            continue
        if not rel and name in WRITTEN_BY_COLLECT:
            continue  # nbgrader's submit writes it; collect writes its own
        if not rel and name in skip_names:
            out.left_out.append((path, "it has the name of a page that grading writes"))
            continue
        out.files += 1
        if out.files > limits.entries:
            raise RefusedSubmission(f"it holds more than {limits.entries} files and folders")
        try:
            lst = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        except OSError as exc:
            out.left_out.append((path, _os_reason(exc, "it")))
            continue
        if stat.S_ISDIR(lst.st_mode):
            if depth + 1 > limits.depth:
                out.left_out.append((path + "/", f"deeper than {limits.depth} folders"))
                continue
            _copy_child_dir(src_fd, name, dest, path, depth, uid, limits, ignore, skip_names, out)
        elif stat.S_ISREG(lst.st_mode):
            _copy_file(src_fd, name, os.path.join(dest, name), path, uid, limits, out)
        else:
            what = kind_of(lst.st_mode)
            out.left_out.append((path, f"{what}, never followed" if what == "a link" else
                                 f"{what}, not a regular file"))


def _copy_child_dir(src_fd, name, dest, path, depth, uid, limits, ignore, skip_names, out):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_fd)
    except OSError as exc:
        out.left_out.append((path + "/", _os_reason(exc, "this folder")))
        return
    try:
        st = os.fstat(fd)
        if st.st_uid != uid:
            out.left_out.append((path + "/", f"owned by {owner_name(st.st_uid)}, not by the student"))
            return
        sub = os.path.join(dest, name)
        os.mkdir(sub, 0o700)
        _copy_dir(fd, sub, path, depth + 1, uid, limits, ignore, skip_names, out, st)
    finally:
        os.close(fd)


def _copy_file(src_fd, name, target, path, uid, limits, out):
    try:
        # O_NONBLOCK: a pipe swapped in after the lstat would otherwise block the open
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_fd)
    except OSError as exc:
        out.left_out.append((path, _os_reason(exc, "it")))
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            out.left_out.append((path, f"{kind_of(st.st_mode)}, not a regular file"))
            return
        if st.st_uid != uid:
            out.left_out.append((path, f"owned by {owner_name(st.st_uid)}, not by the student"))
            return
        if st.st_size > limits.file_bytes:
            out.left_out.append((path, f"{st.st_size / 1e6:.1f} MB, over the limit of {limits.file_bytes / 1e6:g} "
                                       f"MB a file"))
            return
        if out.bytes + st.st_size > limits.total_bytes:
            raise RefusedSubmission(f"its files come to more than {limits.total_bytes / 1e6:g} MB (at {path})")
        os.set_blocking(fd, True)
        data = _read_at_most(fd, limits.file_bytes)
        if data is None:
            out.left_out.append((path, f"it grew past the limit of {limits.file_bytes / 1e6:g} MB a file while it "
                                       f"was read"))
            return
        out.bytes += len(data)
        if out.bytes > limits.total_bytes:
            raise RefusedSubmission(f"its files come to more than {limits.total_bytes / 1e6:g} MB (at {path})")
        out.latest_change = max(out.latest_change, os.fstat(fd).st_ctime)
    finally:
        os.close(fd)
    w = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(w, "wb") as f:
        f.write(data)


def _read_at_most(fd, most):
    chunks, size = [], 0
    while True:
        chunk = os.read(fd, min(1 << 20, most + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > most:
            return None


def _os_reason(exc, what):
    if exc.errno == errno.ELOOP:
        return f"{what} is a link, never followed"
    if exc.errno == errno.ENOTDIR:  # O_DIRECTORY | O_NOFOLLOW on what is now a link or a file
        return f"{what} is no longer a folder (a link or a file took its place), never followed"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{what} cannot be read by the instructor (permission denied): the student can submit again"
    if exc.errno == errno.ENOENT:
        return f"{what} was removed while it was read"
    return f"{what} cannot be read ({exc.strerror or exc})"


def submission_time(claimed, copied):
    """(time, note): the submission's time for grading and lateness. The time in its name, unless what was copied
    changed later than that (beyond ``CLOCK_SKEW``): then the time of the latest change, and a note saying so."""
    changed = utc_naive(copied.latest_change) if copied.latest_change else None
    if changed is not None and changed > claimed + CLOCK_SKEW:
        return changed, (f"its files changed after the time in its name ({claimed:%Y-%m-%d %H:%M:%S}): counted as "
                         f"submitted at {changed:%Y-%m-%d %H:%M:%S} UTC, when they last changed")
    return claimed, None
