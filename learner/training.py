"""What every training run of the course shares: a fixed number of steps and a fixed thread count.

A notebook's stated accuracy must come out the same on a slow or busy machine,
only later. So a run is fixed by its arguments, never by the clock:

* ``step_cap(steps)`` is ``steps``, or fewer when ``COURSE_MAX_TRAIN_STEPS`` is
  set. An instructor grading a class sets it (no graded cell depends on a
  trained model), and so does the test suite's reduced run of the notebooks.
* ``eval_cap(n)`` is ``n``, or at most ``REDUCED_EVAL`` in such a capped run: the
  date task's validation and test sets shrink with it (``data.make_date_task``),
  since a capped run checks that a notebook runs, not the figures it states.
* ``training_threads()`` trains with a fixed number of torch threads (1, or
  ``COURSE_TRAIN_THREADS``) and gives the caller's count back afterwards: the
  same thread count gives the same floating-point sums, hence the same figures.
  One thread, because the course's models are small: a second thread buys
  little alone, and beside other work (a second notebook training, a class
  being graded) two threads per run ask more of the cores than they have, and
  every step waits for the thread that is not running (measured on 2 cores:
  500 steps in 28 s alone, 157 s beside another notebook). One thread per run
  never waits for another thread: no OpenMP region is opened, so nothing spins
  (the effect of ``OMP_WAIT_POLICY=PASSIVE``, which OpenMP only reads when torch
  is first imported, too early for a module to set). ``bench/training_load.py``
  measures two runs side by side against each alone.
* ``progress(steps)`` is the bar a training loop advances: a widget in
  JupyterLab, text elsewhere, and silent in a capped run (nbgrader scores a cell
  that writes to stderr 0, and a capped run is over in seconds).
"""
import contextlib
import os

import torch

THREADS = 1   # the thread count of every training run (the notebooks' stated figures are the same with 2)
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


def capped():
    """True in a run capped by ``COURSE_MAX_TRAIN_STEPS`` (class grading, the tests' reduced runs)."""
    return bool(os.environ.get("COURSE_MAX_TRAIN_STEPS", "").strip())


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


def progress(steps, desc=None, unit="step", **kwargs):
    """A progress bar for ``steps`` training steps: advance it with ``bar.update(1)``, close it (or use ``with``).

    ``tqdm.auto``: a widget in JupyterLab (and in a notebook run by nbconvert), text on stdout elsewhere, redrawn at
    most twice a second. In a run capped by ``COURSE_MAX_TRAIN_STEPS`` it is off: under nbgrader any stderr output
    of a cell scores 0 and a widget is noise in a graded notebook, and such a run is over in seconds.
    """
    import sys

    from tqdm.auto import tqdm
    position = os.environ.get("COURSE_PROGRESS_POSITION", "").strip()  # runs side by side: a line each
    if position:
        kwargs = {"position": int(position), "leave": False, **kwargs}
    return tqdm(total=steps, desc=desc, unit=unit, disable=capped(), mininterval=0.5, file=sys.stdout,
                dynamic_ncols=True, **kwargs)
