"""The sampling explorer (notebook 07): the learner's trained GPT continues one date prompt several times with the
learner's ``sample_next``; the temperature (with top-k and top-p) shows where the text breaks down.

compute → draw → readout:

* ``compute(setup, source, tau, top_k, top_p, seed, step)`` -> ``SamplingRecord`` (raises ``BadInput`` for a
  prompt or a setting it cannot draw)
* ``draw(record)`` -> a matplotlib Figure: the next-token distribution at one step of the first continuation
  (the widget keeps one ``SamplingPlot`` and changes its bars in place); a red edge marks a token the learner's
  filters and the reference's decide differently
* ``readout(record)`` -> the HTML under the plot: every continuation, and how many are real ISO dates

The model's passes are kept (``SamplingSetup.runs``): the greedy answer once per prompt, the drawn continuations
once per prompt and setting, so choosing another step, or coming back to a setting, runs no model. At the step
shown, the learner's ``top_k_filter`` and ``top_p_filter`` are compared with the reference's rule
(``builtin.reference_top_k``, ``builtin.reference_top_p``) on the same logits, and a wrong one is named with its
setting and the tokens it keeps or removes. Before the explorer stays silent about the learner's functions it runs
the notebook's visible checks of them (``base.check_words``), which feed batches and settings this one prompt does
not.
"""
import html
import math
from dataclasses import dataclass, field

import ipywidgets as W
import torch
from matplotlib.patches import Patch

from .. import data
from ..data import is_iso_date
from .base import (BLUE, GREY, BadInput, Canvas, Explorer, call_for_widget, check_words, label, new_figure, one_thread,
                   visible_check)
from .builtin import NINF, reference_top_k, reference_top_p
from .cross_attention import source_tokens

N_DRAWS = 8           # continuations drawn at once
NEW_TOKENS = 12          # tokens each may write (an ISO date is 10, then <eos>)
TAU_MIN, TAU_MAX = 0.1, 5.0
SHOWN = 12            # tokens on the plot: the most probable at τ before filtering
WRONG = "#c0392b"     # the edge of a bar whose token the learner's filters and the reference's decide differently


# ====================================================================== input
def check_settings(tau, top_k, top_p, vocab_size):
    """The settings as (τ, top_k or None, top_p or None), or BadInput saying what is allowed."""
    if not (isinstance(tau, (int, float)) and TAU_MIN <= tau <= TAU_MAX):
        raise BadInput(f"τ = {tau} is outside what this explorer draws: from {TAU_MIN:g} to {TAU_MAX:g} (τ must be "
                       f"> 0; greedy decoding is the argmax, not τ = 0)")
    if top_k is not None and not (isinstance(top_k, int) and 1 <= top_k <= vocab_size):
        raise BadInput(f"top-k = {top_k} is not allowed: from 1 to {vocab_size} tokens, or off")
    if top_p is not None and not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
        raise BadInput(f"top-p = {top_p} is not allowed: a mass above 0 and at most 1, or off")
    return float(tau), top_k, None if top_p is None else float(top_p)


# ====================================================================== compute
@dataclass
class SamplingSetup:
    """What stays fixed: the model, the learner's functions, the vocabulary."""
    model: object
    sample_next: object
    filters: tuple        # the learner's (top_k_filter, top_p_filter), or (None, None)
    task: object
    vocab: dict
    inv: dict
    greedy: dict = field(default_factory=dict)  # prompt ids -> the greedy continuation's text
    runs: dict = field(default_factory=dict)    # (prompt ids, τ, top-k, top-p, seed) -> what _draw_ids gave

    KEEP = 64  # runs kept (each holds N_DRAWS short texts and NEW_TOKENS logit rows)

    @classmethod
    def of(cls, sample_next, model, task, top_k_filter=None, top_p_filter=None):
        vocab = data.lm_vocab(task)
        if len(vocab) != model.cfg.vocab_size:
            raise ValueError(f"the model has {model.cfg.vocab_size} tokens but the date task's vocabulary has "
                             f"{len(vocab)}: build it with vocab_size=len(data.lm_vocab(task))")
        return cls(model, sample_next, (top_k_filter, top_p_filter), task, vocab, {i: t for t, i in vocab.items()})


