"""Other correct styles of notebook 05b attention in the RNN encoder-decoder: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "additive_score": [
        ("einsum", r"""
            def additive_score(h_prev, states, W_q, W_k, u):
                if (h_prev.dim(), states.dim()) != (2, 3) or h_prev.shape[0] != states.shape[0]:
                    raise ValueError("bad shapes")
                if W_q.shape != (u.shape[0], h_prev.shape[1]) or W_k.shape != (u.shape[0], states.shape[2]):
                    raise ValueError("the weights do not fit")
                hidden = torch.einsum("ad,bd->ba", W_q, h_prev)[:, None] + torch.einsum("ae,bte->bta", W_k, states)
                return torch.einsum("bta,a->bt", torch.tanh(hidden), u)
        """),
        ("a loop over the source positions", r"""
            def additive_score(h_prev, states, W_q, W_k, u):
                ok = h_prev.dim() == 2 and states.dim() == 3 and len(h_prev) == len(states)
                if not ok or W_q.shape[1] != h_prev.shape[1] or W_k.shape[1] != states.shape[2]:
                    raise ValueError("shapes")
                if not (W_q.shape[0] == W_k.shape[0] == u.shape[0]):
                    raise ValueError("d_a differs")
                out = torch.zeros(states.shape[0], states.shape[1], dtype=states.dtype, device=states.device)
                for j in range(states.shape[1]):
                    out[:, j] = torch.tanh(h_prev @ W_q.T + states[:, j] @ W_k.T) @ u
                return out
        """),
    ],
    "dot_score": [
        ("torch.bmm", r"""
            def dot_score(h_dec, states):
                if h_dec.dim() != 2 or states.dim() != 3 or h_dec.shape[0] != states.shape[0] \
                        or h_dec.shape[1] != states.shape[2]:
                    raise ValueError("shapes")
                return torch.bmm(states, h_dec.unsqueeze(2)).squeeze(2)
        """),
        ("broadcast and sum", r"""
            def dot_score(h_dec, states):
                if tuple(h_dec.shape) != (states.shape[0], states.shape[2]) or states.dim() != 3:
                    raise ValueError(f"h_dec {tuple(h_dec.shape)} does not fit states {tuple(states.shape)}")
                return (h_dec[:, None, :] * states).sum(-1)
        """),
    ],
    "attend": [
        ("an explicit softmax with torch.where", r"""
            def attend(scores, states, src_mask=None):
                if scores.dim() != 2 or states.dim() != 3 or scores.shape != states.shape[:2]:
                    raise ValueError("shapes")
                if src_mask is None:
                    src_mask = torch.ones_like(scores, dtype=torch.bool)
                if src_mask.shape != scores.shape:
                    raise ValueError("mask")
                if scores.shape[1] == 0:  # nothing to read
                    return states.new_zeros(states.shape[0], states.shape[2]), scores.clone()
                z = torch.where(src_mask, scores, torch.full_like(scores, -torch.inf))
                top = z.max(dim=-1, keepdim=True).values
                e = torch.where(src_mask, torch.exp(z - torch.where(top.isinf(), 0.0, top)), 0.0)
                total = e.sum(-1, keepdim=True)
                alpha = torch.where(total > 0, e / total.clamp_min(1e-300), 0.0)
                return torch.einsum("bt,bth->bh", alpha, states), alpha
        """),
        ("float64 inside, a loop over the batch", r"""
            def attend(scores, states, src_mask=None):
                if scores.shape != states.shape[:2] or states.dim() != 3:
                    raise ValueError("scores and states disagree")
                if src_mask is not None and src_mask.shape != scores.shape:
                    raise ValueError("src_mask")
                alpha = torch.zeros_like(scores)
                for b in range(scores.shape[0]):
                    if src_mask is None:
                        real = torch.ones(scores.shape[1], dtype=torch.bool, device=scores.device)
                    else:
                        real = src_mask[b]
                    if real.any():
                        alpha[b, real] = torch.softmax(scores[b, real].double(), 0).to(scores.dtype)
                return (alpha.unsqueeze(-1) * states).sum(1), alpha
        """),
    ],
    "attention_decoder_step": [
        ("weights applied with F.linear", r"""
            def attention_decoder_step(prev_ids, h_prev, states, src_mask, params):
                p = params
                context, alpha = attend(additive_score(h_prev, states, p["W_q"], p["W_k"], p["u"]), states, src_mask)
                h = torch.tanh(F.linear(F.embedding(prev_ids, p["E_tgt"]), p["W_x"]) + F.linear(context, p["W_c"])
                               + F.linear(h_prev, p["W_h"], p["b"]))
                return F.linear(torch.cat((h, context), 1), p["W_out"], p["b_out"]), h, alpha
        """),
        ("the output layer split in two", r"""
            def attention_decoder_step(prev_ids, h_prev, states, src_mask, params):
                scores = additive_score(h_prev, states, params["W_q"], params["W_k"], params["u"])
                context, alpha = attend(scores, states, src_mask)
                x = params["E_tgt"][prev_ids]
                h = torch.tanh(x @ params["W_x"].T + h_prev @ params["W_h"].T + context @ params["W_c"].T
                               + params["b"])
                d_dec = h.shape[-1]
                W_out = params["W_out"]
                logits = h @ W_out[:, :d_dec].T + context @ W_out[:, d_dec:].T + params["b_out"]
                return logits, h, alpha
        """),
    ],
    "answer_alignment_weights": [
        ("a product", """
            def answer_alignment_weights():
                return 10 * 11
        """),
        ("a float", """
            def answer_alignment_weights():
                return 110.0
        """),
    ],
    "answer_bottleneck": [
        ("a capital letter", """
            def answer_bottleneck():
                return "B"
        """),
        ("the letter in parentheses", """
            def answer_bottleneck():
                return "(b)"
        """),
    ],
}
