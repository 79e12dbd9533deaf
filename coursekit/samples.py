"""Sample submissions built from the reference: all answers right, or one known bug.

Used by ``course demo`` and by the pipeline tests. A bug is a small edit of the
reference source, so the submission is a learner's notebook with one mistake.
"""
import copy

from grader import EXERCISES

from .notebooks import solution_source

# assignment -> (exercise, what the bug is, (old text, new text) in the reference source)
ONE_BUG = {
    "01_tokens": ("pad_batch", "the padding mask is inverted", ("return ids, mask", "return ids, ~mask")),
    "02_dot_products": ("scaled_scores", "no division by sqrt(d_k)", (" / math.sqrt(d_k)", "")),
    "03_softmax": ("softmax", "logits multiplied by the temperature", ("z = x / temperature", "z = x * temperature")),
    "04_masks_attention": ("masked_attention", "no division by sqrt(d_k)", (" / math.sqrt(Q.shape[-1])", "")),
    "05_rnn": ("rnn_encode", "the context is taken after the padding",
               ("h = torch.where(real, h_new, h)", "h = h_new")),
    # later notebooks' blocks call earlier exercises, so a bug in a helper would cost the block's points
    # too: each sample bug sits in an exercise that nothing else in its notebook calls
    "06_encoder": ("encoder_block", "the residual around attention is missing",
                   ("F.layer_norm(x + a, ", "F.layer_norm(a, ")),
    "07_decoder": ("decoder_block", "no causal mask", (".tril()  # (T, T): j <= i", "  # (T, T): j <= i")),
    "08_encoder_decoder": ("encdec_decoder_block", "no causal mask on the self-attention",
                           (".tril()  # (T_y, T_y)", "  # (T_y, T_y)")),
    "09_kv_cache": ("decoder_block_step", "the cache is not passed to the attention",
                    ("cached_attention(q, k, v, cache)", "cached_attention(q, k, v, None)")),
}


def edited_source(name, old, new):
    src = solution_source(name)
    if old not in src:
        raise ValueError(f"the reference of {name} no longer contains {old!r}; update coursekit.samples")
    return src.replace(old, new, 1)


def answered(release_nb, overrides=None):
    """A copy of a released notebook with every answer cell holding the reference (or an override)."""
    nb = copy.deepcopy(release_nb)
    overrides = overrides or {}
    for cell in nb.cells:
        md = cell.metadata.get("nbgrader", {})
        if md.get("solution") and md.get("grade_id") in EXERCISES:
            cell.source = overrides.get(md["grade_id"], solution_source(md["grade_id"]))
    return nb


def with_bug(release_nb, assignment):
    name, _, (old, new) = ONE_BUG[assignment]
    return answered(release_nb, {name: edited_source(name, old, new)})


def points_of(nb, exercise):
    """Total points of the test cells of ``exercise`` in a notebook."""
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade")
               and c.metadata["nbgrader"]["grade_id"].rsplit("_", 1)[0] == exercise)


def total_points(nb):
    return sum(c.metadata["nbgrader"].get("points", 0) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade"))


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


def mistakes_as_learner(module):
    """``solutions/<module>.py`` (a self-contained module of known mistakes) compiled as notebook code, so the
    grader does not take its functions for the reference. Returns its namespace {name: function}; cached."""
    if module not in _MISTAKE_MODULES:
        import importlib
        import inspect
        source = inspect.getsource(importlib.import_module(f"solutions.{module}"))
        namespace = {"__name__": "__main__"}
        exec(LEARNER_PRELUDE, namespace)
        exec(compile(source, f"<learner {module}>", "exec"), namespace)
        _MISTAKE_MODULES[module] = namespace
    return _MISTAKE_MODULES[module]
