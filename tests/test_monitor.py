"""Tests of QueueMonitor on real pipelines: real queues, real runner threads."""

import contextlib
import re
import threading

import pytest
from helpers import wait_until

import queuepipe as qp
from queuepipe.monitor import QueueMonitor, Sample

CAPACITY = 4


@contextlib.contextmanager
def pipeline_with(enqueue_op_for):
    """A pipeline of one FIFO queue filled by a QueueRunner; yields ``(pipeline, queue)``.

    ``enqueue_op_for(queue)`` returns the runner's enqueue op. The runner threads run for the
    body of the ``with`` and are stopped and joined after it.
    """
    pipeline = qp.Pipeline()
    queue = qp.FIFOQueue(CAPACITY, dtypes=[qp.int64], shapes=[[]], name="monitored")
    qp.add_queue_runner(qp.QueueRunner(queue, [enqueue_op_for(queue)]), pipeline=pipeline)
    coord = qp.Coordinator()
    threads = qp.start_queue_runners(coord, pipeline=pipeline)
    try:
        yield pipeline, queue
    finally:
        coord.request_stop()
        coord.join(threads, stop_grace_period_secs=5)


def fast_producer(queue):
    return lambda: queue.enqueue(1)


@contextlib.contextmanager
def gated_producer():
    """An enqueue op that enqueues one element per ``permits.release()``."""
    permits = threading.Semaphore(0)

    def op_for(queue):
        def enqueue_when_permitted():
            if permits.acquire(timeout=0.05):  # returns now and then, so a stop is seen
                queue.enqueue(1)
        return enqueue_when_permitted

    yield permits, op_for


def test_slow_consumer_is_not_input_bound():
    with pipeline_with(fast_producer) as (pipeline, queue):
        wait_until(lambda: queue.size() == CAPACITY, "the producer filled the queue")
        monitor = QueueMonitor(pipeline)
        monitor.sample()
        for _ in range(3):  # the consumer takes a little, the producer refills at once
            queue.dequeue()
            wait_until(lambda: queue.size() == CAPACITY, "the producer refilled the queue")
        monitor.sample()

    verdict = monitor.input_bound()
    assert not verdict
    assert verdict.queue == "monitored"
    assert re.fullmatch(r"not input-bound: queue 'monitored' was on average 100% full and its "
                        r"consumers spent 0% of the [\d.]+ s blocked on dequeue; the queue stays "
                        r"full, so the consumer \(the training step\) is the slow part",
                        verdict.reason)
    rates = monitor.rates()["monitored"]
    assert (rates.samples, rates.size, rates.capacity, rates.fill) == (2, CAPACITY, CAPACITY, 1.0)
    assert rates.consumer_wait_share == 0.0
    assert rates.dequeued_per_sec > 0 and rates.enqueued_per_sec > 0


def test_slow_producer_is_input_bound():
    with gated_producer() as (permits, op_for), pipeline_with(op_for) as (pipeline, queue):
        monitor = QueueMonitor(pipeline)
        monitor.sample()
        got = []
        consumer = threading.Thread(target=lambda: got.extend(queue.dequeue() for _ in range(2)))
        consumer.start()
        for n in (1, 2):
            consumer.join(0.3)
            assert consumer.is_alive(), "the consumer should be blocked on the empty queue"
            assert queue.stats()["dequeued"] == n - 1
            permits.release()
        consumer.join(5)
        assert not consumer.is_alive()
        monitor.sample()

    assert [int(x) for x in got] == [1, 1]
    verdict = monitor.input_bound()
    assert verdict
    assert re.fullmatch(r"input-bound: queue 'monitored' was on average 0% full and its "
                        r"consumers spent \d+% of the [\d.]+ s blocked on dequeue, so the "
                        r"producers \(reading, parsing\) do not keep up: .*", verdict.reason)
    rates = monitor.rates()["monitored"]
    assert rates.consumer_wait_share > 0.5
    assert rates.mean_fill == 0.0
    assert queue.stats()["dequeued"] == 2


