"""What every widget shares: the ``Explorer`` base class, ``BadInput``, figure and text helpers, and
``call_learner``: the grader's guarded call of the learner's function (``grader.call_learner``), in the
widgets' words.

Every widget updates in three steps, each a plain function in its own module:

* compute: validate the input (raise ``BadInput`` with what is allowed), run the
  reference and the learner's function, and return a small record of plain data
  and tensors; no widget state and no matplotlib;
* draw: render the record as a matplotlib ``Figure`` (``new_figure``), nothing else;
* readout: turn the record into the HTML a learner reads under the plot.

The ``Explorer`` subclass only wires controls to these steps and commits the new
state after all three succeeded, so a failure anywhere keeps the last good state.
"""
import html
import io
import math
import warnings

import ipywidgets as W
from matplotlib.figure import Figure

import grader

LEARNER_TIME_LIMIT = 5.0  # seconds one call of the learner's function may take inside a widget
BLUE = "#1f77b4"          # the learner's side
GREY = "0.62"             # the reference side
NINF = float("-inf")


class BadInput(ValueError):
    """Input the widget cannot draw; its message says what is allowed."""


# ====================================================================== figures and text
def new_figure(width, height, dpi=80):
    """A matplotlib Figure that pyplot knows nothing about (so the inline backend never shows it)."""
    return Figure(figsize=(width, height), dpi=dpi)


def png_bytes(fig):
    """The figure rendered with Agg, as PNG bytes."""
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.savefig(buf, format="png")
    return buf.getvalue()


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
    function ("" when there is neither)."""
    parts = []
    if message:
        parts.append(f'<div style="color:#a04000"><b>Input not used:</b> {html.escape(message)}</div>')
    if learner_message:
        parts.append(f'<div style="color:#7a1f1f"><b>Your function:</b> {html.escape(learner_message)}</div>')
    return "".join(parts)


# ====================================================================== the learner's function
def call_learner(fn, fn_name, args=(), kwargs=None, time_limit=None, has_reference=True):
    """Run the learner's ``fn(*args, **kwargs)``: (value, None), or (None, a sentence saying what went wrong).

    Never raises for the learner's sake: a call that computes for more than ``time_limit``
    seconds of CPU time (default ``LEARNER_TIME_LIMIT``; the grader's guarded call, which
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
    out = grader.call_learner(fn, args, kwargs or {}, time_limit)  # the grader's guarded call, its words ours
    if out.timed_out:
        return None, (f"your `{fn_name}` did not finish within {time_limit:g} s of computing and was stopped: look "
                      f"for a loop that never ends.{alone}")
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
