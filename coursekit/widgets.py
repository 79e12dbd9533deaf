"""Widgets to play with: the learner's own function next to a reference, redrawn on every change.

    from coursekit import widgets
    widgets.temperature_explorer(softmax)          # notebook 03
    widgets.mask_explorer(masked_attention)        # notebook 04
    widgets.cross_attention_viewer(model, task)    # notebook 08
    widgets.kv_cache_stepper(decoder_block_step, gpt, task)  # notebook 09

Each function returns an ``Explorer``. Displayed in a notebook, it shows its
``.ui`` (an ipywidgets VBox). From Python, its controls are attributes
(``.slider``, ``.kind``, ...) and what it currently shows is state: ``.png``
(the bytes of the plot), ``.readouts`` (a dict of numbers), ``.message`` (the
last complaint about the input, "" after a good one) and ``.learner_message``
(what is wrong with the learner's function, "" when it works).

How it is built, so that it stays reliable in a real browser:

* The plot is a matplotlib ``Figure`` rendered with Agg to PNG bytes and put
  into one ``ipywidgets.Image``. No pyplot figure is ever created, so the
  inline backend never adds a second copy; no ``Output`` widget is cleared and
  refilled, so nothing flickers or goes missing.
* The reference side is plain torch written here. It never comes from the
  ``solutions`` package, which learners do not have.
* The learner's function runs through the grader's guarded call (time limit,
  prints and warnings kept off the notebook). If it is still the stub, raises,
  or returns garbage, the widget says so in words and draws the reference alone.
* Bad input (a temperature of 0, an empty or too long sentence) is answered
  with what is allowed, and the widget keeps its last good state.

Adding a widget (the cross-attention viewer of notebook 08, the KV-cache
stepper of notebook 09): subclass ``Explorer``; build the controls and call
``self._assemble(rows_of_controls)``; hook each control with
``self._watch(control, handler)``; in the handlers validate the input (raise
``BadInput`` with what is allowed), compute the reference with plain torch,
call the learner through ``self._call_learner``, draw a ``Figure`` with
``_new_figure`` and finish with ``self._show(fig, readouts_html)``; commit the
new state only after that, so a failure anywhere keeps the last good state.
"""
import html
import io
import itertools
import math
import warnings
import zlib

import ipywidgets as W
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from grader import _safe

from . import plots

__all__ = ["temperature_explorer", "mask_explorer", "cross_attention_viewer", "kv_cache_stepper",
           "CrossAttentionViewer", "KVCacheStepper", "TemperatureExplorer", "MaskExplorer", "Explorer", "BadInput"]

LEARNER_TIME_LIMIT = 5.0  # seconds one call of the learner's function may take inside a widget
_BLUE = "#1f77b4"
_GREY = "0.62"


class BadInput(ValueError):
    """Input the widget cannot draw; its message says what is allowed."""


def _new_figure(width, height, dpi=80):
    """A matplotlib Figure that pyplot knows nothing about (so the inline backend never shows it)."""
    return Figure(figsize=(width, height), dpi=dpi)


def _label(text, limit=10):
    """A token as a tick label: short, and with no '$' that matplotlib would read as maths."""
    text = str(text)
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("$", r"\$")


def _sentence(notes):
    """Join notes into one sentence with a capital letter (and nothing else changed), or ""."""
    if not notes:
        return ""
    text = "; ".join(notes) + "."
    return text[0].upper() + text[1:]


def _fmt(v, digits=3):
    if v is None:
        return "—"
    if v == -math.inf:
        return "-inf"
    return f"{v:.{digits}f}"


class Explorer:
    """Base of every widget: controls, one PNG image, readouts and a message line."""

    name = "explorer"  # CSS class ck-<name> on the container, for browsers and tests

    def __init__(self):
        self.png = b""
        self.readouts = {}
        self.message = ""
        self.learner_message = ""
        self._busy = False
        self.image = W.Image(format="png", layout=W.Layout(max_width="100%", height="auto"))
        self.image.add_class("ck-plot")
        self.notice = W.HTML()
        self.notice.add_class("ck-message")
        self.readout = W.HTML()
        self.readout.add_class("ck-readout")
        self.ui = None

    # ------------------------------------------------------------ building
    def _assemble(self, *rows):
        self.ui = W.VBox([*rows, self.notice, self.image, self.readout])
        self.ui.add_class("ck-widget")
        self.ui.add_class(f"ck-{self.name}")

    def _watch(self, control, handler):
        """Call ``handler(new value)`` when the learner changes ``control`` (not when the widget does)."""
        control.observe(lambda change: self._on_change(handler, change["new"]), names="value")

    def _on_change(self, handler, value):
        if self._busy:  # a change the widget made itself while handling another one
            return
        self._busy = True
        try:
            handler(value)
        except BadInput as exc:
            self.message = str(exc)
            self._show_notice()
        except Exception as exc:  # never leave a traceback in the learner's notebook
            self.message = f"The widget could not draw this ({type(exc).__name__}: {exc}); it kept what it showed."
            self._show_notice()
        finally:
            self._busy = False

    def _set(self, control, value):
        """Change a control from the widget's own code without triggering its handler."""
        busy, self._busy = self._busy, True
        try:
            control.value = value
        finally:
            self._busy = busy

    # ------------------------------------------------------------ showing
    def _show(self, fig, readout_html):
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig.savefig(buf, format="png")
        self.png = buf.getvalue()
        self.image.value = self.png
        self.readout.value = readout_html
        self.message = ""
        self._show_notice()

    def _show_notice(self):
        parts = []
        if self.message:
            parts.append(f'<div style="color:#a04000"><b>Input not used:</b> {html.escape(self.message)}</div>')
        if self.learner_message:
            parts.append(f'<div style="color:#7a1f1f"><b>Your function:</b> {html.escape(self.learner_message)}</div>')
        self.notice.value = "".join(parts)

    def _ipython_display_(self):
        from IPython.display import display
        display(self.ui)

    # ------------------------------------------------------------ the learner's function
    def _call_learner(self, fn, fn_name, args, kwargs=None, time_limit=None, has_reference=True):
        """Run the learner's function safely: (value, None) or (None, a sentence saying what went wrong).

        ``has_reference``: the widget draws a reference beside the learner's side (the
        messages then say it is shown alone).
        """
        time_limit = time_limit or LEARNER_TIME_LIMIT
        alone = " The reference is shown alone." if has_reference else ""
        if not callable(fn):
            return None, (f"`{fn_name}` is not a function (got {type(fn).__name__}). Run the exercise cell that "
                          f"defines it, then this cell again.")
        out = _safe.call(fn, args, kwargs or {}, time_limit=time_limit)
        if out.timed_out:
            return None, (f"your `{fn_name}` did not finish within {time_limit:g} s and was stopped: look "
                          f"for a loop that never ends.{alone}")
        err = out.error
        if isinstance(err, NotImplementedError):
            return None, (f"`{fn_name}` is not implemented yet (it raises NotImplementedError). Write it in the "
                          f"exercise cell above, run that cell, then run this cell again.{alone}")
        if err is not None:
            return None, (f"your `{fn_name}` raised {type(err).__name__}: {str(err)[:200]}.{alone}")
        return out.value, None


# ====================================================================== temperature (notebook 03)
TAU_MIN, TAU_MAX = 0.05, 20.0
# The slider moves its exponent in steps; these put tau = 1 (exponent 0) and both ends on the grid.
# A browser snaps the value it is given to the grid and sends the snapped value back: a move of less
# than half a step is such an echo, not the learner's, and is ignored.
_TAU_STEP = (math.log10(TAU_MAX) - math.log10(TAU_MIN)) / 260
MAX_LOGITS = 12
_NINF = float("-inf")

