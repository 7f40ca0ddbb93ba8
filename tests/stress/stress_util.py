"""Shared pieces of the stress tests: numbered shards, a full pipeline, and a hang detector.

Every record of a stress dataset is an Example holding one unique ``id`` (int64), so a
multiset of delivered ids says exactly what was lost or repeated. ``Shards.where[id]`` is the
``(file, byte offset)`` of that record, for the tests that damage files.
"""

from __future__ import annotations

import collections
import os
import threading
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

import queuepipe as qp
from queuepipe.records import FRAME_BYTES

# A dequeue that waits this long is a hang: the run fails with the seed instead of blocking
# until the per-test timeout. Not a performance figure: a healthy run never comes near it.
HANG_SECS = 30.0

SPEC = {"id": qp.io.FixedLenFeature([], qp.int64)}


class Shards:
    """TFRecord shards of Examples with unique ids, and where each record lies."""

    def __init__(self, folder, num_shards: int, per_shard: int, payload: int = 0):
        self.paths: List[str] = []
        self.where: Dict[int, Tuple[str, int]] = {}
        next_id = 0
        for s in range(num_shards):
            path = os.path.join(str(folder), f"shard-{s:03d}.tfrecord")
            offset = 0
            with qp.io.TFRecordWriter(path) as writer:
                for _ in range(per_shard):
                    record = qp.train.make_example(
                        {"id": next_id, "pad": b"x" * payload}).SerializeToString()
                    writer.write(record)
                    self.where[next_id] = (path, offset)
                    offset += len(record) + FRAME_BYTES
                    next_id += 1
            self.paths.append(path)
        self.ids = list(range(next_id))

    def expected(self, epochs: int) -> collections.Counter:
        return collections.Counter(self.ids * epochs)


class Trip:
    """Calls ``action`` once, from whichever thread first sees record ``record_id``."""

    def __init__(self, record_id: Optional[int], action: Callable[[int], None]):
        self.record_id = record_id
        self._action = action
        self._lock = threading.Lock()
        self.fired = threading.Event()

    def check(self, ids) -> None:
        if self.record_id is None or self.fired.is_set():
            return
        if np.any(np.asarray(ids) == self.record_id):
            with self._lock:
                if self.fired.is_set():
                    return
                self.fired.set()
            self._action(self.record_id)


def reading_stage(shards: Shards, pipeline: qp.Pipeline, *, epochs: int, readers: int,
                  reader_threads: int, chunk: int, seed: int, capacity: int,
                  trip: Optional[Trip] = None, corrupt_records: str = "raise"):
    """File names -> ``reader_threads`` threads reading and parsing chunks -> a FIFOQueue.

    Returns the queue of ``(id, key)`` elements and the readers.
    """
    with pipeline.as_default():
        names = qp.train.string_input_producer(shards.paths, num_epochs=epochs, seed=seed,
                                               capacity=len(shards.paths))
        pool = [qp.TFRecordReader(corrupt_records=corrupt_records) for _ in range(readers)]
        records = qp.FIFOQueue(capacity, [qp.int64, qp.string], shapes=[[], []],
                               name="stress_records")

        def read_op(reader):
            def op():
                keys, values = reader.read_up_to(names, chunk)
                ids = qp.io.parse_example(values, SPEC, example_names=keys)["id"]
                if trip is not None:
                    trip.check(ids)
                records.enqueue_many((ids, keys))
            return op

        ops = [read_op(pool[i % readers]) for i in range(reader_threads)]
        qp.train.add_queue_runner(qp.train.QueueRunner(records, ops))
    return records, pool


def drain(batches, stop_after: Optional[int] = None,
          got: Optional[collections.Counter] = None) -> Tuple[collections.Counter, int]:
    """Takes batches until the input ends (or ``stop_after`` batches); returns the ids seen
    and the number of batches.

    Args:
      got: a Counter to update in place (it then holds what arrived even if a dequeue
        raises); a new one by default.

    Raises AssertionError when one dequeue waits ``HANG_SECS``.
    """
    got = collections.Counter() if got is None else got
    taken = 0
    while stop_after is None or taken < stop_after:
        try:
            ids, _ = batches.dequeue(timeout=HANG_SECS)
        except qp.errors.OutOfRangeError:
            break
        except qp.errors.DeadlineExceededError as e:
            raise AssertionError(f"the pipeline hung: {e}") from e
        got.update(ids.tolist())
        taken += 1
    return got, taken


def assert_no_repeats(got: collections.Counter, expected: collections.Counter) -> None:
    """Every id delivered at most as often as it exists (an interrupted run loses the rest)."""
    extra = got - expected
    assert not extra, f"records delivered more often than they exist: {dict(extra)}"
