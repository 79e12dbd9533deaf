"""What `make bench` measured, written where the docs show it: each benchmark adds its rows to the run's CSV
(``$BENCH_RESULTS``), and at the end this module writes ``docs/bench/latest.csv`` and ``docs/bench/latest.md`` with
the date and the machine (cores, CPU model, PyTorch and Python versions). Every ratio is against a baseline measured
in the same run, so a slower machine changes the times and barely the ratios.

    python bench/results.py RUN.csv     # writes docs/bench/latest.csv and docs/bench/latest.md
"""
import csv
import datetime
import os
import platform
import sys

FIELDS = ("benchmark", "case", "measured", "baseline", "ratio", "unit", "what the ratio is", "note")
DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "bench")


def record(benchmark, case, measured, baseline, ratio, unit, meaning, note=""):
    """One row of the run (nothing when ``$BENCH_RESULTS`` is unset: a benchmark run by hand only prints)."""
    path = os.environ.get("BENCH_RESULTS")
    if not path:
        return
    new = not os.path.exists(path)
    with open(path, "a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(FIELDS)
        w.writerow([benchmark, case, f"{measured:.6g}", f"{baseline:.6g}", f"{ratio:.4g}", unit, meaning, note])


def machine():
    """{what: value} of this machine, for the results' heading."""
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    try:
        import torch
        torch_version = torch.__version__
        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except ImportError:
        torch_version, gpu = "not installed", "none"
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cores": str(os.cpu_count()), "CPU": model, "GPU": gpu, "PyTorch": torch_version,
            "Python": platform.python_version(), "system": f"{platform.system()} {platform.release()}"}


def write(run_csv, docs=DOCS):
    with open(run_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    os.makedirs(docs, exist_ok=True)
    info = machine()
    with open(os.path.join(docs, "latest.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*FIELDS, *info])
        for row in rows:
            w.writerow([row[k] for k in FIELDS] + list(info.values()))
    lines = ["# The latest benchmark results", "",
             "Written by `make bench` (`bench/results.py`); every ratio is against a baseline measured in the same "
             "run. Older results are in git's history of this file.", "",
             *[f"- {k}: {v}" for k, v in info.items()], ""]
    for bench in dict.fromkeys(r["benchmark"] for r in rows):
        mine = [r for r in rows if r["benchmark"] == bench]
        lines += [f"## {bench}", "", f"ratio: {mine[0]['what the ratio is']}", "",
                  "| case | measured | baseline | ratio | note |", "|---|---|---|---|---|"]
        lines += [f"| {r['case']} | {r['measured']} {r['unit']} | {r['baseline']} {r['unit']} | {r['ratio']} | "
                  f"{r['note']} |" for r in mine]
        lines.append("")
    with open(os.path.join(docs, "latest.md"), "w") as f:
        f.write("\n".join(lines))
    return len(rows)


if __name__ == "__main__":
    n = write(sys.argv[1])
    print(f"{n} results written to {os.path.join(DOCS, 'latest.md')} and latest.csv")
