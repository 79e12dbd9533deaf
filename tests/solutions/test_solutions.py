"""The reference package ``solutions/`` against PyTorch's own building blocks.

Every expected value is computed by PyTorch on the same seeded inputs
(torch.einsum, nn.Linear, nn.Embedding, F.one_hot, torch.softmax,
F.cross_entropy, F.scaled_dot_product_attention, nn.MultiheadAttention), or
follows from a property the notes state (rows sum to 1, no future leak, the
edge cases n = 1, first decoder position, all scores equal, empty source,
fully masked row).

Layout: helpers; then one section per notebook (01 tokens, 02 dot products,
03 softmax, 04 attention); then devices (the 'meta' device on any machine, and
a class marked ``cuda`` that reruns the comparisons on a GPU). A comparison
that runs on both CPU and CUDA lives in a ``check_*`` function beside its
section's tests, so both devices run exactly the same assertions.
"""
import collections
import math
import re

import pytest
import torch
import torch.nn.functional as F

from solutions import dot_products, masks_attention as attention, tokens
from solutions.softmax import log_softmax, sequence_log_prob, softmax
from helpers import DTYPES, assert_close, gen, grads, randn, tol

# ================================================================== helpers

SPECIALS = ["<pad>", "<bos>", "<eos>", "<unk>"]  # the order the course fixes for ids 0..3
INF = float("inf")


def make_mask(kind, lead, T_q, T_k, g):
    """A bool mask (True = may attend) built with torch alone, broadcastable to (*lead, T_q, T_k).

    Every query row allows at least one key, so torch.softmax of the masked
    scores is defined everywhere and can serve as the expected value.
    """
    if kind == "none":
        return None
    if kind == "causal":  # row i may see keys j <= i; row 0 sees key 0
        return torch.ones(T_q, T_k).tril().bool()
    if kind == "padding":  # (B, 1.., 1, T_k): right-padded keys, at least one real key
        B = lead[0]
        lengths = torch.randint(1, T_k + 1, (B,), generator=g)
        valid = torch.arange(T_k) < lengths[:, None]  # (B, T_k)
        return valid.view(B, *[1] * (len(lead) - 1), 1, T_k)
    if kind == "random":
        m = torch.rand(*lead, T_q, T_k, generator=g) < 0.5
        return m.scatter(-1, torch.randint(T_k, (*lead, T_q, 1), generator=g), True)
    raise AssertionError(kind)


def masked_scaled_scores(Q, K, mask):
    """Q K^T / sqrt(d_k) with blocked pairs set to -inf, by torch.einsum."""
    s = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(Q.shape[-1])
    return s if mask is None else s.masked_fill(~mask, -INF)


# ================================================================== 01 tokens

FRUIT = ["pear apple pear fig", "fig pear kiwi apple"]  # pear 3, apple 2, fig 2, kiwi 1


def random_texts(g, n_texts=12, n_words=7):
    """Texts over a small word list, with random upper-casing, drawn from ``g``."""
    words = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "kiwi"]
    idx = torch.randint(len(words), (n_texts, n_words), generator=g)
    upper = torch.rand(n_texts, n_words, generator=g) < 0.3
    return [" ".join(words[i].upper() if u else words[i] for i, u in zip(row.tolist(), up.tolist()))
            for row, up in zip(idx, upper)]


def ordered_tokens(vocab):
    """The vocabulary's tokens listed by id; asserts the ids are exactly 0..len-1."""
    assert sorted(vocab.values()) == list(range(len(vocab))), "ids must be 0..len(vocab)-1, each once"
    return sorted(vocab, key=vocab.get)


def test_build_vocab_gives_the_specials_ids_0_to_3_in_order():
    """<pad>, <bos>, <eos>, <unk> get ids 0, 1, 2, 3, also when the texts contain them."""
    ordered = ordered_tokens(tokens.build_vocab(FRUIT + ["<unk> <PAD> <eos> pear"]))
    assert ordered[:4] == SPECIALS
    assert ordered[4:] == ["pear", "apple", "fig", "kiwi"], "specials found in the texts must not be added again"


def test_build_vocab_orders_by_decreasing_count_then_alphabetically():
    """pear (3) beats apple (2) despite the alphabet; apple and fig tie at 2 and go alphabetically."""
    assert ordered_tokens(tokens.build_vocab(FRUIT))[4:] == ["pear", "apple", "fig", "kiwi"]


