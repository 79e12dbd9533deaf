"""The mutation search: the checks of every exercise run on every mutant of its reference (``tests/mutants.py``).

    .venv/bin/python tests/mutant_search.py                      # every exercise: writes tests/solutions/mutants.json
    .venv/bin/python tests/mutant_search.py --exercise softmax   # only these exercises, merged into the record

Each mutant runs in a process of its own (forked, ``--jobs`` at a time, stopped after ``--limit`` seconds), so a
hanging or state-changing mutant costs only itself. It is judged on the visible parts first (basic, edge, errors:
cheap, against the shipped outputs); only a mutant none of them catches goes on to the hidden parts (hidden-basic,
hidden-errors, hidden: the live reference), up to the first that fails. Outcomes:

* ``caught-named``   a failing part's message names a known mistake (``named``: its explanation; ``mistakes``: the
                     known mistakes with that explanation; ``named_part``; ``message``: what the learner reads first);
* ``caught-values``  it fails, and no failing message names a known mistake;
* ``not-caught``     every part passes (``reason``: "equivalent: ..." where a review found it so, ``EQUIVALENT``; what
                     it did unseen for the seed and device operators, ``UNSEEN``; none: a real miss);
* ``error``          the mutant does not compile, or the checks themselves crashed on it (``message``);
* ``timeout``        the process ran past ``--limit``.

``part`` is the first part that failed (the cheapest that tells: the test replays it); ``parts`` what each part run
said; ``seconds`` the mutant's time in the search. The record is sorted by id, one mutant a line. Mutants of the
device operators are judged here on the CPU too (the hidden part's meta-device probe), marked ``"device": "cuda"``.
The whole search took 15 min with 2 jobs on a 2-core machine.
"""
import argparse
import contextlib
import io
import json
import os
import re
import select
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":  # run as a script: the project and tests/ on the path, as pytest's conftest has them
    sys.path[:0] = [os.path.dirname(HERE), HERE]

from learner.check import EXERCISES, CheckFailed, check, parts_of  # noqa: E402
from mutants import DEVICE_OPERATORS, OPERATORS, all_mutants, compile_mutant, exercise_names  # noqa: E402

RECORD = os.path.join(HERE, "solutions", "mutants.json")
VISIBLE = ("basic", "edge", "errors")
HIDDEN = ("hidden-basic", "hidden-errors", "hidden")
NAMED = re.compile(r"(?:This looks like a known mistake|matches a known mistake): (.+)\.$", re.M)

# mutants the review found equivalent to the reference on every input the exercise allows: id -> why
_SIZE_ONE = "the indexed axis has size 1, so index 0 and -1 are the same element"
_SQUARE = "W_h is square (d_h, d_h): its shape[0] and shape[1] are equal"
_PADDING_ID = "the id written into padding positions is never read (masked out afterwards)"
_GUARDED = "the final torch.where already gives 0 where nothing is allowed (a NaN there is never selected)"
_ZERO_TOTAL = "where total is 0, e is 0 too, so e / tiny is already 0"
_ALREADY = "the value already has that dtype"
_LATER_CHECK = "the same bad input raises the same ValueError a line later (in a function it calls)"
_DEFAULT_DIM = "the default dim is -1 already"
_ANY_DTYPE = "the text fixes no dtype for the pairs: float32's variances are as right, within its rounding"
# what a mutant of these operators that passes has done unseen (not an equivalent: a side effect or a device slip)
UNSEEN = {"seed": "a side effect: the caller's global random state changed, every output the same",
          "device-drop": "on a CPU the tensor lands on the right device; a GPU (or the meta-device probe of the "
                         "hidden part, where the function runs on meta tensors) tells"}