def test_table_lists_every_queue_with_its_figures():
    with pipeline_with(fast_producer) as (pipeline, queue):
        wait_until(lambda: queue.size() == CAPACITY, "the producer filled the queue")
        monitor = QueueMonitor(pipeline)
        monitor.sample()
        queue.dequeue()
        wait_until(lambda: queue.size() == CAPACITY, "the producer refilled the queue")
        monitor.sample()
    lines = monitor.table().splitlines()
    assert re.fullmatch(r"queue statistics over [\d.]+ s \(2 samples\)", lines[0])
    assert lines[1].split() == ["queue", "size/cap", "fill", "mean", "fill", "enqueued/s",
                                "dequeued/s", "consumers", "blocked", "s/s", "producers",
                                "blocked", "s/s"]
    cells = lines[2].split()
    assert cells[:4] == ["monitored", "4/4", "1.00", "1.00"]
    assert cells[6] == "0.00"
    assert len(lines) == 3


def test_history_and_window():
    with pipeline_with(fast_producer) as (pipeline, queue):
        wait_until(lambda: queue.size() == CAPACITY, "the producer filled the queue")
        monitor = QueueMonitor(pipeline, history_size=3)
        taken = [monitor.sample() for _ in range(5)]
    history = monitor.history
    assert list(history) == ["monitored"]
    assert history["monitored"] == [t["monitored"] for t in taken[-3:]]  # oldest dropped
    sample = history["monitored"][-1]
    assert isinstance(sample, Sample)
    assert (sample.size, sample.capacity, sample.fill) == (CAPACITY, CAPACITY, 1.0)
    assert monitor.rates(window=0.0)["monitored"].samples == 1


def test_background_thread_samples_and_stops_on_exit():
    with pipeline_with(fast_producer) as (pipeline, queue):
        with QueueMonitor(pipeline, interval=0.01) as monitor:
            assert monitor.running
            wait_until(lambda: len(monitor.history.get("monitored", ())) >= 3,
                       "the monitor took three samples")
        assert not monitor.running
        assert not [t for t in threading.enumerate() if t.name == "queuepipe/monitor"]
        monitor.stop()  # idempotent


def test_monitor_stops_with_its_coordinator():
    with pipeline_with(fast_producer) as (pipeline, _):
        coord = qp.Coordinator()
        monitor = QueueMonitor(pipeline, interval=0.01, coord=coord).start()
        wait_until(lambda: monitor.history, "the monitor took a sample")
        coord.request_stop()
        coord.join(stop_grace_period_secs=5)  # waits for the registered monitor thread
        assert not monitor.running
        monitor.stop()


def test_a_failing_sample_is_raised_by_stop():
    with pipeline_with(fast_producer) as (pipeline, queue):
        monitor = QueueMonitor(pipeline, interval=0.01)
        failed = threading.Event()

        def broken_stats():
            failed.set()
            raise RuntimeError("stats broke")

        queue.stats = broken_stats
        monitor.start()
        assert failed.wait(5)
        with pytest.raises(RuntimeError, match=r"^stats broke$"):
            monitor.stop()
        assert not monitor.running


def test_no_samples_yet():
    monitor = QueueMonitor(qp.Pipeline())
    assert monitor.table() == ("no samples yet: the pipeline has no queues, or the monitor has "
                               "not sampled")
    verdict = monitor.input_bound()
    assert not verdict and verdict.reason == "cannot tell: no queue has been sampled yet"


def test_one_sample_cannot_tell_and_unknown_queue_raises():
    with pipeline_with(fast_producer) as (pipeline, _):
        monitor = QueueMonitor(pipeline)
        monitor.sample()
    verdict = monitor.input_bound()
    assert not verdict
    assert verdict.reason == ("cannot tell: queue 'monitored' has 1 sample(s); need two at "
                              "different times")
    with pytest.raises(KeyError, match=r"queue 'nope' has not been sampled"):
        monitor.input_bound("nope")


