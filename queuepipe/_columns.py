"""Where a queue keeps its elements: one column per component, of the kind its values need.

A queue decides which elements go where (a ring, a shuffled pool, a heap) and addresses them by
row; a column stores one component's values in those rows and knows nothing of order or
blocking. Every method runs with the queue's lock held. A batch moves between queue and column
as a *raw* batch: what the column's ``read`` returns and ``write`` takes (an array with a
leading axis, or :class:`~queuepipe.sparse.Rows`); ``finish`` turns it into what the user sees.

=================  ==================================  =======================================
column             holds                               a batch of n elements is
=================  ==================================  =======================================
DenseColumn        fixed-shape values: one row each    a slice (or gathered rows) of the array
                   of a ``(rows, *shape)`` array
ObjectColumn       values of unknown shape, one        stacked at dequeue (PaddedColumn pads
                   object per row                      the free dimensions instead)
SparseColumn       SparseValues: values and indices    a gather of n segments of the arena;
                   in one growing arena; per row a     with every sparse component's at once
                   (start, length, dense_shape) in     (one index for all, a take per arena)
                   its SparseColumns' shared tables
=================  ==================================  =======================================

Components move in groups where they can: the fixed-shape ones of one dtype and row shape
share one ``(rows, K, *shape)`` table (:class:`DenseColumns`), and a queue's sparse ones
keep their rows in shared tables (:class:`SparseColumns`), so that a batch of a wide schema
costs a few NumPy calls per group and a take per sparse arena, not a dozen per component. A
group's members (:class:`DenseMember`, :class:`SparseColumn`) serve single elements.
"""

from __future__ import annotations

import copy
import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import sparse
from queuepipe._core import core
from queuepipe.errors import InvalidArgumentError
from queuepipe.sparse import SparseValue

__all__ = ["DenseColumn", "DenseColumns", "DenseMember", "ObjectColumn", "PaddedColumn",
           "SparseColumns", "SparseColumn", "concat"]

# Copies in and out of a column below this many bytes keep the GIL (see _assign and
# _taken_rows; the core's column functions keep it as far, QP_GIL_FREE_COLUMN_BYTES): 128
# KiB, above a batch of 128 rows of 784 bytes. A queue copies holding its lock, which a thread
# handed the GIL meanwhile would block on.
_KEEP_GIL_BYTES = 1 << 17

# The fewest values a sparse column's arena holds once it holds any.
_MIN_ARENA = 4096


def concat(parts: Sequence[Any]) -> Any:
    """The raw batches ``parts`` of one column, one after another."""
    if isinstance(parts[0], sparse.Rows):
        return sparse.Rows.concat(parts)
    return np.concatenate(parts)


def _assign(column: np.ndarray, index: Any, values: Any) -> None:
    """``column[index] = values`` for an int or slice ``index``; a copy of a matching
    contiguous array of fewer than ``_KEEP_GIL_BYTES`` is a plain memcpy that keeps the GIL
    (an empty one is assigned by NumPy: a memoryview cannot cast a zero-size array).

    NumPy releases the GIL to copy a few hundred elements or more; with several producer
    threads each release hands the GIL to another thread and costs a thread switch (two
    producers of 784-byte rows: about one switch per element put alone, or per group of
    them). A memoryview copy keeps it. Larger copies still release it, so that other threads
    run meanwhile.
    """
    target = column[index]
    if type(target) is np.ndarray and type(values) is np.ndarray \
            and values.dtype == column.dtype and values.shape == target.shape \
            and 0 < values.nbytes < _KEEP_GIL_BYTES and column.dtype.kind in "biufc" \
            and values.flags.c_contiguous:
        target.data.cast("B")[:] = values.data.cast("B")
    else:
        column[index] = values


def _as_items(array: np.ndarray, n: int) -> Optional[np.ndarray]:
    """``array``'s rows as a 1-D array of one raw item each (a view), when ``n`` of its rows
    are fewer than ``_KEEP_GIL_BYTES`` of numbers and it is C-contiguous; else None.

    NumPy's fancy indexing and ``take`` of a 2-D array let go of the GIL, where indexing a
    1-D array keeps it: a batch gathered from rows spread over a column (and a group's rows
    scattered to them) by its raw items does not hand the GIL to another thread."""
    row_items = math.prod(array.shape[1:])
    if array.dtype.kind not in "biufc" or not 0 < n * row_items * array.itemsize \
            < _KEEP_GIL_BYTES or not array.flags.c_contiguous:
        return None
    rows = array.reshape(len(array), row_items)  # (a view: one row of items each)
    return rows.view(np.dtype((np.void, row_items * array.itemsize))).reshape(-1)


def _scatter(column: np.ndarray, index: np.ndarray, values: Any) -> bool:
    """``column[index] = values`` by raw items, for an index array and a matching array of
    rows (see :func:`_as_items`); False, with nothing written, when they do not fit that."""
    if type(values) is not np.ndarray or values.dtype != column.dtype \
            or values.shape != (len(index),) + column.shape[1:]:
        return False
    rows, items = _as_items(column, len(index)), _as_items(values, len(index))
    if rows is None or items is None:
        return False
    rows[index] = items
    return True


def _get_rows(table: np.ndarray, index: Any) -> np.ndarray:
    """``table[index]`` in a new array, for a slice or an index array ``index``, keeping the
    GIL where the rows are few: a slice by raw items (see :func:`_as_items`), an index array
    by the core (:func:`_taken_rows`), or on the pure path by raw items too."""
    if isinstance(index, slice):
        taken = table[index]
        items = _as_items(taken, len(taken))
        return taken.copy() if items is None else \
            items.copy().view(table.dtype).reshape(taken.shape)
    if core is not None and _numbers(table):
        return _taken_rows(table, index)
    items = _as_items(table, len(index))
    if items is None:
        return table.take(index, axis=0)  # (about half the time of fancy indexing)
    return items[index].view(table.dtype).reshape((len(index),) + table.shape[1:])


