"""Notebooks 06-08, the transformer: the reference blocks against PyTorch's own modules, their properties,
the models of ``learner.transformer`` built from them, and the errors bad sizes get.

Every expected value is computed by PyTorch on the same seeded inputs and weights
(nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
nn.Transformer, F.cross_entropy), by an independent computation written here
(loops with math.sin / math.cos, a loop over positions, an explicit 2x2
rotation), or follows from a property the notes state (no future leak, RoPE
depends on offsets only, rows of cross-attention weights sum to 1 over the real
source, an empty source gives a decoder-only model).

PyTorch's masks say True = blocked; the course's say True = may attend, so every
comparison passes ``~allowed`` to PyTorch. PyTorch gives NaN for a query with no
allowed key, so the parity tests never build one (right padding only, at least
one real token per sequence); the fully masked cases are checked against the
course's own promise (zero weights, never NaN) instead.

Layout: helpers (weights read out of PyTorch's modules as the course's dicts);
1. parity with PyTorch, forward and backward, float32 and float64 (and the given
learner.blocks against the reference); 2. properties; 3. errors; 4. CUDA (a
test marked ``cuda`` that reruns the block and the models on a GPU and compares
with the CPU).
"""
import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from learner import blocks
from learner.transformer import (DecoderLM, EncoderDecoder, EncoderDecoderConfig, MaskedLM, TransformerConfig,
                                   as_dict, encdec_block_weights, encoder_block_weights, weights_of)
from solutions import decoder, encoder, encoder_decoder
from helpers import (DTYPES, assert_all_close, assert_close, assert_message_names, causal, cotangent, flatten, gen,
                     grads, randn, random_dict, randomize, tol, valid_from_lengths, with_grad)

# ================================================================== helpers

D, H, FF = 8, 2, 16  # model width, heads, feed-forward width of the small blocks below


# ================================================================== 1. parity with PyTorch

# (name, T_q, T_k or None for self-attention, key lengths or None, kind of attn_mask)
MHA_CASES = [
    ("self_no_mask", 5, None, None, None),
    ("self_key_padding", 5, None, [5, 3], None),
    ("self_causal_and_key_padding", 5, None, [5, 2], "causal"),
    ("cross_no_mask", 4, 6, None, None),
    ("cross_key_padding", 4, 6, [6, 2], None),
    ("cross_per_sequence_mask_and_key_padding", 4, 6, [6, 3], "random"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", MHA_CASES, ids=lambda c: c[0])
def test_multi_head_attention_equals_nn_multihead_attention_forward_and_backward(case, dtype):
    """multi_head_attention with nn.MultiheadAttention's weights gives its output, its per-head weights, and the
    same gradients w.r.t. the inputs and every weight, with key padding and attention masks."""
    name, T_q, T_k, lengths, kind = case
    g, B = gen(1), 2
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(D, H, batch_first=True, dtype=dtype)
    randomize(mha, g)
    x_q = randn(g, B, T_q, D, dtype=dtype, requires_grad=True)
    x_kv = x_q if T_k is None else randn(g, B, T_k, D, dtype=dtype, requires_grad=True)
    T_k = x_kv.shape[1]
    allowed = torch.ones(B, T_q, T_k, dtype=torch.bool)
    kpm = attn_mask = None
    if lengths is not None:
        valid = valid_from_lengths(lengths, T_k)
        allowed = allowed & valid[:, None, :]
        kpm = ~valid
    if kind == "causal":
        allowed = allowed & causal(T_q)
        attn_mask = ~causal(T_q)
    elif kind == "random":
        m = torch.rand(B, T_q, T_k, generator=g) < 0.5
        m[:, :, 0] = True  # every query keeps a real key (key 0 is never padding)
        allowed = allowed & m
        attn_mask = (~m).repeat_interleave(H, dim=0)  # PyTorch's 3-D mask is (B * H, T_q, T_k)
    assert allowed.any(-1).all()

    out, weights = encoder.multi_head_attention(x_q, x_kv, weights_of(mha), H,
                                                None if lengths is None and kind is None else allowed)
    ref_out, ref_weights = mha(x_q, x_kv, x_kv, key_padding_mask=kpm, attn_mask=attn_mask, need_weights=True,
                               average_attn_weights=False)
    assert_close(out, ref_out)
    assert_close(weights, ref_weights)

    inputs = [x_q] + ([] if x_kv is x_q else [x_kv]) + list(mha.parameters())
    cot = [cotangent(g, out), cotangent(g, weights)]
    assert_all_close(grads([out, weights], inputs, cot), grads([ref_out, ref_weights], inputs, cot))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lengths", [None, [5, 5, 5], [5, 3, 1]], ids=str)
def test_encoder_block_equals_nn_transformer_encoder_layer_forward_and_backward(lengths, dtype):
    """encoder_block with nn.TransformerEncoderLayer's weights (post-norm, relu, no dropout) gives its output and
    gradients w.r.t. the input and every weight, with src_key_padding_mask."""
    g, B, T = gen(2), 3, 5
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=False, dtype=dtype)
    randomize(layer, g)
    x = randn(g, B, T, D, dtype=dtype, requires_grad=True)
    valid = None if lengths is None else valid_from_lengths(lengths, T)

    out = encoder.encoder_block(x, valid, weights_of(layer), H)
    ref = layer(x, src_key_padding_mask=None if valid is None else ~valid)
    assert_close(out, ref)
    inputs, cot = [x] + list(layer.parameters()), cotangent(g, out)
    assert_all_close(grads(out, inputs, cot), grads(ref, inputs, cot))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lengths", [None, [6, 4, 1]], ids=str)
def test_decoder_block_equals_nn_transformer_encoder_layer_with_a_causal_mask(lengths, dtype):
    """decoder_block is nn.TransformerEncoderLayer with the causal src_mask (and key padding): same output and
    gradients w.r.t. the input and every weight."""
    g, B, T = gen(3), 3, 6
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, dtype=dtype)
    randomize(layer, g)
    x = randn(g, B, T, D, dtype=dtype, requires_grad=True)
    valid = None if lengths is None else valid_from_lengths(lengths, T)

    out = decoder.decoder_block(x, valid, weights_of(layer), H)
    ref = layer(x, src_mask=~causal(T), src_key_padding_mask=None if valid is None else ~valid)
    assert_close(out, ref)
    inputs, cot = [x] + list(layer.parameters()), cotangent(g, out)
    assert_all_close(grads(out, inputs, cot), grads(ref, inputs, cot))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("src_lengths,tgt_lengths", [(None, None), ([6, 2], [5, 3])], ids=str)
