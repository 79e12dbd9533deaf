"""Notebook 09, the KV cache: the reference against PyTorch's own building blocks, and DecoderLM's cached step.

Every expected value is computed here by PyTorch on the same seeded inputs and
weights, never typed in: ``F.scaled_dot_product_attention`` (causal, or with an
explicit mask built by comparing positions), ``nn.TransformerEncoderLayer`` with
a causal mask (the decoder block), ``DecoderLM``'s uncached forward and
``generate``, and the ``.nbytes`` of the cache tensors a model really builds.

The promise the notes make is that incremental decoding equals recomputation:
feeding a text in pieces, each call given the cache the previous call returned,
gives the rows that feeding it at once gives. So most tests run the reference
in several chunkings (token by token included) and compare with the whole.

PyTorch's masks for nn modules say True = blocked; the course's (and SDPA's
boolean ``attn_mask``) say True = may attend.

Layout: 1. cached_attention against SDPA (forward, cache, backward); 2.
decoder_block_step against nn.TransformerEncoderLayer and the decoder block (and
the given learner.blocks versions against the reference); 3. DecoderLM.step and
greedy_generate against the uncached model; 4. kv_cache_bytes against real
caches; 5. errors that name the sizes; 6. CUDA (a test marked ``cuda`` that
reruns the comparisons on a GPU).
"""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from learner import blocks
from learner.transformer import DecoderLM, TransformerConfig, encoder_block_weights, weights_of
from solutions import decoder, encoder, kv_cache
from helpers import (DTYPES, assert_all_close, assert_close, assert_message_names, causal, cotangent, gen, grads,
                     randn, random_dict, randomize)
import learner.check

# ================================================================== helpers

D, H, FF = 8, 2, 16  # model width, heads, feed-forward width of the small blocks below
T = 7  # the length of the texts fed in pieces
CHUNKINGS = [(7,), (1,) * 7, (3, 4), (2, 2, 3), (1, 5, 1), (6, 1)]  # how a text of T = 7 positions is cut


def allowed_after(T_past, T_new, device="cpu"):
    """(T_new, T_past + T_new) bool: new query i (position T_past + i) may read key j iff j <= T_past + i.

    Built by comparing positions, not with ``tril``, so it is not the reference's own construction."""
    query_pos = T_past + torch.arange(T_new, device=device)[:, None]
    key_pos = torch.arange(T_past + T_new, device=device)[None, :]
    return key_pos <= query_pos


def bounds(chunks):
    """(a, b) of each piece: (3, 4) -> [(0, 3), (3, 7)]."""
    out, a = [], 0
    for n in chunks:
        out.append((a, a + n))
        a += n
    return out


def to_device(tree, device):
    return {k: to_device(v, device) if isinstance(v, dict) else v.to(device) for k, v in tree.items()}


