"""The cases of every exercise: one module per notebook, ``learner/check/cases/<topic>.py``, loaded here in course order.

The notebooks and their topics come from the course table (``learner/syllabus.py``);
each case module ends with ``register(__name__, Exercise(...), ...)``, which adds
its exercises to ``EXERCISES``. What the modules share lives in ``common.py``.
"""
import importlib

from ...syllabus import NOTEBOOKS
from .common import (CELLS, EXERCISES, SAFE_GLOBALS, graded_cells, hidden_cases, visible_cases)

__all__ = ["CELLS", "EXERCISES", "SAFE_GLOBALS", "graded_cells", "hidden_cases", "visible_cases"]

for _nb in NOTEBOOKS.values():
    importlib.import_module(f"{__name__}.{_nb.topic}")
