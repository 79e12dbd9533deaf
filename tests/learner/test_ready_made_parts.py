"""The ready-made parts a notebook imports say, in ``help()``, how they are called.

Each part a notebook's set-up cell imports from ``learner.blocks`` states every argument, the shapes (with the
course's letters), the mask's convention when it takes a mask, and what it returns; and nothing a learner can read
with ``help()`` names a file of the reference, which students do not have. Reads docstrings only: well under 1 s.
"""
import ast
import importlib
import inspect
import re

import pytest

from learner.syllabus import NOTEBOOKS

IMPORTED = sorted({alias.name for nb in NOTEBOOKS.values() for node in ast.walk(ast.parse(nb.setup))
                   if isinstance(node, ast.ImportFrom) and node.module == "learner.blocks" for alias in node.names})
# the learner's modules that notebooks use (the checks and the course table are the course's own machinery)
LEARNER_MODULES = ["learner.blocks", "learner.rnn_models", "learner.transformer", "learner.data", "learner.training",
                   "learner.positions", "learner.plots", "learner.capstone_models", "learner.capstone_runs"]


def test_the_notebooks_import_ready_made_parts():
    assert {"masked_attention", "multi_head_attention", "encoder_block", "split_heads"} <= set(IMPORTED)


@pytest.mark.parametrize("name", IMPORTED)
def test_help_of_a_ready_made_part_states_its_arguments_shapes_mask_and_returns(name):
    fn = getattr(importlib.import_module("learner.blocks"), name)
    doc = inspect.getdoc(fn) or ""
    args = list(inspect.signature(fn).parameters)
    assert [a for a in args if a not in doc] == [], f"help({name}) does not say what each argument is"
    assert re.search(r"\(B, |\(\.\.\., ", doc), f"help({name}) gives no shapes"
    assert re.search(r"returns?\b|->", doc, re.I), f"help({name}) does not say what it returns"
    if {"mask", "valid", "tgt_valid", "src_valid"} & set(args):
        assert "True = " in doc, f"help({name}) does not say what True means in its mask"
    if "params" in args:
        assert re.search(r"W_q|\"attn\"|\"self_attn\"", doc), f"help({name}) does not name its parameters' keys"


@pytest.mark.parametrize("module", LEARNER_MODULES)
def test_nothing_a_learner_reads_with_help_names_a_file_of_the_reference(module):
    mod = importlib.import_module(module)
    docs = [(module, inspect.getdoc(mod) or "")]
    for name, obj in vars(mod).items():
        if getattr(obj, "__module__", None) == module and (inspect.isfunction(obj) or inspect.isclass(obj)):
            docs.append((name, inspect.getdoc(obj) or ""))
            if inspect.isclass(obj):
                docs += [(f"{name}.{m}", inspect.getdoc(f) or "") for m, f in vars(obj).items() if inspect.isfunction(f)]
    assert [where for where, doc in docs if "solutions/" in doc or "solutions." in doc] == []


@pytest.mark.parametrize("folder", [f for f, nb in NOTEBOOKS.items() if "learner.blocks" in nb.setup])
def test_a_notebook_states_each_ready_made_part_it_imports_with_its_signature(folder):
    """Beside its set-up cell, the notebook states each part the set-up imports from learner.blocks: its call as
    ``help()`` gives it, and for the attention parts the mask's convention."""
    import nbformat
    from coursekit.sync import notebook_path
    text = "\n".join(c.source for c in nbformat.read(notebook_path(folder), as_version=4).cells
                     if c.cell_type == "markdown")
    blocks = importlib.import_module("learner.blocks")
    names = [a.name for node in ast.walk(ast.parse(NOTEBOOKS[folder].setup)) if isinstance(node, ast.ImportFrom)
             and node.module == "learner.blocks" for a in node.names]
    assert [n for n in names if f"`{n}{inspect.signature(getattr(blocks, n))}`" not in text] == []
    if {"masked_attention", "multi_head_attention"} & set(names):
        assert "`True` = may attend" in text
