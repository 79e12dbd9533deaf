"""Source notebooks: the cells nbgrader needs, generated from one place.

* The solution cell of exercise ``name`` is the reference function's source,
  taken from ``solutions/`` (the single source of truth). ``sync`` rewrites
  those cells; ``drift`` lists the cells that disagree.
* The graded test cells of each exercise are generated too, so every exercise
  is graded the same way: ``<name>_basic`` (basic + hidden-basic), ``<name>_edge``
  (edge + hidden) and, for an exercise that must refuse some input,
  ``<name>_errors`` (errors + hidden-errors), each with its points from the course
  table (``learner.check.cells_of`` says which an exercise has); the hidden regions never
  reach students. ``sync`` adds a graded cell an exercise gains and removes one it
  no longer has.
* The course table (``learner/syllabus.py``) says which notebooks exist and which
  exercises each holds, with their points. ``sync`` creates a notebook the table
  names but the course lacks (a title, the set-up cell, every exercise), and
  adds the cells of an exercise the table adds to an existing notebook (before
  its self-check questions; a question goes at the end, under
  ``QUESTIONS_HEADING``), so adding either is a table entry, its modules, and
  ``make sync``. The prose around new cells is the author's to write.
"""
import glob
import inspect
import os

import nbformat

from .paths import SOURCE_DIR

QUESTIONS_HEADING = "## Check your understanding"  # the section of self-check questions that ends a notebook
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

SETUP_SOURCE = '''\
# Set-up (read-only). It runs before any of your code, so the checks it imports
# are the course's own. Files placed beside this notebook cannot shadow packages.
import os, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]

import math
import torch
import torch.nn.functional as F

from learner.check import check
from learner import plots'''


def _nbgrader(grade_id, *, grade=False, solution=False, locked=False, points=None):
    md = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        md["points"] = points
    return {"nbgrader": md}


def reference_function(name):
    from grader.reference import resolve
    from learner.check import EXERCISES
    return resolve(EXERCISES[name].ref)


def solution_source(name):
    return inspect.getsource(reference_function(name)).rstrip("\n")


def graded_cell_sources(name):
    """{cell: source} of exercise ``name``'s graded cells (``learner.check.cells_of``): each checks its visible part,
    then, hidden from learners, its hidden part."""
    from learner.check import CELLS, cells_of
    return {cell: (f'check("{name}", {name}, part="{CELLS[cell][0]}")\n'
                   f'### BEGIN HIDDEN TESTS\n'
                   f'check("{name}", {name}, part="{CELLS[cell][1]}")\n'
                   f'### END HIDDEN TESTS') for cell in cells_of(name)}


def graded_cell(name, cell):
    """The graded test cell ``cell`` (basic, edge or errors) of exercise ``name``, with its points."""
    from learner.syllabus import cell_points
    c = nbformat.v4.new_code_cell(graded_cell_sources(name)[cell])
    c.metadata.update(_nbgrader(f"{name}_{cell}", grade=True, locked=True, points=cell_points(name, cell)))
    return c


# ------------------------------------------------------------------ authoring helpers
def markdown(text, grade_id=None):
    cell = nbformat.v4.new_markdown_cell(inspect.cleandoc(text))
    if grade_id:
        cell.metadata.update(_nbgrader(grade_id, locked=True))
    return cell


def code(source, grade_id=None):
    """A code cell the learner reads and runs (worked example, plot). Locked if given an id."""
    cell = nbformat.v4.new_code_cell(inspect.cleandoc(source))
    if grade_id:
        cell.metadata.update(_nbgrader(grade_id, locked=True))
    return cell


def setup_source(assignment=None):
    """The set-up cell of ``assignment``: the common set-up, then the imports of its ready-made parts (the course
    table's ``setup``, learner/syllabus.py). The set-up cell is also the prelude of the independent re-check, which
    drops imports of coursekit from learner cells."""
    from learner.syllabus import NOTEBOOKS
    nb = NOTEBOOKS.get(assignment)
    given = nb.setup if nb is not None else ""
    return SETUP_SOURCE + (f"\n\n# Ready-made parts from earlier notebooks\n{given}" if given else "")


