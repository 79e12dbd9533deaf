"""Other correct styles of notebook 08 encoder-decoder: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "top_k_filter": [
        ("sort, then the k-th value as a threshold", r'''
            def top_k_filter(logits, k):
                if type(k) is not int or k < 1:
                    raise ValueError(f"k must be a whole number >= 1, got {k}")
                if k >= logits.shape[-1]:
                    return logits.clone()
                threshold = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
                return torch.where(logits >= threshold, logits, torch.full_like(logits, float("-inf")))
        '''),
        ("kthvalue of the negated logits", r'''
            def top_k_filter(logits, k):
                if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
                    raise ValueError("top-k needs an int k >= 1")
                V = logits.shape[-1]
                kth = -(-logits).kthvalue(min(k, V), dim=-1, keepdim=True).values  # the k-th largest
                out = logits.clone()
                out[logits < kth] = float("-inf")
                return out
        '''),
    ],
    "top_p_filter": [
        ("a loop over rows in plain Python", r'''
            def top_p_filter(logits, p):
                if not (0 < p <= 1):
                    raise ValueError(f"p must be in (0, 1], got {p}")
                if p == 1:
                    return logits.clone()
                probs = torch.softmax(logits, dim=-1)
                keep = torch.zeros(logits.shape, dtype=torch.bool, device=logits.device)
                flat_probs, flat_keep = probs.reshape(-1, probs.shape[-1]), keep.view(-1, keep.shape[-1])
                for r in range(flat_probs.shape[0]):
                    row = flat_probs[r].tolist()
                    mass = 0.0
                    for j in sorted(range(len(row)), key=lambda j: (-row[j], j)):  # high to low, ties by index
                        if mass >= p:
                            break
                        flat_keep[r, j] = True
                        mass += row[j]
                return logits.masked_fill(~keep, float("-inf"))
        '''),
        ("shifted cumulative sum, then gather back", r'''
            def top_p_filter(logits, p):
                if p <= 0 or p > 1:
                    raise ValueError("p out of range")
                if p == 1:
                    return logits.clone()
                sorted_p, order = torch.softmax(logits, -1).sort(dim=-1, descending=True, stable=True)
                cum = sorted_p.cumsum(-1)
                before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], dim=-1)
                keep_sorted = before < p
                rank = order.argsort(dim=-1)                       # where each token sits in the sorted order
                keep = keep_sorted.gather(-1, rank)
                return torch.where(keep, logits, torch.tensor(float("-inf"), dtype=logits.dtype,
                                                              device=logits.device))
        '''),
    ],
    "sample_next": [
        ("filters written inline", r'''
            def sample_next(logits, seed, temperature=1.0, top_k=None, top_p=None):
                if temperature <= 0:
                    raise ValueError("temperature must be > 0 (use the argmax for greedy decoding)")
                z = logits / temperature
                if top_k is not None:
                    if type(top_k) is not int or top_k < 1:
                        raise ValueError("top_k must be >= 1")
                    if top_k < z.shape[-1]:
                        z = z.masked_fill(z < z.topk(top_k, dim=-1).values[..., -1:], float("-inf"))
                if top_p is not None:
                    if not 0 < top_p <= 1:
                        raise ValueError("top_p must be in (0, 1]")
                    if top_p < 1:
                        sp, order = torch.softmax(z, -1).sort(dim=-1, descending=True, stable=True)
                        drop_sorted = sp.cumsum(-1) - sp >= top_p
                        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
                        z = z.masked_fill(drop, float("-inf"))
                g = torch.Generator(device=logits.device)
                g.manual_seed(seed)
                return torch.multinomial(F.softmax(z, dim=-1), num_samples=1, generator=g).squeeze(-1)
        '''),
        ("the filters, then softmax and multinomial in steps", r'''
            def sample_next(logits, seed, temperature=1.0, top_k=None, top_p=None):
                if not temperature > 0:
                    raise ValueError(f"bad temperature {temperature}")
                z = logits / temperature
                z = z if top_k is None else top_k_filter(z, top_k)
                z = z if top_p is None else top_p_filter(z, top_p)
                probs = torch.exp(z - z.max(dim=-1, keepdim=True).values)
                probs = probs / probs.sum(dim=-1, keepdim=True)
                g = torch.Generator(device=logits.device).manual_seed(int(seed))
                drawn = torch.multinomial(probs, 1, generator=g)
                return drawn.view(-1)
        '''),
    ],
    "cross_attention": [
        ("all inline, einsum over heads", r'''
            def cross_attention(y, memory, src_valid, params, n_heads):
                B, T_y, D = y.shape
                if memory.shape[0] != B:
                    raise ValueError("memory and y must have the same batch size")
                T_x = memory.shape[1]
                if src_valid is not None and tuple(src_valid.shape) != (B, T_x):
                    raise ValueError("src_valid must be (B, T_x)")
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                p = params
                q = F.linear(y, p["W_q"], p["b_q"]).reshape(B, T_y, n_heads, d_k)
                k = F.linear(memory, p["W_k"], p["b_k"]).reshape(B, T_x, n_heads, d_k)
                v = F.linear(memory, p["W_v"], p["b_v"]).reshape(B, T_x, n_heads, d_k)
                scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d_k)
                if src_valid is not None:
                    scores = scores.masked_fill(~src_valid[:, None, None, :], float("-inf"))
                w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                out = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, T_y, D)
                return F.linear(out, p["W_o"], p["b_o"]), w
        '''),
        ("loop over heads, additive mask, float64", r'''
            def cross_attention(y, memory, src_valid, params, n_heads):
                if memory.dim() != 3 or memory.size(0) != y.size(0):
                    raise ValueError(f"memory {tuple(memory.shape)} does not fit y {tuple(y.shape)}")
                B, T_x, D = memory.shape
                if src_valid is None:
                    src_valid = torch.ones(B, T_x, dtype=torch.bool, device=memory.device)
                if src_valid.shape != (B, T_x):
                    raise ValueError(f"src_valid must be ({B}, {T_x})")
                if n_heads <= 0 or D % n_heads:
                    raise ValueError("n_heads must divide D")
                d_k = D // n_heads
                p = {name: t.double() for name, t in params.items()}
                Q = y.double() @ p["W_q"].T + p["b_q"]
                K = memory.double() @ p["W_k"].T + p["b_k"]
                V = memory.double() @ p["W_v"].T + p["b_v"]
                M = torch.zeros(B, 1, T_x, dtype=torch.float64, device=y.device).masked_fill(~src_valid[:, None, :],
                                                                                              float("-inf"))
                has_key = src_valid.any(dim=-1)[:, None, None]                            # (B, 1, 1)
                outs, weights = [], []
                for h in range(n_heads):
                    c = slice(h * d_k, (h + 1) * d_k)
                    w = torch.softmax(Q[..., c] @ K[..., c].transpose(-1, -2) / math.sqrt(d_k) + M, dim=-1)
                    w = torch.where(has_key, w, torch.zeros_like(w))
                    outs.append(w @ V[..., c])
                    weights.append(w)
                out = torch.cat(outs, dim=-1) @ p["W_o"].T + p["b_o"]
                return out.to(y.dtype), torch.stack(weights, dim=1).to(y.dtype)
        '''),
    ],
    "encdec_decoder_block": [
        # causal self-attention written inline, the learner's own cross_attention, F.layer_norm
        ("inline self-attention, own cross_attention", r'''
            def encdec_decoder_block(y, memory, tgt_valid, src_valid, params, n_heads):
                B, T, D = y.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                sa = params["self_attn"]

                def ln(t, name):
                    return F.layer_norm(t, (D,), params[name]["weight"], params[name]["bias"], eps=1e-5)

                allowed = torch.ones(T, T, dtype=torch.bool, device=y.device).tril()
                if tgt_valid is not None:
                    allowed = allowed & tgt_valid[:, None, :]                               # (B, T, T)
                q, k, v = (F.linear(y, sa["W_" + n], sa["b_" + n]).view(B, T, n_heads, d_k).transpose(1, 2)
                           for n in "qkv")
                s = (q @ k.transpose(-2, -1)) / math.sqrt(d_k)
                s = s.masked_fill(~allowed.view(-1, 1, T, T), float("-inf"))
                w = torch.softmax(s, dim=-1).nan_to_num(0.0)
                a = F.linear((w @ v).transpose(1, 2).reshape(B, T, D), sa["W_o"], sa["b_o"])
                h1 = ln(y + a, "ln1")
                c, cross_weights = cross_attention(h1, memory, src_valid, params["cross_attn"], n_heads)
                h2 = ln(h1 + c, "ln2")
                f = params["ffn"]
                ff = F.linear(torch.relu(F.linear(h2, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return ln(h2 + ff, "ln3"), cross_weights
        '''),
        # one nested attention helper for both sub-layers, layer norm written out
        ("nested attention helper, layer norm by hand", r'''
            def encdec_decoder_block(y, memory, tgt_valid, src_valid, params, n_heads):
                B, T_y, D = y.shape
                T_x = memory.shape[1]
                if n_heads <= 0 or D % n_heads != 0:
                    raise ValueError("n_heads must divide d_model")
                d_k = D // n_heads

                def attend(x_q, x_kv, p, allowed):                                    # allowed: (B, T_q, T_k)
                    Tq, Tk = x_q.shape[1], x_kv.shape[1]
                    q = (x_q @ p["W_q"].T + p["b_q"]).reshape(B, Tq, n_heads, d_k).permute(0, 2, 1, 3)
                    k = (x_kv @ p["W_k"].T + p["b_k"]).reshape(B, Tk, n_heads, d_k).permute(0, 2, 1, 3)
                    v = (x_kv @ p["W_v"].T + p["b_v"]).reshape(B, Tk, n_heads, d_k).permute(0, 2, 1, 3)
                    s = torch.matmul(q, k.transpose(-1, -2)) * d_k ** -0.5
                    w = torch.softmax(s.masked_fill(~allowed[:, None], float("-inf")), dim=-1)
                    w = torch.where(allowed[:, None].any(dim=-1, keepdim=True), w, torch.zeros_like(w))
                    o = torch.matmul(w, v).permute(0, 2, 1, 3).reshape(B, Tq, D)
                    return o @ p["W_o"].T + p["b_o"], w

                def norm(t, p):
                    mu = t.mean(dim=-1, keepdim=True)
                    sd = torch.sqrt(((t - mu) ** 2).mean(dim=-1, keepdim=True) + 1e-5)
                    return (t - mu) / sd * p["weight"] + p["bias"]

                i = torch.arange(T_y, device=y.device)
                self_ok = (i[:, None] >= i[None, :]).expand(B, T_y, T_y)
                if tgt_valid is not None:
                    self_ok = self_ok & tgt_valid[:, None, :]
                cross_ok = torch.ones(B, T_y, T_x, dtype=torch.bool, device=y.device)
                if src_valid is not None:
                    cross_ok = cross_ok & src_valid[:, None, :]
                a, _ = attend(y, y, params["self_attn"], self_ok)
                h1 = norm(y + a, params["ln1"])
                c, cross_w = attend(h1, memory, params["cross_attn"], cross_ok)
                h2 = norm(h1 + c, params["ln2"])
                f = params["ffn"]
                return norm(h2 + torch.relu(h2 @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"], params["ln3"]), cross_w
        '''),
    ],
}
