"""The capstone (notebook 10): four architectures on one task, with the same budget, steps, seeds and data.

Five runs, because the decoder-only transformer is run with both of its masks:

* ``rnn_fixed``        notebook 05's RNN encoder-decoder: one context vector between source and target;
* ``rnn_attention``    notebook 05b's: the decoder attends over every encoder state at every step;
* ``decoder_causal``   a decoder-only transformer reading ``<bos> source = target <eos>`` as one text, fully causal;
* ``decoder_prefix``   the same, with a prefix-LM mask: the source (the prefix) reads itself both ways;
* ``encoder_decoder``  notebook 08's transformer: a bidirectional encoder and a decoder with cross-attention.

The task is the diary (``data.make_diary_task``): a numeric date somewhere in a diary line of 10 to 44 tokens,
whose length says nothing about the date's format, and the longer the line, the more of it comes after the date. Each model's width is chosen so that its
parameter count is within ``TOLERANCE`` (10%) of one budget (``size_for``). All train for the same number of
steps with ``transformer.fit`` (AdamW, one-cycle, one torch thread), from the same seeds, on the same batches of
the same lines in the same order; the two RNNs and the encoder-decoder on every seed of ``Settings.seeds``, the
decoder-only runs on the first. Everything here is ready-made with PyTorch; the notebook passes the learner's
``prefix_lm_mask`` to the prefix-LM run.

``run(...)`` trains them all and returns (and writes, as JSON) an ``Experiment``: per run and seed the
parameters, the training curve and the test exact match by source length; per run the CPU time of a training
step and of a written token, measured with the runs taking turns (``measure_costs``).
"""

import json
import os
import time
from dataclasses import asdict, dataclass, field

import torch

from . import data, transformer
# the models, named here too: notebook 10 reads the whole experiment from this one module
from .capstone_models import (KINDS, TOLERANCE, WIDTHS, PrefixDecoder, attention_step, build,  # noqa: F401
                              causal_lm_mask, n_params, size_for)



# ---------------------------------------------------------------- evaluation
def source_length(source):
    return len(data.tokenize(source))


def length_range(pairs):
    lengths = [source_length(s) for s, _ in pairs]
    return min(lengths), max(lengths)


def length_bins(lo, hi, width):
    """Source lengths ``lo`` .. ``hi`` in consecutive bins of ``width`` tokens (the last may be shorter): [(a, b)]."""
    if width < 1 or lo > hi:
        raise ValueError(f"bins need a width of at least 1 and lo <= hi, got width {width}, {lo} to {hi}")
    return [(a, min(a + width - 1, hi)) for a in range(lo, hi + 1, width)]


def bin_label(b):
    return f"{b[0]}-{b[1]}" if b[0] != b[1] else str(b[0])


def accuracy_by_length(right, pairs, bins=None):
    """({(a, b): exact match of the sources of a to b tokens}, overall exact match) of the verdicts ``right``.

    ``bins`` (default: one per length the pairs have) must lie in the data's range."""
    if len(right) != len(pairs):
        raise ValueError(f"{len(right)} verdicts for {len(pairs)} pairs")
    lo, hi = length_range(pairs)
    if bins is None:
        bins = [(n, n) for n in range(lo, hi + 1)]
    outside = [n for b in bins for n in b if not lo <= n <= hi]
    if outside:
        raise ValueError(f"source length {outside[0]} is outside the data's range: its sources have {lo} to {hi} "
                         f"tokens")
    lengths = [source_length(s) for s, _ in pairs]
    out = {}
    for a, b in bins:
        rows = [r for r, n in zip(right, lengths) if a <= n <= b]
        out[(a, b)] = sum(rows) / len(rows) if rows else float("nan")
    return out, sum(right) / len(right)


def verdicts(model_run, pairs, chunk=500):
    """``model_run.right`` over ``pairs``, ``chunk`` pairs at a time."""
    return [r for k in range(0, len(pairs), chunk) for r in model_run.right(pairs[k:k + chunk])]


# ---------------------------------------------------------------- cost, measured so that busy machines agree
def _tokens_written(guesses):
    return sum(len(g) + 1 for g in guesses)  # the characters of each answer and its <eos>


