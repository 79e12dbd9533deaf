"""The temperature explorer (notebook 03): bars of softmax(logits / τ), the learner's beside the reference.

compute → draw → readout:

* ``compute(softmax, logits, labels, tau)`` -> ``TemperatureRecord``
* ``draw(record)`` -> a matplotlib Figure (the widget keeps one ``TemperaturePlot`` and changes its bars in
  place: a move of τ redraws the bars and the title only)
* ``readout(record)`` -> the HTML table under the plot

Before it says "Your softmax matches the reference", the explorer runs the notebook's visible checks of
``softmax`` (``base.visible_check``): the widget feeds one 1-D float32 row, the checks feed batches, other
``dim`` values and float64, so a softmax that sums over the wrong axis draws the right bars here and still
fails them; the explorer then says what the check says.
"""
import math
from dataclasses import dataclass

import ipywidgets as W
import torch

from .base import (BLUE, GREY, BadInput, Canvas, Explorer, call_for_widget, check_words, fmt, label, new_figure,
                   one_thread, sentence, visible_check)
from .builtin import NINF, reference_probabilities

TAU_MIN, TAU_MAX = 0.05, 20.0
# The slider moves its exponent in steps; these put tau = 1 (exponent 0) and both ends on the grid.
# A browser snaps the value it is given to the grid and sends the snapped value back: a move of less
# than half a step is such an echo, not the learner's, and is ignored.
TAU_STEP = (math.log10(TAU_MAX) - math.log10(TAU_MIN)) / 260
MAX_LOGITS = 12

PRESETS = {
    "next word (notebook 03, §5)": (["cat", "dog", "mat", "hat", "bank"], [3.0, 2.0, 1.0, 0.5, -1.0]),
    "one query's scores (§1)": (["k1", "k2", "k3", "k4"], [2.0, 1.0, 0.1, -1.0]),
    "a close race": (["yes", "no", "maybe"], [1.0, 0.9, -0.5]),
    "all scores equal": (["k1", "k2", "k3", "k4"], [1.0, 1.0, 1.0, 1.0]),
    "two keys blocked (-inf)": (["k1", "k2", "k3", "k4", "k5"], [1.2, NINF, 2.0, NINF, 0.3]),
    "huge logits (no overflow)": (["a", "b", "c"], [1000.0, 999.0, 998.0]),
}
CUSTOM = "custom (the logits typed)"  # what the preset menu shows once the logits are no preset's


# ====================================================================== input
def parse_logits(text):
    """Typed logits ("3, 2, -inf") as a list of floats, or BadInput saying what is allowed."""
    cleaned = text.replace("−", "-").replace(";", ",").replace(",", " ").split()
    if not cleaned:
        raise BadInput(f"Type between 1 and {MAX_LOGITS} numbers separated by commas, e.g. 3, 2, 1, 0.5, -1 "
                       f"(-inf blocks an entry).")
    if len(cleaned) > MAX_LOGITS:
        raise BadInput(f"{len(cleaned)} logits is more than this widget draws: type at most {MAX_LOGITS}.")
    values = []
    for tok in cleaned:
        try:
            v = float(tok)
        except ValueError:
            raise BadInput(f"{tok!r} is not a number. Type logits separated by commas, e.g. 3, 2, 1, 0.5, -1 "
                           f"(-inf blocks an entry).") from None
        if v != v or v == math.inf:
            raise BadInput(f"{tok!r} cannot be a logit: use finite numbers, or -inf for a blocked entry.")
        values.append(v)
    return values


