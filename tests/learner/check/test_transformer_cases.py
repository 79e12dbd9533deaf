"""Notebooks 06-08 (encoder, decoder, encoder-decoder): what the grader says about the reference, the known
mistakes, invalid inputs and an unanswered stub.

Learner code is compiled the way a notebook runs it: the read-only set-up, then the functions the notebook
gives (``learner.blocks``), then the learner's cells. In notebook 06 the learner's multi_head_attention calls
the learner's own split_heads and merge_heads, and encoder_block the learner's own multi_head_attention; in
notebooks 07 and 08 the attention helpers are the given ones, and encdec_decoder_block calls the learner's own
cross_attention.
"""
import inspect

import pytest

import learner.check
import solutions.mistakes.encoder
from coursekit.sync import solution_source
from learner.check import EXERCISES, check
from learner.check.cases import decoder, encoder, encoder_decoder, visible_cases
from helpers import failure, learner_namespace, mistakes_as_learner, reference_as_learner
from grader import reference

NOTEBOOKS = ("06_encoder", "07_decoder", "08_encoder_decoder")
# the exercises, not the self-check questions
NAMES = [name for name, ex in EXERCISES.items() if ex.notebook in NOTEBOOKS and ex.answer is None]


def known_mistakes():
    """The known mistakes of notebooks 06-08 (solutions/mistakes/<topic>.py), compiled as learner code."""
    ns = {}
    for topic in ("encoder", "decoder", "encoder_decoder"):
        ns.update(mistakes_as_learner(topic))
    return ns


# ---------------------------------------------------------------- the registry
def test_notebooks_06_to_08_register_their_twenty_exercises():
    assert NAMES == ["split_heads", "merge_heads", "multi_head_attention", "sinusoidal_positions",
                     "embed_with_positions", "encoder_block", "masked_lm_loss", "probe_accuracy",
                     "rope", "rope_attention", "decoder_block", "lm_log_prob", "top_k_filter", "top_p_filter",
                     "sample_next", "cross_attention", "encdec_decoder_block", "encdec_forward", "translation_loss",
                     "greedy_translate"]
    assert [EXERCISES[n].notebook for n in NAMES] == ["06_encoder"] * 8 + ["07_decoder"] * 7 + \
        ["08_encoder_decoder"] * 5


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


# ---------------------------------------------------------------- invalid inputs
SIZES = {  # the numbers each invalid input's error message must state, in the order of the edge cases
    "split_heads": [("d_model=6", "n_heads=4"), ("(3, 4)",)],
    "merge_heads": [("(2, 3, 4)",)],
    "multi_head_attention": [("d_model=6", "n_heads=4"), ("(2, 5, 6)", "(2, 5, 4)")],
    "sinusoidal_positions": [("D=0",), ("T=-1",)],
    "embed_with_positions": [("T=9", "T_max=8"), ("(6, 4)", "(8, 3)")],
    "masked_lm_loss": [("(2, 4)", "(2, 3)"), ("(2, 3, 5)", "(2, 4)")],
    "probe_accuracy": [("both senses",), ("both senses",), ("0 .. 4", "-1"), ("no sentence is left to test",),
                       ("0 .. 4", "5"), ("0 or 1", "2"),
                       ("(16, 5, 4)", "(15,)")],
    "rope": [("d=5",), ("(4,)", "(3,)")],
    "rope_attention": [("d_model=8", "n_heads=3"), ("d_model=6", "n_heads=2", "even")],
    "lm_log_prob": [("(3, 4, 6)", "(3, 5)"), ("(3, 5)", "(3, 4)")],
    "cross_attention": [("d_model=6", "n_heads=4"), ("(1, 5, 6)", "B=2"), ("(2, 5, 6)", "(2, 4)")],
    "encdec_decoder_block": [("d_model=6", "n_heads=4")],
    "greedy_translate": [("-1",), ("(6,)",)],
    "top_k_filter": [("k=0",), ("k=-1",), ("k=2.5",)],
    "top_p_filter": [("p=0.0",), ("p=1.5",)],
    "sample_next": [("temperature > 0", "0.0", "greedy"), ("-1.0",), ("k=0",), ("p=0.0",)],
}
BAD = [(name, i, case) for name in NAMES for i, case in enumerate(c for c in visible_cases(EXERCISES[name], "errors")
                                                                     if c.raises)]


