"""docs/route.md is kept by the code (issue 54, item 3): the route of a submission, its boundaries and its writers.

* Every name of the project's code that route.md writes in backticks (``grader.graded.append_log``,
  ``coursekit.grading.server.Nbgrader.call``, ...) exists.
* "Where the code crosses" lists exactly the functions that start a process, fork, send work to another process or
  call another machine, in the route's packages (``grader/``, ``coursekit/``): read from the code (``subprocess``,
  ``os.fork``, ``os.exec*``, ``os.spawn*``, ``pty``, ``multiprocessing``, ``urlopen``, a pool's or a Dask client's
  ``submit`` and ``scatter``, a Dask cluster or client made, an HTTP server, nbgrader's validator, a kernel manager's
  launch). A new crossing that route.md does not list fails here, and so does a listed one that is gone.
* "Who writes what": each record has one writer, called from exactly the places the table names, and the record's
  file is named as a path in the code of its writer's module alone (another module that builds its path would be a
  second writer, or a reader going round the writer's module; a sentence that names it is not a path).

Cost: about a second."""
import ast
import importlib
import os
import re

from coursekit import ROOT
from test_house import project_modules

ROUTE = os.path.join(ROOT, "docs", "route.md")
PACKAGES = ("grader", "coursekit")
# what crosses: calls whose dotted name ends so, and kernel managers' launch methods
CROSSING_CALLS = ("subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
                  "subprocess.check_output", "subprocess.getoutput", "subprocess.getstatusoutput", "os.fork",
                  "os.forkpty", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.execl", "os.execle", "os.execlp",
                  "os.execlpe", "os.spawnv", "os.spawnve", "os.spawnvp", "os.spawnvpe", "os.spawnl", "os.spawnle",
                  "os.spawnlp", "os.spawnlpe", "os.posix_spawn", "os.posix_spawnp", "os.system", "os.popen", "pty.fork",
                  "pty.spawn", "create_subprocess_exec", "create_subprocess_shell", "multiprocessing.Process",
                  "ProcessPoolExecutor", "urlopen", "client.submit", "executor.submit", "pool.submit",
                  "client.scatter", "LocalCluster", "Client", "HTTPServer", "validator.validate")
CROSSING_METHODS = ("_async_launch_kernel", "launch_kernel")
# each record: its writer (a call whose dotted name ends so), and the file name its code may name in one module only
RECORDS = {"a line of the grading log": ("append_log", "grading_log.jsonl"),
           "the hidden-case seed": ("seeds.record", "hidden_seeds.csv"),
           "the gradebook row (scores per cell)": ("save_grades", "SaveAutoGrades")}


def modules(packages=PACKAGES, root=ROOT):
    """{module name: path} of the route's packages (the house test's listing)."""
    return project_modules(root, packages)


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _walk(tree, module, visit):
    """visit(qualified name of the enclosing function, node) for every node, the qualname built from classes and
    functions (``module.Class.method.inner``)."""
    def go(node, where):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(where, child)
                go(child, f"{where}.{child.name}")
            else:
                visit(where, child)
                go(child, where)
    go(tree, module)


