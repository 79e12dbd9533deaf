"""The sample submissions' bugs: one known bug per notebook (``course demo``, the pipeline tests, the samples).

Instructor-only, beside the reference it edits: for each notebook, the exercise, what the bug is, the (old, new)
edit of the reference source, and the graded cells of the exercise the bug fails (the maths, basic and edge, and the
errors cell too when the edit also skips a check of the input). Later notebooks' blocks call earlier exercises, so a
bug in a helper would cost the block's points too: each sample bug sits in an exercise that nothing else in its
notebook calls.
"""
from typing import NamedTuple


class SampleBug(NamedTuple):
    exercise: str
    what: str
    edit: tuple  # (old text, new text) in the reference source of ``exercise``


SAMPLE_BUGS = {
    '01_tokens': SampleBug("pad_batch", "the padding mask is inverted", ("return ids, mask", "return ids, ~mask")),
    '02_dot_products': SampleBug("scaled_scores", "no division by sqrt(d_k)", (" / math.sqrt(d_k)", "")),
    '03_softmax': SampleBug("softmax", "logits multiplied by the temperature",
                   ("z = x / temperature", "z = x * temperature")),
    '04_masks_attention': SampleBug("masked_attention", "no division by sqrt(d_k)", (" / math.sqrt(Q.shape[-1])", "")),
    '05_rnn': SampleBug("rnn_encode", "the context is taken after the padding",
                   ("h = torch.where(real, h_new, h)", "h = h_new")),
    '05b_rnn_attention': SampleBug("attention_decoder_step", "the output layer ignores the context",
                   ("torch.cat([h, context], dim=-1)", "torch.cat([h, torch.zeros_like(context)], dim=-1)")),
    '06_encoder': SampleBug("encoder_block", "the residual around attention is missing",
                   ("F.layer_norm(x + a, ", "F.layer_norm(a, ")),
    '07_decoder': SampleBug("decoder_block", "no causal mask", (".tril()  # (T, T): j <= i", "  # (T, T): j <= i")),
    '08_encoder_decoder': SampleBug("encdec_decoder_block", "no causal mask on the self-attention",
                   (".tril()  # (T_y, T_y)", "  # (T_y, T_y)")),
    '09_kv_cache': SampleBug("decoder_block_step", "the cache is not passed to the attention",
                   ("cached_attention(q, k, v, cache)", "cached_attention(q, k, v, None)")),
    '10_capstone': SampleBug("prefix_lm_mask", "the prefix opens the queries instead of the keys",
                   ("in_prefix[:, None, :]", "in_prefix[:, :, None]")),
}

# the graded cells of its exercise each sample bug fails: the maths (basic, edge), and the errors cell too where the
# edit also skips a check of the input (the cache 09's bug drops is also the one whose batch size cached_attention
# would have refused)
COSTS = {**{folder: ("basic", "edge") for folder in SAMPLE_BUGS}, "09_kv_cache": ("basic", "edge", "errors")}
