"""nbgrader preprocessors the course's configuration plugs in.

``IndependentRecheck`` runs after ``Execute`` during autograde: it re-runs every
graded test cell's checks in a clean process (``grader.judge``) on the student's
definitions only, and turns a cell that passed in the kernel but fails there into
an error, so tampering in the kernel cannot raise a score.
"""
import ast
import json
import os
import subprocess
import sys
import tempfile

import nbformat

from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Integer


def _is_learner_code(cell):
    md = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and (md.get("solution") or not (md.get("locked") or md.get("grade")))


def _check_calls(source):
    """(exercise, function name, part) of every ``check(...)`` call in a test cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check":
            args = node.args
            part = next((k.value.value for k in node.keywords if k.arg == "part"), "basic")
            if len(args) >= 2 and isinstance(args[0], ast.Constant) and isinstance(args[1], ast.Name):
                calls.append((args[0].value, args[1].id, part))
    return calls


def _failed_in_kernel(cell):
    return any(o.get("output_type") == "error" or (o.get("output_type") == "stream" and o.get("name") == "stderr")
               for o in cell.get("outputs", []))


def _error_output(message):
    return nbformat.v4.new_output(
        "error", ename="CheckFailed", evalue="independent re-check failed: " + message,
        traceback=["CheckFailed: the independent re-check (your definitions only, in a clean process) failed:",
                   message])


class IndependentRecheck(NbGraderPreprocessor):
    timeout = Integer(600, help="seconds the whole re-check of one notebook may take").tag(config=True)

    def preprocess(self, nb, resources):
        cells = [c.source for c in nb.cells if _is_learner_code(c)]
        checks, graded = [], {}
        for i, cell in enumerate(nb.cells):
            md = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and md.get("grade") and not md.get("solution"):
                calls = _check_calls(cell.source)
                if calls:
                    graded[md["grade_id"]] = i
                    checks += [[md["grade_id"], *c] for c in calls]
        if not checks:
            return nb, resources
        prelude = next((c.source for c in nb.cells if c.cell_type == "code"
                        and c.metadata.get("nbgrader", {}).get("grade_id") == "setup"), None)
        results = self._judge({"prelude": prelude, "cells": cells, "checks": checks})
        for grade_id, index in graded.items():
            cell = nb.cells[index]
            ok, message = results.get(grade_id, (False, "the re-check gave no verdict for this cell"))
            if not ok and not _failed_in_kernel(cell):
                self.log.warning("%s: passed in the kernel but failed the independent re-check", grade_id)
                cell.outputs.append(_error_output(message))
        return nb, resources

    def _judge(self, request):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JPY_", "COURSE_CALL"))}
        with tempfile.TemporaryDirectory(prefix="course-judge-") as cwd:
            try:
                proc = subprocess.run([sys.executable, "-I", "-m", "grader.judge"], input=json.dumps(request),
                                      capture_output=True, text=True, cwd=cwd, env=env, timeout=self.timeout)
            except subprocess.TimeoutExpired:
                return {}
        for line in reversed(proc.stdout.splitlines()):
            if line.startswith('{"results"'):
                return {k: tuple(v) for k, v in json.loads(line)["results"].items()}
        self.log.error("the independent re-check printed no verdict; stderr:\n%s", proc.stderr[-3000:])
        return {}


class ShortenTracebacks(NbGraderPreprocessor):
    """Feedback: show a failed test cell's error as its message only.

    IPython's traceback quotes the cell's source, hidden-test lines included;
    the message (what the grader says about the learner's function) is what
    feedback needs.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
        return cell, resources
