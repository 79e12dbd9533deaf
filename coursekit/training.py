"""What every training run of the course shares: a fixed number of steps and a fixed thread count.

A notebook's stated accuracy must come out the same on a slow or busy machine,
only later. So a run is fixed by its arguments, never by the clock:

* ``step_cap(steps)`` is ``steps``, or fewer when ``COURSE_MAX_TRAIN_STEPS`` is
  set. An instructor grading a class sets it (no graded cell depends on a
  trained model), and so does the test suite's reduced run of the notebooks.
* ``eval_cap(n)`` is ``n``, or at most ``REDUCED_EVAL`` in such a capped run: the
  date task's validation and test sets shrink with it (``data.make_date_task``),
  since a capped run checks that a notebook runs, not the figures it states.
* ``training_threads()`` trains with a fixed number of torch threads (2, or
  ``COURSE_TRAIN_THREADS``) and gives the caller's count back afterwards: the
  same thread count gives the same floating-point sums, hence the same figures.
"""
import contextlib
import os

import torch

THREADS = 2   # the thread count the notebooks' stated figures were measured with
REDUCED_EVAL = 100  # validation and test dates of a run capped by COURSE_MAX_TRAIN_STEPS


def step_cap(steps, announce=True):
    """``steps``, or ``COURSE_MAX_TRAIN_STEPS`` when that is set and smaller (at least 1)."""
    cap = os.environ.get("COURSE_MAX_TRAIN_STEPS", "").strip()
    if not cap:
        return steps
    capped = max(1, min(steps, int(cap)))
    if announce and capped < steps:
        print(f"COURSE_MAX_TRAIN_STEPS={cap}: training {capped} of {steps} steps only")
    return capped


def eval_cap(n):
    """``n``, or at most ``REDUCED_EVAL`` when ``COURSE_MAX_TRAIN_STEPS`` is set (a reduced run)."""
    return min(n, REDUCED_EVAL) if os.environ.get("COURSE_MAX_TRAIN_STEPS", "").strip() else n


@contextlib.contextmanager
def training_threads(threads=None):
    """Run the body with ``threads`` torch threads (default: ``COURSE_TRAIN_THREADS``, else ``THREADS``)."""
    if threads is None:
        threads = int(os.environ.get("COURSE_TRAIN_THREADS", "").strip() or THREADS)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(old)
