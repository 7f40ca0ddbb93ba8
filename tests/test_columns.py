"""queuepipe._columns, through the queues: sparse components held flat in an arena.

A model-based test drives each queue kind with random enqueues and dequeues of ragged lists and
compares what leaves with a plain Python model; the others pin the arena's compaction, the
rank check at the first enqueue, and string values.
"""

import sys
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import producers_and_consumers, runs_beside

import queuepipe as qp
from queuepipe import _columns, _queue_base, queues, sparse
from queuepipe.errors import InvalidArgumentError, OutOfRangeError


def sv(values, dtype=np.int64):
    values = np.array(values, dtype=dtype)
    return qp.SparseValue(np.arange(len(values), dtype=np.int64)[:, None], values,
                          np.array([len(values)], dtype=np.int64))


def batched(lists):
    rows = [[i, j] for i, row in enumerate(lists) for j in range(len(row))]
    return qp.SparseValue(np.array(rows, dtype=np.int64).reshape(-1, 2),
                          np.array([v for row in lists for v in row], dtype=np.int64),
                          np.array([len(lists), max(map(len, lists), default=0)]))


def lists_of(batch, extents=None):
    """The element lists of a batched SparseValue, checked against TF's batched form; the
    batch's extent is the largest of the elements' ``extents`` (their dense_shape[0])."""
    n = int(batch.dense_shape[0])
    lengths = batch.row_lengths()
    assert batch.indices[:, 0].tolist() == np.repeat(np.arange(n), lengths).tolist()
    assert batch.indices[:, 1].tolist() == [j for length in lengths for j in range(length)]
    if extents is not None:
        assert batch.dense_shape[1] == max(extents, default=0)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [batch.values[a:b].tolist() for a, b in zip(bounds[:-1], bounds[1:])]


def make(kind, capacity):
    if kind == "fifo":
        return qp.FIFOQueue(capacity, [qp.int64, qp.int64], shapes=[[], None])
    if kind == "shuffle":
        return qp.RandomShuffleQueue(capacity, 0, [qp.int64, qp.int64], shapes=[[], None],
                                     seed=1)
    return qp.PriorityQueue(capacity, [qp.int64], shapes=[None])


OPS = st.lists(st.one_of(
    st.tuples(st.just("put"), st.lists(st.integers(0, 2 ** 40), max_size=9)),
    st.tuples(st.just("put_many"), st.lists(st.lists(st.integers(0, 300), max_size=9),
                                            max_size=7)),
    st.tuples(st.just("take"), st.integers(1, 6)),
    st.tuples(st.just("take_one"), st.just(0))), max_size=60)


@pytest.mark.parametrize("kind", ["fifo", "shuffle", "priority"])
@settings(max_examples=60)
@given(ops=OPS)
def test_sparse_elements_leave_whole_and_in_the_queues_order(kind, ops):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_columns, "_MIN_ARENA", 4)  # compactions and growth within a few ops
        check_against_the_model(kind, ops)


def check_against_the_model(kind, ops):
    q = make(kind, 64)
    # The model of what the queue holds: serial number -> (list, extent). An element split
    # from a batch has the batch's extent, its longest list (TF's dense_shape[1:]).
    held, serial = {}, 0
    for op, arg in ops:
        if op == "put" and len(held) < 64:
            q.enqueue((serial, sv(arg)))
            held[serial], serial = (arg, len(arg)), serial + 1
        elif op == "put_many" and len(held) + len(arg) <= 64:
            q.enqueue_many((np.arange(serial, serial + len(arg)), batched(arg)))
            extent = max(map(len, arg), default=0)
            held.update((serial + j, (row, extent)) for j, row in enumerate(arg))
            serial += len(arg)
        elif op == "take" and len(held) >= arg:
            keys, batch = q.dequeue_many(arg)
            taken = [held.pop(k) for k in keys.tolist()]
            assert lists_of(batch, [e for _, e in taken]) == [row for row, _ in taken]
            if kind != "shuffle":  # FIFO order; the priority is the serial number
                assert keys.tolist() == sorted(keys.tolist())
        elif op == "take_one" and held:
            key, value = q.dequeue()
            row, extent = held.pop(int(key))
            assert value.indices.tolist() == [[j] for j in range(len(row))]
            assert value.values.tolist() == row and value.dense_shape.tolist() == [extent]
    q.close()
    rest = Counter()
    while True:
        try:
            keys, batch = q.dequeue_up_to(5)
        except OutOfRangeError:
            break
        for k, values in zip(keys.tolist(), lists_of(batch)):
            assert values == held[k][0]
            rest[k] += 1
    assert rest == Counter(held.keys())  # each element left once


@settings(max_examples=60)
@given(st.lists(st.tuples(st.sampled_from(["lists", "spread", "one", "take"]),
                          st.lists(st.lists(st.integers(0, 99), max_size=5), min_size=1,
                                   max_size=4)), max_size=30))
def test_plain_lists_and_other_indices_share_a_column(ops):
    # plain lists (indices 0, 1, ...) keep no indices until an element with others comes
    # (every second place, or one element enqueued alone): then those of the lists held are
    # made, and every element leaves with its own indices
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_columns, "_MIN_ARENA", 4)
        q = qp.FIFOQueue(64, [qp.int64], shapes=[None])
        held = []  # (indices, values) of each element, in order
        for op, lists in ops:
            if op == "take":
                for _ in range(min(len(lists), len(held))):
                    indices, values = held.pop(0)
                    value = q.dequeue()
                    assert value.indices[:, 0].tolist() == indices
                    assert value.values.tolist() == values
                continue
            if len(held) + len(lists) > 64:
                continue
            step = 2 if op == "spread" else 1
            if op == "one":
                lists = lists[:1]
                q.enqueue(qp.SparseValue(np.arange(len(lists[0]))[:, None] * 1,
                                         np.array(lists[0], dtype=np.int64),
                                         np.array([len(lists[0])])))
            else:
                rows = [[i, step * j] for i, row in enumerate(lists) for j in range(len(row))]
                q.enqueue_many(qp.SparseValue(
                    np.array(rows, dtype=np.int64).reshape(-1, 2),
                    np.array([v for row in lists for v in row], dtype=np.int64),
                    np.array([len(lists), step * max(map(len, lists), default=0)])))
            held.extend(([step * j for j in range(len(row))], row) for row in lists)
        if held:
            batch = q.dequeue_many(len(held))
            assert batch.indices[:, 1].tolist() == [j for indices, _ in held for j in indices]
            assert batch.values.tolist() == [v for _, values in held for v in values]


def test_the_arena_is_compacted_and_grown_as_elements_come_and_go():
    q = qp.FIFOQueue(8, [qp.int64], shapes=[None])
    column = None
    for i in range(2000):  # about 3000 values a round, 8 held at most: the holes are reused
        q.enqueue(sv(np.full(i % 5 + 1, i)))
        if q.size() == 8:
            batch = q.dequeue_many(5)
            assert lists_of(batch)[0][0] == i - 7
        column = q._columns[0]
    assert isinstance(column, _columns.SparseColumn)
    assert len(column.values) <= 2 * _columns._MIN_ARENA  # not one slot per value ever put
    rest = [row[0] for row in lists_of(q.dequeue_many(q.size()))]
    assert rest == list(range(2000 - len(rest), 2000))


