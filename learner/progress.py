"""`course progress`: where a learner stands in the whole course, in seconds, without running a training cell.

For each notebook of the course (``learner.syllabus``) in a workspace, only what the checks need is run: the
read-only set-up cell, the learner's answer cells (the functions they wrote), then each graded cell's visible check,
as the notebook runs it. No other cell runs, so no model is trained and no figure is drawn: every check of the course
needs only its exercise's answer, the answers it calls and the set-up (``tests/learner/test_progress.py`` holds the
course to that). Each notebook runs in a process of its own, forked from one that imported torch and the checks
once, two at a time on two cores (``--jobs``).

What it says, per notebook: the points of the visible checks that pass, out of the notebook's points; each
exercise passed, failing (with the check's first line), or not started (still the stub); each question answered
and right; then the course's points so far and what is left. The hidden cases count only when the course is graded,
so these points are an upper bound of the grade.

A learner's function that hangs costs one call's limit (``learner.check.safe``: 10 s), is named, and the rest of
its exercise's checks are skipped; an answer cell whose own code does not finish within ``CELL_LIMIT`` is stopped
and named; a notebook that is missing, renamed, not a notebook, or has an answer cell with a syntax error is named
with what to do, and the rest is reported.
"""
import contextlib
import io
import json
import os
import re
import signal
import sys
import time

from .syllabus import NOTEBOOKS

CELL_LIMIT = 30        # seconds an answer cell's own code may take to define its functions
NOTEBOOK_LIMIT = 600   # seconds a notebook's checks may take in all (each call is bounded on its own)
PRINT_LIMIT = 1 << 16  # characters of a learner's printed text kept (and dropped): nothing reads them
TIMED_OUT = "did not finish within"
STUB = "is not implemented yet"
PASS, FAIL, STUB_LEFT, SKIPPED = "pass", "fail", "stub", "skipped"


class Unreadable(Exception):
    """The notebook cannot be read; the message says what to do."""


# ------------------------------------------------------------------ the notebook's cells
def graded_parts(folder):
    """[(exercise, cell, points)] of notebook ``folder``, as the course grades it (``learner.syllabus``)."""
    from .check import cells_of
    from .syllabus import cell_points
    return [(ex, cell, cell_points(ex, cell)) for ex in NOTEBOOKS[folder].exercises for cell in cells_of(ex)]


def notebook_file(workspace, folder):
    """The notebook's path, or raises ``Unreadable`` naming what is there instead."""
    path = os.path.join(workspace, folder, folder + ".ipynb")
    if os.path.isfile(path):
        return path
    where = os.path.join(workspace, folder)
    others = sorted(n for n in os.listdir(where) if n.endswith(".ipynb")) if os.path.isdir(where) else []
    if others:
        raise Unreadable(f"no {folder}.ipynb in {folder}/ (there is {', '.join(others)}: rename yours to "
                         f"{folder}.ipynb)")
    raise Unreadable(f"no notebook {folder}/{folder}.ipynb (on the hub: Fresh copy in the Assignments tab; on your "
                     f"machine: `course workspace` makes a fresh one)")


def read_cells(path):
    """(the set-up cell's source, [(label, answer's exercise or None, source) of each learner code cell, in order]) of
    the notebook at ``path``: the cells grading keeps the definitions of (``learner.definitions.is_learner_code``)."""
    import nbformat

    from .definitions import is_learner_code
    try:
        nb = nbformat.read(path, as_version=4)
        cells = [c for c in nb.cells if isinstance(c, dict)]
    except Exception as exc:  # not JSON, not a notebook: nbformat's many errors
        raise Unreadable(f"{os.path.basename(path)} cannot be read as a notebook ({type(exc).__name__}); "
                         f"`course workspace` makes a fresh one after you move it aside") from None
    setup, learners = None, []
    for i, cell in enumerate(cells, 1):
        meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        meta = meta.get("nbgrader") if isinstance(meta.get("nbgrader"), dict) else {}
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "code" and meta.get("grade_id") == "setup":
            setup = source
        elif is_learner_code(cell):
            answer = str(meta.get("grade_id")) if meta.get("solution") else None
            learners.append((f"the answer cell of {answer}" if answer else f"code cell {i}", answer, source))
    if setup is None:
        raise Unreadable(f"{os.path.basename(path)} has no set-up cell (its first code cell, read-only): `course "
                         f"workspace` makes a fresh notebook after you move this one aside")
    return setup, learners


