"""What a learner reads points somewhere real: every "Next" names the notebook that comes next, every notebook
named in the prose exists, every function or module named in backticks exists (in the notebook, in the course's
exercises, in the course's modules or in PyTorch), and every link opens a file of the course."""
import ast
import builtins
import glob
import importlib
import math
import os
import re

import nbformat
import pytest
import torch

from coursekit.sync import assignment_of, source_notebooks
from learner.check import EXERCISES

NOTEBOOKS = source_notebooks()
IDS = [os.path.basename(p) for p in NOTEBOOKS]
NUMBERS = [assignment_of(p).split("_")[0] for p in NOTEBOOKS]  # "01", ..., "05", "05b", ..., "10"

# the names a notebook's code binds to modules (its set-up cell and its own imports)
ROOTS = {"torch": torch, "F": torch.nn.functional, "nn": torch.nn, "math": importlib.import_module("math")}
for module in ("data", "transformer", "plots", "blocks", "widgets", "drawings", "training"):
    ROOTS[module] = importlib.import_module(f"learner.{module}")
ROOTS["capstone"] = importlib.import_module("learner.capstone_runs")  # as notebook 10 imports it
ROOTS["rnn"] = importlib.import_module("learner.rnn_models")  # as notebooks 05 and 05b import it
ROOTS["learner"] = importlib.import_module("learner")


def markdown(path):
    return [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]


def code_names(path):
    """Every name the notebook's code cells bind: functions, classes, their arguments, assignments, imports."""
    names = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
    return names


def _resolve(dotted):
    """The object a dotted name of the course's code means (torch.where, data.make_batch, learner.rnn_models.Seq2Seq,
    nn.MultiheadAttention, F.cross_entropy, ...), or None."""
    root, *rest = dotted.split(".")
    obj = ROOTS.get(root)
    for part in rest:
        if obj is None:
            return None
        obj = getattr(obj, part, None)
        if obj is None and root == "learner":  # a submodule not imported yet
            try:
                obj = importlib.import_module(dotted[:dotted.index(part) + len(part)])
            except ImportError:
                return None
    return obj


def _torch_names():
    """The argument names of PyTorch's functions and module classes, and the attributes of the modules the course
    compares its functions with (``in_proj_weight``, ``self_attn``, ``bias_ih``, ...)."""
    import inspect
    names = set()
    for owner in (torch, torch.nn.functional, torch.nn):
        for value in vars(owner).values():
            try:
                names |= set(inspect.signature(value).parameters)
            except (TypeError, ValueError):
                pass
    for module in (torch.nn.MultiheadAttention(4, 2), torch.nn.TransformerEncoderLayer(4, 2),
                   torch.nn.TransformerDecoderLayer(4, 2), torch.nn.RNNCell(2, 2), torch.nn.RNN(2, 2),
                   torch.nn.GRU(2, 2), torch.nn.LSTM(2, 2), torch.nn.Linear(2, 2), torch.nn.LayerNorm(2)):
        names |= set(dir(module)) | {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_modules()}
    return names


def _corpus():
    """Every identifier and string literal of the course's learner modules (learner), and of every notebook's code:
    the keys of the course's dicts (``tgt_out``, ``W_h_dec``), its file names and its formats count as defined."""
    import glob
    import tokenize
    words = set()
    files = glob.glob(os.path.join(os.path.dirname(ROOTS["learner"].__file__), "**", "*.py"), recursive=True)
    for path in files:
        with open(path, "rb") as f:
            for tok in tokenize.tokenize(f.readline):
                if tok.type == tokenize.NAME:
                    words.add(tok.string)
                elif tok.type == tokenize.STRING:
                    words |= set(re.findall(r"[\w.]+", tok.string))
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code":
                words |= set(re.findall(r"[\w.]+", cell.source))
    return words


TORCH_NAMES, CORPUS = _torch_names(), _corpus()


