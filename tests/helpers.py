"""What the tests share: seeded inputs, one tolerance table, comparisons, and learner-style code.

Test-only: nothing here ships. Every layer's tests import from this one module
(``from helpers import ...``; pytest puts ``tests/`` on the path through its conftest).
"""
import functools
import importlib
import itertools
import inspect
import re
import textwrap

import pytest
import torch
from torch import nn

from coursekit.sync import solution_source
from learner.check import EXERCISES, CheckFailed, check
from learner.syllabus import NOTEBOOKS

DTYPES = [torch.float32, torch.float64]

# The exact-match accuracy each translator's notebook states it reaches on the test dates (trained in full)
STATED_ACCURACY = {"05_rnn.ipynb": 0.95, "05b_rnn_attention.ipynb": 0.99, "07_decoder.ipynb": 0.95,
                   "08_encoder_decoder.ipynb": 0.99, "09_kv_cache.ipynb": 0.95}

def run_outputs(nb):
    """An executed notebook's (errors and stderr outputs, all the text its code cells printed)."""
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr")]
    return errors, "".join(o.get("text", "") for o in outputs)


# rtol/atol for two correct computations of the same quantity: float64 leaves room for a different order of
# summation only; float32 on the CPU a few ulps of a sum; CUDA kernels sum in other orders again.
TOLERANCE = {
    (torch.float64, "cpu"): dict(rtol=1e-10, atol=1e-10),
    (torch.float64, "cuda"): dict(rtol=1e-10, atol=1e-10),
    (torch.float32, "cpu"): dict(rtol=1e-5, atol=1e-5),
    (torch.float32, "cuda"): dict(rtol=1e-4, atol=1e-4),
}
# gradients back-propagated through a whole float32 model, where two correct orders of summation differ by a
# few 1e-5 (a shared embedding sums over every position)
THROUGH_A_MODEL = dict(rtol=1e-4, atol=1e-4)


def tol(dtype, device="cpu"):
    """rtol/atol for two correct computations of the same quantity in ``dtype`` on ``device``."""
    return TOLERANCE[(dtype, torch.device(device).type)]


def assert_close(actual, expected, msg=None):
    """torch.testing.assert_close (shape, dtype and device checked too) with ``tol``."""
    torch.testing.assert_close(actual, expected, msg=msg, **tol(expected.dtype, expected.device))


def assert_all_close(actual, expected, names=None, through_model=False):
    """Pairwise ``assert_close``; ``through_model``: float32 gradients of a whole model get THROUGH_A_MODEL."""
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if through_model and e.dtype == torch.float32:
            torch.testing.assert_close(a, e, **THROUGH_A_MODEL, msg=lambda m, i=i: f"{names[i] if names else i}: {m}")
        else:
            assert_close(a, e, msg=lambda m, i=i: f"{names[i] if names else i}: {m}")


# ---------------------------------------------------------------- seeded inputs
def gen(seed=0):
    """A seeded generator; every random input is drawn on the CPU from one, then moved."""
    return torch.Generator().manual_seed(seed)


def randn(g, *shape, dtype=torch.float64, device="cpu", requires_grad=False):
    """Standard normal tensor of ``shape`` drawn from ``g``, on ``device``."""
    return torch.randn(*shape, generator=g, dtype=dtype).to(device).requires_grad_(requires_grad)


def cotangent(g, like):
    return torch.randn(like.shape, generator=g, dtype=like.dtype).to(like.device)


def grads(outputs, inputs, cotangents, unused_is_zero=False):
    """d sum_i <outputs_i, cotangents_i> / d inputs (an input the outputs do not read: zeros, if allowed)."""
    return torch.autograd.grad(outputs, inputs, cotangents, allow_unused=unused_is_zero,
                               materialize_grads=unused_is_zero)


def causal(n, device="cpu"):
    """(n, n) bool, True = may attend (j <= i)."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


@torch.no_grad()
def randomize(module, g, scale=0.3):
    """Every parameter of ``module`` drawn afresh (biases and layer norms too, so none stays 0 or 1)."""
    for p in module.parameters():
        p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale)
    for m in module.modules():
        if isinstance(m, nn.LayerNorm):
            m.weight.add_(1.0)  # layer-norm gains around 1


def random_dict(tree_fn, g, dtype, scale=0.3):
    """Weights from a coursekit initialiser, each perturbed so no bias is 0 and no gain is 1."""
    tree = tree_fn(g)

    def walk(t):
        return {k: walk(v) if isinstance(v, dict) else (v + scale * torch.randn(v.shape, generator=g)).to(dtype)
                for k, v in t.items()}
    return walk(tree)


def assert_message_names(excinfo, *numbers):
    """The error message names each of ``numbers`` (as a number of its own, not inside another)."""
    msg = str(excinfo.value)
    for n in numbers:
        assert re.search(rf"(?<![\d.]){n}(?![\d.])", msg), f"the message does not name {n}: {msg!r}"


# ---------------------------------------------------------------- transformer weights and masks
def valid_from_lengths(lengths, T, device="cpu"):
    """(B, T) bool, True on the first lengths[b] positions (right padding)."""
    return torch.arange(T, device=device) < torch.as_tensor(lengths, device=device)[:, None]


def flatten(tree, prefix=""):
    """[(path, tensor)] of a nested dict, in sorted key order."""
    out = []
    for k in sorted(tree):
        v = tree[k]
        out += flatten(v, f"{prefix}{k}.") if isinstance(v, dict) else [(prefix + k, v)]
    return out


def with_grad(tree):
    return {k: with_grad(v) if isinstance(v, dict) else v.detach().clone().requires_grad_() for k, v in tree.items()}


# ---------------------------------------------------------------- the RNN encoder-decoder (notebook 05)
BOS, EOS = 1, 2


def rnn_params(V_src=7, V=6, D=3, H=5, seed=0, out_scale=1.0):
    """learner.rnn_models's initial weights in float64, the output layer scaled by ``out_scale``."""
    from learner import rnn_models
    p = rnn_models.init_params(V_src, V, D, H, seed=seed, dtype=torch.float64)
    p["W_out"] = p["W_out"] * out_scale
    return p


