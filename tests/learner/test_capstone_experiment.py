"""Notebook 10's experiment (learner/capstone_runs.py) and its task (data.make_diary_task; data.make_long_date_task, the
other variant): one budget for every run, lengths that say nothing about the format, verdicts that are greedy decoding's, costs measured in turns and
in CPU time, bad input in words, and a reduced run whose wide-margin orderings hold (``make capstone`` runs it in
full)."""
import collections
import datetime
import json
import math
import os

import pytest
import torch

from learner import capstone_runs as capstone, data
from solutions.capstone import prefix_lm_mask


@pytest.fixture(scope="module")
def task():
    return data.make_date_task(n_train=20000, n_val=10, n_test=300, seed=0)


# ---------------------------------------------------------------- the long task
@pytest.fixture(scope="module")
def lines():
    """6,000 test lines of the long task beside the same days' bare dates of the short task."""
    return list(zip(data.make_long_date_task(n_train=100, n_val=0, n_test=6000, seed=0).test,
                    data.make_date_task(n_train=100, n_val=0, n_test=6000, seed=0).test))


def test_a_line_is_its_days_bare_date_then_a_note_and_its_target_is_the_same(lines):
    lo, hi = data.LONG_LENGTHS
    for (line, target), (date, iso) in lines[:2000]:
        assert target == iso and line.startswith(date + " "), (line, date)
        assert lo <= capstone.source_length(line) <= hi
        assert set(line[len(date) + 1:].split(" ")) <= set(data.NOTE_WORDS), line


def test_the_training_set_mixes_bare_dates_and_lines_and_the_evaluation_sets_hold_lines_only():
    long, short = (make(n_train=4000, n_val=200, n_test=200, seed=0)
                   for make in (data.make_long_date_task, data.make_date_task))
    bare = sum(a == b for a, b in zip(long.train, short.train)) / len(long.train)
    assert 0.45 <= bare <= 0.55 and [t for _, t in long.train] == [t for _, t in short.train]
    for split in ("val", "test"):
        assert capstone.length_range(getattr(long, split)) == data.LONG_LENGTHS and data.LONG_LENGTHS[1] >= 40
    only_lines = data.make_long_date_task(n_train=300, n_val=0, n_test=10, seed=0, bare=0)
    assert min(capstone.source_length(s) for s, _ in only_lines.train) >= data.LONG_LENGTHS[0]


def test_in_the_long_task_a_lines_length_says_nothing_about_its_dates_format(lines):
    """Every format comes at every length bin (about 1,000 lines each), in shares within 4.5 points of its share
    overall (about 12.5%: three standard deviations of a bin's share are 3.1 points)."""
    bins = capstone.length_bins(*data.LONG_LENGTHS, 5)
    table = collections.Counter()
    for (line, target), (date, _) in lines:
        fmt = next(f for f in data.FORMATS if data.render(datetime.date.fromisoformat(target), f) == date)
        n = capstone.source_length(line)
        table[fmt, next(b for b in bins if b[0] <= n <= b[1])] += 1
    total = sum(table.values())
    for fmt in data.FORMATS:
        share = sum(table[fmt, b] for b in bins) / total
        for b in bins:
            in_bin = sum(table[f, b] for f in data.FORMATS)
            assert abs(table[fmt, b] / in_bin - share) < 0.045, (fmt, b, table[fmt, b] / in_bin, share)


def test_a_long_task_whose_lengths_cannot_hold_a_date_and_a_note_is_refused():
    for lengths in ((11, 40), (20, 19)):
        with pytest.raises(ValueError, match="source lengths must run from more than 11 tokens"):
            data.make_long_date_task(n_train=10, n_val=1, n_test=1, lengths=lengths)
    with pytest.raises(ValueError, match="share of bare dates must lie between 0 and 1"):
        data.make_long_date_task(n_train=10, n_val=1, n_test=1, bare=1.5)


# ---------------------------------------------------------------- the diary (notebook 10's task)
@pytest.fixture(scope="module")
def diary():
    """6,000 test lines of the diary, and its training pairs."""
    return data.make_diary_task(n_train=4000, n_val=0, n_test=6000, seed=0)


def _date_in(line):
    """(the line's date, its format, the words before it, the words after it)."""
    words = line.split(" ")
    at = next(i for i, w in enumerate(words) if w[:1].isdigit())
    return words[at], "dd.mm.yyyy" if "." in words[at] else "mm/dd/yyyy", words[:at], words[at + 1:]


