"""The trusted verdict on one submission: the reference runs here, the student's code in the sandbox.

nbgrader scores a test cell by what the student's kernel printed, and that kernel
ran everything the student wrote. The judge decides instead, from outside:

1. It runs as ``python -I -m grader.judge`` in an empty folder, on the grading
   machine, with the reference (``solutions``) captured before any student code
   exists.
2. It starts one sandboxed worker (``grader.remote.Worker``, ``grader.worker``)
   holding the student's *definitions only* (``grader.worker.definitions``):
   every top-level statement that is not a definition is dropped.
3. For each graded cell it runs the cell's checks with the student's functions
   as ``RemoteFunction`` stand-ins: the cases, the reference and the comparison
   stay here; each call of the student's function crosses into the sandbox with
   fresh copies of its inputs and comes back as plain data.

``grader.nbgrader_plugin.TrustedVerdict`` replaces the outputs of every graded
cell with this verdict, so nbgrader records it and nothing the kernel printed.

The request (stdin) is ``{"prelude": set-up cell, "cells": [source, ...],
"checks": [[cell_id, exercise, function, part], ...], "seed": the student's seed of the hidden cases
(``grader.seeds``)}``; the last line printed
is ``{"results": {cell_id: [ok, message]}, "faults": [[kind, text], ...], ...}``.
"""
import contextlib
import io
import json
import sys

from .worker import definitions  # noqa: F401  (the rule for what of a cell is kept, documented there)


def run(request):
    import grader  # first: the grader captures its primitives and the reference before student code exists
    from grader import CheckFailed, remote, sandbox

    results, faults = {}, []
    worker = remote.Worker(request.get("prelude"), request["cells"])
    try:
        try:
            worker.start()
        except remote.SandboxFault as exc:
            faults.append(("crash", str(exc)))
            for cell_id, *_ in request["checks"]:
                results[cell_id] = (False, f"your code could not be loaded for grading: {exc}")
            return results, faults, sandbox.isolated()
        for cell_id, exercise, function, part in request["checks"]:
            ok, text = results.get(cell_id, (True, ""))
            if not ok:
                continue
            try:
                fn = worker.function(function, exercise)  # starts the worker again after a crash
            except remote.SandboxFault as exc:
                faults.append(("crash", str(exc)))
                results[cell_id] = (False, f"your code could not be loaded for grading: {exc}")
                continue
            if fn is None:
                results[cell_id] = (False, f"`{function}` is not defined by a `def` in your cells (graded on your "
                                           f"definitions only)")
                continue
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    grader.check(exercise, fn, part, seed=request.get("seed", 0))
            except CheckFailed as exc:
                results[cell_id] = (False, str(exc))
            except Exception as exc:
                results[cell_id] = (False, f"the check could not run: {type(exc).__name__}: {exc}")
            else:
                results[cell_id] = (True, (text + "\n" if text else "") + printed.getvalue().strip())
    finally:
        worker.stop()  # reads the sandbox's notes of refused attempts into worker.faults
        faults.extend(worker.faults)
    return results, faults, sandbox.isolated()


def main():
    request = json.loads(sys.stdin.read())
    try:
        results, faults, isolated = run(request)
    except Exception as exc:  # the sandbox is missing, or the grader itself failed: say so, grade nothing
        sys.stdout.write("\n" + json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        sys.stdout.flush()
        return 2
    sys.stdout.write("\n" + json.dumps({"results": results, "faults": faults, "isolated": isolated}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