def measure_costs(builds, task, rounds=5, steps=3, batch_size=64, sample=64):
    """{kind: (CPU seconds per training step, CPU seconds per written token)}, medians over ``rounds``.

    ``builds`` is {kind: a run of that kind}. The runs take turns (one round: ``steps`` training steps of each,
    then greedy decoding of the same ``sample`` test dates by each), and each turn is timed in CPU time of this
    process (``time.process_time``), not on the wall clock: a run that waits while another program has the core
    is not charged for it, and a load that comes and goes falls on every kind alike. With one torch thread the CPU
    time is the work done. Training steps are taken on a copy of each model, so the runs are left as they were.
    """
    import copy
    chosen = task.test[:sample]
    clones = {k: copy.deepcopy(r) for k, r in builds.items()}
    step_times = {k: [] for k in builds}
    token_times = {k: [] for k in builds}
    for _ in range(rounds):
        for kind, r in clones.items():
            optimizer = torch.optim.AdamW(r.model.parameters(), lr=1e-4)
            stream = data.shuffled(task.train, batch_size, seed=len(step_times[kind]))
            r.model.train()
            start = time.process_time()
            for _ in range(steps):
                loss = r.loss(next(stream))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            step_times[kind].append((time.process_time() - start) / steps)
            r.model.eval()
            start = time.process_time()
            guesses = builds[kind].translate(chosen)
            token_times[kind].append((time.process_time() - start) / _tokens_written(guesses))
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return {k: (median(step_times[k]), median(token_times[k])) for k in builds}


# ---------------------------------------------------------------- the experiment
TASKS = {  # name -> the task's maker; the data do not depend on the runs' seeds
    "dates": lambda n_test: data.make_date_task(n_test=n_test, seed=0),            # notebooks 05-09's dates
    "long_dates": lambda n_test: data.make_long_date_task(n_test=n_test, seed=0),  # dates in diary lines
    "diary": lambda n_test: data.make_diary_task(n_test=n_test, seed=0),            # notebook 10's experiment
}


def make_task(settings):
    """The task ``settings.task`` names, with ``settings.n_test`` test pairs; a ValueError naming the tasks."""
    if settings.task not in TASKS:
        raise ValueError(f"unknown task {settings.task!r}; the tasks are {', '.join(TASKS)}")
    return TASKS[settings.task](settings.n_test)


@dataclass
class Settings:
    budget: int = 100_000
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    seeds: tuple = (0, 1, 2)                              # the seeds of every kind in ``all_seeds``
    all_seeds: tuple = ("rnn_fixed", "rnn_attention", "encoder_decoder")  # the others: the first seed only
    n_test: int = 2000
    task: str = "diary"                                   # a key of TASKS: the task every run learns
    bin_width: int = 5                                    # exact match is shown per bin of this many lengths
    kinds: tuple = tuple(KINDS)

    def seeds_of(self, kind):
        return tuple(self.seeds) if kind in self.all_seeds else tuple(self.seeds[:1])


@dataclass
class Result:
    kind: str
    name: str
    seed: int
    width: int
    params: int
    curve: list = field(default_factory=list)       # (step, loss)
    by_length: dict = field(default_factory=dict)   # (a, b): exact match on the test sources of a to b tokens
    exact_match: float = 0.0
    greedy_checked: int = 0                         # test dates also decoded greedily (the cost sample) ...
    greedy_agrees: int = 0                          # ... whose greedy verdict is the one-pass verdict


@dataclass
class Experiment:
    settings: Settings
    bins: list
    runs: dict                                      # kind -> [Result, one per seed]
    costs: dict = field(default_factory=dict)       # kind -> (CPU s per training step, CPU s per written token)
    trained_by: dict = field(default_factory=dict)  # (kind, seed) -> the id of the process that trained it

    def summary(self, kind):
        """{bin: (mean, lowest, highest) exact match over the seeds} of ``kind``."""
        return {b: (sum(r.by_length[b] for r in self.runs[kind]) / len(self.runs[kind]),
                    min(r.by_length[b] for r in self.runs[kind]), max(r.by_length[b] for r in self.runs[kind]))
                for b in self.bins}

    def exact_match(self, kind):
        """(mean, lowest, highest) overall exact match over the seeds of ``kind``."""
        ems = [r.exact_match for r in self.runs[kind]]
        return sum(ems) / len(ems), min(ems), max(ems)


