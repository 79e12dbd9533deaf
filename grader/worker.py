"""The learner's side of the boundary: holds a student's functions, inside the sandbox.

The trusted side (``grader.remote``) starts ``python -I -m grader.worker`` in the
sandbox (``grader.sandbox``) and talks to it over its stdin and stdout in
``grader.wire`` frames:

* ``{"op": "define", "prelude": ..., "cells": [...]}``: run the notebook's
  read-only set-up cell, then the student's cells reduced to their definitions
  (``definitions``); the reply names the functions defined.
* ``{"op": "call", "id": n, "function": ..., "exercise": ..., "args": ..., "kwargs": ...}``:
  call one of them on fresh copies of the inputs, under the course's guarded
  call (time limit, printed text and warnings kept, calls of the course's
  ready-made version of the exercise noticed), and reply with the value as
  plain data, or the error in words. A grader-owned callable among the inputs
  arrives as a marker, and each call of it goes back to the trusted side as
  ``{"op": "callback", ...}``.

Nothing here decides a grade: the trusted side compares, and distrusts what
comes back (``wire.check_plain``). This process has no reference to compare with.
"""
import os
import sys

from learner.definitions import ALLOWED_DECORATORS, BLOCKED_MODULES, definitions  # noqa: F401  (the rule, there)


# ------------------------------------------------------------------ the loop
class _Channel:
    def __init__(self, rx, tx):
        self.rx, self.tx = rx, tx

    def send(self, obj):
        from grader import wire
        wire.write_frame(self.tx, obj)

    def receive(self):
        from grader import wire
        return wire.read_frame(self.rx)


class _Callback:
    """Stands in for a grader-owned callable: each call is made on the trusted side."""

    def __init__(self, channel, call_id, index):
        self._channel, self._call_id, self._index = channel, call_id, index

    def __call__(self, *args, **kwargs):
        from grader import wire
        from learner.check import safe
        message = {"op": "callback", "id": self._call_id, "index": self._index,
                   "args": wire.check_plain(args, "the arguments"), "kwargs": wire.check_plain(kwargs, "the arguments")}
        with safe.away():  # the trusted side's time, not this call's
            self._channel.send(message)
            reply = self._channel.receive()
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["value"]

    def __repr__(self):
        return "<the grader's model>"


def _unmark(obj, channel, call_id):
    from grader import wire
    index = wire.callback_index(obj)
    if index is not None:
        return _Callback(channel, call_id, index)
    if type(obj) in (tuple, list):
        return type(obj)(_unmark(o, channel, call_id) for o in obj)
    if type(obj) is dict:
        return {k: _unmark(v, channel, call_id) for k, v in obj.items()}
    return obj


def _outgoing(value):
    """Tensors detached (a Parameter becomes a plain tensor), torch.Size a tuple; then plain or NotPlain."""
    import torch

    from grader import wire
    from learner.check import safe

    def norm(v):
        if isinstance(v, torch.Size):
            return tuple(v)
        if isinstance(v, torch.nn.Parameter):
            return safe.detach(v)
        if type(v) is torch.Tensor and v.requires_grad:
            return safe.detach(v)
        if type(v) in (tuple, list):
            return type(v)(norm(o) for o in v)
        if type(v) is dict:
            return {k: norm(o) for k, o in v.items()}
        return v
    return wire.check_plain(norm(value))


def _describe(exc):
    from learner.check import messages
    try:
        message = str(exc)
    except Exception:
        message = "(its message could not be read)"
    try:
        where = messages.where_raised(exc)
    except Exception:
        where = ""
    return {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__], "message": message[:2000],
            "where": where}


def _define(namespace, msg):
    namespace.clear()
    namespace["__name__"] = "__main__"
    errors = []
    try:
        exec(msg.get("prelude") or "import math\nimport torch\nimport torch.nn.functional as F\n", namespace)
    except BaseException as exc:  # the course's own set-up cell: a failure here is the grader's to see
        errors.append(f"set-up cell: {type(exc).__name__}: {exc}")
    prelude_names = set(namespace)
    for i, source in enumerate(msg["cells"]):
        module, _ = definitions(source)
        try:
            exec(compile(module, f"<student cell {i}>", "exec"), namespace)
        except BaseException as exc:  # a definition that fails here failed in the kernel too
            errors.append(f"cell {i}: {type(exc).__name__}: {exc}")
    defined = sorted(k for k, v in namespace.items()
                     if k not in prelude_names and callable(v) and type(v).__name__ == "function")
    return {"op": "defined", "defined": defined, "errors": errors}


