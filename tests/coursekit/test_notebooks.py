"""The source notebooks: in sync with solutions/, clean, complete, and runnable top to bottom."""
import os
import re
import time

import nbformat
import pytest
from helpers import STATED_ACCURACY, run_outputs
from nbclient import NotebookClient

from coursekit.sync import assignment_of, drift, exercises_in, setup_source, source_notebooks
from learner.check import EXERCISES, cells_of

NOTEBOOKS = source_notebooks()
IDS = [os.path.basename(p) for p in NOTEBOOKS]


def test_there_are_the_course_notebooks_in_order():
    assert IDS == ["01_tokens.ipynb", "02_dot_products.ipynb", "03_softmax.ipynb", "04_masks_attention.ipynb",
                   "05_rnn.ipynb", "05b_rnn_attention.ipynb", "06_encoder.ipynb", "07_decoder.ipynb",
                   "08_encoder_decoder.ipynb", "09_kv_cache.ipynb", "10_capstone.ipynb"]


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
def test_grade_ids_are_unique_and_each_exercise_has_its_graded_cells(path):
    nb = nbformat.read(path, as_version=4)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata]
    assert len(ids) == len(set(ids))
    for name in exercises_in(path):
        graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
                  and c.metadata["nbgrader"]["grade_id"].rsplit("_", 1)[0] == name]
        assert [c.metadata["nbgrader"]["grade_id"] for c in graded] == [f"{name}_{c}" for c in cells_of(name)]
        assert all(c.metadata["nbgrader"]["locked"] and c.metadata["nbgrader"]["points"] > 0 for c in graded)
        assert all("### BEGIN HIDDEN TESTS" in c.source for c in graded)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_each_exercises_graded_cells_follow_its_answer_cell(path):
    """The check cells of an exercise sit right under its answer cell, in order (07's `rope_errors` once sat under
    `rope_attention`, whose name begins with `rope_`)."""
    nb = nbformat.read(path, as_version=4)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    for name in exercises_in(path):
        at = ids.index(name)
        want = [f"{name}_{c}" for c in cells_of(name)]
        assert ids[at + 1:at + 1 + len(want)] == want, (name, ids[at + 1:at + 1 + len(want)])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_setup_cell_is_the_first_code_cell_and_read_only(path):
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source == setup_source(assignment_of(path)) and first.metadata["nbgrader"]["locked"]


def _execute(path, tmp_path, timeout):
    """Run every cell of ``path`` in a real kernel; returns (notebook, all text printed, seconds)."""
    nb = nbformat.read(path, as_version=4)
    t = time.perf_counter()
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    seconds = time.perf_counter() - t
    errors, text = run_outputs(nb)
    assert not errors, errors[:2]
    print(f"{os.path.basename(path)} executed in {seconds:.1f} s")
    return nb, text, seconds


# The reduced run of every notebook (its training capped) is the reference's submission graded through the pipeline
# (tests/pipeline/test_pipeline.py), which runs every cell of the release answered with the reference. Here each
# source notebook runs in full, and reaches the figure it states (STATED_ACCURACY, from helpers) and what its prose
# says of its measurements (CLAIMS), read from the figures the run prints.
def _ratios(text, label):
    """{label: ratio} of the lines 'LABEL: at K tokens from the end the gradient is R times the last token's'."""
    return {" ".join(m.group(1).split()): float(m.group(2)) for m in
            re.finditer(r"^\s*((?:" + label + r")[^:]*): at \d+ tokens from the end the gradient is ([0-9.]+) times",
                        text, re.M)}


def _claims_05(text):
    """05: before training the gradient falls going back (a fraction of it is left 10 tokens back); after training
    the curve is flat or higher at the far end."""
    r = _ratios(text, r"before training|after training")
    assert r["before training"] < 0.5 and r["after training"] >= 0.9, r


