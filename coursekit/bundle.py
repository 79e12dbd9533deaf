"""The student bundle: what a class installs, with no answers in it.

``course bundle --out DIR`` writes

* ``DIR/notebooks/<assignment>/<assignment>.ipynb``: every released notebook
  (nbgrader's student version: stubs, visible checks, no hidden tests), each
  stamped with the course version in its metadata, and ``DIR/notebooks/notation.md``,
  the notation page every notebook links;
* ``DIR/package/``: an installable package, ``attention-course-student``: the learner's side, the package
  ``learner`` copied whole (the visible checks and their shipped expectations, the widgets, data, plots, the
  ready-made blocks and models, the syllabus, the student's side of the exchange);
* ``DIR/VERSION`` and ``DIR/README.txt``.

Nothing is filtered by file name and no source is rewritten: what only the instructor may have is on the other side
of the line, by where it stands (``coursekit/`` and ``grader/``: the ``course`` command and the grading machine;
``solutions/``: the reference, its known mistakes and the sample bugs), and a test reads the learner's side's import
graph so that no module of it reaches across.
"""
import os
import shutil
import tempfile

import nbformat

from learner.syllabus import NOTATION

from .paths import ROOT, SOURCE_DIR


VERSION_KEY = "course_version"

# what a student's install holds: the learner's side, the package ``learner`` copied whole (a test reads its import
# graph: it imports nothing of the instructor's side or the reference, so nothing needs leaving out)
LEARNER = "learner"


def course_version():
    """The course's version (pyproject.toml's), which the bundle and its notebooks record."""
    from learner.syllabus import version
    return version()


# The learner's package: what running the notebooks needs (JupyterLab, the kernel, ipywidgets, and what the notebooks
# and the learner-side modules import). Any Python that PyTorch 2.13.0 has wheels for, from 3.11 up (3.11-3.14);
# grading stays on the instructor's pinned 3.11. hatchling builds the wheel without writing into the bundle folder
# (setuptools leaves build/ and an egg-info in it), and takes every file of the package, data included.
PYPROJECT = '''[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "attention-course-student"
version = "{version}"
description = "The learner's side of the attention course: visible checks, widgets, data, ready-made blocks"
requires-python = ">=3.11"
dependencies = [
    "torch==2.13.0",
    "jupyterlab>=4.2,<5",
    "ipykernel>=6.29,<8",
    "ipywidgets>=8.1,<9",
    "matplotlib>=3.8",
    "numpy>=1.26",
    "tqdm>=4.66",
]

[tool.hatch.build.targets.wheel]
packages = ["learner"]
'''

# what the bundle's test installs it on (tests/coursekit/pipeline/test_bundle.py: 3.11 in make test, 3.12 and 3.13 in make
# test-pythons); the Makefile's PYTHONS, kept in step by tests/coursekit/test_makefile.py
TESTED_PYTHONS = ("3.11", "3.12", "3.13")


def tested_pythons():
    return ", ".join(TESTED_PYTHONS[:-1]) + " and " + TESTED_PYTHONS[-1]

README = '''The attention course, version {version}: the student bundle.

You need Python 3.11 or newer (any version PyTorch 2.13.0 has wheels for: 3.11 to 3.14;
tested on {tested}). In this folder:

1. An environment for the course:

       python3 -m venv course-env
       source course-env/bin/activate        (Windows: course-env\\Scripts\\activate)
       pip install --upgrade pip

2. PyTorch 2.13.0, CPU build. On Linux a plain `pip install torch==2.13.0` brings the
   CUDA build (several GB), so take it from PyTorch's CPU wheel index:

       pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

   (On macOS and Windows the plain `pip install torch==2.13.0` is already the CPU build.)
   With conda instead, steps 1 and 2 are one environment with conda-forge's CPU build:

       conda create -n course -c conda-forge python=3.11 pytorch-cpu=2.13.0
       conda activate course

3. The course's package, with JupyterLab, the kernel, ipywidgets and what the notebooks use:

       pip install ./package

4. JupyterLab on the notebooks (it prints a URL to open):

       jupyter lab notebooks/

Each notebook's read-only cells check your answers. The answers, the hidden checks
and the grading machinery are not in this bundle: your instructor grades with them.
'''


def copy_package(package_dir):
    """The learner's side, whole (no compiled files), into ``package_dir/learner``."""
    shutil.copytree(os.path.join(ROOT, LEARNER), os.path.join(package_dir, LEARNER),
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def build_bundle(out):
    """Write the student bundle into ``out`` (replacing what was there); returns ``out``."""
    from .pipeline import CourseCopy, assignments
    out = os.path.abspath(out)
    if os.path.exists(out):
        shutil.rmtree(out)
    version = course_version()
    with tempfile.TemporaryDirectory(prefix="course-bundle-") as tmp:
        cc = CourseCopy(tmp)
        cc.generate_releases()
        for a in assignments():
            nb = nbformat.read(cc.release_path(a), as_version=4)
            nb.metadata[VERSION_KEY] = version
            dest = os.path.join(out, "notebooks", a, a + ".ipynb")
            os.makedirs(os.path.dirname(dest))
            nbformat.write(nb, dest)
    shutil.copy(os.path.join(SOURCE_DIR, NOTATION), os.path.join(out, "notebooks", NOTATION))  # the notebooks link it
    package_dir = os.path.join(out, "package")
    copy_package(package_dir)
    with open(os.path.join(package_dir, "pyproject.toml"), "w") as f:
        f.write(PYPROJECT.format(version=version))
    with open(os.path.join(out, "VERSION"), "w") as f:
        f.write(version + "\n")
    with open(os.path.join(out, "README.txt"), "w") as f:
        f.write(README.format(version=version, tested=tested_pythons()))
    return out
