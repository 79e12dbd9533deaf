"""Throughput of class grading: `course grade` (parallel, Dask) against serial `nbgrader autograde`, same run.

    python bench/grading.py [--assignment 03_softmax] [--sizes 10 40] [--jobs N]

For each size it generates a class of that many submissions of one notebook, a
quarter each correct, blank (the untouched release), with a known bug, and
crashing (an answer cell calls ``os._exit``), and grades it twice, each in a
fresh copy of the course with the course's configuration and isolation:

* serial: one `nbgrader autograde` for the whole class, then one
  `nbgrader generate_feedback` (nbgrader grades one submission after another);
* parallel: `grade_class` (what `course grade` runs) with ``--jobs`` workers on
  a local Dask cluster, which also writes the feedback.

Each kernel uses one torch thread and training is capped as for a class
(COURSE_MAX_TRAIN_STEPS=20) in both runs. It prints seconds per submission for
both, the ratio serial / parallel (the issue's aim on 2 cores: at least 1.8), and
how seconds per submission change from the smallest class to the largest. Both
runs must give every submission the same score; the script exits 1 if not.
"""
import argparse
import os
import sys
import tempfile
import time

import nbformat

from coursekit.grading import grade_class
from coursekit.pipeline import CourseCopy
from coursekit.samples import answered, with_bug
from results import record  # bench/results.py: what make bench writes


def make_class(root, assignment, n):
    cc = CourseCopy(root).for_class_grading()
    release = nbformat.read(cc.release(assignment), as_version=4)
    crash = answered(release)
    crash.cells.insert(3, nbformat.v4.new_code_cell("import os\nos._exit(3)"))
    kinds = {"correct": answered(release), "blank": release, "bug": with_bug(release, assignment), "crash": crash}
    for i in range(n):
        kind = list(kinds)[i % 4]
        cc.submit(f"{kind}-{i:03d}", assignment, kinds[kind])
    return cc


def scores_of(cc, assignment):
    with cc.gradebook() as gb:
        return {s.student.id: s.score for s in gb.find_assignment(assignment).submissions}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignment", default="03_softmax")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args(argv)
    a, rows, ok = args.assignment, [], True
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        for n in args.sizes:
            serial = make_class(os.path.join(tmp, f"serial-{n}"), a, n)
            t = time.perf_counter()
            serial.nbgrader("autograde", a, "--force")
            serial.nbgrader("generate_feedback", a, "--force")
            t_serial = time.perf_counter() - t

            parallel = make_class(os.path.join(tmp, f"parallel-{n}"), a, n)
            t = time.perf_counter()
            summary = grade_class(parallel.root, [a], jobs=args.jobs, env=parallel.env, progress=False,
                                  release_first=False)
            t_parallel = time.perf_counter() - t
            same = scores_of(serial, a) == scores_of(parallel, a) and len(summary.graded) == n
            ok &= same
            rows.append((n, t_serial, t_parallel, same))
            print(f"{n} submissions: serial {t_serial:.1f} s, parallel {t_parallel:.1f} s"
                  f"{'' if same else '  <-- SCORES DIFFER'}", flush=True)
    print(f"\n{a}, {args.jobs} worker(s) on {os.cpu_count()} core(s); one torch thread per kernel")
    print(f"{'submissions':>11} {'serial s/sub':>13} {'parallel s/sub':>15} {'ratio':>7}")
    for n, ts, tp, _ in rows:
        print(f"{n:>11} {ts / n:>13.2f} {tp / n:>15.2f} {ts / tp:>6.2f}x")
        record("class grading", f"{n} submissions of {a}, {args.jobs} worker(s)", tp / n, ts / n, ts / tp,
               "s a submission", "serial nbgrader autograde's time / course grade's (parallel)")
    if len(rows) > 1:
        (n0, s0, p0, _), (n1, s1, p1, _) = rows[0], rows[-1]
        print(f"from {n0} to {n1} submissions, seconds per submission: serial {s0 / n0:.2f} -> {s1 / n1:.2f}, "
              f"parallel {p0 / n0:.2f} -> {p1 / n1:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
