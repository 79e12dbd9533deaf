"""The student bundle (`course bundle`): installed into a fresh virtual environment, it grades a learner's
visible checks and holds no answer, no hidden test and no sample bug."""
import glob
import inspect
import json
import os
import shutil
import subprocess
import sys

import nbformat
import pytest

from coursekit.bundle import VERSION_KEY, build, course_version
from coursekit.samples import answered
from grader import EXERCISES, cells_of, resolve

# one test worker runs them all, so the bundle and the student's virtual environment (module fixtures) are made once
pytestmark = [pytest.mark.pipeline, pytest.mark.xdist_group("bundle")]
NOTEBOOK = "03_softmax"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    return build(str(tmp_path_factory.mktemp("bundle") / "student-bundle"))


@pytest.fixture(scope="module")
def student_python(bundle, tmp_path_factory):
    """A fresh virtual environment with the bundle's package installed. Its third-party packages (torch, Jupyter)
    come from this environment's site-packages as a plain path: the course's own editable install is not seen."""
    venv = tmp_path_factory.mktemp("student") / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(os.path.join(p, "torch"))][0]
    with open(os.path.join(site, "course-dependencies.pth"), "w") as f:
        f.write(ours + "\n")
    package = shutil.copytree(os.path.join(bundle, "package"), venv.parent / "package")  # pip builds in place
    proc = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(package)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return python


def run_student(python, code, tmp_path):
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_the_bundle_holds_no_reference_no_hidden_test_and_no_sample_bug(bundle):
    files = [p for p in glob.glob(os.path.join(bundle, "**", "*"), recursive=True) if os.path.isfile(p)]
    assert not [p for p in files if "solutions" in p.split(os.sep) or "mistakes" in p.split(os.sep)]
    texts = {p: open(p, errors="replace").read() for p in files if not p.endswith(".pt")}
    for p, text in texts.items():
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", 'part="hidden', "part=\\\"hidden", "sample_bug="):
            assert marker not in text, f"{os.path.relpath(p, bundle)} holds {marker!r}"
    code = {p: "\n".join(line.strip() for line in text.replace("\\n", "\n").splitlines() if line.strip())
            for p, text in texts.items()}
    for name, ex in EXERCISES.items():  # not two lines of a reference answer in a row (but idioms), anywhere
        body = inspect.getsource(resolve(ex.ref)).split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        lines = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]
        checks = {i for i, line in enumerate(lines) if line.startswith(("raise ", "f\"", "\""))}  # input checks
        checks |= {i for i in range(len(lines) - 1) if lines[i].startswith("if ") and i + 1 in checks}
        lines = [line for i, line in enumerate(lines) if i not in checks]
        pairs = [pair for pair in ("\n".join(lines[i:i + 2]) for i in range(len(lines) - 1)) if len(pair) > 50]
        leaked = [(os.path.relpath(p, bundle), pair) for p, text in code.items() for pair in pairs if pair in text]
        assert not leaked, f"{name}: {leaked[:3]}"
    version = course_version()
    assert open(os.path.join(bundle, "VERSION")).read().strip() == version
    for path in glob.glob(os.path.join(bundle, "notebooks", "*", "*.ipynb")):
        assert nbformat.read(path, as_version=4).metadata[VERSION_KEY] == version


def test_a_student_install_cannot_import_the_reference(student_python, tmp_path):
    out = run_student(student_python, "import importlib.util, grader\n"
                                      "from grader import reference\n"
                                      "print(grader.__file__, importlib.util.find_spec('solutions'), "
                                      "reference.REFERENCE)", tmp_path)
    where, spec, ref = out.split()
    assert where.startswith(os.path.dirname(os.path.dirname(os.path.dirname(student_python))))
    assert spec == "None" and ref == "None"


EXECUTE = '''
import json, sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells.append(nbformat.v4.new_code_cell(
    "import grader, importlib.util; print('GRADER', grader.__file__, importlib.util.find_spec('solutions'))"))
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True).execute()
print(json.dumps([[o.get("text", "") + o.get("evalue", "") for o in c.outputs] for c in nb.cells
                  if c.cell_type == "code"]))
'''


def execute(python, nb, tmp_path):
    path = tmp_path / "notebook.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run([python, "-c", EXECUTE, str(path)], capture_output=True, text=True, cwd=tmp_path,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outputs = json.loads(proc.stdout.strip().splitlines()[-1])
    grader_line = "".join(outputs[-1])
    assert grader_line.endswith("None\n") and "/student" in grader_line, grader_line  # the student's grader ran
    return outputs


def test_a_released_notebook_passes_its_checks_with_correct_answers_and_fails_in_words_with_stubs(
        bundle, student_python, tmp_path):
    release = nbformat.read(os.path.join(bundle, "notebooks", NOTEBOOK, NOTEBOOK + ".ipynb"), as_version=4)
    n_checks = sum(len(cells_of(name)) for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK)  # a visible
    # part per graded cell
    right = execute(student_python, answered(release), tmp_path)
    text = "\n".join("".join(o) for o in right)
    assert text.count("PASSED") == n_checks and "FAILED" not in text, text[-2000:]
    stubs = execute(student_python, release, tmp_path)
    graded = [c for c in release.cells if c.cell_type == "code"]
    failed = [out for cell, out in zip(graded, stubs) if cell.metadata.get("nbgrader", {}).get("grade")]
    assert len(failed) == n_checks
    assert all("not implemented yet" in "".join(out) for out in failed), failed
