"""Reading the course's mathematics: the symbols of a LaTeX string, and the notation page's table of them.

A symbol is a letter (Latin, Greek, bold or calligraphic) with the decorations that are part of its name: a
subscript or superscript the notation page writes as part of a name ($d_k$, $W_Q$, $T_{max}$, $h^{dec}$), not an
index ($x_i$, $h_{t-1}$, $\\alpha_{ij}$) nor an operator ($K^\\top$, $x^2$). A letter the page writes only with an
index is a different symbol written bare ($k_j$ a key, $k$ top-k's count), so the key of an indexed use ends in
"_•". Used by tests/course/test_notation.py.
"""
import re

MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\$)(.+?)(?<!\\)\$", re.S)
# commands that are not symbols: functions, operators, spacing, fonts of words, delimiters
NOT_SYMBOLS = {
    "exp", "log", "sin", "cos", "tanh", "max", "min", "sum", "prod", "frac", "sqrt", "cdot", "dots", "ldots", "cdots",
    "times", "to", "in", "le", "leq", "ge", "geq", "ne", "neq", "approx", "pm", "mid", "infty", "partial", "left",
    "right", "big", "Big", "bigl", "bigr", "qquad", "quad", "lVert", "rVert", "lvert", "rvert", "langle", "rangle",
    "top", "ast", "prime", "begin", "end", "pmatrix", "cases", "wedge", "vee", "neg", "mathbb", "text", "mathrm",
    "texttt", "operatorname", "textbf", "emph", "limits", "nabla", "equiv", "sim", "propto", "forall", "exists",
    "cap", "cup", "setminus", "subset", "leftarrow", "rightarrow", "Rightarrow", "mapsto", "uparrow", "downarrow",
    "lfloor", "rfloor", "lceil", "rceil", "circ", "star", "bullet", "not", "displaystyle", "tfrac", "dfrac",
    "binom", "hat", "tilde", "bar", "vec", "overline", "underline", "pi", "varphi", "delta", "mathbf", "boldsymbol",
    "mathcal", "ll", "gg", "colon", "vdots", "ddots", "backslash", "lbrace", "rbrace", "{", "}", ",", ";", "!", " ",
}
# the constants and general mathematics every notebook may write (a symbol of no model)
GENERAL = {"\\pi", "\\varphi", "\\delta", "\\mathbb"}
# words written in math mode (names of operations, not symbols)
WORDS = {"PE", "LN", "MHA", "FFN", "relu", "softmax", "attend", "out", "sublayer", "LayerNorm", "mask", "argmax",
         "BLEU", "KV", "GPT", "BERT", "ISO"}
TOKEN = re.compile(
    r"\\(?:mathbf|boldsymbol|mathcal)\{\\?[A-Za-z]+\}"   # \mathbf{x}, \boldsymbol{\alpha}, \mathcal{L}
    r"|\\[A-Za-z]+"                                      # \alpha, \omega, \exp
    r"|[A-Za-z]+"                                        # a letter, or a run of letters
    r"|\\.|.", re.S)
SCRIPT = re.compile(r"\s*([_^])\s*(\{(?:[^{}]|\{[^{}]*\})*\}|\\[A-Za-z]+|[A-Za-z0-9])")
INDEX_LETTERS = set("ijtcbnmuslk")
# letters whose subscripts are names: widths and lengths (d_k, T_x), weights and biases (W_Q, b_out), a vocabulary
NAMED_BASES = {"d", "T", "W", "b", "\\mathcal{V}"}
NAME_SUPERSCRIPTS = {"dec", "enc", "\\ast", "*"}


def _strip(tex):
    """Drop what is words, not symbols: \\text{...} and its kin, and the arguments of \\begin/\\end."""
    tex = re.sub(r"([_^])\s*\\(?:text|mathrm)\s*\{([A-Za-z]+)\}", r"\1{\2}", tex)  # T_\text{past}: a name
    tex = re.sub(r"\\(?:text|mathrm|texttt|operatorname|textbf|emph)\s*\{(?:[^{}]|\{[^{}]*\})*\}", " @ ", tex)
    tex = re.sub(r"\\(?:begin|end)\{[a-z]+\}", " ", tex)
    return tex.replace("'", "")


