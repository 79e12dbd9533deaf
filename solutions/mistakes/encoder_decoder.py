"""Known mistakes of notebook 08 (the encoder-decoder): wrong variants of ``solutions/encoder_decoder.py``.

The grader runs them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is built from torch and the private parts
in ``_parts.py`` only, so it can also be compiled as learner code in the tests. Each keeps the signature of the reference it imitates.
"""
from ._parts import _causal, _ffn, _ln, _mha


# --- cross_attention ---------------------------------------------------------
def _src_mask(src_valid):
    return None if src_valid is None else src_valid[:, None, :]


def cross_attention_kv_from_decoder(y, memory, src_valid, params, n_heads):
    """Self-attention on y: keys and values from the decoder instead of the encoder's memory."""
    return _mha(y, y, params, n_heads, _src_mask(src_valid))


def cross_attention_causal(y, memory, src_valid, params, n_heads):
    """A causal (T_y, T_x) mask added to cross-attention."""
    mask = _causal(y.shape[1], memory.shape[1], y.device)
    if src_valid is not None:
        mask = mask & src_valid[:, None, :]
    return _mha(y, memory, params, n_heads, mask)


def cross_attention_padding_ignored(y, memory, src_valid, params, n_heads):
    return _mha(y, memory, params, n_heads, None)


# --- encdec_decoder_block ----------------------------------------------------
def _self_mask(y, tgt_valid, causal=True):
    T = y.shape[1]
    mask = _causal(T, T, y.device) if causal else None
    if tgt_valid is not None:
        mask = tgt_valid[:, None, :] if mask is None else mask & tgt_valid[:, None, :]
    return mask


def _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads, cross_first=False, kv_from_decoder=False,
                  causal_cross=False, causal_self=True, cross_residual=True):
    cross_mask = _src_mask(src_valid)
    if causal_cross:
        c = _causal(y.shape[1], memory.shape[1], y.device)
        cross_mask = c if cross_mask is None else c & cross_mask

    def self_sub(h, ln):
        return _ln(h + _mha(h, h, params["self_attn"], n_heads, _self_mask(h, tgt_valid, causal_self))[0], ln)

    def cross_sub(h, ln):
        source = h if kv_from_decoder else memory
        c, w = _mha(h, source, params["cross_attn"], n_heads, cross_mask)
        return _ln(h + c if cross_residual else c, ln), w

    if cross_first:
        h1, w = cross_sub(y, params["ln1"])
        h2 = self_sub(h1, params["ln2"])
    else:
        h1 = self_sub(y, params["ln1"])
        h2, w = cross_sub(h1, params["ln2"])
    return _ln(h2 + _ffn(h2, params["ffn"]), params["ln3"]), w


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
