"""Tests for queuepipe.batching: the batch family, Batches, read_batch_features, running()."""

import _thread
import collections
import gc
import logging
import os
import re
import subprocess
import sys
import threading
from collections import Counter

import numpy as np
import pytest

import queuepipe as qp
from helpers import wait_until
from queuepipe.batching import (
    Batches, batch, batch_join, maybe_batch, maybe_batch_join, maybe_shuffle_batch,
    maybe_shuffle_batch_join, running, shuffle_batch, shuffle_batch_join,
)
from queuepipe.features import read_batch_features
from queuepipe.parsing._walkers import core_available
from queuepipe.errors import (
    DeadlineExceededError, InvalidArgumentError, NotFoundError, OutOfRangeError,
)
from queuepipe.parsing import FixedLenFeature, VarLenFeature, decode_raw, parse_example, \
    parse_single_example
from queuepipe.producers import limit_epochs, slice_input_producer, string_input_producer
from queuepipe.protos import make_example
from queuepipe.readers import TFRecordReader
from queuepipe.runner import Pipeline
from queuepipe.shards import write_shards

FEATURES = {"id": FixedLenFeature([], qp.int64), "name": FixedLenFeature([], qp.string),
            "pixels": FixedLenFeature([], qp.string)}


@pytest.fixture(autouse=True)
def pipeline():
    """Every test builds its pipeline in a fresh default Pipeline."""
    with Pipeline().as_default() as scoped:
        yield scoped


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """5 shards holding 60 Examples: id 0..59, name b"r<id>", 4 pixel bytes of the id."""
    out = tmp_path_factory.mktemp("shards")
    records = [make_example({"id": i, "name": f"r{i}".encode(),
                             "pixels": bytes([i % 256] * 4)}).SerializeToString()
               for i in range(60)]
    return write_shards(records, out, 5, processes=1, progress=False, index=False)


def reading_producer(filenames):
    """A producer reading one record per call with its own reader: ``(id, name)``."""
    reader = TFRecordReader()

    def produce():
        _, serialized = reader.read(filenames)
        parsed = parse_single_example(serialized, FEATURES)
        return parsed["id"], parsed["name"]

    return produce


def ids_of(batches):
    """Every id delivered, and the batch sizes, draining ``batches``."""
    ids, sizes = [], []
    for ids_batch, names in batches:
        assert names.dtype == object and all(n == b"r%d" % i for i, n in zip(ids_batch, names))
        ids.extend(int(i) for i in ids_batch)
        sizes.append(len(ids_batch))
    return ids, sizes


def rows(n, num_epochs=1, seed=None, shuffle=False):
    """A producer of ``(i, 10 * i)`` for i in 0..n-1, each epoch, in order unless shuffled."""
    return slice_input_producer([np.arange(n), 10 * np.arange(n)], num_epochs=num_epochs,
                                shuffle=shuffle, seed=seed)


def from_items(items):
    """A producer returning each of ``items`` once (thread-safe), then ending the input."""
    items = iter(items)
    lock = threading.Lock()

    def produce():
        with lock:
            item = next(items, None)
        if item is None:
            raise OutOfRangeError("no more items")
        return item

    return produce


def first(batches):
    """The first batch; then the batches are closed."""
    with batches:
        return next(batches)


def full_then_smaller(sizes, batch_size, total):
    return sizes == [batch_size] * (total // batch_size) + ([total % batch_size]
                                                           if total % batch_size else [])


# -- exactly once ---------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("shuffle", [False, True])
def test_every_record_of_every_epoch_arrives_once(shards, threads, shuffle):
    filenames = string_input_producer(shards, num_epochs=3, seed=1)
    if shuffle:
        batches = shuffle_batch(reading_producer(filenames), 7, capacity=40,
                                min_after_dequeue=10, num_threads=threads, seed=2,
                                allow_smaller_final_batch=True)
    else:
        batches = batch(reading_producer(filenames), 7, num_threads=threads, capacity=16,
                        allow_smaller_final_batch=True)
    ids, sizes = ids_of(batches)
    assert Counter(ids) == Counter(list(range(60)) * 3)
    assert full_then_smaller(sizes, 7, 180)


@pytest.mark.parametrize("producers", [1, 2, 4])
@pytest.mark.parametrize("shuffle", [False, True])
def test_join_reads_with_one_reader_per_thread_and_loses_nothing(shards, producers, shuffle):
    filenames = string_input_producer(shards, num_epochs=2, seed=3)
    tensors_list = [reading_producer(filenames) for _ in range(producers)]
    if shuffle:
        batches = shuffle_batch_join(tensors_list, 8, capacity=30, min_after_dequeue=12,
                                     seed=4, allow_smaller_final_batch=True)
    else:
        batches = batch_join(tensors_list, 8, allow_smaller_final_batch=True)
    ids, sizes = ids_of(batches)
    assert Counter(ids) == Counter(list(range(60)) * 2)
    assert full_then_smaller(sizes, 8, 120)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("randomize", [False, True])
def test_read_batch_features_delivers_every_record_once(shards, threads, randomize):
    batches = read_batch_features(shards, 16, FEATURES, randomize_input=randomize,
                                  num_epochs=3, queue_capacity=64, reader_num_threads=2,
                                  num_enqueue_threads=threads, read_batch_size=5, seed=5)
    ids, sizes = [], []
    for parsed in batches:
        assert sorted(parsed) == ["id", "name", "pixels"]
        assert all(n == b"r%d" % i for i, n in zip(parsed["id"], parsed["name"]))
        assert all(p == bytes([i % 256] * 4) for i, p in zip(parsed["id"], parsed["pixels"]))
        ids.extend(parsed["id"].tolist())
        sizes.append(len(parsed["id"]))
    assert Counter(ids) == Counter(list(range(60)) * 3)
    assert full_then_smaller(sizes, 16, 180)


def test_read_batch_features_with_a_parse_fn_that_decodes(shards):
    def parse(serialized):
        parsed = parse_example(serialized, FEATURES)
        return {"id": parsed["id"], "pixels": decode_raw(parsed["pixels"], qp.uint8)}

    pattern = os.path.join(os.path.dirname(shards[0]), "*.tfrecord")
    batches = read_batch_features(pattern, 32, FEATURES, num_epochs=1, parse_fn=parse, seed=0)
    got = list(batches)
    # fixed shapes: the preallocated fast path (the last column: each row's ordinal, which
    # the batches take off again and the state counts)
    assert batches.queue.shapes == [(), (4,), ()]
    assert batches.queue.names == ["id", "pixels", "__queuepipe_ordinal__"]
    ids = np.concatenate([b["id"] for b in got])
    pixels = np.concatenate([b["pixels"] for b in got])
    assert Counter(ids.tolist()) == Counter(range(60))
    assert pixels.dtype == np.uint8
    np.testing.assert_array_equal(pixels, np.repeat((ids % 256)[:, None], 4, axis=1))


class _DuckReader:
    """A reader of another library: read_up_to alone, no queuepipe base class."""

    def __init__(self):
        self.reader = TFRecordReader()
        self.calls = 0

    def read_up_to(self, queue, n):
        self.calls += 1
        return self.reader.read_up_to(queue, n)


@pytest.mark.parametrize("parse_fn", [None, lambda values: parse_example(values, FEATURES)],
                         ids=["parse_example", "parse_fn"])
def test_read_batch_features_takes_any_reader_with_read_up_to(shards, parse_fn):
    made = []
    batches = read_batch_features(shards, 16, FEATURES, reader=lambda: made.append(
        _DuckReader()) or made[-1], num_epochs=2, parse_fn=parse_fn, read_batch_size=7, seed=1)
    ids = [i for parsed in batches for i in parsed["id"].tolist()]
    assert Counter(ids) == Counter(list(range(60)) * 2)
    assert made[0].calls >= 120 // 7


def test_read_batch_features_names_the_record_that_does_not_parse(tmp_path):
    # records are parsed a batch at a time, their keys read again only for the message: it
    # still names the record by its file and offset (its index is its place in its batch)
    path = str(tmp_path / "data.tfrecord")
    records = [make_example({"id": i} if i != 5 else {"id": b"five"}).SerializeToString()
               for i in range(7)]
    with qp.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    offset = sum(len(record) + 16 for record in records[:5])  # each framed in 16 bytes more
    batches = read_batch_features(path, 2, {"id": FixedLenFeature([], qp.int64)}, num_epochs=1,
                                  read_batch_size=4, num_enqueue_threads=1)
    with pytest.raises(InvalidArgumentError, match=rf"^Name: {re.escape(path)}:{offset}, "
                                                   r"Key: id, Index: [01]\.  Data types don't "
                                                   r"match"):
        list(batches)


