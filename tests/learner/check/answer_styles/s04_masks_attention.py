"""Other correct styles of notebook 04 masks and attention: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "bidirectional_mask": [
        ("torch.full", r'''
            def bidirectional_mask(T_q, T_k, device=None):
                if min(T_q, T_k) < 0:
                    raise ValueError("lengths must not be negative")
                return torch.full((T_q, T_k), True, device=device)
        '''),
        ("empty, then fill_", r'''
            def bidirectional_mask(T_q, T_k, device=None):
                if T_q < 0 or T_k < 0:
                    raise ValueError(f"T_q={T_q}, T_k={T_k}")
                mask = torch.empty(T_q, T_k, dtype=torch.bool, device=device)
                mask.fill_(True)
                return mask
        '''),
    ],
    "causal_mask": [
        ("not strictly upper triangular", r'''
            def causal_mask(T, device=None):
                if T < 0:
                    raise ValueError("T must be >= 0")
                return ~torch.ones(T, T, dtype=torch.bool, device=device).triu(diagonal=1)
        '''),
        ("row by row", r'''
            def causal_mask(T, device=None):
                if T < 0:
                    raise ValueError(f"negative length {T}")
                mask = torch.zeros(T, T, dtype=torch.bool, device=device)
                for i in range(T):
                    mask[i, :i + 1] = True
                return mask
        '''),
    ],
    "padding_mask": [
        ("unsqueeze", r'''
            def padding_mask(key_valid):
                if key_valid.dtype is not torch.bool:
                    raise ValueError("key_valid must be a bool tensor")
                if key_valid.ndim != 2:
                    raise ValueError("key_valid must be (B, T_k)")
                return key_valid.unsqueeze(1)
        '''),
        ("reshape", r'''
            def padding_mask(key_valid):
                if key_valid.dim() != 2 or key_valid.dtype != torch.bool:
                    raise ValueError(f"need a (B, T_k) bool mask, got {tuple(key_valid.shape)} {key_valid.dtype}")
                B, T_k = key_valid.shape
                return key_valid.reshape(B, 1, T_k)
        '''),
    ],
    "combine_masks": [
        ("functools.reduce", r'''
            import functools

            def combine_masks(*masks):
                present = [m for m in masks if m is not None]
                if any(m.dtype != torch.bool for m in present):
                    raise ValueError("masks must be bool tensors")
                if not present:
                    return None
                return functools.reduce(torch.logical_and, present)
        '''),
        ("broadcast, stack and all", r'''
            def combine_masks(*masks):
                present = []
                for m in masks:
                    if m is None:
                        continue
                    if not (torch.is_tensor(m) and m.dtype == torch.bool):
                        raise ValueError("every mask must be a bool tensor (True = may attend)")
                    present.append(m)
                if len(present) == 0:
                    return None
                return torch.stack(torch.broadcast_tensors(*present)).all(dim=0)
        '''),
    ],
    "additive_mask": [
        ("torch.where", r'''
            def additive_mask(mask, dtype=torch.float32):
                if mask.dtype != torch.bool:
                    raise ValueError("mask must be bool")
                if not torch.empty((), dtype=dtype).is_floating_point():
                    raise ValueError("dtype must be floating")
                zero = torch.tensor(0.0, dtype=dtype, device=mask.device)
                blocked = torch.tensor(float("-inf"), dtype=dtype, device=mask.device)
                return torch.where(mask, zero, blocked)
        '''),
        # log 1 = 0 and log 0 = -inf
        ("log of the float mask", r'''
            def additive_mask(mask, dtype=torch.float32):
                if mask.dtype is not torch.bool or not dtype.is_floating_point:
                    raise ValueError("a bool mask and a floating dtype are needed")
                return torch.log(mask.to(dtype))
        '''),
    ],
    "masked_attention": [
        # the mask's shape checked axis by axis, added as the notes' M, torch.softmax, NaN rows zeroed
        ("einsum, additive M, torch.softmax", r'''
            def masked_attention(Q, K, V, mask=None):
                if Q.shape[-1] != K.shape[-1]:
                    raise ValueError("Q and K must have the same width")
                if K.shape[-2] != V.shape[-2]:
                    raise ValueError("K and V must have the same length")
                scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
                if mask is not None:
                    if mask.dtype != torch.bool:
                        raise ValueError("mask must be bool")
                    if mask.dim() > scores.dim() or any(
                            m not in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores.shape))):
                        raise ValueError(f"mask {tuple(mask.shape)} does not fit scores {tuple(scores.shape)}")
                    M = torch.zeros(mask.shape, dtype=scores.dtype, device=scores.device)
                    M = M.masked_fill(~mask, float("-inf"))
                    scores = scores + M
                weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)     # no allowed key: 0/0 -> 0
                return torch.einsum("...qk,...kd->...qd", weights, V), weights
        '''),
        # the output from SDPA with the mask converted to an additive float mask, the weights in float64
        ("SDPA output, float64 weights", r'''
            def masked_attention(Q, K, V, mask=None):
                d_k, T_k = Q.size(-1), K.size(-2)
                if K.size(-1) != d_k or V.size(-2) != T_k:
                    raise ValueError("Q, K and V do not fit together")
                scores = (Q.double() @ K.double().transpose(-2, -1)) / math.sqrt(d_k)
                allowed = torch.ones(scores.shape, dtype=torch.bool, device=Q.device)
                if mask is not None:
                    if mask.dtype != torch.bool:
                        raise ValueError("mask must be a bool tensor")
                    try:
                        allowed = torch.broadcast_to(mask, scores.shape)
                    except RuntimeError as exc:
                        raise ValueError(f"mask of shape {tuple(mask.shape)} does not fit the scores") from exc
                weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                weights = torch.where(allowed.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))
                if T_k == 0:
                    out = torch.zeros(*Q.shape[:-1], V.shape[-1], dtype=Q.dtype, device=Q.device)
                else:
                    bias = torch.zeros(allowed.shape, dtype=Q.dtype, device=Q.device)
                    bias = bias.masked_fill(~allowed, float("-inf"))
                    out = F.scaled_dot_product_attention(Q, K, V, attn_mask=bias).nan_to_num(0.0)
                return out, weights.to(Q.dtype)
        '''),
        # HF-style: blocked scores set to the dtype's lowest finite value, rows with no allowed key zeroed
        ("finfo.min fill, dead rows zeroed", r'''
            def masked_attention(Q, K, V, mask=None):
                if Q.shape[-1] != K.shape[-1] or K.shape[-2] != V.shape[-2]:
                    raise ValueError(f"Q {tuple(Q.shape)}, K {tuple(K.shape)} and V {tuple(V.shape)} do not fit")
                scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(Q.shape[-1])
                dead = None
                if mask is not None:
                    if mask.dtype != torch.bool:
                        raise ValueError("mask must be bool")
                    try:
                        fits = tuple(torch.broadcast_shapes(mask.shape, scores.shape)) == tuple(scores.shape)
                    except RuntimeError:
                        fits = False
                    if not fits:
                        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to the scores")
                    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
                    dead = ~mask.any(dim=-1, keepdim=True)
                weights = torch.softmax(scores, dim=-1)
                if dead is not None:
                    weights = weights.masked_fill(dead, 0.0)
                return torch.matmul(weights, V), weights
        '''),
    ],
}
