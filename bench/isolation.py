"""What isolation costs: real `nbgrader autograde` per notebook, with and without the sandbox, in the same run.

    python bench/isolation.py [--assignments 03_softmax 04_masks_attention ...] [--students 2]

For each assignment it releases the notebook, submits ``--students`` copies of
the reference answers, and grades them twice with real nbgrader and the
course's configuration, timing each `nbgrader autograde` call:

* baseline: ``COURSE_ISOLATION=none``: the kernel runs unsandboxed, and the
  trusted verdict's worker too (the verdict is still computed outside the
  kernel, the way grading worked before the sandbox, one re-check process);
* isolated: the default: the kernel and the worker in bubblewrap.

It prints seconds per submission for both and the ratio isolated / baseline
(the issue's budget: at most 1.30). Training is capped as for a class
(COURSE_MAX_TRAIN_STEPS=20), and each kernel uses one torch thread. Both runs
must give every submission full marks; the script exits 1 if not.
"""
import argparse
import os
import sys
import tempfile
import time

import nbformat

from coursekit.pipeline import CourseCopy, assignments
from results import record  # bench/results.py: what make bench writes
from coursekit.samples import answered, total_points


def grade_all(cc, assignment, students, isolated):
    cc.for_class_grading()
    if isolated:
        cc.env.pop("COURSE_ISOLATION", None)
    else:
        cc.env["COURSE_ISOLATION"] = "none"
    t = time.perf_counter()
    cc.nbgrader("autograde", assignment, "--force")
    seconds = time.perf_counter() - t
    scores = [sum(s for s, _ in cc.scores(student, assignment).values()) for student in students]
    return seconds, scores


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--assignments", nargs="*", default=None)
    parser.add_argument("--students", type=int, default=2)
    args = parser.parse_args(argv)
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="bench-isolation-") as tmp:
        for a in args.assignments or assignments():
            cc = CourseCopy(os.path.join(tmp, a))
            release = nbformat.read(cc.generate_release(a), as_version=4)
            students = [f"s{i:02d}" for i in range(args.students)]
            for student in students:
                cc.submit(student, a, answered(release))
            want = total_points(release)
            base, base_scores = grade_all(cc, a, students, isolated=False)
            iso, iso_scores = grade_all(cc, a, students, isolated=True)
            good = all(s == want for s in base_scores + iso_scores)
            ok &= good
            rows.append((a, base / len(students), iso / len(students), iso / base, good))
            print(f"{a}: baseline {base:.1f} s, isolated {iso:.1f} s for {len(students)} submissions"
                  f"{'' if good else '  <-- a score is not full marks'}", flush=True)
    print()
    print(f"{'assignment':<20} {'baseline s/sub':>15} {'isolated s/sub':>15} {'ratio':>7}")
    for a, b, i, r, good in rows:
        print(f"{a:<20} {b:>15.1f} {i:>15.1f} {r:>6.2f}x{'' if good else '  WRONG SCORES'}")
        record("grading sandbox", a, i, b, r, "s a submission",
               "grading in the sandbox / grading without it (COURSE_ISOLATION=none)", "" if good else "WRONG SCORES")
    total_b = sum(r[1] for r in rows)
    total_i = sum(r[2] for r in rows)
    print(f"{'all':<20} {total_b:>15.1f} {total_i:>15.1f} {total_i / total_b:>6.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