def test_a_diary_line_is_its_days_numeric_date_among_note_words_and_its_target_is_that_day(diary):
    lo, hi = data.DIARY_LENGTHS
    assert hi >= 40
    days = [t for _, t in data.make_date_task(n_train=4000, n_val=0, n_test=6000, seed=0).test]
    assert [t for _, t in diary.test] == days  # the short task's days and splits
    for line, target in diary.test[:2000]:
        date, _, before, after = _date_in(line)
        assert date in [data.render(datetime.date.fromisoformat(target), f) for f in data.DIARY_FORMATS], line
        assert lo <= capstone.source_length(line) <= hi
        assert set(before + after) <= set(data.NOTE_WORDS), line


def test_in_the_diary_a_lines_length_says_nothing_about_its_format_and_the_longer_the_line_the_more_follows_the_date(
        diary):
    """Both formats come at every length bin (about 850 lines each) in shares within 6 points of a half (three
    standard deviations are 5.1 points); the date ends every line of the shortest length and none of the longest,
    and in each bin it ends the lines with the chance (hi - n) / (hi - lo), within 5 points."""
    lo, hi = data.DIARY_LENGTHS
    bins = capstone.length_bins(lo, hi, 5)
    fmts, last, lines, chance = collections.Counter(), collections.Counter(), collections.Counter(), {}
    for line, _ in diary.test:
        n = capstone.source_length(line)
        b = next(b for b in bins if b[0] <= n <= b[1])
        _, fmt, _, after = _date_in(line)
        fmts[b, fmt] += 1
        lines[b] += 1
        last[b] += not after
        chance[b] = chance.get(b, 0) + (hi - n) / (hi - lo)
        if n == lo:
            assert not after, line
        if n == hi:
            assert after, line
    for b in bins:
        for fmt in data.DIARY_FORMATS:
            assert abs(fmts[b, fmt] / lines[b] - 0.5) < 0.06, (b, fmt, fmts[b, fmt] / lines[b])
        assert abs(last[b] / lines[b] - chance[b] / lines[b]) < 0.05, (b, last[b] / lines[b], chance[b] / lines[b])
    shares = [last[b] / lines[b] for b in bins]
    assert shares == sorted(shares, reverse=True) and shares[0] > 0.8 and shares[-1] < 0.2, shares


def test_the_diarys_training_set_mixes_bare_dates_and_lines_and_the_evaluation_sets_hold_lines_only(diary):
    bare = sum(capstone.source_length(s) == 10 and " " not in s for s, _ in diary.train) / len(diary.train)
    assert 0.45 <= bare <= 0.55 + 1 / 35, bare  # half bare, and the lines of 10 tokens: dates alone too
    assert capstone.length_range(diary.test) == data.DIARY_LENGTHS
    only_lines = data.make_diary_task(n_train=2000, n_val=0, n_test=10, seed=0, bare=0)
    assert sum(" " not in s for s, _ in only_lines.train) / 2000 < 0.06  # only the lines of 10 tokens


def test_a_diary_whose_lengths_cannot_hold_a_date_or_a_bare_share_outside_0_1_is_refused():
    for lengths in ((9, 40), (20, 20)):
        with pytest.raises(ValueError, match="source lengths must run from at least 10 tokens"):
            data.make_diary_task(n_train=10, n_val=1, n_test=1, lengths=lengths)
    with pytest.raises(ValueError, match="share of bare dates must lie between 0 and 1"):
        data.make_diary_task(n_train=10, n_val=1, n_test=1, bare=-0.1)


# ---------------------------------------------------------------- budget and bad input
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


def test_a_budget_between_two_sizes_is_refused_naming_the_nearest(task):
    eight, twelve = (capstone.n_params(capstone.build("encoder_decoder", w, task)) for w in (8, 12))
    between = (eight + twelve) // 2
    assert abs(between - eight) > 0.1 * between and abs(twelve - between) > 0.1 * between
    with pytest.raises(ValueError, match=rf"nearest are width 8 \({eight:,}\) and width 12 \({twelve:,}\)"):
        capstone.size_for("encoder_decoder", between, task)