@dataclass
class SamplingRecord:
    """One state: the drawn continuations and, at the chosen step of the first one, its distribution."""
    source: str
    tau: float
    top_k: int
    top_p: float
    seed: int
    step: int
    texts: list                     # the N_DRAWS continuations (up to <eos>)
    greedy: str                     # the model's most probable continuation
    probs: torch.Tensor = None      # (V,) softmax(logits / τ) at the step, before top-k and top-p
    kept: torch.Tensor = None       # (V,) bool: what the learner's filters keep, or None
    reference_kept: torch.Tensor = None  # (V,) bool: what the reference's filters keep
    filters_agree: bool = None      # the learner's filters keep what the reference keeps (None: no filter on)
    checked: bool = None            # the notebook's checks of the filters on: True pass, False fail, None not run
    chosen: int = None              # the token the first continuation drew at the step
    learner_message: str = ""
    readouts: dict = field(default_factory=dict)


class _Unusable(Exception):
    """The learner's ``sample_next`` gave something the generation cannot use; the message says what."""


def _draw_ids(setup, prompt, tau, top_k, top_p, seed):
    """(the N_DRAWS continuations as lists of new ids, the first one's (logits, token) at each step, a problem
    sentence or ""): the model's own generation loop (``DecoderLM.complete``) with the learner's draw."""
    V = setup.model.cfg.vocab_size
    firsts = []

    def draw(logits):  # (N, V) -> (N,), one step of every continuation
        value, problem = call_for_widget(setup.sample_next, "sample_next", (logits, seed * 1000 + len(firsts)),
                                      {"temperature": tau, "top_k": top_k, "top_p": top_p}, has_reference=False)
        if not problem and not (torch.is_tensor(value) and tuple(value.shape) == (N_DRAWS,)
                                and value.dtype == torch.long):
            got = f"shape {tuple(value.shape)}, {value.dtype}" if torch.is_tensor(value) else type(value).__name__
            problem = f"your `sample_next` should return a LongTensor of shape (B,) = ({N_DRAWS},), got {got}"
        if not problem and not bool(((value >= 0) & (value < V)).all()):
            problem = f"your `sample_next` returned token ids outside 0 .. {V - 1}"
        if problem:
            raise _Unusable(problem)
        firsts.append((logits[0], int(value[0])))
        return value.to(logits.device)

    try:
        rows = setup.model.complete([prompt] * N_DRAWS, NEW_TOKENS, data.EOS_ID, choose=draw)
    except _Unusable as exc:
        return None, firsts, str(exc)
    return rows, firsts, ""


def _kept(setup, z, top_k, top_p):
    """What the learner's filters keep of the logits ``z`` (V,), as ``sample_next`` applies them (top-k, then top-p
    on what top-k left): (a bool (V,) tensor or None, what is wrong with them in words or "").

    Each filter is compared with the reference's rule on the input it was given, so a wrong top-k never makes a
    right top-p look wrong."""
    top_k_filter, top_p_filter = setup.filters
    if (top_k is not None and top_k_filter is None) or (top_p is not None and top_p_filter is None):
        return None, "give the explorer your top_k_filter and top_p_filter to see what they keep"
    notes = []
    for fn, name, arg in ((top_k_filter, "top_k_filter", top_k), (top_p_filter, "top_p_filter", top_p)):
        if arg is None:
            continue
        value, problem = call_for_widget(fn, name, (z[None].clone(), arg), has_reference=False)
        if problem:
            return None, problem
        if not (torch.is_tensor(value) and tuple(value.shape) == (1, z.shape[0]) and value.is_floating_point()):
            return None, f"your `{name}` should return float logits of the shape (1, {z.shape[0]}) it was given"
        out = value[0].detach().to("cpu", torch.float64)
        notes += _filter_problems(name, arg, z, out, setup.inv)
        z = out  # the next filter gets what this one gave, as in sample_next
    return torch.isfinite(z), "; ".join(notes)