def setup_cell(assignment=None):
    cell = nbformat.v4.new_code_cell(setup_source(assignment))
    cell.metadata.update(_nbgrader("setup", locked=True))
    return cell


def exercise(name):
    """The answer cell and the graded test cells of exercise ``name`` (points from the course table)."""
    from learner.check import cells_of
    answer = nbformat.v4.new_code_cell(solution_source(name))
    answer.metadata.update(_nbgrader(name, solution=True))
    return [answer] + [graded_cell(name, cell) for cell in cells_of(name)]


def exercise_cells(name):
    """A heading for the author to write under, then the exercise's three cells."""
    return [markdown(f"## Exercise: `{name}`\n\n(What the learner is asked to write: the author's prose.)"),
            *exercise(name)]


def new_notebook(cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


# ------------------------------------------------------------------ keeping them in sync
def assignment_of(path):
    """The assignment a notebook belongs to: the name of its folder."""
    return os.path.basename(os.path.dirname(os.path.abspath(path)))


def source_notebooks():
    return sorted(glob.glob(os.path.join(SOURCE_DIR, "*", "*.ipynb")))


def notebook_path(folder):
    return os.path.join(SOURCE_DIR, folder, folder + ".ipynb")


def missing():
    """What the course table names but the course lacks: [(folder, "the notebook") or (notebook, exercise)]."""
    from learner.syllabus import NOTEBOOKS
    out = []
    for folder, entry in NOTEBOOKS.items():
        path = notebook_path(folder)
        if not os.path.exists(path):
            out.append((folder, "the notebook"))
            continue
        present = set(exercises_in(path))
        out.extend((os.path.relpath(path, SOURCE_DIR), name) for name in entry.exercises if name not in present)
    return out


def create_missing():
    """Write every notebook of the course table that the course lacks, and append to each notebook the cells of
    the table's exercises it lacks. Returns the paths written."""
    from learner.syllabus import NOTEBOOKS
    written = []
    for folder, entry in NOTEBOOKS.items():
        path = notebook_path(folder)
        if not os.path.exists(path):
            title = folder.split("_", 1)[-1].replace("_", " ")
            nb = new_notebook([markdown(f"# {title[:1].upper()}{title[1:]}"), setup_cell(folder)])
            missing = list(entry.exercises)
        else:
            nb = nbformat.read(path, as_version=4)
            present = set(exercises_in(path))
            missing = [name for name in entry.exercises if name not in present]
        if not missing and os.path.exists(path):
            continue
        for name in missing:
            if name in entry.questions:  # at the end, under the questions' heading
                if not any(c.cell_type == "markdown" and c.source.startswith(QUESTIONS_HEADING) for c in nb.cells):
                    nb.cells.append(markdown(QUESTIONS_HEADING + "\n\n(The author's introduction to the questions.)"))
                nb.cells.extend([markdown("**Question.** (The question, for the author to write.)"),
                                 *exercise(name)])
            else:  # before the questions
                at = next((i for i, c in enumerate(nb.cells)
                           if c.cell_type == "markdown" and c.source.startswith(QUESTIONS_HEADING)), len(nb.cells))
                nb.cells[at:at] = exercise_cells(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        nbformat.write(nb, path)
        written.append(path)
    return written


def _expected_cells(nb, assignment=None):
    """{cell index: expected source} for every generated cell of ``nb``."""
    from learner.check import EXERCISES
    want = {}
    for i, cell in enumerate(nb.cells):
        md = cell.metadata.get("nbgrader", {})
        gid = md.get("grade_id", "")
        if gid == "setup":
            want[i] = setup_source(assignment)
        elif md.get("solution") and gid in EXERCISES:
            want[i] = solution_source(gid)
        elif md.get("grade") and gid.rsplit("_", 1)[0] in EXERCISES:
            name, kind = gid.rsplit("_", 1)
            want[i] = graded_cell_sources(name).get(kind, cell.source)
    return want


def _expected_points(nb):
    """{cell index: points} of every graded test cell of ``nb``, from the course table."""
    from learner.check import EXERCISES
    from learner.syllabus import cell_points
    want = {}
    for i, cell in enumerate(nb.cells):
        md = cell.metadata.get("nbgrader", {})
        if md.get("grade") and "_" in md.get("grade_id", ""):
            name, kind = md["grade_id"].rsplit("_", 1)
            if name in EXERCISES and kind in ("basic", "edge", "errors"):
                want[i] = cell_points(name, kind)
    return want


def _graded_ids(nb, name):
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade") and c.metadata["nbgrader"]["grade_id"].rsplit("_", 1)[0]
            == name]


def _cells_to_fix(nb):
    """(exercise, graded cell ids it lacks, graded cell ids it has but should not) for every exercise of ``nb``."""
    from learner.check import EXERCISES, cells_of
    out = []
    for cell in nb.cells:
        md = cell.metadata.get("nbgrader", {})
        if md.get("solution") and md.get("grade_id") in EXERCISES:
            name = md["grade_id"]
            want = [f"{name}_{c}" for c in cells_of(name)]
            have = _graded_ids(nb, name)
            if have != want:
                out.append((name, [w for w in want if w not in have], [h for h in have if h not in want]))
    return out


def _fix_cells(nb):
    """Give every exercise of ``nb`` exactly its graded cells (``learner.check.cells_of``), in order, right after its
    answer cell's last graded cell: a new one is added, one it no longer has is removed."""
    for name, lacking, extra in _cells_to_fix(nb):
        nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in extra]
        for gid in lacking:  # after the exercise's last cell (its answer cell, or its last graded cell)
            ids = [c.metadata.get("nbgrader", {}).get("grade_id") or "" for c in nb.cells]
            mine = {name} | {f"{name}_{kind}" for kind in ("basic", "edge", "errors")}  # not rope_attention's
            last = max(i for i, g in enumerate(ids) if g in mine)
            nb.cells.insert(last + 1, graded_cell(name, gid.rsplit("_", 1)[1]))