def parse_temperature(text):
    """A typed (or given) τ as a float in [TAU_MIN, TAU_MAX], or BadInput saying what is allowed."""
    allowed = f"Type a number from {TAU_MIN:g} to {TAU_MAX:g}, e.g. 0.5."
    try:
        tau = float(str(text).strip().replace("−", "-"))
    except ValueError:
        raise BadInput(f"{str(text).strip()!r} is not a number. {allowed}") from None
    if tau != tau:
        raise BadInput(f"NaN is not a temperature. {allowed}")
    if tau == 0:
        raise BadInput(f"τ = 0 is not allowed: softmax divides the logits by τ. Its limit τ → 0 is the argmax, "
                       f"marked ▼ on the plot. {allowed}")
    if tau < 0:
        raise BadInput(f"τ = {tau:g} is not allowed: the temperature must be positive (a negative τ would turn "
                       f"the ranking upside down). {allowed}")
    if not TAU_MIN <= tau <= TAU_MAX:
        raise BadInput(f"τ = {tau:g} is outside what this explorer draws. {allowed} The marked limits show "
                       f"where τ → 0 and τ → ∞ lead.")
    return tau


# ====================================================================== compute
def entropy(p):
    """H = -sum p log p in nats (0 log 0 = 0; negative entries, which are wrong anyway, count as 0)."""
    return float(torch.special.entr(p.clamp_min(0)).sum())


@dataclass
class TemperatureRecord:
    """One state of the explorer. ``reference`` and ``learner`` are float64 of shape (n,) like ``logits``;
    ``learner`` is None when the learner's softmax cannot be drawn (``learner_message`` says why)."""
    tau: float
    logits: list
    labels: list
    reference: torch.Tensor
    learner: torch.Tensor = None
    learner_message: str = ""
    readouts: dict = None
    checked: bool = None  # the notebook's visible checks: True passed, False failed, None not run


def learner_side(softmax, x, tau, ref, labels):
    """(the learner's probabilities as float64 (n,) or None, problem sentence or "")."""
    value, problem = call_for_widget(softmax, "softmax", (x,), {"temperature": tau})
    if problem:
        return None, problem
    if not torch.is_tensor(value):
        return None, (f"your `softmax` returned a {type(value).__name__}, not a tensor. The reference is shown "
                      f"alone.")
    if tuple(value.shape) != tuple(x.shape):
        return None, (f"your `softmax` returned shape {tuple(value.shape)} for logits of shape "
                      f"{tuple(x.shape)}; it must keep the shape. The reference is shown alone.")
    if not value.is_floating_point():
        return None, f"your `softmax` returned {value.dtype}, not a float tensor. The reference is shown alone."
    p = value.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(p).all()):
        j = int((~torch.isfinite(p)).nonzero()[0, 0])
        hint = (" With every logit -inf the course's rule is all zeros, never NaN." if
                bool((x == NINF).all()) else " Subtract the maximum before exp.")
        return None, f"your `softmax` returned {p[j].item()} at position {j}.{hint} The reference is shown alone."
    notes = sentence(_differences(p, x, tau, ref, labels))
    return p, notes or check_words("softmax", softmax)  # right here: is it right where the checks look?


def _differences(p, x, tau, ref, labels):
    """What is wrong with the learner's probabilities ``p`` (n,), in words; a known mistake is named."""
    notes = []
    total = float(p.sum())
    if float(ref.sum()) > 0.5 and abs(total - 1) > 1e-3:
        notes.append(f"your probabilities sum to {total:.4g}, not 1")
    if bool((p < 0).any()):
        notes.append("some of your probabilities are negative")
    diff = float((p - ref).abs().max()) if p.numel() else 0.0
    if diff > 1e-4:
        where = int((p - ref).abs().argmax())
        known = {"you multiply by τ instead of dividing": reference_probabilities(x, 1.0 / tau),
                 "τ is ignored": reference_probabilities(x, 1.0)}
        named = [k for k, q in known.items() if abs(tau - 1) > 1e-6 and float((q - p).abs().max()) < 1e-4]
        notes.append(f"your bars differ from the reference by up to {diff:.3g} (at {labels[where]!r})"
                     + (f": it looks like {named[0]}" if named else ""))
    return notes