def _reference_kept(z, top_k, top_p):
    """What the reference's filters keep of the logits ``z`` (V,): top-k, then top-p on what top-k left."""
    keep = torch.isfinite(z)
    if top_k is not None:
        keep = reference_top_k(z, top_k)
    if top_p is not None:
        keep = reference_top_p(z.masked_fill(~keep, NINF), top_p)
    return keep


def _tokens(ids, inv, most=3):
    """Some tokens by name, for a sentence: "'7', '-' and 2 more"."""
    names = [repr(inv.get(j, "?")) for j in ids[:most]]
    if len(ids) > most:
        return ", ".join(names) + f" and {len(ids) - most} more"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _filter_problems(name, arg, z, out, inv):
    """What is wrong with the learner's filter ``name``, which gave ``out`` (V,) for the logits ``z`` (V,) at its
    setting ``arg`` (k or p), in words ([] when it keeps what the reference keeps, with the logits unchanged)."""
    is_k = name == "top_k_filter"
    setting = f"k = {arg}" if is_k else f"p = {arg:g}"
    ref = reference_top_k(z, arg) if is_k else reference_top_p(z, arg)
    yours = torch.isfinite(out)
    if bool((yours == ref).all()):
        changed = (yours & ~torch.isclose(out, z, rtol=1e-9, atol=1e-12)).nonzero()[:, 0].tolist()
        if not changed:
            return []
        j = changed[0]
        return [f"your `{name}` keeps the tokens the reference keeps at {setting}, but changes their logits "
                f"(at {inv.get(j, '?')!r}: {out[j].item():.4g} where the logit is {z[j].item():.4g}); return the "
                f"logit where kept, -inf elsewhere"]
    n, n_ref = int(yours.sum()), int(ref.sum())
    s = "s" * (n != 1)
    words = (f"your `{name}` keeps {n} token{s} where the reference keeps {n_ref} at {setting}" if n != n_ref else
             f"your `{name}` keeps {n} token{s} at {setting}, as many as the reference, but not the same ones")
    extra, missing = (yours & ~ref).nonzero()[:, 0].tolist(), (ref & ~yours).nonzero()[:, 0].tolist()
    if extra:
        words += f": it keeps {_tokens(extra, inv)}, which the reference removes"
    if missing:
        words += (", and" if extra else ":") + f" it removes {_tokens(missing, inv)}, which the reference keeps"
    named = _known_mistake(is_k, arg, z, out, yours, extra)
    return [words + (f" (it looks like {named})" if named else "")]


def _known_mistake(is_k, arg, z, out, yours, extra):
    """The known mistake the learner's filter output matches on this case, in words, or ""."""
    filled = out[extra].unique() if extra else None
    if filled is not None and len(filled) == 1 and bool((out[extra] != z[extra]).all()):
        return f"the removed logits were set to {filled.item():g} instead of -inf, which leaves them a probability"
    if is_k:
        known = {"k + 1 tokens were kept": reference_top_k(z, arg + 1),
                 "the k smallest logits were kept instead of the largest": reference_top_k(-z, arg)}
    else:
        known = {"the token that crosses p was removed": reference_top_p(z, arg, crossing=False)}
    return next((words for words, keep in known.items() if bool((keep == yours).all())), "")


def _check_words(setup, top_k, top_p):
    """What the notebook's visible checks say of the learner's functions this setting uses ("" when they pass)."""
    used = [("sample_next", setup.sample_next)]
    used += [(name, fn) for name, fn, on in zip(("top_k_filter", "top_p_filter"), setup.filters, (top_k, top_p))
             if on is not None and fn is not None]
    return "\n".join(words for words in (check_words(name, fn) for name, fn in used) if words)


