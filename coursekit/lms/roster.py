"""The class list from the LMS: Names and Role Provisioning Services 2.0 (NRPS,
https://www.imsglobal.org/spec/lti-nrps/v2p0/).

A platform that offers it puts its claim (``https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice``, with
the context's ``context_memberships_url``) in each launch; the hub keeps the URL in its state, per course. When an
instructor launches the course, the hub reads the members (``read_members``: the OAuth 2 client-credentials token
for the ``contextmembership.readonly`` scope, pages followed by their ``Link: rel="next"``) and keeps the course in
step (``sync_course``), saying what changed:

* a joiner (an Active Learner the course does not have) becomes its student in the hub's state and in its
  gradebook (names, email, LMS user id), so that ``course collect`` names them and exports hold them before their
  first launch; their account and group come at that launch, as for anyone;
* a leaver (a student who came from the LMS and whom it no longer lists as an Active Learner: gone, Inactive, or
  another role) leaves the course's students in the hub's state and its students' group, so the hub no longer lets
  them in; their grades stay in the gradebook;
* in a class under ``SMALL_CLASS`` students, a student merely missing from the list is kept and named: a small
  class is changed only for students the LMS itself marks (Inactive, Deleted, another role), since a list that
  misses two of three students is more likely a platform's slip than two leavers;
* a role change (a student the LMS now lists as an Instructor or TeachingAssistant) is a leaver who is named as
  such: they are an instructor at their next launch (a user is an instructor or a student here, not both);
* a leaver the LMS lists again as an Active Learner (one sync took them out, say from a list cut short, and the
  next has them) comes back as the same LMS user: the hub's user of that name whose ``sub`` is theirs, their
  account, their gradebook entry and grades kept, said as back;
* a member whose user id gives no Unix user name by the hub's rule, or who is named by a custom field (NRPS sends
  the ``user_id``, the launch's ``sub``), is named and left to their first launch.

A list takes a student out only when it is whole by the spec's own signals. Every ``next`` page is read (a page
that fails, a list that pages on past ``MOST_PAGES`` or to another site, changes nothing; coursekit.lms.links reads
the ``Link`` headers). And a platform may send with the list a
``Link: <...>; rel="differences"`` (NRPS 2.0 section 2.4.3: the changes in the membership since that list was
made; a member gone since then has the status ``Deleted``, which no full list carries). The hub keeps that link,
beside the class list's URL it came with, and at the next sync reads it too, every page, besides the full list.
A student who left since the last list is in those differences, so with them a removal needs the LMS's word:

* a student the differences give as Deleted, Inactive or in another role, and whom the full list does not have, is
  a leaver the LMS itself marked, in a class of any size;
* a student merely missing from the full list, whom the differences do not have leaving, is kept and named: the
  list is not whole (a page lost, a platform's slip), whatever the class's size;
* differences that cannot be read (refused, not JSON, cut short) take nobody out for missing either, this time.

Joiners join and members the full list itself marks leave either way. Then the new list's own link is kept for the
next sync (none when it sent none: the rules above without differences apply). A link to another site than the
class list's is not followed (the hub's token would go with it) and keeps nothing.

Students of the LTI file's rosters (no LMS user id) are the administrator's and are left as they are.

User ids are compared as strings whatever JSON type the platform sends (NRPS says a string; an older Canvas sends
numbers), and kept as strings: the hub's state and the gradebook hold ``"5003"``, and a number an earlier sync kept
is read as its string, so the same LMS user is never taken for a leaver and a joiner.
"""
import contextlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .ags import MOST_PAGES, TIMEOUT, AgsError, http_request, refusal_text, access_token
from .cells import user_id
from .links import OffSite, link, next_page, same_site

NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"
MEMBERSHIP_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"
SMALL_CLASS = 10  # under this many students from the LMS, a student missing from the list is kept (named)


class Members(list):
    """The members read, every page; ``differences``: the list's ``rel="differences"`` link, the first a page sent
    (on the class list's own site), else None."""
    differences = None