def compute(softmax, logits, labels, tau):
    """The reference and the learner's ``softmax`` on ``logits`` (a list of n floats) at temperature ``tau``."""
    x = torch.tensor(logits, dtype=torch.float32)  # (n,)
    ref = reference_probabilities(x, tau)
    learner, learner_message = learner_side(softmax, x, tau, ref, labels)
    readouts = {"temperature": tau, "entropy": entropy(ref), "max_prob": float(ref.max()),
                "learner_entropy": None if learner is None else entropy(learner),
                "learner_max_prob": None if learner is None else float(learner.max()),
                "max_abs_diff": None if learner is None else float((learner - ref).abs().max()),
                "allowed": int(torch.isfinite(x).sum())}
    return TemperatureRecord(tau, list(logits), list(labels), ref, learner, learner_message, readouts,
                             visible_check("softmax", softmax)[0] if learner is not None and not learner_message
                             else None)


# ====================================================================== draw
def _ylim(rec):
    """The y range: [0, 1.1], widened (on a coarse grid, so that a move of τ rarely changes it) for a learner's
    softmax that goes below 0 or above 1."""
    if rec.learner is None:
        return 0.0, 1.1
    top, low = float(rec.learner.max()) * 1.05, float(rec.learner.min()) * 1.05
    return (0.0 if low >= 0 else math.floor(low * 4) / 4, 1.1 if top <= 1.1 else math.ceil(top * 4) / 4)


def _title(rec):
    return (f"softmax(logits / τ) at τ = {rec.tau:.3g}:   H = {rec.readouts['entropy']:.3f} nats,   "
            f"max p = {rec.readouts['max_prob']:.3f}")


class TemperaturePlot:
    """The explorer's figure, kept: a move of τ changes the bars' heights and the title in place and redraws only
    them; new logits, labels or y range lay the figure out again."""

    def __init__(self):
        self.canvas, self.layout = None, None

    def render(self, rec):
        """The ``Canvas`` showing ``rec`` (one draw of what changed)."""
        layout = (tuple(map(str, rec.logits)), tuple(rec.labels), rec.learner is None, _ylim(rec))
        if layout != self.layout:
            self._build(rec)
            self.layout = layout
        if rec.learner is not None:
            for bar, h in zip(self.learner_bars, rec.learner.tolist()):
                bar.set_height(h)
        for bar, h in zip(self.reference_bars, rec.reference.tolist()):
            bar.set_height(h)
        self.title.set_text(_title(rec))
        return self.canvas

    def _build(self, rec):
        """Bars of both sides, the τ → ∞ (uniform over the finite logits) and τ → 0 (argmax) limits, −∞
        marks under blocked entries."""
        values, learner, k = rec.logits, rec.learner, rec.readouts["allowed"]
        fig = new_figure(8.2, 3.6, dpi=85)
        fig.subplots_adjust(left=0.08, right=0.76, top=0.9, bottom=0.1)
        self.canvas = canvas = Canvas(fig)
        ax = fig.add_subplot()
        xs = list(range(len(values)))
        self.learner_bars = []
        if learner is not None:
            w = 0.38
            self.learner_bars = list(ax.bar([j - w / 2 for j in xs], learner.tolist(), w, color=BLUE,
                                            label="your softmax"))
            self.reference_bars = list(ax.bar([j + w / 2 for j in xs], rec.reference.tolist(), w, color=GREY,
                                              label="reference"))
        else:
            self.reference_bars = list(ax.bar(xs, rec.reference.tolist(), 0.55, color=GREY, label="reference"))
            ax.text(0.5, 0.97, "your softmax: not shown (see the message above)", transform=ax.transAxes,
                    ha="center", va="top", color="#7a1f1f", fontsize=9)
        canvas.animate(*self.learner_bars, *self.reference_bars)
        if k > 0:
            ax.axhline(1.0 / k, ls="--", lw=1.2, color="tab:green", label=uniform_words(len(values), k))
            best = max(v for v in values if v != NINF)
            top = [j for j in xs if values[j] == best]
            canvas.animate(ax.scatter(top, [1.0 / len(top)] * len(top), marker="v", s=70, color="tab:red",
                                      zorder=3, label="τ → 0: argmax"))  # drawn after the bars, on top
        for j in xs:
            if values[j] == NINF:
                ax.text(j, 0.03, "−∞", ha="center", color="0.35", fontsize=9)
        ax.set_ylim(*_ylim(rec))
        ax.set_xlim(-0.6, len(values) - 0.4)
        ax.set_xticks(xs)
        ax.set_xticklabels([label(w) for w in rec.labels])
        ax.set_ylabel("probability")
        self.title = canvas.animate(ax.set_title(_title(rec), fontsize=10))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def uniform_words(n, k):
    """The legend of the dashed line, the τ → ∞ limit of ``n`` logits of which ``k`` are finite: a -inf logit
    keeps probability 0 at every τ, so the line is at 1/k, the share of each finite logit."""
    if k == n:
        return f"τ → ∞: uniform, 1/{n}"
    return f"τ → ∞: 1/{k} on {'each of ' * (k > 1)}the\n{finite_logits(k)} (−∞ stays 0)"


