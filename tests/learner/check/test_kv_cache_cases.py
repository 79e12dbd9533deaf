"""Notebook 09 (the KV cache): what the grader says about the reference, the known mistakes, loops that generate
without the cache, caches that do not reproduce the whole computation, invalid inputs and an unanswered stub.

Learner code is compiled the way the notebook runs it: the read-only set-up, then the functions the notebook
gives (``learner.blocks``: decoder_block, embed_with_positions, masked_attention, split_heads, merge_heads),
then the learner's cells; the learner's decoder_block_step calls the learner's own cached_attention.
``greedy_generate`` is graded with the grader's ToyLM, whose cache is honest (feeding a token twice changes its
state) and whose calls a property records.
"""
import inspect
import re

import pytest
import torch

import learner.check
from coursekit.sync import solution_source
from learner.check import EXERCISES, check
from learner.check.cases import kv_cache as ex9
from learner.check.cases import visible_cases
from helpers import failure, learner_namespace, reference_as_learner
from grader import reference

NOTEBOOK = "09_kv_cache"
# the exercises, not the self-check questions
NAMES = [name for name, ex in EXERCISES.items() if ex.notebook == NOTEBOOK and ex.answer is None]


def learner_fn(name, source):
    """Exercise ``name`` compiled from ``source`` in the notebook's namespace (the other answers: the reference's)."""
    return learner_namespace(NOTEBOOK, {name: source})[name]


def passes(name, fn, part):
    check(name, fn, part)  # raises CheckFailed otherwise


def reference_with(name, old, new):
    """The reference's source of ``name`` with one edit (which must apply)."""
    src = solution_source(name)
    assert old in src, f"the reference of {name} no longer contains {old!r}"
    return src.replace(old, new, 1)


# ---------------------------------------------------------------- the registry
def test_notebook_09_registers_its_four_exercises():
    assert NAMES == ["cached_attention", "decoder_block_step", "greedy_generate", "kv_cache_bytes"]
    assert EXERCISES["decoder_block_step"].uses == ("cached_attention",)
    assert "learner.blocks:decoder_block_step" in EXERCISES["decoder_block_step"].given


# ---------------------------------------------------------------- the reference passes
# (tests/learner/check/test_checks.py checks every exercise's shipped expectations, and the reference in one namespace holding
# every exercise; here each notebook's reference runs in that notebook's own namespace, with its given functions)
@pytest.mark.parametrize("name", NAMES)
def test_the_reference_as_learner_code_passes_every_part(name, capsys):
    fn = reference_as_learner(name)
    for part in learner.check.parts_of(name):
        check(name, fn, part)
    out = capsys.readouterr()
    assert out.out.count("PASSED") == len(learner.check.parts_of(name)) and out.err == ""


def test_the_shipped_greedy_generate_cases_hold_toy_models_that_load_safely():
    """The visible greedy_generate cases ship a ToyLM as their step: it loads with weights_only (the grader's
    SAFE_GLOBALS), and the expected tokens are what the live reference generates with it."""
    from learner.check.compare import same
    records = learner.check.load_expected("greedy_generate")["parts"]["basic"]
    assert records and all(isinstance(r["args"][0], ex9.ToyLM) for r in records)
    ref = reference.resolve(EXERCISES["greedy_generate"].ref)
    for r in records:
        assert same(r["expected"], ref(*r["args"], **r["kwargs"])), r["what"]


# ---------------------------------------------------------------- stubs
@pytest.mark.parametrize("name", NAMES)
def test_a_stub_fails_every_part_saying_it_is_not_implemented(name):
    """The released stub keeps the signature and raises NotImplementedError(); no part crashes or passes."""
    ref = reference.resolve(EXERCISES[name].ref)
    stub = f"def {name}{inspect.signature(ref)}:\n    raise NotImplementedError()\n"
    fn = learner_fn(name, stub)
    for part in learner.check.parts_of(name):
        msg = failure(name, fn, part)
        assert f"`{name}` is not implemented yet" in msg and "NotImplementedError" in msg, msg


# ---------------------------------------------------------------- greedy_generate: the calls it makes
NO_CACHE = '''
def greedy_generate(step, prompt, eos_id, max_len):
    """Right text, no cache: the whole text is fed again, with cache=None, at every step."""
    if max_len < 0 or prompt.shape[1] == 0:
        raise ValueError(f"max_len must be >= 0 and the prompt not empty, got {max_len} and {tuple(prompt.shape)}")
    ids, new = prompt, prompt.new_zeros(prompt.shape[0], 0)
    for _ in range(max_len):
        logits, _ = step(ids, None)
        nxt = logits[:, -1].argmax(dim=-1).masked_fill((new == eos_id).any(dim=1), 0)
        new = torch.cat([new, nxt[:, None]], dim=1)
        if (new == eos_id).any(dim=1).all():
            break
        ids = torch.cat([ids, nxt[:, None]], dim=1)
    return new
'''