def test_every_exercise_with_invalid_inputs_has_its_sizes_listed():
    assert {name for name, _, _ in BAD} == set(SIZES)
    assert all(len([b for b in BAD if b[0] == name]) == len(sizes) for name, sizes in SIZES.items())


@pytest.mark.parametrize("name,i,case", BAD, ids=[f"{n}-{c.what[:40]}" for n, _, c in BAD])
def test_invalid_inputs_raise_value_error_naming_the_sizes(name, i, case):
    assert case.raises == "ValueError"
    for fn in (reference.resolve(EXERCISES[name].ref), reference_as_learner(name)):
        with pytest.raises(ValueError) as info:
            fn(*case.args, **case.kwargs)
        for size in SIZES[name][i]:
            assert size in str(info.value), f"{case.what}: {info.value}"


# ---------------------------------------------------------------- stubs and other styles
@pytest.mark.parametrize("name", NAMES)
def test_a_stub_fails_every_part_saying_it_is_not_implemented(name):
    """The released stub keeps the signature and raises NotImplementedError(); no part crashes or passes."""
    ref = reference.resolve(EXERCISES[name].ref)
    stub = f"def {name}{inspect.signature(ref)}:\n    raise NotImplementedError()\n"
    fn = learner_namespace(EXERCISES[name].notebook, {name: stub})[name]
    for part in learner.check.parts_of(name):
        msg = failure(name, fn, part)
        assert f"`{name}` is not implemented yet" in msg and "NotImplementedError" in msg, msg


OTHER_STYLES = {
    "split_heads": '''
        def split_heads(x, n_heads):
            if x.dim() != 3 or x.shape[-1] % n_heads:
                raise ValueError(f"cannot split {tuple(x.shape)} into {n_heads} heads")
            return x.unflatten(-1, (n_heads, -1)).permute(0, 2, 1, 3)
    ''',
    "rope": '''
        def rope(x, positions=None, base=10000.0):
            T, d = x.shape[-2], x.shape[-1]
            if d % 2:
                raise ValueError(f"odd width {d}")
            if positions is None:
                positions = torch.arange(T, device=x.device)
            if positions.shape != (T,):
                raise ValueError(f"{tuple(positions.shape)} positions for {T} rows")
            theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
            turn = torch.polar(torch.ones(T, d // 2, dtype=torch.float64, device=x.device),
                               positions.double()[:, None] * theta)       # e^{i p theta}
            z = torch.view_as_complex(x.double().reshape(*x.shape[:-1], d // 2, 2).contiguous())
            return torch.view_as_real(z * turn).reshape(x.shape).to(x.dtype)
    ''',
    "lm_log_prob": '''
        def lm_log_prob(logits, ids, valid=None):
            if logits.shape[:2] != ids.shape or (valid is not None and valid.shape != ids.shape):
                raise ValueError(f"shapes {tuple(logits.shape)} {tuple(ids.shape)}")
            if valid is None:
                valid = torch.ones_like(ids, dtype=torch.bool)
            B, T, V = logits.shape
            targets = ids[:, 1:].masked_fill(~valid[:, 1:], -100)
            nll = F.cross_entropy(logits[:, :-1].reshape(-1, V), targets.reshape(-1), reduction="none")
            return -nll.reshape(B, T - 1 if T else 0).sum(dim=-1)
    ''',
    "cross_attention": '''
        def cross_attention(y, memory, src_valid, params, n_heads):
            if memory.shape[0] != y.shape[0] or (src_valid is not None and src_valid.shape != memory.shape[:2]):
                raise ValueError(f"memory {tuple(memory.shape)} and src_valid do not fit y {tuple(y.shape)}")
            B, T_x = memory.shape[:2]
            keep = src_valid if src_valid is not None else torch.ones(B, T_x, dtype=torch.bool, device=y.device)
            return multi_head_attention(y, memory, params, n_heads, keep.unsqueeze(-2))
    ''',
}


