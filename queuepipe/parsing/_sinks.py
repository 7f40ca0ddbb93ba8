"""Output sinks, one per feature per batch: the parsers put a record's values (or a block of
records' values) in, and ``finish`` gives the feature's output array or SparseValue."""

from __future__ import annotations

import numpy as np

from queuepipe.parsing._specs import _FIXED, _VAR
from queuepipe.sparse import SparseValue, segments


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
        self.counts[rows] = counts
        if len(values):
            self.raggeds.append((rows, counts, values))

    def finish(self):
        return self._sparse() if self.feature.kind == _VAR else self._padded()

    def _sparse(self):
        batch, counts = len(self.counts), self.counts
        starts = np.cumsum(counts) - counts
        total = int(counts.sum())
        row_ids = np.repeat(np.arange(batch, dtype=np.int64), counts)
        columns = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
        if len(self.raggeds) == 1 and len(self.raggeds[0][2]) == total:
            values = self.raggeds[0][2]  # every value came in one group, in record order
        else:
            values = np.empty(total, dtype=self.feature.dtype)
        for index, row in self.singles:
            values[starts[index]:starts[index] + len(row)] = row
        for rows, block in self.blocks:
            values[(starts[rows][:, None] + np.arange(block.shape[1])).ravel()] = block.ravel()
        for rows, row_counts, flat in self.raggeds:
            if flat is not values:
                values[segments(starts[rows], row_counts)] = flat
        longest = int(counts.max()) if batch else 0
        return SparseValue(np.stack([row_ids, columns], axis=1), values,
                           np.array([batch, longest], dtype=np.int64))

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


def _unbatch(value):
    if isinstance(value, SparseValue):
        return SparseValue(value.indices[:, 1:], value.values, value.dense_shape[1:])
    return value[0]


def _sparse_1d(values):
    """One record's VarLenFeature values as a SparseValue: indices ``[[0], [1], ...]`` and
    dense shape ``[len]``, both views of one ``arange(len + 1)`` (disjoint parts of it: a
    write to one never shows in the other). Made with two NumPy calls instead of three, and
    without the namedtuple's Python ``__new__``: this runs once per feature per record."""
    n = len(values)
    numbers = np.arange(n + 1, dtype=np.int64)
    return _new_sparse(SparseValue, (numbers[:n, None], values, numbers[n:]))


_new_sparse = tuple.__new__  # SparseValue's fields, checked by no Python code (see _sparse_1d)


def _shaped(values, shape):
    """A flat array as ``shape``; a scalar comes out as a NumPy scalar or ``bytes``."""
    return values[0] if shape == () else values.reshape(shape)
