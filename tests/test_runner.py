"""Tests for queuepipe.runner: QueueRunner threads, stopping, errors, Pipeline, starting."""

import itertools
import re
import threading
from collections import Counter

import pytest
from helpers import usage_block, wait_until

import queuepipe as qp
from queuepipe.coordinator import Coordinator
from queuepipe.errors import CancelledError, OutOfRangeError
from queuepipe.queues import FIFOQueue
from queuepipe.runner import (
    Pipeline,
    QueueRunner,
    add_queue_runner,
    get_default_pipeline,
    start_queue_runners,
)


def counting_op(queue, stop_after):
    """An enqueue op that enqueues 0, 1, 2, ... (shared across threads) then raises."""
    counter = itertools.count()
    lock = threading.Lock()

    def enqueue():
        with lock:
            n = next(counter)
        if n >= stop_after:
            raise OutOfRangeError("counter exhausted")
        queue.enqueue(n)

    return enqueue


def drain(queue):
    """Dequeues until the queue is closed and empty."""
    got = []
    while True:
        try:
            got.append(int(queue.dequeue(timeout=10)))
        except OutOfRangeError:
            return got


def stop_and_join(coord, threads):
    coord.request_stop()
    coord.join(threads)


@pytest.fixture
def pipeline():
    """A fresh pipeline, made the default for the test."""
    with Pipeline().as_default() as scoped:
        yield scoped


def test_namespaces_export_runner_names():
    assert qp.QueueRunner is QueueRunner
    assert qp.train.QueueRunner is QueueRunner
    assert qp.train.start_queue_runners is start_queue_runners
    assert qp.train.add_queue_runner is add_queue_runner


@pytest.mark.parametrize("obj", [QueueRunner, Pipeline])
def test_usage_block_runs(obj, capsys):
    exec(compile(usage_block(obj), f"<{obj.__name__} usage>", "exec"), {})
    assert capsys.readouterr().out.startswith("[0, 1, ")


def test_last_thread_closes_the_queue():
    queue = FIFOQueue(100, dtypes=[qp.int64], name="numbers")
    runner = QueueRunner(queue, [counting_op(queue, 30)] * 4)
    threads = runner.create_threads(start=True)
    assert len(threads) == 4
    got = drain(queue)  # ends only because the runner closed the queue
    for t in threads:
        t.join()
    assert queue.is_closed()
    assert Counter(got) == Counter(range(30))
    assert runner.exceptions_raised == []


def test_close_waits_for_the_last_thread():
    queue = FIFOQueue(10, dtypes=[qp.int64])
    release = threading.Event()

    def finished():
        raise OutOfRangeError("done")

    def slow():
        release.wait()
        raise OutOfRangeError("done too")

    runner = QueueRunner(queue, [finished, slow])
    threads = runner.create_threads(start=True)
    threads[0].join()
    assert not queue.is_closed()  # one thread is still running
    release.set()
    threads[1].join()
    assert queue.is_closed()


def test_custom_close_op_runs_once():
    queue = FIFOQueue(10, dtypes=[qp.int64])
    closes = []
    runner = QueueRunner(queue, [counting_op(queue, 5)] * 3, close_op=lambda: closes.append(1))
    for t in runner.create_threads(start=True):
        t.join()
    assert closes == [1]
    assert not queue.is_closed()
    assert Counter(int(queue.dequeue()) for _ in range(5)) == Counter(range(5))


def test_enqueue_op_error_stops_records_and_reaches_the_consumer():
    queue = FIFOQueue(10, dtypes=[qp.int64], name="failing")
    calls = itertools.count()

    def enqueue():
        if next(calls) == 3:
            raise ValueError("bad record 3")
        queue.enqueue(7)

    runner = QueueRunner(queue, [enqueue])
    coord = Coordinator()
    threads = runner.create_threads(coord, start=True)
    assert coord.wait_for_stop(10)
    assert [str(e) for e in runner.exceptions_raised] == ["bad record 3"]
    assert [int(queue.dequeue()) for _ in range(3)] == [7, 7, 7]  # drained first
    with pytest.raises(ValueError, match=r"^bad record 3$") as info:
        queue.dequeue(timeout=10)
    assert info.value.__cause__ is runner.exceptions_raised[0]
    with pytest.raises(ValueError, match=r"^bad record 3$"):
        coord.join(threads)


