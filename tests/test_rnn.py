"""Notebook 05, the RNN encoder-decoder: the reference against PyTorch, the decoders against search by
hand, the date task, and the grader's verdicts on the known mistakes."""
import itertools
import math
import textwrap

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import grader
import solutions.rnn as rnn
from coursekit import data
from coursekit import rnn as rnn_models
from coursekit.notebooks import SOURCE_DIR
from coursekit import samples
from coursekit.samples import ONE_BUG, as_learner, edited_source
from grader import EXERCISES, CheckFailed, check

NOTEBOOK = "05_rnn"
NAMES = [name for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK]
BOS, EOS = 1, 2


def params(V_src=7, V=6, D=3, H=5, seed=0, out_scale=1.0):
    p = rnn_models.init_params(V_src, V, D, H, seed=seed, dtype=torch.float64)
    p["W_out"] = p["W_out"] * out_scale
    return p


def contexts(B, H, seed=0):
    return torch.tanh(torch.randn(B, H, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 1.5)


def log_prob(p, c, tokens):
    """log P(tokens | c) by running decoder_step along them."""
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


# ---------------------------------------------------------------- the cell and the encoder
def test_hand_cell_equals_nn_rnn_tanh_forward_and_gradients():
    """rnn_encode with nn.RNN's weights copied in gives nn.RNN's outputs, final state and gradients."""
    torch.manual_seed(0)
    B, T, V_src, D, H = 3, 6, 9, 4, 5
    ref = nn.RNN(D, H, nonlinearity="tanh", batch_first=True).double()
    E = torch.randn(V_src, D, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, V_src, (B, T))
    W_x, W_h = ref.weight_ih_l0, ref.weight_hh_l0
    b = ref.bias_ih_l0 + ref.bias_hh_l0

    states, context = rnn.rnn_encode(ids, None, E, W_x, W_h, b)
    out, h_n = ref(E[ids])
    torch.testing.assert_close(states, out)
    torch.testing.assert_close(context, h_n[0])

    mine = torch.autograd.grad((states ** 2).sum() + context.sum(), [E, W_x, W_h, ref.bias_ih_l0])
    theirs = torch.autograd.grad((out ** 2).sum() + h_n[0].sum(), [E, W_x, W_h, ref.bias_ih_l0])
    for g_mine, g_theirs in zip(mine, theirs):
        torch.testing.assert_close(g_mine, g_theirs)


def test_rnn_cell_is_one_step_of_nn_rnn_cell():
    torch.manual_seed(1)
    cell = nn.RNNCell(3, 4, nonlinearity="tanh").double()
    x, h = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)
    ours = rnn.rnn_cell(x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih + cell.bias_hh)
    torch.testing.assert_close(ours, cell(x, h))
    g1 = torch.autograd.grad(ours.sum(), cell.weight_hh)[0]
    g2 = torch.autograd.grad(cell(x, h).sum(), cell.weight_hh)[0]
    torch.testing.assert_close(g1, g2)


def test_context_of_a_padded_batch_equals_the_unpadded_run_of_each_sentence():
    """c = h_{T_x} is the state after each sentence's last real token, whatever padding follows it."""
    p = params()
    lengths = [6, 4, 1, 0]
    ids = torch.randint(3, 7, (4, 6), generator=torch.Generator().manual_seed(2))
    mask = torch.arange(6)[None, :] < torch.tensor(lengths)[:, None]
    ids = ids.masked_fill(~mask, 0)
    enc = (p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])
    states, context = rnn.rnn_encode(ids, mask, *enc)
    for b, n in enumerate(lengths):
        s_alone, c_alone = rnn.rnn_encode(ids[b:b + 1, :n], None, *enc)
        torch.testing.assert_close(context[b], c_alone[0])
        torch.testing.assert_close(states[b, :n], s_alone[0])
        assert not states[b, n:].any(), "padding positions hold 0"
    # and the same as nn.RNN on a packed batch
    ref = nn.RNN(3, 5, batch_first=True).double()
    with torch.no_grad():
        ref.weight_ih_l0.copy_(p["W_x_enc"]), ref.weight_hh_l0.copy_(p["W_h_enc"])
        ref.bias_ih_l0.copy_(p["b_enc"]), ref.bias_hh_l0.zero_()
    packed = nn.utils.rnn.pack_padded_sequence(p["E_src"][ids[:3]], torch.tensor(lengths[:3]), batch_first=True)
    _, h_n = ref(packed)
    torch.testing.assert_close(context[:3], h_n[0])


