"""Notebook 08: the encoder-decoder (T5-style): cross-attention and the three-sub-layer decoder block.

Step 7 of the visual walkthrough. The encoder (notebook 06) reads the source
bidirectionally into a memory, one vector per source token. Each decoder block
then has three sub-layers, in this order:

1. causal self-attention over the target written so far (notebook 07);
2. cross-attention: queries from the decoder, keys and values from the encoder
   output; no causal mask (the whole source is known), only source padding
   blocked;
3. the position-wise feed-forward network;

each wrapped as LayerNorm(r + sublayer(r)) (post-norm, as in ``nn.TransformerDecoderLayer``).
With an empty source (T_x = 0) cross-attention has nothing to read and the
model is a decoder-only language model.

Shape letters: B batch, T_x source length, T_y target length, D model width,
H heads. Weight dicts as in ``solutions/encoder.py``; a decoder block's dict is
{"self_attn", "ln1", "cross_attn", "ln2", "ffn", "ln3"}.
"""
import torch
import torch.nn.functional as F

from .encoder import multi_head_attention


def cross_attention(y, memory, src_valid, params, n_heads):
    """Cross-attention: each target position queries the encoder's output.

    Q comes from ``y`` (the decoder), K and V from ``memory`` (the encoder). Every
    query may attend to every real source token; source padding is blocked; no
    causal mask.

    Args:
        y: (B, T_y, D) the decoder's states.
        memory: (B, T_x, D) the encoder's output.
        src_valid: BoolTensor (B, T_x), True on real source tokens (None: all real).
        params: attention dict (W_q, b_q, W_k, b_k, W_v, b_v, W_o, b_o).
        n_heads: H.

    Returns:
        out: (B, T_y, D).
        weights: (B, H, T_y, T_x); every row sums to 1 over the real source
            tokens and is 0 on source padding (all 0 for an empty source).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if memory.shape[0] != y.shape[0] or (src_valid is not None and src_valid.shape != memory.shape[:2]):
        raise ValueError(f"memory {tuple(memory.shape)} must be (B, T_x, D) for B={y.shape[0]}, and src_valid "
                         f"(B, T_x), got {None if src_valid is None else tuple(src_valid.shape)}")
    mask = None if src_valid is None else src_valid[:, None, :]  # (B, 1, T_x): real source keys only
    return multi_head_attention(y, memory, params, n_heads, mask)
    ### END SOLUTION


def encdec_decoder_block(y, memory, tgt_valid, src_valid, params, n_heads):
    """One post-norm decoder block of an encoder-decoder, with its three sub-layers.

    r'  = LayerNorm(y  + SelfAttention(y, causal and target padding mask))   ("self_attn", "ln1")
    r'' = LayerNorm(r' + CrossAttention(r', memory, source padding mask))    ("cross_attn", "ln2")
    out = LayerNorm(r'' + FFN(r''))                                          ("ffn", "ln3")

    Args:
        y: (B, T_y, D) the target-side input.
        memory: (B, T_x, D) the encoder's output.
        tgt_valid: BoolTensor (B, T_y) or None; src_valid: BoolTensor (B, T_x) or None.
        params: {"self_attn", "ln1", "cross_attn", "ln2", "ffn", "ln3"}.
        n_heads: H.

    Returns:
        out: (B, T_y, D).
        cross_weights: (B, H, T_y, T_x), the cross-attention weights.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    B, T, D = y.shape
    causal = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()  # (T_y, T_y)
    self_mask = causal if tgt_valid is None else causal & tgt_valid[:, None, :]  # (B, T_y, T_y)
    a, _ = multi_head_attention(y, y, params["self_attn"], n_heads, self_mask)  # (B, T_y, D)
    y = F.layer_norm(y + a, (D,), params["ln1"]["weight"], params["ln1"]["bias"], 1e-5)  # r'
    c, cross_weights = cross_attention(y, memory, src_valid, params["cross_attn"], n_heads)  # (B, T_y, D)
    y = F.layer_norm(y + c, (D,), params["ln2"]["weight"], params["ln2"]["bias"], 1e-5)  # r''
    f = params["ffn"]
    ff = torch.relu(y @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]  # (B, T_y, D)
    return F.layer_norm(y + ff, (D,), params["ln3"]["weight"], params["ln3"]["bias"], 1e-5), cross_weights
    ### END SOLUTION


# ---------------------------------------------------------------- the whole model: forward, loss, greedy decoding
# A model is given as three functions (the notebook passes the trained transformer's
# ``model.encode``, ``model.cross_kv`` and ``model.run_decoder_kv``):
#   encode(src, src_valid)                 -> memory (B, T_x, D), the encoder's output;
#   cross_kv(memory)                       -> kv, the keys and values every decoder layer's cross-attention
#                                             reads (opaque: pass it on as it came);
#   run_decoder(tgt_in, kv, src_valid, tgt_valid) -> logits (B, T_y, V); row t predicts the token after tgt_in[:, t].


