"""Soak: whole pipelines with many threads, shards and epochs, stopped at random points.

Each seed draws a pipeline (1-8 reader threads over 1-3 readers, 1-4 batch threads, 3-12
shards, 1-3 epochs, shuffle or FIFO batching, runners started by ``Batches`` or by the test)
and a way for the run to end:

* ``end``: the input runs out; the exact multiset of ids must arrive.
* ``break``: the consumer leaves the loop after k batches and closes the batches.
* ``stop``: the coordinator is told to stop after k batches.
* ``raise``: a producer (reading stage or batching stage) raises on one record; the consumer
  must get that exception, naming the record.
* ``interrupt``: a runner thread delivers ``KeyboardInterrupt`` to the main thread
  (``_thread.interrupt_main()`` or ``signal.raise_signal(SIGINT)``) when it reaches one record.

Whatever the ending, no id arrives more often than it exists, every dequeue returns within
``HANG_SECS`` and no thread outlives the test (the autouse fixture in tests/conftest.py).
The seeds are a fixed list, so CI runs the same pipelines every time.
"""

import _thread
import collections
import random
import signal

import pytest

import queuepipe as qp
from stress_util import Shards, Trip, assert_no_repeats, drain, reading_stage

SEEDS = list(range(100))
ENDINGS = ["end", "break", "stop", "raise", "interrupt"]


class RecordFault(RuntimeError):
    """The error a producer raises on its chosen record."""


def _interrupt(how):
    def action(record_id):
        if how == "interrupt_main":
            _thread.interrupt_main()
        else:
            signal.raise_signal(signal.SIGINT)
    return action


def _raise(record_id):
    raise RecordFault(f"producer failed on record id {record_id}")


def _plan(seed):
    rng = random.Random(seed)
    plan = dict(
        shards=rng.randint(3, 12), per_shard=rng.randint(20, 120), epochs=rng.randint(1, 3),
        readers=rng.randint(1, 3), reader_threads=rng.randint(1, 8),
        batch_threads=rng.randint(1, 4), batch_size=rng.choice([1, 7, 32, 64]),
        chunk=rng.choice([1, 16, 128]), shuffle=rng.random() < 0.6,
        explicit=rng.random() < 0.4, ending=ENDINGS[seed % len(ENDINGS)],
        raise_in=rng.choice(["reading", "batching"]),
        interrupt=rng.choice(["interrupt_main", "raise_signal"]))
    total = plan["shards"] * plan["per_shard"]
    plan["stop_after"] = rng.randint(0, max(1, total * plan["epochs"] // plan["batch_size"]))
    plan["trip_id"] = rng.randrange(total)
    return plan


def _build(shards, plan, seed, trip_reading, trip_batching):
    pipeline = qp.Pipeline()
    records, _ = reading_stage(
        shards, pipeline, epochs=plan["epochs"], readers=plan["readers"],
        reader_threads=plan["reader_threads"], chunk=plan["chunk"], seed=seed,
        capacity=64, trip=trip_reading)

    def element():
        record_id, key = records.dequeue()
        trip_batching.check([record_id])
        return record_id, key

    with pipeline.as_default():
        if plan["shuffle"]:
            batches = qp.train.shuffle_batch(
                element, plan["batch_size"], capacity=128, min_after_dequeue=32,
                num_threads=plan["batch_threads"], seed=seed, allow_smaller_final_batch=True)
        else:
            batches = qp.train.batch(element, plan["batch_size"], capacity=128,
                                     num_threads=plan["batch_threads"],
                                     allow_smaller_final_batch=True)
    return pipeline, batches


def _consume(pipeline, batches, stop_after):
    """Runs the consumer: with the runners owned by ``batches``, or under ``qp.running``."""
    with batches:
        return drain(batches, stop_after)


def _consume_explicit(pipeline, batches, stop_after, stop_coord):
    """Runs the consumer under ``qp.running``; ``stop_coord`` stops the coordinator after
    ``stop_after`` batches instead of leaving the loop."""
    with qp.train.running(pipeline) as coord:
        if stop_coord:
            return _drain_then_stop(batches, coord, stop_after)
        return drain(batches, stop_after)


def _drain_then_stop(batches, coord, stop_after):
    got, taken = drain(batches, stop_after)
    coord.request_stop()
    rest, more = drain(batches)  # what the queue still held when the stop closed it
    got.update(rest)
    return got, taken + more


@pytest.mark.parametrize("seed", SEEDS)
def test_soak(tmp_path, seed):
    plan = _plan(seed)
    shards = Shards(tmp_path, plan["shards"], plan["per_shard"])
    expected = shards.expected(plan["epochs"])
    ending = plan["ending"]
    trip_id = plan["trip_id"] if ending in ("raise", "interrupt") else None
    action = _raise if ending == "raise" else _interrupt(plan["interrupt"])
    in_reading = ending == "interrupt" or plan["raise_in"] == "reading"
    trip_reading = Trip(trip_id if in_reading else None, action)
    trip_batching = Trip(None if in_reading else trip_id, action)
    pipeline, batches = _build(shards, plan, seed, trip_reading, trip_batching)

    if ending == "end":
        got, _ = (_consume_explicit(pipeline, batches, None, False) if plan["explicit"]
                  else _consume(pipeline, batches, None))
        assert got == expected
    elif ending == "break":
        got, taken = (_consume_explicit(pipeline, batches, plan["stop_after"], False)
                      if plan["explicit"] else _consume(pipeline, batches, plan["stop_after"]))
        assert taken == plan["stop_after"] or got == expected  # stopped where told, or ran out
        assert_no_repeats(got, expected)
    elif ending == "stop":
        if plan["explicit"]:
            got, _ = _consume_explicit(pipeline, batches, plan["stop_after"], True)
        else:
            with batches:
                got, _ = drain(batches, plan["stop_after"])
                coord = batches.coord
                assert coord is not None, "Batches should own the runners it started"
                coord.request_stop()
                rest, _ = drain(batches)
                got.update(rest)
        assert_no_repeats(got, expected)
    elif ending == "raise":
        got = collections.Counter()
        with pytest.raises(RecordFault, match=rf"^producer failed on record id {trip_id}$"):
            if plan["explicit"]:
                with qp.train.running(pipeline):
                    got, _ = drain(batches, got=got)
            else:
                with batches:
                    got, _ = drain(batches, got=got)
        assert_no_repeats(got, expected)
        # The copy whose producer failed is not delivered (other epochs' copies may be).
        assert got[trip_id] < plan["epochs"], "the record whose producer failed was delivered"
    else:
        got = collections.Counter()
        with pytest.raises(KeyboardInterrupt):
            if plan["explicit"]:
                with qp.train.running(pipeline):
                    drain(batches, got=got)
            else:
                with batches:
                    drain(batches, got=got)
        assert trip_reading.fired.is_set()
        assert_no_repeats(got, expected)

