"""The real nbgrader pipeline: release, autograde, feedback, gradebook, on a temporary copy of the course.

Every test here starts real nbgrader commands and real Jupyter kernels and reads
the real SQLite gradebook. Autograde times are printed (run pytest with -s).
"""
import csv
import html
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from typing import NamedTuple

import nbformat
import pytest
from attacks import ALLOCATE_UNTIL_REFUSED, BODY_ATTACKS, FORK_UNTIL_REFUSED
from helpers import STATED_ACCURACY, run_outputs
from pipeline_helpers import ASSIGNMENTS, SECOND_BUG, UNTOUCHED, bug_students, grade, release_nb, total
from nbgrader.validator import Validator

from coursekit.sync import solution_source
from coursekit.pipeline import CLASS_GRADING_ENV
from coursekit.samples import MATHS_CELLS, ONE_BUG, ONE_BUG_COSTS, answered, edited_source, points_in_notebook, total_points
from learner.check import EXERCISES, parts_of
from learner.syllabus import version

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(3600)]  # the tamper class is graded in one fixture


# ---------------------------------------------------------------- what a release contains
@pytest.mark.parametrize("a", ASSIGNMENTS)
def test_release_has_no_solution_code_and_no_hidden_tests(course, a):
    release = release_nb(course, a)
    assert release.metadata["course_version"] == version()  # grading names a submission of another version
    text = open(course.release_path(a)).read()
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text and 'part=\\"hidden\\"' not in text
    for name in (n for n, ex in EXERCISES.items() if ex.notebook == a):
        body = solution_source(name).split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        leaked = [line.strip() for line in body.splitlines()
                  if len(line.strip()) > 20 and any(line.strip() in c.source for c in release.cells if c.cell_type == "code")]
        assert not leaked, f"{name}: reference lines in the release: {leaked[:3]}"
        answer = next(c for c in release.cells if c.metadata.get("nbgrader", {}).get("grade_id") == name)
        assert "raise NotImplementedError()" in answer.source and f"def {name}(" in answer.source


# One notebook through nbgrader's validator: that every part of every exercise fails on its released stub is
# asserted for all of them in-process (tests/learner/check/test_checks.py), and every test cell is pinned to its generated
# source (the drift test). 09 has ready-made models to train and grader-owned models the checks call back.
VALIDATED = "09_kv_cache"


@pytest.mark.parametrize("a", [VALIDATED])
def test_every_test_cell_of_the_release_fails_on_the_untouched_stubs(course, a, monkeypatch):
    """`nbgrader validate --invert`: no test cell passes before the learner writes anything (the ready-made models
    train a few steps only: no test cell depends on a trained model)."""
    monkeypatch.setenv("COURSE_MAX_TRAIN_STEPS", CLASS_GRADING_ENV["COURSE_MAX_TRAIN_STEPS"])
    v = Validator()
    v.invert = True
    assert v.validate(course.release_path(a)) == {}


# ---------------------------------------------------------------- scores
@pytest.mark.parametrize("a", ASSIGNMENTS)
def test_reference_answers_score_full_marks(course, samples, a):
    scores = samples(a)["sample-reference"]
    assert scores and all(s == m for s, m in scores.values()), scores
    assert total(scores) == total_points(release_nb(course, a))


