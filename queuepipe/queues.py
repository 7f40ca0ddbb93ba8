"""Bounded, thread-safe queues of typed elements: TensorFlow 1's queues on NumPy.

A queue holds *elements*: tuples of components (or dicts, when the queue has ``names``), each
component a NumPy value of the queue's declared dtype and shape. Producers ``enqueue`` and
consumers ``dequeue``; ``enqueue_many`` and ``dequeue_many`` move a whole batch at once, each
component carrying a leading batch axis.

Usage::

    import queuepipe as qp

    q = qp.FIFOQueue(capacity=100, dtypes=[qp.float32, qp.string], shapes=[[3], []])
    q.enqueue_many((np.zeros((10, 3)), [b"a"] * 10))
    features, labels = q.dequeue_many(4)      # shapes (4, 3) and (4,)
    q.close()                                 # consumers drain what is left, then OutOfRangeError

Each queue here only chooses which rows its elements go to and leave from (a ring, a shuffled
pool, a heap). What they share lives in three modules, one concept each:
:mod:`queuepipe._elements` (what an element is, checked and converted before the lock is
taken), :mod:`queuepipe._columns` (one column per component: a preallocated array for a fixed
shape, an object per element for an unknown one, a flat arena for SparseValues) and
:mod:`queuepipe._queue_base` (blocking, waking, closing).

Semantics follow TensorFlow's ``tf.compat.v1`` queues exactly: closing, cancelling pending
enqueues, ``OutOfRangeError`` with TF's message, a failed ``dequeue_many`` leaving every element
in place, ``min_after_dequeue`` ignored after close. Beyond TF: ``timeout=`` on every blocking
call, :meth:`QueueBase.abort` to hand a producer's failure to the consumer, a warning when a
consumer waits on a queue whose runners were never started, and :meth:`QueueBase.stats`.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from queuepipe import _columns
from queuepipe import dtypes as _dtypes
from queuepipe._core import core
from queuepipe._elements import as_dtype_list, as_shape_list
from queuepipe._queue_base import STARVATION_WARNING_SECS, QueueBase
from queuepipe.errors import InvalidArgumentError

__all__ = [
    "STARVATION_WARNING_SECS",
    "QueueBase",
    "FIFOQueue",
    "RandomShuffleQueue",
    "PaddingFIFOQueue",
    "PriorityQueue",
]


class FIFOQueue(QueueBase):
    """A queue that hands out elements in the order they were enqueued.

    Fixed-shape components live in a ring buffer: ``capacity`` preallocated rows, a head
    index and a count; a batch that wraps around the end is moved with one fancy-index copy.

    Args:
      capacity: the most elements the queue holds; enqueues block while it is full.
      dtypes: one dtype per component, or ``None`` to take them from the first element.
      shapes: one shape per component (``None`` dims free), or ``None`` when unknown.
      names: one name per component; elements are then dicts.
      name: the queue's name; by default ``fifo_queue``, ``fifo_queue_1``, ...

    Usage::

        q = qp.FIFOQueue(10, [qp.int64], shapes=[[]])
        q.enqueue_many([np.arange(4)])
        q.dequeue()           # 0
        q.dequeue_many(3)     # array([1, 2, 3])
    """

    _DEFAULT_NAME = "fifo_queue"

    def __init__(self, capacity: int, dtypes: Any = None, shapes: Any = None,
                 names: Any = None, name: Optional[str] = None) -> None:
        self._head = 0
        self._count = 0
        super().__init__(capacity, dtypes, shapes, names, name)

    def _ring(self, start: int, n: int) -> Any:
        """The rows of ``n`` elements from ``start`` on: a slice, or indices when wrapping."""
        start %= self._rows
        if start + n <= self._rows:
            return slice(start, start + n)
        return (start + np.arange(n)) % self._rows

    def _size(self) -> int:
        return self._count

    def _reserve(self, n: int) -> None:
        """Grows the ring, unwrapped to start at row 0, unless ``n`` more elements fit."""
        if self._count + n > self._rows:
            self._grow(self._count + n, self._ring(self._head, self._count))
            self._head = 0

    def _put(self, batch: List[np.ndarray], n: int) -> None:
        self._reserve(n)
        self._write(self._ring(self._head + self._count, n), batch)
        self._count += n

    def _put_one(self, values: List[Any]) -> None:
        self._reserve(1)
        self._write_one((self._head + self._count) % self._rows, values)
        self._count += 1

    def _take(self, n: int) -> List[Any]:
        out = self._read(self._ring(self._head, n))
        self._head = (self._head + n) % self._rows
        self._count -= n
        return out

    def _take_one(self) -> List[Any]:
        out = self._read_one(self._head)
        self._head = (self._head + 1) % self._rows
        self._count -= 1
        return out

    def _held(self) -> Any:
        return self._ring(self._head, self._count) if self._rows else slice(0, 0)

    def _put_back(self, batch: List[np.ndarray], n: int) -> None:
        self._reserve(n)
        self._head = (self._head - n) % self._rows
        self._write(self._ring(self._head, n), batch)
        self._count += n


def _shuffle_in(slots: np.ndarray, start: int, places: np.ndarray) -> None:
    """A shuffle-in of :class:`RandomShuffleQueue`'s slots, in place: the ``len(places)``
    entries from ``start`` go to ``places`` (distinct, below ``start + len(places)``), in that
    order; the entries at the places below ``start`` that they take move, in the order of
    ``places``, to the places from ``start`` up that none of them takes, lowest first. The
    pure twin of the core's ``shuffle_in``, which moves them in one pass with no array made
    (and no NumPy call that lets go of the GIL: ten of them a chunk here)."""
    k = len(places)
    rows = slots[start:start + k].copy()
    displaced = places[places < start]
    if len(displaced):
        open_ = np.ones(k, dtype=bool)
        open_[places[places >= start] - start] = False
        slots[np.flatnonzero(open_) + start] = slots[displaced]
    slots[places] = rows


def _shuffle_slots(slots: np.ndarray, start: int, places: np.ndarray) -> None:
    """:func:`_shuffle_in` by the core where it can take the arrays (int64 slots, as
    ``np.intp`` is on 64-bit platforms)."""
    if _core_shuffle_in is not None and slots.dtype == np.int64 and places.dtype == np.int64:
        _core_shuffle_in(slots, start, places)
    else:
        _shuffle_in(slots, start, places)


_core_shuffle_in = getattr(core, "shuffle_in", None) if core is not None else None
_core_draw_places = getattr(core, "draw_places", None) if core is not None else None


def _draws_as_choice() -> bool:
    """Whether the core's ``draw_places`` gives what this NumPy's ``choice`` gives (checked
    once, on a draw of its tail shuffle: the core copies NumPy's way of drawing, which a
    NumPy of another version could change)."""
    global _checked_draws
    draw = _core_draw_places
    if draw is None:
        return False
    if _checked_draws is None:
        ours, numpys = np.random.default_rng(0), np.random.default_rng(0)
        out = np.empty(300, dtype=np.int64)
        with ours.bit_generator.lock:
            draw(ours.bit_generator.capsule, 10001, 300, out)
        _checked_draws = out.tolist() == numpys.choice(10001, size=300, replace=False).tolist() \
            and ours.bit_generator.state == numpys.bit_generator.state
    return _checked_draws


_checked_draws: Optional[bool] = None


def _places(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """``rng.choice(n, size=k, replace=False)``, the places of a shuffle-in. Where choice
    shuffles the tail of ``0 .. n - 1`` (``n`` above 10,000 and ``k`` above ``n // 50``: a
    chunk put in a full buffer), the core's ``draw_places`` makes the same draws of the same
    generator without choice's ``arange`` of ``n`` items, its copy, and its two let-gos of
    the GIL (each a hand-over to another thread); the same places, the generator left the
    same."""
    draw = _core_draw_places
    if draw is None or n <= 10000 or k <= n // 50 or not _draws_as_choice():
        return rng.choice(n, size=k, replace=False)
    out = np.empty(k, dtype=np.int64)
    bit_generator = rng.bit_generator
    with bit_generator.lock:
        draw(bit_generator.capsule, n, k, out)
    return out


class RandomShuffleQueue(QueueBase):
    """A queue that hands out its elements in random order.

    While the queue is open a dequeue leaves at least ``min_after_dequeue`` elements behind,
    so that each element is drawn from a well-mixed pool: ``dequeue`` waits until
    ``size > min_after_dequeue`` and ``dequeue_many(n)`` until ``size >= n +
    min_after_dequeue``. After ``close()`` the rule is dropped and the queue drains.

    Fixed-shape components live in dense preallocated arrays, each element in one row that
    it keeps while queued; an index array lists the rows of the elements held, then the free
    ones. The held part is kept in uniformly random order: an enqueue appends its elements,
    and the next dequeue first puts all those appended since the last one at random places
    (drawn with the queue's own generator, ``np.random.default_rng(seed)``), moving the
    entries they displace to the end. A dequeue of ``n`` then takes the last ``n`` entries,
    which are a uniformly random pick in random order, exactly as ``n`` draws of one element
    each would be; a dequeue costs one draw and a few index moves, and rows move only in and
    out. What a seeded queue hands out depends only on the elements and where the dequeues
    fall among them, not on how the enqueues were grouped: fed and drained by one thread, it
    gives the same order on every run.

    Args:
      capacity: the most elements the queue holds; enqueues block while it is full.
      min_after_dequeue: elements kept back while open; ``0 <= min_after_dequeue < capacity``.
      dtypes: one dtype per component, or ``None`` to take them from the first element.
      shapes: one shape per component (``None`` dims free), or ``None`` when unknown.
      names: one name per component; elements are then dicts.
      seed: seeds the queue's generator; ``None`` draws fresh entropy.
      name: the queue's name; by default ``random_shuffle_queue``, ``random_shuffle_queue_1``...

    Raises:
      InvalidArgumentError: as for :class:`QueueBase`, or ``min_after_dequeue`` out of range.
    """

    _DEFAULT_NAME = "random_shuffle_queue"

    def __init__(self, capacity: int, min_after_dequeue: int, dtypes: Any = None,
                 shapes: Any = None, names: Any = None, seed: Optional[int] = None,
                 name: Optional[str] = None) -> None:
        self._count = 0
        self._appended = 0  # the last entries held, enqueued since the last dequeue
        # The rows of the elements held (the first _count entries: the shuffled ones in random
        # order, then the _appended ones), then the free rows: every row appears once.
        self._slots = np.empty(0, dtype=np.intp)
        super().__init__(capacity, dtypes, shapes, names, name)
        if isinstance(min_after_dequeue, bool) \
                or not isinstance(min_after_dequeue, (int, np.integer)) \
                or not 0 <= min_after_dequeue < self._capacity:
            raise InvalidArgumentError(
                f"min_after_dequeue must be >= 0 and < capacity ({self._capacity}), got "
                f"{min_after_dequeue!r}")
        self._min_after_dequeue = int(min_after_dequeue)
        self._rng = np.random.default_rng(seed)

    @property
    def min_after_dequeue(self) -> int:
        """Elements a dequeue leaves behind while the queue is open."""
        return self._min_after_dequeue

    def _min_after(self) -> int:
        return self._min_after_dequeue

    def _size(self) -> int:
        return self._count

    def _rows_changed(self) -> None:
        known = len(self._slots)  # _grow keeps those rows
        added = np.arange(known, self._rows)
        self._slots = np.concatenate([self._slots, added])

    def _reserve(self, n: int) -> None:
        """Grows the columns (every row kept: the slots point into them) unless ``n`` more
        elements fit: the first time to twice ``min_after_dequeue`` at once (the queue holds
        more than that many before its first dequeue), instead of doubling up to it from
        the first columns' few rows (a wide schema's 200 columns: four grows, each a new
        table and a copy, before its first batch)."""
        if self._count + n > self._rows:
            self._grow(max(self._count + n, min(self._capacity, 2 * self._min_after_dequeue)),
                       slice(0, self._rows))

    def _put(self, batch: List[np.ndarray], n: int) -> None:
        self._reserve(n)
        self._write(self._slots[self._count:self._count + n], batch)
        self._count += n
        self._appended += n

    _put_back = _put  # order means nothing here

    def _put_one(self, values: List[Any]) -> None:
        self._reserve(1)
        self._write_one(int(self._slots[self._count]), values)
        self._count += 1
        self._appended += 1

    def _pool(self, n: int) -> int:
        """How many of the appended entries a dequeue of ``n`` shuffles in first: all."""
        return self._appended

    def _shuffle_in(self, k: int) -> None:
        """Puts the first ``k`` appended entries at random places of the shuffled ones, a
        random pick of places in random order; the entries at places below them move to the
        places above that none took."""
        slots = self._slots
        start = self._count - self._appended
        self._appended -= k
        if k == 1:  # one step of the inside-out shuffle
            place = int(self._rng.integers(start + 1))
            slots[place], slots[start] = slots[start], slots[place]
            return
        _shuffle_slots(slots, start, _places(self._rng, start + k, k))

    def _draw(self, n: int) -> np.ndarray:
        """Removes ``n`` elements, a uniformly random pick in random order; returns their rows
        (the first free rows now)."""
        k = self._pool(n)
        if k:
            self._shuffle_in(k)
        slots, count = self._slots, self._count
        end = count - self._appended  # the end of the shuffled entries
        rows = slots[end - n:end].copy()
        if end < count:  # entries appended after the pool close the gap
            slots[end - n:count - n] = slots[end:count]
            slots[count - n:count] = rows
        self._count = count - n
        return rows

    def _held(self) -> Any:
        return self._slots[:self._count]

    def _order_state(self) -> Dict[str, Any]:
        return {"appended": self._appended, "rng": self._rng.bit_generator.state}

    def _load_order(self, order: Dict[str, Any]) -> None:
        self._appended = int(order["appended"])
        self._rng.bit_generator.state = order["rng"]

    def _take(self, n: int) -> List[Any]:
        return self._read(self._draw(n))

    def _take_batches(self, n: int, k: int) -> Iterator[List[Any]]:
        """Draws ``k`` batches one after the other, then reads them together: a column of
        image rows gathers them in one call that lets go of the GIL (see ``_read_batches``).
        A draw that raises raises once the batches drawn before it are given."""
        drawn: List[np.ndarray] = []
        failed: Optional[BaseException] = None
        try:
            for _ in range(k):
                drawn.append(self._draw(n))
        except BaseException as e:  # noqa: B902 - raised again below
            failed = e
        if drawn:
            yield from self._read_batches(drawn)
        if failed is not None:
            raise failed

    def _take_one(self) -> List[Any]:
        return self._read_one(int(self._draw(1)[0]))


class _ArrivalPoolShuffleQueue(RandomShuffleQueue):
    """A RandomShuffleQueue whose dequeue of ``n`` draws from the first elements it holds, in
    the order they arrived: at most ``min_after_dequeue + n`` of them, at least that less a
    few batches (from all, when it holds fewer).

    What it hands out then depends only on the order of its elements, not on how far ahead
    of the consumer the producer got: fed in a fixed order with a seed, it repeats exactly,
    while its producer still runs ahead into the rest of the capacity. (TF's queue, and
    :class:`RandomShuffleQueue`, draw from every element held.) The seeded batching
    functions use it (their threads take turns, so that the order is fixed).

    Arrivals join the pool a few batches at a time: a dequeue takes none in while the pool
    holds at least ``min_after_dequeue + n - min(3 * n, min_after_dequeue // 2)``, and then
    as many as bring it back to ``min_after_dequeue + n``. With a fixed batch size that is
    one shuffle-in every fourth batch, as the unseeded queue does once per chunk of four
    batches, instead of one per batch (the seed's extra work in ``read_batch_features`` fell
    from 11% to 3-5%; docs/performance.md). Each batch is still a uniform draw from its pool.

    A batch larger than the room beside ``min_after_dequeue`` is taken in pieces of that
    room, each from a full queue (or, once closed, from what is left), never of whatever
    size happens to have arrived: its pools too depend on the order alone.
    """

    _fixed_pieces = True

    def _pool(self, n: int) -> int:
        # Closed or not: a dequeue after the close may come sooner or later, and must draw
        # from the same pool. (Fewer than min_after_dequeue + n held: all of them.) The pool
        # never holds more than the first min_after_dequeue + n elements not yet taken, which
        # an open queue's dequeue waits for, so no arrival's timing decides it.
        shuffled = self._count - self._appended
        full = self._min_after_dequeue + n
        if shuffled >= full - min(3 * n, self._min_after_dequeue // 2):
            return 0
        return min(self._appended, full - shuffled)


class PaddingFIFOQueue(FIFOQueue):
    """A FIFOQueue whose ``None`` dimensions are padded per batch.

    Each component's rank must be known; a ``None`` dimension may differ from element to
    element. ``dequeue`` returns an element as it was enqueued; ``dequeue_many`` and
    ``dequeue_up_to`` pad every such dimension to the largest size in that batch, with ``0``
    (numbers) or ``b""`` (strings), as TF's ``PaddingFIFOQueue`` does.

    Args:
      capacity: the most elements the queue holds; enqueues block while it is full.
      dtypes: one dtype per component (required).
      shapes: one shape per component, of known rank, ``None`` for a padded dimension
        (required).
      names: one name per component; elements are then dicts.
      name: the queue's name; by default ``padding_fifo_queue``, ``padding_fifo_queue_1``...

    Raises:
      InvalidArgumentError: ``dtypes`` or ``shapes`` is missing, a shape has unknown rank, or
        as for :class:`QueueBase`.
    """

    _DEFAULT_NAME = "padding_fifo_queue"

    def __init__(self, capacity: int, dtypes: Any, shapes: Any, names: Any = None,
                 name: Optional[str] = None) -> None:
        if dtypes is None:
            raise InvalidArgumentError("PaddingFIFOQueue requires dtypes, got None")
        if shapes is None:
            raise InvalidArgumentError(
                "When providing partial shapes, a list of shapes must be provided: "
                "PaddingFIFOQueue requires shapes (None for a dimension to pad), got None")
        flat = [i for i, shape in enumerate(shapes if isinstance(shapes, (list, tuple)) else ())
                if shape is None or isinstance(shape, (int, np.integer))]
        if not isinstance(shapes, (list, tuple)) or not shapes or flat:
            raise InvalidArgumentError(  # TF's ValueError: a flat [None] is no list of shapes
                f"When providing partial shapes, a list of shapes must be provided: "
                f"PaddingFIFOQueue needs one shape per component, and all shapes must have a "
                f"defined rank: "
                f"{f'shapes[{flat[0]}] is {shapes[flat[0]]!r}' if flat else f'got {shapes!r}'}")
        declared = as_shape_list(shapes) or []
        for i, shape in enumerate(declared):
            if shape is None:
                raise InvalidArgumentError(
                    f"All shapes must have a defined rank: PaddingFIFOQueue needs the rank of "
                    f"every component: shapes[{i}] is None")
        # Every shape, of known rank; set before the base class makes the columns.
        self._ranked = [shape for shape in declared if shape is not None]
        super().__init__(capacity, dtypes, shapes, names, name)

    def _empty_batch(self, op: str) -> Any:
        """Every component's rank is known: a batch of no element has 0 for each dimension
        to pad, as TF's ``dequeue_many(0)`` gives it."""
        spec = self._spec
        if any(spec.kinds):
            return super()._empty_batch(op)
        return spec.structure([np.empty((0,) + tuple(dim or 0 for dim in shape), dtype=dtype)
                               for shape, dtype in zip(self._ranked, spec.known_dtypes)])

    def _column(self, i: int, rows: int) -> Any:
        spec = self._spec
        if spec.dense_shape(i) is not None or spec.kinds[i]:
            return super()._column(i, rows)
        return _columns.PaddedColumn(rows, spec.known_dtypes[i],
                                     f"Queue '{self._name}' component {spec.label(i)}",
                                     len(self._ranked[i]))


class PriorityQueue(QueueBase):
    """A queue that hands out the element with the lowest priority first; ties leave FIFO.

    Every element's first component is its priority, an int64 scalar, so the queue's dtypes
    are ``[qp.int64] + types`` and a dequeued element starts with its priority (as in TF).

    Args:
      capacity: the most elements the queue holds; enqueues block while it is full.
      types: the dtypes of the components after the priority.
      shapes: the shapes of the components after the priority, or ``None`` when unknown.
      names: one name per component, the priority's first; elements are then dicts.
      name: the queue's name; by default ``priority_queue``, ``priority_queue_1``, ...

    Usage::

        q = qp.PriorityQueue(10, [qp.string], shapes=[[]])
        q.enqueue((2, b"later"))
        q.enqueue((1, b"sooner"))
        q.dequeue()          # (1, b'sooner')

    Raises:
      InvalidArgumentError: as for :class:`QueueBase`; enqueue raises it for a priority that
        is not an int64 scalar.
    """

    _DEFAULT_NAME = "priority_queue"

    def __init__(self, capacity: int, types: Any, shapes: Any = None, names: Any = None,
                 name: Optional[str] = None) -> None:
        if types is None:
            raise InvalidArgumentError("PriorityQueue requires types (use [] for priority "
                                       "only), got None")
        types = as_dtype_list(types)
        # With no component after the priority, shapes=[] lists no shape (as in TF), not
        # the scalar shape of one component.
        shapes = [] if not types and isinstance(shapes, (list, tuple)) and not shapes \
            else as_shape_list(shapes)
        shapes = [()] + (shapes if shapes is not None else [None] * len(types))
        self._heap: List[Tuple[int, int, int]] = []  # (priority, sequence, row)
        self._sequence = itertools.count()
        self._front = 0  # sequence numbers below every other, for elements put back
        super().__init__(capacity, [_dtypes.int64] + types, shapes, names, name)
        self._free = list(range(self._rows - 1, -1, -1))  # rows not holding an element

    def _size(self) -> int:
        return len(self._heap)

    def _claim(self, n: int) -> np.ndarray:
        """``n`` free rows, growing the storage when they run out (as elements arrive, or
        when elements are put back over capacity)."""
        if len(self._free) < n:
            old = self._rows
            self._grow(old + n, slice(0, old))
            self._free[:0] = range(self._rows - 1, old - 1, -1)
        return np.array([self._free.pop() for _ in range(n)], dtype=np.intp)

    def _store(self, batch: List[np.ndarray], sequences: Any) -> None:
        rows = self._claim(len(batch[0]))
        self._write(rows, batch)
        for entry in zip(batch[0].tolist(), sequences, rows.tolist()):
            heapq.heappush(self._heap, entry)

    def _put(self, batch: List[np.ndarray], n: int) -> None:
        self._store(batch, itertools.islice(self._sequence, n))

    def _put_back(self, batch: List[np.ndarray], n: int) -> None:
        self._front -= n
        self._store(batch, range(self._front, self._front + n))

    def _put_one(self, values: List[Any]) -> None:
        row = int(self._claim(1)[0])
        self._write_one(row, values)
        heapq.heappush(self._heap, (int(values[0]), next(self._sequence), row))

    def _take(self, n: int) -> List[np.ndarray]:
        rows = np.array([heapq.heappop(self._heap)[2] for _ in range(n)], dtype=np.intp)
        out = self._read(rows)
        self._free.extend(rows.tolist())
        return out

    def _take_one(self) -> List[Any]:
        row = heapq.heappop(self._heap)[2]
        out = self._read_one(row)
        self._free.append(row)
        return out
