"""SparseValue: TF's ``SparseTensorValue`` in NumPy, and how batching joins and splits them.

A ragged feature (a token list, a variable number of boxes) parses to a :class:`SparseValue`:
the ``values``, the ``indices`` where each value sits, and the ``dense_shape`` of the array it
stands for. Batching ``n`` of them makes one with a leading batch axis, as TF1's ``tf.train.batch``
does with a SparseTensor::

    element 0: indices [[0], [1]]   values [7, 8]   dense_shape [2]
    element 1: indices [[0]]        values [9]      dense_shape [1]
                          |  stack
                          v
    batch:     indices [[0, 0], [0, 1], [1, 0]]   values [7, 8, 9]   dense_shape [2, 2]

The batch's first index column says which element a value came from; its ``dense_shape`` is the
number of elements, then the largest extent of each dimension. :func:`split` undoes it (what
``enqueue_many`` does with a batched SparseValue): element ``i`` gets the values of batch row
``i``, with that column dropped and the batch's ``dense_shape[1:]``.
"""

from __future__ import annotations

import collections
from typing import Any, List, Sequence

import numpy as np

from queuepipe.errors import InvalidArgumentError

__all__ = ["SparseValue", "as_sparse", "stack", "split", "select", "batch_size"]


class SparseValue(collections.namedtuple("SparseValue", ["indices", "values", "dense_shape"])):
    """A sparse array, as TF's ``SparseTensorValue``: what a ``VarLenFeature`` parses to.

    Attributes:
      indices: int64 ``[N, rank]``, the index of each value, in row-major order.
      values: ``[N]``, the values.
      dense_shape: int64 ``[rank]``: the batch size (if batched) and the longest row.
    """

    __slots__ = ()

    def to_dense(self, default_value: Any = 0) -> np.ndarray:
        """The dense array of ``dense_shape``: each value at its index, ``default_value``
        elsewhere (give ``b""`` for strings)."""
        values = np.asarray(self.values)
        out = np.full(tuple(int(d) for d in self.dense_shape), default_value,
                      dtype=values.dtype if values.dtype != object else object)
        if len(values):
            out[tuple(np.asarray(self.indices, dtype=np.int64).T)] = values
        return out

    def row_lengths(self) -> np.ndarray:
        """How many values each row (each index of the first dimension) holds: int64
        ``[dense_shape[0]]``; for a batch of token lists, each list's length."""
        rows = int(self.dense_shape[0]) if len(self.dense_shape) else 0
        indices = np.asarray(self.indices, dtype=np.int64)
        return np.bincount(indices[:, 0], minlength=rows).astype(np.int64) if rows else \
            np.zeros(0, dtype=np.int64)


def as_sparse(value: Any, dtype: np.dtype, what: str) -> SparseValue:
    """``value`` (a SparseValue or a 3-sequence of its fields) as a SparseValue of new arrays:
    int64 ``indices [N, rank]``, ``values [N]`` of ``dtype``, int64 ``dense_shape [rank]``.

    Raises:
      InvalidArgumentError: the parts do not fit together, naming ``what``.
    """
    try:
        indices, values, dense_shape = value
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{what}: not a sparse value (indices, values, "
                                   f"dense_shape): {value!r:.60}") from None
    if type(indices) is np.ndarray and type(values) is np.ndarray \
            and type(dense_shape) is np.ndarray and indices.dtype == np.int64 \
            and values.dtype == dtype and dense_shape.dtype == np.int64 \
            and indices.ndim == 2 and values.ndim == 1 and dense_shape.ndim == 1 \
            and indices.shape == (len(values), len(dense_shape)):
        return SparseValue(indices.copy(), values.copy(), dense_shape.copy())  # as parsed
    try:
        dense_shape = np.array(dense_shape, dtype=np.int64).reshape(-1)
        indices = np.array(indices, dtype=np.int64).reshape(-1, len(dense_shape))
        if dtype.kind == "O":
            values = np.array([v.encode("utf-8") if isinstance(v, str) else bytes(v)
                               for v in np.asarray(values, dtype=object).reshape(-1)],
                              dtype=object).reshape(-1)
        else:
            values = np.array(values, dtype=dtype).reshape(-1)
    except (TypeError, ValueError) as e:
        raise InvalidArgumentError(f"{what}: not a sparse value of dtype {dtype} "
                                   f"(indices, values, dense_shape): {e}") from None
    if len(indices) != len(values):
        raise InvalidArgumentError(f"{what}: a sparse value has {len(indices)} indices but "
                                   f"{len(values)} values")
    return SparseValue(indices, values, dense_shape)


