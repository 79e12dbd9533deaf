"""Notebook 06: the encoder (BERT-style), built from multi-head attention.

Step 5 of the visual walkthrough: every token may attend to every real token
(bidirectional self-attention, only padding is blocked). One encoder block is

    r'  = LayerNorm_1(x + MultiHeadAttention(x, x, x, padding mask))
    out = LayerNorm_2(r' + FFN(r')),     FFN(r) = W_2 relu(W_1 r + b_1) + b_2

(post-norm, as in "Attention Is All You Need" and ``nn.TransformerEncoderLayer``'s
default). Shape letters: B batch, T length, D model width, H heads, d_k = D / H
head width, F feed-forward width, V vocabulary size.

Weights are plain tensors in dicts, laid out like ``torch.nn.Linear`` (a weight
W of shape (out, in) acts on rows as ``x @ W.T + b``):

    attention  {"W_q", "b_q", "W_k", "b_k", "W_v", "b_v", "W_o", "b_o"}   W_* (D, D), b_* (D,)
    ffn        {"W_1" (F, D), "b_1" (F,), "W_2" (D, F), "b_2" (D,)}
    layer norm {"weight" (D,), "bias" (D,)}
    block      {"attn": attention, "ln1": layer norm, "ffn": ffn, "ln2": layer norm}

Masks are boolean, True = may attend (notebook 04).
"""
import math

import torch
import torch.nn.functional as F

from .masks_attention import masked_attention

def split_heads(x, n_heads):
    """Cut the model width into ``n_heads`` heads of width d_k = D / n_heads.

    Args:
        x: (B, T, D).
        n_heads: H, which must divide D.

    Returns:
        (B, H, T, d_k): head h holds the columns h*d_k .. (h+1)*d_k - 1 of x.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if x.dim() != 3:
        raise ValueError(f"x must be (B, T, D), got shape {tuple(x.shape)}")
    B, T, D = x.shape
    if n_heads < 1 or D % n_heads != 0:
        raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
    d_k = D // n_heads
    return x.reshape(B, T, n_heads, d_k).transpose(1, 2)  # (B, H, T, d_k)
    ### END SOLUTION

def merge_heads(x):
    """Undo ``split_heads``: put the heads side by side again.

    Args:
        x: (B, H, T, d_k).

    Returns:
        (B, T, H * d_k): columns h*d_k .. (h+1)*d_k - 1 come from head h.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x must be (B, H, T, d_k), got shape {tuple(x.shape)}")
    B, H, T, d_k = x.shape
    return x.transpose(1, 2).reshape(B, T, H * d_k)  # (B, T, D)
    ### END SOLUTION