ONE_CALL_TOO_MANY = '''
def greedy_generate(step, prompt, eos_id, max_len):
    """Right text, but step is also called after the last new token (whose prediction nobody reads)."""
    if max_len < 0 or prompt.shape[1] == 0:
        raise ValueError(f"max_len must be >= 0 and the prompt not empty, got {max_len} and {tuple(prompt.shape)}")
    new = prompt.new_zeros(prompt.shape[0], 0)
    logits, cache = step(prompt, None)
    for _ in range(max_len):
        nxt = logits[:, -1].argmax(dim=-1).masked_fill((new == eos_id).any(dim=1), 0)
        new = torch.cat([new, nxt[:, None]], dim=1)
        logits, cache = step(nxt[:, None], cache)
        if (new == eos_id).any(dim=1).all():
            break
    return new
'''


def test_generation_without_the_cache_gets_the_text_right_but_fails_every_graded_cell_in_words():
    """A loop that recomputes everything (step(whole_text, None) each time) produces the reference's tokens, so
    every case agrees (hidden-basic, which has no property, passes); the call-recording property fails the basic,
    edge and hidden parts, so both graded cells score 0, saying cache=None."""
    fn = learner_fn("greedy_generate", NO_CACHE)
    passes("greedy_generate", fn, "hidden-basic")
    for part in ("basic", "edge", "hidden"):
        msg = failure("greedy_generate", fn, part)
        assert "property" in msg and "call 2 of step was given cache=None" in msg, msg
        assert "generation without a cache" in msg and "ids of shape (2, 1)" in msg, msg
    assert "cache=None" in ex9._generate_feeds_one_token(fn)


def test_one_call_too_many_is_told_the_number_of_calls():
    """Calling step after the last new token (one call more than tokens written) keeps the text right; the edge part
    says how many calls it made and why one per token is enough."""
    fn = learner_fn("greedy_generate", ONE_CALL_TOO_MANY)
    passes("greedy_generate", fn, "hidden-basic")
    msg = failure("greedy_generate", fn, "edge")
    assert "step was called 6 times to write 5 tokens" in msg, msg
    assert "the last token needs no call of its own" in msg, msg


def test_feeding_the_next_token_without_a_time_axis_is_told_to_use_none_indexing():
    """ToyLM rejects ids of shape (B,) with a ValueError that shows the fix, [:, None]; a learner loop that feeds
    nxt instead of nxt[:, None] gets that message in its failure."""
    lm = ex9.toy_lm(torch.Generator().manual_seed(0))
    with pytest.raises(ValueError) as info:
        lm(torch.tensor([1, 2]))
    assert "(B, T_new)" in str(info.value) and "(2,)" in str(info.value) and "[:, None]" in str(info.value)
    fn = learner_fn("greedy_generate", reference_with("greedy_generate", "ids = nxt[:, None]", "ids = nxt"))
    msg = failure("greedy_generate", fn, "basic")
    assert "raised ValueError" in msg and "next_id[:, None]" in msg, msg


def test_toy_lm_cache_is_honest():
    """Feeding a text at once equals feeding it token by token with the cache; feeding a token twice does not."""
    g = torch.Generator().manual_seed(1)
    lm = ex9.toy_lm(g)
    ids = torch.randint(0, 7, (2, 6), generator=g)
    whole, (h, t) = lm(ids)
    cache, rows = None, []
    for i in range(6):
        logits, cache = lm(ids[:, i:i + 1], cache)
        rows.append(logits)
    torch.testing.assert_close(torch.cat(rows, dim=1), whole, rtol=1e-12, atol=1e-12)
    assert cache[1] == t == 6
    twice, _ = lm(ids[:, 5:], lm(ids)[1])
    assert not torch.allclose(twice[:, 0], whole[:, 5])
    with pytest.raises(ValueError, match="cache it did not make"):
        lm(ids[:, :1], [h, t])
    with pytest.raises(ValueError) as info:
        lm(ids[:1, :1], (h, t))
    assert "2 rows" in str(info.value) and "has 1" in str(info.value)


