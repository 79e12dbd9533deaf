"""The cells of the LMS's import files, each written so that every reader in use reads it the same (the
reasons are coursekit.lms.export's): points as numbers, text that a spreadsheet will not run and that PHP's
``fgetcsv`` (Moodle's reader) does not take a backslash of as an escape, and ids as the LMS reads them."""
import re

from grader.plain import inert

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def number(x):
    """Points as the file writes them: at most 4 decimals, no trailing zeros (16, 2.5, 0.3333)."""
    text = f"{round(float(x), 4):.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


_BACKSLASHES_BEFORE_A_QUOTE = re.compile(r'(\\+)"')
_BACKSLASHES_AT_THE_END = re.compile(r'\\+\Z')


def unescaping(value):
    """``value`` with a space between each run of backslashes and a double quote after it, and a run of
    backslashes at its end made even: PHP's ``fgetcsv`` (Moodle's reader), whose escape character is the backslash,
    then reads the cell as every other reader does, in the file and in the copy Moodle writes of it with
    ``fputcsv``; never ``\\"`` as an escaped quote that leaves the cell open."""
    value = _BACKSLASHES_BEFORE_A_QUOTE.sub(r'\1 "', value)
    return _BACKSLASHES_AT_THE_END.sub(lambda m: m.group() + "\\" * (len(m.group()) % 2), value)


def text(value):
    """A text cell: ``value`` (a name, an email, an id) that a spreadsheet will not run as a formula, on one line
    with its control characters shown escaped (``grader.plain.inert``: a name comes from the student or the LMS),
    read the same by every CSV reader (``unescaping``)."""
    value = "" if value is None else inert(value)
    return unescaping("'" + value if value.startswith(FORMULA_START) else value)


def canvas_name(s):
    """The student as Canvas sorts its names, ``Last, First`` (or whichever it has, else the id)."""
    if s.last_name and s.first_name:
        return f"{s.last_name}, {s.first_name}"
    return s.last_name or s.first_name or s.id


def numeric_id(value):
    """A numeric id as the LMS reads it (Canvas's ``to_i``, Moodle's integer id: 0101 is 101), else "". Zero is no
    id: no account has it, Canvas then matches the row by SIS id or name, and Moodle skips a key PHP calls
    ``empty()`` ("0") and gives the row to the student of the row before."""
    return str(int(value)) if re.fullmatch(r"[0-9]{1,18}", value or "") and int(value) else ""


def canvas_reads(cell):
    """``cell`` as Canvas's gradebook importer reads it: its CSV converter ``decimal_comma_to_period`` (canvas-lms
    lib/gradebook_importer.rb, applied to every field) makes a field of digits, commas and periods a number with one
    period (``1,5`` is ``1.5``, ``5.`` is ``5``, ``,`` is nothing). A SIS id it changes would be looked up as another
    id (another student's, or nobody's and then the name), so such a key is not written."""
    if not re.fullmatch(r"-?[0-9.,]+%?", cell or ""):
        return cell
    parts = re.split(r"[,.]", cell)
    while parts and parts[-1] == "":  # Ruby's String#split drops trailing empty fields
        parts.pop()
    if not parts:
        return None
    last = parts.pop()
    return f"{''.join(parts)}.{last}" if parts else last


def user_id(value):
    """An LMS user id as the string it is compared and kept as: a string as it is, an integral JSON number as its
    digits (``5003`` and ``5003.0``: ``"5003"``); None for anything else (a bool, a fraction, empty)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        return str(value)
    return value if isinstance(value, str) and value else None
