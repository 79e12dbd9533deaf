"""A demonstration cannot print the opposite of its point, on any machine.

Notebook 08 shows what computing the source's keys and values once saves. Timed once, on a busy machine, the saving
came out negative (4.34 s against 2.23 s); the cell now counts the work (PyTorch's FlopCounterMode), which is the
same everywhere. This runs the notebook's own cell, with the reference's functions and an untrained model of the
notebook's configuration on 40 dates (about 3 s of CPU), and holds what it prints to its point.
"""
import re
import types

import nbformat
import torch

from coursekit.sync import notebook_path


def _cell(folder, marker):
    cells = [c.source for c in nbformat.read(notebook_path(folder), as_version=4).cells
             if c.cell_type == "code" and marker in c.source]
    assert len(cells) == 1, f"{folder}: {len(cells)} cells hold {marker!r}"
    return cells[0]


def test_08s_saving_is_counted_not_timed_and_equals_one_projection_a_step(capsys):
    from learner import data, transformer
    from solutions.encoder import embed_with_positions, encoder_block
    from solutions.encoder_decoder import encdec_decoder_block, greedy_translate

    source = _cell("08_encoder_decoder", "FlopCounterMode")
    assert "perf_counter" not in source and "time." not in source, "the demonstration times the work again"
    task = data.make_date_task(seed=0)
    cfg = transformer.EncoderDecoderConfig(src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab),
                                           max_len=32)
    model = transformer.EncoderDecoder(cfg, encdec_decoder_block, embed_with_positions, encoder_block, seed=0)
    few = types.SimpleNamespace(test=task.test[:40], src_vocab=task.src_vocab, tgt_vocab=task.tgt_vocab)
    namespace = {"torch": torch, "data": data, "task": few, "model": model, "greedy_translate": greedy_translate}
    exec(compile(source, "<08's demonstration>", "exec"), namespace)
    out = capsys.readouterr().out
    assert "the same tokens: True" in out
    steps, w_once, w_again, w_kv = (namespace[k] for k in ("steps", "w_once", "w_again", "w_kv"))
    assert w_kv > 0 and w_again - w_once == (steps - 1) * w_kv  # the saving: one projection a step but the first
    said = re.search(r"\(the difference above: ([\d.]+)\)", out)
    assert said and float(said[1]) > 0
