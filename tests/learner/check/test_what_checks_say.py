"""What a check says to a learner whose answer is wrong in a way learners are (issue 62, the learner's whole course).

* a forbidden approach fails, fast and without the check building what the approach would (score_variance scoring
  every query against every key);
* a hint names the known mistake the learner's output matches, not another one that gives the same output on one
  case (gather with the padding ids is not "the padding was counted"; sorting without mapping back is not "added up
  in token order"; a slip whose output another mistake gives where the sizes coincide is not named after it), and a
  dtype message says the rule of that output (a mask is bool);
* likely mistakes are named, not only shown as values (no W.T, no shift inside exp, no axis for the positions);
* a time-out is told as it happened (waiting or computing, where, how long), and stops the check there;
* the other failing cases' errors are named; a function that reseeds PyTorch's global generator is caught.

Cost: about 25 s (two time-outs of a fraction of a second each; the rest is checks of small functions).
"""
import re
import textwrap
import time

import pytest
from torch.overrides import TorchFunctionMode

from coursekit.sync import solution_source
from helpers import failure, learner_namespace
from learner.check import EXERCISES, CheckFailed, check, parts_of, safe
from learner.check.cases.common import RANDOM_STATE


def edited(name, *edits):
    """The reference of ``name`` with each (old, new) of ``edits`` replaced, every time it occurs."""
    src = solution_source(name)
    for old, new in edits:
        assert old in src, f"the reference of {name} no longer holds {old!r}"
        src = src.replace(old, new)
    return src


def answer(name, src):
    """``src`` (exercise ``name``'s answer cell) compiled as its notebook runs it, after the other answers."""
    return learner_namespace(EXERCISES[name].notebook, {name: src})[name]


def mistake_text(name, mistake):
    """The words exercise ``name``'s check says for its known mistake ``mistake`` ("<topic>:<function>")."""
    return dict(EXERCISES[name].mistakes)[mistake]


def messages(name, fn, parts=("basic", "edge")):
    out = []
    for part in parts:
        try:
            check(name, fn, part)
        except CheckFailed as exc:
            out.append(str(exc))
    return out


