"""Other correct styles of notebook 02 dot products: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "pairwise_scores": [
        ("einsum", r'''
            def pairwise_scores(Q, K):
                if Q.size(-1) != K.size(-1):
                    raise ValueError("Q and K need the same width d_k")
                return torch.einsum("...id,...jd->...ij", Q, K)
        '''),
        ("broadcast multiply and sum", r'''
            def pairwise_scores(Q, K):
                d_q, d_k = Q.shape[-1], K.shape[-1]
                if d_q != d_k:
                    raise ValueError(f"widths {d_q} and {d_k} differ")
                return (Q.unsqueeze(-2) * K.unsqueeze(-3)).sum(dim=-1)     # (..., T_q, 1, d) * (..., 1, T_k, d)
        '''),
    ],
    "project_qkv": [
        ("F.linear", r'''
            def project_qkv(X, W_Q, W_K, W_V):
                D = X.shape[-1]
                if any(W.dim() != 2 or W.shape[1] != D for W in (W_Q, W_K, W_V)) or W_Q.shape[0] != W_K.shape[0]:
                    raise ValueError("W_Q, W_K must be (d_k, D) and W_V (d_v, D)")
                return F.linear(X, W_Q), F.linear(X, W_K), F.linear(X, W_V)
        '''),
        # one fused (2 d_k + d_v, D) projection, then split
        ("fused projection, then split", r'''
            def project_qkv(X, W_Q, W_K, W_V):
                D = X.shape[-1]
                for W in (W_Q, W_K, W_V):
                    if W.ndim != 2 or W.shape[-1] != D:
                        raise ValueError(f"a weight of shape {tuple(W.shape)} does not take inputs of width {D}")
                d_k, d_v = W_Q.shape[0], W_V.shape[0]
                if W_K.shape[0] != d_k:
                    raise ValueError("W_Q and W_K must give the same width")
                W = torch.cat([W_Q, W_K, W_V], dim=0)                      # (2 d_k + d_v, D)
                Q, K, V = torch.split(X @ W.T, [d_k, d_k, d_v], dim=-1)
                return Q, K, V
        '''),
    ],
    "scaled_scores": [
        ("einsum times d_k ** -0.5", r'''
            def scaled_scores(Q, K):
                if Q.shape[-1] != K.shape[-1]:
                    raise ValueError("Q and K must have the same width")
                return torch.einsum("...qd,...kd->...qk", Q, K) * Q.shape[-1] ** -0.5
        '''),
        ("queries scaled first", r'''
            def scaled_scores(Q, K):
                d_k = K.size(-1)
                if Q.size(-1) != d_k:
                    raise ValueError(f"Q has width {Q.size(-1)}, K has width {d_k}")
                return torch.matmul(Q / math.sqrt(d_k), K.mT)
        '''),
    ],
    "score_variance": [
        # q and k drawn in one call, dot products by einsum
        ("one draw, einsum", r'''
            def score_variance(d_k, n_pairs=20000, seed=0):
                if d_k < 1:
                    raise ValueError("d_k must be at least 1")
                g = torch.Generator().manual_seed(seed)
                q, k = torch.randn(2, n_pairs, d_k, generator=g, dtype=torch.float64)
                raw = torch.einsum("nd,nd->n", q, k)
                return float(raw.var()), float((raw / d_k ** 0.5).var())
        '''),
        # batched matmul of (1, d) by (d, 1), the variances by the statistics module
        ("bmm and statistics.variance", r'''
            import statistics

            def score_variance(d_k, n_pairs=20000, seed=0):
                if not int(d_k) >= 1:
                    raise ValueError(f"d_k={d_k}")
                gen = torch.Generator()
                gen.manual_seed(seed)
                q = torch.randn(n_pairs, d_k, generator=gen, dtype=torch.float64)
                k = torch.randn(n_pairs, d_k, generator=gen, dtype=torch.float64)
                raw = (q.unsqueeze(1) @ k.unsqueeze(2)).flatten().tolist()
                return statistics.variance(raw), statistics.variance([s / math.sqrt(d_k) for s in raw])
        '''),
    ],
}
