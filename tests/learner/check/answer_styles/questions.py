"""Other correct styles of the self-check questions (a literal, in any form): exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
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
}