EQUIVALENT = {
    "additive_score:int-1:25:93": "u is 1-D: shape[0] is shape[-1]",
    "dot_score:int-1:21:46": _SIZE_ONE, "lm_log_prob:int-1:32:92": _SIZE_ONE,
    "masked_lm_loss:int-1:22:57": _SIZE_ONE, "sample_next:int-1:35:55": _SIZE_ONE,
    "translation_loss:int-1:18:68": _SIZE_ONE,
    "rnn_cell:int+1:21:53": _SQUARE, "rnn_cell:int-1:21:37": _SQUARE, "rnn_cell:int-1:21:53": _SQUARE,
    "rnn_encode:int+1:31:20": _SQUARE, "rnn_encode:int-1:31:20": _SQUARE,
    "rnn_encode:int+1:33:41": _PADDING_ID, "rnn_encode:int-1:33:41": _PADDING_ID,
    "seq2seq_loss:int+1:29:45": _PADDING_ID, "sequence_log_prob:int+1:25:45": _PADDING_ID,
    "softmax:fill-drop:25:8": _GUARDED + " (the gradient of an all -inf row becomes NaN: the checks test no gradient)",
    "log_softmax:fill-drop:20:8": "an all -inf row gives NaN in z - m, and the final where turns it into -inf",
    "masked_attention:fill-drop:38:8": _GUARDED,
    "softmax:fill-drop:28:11": _ZERO_TOTAL, "masked_attention:fill-drop:41:14": _ZERO_TOTAL,
    "softmax:compare-bound:28:23": _ZERO_TOTAL, "softmax:int-1:28:31": _ZERO_TOTAL,
    "masked_attention:compare-bound:41:26": _ZERO_TOTAL, "masked_attention:int-1:41:34": _ZERO_TOTAL,
    "masked_attention:dim-other:37:69": "the branch runs only when T_k = 0: the result is empty either way",
    "masked_attention:int+1:24:23": "T_q is only used in an error message",
    "masked_attention:int+1:37:51": "with one key its sum is its max",
    "multi_head_attention:add-drop:31:20": "a key bias adds q . b_k to every score of a row: softmax ignores it",
    "multi_head_attention:int+1:34:24": _LATER_CHECK,
    "pad_batch:dtype-kw:19:61": "written into a long tensor, so cast back to long",
    "pad_batch:int-1:13:25": "max() of an empty batch raises ValueError too",
    "pad_batch:dtype-long:21:11": _ALREADY, "greedy_decode:dtype-long:50:11": _ALREADY,
    "greedy_generate:dtype-long:51:11": _ALREADY, "greedy_translate:dtype-long:40:11": _ALREADY,
    "sample_next:dtype-long:35:11": _ALREADY,
    "greedy_decode:dtype-kw:34:42": "prev only indexes the embedding; the output is built apart, in long",
    "rope:dtype-kw:27:48": "positions are small integers, exact in float32; times the float64 omega gives float64",
    "sinusoidal_positions:dtype-kw:15:30": "positions are small integers, exact in float32; promoted to float64",
    "rope_attention:compare-bound:22:7": _LATER_CHECK, "rope_attention:int+1:22:18": _LATER_CHECK,
    "rope_attention:int+1:22:39": _LATER_CHECK, "rope_attention:int-1:22:18": _LATER_CHECK,
    "rope_attention:int-1:22:39": _LATER_CHECK, "rope_attention:int-1:22:62": _LATER_CHECK,
    "top_k_filter:compare-bound:20:7": "k = V keeps every logit on the general path too",
    "top_k_filter:dim-drop:22:10": _DEFAULT_DIM, "top_p_filter:dim-drop:26:26": _DEFAULT_DIM,
    "sample_next:int+1:35:36": "the first of two draws (without replacement) is the one draw, from the same "
                               "generator (PyTorch's CPU sampler)",
    "beam_search:int-1:62:57": "differs only for a hypothesis of no tokens, which is never ranked",
    "split_heads:int-1:18:17": "n_heads = 0 raises ZeroDivisionError at D % n_heads instead: an error either way, "
                               "and the text asks for none in particular (H must divide D)",
    "score_variance:dtype-kw:15:53": _ANY_DTYPE, "score_variance:dtype-kw:16:53": _ANY_DTYPE,
}


