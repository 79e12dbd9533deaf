"""The exchange as untrusted input, tried as a class really runs: real Unix users made here (removed after), the
instructor an ordinary user running `course release / collect / grade / return`, the students running `nbgrader
fetch_assignment / submit / fetch_feedback` with the settings the hub gives their servers, and the attackers writing
into the exchange with their own shells. Each attack sits beside honest students, who keep full marks:

* a forged folder named as another student's later submission (and one named as a student not on the roster);
* links in a submission to the instructor's files (an SSH key, the gradebook, a reference module, the source
  notebook with its hidden tests, a folder of the course, a file the instructor cannot read), and a notebook that
  prints everything in its folder: none of those files reaches `submitted/` or any student's fetched feedback;
* a 900 MB file (sparse) in a submission, a pipe, folders nested too deep;
* names that do not parse, a time in the future, a name carrying markup and escape sequences, a plain file and a
  link where a folder should be.

A student whose folder collect would refuse (the notebook renamed) is refused at submit, with collect's sentence, and
gets a fresh copy with `course fetch-again` in their terminal, their folder moved aside.

Collect names every refusal (the folder, its owner, why), finishes for the class, exits 1, leaves every refused
folder in the exchange, and gives the same result when run twice. What each folder of the exchange lets a student
do is then tried as a student who knows the names of another student's submission and feedback.

Cost: one release, six submissions, five graded (03_softmax, `-j 2`), one return; about 2 to 3 minutes on 2 cores
(of which a refused submit and a `course fetch-again`, about 5 s).
"""
import datetime
import html
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys

import nbformat
import pytest
from hub_helpers import FLOOD, course_copy_for, modes_of, need_hub_parts, remove_users, restore_modes

from coursekit.hub import setup as hub, access as hub_access
from coursekit.hub.access import REFERENCE_FOLDER
from coursekit.samples import answered, total_points

pytestmark = [pytest.mark.pipeline, pytest.mark.timeout(1200), pytest.mark.xdist_group("hub")]

A = "03_softmax"
COURSE_ID = "attention-course"
TEACH = "ckatk-teach"
ANN, BO = "ckatk-ann", "ckatk-bo"  # honest
FORGER, LINKER, BIG, ODD = "ckatk-forge", "ckatk-links", "ckatk-big", "ckatk-odd"
STUDENTS = [ANN, BO, FORGER, LINKER, BIG, ODD]
GRADING_PEAK = 3 * 2 ** 30  # the bound docs/threat-model.md states for `course grade` with two workers
BIN = os.path.dirname(sys.executable)

PRINT_EVERYTHING = '''
import os
for here, dirs, files in os.walk("."):
    for name in files:
        try:
            with open(os.path.join(here, name), "rb") as f:
                print("FILE", os.path.join(here, name), f.read(20000).decode("latin-1"))
        except OSError as exc:
            print("FILE", os.path.join(here, name), "unreadable:", exc)
'''