def test_an_empty_source_or_an_all_padding_sentence_gets_the_initial_state():
    p = params()
    enc = (p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])
    states, context = rnn.rnn_encode(torch.zeros(2, 0, dtype=torch.long), torch.zeros(2, 0, dtype=torch.bool), *enc)
    assert states.shape == (2, 0, 5) and torch.equal(context, torch.zeros(2, 5, dtype=torch.float64))
    states, context = rnn.rnn_encode(torch.tensor([[4, 5], [0, 0]]), torch.tensor([[True, True], [False, False]]),
                                     *enc)
    assert torch.equal(context[1], torch.zeros(5, dtype=torch.float64)) and context[0].abs().sum() > 0


# ---------------------------------------------------------------- decoder, teacher forcing, loss
def test_teacher_forced_logits_equal_decoder_steps_on_the_true_tokens():
    p, c = params(), contexts(3, 5)
    tgt_in = torch.tensor([[BOS, 4, 5, 3], [BOS, 3, 0, 0], [BOS, 5, 5, 4]])
    logits = rnn.teacher_forced_logits(c, tgt_in, p)
    h = c
    for t in range(4):
        step_logits, h = rnn.decoder_step(tgt_in[:, t], h, p)
        torch.testing.assert_close(logits[:, t], step_logits)


def test_loss_equals_cross_entropy_summed_with_ignore_index_and_divided_by_B():
    torch.manual_seed(3)
    B, T, V = 4, 7, 11
    logits = torch.randn(B, T, V, dtype=torch.float64) * 2
    targets = torch.randint(0, V, (B, T))
    mask = torch.arange(T)[None, :] < torch.tensor([7, 3, 1, 0])[:, None]
    ours = rnn.seq2seq_loss(logits, targets, mask)
    with_pad = targets.masked_fill(~mask, data.PAD_ID)
    padded_out = logits.masked_fill(~mask[..., None], 0.0)  # whatever the padded logits are
    theirs = F.cross_entropy(logits.reshape(-1, V), targets.masked_fill(~mask, -100).reshape(-1),
                             ignore_index=-100, reduction="sum") / B
    torch.testing.assert_close(ours, theirs)
    torch.testing.assert_close(rnn.seq2seq_loss(padded_out, with_pad, mask), theirs)
    # with real targets that are never <pad>, ignore_index=pad gives the same number
    real = targets.clamp_min(1).masked_fill(~mask, data.PAD_ID)
    torch.testing.assert_close(rnn.seq2seq_loss(logits, real, mask),
                               F.cross_entropy(logits.reshape(-1, V), real.reshape(-1), ignore_index=data.PAD_ID,
                                               reduction="sum") / B)
    torch.testing.assert_close(rnn.seq2seq_loss(logits, targets),
                               F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="sum") / B)


# ---------------------------------------------------------------- greedy and beam search
def test_greedy_stops_at_max_len_when_eos_never_comes_and_pads_after_eos():
    p = params(out_scale=3.0)
    p["b_out"] = p["b_out"].clone()
    p["b_out"][EOS] = -80.0
    tokens, lp = rnn.greedy_decode(contexts(3, 5), p, BOS, EOS, max_len=9)
    assert tokens.shape == (3, 9) and (tokens != EOS).all()
    p["b_out"][EOS] = 80.0
    tokens, lp = rnn.greedy_decode(contexts(3, 5), p, BOS, EOS, max_len=9)
    assert tokens.tolist() == [[EOS]] * 3 and torch.allclose(lp, torch.zeros(3, dtype=torch.float64))
    from grader.cases.rnn import _greedy_edge
    case = next(c for c in _greedy_edge() if "different steps" in c.what)
    tokens, lp = rnn.greedy_decode(*case.args, **case.kwargs)
    ends = [row.index(EOS) if EOS in row else None for row in tokens.tolist()]
    assert len(set(ends)) > 2
    for row, end in zip(tokens.tolist(), ends):
        if end is not None:
            assert all(t == 0 for t in row[end + 1:])