@pytest.mark.parametrize("a", ASSIGNMENTS)
def test_the_reference_submission_runs_top_to_bottom_with_its_training_capped(course, samples, a):
    """The reduced run of every notebook: the reference's answers, executed cell by cell by grading's kernel with
    training capped (``CLASS_GRADING_ENV``), write no error and nothing on stderr; each graded cell's verdict is
    PASSED; the translators reach every training loop through the cap and print their test exact match; 08 and 09
    print that their cached decoding writes what recomputing writes; 10's capped run decodes a few test dates per
    kind greedily. (`make test-figures` runs each source notebook in full and checks the figure it states.)"""
    samples(a)
    nb = nbformat.read(course[a].autograded_path("sample-reference", a), as_version=4)
    errors, text = run_outputs(nb)
    assert not errors, errors[:2]
    n_checks = sum(len(parts_of(name)) for name, ex in EXERCISES.items() if ex.notebook == a)
    assert text.count("PASSED") == n_checks and "FAILED" not in text
    steps = CLASS_GRADING_ENV["COURSE_MAX_TRAIN_STEPS"]
    if f"{a}.ipynb" in STATED_ACCURACY:
        assert f"COURSE_MAX_TRAIN_STEPS={steps}: training {steps} of" in text
        assert re.findall(r"test exact match:? ([0-9.]+)%", text)
    if a == "09_kv_cache":
        assert "the same translations as recomputing everything: True" in text
    if a == "10_capstone":  # capped: the first seed of each kind, a few test dates decoded greedily
        from learner.capstone_runs import CAPPED_GREEDY_SAMPLE, KINDS
        agreed = re.search(r"greedy decoding agrees with the one-pass verdicts on (.*)", text).group(1)
        assert [int(n) for n in re.findall(r"/(\d+)", agreed)] == [CAPPED_GREEDY_SAMPLE] * len(KINDS), agreed
    if a == "08_encoder_decoder":
        assert "the same tokens: True" in text
        assert "max |run_decoder (your block) - run_decoder_kv (keys and values given)|" in text
    # the pictures of the architectures (learner.drawings) are drawn in the graded run and survive the feedback page
    # (one PNG a picture: 10 draws its two RNNs, and its two decoder-only runs, in one cell each, by a loop over two
    # kinds)
    cells = [c for c in nb.cells if c.cell_type == "code" and "= drawings." in c.source]
    pictures = [[o["data"]["image/png"] for o in c.outputs if "image/png" in o.get("data", {})] for c in cells]
    drawn = [len(re.findall(r"^for kind in \(\"\w+\", \"\w+\"\):", c.source, re.M)) + 1 for c in cells]
    assert [len(p) for p in pictures] == drawn, ([len(p) for p in pictures], drawn)
    if pictures:
        feedback = open(course[a].feedback_path("sample-reference", a)).read()
        assert all(png.strip()[:200] in feedback.replace("\n", "") for p in pictures for png in p)


@pytest.mark.parametrize("a", UNTOUCHED)
def test_untouched_release_scores_zero(samples, a):
    scores = samples(a)["sample-untouched"]
    assert total(scores) == 0, scores


def _check_single_bug(course, samples, a, student, name, phrase, costs=None, other=None):
    """The bug in ``name`` costs its basic and edge cells and nothing of another exercise; ``costs``: exactly those
    cells of ``name`` (the course table's ``sample_bug_costs``), None for a learner's own rewrite, which may also
    fail to refuse bad input (its errors cell). ``other``: the exercise of the other bug in the same submission,
    checked by its own test."""
    release = release_nb(course, a)
    scores = samples(a)[student]
    broken = {gid for gid in scores if gid.rsplit("_", 1)[0] == name and gid.rsplit("_", 1)[1] in (costs or MATHS_CELLS)}
    assert all(scores[g][0] == 0 for g in broken), scores
    mine = {g for g in scores if g.rsplit("_", 1)[0] == name}
    theirs = {g for g in scores if g.rsplit("_", 1)[0] == other}
    assert all(s == m for g, (s, m) in scores.items() if g not in (broken if costs else mine) | theirs), scores
    assert total(scores) == total_points(release) - sum(m - s for g, (s, m) in scores.items() if g in mine | theirs)
    feedback = html.unescape(open(course.feedback_path(student, a)).read())
    assert phrase in feedback, f"the feedback does not name the mistake ({phrase!r})"
    return feedback


