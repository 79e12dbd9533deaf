"""nbgrader pieces the course's configuration plugs in.

* ``SandboxedExecute`` runs the student's notebook in a kernel inside the
  sandbox (``SandboxedKernelManager``: ``grader.sandbox`` around ipykernel, ZMQ
  over ``ipc`` sockets in a folder of its own, so no shared network is needed).
  That kernel sees a scratch copy of the submission and nothing else of the
  course: not ``source/``, not the gradebook, not the reference, and it never
  runs the graded test cells (the verdict below grades them), so it never sees
  the hidden tests. A kernel that dies, or a cell still busy after its time
  limit and the interrupt, stops the run of that notebook with a note in the
  cell, not the grading of the submission or the class.
* ``TrustedVerdict`` runs after it: ``grader.judge`` grades every graded cell
  from outside (reference here, student's functions in a sandboxed worker) and
  *replaces* the cell's outputs with that verdict, so nbgrader records it and
  nothing the kernel printed or returned. Faults (a dead kernel or worker, a
  time-out, a refused output) are written in the notebook's metadata and in
  ``grading_log.jsonl`` beside the gradebook (``grader.graded``: the log's one writer).
* ``ShortenTracebacks`` keeps feedback to the messages.
"""
import ast
import functools
import json
import logging
import os
import queue
import shutil
import subprocess
import tempfile
import time

import nbformat
import nbgrader.api
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Integer, Unicode

from . import audit, judge, sandbox, seeds
from .output_caps import UNCOUNTED, MB, CappedKernelClient, OutputBudget, content_bytes, cut_line
from .graded import append_log, log_record
from .plain import inert
from learner.syllabus import version

# ------------------------------------------------------------------ a new gradebook without a subprocess
@functools.cache
def alembic_head():
    """The revision nbgrader stamps on a new gradebook, read in this process. nbgrader's own
    ``get_alembic_version`` runs the ``alembic heads`` command for it (about 2 s of CPU) each time it creates a
    gradebook: once per course copy, worker and template release when a class is graded."""
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR
    return ScriptDirectory(ALEMBIC_DIR).get_current_head()


nbgrader.api.get_alembic_version = alembic_head  # every nbgrader process of the course loads this module (config)


# ------------------------------------------------------------------ the kernel, sandboxed
class SandboxedKernelManager(AsyncKernelManager):
    """An ipykernel inside the sandbox, reached through ipc sockets in a private folder."""

    _box = None
    boxes = []  # the folders of the kernels started; SandboxedExecute reads their notes and removes them
    slots = []  # their sandboxes' own users and control groups (sandbox.claim), released with them
    INSIDE = "/run/course-kernel"  # where the kernel's folder is, seen from inside its sandbox
    message_bytes = 16 * MB  # the most one part of a message from the kernel may hold (SandboxedExecute sets it)

    def close_box(self):
        """The kernel's folder on the host (its sockets, its connection files) no longer writable by the sandbox's
        user once the kernel is up: its sockets are made, and nothing else of it may grow on the host's disk."""
        if self._box is None or os.geteuid() != 0:
            return
        for name in ("kernel.json", "inside.json"):
            path = os.path.join(self._box, name)
            if os.path.exists(path):
                os.chown(path, 0, 0)
                os.chmod(path, 0o644)
        os.chmod(self._box, 0o711)

    def client(self, **kwargs):
        """A client whose sockets bound what the kernel can make this process receive (``CappedKernelClient``)."""
        kw = dict(self.get_connection_info(session=True), connection_file=self.connection_file, parent=self,
                  message_bytes=self.message_bytes)
        kw.update(kwargs)
        return CappedKernelClient(**kw)

    async def _async_pre_start_kernel(self, **kw):
        if sandbox.isolated():
            sandbox.bwrap_path()  # stops here, naming the package, when bwrap is missing
            base = tempfile.gettempdir()
            if len(os.path.join(base, "course-kernel-12345678", "k-99")) > 100:  # a socket's path: 107 bytes at most
                base = "/tmp"
            self._box = tempfile.mkdtemp(prefix="course-kernel-", dir=base)
            SandboxedKernelManager.boxes.append(self._box)
            os.chmod(self._box, 0o711)
            self.transport = "ipc"
            self.ip = os.path.join(self._box, "k")
            self.connection_file = os.path.join(self._box, "kernel.json")
            if self.kernel_spec is not None:
                # interrupt over the control channel: a SIGINT to the process group would reach bwrap, not the kernel
                self.kernel_spec.interrupt_mode = "message"
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        if self._box is not None:
            scratch = os.path.join(self._box, "work")
            source = kw.get("cwd") or os.getcwd()
            shutil.copytree(source, scratch, ignore=shutil.ignore_patterns("*.ipynb", ".ipynb_checkpoints"))
            slot = sandbox.claim()
            SandboxedKernelManager.slots.append(slot)
            sandbox.prepare_folder(scratch, slot.uid)
            # the kernel reads a connection file that names its folder as the sandbox mounts it (INSIDE): the
            # sockets are the same files, and its command line names no folder of the grading machine
            with open(self.connection_file) as f:
                info = json.load(f)
            info["ip"] = os.path.join(self.INSIDE, os.path.relpath(info["ip"], self._box))
            inside = os.path.join(self._box, "inside.json")
            with open(inside, "w") as f:
                json.dump(info, f)
            if os.geteuid() == 0:
                for path in (self.connection_file, inside):
                    os.chown(path, slot.uid, slot.uid)
                os.chmod(self._box, 0o777)
            kernel_cmd = [os.path.join(self.INSIDE, "inside.json") if a == self.connection_file else a
                          for a in kernel_cmd]
            if kernel_cmd[1:3] == ["-m", "ipykernel_launcher"]:
                kernel_cmd = [kernel_cmd[0], "-m", "grader.audit", *kernel_cmd[3:]]  # notes what the sandbox refused
            kernel_cmd = sandbox.command(kernel_cmd, scratch, binds=[(self._box, self.INSIDE)], slot=slot)
            kw["cwd"] = self._box
            kw.pop("env", None)
            # its standard streams go nowhere: inherited, they were the nbgrader process's log, which a student's
            # os.write(2, ...) could fill for every later student and read back (its outputs come as messages)
            kw["stdout"] = kw["stderr"] = subprocess.DEVNULL
        return await super()._async_launch_kernel(kernel_cmd, **kw)



