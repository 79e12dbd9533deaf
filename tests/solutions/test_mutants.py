"""The mutation search's record (``tests/solutions/mutants.json``) replayed: what the checks caught stays caught.

``tests/mutants.py`` makes every exercise's mutants (its reference with one slip, by a named operator);
``tests/mutant_search.py`` ran the checks on each and recorded the outcome: caught-named (the message names a known
mistake), caught-values (it fails without naming one), not-caught, error. These tests fail when

* the record no longer matches the mutants the reference gives (an exercise or its reference changed): rerun the
  search on that exercise, ``.venv/bin/python tests/mutant_search.py --exercise NAME``;
* a mutant recorded as caught now passes the part that caught it (a check was weakened: a false pass);
* a mutant's failure on that part names another known mistake than recorded, or one where none was, or none where
  one was (a hint changed: if the new one is right, rerun the search on the exercise to record it).

Cost: the search's record holds 1173 mutants, 1030 of them caught; replaying one runs every case of the part that
caught it (and the known mistakes on each failing case). Every caught mutant took 109 s on this 2-core machine when
it was quiet (load 2) and several times that when it was busy, so these tests replay a deterministic stratified part
of it by default: every mutant whose failure names a known mistake, and of each operator the caught mutant that was
quickest in the search (its id breaks a tie), each on the one part that first caught it (named: the part that named
it), in this process: 15 s quiet (making the mutants is 6 s of it; 40 s busy). ``COURSE_MUTANTS=all`` replays every
caught mutant. The mutants of the ``device`` operators run only under the ``cuda`` mark, on a GPU. Busy, the module
takes over 20 s, so it is marked ``experiment``: ``make test`` runs it, ``make test-fast`` leaves it out.
"""
import os

import pytest
import torch

from mutant_search import RECORD, names_in, read_record, run_part
from mutants import all_mutants, compile_mutant, exercise_names

_RECORD = read_record()
CAUGHT = ("caught-named", "caught-values")


def _by_exercise(select):
    out = {}
    for r in _RECORD.values():
        if r["outcome"] in CAUGHT and select(r):
            out.setdefault(r["exercise"], []).append(r["id"])
    return out


def _stratum(records):
    """Every named mutant, and of each operator the caught mutant quickest in the search."""
    quickest = {}
    for r in sorted(records.values(), key=lambda r: (r.get("seconds", 0.0), r["id"])):
        if r["outcome"] in CAUGHT and "device" not in r:
            quickest.setdefault(r["operator"], r["id"])
    return {r["id"] for r in records.values() if r["outcome"] == "caught-named"} | set(quickest.values())


ALL = os.environ.get("COURSE_MUTANTS") == "all"
STRATUM = _stratum(_RECORD)
REPLAYED = _by_exercise(lambda r: "device" not in r and (ALL or r["id"] in STRATUM))
DEVICE = _by_exercise(lambda r: "device" in r)
pytestmark = pytest.mark.experiment


@pytest.fixture(scope="module")
def current():
    """{id: mutant} as tests/mutants.py makes them now."""
    return {m.id: m for m in all_mutants()}


def replay(ids, current):
    """["id: what went wrong"] for each recorded mutant of ``ids`` whose replayed part disagrees with the record."""
    problems = []
    for mid in ids:
        rec, m = _RECORD[mid], current.get(mid)
        if m is None or m.diff != rec["diff"]:
            problems.append(f"{mid}: the reference no longer gives this mutant ({rec['diff']}): rerun the search")
            continue
        part = rec.get("named_part") or rec["part"]
        state = torch.random.get_rng_state()
        try:
            message = run_part(compile_mutant(m), m.exercise, part)
        finally:
            torch.random.set_rng_state(state)  # the seed operator's mutants change it
        if message is None:
            problems.append(f"{mid}: recorded {rec['outcome']} on [{part}], now passes it ({m.diff})")
            continue
        why, _ = names_in(m.exercise, message)
        if why != rec.get("named"):
            problems.append(f"{mid}: [{part}] recorded {rec.get('named')!r}, now names {why!r} ({m.diff})")
    return problems


def test_the_record_lists_every_mutant_the_reference_gives_now(current):
    """Ids and edits of the record equal tests/mutants.py's (a changed reference or operator: rerun the search)."""
    assert _RECORD, f"no record at {RECORD}: run tests/mutant_search.py"
    stale = sorted(set(_RECORD) ^ set(current))
    changed = sorted(k for k in set(_RECORD) & set(current) if _RECORD[k]["diff"] != current[k].diff)
    assert not stale and not changed, (f"rerun tests/mutant_search.py --exercise ... for: missing or new "
                                       f"{stale[:20]}, changed {changed[:20]}")
    assert {r["exercise"] for r in _RECORD.values()} == set(exercise_names())


@pytest.mark.parametrize("exercise", sorted(REPLAYED))
def test_caught_mutants_stay_caught_and_keep_their_known_mistakes_name(exercise, current):
    """The exercise's replayed mutants (see Cost above), each on the part that caught it."""
    assert replay(REPLAYED[exercise], current) == []


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("exercise", sorted(DEVICE))
def test_device_mutants_stay_caught_on_a_gpu(exercise, current):
    """Mutants that make a tensor on the CPU (device= dropped): with a GPU the hidden parts run there too; the
    record was made on the CPU, where the hidden part's meta-device probe catches them."""
    assert replay(DEVICE[exercise], current) == []
