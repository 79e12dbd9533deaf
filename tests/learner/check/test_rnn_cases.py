"""Notebook 05, the grader: its exercises, the reference and the known mistakes as learner code, properties."""
import textwrap

import pytest

import learner.check
from coursekit.samples import ONE_BUG, edited_source
from learner.check import EXERCISES, CheckFailed, check
from helpers import as_learner, mistakes_as_learner

NOTEBOOK = "05_rnn"
# the exercises, not the self-check questions
NAMES = [name for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK and ex.answer is None]


# ---------------------------------------------------------------- the grader
def known_mistakes():
    return mistakes_as_learner("rnn")


def test_notebook_05_registers_its_seven_exercises():
    assert NAMES == ["rnn_cell", "rnn_encode", "decoder_step", "teacher_forced_logits", "seq2seq_loss",
                     "greedy_decode", "beam_search"]


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_as_learner_code_passes_every_part(name, capsys):
    fn = as_learner({name: None})[name]
    for part in learner.check.parts_of(name):
        check(name, fn, part)
    assert capsys.readouterr().out.count("PASSED") == len(learner.check.parts_of(name))


def test_the_one_bug_sample_of_notebook_05_is_a_known_mistake():
    name, _, (old, new) = ONE_BUG[NOTEBOOK]
    fn = as_learner({name: edited_source(name, old, new)})[name]
    with pytest.raises(CheckFailed, match="the context was taken after the padding"):
        check(name, fn, "basic")


def test_properties_report_a_padding_leak_and_a_beam_that_is_not_greedy():
    from learner.check.cases.rnn import _beam_width_one_is_greedy, _padded_context_equals_unpadded, \
        _wide_beam_is_exhaustive
    ns = known_mistakes()
    assert "the padding changed it" in _padded_context_equals_unpadded(ns["rnn_encode_context_after_padding"])
    assert _padded_context_equals_unpadded(as_learner({"rnn_encode": None})["rnn_encode"]) is None
    beam = as_learner({"beam_search": None})["beam_search"]
    assert _beam_width_one_is_greedy(beam) is None and _wide_beam_is_exhaustive(beam) is None
    message = _wide_beam_is_exhaustive(ns["beam_search_no_cumulative"])
    assert message and "searching all" in message


def test_a_greedy_decoder_that_waits_for_eos_forever_is_stopped_and_reported(monkeypatch):
    monkeypatch.setattr(learner.check.safe, "DEFAULT_TIME_LIMIT", 0.5)
    fn = as_learner({"greedy_decode": textwrap.dedent('''
        def greedy_decode(context, params, bos_id, eos_id, max_len):
            if max_len < 0:
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
    with pytest.raises(CheckFailed, match=r"Other failing cases show: a time-out \(case \d+: it did not finish "
                                          r"within \S+ s of computing and was stopped in `greedy_decode`"):  # never ends
        check("greedy_decode", fn, "edge")