def _set_rows(table: np.ndarray, index: Any, values: np.ndarray) -> None:
    """``table[index] = values`` for a slice or an index array ``index``; by raw items,
    keeping the GIL, where the rows are few (see :func:`_assign`, :func:`_scatter`)."""
    if isinstance(index, slice):
        _assign(table, index, values)
    elif not _scatter(table, index, values):
        table[index] = values


def _rows(index: Any, rows: int) -> np.ndarray:
    """The rows an int, slice or index array names, as an index array."""
    if isinstance(index, slice):
        return np.arange(*index.indices(rows))
    return np.atleast_1d(index)


def _compact_segments(arena: Any, starts: Any, lengths: Any) -> int:
    """Moves the segments of ``arena`` (along its first axis) that start at ``starts`` and
    hold ``lengths`` rows (int64 arrays, in increasing order of start, not overlapping) to
    its front, one after the other, in place; returns the rows they fill. The pure twin of
    the core's ``compact_segments``, which moves them with no array made.

    Raises:
      ValueError: a segment is not so (nothing is moved), or an argument is not an array of
        the kind named.
    """
    if not _numbers(arena) or not arena.flags.writeable:
        raise ValueError("compact_segments: the arena must be a writable C-contiguous array "
                         "of numbers")
    _check_int64("compact_segments", starts=starts, lengths=lengths)
    starts, lengths = starts.reshape(-1), lengths.reshape(-1)
    if len(starts) != len(lengths):
        raise ValueError(f"compact_segments: {len(starts)} starts but {len(lengths)} lengths")
    if not len(starts):
        return 0
    rows = len(arena)
    negative = (starts < 0) | (lengths < 0)
    order = np.zeros(len(starts), dtype=bool)
    order[1:] = starts[1:] < starts[:-1] + lengths[:-1]
    past = (starts > rows) | (lengths > rows - starts)
    bad = np.flatnonzero(negative | order | past)
    if len(bad):
        i = int(bad[0])
        reason = "has a negative start or length" if negative[i] else \
            "begins before the end of the segment before it" if order[i] else \
            "ends past the arena's end"
        raise ValueError(f"compact_segments: segment {i} (start {starts[i]}, length "
                         f"{lengths[i]}) {reason}")
    gather = sparse.segments(starts, lengths)
    arena[:len(gather)] = arena[gather]
    return len(gather)


compact_segments = core.compact_segments if core is not None else _compact_segments


def _gather_segments(arena: Any, starts: Any, lengths: Any, out: Any) -> None:
    """Copies the segments of ``arena`` (along its first axis) that start at ``starts`` and
    hold ``lengths`` rows (int64 arrays) one after the other into ``out``, an array of rows
    like the arena's that the segments fill exactly. The pure twin of the core's
    ``gather_segments``, which copies them with no index array made.

    Raises:
      ValueError: a segment lies outside the arena or ``out`` is not of their size (nothing
        is copied), or an argument is not an array of the kind named.
    """
    if not _numbers(arena):
        raise ValueError("gather_segments: the arena must be a C-contiguous array of numbers")
    _check_int64("gather_segments", starts=starts, lengths=lengths)
    if not _numbers(out) or not out.flags.writeable:
        raise ValueError("gather_segments: out must be a writable C-contiguous array of numbers")
    starts, lengths = starts.reshape(-1), lengths.reshape(-1)
    if len(starts) != len(lengths):
        raise ValueError(f"gather_segments: {len(starts)} starts but {len(lengths)} lengths")
    if arena.shape[1:] != out.shape[1:] or arena.data.format != out.data.format:
        raise ValueError("gather_segments: out's rows differ from the arena's")
    if np.may_share_memory(arena, out):  # (the bounds of both: C-contiguous, exact)
        raise ValueError("gather_segments: out overlaps the arena")
    rows = len(arena)
    if not len(starts) and not len(out) or len(starts) and (
            starts.min() >= 0 and lengths.min() >= 0 and starts.max() <= rows
            and lengths.max() <= rows and (starts + lengths).max() <= rows
            and lengths.sum() == len(out)):  # (no sum overflows)
        # (every index checked: "raise" would copy through a buffer)
        np.take(arena, sparse.segments(starts, lengths), axis=0, out=out, mode="clip")
        return
    negative = (starts < 0) | (lengths < 0)
    bad = np.flatnonzero(negative | (starts > rows) | (lengths > rows - starts))
    first_bad = int(bad[0]) if len(bad) else len(starts)
    filled = lengths[:first_bad].cumsum()
    over = np.flatnonzero(filled > len(out))
    if len(over) or (first_bad == len(starts) and (filled[-1] if len(filled) else 0)
                     != len(out)):
        raise ValueError(f"gather_segments: the segments do not hold the {len(out)} rows "
                         f"of out")
    if first_bad < len(starts):
        reason = "has a negative start or length" if negative[first_bad] else \
            "ends past the arena's end"
        raise ValueError(f"gather_segments: segment {first_bad} (start {starts[first_bad]}, "
                         f"length {lengths[first_bad]}) {reason}")
    np.take(arena, sparse.segments(starts, lengths), axis=0, out=out, mode="clip")


def _numbers(array: Any) -> bool:
    """Whether ``array`` is what the core's column functions take as an arena or an output:
    a C-contiguous NumPy array of at least one axis whose items are numbers (dtype kinds b,
    i, u, f and c: one type code in the buffer protocol)."""
    return type(array) is np.ndarray and array.ndim > 0 and array.dtype.kind in "biufc" \
        and array.flags.c_contiguous