def compute(setup, source, tau, top_k=None, top_p=None, seed=0, step=0):
    """Draw N_DRAWS continuations of ``source`` with the learner's ``sample_next``; the first one's distribution at
    ``step``."""
    tau, top_k, top_p = check_settings(tau, top_k, top_p, setup.model.cfg.vocab_size)
    words = source_tokens(setup.task, source)
    prompt = data.lm_ids(" ".join(words), None, setup.vocab)
    if len(prompt) + NEW_TOKENS > setup.model.cfg.max_len:
        raise BadInput(f"that date is {len(words)} tokens; with the {NEW_TOKENS} the model writes it would pass the "
                       f"model's {setup.model.cfg.max_len} positions")
    key = tuple(prompt)
    if key not in setup.greedy:
        setup.greedy[key] = data.to_text(setup.model.complete([prompt], NEW_TOKENS, data.EOS_ID)[0], setup.vocab)
    greedy = setup.greedy[key]
    run = (key, tau, top_k, top_p, seed)
    if run not in setup.runs:
        if len(setup.runs) >= setup.KEEP:
            setup.runs.pop(next(iter(setup.runs)))
        setup.runs[run] = _draw_ids(setup, prompt, tau, top_k, top_p, seed)
    new, firsts, problem = setup.runs[run]
    rec = SamplingRecord(source, tau, top_k, top_p, seed, 0, [], greedy, learner_message=problem)
    if new is not None:
        rec.texts = [data.to_text(row, setup.vocab) for row in new]
        rec.step = min(max(int(step), 0), len(firsts) - 1)
        logits, rec.chosen = firsts[rec.step]
        z = logits.double() / tau
        rec.probs = torch.softmax(z, dim=-1)
        rec.reference_kept = _reference_kept(z, top_k, top_p)
        rec.kept, why = _kept(setup, z, top_k, top_p) if (top_k or top_p) else (rec.reference_kept, "")
        if rec.kept is not None and (top_k or top_p):
            rec.filters_agree = not why and bool((rec.kept == rec.reference_kept).all())
        rec.learner_message = why or _check_words(setup, top_k, top_p)
        if rec.filters_agree:
            verdicts = [visible_check(name, fn)[0] for name, fn, on in
                        zip(("top_k_filter", "top_p_filter"), setup.filters, (top_k, top_p)) if on is not None]
            rec.checked = False if False in verdicts else all(verdicts) or None
    valid = sum(is_iso_date(t) for t in rec.texts)
    rec.readouts = {"temperature": tau, "top_k": top_k, "top_p": top_p, "seed": seed, "step": rec.step,
                    "drawn": len(rec.texts), "valid_dates": valid,
                    "greedy_matches": sum(t == greedy for t in rec.texts),
                    "entropy": None if rec.probs is None else float(torch.special.entr(rec.probs).sum()),
                    "kept": None if rec.kept is None else int(rec.kept.sum()),
                    "reference_kept": None if rec.reference_kept is None else int(rec.reference_kept.sum())}
    return rec


