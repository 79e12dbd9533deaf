"""What every widget shares: the ``Explorer`` base class, ``BadInput``, figure and text helpers, and
``call_for_widget``: the checks' guarded call of the learner's function (``learner.check.call_learner``), in the
widgets' words.

Every widget updates in three steps, each a plain function in its own module:

* compute: validate the input (raise ``BadInput`` with what is allowed), run the
  reference and the learner's function, and return a small record of plain data
  and tensors; no widget state and no matplotlib;
* draw: render the record as a matplotlib ``Figure`` (``new_figure``), nothing else;
* readout: turn the record into the HTML a learner reads under the plot.

The ``Explorer`` subclass only wires controls to these steps and commits the new
state after all three succeeded, so a failure anywhere keeps the last good state.

Two things every widget shares so that it never reassures wrongly and answers at once:

* ``visible_check(name, fn)``: before a widget says the learner's function is right, it runs the
  notebook's own visible checks of that exercise (``learner.check.check``: the batch shapes, ``dim`` arguments and
  dtypes the graded cells feed, not only the widget's one input), once per function; a failure is shown in
  the check's own words.
* ``Canvas``: one figure kept for the widget's life and rendered with Agg; what does not change between two
  moves of a control (axes, ticks, legends, heatmaps) is drawn once and kept as a bitmap, and a move redraws
  only the artists it changed (``Canvas.animate``), then encodes the PNG.
"""
import contextlib
import html
import io
import math
import warnings

import ipywidgets as W
import matplotlib
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

import learner.check

LEARNER_TIME_LIMIT = 5.0  # seconds one call of the learner's function may take inside a widget
BLUE = "#1f77b4"          # the learner's side
GREY = "0.62"             # the reference side


class BadInput(ValueError):
    """Input the widget cannot draw; its message says what is allowed."""


# ====================================================================== figures and text
def new_figure(width, height, dpi=80):
    """A matplotlib Figure that pyplot knows nothing about (so the inline backend never shows it)."""
    return Figure(figsize=(width, height), dpi=dpi)


def png_bytes(fig):
    """The figure rendered with Agg, as PNG bytes (a ``Canvas`` is faster for a figure drawn again and again)."""
    if isinstance(fig, Canvas):
        return fig.png()
    buf = io.BytesIO()
    with warnings.catch_warnings(), matplotlib.rc_context(DRAW_RC):
        warnings.simplefilter("ignore")
        fig.savefig(buf, format="png")
    return buf.getvalue()


# glyphs as FreeType draws them, unhinted: about 15% less time per drawing of a figure full of labels (the
# widgets' heatmaps) and no visible change at the widgets' sizes; only while a widget draws, not for the learner's
# own figures
DRAW_RC = {"text.hinting": "none"}


def encode_png(rgba):
    """An RGBA buffer (H, W, 4) as PNG bytes, quickly (light compression: the plots are flat colours)."""
    height, width = rgba.shape[:2]
    buf = io.BytesIO()
    Image.frombuffer("RGBA", (width, height), rgba, "raw", "RGBA", 0, 1).save(buf, format="png", compress_level=1)
    return buf.getvalue()


class Canvas:
    """One matplotlib Figure kept for a widget's life, rendered with Agg.

    ``animate(*artists)`` marks the artists a move of a control changes; ``png()`` draws the rest once (the
    background, kept as a bitmap until ``invalidate()``), then only the animated artists on top of it. A
    widget changes its artists in place (``set_height``, ``set_data``, ``set_text``) and calls ``png()``:
    one draw per change, never a new figure.
    """

    def __init__(self, fig):
        self.fig = fig
        self.agg = FigureCanvasAgg(fig)
        self.animated = []
        self.background = None

    def animate(self, *artists):
        for a in artists:
            a.set_animated(True)
            self.animated.append(a)
        return artists[0] if len(artists) == 1 else artists

    def invalidate(self):
        """The static parts changed (new ticks, new limits): the next ``png()`` draws everything again."""
        self.background = None

    def png(self):
        with warnings.catch_warnings(), matplotlib.rc_context(DRAW_RC):
            warnings.simplefilter("ignore")
            if self.background is None:
                self.agg.draw()  # every artist but the animated ones
                self.background = self.agg.copy_from_bbox(self.fig.bbox)
            else:
                self.agg.restore_region(self.background)
            renderer = self.agg.get_renderer()
            for a in self.animated:
                if a.get_visible():
                    a.draw(renderer)
        return encode_png(self.agg.buffer_rgba())


def label(text, limit=10):
    """A token as a tick label: short, and with no '$' that matplotlib would read as maths."""
    text = str(text)
    if len(text) > limit:
        text = text[:limit - 1] + "…"
    return text.replace("$", r"\$")


def sentence(notes):
    """Join notes into one sentence with a capital letter (and nothing else changed), or ""."""
    if not notes:
        return ""
    text = "; ".join(notes) + "."
    return text[0].upper() + text[1:]


def fmt(v, digits=3):
    """A number for a readout table: "—" for None (no value), "-inf", or ``digits`` decimals."""
    if v is None:
        return "—"
    if v == -math.inf:
        return "-inf"
    return f"{v:.{digits}f}"


def notice_html(message, learner_message):
    """The message line above the plot: the last complaint about the input, then the one about the learner's
    function ("" when there is neither). A check's message keeps its lines."""
    parts = []
    if message:
        parts.append(f'<div style="color:#a04000"><b>Input not used:</b> {html.escape(message)}</div>')
    if learner_message:
        parts.append(f'<div style="color:#7a1f1f;white-space:pre-wrap"><b>Your function:</b> '
                     f'{html.escape(learner_message)}</div>')
    return "".join(parts)


