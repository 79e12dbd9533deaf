"""The course's one contract of greedy decoding (learner/check/cases/common.py), the same in notebooks 05, 08 and 09:
what max_len means, what happens at <eos>, what max_len = 0 asks for. Each notebook's greedy decoder is graded
against it with the same edge cases, in the same words, and the same property."""
import pytest

import learner.check
from learner.check import EXERCISES
from learner.check.cases import common, greedy
from learner.check.cases import encoder_decoder as ex8
from learner.check.cases import kv_cache as ex9
from learner.check.cases import rnn as ex5
from helpers import failure, mistakes_as_learner
from grader import reference

# notebook's decoder: (its case module, its models, how a model is called, the item of its tokens in what it returns)
DECODERS = {
    "greedy_decode": (ex5, ex5._greedy_models, ex5._greedy_call, 0),
    "greedy_translate": (ex8, ex8._greedy_models, ex8._greedy_call, None),
    "greedy_generate": (ex9, ex9._gen_models, ex9._gen_call, None),
}
# a known mistake of each that goes on writing after <eos>
IGNORES_EOS = {"greedy_decode": "rnn:greedy_decode_finished_keep_going",
               "greedy_translate": "encoder_decoder:greedy_translate_to_max_len",
               "greedy_generate": "kv_cache:greedy_generate_ignores_eos"}


def test_the_contract_checker_names_each_way_to_break_it():
    broken = greedy.greedy_contract_broken
    assert broken([[5, 2, 0], [5, 5, 2]], 2, 4) is None  # both rows end, the loop stops at the last <eos>
    assert broken([[5, 5, 5], [5, 2, 0]], 2, 3) is None  # a row never ends: max_len tokens
    assert broken([[], []], 2, 0) is None
    assert "at most max_len" in broken([[5, 5, 5]], 2, 2)
    assert "holds 0 (<pad>)" in broken([[2, 5], [5, 2]], 2, 5)
    assert "stop as soon as every row" in broken([[2, 0, 0], [5, 2, 0]], 2, 5)
    assert "stopped after 2 tokens while row 0" in broken([[5, 5], [2, 0]], 2, 5)


@pytest.mark.parametrize("name", DECODERS)
def test_each_decoder_is_graded_with_the_contracts_cases_and_property(name):
    """The edge part holds the contract's six cases, word for word, and edge and hidden run its property."""
    module, models, call, _ = DECODERS[name]
    ex = EXERCISES[name]
    m = models()
    shared = [c.what for c in greedy.greedy_contract_cases(call, m["mixed"][1], m["never"][1], m["at_once"][1])]
    assert [c.what for c in ex.edge()][:len(shared)] == shared
    contract = [part for part, prop in ex.properties if "contract of greedy decoding" in (prop.__doc__ or "")]
    assert sorted(contract) == ["edge", "hidden"]


@pytest.mark.parametrize("name", DECODERS)
def test_the_contracts_models_do_what_their_descriptions_say(name):
    """The mixed model's rows end where its description says, at different steps and before max_len = 20; the
    others never write <eos>, or write it first."""
    module, models, call, item = DECODERS[name]
    ref = reference.resolve(EXERCISES[name].ref)
    for kind, (what, model) in models().items():
        args, kwargs = call(model, 20)
        out = ref(*args, **kwargs)
        rows = (out[item] if item is not None else out).tolist()
        ends = [row.index(2) + 1 if 2 in row else None for row in rows]
        if kind == "mixed":
            assert None not in ends and len(set(ends)) == len(ends) and max(ends) < 20
            said = what.split("end after ")[1].split(" tokens")[0].replace(" and ", ", ").split(", ")
            assert [int(n) for n in said] == ends, (what, ends)
        elif kind == "never":
            assert ends == [None] * len(rows) and len(rows[0]) == 20
        else:
            assert ends == [1] * len(rows) and len(rows[0]) == 1


@pytest.mark.parametrize("name", DECODERS)
def test_a_decoder_that_writes_on_after_eos_breaks_the_contract_in_words(name):
    """A known mistake that goes on writing after <eos> is told so by the contract's property, and fails the edge
    part."""
    topic, mistake = IGNORES_EOS[name].split(":")
    fn = mistakes_as_learner(topic)[mistake]  # compiled as a learner's cell: the grader refuses the reference's own
    prop = next(p for part, p in EXERCISES[name].properties if "contract" in (p.__doc__ or ""))
    message = prop(fn)
    assert message and message.startswith("the contract of greedy decoding, with ") and "<eos>" in message, message
    edge = failure(name, fn, "edge")
    assert dict(EXERCISES[name].mistakes)[IGNORES_EOS[name]] in edge or "contract of greedy decoding" in edge, edge
