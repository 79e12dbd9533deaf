"""The `course` command: learners, instructors and maintainers start here.

    course lab        build your workspace (never overwriting your notebooks) and open JupyterLab on it
    course workspace  only build the workspace
    course update     bring your notebooks up to the current release: answers carried over, old files kept
    course fetch-again  students: a fresh copy of a released assignment, your folder moved aside (never deleted)
    course demo       headless run of the whole pipeline: release, sample submissions, autograde, feedback
    course grade      instructors: release, grade every submission in course/submitted in parallel (Dask), feedback,
                      grades.csv, a summary naming every problem
    course sync       create what learner/syllabus.py adds, rewrite the answer and test cells (--check: report drift)
    course expected   rebuild the checks' shipped expected outputs (--check: report stale files)
    course validate   learners: run a notebook's checks; exits 1 when one fails (nbgrader validate exits 0)
    course progress   learners: every notebook's checks in seconds, no training: points so far, what is left
    course bundle     instructors: the student bundle (released notebooks + a package without the answers)
    course report     instructors: the class report per assignment and the class overview (HTML, CSV, tables)
    course export     instructors: the grades as an LMS imports them (--lms canvas|moodle|generic; points)
    course hub        instructors: a JupyterHub for the class on this machine (as root; coursekit/hub/setup.py)
    course release    instructors: generate an assignment and release it to nbgrader's exchange
    course collect    instructors: collect each student's latest submission from the exchange (earlier ones kept)
    course return     instructors: the feedback, released to the exchange (--lms: and the scores posted to the LMS)
    course instructor-lab  instructors: JupyterLab on the course folder, with the formgrader and the exchange ready
"""
import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time

from .paths import COURSE_DIR, ROOT, SOURCE_DIR
from .words import counted
from .cli_class import add_class_commands, course_default, write_json
from .hub.service_client import GRADING_TIMEOUT
from learner.progress import from_args as cmd_progress  # the learner's side: students on the hub have it


def _workspace(target):
    """Copy each assignment's student release into ``target`` unless the learner already has it."""
    import nbformat

    from .pipeline import CourseCopy, assignments
    target = os.path.abspath(target)
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        cc = CourseCopy(tmp)
        missing = [a for a in assignments() if not os.path.exists(os.path.join(target, a, a + ".ipynb"))]
        for a in missing:
            cc.generate_release(a)
        for a in assignments():
            dest = os.path.join(target, a, a + ".ipynb")
            if a not in missing:
                print(f"kept    {os.path.relpath(dest)} (your own copy; delete it to get a fresh one)")
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            nb = nbformat.read(cc.release_path(a), as_version=4)
            nbformat.write(nb, dest + ".tmp")
            os.replace(dest + ".tmp", dest)  # never a half-written notebook
            print(f"created {os.path.relpath(dest)}")
    from learner.syllabus import NOTATION
    shutil.copy(os.path.join(SOURCE_DIR, NOTATION), os.path.join(target, NOTATION))  # course material, not the learner's
    return target


def cmd_update(args):
    """Bring the learner's notebooks up to the current release, answers carried over by exercise name."""
    from .pipeline import CourseCopy, assignments
    from .update import update_workspace
    target = os.path.abspath(args.dir)
    with tempfile.TemporaryDirectory(prefix="course-release-") as tmp:
        cc = CourseCopy(tmp)
        cc.generate_releases()
        for line in update_workspace(target, {a: cc.release_path(a) for a in assignments()}):
            print(line)
    return 0


def cmd_fetch_again(args):
    """A fresh copy of a released assignment for a student who lost or broke theirs (learner/fetch_again.py)."""
    from learner.fetch_again import run_fetch_again
    return run_fetch_again(args.assignment, args.course_id, args.dir)


def cmd_workspace(args):
    _workspace(args.dir)
    return 0