def test_a_compaction_moves_the_arena_in_place_and_keeps_no_index_for_lists():
    # elements of per-element token lists, put in groups as a batching runner puts them:
    # the arena is compacted where it is (a new one costs fresh pages), and no index arena
    # is kept for plain lists
    q = qp.RandomShuffleQueue(64, 0, [qp.int64], shapes=[None], seed=1)
    q.enqueue(sv([-1, -1]))  # one element alone first, as a batching runner's first put
    stage = q._add_stage()
    held, arenas, put = [], set(), 0
    for i in range(600):
        stage.extend(q._spec.staged(sv(np.full(i % 40 + 1, i))) for _ in range(1))
        put += 1
        if len(stage) == 8:
            q._put_staged(stage)
            column = q._columns[0]
            arenas.add(id(column.values))
        if q.size() >= 48:
            held.extend(row[0] for row in lists_of(q.dequeue_many(40)))
    column = q._columns[0]
    assert column.listed and len(column.inner) == 0
    assert len(arenas) <= 4  # grown a few times, never remade to compact
    q._put_staged(stage)
    held.extend(row[0] for row in lists_of(q.dequeue_many(q.size())))
    assert Counter(held) == Counter([-1, *range(put)])


def test_a_compaction_of_strings_drops_the_references_it_moved_past():
    q = qp.RandomShuffleQueue(64, 0, [qp.string], shapes=[None], seed=1)
    compactions, fill = 0, 0
    for i in range(400):
        q.enqueue(sv([b"%d" % i] * (i % 7 * 10 + 1), dtype=object))
        if q.size() >= 40:
            q.dequeue_many(30)
        column = q._columns[0]
        compactions += column.live and column.fill < fill
        fill = column.fill
        assert all(v is None for v in column.values[column.fill:])
    assert compactions >= 3


def test_a_sparse_value_of_another_rank_fails_its_enqueue_and_names_the_component():
    q = qp.FIFOQueue(4, [qp.int64], shapes=[None], names=["tokens"], name="q")
    q.enqueue({"tokens": sv([1, 2])})
    two_d = qp.SparseValue(np.array([[0, 0]]), np.array([5]), np.array([1, 1]))
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' component 'tokens': cannot "
                                                   r"batch sparse values of ranks \[1, 2\]$"):
        q.enqueue({"tokens": two_d})
    assert q.size() == 1 and q.dequeue()["tokens"].values.tolist() == [1, 2]


def test_string_sparse_values_keep_their_bytes_and_free_them_when_taken():
    q = qp.RandomShuffleQueue(10, 0, [qp.string], shapes=[None], seed=0)
    words = [[b"a", b"bb"], [], [b"ccc"]]
    for row in words:
        q.enqueue(sv(row, dtype=object))
    batch = q.dequeue_many(3)
    assert sorted(lists_of(batch)) == sorted(words)
    column = q._columns[0]
    assert column.fill == 0 and not any(v is not None for v in column.values)


def test_rows_to_sparse_of_no_element_keeps_the_rank():
    rows = sparse.stack([], np.dtype(np.int64), "t", rank=2)
    empty = rows.to_sparse()
    assert empty.indices.shape == (0, 3) and empty.dense_shape.tolist() == [0, 0, 0]


# -- several sparse components: their shared row tables ------------------------------------

def several(lists, step):
    """One batch's components: serial numbers, int64 lists, byte-string lists (every
    ``step``-th place: plain lists when 1) and rank-2 float sparse values (two values each,
    at [0, i] and [1, 0])."""
    n = len(lists)
    ints = batched(lists)
    words = qp.SparseValue(
        np.array([[i, step * j] for i, row in enumerate(lists) for j in range(len(row))],
                 dtype=np.int64).reshape(-1, 2),
        np.array([str(v).encode() for row in lists for v in row], dtype=object),
        np.array([n, step * max(map(len, lists), default=0)]))
    grid = qp.SparseValue(
        np.array([[i, 0, len(row)] for i, row in enumerate(lists)]
                 + [[i, 1, 0] for i in range(n)], dtype=np.int64).reshape(-1, 3),
        np.array([float(len(row)) for row in lists] + [0.5] * n, dtype=np.float32),
        np.array([n, 2, max(map(len, lists), default=0) + 1]))
    return ints, words, grid


def element_of(serial, batch, j):
    """Element ``j`` of a dequeued batch, comparable with the model's entry."""
    ints, words, grid = (batch[k] for k in ("ints", "words", "grid"))
    pick = [np.flatnonzero(value.indices[:, 0] == j) for value in (ints, words, grid)]
    return (ints.values[pick[0]].tolist(), words.indices[pick[1], 1].tolist(),
            [w.decode() for w in words.values[pick[1]]],
            sorted(zip(grid.indices[pick[2], 1].tolist(), grid.indices[pick[2], 2].tolist(),
                       grid.values[pick[2]].tolist())))


def modelled(row, step):
    return (row, [step * j for j in range(len(row))], [str(v) for v in row],
            sorted([(0, len(row), float(len(row))), (1, 0, 0.5)]))


@pytest.mark.parametrize("kind", ["fifo", "shuffle", "priority"])
@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.sampled_from(["lists", "spread"]),
              st.lists(st.lists(st.integers(0, 300), max_size=4), max_size=6)),
    st.tuples(st.just("take"), st.integers(1, 7))), max_size=40))
