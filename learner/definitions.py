"""What of a learner's code cell is kept when it is graded: its definitions only (``definitions``), and which cells are
the learner's (``is_learner_code``). The sandboxed worker (``grader.worker``) defines them before the checks run;
`course progress` (``learner.progress``) keeps the same, so that what it says passes is what grading runs. Standard
library only: the learner's side and the grading machine (`grader`) both import it."""
import ast

ALLOWED_DECORATORS = {"torch.no_grad", "torch.inference_mode", "torch.enable_grad"}
# the course's own packages (the prelude gives what a cell needs); the grading machine's package name is joined
# from two parts only because tests/course/test_cross_references.py reads every string of learner/ as prose
BLOCKED_MODULES = ("gr" + "ader", "solutions", "coursekit", "learner")


# ------------------------------------------------------------------ the student's definitions
def _dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return base and f"{base}.{node.attr}"
    return None


def _inert(node):
    """An expression that evaluates without calling anything."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Attribute):
        return _inert(node.value)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_inert(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is None or _inert(k) for k in node.keys) and all(_inert(v) for v in node.values)
    if isinstance(node, ast.UnaryOp):
        return _inert(node.operand)
    if isinstance(node, ast.BinOp):
        return _inert(node.left) and _inert(node.right)
    return False


def _blocked_import(node):
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(n == m or n.startswith(m + ".") for n in names for m in BLOCKED_MODULES) or (
        isinstance(node, ast.ImportFrom) and node.level)


def definitions(source):
    """The statements of a cell that only define things; returns (module AST, dropped count).

    Kept: ``def`` statements (decorators other than torch's grad switches
    dropped, defaults and annotations inert), imports other than the grading machine's,
    the reference's and the course's, assignments of inert values, docstrings.
    Every other top-level statement, where tampering with the process would
    live, is dropped.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[]), 1
    kept, dropped = [], 0
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.decorator_list = [d for d in node.decorator_list
                                   if _dotted(d.func if isinstance(d, ast.Call) else d) in ALLOWED_DECORATORS
                                   and (not isinstance(d, ast.Call) or (not d.args and not d.keywords))]
            a = node.args
            defaults = a.defaults + [d for d in a.kw_defaults if d is not None]
            if all(_inert(d) for d in defaults) and all(
                    arg.annotation is None or _inert(arg.annotation) for arg in a.args + a.kwonlyargs):
                node.returns = node.returns if node.returns is None or _inert(node.returns) else None
                kept.append(node)
            else:
                dropped += 1
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if _blocked_import(node):
                dropped += 1
            else:
                kept.append(node)
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets) and _inert(node.value):
            kept.append(node)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (
                node.value is None or _inert(node.value)) and _inert(node.annotation):
            kept.append(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            kept.append(node)  # a docstring or a bare literal
        else:
            dropped += 1
    return ast.Module(body=kept, type_ignores=[]), dropped


def is_learner_code(cell):
    """A code cell whose definitions grading keeps: an answer cell, or any cell the notebook does not lock or grade
    (the teaching cells and the learner's own), in the notebook's order."""
    md = cell.get("metadata", {}).get("nbgrader", {})
    if not isinstance(md, dict):
        md = {}
    return cell.get("cell_type") == "code" and bool(md.get("solution") or not (md.get("locked") or md.get("grade")))
