"""Compute the visible checks' expected outputs from the reference and ship them.

    python -m coursekit.expected            # write learner/check/expected/<exercise>.pt
    python -m coursekit.expected --check    # exit 1 when a shipped file is stale or missing

Each file holds, for the parts "basic" and "edge", every case's inputs, the
reference's output (or the message of the error it raises) and the output of
every known mistake, so learners' machines need no reference to run them.
"""
import argparse
import io
import sys

import torch

from grader.reference import resolve
from learner.check import EXERCISES, expected_path, read_expected
from learner.check.cases import visible_cases
from learner.check.cases.common import digest_of
from learner.check.compare import compare
from learner.check.runner import is_raised, raised

from .words import counted

FORMAT = 2  # 2: bad input's cases are a part of their own, errors


def build_one(name):
    ex = EXERCISES[name]
    ref = resolve(ex.ref)
    parts = {}
    for part in ("basic", "edge", "errors"):
        records = []
        for case in visible_cases(ex, part):
            try:
                expected, message = ref(*case.args, **case.kwargs), ""
            except Exception as exc:
                if not case.raises or type(exc).__name__ != case.raises:
                    raise RuntimeError(f"{name}/{part}: the reference raised {exc!r} on {case.what!r}") from exc
                expected, message = None, str(exc)
            else:
                if case.raises:
                    raise RuntimeError(f"{name}/{part}: the reference should raise {case.raises} on {case.what!r}")
            outs = {}
            for mname, _ in ex.mistakes:
                mistake = resolve(mname, "solutions.mistakes")
                try:
                    outs[mname] = None if case.raises else mistake(*case.args, **case.kwargs)
                except Exception as exc:  # what it raises names it when a learner's function raises the same
                    outs[mname] = raised(exc)
            if ex.answer is not None:  # a question ships digests, never the answers
                expected = digest_of(ex, expected)
                outs = {m: None if out is None or is_raised(out) else digest_of(ex, out) for m, out in outs.items()}
            records.append({"what": case.what, "args": case.args, "kwargs": case.kwargs, "raises": case.raises,
                            "expected": expected, "message": message, "mistakes": outs})
        parts[part] = records
    return {"format": FORMAT, "exercise": name, "torch": torch.__version__.split("+")[0], "parts": parts}


def _serialise(data):
    buf = io.BytesIO()
    torch.save(data, buf)
    return buf.getvalue()


def stale(name, fresh=None):
    """Why the shipped file for ``name`` disagrees with the reference (``fresh``: its outputs, built now), or None."""
    import os
    path = expected_path(name)
    if not os.path.exists(path):
        return "missing"
    shipped = read_expected(path)
    fresh = fresh or build_one(name)
    if shipped.get("format") != FORMAT:
        return "old format"
    for part in ("basic", "edge", "errors"):
        a, b = shipped["parts"][part], fresh["parts"][part]
        if len(a) != len(b):
            return f"{part}: {len(a)} shipped cases, {len(b)} now"
        for i, (ra, rb) in enumerate(zip(a, b)):
            for key in ("what", "raises", "message"):
                if ra[key] != rb[key]:
                    return f"{part} case {i}: {key} differs"
            for key in ("args", "kwargs", "expected"):
                m = compare(rb[key], ra[key], key)
                if m is not None:
                    return f"{part} case {i} ({rb['what']}): {m.text}"
            if set(ra["mistakes"]) != set(rb["mistakes"]):
                return f"{part} case {i}: the list of known mistakes changed"
            for mname in rb["mistakes"]:
                if (ra["mistakes"][mname] is None) != (rb["mistakes"][mname] is None) or (
                        rb["mistakes"][mname] is not None and compare(rb["mistakes"][mname], ra["mistakes"][mname])):
                    return f"{part} case {i}: the output of mistake {mname} changed"
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report stale or missing files")
    args = parser.parse_args(argv)
    bad = 0
    for name in EXERCISES:
        if args.check:
            why = stale(name)
            if why:
                bad += 1
                print(f"stale: {name}: {why}")
        else:  # only what changed is written: torch.save of equal outputs is not byte for byte the same
            fresh = build_one(name)
            if stale(name, fresh):
                with open(expected_path(name), "wb") as f:
                    f.write(_serialise(fresh))
                print(f"wrote {expected_path(name)}")
    if args.check:
        print("expected outputs are up to date" if not bad else f"{counted(bad, 'stale file')}: run `python -m coursekit.expected`")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
