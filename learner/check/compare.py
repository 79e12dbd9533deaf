"""Compare a learner's output with the expected one, in words.

Only primitives captured in ``safe`` and plain Python arithmetic are used, so a
learner who replaces ``torch.allclose`` or ``Tensor.__eq__`` changes nothing here.
"""
from . import safe

# (rtol, atol) by dtype: loose enough for any correct order of summation.
TOLERANCES = {
    "torch.float64": (1e-7, 1e-9),
    "torch.float32": (2e-4, 2e-5),
    "torch.float16": (1e-2, 1e-3),
    "torch.bfloat16": (2e-2, 1e-2),
}


class Mismatch:
    """Why an output is wrong: ``kind`` is one of type, length, keys, shape, dtype,
    device, nan, value, and ``text`` says it in plain words."""

    def __init__(self, kind, text, wrong_fraction=None):
        self.kind, self.text, self.wrong_fraction = kind, text, wrong_fraction

    def __repr__(self):
        return f"Mismatch({self.kind!r}, {self.text!r})"


def _fmt(x):
    if isinstance(x, float):
        return f"{x:.6g}"
    return repr(x)


def _index(flat_i, shape):
    idx = []
    for size in reversed(shape):
        idx.append(flat_i % size if size else 0)
        flat_i //= size if size else 1
    return tuple(reversed(idx))


def flatten(values):
    if not isinstance(values, list):
        return [values]
    out = []

    def rec(v):  # row-major order
        if isinstance(v, list):
            for item in v:
                rec(item)
        else:
            out.append(v)
    rec(values)
    return out


def _describe_tensor(t):
    return f"tensor of shape {tuple(t.shape)}, dtype {str(t.dtype).replace('torch.', '')}, device {t.device}"


def dtype_rule(expected):
    """Why the expected tensor has its dtype, in words: a mask is bool and ids are whole numbers whatever the inputs;
    a floating result keeps the inputs' dtype."""
    if expected.dtype == safe.bool_:
        return ("a mask must be torch.bool, whatever the dtype of the inputs: build it with a comparison or with "
                "dtype=torch.bool, and do not turn it into numbers with .long(), .int() or .float()")
    if not (expected.dtype.is_floating_point or expected.dtype.is_complex):
        return (f"this result must be {expected.dtype}, whatever the dtype of the inputs: create it with "
                f"dtype={expected.dtype}")
    return ("the result should keep the dtype of the inputs; a tensor created without dtype=... or a "
            ".float()/.double() call changes it")


def compare(expected, got, name="output", check_device=True, input_scale=0.0):
    """Return None when ``got`` matches ``expected``, else a ``Mismatch``.

    ``input_scale`` is the size of the inputs the output was computed from, for
    computations whose rounding error grows with it (log-softmax of logits near
    1e4 is exact only to about eps x 1e4): floating-point values may then also
    differ by ``4 eps(dtype) x input_scale``, so that every standard formulation
    passes.
    """
    if safe.is_tensor(expected):
        return _compare_tensor(expected, got, name, check_device, input_scale)
    if isinstance(expected, (tuple, list)):
        if not isinstance(got, (tuple, list)):
            return Mismatch("type", f"{name} should be a {type(expected).__name__} of {len(expected)} items, "
                                    f"got {type(got).__name__}")
        if len(got) != len(expected):
            return Mismatch("length", f"{name} should have {len(expected)} items, got {len(got)}")
        for i, (e, g) in enumerate(zip(expected, got)):
            m = compare(e, g, f"{name}[{i}]", check_device, input_scale)
            if m is not None:
                return m
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return Mismatch("type", f"{name} should be a dict, got {type(got).__name__}")
        missing = [k for k in expected if k not in got]
        extra = [k for k in got if k not in expected]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing keys {missing[:5]}" + (" ..." if len(missing) > 5 else ""))
            if extra:
                parts.append(f"unexpected keys {extra[:5]}" + (" ..." if len(extra) > 5 else ""))
            return Mismatch("keys", f"{name}: " + "; ".join(parts))
        for k in expected:
            m = compare(expected[k], got[k], f"{name}[{k!r}]", check_device, input_scale)
            if m is not None:
                return m
        return None
    if isinstance(expected, float):
        if safe.is_tensor(got) or not isinstance(got, (int, float)) or isinstance(got, bool):
            return Mismatch("type", f"{name} should be a Python float, got {type(got).__name__}")
        if not _close(expected, float(got), 1e-7, 1e-9):
            return Mismatch("value", f"{name}: expected {_fmt(expected)}, got {_fmt(float(got))}")
        return None
    # ints, strings, bools, None: exact, and of the same type
    if type(got) is not type(expected):
        return Mismatch("type", f"{name} should be a {type(expected).__name__} like {_fmt(expected)}, "
                                f"got {type(got).__name__} {_fmt(got)[:80]}")
    if got != expected:
        return Mismatch("value", f"{name}: expected {_fmt(expected)[:200]}, got {_fmt(got)[:200]}")
    return None


