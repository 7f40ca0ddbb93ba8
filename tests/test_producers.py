"""Tests for queuepipe.producers: epochs, shuffling, seeds, file matching, slices, limits."""

import os
import re
import sys
from collections import Counter

import numpy as np
import pytest
from helpers import usage_block

import queuepipe as qp
from queuepipe.coordinator import Coordinator
from queuepipe.distributed import shard_files
from queuepipe.errors import InvalidArgumentError, OutOfRangeError
from queuepipe.producers import (
    input_producer,
    limit_epochs,
    match_filenames_once,
    range_input_producer,
    slice_input_producer,
    string_input_producer,
)
from queuepipe.runner import Pipeline, start_queue_runners


@pytest.fixture
def run():
    """Builds producers in a fresh pipeline, starts its runners, and stops them at teardown.

    Usage: ``queue = run(lambda: qp.range_input_producer(...))``.
    """
    coord = Coordinator()
    threads = []

    def build_and_start(build):
        with Pipeline().as_default() as pipeline:
            built = build()
        threads.extend(start_queue_runners(coord, pipeline=pipeline))
        return built

    yield build_and_start
    coord.request_stop()
    coord.join(threads)


def take(queue, n):
    return [queue.dequeue(timeout=10) for _ in range(n)]


def drain(queue):
    """Everything the queue delivers until it reports the end of the input."""
    got = []
    while True:
        try:
            got.append(queue.dequeue(timeout=10))
        except OutOfRangeError:
            return got


def epochs_of(got, size):
    return [list(got[i:i + size]) for i in range(0, len(got), size)]


def test_namespaces_export_producers():
    assert qp.train.string_input_producer is string_input_producer
    assert qp.train.match_filenames_once is match_filenames_once
    assert qp.limit_epochs is limit_epochs


def test_module_usage_block_runs(capsys):
    exec(compile(usage_block(sys.modules["queuepipe.producers"]), "<usage>", "exec"), {})
    assert capsys.readouterr().out == (
        "[b'a.tfrecord', b'a.tfrecord', b'b.tfrecord', b'b.tfrecord']\n")


def test_every_item_exactly_num_epochs_times(run):
    names = [f"file{i}" for i in range(7)]
    queue = run(lambda: string_input_producer(names, num_epochs=3, capacity=4))
    got = drain(queue)
    assert Counter(got) == Counter([n.encode() for n in names] * 3)


def test_out_of_range_after_the_last_epoch(run):
    queue = run(lambda: range_input_producer(3, num_epochs=2, shuffle=False, name="ints"))
    assert [int(x) for x in take(queue, 6)] == [0, 1, 2, 0, 1, 2]
    with pytest.raises(OutOfRangeError, match=r"^Queue 'ints(_\d+)?' is closed"):
        queue.dequeue(timeout=10)
    assert queue.is_closed()


def test_each_epoch_is_a_permutation_and_reshuffled(run):
    queue = run(lambda: range_input_producer(20, num_epochs=4, seed=3))
    epochs = epochs_of([int(x) for x in drain(queue)], 20)
    assert len(epochs) == 4
    for epoch in epochs:
        assert sorted(epoch) == list(range(20))
    assert epochs[0] != list(range(20))  # shuffled
    assert len({tuple(e) for e in epochs}) == 4  # a new order each epoch


def test_seeded_producers_are_reproducible(run):
    first = run(lambda: range_input_producer(30, num_epochs=2, seed=11))
    second = run(lambda: range_input_producer(30, num_epochs=2, seed=11))
    other = run(lambda: range_input_producer(30, num_epochs=2, seed=12))
    got = [[int(x) for x in drain(q)] for q in (first, second, other)]
    assert got[0] == got[1]
    assert got[0] != got[2]


def test_seeded_order_is_the_documented_per_epoch_permutation(run):
    items = np.arange(10) * 10
    queue = run(lambda: input_producer(items, num_epochs=2, seed=5))
    expected = [items[np.random.default_rng((5 + e) % 2**32).permutation(10)] for e in range(2)]
    assert [int(x) for x in drain(queue)] == list(np.concatenate(expected))


def test_unseeded_shuffle_still_delivers_each_item_per_epoch(run):
    queue = run(lambda: range_input_producer(15, num_epochs=3))
    epochs = epochs_of([int(x) for x in drain(queue)], 15)
    assert [Counter(e) for e in epochs] == [Counter(range(15))] * 3


def test_shuffle_false_keeps_order(run):
    names = [b"c", b"a", b"b"]
    queue = run(lambda: string_input_producer(names, num_epochs=2, shuffle=False))
    assert drain(queue) == names * 2