# ------------------------------------------------------------------ one notebook, in a process of its own
class _Capped(io.TextIOBase):
    """A learner's printed text, kept up to ``PRINT_LIMIT`` characters."""

    def __init__(self):
        self.kept = []
        self.size = 0

    def write(self, text):
        if self.size < PRINT_LIMIT:
            self.kept.append(text[:PRINT_LIMIT - self.size])
        self.size += len(text)
        return len(text)

    def text(self):
        return "".join(self.kept)


class _CellTimeout(BaseException):
    pass


def _on_alarm(signum, frame):
    raise _CellTimeout()


def _first_line(text):
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _summary(exc):
    """One line of a failed check: its first line and, past it, the known mistake it names."""
    text = str(exc)
    line = _first_line(text)
    named = re.search(r"This looks like a known mistake: (.*)", text)
    first = re.search(r"First failure, case \d+: .*\n\s*(.*)", text)
    if first:
        line += " " + first.group(1).strip()
    if named:
        line += " Known mistake: " + named.group(1).strip()
    return line


def run_notebook(path, folder, report=lambda what: None):
    """The checks of notebook ``folder`` at ``path`` as grading runs them: the set-up cell, the definitions of every
    learner code cell in order (``learner.definitions``: what grading keeps of a cell), then the visible part of each
    graded cell the course has (``graded_parts``, whatever the notebook's own check cells say). Returns {"answers":
    {exercise: problem}, "results": [(exercise, part, status, message)]}; ``report`` is told each step."""
    from .definitions import definitions
    setup, learners = read_cells(path)
    os.chdir(os.path.dirname(os.path.abspath(path)))
    namespace = {"__name__": "__main__"}
    problems, results, stopped = {}, [], set()
    printed = _Capped()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            report("the set-up cell")
            try:
                exec(compile(setup, "<set-up cell>", "exec"), namespace)
            except BaseException as exc:  # a broken install, or a set-up cell edited
                raise Unreadable(f"its set-up cell failed ({type(exc).__name__}: {_first_line(exc)[:200]}): "
                                 f"`course workspace` makes a fresh notebook after you move this one aside") from None
            checker = namespace.get("check")  # the course's, from the set-up: no cell of the learner's replaces it
            for label, answer, source in learners:
                report(label)
                try:
                    compile(source, f"<{label}>", "exec")
                except SyntaxError as exc:
                    if answer:
                        problems[answer] = f"a syntax error in its answer cell, line {exc.lineno}: {exc.msg}"
                    continue  # grading keeps nothing of such a cell either
                kept, _ = definitions(source)
                signal.setitimer(signal.ITIMER_REAL, CELL_LIMIT)
                try:
                    exec(compile(kept, f"<{label}>", "exec"), namespace)
                except _CellTimeout:
                    if answer:
                        problems[answer] = f"its answer cell's definitions {TIMED_OUT} {CELL_LIMIT} s"
                except BaseException as exc:  # an import that fails, SystemExit from one: the cell stopped there
                    if answer:
                        problems[answer] = f"its answer cell raised {type(exc).__name__}: {_first_line(exc)[:200]}"
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            for name, part, _ in graded_parts(folder):
                report(f"the check of {name} [{part}]")
                if name in problems or name in stopped:
                    results.append((name, part, SKIPPED, problems.get(name) or stopped_message(name)))
                    continue
                fn = namespace.get(name)
                if not callable(fn):
                    results.append((name, part, FAIL, f"your notebook defines no function `{name}` (grading keeps "
                                                      f"only what its cells define)"))
                    continue
                try:
                    checker(name, fn, part=part)
                    results.append((name, part, PASS, ""))
                except AssertionError as exc:  # a failed check (CheckFailed)
                    text = str(exc)
                    status = STUB_LEFT if STUB in text else FAIL
                    if TIMED_OUT in text:
                        stopped.add(name)
                    results.append((name, part, status, _summary(text)))
                except BaseException as exc:  # raised by the learner's code the check ran, SystemExit included
                    results.append((name, part, FAIL, f"{type(exc).__name__}: {_first_line(exc)[:200]}"))
    finally:
        signal.signal(signal.SIGALRM, old)
    return {"answers": problems, "results": results}


def stopped_message(name):
    return f"skipped: `{name}` {TIMED_OUT} its time limit in an earlier check"


def _child(path, folder, conn):
    """In the forked process: run one notebook, send what it is doing and then the outcome. It leads a process group
    of its own, which the parent kills once it is done: nothing the learner's code started outlives it."""
    try:
        os.setpgid(0, 0)
        quiet = os.open(os.devnull, os.O_WRONLY)  # what the learner's code writes to the files 1 and 2 themselves
        os.dup2(quiet, 1)                           # (os.write, a subprocess) is not the report's
        os.dup2(quiet, 2)
        import torch
        torch.set_num_threads(1)  # one notebook per core
        outcome = run_notebook(path, folder, report=lambda what: conn.send(("cell", what)))
        conn.send(("done", outcome))
    except Unreadable as exc:
        conn.send(("unreadable", str(exc)))
    finally:
        conn.close()