@pytest.mark.parametrize("a", ASSIGNMENTS)
def test_a_known_bug_loses_exactly_its_exercise_and_feedback_names_it(course, samples, a):
    name, _, (old, new) = ONE_BUG[a]
    mistake = {"pad_batch": "tokens:pad_batch_mask_inverted", "scaled_scores": "dot_products:scaled_scores_no_sqrt",
               "softmax": "softmax:softmax_times_temperature", "masked_attention": "masks_attention:attention_no_sqrt",
               "rnn_encode": "rnn:rnn_encode_context_after_padding",
               "attention_decoder_step": "rnn_attention:step_output_ignores_context",
               "encoder_block": "encoder:encoder_block_no_attn_residual",
               "decoder_block": "decoder:decoder_block_no_causal_mask",
               "encdec_decoder_block": "encoder_decoder:encdec_no_causal_self",
               "decoder_block_step": "kv_cache:decoder_block_step_ignores_cache",
               "prefix_lm_mask": "capstone:prefix_lm_mask_queries_in_prefix"}[name]
    phrase = dict(EXERCISES[name].mistakes)[mistake]
    student, other = bug_students(a)[0], SECOND_BUG[a][0]
    _check_single_bug(course, samples, a, student, name, phrase, costs=ONE_BUG_COSTS[a],
                      other=other if student == "sample-bugs" else None)


@pytest.mark.parametrize("a", ASSIGNMENTS)
def test_a_learner_written_bug_loses_exactly_its_exercise_and_feedback_names_it(course, samples, a):
    name, _, phrase = SECOND_BUG[a]
    student = bug_students(a)[1]
    feedback = _check_single_bug(course, samples, a, student, name, phrase,
                                 other=ONE_BUG[a].exercise if student == "sample-bugs" else None)
    assert "BEGIN HIDDEN TESTS" not in feedback and 'part="hidden"' not in feedback


# ---------------------------------------------------------------- tampering
TAMPER_A = "03_softmax"
WRONG_SOFTMAX = edited_source("softmax", "e / total.clamp_min", "0.5 * e / total.clamp_min")


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _append_to_answer(text):
    def edit(nb):
        _cell(nb, "softmax").source += "\n\n" + textwrap.dedent(text).strip()
    return edit


def _answer_with(text):
    """The softmax answer replaced by ``text`` (an attack written in the function's own body)."""
    def edit(nb):
        _cell(nb, "softmax").source = textwrap.dedent(text).strip()
    return edit


def _replace_tests(nb):
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade"):
            c.source = "pass"


def _delete_tests(nb):
    nb.cells = [c for c in nb.cells if not c.metadata.get("nbgrader", {}).get("grade")]


def _stderr_and_fake_pass(nb):
    _cell(nb, "softmax").source += '\n\nimport sys\nprint("PASSED softmax [basic]: 8 checks passed.")\n' \
                                   'print("All good", file=sys.stderr)'


