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
