"""One symbol, one meaning (issue 52, item 2): the LaTeX symbols of every notebook, of the notation page and of the
drawings' labels agree with the notation page.

* The page gives each symbol one row: a symbol in two rows has two meanings.
* Every symbol a notebook's prose or a drawing's label writes is on the page (or is general mathematics, GENERAL).
* A symbol of a table whose heading names notebooks ("The RNN encoder-decoder (05, 05b)") is used in those
  notebooks (and the row's own "from") only: $h$ in a transformer notebook is an RNN's state used for something
  else. A drawing counts as part of every notebook that calls it.
A failure names the notebook, the cell (0-based) and the statement. Cells of notebooks another issue is editing
that break the rule are listed in KNOWN with the issue that fixes them; a listed exception that no longer occurs
fails too, so the list only shrinks. Cost: about 3 s (the drawings are drawn with Agg).
"""
import os
import re

import matplotlib
import nbformat
import pytest

from coursekit.sync import assignment_of, source_notebooks
from notation_symbols import defined_by, math_of, mentioned, page_rows, symbols

matplotlib.use("Agg")

NOTEBOOKS = source_notebooks()
PAGE_PATH = os.path.join(os.path.dirname(NOTEBOOKS[0]), "..", "notation.md")
EVERY = "every"


def _numbers(text):
    """The notebooks a heading or a "from" cell names: "05, 05b", "06 to 10", "02 to 04, then every notebook"."""
    if "every notebook" in text:
        return EVERY
    order = [assignment_of(p).split("_")[0] for p in NOTEBOOKS]
    named = set()
    for a, b in re.findall(r"(\d\db?) to (\d\db?)", text):
        named |= set(order[order.index(a):order.index(b) + 1])
    return named | set(re.findall(r"\d\db?", text))


def _page():
    """{key: (row's symbols cell, the notebooks it may be used in, or EVERY)}, and the keys given by two rows."""
    defined, twice = {}, []
    for heading, cell, origin in page_rows(open(PAGE_PATH).read()):
        scope = _numbers(heading) if re.search(r"\(\d\d", heading) else EVERY
        if scope is not EVERY:
            scope = scope | _numbers(origin)
        for key in set(defined_by(cell)):
            if key in defined and defined[key][0] != cell:
                twice.append((key, defined[key][0], cell))
            defined[key] = (cell, scope)
        for key in {key for tex, _ in math_of(cell) for key, _ in symbols(tex)} - set(defined):
            defined[key] = (cell, scope)  # written in the row beside its symbol (x_1 in bold x's row)
    return defined, twice


DEFINED, TWICE = _page()
MENTIONED = mentioned(open(PAGE_PATH).read())  # another text's symbol, named in a sentence that says who writes it
# symbols that are mathematics, not the course's: \pi, a golden-ratio-free phi of 02's cosine, Kronecker's delta,
# the set of reals
GENERAL = {"\\pi", "\\varphi", "\\delta_•", "\\mathbb", "R", "N", "A", "C"}

# Symbols the page gives one meaning, written for another one a sentence shows: (symbol's key, pattern of the
# statement, the other meaning). The scope rule cannot see these, since the symbol is the page's in that notebook.
OTHER_MEANINGS = [
    ("b", r"(?:sentence|row|batch) \$b\$|\[b, ", "a row of a batch (the page: `b` in code only; $b$ is a bias)"),
    ("y", r"states \$y\$|\(y, |\$y \+ ",
     "a decoder's vectors (the page: $y$ is a target's tokens, $r$ a transformer's vectors)"),
    ("x", r"\$x W\^", "a transformer's vectors (the page: $x$ is a token, $r$ a transformer's vectors)"),
    ("V", r"\$\((?![^$]*K, V)(?:[^$]*, )?V(?:_\{?src\}?)?(?:, [^$]*)?\)\$|\$V(?:_\{?src\}?)? (?:\\times|=)",
     "a vocabulary's size, a dimension of a shape (the page: $\\lvert\\mathcal{V}\\rvert$; $V$ holds the values)"),
]

# Cells that break the page's rule while another issue fixes them, {(notebook, cell, key): "TODO issue N: what is
# wrong"}; none now (issue 53 fixed 04, 05, 08 and 09).
KNOWN = {}


def _uses_in_notebooks():
    """[(notebook number, cell, key, written, statement)] for every symbol of every notebook's prose."""
    uses = []
    for path in NOTEBOOKS:
        number = assignment_of(path).split("_")[0]
        for k, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "markdown":
                continue
            for tex, statement in math_of(cell.source):
                uses += [(number, k, key, written, statement) for key, written in symbols(tex)]
    return uses


def _drawing_calls():
    """{drawing: the notebooks that call it}."""
    calls = {}
    for path in NOTEBOOKS:
        number = assignment_of(path).split("_")[0]
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                for name in re.findall(r"drawings\.(\w+)\(", cell.source):
                    calls.setdefault(name, set()).add(number)
    return calls


