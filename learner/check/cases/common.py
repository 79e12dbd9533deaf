"""What every notebook's case module is built from: Case, Exercise, the registry, and the shared helpers.

A case module (``learner/check/cases/<topic>.py``, one per notebook of ``learner/syllabus.py``)
makes its cases from seeded generators with the helpers here, without the
reference, and ends with ``register(__name__, Exercise(...), ...)``. The visible
parts ("basic", "edge") are computed once from the reference and shipped in
``learner/check/expected/`` so a learner's machine needs no ``solutions`` package; the
hidden parts draw fresh cases and run the live reference on the grading machine.

A property check calls the learner's function through ``learner_call`` /
``learner_tensor``: when the call fails or returns something of the wrong kind
the property gives up (returns None), because the case checks already report it.
"""
import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable

import torch

from .. import safe
from ...syllabus import TOPICS

F64, F32 = torch.float64, torch.float32
INF = float("inf")


@dataclass
class Case:
    """One call of the exercise function: ``fn(*args, **kwargs)``.

    ``what`` describes it for a person; ``raises`` names the exception class a
    correct function must raise (the reference raises it too).
    """
    what: str
    args: tuple
    kwargs: dict = field(default_factory=dict)
    raises: str | None = None


@dataclass
class Exercise:
    name: str
    ref: str                                   # "module:function" inside the solutions package
    random_case: Callable | None = None        # (generator, big: bool) -> Case
    edge: Callable[[], list] = lambda: []      # fixed cases from the notes
    properties: list = field(default_factory=list)   # (part, callable(fn) -> message | None)
    mistakes: list = field(default_factory=list)     # ("<topic>:<function>" in solutions.mistakes, explanation)
    n_basic: int = 8
    n_hidden: int = 24
    tensor_inputs: bool = True                 # also probe the hidden part on the meta device (wrong-device tensors)
    uses: tuple = ()                           # other exercises the learner's function calls (named in failures)
    conditioning: Callable | None = None       # (args, kwargs) -> size of the inputs the rounding error scales with
    answer: "Answer | None" = None             # a self-check question: the kind of literal it returns (see question)
    own_random: bool = False                   # draws only from a generator of its own: a call that changes PyTorch's
    #                                            global random state (torch.manual_seed) fails its case
    matches_to_name: int = 1                   # failing cases a known mistake must match to be named: 3 where the
    #                                            output is one coarse number (an accuracy over 7 sentences is k / 7,
    #                                            and another slip's k / 7 is the same one case in a few)
    # from the course table (learner/syllabus.py), filled in by register:
    notebook: str = field(default="", init=False)   # the notebook's folder, "03_softmax"
    given: tuple = field(default=(), init=False)    # "module:function" ready-made versions learners must not call


# ---------------------------------------------------------------- self-check questions
class NotAnAnswer(ValueError):
    """A question's function returned something that is not an answer of its kind."""


class Answer:
    """The kind of literal a question's answer is. ``canonical(value)`` writes an answer as the one text that is
    compared (and hashed); a value of another kind raises ``NotAnAnswer`` saying what was expected."""
    expects = "a value"

    def canonical(self, value):
        raise NotImplementedError

    def refuse(self, value):
        shown = repr(value)[:60] if type(value) in (str, int, float, tuple, list) else type(value).__name__
        raise NotAnAnswer(f"return {self.expects}, not {shown}")


def _number(value):
    """A Python number from an int, a float or a one-element tensor (a learner may compute with torch); else None."""
    if type(value) is safe.Tensor and value.numel() == 1 and value.device.type != "meta":
        value = safe.tolist(safe.to(safe.detach(value), "cpu").flatten())[0]
    return value if type(value) in (int, float) else None


class Choice(Answer):
    """One of a few letters: "a", "b", ... (case, spaces and parentheses do not matter: "B", "(b)", " b ")."""

    def __init__(self, *letters):
        self.letters = letters
        self.expects = "one of " + ", ".join(f'"{c}"' for c in letters) + " (a str)"

    def canonical(self, value):
        letter = value.strip().strip("()").strip().lower() if type(value) is str else None
        if letter in self.letters:
            return letter
        self.refuse(value)


