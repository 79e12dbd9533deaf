"""Notebook 03, softmax: cases, properties and known mistakes (``solutions/mistakes/softmax.py``)."""
import torch

from .common import (Case, Exercise, F64, dn, gen, learner_tensor, logit_scale, logit_sum_scale, nested, pick_dtype,
                     pick_int, seeded_randn, register, Choice, Decimal, question)


def _logits_case(g, big):
    dtype = pick_dtype(g)
    nd = pick_int(g, 1, 3)
    shape = tuple(pick_int(g, 1, 7 if big else 5) for _ in range(nd))
    dim = pick_int(g, -nd, nd - 1)
    tau = [0.1, 0.5, 1.0, 1.0, 2.0, 7.0][pick_int(g, 0, 5)]
    scale = [1.0, 3.0, 30.0][pick_int(g, 0, 2)]
    return Case(f"x of shape {shape}, dim={dim}, temperature={tau}, {dn(dtype)}",
                (seeded_randn(g, *shape, dtype=dtype, scale=scale),), {"dim": dim, "temperature": tau})


def _softmax_edge():
    g = gen(31)
    ninf = float("-inf")
    return [
        Case("n = 1: a single logit gets all the weight", (torch.tensor([[3.5]], dtype=F64),)),
        Case("all scores equal: uniform weights", (torch.full((2, 5), 0.7, dtype=F64),)),
        Case("very large logits (1e4): no overflow", (torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4 - 1, 5.0]]),)),
        Case("-inf entries get weight 0", (torch.tensor([[1.0, ninf, 2.0, ninf]], dtype=F64),)),
        Case("a row of all -inf (nothing allowed) gives zeros, not NaN", (torch.tensor([[ninf, ninf], [0.0, 1.0]]),)),
        Case("temperature 0.01 is close to argmax", (torch.tensor([1.0, 3.0, 2.0], dtype=F64),), {"temperature": 0.01}),
        Case("temperature 1000 is close to uniform", (torch.tensor([1.0, 3.0, 2.0], dtype=F64),), {"temperature": 1000.0}),
        Case("dim=0 on a matrix", (seeded_randn(g, 3, 4),), {"dim": 0}),
        Case("an axis of size 0: an empty result", (torch.zeros(3, 0, dtype=F64),)),
        Case("an axis of size 0 in float32: an empty float32 result", (torch.zeros(2, 0),)),
        Case("temperature 0 is an error", (seeded_randn(g, 3),), {"temperature": 0.0}, raises="ValueError"),
        Case("a negative temperature is an error", (seeded_randn(g, 3),), {"temperature": -1.0}, raises="ValueError"),
    ]


def _log_softmax_edge():
    g = gen(32)
    ninf = float("-inf")
    return [
        Case("n = 1: log of a certain event is 0", (torch.tensor([[3.5]], dtype=F64),)),
        Case("all scores equal: log(1/n) everywhere", (torch.full((2, 5), 0.7, dtype=F64),)),
        Case("very large logits (1e4): finite, no overflow", (torch.tensor([[1e4, 0.0, -1e4], [1e4, 1e4 - 1, 5.0]]),)),
        Case("an entry 2000 below the max: about -2000, not -inf", (torch.tensor([[0.0, -2000.0]], dtype=F64),)),
        Case("-inf entries stay -inf", (torch.tensor([[1.0, ninf, 2.0, ninf]], dtype=F64),)),
        Case("a row of all -inf gives -inf (log 0), not NaN", (torch.tensor([[ninf, ninf], [0.0, 1.0]]),)),
        Case("temperature 0.01", (torch.tensor([1.0, 3.0, 2.0], dtype=F64),), {"temperature": 0.01}),
        Case("dim=0 on a matrix", (seeded_randn(g, 3, 4),), {"dim": 0}),
        Case("an axis of size 0: an empty result", (torch.zeros(0, 4),), {"dim": 0}),
        Case("an axis of size 0 in float64: an empty float64 result", (torch.zeros(2, 0, dtype=F64),)),
        Case("temperature 0 is an error", (seeded_randn(g, 3),), {"temperature": 0.0}, raises="ValueError"),
    ]


