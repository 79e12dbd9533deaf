"""The student bundle (`course bundle`): installed into a fresh virtual environment as its README says, it starts
JupyterLab on its notebooks, grades a learner's visible checks in that JupyterLab's kernel, leaves the bundle folder
as it was, and holds no answer, no hidden test and no sample bug.

Cost (one test worker, module fixtures; measured on 2 cores at load 9-11): the whole file 410-470 s of wall time,
~150 s of CPU. Of that, the student's environment (pip resolves about 110 packages and installs JupyterLab and the
rest from the package index; this machine's torch is reused) 260-330 s of wall time, ~80 s of CPU; the bundle
(every release) ~40 s; JupyterLab's start and 03_softmax answered in its kernel ~60 s; the stubs through nbclient
~30 s."""
import glob
import inspect
import json
import os
import shlex
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request

import nbformat
import pytest
from helpers import stop_group

from coursekit.bundle import TESTED_PYTHONS, VERSION_KEY, course_version, tested_pythons
from coursekit.samples import answered
from grader.reference import resolve
from learner.check import EXERCISES, cells_of

# one test worker runs them all, so the bundle and the student's virtual environment (module fixtures) are made once
pytestmark = [pytest.mark.pipeline, pytest.mark.xdist_group("bundle")]
NOTEBOOK = "03_softmax"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The bundle as the README makes it: `.venv/bin/course bundle --out student-bundle`."""
    folder = tmp_path_factory.mktemp("bundle")
    course = os.path.join(os.path.dirname(sys.executable), "course")
    proc = subprocess.run([course, "bundle", "--out", "student-bundle"], cwd=folder, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no solutions/, no hidden tests" in proc.stdout
    return str(folder / "student-bundle")


def readme_command(bundle, starts):
    """The command line of the bundle's README that starts with ``starts``, as a list of words."""
    lines = [line.strip() for line in open(os.path.join(bundle, "README.txt")) if line.strip().startswith(starts)]
    assert len(lines) == 1, lines
    return shlex.split(lines[0])


def listing(folder):
    return sorted((os.path.relpath(os.path.join(d, name), folder), os.path.getsize(os.path.join(d, name)))
                  for d, dirs, files in os.walk(folder) for name in dirs + files)


