"""The checks (``learner.check``): what they accept, what they reject, and what they say."""
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import learner.check
from helpers import as_learner, mistakes_as_learner
from learner.check import EXERCISES, CheckFailed, check
from coursekit.expected import stale
from learner.syllabus import NOTEBOOKS
from helpers import SOFTMAX_TRIPPING_ON_CUDA, failure
import learner.check as checks  # the checks' module (a test's `learner` is a notebook's namespace)


def mistake_as_learner(mname, learner):
    """A known mistake "<topic>:<function>" compiled as learner code, calling the learner copies of the reference."""
    topic, _, fn_name = mname.partition(":")
    src = inspect.getsource(getattr(importlib.import_module(f"solutions.mistakes.{topic}"), fn_name))
    ns = {"math": __import__("math"), "torch": torch}
    mods = {"attention": ["bidirectional_mask", "causal_mask", "padding_mask", "combine_masks", "additive_mask",
                          "masked_attention"],
            "_sm": ["softmax", "log_softmax", "sequence_log_prob"],
            "tokens": ["build_vocab", "encode", "decode", "pad_batch", "embed_one_hot", "embed_lookup"]}
    for mod, names in mods.items():
        ns[mod] = types.SimpleNamespace(**{n: learner[n] for n in names},
                                        SPECIALS=("<pad>", "<bos>", "<eos>", "<unk>"))
    exec(compile(src, f"<learner {mname}>", "exec"), ns)
    return ns[fn_name]


# ---------------------------------------------------------------- the course table (learner/syllabus.py)
def test_the_course_table_is_the_registry_notebook_by_notebook():
    """Each notebook's entry lists exactly the exercises its case module registers, and gives them their
    notebook and ready-made versions; every notebook has its modules, and a sample bug (instructor-only, with the
    reference) in one of its exercises."""
    import os

    from coursekit import ROOT
    from solutions.sample_bugs import SAMPLE_BUGS
    assert list(EXERCISES) == [name for nb in NOTEBOOKS.values() for name in nb.exercises]
    for folder, nb in NOTEBOOKS.items():
        assert os.path.exists(os.path.join(ROOT, "learner", "check", "cases", f"{nb.topic}.py"))
        assert os.path.exists(os.path.join(ROOT, "solutions", f"{nb.topic}.py"))
        assert os.path.exists(os.path.join(ROOT, "solutions", "mistakes", f"{nb.topic}.py"))
        assert os.path.exists(os.path.join(ROOT, "course", "source", folder, f"{folder}.ipynb"))
        assert set(nb.given) <= set(nb.exercises)
        for name in nb.exercises:
            assert EXERCISES[name].notebook == folder and EXERCISES[name].given == nb.given.get(name, ())
        assert SAMPLE_BUGS[folder].exercise in nb.exercises
    assert set(SAMPLE_BUGS) == set(NOTEBOOKS)


def test_the_course_tables_points_are_the_source_notebooks_points():
    import nbformat
    from learner.syllabus import cell_points
    from coursekit.sync import source_notebooks
    for path in source_notebooks():
        nb = nbformat.read(path, as_version=4)
        points = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"] for c in nb.cells
                  if c.metadata.get("nbgrader", {}).get("grade")}
        entry = NOTEBOOKS[path.split("/")[-2]]
        assert points == {f"{name}_{cell}": cell_points(name, cell) for name in entry.exercises
                          for cell in learner.check.cells_of(name)}, path


def test_every_ready_made_version_in_the_course_table_is_a_function():
    for nb in NOTEBOOKS.values():
        for paths in nb.given.values():
            for path in paths:
                module, _, attr = path.partition(":")
                assert callable(getattr(importlib.import_module(module), attr)), path


# ---------------------------------------------------------------- the reference passes
@pytest.mark.parametrize("name", list(EXERCISES))
def test_reference_written_as_learner_code_passes_every_part(name, learner, capsys):
    """The reference, compiled as a notebook cell, passes every part, printing one PASSED line each."""
    for part in checks.parts_of(name):
        check(name, learner[name], part)
    out = capsys.readouterr()
    assert out.out.count("PASSED") == len(checks.parts_of(name)) and out.err == ""


@pytest.mark.parametrize("name", list(EXERCISES))
def test_shipped_expected_outputs_are_not_stale(name):
    """learner/check/expected/<name>.pt equals what the reference computes now (`course expected` rebuilds it)."""
    assert stale(name) is None