def _int64(index: Any) -> bool:
    """Whether ``index`` is what the core's column functions take as rows: a C-contiguous
    NumPy array of int64."""
    return type(index) is np.ndarray and index.dtype == np.int64 and index.flags.c_contiguous


def _check_int64(function: str, **arrays: Any) -> None:
    """Raises ValueError, as the core does, for an argument that is not a C-contiguous
    int64 array."""
    for name, given in arrays.items():
        if not _int64(given):
            raise ValueError(f"{function}: {name} must be a C-contiguous array of int64")


gather_segments = core.gather_segments if core is not None else _gather_segments


def _gathered(arena: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
              total: int) -> np.ndarray:
    """The rows of ``arena``'s segments (``total`` in all), one after the other, in a new
    array; Python objects by NumPy, which counts their references."""
    if arena.dtype.kind == "O":
        return arena.take(sparse.segments(starts, lengths), axis=0)
    out = np.empty((total,) + arena.shape[1:], dtype=arena.dtype)
    gather_segments(arena, starts, lengths, out)
    return out


def _take_rows(table: Any, index: Any, outs: Any) -> None:
    """Copies the rows of ``table`` (along its first axis) that ``index`` (an int64 array)
    names, in its order, into ``outs``: a list of arrays of rows like the table's, filled one
    after the other, each with as many as it has rows, all of them with exactly the index's.
    The pure twin of the core's ``take_rows``, which lets go of the GIL once for them all.

    Raises:
      ValueError: a row lies outside the table, the outs hold another number of rows or one
        overlaps the table (nothing is copied), or an argument is not of the kind named.
    """
    if not _numbers(table):
        raise ValueError("take_rows: the table must be a C-contiguous array of numbers")
    _check_int64("take_rows", index=index)
    if type(outs) is not list:
        raise ValueError("take_rows: outs must be a list of arrays")
    for out in outs:
        if not _numbers(out) or not out.flags.writeable:
            raise ValueError("take_rows: an out must be a writable C-contiguous array of "
                             "numbers")
        if table.shape[1:] != out.shape[1:] or table.data.format != out.data.format:
            raise ValueError("take_rows: an out's rows differ from the table's")
        if np.may_share_memory(table, out):
            raise ValueError("take_rows: an out overlaps the table")
    index = index.reshape(-1)
    held = sum(len(out) for out in outs)
    if held != len(index):
        raise ValueError(f"take_rows: the outs hold {held} rows, the index names {len(index)}")
    outside = np.flatnonzero((index < 0) | (index >= len(table)))
    if len(outside):
        raise ValueError(f"take_rows: index {outside[0]} names row {index[outside[0]]}, "
                         f"outside the table's {len(table)} rows")
    start = 0
    for out in outs:
        np.take(table, index[start:start + len(out)], axis=0, out=out)
        start += len(out)


take_rows = core.take_rows if core is not None else _take_rows


def object_array(n: int) -> np.ndarray:
    """A 1-D object array of ``n`` items, for the caller to set every one of (each holds the
    int 0 until then). NumPy makes an object array of 128 items or more with ``calloc`` and
    lets go of the GIL around it: with another thread waiting, a hand-over each time (tokens:
    about 3 every chunk of 2,048 records, of 13.5 let-gos in all: ``benchmarks/gil_trace.py
    --sites``). Resizing an array of one item keeps the GIL."""
    out = np.empty(1, dtype=object)
    out.resize(n, refcheck=False)
    return out


def _objects(array: Any, writable: bool = False) -> bool:
    """Whether ``array`` is what ``set_objects`` takes: a C-contiguous 1-D NumPy array of
    Python objects (writable if asked)."""
    return type(array) is np.ndarray and array.ndim == 1 and array.dtype == object \
        and array.flags.c_contiguous and (array.flags.writeable or not writable)


def _objects_rows(rows: Any, items: int, name: str) -> Optional[np.ndarray]:
    """``rows`` checked as ``set_objects`` checks them against an array of ``items``."""
    if rows is None:
        return None
    _check_int64("set_objects", **{name: rows})
    rows = rows.reshape(-1)
    outside = np.flatnonzero((rows < 0) | (rows >= items))
    if len(outside):
        raise ValueError(f"set_objects: index {outside[0]} names row {rows[outside[0]]}, "
                         f"outside the table's {items} rows")
    return rows


def _set_objects(dest: Any, dest_rows: Any, src: Any, src_rows: Any) -> None:
    """``dest[dest_rows] = src[src_rows]`` for C-contiguous 1-D object arrays, a row named
    twice in ``dest`` keeping the last (``src`` also a list or a tuple, each item as it is,
    where ``out[:] = items`` looks into each for a sequence; or None: None each; rows None:
    every item of their side, in order). The pure twin of the core's ``set_objects``, a
    loop of references where NumPy's fancy indexing looks at each item (a queue's column of
    records put, read and cleared: a sixth of what held the GIL on tokens).

    Raises:
      ValueError: a row lies outside its array, the sides name other numbers of items or
        ``src`` shares ``dest``'s memory (nothing is set), or an argument is not of the
        kind named.
    """
    if not _objects(dest, writable=True):
        raise ValueError("set_objects: dest must be a writable C-contiguous 1-D array of "
                         "objects")
    if type(src) in (list, tuple):
        items = np.empty(len(src), dtype=object)
        for j, item in enumerate(src):
            items[j] = item  # (one item: NumPy keeps it as it is)
        src = items
    elif src is not None and not _objects(src):
        raise ValueError("set_objects: src must be a C-contiguous 1-D array of objects, a "
                         "list or a tuple")
    if src is None and src_rows is not None:
        raise ValueError("set_objects: src_rows without src")
    to = _objects_rows(dest_rows, len(dest), "dest_rows")
    taken = _objects_rows(src_rows, 0 if src is None else len(src), "src_rows")
    n = len(dest) if to is None else len(to)
    values: Any = None
    if src is not None:
        values = src if taken is None else src[taken]
        if len(values) != n:
            raise ValueError(f"set_objects: src names {len(values)} items, dest {n}")
        if np.may_share_memory(dest, src):
            raise ValueError("set_objects: src shares dest's memory")
    dest[slice(None) if to is None else to] = values


