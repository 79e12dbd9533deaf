"""Login from the LMS by LTI 1.3: ``course hub --lti lti.toml``.

The platform's side of the login is jupyterhub-ltiauthenticator's ``LTI13Authenticator`` (pinned), configured with
the platform's issuer, client id, authorization (OpenID Connect login) URL and key set: it checks the launch's
signature, issuer, audience, expiry, age, nonce, message type and version. ``CourseLTI13Authenticator`` adds what it
leaves out, and refuses with a page that says why:

* the launch's deployment id must be one of the file's ``deployment_ids``;
* its context (the LMS course) must be the ``context_id`` of one of the file's courses;
* its roles decide: Instructor (and its sub-roles, TeachingAssistant among them) is an instructor of that course,
  Learner (and its sub-roles) a student; any other role (Mentor, Administrator, ContentDeveloper, ...) is refused;
* the LMS user names the Unix user by ``USERNAME_RULE`` (``unix_name``, the whole id: a final newline is no valid
  name), and a name that is not a valid Unix user name, an account of the machine this hub did not make (the hub's
  state lists the accounts it made, ``hub_state.made_accounts``; the account comment every install writes is no
  proof), or a name another LMS user has, is refused;
* a user is an instructor of one course or a student of any number of them, never both (``coursekit.hub.courses``).

A good launch makes what the user needs, as root, before the hub logs them in: their Unix user (``useradd``, a home
only they may enter) if missing; an instructor joins the course's staff group ``<course id>-staff`` (the first
instructor of a course is given its folder, ``coursekit.hub.access.give_to_staff``, and its folder in the exchange), its
students' group and the reference's group; a student joins the course's students' group and, at their first launch,
the course's gradebook with the id the LMS's gradebook import knows them by (nbgrader's ``lms_user_id``: Canvas's
user id when the launch carries the custom field ``canvas_user_id``, else the launch's ``sub``, which is Moodle's
user id; grades posted by AGS go to the ``sub`` kept in the hub's state), written as the course folder's owner, never
as root. The launch's Assignment and Grade Services line items URL is kept in the
hub's state (root's alone), where ``course return --lms`` finds it. A user given a new group while their server runs
has it stopped, so that it starts again with the group (a second course's assignments become readable).

    lti.toml
    issuer = "https://canvas.instructure.com"
    client_id = "10000000000042"
    login_url = "https://sso.canvaslms.com/api/lti/authorize_redirect"   # the platform's OIDC authorization URL
    token_url = "https://sso.canvaslms.com/login/oauth2/token"
    jwks_url = "https://sso.canvaslms.com/api/lti/security/jwks"
    deployment_ids = ["42:1f6b9c..."]
    tool_key = "/etc/attention-course/lti-tool-key.pem"   # the tool's private key (made, and its public key shown,
                                                          # when missing)
    username_claim = "custom:canvas_user_id"              # "sub" (the default) or "custom:NAME"
    username_prefix = "c"

    [[course]]
    folder = "/srv/courses/enc101"
    context_id = "4dde05e8ca1973bcca9bffc13e1548820eee93a3"
    instructors = ["c17"]        # optional: instructors before any launch
    roster = "enc101.csv"        # optional: students before any launch (id,name)
"""
import asyncio
import json
import os
import subprocess
import threading
from dataclasses import dataclass

from .enrol import enrol_as_owner
from .access import HubError
from .lti_config import url_or_none
from ..lms.ags import AGS_CLAIM
from .lti_claims import LTI, USERNAME_RULE, link_assignment, lms_id, role_names, role_of, unix_name, user_exists