# A learner's JupyterLab keeps nbgrader's assignment tools (the Validate button) and leaves out the instructor's
# panels (Create Assignment, Formgrader, the course and assignment lists, which need an exchange) and the news.
LEARNER_HIDDEN_PLUGINS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                          "@jupyter/nbgrader:course-list", "@jupyter/nbgrader:assignment-list",
                          "@jupyter/nbgrader:menu")
LEARNER_OFF_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list",
                                 "nbgrader.server_extensions.assignment_list")


def learner_settings(env):
    """Write the learner's JupyterLab settings under ``env``'s Jupyter folders (the workspace's own, never
    $HOME): the plugins and server extensions above switched off, and no news or update pop-up."""
    config = env["JUPYTER_CONFIG_DIR"]
    write_json(os.path.join(config, "labconfig", "page_config.json"),
                {"disabledExtensions": {name: True for name in LEARNER_HIDDEN_PLUGINS}})
    write_json(os.path.join(config, "jupyter_server_config.json"),
                {"ServerApp": {"jpserver_extensions": {**{n: False for n in LEARNER_OFF_SERVER_EXTENSIONS},
                                                       "learner.lab_server": True}},  # /course/progress.html
                 "LabApp": {"check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}})
    settings = os.path.join(os.path.dirname(config), "lab-settings")
    news = os.path.join(settings, "@jupyterlab", "apputils-extension", "notification.jupyterlab-settings")
    if not os.path.exists(news):  # the learner may turn the news on again; we do not undo it
        write_json(news, {"fetchNews": "false", "checkForUpdates": False})
    env["JUPYTERLAB_SETTINGS_DIR"] = settings
    return env


def cmd_lab(args):
    target = _workspace(args.dir)
    from .pipeline import nbgrader_env
    env = learner_settings(nbgrader_env(target))  # Jupyter's own files go to workspace/.jupyter, not $HOME
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--notebook-dir={target}", f"--ServerApp.ip={args.ip}",
           f"--ServerApp.port={args.port}", f"--ServerApp.open_browser={args.browser}", *args.jupyter_args]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and CI machines often run as root
    print(f"starting JupyterLab on {target}: open the URL it prints (and course/progress.html)", flush=True)
    os.execve(sys.executable, cmd, env)  # become the server: stopping this process stops JupyterLab


def cmd_demo(args):
    """Release every notebook, grade three sample submissions each with the parallel grader, and check that the
    scores are what they must be."""
    import nbformat

    from .grading import grade_class, print_summary
    from .pipeline import CourseCopy, assignments
    from .samples import ONE_BUG, ONE_BUG_COSTS, answered, points_in_notebook, total_points, with_bug
    if not _isolation_ready(args.no_isolation):
        return 2
    out = os.path.abspath(args.out)
    if os.path.exists(out):
        shutil.rmtree(out)
    cc = CourseCopy(os.path.join(out, "course"))
    if args.train_steps:  # graded as `course grade` grades a class: the notebooks' training capped
        cc.env.setdefault("COURSE_MAX_TRAIN_STEPS", str(args.train_steps))
    wanted = args.assignment or assignments()
    t0 = time.perf_counter()
    if args.assignment:
        for a in wanted:
            cc.generate_release(a)
    else:
        cc.generate_releases()
    print(f"released {counted(len(wanted), 'notebook')} in {time.perf_counter() - t0:.1f} s")
    expected = {}
    for a in wanted:
        release = nbformat.read(cc.release_path(a), as_version=4)
        total = total_points(release)
        bug_name, bug_what, _ = ONE_BUG[a]
        samples = {
            "reference": (answered(release), total),
            "untouched": (release, 0.0),
            "one-bug": (with_bug(release, a), total - points_in_notebook(release, bug_name, ONE_BUG_COSTS[a])),
        }
        for student, (nb, want) in samples.items():
            cc.submit(student, a, nb)
            expected[(student, a)] = (want, total)
        print(f"{a}: one-bug sample = {bug_name}: {bug_what}")
    summary = grade_class(cc.root, wanted, jobs=args.jobs, env=cc.env, isolated=not args.no_isolation,
                          release_first=False, progress=not args.no_progress)
    print_summary(summary, cc.root)
    print(f"\n{'assignment':<20} {'submission':<10} {'score':>9} {'expected':>9}")
    ok = True
    for (student, a), (want, total) in expected.items():
        got = summary.graded.get((student, a))
        good = got is not None and abs(got - want) < 1e-9
        ok &= good
        print(f"{a:<20} {student:<10} {'-' if got is None else f'{got:g}':>4}/{total:<4g} {want:>9g}"
              f"{'' if good else '  <-- WRONG'}")
    cc.export("grades.csv")
    print(f"\nfeedback: {os.path.join(cc.root, 'feedback')}\ngrades:   {os.path.join(cc.root, 'grades.csv')}")
    print("demo " + ("passed: every score is what it must be" if ok else "FAILED: see the rows marked WRONG"))
    return 0 if ok else 1


def _isolation_ready(no_isolation):
    """True when grading may start: bwrap is there, or the instructor asked for no isolation (said loudly)."""
    from grader import sandbox
    if no_isolation:
        print("WARNING: grading WITHOUT isolation (--no-isolation): student code runs beside the reference and "
              "the gradebook. Every graded notebook is marked so in grading_log.jsonl.", flush=True)
        return True
    try:
        sandbox.bwrap_path()
    except sandbox.SandboxUnavailable as exc:
        print(f"course: {exc}", file=sys.stderr)
        return False
    return True


def cmd_grade(args):
    """Instructor workflow: release, grade every submission in parallel (Dask), feedback, grades.csv, summary."""
    from .grading import grade_class, print_summary, security_from
    from .hub.service_client import on_the_hub
    from .pipeline import nbgrader_env
    if on_the_hub() and args.no_isolation:
        print("course grade: on the hub, grading always runs in the sandbox, as root, by the hub's grading service "
              "(--no-isolation is for a machine of your own)", file=sys.stderr)
        return 2
    if not _isolation_ready(args.no_isolation):
        return 2
    root = os.path.abspath(args.course)
    env = nbgrader_env(root)
    if args.train_steps:  # the step cap of class grading (no graded cell depends on the training)
        env.setdefault("COURSE_MAX_TRAIN_STEPS", str(args.train_steps))
    summary = grade_class(root, args.assignment or None, jobs=args.jobs, scheduler=args.scheduler,
                          security=security_from(args), timeout=args.timeout, isolated=not args.no_isolation,
                          progress=not args.no_progress, env=env)
    from .pipeline import CourseCopy
    CourseCopy.existing(root).export("grades.csv")  # what `nbgrader export --to grades.csv` writes, in this process
    print_summary(summary, root)
    print("grades written to", os.path.join(root, "grades.csv"))
    return 0


def cmd_sync(args):
    from .sync import drift, missing, sync
    if args.check:
        bad, absent = drift(), set(missing())
        for nb, gid in bad:
            print(f"drift: {nb}: {gid} is in learner/syllabus.py but not in the notebooks (run `course sync`)"
                  if (nb, gid) in absent else f"drift: {nb}: cell {gid} differs from solutions/ (run `course sync`)")
        print("notebooks agree with solutions/" if not bad else f"{counted(len(bad), 'cell')} drifted")
        return 1 if bad else 0
    for path in sync():
        print("rewrote", os.path.relpath(path, ROOT))
    return 0


def cmd_validate(args):
    """Run each notebook top to bottom and report its failing checks; exit 1 when any fails, 2 when a file cannot
    be read. (``nbgrader validate`` prints the failures but exits 0, so scripts and CI cannot use it.)"""
    from nbgrader.validator import Validator
    from traitlets.config import Config

    worst = 0
    for path in args.notebooks:
        if not os.path.isfile(path):
            print(f"{path}: no such notebook")
            worst = max(worst, 2)
            continue
        validator = Validator(config=Config({"Execute": {"timeout": args.timeout}}))
        try:
            results = validator.validate(os.path.abspath(path))
        except Exception as exc:  # not JSON, not a notebook, a kernel that died
            print(f"{path}: could not be run: {type(exc).__name__}: {str(exc)[:300]}")
            worst = max(worst, 2)
            continue
        problems = [("changed", "a read-only cell was edited", c) for c in results.get("changed", [])] + \
                   [("type_changed", "a cell changed its type", c) for c in results.get("type_changed", [])] + \
                   [("failed", "a check failed", c) for c in results.get("failed", [])]
        if not problems:
            print(f"{path}: every check passed")
        else:
            worst = max(worst, 1)
            print(f"{path}: {counted(len(problems), 'problem')}")
            from grader.plain import plain  # a learner's text and messages: no escape sequence reaches the terminal
            for _, what, cell in problems:
                first = cell["source"].splitlines()[0] if cell["source"] else ""
                print(f"  {what}: {plain(first)}")
                for line in _shown_error(cell.get("raw_error") or ""):  # made plain there
                    print(f"    {line}")
        if not results.get("changed") and not results.get("type_changed"):
            for line in points_lines(path, results.get("failed", [])):
                print(line)
    return worst


def points_lines(path, failed):
    """What each exercise of notebook ``path`` is worth and what its checks here earn, as grading counts them: the
    course table's points, cell by cell (a graded cell scores all its points or none), then the total. ``failed``
    are the failing cells as ``Validator.validate`` returns them. Grading adds hidden checks to each cell, which can
    still take a cell's points away; the lines say so."""
    import nbformat

    from learner.syllabus import cell_points
    failed_sources = {c["source"] for c in failed}
    rows = {}  # exercise -> [earned, worth], in the notebook's order
    for cell in nbformat.read(path, as_version=4).cells:
        graded = cell.metadata.get("nbgrader", {})
        name, _, part = graded.get("grade_id", "").rpartition("_") if graded.get("grade") else ("", "", "")
        try:
            worth = cell_points(name, part)
        except (KeyError, ValueError):
            continue  # not a graded cell of the course table
        row = rows.setdefault(name, [0, 0])
        row[0] += 0 if cell.source.strip() in failed_sources else worth
        row[1] += worth
    if not rows:
        return []
    width = max(len(name) for name in rows) + 2
    lines = ["  points, as grading counts them (each graded cell all or nothing; grading adds hidden checks, "
             "which can still take a cell's points away):"]
    lines += [f"    {name:<{width}}{earned:>3} of {worth}" for name, (earned, worth) in rows.items()]
    earned, worth = sum(r[0] for r in rows.values()), sum(r[1] for r in rows.values())
    lines.append(f"    {'total':<{width}}{earned:>3} of {worth}")
    return lines


def _shown_error(raw, most=40):
    """What the notebook shows under a failed cell, as lines: a failed check's whole message (the verdict, its first
    failing case and what was wrong there, the known mistake, the other kinds of failure), or for any other error
    its last line (``NameError: ...``), without the terminal colours."""
    import re

    from grader.plain import plain
    text = plain(raw).strip()
    if not text:
        return []
    checks = list(re.finditer(r"^(?:\S+\.)?CheckFailed: ", text, re.M))
    if checks:
        lines = text[checks[-1].end():].splitlines()
    else:
        lines = text.splitlines()[-1:]
    lines = [line[:500] for line in lines if line.strip()]
    return lines[:most] + ([f"... ({len(lines) - most} more lines in the notebook)"] if len(lines) > most else [])


def cmd_bundle(args):
    from .bundle import build_bundle, course_version
    out = build_bundle(args.out)
    print(f"student bundle {course_version()} in {os.path.relpath(out)}: notebooks/, package/ (pip install it); "
          f"no solutions/, no hidden tests, no sample bugs")
    return 0


def cmd_report(args):
    from .pipeline import gradebook
    from .class_report import as_table, assignment_report, class_overview, overview_table, write_report, write_overview
    from .report_students import who_failed_what
    root = os.path.abspath(args.course)
    if not os.path.exists(os.path.join(root, "gradebook.db")):
        print(f"no gradebook in {root}: grade first (`course grade`)")
        return 2
    with gradebook(root) as gb:
        graded = sorted(a.name for a in gb.assignments)
    unknown = [a for a in args.assignment if a not in graded]
    if unknown:
        print(f"no assignment {', '.join(unknown)} in the gradebook of {root}; it has: {', '.join(graded) or 'none'}")
        return 2
    out = args.out or os.path.join(root, "report")
    for assignment in args.assignment or graded:
        report = assignment_report(root, assignment)
        html_path, csv_path = write_report(report, out)
        print(as_table(report))
        print(who_failed_what(report, out, _shown))
        print(f"  -> {_shown(html_path)}, {_shown(csv_path)}\n")
    overview = class_overview(root, args.assignment or graded)
    index = write_overview(overview, out)
    print(overview_table(overview))
    print(f"  -> {_shown(index)}")
    return 0


def cmd_export(args):
    """The gradebook as the LMS's import file (coursekit/lms/export.py says what each platform's file holds)."""
    from .lms.export import NoGrades, export_course
    try:
        lines = export_course(args.course, args.lms, args.out, args.assignment)
    except (NoGrades, FileNotFoundError) as exc:
        print(f"course export: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    left_out = [line for line in lines if line.lstrip().startswith("LEFT OUT ")]
    if left_out:  # the file is written, but these students' grades must reach the LMS some other way
        print(f"course export: {counted(len(left_out), 'student')} left out of the file, each named above: enter their "
              f"grades in the LMS by hand (exit 1)", file=sys.stderr)
        return 1
    return 0


def _shown(path):
    """``path`` relative to here when it is below here, else whole."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def cmd_expected(args):
    from coursekit.expected import main
    return main(["--check"] if args.check else [])


def main(argv=None):
    parser = argparse.ArgumentParser(prog="course", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("lab", help="build the workspace and start JupyterLab on it")
    p.add_argument("--dir", default=os.path.join(ROOT, "workspace"))
    p.add_argument("--ip", default="127.0.0.1")
    p.add_argument("--port", default="8888")
    p.add_argument("--browser", action="store_true", help="open a browser window")
    p.add_argument("jupyter_args", nargs="*", help="passed on to `jupyter lab` (after --)")
    p.set_defaults(func=cmd_lab)
    p = sub.add_parser("workspace", help="build the learner's workspace (never overwrites)")
    p.add_argument("--dir", default=os.path.join(ROOT, "workspace"))
    p.set_defaults(func=cmd_workspace)
    p = sub.add_parser("update", help="bring your notebooks up to the current release, keeping your answers")
    p.add_argument("--dir", default=os.path.join(ROOT, "workspace"))
    p.set_defaults(func=cmd_update)
    p = sub.add_parser("fetch-again", help="students: a fresh copy of a released assignment, your folder moved aside")
    p.add_argument("assignment")
    p.add_argument("--course-id", default=None, help="the course's id (where you are in several courses)")
    p.add_argument("--dir", default=None, help="the folder your assignments are in (default: your home folder, as "
                                               "the Assignments tab on the hub)")
    p.set_defaults(func=cmd_fetch_again)
    p = sub.add_parser("demo", help="headless: release, grade sample submissions, check the scores")
    p.add_argument("--no-isolation", action="store_true", help="grade without the bubblewrap sandbox")
    p.add_argument("--out", default=os.path.join(ROOT, "demo-output"))
    p.add_argument("-j", "--jobs", type=int, default=None, help="grading workers (default: one per core, at most one per submission)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--train-steps", type=int, default=20,
                   help="cap on the notebooks' training steps while grading, as `course grade` (0: no cap; default 20)")
    p.add_argument("assignment", nargs="*")
    p.set_defaults(func=cmd_demo)
    p = sub.add_parser("grade", help="instructors: grade everything in course/submitted, in parallel")
    p.add_argument("assignment", nargs="*", help="only these assignments (default: all)")
    p.add_argument("-j", "--jobs", type=int, default=None, help="grading workers on this machine (default: one per core, at most one per submission)")
    p.add_argument("--scheduler", default=None,
                   help="address of an existing Dask scheduler (tcp://host:8786 or tls://host:8786) instead of a "
                        "local cluster")
    p.add_argument("--tls-ca-file", default=None, help="with a tls:// scheduler: the CA certificate")
    p.add_argument("--tls-cert", default=None, help="with a tls:// scheduler: this client's certificate")
    p.add_argument("--tls-key", default=None, help="with a tls:// scheduler: this client's private key")
    p.add_argument("--timeout", type=int, default=GRADING_TIMEOUT, help="seconds one submission may take (past it: graded "
                                                             "once more after the others, with twice the limit; past "
                                                             "both: zero, flagged)")
    p.add_argument("--train-steps", type=int, default=20,
                   help="cap on the notebooks' training steps while grading (0: no cap; default 20)")
    p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or the project's course/)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-isolation", action="store_true",
                   help="grade without the bubblewrap sandbox (not recommended; the summary says so)")
    p.set_defaults(func=cmd_grade)
    p = sub.add_parser("sync", help="notebook cells from solutions/")
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=cmd_sync)
    p = sub.add_parser("expected", help="the checks' shipped expected outputs")
    p.add_argument("--check", action="store_true")
    p.set_defaults(func=cmd_expected)
    p = sub.add_parser("validate", help="learners: run a notebook's checks; exit 1 if one fails")
    p.add_argument("notebooks", nargs="+")
    p.add_argument("--timeout", type=int, default=900, help="seconds a cell may run (training cells need minutes)")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("progress", help="learners: where you stand in the whole course, in seconds (no training)")
    p.add_argument("--dir", default=os.path.join(ROOT, "workspace"), help="your workspace (default: workspace/)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.add_argument("-j", "--jobs", type=int, default=min(2, os.cpu_count() or 1), help="notebooks at a time")
    p.set_defaults(func=cmd_progress)
    p = sub.add_parser("bundle", help="instructors: the student bundle, without the answers")
    p.add_argument("--out", default=os.path.join(ROOT, "student-bundle"))
    p.set_defaults(func=cmd_bundle)
    p = sub.add_parser("report", help="instructors: the class report (HTML, CSV, and a table here)")
    p.add_argument("--course", default=COURSE_DIR, help="the course folder that holds the gradebook")
    p.add_argument("--out", default=None, help="where the HTML and CSV go (default: <course>/report)")
    p.add_argument("assignment", nargs="*")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("export", help="instructors: the grades as an LMS imports them (points, each maximum)")
    p.add_argument("--lms", required=True, choices=("canvas", "moodle", "generic"), help="the platform's format")
    p.add_argument("--out", default=None, help="the file to write (default: <course>/lms/<lms>_grades.csv)")
    p.add_argument("--course", default=None, help="the course folder (default: $COURSE_ROOT or course/)")
    p.add_argument("assignment", nargs="*", help="only these assignments (default: every graded one)")
    p.set_defaults(func=cmd_export)
    add_class_commands(sub)
    args = parser.parse_args(argv)
    if getattr(args, "course", "") is None:
        args.course = course_default()
    with inert_output():
        return args.func(args)


@contextlib.contextmanager
def inert_output():
    """The command's stdout and stderr behind ``grader.plain.InertStream`` while it runs: whatever a message held
    (a name or a field a student wrote, a learner's error text), no escape sequence, carriage return or other control
    character reaches the terminal raw. Each record built from a student's input is also made one inert line where
    it is printed (``grader.plain.inert``)."""
    from grader.plain import InertStream
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(sys.stdout), InertStream(sys.stderr)
    try:
        yield
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            sys.stdout, sys.stderr = saved


if __name__ == "__main__":
    sys.exit(main())
