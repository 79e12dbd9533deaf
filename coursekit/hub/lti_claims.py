"""What an LTI 1.3 launch's claims say about its user: the role (``role_of``, ``role_names``), the LMS user id
(``lms_id``) and the Unix user name made of it (``unix_name``, ``user_exists``). The launch's checks
(coursekit/hub/lti.py) and the class list from the LMS (coursekit/lms/roster.py) read them here."""
import pwd
import re

from .access import UNIX_NAME

LTI = "https://purl.imsglobal.org/spec/lti/claim/"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"
INSTRUCTOR_ROLES = ("Instructor",)  # principal roles; TeachingAssistant is Instructor's sub-role
STUDENT_ROLES = ("Learner",)
USERNAME_RULE = ("a Unix user name here is the LMS user id ({claim}) with {prefix} before it, unchanged, and must be 1 "
                 "to 32 lowercase letters, digits, '_' or '-', starting with a lowercase letter or '_'")


def _role_name(name):
    """A context role's name as the LTI vocabulary spells it, whatever case the platform wrote it in."""
    return {r.lower(): r for r in INSTRUCTOR_ROLES + STUDENT_ROLES}.get(name.lower(), name)


def role_of(roles):
    """"instructor", "student" or None from the launch's roles claim: the context (membership) roles, as full
    URIs (``...membership#Instructor``, ``...membership/Instructor#TeachingAssistant``) or as LTI's simple names."""
    found = set()
    for role in roles if isinstance(roles, list) else []:
        if not isinstance(role, str):
            continue
        lower = role.lower()  # Canvas writes ...membership/instructor#TeachingAssistant; the vocabulary, Instructor
        if lower.startswith(MEMBERSHIP.lower() + "#"):
            found.add(_role_name(role[len(MEMBERSHIP) + 1:]))
        elif lower.startswith(MEMBERSHIP.lower() + "/"):
            found.add(_role_name(role[len(MEMBERSHIP) + 1:].split("#")[0]))
        elif "/" not in role and "#" not in role:
            found.add("Instructor" if role == "TeachingAssistant" else role)
    if found & set(INSTRUCTOR_ROLES):
        return "instructor"
    if found & set(STUDENT_ROLES):
        return "student"
    return None


def role_names(roles):
    """The roles of a claim, short (the part after the last '#' or '/'), for a page."""
    return [re.split(r"[#/]", r)[-1] for r in roles if isinstance(r, str)] if isinstance(roles, list) else []


def lms_id(claims, claim):
    """The value of the claim that names the user (``sub``, or ``custom:NAME``), or None."""
    if claim == "sub":
        value = claims.get("sub")
    else:
        custom = claims.get(LTI + "custom")
        value = custom.get(claim[len("custom:"):]) if isinstance(custom, dict) else None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # an older Canvas expands $Canvas.user.id to a number
    return value if isinstance(value, str) and value else None


def unix_name(value, prefix):
    """The Unix user name of the LMS user id ``value``: ``prefix + value``, unchanged (so two LMS users never share
    one), or None when that is not a valid Unix user name."""
    name = prefix + value
    return name if UNIX_NAME.fullmatch(name) else None


def user_exists(name):
    """Whether the machine has a Unix user ``name``."""
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def link_assignment(claims):
    """The assignment a resource link was made for, as its launch says it, or None: the link's custom parameter
    ``assignment`` (``assignment=03_softmax``: Moodle's activity "Custom parameters", a link a tool placed with
    them), else the ``assignment`` of its target link URI's query (``https://HUB/hub/?assignment=03_softmax``, a
    link whose URL the instructor set). Never read from the link's title, which says what the instructor likes
    (``Homework 4: attention (builds on 03_softmax)``): only a link that names the assignment exactly is its."""
    from urllib.parse import parse_qs, urlsplit
    from ..exchange.inbound import valid_student_id
    custom = claims.get(LTI + "custom") if isinstance(claims.get(LTI + "custom"), dict) else {}
    named = custom.get("assignment")
    if not isinstance(named, str):
        target = claims.get(LTI + "target_link_uri")
        asked = parse_qs(urlsplit(target).query).get("assignment", []) if isinstance(target, str) else []
        named = asked[0] if len(asked) == 1 else None
    named = named.strip() if isinstance(named, str) else None
    return named if named and valid_student_id(named) else None
