"""A sandboxed call that drives a model of the checks' by callbacks (notebooks 08 and 09): the time the trusted side
takes to answer is neither the call's waiting nor its computing on the sandbox's clock, and what the callbacks compute
is charged to the call (``learner.check.safe.away``, ``grader.remote.Worker.call``). A loaded `make demo` took the
reference's greedy_translate for a function that waits: its worker mostly waited for the model's answers.

Cost: about 15 s (two sandboxed workers; the second call computes 5 s of callbacks before it is stopped)."""
import time

from coursekit.sync import setup_source
from grader import remote
from learner.check import safe

ASKS = '''
def ask_the_model(model, n):
    return [model(i) for i in range(n)]


def ask_for_ever(model):
    while True:
        model(0)
'''


def test_a_call_that_waits_for_slow_answers_of_the_trusted_side_is_not_stopped_as_waiting():
    """Five answers of 0.5 s each on the clock (a busy machine) against a limit of 0.3 s of computing, 0.9 s on the
    clock: before, the sandbox stopped the call as one that waits."""
    def slow_model(i):
        time.sleep(0.5)
        return i
    with remote.Worker(setup_source("03_softmax"), [ASKS]) as w:
        w.start()
        out = safe.call(w.function("ask_the_model", "softmax"), (slow_model, 5), time_limit=0.3)
    assert not out.timed_out and out.error is None and out.value == [0, 1, 2, 3, 4], (out.error, out.cpu_s)


def test_a_call_that_asks_for_callbacks_without_end_is_stopped_as_computing():
    """What the callbacks compute counts: a call that asks for them for ever is stopped once they have computed past
    its limit (plus the grace), and it is not told that it was waiting."""
    def busy_model(i):
        end = time.process_time() + 0.005
        while time.process_time() < end:
            pass
        return i
    with remote.Worker(setup_source("03_softmax"), [ASKS]) as w:
        w.start()
        started = time.monotonic()
        out = safe.call(w.function("ask_for_ever", "softmax"), (busy_model,), time_limit=0.2)
    assert out.timed_out and not out.waited, (out.cpu_s, out.wall_s)
    assert time.monotonic() - started < 120


def test_root_keeps_a_bounded_number_of_a_calls_callback_results():
    """Root hands a callback's result back by identity when the student passes it on (a model's cache), so it keeps
    what it returned: a call asking 5,000 times keeps the latest few hundred, not every one (each may be a tensor)."""
    def model(i):
        return [i, i]
    with remote.Worker(setup_source("03_softmax"), [ASKS]) as w:
        w.start()
        out = safe.call(w.function("ask_the_model", "softmax"), (model, 5000))
        kept = len(w._returned)
    assert out.error is None and len(out.value) == 5000 and out.value[-1] == [4999, 4999]
    assert kept <= remote.KEPT_RETURNS