# ---------------------------------------------------------------- caches that do not reproduce the whole computation
def test_a_cache_returned_as_values_then_keys_is_caught_by_the_pieces_property_naming_the_position():
    """cached_attention attends correctly within one call, but returns (V, K): the next call reads values as
    keys. The "pieces agree" property names the first position that differs from feeding all at once."""
    fn = learner_fn("cached_attention", reference_with("cached_attention", "return out, (K, V)",
                                                       "return out, (V, K)"))
    msg = ex9._cached_pieces_agree(fn)
    assert msg and "fed in pieces of 1 + 1 + 1 + 1 + 1 + 1 positions" in msg and "position t=1" in msg, msg
    assert "keys j <= T_past + i" in msg
    assert "property" in failure("cached_attention", fn, "edge")


def test_a_cache_stored_in_the_wrong_order_is_caught_by_the_cases_that_compare_the_cache():
    """cached_attention attends correctly but stores the new keys and values before the cached ones. No later
    output can show it (every query reads every cached key, whatever their order), so the "pieces agree"
    property passes it; the case checks compare the returned cache itself and fail it, pointing into the cache
    (output[1]) and naming the new-before-cached mistake."""
    wrong_order = reference_with(
        "cached_attention", "return out, (K, V)",
        "return out, (torch.cat([k_new, K[..., :T_past, :]], dim=-2), torch.cat([v_new, V[..., :T_past, :]], dim=-2))")
    fn = learner_fn("cached_attention", wrong_order)
    assert ex9._cached_pieces_agree(fn) is None
    msg = failure("cached_attention", fn, "basic")
    assert "first wrong value at output[1]" in msg, msg
    assert "the new keys and values were put before the cached ones" in failure("cached_attention", fn, "edge")


def test_a_block_step_that_ignores_the_cache_is_caught_by_the_pieces_property_naming_the_position():
    """decoder_block_step that attends over the new positions alone: token by token, position 1 already differs
    from the whole text, and the property says so (and points at cached_attention)."""
    fn = learner_fn("decoder_block_step", reference_with("decoder_block_step", "cached_attention(q, k, v, cache)",
                                                         "cached_attention(q, k, v, None)"))
    msg = ex9._step_pieces_agree(fn)
    assert msg and "fed in pieces of 1 + 1 + 1 + 1 + 1 + 1 positions" in msg and "position t=1" in msg, msg
    assert "block's output" in msg and "cached_attention" in msg
    edge = failure("decoder_block_step", fn, "edge")
    assert "the cache was not used" in edge and "property" in edge, edge


def test_the_pieces_properties_pass_the_reference_and_the_given_block_step():
    assert ex9._cached_pieces_agree(reference_as_learner("cached_attention")) is None
    assert ex9._step_pieces_agree(reference_as_learner("decoder_block_step")) is None
    assert ex9._step_no_future_leak(reference_as_learner("decoder_block_step")) is None
    import learner.blocks
    assert ex9._step_pieces_agree(learner.blocks.decoder_block_step) is None


def test_a_block_step_with_no_causal_mask_among_new_positions_leaks_the_future():
    """Unmasked attention over the new positions: when the prompt arrives at once, the future leaks."""
    no_mask = reference_with("cached_attention", ".tril(diagonal=T_past)", "")
    ns = learner_namespace(NOTEBOOK, {"cached_attention": no_mask})
    msg = ex9._step_no_future_leak(ns["decoder_block_step"])
    assert msg and "the future leaks" in msg and "position i=" in msg, msg


# ---------------------------------------------------------------- invalid inputs
BAD = [(name, case) for name in NAMES for case in visible_cases(EXERCISES[name], "errors")
       if case.raises]


@pytest.mark.parametrize("name,case", BAD, ids=[f"{n}-{c.what[:40]}" for n, c in BAD])
def test_invalid_inputs_raise_value_error(name, case):
    assert case.raises == "ValueError"
    for fn in (reference.resolve(EXERCISES[name].ref), reference_as_learner(name)):
        with pytest.raises(ValueError):
            fn(*case.args, **case.kwargs)


