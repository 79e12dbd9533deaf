"""Notebook 05's models (learner.rnn_models), the date task (learner.data) and the notebook's helpers."""

import nbformat
import pytest
import torch

import solutions.rnn as rnn
from learner import data
from learner import rnn_models
from coursekit.sync import SOURCE_DIR
from learner.check import EXERCISES

NOTEBOOK = "05_rnn"
# the exercises, not the self-check questions
NAMES = [name for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK and ex.answer is None]


# ---------------------------------------------------------------- the modules
def test_seq2seq_module_is_the_exercise_functions_and_trains():
    torch.manual_seed(0)
    task = data.make_date_task(n_train=256, n_val=16, n_test=16, seed=1)
    batch = data.make_batch(task.train[:64], task.src_vocab, task.tgt_vocab)
    model = rnn_models.Seq2Seq(len(task.src_vocab), len(task.tgt_vocab), D=8, d_h=16, seed=0, rnn_encode=rnn.rnn_encode,
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
    model = rnn_models.GatedSeq2Seq(len(task.src_vocab), len(task.tgt_vocab), D=8, d_h=16, cell=cell)
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


# ---------------------------------------------------------------- the notebook's helpers
def test_the_notebook_imports_its_helpers_and_copies_none():
    """init_params, Seq2Seq and GatedSeq2Seq come from learner.rnn_models; the notebook holds no copy of them."""
    nb = nbformat.read(f"{SOURCE_DIR}/{NOTEBOOK}/{NOTEBOOK}.ipynb", as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    assert "from learner.rnn_models import" in code
    assert not any(f"def {name}(" in code or f"class {name}(" in code for name in ("init_params", "Seq2Seq",
                                                                                      "GatedSeq2Seq"))
    assert "rnn_encode=rnn_encode" in code and "teacher_forced_logits=teacher_forced_logits" in code


def test_seq2seq_runs_the_functions_it_is_given():
    """Seq2Seq's forward is the rnn_encode and teacher_forced_logits passed to it, not the reference's."""
    calls = []

    def encode(*args):
        calls.append("encode")
        return rnn.rnn_encode(*args)

    def teacher_forced(*args):
        calls.append("teacher_forced")
        return rnn.teacher_forced_logits(*args)

    model = rnn_models.Seq2Seq(6, 5, D=3, d_h=4, rnn_encode=encode, teacher_forced_logits=teacher_forced)
    model(torch.tensor([[3, 4]]), None, torch.tensor([[1, 3]]))
    assert calls == ["encode", "teacher_forced"]
