"""Other correct styles of notebook 06 encoder: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "split_heads": [
        ("split columns, stack heads", r'''
            def split_heads(x, n_heads):
                if x.dim() != 3:
                    raise ValueError("x must be (B, T, D)")
                D = x.shape[-1]
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                return torch.stack(torch.split(x, D // n_heads, dim=-1), dim=1)    # H x (B, T, d_k) -> (B, H, T, d_k)
        '''),
        ("preallocated, head by head", r'''
            def split_heads(x, n_heads):
                if x.ndim != 3 or n_heads <= 0 or x.shape[2] % n_heads != 0:
                    raise ValueError(f"cannot split x of shape {tuple(x.shape)} into {n_heads} heads")
                B, T, D = x.shape
                d_k = D // n_heads
                out = x.new_empty(B, n_heads, T, d_k)
                for h in range(n_heads):
                    out[:, h] = x[:, :, h * d_k:(h + 1) * d_k]
                return out
        '''),
    ],
    "merge_heads": [
        ("unbind heads, concatenate", r'''
            def merge_heads(x):
                if x.dim() != 4:
                    raise ValueError("x must be (B, H, T, d_k)")
                return torch.cat(torch.unbind(x, dim=1), dim=-1)
        '''),
        ("preallocated, head by head", r'''
            def merge_heads(x):
                if x.ndim != 4:
                    raise ValueError(f"merge_heads takes (B, H, T, d_k), got {tuple(x.shape)}")
                B, H, T, d_k = x.shape
                out = x.new_empty(B, T, H * d_k)
                for h in range(H):
                    out[:, :, h * d_k:(h + 1) * d_k] = x[:, h]
                return out
        '''),
    ],
    "multi_head_attention": [
        # the learner's own split_heads / merge_heads, attention by einsum, the mask expanded to (B, T_q, T_k)
        ("einsum, own split and merge", r'''
            def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
                if x_q.dim() != 3 or x_kv.dim() != 3:
                    raise ValueError("x_q and x_kv must be (B, T, D)")
                if x_q.shape[0] != x_kv.shape[0] or x_q.shape[-1] != x_kv.shape[-1]:
                    raise ValueError("x_q and x_kv must share B and D")
                p = params
                q = split_heads(F.linear(x_q, p["W_q"], p["b_q"]), n_heads)
                k = split_heads(F.linear(x_kv, p["W_k"], p["b_k"]), n_heads)
                v = split_heads(F.linear(x_kv, p["W_v"], p["b_v"]), n_heads)
                scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
                if mask is not None:
                    try:
                        allowed = torch.broadcast_to(mask, (x_q.shape[0], x_q.shape[1], x_kv.shape[1]))
                    except RuntimeError as exc:
                        raise ValueError("mask must broadcast to (B, T_q, T_k)") from exc
                    scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))   # the same for every head
                weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
                heads = torch.einsum("bhqk,bhkd->bhqd", weights, v)
                return F.linear(merge_heads(heads), p["W_o"], p["b_o"]), weights
        '''),
        ("loop over heads", r'''
            def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
                if x_q.ndim != 3 or x_kv.ndim != 3 or x_q.shape[0] != x_kv.shape[0] or x_q.shape[2] != x_kv.shape[2]:
                    raise ValueError(f"x_q {tuple(x_q.shape)} and x_kv {tuple(x_kv.shape)} do not fit")
                B, T_q, D = x_q.shape
                T_k = x_kv.shape[1]
                if n_heads < 1 or D % n_heads != 0:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                Q = x_q @ params["W_q"].T + params["b_q"]
                K = x_kv @ params["W_k"].T + params["b_k"]
                V = x_kv @ params["W_v"].T + params["b_v"]
                allowed = torch.ones(B, T_q, T_k, dtype=torch.bool, device=x_q.device)
                if mask is not None:
                    if mask.dim() > 3:
                        raise ValueError("mask must broadcast to (B, T_q, T_k)")
                    allowed = allowed & mask
                outs, weights = [], []
                for h in range(n_heads):
                    cols = slice(h * d_k, (h + 1) * d_k)
                    s = Q[..., cols] @ K[..., cols].transpose(1, 2) / d_k ** 0.5           # (B, T_q, T_k)
                    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
                    w = torch.where(allowed.any(dim=-1, keepdim=True), w, torch.zeros_like(w))   # no key: zeros
                    outs.append(w @ V[..., cols])
                    weights.append(w)
                out = torch.cat(outs, dim=-1) @ params["W_o"].T + params["b_o"]
                return out, torch.stack(weights, dim=1)
        '''),
        # SDPA for the heads' outputs (bool mask, same polarity), the weights computed beside it
        ("SDPA outputs, own split and merge", r'''
            def multi_head_attention(x_q, x_kv, params, n_heads, mask=None):
                if x_q.dim() != 3 or x_kv.dim() != 3 or x_q.shape[0] != x_kv.shape[0] or x_q.shape[2] != x_kv.shape[2]:
                    raise ValueError("x_q (B, T_q, D) and x_kv (B, T_k, D) must share B and D")
                q = split_heads(x_q @ params["W_q"].T + params["b_q"], n_heads)
                k = split_heads(x_kv @ params["W_k"].T + params["b_k"], n_heads)
                v = split_heads(x_kv @ params["W_v"].T + params["b_v"], n_heads)
                T_k = k.shape[-2]
                allowed = torch.ones(1, 1, 1, T_k, dtype=torch.bool, device=x_q.device)
                if mask is not None:
                    if mask.dim() > 3:
                        raise ValueError("mask must broadcast to (B, T_q, T_k)")
                    m = mask
                    while m.dim() < 3:
                        m = m.unsqueeze(0)
                    allowed = allowed & m.unsqueeze(1)                                 # (B or 1, 1, T_q, T_k)
                s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
                weights = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
                if T_k == 0:
                    heads = torch.zeros_like(q)
                else:
                    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed).nan_to_num(0.0)
                return merge_heads(heads) @ params["W_o"].T + params["b_o"], weights
        '''),
    ],
    "sinusoidal_positions": [
        ("Python math, entry by entry", r'''
            def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
                if T < 0 or D < 1:
                    raise ValueError(f"T={T} and D={D}: need T >= 0 and D >= 1")
                table = []
                for p in range(T):
                    row = []
                    for c in range(D):
                        angle = p / base ** ((c - c % 2) / D)                 # c - c % 2: the pair's even column
                        row.append(math.sin(angle) if c % 2 == 0 else math.cos(angle))
                    table.append(row)
                return torch.tensor(table, dtype=dtype, device=device).reshape(T, D)
        '''),
        # the frequencies as exp(-2i log(base) / D), as in PyTorch's tutorial
        ("exp-log frequencies", r'''
            def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
                if D < 1:
                    raise ValueError("D must be >= 1")
                if T < 0:
                    raise ValueError("T must be >= 0")
                position = torch.arange(T, dtype=torch.float64, device=device).unsqueeze(1)         # (T, 1)
                div_term = torch.exp(torch.arange(0, D, 2, dtype=torch.float64, device=device) * (-math.log(base) / D))
                pe = torch.zeros(T, D, dtype=torch.float64, device=device)
                pe[:, 0::2] = torch.sin(position * div_term)
                pe[:, 1::2] = torch.cos(position * div_term[: D // 2])
                return pe.to(dtype)
        '''),
        # computed in the requested dtype from the start (no float64 table)
        ("in the requested dtype", r'''
            def sinusoidal_positions(T, D, base=10000.0, dtype=torch.float32, device=None):
                if T < 0 or D < 1:
                    raise ValueError(f"need T >= 0 and D >= 1, got T={T}, D={D}")
                p = torch.arange(T, dtype=dtype, device=device)[:, None]
                freq = base ** (-torch.arange(0, D, 2, dtype=dtype, device=device) / D)
                pe = torch.zeros(T, D, dtype=dtype, device=device)
                pe[:, 0::2] = torch.sin(p * freq)
                pe[:, 1::2] = torch.cos(p * freq)[:, : D // 2]
                return pe
        '''),
    ],
    "embed_with_positions": [
        ("index_select, broadcast add", r'''
            def embed_with_positions(ids, E, P):
                if ids.ndim != 2:
                    raise ValueError("ids must be (B, T)")
                B, T = ids.shape
                if T > P.size(0) or E.size(1) != P.size(1):
                    raise ValueError(f"ids of length {T}, E {tuple(E.shape)} and P {tuple(P.shape)} do not fit")
                tokens = E.index_select(0, ids.reshape(-1)).reshape(B, T, E.size(1))
                return tokens + P[:T].unsqueeze(0)
        '''),
        ("preallocated, position by position", r'''
            def embed_with_positions(ids, E, P):
                if ids.dim() != 2:
                    raise ValueError(f"ids must be a (B, T) batch, got {tuple(ids.shape)}")
                B, T = ids.shape
                if T > P.shape[0]:
                    raise ValueError(f"T={T} is longer than the positional table ({P.shape[0]} rows)")
                if P.shape[1] != E.shape[1]:
                    raise ValueError("E and P must have the same width")
                out = E.new_empty(B, T, E.shape[1])
                for t in range(T):
                    out[:, t] = E[ids[:, t]] + P[t]
                return out
        '''),
    ],
    "encoder_block": [
        # the learner's own multi_head_attention, layer norm written out
        ("own multi_head_attention, layer norm by hand", r'''
            def encoder_block(x, valid, params, n_heads):
                def layer_norm(h, ln, eps=1e-5):
                    mean = h.mean(dim=-1, keepdim=True)
                    var = ((h - mean) ** 2).mean(dim=-1, keepdim=True)
                    return (h - mean) / torch.sqrt(var + eps) * ln["weight"] + ln["bias"]

                mask = None if valid is None else valid.unsqueeze(-2)          # (B, 1, T): only real keys
                a, _ = multi_head_attention(x, x, params["attn"], n_heads, mask)
                h = layer_norm(x + a, params["ln1"])
                f = params["ffn"]
                ff = F.linear(F.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return layer_norm(h + ff, params["ln2"])
        '''),
        ("all inline, einsum attention", r'''
            def encoder_block(x, valid, params, n_heads):
                B, T, D = x.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                a = params["attn"]

                def heads(t):                                                  # (B, T, D) -> (B, H, T, d_k)
                    return t.reshape(B, T, n_heads, d_k).transpose(1, 2)

                q = heads(x @ a["W_q"].T + a["b_q"])
                k = heads(x @ a["W_k"].T + a["b_k"])
                v = heads(x @ a["W_v"].T + a["b_v"])
                scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d_k)
                if valid is not None:
                    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))   # padded keys blocked
                w = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)
                att = torch.einsum("bhij,bhjd->bhid", w, v).transpose(1, 2).reshape(B, T, D)
                ln1, ln2, f = params["ln1"], params["ln2"], params["ffn"]
                h = F.layer_norm(x + att @ a["W_o"].T + a["b_o"], (D,), ln1["weight"], ln1["bias"], eps=1e-5)
                ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
                return F.layer_norm(h + ff, (D,), ln2["weight"], ln2["bias"], eps=1e-5)
        '''),
    ],
    "masked_lm_loss": [
        ("F.cross_entropy ignore_index, sum / count", r'''
            def masked_lm_loss(logits, targets, is_masked):
                if logits.shape[:2] != targets.shape or is_masked.shape != targets.shape:
                    raise ValueError("logits, targets and is_masked must agree on (B, T)")
                V = logits.shape[-1]
                labels = targets.masked_fill(~is_masked, -100)                 # unmasked positions are ignored
                total = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100, reduction="sum")
                return total / is_masked.sum().clamp(min=1)
        '''),
        # the masked positions picked by boolean indexing, then the plain mean
        ("boolean selection, mean", r'''
            def masked_lm_loss(logits, targets, is_masked):
                B, T = targets.shape
                if tuple(logits.shape[:2]) != (B, T) or tuple(is_masked.shape) != (B, T):
                    raise ValueError("shapes do not agree on (B, T)")
                picked_logits = logits[is_masked]                              # (N, V)
                picked_targets = targets[is_masked]                            # (N,)
                if picked_targets.numel() == 0:
                    return logits.new_zeros(())                                # nothing to predict
                log_p = picked_logits - torch.logsumexp(picked_logits, dim=-1, keepdim=True)
                nll = -log_p[torch.arange(picked_targets.numel(), device=logits.device), picked_targets]
                return nll.mean()
        '''),
        # F.cross_entropy's own mean over the non-ignored positions; its 0/0 (nothing masked) made 0
        ("F.cross_entropy mean, nan_to_num", r'''
            def masked_lm_loss(logits, targets, is_masked):
                if logits.shape[:2] != targets.shape or is_masked.shape != targets.shape:
                    raise ValueError("logits, targets and is_masked must agree on (B, T)")
                labels = torch.where(is_masked, targets, torch.full_like(targets, -100))
                loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
                return torch.nan_to_num(loss, nan=0.0)
        '''),
    ],
    "probe_accuracy": [
        # the nearest mean written as the linear rule it is: w . x > threshold
        ("a hyperplane w . x > c", r'''
            def probe_accuracy(hidden, positions, senses, is_train):
                B, T, D = hidden.shape
                if positions.shape != (B,) or senses.shape != (B,) or is_train.shape != (B,):
                    raise ValueError("shapes")
                if positions.min() < 0 or positions.max() >= T or not ((senses == 0) | (senses == 1)).all():
                    raise ValueError("positions must be in 0 .. T-1 and senses 0 or 1")
                x = hidden.gather(1, positions.view(B, 1, 1).expand(B, 1, D)).squeeze(1)   # (B, D)
                fit0, fit1 = is_train & (senses == 0), is_train & (senses == 1)
                if fit0.sum() == 0 or fit1.sum() == 0 or is_train.all():
                    raise ValueError("need both senses to fit and a sentence to test")
                m0, m1 = x[fit0].mean(0), x[fit1].mean(0)
                w, c = m1 - m0, (m1.dot(m1) - m0.dot(m0)) / 2
                guess = (x[~is_train] @ w > c).long()
                return float((guess == senses[~is_train]).sum()) / int((~is_train).sum())
        '''),
        ("torch.cdist, a loop over the test sentences", r'''
            def probe_accuracy(hidden, positions, senses, is_train):
                if hidden.ndim != 3 or not (len(positions) == len(senses) == len(is_train) == hidden.shape[0]):
                    raise ValueError("hidden is (B, T, D), the rest (B,)")
                if any(p < 0 or p >= hidden.shape[1] for p in positions.tolist()):
                    raise ValueError(f"positions outside 0 .. {hidden.shape[1] - 1}")
                if any(s not in (0, 1) for s in senses.tolist()):
                    raise ValueError("senses are 0 or 1")
                words = torch.stack([hidden[b, p] for b, p in enumerate(positions.tolist())])
                train = [b for b in range(len(words)) if is_train[b]]
                test = [b for b in range(len(words)) if not is_train[b]]
                means = []
                for sense in (0, 1):
                    rows = [b for b in train if senses[b] == sense]
                    if not rows:
                        raise ValueError("both senses are needed to fit the probe")
                    means.append(words[rows].mean(dim=0))
                if not test:
                    raise ValueError("nothing to test")
                dist = torch.cdist(words[test].double(), torch.stack(means).double())   # (n_test, 2)
                right = sum(int(dist[k, 1] < dist[k, 0]) == int(senses[b]) for k, b in enumerate(test))
                return right / len(test)
        '''),
    ],
}