@pytest.mark.parametrize("seed", range(6))
def test_beam_width_one_equals_greedy(seed):
    p, C = params(seed=seed, out_scale=2.0), contexts(4, 5, seed)
    tokens, lp = rnn.greedy_decode(C, p, BOS, EOS, max_len=8)
    for i in range(4):
        seqs, scores = rnn.beam_search(C[i], p, BOS, EOS, beam_width=1, max_len=8)
        row = tokens[i].tolist()
        row = row[:row.index(EOS) + 1] if EOS in row else row
        assert seqs == [row]
        torch.testing.assert_close(scores[0], lp[i])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("length_norm", [False, True])
def test_a_vocabulary_wide_beam_finds_the_exhaustive_optimum(seed, length_norm):
    """V = 4: width V at max_len 2, and width V^2 (every prefix kept) at max_len 3, equal searching everything."""
    V = 4
    p, c = params(V=V, seed=seed, out_scale=3.0), contexts(1, 5, seed)[0]
    for width, max_len in ((V, 2), (V * V, 3)):
        every = all_sequences(V, max_len)
        score = {tuple(s): log_prob(p, c, s) / (len(s) if length_norm else 1) for s in every}
        best = max(score, key=score.get)
        seqs, scores = rnn.beam_search(c, p, BOS, EOS, beam_width=width, max_len=max_len, length_norm=length_norm)
        assert tuple(seqs[0]) == best
        assert math.isclose(scores[0].item(), log_prob(p, c, seqs[0]), rel_tol=1e-9, abs_tol=1e-12)
        assert len(seqs) == min(width, len(every))


def test_a_wider_beam_can_beat_greedy():
    """The edge case shipped with the grader: width 5 finds a more probable sentence than greedy."""
    from grader.cases.rnn import _beam_edge
    case = next(c for c in _beam_edge() if "better sequence than greedy" in c.what)
    c, p = case.args[0], case.args[1]
    greedy, _ = rnn.beam_search(c, p, BOS, EOS, beam_width=1, max_len=6)
    wide, scores = rnn.beam_search(c, p, BOS, EOS, **case.kwargs)
    assert wide[0] != greedy[0] and log_prob(p, c, wide[0]) > log_prob(p, c, greedy[0])


def test_finished_hypotheses_are_never_extended():
    p = params(seed=4, out_scale=2.0)
    seqs, _ = rnn.beam_search(contexts(1, 5, 4)[0], p, BOS, EOS, beam_width=6, max_len=6)
    assert all(EOS not in s[:-1] for s in seqs)


@pytest.mark.parametrize("call, argument", [
    (lambda p, c: rnn.beam_search(c[0], p, BOS, EOS, beam_width=0, max_len=5), "beam_width"),
    (lambda p, c: rnn.beam_search(c[0], p, BOS, EOS, beam_width=-2, max_len=5), "beam_width"),
    (lambda p, c: rnn.beam_search(c[0], p, BOS, EOS, beam_width=2, max_len=0), "max_len"),
    (lambda p, c: rnn.greedy_decode(c, p, BOS, EOS, max_len=0), "max_len"),
    (lambda p, c: rnn.beam_search(c, p, BOS, EOS, beam_width=2, max_len=3), "context"),
    (lambda p, c: rnn.rnn_cell(torch.zeros(2, 4), torch.zeros(2, 5), p["W_x_enc"], p["W_h_enc"], p["b_enc"]), "D"),
    (lambda p, c: rnn.seq2seq_loss(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.long),
                                   torch.ones(2, 2, dtype=torch.bool)), "mask"),
])
def test_bad_arguments_raise_value_errors_that_name_them(call, argument):
    with pytest.raises(ValueError, match=argument):
        call(params(), contexts(2, 5))