def _long_records(path, n=6, bad=None, options=None):
    """n records of 20 KB (record ``bad`` with an id that is not an int64); their offsets."""
    offsets, offset = [], 0
    with qp.io.TFRecordWriter(path, options=options) as writer:
        for i in range(n):
            record = make_example({"id": i if i != bad else b"bad",
                                   "blob": bytes([i]) * 20000}).SerializeToString()
            writer.write(record)
            offsets.append(offset)
            offset += len(record) + 16
    return offsets


LONG = {"id": FixedLenFeature([], qp.int64), "blob": FixedLenFeature([], qp.string)}


@pytest.mark.parametrize("options, parsed_first", [(None, True), ("GZIP", False)])
def test_read_batch_features_parses_long_records_before_the_queue(tmp_path, options,
                                                                  parsed_first):
    # 16 KB or more on average, by the first records' headers (of an uncompressed file): the
    # queue holds the parsed columns, not the records; the batches are the same
    path = str(tmp_path / "long.tfrecord")
    _long_records(path, options=options)
    batches = read_batch_features(path, 2, LONG, num_epochs=1, read_batch_size=4, seed=0,
                                  reader=lambda: TFRecordReader(options=options))
    got = list(batches)
    assert ("blob" in batches.queue.names) == parsed_first
    ids = np.concatenate([batch["id"] for batch in got])
    assert sorted(ids.tolist()) == list(range(6))
    assert all(blob == bytes([i]) * 20000 for batch in got
               for i, blob in zip(batch["id"].tolist(), batch["blob"]))


def test_read_batch_features_default_chunk_is_about_8_mib_of_records(monkeypatch):
    from queuepipe import features
    from queuepipe.features import _default_read_batch_size

    monkeypatch.setattr(features, "core_available", lambda: True)
    assert _default_read_batch_size(128, 199.0) == 2048  # short records: the most
    assert _default_read_batch_size(128, 4096.0) == 2048
    assert _default_read_batch_size(128, 10000.0) == 838  # 8 MiB of them
    assert _default_read_batch_size(128, 16384.0) == 512
    assert _default_read_batch_size(128, 100000.0) == 512  # long ones: the least
    assert _default_read_batch_size(128, None) == 512  # not probed
    assert _default_read_batch_size(128, 0.0) == 2048  # (empty records)
    assert _default_read_batch_size(4096, 199.0) == 4096  # at least a batch
    monkeypatch.setattr(features, "core_available", lambda: False)
    assert _default_read_batch_size(128, 199.0) == 512  # the pure path: bigger cost more


@pytest.mark.parametrize("kind, options, chunk", [("short", None, 2048), ("short", "GZIP", 512),
                                                  ("long", None, 512)])
def test_read_batch_features_picks_its_chunk_by_the_first_records(tmp_path, kind, options,
                                                                    chunk):
    path = str(tmp_path / "data.tfrecord")
    if kind == "long":
        _long_records(path, options=options)
    else:
        with qp.io.TFRecordWriter(path, options=options) as writer:
            for i in range(6):
                writer.write(make_example({"id": i, "blob": b"x"}).SerializeToString())
    batches = read_batch_features(path, 2, LONG, num_epochs=1, seed=0,
                                  reader=lambda: TFRecordReader(options=options))
    assert sorted(np.concatenate([batch["id"] for batch in batches]).tolist()) == list(range(6))
    assert batches._saver.plan.chunk_size == (chunk if core_available() else 512)


@pytest.mark.parametrize("bad", [4, 6])
def test_read_batch_features_names_the_long_record_that_does_not_parse(tmp_path, bad):
    # parsed with its chunk before the queue: named by its file and offset all the same (its
    # index is its place in its chunk), after every record before it was delivered
    path = str(tmp_path / "long.tfrecord")
    offsets = _long_records(path, n=8, bad=bad)
    batches = read_batch_features(path, 2, LONG, num_epochs=1, read_batch_size=4,
                                  num_enqueue_threads=1)
    ids = []
    with pytest.raises(InvalidArgumentError, match=rf"^Name: {re.escape(path)}:{offsets[bad]}, "
                                                   rf"Key: id, Index: {bad - 4}\.  Data types "
                                                   r"don't match"):
        for batch in batches:
            ids += batch["id"].tolist()
    assert sorted(ids) == list(range(bad))
    assert "blob" in batches.queue.names  # (parsed before the queue)


def test_a_seeded_read_of_long_records_delivers_every_record_before_a_bad_one(tmp_path,
                                                                            monkeypatch):
    # the chunk with the bad record raises in its turn, after the chunks before it, with the
    # records before it in its chunk: here its thread has handed its turn over while the
    # chunk before it (records 8 to 11) is still being parsed by the other thread
    from queuepipe import features

    path = str(tmp_path / "long.tfrecord")
    offsets = _long_records(path, n=16, bad=13)
    eighth = make_example({"id": 8, "blob": bytes([8]) * 20000}).SerializeToString()
    handed, parse, run_turn = threading.Event(), features.parse_example, \
        features._Planned._run_turn

    def parse_after_the_hand_over(values, *args, **kwargs):
        if len(values) and values[0] == eighth:
            assert handed.wait(10)
        return parse(values, *args, **kwargs)

    def run_turn_and_tell(planned, ticket, enqueue):
        run_turn(planned, ticket, enqueue)
        if ticket == 3:  # (the bad record's chunk)
            handed.set()

    monkeypatch.setattr(features, "parse_example", parse_after_the_hand_over)
    monkeypatch.setattr(features._Planned, "_run_turn", run_turn_and_tell)
    batches = read_batch_features(path, 2, LONG, num_epochs=1, read_batch_size=4, seed=0,
                                  num_enqueue_threads=2, randomize_input=False)
    ids = []
    with pytest.raises(InvalidArgumentError, match=rf"^Name: {re.escape(path)}:{offsets[13]}, "):
        for batch in batches:
            ids += batch["id"].tolist()
    assert ids == list(range(13))


def test_read_batch_features_leaves_long_records_with_a_varlen_feature_serialized(tmp_path):
    # a chunk parsed before the queue would give its rows the chunk's longest list as their
    # dense shape: each batch has its own
    path = str(tmp_path / "long.tfrecord")
    with qp.io.TFRecordWriter(path) as writer:
        for i in range(8):
            writer.write(make_example({"blob": bytes(20000), "tokens": list(range(
                10 if i == 0 else 1))}).SerializeToString())
    spec = {"blob": FixedLenFeature([], qp.string), "tokens": VarLenFeature(qp.int64)}
    batches = read_batch_features(path, 2, spec, num_epochs=1, read_batch_size=8,
                                  randomize_input=False)
    shapes = [batch["tokens"].dense_shape.tolist() for batch in batches]
    assert shapes == [[2, 10], [2, 1], [2, 1], [2, 1]]
    assert "__queuepipe_serialized__" in batches.queue.names


def test_read_batch_features_rejects_a_missing_pattern_and_sequence_features(tmp_path):
    with pytest.raises(NotFoundError, match=r"^read_batch_features: no file matches '.*nope"):
        read_batch_features(str(tmp_path / "nope-*.tfrecord"), 4, FEATURES)
    with pytest.raises(InvalidArgumentError, match=r"^read_batch_features parses "
                                                   r"FixedLenFeatures and VarLenFeatures: feature "
                                                   r"'tags' is a FixedLenSequenceFeature"):
        read_batch_features(str(tmp_path / "*"), 4, {"tags": qp.io.FixedLenSequenceFeature(
            [], qp.int64, allow_missing=True)})


def test_read_batch_features_endless_by_default(shards):
    batches = read_batch_features(shards, 50, FEATURES, randomize_input=False,
                                  queue_capacity=100)
    with batches:
        ids = [i for _ in range(4) for i in batches.dequeue()["id"].tolist()]
    assert len(ids) == 200 and set(ids) == set(range(60))  # past the first epochs: endless


# -- final batch ----------------------------------------------------------------------------


def test_allow_smaller_final_batch_delivers_the_remainder():
    got = list(batch(rows(23), 5, allow_smaller_final_batch=True))
    assert [len(ids) for ids, _ in got] == [5, 5, 5, 5, 3]
    assert np.concatenate([ids for ids, _ in got]).tolist() == list(range(23))


def test_without_allow_smaller_final_batch_the_remainder_is_dropped():
    batches = batch(rows(23), 5)
    got = list(batches)
    assert [len(ids) for ids, _ in got] == [5, 5, 5, 5]
    assert np.concatenate([ids for ids, _ in got]).tolist() == list(range(20))
    with pytest.raises(OutOfRangeError, match=r"is closed and has insufficient elements "
                                              r"\(requested 5, current size 3\)"):
        batches.dequeue()


