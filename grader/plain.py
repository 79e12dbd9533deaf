"""Text from a submission, safe to print in a terminal: no escape sequences, no control characters.

A learner's printed text, exception messages and names reach the instructor's terminal (`course grade`'s
summary, `course report`) and the learner's (`course validate`). An escape sequence in them could move the
cursor, rewrite lines already printed (a score, a fault), change the window's title or hide text; a text-direction
override could make a line read backwards. Here every escape sequence (CSI, OSC, DCS/SOS/PM/APC strings, 8-bit CSI)
and every direction override is removed, and every other control character is shown as ``\\xNN``: newlines and tabs
stay, unless the text must stay on one line (a table cell), where they become spaces.
"""
import re

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
