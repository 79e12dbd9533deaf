"""Notebook 08: the encoder-decoder (T5-style): cross-attention and the three-sub-layer decoder block.

Step 7 of the visual walkthrough. The encoder (notebook 06) reads the source
bidirectionally into a memory, one vector per source token. Each decoder block
then has three sub-layers, in this order:

1. causal self-attention over the target written so far (notebook 07);
2. cross-attention: queries from the decoder, keys and values from the encoder
   output; no causal mask (the whole source is known), only source padding
   blocked;
3. the position-wise feed-forward network;

each wrapped as LayerNorm(h + sublayer(h)) (post-norm, as in ``nn.TransformerDecoderLayer``).
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
    the grader also runs this function on tensors of another device.
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

    h1  = LayerNorm(y  + SelfAttention(y, causal and target padding mask))   ("self_attn", "ln1")
    h2  = LayerNorm(h1 + CrossAttention(h1, memory, source padding mask))    ("cross_attn", "ln2")
    out = LayerNorm(h2 + FFN(h2))                                            ("ffn", "ln3")

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
    the grader also runs this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    B, T, D = y.shape
    causal = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()  # (T_y, T_y)
    self_mask = causal if tgt_valid is None else causal & tgt_valid[:, None, :]  # (B, T_y, T_y)
    a, _ = multi_head_attention(y, y, params["self_attn"], n_heads, self_mask)  # (B, T_y, D)
    h1 = F.layer_norm(y + a, (D,), params["ln1"]["weight"], params["ln1"]["bias"], 1e-5)
    c, cross_weights = cross_attention(h1, memory, src_valid, params["cross_attn"], n_heads)  # (B, T_y, D)
    h2 = F.layer_norm(h1 + c, (D,), params["ln2"]["weight"], params["ln2"]["bias"], 1e-5)
    f = params["ffn"]
    ff = torch.relu(h2 @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]  # (B, T_y, D)
    return F.layer_norm(h2 + ff, (D,), params["ln3"]["weight"], params["ln3"]["bias"], 1e-5), cross_weights
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