def test_dequeue_raises_out_of_range_at_the_end_and_iteration_stops():
    batches = batch(rows(4), 2)
    assert [ids.tolist() for ids, _ in (batches.dequeue(), batches.dequeue())] == [[0, 1],
                                                                                  [2, 3]]
    with pytest.raises(OutOfRangeError):
        batches.dequeue()
    assert list(batches) == []


def test_an_empty_input_gives_no_batch():
    def exhausted():
        raise OutOfRangeError("nothing at all")

    assert list(shuffle_batch(exhausted, 3, capacity=10, min_after_dequeue=2)) == []


# -- structures -----------------------------------------------------------------------------


def test_batches_keep_the_structure_of_the_element():
    assert isinstance(first(batch(limit_epochs((1, 2.5), 4), 2)), tuple)
    listed = first(batch(limit_epochs([np.int32(1), b"x"], 4), 2))
    assert isinstance(listed, list) and listed[0].dtype == np.int32
    assert listed[1].dtype == object and listed[1].tolist() == [b"x", b"x"]
    single = first(batch(limit_epochs((7,), 4), 2))
    assert isinstance(single, tuple) and single[0].tolist() == [7, 7]
    bare = first(batch(limit_epochs(np.arange(3.0), 4), 2))
    assert isinstance(bare, np.ndarray) and bare.shape == (2, 3)


def test_dict_elements_give_dict_batches():
    produce = from_items([{"label": i, "image": np.full((2, 2), i, np.uint8), "key": b"k%d" % i}
                          for i in range(10)])
    got = list(shuffle_batch(produce, 4, capacity=8, min_after_dequeue=2, seed=0,
                             allow_smaller_final_batch=True))
    assert all(sorted(b) == ["image", "key", "label"] for b in got)
    labels = np.concatenate([b["label"] for b in got])
    assert Counter(labels.tolist()) == Counter(range(10))
    for b in got:
        assert b["image"].shape[1:] == (2, 2) and b["image"].dtype == np.uint8
        assert (b["image"][:, 0, 0] == b["label"]).all()
        assert b["key"].tolist() == [b"k%d" % i for i in b["label"]]


def test_enqueue_many_takes_batches_of_elements():
    chunk = (np.arange(10), np.array([b"s%d" % i for i in range(10)], dtype=object))
    batches = shuffle_batch(limit_epochs(chunk, 3), 4, capacity=16, min_after_dequeue=4,
                            num_threads=2, enqueue_many=True, seed=1,
                            allow_smaller_final_batch=True)
    got = list(batches)
    ids = np.concatenate([ids for ids, _ in got]).tolist()
    assert Counter(ids) == Counter(list(range(10)) * 3)
    assert all(names.tolist() == [b"s%d" % i for i in ids] for ids, names in got)
    assert batches.queue.shapes == [(), ()]


def test_shapes_argument_declares_the_component_shapes():
    batches = batch(limit_epochs(([1, 2], 3.0), 2), 2, shapes=[[2], []])
    pairs, scalars = first(batches)
    assert pairs.tolist() == [[1, 2], [1, 2]] and scalars.tolist() == [3.0, 3.0]
    assert batches.queue.shapes == [(2,), ()]


def test_shapes_with_the_wrong_number_of_entries_is_reported_to_the_consumer():
    batches = batch(limit_epochs((1, 2), 2), 2, shapes=[[], [], []], name="bad_shapes")
    with pytest.raises(InvalidArgumentError, match=r"^batch queue 'bad_shapes/fifo_queue': shapes "
                                                   r"has 3 entries but the elements have 2"):
        batches.dequeue()


def test_a_shape_mismatch_names_the_component():
    lengths = iter([3, 3, 4])
    batches = batch(lambda: (np.zeros(next(lengths)), 1), 2, name="mixed")
    assert next(batches)[0].shape == (2, 3)
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'mixed/fifo_queue' component 0: expected shape \[3\], "
                             r"got shape \[4\] \(Shape mismatch in tuple component 0\. "
                             r"Expected \[3\], got \[4\]\)$") as excinfo:
        next(batches)
    assert isinstance(excinfo.value.__cause__, InvalidArgumentError)


def test_dynamic_pad_pads_every_free_dimension_per_batch():
    sequences = [np.arange(1, n + 1) for n in (2, 4, 1, 3)]
    words = [[b"a"], [b"bb", b"c"], [b"d", b"e", b"f"], []]
    got = list(batch(from_items([(seq, np.array(ws, dtype=object), i) for i, (seq, ws)
                                 in enumerate(zip(sequences, words))]), 2, dynamic_pad=True))
    (s1, w1, i1), (s2, w2, i2) = got
    assert s1.tolist() == [[1, 2, 0, 0], [1, 2, 3, 4]] and i1.tolist() == [0, 1]
    assert w1.tolist() == [[b"a", b""], [b"bb", b"c"]]
    assert s2.tolist() == [[1, 0, 0], [1, 2, 3]] and i2.tolist() == [2, 3]
    assert w2.tolist() == [[b"d", b"e", b"f"], [b"", b"", b""]]


def test_dynamic_pad_with_shapes_pads_only_the_free_dimensions():
    batches = batch(from_items([np.ones((n, 2)) for n in (1, 3, 2)]), 3, dynamic_pad=True,
                    shapes=[None, 2])
    padded = next(batches)
    assert padded.shape == (3, 3, 2)
    assert padded.sum(axis=(1, 2)).tolist() == [2.0, 6.0, 4.0]
    batches.close()


# -- keep_input ----------------------------------------------------------------------------


def test_keep_input_false_keeps_nothing_and_true_everything():
    assert list(maybe_batch(rows(10), False, 2, allow_smaller_final_batch=True)) == []
    kept = list(maybe_shuffle_batch(rows(10), 4, 8, 2, True, seed=0,
                                    allow_smaller_final_batch=True))
    assert Counter(np.concatenate([ids for ids, _ in kept]).tolist()) == Counter(range(10))


def test_keep_input_callable_filters_elements():
    got = list(maybe_batch(rows(20), lambda element: element[0] % 3 == 0, 3,
                           allow_smaller_final_batch=True))
    assert np.concatenate([ids for ids, _ in got]).tolist() == [0, 3, 6, 9, 12, 15, 18]


def test_keep_input_mask_with_enqueue_many():
    chunk = (np.arange(6), np.array([b"a", b"b", b"c", b"d", b"e", b"f"], dtype=object))
    mask = np.array([True, False, True, False, False, True])
    got = list(maybe_batch_join([limit_epochs(chunk, 2)], mask, 3, enqueue_many=True))
    assert [(ids.tolist(), names.tolist()) for ids, names in got] == [
        ([0, 2, 5], [b"a", b"c", b"f"])] * 2
    by_callable = maybe_shuffle_batch_join(
        [limit_epochs(chunk, 1)], 2, 5, 1, lambda b: b[0] >= 4, enqueue_many=True, seed=0)
    assert sorted(next(by_callable)[0].tolist()) == [4, 5]
    by_callable.close()


def test_keep_input_is_checked_as_tf_does():
    with pytest.raises(InvalidArgumentError,
                       match=r"^`keep_input` cannot be a vector when `enqueue_many=False`\.$"):
        maybe_batch(rows(4), [True, False], 2)
    with pytest.raises(InvalidArgumentError,
                       match=r"^`keep_input` must be 0 or 1 dimensions, got shape \(1, 1\)\.$"):
        maybe_batch(rows(4), [[True]], 2, enqueue_many=True)
    with pytest.raises(InvalidArgumentError, match=r"^`keep_input` must be a bool or bools, "
                                                   r"got 'yes'$"):
        maybe_batch(rows(4), "yes", 2)


def test_a_mask_of_the_wrong_length_reaches_the_consumer():
    batches = maybe_batch(limit_epochs((np.arange(4),), 1), [True, False], 2,
                          enqueue_many=True)
    with pytest.raises(InvalidArgumentError, match=r"^`keep_input` has 2 entries but the "
                                                   r"batch has \[4\] elements$"):
        next(batches)


# -- reproducibility -----------------------------------------------------------------------


