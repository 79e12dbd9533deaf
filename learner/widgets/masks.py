"""The mask explorer (notebook 04): the mask of each rule, and the learner's masked_attention weights beside
the reference.

compute → draw → readout:

* ``compute(masked_attention, projections, kind, sentence, source, padding, row)`` -> ``MaskRecord``
  (raises ``BadInput`` for a sentence it cannot draw)
* ``draw(record)`` -> a matplotlib Figure
* ``readout(record)`` -> the HTML under the plot
"""
import html
import zlib
from dataclasses import dataclass

import ipywidgets as W
import torch
from matplotlib.patches import Rectangle

from .base import (BLUE, GREY, BadInput, Canvas, Explorer, call_for_widget, check_words, label, new_figure, one_thread,
                   sentence, visible_check)
from .builtin import attention_weights, reference_mask, reference_masked_attention

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


# ====================================================================== input
def make_projections(d_k, seed):
    """Seeded W_Q, W_K, W_V, each (d_k, d_k)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(d_k, d_k, generator=g) / d_k ** 0.5 for _ in range(3)]


def embed(tokens, d, seed):
    """Seeded vectors (T, d): one per word (the same word always gets the same one) plus a position code."""
    rows = []
    for pos, tok in enumerate(tokens):
        g = torch.Generator().manual_seed(zlib.crc32(tok.encode()) + 7919 * seed)
        x = torch.randn(d, generator=g)
        k = torch.arange(d // 2, dtype=torch.float32)
        angle = pos / 10000 ** (2 * k / d)
        pe = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(-1)[:d]
        rows.append(x + 0.5 * pe)
    return torch.stack(rows) if rows else torch.zeros(0, d)


def tokens_of(kind, sentence, source, padding):
    """(query tokens, key tokens, prefix length, real keys), or BadInput saying what is allowed."""
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


# ====================================================================== compute
@dataclass
class MaskRecord:
    """One state of the explorer. ``mask``, ``reference`` and ``learner`` are (T_q, T_k); ``learner`` is
    float64 or None when the learner's function cannot be drawn (``learner_message`` says why)."""
    kind: str
    sentence: str
    source: str
    padding: int
    q_tokens: list
    k_tokens: list
    prefix: int
    mask: torch.Tensor
    reference: torch.Tensor
    reference_out: torch.Tensor
    learner: torch.Tensor
    learner_message: str
    row: int
    readouts: dict
    checked: bool = None  # the notebook's visible checks: True passed, False failed, None not run


def learner_side(masked_attention, Q, K, V, mask, ref_w):
    """(the learner's weights as float64 (T_q, T_k) or None, problem sentence or "")."""
    value, problem = call_for_widget(masked_attention, "masked_attention", (Q, K, V), {"mask": mask})
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
        return None, f"your weights hold {w[i, j].item()} at query {i}, key {j}. The reference is shown alone."
    notes = []
    if not torch.is_tensor(out) or tuple(out.shape) != (shape[0], V.shape[-1]):
        got = tuple(out.shape) if torch.is_tensor(out) else type(out).__name__
        notes.append(f"your out should have shape (T_q, d_v) = {(shape[0], V.shape[-1])}, got {got}")
    notes = sentence(notes + _weight_problems(w, Q, K, mask, ref_w))
    # right on this one (T_q, d_k) sentence: is it right on the batched, multi-head inputs the checks feed?
    return w, notes or check_words("masked_attention", masked_attention)


