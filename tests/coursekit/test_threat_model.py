"""docs/threat-model.md is kept with the code: every test it names exists, every route of the hub's grading service
and every exchange class the course or the hub's students use is named there, and every door the design lists has
a row. Cost: a few milliseconds."""
import ast
import os
import re

from coursekit import ROOT
from coursekit.hub.setup import student_nbgrader_config

PAGE = os.path.join(ROOT, "docs", "threat-model.md")
# the doors docs/design.md lists ("Every door is listed"), each as a word its row's title holds
DOORS = ["exchange's root", "course list", "fetch", "outbound", "submit", "collect", "printed summaries",
         "grading sandbox", "root's side", "feedback", "formgrader's links", "report", "grading service", "hub's state", "hub's pages and API",
         "LTI launch", "LMS", "student bundle"]


def rows():
    text = open(PAGE, encoding="utf-8").read()
    out = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and cells[0] not in ("door", "---"):
            out.append(cells)
    return text, out


def defined_tests(path):
    tree = ast.parse(open(os.path.join(ROOT, path), encoding="utf-8").read())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_test_the_threat_model_names_exists_and_every_row_names_one():
    _, table = rows()
    assert len(table) >= len(DOORS)
    for door, _, _, tried in table:
        named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", tried)
        assert named, f"docs/threat-model.md: the door {door!r} names no test that tries it"
        for path, name in named:
            assert os.path.isfile(os.path.join(ROOT, path)), f"{door!r}: {path} does not exist"
            assert name in defined_tests(path), f"{door!r}: {path} defines no {name}"


def test_every_door_the_design_lists_has_a_row():
    _, table = rows()
    titles = " / ".join(door for door, *_ in table)
    assert [d for d in DOORS if d not in titles] == []


def test_every_route_of_the_grading_service_and_every_exchange_class_is_named():
    text, _ = rows()
    service = open(os.path.join(ROOT, "coursekit", "hub", "service.py"), encoding="utf-8").read()
    app = re.search(r"web\.Application\(\[(.*?)\]\)", service, re.S).group(1)
    routes = re.findall(r"\(r\"(/[^\"]*)\"", app)
    assert routes and [r for r in routes if f"`{r}`" not in text] == []
    config = open(os.path.join(ROOT, "course", "nbgrader_config.py"), encoding="utf-8").read()
    config += student_nbgrader_config(["a", "b"], "/srv/x")
    classes = set(re.findall(r"c\.(?:ExchangeFactory\.\w+|Authenticator\.plugin_class) = [\"'][\w.]+\.(\w+)[\"']",
                             config))
    assert {"CourseCollect", "CourseFetch", "HubCourses", "PrivateSubmit"} <= classes
    assert [c for c in sorted(classes) if c not in text] == []
