"""What a graded notebook's outputs may make the grader hold (``grader.output_caps``), driven through the real sandboxed
kernel (``SandboxedExecute``): each MIME type and each way of sending (many pieces, one piece over the cap, display
updates, widget state) is cut at the caps while it arrives, with a line naming the cell and the cap, and the process
that receives it (this one, here) grows by a bounded amount. The class graded with attackers beside honest students,
with the grading side's memory read, is tests/coursekit/pipeline/test_output_flood.py."""
import os
import threading

import nbformat
import pytest

from grader.nbgrader_plugin import SandboxedExecute
from grader.output_caps import MB, OutputBudget, content_bytes

pytestmark = pytest.mark.timeout(600)

CELL_MB, NOTEBOOK_MB = 2, 5


def run(tmp_path, *cells, timeout=120):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    ex = SandboxedExecute(timeout=timeout, interrupt_on_timeout=True, iopub_timeout=5,
                          max_cell_output_mb=CELL_MB, max_notebook_output_mb=NOTEBOOK_MB)
    nb, _ = ex.preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    return nb, nb.metadata["course"]["faults"]


def kept(cell):
    return content_bytes({"content": cell.outputs})


def cut_lines(cell):
    return [o.text for o in cell.outputs if o.get("output_type") == "stream" and o.text.startswith("[Output cut")]


# each floods about 60 MB in its own way, 30 times the cell's cap
FLOODS = {
    "text in 1 MB pieces": "for _ in range(60):\n    print('x' * 2 ** 20)",
    "text in many small pieces": "import sys\nfor _ in range(60 * 64):\n    sys.stdout.write('y' * 2 ** 14 + '\\n')",
    "stderr": "import sys\nfor _ in range(60):\n    print('e' * 2 ** 20, file=sys.stderr)",
    "images": ("from IPython.display import display\nimport base64\npng = base64.b64encode(b'\\x89PNG' + bytes(2 ** 20))"
               ".decode()\nfor _ in range(60):\n    display({'image/png': png}, raw=True)"),
    "html": "from IPython.display import HTML, display\nfor _ in range(60):\n    display(HTML('<b>' + 'h' * 2 ** 20))",
    "json": ("from IPython.display import display\nfor _ in range(60):\n"
             "    display({'application/json': {'k': ['v' * 2 ** 16] * 16}}, raw=True)"),
    "an unknown MIME type": ("from IPython.display import display\nfor _ in range(60):\n"
                             "    display({'application/x-mine': 'm' * 2 ** 20}, raw=True)"),
    "a result": "class R:\n    def _repr_html_(self):\n        return 'r' * 60 * 2 ** 20\nR()",
    "display updates": ("from IPython.display import display, update_display\nh = display('a', display_id=True)\n"
                        "for _ in range(60):\n    h.update({'text/plain': 'u' * 2 ** 20}, raw=True)"),
    "widget state": ("from ipykernel.comm import Comm\nfor i in range(60):\n"
                     "    Comm(target_name='jupyter.widget', data={'state': {'_model_module': '@jupyter-widgets/base',"
                     " '_model_name': 'LayoutModel', '_model_module_version': '2.0.0', 'v': 'w' * 2 ** 20}})"),
    "malformed widgets": ("from ipykernel.comm import Comm\nfor i in range(60):\n"
                          "    Comm(target_name='jupyter.widget', data={'state': {'v': 'w' * 2 ** 20}})"),
    # what a count of characters alone would miss (found by a review that had not seen the caps)
    "empty containers": ("from IPython.display import display\nfor _ in range(60):\n"
                         "    display({'text/plain': 'x'}, metadata={'m': [[]] * 200000}, raw=True)"),
    "a made-up execution count": ("k = get_ipython().kernel\nfor _ in range(60):\n    k.session.send(k.iopub_socket, "
                                  "'execute_input', {'code': '', 'execution_count': 'e' * 2 ** 20}, "
                                  "parent=k.get_parent())"),
    "one display id updated everywhere": ("from IPython.display import display, update_display\nfor _ in range(60):\n"
                                          "    display('a', display_id='d')\n"
                                          "update_display({'text/plain': 'u' * 2 ** 19}, display_id='d', raw=True)"),
    "newlines": "for _ in range(60):\n    print('\\n' * 500000)",
    "an output widget": ("from ipykernel.comm import Comm\nc = Comm(target_name='jupyter.widget', data={'state': {"
                         "'_model_module': '@jupyter-widgets/output', '_model_name': 'OutputModel', "
                         "'_model_module_version': '1.0.0', 'msg_id': get_ipython().kernel.get_parent()['header']"
                         "['msg_id']}})\nfor _ in range(60):\n    print('o' * 2 ** 20, flush=True)"),
    "clear and print again": ("from IPython.display import clear_output\nfor _ in range(60):\n"
                              "    clear_output(wait=True)\n    print('c' * 2 ** 20)"),
}