def _uses_in_drawings():
    """[(notebook number, "drawing NAME", key, written, label)] for every symbol of every drawing's labels, drawn with
    sizes of the course, as each notebook that calls it."""
    import importlib.util

    import matplotlib.pyplot as plt

    # the drawings' test module, by its path: this folder's tests run alone too (tests/learner not on the path)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "learner", "test_drawings.py")
    spec = importlib.util.spec_from_file_location("course_test_drawings", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    PICTURES = module.PICTURES
    uses = []
    for name, numbers in _drawing_calls().items():
        for make in PICTURES[name][:2]:
            fig = make()
            labels = [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]
            plt.close(fig)
            for label in labels:
                for tex, _ in math_of(label):
                    uses += [(n, f"drawing {name}", key, written, label) for n in sorted(numbers)
                             for key, written in symbols(tex)]
    return uses


def _findings(uses):
    found = {}
    for number, where, key, written, statement in uses:
        if key not in DEFINED and "(·)" in key:  # a function applied, where the page names the function alone
            key = key.replace("(·)", "")
        elif key not in DEFINED and key.replace("_•", "(·)_•").replace("(·)(·)", "(·)") in DEFINED:
            key = key.replace("_•", "(·)_•")
        if key not in DEFINED and key + "(·)" in DEFINED:
            key += "(·)"
        if key in GENERAL or key in MENTIONED and re.search(r"\bwrites?\b", statement):
            continue
        other = [why for k, pattern, why in OTHER_MEANINGS if k == key and re.search(pattern, statement)]
        if other:
            found.setdefault((number, where, key), f"{number} [{where}]: ${written}$ is used as {other[0]}: "
                                                   f"{statement[:160]!r}")
            continue
        if key in DEFINED and DEFINED[key][1] is not EVERY and set(re.findall(r"[Nn]otebooks? (\d\db?)", statement)) \
                & DEFINED[key][1]:
            continue  # a sentence about a notebook whose symbol it is ("notebook 05's context $\\mathbf{c}$")
        if key not in DEFINED:
            why = f"${written}$ is not on the notation page"
        elif DEFINED[key][1] is not EVERY and number not in DEFINED[key][1]:
            why = (f"${written}$ is the page's {DEFINED[key][0]!r}, a symbol of notebooks "
                   f"{', '.join(sorted(DEFINED[key][1]))} only")
        else:
            continue
        found.setdefault((number, where, key), f"{number} [{where}]: {why}: {statement[:160]!r}")
    return found


def test_the_page_gives_each_symbol_one_row():
    assert not TWICE, "the notation page gives these symbols two rows (two meanings): " + "; ".join(
        f"{key}: {a!r} and {b!r}" for key, a, b in TWICE)


def test_every_symbol_of_the_notebooks_is_the_pages_and_used_where_it_means_that():
    found = _findings(_uses_in_notebooks())
    new = {k: v for k, v in found.items() if k not in KNOWN}
    stale = sorted(set(KNOWN) - set(found))
    assert not new, "symbols used for what the notation page does not give them:\n" + "\n".join(new.values())
    assert not stale, f"KNOWN lists cells that no longer break the rule (remove them): {stale}"


def test_every_symbol_of_the_drawings_is_the_pages_and_used_where_it_means_that():
    found = _findings(_uses_in_drawings())
    assert not found, "drawings' labels using symbols the page does not give them:\n" + "\n".join(found.values())


@pytest.mark.parametrize("tex, page, expected", [
    (r"\text{FFN}(h) = W_2\,\text{relu}(W_1 h + b_1)", "| $h_t$ | `h` | an RNN's state | 05 |", "h"),
    (r"h_t", "", "h_•"),
    (r"V \times D", "| $V$ | `V` | a vocabulary's size | 01 |\n| $Q$, $K$, $V$ | | values | 02 |", "twice"),
])
def test_the_rule_catches_a_symbol_used_for_something_else(tex, page, expected):
    """The checker is not a rubber stamp: an RNN's $h$ in a transformer's formula, a symbol not on the page, and a
    page that gives $V$ two rows are each caught."""
    keys = [key for key, _ in symbols(tex)]
    assert expected in keys or expected == "twice"
    if expected == "twice":
        rows = page_rows("## Positions and sizes\n| symbol | in code | meaning | from |\n|---|---|---|---|\n" + page)
        seen = [key for _, cell, _ in rows for t, _ in math_of(cell) for key, _ in symbols(t)]
        assert seen.count("V") == 2
    elif page:
        rows = page_rows("## The RNN encoder-decoder (05, 05b)\n| symbol | in code | meaning | from |\n|---|---|---|---|\n"
                         + page)
        scope = _numbers(rows[0][0]) | _numbers(rows[0][2])
        assert "06" not in scope and {key for t, _ in math_of(rows[0][1]) for key, _ in symbols(t)} == {"h_•"}
        assert "h" not in {key for t, _ in math_of(rows[0][1]) for key, _ in symbols(t)}
    else:
        assert expected not in DEFINED or "_•" in expected