def contexts(B, H, seed=0):
    return torch.tanh(torch.randn(B, H, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 1.5)


def rnn_log_prob(p, c, tokens):
    """log P(tokens | c) by running the reference's decoder_step along them."""
    import solutions.rnn as rnn
    h, prev, total = c[None], BOS, 0.0
    for tok in tokens:
        logits, h = rnn.decoder_step(torch.tensor([prev]), h, p)
        total += torch.log_softmax(logits[0], dim=-1)[tok].item()
        prev = tok
    return total


def all_sequences(V, max_len):
    """Every output beam search can return: ends at its first <eos>, or runs to max_len without one."""
    return [list(s) for n in range(1, max_len + 1) for s in itertools.product(range(V), repeat=n)
            if EOS not in s[:-1] and (s[-1] == EOS or n == max_len)]


# ---------------------------------------------------------------- the grader, on learner-style code
LEARNER_PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\n"


def as_learner(sources):
    """Compile ``{name: source}`` the way a notebook cell is compiled (not from solutions/).

    Returns {name: function}. Sources default to the reference's when given as None.
    """
    namespace = {"__name__": "__main__"}
    exec(LEARNER_PRELUDE, namespace)
    for name, src in sources.items():
        exec(compile(src if src is not None else solution_source(name), f"<cell {name}>", "exec"), namespace)
    return {name: namespace[name] for name in sources}


_MISTAKE_MODULES = {}


def mistakes_as_learner(topic):
    """``solutions/mistakes/<topic>.py`` compiled as notebook code (after the private parts it imports from
    ``_parts.py``), so the grader does not take its functions for the reference. Returns its namespace
    {name: function}; cached."""
    if topic not in _MISTAKE_MODULES:
        source = inspect.getsource(importlib.import_module(f"solutions.mistakes.{topic}"))
        namespace = {"__name__": "__main__"}
        exec(LEARNER_PRELUDE, namespace)
        if re.search(r"^from \._parts import ", source, re.M):
            parts = inspect.getsource(importlib.import_module("solutions.mistakes._parts"))
            exec(compile(parts, "<learner mistakes._parts>", "exec"), namespace)
            source = re.sub(r"^from \._parts import .*$", "", source, flags=re.M)
        exec(compile(source, f"<learner mistakes.{topic}>", "exec"), namespace)
        _MISTAKE_MODULES[topic] = namespace
    return _MISTAKE_MODULES[topic]


def failure(name, fn, part):
    """The message of the check ``part`` of exercise ``name``, which ``fn`` must fail."""
    with pytest.raises(CheckFailed) as info:
        check(name, fn, part)
    return str(info.value)


def learner_namespace(notebook, overrides=None):
    """The notebook's namespace after its set-up, its given functions and every answer cell (the reference's
    source unless ``overrides`` has another for that exercise), compiled as the notebook runs them."""
    ns = {"__name__": "__main__"}
    exec(LEARNER_PRELUDE, ns)
    exec(NOTEBOOKS[notebook].setup, ns)
    overrides = overrides or {}
    for name in (n for n, ex in EXERCISES.items() if ex.notebook == notebook):
        src = overrides.get(name) or solution_source(name)
        exec(compile(textwrap.dedent(src), f"<cell {name}>", "exec"), ns)
    return ns


@functools.lru_cache(maxsize=None)
def reference_as_learner(name):
    """Exercise ``name``'s reference compiled as its notebook runs it (after the set-up and the other answers)."""
    return learner_namespace(EXERCISES[name].notebook)[name]


def stop_group(proc, wait=30):
    """Stop a server the test started in a session of its own (``start_new_session=True``): SIGTERM to its whole
    process group (the server and the kernels or workers it started), SIGKILL when it is still there after ``wait``
    seconds."""
    import os
    import signal
    import subprocess
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# The assignments whose sample submissions are graded together, in one course copy, by one `course grade` run over
# the three on the README's cluster of grading machines (tests/coursekit/pipeline: ``grade_on_a_dask_cluster``, in conftest's
# ``together``); every other assignment's samples are graded in a copy of their own. So the tests that check each
# sample's score cell by cell (test_pipeline) check a run over several assignments as closely as one over a single
# assignment.
TOGETHER = ("01_tokens", "02_dot_products", "04_masks_attention")


# a softmax that trips a device-side assert on the GPU: the checks' and the sandboxed worker's CUDA tests
SOFTMAX_TRIPPING_ON_CUDA = """
def softmax(x, dim=-1, temperature=1.0):
    if x.is_cuda:
        torch.zeros(2, device=x.device)[torch.tensor([7], device=x.device)]
    return torch.softmax(x / temperature, dim=dim).nan_to_num(0.0)
"""
