"""Output sinks, one per feature per batch: the parsers put a record's values (or a block of
records' values) in, and ``finish`` gives the feature's output array or SparseValue."""

from __future__ import annotations

from typing import Callable

import numpy as np

from queuepipe import _core
from queuepipe.parsing._specs import _FIXED, _VAR
from queuepipe.sparse import Rows, SparseValue, counted, segments


class _DenseOut:
    """A FixedLenFeature's ``[batch, *shape]`` output, filled row by row or block by block."""

    def __init__(self, feature, batch):
        self.feature = feature
        self.out = np.empty((batch, feature.size), dtype=feature.dtype)

    def put(self, index, values):
        self.out[index] = values

    def put_block(self, rows, block):
        self.out[rows] = block

    def finish(self):
        return self.out.reshape((len(self.out),) + self.feature.shape)


class _RaggedOut:
    """A VarLenFeature's or FixedLenSequenceFeature's output: a different count per record."""

    def __init__(self, feature, batch):
        self.feature = feature
        self.counts = np.zeros(batch, dtype=np.int64)
        self.singles = []  # (index, 1-D values)
        self.blocks = []  # (rows, [len(rows), n] values)
        self.raggeds = []  # (rows, their counts, their values one after the other)

    def put(self, index, values):
        self.counts[index] = len(values)
        if len(values):
            self.singles.append((index, values))

    def put_block(self, rows, block):
        self.counts[rows] = block.shape[1]
        if block.shape[1]:
            self.blocks.append((rows, block))

    def put_ragged(self, rows, counts, values):
        """Puts the values of the records ``rows`` (distinct, ascending), ``counts[i]`` of
        row ``rows[i]``'s one after the other in ``values``."""
        if len(rows) == len(self.counts):  # every row, in order
            self.counts[:] = counts
        else:
            self.counts[rows] = counts
        if len(values):
            self.raggeds.append((rows, counts, values))

    def finish(self):
        return self._sparse() if self.feature.kind == _VAR else self._padded()

    def _sparse(self):
        return _sparse_values([self])[0]

    def _values(self, counts, total):
        """The values of every record one after the other: ``total`` of them, ``counts[i]``
        of record ``i``'s."""
        if len(self.raggeds) == 1 and len(self.raggeds[0][2]) == total:
            return self.raggeds[0][2]  # every value came in one group, in record order
        starts = np.cumsum(counts) - counts
        values = np.empty(total, dtype=self.feature.dtype)
        for index, row in self.singles:
            values[starts[index]:starts[index] + len(row)] = row
        for rows, block in self.blocks:
            values[(starts[rows][:, None] + np.arange(block.shape[1])).ravel()] = block.ravel()
        for rows, row_counts, flat in self.raggeds:
            values[segments(starts[rows], row_counts)] = flat
        return values

    def _padded(self):
        feature, batch = self.feature, len(self.counts)
        max_rows = int(self.counts.max()) // feature.size if batch and feature.size else 0
        out = np.empty((batch, max_rows * feature.size), dtype=feature.dtype)
        out.fill(feature.pad)  # (np.full would make b"ab\x00" a NumPy bytes_: NULs stripped)
        for index, row in self.singles:
            out[index, :len(row)] = row
        for rows, block in self.blocks:
            out[rows, :block.shape[1]] = block
        for rows, row_counts, flat in self.raggeds:
            out.reshape(-1)[segments(rows * out.shape[1], row_counts)] = flat
        return out.reshape((batch, max_rows) + feature.shape)


def _sink(feature, batch):
    return _DenseOut(feature, batch) if feature.kind == _FIXED else _RaggedOut(feature, batch)


def _finish(sinks, rows=False):
    """The outputs of the sinks of one batch, in order. The VarLenFeatures' SparseValues are
    built together (see :func:`_sparse_values`): a wide spec pays a few NumPy calls for all
    of them, not a few per feature. With ``rows``, a VarLenFeature's output is
    :class:`~queuepipe.sparse.Rows` instead (see :func:`_rows`)."""
    outputs = [None] * len(sinks)
    sparse = [i for i, sink in enumerate(sinks)
              if type(sink) is _RaggedOut and sink.feature.kind == _VAR]
    made = _rows if rows else _sparse_values
    for i, value in zip(sparse, made([sinks[i] for i in sparse])):
        outputs[i] = value
    for i, sink in enumerate(sinks):
        if outputs[i] is None:
            outputs[i] = sink.finish()
    return outputs


