"""Correct answers in other styles than the reference: the grader must accept every one of them.

For every exercise of ``learner.check.EXERCISES`` this file holds at least two correct answers written the way other
students might: einsum instead of matmul, explicit Python loops, library calls (torch.softmax, torch.logsumexp,
F.cross_entropy, F.scaled_dot_product_attention, pad_sequence, ...), preallocated outputs filled in a loop, float64
inside and a cast back, other validation code raising the same exception class. Each follows the rules of the
reference's docstring (shapes, dtype kept, new tensors on the inputs' device, zeros rather than NaN for a query with
nothing to attend to, the exception class for bad inputs) and uses nothing from ``solutions``, ``learner.blocks``
or ``learner.widgets``.

Each answer is compiled as a notebook cell would be: the read-only set-up (``LEARNER_PRELUDE``), the notebook's
ready-made parts (the course table's ``setup``, ``learner/syllabus.py``), the notebook's other answer cells (the reference's source, as a
learner who got them right), then the answer itself. It must pass all four parts: basic, edge, hidden-basic, hidden.
"""
import re
import textwrap

import pytest

import learner.check
from coursekit.sync import solution_source
from helpers import LEARNER_PRELUDE
from learner.check import EXERCISES, CheckFailed, check
from learner.syllabus import NOTEBOOKS


def learner_function(name, src):
    """Exercise ``name`` answered with ``src``, compiled in its notebook's namespace like a notebook cell."""
    notebook = EXERCISES[name].notebook
    ns = {"__name__": "__main__"}
    exec(LEARNER_PRELUDE, ns)
    exec(NOTEBOOKS[notebook].setup, ns)
    for other, ex in EXERCISES.items():
        if ex.notebook == notebook and other != name:
            exec(compile(solution_source(other), f"<cell {other}>", "exec"), ns)
    exec(compile(textwrap.dedent(src), f"<cell {name}>", "exec"), ns)
    return ns[name]


