"""Text from a submission, safe to print in a terminal: no escape sequences, no control characters.

A learner's printed text, exception messages and names reach the instructor's terminal (`course grade`'s
summary, `course report`) and the learner's (`course validate`). An escape sequence in them could move the
cursor, rewrite lines already printed (a score, a fault), change the window's title or hide text; a text-direction
override could make a line read backwards. Here every escape sequence (CSI, OSC, DCS/SOS/PM/APC strings, 8-bit CSI)
and every direction override is removed, and every other control character is shown as ``\\xNN``: newlines and tabs
stay, unless the text must stay on one line (a table cell), where they become spaces.

``inert`` is for a name or a field (a folder's or file's name, a student id, a notebook's field): one record, one
line, every control character shown escaped (ESC as ``\\x1b``, LF as ``\\n``, a direction override as
``\\u202e``), so that the instructor sees what the student wrote and nothing it does. ``InertStream`` is the last
guard of a command's own output (``course``'s stdout and stderr): whatever reaches it, no escape sequence, carriage
return or other control character but a newline and a tab gets through raw.
"""
import io
import re
import unicodedata

from learner.inert_text import ACTING, escaped, inert  # noqa: F401 (inert: grader.plain's own, for its callers)

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]"            # CSI: colours, cursor moves, erasing
                      r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window titles, hyperlinks
                      r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"       # DCS, SOS, PM, APC strings
                      r"|\x1b[ -/]*[0-~]?"                    # any other escape
                      r"|\x9b[0-?]*[ -/]*[@-~]")              # 8-bit CSI
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")  # text-direction marks and overrides
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAKS = re.compile(r"[\n\t\r\x0b\x0c]")


def plain(text, one_line=False):
    """``text`` with escape sequences and direction overrides removed and other control characters made visible
    (``\\xNN``); newlines and tabs kept, or made spaces when ``one_line``."""
    text = _BIDI.sub("", _ESCAPES.sub("", str(text)))
    if one_line:
        text = _LINE_BREAKS.sub(" ", text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _guarded(text):
    return "".join(ch if ch in "\n\t" or unicodedata.category(ch) not in ACTING else escaped(ch) for ch in text)


class InertStream(io.TextIOBase):
    """A text stream that writes to ``raw`` with every control, format and separator character but a newline and a
    tab shown escaped: a command's stdout and stderr behind it never carry an escape sequence or a carriage return,
    whatever a message held. ``raw`` stays reachable for what must draw on the terminal (a progress bar)."""

    def __init__(self, raw):
        super().__init__()
        self.raw = raw

    def write(self, text):
        self.raw.write(_guarded(text))
        return len(text)

    def flush(self):
        self.raw.flush()

    def isatty(self):
        return self.raw.isatty()

    def fileno(self):
        return self.raw.fileno()

    @property
    def encoding(self):
        return getattr(self.raw, "encoding", "utf-8")

    def writable(self):
        return True


def raw_stream(stream):
    """The stream under an ``InertStream`` (or ``stream`` itself): for a progress bar's own drawing."""
    return getattr(stream, "raw", stream) if isinstance(stream, InertStream) else stream