set_objects = core.set_objects if core is not None else _set_objects


def _put_rows(table: Any, index: Any, sources: Any) -> None:
    """Copies row ``i`` of ``sources[k]`` (a list of arrays of rows like the table's members,
    each with exactly the index's rows) to member ``k`` of the table's row ``index[i]`` (an
    int64 array), for a table of members side by side, ``(rows, K, ...)``; a row named twice
    keeps the last. The pure twin of the core's ``put_rows``, which lets go of the GIL for
    128 KiB or more, where NumPy's stack and fancy assignment let go of it three times.

    Raises:
      ValueError: a row lies outside the table, the sources are of another number or size
        or one overlaps the table (nothing is copied), or an argument is not of the kind
        named.
    """
    if not _numbers(table) or not table.flags.writeable:
        raise ValueError("put_rows: the table must be a writable C-contiguous array of numbers")
    _check_int64("put_rows", index=index)
    if table.ndim < 2:
        raise ValueError("put_rows: the table must have an axis of members")
    if type(sources) is not list:
        raise ValueError("put_rows: sources must be a list of arrays")
    if len(sources) != table.shape[1]:
        raise ValueError(f"put_rows: the table's rows hold {table.shape[1]} members, the "
                         f"sources are {len(sources)}")
    index = index.reshape(-1)
    for source in sources:
        if not _numbers(source):
            raise ValueError("put_rows: a source must be a C-contiguous array of numbers")
        if source.shape[1:] != table.shape[2:] or source.data.format != table.data.format:
            raise ValueError("put_rows: a source's rows differ from the table's members")
        if len(source) != len(index):
            raise ValueError(f"put_rows: a source holds {len(source)} rows, the index names "
                             f"{len(index)}")
        if np.may_share_memory(table, source):
            raise ValueError("put_rows: a source overlaps the table")
    outside = np.flatnonzero((index < 0) | (index >= len(table)))
    if len(outside):
        raise ValueError(f"put_rows: index {outside[0]} names row {index[outside[0]]}, "
                         f"outside the table's {len(table)} rows")
    if sources:
        table[index] = np.stack(sources, axis=1)


put_rows = core.put_rows if core is not None else _put_rows


def _put(table: np.ndarray, index: Any, sources: List[Any]) -> bool:
    """``table[index] = np.stack(sources, axis=1)`` for an index array (a shuffle queue's
    put), by the core's ``put_rows``: no stacked copy, and the GIL let go once from 128 KiB
    on, where NumPy's stack and fancy assignment let go of it three times, each a hand-over
    to another thread. True when done; False, with nothing written, on the pure path or for
    sources it does not take (another dtype, not C-contiguous, sharing the table's memory:
    NumPy's own check of that lets go of the GIL too), which NumPy then writes."""
    if core is None or type(index) is not np.ndarray or not all(
            _numbers(source) and source.dtype == table.dtype for source in sources):
        return False
    try:
        put_rows(table, np.ascontiguousarray(index, dtype=np.int64), sources)
    except ValueError:
        return False
    return True


def _taken_rows(table: np.ndarray, index: Any) -> np.ndarray:
    """``table[index]`` for an integer index array of rows in the table, by the core's
    ``take_rows``: a copy per row, keeping the GIL below ``QP_GIL_FREE_COLUMN_BYTES`` (128
    KiB), where NumPy's ``take`` lets go of it and fancy indexing by raw items runs at half
    its speed. A queue gathers its batches holding its lock: a thread handed the GIL
    meanwhile that puts or takes blocks on the lock and hands it back."""
    return _rows_of_batches(table, [index])[0]


def _rows_of_batches(table: np.ndarray, indices: Sequence[Any]) -> List[np.ndarray]:
    """``[table[index] for index in indices]``, integer index arrays of rows in the table, in
    one call of the core's ``take_rows``: batches drawn together (a group of 98 KiB batches
    of mnist's images: 1.6 MB) let go of the GIL once, where a call each kept it."""
    outs = [np.empty((len(index),) + table.shape[1:], dtype=table.dtype) for index in indices]
    take_rows(table, _joined(indices), outs)
    return outs


def _joined(indices: Sequence[Any]) -> np.ndarray:
    """The index arrays one after the other, int64, copied a batch at a time (NumPy's
    concatenate lets go of the GIL from 500 items on)."""
    if len(indices) == 1:
        return np.ascontiguousarray(indices[0], dtype=np.int64)
    joined = np.empty(sum(len(index) for index in indices), dtype=np.int64)
    start = 0
    for index in indices:
        joined[start:start + len(index)] = index
        start += len(index)
    return joined


def _pieces(taken: np.ndarray, indices: Sequence[Any]) -> List[np.ndarray]:
    """``taken`` (what ``indices`` name, one after the other) cut into a view for each."""
    ends = np.cumsum([len(index) for index in indices]).tolist()
    return [taken[end - len(index):end] for index, end in zip(indices, ends)]


