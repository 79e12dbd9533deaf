"""The client's side before grading: what there is to grade, and what each task carries to its worker."""
import hashlib
import os

import nbformat

from ..exchange.inbound import shown, valid_student_id
from .files import files_of
from .summary import Problem


def _grade_ids(nb):
    return {c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def _source_ids(source_dir):
    """{assignment: the grade ids of its source notebook}."""
    out = {}
    for a in sorted(os.listdir(source_dir)):
        path = os.path.join(source_dir, a, a + ".ipynb")
        if os.path.isfile(path):
            try:
                out[a] = _grade_ids(nbformat.read(path, as_version=4))
            except Exception:  # a source notebook that cannot be read: it cannot be released either (named there)
                continue
    return out


def gradable(course_root, only=None, roster=None, students=None, unreleased=()):
    """(tasks, problems): one task per submission that can be graded, and every problem found on the way.

    A task is plain data: ``{"student", "assignment", "folder", "ignored", "timestamp"}``; its files are read
    when it is sent (``with_files``), so that a class of thousands is never held in memory at once.
    ``roster``: the student ids of the gradebook, or None when it has none (then nobody is "not on the roster").
    ``only``/``students``: only these assignments/students (default: everyone's every assignment).
    ``unreleased``: assignments that could not be released; their submissions are named, not graded.
    """
    submitted = os.path.join(course_root, "submitted")
    known = _source_ids(os.path.join(course_root, "source"))
    shared = set.intersection(*known.values()) if len(known) > 1 else set()
    tasks, problems = [], []
    found = sorted(os.listdir(submitted)) if os.path.isdir(submitted) else []
    for student in (s for s in found if not students or s in students):
        if not os.path.isdir(os.path.join(submitted, student)):
            continue
        if not valid_student_id(student):  # never a path, a gradebook row or a page built from it
            problems.append(Problem(shown(student), "-", "the folder's name is not a valid student id (letters, "
                                                          "digits, '_', '.', '@' and '-'): not graded"))
            continue
        for a in sorted(os.listdir(os.path.join(submitted, student))):
            folder = os.path.join(submitted, student, a)
            if not os.path.isdir(folder) or (only and a not in only) or a.startswith(".collecting-"):
                continue  # (collect's own folder while it copies a submission)
            if a in unreleased:
                problems.append(Problem(student, a, "not graded: its assignment could not be released"))
                continue
            if a not in known:
                problems.append(Problem(student, a, f"there is no assignment {a!r} in source/ (folder not graded)"))
                continue
            files, skipped = files_of(folder)
            for what in skipped:
                problems.append(Problem(student, a, f"file not carried: {what}", graded=True))
            notebooks = sorted(p for p in files if p.endswith(".ipynb"))
            name = a + ".ipynb"
            if name not in notebooks:
                found = f" (found {', '.join(notebooks)})" if notebooks else ""
                problems.append(Problem(student, a, f"missing notebook {name}{found}: not graded"))
                continue
            ignored = [p for p in notebooks if p != name]
            if ignored:
                problems.append(Problem(student, a, f"{len(notebooks)} notebooks in one submission: graded {name}, "
                                                    f"ignored {', '.join(ignored)}", graded=True))
            try:
                nb = nbformat.reads(files[name].decode("utf-8"), as_version=4)
            except Exception as exc:  # not UTF-8, not JSON, not a notebook
                problems.append(Problem(student, a, f"{name} is not a valid notebook ({type(exc).__name__}: "
                                                    f"{str(exc).splitlines()[0][:160] if str(exc) else ''}): "
                                                    f"not graded"))
                continue
            ids = _grade_ids(nb) - shared  # "setup" and the like say nothing of the assignment
            if not ids & known[a]:
                other = max(known, key=lambda k: len(ids & known[k]))
                whose = f"the notebook of assignment {other}" if ids & known[other] else "a notebook of no assignment"
                problems.append(Problem(student, a, f"{name} is {whose}, not of {a} (none of its graded cells is "
                                                    f"there): not graded"))
                continue
            if roster is not None and student not in roster:
                problems.append(Problem(student, a, "not on the roster: graded, and added to the gradebook",
                                        graded=True))
            stamp = files.get("timestamp.txt", b"").decode("utf-8", "replace").strip() or None
            tasks.append({"student": student, "assignment": a, "folder": folder, "ignored": ignored,
                          "timestamp": stamp})
    return tasks, problems


def with_files(task):
    """The task as it is sent: its submission's files read now (checkpoints, links, over-size files and the
    ignored extra notebooks left out)."""
    files, _ = files_of(task["folder"])
    for other in task["ignored"]:
        files.pop(other, None)
    return {k: v for k, v in task.items() if k not in ("folder", "ignored")} | {"files": files}


def course_payload(course_root, assignment):
    """What a worker needs of the course to grade ``assignment``: the nbgrader configuration and the source."""
    with open(os.path.join(course_root, "nbgrader_config.py"), "rb") as f:
        config = f.read()
    source, _ = files_of(os.path.join(course_root, "source", assignment))
    digest = hashlib.sha256(config)
    for rel in sorted(source):
        digest.update(rel.encode() + b"\0" + source[rel])
    return {"assignment": assignment, "config": config, "source": source, "digest": digest.hexdigest()[:16]}