PRESETS = {
    "next word (notebook 03, §5)": (["cat", "dog", "mat", "hat", "bank"], [3.0, 2.0, 1.0, 0.5, -1.0]),
    "one query's scores (§1)": (["k1", "k2", "k3", "k4"], [2.0, 1.0, 0.1, -1.0]),
    "a close race": (["yes", "no", "maybe"], [1.0, 0.9, -0.5]),
    "all scores equal": (["k1", "k2", "k3", "k4"], [1.0, 1.0, 1.0, 1.0]),
    "two keys blocked (-inf)": (["k1", "k2", "k3", "k4", "k5"], [1.2, _NINF, 2.0, _NINF, 0.3]),
    "huge logits (no overflow)": (["a", "b", "c"], [1000.0, 999.0, 998.0]),
}


def reference_softmax(x, temperature):
    """softmax(x / tau) over the last axis in float64; all -inf (nothing allowed) gives zeros, not NaN."""
    z = x.to(torch.float64) / temperature
    if z.numel() == 0 or bool((z == _NINF).all()):
        return torch.zeros_like(z)
    return torch.softmax(z, dim=-1)


def _entropy(p):
    """H = -sum p log p in nats (0 log 0 = 0; negative entries, which are wrong anyway, count as 0)."""
    return float(torch.special.entr(p.clamp_min(0)).sum())


def _parse_logits(text):
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


def _parse_temperature(text):
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
            values = [float(v) for v in (logits.tolist() if torch.is_tensor(logits) else logits)]
            words = list(labels) if labels is not None else [f"x{j + 1}" for j in range(len(values))]
            if len(words) != len(values):
                raise ValueError(f"{len(labels)} labels for {len(values)} logits")
        tau = _parse_temperature(temperature)
        _parse_logits(", ".join(map(str, values)))  # same rules as typed logits

        self.preset = W.Dropdown(options=list(PRESETS), value=preset, description="preset",
                                 style={"description_width": "initial"})
        self.preset.add_class("ck-temperature-preset")
        self.logits_box = W.Text(value=", ".join(f"{v:g}" for v in values), description="logits",
                                 continuous_update=False, placeholder="e.g. 3, 2, 1, 0.5, -1",
                                 layout=W.Layout(width="360px"))
        self.logits_box.add_class("ck-temperature-logits")
        self.slider = W.FloatLogSlider(value=tau, base=10, min=math.log10(TAU_MIN), max=math.log10(TAU_MAX),
                                       step=_TAU_STEP, description="temperature", readout=False,
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
        self._update(values, list(words), tau)

        self._watch(self.preset, self._on_preset)
        self._watch(self.logits_box, self._on_logits)
        self._watch(self.slider, self._on_slider)
        self._watch(self.tau_box, self._on_tau_text)

    # ------------------------------------------------------------ handlers
    def _on_preset(self, name):
        words, values = PRESETS[name]
        self._update(values, list(words), self.temperature)
        self._set(self.logits_box, ", ".join(f"{v:g}" for v in values))

    def _on_logits(self, text):
        values = _parse_logits(text)
        words = PRESETS[self.preset.value][0]
        if len(words) != len(values):
            words = self.labels if len(self.labels) == len(values) else [f"x{j + 1}" for j in range(len(values))]
        self._update(values, list(words), self.temperature)

    def _on_slider(self, tau):
        if abs(math.log10(float(tau)) - math.log10(self.temperature)) < 0.5 * _TAU_STEP + 1e-9:
            return  # the browser's echo of a value it snapped to its grid
        self._update(self.logits, self.labels, float(tau))
        self._set(self.tau_box, f"{float(tau):.3g}")

    def _on_tau_text(self, text):
        tau = _parse_temperature(text)
        self._update(self.logits, self.labels, tau)
        self._set(self.slider, tau)

    # ------------------------------------------------------------ computing and drawing
    def _learner_side(self, x, tau, ref, labels):
        """(the learner's probabilities as float64 or None, problem sentence or "")."""
        value, problem = self._call_learner(self.fn, "softmax", (x,), {"temperature": tau})
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
                    bool((x == _NINF).all()) else " Subtract the maximum before exp.")
            return None, (f"your `softmax` returned {p[j].item()} at position {j}.{hint} The reference is "
                          f"shown alone.")
        notes = []
        total = float(p.sum())
        if float(ref.sum()) > 0.5 and abs(total - 1) > 1e-3:
            notes.append(f"your probabilities sum to {total:.4g}, not 1")
        if bool((p < 0).any()):
            notes.append("some of your probabilities are negative")
        diff = float((p - ref).abs().max()) if p.numel() else 0.0
        if diff > 1e-4:
            where = int((p - ref).abs().argmax())
            known = {"you multiply by τ instead of dividing": reference_softmax(x, 1.0 / tau),
                     "τ is ignored": reference_softmax(x, 1.0)}
            named = [k for k, q in known.items() if abs(tau - 1) > 1e-6 and float((q - p).abs().max()) < 1e-4]
            notes.append(f"your bars differ from the reference by up to {diff:.3g} (at {labels[where]!r})"
                         + (f": it looks like {named[0]}" if named else ""))
        return p, _sentence(notes)

    def _update(self, values, labels, tau):
        x = torch.tensor(values, dtype=torch.float32)
        ref = reference_softmax(x, tau)
        learner, learner_message = self._learner_side(x, tau, ref, labels)

        allowed = torch.isfinite(x)
        k = int(allowed.sum())
        readouts = {"temperature": tau, "entropy": _entropy(ref), "max_prob": float(ref.max()),
                    "learner_entropy": None if learner is None else _entropy(learner),
                    "learner_max_prob": None if learner is None else float(learner.max()),
                    "max_abs_diff": None if learner is None else float((learner - ref).abs().max()),
                    "allowed": k}

        fig = _new_figure(8.2, 3.6, dpi=85)
        ax = fig.add_subplot()
        n = len(values)
        xs = list(range(n))
        if learner is not None:
            w = 0.38
            ax.bar([j - w / 2 for j in xs], learner.tolist(), w, color=_BLUE, label="your softmax")
            ax.bar([j + w / 2 for j in xs], ref.tolist(), w, color=_GREY, label="reference")
        else:
            ax.bar(xs, ref.tolist(), 0.55, color=_GREY, label="reference")
            ax.text(0.5, 0.97, "your softmax: not shown (see the message above)", transform=ax.transAxes,
                    ha="center", va="top", color="#7a1f1f", fontsize=9)
        if k > 0:
            ax.axhline(1.0 / k, ls="--", lw=1.2, color="tab:green", label=f"τ → ∞: uniform, 1/{k}")
            best = max(v for v in values if v != _NINF)
            top = [j for j in xs if values[j] == best]
            ax.scatter(top, [1.0 / len(top)] * len(top), marker="v", s=70, color="tab:red", zorder=3,
                       label="τ → 0: argmax")
        for j in xs:
            if values[j] == _NINF:
                ax.text(j, 0.03, "−∞", ha="center", color="0.35", fontsize=9)
        top_y = 1.1 if learner is None else max(1.1, float(learner.max()) * 1.05)
        ax.set_ylim(min(0.0, 0.0 if learner is None else float(learner.min()) * 1.05), top_y)
        ax.set_xticks(xs)
        ax.set_xticklabels([_label(w) for w in labels])
        ax.set_ylabel("probability")
        ax.set_title(f"softmax(logits / τ) at τ = {tau:.3g}:   H = {readouts['entropy']:.3f} nats,   "
                     f"max p = {readouts['max_prob']:.3f}", fontsize=10)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig.tight_layout()

        log_k = f"log {k} = {math.log(k):.3f}" if k > 0 else "0"
        rows = [("entropy H (nats)", readouts["learner_entropy"], readouts["entropy"],
                 f"0 (argmax) … {log_k} (uniform)"),
                ("max probability", readouts["learner_max_prob"], readouts["max_prob"],
                 f"1/{k} = {1 / k:.3f} (uniform) … 1 (argmax)" if k else "no allowed entry: all zeros")]
        td = '<td style="padding:1px 12px 1px 0">'
        table = "".join(f"<tr>{td}{a}</td>{td}<b>{_fmt(b)}</b></td>{td}{_fmt(c)}</td>{td}{d}</td></tr>"
                        for a, b, c, d in rows)
        verdict = ""
        if learner is not None and not learner_message:
            verdict = (f'<div style="color:#1a6b1a">Your softmax matches the reference '
                       f'(max |difference| = {readouts["max_abs_diff"]:.1e}).</div>')
        readout_html = (f'<div class="ck-readout-body"><b>τ = {tau:.3g}</b>'
                        f'<table style="border-collapse:collapse"><tr>'
                        + "".join(f'<th style="text-align:left;padding:1px 12px 1px 0">{h}</th>'
                                  for h in ("quantity", "your softmax", "reference", "limits"))
                        + f'</tr>{table}</table>{verdict}</div>')

        # commit only now: anything above may fail, and then the last good state stays
        self.learner_message = learner_message
        self._show(fig, readout_html)
        self.temperature, self.logits, self.labels = tau, list(values), list(labels)
        self.reference, self.learner = ref, learner
        self.readouts = readouts


