"""queuepipe.sparse: SparseValue's helpers, the Rows queues hold, and stack, split, select."""

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from helpers import runs_beside

import queuepipe as qp
from queuepipe import sparse
from queuepipe.parsing import _sinks
from queuepipe.errors import InvalidArgumentError
from queuepipe.sparse import SparseValue


def ragged(rows, dtype=np.int64):
    """The batched SparseValue of a list of lists, as a VarLenFeature batch parses."""
    indices = [[i, j] for i, row in enumerate(rows) for j in range(len(row))]
    values = np.array([v for row in rows for v in row], dtype=dtype)
    return SparseValue(np.array(indices, dtype=np.int64).reshape(-1, 2), values,
                       np.array([len(rows), max(map(len, rows), default=0)], dtype=np.int64))


def test_to_dense_and_row_lengths():
    batch = ragged([[1, 2, 3], [], [4]])
    assert batch.to_dense().tolist() == [[1, 2, 3], [0, 0, 0], [4, 0, 0]]
    assert batch.to_dense(-1).tolist() == [[1, 2, 3], [-1, -1, -1], [4, -1, -1]]
    assert batch.row_lengths().tolist() == [3, 0, 1]
    words = ragged([[b"a"], [b"b", b"c"]], dtype=object)
    assert words.to_dense(b"").tolist() == [[b"a", b""], [b"b", b"c"]]


def test_stack_gives_tf_batched_indices_values_and_dense_shape():
    items = [SparseValue(np.array([[0], [1]]), np.array([7, 8]), np.array([2])),
             SparseValue(np.array([[0]]), np.array([9]), np.array([1])),
             SparseValue(np.zeros((0, 1), np.int64), np.zeros(0, np.int64), np.array([0]))]
    rows = sparse.stack(items, np.dtype(np.int64), "test")
    assert rows.lengths.tolist() == [2, 1, 0] and rows.shapes.tolist() == [[2], [1], [0]]
    batch = rows.to_sparse()
    assert batch.indices.tolist() == [[0, 0], [0, 1], [1, 0]]
    assert batch.values.tolist() == [7, 8, 9]
    assert batch.dense_shape.tolist() == [3, 2]


def test_stack_keeps_no_indices_for_plain_lists_only():
    # per-element token lists as parse_single_example makes them: a queue then stores and
    # moves no index for them (the same batch comes out: to_sparse makes the indices)
    lists = [SparseValue(np.arange(n, dtype=np.int64)[:, None], np.arange(n) + 10,
                         np.array([n])) for n in (2, 0, 3)]
    rows = sparse.stack(lists, np.dtype(np.int64), "test")
    assert rows.inner is None
    assert rows.to_sparse().indices.tolist() == [[0, 0], [0, 1], [2, 0], [2, 1], [2, 2]]
    shifted = lists[:2] + [SparseValue(np.array([[1], [2], [4]]), np.arange(3), np.array([5]))]
    rows = sparse.stack(shifted, np.dtype(np.int64), "test")
    assert rows.inner is not None and rows.inner[:, 0].tolist() == [0, 1, 1, 2, 4]
    assert rows.to_sparse().indices.tolist() == [[0, 0], [0, 1], [2, 1], [2, 2], [2, 4]]


def test_stack_refuses_elements_of_different_ranks():
    items = [SparseValue(np.array([[0]]), np.array([1]), np.array([1])),
             SparseValue(np.array([[0, 0]]), np.array([1]), np.array([1, 1]))]
    with pytest.raises(InvalidArgumentError, match=r"^comp: cannot batch sparse values of "
                                                   r"ranks \[1, 2\]$"):
        sparse.stack(items, np.dtype(np.int64), "comp")


@pytest.mark.parametrize("rows", [[[1, 2, 3], [], [4]], [[5]], [[], []], [[1, 2], [3, 4]]])
def test_split_undoes_stack(rows):
    batch = ragged(rows)
    elements = list(sparse.split(batch, "test"))
    assert [e.values.tolist() for e in elements] == rows
    assert all(e.dense_shape.tolist() == batch.dense_shape[1:].tolist() for e in elements)
    again = sparse.stack(elements, np.dtype(np.int64), "test").to_sparse()
    assert again.indices.tolist() == batch.indices.tolist()
    assert again.values.tolist() == batch.values.tolist()