# ---------------------------------------------------------------- known mistakes are named
# the foundation's mistakes (solutions/mistakes/<topic>.py of notebooks 01-04), which call the learner's own
# earlier functions
FOUNDATION = ("tokens", "dot_products", "softmax", "masks_attention")
MISTAKES = [(name, m, why) for name, ex in EXERCISES.items() for m, why in ex.mistakes
            if m.split(":")[0] in FOUNDATION]


@pytest.mark.parametrize("name,mname,why", MISTAKES, ids=[f"{n}-{m.split(':')[-1]}" for n, m, _ in MISTAKES])
def test_each_known_mistake_fails_and_is_named(name, mname, why, learner, failures_of):
    """A function with a known mistake fails at least one part, and some failing part names that mistake."""
    fn = mistake_as_learner(mname, learner)
    messages = failures_of(name, fn, until=why)
    assert messages, f"{mname} passed every part of {name}"
    assert any(why in m for m in messages), f"no failure of {mname} names it:\n" + "\n---\n".join(messages)


def test_every_known_mistake_is_named_by_its_notebooks_topic():
    """An exercise's mistakes are "<topic>:<function>" of its own notebook, found in solutions/mistakes/<topic>.py."""
    for name, ex in EXERCISES.items():
        topic = NOTEBOOKS[ex.notebook].topic
        for m, _ in ex.mistakes:
            module, _, fn_name = m.partition(":")
            assert module == topic, (name, m)
            assert callable(getattr(importlib.import_module(f"solutions.mistakes.{topic}"), fn_name)), m


# the later notebooks' mistakes: self-contained modules solutions/mistakes/<topic>.py, compiled as learner code
MODULE_MISTAKES = [(name, m, why) for name, ex in EXERCISES.items() for m, why in ex.mistakes
                   if m.split(":")[0] not in FOUNDATION]
MISTAKE_MODULES = [nb.topic for nb in NOTEBOOKS.values() if nb.topic not in FOUNDATION]