def _claims_05b(text):
    """05b: before training the fixed context's gradient falls and the attention model's arrives at the same size;
    after training neither curve falls."""
    r = _ratios(text, r"before training,|after training,")
    assert r["before training, fixed context"] < 0.5 and 0.8 <= r["before training, attention"] <= 1.25, r
    assert r["after training, fixed context"] >= 0.9 and r["after training, attention"] >= 0.9, r


def _claims_06(text):
    """06: at depth 0 every probe is in the band of chance; after the blocks the bidirectional encoder tells the
    senses apart on both sides, the causal model when the clue comes first, and stays in the band when it comes
    after."""
    band = float(re.search(r"chance: 50% \+/- ([0-9.]+)%", text).group(1)) / 100
    acc = {m.group(1): [float(a) / 100 for a in re.findall(r"depth \d+:\s+([0-9.]+)%", m.group(2))]
           for m in re.finditer(r"^\s*(\w+, clue \w+):(.*)$", text, re.M)}
    assert set(acc) == {f"{m}, clue {s}" for m in ("bidirectional", "causal") for s in ("before", "after")}, acc
    assert all(abs(a[0] - 0.5) <= band for a in acc.values()), acc
    for name in ("bidirectional, clue before", "bidirectional, clue after", "causal, clue before"):
        assert acc[name][-1] >= 0.95, acc
    assert all(abs(a - 0.5) <= band for a in acc["causal, clue after"]), acc


def _claims_07(text):
    """07: RoPE labels the token two to the left at positions beyond the training texts; the learned table and the
    sinusoids do not (a guess is right 1 time in 16); without positions the model is the weakest where it trained."""
    got = {m.group(1): (float(m.group(2)) / 100, float(m.group(3)) / 100) for m in re.finditer(
        r"^\s*(\w+): positions seen in training\s+([0-9.]+)%, beyond them\s+([0-9.]+)%", text, re.M)}
    assert set(got) == {"none", "learned", "sinusoidal", "rope"}, got
    assert got["rope"][1] >= 0.95 and got["learned"][1] < 0.5 and got["sinusoidal"][1] < 0.5, got
    assert got["none"][0] < min(got[p][0] for p in ("learned", "sinusoidal", "rope")), got


CLAIMS = {"05_rnn.ipynb": _claims_05, "05b_rnn_attention.ipynb": _claims_05b, "06_encoder.ipynb": _claims_06,
          "07_decoder.ipynb": _claims_07}
IN_FULL = [p for p in NOTEBOOKS if os.path.basename(p) in set(STATED_ACCURACY) | set(CLAIMS)]


@pytest.mark.figures
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", IN_FULL, ids=[os.path.basename(p) for p in IN_FULL])
def test_trained_in_full_the_notebook_reaches_the_accuracy_it_states(path, tmp_path, monkeypatch):
    """`make test-figures`: every step, the notebooks' own thread count, the stated test exact match, and what the
    prose says of the measurements (CLAIMS)."""
    monkeypatch.delenv("COURSE_MAX_TRAIN_STEPS", raising=False)
    monkeypatch.delenv("COURSE_TRAIN_THREADS", raising=False)
    _, text, _ = _execute(path, tmp_path, timeout=3000)
    assert "COURSE_MAX_TRAIN_STEPS" not in text
    name = os.path.basename(path)
    if name in STATED_ACCURACY:
        floor = STATED_ACCURACY[name]
        measured = [float(m) / 100 for m in re.findall(r"test exact match:? ([0-9.]+)%", text)]
        assert measured and floor <= measured[-1] <= 1.0, f"test exact match {measured}: the notebook states {floor:.0%}"
    if name in CLAIMS:
        CLAIMS[name](text)