def temperature_explorer(softmax, logits=None, labels=None, temperature=1.0, preset=None):
    """Explore softmax(logits / τ) with the learner's ``softmax`` beside the reference.

    Args:
        softmax: the learner's function ``softmax(x, dim=-1, temperature=1.0)``.
        logits, labels: the scores to start with and their names (default: a preset).
        temperature: starting τ, from 0.05 to 20.
        preset: name of a preset in ``PRESETS``.
    """
    return TemperatureExplorer(softmax, logits=logits, labels=labels, temperature=temperature, preset=preset)


# ====================================================================== masks (notebook 04)
MAX_POSITIONS = 12
MAX_PADDING = 4
PAD = "<pad>"

KINDS = {
    "bidirectional": "bidirectional (encoder)",
    "causal": "causal (decoder)",
    "padding": "padding (encoder, padded batch)",
    "cross": "cross-attention (encoder-decoder)",
    "prefix": "prefix-LM",
}
RULES = {
    "bidirectional": "every query may attend to every key.",
    "causal": "query i may attend to key j when j ≤ i (itself and the past).",
    "padding": "every query may attend to every real key; pad keys are blocked.",
    "cross": "the queries come from the decoder's sentence, the keys and values from the source (the encoder's "
             "output); every query may attend to every real source token, source pads are blocked.",
    "prefix": "the source is a prefix that every position sees (bidirectional there); after it, query i may "
              "attend to key j when j ≤ i; pad keys are blocked.",
}


def reference_mask(kind, n_queries, n_keys, key_valid, prefix=0):
    """The boolean mask (True = may attend) of each rule, in plain torch."""
    i = torch.arange(n_queries)[:, None]
    j = torch.arange(n_keys)[None, :]
    if kind == "bidirectional":
        return torch.ones(n_queries, n_keys, dtype=torch.bool)
    if kind == "causal":
        return torch.ones(n_queries, n_keys, dtype=torch.bool).tril()
    if kind in ("padding", "cross"):
        return key_valid[None, :].expand(n_queries, n_keys).clone()
    if kind == "prefix":
        return ((j <= i) | (j < prefix)) & key_valid[None, :]
    raise ValueError(f"unknown mask kind {kind!r}; known: {', '.join(KINDS)}")


def reference_attention(Q, K, V, mask, scale=True, dim=-1):
    """softmax(Q K^T / sqrt(d_k) + M) V in plain torch; a row with nothing allowed gets zeros."""
    scores = Q.to(torch.float64) @ K.to(torch.float64).T
    if scale:
        scores = scores / math.sqrt(Q.shape[-1])
    scores = scores.masked_fill(~mask, _NINF)
    dead = (~mask).all(dim=dim, keepdim=True)
    weights = torch.softmax(scores.masked_fill(dead, 0.0), dim=dim).masked_fill(dead, 0.0)
    return weights @ V.to(torch.float64), weights