class Class:
    """The course folder, the exchange, the students' settings (as `course hub` writes them) and the users."""

    def __init__(self, folder):
        self.folder = folder
        self.course = course_copy_for(folder)
        self.exchange = os.path.join(folder, "exchange")
        self.state = os.path.join(folder, "state")
        os.makedirs(self.state)
        os.chmod(self.state, 0o755)
        self.roles = hub.role_settings(self.state, self.exchange, self.course)
        self.packages = hub.student_packages(self.state)
        self.inbound = os.path.join(self.exchange, COURSE_ID, "inbound")

    def env(self, name, *extra):
        home = pwd.getpwnam(name).pw_dir
        return ["env", "-i", f"HOME={home}", f"USER={name}", f"LOGNAME={name}", "LANG=C.UTF-8",
                f"PATH={BIN}:/usr/local/bin:/usr/bin:/bin", *extra]

    def student(self, name, *command, check=True):
        """A command in the student's terminal on the hub (their server's environment)."""
        env = self.env(name, f"JUPYTER_CONFIG_PATH={self.roles['student']}", f"PYTHONPATH={self.packages}",
                       f"COURSE_IDS={COURSE_ID}")
        proc = subprocess.run(["runuser", "-u", name, "--", *env, *command], cwd=pwd.getpwnam(name).pw_dir,
                              capture_output=True, text=True, timeout=300)
        assert not check or proc.returncode == 0, f"{name}: {command}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def shell(self, name, script):
        """``script`` in the student's own shell (bash), with the exchange's paths at hand."""
        env = self.env(name, f"INBOUND={self.inbound}", f"A={A}")
        return subprocess.run(["runuser", "-u", name, "--", *env, "bash", "-c", script],
                              cwd=pwd.getpwnam(name).pw_dir, capture_output=True, text=True, timeout=300)

    def instructor(self, *args, group=()):
        """A `course` command as the instructor; with ``group``, in those control groups (made by the test)."""
        env = self.env(TEACH, f"COURSE_ROOT={self.course}", f"COURSE_EXCHANGE={self.exchange}",
                       "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1")
        join = ["/bin/sh", "-c", "".join(f'echo $$ > "{g}/cgroup.procs" && ' for g in group) + 'exec "$@"', "sh"] \
            if group else []
        return subprocess.run([*join, "runuser", "-u", TEACH, "--", *env, "course", *args],
                              cwd=pwd.getpwnam(TEACH).pw_dir, capture_output=True, text=True, timeout=900)

    def write_notebook(self, name, nb, path):
        """Write ``nb`` to ``path`` as the student (their own file in their own home)."""
        proc = subprocess.run(["runuser", "-u", name, "--", *self.env(name), "python", "-c",
                               "import sys; open(sys.argv[1], 'w').write(sys.stdin.read())", path],
                              input=nbformat.writes(nb), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


def later(seconds):
    """nbgrader's timestamp format, ``seconds`` from now (UTC)."""
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def forged_folder(name, stamp, notebook_from, extra=""):
    """A shell script that makes ``$INBOUND/name`` by hand, holding the notebook ``notebook_from`` (a path in the
    student's home) and nbgrader's two files; ``extra`` runs inside it."""
    return f"""set -e
d="$INBOUND/{name}"
mkdir "$d"
cp {notebook_from} "$d/$A.ipynb"
printf '%s' '{stamp}' > "$d/timestamp.txt"
secret=$(cat ~/.local/share/jupyter/nbgrader_cache/{COURSE_ID}/*+$A+*/submission_secret.txt 2>/dev/null | head -c 128 || true)
printf '%s' "${{secret:-0000}}" > "$d/submission_secret.txt"
cd "$d"
{extra}
"""


def distinctive_lines(path, release_text):
    """Lines of the file at ``path`` long enough to be telling and absent from the released notebook."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", "replace")
    return [line.strip() for line in text.splitlines()
            if len(line.strip()) > 30 and line.strip() not in release_text][:40]


def test_the_exchange_is_untrusted_input_for_collect_grade_and_return(class_folder):
    need_hub_parts()
    remove_users([TEACH, *STUDENTS])
    reference_modes = modes_of(REFERENCE_FOLDER)
    try:
        hub_access.ensure_users([TEACH, *STUDENTS], create=True)
        cls = Class(class_folder)
        subprocess.run(["chown", "-R", f"{TEACH}:{TEACH}", cls.course], check=True)
        subprocess.run(["chmod", "o-rwx", cls.course], check=True)
        subprocess.run(f"chgrp -R {TEACH} {REFERENCE_FOLDER} && chmod -R g+rX,o-rwx {REFERENCE_FOLDER}", shell=True, check=True)
        os.makedirs(cls.exchange)
        os.chmod(cls.exchange, 0o1777)
        hub.exchange_for_class(cls.exchange, cls.course, [TEACH], STUDENTS)
        hub_access.enrol_roster(cls.course, [(s, s) for s in STUDENTS])
        # the instructor's own secrets, which links in a submission point at
        home = pwd.getpwnam(TEACH).pw_dir
        key = os.path.join(home, ".ssh", "id_ed25519")
        os.makedirs(os.path.dirname(key), mode=0o700)
        key_text = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + secrets.token_hex(32) + "\n-----END OPENSSH PRIVATE KEY-----\n"
        with open(key, "w") as f:
            f.write(key_text)
        os.chmod(key, 0o600)
        subprocess.run(["chown", "-R", f"{TEACH}:{TEACH}", os.path.dirname(key)], check=True)
        gradebook_token = "gb" + secrets.token_hex(12)  # a name only the gradebook holds
        hub_access.enrol_roster(cls.course, [("ckatk-ghost", f"{gradebook_token} Ghost")])
        targets = {"the SSH key": key, "the gradebook": os.path.join(cls.course, "gradebook.db"),
                   "a reference module": os.path.join(REFERENCE_FOLDER, "softmax.py"),
                   "the source notebook": os.path.join(cls.course, "source", A, A + ".ipynb")}

        released = cls.instructor("release", A)
        assert released.returncode == 0, released.stdout + released.stderr
        release = nbformat.read(os.path.join(cls.course, "release", A, A + ".ipynb"), as_version=4)
        release_text = nbformat.writes(release)
        total = total_points(release)

        # everyone fetches; the honest students and the attackers (who want a real submission too) submit answers
        right = answered(release)
        for name in STUDENTS:
            cls.student(name, "nbgrader", "fetch_assignment", A, "--course", COURSE_ID)
            path = os.path.join(pwd.getpwnam(name).pw_dir, A, A + ".ipynb")
            nb = answered(release)
            if name == LINKER:  # its answer cell prints every file of its folder, as grading runs it
                cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "softmax")
                cell.source += "\n" + PRINT_EVERYTHING
            if name == BIG:  # 2 GB of output, in 1 MB pieces that each pass the socket, for root's service to hold
                nb.cells.insert(3, nbformat.v4.new_code_cell(FLOOD))
            cls.write_notebook(name, nb, path)
            if name != ODD:  # ODD hands in by hand only, below
                cls.student(name, "nbgrader", "submit", A, "--course", COURSE_ID)
        # the notation page came with the release, where each notebook's link (../notation.md) opens it
        for name in STUDENTS:
            home = pwd.getpwnam(name).pw_dir
            assert os.path.isfile(os.path.join(home, "notation.md")) and os.path.isfile(
                os.path.join(home, A, "notation.md")), name
        # what an honest submission looks like in the inbound: the student's and the instructors' alone
        mine = cls.shell(ANN, 'ls "$INBOUND"')
        assert mine.returncode != 0 and "Permission denied" in mine.stderr, mine
        # a submission collect would refuse is refused at submit, with collect's sentence, and nothing is handed in;
        # then the student's terminal gives a fresh copy, their folder moved aside (learner/handin.py, fetch_again.py)
        handed_in = set(os.listdir(cls.inbound))
        assert cls.shell(ANN, f'mv ~/{A}/{A}.ipynb ~/{A}/{A}-Copy1.ipynb').returncode == 0
        refused = cls.student(ANN, "nbgrader", "submit", A, "--course", COURSE_ID, check=False)
        assert refused.returncode != 0 and (f"the instructor would refuse it: it holds no notebook of the assignment "
                                            f"({A}.ipynb); it holds {A}-Copy1.ipynb: the notebook must keep its name"
                                            in refused.stderr), refused.stderr
        assert set(os.listdir(cls.inbound)) == handed_in
        again = cls.student(ANN, "course", "fetch-again", A)
        home = pwd.getpwnam(ANN).pw_dir
        aside = [n for n in os.listdir(home) if n.startswith(f"{A}.moved-")]
        assert again.stdout.splitlines() == [f"moved your folder {A} to {aside[0]} (nothing in it was deleted)",
                                             f"fetched a fresh copy of {A} (course {COURSE_ID}) into {A}"], again
        assert f"{A}-Copy1.ipynb" in os.listdir(os.path.join(home, aside[0]))
        assert nbformat.writes(nbformat.read(os.path.join(home, A, A + ".ipynb"), as_version=4)) == release_text

        # the attacks, each from the attacker's own shell, each a later folder than their honest one
        home_nb = f"~/{A}/{A}.ipynb"
        hour_ago = later(-3600)
        untouched = os.path.join(pwd.getpwnam(FORGER).pw_dir, "untouched.ipynb")
        cls.write_notebook(FORGER, release, untouched)
        attacks = {
            FORGER: forged_folder(f"{ANN}+{A}+{later(5)}+forged1", later(5), untouched)
            + forged_folder(f"ckatk-nobody+{A}+{later(6)}", later(6), untouched),
            LINKER: forged_folder(f"{LINKER}+{A}+{later(5)}+links01", later(-7 * 86400), home_nb, f"""
ln -s {key} key
ln -s {targets['the gradebook']} gradebook.db
ln -s {targets['a reference module']} softmax.py.txt
ln -s {targets['the source notebook']} source.ipynb
ln -s {cls.course} course
ln -s /etc/shadow shadow
mkdir -p deep/er && ln -s {key} deep/er/key
ln {key} hardkey 2>/dev/null || true
echo '<h1>FAKE-FEEDBACK-PAGE: 16 / 16</h1>' > "$A.html"
echo '<h1>FAKE-FEEDBACK-PAGE</h1>' > other.html
"""),
            BIG: forged_folder(f"{BIG}+{A}+{later(5)}+big00001", later(5), home_nb, """
truncate -s 900M huge.bin
mkfifo pipe
mkdir -p a/b/c/d/e/f/g/h/i/j/k && echo deep > a/b/c/d/e/f/g/h/i/j/k/deep.txt
"""),
            # ODD's only submission is made by hand, its name and timestamp.txt an hour old (before the due date),
            # with the entry nbgrader's cache would have (so fetch_feedback finds the feedback)
            ODD: forged_folder(f"{ODD}+{A}+{hour_ago}", hour_ago, home_nb) + f"""
c=~/.local/share/jupyter/nbgrader_cache/{COURSE_ID}/"{ODD}+$A+{hour_ago}"
mkdir -p "$c" && cp "$d/$A.ipynb" "$d/timestamp.txt" "$d/submission_secret.txt" "$c/"
mkdir "$INBOUND/{ODD}+$A+not-a-time"
mkdir "$INBOUND/{ODD}+$A+{later(3 * 86400)}"
mkdir "$INBOUND/"'<img src=x onerror=alert(1)>'$'\\e''[2J+'"$A+{later(1)}"
touch "$INBOUND/{ODD}+$A+{later(2)}+plainfile"
ln -s ~/{A} "$INBOUND/{BO}+$A+{later(3)}+alinkxx1"
mkdir "$INBOUND/one+two+three+four+five"
""",
        }
        from nbgrader.api import Gradebook
        with Gradebook("sqlite:///" + os.path.join(cls.course, "gradebook.db"), course_id=COURSE_ID) as gb:
            now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
            gb.update_or_create_assignment(A, duedate=now - datetime.timedelta(minutes=30))
        for name, script in attacks.items():
            done = cls.shell(name, script)
            assert done.returncode == 0, f"{name}'s attack did not run:\n{done.stdout}\n{done.stderr}"

        collected = cls.instructor("collect", A)
        said = collected.stdout
        assert collected.returncode == 1, said + collected.stderr  # folders were refused
        assert "Traceback" not in said + collected.stderr, said + collected.stderr
        for name in STUDENTS:
            assert re.search(rf"^  {name}\s+(new|updated)\s+submitted", said, re.M), (name, said)
        assert re.search(rf"REFUSED: {ANN}\+{A}\+.*\+forged1 \(owned by {FORGER}\): it is owned by {FORGER}, "
                         rf"not by {ANN}", said), said
        assert re.search(rf"REFUSED: ckatk-nobody\+{A}\+.* \(owned by {FORGER}\): ckatk-nobody is not on the "
                         rf"course's roster", said), said
        for what in ("key", "gradebook.db", "softmax.py.txt", "source.ipynb", "course", "shadow", "deep/er/key"):
            assert re.search(rf"left out of {LINKER}'s submission: {re.escape(what)}: a link, never followed", said), \
                (what, said)
        assert re.search(rf"left out of {LINKER}'s submission: {A}.html: it has the name of a page that grading "
                         rf"writes", said), said
        assert re.search(rf"left out of {BIG}'s submission: huge.bin: 943.7 MB, over the limit of 10 MB a file", said)
        assert re.search(rf"left out of {BIG}'s submission: pipe: a pipe, not a regular file", said), said
        assert re.search(rf"left out of {BIG}'s submission: a/b/c/d/e/f/g/h/i/: deeper than 8 folders", said), said
        # a time in a name older than the folder itself is not believed: the folder's own change time counts
        assert re.search(rf"{ODD} +new +submitted .*; LATE by .*\n    note: its files changed after the time in its "
                         rf"name \(.*\): counted as submitted at .* UTC, when they last changed", said), said
        for name in (ANN, BO, FORGER, LINKER, BIG):  # submitted after the due date set above: late too, honestly
            assert re.search(rf"^  {name} .*; LATE by ", said, re.M), said
        assert re.search(rf"REFUSED: {ODD}\+{A}\+not-a-time \(owned by {ODD}\): the time in its name does not "
                         rf"parse", said), said
        assert re.search(rf"REFUSED: {ODD}\+{A}\+.* \(owned by {ODD}\): the time in its name, .* is in the future",
                         said), said
        # its name's escape sequence shown, not acted on
        assert re.search(rf"REFUSED: <img src=x onerror=alert\(1\)>\\x1b\[2J\+{A}\+.* \(owned by {ODD}\): the student "
                         rf"id in its name is not a valid id", said), said
        assert "\x1b" not in said
        assert re.search(rf"REFUSED: {ODD}\+{A}\+.*\+plainfile \(owned by {ODD}\): it is a file, not a folder", said)
        assert re.search(rf"REFUSED: {BO}\+{A}\+.*\+alinkxx1 \(owned by {ODD}\): it is a link, not a folder", said)
        assert re.search(rf"REFUSED: one\+two\+three\+four\+five \(owned by {ODD}\): its name is not "
                         rf"student\+assignment\+time", said), said
        refused = re.findall(r"^  REFUSED: (.*)", said, re.M)
        assert len(refused) == 8, said
        # the folders that claim to be another student's come first, then each student's own, then the rest
        assert [line.split(" (owned by")[0].split("+")[-1] for line in refused[:2]] == ["forged1", "alinkxx1"], said
        # every refused folder is still in the exchange, untouched; the second run says the same
        entries = set(os.listdir(cls.inbound))
        assert any(e.endswith("+forged1") for e in entries) and any(e.endswith("+plainfile") for e in entries)
        again = cls.instructor("collect", A)
        assert again.returncode == 1 and len(re.findall(r"^  REFUSED: ", again.stdout, re.M)) == 8, again.stdout
        for name in STUDENTS:
            assert re.search(rf"^  {name}\s+unchanged\s+submitted", again.stdout, re.M), (name, again.stdout)
        assert set(os.listdir(cls.inbound)) == entries

        # nothing of the instructor's files in submitted/
        # what the students hand in anyway (the answers are the reference), as cells' text and as the file's JSON
        known = "\n".join([release_text, nbformat.writes(right), *(c.source for c in release.cells + right.cells)])
        telling = {what: distinctive_lines(path, known) for what, path in targets.items() if what != "the gradebook"}
        assert all(telling.values()), telling  # something of each file that no honest submission holds
        telling["the SSH key"] = [key_text.splitlines()[1]]
        telling["the gradebook"] = [gradebook_token]
        for here, _, files in os.walk(os.path.join(cls.course, "submitted")):
            for name in files:
                assert not os.path.islink(os.path.join(here, name))
                with open(os.path.join(here, name), "rb") as f:
                    data = f.read().decode("utf-8", "replace")
                for what, lines in telling.items():
                    assert not any(line in data for line in lines), f"{what} in {os.path.join(here, name)}"

        # the instructor's `course grade` (a plain user: no control group of its own) in one the test makes, whose
        # peak says what BIG's 2 GB of output made the grading side hold
        from grader.slots import empty_group, make_group, memory_peak
        group = make_group(f"course-test-attacks-{os.getpid()}", 6 * 2 ** 30, parent="course-grading", nested=True)
        assert group, "no memory control group could be made here (as root, cgroup v1 or v2 with memory)"
        try:
            graded = cls.instructor("grade", A, "-j", "2", "--no-progress", group=group)
            peak = memory_peak(group)
        finally:
            for g in group:
                empty_group(g)
        assert graded.returncode == 0, graded.stdout + graded.stderr
        print(f"the instructor's grading side peaked at {peak / 2 ** 30:.2f} GB")
        assert peak < GRADING_PEAK, f"the instructor's grading held {peak / 2 ** 30:.2f} GB"
        assert f"{BIG} / {A}: output: cell 3: its output passed the cap of 8 MB a cell" in graded.stdout, graded.stdout
        assert "the grading side: each worker's nbgrader process in an address-space limit (3 GB, RLIMIT_AS" in \
            graded.stdout, graded.stdout
        returned = cls.instructor("return", A)
        assert returned.returncode == 0, returned.stdout + returned.stderr
        for name in STUDENTS:
            cls.student(name, "nbgrader", "fetch_feedback", A, "--course", COURSE_ID)
        scores = {}
        for name in STUDENTS:
            folder = os.path.join(pwd.getpwnam(name).pw_dir, A, "feedback")
            pages = [os.path.join(h, f) for h, _, fs in os.walk(folder) for f in fs]
            # the page grading wrote, and nothing else: not the submission's own A.html or other.html
            assert pages and {os.path.basename(p) for p in pages} == {f"{A}.html"}, (name, pages)
            text = ""
            for page in pages:
                with open(page, encoding="utf-8", errors="replace") as f:
                    raw = f.read()
                assert raw.startswith("<!DOCTYPE html>") and "Content-Security-Policy" in raw[:500], (name, raw[:200])
                text += html.unescape(raw)
            for what, lines in telling.items():
                leaked = [line for line in lines if line in text]
                assert not leaked, f"{what} reached {name}'s feedback: {leaked[:2]}"
            score = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", text)
            scores[name] = (float(score.group(1)), float(score.group(2)))
        # the honest students, and the attackers whose own answers are right, keep full marks; the forged folder
        # under ANN's name took nothing from her
        assert scores == {name: (total, total) for name in STUDENTS}, scores
        big_page = "".join(open(os.path.join(h, f)).read() for h, _, fs in
                           os.walk(os.path.join(pwd.getpwnam(BIG).pw_dir, A, "feedback")) for f in fs)
        assert "[Output cut: cell 3&#39;s output passed the grader&#39;s cap of 8 MB a cell" in big_page or \
            "[Output cut: cell 3's output passed the grader's cap of 8 MB a cell" in big_page
        linker_page = "".join(open(os.path.join(h, f)).read() for h, _, fs in
                              os.walk(os.path.join(pwd.getpwnam(LINKER).pw_dir, A, "feedback")) for f in fs)
        assert "FILE ./timestamp.txt" in html.unescape(linker_page)  # its printing cell ran, and found only its own

        # what each folder of the exchange lets a student do, tried by BO knowing ANN's names
        ann_submission = next(e for e in os.listdir(cls.inbound) if e.startswith(f"{ANN}+{A}+")
                              and not e.endswith("forged1"))
        ann_cache = os.path.join(pwd.getpwnam(ANN).pw_dir, ".local/share/jupyter/nbgrader_cache", COURSE_ID)
        secret = open(os.path.join(ann_cache, os.listdir(ann_cache)[0], "submission_secret.txt")).read()
        from nbgrader.utils import notebook_hash
        ann_page = os.path.join(cls.exchange, COURSE_ID, "feedback", notebook_hash(secret=secret, notebook_id=A)
                                + ".html")
        assert os.path.isfile(ann_page)
        sub = os.path.join(cls.inbound, ann_submission)
        tries = {
            "list the inbound": f'ls "$INBOUND"',
            "list ANN's submission": f"ls '{sub}'",
            "read ANN's notebook": f"cat '{sub}/{A}.ipynb'",
            "write into ANN's submission": f"touch '{sub}/extra.txt'",
            "replace ANN's notebook": f"cp ~/{A}/{A}.ipynb '{sub}/{A}.ipynb'",
            "rename ANN's submission": f"mv '{sub}' '{cls.inbound}/renamed'",
            "remove ANN's submission": f"rm -rf '{sub}'",
            "read ANN's feedback": f"cat '{ann_page}'",
            "replace ANN's feedback": f"cp ~/{A}/{A}.ipynb '{ann_page}'",
            "list the feedback": f"ls '{os.path.dirname(ann_page)}'",
            "add to the outbound": f"touch '{os.path.join(cls.exchange, COURSE_ID, 'outbound', A, 'x')}'",
            "move the course's folder aside": f"mv '{os.path.join(cls.exchange, COURSE_ID)}' '{cls.exchange}/moved'",
            "read ANN's fetched copy": f"cat ~{ANN}/{A}/{A}.ipynb",
            "read the collected submissions": f"ls '{os.path.join(cls.course, 'submitted')}'",
            "make a course of their own": f"mkdir '{cls.exchange}/zz-fake'",
            "make an outbound of their own": f"mkdir -p '{cls.exchange}/{COURSE_ID}/outbound/zz'",
        }
        for what, script in tries.items():
            proc = cls.shell(BO, script)
            assert proc.returncode != 0 and re.search("Permission denied|Operation not permitted", proc.stderr), \
                f"{BO} could {what}: {proc.stdout}{proc.stderr}"
        assert os.path.isdir(sub) and os.path.isdir(os.path.join(cls.exchange, COURSE_ID))
        # while ANN herself reads her own feedback page in the exchange
        mine = cls.shell(ANN, f"head -c 15 '{ann_page}'")
        assert mine.returncode == 0 and mine.stdout.startswith("<!DOCTYPE"), mine

        # an invented course (as one left from before the exchange's root was closed): the forger's, its release a
        # link to ANN's own notebook in her home. ANN never sees it, a fetch from it is refused by her course list,
        # and a fetch follows no link in any case
        fake = os.path.join(cls.exchange, "zz-fake", "outbound", A)
        os.makedirs(fake)
        os.symlink(os.path.join(pwd.getpwnam(ANN).pw_dir, A, A + ".ipynb"), os.path.join(fake, A + ".ipynb"))
        subprocess.run(["chown", "-hR", f"{FORGER}:{FORGER}", os.path.join(cls.exchange, "zz-fake")], check=True)
        listed = cls.student(ANN, "nbgrader", "list")
        assert f"{COURSE_ID} {A}" in listed.stdout + listed.stderr and "zz-fake" not in listed.stdout + listed.stderr, \
            listed.stdout + listed.stderr
        fetched = cls.student(ANN, "nbgrader", "fetch_assignment", A, "--course", "zz-fake", check=False)
        assert fetched.returncode != 0 and "You do not have access to this course" in fetched.stderr, fetched.stderr
        env = cls.env(ANN, f"JUPYTER_CONFIG_PATH={cls.roles['student']}", f"PYTHONPATH={cls.packages}")
        os.makedirs(os.path.join(pwd.getpwnam(ANN).pw_dir, "elsewhere"), exist_ok=True)
        subprocess.run(["chown", f"{ANN}:", os.path.join(pwd.getpwnam(ANN).pw_dir, "elsewhere")], check=True)
        unlisted = subprocess.run(["runuser", "-u", ANN, "--", *env, "nbgrader", "fetch_assignment", A, "--course",
                                   "zz-fake"], cwd=os.path.join(pwd.getpwnam(ANN).pw_dir, "elsewhere"),
                                  capture_output=True, text=True, timeout=300)
        # (without the course list, in a shell of her own, the link is still never followed: nothing of hers is copied)
        fetched_copy = os.path.join(pwd.getpwnam(ANN).pw_dir, "elsewhere", A)
        assert f"Left out of the assignment: '{A}.ipynb': a link" in unlisted.stderr, unlisted.stderr
        assert not os.path.exists(os.path.join(fetched_copy, A + ".ipynb"))
    finally:
        restore_modes(reference_modes)
        remove_users([TEACH, *STUDENTS])