# ====================================================================== computing
@contextlib.contextmanager
def one_thread():
    """Run PyTorch on one thread inside: the widgets' models are small, so a second thread only adds waiting
    (on a busy machine a pass took 30x the CPU time with two threads); the count is put back after."""
    before = torch.get_num_threads()
    if before != 1:
        torch.set_num_threads(1)
    try:
        yield
    finally:
        if before != 1:
            torch.set_num_threads(before)


# ====================================================================== the notebook's checks
_VERDICTS = {}  # (exercise, id(fn)) -> (fn, (passed, message)); the function is kept so that its id stays its own


def _ready_made(fn):
    """True for the course's own functions (coursekit's ready-made parts, the reference): not the learner's."""
    module = getattr(fn, "__module__", None) or ""
    return module.split(".")[0] in ("coursekit", "solutions", "torch")


def visible_check(name, fn):
    """What the notebook's visible checks of exercise ``name`` say of the learner's ``fn``: (passed, message).

    The checks are the graded cells' visible parts (``learner.check.check(name, fn, part)`` for "basic" and, where the
    exercise has one, "edge"): the batch shapes, ``dim`` arguments and dtypes the notebook's checks feed, not
    only the widget's one input. ``passed`` is True when every one passes, False with the first failing
    check's message (its case, the first wrong position, expected vs got, the known mistake) otherwise, and
    None when there is nothing to run (the course's own function, or a grading kernel, where checks run
    outside). Run once per function object; a redefined function is a new one.
    """
    if not callable(fn) or _ready_made(fn):
        return None, ""
    key = (name, id(fn))
    if key not in _VERDICTS:
        verdict, printed = (True, ""), io.StringIO()
        for part in [c for c in learner.check.cells_of(name) if c in ("basic", "edge")]:
            try:
                with contextlib.redirect_stdout(printed), one_thread():
                    learner.check.check(name, fn, part)
            except learner.check.CheckFailed as exc:
                verdict = (False, str(exc))
                break
            except Exception as exc:  # the check itself could not run: say nothing rather than something wrong
                verdict = (None, f"the notebook's check of `{name}` could not run here ({type(exc).__name__})")
                break
        if verdict[0] and "PASSED" not in printed.getvalue():
            verdict = (None, "")  # a grading kernel: the checks run outside it
        _VERDICTS[key] = (fn, verdict)
    return _VERDICTS[key][1]


def check_words(name, fn):
    """"" when the notebook's visible checks pass ``fn`` (or cannot judge it); else what they say, in their
    words, introduced as the check's."""
    passed, message = visible_check(name, fn)
    if passed is False:
        return f"the notebook's check fails your `{name}`:\n{message}"
    return ""


# ====================================================================== the learner's function
def call_for_widget(fn, fn_name, args=(), kwargs=None, time_limit=None, has_reference=True):
    """Run the learner's ``fn(*args, **kwargs)``: (value, None), or (None, a sentence saying what went wrong).

    Never raises for the learner's sake: a call that computes for more than ``time_limit``
    seconds of CPU time (default ``LEARNER_TIME_LIMIT``; the checks' guarded call, which
    counts computing, not the clock, so a busy machine never stops a correct function) is stopped, an exception becomes words, and what
    the function prints or warns is kept off the notebook.
    ``has_reference``: the widget draws a reference beside the learner's side (the
    messages then say it is shown alone).
    """
    time_limit = time_limit or LEARNER_TIME_LIMIT
    alone = " The reference is shown alone." if has_reference else ""
    if not callable(fn):
        return None, (f"`{fn_name}` is not a function (got {type(fn).__name__}). Run the exercise cell that "
                      f"defines it, then this cell again.")
    out = learner.check.call_learner(fn, args, kwargs or {}, time_limit)  # the checks' guarded call, its words ours
    if out.timed_out:  # the checks' words for what it did: waited on the clock, or computed past the limit
        said = learner.check.timeout_text(out, time_limit)
        return None, f"your `{fn_name}` {said.removeprefix('it ')}.{alone}"
    if isinstance(out.error, NotImplementedError):
        return None, (f"`{fn_name}` is not implemented yet (it raises NotImplementedError). Write it in the "
                      f"exercise cell above, run that cell, then run this cell again.{alone}")
    if out.error is not None:  # the learner's own error, reported in words
        return None, f"your `{fn_name}` raised {type(out.error).__name__}: {str(out.error)[:200]}.{alone}"
    return out.value, None


# ====================================================================== the base class
class Explorer:
    """Base of every widget: controls, one PNG image, readouts and a message line.

    State a learner (or a test) reads: ``png`` (the plot's bytes), ``readouts`` (a
    dict of numbers), ``message`` (the last complaint about the input, "" after a
    good one) and ``learner_message`` (what is wrong with the learner's function).
    """

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
        """The container: the rows of controls, then the message line, the plot and the readout."""
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
            with one_thread():
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
        """Put the figure and the readout on screen and clear the complaint about the input."""
        self.png = png_bytes(fig)
        self.image.value = self.png
        self.readout.value = readout_html
        self.message = ""
        self._show_notice()

    def _show_notice(self):
        self.notice.value = notice_html(self.message, self.learner_message)

    def _ipython_display_(self):
        from IPython.display import display
        display(self.ui)
