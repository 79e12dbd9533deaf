"""Known mistakes of notebook 01 (tokens and embeddings): wrong variants of ``solutions/tokens.py``.

The checks run them on the same inputs as the learner's function; when the
learner's output matches one of them, the failure message names the mistake.
Each is one edit away from a correct answer; some call the reference itself (the
tests compile them as learner code calling the learner's own functions).
"""
import torch

from .. import tokens


def build_vocab_no_specials(texts, min_freq=1):
    v = tokens.build_vocab(texts, min_freq)
    kept = [t for t in v if t not in tokens.SPECIALS]
    return {t: i for i, t in enumerate(kept)}


def build_vocab_alphabetical(texts, min_freq=1):
    v = tokens.build_vocab(texts, min_freq)
    kept = sorted(t for t in v if t not in tokens.SPECIALS)
    return {t: i for i, t in enumerate(list(tokens.SPECIALS) + kept)}


def encode_no_bos_eos(text, vocab):
    return tokens.encode(text, vocab)[1:-1]


def decode_keeps_specials(ids, vocab):
    inverse = {i: t for t, i in vocab.items()}
    return " ".join(inverse[int(i)] for i in (ids.tolist() if torch.is_tensor(ids) else ids))


def pad_batch_mask_inverted(sequences, pad_id=0):
    ids, mask = tokens.pad_batch(sequences, pad_id)
    return ids, ~mask


def pad_batch_left(sequences, pad_id=0):
    ids, mask = tokens.pad_batch([list(s)[::-1] for s in sequences], pad_id)
    return ids.flip(-1), mask.flip(-1)


def embed_off_by_one(ids, E):
    return E[(ids + 1) % E.shape[0]]


def embed_off_by_one_unwrapped(ids, E):
    """The same slip as it is written: the last id's row after it does not exist (an IndexError)."""
    return E[ids + 1]


def embed_transposed(ids, E):
    return E.T[ids % E.shape[1]] if E.shape[0] != E.shape[1] else E.T[ids]


def embed_one_hot_transposed(ids, E):
    """The one-hot rows times E transposed: (..., V) @ (D, V) fails unless V = D, and then gives E.T[ids]."""
    return torch.nn.functional.one_hot(ids, E.shape[0]).to(E.dtype) @ E.mT


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_embedding_table_size_added():
    return 1064


def answer_embedding_table_size_one_row():
    return 64


def answer_embedding_table_size_rows():
    return 1000


def answer_one_hot_product_sum():
    return "a"


def answer_one_hot_product_column():
    return "b"


def answer_one_hot_product_number():
    return "d"
