"""Other correct styles of notebook 03 softmax: exercise -> [(what makes the style different, the answer cell)]
(tests/learner/check/test_other_styles.py)."""

STYLES = {
    "softmax": [
        ("torch.softmax, NaN rows zeroed", r'''
            def softmax(x, dim=-1, temperature=1.0):
                if temperature <= 0:
                    raise ValueError(f"temperature must be positive, got {temperature}")
                return torch.nan_to_num(torch.softmax(x / temperature, dim=dim), nan=0.0)
        '''),
        ("exp of z minus logsumexp", r'''
            def softmax(x, dim=-1, temperature=1.0):
                if not temperature > 0:
                    raise ValueError("temperature must be > 0")
                z = x / temperature
                lse = torch.logsumexp(z, dim=dim, keepdim=True)         # -inf for a slice that is all -inf
                return torch.where(lse == float("-inf"), torch.zeros_like(z), torch.exp(z - lse))
        '''),
    ],
    "log_softmax": [
        ("z minus logsumexp", r'''
            def log_softmax(x, dim=-1, temperature=1.0):
                if temperature <= 0:
                    raise ValueError("temperature must be positive")
                z = x / temperature
                lse = torch.logsumexp(z, dim=dim, keepdim=True)
                return torch.where(torch.isneginf(lse), torch.full_like(z, float("-inf")), z - lse)
        '''),
        ("float64 inside, max subtracted by hand", r'''
            def log_softmax(x, dim=-1, temperature=1.0):
                if not temperature > 0:
                    raise ValueError(f"bad temperature {temperature}")
                if x.shape[dim] == 0:
                    return x.clone()                                    # nothing to normalise: an empty result
                z = x.double() / temperature
                m = z.max(dim=dim, keepdim=True).values
                m = m.masked_fill(torch.isinf(m), 0.0)                  # an all -inf slice: no -inf - (-inf)
                shifted = z - m
                log_total = shifted.exp().sum(dim=dim, keepdim=True).log()
                out = (shifted - log_total).masked_fill(torch.isneginf(log_total), float("-inf"))
                return out.to(x.dtype)
        '''),
    ],
    "sequence_log_prob": [
        ("F.cross_entropy per position", r'''
            def sequence_log_prob(logits, targets, mask=None):
                if logits.ndim != 3 or tuple(targets.shape) != tuple(logits.shape[:2]):
                    raise ValueError("logits must be (B, T, V) and targets (B, T)")
                if mask is not None and mask.shape != targets.shape:
                    raise ValueError("mask must be (B, T)")
                if targets.dtype != torch.long:
                    raise ValueError("targets must be torch.long")
                if mask is not None:
                    targets = torch.where(mask, targets, torch.full_like(targets, -100))   # ignored below
                nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none", ignore_index=-100)
                return -nll.sum(dim=1)
        '''),
        # a preallocated (B,) result, += one position at a time
        ("loops over batch and positions", r'''
            def sequence_log_prob(logits, targets, mask=None):
                if logits.dim() != 3:
                    raise ValueError("logits must be (B, T, V)")
                B, T, V = logits.shape
                if targets.shape != (B, T) or (mask is not None and mask.shape != (B, T)):
                    raise ValueError("targets and mask must be (B, T)")
                if targets.dtype != torch.long:
                    raise ValueError("targets must be token ids")
                total = torch.zeros(B, dtype=logits.dtype, device=logits.device)
                for b in range(B):
                    for t in range(T):
                        if mask is not None and not mask[b, t]:
                            continue
                        row = logits[b, t]
                        total[b] += row[targets[b, t]] - torch.logsumexp(row, dim=0)
                return total
        '''),
    ],
}