def drift(paths=None):
    """List of (notebook, grade_id) whose generated cells disagree with their source, and of what the course
    table names but the notebooks lack: (folder, "the notebook") or (notebook, exercise)."""
    out = missing() if paths is None else []
    for path in paths or source_notebooks():
        nb = nbformat.read(path, as_version=4)
        for i, src in _expected_cells(nb, assignment_of(path)).items():
            if nb.cells[i].source != src:
                out.append((os.path.relpath(path, SOURCE_DIR), nb.cells[i].metadata["nbgrader"]["grade_id"]))
        for name, lacking, extra in _cells_to_fix(nb):
            out += [(os.path.relpath(path, SOURCE_DIR), f"{gid} (missing)") for gid in lacking]
            out += [(os.path.relpath(path, SOURCE_DIR), f"{gid} (not a cell of {name} any more)") for gid in extra]
        for i, points in _expected_points(nb).items():
            if nb.cells[i].metadata["nbgrader"].get("points") != points:
                out.append((os.path.relpath(path, SOURCE_DIR), nb.cells[i].metadata["nbgrader"]["grade_id"]
                            + f" (points {nb.cells[i].metadata['nbgrader'].get('points')}, the table says {points})"))
    return out


def sync(paths=None):
    """Create what the course table adds (see ``create_missing``), then rewrite generated cells from
    ``solutions/`` and the grader, set each graded cell's points from the course table, and clear outputs.
    Returns the paths changed."""
    changed = create_missing() if paths is None else []
    for path in paths or source_notebooks():
        nb = nbformat.read(path, as_version=4)
        before = nbformat.writes(nb)
        _fix_cells(nb)
        for i, src in _expected_cells(nb, assignment_of(path)).items():
            nb.cells[i].source = src
        for i, points in _expected_points(nb).items():
            nb.cells[i].metadata["nbgrader"]["points"] = points
        strip_outputs(nb)
        if nbformat.writes(nb) != before:
            nbformat.write(nb, path)
            if path not in changed:
                changed.append(path)
    return changed


def strip_outputs(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def exercises_in(path):
    nb = nbformat.read(path, as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")]
