"""Processes below a given one, and the CPU time they have used, read from /proc (Linux).

The grading server stops everything below it before removing its folders (``coursekit.grading.server``), and the
judge tells a sandboxed worker that computes slowly on a busy machine from one that waits (``grader.remote``).
"""
import os

_TICK = os.sysconf("SC_CLK_TCK")


def _stats(pids=None):
    """{pid: (parent pid, CPU seconds of user and system time)} of every process now (or of ``pids``, those that
    are still there)."""
    found = {}
    for entry in (os.listdir("/proc") if pids is None else map(str, pids)):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                found[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK)
            except (OSError, ValueError, IndexError):
                continue
    return found


def descendants(pid, stats=None):
    """The process ids of every process below ``pid`` (children, theirs, and so on)."""
    stats = _stats() if stats is None else stats
    found, frontier = [], {pid}
    while frontier:
        below = [p for p, (parent, _) in stats.items() if parent in frontier and p not in found]
        found += below
        frontier = set(below)
    return found


def parents_of(pids):
    """{pid: parent pid} of the processes ``pids`` that are still there."""
    return {pid: parent for pid, (parent, _) in _stats(pids).items()}


def cpu_of(pids):
    """CPU seconds used so far by the processes ``pids`` that are still there (each one's own, not its children's)."""
    return sum(cpu for _, cpu in _stats(pids).values())


class Kept:
    """One long-lived subprocess, started again when it has died or when the settings it was started with change.

    ``start(settings)`` makes it: an object with ``alive()`` and ``stop()``. A grading worker keeps its nbgrader
    process (``coursekit.grading.task``), and a grading process its judge server (``grader.judge``), this way."""

    def __init__(self, start):
        self._start, self.process, self.settings = start, None, None

    def get(self, settings):
        """The process started with ``settings``: the running one, or a new one in its place."""
        if self.process is None or not self.process.alive() or self.settings != settings:
            self.stop()
            self.process, self.settings = self._start(settings), settings
        return self.process

    def stop(self):
        if self.process is not None:
            self.process.stop()
            self.process = None
