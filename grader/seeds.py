"""Per-student hidden cases: the hidden checks of each student draw their random cases from a seed of their own.

``student_seed(student, assignment)`` is derived from the two names alone, so two
students do not share hidden-case answers, and any grade can be reproduced:
``check(name, fn, part, seed=student_seed(student, assignment))``. The judge grades
with it; ``TrustedVerdict`` records it in ``hidden_seeds.csv`` beside the gradebook
(and in ``grading_log.jsonl`` beside any fault). A learner's own run of the hidden
parts (seed 0) draws the cases it always drew.
"""
import csv
import fcntl
import hashlib
import os

FILE = "hidden_seeds.csv"


def student_seed(student, assignment):
    """A positive int below 2**31, the same for the same student and assignment on every machine."""
    digest = hashlib.sha256(f"{student}\0{assignment}".encode()).digest()
    return 1 + int.from_bytes(digest[:4], "big") % (2**31 - 1)


def record(course_root, student, assignment, seed):
    """Write (student, assignment, seed) into ``hidden_seeds.csv`` beside the gradebook, once per pair."""
    path = os.path.join(course_root, FILE)
    with open(path, "a+", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        rows = list(csv.reader(f))
        if [student, assignment, str(seed)] not in rows:
            if not rows:
                csv.writer(f).writerow(["student", "assignment", "seed"])
            csv.writer(f).writerow([student, assignment, seed])


def recorded(course_root):
    """{(student, assignment): seed} from ``hidden_seeds.csv``."""
    path = os.path.join(course_root, FILE)
    if not os.path.exists(path):
        return {}
    with open(path, newline="") as f:
        return {(r["student"], r["assignment"]): int(r["seed"]) for r in csv.DictReader(f)}
