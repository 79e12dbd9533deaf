"""What a learner reads is computed (issue 52, item 1): the facts the prose of notebooks 01, 03 and 05 to 10 states
about the data, the models and their sizes and costs, each found in the prose by a pattern and computed here from the
code (``learner.data``, the models, the reference, the notebooks' own code cells). Every "section N" and the check
messages' "notebook N" are checked in test_cross_references.py.

A claim whose statement is gone fails too ("update CLAIMS"), so a rewritten sentence is checked again rather than
forgotten. A cost is a count that is the same on every machine (PyTorch's FlopCounterMode), never a time. The figures
a run measures (accuracies, gradients, the sampling table) are checked by ``make test-figures``
(tests/course/test_notebooks.py, CLAIMS). Cost: about 5 s in ``make test-fast`` (the date and diary tasks, one
counted training step of each 05b model); the capstone's five models sized to their budget and a counted training
step of each, about 10 s more (20 s on a busy machine), are marked ``experiment`` (``make test`` runs them).
"""
import ast
import functools
import glob
import math
import os
import re

import nbformat
import pytest

from coursekit.sync import assignment_of, source_notebooks

NOTEBOOKS = {assignment_of(p).split("_")[0]: p for p in source_notebooks()}
CASES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "learner", "check",
                     "cases")


@functools.cache
def cells(number):
    return nbformat.read(NOTEBOOKS[number], as_version=4).cells


def code(number):
    return "\n".join(c.source for c in cells(number) if c.cell_type == "code")


def find(number, pattern):
    """(cell, match) of the first markdown cell of notebook ``number`` whose text matches ``pattern``."""
    for k, cell in enumerate(cells(number)):
        if cell.cell_type == "markdown":
            m = re.search(pattern, cell.source, re.S)
            if m:
                return k, m
    return None, None


def constant(number, name):
    """The literal a notebook's code assigns to ``name`` (``STEPS = 1000``, ``D, d_h, d_a = 32, 128, 64``, a keyword
    argument ``steps=1500``)."""
    for node in ast.walk(ast.parse(code(number))):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names = [t.id for t in (target.elts if isinstance(target, ast.Tuple) else [target])
                         if isinstance(t, ast.Name)]
                if name in names:
                    value = node.value.elts[names.index(name)] if isinstance(node.value, ast.Tuple) else node.value
                    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "dict":  # SIZES = dict(...)
                        return {kw.arg: ast.literal_eval(kw.value) for kw in value.keywords}
                    return ast.literal_eval(value)
        if isinstance(node, ast.keyword) and node.arg == name and isinstance(node.value, ast.Constant):
            return node.value.value
    raise KeyError(f"notebook {number}'s code assigns no {name}")


@functools.cache
def date_task():
    from learner import data
    return data.make_date_task(seed=0)


@functools.cache
def diary_task():
    from learner import data
    return data.make_diary_task(seed=0)


def tokens(text):
    from learner import data
    return data.tokenize(text)


def formats_by_length():
    from learner import data
    by = {}
    for source, target in date_task().test:
        by.setdefault(len(tokens(source)), set()).add(data.format_of(source, target))
    return by


# ---------------------------------------------------------------- the claims: (notebook, pattern, check)
def _05b_lengths(m):
    lengths = [len(tokens(s)) for s, _ in date_task().test]
    share = {n: lengths.count(n) / len(lengths) for n in set(lengths)}
    assert (min(lengths), max(lengths)) == (int(m["lo"]), int(m["hi"])), (min(lengths), max(lengths))
    assert len(tokens(m["short"])) == int(m["lo"]) and len(tokens(m["long"])) == int(m["hi"])
    assert max(share, key=share.get) == int(m["most"]) and 0.4 <= share[int(m["most"])] <= 0.6, share
    for example in re.findall(r"`([^`]+)`", m["examples"]):
        assert len(tokens(example)) == int(m["most"]), example


def _05b_formats(m):
    by = formats_by_length()
    assert len(by[int(m["a"])]) == 1 and len(by[int(m["b"])]) == 1, by
    assert all(len(f) >= 2 for n, f in by.items() if int(m["a"]) < n < int(m["b"])), by
    assert len(by[10]) == 5 == {"five": 5}[m["ten"]], by[10]
    assert len(tokens(m["short"])) == int(m["a"]) and len(tokens(m["long"])) == int(m["b"])


