"""How fast each widget answers each of its controls, driven headless from Python.

    python bench/widgets.py [--repeat N] [--only temperature mask sampling cross kv]

Every widget of ``learner.widgets`` is built the way its notebook builds it: the
learner's functions are the reference's source compiled as notebook code (after the
notebook's set-up cell), the models have the notebooks' sizes (random weights: an
untrained model never writes <eos>, so every continuation is as long as it can be).
Then each control is moved the way a browser moves it (setting the ipywidget's
value, or clicking the button, fires the same observers) ``--repeat`` times, and the
script prints, per control, the median and the maximum seconds until the widget
shows the new picture (its PNG bytes and readout are set), with Agg.

The baseline, measured in the same run: one plain figure, a bar chart of 12 bars
rendered to PNG (what the smallest redraw of a widget cannot avoid), so the ratio
column says how many plain figure draws one control costs, whatever the machine.
The goal (issue 25): at most 0.3 s per control on 2 cores, 0.5 s for the sampling
explorer; the last column says whether a control's maximum stays under it.
"""
import argparse
import io
import itertools
import os
import statistics
import sys
import time
import warnings

os.environ.setdefault("MPLBACKEND", "Agg")

import torch  # noqa: E402

from learner import blocks, data, transformer, widgets  # noqa: E402
from coursekit.sync import solution_source  # noqa: E402
from learner.check import EXERCISES  # noqa: E402
from learner.syllabus import NOTEBOOKS  # noqa: E402
from results import record  # noqa: E402  (bench/results.py: what make bench writes)

GOALS = {"sampling": 0.5}  # seconds; every other widget 0.3
DEFAULT_GOAL = 0.3


def learner_namespace(notebook):
    """The notebook's namespace after its set-up cell and every answer cell, each answer the reference's source
    compiled as a notebook cell (so the grader takes them for the learner's own)."""
    ns = {"__name__": "__main__"}
    exec("import math\nimport torch\nimport torch.nn.functional as F\n", ns)
    exec(NOTEBOOKS[notebook].setup, ns)
    for name in (n for n, ex in EXERCISES.items() if ex.notebook == notebook):
        exec(compile(solution_source(name), f"<cell {name}>", "exec"), ns)
    return ns