# ====================================================================== draw
class SamplingPlot:
    """The explorer's figure, kept: SHOWN bars whose heights, colours and labels change in place, drawn in one
    pass of the axes (the figure around it is drawn once)."""

    def __init__(self):
        fig = new_figure(8.2, 3.4, dpi=85)
        fig.subplots_adjust(left=0.08, right=0.98, top=0.88, bottom=0.2)
        self.canvas = Canvas(fig)
        self.ax = ax = fig.add_subplot()
        self.bars = list(ax.bar(range(SHOWN), [0.0] * SHOWN, 0.6, color=BLUE))
        self.marker = ax.scatter([0], [0.0], marker="v", s=70, color="tab:red", zorder=3, label="drawn")
        self.edge = Patch(facecolor="white", edgecolor=WRONG, linewidth=2.0,
                          label="red edge: your filters and the\nreference decide this token differently")
        self.empty = ax.text(0.5, 0.5, "nothing drawn: see the message above", ha="center", va="center",
                             color="#7a1f1f", transform=ax.transAxes)
        ax.set_xticks(range(SHOWN))
        ax.set_xlim(-0.6, SHOWN - 0.4)
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("probability")
        ax.legend(loc="upper right", fontsize=8, frameon=False)
        self.canvas.animate(ax)  # every move changes the bars, their labels and the title

    def render(self, rec, inv):
        """Bars of softmax(logits / τ) at the step (the most probable SHOWN tokens): kept ones blue, removed ones
        grey (by the learner's filters), a red edge where the reference decides otherwise, the drawn token marked."""
        ax = self.ax
        drawn = rec.probs is not None
        ax.set_axis_on() if drawn else ax.set_axis_off()
        for artist in (*self.bars, self.marker, ax.get_legend(), ax.title):
            artist.set_visible(drawn)
        self.empty.set_visible(not drawn)
        if not drawn:
            return self.canvas
        order = torch.argsort(rec.probs, descending=True, stable=True)[:SHOWN].tolist()
        if rec.chosen not in order:
            order[-1] = rec.chosen
        heights = [float(rec.probs[j]) for j in order]
        differ = rec.kept is not None and bool((rec.kept != rec.reference_kept).any())  # yours and the reference
        for bar, j, h in zip(self.bars, order, heights):
            bar.set_height(h)
            bar.set_color(BLUE if rec.kept is None or bool(rec.kept[j]) else GREY)
            wrong = differ and bool(rec.kept[j] != rec.reference_kept[j])
            bar.set_edgecolor(WRONG if wrong else "none")
            bar.set_linewidth(2.0 if wrong else 0.0)
        at = order.index(rec.chosen)
        self.marker.set_offsets([[at, heights[at] + 0.03]])
        ax.set_xticklabels([label(inv.get(j, "?"), 8) for j in order], rotation=30, ha="right")
        settings = f"τ = {rec.tau:.3g}" + (f", top-k = {rec.top_k}" if rec.top_k else "") + \
            (f", top-p = {rec.top_p:g}" if rec.top_p else "")
        ax.set_title(f"continuation 1, step {rec.step}: softmax(logits / τ) ({settings}); grey = removed by the "
                     f"filters", fontsize=9)
        ax.legend(handles=[self.marker, self.edge][:1 + differ], loc="upper right", fontsize=8, frameon=False)
        return self.canvas


def draw(rec, inv):
    """The explorer's picture of ``rec`` as a new Figure."""
    return SamplingPlot().render(rec, inv).fig


# ====================================================================== readout
def readout(rec):
    """The continuations, each marked as a real ISO date or not, and the counts."""
    r = rec.readouts
    if not rec.texts:
        return '<div class="ck-readout-body">No continuation drawn.</div>'
    rows = "".join(
        f'<tr><td style="padding:0 12px 0 0">{k + 1}</td>'
        f'<td style="padding:0 12px 0 0"><code>{html.escape(t) or "∅"}</code></td>'
        f'<td>{"ISO date" if is_iso_date(t) else "not a date"}'
        f'{" = greedy" if t == rec.greedy else ""}</td></tr>' for k, t in enumerate(rec.texts))
    H = "" if r["entropy"] is None else f"; entropy at step {r['step']}: {r['entropy']:.2f} nats (of log V = " \
        f"{math.log(len(rec.probs)):.2f})"
    kept = "" if r["kept"] is None else f", {r['kept']} token{'s' * (r['kept'] != 1)} kept by the filters"
    if r["kept"] is not None and r["reference_kept"] is not None and r["kept"] != r["reference_kept"]:
        kept += f" (the reference keeps {r['reference_kept']})"
    return (f'<div class="ck-readout-body"><b>τ = {rec.tau:.3g}</b>: valid ISO dates {r["valid_dates"]} of '
            f'{r["drawn"]}, equal to the greedy answer <code>{html.escape(rec.greedy)}</code>: '
            f'{r["greedy_matches"]} of {r["drawn"]}{H}{kept}.{_verdict(rec)}'
            f'<table style="border-collapse:collapse">{rows}</table></div>')


def _verdict(rec):
    """A line on the learner's filters in use ("" when none is on): red when they keep other tokens than the
    reference or the notebook's checks fail them, green otherwise."""
    if rec.filters_agree is None:
        return ""
    used = [name for name, on in (("top_k_filter", rec.top_k), ("top_p_filter", rec.top_p)) if on]
    both = len(used) == 2
    subject = "Your " + " and ".join(used)
    if not rec.filters_agree:
        return (f'<div style="color:#7a1f1f">{subject} {"do" if both else "does"} not do what the reference does '
                f'here (see the message above).</div>')
    keeps = f'{subject} {"keep" if both else "keeps"} what the reference keeps'
    if rec.checked is False:
        return (f'<div style="color:#7a1f1f">{keeps} here, but the notebook\'s check fails '
                f'{"one of them" if both else "it"} (see the message above).</div>')
    return (f'<div style="color:#1a6b1a">{keeps}'
            + (f' and {"pass" if both else "passes"} the notebook\'s checks of their values' if rec.checked else "")
            + '.</div>')