def test_a_seeded_single_thread_pipeline_repeats_exactly():
    def run():
        with Pipeline().as_default():
            batches = shuffle_batch(rows(50, num_epochs=2, seed=7, shuffle=True), 6,
                                    capacity=40, min_after_dequeue=10, seed=8,
                                    allow_smaller_final_batch=True)
            got = [ids.tolist() for ids, _ in batches]
            assert batches.queue.min_after_dequeue == 10  # as asked: no waiting for a full queue
            return got

    first, second = run(), run()
    assert first == second
    assert Counter(sum(first, [])) == Counter(list(range(50)) * 2)
    assert sum(first, []) != sorted(sum(first, []))


# -- errors ----------------------------------------------------------------------------------


class Boom(Exception):
    """A producer's own exception type."""


def test_a_failing_producer_surfaces_its_own_exception_chained():
    numbers = iter(range(100))

    def produce():
        i = next(numbers)
        if i == 7:
            raise Boom(f"bad record {i}")
        return (i,)

    batches = batch(produce, 3)
    got = [next(batches)[0].tolist(), next(batches)[0].tolist()]
    assert got == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(Boom, match=r"^bad record 7$") as excinfo:
        next(batches)
    assert type(excinfo.value.__cause__) is Boom
    assert batches.coord.requested_exception is excinfo.value.__cause__
    batches.close()  # the consumer already has the error: closing does not raise it again


def test_a_failing_reader_reaches_the_consumer_of_shuffle_batch(tmp_path):
    (tmp_path / "junk.tfrecord").write_bytes(b"\x07" * 40)
    filenames = string_input_producer([str(tmp_path / "junk.tfrecord")], num_epochs=1)
    batches = shuffle_batch(reading_producer(filenames), 2, capacity=10, min_after_dequeue=1)
    with pytest.raises(qp.DataLossError, match=r"junk\.tfrecord") as excinfo:
        list(batches)
    assert excinfo.value.path is not None


# -- starting and stopping -----------------------------------------------------------------


def test_batches_start_the_runners_they_need_and_own_them():
    batches = batch(rows(6, num_epochs=None), 2)
    assert batches.coord is None
    assert batches.dequeue()[0].tolist() == [0, 1]
    assert batches.coord is not None and not batches.coord.should_stop()
    batches.close()
    assert batches.coord.should_stop()


def test_breaking_out_of_an_endless_loop_then_closing_stops_every_thread():
    batches = shuffle_batch(rows(10, num_epochs=None), 4, capacity=12, min_after_dequeue=4,
                            num_threads=4)
    for i, _ in enumerate(batches):
        if i == 3:
            break
    batches.close()
    batches.close()  # idempotent


def test_batches_as_a_context_manager_stop_on_an_exception():
    with pytest.raises(KeyError):
        with batch(rows(10, num_epochs=None), 3, num_threads=2) as batches:
            next(batches)
            raise KeyError("stop")
    assert batches.coord.should_stop()


def test_inside_running_batches_only_dequeue(pipeline):
    batches = batch(rows(9, num_epochs=2), 4, allow_smaller_final_batch=True)
    with running(pipeline) as coord:
        got = [ids.tolist() for ids, _ in batches]
        assert batches.coord is None
    assert coord.should_stop()
    assert sum(got, []) == list(range(9)) * 2


def test_running_stops_everything_when_the_body_raises():
    batches = shuffle_batch(rows(10, num_epochs=None), 2, capacity=6, min_after_dequeue=2,
                            num_threads=3)
    with pytest.raises(ZeroDivisionError):
        with running() as coord:
            next(batches)
            1 / 0
    assert coord.should_stop()


def test_running_stops_on_keyboard_interrupt():
    batches = batch(rows(10, num_epochs=None), 2, capacity=4)
    with pytest.raises(KeyboardInterrupt):
        with running():
            next(batches)
            raise KeyboardInterrupt
    assert batches.queue.is_closed()


def test_running_reraises_a_runner_exception_on_a_normal_exit():
    def produce():
        raise Boom("producer failed")

    batches = batch(produce, 2)  # kept: a dropped Batches' runner does not run
    with pytest.raises(Boom, match=r"^producer failed$"):
        with running() as coord:
            assert coord.wait_for_stop(timeout=10)
    assert batches.queue.is_closed()


def test_running_never_hides_the_body_exception_behind_a_runner_exception():
    def produce():
        raise Boom("producer failed")

    batches = batch(produce, 2)
    with pytest.raises(Boom) as excinfo:
        with running():
            next(batches)
    assert type(excinfo.value.__cause__) is Boom  # the consumer's chained copy, not join's


def test_a_dequeue_timeout_before_the_first_element_loses_nothing():
    release = threading.Event()

    def produce():
        assert release.wait(10)
        return (1,)

    batches = batch(produce, 2, name="slow")
    with pytest.raises(DeadlineExceededError, match=r"^Queue 'slow/fifo_queue': dequeue_many "
                                                    r"timed out after 0\.05 s"):
        batches.dequeue(timeout=0.05)
    release.set()
    assert batches.dequeue(timeout=10)[0].tolist() == [1, 1]
    batches.close()


def test_a_blocked_consumer_waits_until_a_batch_is_complete():
    gate = threading.Semaphore(0)
    finished = threading.Event()

    def produce():
        assert gate.acquire(timeout=10)
        if finished.is_set():
            raise OutOfRangeError("done")
        return 5

    batches = batch(produce, 3)
    result = []
    consumer = threading.Thread(target=lambda: result.append(batches.dequeue()))
    consumer.start()
    gate.release()
    gate.release()
    consumer.join(0.1)
    assert consumer.is_alive() and not result  # two of three elements: still waiting
    gate.release()
    consumer.join(10)
    assert result[0].tolist() == [5, 5, 5]
    finished.set()
    gate.release()  # the runner thread's next call ends the input
    batches.close()



def test_elements_produced_before_the_producer_blocks_reach_a_consumer_that_waits_later():
    # A runner thread produces elements in groups; a group cut short by a producer that
    # blocks must not hold its elements back from a consumer that starts waiting afterwards.
    blocked = threading.Event()
    release = threading.Event()
    numbers = iter(range(3))

    def produce():
        try:
            return next(numbers)
        except StopIteration:
            blocked.set()
            assert release.wait(10)
            raise OutOfRangeError("done") from None

    batches = batch(produce, 3, capacity=100)
    batches._ensure_started()
    assert blocked.wait(10)
    assert sorted(batches.dequeue(timeout=10).tolist()) == [0, 1, 2]
    release.set()
    with pytest.raises(OutOfRangeError, match=r"^Queue '.*' is closed and has insufficient"):
        batches.dequeue(timeout=10)
    batches.close()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 37])
def test_a_waiting_dequeue_takes_its_last_element_as_soon_as_it_is_staged(n):
    # The runner thread looks at a waiting dequeue only every few elements it stages (the
    # ones still missing): never later than the element that completes the batch, even
    # when the producer then blocks.
    release = threading.Event()
    made = []

    def produce():
        if 0 < len(made) < n:  # the consumer waits from the second element on
            wait_until(lambda: batches.queue._queue._needs, "the dequeue waits")
        if len(made) == n:
            assert release.wait(10)
            raise OutOfRangeError("done")
        made.append(len(made))
        return made[-1]

    batches = batch(produce, n, capacity=100)
    got = []
    # (not the main thread: it waits in slices, and takes what is staged after each)
    consumer = threading.Thread(target=lambda: got.append(batches.dequeue(timeout=5)),
                                name="consumer")
    try:
        consumer.start()
        consumer.join()
        assert got and sorted(got[0].tolist()) == list(range(n))
    finally:
        release.set()
        batches.close()


def test_every_element_of_a_group_cut_short_by_a_failure_arrives_before_it():
    numbers = iter(range(100))

    def produce():
        i = next(numbers)
        if i == 40:
            raise Boom("bad record 40")
        return i

    batches = batch(produce, 8, capacity=64, allow_smaller_final_batch=True)
    got = [next(batches).tolist() for _ in range(5)]
    assert Counter(sum(got, [])) == Counter(range(40))
    with pytest.raises(Boom, match=r"^bad record 40$"):
        next(batches)
    batches.close()



def test_a_group_ends_as_soon_as_its_queue_closes():
    # A stop closes the queue: the runner thread's group must not go on calling a (perhaps
    # slow) producer for the rest of its elements, which would then be dropped.
    calls = []

    def produce():
        calls.append(len(calls))
        if len(calls) == 3:
            batches.queue.close(cancel_pending_enqueues=True)  # what a coordinator's stop does
        return len(calls)

    batches = batch(produce, 2, capacity=1000, allow_smaller_final_batch=True)
    got = []
    with pytest.raises(OutOfRangeError):
        while True:
            got += batches.dequeue(timeout=10).tolist()
    batches.close()
    assert len(calls) == 3
    assert got in ([1], [1, 2])  # 2 only if a waiting dequeue took it before the close