def run(settings=None, prefix_mask=None, task=None, results_path=None, report_every=250, jobs=1):
    """Train every run of ``settings`` (each kind on its seeds), evaluate it, measure the costs; an ``Experiment``.

    All of it with ``training.training_threads()`` (one torch thread): the figures do not depend on the machine
    or on its load, only the time they take. Each run shows a progress bar (``training.progress``). A run capped
    by ``COURSE_MAX_TRAIN_STEPS`` (class grading, the tests' reduced run of the notebook) trains the first seed
    only, decodes ``CAPPED_GREEDY_SAMPLE`` test dates greedily and times one round: it checks that the notebook
    runs, not the figures.

    ``jobs`` > 1 trains that many runs at a time, each in a process of its own with one torch thread (``make
    capstone`` gives one per core): every run is seeded on its own, so the figures are the same as one at a time.
    The costs are measured afterwards, in this process, with the runs taking turns.
    """
    from .training import capped, training_threads
    s = settings or Settings()
    task = task or make_task(s)
    lo, hi = length_range(task.test)
    exp = Experiment(s, length_bins(lo, hi, s.bin_width), {})
    widths = {kind: size_for(kind, s.budget, task) for kind in s.kinds}
    plan = [(kind, seed) for kind in s.kinds for seed in (s.seeds_of(kind)[:1] if capped() else s.seeds_of(kind))]
    if jobs > 1 and len(plan) > 1 and not capped():
        trained = _train_in_processes(plan, widths, s, task, exp.bins, prefix_mask, report_every, jobs)
    else:
        trained = {(kind, seed): (*_train_one(kind, seed, widths[kind], s, task, exp.bins, prefix_mask, report_every),
                                  os.getpid()) for kind, seed in plan}
    first = {}
    for kind, seed in plan:
        r, model_run, exp.trained_by[(kind, seed)] = trained[(kind, seed)]
        exp.runs.setdefault(kind, []).append(r)
        if kind not in first:
            first[kind] = model_run
    with training_threads():
        exp.costs = measure_costs(first, task, rounds=1 if capped() else 5, batch_size=s.batch_size,
                                  sample=greedy_sample())
    if results_path:
        write(exp, results_path)
    return exp


GREEDY_SAMPLE = 64         # test dates each run also decodes greedily (and the costs decode), 16 in a capped run
CAPPED_GREEDY_SAMPLE = 16  # a capped run (class grading) checks that the notebook runs: a few suffice


def greedy_sample():
    """How many test dates a run decodes greedily: ``GREEDY_SAMPLE``, or ``CAPPED_GREEDY_SAMPLE`` when capped."""
    from .training import capped
    return CAPPED_GREEDY_SAMPLE if capped() else GREEDY_SAMPLE


def _train_one(kind, seed, width, s, task, bins, prefix_mask, report_every):
    """Train, evaluate and report one run: (its ``Result``, the trained ``build``)."""
    from .training import training_threads
    with training_threads():
        model_run = build(kind, width, task, seed=seed, prefix_mask=prefix_mask)
        r = Result(kind, KINDS[kind], seed, width, n_params(model_run))
        r.curve = transformer.fit(model_run.model, model_run.loss, data.shuffled(task.train, s.batch_size, seed),
                                  steps=s.steps, lr=s.lr, report_every=report_every,
                                  desc=f"{KINDS[kind]}, seed {seed}")
        right = verdicts(model_run, task.test)
        r.by_length, r.exact_match = accuracy_by_length(right, task.test, bins)
        sample = task.test[:greedy_sample()]
        greedy = model_run.translate(sample)
        r.greedy_checked = len(sample)
        r.greedy_agrees = sum((g == t) == v for g, (_, t), v in zip(greedy, sample, right))
    print(f"{KINDS[kind]}, seed {seed} ({r.params:,} parameters): test exact match {r.exact_match:.1%}; by source "
          f"length " + ", ".join(f"{bin_label(b)}: {a:.0%}" for b, a in r.by_length.items()), flush=True)
    return r, model_run