@pytest.mark.parametrize("min_freq", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_build_vocab_keeps_tokens_seen_at_least_min_freq_times_in_count_then_alphabet_order(seed, min_freq):
    """On random texts the kept tokens are those with count >= min_freq, sorted by (-count, token)."""
    texts = random_texts(gen(seed))
    counts = collections.Counter(w.lower() for t in texts for w in t.split())
    kept = sorted((w for w, c in counts.items() if c >= min_freq), key=lambda w: (-counts[w], w))
    assert ordered_tokens(tokens.build_vocab(texts, min_freq=min_freq)) == SPECIALS + kept


def test_build_vocab_lower_cases_before_counting():
    """'Pear PEAR pear' is one token seen three times, so it survives min_freq=3."""
    assert ordered_tokens(tokens.build_vocab(["Pear PEAR", "pear Fig"], min_freq=3)) == SPECIALS + ["pear"]


@pytest.mark.parametrize("min_freq", [0, -1])
def test_build_vocab_rejects_min_freq_below_1(min_freq):
    """min_freq < 1 is a ValueError that names min_freq."""
    with pytest.raises(ValueError, match="min_freq"):
        tokens.build_vocab(FRUIT, min_freq=min_freq)


def test_build_vocab_rejects_a_bare_string():
    """A single string (which would be iterated character by character) is a ValueError."""
    with pytest.raises(ValueError):
        tokens.build_vocab("pear apple pear")


def test_encode_wraps_lower_cased_word_ids_in_bos_and_eos():
    """encode gives <bos>, one vocabulary id per lower-cased word, <eos>."""
    vocab = tokens.build_vocab(FRUIT)
    text = "Pear FIG apple"
    assert tokens.encode(text, vocab) == [vocab["<bos>"]] + [vocab[w.lower()] for w in text.split()] + [vocab["<eos>"]]


@pytest.mark.parametrize("seed", [0, 1])
def test_decode_inverts_encode_on_in_vocabulary_text(seed):
    """decode(encode(text)) gives back the lower-cased, single-spaced text when every word is known."""
    texts = random_texts(gen(seed))
    vocab = tokens.build_vocab(texts)
    for text in texts:
        assert tokens.decode(tokens.encode(text, vocab), vocab) == " ".join(text.lower().split())


def test_encode_maps_unknown_words_to_unk_and_decode_writes_unk():
    """A word missing from the vocabulary becomes the <unk> id, decoded as the word '<unk>'."""
    vocab = tokens.build_vocab(FRUIT)
    ids = tokens.encode("pear mango fig", vocab)
    assert ids == [vocab["<bos>"], vocab["pear"], vocab["<unk>"], vocab["fig"], vocab["<eos>"]]
    assert tokens.decode(ids, vocab) == "pear <unk> fig"


@pytest.mark.parametrize("as_tensor", [False, True], ids=["list", "tensor"])
def test_decode_skips_pad_and_bos_and_stops_at_the_first_eos(as_tensor):
    """<pad>/<bos> anywhere are skipped, and nothing after the first <eos> is decoded (list or 1-D tensor)."""
    vocab = tokens.build_vocab(FRUIT)
    v = vocab
    ids = [v["<bos>"], v["pear"], v["<pad>"], v["<bos>"], v["fig"], v["<eos>"], v["kiwi"], v["<eos>"], v["<pad>"]]
    assert tokens.decode(torch.tensor(ids) if as_tensor else ids, vocab) == "pear fig"


def test_decode_gives_the_same_text_for_a_tensor_and_a_list():
    """decode accepts a 1-D LongTensor and reads it like the list of its ints."""
    texts = random_texts(gen(3))
    vocab = tokens.build_vocab(texts[:6])  # the other texts hold unknown words
    for text in texts:
        ids = tokens.encode(text, vocab)
        assert tokens.decode(torch.tensor(ids), vocab) == tokens.decode(ids, vocab)


@pytest.mark.parametrize("pad_id", [0, 7])
@pytest.mark.parametrize("B", [1, 3, 6])
def test_pad_batch_equals_pad_sequence_with_a_true_for_real_tokens_mask(B, pad_id):
    """pad_batch right-pads like nn.utils.rnn.pad_sequence; its bool mask is True exactly on real tokens."""
    g = gen(B)
    lengths = torch.randint(0, 7, (B,), generator=g).tolist()
    lengths[0] = max(lengths[0], 1)
    seqs = [torch.randint(1, 50, (n,), generator=g).tolist() for n in lengths]
    ids, mask = tokens.pad_batch(seqs, pad_id=pad_id)
    expected = torch.nn.utils.rnn.pad_sequence([torch.tensor(s, dtype=torch.long) for s in seqs],
                                               batch_first=True, padding_value=pad_id)
    assert ids.dtype == torch.long and mask.dtype == torch.bool
    assert ids.shape == mask.shape == (B, max(lengths))
    assert torch.equal(ids, expected)
    assert torch.equal(mask, torch.arange(max(lengths)) < torch.tensor(lengths)[:, None])


def test_pad_batch_rejects_an_empty_batch():
    """An empty list of sequences is a ValueError (T would be undefined)."""
    with pytest.raises(ValueError):
        tokens.pad_batch([])


ID_SHAPES = [(), (0,), (9,), (3, 4), (2, 3, 4), (2, 0, 3)]


def check_embeddings_match_torch(device, dtype, id_shape):
    V, D = 11, 5
    g = gen(len(id_shape))
    E = randn(g, V, D, dtype=dtype, device=device)
    ids = torch.randint(V, id_shape, generator=g).to(device)
    emb = torch.nn.Embedding(V, D, dtype=dtype, device=device)
    with torch.no_grad():
        emb.weight.copy_(E)
        by_module = emb(ids)
    by_one_hot = F.one_hot(ids, V).to(E) @ E
    one_hot, lookup = tokens.embed_one_hot(ids, E), tokens.embed_lookup(ids, E)
    assert one_hot.shape == lookup.shape == (*id_shape, D)
    assert_close(one_hot, by_module, msg=lambda m: f"embed_one_hot vs nn.Embedding, ids {id_shape}: {m}")
    assert_close(lookup, by_module, msg=lambda m: f"embed_lookup vs nn.Embedding, ids {id_shape}: {m}")
    assert_close(one_hot, by_one_hot)
    assert_close(lookup, one_hot)


def check_embedding_gradients_agree(device, dtype, id_shape):
    V, D = 5, 4  # few rows, so ids repeat and gradients accumulate
    g = gen(7)
    E = randn(g, V, D, dtype=dtype, device=device).requires_grad_()
    ids = torch.randint(V, id_shape, generator=g).to(device)
    G = randn(g, *id_shape, D, dtype=dtype, device=device)
    (g_one_hot,) = grads(tokens.embed_one_hot(ids, E), E, G)
    (g_lookup,) = grads(tokens.embed_lookup(ids, E), E, G)
    (g_module,) = grads(F.embedding(ids, E), E, G)
    assert_close(g_one_hot, g_lookup)
    assert_close(g_lookup, g_module)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("id_shape", ID_SHAPES, ids=str)
def test_embed_one_hot_equals_embed_lookup_equals_nn_embedding_and_one_hot_matmul(id_shape, dtype):
    """Both embeddings equal nn.Embedding with E copied in and F.one_hot(ids).to(E) @ E, for 0-d and empty ids too."""
    check_embeddings_match_torch("cpu", dtype, id_shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("id_shape", ID_SHAPES, ids=str)
def test_embed_one_hot_and_embed_lookup_have_the_same_gradient_wrt_E(id_shape, dtype):
    """d/dE of the one-hot product equals d/dE of the row lookup (and of F.embedding), repeated ids included."""
    check_embedding_gradients_agree("cpu", dtype, id_shape)


@pytest.mark.parametrize("bad", [-1, 11, 100])
@pytest.mark.parametrize("fn", [tokens.embed_one_hot, tokens.embed_lookup], ids=lambda f: f.__name__)
def test_embeddings_reject_ids_outside_0_to_V(fn, bad):
    """An id < 0 or >= V (here V = 11) is a ValueError, not a wrap-around or a silent zero row."""
    E = randn(gen(), 11, 3)
    with pytest.raises(ValueError):
        fn(torch.tensor([[0, 3], [bad, 2]]), E)


# ================================================================== 02 dot products

SCORE_SHAPES = [((5, 4), (7, 4)), ((3, 5, 8), (3, 6, 8)), ((2, 3, 5, 8), (1, 3, 7, 8)),
                ((4, 1, 5, 3), (2, 6, 3)), ((1, 16), (1, 16))]


def check_pairwise_scores(device, dtype, q_shape, k_shape):
    g = gen(len(q_shape))
    Q, K = randn(g, *q_shape, dtype=dtype, device=device), randn(g, *k_shape, dtype=dtype, device=device)
    expected = torch.einsum("...id,...jd->...ij", Q, K)
    assert_close(dot_products.pairwise_scores(Q, K), expected)


def check_scaled_scores(device, dtype, q_shape, k_shape):
    g = gen(len(k_shape))
    Q, K = randn(g, *q_shape, dtype=dtype, device=device), randn(g, *k_shape, dtype=dtype, device=device)
    d_k = Q.shape[-1]
    got = dot_products.scaled_scores(Q, K)
    assert_close(got, torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(d_k))
    assert_close(got, dot_products.pairwise_scores(Q, K) / math.sqrt(d_k))


def check_project_qkv(device, dtype, x_shape, d_k, d_v):
    g = gen(d_k)
    D = x_shape[-1]
    X = randn(g, *x_shape, dtype=dtype, device=device)
    layers = []
    for out in (d_k, d_k, d_v):
        layer = torch.nn.Linear(D, out, bias=False, dtype=dtype, device=device)
        with torch.no_grad():
            layer.weight.copy_(randn(g, out, D, dtype=dtype, device=device))
        layers.append(layer)
    with torch.no_grad():
        got = dot_products.project_qkv(X, *(layer.weight for layer in layers))
        for name, mine, layer in zip("QKV", got, layers):
            assert_close(mine, layer(X), msg=lambda m: f"{name} vs nn.Linear(bias=False): {m}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("q_shape,k_shape", SCORE_SHAPES, ids=str)
def test_pairwise_scores_equal_einsum_with_broadcast_leading_dims(q_shape, k_shape, dtype):
    """pairwise_scores(Q, K) == einsum('...id,...jd->...ij'), leading dims broadcasting."""
    check_pairwise_scores("cpu", dtype, q_shape, k_shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("q_shape,k_shape", SCORE_SHAPES, ids=str)
def test_scaled_scores_equal_pairwise_scores_over_sqrt_d_k(q_shape, k_shape, dtype):
    """scaled_scores(Q, K) == pairwise scores / sqrt(d_k)."""
    check_scaled_scores("cpu", dtype, q_shape, k_shape)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("x_shape,d_k,d_v", [((6, 4), 3, 5), ((2, 6, 8), 8, 8), ((2, 3, 5, 6), 4, 2), ((1, 1), 1, 1)],
                         ids=str)
def test_project_qkv_equals_three_bias_free_linear_layers(x_shape, d_k, d_v, dtype):
    """project_qkv with W of shape (out, D) equals nn.Linear(D, out, bias=False) whose weight is that W."""
    check_project_qkv("cpu", dtype, x_shape, d_k, d_v)


@pytest.mark.parametrize("fn", [dot_products.pairwise_scores, dot_products.scaled_scores], ids=lambda f: f.__name__)
def test_scores_reject_q_and_k_of_different_widths_naming_both(fn):
    """Q (..., 3) against K (..., 11) is a ValueError whose message gives both widths."""
    g = gen()
    with pytest.raises(ValueError) as info:
        fn(randn(g, 2, 5, 3), randn(g, 2, 7, 11))
    assert re.search(r"\b3\b", str(info.value)) and re.search(r"\b11\b", str(info.value)), str(info.value)


def test_project_qkv_rejects_a_weight_whose_input_width_is_not_D_naming_it():
    """A W_K of shape (d_k, D + 1) is a ValueError naming W_K and D."""
    g = gen()
    X = randn(g, 2, 6, 5)
    with pytest.raises(ValueError, match=r"W_K") as info:
        dot_products.project_qkv(X, randn(g, 3, 5), randn(g, 3, 6), randn(g, 4, 5))
    assert re.search(r"\b5\b", str(info.value)), str(info.value)


def test_project_qkv_rejects_weights_in_the_transposed_d_by_out_layout():
    """W_Q given as (D, d_k) instead of the notes' (d_k, D) is a ValueError naming W_Q."""
    g = gen()
    with pytest.raises(ValueError, match=r"W_Q"):
        dot_products.project_qkv(randn(g, 6, 5), randn(g, 5, 3), randn(g, 3, 5), randn(g, 3, 5))


def test_project_qkv_rejects_query_and_key_widths_that_differ_naming_both():
    """W_Q giving 4 columns and W_K giving 7 is a ValueError whose message gives 4 and 7."""
    g = gen()
    with pytest.raises(ValueError) as info:
        dot_products.project_qkv(randn(g, 6, 5), randn(g, 4, 5), randn(g, 7, 5), randn(g, 3, 5))
    assert re.search(r"\b4\b", str(info.value)) and re.search(r"\b7\b", str(info.value)), str(info.value)


@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_score_variance_is_near_d_k_raw_and_near_1_after_scaling(d_k):
    """The raw score variance is close to d_k and the scaled one to 1, as two Python floats."""
    n = 20000
    raw, scaled = dot_products.score_variance(d_k, n_pairs=n, seed=0)
    assert type(raw) is float and type(scaled) is float
    # Tolerance: S = q.k is a sum of d_k products of independent N(0, 1) entries,
    # so E S^2 = d_k and E S^4 = 3 d_k^2 + 6 d_k; the sample variance of n draws
    # has relative standard error sqrt((2 + 6 / d_k) / n) (2% at d_k = 1, 1% at
    # d_k = 256). Five standard errors fail a correct implementation with
    # probability < 1e-6 for any seed, while a missing or doubled sqrt(d_k) is
    # off by a factor >= 4 for d_k >= 16.
    rel = 5 * math.sqrt((2 + 6 / d_k) / n)
    assert abs(raw / d_k - 1) < rel, (raw, d_k)
    assert abs(scaled - 1) < rel, scaled
    assert scaled == pytest.approx(raw / d_k, rel=1e-9)


def test_score_variance_is_deterministic_for_a_fixed_seed():
    """The same seed gives the same pair of floats; another seed gives other draws."""
    first = dot_products.score_variance(16, n_pairs=2000, seed=3)
    assert dot_products.score_variance(16, n_pairs=2000, seed=3) == first
    assert dot_products.score_variance(16, n_pairs=2000, seed=4) != first


@pytest.mark.parametrize("d_k", [0, -3])
def test_score_variance_rejects_d_k_below_1(d_k):
    """d_k < 1 is a ValueError naming d_k."""
    with pytest.raises(ValueError, match="d_k"):
        dot_products.score_variance(d_k)


# ================================================================== 03 softmax

TEMPERATURES = [0.05, 0.3, 1.0, 2.5, 20.0]
SHAPE_DIMS = [(shape, dim) for shape in [(7,), (3, 5), (2, 3, 4), (2, 3, 4, 5)] for dim in range(len(shape))]


def check_softmax_matches_torch(device, dtype, shape, dim, temperature):
    x = 3 * randn(gen(len(shape) + dim), *shape, dtype=dtype, device=device)
    assert_close(softmax(x, dim=dim, temperature=temperature), torch.softmax(x / temperature, dim))
    assert_close(log_softmax(x, dim=dim, temperature=temperature), torch.log_softmax(x / temperature, dim))


@pytest.mark.parametrize("temperature", TEMPERATURES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", SHAPE_DIMS, ids=str)
def test_softmax_and_log_softmax_equal_torch_of_x_over_temperature(shape, dim, dtype, temperature):
    """softmax / log_softmax(x, dim, tau) == torch.softmax / torch.log_softmax(x / tau, dim) on every dim."""
    check_softmax_matches_torch("cpu", dtype, shape, dim, temperature)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", SHAPE_DIMS, ids=str)
def test_softmax_accepts_negative_dims_like_their_positive_twins(shape, dim, dtype):
    """dim - ndim selects the same axis as dim."""
    x = randn(gen(), *shape, dtype=dtype)
    assert torch.equal(softmax(x, dim=dim - len(shape)), softmax(x, dim=dim))
    assert torch.equal(log_softmax(x, dim=dim - len(shape)), log_softmax(x, dim=dim))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape,dim", SHAPE_DIMS, ids=str)
def test_softmax_slices_are_non_negative_and_sum_to_1(shape, dim, dtype):
    """Along dim, the weights are >= 0 and sum to 1, at every temperature."""
    x = 3 * randn(gen(1), *shape, dtype=dtype)
    for temperature in TEMPERATURES:
        p = softmax(x, dim=dim, temperature=temperature)
        assert (p >= 0).all()
        assert_close(p.sum(dim), torch.ones_like(p.sum(dim)))


@pytest.mark.parametrize("temperature", [0.05, 1.0, 20.0])
@pytest.mark.parametrize("scale", [1e4, 1e30])
def test_softmax_and_log_softmax_stay_finite_on_huge_float32_logits(scale, temperature):
    """Logits of size 1e4 and 1e30 in float32 give finite results equal to torch's (max subtracted first)."""
    x = scale * randn(gen(), 4, 6, dtype=torch.float32)
    p, lp = softmax(x, temperature=temperature), log_softmax(x, temperature=temperature)
    assert torch.isfinite(p).all() and torch.isfinite(lp).all()
    assert_close(p, torch.softmax(x / temperature, -1))
    assert_close(lp, torch.log_softmax(x / temperature, -1))


@pytest.mark.parametrize("temperature", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_minus_inf_logits_get_weight_exactly_zero(dtype, temperature):
    """An entry at -inf gets softmax weight exactly 0 and log-weight -inf; the rest equal torch's."""
    g = gen()
    x = randn(g, 5, 8, dtype=dtype)
    blocked = (torch.rand(5, 8, generator=g) < 0.4).scatter(-1, torch.randint(8, (5, 1), generator=g), False)
    x = x.masked_fill(blocked, -INF)
    p, lp = softmax(x, temperature=temperature), log_softmax(x, temperature=temperature)
    assert (p[blocked] == 0).all() and (lp[blocked] == -INF).all()
    assert_close(p, torch.softmax(x / temperature, -1))
    assert_close(lp[~blocked], torch.log_softmax(x / temperature, -1)[~blocked])


@pytest.mark.parametrize("temperature", [0.5, 1.0])
@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_an_all_minus_inf_slice_gives_zeros_and_minus_inf_never_nan(dtype, dim, temperature):
    """A slice with every entry -inf: softmax gives 0s, log_softmax gives -inf, no NaN; other slices unchanged."""
    x = randn(gen(), 4, 6, dtype=dtype)
    x.select(1 - dim, 2).fill_(-INF)  # slice 2 along the other axis is dead
    dead = torch.isinf(x).all(dim=dim, keepdim=True).expand_as(x)
    p, lp = softmax(x, dim=dim, temperature=temperature), log_softmax(x, dim=dim, temperature=temperature)
    assert not p.isnan().any() and not lp.isnan().any()
    assert (p[dead] == 0).all() and (lp[dead] == -INF).all()
    assert_close(p[~dead], torch.softmax(x / temperature, dim)[~dead])
    assert_close(lp[~dead], torch.log_softmax(x / temperature, dim)[~dead])


@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=lambda f: f.__name__)
def test_softmax_over_an_empty_dim_returns_an_empty_tensor_like_torch(fn):
    """A (3, 0) input along dim -1 ("nothing to sum over") gives an empty (3, 0) result, as torch.softmax does."""
    x = torch.empty(3, 0)
    assert fn(x, dim=-1).shape == (3, 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_approaches_the_one_hot_argmax_monotonically_as_temperature_falls(dtype):
    """The L1 distance to one_hot(argmax) shrinks at every step of tau = 5, 2, 1, 0.5, 0.25, 0.1 and ends near 0."""
    g = gen()
    x = randn(g, 6, 10, dtype=dtype)
    x = x.scatter_add(-1, x.argmax(-1, keepdim=True), torch.ones(6, 1, dtype=dtype))  # top gap >= 1
    target = F.one_hot(x.argmax(-1), 10).to(dtype)
    # Exactly 2 (1 - p_max), and p_max = 1 / (1 + sum_j exp((x_j - x_max) / tau)) rises as tau falls.
    dist = [(softmax(x, temperature=t) - target).abs().sum(-1) for t in (5.0, 2.0, 1.0, 0.5, 0.25, 0.1)]
    for before, after in zip(dist, dist[1:]):
        assert (after < before).all(), (before, after)
    assert (dist[-1] < 1e-3).all() and (dist[0] > 0.1).all()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax_approaches_uniform_monotonically_as_temperature_rises(dtype):
    """KL(p || uniform) shrinks at every step of tau = 0.5, 1, 2, 5, 20, 100 and ends near 0."""
    x = 2 * randn(gen(), 6, 10, dtype=dtype)
    # KL(p || u) = log n - H(p), and the entropy of softmax(x / tau) rises with tau.
    kls = []
    for t in (0.5, 1.0, 2.0, 5.0, 20.0, 100.0):
        p = softmax(x, temperature=t).double()
        kls.append((p * torch.log(p * 10)).sum(-1))
    for before, after in zip(kls, kls[1:]):
        assert (after < before).all(), (before, after)
    assert (kls[-1] < 1e-3).all() and (kls[0] > 0.1).all()


@pytest.mark.parametrize("temperature", [0, 0.0, -1.0, -0.5])
@pytest.mark.parametrize("fn", [softmax, log_softmax], ids=lambda f: f.__name__)
def test_a_temperature_that_is_not_positive_is_a_value_error_naming_temperature(fn, temperature):
    """tau <= 0 is a ValueError whose message says 'temperature'."""
    with pytest.raises(ValueError, match="temperature"):
        fn(randn(gen(), 3, 4), temperature=temperature)


PAD_ID = 0


def check_sequence_log_prob_matches_cross_entropy(device, dtype, B, T):
    V = 7
    g = gen(B * 10 + T)
    logits = 2 * randn(g, B, T, V, dtype=dtype, device=device)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T) < lengths[:, None]  # (B, T) True on real tokens
    targets = torch.randint(1, V, (B, T), generator=g).masked_fill(~mask, PAD_ID)  # real ids never PAD_ID
    mask, targets = mask.to(device), targets.to(device)
    nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none", ignore_index=PAD_ID)  # (B, T)
    got = sequence_log_prob(logits, targets, mask)
    assert got.shape == (B,)
    assert_close(got, -nll.sum(-1))
    full = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    assert_close(sequence_log_prob(logits, targets), -full.sum(-1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("B,T", [(1, 1), (3, 4), (5, 9)], ids=str)
def test_sequence_log_prob_equals_minus_cross_entropy_summed_over_unmasked_steps(B, T, dtype):
    """sequence_log_prob == -F.cross_entropy(..., reduction='none') summed over time, padding via ignore_index."""
    check_sequence_log_prob_matches_cross_entropy("cpu", dtype, B, T)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("B,T", [(1, 1), (2, 3), (4, 4)], ids=str)
def test_sequence_log_prob_is_the_log_of_the_product_of_step_probabilities(B, T, dtype):
    """The chain rule: log prod_t P(x_t | x_<t), the product taken in float64 from torch.softmax."""
    g = gen(T)
    V = 5
    logits = randn(g, B, T, V, dtype=dtype)
    targets = torch.randint(V, (B, T), generator=g)
    probs = torch.softmax(logits.double(), -1)
    expected = torch.tensor([math.log(math.prod(probs[b, t, targets[b, t]].item() for t in range(T)))
                             for b in range(B)], dtype=torch.float64)
    got = sequence_log_prob(logits, targets)
    assert got.dtype == dtype and (got <= 0).all()
    # float32 logits carry float32 rounding (about 1e-7 per step); float64 must agree to ~1e-12.
    torch.testing.assert_close(got.double(), expected, **(tol(dtype) if dtype == torch.float64
                                                          else dict(rtol=1e-5, atol=1e-5)))


@pytest.mark.parametrize("logits_shape,targets_shape,mask_shape", [
    ((2, 4, 5), (2, 5), None), ((2, 4, 5), (4, 2), None), ((4, 5), (4,), None), ((2, 4, 5), (2, 4), (2, 5)),
], ids=str)
def test_sequence_log_prob_rejects_mismatched_shapes(logits_shape, targets_shape, mask_shape):
    """logits not (B, T, V), targets not (B, T), or a mask not (B, T) is a ValueError."""
    g = gen()
    mask = None if mask_shape is None else torch.ones(mask_shape, dtype=torch.bool)
    with pytest.raises(ValueError):
        sequence_log_prob(randn(g, *logits_shape), torch.randint(5, targets_shape, generator=g), mask)


# ================================================================== 04 attention

@pytest.mark.parametrize("T", [0, 1, 2, 5])
def test_causal_mask_is_the_lower_triangle_diagonal_included(T):
    """causal_mask(T) == torch.ones(T, T).tril().bool()."""
    assert torch.equal(attention.causal_mask(T), torch.ones(T, T).tril().bool())


@pytest.mark.parametrize("T_q,T_k", [(0, 3), (1, 1), (4, 7), (3, 0)], ids=str)
def test_bidirectional_mask_allows_every_pair(T_q, T_k):
    """bidirectional_mask(T_q, T_k) is an all-True (T_q, T_k) bool tensor."""
    assert torch.equal(attention.bidirectional_mask(T_q, T_k), torch.ones(T_q, T_k, dtype=torch.bool))


@pytest.mark.parametrize("B,T_q,T_k", [(1, 1, 1), (3, 4, 6), (2, 6, 6)], ids=str)
def test_padding_mask_is_b_1_t_k_and_broadcasts_over_queries(B, T_q, T_k):
    """padding_mask(valid) has shape (B, 1, T_k) and, broadcast, lets every query see exactly the real keys."""
    g = gen(B)
    valid = torch.rand(B, T_k, generator=g) < 0.6
    m = attention.padding_mask(valid)
    assert m.shape == (B, 1, T_k) and m.dtype == torch.bool
    assert torch.equal(m & torch.ones(B, T_q, T_k, dtype=torch.bool), valid[:, None, :].expand(B, T_q, T_k))


def test_combine_masks_is_a_broadcasting_and_that_skips_none():
    """combine_masks ANDs its masks (causal (T, T) with padding (B, 1, T) gives (B, T, T)) and ignores None."""
    g = gen()
    causal = torch.ones(5, 5).tril().bool()
    pad = torch.rand(3, 1, 5, generator=g) < 0.7
    rnd = torch.rand(3, 5, 5, generator=g) < 0.5
    assert torch.equal(attention.combine_masks(causal, pad), causal & pad)
    assert torch.equal(attention.combine_masks(None, causal, None, pad, rnd), causal & pad & rnd)
    assert torch.equal(attention.combine_masks(None, rnd), rnd)
    assert attention.combine_masks() is None and attention.combine_masks(None, None) is None


@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float64], ids=str)
def test_additive_mask_is_0_where_allowed_and_minus_inf_where_blocked(dtype):
    """additive_mask maps True -> 0 and False -> -inf, in float32 unless told otherwise."""
    mask = torch.rand(2, 4, 5, generator=gen()) < 0.5
    M = attention.additive_mask(mask) if dtype is None else attention.additive_mask(mask, dtype=dtype)
    assert M.dtype == (dtype or torch.float32) and M.shape == mask.shape
    assert (M[mask] == 0).all() and (M[~mask] == -INF).all()


LEADS = [(), (3,), (2, 4)]  # none, batch, batch and heads
LENGTHS = [(5, 5), (4, 7), (1, 6), (6, 1)]
ATTENTION_CASES = [(kind, lead, T_q, T_k) for kind in ("none", "causal", "padding", "random") for lead in LEADS
                   for T_q, T_k in LENGTHS if kind != "padding" or lead]


def case_id(case):
    kind, lead, T_q, T_k = case
    return f"{kind}-lead{list(lead)}-Tq{T_q}-Tk{T_k}"


def attention_inputs(lead, T_q, T_k, dtype, device, g, d_k=8, d_v=3, requires_grad=False):
    Q = randn(g, *lead, T_q, d_k, dtype=dtype, device=device).requires_grad_(requires_grad)
    K = randn(g, *lead, T_k, d_k, dtype=dtype, device=device).requires_grad_(requires_grad)
    V = randn(g, *lead, T_k, d_v, dtype=dtype, device=device).requires_grad_(requires_grad)
    return Q, K, V


def check_masked_attention_matches_sdpa(device, dtype, kind, lead, T_q, T_k):
    g = gen(T_q * 10 + T_k)
    Q, K, V = attention_inputs(lead, T_q, T_k, dtype, device, g)
    mask = make_mask(kind, lead, T_q, T_k, g)
    mask = None if mask is None else mask.to(device)
    out, weights = attention.masked_attention(Q, K, V, mask)
    assert out.shape == (*lead, T_q, V.shape[-1]) and weights.shape == (*lead, T_q, T_k)
    assert_close(out, F.scaled_dot_product_attention(Q, K, V, attn_mask=mask),
                 msg=lambda m: f"out vs SDPA, {kind} mask, lead {lead}, T_q={T_q}, T_k={T_k}: {m}")
    assert_close(weights, torch.softmax(masked_scaled_scores(Q, K, mask), -1))


def check_masked_attention_gradients_match_sdpa(device, kind, lead, T_q, T_k):
    g = gen(T_q + T_k)
    Q, K, V = attention_inputs(lead, T_q, T_k, torch.float64, device, g, requires_grad=True)
    mask = make_mask(kind, lead, T_q, T_k, g)
    mask = None if mask is None else mask.to(device)
    G = randn(g, *lead, T_q, V.shape[-1], device=device)
    got = grads(attention.masked_attention(Q, K, V, mask)[0], (Q, K, V), G)
    expected = grads(F.scaled_dot_product_attention(Q, K, V, attn_mask=mask), (Q, K, V), G)
    for name, a, b in zip("QKV", got, expected):
        assert_close(a, b, msg=lambda m: f"d out / d {name} vs SDPA, {kind} mask: {m}")


def check_empty_source(device, dtype, with_mask):
    g = gen()
    Q, K, V = attention_inputs((2,), 4, 0, dtype, device, g)
    mask = torch.ones(4, 0, dtype=torch.bool, device=device) if with_mask else None
    out, weights = attention.masked_attention(Q, K, V, mask)
    assert weights.shape == (2, 4, 0)
    assert torch.equal(out, torch.zeros(2, 4, 3, dtype=dtype, device=device))


def check_fully_masked_row(device, dtype):
    g = gen()
    Q, K, V = attention_inputs((2, 3), 5, 6, dtype, device, g)
    mask = make_mask("random", (2, 3), 5, 6, g)
    mask[:, :, 1] = False  # query 1 may attend to nothing
    mask[0, 2, 3] = False  # and so may query 3 of one sequence and head
    mask = mask.to(device)
    dead = ~mask.any(-1)  # (2, 3, 5)
    out, weights = attention.masked_attention(Q, K, V, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[dead] == 0).all() and (out[dead] == 0).all()
    assert_close(out[~dead], F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)[~dead])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=case_id)
def test_masked_attention_equals_scaled_dot_product_attention(case, dtype):
    """masked_attention == F.scaled_dot_product_attention with the same bool mask; weights == torch.softmax."""
    check_masked_attention_matches_sdpa("cpu", dtype, *case)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=case_id)
def test_masked_attention_softmax_of_scores_plus_additive_mask_is_the_weights(case, dtype):
    """The weights equal torch.softmax(Q K^T / sqrt(d_k) + additive_mask(mask)), the notes' formula."""
    kind, lead, T_q, T_k = case
    g = gen(T_k)
    Q, K, V = attention_inputs(lead, T_q, T_k, dtype, "cpu", g)
    mask = make_mask(kind, lead, T_q, T_k, g)
    scores = torch.einsum("...id,...jd->...ij", Q, K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores + attention.additive_mask(mask, dtype=dtype)
    assert_close(attention.masked_attention(Q, K, V, mask)[1], torch.softmax(scores, -1))


@pytest.mark.parametrize("case", [c for c in ATTENTION_CASES if c[1] != ()], ids=case_id)
def test_masked_attention_gradients_equal_sdpa_gradients(case):
    """torch.autograd.grad of masked_attention wrt Q, K, V equals that of F.scaled_dot_product_attention (float64)."""
    check_masked_attention_gradients_match_sdpa("cpu", *case)


MHA_CASES = [(kind, T_q, T_k) for kind in ("none", "causal", "padding", "random") for T_q, T_k in LENGTHS]


@pytest.mark.parametrize("kind,T_q,T_k", MHA_CASES, ids=str)
def test_masked_attention_equals_one_head_multihead_attention_with_the_inverted_mask(kind, T_q, T_k):
    """nn.MultiheadAttention (1 head, identity projections, no bias, attn_mask=~mask) agrees, forward and backward."""
    B, d = 3, 6
    g = gen(T_q * 7 + T_k)
    dt = torch.float64
    Q, K, V = attention_inputs((B,), T_q, T_k, dt, "cpu", g, d_k=d, d_v=d, requires_grad=True)
    mask = make_mask(kind, (B,), T_q, T_k, g)
    mha = torch.nn.MultiheadAttention(d, num_heads=1, batch_first=True, dtype=dt)
    eye = torch.eye(d, dtype=dt)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([eye, eye, eye]))  # W_Q = W_K = W_V = I
        mha.in_proj_bias.zero_()
        mha.out_proj.weight.copy_(eye)
        mha.out_proj.bias.zero_()
    # MultiheadAttention's attn_mask says True = blocked, the opposite polarity;
    # a 3-D one must be exactly (B * num_heads, T_q, T_k).
    blocked = None if mask is None else ~(mask if mask.dim() == 2 else mask.expand(B, T_q, T_k))
    expected_out, expected_w = mha(Q, K, V, attn_mask=blocked, need_weights=True)
    out, weights = attention.masked_attention(Q, K, V, mask)
    assert_close(out, expected_out)
    assert_close(weights, expected_w)
    G = randn(g, B, T_q, d)
    for name, a, b in zip("QKV", grads(out, (Q, K, V), G), grads(expected_out, (Q, K, V), G)):
        assert_close(a, b, msg=lambda m: f"d out / d {name} vs MultiheadAttention: {m}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", LEADS, ids=str)
def test_masked_attention_with_one_key_returns_its_value(lead, dtype):
    """n = 1: every query puts weight exactly 1 on the only key and gets v_1 back."""
    g = gen()
    Q, K, V = attention_inputs(lead, 4, 1, dtype, "cpu", g)
    out, weights = attention.masked_attention(Q, K, V)
    assert (weights == 1).all()
    assert torch.equal(out, V.expand(*lead, 4, V.shape[-1]))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", LEADS, ids=str)
def test_first_causal_position_attends_to_itself_alone(lead, dtype):
    """Under a causal mask position 0 has weight exactly 1 on key 0, exactly 0 elsewhere, and outputs v_0."""
    g = gen()
    Q, K, V = attention_inputs(lead, 5, 5, dtype, "cpu", g)
    out, weights = attention.masked_attention(Q, K, V, torch.ones(5, 5).tril().bool())
    assert (weights[..., 0, 0] == 1).all() and (weights[..., 0, 1:] == 0).all()
    assert_close(out[..., 0, :], V[..., 0, :])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kind", ["none", "causal", "random"])
def test_equal_scores_give_uniform_weights_over_the_allowed_keys(kind, dtype):
    """All scores equal (Q = 0): each weight is 1 / (number of allowed keys) and the output their mean value."""
    g = gen()
    _, K, V = attention_inputs((2, 3), 6, 6, dtype, "cpu", g)
    Q = torch.zeros(2, 3, 6, 8, dtype=dtype)
    mask = make_mask(kind, (2, 3), 6, 6, g)
    allowed = torch.ones(2, 3, 6, 6, dtype=dtype) if mask is None else mask.expand(2, 3, 6, 6).to(dtype)
    uniform = allowed / allowed.sum(-1, keepdim=True)
    out, weights = attention.masked_attention(Q, K, V, mask)
    assert_close(weights, uniform)
    assert_close(out, uniform @ V)


@pytest.mark.parametrize("with_mask", [False, True], ids=["no-mask", "empty-mask"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_empty_source_gives_a_zero_output_and_empty_weights(dtype, with_mask):
    """T_k = 0: weights of shape (B, T_q, 0), output all zeros, no NaN ("nothing to sum over")."""
    check_empty_source("cpu", dtype, with_mask)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_fully_masked_row_gets_zero_weights_and_a_zero_output(dtype):
    """A query with no allowed key gets zero weights and a zero output; the other rows equal SDPA's."""
    check_fully_masked_row("cpu", dtype)


def test_gradients_stay_finite_for_fully_masked_rows_and_an_empty_source():
    """Backpropagating through a fully masked row or T_k = 0 gives finite (not NaN) gradients."""
    g = gen()
    for T_k, mask in ((5, torch.zeros(3, 5, dtype=torch.bool)), (0, None)):
        Q, K, V = attention_inputs((2,), 3, T_k, torch.float64, "cpu", g, requires_grad=True)
        out, _ = attention.masked_attention(Q, K, V, mask)
        for gr in grads(out, (Q, K, V), torch.ones_like(out)):
            assert torch.isfinite(gr).all()


@pytest.mark.parametrize("kind", ["none", "causal", "random"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_very_large_scores_give_finite_weights_that_sum_to_1(dtype, kind):
    """Scores multiplied by 1e4 stay finite, rows still sum to 1 and match torch.softmax."""
    g = gen()
    Q, K, V = attention_inputs((2,), 5, 5, dtype, "cpu", g)
    Q = Q * 1e4
    mask = make_mask(kind, (2,), 5, 5, g)
    out, weights = attention.masked_attention(Q, K, V, mask)
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert_close(weights.sum(-1), torch.ones(2, 5, dtype=dtype))
    assert_close(weights, torch.softmax(masked_scaled_scores(Q, K, mask), -1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_causal_output_at_position_i_does_not_change_when_later_tokens_change(dtype):
    """Self-attention under causal_mask: replacing token j changes no output at i < j (but does change i = j)."""
    B, T, D, d = 2, 6, 8, 4
    g = gen()
    X = randn(g, B, T, D, dtype=dtype)
    W_Q, W_K, W_V = (randn(g, d, D, dtype=dtype) for _ in range(3))

    def attend(X):
        return attention.masked_attention(X @ W_Q.T, X @ W_K.T, X @ W_V.T, attention.causal_mask(T))[0]

    base = attend(X)
    for j in range(1, T):
        X2 = X.clone()
        X2[:, j] = 10 * randn(g, B, D, dtype=dtype)
        out = attend(X2)
        for i in range(j):
            assert torch.allclose(out[:, i], base[:, i], **tol(dtype)), \
                f"future leak: output at position {i} changed when token {j} > {i} changed"
        assert not torch.allclose(out[:, j], base[:, j]), f"changing token {j} should change output {j}"


def test_masked_attention_rejects_a_mask_of_the_wrong_shape_naming_mask():
    """A (T_k, T_q) mask for (T_q, T_k) = (3, 5) scores is a ValueError naming the mask."""
    Q, K, V = attention_inputs((2,), 3, 5, torch.float64, "cpu", gen())
    with pytest.raises(ValueError, match=r"\bmask\b"):
        attention.masked_attention(Q, K, V, torch.ones(5, 3, dtype=torch.bool))


def test_masked_attention_rejects_a_mask_that_would_enlarge_the_output_naming_mask():
    """A (7, T_q, T_k) mask for unbatched scores is a ValueError (SDPA refuses it too), not a (7, T_q, d_v) output."""
    Q, K, V = attention_inputs((), 3, 5, torch.float64, "cpu", gen())
    with pytest.raises(ValueError, match=r"\bmask\b"):
        attention.masked_attention(Q, K, V, torch.ones(7, 3, 5, dtype=torch.bool))


def test_masked_attention_rejects_q_and_k_of_different_widths_naming_both():
    """Q (..., 8) against K (..., 6) is a ValueError naming Q and K."""
    g = gen()
    with pytest.raises(ValueError) as info:
        attention.masked_attention(randn(g, 2, 3, 8), randn(g, 2, 5, 6), randn(g, 2, 5, 4))
    assert re.search(r"\bQ\b", str(info.value)) and re.search(r"\bK\b", str(info.value)), str(info.value)


def test_masked_attention_rejects_k_and_v_of_different_lengths_naming_both():
    """K with 5 keys against V with 4 values is a ValueError naming K and V."""
    g = gen()
    with pytest.raises(ValueError) as info:
        attention.masked_attention(randn(g, 2, 3, 8), randn(g, 2, 5, 8), randn(g, 2, 4, 4))
    assert re.search(r"\bK\b", str(info.value)) and re.search(r"\bV\b", str(info.value)), str(info.value)


@pytest.mark.parametrize("mask_dtype", [torch.float32, torch.float64, torch.long, torch.uint8], ids=str)
def test_masked_attention_rejects_a_mask_that_is_not_bool_naming_mask(mask_dtype):
    """A 0/1 mask of another dtype (ambiguous polarity: additive or boolean?) is a ValueError naming the mask."""
    Q, K, V = attention_inputs((2,), 3, 5, torch.float64, "cpu", gen())
    with pytest.raises(ValueError, match=r"\bmask\b"):
        attention.masked_attention(Q, K, V, torch.ones(3, 5, dtype=mask_dtype))


# ================================================================== devices

def meta(*shape, dtype=torch.float32):
    return torch.empty(*shape, dtype=dtype, device="meta")


# Each case: (name, fn(dtype) -> list of (result, expected shape, expected dtype)).
META_CASES = [
    ("pairwise_scores", lambda dt: [(dot_products.pairwise_scores(meta(2, 5, 4, dtype=dt), meta(2, 7, 4, dtype=dt)),
                                     (2, 5, 7), dt)]),
    ("scaled_scores", lambda dt: [(dot_products.scaled_scores(meta(2, 5, 4, dtype=dt), meta(1, 7, 4, dtype=dt)),
                                   (2, 5, 7), dt)]),
    ("project_qkv", lambda dt: list(zip(
        dot_products.project_qkv(meta(2, 5, 4, dtype=dt), meta(3, 4, dtype=dt), meta(3, 4, dtype=dt),
                                 meta(6, 4, dtype=dt)),
        [(2, 5, 3), (2, 5, 3), (2, 5, 6)], [dt] * 3))),
    ("softmax", lambda dt: [(softmax(meta(2, 3, 4, dtype=dt), dim=1, temperature=0.5), (2, 3, 4), dt)]),
    ("log_softmax", lambda dt: [(log_softmax(meta(2, 3, 4, dtype=dt), dim=0, temperature=2.0), (2, 3, 4), dt)]),
    ("sequence_log_prob", lambda dt: [(sequence_log_prob(meta(2, 3, 5, dtype=dt), meta(2, 3, dtype=torch.long),
                                                         meta(2, 3, dtype=torch.bool)), (2,), dt)]),
    ("causal_mask", lambda dt: [(attention.causal_mask(5, device="meta"), (5, 5), torch.bool)]),
    ("bidirectional_mask", lambda dt: [(attention.bidirectional_mask(3, 5, device="meta"), (3, 5), torch.bool)]),
    ("padding_mask", lambda dt: [(attention.padding_mask(meta(2, 5, dtype=torch.bool)), (2, 1, 5), torch.bool)]),
    ("combine_masks", lambda dt: [(attention.combine_masks(meta(5, 5, dtype=torch.bool),
                                                           meta(2, 1, 5, dtype=torch.bool)), (2, 5, 5), torch.bool)]),
    ("additive_mask", lambda dt: [(attention.additive_mask(meta(3, 5, dtype=torch.bool), dtype=dt), (3, 5), dt),
                                  (attention.additive_mask(meta(3, 5, dtype=torch.bool)), (3, 5), torch.float32)]),
    ("masked_attention", lambda dt: list(zip(
        attention.masked_attention(meta(2, 3, 4, dtype=dt), meta(2, 5, 4, dtype=dt), meta(2, 5, 6, dtype=dt),
                                   meta(3, 5, dtype=torch.bool)),
        [(2, 3, 6), (2, 3, 5)], [dt] * 2))),
    ("masked_attention_no_mask_empty_source", lambda dt: list(zip(
        attention.masked_attention(meta(2, 3, 4, dtype=dt), meta(2, 0, 4, dtype=dt), meta(2, 0, 6, dtype=dt)),
        [(2, 3, 6), (2, 3, 0)], [dt] * 2))),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name,fn", META_CASES, ids=[name for name, _ in META_CASES])
def test_functions_return_tensors_on_the_meta_device_of_their_inputs(name, fn, dtype):
    """On 'meta' inputs each function returns 'meta' tensors of the expected shape and dtype (no tensor made on CPU)."""
    for result, shape, expected_dtype in fn(dtype):
        assert result.device.type == "meta", f"{name} returned a tensor on {result.device}"
        assert result.shape == shape and result.dtype == expected_dtype, (name, result.shape, result.dtype)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (torch.cuda.is_available() is False)")
class TestOnCuda:
    """The comparisons above, with every input on the GPU: results stay there, in the inputs' dtype."""

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("id_shape", ID_SHAPES, ids=str)
    def test_embeddings_equal_nn_embedding_on_cuda(self, id_shape, dtype):
        """embed_one_hot == embed_lookup == nn.Embedding == one-hot matmul on CUDA."""
        check_embeddings_match_torch("cuda", dtype, id_shape)
        check_embedding_gradients_agree("cuda", dtype, id_shape)

    def test_decode_accepts_a_cuda_tensor(self):
        """decode reads a 1-D CUDA LongTensor like the list of its ints."""
        vocab = tokens.build_vocab(FRUIT)
        ids = tokens.encode("pear mango fig", vocab)
        assert tokens.decode(torch.tensor(ids, device="cuda"), vocab) == tokens.decode(ids, vocab)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("q_shape,k_shape", SCORE_SHAPES, ids=str)
    def test_scores_equal_einsum_on_cuda(self, q_shape, k_shape, dtype):
        """pairwise_scores and scaled_scores equal einsum (/ sqrt(d_k)) on CUDA."""
        check_pairwise_scores("cuda", dtype, q_shape, k_shape)
        check_scaled_scores("cuda", dtype, q_shape, k_shape)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    def test_project_qkv_equals_linear_layers_on_cuda(self, dtype):
        """project_qkv equals three nn.Linear(bias=False) on CUDA."""
        check_project_qkv("cuda", dtype, (2, 3, 5, 6), 4, 2)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("shape,dim", SHAPE_DIMS, ids=str)
    def test_softmax_and_log_softmax_equal_torch_on_cuda(self, shape, dim, dtype):
        """softmax / log_softmax equal torch's at several temperatures on CUDA."""
        for temperature in TEMPERATURES:
            check_softmax_matches_torch("cuda", dtype, shape, dim, temperature)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    def test_sequence_log_prob_equals_cross_entropy_on_cuda(self, dtype):
        """sequence_log_prob equals -cross_entropy summed over unmasked steps on CUDA."""
        check_sequence_log_prob_matches_cross_entropy("cuda", dtype, 5, 9)

    def test_masks_are_made_on_cuda(self):
        """causal/bidirectional masks are built on the device asked for; the others stay on their input's."""
        causal = attention.causal_mask(5, device="cuda")
        assert causal.is_cuda and torch.equal(causal.cpu(), torch.ones(5, 5).tril().bool())
        assert attention.bidirectional_mask(3, 5, device="cuda").is_cuda
        valid = torch.rand(2, 5, generator=gen()).lt(0.6).cuda()
        pad = attention.padding_mask(valid)
        assert pad.is_cuda and attention.combine_masks(causal, pad).is_cuda
        M = attention.additive_mask(pad, dtype=torch.float64)
        assert M.is_cuda and M.dtype == torch.float64

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("case", [c for c in ATTENTION_CASES if c[1] == (2, 4)], ids=case_id)
    def test_masked_attention_equals_sdpa_on_cuda(self, case, dtype):
        """masked_attention equals F.scaled_dot_product_attention (and its gradients) on CUDA."""
        check_masked_attention_matches_sdpa("cuda", dtype, *case)
        check_masked_attention_gradients_match_sdpa("cuda", *case)

    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    def test_edge_cases_on_cuda(self, dtype):
        """Empty source and fully masked rows give zeros, not NaN, on CUDA."""
        check_empty_source("cuda", dtype, with_mask=False)
        check_empty_source("cuda", dtype, with_mask=True)
        check_fully_masked_row("cuda", dtype)