# ------------------------------------------------------------------ the whole course
def _preload():
    """What every notebook's set-up imports, imported once before the notebooks' processes are forked."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    import matplotlib
    matplotlib.use("Agg")
    import nbformat  # noqa: F401
    import torch  # noqa: F401
    import torch.nn.functional  # noqa: F401

    from . import blocks, plots  # noqa: F401
    from .check import check  # noqa: F401


def _end_group(proc):
    """Kill what is left of a notebook's process group (the learner's code may have started processes)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass  # the group is gone already


def course_progress(workspace, jobs=2, limit=NOTEBOOK_LIMIT, present=False):
    """{folder: {"error": text} or run_notebook's outcome} for every notebook of the course in ``workspace`` (with
    ``present``, only those whose folder is there: a student on the hub has the released ones)."""
    import multiprocessing
    from multiprocessing.connection import wait
    _preload()
    ctx = multiprocessing.get_context("fork")
    out, waiting, running = {}, [], {}
    folders = [f for f in NOTEBOOKS if not present or os.path.isdir(os.path.join(workspace, f))]
    for folder in folders:
        try:
            waiting.append((folder, notebook_file(workspace, folder)))
        except Unreadable as exc:
            out[folder] = {"error": str(exc)}
    while waiting or running:
        while waiting and len(running) < max(1, jobs):
            folder, path = waiting.pop(0)
            mine, theirs = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(path, folder, theirs), daemon=True)
            proc.start()
            theirs.close()
            running[mine] = [folder, proc, time.monotonic(), "its start"]
        for conn in wait(list(running), timeout=1.0):
            folder, proc, started, doing = running[conn]
            try:
                kind, value = conn.recv()
            except (EOFError, OSError):
                proc.join(5)
                _end_group(proc)
                out[folder] = {"error": f"its checks' process ended while running {doing} (exit "
                                        f"{proc.exitcode}): run the notebook to see why"}
                del running[conn]
                continue
            if kind == "cell":
                running[conn][3] = value
                continue
            out[folder] = {"error": value} if kind == "unreadable" else value
            _end_group(proc)  # first: a thread or process the learner's code left must not hold up the rest
            proc.join(30)
            del running[conn]
        for conn, (folder, proc, started, doing) in list(running.items()):
            if time.monotonic() - started > limit:
                _end_group(proc)
                proc.join(5)
                out[folder] = {"error": f"stopped after {limit} s, in {doing}"}
                del running[conn]
    return {folder: out[folder] for folder in folders}


def progress_report(workspace, outcome):
    """{"notebooks": [...], "points", "max_points", "to_do"}: per notebook its points, exercises and questions."""
    notebooks, points, most, to_do = [], 0.0, 0.0, 0
    for folder, got in outcome.items():
        parts = graded_parts(folder)
        worth = {(ex, cell): p for ex, cell, p in parts}
        nb_max = sum(worth.values())
        most += nb_max
        entry = {"notebook": folder, "max_points": nb_max, "points": 0.0, "exercises": [], "questions": []}
        if "error" in got:
            entry["error"] = got["error"]
            to_do += len(NOTEBOOKS[folder].exercises)
            notebooks.append(entry)
            continue
        by_exercise = {}
        for name, part, status, message in got["results"]:
            by_exercise.setdefault(name, []).append((part, status, message))
            if status == PASS:
                entry["points"] += worth.get((name, part), 0)
        for name in NOTEBOOKS[folder].exercises:
            seen = by_exercise.get(name, [])
            question = name in NOTEBOOKS[folder].questions
            problem = got["answers"].get(name)
            if seen and all(s == PASS for _, s, _ in seen):
                state = "right" if question else "passes"
            elif problem:
                state = "broken"
            elif not seen or all(s == STUB_LEFT for _, s, _ in seen):
                state = "not answered" if question else "not started"
            else:
                state = "wrong" if question else "failing"
            failing = next(((p, m) for p, s, m in seen if s not in (PASS,)), None)
            item = {"name": name, "state": state,
                    "points": sum(worth.get((name, p), 0) for p, s, _ in seen if s == PASS),
                    "max_points": sum(v for (ex, _), v in worth.items() if ex == name),
                    "message": problem or (f"[{failing[0]}] {failing[1]}" if failing and state in ("failing", "wrong")
                                           else "")}
            entry["questions" if question else "exercises"].append(item)
            to_do += state not in ("passes", "right")
        points += entry["points"]
        notebooks.append(entry)
    return {"workspace": os.path.abspath(workspace), "notebooks": notebooks, "points": points, "max_points": most,
            "to_do": to_do}


