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
import operator
from typing import Any, Callable, Iterator, List, Optional, Sequence

import numpy as np

from queuepipe._core import core
from queuepipe.errors import InvalidArgumentError

__all__ = ["SparseValue", "Rows", "as_sparse", "stack", "split", "split_all", "select",
           "batch_size", "places", "segments", "counting", "ones", "counted",
           "zeroed", "list_indices", "is_list"]


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
        out = np.empty(tuple(int(d) for d in self.dense_shape), dtype=values.dtype)
        out.fill(default_value)  # (np.full would make b"a\x00" a NumPy bytes_: NULs stripped)
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
    """``value`` (a SparseValue or a 3-sequence of its fields) as a SparseValue (the given
    arrays where they fit, new ones where converted; queues copy what they store):
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
        return value if type(value) is SparseValue else \
            SparseValue(indices, values, dense_shape)  # as parsed: nothing to convert
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


class Rows:
    """A batch of sparse elements held flat: what a queue stores and moves for a sparse
    component, so that a batch is a slice and a concatenate, never a Python object per element.

    Attributes:
      values: ``[N]``, every element's values, element after element.
      inner: int64 ``[N, rank]``, each value's index inside its element; or None for
        elements of rank 1 whose values sit at 0, 1, ... in order (a token list: what a
        ``VarLenFeature`` parses to), which then need no index stored or moved.
      lengths: int64 ``[n]``, how many values each element has.
      shapes: int64 ``[n, rank]``, each element's ``dense_shape``.
    """

    __slots__ = ("values", "inner", "lengths", "shapes")

    def __init__(self, values: np.ndarray, inner: Optional[np.ndarray], lengths: np.ndarray,
                 shapes: np.ndarray) -> None:
        self.values, self.inner, self.lengths, self.shapes = values, inner, lengths, shapes

    def full_inner(self) -> np.ndarray:
        """``inner``, made from the lengths where it is None."""
        return self.inner if self.inner is not None else places(self.lengths).reshape(-1, 1)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: Any) -> Any:
        """Element ``index`` as a SparseValue, or the Rows a slice (step 1) selects."""
        if not isinstance(index, slice):
            return self.element(operator.index(index))
        start, stop, _ = index.indices(len(self.lengths))
        stop = max(start, stop)
        first = int(self.lengths[:start].sum())
        last = first + int(self.lengths[start:stop].sum())
        return Rows(self.values[first:last],
                    None if self.inner is None else self.inner[first:last],
                    self.lengths[start:stop], self.shapes[start:stop])

    @staticmethod
    def concat(parts: Sequence["Rows"]) -> "Rows":
        """The elements of ``parts``, one after another."""
        inner = None if all(p.inner is None for p in parts) else \
            np.concatenate([p.full_inner() for p in parts])
        return Rows(np.concatenate([p.values for p in parts]), inner,
                    np.concatenate([p.lengths for p in parts]),
                    np.concatenate([p.shapes for p in parts]))

    def __iter__(self) -> Iterator[SparseValue]:
        ends = np.cumsum(self.lengths).tolist()  # once: not a sum per element
        for j, (first, last) in enumerate(zip([0] + ends[:-1], ends)):
            yield SparseValue(self._inner(first, last), self.values[first:last].copy(),
                              self.shapes[j].copy())

    def _inner(self, first: int, last: int) -> np.ndarray:
        """The indices of the values ``first .. last - 1`` (one element's), a new array."""
        return self.inner[first:last].copy() if self.inner is not None else \
            np.arange(last - first, dtype=np.int64).reshape(-1, 1)

    def element(self, j: int) -> SparseValue:
        """Element ``j`` as a SparseValue of its own arrays."""
        if not -len(self.lengths) <= j < len(self.lengths):
            raise IndexError(f"element {j} of {len(self.lengths)}")
        j %= len(self.lengths)
        first = int(self.lengths[:j].sum())
        last = first + int(self.lengths[j])
        return SparseValue(self._inner(first, last), self.values[first:last].copy(),
                           self.shapes[j].copy())

    def to_sparse(self) -> SparseValue:
        """The batched SparseValue, as ``tf.train.batch`` makes it: the element's number
        before each index, ``dense_shape`` the number of elements and the largest extent of
        each dimension."""
        n, rank = self.shapes.shape
        if self.inner is None:
            indices = list_indices(self.lengths, len(self.values))
        else:
            indices = np.empty((len(self.values), rank + 1), dtype=np.int64)
            indices[:, 0] = counting(n).repeat(self.lengths)
            indices[:, 1:] = self.inner
        dense_shape = np.empty(rank + 1, dtype=np.int64)
        dense_shape[0] = n
        dense_shape[1:] = np.maximum.reduce(self.shapes, axis=0) if n else 0
        return SparseValue(indices, self.values, dense_shape)


def stack(items: Sequence[SparseValue], dtype: np.dtype, what: str,
          rank: Optional[int] = None) -> Rows:
    """The elements ``items`` (SparseValues of one rank, ``rank`` when given) as Rows.

    Raises:
      InvalidArgumentError: the elements differ in rank, naming ``what``.
    """
    if not len(items):
        rank = 1 if rank is None else rank
        return Rows(np.zeros(0, dtype=dtype), np.zeros((0, rank), dtype=np.int64),
                    np.zeros(0, dtype=np.int64), np.zeros((0, rank), dtype=np.int64))
    indices, values, shapes = zip(*items)
    ranks = {len(shape) for shape in shapes} | ({rank} if rank is not None else set())
    if len(ranks) > 1:
        raise InvalidArgumentError(f"{what}: cannot batch sparse values of ranks "
                                   f"{sorted(ranks)}")
    rank = ranks.pop()
    counts = list(map(len, values))
    lengths = np.fromiter(counts, dtype=np.int64, count=len(items))
    if rank == 1 and _listed(indices, counts):
        inner = None  # token lists, as parsed: no index to keep or move
    else:
        inner = np.concatenate(indices).reshape(-1, rank) if len(items) > 1 else indices[0]
        if rank == 1 and _plain_lists(inner[:, 0], lengths):
            inner = None
    return Rows(np.concatenate(values) if len(items) > 1 else values[0], inner, lengths,
                np.array(shapes, dtype=np.int64).reshape(len(items), rank))


def split(value: SparseValue, what: str) -> Rows:
    """The elements of a batched SparseValue, split along its first index column: element
    ``i`` has the values of batch row ``i``, that column dropped, and ``dense_shape[1:]``.

    Raises:
      InvalidArgumentError: ``value`` has a rank below 2 (its elements would have none; TF
        refuses them too), or an index lies outside its dense shape.
    """
    rank = len(value.dense_shape)
    if rank < 2 or value.indices.shape[1] < 2:
        raise InvalidArgumentError(
            f"{what}: enqueue_many needs a batched sparse value, of rank 2 or more (a leading "
            f"batch dimension), got dense_shape {value.dense_shape.tolist()} (TF: Rank of "
            f"input SparseTensor should be > 1, but saw rank: {rank})")
    n = batch_size(value)
    lengths = _as_lists(value.indices, n) if rank == 2 and n >= 0 else None
    if lengths is not None:  # token lists, as parsed: no index to keep
        return Rows(value.values, None, lengths, value.dense_shape[None, 1:].repeat(n, axis=0))
    rows = value.indices[:, 0]
    if len(rows) > 1 and (rows[1:] < rows[:-1]).any():  # not in row-major order: sort
        order = np.argsort(rows, kind="stable")
        rows, inner, values = rows[order], value.indices[order, 1:], value.values[order]
    else:
        inner, values = value.indices[:, 1:], value.values
    if len(rows) and (rows[0] < 0 or rows[-1] >= n):
        outside = int(rows[0] if rows[0] < 0 else rows[-1])  # (rows are sorted now)
        raise InvalidArgumentError(f"{what}: a sparse value's index {outside} lies outside "
                                   f"its batch of {n}")
    lengths = np.diff(np.searchsorted(rows, np.arange(n + 1))).astype(np.int64)
    shapes = np.broadcast_to(value.dense_shape[1:], (n, rank - 1))
    if inner.shape[1] == 1 and _plain_lists(inner[:, 0], lengths):
        return Rows(values, None, lengths, shapes)  # lists, once sorted
    return Rows(values, np.ascontiguousarray(inner), lengths, shapes)


def split_all(values: Sequence[SparseValue], whats: Sequence[str]) -> List[Rows]:
    """:func:`split` of each batched SparseValue (of components ``whats``, for messages);
    the plain lists of a batch's many sparse components are checked with one set of NumPy
    calls for all of them."""
    if len(values) > 1:
        lengths = _all_as_lists(values)
        if lengths is not None:
            n = lengths.shape[1]
            return [Rows(value.values, None, row_lengths,
                         value.dense_shape[None, 1:].repeat(n, axis=0))
                    for value, row_lengths in zip(values, lengths)]
    return [split(value, what) for value, what in zip(values, whats)]


def _all_as_lists(values: Sequence[SparseValue]) -> Optional[np.ndarray]:
    """:func:`_as_lists` of several batches of one size ``n`` at once: their lengths
    ``[len(values), n]``, or None when any of them is not plain lists (or is empty).

    The indices are put one batch after the other with each row number raised by ``n``
    times the batch's place, as the rows of one batch of ``len(values) * n`` lists. Their
    lengths are counted; the rows must not decrease, and each value's place must be its
    position less where its list begins: then every list holds exactly its values, in
    order. The lists before each batch's first row must hold exactly the values of the
    batches before it, so that no batch's rows reach outside ``0 .. n - 1``. (No index is
    built per list: the lists outnumber the values here.)
    """
    n = batch_size(values[0])
    if n <= 0 or any(len(value.dense_shape) != 2 or value.indices.dtype != np.int64
                     or value.indices.ndim != 2 or value.indices.shape[1] != 2
                     or value.dense_shape[0] != n for value in values):
        return None
    counts = [len(value.indices) for value in values]
    indices = np.concatenate([value.indices for value in values])
    keys = indices[:, 0] + (counting(len(values)) * n).repeat(counts)
    try:
        lengths = np.bincount(keys, minlength=len(values) * n)
    except ValueError:  # a negative row
        return None
    if len(lengths) != len(values) * n or (keys[1:] < keys[:-1]).any():
        return None
    starts = lengths.cumsum()
    if not (starts[n - 1::n] == np.array(counts, dtype=np.int64).cumsum()).all():
        return None
    starts -= lengths
    places = starts.take(keys)
    np.subtract(counting(len(keys)), places, out=places)
    if not (indices[:, 1] == places).all():
        return None
    return lengths.reshape(len(values), n)


def _as_lists(indices: np.ndarray, n: int) -> Optional[np.ndarray]:
    """The lengths of ``n`` plain lists (element ``i``'s values at ``[i, 0], [i, 1], ...``,
    element after element) when ``indices [N, 2]`` are exactly theirs, else None: a few
    NumPy calls whatever ``n``, for the indices a parse of a chunk makes.

    Rows in order and within ``0 .. n - 1`` give each element's values as a run (its bounds
    searched), and each value's place must be its position less where its run begins.
    (One array of ``N`` is made, not one per column: a chunk's arrays are large enough that
    each costs the allocator fresh pages.)
    """
    if indices.dtype != np.int64:
        return None
    # (NumPy's methods and ufuncs here: its Python-level functions cost more than the work
    # on a chunk's few values of each of a wide schema's columns)
    rows = indices[:, 0]
    if len(rows) > 1 and (rows[1:] < rows[:-1]).any():
        return None
    bounds = rows.searchsorted(counting(n + 1))
    if bounds[0] != 0 or bounds[-1] != len(indices):  # a row outside 0 .. n - 1
        return None
    lengths = bounds[1:] - bounds[:-1]
    places = bounds[:-1].repeat(lengths)
    np.subtract(counting(len(indices)), places, out=places)
    if not (indices[:, 1] == places).all():
        return None
    return lengths


def is_list(indices: np.ndarray) -> bool:
    """True when ``indices [N, rank]`` are those of a plain list: rank 1, ``0 .. N - 1``."""
    return indices.shape[1] == 1 and bool((indices[:, 0] == counting(len(indices))).all())


def _listed(indices: Sequence[Any], counts: List[int]) -> bool:
    """True when ``indices``, the int64 ``[count, 1]`` indices of elements of ``counts``
    values, are 0, 1, ... in each, told by their bytes alone, with the GIL held. False also
    when the bytes cannot tell (another dtype or layout, more than ``_KEEP_GIL_VALUES``
    values): :func:`_plain_lists` then decides.

    NumPy's comparisons of more than 500 items let go of the GIL: with several runner
    threads stacking their groups of token lists, each such call handed the GIL to another
    thread, which kept it until its own next release."""
    total = sum(counts)
    if total > _KEEP_GIL_VALUES:
        return False
    try:
        joined = b"".join(indices)
    except (BufferError, TypeError, ValueError):  # not contiguous, not arrays, objects
        return False
    numbers = counting(max(counts, default=0)).tobytes()
    return len(joined) == 8 * total and joined == b"".join([numbers[:8 * n] for n in counts])


def _plain_lists(columns: np.ndarray, lengths: np.ndarray) -> bool:
    """True when ``columns``, the indices of elements of ``lengths`` values one after the
    other, are 0, 1, ... in every element."""
    if not len(columns):
        return True
    starts = (np.cumsum(lengths) - lengths)[lengths > 0]
    if columns[starts].any():
        return False
    steps = np.diff(columns)  # 1 inside an element
    steps[starts[1:] - 1] = 1  # (where one begins: its 0 is checked above)
    return bool((steps == 1).all())


def places(lengths: np.ndarray) -> np.ndarray:
    """``0 .. lengths[i] - 1`` for every i, one after the other: each value's place in its
    element, for elements of ``lengths`` values."""
    return segments(np.zeros(len(lengths), dtype=np.int64), lengths)


def list_indices(lengths: np.ndarray, total: int, n: Optional[int] = None) -> np.ndarray:
    """The indices ``[element, place]`` of ``total == lengths.sum()`` values of plain lists
    of ``lengths`` values, one after the other: int64 ``[total, 2]``. With ``n``, the lists
    are several batches of ``n`` elements one after the other, each numbered from 0."""
    out = np.empty((total, 2), dtype=np.int64)
    fill_list_indices(np.ascontiguousarray(lengths, dtype=np.int64),
                      n or max(1, len(lengths)), out)
    return out


def _fill_list_indices(lengths: np.ndarray, n: int, out: Any) -> None:
    """Writes to ``out`` (int64 ``[total, 2]``) the indices ``[list, place]`` of the values
    of plain lists of ``lengths`` values each (int64), one after the other, list ``j``
    numbered ``j % n``. ``out`` may be a list of such arrays instead, which take the lists
    in equal shares of whole batches of ``n``, one after the other. The pure twin of the
    core's ``list_indices``, which writes them with no array made (and lets go of the GIL
    once for a list of outs).

    Raises:
      ValueError: a length is negative or the lengths do not add up to ``out``'s rows
        (nothing is written; with a list of outs, the share is named and those before it are
        written), ``n`` is below 1, the lengths are not equal shares of whole batches for
        the outs, or an argument is not an array of the kind named.
    """
    n = operator.index(n)  # (first, as the core reads its arguments)
    if not -2**63 <= n < 2**63:
        raise OverflowError("Python int too large to convert to C ssize_t")
    if type(lengths) is not np.ndarray or lengths.dtype != np.int64 \
            or not lengths.flags.c_contiguous:
        raise ValueError("list_indices: lengths must be a C-contiguous array of int64")
    outs = list(out) if type(out) is list else [out]
    for one in outs:
        if type(one) is not np.ndarray or one.dtype != np.int64 or one.ndim != 2 \
                or one.shape[1] != 2 or not one.flags.writeable or not one.flags.c_contiguous:
            raise ValueError("list_indices: out must be a writable C-contiguous int64 array "
                             "of [total, 2]")
    if n < 1:
        raise ValueError(f"list_indices: n must be at least 1, got {n}")
    lengths = lengths.reshape(-1)
    if type(out) is not list:
        _fill_share(lengths, n, out, 0, None)
        return
    share = len(lengths) // len(outs) if outs else 0
    if share * len(outs) != len(lengths) or share % n:
        raise ValueError(f"list_indices: {len(lengths)} lists are not {len(outs)} equal "
                         f"shares of whole batches of {n}")
    for b, one in enumerate(outs):
        _fill_share(lengths[b * share:(b + 1) * share], n, one, b * share, b)


def _fill_share(lengths: np.ndarray, n: int, out: np.ndarray, first: int,
                share: Optional[int]) -> None:
    """:func:`_fill_list_indices` of lists ``first`` on, all of them into ``out``: share
    ``share`` of a list of outs, or (None) the one out."""
    if (lengths.min() < 0 or lengths.max() > len(out) or lengths.sum() != len(out)) \
            if len(lengths) else len(out):
        _refuse_lengths(lengths, len(out), first, share)
    elements = counting(len(lengths))
    if n != len(lengths):
        elements = elements % n
    starts = lengths.cumsum()
    starts -= lengths
    places = starts.repeat(lengths)
    np.subtract(counting(len(out)), places, out=places)
    out[:, 0], out[:, 1] = elements.repeat(lengths), places


fill_list_indices = core.list_indices if core is not None else _fill_list_indices


def empty_indices(rows: List[int]) -> List[np.ndarray]:
    """Int64 ``[r, 2]`` arrays for each ``r`` of ``rows``, their contents undefined (for
    :func:`fill_list_indices` to fill). With the core, on its Blocks: buffers freed by
    earlier batches are kept and given again, so that a batch's 270 KiB of indices are not
    fresh pages, each a fault and a page cleared by the kernel (most of a chunk's faults on
    token lists, twice as many with two enqueue threads: ``queuepipe/_core/module_blocks.c``).
    """
    if core is None:
        return [np.empty((r, 2), dtype=np.int64) for r in rows]
    return [np.frombuffer(block, dtype=np.int64).reshape(-1, 2)
            for block in core.blocks([16 * r for r in rows])]


def _refuse_lengths(lengths: np.ndarray, rows: int, first: int = 0,
                    share: Optional[int] = None) -> None:
    """Raises the ValueError of the core's ``list_indices`` for ``lengths`` (lists ``first``
    on) that do not fill ``rows`` rows: the first negative length, unless the lengths before
    it overflow them."""
    negative = np.flatnonzero(lengths < 0)
    before = lengths[:negative[0] if len(negative) else len(lengths)]  # (each one < 2**63)
    total = int(before.sum()) if not (before > rows).any() else rows + 1
    if total > rows or not len(negative):
        if share is not None:
            raise ValueError(f"list_indices: the lengths of share {share} do not add up to "
                             f"the {rows} rows of its out")
        raise ValueError(f"list_indices: the lengths do not add up to the {rows} rows of out")
    raise ValueError(f"list_indices: list {first + negative[0]} has a negative length "
                     f"({lengths[negative[0]]})")


# The longest a shared array grows to (2 MB): longer ones are made per call.
_MAX_COUNT = 1 << 18

# The most values whose indices stack checks by their bytes, with the GIL held (64 KB).
_KEEP_GIL_VALUES = 1 << 13


class _Shared:
    """Read-only int64 arrays of ``n`` items made by ``make`` (``np.arange``, ``np.ones``),
    as views of one array shared by every thread, which grows by doubling up to
    ``_MAX_COUNT`` items (longer ones are made per call): a batch's bookkeeping takes
    several, and a large array made and dropped per call costs the allocator fresh pages
    each time."""

    __slots__ = ("_make", "_array")

    def __init__(self, make: Callable[..., np.ndarray]) -> None:
        self._make = make
        self._array = self._frozen(1 << 12)

    def _frozen(self, n: int) -> np.ndarray:
        array = self._make(n, dtype=np.int64)
        array.flags.writeable = False
        return array

    def __call__(self, n: int) -> np.ndarray:
        array = self._array
        if n <= len(array):
            return array[:n]
        if n > _MAX_COUNT:
            return self._make(n, dtype=np.int64)
        array = self._frozen(max(n, 2 * len(array)))
        self._array = array  # (a thread still reading the old one keeps it alive meanwhile)
        return array[:n]


# ``np.arange(n)`` and ``np.ones(n)`` of int64, read-only views where they can be.
counting = _Shared(np.arange)
ones = _Shared(np.ones)


def zeroed(n: int) -> np.ndarray:
    """A new, writable int64 array of ``n`` zeros, made without letting go of the GIL
    (``np.zeros`` of 1 KiB or more lets go of it to ``calloc``: with runner threads beside
    it, a hand-over for a 512-record chunk's counts)."""
    return np.frombuffer(bytearray(8 * n), dtype=np.int64)


def counted(n: int) -> np.ndarray:
    """A new, writable int64 array of ``0 .. n - 1``, made without letting go of the GIL
    for up to a few hundred items. (``np.arange`` lets go of it to fill its array: once per
    feature and record, with runner threads beside it, the GIL went to another thread often
    enough to cost 36 us a call on average in the per-record pattern of a wide schema.)"""
    return counting(n).copy()


def segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of every i, one after the
    other: where the segments of a flat array lie (a gather of them, or a scatter)."""
    ends = lengths.cumsum()
    total = int(ends[-1]) if len(ends) else 0
    if len(starts) == 1:
        return np.arange(starts[0], starts[0] + total, dtype=np.int64)
    ends -= lengths  # each segment's start in the output
    np.subtract(starts, ends, out=ends)
    gather = ends.repeat(lengths)
    gather += counting(total)
    return gather


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