# ---------------------------------------------------------------- points by difficulty
def test_the_readme_points_table_is_the_course_tables_and_every_graded_cell_carries_it():
    """The course guide's table (docs/course.md) lists each exercise's points cell by cell as the course table sets them (d, ceil(d / 2)
    and 1 for the errors cell, for a difficulty d from 1 to 5), and every source notebook's graded cells are
    exactly the exercise's cells, carrying those points."""
    from learner.check import cells_of
    from learner.syllabus import NOTEBOOKS as TABLE
    from learner.syllabus import QUESTION_POINTS, cell_points
    readme = open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                               "docs", "course.md")).read()
    for nb in TABLE.values():
        labels = {name: "+".join(f"{cell_points(name, c)}{'e' if c == 'errors' else ''}" for c in cells_of(name))
                  for name in nb.exercises if name not in nb.questions}
        total = sum(cell_points(name, c) for name in nb.exercises for c in cells_of(name))
        asked = f"{len(nb.questions)} × {QUESTION_POINTS}"
        row = f"| `{nb.folder}` | " + ", ".join(f"`{n}` {label}" for n, label in labels.items()) + \
            f" | {asked} | {total} |"
        assert row in readme, f"docs/course.md's points table lacks the row\n{row}"
    assert all(e == (b + 1) // 2 and 1 <= b <= 5 for nb in TABLE.values() for b, e in nb.exercises.values())
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        cells = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"].get("points")
                 for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
        for name in exercises_in(path):
            mine = {gid: pts for gid, pts in cells.items() if gid.rsplit("_", 1)[0] == name}
            assert mine == {f"{name}_{c}": cell_points(name, c) for c in cells_of(name)}, (path, name, mine)


@pytest.mark.parametrize("difficulty", [0, 6, 2.5])
def test_a_difficulty_outside_1_to_5_is_refused_naming_it(difficulty):
    from learner.syllabus import _points
    with pytest.raises(ValueError, match="1 to 5"):
        _points(toy=difficulty)


# ---------------------------------------------------------------- the pictures of the architectures
DRAWN = {"05_rnn": {"two_lengths", "rnn_encoder_decoder"}, "05b_rnn_attention": {"rnn_encoder_decoder"},
         "06_encoder": {"transformer_block"}, "07_decoder": {"transformer_block", "rope_rotation"},
         "08_encoder_decoder": {"encoder_decoder"}, "09_kv_cache": {"kv_cache"},
         "10_capstone": {"rnn_encoder_decoder", "transformer_block", "encoder_decoder"}}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_architecture_is_drawn_by_a_read_only_cell_before_its_equations(path):
    """Each notebook that teaches an architecture draws it with learner.drawings in a read-only cell, placed before
    any display equation of its section (the section's heading and the picture come first), and its sizes come
    from the notebook's own variables (no drawing cell passes a size the model does not use: checked by reading
    the names the call passes)."""
    nb = nbformat.read(path, as_version=4)
    folder = assignment_of(path)
    cells = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code" and "drawings." in c.source]
    drawn = {re.search(r"drawings\.(\w+)\(", c.source).group(1) for _, c in cells}
    assert drawn == DRAWN.get(folder, set()), (folder, drawn)
    for i, cell in cells:
        md = cell.metadata.get("nbgrader", {})
        assert md.get("locked") and md.get("grade_id", "").startswith("draw_") and not md.get("grade"), (folder, i)
        heading = max((k for k in range(i) if nb.cells[k].cell_type == "markdown"
                       and re.search(r"^#{1,2} ", nb.cells[k].source, re.M)), default=0)
        before = [nb.cells[k].source for k in range(heading, i) if nb.cells[k].cell_type == "markdown"]
        assert not any("$$" in text for text in before), f"{folder}: an equation of its section precedes cell {i}"
        call = cell.source[cell.source.index("drawings." + re.search(r"drawings\.(\w+)\(", cell.source).group(1)):]
        typed = re.findall(r"\b(d_model|n_heads|d_ff|D|d_h|d_k|n_layers|n_enc_layers|n_dec_layers)=(\d+)", call)
        assert not typed, f"{folder}: cell {i} draws with typed sizes {typed}; pass the notebook's own (SIZES, D, d_h)"
        later = "".join(c.source for c in nb.cells[i + 1:] if c.cell_type == "code")
        if "SIZES = dict(" in cell.source:  # the sizes the picture shows are the ones the model is built with
            assert "**SIZES" in later, f"{folder}: no model after cell {i} is built with its SIZES"
