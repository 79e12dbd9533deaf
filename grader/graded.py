"""One graded submission, as one record (``Graded``), and the one writer of each line it leaves beside a gradebook.

``Graded`` is what grading one submission gives, wherever it ran: made by the grading worker
(``coursekit.grading.task.grade_submission``), carried back as plain data (``to_plain``/``from_plain``: Dask, bytes
as they are) or as JSON (``to_json``/``from_json``: the hub's grading service over HTTP, files in base64), and
written into the course by the instructor's side (``coursekit.grading.client.write_graded`` for `course grade`,
``coursekit.hub.service_client``'s GradedByHub for the formgrader's Autograde on the hub).

The lines it leaves, each with one writer: a line of ``grading_log.jsonl`` (``log_record`` makes it,
``append_log`` writes it) and the hidden-case seed (``grader.seeds.record``), both written by
``Graded.write_log_and_seed`` on the instructor's side and by ``grader.nbgrader_plugin.TrustedVerdict`` where
nbgrader grades in the course folder itself. The gradebook row is nbgrader's own preprocessors' on the graded notebook
(``coursekit.pipeline.save_grades``).
"""
import base64
import datetime
import fcntl
import json
import os
from dataclasses import asdict, dataclass, field, fields

from . import seeds

LOG_NAME = "grading_log.jsonl"


def log_record(student, assignment, notebook, seed, faults, isolated=True):
    """A line of the grading log: when, who, which notebook, the seed it was graded on, whether it was sandboxed,
    and the faults flagged for a human ([kind, words] each)."""
    return {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "student": student, "assignment": assignment, "notebook": notebook, "isolated": isolated, "seed": seed,
            "faults": [list(f) for f in faults]}


def append_log(course_root, record):
    """One line of ``grading_log.jsonl`` beside the gradebook (appended under a lock): the log's only writer."""
    path = os.path.join(course_root, LOG_NAME)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record) + "\n")
        fcntl.flock(f, fcntl.LOCK_UN)


def read_log(course_root):
    """The records of ``grading_log.jsonl`` (none when there is no log)."""
    path = os.path.join(course_root, LOG_NAME)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@dataclass
class Graded:
    """What grading one submission gave.

    ``ok``: nbgrader graded it (``autograded`` then holds the graded notebook); ``error``: (kind, words) when it
    did not, or did only on a second try (kind ``timeout``, ``grading`` or ``worker``); ``log``: the lines of the
    grading log the grading wrote (faults flagged for a human); ``seed``: the hidden cases' seed it was graded on;
    ``host``, ``pid``: the worker; ``separation``: what kept its sandboxes apart, in words."""
    student: str
    assignment: str
    ok: bool = False
    autograded: dict = field(default_factory=dict)  # {relative path: bytes}
    feedback: dict = field(default_factory=dict)    # {relative path: bytes}
    log: list = field(default_factory=list)         # [a record of grading_log.jsonl]
    seed: int = None
    error: tuple = None                             # (kind, words)
    host: str = None
    pid: int = None
    separation: str = None
    bound: str = None                               # what bounded the memory of its nbgrader process, in words
    seconds: float = 0.0

    @classmethod
    def failed(cls, student, assignment, kind, words, **others):
        """A submission that could not be graded, and why (``kind``: timeout, grading, worker)."""
        return cls(student, assignment, error=(kind, words), **others)

    # ---------------------------------------------------------- on the wire
    def to_plain(self):
        """Plain data (dicts, lists, str, int, bytes): what a Dask worker returns."""
        return asdict(self)

    @classmethod
    def from_plain(cls, data):
        known = {f.name for f in fields(cls)}
        graded = cls(**{k: v for k, v in data.items() if k in known})
        if graded.error is not None:
            graded.error = tuple(graded.error)  # (JSON has no tuple)
        return graded

    def to_json(self):
        """JSON text, the files in base64: what the hub's grading service answers."""
        return json.dumps(dict(self.to_plain(), autograded=b64(self.autograded), feedback=b64(self.feedback)))

    @classmethod
    def from_json(cls, text):
        data = json.loads(text)
        return cls.from_plain(dict(data, autograded=unb64(data.get("autograded", {})),
                                   feedback=unb64(data.get("feedback", {}))))

    # ---------------------------------------------------------- what it says
    def notebook(self, name=None):
        """The graded notebook (``<assignment>.ipynb``, or ``name``) as nbformat's node, or None when there is none."""
        import nbformat
        name = name or self.assignment + ".ipynb"
        if not self.ok or name not in self.autograded:
            return None
        return nbformat.reads(self.autograded[name].decode("utf-8"), as_version=4)

    def log_records(self):
        """The lines of the grading log this submission leaves: the grading's own, then why it failed, if it did."""
        records = list(self.log)
        if self.error:
            records.append(log_record(self.student, self.assignment, self.assignment, self.seed, [self.error]))
        return records

    def faults(self):
        """[(kind, words)] of every line of ``log_records``."""
        return [tuple(f) for rec in self.log_records() for f in rec.get("faults", [])]

    def write_log_and_seed(self, course_root):
        """Its lines of the grading log and its seed, written beside the gradebook in ``course_root``."""
        for rec in self.log_records():
            append_log(course_root, rec)
        if self.seed is not None:
            seeds.record(course_root, self.student, self.assignment, self.seed)


def b64(files):
    return {rel: base64.b64encode(data).decode("ascii") for rel, data in files.items()}


def unb64(files):
    """{path: bytes} from {path: base64 text}; text that is not base64 is an error (binascii.Error), never dropped."""
    return {str(rel): base64.b64decode(data, validate=True) for rel, data in files.items()}