def test_encdec_decoder_block_equals_nn_transformer_decoder_layer(src_lengths, tgt_lengths, dtype):
    """encdec_decoder_block with nn.TransformerDecoderLayer's weights gives its output (causal tgt_mask, target and
    memory key padding), nn's cross-attention weights, and the same gradients w.r.t. y, memory and every weight."""
    g, B, T_x, T_y = gen(4), 2, 6, 5
    torch.manual_seed(0)
    layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, dtype=dtype)
    randomize(layer, g)
    y = randn(g, B, T_y, D, dtype=dtype, requires_grad=True)
    memory = randn(g, B, T_x, D, dtype=dtype, requires_grad=True)
    src_valid = None if src_lengths is None else valid_from_lengths(src_lengths, T_x)
    tgt_valid = None if tgt_lengths is None else valid_from_lengths(tgt_lengths, T_y)
    src_kpm = None if src_valid is None else ~src_valid
    tgt_kpm = None if tgt_valid is None else ~tgt_valid

    out, cross = encoder_decoder.encdec_decoder_block(y, memory, tgt_valid, src_valid, weights_of(layer), H)
    ref = layer(y, memory, tgt_mask=~causal(T_y), tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)
    assert_close(out, ref)

    # nn's cross-attention weights, from its own sub-modules: norm1(y + self_attn(y)), then multihead_attn.
    a = layer.self_attn(y, y, y, attn_mask=~causal(T_y), key_padding_mask=tgt_kpm, need_weights=False)[0]
    _, ref_cross = layer.multihead_attn(layer.norm1(y + a), memory, memory, key_padding_mask=src_kpm,
                                        need_weights=True, average_attn_weights=False)
    assert_close(cross, ref_cross)

    inputs, cot = [y, memory] + list(layer.parameters()), cotangent(g, out)
    assert_all_close(grads(out, inputs, cot), grads(ref, inputs, cot))


def small_encdec_cfg(**kw):
    sizes = dict(src_vocab_size=11, tgt_vocab_size=13, d_model=D, n_heads=H, d_ff=FF, n_enc_layers=2,
                 n_dec_layers=2, max_len=9)
    sizes.update(kw)
    return EncoderDecoderConfig(**sizes)


def reference_encdec(cfg, dtype, seed=0):
    """EncoderDecoder built with the reference's functions, every weight perturbed (no zero bias, no unit gain)."""
    model = EncoderDecoder(cfg, encoder_decoder.encdec_decoder_block, encoder.embed_with_positions,
                           encoder.encoder_block, seed=seed).to(dtype)
    g = gen(seed + 100)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=dtype))
    return model


def nn_transformer_like(model, dtype):
    """nn.Transformer (post-norm, no final norms, no nested tensors) holding a copy of ``model``'s block weights."""
    cfg = model.cfg
    enc_layer = nn.TransformerEncoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=0.0, batch_first=True,
                                           dtype=dtype)
    dec_layer = nn.TransformerDecoderLayer(cfg.d_model, cfg.n_heads, cfg.d_ff, dropout=0.0, batch_first=True,
                                           dtype=dtype)
    net = nn.Transformer(cfg.d_model, cfg.n_heads, dim_feedforward=cfg.d_ff, dropout=0.0, batch_first=True,
                         custom_encoder=nn.TransformerEncoder(enc_layer, cfg.n_enc_layers, norm=None,
                                                              enable_nested_tensor=False),
                         custom_decoder=nn.TransformerDecoder(dec_layer, cfg.n_dec_layers, norm=None), dtype=dtype)
    pairs = [(as_dict(ours), weights_of(theirs)) for ours, theirs in zip(model.enc_layers, net.encoder.layers)]
    pairs += [(as_dict(ours), weights_of(theirs)) for ours, theirs in zip(model.dec_layers, net.decoder.layers)]
    with torch.no_grad():
        for ours, theirs in pairs:
            o, t = flatten(ours), flatten(theirs)
            assert [k for k, _ in o] == [k for k, _ in t]
            for (_, a), (_, b) in zip(o, t):
                b.copy_(a)
    return net


