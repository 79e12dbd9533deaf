"""``python -m coursekit.grading serve``: a grading worker's nbgrader process (``server``)."""
import sys

from .server import serve

sys.exit(serve() if sys.argv[1:] == ["serve"] else "usage: python -m coursekit.grading serve")
