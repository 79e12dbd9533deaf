"""Where the project is: its root, the course folder (``course/``) and its source notebooks. A leaf: it imports
nothing of the project, so every module may import it."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COURSE_DIR = os.path.join(ROOT, "course")
SOURCE_DIR = os.path.join(COURSE_DIR, "source")
