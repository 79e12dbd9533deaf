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
both, the ratio serial / parallel (the issue's aim on 2 cores: at least 1.8), the
core-seconds a submission costs in each (``CoreSeconds``: the CPU time, user and
system, of this process and of every process below it, sandboxes included; the
issue's aim: at most 5 for a sandboxed submission of 03), and how seconds per
submission change from the smallest class to the largest. Both runs must give
every submission the same score; the script exits 1 if not.
"""
import argparse
import ctypes
import os
import resource
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
    release = nbformat.read(cc.generate_release(assignment), as_version=4)
    crash = answered(release)
    crash.cells.insert(3, nbformat.v4.new_code_cell("import os\nos._exit(3)"))
    kinds = {"correct": answered(release), "blank": release, "bug": with_bug(release, assignment), "crash": crash}
    for i in range(n):
        kind = list(kinds)[i % 4]
        cc.submit(f"{kind}-{i:03d}", assignment, kinds[kind])
    return cc


class CoreSeconds:
    """The CPU seconds (user and system) of this process and of every process below it while a block ran.

    The kernel adds a process's CPU time to its parent's children's time when the parent reaps it, so this process
    becomes the reaper of every orphan below it (``PR_SET_CHILD_SUBREAPER``, Linux): a judge server or a grading
    worker's nbgrader process whose parent is gone, or a sandbox's inner bwrap whose outer one was killed, is reaped
    here, not by init, and counted. After the block it waits for them (those still ending, until none is left for a
    second) and reads its own and its children's time."""

    def __init__(self):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

    @staticmethod
    def _children():
        """{pid: command line} of this process's children (a reaped one is gone, a zombie still listed)."""
        me, found = str(os.getpid()), {}
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if entry.isdigit() and f.read().rsplit(")", 1)[1].split()[1] == me:
                        with open(f"/proc/{entry}/cmdline", "rb") as c:
                            found[int(entry)] = c.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except (OSError, IndexError):
                continue
        return found

    @staticmethod
    def _used():
        return sum(r.ru_utime + r.ru_stime for r in map(resource.getrusage,
                                                         (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

    def of(self, run, wait=60):
        """(what ``run()`` returned, the core-seconds it cost: this process's and everything below it)."""
        kept = set(self._children())  # (multiprocessing's resource tracker lives as long as this process)
        before = self._used()
        value = run()
        deadline, quiet = time.monotonic() + wait, 0
        while quiet < 10 and time.monotonic() < deadline:  # none left for a second: an orphan is reparented late
            left = [p for p, cmd in self._children().items() if p not in kept and "resource_tracker" not in cmd]
            for pid in left:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
            quiet = 0 if left else quiet + 1
            time.sleep(0.1)
        return value, self._used() - before


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
    cpu = CoreSeconds()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        for n in args.sizes:
            serial = make_class(os.path.join(tmp, f"serial-{n}"), a, n)
            t = time.perf_counter()
            _, c_serial = cpu.of(lambda: (serial.nbgrader("autograde", a, "--force"),
                                          serial.nbgrader("generate_feedback", a, "--force")))
            t_serial = time.perf_counter() - t

            parallel = make_class(os.path.join(tmp, f"parallel-{n}"), a, n)
            t = time.perf_counter()
            summary, c_parallel = cpu.of(lambda: grade_class(parallel.root, [a], jobs=args.jobs, env=parallel.env,
                                                             progress=False, release_first=False))
            t_parallel = time.perf_counter() - t
            same = scores_of(serial, a) == scores_of(parallel, a) and len(summary.graded) == n
            ok &= same
            rows.append((n, t_serial, t_parallel, c_serial, c_parallel, same))
            print(f"{n} submissions: serial {t_serial:.1f} s ({c_serial:.1f} core-s), parallel {t_parallel:.1f} s "
                  f"({c_parallel:.1f} core-s){'' if same else '  <-- SCORES DIFFER'}", flush=True)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\n{a}, {args.jobs} worker(s) on {os.cpu_count()} core(s); one torch thread per kernel; "
          f"load average at the end {load}")
    print(f"{'submissions':>11} {'serial s/sub':>13} {'parallel s/sub':>15} {'ratio':>7}   "
          f"{'serial core-s/sub':>17} {'parallel core-s/sub':>19}")
    for n, ts, tp, cs, cp, _ in rows:
        print(f"{n:>11} {ts / n:>13.2f} {tp / n:>15.2f} {ts / tp:>6.2f}x   {cs / n:>17.2f} {cp / n:>19.2f}")
        record("class grading", f"{n} submissions of {a}, {args.jobs} worker(s)", tp / n, ts / n, ts / tp,
               "s a submission", "serial nbgrader autograde's time / course grade's (parallel)",
               f"core-seconds a submission: parallel {cp / n:.2f}, serial {cs / n:.2f}")
        record("class grading, CPU", f"{n} submissions of {a}, {args.jobs} worker(s)", cp / n, cs / n, cp / cs,
               "core-s a submission", "course grade's core-seconds (parallel) / serial nbgrader autograde's",
               f"load average at the end: {load}")
    if len(rows) > 1:
        (n0, s0, p0, *_), (n1, s1, p1, *_) = rows[0], rows[-1]
        print(f"from {n0} to {n1} submissions, seconds per submission: serial {s0 / n0:.2f} -> {s1 / n1:.2f}, "
              f"parallel {p0 / n0:.2f} -> {p1 / n1:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