def test_several_sparse_components_move_together_through_growth_and_compaction(kind, ops):
    """Three sparse components (int64 lists, byte strings, rank-2 floats) beside a serial
    number: rows grow from 4, arenas compact, one component starts keeping indices when a
    batch of them is not plain lists; every element leaves whole, each value where it was."""
    names = ["serial", "ints", "words", "grid"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_columns, "_MIN_ARENA", 4)
        patch.setattr(_queue_base, "_INITIAL_ROWS", 4)
        dtypes = [qp.int64, qp.int64, qp.string, qp.float32]
        shapes = [[], None, None, None]
        q = qp.FIFOQueue(200, dtypes, shapes, names=names) if kind == "fifo" else \
            qp.RandomShuffleQueue(200, 0, dtypes, shapes, names=names, seed=3) \
            if kind == "shuffle" else \
            qp.PriorityQueue(200, dtypes[1:], None, names=names)
        held, serial = {}, 0
        for op, arg in ops:
            if op == "take":
                if len(held) >= arg:
                    batch = q.dequeue_many(arg)
                    for j, key in enumerate(batch["serial"].tolist()):
                        assert element_of(key, batch, j) == held.pop(key)
                continue
            if len(held) + len(arg) > 200:
                continue
            step = 2 if op == "spread" else 1
            ints, words, grid = several(arg, step)
            q.enqueue_many({"serial": np.arange(serial, serial + len(arg)), "ints": ints,
                            "words": words, "grid": grid})
            held.update((serial + j, modelled(row, step)) for j, row in enumerate(arg))
            serial += len(arg)
        q.close()
        while held:
            batch = q.dequeue_up_to(3)
            for j, key in enumerate(batch["serial"].tolist()):
                assert element_of(key, batch, j) == held.pop(key)
        with pytest.raises(OutOfRangeError):
            q.dequeue_up_to(3)
        if serial:  # (the components' kinds are known from the first batch on)
            ints, words, grid = (column.listed for column in q._columns[1:])
            assert ints and grid is False
            assert words == (not any(op == "spread" and any(len(row) > 1 for row in arg)
                                     for op, arg in ops))


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
def test_two_producers_and_two_consumers_move_every_sparse_value_intact(kind):
    """4 threads: two enqueue_many batches and single elements of three sparse components
    and a serial number, two take batches and single elements, through rows that grow and
    arenas that compact; every element arrives once with its own values."""
    per_producer, names = 600, ["serial", "ints", "words", "grid"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_columns, "_MIN_ARENA", 4)
        patch.setattr(_queue_base, "_INITIAL_ROWS", 4)
        dtypes, shapes = [qp.int64, qp.int64, qp.string, qp.float32], [[], None, None, None]
        q = qp.FIFOQueue(50, dtypes, shapes, names=names) if kind == "fifo" else \
            qp.RandomShuffleQueue(50, 5, dtypes, shapes, names=names, seed=0)
        expected, results = {}, [[], []]

        def lists(serial, count):
            return [[serial + j] * ((serial + j) % 4) for j in range(count)]

        def produce(p):
            serial = p * per_producer
            while serial < (p + 1) * per_producer:
                count = min(1 + serial % 7, (p + 1) * per_producer - serial)
                step = 1 + serial % 2  # odd: words every second place
                rows = lists(serial, count)
                expected.update((serial + j, modelled(row, step)) for j, row in enumerate(rows))
                ints, words, grid = several(rows, step)
                q.enqueue_many({"serial": np.arange(serial, serial + count), "ints": ints,
                                "words": words, "grid": grid})
                serial += count

        def consume(c):
            turn = 0
            while True:
                turn += 1
                try:
                    batch = q.dequeue_up_to(2 + turn % 5)
                except OutOfRangeError:
                    return
                results[c].extend((key, element_of(key, batch, j))
                                  for j, key in enumerate(batch["serial"].tolist()))

        assert not producers_and_consumers(q, produce, consume, 2, 2)
    got = [entry for out in results for entry in out]
    assert len(expected) == 2 * per_producer
    assert Counter(key for key, _ in got) == Counter(list(expected))  # each once
    for key, element in got:
        assert element == expected[key]


# -- fixed-shape components of one dtype and shape: one table --------------------------------

@pytest.mark.parametrize("kind", ["fifo", "shuffle", "priority", "padding"])
@settings(max_examples=40, deadline=None)
@given(ops=st.lists(st.one_of(
    st.tuples(st.just("put_many"), st.integers(0, 9)), st.tuples(st.just("put"), st.just(1)),
    st.tuples(st.just("take"), st.integers(1, 7)), st.tuples(st.just("take_one"), st.just(1))),
    max_size=40))
def test_components_of_one_dtype_and_shape_share_a_table_and_leave_whole(kind, ops):
    """Three int64 scalars (the priority one of them), two float rows of 3 and two strings:
    three tables of several members, through growth from 4 rows and a ring that wraps; each
    element leaves with its own values, each batch's components contiguous arrays."""
    names = ["serial", "twice", "minus", "row", "half", "word", "upper"]
    dtypes = [qp.int64, qp.int64, qp.int64, qp.float32, qp.float32, qp.string, qp.string]
    shapes = [[], [], [], [3], [3], [], []]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_queue_base, "_INITIAL_ROWS", 4)
        q = qp.FIFOQueue(60, dtypes, shapes, names=names) if kind == "fifo" else \
            qp.PaddingFIFOQueue(60, dtypes, shapes, names=names) if kind == "padding" else \
            qp.RandomShuffleQueue(60, 0, dtypes, shapes, names=names, seed=2) \
            if kind == "shuffle" else qp.PriorityQueue(60, dtypes[1:], shapes[1:], names=names)
        groups = [g for g in q._groups if isinstance(g, _columns.DenseColumns)]
        assert sorted(len(g.components) for g in groups) == [2, 2, 3]

        def values(serials):
            s = np.asarray(serials, dtype=np.int64)
            return {"serial": s, "twice": 2 * s, "minus": -s,
                    "row": np.stack([s, s + 1, s + 2], axis=1).astype(np.float32),
                    "half": np.stack([s / 2] * 3, axis=1).astype(np.float32),
                    "word": np.array([str(v).encode() for v in serials], dtype=object),
                    "upper": np.array([b"W%d" % v for v in serials], dtype=object)}

        def check(batch):
            serials = batch["serial"].tolist()
            want = values(serials)
            for name in names:
                assert batch[name].flags.c_contiguous and batch[name].dtype == want[name].dtype
                assert batch[name].tolist() == want[name].tolist()
            return serials

        held, serial = set(), 0
        for op, arg in ops:
            if op in ("put_many", "put") and len(held) + arg <= 60:
                if op == "put":
                    q.enqueue({k: v[0] for k, v in values([serial]).items()})
                else:
                    q.enqueue_many(values(range(serial, serial + arg)))
                held.update(range(serial, serial + arg))
                serial += arg
            elif op == "take" and len(held) >= arg:
                held.difference_update(check(q.dequeue_many(arg)))
            elif op == "take_one" and held:
                element = q.dequeue()
                check({k: np.asarray([v]) if k not in ("word", "upper") else
                       np.array([v], dtype=object) for k, v in element.items()})
                held.remove(int(element["serial"]))
        q.close()
        while held:
            held.difference_update(check(q.dequeue_up_to(4)))


def _random_segments(rng, rows):
    """Segments in increasing order without overlap in an arena of ``rows`` rows; sometimes
    one of them broken (negative, out of order, past the end, near 2**63)."""
    cuts = np.sort(rng.integers(0, rows + 1, size=2 * rng.integers(0, 12)))
    starts, lengths = cuts[0::2].astype(np.int64), (cuts[1::2] - cuts[0::2]).astype(np.int64)
    if len(starts) and rng.random() < 0.5:
        i = rng.integers(len(starts))
        broken = [(-1, None), (None, -1), (rows + 1, None), (None, rows + 1),
                  (2**62, None), (None, 2**63 - 1), (starts[i - 1] if i else None, None)]
        start, length = broken[rng.integers(len(broken))]
        starts[i] = starts[i] if start is None else start
        lengths[i] = lengths[i] if length is None else length
    return starts, lengths


