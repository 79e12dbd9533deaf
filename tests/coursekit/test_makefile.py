"""`make setup` on the machines people have: the Pythons it accepts, what it says to one it does not, and the
PyTorch switch. The Makefile's list of Pythons, pyproject.toml's requires-python and environment.yml's python say
the same (one source each tool reads, kept in step here)."""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from coursekit import ROOT


def _make_var(name):
    text = open(os.path.join(ROOT, "Makefile")).read()
    return re.search(rf"^{name}\s*:?=\s*(.*)$", text, re.M).group(1).split()


def _requires_python():
    """pyproject.toml's requires-python as the versions 3.x it admits (a >=3.a,<3.b range)."""
    import tomllib
    spec = tomllib.load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]["requires-python"]
    low, high = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", spec.replace(" ", "")).groups()
    return [f"3.{m}" for m in range(int(low), int(high))]


def test_the_makefile_pyproject_and_environment_yml_name_the_same_pythons():
    pythons = _make_var("PYTHONS")
    assert pythons == ["3.11", "3.12", "3.13"]
    assert _requires_python() == pythons
    env = open(os.path.join(ROOT, "environment.yml")).read()
    assert f"python>={pythons[0]},<3.{int(pythons[-1].split('.')[1]) + 1}" in env
    # the same pins and the same PyTorch build as make setup's default (TORCH=cpu)
    assert "-c constraints.txt" in env and f"--extra-index-url {_make_var('TORCH_CPU_INDEX')[0]}" in env
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in pythons  # this very suite runs on one of them
    from coursekit.bundle import TESTED_PYTHONS
    assert list(TESTED_PYTHONS) == pythons  # the student bundle's README names the same, each tested


def _setup(tmp_path, *args):
    venv = tmp_path / "venv"
    proc = subprocess.run(["make", "--no-print-directory", "setup", f"VENV={venv}", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    return proc, venv


def _older_python():
    """A Python older than 3.11 on this machine (python3.10 ... on PATH, or pyenv's), or None."""
    pyenv = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for python in ([shutil.which(f"python{v}") for v in ("3.10", "3.9", "3.8")]
                   + sorted(glob.glob(os.path.join(pyenv, "versions", "3.10.*", "bin", "python")))):
        if python and subprocess.run([python, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"],
                                     capture_output=True).returncode == 0:
            return python  # one that runs (a pyenv shim without its version does not) and is 3.10
    return None


@pytest.mark.parametrize("which", ["missing", "older"])
def test_an_unsupported_python_is_named_with_the_one_command_before_anything_is_installed(tmp_path, which):
    """A Python that is not there (a typo) or older than 3.11: make names it and its version, gives one command
    (another Python this machine has, or the package that brings one), and creates nothing."""
    python = str(tmp_path / "no-such-python") if which == "missing" else _older_python()
    if python is None:
        pytest.skip("no Python older than 3.11 on this machine")
    proc, venv = _setup(tmp_path, f"PYTHON={python}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("make setup: the course runs on Python 3.11 to 3.13; "), proc.stderr
    assert lines[0].endswith("is not there. Run" if which == "missing" else "is 3.10. Run"), proc.stderr
    command = lines[1].strip()
    assert command.startswith(("make setup PYTHON=", "sudo apt-get install -y python3.11-venv", "brew install",
                               "pyenv install")), proc.stderr
    if command.startswith("make setup PYTHON="):  # the Python it names is one the course runs on
        other = command.split("=", 1)[1]
        out = subprocess.run([other, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
        assert out in _make_var("PYTHONS")
    assert not venv.exists() and proc.stdout == ""


def test_an_unknown_torch_build_is_named_before_anything_is_installed(tmp_path):
    proc, venv = _setup(tmp_path, "TORCH=gpu")
    assert proc.returncode == 2 and not venv.exists()
    assert "TORCH=gpu? Run make setup TORCH=cpu (no GPU) or TORCH=cuda (an NVIDIA GPU)" in proc.stderr


def test_the_default_python_is_a_supported_one():
    """Without PYTHON=, make takes python3 when it is 3.11 to 3.13, else python3.13 ... or pyenv's."""
    proc = subprocess.run(["make", "--no-print-directory", "--eval", "show-python: ; @echo $(PYTHON)", "show-python"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    python = proc.stdout.strip()
    out = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                         capture_output=True, text=True).stdout.strip()
    assert out in _make_var("PYTHONS"), (python, out)


@pytest.mark.parametrize("version,ok", [("v18.20.4", False), ("v20.18.1", False), ("v20.19.0", True),
                                        ("v21.7.3", False), ("v22.11.0", False), ("v22.12.0", True), ("v24.1.0", True)])
def test_make_node_names_a_node_too_old_for_the_lab_plugins_builder(tmp_path, version, ok):
    """`make node` (and so `make hub` and `make test`) checks this machine's Node against what the builder needs
    (^20.19 or >=22.12) before npm runs, and says which Node to install; a fake `node` of each version is asked."""
    fake = tmp_path / "bin"
    fake.mkdir()
    # the real node runs the Makefile's own rule, with the version it reads replaced by the one under test
    (fake / "node").write_text(f"#!/bin/bash\nif [ \"$1\" = --version ]; then echo {version}; exit 0; fi\n"
                               f"exec {shutil.which('node')} -e \"${{2//process.versions.node/\\\"{version[1:]}\\\"}}\"\n")
    (fake / "node").chmod(0o755)
    (fake / "npm").write_text("#!/bin/sh\nexit 0\n")
    (fake / "npm").chmod(0o755)
    (tmp_path / "Makefile").write_text(f"include {ROOT}/Makefile\ntry-node:\n\t$(call check_node)\n\t@echo node ok\n")
    env = dict(os.environ, PATH=f"{fake}:{os.environ['PATH']}")
    run = subprocess.run(["make", "-s", "-f", str(tmp_path / "Makefile"), "try-node"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    if ok:
        assert run.returncode == 0 and "node ok" in run.stdout, run.stderr
    else:
        assert run.returncode != 0 and f"Node {version} is too old" in run.stderr and "20.19 or later" in run.stderr