def _05_formats(m):
    by = formats_by_length()
    lengths = [len(tokens(s)) for s, _ in date_task().test]
    assert (min(lengths), max(lengths)) == (int(m["a"]), int(m["b"])), (min(lengths), max(lengths))
    assert by[int(m["a"])] == {"d month yyyy"} and by[int(m["b"])] == {"month d, yyyy, a weekday"}, by
    assert len(tokens(m["short"])) == int(m["a"]) and len(tokens(m["long"])) == int(m["b"])
    assert len(by[int(m["c"])]) == {"five": 5}[m["five"]], by[int(m["c"])]
    assert len(tokens(m["x"])) == len(tokens(m["y"])) == int(m["c"]), (m["x"], m["y"])


def _05b_widths(m):
    assert (constant("05b", "D"), constant("05b", "d_h"), constant("05b", "d_a")) == \
        (int(m["D"]), int(m["d_h"]), int(m["d_a"]))


def _05b_checkpoints(m):
    assert "{500, 1000, STEPS}" in code("05b") and m["steps"] == "500, 1000"


def _05b_target_length(m):
    from learner import data
    lengths = {len(data.to_ids(target, date_task().tgt_vocab, eos=True)) for _, target in date_task().test}
    assert lengths == {int(m["T_y"])}, lengths
    assert int(m["T_y"]) == int(m["times"]) == int(m.groupdict().get("L", m["times"])), (m["T_y"], m["times"])


def _05b_long(m):
    from learner import data
    assert max(len(tokens(s)) for s, _ in date_task().test) == int(m["short"])
    assert data.DIARY_LENGTHS[1] == max(len(tokens(s)) for s, _ in diary_task().test) == int(m["long"])
    assert constant("05b", "d_h") == int(m["d_h"])


def _01_tokenizer(m):
    assert tokens(m["word"]) == [m["a"], m["b"]]


def _07_frequencies(m):
    sizes = constant("07", "SIZES")
    D, d_k = sizes["d_model"], sizes["d_model"] // sizes["n_heads"]
    assert (D, d_k) == (int(m["D"]), int(m["d_k"]))
    assert round(10000 ** (-2 / D), 2) == float(m["sin"]) and round(10000 ** (-2 / d_k), 2) == float(m["rope"])


def _07_same_seed(m):
    """The tagger models of one seed: those without a learned table start identical, the learned one's blocks not."""
    from learner import positions
    made = {kind: dict(positions.PositionTagger(16, kind, d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=24,
                                                seed=0, rope_attention=print).named_parameters())
            for kind in positions.KINDS}
    def same(a, b):
        return [n for n in made[a] if n in made[b] and made[a][n].shape == made[b][n].shape
                and bool((made[a][n] == made[b][n]).all())]
    assert same("none", "sinusoidal") == list(made["none"]) == same("none", "rope"), "not identical"
    drawn = [n for n, w in made["learned"].items() if n.startswith("layers") and w.numel() > 1
             and not bool((w == w.flatten()[0]).all())]  # the blocks' random tensors (not LayerNorm's ones, zeros)
    assert drawn and not set(drawn) & set(same("none", "learned")), "the learned table's blocks start the same"


def _07_gpt(m):
    sizes = constant("07", "SIZES")
    assert (sizes["n_layers"], sizes["d_model"], sizes["n_heads"]) == (2, int(m["D"]), int(m["H"]))
    assert m["twice"] == "twice" and constant("07", "STEPS") == int(m["steps"])


def _06_bert(m):
    sizes = re.search(r"SIZES = dict\(([^)]*)\)", code("06")).group(1)
    assert f"d_model={m['D']}" in sizes and f"n_heads={m['H']}" in sizes and f"n_layers={m['L']}" in sizes
    assert constant("06", "steps") == int(m["steps"]) and f", {int(m['share']) / 100}," in code("06")


def _06_sense_models(m):
    from learner import data
    sense = data.make_sense_task(seed=0)
    assert {len(sentence) for sentence, *_ in sense.train + sense.probe} == {int(m["n"])}
    assert re.search(rf"d_model={m['D']}, n_heads={m['H']}, .*n_layers={m['L']}", code("06"))


def _06_probe(m):
    from learner import data
    sense = data.make_sense_task(seed=0)
    assert len(sense.probe) == int(m["probe"]) and [side for *_, side in sense.probe].count("before") == int(m["half"])
    assert "% 2 == 0" in code("06") and int(m["test"]) == int(m["half"]) // 2  # every other sentence fits the probe


