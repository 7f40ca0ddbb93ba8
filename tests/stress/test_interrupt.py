"""Ctrl-C: a KeyboardInterrupt in the main thread, wherever it lands, stops everything.

``_thread.interrupt_main()`` and ``signal.raise_signal(SIGINT)`` called in a worker thread
set Python's pending-signal flag without waking the main thread, and the main thread raises
the KeyboardInterrupt at its next bytecode, wherever that is: inside a queue's critical
section, between starting two threads, in the middle of a wait. These tests put it there
and check that no lock stays held and no thread stays alive.

Every interrupt is fired only while the main thread is inside ``pytest.raises`` (or a loop
that catches it), so none can escape into pytest.
"""

import _thread
import gc
import inspect
import signal
import sys
import threading
import time

import pytest

import queuepipe as qp
from helpers import interrupting_at

INTERRUPTS = 200


def _fire(how):
    if how == "interrupt_main":
        _thread.interrupt_main()
    else:
        signal.raise_signal(signal.SIGINT)


class _Storm:
    """A thread that interrupts the main thread ``count`` times.

    It fires only while the main thread is armed (``arm()``, called inside the ``try``) and
    waits for each interrupt to be caught (``caught()``, which disarms) before the next, so no
    interrupt is ever pending while the main thread is outside its ``try``. The main thread's
    side is plain attribute writes: an interrupt landing inside ``Event.set()`` (Python code
    taking a Condition) could itself leave a lock held.
    """

    def __init__(self, count, how):
        self.count = count
        self._how = how
        self._armed = False
        self._caught = 0
        self._thread = threading.Thread(target=self._run, name="test/interrupt-storm")

    def _poll(self, condition):
        pause = threading.Event()  # never set: a short pause between polls
        deadline = time.monotonic() + 30.0
        while not condition():
            assert time.monotonic() < deadline, "the main thread stopped responding"
            pause.wait(0.0001)

    def _run(self):
        for fired in range(self.count):
            self._poll(lambda: self._armed)
            _fire(self._how)
            self._poll(lambda: self._caught > fired)

    def start(self):
        self._thread.start()

    def arm(self):
        self._armed = True

    def caught(self):
        self._armed = False
        self._caught += 1

    def join(self):
        self._thread.join()