def test_enqueue_op_error_without_coordinator_aborts_the_queue():
    queue = FIFOQueue(10, dtypes=[qp.int64])

    def enqueue():
        raise KeyError("missing")

    runner = QueueRunner(queue, [enqueue])
    (thread,) = runner.create_threads(start=True)
    thread.join()
    assert queue.is_closed()
    with pytest.raises(KeyError, match=r"missing") as info:
        queue.dequeue(timeout=10)
    assert info.value.__cause__ is runner.exceptions_raised[0]


def test_custom_cancel_op_runs_on_error():
    queue = FIFOQueue(10, dtypes=[qp.int64])
    cancelled = threading.Event()

    def enqueue():
        raise RuntimeError("boom")

    runner = QueueRunner(queue, [enqueue], cancel_op=cancelled.set)
    (thread,) = runner.create_threads(start=True)
    thread.join()
    assert cancelled.is_set()


def test_stop_wakes_producers_blocked_on_a_full_queue():
    queue = FIFOQueue(2, dtypes=[qp.int64], name="full")
    runner = QueueRunner(queue, [lambda: queue.enqueue(1)] * 3)
    coord = Coordinator()
    threads = runner.create_threads(coord, start=True)
    wait_until(lambda: queue.size() == 2)
    enqueuers = threads[:3]
    for t in enqueuers:
        t.join(0.1)
    assert all(t.is_alive() for t in enqueuers)  # blocked: the queue is full
    stop_and_join(coord, threads)
    assert not any(t.is_alive() for t in threads)
    assert queue.is_closed()
    assert runner.exceptions_raised == []


def idle_runner_and_blocked_consumer(queue):
    """Starts a runner that produces nothing and a consumer blocked on ``queue.dequeue()``.

    Returns the coordinator, the runner's threads, the consumer thread, and a list that receives
    the exception the consumer's dequeue raises.
    """
    runner = QueueRunner(queue, [lambda: threading.Event().wait(0.01)])
    coord = Coordinator()
    threads = runner.create_threads(coord, start=True)
    outcome = []

    def consume():
        try:
            queue.dequeue()
        except Exception as e:  # noqa: BLE001 - the test inspects what arrives
            outcome.append(e)

    consumer = threading.Thread(target=consume)
    consumer.start()
    consumer.join(0.1)
    assert consumer.is_alive()  # blocked: nothing to dequeue
    return coord, threads, consumer, outcome


def test_stop_wakes_a_consumer_blocked_on_an_empty_queue():
    queue = FIFOQueue(2, dtypes=[qp.int64], name="empty")
    coord, threads, consumer, outcome = idle_runner_and_blocked_consumer(queue)
    stop_and_join(coord, threads)
    consumer.join(10)
    assert not consumer.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], OutOfRangeError)
    assert re.match(r"^Queue 'empty' is closed", str(outcome[0]))


def test_stop_with_an_error_reaches_a_blocked_consumer():
    queue = FIFOQueue(2, dtypes=[qp.int64])
    coord, threads, consumer, outcome = idle_runner_and_blocked_consumer(queue)
    cause = ValueError("the trainer failed")
    coord.request_stop(cause)
    consumer.join(10)
    with pytest.raises(ValueError, match=r"^the trainer failed$"):
        coord.join(threads)
    assert len(outcome) == 1 and isinstance(outcome[0], ValueError)
    assert outcome[0].__cause__ is cause


def test_thread_names_and_registration():
    queue = FIFOQueue(2, dtypes=[qp.int64], name="named")
    runner = QueueRunner(queue, [lambda: queue.enqueue(1)] * 2)
    assert runner.name == "named"
    coord = Coordinator()
    threads = runner.create_threads(coord, daemon=True)
    assert [t.name for t in threads] == [
        "queuepipe/named/runner-0", "queuepipe/named/runner-1", "queuepipe/named/close-on-stop"]
    assert all(t.daemon for t in threads)
    assert not any(t.is_alive() for t in threads)  # start=False
    for t in threads:
        t.start()
    coord.request_stop()
    coord.join()  # joins the registered threads without being given them
    assert not any(t.is_alive() for t in threads)


