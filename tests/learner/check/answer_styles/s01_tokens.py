"""Other correct styles of notebook 01 tokens: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "build_vocab": [
        ("collections.Counter", r'''
            import collections

            def build_vocab(texts, min_freq=1):
                if isinstance(texts, str) or min_freq < 1:
                    raise ValueError("texts must be a list of strings and min_freq >= 1")
                counts = collections.Counter(w for t in texts for w in t.lower().split())
                specials = ["<pad>", "<bos>", "<eos>", "<unk>"]
                kept = [w for w, c in sorted(counts.items(), key=lambda wc: (-wc[1], wc[0]))
                        if c >= min_freq and w not in specials]
                return {w: i for i, w in enumerate(specials + kept)}
        '''),
        # two stable sorts (alphabetical, then by count) and ids handed out one at a time
        ("two stable sorts", r'''
            def build_vocab(texts, min_freq=1):
                if not min_freq >= 1:
                    raise ValueError(f"min_freq={min_freq}")
                if type(texts) is str:
                    raise ValueError("a list of texts, please")
                counts = {}
                for text in texts:
                    for word in text.lower().split():
                        counts.setdefault(word, 0)
                        counts[word] += 1
                words = sorted(counts)                                  # alphabetical first ...
                words.sort(key=lambda w: counts[w], reverse=True)       # ... then by count (the sort is stable)
                vocab = {}
                for tok in ("<pad>", "<bos>", "<eos>", "<unk>"):
                    vocab[tok] = len(vocab)
                for w in words:
                    if counts[w] >= min_freq and w not in vocab:
                        vocab[w] = len(vocab)
                return vocab
        '''),
    ],
    "encode": [
        ("append in a loop", r'''
            def encode(text, vocab):
                ids = [vocab["<bos>"]]
                for word in text.lower().split():
                    ids.append(vocab[word] if word in vocab else vocab["<unk>"])
                ids.append(vocab["<eos>"])
                return ids
        '''),
        ("re.findall and map", r'''
            import re

            def encode(text, vocab):
                words = re.findall(r"\S+", text.lower())
                unk = vocab["<unk>"]
                return [vocab["<bos>"], *map(lambda w: vocab.get(w, unk), words), vocab["<eos>"]]
        '''),
    ],
    "decode": [
        # cut at the first <eos> first, validate what is left, then filter
        ("truncate at eos first", r'''
            def decode(ids, vocab):
                id_to_token = dict(zip(vocab.values(), vocab.keys()))
                ids = [int(i) for i in ids]
                eos = vocab["<eos>"]
                if eos in ids:
                    ids = ids[:ids.index(eos)]
                bad = [i for i in ids if i not in id_to_token]
                if bad:
                    raise ValueError(f"id {bad[0]} is not in the vocabulary")
                skip = {vocab["<pad>"], vocab["<bos>"]}
                return " ".join(id_to_token[i] for i in ids if i not in skip)
        '''),
        # a list indexed by id and a while loop
        ("inverse list and while loop", r'''
            def decode(ids, vocab):
                if torch.is_tensor(ids):
                    ids = ids.tolist()
                tokens = [None] * (max(vocab.values()) + 1)
                for tok, i in vocab.items():
                    tokens[i] = tok
                words, k = [], 0
                while k < len(ids):
                    i = ids[k]
                    if not 0 <= i < len(tokens) or tokens[i] is None:
                        raise ValueError(f"id {i} is outside the vocabulary")
                    if tokens[i] == "<eos>":
                        break
                    if tokens[i] not in ("<pad>", "<bos>"):
                        words.append(tokens[i])
                    k += 1
                return " ".join(words)
        '''),
    ],
    "pad_batch": [
        ("pad_sequence", r'''
            def pad_batch(sequences, pad_id=0):
                if not sequences:
                    raise ValueError("no sequences")
                rows = [torch.as_tensor(list(s), dtype=torch.long) for s in sequences]
                ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_id)
                lengths = torch.tensor([len(r) for r in rows])
                mask = torch.arange(ids.shape[1]).unsqueeze(0) < lengths.unsqueeze(1)
                return ids, mask
        '''),
        # padded Python lists, turned into tensors at the end
        ("python lists", r'''
            def pad_batch(sequences, pad_id=0):
                if len(sequences) < 1:
                    raise ValueError("pad_batch needs at least one sequence")
                T = max(map(len, sequences))
                ids = [list(s) + [pad_id] * (T - len(s)) for s in sequences]
                mask = [[True] * len(s) + [False] * (T - len(s)) for s in sequences]
                return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.bool)
        '''),
    ],
    "embed_one_hot": [
        ("einsum", r'''
            def embed_one_hot(ids, E):
                V = E.shape[0]
                if ((ids < 0) | (ids >= V)).any():
                    raise ValueError(f"ids must lie in [0, {V})")
                one_hot = F.one_hot(ids, num_classes=V).to(E.dtype)        # (..., V)
                return torch.einsum("...v,vd->...d", one_hot, E)
        '''),
        # the one-hot rows are rows of the identity matrix
        ("rows of the identity", r'''
            def embed_one_hot(ids, E):
                V, D = E.shape
                if ids.numel() > 0 and not (0 <= ids.min().item() and ids.max().item() < V):
                    raise ValueError("an id lies outside the vocabulary")
                identity = torch.eye(V, dtype=E.dtype, device=E.device)
                return identity[ids] @ E                                    # (..., V) @ (V, D)
        '''),
    ],
    "embed_lookup": [
        ("F.embedding", r'''
            def embed_lookup(ids, E):
                if ids.numel() and bool(((ids < 0) | (ids >= E.size(0))).any()):
                    raise ValueError("ids outside [0, V)")
                return F.embedding(ids, E)
        '''),
        ("index_select", r'''
            def embed_lookup(ids, E):
                V, D = E.shape
                flat = ids.reshape(-1)
                if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= V):
                    raise ValueError(f"ids must be in [0, {V})")
                return E.index_select(0, flat).reshape(*ids.shape, D)
        '''),
    ],
}
