"""Output sinks, one per feature per batch: the parsers put a record's values (or a block of
records' values) in, and ``finish`` gives the feature's output array or SparseValue."""

from __future__ import annotations

from typing import Callable

import numpy as np

from queuepipe import _core
from queuepipe.parsing._specs import _FIXED, _VAR
from queuepipe.sparse import SparseValue, counted, empty_indices, fill_list_indices, segments, \
    zeroed


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
        self.counts = zeroed(batch)
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
        if len(rows) == len(self.counts) and counts.dtype == self.counts.dtype:
            self.counts = counts  # every row, in order (a copy of 500 lets go of the GIL)
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


def _finish(sinks, size=None):
    """The outputs of the sinks of one batch, in order; with ``size``, a list of the outputs
    of each batch of ``size`` records of it, one after the other (the batch's length a
    multiple of ``size``), as if each had been parsed alone: a FixedLenFeature's as a view of
    its one array, a VarLenFeature's SparseValue numbered in its own batch. The
    VarLenFeatures' SparseValues are built together (see :func:`_sparse_values`): a wide spec
    pays a few NumPy calls for all of them, not a few per feature."""
    outputs = [None] * len(sinks)
    sparse = [i for i, sink in enumerate(sinks)
              if type(sink) is _RaggedOut and sink.feature.kind == _VAR]
    for i, value in zip(sparse, _sparse_values([sinks[i] for i in sparse], size)):
        outputs[i] = value
    for i, sink in enumerate(sinks):
        if outputs[i] is None:
            outputs[i] = sink.finish()
            if size is not None:
                outputs[i] = [outputs[i][at:at + size]
                              for at in range(0, len(outputs[i]), size)]
    return outputs if size is None else [list(batch) for batch in zip(*outputs)]


def _sparse_values(sinks, size=None):
    """The SparseValues of VarLenFeature sinks of one batch (with ``size``, for each feature
    the list of those of its batches of ``size`` records). Where each batch's values and
    indices lie comes from one table (:data:`sparse_table`); the indices of a batch are made
    at once, feature after feature, in one ``[values, 2]`` array whose rows of each feature
    are its ``indices``: an array per batch, so that a batch's SparseValues hold no other
    batch's indices (and a group of batches no array large enough to cost fresh pages each
    time), all filled by one call (:func:`~queuepipe.sparse.fill_list_indices`), which lets
    go of the GIL once for a group of batches drawn ahead, where a call per batch kept it. A
    dense shape is a view of the table's row."""
    if not sinks:
        return []
    records = len(sinks[0].counts)
    batch = records if size is None else size
    parts = records // batch if batch else 0
    counts = np.stack([sink.counts for sink in sinks]) if len(sinks) > 1 else \
        sinks[0].counts.reshape(1, -1)  # [features, records] (one: a view, no copy)
    table = np.empty((parts, len(sinks), 5), dtype=np.int64)
    sparse_table(counts, batch, table)
    rows = table.tolist()  # [batch][feature]: batch, longest, begin, end, first
    totals = [first + end - begin for _, _, begin, end, first in rows[-1]] if parts \
        else [0] * len(sinks)
    values = [sink._values(row_counts, total)
              for sink, row_counts, total in zip(sinks, counts, totals)]
    out = [[] for _ in sinks]
    every = empty_indices([part[-1][3] for part in rows])
    if parts:  # the lists batch after batch, feature after feature in each: one call
        fill_list_indices(np.ascontiguousarray(counts.reshape(len(sinks), parts, batch)
                                               .swapaxes(0, 1)).reshape(-1), batch, every)
    for p, (part, indices) in enumerate(zip(rows, every)):
        shapes = table[p, :, :2]
        for k, (_, _, begin, end, first) in enumerate(part):
            out[k].append(_new_sparse(SparseValue, (  # (see _sparse_1d)
                indices[begin:end], values[k][first:first + end - begin], shapes[k])))
    if size is not None:
        return out
    return [batches[0] if batches else
            SparseValue(np.empty((0, 2), dtype=np.int64), value, np.zeros(2, dtype=np.int64))
            for batches, value in zip(out, values)]


def pure_sparse_table(counts: np.ndarray, batch: int, table: np.ndarray) -> None:
    """Fills ``table`` (int64 ``[records / batch, features, 5]``) with where the
    SparseValues of each batch of ``batch`` records lie, from the int64 ``counts``
    (``[features, records]``): for each batch and feature, ``batch`` and the longest count
    (its dense shape), where its indices begin and end among the batch's (feature after
    feature), and where its values begin among the feature's (batch after batch). (The
    core's ``sparse_table`` does the same in one pass.)"""
    if not len(table):
        return
    by_part = counts.reshape(len(counts), len(table), batch)
    totals = by_part.sum(axis=2).T  # [batches, features]
    ends = totals.cumsum(axis=1)
    table[:, :, 0] = batch
    table[:, :, 1] = by_part.max(axis=2).T
    table[:, :, 2] = ends - totals
    table[:, :, 3] = ends
    table[:, :, 4] = totals.cumsum(axis=0) - totals


sparse_table: Callable[[np.ndarray, int, np.ndarray], None] = (
    _core.core.sparse_table if _core.core is not None else pure_sparse_table)


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