def _inner(script):
    return script[1:-1] if script.startswith("{") else script


def _is_index(sub):
    """A subscript that picks an entry: a digit, an index letter, or an expression of them ({t-1}, {<t}, {ij},
    {T_x}, {2c+1}, {(i)})."""
    s = _inner(sub).strip()
    return bool(re.fullmatch(r"[0-9]+|[A-Za-z]", s) or "\\le" in s or "\\ge" in s or s in INDEX_LETTERS
                or re.search(r"[-+<>=(),]", s) or re.fullmatch(r"[ijtcbnmuslk]{2,}|[ijtcbnmuslk]'", s)
                or re.fullmatch(r"T_\{?[a-z]+\}?|[0-9][a-z]", s))


def symbols(tex, names=frozenset()):
    """[(key, written)] for every symbol of a LaTeX string. ``names``: the keys the notation page defines with a
    subscript that is a name (W_1 is a name where x_1 is an index)."""
    tex = _strip(tex)
    out, pos = [], 0
    while pos < len(tex):
        m = TOKEN.match(tex, pos)
        tok, pos = m.group(0), m.end()
        if tok.startswith("\\") and not tok.startswith(("\\mathbf{", "\\boldsymbol{", "\\mathcal{")):
            if tok[1:] in NOT_SYMBOLS or not tok[1:].isalpha():
                continue
        elif tok == "@" or tok in WORDS:  # a word (\\text{out}), and the scripts it takes (out_i)
            while SCRIPT.match(tex, pos):
                pos = SCRIPT.match(tex, pos).end()
            continue
        elif re.fullmatch(r"[A-Za-z]{2,}", tok):
            # a run of letters is a product of symbols (QK^\top): its last letter takes the scripts that follow
            for letter in tok[:-1]:
                out.append((letter, letter))
            tok = tok[-1]
        elif not re.fullmatch(r"[A-Za-z]|\\.*", tok):
            continue
        key, written, indexed = tok, tok, False
        while True:
            s = SCRIPT.match(tex, pos)
            if not s:
                break
            kind, script = s.group(1), s.group(2)
            written += kind + script
            pos = s.end()
            compound = f"{key}{kind}{_inner(script)}"
            if kind == "_":
                if compound in names or tok in NAMED_BASES or (not _is_index(script) and not compound.startswith("e_")):
                    key = compound
                else:
                    indexed = True
            elif _inner(script) in NAME_SUPERSCRIPTS or compound in names:
                key = compound
        after = re.sub(r"^\s*\\(?:big|Big|bigl|left)\s*", "", tex[pos:pos + 12])
        if after[:1] == "(" and key not in NAMED_BASES:  # a function applied: e(x_t), P(x), P_\theta\big(...)
            key, indexed = key + "(·)", False
        out.append((key + ("_•" if indexed else ""), written))
    return out


def math_of(markdown):
    """[(tex, statement)] for every piece of mathematics of a markdown text, each with the line it stands in."""
    found = []
    for m in MATH.finditer(markdown):
        tex = m.group(1) or m.group(2)
        start = markdown.rfind("\n", 0, m.start()) + 1
        end = markdown.find("\n", m.end())
        found.append((tex, markdown[start:end if end >= 0 else None].strip()))
    return found


def defined_by(cell):
    """The keys a notation page's symbols cell defines: the first symbol of each piece of mathematics ($e_i$,
    $e(x_t)$; $\\mathbf{x} = (x_1, \\dots)$ defines bold x only)."""
    keys = []
    for tex, _ in math_of(cell):
        found = symbols(tex.split("=")[0])
        keys += [found[0][0]] if found else []
    return keys


def mentioned(page):
    """The keys the page's last section names as other texts' symbols ("Bahdanau et al. write $s$ for ...")."""
    part = page[page.find("## Where the literature"):]
    return {key for tex, _ in math_of(part) for key, _ in symbols(tex)}


def page_rows(page):
    """The notation page's rows: [(section heading, symbols cell, from cell)] of every table."""
    rows, heading = [], ""
    for line in page.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|") and not re.match(r"\|\s*-", line) and not line.startswith("| symbol"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
            if cells and heading and not line.startswith("| word"):
                rows.append((heading, cells[0], cells[-1]))
    return rows