def embedded(ids, emb):
    """(E * sqrt(D))[ids] + P[:T] by F.embedding, the input both stacks get."""
    return F.embedding(ids, emb.E) * emb.scale + emb.P[: ids.shape[1]]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_encoder_decoder_model_equals_nn_transformer_with_copied_weights(positions, dtype):
    """EncoderDecoder built with the reference blocks equals nn.Transformer (custom TransformerEncoder with
    enable_nested_tensor=False and TransformerDecoder, no final norms) with the same weights and the same LM head:
    the memory, the logits, and the gradients w.r.t. every weight."""
    g, B, T_x, T_y = gen(5), 3, 7, 6
    torch.manual_seed(0)
    model = reference_encdec(small_encdec_cfg(positions=positions), dtype)
    net = nn_transformer_like(model, dtype)
    src = torch.randint(0, 11, (B, T_x), generator=g)
    tgt = torch.randint(0, 13, (B, T_y), generator=g)
    src_valid, tgt_valid = valid_from_lengths([7, 4, 1], T_x), valid_from_lengths([6, 6, 2], T_y)

    memory = model.encode(src, src_valid)
    ref_memory = net.encoder(embedded(src, model.src_embed), src_key_padding_mask=~src_valid)
    assert_close(memory, ref_memory)

    logits = model(src, src_valid, tgt, tgt_valid)
    out = net(embedded(src, model.src_embed), embedded(tgt, model.tgt_embed), tgt_mask=~causal(T_y),
              src_key_padding_mask=~src_valid, tgt_key_padding_mask=~tgt_valid, memory_key_padding_mask=~src_valid)
    ref_logits = model.head(out)
    assert_close(logits, ref_logits)

    # gradients: the embeddings and the head are shared leaves; block weights are matched by their place
    cot = cotangent(g, logits)
    ours = list(model.parameters())
    g_ours = dict(zip(map(id, ours), grads(logits, ours, cot)))
    shared = {n: p for n, p in model.named_parameters() if not n.startswith(("enc_layers.", "dec_layers."))}
    assert set(shared) == {"src_embed.E", "tgt_embed.E", "head.weight", "head.bias"} | (
        {"src_embed.P", "tgt_embed.P"} if positions == "learned" else set())
    theirs = list(shared.values()) + list(net.parameters())
    g_theirs = dict(zip(map(id, theirs), grads(ref_logits, theirs, cot)))
    assert_all_close([g_ours[id(p)] for p in shared.values()], [g_theirs[id(p)] for p in shared.values()],
                     list(shared), through_model=True)
    blocks_pairs = [(as_dict(o), weights_of(t, get=lambda p: g_theirs[id(p)]))
                    for o, t in zip(model.enc_layers, net.encoder.layers)]
    blocks_pairs += [(as_dict(o), weights_of(t, get=lambda p: g_theirs[id(p)]))
                     for o, t in zip(model.dec_layers, net.decoder.layers)]
    for o, t in blocks_pairs:
        names = [k for k, _ in flatten(o)]
        assert_all_close([g_ours[id(p)] for _, p in flatten(o)], [v for _, v in flatten(t)], names, through_model=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_encoder_decoder_memory_equals_nn_transformer_encoder_in_eval_without_grad(dtype):
    """In eval mode without autograd (where PyTorch takes its fused fast path), nn.TransformerEncoder with
    enable_nested_tensor=False still gives the reference memory at every position, padding included."""
    g, B, T_x = gen(6), 3, 7
    torch.manual_seed(0)
    model = reference_encdec(small_encdec_cfg(), dtype)
    net = nn_transformer_like(model, dtype).eval()
    src = torch.randint(0, 11, (B, T_x), generator=g)
    src_valid = valid_from_lengths([7, 4, 1], T_x)
    with torch.no_grad():
        memory = model.encode(src, src_valid)
        ref_memory = net.encoder(embedded(src, model.src_embed), src_key_padding_mask=~src_valid)
    assert_close(memory, ref_memory)


def test_encoder_decoder_with_its_default_encoder_block_trains_on_a_batch_with_an_all_padding_source():
    """EncoderDecoder with its default encoder_block (learner.blocks) gets finite gradients, equal to those of the
    same model built with the reference encoder_block, when one source of the batch is all padding."""
    cfg = small_encdec_cfg(n_enc_layers=1, n_dec_layers=1)
    src, src_valid = torch.tensor([[3, 4, 5], [0, 0, 0]]), valid_from_lengths([3, 0], 3)
    tgt = torch.tensor([[1, 2], [1, 2]])
    given = reference_encdec(cfg, torch.float64)
    ref = copy.deepcopy(given)
    ref.enc_block = encoder.encoder_block
    given.enc_block = blocks.encoder_block
    out, ref_out = given(src, src_valid, tgt), ref(src, src_valid, tgt)
    assert_close(out, ref_out)
    cot = cotangent(gen(), out)
    assert_all_close(grads(out, list(given.parameters()), cot), grads(ref_out, list(ref.parameters()), cot),
                     [n for n, _ in given.named_parameters()])


# ================================================================== 2. properties

def small_lm_cfg(**kw):
    sizes = dict(vocab_size=10, d_model=D, n_heads=H, d_ff=FF, n_layers=2, max_len=12)
    sizes.update(kw)
    return TransformerConfig(**sizes)


def test_decoder_block_row_i_does_not_change_when_later_inputs_change():
    """decoder_block's output at position i is unchanged when the inputs after i change (the causal mask)."""
    g, B, T = gen(12), 2, 7
    p = random_dict(lambda g: encoder_block_weights(g, D, FF), g, torch.float64)
    x = randn(g, B, T, D)
    out = decoder.decoder_block(x, None, p, H)
    for i in range(T):
        x2 = x.clone()
        x2[:, i + 1:] = randn(g, B, T - i - 1, D)
        out2 = decoder.decoder_block(x2, None, p, H)
        assert_close(out2[:, : i + 1], out[:, : i + 1])
        if i < T - 1:
            assert not torch.allclose(out2[:, i + 1:], out[:, i + 1:])  # the later rows did read the change


def test_decoder_lm_logits_at_i_do_not_depend_on_later_tokens():
    """DecoderLM built with the reference decoder_block: the logits at positions <= i are unchanged when the tokens
    after i change."""
    g, B, T = gen(13), 2, 8
    model = DecoderLM(small_lm_cfg(), decoder.decoder_block, encoder.embed_with_positions).double()
    ids = torch.randint(0, 10, (B, T), generator=g)
    with torch.no_grad():
        logits = model(ids)
        for i in range(T - 1):
            ids2 = ids.clone()
            ids2[:, i + 1:] = (ids[:, i + 1:] + 1 + torch.randint(0, 9, (B, T - i - 1), generator=g)) % 10
            logits2 = model(ids2)
            assert_close(logits2[:, : i + 1], logits[:, : i + 1])
            assert not torch.allclose(logits2[:, i + 1], logits[:, i + 1])


def test_decoder_lm_samples_as_torch_multinomial_draws_and_only_at_a_positive_temperature():
    """DecoderLM.sample draws each token with torch.multinomial from softmax(logits / temperature), the same
    draws with the same seed; greedy decoding is generate, and a temperature <= 0 is refused in words."""
    model = DecoderLM(small_lm_cfg(), decoder.decoder_block, encoder.embed_with_positions).double()
    prompt, tau = [1, 4, 2], 0.7
    drawn = model.sample(prompt, 5, temperature=tau, generator=gen(3))
    ids, g = list(prompt), gen(3)
    with torch.no_grad():
        for _ in range(5):
            logits = model(torch.tensor([ids]))[0, -1]
            ids.append(int(torch.multinomial(torch.softmax(logits / tau, -1), 1, generator=g)))
    assert drawn == ids
    assert model.sample(prompt, 5, temperature=tau, generator=gen(3)) == drawn  # seeded: reproducible
    assert model.sample(prompt, 5, temperature=1e-6, generator=gen(4)) == model.generate(prompt, 5)  # tau -> 0
    for bad in (0, 0.0, -1.0):
        with pytest.raises(ValueError, match="temperature > 0.*generate"):
            model.sample(prompt, 3, temperature=bad)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cross_attention_weights_sum_to_1_over_real_source_and_are_0_on_padding(dtype):
    """cross_attention's weights: every target position's row sums to 1 over the real source tokens and is exactly
    0 on source padding; a fully padded source gives all-zero rows and no NaN."""
    g, T_x, T_y = gen(14), 6, 4
    p = random_dict(lambda g: encoder_block_weights(g, D, FF)["attn"], g, dtype)
    y, memory = randn(g, 4, T_y, D, dtype=dtype), randn(g, 4, T_x, D, dtype=dtype)
    src_valid = valid_from_lengths([6, 3, 1, 0], T_x)
    src_valid[0, 2] = False  # padding in the middle is blocked as well
    out, w = encoder_decoder.cross_attention(y, memory, src_valid, p, H)
    assert w.shape == (4, H, T_y, T_x)
    assert not out.isnan().any() and not w.isnan().any()
    pad = ~src_valid[:, None, None, :].expand_as(w)
    assert (w[pad] == 0).all()
    sums = w.sum(-1)  # (B, H, T_y)
    has_source = src_valid.any(-1)
    torch.testing.assert_close(sums[has_source], torch.ones_like(sums[has_source]))
    assert (sums[~has_source] == 0).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cross_attention_with_an_empty_source_gives_zero_weights_and_output_b_o(dtype):
    """With T_x = 0, cross_attention returns (B, H, T_y, 0) weights, the output b_o at every position, no NaN."""
    g = gen(15)
    p = random_dict(lambda g: encoder_block_weights(g, D, FF)["attn"], g, dtype)
    y = randn(g, 2, 3, D, dtype=dtype)
    for src_valid in (None, torch.zeros(2, 0, dtype=torch.bool)):
        out, w = encoder_decoder.cross_attention(y, y[:, :0], src_valid, p, H)
        assert w.shape == (2, H, 3, 0)
        assert not out.isnan().any()
        assert_close(out, p["b_o"].expand(2, 3, D))


def decoder_only_logits(model, tgt, tgt_valid=None):
    """The EncoderDecoder's decoder with each cross-attention sub-layer replaced by its output bias b_o, written
    here from the reference's multi_head_attention and F.layer_norm."""
    emb = model.tgt_embed
    y = encoder.embed_with_positions(tgt, emb.E * emb.scale, emb.P)
    T = tgt.shape[1]
    mask = causal(T) if tgt_valid is None else causal(T) & tgt_valid[:, None, :]
    for layer in model.dec_layers:
        p = as_dict(layer)

        def ln(x, name):
            return F.layer_norm(x, (x.shape[-1],), p[name]["weight"], p[name]["bias"], 1e-5)
        h1 = ln(y + encoder.multi_head_attention(y, y, p["self_attn"], model.cfg.n_heads, mask)[0], "ln1")
        h2 = ln(h1 + p["cross_attn"]["b_o"], "ln2")
        f = p["ffn"]
        y = ln(h2 + F.linear(torch.relu(F.linear(h2, f["W_1"], f["b_1"])), f["W_2"], f["b_2"]), "ln3")
    return model.head(y)


def test_encoder_decoder_with_an_empty_source_is_a_decoder_only_model():
    """With an empty source (T_x = 0) EncoderDecoder's logits equal a decoder-only computation from the same
    weights whose cross-attention contributes only b_o; its cross weights are (B, H, T_y, 0); no NaN."""
    g, B, T_y = gen(16), 2, 6
    model = reference_encdec(small_encdec_cfg(), torch.float64)
    src, src_valid = torch.zeros(B, 0, dtype=torch.long), torch.zeros(B, 0, dtype=torch.bool)
    tgt = torch.randint(0, 13, (B, T_y), generator=g)
    tgt_valid = valid_from_lengths([6, 4], T_y)
    with torch.no_grad():
        for tv in (None, tgt_valid):
            logits = model(src, src_valid, tgt, tv)
            assert not logits.isnan().any()
            assert_close(logits, decoder_only_logits(model, tgt, tv))
        memory = model.encode(src, src_valid)
        assert memory.shape == (B, 0, D)
        _, cross = model.run_decoder(tgt, memory, src_valid)
        assert [tuple(w.shape) for w in cross] == [(B, H, T_y, 0)] * 2


def test_encoder_decoder_with_an_empty_source_logits_at_i_do_not_depend_on_later_targets():
    """With an empty source, EncoderDecoder's logits at positions <= i are unchanged when target tokens after i
    change."""
    g, B, T_y = gen(17), 2, 6
    model = reference_encdec(small_encdec_cfg(), torch.float64)
    src, src_valid = torch.zeros(B, 0, dtype=torch.long), torch.zeros(B, 0, dtype=torch.bool)
    tgt = torch.randint(0, 13, (B, T_y), generator=g)
    with torch.no_grad():
        logits = model(src, src_valid, tgt)
        for i in range(T_y - 1):
            tgt2 = tgt.clone()
            tgt2[:, i + 1:] = (tgt[:, i + 1:] + 1 + torch.randint(0, 12, (B, T_y - i - 1), generator=g)) % 13
            logits2 = model(src, src_valid, tgt2)
            assert_close(logits2[:, : i + 1], logits[:, : i + 1])
            assert not torch.allclose(logits2[:, i + 1], logits[:, i + 1])


def rope_by_rotation_matrices(x, positions, base=10000.0):
    """RoPE of (T, d) rows computed pair by pair with an explicit 2x2 rotation matrix per position (math.cos/sin)."""
    T, d = x.shape
    out = torch.empty_like(x)
    for t in range(T):
        for i in range(d // 2):
            a = positions[t] * base ** (-2 * i / d)
            R = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=x.dtype)
            out[t, 2 * i: 2 * i + 2] = R @ x[t, 2 * i: 2 * i + 2]
    return out


@pytest.mark.parametrize("base", [10000.0, 100.0])
def test_rope_equals_rotating_each_column_pair_by_position_times_theta_i(base):
    """rope rotates column pair i of the row at position p by p * base^(-2i/d) (checked with 2x2 matrices)."""
    g = gen(18)
    x = randn(g, 5, 8)
    positions = torch.tensor([0, 3, 1, 17, 250])
    assert_close(decoder.rope(x, positions, base), rope_by_rotation_matrices(x, positions.tolist(), base))
    assert_close(decoder.rope(x, base=base), rope_by_rotation_matrices(x, list(range(5)), base))


def test_rope_score_depends_only_on_the_offset_m_minus_n():
    """rope(q at m) . rope(k at n) is the same for every pair (m, n) with the same m - n, and changes with m - n."""
    g, d = gen(19), 8
    q, k = randn(g, 1, d), randn(g, 1, d)

    def score(m, n):
        return float((decoder.rope(q, torch.tensor([m])) * decoder.rope(k, torch.tensor([n]))).sum())
    for offset in (0, 1, 3, -2, 11):
        pairs = [(m, m - offset) for m in (max(offset, 0), 5, 20, 123)]
        scores = [score(m, n) for m, n in pairs]
        for s in scores[1:]:
            assert s == pytest.approx(scores[0], rel=1e-10, abs=1e-12), (offset, pairs, scores)
    assert score(3, 0) != pytest.approx(score(4, 0), rel=1e-6)
    assert score(0, 0) == pytest.approx(float((q * k).sum()), rel=1e-12)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rope_preserves_norms_and_is_the_identity_at_position_0(dtype):
    """Every row keeps its norm (and every column pair its norm) under rope; rope at position 0 returns x."""
    g = gen(20)
    x = randn(g, 2, 3, 6, 8, dtype=dtype)
    r = decoder.rope(x)
    assert r.shape == x.shape and r.dtype == dtype
    assert_close(r.norm(dim=-1), x.norm(dim=-1))
    assert_close(r.unflatten(-1, (4, 2)).norm(dim=-1), x.unflatten(-1, (4, 2)).norm(dim=-1))
    assert torch.equal(r[..., 0, :], x[..., 0, :])
    assert torch.equal(decoder.rope(x, torch.zeros(6, dtype=torch.long)), x)


def rope_attention_by_hand(x, p, n_heads, positions, mask=None):
    """Multi-head attention with q and k of every head rotated by rope_by_rotation_matrices at ``positions``."""
    B, T, Dm = x.shape
    d_k = Dm // n_heads

    def heads(W, b):
        return (x @ W.T + b).reshape(B, T, n_heads, d_k).permute(0, 2, 1, 3)
    q, k, v = heads(p["W_q"], p["b_q"]), heads(p["W_k"], p["b_k"]), heads(p["W_v"], p["b_v"])
    q = torch.stack([torch.stack([rope_by_rotation_matrices(q[b, h], positions) for h in range(n_heads)])
                     for b in range(B)])
    k = torch.stack([torch.stack([rope_by_rotation_matrices(k[b, h], positions) for h in range(n_heads)])
                     for b in range(B)])
    s = q @ k.transpose(-1, -2) / math.sqrt(d_k)
    if mask is not None:
        s = s.masked_fill(~mask[:, None] if mask.dim() == 3 else ~mask, float("-inf"))
    w = torch.softmax(s, -1)
    return (w @ v).permute(0, 2, 1, 3).reshape(B, T, Dm) @ p["W_o"].T + p["b_o"], w


def test_rope_attention_equals_an_explicit_rotation_of_queries_and_keys():
    """rope_attention equals attention whose per-head queries and keys (not values) are rotated by 2x2 matrices
    at positions 0..T-1, with a causal mask and without."""
    g, T = gen(21), 5
    p = random_dict(lambda g: encoder_block_weights(g, D, FF)["attn"], g, torch.float64)
    x = randn(g, 2, T, D)
    for mask in (None, causal(T)):
        out, w = decoder.rope_attention(x, p, H, mask)
        ref_out, ref_w = rope_attention_by_hand(x, p, H, list(range(T)), mask)
        assert_close(out, ref_out)
        assert_close(w, ref_w)


def test_rope_attention_weights_do_not_change_when_every_position_is_shifted(monkeypatch):
    """rope_attention run with positions c..c+T-1 instead of 0..T-1 (rope patched to shift them) gives the same
    weights and output: only offsets matter."""
    g, T = gen(22), 6
    p = random_dict(lambda g: encoder_block_weights(g, D, FF)["attn"], g, torch.float64)
    x = randn(g, 2, T, D)
    mask = causal(T) & valid_from_lengths([6, 4], T)[:, None, :]
    out, w = decoder.rope_attention(x, p, H, mask)
    unshifted = decoder.rope
    for shift in (1, 7, 1000):
        def shifted(t, positions=None, base=10000.0, shift=shift):
            return unshifted(t, torch.arange(t.shape[-2]) + shift, base)
        monkeypatch.setattr(decoder, "rope", shifted)
        out2, w2 = decoder.rope_attention(x, p, H, mask)
        assert_close(w2, w)
        assert_close(out2, out)
        # the shift did reach the queries and keys
        assert not torch.equal(shifted(x), unshifted(x))
    monkeypatch.undo()


def sinusoidal_by_loops(T, Dm, base=10000.0):
    return [[(math.sin if j % 2 == 0 else math.cos)(p / base ** ((j - j % 2) / Dm)) for j in range(Dm)]
            for p in range(T)]


@pytest.mark.parametrize("T,Dm,base", [(10, 8, 10000.0), (7, 5, 10000.0), (6, 1, 10000.0), (12, 6, 50.0),
                                       (0, 4, 10000.0)], ids=str)
def test_sinusoidal_positions_match_the_papers_formula(T, Dm, base):
    """sinusoidal_positions(T, D) is PE[p, 2i] = sin(p / base^(2i/D)), PE[p, 2i+1] = cos(same), computed here with
    math.sin / math.cos loops; odd D keeps the last sine; float32 is the float64 table rounded."""
    expected = torch.tensor(sinusoidal_by_loops(T, Dm, base), dtype=torch.float64).reshape(T, Dm)
    pe = encoder.sinusoidal_positions(T, Dm, base, dtype=torch.float64)
    assert pe.shape == (T, Dm) and pe.dtype == torch.float64
    torch.testing.assert_close(pe, expected, rtol=1e-12, atol=1e-12)
    pe32 = encoder.sinusoidal_positions(T, Dm, base)
    assert pe32.dtype == torch.float32
    assert torch.equal(pe32, pe.float())


def test_sinusoidal_dot_products_depend_only_on_the_distance():
    """PE[p] . PE[q] is the same for every pair with the same |p - q| (even D)."""
    pe = encoder.sinusoidal_positions(40, 16, dtype=torch.float64)
    gram = pe @ pe.T
    for dist in range(0, 12):
        values = torch.cat([gram.diagonal(dist), gram.diagonal(-dist)])
        torch.testing.assert_close(values, values[:1].expand_as(values), rtol=1e-10, atol=1e-10)
    assert not torch.allclose(gram.diagonal(1)[:1], gram.diagonal(2)[:1])


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_split_heads_then_merge_heads_is_the_identity_and_head_h_holds_its_columns(n_heads):
    """merge_heads(split_heads(x)) == x, and head h of split_heads holds the columns h*d_k .. (h+1)*d_k - 1."""
    x = randn(gen(23), 3, 5, D)
    s = encoder.split_heads(x, n_heads)
    d_k = D // n_heads
    assert s.shape == (3, n_heads, 5, d_k)
    for h in range(n_heads):
        assert torch.equal(s[:, h], x[:, :, h * d_k: (h + 1) * d_k])
    assert torch.equal(encoder.merge_heads(s), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_lm_loss_equals_cross_entropy_over_the_masked_positions(dtype):
    """masked_lm_loss equals F.cross_entropy with the unmasked targets set to ignore_index, and so do the gradients."""
    g, B, T, V = gen(24), 3, 7, 11
    logits = randn(g, B, T, V, dtype=dtype, requires_grad=True)
    targets = torch.randint(0, V, (B, T), generator=g)
    is_masked = torch.rand(B, T, generator=g) < 0.4
    is_masked[0, 0] = True
    loss = encoder.masked_lm_loss(logits, targets, is_masked)
    ref = F.cross_entropy(logits.reshape(-1, V), torch.where(is_masked, targets, -100).reshape(-1), ignore_index=-100)
    assert_close(loss, ref)
    assert_close(grads(loss, logits, torch.ones_like(loss))[0], grads(ref, logits, torch.ones_like(ref))[0])


def test_masked_lm_loss_is_0_not_nan_with_nothing_masked():
    """With no masked position the loss is exactly 0 (F.cross_entropy would give NaN) and its gradient is 0."""
    g = gen(25)
    logits = randn(g, 2, 5, 7, requires_grad=True)
    targets = torch.randint(0, 7, (2, 5), generator=g)
    loss = encoder.masked_lm_loss(logits, targets, torch.zeros(2, 5, dtype=torch.bool))
    assert loss.item() == 0.0
    (gr,) = grads(loss, logits, torch.ones_like(loss))
    assert torch.equal(gr, torch.zeros_like(gr))


def lm_log_prob_by_loop(logits, ids, valid):
    B, T, _ = logits.shape
    out = []
    for b in range(B):
        total = 0.0
        for t in range(1, T):
            if valid[b, t]:
                total += torch.log_softmax(logits[b, t - 1].double(), -1)[ids[b, t]].item()
        out.append(total)
    return torch.tensor(out, dtype=torch.float64)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lm_log_prob_equals_a_loop_over_positions_ignoring_padding(dtype):
    """lm_log_prob sums log softmax(logits[t-1])[ids[t]] over the real positions t >= 1 (a loop does it here); what
    stands at padded positions changes nothing; a sequence with one real token gets 0."""
    g, B, T, V = gen(26), 4, 6, 9
    logits = randn(g, B, T, V, dtype=dtype)
    ids = torch.randint(0, V, (B, T), generator=g)
    valid = valid_from_lengths([6, 4, 1, 2], T)
    lp = decoder.lm_log_prob(logits, ids, valid)
    assert lp.shape == (B,) and lp.dtype == dtype
    torch.testing.assert_close(lp.double(), lm_log_prob_by_loop(logits, ids, valid), **tol(dtype))
    assert lp[2].item() == 0.0
    # other ids and logits where the loop never looks: ids at padding, logits at the last real position and after
    ids2 = torch.where(valid, ids, (ids + 3) % V)
    logits2 = logits.clone()
    for b, n in enumerate([6, 4, 1, 2]):
        logits2[b, n - 1:] = randn(g, T - n + 1, V, dtype=dtype)
    assert_close(decoder.lm_log_prob(logits2, ids2, valid), lp)
    all_valid = torch.ones(B, T, dtype=torch.bool)
    assert_close(decoder.lm_log_prob(logits, ids), decoder.lm_log_prob(logits, ids, all_valid))
    torch.testing.assert_close(decoder.lm_log_prob(logits, ids).double(), lm_log_prob_by_loop(logits, ids, all_valid),
                               **tol(dtype))


SEEDED_MODELS = {
    "MaskedLM": lambda seed: MaskedLM(small_lm_cfg(), encoder.encoder_block, encoder.embed_with_positions, seed=seed),
    "DecoderLM": lambda seed: DecoderLM(small_lm_cfg(), decoder.decoder_block, encoder.embed_with_positions, seed=seed),
    "EncoderDecoder": lambda seed: EncoderDecoder(small_encdec_cfg(), encoder_decoder.encdec_decoder_block,
                                                  encoder.embed_with_positions, encoder.encoder_block, seed=seed),
}


@pytest.mark.parametrize("name", ["MaskedLM", "DecoderLM", "EncoderDecoder"])
def test_models_built_with_the_same_seed_have_the_same_weights(name):
    """Two models built with the same ``seed`` have equal parameters, whatever the global RNG did in between."""
    torch.manual_seed(1)
    a = SEEDED_MODELS[name](0)
    torch.manual_seed(2)
    b = SEEDED_MODELS[name](0)
    different = [n for (n, p), (_, q) in zip(a.named_parameters(), b.named_parameters()) if not torch.equal(p, q)]
    assert different == []


# ================================================================== 3. errors that name the sizes

def test_split_heads_rejects_a_width_not_divisible_by_n_heads_naming_both():
    """split_heads(x of width 10, 4) raises ValueError naming 10 and 4."""
    with pytest.raises(ValueError) as e:
        encoder.split_heads(torch.zeros(2, 3, 10), 4)
    assert_message_names(e, 10, 4)


def test_multi_head_attention_rejects_a_width_not_divisible_by_n_heads_naming_both():
    """multi_head_attention with D = 10 and 4 heads raises ValueError naming 10 and 4."""
    p = encoder_block_weights(gen(), 10, FF)["attn"]
    x = torch.zeros(2, 3, 10)
    for fn in (encoder.multi_head_attention, blocks.multi_head_attention):
        with pytest.raises(ValueError) as e:
            fn(x, x, p, 4)
        assert_message_names(e, 10, 4)


@pytest.mark.parametrize("make", [lambda: TransformerConfig(vocab_size=5, d_model=10, n_heads=4),
                                  lambda: EncoderDecoderConfig(5, 6, d_model=10, n_heads=4)],
                         ids=["TransformerConfig", "EncoderDecoderConfig"])
def test_configs_reject_d_model_not_divisible_by_n_heads_naming_both(make):
    """TransformerConfig / EncoderDecoderConfig with d_model=10, n_heads=4 raise ValueError naming 10 and 4."""
    with pytest.raises(ValueError) as e:
        make()
    assert_message_names(e, 10, 4)


def test_embed_with_positions_rejects_a_sequence_longer_than_the_table_naming_both_lengths():
    """embed_with_positions with T = 7 and a 5-row positional table raises ValueError naming 7 and 5."""
    with pytest.raises(ValueError) as e:
        encoder.embed_with_positions(torch.zeros(2, 7, dtype=torch.long), torch.zeros(4, 3), torch.zeros(5, 3))
    assert_message_names(e, 7, 5)


@pytest.mark.parametrize("which", ["MaskedLM", "DecoderLM", "EncoderDecoder_source", "EncoderDecoder_target"])
def test_models_reject_an_input_longer_than_max_len_naming_both_lengths(which):
    """A model with max_len = 9 called on a sequence of 10 tokens raises ValueError naming 10 and 9."""
    long, short = torch.zeros(2, 10, dtype=torch.long), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(ValueError) as e:
        if which == "MaskedLM":
            MaskedLM(small_lm_cfg(max_len=9), encoder.encoder_block, encoder.embed_with_positions)(long)
        elif which == "DecoderLM":
            DecoderLM(small_lm_cfg(max_len=9), decoder.decoder_block, encoder.embed_with_positions)(long)
        else:
            model = EncoderDecoder(small_encdec_cfg(), encoder_decoder.encdec_decoder_block,
                                   encoder.embed_with_positions, encoder.encoder_block)
            if which.endswith("source"):
                model(long, None, short)
            else:
                model(short, None, long)
    assert_message_names(e, 10, 9)


def test_tied_embeddings_with_two_vocabulary_sizes_are_rejected_naming_both():
    """EncoderDecoderConfig(tie_embeddings=True) with 10 source and 12 target tokens raises ValueError naming both."""
    with pytest.raises(ValueError) as e:
        EncoderDecoderConfig(10, 12, d_model=D, n_heads=H, tie_embeddings=True)
    assert_message_names(e, 10, 12)
    EncoderDecoderConfig(10, 10, d_model=D, n_heads=H, tie_embeddings=True)  # one vocabulary is fine


def test_encoder_decoder_rejects_a_target_id_outside_the_target_vocabulary_naming_it():
    """EncoderDecoder.forward with a target id 15 and a 13-token target vocabulary raises ValueError naming 15 and 13
    (the source vocabulary, 11 tokens here, is not the one that counts)."""
    model = EncoderDecoder(small_encdec_cfg(), encoder_decoder.encdec_decoder_block, encoder.embed_with_positions,
                           encoder.encoder_block)
    src = torch.zeros(1, 3, dtype=torch.long)
    model(src, None, torch.tensor([[0, 12, 1]]))  # 12 < 13 is a target id even though it is not a source id
    with pytest.raises(ValueError) as e:
        model(src, None, torch.tensor([[0, 15, 1]]))
    assert_message_names(e, 15, 13)


def test_rope_rejects_an_odd_head_width_naming_it():
    """rope on rows of width 5, and rope_attention with d_k = 6 / 2 = 3, raise ValueError naming 5 and 3."""
    with pytest.raises(ValueError) as e:
        decoder.rope(torch.zeros(2, 4, 5))
    assert_message_names(e, 5)
    p = encoder_block_weights(gen(), 6, FF)["attn"]
    with pytest.raises(ValueError) as e:
        decoder.rope_attention(torch.zeros(2, 4, 6), p, 2)
    assert_message_names(e, 3)


# ================================================================== 4. CUDA

def check_models_on(device):
    """The encdec block and the three models (reference functions, float64 and float32) on ``device`` against the
    same on the CPU: same outputs, gradients, greedy translations and generated text; results stay on the device."""
    g = gen(27)
    for dtype in DTYPES:
        p = random_dict(lambda g: encdec_block_weights(g, D, FF), g, dtype)
        y, memory = randn(g, 2, 5, D, dtype=dtype), randn(g, 2, 6, D, dtype=dtype)
        src_valid, tgt_valid = valid_from_lengths([6, 0], 6), valid_from_lengths([5, 2], 5)
        p_cpu, p_dev = with_grad(p), with_grad({k: {n: t.to(device) for n, t in v.items()} for k, v in p.items()})
        y_cpu, y_dev = y.clone().requires_grad_(), y.to(device).requires_grad_()
        out_cpu, w_cpu = encoder_decoder.encdec_decoder_block(y_cpu, memory, tgt_valid, src_valid, p_cpu, H)
        out_dev, w_dev = encoder_decoder.encdec_decoder_block(y_dev, memory.to(device), tgt_valid.to(device),
                                                              src_valid.to(device), p_dev, H)
        assert out_dev.device.type == torch.device(device).type and w_dev.device == out_dev.device
        assert_close(out_dev, out_cpu.to(device))
        assert_close(w_dev, w_cpu.to(device))
        cot = cotangent(g, out_cpu)
        g_cpu = grads(out_cpu, [y_cpu] + [v for _, v in flatten(p_cpu)], cot)
        g_dev = grads(out_dev, [y_dev] + [v for _, v in flatten(p_dev)], cot.to(device))
        assert_all_close(g_dev, [t.to(device) for t in g_cpu])

    models = [
        EncoderDecoder(small_encdec_cfg(), encoder_decoder.encdec_decoder_block, encoder.embed_with_positions,
                       encoder.encoder_block),
        EncoderDecoder(small_encdec_cfg(positions="sinusoidal"), encoder_decoder.encdec_decoder_block,
                       encoder.embed_with_positions, encoder.encoder_block),
        DecoderLM(small_lm_cfg(), decoder.decoder_block, encoder.embed_with_positions),
        MaskedLM(small_lm_cfg(positions="sinusoidal"), encoder.encoder_block, encoder.embed_with_positions),
    ]
    for model in models:
        for dtype in DTYPES:
            cpu = copy.deepcopy(model).to(dtype)
            dev = copy.deepcopy(cpu).to(device)
            if isinstance(model, EncoderDecoder):
                src, tgt = torch.randint(0, 11, (2, 7), generator=g), torch.randint(0, 13, (2, 6), generator=g)
                sv, tv = valid_from_lengths([7, 3], 7), valid_from_lengths([6, 4], 6)
                args_cpu, args_dev = (src, sv, tgt, tv), (src.to(device), sv.to(device), tgt.to(device), tv.to(device))
            else:
                ids, v = torch.randint(0, 10, (2, 8), generator=g), valid_from_lengths([8, 5], 8)
                args_cpu, args_dev = (ids, v), (ids.to(device), v.to(device))
            logits_cpu, logits_dev = cpu(*args_cpu), dev(*args_dev)
            assert logits_dev.device.type == torch.device(device).type
            assert_close(logits_dev, logits_cpu.to(device))
            cot = cotangent(g, logits_cpu)
            assert_all_close(grads(logits_dev, list(dev.parameters()), cot.to(device)),
                             [t.to(device) for t in grads(logits_cpu, list(cpu.parameters()), cot)])
        if isinstance(model, EncoderDecoder):
            cpu, dev = copy.deepcopy(model).double(), copy.deepcopy(model).double().to(device)
            out_cpu, _ = cpu.greedy(src, sv, 1, 2, 6)
            out_dev, cross = dev.greedy(src.to(device), sv.to(device), 1, 2, 6)
            assert out_dev.device.type == torch.device(device).type and torch.equal(out_dev.cpu(), out_cpu)
        if isinstance(model, DecoderLM):
            cpu, dev = copy.deepcopy(model).double(), copy.deepcopy(model).double().to(device)
            assert dev.generate([1, 4, 2], 6) == cpu.generate([1, 4, 2], 6)


def test_the_device_comparison_runs_end_to_end_on_the_cpu():
    """The comparison the CUDA test makes runs with device="cpu" (a copy against the original), so on a GPU only a
    real device difference can fail it."""
    check_models_on("cpu")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
def test_encdec_block_and_models_on_cuda_equal_the_cpu():
    """The encdec block, EncoderDecoder (learned and sinusoidal positions), DecoderLM and MaskedLM built with the
    reference functions give on CUDA the CPU's outputs, gradients, greedy translations and generated tokens."""
    check_models_on("cuda")




# ================================================================== notebook 08: forward, loss, greedy decoding
def _parts(model):
    return model.encode, model.cross_kv, model.run_decoder_kv


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_encdec_forward_through_cross_kv_equals_nn_transformer_with_copied_weights(dtype):
    """encdec_forward on the model's encode, cross_kv and run_decoder_kv (the keys and values computed once, the ready-made
    blocks.encdec_decoder_block_kv) equals nn.Transformer's logits with the same weights."""
    g, B, T_x, T_y = gen(21), 3, 7, 6
    model = reference_encdec(small_encdec_cfg(), dtype)
    net = nn_transformer_like(model, dtype)
    src, tgt = torch.randint(0, 11, (B, T_x), generator=g), torch.randint(0, 13, (B, T_y), generator=g)
    src_valid, tgt_valid = valid_from_lengths([7, 4, 1], T_x), valid_from_lengths([6, 6, 2], T_y)
    logits = encoder_decoder.encdec_forward(*_parts(model), src, src_valid, tgt, tgt_valid)
    out = net(embedded(src, model.src_embed), embedded(tgt, model.tgt_embed), tgt_mask=~causal(T_y),
              src_key_padding_mask=~src_valid, tgt_key_padding_mask=~tgt_valid, memory_key_padding_mask=~src_valid)
    assert_close(logits, model.head(out))
    assert_close(logits, model(src, src_valid, tgt, tgt_valid))  # run_decoder with the memory: the reference block


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_encdec_decoder_block_kv_equals_nn_transformer_decoder_layer(dtype):
    """The ready-made block given cross_keys_values(memory) equals nn.TransformerDecoderLayer, empty source too."""
    g = gen(22)
    layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, dtype=dtype)
    randomize(layer, g)
    p = weights_of(layer)
    for T_x, lengths in [(5, [5, 2]), (0, [0, 0])]:
        y, memory = randn(g, 2, 4, D, dtype=dtype), randn(g, 2, T_x, D, dtype=dtype)
        src_valid = valid_from_lengths(lengths, T_x)
        kv = blocks.cross_keys_values(memory, p["cross_attn"], H)
        ours, weights = blocks.encdec_decoder_block_kv(y, kv, None, src_valid, p, H)
        if T_x:
            theirs = layer(y, memory, tgt_mask=~causal(4), memory_key_padding_mask=~src_valid)
            assert_close(ours, theirs)
        ref, ref_weights = encoder_decoder.encdec_decoder_block(y, memory, None, src_valid, p, H)
        assert_close(ours, ref)
        assert_close(weights, ref_weights)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_translation_loss_equals_f_cross_entropy_over_the_real_target_tokens_and_its_gradients(dtype):
    """translation_loss = F.cross_entropy(logits, tgt_out with padding ignored): the value and every weight's
    gradient."""
    g, B, T_x, T_y = gen(23), 3, 6, 5
    model = reference_encdec(small_encdec_cfg(), dtype)
    lengths = [5, 2, 1]
    tgt_mask = valid_from_lengths(lengths, T_y)
    batch = {"src": torch.randint(0, 11, (B, T_x), generator=g), "src_mask": valid_from_lengths([6, 3, 4], T_x),
             "tgt_in": torch.randint(0, 13, (B, T_y), generator=g).masked_fill(~tgt_mask, 0),
             "tgt_out": torch.randint(1, 13, (B, T_y), generator=g).masked_fill(~tgt_mask, 0), "tgt_mask": tgt_mask}
    loss = encoder_decoder.translation_loss(*_parts(model), batch)
    logits = model(batch["src"], batch["src_mask"], batch["tgt_in"], tgt_mask)
    ref = F.cross_entropy(logits.transpose(1, 2), batch["tgt_out"].masked_fill(~tgt_mask, -100), ignore_index=-100)
    assert_close(loss, ref)
    params = list(model.parameters())
    assert_all_close(torch.autograd.grad(loss, params), torch.autograd.grad(ref, params), through_model=True)


def test_greedy_translate_writes_what_a_recomputing_nn_transformer_loop_writes_reading_the_source_once():
    """greedy_translate on the model's parts writes, row for row, what a loop that runs nn.Transformer on the whole
    source and target at every step writes (argmax of the last row, 0 after <eos>, stop when all ended), and
    calls encode and cross_kv once."""
    g, B, T_x, bos, eos, max_len = gen(24), 4, 7, 1, 2, 8
    model = reference_encdec(small_encdec_cfg(), torch.float64)
    net = nn_transformer_like(model, torch.float64)
    with torch.no_grad():  # make <eos> likelier at later positions, so that rows end at different steps
        model.head.bias[eos] += 1.0
        model.tgt_embed.P[:, :] += 0.3 * torch.arange(9, dtype=torch.float64)[:, None]
    src, src_valid = torch.randint(3, 11, (B, T_x), generator=g), valid_from_lengths([7, 5, 3, 1], T_x)
    calls = {"encode": 0, "cross_kv": 0}

    def counted(name):
        def call(*args):
            calls[name] += 1
            return getattr(model, name)(*args)
        return call

    with torch.no_grad():
        got = encoder_decoder.greedy_translate(counted("encode"), counted("cross_kv"), model.run_decoder_kv, src, src_valid,
                                               bos, eos, max_len)
        out, done = torch.full((B, 1), bos), torch.zeros(B, dtype=torch.bool)
        for _ in range(max_len):
            h = net(embedded(src, model.src_embed), embedded(out, model.tgt_embed), tgt_mask=~causal(out.shape[1]),
                    src_key_padding_mask=~src_valid, memory_key_padding_mask=~src_valid)
            nxt = model.head(h)[:, -1].argmax(-1).masked_fill(done, 0)
            out, done = torch.cat([out, nxt[:, None]], 1), done | (nxt == eos)
            if done.all():
                break
    assert torch.equal(got, out[:, 1:])
    assert calls == {"encode": 1, "cross_kv": 1}
    assert (got == eos).any() and got.shape[1] <= max_len