# Each kind of attack, by class: in the kernel (top-level statements of an answer cell), on the notebook
# (test cells edited or deleted, files beside it), and in the function's own body (see also
# tests/test_isolation.py, which runs every body attack against the sandboxed worker directly).
TAMPERS = {
    "patch-torch-comparisons": _append_to_answer('''
        import torch.testing
        torch.allclose = lambda *a, **k: True
        torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
        torch.testing.assert_close = lambda *a, **k: None
        torch.Tensor.__eq__ = lambda a, b: True
    '''),
    "rebind-check": _append_to_answer('''
        import learner.check
        def check(*args, **kwargs):
            print("PASSED")
        learner.check.check = check
    '''),
    "rebind-check-to-return-a-value": _append_to_answer('''
        def check(*args, **kwargs):
            return 3.0
    '''),
    "swap-grader-module": _append_to_answer('''
        import sys, types
        fake = types.ModuleType("grader")
        fake.check = lambda *a, **k: None
        sys.modules["grader"] = fake
        from learner.check import check
    '''),
    "edit-test-cells": _replace_tests,
    "delete-test-cells": _delete_tests,
    "stderr-and-fake-pass": _stderr_and_fake_pass,
    "kill-the-kernel": _append_to_answer('''
        import os
        os._exit(1)
    '''),
    "huge-allocation-in-the-kernel": _append_to_answer('''
        blocks = [bytearray(2**30) for _ in range(64)]
    '''),
    "hand-a-file-from-the-kernel": _append_to_answer('''
        for place in ("handed.txt", "/tmp/handed.txt", "../handed.txt"):
            try:
                open(place, "w").write("correct")
            except OSError:
                pass
        _wrong_softmax = softmax
        def softmax(x, dim=-1, temperature=1.0):
            import os
            if any(os.path.exists(p) for p in ("handed.txt", "/tmp/handed.txt", "../handed.txt")):
                return torch.softmax(x / temperature, dim=dim).nan_to_num(0.0)
            return x
    '''),
    "leak-the-source-and-gradebook": _append_to_answer('''
        import glob
        for pattern in ("../../../source/*/*.ipynb", "../../../gradebook.db", "../../../*/*/*/*.ipynb",
                        "COURSE_ROOT/source/*/*.ipynb", "COURSE_ROOT/gradebook.db", "COURSE_ROOT/*/*/*/*.ipynb"):
            for path in glob.glob(pattern):
                print(open(path, errors="replace").read())
    '''),
}
# The attacks written in a function's own body go through nbgrader when the pipeline records something of its own
# for them (a fault, a blocked attempt, the honest functions around them still earning their points); the others
# are judged exactly as these are (the same sandboxed worker and trusted check, every part of the exercise) in
# tests/grader/test_isolation.py, without a kernel and nbgrader around them. (A loop with the alarm turned off is
# stopped there from outside; the time-out fault it leaves is the one `tamper-loop` leaves here.)
BODY_ATTACKS_THROUGH_NBGRADER = ("kill-the-worker", "allocate-without-limit", "read-the-source-notebook",
                                 "exec-the-reference-source", "reach-the-network", "mutate-the-inputs")
TAMPERS.update({kind: _answer_with(BODY_ATTACKS[kind]) for kind in BODY_ATTACKS_THROUGH_NBGRADER})
SHADOW_FILES = {"grader.py": "def check(*args, **kwargs):\n    print('PASSED')\n",
                "grader/__init__.py": "def check(*args, **kwargs):\n    print('PASSED')\n",
                "torch/__init__.py": "x = 1\n"}


class Tampered(NamedTuple):
    courses: dict        # {student: the course copy (03_softmax released) it was graded in}
    scores: dict         # {student: {grade_id: (score, max score)}}
    faults: dict         # {student: [(kind, text), ...]} from grading_log.jsonl


# the class is graded in this many parts, one per test worker (each grades its own first, then reads the others')
TAMPER_PARTS = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def tamper_submissions(root):
    """{student: (notebook, extra files)}: the honest submission beneath every attack (all right but a wrong
    softmax), every attack on it, and answers that import the reference or never return."""
    release = nbformat.read(os.path.join(root, "release", TAMPER_A, TAMPER_A + ".ipynb"), as_version=4)
    honest = answered(release, {"softmax": WRONG_SOFTMAX})
    loop = edited_source("sequence_log_prob", "    log_p = torch.log_softmax",
                         "    while True:\n        pass\n    log_p = torch.log_softmax")
    submissions = {"tamper-honest": (honest, None), "tamper-shadow-files": (honest, SHADOW_FILES),
                   "tamper-loop": (answered(release, {"sequence_log_prob": loop}), None),
                   "tamper-import-reference": (answered(release, {
                       "softmax": "from solutions.softmax import softmax\nimport solutions\n"}), None)}
    another_version = nbformat.reads(nbformat.writes(honest), as_version=4)
    another_version.metadata["course_version"] = "0.0.1"  # a release of an older course
    submissions["tamper-made-with-another-version"] = (another_version, None)
    solutions_dir = os.path.dirname(importlib.util.find_spec("solutions").origin)
    for kind, edit in TAMPERS.items():
        nb = nbformat.reads(nbformat.writes(honest), as_version=4)
        edit(nb)
        for cell in nb.cells:  # the attacks know where the course and the reference are
            cell.source = cell.source.replace("COURSE_ROOT", root).replace("SOLUTIONS_DIR", solutions_dir)
        submissions[f"tamper-{kind}"] = (nb, None)
    return submissions


