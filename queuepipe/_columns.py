"""Where a queue keeps its elements: one column per component, of the kind its values need.

A queue decides which elements go where (a ring, a shuffled pool, a heap) and addresses them by
row; a column stores one component's values in those rows and knows nothing of order or
blocking. Every method runs with the queue's lock held. A batch moves between queue and column
as a *raw* batch: what the column's ``read`` returns and ``write`` takes (an array with a
leading axis, or :class:`~queuepipe.sparse.Rows`); ``finish`` turns it into what the user sees.

=================  ==================================  =======================================
column             holds                               a batch of n elements is
=================  ==================================  =======================================
DenseColumn        fixed-shape values: one row each    a slice (or ``take``) of the array
                   of a ``(rows, *shape)`` array
ObjectColumn       values of unknown shape, one        stacked at dequeue (PaddedColumn pads
                   object per row                      the free dimensions instead)
SparseColumn       SparseValues: values and indices    a gather of n segments of the arena,
                   in one growing arena, a (start,     one NumPy call per field
                   length, dense_shape) per row
=================  ==================================  =======================================
"""

from __future__ import annotations

import copy
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import sparse
from queuepipe.errors import InvalidArgumentError
from queuepipe.sparse import SparseValue

__all__ = ["DenseColumn", "ObjectColumn", "PaddedColumn", "SparseColumn", "concat"]

# The largest copy into a column that keeps the GIL (see _assign).
_KEEP_GIL_BYTES = 1 << 16

# The fewest values a sparse column's arena holds once it holds any.
_MIN_ARENA = 4096


def concat(parts: Sequence[Any]) -> Any:
    """The raw batches ``parts`` of one column, one after another."""
    if isinstance(parts[0], sparse.Rows):
        return sparse.Rows.concat(parts)
    return np.concatenate(parts)


def _assign(column: np.ndarray, index: Any, values: Any) -> None:
    """``column[index] = values`` for an int or slice ``index``; a copy of a matching
    contiguous array of at most ``_KEEP_GIL_BYTES`` is a plain memcpy that keeps the GIL.

    NumPy releases the GIL to copy a few hundred elements or more; with several producer
    threads each release hands the GIL to another thread and costs a thread switch (two
    producers of 784-byte rows: about one switch per element put alone, or per group of
    them). A memoryview copy keeps it. Larger copies still release it, so that other threads
    run meanwhile.
    """
    target = column[index]
    if type(target) is np.ndarray and type(values) is np.ndarray \
            and values.dtype == column.dtype and values.shape == target.shape \
            and values.nbytes <= _KEEP_GIL_BYTES and column.dtype.kind in "biufc" \
            and values.flags.c_contiguous:
        target.data.cast("B")[:] = values.data.cast("B")
    else:
        column[index] = values


def _rows(index: Any, rows: int) -> np.ndarray:
    """The rows an int, slice or index array names, as an index array."""
    if isinstance(index, slice):
        return np.arange(*index.indices(rows))
    return np.atleast_1d(index)


