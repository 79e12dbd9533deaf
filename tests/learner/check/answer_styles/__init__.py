"""Other correct answers than the reference, by notebook (one module each), for test_other_styles.py."""
from . import s01_tokens, s02_dot_products, s03_softmax, s04_masks_attention, s05_rnn, s06_encoder, s07_decoder, s08_encoder_decoder, s09_kv_cache, s05b_rnn_attention, questions, s10_capstone

STYLES = {name: styles for module in (s01_tokens, s02_dot_products, s03_softmax, s04_masks_attention, s05_rnn, s06_encoder, s07_decoder, s08_encoder_decoder, s09_kv_cache, s05b_rnn_attention, questions, s10_capstone) for name, styles in module.STYLES.items()}