def _embed(tokens, d, seed):
    """Seeded vectors: one per word (the same word always gets the same one) plus a position code."""
    rows = []
    for pos, tok in enumerate(tokens):
        g = torch.Generator().manual_seed(zlib.crc32(tok.encode()) + 7919 * seed)
        x = torch.randn(d, generator=g)
        k = torch.arange(d // 2, dtype=torch.float32)
        angle = pos / 10000 ** (2 * k / d)
        pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(-1)[:d]
        rows.append(x + 0.5 * pe)
    return torch.stack(rows) if rows else torch.zeros(0, d)


class MaskExplorer(Explorer):
    """The mask of each rule, blocked pairs marked, and the learner's masked_attention weights beside the reference."""

    name = "mask"

    def __init__(self, masked_attention, sentence="the cat sat on the mat", source="le chat est assis",
                 kind="causal", padding=0, d_k=8, seed=0):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown mask kind {kind!r}; known: {', '.join(KINDS)}")
        self.fn = masked_attention
        self.d_k = d_k
        g = torch.Generator().manual_seed(seed)
        self._W = [torch.randn(d_k, d_k, generator=g) / d_k ** 0.5 for _ in range(3)]  # W_Q, W_K, W_V
        self._seed = seed

        self.kind = W.Dropdown(options=[(label, key) for key, label in KINDS.items()], value=kind,
                               description="mask", layout=W.Layout(width="330px"))
        self.kind.add_class("ck-mask-kind")
        self.sentence = W.Text(value=sentence, description="sentence", continuous_update=False,
                               placeholder="words separated by spaces", layout=W.Layout(width="380px"))
        self.sentence.add_class("ck-mask-sentence")
        self.source = W.Text(value=source, description="source", continuous_update=False,
                             placeholder="the encoder's sentence", layout=W.Layout(width="330px"))
        self.source.add_class("ck-mask-source")
        self.padding = W.IntSlider(value=padding, min=0, max=MAX_PADDING, description="extra padding",
                                   style={"description_width": "initial"}, continuous_update=False,
                                   layout=W.Layout(width="330px"))
        self.padding.add_class("ck-mask-padding")
        self.query = W.IntSlider(value=0, min=0, max=1, description="query row i", continuous_update=False,
                                 style={"description_width": "initial"}, layout=W.Layout(width="380px"))
        self.query.add_class("ck-mask-query")
        self._assemble(W.HBox([self.kind, self.sentence]), W.HBox([self.source, self.padding]),
                       W.HBox([self.query]))

        self.mask = self.reference = self.learner = None
        self.q_tokens = self.k_tokens = None
        self.blocked_pairs = 0
        self.row = 0
        self._update(kind, sentence, source, padding, len(sentence.split()) - 1)  # bad arguments raise BadInput, a ValueError

        self._watch(self.kind, lambda v: self._change(kind=v, revert=self.kind))
        self._watch(self.sentence, lambda v: self._change(sentence=v))
        self._watch(self.source, lambda v: self._change(source=v))
        self._watch(self.padding, lambda v: self._change(padding=v, revert=self.padding))
        self._watch(self.query, lambda v: self._change(row=v))

    # ------------------------------------------------------------ state
    def _change(self, revert=None, **new):
        state = dict(kind=self._kind, sentence=self._sentence, source=self._source, padding=self._padding,
                     row=self.row)
        state.update(new)
        try:
            self._update(state["kind"], state["sentence"], state["source"], state["padding"], state["row"])
        except BadInput:
            if revert is not None:  # a dropdown or slider goes back to what is drawn; typed text stays
                self._set(revert, {self.kind: self._kind, self.padding: self._padding}[revert])
            raise

    def _tokens(self, kind, sentence, source, padding):
        words = sentence.split()
        src = source.split()
        if not words:
            raise BadInput("The sentence is empty: type at least one word (words are separated by spaces).")
        if kind in ("cross", "prefix") and not src:
            raise BadInput("The source is empty: type at least one word. (An empty source, n = 0, gives every "
                           "decoder query a zero output: notebook 04, section 5.)")
        pads = [PAD] * padding
        if kind == "cross":
            q_tokens, k_tokens, prefix = words, src + pads, 0
            what = f"{len(src)} source words + {padding} pads"
        elif kind == "prefix":
            q_tokens = k_tokens = src + words + pads
            prefix = len(src)
            what = f"{len(src)} source (prefix) words + {len(words)} words + {padding} pads"
        else:
            q_tokens = k_tokens = words + pads
            prefix = 0
            what = f"{len(words)} words + {padding} pads"
        longest = max(len(q_tokens), len(k_tokens))
        if longest > MAX_POSITIONS:
            raise BadInput(f"This widget draws at most {MAX_POSITIONS} positions per axis, and this gives "
                           f"{longest} ({what}). Shorten the sentence or lower the padding.")
        return q_tokens, k_tokens, prefix, len(k_tokens) - padding

    def _learner_side(self, Q, K, V, mask, ref_w):
        value, problem = self._call_learner(self.fn, "masked_attention", (Q, K, V), {"mask": mask})
        if problem:
            return None, problem
        if not isinstance(value, (tuple, list)) or len(value) != 2:
            return None, (f"your `masked_attention` returned a {type(value).__name__}; it must return the pair "
                          f"(out, weights). The reference is shown alone.")
        out, w = value
        shape = tuple(mask.shape)
        if not torch.is_tensor(w) or tuple(w.shape) != shape:
            got = tuple(w.shape) if torch.is_tensor(w) else type(w).__name__
            return None, (f"your weights should be a tensor of shape (T_q, T_k) = {shape}, got {got}. The "
                          f"reference is shown alone.")
        if not w.is_floating_point():
            return None, f"your weights are {w.dtype}, not floats. The reference is shown alone."
        w = w.detach().to("cpu", torch.float64)
        if not bool(torch.isfinite(w).all()):
            i, j = (int(t) for t in (~torch.isfinite(w)).nonzero()[0])
            return None, (f"your weights hold {w[i, j].item()} at query {i}, key {j}. The reference is shown "
                          f"alone.")
        notes = []
        if not torch.is_tensor(out) or tuple(out.shape) != (shape[0], V.shape[-1]):
            got = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
            notes.append(f"your out should have shape (T_q, d_v) = {(shape[0], V.shape[-1])}, got {got}")
        leak = w.masked_fill(mask, 0.0).abs()
        if float(leak.max()) > 1e-6:
            i, j = (int(t) for t in (leak == leak.max()).nonzero()[0])
            notes.append(f"your weights put {w[i, j].item():.3g} on the blocked pair (query {i}, key {j}): the "
                         f"mask must make blocked weights exactly 0")
        diff = float((w - ref_w).abs().max())
        if diff > 1e-4:
            i, j = (int(t) for t in ((w - ref_w).abs() == diff).nonzero()[0])
            known = {"the scores were not divided by √d_k": reference_attention(Q, K, V, mask, scale=False)[1],
                     "the softmax ran over the queries (dim=-2) instead of the keys":
                         reference_attention(Q, K, V, mask, dim=-2)[1],
                     "the blocked weights were zeroed after the softmax instead of -inf before it":
                         reference_attention(Q, K, V, torch.ones_like(mask))[1] * mask}
            named = [k for k, q in known.items() if float((q - w).abs().max()) < 1e-4]
            notes.append(f"your weights differ from the reference by up to {diff:.3g} (query {i}, key {j})"
                         + (f": it looks like {named[0]}" if named else ""))
        return w, _sentence(notes)

    def _update(self, kind, sentence, source, padding, row):
        q_tokens, k_tokens, prefix, n_real = self._tokens(kind, sentence, source, padding)
        T_q, T_k = len(q_tokens), len(k_tokens)
        key_valid = torch.arange(T_k) < n_real
        mask = reference_mask(kind, T_q, T_k, key_valid, prefix)
        if kind == "cross":
            Xq = _embed(q_tokens, self.d_k, self._seed)
            Xk = _embed(k_tokens, self.d_k, self._seed + 1)
        else:
            Xq = Xk = _embed(q_tokens, self.d_k, self._seed)
        W_Q, W_K, W_V = self._W
        Q, K, V = Xq @ W_Q, Xk @ W_K, Xk @ W_V  # (T_q, d_k), (T_k, d_k), (T_k, d_v)
        _, ref_w = reference_attention(Q, K, V, mask)
        learner, learner_message = self._learner_side(Q, K, V, mask, ref_w)
        row = max(0, min(int(row), T_q - 1))

        blocked = int((~mask).sum())
        allowed_keys = [k_tokens[j] for j in range(T_k) if bool(mask[row, j])]
        readouts = {"kind": kind, "blocked_pairs": blocked, "pairs": T_q * T_k, "T_q": T_q, "T_k": T_k,
                    "row": row, "row_allowed": len(allowed_keys),
                    "row_weights": None if learner is None else learner[row].tolist(),
                    "reference_row": ref_w[row].tolist(),
                    "max_abs_diff": None if learner is None else float((learner - ref_w).abs().max())}

        fig = self._draw(kind, q_tokens, k_tokens, mask, learner, ref_w, row, prefix)

        # readouts in words
        qlab = f"{row} ({html.escape(q_tokens[row])})"
        lines = [f"<b>{html.escape(KINDS[kind])}</b>: {html.escape(RULES[kind])}",
                 f"<b>blocked pairs: {blocked} of {T_q * T_k}</b> (marked x)."]
        pads_seen = padding and kind in ("bidirectional", "causal")
        if pads_seen and kind == "bidirectional":
            lines.append(f"This rule alone does not block the {padding} pad keys: every real word attends to "
                         f"them. Choose <i>padding</i> to block them.")
        elif pads_seen:
            lines.append(f"With padding on the right, the causal rule already keeps every real query off the "
                         f"{padding} pad keys; only the pad queries see them, and their outputs are thrown away.")
        if kind == "cross":
            lines.append("Padding goes on the source here: the keys.")

        def row_text(ws):
            return ", ".join(f"{html.escape(k_tokens[j])} {ws[j]:.2f}" for j in range(T_k) if bool(mask[row, j]))

        lines.append(f"query i = {qlab} may attend to {len(allowed_keys)} of {T_k} keys.")
        lines.append(f"weights, yours: <b>{row_text(learner[row].tolist()) if learner is not None else '—'}</b>")
        lines.append(f"weights, reference: {row_text(ref_w[row].tolist())}")
        if learner is not None and not learner_message:
            lines.append(f'<span style="color:#1a6b1a">Your masked_attention matches the reference '
                         f'(max |difference| = {readouts["max_abs_diff"]:.1e}).</span>')
        readout_html = '<div class="ck-readout-body">' + "<br>".join(lines) + "</div>"

        # commit only now
        self.learner_message = learner_message
        self._show(fig, readout_html)
        self._kind, self._sentence, self._source, self._padding = kind, sentence, source, padding
        self.q_tokens, self.k_tokens, self.mask = q_tokens, k_tokens, mask
        self.blocked_pairs = blocked
        self.reference, self.learner = ref_w, learner
        self.row = row
        self.row_weights = None if learner is None else learner[row]
        self.readouts = readouts
        self.source.disabled = kind not in ("cross", "prefix")
        if (self.query.max, self.query.value) != (T_q - 1, row):
            busy, self._busy = self._busy, True
            try:
                self.query.max = max(T_q - 1, 0)
                self.query.value = row
            finally:
                self._busy = busy

    def _draw(self, kind, q_tokens, k_tokens, mask, learner, ref_w, row, prefix=0):
        T_q, T_k = mask.shape
        rows = [_label(t) for t in q_tokens]
        cols = [_label(t) for t in k_tokens]
        fig = _new_figure(12.5, 7.0, dpi=80)
        gs = fig.add_gridspec(2, 3, height_ratios=[3, 2])
        ax_mask, ax_yours, ax_ref = (fig.add_subplot(gs[0, c]) for c in range(3))
        ax_row = fig.add_subplot(gs[1, :])
        ylabel = "decoder query i" if kind == "cross" else "query i"
        xlabel = "source key j" if kind == "cross" else "key j"
        annotate = T_q * T_k <= 49
        # show_matrix lays the figure out after each panel; lay it out once, at the end (3x faster)
        fig.tight_layout = lambda *args, **kwargs: None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plots.show_matrix(mask, rows=rows, cols=cols, ax=ax_mask, cmap="Greens", vmin=0, vmax=1,
                              annotate=False, blocked=~mask, title="mask: green = may attend, x = blocked",
                              xlabel=xlabel, ylabel=ylabel)
            if learner is not None:
                plots.show_matrix(learner, rows=rows, cols=cols, ax=ax_yours, vmin=0, vmax=1, annotate=annotate,
                                  blocked=~mask, title="your masked_attention: weights α", xlabel=xlabel,
                                  ylabel=ylabel)
            else:
                ax_yours.axis("off")
                ax_yours.text(0.5, 0.5, "your masked_attention:\nnot shown\n(see the message above)",
                              ha="center", va="center", color="#7a1f1f", transform=ax_yours.transAxes)
            plots.show_matrix(ref_w, rows=rows, cols=cols, ax=ax_ref, vmin=0, vmax=1, annotate=annotate,
                              blocked=~mask, title="reference: weights α", xlabel=xlabel, ylabel=ylabel)
            for ax in (ax_mask, ax_yours, ax_ref):
                if ax.axison and prefix:
                    ax.axvline(prefix - 0.5, color="tab:orange", lw=1.5, ls="--")
                if ax.axison:
                    ax.add_patch(Rectangle((-0.5, row - 0.5), T_k, 1, fill=False, edgecolor="red", lw=2.2))

            xs = list(range(T_k))
            if learner is not None:
                wd = 0.38
                ax_row.bar([j - wd / 2 for j in xs], learner[row].tolist(), wd, color=_BLUE,
                           label="your masked_attention")
                ax_row.bar([j + wd / 2 for j in xs], ref_w[row].tolist(), wd, color=_GREY, label="reference")
            else:
                ax_row.bar(xs, ref_w[row].tolist(), 0.55, color=_GREY, label="reference")
            for j in xs:
                if not bool(mask[row, j]):
                    ax_row.text(j, 0.04, "x", ha="center", color="0.45", fontsize=12)
            ax_row.set_xticks(xs)
            ax_row.set_xticklabels(cols)
            ax_row.set_xlim(-0.6, T_k - 0.4)
            ax_row.set_ylim(0, 1.05)
            ax_row.set_ylabel("weight")
            ax_row.set_title(f"row i = {row} ({_label(q_tokens[row], 16)}): its weights over the keys "
                             f"(x = blocked)", fontsize=10)
            ax_row.legend(loc="upper right", fontsize=8, frameon=False)
            del fig.tight_layout
            fig.tight_layout()
        return fig


def mask_explorer(masked_attention, sentence="the cat sat on the mat", source="le chat est assis", kind="causal",
                  padding=0):
    """Explore masks with the learner's ``masked_attention`` beside the reference.

    Args:
        masked_attention: the learner's ``masked_attention(Q, K, V, mask=None) -> (out, weights)``.
        sentence: the words of the sequence (the decoder's, in cross-attention).
        source: the encoder's sentence (cross-attention) or the prefix (prefix-LM).
        kind: one of bidirectional, causal, padding, cross, prefix.
        padding: number of <pad> tokens appended (to the source in cross-attention).
    """
    return MaskExplorer(masked_attention, sentence=sentence, source=source, kind=kind, padding=padding)


# ====================================================================== cross-attention (notebook 08)
MAX_SOURCE_TOKENS = 30
TRANSLATION_TIME_LIMIT = 30.0  # seconds for one whole greedy translation (a dozen runs of the decoder)


class CrossAttentionViewer(Explorer):
    """Type a source sentence; see the trained model's translation and its cross-attention alignment.

    The model runs the learner's own decoder block (whatever the notebook built it
    with), through the guarded call, so a broken block gives a message instead of
    a traceback.
    """

    name = "cross-viewer"

    def __init__(self, model, task, sentence, max_len=12):
        super().__init__()
        self.model, self.task, self.max_len = model, task, max_len
        self._inv_src = {i: t for t, i in task.src_vocab.items()}
        self._inv_tgt = {i: t for t, i in task.tgt_vocab.items()}
        n_layers, n_heads = model.cfg.n_dec_layers, model.cfg.n_heads
        self.text = W.Text(value=sentence, description="source", continuous_update=False,
                           layout=W.Layout(width="420px"))
        self.text.add_class("ck-cross-text")
        self.layer = W.Dropdown(options=[(f"decoder block {k + 1}", k) for k in range(n_layers)],
                                value=n_layers - 1, description="block")
        self.head = W.Dropdown(options=[("mean of the heads", -1)] + [(f"head {h}", h) for h in range(n_heads)],
                               value=-1, description="head")
        self.layer.add_class("ck-cross-layer")
        self.head.add_class("ck-cross-head")
        self._assemble(self.text, W.HBox([self.layer, self.head]))
        self._watch(self.text, lambda v: self._update(v, self.layer.value, self.head.value, revert=("text", v)))
        self._watch(self.layer, lambda v: self._update(self.text.value, v, self.head.value))
        self._watch(self.head, lambda v: self._update(self.text.value, self.layer.value, v))
        self.state = None
        self._update(sentence, self.layer.value, self.head.value)

    def _tokens(self, sentence):
        from . import data
        words = data.tokenize(sentence)
        if not words:
            raise BadInput("type a date, for example 'the 1st of february 2014' or '07/27/2013'")
        if len(words) > MAX_SOURCE_TOKENS:
            raise BadInput(f"that is {len(words)} tokens; the viewer draws at most {MAX_SOURCE_TOKENS}")
        unknown = sorted({w for w in words if w not in self.task.src_vocab})
        if unknown:
            raise BadInput(f"the model has never seen {', '.join(repr(w) for w in unknown)}: use digits, "
                           f"punctuation, English month and weekday names, and 'the', 'of', 'a', st/nd/rd/th")
        return words

    def _update(self, sentence, layer, head, revert=None):
        from . import data
        try:
            words = self._tokens(sentence)
        except BadInput:
            if revert and self.state is not None:
                self._set(self.text, self.state[0])
            raise
        src = torch.tensor([[self.task.src_vocab[w] for w in words]])
        valid = torch.ones_like(src, dtype=torch.bool)
        out, problem = self._call_learner(self.model.greedy, "encdec_decoder_block",
                                          (src, valid, data.BOS_ID, data.EOS_ID, self.max_len),
                                          time_limit=TRANSLATION_TIME_LIMIT, has_reference=False)
        self.learner_message = problem or ""
        if problem:
            self._show_notice()
            return
        tokens, cross = out
        ids = tokens[0].tolist()
        n = ids.index(data.EOS_ID) + 1 if data.EOS_ID in ids else len(ids)
        w = cross[layer][0]  # (H, T_y, T_x)
        w = (w.mean(0) if head < 0 else w[head])[:n].detach().to(torch.float64)
        rows = [self._inv_tgt.get(i, "?") for i in ids[:n]]
        fig = _new_figure(min(2.0 + 0.45 * len(words), 12.0), min(1.8 + 0.4 * n, 8.0))
        ax = fig.add_subplot(1, 1, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plots.show_matrix(w, rows=[_label(r) for r in rows], cols=[_label(c) for c in words], ax=ax, vmin=0,
                              vmax=1, annotate=False, xlabel="source token (key)", ylabel="written token (query)",
                              title="cross-attention: which source tokens each output token read")
        translation = data.to_text(ids, self.task.tgt_vocab)
        strongest = [words[int(j)] for j in w.argmax(dim=-1).tolist()]
        self.readouts = {"translation": translation, "T_x": len(words), "T_y": n,
                         "row_sums": w.sum(-1).tolist(), "strongest": strongest}
        pairs = ", ".join(f"{html.escape(r)}→{html.escape(s)}" for r, s in zip(rows, strongest))
        self._show(fig, f"<b>translation:</b> {html.escape(translation)} &nbsp; (T_x = {len(words)}, "
                        f"T_y = {n})<br><b>most read source token per output token:</b> {pairs}")
        self.state = (sentence, layer, head)


def cross_attention_viewer(model, task, sentence="the 1st of february 2014"):
    """The trained encoder-decoder's cross-attention for any date the learner types (notebook 08).

    Args:
        model: a ``coursekit.transformer.EncoderDecoder`` (built with the learner's decoder block).
        task: the date task (``coursekit.data.make_date_task``), for its vocabularies.
        sentence: the first source sentence shown.
    """
    return CrossAttentionViewer(model, task, sentence)


# ====================================================================== KV-cache stepper (notebook 09)
MAX_PROMPT_TOKENS = 30
AGREE_TOLERANCE = 1e-3  # max |Δ logits| (float32) under which a cached step agrees with recomputation
_STEP_HINT = ("a cached step must give what the decoder block gives on the whole text: check that the new query "
              "reads the cached keys and values as well as its own, and that the causal mask is shifted by T_past")
_FALLBACK = " The stepper goes on with the course's ready-made decoder_block_step (coursekit.blocks)."


class _NotACacheStep(Exception):
    """What the learner's decoder_block_step returned cannot be used as (out, (K, V))."""


def _shape_or_type(t):
    return tuple(t.shape) if torch.is_tensor(t) else type(t).__name__


def _step_problem(value, out_shape, cache_shape):
    """What is wrong with one return value of a decoder_block_step, in words, or ""."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return (f"your `decoder_block_step` returned a {type(value).__name__}; it must return the pair "
                f"(out, (K, V))")
    out, cache = value
    if not torch.is_tensor(out) or tuple(out.shape) != out_shape:
        return f"your out should be a tensor of shape (B, T_new, D) = {out_shape}, got {_shape_or_type(out)}"
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        what = f"a {type(cache).__name__} of {len(cache)}" if isinstance(cache, (tuple, list)) \
            else f"a {type(cache).__name__}"
        return f"your grown cache should be the pair (K, V), got {what}"
    for name, t in zip("KV", cache):
        if torch.is_tensor(t) and t.dim() == 4 and tuple(t.shape[:2]) + tuple(t.shape[3:]) == \
                cache_shape[:2] + cache_shape[3:] and t.shape[2] != cache_shape[2]:
            return (f"your cache's {name} holds {t.shape[2]} position{'s' * (t.shape[2] != 1)}, but the grown "
                    f"cache must hold the T_past cached ones and the T_new new ones: {cache_shape[2]}")
        if not torch.is_tensor(t) or tuple(t.shape) != cache_shape:
            return (f"your cache's {name} should be a tensor of shape (B, H, T_past + T_new, d_k) = {cache_shape}, "
                    f"got {_shape_or_type(t)}")
    for name, t in (("out", out), ("K", cache[0]), ("V", cache[1])):
        if not t.is_floating_point():
            return f"your {name} is {t.dtype}, not floats"
        if not bool(torch.isfinite(t).all()):
            bad = t[~torch.isfinite(t)].flatten()[0].item()
            return f"your {name} holds {bad}"
    return ""


class _Generation:
    """One generated text and its caches: what the stepper shows, replaced whole after each good step."""

    def __init__(self, prompt, n_prompt):
        self.prompt, self.n_prompt = prompt, n_prompt
        self.ids = []              # <bos>, the prompt, then the generated tokens; the last one is not fed yet
        self.cache = None          # the learner's per-layer [(K, V)], None when their function cannot be used
        self.ref_cache = None      # the same made by coursekit.blocks.decoder_block_step
        self.yours = True          # the learner's cache is the one stepping
        self.problem = ""          # why it is not (when it is not)
        self.steps = []            # per step: fed, T, dot products and projections with and without a cache
        self.compared = None       # the last step's comparison with recomputation without a cache
        self.first_disagreement = None
        self.scale = {}            # layer -> (|K| max, |V| max) at the prompt: one colour scale per text

    @property
    def T(self):
        """Positions in the cache: every token but the newest, which the next step feeds."""
        return len(self.ids) - 1

    @property
    def finished(self):
        from . import data
        return bool(self.ids) and len(self.ids) > self.n_prompt and self.ids[-1] == data.EOS_ID

    def copy(self):
        new = _Generation(self.prompt, self.n_prompt)
        new.__dict__.update({k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                             for k, v in self.__dict__.items()})
        return new


class KVCacheStepper(Explorer):
    """Generate with a KV cache one step at a time: the cache grows one column per step, the work is counted.

    The prompt is fed once (step 0, the prefill) through ``model.step`` with the
    learner's ``decoder_block_step``; each Step feeds only the newest token with
    the cache and appends the greedy next token. Every step is also recomputed
    without a cache (the model's own forward on the whole text), and the readout
    says whether the learner's cached step agrees. If the learner's function is
    the stub, raises or returns something that is not (out, (K, V)), the stepper
    says so and goes on with ``coursekit.blocks.decoder_block_step``.
    """

    name = "kv-stepper"

    def __init__(self, decoder_block_step, model, task, prompt):
        super().__init__()
        from . import blocks, data
        self._blocks, self._data = blocks, data
        self.fn, self.model, self.task = decoder_block_step, model, task
        self.vocab = data.lm_vocab(task)
        cfg = model.cfg
        if len(self.vocab) != cfg.vocab_size:
            raise ValueError(f"the model has {cfg.vocab_size} tokens but the date task's vocabulary has "
                             f"{len(self.vocab)}: build it with vocab_size=len(data.lm_vocab(task))")
        self._inv = {i: t for t, i in self.vocab.items()}
        self.n_layers, self.n_heads, self.max_len = cfg.n_layers, cfg.n_heads, cfg.max_len
        self.d_k = cfg.d_model // cfg.n_heads

        self.text = W.Text(value=prompt, description="prompt", continuous_update=False,
                           placeholder="a date, then =", layout=W.Layout(width="420px"))
        self.text.add_class("ck-kv-text")
        self.step_button = W.Button(description="Step", button_style="primary", tooltip="feed the newest token")
        self.step_button.add_class("ck-kv-step")
        self.run_button = W.Button(description="Run to <eos>", tooltip="step until the model writes <eos>")
        self.run_button.add_class("ck-kv-run")
        self.reset_button = W.Button(description="Reset", tooltip="empty the cache and feed the prompt again")
        self.reset_button.add_class("ck-kv-reset")
        self.layer = W.Dropdown(options=[(f"layer {k}", k) for k in range(self.n_layers)], value=0,
                                description="cache of", layout=W.Layout(width="200px"))
        self.layer.add_class("ck-kv-layer")
        self._assemble(W.HBox([self.text, self.layer]), W.HBox([self.step_button, self.run_button,
                                                               self.reset_button]))

        self.gen = None
        self._start(prompt)  # a bad prompt raises BadInput, a ValueError
        self._watch(self.text, lambda v: self._start(v, revert=True))
        self._click(self.step_button, lambda: self._advance(1))
        self._click(self.run_button, lambda: self._advance(None))
        self._click(self.reset_button, lambda: self._start(self.gen.prompt))
        self._watch(self.layer, lambda v: self._commit(self.gen, v))

    def _click(self, button, handler):
        button.on_click(lambda _: self._on_change(lambda _value: handler(), None))

    # ------------------------------------------------------------ input
    def _prompt_ids(self, prompt):
        words = self._data.tokenize(prompt)
        if not words:
            raise BadInput("the prompt is empty: type a date and '=', for example 'the 1st of february 2014 ='")
        if len(words) > MAX_PROMPT_TOKENS:
            raise BadInput(f"that prompt is {len(words)} tokens; the stepper draws prompts of at most "
                           f"{MAX_PROMPT_TOKENS}")
        if len(words) + 1 > self.max_len:
            raise BadInput(f"that prompt needs {len(words) + 1} positions with <bos>, but the positional table "
                           f"ends at {self.max_len}")
        unknown = sorted({w for w in words if w not in self.vocab})
        if unknown:
            raise BadInput(f"the model has never seen {', '.join(repr(w) for w in unknown)}: use digits, "
                           f"punctuation, English month and weekday names, 'the', 'of', 'a', st/nd/rd/th, "
                           f"and '=' where the answer starts")
        return [self._data.BOS_ID] + [self.vocab[w] for w in words]

    def _start(self, prompt, revert=False):
        """Empty the caches and feed the prompt (step 0, the prefill)."""
        try:
            ids = self._prompt_ids(prompt)
        except BadInput:
            if revert and self.gen is not None:
                self._set(self.text, self.gen.prompt)
            raise
        gen = _Generation(prompt, len(ids))
        gen.ids = ids
        self._feed(gen, 0)
        self._commit(gen, self.layer.value)

    def _advance(self, n_steps):
        """Feed the newest token, ``n_steps`` times (None: until <eos> or the end of the positional table)."""
        gen = self.gen
        if gen.finished:
            raise BadInput("the text is finished: the model wrote <eos>. Reset, or type a new prompt, to start "
                           "again")
        if gen.T + 1 > self.max_len:
            raise BadInput(f"the positional table ends at {self.max_len} positions: Reset to start again")
        gen = gen.copy()
        done = 0
        while (n_steps is None or done < n_steps) and not gen.finished and gen.T + 1 <= self.max_len:
            self._feed(gen, gen.T)
            done += 1
        self._commit(gen, self.layer.value)

    # ------------------------------------------------------------ computing
    def _run_step(self, block_step, x, cache):
        """``model.step`` with ``block_step`` in the model's place for this call only."""
        kept = self.model.block_step
        self.model.block_step = block_step
        try:
            return self.model.step(x, cache)
        finally:
            self.model.block_step = kept

    def _checked(self, problems):
        """The learner's function, with each layer's return value checked before the model uses it."""
        fn, H, d_k = self.fn, self.n_heads, self.d_k
        layer = [0]

        def step(x_new, params, n_heads, cache=None):
            B, T_new, D = x_new.shape
            T_past = 0 if cache is None else cache[0].shape[-2]
            value = fn(x_new, params, n_heads, cache)
            problem = _step_problem(value, (B, T_new, D), (B, H, T_past + T_new, d_k))
            layer[0] += 1
            if problem:
                problems.append((problem, layer[0] - 1))
                raise _NotACacheStep(problem)
            return value[0], (value[1][0], value[1][1])
        return step

    def _feed(self, gen, T_past):
        """Feed positions T_past .. of ``gen.ids`` with both caches, recompute without one, append the next token."""
        device = self.model.embed.E.device
        fed = gen.ids[T_past:]
        x = torch.tensor([fed], device=device)  # (1, T_new)
        ref_logits, ref_cache = self._run_step(self._blocks.decoder_block_step, x, gen.ref_cache)
        with torch.no_grad():
            full = self.model(torch.tensor([gen.ids], device=device))[0, T_past:]  # (T_new, V): no cache
        step = len(gen.steps)
        yours = None
        if gen.yours:
            if not callable(self.fn):
                _, problem = self._call_learner(self.fn, "decoder_block_step", (), has_reference=False)
            else:
                problems = []
                value, problem = self._call_learner(self._run_step, "decoder_block_step",
                                                    (self._checked(problems), x, gen.cache), has_reference=False)
                if problems:
                    problem = f"{problems[0][0]} (layer {problems[0][1]}, step {step})."
            if problem:
                gen.yours, gen.cache = False, None
                gen.problem = problem + _FALLBACK
            else:
                yours, gen.cache = value
        gen.ref_cache = ref_cache
        reference_token = int(full[-1].argmax())
        if yours is not None:
            yours = yours[0].detach().to(full.device, torch.float64)  # (T_new, V)
            diff = float((yours - full.to(torch.float64)).abs().max())
            token = int(yours[-1].argmax())
            agrees = diff <= AGREE_TOLERANCE and token == reference_token
            gen.compared = {"step": step, "max_abs_diff": diff, "token": token, "reference_token": reference_token,
                            "agrees": agrees}
            if not agrees and gen.first_disagreement is None:
                gen.first_disagreement = step
        else:
            token = int(ref_logits[0, -1].argmax())
            gen.compared = {"step": step, "max_abs_diff": None, "token": None, "reference_token": reference_token,
                            "agrees": None}
        T_new, T = len(fed), len(gen.ids)
        gen.steps.append({"fed": T_new, "T": T, "dots_cached": T_new * T_past + T_new * (T_new + 1) // 2,
                          "dots_recomputed": T * (T + 1) // 2, "kv_cached": T_new, "kv_recomputed": T})
        if T_past == 0:
            gen.scale = {k: tuple(float(t.abs().max()) or 1.0 for t in kv) for k, kv in
                         enumerate(gen.cache if gen.yours else gen.ref_cache)}
        gen.ids = gen.ids + [token]

    # ------------------------------------------------------------ showing
    def _commit(self, gen, layer):
        """Draw ``gen`` and its readouts; only then make it the stepper's state."""
        fig = self._draw(gen, layer)
        readouts, readout_html = self._readouts(gen, layer)
        self.learner_message = self._learner_words(gen)
        self._show(fig, readout_html)
        self.gen, self.readouts = gen, readouts
        if self.text.value != gen.prompt:
            self._set(self.text, gen.prompt)

    def _learner_words(self, gen):
        if not gen.yours:
            return gen.problem
        c = gen.compared
        if gen.first_disagreement is None:
            return ""
        now = "" if c["agrees"] else f" At step {c['step']} {self._difference(c)}."
        return (f"your `decoder_block_step` disagrees with recomputation without a cache, first at step "
                f"{gen.first_disagreement}.{now} {_STEP_HINT[0].upper()}{_STEP_HINT[1:]}.")

    def _difference(self, c):
        yours, ref = self._inv[c["token"]], self._inv[c["reference_token"]]
        return (f"your logits differ from recomputation's by up to {c['max_abs_diff']:.3g}: "
                + (f"your next token is {yours!r}, recomputation's {ref!r}" if yours != ref else
                   f"the next token is the same ({yours!r}) this time"))

    def _cache_size(self, T, cache):
        L, H, d_k = self.n_layers, self.n_heads, self.d_k
        numbers = 2 * L * 1 * H * T * d_k  # keys and values, per layer, head, position, for B = 1
        return numbers, numbers * cache[0][0].element_size()

    def _readouts(self, gen, layer):
        cache = gen.cache if gen.yours else gen.ref_cache
        last = gen.steps[-1]
        T = gen.T
        numbers, n_bytes = self._cache_size(T, cache)
        totals = {k: sum(s[k] for s in gen.steps) for k in ("dots_cached", "dots_recomputed")}
        c = gen.compared
        text = self._data.to_text(gen.ids[gen.n_prompt:], self.vocab)
        readouts = {"step": len(gen.steps) - 1, "fed": last["fed"], "T": T, "layer": layer,
                    "cache_numbers": numbers, "cache_bytes": n_bytes,
                    "cache_shape": tuple(cache[layer][0].shape),
                    "dots_cached": last["dots_cached"], "dots_recomputed": last["dots_recomputed"],
                    "dots_cached_total": totals["dots_cached"], "dots_recomputed_total": totals["dots_recomputed"],
                    "kv_cached": last["kv_cached"], "kv_recomputed": last["kv_recomputed"],
                    "tokens": [self._inv[i] for i in gen.ids], "newest": self._inv[gen.ids[-1]],
                    "text": text, "finished": gen.finished, "yours": gen.yours,
                    "next_token": self._inv[gen.ids[-1]], "reference_token": self._inv[c["reference_token"]],
                    "max_abs_diff": c["max_abs_diff"], "agrees": c["agrees"]}

        def tok(i, t):
            word = html.escape(t)
            if i == len(gen.ids) - 1:
                return f'<span style="background:#ffe08a;font-weight:bold;padding:0 2px">{word}</span>'
            return f'<span style="color:#777">{word}</span>' if i < gen.n_prompt else f"<b>{word}</b>"

        step = readouts["step"]
        L, H, d_k = self.n_layers, self.n_heads, self.d_k
        kind = str(cache[0][0].dtype).replace("torch.", "")
        lines = [" ".join(tok(i, t) for i, t in enumerate(readouts["tokens"]))
                 + (f" &nbsp; → <b>{html.escape(text)}</b>" if text else ""),
                 f"<b>step {step}</b> ({'the prompt, fed at once' if step == 0 else 'the newest token'}): "
                 f"<b>tokens fed this step: {last['fed']}</b>; the highlighted token is fed at the next step.",
                 f"<b>cache: T = {T} positions</b>: {L} layers × 2 (K and V) × {H} heads × {T} positions × "
                 f"d_k {d_k} = <b>{numbers:,} numbers = {n_bytes:,} bytes</b> ({kind}); layer {layer}'s K is "
                 f"{tuple(readouts['cache_shape'])}.",
                 f"<b>query–key dot products</b> (per head and layer; × {L * H} in the model): this step "
                 f"<b>{last['dots_cached']:,} with the cache</b> vs {last['dots_recomputed']:,} recomputing "
                 f"everything; so far <b>{totals['dots_cached']:,}</b> vs {totals['dots_recomputed']:,}. "
                 f"Keys and values projected this step: {last['kv_cached']} vs {last['kv_recomputed']} positions."]
        if c["agrees"]:
            lines.append(f'<span style="color:#1a6b1a">Your cached step agrees with recomputation without a '
                         f'cache: the same next token {html.escape(repr(readouts["next_token"]))}, max |Δ logits| = '
                         f'{c["max_abs_diff"]:.1e}.</span>')
        elif c["agrees"] is False:
            lines.append(f'<span style="color:#7a1f1f">Your cached step disagrees with recomputation without a '
                         f'cache: {html.escape(self._difference(c))}.</span>')
        else:
            lines.append("Your decoder_block_step is not used (see the message above): the cache is the ready-made "
                         "one's.")
        if gen.finished:
            lines.append("The model wrote &lt;eos&gt;: the text is finished. Reset, or type a new prompt.")
        elif T + 1 > self.max_len:
            lines.append(f"The positional table ends at {self.max_len} positions: Reset to start again.")
        if self._data.tokenize(gen.prompt)[-1] != self._data.SEP:
            lines.append("The prompt does not end with '=': the model continues the date rather than translating "
                         "it.")
        return readouts, '<div class="ck-readout-body">' + "<br>".join(lines) + "</div>"

    def _draw(self, gen, layer):
        cache = gen.cache if gen.yours else gen.ref_cache
        whose = "your" if gen.yours else "ready-made"
        H, d_k, T = self.n_heads, self.d_k, gen.T
        T_new = gen.steps[-1]["fed"]
        labels = [_label(self._inv[i], 6) for i in gen.ids[:T]]
        fig = _new_figure(13.0, 6.2, dpi=80)
        gs = fig.add_gridspec(2, 2, width_ratios=[1.75, 1.0], hspace=0.42, wspace=0.2)
        k_max, v_max = gen.scale.get(layer, (1.0, 1.0))
        K, V = cache[layer]
        for row, (name, t, top) in enumerate((("keys K", K, k_max), ("values V", V, v_max))):
            ax = fig.add_subplot(gs[row, 0])
            grid = t[0].detach().to("cpu", torch.float64).permute(0, 2, 1).reshape(H * d_k, T)  # (H d_k, T)
            ax.imshow(grid.numpy(), cmap="RdBu_r", vmin=-top, vmax=top, aspect="auto", interpolation="nearest",
                      extent=(-0.5, T - 0.5, H * d_k - 0.5, -0.5))
            ax.add_patch(Rectangle((T - T_new - 0.5, -0.5), T_new, H * d_k, fill=False, edgecolor="red", lw=2.0))
            for h in range(1, H):
                ax.axhline(h * d_k - 0.5, color="0.3", lw=0.6)
            ax.set_facecolor("0.93")  # the positions the table still has room for
            ax.set_xlim(-0.5, self.max_len - 0.5)
            ax.set_ylim(H * d_k - 0.5, -0.5)
            ax.set_yticks([h * d_k + d_k / 2 - 0.5 for h in range(H)])
            ax.set_yticklabels([f"head {h}" for h in range(H)], fontsize=8)
            ax.set_xticks(range(T))
            ax.set_xticklabels(labels if row else [], rotation=90, fontsize=7)  # the tokens once, under V
            room = T < self.max_len - 4  # T written right of the cache, or left of the red box near the end
            ax.text(T - 0.3 if room else T - T_new - 0.7, H * d_k / 2, f"T = {T}", ha="left" if room else "right",
                    va="center", fontsize=9, color="0.3")
            ax.set_title(f"{whose} cache, layer {layer}: {name}, one column of {H} × {d_k} numbers per position "
                         f"(red: fed at step {len(gen.steps) - 1})", fontsize=9)
        steps = list(range(len(gen.steps)))
        cached = [s["dots_cached"] for s in gen.steps]
        recomputed = [s["dots_recomputed"] for s in gen.steps]
        for row, (title, a, b) in enumerate(
                (("query–key dot products this step\n(per head and layer)", cached, recomputed),
                 ("so far (cumulative)", list(itertools.accumulate(cached)),
                  list(itertools.accumulate(recomputed))))):
            ax = fig.add_subplot(gs[row, 1])
            ax.plot(steps, b, "s-", color=_GREY, ms=4, label="recomputing everything: T(T+1)/2 a step")
            ax.plot(steps, a, "o-", color=_BLUE, ms=4, label="with the cache: T a step")
            ax.annotate(f"{b[-1]:,}", (steps[-1], b[-1]), textcoords="offset points", xytext=(4, 0), fontsize=8,
                        va="center", color="0.35")
            ax.annotate(f"{a[-1]:,}", (steps[-1], a[-1]), textcoords="offset points", xytext=(4, 0), fontsize=8,
                        va="center", color=_BLUE)
            ax.set_xlim(-0.5, max(steps[-1], 4) * 1.2 + 1)  # room for the numbers at the ends
            ax.set_ylim(0, max(b) * 1.4 + 1)  # the top stays free for the legend
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("step (0 = the prompt)", fontsize=8)
            ax.tick_params(labelsize=8)
            if row == 0:
                ax.legend(loc="upper left", fontsize=7, frameon=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fig.subplots_adjust(left=0.06, right=0.97, top=0.92, bottom=0.13)
        return fig


def kv_cache_stepper(decoder_block_step, model, task, prompt="the 1st of february 2014 ="):
    """Step through greedy generation with a KV cache and watch the cache grow (notebook 09).

    Step 0 feeds the prompt at once (the prefill); each Step feeds only the newest
    token with the cache and appends the model's greedy next token. The picture
    shows one layer's cached keys and values (one column per position) and the
    query–key dot products each step costs with the cache (T) and recomputing
    everything (T(T+1)/2). Every step is checked against the model's own forward
    without a cache.

    Args:
        decoder_block_step: the learner's ``decoder_block_step(x_new, params, n_heads, cache=None)``.
        model: a trained ``coursekit.transformer.DecoderLM`` on the date task.
        task: the date task (``coursekit.data.make_date_task``), for its vocabulary (``data.lm_vocab``).
        prompt: the first text fed, e.g. a date followed by ``=``.
    """
    return KVCacheStepper(decoder_block_step, model, task, prompt)