def _rows_sum_to_one(fn):
    """Every slice along `dim` sums to 1 and every weight lies in [0, 1]."""
    g = gen(5)
    for dim in (-1, 0, 1):
        x = seeded_randn(g, 4, 6, 3, scale=5.0)
        out = learner_tensor(fn, (x,), {"dim": dim}, shape=x.shape)
        if out is None:
            return None  # reported by the case checks
        w = nested(out)  # [4][6][3]
        idx = [(a, b, c) for a in range(4) for b in range(6) for c in range(3)]
        if any(not (0.0 <= w[a][b][c] <= 1.0) for a, b, c in idx):
            return "softmax gave a weight outside [0, 1]; every weight must be a probability"
        axis = dim % 3
        sums = {}
        for a, b, c in idx:
            key = tuple(v for k, v in enumerate((a, b, c)) if k != axis)
            sums[key] = sums.get(key, 0.0) + w[a][b][c]
        for key, total in sums.items():
            if not abs(total - 1.0) < 1e-6:
                return f"with dim={dim} the weights should sum to 1 along that axis, but one slice sums to {total:.6g}"
    return None


def _seq_case(g, big):
    dtype = pick_dtype(g)
    B, T, V = pick_int(g, 1, 4), pick_int(g, 1, 8 if big else 5), pick_int(g, 2, 12)
    logits = seeded_randn(g, B, T, V, dtype=dtype, scale=2.0)
    targets = torch.randint(0, V, (B, T), generator=g)
    kwargs, what = {}, ""
    if pick_int(g, 0, 1):
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        kwargs["mask"] = torch.arange(T)[None, :] < lengths[:, None]
        what = f", padded to lengths {lengths.tolist()}"
    return Case(f"B={B}, T={T}, V={V}{what}, {dn(dtype)}", (logits, targets), kwargs)


def _seq_edge():
    g = gen(33)
    V = 4
    return [
        Case("T = 1: just log P(x_1)", (seeded_randn(g, 2, 1, V), torch.tensor([[1], [3]]))),
        Case("uniform logits: T * log(1/V)", (torch.zeros(1, 5, V, dtype=F64), torch.tensor([[0, 1, 2, 3, 0]]))),
        Case("confident logits (1e3) stay finite", (torch.tensor([[[1e3, 0.0], [0.0, 1e3]]], dtype=F64),
                                                    torch.tensor([[1, 0]]))),
        Case("an all-padding row scores 0", (seeded_randn(g, 2, 3, V), torch.tensor([[1, 2, 3], [0, 0, 0]])),
             {"mask": torch.tensor([[True, True, False], [False, False, False]])}),
        Case("padding may hold any id, even -100", (seeded_randn(g, 1, 3, V), torch.tensor([[1, -100, -100]])),
             {"mask": torch.tensor([[True, False, False]])}),
        Case("padding may hold any id, even 999, outside the vocabulary",
             (seeded_randn(gen(36), 2, 3, V), torch.tensor([[1, 999, 999], [2, 3, 999]])),
             {"mask": torch.tensor([[True, False, False], [True, True, False]])}),
        Case("targets of the wrong shape are an error", (seeded_randn(g, 2, 3, V), torch.tensor([[1, 2], [0, 0]])),
             raises="ValueError"),
        Case("2-D logits (T, V), without the batch axis, are an error", (seeded_randn(gen(34), 3, V), torch.tensor([[1, 2, 0]])),
             raises="ValueError"),
        Case("float targets are an error: they must be torch.long ids", (seeded_randn(gen(35), 1, 3, V),
                                                                        torch.tensor([[1.0, 2.0, 0.0]])),
             raises="ValueError"),
        Case("a mask of another shape than targets is an error", (seeded_randn(gen(36), 2, 3, V), torch.tensor([[1, 2, 0],
                                                                                                      [0, 3, 1]])),
             {"mask": torch.ones(2, 2, dtype=torch.bool)}, raises="ValueError"),
    ]


