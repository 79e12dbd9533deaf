"""The benchmarks still run against the code they measure: each of `make bench`'s scripts on its smallest sizes,
its rows recorded and written as `make bench` writes them (into a temporary folder, not docs/bench). This asserts
that they run and what they record, never a time or a ratio: speed is measured by `make bench`, not by a test. The
grading benchmarks (isolation.py, grading.py: real classes graded) and training_load.py are only started with
``--help``, which imports everything they use. Cost: about 20 CPU-s (marked ``bench``: make test-fast leaves it out)."""
import csv
import os
import subprocess
import sys

import pytest

from coursekit import ROOT

pytestmark = pytest.mark.bench
BENCH = os.path.join(ROOT, "bench")

SMALLEST = {  # script: (arguments, the benchmark names its rows carry)
    "attention.py": (["--device", "cpu", "--repeat", "1"], ("attention (cpu)",)),
    "reference_vs_torch.py": (["--device", "cpu", "--repeat", "1"], ("transformer blocks (cpu)",)),
    "kv_cache.py": (["--device", "cpu", "--lengths", "4", "--repeat", "1", "--threads", "1"], ("KV cache (cpu)",)),
    "widgets.py": (["--repeat", "1"], ("widgets",)),
}


def run(script, args, results):
    env = {**os.environ, "BENCH_RESULTS": str(results), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, os.path.join(BENCH, script), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{script}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_every_script_of_make_bench_is_tested_here():
    makefile = open(os.path.join(ROOT, "Makefile")).read()
    scripts = {line.split("bench/")[1].split()[0] for line in makefile.splitlines()
               if "$(BIN)/python bench/" in line and "results.py" not in line}
    assert scripts == set(SMALLEST) | {"isolation.py", "grading.py"}, scripts


@pytest.mark.parametrize("script", sorted(SMALLEST))
def test_a_benchmark_runs_on_its_smallest_sizes_and_records_its_rows(script, tmp_path):
    args, names = SMALLEST[script]
    results = tmp_path / "run.csv"
    run(script, args, results)
    with open(results, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, f"{script} recorded nothing"
    for row in rows:
        assert row["benchmark"].startswith(names), row
        assert float(row["measured"]) > 0 and float(row["baseline"]) > 0 and float(row["ratio"]) > 0, row
    if script == "kv_cache.py":  # cached and recomputed generation must write the same tokens
        assert {row["note"] for row in rows} == {"same tokens"}, rows


@pytest.mark.parametrize("script", ["isolation.py", "grading.py", "training_load.py"])
def test_a_grading_benchmark_starts(script, tmp_path):
    assert "usage:" in run(script, ["--help"], tmp_path / "run.csv").stdout


def test_the_results_are_written_with_the_machine(tmp_path):
    results = tmp_path / "run.csv"
    run("kv_cache.py", SMALLEST["kv_cache.py"][0], results)
    sys.path.insert(0, BENCH)
    try:
        import results as written
    finally:
        sys.path.remove(BENCH)
    assert written.write(str(results), docs=str(tmp_path / "docs")) >= 1
    page = (tmp_path / "docs" / "latest.md").read_text()
    assert "- cores: " in page and "## KV cache (cpu)" in page and "| 4 new tokens |" in page, page