class Refused(Exception):
    """A launch refused: ``message`` is what the page says."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


@dataclass
class Admission:
    name: str
    role: str
    course: str        # the course id
    folder: str
    sub: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lineitems: str = None
    lms_ids: dict = None     # the custom fields of lti_pages.CUSTOM_FIELDS the launch carried, expanded
    link: str = None         # the resource link's id, its title, and its own line item (AGS ``lineitem``)
    link_title: str = ""
    lineitem: str = None
    link_assignment: str = None  # the assignment the link was made for (its custom parameter ``assignment``)
    memberships: str = None  # the course's class list (NRPS context_memberships_url), when the platform offers it

    @property
    def import_id(self):
        """The id the LMS's gradebook import matches the user by: Canvas's user id when sent, else ``sub``."""
        return (self.lms_ids or {}).get("canvas_user_id") or self.sub


def check_launch(settings, data, claims):
    """The Admission of a launch whose token ltiauthenticator has verified, or Refused with what the page says.
    ``data``: the hub's state (``coursekit.hub.state.HubState.read``)."""
    from .state import instructor_course, made_accounts, student_courses
    deployment = claims.get(LTI + "deployment_id")
    if deployment not in settings["deployment_ids"]:
        raise Refused(f"This hub is not set up for the LMS deployment {deployment!r}: the launch came from a "
                      f"placement of the tool that the hub's administrator has not added to its deployment_ids.")
    context = claims.get(LTI + "context") if isinstance(claims.get(LTI + "context"), dict) else {}
    context_id = context.get("id")
    title = context.get("title") or context.get("label") or context_id
    match = [(cid, c) for cid, c in data["courses"].items() if context_id and c.get("context_id") == context_id]
    if not match:
        raise Refused(f"This hub serves no course for the LMS course {title!r} (context id {context_id!r}): ask the "
                      f"hub's administrator to add it to the hub's courses.")
    cid, course = match[0]
    roles = claims.get(LTI + "roles")
    role = role_of(roles)
    if role is None:
        raise Refused(f"The LMS gave you the role(s) {', '.join(role_names(roles)) or 'none'} in {title!r}, which "
                      f"this course does not know: Instructor and TeachingAssistant are its instructors, Learner its "
                      f"students.")
    claim, prefix = settings["username_claim"], settings["username_prefix"]
    value = lms_id(claims, claim)
    rule = USERNAME_RULE.format(claim=claim, prefix=repr(prefix) if prefix else "nothing")
    if value is None:
        raise Refused(f"The launch carries no {claim}, which names your account here ({rule}).")
    name = unix_name(value, prefix)
    if name is None:
        raise Refused(f"Your LMS user id {value!r} gives no valid Unix user name: {rule}.")
    known = data["users"].get(name)
    sub = claims.get("sub")
    if known and known.get("sub") != sub:
        raise Refused(f"The Unix user {name} belongs to another LMS user on this hub.")
    if user_exists(name) and name not in made_accounts(data) and name not in settings["configured"] and not known:
        raise Refused(f"Your LMS user id {value!r} names the Unix user {name}, an account of this machine that the "
                      f"hub did not make: the hub logs nobody into such an account ({rule}).")
    teaches = instructor_course(data, name)
    learns = student_courses(data, name)
    if role == "instructor" and teaches and teaches != cid:
        raise Refused(f"You are already an instructor of {teaches} on this hub, and an instructor's server serves one "
                      f"course: ask the hub's administrator for another account for {title!r}.")
    if role == "instructor" and learns:
        raise Refused(f"You are a student of {', '.join(learns)} on this hub: a user is an instructor or a student "
                      f"here, not both.")
    if role == "student" and teaches:
        raise Refused(f"You are an instructor of {teaches} on this hub: a user is an instructor or a student here, "
                      f"not both.")
    ags = claims.get(AGS_CLAIM) if isinstance(claims.get(AGS_CLAIM), dict) else {}
    from .lti_pages import custom_ids
    from ..lms.roster import NRPS_CLAIM
    nrps = claims.get(NRPS_CLAIM) if isinstance(claims.get(NRPS_CLAIM), dict) else {}
    lineitems = ags.get("lineitems") if url_or_none(ags.get("lineitems")) else None
    link = claims.get(LTI + "resource_link") if isinstance(claims.get(LTI + "resource_link"), dict) else {}
    return Admission(name, role, cid, course["folder"], sub, _text(claims.get("given_name")),
                     _text(claims.get("family_name")), _text(claims.get("email")), lineitems,
                     lms_ids=custom_ids(claims), link=_text(link.get("id")) or None, link_title=_text(link.get("title")),
                     lineitem=ags.get("lineitem") if url_or_none(ags.get("lineitem")) else None,
                     link_assignment=link_assignment(claims),
                     memberships=nrps.get("context_memberships_url") if url_or_none(nrps.get("context_memberships_url"))
                     else None)



def _text(value, most=200):
    return value[:most] if isinstance(value, str) else ""