def test_endless_without_num_epochs(run):
    queue = run(lambda: range_input_producer(3, shuffle=False, capacity=2))
    assert [int(x) for x in take(queue, 10)] == [0, 1, 2] * 3 + [0]
    assert not queue.is_closed()


def test_string_input_producer_gives_bytes_and_accepts_paths(run, tmp_path):
    path = tmp_path / "data.txt"
    queue = run(lambda: string_input_producer([path, "é.txt"], num_epochs=1, shuffle=False))
    assert drain(queue) == [str(path).encode(), "é.txt".encode()]


@pytest.mark.parametrize("names", [np.array([b"x", b"yy"]), np.array(["x", "yy"]),
                                   [b"x", "yy"]])
def test_string_input_producer_elements_are_plain_bytes(run, names):
    got = drain(run(lambda: string_input_producer(names, num_epochs=1, shuffle=False)))
    assert got == [b"x", b"yy"]
    assert [type(x) for x in got] == [bytes, bytes]


def test_a_name_that_is_not_utf8_reaches_the_reader_as_the_same_file(run, tmp_path):
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9.tfrecord"  # Latin-1, not UTF-8
    with qp.io.TFRecordWriter(raw) as writer:
        writer.write(b"payload")
    share = shard_files([os.fsdecode(raw)], rank=0, world_size=1)  # str, surrogate-escaped
    queue = run(lambda: string_input_producer(share.files, num_epochs=1))
    assert drain(queue) == [raw]
    _, value = qp.TFRecordReader().read(run(lambda: string_input_producer(share.files,
                                                                          num_epochs=1)))
    assert value == b"payload"


def test_default_producer_names_are_unique():
    with Pipeline().as_default():
        names = [string_input_producer([b"a"]).name, range_input_producer(3).name,
                 input_producer([1, 2]).name, string_input_producer([b"a"], name="mine").name]
    assert len(set(names)) == 4 and names[3] == "mine"
    assert all(re.fullmatch(r"input_producer(_\d+)?", n) for n in names[:3])


def test_input_producer_rows_keep_shape_and_dtype(run):
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    queue = run(lambda: input_producer(rows, element_shape=[3], num_epochs=1, shuffle=False))
    assert queue.dtypes == [np.dtype(np.float32)]
    got = drain(queue)
    assert len(got) == 4
    for row, expected in zip(got, rows):
        np.testing.assert_array_equal(row, expected)
        assert row.dtype == np.float32


def test_empty_inputs_are_rejected_at_construction():
    with Pipeline().as_default() as pipeline:
        with pytest.raises(ValueError, match=r"^string_input_producer requires a non-empty "
                                             r"input tensor, got \[\]$"):
            string_input_producer([])
        with pytest.raises(ValueError, match=r"^input_producer requires a non-empty "):
            input_producer(np.zeros((0, 2)))
        with pytest.raises(ValueError, match=r"^range_input_producer requires a positive "
                                             r"integer limit, got 0$"):
            range_input_producer(0)
        with pytest.raises(ValueError, match=r"^Expected at least one tensor in "
                                             r"slice_input_producer\(\), got \[\]$"):
            slice_input_producer([])
    assert pipeline.queue_runners == []


def test_argument_errors_quote_the_value():
    with Pipeline().as_default():
        with pytest.raises(ValueError, match=r"^num_epochs must be None or a positive integer, "
                                             r"got 0$"):
            string_input_producer(["a"], num_epochs=0)
        with pytest.raises(ValueError, match=r"^num_epochs must be None or a positive integer, "
                                             r"got 1\.5$"):
            range_input_producer(3, num_epochs=1.5)
        with pytest.raises(ValueError, match=r"^capacity must be a positive integer, got -1$"):
            range_input_producer(3, capacity=-1)
        with pytest.raises(TypeError, match=r"^seed must be None or an integer, got 'x'$"):
            range_input_producer(3, seed="x")
        with pytest.raises(TypeError, match=r"^string_tensor must be a list .* got the single "
                                            r"string 'a.txt'; wrap it in a list$"):
            string_input_producer("a.txt")
        with pytest.raises(TypeError, match=r"^string_input_producer expects a 1-D list of "
                                            r"strings, got int64"):
            string_input_producer([1, 2])
        with pytest.raises(TypeError, match=r"^string_tensor must hold only str, bytes or "
                                            r"paths, got 3$"):
            string_input_producer(["a", 3])
        with pytest.raises(ValueError, match=r"^element_shape \(2,\) does not match the shape "
                                             r"\(3,\)"):
            input_producer(np.zeros((4, 3)), element_shape=[2])
        with pytest.raises(ValueError, match=r"^num_epochs must be None or a positive integer, "
                                             r"got -2$"):
            limit_epochs(1, num_epochs=-2)


