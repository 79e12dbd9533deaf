"""Notebook 07: the decoder (GPT-style): causal self-attention, RoPE, next-token log-probability.

Step 6 of the visual walkthrough: position i may read positions j <= i only
(the causal mask), so the model can be trained on every next token of a text
at once and then generate one token at a time without ever having seen the
future. The block is the encoder's block (notebook 06) with the causal mask
added to the padding mask; nothing else changes.

Rotary position embeddings (RoPE) encode order inside attention instead of
adding a vector to the input: queries and keys (never values) are rotated by
an angle proportional to their position, so the score q_m . k_n depends on the
offset m - n only.

Shape letters as in notebook 06; the weight dicts are those of
``solutions/encoder.py``.
"""
import torch
import torch.nn.functional as F

from .masks_attention import masked_attention
from .encoder import merge_heads, multi_head_attention, split_heads


def rope(x, positions=None, base=10000.0):
    """Rotary position embedding of rows of width d (d even), pair by pair.

    Column pair c = (x[..., 2c], x[..., 2c + 1]) of the row at position i is
    rotated by the angle i * omega_c, with omega_c = base^(-2c / d):

        out[..., 2c]     = x[..., 2c] cos(i omega_c) - x[..., 2c + 1] sin(i omega_c)
        out[..., 2c + 1] = x[..., 2c] sin(i omega_c) + x[..., 2c + 1] cos(i omega_c)

    Args:
        x: (..., T, d), the queries or keys of one head (or of all heads at once).
        positions: LongTensor (T,), the position of each row (None: 0 .. T - 1).
        base: the frequency base.

    Returns:
        tensor of x's shape, dtype and device.
    """
    ### BEGIN SOLUTION
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE rotates pairs of columns: the width d={d} must be even")
    if positions is None:
        positions = torch.arange(T, device=x.device)
    if positions.shape != (T,):
        raise ValueError(f"positions must be ({T},), one per row, got {tuple(positions.shape)}")
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)  # (d/2,)
    angle = positions.to(device=x.device, dtype=torch.float64)[:, None] * omega  # (T, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., T, d/2) each
    out = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., T, d/2, 2)
    return out.flatten(-2)  # (..., T, d)
    ### END SOLUTION


def rope_attention(x, params, n_heads, mask=None):
    """Multi-head self-attention with rotary position embeddings.

    As ``multi_head_attention(x, x, params, n_heads, mask)``, except that after
    the split into heads the queries and the keys of every head (not the values)
    are rotated by ``rope`` at positions 0 .. T - 1.

    Args:
        x: (B, T, D).
        params: the attention dict (W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o).
        n_heads: H, which must divide D; d_k = D / H must be even.
        mask: optional bool mask broadcastable to (B, T, T), True = may attend.

    Returns:
        out (B, T, D) and weights (B, H, T, T).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    D = x.shape[-1]
    if n_heads >= 1 and D % n_heads == 0 and (D // n_heads) % 2:
        raise ValueError(f"d_model={D} and n_heads={n_heads} give heads of odd width d_k={D // n_heads}; RoPE "
                         f"rotates pairs of columns, so d_k must be even")
    q = rope(split_heads(x @ params["W_q"].T + params["b_q"], n_heads))  # (B, H, T, d_k), rotated
    k = rope(split_heads(x @ params["W_k"].T + params["b_k"], n_heads))  # (B, H, T, d_k), rotated
    v = split_heads(x @ params["W_v"].T + params["b_v"], n_heads)  # (B, H, T, d_k), not rotated
    if mask is not None:
        while mask.dim() < 3:
            mask = mask[None]
        mask = mask[:, None]  # (B or 1, 1, T, T): the same mask for every head
    out, weights = masked_attention(q, k, v, mask)  # (B, H, T, d_k), (B, H, T, T)
    return merge_heads(out) @ params["W_o"].T + params["b_o"], weights  # (B, T, D)
    ### END SOLUTION


def decoder_block(x, valid, params, n_heads):
    """One post-norm decoder-only block: causal self-attention, then the FFN.

    The encoder block of notebook 06 with one change: query i may attend to key
    j only if j <= i (and key j is real).

    Args:
        x: (B, T, D).
        valid: BoolTensor (B, T), True on real tokens (None: no padding).
        params: {"attn": ..., "ln1": ..., "ffn": ..., "ln2": ...}.
        n_heads: H.

    Returns:
        (B, T, D); row i depends on x[:, :i + 1] only.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    B, T, D = x.shape
    mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T): j <= i
    if valid is not None:
        mask = mask & valid[:, None, :]  # (B, T, T): and key j is real
    a, _ = multi_head_attention(x, x, params["attn"], n_heads, mask)  # (B, T, D)
    x = F.layer_norm(x + a, (D,), params["ln1"]["weight"], params["ln1"]["bias"], 1e-5)  # r'
    f = params["ffn"]
    ff = torch.relu(x @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]  # (B, T, D)
    return F.layer_norm(x + ff, (D,), params["ln2"]["weight"], params["ln2"]["bias"], 1e-5)
    ### END SOLUTION


