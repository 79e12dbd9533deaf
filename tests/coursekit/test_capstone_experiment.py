"""Notebook 10's experiment (coursekit/capstone.py): one budget for every run, bad input in words, and a reduced
run whose wide-margin orderings hold (``make capstone`` runs it in full)."""
import json
import math

import pytest

from coursekit import capstone, data
from solutions.capstone import prefix_lm_mask


@pytest.fixture(scope="module")
def task():
    return data.make_date_task(n_train=20000, n_val=10, n_test=300, seed=0)


@pytest.mark.parametrize("budget", [60_000, 100_000, 150_000])
def test_every_run_is_sized_within_ten_percent_of_the_budget(task, budget):
    for kind in capstone.KINDS:
        width = capstone.size_for(kind, budget, task)
        n = capstone.n_params(capstone.build(kind, width, task, prefix_mask=prefix_lm_mask))
        assert abs(n - budget) <= capstone.TOLERANCE * budget, (kind, width, n)


def test_a_budget_too_small_for_a_model_is_refused_naming_its_smallest_size(task):
    smallest = capstone.n_params(capstone.build("encoder_decoder", capstone.WIDTHS["encoder_decoder"][0], task))
    with pytest.raises(ValueError) as info:
        capstone.size_for("encoder_decoder", 2_000, task)
    assert "too small" in str(info.value) and f"{smallest:,}" in str(info.value)


def test_a_source_length_outside_the_data_is_refused_naming_the_range(task):
    lo, hi = capstone.length_range(task.test)
    for n in (lo - 1, hi + 1):
        with pytest.raises(ValueError) as info:
            capstone.accuracy_by_length(lambda pairs: [""] * len(pairs), task.test, [n])
        assert f"source length {n}" in str(info.value) and f"{lo} to {hi}" in str(info.value)


def test_a_budget_between_two_sizes_is_refused_naming_the_nearest(task):
    with pytest.raises(ValueError, match=r"nearest are width 8 \(4,263\) and width 12 \(8,307\)"):
        capstone.size_for("encoder_decoder", 5_000, task)


def test_an_unknown_kind_and_a_prefix_run_without_a_mask_are_refused(task):
    with pytest.raises(ValueError, match="unknown model kind"):
        capstone.build("lstm", 32, task)
    with pytest.raises(ValueError, match="prefix_mask"):
        capstone.build("decoder_prefix", 32, task)


REDUCED_STEPS = 300


@pytest.mark.experiment
def test_a_reduced_run_keeps_the_budget_writes_its_results_and_shows_the_wide_margin_orderings(task, tmp_path):
    """The two RNNs and the encoder-decoder for 300 steps each (the notebook trains all five runs 2000 steps),
    evaluated on 300 test dates. At 300 steps only orderings with a wide margin are asserted: attention over the
    encoder states, in an RNN or in the transformer, is far ahead of the single context vector (in the notebook's
    full run 100% against 88%; here they are further apart). The decoder-only runs are left out to save time:
    notebook 10's reduced run (its reference submission, graded in the pipeline tests) trains all five end to end,
    and the budget test sizes them."""
    path = tmp_path / "capstone_results.json"
    kinds = ("rnn_fixed", "rnn_attention", "encoder_decoder")
    results = capstone.run(capstone.Settings(steps=REDUCED_STEPS, n_test=300, kinds=kinds), task=task,
                           results_path=str(path), report_every=REDUCED_STEPS)
    capstone.check_budget(results)
    saved = json.loads(path.read_text())
    assert saved["settings"]["steps"] == REDUCED_STEPS and set(saved["results"]) == set(kinds)
    for kind, r in saved["results"].items():
        assert len(r["curve"]) == REDUCED_STEPS and r["seconds_per_step"] > 0 and r["seconds_per_token"] > 0
        lo, hi = capstone.length_range(task.test)
        assert set(map(int, r["by_length"])) == set(range(lo, hi + 1))
        assert not any(math.isnan(a) for a in r["by_length"].values())
    acc = {k: r.exact_match for k, r in results.items()}
    assert acc["rnn_attention"] >= acc["rnn_fixed"] + 0.3, acc
    assert acc["encoder_decoder"] >= acc["rnn_fixed"] + 0.3, acc


@pytest.mark.figures
@pytest.mark.timeout(3600)
def test_the_full_experiment_gives_the_figures_notebook_10_states(tmp_path):
    """`make test-figures`: the five runs of 2000 steps on the 2000 test dates, as the notebook runs them: the
    fixed-context RNN at 88.3% overall and 72.3% on 11-token sources, every attention model at 100%."""
    results = capstone.run(capstone.Settings(), prefix_mask=prefix_lm_mask, results_path=str(tmp_path / "r.json"))
    acc = {k: r.exact_match for k, r in results.items()}
    assert 0.83 <= acc["rnn_fixed"] <= 0.93, acc
    assert 0.65 <= results["rnn_fixed"].by_length[11] <= 0.80, results["rnn_fixed"].by_length
    assert all(acc[k] >= 0.99 for k in capstone.KINDS if k != "rnn_fixed"), acc
