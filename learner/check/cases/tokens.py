"""Notebook 01, tokens and embeddings: cases, properties and known mistakes (``solutions/mistakes/tokens.py``)."""
import torch

from .common import (Case, Exercise, dn, gen, pick_dtype, pick_int, seeded_randn, register, Choice, Integer, question)

_WORDS = ("the cat sat on mat a dog ran to river bank money we saw big small red blue it "
          "is was and of in".split())


def _sentence(g, n):
    return " ".join(_WORDS[pick_int(g, 0, len(_WORDS) - 1)] for _ in range(n))


def _corpus(g, big):
    return [_sentence(g, pick_int(g, 1, 12 if big else 6)) for _ in range(pick_int(g, 1, 8 if big else 4))]


def _vocab(texts):
    # the vocabulary handed to encode/decode is built here, not by the reference
    counts = {}
    for t in texts:
        for w in t.lower().split():
            counts[w] = counts.get(w, 0) + 1
    kept = sorted(counts, key=lambda w: (-counts[w], w))
    return {w: i for i, w in enumerate(["<pad>", "<bos>", "<eos>", "<unk>"] + kept)}


def _build_vocab_case(g, big):
    texts = _corpus(g, big)
    if pick_int(g, 0, 2) == 0:
        texts = [t.upper() if i % 2 else t for i, t in enumerate(texts)]
    min_freq = pick_int(g, 1, 2)
    return Case(f"{len(texts)} texts, min_freq={min_freq}", (texts,), {"min_freq": min_freq})


def _build_vocab_edge():
    return [
        Case("one text with one word", (["hello"],)),
        Case("ties in count are broken alphabetically", (["b a c", "c a b"],)),
        Case("upper and lower case are the same word", (["The the THE cat"],)),
        Case("min_freq=2 drops words seen once", (["a a b", "c a b d"],), {"min_freq": 2}),
        Case("an empty corpus still has the four special tokens", ([],)),
        Case("min_freq=0 is an error", (["a b"],), {"min_freq": 0}, raises="ValueError"),
        Case("one string instead of a list of texts is an error (a loop would walk its characters)", ("a b a",),
             raises="ValueError"),
    ]


def _encode_case(g, big):
    texts = _corpus(g, big)
    vocab = _vocab(texts[:-1] or texts)
    return Case(f"a {len(texts[-1].split())}-word sentence, vocabulary of {len(vocab)}", (texts[-1], vocab))


def _encode_edge():
    v = _vocab(["the cat sat"])
    return [
        Case("empty string gives just <bos> <eos>", ("", v)),
        Case("unknown words become <unk>", ("the zebra sat", v)),
        Case("capital letters are lower-cased", ("The CAT", v)),
    ]


def _decode_case(g, big):
    texts = _corpus(g, big)
    vocab = _vocab(texts)
    ids = [1] + [pick_int(g, 3, len(vocab) - 1) for _ in range(pick_int(g, 0, 8))] + [2] + [0] * pick_int(g, 0, 3)
    as_tensor = pick_int(g, 0, 1) == 1
    return Case(f"{len(ids)} ids{' as a tensor' if as_tensor else ''}, vocabulary of {len(vocab)}",
                (torch.tensor(ids) if as_tensor else ids, vocab))


def _decode_edge():
    v = _vocab(["the cat sat"])
    return [
        Case("stops at the first <eos>", ([1, v["the"], 2, v["cat"], 2], v)),
        Case("skips padding and <bos>", ([1, v["cat"], 0, v["sat"], 0, 0], v)),
        Case("keeps <unk> as a word", ([1, 3, v["sat"], 2], v)),
        Case("an empty list gives an empty string", ([], v)),
        Case("ids given as a 1-D tensor, not a list", (torch.tensor([1, v["the"], v["cat"], 2, 0]), v)),
        Case("an id outside the vocabulary is an error", ([1, 99], v), raises="ValueError"),
    ]


def _pad_case(g, big):
    B = pick_int(g, 1, 6 if big else 4)
    seqs = [[pick_int(g, 1, 30) for _ in range(pick_int(g, 1, 9 if big else 6))] for _ in range(B)]
    pad = 0 if pick_int(g, 0, 2) else pick_int(g, 1, 5)
    return Case(f"B={B} sequences of lengths {[len(s) for s in seqs]}, pad_id={pad}", (seqs,), {"pad_id": pad})


def _pad_edge():
    return [
        Case("one sequence, nothing to pad", ([[5, 6, 7]],)),
        Case("sequences of equal length", ([[1, 2], [3, 4]],)),
        Case("a sequence of length 0 is all padding", ([[4, 5], []],)),
        Case("an empty batch is an error", ([],), raises="ValueError"),
    ]