def _10_lengths(m):
    from learner import data
    lines = [s for s, _ in diary_task().test]
    lengths = [len(tokens(s)) for s in lines]
    assert (min(lengths), max(lengths)) == (int(m["lo"]), int(m["hi"])) == data.DIARY_LENGTHS
    assert {len(tokens(m["dmy"])), len(tokens(m["mdy"]))} == {int(m["date"])} == {int(m["lo"])}
    span = int(m["hi"]) - int(m["lo"]) + 1
    alone = sum(" " not in s for s, _ in diary_task().train)
    expected = len(diary_task().train) * (float(m["bare"]) + (1 - float(m["bare"])) / span)
    assert abs(alone - expected) <= 3 * math.sqrt(expected), (alone, expected)
    assert span == int(m["span"]) and int(m["one_in"]) == span
    bare = [s for s in lines if " " not in s]
    assert all(len(tokens(s)) == int(m["lo"]) for s in bare) and lengths.count(int(m["lo"])) == len(bare)
    expected = len(lines) / span  # drawn evenly: within three standard deviations of a binomial count
    assert abs(len(bare) - expected) <= 3 * math.sqrt(expected), (len(bare), expected)


def _10_runs(m):
    from learner import capstone_runs as capstone
    s = capstone.Settings()
    runs = sum(len(s.seeds_of(k)) for k in capstone.KINDS)
    assert runs == {"eleven": 11}[m["runs"]] and s.steps == int(m["steps"].replace(",", ""))
    assert len(s.all_seeds) == {"three": 3}[m["seeded"]] == len(s.seeds) and len(capstone.KINDS) == 5
    longest = 1 + data_max() + 1 + 10 + 1  # <bos> source = target <eos>
    assert longest == int(m["text"]), longest


def data_max():
    from learner import data
    return data.DIARY_LENGTHS[1]


def _10_sizes(m):
    from learner import capstone_models as models
    src = open(models.__file__).read()
    assert models.EMBED == int(m["embed"]) and models.MAX_LEN == int(m["places"]) and models.POSITIONS == "sinusoidal"
    assert "n_enc_layers=2" in src and "n_dec_layers=2" in src and ", 4, 2 * width, 4, MAX_LEN" in src
    assert "n_heads=4, d_ff=2 * width" in src and m["heads"] == "4"


def _10_budget(m):
    from learner import capstone_runs as capstone
    task = diary_task()
    budget = int(m["budget"].replace(",", ""))
    for kind, width in capstone_widths(budget).items():
        count = capstone.n_params(capstone.build(kind, width, task, prefix_mask=capstone.causal_lm_mask))
        assert abs(count - budget) <= int(m["pct"]) / 100 * budget, (kind, count)


def _10_training(m):
    from learner import capstone_runs as capstone
    s = capstone.Settings()
    assert (s.steps, s.batch_size, s.seeds, s.n_test, capstone.GREEDY_SAMPLE) == \
        (int(m["steps"].replace(",", "")), int(m["batch"]), (0, 1, 2), int(m["test"]), int(m["greedy"]))


def _10_question(m):
    from learner import data
    vocab = data.lm_vocab(diary_task())
    prefix = m["prefix"].split()
    ids = data.lm_ids(m["source"], None, vocab)
    inverse = {i: t for t, i in vocab.items()}
    written = [inverse[i] for i in ids]
    assert data.UNK not in written, f"the question's text is outside the diary task's vocabulary: {written}"
    assert len(written) - 1 == int(m["last"]) and written[0] == prefix[0] and written[-1] == prefix[-1], written
    month = tokens(m["source"])[1:][3:5]  # dd.mm.yyyy: the month's two digits follow "dd."
    assert [written[int(m["i"])], written[int(m["j"])]] == month, (written, month)


def _03_floats(m):
    import torch
    f32 = torch.finfo(torch.float32)
    assert f"{f32.max:.1e}".startswith(m["max"]) and m["exp"] == "38" and f"{f32.max:.1e}".endswith("e+38")
    over = torch.tensor(float(m["over"]))
    assert torch.exp(over).isinf() and not torch.exp(over - 1).isinf()


def _03_smallest(m):
    import torch
    smallest = torch.finfo(torch.float32).smallest_normal * 2.0 ** -23  # the smallest positive (subnormal) float32
    assert torch.tensor(smallest, dtype=torch.float32).item() > 0 and round(math.log10(smallest)) == -int(m["tiny"])


def _03_product(m):
    steps = ast.literal_eval(re.search(r"steps = (\[.*?\])", code("03")).group(1))
    product = math.prod(p for _, p in steps)
    assert len(steps) == {"Four": 4}[m["n"]] and f"{product:.0e}" == f"{m['a']}e-0{m['b']}", product