class DenseColumn:
    """A component of fully defined shape: row ``r`` of a ``(rows, *shape)`` array."""

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
        else:  # scattered rows: a fancy index, copied by NumPy
            self.data[index] = values

    def write_one(self, row: int, value: Any) -> None:
        _assign(self.data, row, value)

    def read(self, index: Any) -> np.ndarray:
        if isinstance(index, slice):
            return self.data[index].copy()
        return self.data.take(index, axis=0)  # about half the time of fancy indexing

    def read_one(self, row: int) -> Any:
        value = self.data[row]
        return value.copy() if self.data.ndim > 1 else value

    def clear(self, index: Any) -> None:
        if self.data.dtype == object:  # drop the references, so memory can be freed
            self.data[index] = None

    def stack(self, values: Sequence[Any]) -> np.ndarray:
        """Elements checked by the queue (the column's dtype and row shape) as a raw batch.

        Numeric rows are joined as bytes (an array's or a NumPy scalar's buffer holds its
        values in the column's layout): ``np.array`` copies row by row and releases the GIL
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


class SparseColumn:
    """A component of SparseValues, held flat: each element's values (and the indices inside
    it) in a segment of one arena per field, and per row the segment's start, its length and
    the element's ``dense_shape``.

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
    """

    def __init__(self, rows: int, dtype: np.dtype, what: str) -> None:
        self.dtype = dtype
        self.what = what
        self.rank: Optional[int] = None
        self.start = np.zeros(rows, dtype=np.int64)
        self.length = np.zeros(rows, dtype=np.int64)
        self.shape = np.zeros((rows, 0), dtype=np.int64)
        self.values = np.zeros(0, dtype=dtype)
        self.inner = np.zeros((0, 0), dtype=np.int64)
        self.fill = 0  # the arena's used part
        self.live = 0  # values held by rows not cleared
        self.listed = True  # every element held a plain list: no indices kept

    def resized(self, rows: int, keep: Any) -> "SparseColumn":
        grown = SparseColumn(rows, self.dtype, self.what)
        grown.rank, grown.values, grown.inner = self.rank, self.values, self.inner
        grown.fill, grown.live, grown.listed = self.fill, self.live, self.listed
        grown.shape = np.zeros((rows, self.shape.shape[1]), dtype=np.int64)
        for name in ("start", "length", "shape"):
            kept = getattr(self, name)[keep]
            getattr(grown, name)[:len(kept)] = kept
        return grown

    def _set_rank(self, rank: int) -> None:
        """Takes the rank of the first values written (the queue checks every later one)."""
        if self.rank is None:
            self.rank = rank
            self.shape = np.zeros((len(self.start), rank), dtype=np.int64)
            self.inner = np.zeros((0, rank), dtype=np.int64)

    def _room(self, needed: int) -> None:
        """Makes room for ``needed`` more values at the arena's end (rows are written only
        once cleared: a row of length 0 holds nothing to keep)."""
        if self.fill + needed <= len(self.values):
            return
        size = len(self.values)
        if self.live + needed > size // 2:  # doubled: a gather per doubling at most
            size = max(_MIN_ARENA, 2 * size, 2 * (self.live + needed))
        values = np.empty(size, dtype=self.dtype)
        # (the rank is set first)
        inner = np.empty((0 if self.listed else size, self.rank or 0), dtype=np.int64)
        if self.live == self.fill:  # no hole: the used part moves as it is
            values[:self.fill] = self.values[:self.fill]
            if not self.listed:
                inner[:self.fill] = self.inner[:self.fill]
        else:
            held = np.flatnonzero(self.length)
            starts, lengths = self.start[held], self.length[held]
            gather = sparse.segments(starts, lengths)
            values[:self.live] = self.values[gather]
            if not self.listed:
                inner[:self.live] = self.inner[gather]
            self.start[held] = np.cumsum(lengths) - lengths
        self.values, self.inner, self.fill = values, inner, self.live

    def _unlist(self) -> None:
        """Keeps indices from now on: those of the plain lists held are made."""
        if not self.listed:
            return
        self.listed = False
        self.inner = np.zeros((len(self.values), self.rank or 0), dtype=np.int64)
        held = np.flatnonzero(self.length)
        lengths = self.length[held]
        self.inner[sparse.segments(self.start[held], lengths), 0] = sparse.places(lengths)

    def write(self, index: Any, raw: sparse.Rows) -> None:
        rows = _rows(index, len(self.start))
        self._set_rank(raw.shapes.shape[1])
        if raw.inner is not None:
            self._unlist()
        total = len(raw.values)
        self._room(total)
        self.values[self.fill:self.fill + total] = raw.values
        if not self.listed:
            self.inner[self.fill:self.fill + total] = raw.full_inner()
        self.start[rows] = self.fill + np.cumsum(raw.lengths) - raw.lengths
        self.length[rows] = raw.lengths
        self.shape[rows] = raw.shapes
        self.fill += total
        self.live += total

    def write_one(self, row: int, value: SparseValue) -> None:
        indices, values, dense_shape = value
        self._set_rank(len(dense_shape))
        self._unlist()
        total = len(values)
        self._room(total)
        self.values[self.fill:self.fill + total] = values
        self.inner[self.fill:self.fill + total] = indices
        self.start[row] = self.fill
        self.length[row] = total
        self.shape[row] = dense_shape
        self.fill += total
        self.live += total

    def read(self, index: Any) -> sparse.Rows:
        rows = _rows(index, len(self.start))
        lengths = self.length.take(rows)
        gather = sparse.segments(self.start.take(rows), lengths)
        return sparse.Rows(self.values.take(gather),
                           None if self.listed else self.inner.take(gather, axis=0),
                           lengths, self.shape.take(rows, axis=0))

    def read_one(self, row: int) -> SparseValue:
        start, stop = int(self.start[row]), int(self.start[row] + self.length[row])
        inner = np.arange(stop - start, dtype=np.int64).reshape(-1, 1) if self.listed else \
            self.inner[start:stop].copy()
        return SparseValue(inner, self.values[start:stop].copy(), self.shape[row].copy())

    def clear(self, index: Any) -> None:
        self.live -= int(self.length[index].sum())
        self.length[index] = 0
        if not self.live:  # nothing held: the whole arena is free again
            if self.dtype.kind == "O":
                self.values[:self.fill] = None
            self.fill = 0

    def stack(self, values: Sequence[SparseValue]) -> sparse.Rows:
        return sparse.stack(values, self.dtype, self.what, self.rank)

    def finish(self, raw: sparse.Rows) -> SparseValue:
        return raw.to_sparse()
