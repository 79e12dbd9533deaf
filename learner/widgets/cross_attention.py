"""The cross-attention viewer (notebook 08): type a source date, see the trained model's translation and which
source tokens each written token read.

compute → draw → readout:

* ``compute(model, task, sentence, layer, head, max_len, translations)`` -> ``CrossRecord`` (raises ``BadInput``
  for a sentence the model cannot read; ``record.problem`` says what is wrong with the learner's block, and
  ``record.check`` what the notebook's visible checks say of it)
* ``draw(record)`` -> a matplotlib Figure (the viewer keeps one ``CrossPlot``: another block or head changes the
  heatmap's data in place)
* ``readout(record)`` -> the HTML under the plot

The model's pass is kept per source sentence (``translations``), so choosing a block or a head runs no model.
"""
import html
import warnings
from dataclasses import dataclass

import ipywidgets as W
import torch

from .. import data, plots
from .base import BadInput, Canvas, Explorer, call_for_widget, check_words, label, new_figure, one_thread

MAX_SOURCE_TOKENS = 30
TRANSLATION_TIME_LIMIT = 30.0  # seconds for one whole greedy translation (a dozen runs of the decoder)


def source_tokens(task, sentence):
    """The typed date as source tokens, or BadInput saying what is allowed."""
    words = data.tokenize(sentence)
    if not words:
        raise BadInput("type a date, for example 'the 1st of february 2014' or '07/27/2013'")
    if len(words) > MAX_SOURCE_TOKENS:
        raise BadInput(f"that is {len(words)} tokens; the viewer draws at most {MAX_SOURCE_TOKENS}")
    unknown = sorted({w for w in words if w not in task.src_vocab})
    if unknown:
        raise BadInput(f"the model has never seen {', '.join(repr(w) for w in unknown)}: use digits, "
                       f"punctuation, English month and weekday names, and 'the', 'of', 'a', st/nd/rd/th")
    return words


@dataclass
class CrossRecord:
    """One translation. ``weights`` (T_y, T_x) float64: for each written token (up to and with <eos>), its
    cross-attention over the source tokens in the chosen block (and head, or their mean). When the learner's
    block cannot run, ``problem`` says why and the other fields are None."""
    words: list
    problem: str = ""
    written: list = None
    translation: str = None
    weights: torch.Tensor = None
    readouts: dict = None
    check: str = ""  # what the notebook's visible checks say of the model's decoder block ("" when they pass)


def translate(model, ids, max_len, translations=None):
    """(model.greedy's (tokens, cross weights) for the source token ``ids``, or None; a problem sentence or ""): the
    model's pass, through the guarded call, kept in ``translations`` (a dict) so that choosing another block or
    head runs no model."""
    key = (tuple(ids), max_len)
    if translations is not None and key in translations:
        return translations[key]
    src = torch.tensor([list(ids)])  # (1, T_x)
    valid = torch.ones_like(src, dtype=torch.bool)
    done = call_for_widget(model.greedy, "encdec_decoder_block", (src, valid, data.BOS_ID, data.EOS_ID, max_len),
                        time_limit=TRANSLATION_TIME_LIMIT, has_reference=False)
    if translations is not None:
        if len(translations) >= 32:
            translations.pop(next(iter(translations)))
        translations[key] = done
    return done


def compute(model, task, sentence, layer, head, max_len=12, translations=None):
    """Translate ``sentence`` greedily with ``model`` (built on the learner's decoder block, run through the
    guarded call) and keep block ``layer``'s cross-attention (``head``, or -1 for the mean of the heads).
    ``translations``: a dict that keeps the model's passes (one per source sentence)."""
    words = source_tokens(task, sentence)
    out, problem = translate(model, [task.src_vocab[w] for w in words], max_len, translations)
    if problem:
        return CrossRecord(words, problem)
    tokens, cross = out  # (1, T), per block (1, H, T_y, T_x)
    ids = tokens[0].tolist()
    n = ids.index(data.EOS_ID) + 1 if data.EOS_ID in ids else len(ids)
    w = cross[layer][0]  # (H, T_y, T_x)
    w = (w.mean(0) if head < 0 else w[head])[:n].detach().to(torch.float64)  # (n, T_x)
    inv_tgt = {i: t for t, i in task.tgt_vocab.items()}
    written = [inv_tgt.get(i, "?") for i in ids[:n]]
    translation = data.to_text(ids, task.tgt_vocab)
    strongest = [words[int(j)] for j in w.argmax(dim=-1).tolist()]
    readouts = {"translation": translation, "T_x": len(words), "T_y": n, "row_sums": w.sum(-1).tolist(),
                "strongest": strongest}
    return CrossRecord(words, "", written, translation, w, readouts, check_words("encdec_decoder_block",
                                                                                 model.dec_block))


