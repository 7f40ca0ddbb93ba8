"""The blocking core every queue shares: structure in, storage hooks, waiting and waking.

:class:`QueueBase` takes elements in (checked by :class:`~queuepipe._elements.Components`
before the lock is taken), keeps them in one column per component (:mod:`queuepipe._columns`),
and blocks and wakes producers and consumers. The concrete queues of :mod:`queuepipe.queues`
only choose which rows elements go to and leave from.

How it is built (modelled on CPython's ``Lib/queue.py``)::

    producer --enqueue--> Components.element --lock--> _put_one --> columns[i].write_one
    runner --group-->     stage (deque)        --lock--> _put      --> columns[i].write
    consumer <--dequeue_many-- columns[i].finish <-- _take (rows) <--lock-- wait for n

* One lock per queue, and two Conditions on it named after what they announce: ``not_empty``
  (an element arrived, or the queue closed) and ``not_full`` (room appeared, or enqueues were
  cancelled). Every wait is a ``while`` loop that re-checks its condition against a
  ``time.monotonic()`` deadline, so ``timeout=``, ``close()`` and ``abort()`` always wake it.
* Subclasses override small hooks (``_size``, ``_put``, ``_put_one``, ``_take``, ``_take_one``,
  ``_put_back``) that run with the lock held and never block; they address elements by row
  and move them with ``_write``/``_read``, which hand each component to its column.
* A fixed-shape component lives in a preallocated array, so ``enqueue_many``/``dequeue_many``
  are slice copies with no per-element Python loop; a sparse component lives flat in an
  arena, so a batch of SparseValues is a gather, not an object per element, and the sparse
  components' rows are kept in shared tables (``_columns.SparseColumns``) that move a batch
  for all of them at once.
"""

from __future__ import annotations

import _thread
import collections
import copy
import threading
import time
import warnings
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np

from queuepipe import _columns
from queuepipe._elements import Components, fmt_shape, unique_name
from queuepipe.errors import (
    CancelledError, DeadlineExceededError, InvalidArgumentError, OutOfRangeError,
)

__all__ = ["STARVATION_WARNING_SECS", "QueueBase", "wait_holding"]

# A dequeue blocked this long on a queue whose QueueRunners were never started warns once.
STARVATION_WARNING_SECS = 5.0

# The main thread never waits longer than this at once, so that a KeyboardInterrupt delivered
# from another thread (``_thread.interrupt_main()``, ``signal.raise_signal`` in a worker) is
# raised within this time, not when the wait ends (which may be never).
_MAIN_THREAD_WAIT_SLICE_SECS = 0.1

# An enqueue of many elements that waits for room waits for this fraction of the capacity
# (or for all it has left to put) unless a dequeue waits too: see _refill_wanted.
_REFILL_FRACTION = 16

# The most elements a queue's first columns hold; they double as elements arrive, up to the
# capacity (a capacity of 10**8 would otherwise allocate gigabytes before the first element).
_INITIAL_ROWS = 1024

# How often an enqueue of one element or one batch yields the GIL while the queue's lock is
# held (_let_holder_finish; a grouped put does not).
_YIELDS_TO_HOLDER = 4

_MAIN_THREAD_ID = threading.main_thread().ident

# A batch drawn ahead whose finishing raised (see QueueBase._draw_ahead).
_FAILED = object()
# What a dequeue waiting for a batch drawn ahead to be finished needs (see QueueBase._wait).
_FINISH = -1


def wait_holding(condition: threading.Condition, lock: Any, timeout: Optional[float]) -> None:
    """``condition.wait(timeout)``, after which ``lock`` (an ``RLock``) is held however the
    wait ended.

    A KeyboardInterrupt can land in ``Condition.wait``'s own ``finally`` before it takes the
    lock back; the caller's ``with lock:`` would then release a lock it does not hold
    (``RuntimeError: release unlocked lock``, the interrupt lost) and leave the queue's state
    unguarded. An ``RLock`` knows its owner in C (``_is_owned``), so the lock is taken back
    exactly when the wait did not, and the interrupt goes on. (An ``RLock`` also gives the
    Condition C-level ``_release_save``/``_acquire_restore``, which shrinks that window to
    almost nothing in the first place.)
    """
    try:
        condition.wait(timeout)
    except BaseException:
        if not lock._is_owned():
            lock.acquire()
        raise


def _let_holder_finish(lock: Any) -> None:
    """Yields the GIL a few times while ``lock`` is held, before a ``with lock:``.

    A thread that blocks on a lock whose holder is waiting for the GIL is handed the lock by
    the OS at release, and then waits for the GIL itself while the other thread runs on
    until it needs the lock again and blocks: a lock convoy, two thread switches per
    element for as long as the producers run. Yielding first lets the holder release the
    lock in its own time slice. (The lock is still taken by ``with``, in C.) Two threads
    enqueuing 784-byte rows one at a time: 113-133k elements/s with the yields, 70-83k
    without.
    """
    if _thread.get_ident() == _MAIN_THREAD_ID:
        # The probe takes the lock for a moment: a Ctrl-C between its acquire and release
        # would leave the lock held. Only the main thread gets Ctrl-C, and convoys are the
        # runner threads' matter.
        return
    for _ in range(_YIELDS_TO_HOLDER):
        if lock.acquire(False):  # free (the caller never holds it here)
            lock.release()
            return
        time.sleep(0)



