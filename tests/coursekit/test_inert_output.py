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

from coursekit.exchange.commands import REFUSALS_SHOWN_PER_OWNER, REFUSALS_SHOWN_PER_STUDENT, refusal_lines
from coursekit.grading import Problem, Summary, print_summary
from coursekit.exchange.inbound import Found
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
@given(entries=st.lists(st.tuples(hostile, st.sampled_from(["ann", "bo", "carl", None]),
                                  st.sampled_from(["ann", "bo", "mal", None])), min_size=1, max_size=40),
       flood=st.integers(0, 3000))
def test_collects_refusals_are_inert_lines_and_no_flood_hides_a_claim_or_a_students_own(entries, flood):
    """A flood of junk (up to 3,000 folders of one owner) beside generated entries: every line inert, the folders
    claiming to be a roster student's and each student's own refused ones named before the rest (which is summed
    up), and the number of lines bounded by the roster, not by the flood."""
    roster = {"ann", "bo"}
    kinds = ["claim" if student in roster and owner != student else "own" if student and owner == student
             else "rest" for _, student, owner in entries]
    refused = [Found(name, student=student, owner=owner, problem=f"{kind}: {name}")
               for (name, student, owner), kind in zip(entries, kinds)]
    refused += [Found(f"junk{i:05d}", owner="mal", problem="rest: junk") for i in range(flood)]
    refused += [Found(f"carl+A+{i}", student="carl", owner="mal", problem="rest: not on the roster")
                for i in range(flood)]  # claims on a name of no one on the roster: junk too
    telling, rest = refusal_lines(refused, roster)
    lines = [piece for line in telling + rest for piece in inert(line).split("\n")]
    assert all(line.startswith("  REFUSED: ") and not acting(line) for line in lines), lines
    first = [inert(line) for line in telling]
    for kind in ("claim", "own"):  # each student claimed, and each with a refused folder of their own: named first
        for student in {student for (_, student, _), k in zip(entries, kinds) if k == kind}:
            names = [inert(n) for (n, s, _), k in zip(entries, kinds) if k == kind and s == student]
            assert any(f"): {kind}: {n}" in line for line in first for n in names), (student, first)
    assert [line for line in first if "): rest: " in line] == []
    students, owners = 2 + 1, 3 + 1  # ann, bo, (carl, own) ... / ann, bo, mal, None
    assert len(telling) <= 2 * students * (REFUSALS_SHOWN_PER_STUDENT + 1)
    assert len(rest) <= owners * (REFUSALS_SHOWN_PER_OWNER + 1)


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
    from coursekit.exchange import commands as exchange
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
    from coursekit.exchange import commands as exchange
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