class Integer(Answer):
    """A whole number: an int, or a float or a one-element tensor holding one (15, 15.0, torch.tensor(15))."""
    expects = "a whole number (an int)"

    def canonical(self, value):
        number = _number(value)
        if number is not None and math.isfinite(number) and float(number).is_integer():
            return str(int(number))
        self.refuse(value)


class Decimal(Answer):
    """A number, compared to ``digits`` decimal places (0.5065 and 0.51 are the same answer at 2 places)."""

    def __init__(self, digits):
        self.digits = digits
        self.expects = f"a number (it is compared to {digits} decimal places)"

    def canonical(self, value):
        number = _number(value)
        if number is not None and math.isfinite(number):
            return f"{float(number):.{self.digits}f}"
        self.refuse(value)


class IntTuple(Answer):
    """A tuple of whole numbers, such as a shape: (2, 4, 5, 7); a list or a torch.Size is the same answer."""
    expects = "a tuple of whole numbers, such as (2, 3)"

    def canonical(self, value):
        if type(value) in (tuple, list, torch.Size) and all(type(v) is int for v in value):
            return "(" + ", ".join(str(v) for v in value) + ")"
        self.refuse(value)


ANSWER_SALT = "attention-course self-check v1"


def answer_digest(name, text):
    """The salted SHA-256 of question ``name``'s answer written canonically: what ships instead of the answer, so
    that a learner's check says right or wrong while the answer is not readable in the course's files."""
    return hashlib.sha256(f"{ANSWER_SALT}|{name}|{text}".encode()).hexdigest()


def question(name, ref, answer, wrong=()):
    """A self-check question as an exercise: the learner's function ``name()`` returns a literal of kind ``answer``
    (an ``Answer``); ``ref`` returns the right one, and each known wrong answer is a function of
    ``solutions/mistakes/<topic>.py`` returning it, named with what it misunderstands (``wrong``: (mistake,
    explanation) pairs). Only salted digests of the answers ship (``answer_digest``)."""
    return Exercise(name, ref, lambda g, big: Case("your answer", ()), mistakes=list(wrong), n_basic=1, n_hidden=1,
                    tensor_inputs=False, answer=answer)


def digest_of(ex, value):
    """What is compared for ``ex``: the salted digest of a question's answer (``NotAnAnswer`` for a value of the
    wrong kind), the value itself for every other exercise."""
    return answer_digest(ex.name, ex.answer.canonical(value)) if ex.answer is not None else value


# ---------------------------------------------------------------- the registry
EXERCISES = {}     # name -> Exercise, in course order
SAFE_GLOBALS = []  # classes (beyond tensors and plain data) that shipped expectations may hold (allow_in_shipped)


def allow_in_shipped(*classes):
    """Let shipped expectations hold ``classes`` (a case module's own toy models): the one way a case module adds to
    ``SAFE_GLOBALS``."""
    SAFE_GLOBALS.extend(c for c in classes if c not in SAFE_GLOBALS)


def register(module, *exercises):
    """Add the exercises of one notebook; its case module ``module`` (pass ``__name__``) ends with this call.

    The exercises (and questions) must be the table's (``learner/syllabus.py``), registered in its order, and
    their known mistakes must live in ``solutions/mistakes/<topic>.py``.
    """
    topic = module.rsplit(".", 1)[-1]
    nb = TOPICS[topic]
    names = [ex.name for ex in exercises]
    if sorted(names) != sorted(nb.exercises) or len(set(names)) != len(names):
        raise ValueError(f"learner/check/cases/{topic}.py registers {names}; learner/syllabus.py lists {list(nb.exercises)}")
    for ex in sorted(exercises, key=lambda ex: list(nb.exercises).index(ex.name)):  # in the table's order
        if ex.name in EXERCISES:
            raise ValueError(f"exercise {ex.name!r} is registered twice")
        wrong = [m for m, _ in ex.mistakes if not m.startswith(topic + ":")]
        if wrong:
            raise ValueError(f"the known mistakes of {ex.name} are named '{topic}:<function>' "
                             f"(solutions/mistakes/{topic}.py), not {wrong}")
        ex.notebook = nb.folder
        ex.given = tuple(nb.given.get(ex.name, ()))
        EXERCISES[ex.name] = ex