def _weight_problems(w, Q, K, mask, ref_w):
    """What is wrong with the learner's weights ``w`` (T_q, T_k), in words; a known mistake is named."""
    notes = []
    leak = w.masked_fill(mask, 0.0).abs()
    if float(leak.max()) > 1e-6:
        i, j = (int(t) for t in (leak == leak.max()).nonzero()[0])
        notes.append(f"your weights put {w[i, j].item():.3g} on the blocked pair (query {i}, key {j}): the "
                     f"mask must make blocked weights exactly 0")
    diff = float((w - ref_w).abs().max())
    if diff > 1e-4:
        i, j = (int(t) for t in ((w - ref_w).abs() == diff).nonzero()[0])
        known = {"the scores were not divided by √d_k": attention_weights(Q, K, mask, scale=False),
                 "the softmax ran over the queries (dim=-2) instead of the keys":
                     attention_weights(Q, K, mask, dim=-2),
                 "the blocked weights were zeroed after the softmax instead of -inf before it":
                     attention_weights(Q, K, torch.ones_like(mask)) * mask}
        named = [k for k, q in known.items() if float((q - w).abs().max()) < 1e-4]
        notes.append(f"your weights differ from the reference by up to {diff:.3g} (query {i}, key {j})"
                     + (f": it looks like {named[0]}" if named else ""))
    return notes


def compute(masked_attention, projections, kind, sentence, source, padding, row, d_k=8, seed=0):
    """The mask of ``kind`` on the typed sentence (and source), the reference weights and the learner's.

    ``projections``: (W_Q, W_K, W_V), each (d_k, d_k). ``row``: the query row to show, clipped to the rows.
    """
    q_tokens, k_tokens, prefix, n_real = tokens_of(kind, sentence, source, padding)
    T_q, T_k = len(q_tokens), len(k_tokens)
    mask = reference_mask(kind, T_q, T_k, torch.arange(T_k) < n_real, prefix)  # (T_q, T_k)
    if kind == "cross":
        Xq, Xk = embed(q_tokens, d_k, seed), embed(k_tokens, d_k, seed + 1)
    else:
        Xq = Xk = embed(q_tokens, d_k, seed)
    W_Q, W_K, W_V = projections
    Q, K, V = Xq @ W_Q, Xk @ W_K, Xk @ W_V  # (T_q, d_k), (T_k, d_k), (T_k, d_v)
    ref_out, ref_w = reference_masked_attention(Q, K, V, mask)
    learner, learner_message = learner_side(masked_attention, Q, K, V, mask, ref_w)
    row = max(0, min(int(row), T_q - 1))
    readouts = {"kind": kind, "blocked_pairs": int((~mask).sum()), "pairs": T_q * T_k, "T_q": T_q, "T_k": T_k,
                "row": row, "row_allowed": int(mask[row].sum()),
                "row_weights": None if learner is None else learner[row].tolist(),
                "reference_row": ref_w[row].tolist(),
                "max_abs_diff": None if learner is None else float((learner - ref_w).abs().max())}
    checked = visible_check("masked_attention", masked_attention)[0] if learner is not None and \
        not learner_message else None
    return MaskRecord(kind, sentence, source, padding, q_tokens, k_tokens, prefix, mask, ref_w, ref_out, learner,
                      learner_message, row, readouts, checked)


# ====================================================================== readout
def readout(rec):
    """The rule in words, the blocked pairs, and the chosen query row's weights on both sides."""
    kind, row, mask, k_tokens = rec.kind, rec.row, rec.mask, rec.k_tokens
    T_q, T_k = mask.shape
    blocked = rec.readouts["blocked_pairs"]
    lines = [f"<b>{html.escape(KINDS[kind])}</b>: {html.escape(RULES[kind])}",
             f"<b>blocked pairs: {blocked} of {T_q * T_k}</b> (marked x)."]
    pads_seen = rec.padding and kind in ("bidirectional", "causal")
    if pads_seen and kind == "bidirectional":
        lines.append(f"This rule alone does not block the {rec.padding} pad keys: every real word attends to "
                     f"them. Choose <i>padding</i> to block them.")
    elif pads_seen:
        lines.append(f"With padding on the right, the causal rule already keeps every real query off the "
                     f"{rec.padding} pad keys; only the pad queries see them, and their outputs are thrown away.")
    if kind == "cross":
        lines.append("Padding goes on the source here: the keys.")

    def row_text(ws):
        return ", ".join(f"{html.escape(k_tokens[j])} {ws[j]:.2f}" for j in range(T_k) if bool(mask[row, j]))

    lines.append(f"query i = {row} ({html.escape(rec.q_tokens[row])}) may attend to "
                 f"{rec.readouts['row_allowed']} of {T_k} keys.")
    lines.append(f"weights, yours: <b>{row_text(rec.learner[row].tolist()) if rec.learner is not None else '—'}</b>")
    lines.append(f"weights, reference: {row_text(rec.reference[row].tolist())}")
    if rec.learner is not None and not rec.learner_message:  # right here, and the notebook's checks pass it
        lines.append(f'<span style="color:#1a6b1a">Your masked_attention matches the reference '
                     f'(max |difference| = {rec.readouts["max_abs_diff"]:.1e})'
                     + (" and passes the notebook's checks of its values" if rec.checked else "") + '.</span>')
    elif rec.learner is not None and rec.readouts["max_abs_diff"] <= 1e-4:
        lines.append('<span style="color:#7a1f1f">Your weights match here, but the notebook\'s check fails your '
                     'masked_attention (see the message above).</span>')
    return '<div class="ck-readout-body">' + "<br>".join(lines) + "</div>"


