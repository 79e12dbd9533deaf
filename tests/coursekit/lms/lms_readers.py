"""The LMSs' own importers, as the tests run them: PHP for Moodle's (``moodle_csv_reader.php``: lib/csvlib.class.php
and grade/import/csv/classes/load_data.php) and Ruby for Canvas's (``canvas_csv_reader.rb``: canvas-lms
lib/gradebook_importer.rb), each a long-lived process that takes a file and answers one JSON line. Each script
says in its header the file, the methods and the commit of the source it follows. conftest.py starts them once per
session (the ``php`` and ``ruby`` fixtures); a machine without ``php`` or ``ruby`` fails the tests that need them,
naming the package to install (``make test`` installs both)."""
import atexit
import csv
import json
import os
import shutil
import subprocess
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PHP_WAYS = [f"{mode} {locale}" for locale in ("C", "C.UTF-8") for mode in ("default", "backslash", "none")]


class Reader:
    """One long-lived reader process: a file path (or a JSON request) in, one JSON line out."""

    def __init__(self, argv):
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        encoding="utf-8")

    def read(self, path, **also):
        """What the script answers for ``path`` (with ``also``, e.g. the LMS's users, sent as one JSON line)."""
        self.process.stdin.write((json.dumps({"path": str(path), **also}) if also else str(path)) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"{self.process.args[0]} stopped (exit {self.process.poll()})"
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait(timeout=30)


def start(command, package, script):
    if shutil.which(command) is None:
        pytest.fail(f"{command} is not installed: these tests run the LMS's own importer in it. Install it with "
                    f"`apt-get install -y {package}` (make test does, as root)", pytrace=False)
    return Reader([command, os.path.join(HERE, script)])


def python_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def written(rows):
    """A file of ``rows`` as Python's ``csv.writer`` writes them (what the exports used to write, or a file by
    hand); returns its path, in a folder that lasts as long as the process."""
    folder = tempfile.mkdtemp(prefix="lms-rows-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "rows.csv")
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    return path


def ruby_rows(ruby, path):
    """{"plain": rows, "canvas": rows} as Ruby's CSV reads ``path``, an empty cell as "" (Ruby reads an unquoted
    empty cell as nil, a quoted one as ""; Canvas treats both as blank)."""
    return {how: [[cell or "" for cell in row] for row in rows] if isinstance(rows, list) else rows
            for how, rows in ruby.read(path).items()}


def php_rows(php, path):
    """{way: rows} as Moodle's reader in PHP gives them back (the upload read each way, then Moodle's own stored
    copy); fails naming the ways that refused the file."""
    read = php.read(path)
    refused = {way: rows["error"] for way, rows in read.items() if isinstance(rows, dict)}
    assert not refused, f"Moodle's reader refused {path}: {refused}"
    return read


def canvas_import(ruby, path, users, assignments=()):
    """Canvas's import of ``path`` (or of rows, written first) for the course's students ``users`` ({"id", "name",
    "sortable_name", "sis_user_id", "login", "gradable"}): {"imported": {user id or "missing: NAME": {assignment:
    grade}}, "rows": [[row, user, how]], "dropped": [...], "assignments": {...}}."""
    path = written(path) if isinstance(path, list) else path
    return ruby.read(path, users=list(users), assignments=list(assignments))


def moodle_import(php, path, users, mapfrom="User ID", mapto="userid", **more):
    """Moodle's import of ``path`` (or of rows, written first) into a site of ``users`` ({"id", "username",
    "idnumber", "email", "enrolled"}), "Map from" ``mapfrom`` to ``mapto``: the result (``moodle_csv_reader.php``
    says its keys), the same every way PHP may read the upload."""
    path = written(path) if isinstance(path, list) else path
    results = php.read(path, **{"import": {"mapfrom": mapfrom, "mapto": mapto, "users": list(users), **more}})["import"]
    first = results[PHP_WAYS[0]]
    assert all(results[way] == first for way in PHP_WAYS), {way: results[way] for way in PHP_WAYS}
    return first