def _embed_case(g, big):
    V, D = pick_int(g, 2, 20), pick_int(g, 1, 8)
    dtype = pick_dtype(g)
    shape = tuple(pick_int(g, 1, 5) for _ in range(pick_int(g, 1, 3)))
    ids = torch.randint(0, V, shape, generator=g)
    return Case(f"ids of shape {shape}, E of shape ({V}, {D}), {dn(dtype)}", (ids, seeded_randn(g, V, D, dtype=dtype)))


def _embed_edge():
    g = gen(11)
    E = seeded_randn(g, 5, 3)
    return [
        Case("a single id (0-d tensor)", (torch.tensor(4), E)),
        Case("V = D (a square matrix)", (torch.tensor([[0, 1, 2], [2, 1, 0]]), seeded_randn(g, 3, 3))),
        Case("the first and last rows", (torch.tensor([0, 4]), E)),
        Case("no ids at all", (torch.zeros(0, dtype=torch.long), E)),
        Case("an id outside [0, V) is an error", (torch.tensor([5]), E), raises="ValueError"),
        Case("an id of -1 is an error (PyTorch would read it as the last row)", (torch.tensor([2, -1]), E),
             raises="ValueError"),
    ]


register(
    __name__,
    Exercise("build_vocab", "tokens:build_vocab", _build_vocab_case, _build_vocab_edge,
             mistakes=[("tokens:build_vocab_no_specials",
                        "the special tokens <pad> <bos> <eos> <unk> are missing: they take ids 0-3"),
                       ("tokens:build_vocab_alphabetical",
                        "the tokens are sorted alphabetically; sort by decreasing count first, "
                        "alphabetically only to break ties")],
             tensor_inputs=False),
    Exercise("encode", "tokens:encode", _encode_case, _encode_edge,
             mistakes=[("tokens:encode_no_bos_eos", "the ids lack <bos> at the start and <eos> at the end")],
             tensor_inputs=False),
    Exercise("decode", "tokens:decode", _decode_case, _decode_edge,
             mistakes=[("tokens:decode_keeps_specials",
                        "special tokens were kept: skip <pad>/<bos> and stop at <eos>")],
             tensor_inputs=False),
    Exercise("pad_batch", "tokens:pad_batch", _pad_case, _pad_edge,
             mistakes=[("tokens:pad_batch_mask_inverted",
                        "the mask is inverted: True must mark real tokens, False padding"),
                       ("tokens:pad_batch_left", "the padding went on the left; pad on the right")],
             tensor_inputs=False),
    Exercise("embed_one_hot", "tokens:embed_one_hot", _embed_case, _embed_edge,
             mistakes=[("tokens:embed_off_by_one", "each token got the row after its own: ids count from 0"),
                       ("tokens:embed_transposed",
                        "the embedding matrix was used transposed: E is (V, D), one row per token"),
                       ("tokens:embed_one_hot_transposed",
                        "the embedding matrix was used transposed: E is (V, D), one row per token, so the one-hot "
                        "rows (..., V) multiply E itself, one_hot @ E")]),
    Exercise("embed_lookup", "tokens:embed_lookup", _embed_case, _embed_edge,
             mistakes=[("tokens:embed_off_by_one", "each token got the row after its own: ids count from 0"),
                       ("tokens:embed_off_by_one_unwrapped", "each token got the row after its own: ids count from 0"),
                       ("tokens:embed_transposed",
                        "the embedding matrix was used transposed: E is (V, D), one row per token")]),
    question("answer_embedding_table_size", "tokens:answer_embedding_table_size", Integer(), wrong=[
        ("tokens:answer_embedding_table_size_added",
         "V + D adds the two sizes: E has one row of D numbers for each of the V ids, V × D numbers in all"),
        ("tokens:answer_embedding_table_size_one_row",
         "64 is one row, the vector of one id: E holds a row for every id of the vocabulary"),
        ("tokens:answer_embedding_table_size_rows", "1000 counts the rows; each row holds D = 64 numbers")]),
    question("answer_one_hot_product", "tokens:answer_one_hot_product", Choice("a", "b", "c", "d"), wrong=[
        ("tokens:answer_one_hot_product_sum",
         "every other entry of the one-hot vector is 0, so every other row of E is multiplied by 0"),
        ("tokens:answer_one_hot_product_column",
         "E has V rows of D numbers; a (1 × V) vector times a (V × D) matrix picks one of its rows"),
        ("tokens:answer_one_hot_product_number",
         "a (1 × V) vector times a (V × D) matrix is a (1 × D) vector: the id's embedding")]),
)