def lm_log_prob(logits, ids, valid=None):
    """log P(x) of each sequence under a decoder-only language model (the notes' chain rule).

    logits[:, t] is the model's prediction after reading ids[:, :t + 1], i.e. the
    distribution of the *next* token ids[:, t + 1]. So

        log P(x) = sum_{t=1}^{T-1} log softmax(logits[:, t - 1])[ids[:, t]]

    over the real next tokens (valid[:, t] True). The first token is given, not
    predicted.

    Args:
        logits: (B, T, V).
        ids: LongTensor (B, T).
        valid: BoolTensor (B, T), True on real tokens (None: all real).

    Returns:
        (B,) log-probabilities (<= 0); 0 for a sequence with nothing to predict.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if logits.shape[:2] != ids.shape or (valid is not None and valid.shape != ids.shape):
        raise ValueError(f"logits {tuple(logits.shape)}, ids {tuple(ids.shape)}"
                         + ("" if valid is None else f" and valid {tuple(valid.shape)}")
                         + " must agree on (B, T)")
    if valid is None:
        valid = torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V): predictions of tokens 1 .. T-1
    nxt, real = ids[:, 1:], valid[:, 1:]  # (B, T-1)
    picked = logp.gather(-1, torch.where(real, nxt, torch.zeros_like(nxt))[..., None])[..., 0]  # (B, T-1)
    return torch.where(real, picked, torch.zeros_like(picked)).sum(dim=-1)  # (B,)
    ### END SOLUTION


def top_k_filter(logits, k):
    """Keep the k largest logits of each row and set every other one to -inf.

    Ties: a logit equal to the k-th largest is kept as well, so a row may keep more
    than k tokens. (That rule does not depend on how a sort orders equal values.)

    Args:
        logits: (..., V) float.
        k: int >= 1; k >= V keeps every token.

    Returns:
        tensor of logits' shape, dtype and device: the logit where kept, -inf elsewhere.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"top-k keeps k >= 1 tokens, got k={k!r}")
    if k >= logits.shape[-1]:
        return logits.clone()
    kth = logits.topk(k, dim=-1).values[..., -1:]  # (..., 1): the k-th largest logit of each row
    return logits.masked_fill(logits < kth, float("-inf"))
    ### END SOLUTION


def top_p_filter(logits, p):
    """Keep the nucleus of each row: the smallest set of most probable tokens whose probability reaches p.

    Order the tokens by probability softmax(logits) from high to low and keep them in that
    order until the kept mass first reaches p (>= p): the token that crosses p is kept,
    every token after it is set to -inf. So the most probable token is always kept, and
    p = 1 keeps every token. Ties: among equal probabilities the lower token index comes
    first (a stable sort).

    Args:
        logits: (..., V) float.
        p: float, 0 < p <= 1.

    Returns:
        tensor of logits' shape, dtype and device: the logit where kept, -inf elsewhere.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if not 0 < p <= 1:
        raise ValueError(f"top-p keeps a probability mass p with 0 < p <= 1, got p={p!r}")
    if p == 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)  # (..., V)
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)  # (..., V) each
    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs  # (..., V): the mass ranked above each token
    keep_sorted = mass_before < p  # kept until the mass reaches p; the first token always
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)  # back to token order
    return logits.masked_fill(~keep, float("-inf"))
    ### END SOLUTION


def sample_next(logits, seed, temperature=1.0, top_k=None, top_p=None):
    """Draw one next token for each row of logits: temperature, then top-k, then top-p, then one draw.

    1. divide the logits by the temperature (> 0: greedy decoding is the argmax, not a temperature of 0);
    2. apply ``top_k_filter`` when top_k is given, then ``top_p_filter`` when top_p is given;
    3. take the softmax, and draw one token per row with exactly this random call, so that the same seed
       draws the same tokens (the checks check the draws):

           torch.multinomial(probs, 1, generator=torch.Generator(device=logits.device).manual_seed(seed))

    Args:
        logits: (B, V) float, the next-token logits of B texts.
        seed: int, the seed of this draw.
        temperature: float > 0.
        top_k: int >= 1, or None.
        top_p: float in (0, 1], or None.

    Returns:
        LongTensor (B,) of token ids, on logits' device.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if not temperature > 0:
        raise ValueError(f"sampling needs a temperature > 0, got {temperature!r}; the most probable token is "
                         f"greedy decoding (argmax), not a temperature of 0")
    z = logits / temperature  # (B, V)
    if top_k is not None:
        z = top_k_filter(z, top_k)
    if top_p is not None:
        z = top_p_filter(z, top_p)
    probs = torch.softmax(z, dim=-1)  # (B, V)
    g = torch.Generator(device=logits.device).manual_seed(seed)
    return torch.multinomial(probs, 1, generator=g)[:, 0]  # (B,)
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_encoder_to_decoder():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "d"
    ### END SOLUTION


def answer_next_token_targets():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 11
    ### END SOLUTION


def answer_nucleus():
    """Your answer to the question above: a tuple of token ids."""
    ### BEGIN SOLUTION
    return (0, 1, 2)
    ### END SOLUTION