def plain_figure():
    """The baseline: a new 8 x 3.5 in figure with 12 bars, rendered to PNG."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(8.2, 3.6), dpi=85)
    ax = fig.add_subplot()
    ax.bar(range(12), [1 / (k + 1) for k in range(12)], 0.6)
    ax.set_title("a plain bar chart")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def timed(action):
    """(wall-clock seconds, CPU seconds of this process, all its threads) of one ``action()``."""
    t, c = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - t, time.process_time() - c


# ====================================================================== the widgets and their controls
# Each maker returns (widget, {control: [actions]}); the actions of one control are cycled ``repeat`` times.
def temperature():
    ns = learner_namespace("03_softmax")
    w = widgets.temperature_explorer(ns["softmax"])
    taus = [0.1, 0.13, 0.2, 0.35, 0.5, 0.8, 1.3, 2.0, 3.5, 6.0, 10.0, 17.0]
    presets = list(widgets.PRESETS)
    return w, {
        "temperature slider": [lambda v=v: setattr(w.slider, "value", v) for v in taus],
        "typed τ": [lambda v=v: setattr(w.tau_box, "value", f"{v:g}") for v in reversed(taus)],
        "preset": [lambda p=p: setattr(w.preset, "value", p) for p in presets[1:] + presets[:1]],
        "typed logits": [lambda s=s: setattr(w.logits_box, "value", s)
                         for s in ("3, 2, 1, 0.5, -1", "1, -inf, 2", "5, 4, 3, 2, 1, 0, -1, -2", "0.3, 0.2")],
    }


class Moves(list):
    """The moves of one control, with what to do untimed ``first`` (once) and ``before`` each move."""

    def __init__(self, moves, first=None, before=None):
        super().__init__(moves)
        self.first, self.before = first, before


def on(control, value):
    """Put ``control`` on ``value`` first when it is not (a move that is part of the set-up of another)."""
    if control.value != value:
        control.value = value


def mask():
    ns = learner_namespace("04_masks_attention")
    w = widgets.mask_explorer(ns["masked_attention"])
    kinds = list(widgets.KINDS)
    return w, {
        "mask kind": [lambda k=k: setattr(w.kind, "value", k) for k in kinds[1:] + kinds[:1]],
        "query row": [lambda i=i: setattr(w.query, "value", i) for i in (1, 2, 3, 4, 5, 0)],
        "padding": [lambda p=p: setattr(w.padding, "value", p) for p in (1, 2, 3, 0)],
        "sentence": [lambda s=s: setattr(w.sentence, "value", s)
                     for s in ("a b c d e", "the dog ran", "the cat sat on the mat")],
        "source": [lambda s=s: setattr(w.source, "value", s) for s in ("x y", "le chat est assis")],
        "query row (cross-attention)": Moves([lambda i=i: setattr(w.query, "value", i) for i in (1, 2, 3, 0)],
                                             first=lambda: on(w.kind, "cross")),
        "query row (prefix-LM)": Moves([lambda i=i: setattr(w.query, "value", i) for i in (1, 2, 3, 4, 0)],
                                       first=lambda: on(w.kind, "prefix")),
    }


def date_gpt(notebook):
    task = data.make_date_task(seed=0)
    ns = learner_namespace(notebook)
    cfg = transformer.TransformerConfig(vocab_size=len(data.lm_vocab(task)), d_model=64, n_heads=4, d_ff=128,
                                        n_layers=2, max_len=48, positions="learned")
    step = ns.get("decoder_block_step")
    gpt = transformer.DecoderLM(cfg, ns.get("decoder_block", blocks.decoder_block),
                                ns.get("embed_with_positions", blocks.embed_with_positions), seed=0,
                                **({"block_step": step} if step else {}))
    return ns, gpt, task


def sampling():
    ns, gpt, task = date_gpt("07_decoder")
    w = widgets.sampling_explorer(ns["sample_next"], gpt, task, top_k_filter=ns["top_k_filter"],
                                  top_p_filter=ns["top_p_filter"])
    return w, {
        "temperature": [lambda v=v: setattr(w.slider, "value", v) for v in (0.5, 1.5, 3.0, 0.2, 1.0)],
        "top-k": [lambda v=v: setattr(w.top_k, "value", v) for v in (3, 10, 1, 0)],
        "top-p": [lambda v=v: setattr(w.top_p, "value", v) for v in (0.5, 0.9, 0.3, 1.0)],
        "step shown": [lambda v=v: setattr(w.step, "value", v) for v in (1, 4, 8, 11, 0)],
        "draw again": [lambda: w.again.click()],
        "date": [lambda s=s: setattr(w.source_box, "value", s)
                 for s in ("07/27/2013", "monday, may 5, 2035", "the 1st of february 2014")],
    }


def cross():
    task = data.make_date_task(seed=0)
    ns = learner_namespace("08_encoder_decoder")
    cfg = transformer.EncoderDecoderConfig(src_vocab_size=len(task.src_vocab), tgt_vocab_size=len(task.tgt_vocab),
                                           d_model=64, n_heads=4, d_ff=128, n_enc_layers=2, n_dec_layers=2,
                                           max_len=32)
    model = transformer.EncoderDecoder(cfg, ns["encdec_decoder_block"], ns["embed_with_positions"],
                                       ns["encoder_block"], seed=0)
    w = widgets.cross_attention_viewer(model, task, "the 1st of february 2014")
    return w, {
        "source date": [lambda s=s: setattr(w.text, "value", s)
                        for s in ("07/27/2013", "monday, may 5, 2035", "the 1st of february 2014")],
        "block": [lambda v=v: setattr(w.layer, "value", v) for v in (0, 1)],
        "head": [lambda v=v: setattr(w.head, "value", v) for v in (0, 1, 2, 3, -1)],
    }


def kv():
    ns, gpt, task = date_gpt("09_kv_cache")
    w = widgets.kv_cache_stepper(ns["decoder_block_step"], gpt, task, "the 1st of february 2014 =")

    def step():
        if w.gen.T + 2 > w.setup.max_len:
            w.reset_button.click()  # not timed apart: a reset is its own control below
        w.step_button.click()

    return w, {
        "Step": [step],
        "layer": [lambda v=v: setattr(w.layer, "value", v) for v in (1, 0)],
        "Reset": [lambda: w.reset_button.click()],
        "prompt": [lambda s=s: setattr(w.text, "value", s)
                   for s in ("07/27/2013 =", "monday, may 5, 2035 =", "the 1st of february 2014 =")],
        "Run to <eos> (from the prompt)": Moves([lambda: w.run_button.click()],
                                                before=lambda: w.reset_button.click()),
    }


MAKERS = {"temperature": temperature, "mask": mask, "sampling": sampling, "cross": cross, "kv": kv}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10, help="moves per control (default 10)")
    parser.add_argument("--only", nargs="*", choices=list(MAKERS), default=list(MAKERS))
    args = parser.parse_args()
    torch.manual_seed(0)
    warnings.simplefilter("ignore")

    plain_figure()
    base_runs = [timed(plain_figure) for _ in range(max(5, args.repeat))]
    base = statistics.median(wall for wall, _ in base_runs)
    base_cpu = statistics.median(cpu for _, cpu in base_runs)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; baseline (one plain 12-bar figure to PNG): {base:.4f} s ({base_cpu:.4f} s "
          f"of CPU)\n")
    print("wall: seconds on the clock; cpu: seconds of CPU this process used (on a busy machine, what a quiet one "
          "would show on the clock, or more when torch runs two threads)")
    print(f"{'widget':<12} {'control':<32} {'wall med':>9} {'wall max':>9} {'cpu med':>8} {'cpu max':>8} "
          f"{'med/base':>9} {'goal':>5}  ok")
    worst = {}
    for name in args.only:
        w, controls = MAKERS[name]()
        goal = GOALS.get(name, DEFAULT_GOAL)
        for control, moves in controls.items():
            times = []
            if getattr(moves, "first", None):
                moves.first()
            for move in itertools.islice(itertools.cycle(moves), args.repeat):
                if getattr(moves, "before", None):
                    moves.before()
                times.append(timed(move))
                if w.message:
                    print(f"  ({name} / {control}: the widget said: {w.message})")
            walls, cpus = [t for t, _ in times], [c for _, c in times]
            med, top = statistics.median(walls), max(walls)
            worst[name, control] = top
            record("widgets", f"{name} / {control}", med, base, med / base, "s",
                   "the median answer to one move / one plain figure drawn in the same run",
                   f"max {top:.3f} s, goal {goal:.1f} s: {'within' if top <= goal else 'OVER'}")
            print(f"{name:<12} {control:<32} {med:>9.3f} {top:>9.3f} {statistics.median(cpus):>8.3f} "
                  f"{max(cpus):>8.3f} {med / base:>9.1f} {goal:>5.1f}  {'yes' if top <= goal else 'NO'}")
    slow = [f"{w} / {c}" for (w, c), t in worst.items() if t > GOALS.get(w, DEFAULT_GOAL)]
    print("\nevery control within its goal" if not slow else f"\nover the goal: {', '.join(slow)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
