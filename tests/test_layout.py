"""The tree's shape, kept by tests rather than by habit: one name, one meaning, and modules short enough to read.

Every import of the project's own modules (in its modules, its tests and the source notebooks' code cells, inside
functions too) names a module and a name that exist: a module moved or split leaves no import behind that fails only
when a learner or a grading run reaches it.

A file name names one module: two files of the project (tests aside) share a name only when it is a topic's name,
the name of a notebook's reference module in ``solutions/`` (its known mistakes, its hidden cases, its widget and
its benchmark may carry it too); ``__init__``/``__main__`` are Python's. A top-level name names one thing: two modules
of the project define the same public name only when it is a role every such module plays (``SAME_ROLE``, with the
role) or a copy of the reference's function of that name (``COPIES``). No module of the project is over 500 lines.
They read the files git tracks, so a file left over in a working copy does not count. Cost: about 2 s."""
import ast
import collections
import glob
import json
import os
import subprocess

from coursekit import ROOT

LONGEST = 500
PYTHONS = ("__init__.py", "__main__.py")
OURS = ("coursekit", "grader", "learner", "solutions")


def tracked_modules(tests=False):
    """Paths (relative to the root) of the project's Python files that git tracks, tests left out unless asked."""
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.split() if tests or not p.startswith("tests/")]