class DenseColumn:
    """A component of fully defined shape: row ``r`` of a ``(rows, *shape)`` array."""

    grouped = False  # stored and moved by itself (a group moves its members' batches)

    def __init__(self, rows: int, dtype: np.dtype, shape: Tuple[int, ...]) -> None:
        self.data = np.empty((rows,) + shape, dtype=dtype)

    def resized(self, rows: int, keep: Any) -> "DenseColumn":
        """A column of ``rows`` rows holding rows ``keep`` (slice or index array) first."""
        grown = copy.copy(self)
        grown.data = np.empty((rows,) + self.data.shape[1:], dtype=self.data.dtype)
        kept = self.data[keep]
        grown.data[:len(kept)] = kept
        return grown

    def write(self, index: Any, values: Any) -> None:
        if isinstance(index, slice):
            _assign(self.data, index, values)
        elif _objects(self.data) and _objects(values) and _int64(index):
            set_objects(self.data, index, values, None)
        elif _put(self.data.reshape((len(self.data), 1) + self.data.shape[1:]), index,
                  [values]):
            return
        elif self.data.ndim == 1 or not _scatter(self.data, index, values):
            self.data[index] = values  # (the pure path's scalars: NumPy lets go of the GIL)

    def write_one(self, row: int, value: Any) -> None:
        _assign(self.data, row, value)

    def read(self, index: Any) -> np.ndarray:
        if isinstance(index, slice):
            return self.data[index].copy()
        if _objects(self.data) and _int64(index):
            out = object_array(len(index))
            set_objects(out, None, self.data, index)
            return out
        if self.data.ndim == 1:  # scalars: NumPy's take lets go of the GIL, indexing not
            return self.data[index]
        return _get_rows(self.data, index)

    def read_batches(self, indices: Sequence[Any], shared: bool = False) -> List[np.ndarray]:
        """``[self.read(index) for index in indices]``, index arrays: rows of several numbers
        each (an image's) in one call for all the batches where the core is loaded
        (:func:`_rows_of_batches`). With ``shared``, for batches that reach no user (a queue's
        batch finish parses them), a column of objects gives views of one array for them
        all: NumPy makes an object array of 128 items or more with ``calloc``, letting go of
        the GIL (a hand-over to another thread each batch)."""
        if core is not None and self.data.ndim > 1 and _numbers(self.data):
            return _rows_of_batches(self.data, indices)
        if shared and _objects(self.data) and len(indices) > 1:
            joined = _joined(indices)
            taken = object_array(len(joined))
            set_objects(taken, None, self.data, joined)
            return _pieces(taken, indices)
        return [self.read(index) for index in indices]

    def read_one(self, row: int) -> Any:
        value = self.data[row]
        return value.copy() if self.data.ndim > 1 else value

    def clear(self, index: Any) -> None:
        if _objects(self.data) and _int64(index):  # drop the references: memory can be freed
            set_objects(self.data, index, None, None)
        elif self.data.dtype == object:
            self.data[index] = None

    def stack(self, values: Sequence[Any]) -> np.ndarray:
        """Elements checked by the queue (the column's dtype and row shape) as a raw batch.

        Numeric rows are joined as bytes (a staged array's bytes, or an array's or a NumPy
        scalar's buffer, holds its values in the column's layout): ``np.array`` copies row by row and releases the GIL
        for each row of a few hundred elements, a thread switch per element when several
        producers run. A value that is not C-contiguous has no such buffer and makes it take
        ``np.array``.
        """
        data = self.data
        if data.dtype.kind == "O":
            out = np.empty((len(values),) + data.shape[1:], dtype=object)
            for j, value in enumerate(values):
                out[j] = value
            return out
        try:
            joined = b"".join(values)
        except TypeError:
            return np.array(values, dtype=data.dtype)
        return np.frombuffer(joined, dtype=data.dtype).reshape((len(values),) + data.shape[1:])

    def finish(self, raw: np.ndarray) -> np.ndarray:
        """A raw batch as the user sees it."""
        return raw


class DenseColumns:
    """Fixed-shape components of one dtype and row shape, side by side in one
    ``(rows, K, *shape)`` table: a batch of rows goes in with one copy for all of them and
    leaves with one ``take`` and one copy (each component's batch is a contiguous slice of
    that copy), where one column each costs a call per component, and a shuffle queue's
    scattered rows a cache miss per component and row (a wide schema's hundred scalar
    features: int64, float and bytes).
    """

    def __init__(self, rows: int, dtype: np.dtype, shape: Tuple[int, ...]) -> None:
        self.data = np.empty((rows, 0) + shape, dtype=dtype)
        self.components: List[int] = []

    def add(self, component: int) -> "DenseMember":
        """A member for the queue's component ``component``; before any row is stored."""
        self.components.append(component)
        rows, _, *shape = self.data.shape
        self.data = np.empty((rows, len(self.components), *shape), dtype=self.data.dtype)
        return DenseMember(self, len(self.components) - 1)

    def resize(self, rows: int, keep: Any) -> None:
        """``rows`` rows, holding rows ``keep`` (slice or index array) first."""
        grown = np.empty((rows,) + self.data.shape[1:], dtype=self.data.dtype)
        kept = self.data[keep]
        grown[:len(kept)] = kept
        self.data = grown

    def write(self, index: Any, batch: List[Any]) -> None:
        """Stores the members' raw batches (``batch[component]``) at rows ``index``: by
        :func:`_put` where it can, else by NumPy."""
        sources = [batch[c] for c in self.components]
        if not _put(self.data, index, sources):
            self.data[index] = np.stack(sources, axis=1)

    def read(self, index: Any, out: List[Any]) -> None:
        """Sets ``out[component]`` to each member's raw batch of rows ``index``."""
        # (by _get_rows: NumPy's take lets go of the GIL for a batch's few rows, a hand-over
        # to another thread each time)
        taken = self.data[index] if isinstance(index, slice) else _get_rows(self.data, index)
        by_member = taken.swapaxes(0, 1).copy()  # (a slice's rows are cleared next)
        for k, component in enumerate(self.components):
            out[component] = by_member[k]

    def read_batches(self, indices: Sequence[Any], outs: List[List[Any]]) -> None:
        """:meth:`read` of each of ``indices`` (index arrays, disjoint) into its raw batch of
        ``outs``. Where the core is loaded, a table of numbers (a label and the ordinal
        ``read_batch_features`` tags it with) gathers the rows of them all in one call and
        splits them by member in one copy: each batch's members are views of that copy, as
        each batch's were of its own."""
        if core is None or not _numbers(self.data) or len(indices) == 1:
            for index, out in zip(indices, outs):
                self.read(index, out)
            return
        by_member = _taken_rows(self.data, _joined(indices)).swapaxes(0, 1).copy()
        for k, component in enumerate(self.components):
            for out, piece in zip(outs, _pieces(by_member[k], indices)):
                out[component] = piece

    def clear(self, index: Any) -> None:
        if self.data.dtype == object:  # drop the references, so memory can be freed
            self.data[index] = None

    def finish(self, raw: List[Any], out: List[Any]) -> None:
        for component in self.components:
            out[component] = raw[component]


