"""Where the grader runs the learner's function: CPU always, CUDA when there is one."""
import os

from . import _safe


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


def move(obj, device):
    """``obj`` with every tensor in it moved to ``device`` (tuples, lists and dicts rebuilt)."""
    if _safe.is_tensor(obj):
        return _safe.to(obj, device)
    if isinstance(obj, tuple):
        return tuple(move(o, device) for o in obj)
    if isinstance(obj, list):
        return [move(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: move(v, device) for k, v in obj.items()}
    return obj


def tensors(obj):
    """Every tensor in ``obj``, depth first."""
    if _safe.is_tensor(obj):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            yield from tensors(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from tensors(o)