def _exists(name, defined):
    """Whether a name in backticks names something a learner can find: in the notebook's code, among the course's
    exercises, in its modules (a function, a class, a key of its dicts, a file it writes) or in PyTorch."""
    base = name.split("(")[0]
    if "." in base:
        root = base.split(".")[0]
        if root in ROOTS:
            return _resolve(base) is not None
        if root in defined or root in CORPUS:  # an object of a notebook (model.encode): its class is the course's
            attr = base.split(".")[-1]
            return (any(hasattr(cls, attr) for cls in _course_classes()) or hasattr(torch.Tensor, attr)
                    or hasattr(torch.nn.Module, attr) or base in CORPUS)
        return base in CORPUS
    return (base in defined or base in EXERCISES or base in dir(builtins) or hasattr(torch, base)
            or hasattr(torch.Tensor, base) or hasattr(torch.nn.functional, base) or hasattr(torch.nn, base)
            or any(hasattr(m, base) for m in ROOTS.values()) or base in TORCH_NAMES or base in CORPUS)


def _course_classes():
    from learner import capstone_runs as capstone, rnn_models as rnn, transformer
    return [obj for m in (rnn, transformer, capstone) for obj in vars(m).values() if isinstance(obj, type)]


CALLS = re.compile(r"`([A-Za-z_][\w.]*)(\([^`]*\))?`")


def _named_functions(text):
    """The names in backticks that are code: a call (`f(...)`), a dotted name, or a snake_case identifier."""
    text = re.sub(r"\$[^$]*\$", "", text)  # not the mathematics
    out = []
    for name, call in CALLS.findall(text):
        if call or "." in name or "_" in name.strip("_"):
            out.append(name.rstrip("."))
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_function_named_in_the_prose_exists(path):
    defined = code_names(path)
    missing = sorted({name for text in markdown(path) for name in _named_functions(text)
                      if not _exists(name, defined)})
    assert not missing, f"{os.path.basename(path)} names what neither it nor the course defines: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_named_in_the_prose_exists(path):
    named = set()
    for text in markdown(path):
        for first, more in re.findall(r"[Nn]otebooks? (\d\db?)((?:\s*(?:[–-]|to|,|and)\s*\d\db?)*)", text):
            named |= {first} | set(re.findall(r"\d\db?", more))
    assert named <= set(NUMBERS), f"{os.path.basename(path)} names notebooks {sorted(named - set(NUMBERS))}"


@pytest.mark.parametrize("k", range(len(NOTEBOOKS)), ids=IDS)
def test_every_next_names_the_notebook_that_comes_next(k):
    """A notebook's "**Next:**" (every notebook but the last has one) names the next notebook first."""
    nexts = [m for text in markdown(NOTEBOOKS[k]) for m in re.findall(r"\*\*Next[^*]*\*\*[^\n]*(?:\n[^\n]+)*", text)]
    if k == len(NOTEBOOKS) - 1:
        assert not nexts
        return
    assert len(nexts) == 1, f"{IDS[k]} has {len(nexts)} Next paragraphs"
    first = re.search(r"notebook (\d\db?)", nexts[0])
    assert first and first.group(1) == NUMBERS[k + 1], f"{IDS[k]}'s Next: {nexts[0][:200]!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_link_opens_a_file_of_the_course_and_the_introduction_links_the_notation_page(path):
    texts = markdown(path)
    assert "](../notation.md)" in texts[0], f"{os.path.basename(path)}'s introduction does not link the notation page"
    for text in texts:
        for target in re.findall(r"\]\(([^)]+)\)", text):
            if target.startswith(("http://", "https://", "#")):
                continue
            assert os.path.exists(os.path.join(os.path.dirname(path), target)), (os.path.basename(path), target)


def test_the_notation_page_names_only_what_the_course_defines():
    """Every function, module name and key the notation page names exists, and so does every notebook it names."""
    page = open(os.path.join(os.path.dirname(NOTEBOOKS[0]), "..", "notation.md")).read()
    missing = sorted({name for name in _named_functions(page) if not _exists(name, set())})
    assert not missing, missing
    for row in re.findall(r"\| (\d\db?(?:, \d\db?)*(?: to \d\db?)?) \|$", page, re.M):
        assert set(re.findall(r"\d\db?", row)) <= set(NUMBERS), row


def test_the_checks_catch_a_name_that_does_not_exist():
    """The checker is not a rubber stamp: a made-up function, a made-up module function and a notebook that does not
    exist are caught; the course's own names are found."""
    prose = "Call `greedy_decoder(context)`, then `data.make_dates()` and `learner.rnn_models.Seq2Seq`; see notebook 11."
    names = _named_functions(prose)
    assert names == ["greedy_decoder", "data.make_dates", "learner.rnn_models.Seq2Seq"]
    assert [_exists(n, set()) for n in names] == [False, False, True]
    assert _exists("greedy_decode", set()) and _exists("data.make_batch", set()) and not _exists("run_encoder", set())
    assert "11" not in NUMBERS