# attacks that write pages up to the memory limit: graded one after the other, in one part (see `build` below)
MEMORY_HUNGRY = ("tamper-allocate-without-limit", "tamper-huge-allocation-in-the-kernel")


def tamper_part(everyone, part):
    """The students of part ``part``: the memory-hungry ones all in the last part, each other to the smallest part."""
    parts = [[] for _ in range(TAMPER_PARTS)]
    parts[-1] += [s for s in MEMORY_HUNGRY if s in everyone]
    for student in sorted(set(everyone) - set(MEMORY_HUNGRY)):
        min(parts, key=len).append(student)
    return parts[part]


@pytest.fixture(scope="session")
def tampered(course, cluster):
    """The tamper class, graded once per test run in TAMPER_PARTS parts, each by one call of the parallel grader
    (real nbgrader in the sandbox, feedback included) in a course copy of its own. Each xdist worker starts with a
    different part and then reads the others' results, so two workers grade the class side by side."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:] or 0)
    courses, scores, faults = {}, {}, {}
    for k in range(TAMPER_PARTS):
        part = (k + worker) % TAMPER_PARTS
        cc = course.copy(f"course-tamper-{part}", TAMPER_A)

        def build(cc=cc, part=part):
            everyone = tamper_submissions(cc.root)
            mine = tamper_part(everyone, part)
            for student in mine:
                cc.submit(student, TAMPER_A, *everyone[student])
            # notebook 03's cells take under a second each on a quiet machine (a few where 5 test workers share 2
            # cores), and each call of its functions milliseconds: a cell that hangs (a demo calling a looping
            # answer) is stopped at 20 s rather than the course's 120 s, and a looping call in the judge after 4 s of
            # computing rather than 10. The kernel and the worker get 2.5 GB (they use
            # under 1 GB): an allocation attack zeroes gigabytes of pages before it reaches the limit, which took
            # 2 s alone but 12-29 s for three at 4 GB side by side, past both limits on time (at 2.5 GB: 1 GB each).
            with open(os.path.join(cc.root, "nbgrader_config.py"), "a") as f:
                f.write("\nc.SandboxedExecute.timeout = 20\n")
            cc.env["COURSE_CALL_TIME_LIMIT"] = "4"
            cc.env["COURSE_SANDBOX_MEMORY_MB"] = "2560"
            grade(cc, TAMPER_A, mine, cluster)
            log = os.path.join(cc.root, "grading_log.jsonl")
            records = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
            return {"scores": {student: cc.scores(student, TAMPER_A) for student in mine},
                    "faults": {r["student"]: r["faults"] for r in records}}
        data = course.once(f"tamper-graded-{part}", build)
        courses.update({student: cc for student in data["scores"]})
        scores.update(data["scores"])
        faults.update(data["faults"])
    return Tampered(courses, scores, faults)


def test_the_honest_wrong_answer_loses_exactly_softmax(tampered):
    scores = tampered.scores
    honest = scores["tamper-honest"]
    assert honest["softmax_basic"][0] == 0 and honest["softmax_edge"][0] == 0
    assert all(s == m for g, (s, m) in honest.items() if g not in ("softmax_basic", "softmax_edge")), honest


@pytest.mark.parametrize("kind", list(TAMPERS) + ["shadow-files", "import-reference"])
def test_tampering_scores_no_more_than_the_honest_wrong_answer(tampered, kind):
    scores = tampered.scores
    got, honest = scores[f"tamper-{kind}"], scores["tamper-honest"]
    assert got["softmax_basic"][0] == 0 and got["softmax_edge"][0] == 0, got
    assert total(got) <= total(honest), (got, honest)


@pytest.mark.parametrize("kind", ["kill-the-kernel", "huge-allocation-in-the-kernel", "hand-a-file-from-the-kernel",
                                  "patch-torch-comparisons", "mutate-the-inputs"])
def test_an_attack_around_honest_functions_still_grades_them(tampered, kind):
    """What the kernel does around the learner's definitions costs nothing that the definitions earn."""
    scores = tampered.scores
    got = scores[f"tamper-{kind}"]
    assert all(s == m for g, (s, m) in got.items() if not g.startswith("softmax_")), got


