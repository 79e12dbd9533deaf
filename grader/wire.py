"""What crosses the sandbox's boundary, and how: plain data in length-prefixed frames.

Both sides write ``torch.save`` frames and read them with ``torch.load(...,
weights_only=True)``, which builds nothing but tensors and plain Python data.
``check_plain`` then checks the exact types, so an object whose operators lie (a
``float`` subclass, a tensor subclass) never reaches a comparison: it is a
failure in words.

Grader-owned callables that a case hands to a learner function (notebook 09's
recording model) do not cross at all: ``Callback`` markers stand in for them
and every call comes back to the trusted side, which runs and records it.
"""
import io
import struct

import torch

_HEADER = struct.Struct("<Q")
MAX_FRAME = 1 << 31  # 2 GiB: a reply larger than this is refused


class NotPlain(TypeError):
    """A value that is not plain data (see ``check_plain``)."""


def write_frame(stream, obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_exact(stream, n):
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(source):
    """One frame: the one reader of this boundary, on both sides. ``source`` is a stream (the worker reads its stdin)
    or a function that returns exactly n bytes (the trusted side reads with a deadline, ``grader.remote``)."""
    read = source if callable(source) else (lambda n: read_exact(source, n))
    (n,) = _HEADER.unpack(read(_HEADER.size))
    if n > MAX_FRAME:
        raise NotPlain(f"a reply of {n} bytes is larger than the grader accepts")
    return torch.load(io.BytesIO(read(n)), weights_only=True)


_SCALARS = (int, float, bool, str, bytes, type(None), complex, torch.dtype, torch.device)


def check_plain(obj, where="the output", depth=0):
    """``obj`` if it is plain data: tensors of the built-in type, Python numbers, str, bool,
    None, dtypes, and tuples, lists and dicts of them. Raises NotPlain naming what is not."""
    if depth > 64:
        raise NotPlain(f"{where} is nested more than 64 levels deep")
    kind = type(obj)
    if kind is torch.Tensor:
        return obj
    if kind in _SCALARS:
        return obj
    if kind in (tuple, list):
        return kind(check_plain(o, f"{where}[{i}]", depth + 1) for i, o in enumerate(obj))
    if kind is dict:
        out = {}
        for k, v in obj.items():
            if type(k) not in (str, int, bool, type(None), float, tuple):
                raise NotPlain(f"{where} has a key of type {type(k).__name__}")
            out[k] = check_plain(v, f"{where}[{k!r}]", depth + 1)
        return out
    base = next((b.__name__ for b in kind.__mro__[1:] if b in (torch.Tensor, *_SCALARS, tuple, list, dict)), None)
    if base:
        raise NotPlain(f"{where} is a {kind.__name__}, a subclass of {base}: return a plain {base} "
                       f"(the grader accepts only built-in types, so that no object can change how it is compared)")
    raise NotPlain(f"{where} is a {kind.__name__}: return tensors, Python numbers, str, bool, None, or tuples, "
                   f"lists and dicts of them")


def callback_marker(index):
    return {"__course_callback__": index}


def callback_index(obj):
    if type(obj) is dict and len(obj) == 1 and type(obj.get("__course_callback__")) is int:
        return obj["__course_callback__"]
    return None