# exercise -> [(what makes the style different, source of the answer cell)]
STYLES = {
    # ============================================================ 01 tokens
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
    # ============================================================ 02 dot products
    "pairwise_scores": [
        ("einsum", r'''
            def pairwise_scores(Q, K):
                if Q.size(-1) != K.size(-1):
                    raise ValueError("Q and K need the same width d_k")
                return torch.einsum("...id,...jd->...ij", Q, K)
        '''),
        ("broadcast multiply and sum", r'''
            def pairwise_scores(Q, K):
                d_q, d_k = Q.shape[-1], K.shape[-1]
                if d_q != d_k:
                    raise ValueError(f"widths {d_q} and {d_k} differ")
                return (Q.unsqueeze(-2) * K.unsqueeze(-3)).sum(dim=-1)     # (..., T_q, 1, d) * (..., 1, T_k, d)
        '''),
    ],
    "project_qkv": [
        ("F.linear", r'''
            def project_qkv(X, W_Q, W_K, W_V):
                D = X.shape[-1]
                if any(W.dim() != 2 or W.shape[1] != D for W in (W_Q, W_K, W_V)) or W_Q.shape[0] != W_K.shape[0]:
                    raise ValueError("W_Q, W_K must be (d_k, D) and W_V (d_v, D)")
                return F.linear(X, W_Q), F.linear(X, W_K), F.linear(X, W_V)
        '''),
        # one fused (2 d_k + d_v, D) projection, then split
        ("fused projection, then split", r'''
            def project_qkv(X, W_Q, W_K, W_V):
                D = X.shape[-1]
                for W in (W_Q, W_K, W_V):
                    if W.ndim != 2 or W.shape[-1] != D:
                        raise ValueError(f"a weight of shape {tuple(W.shape)} does not take inputs of width {D}")
                d_k, d_v = W_Q.shape[0], W_V.shape[0]
                if W_K.shape[0] != d_k:
                    raise ValueError("W_Q and W_K must give the same width")
                W = torch.cat([W_Q, W_K, W_V], dim=0)                      # (2 d_k + d_v, D)
                Q, K, V = torch.split(X @ W.T, [d_k, d_k, d_v], dim=-1)
                return Q, K, V
        '''),
    ],
    "scaled_scores": [
        ("einsum times d_k ** -0.5", r'''
            def scaled_scores(Q, K):
                if Q.shape[-1] != K.shape[-1]:
                    raise ValueError("Q and K must have the same width")
                return torch.einsum("...qd,...kd->...qk", Q, K) * Q.shape[-1] ** -0.5
        '''),
        ("queries scaled first", r'''
            def scaled_scores(Q, K):
                d_k = K.size(-1)
                if Q.size(-1) != d_k:
                    raise ValueError(f"Q has width {Q.size(-1)}, K has width {d_k}")
                return torch.matmul(Q / math.sqrt(d_k), K.mT)
        '''),
    ],
    "score_variance": [
        # q and k drawn in one call, dot products by einsum
        ("one draw, einsum", r'''
            def score_variance(d_k, n_pairs=20000, seed=0):
                if d_k < 1:
                    raise ValueError("d_k must be at least 1")
                g = torch.Generator().manual_seed(seed)
                q, k = torch.randn(2, n_pairs, d_k, generator=g, dtype=torch.float64)
                raw = torch.einsum("nd,nd->n", q, k)
                return float(raw.var()), float((raw / d_k ** 0.5).var())
        '''),
        # batched matmul of (1, d) by (d, 1), the variances by the statistics module
        ("bmm and statistics.variance", r'''
            import statistics

            def score_variance(d_k, n_pairs=20000, seed=0):
                if not int(d_k) >= 1:
                    raise ValueError(f"d_k={d_k}")
                gen = torch.Generator()
                gen.manual_seed(seed)
                q = torch.randn(n_pairs, d_k, generator=gen, dtype=torch.float64)
                k = torch.randn(n_pairs, d_k, generator=gen, dtype=torch.float64)
                raw = (q.unsqueeze(1) @ k.unsqueeze(2)).flatten().tolist()
                return statistics.variance(raw), statistics.variance([s / math.sqrt(d_k) for s in raw])
        '''),
    ],
    # ============================================================ 03 softmax
    "softmax": [
        ("torch.softmax, NaN rows zeroed", r'''
            def softmax(x, dim=-1, temperature=1.0):
                if temperature <= 0:
                    raise ValueError(f"temperature must be positive, got {temperature}")
                return torch.nan_to_num(torch.softmax(x / temperature, dim=dim), nan=0.0)
        '''),
        ("exp of z minus logsumexp", r'''
            def softmax(x, dim=-1, temperature=1.0):
                if not temperature > 0:
                    raise ValueError("temperature must be > 0")
                z = x / temperature
                lse = torch.logsumexp(z, dim=dim, keepdim=True)         # -inf for a slice that is all -inf
                return torch.where(lse == float("-inf"), torch.zeros_like(z), torch.exp(z - lse))
        '''),
    ],
    "log_softmax": [
        ("z minus logsumexp", r'''
            def log_softmax(x, dim=-1, temperature=1.0):
                if temperature <= 0:
                    raise ValueError("temperature must be positive")
                z = x / temperature
                lse = torch.logsumexp(z, dim=dim, keepdim=True)
                return torch.where(torch.isneginf(lse), torch.full_like(z, float("-inf")), z - lse)
        '''),
        ("float64 inside, max subtracted by hand", r'''
            def log_softmax(x, dim=-1, temperature=1.0):
                if not temperature > 0:
                    raise ValueError(f"bad temperature {temperature}")
                if x.shape[dim] == 0:
                    return x.clone()                                    # nothing to normalise: an empty result
                z = x.double() / temperature
                m = z.max(dim=dim, keepdim=True).values
                m = m.masked_fill(torch.isinf(m), 0.0)                  # an all -inf slice: no -inf - (-inf)
                shifted = z - m
                log_total = shifted.exp().sum(dim=dim, keepdim=True).log()
                out = (shifted - log_total).masked_fill(torch.isneginf(log_total), float("-inf"))
                return out.to(x.dtype)
        '''),
    ],
    "sequence_log_prob": [
        ("F.cross_entropy per position", r'''
            def sequence_log_prob(logits, targets, mask=None):
                if logits.ndim != 3 or tuple(targets.shape) != tuple(logits.shape[:2]):
                    raise ValueError("logits must be (B, T, V) and targets (B, T)")
                if mask is not None and mask.shape != targets.shape:
                    raise ValueError("mask must be (B, T)")
                if targets.dtype != torch.long:
                    raise ValueError("targets must be torch.long")
                if mask is not None:
                    targets = torch.where(mask, targets, torch.full_like(targets, -100))   # ignored below
                nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none", ignore_index=-100)
                return -nll.sum(dim=1)
        '''),
        # a preallocated (B,) result, += one position at a time
        ("loops over batch and positions", r'''
            def sequence_log_prob(logits, targets, mask=None):
                if logits.dim() != 3:
                    raise ValueError("logits must be (B, T, V)")
                B, T, V = logits.shape
                if targets.shape != (B, T) or (mask is not None and mask.shape != (B, T)):
                    raise ValueError("targets and mask must be (B, T)")
                if targets.dtype != torch.long:
                    raise ValueError("targets must be token ids")
                total = torch.zeros(B, dtype=logits.dtype, device=logits.device)
                for b in range(B):
                    for t in range(T):
                        if mask is not None and not mask[b, t]:
                            continue
                        row = logits[b, t]
                        total[b] += row[targets[b, t]] - torch.logsumexp(row, dim=0)
                return total
        '''),
    ],
    # ============================================================ 04 masks and attention
    "bidirectional_mask": [
        ("torch.full", r'''
            def bidirectional_mask(T_q, T_k, device=None):
                if min(T_q, T_k) < 0:
                    raise ValueError("lengths must not be negative")
                return torch.full((T_q, T_k), True, device=device)
        '''),
        ("empty, then fill_", r'''
            def bidirectional_mask(T_q, T_k, device=None):
                if T_q < 0 or T_k < 0:
                    raise ValueError(f"T_q={T_q}, T_k={T_k}")
                mask = torch.empty(T_q, T_k, dtype=torch.bool, device=device)
                mask.fill_(True)
                return mask
        '''),
    ],
    "causal_mask": [
        ("not strictly upper triangular", r'''
            def causal_mask(T, device=None):
                if T < 0:
                    raise ValueError("T must be >= 0")
                return ~torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)
        '''),
        ("row by row", r'''
            def causal_mask(T, device=None):
                if T < 0:
                    raise ValueError(f"negative length {T}")
                mask = torch.zeros(T, T, dtype=torch.bool, device=device)
                for i in range(T):
                    mask[i, :i + 1] = True
                return mask
        '''),
    ],
    "padding_mask": [
        ("unsqueeze", r'''
            def padding_mask(key_valid):
                if key_valid.dtype is not torch.bool:
                    raise ValueError("key_valid must be a bool tensor")
                if key_valid.ndim != 2:
                    raise ValueError("key_valid must be (B, T_k)")
                return key_valid.unsqueeze(1)
        '''),
        ("reshape", r'''
            def padding_mask(key_valid):
                if key_valid.dim() != 2 or key_valid.dtype != torch.bool:
                    raise ValueError(f"need a (B, T_k) bool mask, got {tuple(key_valid.shape)} {key_valid.dtype}")
                B, T_k = key_valid.shape
                return key_valid.reshape(B, 1, T_k)
        '''),
    ],
    "combine_masks": [
        ("functools.reduce", r'''
            import functools

            def combine_masks(*masks):
                present = [m for m in masks if m is not None]
                if any(m.dtype != torch.bool for m in present):
                    raise ValueError("masks must be bool tensors")
                if not present:
                    return None
                return functools.reduce(torch.logical_and, present)
        '''),
        ("broadcast, stack and all", r'''
            def combine_masks(*masks):
                present = []
                for m in masks:
                    if m is None:
                        continue
                    if not (torch.is_tensor(m) and m.dtype == torch.bool):
                        raise ValueError("every mask must be a bool tensor (True = may attend)")
                    present.append(m)
                if len(present) == 0:
                    return None
                return torch.stack(torch.broadcast_tensors(*present)).all(dim=0)
        '''),
    ],
    "additive_mask": [
        ("torch.where", r'''
            def additive_mask(mask, dtype=torch.float32):
                if mask.dtype != torch.bool:
                    raise ValueError("mask must be bool")
                if not torch.empty((), dtype=dtype).is_floating_point():
                    raise ValueError("dtype must be floating")
                zero = torch.tensor(0.0, dtype=dtype, device=mask.device)
                blocked = torch.tensor(float("-inf"), dtype=dtype, device=mask.device)
                return torch.where(mask, zero, blocked)
        '''),
        # log 1 = 0 and log 0 = -inf
        ("log of the float mask", r'''
            def additive_mask(mask, dtype=torch.float32):
                if mask.dtype is not torch.bool or not dtype.is_floating_point:
                    raise ValueError("a bool mask and a floating dtype are needed")
                return torch.log(mask.to(dtype))
        '''),
    ],
    "masked_attention": [
        # the mask's shape checked axis by axis, added as the notes' M, torch.softmax, NaN rows zeroed
        ("einsum, additive M, torch.softmax", r'''
            def masked_attention(Q, K, V, mask=None):
                if Q.shape[-1] != K.shape[-1]:
                    raise ValueError("Q and K must have the same width")
                if K.shape[-2] != V.shape[-2]:
                    raise ValueError("K and V must have the same length")
                scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
                if mask is not None:
                    if mask.dtype != torch.bool:
                        raise ValueError("mask must be bool")
                    if mask.dim() > scores.dim() or any(
                            m not in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores.shape))):
                        raise ValueError(f"mask {tuple(mask.shape)} does not fit scores {tuple(scores.shape)}")
                    M = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
                    M = M.masked_fill(~mask, float("-inf"))
                    scores = scores + M
                weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)     # no allowed key: 0/0 -> 0
                return torch.einsum("...qk,...kd->...qd", weights, V), weights
        '''),
        # the output from SDPA with the mask converted to an additive float mask, the weights in float64
        ("SDPA output, float64 weights", r'''
            def masked_attention(Q, K, V, mask=None):
                d_k, T_k = Q.size(-1), K.size(-2)
                if K.size(-1) != d_k or V.size(-2) != T_k:
                    raise ValueError("Q, K and V do not fit together")
                scores = (Q.double() @ K.double().transpose(-2, -1)) / math.sqrt(d_k)
                allowed = torch.ones(scores.shape, dtype=torch.bool, device=Q.device)
                if mask is not None:
                    if mask.dtype != torch.bool:
                        raise ValueError("mask must be a bool tensor")
                    try:
                        allowed = torch.broadcast_to(mask, scores.shape)
                    except RuntimeError as exc:
                        raise ValueError(f"mask of shape {tuple(mask.shape)} does not fit the scores") from exc
                weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                weights = torch.where(allowed.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
                if T_k == 0:
                    out = torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
                else:
                    bias = torch.zeros(allowed.shape, dtype=Q.dtype, device=Q.device)
                    bias = bias.masked_fill(~allowed, float("-inf"))
                    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=bias).nan_to_num(0.0)
                return out, weights.to(Q.dtype)
        '''),
        # HF-style: blocked scores set to the dtype's lowest finite value, rows with no allowed key zeroed
        ("finfo.min fill, dead rows zeroed", r'''
            def masked_attention(Q, K, V, mask=None):
                if Q.shape[-1] != K.shape[-1] or K.shape[-2] != V.shape[-2]:
                    raise ValueError(f"Q {tuple(Q.shape)}, K {tuple(K.shape)} and V {tuple(V.shape)} do not fit")
                scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
                dead = None
                if mask is not None:
                    if mask.dtype != torch.bool:
                        raise ValueError("mask must be bool")
                    try:
                        fits = tuple(torch.broadcast_shapes(mask.shape, scores.shape)) == tuple(scores.shape)
                    except RuntimeError:
                        fits = False
                    if not fits:
                        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores")
                    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
                    dead = ~mask.any(dim=-1, keepdim=True)
                weights = torch.softmax(scores, dim=-1)
                if dead is not None:
                    weights = weights.masked_fill(dead, 0.0)
                return torch.matmul(weights, V), weights
        '''),
    ],
    # ============================================================ 05 RNN encoder-decoder
    "rnn_cell": [
        ("F.linear", r'''
            def rnn_cell(x_t, h_prev, W_x, W_h, b):
                H, D = W_x.shape
                if x_t.size(-1) != D:
                    raise ValueError(f"x_t has width {x_t.size(-1)}, W_x expects {D}")
                if W_h.shape != (H, H) or h_prev.size(-1) != H:
                    raise ValueError("h_prev, W_h and W_x disagree on H")
                return torch.tanh(F.linear(x_t, W_x, b) + F.linear(h_prev, W_h))
        '''),
        # one (H, D + H) matrix applied to [x_t, h_prev]
        ("concatenated weights", r'''
            def rnn_cell(x_t, h_prev, W_x, W_h, b):
                if x_t.shape[1] != W_x.shape[1] or h_prev.shape[1] != W_h.shape[1] or W_h.shape[0] != W_x.shape[0]:
                    raise ValueError("the shapes of x_t, h_prev, W_x and W_h do not fit")
                W = torch.cat([W_x, W_h], dim=1)                          # (H, D + H)
                xh = torch.cat([x_t, h_prev], dim=1)                       # (B, D + H)
                return torch.tanh(xh @ W.T + b)
        '''),
    ],
    "rnn_encode": [
        ("preallocated states, batched steps", r'''
            def rnn_encode(src_ids, src_mask, E, W_x, W_h, b):
                if src_ids.dim() != 2:
                    raise ValueError("src_ids must be (B, T_x)")
                if src_mask is None:
                    src_mask = torch.ones_like(src_ids, dtype=torch.bool)
                elif src_mask.shape != src_ids.shape:
                    raise ValueError("src_mask must have the shape of src_ids")
                B, T_x = src_ids.shape
                H = W_h.shape[0]
                states = torch.zeros(B, T_x, H, dtype=E.dtype, device=E.device)
                h = torch.zeros(B, H, dtype=E.dtype, device=E.device)
                for t in range(T_x):
                    real = src_mask[:, t].unsqueeze(1)                         # (B, 1)
                    ids_t = src_ids[:, t].masked_fill(~src_mask[:, t], 0)      # padding may hold any id
                    h_new = torch.tanh(F.linear(E[ids_t], W_x, b) + F.linear(h, W_h))
                    h = torch.where(real, h_new, h)
                    states[:, t] = torch.where(real, h_new, torch.zeros_like(h_new))
                return states, h
        '''),
        # one sentence at a time, the notes' column vectors W_h h + W_x x + b
        ("sentence by sentence, column vectors", r'''
            def rnn_encode(src_ids, src_mask, E, W_x, W_h, b):
                if src_ids.ndim != 2 or (src_mask is not None and src_mask.shape != src_ids.shape):
                    raise ValueError("src_ids (B, T_x) and src_mask (B, T_x) are needed")
                B, T_x = src_ids.shape
                H = W_h.shape[0]
                states = E.new_zeros(B, T_x, H)
                context = E.new_zeros(B, H)
                for i in range(B):
                    h = E.new_zeros(H)                                          # h_0 = 0
                    for t in range(T_x):
                        if src_mask is not None and not bool(src_mask[i, t]):
                            continue                                            # padding: the state stays
                        h = torch.tanh(W_h @ h + W_x @ E[src_ids[i, t]] + b)
                        states[i, t] = h
                    context[i] = h
                return states, context
        '''),
    ],
    "decoder_step": [
        ("F.embedding and F.linear", r'''
            def decoder_step(prev_ids, h, params):
                e = F.embedding(prev_ids, params["E_tgt"])                                   # (B, D)
                h = torch.tanh(F.linear(e, params["W_x_dec"], params["b_dec"]) + F.linear(h, params["W_h_dec"]))
                return F.linear(h, params["W_out"], params["b_out"]), h
        '''),
        ("einsum and addmm", r'''
            def decoder_step(prev_ids, h, params):
                p = params
                e = p["E_tgt"].index_select(0, prev_ids)
                pre = torch.einsum("hd,bd->bh", p["W_x_dec"], e) + torch.einsum("hk,bk->bh", p["W_h_dec"], h)
                pre = pre + p["b_dec"]
                h_new = torch.tanh(pre)
                return torch.addmm(p["b_out"], h_new, p["W_out"].t()), h_new
        '''),
    ],
    "teacher_forced_logits": [
        # a loop over the learner's own decoder_step
        ("loop of decoder_step", r'''
            def teacher_forced_logits(context, tgt_in, params):
                B, T_y = tgt_in.shape
                if T_y == 0:
                    return context.new_zeros(B, 0, params["W_out"].shape[0])
                h, steps = context, []
                for t in range(T_y):
                    logits, h = decoder_step(tgt_in[:, t], h, params)       # reads the true previous token
                    steps.append(logits)
                return torch.stack(steps, dim=1)
        '''),
        ("preallocated logits", r'''
            def teacher_forced_logits(context, tgt_in, params):
                p = params
                B, T_y = tgt_in.shape
                out = context.new_empty(B, T_y, p["W_out"].shape[0])
                h = context
                for t in range(T_y):
                    x_t = F.embedding(tgt_in[:, t], p["E_tgt"])
                    h = torch.tanh(F.linear(x_t, p["W_x_dec"], p["b_dec"]) + F.linear(h, p["W_h_dec"]))
                    out[:, t] = F.linear(h, p["W_out"], p["b_out"])
                return out
        '''),
    ],
    "seq2seq_loss": [
        ("F.cross_entropy summed, divided by B", r'''
            def seq2seq_loss(logits, targets, mask=None):
                if logits.dim() != 3 or targets.shape != logits.shape[:2]:
                    raise ValueError("logits (B, T_y, V) and targets (B, T_y) do not fit")
                if mask is not None and mask.shape != targets.shape:
                    raise ValueError("mask must have the shape of targets")
                B, T, V = logits.shape
                if mask is not None:
                    targets = targets.masked_fill(~mask, -100)
                total = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=-100,
                                        reduction="sum")
                return total / B
        '''),
        # log-probabilities in float64 times a one-hot made by comparison (a padding id of -100 matches nothing)
        ("float64 times a one-hot", r'''
            def seq2seq_loss(logits, targets, mask=None):
                if logits.ndim != 3:
                    raise ValueError("logits must be (B, T_y, V)")
                B, T, V = logits.shape
                if tuple(targets.shape) != (B, T):
                    raise ValueError("targets must be (B, T_y)")
                if mask is not None and tuple(mask.shape) != (B, T):
                    raise ValueError("mask must be (B, T_y)")
                log_p = torch.log_softmax(logits.double(), dim=-1)                                     # (B, T, V)
                one_hot = (targets.unsqueeze(-1) == torch.arange(V, device=logits.device)).double()
                token_log_p = (log_p * one_hot).sum(dim=-1)                                            # (B, T)
                if mask is not None:
                    token_log_p = token_log_p * mask.double()
                return (-token_log_p.sum() / B).to(logits.dtype)
        '''),
    ],
    "greedy_decode": [
        # a while loop over the learner's own decoder_step, tokens written into a preallocated tensor
        ("preallocated tokens, decoder_step", r'''
            def greedy_decode(context, params, bos_id, eos_id, max_len):
                if max_len < 0:
                    raise ValueError("max_len must not be negative")
                B, dev = context.shape[0], context.device
                tokens = torch.zeros(B, max_len, dtype=torch.long, device=dev)
                total = torch.zeros(B, dtype=context.dtype, device=dev)
                finished = torch.zeros(B, dtype=torch.bool, device=dev)
                prev = torch.full((B,), bos_id, dtype=torch.long, device=dev)
                h, steps = context, 0
                while steps < max_len and not bool(finished.all()):
                    logits, h = decoder_step(prev, h, params)
                    log_p = F.log_softmax(logits, dim=-1)
                    best = log_p.argmax(dim=-1)
                    best_lp = log_p.gather(1, best[:, None]).squeeze(1)
                    best = torch.where(finished, torch.zeros_like(best), best)
                    total = total + torch.where(finished, torch.zeros_like(best_lp), best_lp)
                    tokens[:, steps] = best
                    finished = finished | (best == eos_id)
                    prev = best
                    steps += 1
                return tokens[:, :steps], total
        '''),
        # one sentence at a time with Python lists, padded at the end
        ("sentence by sentence, lists", r'''
            def greedy_decode(context, params, bos_id, eos_id, max_len):
                if not max_len >= 0:
                    raise ValueError(f"max_len={max_len}")
                p = params
                sentences, scores = [], []
                for i in range(context.shape[0]):
                    h, prev, toks = context[i], bos_id, []
                    score = torch.zeros((), dtype=context.dtype, device=context.device)
                    while len(toks) < max_len:
                        h = torch.tanh(p["W_h_dec"] @ h + p["W_x_dec"] @ p["E_tgt"][prev] + p["b_dec"])
                        log_p = torch.log_softmax(p["W_out"] @ h + p["b_out"], dim=0)
                        prev = int(torch.argmax(log_p))
                        toks.append(prev)
                        score = score + log_p[prev]
                        if prev == eos_id:
                            break
                    sentences.append(toks)
                    scores.append(score)
                L = max(len(t) for t in sentences)
                tokens = torch.tensor([t + [0] * (L - len(t)) for t in sentences], dtype=torch.long,
                                      device=context.device).reshape(len(sentences), L)
                return tokens, torch.stack(scores)
        '''),
    ],
    "beam_search": [
        # hypotheses extended one at a time with the learner's decoder_step, candidates sorted in Python
        ("one hypothesis at a time, sorted", r'''
            def beam_search(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
                if beam_width < 1 or max_len < 0:
                    raise ValueError("beam_width must be >= 1 and max_len >= 0")
                if context.dim() != 1:
                    raise ValueError("context must be one sentence's (H,) vector")
                live = [([], torch.zeros((), dtype=context.dtype, device=context.device), context)]
                done = []
                for _ in range(max_len):
                    candidates = []
                    for toks, score, h in live:
                        prev = torch.tensor([toks[-1] if toks else bos_id], device=context.device)
                        logits, h_new = decoder_step(prev, h[None], params)            # a batch of one
                        log_p = torch.log_softmax(logits[0], dim=-1)
                        for v in range(log_p.shape[0]):
                            candidates.append((toks + [v], score + log_p[v], h_new[0]))
                    candidates.sort(key=lambda c: float(c[1]), reverse=True)
                    live = []
                    for cand in candidates[:beam_width]:
                        (done if cand[0][-1] == eos_id else live).append(cand)
                    if not live:
                        break

                def rank(hyp):
                    return float(hyp[1]) / len(hyp[0]) if length_norm else float(hyp[1])

                best = sorted(done + live, key=rank, reverse=True)[:beam_width]
                return [toks for toks, _, _ in best], torch.stack([score for _, score, _ in best])
        '''),
        # the beam as tensors (token rows, scores, states), torch.sort over every extension
        ("tensors and torch.sort", r'''
            def beam_search(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
                if context.ndim != 1:
                    raise ValueError("beam search decodes one sentence: context must be (H,)")
                if beam_width < 1:
                    raise ValueError("beam_width < 1")
                if max_len < 0:
                    raise ValueError("max_len < 0")
                p, dev = params, context.device
                V = p["W_out"].shape[0]
                seqs = torch.full((1, 1), bos_id, dtype=torch.long, device=dev)     # (K, t + 1), <bos> first
                scores = torch.zeros(1, dtype=context.dtype, device=dev)           # (K,)
                states = context.unsqueeze(0)                                       # (K, H)
                finished = []                                                       # (tokens, score)
                for _ in range(max_len):
                    x = F.embedding(seqs[:, -1], p["E_tgt"])
                    states = torch.tanh(F.linear(x, p["W_x_dec"], p["b_dec"]) + F.linear(states, p["W_h_dec"]))
                    log_p = F.log_softmax(F.linear(states, p["W_out"], p["b_out"]), dim=-1)     # (K, V)
                    total = (scores[:, None] + log_p).reshape(-1)
                    order = torch.sort(total, descending=True).indices[:beam_width]
                    k, v = order // V, order % V
                    seqs = torch.cat([seqs[k], v[:, None]], dim=1)
                    scores, states = total[order], states[k]
                    ended = v == eos_id
                    for row in torch.nonzero(ended).flatten().tolist():
                        finished.append((seqs[row, 1:].tolist(), scores[row]))
                    seqs, scores, states = seqs[~ended], scores[~ended], states[~ended]
                    if seqs.shape[0] == 0:
                        break
                pool = finished + [(s[1:].tolist(), sc) for s, sc in zip(seqs, scores)]
                key = (lambda e: float(e[1]) / max(len(e[0]), 1)) if length_norm else (lambda e: float(e[1]))
                best = sorted(pool, key=key, reverse=True)[:beam_width]
                return [toks for toks, _ in best], torch.stack([sc for _, sc in best])
        '''),
    ],
    # ============================================================ 06 encoder
    "split_heads": [
        ("split columns, stack heads", r'''
            def split_heads(x, n_heads):
                if x.dim() != 3:
                    raise ValueError("x must be (B, T, D)")
                D = x.shape[-1]
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                return torch.stack(torch.split(x, D // n_heads, dim=-1), dim=1)    # H x (B, T, d_k) -> (B, H, T, d_k)
        '''),
        ("preallocated, head by head", r'''
            def split_heads(x, n_heads):
                if x.ndim != 3 or n_heads <= 0 or x.shape[2] % n_heads != 0:
                    raise ValueError(f"cannot split x of shape {tuple(x.shape)} into {n_heads} heads")
                B, T, D = x.shape
                d_k = D // n_heads
                out = x.new_empty(B, n_heads, T, d_k)
                for h in range(n_heads):
                    out[:, h] = x[:, :, h * d_k:(h + 1) * d_k]
                return out
        '''),
    ],
    "merge_heads": [
        ("unbind heads, concatenate", r'''
            def merge_heads(x):
                if x.dim() != 4:
                    raise ValueError("x must be (B, H, T, d_k)")
                return torch.cat(torch.unbind(x, dim=1), dim=-1)
        '''),
        ("preallocated, head by head", r'''
            def merge_heads(x):
                if x.ndim != 4:
                    raise ValueError(f"merge_heads takes (B, H, T, d_k), got {tuple(x.shape)}")
                B, H, T, d_k = x.shape
                out = x.new_empty(B, T, H * d_k)
                for h in range(H):
                    out[:, :, h * d_k:(h + 1) * d_k] = x[:, h]
                return out
        '''),
    ],
    "multi_head_attention": [
        # the learner's own split_heads / merge_heads, attention by einsum, the mask expanded to (B, T_q, T_k)
        ("einsum, own split and merge", r'''
            def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
                if x_q.dim() != 3 or x_kv.dim() != 3:
                    raise ValueError("x_q and x_kv must be (B, T, D)")
                if x_q.shape[0] != x_kv.shape[0] or x_q.shape[-1] != x_kv.shape[-1]:
                    raise ValueError("x_q and x_kv must share B and D")
                p = params
                q = split_heads(F.linear(x_q, p["W_q"], p["b_q"]), n_heads)
                k = split_heads(F.linear(x_kv, p["W_k"], p["b_k"]), n_heads)
                v = split_heads(F.linear(x_kv, p["W_v"], p["b_v"]), n_heads)
                scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
                if mask is not None:
                    try:
                        allowed = torch.broadcast_to(mask, (x_q.shape[0], x_q.shape[1], x_kv.shape[1]))
                    except RuntimeError as exc:
                        raise ValueError("mask must broadcast to (B, T_q, T_k)") from exc
                    scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))   # the same for every head
                weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                heads = torch.einsum("bhqk,bhkd->bhqd", weights, v)
                return F.linear(merge_heads(heads), p["W_o"], p["b_o"]), weights
        '''),
        ("loop over heads", r'''
            def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
                if x_q.ndim != 3 or x_kv.ndim != 3 or x_q.shape[0] != x_kv.shape[0] or x_q.shape[2] != x_kv.shape[2]:
                    raise ValueError(f"x_q {tuple(x_q.shape)} and x_kv {tuple(x_kv.shape)} do not fit")
                B, T_q, D = x_q.shape
                T_k = x_kv.shape[1]
                if n_heads < 1 or D % n_heads != 0:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                Q = x_q @ params["W_q"].T + params["b_q"]
                K = x_kv @ params["W_k"].T + params["b_k"]
                V = x_kv @ params["W_v"].T + params["b_v"]
                allowed = torch.ones(B, T_q, T_k, dtype=torch.bool, device=x_q.device)
                if mask is not None:
                    if mask.dim() > 3:
                        raise ValueError("mask must broadcast to (B, T_q, T_k)")
                    allowed = allowed & mask
                outs, weights = [], []
                for h in range(n_heads):
                    cols = slice(h * d_k, (h + 1) * d_k)
                    s = Q[..., cols] @ K[..., cols].transpose(1, 2) / d_k ** 0.5           # (B, T_q, T_k)
                    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
                    w = torch.where(allowed.any(dim=-1, keepdim=True), w, torch.zeros_like(w))   # no key: zeros
                    outs.append(w @ V[..., cols])
                    weights.append(w)
                out = torch.cat(outs, dim=-1) @ params["W_o"].T + params["b_o"]
                return out, torch.stack(weights, dim=1)
        '''),
        # SDPA for the heads' outputs (bool mask, same polarity), the weights computed beside it
        ("SDPA outputs, own split and merge", r'''
            def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
                if x_q.dim() != 3 or x_kv.dim() != 3 or x_q.shape[0] != x_kv.shape[0] or x_q.shape[2] != x_kv.shape[2]:
                    raise ValueError("x_q (B, T_q, D) and x_kv (B, T_k, D) must share B and D")
                q = split_heads(x_q @ params["W_q"].T + params["b_q"], n_heads)
                k = split_heads(x_kv @ params["W_k"].T + params["b_k"], n_heads)
                v = split_heads(x_kv @ params["W_v"].T + params["b_v"], n_heads)
                T_k = k.shape[-2]
                allowed = torch.ones(1, 1, 1, T_k, dtype=torch.bool, device=x_q.device)
                if mask is not None:
                    if mask.dim() > 3:
                        raise ValueError("mask must broadcast to (B, T_q, T_k)")
                    m = mask
                    while m.dim() < 3:
                        m = m.unsqueeze(0)
                    allowed = allowed & m.unsqueeze(1)                                 # (B or 1, 1, T_q, T_k)
                s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
                weights = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
                if T_k == 0:
                    heads = torch.zeros_like(q)
                else:
                    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed).nan_to_num(0.0)
                return merge_heads(heads) @ params["W_o"].T + params["b_o"], weights
        '''),
    ],
    "sinusoidal_positions": [
        ("Python math, entry by entry", r'''
            def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
                if T < 0 or D < 1:
                    raise ValueError(f"T={T} and D={D}: need T >= 0 and D >= 1")
                table = []
                for p in range(T):
                    row = []
                    for c in range(D):
                        angle = p / base ** ((c - c % 2) / D)                 # c - c % 2: the pair's even column
                        row.append(math.sin(angle) if c % 2 == 0 else math.cos(angle))
                    table.append(row)
                return torch.tensor(table, dtype=dtype, device=device).reshape(T, D)
        '''),
        # the frequencies as exp(-2i log(base) / D), as in PyTorch's tutorial
        ("exp-log frequencies", r'''
            def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
                if D < 1:
                    raise ValueError("D must be >= 1")
                if T < 0:
                    raise ValueError("T must be >= 0")
                position = torch.arange(T, dtype=torch.float64, device=device).unsqueeze(1)         # (T, 1)
                div_term = torch.exp(torch.arange(0, D, 2, dtype=torch.float64, device=device) * (-math.log(base) / D))
                pe = torch.zeros(T, D, dtype=torch.float64, device=device)
                pe[:, 0::2] = torch.sin(position * div_term)
                pe[:, 1::2] = torch.cos(position * div_term[: D // 2])
                return pe.to(dtype)
        '''),
        # computed in the requested dtype from the start (no float64 table)
        ("in the requested dtype", r'''
            def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
                if T < 0 or D < 1:
                    raise ValueError(f"need T >= 0 and D >= 1, got T={T}, D={D}")
                p = torch.arange(T, dtype=dtype, device=device)[:, None]
                freq = base ** (-torch.arange(0, D, 2, dtype=dtype, device=device) / D)
                pe = torch.zeros(T, D, dtype=dtype, device=device)
                pe[:, 0::2] = torch.sin(p * freq)
                pe[:, 1::2] = torch.cos(p * freq)[:, : D // 2]
                return pe
        '''),
    ],
    "embed_with_positions": [
        ("index_select, broadcast add", r'''
            def embed_with_positions(ids, E, P):
                if ids.ndim != 2:
                    raise ValueError("ids must be (B, T)")
                B, T = ids.shape
                if T > P.size(0) or E.size(1) != P.size(1):
                    raise ValueError(f"ids of length {T}, E {tuple(E.shape)} and P {tuple(P.shape)} do not fit")
                tokens = E.index_select(0, ids.reshape(-1)).reshape(B, T, E.size(1))
                return tokens + P[:T].unsqueeze(0)
        '''),
        ("preallocated, position by position", r'''
            def embed_with_positions(ids, E, P):
                if ids.dim() != 2:
                    raise ValueError(f"ids must be a (B, T) batch, got {tuple(ids.shape)}")
                B, T = ids.shape
                if T > P.shape[0]:
                    raise ValueError(f"T={T} is longer than the positional table ({P.shape[0]} rows)")
                if P.shape[1] != E.shape[1]:
                    raise ValueError("E and P must have the same width")
                out = E.new_empty(B, T, E.shape[1])
                for t in range(T):
                    out[:, t] = E[ids[:, t]] + P[t]
                return out
        '''),
    ],
    "encoder_block": [
        # the learner's own multi_head_attention, layer norm written out
        ("own multi_head_attention, layer norm by hand", r'''
            def encoder_block(x, valid, params, n_heads):
                def layer_norm(h, ln, eps=1e-5):
                    mean = h.mean(dim=-1, keepdim=True)
                    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
                    return (h - mean) / torch.sqrt(var + eps) * ln["weight"] + ln["bias"]

                mask = None if valid is None else valid.unsqueeze(-2)          # (B, 1, T): only real keys
                a, _ = multi_head_attention(x, x, params["attn"], n_heads, mask)
                h = layer_norm(x + a, params["ln1"])
                f = params["ffn"]
                ff = F.linear(F.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return layer_norm(h + ff, params["ln2"])
        '''),
        ("all inline, einsum attention", r'''
            def encoder_block(x, valid, params, n_heads):
                B, T, D = x.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                a = params["attn"]

                def heads(t):                                                  # (B, T, D) -> (B, H, T, d_k)
                    return t.reshape(B, T, n_heads, d_k).transpose(1, 2)

                q = heads(x @ a["W_q"].T + a["b_q"])
                k = heads(x @ a["W_k"].T + a["b_k"])
                v = heads(x @ a["W_v"].T + a["b_v"])
                scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d_k)
                if valid is not None:
                    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))   # padded keys blocked
                w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
                att = torch.einsum("bhij,bhjd->bhid", w, v).transpose(1, 2).reshape(B, T, D)
                ln1, ln2, f = params["ln1"], params["ln2"], params["ffn"]
                h = F.layer_norm(x + att @ a["W_o"].T + a["b_o"], (D,), ln1["weight"], ln1["bias"], eps=1e-5)
                ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
                return F.layer_norm(h + ff, (D,), ln2["weight"], ln2["bias"], eps=1e-5)
        '''),
    ],
    "masked_lm_loss": [
        ("F.cross_entropy ignore_index, sum / count", r'''
            def masked_lm_loss(logits, targets, is_masked):
                if logits.shape[:2] != targets.shape or is_masked.shape != targets.shape:
                    raise ValueError("logits, targets and is_masked must agree on (B, T)")
                V = logits.shape[-1]
                labels = targets.masked_fill(~is_masked, -100)                 # unmasked positions are ignored
                total = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100, reduction="sum")
                return total / is_masked.sum().clamp(min=1)
        '''),
        # the masked positions picked by boolean indexing, then the plain mean
        ("boolean selection, mean", r'''
            def masked_lm_loss(logits, targets, is_masked):
                B, T = targets.shape
                if tuple(logits.shape[:2]) != (B, T) or tuple(is_masked.shape) != (B, T):
                    raise ValueError("shapes do not agree on (B, T)")
                picked_logits = logits[is_masked]                              # (N, V)
                picked_targets = targets[is_masked]                            # (N,)
                if picked_targets.numel() == 0:
                    return logits.new_zeros(())                                # nothing to predict
                log_p = picked_logits - torch.logsumexp(picked_logits, dim=-1, keepdim=True)
                nll = -log_p[torch.arange(picked_targets.numel(), device=logits.device), picked_targets]
                return nll.mean()
        '''),
        # F.cross_entropy's own mean over the non-ignored positions; its 0/0 (nothing masked) made 0
        ("F.cross_entropy mean, nan_to_num", r'''
            def masked_lm_loss(logits, targets, is_masked):
                if logits.shape[:2] != targets.shape or is_masked.shape != targets.shape:
                    raise ValueError("logits, targets and is_masked must agree on (B, T)")
                labels = torch.where(is_masked, targets, torch.full_like(targets, -100))
                loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
                return torch.nan_to_num(loss, nan=0.0)
        '''),
    ],
    "probe_accuracy": [
        # the nearest mean written as the linear rule it is: w . x > threshold
        ("a hyperplane w . x > c", r'''
            def probe_accuracy(hidden, positions, senses, is_train):
                B, T, D = hidden.shape
                if positions.shape != (B,) or senses.shape != (B,) or is_train.shape != (B,):
                    raise ValueError("shapes")
                if positions.min() < 0 or positions.max() >= T or not ((senses == 0) | (senses == 1)).all():
                    raise ValueError("positions must be in 0 .. T-1 and senses 0 or 1")
                x = hidden.gather(1, positions.view(B, 1, 1).expand(B, 1, D)).squeeze(1)   # (B, D)
                fit0, fit1 = is_train & (senses == 0), is_train & (senses == 1)
                if fit0.sum() == 0 or fit1.sum() == 0 or is_train.all():
                    raise ValueError("need both senses to fit and a sentence to test")
                m0, m1 = x[fit0].mean(0), x[fit1].mean(0)
                w, c = m1 - m0, (m1.dot(m1) - m0.dot(m0)) / 2
                guess = (x[~is_train] @ w > c).long()
                return float((guess == senses[~is_train]).sum()) / int((~is_train).sum())
        '''),
        ("torch.cdist, a loop over the test sentences", r'''
            def probe_accuracy(hidden, positions, senses, is_train):
                if hidden.ndim != 3 or not (len(positions) == len(senses) == len(is_train) == hidden.shape[0]):
                    raise ValueError("hidden is (B, T, D), the rest (B,)")
                if any(p < 0 or p >= hidden.shape[1] for p in positions.tolist()):
                    raise ValueError(f"positions outside 0 .. {hidden.shape[1] - 1}")
                if any(s not in (0, 1) for s in senses.tolist()):
                    raise ValueError("senses are 0 or 1")
                words = torch.stack([hidden[b, p] for b, p in enumerate(positions.tolist())])
                train = [b for b in range(len(words)) if is_train[b]]
                test = [b for b in range(len(words)) if not is_train[b]]
                means = []
                for sense in (0, 1):
                    rows = [b for b in train if senses[b] == sense]
                    if not rows:
                        raise ValueError("both senses are needed to fit the probe")
                    means.append(words[rows].mean(dim=0))
                if not test:
                    raise ValueError("nothing to test")
                dist = torch.cdist(words[test].double(), torch.stack(means).double())   # (n_test, 2)
                right = sum(int(dist[k, 1] < dist[k, 0]) == int(senses[b]) for k, b in enumerate(test))
                return right / len(test)
        '''),
    ],
    # ============================================================ 07 decoder
    "rope": [
        # x cos + (-x_odd, x_even) sin, with cos and sin repeated for both columns of a pair
        ("rotate-half for adjacent pairs", r'''
            def rope(x, positions=None, base=10000.0):
                *_, T, d = x.shape
                if d % 2 != 0:
                    raise ValueError(f"the width d={d} must be even")
                if positions is None:
                    positions = torch.arange(T, device=x.device)
                if tuple(positions.shape) != (T,):
                    raise ValueError(f"need {T} positions, got shape {tuple(positions.shape)}")
                inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)    # (d/2,)
                angle = torch.outer(positions.to(x.device, torch.float64), inv_freq)                        # (T, d/2)
                cos = angle.cos().repeat_interleave(2, dim=-1).to(x.dtype)                                  # (T, d)
                sin = angle.sin().repeat_interleave(2, dim=-1).to(x.dtype)
                x_rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
                return x * cos + x_rot * sin
        '''),
        ("2x2 rotation matrices, float64", r'''
            def rope(x, positions=None, base=10000.0):
                T, d = x.shape[-2:]
                if d % 2:
                    raise ValueError("RoPE needs an even width")
                pos = torch.arange(T, device=x.device) if positions is None else positions.to(x.device)
                if pos.dim() != 1 or pos.shape[0] != T:
                    raise ValueError(f"positions must be ({T},)")
                i = torch.arange(d // 2, dtype=torch.float64, device=x.device)
                theta = torch.pow(base, -2.0 * i / d)                                       # (d/2,)
                angle = pos.double()[:, None] * theta                                        # (T, d/2)
                c, s = torch.cos(angle), torch.sin(angle)
                R = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)   # (T, d/2, 2, 2)
                pairs = x.double().unflatten(-1, (d // 2, 2))                                # (..., T, d/2, 2)
                return torch.einsum("tiab,...tib->...tia", R, pairs).flatten(-2).to(x.dtype)
        '''),
        # angles in x's own dtype, the two halves of each pair written into a preallocated output
        ("in x's dtype, preallocated", r'''
            def rope(x, positions=None, base=10000.0):
                T, d = x.shape[-2], x.shape[-1]
                if d % 2:
                    raise ValueError(f"odd width d={d}")
                if positions is None:
                    positions = torch.arange(T, device=x.device)
                if positions.shape != (T,):
                    raise ValueError(f"positions of shape {tuple(positions.shape)} for {T} rows")
                theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype, device=x.device) / d)
                angle = positions.to(device=x.device, dtype=x.dtype)[:, None] * theta
                cos, sin = angle.cos(), angle.sin()
                x0, x1 = x[..., 0::2], x[..., 1::2]
                out = torch.empty_like(x)
                out[..., 0::2] = x0 * cos - x1 * sin
                out[..., 1::2] = x0 * sin + x1 * cos
                return out
        '''),
    ],
    "rope_attention": [
        # the learner's own rope on heads made by reshape/transpose
        ("own rope, reshape heads", r'''
            def rope_attention(x, params, n_heads, mask=None):
                B, T, D = x.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                if d_k % 2:
                    raise ValueError(f"the head width d_k={d_k} is odd; RoPE needs it even")
                p = params

                def heads(t):
                    return t.reshape(B, T, n_heads, d_k).transpose(1, 2)                    # (B, H, T, d_k)

                q = rope(heads(F.linear(x, p["W_q"], p["b_q"])))
                k = rope(heads(F.linear(x, p["W_k"], p["b_k"])))
                v = heads(F.linear(x, p["W_v"], p["b_v"]))
                scores = q @ k.transpose(-1, -2) / math.sqrt(d_k)                           # (B, H, T, T)
                if mask is not None:
                    scores = scores.masked_fill(~torch.broadcast_to(mask, (B, T, T)).unsqueeze(1), float("-inf"))
                w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                out = (w @ v).transpose(1, 2).reshape(B, T, D)
                return F.linear(out, p["W_o"], p["b_o"]), w
        '''),
        # every head in a Python loop, the rotation written with complex numbers (float64 inside)
        ("loop over heads, complex rotation", r'''
            def rope_attention(x, params, n_heads, mask=None):
                B, T, D = x.shape
                if n_heads <= 0 or D % n_heads != 0 or (D // n_heads) % 2 != 0:
                    raise ValueError(f"D={D} and n_heads={n_heads} do not give heads of an even width")
                d_k = D // n_heads
                freq = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64, device=x.device) / d_k)
                turn = torch.polar(torch.ones(T, d_k // 2, dtype=torch.float64, device=x.device),
                                   torch.arange(T, dtype=torch.float64, device=x.device)[:, None] * freq)

                def rotate(t):                                                               # (B, T, d_k)
                    z = torch.view_as_complex(t.double().reshape(B, T, d_k // 2, 2).contiguous())
                    return torch.view_as_real(z * turn).reshape(B, T, d_k).to(t.dtype)

                Q = x @ params["W_q"].T + params["b_q"]
                K = x @ params["W_k"].T + params["b_k"]
                V = x @ params["W_v"].T + params["b_v"]
                allowed = torch.ones(B, T, T, dtype=torch.bool, device=x.device)
                if mask is not None:
                    allowed = allowed & mask
                outs, weights = [], []
                for h in range(n_heads):
                    cols = slice(h * d_k, (h + 1) * d_k)
                    s = rotate(Q[..., cols]) @ rotate(K[..., cols]).transpose(1, 2) / math.sqrt(d_k)
                    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
                    w = torch.where(allowed.any(-1, keepdim=True), w, torch.zeros_like(w))
                    outs.append(w @ V[..., cols])
                    weights.append(w)
                return torch.cat(outs, -1) @ params["W_o"].T + params["b_o"], torch.stack(weights, 1)
        '''),
    ],
    "decoder_block": [
        ("all inline, torch.tril and einsum", r'''
            def decoder_block(x, valid, params, n_heads):
                B, T, D = x.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                a = params["attn"]
                allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device)).expand(B, T, T)
                if valid is not None:
                    allowed = allowed & valid[:, None, :]
                q, k, v = (F.linear(x, a[f"W_{n}"], a[f"b_{n}"]).reshape(B, T, n_heads, d_k) for n in "qkv")
                scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d_k)
                scores = scores.masked_fill(~allowed[:, None], float("-inf"))
                w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                att = torch.einsum("bhij,bjhd->bihd", w, v).reshape(B, T, D)
                ln1, ln2, f = params["ln1"], params["ln2"], params["ffn"]
                h = F.layer_norm(x + F.linear(att, a["W_o"], a["b_o"]), (D,), ln1["weight"], ln1["bias"], 1e-5)
                ff = F.linear(F.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return F.layer_norm(h + ff, (D,), ln2["weight"], ln2["bias"], 1e-5)
        '''),
        # PyTorch's SDPA with the bool mask (its polarity is ours: True = may attend), layer norm written out
        ("SDPA with the bool mask, layer norm by hand", r'''
            def decoder_block(x, valid, params, n_heads):
                B, T, D = x.shape
                if n_heads <= 0 or D % n_heads != 0:
                    raise ValueError("n_heads must divide d_model")
                H, d_k = n_heads, D // n_heads
                a, f = params["attn"], params["ffn"]

                def norm(t, ln):
                    mu = t.mean(-1, keepdim=True)
                    var = t.var(-1, unbiased=False, keepdim=True)
                    return (t - mu) * torch.rsqrt(var + 1e-5) * ln["weight"] + ln["bias"]

                j = torch.arange(T, device=x.device)
                allowed = (j[None, :] <= j[:, None]).unsqueeze(0)                         # (1, T, T): j <= i
                if valid is not None:
                    allowed = allowed & valid.unsqueeze(1)                                 # (B, T, T): j real
                q = (x @ a["W_q"].T + a["b_q"]).view(B, T, H, d_k).permute(0, 2, 1, 3)
                k = (x @ a["W_k"].T + a["b_k"]).view(B, T, H, d_k).permute(0, 2, 1, 3)
                v = (x @ a["W_v"].T + a["b_v"]).view(B, T, H, d_k).permute(0, 2, 1, 3)
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.unsqueeze(1))
                heads = torch.nan_to_num(heads, nan=0.0)                                   # no real key: 0
                att = heads.permute(0, 2, 1, 3).reshape(B, T, D) @ a["W_o"].T + a["b_o"]
                h = norm(x + att, params["ln1"])
                ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
                return norm(h + ff, params["ln2"])
        '''),
    ],
    "lm_log_prob": [
        ("F.nll_loss, shifted log-softmax", r'''
            def lm_log_prob(logits, ids, valid=None):
                if logits.shape[:2] != ids.shape:
                    raise ValueError("logits and ids must agree on (B, T)")
                if valid is not None and valid.shape != ids.shape:
                    raise ValueError("valid must have the shape of ids")
                B, T = ids.shape
                if T < 2:
                    return logits.new_zeros(B)                                  # nothing to predict
                targets = ids[:, 1:]
                if valid is not None:
                    targets = targets.masked_fill(~valid[:, 1:], -100)          # padding: ignored
                log_p = F.log_softmax(logits[:, :-1], dim=-1).transpose(1, 2)   # (B, V, T - 1)
                return -F.nll_loss(log_p, targets, ignore_index=-100, reduction="none").sum(dim=1)
        '''),
        ("loops, logsumexp", r'''
            def lm_log_prob(logits, ids, valid=None):
                B, T = ids.shape
                if tuple(logits.shape[:2]) != (B, T) or (valid is not None and tuple(valid.shape) != (B, T)):
                    raise ValueError("logits, ids and valid must agree on (B, T)")
                total = logits.new_zeros(B)
                for b in range(B):
                    for t in range(1, T):
                        if valid is not None and not valid[b, t]:
                            continue
                        pred = logits[b, t - 1]                                 # the prediction of token t
                        total[b] += pred[ids[b, t]] - torch.logsumexp(pred, dim=0)
                return total
        '''),
    ],
    # ============================================================ 08 encoder-decoder
    "top_k_filter": [
        ("sort, then the k-th value as a threshold", r'''
            def top_k_filter(logits, k):
                if type(k) is not int or k < 1:
                    raise ValueError(f"k must be a whole number >= 1, got {k}")
                if k >= logits.shape[-1]:
                    return logits.clone()
                threshold = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
                return torch.where(logits >= threshold, logits, torch.full_like(logits, float("-inf")))
        '''),
        ("kthvalue of the negated logits", r'''
            def top_k_filter(logits, k):
                if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
                    raise ValueError("top-k needs an int k >= 1")
                V = logits.shape[-1]
                kth = -(-logits).kthvalue(min(k, V), dim=-1, keepdim=True).values  # the k-th largest
                out = logits.clone()
                out[logits < kth] = float("-inf")
                return out
        '''),
    ],
    "top_p_filter": [
        ("a loop over rows in plain Python", r'''
            def top_p_filter(logits, p):
                if not (0 < p <= 1):
                    raise ValueError(f"p must be in (0, 1], got {p}")
                if p == 1:
                    return logits.clone()
                probs = torch.softmax(logits, dim=-1)
                keep = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
                flat_probs, flat_keep = probs.reshape(-1, probs.shape[-1]), keep.view(-1, keep.shape[-1])
                for r in range(flat_probs.shape[0]):
                    row = flat_probs[r].tolist()
                    mass = 0.0
                    for j in sorted(range(len(row)), key=lambda j: (-row[j], j)):  # high to low, ties by index
                        if mass >= p:
                            break
                        flat_keep[r, j] = True
                        mass += row[j]
                return logits.masked_fill(~keep, float("-inf"))
        '''),
        ("shifted cumulative sum, then gather back", r'''
            def top_p_filter(logits, p):
                if p <= 0 or p > 1:
                    raise ValueError("p out of range")
                if p == 1:
                    return logits.clone()
                sorted_p, order = torch.softmax(logits, -1).sort(dim=-1, descending=True, stable=True)
                cum = sorted_p.cumsum(-1)
                before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], dim=-1)
                keep_sorted = before < p
                rank = order.argsort(dim=-1)                       # where each token sits in the sorted order
                keep = keep_sorted.gather(-1, rank)
                return torch.where(keep, logits, torch.tensor(float("-inf"), dtype=logits.dtype,
                                                              device=logits.device))
        '''),
    ],
    "sample_next": [
        ("filters written inline", r'''
            def sample_next(logits, seed, temperature=1.0, top_k=None, top_p=None):
                if temperature <= 0:
                    raise ValueError("temperature must be > 0 (use the argmax for greedy decoding)")
                z = logits / temperature
                if top_k is not None:
                    if type(top_k) is not int or top_k < 1:
                        raise ValueError("top_k must be >= 1")
                    if top_k < z.shape[-1]:
                        z = z.masked_fill(z < z.topk(top_k, dim=-1).values[..., -1:], float("-inf"))
                if top_p is not None:
                    if not 0 < top_p <= 1:
                        raise ValueError("top_p must be in (0, 1]")
                    if top_p < 1:
                        sp, order = torch.softmax(z, -1).sort(dim=-1, descending=True, stable=True)
                        drop_sorted = sp.cumsum(-1) - sp >= top_p
                        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
                        z = z.masked_fill(drop, float("-inf"))
                g = torch.Generator(device=logits.device)
                g.manual_seed(seed)
                return torch.multinomial(F.softmax(z, dim=-1), num_samples=1, generator=g).squeeze(-1)
        '''),
        ("the filters, then softmax and multinomial in steps", r'''
            def sample_next(logits, seed, temperature=1.0, top_k=None, top_p=None):
                if not temperature > 0:
                    raise ValueError(f"bad temperature {temperature}")
                z = logits / temperature
                z = z if top_k is None else top_k_filter(z, top_k)
                z = z if top_p is None else top_p_filter(z, top_p)
                probs = torch.exp(z - z.max(dim=-1, keepdim=True).values)
                probs = probs / probs.sum(dim=-1, keepdim=True)
                g = torch.Generator(device=logits.device).manual_seed(int(seed))
                drawn = torch.multinomial(probs, 1, generator=g)
                return drawn.view(-1)
        '''),
    ],
    "cross_attention": [
        ("all inline, einsum over heads", r'''
            def cross_attention(y, memory, src_valid, params, n_heads):
                B, T_y, D = y.shape
                if memory.shape[0] != B:
                    raise ValueError("memory and y must have the same batch size")
                T_x = memory.shape[1]
                if src_valid is not None and tuple(src_valid.shape) != (B, T_x):
                    raise ValueError("src_valid must be (B, T_x)")
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                p = params
                q = F.linear(y, p["W_q"], p["b_q"]).reshape(B, T_y, n_heads, d_k)
                k = F.linear(memory, p["W_k"], p["b_k"]).reshape(B, T_x, n_heads, d_k)
                v = F.linear(memory, p["W_v"], p["b_v"]).reshape(B, T_x, n_heads, d_k)
                scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_k)
                if src_valid is not None:
                    scores = scores.masked_fill(~src_valid[:, None, None, :], float("-inf"))
                w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                out = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, T_y, D)
                return F.linear(out, p["W_o"], p["b_o"]), w
        '''),
        ("loop over heads, additive mask, float64", r'''
            def cross_attention(y, memory, src_valid, params, n_heads):
                if memory.dim() != 3 or memory.size(0) != y.size(0):
                    raise ValueError(f"memory {tuple(memory.shape)} does not fit y {tuple(y.shape)}")
                B, T_x, D = memory.shape
                if src_valid is None:
                    src_valid = torch.ones(B, T_x, dtype=torch.bool, device=memory.device)
                if src_valid.shape != (B, T_x):
                    raise ValueError(f"src_valid must be ({B}, {T_x})")
                if n_heads <= 0 or D % n_heads:
                    raise ValueError("n_heads must divide D")
                d_k = D // n_heads
                p = {name: t.double() for name, t in params.items()}
                Q = y.double() @ p["W_q"].T + p["b_q"]
                K = memory.double() @ p["W_k"].T + p["b_k"]
                V = memory.double() @ p["W_v"].T + p["b_v"]
                M = torch.zeros(B, 1, T_x, dtype=torch.float64, device=y.device).masked_fill(~src_valid[:, None, :],
                                                                                              float("-inf"))
                has_key = src_valid.any(dim=-1)[:, None, None]                            # (B, 1, 1)
                outs, weights = [], []
                for h in range(n_heads):
                    c = slice(h * d_k, (h + 1) * d_k)
                    w = torch.softmax(Q[..., c] @ K[..., c].transpose(-1, -2) / math.sqrt(d_k) + M, dim=-1)
                    w = torch.where(has_key, w, torch.zeros_like(w))
                    outs.append(w @ V[..., c])
                    weights.append(w)
                out = torch.cat(outs, dim=-1) @ p["W_o"].T + p["b_o"]
                return out.to(y.dtype), torch.stack(weights, dim=1).to(y.dtype)
        '''),
    ],
    "encdec_decoder_block": [
        # causal self-attention written inline, the learner's own cross_attention, F.layer_norm
        ("inline self-attention, own cross_attention", r'''
            def encdec_decoder_block(y, memory, tgt_valid, src_valid, params, n_heads):
                B, T, D = y.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                sa = params["self_attn"]

                def ln(t, name):
                    return F.layer_norm(t, (D,), params[name]["weight"], params[name]["bias"], eps=1e-5)

                allowed = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()
                if tgt_valid is not None:
                    allowed = allowed & tgt_valid[:, None, :]                               # (B, T, T)
                q, k, v = (F.linear(y, sa["W_" + n], sa["b_" + n]).view(B, T, n_heads, d_k).transpose(1, 2)
                           for n in "qkv")
                s = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)
                s = s.masked_fill(~allowed.view(-1, 1, T, T), float("-inf"))
                w = torch.softmax(s, dim=-1).nan_to_num(0.0)
                a = F.linear((w @ v).transpose(1, 2).reshape(B, T, D), sa["W_o"], sa["b_o"])
                h1 = ln(y + a, "ln1")
                c, cross_weights = cross_attention(h1, memory, src_valid, params["cross_attn"], n_heads)
                h2 = ln(h1 + c, "ln2")
                f = params["ffn"]
                ff = F.linear(torch.relu(F.linear(h2, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return ln(h2 + ff, "ln3"), cross_weights
        '''),
        # one nested attention helper for both sub-layers, layer norm written out
        ("nested attention helper, layer norm by hand", r'''
            def encdec_decoder_block(y, memory, tgt_valid, src_valid, params, n_heads):
                B, T_y, D = y.shape
                T_x = memory.shape[1]
                if n_heads <= 0 or D % n_heads != 0:
                    raise ValueError("n_heads must divide d_model")
                d_k = D // n_heads

                def attend(x_q, x_kv, p, allowed):                                    # allowed: (B, T_q, T_k)
                    Tq, Tk = x_q.shape[1], x_kv.shape[1]
                    q = (x_q @ p["W_q"].T + p["b_q"]).reshape(B, Tq, n_heads, d_k).permute(0, 2, 1, 3)
                    k = (x_kv @ p["W_k"].T + p["b_k"]).reshape(B, Tk, n_heads, d_k).permute(0, 2, 1, 3)
                    v = (x_kv @ p["W_v"].T + p["b_v"]).reshape(B, Tk, n_heads, d_k).permute(0, 2, 1, 3)
                    s = torch.matmul(q, k.transpose(-1, -2)) * d_k ** -0.5
                    w = torch.softmax(s.masked_fill(~allowed[:, None], float("-inf")), dim=-1)
                    w = torch.where(allowed[:, None].any(dim=-1, keepdim=True), w, torch.zeros_like(w))
                    o = torch.matmul(w, v).permute(0, 2, 1, 3).reshape(B, Tq, D)
                    return o @ p["W_o"].T + p["b_o"], w

                def norm(t, p):
                    mu = t.mean(dim=-1, keepdim=True)
                    sd = torch.sqrt(((t - mu) ** 2).mean(dim=-1, keepdim=True) + 1e-5)
                    return (t - mu) / sd * p["weight"] + p["bias"]

                i = torch.arange(T_y, device=y.device)
                self_ok = (i[:, None] >= i[None, :]).expand(B, T_y, T_y)
                if tgt_valid is not None:
                    self_ok = self_ok & tgt_valid[:, None, :]
                cross_ok = torch.ones(B, T_y, T_x, dtype=torch.bool, device=y.device)
                if src_valid is not None:
                    cross_ok = cross_ok & src_valid[:, None, :]
                a, _ = attend(y, y, params["self_attn"], self_ok)
                h1 = norm(y + a, params["ln1"])
                c, cross_w = attend(h1, memory, params["cross_attn"], cross_ok)
                h2 = norm(h1 + c, params["ln2"])
                f = params["ffn"]
                return norm(h2 + torch.relu(h2 @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"], params["ln3"]), cross_w
        '''),
    ],
    # ============================================================ 09 KV cache
    "encdec_forward": [
        ("keyword arguments, one line", r'''
            def encdec_forward(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
                return run_decoder(tgt_in, cross_kv(encode(src, src_valid)), src_valid=src_valid, tgt_valid=tgt_valid)
        '''),
        ("named steps in a dict", r'''
            def encdec_forward(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
                steps = {}
                steps["memory"] = encode(src, src_valid)
                steps["kv"] = cross_kv(steps["memory"])
                masks = (src_valid, tgt_valid)
                return run_decoder(tgt_in, steps["kv"], *masks)
        '''),
    ],
    "translation_loss": [
        ("F.cross_entropy with ignore_index", r'''
            def translation_loss(encode, cross_kv, run_decoder, batch):
                logits = encdec_forward(encode, cross_kv, run_decoder, batch["src"], batch["src_mask"], batch["tgt_in"],
                                        batch["tgt_mask"])
                targets = batch["tgt_out"].masked_fill(~batch["tgt_mask"], -100)
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        '''),
        ("boolean indexing of the real tokens", r'''
            def translation_loss(encode, cross_kv, run_decoder, batch):
                real = batch["tgt_mask"]
                logits = encdec_forward(encode, cross_kv, run_decoder, batch["src"], batch["src_mask"], batch["tgt_in"],
                                        real)
                return F.cross_entropy(logits[real], batch["tgt_out"][real], reduction="sum") / real.sum()
        '''),
    ],
    "greedy_translate": [
        ("a list of steps, padding written by torch.where", r'''
            def greedy_translate(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
                if max_len < 0 or src.ndim != 2:
                    raise ValueError(f"need max_len >= 0 and a (B, T_x) source, got {max_len} and {tuple(src.shape)}")
                kv = cross_kv(encode(src, src_valid))
                written = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
                ended = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
                while len(written) - 1 < max_len and not ended.all():
                    logits = run_decoder(torch.stack(written, dim=1), kv, src_valid, None)
                    token = torch.where(ended, torch.zeros_like(written[0]), logits[:, -1, :].argmax(-1))
                    written.append(token)
                    ended = ended | (token == eos_id)
                return torch.stack(written[1:], dim=1) if len(written) > 1 else src.new_zeros(src.shape[0], 0)
        '''),
        ("a preallocated buffer, cut at the end", r'''
            def greedy_translate(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
                if not isinstance(max_len, int) or max_len < 0:
                    raise ValueError("max_len must be a whole number >= 0")
                if src.dim() != 2:
                    raise ValueError("src must have shape (B, T_x)")
                memory = encode(src, src_valid)
                kv = cross_kv(memory)
                B = src.size(0)
                buf = torch.zeros(B, max_len + 1, dtype=torch.long, device=src.device)
                buf[:, 0] = bos_id
                alive = torch.ones(B, dtype=torch.bool, device=src.device)
                n = 0
                for t in range(1, max_len + 1):
                    nxt = run_decoder(buf[:, :t], kv, src_valid, None)[:, t - 1].argmax(dim=-1)
                    buf[:, t] = nxt * alive
                    alive = alive & (nxt != eos_id)
                    n = t
                    if not alive.any():
                        break
                return buf[:, 1:n + 1]
        '''),
    ],
    "cached_attention": [
        # the mask from two aranges (key j <= T_past + i), einsum, torch.softmax
        ("arange mask, einsum", r'''
            def cached_attention(q, k_new, v_new, cache=None):
                if q.dim() != 4 or k_new.dim() != 4 or v_new.dim() != 4 or k_new.shape[:3] != q.shape[:3] \
                        or v_new.shape[:3] != q.shape[:3] or k_new.shape[3] != q.shape[3]:
                    raise ValueError("q, k_new and v_new must be (B, H, T_new, width) with the same B, H, T_new")
                if cache is None:
                    K, V = k_new, v_new
                else:
                    K_past, V_past = cache
                    B, H = q.shape[:2]
                    if (K_past.dim() != 4 or V_past.dim() != 4 or K_past.shape[:2] != (B, H)
                            or V_past.shape[:2] != (B, H) or K_past.shape[2] != V_past.shape[2]
                            or K_past.shape[3] != k_new.shape[3] or V_past.shape[3] != v_new.shape[3]):
                        raise ValueError("the cache does not fit the new keys and values")
                    K = torch.cat((K_past, k_new), dim=2)
                    V = torch.cat((V_past, v_new), dim=2)
                T_new, T_all = q.shape[2], K.shape[2]
                rows = torch.arange(T_new, device=q.device)[:, None] + (T_all - T_new)   # absolute query positions
                allowed = torch.arange(T_all, device=q.device)[None, :] <= rows          # (T_new, T_all)
                scores = torch.einsum("bhid,bhjd->bhij", q, K) / math.sqrt(q.shape[-1])
                weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                return torch.einsum("bhij,bhjd->bhid", weights, V), (K, V)
        '''),
        # an empty cache made explicit, SDPA with a tril(diagonal=T_past) bool mask
        ("SDPA with a shifted tril mask", r'''
            def cached_attention(q, k_new, v_new, cache=None):
                if not (q.ndim == k_new.ndim == v_new.ndim == 4):
                    raise ValueError("q, k_new and v_new must be 4-D (B, H, T_new, width)")
                if k_new.shape[:-1] != q.shape[:-1] or v_new.shape[:-1] != q.shape[:-1] \
                        or k_new.shape[-1] != q.shape[-1]:
                    raise ValueError(f"q {tuple(q.shape)}, k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} "
                                     f"do not fit")
                if cache is None:
                    K_past = k_new.new_zeros(*k_new.shape[:2], 0, k_new.shape[-1])
                    V_past = v_new.new_zeros(*v_new.shape[:2], 0, v_new.shape[-1])
                else:
                    K_past, V_past = cache
                    if K_past.ndim != 4 or V_past.ndim != 4:
                        raise ValueError("the cached keys and values must be 4-D")
                    T_past = K_past.shape[2]
                    if tuple(K_past.shape) != (*q.shape[:2], T_past, k_new.shape[-1]) \
                            or tuple(V_past.shape) != (*q.shape[:2], T_past, v_new.shape[-1]):
                        raise ValueError(f"the cache K {tuple(K_past.shape)}, V {tuple(V_past.shape)} does not fit")
                K, V = torch.cat([K_past, k_new], dim=-2), torch.cat([V_past, v_new], dim=-2)
                T_new, T_past = q.shape[-2], K_past.shape[-2]
                allowed = torch.ones(T_new, T_past + T_new, dtype=torch.bool, device=q.device).tril(T_past)
                return F.scaled_dot_product_attention(q, K, V, attn_mask=allowed), (K, V)
        '''),
    ],
    "decoder_block_step": [
        # the learner's own cached_attention, heads by view, layer norm written out
        ("own cached_attention, layer norm by hand", r'''
            def decoder_block_step(x_new, params, n_heads, cache=None):
                B, T_new, D = x_new.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                a = params["attn"]

                def heads(t):
                    return t.view(B, T_new, n_heads, d_k).transpose(1, 2)

                def layer_norm(t, ln):
                    mean = t.mean(-1, keepdim=True)
                    var = t.var(-1, unbiased=False, keepdim=True)
                    return (t - mean) / torch.sqrt(var + 1e-5) * ln["weight"] + ln["bias"]

                q, k, v = (heads(F.linear(x_new, a["W_" + n], a["b_" + n])) for n in "qkv")
                out, cache = cached_attention(q, k, v, cache)
                attn = F.linear(out.transpose(1, 2).reshape(B, T_new, D), a["W_o"], a["b_o"])
                h = layer_norm(x_new + attn, params["ln1"])
                f = params["ffn"]
                ff = F.linear(F.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return layer_norm(h + ff, params["ln2"]), cache
        '''),
        # one fused QKV projection, the cache grown here, SDPA
        ("fused QKV, own cache, SDPA", r'''
            def decoder_block_step(x_new, params, n_heads, cache=None):
                B, T_new, D = x_new.shape
                if n_heads <= 0 or D % n_heads != 0:
                    raise ValueError("n_heads must divide the model width")
                H, d_k = n_heads, D // n_heads
                a = params["attn"]
                W = torch.cat([a["W_q"], a["W_k"], a["W_v"]], dim=0)                     # (3D, D)
                bias = torch.cat([a["b_q"], a["b_k"], a["b_v"]], dim=0)
                qkv = (x_new @ W.T + bias).reshape(B, T_new, 3, H, d_k).permute(2, 0, 3, 1, 4)   # (3, B, H, T_new, d_k)
                q, k, v = qkv[0], qkv[1], qkv[2]
                if cache is not None:
                    K_past, V_past = cache
                    if K_past.shape[:2] != (B, H) or K_past.shape[-1] != d_k or V_past.shape != K_past.shape:
                        raise ValueError(f"a cache of shape {tuple(K_past.shape)} does not fit B={B}, H={H}, d_k={d_k}")
                    k, v = torch.cat([K_past, k], dim=2), torch.cat([V_past, v], dim=2)
                T_all = k.shape[2]
                allowed = torch.ones(T_new, T_all, dtype=torch.bool, device=x_new.device).tril(diagonal=T_all - T_new)
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)       # (B, H, T_new, d_k)
                att = heads.transpose(1, 2).reshape(B, T_new, D) @ a["W_o"].T + a["b_o"]
                ln1, ln2, f = params["ln1"], params["ln2"], params["ffn"]
                h = F.layer_norm(x_new + att, (D,), ln1["weight"], ln1["bias"], 1e-5)
                ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
                return F.layer_norm(h + ff, (D,), ln2["weight"], ln2["bias"], 1e-5), (k, v)
        '''),
    ],
    "greedy_generate": [
        ("preallocated output", r'''
            def greedy_generate(step, prompt, eos_id, max_len):
                if prompt.ndim != 2 or prompt.shape[-1] == 0:
                    raise ValueError(f"prompt must be (B, T_p) with T_p >= 1, got {tuple(prompt.shape)}")
                if max_len < 0:
                    raise ValueError("max_len must not be negative")
                out = torch.zeros(prompt.shape[0], max_len, dtype=torch.long, device=prompt.device)
                ended = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
                feed, cache, n = prompt, None, 0
                while n < max_len and not ended.all():
                    logits, cache = step(feed, cache)
                    out[:, n] = torch.where(ended, 0, logits[:, -1, :].argmax(dim=-1))
                    ended |= out[:, n] == eos_id
                    feed = out[:, n:n + 1].clone()
                    n += 1
                return out[:, :n]
        '''),
        # the text grown with torch.cat, the newest token fed back as (B, 1)
        ("torch.cat, feed back", r'''
            def greedy_generate(step, prompt, eos_id, max_len):
                if prompt.dim() != 2 or prompt.size(1) < 1:
                    raise ValueError("a (B, T_p) prompt with at least one token is needed")
                if max_len < 0:
                    raise ValueError(f"max_len={max_len} < 0")
                generated = prompt.new_empty(prompt.size(0), 0)
                feed, cache = prompt, None
                for _ in range(max_len):
                    logits, cache = step(feed, cache)
                    feed = logits[:, -1:].argmax(dim=-1)                       # (B, 1): the newest token
                    if generated.size(1):
                        finished = (generated == eos_id).any(dim=1, keepdim=True)
                        feed = feed.masked_fill(finished, 0)
                    generated = torch.cat([generated, feed], dim=1)
                    if (generated == eos_id).any(dim=1).all():
                        break
                return generated
        '''),
    ],
    "kv_cache_bytes": [
        ("math.prod, type() checks", r'''
            def kv_cache_bytes(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
                sizes = (n_layers, n_heads, d_k, n_positions, batch, bytes_per_value)
                if any(type(s) is not int or s < 0 for s in sizes):
                    raise ValueError(f"every size must be an int >= 0, got {sizes}")
                return 2 * math.prod(sizes)
        '''),
        ("functools.reduce, operator.index", r'''
            import functools
            import operator

            def kv_cache_bytes(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
                values = [n_layers, n_heads, d_k, n_positions, batch, bytes_per_value]
                for v in values:
                    if isinstance(v, bool):
                        raise ValueError("sizes are numbers, not booleans")
                    try:
                        operator.index(v)
                    except TypeError:
                        raise ValueError(f"{v!r} is not a whole number") from None
                    if v < 0:
                        raise ValueError(f"{v} < 0")
                keys_and_values = 2
                return keys_and_values * functools.reduce(operator.mul, (int(v) for v in values), 1)
        '''),
    ],
    # ============================================================ 05b attention in the RNN encoder-decoder
    "additive_score": [
        ("einsum", r"""
            def additive_score(h_prev, states, W_q, W_k, u):
                if (h_prev.dim(), states.dim()) != (2, 3) or h_prev.shape[0] != states.shape[0]:
                    raise ValueError("bad shapes")
                if W_q.shape != (u.shape[0], h_prev.shape[1]) or W_k.shape != (u.shape[0], states.shape[2]):
                    raise ValueError("the weights do not fit")
                hidden = torch.einsum("ad,bd->ba", W_q, h_prev)[:, None] + torch.einsum("ae,bte->bta", W_k, states)
                return torch.einsum("bta,a->bt", torch.tanh(hidden), u)
        """),
        ("a loop over the source positions", r"""
            def additive_score(h_prev, states, W_q, W_k, u):
                ok = h_prev.dim() == 2 and states.dim() == 3 and len(h_prev) == len(states)
                if not ok or W_q.shape[1] != h_prev.shape[1] or W_k.shape[1] != states.shape[2]:
                    raise ValueError("shapes")
                if not (W_q.shape[0] == W_k.shape[0] == u.shape[0]):
                    raise ValueError("d_a differs")
                out = torch.zeros(states.shape[0], states.shape[1], dtype=states.dtype, device=states.device)
                for j in range(states.shape[1]):
                    out[:, j] = torch.tanh(h_prev @ W_q.T + states[:, j] @ W_k.T) @ u
                return out
        """),
    ],
    "dot_score": [
        ("torch.bmm", r"""
            def dot_score(h_dec, states):
                if h_dec.dim() != 2 or states.dim() != 3 or h_dec.shape[0] != states.shape[0] \
                        or h_dec.shape[1] != states.shape[2]:
                    raise ValueError("shapes")
                return torch.bmm(states, h_dec.unsqueeze(2)).squeeze(2)
        """),
        ("broadcast and sum", r"""
            def dot_score(h_dec, states):
                if tuple(h_dec.shape) != (states.shape[0], states.shape[2]) or states.dim() != 3:
                    raise ValueError(f"h_dec {tuple(h_dec.shape)} does not fit states {tuple(states.shape)}")
                return (h_dec[:, None, :] * states).sum(-1)
        """),
    ],
    "attend": [
        ("an explicit softmax with torch.where", r"""
            def attend(scores, states, src_mask=None):
                if scores.dim() != 2 or states.dim() != 3 or scores.shape != states.shape[:2]:
                    raise ValueError("shapes")
                if src_mask is None:
                    src_mask = torch.ones_like(scores, dtype=torch.bool)
                if src_mask.shape != scores.shape:
                    raise ValueError("mask")
                if scores.shape[1] == 0:  # nothing to read
                    return states.new_zeros(states.shape[0], states.shape[2]), scores.clone()
                z = torch.where(src_mask, scores, torch.full_like(scores, -torch.inf))
                top = z.max(dim=-1, keepdim=True).values
                e = torch.where(src_mask, torch.exp(z - torch.where(top.isinf(), 0.0, top)), 0.0)
                total = e.sum(-1, keepdim=True)
                alpha = torch.where(total > 0, e / total.clamp_min(1e-300), 0.0)
                return torch.einsum("bt,bth->bh", alpha, states), alpha
        """),
        ("float64 inside, a loop over the batch", r"""
            def attend(scores, states, src_mask=None):
                if scores.shape != states.shape[:2] or states.dim() != 3:
                    raise ValueError("scores and states disagree")
                if src_mask is not None and src_mask.shape != scores.shape:
                    raise ValueError("src_mask")
                alpha = torch.zeros_like(scores)
                for b in range(scores.shape[0]):
                    if src_mask is None:
                        real = torch.ones(scores.shape[1], dtype=torch.bool, device=scores.device)
                    else:
                        real = src_mask[b]
                    if real.any():
                        alpha[b, real] = torch.softmax(scores[b, real].double(), 0).to(scores.dtype)
                return (alpha.unsqueeze(-1) * states).sum(1), alpha
        """),
    ],
    "attention_decoder_step": [
        ("weights applied with F.linear", r"""
            def attention_decoder_step(prev_ids, h_prev, states, src_mask, params):
                p = params
                context, alpha = attend(additive_score(h_prev, states, p["W_q"], p["W_k"], p["u"]), states, src_mask)
                h = torch.tanh(F.linear(F.embedding(prev_ids, p["E_tgt"]), p["W_x"]) + F.linear(context, p["W_c"])
                               + F.linear(h_prev, p["W_h"], p["b"]))
                return F.linear(torch.cat((h, context), 1), p["W_out"], p["b_out"]), h, alpha
        """),
        ("the output layer split in two", r"""
            def attention_decoder_step(prev_ids, h_prev, states, src_mask, params):
                scores = additive_score(h_prev, states, params["W_q"], params["W_k"], params["u"])
                context, alpha = attend(scores, states, src_mask)
                x = params["E_tgt"][prev_ids]
                h = torch.tanh(x @ params["W_x"].T + h_prev @ params["W_h"].T + context @ params["W_c"].T
                               + params["b"])
                d_dec = h.shape[-1]
                W_out = params["W_out"]
                logits = h @ W_out[:, :d_dec].T + context @ W_out[:, d_dec:].T + params["b_out"]
                return logits, h, alpha
        """),
    ],
    "answer_alignment_weights": [
        ("a product", """
            def answer_alignment_weights():
                return 10 * 11
        """),
        ("a float", """
            def answer_alignment_weights():
                return 110.0
        """),
    ],
    "answer_bottleneck": [
        ("a capital letter", """
            def answer_bottleneck():
                return "B"
        """),
        ("the letter in parentheses", """
            def answer_bottleneck():
                return "(b)"
        """),
    ],
    # ============================================================ self-check questions (a literal, in any form)
    "answer_embedding_table_size": [
        ("a float", """
            def answer_embedding_table_size():
                return 64000.0
        """),
        ("a tensor", """
            def answer_embedding_table_size():
                return torch.tensor(64000)
        """),
    ],
    "answer_one_hot_product": [
        ("a capital letter", """
            def answer_one_hot_product():
                return "C"
        """),
        ("the letter in parentheses", """
            def answer_one_hot_product():
                return " (c) "
        """),
    ],
    "answer_why_scale": [
        ("a capital letter", """
            def answer_why_scale():
                return "A"
        """),
        ("the letter in parentheses", """
            def answer_why_scale():
                return " (a) "
        """),
    ],
    "answer_score_std": [
        ("a float", """
            def answer_score_std():
                return 8.0
        """),
        ("a tensor", """
            def answer_score_std():
                return torch.tensor(8)
        """),
    ],
    "answer_temperature_top_probability": [
        ("computed with torch", """
            def answer_temperature_top_probability():
                return torch.softmax(torch.tensor([2.0, 1.0, 0.0]) / 2, dim=0).max()
        """),
        ("every digit", """
            def answer_temperature_top_probability():
                return 0.5064803
        """),
    ],
    "answer_why_log_probabilities": [
        ("a capital letter", """
            def answer_why_log_probabilities():
                return "D"
        """),
        ("the letter in parentheses", """
            def answer_why_log_probabilities():
                return " (d) "
        """),
    ],
    "answer_causal_pairs": [
        ("a float", """
            def answer_causal_pairs():
                return 21.0
        """),
        ("a tensor", """
            def answer_causal_pairs():
                return torch.tensor(21)
        """),
    ],
    "answer_why_minus_infinity": [
        ("a capital letter", """
            def answer_why_minus_infinity():
                return "B"
        """),
        ("the letter in parentheses", """
            def answer_why_minus_infinity():
                return " (b) "
        """),
    ],
    "answer_context_shape": [
        ("a list", """
            def answer_context_shape():
                return [4, 32]
        """),
        ("a torch.Size", """
            def answer_context_shape():
                return torch.Size([4, 32])
        """),
    ],
    "answer_teacher_forcing": [
        ("a capital letter", """
            def answer_teacher_forcing():
                return "A"
        """),
        ("the letter in parentheses", """
            def answer_teacher_forcing():
                return " (a) "
        """),
    ],
    "answer_head_width": [
        ("a float", """
            def answer_head_width():
                return 8.0
        """),
        ("a tensor", """
            def answer_head_width():
                return torch.tensor(8)
        """),
    ],
    "answer_shuffled_tokens": [
        ("a capital letter", """
            def answer_shuffled_tokens():
                return "C"
        """),
        ("the letter in parentheses", """
            def answer_shuffled_tokens():
                return " (c) "
        """),
    ],
    "answer_encoder_to_decoder": [
        ("a capital letter", """
            def answer_encoder_to_decoder():
                return "D"
        """),
        ("the letter in parentheses", """
            def answer_encoder_to_decoder():
                return " (d) "
        """),
    ],
    "answer_next_token_targets": [
        ("a float", """
            def answer_next_token_targets():
                return 11.0
        """),
        ("a tensor", """
            def answer_next_token_targets():
                return torch.tensor(11)
        """),
    ],
    "answer_nucleus": [
        ("a list", """
            def answer_nucleus():
                return [0, 1, 2]
        """),
        ("a torch.Size", """
            def answer_nucleus():
                return torch.Size([0, 1, 2])
        """),
    ],
    "answer_cross_attention_sources": [
        ("a capital letter", """
            def answer_cross_attention_sources():
                return "A"
        """),
        ("the letter in parentheses", """
            def answer_cross_attention_sources():
                return " (a) "
        """),
    ],
    "answer_cross_weights_shape": [
        ("a list", """
            def answer_cross_weights_shape():
                return [2, 4, 5, 7]
        """),
        ("a torch.Size", """
            def answer_cross_weights_shape():
                return torch.Size([2, 4, 5, 7])
        """),
    ],
    "answer_empty_source": [
        ("a capital letter", """
            def answer_empty_source():
                return "C"
        """),
        ("the letter in parentheses", """
            def answer_empty_source():
                return " (c) "
        """),
    ],
    "answer_positions_without_cache": [
        ("a float", """
            def answer_positions_without_cache():
                return 95.0
        """),
        ("a tensor", """
            def answer_positions_without_cache():
                return torch.tensor(95)
        """),
    ],
    "answer_what_the_cache_keeps": [
        ("a capital letter", """
            def answer_what_the_cache_keeps():
                return "B"
        """),
        ("the letter in parentheses", """
            def answer_what_the_cache_keeps():
                return " (b) "
        """),
    ],
    # ============================================================ 10 capstone
    "prefix_lm_mask": [
        ("a loop over the rows", r'''
            def prefix_lm_mask(prefix_lengths, T):
                if T < 0:
                    raise ValueError("T < 0")
                rows = []
                for p in prefix_lengths.tolist():
                    if not 0 <= p <= T:
                        raise ValueError(f"prefix length {p} outside 0..{T}")
                    m = torch.ones(T, T, dtype=torch.bool, device=prefix_lengths.device).tril()
                    m[:, :p] = True
                    rows.append(m)
                if not rows:
                    return torch.zeros(0, T, T, dtype=torch.bool, device=prefix_lengths.device)
                return torch.stack(rows)
        '''),
        ("torch.where on broadcast indices", r'''
            def prefix_lm_mask(prefix_lengths, T):
                if T < 0 or bool((prefix_lengths < 0).any()) or bool((prefix_lengths > T).any()):
                    raise ValueError("prefix lengths must lie in 0..T")
                i = torch.arange(T, device=prefix_lengths.device).view(1, T, 1)
                j = torch.arange(T, device=prefix_lengths.device).view(1, 1, T)
                p = prefix_lengths.view(-1, 1, 1)
                return torch.where(j < p, torch.ones_like(j < p), j <= i)
        '''),
    ],
    "answer_prefix_reads_later_source": [
        ("a capital letter", """
            def answer_prefix_reads_later_source():
                return "B"
        """),
        ("the letter in parentheses", """
            def answer_prefix_reads_later_source():
                return "(b)"
        """),
    ],
    "answer_pairs_the_prefix_adds": [
        ("a float", """
            def answer_pairs_the_prefix_adds():
                return 10.0
        """),
        ("worked out", """
            def answer_pairs_the_prefix_adds():
                return 5 * 4 // 2
        """),
    ],
}