def _train_in_processes(plan, widths, s, task, bins, prefix_mask, report_every, jobs):
    """``_train_one`` for every (kind, seed) of ``plan``, ``jobs`` at a time in processes of their own, the
    longest runs first; {(kind, seed): (Result, the trained build, rebuilt here from its weights, the process's
    id)}."""
    import concurrent.futures
    import multiprocessing
    cost = {"decoder_causal": 2, "decoder_prefix": 2, "rnn_attention": 1.4}  # measured: CPU per step, roughly
    order = sorted(plan, key=lambda ks: -cost.get(ks[0], 1))
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no thread pool inherited from this one
    jobs = min(jobs, len(plan))
    slots, started = context.Queue(), context.Barrier(jobs)
    for k in range(jobs):
        slots.put(k)
    out = {}
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start,
                                                initargs=(slots, started)) as pool:
        futures = {pool.submit(_train_in_worker, kind, seed, widths[kind], s, task, bins, prefix_mask,
                               report_every): (kind, seed) for kind, seed in order}
        for future in concurrent.futures.as_completed(futures):
            kind, seed = futures[future]
            r, weights, pid = future.result()
            model_run = build(kind, widths[kind], task, seed=seed, prefix_mask=prefix_mask)
            model_run.model.load_state_dict(weights)
            model_run.model.eval()
            out[(kind, seed)] = (r, model_run, pid)
    return out


def _worker_start(slots, started):
    """A training process: one torch thread, its progress bar on a line of its own; it takes its first run once
    every process has started (the first up would otherwise take the runs of one still importing torch)."""
    import threading
    os.environ["COURSE_PROGRESS_POSITION"] = str(slots.get())
    torch.set_num_threads(1)
    try:
        started.wait(timeout=120)
    except threading.BrokenBarrierError:  # one did not start: the others go on without it
        pass


def _train_in_worker(kind, seed, width, s, task, bins, prefix_mask, report_every):
    r, model_run = _train_one(kind, seed, width, s, task, bins, prefix_mask, report_every)
    return r, model_run.model.state_dict(), os.getpid()


def write(exp, path):
    """The results and the settings that made them, as JSON."""
    with open(path, "w") as f:
        json.dump({"settings": asdict(exp.settings), "torch_threads": torch.get_num_threads(),
                   "bins": exp.bins,
                   "costs": {k: {"cpu_seconds_per_step": c[0], "cpu_seconds_per_token": c[1]}
                             for k, c in exp.costs.items()},
                   "runs": {k: [dict(asdict(r), by_length={bin_label(b): a for b, a in r.by_length.items()})
                                for r in rs] for k, rs in exp.runs.items()}}, f, indent=1)


def check_budget(exp):
    """The parameter counts of the runs, each within TOLERANCE of their mean; a ValueError otherwise."""
    counts = {k: rs[0].params for k, rs in exp.runs.items()}
    mean = sum(counts.values()) / len(counts)
    far = {k: c for k, c in counts.items() if abs(c - mean) > TOLERANCE * mean}
    if far:
        raise ValueError(f"parameter counts {far} are more than {TOLERANCE:.0%} from their mean {mean:,.0f}")
    return counts


def ranking(costs, which, tie=0.10):
    """The kinds from cheapest to dearest by ``costs`` (``which`` 0: per step, 1: per token), grouped: a kind
    within ``tie`` (10%) of the cheapest of its group shares its place. [[kinds of the cheapest place], ...]"""
    order = sorted(costs, key=lambda k: costs[k][which])
    places = []
    for k in order:
        if places and costs[k][which] <= (1 + tie) * costs[places[-1][0]][which]:
            places[-1].append(k)
        else:
            places.append([k])
    return places