def test_split_takes_unsorted_indices_by_row_and_refuses_rows_outside_the_batch():
    batch = SparseValue(np.array([[1, 0], [0, 0], [1, 1]]), np.array([10, 20, 30]),
                        np.array([2, 2]))
    assert [e.values.tolist() for e in sparse.split(batch, "t")] == [[20], [10, 30]]
    with pytest.raises(InvalidArgumentError, match=r"index 2 lies outside its batch of 2"):
        sparse.split(SparseValue(np.array([[2, 0]]), np.array([1]), np.array([2, 1])), "t")
    with pytest.raises(InvalidArgumentError, match=r"index -1 lies outside its batch of 2"):
        sparse.split(SparseValue(np.array([[1, 0], [-1, 0]]), np.array([1, 2]),
                                 np.array([2, 1])), "t")


@pytest.mark.parametrize("columns, plain", [
    ([0, 1, 0, 0, 1, 2], True), ([], True),
    ([1, 2, 0, 0, 1, 2], False),  # the first element starts at 1
    ([0, 1, 1, 0, 1, 2], False),  # the second at 1
    ([0, 2, 0, 0, 1, 2], False),  # a gap
    ([0, 1, 0, 0, 2, 1], False)])  # out of order
def test_split_keeps_no_indices_for_plain_lists_only(columns, plain):
    rows = [0, 0, 1, 2, 2, 2][:len(columns)]
    value = SparseValue(np.array(list(zip(rows, columns)), dtype=np.int64).reshape(-1, 2),
                        np.arange(len(columns), dtype=np.int64), np.array([3, 3]))
    split = sparse.split(value, "x")
    assert (split.inner is None) == plain
    assert split.full_inner()[:, 0].tolist() == columns
    assert [e.indices[:, 0].tolist() for e in split] == \
        [columns[:2], columns[2:3], columns[3:]] if columns else [[], [], []]
    assert split.to_sparse().indices.tolist() == value.indices.tolist()


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 4), pairs=st.lists(st.tuples(st.integers(-1, 4), st.integers(-1, 3)),
                                           max_size=9), sort=st.booleans())
@example(n=2, pairs=[(1, 0), (0, 0)], sort=False)
@example(n=2, pairs=[(1, 0), (0, 1)], sort=False)  # places of lists, rows not
@example(n=2, pairs=[(0, 0), (0, 1), (2, 0)], sort=False)
@example(n=2, pairs=[(0, 1), (1, -1)], sort=False)
def test_split_agrees_with_a_row_by_row_model_on_any_indices(n, pairs, sort):
    """Plain lists (the fast path), lists out of order, and rows or places anywhere: split
    gives each element its values in order of appearance, or refuses a row outside."""
    if sort:
        pairs = sorted(pairs)
    indices = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    value = SparseValue(indices, np.arange(len(pairs), dtype=np.int64), np.array([n, 4]))
    if any(not 0 <= row < n for row, _ in pairs):
        with pytest.raises(InvalidArgumentError, match=r"lies outside its batch of"):
            sparse.split(value, "t")
        return
    rows = sparse.split(value, "t")
    assert rows.lengths.tolist() == [sum(r == i for r, _ in pairs) for i in range(n)]
    for i, element in enumerate(rows):
        mine = [(j, place) for j, (row, place) in enumerate(pairs) if row == i]
        assert element.values.tolist() == [j for j, _ in mine]
        assert element.indices[:, 0].tolist() == [place for _, place in mine]
        assert element.dense_shape.tolist() == [4]
    plain = all(place == k for i in range(n)
                for k, (_, place) in enumerate(p for p in pairs if p[0] == i))
    assert (rows.inner is None) == plain  # (a stable sort by row comes first)


def _outcome(split, value, what):
    """What split(value, what) gives, comparable: the elements' lists, or the error."""
    try:
        rows = split(value, what)
    except InvalidArgumentError as e:
        return str(e)
    return [(e.indices.tolist(), e.values.tolist(), e.dense_shape.tolist()) for e in rows]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 3), batches=st.lists(st.lists(
    st.tuples(st.integers(-1, 4), st.integers(-1, 3)), max_size=6), min_size=1, max_size=4),
    sort=st.booleans())
