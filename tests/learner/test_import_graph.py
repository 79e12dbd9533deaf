"""The line between the learner's side and the rest, kept by the import graph rather than a list of files.

The learner's side is the package ``learner``: what a student installs (the student bundle copies it whole) and
what a notebook imports. It may import nothing of the instructor's side (``coursekit``, the ``course`` command and
what it drives; ``grader``, the grading machine) or of the reference (``solutions``): not by an import statement,
not inside a function, and not by a name in a string that is imported later (``importlib.import_module``,
``__import__``, or a "module:function" path such as the syllabus's ready-made versions). Cost: under a second."""
import ast
import os

import pytest

from coursekit import ROOT

LEARNER = os.path.join(ROOT, "learner")
ACROSS = ("grader", "coursekit", "solutions")  # the instructor's side and the reference


def _targets(tree, module):
    """[(line, imported module)] of every import in ``tree`` (the module ``module``), string-named ones included."""
    package = module.rsplit(".", 1)[0] if not module.endswith("__init__") else module
    package = package.replace(".__init__", "")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                found.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            else:
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            if name in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and ":" in node.value \
                and " " not in node.value and node.value.split(":")[0].split(".")[0] in (*ACROSS, "learner"):
            found.append((node.lineno, node.value.split(":")[0]))  # a "module:function" path imported by name
    return found


def edges_across(root=LEARNER, top="learner"):
    """["learner/x.py:LINE imports grader.y"] for every edge from the learner's side across the line."""
    out = []
    for here, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            path = os.path.join(here, name)
            module = top + "." + os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            for line, target in _targets(ast.parse(open(path).read(), path), module):
                if target and target.split(".")[0] in ACROSS:
                    out.append(f"{os.path.relpath(path, os.path.dirname(root))}:{line} imports {target}")
    return out


def test_the_learners_side_imports_nothing_of_the_instructors_side_or_the_reference():
    assert edges_across() == []


def test_an_edge_across_the_line_is_named_with_both_modules_and_the_line(tmp_path):
    """The test above can fail: a learner module that reaches across, by any of the routes, is named."""
    side = tmp_path / "learner"
    (side / "check").mkdir(parents=True)
    (side / "__init__.py").write_text("")
    (side / "check" / "__init__.py").write_text("")
    (side / "check" / "bad.py").write_text(
        "import os\n"
        "from grader import sandbox\n"
        "def f():\n"
        "    import solutions.softmax\n"
        "    import importlib\n"
        "    return importlib.import_module('coursekit.hub.setup')\n"
        "GIVEN = ('coursekit.blocks:masked_attention',)\n"
        "from .. import data\n")
    assert edges_across(str(side)) == [
        "learner/check/bad.py:2 imports grader", "learner/check/bad.py:4 imports solutions.softmax",
        "learner/check/bad.py:6 imports coursekit.hub.setup", "learner/check/bad.py:7 imports coursekit.blocks"]


@pytest.mark.parametrize("name", ["learner.check", "learner.widgets", "learner.capstone_runs", "learner.drawings",
                                  "learner.submit"])
def test_the_learners_side_imports_in_a_process_that_cannot_see_the_other_sides(name, tmp_path):
    """What the import graph says, in a real process: the learner's side alone on the path (as in the student
    bundle's install), and each of its packages imports."""
    import shutil
    import subprocess
    import sys
    shutil.copytree(LEARNER, tmp_path / "learner", ignore=shutil.ignore_patterns("__pycache__"))
    code = (f"import sys\nsys.path[:] = [p for p in sys.path if p and (p == {ROOT!r} or not p.startswith({ROOT!r}) "
            f"or 'site-packages' in p) and p != {ROOT!r}]\n"
            f"sys.path.insert(0, {str(tmp_path)!r})\n"
            "import importlib.abc\n"
            "class Refuse(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            f"        if name.split('.')[0] in {ACROSS!r}:\n"
            "            raise ImportError(f'the learner side imported {name}')\n"
            "sys.meta_path.insert(0, Refuse())\n"
            f"import {name}\n"
            f"assert {name}.__file__.startswith({str(tmp_path)!r}), {name}.__file__\n"
            "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