@pytest.mark.parametrize("module", MISTAKE_MODULES)
def test_each_mistakes_module_is_self_contained_and_registers_each_mistake_once(module):
    """Known mistakes must compile as learner code: torch and the shared private parts only, nothing from the
    reference."""
    import ast
    for name in (f"solutions.mistakes.{module}", "solutions.mistakes._parts"):
        tree = ast.parse(inspect.getsource(importlib.import_module(name)))
        imported = {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names} | \
            {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert imported <= {"math", "torch", "torch.nn.functional", "_parts"}, (name, imported)
    registered = [m.split(":")[1] for _, m, _ in MODULE_MISTAKES if m.startswith(module + ":")]
    assert set(registered) <= set(mistakes_as_learner(module))
    assert len(set(registered)) == len(registered), "each mistake is registered once"


@pytest.mark.parametrize("name,mname,why", MODULE_MISTAKES, ids=[m.split(":")[-1] for _, m, _ in MODULE_MISTAKES])
def test_each_known_mistake_of_the_later_notebooks_fails_and_is_named(name, mname, why, failures_of):
    module, _, fn_name = mname.partition(":")
    messages = failures_of(name, mistakes_as_learner(module)[fn_name], until=why)
    assert messages, f"{mname} passed every part of {name}"
    assert any(why in m for m in messages), f"no failure of {mname} names it:\n" + "\n---\n".join(messages)


# the transformer notebooks (06-09) choose their random basic cases so that every mistake shows there
# except the mistakes that only some shape of input can show, each with where it shows instead
SHOWN_ELSEWHERE = {
    "encoder:mha_2d_mask_head_axis_in_the_middle": "only a 2-D (T, T) mask shows it (mask[:, None] is right for a "
                                                   "batched one): the edge part's causal cases, where it raises as "
                                                   "PyTorch's size check and is named by that error",
    "encoder:sinusoidal_float32_angles": "float32 angles are right to float32's 7 digits: only a float64 table shows "
                                         "them (the edge part's float64 and base = 100 cases)",
    "encoder:masked_lm_loss_log_of_softmax": "log(softmax) is right until a probability rounds to 0: only confident "
                                             "logits show it (the edge part's 1e3 logits)",
    "decoder:rope_float32_angles": "float32 angles are right to float32's 7 digits: only large positions in float64 "
                                   "show them (the edge part's positions 1000 .. 1003)",
    "kv_cache:greedy_generate_writes_after_eos": "only a batch whose rows write <eos> at different steps shows it (a "
                                                 "row done while another goes on): a quarter of the basic cases, and "
                                                 "the edge part's",
    "decoder:lm_log_prob_gathers_padding": "gathering with the padding ids is right wherever padding holds a valid id "
                                           "(the basic cases pad with 0): only the edge part's padding of 999 shows "
                                           "it, where it raises as PyTorch's index check and is named by that error",
}
SHOWN_IN_BASIC = [(name, m, why) for name, m, why in MODULE_MISTAKES
                  if m.split(":")[0] in ("encoder", "decoder", "encoder_decoder", "kv_cache") and m not in SHOWN_ELSEWHERE]


@pytest.mark.parametrize("name,mname,why", SHOWN_IN_BASIC, ids=[m.split(":")[-1] for _, m, _ in SHOWN_IN_BASIC])
def test_the_visible_basic_cases_tell_each_mistake_from_the_reference(name, mname, why):
    """Most shipped basic cases tell the mistake from the reference, and on at least one it is the mistake named."""
    from learner.check.compare import same
    records = learner.check.load_expected(name)["parts"]["basic"]
    differs = [r for r in records if not same(r["expected"], r["mistakes"][mname])]
    assert len(differs) >= len(records) // 2, f"{mname} agrees with the reference on most basic cases"
    # its output, or the error it raises (a learner's function that raises the same error is named by it)
    named = [r for r in differs if r["mistakes"][mname] is not None and mname == next(
        m for m, out in r["mistakes"].items() if out is not None and same(out, r["mistakes"][mname]))]
    assert named, f"on every basic case where {mname} is wrong an earlier mistake gives the same output"


# ---------------------------------------------------------------- other correct styles pass
OTHER_STYLES = {
    "softmax": '''
        def softmax(x, dim=-1, temperature=1.0):
            if temperature <= 0:
                raise ValueError("temperature must be positive")
            return torch.softmax(x.double() / temperature, dim=dim).nan_to_num(0.0).to(x.dtype)
    ''',
    "log_softmax": '''
        def log_softmax(x, dim=-1, temperature=1.0):
            if not temperature > 0:
                raise ValueError("bad temperature")
            return torch.log_softmax(x / temperature, dim=dim).nan_to_num(nan=float("-inf"), neginf=float("-inf"))
    ''',
    "masked_attention": '''
        def masked_attention(Q, K, V, mask=None):
            if Q.shape[-1] != K.shape[-1] or K.shape[-2] != V.shape[-2]:
                raise ValueError("shapes")
            if mask is not None:
                scores_shape = Q.shape[:-1] + (K.shape[-2],)
                try:
                    fits = torch.broadcast_shapes(mask.shape, scores_shape) == scores_shape
                except RuntimeError:
                    fits = False
                if not fits:
                    raise ValueError("mask shape")
            s = torch.einsum("...id,...jd->...ij", Q, K) / Q.shape[-1] ** 0.5
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1).nan_to_num(0.0)
            out = torch.nn.functional.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
            return out.nan_to_num(0.0) if K.shape[-2] else torch.einsum("...ij,...jd->...id", w, V), w
    ''',
    "causal_mask": '''
        def causal_mask(T, device=None):
            if T < 0:
                raise ValueError("T")
            i = torch.arange(T, device=device)
            return i[:, None] >= i[None, :]
    ''',
    "pad_batch": '''
        def pad_batch(sequences, pad_id=0):
            if not sequences:
                raise ValueError("empty")
            rows = [torch.tensor(s, dtype=torch.long) for s in sequences]
            ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_id)
            lengths = torch.tensor([len(s) for s in sequences])
            return ids, torch.arange(ids.shape[1])[None, :] < lengths[:, None]
    ''',
    "pairwise_scores": '''
        def pairwise_scores(Q, K):
            if Q.shape[-1] != K.shape[-1]:
                raise ValueError("widths")
            Qb, Kb = torch.broadcast_tensors(Q[..., :, None, :], K[..., None, :, :])
            out = torch.zeros(Qb.shape[:-1], dtype=Q.dtype)
            for d in range(Q.shape[-1]):       # a loop over the width, on purpose
                out = out + Qb[..., d] * Kb[..., d]
            return out
    ''',
}


@pytest.mark.parametrize("name", list(OTHER_STYLES))
def test_correct_implementations_in_other_styles_pass(name):
    """Judged by behaviour: einsum, SDPA, loops, float64 inside, pad_sequence all pass the visible parts."""
    fn = as_learner({name: textwrap.dedent(OTHER_STYLES[name])})[name]
    check(name, fn, "basic")
    check(name, fn, "edge")


# ---------------------------------------------------------------- bad learner functions
def learner_fn(src, name):
    return as_learner({name: textwrap.dedent(src)})[name]


def test_a_stub_is_reported_as_not_implemented():
    """The released stub fails with a message that says what to replace."""
    fn = learner_fn("def softmax(x, dim=-1, temperature=1.0):\n    raise NotImplementedError()\n", "softmax")
    msg = failure("softmax", fn, "basic")
    assert "not implemented yet" in msg and "NotImplementedError" in msg


def test_a_raising_function_is_reported_with_its_error_and_every_case_still_runs():
    """An exception becomes a message naming it; all cases are still counted."""
    fn = learner_fn("def softmax(x, dim=-1, temperature=1.0):\n    raise KeyError('boom')\n", "softmax")
    msg = failure("softmax", fn, "basic")
    n = len(learner.check.load_expected("softmax")["parts"]["basic"])
    assert "raised KeyError: 'boom'" in msg and f"{n} of {n} checks failed" in msg


def test_a_hanging_function_is_stopped_and_reported(monkeypatch):
    """An infinite loop is interrupted at the time limit, reported, and the check returns."""
    monkeypatch.setattr(learner.check.safe, "DEFAULT_TIME_LIMIT", 0.5)
    fn = learner_fn("def softmax(x, dim=-1, temperature=1.0):\n    while True:\n        pass\n", "softmax")
    msg = failure("softmax", fn, "basic")
    assert "did not finish within 0.5 s" in msg


def test_the_time_limit_counts_computing_not_waiting():
    """Principle 9: a busy machine makes a correct function wait for a core, never stops it. The limit is CPU time;
    a call that only waits is stopped on the clock at safe.WALL_FACTOR times the limit, one that computes at it."""
    import time

    from learner.check import safe

    def spin():
        while True:
            pass
    cpu = time.process_time()
    assert safe.call(spin, time_limit=0.3).timed_out
    # stopped once it had computed its limit: however busy the machine (a busy one stops it sooner, on the clock),
    # never after computing for as long as the clock's limit would allow
    assert time.process_time() - cpu < 0.3 + 0.15
    # waits 1.5 times its limit, and wakes well before the clock's (0.9 s) even on a busy machine
    waited = safe.call(lambda: time.sleep(0.45) or "done", time_limit=0.3)
    assert not waited.timed_out and waited.value == "done"
    t0 = time.monotonic()
    assert safe.call(lambda: time.sleep(30), time_limit=0.3).timed_out
    assert 0.3 * safe.WALL_FACTOR - 0.05 <= time.monotonic() - t0 < 5  # a wait is stopped on the clock, not before

    def spin_with_its_cpu_limit_off():  # computing is no reason for more time once past the CPU limit
        import signal
        signal.setitimer(signal.ITIMER_PROF, 0)
        while True:
            pass
    t0 = time.monotonic()
    assert safe.call(spin_with_its_cpu_limit_off, time_limit=0.3).timed_out
    assert time.monotonic() - t0 < 5


def test_a_call_puts_back_the_callers_own_alarm():
    """A call's clock limit borrows the process's one real-time alarm; the caller's (pytest-timeout's, a notebook's)
    is set again afterwards with what was left of it, and one that fell due during the call goes off at once."""
    import signal
    import time

    from learner.check import safe
    rang = []
    timeout = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's own, while this test has the alarm
    old = signal.signal(signal.SIGALRM, lambda *_: rang.append(time.monotonic()))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        assert safe.call(lambda: time.sleep(0.2) or "done", time_limit=1).value == "done"
        left = signal.getitimer(signal.ITIMER_REAL)[0]
        assert 28 < left < 29.81 and not rang, left
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        assert safe.call(lambda: time.sleep(0.3) or "done", time_limit=1).value == "done"  # due meanwhile
        back = time.monotonic()
        deadline = back + 5
        while not rang and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(rang) == 1 and rang[0] - back < 1, rang
    finally:
        signal.signal(signal.SIGALRM, old)
        signal.setitimer(signal.ITIMER_REAL, *timeout)

STARVED = """
import os, sys, time
from learner.check import safe

def compute():  # 0.8 s of CPU: under its limit of 1 s, but slowed past the clock's limit by the processes beside it
    start = time.process_time()
    while time.process_time() - start < 0.8:
        pass
    return "done"

os.sched_setaffinity(0, {0})
hogs = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:  # a hog computes on the same core for at most 60 s, then goes
        end = time.monotonic() + 60
        while time.monotonic() < end:
            pass
        os._exit(0)
    hogs.append(pid)
t0 = time.monotonic()
out = safe.call(compute, time_limit=1.0)
print(out.timed_out, out.value, time.monotonic() - t0)
for pid in hogs:
    os.kill(pid, 9)
"""


def test_a_correct_function_slowed_past_the_clocks_limit_by_a_busy_machine_is_not_stopped():
    """Principle 9, under load: sharing one core with five busy processes, a call computing 0.8 s of its 1 s limit
    takes longer on the clock than safe.wall_limit allows a call that waits, and finishes with its value: the
    clock stops only a call that is not computing."""
    import subprocess
    import sys

    from learner.check import safe
    proc = subprocess.run([sys.executable, "-c", STARVED], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    timed_out, value, seconds = proc.stdout.split()
    assert float(seconds) > safe.wall_limit(1.0), seconds  # it was slowed past the clock's limit
    assert (timed_out, value) == ("False", "done")


def test_a_call_past_its_limit_in_the_middle_of_an_import_is_stopped_after_the_import_not_inside_it(tmp_path,
                                                                                                     monkeypatch):
    """A library PyTorch loads on first use (torch._dynamo, then sympy) interrupted half-way stays half-loaded, and
    every later call in the process that needs it fails ("module 'sympy' has no attribute 'printing'"): a call
    past its limit inside an import is stopped once the import is done; a call that goes on computing after it is
    still stopped."""
    import importlib
    from learner.check import safe
    (tmp_path / "slow_to_load.py").write_text(
        "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.6:\n    pass\nLOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_to_load", raising=False)
    safe.call(lambda: importlib.import_module("slow_to_load"), time_limit=0.1)
    assert sys.modules["slow_to_load"].LOADED  # loaded whole, though its loading took six times the limit

    def load_then_spin():
        importlib.import_module("slow_to_load_too")
        while True:
            pass
    (tmp_path / "slow_to_load_too.py").write_text((tmp_path / "slow_to_load.py").read_text())
    monkeypatch.delitem(sys.modules, "slow_to_load_too", raising=False)
    assert safe.call(load_then_spin, time_limit=0.1).timed_out
    assert sys.modules["slow_to_load_too"].LOADED


def test_a_wrong_shape_is_reported_with_both_shapes():
    fn = learner_fn("def pairwise_scores(Q, K):\n    return K @ Q.transpose(-2, -1)\n", "pairwise_scores")
    msg = failure("pairwise_scores", fn, "basic")
    assert "has shape" in msg and "expected" in msg and "K Q^T" in msg


def test_a_wrong_dtype_is_reported():
    fn = learner_fn("def scaled_scores(Q, K):\n    return (Q @ K.transpose(-2, -1)).float() / math.sqrt(Q.shape[-1])\n",
                    "scaled_scores")
    msg = failure("scaled_scores", fn, "basic")
    assert "dtype torch.float32, expected torch.float64" in msg


def test_a_tensor_made_on_the_wrong_device_is_caught_without_a_gpu(monkeypatch):
    """The meta-device probe catches a helper tensor created without device=... (graded on the CPU only, as on a
    machine without a GPU: with one, its CUDA cases catch it first)."""
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    fn = learner_fn('''
        def additive_mask(mask, dtype=torch.float32):
            if mask.dtype != torch.bool or not dtype.is_floating_point:
                raise ValueError("bool mask and float dtype")
            return torch.zeros(mask.shape, dtype=dtype).masked_fill(~mask, float("-inf"))
    ''', "additive_mask")
    check("additive_mask", fn, "basic")  # right values on the CPU ...
    msg = failure("additive_mask", fn, "hidden")  # ... but the probe sees the device
    assert "device" in msg and "meta" in msg


def test_nan_output_is_reported_in_plain_words():
    fn = learner_fn('''
        def masked_attention(Q, K, V, mask=None):
            s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            w = torch.softmax(s, dim=-1)
            return w @ V, w
    ''', "masked_attention")
    msg = failure("masked_attention", fn, "edge")
    assert "NaN" in msg and "masked" in msg


def test_a_nan_output_is_named_by_the_mistake_with_nan_in_the_same_places():
    """Where no known mistake gives the learner's output exactly, the NaN fallback names one whose NaN stands where
    the learner's does (an overflow is not told 'the mask's polarity is reversed', whose NaN is elsewhere), and none
    whose NaN is elsewhere only: a learner's NaN on a row with no allowed key was told "exp() overflowed"."""
    from learner.check.runner import diagnose
    nan = float("nan")
    got = torch.tensor([[nan, nan], [0.5, 0.5]])
    outputs = {"elsewhere": torch.tensor([[0.5, 0.5], [nan, nan]]), "same": torch.tensor([[nan, nan], [0.1, 0.9]])}
    assert diagnose("nan", got, outputs, {"elsewhere": "NaN elsewhere", "same": "NaN here"}) == ("NaN here",)
    assert diagnose("nan", got, {"elsewhere": outputs["elsewhere"]}, {"elsewhere": "NaN elsewhere"}) == ()


def test_warnings_and_prints_of_correct_code_stay_off_stderr(capfd):
    """nbgrader scores any stderr as 0: a correct function that warns and prints still passes cleanly."""
    fn = learner_fn('''
        def softmax(x, dim=-1, temperature=1.0):
            import sys, warnings
            warnings.warn("just so you know")
            print("debugging", file=sys.stderr)
            print("more debugging")
            if not temperature > 0:
                raise ValueError("temperature")
            return torch.softmax(x / temperature, dim=dim).nan_to_num(0.0)
    ''', "softmax")
    check("softmax", fn, "basic")
    out, err = capfd.readouterr()
    assert err == "" and "PASSED" in out and "warning" in out


# ---------------------------------------------------------------- tampering does not help
def test_monkeypatching_torch_comparisons_does_not_pass_a_wrong_answer(monkeypatch):
    """Replacing torch.allclose, torch.isclose, torch.testing and Tensor methods after import changes nothing."""
    wrong = learner_fn("def softmax(x, dim=-1, temperature=1.0):\n    return torch.zeros_like(x)\n", "softmax")
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(torch, "isclose", lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool))
    monkeypatch.setattr(torch, "equal", lambda *a, **k: True)
    monkeypatch.setattr(torch.testing, "assert_close", lambda *a, **k: None)
    monkeypatch.setattr(torch.Tensor, "__eq__", lambda a, b: True)
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: [])
    failure("softmax", wrong, "basic")