# -- argument checks -----------------------------------------------------------------------


@pytest.mark.parametrize("call, error, message", [
    (lambda: batch(rows(4), 0), InvalidArgumentError,
     r"^batch_size must be a positive integer, got 0$"),
    (lambda: batch(rows(4), 2, num_threads=0), InvalidArgumentError,
     r"^num_threads must be a positive integer, got 0$"),
    (lambda: batch(rows(4), 2, capacity=-1), InvalidArgumentError,
     r"^capacity must be a positive integer, got -1$"),
    (lambda: shuffle_batch(rows(4), 2, capacity=10, min_after_dequeue=10),
     InvalidArgumentError, r"^capacity \(10\) must exceed min_after_dequeue \(10\)"),
    (lambda: shuffle_batch(rows(4), 2, capacity=10, min_after_dequeue=-1),
     InvalidArgumentError, r"^min_after_dequeue must be a non-negative integer, got -1$"),
    (lambda: batch([1, 2], 2), TypeError, r"^batch\(\): tensors must be a producer"),
    (lambda: batch_join([], 2), ValueError, r"^Expected at least one input in batch_join\(\)\.$"),
    (lambda: shuffle_batch_join(rows(4), 2, 10, 2), TypeError,
     r"^shuffle_batch_join\(\) takes a list of producers"),
    (lambda: batch_join([rows(4), 3], 2), TypeError,
     r"^batch_join\(\): tensors_list\[1\] must be a producer"),
    (lambda: batch(rows(4), 2, shapes=5), InvalidArgumentError, r"^shapes must be a list"),
    (lambda: read_batch_features("x", 2, FEATURES, queue_capacity=0), InvalidArgumentError,
     r"^queue_capacity must be a positive integer, got 0$"),
])
def test_arguments_are_checked_with_messages_quoting_the_value(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_batches_is_the_public_result_type():
    assert qp.train.shuffle_batch is shuffle_batch and qp.Batches is Batches
    assert isinstance(batch(rows(2), 1), Batches)


def test_a_single_component_may_itself_be_a_list():
    batches = batch(limit_epochs(([1, 2, 3],), 2), 2)
    (vectors,) = first(batches)
    assert vectors.tolist() == [[1, 2, 3], [1, 2, 3]]
    assert batches.queue.shapes == [(3,)]


def test_ctrl_c_while_batches_starts_its_threads_stops_those_already_running(monkeypatch):
    start = threading.Thread.start

    def start_or_interrupt(thread):
        if thread.name == "queuepipe/ctrl_c/fifo_queue/close-on-stop":
            raise KeyboardInterrupt  # after both runner threads started, before this one
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_or_interrupt)
    batches = batch(lambda: 1, 2, num_threads=2, capacity=2, name="ctrl_c")
    with pytest.raises(KeyboardInterrupt):
        batches.dequeue()
    assert batches.queue.is_closed() and batches.coord.should_stop()
    # the runner threads, blocked on the full queue, were woken: the fixture sees none alive


# -- ownership: several Batches on one pipeline, failures, abandoned and forked ones ---------


def ids_in(files):
    """The ids of the records in ``files``."""
    return [int(parse_single_example(r, FEATURES)["id"])
            for f in files for r in qp.io.tf_record_iterator(f)]


def train_and_eval(shards):
    """A shuffled train stream (2 epochs of 3 shards) and an in-order eval stream (2 shards),
    built one after the other on the default pipeline, as the tutorials build them."""
    train_files = string_input_producer(shards[:3], num_epochs=2, seed=1)
    train = shuffle_batch(reading_producer(train_files), 7, capacity=30, min_after_dequeue=10,
                          num_threads=2, seed=2, allow_smaller_final_batch=True)
    eval_files = string_input_producer(shards[3:], num_epochs=1, shuffle=False)
    evaluation = batch(reading_producer(eval_files), 5, num_threads=2, capacity=6,
                       allow_smaller_final_batch=True)  # far less than its 24 records
    return train, evaluation


def test_two_batches_on_one_pipeline_each_deliver_their_whole_input(shards):
    train, evaluation = train_and_eval(shards)
    train_ids, _ = ids_of(train)  # the first to end stops only its own runners
    eval_ids, _ = ids_of(evaluation)
    assert Counter(train_ids) == Counter(ids_in(shards[:3]) * 2)
    assert Counter(eval_ids) == Counter(ids_in(shards[3:]))


def test_two_batches_on_one_pipeline_consumed_in_turn_lose_nothing(shards):
    train, evaluation = train_and_eval(shards)
    got = {id(train): [], id(evaluation): []}
    live = [evaluation, train]  # eval starts every runner, and ends first
    while live:
        for batches in list(live):
            try:
                got[id(batches)].extend(int(i) for i in next(batches)[0])
            except StopIteration:
                live.remove(batches)
    assert Counter(got[id(train)]) == Counter(ids_in(shards[:3]) * 2)
    assert Counter(got[id(evaluation)]) == Counter(ids_in(shards[3:]))


def test_a_failed_pipeline_does_not_poison_the_next_one_on_the_same_pipeline(tmp_path, shards):
    (tmp_path / "junk.tfrecord").write_bytes(b"\x07" * 40)
    bad = batch(reading_producer(string_input_producer([str(tmp_path / "junk.tfrecord")])), 2)
    with pytest.raises(qp.DataLossError, match=r"junk\.tfrecord"):
        next(bad)
    bad.close()
    good = batch(reading_producer(string_input_producer(shards, num_epochs=1)), 8,
                 allow_smaller_final_batch=True)
    assert Counter(ids_of(good)[0]) == Counter(range(60))
    with running():  # nor does starting the pipeline by hand restart the failed runners
        pass


class Fatal(BaseException):
    """Not an Exception: a producer raising it must still stop the pipeline."""


@pytest.mark.parametrize("error", [SystemExit(3), GeneratorExit(), Fatal("fatal")])
@pytest.mark.parametrize("threads", [1, 3])
def test_a_producer_raising_a_base_exception_reaches_the_consumer(error, threads):
    numbers = iter(range(1000))
    lock = threading.Lock()

    def produce():
        with lock:
            i = next(numbers)
        if i == 5:
            raise error
        return (i,)

    batches = batch(produce, 2, num_threads=threads, capacity=4)
    with pytest.raises(type(error)):
        for _ in batches:
            pass
    assert batches.coord.should_stop()


def test_closing_before_the_first_element_arrives_drops_it_quietly():
    gate = threading.Event()

    def produce():
        gate.wait(10)
        return {"x": 1}

    batches = batch(produce, 2)
    with pytest.raises(qp.DeadlineExceededError):
        batches.dequeue(timeout=0.01)  # the runner started; its producer waits on the gate
    opener = threading.Thread(target=lambda: (wait_until(batches.queue.is_closed), gate.set()))
    opener.start()
    batches.close()  # the element comes after the close: it is dropped, nothing raises
    opener.join()
    with pytest.raises(OutOfRangeError):
        batches.dequeue()
    with pytest.raises(qp.CancelledError, match="is closed"):
        batches.queue.enqueue({"x": 2})


def test_abandoned_batches_stop_their_threads_and_say_so():
    def consume_a_little():
        batches = shuffle_batch(rows(10, num_epochs=None), 2, capacity=8, min_after_dequeue=2,
                                num_threads=2)
        for i, _ in enumerate(batches):
            if i == 2:
                break  # neither close() nor `with`

    before = threading.active_count()
    with pytest.warns(ResourceWarning, match=r"shuffle_batch.*were not closed"):
        for _ in range(3):
            consume_a_little()
            gc.collect()
    assert threading.active_count() == before


_ABANDONED_AT_EXIT = """
import atexit
import threading

# Registered first, so it runs last: after the finalizers' own exit hook.
atexit.register(lambda: print("threads left:", sorted(t.name for t in threading.enumerate()
                                                     if t.name.startswith("queuepipe/"))))
import queuepipe as qp

batches = qp.train.batch(qp.train.slice_input_producer([list(range(10))]), 2, num_threads=2)
next(batches)  # the runners run; the script ends without close()
"""


