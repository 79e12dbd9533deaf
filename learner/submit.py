"""The student's side of nbgrader's exchange: a submission that only its student and the course's instructors may
read (``c.ExchangeFactory.submit``; the hub sets it in every student's server, and it ships in the student bundle).

nbgrader's own submit copies the assignment into the inbound with the student's umask (files 0644, folders 0755)
and then opens the submission's folder to everyone (0777, "so the instructor can delete later"): whoever learns its
name could read it or write into it. Here the copy is made private first (folders 0700, files 0600, nothing else
can enter while it is written) and only then opened to the inbound's group, the instructors (folders 0770, files
0640: the inbound gives new entries its group). Everything else is nbgrader's: the names, the time, the secret, the
cache in the student's home.
"""
import os
import stat

from nbgrader.exchange.default import ExchangeSubmit
from nbgrader.utils import ignore_patterns

FOLDER_MODE = 0o770
FILE_MODE = 0o640


def private_copy(src, dest, ignore):
    """Copy the student's folder ``src`` into the new folder ``dest``, private while it is written (links to folders
    are not entered; a file is read with the student's own rights)."""
    os.mkdir(dest, 0o700)
    for here, dirs, files in os.walk(src):
        rel = os.path.relpath(here, src)
        target = dest if rel == "." else os.path.join(dest, rel)
        skipped = set(ignore(here, dirs + files))
        dirs[:] = [d for d in dirs if d not in skipped and not os.path.islink(os.path.join(here, d))]
        for d in dirs:
            os.mkdir(os.path.join(target, d), 0o700)
        for name in files:
            if name in skipped or not os.path.isfile(os.path.join(here, name)):
                continue
            out = os.open(os.path.join(target, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with open(os.path.join(here, name), "rb") as r, os.fdopen(out, "wb") as w:
                while chunk := r.read(1 << 20):
                    w.write(chunk)


def open_to_group(dest):
    """Folders 0770 and files 0640 under ``dest``: its owner and its group (the inbound's: the instructors)."""
    for here, dirs, files in os.walk(dest, topdown=False):
        for name in files:
            os.chmod(os.path.join(here, name), FILE_MODE)
        os.chmod(here, FOLDER_MODE)


class PrivateSubmit(ExchangeSubmit):
    """nbgrader's submit, with the submission readable by its student and the instructors alone."""

    def do_copy(self, src, dest, log=None):
        if not dest.startswith(self.inbound_path + os.sep):
            return super().do_copy(src, dest, log)  # the cache in the student's own home: nbgrader's copy
        size = self.get_size(src)
        if size > 1000 * self.coursedir.max_dir_size:
            self.fail(f"Your assignment folder is {size / 1e6:.1f} MB; the most a submission may be is "
                      f"{self.coursedir.max_dir_size / 1000:g} MB. Remove what the notebook does not need.")
        private_copy(src, dest, ignore_patterns(exclude=self.coursedir.ignore, include=self.coursedir.include,
                                                max_file_size=self.coursedir.max_file_size, log=self.log))

    def set_perms(self, dest, fileperms, dirperms):
        if dest.startswith(self.inbound_path + os.sep):
            return open_to_group(dest)
        return super().set_perms(dest, fileperms, dirperms)

    def copy_files(self):
        super().copy_files()
        # nbgrader opens the submission's folder to everyone after set_perms (0777): close it again
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        if stat.S_IMODE(os.stat(dest).st_mode) != FOLDER_MODE:
            os.chmod(dest, FOLDER_MODE)