def _call(namespace, msg, channel):
    import learner.check
    from learner.check import safe
    from learner.check.given import capture_given
    call_id = msg["id"]
    reply = {"op": "result", "id": call_id}
    fn = namespace.get(msg["function"])
    if not callable(fn):
        reply["error"] = {"type": "NameError", "mro": ["NameError", "Exception", "BaseException", "object"],
                          "message": f"`{msg['function']}` is not defined by a `def` in your cells", "where": ""}
        return reply
    args = _unmark(msg["args"], channel, call_id)
    kwargs = _unmark(msg["kwargs"], channel, call_id)
    given = capture_given(msg["exercise"]) if msg.get("exercise") in learner.check.EXERCISES else {}
    if not _warmed and _on_meta(args, kwargs):
        warm_up()
    try:
        with safe.forbid_given(given):
            out = safe.call(fn, args, kwargs, time_limit=msg.get("time_limit"), measure=bool(msg.get("measure")))
    except BaseException as exc:  # SystemExit, KeyboardInterrupt: the learner's, reported like any error
        out = safe.Outcome()
        out.error = exc
    reply.update(timed_out=out.timed_out, printed=(out.printed or "")[:4000], warnings=list(out.warnings)[:5],
                 called=out.called_reference, cpu_s=float(out.cpu_s), wall_s=float(out.wall_s), waited=out.waited,
                 rng_changed=out.rng_changed, largest=out.largest)
    if out.timed_out:
        from learner.check import messages
        try:
            reply["stopped_in"] = messages.stopped_in(out.stop)[:300]
        except Exception:
            reply["stopped_in"] = ""
    if out.error is not None:
        reply["error"] = _describe(out.error)
    elif not out.timed_out:
        try:
            reply["value"] = _outgoing(out.value)
        except Exception as exc:
            reply["not_plain"] = str(exc)
    return reply


_warmed = []


def _on_meta(args, kwargs):
    """Whether a call is the grader's device probe: inputs on PyTorch's meta device, or ``device="meta"``."""
    from learner.check.devices import tensors
    return str(kwargs.get("device")) == "meta" or any(t.device.type == "meta" for t in tensors((args, kwargs)))


def warm_up():
    """Load now what PyTorch loads on a first call on the meta device, so that no student's call is charged for it.

    The meta device's Python kernels import sympy on their first call (and ``torch._dynamo``, over a second more,
    which ``devices.spare_dynamo`` spares this worker): inside a call under a short time limit (the tamper class's
    2 s) an honest function was stopped for such imports when the machine was busy. It is loaded here, outside the
    time limit, when the first call on the meta device arrives (the device probe, after the hidden cases), so a
    worker whose functions never get that far (a stub, a function that fails, a worker started again after a
    crash) never pays for it.
    """
    import torch
    import torch.nn.functional as F
    x = torch.empty(2, 3, device="meta")
    torch.cat([x, x])
    F.layer_norm(x, (3,))
    torch.softmax(x.masked_fill(torch.ones(2, 3, dtype=torch.bool, device="meta"), 0.0), dim=-1)
    _warmed.append(True)


def main():
    # the channel keeps private copies of the pipes; fds 0 and 1 point at /dev/null before any
    # student code exists, so a stray print or os.write cannot garble a reply
    rx = os.fdopen(os.dup(0), "rb")
    tx = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    sys.stdin = open(os.devnull)
    sys.stdout = open(os.devnull, "w")
    sys.path[:] = [p for p in sys.path if p not in ("", ".", os.getcwd())]
    import learner.check  # noqa: F401  (its primitives captured before any student code exists, and before the hook)
    from grader import audit
    audit.install()

    import torch
    threads = os.environ.get("COURSE_TORCH_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    from grader import wire  # noqa: F401
    from learner.check import devices  # noqa: F401
    devices.spare_dynamo()

    channel = _Channel(rx, tx)
    namespace = {}
    while True:
        try:
            msg = channel.receive()
        except EOFError:
            return
        op = msg.get("op")
        if op == "define":
            reply = _define(namespace, msg)
        elif op == "call":
            reply = _call(namespace, msg, channel)
        else:
            reply = {"op": "error", "message": f"unknown request {op!r}"}
        try:
            channel.send(reply)
        except Exception as exc:  # a value torch.save cannot write
            channel.send({"op": "result", "id": msg.get("id"), "not_plain": f"the output could not be sent: {exc}"})


if __name__ == "__main__":
    main()