class DenseMember(DenseColumn):
    """One component of a :class:`DenseColumns`: its ``data`` is the table's column ``k``
    (a view), which serves one element, or one component (a queue's saved state)."""

    grouped = True

    def __init__(self, group: DenseColumns, k: int) -> None:  # (its data is the group's)
        self.group, self.k = group, k

    @property
    def data(self) -> np.ndarray:  # type: ignore[override]
        return self.group.data[:, self.k]

    def read(self, index: Any) -> np.ndarray:
        return self.group.data[index, self.k].copy()  # (no take of a strided view)


class ObjectColumn(DenseColumn):
    """A dense component of unknown shape: each row an object, the element's own array.
    A batch is stacked when it leaves; elements of different shapes cannot be."""

    def __init__(self, rows: int, dtype: np.dtype, what: str) -> None:
        self.data = np.empty(rows, dtype=object)
        self.dtype = dtype
        self.what = what  # the component, for messages

    def write_one(self, row: int, value: Any) -> None:
        self.data[row] = value

    def read_one(self, row: int) -> Any:
        return self.data[row]

    def stack(self, values: Sequence[Any]) -> np.ndarray:
        out = np.empty(len(values), dtype=object)
        for j, value in enumerate(values):  # (out[:] = values would unpack equal arrays)
            out[j] = value
        return out

    def finish(self, raw: np.ndarray) -> np.ndarray:
        """Stacks the per-element values into one array.

        Raises:
          InvalidArgumentError: the elements' shapes differ (PaddingFIFOQueue pads instead).
        """
        shapes = {np.shape(item) for item in raw}
        if len(shapes) > 1:
            raise InvalidArgumentError(
                f"{self.what}: dequeue_many needs equal shapes to stack, got "
                f"{sorted(shapes)}; use PaddingFIFOQueue to pad")
        shape = shapes.pop() if shapes else ()
        out = np.empty((len(raw),) + shape, dtype=self.dtype)
        for j, item in enumerate(raw):
            out[j] = item
        return out


class PaddedColumn(ObjectColumn):
    """An ObjectColumn of known rank whose free dimensions are padded per batch, to the
    largest size in the batch, with ``0`` (numbers) or ``b""`` (strings)."""

    def __init__(self, rows: int, dtype: np.dtype, what: str, rank: int) -> None:
        super().__init__(rows, dtype, what)
        self.rank = rank

    def finish(self, raw: np.ndarray) -> np.ndarray:
        item_shapes = [np.shape(item) for item in raw]
        shape = tuple(max((s[d] for s in item_shapes), default=0) for d in range(self.rank))
        out = np.full((len(raw),) + shape, b"" if self.dtype == _dtypes.string else 0,
                      dtype=self.dtype)
        for j, (item, item_shape) in enumerate(zip(raw, item_shapes)):
            out[(j,) + tuple(slice(0, d) for d in item_shape)] = item
        return out