def visible_cases(ex, part):
    """The cases of a visible part, made from fixed seeds: ``basic`` (seeded random cases), ``edge`` (the fixed
    cases that must compute a value) or ``errors`` (the fixed cases of bad input, which must raise)."""
    if part == "basic":
        g = gen(1000 + sum(map(ord, ex.name)))
        return [ex.random_case(g, False) for _ in range(ex.n_basic)] if ex.random_case else []
    if part == "edge":
        return [c for c in ex.edge() if not c.raises]
    if part == "errors":
        return [c for c in ex.edge() if c.raises]
    raise ValueError(f"unknown visible part {part!r}")


# One graded test cell per kind: its visible part, then its hidden part. The maths (basic, edge) and the
# validation of bad input (errors) score apart.
CELLS = {"basic": ("basic", "hidden-basic"), "edge": ("edge", "hidden"), "errors": ("errors", "hidden-errors")}


def graded_cells(ex):
    """The graded cells ``ex`` has: ``basic`` always; ``edge`` when it has fixed cases that compute a value or an
    edge property; ``errors`` when some input must be refused with an error."""
    fixed = ex.edge()
    cells = ["basic"]
    if any(not c.raises for c in fixed) or any(part == "edge" for part, _ in ex.properties):
        cells.append("edge")
    if any(c.raises for c in fixed):
        cells.append("errors")
    return cells


def hidden_cases(ex, seed, big=True, n=None):
    """Fresh random cases for the hidden parts (larger ones unless ``big`` is False)."""
    g = gen(seed)
    return [ex.random_case(g, big) for _ in range(ex.n_hidden if n is None else n)] if ex.random_case else []


# ---------------------------------------------------------------- rounding: how large the inputs are
def logit_scale(args, kwargs):
    """The largest finite |logit| / temperature: log-softmax and friends are exact only to about eps times it."""
    x = args[0] if args else kwargs.get("x", kwargs.get("logits"))
    if not safe.is_tensor(x) or not x.is_floating_point() or x.device.type == "meta" or x.numel() == 0:
        return 0.0
    values = [abs(v) for v in safe.tolist(safe.to(safe.detach(x), "cpu", safe.float64).flatten())
              if safe.isfinite(v)]
    temperature = kwargs.get("temperature", args[2] if len(args) > 2 else 1.0)
    try:
        temperature = float(temperature)
    except (TypeError, ValueError):
        temperature = 1.0
    return max(values, default=0.0) / (temperature if temperature > 0 else 1.0)


def logit_sum_scale(args, kwargs):
    """``logit_scale`` times the number of positions: for log-probabilities summed over a sequence."""
    x = args[0] if args else kwargs.get("logits")
    rows = max(1, x.numel() // max(1, x.shape[-1])) if hasattr(x, "numel") and x.dim() else 1
    return logit_scale(args, kwargs) * rows


# ---------------------------------------------------------------- seeded random inputs
def gen(seed):
    return torch.Generator().manual_seed(seed)


def pick_int(g, lo, hi):
    """Uniform int in [lo, hi]."""
    return int(torch.randint(lo, hi + 1, (1,), generator=g))


def seeded_randn(g, *shape, dtype=F64, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=F64) * scale).to(dtype)


def pick_dtype(g):
    return F64 if pick_int(g, 0, 1) else F32


def dn(dtype):
    """A dtype's name for a case's description: "float64"."""
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------- calling the learner in a property
def stub_message(fn_name):
    """What a learner reads when ``fn_name`` is still the released stub."""
    return (f"`{fn_name}` is not implemented yet: it still raises NotImplementedError. Replace the "
            f"`raise NotImplementedError()` line in the exercise cell with your code.")


