"""Known mistakes of notebook 08 (the encoder-decoder): wrong variants of ``solutions/encoder_decoder.py``.

The checks run them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is built from torch and the private parts
in ``_parts.py`` only, so it can also be compiled as learner code in the tests. Each keeps the signature of the reference it imitates.
"""
import torch

from ._parts import causal_mask, feed_forward, layer_norm, mha


# --- cross_attention ---------------------------------------------------------
def _src_mask(src_valid):
    return None if src_valid is None else src_valid[:, None, :]


def cross_attention_kv_from_decoder(y, memory, src_valid, params, n_heads):
    """Self-attention on y: keys and values from the decoder instead of the encoder's memory."""
    return mha(y, y, params, n_heads, _src_mask(src_valid))


def cross_attention_causal(y, memory, src_valid, params, n_heads):
    """A causal (T_y, T_x) mask added to cross-attention."""
    mask = causal_mask(y.shape[1], memory.shape[1], y.device)
    if src_valid is not None:
        mask = mask & src_valid[:, None, :]
    return mha(y, memory, params, n_heads, mask)


def cross_attention_mask_reversed(y, memory, src_valid, params, n_heads):
    """nn.MultiheadAttention's polarity: ~src_valid, so only the source padding may be read."""
    return mha(y, memory, params, n_heads, None if src_valid is None else ~src_valid[:, None, :])


def cross_attention_mask_without_query_axis(y, memory, src_valid, params, n_heads):
    """src_valid (B, T_x) passed as the mask: its batch axis lines up with the queries (the ready-made
    multi_head_attention broadcasts it against (B, T_y, T_x) first, and raises there when B is not 1 or T_y)."""
    if src_valid is None:
        return mha(y, memory, params, n_heads, None)
    mask = torch.ones(y.shape[0], y.shape[1], memory.shape[1], dtype=torch.bool, device=y.device) & src_valid
    return mha(y, memory, params, n_heads, mask)


def cross_attention_padding_ignored(y, memory, src_valid, params, n_heads):
    return mha(y, memory, params, n_heads, None)


# --- encdec_decoder_block ----------------------------------------------------
def _self_mask(y, tgt_valid, causal=True):
    T = y.shape[1]
    mask = causal_mask(T, T, y.device) if causal else None
    if causal == "reversed":  # ~tril, triu(1): True on the blocked pairs
        mask = ~mask
    elif causal == "strict":  # tril(-1): the diagonal blocked too
        mask = torch.ones(T, T, dtype=torch.bool, device=y.device).tril(-1)
    if tgt_valid is not None:
        mask = tgt_valid[:, None, :] if mask is None else mask & tgt_valid[:, None, :]
    return mask


def _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_first=False, kv_from_decoder=False,
                  causal_cross=False, causal_self=True, cross_residual=True, cross_reads_y=False,
                  tgt_padding=True, src_padding=True, cross_residual_from_y=False):
    cross_mask = _src_mask(src_valid) if src_padding else None
    if causal_cross:
        c = causal_mask(y.shape[1], memory.shape[1], y.device)
        cross_mask = c if cross_mask is None else c & cross_mask

    def self_sub(h, ln):
        self_mask = _self_mask(h, tgt_valid if tgt_padding else None, causal_self)
        return layer_norm(h + mha(h, h, params["self_attn"], n_heads, self_mask)[0], ln)

    def cross_sub(h, ln):
        source = h if kv_from_decoder else memory
        c, w = mha(y if cross_reads_y else h, source, params["cross_attn"], n_heads, cross_mask)
        return layer_norm((y if cross_residual_from_y else h) + c if cross_residual else c, ln), w

    if cross_first:
        h1, w = cross_sub(y, params["ln1"])
        h2 = self_sub(h1, params["ln2"])
    else:
        h1 = self_sub(y, params["ln1"])
        h2, w = cross_sub(h1, params["ln2"])
    return layer_norm(h2 + feed_forward(h2, params["ffn"]), params["ln3"]), w


def encdec_cross_before_self(y, memory, tgt_valid, src_valid, params, n_heads):
    """Cross-attention first (with ln1), then self-attention (with ln2), then the FFN."""
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_first=True)


def encdec_kv_from_decoder(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, kv_from_decoder=True)


def encdec_causal_cross(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, causal_cross=True)


def encdec_no_causal_self(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, causal_self=False)


def encdec_no_cross_residual(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_residual=False)


def encdec_cross_reads_y(y, memory, tgt_valid, src_valid, params, n_heads):
    """cross_attention(y, ...) instead of cross_attention(h1, ...): the queries skip self-attention's output."""
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_reads_y=True)


def encdec_causal_reversed(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, causal_self="reversed")


def encdec_causal_strict(y, memory, tgt_valid, src_valid, params, n_heads):
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, causal_self="strict")


def encdec_no_src_mask(y, memory, tgt_valid, src_valid, params, n_heads):
    """cross_attention(h1, memory, None, ...): the source padding is read."""
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, src_padding=False)


def encdec_cross_residual_from_y(y, memory, tgt_valid, src_valid, params, n_heads):
    """LayerNorm(y + CrossAttention(h1, memory)): the second residual adds the block's input, not h1."""
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_residual_from_y=True)