@pytest.mark.parametrize("kind,fault,words", [
    ("kill-the-kernel", "kernel", "the kernel died"),
    ("kill-the-worker", "crash", "exited with code 0"),
    ("allocate-without-limit", "memory", "reached the sandbox's limit on memory"),
    ("huge-allocation-in-the-kernel", "memory", "MemoryError"),
    ("loop", "timeout", "did not finish within"),
    ("read-the-source-notebook", "blocked", "read-outside: /source/03_softmax/03_softmax.ipynb"),
    ("exec-the-reference-source", "blocked", "solutions/softmax.py"),
    ("reach-the-network", "blocked", "network: ('127.0.0.1', 8888)"),
    ("leak-the-source-and-gradebook", "blocked", "read-outside"),
    ("made-with-another-version", "version", "released with course version 0.0.1"),
])
def test_faults_and_blocked_attempts_are_recorded_with_a_reason(tampered, kind, fault, words):
    """A dead kernel or worker, a time-out, a read outside the submission, a network call, a release of another
    course version: each is a line of grading_log.jsonl beside the gradebook, for the instructor."""
    faults = tampered.faults
    mine = faults.get(f"tamper-{kind}", [])
    assert any(k == fault and words in text for k, text in mine), mine
    assert "tamper-honest" not in faults


def test_feedback_holds_neither_the_source_nor_the_gradebook(tampered):
    """An answer cell that prints every notebook and gradebook it can find prints nothing of the course's."""
    student = "tamper-leak-the-source-and-gradebook"
    nb = nbformat.read(tampered.courses[student].autograded_path(student, TAMPER_A), as_version=4)
    printed = "".join(o.get("text", "") for o in _cell(nb, "softmax").outputs if o.get("output_type") == "stream")
    assert printed == "", printed[:500]  # not one file of the course was found to print
    feedback = html.unescape(open(tampered.courses[student].feedback_path(student, TAMPER_A)).read())
    assert "HIDDEN TESTS" not in feedback and 'part="hidden"' not in feedback
    assert "SQLite format" not in feedback and "tamper-honest" not in feedback