# ------------------------------------------------------------------ what a good launch makes (as root)
def provision(settings, adm, out):
    """The Unix user, the groups, the course folder of a course's first instructor and its exchange folder; returns
    the groups the user was added to (their running server does not have them yet)."""
    from ..groups import REFERENCE_GROUP, staff_group_of, students_group
    from .setup import exchange_for_class
    from .access import ensure_group, ensure_users, give_to_staff
    from .state import HubState, record_made
    record_made(settings["state"], ensure_users([adm.name], create=True, out=out))
    added = []
    if adm.role == "instructor":
        course = HubState(settings["state"]).read()["courses"][adm.course]
        if not course["instructors"]:  # the course's first instructor: its folder, and its folder in the exchange
            give_to_staff(adm.folder, [adm.name], reference=None, out=out, group=staff_group_of(adm.course))
            exchange_for_class(settings["exchange"], adm.folder, [adm.name], list(course["students"]),
                               course_id=adm.course)
        added += ensure_group(staff_group_of(adm.course), [adm.name], out)
        added += ensure_group(students_group(adm.course), [adm.name], out)
        added += ensure_group(REFERENCE_GROUP, [adm.name], out)
    else:
        added += ensure_group(students_group(adm.course), [adm.name], out)
    return added


def record_launch(settings, adm):
    """The launch in the hub's state (the member, their LMS user id, the line items URL) and, for an instructor, in
    the grading service's settings (it reads them again)."""
    from . import service
    from .state import HubState
    with HubState(settings["state"]).change() as data:
        course = data["courses"][adm.course]
        if adm.role == "instructor":
            if adm.name not in course["instructors"]:
                course["instructors"].append(adm.name)
        else:
            course["students"][adm.name] = adm.sub
        if adm.lineitems:
            course["lineitems"] = adm.lineitems
        if adm.memberships:
            course["memberships"] = adm.memberships
        if adm.link and adm.lineitem:  # an LMS assignment's link: its own column (coursekit/lms/ags.py posts to it)
            course.setdefault("links", {})[adm.link] = {"title": adm.link_title, "lineitem": adm.lineitem,
                                                        "assignment": adm.link_assignment}
        data["users"][adm.name] = {"sub": adm.sub, **({"lms_ids": adm.lms_ids} if adm.lms_ids else {})}
        teaching = course["instructors"]
        if adm.role == "instructor":  # under the state's lock: one writer of the grading settings at a time
            grading = service.read_config(settings["grading_config"])
            if grading["courses"].get(adm.folder, {}).get("instructors") != sorted(teaching):
                extra = {k: v for k, v in grading.items() if k not in ("port", "hub_api", "workers", "courses")}
                courses = {folder: c["instructors"] for folder, c in grading["courses"].items()}
                courses[adm.folder] = teaching
                service.write_service_config(os.path.dirname(settings["grading_config"]), grading["port"],
                                         grading["hub_api"], courses, grading.get("workers"), extra=extra)


class Enroller:
    """First launches of one course's students, added to its gradebook in batches: one process for every launch
    that arrived while the last one ran (a class that launches at once at the start of a lecture waits a few
    batches, not one process each)."""

    def __init__(self, python):
        self.python, self.pending, self.running = python, {}, set()

    async def enrol(self, folder, record):
        future = asyncio.get_running_loop().create_future()
        self.pending.setdefault(folder, []).append((record, future))
        if folder not in self.running:
            self.running.add(folder)
            asyncio.get_running_loop().create_task(self._drain(folder))
        return await future

    async def _drain(self, folder):
        try:
            while self.pending.get(folder):
                batch = self.pending.pop(folder)
                try:
                    await asyncio.to_thread(enrol_as_owner, self.python, folder, [r for r, _ in batch])
                except Exception as exc:  # each launch of the batch says so
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(RuntimeError(str(exc)))
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
        finally:
            self.running.discard(folder)