def test_a_source_length_outside_the_data_is_refused_naming_the_range(task):
    lo, hi = capstone.length_range(task.test)
    right = [False] * len(task.test)
    for bins in ([(lo - 1, lo + 3)], [(hi - 2, hi + 1)]):
        n = lo - 1 if bins[0][0] < lo else hi + 1
        with pytest.raises(ValueError) as info:
            capstone.accuracy_by_length(right, task.test, bins)
        assert f"source length {n}" in str(info.value) and f"{lo} to {hi}" in str(info.value)
    with pytest.raises(ValueError, match="3 verdicts for 300 pairs"):
        capstone.accuracy_by_length(right[:3], task.test)


def test_an_unknown_kind_and_a_prefix_run_without_a_mask_are_refused(task):
    with pytest.raises(ValueError, match="unknown model kind"):
        capstone.build("lstm", 32, task)
    with pytest.raises(ValueError, match="prefix_mask"):
        capstone.build("decoder_prefix", 32, task)
    with pytest.raises(ValueError, match="unknown task 'poems'; the tasks are dates, long_dates, diary"):
        capstone.make_task(capstone.Settings(task="poems"))


def test_length_bins_cover_the_range_once_and_ties_share_a_place_in_the_cost_ranking():
    assert capstone.length_bins(12, 41, 5) == [(12, 16), (17, 21), (22, 26), (27, 31), (32, 36), (37, 41)]
    assert capstone.length_bins(6, 11, 4) == [(6, 9), (10, 11)]
    with pytest.raises(ValueError, match="width of at least 1"):
        capstone.length_bins(6, 11, 0)
    costs = {"a": (1.0, 3.0), "b": (1.05, 1.0), "c": (2.0, 1.08), "d": (2.1, 5.0)}
    assert capstone.ranking(costs, 0) == [["a", "b"], ["c", "d"]]
    assert capstone.ranking(costs, 1) == [["b", "c"], ["a"], ["d"]]


def test_accuracy_by_length_counts_the_verdicts_of_each_bin(task):
    right = [capstone.source_length(s) % 2 == 0 for s, _ in task.test]  # right exactly on the even lengths
    lo, hi = capstone.length_range(task.test)
    per_length, overall = capstone.accuracy_by_length(right, task.test)
    assert all(a == (1.0 if a0 % 2 == 0 else 0.0) for (a0, a1), a in per_length.items() if not math.isnan(a))
    assert overall == sum(right) / len(right)
    binned, _ = capstone.accuracy_by_length(right, task.test, [(lo, hi)])
    assert binned == {(lo, hi): overall}


# ---------------------------------------------------------------- verdicts and costs
@pytest.mark.experiment
def test_the_one_pass_verdict_is_greedy_decodings_on_a_briefly_trained_model():
    """A verdict reads every answer token after the right ones in one pass; it must say "right" exactly where
    greedy decoding writes the target. A small RNN with attention trained 150 steps on the short dates (fast to
    learn) is right on some dates only, so both verdicts occur. (The full run also decodes 64 test dates greedily
    for every run, the decoder-only ones included, and records how many verdicts agree.)"""
    kind = "rnn_attention"
    from learner import transformer
    short = data.make_date_task(n_train=5000, n_val=10, n_test=200, seed=0)
    run = capstone.build(kind, 32, short, seed=0, prefix_mask=prefix_lm_mask)
    transformer.fit(run.model, run.loss, data.shuffled(short.train, 64, 0), steps=150, lr=1e-2,
                    report_every=1000)
    pairs = short.test
    right = capstone.verdicts(run, pairs, chunk=64)
    greedy = [g == t for g, (_, t) in zip(run.translate(pairs), pairs)]
    assert right == greedy
    assert 0 < sum(right) < len(right), sum(right)


def test_costs_are_measured_in_turns_without_changing_the_models(task):
    runs = {k: capstone.build(k, 16, task, prefix_mask=prefix_lm_mask) for k in ("rnn_fixed", "decoder_prefix")}
    before = {k: {n: p.clone() for n, p in r.model.state_dict().items()} for k, r in runs.items()}
    costs = capstone.measure_costs(runs, task, rounds=2, steps=1, batch_size=8, sample=4)
    assert set(costs) == set(runs) and all(step > 0 and token > 0 for step, token in costs.values())
    for k, r in runs.items():
        assert all(torch.equal(p, before[k][n]) for n, p in r.model.state_dict().items()), k


