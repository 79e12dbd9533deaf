"""What a graded notebook's kernel may make its grader hold: outputs capped while they arrive.

The sandboxed kernel (``grader.nbgrader_plugin.SandboxedKernelManager``) runs the student's code, and every output
it makes (text, images, HTML, JSON, widget state, any MIME type) arrives as a Jupyter message in the nbgrader
process that runs the notebook: root's on the hub, outside every sandbox. Left alone, nbclient keeps every output in
that process until the notebook is written, and one student's cell printing a gigabyte made the process hold
gigabytes. Here it is bounded by the receiving side, never by anything inside the kernel:

* ``CappedKernelClient``: each socket to the kernel refuses a message part over ``message_bytes`` (ZMQ's
  ``MAXMSGSIZE``: the message is dropped before it is read into Python) and queues at most ``QUEUED`` messages
  (``RCVHWM``), so what waits to be read is bounded too;
* ``OutputBudget``: the outputs a cell and the notebook keep, counted as they arrive (``content_bytes``); past a
  cap, nothing more of that cell (or, past the notebook's, of any cell) is kept, and one line in its place says
  which cap and which cell (``cut_line``).

The caps are ``SandboxedExecute``'s settings (``max_cell_output_mb``, ``max_notebook_output_mb``); the numbers, and
the largest outputs a reference notebook makes, are in docs/threat-model.md.
"""
import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from traitlets import Integer

MB = 2 ** 20
QUEUED = 8  # messages waiting in a socket, at most (ZMQ's RCVHWM and SNDHWM; the kernel's side queues the rest)

# every message adds to what the grader holds but the kernel's status (busy, idle): outputs, display updates,
# widgets' state, the echo of a cell's code, and whatever type the kernel makes up
UNCOUNTED = {"status"}
OBJECT = 48  # what Python holds for each value besides its characters, about: a list, a dict, a number, a line


def content_bytes(msg):
    """About how much memory ``msg``'s content and buffers take where the grader keeps them, and so how large the
    notebook written from them is: every string and byte string by its length, and each value (a container, a
    number, each line of a text, which the notebook stores as a string of its own) ``OBJECT`` more (walked
    without recursion: a message may nest hundreds of levels)."""
    total, stack = 0, [msg.get("content"), msg.get("buffers")]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) + OBJECT * (1 + item.count("\n"))
        elif isinstance(item, (bytes, bytearray, memoryview)):
            total += len(item) + OBJECT
        elif isinstance(item, dict):
            total += OBJECT
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            total += OBJECT
            stack.extend(item)
        else:
            total += OBJECT
    return total


def cut_line(index, cap_mb, whole_notebook):
    """The line a cut cell shows (in the autograded notebook and the student's feedback), naming cell and cap."""
    if whole_notebook:
        return (f"[Output cut: the notebook's outputs passed the grader's cap of {cap_mb:g} MB a notebook at cell "
                f"{index}; the cell was stopped there and nothing more of its output kept. The checks grade your "
                f"functions all the same: they run your cells again, apart.]\n")
    return (f"[Output cut: cell {index}'s output passed the grader's cap of {cap_mb:g} MB a cell; the cell was stopped "
            f"there and the rest of its output not kept. The checks grade your functions all the same: they run your "
            f"cells again, apart.]\n")


class OutputBudget:
    """What a notebook's cells may keep: ``cell_bytes`` a cell, ``notebook_bytes`` in all, counted as outputs arrive
    (a ``clear_output`` gives nothing back: what is counted is what arrived)."""

    def __init__(self, cell_bytes, notebook_bytes):
        self.cell_bytes, self.notebook_bytes = cell_bytes, notebook_bytes
        self.per_cell, self.total = {}, 0
        self.cut = {}          # {cell index: True when the notebook's cap cut it, False for the cell's own}
        self.largest = 0       # the most one cell took, for the record

    def take(self, index, size):
        """Whether a message of ``size`` bytes for cell ``index`` is kept. A refused one cuts the cell: ``cut``
        says by which cap, once; nothing more of the cell is kept after it."""
        if index in self.cut:
            return False
        used = self.per_cell.get(index, 0) + size
        if used > self.cell_bytes or self.total + size > self.notebook_bytes:
            self.cut[index] = used <= self.cell_bytes
            return False
        self.per_cell[index] = used
        self.total += size
        self.largest = max(self.largest, used)
        return True

    def faults(self):
        """[(kind, words)] for the grading log: each cut cell, with its cap."""
        return [("output", f"cell {index}: its output passed the cap of "
                           f"{(self.notebook_bytes if whole else self.cell_bytes) / MB:g} MB "
                           f"{'a notebook' if whole else 'a cell'}; the cell was stopped, the rest of its output "
                           f"not kept")
                for index, whole in sorted(self.cut.items())]


class CappedKernelClient(AsyncKernelClient):
    """nbclient's kernel client whose sockets refuse a message part over ``message_bytes`` and queue at most
    ``QUEUED`` messages: set on its own ZMQ context, so that every socket it makes has them before it connects.

    ZMQ drops a refused message unread and, with it, that connection for good (a protocol error is not reconnected):
    ``dropped`` names the channels it happened to, watched through each socket's monitor, so that the grader can
    say so and stop running the notebook."""

    message_bytes = Integer(16 * MB, help="the most bytes one part of a message from the kernel may hold").tag(
        config=True)

    def _context_default(self):
        context = super()._context_default()
        context.setsockopt(zmq.MAXMSGSIZE, int(self.message_bytes))
        context.setsockopt(zmq.RCVHWM, QUEUED)
        context.setsockopt(zmq.SNDHWM, QUEUED)  # what waits to go to a kernel that stopped reading, too
        return context

    def _create_connected_socket(self, channel, identity=None):
        sock = super()._create_connected_socket(channel, identity)
        if channel != "hb":
            address = f"inproc://course-monitor-{channel}-{id(sock)}"
            sock.monitor(address, zmq.EVENT_DISCONNECTED)
            watch = zmq.Context.shadow(self.context.underlying).socket(zmq.PAIR)
            watch.linger = 0
            watch.connect(address)
            self._watches = getattr(self, "_watches", []) + [(channel, watch, sock)]
        return sock

    def dropped(self):
        """The channels whose connection to the kernel was dropped so far (a message over ``message_bytes``)."""
        gone = getattr(self, "_gone", set())
        for channel, watch, _ in getattr(self, "_watches", []):
            while watch.poll(0):
                watch.recv_multipart()
                gone.add(channel)
        self._gone = gone
        return sorted(gone)

    def stop_channels(self):
        for _, watch, sock in getattr(self, "_watches", []):
            if not sock.closed:
                sock.disable_monitor()
            watch.close()
        self._watches = []
        super().stop_channels()