@pytest.mark.parametrize("kwargs, message", [
    ({"interval": 0}, r"^interval must be > 0 seconds, got 0$"),
    ({"history_size": 1}, r"^history_size must be >= 2, got 1$"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        QueueMonitor(qp.Pipeline(), **kwargs)


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    with pipeline_with(fast_producer) as (pipeline, queue):
        wait_until(lambda: queue.size() == CAPACITY, "the producer filled the queue")
        monitor = QueueMonitor(pipeline)
        monitor.sample()
        for _ in range(CAPACITY):
            queue.dequeue()
        monitor.sample()
    path = monitor.plot(str(tmp_path / "queues.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_batching_pipeline_is_judged_at_its_batch_queue():
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        filenames = qp.string_input_producer([b"a", b"b", b"c"], shuffle=False)
        batches = qp.batch(filenames.dequeue, batch_size=2, capacity=8)
    monitor = QueueMonitor(pipeline)
    with qp.running(pipeline):
        wait_until(lambda: batches.queue.size() == 8, "the batch queue filled up")
        monitor.sample()
        first = batches.dequeue()
        wait_until(lambda: batches.queue.size() == 8, "the batch queue filled up again")
        monitor.sample()
    assert first.tolist() == [b"a", b"b"]
    assert list(monitor.history) == [filenames.name, batches.queue.name]
    verdict = monitor.input_bound()
    assert not verdict and verdict.queue == batches.queue.name
    assert verdict.reason.startswith(f"not input-bound: queue '{batches.queue.name}' was on "
                                     "average 100% full")
    table = monitor.table().splitlines()
    assert [line.split()[0] for line in table[2:]] == [filenames.name, batches.queue.name]


def test_a_monitor_says_its_interval_state_and_queues_when_printed():
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        queue = qp.FIFOQueue(4, [qp.int64], shapes=[[]], name="watched")
        pipeline.add_queue_runner(qp.QueueRunner(queue, [lambda: None]))
    monitor = QueueMonitor(pipeline, interval=0.5)
    assert repr(monitor) == "<QueueMonitor every 0.5 s, stopped, queues []>"
    monitor.sample()
    assert repr(monitor) == "<QueueMonitor every 0.5 s, stopped, queues ['watched']>"


def test_a_monitor_with_a_logdir_writes_tf1s_tags_that_tensorboard_reads(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    with pipeline_with(fast_producer) as (pipeline, queue):
        wait_until(lambda: queue.size() == CAPACITY)
        monitor = QueueMonitor(pipeline, logdir=str(tmp_path))
        monitor.sample()
        for _ in range(3):
            queue.dequeue()
            monitor.sample()
        monitor.stop()  # closes the event file though the thread never ran
    fills = [s.fill for s in monitor.history["monitored"]]
    run = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    run.Reload()
    tags = set(run.Tags()["scalars"])
    assert tags == {"monitored/fraction_of_4_full", "monitored/enqueued_per_sec",
                    "monitored/dequeued_per_sec", "monitored/consumers_blocked_secs_per_sec",
                    "monitored/producers_blocked_secs_per_sec"}
    points = run.Scalars("monitored/fraction_of_4_full")
    assert [p.step for p in points] == [0, 1, 2, 3]
    assert [p.value for p in points] == pytest.approx(fills)
    assert [p.step for p in run.Scalars("monitored/dequeued_per_sec")] == [1, 2, 3]
    assert all(p.value > 0 for p in run.Scalars("monitored/dequeued_per_sec"))


def test_the_monitor_thread_writes_until_stopped_and_closes_its_file(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    with pipeline_with(fast_producer) as (pipeline, _):
        with QueueMonitor(pipeline, interval=0.01, logdir=str(tmp_path)) as monitor:
            wait_until(lambda: len(monitor.history.get("monitored", [])) >= 3)
    taken = len(monitor.history["monitored"])
    run = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    run.Reload()
    assert len(run.Scalars("monitored/fraction_of_4_full")) == taken
    assert monitor._writer is None  # closed by stop()