# ------------------------------------------------------------------ the authenticator
def _authenticator_class():
    from ltiauthenticator.lti13.auth import LTI13Authenticator
    from tornado.web import HTTPError
    from traitlets import Unicode

    from .lti_pages import CLOCK_LEEWAY, handlers
    login_handler, config_handler = handlers()

    class CourseLTI13Authenticator(LTI13Authenticator):
        """ltiauthenticator's LTI 1.3 login, with the course's checks and what a good launch makes (module
        docstring); its login initiation answers a framed launch with a page that opens a window, and its
        configuration URL says what docs/lms.md says (coursekit/hub/lti_pages.py)."""

        settings_file = Unicode("", config=True, help="The hub's LTI settings (coursekit.hub.lti_config.write_settings)")

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            # the validator ltiauthenticator makes for each launch reads the hub's configuration: a clock leeway
            # for iat, nbf and exp unless the configuration sets one
            validator = self.parent.config.LTI13LaunchValidator if self.parent is not None else {}
            if self.parent is not None and "time_leeway" not in validator:
                validator.time_leeway = CLOCK_LEEWAY
            self._settings = None
            self._lock = threading.Lock()  # useradd, usermod and the course folders: one launch at a time
            self._enroller = None
            self._tasks = set()  # the class lists being read

        @property
        def course_settings(self):
            if self._settings is None:
                with open(self.settings_file) as f:
                    self._settings = json.load(f)
            return self._settings

        async def authenticate(self, handler, data=None):
            from .state import HubState
            settings = self.course_settings
            claims = data or {}
            state = HubState(settings["state"])
            try:
                adm = check_launch(settings, state.read(), claims)
            except Refused as exc:
                self.log.warning("LTI launch of %r refused: %s", claims.get("sub"), exc.message)
                raise HTTPError(403, exc.message)

            def make():
                with self._lock:  # checked again under the lock: an account made since is not taken
                    return provision(settings, check_launch(settings, state.read(), claims), self.log.info)
            try:
                added = await asyncio.to_thread(make)
                now = state.read()
                first = now["courses"][adm.course]["students"].get(adm.name) != adm.sub or adm.name not in now["users"]
                if adm.role == "student" and first:  # first launch here (a class list's joiner: names, Canvas id)
                    if self._enroller is None:
                        self._enroller = Enroller(settings["python"])
                    await self._enroller.enrol(adm.folder, {"id": adm.name, "first_name": adm.first_name,
                                                            "last_name": adm.last_name, "email": adm.email,
                                                            "lms_user_id": adm.import_id})
                await asyncio.to_thread(record_launch, settings, adm)
            except Refused as exc:
                self.log.warning("LTI launch of %r refused: %s", claims.get("sub"), exc.message)
                raise HTTPError(403, exc.message)
            except (OSError, subprocess.SubprocessError, RuntimeError, HubError) as exc:
                self.log.error("LTI launch of %s into %s failed: %s", adm.name, adm.course, exc)
                raise HTTPError(500, f"The hub could not set up your account for {adm.course}: {exc}. Try the "
                                     f"link again; if it fails again, tell the course's instructor.")
            self.log.info("LTI launch: %s is %s of %s%s", adm.name,
                          "an instructor" if adm.role == "instructor" else "a student", adm.course,
                          f" (new groups: {', '.join(added)})" if added else "")
            if added:
                await self._restart_for_groups(handler, adm.name)
            if adm.role == "instructor" and adm.memberships:  # the class list, read after the instructor is in
                task = asyncio.get_running_loop().create_task(self._class_list(settings, adm.course))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return {"name": adm.name}

        async def _class_list(self, settings, course_id):
            """The course kept in step with the LMS's class list (coursekit/lms/roster.py), its changes logged."""
            from . import service
            from ..lms.ags import AgsError, ToolCredentials, load_key
            from ..lms.roster import sync_course
            lti = service.read_config(settings["grading_config"]).get("lti") or {}

            def sync():  # the list read, then the groups and the state changed under the launches' lock
                credentials = ToolCredentials(lti["client_id"], load_key(lti["tool_key"]), lti["token_url"])
                return sync_course(settings, course_id, credentials, out=self.log.info, lock=self._lock)
            try:
                await asyncio.to_thread(sync)
            except (AgsError, OSError, KeyError, ValueError, RuntimeError, subprocess.SubprocessError) as exc:
                self.log.warning("the class list of %s could not be read from the LMS: %s", course_id, exc)

        async def _restart_for_groups(self, handler, name):
            """Stop the user's running server: started again, it has the groups just given."""
            user = handler.find_user(name)
            spawner = user.spawner if user is not None else None
            if spawner is None or not spawner.active or spawner.pending:
                return
            self.log.info("stopping %s's server: it starts again with the groups of the new course", name)
            await handler.stop_single_user(user)
            for _ in range(300):
                if not spawner.pending:
                    return
                await asyncio.sleep(0.1)

    CourseLTI13Authenticator.login_handler, CourseLTI13Authenticator.config_handler = login_handler, config_handler
    CourseLTI13Authenticator.__module__, CourseLTI13Authenticator.__qualname__ = __name__, "CourseLTI13Authenticator"
    return CourseLTI13Authenticator


def __getattr__(name):  # the authenticator class made on first use: importing this module costs no JupyterHub
    if name == "CourseLTI13Authenticator":
        cls = _authenticator_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