def _sparse_values(sinks):
    """The SparseValues of VarLenFeature sinks of one batch. Their indices are made at once,
    feature after feature, in one ``[values, 2]`` array whose rows of each feature are its
    ``indices`` (:data:`sparse_indices`); likewise the dense shapes."""
    if not sinks:
        return []
    batch = len(sinks[0].counts)
    counts = np.concatenate([sink.counts for sink in sinks])  # feature after feature
    by_feature = counts.reshape(len(sinks), batch)
    totals = by_feature.sum(axis=1)
    ends = np.cumsum(totals)
    indices = np.empty((int(ends[-1]), 2), dtype=np.int64)
    sparse_indices(counts, batch, indices)
    shapes = np.empty((len(sinks), 2), dtype=np.int64)
    shapes[:, 0] = batch
    shapes[:, 1] = by_feature.max(axis=1) if batch else 0
    out = []
    for sink, row_counts, end, total in zip(sinks, by_feature, ends.tolist(), totals.tolist()):
        begin = end - total
        out.append(SparseValue(indices[begin:end], sink._values(row_counts, total),
                               shapes[len(out)]))
    return out


def _rows(sinks):
    """The outputs of VarLenFeature sinks of one batch as :class:`~queuepipe.sparse.Rows`:
    each record's values and their count, what a queue stores for a batched SparseValue,
    without its indices (a queue would only check them and take them apart again). Each
    row's dense shape is the batch's longest list, as a split SparseValue's rows get it."""
    if not sinks:
        return []
    batch = len(sinks[0].counts)
    counts = np.stack([sink.counts for sink in sinks])  # [features, batch]
    totals = counts.sum(axis=1).tolist()
    longest = counts.max(axis=1).tolist() if batch else [0] * len(sinks)
    return [Rows(sink._values(row_counts, total), None, row_counts,
                 np.full((batch, 1), most, dtype=np.int64))
            for sink, row_counts, total, most in zip(sinks, counts, totals, longest)]


def pure_sparse_indices(counts: np.ndarray, batch: int, out: np.ndarray) -> None:
    """Fills ``out`` (int64 ``[counts.sum(), 2]``) with the SparseValue indices of the int64
    ``counts``, ``batch`` per feature, feature after feature: ``(row, j)`` for each value
    ``j`` of each row. (The core's ``sparse_indices`` does the same in one pass.)"""
    starts = np.cumsum(counts) - counts
    rows = np.tile(np.arange(batch, dtype=np.int64), len(counts) // batch if batch else 0)
    out[:, 0] = np.repeat(rows, counts)
    out[:, 1] = np.arange(len(out), dtype=np.int64) - np.repeat(starts, counts)


sparse_indices: Callable[[np.ndarray, int, np.ndarray], None] = (
    _core.core.sparse_indices if _core.core is not None
    and hasattr(_core.core, "sparse_indices") else pure_sparse_indices)


def _unbatch(value):
    if isinstance(value, SparseValue):
        return SparseValue(value.indices[:, 1:], value.values, value.dense_shape[1:])
    return value[0]


def _sparse_1d(values):
    """One record's VarLenFeature values as a SparseValue: indices ``[[0], [1], ...]`` and
    dense shape ``[len]``, both views of one array of ``0 .. len`` (disjoint parts of it: a
    write to one never shows in the other; made by :func:`~queuepipe.sparse.counted`, which
    keeps the GIL). Made with two NumPy calls instead of three, and without the namedtuple's
    Python ``__new__``: this runs once per feature per record."""
    n = len(values)
    numbers = counted(n + 1)
    return _new_sparse(SparseValue, (numbers[:n, None], values, numbers[n:]))


_new_sparse = tuple.__new__  # SparseValue's fields, checked by no Python code (see _sparse_1d)


def _shaped(values, shape):
    """A flat array as ``shape``; a scalar comes out as a NumPy scalar or ``bytes``."""
    return values[0] if shape == () else values.reshape(shape)