def _06_same_weights(m):
    from learner import blocks, data, transformer
    sense = data.make_sense_task(seed=0)
    cfg = transformer.TransformerConfig(vocab_size=len(sense.vocab), d_model=32, n_heads=4, d_ff=64, n_layers=2,
                                        max_len=len(sense.train[0][0]), positions="sinusoidal")
    assert "transformer.MaskedLM(sense_cfg, block, embed_with_positions, seed=0)" in code("06")
    a, b = (dict(transformer.MaskedLM(cfg, block, blocks.embed_with_positions, seed=0).named_parameters())
            for block in (blocks.encoder_block, blocks.decoder_block))
    assert a.keys() == b.keys() and all(bool((a[n] == b[n]).all()) for n in a)


def _06_sources(m):
    import datetime
    from learner import data
    for example in (m["a"], m["b"]):
        assert any(data.render(d, f) == example for f in data.FORMATS
                   for d in [datetime.date(2014, 2, 1), datetime.date(2013, 7, 27)]), example


def _07_stated(m):
    from helpers import STATED_ACCURACY
    assert STATED_ACCURACY["07_decoder.ipynb"] == int(m["pct"]) / 100


def _07_tagger(m):
    assert constant("07", "V_TAG") == int(m["V"])
    lengths = re.search(r"TRAIN_LENGTHS, TEST_LENGTH = range\((\d+), (\d+)\), (\d+)", code("07")).groups()
    assert (int(lengths[0]), int(lengths[1]) - 1, int(lengths[2])) == (int(m["lo"]), int(m["hi"]), int(m["test"]))
    assert (int(m["from"]), int(m["to"])) == (int(lengths[1]) - 1, int(lengths[2]) - 1)
    assert "max_len=TEST_LENGTH" in code("07") and int(m["rows"]) == int(lengths[2])


def _07_chance(m):
    assert constant("07", "V_TAG") == int(m["V"]) == int(m["guess"])


def _10_costs(m):
    import inspect
    from learner import capstone_runs as capstone
    defaults = inspect.signature(capstone.measure_costs).parameters
    assert (defaults["rounds"].default, defaults["steps"].default) == ({"five": 5}[m["rounds"]], int(m["steps"]))


def _05_sizes(m):
    assert (constant("05", "D"), constant("05", "d_h")) == (int(m["D"]), int(m["d_h"]))


def _05_untrained(m):
    """The untrained decoder's first step, on the notebook's batch: every one of the V probabilities within a factor
    2 of 1/V."""
    import torch
    from learner import data
    from learner.rnn_models import init_params
    from solutions.rnn import decoder_step, rnn_encode
    task, V = date_task(), int(m["V"])
    assert len(task.tgt_vocab) == V and "demo_pairs = task.train[:3]" in code("05")
    b = data.make_batch(task.train[:3], task.src_vocab, task.tgt_vocab)
    params = init_params(len(task.src_vocab), V, D=constant("05", "D"), d_h=constant("05", "d_h"), seed=0)
    _, c = rnn_encode(b["src"], b["src_mask"], params["E_src"], params["W_x_enc"], params["W_h_enc"], params["b_enc"])
    p = torch.softmax(decoder_step(torch.full((3,), data.BOS_ID), c, params)[0], dim=-1)
    assert bool(((p > 0.5 / V) & (p < 2 / V)).all()), f"from {p.min():.3f} to {p.max():.3f}; 1/V = {1 / V:.3f}"


def _05_target(m):
    assert {len(target) for _, target in date_task().test} == {int(m["chars"])}
    assert int(m["chars"]) + 1 == int(m["T_y"]) == int(m["times"])
    _05b_target_length(m)


def _05_underflow(m):
    import torch
    n, p = re.search(r"p = torch.full\(\((\d+),\), ([0-9.]+)\)", code("05")).groups()
    assert float(p) < 1 and torch.prod(torch.full((int(n),), float(p))).item() == 0.0


def _05_training(m):
    from helpers import STATED_ACCURACY
    assert (constant("05", "BATCH"), constant("05", "STEPS")) == (int(m["batch"]), int(m["steps"]))
    assert f"step % {m['every']} == 0" in code("05") and STATED_ACCURACY["05_rnn.ipynb"] == int(m["pct"]) / 100


def _05_gates(m):
    """The GRU's recurrent and input weights are three blocks of d_h rows, the LSTM's four, the tanh cell's one."""
    from learner.rnn_models import GatedSeq2Seq, init_params
    blocks = {"one": 1, "three": 3, "four": 4}
    D, d_h = constant("05", "D"), constant("05", "d_h")
    for cell in ("gru", "lstm"):
        rnn = GatedSeq2Seq(5, 5, D=D, d_h=d_h, cell=cell).encoder
        assert rnn.weight_hh_l0.shape[0] == rnn.weight_ih_l0.shape[0] == blocks[m[cell]] * d_h, (cell, rnn)
    assert init_params(5, 5, D=D, d_h=d_h)["W_h_enc"].shape[0] == blocks[m["tanh"]] * d_h
    assert f"step_cap({m['first']})" in code("05") and constant("05", "STEPS") == int(m["steps"])