# ---------------------------------------------------------------- the modules
def test_seq2seq_module_is_the_exercise_functions_and_trains():
    torch.manual_seed(0)
    task = data.make_date_task(n_train=256, n_val=16, n_test=16, seed=1)
    batch = data.make_batch(task.train[:64], task.src_vocab, task.tgt_vocab)
    model = rnn_models.Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), D=8, H=16, seed=0, rnn_encode=rnn.rnn_encode,
                               teacher_forced_logits=rnn.teacher_forced_logits)
    p = model.params
    _, c = rnn.rnn_encode(batch["src"], batch["src_mask"], p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])
    logits = model(batch["src"], batch["src_mask"], batch["tgt_in"])
    torch.testing.assert_close(logits, rnn.teacher_forced_logits(c, batch["tgt_in"], p))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = None
    for _ in range(40):
        loss = rnn.seq2seq_loss(model(batch["src"], batch["src_mask"], batch["tgt_in"]), batch["tgt_out"],
                                batch["tgt_mask"])
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.6 * first


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_cell_is_swappable_for_gru_and_lstm(cell):
    task = data.make_date_task(n_train=64, n_val=8, n_test=8, seed=2)
    batch = data.make_batch(task.train[:5], task.src_vocab, task.tgt_vocab)
    model = rnn_models.GatedSeq2Seq(len(task.src_vocab), len(task.tgt_vocab), D=8, H=16, cell=cell)
    logits = model(batch["src"], batch["src_mask"], batch["tgt_in"])
    assert logits.shape == batch["tgt_in"].shape + (len(task.tgt_vocab),)
    rnn.seq2seq_loss(logits, batch["tgt_out"], batch["tgt_mask"]).backward()
    assert all(p.grad is not None for p in model.parameters())
    # the padded sentence's context is that of the sentence alone
    state = model.encode(batch["src"], batch["src_mask"])
    n = int(batch["src_mask"][1].sum())
    alone = model.encode(batch["src"][1:2, :n], batch["src_mask"][1:2, :n])
    first = (lambda s: s[0]) if cell == "lstm" else (lambda s: s)
    torch.testing.assert_close(first(state)[:, 1], first(alone)[:, 0])
    with pytest.raises(ValueError, match="cell"):
        rnn_models.GatedSeq2Seq(5, 5, cell="transformer")


# ---------------------------------------------------------------- the date task
def test_the_date_task_is_deterministic_and_its_splits_are_disjoint():
    a, b = data.make_date_task(seed=0), data.make_date_task(seed=0)
    assert a == b
    assert data.make_date_task(seed=1).train != a.train
    assert (len(a.train), len(a.val), len(a.test)) == (20000, 1000, 2000)
    days = [{t for _, t in split} for split in (a.train, a.val, a.test)]
    assert sum(map(len, days)) == len(set().union(*days)), "a calendar day appears in two splits"
    sources = [{s for s, _ in split} for split in (a.train, a.val, a.test)]
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])
    # the test set does not depend on how much training data is asked for
    assert data.make_date_task(n_train=500, seed=0).test == a.test


def test_the_date_task_maps_every_format_to_iso_with_different_lengths():
    import datetime
    d = datetime.date(2024, 3, 5)
    renders = {f: data.render(d, f) for f in data.FORMATS}
    assert renders["month d, yyyy"] == "march 5, 2024" and renders["dd.mm.yyyy"] == "05.03.2024"
    assert data.render(datetime.date(2011, 1, 11), "the dth of month yyyy") == "the 11th of january 2011"
    assert data.render(datetime.date(2011, 1, 22), "the dth of month yyyy") == "the 22nd of january 2011"
    task = data.make_date_task(n_train=2000, seed=0)
    for source, target in task.train[:200]:
        assert target == data.iso(datetime.date.fromisoformat(target)) and len(data.tokenize(target)) == 10
    differ = sum(len(data.tokenize(s)) != len(data.tokenize(t)) for s, t in task.train) / len(task.train)
    assert differ > 0.5, "T_x != T_y for most pairs"
    assert {len(data.tokenize(s)) for s, _ in task.test} >= {6, 7, 8, 9, 10, 11}


def test_vocabularies_follow_notebook_01_and_ids_round_trip():
    task = data.make_date_task(n_train=3000, seed=0)
    for vocab in (task.src_vocab, task.tgt_vocab):
        assert [vocab[t] for t in data.SPECIALS] == [0, 1, 2, 3]
        assert sorted(vocab.values()) == list(range(len(vocab)))
    assert data.tokenize("March 5, 2024") == ["march", "5", ",", "2", "0", "2", "4"]
    assert set(task.tgt_vocab) == set(data.SPECIALS) | set("0123456789-")
    for source, target in task.test[:50]:
        assert data.to_text(data.to_ids(target, task.tgt_vocab, bos=True, eos=True), task.tgt_vocab) == target
        assert data.to_text(data.to_ids(source, task.src_vocab), task.src_vocab, sep=" ") == " ".join(
            data.tokenize(source))
    batch = data.make_batch(task.test[:4], task.src_vocab, task.tgt_vocab)
    assert (batch["tgt_in"][:, 0] == data.BOS_ID).all()
    real = batch["tgt_mask"][:, 1:]
    assert torch.equal(batch["tgt_out"][:, :-1][real], batch["tgt_in"][:, 1:][real])  # one step to the left
    assert torch.equal(batch["src_mask"], batch["src"] != data.PAD_ID)