class _ShortLines(logging.Filter):
    """nbclient's log lines while it runs a student's kernel quote what the kernel sent (a message type, a comm's
    target): each is one inert line of at most 300 characters."""

    def filter(self, record):
        if f"{os.sep}nbclient{os.sep}" in (record.pathname or ""):
            record.msg, record.args = inert(record.getMessage()[:300]), ()
        return True


class SandboxedExecute(Execute):
    """nbgrader's Execute, with the kernel in the sandbox; a dead kernel ends the run of this notebook only. What the
    kernel's outputs may make this process hold is capped while they arrive (``grader.output_caps``)."""

    max_cell_output_mb = Integer(8, help="MB of output one cell keeps (text, images, any MIME type, widget state, "
                                          "counted as they arrive); past it the cell's output is cut, with a line "
                                          "that says so").tag(config=True)
    max_notebook_output_mb = Integer(24, help="MB of output the whole notebook keeps; past it every later output "
                                              "is cut").tag(config=True)

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)
        # no output widget mimicked: nbclient's copied every output back to the kernel, uncounted, for each output
        self.widget_registry = {}
        if not any(isinstance(f, _ShortLines) for f in self.log.filters):
            self.log.addFilter(_ShortLines())

    async def async_start_new_kernel_client(self):
        """nbclient's, then the kernel's folder closed (``SandboxedKernelManager.close_box``) now that the kernel has
        answered and made its sockets, before any cell of the student's runs."""
        kc = await super().async_start_new_kernel_client()
        if isinstance(self.km, SandboxedKernelManager):
            self.km.close_box()
        return kc

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        # one message is never more than one cell may keep: a larger one is dropped before it is read
        km.message_bytes = self.max_cell_output_mb * MB
        return km

    def preprocess(self, nb, resources=None, km=None):
        self._dead = None
        self._interrupts = set()  # the ids of interrupts sent to a cell past its cap, not yet answered
        self._budget = OutputBudget(self.max_cell_output_mb * MB, self.max_notebook_output_mb * MB)
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            refused = []
            while SandboxedKernelManager.boxes:
                box = SandboxedKernelManager.boxes.pop()
                refused += audit.read(os.path.join(box, "work"))
                shutil.rmtree(box, ignore_errors=True)
            while SandboxedKernelManager.slots:
                SandboxedKernelManager.slots.pop().release()
        faults = nb.metadata.setdefault("course", {}).setdefault("faults", [])
        if self._dead:
            faults.append(list(self._dead))
        for index, cell in enumerate(nb.cells):
            for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
                # an error that is the sandbox's limits' doing, not the student's logic: recorded for the instructor
                # (a cell past its time limit is recorded once, as what stopped the notebook)
                limit = sandbox.limit_fault(out.get("ename"), out.get("evalue", "")) \
                    if out.get("output_type") == "error" else None
                if limit:
                    said = str(out.get("evalue", ""))[:200]
                    faults.append([limit[0], f"cell {index} in the kernel: {str(out.get('ename'))[:100]}"
                                             f"{': ' + said if said else ''} ({limit[1]})"])
        for kind, what in dict.fromkeys(refused):
            faults.append(["blocked", f"{kind}: {what}"])
        faults += [list(f) for f in self._budget.faults()]
        nb.metadata["course"]["largest_cell_output_bytes"] = self._budget.largest
        nb.metadata["course"]["output_bytes"] = self._budget.total
        return nb, resources

    def _copies(self, msg):
        """How many outputs ``msg`` is written into: one, and every earlier output with its display id (nbclient
        updates them all)."""
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        transient = content.get("transient")
        display_id = transient.get("display_id") if isinstance(transient, dict) else None
        if not display_id or not isinstance(display_id, str):
            return 1
        return 1 + sum(len(v) for v in self._display_id_map.get(display_id, {}).values())

    def process_message(self, msg, cell, cell_index):
        """nbclient's, with each output counted against the caps as it arrives (``OutputBudget``): past one, the
        message is dropped and the cell says once which cap cut it."""
        content = msg.get("content")
        if isinstance(content, dict) and "execution_count" in content and \
                not isinstance(content["execution_count"], (int, type(None))):
            content["execution_count"] = None  # nbclient copies it into the cell from any message: a number only
        if msg.get("msg_type") not in UNCOUNTED:
            budget = self._budget
            cut_before = cell_index in budget.cut
            if not budget.take(cell_index, content_bytes(msg) * self._copies(msg)):
                if not cut_before:
                    self._say_cut(cell, cell_index)
                    self._stop_flood(cell_index)
                return None
        try:
            return super().process_message(msg, cell, cell_index)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # a message the kernel (the student's code) made malformed, such as a widget's comm without its model:
            # nbclient would stop the whole grading of the submission; it is dropped
            self.log.warning("dropped a malformed message from cell %s: %s", cell_index, type(exc).__name__)
            return None

    def _say_cut(self, cell, index):
        """The line that says which cap cut cell ``index``, added once to its outputs."""
        whole = self._budget.cut[index]
        cap = (self._budget.notebook_bytes if whole else self._budget.cell_bytes) / MB
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=cut_line(index, cap, whole)))

    def on_cell_executed(self, **kwargs):
        """nbgrader's (an error the cell's reply gives that its outputs lack is added to them), with that error
        counted against the caps too: it came on the shell channel, past the output budget, up to one message's
        size a cell. A cut cell gets none: its line says what stopped it (the interrupt's KeyboardInterrupt, or
        whatever the student raised past the cap)."""
        cell, index = kwargs["cell"], kwargs.get("cell_index")
        before = len(cell.outputs)
        super().on_cell_executed(**kwargs)
        added = cell.outputs[before:]
        del cell.outputs[before:]
        for out in added:
            if index in self._budget.cut:
                return
            if self._budget.take(index, content_bytes({"content": out})):
                cell.outputs.append(out)
            else:
                self._say_cut(cell, index)

    def _stop_flood(self, index):
        """The kernel interrupted once a cell's output passes a cap: whatever it still meant to print would only be
        made, sent and thrown away (2 GB of it cost minutes of both processes' time). Its grade is not at stake: the
        checks run the cells again, apart. The interrupt goes over the control channel, and the next cell waits for
        its reply (``_interrupted``): by then the kernel has sent itself the SIGINT, which it ignores between cells,
        so it cannot land on the next cell (it did, on a busy machine, when the next cell was sent first)."""
        if self.kc is None:
            return
        msg = self.kc.session.msg("interrupt_request", {})
        self.kc.control_channel.send(msg)
        self._interrupts.add(msg["header"]["msg_id"])

    def _interrupted(self, seconds=10):
        """Wait (``seconds`` at most) for the replies to the interrupts ``_stop_flood`` sent."""
        end = time.monotonic() + seconds
        while self._interrupts and time.monotonic() < end:
            try:
                msg = run_sync(self.kc.control_channel.get_msg)(timeout=max(0.1, end - time.monotonic()))
            except queue.Empty:
                break
            self._interrupts.discard((msg.get("parent_header") or {}).get("msg_id"))
        if self._interrupts:
            self.log.warning("no reply to the interrupt of a cell past its output cap within %s s", seconds)
        self._interrupts.clear()

    def preprocess_cell(self, cell, resources, index):
        if self._dead:
            return cell, resources
        if _is_test_cell(cell):
            # graded from outside (TrustedVerdict), never run here: the student's kernel does not see the hidden
            # tests, and the checks are not computed twice
            cell.outputs = []
            return cell, resources
        started = time.monotonic()
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            if self._interrupts:
                self._interrupted()
            if self._message_dropped(index):
                return self._cut_off(cell), resources
            if any(out.get("ename") == "CellTimeoutError" for out in cell.get("outputs", [])):
                # the grade is decided outside the kernel; one hung cell is all a submission may cost
                self._dead = ("timeout", f"cell {index} ran past its time limit ({self.timeout} s) in the kernel; the "
                                         f"cells after it were not run")
            return cell, resources
        except DeadKernelError:
            self._dead = ("kernel", f"the kernel died while running cell {index} (something called exit or os._exit, "
                                    f"crashed the interpreter, or ran past the memory limit); the cells after it were "
                                    f"not run")
            return self._stopped(cell, "DeadKernelError"), resources
        except CellTimeoutError as exc:
            if self._message_dropped(index):  # nothing more came on the closed socket: not a time-out
                return self._cut_off(cell), resources
            if "Timeout waiting for IOPub output" in str(exc) and time.monotonic() - started < (self.timeout or 0):
                self._dead = ("output", f"cell {index} finished, but its outputs were still arriving "
                                        f"{self.iopub_timeout} s later (more than the grader reads); the cells after "
                                        f"it were not run")
                return self._cut_off(cell), resources
            # still busy after the interrupt (a loop that ignores it, or seconds of C code such as zeroing gigabytes
            # of pages): nbgrader would give up on the whole submission; the grade is decided outside the kernel
            self._dead = ("timeout", f"cell {index} ran past its time limit ({self.timeout} s) in the kernel and did "
                                     f"not stop when interrupted; the cells after it were not run")
            return self._stopped(cell, "CellTimeoutError"), resources

    def _message_dropped(self, index):
        """True (and the notebook stopped) when cell ``index`` sent a message over the cap on one message: the
        socket that refused it was closed with it, so nothing more of the kernel can be read."""
        dropped = self.kc.dropped() if isinstance(self.kc, CappedKernelClient) else []
        if not dropped or not run_sync(self.km.is_alive)():  # a kernel that died closes them too: said as such
            return False
        self._dead = ("output", f"cell {index} sent the grader one message of more than {self.max_cell_output_mb} "
                                f"MB, the cap of a cell's output; it was dropped unread, and the cells after it were "
                                f"not run")
        return True

    def _cut_off(self, cell):
        """``cell`` with the line that says why the notebook stopped there (``self._dead``), in place of an error."""
        cell.outputs = [o for o in cell.outputs if o.get("ename") != "CellTimeoutError"]
        cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=f"[Output cut: {self._dead[1]}.]\n"))
        return cell

    def _stopped(self, cell, ename):
        """``cell`` with what stopped the notebook (``self._dead``: (fault kind, words)) as its last output."""
        words = self._dead[1]
        cell.outputs.append(nbformat.v4.new_output("error", ename=ename, evalue=words, traceback=[f"{ename}: {words}"]))
        return cell