@example(n=2, batches=[[(0, 0), (2, 0)], [(1, 0)]], sort=False)  # a row reaches the next batch
@example(n=2, batches=[[(0, 0)], [(-1, 0), (1, 0)]], sort=False)  # or the one before
@example(n=2, batches=[[(1, 0), (0, 0)], [(0, 0)]], sort=False)  # rows out of order
@example(n=2, batches=[[(1, -1), (0, 1)], [(0, 0)]], sort=False)  # places that fit if sorted
@example(n=1, batches=[[(0, 0), (0, 1)], [(0, 1)]], sort=False)  # a place not from 0
def test_split_all_agrees_with_split_of_each(n, batches, sort):
    values = []
    for k, pairs in enumerate(batches):
        pairs = sorted(pairs) if sort else pairs
        values.append(SparseValue(np.array(pairs, dtype=np.int64).reshape(-1, 2),
                                  np.arange(len(pairs), dtype=np.int64) + 10 * k,
                                  np.array([n, 3 + k])))
    whats = [f"c{k}" for k in range(len(values))]
    expected = [_outcome(sparse.split, value, what) for value, what in zip(values, whats)]
    errors = [e for e in expected if isinstance(e, str)]
    if errors:
        with pytest.raises(InvalidArgumentError) as raised:
            sparse.split_all(values, whats)
        assert str(raised.value) == errors[0]
        return
    got = sparse.split_all(values, whats)
    assert [[(e.indices.tolist(), e.values.tolist(), e.dense_shape.tolist()) for e in rows]
            for rows in got] == expected
    assert [rows.inner is None for rows in got] == \
        [sparse.split(value, "x").inner is None for value in values]


def test_select_keeps_the_masked_rows_renumbered():
    kept = sparse.select(ragged([[1], [2, 3], [4]]), np.array([True, False, True]))
    assert kept.indices.tolist() == [[0, 0], [1, 0]]
    assert kept.values.tolist() == [1, 4] and kept.dense_shape.tolist() == [2, 2]


def test_as_sparse_checks_the_parts_fit():
    with pytest.raises(InvalidArgumentError, match=r"^c: a sparse value has 2 indices but 1 "
                                                   r"values$"):
        sparse.as_sparse(([[0], [1]], [1], [2]), np.dtype(np.int64), "c")
    value = sparse.as_sparse(([[0]], ["é"], [1]), qp.string, "c")
    assert value.values.tolist() == ["é".encode()]


def test_as_sparse_refuses_what_is_not_three_parts_and_keeps_arrays_that_fit():
    with pytest.raises(InvalidArgumentError, match=r"^c: not a sparse value"):
        sparse.as_sparse(5, np.dtype(np.int64), "c")
    given = SparseValue(np.array([[0]]), np.array([7]), np.array([1]))
    assert sparse.as_sparse(given, np.dtype(np.int64), "c") is given  # the queue copies


@pytest.mark.parametrize("cut", [slice(0, 2), slice(1, 3), slice(2, 2), slice(0, 4)])
def test_rows_slice_concat_and_index_as_lists_do(cut):
    lists = [[1, 2, 3], [], [4], [5, 6]]
    rows = sparse.split(ragged(lists), "t")
    assert [e.values.tolist() for e in rows[cut]] == lists[cut]
    joined = sparse.Rows.concat([rows[:1], rows[1:]])
    assert [e.values.tolist() for e in joined] == lists
    assert rows[-1].values.tolist() == [5, 6]
    with pytest.raises(IndexError):
        rows[4]


@pytest.mark.skipif(sparse.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_makes_list_indices_as_the_pure_twin_does(seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 6, size=rng.integers(0, 12)).astype(np.int64)
    total = int(lengths.sum()) + [0, 0, 0, 1, -1][rng.integers(5)] if len(lengths) else 0
    if len(lengths) and rng.random() < 0.3:  # a broken length
        lengths[rng.integers(len(lengths))] = [-1, -2**63, 2**63 - 1, 7][rng.integers(4)]
    n = int(rng.integers(0, 5)) or len(lengths)
    outcomes = []
    for fill in (sparse.core.list_indices, sparse._fill_list_indices):
        out = np.full((max(total, 0), 2), -9, dtype=np.int64)
        try:
            outcomes.append((fill(lengths, n, out), out.tolist()))
        except ValueError as e:
            outcomes.append((str(e), out.tolist()))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] is None:
        assert outcomes[0][1] == [[j % n, p] for j, k in enumerate(lengths) for p in range(k)]


@pytest.mark.parametrize("which", ["core", "pure"])
def test_the_sparse_table_says_where_each_batchs_lists_lie(which):
    table_of = _sinks.pure_sparse_table if which == "pure" else \
        getattr(sparse.core, "sparse_table", None)
    if table_of is None:
        pytest.skip("the compiled core is not loaded")
    counts = np.array([[1, 0, 2, 3], [0, 4, 1, 1]], dtype=np.int64)  # 2 features, 4 records
    table = np.full((2, 2, 5), -9, dtype=np.int64)  # batches of 2
    table_of(counts, 2, table)
    # per batch and feature: n, longest, begin and end among the batch's indices, first value
    assert table.tolist() == [[[2, 1, 0, 1, 0], [2, 4, 1, 5, 0]],
                              [[2, 3, 0, 5, 1], [2, 1, 5, 7, 4]]]
    empty = np.empty((0, 2, 5), dtype=np.int64)
    table_of(np.empty((2, 0), dtype=np.int64), 0, empty)


