"""The house's import graph, over every module of the project (``learner``, ``grader``, ``coursekit``,
``solutions``), every import counted: at the top, inside a function, by a name in a string
(``importlib.import_module``, ``__import__``), or by a computed name, whose possible targets ``COMPUTED`` reads from
the code they come from (the old module names of ``coursekit.moved``, the syllabus's case modules and ready-made
versions, the reference's registry); a computed import not declared there fails.

* No cycle: a module that another module imports never imports it back, however many modules lie between. Where
  two modules need the same helper, it lives in a third that both import (``coursekit/hub/root_files.py``,
  ``coursekit/exchange/course_id.py``, ``coursekit/hub/lti_claims.py``).
* No private name across modules: ``from M import _x`` from another module is refused (the name is made public, or
  the helper moves), and so is importing a private module (``pkg._m``) from outside its own package.
* No module sets another's state: ``other.NAME = ...`` on an imported module of the project is refused, and so is
  changing what another module holds in place: ``NAME.append(...)``, ``NAME[key] = ...`` or ``NAME.attr = ...`` on a
  name imported from another module (``other.NAME.update(...)`` alike); the module that owns the state offers a
  function (``learner.check.safe.run_elsewhere``, ``learner.check.cases.common.allow_in_shipped``).

A finding is named with the file, the line and the modules. Cost: about a second."""
import ast
import os
import textwrap

from coursekit import ROOT

TOPS = ("learner", "grader", "coursekit", "solutions")


def project_modules(root=ROOT, tops=TOPS):
    """{module name: path} of every module of the project."""
    out = {}
    for top in tops:
        for here, dirs, files in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(here, name)
                    module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                    out[module.removesuffix(".__init__")] = path
    return out


def _absolute(module, is_package, node):
    if not node.level:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _strings(path):
    return [n.value for n in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)]


# The modules that import by a computed name, and what that name can be: read from the code the name comes from.
COMPUTED = {
    # the old module names an existing class's files use (moved.MOVED's values)
    "coursekit.moved": lambda mods: {"coursekit." + s for s in _strings(mods["coursekit.moved"])
                                     if "coursekit." + s in mods},
    # one case module per notebook of the syllabus
    "learner.check.cases": lambda mods: {m for m in mods if m.startswith("learner.check.cases.")},
    # the ready-made versions an exercise must not call: the syllabus's "module:function" paths
    "learner.check.given": lambda mods: {s.split(":")[0] for s in _strings(mods["learner.syllabus"])
                                         if ":" in s and s.split(":")[0] in mods},
    # a reference or a known mistake, by its registry path: any module of solutions
    "grader.reference": lambda mods: {m for m in mods if m.startswith("solutions.")
                                      and not any(p.startswith("_") for p in m.split("."))},
}


def computed_targets(module, modules):
    """The modules ``module`` may import by a computed name (COMPUTED); a module not declared there imports
    nothing this test could follow, which ``test_every_computed_import_is_declared`` refuses."""
    return sorted(COMPUTED[module](modules)) if module in COMPUTED and all(
        m in modules for m in ("coursekit.moved", "learner.syllabus")) else []


def computed_imports(modules):
    """["path:line: module"] for each import by a computed name in a module COMPUTED does not declare."""
    out = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
            if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Constant) \
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__") \
                    and module not in COMPUTED:
                out.append(f"{path}:{node.lineno}: {module}")
    return out