def batch_size(value: SparseValue) -> int:
    """The number of elements of a batched SparseValue (its ``dense_shape[0]``)."""
    return int(value.dense_shape[0]) if len(value.dense_shape) else 0


def stack(items: Sequence[SparseValue], dtype: np.dtype, what: str) -> SparseValue:
    """One batched SparseValue of ``items`` (elements of one rank), as ``tf.train.batch``.

    Raises:
      InvalidArgumentError: the elements differ in rank, naming ``what``.
    """
    indices, values, shapes = zip(*items) if len(items) else ((), (), ())
    distinct = {id(shape): shape for shape in shapes}  # split elements share theirs
    ranks = {len(shape) for shape in distinct.values()}
    if len(ranks) > 1:
        raise InvalidArgumentError(f"{what}: cannot batch sparse values of ranks "
                                   f"{sorted(ranks)}")
    rank = ranks.pop() if ranks else 1
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(items))
    rows = np.repeat(np.arange(len(items), dtype=np.int64), lengths)
    if len(items):
        inner = np.concatenate(indices)
        values = np.concatenate(values)
        extent = np.max(np.stack(list(distinct.values())), axis=0)
    else:
        inner = np.zeros((0, rank), dtype=np.int64)
        values = np.zeros(0, dtype=dtype)
        extent = np.zeros(rank, dtype=np.int64)
    indices = np.concatenate([rows[:, None], inner.reshape(-1, rank)], axis=1)
    return SparseValue(indices, values, np.concatenate([[len(items)], extent]).astype(np.int64))


def split(value: SparseValue, what: str) -> List[SparseValue]:
    """The elements of a batched SparseValue, split along its first index column.

    Raises:
      InvalidArgumentError: ``value`` has rank 0, or an index lies outside its dense shape.
    """
    if len(value.dense_shape) < 1 or value.indices.shape[1] < 1:
        raise InvalidArgumentError(f"{what}: enqueue_many needs a batched sparse value (rank "
                                   f">= 1), got dense_shape {value.dense_shape.tolist()}")
    n = batch_size(value)
    rows = value.indices[:, 0]
    if len(rows) and (rows.min() < 0 or rows.max() >= n):
        raise InvalidArgumentError(f"{what}: a sparse value's index {int(rows.max())} lies "
                                   f"outside its batch of {n}")
    if len(rows) > 1 and (rows[1:] < rows[:-1]).any():  # not in row-major order: sort
        order = np.argsort(rows, kind="stable")
        rows, inner, values = rows[order], value.indices[order, 1:], value.values[order]
    else:
        inner, values = value.indices[:, 1:], value.values
    bounds = np.searchsorted(rows, np.arange(n + 1)).tolist()
    shape = value.dense_shape[1:].copy()
    shape.flags.writeable = False  # one array for every element: nobody may change it
    make = SparseValue._make
    return [make((inner[start:stop], values[start:stop], shape))
            for start, stop in zip(bounds[:-1], bounds[1:])]


def select(value: SparseValue, mask: np.ndarray) -> SparseValue:
    """The rows of a batched SparseValue where ``mask`` is true, renumbered from 0."""
    keep = np.flatnonzero(mask)
    new_row = np.full(len(mask), -1, dtype=np.int64)
    new_row[keep] = np.arange(len(keep))
    rows = new_row[value.indices[:, 0]]
    kept = rows >= 0
    indices = value.indices[kept].copy()
    indices[:, 0] = rows[kept]
    dense_shape = value.dense_shape.copy()
    dense_shape[0] = len(keep)
    return SparseValue(indices, value.values[kept], dense_shape)