# (exercise, style) -> why the grader wrongly rejects that correct answer (pytest.mark.xfail(strict=True))
UNFAIR = {}


def _slug(label):
    return re.sub(r"[^0-9A-Za-z.*]+", "-", label).strip("-")


PARAMS = [pytest.param(name, i, id=f"{name}-{_slug(label)}",
                       marks=[pytest.mark.xfail(strict=True, reason=UNFAIR[name, label])] if (name, label) in UNFAIR
                       else [])
          for name, styles in STYLES.items() for i, (label, _) in enumerate(styles)]


@pytest.mark.parametrize("name,index", PARAMS)
def test_a_correct_answer_in_another_style_passes_every_part(name, index):
    """A correct answer written another way than the reference (einsum, loops, library calls, preallocated
    outputs, float64 inside, other validation raising the same exception class), compiled as a notebook cell in its
    notebook's namespace, passes every part of its cells."""
    label, src = STYLES[name][index]
    fn = learner_function(name, src)
    failures = []
    for part in learner.check.parts_of(name):
        try:
            check(name, fn, part)
        except CheckFailed as exc:
            failures.append(str(exc))
    assert not failures, f"the grader rejected the correct style {label!r} of {name}:\n" + "\n---\n".join(failures)


def test_every_exercise_has_at_least_two_other_styles():
    """Each exercise of the grader has two or more correct styles above, with distinct labels."""
    assert set(STYLES) <= set(EXERCISES), sorted(set(STYLES) - set(EXERCISES))
    few = {name: len(STYLES.get(name, [])) for name in EXERCISES if len(STYLES.get(name, [])) < 2}
    assert not few, f"exercises with fewer than two styles: {few}"
    for name, styles in STYLES.items():
        labels = [label for label, _ in styles]
        assert len(set(labels)) == len(labels), f"{name} has two styles with the same label"


