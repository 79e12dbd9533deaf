"""A course's id: what its ``nbgrader_config.py`` names (``course_id_of``), read without running the file, and the
rule an id follows (``COURSE_ID_RULE``: its folder's name in the exchange, its Unix groups' names). The exchange's
commands, the hub and the gradebook read it here; this module imports nothing of the project."""
import ast
import os
import re

COURSE_ID_RULE = re.compile(r"\A[a-z][a-z0-9_-]{0,22}\Z")


class ExchangeError(Exception):
    """Something about the exchange a person has to change, said in plain words."""


def course_id_of(course_root):
    """The course id that the course's ``nbgrader_config.py`` names (its folder's name in the exchange), read without
    running the file: the hub reads it as root, and the file is its instructors' to write. The id must be given as
    ``c.CourseDirectory.course_id = "..."`` with a plain string (the last such line counts); anything else is an
    ``ExchangeError`` that says so."""
    path = os.path.join(course_root, "nbgrader_config.py")
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(1_000_000), filename=path)
    except (OSError, SyntaxError, ValueError) as exc:
        raise ExchangeError(f"{path} cannot be read for its course id: {exc}") from None
    found, unreadable = None, False
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if ast.unparse(target) == "c.CourseDirectory.course_id":
                value = node.value
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found, unreadable = value.value, False
                else:
                    unreadable = True
    if unreadable or found is None:
        raise ExchangeError(f"{path} must name its course id as a line c.CourseDirectory.course_id = \"...\" with a "
                            f"plain string (the hub reads it without running the file)")
    if not COURSE_ID_RULE.match(found):
        raise ExchangeError(f"{path}: its course id {found!r} (c.CourseDirectory.course_id) must be 1 to 23 lowercase "
                            f"letters, digits, '_' or '-', starting with a letter: on a hub it names the course's "
                            f"folder in the exchange and its groups {found}-staff and {found}-students")
    return found