class CrossPlot:
    """The viewer's figures, one per translation (its source and written tokens), the last ``KEEP`` kept: another
    block or head changes the heatmap's data in place and redraws it alone, and coming back to a date shown
    before builds nothing."""

    KEEP = 8

    def __init__(self):
        self.canvas, self.image, self.kept = None, None, {}  # layout -> (Canvas, its heatmap), oldest first

    def render(self, rec):
        layout = (tuple(rec.words), tuple(rec.written))
        if layout in self.kept:
            self.kept[layout] = self.kept.pop(layout)  # the most recent now
        else:
            self.kept[layout] = self._build(rec)
            while len(self.kept) > self.KEEP:
                self.kept.pop(next(iter(self.kept)))
        self.canvas, self.image = self.kept[layout]
        self.image.set_data(rec.weights.numpy())
        return self.canvas

    def _build(self, rec):
        """The alignment heatmap: one row per written token over the source tokens."""
        n = len(rec.written)
        fig = new_figure(min(2.0 + 0.45 * len(rec.words), 12.0), min(1.8 + 0.4 * n, 8.0))
        ax = fig.add_subplot(1, 1, 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plots.show_matrix(rec.weights, rows=[label(r) for r in rec.written], cols=[label(c) for c in rec.words],
                              ax=ax, vmin=0, vmax=1, annotate=False, xlabel="source token (key)",
                              ylabel="written token (query)",
                              title="cross-attention: which source tokens each output token read")
        canvas = Canvas(fig)
        return canvas, canvas.animate(ax.images[0])


def draw(rec):
    """The viewer's picture of ``rec`` as a new Figure."""
    return CrossPlot().render(rec).fig


def readout(rec):
    """The translation and, per written token, the source token it read most."""
    r = rec.readouts
    pairs = ", ".join(f"{html.escape(w)}→{html.escape(s)}" for w, s in zip(rec.written, r["strongest"]))
    return (f"<b>translation:</b> {html.escape(r['translation'])} &nbsp; (T_x = {r['T_x']}, "
            f"T_y = {r['T_y']})<br><b>most read source token per output token:</b> {pairs}")


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
        self._watch(self.text, lambda v: self._update(v, self.layer.value, self.head.value, revert=True))
        self._watch(self.layer, lambda v: self._update(self.text.value, v, self.head.value))
        self._watch(self.head, lambda v: self._update(self.text.value, self.layer.value, v))
        self.state = None
        self.translations, self.plot = {}, CrossPlot()  # the model's passes, one per source; the kept figure
        with one_thread():
            self._update(sentence, self.layer.value, self.head.value)

    def _update(self, sentence, layer, head, revert=False):
        """compute → draw → readout, then commit; a broken block only changes the message line."""
        try:
            rec = compute(self.model, self.task, sentence, layer, head, self.max_len, self.translations)
        except BadInput:
            if revert and self.state is not None:  # the box goes back to the date that is drawn
                self._set(self.text, self.state[0])
            raise
        self.learner_message = rec.problem or rec.check
        if rec.problem:
            self._show_notice()
            return
        fig, readout_html = self.plot.render(rec), readout(rec)
        self.readouts = rec.readouts
        self._show(fig, readout_html)
        self.state = (sentence, layer, head)
        self.record = rec


def cross_attention_viewer(model, task, sentence="the 1st of february 2014"):
    """The trained encoder-decoder's cross-attention for any date the learner types (notebook 08).

    Args:
        model: a ``learner.transformer.EncoderDecoder`` (built with the learner's decoder block).
        task: the date task (``learner.data.make_date_task``), for its vocabularies.
        sentence: the first source sentence shown.
    """
    return CrossAttentionViewer(model, task, sentence)