def _random_arena(rng):
    """An arena of a few rows of some dtype and row shape, and _random_segments of it."""
    rows = int(rng.integers(0, 40))
    shape = [(rows,), (rows, 1), (rows, 3)][rng.integers(3)]
    dtype = [np.int64, np.float32, np.uint8][rng.integers(3)]
    return (rng.integers(0, 100, size=shape).astype(dtype),) + _random_segments(rng, rows)


@pytest.mark.skipif(_columns.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_compacts_segments_as_the_pure_twin_does(seed):
    rng = np.random.default_rng(seed)
    arena, starts, lengths = _random_arena(rng)
    outcomes = []
    for compact in (_columns.core.compact_segments, _columns._compact_segments):
        mine = arena.copy()
        try:
            outcomes.append((compact(mine, starts.copy(), lengths.copy()), mine.tolist()))
        except ValueError as e:
            outcomes.append((str(e), mine.tolist()))
    assert outcomes[0] == outcomes[1]
    if isinstance(outcomes[0][0], int):  # the segments, one after the other
        expected = [row for s, n in zip(starts, lengths) for row in arena[s:s + n].tolist()]
        assert outcomes[0][1][:outcomes[0][0]] == expected
    else:  # nothing moved
        assert outcomes[0][1] == arena.tolist()


@pytest.mark.parametrize("compact", ["core", "pure"])
def test_compact_segments_refuses_what_it_cannot_move_naming_it(compact):
    if compact == "core" and _columns.core is None:
        pytest.skip("the compiled core is not loaded")
    compact = _columns.core.compact_segments if compact == "core" else \
        _columns._compact_segments
    arena = np.arange(10, dtype=np.int64)
    with pytest.raises(ValueError, match=r"^compact_segments: segment 1 \(start 2, length 1\) "
                                         r"begins before the end of the segment before it$"):
        compact(arena, np.array([2, 2]), np.array([1, 1]))
    with pytest.raises(ValueError, match=r"^compact_segments: the arena must be a writable "
                                         r"C-contiguous array of numbers$"):
        compact(np.array([b"x"], dtype=object), np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match=r"^compact_segments: lengths must be a C-contiguous "
                                         r"array of int64$"):
        compact(arena, np.array([0]), np.array([1], dtype=np.int32))
    assert arena.tolist() == list(range(10))


@pytest.mark.skipif(_columns.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_gathers_segments_as_the_pure_twin_does(seed):
    rng = np.random.default_rng(seed)
    arena, starts, lengths = _random_arena(rng)
    rows, shape, dtype = len(arena), arena.shape, arena.dtype
    rng.shuffle(order := np.arange(len(starts)))  # any order: a gather may repeat or cross
    starts, lengths = starts[order].copy(), lengths[order].copy()
    total = int(lengths[lengths > 0].sum()) if (lengths < rows + 1).all() else 0
    total += [0, 0, 0, 1, -1][rng.integers(5)] if total else 0
    outcomes = []
    for gather in (_columns.core.gather_segments, _columns._gather_segments):
        out = np.full((total,) + shape[1:], 7, dtype=dtype)
        try:
            outcomes.append((gather(arena, starts, lengths, out), out.tolist()))
        except ValueError as e:
            outcomes.append((str(e), out.tolist()))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] is None:  # the segments, one after the other
        expected = [row for s, n in zip(starts, lengths) for row in arena[s:s + n].tolist()]
        assert outcomes[0][1] == expected


@pytest.mark.skipif(_columns.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_takes_rows_as_the_pure_twin_does(seed):
    # rows named in any order, repeated or not, a few outside the table; outs of any sizes,
    # now and then one row too many or too few in all
    rng = np.random.default_rng(seed)
    dtype = [np.uint8, np.int64, np.float32, np.complex64][rng.integers(4)]
    shape = [(), (3,), (2, 5)][rng.integers(3)]
    rows = int(rng.integers(0, 12))
    table = rng.integers(0, 100, (rows,) + shape).astype(dtype)
    index = rng.integers(-1 if rng.random() < 0.1 else 0, rows + (rng.random() < 0.1) or 1,
                         int(rng.integers(0, 30))).astype(np.int64)
    cuts = np.sort(rng.integers(0, len(index) + 1, int(rng.integers(0, 5))))
    sizes = np.diff(np.concatenate([[0], cuts, [len(index)]])).tolist()
    sizes[-1] += [0, 0, 0, 1, -1][rng.integers(5)] if sizes[-1] else 0
    outcomes = []
    for take in (_columns.core.take_rows, _columns._take_rows):
        outs = [np.full((k,) + shape, 7, dtype=dtype) for k in sizes]
        try:
            outcomes.append((take(table, index, outs), [out.tolist() for out in outs]))
        except ValueError as e:
            outcomes.append((str(e), [out.tolist() for out in outs]))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] is None:
        assert sum(outcomes[0][1], []) == table[index].tolist()


@pytest.mark.parametrize("gather", ["core", "pure"])
def test_gather_segments_refuses_what_it_cannot_copy_naming_it(gather):
    if gather == "core" and _columns.core is None:
        pytest.skip("the compiled core is not loaded")
    gather = _columns.core.gather_segments if gather == "core" else _columns._gather_segments
    arena, out = np.arange(10, dtype=np.int64), np.zeros(3, dtype=np.int64)
    with pytest.raises(ValueError, match=r"^gather_segments: segment 1 \(start 9, length 2\) "
                                         r"ends past the arena's end$"):
        gather(arena, np.array([0, 9]), np.array([1, 2]), out)
    with pytest.raises(ValueError, match=r"^gather_segments: the segments do not hold the 3 "
                                         r"rows of out$"):
        gather(arena, np.array([0]), np.array([2]), out)
    with pytest.raises(ValueError, match=r"^gather_segments: out's rows differ from the "
                                         r"arena's$"):
        gather(arena, np.array([0]), np.array([3]), np.zeros(3, dtype=np.float64))
    assert out.tolist() == [0, 0, 0]
    gather(arena, np.array([7, 1]), np.array([1, 2]), out)
    assert out.tolist() == [7, 1, 2]


@pytest.mark.skipif(_columns.core is None, reason="the pure twins of gather_segments and "
                    "list_indices gather with NumPy, which lets go of the GIL")
def test_taking_batches_of_token_lists_keeps_the_gil():
    # NumPy's take and its fancy indexing of a 2-D table let go of the GIL even for a batch's
    # rows: each was a hand-over from the consumer to a runner thread. A PriorityQueue reads
    # rows by an index array, as the shuffle queue does (whose draw, Generator.choice, still
    # lets go of the GIL once a batch: a seeded order must not change)
    q = qp.PriorityQueue(4800, [qp.int64], shapes=[None])
    rng = np.random.default_rng(0)
    lists = [rng.integers(0, 1000, int(n)).tolist() for n in rng.integers(0, 20, 4800)]
    q.enqueue_many((np.arange(4800), batched(lists)))
    taken = []

    def take_batches():
        for _ in range(20):
            taken.append(q.dequeue_many(48))

    overlapped = runs_beside(take_batches)
    assert overlapped == [False] * 5, overlapped
    assert [v for _, batch in taken for v in lists_of(batch)] == lists[:len(taken) * 48]


def _twins(name):
    """The core's column function ``name`` and its pure twin (the core's only where it is
    loaded)."""
    pure = getattr(_columns, "_" + name)
    return [pure] if _columns.core is None else [getattr(_columns.core, name), pure]


@pytest.mark.parametrize("gather", _twins("gather_segments"))
def test_gather_segments_refuses_an_out_that_overlaps_its_arena(gather):
    # (the core copied with memcpy over the bytes it read from: undefined, caught by ASan)
    a = np.arange(6, dtype=np.int64)
    with pytest.raises(ValueError, match=r"^gather_segments: out overlaps the arena$"):
        gather(a[:5], np.array([0]), np.array([5]), a[1:])
    assert a.tolist() == list(range(6))


@pytest.mark.parametrize("gather", _twins("gather_segments"))
def test_gather_segments_reads_starts_as_they_were_before_it_wrote(gather):
    # starts share memory with out: the core read them again while it wrote
    buf = np.array([0, 1, 0], dtype=np.int64)
    gather(np.array([3, 2, 8, 9], dtype=np.int64), buf[0:2], np.array([1, 1]), buf[1:3])
    assert buf.tolist() == [0, 3, 2]
    buf = np.array([0, 1, 0], dtype=np.int64)
    gather(np.array([100, 2, 8, 9], dtype=np.int64), buf[0:2], np.array([1, 1]), buf[1:3])
    assert buf.tolist() == [0, 100, 2]


@pytest.mark.parametrize("compact", _twins("compact_segments"))
def test_compact_segments_reads_lengths_as_they_were_before_it_moved(compact):
    arena = np.array([2, 1, 50, 60, 70, 80], dtype=np.int64)
    assert compact(arena, np.array([2, 4]), arena[0:2]) == 3
    assert arena.tolist() == [50, 60, 70, 60, 70, 80]


@pytest.mark.parametrize("gather", _twins("gather_segments"))
def test_gather_segments_of_no_segments_fills_only_an_empty_out(gather):
    with pytest.raises(ValueError, match=r"^gather_segments: the segments do not hold the 2 "
                                         r"rows of out$"):
        gather(np.zeros(3), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(2))
    gather(np.zeros(3), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))