class SparseColumns:
    """Every sparse component of a queue: each one's values in an arena of its own (a
    :class:`SparseColumn`), and the rows' bookkeeping of all of them in shared tables, so
    that a batch goes in and out with a few NumPy calls on ``(rows, components)`` arrays, not
    a few per component (a wide schema has a hundred ``VarLenFeature`` s).

    ::

        start  (rows, K)   where row r's values of member k begin in k's arena
        length (rows, K)   how many there are (0: none, or the row is free)
        shape  (rows, R)   the rows' dense_shapes, member k in columns offset .. + rank

    (A row's entries are side by side: a shuffle queue's batch is of rows scattered over the
    tables, and each costs a cache line or a few, not one per member. A member's own passes
    over every row, such as a compaction of its arena, read its column with a fixed stride.)

    A batch of n rows is read from the tables for all members at once (a call per table),
    then gathered from each member's arena with one copy per segment; and the batched
    SparseValues of plain lists get their ``[row, place]`` indices from one array, of which
    each member's is a slice.
    """

    def __init__(self, rows: int) -> None:
        self.members: List["SparseColumn"] = []
        self.start = np.zeros((rows, 0), dtype=np.int64)
        self.length = np.zeros((rows, 0), dtype=np.int64)
        self.shape = np.zeros((rows, 0), dtype=np.int64)

    def add(self, component: int, dtype: np.dtype, what: str) -> "SparseColumn":
        """A new member for the queue's component ``component`` (no row holds it yet)."""
        member = SparseColumn(self, len(self.members), component, dtype, what)
        self.members.append(member)
        self.start, self.length = _widened(self.start, 1), _widened(self.length, 1)
        return member

    def shape_columns(self, rank: int) -> int:
        """Adds ``rank`` columns to the ``shape`` table for a member; returns where they
        begin."""
        offset = self.shape.shape[1]
        self.shape = _widened(self.shape, rank)
        return offset

    def resize(self, rows: int, keep: Any) -> None:
        """``rows`` rows, holding rows ``keep`` (slice or index array) first; the arenas stay.
        A free row's length is 0 (the passes over every row skip it); its start and shape
        are never read, and left unset (a wide schema's tables of 16,384 rows are 13 MB
        each, a zeroed one costs its pages)."""
        resized = []
        for table in (self.start, self.length, self.shape):
            kept = table[keep]
            grown = np.empty((rows, table.shape[1]), dtype=np.int64)
            grown[:len(kept)] = kept
            if table is self.length:
                grown[len(kept):] = 0
            resized.append(grown)
        self.start, self.length, self.shape = resized

    def write(self, index: Any, batch: List[Any]) -> None:
        """Stores the members' raw batches (Rows, ``batch[member.component]``) at rows
        ``index``, which are free: each member's values in its arena, then the rows' entries
        of every member at once (a write per table, not a few per member)."""
        raws = [batch[member.component] for member in self.members]
        firsts = np.array([member.put(raw) for member, raw in zip(self.members, raws)],
                          dtype=np.int64)
        lengths = np.stack([raw.lengths for raw in raws], axis=1)  # [n, K]
        starts = lengths.cumsum(axis=0)
        starts -= lengths
        starts += firsts
        _set_rows(self.start, index, starts)
        _set_rows(self.length, index, lengths)
        if self.shape.shape[1]:
            shapes = np.empty((len(lengths), self.shape.shape[1]), dtype=np.int64)
            for member, raw in zip(self.members, raws):  # (put set every member's rank)
                shapes[:, member.offset:member.offset + raw.shapes.shape[1]] = raw.shapes
            _set_rows(self.shape, index, shapes)

    def read_batches(self, indices: Sequence[Any], outs: List[List[Any]]) -> None:
        """:meth:`read` of each of ``indices`` into its raw batch of ``outs``."""
        for index, out in zip(indices, outs):
            self.read(index, out)

    def read(self, index: Any, out: List[Any]) -> None:
        """Sets ``out[member.component]`` to each member's raw batch (Rows) of rows ``index``:
        the rows' entries of every member read at once, a table at a time (member after
        member, so that each one's starts and lengths are contiguous), then a gather per
        member's arena."""
        lengths = _get_rows(self.length, index).T.copy()  # [K, n]
        starts = _get_rows(self.start, index).T.copy()
        shapes = _get_rows(self.shape, index)
        for member, member_starts, member_lengths, total in zip(
                self.members, starts, lengths, lengths.sum(axis=1).tolist()):
            rank = member.rank or 0
            out[member.component] = member.gathered(
                member_starts, member_lengths, total,
                shapes[:, member.offset:member.offset + rank].copy())

    def clear(self, index: Any) -> None:
        """Frees rows ``index`` of every member."""
        lengths = _get_rows(self.length, index)
        totals = lengths.sum(axis=0).tolist()
        _set_rows(self.length, index, np.zeros_like(lengths))
        for member, total in zip(self.members, totals):
            member.taken(total)

    def finish(self, raw: List[Any], out: List[Any]) -> None:
        """Sets ``out[member.component]`` to each member's batched SparseValue, as
        :meth:`~queuepipe.sparse.Rows.to_sparse` makes it; those of plain lists share one
        index array (each has its slice) and one array of dense shapes (each has its row)."""
        lists = []
        for member in self.members:
            rows = raw[member.component]
            if rows.inner is None:
                lists.append((member.component, rows))
            else:
                out[member.component] = rows.to_sparse()
        if not lists:
            return
        n = len(lists[0][1])
        lengths = np.array([rows.lengths for _, rows in lists], dtype=np.int64)
        indices = sparse.list_indices(lengths.ravel(), int(lengths.sum()), n)
        dense_shapes = np.empty((len(lists), 2), dtype=np.int64)
        dense_shapes[:, 0] = n
        dense_shapes[:, 1] = np.array([rows.shapes[:, 0] for _, rows in lists]).max(axis=1) \
            if n else 0
        ends = lengths.sum(axis=1).cumsum().tolist()
        for (component, rows), first, last, dense_shape in zip(lists, [0] + ends, ends,
                                                               dense_shapes):
            out[component] = SparseValue(indices[first:last], rows.values, dense_shape)


def _widened(table: np.ndarray, columns: int) -> np.ndarray:
    """``table`` with ``columns`` more columns of zeros."""
    return np.concatenate([table, np.zeros((len(table), columns), dtype=np.int64)], axis=1)


