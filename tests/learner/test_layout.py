"""The tree's shape, kept by tests rather than by habit: one name, one meaning, and modules short enough to read.

A file name names one module: two files of the project (tests aside) share a name only when it is a topic's name,
the name of a notebook's reference module in ``solutions/`` (its known mistakes, its hidden cases, its widget and
its benchmark may carry it too); ``__init__``/``__main__`` are Python's. No module of the project is over 500 lines.
Both read the files git tracks, so a file left over in a working copy does not count. Cost: under a second."""
import collections
import os
import subprocess

from coursekit import ROOT

LONGEST = 500
PYTHONS = ("__init__.py", "__main__.py")


def tracked_modules():
    """Paths (relative to the root) of the project's Python files that git tracks, tests left out."""
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.split() if not p.startswith("tests/")]


def topics():
    """The topics' names: one reference module per notebook in solutions/."""
    return {name[:-3] for name in os.listdir(os.path.join(ROOT, "solutions"))
            if name.endswith(".py") and name not in PYTHONS}


def shared_names(paths, topic_names):
    """{file name: [paths]} for each file name that two paths share and that is neither a topic's nor Python's."""
    by_name = collections.defaultdict(list)
    for path in paths:
        by_name[os.path.basename(path)].append(path)
    return {name: sorted(where) for name, where in by_name.items()
            if len(where) > 1 and name not in PYTHONS and name[:-3] not in topic_names}


def test_no_two_modules_share_a_file_name_but_a_topics():
    names = topics()
    assert {"softmax", "kv_cache", "masks_attention"} <= names, names  # the rule below is about these names
    assert shared_names(tracked_modules(), names) == {}


def test_a_shared_name_is_found_and_a_topics_name_is_allowed():
    """The check above can fail: a second worker.py is named with both paths; a topic's name in bench/ is allowed."""
    paths = ["grader/worker.py", "coursekit/grading/worker.py", "solutions/softmax.py", "bench/softmax.py"]
    assert shared_names(paths, {"softmax"}) == {"worker.py": ["coursekit/grading/worker.py", "grader/worker.py"]}


def test_no_module_is_over_500_lines():
    lines = {path: sum(1 for _ in open(os.path.join(ROOT, path))) for path in tracked_modules()}
    assert len(lines) > 50, lines  # the project's modules were found
    assert {path: n for path, n in lines.items() if n > LONGEST} == {}