class Largest(TorchFunctionMode):
    """The number of elements of the largest tensor any torch function returns while it is active (the check's own
    tensors and the learner's: the innermost mode hands its calls on to this one)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, safe.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


# ---------------------------------------------------------------- 1. score_variance: one score per pair
ALL_PAIRS = {
    "matrix": ("raw = (q * k).sum(-1)", "raw = q @ k.T"),
    "its diagonal": ("raw = (q * k).sum(-1)", "raw = (q @ k.T).diagonal()"),  # the right values, the wrong way
    "broadcast": ("raw = (q * k).sum(-1)", "raw = (q[:, None, :] * k[None, :, :]).sum(-1)"),
}


@pytest.mark.parametrize("edit", list(ALL_PAIRS))
def test_scoring_every_query_against_every_key_fails_fast_without_a_big_tensor(edit):
    """The notebook rules out all n_pairs x n_pairs combinations: the check says so within a second of computing,
    and neither it nor the learner's function makes a tensor over a million numbers (at the default 20000 pairs
    the matrix holds 400 million, 3.2 GB: the check used to take 57 s over it, and passed it)."""
    fn = answer("score_variance", edited("score_variance", ALL_PAIRS[edit]))
    sizes, cpu = Largest(), time.process_time()
    with sizes:
        msg = failure("score_variance", fn, "basic")
    cpu = time.process_time() - cpu
    assert mistake_text("score_variance", "dot_products:score_variance_all_pairs") in msg, msg
    assert "made a tensor of" in msg and "n_pairs x n_pairs" in msg
    assert cpu < 1.0 and sizes.largest <= 10 ** 6, (cpu, sizes.largest)


def test_score_variances_basic_cell_takes_under_a_second_of_computing_with_the_reference(learner):
    """The graded basic cell runs the basic part and, at grading, the hidden-basic part: with the reference both
    take under a second of CPU time together (they took about one before, mostly 20000 pairs at d_k = 256)."""
    cpu = time.process_time()
    for part in ("basic", "hidden-basic"):
        check("score_variance", learner["score_variance"], part)
    assert time.process_time() - cpu < 1.0


UNUSED = {
    "the scores from q alone": (("raw = (q * k).sum(-1)", "raw = q.sum(-1)"), "not of the products of q and k"),
    "the scores from k alone": (("raw = (q * k).sum(-1)", "raw = k.sum(-1)"), "(k.sum(-1)), not of the products"),
    "the seed ignored": (("manual_seed(seed)", "manual_seed(0)"), "gave the same variances for seed=3 and seed=4"),
    "a default changed": (("n_pairs=20000, seed=0", "n_pairs=20000, seed=1"), "keep the signature's defaults"),
}


@pytest.mark.parametrize("slip", list(UNUSED))
def test_a_score_variance_that_ignores_an_argument_or_k_fails_with_what_it_ignored(slip):
    """Slips no statistic tells from the right answer (the variance of q.sum(-1) is d_k too; any seed gives about
    d_k): the check compares exact values where the text fixes them (the seed's draws, the defaults)."""
    edit, told = UNUSED[slip]
    msg = failure("score_variance", answer("score_variance", edited("score_variance", edit)), "basic")
    assert told in msg, msg


# slips a fresh attack found passing every part (each fails here without its case or its check)
CROSS_ENTROPY_AFTER = '''
    import torch.nn.functional as F
    def {name}({args}):
        nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        {tail}
'''
PASSED_BEFORE = {
    "sequence_log_prob": (CROSS_ENTROPY_AFTER.format(name="sequence_log_prob", args="logits, targets, mask=None",
                          tail="return -(nll if mask is None else nll * mask).sum(-1)"), "Target 999 is out of bounds"),
    "seq2seq_loss": (CROSS_ENTROPY_AFTER.format(name="seq2seq_loss", args="logits, targets, mask=None",
                     tail="return (nll if mask is None else nll * mask).sum() / logits.shape[0]"),
                     "Target 999 is out of bounds"),
    "masked_lm_loss": (CROSS_ENTROPY_AFTER.format(name="masked_lm_loss", args="logits, targets, is_masked",
                       tail="return (nll * is_masked).sum() / is_masked.sum().clamp_min(1)"),
                       "Target 999 is out of bounds"),
    "pad_batch": ('''
        def pad_batch(sequences, pad_id=0):
            if len(sequences) == 0:
                raise ValueError("an empty batch")
            T = max(len(s) for s in sequences)
            mask = [[True] * len(s) + [False] * (T - len(s)) for s in sequences]
            for s in sequences:
                s.extend([pad_id] * (T - len(s)))
            return torch.tensor(sequences, dtype=torch.long), torch.tensor(mask, dtype=torch.bool)
    ''', "it changed its input `sequences["),
    "top_p_filter": (edited("top_p_filter", ("if p == 1:", "if False:")),
                     "p = 1 with a token of tiny probability, float32"),
    "beam_search": (edited("beam_search", ("length_norm=False):", "length_norm=True):")),
                    "length_norm left out: its default is False"),
}


@pytest.mark.parametrize("name", list(PASSED_BEFORE))
def test_slips_that_passed_every_part_fail_now(name):
    """Cross-entropy on the raw targets, masked afterwards, passed where padding held only -100 (which
    F.cross_entropy skips by default): padding may hold any id, and 999 is one. A pad_batch that pads the caller's
    lists in place (lists were not compared after the call); top-p without its p = 1 return, on a token whose mass
    before it rounds to 1 in float32; beam search with another default for length_norm."""
    src, told = PASSED_BEFORE[name]
    msgs = messages(name, answer(name, textwrap.dedent(src)))  # the visible parts, basic and edge
    assert any(told in m for m in msgs), msgs


def test_a_reseeding_function_is_caught_where_the_callers_state_was_seeded_with_the_same_number():
    """A learner's notebook that ran torch.manual_seed(0) and drew nothing since: a function that calls
    torch.manual_seed(0) leaves that state as it was, and passed in a test process that had done the same (CI's
    replay of the seed mutant). Each call now starts from a state no constant seed gives, and the caller's state is
    put back after it."""
    import torch
    fn = answer("score_variance", edited("score_variance", ("    g = torch.Generator().manual_seed(seed)",
                                                            "    torch.manual_seed(0)\n"
                                                            "    g = torch.Generator().manual_seed(seed)")))
    torch.manual_seed(0)
    before = torch.get_rng_state()
    msg = failure("score_variance", fn, "basic")
    assert RANDOM_STATE in msg, msg
    assert torch.equal(torch.get_rng_state(), before)


def test_the_callers_random_state_is_put_back_when_the_call_exits():
    """SystemExit is not the learner's error to report: it leaves safe.call, and the caller's state is back."""
    import torch

    def reseed_and_exit():
        torch.manual_seed(0)
        raise SystemExit(3)
    torch.manual_seed(5)
    torch.rand(2)
    before = torch.get_rng_state()
    with pytest.raises(SystemExit):
        safe.call(reseed_and_exit)
    assert torch.equal(torch.get_rng_state(), before)


# ---------------------------------------------------------------- 2. the mistake named is the one the output matches
GATHERS_PADDING = {
    "sequence_log_prob": (("targets = targets.masked_fill(~mask, 0)", "targets = targets"),
                          "softmax:sequence_log_prob_gathers_padding", "softmax:sequence_log_prob_ignores_mask"),
    "lm_log_prob": (("torch.where(real, nxt, torch.zeros_like(nxt))[..., None]", "nxt[..., None]"),
                    "decoder:lm_log_prob_gathers_padding", "decoder:lm_log_prob_counts_padding"),
}


@pytest.mark.parametrize("name", list(GATHERS_PADDING))
def test_gather_with_the_padding_ids_is_named_as_such_not_as_padding_counted(name):
    """Masked, but the padding ids went into gather: the case whose padding holds an id out of range raises, as
    "padding counted" would too; the learner's function is right where padding holds a valid id, where "padding
    counted" is wrong, so that mistake is not named, and the one it made is."""
    edit, made, not_made = GATHERS_PADDING[name]
    msg = failure(name, answer(name, edited(name, edit)), "edge")
    assert "out of bounds" in msg
    assert mistake_text(name, made) in msg and mistake_text(name, not_made) not in msg, msg


def test_counting_the_padding_is_still_named_where_the_output_matches_it():
    msg = "\n".join(messages("sequence_log_prob", answer("sequence_log_prob", edited(
        "sequence_log_prob", ("targets = targets.masked_fill(~mask, 0)", "mask = None"))), ("basic",)))
    assert mistake_text("sequence_log_prob", "softmax:sequence_log_prob_ignores_mask") in msg, msg


NOT_SCATTERED = ("keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)", "keep = keep_sorted")
UNSORTED = ("probs.sort(dim=-1, descending=True, stable=True)",
            "(probs, torch.arange(probs.shape[-1]).expand(probs.shape))")


@pytest.mark.parametrize("edit,made,not_made", [
    (NOT_SCATTERED, "decoder:top_p_filter_not_scattered_back", "decoder:top_p_filter_unsorted"),
    (UNSORTED, "decoder:top_p_filter_unsorted", "decoder:top_p_filter_not_scattered_back")],
    ids=["sorted, not mapped back", "not sorted"])
def test_top_p_sorted_but_not_mapped_back_is_told_apart_from_not_sorted(edit, made, not_made):
    said = messages("top_p_filter", answer("top_p_filter", edited("top_p_filter", edit)))
    assert said and all(mistake_text("top_p_filter", not_made) not in m for m in said), said
    assert any(mistake_text("top_p_filter", made) in m for m in said), said


# a learner's slip that masks the padding before indexing, as the answer must: a known mistake written without that
# (it would raise on padding of 999) was refuted in the edge part, and named in basic only
MASKED_FIRST = '''
    import torch.nn.functional as F
    def {name}(logits, targets, {mask}):
        real = torch.ones_like(targets, dtype=torch.bool) if {mask_name} is None else {mask_name}
        nll = F.cross_entropy(logits.transpose(1, 2), targets.masked_fill(~real, 0), reduction="none")
        return {tail}
'''
NAMED_IN_EDGE_TOO = {
    "seq2seq_loss averaged over the real tokens": (
        "seq2seq_loss", dict(mask="mask=None", mask_name="mask", tail="(nll * real).sum() / real.sum()"),
        "rnn:seq2seq_loss_mean_over_tokens"),
    "seq2seq_loss not divided by N": (
        "seq2seq_loss", dict(mask="mask=None", mask_name="mask", tail="(nll * real).sum()"),
        "rnn:seq2seq_loss_not_divided"),
    "masked_lm_loss summed": (
        "masked_lm_loss", dict(mask="is_masked", mask_name="is_masked", tail="(nll * real).sum()"),
        "encoder:masked_lm_loss_sum"),
}


@pytest.mark.parametrize("slip", list(NAMED_IN_EDGE_TOO))
def test_a_loss_slip_that_masks_before_indexing_is_named_in_the_edge_part_too(slip):
    name, fill, made = NAMED_IN_EDGE_TOO[slip]
    said = messages(name, answer(name, textwrap.dedent(MASKED_FIRST.format(name=name, **fill))))
    assert len(said) == 2 and all(mistake_text(name, made) in m for m in said), said


# a slip whose output another known mistake gives on some failing case, and not on the others: not named after it
COINCIDENCES = {
    "n_heads dropped (32 layers and 32 heads in the first case)": (
        "kv_cache_bytes", [("2 * n_layers * batch * n_heads * ", "2 * n_layers * batch * ")],
        "kv_cache:kv_cache_bytes_one_layer"),
    "NaN on an all -inf row (torch.softmax): no overflow": (
        "softmax", [("    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # all -inf slice: avoid inf - inf\n",
                     ""), ("torch.where(total > 0, e / total.clamp_min(torch.finfo(e.dtype).tiny), torch.zeros_like(e))",
                           "e / total")],
        "softmax:softmax_no_max_subtraction"),
    "the mask one short of each sequence (inverted where a sequence has one token)": (
        "pad_batch", [("mask[b, :len(seq)] = True", "mask[b, :len(seq) - 1] = True")], "tokens:pad_batch_mask_inverted"),
}


@pytest.mark.parametrize("which", list(COINCIDENCES))
def test_a_mistake_that_another_failing_case_contradicts_is_not_named(which):
    """Each slip fails, and on one failing case its output is a known mistake's; on another failing case it is not,
    so that mistake is not named (the rule of ``Report._most_shared_mistake``; CI's mutant search had 45 such names)."""
    name, edits, not_made = COINCIDENCES[which]
    said = messages(name, answer(name, edited(name, *edits)), ("basic", "edge", "hidden-basic"))
    assert said, f"the slip passed {name}'s checks"
    assert all(mistake_text(name, not_made) not in m for m in said), said


def test_a_filter_that_filters_nothing_is_told_so():
    said = messages("top_k_filter", answer("top_k_filter", edited(
        "top_k_filter", ("return logits.masked_fill(logits < kth, float(\"-inf\"))", "return logits.clone()"))))
    assert said and all(mistake_text("top_k_filter", "decoder:top_k_filter_unchanged") in m for m in said), said


def test_a_mask_of_numbers_is_told_that_a_mask_is_bool():
    """pad_batch's inputs are lists of ints: "keep the dtype of the inputs" is no rule for its bool mask."""
    fn = answer("pad_batch", edited("pad_batch", ("mask = torch.zeros((len(sequences), T), dtype=torch.bool)",
                                                  "mask = torch.zeros((len(sequences), T), dtype=torch.long)")))
    msg = failure("pad_batch", fn, "basic")
    assert "expected torch.bool (a mask must be torch.bool, whatever the dtype of the inputs" in msg, msg
    assert "keep the dtype of the inputs" not in msg


# ---------------------------------------------------------------- 3. likely mistakes, named
LIKELY = {
    "project_qkv without .T": ("project_qkv", edited("project_qkv", ("@ W_Q.T", "@ W_Q"), ("@ W_K.T", "@ W_K"),
                                                     ("@ W_V.T", "@ W_V")), "dot_products:project_qkv_no_transpose"),
    "log_softmax without any shift": ("log_softmax", '''
def log_softmax(x, dim=-1, temperature=1.0):
    if not temperature > 0:
        raise ValueError("temperature must be > 0")
    z = x / temperature
    return z - torch.log(torch.exp(z).sum(dim=dim, keepdim=True))
''', "softmax:log_softmax_no_shift"),
    "log_softmax shifted outside exp only": ("log_softmax", edited("log_softmax", ("torch.exp(z - m)", "torch.exp(z)")),
                                             "softmax:log_softmax_shift_outside_exp"),
    "additive_score without [:, None, :]": ("additive_score", edited("additive_score", ("query[:, None, :]", "query")),
                                            "rnn_attention:additive_score_no_new_axis"),
}


@pytest.mark.parametrize("which", list(LIKELY))
def test_a_likely_mistake_is_named_not_only_shown_as_values(which):
    name, src, mistake = LIKELY[which]
    said = messages(name, answer(name, src))
    assert said, f"{which} passed"
    assert any(mistake_text(name, mistake) in m for m in said), said


# ---------------------------------------------------------------- 4. exact words: a hang, other errors, random state
def test_a_function_that_waits_is_told_it_waited_and_for_how_long(monkeypatch):
    """Stopped on the clock at 3 times the limit: the message gives that time, not the limit of computing."""
    monkeypatch.setattr(safe, "DEFAULT_TIME_LIMIT", 0.3)
    fn = answer("softmax", "import time\ndef softmax(x, dim=-1, temperature=1.0):\n    time.sleep(60)\n")
    start = time.monotonic()
    msg = failure("softmax", fn, "basic")
    waited = time.monotonic() - start
    said = re.search(r"did not finish within (\d+) s on the clock and was stopped in `softmax`", msg)
    assert said and "waiting, not computing" in msg and "of computing" not in msg, msg
    assert abs(int(said.group(1)) - waited) < 1.0, (said.group(1), waited)


def test_a_hang_in_a_helper_costs_one_time_limit_and_says_where(monkeypatch):
    """sample_next calls the learner's top_k_filter, which loops: the check stops at the first time-out (it used
    to go on to check the helpers, waiting a limit for each one that hangs) and names the function it stopped in."""
    monkeypatch.setattr(safe, "DEFAULT_TIME_LIMIT", 0.3)
    outcomes, call = [], safe.call

    def counted(*args, **kwargs):
        outcomes.append(call(*args, **kwargs))
        return outcomes[-1]
    monkeypatch.setattr(safe, "call", counted)
    ns = learner_namespace("07_decoder", {"top_k_filter": "def top_k_filter(logits, k):\n    while True:\n"
                                                          "        pass\n"})
    msg = failure("sample_next", ns["sample_next"], "edge")
    assert sum(o.timed_out for o in outcomes) == 1, msg
    assert "did not finish within 0.3 s of computing and was stopped in `top_k_filter`" in msg, msg


def test_the_other_failing_cases_name_their_error():
    fn = answer("softmax", '''
def softmax(x, dim=-1, temperature=1.0):
    if x.dim() == 1:
        raise KeyError("boom")
    return torch.zeros_like(x)
''')
    msg = failure("softmax", fn, "edge")
    first = re.search(r"First failure, case \d+: .*\n  (.*)", msg).group(1)
    assert first.startswith("first wrong value"), msg
    assert re.search(r"Other failing cases show: an error \(case \d+: it raised KeyError: 'boom'", msg), msg


RESEEDING = {
    "sample_next": (("g = torch.Generator(device=logits.device).manual_seed(seed)", "torch.manual_seed(seed)"),
                    ("torch.multinomial(probs, 1, generator=g)", "torch.multinomial(probs, 1)")),
    "score_variance": (("g = torch.Generator().manual_seed(seed)", "torch.manual_seed(seed)"),
                       (", generator=g", "")),
}


@pytest.mark.parametrize("name", list(RESEEDING))
def test_reseeding_the_global_generator_fails_though_the_draws_are_right(name):
    """torch.manual_seed(seed), then draws from the global generator: the same numbers as the generator of its own,
    so every value is right, but the caller's random numbers have changed."""
    fn = answer(name, edited(name, *RESEEDING[name]))
    msg = failure(name, fn, "basic")
    assert RANDOM_STATE in msg, msg


def test_the_reference_draws_from_its_own_generator_and_passes(learner):
    """The reference's visible checks pass, and leave the caller's random state as it was."""
    import torch
    before = torch.get_rng_state()
    for name in RESEEDING:
        for part in (p for p in parts_of(name) if not p.startswith("hidden")):
            check(name, learner[name], part)
    assert torch.equal(before, torch.get_rng_state())


def test_a_written_function_that_calls_a_stub_is_told_which_one_not_that_it_is_the_stub():
    """`sample_next` written, `top_p_filter` still the stub: the message names `top_p_filter` as the stub to write,
    and never says `sample_next` is not implemented (`course progress` would then call it "not started")."""
    stub = "def top_p_filter(logits, p):\n    raise NotImplementedError()\n"
    text = failure("sample_next", learner_namespace(EXERCISES["sample_next"].notebook,
                                                   {"top_p_filter": stub})["sample_next"], "basic")
    assert "it called `top_p_filter`, which still raises NotImplementedError: write `top_p_filter` first" in text
    assert "`sample_next` is not implemented yet" not in text
    own = "def sample_next(logits, seed, temperature=1.0, top_k=None, top_p=None):\n    raise NotImplementedError()\n"
    assert "`sample_next` is not implemented yet" in failure("sample_next", answer("sample_next", own), "basic")