def test_producers_add_one_runner_to_the_default_pipeline():
    with Pipeline().as_default() as pipeline:
        queue = range_input_producer(4, name="indices")
    assert pipeline.queues == [queue]
    assert [qr.queue for qr in pipeline.queue_runners] == [queue]


def test_match_filenames_once_globs_sorted_once(tmp_path):
    for name in ["b.rec", "a.rec", "c.txt"]:
        (tmp_path / name).write_bytes(b"")
    match = match_filenames_once(str(tmp_path / "*.rec"))
    first = match()
    assert list(first) == [str(tmp_path / n).encode() for n in ["a.rec", "b.rec"]]
    (tmp_path / "0.rec").write_bytes(b"")
    assert list(match()) == list(first)  # cached: the new file is not seen
    both = match_filenames_once([str(tmp_path / "*.txt"), str(tmp_path / "a*")])
    assert list(both()) == [str(tmp_path / n).encode() for n in ["a.rec", "c.txt"]]


def test_string_input_producer_resolves_a_pattern_when_it_runs(tmp_path):
    match = match_filenames_once(str(tmp_path / "part-*"))
    with Pipeline().as_default() as pipeline:
        queue = string_input_producer(match, num_epochs=2, shuffle=False)
    names = [str(tmp_path / f"part-{i}") for i in range(3)]
    for name in names:  # written after construction: matched only when the runner runs
        open(name, "wb").close()
    coord = Coordinator()
    threads = start_queue_runners(coord, pipeline=pipeline)
    got = drain(queue)
    coord.request_stop()
    coord.join(threads)
    assert got == [n.encode() for n in names] * 2


def test_an_empty_pattern_reaches_the_consumer_naming_the_pattern(tmp_path):
    pattern = str(tmp_path / "nothing-*.rec")
    coord = Coordinator()
    with Pipeline().as_default() as pipeline:
        queue = string_input_producer(match_filenames_once(pattern))
    threads = start_queue_runners(coord, pipeline=pipeline)
    with pytest.raises(InvalidArgumentError,
                       match=r"^string_input_producer requires a non-empty input tensor: '"
                             + re.escape(pattern) + r"' matched no files$"):
        queue.dequeue(timeout=10)
    with pytest.raises(InvalidArgumentError):
        coord.join(threads)


def test_match_filenames_once_through_fsspec():
    fsspec = pytest.importorskip("fsspec", reason="fsspec is the optional 'remote' extra")
    fs = fsspec.filesystem("memory")
    for name in ["/qp-test/x-1", "/qp-test/x-0", "/qp-test/y"]:
        fs.pipe(name, b"data")
    try:
        got = list(match_filenames_once("memory://qp-test/x-*")())
    finally:
        fs.rm("/qp-test", recursive=True)
    assert got == [b"memory:///qp-test/x-0", b"memory:///qp-test/x-1"]  # fsspec's full form


def test_match_filenames_once_without_fsspec_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)  # makes `import fsspec` fail
    match = match_filenames_once("s3://bucket/*.tfrecord")
    with pytest.raises(ImportError, match=r"pip install '<queuepipe checkout>\[remote\]'$"):
        match()


def test_slice_input_producer_slices_line_up(run):
    features = np.arange(20).reshape(10, 2)
    labels = [f"label-{i}" for i in range(10)]
    next_slice = run(lambda: slice_input_producer([features, np.array(labels, dtype="S")],
                                                  num_epochs=2, seed=7))
    got = [next_slice() for _ in range(20)]
    for feature, label in got:
        assert type(label) is bytes
        assert label == f"label-{feature[0] // 2}".encode()
        np.testing.assert_array_equal(feature, features[feature[0] // 2])
    assert Counter(label for _, label in got) == Counter(s.encode() for s in labels * 2)
    with pytest.raises(OutOfRangeError):
        next_slice()


def test_slice_input_producer_rejects_unequal_lengths():
    with Pipeline().as_default():
        with pytest.raises(ValueError, match=r"^slice_input_producer: tensor 1 of tensor_list "
                                             r"has 3 rows but tensor 0 has 4;"):
            slice_input_producer([np.zeros(4), np.zeros(3)])


def test_limit_epochs_returns_the_tensor_then_raises():
    produce = limit_epochs("x", num_epochs=2)
    assert [produce(), produce()] == ["x", "x"]
    with pytest.raises(OutOfRangeError, match=r"^limit_epochs: all 2 epochs were used$"):
        produce()
    with pytest.raises(OutOfRangeError):
        produce()


def test_limit_epochs_without_limit_is_endless():
    produce = limit_epochs(5)
    assert [produce() for _ in range(100)] == [5] * 100
