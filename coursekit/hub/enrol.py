"""Students into a course's gradebook, written by whoever owns the course folder.

The hub runs as root, and a course folder is its instructors' to write: a ``gradebook.db`` there may be a link to
another course's gradebook, or to any file of the machine. So when root enrols students (the roster at ``course
hub``, a student's first LTI launch), a process of the course folder's owner and group opens the gradebook
(``python -I -m coursekit.hub.enrol FOLDER``, the records as JSON on its standard input, the ids it added as JSON on its
standard output): root never opens what an instructor may have replaced.

The same process keeps the course's departed students (``lms/departed.json`` in the course folder, {student: why}):
the class list from the LMS takes a leaver out of the hub but keeps their grades, and the export files leave a
departed student's row out (an LMS matches a row it cannot find by key by the name, and would give the grade to an
enrolled student of the same name); one the LMS lists again is taken off it.
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


DEPARTED = os.path.join("lms", "departed.json")


def read_departed(folder):
    """{student: why} of the course's departed students (``DEPARTED``; {} when there is none), never through a
    link."""
    try:
        fd = os.open(os.path.join(folder, DEPARTED), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return {}
    with os.fdopen(fd, encoding="utf-8") as f:
        try:
            found = json.load(f)
        except ValueError:
            return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def departed_here(folder, left, back):
    """``DEPARTED`` with ``left`` ({student: why}) added and the students of ``back`` taken off, written whole by
    this process. Returns what it holds now."""
    import tempfile
    departed = read_departed(folder)
    departed.update(left)
    for student in back:
        departed.pop(student, None)
    path = os.path.join(folder, DEPARTED)
    os.makedirs(os.path.dirname(path), mode=0o770, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".departed-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(departed, f, indent=1, sort_keys=True)
        os.chmod(tmp, 0o660)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return departed


def departed_records(python, folder, left, back):
    """``departed_here`` by the course folder's owner when this process is root and the folder is someone else's,
    else here."""
    if not left and not back:
        return None
    if os.geteuid() == 0 and os.stat(folder).st_uid != 0:
        return enrol_as_owner(python, folder, {"left": left, "back": list(back)}, args=["departed"])
    return departed_here(folder, left, back)


def enrol_as_owner(python, folder, records, timeout=300, args=()):
    """``enrol_here`` in a process of the course folder's owner and group (umask 007: the gradebook it makes is
    theirs and the group's). Returns the ids added; raises RuntimeError with what went wrong."""
    st = os.stat(folder)
    proc = subprocess.run([python, "-I", "-m", "coursekit.hub.enrol", folder, *args], input=json.dumps(records),
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
    if len(sys.argv) == 3 and sys.argv[2] == "departed":
        asked = json.load(sys.stdin)
        print(json.dumps(departed_here(sys.argv[1], asked["left"], asked["back"])))
    elif len(sys.argv) == 2:
        print(json.dumps(enrol_here(sys.argv[1], json.load(sys.stdin))))
    else:
        sys.exit("usage: python -m coursekit.hub.enrol COURSE_FOLDER [departed]  (records as JSON on stdin)")
