"""What a submission may hold, and the sentence that says why one is refused: one rule set, read by the instructor's
collect (``coursekit.exchange.inbound``, ``coursekit.exchange.classes.CourseCollect``), which copies a submission
out of the exchange's inbound, and by the student's submit (``learner.submit.PrivateSubmit``), which runs the same
reader over the student's folder without writing anything (``check_folder``) and refuses, when it is made, a
submission that collect would refuse, with the sentence collect would print; then copies it into the inbound with
that same reader, so what arrives is what the check counted.

The reader opens every folder and file relative to its parent's descriptor with ``O_NOFOLLOW`` and checks the open
file's type (and, for collect, its owner) with ``fstat``: a link is never followed, wherever it stands, even one
swapped in while it runs; anything that is not a regular file or a folder is left out. The limits (``LIMITS``, the
course's: its ``nbgrader_config.py`` and the hub's students' settings take them from here): a file over
``file_bytes`` is left out (named); a submission over ``total_bytes`` or ``entries`` is refused whole; folders
deeper than ``depth`` are left out; a submission without a notebook of the assignment is refused.
"""
import errno
import fnmatch
import os
import pwd
import stat
from dataclasses import dataclass, field

from .inert_text import inert

# what nbgrader's submit writes and collect replaces or checks itself
WRITTEN_BY_COLLECT = ("timestamp.txt",)
ADDED_BY_SUBMIT = {"submission_secret.txt": 128}  # what else nbgrader's submit writes at the top: name, bytes
NOTEBOOKS_NAMED = 3  # the other notebooks a refusal names, past them a count
# the end of a submission's folder name in the inbound while the student's submit writes it: the folder takes its own
# name (nbgrader's student+assignment+time+random) when it is complete, and collect never takes one with this ending
BEING_WRITTEN = ".incomplete"


@dataclass(frozen=True)
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

    @classmethod
    def of(cls, coursedir, entries=None, depth=None):
        """The limits nbgrader's settings give (``CourseDirectory.max_file_size`` and ``max_dir_size``, in kB)."""
        return cls(file_bytes=1000 * coursedir.max_file_size, total_bytes=1000 * coursedir.max_dir_size,
                   entries=cls.entries if entries is None else entries, depth=cls.depth if depth is None else depth)


LIMITS = InboundLimits()  # the course's


class RefusedSubmission(Exception):
    """The whole submission is refused: the message says why, naming the file."""


def over_entries(limits):
    return f"it holds more than {limits.entries} files and folders"


def over_total(limits, path):
    return f"its files come to more than {limits.total_bytes / 1e6:g} MB (at {path})"


def over_file(size, limits):
    return f"{size / 1e6:.1f} MB, over the limit of {limits.file_bytes / 1e6:g} MB a file"


def over_depth(limits):
    return f"deeper than {limits.depth} folders"


def no_notebook(notebooks, copied):
    """The sentence refusing a submission without a notebook of the assignment (``notebooks``, names at its top),
    or None when it holds one: what became of a notebook of that name, and the notebooks it holds instead."""
    top = [path for path in copied.taken if "/" not in path]
    if any(n in top for n in notebooks):
        return None
    why = f"it holds no notebook of the assignment ({', '.join(notebooks)})"
    lost = [f"{path}: {reason}" for path, reason in copied.left_out if path in notebooks]
    if lost:
        return why + f"; left out: {'; '.join(lost)}"
    others = sorted(n for n in top if n.endswith(".ipynb"))
    if others:
        more = f" and {len(others) - NOTEBOOKS_NAMED} more" if len(others) > NOTEBOOKS_NAMED else ""
        return why + f"; it holds {', '.join(others[:NOTEBOOKS_NAMED])}{more}: the notebook must keep its name"
    return why