def encdec_forward(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
    """The encoder-decoder's forward pass: the encoder once, then the decoder with cross-attention.

    Args:
        encode, cross_kv, run_decoder: the model, as above.
        src: (B, T_x) LongTensor of source ids; src_valid: (B, T_x) bool, True on real source tokens.
        tgt_in: (B, T_y) LongTensor, what the decoder reads (<bos> y_1 ... y_{T_y - 1});
        tgt_valid: (B, T_y) bool, True on real target tokens.

    Returns:
        logits (B, T_y, V): every target position at once, from one call of each function. The decoder reads
        the true previous tokens (teacher forcing), and the causal mask lets it score them all in that one call.
    """
    ### BEGIN SOLUTION
    memory = encode(src, src_valid)  # (B, T_x, D): the source, read once
    kv = cross_kv(memory)  # the keys and values cross-attention reads
    return run_decoder(tgt_in, kv, src_valid, tgt_valid)  # (B, T_y, V)
    ### END SOLUTION


def translation_loss(encode, cross_kv, run_decoder, batch):
    """The teacher-forced loss of a batch: the mean cross-entropy over the real target tokens.

    Args:
        encode, cross_kv, run_decoder: the model, as above.
        batch: a dict from ``data.make_batch``: "src", "src_mask" (B, T_x); "tgt_in" (B, T_y), <bos> y_1 ... y_n,
            what the decoder reads; "tgt_out" (B, T_y), y_1 ... y_n <eos>, what it must predict (the same row
            shifted by one); "tgt_mask" (B, T_y), True on the real tokens of both.

    Returns:
        A scalar tensor (differentiable): the cross-entropy of each real target token, averaged over all the
        real target tokens of the batch (padding adds nothing and does not count).
    """
    ### BEGIN SOLUTION
    logits = encdec_forward(encode, cross_kv, run_decoder, batch["src"], batch["src_mask"], batch["tgt_in"],
                            batch["tgt_mask"])  # (B, T_y, V)
    log_probs = torch.log_softmax(logits, dim=-1)
    picked = log_probs.gather(-1, batch["tgt_out"][..., None])[..., 0]  # (B, T_y): log P(the right next token)
    real = batch["tgt_mask"]
    return -(picked * real).sum() / real.sum()
    ### END SOLUTION


def greedy_translate(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    """Greedy translation of a batch, the encoder and cross-attention's keys and values computed once.

    The decoder starts from <bos> and appends the argmax of its last row, step
    after step; ``run_decoder`` reads the whole target so far at each step (this
    notebook keeps no self-attention cache: notebook 09 does), but the source
    side, ``encode`` and ``cross_kv``, depends on the source alone: one call each.

    Args:
        encode, cross_kv, run_decoder: the model, as above. Call run_decoder(tokens so far, kv, src_valid, None):
            the target written so far has no padding, so its tgt_valid is None; it returns the logits alone.
        src: (B, T_x) LongTensor; src_valid: (B, T_x) bool or None.
        bos_id, eos_id: the start and end tokens.
        max_len: the most tokens to write, >= 0.

    Returns:
        (B, L) LongTensor of the tokens written after <bos>, L <= max_len: a row's <eos> is
        written, and after it 0 (padding); the loop stops as soon as every row has written
        <eos> (L < max_len then), else after max_len tokens.

    Raises:
        ValueError for max_len < 0 and for ``src`` that is not (B, T_x).
    """
    ### BEGIN SOLUTION
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    if src.dim() != 2:
        raise ValueError(f"src must be (B, T_x), got shape {tuple(src.shape)}")
    kv = cross_kv(encode(src, src_valid))  # once per source
    B = src.shape[0]
    out = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1): <bos>
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        logits = run_decoder(out, kv, src_valid, None)  # (B, t, V)
        nxt = logits[:, -1].argmax(dim=-1).masked_fill(done, 0)  # (B,): 0 after a row's <eos>
        out = torch.cat([out, nxt[:, None]], dim=1)
        done = done | (nxt == eos_id)
        if bool(done.all()):
            break
    return out[:, 1:]  # without <bos>
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_cross_attention_sources():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "a"
    ### END SOLUTION


def answer_cross_weights_shape():
    """Your answer to the question above: a tuple of ints."""
    ### BEGIN SOLUTION
    return (2, 4, 5, 7)
    ### END SOLUTION


def answer_empty_source():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "c"
    ### END SOLUTION