# ====================================================================== draw
def _row_title(rec):
    return f"row i = {rec.row} ({label(rec.q_tokens[rec.row], 16)}): its weights over the keys (x = blocked)"


PANELS = (("mask", "Greens", "mask: green = may attend, x = blocked"),
          ("yours", "viridis", "your masked_attention: weights α"),
          ("reference", "viridis", "reference: weights α"))


class MaskPlot:
    """The explorer's figure, kept for its life: three heatmaps (the mask, the learner's weights, the reference's)
    and the chosen row's weights as bars.

    A new mask, sentence, source or padding changes the heatmaps' data, ticks and marks in place and draws the
    figure once (the last few such pictures are kept as bitmaps, so coming back to one draws nothing but the
    row); moving the query row moves the red boxes and redraws the lower panel alone.
    """

    KEEP = 8  # pictures of the heatmaps kept, most recent first

    def __init__(self):
        fig = new_figure(12.5, 7.0, dpi=80)
        gs = fig.add_gridspec(2, 3, height_ratios=[3, 2], left=0.07, right=0.955, top=0.95, bottom=0.07,
                              wspace=0.38, hspace=0.42)
        self.canvas = canvas = Canvas(fig)
        self.panels = {}
        for c, (name, cmap, title) in enumerate(PANELS):
            ax = fig.add_subplot(gs[0, c])
            image = ax.imshow([[0.0]], cmap=cmap, vmin=0, vmax=1, aspect="auto")
            bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
            ax.set_title(title)
            marks = ax.scatter([], [], marker="x", s=40, color="0.6", linewidths=1.2)
            prefix = ax.axvline(0, color="tab:orange", lw=1.5, ls="--")
            box = canvas.animate(ax.add_patch(Rectangle((-0.5, -0.5), 1, 1, fill=False, edgecolor="red", lw=2.2)))
            self.panels[name] = dict(ax=ax, image=image, colorbar=bar, marks=marks, prefix=prefix, box=box,
                                     numbers=[])
        self.not_shown = self.panels["yours"]["ax"].text(
            0.5, 0.5, "your masked_attention:\nnot shown\n(see the message above)", ha="center", va="center",
            color="#7a1f1f", transform=self.panels["yours"]["ax"].transAxes)
        self.ax_row = canvas.animate(fig.add_subplot(gs[1, :]))  # the lower panel is redrawn when the row moves
        self.ax_row.set_ylim(0, 1.05)
        self.ax_row.set_ylabel("weight")
        self.row_parts = None
        self.layout, self.kept = None, {}  # layout key -> the background bitmap it drew

    def render(self, rec):
        """The ``Canvas`` showing ``rec`` (one draw of what changed)."""
        layout = (rec.kind, tuple(rec.q_tokens), tuple(rec.k_tokens), rec.prefix, rec.padding,
                  None if rec.learner is None else rec.learner.numpy().tobytes())
        if layout != self.layout:
            if self.layout is not None and self.canvas.background is not None:  # keep the picture we leave
                self.kept[self.layout] = self.canvas.background
                while len(self.kept) > self.KEEP:
                    self.kept.pop(next(iter(self.kept)))
            self.layout = None  # until the artists below are all in place
            self._heatmaps(rec)
            self._row_panel(rec)
            self.canvas.background = self.kept.pop(layout, None)  # None: drawn at the next png()
            self.layout = layout
        self._show_row(rec)
        return self.canvas

    def _heatmaps(self, rec):
        kind, mask, prefix = rec.kind, rec.mask, rec.prefix
        T_q, T_k = mask.shape
        rows = [label(t) for t in rec.q_tokens]
        cols = [label(t) for t in rec.k_tokens]
        annotate = T_q * T_k <= 49
        blocked = (~mask).nonzero().flip(-1).numpy().reshape(-1, 2).astype(float)  # (j, i) of each blocked pair
        shown = {"mask": mask.to(torch.float64), "yours": rec.learner, "reference": rec.reference}
        for name, p in self.panels.items():
            ax, A = p["ax"], shown[name]
            on = A is not None
            ax.set_axis_on() if on else ax.set_axis_off()
            for artist in (p["image"], p["marks"], p["box"], p["colorbar"].ax):
                artist.set_visible(on)
            p["prefix"].set_visible(on and prefix > 0)
            for t in p["numbers"]:
                t.remove()
            p["numbers"] = []
            if not on:
                continue
            p["image"].set_data(A.numpy())
            p["image"].set_extent((-0.5, T_k - 0.5, T_q - 0.5, -0.5))
            ax.set_xlim(-0.5, T_k - 0.5)
            ax.set_ylim(T_q - 0.5, -0.5)
            ax.set_xticks(range(T_k))
            ax.set_xticklabels(cols, rotation=45, ha="right")
            ax.set_yticks(range(T_q))
            ax.set_yticklabels(rows)
            ax.set_xlabel("source key j" if kind == "cross" else "key j")
            ax.set_ylabel(("decoder query i" if kind == "cross" else "query i") if name == "mask" else "")  # the
            # same rows in the three panels, named once (beside the next panel's colour bar it would sit on it)
            p["marks"].set_offsets(blocked)
            p["prefix"].set_xdata([prefix - 0.5, prefix - 0.5])
            p["box"].set_width(T_k)
            if annotate and name != "mask":
                p["numbers"] = _annotate(ax, A, mask)
        self.not_shown.set_visible(rec.learner is None)

    def _row_panel(self, rec):
        """The lower panel's bars and marks for this many keys (their heights are the row's, set by _show_row)."""
        ax, T_k = self.ax_row, rec.mask.shape[1]
        for artist in (self.row_parts or {}).get("artists", []):
            artist.remove()  # bar containers (and their bars, and their legend entries) and the x marks
        xs = list(range(T_k))
        yours = []
        if rec.learner is not None:
            wd = 0.38
            yours = ax.bar([j - wd / 2 for j in xs], [0.0] * T_k, wd, color=BLUE, label="your masked_attention")
            reference = ax.bar([j + wd / 2 for j in xs], [0.0] * T_k, wd, color=GREY, label="reference")
        else:
            reference = ax.bar(xs, [0.0] * T_k, 0.55, color=GREY, label="reference")
        blocked = [ax.text(j, 0.04, "x", ha="center", color="0.45", fontsize=12) for j in xs]
        ax.set_xticks(xs)
        ax.set_xticklabels([label(t) for t in rec.k_tokens])
        ax.set_xlim(-0.6, T_k - 0.4)
        ax.legend(loc="upper right", fontsize=8, frameon=False)
        self.row_parts = dict(yours=list(yours), reference=list(reference), blocked=blocked,
                              artists=[c for c in (yours, reference) if c] + blocked)

    def _show_row(self, rec):
        row, parts = rec.row, self.row_parts
        for p in self.panels.values():
            p["box"].set_y(row - 0.5)
        if rec.learner is not None:
            for bar, h in zip(parts["yours"], rec.learner[row].tolist()):
                bar.set_height(h)
        for bar, h in zip(parts["reference"], rec.reference[row].tolist()):
            bar.set_height(h)
        for j, x in enumerate(parts["blocked"]):
            x.set_visible(not bool(rec.mask[row, j]))
        self.ax_row.set_title(_row_title(rec), fontsize=10)