def read_members(url, credentials, timeout=TIMEOUT):
    """The context's members (NRPS ``members``), every page, as ``Members`` (with the list's differences link)."""
    token = access_token(credentials, [SCOPE_NRPS], timeout)
    members, pages, first = Members(), 0, url
    while url and pages < MOST_PAGES:
        status, headers, body = http_request("GET", url, timeout=timeout, headers={
            "Authorization": f"Bearer {token}", "Accept": MEMBERSHIP_TYPE})
        if status != 200:
            raise AgsError(status, f"the platform refused the class list ({refusal_text(status, body)})")
        try:
            page = json.loads(body)
        except ValueError:
            raise AgsError(status, "the class list is not JSON")
        if not isinstance(page, dict) or not isinstance(page.get("members"), list):
            raise AgsError(status, "a page of the class list holds no members list: nothing changed")
        members += [m for m in page["members"] if isinstance(m, dict)]
        differences = link(headers, "differences", base=url)
        if members.differences is None and differences and same_site(first, differences):
            members.differences = differences
        try:
            url, pages = next_page(headers, url, first), pages + 1
        except OffSite as exc:  # a list that cannot be read whole changes nothing
            raise AgsError(200, f"{exc}: nothing changed")
    if url:  # a list cut short would take everyone after the cut out of the course
        raise AgsError(200, f"the class list goes on past {MOST_PAGES} pages: nothing changed")
    return members


@dataclass
class RosterChange:
    course: str
    joined: dict = field(default_factory=dict)    # {name: member}
    left: dict = field(default_factory=dict)      # {name: why}
    roles: dict = field(default_factory=dict)     # {name: the LMS's role now}
    unnamed: dict = field(default_factory=dict)   # {LMS user id: why}
    back: list = field(default_factory=list)      # the joiners who are the hub's users of the same LMS user before
    kept: dict = field(default_factory=dict)      # {name: why}: missing from the list of a small class, kept
    also: dict = field(default_factory=dict)      # {name: roles}: students the LMS lists in another role too, kept

    def lines(self):
        """What changed, one line each (an LMS user id or name shown inert)."""
        from grader.plain import inert
        out = [f"{self.course}: class list from the LMS: {len(self.joined)} joined, {len(self.left)} left"
               + (f", {len(self.roles)} changed role" if self.roles else "")
               + (f", {len(self.kept)} missing kept" if self.kept else "")]
        out += [f"  {'back' if n in self.back else 'joined'} {n} ({m.get('name') or m.get('user_id')})"
                for n, m in sorted(self.joined.items())]
        out += [f"  left {n}: {why}" for n, why in sorted(self.left.items())]
        out += [f"  kept {n}: {why}" for n, why in sorted(self.kept.items())]
        out += [f"  role {n}: {role} in the LMS now; an instructor at their next launch" for n, role in
                sorted(self.roles.items())]
        out += [f"  still a student {n}: {role} in the LMS; kept a student here, where a user is an instructor or a "
                f"student, not both (a launch as an instructor is refused)" for n, role in sorted(self.also.items())]
        out += [f"  not added {u!r}: {why}" for u, why in sorted(self.unnamed.items())]
        return [inert(line) for line in out]


def _status(value):
    """An NRPS member's status as the spec spells it (Active, Inactive, Deleted), whatever its case."""
    return value.capitalize() if isinstance(value, str) else "Active"


def learns(roles):
    """Whether a member's roles hold a student's role (Learner), whatever else they hold."""
    from ..hub.lti_claims import role_of
    return any(role_of([r]) == "student" for r in roles) if isinstance(roles, list) else False


