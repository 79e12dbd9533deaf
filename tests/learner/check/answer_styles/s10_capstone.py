"""Other correct styles of notebook 10 capstone: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "prefix_lm_mask": [
        ("a loop over the rows", r'''
            def prefix_lm_mask(prefix_lengths, T):
                if T < 0:
                    raise ValueError("T < 0")
                rows = []
                for p in prefix_lengths.tolist():
                    if not 0 <= p <= T:
                        raise ValueError(f"prefix length {p} outside 0..{T}")
                    m = torch.ones(T, T, dtype=torch.bool, device=prefix_lengths.device).tril()
                    m[:, :p] = True
                    rows.append(m)
                if not rows:
                    return torch.zeros(0, T, T, dtype=torch.bool, device=prefix_lengths.device)
                return torch.stack(rows)
        '''),
        ("torch.where on broadcast indices", r'''
            def prefix_lm_mask(prefix_lengths, T):
                if T < 0 or bool((prefix_lengths < 0).any()) or bool((prefix_lengths > T).any()):
                    raise ValueError("prefix lengths must lie in 0..T")
                i = torch.arange(T, device=prefix_lengths.device).view(1, T, 1)
                j = torch.arange(T, device=prefix_lengths.device).view(1, 1, T)
                p = prefix_lengths.view(-1, 1, 1)
                return torch.where(j < p, torch.ones_like(j < p), j <= i)
        '''),
    ],
    "answer_prefix_reads_later_source": [
        ("a capital letter", """
            def answer_prefix_reads_later_source():
                return "B"
        """),
        ("the letter in parentheses", """
            def answer_prefix_reads_later_source():
                return "(b)"
        """),
    ],
    "answer_pairs_the_prefix_adds": [
        ("a float", """
            def answer_pairs_the_prefix_adds():
                return 10.0
        """),
        ("worked out", """
            def answer_pairs_the_prefix_adds():
                return 5 * 4 // 2
        """),
    ],
}