def search_order(name):
    """The exercise's parts in the order the search runs them: visible, then hidden."""
    parts = parts_of(name)
    return [p for p in VISIBLE + HIDDEN if p in parts]


def names_in(name, message):
    """(explanation, [known mistakes with it]) of the first known mistake ``message`` names, else (None, [])."""
    found = NAMED.findall(message)
    if not found:
        return None, []
    why = found[0]
    return why, sorted(m for m, w in EXERCISES[name].mistakes if w == why)


def run_part(fn, name, part):
    """None when ``fn`` passes ``part``, else the failure's message."""
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            check(name, fn, part)
        except CheckFailed as exc:
            return str(exc)
    return None


def judge(mutant):
    """The mutant's outcome record (without its time), run in this process."""
    rec = {"id": mutant.id, "exercise": mutant.exercise, "operator": mutant.operator, "diff": mutant.diff}
    if mutant.device:
        rec["device"] = "cuda"
    try:
        fn = compile_mutant(mutant)
    except Exception as exc:  # a mutant that does not compile (or whose cell raises)
        return dict(rec, outcome="error", message=f"compile: {type(exc).__name__}: {exc}"[:300])
    parts = {}
    failed = []
    for part in search_order(mutant.exercise):
        if failed and part in HIDDEN:
            break
        try:
            message = run_part(fn, mutant.exercise, part)
        except Exception as exc:  # the checks crashed: a bug of theirs, reported as such
            return dict(rec, outcome="error", parts=parts, message=f"check crashed on {part}: "
                                                                    f"{type(exc).__name__}: {exc}"[:300])
        parts[part] = "passed" if message is None else "failed"
        if message is not None:
            failed.append((part, message))
            if part in HIDDEN:
                break
    if not failed:
        rec.update(outcome="not-caught", parts=parts)
        if mutant.id in EQUIVALENT:
            rec["reason"] = "equivalent: " + EQUIVALENT[mutant.id]
        elif mutant.operator in UNSEEN:
            rec["reason"] = UNSEEN[mutant.operator]
        return rec
    named = [(part, message, *names_in(mutant.exercise, message)) for part, message in failed]
    hit = next((n for n in named if n[2]), None)
    part, message, why, which = hit or named[0]
    if hit:
        parts[part] = "named"
    rec.update(outcome="caught-named" if hit else "caught-values", part=failed[0][0], parts=parts)
    if hit:  # what the learner reads, kept where it names a mistake (to review the name)
        rec.update(named=why, mistakes=which, named_part=part, message=_head(message))
    return rec


def _head(message, n=300):
    """The failure's first three lines (each cut at ``n`` characters) and the line that names a known mistake: what
    the learner reads first, for the record."""
    lines = message.splitlines()
    keep = [line if len(line) <= n else line[:n - 3] + "..." for line in lines[:3]]
    keep += [line.strip() for line in lines[3:] if NAMED.search(line)][:1]
    return "\n".join(keep)


# ---------------------------------------------------------------- forked runs
def _child(mutant, wfd):
    import torch
    torch.set_num_threads(1)
    try:
        rec = judge(mutant)
    except BaseException as exc:  # noqa: BLE001 (anything: the parent must hear of it)
        rec = {"id": mutant.id, "outcome": "error", "message": f"search: {type(exc).__name__}: {exc}"[:300]}
    os.write(wfd, json.dumps(rec).encode())
    os.close(wfd)
    os._exit(0)