# ---------------------------------------------------------------- "section N", and "notebook N" in the check messages
# (issue 52, item 1; about 1 s): the helpers read the notebooks by number, as test_claims.py does
from test_claims import CASES, cells, code, constant  # noqa: E402
from test_claims import NOTEBOOKS as BY_NUMBER  # noqa: E402

def sections(number):
    """{N: the text of section N of a notebook, its heading first}."""
    out, current = {}, None
    for cell in cells(number):
        if cell.cell_type != "markdown":
            continue
        for part in re.split(r"(?m)^(?=## )", cell.source):
            head = re.match(r"## (\d+)\s*[·.]", part)
            if head:
                current = head.group(1)
            if current:
                out[current] = out.get(current, "") + part
    return out


# Each "section N" of a notebook's prose and of the check messages, with a word the section it names must hold: the
# reference is to that topic, not only to a heading that exists. Every reference found must be listed.
TOPICS = {
    ("01", "pad in section 4"): "padding", ("01", "tensor (section 4)"): "padding",
    ("02", "Section 5 shows both effects"): "softmax",
    ("04", "batch from section 3"): "padded batch",
    ("05", "section 9 measures how far they reach"): "gradient", ("05", "section 10 shows one"): "beam",
    ("05", "section 9 measures how far it reaches"): "gradient",
    ("05b", "section 2 says why"): "square root", ("05b", "unequal, section 6"): "looked",
    ("06", "that section 4 trains"): "train", ("06", "in section 3: 2 blocks"): "block",
    ("06", "Section 5 trains two models"): "sinusoidal",
    ("07", "that section 3 trains"): "GPT", ("07", "section 1's"): "causal", ("07", "the mask of section 1"): "mask",
    ("07", "greedy loop of section 3"): "translat",
    ("08", "sizes section 5 trains"): "Training", ("08", "once per token (section 4)"): "Greedy",
    ("08", "(section 4 makes that count)"): "once",
    ("10", "you run section 4"): "runs", ("10", "Section 6 prints"): "predictions",
    ("10", "date ends (section 1)"): "ends every line",
    ("08", "sub-layer adds its output bias: section 7 runs it"): "source off",
}
# references that are wrong where another developer edits now, each with the issue that fixes it
KNOWN = {}