def test_calling_the_reference_is_a_failure():
    """A learner function that imports and calls the reference package fails, saying so."""
    fn = learner_fn('''
        def softmax(x, dim=-1, temperature=1.0):
            from solutions.softmax import softmax as ref
            return ref(x, dim, temperature)
    ''', "softmax")
    msg = failure("softmax", fn, "basic")
    assert "called the reference solution" in msg


GIVEN_DELEGATIONS = [
    ("encoder_block", "def encoder_block(x, valid, params, n_heads):\n"
                      "    from learner.blocks import encoder_block as f\n"
                      "    return f(x, valid, params, n_heads)\n"),
    ("split_heads", "def split_heads(x, n_heads):\n"
                    "    import learner.blocks\n"
                    "    return learner.blocks.split_heads(x, n_heads)\n"),
    ("sinusoidal_positions", "def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):\n"
                             "    from learner.transformer import sinusoidal_table\n"
                             "    return sinusoidal_table(T, D).to(dtype)\n"),
    ("masked_attention", "def masked_attention(Q, K, V, mask=None):\n"
                         "    from learner import blocks\n"
                         "    return blocks.masked_attention(Q, K, V, mask)\n"),
    ("decoder_block", "def decoder_block(x, valid, params, n_heads):\n"
                      "    from learner import blocks\n"
                      "    return blocks.decoder_block(x, valid, params, n_heads)\n"),
]


