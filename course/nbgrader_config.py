"""nbgrader configuration of the course. Every path stays inside this folder.

Run nbgrader from this folder (the `course` command does it for you).
"""
import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)
HERE = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.root = HERE
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# nbgrader's exchange defaults to /srv and its cache to $HOME: keep both here.
c.Exchange.root = os.path.join(HERE, "exchange")
c.Exchange.cache = os.path.join(HERE, "exchange", ".cache")
c.Exchange.assignment_dir = HERE

# Files a submission might add to shadow what the notebook imports are not copied
# into the autograded folder (the notebook's set-up cell also drops its own folder
# from sys.path).
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback",
    "*.py", "*.pth", "*.so", "*.pyd",
    "grader", "solutions", "coursekit", "torch", "numpy", "math", "nbgrader", "sitecustomize*", "usercustomize*",
]
c.CourseDirectory.max_file_size = 10_000  # kB

# The stub learners see in place of each solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.enforce_metadata = True

# Grading: deleted cells come back, edited test cells are overwritten from the source.
c.OverwriteCells.add_missing_cells = True

# Seconds per cell: plenty for the checks (each learner call is also limited to 10 s by the
# grader) and for a toy training cell; a learner function that hangs in a demo cell costs this much.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True

# After the kernel has run the notebook, re-run every graded check in a clean
# process on the learner's definitions only, and keep the lower verdict.
# nbgrader 0.9.6's list, with the re-check right after Execute.
from grader.nbgrader_plugin import IndependentRecheck  # noqa: E402
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, Execute, IgnorePattern, LimitOutput, SaveAutoGrades)

c.Autograde.autograde_preprocessors = [
    Execute, IndependentRecheck, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
    AssignLatePenalties, CheckCellMetadata]

# Feedback never shows hidden-test code: not in the cells, not quoted in a traceback.
from grader.nbgrader_plugin import ShortenTracebacks  # noqa: E402

c.GenerateFeedback.preprocessors = [GetGrades, ShortenTracebacks, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
c.ClearHiddenTests.enforce_metadata = False