def _references():
    """[(notebook, key of TOPICS, the section named)] of every notebook's prose and of every check message."""
    found = []
    for number in BY_NUMBER:
        for cell in cells(number):
            if cell.cell_type == "markdown":
                for m in re.finditer(r"(?<!notes' )(?<!page, )\b[Ss]ections? (\d+)(?![–-]\d)", cell.source):
                    found.append((number, m.group(1), cell.source, m))
    for path in sorted(glob.glob(os.path.join(CASES, "*.py"))):
        source = open(path).read()
        number = re.search(r"[Nn]otebook (\d\db?)", source)
        texts = [n.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        joined = "".join(texts)
        for m in re.finditer(r"\b[Ss]ection (\d+)", joined):
            found.append((number.group(1), m.group(1), joined, m))
    out = []
    for number, section, text, m in found:
        around = text[max(0, m.start() - 60):m.end() + 40]
        key = next((k for k in TOPICS if k[0] == number and k[1] in " ".join(around.split())
                    and re.search(rf"[Ss]ections? {section}\b", k[1])), None)
        out.append((number, section, key, " ".join(around.split())))
    return out


def test_every_section_a_learner_is_sent_to_is_the_one_on_that_topic():
    wrong = []
    for number, section, key, around in _references():
        if "notes" in around.split(f"ection {section}")[0][-40:]:
            continue  # the notes' own sections
        if key is None:
            wrong.append(f"{number}: {around!r} names section {section}: add it to TOPICS with the word its section holds")
            continue
        body = sections(number).get(section, "")
        if TOPICS[key].lower() not in body.lower():
            if key not in KNOWN:
                wrong.append(f"{number}: {around!r}: section {section} ({body[:60]!r}) is not about {TOPICS[key]!r}")
        elif key in KNOWN:
            wrong.append(f"{number}: {around!r} is right now: remove it from KNOWN")
    assert not wrong, "\n".join(wrong)


def test_the_section_check_catches_a_wrong_reference():
    """Section 5 of notebook 08 is training, not the empty source: the topic check tells them apart."""
    assert "source off" not in sections("08")["5"].lower() and "source off" in sections("08")["7"].lower()
    assert math.isclose(10000 ** (-2 / 64), 0.75, abs_tol=0.005)


# ---------------------------------------------------------------- "notebook N" in the check messages
def _message_texts():
    """{cases module: its string constants joined} of learner/check/cases (the messages a learner reads)."""
    out = {}
    for path in sorted(glob.glob(os.path.join(CASES, "*.py"))):
        tree = ast.parse(open(path).read())
        out[os.path.basename(path)] = " ".join(n.value for n in ast.walk(tree)
                                               if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return out


def test_every_notebook_a_check_message_names_exists_and_holds_what_it_names():
    """A message's "notebook NN" is a notebook of the course; "notebook NN's <exercise>" is an exercise of that
    notebook; and the 09 translator a case names has the sizes notebook 09 builds it with."""
    from learner.syllabus import NOTEBOOKS as TABLE
    owner = {name: nb.folder.split("_")[0] for nb in TABLE.values() for name in nb.exercises}
    wrong = []
    for module, text in _message_texts().items():
        for number, name in re.findall(r"[Nn]otebooks? (\d\db?)(?:'s (\w+))?", text):
            if number not in BY_NUMBER:
                wrong.append(f"{module}: notebook {number} does not exist")
            elif name in owner and owner[name] != number:
                wrong.append(f"{module}: notebook {number}'s {name} is notebook {owner[name]}'s")
    assert not wrong, "\n".join(wrong)
    m = re.search(r"notebook 09's translator \((\d+) layers, (\d+) heads of (\d+), (\d+) positions", _message_texts()[
        "kv_cache.py"])
    sizes = constant("09", "SIZES")
    assert m and (sizes["n_layers"], sizes["n_heads"], sizes["d_model"] // sizes["n_heads"]) == tuple(
        map(int, m.groups()[:3])) and f"max_len={m.group(4)}" in code("09"), m and m.group(0)


# ---------------------------------------------------------------- "the grader" is the grading machine only
# What a learner reads calls what tests their functions "the checks" (``learner.check``); "grader" is the grading
# machine's package (``grader/``) and nbgrader, nothing else (issue 54: one name, one meaning).
GRADER_WORD = re.compile(r"(?<![\w`./])graders?(?![\w`/]|\.\w)", re.I)  # "grader." ends a sentence


def learner_texts():
    """[(where, text)]: each notebook's cells (prose and code), and every string and comment of the learner's side
    (``learner/``: messages, docstrings, the checks' cases)."""
    import io
    import tokenize
    out = []
    for path in NOTEBOOKS:
        for k, cell in enumerate(nbformat.read(path, as_version=4).cells):
            out.append((f"{os.path.basename(path)} cell {k}", cell.source))
    from coursekit import ROOT
    for path in sorted(glob.glob(os.path.join(ROOT, "learner", "**", "*.py"), recursive=True)):
        text = open(path, encoding="utf-8").read()
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.STRING, tokenize.COMMENT) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                out.append((f"{os.path.relpath(path, ROOT)}:{tok.start[0]}", tok.string))
    return out


def grader_words(texts):
    return [f"{where}: ...{text[max(0, m.start() - 40):m.end() + 40]!r}..." for where, text in texts
            for m in GRADER_WORD.finditer(re.sub("nbgrader", "NBG", text, flags=re.I))]


def test_what_a_learner_reads_says_the_checks_not_the_grader():
    texts = learner_texts()
    assert len(texts) > 500, len(texts)  # the notebooks and the learner's modules were read
    assert grader_words(texts) == []


def test_the_grader_word_is_found_and_the_package_and_nbgrader_are_not():
    texts = [("a", "the grader checks it"), ("b", "The grader's toy model"), ("c", "nbgrader's autograde"),
             ("d", "``grader.remote``"), ("e", "the grading machine (`grader`)"), ("f", "grader/sandbox.py"),
             ("g", "ask the grader."), ("h", "as graders do")]
    assert [w.split(":")[0] for w in grader_words(texts)] == ["a", "b", "g", "h"]