def plan(course_id, course, members, settings, data=None, marks=(), unsure=None):
    """The RosterChange that keeps ``course`` (the hub's state of it; ``data``: the whole state) in step with
    ``members``, the full list. ``marks``: the members the LMS's differences since the last list give (a student
    they mark Deleted, Inactive or in another role, whom the list does not have, leaves); ``unsure``: why a student
    merely missing from the list is kept (then nobody leaves for missing)."""
    from ..hub.lti_claims import role_names, role_of, unix_name, user_exists
    from ..hub.state import made_accounts
    data = data or {}
    change = RosterChange(course_id)
    claim, prefix = settings["username_claim"], settings["username_prefix"]
    learners, others = {}, {}  # LMS user id: member
    current_subs = {user_id(s): name for name, s in course.get("students", {}).items() if user_id(s)}  # id: name
    for m in members:
        sub = user_id(m.get("user_id"))  # an older Canvas's numbers compared and kept as their strings
        if sub is None:
            continue
        m = {**m, "user_id": sub}
        role, status = role_of(m.get("roles")), _status(m.get("status", "Active"))
        if status == "Active" and (role == "student" or learns(m.get("roles"))):
            learners[sub] = m  # a Learner listed as a TeachingAssistant too is still the course's student
            if role != "student" and user_id(current_subs.get(sub)) is not None:
                change.also[current_subs[sub]] = "/".join(role_names(m.get("roles")))
        else:
            others[sub] = (m, role, role_names(m.get("roles")), status)
    since = {}  # LMS user id: (member, role, role names, status) the differences mark, the list lacking them
    for m in marks:
        sub = user_id(m.get("user_id"))
        if sub is None or sub in learners or sub in others:
            continue
        role, status = role_of(m.get("roles")), _status(m.get("status", "Active"))
        if status != "Active" or role != "student":
            since[sub] = ({**m, "user_id": sub}, role, role_names(m.get("roles")), status)
    current = course.get("students", {})
    by_sub = {user_id(sub): name for name, sub in current.items() if user_id(sub)}  # a number kept before: its string
    for sub, m in learners.items():
        if sub in by_sub:
            continue
        name = unix_name(sub, prefix) if claim == "sub" else None
        if claim != "sub":
            change.unnamed[sub] = f"this hub names users by {claim}, which the class list does not carry: they " \
                                  f"join at their first launch"
        elif name is None:
            change.unnamed[sub] = "their LMS user id gives no valid Unix user name (refused at launch too)"
        elif name in course.get("instructors", []) and user_id(data.get("users", {}).get(name, {}).get("sub")) == sub:
            change.unnamed[sub] = (f"{name} is this course's instructor here and the LMS now lists them as a Learner "
                                   f"only: not made a student (a user is an instructor or a student here, not both; "
                                   f"the hub's administrator changes it)")
        elif name in current or name in course.get("instructors", []):
            change.unnamed[sub] = f"{name} is already someone else's here"
        elif name in data.get("users", {}):
            known = data["users"][name]
            if not isinstance(known, dict) or user_id(known.get("sub")) != sub:
                change.unnamed[sub] = f"{name} is already someone else's here"
            else:  # the same LMS user, taken out by an earlier list: back, with their account and grades
                change.joined[name] = m
                change.back.append(name)
        elif user_exists(name) and name not in made_accounts(data) and name not in settings.get("configured", []):
            change.unnamed[sub] = f"{name} is an account of this machine that the hub did not make"
        else:
            change.joined[name] = m
    for sub, name in by_sub.items():
        if sub in learners:
            continue
        marked = " (the LMS's changes since its last list)" if sub in since else ""
        if marked:
            others[sub] = since[sub]
        if sub not in others:
            if unsure:
                change.kept[name] = f"not in the LMS's list, but {unsure}"
            elif len(by_sub) < SMALL_CLASS:
                change.kept[name] = (f"not in the LMS's list, but a class under {SMALL_CLASS} is changed only for "
                                     f"students the LMS marks Inactive, Deleted or in another role")
            else:
                change.left[name] = "no longer in the LMS course"
            continue
        m, role, names, status = others[sub]
        if role == "instructor" and status == "Active":
            change.roles[name] = "/".join(names)
            change.left[name] = f"now {'/'.join(names)} in the LMS{marked}"
        else:
            change.left[name] = (f"{status} in the LMS course{marked}" if status != "Active"
                                 else f"now {'/'.join(names) or 'no role'} in the LMS{marked}")
    return change