def test_a_value_returned_by_a_rebound_check_is_not_read_as_credit(tampered):
    """nbgrader reads an execute_result as partial credit: graded cells keep only the trusted verdict."""
    student = "tamper-rebind-check-to-return-a-value"
    nb = nbformat.read(tampered.courses[student].autograded_path(student, TAMPER_A), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            assert all(o["output_type"] != "execute_result" for o in cell.outputs), cell.outputs


def test_an_infinite_loop_costs_only_its_exercise(tampered):
    """A learner function that never returns is stopped; every other exercise is still graded."""
    scores = tampered.scores
    got = scores["tamper-loop"]
    release = nbformat.read(tampered.courses["tamper-loop"].release_path(TAMPER_A), as_version=4)
    assert got["sequence_log_prob_basic"][0] == 0 and got["sequence_log_prob_edge"][0] == 0
    assert total(got) == total_points(release) - points_in_notebook(release, "sequence_log_prob", MATHS_CELLS)  # it refuses bad
    # input before the loop, so its errors cell keeps its point
    feedback = html.unescape(open(tampered.courses["tamper-loop"].feedback_path("tamper-loop", TAMPER_A)).read())
    assert "did not finish within" in feedback


def test_feedback_never_contains_hidden_test_code(tampered):
    """Feedback shows the learner the visible checks and their messages, never the hidden checks' code."""
    roots = {cc.root for cc in tampered.courses.values()}
    files = [os.path.join(d, f) for root in roots for d, _, fs in os.walk(os.path.join(root, "feedback"))
             for f in fs if f.endswith(".html")]
    assert len(files) >= len(tampered.scores), "not every tampered submission got feedback"
    for path in files:
        text = html.unescape(open(path).read())
        assert "HIDDEN TESTS" not in text and not re.search(r'part\s*=\s*"hidden"', text), path


def test_grades_export_to_csv(course, samples):
    samples(TAMPER_A)
    rows = course[TAMPER_A].export("grades.csv")
    assert {r["student_id"] for r in rows} >= {"sample-reference", "sample-untouched"}
    reference = next(r for r in rows if r["student_id"] == "sample-reference" and r["assignment"] == TAMPER_A)
    assert float(reference["score"]) == total_points(release_nb(course, TAMPER_A))


def test_each_students_hidden_cases_seed_is_recorded_beside_the_gradebook(course, samples):
    """Grading draws each student's hidden cases from a seed of their own, written to hidden_seeds.csv."""
    from grader.seeds import recorded, student_seed
    samples(TAMPER_A)
    seeds = recorded(course[TAMPER_A].root)
    students = tuple(samples(TAMPER_A))
    assert {s: seeds[(s, TAMPER_A)] for s in students} == {s: student_seed(s, TAMPER_A) for s in students}
    assert len({seeds[(s, TAMPER_A)] for s in students}) == len(students)


def test_the_class_report_counts_scores_and_names_the_mistakes_students_made(course, samples, tmp_path):
    """`course report`: per exercise the scores, the known mistakes the checks named with how many students made
    each, as HTML, CSV and a table in the terminal."""
    from coursekit.class_report import assignment_report
    samples(TAMPER_A)
    report = assignment_report(course[TAMPER_A].root, TAMPER_A)
    assert len(report.students) == len(samples(TAMPER_A))
    bug1, bug2 = ONE_BUG[TAMPER_A], SECOND_BUG[TAMPER_A]
    assert report.failed_by(bug1[0]) == 2 and report.failed_by(bug2[0]) == 2  # the untouched stub, and the bug
    named = {(ex, why): n for (ex, why), n in report.mistakes.items()}
    assert any(ex == bug1[0] and n == 1 for (ex, _), n in named.items()), named
    assert any(ex == bug2[0] and bug2[2] in why and n == 1 for (ex, why), n in named.items()), named
    proc = subprocess.run([sys.executable, "-m", "coursekit", "report", "--course", course[TAMPER_A].root,
                           "--out", str(tmp_path), TAMPER_A], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{TAMPER_A}: {len(samples(TAMPER_A))} students" in proc.stdout and bug2[2] in proc.stdout
    page = open(tmp_path / f"{TAMPER_A}.html").read()
    assert "Known mistakes the checks named" in page and "data:image/png;base64," in page
    assert any(row[0] == "mistake" and row[1] == bug2[0] for row in csv.reader(open(tmp_path / f"{TAMPER_A}.csv")))
    # who failed what (coursekit/report_students.py) on real nbgrader output: each student's points per exercise as
    # the gradebook has them, and the mistake the checks named in the one student's row who made it
    rows = list(csv.reader(open(tmp_path / f"{TAMPER_A}-students.csv")))
    header, by_student = rows[0], {row[0]: row for row in rows[2:]}
    assert set(by_student) == set(report.students)
    for student in report.students:
        for item, scores in report.scores.items():
            assert float(by_student[student][header.index(item)]) == scores[student], (student, item)
    made = [s for s, row in by_student.items() if bug2[2] in row[header.index(f"{bug2[0]}: mistake")]]
    assert len(made) == 1 and bug2[0] in {i for i in report.scores if report.scores[i][made[0]] < report.max_points[i]}


def test_the_class_report_flags_crashes_and_tampering_for_a_person(tampered):
    from coursekit.class_report import assignment_report
    student = "tamper-kill-the-kernel"
    flagged = assignment_report(tampered.courses[student].root, TAMPER_A).flagged
    assert any(s == student and kind == "kernel" for s, kind, _ in flagged), flagged
    assert not any(s == "tamper-honest" for s, _, _ in flagged)


# ---------------------------------------------------------------- one student never touches another's grade
FORK_IN_A_FUNCTION = '''
def softmax(x, dim=-1, temperature=1.0):
    import os, time
    while True:
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
'''
# named so that, in the order they are sent, each bomb goes out beside an honest submission
BOMBS = {"a-bomb-fork-in-the-kernel": ("softmax", FORK_UNTIL_REFUSED, "processes", "BlockingIOError"),
         "c-bomb-fork-in-a-function": ("softmax", None, "processes", "limit on processes"),
         "e-bomb-memory-in-the-kernel": ("softmax", ALLOCATE_UNTIL_REFUSED, "memory", "MemoryError")}
HONEST = ("b-honest", "d-honest")


@pytest.fixture(scope="session")
def bombed(course):
    """A class of 03_softmax graded by `course grade -j 2` (two workers): a fork bomb in the kernel (before the first
    graded cell), one in a learner function, a memory bomb, and two honest submissions graded beside them."""
    def build():
        cc = course.copy("course-bombs", TAMPER_A)
        release = release_nb(course, TAMPER_A)
        for student in HONEST:
            cc.submit(student, TAMPER_A, answered(release))
        for student, (exercise, top_level, _, _) in BOMBS.items():
            nb = answered(release, {exercise: FORK_IN_A_FUNCTION} if top_level is None else None)
            if top_level is not None:
                _cell(nb, exercise).source += "\n\n" + top_level.strip()
            cc.submit(student, TAMPER_A, nb)
        with open(os.path.join(cc.root, "nbgrader_config.py"), "a") as f:
            f.write("\nc.SandboxedExecute.timeout = 30\n")
        cc.env["COURSE_SANDBOX_MEMORY_MB"] = "2560"
        cc.env["COURSE_SANDBOX_NPROC"] = "256"
        course_command = os.path.join(os.path.dirname(sys.executable), "course")  # as the README writes it
        proc = subprocess.run([course_command, "grade", "-j", "2", "--course", cc.root, "--no-progress", TAMPER_A],
                              capture_output=True, text=True, timeout=1500, env=cc.env)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        log = os.path.join(cc.root, "grading_log.jsonl")
        records = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
        return {"scores": {s: cc.scores(s, TAMPER_A) for s in (*HONEST, *BOMBS)},
                "faults": {r["student"]: r["faults"] for r in records}, "printed": proc.stdout,
                "release": total_points(release)}
    return course.once("bombs-graded", build)


def test_a_fork_bomb_or_a_memory_bomb_costs_no_other_student_anything(bombed):
    """Each concurrent sandbox has its own user and control groups: the honest submissions graded beside the bombs
    keep full marks, and each bomb's own fault is named for the instructor."""
    # two workers: each bomb is graded beside another submission
    assert f"graded {len(HONEST) + len(BOMBS)} submissions" in bombed["printed"]
    assert "on 2 workers" in bombed["printed"]
    for student in HONEST:
        assert total(bombed["scores"][student]) == bombed["release"], bombed["scores"][student]
        assert student not in bombed["faults"], bombed["faults"][student]
    for student, (_, _, kind, words) in BOMBS.items():
        mine = bombed["faults"].get(student, [])
        assert any(k == kind and words in text for k, text in mine), (student, mine)
    fork = bombed["scores"]["c-bomb-fork-in-a-function"]
    assert fork["softmax_basic"][0] == 0  # the bomb costs its own exercise