def test_cached_attention_bad_inputs_need_a_value_error():
    """q and k_new of different lengths, and a cache of another batch size, are edge cases that need ValueError:
    a version with no checks returns a tuple for the first and lets torch.cat raise a RuntimeError for the
    second, and fails the errors part saying so (its edge part, the maths, passes)."""
    bad = [c for c in BAD if c[0] == "cached_attention"]
    assert [c.what for _, c in bad][:2] == ["q has T_new = 2 positions but k_new has 3: an error",
                                            "a cache of another batch size (3 rows for a batch of 2): an error"]
    ref_src = solution_source("cached_attention")
    unchecked = ref_src[:ref_src.index("    ### BEGIN SOLUTION")] + '''
    K = k_new if cache is None else torch.cat([cache[0], k_new], dim=-2)
    V = v_new if cache is None else torch.cat([cache[1], v_new], dim=-2)
    T_new, T_all = q.shape[-2], K.shape[-2]
    mask = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device).tril(diagonal=T_all - T_new)
    out, _ = masked_attention(q, K, V, mask)
    return out, (K, V)
'''
    fn = learner_fn("cached_attention", unchecked)
    passes("cached_attention", fn, "basic")
    passes("cached_attention", fn, "edge")  # the maths is right: only the errors cell is lost
    msg = failure("cached_attention", fn, "errors")
    # (a width that differs reaches the ready-made masked_attention, which raises 04's ValueError itself)
    assert re.search(rf"{len(bad) - 1}|{len(bad)} of {len(bad)} checks failed", msg), msg
    assert "q has T_new = 2 positions but k_new has 3" in msg and "should raise ValueError" in msg, msg
    assert "but it returned a tuple" in msg, msg
    assert re.search(r"Other failing cases show: another error than asked for \(case \d+: this input is invalid and "
                     r"should raise ValueError, but it raised RuntimeError: Sizes of tensors must match", msg), msg


# ---------------------------------------------------------------- the ready-made version is not an answer
@pytest.mark.parametrize("how", ["import_inside", "module_attribute"])
def test_calling_the_ready_made_decoder_block_step_is_a_failure_naming_it(how):
    """learner.blocks.decoder_block_step exists for the course's own use; a learner's decoder_block_step that
    calls it fails (every part; the second spelling is tried on the visible parts only, to save time), and the
    message names it as the course's ready-made version."""
    src = {"import_inside": '''
        def decoder_block_step(x_new, params, n_heads, cache=None):
            from learner.blocks import decoder_block_step as ready
            return ready(x_new, params, n_heads, cache)
    ''', "module_attribute": '''
        import learner.blocks
        def decoder_block_step(x_new, params, n_heads, cache=None):
            return learner.blocks.decoder_block_step(x_new, params, n_heads, cache)
    '''}[how]
    fn = learner_fn("decoder_block_step", src)
    for part in learner.check.parts_of("decoder_block_step") if how == "import_inside" else ("basic", "edge"):
        msg = failure("decoder_block_step", fn, part)
        assert "it called learner.blocks.decoder_block_step, the course's ready-made version" in msg, msg


def test_the_given_masked_attention_may_be_called_by_the_learners_block_step():
    """Only the ready-made version of the exercise being checked is forbidden: decoder_block_step's check does
    not mind a learner function that uses the given masked_attention (it is not an answer to this exercise).
    (Its cases with valid inputs pass; it does not check the cache's sizes, so the edge part is not asked.)"""
    inline = (
        "K = k if cache is None else torch.cat([cache[0], k], dim=-2)\n"
        "    V = v if cache is None else torch.cat([cache[1], v], dim=-2)\n"
        "    T_new, T_all = q.shape[-2], K.shape[-2]\n"
        "    allowed = torch.ones(T_new, T_all, dtype=torch.bool, device=q.device).tril(T_all - T_new)\n"
        "    heads, cache = masked_attention(q, K, V, allowed)[0], (K, V)")
    src = reference_with("decoder_block_step", "heads, cache = cached_attention(q, k, v, cache)", inline)
    fn = learner_fn("decoder_block_step", src)
    for part in ("basic", "hidden-basic"):
        passes("decoder_block_step", fn, part)


def test_the_toy_model_follows_its_input_to_another_device():
    """The hidden part moves a case's tensors to each grading device (CUDA when present) but not the ToyLM in it:
    the model must follow the ids' device, or every correct loop would fail there. The meta device shows it on a
    machine without a GPU."""
    lm = ex9.toy_lm(torch.Generator().manual_seed(0))
    logits, (h, t) = lm(torch.zeros(2, 3, dtype=torch.long, device="meta"))
    assert logits.device.type == "meta" and h.device.type == "meta" and t == 3 and tuple(logits.shape) == (2, 3, 7)


def test_generation_that_passes_no_cache_is_named():
    """Feeding the newest token alone with cache=None makes the model forget the text: a known mistake, and the
    call-recording property says what happened rather than calling it recomputation."""
    src = reference_with("greedy_generate", "ids = nxt[:, None]  #", "ids, cache = nxt[:, None], None  #")
    fn = learner_fn("greedy_generate", src)
    msg = failure("greedy_generate", fn, "basic")
    assert dict(EXERCISES["greedy_generate"].mistakes)["kv_cache:greedy_generate_no_cache_passed"] in msg, msg
    assert "fed the newest token with cache=None" in ex9._generate_feeds_one_token(fn)
