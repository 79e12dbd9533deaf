"""Every line printed from a student's input is inert (grader.plain.inert, InertStream): names and fields are
generated (hypothesis) from what a terminal, a log reader or a spreadsheet acts on (escape sequences, carriage
returns, newlines, bells, C1 controls, direction overrides, line separators, bytes that are not UTF-8) mixed with
ordinary text and with the very words the summaries print, and each printer must show them escaped, one record a
line. The end-to-end case runs `course collect`'s collect on an exchange whose folders and files carry generated
names, then its summary through the course command's own output. Cost: about 6 s (the release of one assignment
is most of it; marked pipeline, as it drives nbgrader)."""
import datetime
import io
import json
import os
import re
import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coursekit.exchange import _name_refused
from coursekit.grading import Problem, Summary, print_summary
from coursekit.inbound import Found
from grader.plain import InertStream, inert

ACTING = {"Cc", "Cf", "Zl", "Zp", "Cs"}
# the pieces an attacker writes with: escape sequences that erase, retitle and recolour, line breaks, a forged
# record, a direction override, a surrogate standing for a byte that is not UTF-8
PIECES = ["\x1b[2K", "\x1b[1A", "\x1b]0;owned\x07", "\x1b[31m", "\x9b2J", "\r", "\n", "\n  REFUSED: nothing\n",
          "\x07", "\x00", "\u202e", "\u2028", "\u0085", "\x7f", "\udcff", "\t", "\x08"]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(min_size=1, max_size=6)), min_size=1,
                   max_size=8).map("".join)


def acting(text):
    return [ch for ch in text if unicodedata.category(ch) in ACTING]


@given(hostile)
def test_inert_shows_every_acting_character_escaped_on_one_line(text):
    shown = inert(text)
    assert acting(shown) == [] and "\n" not in shown
    kept = "".join(ch for ch in text if unicodedata.category(ch) not in ACTING)
    assert re.sub(r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[nrt])", "", shown) == re.sub(
        r"\\(x[0-9a-f]{2}|u[0-9a-f]{4}|[nrt])", "", kept)  # the rest kept, in order


@given(hostile)
def test_the_course_commands_output_never_carries_an_acting_character_but_newlines_and_tabs(text):
    raw = io.StringIO()
    InertStream(raw).write(text)
    assert [ch for ch in acting(raw.getvalue()) if ch not in "\n\t"] == []


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(hostile, st.sampled_from(["root", "nobody", "daemon", None]),
                          st.sampled_from(["root", "nobody", None])), min_size=1, max_size=40))
def test_collects_refusals_are_one_inert_line_each_and_the_forged_ones_come_first(entries):
    kinds = ["forged" if student and owner != student else "own" if student else "rest"
             for _, student, owner in entries]
    refused = [Found(name, student=student, owner=owner, problem=f"{kind}: {name}")
               for (name, student, owner), kind in zip(entries, kinds)]
    lines = []
    _name_refused(refused, lambda line: lines.extend(inert(line).split("\n")))
    assert all(line.startswith("  REFUSED: ") and not acting(line) for line in lines), lines
    said = [re.search(r"\): (forged|own|rest): |more folders owned by \S+ (claiming|of)?", line) for line in lines]
    order = [m.group(1) or {"claiming": "forged", "of": "own", None: "rest"}[m.group(2)] for m in said]
    assert order == sorted(order, key=["forged", "own", "rest"].index), lines  # claims on others' names first
    for kind in ("forged", "own", "rest"):  # each named, or counted past ten of one owner
        assert order.count(kind) >= min(kinds.count(kind), 1)
    assert len(lines) <= len(entries)


@given(st.lists(st.tuples(hostile, hostile, hostile), min_size=1, max_size=10))
def test_the_grading_summary_is_one_inert_line_per_record(records):
    summary = Summary(graded={(s, a): 1.0 for s, a, _ in records},
                      problems=[Problem(s, a, why) for s, a, why in records],
                      faults=[(s, a, "crash", why) for s, a, why in records])
    out = io.StringIO()
    print_summary(summary, "/nonexistent-course", out=out)
    lines = out.getvalue().splitlines()
    assert not any(acting(line) for line in lines)
    # a header, a column line, a line per score, a count and a line per problem, a count and a line per fault, seeds
    assert len(lines) == 1 + 1 + len(summary.graded) + 1 + len(records) + 1 + len(records) + 1, lines


@pytest.mark.pipeline
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(names=st.lists(hostile.filter(lambda n: "/" not in n and "\x00" not in n and n not in (".", "..")),
                      min_size=1, max_size=4, unique=True),
       field=hostile, broken=st.booleans())
def test_course_collect_prints_what_students_named_inert(released, names, field, broken, capsys):
    """Collect an exchange where student root's submission holds extra notebooks with generated names and a
    notebook whose nbformat field is generated, beside folders with generated names: every line collect prints,
    through the course command's own output, is free of acting characters, and each refusal is one line."""
    from coursekit import exchange
    from coursekit.cli import inert_output
    root, inbound = released
    for entry in os.listdir(inbound):
        _remove(os.path.join(inbound, entry))
    stamp = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=1)
    good = os.path.join(inbound, f"root+03_softmax+{stamp:%Y-%m-%d %H:%M:%S.%f} UTC")
    os.mkdir(good)
    with open(os.path.join(root, "release", "03_softmax", "03_softmax.ipynb")) as f:
        notebook = json.load(f)
    with open(os.path.join(good, "03_softmax.ipynb"), "w") as f:
        json.dump(dict(notebook, nbformat=field) if broken else notebook, f)  # "not a valid notebook: <field>"
    for name in names:
        with open(os.path.join(good, name + ".ipynb"), "w") as f:
            json.dump(dict(notebook, nbformat=field), f)
        os.mkdir(os.path.join(inbound, name))  # a folder whose name does not parse
    capsys.readouterr()
    with inert_output():
        exchange.collect(root, "03_softmax")
    said = capsys.readouterr().out
    assert [ch for ch in acting(said) if ch not in "\n"] == [], repr(said)
    assert sum(line.startswith("  REFUSED: ") for line in said.splitlines()) == len(names), said
    assert not any(line.lstrip().startswith("REFUSED: nothing") for line in said.splitlines()), said
    if broken:
        assert "NOT GRADED: root / 03_softmax" in said, said


def _remove(path):
    import shutil
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A course folder with 03_softmax released to an exchange of its own; (course folder, its inbound)."""
    from coursekit import exchange
    from coursekit.pipeline import CourseCopy
    folder = tmp_path_factory.mktemp("inert")
    root = os.path.join(str(folder), "course")
    CourseCopy(root)
    os.environ["COURSE_EXCHANGE"] = os.path.join(str(folder), "exchange")
    try:
        exchange.release(root, "03_softmax")
        yield root, os.path.join(str(folder), "exchange", "attention-course", "inbound")
    finally:
        os.environ.pop("COURSE_EXCHANGE", None)
