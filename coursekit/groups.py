"""A course's Unix groups, named and read in one place: its instructors' (``staff_group_of``: the course folder's
group), its students' on a hub of several courses (``students_group``), the group of the reference answers on a hub
(``REFERENCE_GROUP``), who is in a group (``group_members``) and a group's name for a message (``group_name``). The
exchange's classes (as the instructor), the hub (as root) and the class list from the LMS read them here; making
groups and adding members is the hub's, as root (``coursekit.hub.access.ensure_group``)."""
import grp
import os
import pwd

REFERENCE_GROUP = "course-reference"  # the reference answers' group on a hub: every course's instructors


def course_group(course_root):
    """The gid of the course folder: the instructors' group, which the exchange's course folder shares."""
    return os.stat(course_root).st_gid


def staff_group_of(course_id):
    """The Unix group of a course's instructors: ``<course id>-staff`` (its course folder's group)."""
    return f"{course_id}-staff"


def students_group(course_id):
    """The Unix group of a course's students (and its instructors) on a hub of several courses:
    ``<course id>-students`` (``coursekit.hub.courses`` makes it). Where it exists, the course's outbound is that
    group's alone, so a student of another course cannot fetch this one's assignments."""
    return f"{course_id}-students"  # at most 32: a course id has at most 23


def group_name(gid):
    """A group's name, or its number where the machine has no such group."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def group_members(gid):
    """The user names in group ``gid``: its listed members and the users whose primary group it is."""
    try:
        members = set(grp.getgrgid(gid).gr_mem)
    except KeyError:
        return set()
    members |= {u.pw_name for u in pwd.getpwall() if u.pw_gid == gid}
    return members