@pytest.fixture(scope="module")
def student(bundle, tmp_path_factory):
    """A fresh virtual environment, activated (its bin/ first on PATH), where the README's `pip install --upgrade
    pip` and `pip install ./package` ran in the bundle folder. Jupyter and every other dependency come from the
    package index through the package's dependencies. The README's step 2 (PyTorch's CPU build from PyTorch's own index, which this machine cannot
    reach) is stood in for by this machine's CPU build of torch 2.13.0: a folder holding only torch's own packages
    and its dist-info, put on the environment's path, so pip finds torch==2.13.0 installed and installs what torch
    needs. Returns (python, environment variables of the activated environment)."""
    root = tmp_path_factory.mktemp("student")
    venv = root / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    site = subprocess.run([python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True,
                          text=True, check=True).stdout.strip()
    import torch
    ours = os.path.dirname(os.path.dirname(torch.__file__))
    torch_only = root / "this-machines-torch"
    torch_only.mkdir()
    for name in ("torch", "torchgen", "functorch", *[os.path.basename(p) for p in
                                                     glob.glob(os.path.join(ours, "torch-2.13.0*.dist-info"))]):
        os.symlink(os.path.join(ours, name), torch_only / name)
    with open(os.path.join(site, "this-machines-torch.pth"), "w") as f:
        f.write(f"{torch_only}\n")
    env = {**os.environ, "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
           "HOME": str(root / "home"), "JUPYTER_CONFIG_DIR": str(root / "jupyter-config"),
           "JUPYTER_DATA_DIR": str(root / "jupyter-data"), "JUPYTER_RUNTIME_DIR": str(root / "jupyter-runtime"),
           "IPYTHONDIR": str(root / "ipython"), "MPLCONFIGDIR": str(root / "matplotlib"),
           # pip byte-compiles every module it installs (about 110 packages, 6,900 files) unless told not to; here
           # Python compiles what `jupyter lab` and the kernels import (about 1,600 files) and writes it, as a
           # learner's Python does. `PIP_COMPILE=0`, not `PIP_NO_COMPILE=1`: pip stores the truth value of
           # `PIP_NO_COMPILE` as its `compile` setting, so that one turns compiling on.
           "PIP_COMPILE": "0"}
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # set on some machines (this one); a learner's Python writes its bytecode
    (root / "home").mkdir()
    before = listing(bundle)
    upgrade = readme_command(bundle, "pip install --upgrade")
    assert upgrade == ["pip", "install", "--upgrade", "pip"]
    proc = subprocess.run(upgrade, cwd=bundle, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    command = readme_command(bundle, "pip install ./")
    assert command == ["pip", "install", "./package"]
    t = time.perf_counter()
    proc = subprocess.run(command, cwd=bundle, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"pip install ./package: {time.perf_counter() - t:.0f} s")
    assert listing(bundle) == before  # no build/, no egg-info: the bundle folder is as it was
    where = subprocess.run([python, "-c", "import jupyterlab, ipykernel, ipywidgets, torch\n"
                            "for m in (jupyterlab, ipykernel, ipywidgets, torch): print(m.__file__)"],
                           env=env, capture_output=True, text=True, check=True).stdout.split()
    assert [w.startswith(site) for w in where] == [True, True, True, False]  # Jupyter from the package's dependencies
    return python, env


@pytest.fixture(scope="module")
def student_python(student):
    return student[0]


def test_the_package_asks_for_what_a_learner_needs_and_the_readme_for_a_cpu_torch(bundle):
    project = tomllib.load(open(os.path.join(bundle, "package", "pyproject.toml"), "rb"))["project"]
    assert project["requires-python"] == ">=3.11"  # no upper cap: torch's own wheels say which Pythons
    names = {d.split("=")[0].split(">")[0].split("<")[0] for d in project["dependencies"]}
    assert {"torch", "jupyterlab", "ipykernel", "ipywidgets", "matplotlib", "numpy"} <= names
    readme = open(os.path.join(bundle, "README.txt")).read()
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in readme
    assert "conda create -n course -c conda-forge python=3.11 pytorch-cpu=2.13.0" in readme
    assert f"tested on {tested_pythons()})" in readme and "%d.%d" % sys.version_info[:2] in TESTED_PYTHONS
    assert "pulls the CPU build" not in readme


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
        assert "](../notation.md)" in nbformat.read(path, as_version=4).cells[0].source
    assert os.path.isfile(os.path.join(bundle, "notebooks", "notation.md"))  # the page every notebook links


def test_a_student_install_cannot_import_the_reference(student_python, tmp_path):
    """The student's install holds the learner's side alone: no reference, no grading machine, no instructor's tools,
    and the checks find no reference to run their hidden parts with."""
    out = run_student(student_python, "import importlib.util, learner.check\n"
                                      "from learner.check import hidden\n"
                                      "print(learner.check.__file__, *(importlib.util.find_spec(m) for m in "
                                      "('solutions', 'grader', 'coursekit')), hidden.REFERENCE)", tmp_path)
    where, *specs, ref = out.split()
    assert where.startswith(os.path.dirname(os.path.dirname(os.path.dirname(student_python))))
    assert specs == ["None", "None", "None"] and ref == "None"


IMPORTS = """
import importlib, json, sys
for module, name in json.loads(sys.argv[1]):
    found = importlib.import_module(module)
    if not hasattr(found, name):
        importlib.import_module(module + "." + name)
print("imported", len(json.loads(sys.argv[1])))
"""


def test_every_course_module_a_notebook_imports_is_in_the_student_install(bundle, student_python, tmp_path):
    """What each of the bundle's notebooks imports of the course's code (``from learner import capstone_runs``) imports
    in the student's environment, with no solutions/."""
    import ast
    wanted = set()
    for path in sorted(glob.glob(os.path.join(bundle, "notebooks", "*", "*.ipynb"))):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue  # a stub the learner completes, or IPython syntax
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("learner", "coursekit",
                                                                                               "grader", "solutions"):
                    wanted |= {(node.module, alias.name) for alias in node.names}
    assert ("learner", "capstone_runs") in wanted  # notebook 10's
    assert all(module.split(".")[0] == "learner" for module, _ in wanted), wanted  # the learner's side alone
    out = run_student(student_python, IMPORTS.replace("sys.argv[1]", repr(json.dumps(sorted(wanted)))), tmp_path)
    assert out.strip() == f"imported {len(wanted)}"


EXECUTE = """
import json, sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells.append(nbformat.v4.new_code_cell(
    "import learner.check, importlib.util; print('GRADER', learner.check.__file__, importlib.util.find_spec('solutions'))"))
NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True).execute()
print(json.dumps([[o.get("text", "") + o.get("evalue", "") for o in c.outputs] for c in nb.cells
                  if c.cell_type == "code"]))
"""

# Run a notebook's code cells, in order, in the kernel that a running JupyterLab starts for a notebook of its own
# (a session, as opening the notebook makes), over the kernel's websocket as the browser does; prints each cell's
# printed text and error values as JSON.
IN_LAB = """
import asyncio, datetime, json, sys, urllib.request, uuid
import nbformat
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

base, token, path, source = sys.argv[1:5]
headers = {"Authorization": "token " + token, "Content-Type": "application/json"}


def api(method, rel, body=None):
    request = urllib.request.Request(base + rel, method=method, headers=headers,
                                     data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(request, timeout=120) as response:
        text = response.read()
    return json.loads(text) if text else None


async def main():
    session = api("POST", "api/sessions", {"path": path, "type": "notebook", "name": "", "kernel": {"name": "python3"}})
    ws = await websocket_connect(HTTPRequest(base.replace("http", "ws", 1) + "api/kernels/" + session["kernel"]["id"]
                                             + "/channels", headers=headers))
    nb = nbformat.read(source, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import learner.check, importlib.util; print('GRADER', learner.check.__file__, importlib.util.find_spec('solutions'))"))
    outputs, sid = [], uuid.uuid4().hex
    for cell in [c for c in nb.cells if c.cell_type == "code"]:
        msg_id = uuid.uuid4().hex
        await ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "session": sid, "username": "learner", "msg_type": "execute_request",
                       "version": "5.3", "date": datetime.datetime.now(datetime.timezone.utc).isoformat()},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": cell.source, "silent": False, "store_history": True, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": False}}))
        texts = []
        while True:
            raw = await asyncio.wait_for(ws.read_message(), 600)
            if raw is None:
                raise SystemExit("the kernel's websocket closed")
            if isinstance(raw, bytes):
                continue
            msg = json.loads(raw)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                texts.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                texts.append(msg["content"]["evalue"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        outputs.append(texts)
    ws.close()
    api("DELETE", "api/sessions/" + session["id"])
    print(json.dumps(outputs))


asyncio.run(main())
"""


def _student_ran(outputs):
    grader_line = "".join(outputs[-1])
    assert grader_line.endswith("None\n") and "/student" in grader_line, grader_line  # the student's grader ran
    return outputs


def execute(student, nb, tmp_path):
    python, env = student
    path = tmp_path / "notebook.ipynb"
    nbformat.write(nb, path)
    proc = subprocess.run([python, "-c", EXECUTE, str(path)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return _student_ran(json.loads(proc.stdout.strip().splitlines()[-1]))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def n_checks():
    return sum(len(cells_of(name)) for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK)  # a visible part
    # per graded cell


def test_jupyter_lab_starts_on_the_notebooks_and_a_notebooks_checks_pass_in_its_kernel(bundle, student, tmp_path):
    """The README's `jupyter lab notebooks/`, in the activated environment, from the bundle folder: the server
    answers, serves the bundle's notebooks with the widgets' extension, and the kernel it starts for 03_softmax
    runs the notebook with the right answers: every visible check passes, with the student's grader."""
    python, env = student
    command = readme_command(bundle, "jupyter lab")
    assert command == ["jupyter", "lab", "notebooks/"]
    port, token = _free_port(), "bundle-test"
    os.makedirs(env["JUPYTER_CONFIG_DIR"], exist_ok=True)
    with open(os.path.join(env["JUPYTER_CONFIG_DIR"], "jupyter_server_config.json"), "w") as f:
        json.dump({"ServerApp": {"ip": "127.0.0.1", "port": port, "port_retries": 0, "open_browser": False,
                                 "allow_root": True}, "IdentityProvider": {"token": token}}, f)
    base = f"http://127.0.0.1:{port}/"
    lab = subprocess.Popen(command, cwd=bundle, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        deadline, t = time.time() + 300, time.perf_counter()
        while time.time() < deadline and lab.poll() is None:
            try:
                urllib.request.urlopen(f"{base}api/status?token={token}", timeout=5)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail(f"JupyterLab did not answer (exit {lab.poll()})")
        print(f"jupyter lab answered after {time.perf_counter() - t:.0f} s")
        contents = json.load(urllib.request.urlopen(f"{base}api/contents?token={token}", timeout=30))
        assert sorted(c["name"] for c in contents["content"]) == sorted(os.listdir(os.path.join(bundle, "notebooks")))
        page = urllib.request.urlopen(f"{base}lab?token={token}", timeout=30).read().decode()
        assert "@jupyter-widgets/jupyterlab-manager" in page  # ipywidgets' lab extension: widgets render
        right = tmp_path / "answered.ipynb"
        release = nbformat.read(os.path.join(bundle, "notebooks", NOTEBOOK, NOTEBOOK + ".ipynb"), as_version=4)
        nbformat.write(answered(release), right)
        proc = subprocess.run([python, "-c", IN_LAB, base, token, f"{NOTEBOOK}/{NOTEBOOK}.ipynb", str(right)],
                              capture_output=True, text=True, env=env, timeout=900)
    finally:
        stop_group(lab)  # the server and the kernel it started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    outputs = _student_ran(json.loads(proc.stdout.strip().splitlines()[-1]))
    text = "\n".join("".join(o) for o in outputs)
    assert text.count("PASSED") == n_checks() and "FAILED" not in text, text[-2000:]


def test_a_released_notebook_fails_in_words_with_its_stubs(bundle, student, tmp_path):
    release = nbformat.read(os.path.join(bundle, "notebooks", NOTEBOOK, NOTEBOOK + ".ipynb"), as_version=4)
    stubs = execute(student, release, tmp_path)
    graded = [c for c in release.cells if c.cell_type == "code"]
    failed = [out for cell, out in zip(graded, stubs) if cell.metadata.get("nbgrader", {}).get("grade")]
    assert len(failed) == n_checks()
    assert all("not implemented yet" in "".join(out) for out in failed), failed
