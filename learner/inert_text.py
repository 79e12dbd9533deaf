"""A name or a field a student wrote, as one inert line (``inert``): what the learner's side prints of a student's
files (submit's refusals, ``course fetch-again``) and what the grading machine prints (``grader.plain`` imports it):
every character a terminal, a log reader or a CSV reader would act on shown escaped."""
import unicodedata

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# what a terminal, a log reader or a spreadsheet acts on rather than shows: control characters (C0, DEL, C1), format
# characters (direction overrides, zero-width joiners), line and paragraph separators, and lone surrogates (bytes of
# a name that are not UTF-8, kept by surrogateescape)
ACTING = {"Cc", "Cf", "Zl", "Zp", "Cs"}


def escaped(ch):
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text):
    """``text`` (a name, an id, a field a student wrote) as one inert line: every character that a terminal, a log
    reader or a CSV reader would act on (control, format and separator characters) shown escaped, the rest kept."""
    text = str(text)
    if not any(unicodedata.category(ch) in ACTING for ch in text):
        return text
    return "".join(escaped(ch) if unicodedata.category(ch) in ACTING else ch for ch in text)