# ---------------------------------------------------------------- the grader
def mistakes_as_learner():
    return samples.mistakes_as_learner("rnn")


def test_notebook_05_registers_its_seven_exercises():
    assert NAMES == ["rnn_cell", "rnn_encode", "decoder_step", "teacher_forced_logits", "seq2seq_loss",
                     "greedy_decode", "beam_search"]


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_as_learner_code_passes_every_part(name, capsys):
    fn = as_learner({name: None})[name]
    for part in grader.PARTS:
        check(name, fn, part)
    assert capsys.readouterr().out.count("PASSED") == len(grader.PARTS)


def test_the_one_bug_sample_of_notebook_05_is_a_known_mistake():
    name, _, (old, new) = ONE_BUG[NOTEBOOK]
    fn = as_learner({name: edited_source(name, old, new)})[name]
    with pytest.raises(CheckFailed, match="the context was taken after the padding"):
        check(name, fn, "basic")


def test_properties_report_a_padding_leak_and_a_beam_that_is_not_greedy():
    from grader.cases.rnn import _beam_width_one_is_greedy, _padded_context_equals_unpadded, \
        _wide_beam_is_exhaustive
    ns = mistakes_as_learner()
    assert "the padding changed it" in _padded_context_equals_unpadded(ns["rnn_encode_context_after_padding"])
    assert _padded_context_equals_unpadded(as_learner({"rnn_encode": None})["rnn_encode"]) is None
    beam = as_learner({"beam_search": None})["beam_search"]
    assert _beam_width_one_is_greedy(beam) is None and _wide_beam_is_exhaustive(beam) is None
    message = _wide_beam_is_exhaustive(ns["beam_search_no_cumulative"])
    assert message and "searching all" in message


def test_a_greedy_decoder_that_waits_for_eos_forever_is_stopped_and_reported(monkeypatch):
    monkeypatch.setattr(grader._safe, "DEFAULT_TIME_LIMIT", 0.5)
    fn = as_learner({"greedy_decode": textwrap.dedent('''
        def greedy_decode(context, params, bos_id, eos_id, max_len):
            if max_len < 1:
                raise ValueError("max_len")
            h, prev, out, total = context, torch.full((context.shape[0],), bos_id), [], 0
            while True:                                   # "until <eos>": no max_len
                e = params["E_tgt"][prev]
                h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
                lp, prev = torch.log_softmax(h @ params["W_out"].T + params["b_out"], -1).max(-1)
                out.append(prev)
                total = total + lp
                if bool((torch.stack(out, 1) == eos_id).any(1).all()):
                    return torch.stack(out, 1), total
    ''')})["greedy_decode"]
    with pytest.raises(CheckFailed, match="did not finish within 0.5 s"):
        check("greedy_decode", fn, "edge")


# ---------------------------------------------------------------- the notebook's helpers
def test_the_notebook_imports_its_helpers_and_copies_none():
    """init_params, Seq2Seq and GatedSeq2Seq come from coursekit.rnn; the notebook holds no copy of them."""
    nb = nbformat.read(f"{SOURCE_DIR}/{NOTEBOOK}/{NOTEBOOK}.ipynb", as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    assert "from coursekit.rnn import" in code
    assert not any(f"def {name}(" in code or f"class {name}(" in code for name in ("init_params", "Seq2Seq",
                                                                                      "GatedSeq2Seq"))
    assert "rnn_encode=rnn_encode" in code and "teacher_forced_logits=teacher_forced_logits" in code


def test_seq2seq_runs_the_functions_it_is_given():
    """Seq2Seq's forward is the rnn_encode and teacher_forced_logits passed to it, not the reference's."""
    calls = []

    def encode(*args):
        calls.append("encode")
        return rnn.rnn_encode(*args)

    def decode(*args):
        calls.append("decode")
        return rnn.teacher_forced_logits(*args)

    model = rnn_models.Seq2Seq(6, 5, D=3, H=4, rnn_encode=encode, teacher_forced_logits=decode)
    model(torch.tensor([[3, 4]]), None, torch.tensor([[1, 3]]))
    assert calls == ["encode", "decode"]
