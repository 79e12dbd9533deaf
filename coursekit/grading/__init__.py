"""Grading a class in parallel, on Dask.

    course grade [-j N] [--scheduler ADDRESS] [--timeout S] [--course DIR] [assignment ...]

The client (this process) reads ``<course>/submitted/<student>/<assignment>/``,
checks each submission (a valid notebook, of this assignment, one per folder,
a student on the roster) and sends one task per submission to Dask workers:
a local cluster of ``-j`` processes on 127.0.0.1 by default (one per core), or
the cluster whose scheduler is at ``--scheduler``. A task carries everything
it needs: its submission's files, and (once per worker, scattered) the
assignment's source and the course's nbgrader configuration. The worker grades
it with real nbgrader in a private folder of its own (``grade_submission``:
the sandboxed kernel and the trusted verdict of ``grader.nbgrader_plugin``),
under a time limit, and brings back the autograded notebook, the feedback, the
scores, the faults and the hidden-case seed as plain data. Workers need no
shared filesystem. A few tasks per worker are in flight at a time, and a task's
files are read when it is sent, so a class of thousands is never in memory at once.

Only the client writes: the gradebook (nbgrader's own ``SaveAutoGrades`` and
``AssignLatePenalties`` on the returned notebook, one submission at a time,
retried while SQLite is locked), the autograded and feedback folders,
``grading_log.jsonl`` and ``hidden_seeds.csv``. A worker that dies mid-task has
its tasks run again elsewhere by the scheduler; a result is written once, when
it arrives, so nothing is graded twice. A submission whose grading fails (a
time-out, a crash of nbgrader, workers dying under it) gets zero for every cell
and a reason in the log and the summary; the rest of the class goes on.

The parts, one module each: ``submissions`` (what there is to grade), ``client`` (the Dask cluster and writing
what comes back), ``task`` (one submission on a worker: ``grade_submission``), ``server`` (the worker's nbgrader process, ``python -m
coursekit.grading serve``), ``summary`` (what a run found, and its printout), ``files`` (a submission's files as
plain data).
"""
from .client import QUIET_DASK, dask_client, grade_class, local_cluster, write_graded, security_from  # noqa: F401
from .files import MAX_FILE_BYTES  # noqa: F401
from .server import PASSED_ENV  # noqa: F401
from .submissions import course_payload, gradable, with_files  # noqa: F401
from .summary import Problem, Summary, print_summary  # noqa: F401
from .task import grade_submission  # noqa: F401
