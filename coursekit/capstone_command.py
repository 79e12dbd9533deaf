"""`make capstone`: notebook 10's full experiment (``learner.capstone_runs``) with the reference's prefix-LM mask, from the
instructor's checkout; it prints the table by source length and the costs, and writes the results file.

    python -m coursekit.capstone_command [--steps N] [--jobs N] [--out capstone_results.json]
"""
import argparse
import os
import time

from learner.capstone_runs import KINDS, TASKS, Settings, bin_label, run


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=Settings.steps)
    parser.add_argument("--budget", type=int, default=Settings.budget)
    parser.add_argument("--task", default=Settings.task, choices=list(TASKS))
    parser.add_argument("--bin-width", type=int, default=Settings.bin_width)
    parser.add_argument("--out", default="capstone_results.json")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="runs trained at a time, one process and one torch thread each (default: one per core)")
    args = parser.parse_args()
    try:
        from solutions.capstone import prefix_lm_mask
    except ImportError:  # a student install has no solutions/: run notebook 10 with your own mask instead
        raise SystemExit("`make capstone` runs the reference's prefix-LM mask from the instructor's checkout "
                         "(solutions/); in a student install, run notebook 10, which uses yours")
    t0 = time.perf_counter()
    res = run(Settings(budget=args.budget, steps=args.steps, task=args.task, bin_width=args.bin_width),
              prefix_mask=prefix_lm_mask, results_path=args.out, jobs=args.jobs)
    print(f"\n{'run':30} {'seeds':>5} {'exact match':>12}  by source length (mean over the seeds)")
    for kind in res.runs:
        mean, low, high = res.exact_match(kind)
        print(f"{KINDS[kind]:30} {len(res.runs[kind]):5} {mean:12.1%}  "
              + "  ".join(f"{bin_label(b)}:{m:.0%}" for b, (m, _, _) in res.summary(kind).items()))
    print(f"\n{'run':30} {'CPU ms / step':>14} {'CPU ms / token':>15}")
    for kind, (step, token) in res.costs.items():
        print(f"{KINDS[kind]:30} {1000 * step:14.1f} {1000 * token:15.3f}")
    print(f"{time.perf_counter() - t0:.0f} s in all; results in {args.out}")




if __name__ == "__main__":
    main()