def test_batches_alive_at_exit_stop_their_threads_and_say_so(tmp_path):
    script = tmp_path / "abandon.py"
    script.write_text(_ABANDONED_AT_EXIT)
    done = subprocess.run([sys.executable, "-W", "always::ResourceWarning", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "were not closed" in done.stderr
    assert "threads left: []" in done.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_batches_used_in_a_forked_child_raise_instead_of_hanging():
    batches = batch(rows(10, num_epochs=None), 2)
    next(batches)
    pid = os.fork()
    if pid == 0:  # the child: its copy of the pipeline has no threads
        try:
            batches.dequeue(timeout=5)
        except RuntimeError as e:
            os._exit(0 if "a fork" in str(e) else 2)
        except BaseException:  # noqa: BLE001 - the child must never return into pytest
            os._exit(3)
        os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    batches.close()


# -- SparseValue components, as TF batches SparseTensors (input_test.py's BatchTest) --------


def counting(limit, sparse_of):
    """A thread-safe producer of ``[c, sparse_of(c), b"string"]`` for c in 0..limit-1."""
    return from_items([[np.int64(c), sparse_of(c), b"string"] for c in range(limit)])


def two_values(c):
    """TF's sparse_counter of two values: [c, -c] at indices [0] and [1], dense_shape [2]."""
    return qp.SparseValue([[0], [1]], np.array([c, -c], np.float32), [2])


def one_value(c):
    return qp.SparseValue([[0]], np.array([c], np.float32), [1])


@pytest.mark.parametrize("use_dict", [False, True])
def test_sparse_components_batch_as_tf_does(use_dict):
    produce = counting(30, two_values)
    if use_dict:
        def as_dict():
            c, s, string = produce()
            return {"c": c, "s": s, "S": string}
        batches = batch(as_dict, 10)
    else:
        batches = batch(produce, 10)
    for i in range(3):
        got = next(batches)
        counts, sparse, strings = (got["c"], got["s"], got["S"]) if use_dict else got
        assert counts.tolist() == list(range(10 * i, 10 * i + 10))
        assert sparse.indices.tolist() == np.vstack(
            (np.arange(20) // 2, [0, 1] * 10)).T.tolist()
        expected = np.arange(20 * i, 20 * i + 20) // 2 * ([1, -1] * 10)
        assert sparse.values.tolist() == expected.tolist() and sparse.values.dtype == np.float32
        assert sparse.dense_shape.tolist() == [10, 2]
        assert strings.tolist() == [b"string"] * 10
    with pytest.raises(StopIteration):
        next(batches)


def test_a_lone_sparse_component_is_one_batched_sparse_value():
    produce = counting(4, one_value)
    batches = batch(lambda: produce()[1], 2)
    first, second = list(batches)
    assert isinstance(first, qp.SparseValue)
    assert first.indices.tolist() == [[0, 0], [1, 0]] and second.values.tolist() == [2, 3]


def test_enqueue_many_splits_a_batched_sparse_value_along_its_first_index_column():
    pre = batch(counting(30, one_value), 2)
    batches = batch(lambda: tuple(pre.dequeue()), 10, enqueue_many=True)
    for i in range(3):
        counts, sparse, strings = next(batches)
        assert counts.tolist() == list(range(10 * i, 10 * i + 10))
        assert sparse.indices.tolist() == [[j, 0] for j in range(10)]
        assert sparse.values.tolist() == counts.tolist()
        assert sparse.dense_shape.tolist() == [10, 1]
        assert strings.tolist() == [b"string"] * 10
    with pytest.raises(StopIteration):
        next(batches)


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("shuffle", [False, True])
def test_sparse_values_stay_with_their_element_through_many_threads(threads, shuffle):
    produce = counting(35, one_value)
    if shuffle:
        batches = shuffle_batch(produce, 10, capacity=20, min_after_dequeue=5,
                                num_threads=threads, seed=1, allow_smaller_final_batch=True)
    else:
        batches = batch(produce, 10, num_threads=threads, allow_smaller_final_batch=True)
    seen = []
    for counts, sparse, _ in batches:
        assert sparse.values.tolist() == counts.tolist()  # each value beside its counter
        assert sparse.indices.tolist() == [[j, 0] for j in range(len(counts))]
        assert sparse.dense_shape.tolist() == [len(counts), 1]
        seen.extend(counts.tolist())
    assert Counter(seen) == Counter(range(35))
    assert len(seen) == 35


def test_the_smaller_final_batch_has_its_own_dense_shape():
    sizes = [(len(c), s.dense_shape.tolist()) for c, s, _ in
             batch(counting(35, two_values), 10, allow_smaller_final_batch=True)]
    assert sizes == [(10, [10, 2])] * 3 + [(5, [5, 2])]


@pytest.mark.parametrize("shuffle", [False, True])
def test_joins_batch_sparse_values_from_every_producer(shuffle):
    producers = [counting(10, one_value), counting(10, two_values)]
    mixed = [lambda p=p: (lambda c, s, _: (c, qp.SparseValue(s.indices, s.values,
                                                               [2])))(*p())
             for p in producers]
    if shuffle:
        batches = shuffle_batch_join(mixed, 4, capacity=10, min_after_dequeue=2, seed=3,
                                     allow_smaller_final_batch=True)
    else:
        batches = batch_join(mixed, 4, allow_smaller_final_batch=True)
    values = []
    for counts, sparse in batches:
        assert sparse.dense_shape.tolist() == [len(counts), 2]
        assert sorted(set(sparse.indices[:, 0].tolist())) == list(range(len(counts)))
        values.extend(sparse.values.tolist())
    assert Counter(values) == Counter(list(range(10)) + [v for c in range(10) for v in (c, -c)])


def test_maybe_batch_with_a_mask_keeps_the_sparse_rows_it_keeps():
    pre = batch(counting(12, one_value), 4)
    batches = maybe_batch(lambda: tuple(pre.dequeue()),
                          keep_input=lambda element: element[0] % 2 == 0, batch_size=3,
                          enqueue_many=True)
    counts, sparse, _ = next(batches)
    assert counts.tolist() == [0, 2, 4] and sparse.values.tolist() == [0, 2, 4]
    assert sparse.indices.tolist() == [[0, 0], [1, 0], [2, 0]]
    batches.close()
    pre.close()


def test_dynamic_pad_pads_dense_components_beside_sparse_ones():
    produce = counting(6, one_value)

    def element():
        c, s, _ = produce()
        return np.arange(int(c)), s

    dense, sparse = next(batch(element, 3, dynamic_pad=True))
    assert dense.tolist() == [[0, 0], [0, 0], [0, 1]]
    assert sparse.values.tolist() == [0, 1, 2] and sparse.dense_shape.tolist() == [3, 1]


def test_a_value_of_the_wrong_kind_names_the_component():
    values = iter([(1, one_value(1)), (2, np.array([2.0]))])
    batches = batch(lambda: next(values), 2)
    with pytest.raises(InvalidArgumentError, match=r"component 1 holds SparseValues: got an "
                                                   r"array of dtype float64 and shape \[1\]"):
        next(batches)


def test_read_batch_features_batches_a_var_len_feature(tmp_path):
    rows = [list(range(i % 5)) for i in range(40)]
    records = [make_example({"tokens": row, "label": i}).SerializeToString()
               for i, row in enumerate(rows)]
    paths = write_shards(records, tmp_path, 3, processes=1, progress=False, index=False)
    spec = {"tokens": VarLenFeature(qp.int64), "label": FixedLenFeature([], qp.int64)}
    got = {}
    for features in read_batch_features(paths, 6, spec, num_epochs=1, read_batch_size=4,
                                        queue_capacity=16, seed=0):
        tokens = features["tokens"]
        # as the batch's own parse_example gives it: the batch's longest list
        assert tokens.dense_shape.tolist() == [len(features["label"]), max(
            len(rows[label]) for label in features["label"].tolist())]
        for label, row in zip(features["label"].tolist(),
                              qp.sparse.split(tokens, "batch")):
            got[label] = row.values.tolist()
    assert got == dict(enumerate(rows))


def test_a_structure_the_queue_cannot_hold_is_reported_once_naming_the_component(caplog):
    batches = batch(lambda: (1, [[1, 2], [3]]), 2, num_threads=4)
    with pytest.raises(InvalidArgumentError, match=r"component 1: a ragged value has no shape"):
        next(batches)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


@pytest.mark.parametrize("smaller", [True, False])
def test_len_of_read_batch_features_from_indexed_shards(tmp_path, smaller):
    rows = {"label": np.arange(50)}
    paths = qp.write_shards(rows, tmp_path, 3, progress=False)  # with .index files
    features = {"label": qp.io.FixedLenFeature([], qp.int64)}
    with qp.train.read_batch_features(paths, 7, features, num_epochs=2, seed=1,
                                      allow_smaller_final_batch=smaller) as batches:
        expected = 15 if smaller else 14  # 100 records in batches of 7
        assert len(batches) == expected and bool(batches)
        assert sum(1 for _ in batches) == expected
    os.remove(paths[1] + ".index")
    with qp.train.read_batch_features(paths, 7, features, num_epochs=2) as batches:
        with pytest.raises(TypeError, match=r"^the number of these batches is not known"):
            len(batches)
        assert bool(batches) and len(list(batches)) == 15


@pytest.mark.parametrize("container", [list, tuple])
def test_a_lone_sparse_component_in_a_list_or_tuple_comes_back_in_one(container):
    # TF: batch([sparse]) gives a list of one SparseTensor, not the SparseTensor's parts.
    value = qp.SparseValue(np.array([[0], [1]]), np.array([5, 6]), np.array([2]))
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        batches = qp.train.batch(lambda: container([value]), 2, capacity=4)
    with batches:
        batch = batches.dequeue()
    assert type(batch) is container and len(batch) == 1
    assert isinstance(batch[0], qp.SparseValue) and batch[0].dense_shape.tolist() == [2, 2]


# -- issue 29 -------------------------------------------------------------------------------


def reused_buffer_producer(n, shape=(3,), structure=tuple):
    """A producer that fills and returns one reused NumPy buffer (a common speed idiom), then
    ends after ``n`` elements."""
    buffer = np.zeros(shape, np.int64)
    numbers = from_items(range(n))

    def produce():  # (one thread)
        buffer[...] = numbers()
        return structure((buffer,)) if structure is not dict else {"x": buffer}
    return produce


@pytest.mark.parametrize("structure", [tuple, dict])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_producer_reusing_its_buffer_gets_every_value_batched(shuffle, structure):
    produce = reused_buffer_producer(40, structure=structure)
    if shuffle:
        batches = shuffle_batch(produce, 10, capacity=40, min_after_dequeue=5, seed=1)
    else:
        batches = batch(produce, 10, capacity=40)
    got = []
    for b in batches:
        xs = b[0] if structure is tuple else b["x"]
        assert (xs == xs[:, :1]).all()  # each row is one element's value
        got.extend(xs[:, 0].tolist())
    assert Counter(got) == Counter(range(40))
    if not shuffle:
        assert got == list(range(40))


def test_a_producer_reusing_its_sparse_buffers_gets_every_value_batched():
    value = qp.SparseValue(np.zeros((2, 1), np.int64), np.zeros(2, np.int64),
                           np.array([2], np.int64))
    numbers = from_items(range(12))

    def produce():
        value.values[:] = numbers()
        return (value,)

    got = [b[0].values.tolist() for b in batch(produce, 4, capacity=12)]
    assert got == [[i for i in range(k, k + 4) for _ in range(2)] for k in (0, 4, 8)]


def raising_once(error, produce, at=5):
    """``produce``, raising ``error`` on its ``at``-th call instead (thread-safe)."""
    calls = iter(range(10**9))
    lock = threading.Lock()

    def call(*args):
        with lock:
            i = next(calls)
        if i == at:
            raise error
        return produce(*args)
    return call


@pytest.mark.parametrize("threads, seed, many", [(1, None, False), (3, None, False),
                                                 (3, 7, False), (2, None, True)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_producer_raising_stop_iteration_is_an_error_not_the_end(shuffle, threads, seed,
                                                                   many):
    produce = raising_once(StopIteration(), lambda: ([0, 1],) if many else (0,))
    if shuffle:
        batches = shuffle_batch(produce, 2, capacity=8, min_after_dequeue=2,
                                num_threads=threads, seed=seed, enqueue_many=many)
    else:
        batches = batch(produce, 2, num_threads=threads, capacity=8, enqueue_many=many)
    with pytest.raises(RuntimeError, match=r"^the producer of queue '.*' raised "
                                           r"StopIteration.*OutOfRangeError") as caught:
        for _ in batches:  # endless otherwise: only the error ends it
            pass
    assert isinstance(caught.value.__cause__.__cause__, StopIteration)


@pytest.mark.parametrize("error", [StopIteration(), OutOfRangeError("user's"),
                                   qp.CancelledError("user's")])
@pytest.mark.parametrize("enqueue_many", [False, True])
def test_keep_input_raising_what_looks_like_an_end_is_an_error(error, enqueue_many):
    keep = raising_once(error, lambda element: np.ones(2, bool) if enqueue_many else True)
    produce = (lambda: (np.arange(2),)) if enqueue_many else (lambda: (0,))
    batches = maybe_batch(produce, keep, 2, capacity=8, enqueue_many=enqueue_many)
    with pytest.raises(RuntimeError, match=rf"^keep_input of queue '.*' raised "
                                           rf"{type(error).__name__}"):
        for _ in batches:
            pass


@pytest.mark.parametrize("error", [StopIteration(), OutOfRangeError("user's"),
                                   qp.CancelledError("user's")])
@pytest.mark.parametrize("seed", [None, 0])
def test_a_parse_fn_raising_what_looks_like_an_end_is_an_error_not_a_hang(shards, seed,
                                                                          error):
    parse = raising_once(error, lambda serialized: parse_example(serialized, FEATURES), at=2)
    pattern = os.path.join(os.path.dirname(shards[0]), "*.tfrecord")
    batches = read_batch_features(pattern, 4, FEATURES, num_epochs=3, parse_fn=parse,
                                  seed=seed, read_batch_size=4, num_enqueue_threads=2)
    with pytest.raises(RuntimeError, match=rf"^parse_fn of queue '.*' raised "
                                           rf"{type(error).__name__}"):
        for _ in batches:
            pass


@pytest.mark.parametrize("started_by", ["batches", "running"])
def test_batches_dropped_before_their_first_batch_do_not_drain_the_shared_producer(started_by):
    records = rows(3000)  # a producer cell, run once
    for _ in range(2):  # the batching cell, run twice: the first Batches is dropped unused
        batches = batch(records, 10, capacity=50, allow_smaller_final_batch=True)
        gc.collect()
    if started_by == "running":
        with running():
            got = [int(i) for ids, _ in batches for i in ids]
    else:
        got = [int(i) for ids, _ in batches for i in ids]
    assert Counter(got) == Counter(range(3000))


def test_batches_dropped_while_the_callers_coordinator_runs_them_stop_draining():
    records = rows(3000)
    dropped = batch(records, 10, capacity=50)
    with running():  # the caller's coordinator runs the runners of both
        wait_until(lambda: dropped.queue.size() == 50, "the dropped batches' queue filled")
        runner = dropped._runner
        del dropped
        gc.collect()
        wait_until(lambda: not runner.running, "the dropped batches' runner stopped")
        kept = batch(records, 10, capacity=50, allow_smaller_final_batch=True)
        got = [int(i) for ids, _ in kept for i in ids]
    # what the dropped runner took is lost (at most its queue and one group), nothing more
    assert len(got) == len(set(got)) and len(got) >= 3000 - 50 - 128


def test_running_logs_nothing_of_the_failure_its_body_raises(caplog):
    def produce():
        raise Boom("producer failed")

    batches = batch(produce, 2)
    with pytest.raises(Boom):
        with running():
            next(batches)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_running_logs_another_failure_met_while_stopping_after_the_body_raised(caplog):
    def produce():
        raise Boom("producer failed")

    batches = batch(produce, 2)
    with pytest.raises(KeyError):
        with running() as coord:
            assert coord.wait_for_stop(timeout=10)
            raise KeyError("the body's own error")
    assert batches.queue.is_closed()
    (record,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert record.exc_info[0] is Boom


@pytest.mark.parametrize("seed", [None, 0])
def test_state_dict_of_read_batch_features_closed_before_its_first_element(shards, seed):
    pattern = os.path.join(os.path.dirname(shards[0]), "*.tfrecord")
    batches = read_batch_features(pattern, 4, FEATURES, num_epochs=1, seed=seed)
    batches.close()
    state = batches.state_dict()
    resumed = read_batch_features(pattern, 4, FEATURES, num_epochs=1, seed=seed, state=state)
    assert Counter(int(i) for b in resumed for i in b["id"]) == Counter(range(60))


Row = collections.namedtuple("Row", ["id", "name"])


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_producer_returning_a_namedtuple_gives_namedtuple_batches(shuffle):
    produce = from_items([Row(i, b"r%d" % i) for i in range(20)])
    batches = shuffle_batch(produce, 5, capacity=20, min_after_dequeue=2) if shuffle \
        else batch(produce, 5)
    got = list(batches)
    assert all(type(b) is Row for b in got)
    assert Counter(int(i) for b in got for i in b.id) == Counter(range(20))
    assert all(n == b"r%d" % i for b in got for i, n in zip(b.id, b.name))


def test_a_parse_fn_returning_a_namedtuple_gives_namedtuple_batches(shards):
    def parse(serialized):
        parsed = parse_example(serialized, FEATURES)
        return Row(parsed["id"], parsed["name"])

    pattern = os.path.join(os.path.dirname(shards[0]), "*.tfrecord")
    got = list(read_batch_features(pattern, 8, FEATURES, num_epochs=1, parse_fn=parse,
                                   seed=0))
    assert all(type(b) is Row for b in got)
    assert Counter(int(i) for b in got for i in b.id) == Counter(range(60))
    assert all(n == b"r%d" % i for b in got for i, n in zip(b.id, b.name))


@pytest.mark.parametrize("num_epochs", [0, -1, 1.5, "2", True])
def test_read_batch_features_refuses_a_bad_num_epochs_at_build_time(shards, num_epochs):
    pattern = os.path.join(os.path.dirname(shards[0]), "*.tfrecord")
    with pytest.raises(ValueError, match=rf"^num_epochs must be None or a positive integer, "
                                         rf"got {re.escape(repr(num_epochs))}$"):  # as producers
        read_batch_features(pattern, 4, FEATURES, num_epochs=num_epochs)


@pytest.mark.parametrize("dense_shape, indices", [([4], [[0], [2]]), ([], np.zeros((2, 0)))])
def test_enqueue_many_of_a_sparse_value_of_rank_below_two_names_the_component(dense_shape,
                                                                              indices):
    value = qp.SparseValue(np.array(indices, np.int64), np.array([1, 2], np.int64),
                           np.array(dense_shape, np.int64))
    batches = batch(lambda: {"ids": value}, 2, enqueue_many=True)
    with pytest.raises(InvalidArgumentError,
                       match=rf"^Queue '.*' component 'ids': enqueue_many needs a batched "
                             rf"sparse value, of rank 2 or more \(a leading batch dimension\), "
                             rf"got dense_shape {re.escape(str(dense_shape))} \(TF: Rank of "
                             rf"input SparseTensor should be > 1, but saw rank: "
                             rf"{len(dense_shape)}\)$"):
        next(batches)


def test_read_batch_features_draws_two_chunks_worth_of_batches_ahead_per_thread():
    # an enqueue draws and parses all the batches its chunk brought in one call (two threads
    # gain over one only then): two chunks' worth per enqueue thread wait at most (shared by
    # two threads, the limit left a thread's batches to the consumer), at least two batches
    from queuepipe.features import _drawn_ahead

    assert _drawn_ahead(512, 128, 1) == 8 and _drawn_ahead(2048, 128, 1) == 32
    assert _drawn_ahead(500, 128, 1) == 8  # (a part batch counts)
    assert _drawn_ahead(512, 1000, 1) == 2 and _drawn_ahead(1, 1, 1) == 2
    assert _drawn_ahead(512, 128, 2) == 16 and _drawn_ahead(512, 128, 4) == 32
    assert _drawn_ahead(512, 1000, 2) == 4


def test_read_batch_features_gives_its_queue_each_threads_batches_drawn_ahead(tmp_path):
    path = str(tmp_path / "data.tfrecord")
    with qp.io.TFRecordWriter(path) as writer:
        for i in range(20):
            writer.write(make_example({"id": i}).SerializeToString())
    batches = read_batch_features(path, 4, {"id": FixedLenFeature([], qp.int64)},
                                  num_epochs=1, num_enqueue_threads=3, read_batch_size=8,
                                  seed=0)
    got = sorted(sum((batch["id"].tolist() for batch in batches), []))
    assert batches.queue.built._ahead_limit == 3 * 2 * 2  # threads x chunks x batches
    assert got == list(range(20))


def test_read_batch_features_leaves_the_consumer_a_core_when_the_core_parses(monkeypatch):
    from queuepipe import features

    monkeypatch.setattr(features.os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    monkeypatch.setattr(features, "core_available", lambda: True)
    assert features._default_enqueue_threads() == 2
    monkeypatch.setattr(features.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert features._default_enqueue_threads() == 1
    monkeypatch.setattr(features.os, "sched_getaffinity", lambda pid: {7}, raising=False)
    assert features._default_enqueue_threads() == 1
    monkeypatch.setattr(features, "core_available", lambda: False)  # the GIL: one thread
    assert features._default_enqueue_threads() == 1


def test_state_dict_of_read_batch_features_interrupted_before_its_first_element(shards):
    pattern = os.path.join(os.path.dirname(shards[0]), "*.tfrecord")
    box = {}

    def parse(serialized):  # Ctrl-C reaches the consumer; this chunk comes after the stop
        _thread.interrupt_main()
        wait_until(lambda: box["batches"].queue.is_closed(), "the batches stopped")
        return parse_example(serialized, FEATURES)

    box["batches"] = batches = read_batch_features(pattern, 4, FEATURES, num_epochs=1,
                                                   parse_fn=parse, num_enqueue_threads=1)
    with pytest.raises(KeyboardInterrupt):
        batches.dequeue()
    state = batches.state_dict()
    resumed = read_batch_features(pattern, 4, FEATURES, num_epochs=1, state=state)
    assert Counter(int(i) for b in resumed for i in b["id"]) == Counter(range(60))


# -- Batches.monitor: a QueueMonitor owned by the batches ----------------------------------------


def _monitor_threads():
    return [t for t in threading.enumerate() if t.name == "queuepipe/monitor"]


def _tensorboard_steps(logdir):
    """step -> tags of each summary event in ``logdir``, read with tensorboard's reader."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    (name,) = os.listdir(logdir)
    return {event.step: sorted(v.tag for v in event.summary.value)
            for event in LegacyEventFileLoader(os.path.join(logdir, name)).Load()
            if event.HasField("summary")}


def test_a_monitor_of_batches_writes_tensorboard_and_stops_when_the_input_ends(tmp_path):
    batches = batch(rows(10), 4, capacity=8)
    monitor = batches.monitor(logdir=str(tmp_path), interval=60)
    assert monitor.running
    got = [b[0].tolist() for b in batches]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert not monitor.running and _monitor_threads() == []
    steps = _tensorboard_steps(str(tmp_path))
    assert sorted(steps) == [0, 1]  # the sample at the start, and the last one at the stop
    fill = f"{batches.queue.name}/fraction_of_8_full"
    assert fill in steps[0] and f"{batches.queue.name}/dequeued_per_sec" in steps[1]


def test_closing_batches_stops_their_monitor(tmp_path):
    batches = shuffle_batch(rows(10, num_epochs=None), 2, capacity=8, min_after_dequeue=2)
    monitor = batches.monitor(logdir=str(tmp_path), interval=60)
    next(batches)
    batches.close()
    assert not monitor.running and _monitor_threads() == []
    assert sorted(_tensorboard_steps(str(tmp_path))) == [0, 1]


def test_a_failed_dequeue_stops_the_monitor(monkeypatch):
    batches = batch(rows(10, num_epochs=None), 2, capacity=8)
    monitor = batches.monitor(interval=60)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(batches.queue, "dequeue_many", interrupted)
    with pytest.raises(KeyboardInterrupt):
        next(batches)
    assert not monitor.running and _monitor_threads() == []
    batches.close()


def test_garbage_collected_batches_stop_their_monitor():
    def watch_a_little():
        batches = batch(rows(10, num_epochs=None), 2, capacity=8)
        monitor = batches.monitor(interval=60)
        next(batches)
        return monitor  # the batches are dropped, neither closed nor exhausted

    with pytest.warns(ResourceWarning, match=r"were not closed"):
        monitor = watch_a_little()
        gc.collect()
    assert not monitor.running and _monitor_threads() == []


def test_batches_have_one_monitor_and_none_after_they_end():
    with batch(rows(4), 2, capacity=8) as batches:
        batches.monitor(interval=60)
        with pytest.raises(RuntimeError, match=r"^batches of queue '.*' already have a monitor"):
            batches.monitor(interval=60)
    with pytest.raises(RuntimeError, match=r"^batches of queue '.*' have ended"):
        batches.monitor(interval=60)
    assert _monitor_threads() == []


def test_read_batch_features_batches_have_a_monitor_too(shards, tmp_path):
    batches = read_batch_features(shards, 16, FEATURES, num_epochs=1, queue_capacity=64,
                                  seed=5)
    monitor = batches.monitor(logdir=str(tmp_path), interval=60)
    assert sum(len(parsed["id"]) for parsed in batches) == 60
    assert not monitor.running and _monitor_threads() == []
    steps = _tensorboard_steps(str(tmp_path))
    assert f"{batches.queue.name}/fraction_of_64_full" in steps[0]