def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
    """Multi-head attention: project, split into heads, attend, merge, project out.

    Q = x_q W_q^T + b_q, K = x_kv W_k^T + b_k, V = x_kv W_v^T + b_v; each is split
    into H heads, every head runs masked attention on its own d_k columns, the
    heads are merged and the result is projected by W_o, b_o. Self-attention
    passes the same tensor as x_q and x_kv; cross-attention passes the decoder's
    states as x_q and the encoder's output as x_kv.

    Args:
        x_q: (B, T_q, D), the positions that ask.
        x_kv: (B, T_k, D), the positions that answer.
        params: dict with W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o.
        n_heads: H, which must divide D.
        mask: optional bool mask broadcastable to (B, T_q, T_k), True = may
            attend; the same mask applies to every head.

    Returns:
        out: (B, T_q, D).
        weights: (B, H, T_q, T_k), each head's attention weights. A query with
            no allowed key gets zero weights (its output is then b_o).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if x_q.dim() != 3 or x_kv.dim() != 3 or x_q.shape[0] != x_kv.shape[0] or x_q.shape[2] != x_kv.shape[2]:
        raise ValueError(f"x_q (B, T_q, D) and x_kv (B, T_k, D) must share B and D, got {tuple(x_q.shape)} "
                         f"and {tuple(x_kv.shape)}")
    q = split_heads(x_q @ params["W_q"].T + params["b_q"], n_heads)  # (B, H, T_q, d_k)
    k = split_heads(x_kv @ params["W_k"].T + params["b_k"], n_heads)  # (B, H, T_k, d_k)
    v = split_heads(x_kv @ params["W_v"].T + params["b_v"], n_heads)  # (B, H, T_k, d_k)
    if mask is not None:
        if mask.dim() > 3:
            raise ValueError(f"mask must broadcast to (B, T_q, T_k), got shape {tuple(mask.shape)}")
        mask = mask.reshape((1,) * (3 - mask.dim()) + tuple(mask.shape))[:, None]  # (B or 1, 1, T_q, T_k)
    out, weights = masked_attention(q, k, v, mask)  # (B, H, T_q, d_k), (B, H, T_q, T_k)
    return merge_heads(out) @ params["W_o"].T + params["b_o"], weights  # (B, T_q, D)
    ### END SOLUTION

def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
    """The fixed positional encodings of "Attention Is All You Need".

    PE[i, 2c] = sin(i / base^(2c / D)),  PE[i, 2c + 1] = cos(i / base^(2c / D))
    for positions i = 0 .. T - 1 and pairs c = 0 .. ceil(D / 2) - 1: column pair c is a
    sine and a cosine of one frequency, the frequencies falling geometrically
    from 1 to nearly 1 / base. (An odd D keeps the last sine without its cosine.)

    Returns:
        (T, D) tensor of ``dtype`` on ``device``.
    """
    ### BEGIN SOLUTION
    if T < 0 or D < 1:
        raise ValueError(f"need T >= 0 and D >= 1, got T={T}, D={D}")
    i = torch.arange(T, dtype=torch.float64, device=device)[:, None]  # (T, 1), the positions
    two_c = torch.arange(0, D, 2, dtype=torch.float64, device=device)  # (ceil(D/2),), 2c for each pair c
    angle = i / base ** (two_c / D)  # (T, ceil(D/2))
    pe = torch.zeros(T, D, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : D // 2])
    return pe.to(dtype)
    ### END SOLUTION

def embed_with_positions(ids, E, P):
    """Token embeddings plus positional encodings: x[b, t] = E[ids[b, t]] + P[t].

    Args:
        ids: LongTensor (B, T).
        E: (V, D) token embedding table.
        P: (T_max, D) positional table, learned or fixed (``sinusoidal_positions``);
            position t (0-based) reads row t.

    Returns:
        (B, T, D).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if ids.dim() != 2:
        raise ValueError(f"ids must be (B, T), a batch of sequences; got shape {tuple(ids.shape)}")
    B, T = ids.shape
    if T > P.shape[0]:
        raise ValueError(f"a sequence of length T={T} is longer than the positional table, which has "
                         f"T_max={P.shape[0]} rows")
    if E.shape[1] != P.shape[1]:
        raise ValueError(f"E is {tuple(E.shape)} and P is {tuple(P.shape)}: they must have the same width D")
    return E[ids] + P[:T]  # (B, T, D) + (T, D)
    ### END SOLUTION

def encoder_block(x, valid, params, n_heads):
    """One post-norm encoder block: bidirectional self-attention, then the FFN.

    r'  = LayerNorm(x + MultiHeadAttention(x, x, padding mask))    (params "attn", "ln1")
    out = LayerNorm(r' + W_2 relu(W_1 r' + b_1) + b_2)             (params "ffn", "ln2")

    Every query may attend to every real key (no causal mask); keys where
    ``valid`` is False (padding) are blocked. Layer norms use eps = 1e-5.

    Args:
        x: (B, T, D) the block's input.
        valid: BoolTensor (B, T), True on real tokens (None: no padding).
        params: {"attn": ..., "ln1": ..., "ffn": ..., "ln2": ...}.
        n_heads: H.

    Returns:
        (B, T, D).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    mask = None if valid is None else valid[:, None, :]  # (B, 1, T): keys may be attended iff real
    D = x.shape[-1]
    a, _ = multi_head_attention(x, x, params["attn"], n_heads, mask)  # (B, T, D)
    x = F.layer_norm(x + a, (D,), params["ln1"]["weight"], params["ln1"]["bias"], 1e-5)  # r'
    f = params["ffn"]
    ff = torch.relu(x @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]  # (B, T, F) -> (B, T, D)
    return F.layer_norm(x + ff, (D,), params["ln2"]["weight"], params["ln2"]["bias"], 1e-5)
    ### END SOLUTION

def masked_lm_loss(logits, targets, is_masked):
    """BERT's objective: cross-entropy at the masked positions only, averaged over them.

    Args:
        logits: (B, T, V) the encoder's predictions at every position.
        targets: LongTensor (B, T), the original tokens.
        is_masked: BoolTensor (B, T), True where the input token was hidden.

    Returns:
        scalar tensor: mean over the masked positions of -log softmax(logits)[target];
        0 when no position is masked (nothing to predict, never NaN).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if logits.shape[:2] != targets.shape or is_masked.shape != targets.shape:
        raise ValueError(f"logits (B, T, V) {tuple(logits.shape)}, targets {tuple(targets.shape)} and is_masked "
                         f"{tuple(is_masked.shape)} must agree on (B, T)")
    logp = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    safe_targets = torch.where(is_masked, targets, torch.zeros_like(targets))  # unmasked targets may be anything
    nll = -logp.gather(-1, safe_targets[..., None])[..., 0]  # (B, T)
    n = is_masked.sum()
    return torch.where(is_masked, nll, torch.zeros_like(nll)).sum() / n.clamp_min(1)
    ### END SOLUTION