# ------------------------------------------------------------------ the verdict, trusted
def _is_test_cell(cell):
    md = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and bool(md.get("grade")) and not md.get("solution")


def _is_learner_code(cell):
    from learner.definitions import is_learner_code  # one rule, which `course progress` keeps too
    return is_learner_code(cell)


def _check_calls(source):
    """(exercise, function name, part) of every ``check(...)`` call in a test cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "check":
            args = node.args
            part = next((k.value.value for k in node.keywords if k.arg == "part"), "basic")
            if len(args) >= 2 and isinstance(args[0], ast.Constant) and isinstance(args[1], ast.Name):
                calls.append((args[0].value, args[1].id, part))
    return calls


def _error_output(message):
    return nbformat.v4.new_output("error", ename="CheckFailed", evalue=message, traceback=[f"CheckFailed: {message}"])


def _passed_output(text):
    return nbformat.v4.new_output("stream", name="stdout", text=(text or "PASSED") + "\n")


class TrustedVerdict(NbGraderPreprocessor):
    """Every graded cell's outputs become the judge's verdict: PASSED lines, or one error."""

    timeout = Integer(1800, help="seconds the judge of one notebook may take").tag(config=True)
    course_root = Unicode("", help="folder of the gradebook; grading_log.jsonl goes there").tag(config=True)

    def preprocess(self, nb, resources):
        cells = [c.source for c in nb.cells if _is_learner_code(c)]
        checks, graded = [], {}
        for i, cell in enumerate(nb.cells):
            md = cell.metadata.get("nbgrader", {})
            if _is_test_cell(cell):
                calls = _check_calls(cell.source)
                graded[md["grade_id"]] = i
                checks += [[md["grade_id"], *c] for c in calls]
        prelude = next((c.source for c in nb.cells if c.cell_type == "code"
                        and c.metadata.get("nbgrader", {}).get("grade_id") == "setup"), None)
        info = resources.get("nbgrader", {})
        seed = seeds.student_seed(info.get("student") or "", info.get("assignment") or "")
        verdict = self._judge({"prelude": prelude, "cells": cells, "checks": checks, "seed": seed}) if checks \
            else {"results": {}}
        if "error" in verdict:
            raise RuntimeError(f"grading stopped: {verdict['error']}")
        results = verdict["results"]
        for grade_id, index in graded.items():
            ok, message = results.get(grade_id, (False, "this cell has no check the grader can run"))
            nb.cells[index].outputs = [_passed_output(message) if ok else _error_output(message)]
        course = nb.metadata.setdefault("course", {})
        faults = course.setdefault("faults", []) + [list(f) for f in verdict.get("faults", [])]
        made_with, grading_with = nb.metadata.get("course_version"), version()
        if made_with and made_with != grading_with:  # a release of another version of the course
            faults.append(["version", f"the notebook was released with course version {made_with}; it is graded "
                                      f"with version {grading_with}"])
        faults = [list(f) for f in dict.fromkeys(tuple(f) for f in faults)]  # the kernel and the worker may both note one
        course["faults"] = faults
        course["isolated"] = verdict.get("isolated", True)
        course["seed"] = seed  # the instructor's copy says which hidden cases this grade was decided on
        root = self.course_root or os.getcwd()
        seeds.record(root, info.get("student"), info.get("assignment"), seed)
        if faults or not course["isolated"]:
            append_log(root, log_record(info.get("student"), info.get("assignment"), info.get("notebook"), seed,
                                        faults, isolated=course["isolated"]))
        return nb, resources

    def _judge(self, request):
        """The judge's verdict (``grader.judge``: the file its forked child wrote), or one that says why none came."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "JPY_"))}
        judged = judge.judge(request, env, self.timeout)
        if judged.code is None:
            return {"results": {}, "faults": [["timeout", f"grading this notebook took over {self.timeout} s"]]}
        if judged.verdict is not None:
            return judged.verdict
        self.log.error("the judge printed no verdict (exit status %s); stderr:\n%s", judged.code,
                       judged.stderr[-3000:])
        return {"results": {}, "faults": [["judge", "the grader printed no verdict: " + judged.stderr[-300:]]]}