def finite_logits(k):
    """The words for ``k`` finite logits: "3 finite logits", "1 finite logit"."""
    return f"{k} finite logit{'s' * (k != 1)}"


def draw(rec):
    """The explorer's picture of ``rec`` as a new Figure."""
    return TemperaturePlot().render(rec).fig


# ====================================================================== readout
def readout(rec):
    """The table under the plot: entropy and max probability of both sides with their limits, and a verdict."""
    r, k = rec.readouts, rec.readouts["allowed"]
    log_k = f"log {k} = {math.log(k):.3f}" if k > 0 else "0"
    uniform = "uniform" if k == len(rec.logits) else f"uniform over the {finite_logits(k)}"
    rows = [("entropy H (nats)", r["learner_entropy"], r["entropy"], f"0 (argmax) … {log_k} ({uniform})"),
            ("max probability", r["learner_max_prob"], r["max_prob"],
             f"1/{k} = {1 / k:.3f} ({uniform}) … 1 (argmax)" if k else "no allowed entry: all zeros")]
    td = '<td style="padding:1px 12px 1px 0">'
    table = "".join(f"<tr>{td}{a}</td>{td}<b>{fmt(b)}</b></td>{td}{fmt(c)}</td>{td}{d}</td></tr>"
                    for a, b, c, d in rows)
    verdict = ""
    if rec.learner is not None and not rec.learner_message:  # right here, and the notebook's checks pass it
        verdict = (f'<div style="color:#1a6b1a">Your softmax matches the reference '
                   f'(max |difference| = {r["max_abs_diff"]:.1e})'
                   + (" and passes the notebook's checks of its values" if rec.checked else "") + '.</div>')
    elif rec.learner is not None and r["max_abs_diff"] <= 1e-4:
        verdict = ('<div style="color:#7a1f1f">Your bars match here, but the notebook\'s check fails your softmax '
                   '(see the message above).</div>')
    return (f'<div class="ck-readout-body"><b>τ = {rec.tau:.3g}</b>'
            f'<table style="border-collapse:collapse"><tr>'
            + "".join(f'<th style="text-align:left;padding:1px 12px 1px 0">{h}</th>'
                      for h in ("quantity", "your softmax", "reference", "limits"))
            + f'</tr>{table}</table>{verdict}</div>')


