"""Other correct styles of notebook 05 RNN encoder-decoder: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "rnn_cell": [
        ("F.linear", r'''
            def rnn_cell(x_t, h_prev, W_x, W_h, b):
                H, D = W_x.shape
                if x_t.size(-1) != D:
                    raise ValueError(f"x_t has width {x_t.size(-1)}, W_x expects {D}")
                if W_h.shape != (H, H) or h_prev.size(-1) != H:
                    raise ValueError("h_prev, W_h and W_x disagree on H")
                return torch.tanh(F.linear(x_t, W_x, b) + F.linear(h_prev, W_h))
        '''),
        # one (H, D + H) matrix applied to [x_t, h_prev]
        ("concatenated weights", r'''
            def rnn_cell(x_t, h_prev, W_x, W_h, b):
                if x_t.shape[1] != W_x.shape[1] or h_prev.shape[1] != W_h.shape[1] or W_h.shape[0] != W_x.shape[0]:
                    raise ValueError("the shapes of x_t, h_prev, W_x and W_h do not fit")
                W = torch.cat([W_x, W_h], dim=1)                          # (H, D + H)
                xh = torch.cat([x_t, h_prev], dim=1)                       # (B, D + H)
                return torch.tanh(xh @ W.T + b)
        '''),
    ],
    "rnn_encode": [
        ("preallocated states, batched steps", r'''
            def rnn_encode(src_ids, src_mask, E, W_x, W_h, b):
                if src_ids.dim() != 2:
                    raise ValueError("src_ids must be (B, T_x)")
                if src_mask is None:
                    src_mask = torch.ones_like(src_ids, dtype=torch.bool)
                elif src_mask.shape != src_ids.shape:
                    raise ValueError("src_mask must have the shape of src_ids")
                B, T_x = src_ids.shape
                H = W_h.shape[0]
                states = torch.zeros(B, T_x, H, dtype=E.dtype, device=E.device)
                h = torch.zeros(B, H, dtype=E.dtype, device=E.device)
                for t in range(T_x):
                    real = src_mask[:, t].unsqueeze(1)                         # (B, 1)
                    ids_t = src_ids[:, t].masked_fill(~src_mask[:, t], 0)      # padding may hold any id
                    h_new = torch.tanh(F.linear(E[ids_t], W_x, b) + F.linear(h, W_h))
                    h = torch.where(real, h_new, h)
                    states[:, t] = torch.where(real, h_new, torch.zeros_like(h_new))
                return states, h
        '''),
        # one sentence at a time, the notes' column vectors W_h h + W_x x + b
        ("sentence by sentence, column vectors", r'''
            def rnn_encode(src_ids, src_mask, E, W_x, W_h, b):
                if src_ids.ndim != 2 or (src_mask is not None and src_mask.shape != src_ids.shape):
                    raise ValueError("src_ids (B, T_x) and src_mask (B, T_x) are needed")
                B, T_x = src_ids.shape
                H = W_h.shape[0]
                states = E.new_zeros(B, T_x, H)
                context = E.new_zeros(B, H)
                for i in range(B):
                    h = E.new_zeros(H)                                          # h_0 = 0
                    for t in range(T_x):
                        if src_mask is not None and not bool(src_mask[i, t]):
                            continue                                            # padding: the state stays
                        h = torch.tanh(W_h @ h + W_x @ E[src_ids[i, t]] + b)
                        states[i, t] = h
                    context[i] = h
                return states, context
        '''),
    ],
    "decoder_step": [
        ("F.embedding and F.linear", r'''
            def decoder_step(prev_ids, h, params):
                e = F.embedding(prev_ids, params["E_tgt"])                                   # (B, D)
                h = torch.tanh(F.linear(e, params["W_x_dec"], params["b_dec"]) + F.linear(h, params["W_h_dec"]))
                return F.linear(h, params["W_out"], params["b_out"]), h
        '''),
        ("einsum and addmm", r'''
            def decoder_step(prev_ids, h, params):
                p = params
                e = p["E_tgt"].index_select(0, prev_ids)
                pre = torch.einsum("hd,bd->bh", p["W_x_dec"], e) + torch.einsum("hk,bk->bh", p["W_h_dec"], h)
                pre = pre + p["b_dec"]
                h_new = torch.tanh(pre)
                return torch.addmm(p["b_out"], h_new, p["W_out"].t()), h_new
        '''),
    ],
    "teacher_forced_logits": [
        # a loop over the learner's own decoder_step
        ("loop of decoder_step", r'''
            def teacher_forced_logits(context, tgt_in, params):
                B, T_y = tgt_in.shape
                if T_y == 0:
                    return context.new_zeros(B, 0, params["W_out"].shape[0])
                h, steps = context, []
                for t in range(T_y):
                    logits, h = decoder_step(tgt_in[:, t], h, params)       # reads the true previous token
                    steps.append(logits)
                return torch.stack(steps, dim=1)
        '''),
        ("preallocated logits", r'''
            def teacher_forced_logits(context, tgt_in, params):
                p = params
                B, T_y = tgt_in.shape
                out = context.new_empty(B, T_y, p["W_out"].shape[0])
                h = context
                for t in range(T_y):
                    x_t = F.embedding(tgt_in[:, t], p["E_tgt"])
                    h = torch.tanh(F.linear(x_t, p["W_x_dec"], p["b_dec"]) + F.linear(h, p["W_h_dec"]))
                    out[:, t] = F.linear(h, p["W_out"], p["b_out"])
                return out
        '''),
    ],
    "seq2seq_loss": [
        ("F.cross_entropy summed, divided by B", r'''
            def seq2seq_loss(logits, targets, mask=None):
                if logits.dim() != 3 or targets.shape != logits.shape[:2]:
                    raise ValueError("logits (B, T_y, V) and targets (B, T_y) do not fit")
                if mask is not None and mask.shape != targets.shape:
                    raise ValueError("mask must have the shape of targets")
                B, T, V = logits.shape
                if mask is not None:
                    targets = targets.masked_fill(~mask, -100)
                total = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), ignore_index=-100,
                                        reduction="sum")
                return total / B
        '''),
        # log-probabilities in float64 times a one-hot made by comparison (a padding id of -100 matches nothing)
        ("float64 times a one-hot", r'''
            def seq2seq_loss(logits, targets, mask=None):
                if logits.ndim != 3:
                    raise ValueError("logits must be (B, T_y, V)")
                B, T, V = logits.shape
                if tuple(targets.shape) != (B, T):
                    raise ValueError("targets must be (B, T_y)")
                if mask is not None and tuple(mask.shape) != (B, T):
                    raise ValueError("mask must be (B, T_y)")
                log_p = torch.log_softmax(logits.double(), dim=-1)                                     # (B, T, V)
                one_hot = (targets.unsqueeze(-1) == torch.arange(V, device=logits.device)).double()
                token_log_p = (log_p * one_hot).sum(dim=-1)                                            # (B, T)
                if mask is not None:
                    token_log_p = token_log_p * mask.double()
                return (-token_log_p.sum() / B).to(logits.dtype)
        '''),
    ],
    "greedy_decode": [
        # a while loop over the learner's own decoder_step, tokens written into a preallocated tensor
        ("preallocated tokens, decoder_step", r'''
            def greedy_decode(context, params, bos_id, eos_id, max_len):
                if max_len < 0:
                    raise ValueError("max_len must not be negative")
                B, dev = context.shape[0], context.device
                tokens = torch.zeros(B, max_len, dtype=torch.long, device=dev)
                total = torch.zeros(B, dtype=context.dtype, device=dev)
                finished = torch.zeros(B, dtype=torch.bool, device=dev)
                prev = torch.full((B,), bos_id, dtype=torch.long, device=dev)
                h, steps = context, 0
                while steps < max_len and not bool(finished.all()):
                    logits, h = decoder_step(prev, h, params)
                    log_p = F.log_softmax(logits, dim=-1)
                    best = log_p.argmax(dim=-1)
                    best_lp = log_p.gather(1, best[:, None]).squeeze(1)
                    best = torch.where(finished, torch.zeros_like(best), best)
                    total = total + torch.where(finished, torch.zeros_like(best_lp), best_lp)
                    tokens[:, steps] = best
                    finished = finished | (best == eos_id)
                    prev = best
                    steps += 1
                return tokens[:, :steps], total
        '''),
        # one sentence at a time with Python lists, padded at the end
        ("sentence by sentence, lists", r'''
            def greedy_decode(context, params, bos_id, eos_id, max_len):
                if not max_len >= 0:
                    raise ValueError(f"max_len={max_len}")
                p = params
                sentences, scores = [], []
                for i in range(context.shape[0]):
                    h, prev, toks = context[i], bos_id, []
                    score = torch.zeros((), dtype=context.dtype, device=context.device)
                    while len(toks) < max_len:
                        h = torch.tanh(p["W_h_dec"] @ h + p["W_x_dec"] @ p["E_tgt"][prev] + p["b_dec"])
                        log_p = torch.log_softmax(p["W_out"] @ h + p["b_out"], dim=0)
                        prev = int(torch.argmax(log_p))
                        toks.append(prev)
                        score = score + log_p[prev]
                        if prev == eos_id:
                            break
                    sentences.append(toks)
                    scores.append(score)
                L = max(len(t) for t in sentences)
                tokens = torch.tensor([t + [0] * (L - len(t)) for t in sentences], dtype=torch.long,
                                      device=context.device).reshape(len(sentences), L)
                return tokens, torch.stack(scores)
        '''),
    ],
    "beam_search": [
        # hypotheses extended one at a time with the learner's decoder_step, candidates sorted in Python
        ("one hypothesis at a time, sorted", r'''
            def beam_search(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
                if beam_width < 1 or max_len < 0:
                    raise ValueError("beam_width must be >= 1 and max_len >= 0")
                if context.dim() != 1:
                    raise ValueError("context must be one sentence's (H,) vector")
                live = [([], torch.zeros((), dtype=context.dtype, device=context.device), context)]
                done = []
                for _ in range(max_len):
                    candidates = []
                    for toks, score, h in live:
                        prev = torch.tensor([toks[-1] if toks else bos_id], device=context.device)
                        logits, h_new = decoder_step(prev, h[None], params)            # a batch of one
                        log_p = torch.log_softmax(logits[0], dim=-1)
                        for v in range(log_p.shape[0]):
                            candidates.append((toks + [v], score + log_p[v], h_new[0]))
                    candidates.sort(key=lambda c: float(c[1]), reverse=True)
                    live = []
                    for cand in candidates[:beam_width]:
                        (done if cand[0][-1] == eos_id else live).append(cand)
                    if not live:
                        break

                def rank(hyp):
                    return float(hyp[1]) / len(hyp[0]) if length_norm else float(hyp[1])

                best = sorted(done + live, key=rank, reverse=True)[:beam_width]
                return [toks for toks, _, _ in best], torch.stack([score for _, score, _ in best])
        '''),
        # the beam as tensors (token rows, scores, states), torch.sort over every extension
        ("tensors and torch.sort", r'''
            def beam_search(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
                if context.ndim != 1:
                    raise ValueError("beam search decodes one sentence: context must be (H,)")
                if beam_width < 1:
                    raise ValueError("beam_width < 1")
                if max_len < 0:
                    raise ValueError("max_len < 0")
                p, dev = params, context.device
                V = p["W_out"].shape[0]
                seqs = torch.full((1, 1), bos_id, dtype=torch.long, device=dev)     # (K, t + 1), <bos> first
                scores = torch.zeros(1, dtype=context.dtype, device=dev)           # (K,)
                states = context.unsqueeze(0)                                       # (K, H)
                finished = []                                                       # (tokens, score)
                for _ in range(max_len):
                    x = F.embedding(seqs[:, -1], p["E_tgt"])
                    states = torch.tanh(F.linear(x, p["W_x_dec"], p["b_dec"]) + F.linear(states, p["W_h_dec"]))
                    log_p = F.log_softmax(F.linear(states, p["W_out"], p["b_out"]), dim=-1)     # (K, V)
                    total = (scores[:, None] + log_p).reshape(-1)
                    order = torch.sort(total, descending=True).indices[:beam_width]
                    k, v = order // V, order % V
                    seqs = torch.cat([seqs[k], v[:, None]], dim=1)
                    scores, states = total[order], states[k]
                    ended = v == eos_id
                    for row in torch.nonzero(ended).flatten().tolist():
                        finished.append((seqs[row, 1:].tolist(), scores[row]))
                    seqs, scores, states = seqs[~ended], scores[~ended], states[~ended]
                    if seqs.shape[0] == 0:
                        break
                pool = finished + [(s[1:].tolist(), sc) for s, sc in zip(seqs, scores)]
                key = (lambda e: float(e[1]) / max(len(e[0]), 1)) if length_norm else (lambda e: float(e[1]))
                best = sorted(pool, key=key, reverse=True)[:beam_width]
                return [toks for toks, _ in best], torch.stack([sc for _, sc in best])
        '''),
    ],
}
