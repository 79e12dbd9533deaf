"""Text from a submission, safe to print in a terminal: no escape sequences, no control characters.

A learner's printed text, exception messages and names reach the instructor's terminal (`course grade`'s
summary, `course report`) and the learner's (`course validate`). An ANSI escape sequence in them could move the
cursor, rewrite lines already printed (a score, a fault) or change the window's title; here every escape
sequence is removed and every other control character but newline and tab is shown as ``\\xNN``.
"""
import re

_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain(text):
    """``text`` with escape sequences removed and other control characters (but newline and tab) made visible."""
    text = _ESCAPES.sub("", str(text))
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