@pytest.mark.parametrize("take", _twins("take_rows"))
def test_take_rows_fills_its_outs_one_after_the_other(take):
    rng = np.random.default_rng(5)
    for dtype, shape in [(np.uint8, (784,)), (np.float32, (3, 4)), (np.int64, ()),
                         (np.complex64, (2,))]:
        table = rng.integers(0, 100, (40,) + shape).astype(dtype)
        index = rng.integers(0, 40, 25)
        outs = [np.empty((k,) + shape, dtype=dtype) for k in (10, 0, 7, 8)]
        take(table, index, outs)
        assert np.array_equal(np.concatenate(outs), table[index])
    take(np.zeros((3, 2)), np.empty(0, dtype=np.int64), [])  # nothing named, no out


@pytest.mark.parametrize("take", _twins("take_rows"))
def test_take_rows_refuses_what_it_cannot_copy_naming_it_and_copies_nothing(take):
    table = np.arange(12, dtype=np.int64).reshape(6, 2)
    outs = [np.full((2, 2), -1, dtype=np.int64), np.full((1, 2), -1, dtype=np.int64)]
    for args, message in [
            ((table, np.array([0, 1, 6]), outs), r"index 2 names row 6, outside the table's 6 "
                                                  r"rows"),
            ((table, np.array([0, -1, 2]), outs), r"index 1 names row -1, outside the table's "
                                                   r"6 rows"),
            ((table, np.array([0, 1]), outs), r"the outs hold 3 rows, the index names 2"),
            ((table, np.array([0, 1, 2]), tuple(outs)), r"outs must be a list of arrays"),
            ((table, np.array([0]), [np.zeros((1, 3), dtype=np.int64)]),
             r"an out's rows differ from the table's"),
            ((table, np.array([0]), [np.zeros((1, 2))]), r"an out's rows differ from the "
                                                         r"table's"),
            ((table, np.array([0]), [table[5:]]), r"an out overlaps the table"),
            ((table, np.array([0]), [[[0, 0]]]), r"an out must be a writable C-contiguous "
                                                  r"array of numbers"),
            ((table, np.array([0.0]), outs[:1]), r"index must be a C-contiguous array of "
                                                 r"int64"),
            ((table.astype(object), np.array([0]), outs[:1]), r"the table must be a "
                                                              r"C-contiguous array of "
                                                              r"numbers")]:
        with pytest.raises(ValueError, match=f"^take_rows: {message}$"):
            take(*args)
    assert [out.tolist() for out in outs] == [[[-1, -1]] * 2, [[-1, -1]]]


@pytest.mark.skipif(_columns.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_puts_rows_as_the_pure_twin_does(seed):
    # rows named in any order, repeated or not, a few outside the table; sources of any
    # number of members, now and then one too many or too few, or a row too many or too few
    rng = np.random.default_rng(seed)
    dtype = [np.uint8, np.int64, np.float32, np.complex64][rng.integers(4)]
    shape = [(), (3,), (2, 5)][rng.integers(3)]
    rows, members = int(rng.integers(0, 12)), int(rng.integers(0, 4))
    index = rng.integers(-1 if rng.random() < 0.1 else 0, rows + (rng.random() < 0.1) or 1,
                         int(rng.integers(0, 30))).astype(np.int64)
    given_members = members + [0, 0, 0, 1, -1][rng.integers(5)] if members else members
    sizes = [len(index) + [0, 0, 0, 0, 0, 1, -1][rng.integers(7)] if len(index) else 0
             for _ in range(given_members)]
    sources = [rng.integers(0, 100, (k,) + shape).astype(dtype) for k in sizes]
    outcomes = []
    for put in (_columns.core.put_rows, _columns._put_rows):
        table = np.full((rows, members) + shape, 7, dtype=dtype)
        try:
            outcomes.append((put(table, index, sources), table.tolist()))
        except ValueError as e:
            outcomes.append((str(e), table.tolist()))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] is None and members:
        expected = np.full((rows, members) + shape, 7, dtype=dtype)
        for i, row in enumerate(index.tolist()):  # in order: a row named twice keeps the last
            for k in range(members):
                expected[row, k] = sources[k][i]
        assert outcomes[0][1] == expected.tolist()