def heads_of(x, W, b, n_heads):
    """The keys (or values) a block caches, by nn's own route: F.linear, then view as heads. (B, H, T, d_k)."""
    B, n, width = x.shape
    return F.linear(x, W, b).view(B, n, n_heads, width // n_heads).transpose(1, 2)


def attention_in_pieces(q, k, v, chunks, cache=None, fn=None):
    """Run cached_attention over the pieces of q, k, v (dim -2); returns the outputs joined, and every cache."""
    fn = fn or kv_cache.cached_attention
    outs, caches = [], []
    for a, b in bounds(chunks):
        out, cache = fn(q[..., a:b, :], k[..., a:b, :], v[..., a:b, :], cache)
        outs.append(out)
        caches.append(cache)
    return torch.cat(outs, dim=-2), caches


def block_in_pieces(x, params, n_heads, chunks, cache=None, fn=None):
    """Run a decoder_block_step over the pieces of x (dim 1); returns the outputs joined and the last cache."""
    fn = fn or kv_cache.decoder_block_step
    outs = []
    for a, b in bounds(chunks):
        out, cache = fn(x[:, a:b], params, n_heads, cache)
        outs.append(out)
    return torch.cat(outs, dim=1), cache


def attention_inputs(g, dtype, n=T, B=2, n_heads=3, d_k=4, d_v=5, device="cpu", requires_grad=False):
    """q, k, v of shapes (B, H, n, d_k), (B, H, n, d_k), (B, H, n, d_v) (values of another width than keys)."""
    return (randn(g, B, n_heads, n, d_k, dtype=dtype, device=device, requires_grad=requires_grad) * 1.5,
            randn(g, B, n_heads, n, d_k, dtype=dtype, device=device, requires_grad=requires_grad),
            randn(g, B, n_heads, n, d_v, dtype=dtype, device=device, requires_grad=requires_grad))


# ================================================================== 1. cached_attention against SDPA

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("chunks", CHUNKINGS, ids=lambda c: "+".join(map(str, c)))
def test_cached_attention_in_pieces_equals_causal_sdpa_on_the_whole_sequence(chunks, dtype):
    """cached_attention fed a sequence in pieces (each call given the cache the previous one returned) gives the
    rows of F.scaled_dot_product_attention(is_causal=True) on the whole sequence, and after each piece the cache
    holds exactly the keys and values fed so far, in order."""
    g = gen(1)
    q, k, v = attention_inputs(g, dtype)
    out, caches = attention_in_pieces(q, k, v, chunks)
    assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for (a, b), (K, V) in zip(bounds(chunks), caches):
        assert torch.equal(K, k[:, :, :b]) and torch.equal(V, v[:, :, :b]), f"the cache after positions 0..{b - 1}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("T_past,T_new", [(5, 1), (5, 3), (1, 4), (0, 3)], ids=lambda x: str(x))
def test_cached_attention_over_a_random_cache_equals_sdpa_with_the_shifted_causal_mask(T_past, T_new, dtype):
    """With any cached keys and values (random ones, not made by a model), new query i reads keys j <= T_past + i
    of [cache; new]: SDPA with that explicit mask, and SDPA run query by query on the first T_past + i + 1 keys
    with no mask at all, give the same rows; the returned cache is the concatenation. An empty cache given as
    (B, H, 0, d) tensors behaves like None."""
    g = gen(2)
    K_past, _, V_past = attention_inputs(g, dtype, n=T_past)
    q, k, v = attention_inputs(g, dtype, n=T_new)
    out, (K, V) = kv_cache.cached_attention(q, k, v, (K_past, V_past))
    K_all, V_all = torch.cat([K_past, k], dim=2), torch.cat([V_past, v], dim=2)
    assert torch.equal(K, K_all) and torch.equal(V, V_all)
    assert_close(out, F.scaled_dot_product_attention(q, K_all, V_all, attn_mask=allowed_after(T_past, T_new)))
    one_by_one = torch.cat([F.scaled_dot_product_attention(q[:, :, i:i + 1], K_all[:, :, :T_past + i + 1],
                                                           V_all[:, :, :T_past + i + 1]) for i in range(T_new)], dim=2)
    assert_close(out, one_by_one)
    if T_past == 0:
        out_none, (K0, V0) = kv_cache.cached_attention(q, k, v, None)
        assert_close(out_none, out)
        assert torch.equal(K0, k) and torch.equal(V0, v)


@pytest.mark.parametrize("chunks", [(7,), (1,) * 7, (2, 2, 3)], ids=lambda c: "+".join(map(str, c)))
def test_cached_attention_gradients_equal_sdpa_through_the_cache(chunks):
    """Gradients flow through the cache: the output joined from the pieces has SDPA's (is_causal) gradients
    w.r.t. q, k and v, float64, keys and values of earlier pieces included."""
    g = gen(3)
    q, k, v = attention_inputs(g, torch.float64, requires_grad=True)
    out, _ = attention_in_pieces(q, k, v, chunks)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    cot = cotangent(g, ref)
    assert_all_close(grads(out, [q, k, v], cot), grads(ref, [q, k, v], cot), ["q", "k", "v"])


def test_cached_attention_gradients_reach_a_given_cache_and_the_returned_one():
    """With a given cache, the output and the returned (K, V) have the gradients of SDPA with the shifted mask and
    of torch.cat, w.r.t. q, k_new, v_new and the cached K, V."""
    g, T_past, T_new = gen(4), 4, 3
    K_past, _, V_past = attention_inputs(g, torch.float64, n=T_past, requires_grad=True)
    q, k, v = attention_inputs(g, torch.float64, n=T_new, requires_grad=True)
    out, (K, V) = kv_cache.cached_attention(q, k, v, (K_past, V_past))
    K_ref, V_ref = torch.cat([K_past, k], dim=2), torch.cat([V_past, v], dim=2)
    ref = F.scaled_dot_product_attention(q, K_ref, V_ref, attn_mask=allowed_after(T_past, T_new))
    inputs = [q, k, v, K_past, V_past]
    cot = [cotangent(g, ref), cotangent(g, K_ref), cotangent(g, V_ref)]
    assert_all_close(grads([out, K, V], inputs, cot), grads([ref, K_ref, V_ref], inputs, cot),
                     ["q", "k_new", "v_new", "K_past", "V_past"])


def test_cached_attention_keeps_the_dtype_and_does_not_change_its_inputs():
    """The output and the cache are in the inputs' dtype; the given cache tensors are not modified in place."""
    g = gen(5)
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        K_past, _, V_past = attention_inputs(g, dtype, n=3)
        before = (K_past.clone(), V_past.clone())
        q, k, v = attention_inputs(g, dtype, n=2)
        out, (K, V) = kv_cache.cached_attention(q, k, v, (K_past, V_past))
        assert out.dtype == K.dtype == V.dtype == dtype
        assert torch.equal(K_past, before[0]) and torch.equal(V_past, before[1])


# ================================================================== 2. decoder_block_step

def nn_layer(g, dtype):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, dtype=dtype)
    randomize(layer, g)
    return layer


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("chunks", CHUNKINGS, ids=lambda c: "+".join(map(str, c)))
def test_decoder_block_step_in_pieces_equals_nn_transformer_encoder_layer_with_a_causal_mask(chunks, dtype):
    """decoder_block_step fed a text in pieces (token by token included) with nn.TransformerEncoderLayer's weights
    (post-norm, relu, no dropout) gives the layer's output on the whole text with the causal src_mask, and
    solutions.decoder.decoder_block's; the last cache holds nn's own keys and values, split into heads."""
    g, B = gen(6), 3
    layer = nn_layer(g, dtype)
    x = randn(g, B, T, D, dtype=dtype)
    p = weights_of(layer)
    with torch.no_grad():
        out, (K, V) = block_in_pieces(x, p, H, chunks)
        assert_close(out, layer(x, src_mask=~causal(T)))
        assert_close(out, decoder.decoder_block(x, None, p, H))
        a = p["attn"]
        assert_close(K, heads_of(x, a["W_k"], a["b_k"], H))
        assert_close(V, heads_of(x, a["W_v"], a["b_v"], H))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_decoder_block_step_token_by_token_has_the_gradients_of_nn_transformer_encoder_layer(dtype):
    """Generated token by token, the joined output has nn.TransformerEncoderLayer's (causal) gradients w.r.t. the
    input and every weight: the cache carries gradients back to earlier positions."""
    g, B = gen(7), 2
    layer = nn_layer(g, dtype)
    x = randn(g, B, T, D, dtype=dtype, requires_grad=True)
    out, _ = block_in_pieces(x, weights_of(layer), H, (1,) * T)
    ref = layer(x, src_mask=~causal(T))
    inputs, cot = [x] + list(layer.parameters()), cotangent(g, out)
    assert_all_close(grads(out, inputs, cot), grads(ref, inputs, cot), ["x"] + [n for n, _ in layer.named_parameters()])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("T_past", [0, 4])