def _to_go(n):
    return "1 exercise or question to go" if n == 1 else f"{n} exercises and questions to go"


def _num(x):
    return f"{x:g}"


def lines_of(report):
    """What `course progress` prints."""
    from .inert_text import inert as plain
    out = [f"course progress: {plain(report['workspace'])}"]
    for nb in report["notebooks"]:
        head = f"{nb['notebook']:<20} {_num(nb['points']):>3} / {_num(nb['max_points']):<3}"
        if "error" in nb:
            out.append(f"{head} {plain(nb['error'])}")
            continue
        ex, qs = nb["exercises"], nb["questions"]
        done = [e for e in ex if e["state"] == "passes"]
        answered = [q for q in qs if q["state"] != "not answered"]
        right = [q for q in qs if q["state"] == "right"]
        out.append(f"{head} exercises {len(done)} of {len(ex)} pass; questions {len(answered)} of {len(qs)} "
                   f"answered, {len(right)} right")
        for item in ex + qs:
            if item["state"] in ("passes", "right"):
                continue
            message = f": {plain(item['message'])[:300]}" if item["message"] else ""
            out.append(f"    {item['name']}: {item['state']}{message}")
    out.append(f"the course: {_num(report['points'])} / {_num(report['max_points'])} points from the visible checks "
               f"(the hidden cases count when it is graded); "
               + (_to_go(report["to_do"]) if report["to_do"] else "everything passes"))
    return out


PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


def page_of(report):
    """The report as a page with no script (the learner's server serves it: ``learner.lab_server``)."""
    from html import escape
    rows = []
    for nb in report["notebooks"]:
        head = f"<h2>{escape(nb['notebook'])}: {_num(nb['points'])} / {_num(nb['max_points'])}</h2>"
        if "error" in nb:
            rows.append(f"{head}<p class=bad>{escape(nb['error'])}</p>")
            continue
        items = "".join(
            f"<tr class={'ok' if i['state'] in ('passes', 'right') else 'bad'}><td>{escape(i['name'])}</td>"
            f"<td>{escape(i['state'])}</td><td>{_num(i['points'])} / {_num(i['max_points'])}</td>"
            f"<td>{escape(i['message'])}</td></tr>" for i in nb["exercises"] + nb["questions"])
        rows.append(f"{head}<table><tr><th>exercise or question</th><th>state</th><th>points</th><th>what the check "
                    f"said</th></tr>{items}</table>")
    total = (f"{_num(report['points'])} / {_num(report['max_points'])} points from the visible checks (the hidden "
             f"cases count when it is graded); {_to_go(report['to_do'])}")
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" '
            f'content="{PAGE_POLICY}"><title>Your progress</title><style>body{{font-family:sans-serif;margin:2em}}'
            f"td,th{{padding:2px 8px;text-align:left;vertical-align:top}}tr.bad td:nth-child(2){{color:#a00}}"
            f"tr.ok td:nth-child(2){{color:#070}}p.bad{{color:#a00}}</style></head><body><h1>Your progress</h1>"
            f"<p>{escape(total)}. Only your answer cells and the checks ran (no training), in "
            f"{report.get('seconds', 0):g} s.</p>{''.join(rows)}</body></html>")


def main(argv=None):
    """``course progress [--dir WORKSPACE] [--json] [-j N]``."""
    import argparse
    p = argparse.ArgumentParser(prog="course progress")
    p.add_argument("--dir", default="workspace")
    p.add_argument("--json", action="store_true")
    p.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--present", action="store_true", help="only the notebooks whose folder is there")
    args = p.parse_args(argv)
    if not os.path.isdir(args.dir):
        print(f"course progress: no workspace at {args.dir} (`course workspace` makes one)", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    outcome = course_progress(os.path.abspath(args.dir), jobs=args.jobs, present=args.present)
    report = progress_report(args.dir, outcome)
    report["seconds"] = round(time.monotonic() - t0, 1)
    if args.json:
        json.dump(report, sys.stdout)
        print()
    else:
        for line in lines_of(report):
            print(line)
    return 0


def from_args(args):
    """`course progress` (coursekit/cli.py): its arguments as ``main``'s."""
    return main(["--dir", args.dir, "--jobs", str(args.jobs)] + (["--json"] if args.json else []))


if __name__ == "__main__":
    sys.exit(main())
