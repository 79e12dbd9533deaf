"""Students into a course's gradebook, written by whoever owns the course folder.

The hub runs as root, and a course folder is its instructors' to write: a ``gradebook.db`` there may be a link to
another course's gradebook, or to any file of the machine. So when root enrols students (the roster at ``course
hub``, a student's first LTI launch), a process of the course folder's owner and group opens the gradebook
(``python -I -m coursekit.hub.enrol FOLDER``, the records as JSON on its standard input, the ids it added as JSON on its
standard output): root never opens what an instructor may have replaced.
"""
import json
import os
import subprocess
import sys


def enrol_here(folder, records):
    """``records`` ({id, first_name, last_name, email, lms_user_id}) added to the course's gradebook, or brought up to
    date, by this process. Returns the ids that were not there before."""
    import grader.nbgrader_plugin  # noqa: F401  (a new gradebook's revision read in-process, not by `alembic`)
    from ..pipeline import gradebook
    try:  # made here, not by SQLite (which makes it 0644 less the umask): the instructors' group writes it too
        os.close(os.open(os.path.join(folder, "gradebook.db"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o660))
    except FileExistsError:
        pass
    with gradebook(folder) as gb:
        before = {s.id for s in gb.students}
        for r in records:
            gb.update_or_create_student(r["id"], first_name=r.get("first_name") or None,
                                        last_name=r.get("last_name") or None, email=r.get("email") or None,
                                        lms_user_id=r.get("lms_user_id") or None)
    return [r["id"] for r in records if r["id"] not in before]


def enrol_as_owner(python, folder, records, timeout=300):
    """``enrol_here`` in a process of the course folder's owner and group (umask 007: the gradebook it makes is
    theirs and the group's). Returns the ids added; raises RuntimeError with what went wrong."""
    st = os.stat(folder)
    proc = subprocess.run([python, "-I", "-m", "coursekit.hub.enrol", folder], input=json.dumps(records),
                          user=st.st_uid, group=st.st_gid, extra_groups=[], umask=0o007, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": folder,
                               "PYTHONDONTWRITEBYTECODE": "1"},
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(f"its gradebook could not be written ({said[-1] if said else f'exit {proc.returncode}'})")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def enrol_records(python, folder, records):
    """The records into the course's gradebook: by the folder's owner when this process is root and the folder is
    someone else's, else here. Returns the ids added."""
    if os.geteuid() == 0 and os.stat(folder).st_uid != 0:
        return enrol_as_owner(python, folder, records)
    return enrol_here(folder, records)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m coursekit.hub.enrol COURSE_FOLDER  (records as JSON on stdin)")
    print(json.dumps(enrol_here(sys.argv[1], json.load(sys.stdin))))
