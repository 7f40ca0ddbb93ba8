"""ReadPlan: its chunks hold the files' records as object arrays, with their tickets and
ordinals, and it gives their keys."""

import base64
import os
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queuepipe as qp
from queuepipe import _chunk_maps, plan as plan_module
from queuepipe._core import core
from queuepipe.plan import ReadPlan
from queuepipe.shards import write_shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """3 shards of 50 records of 0-99 bytes each."""
    rng = np.random.default_rng(3)
    records = [bytes(rng.integers(0, 256, rng.integers(0, 100), dtype=np.uint8))
               for _ in range(150)]
    return write_shards(records, tmp_path_factory.mktemp("plan"), 3, processes=1,
                        progress=False, index=False)


def taken(plan):
    chunks = []
    try:
        while True:
            chunks.append(plan.take())
    except qp.errors.OutOfRangeError:
        pass
    finally:
        plan.close()
    return chunks


@pytest.mark.parametrize("order", ["sorted", "files"])
def test_chunks_hold_the_records_of_each_file_as_object_arrays_and_give_their_keys(shards, order):
    files = sorted(os.fsdecode(path) for path in shards)
    records = [list(qp.tf_record_iterator(path)) for path in files]
    offsets = [np.concatenate(([0], np.cumsum([16 + len(r) for r in rs])[:-1])).tolist()
               for rs in records]
    plan = ReadPlan(files, qp.TFRecordReader, 16, 2, order, 7, True)
    chunks = taken(plan)
    assert len(chunks) == 2 * 12  # 50 records a file: 16, 16, 16, 2
    ordinal = 0
    for ticket, chunk in enumerate(chunks):
        file, position, skip, count = chunk.where
        first = offsets[file].index(position)
        assert (chunk.ticket, skip, count) == (ticket, 0, len(chunk.values))
        assert chunk.ordinals.tolist() == list(range(ordinal, ordinal + count))
        assert isinstance(chunk.values, np.ndarray) and chunk.values.dtype == object
        assert chunk.values.tolist() == records[file][first:first + count]
        # (read again: the records are not delivered)
        assert plan.keys_of(chunk.ordinals[::-1]).tolist() == [
            b"%s:%d" % (files[file].encode(), offset)
            for offset in offsets[file][first:first + count]][::-1]
        ordinal += count


def test_the_keys_of_records_delivered_or_of_an_unkeyed_plan_are_none(shards):
    files = sorted(os.fsdecode(path) for path in shards)
    plan = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    first, second = plan.take(), plan.take()
    plan.delivered(first.ordinals)  # its ticket is forgotten
    assert plan.keys_of(first.ordinals) is None
    assert plan.keys_of(second.ordinals[:1]).tolist() == [
        b"%s:%d" % (files[0].encode(), second.where[1])]
    plan.close()
    unkeyed = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, False)
    assert unkeyed.keys_of(unkeyed.take().ordinals) is None
    unkeyed.close()


def test_records_are_delivered_whatever_the_integers_their_ordinals_come_in(shards):
    # (a plan's own callers give int64; the core's marks take nothing else, the pure twin
    # anything: delivered makes them int64 for both)
    files = sorted(os.fsdecode(path) for path in shards)
    plan = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    first = plan.take()
    plan.delivered(first.ordinals.astype(np.int32))
    assert plan.keys_of(first.ordinals) is None  # all delivered: its ticket is forgotten
    plan.close()


def test_chunks_are_forgotten_once_the_oldest_and_those_after_it_are_all_delivered(shards):
    # A batch without a record of the oldest open chunk forgets nothing (delivered checks
    # the oldest only then); the one that delivers its last record forgets it and every
    # chunk after it that was delivered meanwhile.
    files = sorted(os.fsdecode(path) for path in shards)
    plan = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    first, second, third = plan.take(), plan.take(), plan.take()
    plan.delivered(first.ordinals[1:])
    plan.delivered(second.ordinals)
    assert [base for base, _ in plan._tickets] == [0, 16, 32]
    plan.delivered(first.ordinals[:1])
    assert [base for base, _ in plan._tickets] == [32] and plan._low == 32
    plan.delivered(np.concatenate([first.ordinals, third.ordinals[:-1]]))  # (again: no-op)
    assert plan.keys_of(third.ordinals[-1:]) is not None
    state = plan.state()
    assert [entry[0] for entry in state["open"]] == [32]
    plan.close()