# ====================================================================== the widget
class TemperatureExplorer(Explorer):
    """Bars of softmax(logits / τ): the learner's ``softmax`` beside the reference, with entropy and max p."""

    name = "temperature"

    def __init__(self, softmax, logits=None, labels=None, temperature=1.0, preset=None):
        super().__init__()
        self.fn = softmax
        preset = preset or next(iter(PRESETS))
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        words, values = PRESETS[preset]
        if logits is not None:
            preset = CUSTOM
            values = [float(v) for v in (logits.tolist() if torch.is_tensor(logits) else logits)]
            words = list(labels) if labels is not None else [f"x{j + 1}" for j in range(len(values))]
            if len(words) != len(values):
                raise ValueError(f"{len(labels)} labels for {len(values)} logits")
        tau = parse_temperature(temperature)
        parse_logits(", ".join(map(str, values)))  # same rules as typed logits

        self.preset = W.Dropdown(options=[*PRESETS, CUSTOM], value=preset, description="preset",
                                 style={"description_width": "initial"})
        self.preset.add_class("ck-temperature-preset")
        self.logits_box = W.Text(value=", ".join(f"{v:g}" for v in values), description="logits",
                                 continuous_update=False, placeholder="e.g. 3, 2, 1, 0.5, -1",
                                 layout=W.Layout(width="360px"))
        self.logits_box.add_class("ck-temperature-logits")
        self.slider = W.FloatLogSlider(value=tau, base=10, min=math.log10(TAU_MIN), max=math.log10(TAU_MAX),
                                       step=TAU_STEP, description="temperature", readout=False,
                                       continuous_update=True, layout=W.Layout(width="420px"),
                                       style={"description_width": "initial"})
        self.slider.add_class("ck-temperature-slider")
        # the slider's own readout is off: this box shows τ (and takes a typed one), so one number is shown
        self.tau_box = W.Text(value=f"{tau:g}", description="τ =", continuous_update=False,
                              layout=W.Layout(width="150px"), style={"description_width": "initial"})
        self.tau_box.add_class("ck-temperature-text")
        hint = W.HTML('<span style="color:#666">drag, or type τ and press Enter</span>')
        self._assemble(W.HBox([self.preset, self.logits_box]), W.HBox([self.slider, self.tau_box, hint]))

        self.temperature, self.logits, self.labels = None, None, None
        self.reference, self.learner = None, None
        self.plot = TemperaturePlot()
        with one_thread():
            self._update(values, list(words), tau)

        self._watch(self.preset, self._on_preset)
        self._watch(self.logits_box, self._on_logits)
        self._watch(self.slider, self._on_slider)
        self._watch(self.tau_box, self._on_tau_text)

    # ------------------------------------------------------------ handlers
    def _on_preset(self, name):
        if name == CUSTOM:  # the logits typed are the custom ones: nothing to load
            return
        words, values = PRESETS[name]
        self._update(values, list(words), self.temperature)
        self._set(self.logits_box, ", ".join(f"{v:g}" for v in values))

    def _on_logits(self, text):
        """Typed logits: the words stay when the count does; the menu says custom unless they are its preset's."""
        values = parse_logits(text)
        words = self.labels if len(self.labels) == len(values) else [f"x{j + 1}" for j in range(len(values))]
        self._update(values, list(words), self.temperature)
        if self.preset.value != CUSTOM and values != list(PRESETS[self.preset.value][1]):
            self._set(self.preset, CUSTOM)

    def _on_slider(self, tau):
        if abs(math.log10(float(tau)) - math.log10(self.temperature)) < 0.5 * TAU_STEP + 1e-9:
            return  # the browser's echo of a value it snapped to its grid
        self._update(self.logits, self.labels, float(tau))
        self._set(self.tau_box, f"{float(tau):.3g}")

    def _on_tau_text(self, text):
        tau = parse_temperature(text)
        self._update(self.logits, self.labels, tau)
        self._set(self.slider, tau)

    def _update(self, values, labels, tau):
        """compute → draw → readout, then commit (anything before may fail and keep the last good state)."""
        rec = compute(self.fn, values, labels, tau)
        fig, readout_html = self.plot.render(rec), readout(rec)
        self.learner_message = rec.learner_message
        self._show(fig, readout_html)
        self.temperature, self.logits, self.labels = rec.tau, rec.logits, rec.labels
        self.reference, self.learner = rec.reference, rec.learner
        self.readouts = rec.readouts
        self.record = rec


def temperature_explorer(softmax, logits=None, labels=None, temperature=1.0, preset=None):
    """Explore softmax(logits / τ) with the learner's ``softmax`` beside the reference.

    Args:
        softmax: the learner's function ``softmax(x, dim=-1, temperature=1.0)``.
        logits, labels: the scores to start with and their names (default: a preset).
        temperature: starting τ, from 0.05 to 20.
        preset: name of a preset in ``PRESETS``.
    """
    return TemperatureExplorer(softmax, logits=logits, labels=labels, temperature=temperature, preset=preset)