def test_no_coordinator_means_no_close_on_stop_thread():
    queue = FIFOQueue(2, dtypes=[qp.int64], name="plain")
    runner = QueueRunner(queue, [counting_op(queue, 0)])
    threads = runner.create_threads()
    assert [t.name for t in threads] == ["queuepipe/plain/runner-0"]
    threads[0].start()
    threads[0].join()


def test_create_threads_again_while_running_makes_none():
    queue = FIFOQueue(2, dtypes=[qp.int64])
    runner = QueueRunner(queue, [lambda: queue.enqueue(1)])
    coord = Coordinator()
    threads = runner.create_threads(coord, start=True)
    assert runner.create_threads(coord, start=True) == []
    stop_and_join(coord, threads)


def test_runner_tells_the_queue_it_was_added_and_started():
    queue = FIFOQueue(2, dtypes=[qp.int64])
    runner = QueueRunner(queue, [counting_op(queue, 0)] * 2)
    assert (queue._runners_added, queue._runners_started) == (1, 0)
    for t in runner.create_threads(start=True):
        t.join()
    assert (queue._runners_added, queue._runners_started) == (1, 1)


def test_constructor_argument_errors():
    queue = FIFOQueue(2, dtypes=[qp.int64], name="args")
    with pytest.raises(ValueError, match=r"^QueueRunner for queue 'args' needs at least one"):
        QueueRunner(queue, [])
    with pytest.raises(TypeError, match=r"^enqueue op 1 of QueueRunner for queue 'args' must "
                                        r"be a zero-argument callable, got 3$"):
        QueueRunner(queue, [print, 3])
    with pytest.raises(ValueError, match=r"^queue_closed_exception_types must name"):
        QueueRunner(queue, [print], queue_closed_exception_types=())
    with pytest.raises(TypeError, match=r"^queue_closed_exception_types must hold exception "
                                        r"types, got 'x'$"):
        QueueRunner(queue, [print], queue_closed_exception_types=("x",))


def test_custom_queue_closed_exception_types():
    queue = FIFOQueue(2, dtypes=[qp.int64])

    def enqueue():
        raise StopIteration()

    runner = QueueRunner(queue, [enqueue], queue_closed_exception_types=(StopIteration,))
    (thread,) = runner.create_threads(start=True)
    thread.join()
    assert queue.is_closed()
    assert runner.exceptions_raised == []
    with pytest.raises(OutOfRangeError):
        queue.dequeue(timeout=10)


def test_cancelled_enqueue_ends_a_thread_quietly():
    queue = FIFOQueue(2, dtypes=[qp.int64])
    queue.close()
    runner = QueueRunner(queue, [lambda: queue.enqueue(1)])
    (thread,) = runner.create_threads(start=True)
    thread.join()
    assert runner.exceptions_raised == []
    with pytest.raises(CancelledError):
        queue.enqueue(1)


def test_as_default_scopes_and_nests():
    outer, inner = Pipeline(), Pipeline()
    module_default = get_default_pipeline()
    with outer.as_default():
        assert get_default_pipeline() is outer
        with inner.as_default():
            assert get_default_pipeline() is inner
        assert get_default_pipeline() is outer
    assert get_default_pipeline() is module_default


def test_as_default_is_per_thread(pipeline):
    seen = []
    thread = threading.Thread(target=lambda: seen.append(get_default_pipeline()))
    thread.start()
    thread.join()
    assert seen[0] is not pipeline


def test_add_queue_runner_and_queues_in_creation_order(pipeline):
    first, second = FIFOQueue(1, name="first"), FIFOQueue(1, name="second")
    runners = [QueueRunner(first, [print]), QueueRunner(second, [print]),
               QueueRunner(first, [print])]
    for qr in runners:
        add_queue_runner(qr)
    add_queue_runner(runners[0])  # a runner is added once
    assert pipeline.queue_runners == runners
    assert pipeline.queues == [first, second]
    other = Pipeline()
    add_queue_runner(runners[1], pipeline=other)
    assert other.queue_runners == [runners[1]]
    with pytest.raises(TypeError, match=r"^add_queue_runner expects a QueueRunner, got 'x'$"):
        add_queue_runner("x")


