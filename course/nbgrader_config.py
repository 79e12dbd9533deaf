"""nbgrader configuration of the course. Every path stays inside this folder.

Run nbgrader from this folder (the `course` command does it for you).
"""
import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions, GetGrades

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)
HERE = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "attention-course"
c.CourseDirectory.root = HERE
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(HERE, "gradebook.db")
# nbgrader's exchange defaults to /srv and its cache to $HOME: keep both here. On a JupyterHub the exchange is a
# folder every user reaches, root's (0755; `course hub --exchange DIR` sets COURSE_EXCHANGE in the instructors'
# servers).
c.Exchange.root = os.environ.get("COURSE_EXCHANGE") or os.path.join(HERE, "exchange")
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
# What a submission may hold (learner/handin.py, the one rule set of a student's submit and `course collect`): a
# file over max_file_size is left out of it, a submission over max_dir_size is refused whole, at submit and at
# collect; the hub gives its students' servers the same values.
from learner.handin import LIMITS  # noqa: E402

c.CourseDirectory.max_file_size = LIMITS.file_bytes // 1000  # kB
c.CourseDirectory.max_dir_size = LIMITS.total_bytes // 1000  # kB

# The exchange is untrusted input (coursekit/exchange/inbound.py): collect takes a folder as a student's only when that
# student's account wrote it, never follows a link, and handles each student on their own; release closes the
# exchange's course folder (inbound 3773: students add, never list); feedback goes out only as the pages grading
# wrote, each readable by its student alone. A student's own submit (learner/submit.py) keeps it private.
c.ExchangeFactory.release_assignment = "coursekit.exchange.classes.CourseReleaseAssignment"
c.ExchangeFactory.collect = "coursekit.exchange.classes.CourseCollect"
c.ExchangeFactory.release_feedback = "coursekit.exchange.classes.CourseReleaseFeedback"
c.ExchangeFactory.submit = "learner.submit.PrivateSubmit"
c.ExchangeFactory.fetch_assignment = "learner.submit.CourseFetch"
c.ExchangeFactory.fetch_feedback = "learner.submit.CourseFetchFeedback"
c.ExchangeFactory.list = "learner.submit.CourseList"

# The stub learners see in place of each solution region.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.enforce_metadata = True

# Grading: deleted cells come back, edited test cells are overwritten from the source.
c.OverwriteCells.add_missing_cells = True

# Seconds per cell: plenty for the checks (each learner call is also limited to 10 s by the
# grader) and for a toy training cell; a learner function that hangs in a demo cell costs this much.
c.Execute.timeout = 120
c.Execute.interrupt_on_timeout = True
# After a cell's reply, nbclient waits 4 s for its last output and nbgrader then stops the notebook as if the cell
# had timed out: on a machine busy with a whole class that could cost an honest student every cell after it.
c.Execute.iopub_timeout = 30

# Grading isolates the student's code (grader/sandbox.py, bubblewrap): the notebook runs in a
# sandboxed kernel that cannot see source/, the gradebook or the reference, and the grade of
# every graded cell is then decided from outside by grader.judge (reference here, the student's
# functions in a sandboxed worker), replacing whatever the kernel printed.
# nbgrader 0.9.6's list, with the sandboxed Execute and the trusted verdict right after it.
from grader.nbgrader_plugin import SandboxedExecute, TrustedVerdict  # noqa: E402
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties, CheckCellMetadata, IgnorePattern, LimitOutput, SaveAutoGrades)

# A submission is untrusted HTML: it is made inert (grader/untrusted.py) before nbgrader stores it, so that the
# feedback, the formgrader's pages and anything else made from the autograded notebook show its outputs as text,
# its images as images, and no markup of it live.
from grader.untrusted import FeedbackExporter, FeedbackPage, NeutraliseSubmission  # noqa: E402

c.Autograde.autograde_preprocessors = [
    SandboxedExecute, TrustedVerdict, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, NeutraliseSubmission,
    SaveAutoGrades, AssignLatePenalties, CheckCellMetadata]
# Late work: nbgrader's own penalty (a student's due date is the assignment's plus their extension, `course extend`)
# with the course's policy, declared once in late_policy.toml beside this file (grader/late.py; none: full marks).
c.AssignLatePenalties.plugin_class = "grader.late.CourseLatePolicy"
c.NeutraliseSubmission.course_root = HERE

# On the hub, in an instructor's server (a plain user, COURSE_GRADING_URL set), the grading runs in the hub's grading
# service, as root, with a user and a control group of its own per sandbox (coursekit/hub/service.py): the
# formgrader's Autograde button and `nbgrader autograde` send the submission there, and GradedByHub writes what comes
# back as `course grade` does (the grades with nbgrader's SaveAutoGrades and AssignLatePenalties, the grading log's
# lines, the seed).
if os.environ.get("COURSE_GRADING_URL") and os.geteuid() != 0:
    from coursekit.hub.service_client import graded_by_hub_preprocessor  # noqa: E402
    GradedByHub = graded_by_hub_preprocessor()
    c.Autograde.autograde_preprocessors = [GradedByHub, CheckCellMetadata]
    c.GradedByHub.course_root = HERE
c.SandboxedExecute.timeout = 120
c.SandboxedExecute.interrupt_on_timeout = True
c.SandboxedExecute.iopub_timeout = 30
c.TrustedVerdict.course_root = HERE

# Every release records the course version; grading names a submission released with another one.
from grader.nbgrader_plugin import StampVersion  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    ClearMarkScheme, ClearOutput, ComputeChecksums, IncludeHeaderFooter, InstantiateTests, LockCells, SaveCells)

c.GenerateAssignment.preprocessors = [  # nbgrader 0.9.6's list, then the stamp
    IncludeHeaderFooter, InstantiateTests, LockCells, ClearSolutions, ClearOutput, CheckCellMetadata,
    ComputeChecksums, SaveCells, ClearHiddenTests, ClearMarkScheme, ComputeChecksums, CheckCellMetadata,
    StampVersion]

# Feedback never shows hidden-test code: not in the cells, not quoted in a traceback.
from grader.late import LatenessNote  # noqa: E402
from grader.nbgrader_plugin import ShortenTracebacks  # noqa: E402

# LatenessNote: the student's due date (extension included), how late, and the late policy, on the page.
c.GenerateFeedback.preprocessors = [GetGrades, LatenessNote, ShortenTracebacks, ClearHiddenTests, FeedbackPage,
                                    CSSHTMLHeaderPreprocessor]
c.FeedbackPage.course_root = HERE
# The feedback page loads nothing from outside (no MathJax or widget manager from a CDN: the course's maths is
# MathML) and forbids every script (a Content-Security-Policy), should anything get past the neutralising above.
c.GenerateFeedback.exporter_class = FeedbackExporter
c.ClearHiddenTests.enforce_metadata = False