# ---------------------------------------------------------------- the reduced run
REDUCED_STEPS = 300


@pytest.mark.experiment
def test_a_reduced_run_keeps_the_budget_writes_its_results_and_shows_the_wide_margin_orderings(task, tmp_path):
    """The two RNNs and the encoder-decoder, one seed, 300 steps each (the notebook trains five runs, three of
    them on three seeds, 1500 steps each), evaluated on 300 test dates. At 300 steps only the orderings with a
    wide margin are asserted: attention over the encoder states, in an RNN or in the transformer, is far ahead of
    the single context vector. The decoder-only runs are left out to save time: notebook 10's reduced run (its
    reference submission, graded in the pipeline tests) trains all five end to end, and the budget test sizes
    them."""
    path = tmp_path / "capstone_results.json"
    kinds = ("rnn_fixed", "rnn_attention", "encoder_decoder")
    settings = capstone.Settings(steps=REDUCED_STEPS, n_test=300, kinds=kinds, seeds=(0,))
    exp = capstone.run(settings, task=task, results_path=str(path), report_every=REDUCED_STEPS)
    capstone.check_budget(exp)
    saved = json.loads(path.read_text())
    assert saved["settings"]["steps"] == REDUCED_STEPS and set(saved["runs"]) == set(kinds)
    assert set(saved["costs"]) == set(kinds)
    assert all(c["cpu_seconds_per_step"] > 0 and c["cpu_seconds_per_token"] > 0 for c in saved["costs"].values())
    for kind, (r,) in saved["runs"].items():
        assert len(r["curve"]) == REDUCED_STEPS
        assert list(r["by_length"]) == [capstone.bin_label(b) for b in exp.bins]
        assert not any(math.isnan(a) for a in r["by_length"].values())
        assert r["greedy_agrees"] == r["greedy_checked"] == capstone.GREEDY_SAMPLE, (kind, r["greedy_agrees"])
    acc = {k: exp.exact_match(k)[0] for k in kinds}
    assert acc["rnn_attention"] >= acc["rnn_fixed"] + 0.3, acc
    assert acc["encoder_decoder"] >= acc["rnn_fixed"] + 0.3, acc


@pytest.mark.experiment
def test_runs_trained_side_by_side_in_processes_give_the_figures_of_one_at_a_time(task):
    """`make capstone` trains its runs in processes of their own, one per core: each run is seeded on its own, so
    the curves, the verdicts by length and the greedy checks are those of the same runs trained one after another,
    and the costs are measured afterwards for every kind."""
    settings = capstone.Settings(steps=20, n_test=100, kinds=("rnn_fixed", "encoder_decoder"), seeds=(0, 1))
    alone = capstone.run(settings, task=task, report_every=20)
    side_by_side = capstone.run(settings, task=task, report_every=20, jobs=2)
    for kind in settings.kinds:
        assert [r.seed for r in side_by_side.runs[kind]] == [0, 1]
        assert side_by_side.runs[kind] == alone.runs[kind], kind
    assert set(side_by_side.costs) == set(settings.kinds)
    assert set(alone.trained_by.values()) == {os.getpid()}
    assert len(set(side_by_side.trained_by.values())) == 2 and os.getpid() not in side_by_side.trained_by.values()


@pytest.mark.figures
@pytest.mark.timeout(3600)
def test_the_full_experiment_shows_the_claim_notebook_10_states(tmp_path):
    """`make test-figures`: the full run, as `make capstone` and the notebook run it: the fixed-context RNN falls by
    at least 40 points from the shortest sources to the longest (mean over its seeds), while the RNN with attention
    and the encoder-decoder transformer stay at 90% or more at every length, on every seed."""
    exp = capstone.run(capstone.Settings(), prefix_mask=prefix_lm_mask, results_path=str(tmp_path / "r.json"),
                       jobs=os.cpu_count() or 1)  # as make capstone: one run per core, the same figures
    assert exp.settings.task == "diary" and exp.bins[-1][1] >= 40  # sources of 40 tokens and more
    fixed = exp.summary("rnn_fixed")
    assert fixed[exp.bins[0]][0] - fixed[exp.bins[-1]][0] >= 0.40, fixed
    for kind in ("rnn_attention", "encoder_decoder"):
        assert all(low >= 0.90 for _, low, _ in exp.summary(kind).values()), (kind, exp.summary(kind))
