"""Other correct styles of notebook 07 decoder: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "rope": [
        # x cos + (-x_odd, x_even) sin, with cos and sin repeated for both columns of a pair
        ("rotate-half for adjacent pairs", r'''
            def rope(x, positions=None, base=10000.0):
                *_, T, d = x.shape
                if d % 2 != 0:
                    raise ValueError(f"the width d={d} must be even")
                if positions is None:
                    positions = torch.arange(T, device=x.device)
                if tuple(positions.shape) != (T,):
                    raise ValueError(f"need {T} positions, got shape {tuple(positions.shape)}")
                inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)    # (d/2,)
                angle = torch.outer(positions.to(x.device, torch.float64), inv_freq)                        # (T, d/2)
                cos = angle.cos().repeat_interleave(2, dim=-1).to(x.dtype)                                  # (T, d)
                sin = angle.sin().repeat_interleave(2, dim=-1).to(x.dtype)
                x_rot = torch.stack([-x[..., 1::2], x[..., 0::2]], dim=-1).flatten(-2)
                return x * cos + x_rot * sin
        '''),
        ("2x2 rotation matrices, float64", r'''
            def rope(x, positions=None, base=10000.0):
                T, d = x.shape[-2:]
                if d % 2:
                    raise ValueError("RoPE needs an even width")
                pos = torch.arange(T, device=x.device) if positions is None else positions.to(x.device)
                if pos.dim() != 1 or pos.shape[0] != T:
                    raise ValueError(f"positions must be ({T},)")
                i = torch.arange(d // 2, dtype=torch.float64, device=x.device)
                theta = torch.pow(base, -2.0 * i / d)                                       # (d/2,)
                angle = pos.double()[:, None] * theta                                        # (T, d/2)
                c, s = torch.cos(angle), torch.sin(angle)
                R = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)   # (T, d/2, 2, 2)
                pairs = x.double().unflatten(-1, (d // 2, 2))                                # (..., T, d/2, 2)
                return torch.einsum("tiab,...tib->...tia", R, pairs).flatten(-2).to(x.dtype)
        '''),
        # angles in x's own dtype, the two halves of each pair written into a preallocated output
        ("in x's dtype, preallocated", r'''
            def rope(x, positions=None, base=10000.0):
                T, d = x.shape[-2], x.shape[-1]
                if d % 2:
                    raise ValueError(f"odd width d={d}")
                if positions is None:
                    positions = torch.arange(T, device=x.device)
                if positions.shape != (T,):
                    raise ValueError(f"positions of shape {tuple(positions.shape)} for {T} rows")
                theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype, device=x.device) / d)
                angle = positions.to(device=x.device, dtype=x.dtype)[:, None] * theta
                cos, sin = angle.cos(), angle.sin()
                x0, x1 = x[..., 0::2], x[..., 1::2]
                out = torch.empty_like(x)
                out[..., 0::2] = x0 * cos - x1 * sin
                out[..., 1::2] = x0 * sin + x1 * cos
                return out
        '''),
    ],
    "rope_attention": [
        # the learner's own rope on heads made by reshape/transpose
        ("own rope, reshape heads", r'''
            def rope_attention(x, params, n_heads, mask=None):
                B, T, D = x.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                if d_k % 2:
                    raise ValueError(f"the head width d_k={d_k} is odd; RoPE needs it even")
                p = params

                def heads(t):
                    return t.reshape(B, T, n_heads, d_k).transpose(1, 2)                    # (B, H, T, d_k)

                q = rope(heads(F.linear(x, p["W_q"], p["b_q"])))
                k = rope(heads(F.linear(x, p["W_k"], p["b_k"])))
                v = heads(F.linear(x, p["W_v"], p["b_v"]))
                scores = q @ k.transpose(-1, -2) / math.sqrt(d_k)                           # (B, H, T, T)
                if mask is not None:
                    scores = scores.masked_fill(~torch.broadcast_to(mask, (B, T, T)).unsqueeze(1), float("-inf"))
                w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                out = (w @ v).transpose(1, 2).reshape(B, T, D)
                return F.linear(out, p["W_o"], p["b_o"]), w
        '''),
        # every head in a Python loop, the rotation written with complex numbers (float64 inside)
        ("loop over heads, complex rotation", r'''
            def rope_attention(x, params, n_heads, mask=None):
                B, T, D = x.shape
                if n_heads <= 0 or D % n_heads != 0 or (D // n_heads) % 2 != 0:
                    raise ValueError(f"D={D} and n_heads={n_heads} do not give heads of an even width")
                d_k = D // n_heads
                freq = 10000.0 ** (-torch.arange(0, d_k, 2, dtype=torch.float64, device=x.device) / d_k)
                turn = torch.polar(torch.ones(T, d_k // 2, dtype=torch.float64, device=x.device),
                                   torch.arange(T, dtype=torch.float64, device=x.device)[:, None] * freq)

                def rotate(t):                                                               # (B, T, d_k)
                    z = torch.view_as_complex(t.double().reshape(B, T, d_k // 2, 2).contiguous())
                    return torch.view_as_real(z * turn).reshape(B, T, d_k).to(t.dtype)

                Q = x @ params["W_q"].T + params["b_q"]
                K = x @ params["W_k"].T + params["b_k"]
                V = x @ params["W_v"].T + params["b_v"]
                allowed = torch.ones(B, T, T, dtype=torch.bool, device=x.device)
                if mask is not None:
                    allowed = allowed & mask
                outs, weights = [], []
                for h in range(n_heads):
                    cols = slice(h * d_k, (h + 1) * d_k)
                    s = rotate(Q[..., cols]) @ rotate(K[..., cols]).transpose(1, 2) / math.sqrt(d_k)
                    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
                    w = torch.where(allowed.any(-1, keepdim=True), w, torch.zeros_like(w))
                    outs.append(w @ V[..., cols])
                    weights.append(w)
                return torch.cat(outs, -1) @ params["W_o"].T + params["b_o"], torch.stack(weights, 1)
        '''),
    ],
    "decoder_block": [
        ("all inline, torch.tril and einsum", r'''
            def decoder_block(x, valid, params, n_heads):
                B, T, D = x.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                a = params["attn"]
                allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device)).expand(B, T, T)
                if valid is not None:
                    allowed = allowed & valid[:, None, :]
                q, k, v = (F.linear(x, a[f"W_{n}"], a[f"b_{n}"]).reshape(B, T, n_heads, d_k) for n in "qkv")
                scores = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(d_k)
                scores = scores.masked_fill(~allowed[:, None], float("-inf"))
                w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                att = torch.einsum("bhij,bjhd->bihd", w, v).reshape(B, T, D)
                ln1, ln2, f = params["ln1"], params["ln2"], params["ffn"]
                h = F.layer_norm(x + F.linear(att, a["W_o"], a["b_o"]), (D,), ln1["weight"], ln1["bias"], 1e-5)
                ff = F.linear(F.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return F.layer_norm(h + ff, (D,), ln2["weight"], ln2["bias"], 1e-5)
        '''),
        # PyTorch's SDPA with the bool mask (its polarity is ours: True = may attend), layer norm written out
        ("SDPA with the bool mask, layer norm by hand", r'''
            def decoder_block(x, valid, params, n_heads):
                B, T, D = x.shape
                if n_heads <= 0 or D % n_heads != 0:
                    raise ValueError("n_heads must divide d_model")
                H, d_k = n_heads, D // n_heads
                a, f = params["attn"], params["ffn"]

                def norm(t, ln):
                    mu = t.mean(-1, keepdim=True)
                    var = t.var(-1, unbiased=False, keepdim=True)
                    return (t - mu) * torch.rsqrt(var + 1e-5) * ln["weight"] + ln["bias"]

                j = torch.arange(T, device=x.device)
                allowed = (j[None, :] <= j[:, None]).unsqueeze(0)                         # (1, T, T): j <= i
                if valid is not None:
                    allowed = allowed & valid.unsqueeze(1)                                 # (B, T, T): j real
                q = (x @ a["W_q"].T + a["b_q"]).view(B, T, H, d_k).permute(0, 2, 1, 3)
                k = (x @ a["W_k"].T + a["b_k"]).view(B, T, H, d_k).permute(0, 2, 1, 3)
                v = (x @ a["W_v"].T + a["b_v"]).view(B, T, H, d_k).permute(0, 2, 1, 3)
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed.unsqueeze(1))
                heads = torch.nan_to_num(heads, nan=0.0)                                   # no real key: 0
                att = heads.permute(0, 2, 1, 3).reshape(B, T, D) @ a["W_o"].T + a["b_o"]
                h = norm(x + att, params["ln1"])
                ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
                return norm(h + ff, params["ln2"])
        '''),
    ],
    "lm_log_prob": [
        ("F.nll_loss, shifted log-softmax", r'''
            def lm_log_prob(logits, ids, valid=None):
                if logits.shape[:2] != ids.shape:
                    raise ValueError("logits and ids must agree on (B, T)")
                if valid is not None and valid.shape != ids.shape:
                    raise ValueError("valid must have the shape of ids")
                B, T = ids.shape
                if T < 2:
                    return logits.new_zeros(B)                                  # nothing to predict
                targets = ids[:, 1:]
                if valid is not None:
                    targets = targets.masked_fill(~valid[:, 1:], -100)          # padding: ignored
                log_p = F.log_softmax(logits[:, :-1], dim=-1).transpose(1, 2)   # (B, V, T - 1)
                return -F.nll_loss(log_p, targets, ignore_index=-100, reduction="none").sum(dim=1)
        '''),
        ("loops, logsumexp", r'''
            def lm_log_prob(logits, ids, valid=None):
                B, T = ids.shape
                if tuple(logits.shape[:2]) != (B, T) or (valid is not None and tuple(valid.shape) != (B, T)):
                    raise ValueError("logits, ids and valid must agree on (B, T)")
                total = logits.new_zeros(B)
                for b in range(B):
                    for t in range(1, T):
                        if valid is not None and not valid[b, t]:
                            continue
                        pred = logits[b, t - 1]                                 # the prediction of token t
                        total[b] += pred[ids[b, t]] - torch.logsumexp(pred, dim=0)
                return total
        '''),
    ],
}