@pytest.mark.parametrize("put", _twins("put_rows"))
def test_put_rows_refuses_what_it_cannot_copy_naming_it_and_copies_nothing(put):
    table = np.full((6, 2, 3), -1, dtype=np.int64)
    good = [np.zeros((2, 3), dtype=np.int64), np.ones((2, 3), dtype=np.int64)]
    for args, message in [
            ((table, np.array([0, 6]), good), r"index 1 names row 6, outside the table's 6 "
                                              r"rows"),
            ((table, np.array([-1, 2]), good), r"index 0 names row -1, outside the table's 6 "
                                               r"rows"),
            ((table, np.array([0]), good), r"a source holds 2 rows, the index names 1"),
            ((table, np.array([0, 1]), good[:1]), r"the table's rows hold 2 members, the "
                                                  r"sources are 1"),
            ((table, np.array([0, 1]), tuple(good)), r"sources must be a list of arrays"),
            ((table, np.array([0, 1]), [good[0], np.zeros((2, 4), dtype=np.int64)]),
             r"a source's rows differ from the table's members"),
            ((table, np.array([0, 1]), [good[0], np.zeros((2, 3))]), r"a source's rows "
                                                                     r"differ from the "
                                                                     r"table's members"),
            ((table, np.array([0, 1]), [good[0], table.reshape(-1)[:6].reshape(2, 3)]),
             r"a source overlaps the table"),
            ((table, np.array([0, 1]), [good[0], [[0, 0, 0]] * 2]), r"a source must be a "
                                                                   r"C-contiguous array of "
                                                                   r"numbers"),
            ((table, np.array([0.0, 1.0]), good), r"index must be a C-contiguous array of "
                                                  r"int64"),
            ((np.zeros(6, dtype=np.int64), np.array([0, 1]), good),
             r"the table must have an axis of members"),
            ((table.astype(object), np.array([0, 1]), good), r"the table must be a writable "
                                                             r"C-contiguous array of numbers")]:
        with pytest.raises(ValueError, match=f"^put_rows: {message}$"):
            put(*args)
    assert (table == -1).all()
    put(table, np.array([3, 1, 3]), [np.arange(9).reshape(3, 3), -np.arange(9).reshape(3, 3)])
    assert table[3].tolist() == [[6, 7, 8], [-6, -7, -8]]  # named twice: the last row
    assert table[1].tolist() == [[3, 4, 5], [-3, -4, -5]]