def probe_accuracy(hidden, positions, senses, is_train):
    """How well one layer's vector of a word tells its two senses apart: a linear probe's test accuracy.

    The probe is the nearest sense mean: from the training sentences it takes the mean vector of the word in
    sense 0 and in sense 1; a test sentence is given sense 1 when its word's vector is strictly nearer (in
    Euclidean distance) to sense 1's mean, else sense 0. Its decision boundary is a hyperplane, so it is a
    linear probe. It is fitted on the sentences where ``is_train`` is True and scored on the others, never on
    the sentences it was fitted on.

    Args:
        hidden: (B, T, D) one layer's output (or the embedding) for B sentences.
        positions: LongTensor (B,), where the word sits in each sentence (0 .. T-1).
        senses: LongTensor (B,), the word's sense in each sentence, 0 or 1.
        is_train: BoolTensor (B,), True for the sentences the probe is fitted on.

    Returns:
        float: the share of the test sentences (is_train False) whose sense the probe gets right.

    Raises:
        ValueError when the shapes disagree, a position is outside its sentence, a sense is not 0 or 1, the
        training sentences lack one of the senses (a probe cannot learn a sense it never saw), or no sentence
        is left to test on.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if hidden.dim() != 3 or positions.shape != hidden.shape[:1] or senses.shape != positions.shape \
            or is_train.shape != positions.shape:
        raise ValueError(f"hidden must be (B, T, D) and positions, senses, is_train (B,); got {tuple(hidden.shape)}, "
                         f"{tuple(positions.shape)}, {tuple(senses.shape)}, {tuple(is_train.shape)}")
    B, T, _ = hidden.shape
    if bool(((positions < 0) | (positions >= T)).any()):
        raise ValueError(f"every position must be in 0 .. {T - 1}, got {positions.tolist()}")
    if bool(((senses != 0) & (senses != 1)).any()):
        raise ValueError(f"senses must be 0 or 1, got {senses.tolist()}")
    word = hidden[torch.arange(B, device=hidden.device), positions]  # (B, D): the word's vector in each sentence
    fit, test = is_train, ~is_train
    if not bool((fit & (senses == 0)).any()) or not bool((fit & (senses == 1)).any()):
        raise ValueError("the training sentences must hold both senses: a probe cannot learn a sense it never saw")
    if not bool(test.any()):
        raise ValueError("no sentence is left to test on (every is_train is True)")
    mean_0 = word[fit & (senses == 0)].mean(dim=0)  # (D,)
    mean_1 = word[fit & (senses == 1)].mean(dim=0)
    d_0 = ((word[test] - mean_0) ** 2).sum(dim=-1)  # (n_test,)
    d_1 = ((word[test] - mean_1) ** 2).sum(dim=-1)
    guess = (d_1 < d_0).long()  # sense 1 when strictly nearer to its mean
    return (guess == senses[test]).double().mean().item()
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_head_width():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 8
    ### END SOLUTION


def answer_shuffled_tokens():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "c"
    ### END SOLUTION