def run_forked(mutants, jobs=2, limit=240.0, progress=None):
    """{id: record} of every mutant, each judged in a forked process of its own, ``jobs`` at a time."""
    pending = list(mutants)
    running = {}  # read fd -> (pid, mutant, started, chunks)
    done = {}
    while pending or running:
        while pending and len(running) < jobs:
            m = pending.pop(0)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                _child(m, w)
            os.close(w)
            running[r] = (pid, m, time.monotonic(), [])
        ready, _, _ = select.select(list(running), [], [], 1.0)
        now = time.monotonic()
        for fd in list(running):
            pid, m, started, chunks = running[fd]
            if fd in ready:
                data = os.read(fd, 1 << 16)
                if data:
                    chunks.append(data)
                    continue
                os.close(fd)
                os.waitpid(pid, 0)
                del running[fd]
                try:
                    rec = json.loads(b"".join(chunks))
                except ValueError:
                    rec = {"id": m.id, "outcome": "error", "message": "the search's process died without a record"}
            elif now - started > limit:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                os.close(fd)
                del running[fd]
                rec = {"id": m.id, "exercise": m.exercise, "operator": m.operator, "diff": m.diff,
                       "outcome": "timeout", "message": f"stopped after {limit:g} s"}
            else:
                continue
            rec.setdefault("exercise", m.exercise)
            rec.setdefault("operator", m.operator)
            rec.setdefault("diff", m.diff)
            rec["seconds"] = round(time.monotonic() - started, 1)
            done[m.id] = rec
            if progress:
                progress(rec, len(done))
    return done


# ---------------------------------------------------------------- the record
def read_record(path=RECORD):
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return {r["id"]: r for r in json.load(f)}


def write_record(records, path=RECORD):
    rows = [records[k] for k in sorted(records)]
    with open(path, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in rows) + "\n]\n")


def summary(records):
    """Counts by outcome, and by operator and outcome, as text."""
    outcomes = ("caught-named", "caught-values", "not-caught", "error", "timeout")
    by_op = {}
    for r in records.values():
        by_op.setdefault(r["operator"], {}).setdefault(r["outcome"], 0)
        by_op[r["operator"]][r["outcome"]] += 1
    lines = [f"{'operator':16}" + "".join(f"{o:>15}" for o in outcomes) + f"{'total':>8}"]
    for op in sorted(by_op, key=lambda o: list(OPERATORS).index(o)):
        row = by_op[op]
        lines.append(f"{op:16}" + "".join(f"{row.get(o, 0):>15}" for o in outcomes) + f"{sum(row.values()):>8}")
    totals = {o: sum(r["outcome"] == o for r in records.values()) for o in outcomes}
    lines.append(f"{'all':16}" + "".join(f"{totals[o]:>15}" for o in outcomes) + f"{len(records):>8}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--exercise", nargs="*", help="only these exercises (merged into the record)")
    p.add_argument("--operator", nargs="*", help="only these operators (merged into the record)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--limit", type=float, default=240.0, help="seconds a mutant may run")
    p.add_argument("--out", default=RECORD)
    p.add_argument("--no-device", action="store_true", help=f"leave out {', '.join(DEVICE_OPERATORS)}")
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    names = args.exercise or exercise_names()
    ms = [m for m in all_mutants(names) if (not args.operator or m.operator in args.operator)
          and not (args.no_device and m.device)]
    started = time.monotonic()
    print(f"{len(ms)} mutants of {len(names)} exercises, {args.jobs} at a time", flush=True)

    def progress(rec, n):
        print(f"[{n}/{len(ms)} {time.monotonic() - started:.0f}s] {rec['id']}: {rec['outcome']}"
              + (f" ({rec['named']})" if rec.get("named") else ""), flush=True)
    found = run_forked(ms, jobs=args.jobs, limit=args.limit, progress=progress)
    record = read_record(args.out)
    if args.exercise or args.operator:  # merged: the searched exercises' old entries replaced
        record = {k: v for k, v in record.items() if not (v["exercise"] in names and
                                                          (not args.operator or v["operator"] in args.operator))}
    else:
        record = {}
    record.update(found)
    write_record(record, args.out)
    print(summary(found))
    print(f"{len(found)} mutants in {time.monotonic() - started:.0f} s; record: {args.out}")


if __name__ == "__main__":
    main()