def _source(module, root=ROOT):
    """The file of the dotted ``module`` under ``root``, or None."""
    base = os.path.join(root, *module.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def _defined(path):
    """The names a module defines at its top level (functions, classes, assignments, imports), or None when it
    defines a module-level ``__getattr__`` (then any name may exist)."""
    names = set()
    for node in ast.parse(open(path).read(), path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            names |= {(a.asname or a.name).split(".")[0] for n in ast.walk(node)
                      if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    return names


def broken_imports(code, where, package="", root=ROOT):
    """["WHERE:LINE imports X (no such module)" or "... imports X from M (M has no X)"] for each import in ``code``
    of the project's own modules that does not resolve. ``package`` is the importing module's package, for relative
    imports."""
    out = []
    for node in ast.walk(ast.parse(code, where)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in OURS and not _source(a.name, root):
                    out.append(f"{where}:{node.lineno} imports {a.name} (no such module)")
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".") if package else []
            module = ".".join(parts[:len(parts) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else node.module
            if module.split(".")[0] not in OURS:
                continue
            path = _source(module, root)
            if path is None:
                out.append(f"{where}:{node.lineno} imports {module} (no such module)")
                continue
            names = _defined(path)
            for a in node.names:
                if a.name != "*" and names is not None and a.name not in names \
                        and not _source(f"{module}.{a.name}", root):
                    out.append(f"{where}:{node.lineno} imports {a.name} from {module} ({module} has no {a.name})")
    return out


def _notebook_code(path):
    """A notebook's code cells as one module's source, IPython's magics and shell lines left out."""
    cells = json.load(open(path))["cells"]
    lines = []
    for cell in cells:
        if cell["cell_type"] == "code":
            src = "".join(cell["source"])
            lines += [line for line in src.splitlines() if not line.lstrip().startswith(("%", "!"))] + [""]
    return "\n".join(lines)


def topics():
    """The topics' names: one reference module per notebook in solutions/."""
    return {name[:-3] for name in os.listdir(os.path.join(ROOT, "solutions"))
            if name.endswith(".py") and name not in PYTHONS}


def shared_names(paths, topic_names):
    """{file name: [paths]} for each file name that two paths share and that is neither a topic's nor Python's."""
    by_name = collections.defaultdict(list)
    for path in paths:
        by_name[os.path.basename(path)].append(path)
    return {name: sorted(where) for name, where in by_name.items()
            if len(where) > 1 and name not in PYTHONS and name[:-3] not in topic_names}


def test_every_import_of_the_projects_own_modules_resolves():
    found = []
    for path in tracked_modules(tests=True):
        module = path[:-3].replace("/", ".")
        package = module[:-len(".__init__")] if path.endswith("__init__.py") else module.rpartition(".")[0]
        found += broken_imports(open(os.path.join(ROOT, path)).read(), path, package)
    notebooks = sorted(glob.glob(os.path.join(ROOT, "course", "source", "*", "*.ipynb")))
    assert len(notebooks) >= 11, notebooks
    for path in notebooks:
        found += broken_imports(_notebook_code(path), os.path.relpath(path, ROOT))
    assert found == []


def test_a_broken_import_is_named_with_its_place(tmp_path):
    """The check above can fail: a module that is gone, a name a module lacks, a relative import inside a function;
    what exists passes."""
    (tmp_path / "learner").mkdir()
    (tmp_path / "learner" / "__init__.py").write_text("")
    (tmp_path / "learner" / "plots.py").write_text("KINDS = 1\ndef bin_label(b):\n    return b\n")
    code = ("from learner.plots import KINDS, bin_label\nimport learner.gone\nfrom learner.plots import nothing\n"
            "def f():\n    from .capstone import KINDS\n")
    assert broken_imports(code, "learner/x.py", "learner", root=str(tmp_path)) == [
        "learner/x.py:2 imports learner.gone (no such module)",
        "learner/x.py:3 imports nothing from learner.plots (learner.plots has no nothing)",
        "learner/x.py:5 imports learner.capstone (no such module)"]


def test_no_two_modules_share_a_file_name_but_a_topics():
    names = topics()
    assert {"softmax", "kv_cache", "masks_attention"} <= names, names  # the rule below is about these names
    assert shared_names(tracked_modules(), names) == {}


def test_a_shared_name_is_found_and_a_topics_name_is_allowed():
    """The check above can fail: a second worker.py is named with both paths; a topic's name in bench/ is allowed."""
    paths = ["grader/worker.py", "coursekit/grading/worker.py", "solutions/softmax.py", "bench/softmax.py"]
    assert shared_names(paths, {"softmax"}) == {"worker.py": ["coursekit/grading/worker.py", "grader/worker.py"]}


# a public name several modules define, each for the same role
SAME_ROLE = {
    "main": "a module's command line (python -m)",
    "serve": "the loop of a process that another process starts and talks to",
    "KINDS": "the kinds of thing the module makes, by name",
    **{name: "a widget's part (learner/widgets/base.py: Explorer)" for name in ("compute", "draw", "readout",
                                                                                  "learner_side")},
}
# modules whose functions are copies of the reference's of the same name (correct, written apart from it)
COPIES = ("learner/blocks.py", "learner/data.py", "solutions/mistakes/_parts.py",
          "learner/check/cases/transformer_parts.py")


def top_level_names(path):
    """The public names a module defines at its top level (functions, classes, assignments; not imports)."""
    names = set()
    for node in ast.parse(open(os.path.join(ROOT, path)).read(), path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            names |= {t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                      if isinstance(t, ast.Name)}
    return {n for n in names if not n.startswith("_")}


def names_meaning_two_things(paths, defined=top_level_names, same_role=SAME_ROLE, copies=COPIES):
    """{name: [paths]} for each public top-level name two modules define, unless it is a role they all play, or
    every definition but the reference's is in a module of copies."""
    where = collections.defaultdict(list)
    for path in paths:
        for name in defined(path):
            where[name].append(path)
    out = {}
    for name, places in where.items():
        if len(places) < 2 or name in same_role:
            continue
        apart = [p for p in places if p not in copies]
        if len(apart) == 0 or len(apart) == 1 and apart[0].startswith("solutions/"):
            continue  # copies of the reference's function
        out[name] = sorted(places)
    return out


def test_a_top_level_name_means_one_thing():
    found = names_meaning_two_things([p for p in tracked_modules() if p.split("/")[0] in OURS])
    assert found == {}


def test_a_name_two_modules_define_is_found_and_a_copy_of_the_reference_is_allowed():
    """The check above can fail: two modules' ``record`` are named; a role and a copy of the reference pass."""
    names = {"coursekit/a.py": {"record", "main"}, "grader/b.py": {"record", "main"},
             "learner/blocks.py": {"encoder_block"}, "solutions/encoder.py": {"encoder_block"}}
    assert names_meaning_two_things(names, names.get) == {"record": ["coursekit/a.py", "grader/b.py"]}


def test_no_module_is_over_500_lines():
    lines = {path: sum(1 for _ in open(os.path.join(ROOT, path))) for path in tracked_modules()}
    assert len(lines) > 50, lines  # the project's modules were found
    assert {path: n for path, n in lines.items() if n > LONGEST} == {}