# what a case of an exercise that draws from its own generator (Exercise.own_random) says of a call that changed
# PyTorch's global random state
RANDOM_STATE = ("it changed PyTorch's global random state (torch.manual_seed, or a random call without generator=): "
                "the caller's next random numbers are then not the ones they would have been. Draw only from a "
                "generator of your own, seeded with `seed` and passed as generator=g")


# How many times a check gave up on the learner's function (it raised, ran out of time or returned no usable tensor):
# a property check that gave up has checked nothing, so it is not counted as passed (learner.check.runner.run_properties).
GAVE_UP = [0]


def learner_call(fn, args, kwargs=None):
    """The outcome of ``fn(*args, **kwargs)`` (a ``safe.Outcome``), or None when it raised or ran out of time.

    None means: give up, the case checks report what went wrong.
    """
    out = safe.call(fn, args, kwargs or {})
    if out.error is not None or out.timed_out:
        GAVE_UP[0] += 1
        return None
    return out


def tensor_in(value, item=None, shape=None, dim=None):
    """``value`` (or ``value[item]`` of a returned pair) when it is a plain tensor of that shape / number of axes;
    else None."""
    if item is not None:
        if not (isinstance(value, tuple) and len(value) == 2):
            return None
        value = value[item]
    if type(value) is not safe.Tensor:
        return None
    if shape is not None and tuple(value.shape) != tuple(shape):
        return None
    if dim is not None and value.dim() != dim:
        return None
    return value


def learner_tensor(fn, args, kwargs=None, item=None, shape=None, dim=None):
    """Call the learner's ``fn``; the tensor it returned (see ``tensor_in``), or None to give up."""
    out = learner_call(fn, args, kwargs)
    if out is None:
        return None
    value = tensor_in(out.value, item, shape, dim)
    if value is None:
        GAVE_UP[0] += 1
    return value


def nested(t):
    """A learner's tensor as nested Python lists, through the checks' captured primitives."""
    return safe.tolist(safe.to(safe.detach(t), "cpu"))


# ---------------------------------------------------------------- causal: no future leak
CAUSAL_LESSON = "query i may attend to key j only if j <= i"
# a mask read the other way round (nn.MultiheadAttention's polarity), said the same way by every exercise that takes
# or builds a boolean mask
REVERSED_LESSON = ("the mask's polarity is reversed: True was taken for 'blocked' (nn.MultiheadAttention's "
                   "convention, mask passed as ~mask), so exactly the allowed pairs were blocked. In this course True "
                   "means 'may attend' ({fix})")


def leak_message(i, j, what):
    return (f"the future leaks: the output at position i={i} changed when {what} at j={j} (a later position) "
            f"changed. With the causal mask, position i may only depend on positions j <= i.")


def no_future_leak(fn, args, x_index, T, first_of_tuple, what="the input", kwargs=None):
    """Perturb position j of args[x_index] for j = T-1 .. 1; rows i < j of the output must not move.

    ``x_index`` is one index into ``args`` or a tuple of them (all perturbed together);
    ``first_of_tuple``: the output is the first of a returned pair (out, weights).
    Returns the message naming the leaking pair (i, j), or None.
    """
    kwargs = kwargs or {}
    indices = x_index if isinstance(x_index, tuple) else (x_index,)
    item = 0 if first_of_tuple else None

    def output(call_args):
        out = learner_tensor(fn, call_args, kwargs, item=item, dim=3)
        return None if out is None or out.shape[1] != T else nested(out)

    out0 = output(args)
    if out0 is None:
        return None  # reported by the case checks
    for j in range(T - 1, 0, -1):
        moved_args = list(args)
        for k in indices:
            x = safe.clone(args[k])
            x[:, j] += 3.0
            moved_args[k] = x
        out1 = output(tuple(moved_args))
        if out1 is None:
            return None
        for b in range(len(out0)):
            for i in range(j):
                if any(abs(u - w) > 1e-9 * (1 + abs(u)) for u, w in zip(out0[b][i], out1[b][i])):
                    return leak_message(i, j, what)
    return None