def test_start_queue_runners_starts_every_runner_of_the_pipeline(pipeline):
    queues = [FIFOQueue(50, dtypes=[qp.int64], name=f"q{i}") for i in range(3)]
    for i, q in enumerate(queues):
        add_queue_runner(QueueRunner(q, [counting_op(q, 10 + i)] * 2))
    coord = Coordinator()
    threads = start_queue_runners(coord)
    assert len(threads) == 3 * 3  # two runner threads and a close-on-stop thread each
    assert all(t.daemon for t in threads)
    got = [drain(q) for q in queues]
    stop_and_join(coord, threads)
    assert [Counter(g) for g in got] == [Counter(range(10 + i)) for i in range(3)]


def test_start_queue_runners_uses_the_given_pipeline_only(pipeline):
    other = Pipeline()
    mine, theirs = FIFOQueue(5, dtypes=[qp.int64]), FIFOQueue(5, dtypes=[qp.int64])
    add_queue_runner(QueueRunner(mine, [lambda: mine.enqueue(1)]))
    add_queue_runner(QueueRunner(theirs, [lambda: theirs.enqueue(1)]), pipeline=other)
    coord = Coordinator()
    threads = start_queue_runners(coord, pipeline=other)
    assert {t.name.split("/")[1] for t in threads} == {theirs.name}
    stop_and_join(coord, threads)


def test_start_queue_runners_twice_starts_no_duplicates(pipeline):
    busy = FIFOQueue(1, dtypes=[qp.int64], name="busy")
    done = FIFOQueue(1, dtypes=[qp.int64], name="done")
    add_queue_runner(QueueRunner(busy, [lambda: busy.enqueue(1)]))
    finish = QueueRunner(done, [counting_op(done, 0)], close_op=lambda: None)  # stays open
    add_queue_runner(finish)
    coord = Coordinator()
    threads = start_queue_runners(coord)
    threads[2].join()  # 'done' runner-0 finished; 'busy' runner-0 is blocked on a full queue
    again = start_queue_runners(coord)
    assert [t.name for t in again] == ["queuepipe/done/runner-0", "queuepipe/done/close-on-stop"]
    stop_and_join(coord, threads + again)


def test_a_pipeline_forgets_runners_whose_queue_closed_and_threads_ended(pipeline):
    busy = FIFOQueue(1, dtypes=[qp.int64], name="busy")
    done = FIFOQueue(1, dtypes=[qp.int64], name="done")
    add_queue_runner(QueueRunner(busy, [lambda: busy.enqueue(1)]))
    add_queue_runner(QueueRunner(done, [counting_op(done, 0)]))  # closes 'done' at once
    coord = Coordinator()
    threads = start_queue_runners(coord)
    threads[2].join()
    assert done.is_closed()
    again = start_queue_runners(coord)
    assert again == [] and [qr.queue for qr in pipeline.queue_runners] == [busy]
    stop_and_join(coord, threads)


def test_start_queue_runners_on_an_empty_pipeline_warns(pipeline, caplog):
    assert start_queue_runners(Coordinator()) == []
    assert "the pipeline has no QueueRunners" in caplog.text


def test_a_pipeline_and_a_coordinator_say_what_they_hold_when_printed():
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        queue = qp.range_input_producer(3, num_epochs=1, shuffle=False, name="numbers")
    assert repr(pipeline) == ("<Pipeline: 1 queue runner(s), 0 running; queues "
                              f"['{queue.name}']>")
    coord = qp.Coordinator()
    assert repr(coord) == "<Coordinator running, 0 registered thread(s) alive>"
    coord.request_stop(ValueError("bad record"))
    assert repr(coord) == ("<Coordinator stop requested, 0 registered thread(s) alive, error "
                           "ValueError: bad record>")


def test_an_op_raising_stop_iteration_fails_instead_of_ending_quietly():
    queue = FIFOQueue(2, dtypes=[qp.int64])

    def enqueue():
        raise StopIteration()  # a next() past the end, in an op: PEP 479's problem

    runner = QueueRunner(queue, [enqueue])
    (thread,) = runner.create_threads(start=True)
    thread.join()
    (error,) = runner.exceptions_raised
    assert isinstance(error, RuntimeError) and isinstance(error.__cause__, StopIteration)
    with pytest.raises(RuntimeError, match=r"^an enqueue op of queue 'fifo_queue.*' raised "
                                           r"StopIteration, an error, not the end"):
        queue.dequeue()