def test_blocks_decoder_block_step_equals_the_reference(T_past, dtype):
    """The given learner.blocks.decoder_block_step (SDPA inside) equals the reference in pieces, after a random
    cache or none: same outputs and same caches."""
    g, B = gen(8), 2
    p = random_dict(lambda g: encoder_block_weights(g, D, FF), g, dtype)
    x = randn(g, B, T, D, dtype=dtype)
    cache = None if T_past == 0 else (randn(g, B, H, T_past, D // H, dtype=dtype),
                                      randn(g, B, H, T_past, D // H, dtype=dtype))
    for chunks in ((T,), (1,) * T, (2, 5)):
        out, (K, V) = block_in_pieces(x, p, H, chunks, cache, fn=blocks.decoder_block_step)
        ref, (K_ref, V_ref) = block_in_pieces(x, p, H, chunks, cache)
        assert_close(out, ref)
        assert_close(K, K_ref)
        assert_close(V, V_ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lengths", [None, [7, 4, 1]], ids=str)
def test_blocks_decoder_block_equals_the_reference(lengths, dtype):
    """The given learner.blocks.decoder_block equals solutions.decoder.decoder_block, with key padding or none,
    and has the same gradients w.r.t. the input."""
    g, B = gen(9), 3
    p = random_dict(lambda g: encoder_block_weights(g, D, FF), g, dtype)
    x = randn(g, B, T, D, dtype=dtype, requires_grad=True)
    valid = None if lengths is None else torch.arange(T) < torch.tensor(lengths)[:, None]
    out, ref = blocks.decoder_block(x, valid, p, H), decoder.decoder_block(x, valid, p, H)
    assert_close(out, ref)
    cot = cotangent(g, out)
    assert_all_close(grads(out, [x], cot), grads(ref, [x], cot), ["x"])


# ================================================================== 3. DecoderLM.step and greedy_generate

def lm_cfg(**kw):
    sizes = dict(vocab_size=10, d_model=D, n_heads=H, d_ff=FF, n_layers=2, max_len=12)
    sizes.update(kw)
    return TransformerConfig(**sizes)


def cached_lm(block_step=kv_cache.decoder_block_step, dtype=torch.float64, seed=0, **kw):
    return DecoderLM(lm_cfg(**kw), decoder.decoder_block, encoder.embed_with_positions, seed=seed,
                     block_step=block_step).to(dtype)


def step_in_pieces(model, ids, chunks, cache=None):
    outs = []
    for a, b in bounds(chunks):
        logits, cache = model.step(ids[:, a:b], cache)
        outs.append(logits)
    return torch.cat(outs, dim=1), cache


LM_CHUNKINGS = [(12,), (1,) * 12, (5, 1, 6), (3, 3, 3, 3), (11, 1)]


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
@pytest.mark.parametrize("chunks", LM_CHUNKINGS, ids=lambda c: "+".join(map(str, c)))
def test_decoder_lm_step_in_pieces_equals_the_full_forward(chunks, positions):
    """DecoderLM.step with the reference decoder_block_step, fed a text in pieces up to max_len, gives the logits
    of the uncached forward on the whole text; the cache holds one (K, V) per layer, (B, H, T, d_k) each."""
    g, B = gen(10), 3
    model = cached_lm(positions=positions)
    ids = torch.randint(0, 10, (B, 12), generator=g)
    logits, cache = step_in_pieces(model, ids, chunks)
    with torch.no_grad():
        assert_close(logits, model(ids))
    assert len(cache) == model.cfg.n_layers
    for K, V in cache:
        assert K.shape == V.shape == (B, H, 12, D // H)


@pytest.mark.parametrize("block_step", [kv_cache.decoder_block_step, blocks.decoder_block_step],
                         ids=["reference", "learner.blocks"])
def test_decoder_lm_step_in_float32_with_either_block_step_equals_the_full_forward(block_step):
    g = gen(11)
    model = cached_lm(block_step=block_step, dtype=torch.float32)
    ids = torch.randint(0, 10, (2, 9), generator=g)
    logits, _ = step_in_pieces(model, ids, (4, 1, 1, 3))
    with torch.no_grad():
        assert_close(logits, model(ids))


class Recorder:
    """A step function that records the shape of the ids and whether a cache came with each call."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __call__(self, ids, cache):
        self.calls.append((tuple(ids.shape), cache is not None))
        return self.model.step(ids, cache)


NO_EOS = -1  # an <eos> id no model writes: greedy_generate then writes max_len tokens, as DecoderLM.generate does


@pytest.mark.parametrize("n_new", [0, 1, 3, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_greedy_generate_with_the_cache_equals_decoder_lm_generate_token_for_token(n_new, seed):
    """greedy_generate(step, prompt, eos_id, n) with DecoderLM.step gives, row by row, the tokens DecoderLM.generate
    (full recomputation at every step, greedy) appends to the prompt; with no <eos> written it calls step n times:
    the prompt once without a cache, then one token (B, 1) with the cache."""
    g, B, T_p = gen(12 + seed), 3, 4
    model = cached_lm(seed=seed)
    prompt = torch.randint(0, 10, (B, T_p), generator=g)
    rec = Recorder(model)
    new = kv_cache.greedy_generate(rec, prompt, NO_EOS, n_new)
    assert new.shape == (B, n_new) and new.dtype == torch.long
    for b in range(B):
        assert new[b].tolist() == model.generate(prompt[b].tolist(), n_new)[T_p:], f"row {b}"
    assert rec.calls == ([((B, T_p), False)] + [((B, 1), True)] * (n_new - 1) if n_new else [])


@pytest.mark.parametrize("eos", [0, 3, 5, 7])
def test_greedy_generate_keeps_the_courses_greedy_contract_with_a_real_eos(eos):
    """With an <eos> the model writes, each row is DecoderLM.generate's continuation up to its <eos>, then 0; the loop
    stops once every row has written <eos> (or after max_len), calling step once per token written."""
    from learner.check.cases.greedy import greedy_contract_broken
    g, B, T_p, max_len = gen(15), 4, 3, 9
    model = cached_lm()
    prompt = torch.randint(0, 10, (B, T_p), generator=g)
    rec = Recorder(model)
    new = kv_cache.greedy_generate(rec, prompt, eos, max_len)
    assert greedy_contract_broken(new.tolist(), eos, max_len) is None
    assert len(rec.calls) == new.shape[1]
    for b in range(B):
        alone = model.generate(prompt[b].tolist(), max_len, eos_id=eos)[T_p:]
        assert new[b].tolist() == alone + [0] * (new.shape[1] - len(alone)), f"row {b}"


def test_greedy_generate_reaches_max_len_exactly():
    """A prompt of 3 and 10 new tokens: the last call feeds position 11, the last row of a 12-row table (the 10th new
    token needs no call), so generation fills max_len without an error and DecoderLM.generate agrees; one more new
    token would need position 12, which the table does not have."""
    g = gen(14)
    model = cached_lm()
    assert model.cfg.max_len == 12
    prompt = torch.randint(0, 10, (2, 3), generator=g)
    new = kv_cache.greedy_generate(lambda ids, c: model.step(ids, c), prompt, NO_EOS, 10)
    for b in range(2):
        assert new[b].tolist() == model.generate(prompt[b].tolist(), 10)[3:]
    with pytest.raises(ValueError, match="13 positions"):
        kv_cache.greedy_generate(lambda ids, c: model.step(ids, c), prompt, NO_EOS, 11)


# ================================================================== 4. kv_cache_bytes against real caches

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n_positions", [1, 5, 20])
def test_kv_cache_bytes_equals_the_nbytes_of_a_real_cache(n_positions, dtype):
    """The cache DecoderLM.step builds (3 layers, 3 heads of 4, a batch of 2), after a prompt and then one token at
    a time, takes exactly kv_cache_bytes(3, 3, 4, n_positions, batch=2, bytes_per_value=itemsize) bytes."""
    g, B = gen(15), 2
    model = cached_lm(dtype=dtype, d_model=12, n_heads=3, n_layers=3, max_len=20)
    ids = torch.randint(0, 10, (B, n_positions), generator=g)
    T_p = min(n_positions, 4)
    _, cache = step_in_pieces(model, ids, (T_p,) + (1,) * (n_positions - T_p))
    assert all(K.dtype == V.dtype == dtype for K, V in cache)
    real = sum(K.nbytes + V.nbytes for K, V in cache)
    assert kv_cache.kv_cache_bytes(3, 3, 4, n_positions, batch=B, bytes_per_value=dtype.itemsize) == real


def test_kv_cache_bytes_default_is_one_sequence_of_16_bit_values():
    """The defaults (batch=1, bytes_per_value=2) are the cache of one sequence in float16."""
    model = cached_lm(dtype=torch.float16, d_model=12, n_heads=3, n_layers=3, max_len=20)
    _, cache = model.step(torch.zeros(1, 6, dtype=torch.long))
    assert kv_cache.kv_cache_bytes(3, 3, 4, 6) == sum(K.nbytes + V.nbytes for K, V in cache)
    assert kv_cache.kv_cache_bytes(3, 3, 4, 0) == 0


# ================================================================== 5. errors that name the sizes

def test_cached_attention_rejects_inputs_that_do_not_fit_naming_their_shapes():
    """q with 2 positions and k_new with 3, or a cache of 3 rows for a batch of 2: ValueError naming the shapes."""
    g = gen(16)
    q, k, v = attention_inputs(g, torch.float64, n=3)
    with pytest.raises(ValueError) as e:
        kv_cache.cached_attention(q[:, :, :2], k, v)
    assert "(2, 3, 2, 4)" in str(e.value) and "(2, 3, 3, 4)" in str(e.value)
    K_past, _, V_past = attention_inputs(g, torch.float64, n=4, B=3)
    with pytest.raises(ValueError) as e:
        kv_cache.cached_attention(q, k, v, (K_past, V_past))
    assert "(3, 3, 4, 4)" in str(e.value) and "(2, 3, 3, 4)" in str(e.value)


@pytest.mark.parametrize("fn", [kv_cache.decoder_block_step, blocks.decoder_block_step],
                         ids=["reference", "learner.blocks"])
def test_decoder_block_step_rejects_a_width_not_divisible_by_n_heads_naming_both(fn):
    p = encoder_block_weights(gen(), 10, FF)
    with pytest.raises(ValueError) as e:
        fn(torch.zeros(2, 3, 10), p, 4)
    assert_message_names(e, 10, 4)


def test_decoder_block_step_rejects_a_cache_of_another_number_of_heads():
    g = gen(17)
    p = random_dict(lambda g: encoder_block_weights(g, D, FF), g, torch.float64)
    with pytest.raises(ValueError) as e:
        kv_cache.decoder_block_step(randn(g, 2, 1, D), p, H, (randn(g, 2, 4, 3, 2), randn(g, 2, 4, 3, 2)))
    assert "(2, 4, 3, 2)" in str(e.value)


def test_decoder_lm_step_without_block_step_says_how_to_build_one():
    model = DecoderLM(lm_cfg(), decoder.decoder_block, encoder.embed_with_positions)
    with pytest.raises(ValueError, match="block_step"):
        model.step(torch.zeros(1, 3, dtype=torch.long))


def test_decoder_lm_step_past_max_len_is_refused_naming_both_lengths():
    """max_len = 12: 13 tokens at once, or 3 after a cache of 10, raise ValueError naming 13 and 12."""
    model = cached_lm()
    with pytest.raises(ValueError) as e:
        model.step(torch.zeros(1, 13, dtype=torch.long))
    assert_message_names(e, 13, 12)
    _, cache = model.step(torch.zeros(1, 10, dtype=torch.long))
    model.step(torch.zeros(1, 2, dtype=torch.long), cache)  # 12 positions still fit
    with pytest.raises(ValueError) as e:
        model.step(torch.zeros(1, 3, dtype=torch.long), cache)
    assert_message_names(e, 13, 12)


def test_decoder_lm_step_with_a_cache_of_the_wrong_number_of_layers_names_both():
    model = cached_lm(n_layers=3)
    _, cache = model.step(torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError) as e:
        model.step(torch.zeros(1, 1, dtype=torch.long), cache[:2])
    assert_message_names(e, 2, 3)


def test_decoder_lm_step_rejects_ids_without_a_time_axis_naming_the_shape():
    model = cached_lm()
    with pytest.raises(ValueError) as e:
        model.step(torch.zeros(4, dtype=torch.long))
    assert "(4,)" in str(e.value)


@pytest.mark.parametrize("args", [dict(prompt=torch.zeros(2, 0, dtype=torch.long), max_len=3),
                                  dict(prompt=torch.zeros(3, dtype=torch.long), max_len=3),
                                  dict(prompt=torch.zeros(1, 2, dtype=torch.long), max_len=-1)],
                         ids=["empty_prompt", "1d_prompt", "negative_max_len"])
def test_greedy_generate_rejects_bad_prompts_and_counts(args):
    model = cached_lm()
    with pytest.raises(ValueError):
        kv_cache.greedy_generate(lambda ids, c: model.step(ids, c), eos_id=2, **args)


@pytest.mark.parametrize("bad", [dict(n_positions=-1), dict(n_positions=2.5), dict(batch=True), dict(n_layers="2")],
                         ids=["negative", "float", "bool", "str"])
def test_kv_cache_bytes_rejects_sizes_that_are_not_whole_numbers_naming_the_argument(bad):
    sizes = dict(n_layers=2, n_heads=4, d_k=16, n_positions=8)
    sizes.update(bad)
    with pytest.raises(ValueError) as e:
        kv_cache.kv_cache_bytes(**sizes)
    assert next(iter(bad)) in str(e.value)


# ================================================================== 6. CUDA

def check_kv_cache_on(device):
    """cached_attention in pieces and decoder_block_step token by token on ``device`` against SDPA / the whole-text
    block on that device and against the CPU; results stay on the device, in the inputs' dtype; DecoderLM.step
    and greedy_generate there give the CPU's logits and tokens."""
    g = gen(20)
    for dtype in DTYPES:
        q, k, v = attention_inputs(g, dtype)
        out_cpu, _ = attention_in_pieces(q, k, v, (2, 2, 3))
        qd, kd, vd = (t.to(device) for t in (q, k, v))
        for chunks in ((1,) * T, (2, 2, 3)):
            out, caches = attention_in_pieces(qd, kd, vd, chunks)
            assert out.device.type == torch.device(device).type and out.dtype == dtype
            assert all(K.device == out.device and V.device == out.device for K, V in caches)
            assert_close(out, F.scaled_dot_product_attention(qd, kd, vd, is_causal=True))
            assert_close(out, out_cpu.to(device))

        p = random_dict(lambda g: encoder_block_weights(g, D, FF), g, dtype)
        x = randn(g, 2, T, D, dtype=dtype)
        ref_cpu, _ = block_in_pieces(x, p, H, (1,) * T)
        pd, xd = to_device(p, device), x.to(device)
        for fn in (kv_cache.decoder_block_step, blocks.decoder_block_step):
            out, (K, V) = block_in_pieces(xd, pd, H, (1,) * T, fn=fn)
            assert out.device.type == torch.device(device).type and K.device == V.device == out.device
            assert_close(out, decoder.decoder_block(xd, None, pd, H))
            assert_close(out, ref_cpu.to(device))

    cpu = cached_lm()
    dev = copy.deepcopy(cpu).to(device)
    ids = torch.randint(0, 10, (2, 12), generator=g)
    logits, cache = step_in_pieces(dev, ids.to(device), (4, 1, 7))
    assert logits.device.type == torch.device(device).type and cache[0][0].device == logits.device
    assert_close(logits, step_in_pieces(cpu, ids, (4, 1, 7))[0].to(device))
    new = kv_cache.greedy_generate(lambda i, c: dev.step(i, c), ids[:, :4].to(device), 2, 8)
    assert new.device.type == torch.device(device).type
    assert torch.equal(new.cpu(), kv_cache.greedy_generate(lambda i, c: cpu.step(i, c), ids[:, :4], 2, 8))


def test_the_device_comparison_runs_end_to_end_on_the_cpu():
    """The comparison the CUDA test makes runs with device="cpu", so on a GPU only a real device difference can
    fail it."""
    check_kv_cache_on("cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_cached_attention_block_step_and_decoder_lm_step_on_cuda_equal_sdpa_and_the_cpu():
    """On CUDA: cached_attention in pieces equals causal SDPA, decoder_block_step (reference and learner.blocks)
    token by token equals the whole-text decoder block, both equal the CPU, and DecoderLM.step / greedy_generate
    give the CPU's logits and tokens."""
    check_kv_cache_on("cuda")




# ================================================================== the package helpers notebook 09 calls
def test_complete_with_the_cached_loop_writes_what_recomputing_writes():
    """DecoderLM.complete batches prompts by length; handed greedy_generate it writes each batch with the cache,
    and (cut at <eos>) the continuations equal those of recomputing the whole text at every step."""
    g = gen(21)
    model = cached_lm(max_len=30)
    prompts = [torch.randint(0, 10, (n,), generator=g).tolist() for n in (3, 5, 3, 1, 5, 4)]
    eos = 2
    assert model.complete(prompts, 12, eos, generate=kv_cache.greedy_generate) == model.complete(prompts, 12, eos)


def test_next_token_loss_is_minus_lm_log_prob_per_predicted_token():
    """learner.transformer.next_token_loss (notebook 09's training loss) equals notebook 07's objective built from
    the reference lm_log_prob: minus the summed log-probabilities over the number of real next tokens."""
    from learner.transformer import next_token_loss
    g = gen(22)
    logits = randn(g, 3, 6, 11)
    ids = torch.randint(0, 11, (3, 6), generator=g)
    valid = torch.arange(6)[None, :] < torch.tensor([[6], [4], [1]])
    want = -decoder.lm_log_prob(logits, ids, valid).sum() / valid[:, 1:].sum()
    assert_close(next_token_loss(logits, ids, valid), want)
    assert_close(next_token_loss(logits, ids), -decoder.lm_log_prob(logits, ids).sum() / (3 * 5))
