"""Other correct styles of notebook 09 KV cache: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "encdec_forward": [
        ("keyword arguments, one line", r'''
            def encdec_forward(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
                return run_decoder(tgt_in, cross_kv(encode(src, src_valid)), src_valid=src_valid, tgt_valid=tgt_valid)
        '''),
        ("named steps in a dict", r'''
            def encdec_forward(encode, cross_kv, run_decoder, src, src_valid, tgt_in, tgt_valid):
                steps = {}
                steps["memory"] = encode(src, src_valid)
                steps["kv"] = cross_kv(steps["memory"])
                masks = (src_valid, tgt_valid)
                return run_decoder(tgt_in, steps["kv"], *masks)
        '''),
    ],
    "translation_loss": [
        ("F.cross_entropy with ignore_index", r'''
            def translation_loss(encode, cross_kv, run_decoder, batch):
                logits = encdec_forward(encode, cross_kv, run_decoder, batch["src"], batch["src_mask"], batch["tgt_in"],
                                        batch["tgt_mask"])
                targets = batch["tgt_out"].masked_fill(~batch["tgt_mask"], -100)
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
        '''),
        ("boolean indexing of the real tokens", r'''
            def translation_loss(encode, cross_kv, run_decoder, batch):
                real = batch["tgt_mask"]
                logits = encdec_forward(encode, cross_kv, run_decoder, batch["src"], batch["src_mask"], batch["tgt_in"],
                                        real)
                return F.cross_entropy(logits[real], batch["tgt_out"][real], reduction="sum") / real.sum()
        '''),
    ],
    "greedy_translate": [
        ("a list of steps, padding written by torch.where", r'''
            def greedy_translate(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
                if max_len < 0 or src.ndim != 2:
                    raise ValueError(f"need max_len >= 0 and a (B, T_x) source, got {max_len} and {tuple(src.shape)}")
                kv = cross_kv(encode(src, src_valid))
                written = [torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)]
                ended = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
                while len(written) - 1 < max_len and not ended.all():
                    logits = run_decoder(torch.stack(written, dim=1), kv, src_valid, None)
                    token = torch.where(ended, torch.zeros_like(written[0]), logits[:, -1, :].argmax(-1))
                    written.append(token)
                    ended = ended | (token == eos_id)
                return torch.stack(written[1:], dim=1) if len(written) > 1 else src.new_zeros(src.shape[0], 0)
        '''),
        ("a preallocated buffer, cut at the end", r'''
            def greedy_translate(encode, cross_kv, run_decoder, src, src_valid, bos_id, eos_id, max_len):
                if not isinstance(max_len, int) or max_len < 0:
                    raise ValueError("max_len must be a whole number >= 0")
                if src.dim() != 2:
                    raise ValueError("src must have shape (B, T_x)")
                memory = encode(src, src_valid)
                kv = cross_kv(memory)
                B = src.size(0)
                buf = torch.zeros(B, max_len + 1, dtype=torch.long, device=src.device)
                buf[:, 0] = bos_id
                alive = torch.ones(B, dtype=torch.bool, device=src.device)
                n = 0
                for t in range(1, max_len + 1):
                    nxt = run_decoder(buf[:, :t], kv, src_valid, None)[:, t - 1].argmax(dim=-1)
                    buf[:, t] = nxt * alive
                    alive = alive & (nxt != eos_id)
                    n = t
                    if not alive.any():
                        break
                return buf[:, 1:n + 1]
        '''),
    ],
    "cached_attention": [
        # the mask from two aranges (key j <= T_past + i), einsum, torch.softmax
        ("arange mask, einsum", r'''
            def cached_attention(q, k_new, v_new, cache=None):
                if q.dim() != 4 or k_new.dim() != 4 or v_new.dim() != 4 or k_new.shape[:3] != q.shape[:3] \
                        or v_new.shape[:3] != q.shape[:3] or k_new.shape[3] != q.shape[3]:
                    raise ValueError("q, k_new and v_new must be (B, H, T_new, width) with the same B, H, T_new")
                if cache is None:
                    K, V = k_new, v_new
                else:
                    K_past, V_past = cache
                    B, H = q.shape[:2]
                    if (K_past.dim() != 4 or V_past.dim() != 4 or K_past.shape[:2] != (B, H)
                            or V_past.shape[:2] != (B, H) or K_past.shape[2] != V_past.shape[2]
                            or K_past.shape[3] != k_new.shape[3] or V_past.shape[3] != v_new.shape[3]):
                        raise ValueError("the cache does not fit the new keys and values")
                    K = torch.cat((K_past, k_new), dim=2)
                    V = torch.cat((V_past, v_new), dim=2)
                T_new, T_all = q.shape[2], K.shape[2]
                rows = torch.arange(T_new, device=q.device)[:, None] + (T_all - T_new)   # absolute query positions
                allowed = torch.arange(T_all, device=q.device)[None, :] <= rows          # (T_new, T_all)
                scores = torch.einsum("bhid,bhjd->bhij", q, K) / math.sqrt(q.shape[-1])
                weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
                return torch.einsum("bhij,bhjd->bhid", weights, V), (K, V)
        '''),
        # an empty cache made explicit, SDPA with a tril(diagonal=T_past) bool mask
        ("SDPA with a shifted tril mask", r'''
            def cached_attention(q, k_new, v_new, cache=None):
                if not (q.ndim == k_new.ndim == v_new.ndim == 4):
                    raise ValueError("q, k_new and v_new must be 4-D (B, H, T_new, width)")
                if k_new.shape[:-1] != q.shape[:-1] or v_new.shape[:-1] != q.shape[:-1] \
                        or k_new.shape[-1] != q.shape[-1]:
                    raise ValueError(f"q {tuple(q.shape)}, k_new {tuple(k_new.shape)} and v_new {tuple(v_new.shape)} "
                                     f"do not fit")
                if cache is None:
                    K_past = k_new.new_zeros(*k_new.shape[:2], 0, k_new.shape[-1])
                    V_past = v_new.new_zeros(*v_new.shape[:2], 0, v_new.shape[-1])
                else:
                    K_past, V_past = cache
                    if K_past.ndim != 4 or V_past.ndim != 4:
                        raise ValueError("the cached keys and values must be 4-D")
                    T_past = K_past.shape[2]
                    if tuple(K_past.shape) != (*q.shape[:2], T_past, k_new.shape[-1]) \
                            or tuple(V_past.shape) != (*q.shape[:2], T_past, v_new.shape[-1]):
                        raise ValueError(f"the cache K {tuple(K_past.shape)}, V {tuple(V_past.shape)} does not fit")
                K, V = torch.cat([K_past, k_new], dim=-2), torch.cat([V_past, v_new], dim=-2)
                T_new, T_past = q.shape[-2], K_past.shape[-2]
                allowed = torch.ones(T_new, T_past + T_new, dtype=torch.bool, device=q.device).tril(T_past)
                return F.scaled_dot_product_attention(q, K, V, attn_mask=allowed), (K, V)
        '''),
    ],
    "decoder_block_step": [
        # the learner's own cached_attention, heads by view, layer norm written out
        ("own cached_attention, layer norm by hand", r'''
            def decoder_block_step(x_new, params, n_heads, cache=None):
                B, T_new, D = x_new.shape
                if n_heads < 1 or D % n_heads:
                    raise ValueError(f"d_model={D} is not divisible by n_heads={n_heads}")
                d_k = D // n_heads
                a = params["attn"]

                def heads(t):
                    return t.view(B, T_new, n_heads, d_k).transpose(1, 2)

                def layer_norm(t, ln):
                    mean = t.mean(-1, keepdim=True)
                    var = t.var(-1, unbiased=False, keepdim=True)
                    return (t - mean) / torch.sqrt(var + 1e-5) * ln["weight"] + ln["bias"]

                q, k, v = (heads(F.linear(x_new, a["W_" + n], a["b_" + n])) for n in "qkv")
                out, cache = cached_attention(q, k, v, cache)
                attn = F.linear(out.transpose(1, 2).reshape(B, T_new, D), a["W_o"], a["b_o"])
                h = layer_norm(x_new + attn, params["ln1"])
                f = params["ffn"]
                ff = F.linear(F.relu(F.linear(h, f["W_1"], f["b_1"])), f["W_2"], f["b_2"])
                return layer_norm(h + ff, params["ln2"]), cache
        '''),
        # one fused QKV projection, the cache grown here, SDPA
        ("fused QKV, own cache, SDPA", r'''
            def decoder_block_step(x_new, params, n_heads, cache=None):
                B, T_new, D = x_new.shape
                if n_heads <= 0 or D % n_heads != 0:
                    raise ValueError("n_heads must divide the model width")
                H, d_k = n_heads, D // n_heads
                a = params["attn"]
                W = torch.cat([a["W_q"], a["W_k"], a["W_v"]], dim=0)                     # (3D, D)
                bias = torch.cat([a["b_q"], a["b_k"], a["b_v"]], dim=0)
                qkv = (x_new @ W.T + bias).reshape(B, T_new, 3, H, d_k).permute(2, 0, 3, 1, 4)   # (3, B, H, T_new, d_k)
                q, k, v = qkv[0], qkv[1], qkv[2]
                if cache is not None:
                    K_past, V_past = cache
                    if K_past.shape[:2] != (B, H) or K_past.shape[-1] != d_k or V_past.shape != K_past.shape:
                        raise ValueError(f"a cache of shape {tuple(K_past.shape)} does not fit B={B}, H={H}, d_k={d_k}")
                    k, v = torch.cat([K_past, k], dim=2), torch.cat([V_past, v], dim=2)
                T_all = k.shape[2]
                allowed = torch.ones(T_new, T_all, dtype=torch.bool, device=x_new.device).tril(diagonal=T_all - T_new)
                heads = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)       # (B, H, T_new, d_k)
                att = heads.transpose(1, 2).reshape(B, T_new, D) @ a["W_o"].T + a["b_o"]
                ln1, ln2, f = params["ln1"], params["ln2"], params["ffn"]
                h = F.layer_norm(x_new + att, (D,), ln1["weight"], ln1["bias"], 1e-5)
                ff = torch.relu(h @ f["W_1"].T + f["b_1"]) @ f["W_2"].T + f["b_2"]
                return F.layer_norm(h + ff, (D,), ln2["weight"], ln2["bias"], 1e-5), (k, v)
        '''),
    ],
    "greedy_generate": [
        ("preallocated output", r'''
            def greedy_generate(step, prompt, eos_id, max_len):
                if prompt.ndim != 2 or prompt.shape[-1] == 0:
                    raise ValueError(f"prompt must be (B, T_p) with T_p >= 1, got {tuple(prompt.shape)}")
                if max_len < 0:
                    raise ValueError("max_len must not be negative")
                out = torch.zeros(prompt.shape[0], max_len, dtype=torch.long, device=prompt.device)
                ended = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
                feed, cache, n = prompt, None, 0
                while n < max_len and not ended.all():
                    logits, cache = step(feed, cache)
                    out[:, n] = torch.where(ended, 0, logits[:, -1, :].argmax(dim=-1))
                    ended |= out[:, n] == eos_id
                    feed = out[:, n:n + 1].clone()
                    n += 1
                return out[:, :n]
        '''),
        # the text grown with torch.cat, the newest token fed back as (B, 1)
        ("torch.cat, feed back", r'''
            def greedy_generate(step, prompt, eos_id, max_len):
                if prompt.dim() != 2 or prompt.size(1) < 1:
                    raise ValueError("a (B, T_p) prompt with at least one token is needed")
                if max_len < 0:
                    raise ValueError(f"max_len={max_len} < 0")
                generated = prompt.new_empty(prompt.size(0), 0)
                feed, cache = prompt, None
                for _ in range(max_len):
                    logits, cache = step(feed, cache)
                    feed = logits[:, -1:].argmax(dim=-1)                       # (B, 1): the newest token
                    if generated.size(1):
                        finished = (generated == eos_id).any(dim=1, keepdim=True)
                        feed = feed.masked_fill(finished, 0)
                    generated = torch.cat([generated, feed], dim=1)
                    if (generated == eos_id).any(dim=1).all():
                        break
                return generated
        '''),
    ],
    "kv_cache_bytes": [
        ("math.prod, type() checks", r'''
            def kv_cache_bytes(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
                sizes = (n_layers, n_heads, d_k, n_positions, batch, bytes_per_value)
                if any(type(s) is not int or s < 0 for s in sizes):
                    raise ValueError(f"every size must be an int >= 0, got {sizes}")
                return 2 * math.prod(sizes)
        '''),
        ("functools.reduce, operator.index", r'''
            import functools
            import operator

            def kv_cache_bytes(n_layers, n_heads, d_k, n_positions, batch=1, bytes_per_value=2):
                values = [n_layers, n_heads, d_k, n_positions, batch, bytes_per_value]
                for v in values:
                    if isinstance(v, bool):
                        raise ValueError("sizes are numbers, not booleans")
                    try:
                        operator.index(v)
                    except TypeError:
                        raise ValueError(f"{v!r} is not a whole number") from None
                    if v < 0:
                        raise ValueError(f"{v} < 0")
                keys_and_values = 2
                return keys_and_values * functools.reduce(operator.mul, (int(v) for v in values), 1)
        '''),
    ],
}
