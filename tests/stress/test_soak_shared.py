"""Soak, round two: what broke pipelines once, drawn again and again from fixed seeds.

* ``concurrent``: two or three batch pipelines built one after the other on one
  ``qp.Pipeline`` (a train and eval streams), consumed in a random interleaving; some are
  left early (``close()``), the rest run to their end and must each deliver their exact
  multiset, whichever ends first.
* ``growing``: a writer appends whole records to a shard while the pipeline reads it. Every
  record written before the run arrives exactly once; appended ones at most once; nothing is
  reported as damage.
* ``index``: shards with ``.index`` files that disagree with their data (a line missing,
  repeated or swapped) read through ``ShardedTFRecordReader``: the exact multiset arrives.
* ``base_exception``: a producer raises a ``BaseException`` that is not an ``Exception``
  (``SystemExit``, ``GeneratorExit``, a custom one) on one record: the consumer gets it, and
  nothing hangs.

Every dequeue returns within ``HANG_SECS`` and no thread outlives a test (the autouse fixture
in tests/conftest.py).
"""

import collections
import random
import threading

import pytest

import queuepipe as qp
from queuepipe.distributed import ShardedTFRecordReader
from queuepipe.records import frame
from queuepipe.shards import write_shards
from stress_util import SPEC, Shards, assert_no_repeats, drain

SEEDS = list(range(40))
SCENARIOS = ["concurrent", "growing", "index", "base_exception"]


class Fatal(BaseException):
    """A producer's error that is not an ``Exception``."""


def _stream(shards, rng, epochs, reader_factory=qp.TFRecordReader):
    """File names -> one reader per thread -> shuffle_batch or batch, of ``(id, key)``."""
    names = qp.train.string_input_producer(shards.paths, num_epochs=epochs,
                                           seed=rng.randrange(1000))
    threads = rng.randint(1, 3)
    readers = [reader_factory() for _ in range(threads)]

    def producer(reader):
        def element():
            key, value = reader.read(names)
            return qp.io.parse_single_example(value, SPEC)["id"], key
        return element

    size = rng.choice([1, 5, 16])
    if rng.random() < 0.5:
        return qp.train.shuffle_batch_join([producer(r) for r in readers], size, capacity=24,
                                           min_after_dequeue=4, seed=rng.randrange(1000),
                                           allow_smaller_final_batch=True)
    return qp.train.batch_join([producer(r) for r in readers], size, capacity=8,
                               allow_smaller_final_batch=True)


def _concurrent(tmp_path, rng):
    pipeline = qp.Pipeline()
    streams = []
    with pipeline.as_default():
        for i in range(rng.randint(2, 3)):
            (tmp_path / f"s{i}").mkdir()
            shards = Shards(tmp_path / f"s{i}", rng.randint(1, 4), rng.randint(5, 40))
            epochs = rng.randint(1, 2)
            streams.append((_stream(shards, rng, epochs), shards.expected(epochs),
                            rng.random() < 0.25))  # left early?
    got = [collections.Counter() for _ in streams]
    live = list(range(len(streams)))
    while live:
        i = rng.choice(live)
        batches, _, leave = streams[i]
        if leave and rng.random() < 0.2:
            batches.close()
            live.remove(i)
            continue
        _, taken = drain(batches, 1, got=got[i])
        if not taken:
            live.remove(i)
    for (batches, expected, leave), arrived in zip(streams, got):
        batches.close()
        if leave:
            assert_no_repeats(arrived, expected)
        else:
            assert arrived == expected


def _growing(tmp_path, rng):
    shards = Shards(tmp_path, rng.randint(1, 3), rng.randint(20, 200))
    before = shards.expected(1)
    victim = rng.choice(shards.paths)
    appended = list(range(10_000, 10_000 + rng.randint(1, 50)))
    records = [qp.train.make_example({"id": i}).SerializeToString() for i in appended]
    started = threading.Event()

    def append():
        started.wait(10)
        with open(victim, "ab") as f:
            for record in records:
                f.write(frame(record))
                f.flush()

    writer = threading.Thread(target=append, name="test/appender")
    writer.start()
    try:
        with qp.Pipeline().as_default():
            names = qp.train.string_input_producer(shards.paths, num_epochs=1, shuffle=False)
            reader = qp.TFRecordReader(corrupt_records=rng.choice(["raise", "skip"]))

            def element():
                started.set()
                key, value = reader.read(names)
                return qp.io.parse_single_example(value, SPEC)["id"], key

            with qp.train.batch(element, rng.choice([1, 7]),
                                allow_smaller_final_batch=True) as batches:
                got, _ = drain(batches)
    finally:
        started.set()
        writer.join()
    assert reader.num_records_skipped() == 0
    assert_no_repeats(got, before + collections.Counter(appended))
    assert not before - got, "a record written before the run was lost"


def _index(tmp_path, rng):
    ids = list(range(rng.randint(10, 120)))
    records = [qp.train.make_example({"id": i}).SerializeToString() for i in ids]
    paths = write_shards(records, tmp_path, rng.randint(1, 4), processes=1, progress=False)
    for path in paths:
        with open(path + ".index") as f:
            lines = f.readlines()
        if len(lines) >= 2:
            k = rng.randrange(len(lines) - 1)
            edit = rng.choice(["drop", "repeat", "swap", "none"])
            if edit == "drop":
                del lines[k]
            elif edit == "repeat":
                lines.insert(k, lines[k])
            elif edit == "swap":
                lines[k], lines[k + 1] = lines[k + 1], lines[k]
        with open(path + ".index", "w") as f:
            f.writelines(lines)
    shards = type("Indexed", (), {"paths": paths})
    with qp.Pipeline().as_default():
        batches = _stream(shards, rng, 1, lambda: ShardedTFRecordReader(0, 1))
    with batches:
        got, _ = drain(batches)
    assert got == collections.Counter(ids)


def _base_exception(tmp_path, rng):
    shards = Shards(tmp_path, rng.randint(1, 3), rng.randint(10, 60))
    trip = rng.choice(shards.ids)
    error = rng.choice([SystemExit(2), GeneratorExit(), Fatal("fatal")])
    with qp.Pipeline().as_default():
        names = qp.train.string_input_producer(shards.paths, num_epochs=1)
        reader = qp.TFRecordReader()

        def element():
            key, value = reader.read(names)
            record_id = int(qp.io.parse_single_example(value, SPEC)["id"])
            if record_id == trip:
                raise error
            return record_id, key

        batches = qp.train.shuffle_batch(element, rng.choice([1, 4]), capacity=16,
                                         min_after_dequeue=2, num_threads=rng.randint(1, 4),
                                         allow_smaller_final_batch=True)
    got = collections.Counter()
    with pytest.raises(type(error)), batches:
        drain(batches, got=got)
    assert_no_repeats(got, shards.expected(1))
    assert got[trip] == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_soak_shared(tmp_path, seed):
    rng = random.Random(seed)
    scenario = SCENARIOS[seed % len(SCENARIOS)]
    {"concurrent": _concurrent, "growing": _growing, "index": _index,
     "base_exception": _base_exception}[scenario](tmp_path, rng)