class Peak:
    """The most resident memory this process held above where it started, sampled every 20 ms while in ``with``."""

    def __enter__(self):
        self.start, self.peak, self.done = rss(), 0, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        while not self.done.wait(0.02):
            self.peak = max(self.peak, rss() - self.start)

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.pipeline
@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_a_flood_of_output_is_cut_with_a_line_naming_the_cell_and_the_cap(tmp_path, kind):
    """Cut at the cell's cap as it arrives; or, where the kernel sent more than the cap in one message (ipykernel
    joins what a cell prints within 0.2 s into one), dropped unread, the notebook stopped there. Either way one line
    names the cell and the cap, the grading log says it, and this process held a few MB more, not 60."""
    with Peak() as peak:
        nb, faults = run(tmp_path, "print('before')", FLOODS[kind], "print('after')")
    flood = nb.cells[1]
    assert kept(flood) <= CELL_MB * MB + 4096, (kind, kept(flood))
    lines, said = cut_lines(flood), [words for fault, words in faults if fault == "output"]
    assert flood.execution_count is None or isinstance(flood.execution_count, int)
    assert peak.peak < 40 * MB, f"{kind}: this process grew by {peak.peak / MB:.0f} MB while 60 MB arrived"
    if kind == "a made-up execution count" and not lines:  # sent past the cell's end: read by no one, kept nowhere
        assert kept(flood) < 64 * 2 ** 10 and not said, (kept(flood), said)
        return
    # cut at the cell's cap; then, when reading what came took the grader past the wait for outputs, or a message
    # passed the cap, the notebook stopped there too: one or two lines, each naming the cell and its cap
    assert lines[0] in (f"[Output cut: cell 1's output passed the grader's cap of {CELL_MB} MB a cell; the cell was "
                        f"stopped there and the rest of its output not kept. The checks grade your functions all the "
                        f"same: they run your cells again, apart.]\n", f"[Output cut: {said[-1]}.]\n")
    assert len(lines) == len(said) <= 2 and all("cell 1" in words for words in said), (kind, lines, said)
    stopped = any(w.startswith("cell 1 sent the grader one message of more than") or "still arriving" in w
                  for w in said)
    assert "".join(o.text for o in nb.cells[2].outputs) == ("" if stopped else "after\n"), (kind, said)
    assert [o.text for o in nb.cells[0].outputs] == ["before\n"]
    assert flood.execution_count is None or isinstance(flood.execution_count, int)
    assert len(nbformat.writes(nb)) < (CELL_MB + 1) * MB  # the notebook written from what was kept
    assert peak.peak < 40 * MB, f"{kind}: this process grew by {peak.peak / MB:.0f} MB while 60 MB arrived"


@pytest.mark.pipeline
def test_a_cell_past_its_cap_is_stopped_and_the_next_cells_run(tmp_path):
    """The kernel is interrupted once the cell passes its cap: a loop meant to print 2 GB stops a few MB past it
    (the next cell reads how far it got), and the cells after it run as usual."""
    pieces = 2048
    nb, faults = run(tmp_path, f"import time\nfor i in range({pieces}):\n    print('x' * 2 ** 20, flush=True)\n"
                               f"    time.sleep(0.01)", "print('after', i)", "print('and', 1 + 1)")
    assert cut_lines(nb.cells[0]), nb.cells[0].outputs
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert errors == [], "the interrupt's error shown past the cut"
    reached = int("".join(o.get("text", "") for o in nb.cells[1].outputs).split()[1])
    assert CELL_MB - 1 <= reached < 200, f"the loop went on to piece {reached} of {pieces} past a cap of {CELL_MB} MB"
    assert "".join(o.get("text", "") for o in nb.cells[2].outputs) == "and 2\n", nb.cells[2].outputs
    said = [words for kind, words in faults if kind == "output"]
    assert said == [f"cell 0: its output passed the cap of {CELL_MB} MB a cell; the cell was stopped, the rest of its "
                    f"output not kept"], faults


@pytest.mark.pipeline
def test_an_error_a_cell_raises_past_its_cap_is_not_kept_past_the_caps(tmp_path):
    """The error of a cell's reply reaches the notebook outside the iopub messages (nbgrader adds it when the outputs
    lack it): raised after the cell's own cut (the interrupt caught), it is not kept; in cells under the cap, it is
    counted against the notebook's cap like any output."""
    flood_then_raise = ("import time\ntry:\n    for _ in range(40):\n        print('x' * 2 ** 20, flush=True)\n"
                        "        time.sleep(0.01)\nexcept KeyboardInterrupt:\n    pass\n"
                        "raise ValueError('v' * 900_000)")
    nb, faults = run(tmp_path, *[flood_then_raise] * 4)
    for cell in nb.cells:
        assert cut_lines(cell) and not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    assert sum(kept(c) for c in nb.cells) <= NOTEBOOK_MB * MB + 4 * 4096, [kept(c) for c in nb.cells]
    raised = "raise ValueError('w' * 700_000)"  # 1.4 MB a cell with its traceback: the fourth passes the 5 MB
    nb, faults = run(tmp_path, *[raised] * 4)
    assert sum(kept(c) for c in nb.cells) <= NOTEBOOK_MB * MB + 4096, [kept(c) for c in nb.cells]
    assert cut_lines(nb.cells[3]), [o.get("ename") for o in nb.cells[3].outputs]