def _05b_flops(m):
    """One training step of each model at the notebook's sizes, on its first batch: the floating-point operations
    of the attention model over the fixed context's, counted by FlopCounterMode."""
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode
    from learner import data
    from learner.rnn_models import AttentionSeq2Seq, FixedContextSeq2Seq
    from solutions.rnn_attention import attention_decoder_step
    task = date_task()
    b = next(data.batches(task.train, constant("05b", "BATCH"), task.src_vocab, task.tgt_vocab, seed=0))
    D, d_h, d_a, V_src, V = (constant("05b", "D"), constant("05b", "d_h"), constant("05b", "d_a"),
                             len(task.src_vocab), len(task.tgt_vocab))
    flops = {}
    for name, model in (("fixed", FixedContextSeq2Seq(V_src, V, D=D, d_h=d_h, seed=0)),
                        ("attention", AttentionSeq2Seq(V_src, V, D=D, d_h=d_h, d_a=d_a, seed=0,
                                                       step=attention_decoder_step))):
        with FlopCounterMode(display=False) as counter:
            logits = model(b["src"], b["src_mask"], b["tgt_in"])
            F.cross_entropy(logits.transpose(1, 2), b["tgt_out"].masked_fill(~b["tgt_mask"], -100)).backward()
        flops[name] = counter.get_total_flops()
    ratio = flops["attention"] / flops["fixed"]
    assert round(ratio) == int(m["ratio"]), f"{ratio:.2f} times"


def _07_prompts(m):
    assert f"tests = task.test[:{m['n']}]" in code("07")


def _08_training_steps():
    return int(re.search(r"steps=(\d+), lr=", code("08")).group(1))  # transformer.fit's


def _08_steps(m):
    from helpers import STATED_ACCURACY
    assert _08_training_steps() == int(m["steps"]) and constant("05", "STEPS") == int(m["rnn"])
    assert STATED_ACCURACY["08_encoder_decoder.ipynb"] == int(m["pct"]) / 100


def _08_third(m):
    from helpers import STATED_ACCURACY
    assert round(constant("05", "STEPS") / _08_training_steps()) == {"a third": 3}[m["third"]]
    assert (STATED_ACCURACY["08_encoder_decoder.ipynb"], STATED_ACCURACY["05_rnn.ipynb"]) == \
        (int(m["pct"]) / 100, int(m["rnn"]) / 100)


def _09_stated(m):
    from helpers import STATED_ACCURACY
    assert STATED_ACCURACY["09_kv_cache.ipynb"] == int(m["pct"]) / 100


def _09_cache(m):
    from solutions.kv_cache import kv_cache_bytes
    name = f"the same model serving {m['n']} texts of {m['T']}"
    sizes = ast.literal_eval(re.search(re.escape(f'("{name}", ') + r"(\([^)]*\))\)", code("09")).group(1))
    assert (sizes[3], sizes[4], sizes[5]) == (int(m["T"]), int(m["n"]), 2), sizes  # float16: 2 bytes a number
    assert kv_cache_bytes(*sizes) == int(m["c"]) * 2 ** 30, kv_cache_bytes(*sizes) / 2 ** 30
    assert round(int(m["b"]) * 10 ** 9 * 2 / 2 ** 30) == int(m["w"])


@functools.cache
def capstone_widths(budget):
    """{kind: the width that brings the capstone's model of that kind nearest ``budget`` parameters}."""
    from learner import capstone_runs as capstone
    return {kind: capstone.size_for(kind, budget, diary_task()) for kind in capstone.KINDS}


def _10_slowest(m):
    """One training step of each kind of run at the budget's widths, on one batch of diary lines: the decoder-only
    runs' floating-point operations are the most (a count the same on every machine)."""
    from torch.utils.flop_counter import FlopCounterMode
    from learner import capstone_runs as capstone
    from learner import data
    s = capstone.Settings()
    batch = next(data.shuffled(diary_task().train, s.batch_size, seed=0))
    flops = {}
    for kind, width in capstone_widths(s.budget).items():
        run = capstone.build(kind, width, diary_task(), prefix_mask=capstone.causal_lm_mask)
        with FlopCounterMode(display=False) as counter:
            run.loss(batch).backward()
        flops[kind] = counter.get_total_flops()
    decoders = {k for k in flops if k.startswith("decoder_")}
    assert len(decoders) == 2 and min(flops[k] for k in decoders) > max(v for k, v in flops.items()
                                                                         if k not in decoders), flops
    assert int(m["text"]) == 1 + data_max() + 1 + 10 + 1


