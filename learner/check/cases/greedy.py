"""One contract of greedy decoding for the whole course (notebooks 05, 08 and 09), checked by the same cases and
property wherever a learner writes greedy decoding."""

from .common import Case, learner_call, nested, tensor_in


# ---------------------------------------------------------------- greedy decoding: one contract (05, 08, 09)
GREEDY_CONTRACT = ("at most max_len tokens are written after <bos> (or after the prompt), a row's <eos> included; a "
                   "row that has written <eos> holds 0 (<pad>) from then on; the loop stops as soon as every row has "
                   "written <eos>, or after max_len tokens; max_len = 0 writes nothing, a (B, 0) result; max_len < 0 "
                   "is a ValueError")


def greedy_contract_broken(rows, eos_id, max_len):
    """How greedy decoding's tokens ``rows`` (a list of B lists of ints, all of one length L) break the course's one
    contract (``GREEDY_CONTRACT``), in words, or None. Notebooks 05, 08 and 09 check their decoders with it."""
    L = len(rows[0]) if rows else 0
    if L > max_len:
        return f"it wrote {L} tokens with max_len={max_len}: write at most max_len tokens, <eos> included"
    ends = []
    for b, row in enumerate(rows):
        if eos_id in row:
            at = row.index(eos_id)
            if any(t != 0 for t in row[at + 1:]):
                return (f"row {b} wrote {row[at + 1:]} after its <eos> (token {at + 1} of {L}): a row that has written "
                        f"<eos> holds 0 (<pad>) from then on")
            ends.append(at + 1)
        else:
            ends.append(None)
    if rows and all(e is not None for e in ends) and L != max(ends):
        return (f"every row had written <eos> after {max(ends)} tokens, yet it wrote {L}: stop as soon as every row "
                f"has written <eos>")
    if rows and any(e is None for e in ends) and L != max_len:
        row = ends.index(None)
        return (f"it stopped after {L} tokens while row {row} had not written <eos> and max_len={max_len}: stop only "
                f"when every row has written <eos>, or after max_len tokens")
    return None


def greedy_contract_cases(call, mixed, never, at_once):
    """The contract's edge cases, in the same words in notebooks 05, 08 and 09. ``call(model, max_len)`` gives a
    case's (args, kwargs); ``mixed`` is a model whose rows write <eos> at different steps, every row before 20
    tokens, ``never`` one that never writes <eos>, ``at_once`` one that writes it first."""
    return [Case("max_len = 0: nothing to write, an empty (B, 0) result", *call(mixed, 0)),
            Case("max_len = 1: one token", *call(mixed, 1)),
            Case("rows that write <eos> at different steps, all before max_len = 20: 0 (<pad>) after each row's "
                 "<eos>, and the loop stops when the last row has written its <eos>", *call(mixed, 20)),
            Case("a model that never writes <eos> stops at max_len = 7", *call(never, 7)),
            Case("a model that writes <eos> first: one token, (B, 1)", *call(at_once, 5)),
            Case("max_len = -1: an error", *call(mixed, -1), raises="ValueError")]


def greedy_contract_property(call, models, eos_id, item=None):
    """A property: the learner's decoder keeps ``GREEDY_CONTRACT`` with each of ``models`` ((what, model) pairs) at
    max_len 1, 3 and 20. ``call(model, max_len)`` gives (args, kwargs); ``item`` picks the tokens from a returned
    pair (05's greedy_decode returns (tokens, log_prob))."""
    def keeps_the_contract(fn):
        for what, model in models:
            for max_len in (1, 3, 20):
                args, kwargs = call(model, max_len)
                out = learner_call(fn, args, kwargs)
                tokens = None if out is None else tensor_in(out.value, item=item, dim=2)
                if tokens is None:
                    return None  # reported by the case checks
                wrong = greedy_contract_broken(nested(tokens), eos_id, max_len)
                if wrong:
                    return f"the contract of greedy decoding, with {what}: {wrong}"
        return None
    keeps_the_contract.__doc__ = f"The contract of greedy decoding: {GREEDY_CONTRACT}."
    return keeps_the_contract