# ---------------------------------------------------------------- the same answers, graded as at grading time
# One style per notebook through the sandbox, the first and the second in turn: every style of every exercise passes
# in-process above, and what the sandbox adds (the definitions rebuilt from the cell's text, fresh copies of the
# inputs, the value sent back as plain data and compared on the trusted side) does not depend on how the body
# computes. Each notebook's reference goes the same way in the pipeline tests.
NOTEBOOK_STYLES = [(notebook, k % 2) for k, notebook in enumerate(NOTEBOOKS)]


@pytest.mark.pipeline  # grades a whole notebook through the sandbox, as grading does: make test, not test-fast
@pytest.mark.parametrize("notebook,index", NOTEBOOK_STYLES, ids=[f"{n}-style{i}" for n, i in NOTEBOOK_STYLES])
def test_a_notebook_answered_in_other_styles_passes_every_part_through_the_sandbox(notebook, index):
    """Every exercise of a notebook answered in its ``index``-th other style, held by a sandboxed worker as at
    grading time (the trusted side computes the reference's outputs and compares), passes all four parts."""
    from coursekit.sync import setup_source
    from grader import remote
    names = [name for name, ex in EXERCISES.items() if ex.notebook == notebook]
    cells = [textwrap.dedent(STYLES[name][index][1]) for name in names]
    with remote.Worker(setup_source(notebook), cells) as w:
        w.start()
        failures = []
        for name in names:
            fn = w.function(name, name)
            assert fn is not None, f"{name} was not defined in the sandbox: {w.define_errors}"
            for part in learner.check.parts_of(name):
                try:
                    check(name, fn, part)
                except CheckFailed as exc:
                    failures.append(str(exc))
        assert not failures, "\n---\n".join(failures)
        assert not w.faults, w.faults