def encdec_no_target_padding(y, memory, tgt_valid, src_valid, params, n_heads):
    """Self-attention with the causal mask alone: the target padding is not blocked."""
    return _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, tgt_padding=False)


# --- encdec_forward ----------------------------------------------------------
def encdec_forward_no_src_mask(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
    """The decoder is not told which source tokens are padding."""
    return run_decoder(tgt_in, cross_kv(encode(src, src_valid)), None, tgt_valid)


def encdec_forward_no_tgt_mask(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
    """The decoder is not told which target tokens are padding."""
    return run_decoder(tgt_in, cross_kv(encode(src, src_valid)), src_valid, None)


def encdec_forward_encoder_unmasked(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
    """The encoder reads the source padding as if it were text."""
    return run_decoder(tgt_in, cross_kv(encode(src, None)), src_valid, tgt_valid)


# --- translation_loss --------------------------------------------------------
def _forward(encode, cross_kv, run_decoder, batch):
    return run_decoder(batch["tgt_in"], cross_kv(encode(batch["src"], batch["src_mask"])), batch["src_mask"],
                  batch["tgt_mask"])


def _token_losses(logits, targets):
    return -torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]  # (B, T_y)


def translation_loss_padding_counted(encode, cross_kv, run_decoder, batch):
    """The mean over every position, padding included."""
    return _token_losses(_forward(encode, cross_kv, run_decoder, batch), batch["tgt_out"]).mean()


def translation_loss_targets_not_shifted(encode, cross_kv, run_decoder, batch):
    """Scored against tgt_in, the tokens the decoder reads, instead of tgt_out."""
    real = batch["tgt_mask"]
    losses = _token_losses(_forward(encode, cross_kv, run_decoder, batch), batch["tgt_in"])
    return (losses * real).sum() / real.sum()


def translation_loss_decoder_reads_tgt_out(encode, cross_kv, run_decoder, batch):
    """The decoder fed tgt_out, the tokens it must predict, instead of tgt_in."""
    memory = cross_kv(encode(batch["src"], batch["src_mask"]))
    logits = run_decoder(batch["tgt_out"], memory, batch["src_mask"], batch["tgt_mask"])
    real = batch["tgt_mask"]
    return (_token_losses(logits, batch["tgt_out"]) * real).sum() / real.sum()


def translation_loss_mean_of_sentences(encode, cross_kv, run_decoder, batch):
    """Each sentence's mean, then the mean of the sentences: a short sentence's tokens weigh more."""
    real = batch["tgt_mask"]
    losses = _token_losses(_forward(encode, cross_kv, run_decoder, batch), batch["tgt_out"])
    return ((losses * real).sum(dim=1) / real.sum(dim=1)).mean()


def translation_loss_summed(encode, cross_kv, run_decoder, batch):
    """The sum over the real tokens, not their mean."""
    real = batch["tgt_mask"]
    return (_token_losses(_forward(encode, cross_kv, run_decoder, batch), batch["tgt_out"]) * real).sum()


# --- greedy_translate --------------------------------------------------------
def _greedy(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len, row=-1, pad_after_eos=True,
            stop="all", keep_bos=False):
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    if src.dim() != 2:
        raise ValueError(f"src must be (B, T_x), got shape {tuple(src.shape)}")
    kv = cross_kv(encode(src, src_valid))
    B = src.shape[0]
    out = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(B, dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        nxt = run_decoder(out, kv, src_valid, None)[:, row].argmax(dim=-1)
        if pad_after_eos:
            nxt = nxt.masked_fill(done, 0)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done = done | (nxt == eos_id)
        if (stop == "all" and bool(done.all())) or (stop == "any" and bool(done.any())):
            break
    return out if keep_bos else out[:, 1:]


def greedy_translate_first_row(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    """The next token read from the first row of the logits (the prediction after <bos>)."""
    return _greedy(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len, row=0)


def greedy_translate_no_pad_after_eos(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    """A row that has written <eos> goes on writing tokens."""
    return _greedy(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len, pad_after_eos=False)


def greedy_translate_to_max_len(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    """Always max_len tokens: the loop does not stop when every row has ended."""
    return _greedy(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len, stop="never")


def greedy_translate_stops_at_first_eos(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    """Stops when the first row ends, cutting off the rows still writing."""
    return _greedy(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len, stop="any")


def greedy_translate_with_bos(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
    """Returns <bos> too."""
    return _greedy(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len, keep_bos=True)


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_cross_attention_sources_all_decoder():
    return "b"


def answer_cross_attention_sources_swapped():
    return "c"


def answer_cross_attention_sources_all_encoder():
    return "d"


def answer_cross_weights_shape_transposed():
    return (2, 4, 7, 5)


def answer_cross_weights_shape_self():
    return (2, 4, 5, 5)


def answer_cross_weights_shape_no_heads():
    return (2, 5, 7)


def answer_empty_source_error():
    return "a"


def answer_empty_source_encoder():
    return "b"


def answer_empty_source_uniform():
    return "d"


def answer_cross_weights_shape_encoder_self():
    return (2, 4, 7, 7)


def answer_cross_weights_shape_heads_after_tokens():
    return (2, 5, 4, 7)
