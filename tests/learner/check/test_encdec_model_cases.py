"""Notebook 08's whole-model exercises: the checks' toy encoder-decoder, and what counting its calls catches.

encdec_forward, translation_loss and greedy_translate take the model as three functions (encode, cross_kv,
run_decoder). The grader's ToyEncDec is honest (every mask and every step changes its logits) and the properties
count its calls, so a decoding that recomputes the source side at every step writes the right tokens and still
fails, saying what it recomputed.
"""
import pytest
import torch

import learner.check
from coursekit.sync import solution_source
from learner.check import EXERCISES, check
from learner.check.cases import encoder_decoder as ex8
from learner.check.cases import toy_encdec as toy
from helpers import failure, learner_namespace
from grader import reference

NOTEBOOK = "08_encoder_decoder"


def learner_fn(name, source):
    return learner_namespace(NOTEBOOK, {name: source})[name]


def reference_with(name, old, new):
    src = solution_source(name)
    assert old in src, f"the reference of {name} no longer contains {old!r}"
    return src.replace(old, new, 1)


def test_the_toy_model_is_honest_every_mask_and_the_keys_and_values_change_its_logits():
    """Leaving out src_valid (in encode or in run_decoder) or tgt_valid, or giving run_decoder other keys and values, changes
    ToyEncDec's logits: a forward pass that drops one cannot pass by luck."""
    g = ex8.gen(1)
    enc, kv, dec = ex8.toy_encdec(g)
    src, tgt = ex8.random_ids(g, 2, 5, 8, [5, 2], lo=3), ex8.random_ids(g, 2, 4, 7, [4, 2], lo=1)
    sv, tv = ex8.valid_mask([5, 2], 5), ex8.valid_mask([4, 2], 4)
    right = dec(tgt, kv(enc(src, sv)), sv, tv)
    for wrong in (dec(tgt, kv(enc(src, None)), sv, tv), dec(tgt, kv(enc(src, sv)), None, tv),
                  dec(tgt, kv(enc(src, sv)), sv, None), dec(tgt, kv(enc(src.flip(0), sv.flip(0))), sv, tv)):
        assert not torch.allclose(right, wrong)
    with pytest.raises(ValueError, match="did not make"):
        dec(tgt, enc(src, sv), sv, tv)  # the memory is not what cross_kv returns


def test_the_shipped_cases_hold_toy_models_that_load_safely_and_give_the_live_references_results():
    from learner.check.compare import same
    for name in ("encdec_forward", "translation_loss", "greedy_translate"):
        records = learner.check.load_expected(name)["parts"]["basic"]
        assert records and all(isinstance(r["args"][0], toy.ToyPart) for r in records)
        ref = reference.resolve(EXERCISES[name].ref)
        for r in records:
            assert same(r["expected"], ref(*r["args"], **r["kwargs"])), r["what"]


RECOMPUTES = '''
def greedy_translate(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    if max_len < 0 or src.dim() != 2:
        raise ValueError(f"bad max_len {max_len} or src {tuple(src.shape)}")
    out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        kv = cross_kv(encode(src, src_valid))  # the source side again at every step
        nxt = run_decoder(out, kv, src_valid, None)[:, -1].argmax(-1).masked_fill(done, 0)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done = done | (nxt == eos_id)
        if bool(done.all()):
            break
    return out[:, 1:]
'''


def test_decoding_that_recomputes_the_source_side_writes_the_right_tokens_and_fails_in_words():
    """Running encode and cross_kv at every step writes the reference's tokens (hidden-basic, which has no property,
    passes); the counting property fails basic, edge and hidden, saying how often encode ran and why once is
    enough."""
    fn = learner_fn("greedy_translate", RECOMPUTES)
    check("greedy_translate", fn, "hidden-basic")
    for part in ("basic", "edge", "hidden"):
        msg = failure("greedy_translate", fn, part)
        assert "encode was called" in msg and "depends on the source alone" in msg, msg


def test_recomputing_only_cross_kv_is_named():
    src = reference_with("greedy_translate", "logits = run_decoder(out, kv, src_valid, None)",
                         "logits = run_decoder(out, cross_kv(encode(src, src_valid)), src_valid, None)")
    src = src.replace("kv = cross_kv(encode(src, src_valid))  # once per source",
                      "memory = encode(src, src_valid)")
    src = src.replace("cross_kv(encode(src, src_valid)), src_valid, None)", "cross_kv(memory), src_valid, None)")
    msg = ex8._greedy_once_and_same(learner_fn("greedy_translate", src))
    assert msg and msg.startswith("cross_kv was called") and "recomputes the same numbers" in msg, msg


def test_a_forward_pass_that_decodes_position_by_position_is_told_to_decode_once():
    """Decoding each prefix and keeping its last row gives the same logits (causal decoder) but T_y calls."""
    src = '''
def encdec_forward(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
    kv = cross_kv(encode(src, src_valid))
    rows = [run_decoder(tgt_in[:, :t + 1], kv, src_valid, tgt_valid[:, :t + 1])[:, -1] for t in range(tgt_in.shape[1])]
    return torch.stack(rows, dim=1)
'''
    fn = learner_fn("encdec_forward", src)
    check("encdec_forward", fn, "hidden-basic")
    msg = failure("encdec_forward", fn, "basic")
    assert "run_decoder was called" in msg and "so one call scores every position" in msg, msg


def test_the_model_s_decode_kv_equals_decode_and_refuses_what_cross_kv_did_not_make():
    from learner import data, transformer
    from solutions.encoder_decoder import encdec_decoder_block
    from solutions.encoder import embed_with_positions, encoder_block
    task = data.make_date_task(n_train=50, n_val=10, n_test=10, seed=0)
    cfg = transformer.EncoderDecoderConfig(len(task.src_vocab), len(task.tgt_vocab), d_model=16, n_heads=2, d_ff=32,
                                           n_enc_layers=1, n_dec_layers=2, max_len=32)
    model = transformer.EncoderDecoder(cfg, encdec_decoder_block, embed_with_positions, encoder_block, seed=0)
    b = data.make_batch(task.val, task.src_vocab, task.tgt_vocab)
    with torch.no_grad():
        memory = model.encode(b["src"], b["src_mask"])
        want, _ = model.run_decoder(b["tgt_in"], memory, b["src_mask"], b["tgt_mask"])
        got = model.run_decoder_kv(b["tgt_in"], model.cross_kv(memory), b["src_mask"], b["tgt_mask"])
        assert torch.allclose(got, want, atol=1e-5)
        with pytest.raises(ValueError, match="what cross_kv returned"):
            model.run_decoder_kv(b["tgt_in"], memory, b["src_mask"], b["tgt_mask"])