@pytest.mark.parametrize("name", list(OTHER_STYLES))
def test_correct_implementations_in_other_styles_pass(name):
    """Judged by behaviour: unflatten/permute, complex numbers, F.cross_entropy and keepdim masks all pass."""
    fn = learner_namespace(EXERCISES[name].notebook, {name: OTHER_STYLES[name]})[name]
    for part in learner.check.parts_of(name):
        check(name, fn, part)


def test_encoder_block_of_notebook_06_runs_on_the_learners_own_split_heads():
    """A wrong split_heads in notebook 06 makes the learner's encoder_block fail too (it is their own)."""
    wrong = inspect.getsource(solutions.mistakes.encoder.split_heads_no_transpose).replace(
        "split_heads_no_transpose", "split_heads")
    ns = learner_namespace("06_encoder", {"split_heads": wrong})
    msg = failure("encoder_block", ns["encoder_block"], "basic")
    assert "FAILED encoder_block [basic]" in msg
    assert "calls your multi_head_attention, which fails its own checks" in msg, msg
    assert "calls your split_heads, which fails its own checks" in failure("multi_head_attention",
                                                                           ns["multi_head_attention"], "basic")


# ---------------------------------------------------------------- properties
def test_future_leaks_are_reported_with_the_leaking_pair():
    ns = known_mistakes()
    for prop, mistake in ((decoder._decoder_no_future_leak, "decoder_block_no_causal_mask"),
                          (decoder._decoder_no_future_leak, "decoder_block_causal_transposed"),
                          (encoder_decoder._encdec_no_future_leak, "encdec_no_causal_self")):
        msg = prop(ns[mistake])
        assert msg and "the future leaks" in msg and "position i=" in msg and "j=" in msg, (mistake, msg)
    ignores_mask = learner_namespace("07_decoder", {"rope_attention": solution_source("rope_attention").replace(
        "out, weights = masked_attention(q, k, v, mask)", "out, weights = masked_attention(q, k, v)")})
    msg = decoder._rope_attention_no_future_leak(ignores_mask["rope_attention"])
    assert msg and "position i=" in msg
    assert decoder._decoder_no_future_leak(reference_as_learner("decoder_block")) is None
    assert encoder_decoder._encdec_no_future_leak(reference_as_learner("encdec_decoder_block")) is None
    assert decoder._rope_attention_no_future_leak(reference_as_learner("rope_attention")) is None


def test_padding_and_weight_properties_explain_what_went_wrong():
    ns = known_mistakes()
    assert "padding leaks" in encoder._encoder_padding_is_invisible(ns["encoder_block_padding_ignored"])
    assert "which is padding" in encoder_decoder._cross_weights_sum_to_one(ns["cross_attention_padding_ignored"])
    assert "the mask blocks" in encoder._mha_weights_sum_to_one(ns["mha_mask_ignored"])
    assert "head h=" in encoder._split_heads_keeps_columns(ns["split_heads_no_transpose"])
    assert "is not x" in encoder._split_then_merge_is_identity(ns["merge_heads_no_transpose"])
    for prop, name in ((encoder._encoder_padding_is_invisible, "encoder_block"),
                       (encoder_decoder._cross_weights_sum_to_one, "cross_attention"),
                       (encoder._mha_weights_sum_to_one, "multi_head_attention"),
                       (encoder._split_heads_keeps_columns, "split_heads"),
                       (encoder._split_then_merge_is_identity, "merge_heads"),
                       (decoder._rope_relative_offset, "rope")):
        assert prop(reference_as_learner(name)) is None, name


def test_rope_that_does_not_depend_on_the_offset_only_is_caught():
    """Adding a position-dependent vector (like a learned position) is not a rotation: q_m . k_n changes."""
    fn = learner_namespace("07_decoder", {"rope": '''
        def rope(x, positions=None, base=10000.0):
            if x.shape[-1] % 2:
                raise ValueError("odd width")
            if positions is None:
                positions = torch.arange(x.shape[-2], device=x.device)
            return x + 0.1 * positions.to(x.dtype)[:, None]
    '''})["rope"]
    msg = decoder._rope_relative_offset(fn)
    assert msg and "offset m - n only" in msg
