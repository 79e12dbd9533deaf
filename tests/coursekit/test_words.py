"""Counts in what the `course` commands print: "1 student", "2 students", never "student(s)" or "1 students"
(``coursekit.words.counted``). Cost: well under a second (one regular expression over coursekit's files)."""
import glob
import os
import re

from coursekit import ROOT
from coursekit.words import counted

# a count put into an f-string and followed by a noun with "(s)": "{len(x)} student(s)", "{n} worker(s)"
HEDGED = re.compile(r"\{[^{}]*\}\s+(?:[A-Za-z]+\s)?[A-Za-z]+\(s\)")


def test_a_count_of_one_is_singular_and_every_other_plural():
    assert counted(1, "student") == "1 student"
    assert counted(0, "student") == "0 students"
    assert counted(2, "submission") == "2 submissions"
    assert counted(1, "stale file") == "1 stale file" and counted(3, "stale file") == "3 stale files"
    assert counted(2, "child", "children") == "2 children" and counted(1, "child", "children") == "1 child"
    assert counted(1.0, "point") == "1 point" and counted(1.5, "point") == "1.5 points"


def test_no_command_prints_a_hedged_plural():
    found = []
    for path in glob.glob(os.path.join(ROOT, "coursekit", "**", "*.py"), recursive=True):
        for number, line in enumerate(open(path, encoding="utf-8"), 1):
            if HEDGED.search(line):
                found.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()}")
    assert not found, "use coursekit.words.counted:\n" + "\n".join(found)
