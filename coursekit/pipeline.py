"""Drive real nbgrader on a working copy of the course.

A ``CourseCopy`` is a folder holding ``nbgrader_config.py`` and ``source/``
copied from the project's ``course/``; every nbgrader command runs inside it,
with Jupyter's and IPython's own folders inside it too, so nothing is written
to ``$HOME`` or ``/srv`` and the project's ``course/`` stays clean.
"""
import csv
import os
import shutil
import subprocess
import sys
import time

import nbformat

from .paths import COURSE_DIR, SOURCE_DIR


def assignments():
    """Assignment ids, one per source folder: 01_tokens, 02_dot_products, ..."""
    return sorted(d for d in os.listdir(SOURCE_DIR) if os.path.isfile(os.path.join(SOURCE_DIR, d, d + ".ipynb")))


def nbgrader_env(root):
    env = dict(os.environ)
    # nbgrader runs `alembic` and Jupyter finds kernels through PATH: put this environment first
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"),
                     ("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython")):
        env[var] = os.path.join(root, ".jupyter", sub)
        os.makedirs(env[var], exist_ok=True)
    return env


DEFAULT_COURSE_ID = "attention-course"  # the project's course's id (course/nbgrader_config.py), for a folder that names none


def gradebook(course_root):
    """nbgrader's Gradebook on ``course_root``'s SQLite file (use it in a ``with``), with the course id that the
    folder's ``nbgrader_config.py`` names (the formgrader's, so both write one course's rows), or ``DEFAULT_COURSE_ID`` for a
    folder without one."""
    from nbgrader.api import Gradebook
    return Gradebook("sqlite:///" + os.path.join(course_root, "gradebook.db"), course_id=course_id(course_root))


def save_grades(nb, resources, parent=None):
    """A graded notebook's scores into the gradebook that ``resources["nbgrader"]["db_url"]`` names: nbgrader's own
    ``SaveAutoGrades`` (the score of every graded cell) then ``AssignLatePenalties``, as nbgrader's autograde runs
    them (configured by ``parent``, a preprocessor of that autograde, where there is one). The one writer of a graded
    submission's row, for `course grade` (``coursekit.grading.client.write_graded``) and the formgrader's Autograde on the
    hub (``coursekit.hub.service_client``'s GradedByHub). ``nb`` None: the submission could not be graded, and every
    cell of its row scores 0 (as nbgrader scores a missing notebook) and its late penalty is reset, so no earlier
    submission's scores or penalty stand for it; the row must exist (nbgrader's autograde and `course grade` make it
    first)."""
    from nbgrader.preprocessors import AssignLatePenalties, SaveAutoGrades
    if nb is None:
        info = resources["nbgrader"]
        with gradebook(os.path.dirname(info["db_url"][len("sqlite:///"):])) as gb:
            notebook = gb.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
            for grade in notebook.grades:
                grade.auto_score = 0
                grade.needs_manual_grade = False
            notebook.late_submission_penalty = None  # nothing to take from: no earlier grading's penalty stays
            gb.db.commit()
        return nb, resources
    # without a parent (`course grade`), the course folder's own configuration: the late policy's plugin it names
    settings = {"parent": parent} if parent is not None else \
        {"config": course_config(os.path.dirname(resources["nbgrader"]["db_url"][len("sqlite:///"):]))}
    for step in (SaveAutoGrades, AssignLatePenalties):
        nb, resources = step(**settings).preprocess(nb, resources)
    return nb, resources


def course_config(course_root):
    """The configuration that the course folder's ``nbgrader_config.py`` writes (read once per process and folder,
    again when the file changes)."""
    path = os.path.join(course_root, "nbgrader_config.py")
    stamp = os.stat(path).st_mtime_ns if os.path.isfile(path) else None
    key = (os.path.abspath(course_root), stamp)
    if key not in _CONFIGS:
        from traitlets.config import Config
        from traitlets.config.loader import PyFileConfigLoader
        _CONFIGS[key] = PyFileConfigLoader("nbgrader_config.py", path=course_root).load_config() if stamp else Config()
    return _CONFIGS[key]


_CONFIGS = {}


def course_id(course_root):
    """The course id of the folder ``course_root`` (``coursekit.exchange.course_id.course_id_of``), or ``DEFAULT_COURSE_ID`` where it
    has no ``nbgrader_config.py``."""
    if not os.path.isfile(os.path.join(course_root, "nbgrader_config.py")):
        return DEFAULT_COURSE_ID
    from .exchange.course_id import course_id_of
    return course_id_of(course_root)