@pytest.mark.parametrize("seed", range(6))
def test_the_marks_stay_right_as_chunks_come_and_go_through_a_small_buffer(shards, seed):
    # The marks of each chunk taken go after the others' in a buffer with room for more,
    # a new one (the open marks copied first) when it is full; forgetting moves their
    # start. With a buffer of 8, every few chunks move: a state must still list exactly
    # the records not delivered.
    files = sorted(os.fsdecode(path) for path in shards)
    plan = ReadPlan(files, qp.TFRecordReader, 7, 3, "files", 5, False)
    rnd = random.Random(seed)
    room = plan_module._MARKS_ROOM
    plan_module._MARKS_ROOM = 8
    try:
        left, held = set(), []
        while True:
            try:
                chunk = plan.take()
            except qp.errors.OutOfRangeError:
                break
            left |= set(chunk.ordinals.tolist())
            held += chunk.ordinals.tolist()
            rnd.shuffle(held)
            k = rnd.randrange(len(held) + 1)
            plan.delivered(np.array(held[:k], dtype=np.int64))
            left -= set(held[:k])
            del held[:k]
            state = plan.state()
            listed = set()
            for base, *where, packed in state["open"]:
                marks = np.unpackbits(np.frombuffer(base64.b64decode(packed), np.uint8))
                listed |= {base + i for i in np.flatnonzero(marks[:where[-1]]).tolist()}
            assert listed == left
    finally:
        plan_module._MARKS_ROOM = room
        plan.close()


def test_a_delivery_cut_short_after_its_marks_leaves_the_forgetting_to_the_next(shards,
                                                                              monkeypatch):
    # (a second reading: without it, a call cut between the marks and the search, and never
    # made again, left the oldest ticket delivered and every later one held for ever)
    files = sorted(os.fsdecode(path) for path in shards)
    plan = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    first, second = plan.take(), plan.take()

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(plan, "_forget_delivered", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plan.delivered(first.ordinals)
    monkeypatch.undo()
    plan.delivered(second.ordinals[:1])  # no record of the oldest: it forgets all the same
    assert [base for base, _ in plan._tickets] == [16] and plan._low == 16
    plan.close()


_MARKS = [plan_module._pure_mark_delivered] + (
    [] if getattr(plan_module.core, "mark_delivered", None) is None
    else [plan_module.core.mark_delivered])


@pytest.mark.skipif(len(_MARKS) < 2, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_marks_deliveries_as_the_pure_twin_does(seed):
    # ordinals in any order, some below low (forgotten), now and then one past the marks;
    # limits below, among and above the places: the same marks, flag and error
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 40))
    low = int(rng.integers(0, 1 << 40))
    left = rng.random(n) < 0.7
    ordinals = (low + rng.integers(-5, n + (rng.random() < 0.1) or 1,
                                   int(rng.integers(0, 30)))).astype(np.int64)
    limit = int(rng.choice([plan_module._NO_TICKET, int(rng.integers(-6, n + 2))]))
    outcomes = []
    for mark in _MARKS:
        marks, due = left.copy(), bytearray(1)
        try:
            outcomes.append((mark(marks, ordinals, low, limit, due), marks.tolist(), due[0]))
        except IndexError as e:
            outcomes.append((str(e), marks.tolist(), due[0]))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] is None:
        places = ordinals - low
        assert not outcomes[0][1] or not np.array(outcomes[0][1])[places[places >= 0]].any()
        assert outcomes[0][2] == int(len(places) > 0 and places.min() < limit)


@pytest.mark.parametrize("mark", _MARKS)
def test_marking_deliveries_past_the_marks_names_the_place_and_marks_nothing(mark):
    left, due = np.ones(4, dtype=bool), bytearray(1)
    with pytest.raises(IndexError, match=r"^index 6 is out of bounds for axis 0 with size 4$"):
        mark(left, np.array([12, 16, 11], dtype=np.int64), 10, 12, due)
    assert left.tolist() == [True] * 4 and due[0] == 1  # (the flag is set first)
    mark(left, np.array([9, 13], dtype=np.int64), 10, plan_module._NO_TICKET, due)
    assert left.tolist() == [True, True, True, False]


# -- the chunk maps: later epochs read their chunks by offset (queuepipe/_chunk_maps.py) ------


def _chunks(plan):
    return [(c.ticket, c.ordinals.tolist(), c.values.tolist(), c.where) for c in taken(plan)]


@pytest.mark.parametrize("order", ["sorted", "files"])
def test_mapped_epochs_give_the_chunks_of_epochs_read_in_order(shards, order):
    files = sorted(os.fsdecode(path) for path in shards)
    mapped = ReadPlan(files, qp.TFRecordReader, 16, 3, order, 7, True)
    in_order = ReadPlan(files, qp.TFRecordReader, 16, 3, order, 7, True)
    in_order._maps._enabled = False
    starts = []
    mapped._reader._start = lambda filename, start=mapped._reader._start: (
        starts.append(filename), start(filename))[1]
    assert _chunks(mapped) == _chunks(in_order)
    # with the core, the files are opened in epoch 0 alone; on the pure path, every epoch
    assert len(starts) == (1 if core is not None else 3) * len(files)