@pytest.mark.skipif(_columns.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_sets_objects_as_the_pure_twin_does(seed):
    # a column of records put, read and cleared: rows in any order, repeated or not, now and
    # then one outside its array, of another dtype, or sides of other lengths
    rng = np.random.default_rng(seed)
    n_dest, n_src = int(rng.integers(0, 9)), int(rng.integers(0, 9))
    pool = [b"", b"a", b"bc", None, 7, (1, 2), [3]]
    src = np.empty(n_src, dtype=object)
    src[:] = [pool[k] for k in rng.integers(len(pool), size=n_src)]
    if rng.random() < 0.3:
        src = None
    elif rng.random() < 0.3:  # (a chunk's records, as a reader puts them in an array)
        src = src.tolist() if rng.random() < 0.5 else tuple(src.tolist())

    def rows(items, n):
        if rng.random() < 0.3:
            return None
        out = rng.integers(-1 if rng.random() < 0.1 else 0, items + (rng.random() < 0.1) or 1,
                           n).astype(np.int64)
        return out.astype(np.int32) if rng.random() < 0.05 else out

    n = int(rng.integers(0, 9))
    dest_rows = rows(n_dest, n)
    src_rows = rows(n_src, n + (rng.random() < 0.1)) if src is not None or \
        rng.random() < 0.1 else None
    outcomes = []
    for set_objects in (_columns.core.set_objects, _columns._set_objects):
        dest = np.empty(n_dest, dtype=object)
        dest[:] = [b"old%d" % i for i in range(n_dest)]
        try:
            outcomes.append((set_objects(dest, dest_rows, src, src_rows), dest.tolist()))
        except ValueError as e:
            outcomes.append((str(e), dest.tolist()))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("set_objects", _twins("set_objects"))
def test_set_objects_refuses_what_it_cannot_set_naming_it_and_sets_nothing(set_objects):
    dest = np.array([b"x", b"y", b"z"], dtype=object)
    src = np.array([b"a", b"b"], dtype=object)
    for args, message in [
            ((dest, np.array([0, 3]), src, None), r"index 1 names row 3, outside the table's "
                                                  r"3 rows"),
            ((dest, np.array([0, 1]), src, np.array([2, 0])), r"index 0 names row 2, outside "
                                                              r"the table's 2 rows"),
            ((dest, np.array([0]), src, None), r"src names 2 items, dest 1"),
            ((dest, None, src, None), r"src names 2 items, dest 3"),
            ((dest, np.array([0]), None, np.array([0])), r"src_rows without src"),
            ((dest, np.array([0, 1]), dest[1:].copy()[:0], None), r"src names 0 items, dest 2"),
            ((dest, np.array([0, 1]), dest[:2], None), r"src shares dest's memory"),
            ((dest, np.array([0.0]), None, None), r"dest_rows must be a C-contiguous array "
                                                  r"of int64"),
            ((dest, np.array([0, 1]), iter([b"a", b"b"]), None), r"src must be a "
                                                                 r"C-contiguous 1-D array "
                                                                 r"of objects, a list or a "
                                                                 r"tuple"),
            ((dest, np.array([0, 1]), [b"a"], None), r"src names 1 items, dest 2"),
            ((dest[::2], np.array([0]), None, None), r"dest must be a writable C-contiguous "
                                                     r"1-D array of objects"),
            ((np.empty((1, 1), dtype=object), None, [b"a"], None), r"dest must be a "
                                                                   r"writable C-contiguous "
                                                                   r"1-D array of objects"),
            ((b"x", None, [b"a"], None), r"dest must be a writable C-contiguous 1-D array of "
                                         r"objects"),
            ((dest.astype("S1"), np.array([0]), None, None), r"dest must be a writable "
                                                             r"C-contiguous 1-D array of "
                                                             r"objects")]:
        with pytest.raises(ValueError, match=f"^set_objects: {message}$"):
            set_objects(*args)
    assert dest.tolist() == [b"x", b"y", b"z"]
    set_objects(dest, np.array([2, 0, 2]), src[np.array([0, 1, 1])].copy(), None)
    assert dest.tolist() == [b"b", b"y", b"b"]  # named twice: the last
    set_objects(dest, np.array([1]), None, None)
    assert dest.tolist() == [b"b", None, b"b"]


@pytest.mark.parametrize("set_objects", _twins("set_objects"))
@given(st.lists(st.one_of(st.binary(max_size=8), st.none(), st.lists(st.integers(), max_size=2),
                          st.tuples(st.binary())), max_size=20), st.booleans())
@settings(max_examples=100, deadline=None)
def test_set_objects_puts_the_very_objects_of_a_list_in_place(set_objects, items, as_tuple):
    # The same objects where out[:] = items puts bytes (the readers' records and keys); any
    # other object as it is, where NumPy would look into a list or tuple.
    out = np.full(len(items), "old", dtype=object)
    assert set_objects(out, None, tuple(items) if as_tuple else items, None) is None
    assert all(got is item for got, item in zip(out.tolist(), items))
    if all(type(item) is bytes for item in items):
        expected = np.empty(len(items), dtype=object)
        expected[:] = items
        assert out.tolist() == expected.tolist()


@pytest.mark.parametrize("set_objects", _twins("set_objects"))
def test_set_objects_drops_what_it_replaces_after_setting_every_item(set_objects):
    # A finalizer run by an item replaced may change the list given: every item is set first.
    items = [b"a", b"b", b"c"]

    class Clears:
        def __del__(self):
            items.clear()

    out = np.empty(3, dtype=object)
    out[0] = Clears()
    set_objects(out, None, items, None)
    assert out.tolist() == [b"a", b"b", b"c"] and items == []


def test_a_column_of_records_drops_each_one_it_lets_go_of():
    # put, read and cleared by set_objects: no reference kept or lost
    column = _columns.DenseColumn(8, np.dtype(object), ())
    records = [bytes([i]) * 3 for i in range(4)]
    before = [sys.getrefcount(r) for r in records]
    values = np.empty(4, dtype=object)
    values[:] = records
    column.write(np.array([5, 1, 6, 2]), values)
    del values
    taken = column.read(np.array([6, 5]))
    assert taken.tolist() == [records[2], records[0]]
    del taken
    column.clear(np.array([1, 2, 5, 6]))
    assert all(v is None for v in column.data.tolist())
    assert [sys.getrefcount(r) for r in records] == before


def test_a_shuffle_queue_puts_rows_of_several_members_where_its_slots_say():
    # read_batch_features' queue of mnist: images and labels, the labels grouped with the
    # ordinals; what goes in comes out, row for row, through put_rows and take_rows
    q = qp.RandomShuffleQueue(4096, 0, [qp.uint8, qp.int64, qp.int64], shapes=[[784], [], []],
                              seed=3)
    images = np.arange(2048 * 784, dtype=np.int64).astype(np.uint8).reshape(2048, 784)
    labels, ordinals = np.arange(2048), np.arange(2048) * 7
    q.enqueue_many([images[:1000], labels[:1000], ordinals[:1000]])
    q.enqueue_many([images[1000:], labels[1000:], ordinals[1000:]])
    got_images, got_labels, got_ordinals = q.dequeue_many(2048)
    order = np.argsort(got_labels)
    assert got_labels[order].tolist() == labels.tolist()
    assert np.array_equal(got_images[order], images)
    assert got_ordinals[order].tolist() == ordinals.tolist()


@pytest.mark.skipif(_columns.core is None, reason="on the pure path NumPy's take gathers "
                    "rows, which lets go of the GIL for each batch")
def test_batches_of_image_rows_drawn_together_are_read_in_one_call_without_the_gil():
    # read_batch_features' enqueue thread draws a chunk's batches ahead at once: 16 batches
    # of 98 KiB gathered holding the GIL, one call each, were a sixth of its GIL time (mnist)
    def filled():
        q = qp.RandomShuffleQueue(4096, 0, [qp.uint8], shapes=[[784]], seed=7)
        q.enqueue_many([np.arange(2048 * 784, dtype=np.int64).astype(np.uint8)
                        .reshape(2048, 784)])
        return q

    together, alone = filled(), filled()
    taken = []
    overlapped = runs_beside(lambda: taken.append(list(together._take_batches(128, 16))))
    assert overlapped[-1], f"the main thread never ran during the read: {overlapped}"
    expected = [alone._take(128) for _ in range(16 * len(taken))]
    assert [b[0].tolist() for group in taken for b in group] == [b[0].tolist() for b in expected]


def test_batches_drawn_together_gather_each_column_and_group_of_numbers_once(monkeypatch):
    # mnist's queue in read_batch_features: images, labels grouped with the ordinals they are
    # tagged with, and a float scalar alone; a chunk's 16 batches drawn ahead come out as 16
    # takes one after the other would give them, the images and the group each gathered in
    # one call for them all where the core is loaded (the group's call a batch, and the
    # Python around it, held the GIL for nothing); a scalar alone is indexed by NumPy a batch
    # at a time, which costs less than joining the batches' rows for one call
    def filled():
        q = qp.RandomShuffleQueue(4096, 0, [qp.uint8, qp.int64, qp.int64, qp.float32],
                                  shapes=[[784], [], [], []], seed=11)
        n = 2048
        q.enqueue_many([np.arange(n * 784, dtype=np.int64).astype(np.uint8).reshape(n, 784),
                        np.arange(n), np.arange(n) * 3, np.arange(n, dtype=np.float32) / 2])
        return q

    together, alone = filled(), filled()
    calls = []
    take_rows = _columns.take_rows
    monkeypatch.setattr(_columns, "take_rows",
                        lambda *args: calls.append(len(args[2])) or take_rows(*args))
    taken = list(together._take_batches(128, 16))
    gathered = list(calls)
    expected = [alone._take(128) for _ in range(16)]
    assert len(taken) == 16
    for got, want in zip(taken, expected):
        assert [c.dtype for c in got] == [c.dtype for c in want]
        assert [c.tolist() for c in got] == [c.tolist() for c in want]
    if _columns.core is not None:  # the images and the group: one call each
        assert sorted(gathered) == [1, 16], gathered
    assert together.size() == alone.size() == 0


def test_object_batches_read_together_share_one_array_only_where_no_user_sees_them():
    # read_batch_features' serialized records, drawn ahead and parsed by the queue's batch
    # finish: one object array for a group of batches (NumPy makes one of 128 items or more
    # with calloc, letting go of the GIL: a hand-over every batch); batches a dequeue hands
    # out hold no other batch's elements
    records = np.empty(64, dtype=object)
    records[:] = [bytes([i]) * 3 for i in range(64)]
    indices = [np.array([5, 1, 9]), np.array([0, 63]), np.array([7])]
    for shared in (True, False):
        column = _columns.DenseColumn(64, np.dtype(object), ())
        column.data[:] = records
        batches = column.read_batches(indices, shared)
        assert [b.tolist() for b in batches] == [records[i].tolist() for i in indices]
        if shared:
            assert all(b.base is not None and b.base is batches[0].base for b in batches)
        else:
            assert all(b.base is None for b in batches)


@pytest.mark.parametrize("compact", _twins("compact_segments"))
@pytest.mark.parametrize("arena, starts", [
    (np.arange(4.0), __import__("array").array("q", [0])),  # not a NumPy array
    (bytearray(8), np.array([0])),
    (np.zeros(3, dtype=[("Out", "<i8")]), np.array([0])),  # structured: not numbers
    (np.zeros(3, dtype="S2"), np.array([0])),
    (np.zeros(3, dtype="datetime64[s]"), np.array([0])),
    (np.arange(3.0).view(type("Sub", (np.ndarray,), {})), np.array([0])),  # a subclass
])
def test_the_column_functions_take_numpy_arrays_of_numbers_only(compact, arena, starts):
    with pytest.raises(ValueError, match=r"^compact_segments: (the arena must be a writable "
                                         r"C-contiguous array of numbers|starts must be a "
                                         r"C-contiguous array of int64)$"):
        compact(arena, starts, np.array([1]))


@pytest.mark.skipif(_columns.core is None, reason="on the pure path NumPy's take gathers "
                    "rows, which lets go of the GIL")
def test_putting_and_taking_a_batch_of_image_rows_keeps_the_gil():
    # A batch of 128 rows of 784 bytes (98 KiB) put and taken by an index array (the slots of
    # a shuffle queue, the rows of a priority queue): NumPy's take and 2-D fancy indexing let
    # go of the GIL, and a runner thread handed it then blocked on the queue's lock. The
    # core's gather and a scatter by raw items keep it below 128 KiB. (The queues are filled,
    # and their rows allocated, before: a growth copies every row and may let go; and the
    # work makes no array itself: NumPy's arange lets go of the GIL.)
    rows = np.random.default_rng(0).integers(0, 256, (384, 784), dtype=np.uint8)
    shuffled = qp.RandomShuffleQueue(4096, 0, [qp.uint8], shapes=[[784]], seed=0)
    shuffled.enqueue_many([np.zeros((2048, 784), dtype=np.uint8)])
    shuffled.dequeue_many(2048)

    def put_batches():
        for i in range(3):
            shuffled.enqueue_many([rows[128 * i:128 * (i + 1)]])

    assert runs_beside(put_batches) == [False] * 5
    prioritized = qp.PriorityQueue(4096, [qp.uint8], shapes=[[784]])
    prioritized.enqueue_many((np.arange(5 * 384), np.concatenate([rows] * 5)))
    taken = []

    def take_batches():
        for _ in range(3):
            taken.append(prioritized.dequeue_many(128)[1])

    assert runs_beside(take_batches) == [False] * 5
    assert np.array_equal(np.concatenate(taken), np.concatenate([rows] * 5))
    assert shuffled.size() == 5 * 384
    assert {row.tobytes() for row in shuffled.dequeue_many(5 * 384)} == \
        {row.tobytes() for row in rows}


@pytest.mark.skipif(_columns.core is None, reason="on the pure path NumPy's take gathers "
                    "rows, which lets go of the GIL")
def test_a_batch_of_grouped_numbers_taken_by_an_index_array_keeps_the_gil():
    # read_batch_features' label and ordinal side by side (DenseColumns), a batch drawn from
    # the shuffle queue's slots: NumPy's take let go of the GIL for its 2 KiB, a hand-over to
    # the other runner thread every batch
    q = qp.PriorityQueue(4800, [qp.int64, qp.int64], shapes=[[], []])
    q.enqueue_many((np.arange(4800), np.arange(4800), 2 * np.arange(4800)))
    group, = q._groups
    index = np.random.default_rng(0).permutation(4800)[:128]
    taken = []

    def read():
        out = [None] * 3
        group.read(index, out)
        taken.append(out)

    assert runs_beside(read) == [False] * 5
    assert all(out[1].tolist() == index.tolist() and out[2].tolist() == (2 * index).tolist()
               for out in taken)


def test_rows_taken_by_an_index_array_are_numpys_rows():
    rng = np.random.default_rng(1)
    for dtype, shape in [(np.uint8, (784,)), (np.float32, (3, 4)), (np.int64, (2,)),
                         (np.bool_, (5,)), (np.complex64, (1,))]:
        column = _columns.DenseColumn(50, np.dtype(dtype), shape)
        table = column.data
        table[:] = rng.integers(0, 2, (50,) + shape).astype(dtype)
        ways = [column.read, lambda index: _columns._get_rows(table, index)]
        if _columns.core is not None:
            ways.append(lambda index: _columns._taken_rows(table, index))
        for index in (rng.integers(0, 50, 30), np.array([], dtype=np.int64),
                      np.arange(50)[::-2], np.array([49, 49, 0], dtype=np.intp)):
            for way in ways:
                got = way(index)
                assert got.dtype == table.dtype and got.shape == (len(index),) + shape
                assert np.array_equal(got, table[index])
                assert not np.shares_memory(got, table)
    ones = sparse.ones(3000)
    assert ones.dtype == np.int64 and ones.tolist() == [1] * 3000
    assert not ones.flags.writeable and len(sparse.ones(5)) == 5


@pytest.mark.skipif(queues._core_shuffle_in is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_shuffles_slots_in_as_the_pure_twin_does(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 50))
    start = int(rng.integers(0, n + 1))
    k = int(rng.integers(0, n - start + 1))
    slots = rng.permutation(n).astype(np.int64)
    places = rng.choice(start + k, size=k, replace=False).astype(np.int64)
    pure, mine = slots.copy(), slots.copy()
    queues._shuffle_in(pure, start, places)
    queues._core_shuffle_in(mine, start, places)
    assert mine.tolist() == pure.tolist()
    assert sorted(mine.tolist()) == list(range(n))  # (a permutation still)
    assert mine[places].tolist() == slots[start:start + k].tolist()


@pytest.mark.skipif(queues._core_shuffle_in is None, reason="the compiled core is not loaded")
def test_the_core_shuffle_in_refuses_places_it_cannot_take_naming_them():
    slots = np.arange(6, dtype=np.int64)
    for places, message in (([0, 3, 3], r"place 2 \(3\) is given twice"),
                            ([0, -1], r"place 1 \(-1\) is negative"),
                            ([5, 1], r"place 0 \(5\) is past start \+ the number of places")):
        with pytest.raises(ValueError, match=rf"^shuffle_in: {message}$"):
            queues._core_shuffle_in(slots, 3 - (len(places) == 2), np.array(places))
        assert slots.tolist() == list(range(6))  # nothing moved
    with pytest.raises(ValueError, match=r"^shuffle_in: start 5 and 2 places pass the 6 slots$"):
        queues._core_shuffle_in(slots, 5, np.array([0, 1]))
    with pytest.raises(ValueError, match=r"^shuffle_in: slots must be a writable C-contiguous "
                                         r"1-D array of int64$"):
        queues._core_shuffle_in(slots.astype(np.int32), 0, np.array([0]))
    with pytest.raises(ValueError, match=r"^shuffle_in: places overlaps slots$"):
        queues._core_shuffle_in(slots, 0, slots[:2])


@pytest.mark.parametrize("set_objects", _twins("set_objects"))
@pytest.mark.parametrize("n", [0, 1, 127, 128, 5000])
def test_object_array_is_what_set_objects_fills(set_objects, n):
    out = _columns.object_array(n)
    assert type(out) is np.ndarray and out.dtype == object and out.shape == (n,)
    assert out.flags.c_contiguous and out.flags.writeable and out.flags.owndata
    items = [bytes([i % 256]) * 3 for i in range(n)]
    set_objects(out, None, items, None)
    assert all(got is item for got, item in zip(out, items))