# How a class is graded: training capped (no graded cell depends on a trained model) and one torch thread per
# kernel, so that several grading processes share the cores. `course grade` sets the cap (--train-steps); the
# benchmarks and the tests grade their copies with all of it.
CLASS_GRADING_ENV = {"COURSE_MAX_TRAIN_STEPS": "20", "COURSE_TRAIN_THREADS": "1", "COURSE_TORCH_THREADS": "1",
                     "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def nbgrader_api(root):
    """nbgrader's API on the course folder ``root``, configured by its ``nbgrader_config.py`` (every path in it is
    absolute, so the current folder does not matter)."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=root).load_config()
    from .formgrader_api import CourseAPI  # nbgrader's, with `course extend`'s rows alone counted as no submission
    return CourseAPI(coursedir=CourseDirectory(config=config, root=root), config=config)


def generate_release(root, assignment):
    """The student version of ``assignment`` in the course folder ``root``: nbgrader's generate_assignment, run in this
    process through its API (a new nbgrader process would import nbgrader, the course's plugin and torch again,
    about 4 s); returns the release's path."""
    outcome = nbgrader_api(root).generate_assignment(assignment, force=True)
    if not outcome["success"]:
        raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{outcome.get('log', '')[-3000:]}"
                           f"\n{outcome.get('error', '')[-3000:]}")
    return os.path.join(root, "release", assignment, assignment + ".ipynb")


class CourseCopy:
    def __init__(self, root, source_dir=SOURCE_DIR):
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        shutil.copy(os.path.join(COURSE_DIR, "nbgrader_config.py"), self.root)
        if os.path.exists(os.path.join(self.root, "source")):
            shutil.rmtree(os.path.join(self.root, "source"))
        shutil.copytree(source_dir, os.path.join(self.root, "source"),
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        self.env = nbgrader_env(self.root)

    def for_class_grading(self):
        """This copy's nbgrader runs graded as a class is (``CLASS_GRADING_ENV``); returns the copy."""
        self.env.update(CLASS_GRADING_ENV)
        return self

    @classmethod
    def existing(cls, root):
        """The copy already made at ``root`` (by this process or another): nothing is copied again."""
        cc = cls.__new__(cls)
        cc.root = os.path.abspath(root)
        cc.env = nbgrader_env(cc.root)
        return cc

    def nbgrader(self, *args, check=True):
        """Run ``nbgrader ARGS`` in the copy; returns the CompletedProcess."""
        proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-5000:]}")
        return proc

    # -------------------------------------------------------------- paths
    def release_path(self, assignment):
        return os.path.join(self.root, "release", assignment, assignment + ".ipynb")

    def source_path(self, assignment):
        return os.path.join(self.root, "source", assignment, assignment + ".ipynb")

    def submitted_path(self, student, assignment):
        return os.path.join(self.root, "submitted", student, assignment, assignment + ".ipynb")

    def autograded_path(self, student, assignment):
        return os.path.join(self.root, "autograded", student, assignment, assignment + ".ipynb")

    def feedback_path(self, student, assignment):
        return os.path.join(self.root, "feedback", student, assignment, assignment + ".html")

    # -------------------------------------------------------------- steps
    def generate_release(self, assignment):
        """The student version of ``assignment`` (``generate_release``, in this process); returns its path. Not
        `course release`, which gives a release to the students (``coursekit.exchange.commands.release``)."""
        return generate_release(self.root, assignment)

    def generate_releases(self):
        """Every assignment's student version (``generate_release``, in this process)."""
        for a in assignments():
            self.generate_release(a)

    def submit(self, student, assignment, nb, extra_files=None):
        """Place a submission: ``nb`` (a NotebookNode) plus optional {relative path: text} files."""
        folder = os.path.dirname(self.submitted_path(student, assignment))
        if os.path.exists(folder):
            shutil.rmtree(folder)
        os.makedirs(folder)
        nbformat.write(nb, self.submitted_path(student, assignment))
        for rel, text in (extra_files or {}).items():
            path = os.path.join(folder, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        with open(os.path.join(folder, "timestamp.txt"), "w") as f:
            f.write("2026-01-01 00:00:00.000000 UTC")

    def autograde(self, student, assignment):
        t = time.perf_counter()
        self.nbgrader("autograde", assignment, "--student", student, "--force")
        return time.perf_counter() - t

    def feedback(self, student, assignment):
        self.nbgrader("generate_feedback", assignment, "--student", student, "--force")
        return self.feedback_path(student, assignment)

    def gradebook(self):
        """nbgrader's Gradebook on this copy's SQLite file (use it in a ``with``)."""
        return gradebook(self.root)

    def scores(self, student, assignment):
        """{grade_id: (score, max_score)} from the SQLite gradebook."""
        with self.gradebook() as gb:
            sub = gb.find_submission_notebook(assignment, assignment, student)
            return {g.name: (g.score, g.max_score) for g in sub.grades}

    def export(self, path):
        """The gradebook written by nbgrader's CSV exporter (the plugin `nbgrader export` runs, run in this process)
        to ``path`` in the copy; returns its rows."""
        from nbgrader.plugins import CsvExportPlugin
        with self.gradebook() as gb:
            CsvExportPlugin(to=os.path.join(self.root, path)).export(gb)
        with open(os.path.join(self.root, path)) as f:
            return list(csv.DictReader(f))