class StampVersion(NbGraderPreprocessor):
    """A release carries the course version (``course_version`` in its metadata), so that grading can say by name
    when a submission was made from a release of another version; and the language the course's kernel reports,
    whole, so that JupyterLab, which writes the kernel's ``language_info`` into a notebook it opens, finds nothing to
    change: an untouched notebook opens unmodified and closes without "Save changes?"."""

    def preprocess(self, nb, resources):
        nb.metadata["course_version"] = version()
        nb.metadata["language_info"] = kernel_language_info()
        return nb, resources


def kernel_language_info():
    """The ``language_info`` that this install's Python kernel (ipykernel) reports on connecting."""
    from ipykernel.ipkernel import IPythonKernel
    return json.loads(json.dumps(IPythonKernel.language_info))


class ShortenTracebacks(NbGraderPreprocessor):
    """Feedback: every error as one line, never a stack.

    A failed test cell shows its message only: IPython's traceback quotes the cell's source, hidden-test lines
    included, and the message (what the grader says about the learner's function) is what feedback needs. Any
    other cell that stopped (a plot cell that calls a function still left as its stub) says that it stopped and
    why: its stack would point into the course's modules, at lines the learner never wrote.
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        graded = cell.metadata.get("nbgrader", {}).get("grade")
        for out in cell.get("outputs", []):
            if out.get("output_type") != "error":
                continue
            name, value = out.get("ename", "Error"), out.get("evalue", "")
            if graded:
                out["traceback"] = [f"{name}: {value}"]
            elif name == "NotImplementedError" and not value:
                out["traceback"] = ["This cell stopped with NotImplementedError: a function it calls is still its "
                                    "stub (write the exercise above it, then run the cell again)."]
            else:
                limit = sandbox.limit_fault(name, value)  # the grading sandbox's limit, said in its own words
                out["traceback"] = [(f"This cell stopped with {name}: {value}" if value else
                                     f"This cell stopped with {name}.") + (f" ({limit[1]})" if limit else "")]
        return cell, resources
