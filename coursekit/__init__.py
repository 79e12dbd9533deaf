"""Course tooling: notebooks kept in sync with the reference, plots for learners, and the `course` command."""
from .paths import COURSE_DIR, ROOT, SOURCE_DIR  # noqa: F401  (where the project is, for the tests and scripts)

from . import moved  # noqa: E402  (the class side's old module names: an existing class's files name them)

moved.keep_old_names()
