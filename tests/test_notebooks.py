"""The source notebooks: in sync with solutions/, clean, complete, and runnable top to bottom."""
import os
import re
import time

import nbformat
import pytest
from nbclient import NotebookClient

from coursekit.notebooks import assignment_of, drift, exercises_in, setup_source, source_notebooks
from grader import EXERCISES, PARTS

NOTEBOOKS = source_notebooks()
IDS = [os.path.basename(p) for p in NOTEBOOKS]


def test_there_are_the_course_notebooks_in_order():
    assert IDS == ["01_tokens.ipynb", "02_dot_products.ipynb", "03_softmax.ipynb", "04_masks_attention.ipynb",
                   "05_rnn.ipynb", "06_encoder.ipynb", "07_decoder.ipynb", "08_encoder_decoder.ipynb",
                   "09_kv_cache.ipynb"]


def test_answer_and_test_cells_equal_their_single_source():
    """Every answer cell is the reference function from solutions/, every test cell the generated one."""
    assert drift() == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in nb.cells if c.cell_type == "code")


def test_every_exercise_lives_in_exactly_one_notebook_its_registry_names():
    seen = {}
    for path in NOTEBOOKS:
        for name in exercises_in(path):
            assert name not in seen, f"{name} appears in {seen.get(name)} and {path}"
            seen[name] = os.path.basename(os.path.dirname(path))
    assert seen == {name: ex.notebook for name, ex in EXERCISES.items()}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_grade_ids_are_unique_and_each_exercise_has_two_graded_cells(path):
    nb = nbformat.read(path, as_version=4)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids))
    for name in exercises_in(path):
        graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                  and c.metadata["nbgrader"]["grade_id"].rsplit("_", 1)[0] == name]
        assert [c.metadata["nbgrader"]["grade_id"] for c in graded] == [f"{name}_basic", f"{name}_edge"]
        assert all(c.metadata["nbgrader"]["locked"] and c.metadata["nbgrader"]["points"] > 0 for c in graded)
        assert "### BEGIN HIDDEN TESTS" in graded[1].source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_setup_cell_is_the_first_code_cell_and_read_only(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == setup_source(assignment_of(path)) and first.metadata["nbgrader"]["locked"]


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_source_notebook_executes_top_to_bottom_with_the_reference(path, tmp_path):
    """Run every cell in a real kernel: no error, nothing on stderr, every check PASSED."""
    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    # training runs its full steps however busy the machine (notebook 05: 2500 steps, 40-50 s alone on 2 cores, over
    # 300 s beside the rest of the suite): the limit only catches a hang
    NotebookClient(nb, timeout=1500, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    seconds = time.perf_counter() - t
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr")]
    assert not errors, errors[:2]
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    n_checks = len(PARTS) * len(exercises_in(path))
    assert text.count("PASSED") == n_checks and "FAILED" not in text
    print(f"{os.path.basename(path)} executed in {seconds:.1f} s")
    if os.path.basename(path) in STATED_ACCURACY:
        floor = STATED_ACCURACY[os.path.basename(path)]
        measured = [float(m) / 100 for m in re.findall(r"test exact match:? ([0-9.]+)%", text)]
        assert measured and measured[-1] >= floor, f"test exact match {measured}: the notebook states {floor:.0%}"
    if os.path.basename(path) == "09_kv_cache.ipynb":  # generation with the cache writes what recomputing writes
        assert "the same translations as recomputing everything: True" in text


# The exact-match accuracy each translator's notebook states it reaches on the test dates
STATED_ACCURACY = {"05_rnn.ipynb": 0.95, "07_decoder.ipynb": 0.95, "08_encoder_decoder.ipynb": 0.99,
                   "09_kv_cache.ipynb": 0.95}