# ---------------------------------------------------------------- what a run shows, in words (notebook 10, section 5-7)
def summary_table(results):
    """One line per run: parameters, seeds, exact match (mean, lowest-highest seed), CPU ms per step and per token."""
    lines = [f"{'run':30} {'parameters':>10} {'seeds':>5} {'exact match (lowest-highest)':>29} {'CPU ms / step':>14} "
             f"{'CPU ms / token':>15}"]
    for kind, runs in results.runs.items():
        mean, low, high = results.exact_match(kind)
        step, token = results.costs[kind]
        lines.append(f"{KINDS[kind]:30} {runs[0].params:10,} {len(runs):5} {mean:11.1%} ({low:5.1%}-{high:6.1%})"
                     f"     {1000 * step:14.1f} {1000 * token:15.3f}")
    return "\n".join(lines)


def findings(results):
    """The four numbered findings of a run: the most accurate on the longest sources, the fixed context's fall, the
    decoder-only runs' final losses, the cheapest step and token."""
    shortest, longest = results.bins[0], results.bins[-1]
    mean_at = {k: results.summary(k) for k in results.runs}
    best = max(results.runs, key=lambda k: mean_at[k][longest][0])
    fixed = mean_at["rnn_fixed"]
    final = {k: sum(sum(loss for _, loss in r.curve[-100:]) / len(r.curve[-100:]) for r in rs) / len(rs)
             for k, rs in results.runs.items()}

    def names(place):
        return " and ".join(KINDS[k] for k in place)
    steps_first, tokens_first = ranking(results.costs, 0)[0], ranking(results.costs, 1)[0]
    return "\n".join([
        f"1. most accurate on {bin_label(longest)}-token sources (mean over seeds): {KINDS[best]} "
        f"({mean_at[best][longest][0]:.1%}); "
        + ", ".join(f"{KINDS[k]} {mean_at[k][longest][0]:.1%}" for k in results.runs if k != best),
        f"2. the fixed-context RNN: {fixed[shortest][0]:.1%} on {bin_label(shortest)}-token sources, "
        f"{fixed[longest][0]:.1%} on {bin_label(longest)}-token ones: "
        f"{100 * (fixed[longest][0] - fixed[shortest][0]):+.0f} points from the shortest to the longest",
        f"3. final training loss (mean of the last 100 steps): causal {final['decoder_causal']:.4f}, "
        f"prefix-LM {final['decoder_prefix']:.4f}",
        f"4. cheapest training step: {names(steps_first)}; cheapest generated token: {names(tokens_first)} "
        "(runs within 10% of each other share a place)"])


def by_length(results):
    """Exact match by source length for every run (the mean over its seeds, and the lowest to the highest seed), the
    fixed context's fall, the attention runs' lowest, and where the decoder-only runs stand against the
    encoder-decoder."""
    shortest, longest = results.bins[0], results.bins[-1]

    def mean_low_high(kind, b):
        mean, low, high = results.summary(kind)[b]
        return f"{mean:.0%}" + (f" ({low:.0%}-{high:.0%})" if len(results.runs[kind]) > 1 else "")
    lines = [f"{KINDS[kind]:30} " + "  ".join(f"{bin_label(b)}: {mean_low_high(kind, b)}" for b in results.bins)
             for kind in results.runs]
    fixed = results.summary("rnn_fixed")
    fall = 100 * (fixed[shortest][0] - fixed[longest][0])
    lines.append(f"\nThe fixed context {'falls' if fall > 0 else 'rises'} by {abs(fall):.0f} points from the shortest "
                 f"sources to the longest (mean of {len(results.runs['rnn_fixed'])} seeds).")
    for kind in ("rnn_attention", "encoder_decoder"):
        worst = min(low for _, low, _ in results.summary(kind).values())
        lines.append(f"{KINDS[kind]}: its lowest exact match, any seed at any length, is {worst:.1%}.")
    encdec = results.exact_match("encoder_decoder")
    for kind in ("decoder_causal", "decoder_prefix"):
        mean = results.exact_match(kind)[0]
        gap = 100 * (mean - encdec[0])
        where = ("within the encoder-decoder's spread over its seeds" if encdec[1] <= mean <= encdec[2]
                 else f"{abs(gap):.1f} points {'above' if gap > 0 else 'below'} the encoder-decoder's mean")
        lines.append(f"{KINDS[kind]} (one seed): {mean:.1%} overall, {results.summary(kind)[longest][0]:.1%} on the "
                     f"longest sources; {where}.")
    return "\n".join(lines)