class SparseColumn:
    """One sparse component of a queue, a member of its :class:`SparseColumns`: each
    element's values (and the indices inside it) in a segment of one arena per field; the
    rows' ``start``, ``length`` and ``dense_shape`` in the shared tables (column ``k``).

    ::

        rows:   start  length  dense_shape          arena (values)
          0       0      3       [3]        ---->   7 8 9 | 4 | . . | 5 6 | free ...
          1       3      1       [1]                        ^ a row taken: a hole
          2       6      2       [2]

    Written segments go at the end of the arena. When it is full, the live segments are
    gathered to its front (into an arena twice as large when they and the new ones would
    fill more than half), so holes left by elements taken cost memory until that pass, and
    each value is moved a constant number of times on average. The rank is fixed by the
    first element.

    While every element written is a plain list (rank 1, its values at 0, 1, ...: what a
    ``VarLenFeature`` parses to, :class:`~queuepipe.sparse.Rows` with ``inner`` None), the
    arena of indices is not kept: it is made from the lengths at the first element that
    needs it.

    Batches of rows move through :class:`SparseColumns` for all members at once; the
    methods here serve one element, or one component (a queue's saved state).
    """

    grouped = True  # stored and moved by its SparseColumns, not by itself

    def __init__(self, group: SparseColumns, k: int, component: int, dtype: np.dtype,
                 what: str) -> None:
        self.group, self.k, self.component = group, k, component
        self.dtype = dtype
        self.what = what
        self.rank: Optional[int] = None
        self.offset = 0  # where its columns of the group's shape table begin
        self.values = np.zeros(0, dtype=dtype)
        self.inner = np.zeros((0, 0), dtype=np.int64)
        self.fill = 0  # the arena's used part
        self.live = 0  # values held by rows not cleared
        self.listed = True  # every element held a plain list: no indices kept

    def _set_rank(self, rank: int) -> None:
        """Takes the rank of the first values written (the queue checks every later one)."""
        if self.rank is None:
            self.rank = rank
            self.offset = self.group.shape_columns(rank)
            self.inner = np.zeros((0, rank), dtype=np.int64)

    def _room(self, needed: int) -> None:
        """Makes room for ``needed`` more values at the arena's end (rows are written only
        once cleared: a row of length 0 holds nothing to keep)."""
        if self.fill + needed <= len(self.values):
            return
        if self.live < self.fill:  # holes: the live segments to the front, in place
            self._compact()
        size = len(self.values)
        if self.live + needed > size // 2:  # doubled: a compaction per doubling at most
            size = max(_MIN_ARENA, 2 * size, 2 * (self.live + needed))
            values = np.empty(size, dtype=self.dtype)
            values[:self.fill] = self.values[:self.fill]
            self.values = values
            if not self.listed:
                inner = np.empty((size, self.rank or 0), dtype=np.int64)  # (the rank is set)
                inner[:self.fill] = self.inner[:self.fill]
                self.inner = inner

    def _compact(self) -> None:
        """Moves the live segments to the front of the arena, in their order there, without
        a new arena: a large new one costs the allocator fresh pages, faulted in one by one
        as it fills (an arena of a million token ids compacted in 40-200 ms into a new one,
        in a few ms in place)."""
        start, length = self.group.start[:, self.k], self.group.length[:, self.k]
        held = np.flatnonzero(length)
        held = held[start.take(held).argsort()]
        starts, lengths = start.take(held), length.take(held)
        if self.dtype.kind == "O":  # (references: moved by NumPy, which counts them)
            gather = sparse.segments(starts, lengths)
            self.values[:self.live] = self.values[gather]
            self.values[self.live:self.fill] = None
        else:
            compact_segments(self.values, starts, lengths)
        if not self.listed:
            compact_segments(self.inner, starts, lengths)
        start[held] = lengths.cumsum() - lengths
        self.fill = self.live

    def _unlist(self) -> None:
        """Keeps indices from now on: those of the plain lists held are made."""
        if not self.listed:
            return
        self.listed = False
        self.inner = np.zeros((len(self.values), self.rank or 0), dtype=np.int64)
        start, length = self.group.start[:, self.k], self.group.length[:, self.k]
        held = np.flatnonzero(length)
        lengths = length[held]
        self.inner[sparse.segments(start[held], lengths), 0] = sparse.places(lengths)

    def put(self, raw: sparse.Rows) -> int:
        """Copies a raw batch's values to the arena's end; returns where they begin (the
        group records the rows)."""
        self._set_rank(raw.shapes.shape[1])
        if raw.inner is not None:
            self._unlist()
        total = len(raw.values)
        self._room(total)
        first = self.fill
        _assign(self.values, slice(first, first + total), raw.values)
        if not self.listed:
            self.inner[first:first + total] = raw.full_inner()
        self.fill += total
        self.live += total
        return first

    def gathered(self, starts: np.ndarray, lengths: np.ndarray, total: int,
                 shapes: np.ndarray) -> sparse.Rows:
        """The raw batch of rows whose values lie in the arena at ``starts``, ``lengths`` of
        them (``total`` in all), with ``shapes``, their dense shapes (int64 ``[n, rank]``)."""
        return sparse.Rows(_gathered(self.values, starts, lengths, total),
                           None if self.listed else
                           _gathered(self.inner, starts, lengths, total), lengths, shapes)

    def taken(self, total: int) -> None:
        """``total`` values of rows just cleared left the arena."""
        self.live -= total
        if not self.live:  # nothing held: the whole arena is free again
            if self.dtype.kind == "O":
                self.values[:self.fill] = None
            self.fill = 0

    def write_one(self, row: int, value: SparseValue) -> None:
        indices, values, dense_shape = value
        self._set_rank(len(dense_shape))
        if self.listed and not sparse.is_list(indices):
            self._unlist()
        total = len(values)
        self._room(total)
        group = self.group
        self.values[self.fill:self.fill + total] = values
        if not self.listed:
            self.inner[self.fill:self.fill + total] = indices
        group.start[row, self.k] = self.fill
        group.length[row, self.k] = total
        group.shape[row, self.offset:self.offset + len(dense_shape)] = dense_shape
        self.fill += total
        self.live += total

    def read(self, index: Any) -> sparse.Rows:
        """The raw batch of this component alone at rows ``index``."""
        group = self.group
        rows = _rows(index, len(group.start))
        lengths = group.length[rows, self.k]
        return self.gathered(group.start[rows, self.k], lengths, int(lengths.sum()),
                             group.shape[rows, self.offset:self.offset + (self.rank or 0)])

    def read_one(self, row: int) -> SparseValue:
        group = self.group
        start = int(group.start[row, self.k])
        stop = start + int(group.length[row, self.k])
        inner = np.arange(stop - start, dtype=np.int64).reshape(-1, 1) if self.listed else \
            self.inner[start:stop].copy()
        return SparseValue(inner, self.values[start:stop].copy(),
                           group.shape[row, self.offset:self.offset + (self.rank or 0)].copy())

    def clear(self, index: Any) -> None:
        length = self.group.length[:, self.k]
        self.taken(int(length[index].sum()))
        length[index] = 0

    def stack(self, values: Sequence[SparseValue]) -> sparse.Rows:
        return sparse.stack(values, self.dtype, self.what, self.rank)

    def finish(self, raw: sparse.Rows) -> SparseValue:
        return raw.to_sparse()