class QueueBase:
    """The base class of every queue: element structure, validation, blocking and closing.

    Subclasses choose the order in which elements leave by overriding the storage hooks
    (``_size``, ``_put``, ``_put_one``, ``_take``, ``_take_one``, ``_put_back``); every hook
    runs with ``self._lock`` held and never blocks. Use one of the concrete queues.

    Args:
      capacity: the most elements the queue holds; enqueues block while it is full.
      dtypes: one dtype per component (``qp.float32``, ``qp.string``, ...), a single dtype for
        a one-component queue, or ``None`` to take the dtypes of the first element enqueued.
      shapes: one shape per component (a list of ints, ``None`` for a free dimension), or
        ``None`` for shapes that are unknown. Fully defined shapes let the queue keep the
        component in a preallocated array.
      names: one name per component; elements are then dicts with exactly these keys.
      name: the queue's name, used in messages; by default a unique name per queue kind.

    Raises:
      InvalidArgumentError: ``capacity`` is not a positive int, or ``dtypes``, ``shapes`` and
        ``names`` disagree in length or hold values that are not dtypes, shapes or strings.
    """

    _DEFAULT_NAME = "queue"

    def __init__(self, capacity: int, dtypes: Any = None, shapes: Any = None,
                 names: Any = None, name: Optional[str] = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) \
                or capacity <= 0:
            raise InvalidArgumentError(f"capacity must be a positive int, got {capacity!r}")
        self._capacity = int(capacity)
        self._name = name if name is not None else unique_name(self._DEFAULT_NAME)
        # An RLock, for its C-level owner (see wait_holding); never taken twice by a thread.
        self._lock = threading.RLock()
        self._columns: List[Any] = []  # one per component, made once the dtypes are known
        # Columns that move their members' batches together: the fixed-shape components of
        # one dtype and shape (DenseColumns), and the sparse ones (SparseColumns, made once a
        # component holds SparseValues, also kept as _sparse).
        self._groups: List[Any] = []
        self._sparse: Optional[_columns.SparseColumns] = None
        self._rows = 0  # rows allocated in each column (grown up to capacity as needed)
        self._spec = Components(self._name, dtypes, shapes, names, self._lock,
                                on_bound=self._allocate, on_kind=self._decided)
        # Announces that an element arrived, or that the queue closed or aborted.
        self._not_empty = threading.Condition(self._lock)
        # Announces that room appeared, or that pending enqueues are cancelled.
        self._not_full = threading.Condition(self._lock)
        # The size each blocked dequeue waits for: an enqueue wakes them only once the
        # smallest is reached (waking a consumer per element costs a thread switch each).
        self._needs: List[int] = []
        # The room each blocked enqueue waits for: a dequeue wakes them only once the
        # smallest is there, or while a dequeue waits itself (see _wake_producers).
        self._room_needs: List[int] = []
        # Elements that grouping enqueue ops produced and checked but did not put yet (see
        # _add_stage); a dequeue about to wait takes them first.
        self._stages: List[collections.deque] = []
        # Batches drawn ahead (see _draw_ahead): (raw, finished) batches of _ahead_size
        # elements, oldest first, and the most of them kept.
        self._ahead: collections.deque = collections.deque()
        self._ahead_size = 0
        self._ahead_limit = 0
        # Dequeues of another size than _ahead_size under way: nothing is drawn ahead meanwhile
        # (they would not take it, and it would hold their elements back).
        self._other_sizes = 0
        # What the batches handed out become instead of their components' finish, a list of
        # them at a time (see _draw_ahead).
        self._batch_finish: Optional[Callable[[List[Any]], List[Any]]] = None
        self._closed = False
        self._cancelled = False
        self._abort_exc: Optional[BaseException] = None
        self._runners_added = 0
        self._runners_started = 0
        self._starvation_warned = False
        self._enqueued = 0
        self._dequeued = 0
        self._consumer_wait = 0.0
        self._producer_wait = 0.0
        if self._spec.dtypes is not None:
            self._allocate()


    @property
    def capacity(self) -> int:
        """The most elements the queue holds before enqueues block."""
        return self._capacity

    @property
    def name(self) -> str:
        """The queue's name, as used in every message about it."""
        return self._name

    @property
    def dtypes(self) -> Optional[List[np.dtype]]:
        """The component dtypes, or ``None`` until the first enqueue when none were given."""
        return None if self._spec.dtypes is None else list(self._spec.dtypes)

    @property
    def shapes(self) -> Optional[List[Optional[Tuple[Optional[int], ...]]]]:
        """The declared component shapes (``None`` dims free), or ``None`` when unknown."""
        return None if self._spec.shapes is None else list(self._spec.shapes)

    @property
    def names(self) -> Optional[List[str]]:
        """The component names, or ``None`` for a queue of tuples."""
        return None if self._spec.names is None else list(self._spec.names)

    def size(self) -> int:
        """The number of elements in the queue now."""
        with self._lock:
            return self._size() + self._drawn()

    def is_closed(self) -> bool:
        """True once :meth:`close` or :meth:`abort` was called."""
        with self._lock:
            return self._closed

    def stats(self) -> Dict[str, Any]:
        """Cumulative counters, cheap to read while the queue is in use.

        Returns:
          A dict with ``enqueued`` and ``dequeued`` (elements so far), ``size``, ``capacity``,
          and ``consumer_wait_secs`` / ``producer_wait_secs``: the total seconds dequeues and
          enqueues spent blocked. A large consumer wait means the producers are too slow.
        """
        with self._lock:
            return {
                "enqueued": self._enqueued,
                "dequeued": self._dequeued,
                "size": self._size() + self._drawn(),
                "capacity": self._capacity,
                "consumer_wait_secs": self._consumer_wait,
                "producer_wait_secs": self._producer_wait,
            }

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} '{self._name}' size={self.size()} "
                f"capacity={self._capacity} closed={self.is_closed()}>")

    def _size(self) -> int:
        """The number of elements held."""
        raise NotImplementedError

    def _put(self, batch: List[np.ndarray], n: int) -> None:
        """Stores the ``n`` elements of ``batch``; room for them is guaranteed."""
        raise NotImplementedError

    def _put_one(self, values: List[Any]) -> None:
        """Stores one element; room for it is guaranteed."""
        raise NotImplementedError

    def _take(self, n: int) -> List[np.ndarray]:
        """Removes ``n <= _size()`` elements and returns them as raw columns."""
        raise NotImplementedError

    def _take_one(self) -> List[Any]:
        """Removes one element (``_size() >= 1``) and returns its component values."""
        raise NotImplementedError

    def _put_back(self, batch: List[np.ndarray], n: int) -> None:
        """Returns elements taken by a dequeue that failed, so that they leave next and in
        their order. May exceed ``capacity`` (it then grows the storage)."""
        raise NotImplementedError

    def _allocate(self) -> None:
        """Makes the columns, once the dtypes are known: with room for ``_INITIAL_ROWS``
        elements at most; :meth:`_grow` doubles them as elements arrive, up to the capacity,
        so a large capacity costs nothing until used."""
        spec = self._spec
        self._rows = min(self._capacity, _INITIAL_ROWS)
        self._columns = [self._column(i, self._rows) for i in range(len(spec.known_dtypes))]
        alike: Dict[Tuple[np.dtype, Tuple[int, ...]], List[int]] = {}
        for i, column in enumerate(self._columns):
            if type(column) is _columns.DenseColumn:
                alike.setdefault((column.data.dtype, column.data.shape[1:]), []).append(i)
        for (dtype, shape), members in alike.items():
            if len(members) > 1:
                group = _columns.DenseColumns(self._rows, dtype, shape)
                for i in members:
                    self._columns[i] = group.add(i)
                self._groups.append(group)
        self._rows_changed()

    def _column(self, i: int, rows: int) -> Any:
        """An empty column for component ``i``, of the kind its declaration or first value
        says (an ObjectColumn while that is undecided)."""
        spec = self._spec
        shape, dtype = spec.dense_shape(i), spec.known_dtypes[i]
        if shape is not None:
            return _columns.DenseColumn(rows, dtype, shape)
        what = f"Queue '{self._name}' component {spec.label(i)}"
        if spec.kinds[i]:
            if self._sparse is None:
                self._sparse = _columns.SparseColumns(rows)
                self._groups.append(self._sparse)
            return self._sparse.add(i, dtype, what)
        return _columns.ObjectColumn(rows, dtype, what)

    def _decided(self, i: int) -> None:
        """Component ``i``'s first value decided its kind (lock held, before any is stored)."""
        self._columns[i] = self._column(i, self._rows)

    def _rows_changed(self) -> None:
        """Called once the columns were made or grown to ``self._rows`` rows."""

    def _grow(self, needed: int, keep: Any) -> None:
        """Reallocates the columns with at least ``needed`` rows (twice as many, up to the
        capacity), moving rows ``keep`` (a slice or index array, in order) to the front."""
        self._rows = max(min(2 * self._rows, self._capacity), needed)
        self._columns = [column if column.grouped else column.resized(self._rows, keep)
                         for column in self._columns]
        for group in self._groups:
            group.resize(self._rows, keep)
        self._rows_changed()

    def _write(self, index: Any, batch: List[Any]) -> None:
        """Stores a raw batch at rows ``index`` (a slice or an index array)."""
        for column, values in zip(self._columns, batch):
            if not column.grouped:
                column.write(index, values)
        for group in self._groups:
            group.write(index, batch)

    def _write_one(self, row: int, values: List[Any]) -> None:
        for column, value in zip(self._columns, values):
            column.write_one(row, value)

    def _read(self, index: Any) -> List[Any]:
        """The raw batch at rows ``index``, which are then cleared."""
        out = [None if column.grouped else column.read(index) for column in self._columns]
        self._read_groups_and_clear(index, out)
        return out

    def _read_groups_and_clear(self, index: Any, out: List[Any]) -> None:
        """Sets the grouped components of the raw batch ``out`` to those at rows ``index``,
        then clears the rows."""
        for group in self._groups:
            group.read(index, out)
        self._clear(index)

    def _clear(self, index: Any) -> None:
        """Clears rows ``index`` of every column, once read."""
        for group in self._groups:
            group.clear(index)
        for column in self._columns:
            if not column.grouped:
                column.clear(index)

    def _read_batches(self, indices: List[Any]) -> List[List[Any]]:
        """The raw batches at rows ``indices[0]``, ``indices[1]``, ... (disjoint), as
        :meth:`_read` of each gives them, the rows then cleared: a column or a group of
        columns of numbers gathers them all in one call (mnist's labels and ordinals, a call
        a batch and the Python around it: 5% of what its pipeline ran holding the GIL,
        ``benchmarks/instructions.py features --gil-held``), and where a batch finish takes
        them (they reach no user) a column of objects gives views of one array
        (``DenseColumn.read_batches``)."""
        outs: List[List[Any]] = [[None] * len(self._columns) for _ in indices]
        shared = self._batch_finish is not None
        for c, column in enumerate(self._columns):
            if column.grouped:
                continue
            batches = column.read_batches(indices, shared) \
                if isinstance(column, _columns.DenseColumn) \
                else [column.read(index) for index in indices]
            for out, batch in zip(outs, batches):
                out[c] = batch
        for group in self._groups:
            group.read_batches(indices, outs)
        for index in indices:
            self._clear(index)
        return outs

    def _finish(self, raw: List[Any]) -> Any:
        """A raw batch as the dequeue returns it: every component's ``finish``, in the
        elements' structure; or, where the queue has a batch finish, what that makes of the
        raw batch in the elements' structure."""
        if self._batch_finish is not None:
            return self._batch_finish([self._spec.structure(raw)])[0]
        out = [None if column.grouped else column.finish(values)
               for column, values in zip(self._columns, raw)]
        for group in self._groups:
            group.finish(raw, out)
        return self._spec.structure(out)

    def _read_one(self, row: int) -> List[Any]:
        out = [column.read_one(row) for column in self._columns]
        for column in self._columns:
            column.clear(row)
        return out

    # -- blocking ---------------------------------------------------------------------------

    def _wait(self, condition: threading.Condition, deadline: Optional[float], op: str,
              started: float, need: Optional[int] = None, room: int = 1) -> None:
        """Waits once on ``condition`` (lock held) and accounts for the time.

        A dequeue passes ``need``, the size that lets it go on; enqueues notify only once it
        is reached (``close`` and ``abort`` always notify). A dequeue waiting for a batch
        drawn ahead to be finished passes ``_FINISH``: enqueues do not wake it (a wake-up for
        nothing cost it two GIL hand-overs), the finishing thread does (:meth:`_finish_ahead`),
        and so does a batch put back (:meth:`_return_ahead`). Otherwise the caller is an enqueue
        waiting for ``room``; dequeues notify it only once that is there, or while a dequeue
        waits.

        The blocking calls hold ``self._lock`` through ``with self._lock:``, never through
        ``with condition:``: ``Condition.__enter__`` is Python code, and a KeyboardInterrupt
        raised in it just after it acquired the lock would leave the lock held forever (and
        every other thread of the pipeline blocked). The main thread waits in slices of
        ``_MAIN_THREAD_WAIT_SLICE_SECS``, so Ctrl-C reaches it promptly; the callers' loops
        re-check their condition after every wake-up.

        Raises:
          DeadlineExceededError: ``deadline`` has passed.
        """
        now = time.monotonic()
        remaining = None
        if deadline is not None:
            remaining = deadline - now
            if remaining <= 0:
                raise DeadlineExceededError(
                    f"Queue '{self._name}': {op} timed out after {deadline - started:g} s "
                    f"(size {self._size()}, capacity {self._capacity}; Timed out waiting for "
                    f"notification)")
        consumer = condition is self._not_empty
        if consumer and self._runners_added and not self._runners_started \
                and not self._starvation_warned:
            until_warning = started + STARVATION_WARNING_SECS - now
            if until_warning <= 0:
                self._starvation_warned = True
                warnings.warn(
                    f"dequeue on Queue '{self._name}' has waited {STARVATION_WARNING_SECS} s, "
                    f"but none of its {self._runners_added} QueueRunner(s) was started: call "
                    f"qp.start_queue_runners() (or use `with qp.running():`) before dequeuing",
                    RuntimeWarning, stacklevel=3)
                return
            remaining = until_warning if remaining is None else min(remaining, until_warning)
        if threading.current_thread() is threading.main_thread():
            remaining = (_MAIN_THREAD_WAIT_SLICE_SECS if remaining is None
                         else min(remaining, _MAIN_THREAD_WAIT_SLICE_SECS))
        if need == _FINISH:  # no element lets it go on: only a finish (or a close)
            wait_holding(condition, self._lock, remaining)
        elif need is not None:
            self._needs.append(need)
            try:
                if self._room_needs:  # enqueues waiting for more room: put what fits now
                    self._not_full.notify_all()
                # Registered before taking staged elements: an op that stages one later sees
                # the need and puts it (see _add_stage).
                if not (self._stages and self._take_staged(need)):
                    wait_holding(condition, self._lock, remaining)
            finally:
                self._needs.remove(need)
        else:
            self._room_needs.append(room)
            try:
                wait_holding(condition, self._lock, remaining)
            finally:
                self._room_needs.remove(room)
        waited = time.monotonic() - now
        if consumer:
            self._consumer_wait += waited
        else:
            self._producer_wait += waited

    @staticmethod
    def _deadline(timeout: Optional[float]) -> Tuple[float, Optional[float]]:
        """The time a blocking call starts, and its deadline (``None``: wait forever)."""
        started = time.monotonic()
        return started, None if timeout is None else started + max(0.0, float(timeout))

    def _check_open(self) -> None:
        if self._closed:
            raise CancelledError(f"Queue '{self._name}' is closed.")

    def _room(self) -> int:
        return self._capacity - self._size() - self._drawn()

    def _drawn(self) -> int:
        """The elements of the batches drawn ahead (see :meth:`_draw_ahead`): they count in
        the size and against the capacity. Lock held."""
        return len(self._ahead) * self._ahead_size

    def _refill_wanted(self, left: int) -> int:
        """The room an enqueue with ``left`` elements to put waits for before it puts some,
        while no dequeue waits: all of them, up to a sixteenth of the capacity. A full queue
        then takes a bulk producer's chunk in a few puts instead of one per dequeued batch (a
        wake-up and two thread hand-overs each). Lock held."""
        return min(left, max(1, self._capacity // _REFILL_FRACTION))

    def _wake_producers(self) -> None:
        """Wakes the blocked enqueues once one of them has the room it waits for, or while a
        dequeue waits (they then put what fits). Lock held."""
        if self._room_needs and (self._needs or self._room() >= min(self._room_needs)):
            self._not_full.notify_all()

    # -- enqueue ----------------------------------------------------------------------------

    def enqueue(self, vals: Any, timeout: Optional[float] = None) -> None:
        """Adds one element, blocking while the queue is full.

        Args:
          vals: the element: a tuple of components, a dict when the queue has ``names``, or
            the bare value for a one-component queue. Strings may be ``str`` (stored as UTF-8).
          timeout: seconds to wait for room; ``None`` waits forever.

        Raises:
          CancelledError: the queue was closed before the call, or closed with
            ``cancel_pending_enqueues=True`` (or aborted) while it waited. A plain ``close()``
            lets a waiting enqueue finish once room appears, as in TF.
          DeadlineExceededError: ``timeout`` ran out; nothing was enqueued.
          InvalidArgumentError: a component has the wrong dtype, shape, name or count.
        """
        values = self._spec.element(vals)
        _let_holder_finish(self._lock)
        with self._lock:  # the C lock itself: see _wait
            self._check_open()
            started, deadline = self._deadline(timeout)
            while self._room() <= 0:
                if self._cancelled:
                    raise CancelledError(f"Queue '{self._name}' is closed.")
                self._wait(self._not_full, deadline, "enqueue", started, room=1)
            if self._cancelled:
                raise CancelledError(f"Queue '{self._name}' is closed.")
            self._put_one(values)
            self._enqueued += 1
            self._wake_consumers()

    def enqueue_many(self, vals: Any, timeout: Optional[float] = None) -> None:
        """Adds a batch of elements, split along the leading axis of every component.

        The batch may be larger than ``capacity``: elements go in as room appears, so the call
        blocks until the last one is in.

        Args:
          vals: like :meth:`enqueue`, but each component has a leading batch axis of the same
            length (a NumPy array, or a list of values).
          timeout: seconds to wait in all; ``None`` waits forever.

        Raises:
          CancelledError: the queue was closed before the call, or closed with
            ``cancel_pending_enqueues=True`` (or aborted) while it waited. Elements enqueued
            before that stay in the queue.
          DeadlineExceededError: ``timeout`` ran out. Elements already enqueued by this call
            stay in the queue; the rest were not enqueued.
          InvalidArgumentError: a component has the wrong dtype or shape, or the components
            disagree on the batch size.
        """
        batch, n = self._spec.batch(vals)
        _let_holder_finish(self._lock)
        started, deadline = self._deadline(timeout)
        done, checked = 0, False
        while True:
            drawn: List[List[Any]] = []
            try:
                with self._lock:  # the C lock itself: see _wait
                    if not checked:  # (a close once the call began lets it finish, as in TF)
                        self._check_open()
                        checked = True
                    done = self._put_many(batch, n, done, started, deadline, drawn)
            finally:
                self._finish_ahead(drawn)
            if done == n:
                return

    def _put_many(self, batch: List[Any], n: int, done: int, started: float,
                  deadline: Optional[float], drawn: List[List[Any]]) -> int:
        """enqueue_many's puts from element ``done`` on, lock held; returns how many of the
        ``n`` are in. After the last put, and before waiting for room, it draws the batches a
        dequeue would take next into ``drawn`` (see :meth:`_draw_ahead`) and returns, for the
        caller to finish them outside the lock and call again.

        A put never waits for room while a batch its thread drew is unfinished: a consumer
        would wait for that batch, and the room for it. And a producer that waits for room
        draws first: otherwise, with two producers waiting, the consumer drew and parsed the
        batches itself, holding the queue's lock (tokens, 2 threads: 580 of 1,875 batches
        parsed by the consumer, against 79 with one thread).
        """
        while done < n:
            room = self._room()
            if self._cancelled:
                raise CancelledError(f"Queue '{self._name}' is closed.")
            wanted = self._refill_wanted(n - done)
            if room <= 0 or (room < wanted and not self._needs):
                self._draw_batches_ahead(drawn)
                if drawn:
                    return done
                self._wait(self._not_full, deadline, "enqueue_many", started, room=wanted)
                continue
            k = min(room, n - done)
            part = batch if k == n else [b[done:done + k] for b in batch]
            self._put(part, k)
            done += k
            self._enqueued += k
            if not self._can_draw_ahead():
                self._wake_consumers()
        self._draw_batches_ahead(drawn)
        return done

    # -- batches drawn ahead (read_batch_features) ----------------------------------------

    def _draw_ahead(self, size: int, limit: int,
                    finish: Optional[Callable[[List[Any]], List[Any]]] = None) -> None:
        """Lets ``enqueue_many`` draw up to ``limit`` batches of ``size`` elements ahead of
        the consumer, as ``dequeue_many(size)`` would, and finish them.

        A consumer's ``dequeue_many(size)`` (or ``dequeue_up_to``) then takes the oldest
        one as it is: the producers' threads, which run in parallel wherever the core lets
        go of the GIL, do the consumer's drawing, gathering and finishing, and the consumer
        (the training loop) only picks a batch up. Batches are drawn in the same order and
        from the same elements as the consumer would draw them; they count in
        :meth:`size` and against the capacity; a dequeue of another size puts them back
        first, and none is drawn while it waits. (``batching`` sets this up for
        ``read_batch_features``.)

        An entry of ``_ahead`` is ``[raw, finished]``: drawn under the lock, finished
        outside it by the thread that drew it (``read_batch_features``: parsed), which
        other enqueues need not wait for; ``finished`` is None
        until then, and ``_FAILED`` if finishing raised (the consumer then draws as it
        would have, and meets the error itself). A consumer waits for the oldest.

        ``finish``, if given, takes the batches the queue hands out (drawn ahead or not) as
        the columns hold them (arrays, and :class:`~queuepipe.sparse.Rows` for the sparse
        components), each in the elements' structure, and returns what the dequeues return
        instead; the batches one thread drew ahead at once are finished in one call.
        ``read_batch_features`` queues serialized records and parses them there, a few
        batches a call, in the enqueue threads (TF's parses each batch of its queue).
        """
        with self._lock:
            self._return_ahead()
            self._ahead_size, self._ahead_limit = int(size), int(limit)
            self._batch_finish = finish

    def _draw_batches_ahead(self, drawn: List[List[Any]]) -> None:
        """Draws batches ahead while fewer than the limit wait and a dequeue of their size
        would take one now (the queue open: min_after_dequeue stays behind), for the caller
        to finish (:meth:`_finish_ahead`). Lock held."""
        try:
            for raw in self._take_batches(self._ahead_size, self._batches_to_draw()):
                entry = [raw, None]
                self._ahead.append(entry)
                drawn.append(entry)
        except BaseException:  # a put just before may have left the dequeues asleep
            self._wake_consumers()
            raise

    def _batches_to_draw(self) -> int:
        """How many batches :meth:`_draw_batches_ahead` draws now: while
        :meth:`_can_draw_ahead`, each one drawn taking its elements from the size. Lock
        held."""
        if not self._can_draw_ahead():
            return 0
        return min(self._ahead_limit - len(self._ahead),
                   (self._size() - self._min_after()) // self._ahead_size)

    def _take_batches(self, n: int, k: int) -> Iterator[List[Any]]:
        """``k`` raw batches of ``n`` elements, as ``k`` :meth:`_take` one after the other
        take them (a shuffle queue reads them together), each given as it is taken: a take
        that raises leaves those before it given. Lock held."""
        for _ in range(k):
            yield self._take(n)

    def _can_draw_ahead(self) -> bool:
        """Whether :meth:`_draw_batches_ahead` would draw a batch now. A put after which it
        will does not wake the dequeues: the batch it draws, once finished, wakes them
        (:meth:`_finish_ahead`), and a dequeue woken before would find it drawn and not
        finished, and wait again (tokens, one enqueue thread: two waits of the consumer
        every chunk, a futex sleep and wake-up and a GIL hand-over each, instead of one).
        Lock held."""
        n = self._ahead_size
        return bool(n) and not self._closed and not self._other_sizes \
            and n + self._min_after() <= self._capacity \
            and len(self._ahead) < self._ahead_limit and self._size() - self._min_after() >= n

    def _finish_ahead(self, drawn: List[List[Any]]) -> None:
        """Finishes the batches this thread drew ahead, outside the lock (an entry put back
        meanwhile is finished for nothing), wakes the consumers, and draws and finishes more
        while a dequeue could take them (the consumer took some meanwhile): the enqueue
        threads, not the consumer, draw while they can. With a batch finish, the batches
        drawn together are finished in one call (if it raises, each is marked failed; so are
        those drawn before a draw that raises, which no call would finish)."""
        while drawn:
            finished: List[Any] = []
            if self._batch_finish is not None:
                try:
                    finished = self._batch_finish([self._spec.structure(raw)
                                                   for raw, _ in drawn])
                except BaseException:  # the consumer draws again and meets the error itself
                    finished = [_FAILED] * len(drawn)
            else:
                for raw, _ in drawn:
                    try:
                        finished.append(self._finish(raw))
                    except BaseException:  # (as above)
                        finished.append(_FAILED)
            with self._lock:
                for entry, batch in zip(drawn, finished):
                    entry[1] = batch
                self._not_empty.notify_all()
                drawn = []
                try:
                    self._draw_batches_ahead(drawn)
                except BaseException:  # those drawn before: the consumer draws them again
                    for entry in drawn:
                        entry[1] = _FAILED
                    self._not_empty.notify_all()
                    raise

    def _return_ahead(self) -> None:
        """Puts the batches drawn ahead back, newest first (a FIFO queue's oldest end up at
        its head, in order), and wakes the dequeues waiting for one to be finished. Lock
        held."""
        if not self._ahead:
            return
        while self._ahead:
            raw, _ = self._ahead.pop()
            self._put_back(raw, self._ahead_size)
        self._not_empty.notify_all()

    # -- grouped enqueues (batching runners) -------------------------------------------------

    def _add_stage(self) -> collections.deque:
        """A new stage: where one enqueue op collects a group of elements before putting them.

        A batching runner thread calls its producer several times and then puts the group
        with :meth:`_put_staged`, under one lock and with one wake-up (the per-element lock,
        wake-up check and thread hand-overs were a third of the per-record pipeline's cost).
        Its elements must not wait on the producer's next call, which may block (a reader
        waiting for a file, a user's producer waiting for input): so the op appends each
        element, checked by ``Components.element``, to the stage, and a dequeue about to wait
        takes what is staged first; and an op that stages an element while a dequeue waits puts
        its group at once. ``deque`` appends and pops are atomic, so every element is put
        once, in the order it was staged.
        """
        stage: collections.deque = collections.deque()
        with self._lock:
            self._stages.append(stage)
        return stage

    def _unstage(self, stage: collections.deque, limit: int) -> int:
        """Puts up to ``limit`` elements of ``stage``, oldest first. Lock held.

        They go as one batch (one copy per component instead of one per element and
        component: 0.2 against 2 us for a 784-byte row), one element too: a staged element
        holds its numeric arrays as bytes (``Components.staged``), which only a column's
        ``stack`` takes.
        """
        moved = max(0, min(limit, len(stage)))  # only lock holders pop: all are there
        if moved:
            rows = [stage.popleft() for _ in range(moved)]
            self._put([column.stack(values)
                       for values, column in zip(zip(*rows), self._columns)], moved)
        self._enqueued += moved
        return moved

    def _take_staged(self, need: int) -> bool:
        """Puts what every stage holds, as room allows; True once ``need`` is reached.
        Lock held."""
        if self._closed:
            return False
        moved = 0
        for stage in self._stages:
            moved += self._unstage(stage, self._room())
        if moved:
            self._wake_consumers()
        return self._size() >= need

    def _staged(self, stage: collections.deque) -> int:
        """Called after an element was appended to ``stage`` while a dequeue waits: if the
        waiting dequeue could go on with what is staged, puts it now and wakes the dequeue.
        Takes the lock only then (the unlocked estimate errs high by the one element a
        concurrent put may hold, per stage).

        Returns how many more elements ``stage`` may take before the next call is due: the
        elements still missing, shared out over the stages (at least 1). Fewer calls, not a
        later wake-up: if the other stages do not grow meanwhile, this one alone brings the
        total to the need exactly when its count runs out; if they do, their own calls see
        it. (A put by another op that leaves the dequeue short wakes nobody, and the counts
        were taken before it: the next group's first call sees it, or this count's end.)"""
        need = min(self._needs, default=self._capacity + 1)
        size = self._size()
        if size >= need:
            return 1
        stages = self._stages
        missing = need - size - len(stages) - sum(map(len, stages))
        if missing <= 0:
            with self._lock:
                self._wake_consumers()
            return 1
        return -(-missing // len(stages))

    def _put_staged(self, stage: collections.deque) -> None:
        """Puts every element of ``stage``, blocking while the queue is full, as
        :meth:`enqueue` does for one element (the same errors, the same behaviour after close).
        Elements not put because the queue was closed are dropped, as their enqueues would be.

        It takes the lock without yielding first (:func:`_let_holder_finish`): a group's one
        put per 128 elements forms no convoy, and the yields' GIL hand-overs cost more than
        they saved (the per-record pattern, 2 threads, against yielding, in turn: tokens 0.87
        and 0.89 times the CPU a record, mnist 1.01 and 1.06, float 1.00).

        Raises:
          CancelledError: the queue was closed before the call, or closed with
            ``cancel_pending_enqueues=True`` (or aborted) while it waited.
        """
        with self._lock:  # the C lock itself: see _wait
            try:
                self._check_open()
                started, deadline = self._deadline(None)
                while stage:
                    if self._cancelled:
                        raise CancelledError(f"Queue '{self._name}' is closed.")
                    room = self._room()
                    wanted = self._refill_wanted(len(stage))
                    if room <= 0 or (room < wanted and not self._needs):
                        self._wait(self._not_full, deadline, "enqueue", started, room=wanted)
                        continue
                    self._unstage(stage, room)
                    self._wake_consumers()
            except BaseException:
                stage.clear()
                raise

    def _wake_consumers(self) -> None:
        """Wakes the blocked dequeues if one of them can now go on, with what is staged
        put first if that lets one go on. Lock held."""
        if not self._needs:
            return
        need = min(self._needs)
        if self._stages and not self._closed and self._size() < need \
                <= self._size() + sum(map(len, self._stages)):
            for stage in self._stages:
                self._unstage(stage, self._room())
        if self._size() >= need:
            self._not_empty.notify_all()

    # -- dequeue ----------------------------------------------------------------------------

    # Whether a dequeue larger than what fits beside min_after_dequeue takes fixed pieces
    # (the capacity less min_after_dequeue each) instead of whatever has arrived: for a queue
    # whose order must be a function of its input alone.
    _fixed_pieces = False

    def _min_after(self) -> int:
        """Elements a dequeue must leave behind while the queue is open (0 but for shuffle)."""
        return 0

    def _insufficient(self, requested: int) -> BaseException:
        """The error a dequeue raises on a closed queue that cannot satisfy it."""
        size = self._size()
        error = OutOfRangeError(
            f"Queue '{self._name}' is closed and has insufficient elements "
            f"(requested {requested}, current size {size})")
        if self._abort_exc is None:
            return error
        try:
            return _chained_copy(self._abort_exc)
        except Exception:  # the exception cannot be copied: raise the original
            return self._abort_exc

    def dequeue(self, timeout: Optional[float] = None) -> Any:
        """Removes and returns one element, blocking while there is none to take.

        Args:
          timeout: seconds to wait; ``None`` waits forever.

        Returns:
          The element: a tuple of components, a dict when the queue has ``names``, or the bare
          value of a one-component queue. Numeric components are NumPy scalars or arrays,
          string scalars are ``bytes``.

        Raises:
          OutOfRangeError: the queue is closed and empty (after close, the elements left are
            still delivered first).
          DeadlineExceededError: ``timeout`` ran out; nothing was dequeued.
          Exception: a copy of the exception given to :meth:`abort` (chained to it), in
            place of ``OutOfRangeError``.
        """
        with self._lock:  # the C lock itself: see _wait
            self._return_ahead()
            self._other_sizes += 1
            try:
                started, deadline = self._deadline(timeout)
                while True:
                    size = self._size()
                    if size > (0 if self._closed else self._min_after()):
                        break
                    if self._closed:
                        raise self._insufficient(1)
                    self._wait(self._not_empty, deadline, "dequeue", started,
                               need=self._min_after() + 1)
                values = self._take_one()
                self._dequeued += 1
                self._wake_producers()
            finally:
                self._other_sizes -= 1
        return self._spec.output_one(values)

    def dequeue_many(self, n: int, timeout: Optional[float] = None) -> Any:
        """Removes and returns exactly ``n`` elements, stacked into a batch.

        Blocks until ``n`` elements can be taken (for RandomShuffleQueue, while open, until
        ``n`` can be taken leaving ``min_after_dequeue`` behind). If ``n`` exceeds what the
        queue can ever hold at once, elements are taken as they arrive.

        Args:
          n: the batch size, a non-negative int (0 gives an empty batch at once, when every
            component's shape is known).
          timeout: seconds to wait; ``None`` waits forever.

        Returns:
          The batch: the element structure with every component a NumPy array with a
          leading axis of length ``n`` (object arrays of ``bytes`` for strings).

        Raises:
          OutOfRangeError: the queue is closed with fewer than ``n`` elements left. Every
            element stays in the queue, in order.
          DeadlineExceededError: ``timeout`` ran out; nothing was dequeued.
          InvalidArgumentError: ``n`` is negative or not an int, or components of unknown shape
            differ in shape and cannot be stacked (the elements stay in the queue).
          Exception: a copy of the exception given to :meth:`abort`, as for :meth:`dequeue`.
        """
        return self._dequeue_batch(n, timeout, "dequeue_many", allow_smaller=False)

    def dequeue_up_to(self, n: int, timeout: Optional[float] = None) -> Any:
        """Removes and returns up to ``n`` elements, stacked into a batch.

        While the queue is open this blocks exactly like :meth:`dequeue_many`. Once it is
        closed it returns whatever is left, between 1 and ``n`` elements, without waiting.

        Args:
          n: the largest batch size, a non-negative int (as for :meth:`dequeue_many`).
          timeout: seconds to wait; ``None`` waits forever.

        Returns:
          A batch of 1 to ``n`` elements, structured as for :meth:`dequeue_many`.

        Raises:
          OutOfRangeError: the queue is closed and empty.
          DeadlineExceededError: ``timeout`` ran out; nothing was dequeued.
          InvalidArgumentError: as for :meth:`dequeue_many`.
          Exception: a copy of the exception given to :meth:`abort`, as for :meth:`dequeue`.
        """
        return self._dequeue_batch(n, timeout, "dequeue_up_to", allow_smaller=True)

    def _take_ahead(self, n: int) -> Any:
        """The oldest batch drawn ahead, if it is of ``n`` elements and finished, as
        :meth:`dequeue_many` and :meth:`dequeue_up_to` would return it now; else None
        (those then wait, put back or draw as they do). A few microseconds, where theirs
        cost the consumer, the training loop, a dozen a batch holding the GIL."""
        if n != self._ahead_size or not self._ahead:  # (read without the lock: a hint)
            return None
        with self._lock:
            if not self._ahead or n != self._ahead_size:
                return None
            batch = self._ahead[0][1]
            if batch is None or batch is _FAILED:
                return None
            self._ahead.popleft()
            self._dequeued += n
            self._wake_producers()
            return batch

    def _dequeue_batch(self, n: int, timeout: Optional[float], op: str,
                       allow_smaller: bool) -> Any:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InvalidArgumentError(f"{op}: n must be a non-negative int, got {n!r}")
        n = int(n)
        if n == 0:
            return self._empty_batch(op)
        # If n (plus what must stay behind) never fits at once, take elements as they come;
        # or, where the order must not depend on timing, in pieces of a fixed size.
        piecemeal = n + self._min_after() > self._capacity
        as_they_come = piecemeal and not self._fixed_pieces
        piece = self._capacity - self._min_after() if piecemeal and self._fixed_pieces else n
        chunks: List[List[np.ndarray]] = []
        got = 0
        with self._lock:  # the C lock itself: see _wait
            other_size = n != self._ahead_size
            if other_size:
                self._return_ahead()
                self._other_sizes += 1
            started, deadline = self._deadline(timeout)
            try:
                while got < n:
                    if self._ahead and not chunks:  # drawn ahead: the oldest, as it is
                        batch = self._ahead[0][1]
                        if batch is None:  # still being finished: its thread wakes us
                            self._wait(self._not_empty, deadline, op, started, need=_FINISH)
                            continue
                        if batch is _FAILED:
                            self._return_ahead()
                            continue
                        self._ahead.popleft()
                        self._dequeued += n
                        self._wake_producers()
                        return batch
                    size = self._size()
                    available = size - (0 if self._closed else self._min_after())
                    want = min(piece, n - got)
                    if available >= want or (as_they_come and not self._closed
                                             and available > 0):
                        k = min(available, want)
                    elif self._closed and allow_smaller and available + got > 0:
                        k = available
                    elif self._closed:
                        raise self._restore_and_fail(chunks, got, n)
                    else:
                        self._wait(self._not_empty, deadline, op, started,
                                   need=self._min_after() + (1 if as_they_come else want))
                        continue
                    if k > 0:
                        chunks.append(self._take(k))
                        got += k
                        self._wake_producers()
                    if self._closed and allow_smaller and not (piece < n and self._size()):
                        break
                raw = chunks[0] if len(chunks) == 1 else [
                    _columns.concat(parts) for parts in zip(*chunks)]
                # (lock held, a batch finish too: a batch put back must go back before any
                # other is drawn, for the order, and a seeded queue's, to stay what it was)
                batch = self._finish(raw)
            except BaseException:
                if chunks and got:
                    self._restore(chunks, got)
                raise
            finally:
                if other_size:
                    self._other_sizes -= 1
            self._dequeued += got
        return batch

    def _empty_batch(self, op: str) -> Any:
        """A batch of no element, as TF's ``dequeue_many(0)`` gives one: possible only when
        every component's shape is known."""
        spec = self._spec
        shapes = [spec.dense_shape(i) for i in range(len(spec.dtypes or ()))]
        known = [shape for shape in shapes if shape is not None]
        if not shapes or len(known) < len(shapes):
            raise InvalidArgumentError(
                f"Queue '{self._name}': {op}(0): Dequeue operations require the components "
                f"to have specified shapes, got {[fmt_shape(s) for s in (spec.shapes or [None])]}")
        return spec.structure([np.empty((0,) + shape, dtype=dtype)
                               for shape, dtype in zip(known, spec.known_dtypes)])

    def _restore(self, chunks: List[List[np.ndarray]], got: int) -> None:
        raw = chunks[0] if len(chunks) == 1 else [_columns.concat(p) for p in zip(*chunks)]
        chunks.clear()
        self._put_back(raw, got)
        self._not_empty.notify_all()

    def _restore_and_fail(self, chunks: List[List[np.ndarray]], got: int,
                          n: int) -> BaseException:
        if chunks:
            self._restore(chunks, got)
        return self._insufficient(n)

    # -- saving and resuming (read_batch_features' state) ------------------------------------

    def _held(self) -> Any:
        """The rows of the elements held, in the queue's order. Called with the lock held."""
        raise NotImplementedError

    def _order_state(self) -> Dict[str, Any]:
        """What besides its elements fixes what the queue hands out next (JSON-able)."""
        return {}

    def _load_order(self, order: Dict[str, Any]) -> None:
        """Takes up what :meth:`_order_state` gave. Called with the lock held."""

    def _snapshot(self, component: int) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Component ``component`` (a fixed-shape one) of every element held, in the queue's
        order, the batches drawn ahead first, and its order state: with the same elements
        put back by :meth:`_load`, the queue hands out the same elements in the same
        order."""
        with self._lock:
            held = self._columns[component].read(self._held()) if self._columns \
                else np.empty(0, np.int64)
            order = self._order_state()
            if self._ahead:
                held = np.concatenate([raw[component] for raw, _ in self._ahead] + [held])
                order = {**order, "ahead": len(self._ahead), "ahead_size": self._ahead_size}
            return held, order

    def _load(self, vals: Any, order: Dict[str, Any]) -> None:
        """Puts a batch into the empty queue in one step, in its order, and takes up
        ``order``: the inverse of :meth:`_snapshot`. The batch may exceed the capacity by
        what a dequeue interrupted midway put back (the caller bounds it)."""
        batch, n = self._spec.batch(vals)
        ahead, size = order.get("ahead", 0), order.get("ahead_size", self._ahead_size)
        if type(ahead) is not int or type(size) is not int or ahead < 0 \
                or ahead and (size != self._ahead_size or ahead * size > n):
            raise InvalidArgumentError(
                f"Queue '{self._name}': a saved content of {n} elements cannot hold "
                f"{str(ahead)[:20]} batches of {str(size)[:20]} drawn ahead (batches of "
                f"{self._ahead_size} here)")
        with self._lock:
            self._check_open()
            if self._size() or self._ahead:
                raise InvalidArgumentError(
                    f"Queue '{self._name}': a saved content of {n} elements goes into an empty "
                    f"queue, this one holds {self.size()}")
            for j in range(ahead):
                raw = [b[j * size:(j + 1) * size] for b in batch]
                try:
                    finished = self._finish(raw)
                except Exception:  # the consumer draws it again and meets the error itself
                    finished = _FAILED
                self._ahead.append([raw, finished])
            first = ahead * size
            if n > first:
                self._put(batch if not first else [b[first:] for b in batch], n - first)
            self._enqueued += n
            self._load_order(order)
            self._wake_consumers()
            if self._ahead:
                self._not_empty.notify_all()

    # -- closing ----------------------------------------------------------------------------

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """Closes the queue: no new enqueues; consumers drain what is left. Idempotent.

        Enqueues waiting for room when the queue closes still complete as room appears,
        unless ``cancel_pending_enqueues`` is true: then they fail with ``CancelledError``.
        Blocked dequeues wake up: they take what they can and otherwise raise
        ``OutOfRangeError``.

        Args:
          cancel_pending_enqueues: fail the enqueues that are waiting for room.
        """
        with self._lock:
            self._closed = True
            if cancel_pending_enqueues:
                self._cancelled = True
            self._not_empty.notify_all()
            self._not_full.notify_all()

    def abort(self, exc: BaseException) -> None:
        """Closes the queue because a producer failed with ``exc`` (beyond TF).

        Like ``close(cancel_pending_enqueues=True)``, and consumers still drain what is in
        the queue; but where a dequeue would raise ``OutOfRangeError`` it raises a copy of
        ``exc`` chained to it, so the real cause reaches the consumer. The first abort wins.

        Args:
          exc: the exception that stopped the producer.
        """
        with self._lock:
            if self._abort_exc is None:
                self._abort_exc = exc
        self.close(cancel_pending_enqueues=True)

    # -- QueueRunner bookkeeping ------------------------------------------------------------

    def _runner_added(self) -> None:
        """Called by a QueueRunner built on this queue."""
        with self._lock:
            self._runners_added += 1

    def _runner_started(self) -> None:
        """Called when a QueueRunner thread on this queue starts."""
        with self._lock:
            self._runners_started += 1


def _chained_copy(exc: BaseException) -> BaseException:
    """A copy of ``exc`` (same type and attributes) whose ``__cause__`` is ``exc``."""
    duplicate = copy.copy(exc)
    duplicate.__cause__ = exc
    duplicate.__suppress_context__ = True
    duplicate.__traceback__ = None
    return duplicate