def imports(modules):
    """[(module, line, imported module, imported name or None)] of every import between modules of the project."""
    found = []
    for module, path in modules.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        is_package = path.endswith("__init__.py")
        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, ast.Import):
                pairs = [(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node)
                pairs = [(f"{base}.{a.name}", None) if f"{base}.{a.name}" in modules else (base, a.name)
                         for a in node.names]
            elif isinstance(node, ast.Call) and node.args \
                    and getattr(node.func, "attr", getattr(node.func, "id", "")) in ("import_module", "__import__"):
                if isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                    pairs = [(node.args[0].value, None)]
                else:  # a computed name: the module's declared targets (COMPUTED), or a finding of its own
                    pairs = [(t, None) for t in computed_targets(module, modules)]
            for target, name in pairs:
                while target and target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != module:
                    found.append((module, node.lineno, target, name))
    return found


def cycles(modules):
    """Every cycle of the import graph, as its modules in import order, each with the line of each edge."""
    edges = {}
    for module, line, target, _ in imports(modules):
        edges.setdefault(module, {}).setdefault(target, line)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(" ; ".join(f"{a} imports {b} (line {edges[a][b]})"
                                      for a in sorted(part) for b in sorted(edges.get(a, {})) if b in part))

    for v in sorted(modules):
        if v not in index:
            visit(v)
    return out


def private_imports(modules):
    out = []
    for module, line, target, name in imports(modules):
        if name and name.startswith("_") and not name.startswith("__"):
            out.append(f"{modules[module]}:{line}: {module} imports {target}'s private name {name}")
        parts = target.split(".")
        for k, part in enumerate(parts):
            if part.startswith("_") and not part.startswith("__"):
                package = ".".join(parts[:k])
                if module != package and not module.startswith(package + "."):
                    out.append(f"{modules[module]}:{line}: {module} imports the private module {target} from "
                               f"outside {package}")
    return out


MUTATORS = ("append", "extend", "insert", "remove", "pop", "clear", "update", "add", "discard", "setdefault",
            "popitem", "sort", "reverse")  # methods that change a list, dict or set in place


def foreign_assignments(modules):
    """["path:line: module sets other.NAME"] for every assignment to an attribute of an imported project module, and
    ["path:line: module changes other.NAME (...)"] for every change in place of what another module holds: an item or
    attribute set or deleted, or a list's, dict's or set's own method that changes it (``MUTATORS``), on a name
    imported from that module or reached through it (``other.NAME``)."""
    out = []
    for module, path in modules.items():
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        is_package = path.endswith("__init__.py")
        bound = {}  # local name -> project module it stands for
        values = {}  # local name -> "module.NAME" of a value (not a module) imported from a project module
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in modules and a.asname:
                        bound[a.asname] = a.name
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(module, is_package, node)
                for a in node.names:
                    if f"{base}.{a.name}" in modules:
                        bound[a.asname or a.name] = f"{base}.{a.name}"
                    elif base in modules and base != module:
                        values[a.asname or a.name] = f"{base}.{a.name}"

        def owner(target):
            """("other.NAME", depth) when ``target`` (attributes and items) reaches into another module's state."""
            chain = []
            while isinstance(target, (ast.Attribute, ast.Subscript)):
                chain.append(target)
                target = target.value
            if not isinstance(target, ast.Name):
                return None
            if target.id in values:
                return values[target.id], len(chain)
            if target.id in bound and bound[target.id] != module and chain \
                    and isinstance(chain[-1], ast.Attribute):
                return f"{bound[target.id]}.{chain[-1].attr}", len(chain) - 1
            return None

        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in bound \
                        and bound[t.value.id] != module:
                    out.append(f"{path}:{node.lineno}: {module} sets {bound[t.value.id]}.{t.attr}")
                elif (found := owner(t)) and found[1] > 0:
                    out.append(f"{path}:{node.lineno}: {module} changes {found[0]} ({ast.unparse(t)})")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS \
                    and (found := owner(node.func.value)):
                out.append(f"{path}:{node.lineno}: {module} changes {found[0]} (.{node.func.attr})")
    return sorted(out)


def test_no_module_sets_another_modules_state():
    assert foreign_assignments(project_modules()) == []


def test_every_computed_import_is_declared():
    """An import by a computed name (``importlib.import_module(f"...")``) counts in the graph through COMPUTED, which
    reads its possible targets from the code; one not declared there would be an edge no test sees."""
    modules = project_modules()
    assert computed_imports(modules) == []
    assert {t for m in COMPUTED for t in computed_targets(m, modules)} >= {"coursekit.hub.service",
                                                                           "learner.check.cases.softmax",
                                                                           "solutions.softmax"}


def test_no_import_cycle_between_modules_of_the_project():
    assert cycles(project_modules()) == []


def test_no_module_imports_another_modules_private_name():
    assert private_imports(project_modules()) == []


def test_a_cycle_and_a_private_import_are_named(tmp_path):
    """The tests above can fail: a cycle through a function-level import and a string, a private name and a private
    module reached from outside its package, another module's name set, and what another module holds changed in
    place (a list appended to, an item set) are each named with the modules and the line."""
    def write(rel, text):
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    write("grader/__init__.py", "")
    write("grader/a.py", "from . import b\n")
    write("grader/b.py", "def f():\n    import importlib\n    return importlib.import_module('grader.c')\n")
    write("grader/c.py", "def g():\n    from .a import thing\n")
    write("grader/d.py", "from .c import _hidden\nfrom learner.check._inner import x\n")
    write("learner/__init__.py", "")
    write("learner/check/__init__.py", "")
    write("learner/check/_inner.py", "x = 1\n")
    write("learner/check/fine.py", "from ._inner import x\nREGISTRY = []\n")
    write("learner/check/meddles.py", "from . import fine\nfine.x = 2\nfrom .fine import REGISTRY\n"
                                      "REGISTRY.append(3)\nfine.REGISTRY[0] = 4\nREGISTRY = []\n")
    modules = project_modules(str(tmp_path), ("grader", "learner"))
    assert cycles(modules) == ["grader.a imports grader.b (line 1) ; grader.b imports grader.c (line 3) ; "
                               "grader.c imports grader.a (line 2)"]
    d = os.path.join(str(tmp_path), "grader", "d.py")
    assert private_imports(modules) == [
        f"{d}:1: grader.d imports grader.c's private name _hidden",
        f"{d}:2: grader.d imports the private module learner.check._inner from outside learner.check"]
    meddles = os.path.join(str(tmp_path), "learner", "check", "meddles.py")
    assert foreign_assignments(modules) == [
        f"{meddles}:2: learner.check.meddles sets learner.check.fine.x",
        f"{meddles}:4: learner.check.meddles changes learner.check.fine.REGISTRY (.append)",
        f"{meddles}:5: learner.check.meddles changes learner.check.fine.REGISTRY (fine.REGISTRY[0])"]
