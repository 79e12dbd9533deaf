"""Where the checks run the learner's function: CPU always, CUDA when there is one."""
import os

from . import safe


def grading_devices():
    """CPU always; CUDA too when present or asked for with COURSE_DEVICE=cuda."""
    import torch
    want = os.environ.get("COURSE_DEVICE", "auto")
    devices = ["cpu"]
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("COURSE_DEVICE=cuda was asked for, but torch sees no CUDA device")
        devices.append("cuda")
    return devices


def gpu_fault(exc):
    """The first line of ``exc``'s message when it is a CUDA error after which this process cannot use the GPU
    again, else None.

    On the CPU an index past a table's end, or probabilities ``torch.multinomial`` cannot sample from, raise an
    ordinary error. On a GPU the same call trips an assertion inside the kernel ("device-side assert
    triggered"): it is reported asynchronously, at a later call, and every CUDA call of the process fails after it.
    """
    if exc is None:
        return None
    try:
        text = str(exc)
    except Exception:
        text = ""
    if not ("AcceleratorError" in [c.__name__ for c in type(exc).__mro__] or "CUDA error" in text
            or "device-side assert" in text):
        return None
    return next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)[:200]


GPU_FAULT = ("on the GPU it caused a CUDA error after which the process cannot use the GPU again ({what}). An index "
             "out of range (an embedding or gather with an id past the table's end) or probabilities that "
             "torch.multinomial cannot sample from (negative, NaN, or every one zero) are the usual causes; on the "
             "CPU the same call raises an error that says which")


def move(obj, device):
    """``obj`` with every tensor in it moved to ``device`` (tuples, lists and dicts rebuilt)."""
    if safe.is_tensor(obj):
        return safe.to(obj, device)
    if isinstance(obj, tuple):
        return tuple(move(o, device) for o in obj)
    if isinstance(obj, list):
        return [move(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: move(v, device) for k, v in obj.items()}
    return obj


def tensors(obj):
    """Every tensor in ``obj``, depth first."""
    if safe.is_tensor(obj):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from tensors(o)


def spare_dynamo():
    """Let PyTorch's eager kernels run without loading ``torch._dynamo`` (over a second of CPU per process).

    Many of PyTorch's Python kernels (the meta device's, which the device probe runs) are wrapped by
    ``torch._compile._disable_dynamo``: on its first call such a wrapper imports ``torch._dynamo`` only to build
    ``torch._dynamo.disable(fn)``, and caches that on ``fn.__dynamo_disable``. Outside ``torch.compile`` that
    disabled function does exactly what ``fn`` does, so this caches ``fn`` itself on every such wrapper that
    exists now; a wrapper made later, or a PyTorch laid out otherwise, takes PyTorch's own path. A sandboxed worker
    starts once per submission, so this is paid back on every submission graded. Returns how many were cached.
    """
    import gc
    import types
    try:
        import torch._compile
        codes = {c for c in torch._compile._disable_dynamo.__code__.co_consts
                 if isinstance(c, types.CodeType) and "fn" in c.co_freevars}
    except Exception:
        return 0
    cached = 0
    for obj in gc.get_objects():
        if type(obj) is types.FunctionType and obj.__code__ in codes:
            try:
                fn = obj.__closure__[obj.__code__.co_freevars.index("fn")].cell_contents
                if getattr(fn, "__dynamo_disable", None) is None:
                    fn.__dynamo_disable = fn
                    cached += 1
            except (AttributeError, TypeError, ValueError):
                continue
    return cached