def _annotate(ax, weights, mask):
    """Each allowed cell's weight written in it (blocked cells carry their x); the texts made."""
    values = weights.tolist()
    finite = [v for row in values for v in row if v == v]
    mid = (max(finite) + min(finite)) / 2 if finite else 0
    return [ax.text(j, i, f"{values[i][j]:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if values[i][j] < mid else "black") for i, j in mask.nonzero().tolist()]


def draw(rec):
    """The explorer's picture of ``rec`` as a new Figure."""
    return MaskPlot().render(rec).fig


# ====================================================================== the widget
class MaskExplorer(Explorer):
    """The mask of each rule, blocked pairs marked, and the learner's masked_attention weights beside the reference."""

    name = "mask"

    def __init__(self, masked_attention, sentence="the cat sat on the mat", source="le chat est assis",
                 kind="causal", padding=0, d_k=8, seed=0):
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown mask kind {kind!r}; known: {', '.join(KINDS)}")
        self.fn = masked_attention
        self.d_k, self._seed = d_k, seed
        self._W = make_projections(d_k, seed)  # W_Q, W_K, W_V

        self.kind = W.Dropdown(options=[(text, key) for key, text in KINDS.items()], value=kind,
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
        self.plot = MaskPlot()
        self.q_tokens = self.k_tokens = None
        self.blocked_pairs = 0
        self.row = 0
        # bad arguments raise BadInput, a ValueError
        with one_thread():
            self._update(kind, sentence, source, padding, len(sentence.split()) - 1)

        self._watch(self.kind, lambda v: self._change(kind=v, revert=self.kind))
        self._watch(self.sentence, lambda v: self._change(sentence=v))
        self._watch(self.source, lambda v: self._change(source=v))
        self._watch(self.padding, lambda v: self._change(padding=v, revert=self.padding))
        self._watch(self.query, lambda v: self._change(row=v))

    def _change(self, revert=None, **new):
        state = dict(kind=self._kind, sentence=self._sentence, source=self._source, padding=self._padding,
                     row=self.row)
        state.update(new)
        try:
            self._update(**state)
        except BadInput:
            if revert is not None:  # a dropdown or slider goes back to what is drawn; typed text stays
                self._set(revert, {self.kind: self._kind, self.padding: self._padding}[revert])
            raise

    def _update(self, kind, sentence, source, padding, row):
        """compute → draw → readout, then commit (anything before may fail and keep the last good state)."""
        rec = compute(self.fn, self._W, kind, sentence, source, padding, row, self.d_k, self._seed)
        fig, readout_html = self.plot.render(rec), readout(rec)
        self.learner_message = rec.learner_message
        self._show(fig, readout_html)
        self.record = rec
        self._kind, self._sentence, self._source, self._padding = kind, sentence, source, padding
        self.q_tokens, self.k_tokens, self.mask = rec.q_tokens, rec.k_tokens, rec.mask
        self.blocked_pairs = rec.readouts["blocked_pairs"]
        self.reference, self.learner = rec.reference, rec.learner
        self.row = rec.row
        self.row_weights = None if rec.learner is None else rec.learner[rec.row]
        self.readouts = rec.readouts
        self.source.disabled = kind not in ("cross", "prefix")
        T_q = len(rec.q_tokens)
        if (self.query.max, self.query.value) != (T_q - 1, rec.row):
            busy, self._busy = self._busy, True
            try:
                self.query.max = max(T_q - 1, 0)
                self.query.value = rec.row
            finally:
                self._busy = busy


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
