"""An independent re-check of a submission, in a clean process.

nbgrader scores a test cell by whether it raised in the student's kernel. That
kernel also ran every top-level statement the student wrote, which could have
replaced ``check``, patched the grader or torch, or swapped a module. The judge
closes that door:

1. It starts a fresh ``python -I`` in an empty folder, which imports the grader
   (capturing its primitives and the reference) before any student code.
2. From the student's cells it keeps only definitions: ``def`` statements
   (without decorators other than torch's grad switches, with inert defaults),
   imports other than the grader's and the reference's, and assignments of
   inert values (literals, names, attributes). Every other top-level statement,
   the place where tampering lives, is dropped.
3. It runs the same checks as the notebook's test cells and reports, for each
   cell, whether they passed.

``grader.nbgrader_plugin.IndependentRecheck`` runs it during ``nbgrader
autograde`` and fails any test cell that passed in the kernel but not here, so
a submission scores the lower of the two.

Run as ``python -I -m grader.judge < request.json``; the request is
``{"prelude": setup cell, "cells": [source, ...], "checks": [[cell_id, exercise, function, part], ...]}``
and the last line printed is ``{"results": {cell_id: [ok, message]}}``.
"""
import ast
import json
import sys

ALLOWED_DECORATORS = {"torch.no_grad", "torch.inference_mode", "torch.enable_grad"}
BLOCKED_MODULES = ("grader", "solutions", "coursekit")


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
    """The statements of a cell that only define things; returns (module AST, dropped count)."""
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


def run(request):
    import grader  # first: the grader captures its primitives and the reference before student code exists
    from grader import CheckFailed

    namespace = {"__name__": "__main__"}
    # the notebook's read-only set-up cell (restored from the source by nbgrader), run as is
    exec(request.get("prelude") or "import math\nimport torch\nimport torch.nn.functional as F\n", namespace)
    for i, source in enumerate(request["cells"]):
        module, _ = definitions(source)
        try:
            exec(compile(module, f"<student cell {i}>", "exec"), namespace)
        except Exception:  # a definition that fails here failed in the kernel too
            pass
    results = {}
    for cell_id, exercise, function, part in request["checks"]:
        ok, message = results.get(cell_id, (True, ""))
        if not ok:
            continue
        fn = namespace.get(function)
        if fn is None:
            results[cell_id] = (False, f"`{function}` is not defined by a `def` in your cells")
            continue
        try:
            with _quiet():
                grader.check(exercise, fn, part)
        except CheckFailed as exc:
            results[cell_id] = (False, str(exc))
        except Exception as exc:
            results[cell_id] = (False, f"the check could not run: {type(exc).__name__}: {exc}")
        else:
            results[cell_id] = (True, "")
    return results


class _quiet:
    """Send the checks' PASSED lines to a buffer: stdout carries the verdict only."""

    def __enter__(self):
        import io
        self._old = sys.stdout
        sys.stdout = io.StringIO()

    def __exit__(self, *exc):
        sys.stdout = self._old


def main():
    request = json.loads(sys.stdin.read())
    results = run(request)
    sys.stdout.write("\n" + json.dumps({"results": results}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