@pytest.mark.parametrize("name,source", GIVEN_DELEGATIONS, ids=[n for n, _ in GIVEN_DELEGATIONS])
@pytest.mark.parametrize("part", ["basic", "edge"])
def test_calling_the_courses_ready_made_version_is_a_failure(name, source, part):
    """Later notebooks get some exercises ready-made from coursekit; handing one in as an answer fails every case."""
    ns = {"torch": torch}
    exec(compile(source, "<cell>", "exec"), ns)
    with pytest.raises(CheckFailed, match="the course's ready-made version of this exercise"):
        check(name, ns[name], part)


def test_ready_made_versions_stay_allowed_where_they_are_given():
    """Notebook 07's decoder_block may call the given multi_head_attention: only an exercise's own version is
    forbidden."""
    from coursekit.sync import solution_source
    ns = {"torch": torch, "F": torch.nn.functional}
    exec(NOTEBOOKS["07_decoder"].setup, ns)
    exec(compile(solution_source("decoder_block"), "<cell>", "exec"), ns)
    check("decoder_block", ns["decoder_block"], "basic")


def test_a_tensor_subclass_that_lies_about_equality_is_rejected():
    fn = learner_fn('''
        class Liar(torch.Tensor):
            def __eq__(self, other):
                return True
        def softmax(x, dim=-1, temperature=1.0):
            return torch.zeros_like(x).as_subclass(Liar)
    ''', "softmax")
    assert "plain torch.Tensor" in failure("softmax", fn, "basic")


