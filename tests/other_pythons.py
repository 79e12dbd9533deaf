"""The course on the other Pythons it supports: ``make test-pythons`` (not part of ``make test``).

    .venv/bin/python tests/other_pythons.py [--dir FOLDER] [--out FILE] VERSION ...

For each VERSION (3.12, 3.13) that this machine has (``python3.X`` on PATH, or pyenv's), in an environment of its
own outside the repository (FOLDER/VERSION): ``make setup`` as a person runs it (``PYTHON=`` that interpreter,
``VENV=`` that folder: the version check, the PyTorch switch, the pinned set), then the fast suite (``make
test-fast``'s selection), ``course demo 03_softmax`` (one notebook released and graded with real nbgrader in the
sandbox, each score checked) and the student bundle's test (tests/coursekit/pipeline/test_bundle.py: the bundle installed in a
fresh environment of that Python as its README.txt says, JupyterLab on it, a check graded in its kernel). A table of what passed, how long each step took and how big each environment is goes
to stdout and to FILE (with the date and the machine). Exit status 1 when a step failed on a Python the machine
has; a Python it lacks is named and skipped.
"""
import argparse
import datetime
import glob
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = "not pipeline and not browser and not figures and not experiment and not bench"  # as make test-fast


def interpreter(version):
    """This machine's Python ``version`` (``python3.12`` on PATH, else pyenv's newest 3.12.x) that runs, or None (a
    pyenv shim for a version not selected does not run)."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = sorted(glob.glob(os.path.join(pyenv, "versions", f"{version}.*", "bin", "python")),
                   key=lambda p: [int(x) for x in re.findall(r"\d+", p.split("/versions/")[1].split("/")[0])])
    for python in [shutil.which(f"python{version}")] + found[::-1]:
        if python and subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                     capture_output=True, text=True).stdout.strip() == version:
            return python
    return None


def size(path):
    out = subprocess.run(["du", "-sh", path], capture_output=True, text=True).stdout.split()
    return out[0] if out else "?"


def step(cmd, log, env=None, timeout=3600):
    """(passed, seconds, the last line that says how it went) of ``cmd``, its output appended to ``log``."""
    t0 = time.monotonic()
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env, timeout=timeout)
            text, ok = proc.stdout, proc.returncode == 0
        except subprocess.TimeoutExpired as exc:
            text, ok = (exc.stdout or b"").decode(errors="replace") + f"\n(stopped after {timeout} s)", False
        f.write(text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return ok, time.monotonic() - t0, lines


def one_python(version, folder, log):
    py = interpreter(version)
    if py is None:
        return {"python": version, "status": "not on this machine: skipped"}
    venv = os.path.join(folder, version)
    row = {"python": version, "interpreter": py}
    fresh = not os.path.exists(os.path.join(venv, ".installed-stamp"))
    ok, secs, lines = step(["make", "--no-print-directory", "setup", f"PYTHON={py}", f"VENV={venv}"], log)
    row.update(setup=("passed" if fresh else "already set up") if ok else "FAILED", setup_s=secs, size=size(venv))
    if not ok:
        return row
    bin_ = os.path.join(venv, "bin")
    row["torch"] = subprocess.run([os.path.join(bin_, "python"), "-c", "import torch; print(torch.__version__, "
                                   "'(CUDA %s build)' % torch.version.cuda if torch.version.cuda else '(CPU build)')"],
                                  capture_output=True, text=True, cwd="/").stdout.strip()
    env = dict(os.environ, PATH=bin_ + os.pathsep + os.environ.get("PATH", ""))
    step([os.path.join(bin_, "python"), "-m", "compileall", "-q", "coursekit", "grader", "solutions", "tests"], log)
    ok, secs, lines = step([os.path.join(bin_, "python"), "-m", "pytest", "-n", "2", "--dist", "loadgroup",
                            "--no-loadscope-reorder", "-q", "-m", FAST], log, env=env)
    summary = next((ln.strip("= ") for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "no summary")
    row.update(fast="passed" if ok else "FAILED", fast_s=secs, fast_summary=summary)
    ok, secs, lines = step([os.path.join(bin_, "course"), "demo", "--out", os.path.join(venv, "demo"),
                            "--no-progress", "03_softmax"], log, env=env)
    row.update(demo="passed" if ok and any(ln.startswith("demo passed") for ln in lines) else "FAILED", demo_s=secs)
    # the student bundle installed into a fresh environment of this Python, as its README.txt says
    ok, secs, lines = step([os.path.join(bin_, "python"), "-m", "pytest", "-p", "no:xdist", "-q",
                            "tests/coursekit/pipeline/test_bundle.py"], log, env=env)
    summary = next((ln.strip("= ") for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "no summary")
    row.update(bundle="passed" if ok else "FAILED", bundle_s=secs, bundle_summary=summary)
    return row


def table(rows):
    out = ["| Python | make setup | PyTorch | environment | fast suite | course demo 03_softmax | student bundle |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "status" in r:
            out.append(f"| {r['python']} | {r['status']} | | | | | |")
            continue
        fast = f"{r['fast']}: {r['fast_summary']} ({r['fast_s'] / 60:.1f} min)" if "fast" in r else "not run"
        demo = f"{r['demo']} ({r['demo_s']:.0f} s)" if "demo" in r else "not run"
        bundle = (f"{r['bundle']}: {r['bundle_summary']} ({r['bundle_s'] / 60:.1f} min)" if "bundle" in r
                  else "not run")
        out.append(f"| {r['python']} ({os.path.realpath(r['interpreter'])}) | {r['setup']} ({r['setup_s'] / 60:.1f} min)"
                   f" | {r.get('torch', '')} | {r['size']} | {fast} | {demo} | {bundle} |")
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="/tmp/attention-course-pythons", help="where the environments go (outside the "
                   "repository: PyPI's torch on Linux is the CUDA build, about 5 GB each)")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "bench", "pythons.md"))
    p.add_argument("versions", nargs="+")
    args = p.parse_args(argv)
    folder = os.path.abspath(args.dir)
    if os.path.commonpath([folder, ROOT]) == ROOT:
        p.error(f"--dir {folder} is inside the repository: give a folder outside it")
    os.makedirs(folder, exist_ok=True)
    log = os.path.join(folder, "log.txt")
    rows = []
    for version in args.versions:
        print(f"Python {version}: setting up and testing in {os.path.join(folder, version)} (log: {log})", flush=True)
        rows.append(one_python(version, folder, log))
    text = table(rows)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    header = (f"# The course on other Pythons\n\nWritten by `make test-pythons` on "
              f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}, {platform.platform()}, "
              f"{cpus} CPU(s) (the fast suite on 2 workers; other work may have shared the machine). Each environment "
              f"is what `make setup TORCH=cpu` installed there.\n\n")
    with open(args.out, "w") as f:
        f.write(header + text + "\n")
    print(text)
    failed = [r for r in rows if "FAILED" in (r.get("setup"), r.get("fast"), r.get("demo"), r.get("bundle"))]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