def crossings(mods):
    """{qualified name of a function that crosses: [what it calls]}."""
    found = {}

    def visit(where, node):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if any(name == c or name.endswith("." + c) for c in CROSSING_CALLS):
                found.setdefault(where, []).append(name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in CROSSING_METHODS:
            found.setdefault(f"{where}.{node.name}", []).append("a kernel's launch")
    for module, path in mods.items():
        _walk(ast.parse(open(path, encoding="utf-8").read(), path), module, visit)
    return found


def callers(mods, writer):
    """The functions (qualified names) that call ``writer`` (a dotted suffix: ``append_log``, ``seeds.record``)."""
    found = set()

    def visit(where, node):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name == writer or name.endswith("." + writer):
                found.add(where)
    for module, path in mods.items():
        _walk(ast.parse(open(path, encoding="utf-8").read(), path), module, visit)
    return found


def naming_modules(mods, literal):
    """The modules whose code (docstrings and comments left out) holds a string naming ``literal``."""
    out = set()
    for module, path in mods.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs \
                    and (n.value == literal or n.value.endswith("/" + literal)):  # a path, not a sentence
                out.add(module)
            elif isinstance(n, (ast.Name, ast.Attribute)) and literal == (n.id if isinstance(n, ast.Name) else n.attr):
                out.add(module)
    return out


def _module_of(qualname, mods):
    return max((m for m in mods if qualname.startswith(m + ".")), key=len)


def table(text, heading_words):
    """The rows (lists of cells) of the first Markdown table after the line that contains ``heading_words``."""
    lines = text.splitlines()
    start = next(k for k, line in enumerate(lines) if heading_words in line)
    rows, seen = [], False
    for line in lines[start + (0 if lines[start].startswith("|") else 1):]:
        if line.startswith("|"):
            seen = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif seen:
            break
    return rows[1:]  # the header left out


def names_in(cell):
    return re.findall(r"`((?:grader|coursekit|learner)\.[\w.]+)`", cell)


def resolves(name):
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return _nested(name)
            obj = getattr(obj, attr)
        return True
    return False


def _nested(name):
    """A function defined inside another (``grade_class.top_up``, ``make_app.Grade.post``): found in the code."""
    mods = modules()
    for module in sorted(mods, key=len, reverse=True):
        if name.startswith(module + "."):
            found = set()
            _walk(ast.parse(open(mods[module]).read()), module, lambda w, n: found.add(f"{w}.{n.name}")
                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None)
            return name in found
    return False


def test_every_name_route_md_gives_exists():
    text = open(ROUTE, encoding="utf-8").read()
    names = set(names_in(text))
    assert len(names) > 20, names  # the tables were read
    assert sorted(n for n in names if not resolves(n)) == []


def test_route_md_lists_every_place_the_code_crosses_and_no_other():
    listed = {names_in(row[0])[0] for row in table(open(ROUTE, encoding="utf-8").read(), "Where the code crosses")}
    listed |= {names_in(row[0])[0] for row in table(open(ROUTE, encoding="utf-8").read(), "Off the route")}
    found = crossings(modules())
    assert sorted(set(found) - listed) == [], "crossings route.md does not list: " + str(
        {k: found[k] for k in set(found) - listed})
    assert sorted(listed - set(found)) == [], "listed in route.md but no longer crossing"


def test_each_record_has_one_writer_called_where_route_md_says():
    text = open(ROUTE, encoding="utf-8").read()
    rows = {row[0]: row for row in table(text, "| record | its one writer |")}
    mods = modules()
    for record, (writer, literal) in RECORDS.items():
        assert record in rows, (record, sorted(rows))
        assert any(n.endswith(writer) for n in names_in(rows[record][1])), (record, rows[record][1])
        # every caller of the writer is named in the row's "called by" cell (a function or class it is in, by name)
        said = set(re.findall(r"\w+", rows[record][2]))
        missing = [c for c in sorted(callers(mods, writer))
                   if not set(c[len(_module_of(c, mods)) + 1:].split(".")) & said]
        assert missing == [], f"{record}: {writer} is also called by {missing}; route.md must say so"
        # the record's file (or nbgrader's writer of the row) is named by the writer's module alone
        home = next(n for n in names_in(rows[record][1]) if n.endswith(writer)).rsplit(".", 1)[0]
        assert naming_modules(mods, literal) <= {home}, (record, naming_modules(mods, literal) - {home})


def test_a_new_crossing_a_new_caller_and_a_second_writer_are_found(tmp_path):
    """The checks above can fail: a process started in a new function (by ``subprocess`` or by ``os.posix_spawn``), a
    new caller of a writer, and another module naming the log's file are each found."""
    pkg = tmp_path / "grader"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "extra.py").write_text(
        "import subprocess\nfrom .graded import append_log\n"
        "class Helper:\n    def start(self):\n        return subprocess.Popen(['true'])\n"
        "def note(root):\n    append_log(root, {})\n"
        "def by_hand(root):\n    open(root + '/grading_log.jsonl', 'a').write('{}')\n"
        "import os\ndef spawned():\n    return os.posix_spawn('/bin/true', ['true'], {})\n")
    mods = modules(("grader",), str(tmp_path))
    assert crossings(mods) == {"grader.extra.Helper.start": ["subprocess.Popen"],
                               "grader.extra.spawned": ["os.posix_spawn"]}
    assert callers(mods, "append_log") == {"grader.extra.note"}
    assert naming_modules(mods, "grading_log.jsonl") == {"grader.extra"}