# ====================================================================== the widget
class SamplingExplorer(Explorer):
    """Several continuations of one prompt drawn with the learner's ``sample_next``, at a temperature (and top-k,
    top-p) the learner moves; the next-token distribution of the first one at a chosen step."""

    name = "sampling"

    def __init__(self, sample_next, model, task, source="the 1st of february 2014", temperature=1.0,
                 top_k_filter=None, top_p_filter=None):
        super().__init__()
        self.setup = SamplingSetup.of(sample_next, model, task, top_k_filter, top_p_filter)
        V = model.cfg.vocab_size
        self.slider = W.FloatLogSlider(value=temperature, base=10, min=math.log10(TAU_MIN),
                                       max=math.log10(TAU_MAX), step=0.01, description="temperature",
                                       continuous_update=False, readout_format=".2f",
                                       style={"description_width": "initial"})
        self.slider.add_class("ck-sampling-temperature")
        self.top_k = W.IntSlider(value=0, min=0, max=V, description="top-k (0 = off)", continuous_update=False,
                                 style={"description_width": "initial"})
        self.top_k.add_class("ck-sampling-top-k")
        self.top_p = W.FloatSlider(value=1.0, min=0.05, max=1.0, step=0.05, description="top-p (1 = off)",
                                   continuous_update=False, style={"description_width": "initial"})
        self.top_p.add_class("ck-sampling-top-p")
        self.source_box = W.Text(value=source, description="date", continuous_update=False,
                                 layout=W.Layout(width="360px"))
        self.source_box.add_class("ck-sampling-text")
        self.step = W.IntSlider(value=0, min=0, max=NEW_TOKENS - 1, description="step shown", continuous_update=False,
                                style={"description_width": "initial"})
        self.step.add_class("ck-sampling-step")
        self.again = W.Button(description="draw again")
        self.again.add_class("ck-sampling-again")
        self._assemble(W.HBox([self.slider, self.top_k, self.top_p]),
                       W.HBox([self.source_box, self.step, self.again]))
        self.record = None
        self.plot = SamplingPlot()
        self.settings = {"source": source, "tau": temperature, "top_k": None, "top_p": None, "seed": 0, "step": 0}
        with one_thread():
            self._update()
        self._watch(self.slider, lambda v: self._update(tau=float(v)))
        self._watch(self.top_k, lambda v: self._update(top_k=int(v) or None))
        self._watch(self.top_p, lambda v: self._update(top_p=None if v >= 1 else round(float(v), 4)))
        self._watch(self.source_box, lambda v: self._update(source=v))
        self._watch(self.step, lambda v: self._update(step=int(v)))
        self.again.on_click(lambda _: self._on_change(lambda seed: self._update(seed=seed),
                                                      self.settings["seed"] + 1))

    def _update(self, **changes):
        """compute → draw → readout with the changed settings, then commit (a failure keeps the last good state)."""
        settings = dict(self.settings, **changes)
        rec = compute(self.setup, **settings)
        fig, readout_html = self.plot.render(rec, self.setup.inv), readout(rec)
        self.learner_message = rec.learner_message
        self._show(fig, readout_html)
        self.settings, self.record, self.readouts = settings, rec, rec.readouts


def sampling_explorer(sample_next, model, task, source="the 1st of february 2014", temperature=1.0,
                      top_k_filter=None, top_p_filter=None):
    """Continuations of a date prompt drawn by ``model`` (notebook 07's trained GPT) with the learner's
    ``sample_next``; pass the learner's ``top_k_filter`` and ``top_p_filter`` to see what they keep."""
    return SamplingExplorer(sample_next, model, task, source, temperature, top_k_filter, top_p_filter)
