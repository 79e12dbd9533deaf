"""Notebook 01: tokens, vocabularies, padding and embeddings."""
import torch

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


def build_vocab(texts, min_freq=1):
    """Build a vocabulary (token -> id) from whitespace-tokenised, lower-cased texts.

    Args:
        texts: list of strings.
        min_freq: keep a token only if it occurs at least this many times (>= 1).

    Returns:
        dict mapping token to id. The special tokens come first with ids
        0, 1, 2, 3 in the order <pad>, <bos>, <eos>, <unk>; then the kept tokens
        ordered by decreasing count, ties broken alphabetically.
    """
    ### BEGIN SOLUTION
    if isinstance(texts, str):
        raise ValueError("texts must be a list of strings, not a single string")
    if int(min_freq) < 1:
        raise ValueError(f"min_freq must be >= 1, got {min_freq}")
    counts = {}
    for text in texts:
        for token in text.lower().split():
            counts[token] = counts.get(token, 0) + 1
    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
    kept = sorted((t for t, c in counts.items() if c >= min_freq and t not in specials),
                  key=lambda t: (-counts[t], t))
    return {token: i for i, token in enumerate(specials + kept)}
    ### END SOLUTION


def encode(text, vocab):
    """Turn a string into ids: <bos>, one id per lower-cased word, <eos>.

    Words missing from ``vocab`` become the id of <unk>.

    Returns:
        list of ints of length (number of words + 2).
    """
    ### BEGIN SOLUTION
    unk = vocab["<unk>"]
    return [vocab["<bos>"]] + [vocab.get(w, unk) for w in text.lower().split()] + [vocab["<eos>"]]
    ### END SOLUTION


def decode(ids, vocab):
    """Turn ids back into a string of space-separated words.

    <pad> and <bos> are skipped, decoding stops at the first <eos>, and <unk>
    is kept as the word "<unk>". ``ids`` may be a list of ints or a 1-D tensor.
    """
    ### BEGIN SOLUTION
    inverse = {i: t for t, i in vocab.items()}
    words = []
    for i in (ids.tolist() if torch.is_tensor(ids) else ids):
        if int(i) not in inverse:
            raise ValueError(f"id {int(i)} is not in the vocabulary (ids run from 0 to {len(vocab) - 1})")
        token = inverse[int(i)]
        if token == "<eos>":
            break
        if token in ("<pad>", "<bos>"):
            continue
        words.append(token)
    return " ".join(words)
    ### END SOLUTION


def pad_batch(sequences, pad_id=0):
    """Stack id lists of different lengths into one (B, T) tensor, right-padded.

    Args:
        sequences: list of B lists of ints (B >= 1); T is the longest length.
        pad_id: id written into the padding positions.

    Returns:
        ids: LongTensor (B, T).
        mask: BoolTensor (B, T), True where a real token sits, False on padding.
    """
    ### BEGIN SOLUTION
    if len(sequences) == 0:
        raise ValueError("sequences must hold at least one sequence")
    T = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), T), dtype=torch.bool)
    for b, seq in enumerate(sequences):
        ids[b, :len(seq)] = torch.as_tensor(list(seq), dtype=torch.long)
        mask[b, :len(seq)] = True
    return ids, mask
    ### END SOLUTION


def embed_one_hot(ids, E):
    """Embed token ids as one-hot vectors times the embedding matrix.

    Args:
        ids: LongTensor of any shape (...), values in [0, V).
        E: embedding matrix (V, D).

    Returns:
        tensor (..., D) with E's dtype and device: row ``ids[...]`` of E.
    """
    ### BEGIN SOLUTION
    V = E.shape[0]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= V):
        raise ValueError(f"ids must lie in [0, {V}) for an embedding matrix with V={V} rows")
    one_hot = torch.nn.functional.one_hot(ids, V).to(E.dtype)  # (..., V)
    return one_hot @ E  # (..., D)
    ### END SOLUTION


def embed_lookup(ids, E):
    """Embed token ids by indexing rows of E; equal to ``embed_one_hot``.

    Args:
        ids: LongTensor of any shape (...), values in [0, V).
        E: embedding matrix (V, D).

    Returns:
        tensor (..., D).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    V = E.shape[0]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= V):
        raise ValueError(f"ids must lie in [0, {V}) for an embedding matrix with V={V} rows")
    return E[ids]  # (..., D)
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_embedding_table_size():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 64000
    ### END SOLUTION


def answer_one_hot_product():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "c"
    ### END SOLUTION