def _close(e, g, rtol, atol):
    if e != e:  # NaN expected
        return g != g
    if e == g:  # equal infinities included
        return True
    if not (safe.isfinite(e) and safe.isfinite(g)):
        return False
    d = e - g if e > g else g - e
    ae = e if e > 0 else -e
    return d <= atol + rtol * ae


def _compare_tensor(expected, got, name, check_device, input_scale=0.0):
    if type(got) is not safe.Tensor:
        kind = type(got).__name__
        if safe.is_tensor(got):
            return Mismatch("type", f"{name} should be a plain torch.Tensor, got a subclass {kind}")
        hint = ""
        if isinstance(got, (tuple, list)):
            hint = f" (a {kind} of {len(got)} items: did you return more than asked for?)"
        return Mismatch("type", f"{name} should be a {_describe_tensor(expected)}; got {kind}{hint}")
    if tuple(got.shape) != tuple(expected.shape):
        hint = ""
        if got.dim() >= 2 and tuple(got.shape[:-2]) + (got.shape[-1], got.shape[-2]) == tuple(expected.shape):
            hint = " Its last two axes are swapped: check which axis is queries and which is keys."
        return Mismatch("shape", f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}.{hint}")
    if got.dtype != expected.dtype:
        return Mismatch("dtype", f"{name} has dtype {got.dtype}, expected {expected.dtype} ({dtype_rule(expected)})")
    if check_device and got.device != expected.device:
        return Mismatch("device", f"{name} is on device {got.device}, expected {expected.device}: a tensor created "
                                  f"inside your function needs device=<input>.device")
    if got.device.type == "meta":
        return None
    e_vals = flatten(safe.tolist(safe.to(safe.detach(expected), "cpu")))
    g_vals = flatten(safe.tolist(safe.to(safe.detach(got), "cpu")))
    shape = tuple(expected.shape)
    if expected.dtype.is_floating_point:
        rtol, atol = TOLERANCES.get(str(expected.dtype), (1e-5, 1e-8))
        if input_scale:
            atol = atol + 4 * safe.finfo(expected.dtype).eps * input_scale
        first, n_wrong, n_nan = None, 0, 0
        for i, (e, g) in enumerate(zip(e_vals, g_vals)):
            if not _close(e, g, rtol, atol):
                n_wrong += 1
                if g != g:
                    n_nan += 1
                if first is None:
                    first = i
        if first is None:
            return None
        idx = _index(first, shape)
        where = f"{name}[{', '.join(map(str, idx))}]"
        if n_nan:
            return Mismatch("nan", f"{name} contains NaN at {n_nan} of {len(e_vals)} positions (first at {where}, "
                                   f"where {_fmt(e_vals[first])} was expected). NaN usually comes from exp() of a huge "
                                   f"number, from inf - inf, or from 0/0 when every entry of a row is masked.",
                            n_wrong / max(1, len(e_vals)))
        return Mismatch("value", f"first wrong value at {where}: expected {_fmt(e_vals[first])}, got "
                                 f"{_fmt(g_vals[first])}; {n_wrong} of {len(e_vals)} values are wrong "
                                 f"(tolerance {atol:g} + {rtol:g} x |expected|)", n_wrong / max(1, len(e_vals)))
    for i, (e, g) in enumerate(zip(e_vals, g_vals)):
        if e != g:
            n_wrong = sum(1 for a, b in zip(e_vals, g_vals) if a != b)
            idx = _index(i, shape)
            return Mismatch("value", f"first wrong value at {name}[{', '.join(map(str, idx))}]: expected {e!r}, "
                                     f"got {g!r}; {n_wrong} of {len(e_vals)} values are wrong",
                            n_wrong / max(1, len(e_vals)))
    return None


def same(a, b):
    """True when two outputs agree within tolerance (used to recognise known mistakes)."""
    try:
        return compare(a, b, check_device=False) is None
    except Exception:
        return False