@pytest.fixture(autouse=True)
def no_finalizer_swallows_an_interrupt():
    """Collects earlier tests' garbage first and keeps the cyclic collector off meanwhile.

    A KeyboardInterrupt that lands in a ``__del__`` the collector runs in the main thread
    (a reader of an earlier test, say) is swallowed and printed as unraisable: the storm
    then waits for a catch that never comes (seen once in CI: "the main thread stopped
    responding").
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def lock_is_free(lock):
    """True when no thread holds ``lock`` (a queue's RLock). Read from its repr: taking the
    lock to find out could itself be interrupted between the acquire and the release."""
    return repr(lock).startswith("<unlocked")


@pytest.mark.parametrize("how", ["interrupt_main", "raise_signal"])
@pytest.mark.parametrize("op", ["enqueue_dequeue", "blocking_dequeue", "enqueue_many_dequeue_many"])
def test_an_interrupt_anywhere_in_a_queue_call_leaves_the_queue_usable(how, op):
    # Before the fix, a KeyboardInterrupt raised inside Condition.__enter__, just after it took
    # the queue's lock, left the lock held: every later call, and every runner thread, hung.
    q = qp.FIFOQueue(4, [qp.int64], shapes=[[]])
    storm = _Storm(INTERRUPTS, how)
    storm.start()
    caught = calls = 0
    while caught < INTERRUPTS:
        try:
            while True:  # left only by an interrupt
                # Nobody else uses q: a held lock here can only be one an interrupt leaked.
                assert lock_is_free(q._lock), f"the queue lock leaked after {caught} interrupts"
                storm.arm()
                calls += 1
                if q.size() > 2:  # elements left behind by interrupted calls: make room
                    q.dequeue_many(q.size())
                if op == "enqueue_dequeue":
                    q.enqueue(calls)
                    q.dequeue()
                elif op == "enqueue_many_dequeue_many":
                    q.enqueue_many([[calls, calls]])
                    q.dequeue_many(2)
                else:
                    try:
                        q.dequeue(timeout=0.0005)
                    except qp.errors.DeadlineExceededError:
                        pass
        except KeyboardInterrupt:
            caught += 1
            storm.caught()
    storm.join()
    # Still a working queue: whatever an interrupt cut short, the lock is free and it closes.
    q.close()
    while q.size():
        q.dequeue()
    with pytest.raises(qp.errors.OutOfRangeError):
        q.dequeue()


def _main_thread_waits_on_a_queue():
    """True while the main thread is inside a queue's wait (QueueBase._wait)."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        code = frame.f_code
        if code is qp.QueueBase._wait.__code__:
            return True
        frame = frame.f_back
    return False


@pytest.mark.parametrize("how", ["interrupt_main", "raise_signal"])
def test_an_interrupt_anywhere_in_a_batches_dequeue_leaves_it_usable(how):
    # The batch queue is built from the first element; every dequeue first waits for that,
    # under the stand-in queue's own lock, which an interrupt must not leave held either.
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        batches = qp.train.batch(lambda: 1, batch_size=2, capacity=8)
    storm = _Storm(INTERRUPTS, how)
    with qp.train.running(pipeline):
        storm.start()
        caught = 0
        while caught < INTERRUPTS:
            try:
                while True:  # left only by an interrupt
                    assert not batches.queue._lock._is_owned(), \
                        f"the batch queue's lock leaked after {caught} interrupts"
                    storm.arm()
                    assert batches.dequeue(timeout=30.0).tolist() == [1, 1]
            except KeyboardInterrupt:
                caught += 1
                storm.caught()
        storm.join()
        assert batches.dequeue(timeout=30.0).tolist() == [1, 1]


@pytest.mark.parametrize("how", ["interrupt_main", "raise_signal"])
def test_an_interrupt_reaches_a_main_thread_blocked_on_an_empty_queue(how):
    # Nothing will ever be enqueued: without the main thread's sliced waits the interrupt
    # would only be seen when the wait ends, i.e. never. The helper opens a way out (closing
    # the queue) if the interrupt is not seen in time, and the test then fails instead of
    # hanging.
    q = qp.FIFOQueue(4, [qp.int64], shapes=[[]])
    interrupted = threading.Event()
    rescued = threading.Event()

    def helper():
        pause = threading.Event()  # never set: a short wait between polls
        while not _main_thread_waits_on_a_queue():
            pause.wait(0.001)
        _fire(how)
        if not interrupted.wait(10.0):
            rescued.set()
            q.close()

    thread = threading.Thread(target=helper, name="test/interrupter")
    thread.start()
    with pytest.raises(KeyboardInterrupt):
        try:
            q.dequeue()
        finally:
            interrupted.set()
    thread.join()
    assert not rescued.is_set(), "the interrupt reached the main thread only once the queue closed"


class _InterruptingRunner(qp.train.QueueRunner):
    """A runner whose thread creation is where Ctrl-C lands."""

    def create_threads(self, coord=None, daemon=False, start=False):
        raise KeyboardInterrupt


def test_an_interrupt_while_starting_runners_stops_those_already_started():
    pipeline = qp.Pipeline()
    full = qp.FIFOQueue(2, [qp.int64], shapes=[[]], name="started_before_the_interrupt")
    other = qp.FIFOQueue(2, [qp.int64], shapes=[[]], name="never_started")
    pipeline.add_queue_runner(qp.train.QueueRunner(full, [lambda: full.enqueue(1)] * 2))
    pipeline.add_queue_runner(_InterruptingRunner(other, [lambda: other.enqueue(1)]))
    coord = qp.Coordinator()
    with pytest.raises(KeyboardInterrupt):
        qp.train.start_queue_runners(coord, pipeline=pipeline)
    # start_queue_runners stopped and joined what it had started before re-raising: the two
    # enqueue threads were blocked on the full queue and nobody else would have woken them.
    alive = [t.name for t in threading.enumerate() if t.name.startswith("queuepipe/")]
    assert alive == []
    assert coord.should_stop()


def test_an_interrupt_while_batches_starts_its_threads_stops_them(monkeypatch):
    # Batches starts its own runner threads after the pipeline's; Ctrl-C landing between two
    # of those starts (simulated here at the start of the close-on-stop thread) must still
    # stop the runner threads already blocked on the full batch queue.
    start = threading.Thread.start

    def interrupted_start(self):
        if self.name == "queuepipe/interrupted/fifo_queue/close-on-stop":
            raise KeyboardInterrupt
        start(self)

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    with qp.Pipeline().as_default():
        batches = qp.train.batch(lambda: 1, batch_size=2, num_threads=2, capacity=2,
                                 name="interrupted")
    with pytest.raises(KeyboardInterrupt):
        with batches:
            batches.dequeue()
    alive = [t.name for t in threading.enumerate() if t.name.startswith("queuepipe/")]
    for thread in threading.enumerate():
        if thread.name.startswith("queuepipe/interrupted/"):
            thread.join(2.0)
    alive = [t.name for t in threading.enumerate() if t.name.startswith("queuepipe/")]
    assert alive == [], "Batches left its runner threads blocked on a full queue"


def _interrupt_in_condition_waits_finally():
    """A trace that raises KeyboardInterrupt on the first line of ``Condition.wait``'s
    ``finally`` (where it takes the lock back): where a real SIGINT once landed."""
    lines, first = inspect.getsourcelines(threading.Condition.wait)
    target = first + next(i for i, line in enumerate(lines) if "_acquire_restore" in line)
    return interrupting_at(threading.Condition.wait.__code__, target)


@pytest.mark.parametrize("wait", ["dequeue", "enqueue", "batches"])
def test_an_interrupt_inside_condition_waits_own_finally_keeps_the_lock(wait):
    q = qp.FIFOQueue(1, [qp.int64], shapes=[[]])
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        batches = qp.train.batch(lambda: 1, batch_size=2)  # never started: waits for its queue
    lock = batches.queue._lock if wait == "batches" else q._lock
    if wait == "enqueue":
        q.enqueue(0)  # full: the next enqueue waits
    call = {"dequeue": lambda: q.dequeue(timeout=0.05),
            "enqueue": lambda: q.enqueue(1, timeout=0.05),
            "batches": lambda: batches.queue.dequeue(timeout=0.05)}[wait]
    tracer, fired = _interrupt_in_condition_waits_finally()
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        with pytest.raises(KeyboardInterrupt):  # not RuntimeError: release unlocked lock
            call()
    finally:
        sys.settrace(previous)
    assert fired and lock_is_free(lock)
    if wait == "enqueue":
        assert q.dequeue(timeout=1) == 0
    q.enqueue(5, timeout=1)  # the queue still works
    assert q.dequeue(timeout=1) == 5