def test_a_file_grown_since_its_first_pass_is_read_in_order_again(shards, tmp_path):
    path = str(tmp_path / "growing.tfrecord")
    with qp.io.TFRecordWriter(path) as writer:
        for i in range(20):
            writer.write(b"r%d" % i)
    plan = ReadPlan([path], qp.TFRecordReader, 8, None, "sorted", 0, False)
    first = [plan.take() for _ in range(3)]  # 8, 8, 4: the pass is mapped
    with open(path, "ab") as f, qp.io.TFRecordWriter(str(tmp_path / "more")) as more:
        more.write(b"r20")
        more.flush()
        f.write(open(str(tmp_path / "more"), "rb").read())
    second = [plan.take() for _ in range(3)]
    plan.close()
    assert [len(c.values) for c in first] == [8, 8, 4]
    assert [c.values.tolist() for c in second] == [
        [b"r%d" % i for i in range(0, 8)], [b"r%d" % i for i in range(8, 16)],
        [b"r%d" % i for i in range(16, 21)]]


def test_a_file_changed_in_place_since_its_first_pass_is_damage_naming_it(tmp_path):
    path = str(tmp_path / "changed.tfrecord")
    with qp.io.TFRecordWriter(path) as writer:
        for i in range(20):
            writer.write(b"record %02d" % i)
    plan = ReadPlan([path], qp.TFRecordReader, 8, None, "sorted", 0, False)
    for _ in range(3):
        plan.take()
    data = bytearray(open(path, "rb").read())
    data[12 + 3] ^= 1  # the first record's data, the file's size the same
    open(path, "wb").write(bytes(data))
    # (a mapped chunk's damage is named as the pure path, which reads in order, names it)
    with pytest.raises(qp.errors.DataLossError, match=rf"^corrupted record at 12: data "
                       rf"checksum mismatch .* in file '{path}'$") as caught:
        plan.take()
    plan.close()
    assert (caught.value.path, caught.value.offset) == (path, 12)


def test_a_file_rewritten_with_other_whole_frames_since_its_first_pass(tmp_path):
    path = str(tmp_path / "rewritten.tfrecord")

    def write(records):
        with qp.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)

    write([b"record %02d" % i for i in range(20)])  # 20 frames of 25 bytes: 500
    plan = ReadPlan([path], qp.TFRecordReader, 8, None, "sorted", 0, False)
    for _ in range(3):
        plan.take()
    write([b"r" * 9] * 10 + [b"x" * 34] * 5)  # 10 frames of 25 bytes, 5 of 50: 500 again
    # the first chunk's frames lie where the map says: read as they are now, on both paths
    assert plan.take().values.tolist() == [b"r" * 9] * 8
    if core is None:  # (every epoch in order: the file's records as they are now)
        assert plan.take().values.tolist() == [b"r" * 9] * 2 + [b"x" * 34] * 5
    else:  # (whole frames, but not where the map has the second chunk's: the change is named)
        with pytest.raises(qp.errors.DataLossError, match=rf"^corrupted record at 400: file "
                           rf"'{path}' changed since an earlier epoch read it \(its 8 records "
                           rf"from offset 200 to 400 are not there as they were\)$"):
            plan.take()
    plan.close()


def test_a_file_of_chunks_too_long_to_map_is_read_in_order_every_epoch(shards, monkeypatch):
    monkeypatch.setattr(_chunk_maps, "_MOST_MAPPED_BYTES", 100)  # (16 records: 800-1,900 B)
    files = sorted(os.fsdecode(path) for path in shards)
    plan = ReadPlan(files, qp.TFRecordReader, 16, 2, "sorted", 7, True)
    starts = []
    plan._reader._start = lambda filename, start=plan._reader._start: (
        starts.append(filename), start(filename))[1]
    in_order = ReadPlan(files, qp.TFRecordReader, 16, 2, "sorted", 7, True)
    in_order._maps._enabled = False
    assert _chunks(plan) == _chunks(in_order)
    assert starts == files * 2


@pytest.mark.skipif(core is None, reason="the kept buffers are the compiled core's")
def test_the_last_plan_closed_frees_the_buffers_kept_for_chunks_to_come(shards, monkeypatch):
    monkeypatch.setattr(plan_module, "_open_plans", [0])  # (plans other tests left open)
    files = sorted(os.fsdecode(path) for path in shards)
    first = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    second = ReadPlan(files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    blocks = core.blocks([1 << 20] * 3)
    del blocks
    kept = core.blocks_kept()
    assert kept[0] >= 3
    first.close()
    first.close()  # (a second close counts once)
    assert core.blocks_kept() == kept  # another plan is open: its chunks may come
    second.close()
    assert core.blocks_kept() == (0, 0)