# ---------------------------------------------------------------- learners' machines have no reference
def test_visible_checks_work_without_the_solutions_package():
    """With `solutions` unimportable, basic/edge pass on the shipped expectations and hidden says why it cannot run."""
    script = textwrap.dedent('''
        import sys, importlib.abc
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name == "solutions" or name.startswith("solutions."):
                    raise ImportError("no reference on a learner's machine")
        sys.meta_path.insert(0, Block())
        import inspect, textwrap
        import learner.check
        assert not learner.check.reference_available()
        src = open(sys.argv[1]).read()
        ns = {}
        exec("import math, torch\\nimport torch.nn.functional as F\\n", ns)
        exec(compile(src, "<cell>", "exec"), ns)
        for name in ("softmax", "masked_attention", "build_vocab"):
            learner.check.check(name, ns[name], "basic")
            learner.check.check(name, ns[name], "edge")
        try:
            learner.check.check("softmax", ns["softmax"], "hidden")
        except RuntimeError as e:
            print("HIDDEN:", e)
    ''')
    from coursekit.sync import solution_source
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write("\n\n".join(solution_source(n) for n in ("softmax", "masked_attention", "build_vocab")))
    proc = subprocess.run([sys.executable, "-c", script, f.name], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("PASSED") == 6
    assert "HIDDEN: hidden checks need the reference solutions" in proc.stdout


def test_unknown_exercise_or_part_is_a_clear_error(learner):
    with pytest.raises(ValueError, match="unknown exercise"):
        check("sofmax", learner["softmax"])
    with pytest.raises(ValueError, match="unknown part"):
        check("softmax", learner["softmax"], part="secret")


def test_a_name_that_is_not_a_function_fails_in_words():
    assert "expected a function" in failure("softmax", None, "basic")


def test_causal_leak_names_the_leaking_pair():
    """Attention that ignores the mask leaks the future; the message names position i and token j."""
    fn = learner_fn('''
        def masked_attention(Q, K, V, mask=None):
            w = torch.softmax(Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1]), dim=-1)
            return w @ V, w
    ''', "masked_attention")
    msg = failure("masked_attention", fn, "edge")
    assert "the future leaks" in msg or "Other failing cases show" in msg
    from learner.check.cases.masks_attention import _attn_no_future_leak
    leak = _attn_no_future_leak(fn)
    assert leak and re.search(r"position i=(\d+) changed when the token at j=(\d+)", leak), leak
    i, j = map(int, re.search(r"i=(\d+) .* j=(\d+)", leak).groups())
    assert i < j


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_hidden_checks_run_on_cuda_too(learner, capsys):
    """With a GPU the hidden part also runs every case on CUDA (and still passes the reference)."""
    assert "cuda" in checks.grading_devices()
    check("masked_attention", learner["masked_attention"], "hidden")
    check("softmax", learner["softmax"], "hidden")


# Right on the CPU; on a GPU it reads past the end of a table, which trips an assertion inside the kernel: after one,
# the process cannot use the GPU again (learner.check.devices.gpu_fault).


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_error_in_the_learners_own_kernel_is_named_in_words():
    """The learner's own check, in their kernel (its own process here, since its GPU is lost after it): the failure
    names the cause and says to restart the kernel, and nothing raises past the check."""
    code = f"""
import textwrap
from helpers import as_learner
from learner.check import CheckFailed, check
fn = as_learner({{"softmax": textwrap.dedent({SOFTMAX_TRIPPING_ON_CUDA!r})}})["softmax"]
try:
    check("softmax", fn, "hidden")
except CheckFailed as exc:
    print(exc)
"""
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [os.path.dirname(tests), tests, os.environ.get("PYTHONPATH")]  # the course's packages before tests/'s
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path))})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "FAILED softmax [hidden]" in proc.stdout and "(device cuda)" in proc.stdout, proc.stdout
    assert "cannot use the GPU again" in proc.stdout and "restart the kernel" in proc.stdout, proc.stdout


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_function_wrong_on_the_cpu_is_not_run_on_the_gpu(monkeypatch):
    """It is judged on the CPU cases alone, the same count of checks as on a machine without a GPU: on the GPU its
    failures would repeat, and an index out of range there would stop the process's GPU for good."""
    fn = learner_fn("def softmax(x, dim=-1, temperature=1.0):\n    return x\n", "softmax")
    with_gpu = failure("softmax", fn, "hidden").splitlines()[0]  # "FAILED softmax [hidden]: n of N checks failed."
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert with_gpu == failure("softmax", fn, "hidden").splitlines()[0]  # with CUDA cases it would count twice


