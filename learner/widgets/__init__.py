"""Widgets to play with: the learner's own function next to a reference, redrawn on every change.

    from learner import widgets
    widgets.temperature_explorer(softmax)          # notebook 03
    widgets.sampling_explorer(sample_next, gpt, task)  # notebook 07
    widgets.mask_explorer(masked_attention)        # notebook 04
    widgets.cross_attention_viewer(model, task)    # notebook 08
    widgets.kv_cache_stepper(decoder_block_step, gpt, task)  # notebook 09

Each function returns an ``Explorer``. Displayed in a notebook, it shows its
``.ui`` (an ipywidgets VBox). From Python, its controls are attributes
(``.slider``, ``.kind``, ...) and what it currently shows is state: ``.png``
(the bytes of the plot), ``.readouts`` (a dict of numbers), ``.message`` (the
last complaint about the input, "" after a good one) and ``.learner_message``
(what is wrong with the learner's function, "" when it works).

The modules, one job each:

    base             the Explorer base class, BadInput, figure and text helpers, and
                     call_for_widget: the one guarded call of the learner's function
    builtin          the reference sides, with PyTorch's built-ins
    temperature      the temperature explorer (notebook 03)
    masks            the mask explorer (notebook 04)
    sampling         the sampling explorer (notebook 07): continuations of the trained GPT
    cross_attention  the cross-attention viewer (notebook 08)
    kv_cache         the KV-cache stepper (notebook 09): stepping and the widget
    kv_cache_view    its readout and picture

How it is built, so that it stays reliable in a real browser:

* The plot is a matplotlib ``Figure`` rendered with Agg to PNG bytes and put
  into one ``ipywidgets.Image``. No pyplot figure is ever created, so the
  inline backend never adds a second copy; no ``Output`` widget is cleared and
  refilled, so nothing flickers or goes missing.
* It answers at once (``bench/widgets.py`` times every control): each widget keeps
  one figure (``base.Canvas``) and changes its artists in place; what a move does
  not change is drawn once and kept as a bitmap, so a move redraws only its own
  artists, in one draw. Model passes are kept per input (the sampling explorer's
  continuations per setting, the viewer's translation per date), and PyTorch runs
  on one thread inside a widget (the models are small; a second thread only waits).
* It never says a learner's function is right on the strength of its own input
  alone: before "matches" (or silence), it runs the notebook's visible checks of
  that exercise once per function (``base.visible_check``, ``learner.check.check``), which
  feed batches, other ``dim`` values, padding and float64; a failure is shown in
  the check's own words.
* The reference side is PyTorch's own (``torch.softmax``,
  ``torch.nn.functional.scaled_dot_product_attention``, ``torch.topk`` and ``torch.sort`` for the
  sampling explorer's top-k and top-p). It never comes from the ``solutions`` package, which learners
  do not have.
* The learner's function runs through ``base.call_for_widget`` (time limit, prints
  and warnings kept off the notebook). If it is still the stub, raises, or
  returns garbage, the widget says so in words and draws the reference alone.
* Bad input (a temperature of 0, an empty or too long sentence) is answered
  with what is allowed, and the widget keeps its last good state.

Each update is compute → draw → readout: ``compute`` validates the input (raising
``BadInput`` with what is allowed), runs the reference and the learner's function
and returns a small record of plain data and tensors; ``draw`` renders the record
(a plot object of the module keeps one ``base.Canvas`` and its ``render(record)``
changes it in place; ``draw(record)`` gives the same picture as a new ``Figure``);
``readout`` turns it into the HTML under the plot. Adding a widget: write those
steps in a new module, subclass ``Explorer``, build the controls and call
``self._assemble(rows_of_controls)``, hook each control with
``self._watch(control, handler)``, and in the handler run the three steps and
finish with ``self._show(canvas, readout_html)``; commit the new state only after
that, so a failure anywhere keeps the last good state. Before the readout says the
learner's function is right, ask ``base.check_words(exercise, fn)``.
"""
from .base import BadInput, Explorer
from .cross_attention import CrossAttentionViewer, cross_attention_viewer
from .kv_cache import KVCacheStepper, kv_cache_stepper
from .masks import KINDS, MaskExplorer, mask_explorer
from .sampling import SamplingExplorer, sampling_explorer
from .temperature import PRESETS, TemperatureExplorer, temperature_explorer

__all__ = ["temperature_explorer", "mask_explorer", "sampling_explorer", "cross_attention_viewer",
           "kv_cache_stepper", "CrossAttentionViewer", "KVCacheStepper", "TemperatureExplorer", "MaskExplorer",
           "SamplingExplorer", "Explorer", "BadInput", "KINDS", "PRESETS"]