@pytest.mark.pipeline
def test_one_message_over_the_cap_is_dropped_unread_and_stops_the_notebook(tmp_path):
    """A single 300 MB print never reaches Python here: ZMQ refuses it at the socket (MAXMSGSIZE), which closes that
    connection for good, so the notebook stops there with a line naming the cell and the cap."""
    with Peak() as peak:
        nb, faults = run(tmp_path, "print('before')", "print('z' * 300 * 2 ** 20)", "print('after')")
    assert peak.peak < 40 * MB, f"this process grew by {peak.peak / MB:.0f} MB"
    words = (f"cell 1 sent the grader one message of more than {CELL_MB} MB, the cap of a cell's output; it was "
             f"dropped unread, and the cells after it were not run")
    assert faults == [["output", words]], faults
    assert cut_lines(nb.cells[1]) == [f"[Output cut: {words}.]\n"] and nb.cells[2].outputs == []


@pytest.mark.pipeline
def test_the_notebook_cap_cuts_the_cell_that_passes_it(tmp_path):
    piece = "print('n' * (2 ** 20 + 2 ** 19))"  # 1.5 MB a cell: under the cell's cap, over the notebook's by cell 3
    nb, faults = run(tmp_path, piece, piece, piece, piece, "print('late')")
    assert [len(cut_lines(c)) for c in nb.cells] == [0, 0, 0, 1, 0]
    assert [o.text for o in nb.cells[4].outputs] == ["late\n"]  # what still fits under the notebook's cap is kept
    assert "notebook's outputs passed the grader's cap of 5 MB a notebook at cell 3" in cut_lines(nb.cells[3])[0]
    assert sum(kept(c) for c in nb.cells) <= NOTEBOOK_MB * MB + 4096
    assert ["output", "cell 3: its output passed the cap of 5 MB a notebook; the cell was stopped, the rest of its "
                      "output not kept"] in faults


def test_the_budget_counts_what_arrives_not_what_is_kept():
    """Clearing a cell gives nothing back (else clear and print again would hold the grader's CPU for as long as it
    likes while staying under the cap), and a cell once cut keeps nothing more, however small."""
    budget = OutputBudget(cell_bytes=10, notebook_bytes=25)
    assert [budget.take(0, 4) for _ in range(3)] == [True, True, False]
    assert budget.take(0, 1) is False and budget.cut == {0: False}
    assert budget.take(1, 10) and not budget.take(2, 10) and budget.cut[2] is True
    assert budget.total == 18 and budget.largest == 10


def test_content_bytes_counts_every_string_and_walks_any_depth():
    deep = {"content": {}}
    node = deep["content"]
    for _ in range(5000):
        node["k"] = {}
        node = node["k"]
    node["leaf"] = "x" * 100
    assert content_bytes(deep) >= 100 + 5000
    assert content_bytes({"content": {"data": {"image/png": "a" * 1000}}, "buffers": [b"b" * 500]}) >= 1500


@pytest.mark.pipeline
def test_the_kernels_own_streams_lead_nowhere_of_the_graders(tmp_path):
    """A kernel inherited the nbgrader process's stderr, its log, shared by every submission that process grades: a
    student's os.write(2, ...) filled it (every later kernel then died at its start) and os.pread read back what
    earlier students' kernels had written there. Its streams are /dev/null now, and its name is the grader's."""
    nb, faults = run(tmp_path, "import os, sys\nprint(*(os.readlink(f'/proc/self/fd/{s._original_stdstream_copy}')"
                               " for s in (sys.stdout, sys.stderr)))")
    assert [o.text for o in nb.cells[0].outputs] == ["/dev/null /dev/null\n"], nb.cells[0].outputs


@pytest.mark.pipeline
def test_a_fault_quotes_a_students_error_short(tmp_path):
    """The name of an error a student raises goes into the grading log: at most 100 characters of it."""
    cell = "raise type('E' * 2 ** 14, (OSError,), {})('No space left on device')"
    nb, faults = run(tmp_path, cell)
    assert faults and all(len(words) < 600 for _, words in faults), [len(w) for _, w in faults]