def owner_name(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def kind_of(mode):
    for test, what in ((stat.S_ISLNK, "a link"), (stat.S_ISDIR, "a folder"), (stat.S_ISREG, "a file"),
                       (stat.S_ISFIFO, "a pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device")):
        if test(mode):
            return what
    return "something that is neither a file nor a folder"


@dataclass
class Copied:
    """What a copy took and what it left out."""
    files: int = 0
    bytes: int = 0
    latest_change: float = 0.0  # the latest ctime of what was copied (and of the folders it was in)
    left_out: list = field(default_factory=list)  # (relative path, why)
    taken: list = field(default_factory=list)  # the relative paths of the files taken


def copy_submission(inbound_fd, name, uid, dest, limits=LIMITS, ignore=(), skip_names=(), added=None):
    """Copy the folder ``name`` (of the folder open as ``inbound_fd``; its owner must be ``uid``) into the new folder
    ``dest`` (which must not exist; made 0700), following no link, taking only regular files and folders that
    ``uid`` owns. ``ignore``: name patterns left out silently (the course's ``CourseDirectory.ignore``);
    ``skip_names``: names at the top that are left out and named (pages that would pass for grading's own).
    ``dest`` None: nothing is written, ``uid`` None: no owner is checked, and ``added`` {name: bytes}: files
    counted at the top as if they were there, as nbgrader's submit will write them (``check_folder``). Returns a
    ``Copied``; raises ``RefusedSubmission`` when the submission as a whole is over its limits or cannot be read."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        top = os.open(name, flags, dir_fd=inbound_fd)
    except OSError as exc:
        raise RefusedSubmission(os_reason(exc, "its folder", uid)) from None
    out = Copied()
    try:
        st = os.fstat(top)
        if not stat.S_ISDIR(st.st_mode) or (uid is not None and st.st_uid != uid):  # swapped since it was listed
            raise RefusedSubmission(f"it changed while it was read: it is now {kind_of(st.st_mode)} owned by "
                                    f"{owner_name(st.st_uid)}")
        if dest is not None:
            os.mkdir(dest, 0o700)
        _copy_dir(top, dest, "", 0, uid, limits, ignore, skip_names, out, st, added or {})
    finally:
        os.close(top)
    return out


def check_folder(path, notebooks, limits=LIMITS, ignore=(), dest=None):
    """What collect would make of the folder ``path`` if it were handed in as it is, read by the same reader
    (writing nothing, or its copy into the folder ``dest``): a ``Copied``, or ``RefusedSubmission`` with the sentence
    collect would print (over a limit, or no notebook of the assignment: ``notebooks``)."""
    parent = os.open(os.path.dirname(os.path.abspath(path)) or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        skip = tuple(sorted(n[:-len(".ipynb")] + ".html" for n in notebooks))
        copied = copy_submission(parent, os.path.basename(os.path.abspath(path)), None, dest, limits, ignore, skip,
                                 added=ADDED_BY_SUBMIT)
    finally:
        os.close(parent)
    refused = no_notebook(notebooks, copied)
    if refused:
        raise RefusedSubmission(refused)
    return copied


def _copy_dir(src_fd, dest, rel, depth, uid, limits, ignore, skip_names, out, st, added=None):
    out.latest_change = max(out.latest_change, st.st_ctime)
    try:
        names = sorted(set(os.listdir(src_fd)) | set(added or ()))
    except OSError as exc:
        if not rel:
            raise RefusedSubmission(os_reason(exc, "its folder", uid)) from None
        out.left_out.append((rel + "/", os_reason(exc, "this folder", uid)))
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
            raise RefusedSubmission(over_entries(limits))
        if added and name in added:  # a file nbgrader's submit will write there, in place of any of that name
            if out.bytes + added[name] > limits.total_bytes:
                raise RefusedSubmission(over_total(limits, path))
            out.bytes += added[name]
            out.taken.append(path)
            continue
        try:
            lst = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        except OSError as exc:
            out.left_out.append((path, os_reason(exc, "it", uid)))
            continue
        if stat.S_ISDIR(lst.st_mode):
            if depth + 1 > limits.depth:
                out.left_out.append((path + "/", over_depth(limits)))
                continue
            _copy_child_dir(src_fd, name, dest, path, depth, uid, limits, ignore, skip_names, out)
        elif stat.S_ISREG(lst.st_mode):
            _copy_file(src_fd, name, None if dest is None else os.path.join(dest, name), path, uid, limits, out)
        else:
            what = kind_of(lst.st_mode)
            out.left_out.append((path, f"{what}, never followed" if what == "a link" else
                                 f"{what}, not a regular file"))


def _copy_child_dir(src_fd, name, dest, path, depth, uid, limits, ignore, skip_names, out):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_fd)
    except OSError as exc:
        out.left_out.append((path + "/", os_reason(exc, "this folder", uid)))
        return
    try:
        st = os.fstat(fd)
        if uid is not None and st.st_uid != uid:
            out.left_out.append((path + "/", f"owned by {owner_name(st.st_uid)}, not by the student"))
            return
        sub = None if dest is None else os.path.join(dest, name)
        if sub is not None:
            os.mkdir(sub, 0o700)
        _copy_dir(fd, sub, path, depth + 1, uid, limits, ignore, skip_names, out, st)
    finally:
        os.close(fd)


def _copy_file(src_fd, name, target, path, uid, limits, out):
    try:
        # O_NONBLOCK: a pipe swapped in after the lstat would otherwise block the open
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=src_fd)
    except OSError as exc:
        out.left_out.append((path, os_reason(exc, "it", uid)))
        return
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            out.left_out.append((path, f"{kind_of(st.st_mode)}, not a regular file"))
            return
        if uid is not None and st.st_uid != uid:
            out.left_out.append((path, f"owned by {owner_name(st.st_uid)}, not by the student"))
            return
        if st.st_size > limits.file_bytes:
            out.left_out.append((path, over_file(st.st_size, limits)))
            return
        if out.bytes + st.st_size > limits.total_bytes:
            raise RefusedSubmission(over_total(limits, path))
        if target is None:  # read-only: the size the file has now
            out.bytes += st.st_size
            out.taken.append(path)
            return
        os.set_blocking(fd, True)
        data = _read_at_most(fd, limits.file_bytes)
        if data is None:
            out.left_out.append((path, f"it grew past the limit of {limits.file_bytes / 1e6:g} MB a file while it "
                                       f"was read"))
            return
        out.bytes += len(data)
        if out.bytes > limits.total_bytes:
            raise RefusedSubmission(over_total(limits, path))
        out.latest_change = max(out.latest_change, os.fstat(fd).st_ctime)
    finally:
        os.close(fd)
    w = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(w, "wb") as f:
        f.write(data)
    out.taken.append(path)


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


def os_reason(exc, what, uid=-1):
    """Why ``what`` could not be opened or read, as a sentence: for collect (``uid`` the student's), or for the
    student's own submit (``uid`` None), where a file the student cannot read is theirs to make readable."""
    if exc.errno == errno.ELOOP:
        return f"{what} is a link, never followed"
    if exc.errno == errno.ENOTDIR:  # O_DIRECTORY | O_NOFOLLOW on what is now a link or a file
        return f"{what} is no longer a folder (a link or a file took its place), never followed"
    if exc.errno in (errno.EACCES, errno.EPERM) and uid is None:
        return f"{what} cannot be read (permission denied): make it readable (chmod u+r) and submit again"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{what} cannot be read by the instructor (permission denied): the student can submit again"
    if exc.errno == errno.ENOENT:
        return f"{what} was removed while it was read"
    return f"{what} cannot be read ({exc.strerror or exc})"