@pytest.mark.skipif(sparse.core is None, reason="the compiled core is not loaded")
@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_the_core_makes_the_sparse_table_as_the_pure_twin_does(seed):
    rng = np.random.default_rng(seed)
    features, batch, batches = (int(rng.integers(1, 5)), int(rng.integers(1, 6)),
                                int(rng.integers(0, 4)))
    counts = rng.integers(0, 2**int(rng.integers(1, 40)), size=(features, batch * batches))
    tables = [np.full((batches, features, 5), -9, dtype=np.int64) for _ in range(2)]
    sparse.core.sparse_table(counts, batch, tables[0])
    _sinks.pure_sparse_table(counts, batch, tables[1])
    assert tables[0].tolist() == tables[1].tolist()


@pytest.mark.skipif(sparse.core is None, reason="the compiled core is not loaded")
def test_the_core_sparse_table_refuses_counts_it_cannot_place():
    table = np.zeros((1, 1, 5), dtype=np.int64)
    message = (r"^sparse_table: a count is negative, the records are not batches of n, or the "
               r"table is not \[records / n, features, 5\]$")
    for counts, n, out in ((np.array([[1, -1]]), 2, table),  # negative
                           (np.array([[2**62, 2**62]]), 2, table),  # a sum past INT64_MAX
                           (np.array([[1, 1, 1]]), 2, table),  # not whole batches
                           (np.array([[1, 1]]), 1, table)):  # a table of another size
        with pytest.raises(ValueError, match=message):
            sparse.core.sparse_table(counts, n, out)
    with pytest.raises(ValueError, match=r"^sparse_table: counts and table must be "):
        sparse.core.sparse_table(np.array([1, 1]), 2, table)  # one axis
    with pytest.raises(ValueError, match=r"^sparse_table: counts and table must be "):
        sparse.core.sparse_table(np.array([[1, 1]]), 2, table.astype(np.int32))
    with pytest.raises(ValueError, match=r"^sparse_table: n is -1, negative$"):
        sparse.core.sparse_table(np.array([[1, 1]]), -1, table)


def _fill(which):
    """The core's list_indices ("core", skipping the test where it is not loaded) or its
    pure twin ("pure")."""
    if which == "core" and sparse.core is None:
        pytest.skip("the compiled core is not loaded")
    return sparse.core.list_indices if which == "core" else sparse._fill_list_indices


@pytest.mark.parametrize("fill", ["core", "pure"])
def test_list_indices_refuse_lengths_that_do_not_fit_naming_them(fill):
    fill = _fill(fill)
    out = np.zeros((3, 2), dtype=np.int64)
    with pytest.raises(ValueError, match=r"^list_indices: list 1 has a negative length \(-1\)$"):
        fill(np.array([1, -1, 3]), 2, out)
    with pytest.raises(ValueError, match=r"^list_indices: the lengths do not add up to the 3 "
                                         r"rows of out$"):
        fill(np.array([1, 1]), 2, out)
    with pytest.raises(ValueError, match=r"^list_indices: out must be a writable C-contiguous "
                                         r"int64 array of \[total, 2\]$"):
        fill(np.array([3]), 1, np.zeros((3, 3), dtype=np.int64))
    assert out.tolist() == [[0, 0]] * 3
    fill(np.array([2, 0, 1]), 2, out)
    assert out.tolist() == [[0, 0], [0, 1], [0, 0]]


@pytest.mark.parametrize("fill", ["core", "pure"])
def test_list_indices_read_n_first_and_as_an_index(fill):
    fill = _fill(fill)
    out = np.zeros((3, 2), dtype=np.int64)
    for n, error, message in [(2.0, TypeError, "'float' object cannot be interpreted as an "
                                                "integer"),
                              (None, TypeError, "'NoneType' object cannot be interpreted as an "
                                                "integer"),
                              (2**70, OverflowError, "Python int too large to convert to C "
                                                     "ssize_t")]:
        with pytest.raises(error, match=f"^{message}$"):
            fill(np.array([1.5]), n, out)  # (lengths refused too: n is read first)
    assert out.tolist() == [[0, 0]] * 3


