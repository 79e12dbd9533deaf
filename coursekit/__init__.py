"""Course tooling: notebooks kept in sync with the reference, plots for learners, and the `course` command."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COURSE_DIR = os.path.join(ROOT, "course")
SOURCE_DIR = os.path.join(COURSE_DIR, "source")

from . import moved  # noqa: E402  (the class side's old module names: an existing class's files name them)

moved.keep_old_names()