def _embedding_sizes(number, m, model):
    """The ``model`` of notebook ``number``'s SIZES (learned positions): E's entries of size about 1/sqrt(D),
    E * sqrt(D)'s about 1, P's about ``m["p"]`` when the statement gives it (root mean squares within 10%)."""
    from learner import blocks, transformer
    sizes = constant(number, "SIZES")
    cfg = transformer.TransformerConfig(vocab_size=60, max_len=32, positions="learned", **sizes)
    assert f"transformer.{model}(" in code(number)
    embed = getattr(transformer, model)(cfg, blocks.encoder_block, blocks.embed_with_positions, seed=0).embed
    size = {"E": embed.E.pow(2).mean().sqrt().item(), "P": embed.P.pow(2).mean().sqrt().item()}
    D = sizes["d_model"]
    assert abs(size["E"] * math.sqrt(D) - 1) < 0.1 and abs(size["E"] * embed.scale - 1) < 0.1, (size, D)
    assert "p" not in m.groupdict() or abs(size["P"] / float(m["p"]) - 1) < 0.1, size


def _06_scale(m):
    _embedding_sizes("06", m, "MaskedLM")


def _07_scale(m):
    _embedding_sizes("07", m, "DecoderLM")


def _07_rows(m):
    """The notebook's own cell, run with the reference's decoder block and then with 06's encoder block: the rows
    that move when the tokens after row ``last`` change."""
    import contextlib
    import io
    import torch
    from solutions.decoder import decoder_block
    from solutions.encoder import encoder_block
    cell = next(c.source for c in cells("07") if c.cell_type == "code" and "changed = (decoder_block(x2" in c.source)
    moved = {}
    for name, block in (("decoder", decoder_block), ("encoder", encoder_block)):
        scope = {"torch": torch, "decoder_block": block}
        with contextlib.redirect_stdout(io.StringIO()):
            exec(cell, scope)  # noqa: S102 (the notebook's own code cell)
        moved[name] = [k for k, c in enumerate(scope["changed"].tolist()) if c > 0]
    last, T = int(m["last"]), len(scope["changed"])
    assert moved["decoder"] == [int(m["a"]), int(m["b"])] == list(range(last + 1, T)), moved
    assert moved["encoder"] == list(range(T)), moved


