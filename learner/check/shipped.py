"""The visible parts' expected outputs, shipped with the checks (``learner/check/expected/<exercise>.pt``).

Built by ``python -m coursekit.expected`` (``course expected``) from the reference;
read with ``torch.load(..., weights_only=True)``, so a shipped file holds
tensors and plain data only, plus the checks' own toy models (``SAFE_GLOBALS``).
"""
import os

EXPECTED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected")


def expected_path(name):
    return os.path.join(EXPECTED_DIR, f"{name}.pt")


def load_expected(name):
    path = expected_path(name)
    if not os.path.exists(path):
        raise RuntimeError(f"the checks' expected outputs for {name!r} are missing ({path}); "
                           f"run `python -m coursekit.expected` on a machine with the reference")
    return read_expected(path)


def read_expected(path):
    """A shipped file: tensors and plain data only, plus the checks' own toy models (``SAFE_GLOBALS``)."""
    import torch

    from .cases import SAFE_GLOBALS
    with torch.serialization.safe_globals(SAFE_GLOBALS):
        return torch.load(path, weights_only=True)
