"""Reference implementation of every exercise in the course.

Each public function here is, character for character, the solution cell of a
source notebook (``python -m coursekit sync`` writes it there and a test fails
on drift). The region between ``### BEGIN SOLUTION`` and ``### END SOLUTION``
is what nbgrader replaces by a stub in the students' release.

Shape letters used in docstrings: B batch, T / T_q / T_k sequence lengths,
D model width, d_k query/key width, d_v value width, V vocabulary size.

Masks follow one convention everywhere: a boolean tensor where ``True`` means
"may attend" (the convention of ``torch.nn.functional.scaled_dot_product_attention``).
"""
from . import decoder, dot_products, encoder, encoder_decoder, kv_cache, masks_attention, rnn, softmax, tokens

__all__ = ["tokens", "dot_products", "softmax", "masks_attention", "rnn", "encoder", "decoder", "encoder_decoder", "kv_cache"]