def sync_course(settings, course_id, credentials, out=print, lock=None):
    """Read the course's members, keep the hub's state, the students' group and the gradebook in step (under
    ``lock``, the launches' own, once the list is read); returns the RosterChange (also logged to
    ``<state>/lms/<course id>-roster.jsonl``, root's). AgsError when the platform refuses the list."""
    from ..hub.state import HubState
    state = HubState(settings["state"])
    course = state.read()["courses"][course_id]
    url = course["memberships"]
    members = read_members(url, credentials)
    marks, unsure = read_differences(course.get("memberships_differences"), url, credentials)
    with lock or contextlib.nullcontext():
        data = state.read()
        change = plan(course_id, data["courses"][course_id], members, settings, data, marks, unsure)
        implausible = implausible_change(data["courses"][course_id], change)
        if implausible:
            raise AgsError(200, f"the class list from the LMS would {implausible}: nothing changed (an LMS that "
                                f"lists no one for a moment must not empty the course; a real change of that "
                                f"size is for the administrator)")
        _apply(settings, state, course_id, data["courses"][course_id], change,
               {"list": url, "url": members.differences} if members.differences else None)
    for line in change.lines():
        out(line)
    return change


def read_differences(kept, url, credentials):
    """(the members the LMS's differences since its last list give, why a student merely missing from the full list
    is kept), by the differences link ``kept`` ({"list": the class list's URL it came with, "url"}) when it belongs
    to the class list at ``url``; ((), None) when none is kept (the rules without differences apply)."""
    if not isinstance(kept, dict) or kept.get("list") != url or not isinstance(kept.get("url"), str):
        return (), None
    try:
        since = read_members(kept["url"], credentials)
    except AgsError as exc:
        return (), f"the LMS's changes since its last list (its differences link) could not be read ({exc})"
    return since, "the LMS's changes since its last list (its differences link) do not have them leaving"


def implausible_change(course, change):
    """Why ``change`` is too big to be believed, or None: the list would take every student of the course out, or
    half of a class of ten or more, or more, at once. Half counts: a platform pages its list, often in equal pages,
    and a list that lost one page of two misses exactly half the class, far likelier than half a class leaving."""
    known = [name for name, sub in course.get("students", {}).items() if sub]
    if not known or not change.left:
        return None
    if len(change.left) == len(known):
        return f"take {'the one student' if len(known) == 1 else f'all {len(known)} students'} out of the course"
    if len(known) >= SMALL_CLASS and 2 * len(change.left) >= len(known):  # one page of two lost is half
        return f"take {len(change.left)} of {len(known)} students out of the course at once"
    return None


def _apply(settings, state, course_id, course, change, differences=None):
    from ..groups import students_group
    from ..hub.enrol import departed_records, enrol_records
    if change.joined:  # the gradebook first: a joiner in the state is one the gradebook has
        enrol_records(settings["python"], course["folder"], [
            {"id": name, "first_name": _text(m.get("given_name")), "last_name": _text(m.get("family_name")),
             "email": _text(m.get("email")), "lms_user_id": m["user_id"]} for name, m in change.joined.items()])
    with state.change() as data:
        students = data["courses"][course_id]["students"]
        for name, m in change.joined.items():
            students.setdefault(name, m["user_id"])
        for name in change.left:
            students.pop(name, None)
        data["courses"][course_id]["roster_sync"] = {
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "joined": sorted(change.joined),
            "left": sorted(change.left), "roles": sorted(change.roles)}
        if differences:  # read at the next sync: the changes since this list
            data["courses"][course_id]["memberships_differences"] = differences
        else:
            data["courses"][course_id].pop("memberships_differences", None)
    # the export files leave a leaver's row out (an LMS would match it by name); one the list has as an Active
    # Learner is back, whether this sync or a launch since brought them back
    listed = [name for name, sub in course.get("students", {}).items() if sub and name not in change.left
              and name not in change.kept] + list(change.joined)
    departed_records(settings["python"], course["folder"], {name: f"left the LMS course: {why}" for name, why in
                                                            change.left.items()}, sorted(set(listed)))
    for name in change.left:  # out of the course's students' group (their server loses it at its next start)
        subprocess.run(["gpasswd", "-d", name, students_group(course_id)], capture_output=True)
    log = os.path.join(settings["state"], "lms", f"{course_id}-roster.jsonl")
    os.makedirs(os.path.dirname(log), mode=0o700, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "a") as f:
        f.write(json.dumps({"time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            "joined": sorted(change.joined), "left": change.left, "roles": change.roles,
                            "unnamed": change.unnamed, "kept": change.kept, "also": change.also}) + "\n")


def _text(value, most=200):
    return value[:most] if isinstance(value, str) else ""