CLAIMS = [
    ("07", r"random tokens from a vocabulary of (?P<V>\d+), from (?P<lo>\d+) to (?P<hi>\d+)\s+tokens long in "
           r"training; the test texts are (?P<test>\d+) tokens long, so their positions (?P<from>\d+) to (?P<to>\d+) "
           r"were never seen.*?The learned table has (?P<rows>\d+) rows", _07_tagger),
    ("07", r"a guess among (?P<V>\d+) tokens is right 1 time in (?P<guess>\d+)", _07_chance),
    ("10", r"\(`capstone.measure_costs`: (?P<rounds>\w+) rounds, in each every run takes (?P<steps>\d+) training "
           r"steps", _10_costs),
    ("03", r"largest number is about \$(?P<max>[0-9.]+) \\times 10\^\{(?P<exp>\d+)\}\$, so\s+\$e\^\{(?P<over>\d+)\}\$ "
           r"already overflows", _03_floats),
    ("03", r"\(about \$10\^\{-(?P<tiny>\d+)\}\$ in float32\)", _03_smallest),
    ("03", r"(?P<n>Four) tokens already take it down to\s+\$(?P<a>\d) \\times 10\^\{-(?P<b>\d)\}\$", _03_product),
    ("06", r"the same initial weights, the same batches and the same steps", _06_same_weights),
    ("06", r"The texts are the sources of the date task of notebook 05 \(`\"(?P<a>[^\"]+)\"`,\s+`\"(?P<b>[^\"]+)\"`",
     _06_sources),
    ("07", r"the course's tests check that the full run\s+reaches at least (?P<pct>\d+)% \(`make test-figures`\)",
     _07_stated),
    ("01", r"cut by `data.tokenize`, which splits digits and punctuation off \(\"(?P<word>\w+)\" becomes\s+"
           r"`(?P<a>\w+)` and `(?P<b>\w+)`\)", _01_tokenizer),
    ("05b", r"runs from (?P<lo>\d+) tokens \(`(?P<short>[^`]+)`\) to (?P<hi>\d+) \(`(?P<long>[^`]+)`.*?the largest "
            r"group, about half of the test set, has (?P<most>\d+) \((?P<examples>[^)]*)\)", _05b_lengths),
    ("05", r"The shortest sources \((?P<a>\d+) tokens\) are all `(?P<short>[^`]+)`.*?longest \((?P<b>\d+) tokens\) all "
           r"`(?P<long>[^`]+)`.*?(?P<c>\d+) tokens mixes (?P<five>\w+) formats, from `(?P<x>[^`]+)` to `(?P<y>[^`]+)`",
     _05_formats),
    ("05b", r"(?P<a>\d+) tokens are only\s+`(?P<short>[^`]+)`.*?and (?P<b>\d+) only `(?P<long>[^`]+)`.*?every\s+length "
            r"between holds two formats or more \((?P<c>\d+) holds (?P<ten>\w+)\)", _05b_formats),
    ("05b", r"\(\$D = (?P<D>\d+)\$, \$d_h = (?P<d_h>\d+)\$; \$d_a = (?P<d_a>\d+)\$", _05b_widths),
    ("05b", r"At steps (?P<steps>500, 1000) and the last step", _05b_checkpoints),
    ("05b", r"every target\s+has \$T_y = (?P<T_y>\d+)\$ tokens, so \$\\mathcal\{L\} = (?P<L>\d+)\\,\\mathcal\{L\}_"
            r"\\text\{tok\}\$: the same minimum, and gradients\s+(?P<times>\d+) times smaller", _05b_target_length),
    ("05b", r"dates have at most (?P<short>\d+) source tokens, and (?P<d_h>\d+) numbers have room.*?up to "
            r"(?P<long>\d+)\s+tokens", _05b_long),
    ("06", r"the sizes of the picture in section 3: (?P<L>\d) blocks, \$D = (?P<D>\d+)\$, \$H = (?P<H>\d+)\$.*?"
           r"hides (?P<share>\d+)% of the tokens.*?trains (?P<steps>\d+) steps", _06_bert),
    ("06", r"sentences of (?P<n>\d+) tokens.*?Both have (?P<L>\d) blocks, \$D = (?P<D>\d+)\$, \$H = (?P<H>\d+)\$",
     _06_sense_models),
    ("06", r"on the (?P<probe>\d+) probe sentences \((?P<half>\d+) with the clue before the\s+word.*?three "
           r"standard errors of (?P<test>\d+) test sentences", _06_probe),
    ("07", r"stacked (?P<twice>twice) \(the sizes of section 1's\s+picture: \$D = (?P<D>\d+)\$, \$H = (?P<H>\d+)\$"
           r".*?The cell trains (?P<steps>\d+) steps", _07_gpt),
    ("07", r"\(\$D = (?P<D>\d+)\$, \$d_k = (?P<d_k>\d+)\$\), \$10000\^\{-2/\d+\} \\approx (?P<sin>[0-9.]+)\$ radians "
           r"per\s+position against RoPE's \$10000\^\{-2/\d+\} \\approx (?P<rope>[0-9.]+)\$", _07_frequencies),
    ("07", r"the models without a learned table start from identical weights;\s+the learned table's rows are drawn "
           r"first, so that model's blocks start from other random numbers", _07_same_seed),
    ("10", r"`dd.mm.yyyy` \(`\"(?P<dmy>[^\"]+)\"`\) or `mm/dd/yyyy` \(`\"(?P<mdy>[^\"]+)\"`.*?(?P<date>\d+) tokens "
           r"either way.*?from (?P<lo>\d+) tokens in all \(the date alone\) to (?P<hi>\d+)\..*?Half of the training "
           r"pairs are dates alone \(`bare=(?P<bare>[0-9.]+)`\), and so are the other half's lines drawn at\s+"
           r"10 tokens; a test line's length is drawn evenly from\s+the "
           r"(?P<span>\d+) lengths, so a date alone, a line of 10 tokens, is about 1 test line in (?P<one_in>\d+)\.",
     _10_lengths),
    ("10", r"(?P<runs>\w+) training runs of (?P<steps>[\d,]+) steps \((?P<seeded>\w+) seeds for three of the five "
           r"kinds of run\).*?up to (?P<text>\d+)\s+tokens", _10_runs),
    ("10", r"every model within (?P<pct>\d+)% of (?P<budget>[\d,]+) parameters", _10_budget),
    ("10", r"four blocks each \(the encoder-decoder two and two\),\s+(?P<heads>\d) heads, \$d_\{ff\} = 2D\$ and "
           r"sinusoidal positions for (?P<places>\d+) places.*?embed tokens in (?P<embed>\d+) numbers", _10_sizes),
    ("10", r"(?P<steps>[\d,]+) steps each, batches of (?P<batch>\d+) lines.*?three seeds each \(0, 1, 2.*?translates "
           r"the (?P<test>\d+) test lines.*?decodes (?P<greedy>\d+) test lines greedily", _10_training),
    ("10", r"The text `(?P<prefix><bos> (?P<source>[^=`]+?) =) \.\.\.`.*?positions 0 to (?P<last>\d+) \(the month's "
           r"two digits at (?P<i>\d+) and (?P<j>\d+)\)", _10_question),
    ("05", r"This notebook's model has \$D = (?P<D>\d+)\$ and \$d_h = (?P<d_h>\d+)\$", _05_sizes),
    ("05", r"An untrained decoder spreads its probability\s+almost evenly over the (?P<V>\d+) target tokens",
     _05_untrained),
    ("05", r"every ISO target is (?P<chars>\d+) characters and `<eos>`, \$T_y = (?P<T_y>\d+)\$, so the\s+loss is "
           r"(?P<times>\d+) times the average per token", _05_target),
    ("05", r"A product of many numbers below 1 quickly becomes too small for a float to hold \(the cell below\s+"
           r"shows it\)", _05_underflow),
    ("05", r"a batch of (?P<batch>\d+) pairs.*?Every (?P<every>\d+) steps the cell decodes.*?how long the "
           r"(?P<steps>\d+) steps took.*?reaches at least (?P<pct>\d+)% \(`make test-figures`\)", _05_training),
    ("05", r"for the first\s+(?P<first>\d+) of the (?P<steps>\d+) steps.*?a GRU cell has (?P<gru>\w+) blocks of "
           r"weights where the tanh cell has (?P<tanh>\w+), an LSTM (?P<lstm>\w+)\.", _05_gates),
    ("05b", r"a training\s+step of it does about (?P<ratio>\d+) times the floating-point operations of the "
            r"fixed-context model's", _05b_flops),
    ("07", r"Each setting below continues (?P<n>\d+) test prompts", _07_prompts),
    ("08", r"It trains for (?P<steps>\d+) steps and prints the test exact match and the time it took; the course's "
           r"tests\s+check that the full run reaches at least (?P<pct>\d+)% \(`make test-figures`\)\. Notebook 05's "
           r"RNN trained for\s+(?P<rnn>\d+) steps", _08_steps),
    ("08", r"trained for (?P<third>a third) of notebook 05's steps, which the course's tests hold\s+to a test exact "
           r"match of (?P<pct>\d+)% \(05's RNN: (?P<rnn>\d+)%\)", _08_third),
    ("09", r"\(the course's tests check that the full run reaches at least (?P<pct>\d+)%\)", _09_stated),
    ("09", r"The (?P<b>\d+)-billion-parameter model's weights take about (?P<w>\d+) GiB in float16; its cache for "
           r"(?P<n>\d+) texts of\s+(?P<T>\d+) tokens takes (?P<c>\d+) GiB", _09_cache),
    ("10", r"\(the decoder-only runs are the slowest, reading source and target as one text of up to "
           r"(?P<text>\d+)\s+tokens\)", _10_slowest),
    ("06", r"The embedding matrix starts with\s+entries of size about \$1/\\sqrt\{D\}\$, and the scale makes them of "
           r"size about 1.*?A learned table here starts much smaller \(entries of about (?P<p>[0-9.]+)\)", _06_scale),
    ("07", r"the token vectors are multiplied by \$\\sqrt\{D\}\$\s+before the positions are added \(entries of size "
           r"about 1, not \$1/\\sqrt\{D\}\$", _07_scale),
    ("07", r"Rows 0.(?P<last>\d) did not move; rows (?P<a>\d) and (?P<b>\d) did\. Run the encoder block of notebook 06 "
           r"the same way and\s+every row would move", _07_rows),
]


@pytest.mark.parametrize("number, pattern, check", [  # sizing the capstone's five models takes about 10 s
    pytest.param(n, p, c, id=f"{n}-{c.__name__.lstrip('_')}",
                 marks=[pytest.mark.experiment, pytest.mark.xdist_group("capstone_widths")]  # sized once
                 if c.__name__ in ("_10_budget", "_10_slowest") else []) for n, p, c in CLAIMS])
def test_a_statement_of_the_prose_is_what_the_code_computes(number, pattern, check):
    k, m = find(number, pattern)
    assert m, f"notebook {number}: the statement {check.__name__} checks is gone (update CLAIMS): {pattern[:120]!r}"
    try:
        check(m)
    except AssertionError as err:
        raise AssertionError(f"notebook {number}, cell {k}: {m.group(0)[:300]!r} is not what the code computes: "
                             f"{err}") from None