@pytest.mark.parametrize("fill", ["core", "pure"])
def test_list_indices_read_lengths_before_writing_out_they_share(fill):
    fill = _fill(fill)
    out = np.full((3, 2), -7, dtype=np.int64)
    out[0] = [1, 2]
    fill(out[0], 2, out)
    assert out.tolist() == [[0, 0], [1, 0], [1, 1]]


@pytest.mark.parametrize("fill", ["core", "pure"])
def test_list_indices_fill_a_list_of_outs_share_by_share(fill):
    # read_batch_features' parse of the batches drawn ahead: every batch's indices, each
    # feature's lists one after the other, into an array per batch, in one call
    fill = _fill(fill)
    rng = np.random.default_rng(3)
    for shares, n, features in [(1, 4, 1), (3, 4, 2), (5, 1, 3), (2, 128, 1)]:
        lengths = rng.integers(0, 6, shares * features * n).astype(np.int64)
        by_share = lengths.reshape(shares, -1)
        outs = [np.full((int(part.sum()), 2), -1, dtype=np.int64) for part in by_share]
        fill(lengths, n, outs)
        for part, out in zip(by_share, outs):
            expected = np.empty_like(out)
            fill(np.ascontiguousarray(part), n, expected)
            assert out.tolist() == expected.tolist()
    fill(np.array([], dtype=np.int64), 3, [])  # no batch, no out


@pytest.mark.parametrize("fill", ["core", "pure"])
def test_list_indices_refuse_shares_that_do_not_fit_naming_them(fill):
    fill = _fill(fill)
    outs = [np.full((2, 2), -1, dtype=np.int64), np.full((3, 2), -1, dtype=np.int64)]
    for lengths, n, message in [
            ([1, 1, 2, -1], 2, r"list 3 has a negative length \(-1\)"),
            ([1, 1, 2, 2], 2, r"the lengths of share 1 do not add up to the 3 rows of its out"),
            ([1, 1, 1], 1, r"3 lists are not 2 equal shares of whole batches of 1"),
            ([1, 1, 2, 1], 4, r"4 lists are not 2 equal shares of whole batches of 4")]:
        with pytest.raises(ValueError, match=f"^list_indices: {message}$"):
            fill(np.array(lengths, dtype=np.int64), n, outs)
    assert outs[1].tolist() == [[-1, -1]] * 3  # a share refused is not written
    with pytest.raises(ValueError, match=r"^list_indices: out must be a writable C-contiguous "
                                         r"int64 array of \[total, 2\]$"):
        fill(np.array([1, 1], dtype=np.int64), 1, [outs[0][:1], outs[1][:1].astype(np.int32)])
    with pytest.raises(ValueError, match=r"^list_indices: 2 lists are not 0 equal shares of "
                                         r"whole batches of 1$"):
        fill(np.array([1, 1], dtype=np.int64), 1, [])


@pytest.mark.skipif(sparse.core is None, reason="the pure twin makes its indices with NumPy, "
                    "which lets go of the GIL")
def test_list_indices_let_go_of_the_gil_once_for_a_long_list_of_outs():
    lengths = np.full(16 * 128, 132, dtype=np.int64)  # 16 batches of 128 token lists
    outs = [np.empty((128 * 132, 2), dtype=np.int64) for _ in range(16)]
    overlapped = runs_beside(lambda: sparse.core.list_indices(lengths, 128, outs))
    assert overlapped[-1], f"the main thread never ran during the call: {overlapped}"
    assert all(out[-1].tolist() == [127, 131] for out in outs)


def test_zeroed_arrays_are_new_writable_zeros_made_holding_the_gil():
    first, second = sparse.zeroed(4096), sparse.zeroed(4096)
    assert first.dtype == np.int64 and first.shape == (4096,) and not first.any()
    first[0] = 7
    assert second[0] == 0 and sparse.zeroed(0).shape == (0,)
    # np.zeros of 1 KiB or more lets go of the GIL to calloc; a runner thread's chunk
    # bookkeeping then hands it over
    assert runs_beside(lambda: [sparse.zeroed(1 << 16) for _ in range(200)]) == [False] * 5


@pytest.mark.skipif(sparse.core is None, reason="the compiled core is not loaded")
def test_a_batch_of_token_lists_gets_its_indices_holding_the_gil():
    # 128 lists of about 130 values (270 KiB of indices, some 20 us): letting go of the GIL
    # for so little costs more hand-overs than it lets another thread run
    lengths = np.full(128, 130, dtype=np.int64)
    out = np.empty((128 * 130, 2), dtype=np.int64)
    assert runs_beside(lambda: [sparse.fill_list_indices(lengths, 128, out)
                                for _ in range(20)]) == [False] * 5
    assert out[-1].tolist() == [127, 129]
