"""The hub's state of several courses (``<state>/courses.json``, root's alone): who is an instructor or a student of
which course, and what the LMS's launches brought (each student's LMS user id, the line items URL). ``course hub
--courses`` and ``--lti`` write it (coursekit/hub/courses.py), each launch and server start reads it
(coursekit/hub/lti.py), and ``course return --lms`` finds a course's students in it (coursekit/lms/return_grades.py)."""
import contextlib
import fcntl
import json
import os
import threading

from .root_files import write_atomic

STATE_FILE = "courses.json"


class HubState:
    """``STATE/courses.json``: {"courses": {id: {"folder", "context_id", "instructors": [..], "students": {id: LMS
    user id or ""}, "lineitems", "links": {resource link id: {"title", "lineitem", "assignment"}}, "memberships"
    (the class list's URL), "memberships_differences" ({"list", "url"}: the differences link its last list came with),
    "roster_sync" (its last changes)}}, "users": {name: {"sub", "lms_ids"}}, "made": [the Unix users this hub
    made]}, written whole under a lock, readable by root alone."""

    def __init__(self, state_dir):
        self.path = os.path.join(state_dir, STATE_FILE)
        self._lock = threading.Lock()

    def read(self):
        try:
            with open(self.path) as f:
                data = json.load(f)
        except FileNotFoundError:
            data = {}
        data.setdefault("courses", {})
        data.setdefault("users", {})
        return data

    @contextlib.contextmanager
    def change(self):
        """The state to change in the block, written back when it ends (one writer at a time, in this process and
        across processes)."""
        fd = os.open(self.path + ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with self._lock, os.fdopen(fd, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.read()
            yield data
            write_atomic(self.path, json.dumps(data, indent=1, sort_keys=True), mode=0o600)


def course_of_folder(data, folder):
    """(course id, its state) of the course folder ``folder``, or (None, None)."""
    for cid, course in data["courses"].items():
        if course["folder"] == folder:
            return cid, course
    return None, None


def instructor_course(data, name):
    """The id of the course ``name`` teaches on this hub, or None."""
    return next((cid for cid, c in data["courses"].items() if name in c["instructors"]), None)


def student_courses(data, name):
    return sorted(cid for cid, c in data["courses"].items() if name in c["students"])


def add_launched(courses, data):
    """The members that launches brought (the hub's state from its last run) added to the file's courses, so that a
    restart keeps them where they are: the course folder stays its owner's when that owner is an instructor."""
    import pwd
    for c in courses:
        before = data["courses"].get(c.id)
        if not before or before.get("folder") != c.folder:
            continue
        if c.context_id:  # an LTI course: its instructors come by launch too; elsewhere the file alone names them
            c.instructors = list(dict.fromkeys(c.instructors + before.get("instructors", [])))
        try:
            owner = pwd.getpwuid(os.stat(c.folder).st_uid).pw_name
        except KeyError:
            owner = None
        if owner in c.instructors:
            c.instructors.remove(owner)
            c.instructors.insert(0, owner)
        listed = set(c.students)
        c.launched = [sid for sid in before.get("students", {}) if sid not in listed]


def record_courses(data, courses):
    """The courses of the file in the hub's state: what the file says, with the members that launches brought
    (kept across restarts); a course no longer in the file is dropped, and so is an instructor (a teaching
    assistant, say) no longer in a course's list on a hub without LTI, where the file is what names them."""
    before = data["courses"]
    data["courses"] = {}
    for c in courses:
        old = before.get(c.id, {}) if before.get(c.id, {}).get("folder") == c.folder else {}
        students = dict(old.get("students", {}))
        for sid in c.students:
            students.setdefault(sid, "")
        data["courses"][c.id] = {"folder": c.folder, "context_id": c.context_id,
                                 "instructors": list(dict.fromkeys(c.instructors + (old.get("instructors", [])
                                                                                    if c.context_id else []))),
                                 "students": students, "lineitems": old.get("lineitems"),
                                 "links": old.get("links", {}),
                                 **{k: old[k] for k in ("memberships", "memberships_differences", "roster_sync")
                                    if k in old}}


def made_accounts(data):
    """The Unix users this hub made at a launch (``record_made``): the only existing accounts, beside the file's own
    instructors and roster and the users launches already brought, that a launch may log into. The account comment
    (``coursekit.hub.access.MADE_BY_HUB``) is no proof: every install writes it."""
    return set(data.get("made", []))


def record_made(state_dir, names):
    """``names``, just made by ``useradd`` for a launch, in the hub's state as this hub's own accounts."""
    if names:
        with HubState(state_dir).change() as data:
            data["made"] = sorted(made_accounts(data) | set(names))