register(
    __name__,
    Exercise("softmax", "softmax:softmax", _logits_case, _softmax_edge,
             conditioning=logit_scale,
             properties=[("edge", _rows_sum_to_one), ("hidden", _rows_sum_to_one)],
             mistakes=[("softmax:softmax_no_max_subtraction",
                        "exp() overflowed: subtract the maximum before exponentiating"),
                       ("softmax:softmax_wrong_axis", "the softmax ran over the wrong axis: use the `dim` argument"),
                       ("softmax:softmax_times_temperature",
                        "the logits were multiplied by the temperature; divide by it"),
                       ("softmax:softmax_ignores_temperature", "the temperature argument was ignored")]),
    Exercise("log_softmax", "softmax:log_softmax", _logits_case, _log_softmax_edge,
             conditioning=logit_scale,
             mistakes=[("softmax:log_softmax_as_log_of_softmax",
                        "log(softmax(x)) underflows to -inf for very unlikely entries; "
                        "compute z - max - log(sum(exp(z - max))) directly"),
                       ("softmax:softmax_wrong_axis",
                        "the normalisation ran over the wrong axis: use the `dim` argument"),
                       ("softmax:log_softmax_ignores_temperature", "the temperature argument was ignored"),
                       ("softmax:log_softmax_no_shift",
                        "exp() overflowed: the log of the sum of exponentials was taken without the shift; subtract "
                        "the maximum m inside the exponential, z - m - log(sum(exp(z - m)))"),
                       ("softmax:log_softmax_shift_outside_exp",
                        "the maximum m was subtracted outside the exponential but not inside it: log(sum(exp(z))) "
                        "is not log(sum(exp(z - m))); the formula is z - m - log(sum(exp(z - m)))")]),
    Exercise("sequence_log_prob", "softmax:sequence_log_prob", _seq_case, _seq_edge,
             conditioning=logit_sum_scale,
             mistakes=[("softmax:sequence_log_prob_ignores_mask", "padding positions were counted: use the mask"),
                       ("softmax:sequence_log_prob_gathers_padding",
                        "the mask kept the padding out of the sum, but the padding ids still went into gather, "
                        "which raises for an id outside [0, V) such as -100: replace them with a valid id first, "
                        "targets.masked_fill(~mask, 0)"),
                       *((f"softmax:{m}", "the log-probabilities were averaged; the chain rule sums them")
                         for m in ("sequence_log_prob_mean", "sequence_log_prob_mean_when_masked")),
                       ("softmax:sequence_log_prob_shifted",
                        "the targets are off by one position: logits[:, t] scores targets[:, t]")]),
    question("answer_temperature_top_probability", "softmax:answer_temperature_top_probability", Decimal(2), wrong=[
        ("softmax:answer_temperature_top_probability_tau_ignored",
         "0.67 is the largest probability at tau = 1: divide the logits by tau = 2 first"),
        ("softmax:answer_temperature_top_probability_tau_multiplied",
         "the logits were multiplied by tau; divide them by it (a higher temperature flattens the distribution)"),
        ("softmax:answer_temperature_top_probability_uniform",
         "1/3 is the limit as tau grows without bound; at tau = 2 the largest logit still gets the most")]),
    question("answer_why_log_probabilities", "softmax:answer_why_log_probabilities", Choice("a", "b", "c", "d"), wrong=[
        ("softmax:answer_why_log_probabilities_faster",
         "speed is not the reason: the trouble is the size of the number, which float32 rounds to 0"),
        ("softmax:answer_why_log_probabilities_positive", "a log-probability is at most 0: log(p) <= 0 for p <= 1"),
        ("softmax:answer_why_log_probabilities_exceeds_one",
         "a product of numbers in [0, 1] never exceeds 1: it shrinks, until floating point rounds it to 0")]),
)