@pytest.mark.parametrize("name", list(EXERCISES))
def test_every_part_fails_on_the_released_stub(name):
    """No part of any exercise can pass a function that still raises NotImplementedError, and no single check of
    it passes either: a property check that could not call the function is not counted as passed."""
    def stub(*args, **kwargs):
        raise NotImplementedError()
    for part in learner.check.parts_of(name):
        said = failure(name, stub, part)
        assert "not implemented yet" in said
        counts = re.match(r"FAILED \S+ \[\S+\]: (\d+) of (\d+) checks failed", said)  # absent for one check
        assert counts is None or counts.group(1) == counts.group(2), said.splitlines()[0]


def test_a_function_that_looks_up_the_shipped_expectations_fails_every_graded_cell(learner):
    """The visible expectations ship with the checks; a lookup passes them but no hidden part."""
    fn = learner_fn('''
        import learner.check
        def softmax(x, dim=-1, temperature=1.0):
            for part in ("basic", "edge"):
                for rec in learner.check.load_expected("softmax")["parts"][part]:
                    a = rec["args"][0]
                    if a.shape == x.shape and a.dtype == x.dtype and bool((a == x).all()) \\
                            and rec["kwargs"].get("dim", -1) == dim \\
                            and rec["kwargs"].get("temperature", 1.0) == temperature and not rec["raises"]:
                        return rec["expected"]
            return torch.zeros_like(x)
    ''', "softmax")
    check("softmax", fn, "basic")  # the lookup fools the visible part ...
    # ... but the basic cell also runs hidden-basic, on fresh inputs
    assert "FAILED softmax [hidden-basic]" in failure("softmax", fn, "hidden-basic")
    assert "FAILED softmax [hidden]" in failure("softmax", fn, "hidden")


def test_hidden_cases_are_drawn_per_student_and_reproduced_from_the_seed(learner):
    """Two students' seeds draw different hidden cases; the same seed draws the same ones again."""
    from grader.seeds import student_seed
    seeds = {student_seed(s, a) for s in ("ada", "alan", "grace") for a in ("03_softmax", "04_masks_attention")}
    assert len(seeds) == 6 and student_seed("ada", "03_softmax") == student_seed("ada", "03_softmax")

    def inputs_seen(seed):
        seen = []

        def recorder(x, dim=-1, temperature=1.0):
            seen.append((tuple(x.shape), x.dtype, float(x.flatten()[0]) if x.numel() else None, dim, temperature))
            return learner["softmax"](x, dim, temperature)
        check("softmax", recorder, "hidden-basic", seed=seed)
        return seen
    ada, alan = student_seed("ada", "03_softmax"), student_seed("alan", "03_softmax")
    assert inputs_seen(ada) == inputs_seen(ada)
    assert inputs_seen(ada) != inputs_seen(alan) and inputs_seen(ada) != inputs_seen(0)


