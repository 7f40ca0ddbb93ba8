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

How the queues are built (modelled on CPython's ``Lib/queue.py``):

* One lock per queue, and two Conditions on it named after what they announce: ``not_empty``
  (an element arrived, or the queue closed) and ``not_full`` (room appeared, or enqueues were
  cancelled). Every wait is a ``while`` loop that re-checks its condition against a
  ``time.monotonic()`` deadline, so ``timeout=``, ``close()`` and ``abort()`` always wake it.
* Subclasses override small hooks (``_size``, ``_put``, ``_put_one``, ``_take``, ``_take_one``,
  ``_put_back``) that run with the lock held and never block.
* Components whose shape is fully defined live in preallocated NumPy arrays of shape
  ``(capacity, *shape)`` (object arrays for strings), so ``enqueue_many``/``dequeue_many`` are
  slice copies with no per-element Python loop. Components of unknown shape are kept per
  element in an object array and stacked (or padded) when a batch is dequeued.

Semantics follow TensorFlow's ``tf.compat.v1`` queues exactly: closing, cancelling pending
enqueues, ``OutOfRangeError`` with TF's message, a failed ``dequeue_many`` leaving every element
in place, ``min_after_dequeue`` ignored after close. Beyond TF: ``timeout=`` on every blocking
call, :meth:`QueueBase.abort` to hand a producer's failure to the consumer, a warning when a
consumer waits on a queue whose runners were never started, and :meth:`QueueBase.stats`.
"""

from __future__ import annotations

import _thread
import collections
import copy
import heapq
import itertools
import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import sparse
from queuepipe.errors import (
    CancelledError, DeadlineExceededError, InvalidArgumentError, OutOfRangeError,
)
from queuepipe.sparse import SparseValue

__all__ = [
    "STARVATION_WARNING_SECS",
    "QueueBase",
    "FIFOQueue",
    "RandomShuffleQueue",
    "PaddingFIFOQueue",
    "PriorityQueue",
]

# A dequeue blocked this long on a queue whose QueueRunners were never started warns once.
STARVATION_WARNING_SECS = 5.0

# The main thread never waits longer than this at once, so that a KeyboardInterrupt delivered
# from another thread (``_thread.interrupt_main()``, ``signal.raise_signal`` in a worker) is
# raised within this time, not when the wait ends (which may be never).
_MAIN_THREAD_WAIT_SLICE_SECS = 0.1

# Source dtype kinds that may be converted to each numeric target kind without losing meaning.
_CASTABLE_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}

# The largest copy into a column that keeps the GIL (see _assign).
_KEEP_GIL_BYTES = 1 << 16

# An enqueue of many elements that waits for room waits for this fraction of the capacity
# (or for all it has left to put) unless a dequeue waits too: see _refill_wanted.
_REFILL_FRACTION = 16

# The most elements a queue's first columns hold; they double as elements arrive, up to the
# capacity (a capacity of 10**8 would otherwise allocate gigabytes before the first element).
_INITIAL_ROWS = 1024

# How often an enqueue yields the GIL while the queue's lock is held (_let_holder_finish).
_YIELDS_TO_HOLDER = 4

_MAIN_THREAD_ID = threading.main_thread().ident

_name_lock = threading.Lock()
_name_counts: Dict[str, int] = collections.Counter()


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


def _stack_rows(values: Sequence[Any], column: np.ndarray) -> np.ndarray:
    """The values of one numeric component, checked by ``_element`` (the column's dtype and
    row shape), stacked as rows of ``column``.

    Joined as bytes (an array's or a NumPy scalar's buffer holds its values in the column's
    layout): ``np.array`` copies row by row and releases the GIL for each row of a few
    hundred elements, a thread switch per element when several producers run. A value that
    is not C-contiguous has no such buffer and makes it take ``np.array``.
    """
    try:
        joined = b"".join(values)
    except TypeError:
        return np.array(values, dtype=column.dtype)
    return np.frombuffer(joined, dtype=column.dtype).reshape((len(values),) + column.shape[1:])


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
    lock in its own time slice. (The lock is still taken by ``with``, in C.)
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


class _DtypeError(InvalidArgumentError, TypeError):
    """A value that does not convert to its component's dtype (1.5 for an int64 priority):
    an InvalidArgumentError, and a TypeError as TF raises there."""


def _unique_name(base: str) -> str:
    """``base``, then ``base_1``, ``base_2``, ... process-wide, like TF's graph op names."""
    with _name_lock:
        count = _name_counts[base]
        _name_counts[base] += 1
    return base if count == 0 else f"{base}_{count}"


def _as_shape(shape: Any, index: int) -> Optional[Tuple[Optional[int], ...]]:
    """One declared shape as a tuple of ints and ``None`` dims; ``None`` means unknown rank."""
    if shape is None:
        return None
    if hasattr(shape, "as_list"):  # a TensorShape-like object
        shape = shape.as_list()
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = [shape]  # as TF's as_shape: a bare 2 is the shape [2]
    try:
        dims = tuple(shape)
    except TypeError:
        raise InvalidArgumentError(
            f"shapes[{index}] must be a list of ints or None, got {shape!r}") from None
    for dim in dims:
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, (int, np.integer))
                                or dim < 0):
            raise InvalidArgumentError(
                f"shapes[{index}] must hold non-negative ints or None, got {shape!r}")
    return tuple(None if d is None else int(d) for d in dims)


def _as_shape_list(shapes: Any) -> Optional[List[Optional[Tuple[Optional[int], ...]]]]:
    """Declared shapes as a list; a single flat shape such as ``[3]`` or ``[]`` means one."""
    if shapes is None:
        return None
    if hasattr(shapes, "as_list"):
        shapes = [shapes]
    if not isinstance(shapes, (list, tuple)):
        raise InvalidArgumentError(f"shapes must be a list of shapes, got {shapes!r}")
    if all(s is None or isinstance(s, (int, np.integer)) for s in shapes):
        shapes = [shapes]  # TF: a list of dims is the shape of a one-component queue
    return [_as_shape(s, i) for i, s in enumerate(shapes)]


def _as_dtype_list(dtypes: Any) -> Optional[List[np.dtype]]:
    if dtypes is None:
        return None
    if not isinstance(dtypes, (list, tuple)):
        dtypes = [dtypes]
    result = []
    for i, dtype in enumerate(dtypes):
        try:
            result.append(_dtypes.as_dtype(dtype))
        except TypeError as e:
            raise InvalidArgumentError(f"dtypes[{i}]: {e}") from None
    return result


def _infer_dtype(value: Any) -> np.dtype:
    """The dtype of a first element's component, for a queue built with ``dtypes=None``
    (of its values, for a SparseValue)."""
    if isinstance(value, SparseValue):
        return _infer_dtype(value.values)
    if isinstance(value, (bytes, str, np.bytes_, np.str_)):
        return _dtypes.string
    arr = np.asarray(value)
    if arr.dtype.kind in "SU":
        return _dtypes.string
    if arr.dtype.kind == "O" and arr.size and isinstance(arr.flat[0], (bytes, str)):
        return _dtypes.string
    if arr.dtype.kind in _CASTABLE_KINDS:
        return arr.dtype
    raise InvalidArgumentError(f"cannot infer a dtype for a component of type "
                               f"{type(value).__name__} (NumPy dtype {arr.dtype})")


def _shape_ok(shape: Tuple[int, ...], declared: Optional[Tuple[Optional[int], ...]]) -> bool:
    if declared is None:
        return True
    return len(shape) == len(declared) and all(
        d is None or d == s for s, d in zip(shape, declared))


def _fmt_shape(shape: Optional[Tuple[Optional[int], ...]], sep: str = ", ") -> str:
    """``[3, ?]``, or with ``sep=","`` as TF's messages write it: ``[3,?]``."""
    if shape is None:
        return "<unknown>"
    return "[" + sep.join("?" if d is None else str(d) for d in shape) + "]"


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
        self._dtypes = _as_dtype_list(dtypes)
        self._shapes = _as_shape_list(shapes)
        if isinstance(names, str):
            names = [names]
        self._names = None if names is None else list(names)
        self._check_lengths()
        self._name = name if name is not None else _unique_name(self._DEFAULT_NAME)

        # An RLock, for its C-level owner (see wait_holding); never taken twice by a thread.
        self._lock = threading.RLock()
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
        self._closed = False
        self._cancelled = False
        self._abort_exc: Optional[BaseException] = None
        self._columns: Optional[List[np.ndarray]] = None  # allocated once dtypes are known
        # Per component: True when it holds SparseValues, False when dense, None until the
        # first value of a component without a fixed shape says (see _is_sparse).
        self._sparse: List[Optional[bool]] = []
        # Returns an element's components when all are as stored (see _acceptance), else None.
        self._accept: Optional[Callable[[Any], Optional[List[Any]]]] = None
        self._rows = 0  # rows allocated in each column (grown up to capacity as needed)
        self._runners_added = 0
        self._runners_started = 0
        self._starvation_warned = False
        self._enqueued = 0
        self._dequeued = 0
        self._consumer_wait = 0.0
        self._producer_wait = 0.0
        if self._dtypes is not None:
            self._allocate()

    def _check_lengths(self) -> None:
        counts = {}
        if self._dtypes is not None:
            counts["dtypes"] = len(self._dtypes)
        if self._shapes is not None:
            counts["shapes"] = len(self._shapes)
        if self._names is not None:
            for i, n in enumerate(self._names):
                if not isinstance(n, str):
                    raise InvalidArgumentError(f"names[{i}] must be a str, got {n!r}")
            if len(set(self._names)) != len(self._names):
                raise InvalidArgumentError(f"names must be distinct, got {self._names!r}")
            counts["names"] = len(self._names)
        if len(set(counts.values())) > 1:
            got = ", ".join(f"{k} has {v}" for k, v in counts.items())
            raise InvalidArgumentError(
                f"dtypes, shapes and names must have one entry per component: {got}")

    # -- properties -------------------------------------------------------------------------

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
        return None if self._dtypes is None else list(self._dtypes)

    @property
    def shapes(self) -> Optional[List[Optional[Tuple[Optional[int], ...]]]]:
        """The declared component shapes (``None`` dims free), or ``None`` when unknown."""
        return None if self._shapes is None else list(self._shapes)

    @property
    def names(self) -> Optional[List[str]]:
        """The component names, or ``None`` for a queue of tuples."""
        return None if self._names is None else list(self._names)

    def size(self) -> int:
        """The number of elements in the queue now."""
        with self._lock:
            return self._size()

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
                "size": self._size(),
                "capacity": self._capacity,
                "consumer_wait_secs": self._consumer_wait,
                "producer_wait_secs": self._producer_wait,
            }

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} '{self._name}' size={self.size()} "
                f"capacity={self._capacity} closed={self.is_closed()}>")

    # -- structure and conversion -----------------------------------------------------------

    def _num_components(self) -> Optional[int]:
        for decl in (self._dtypes, self._names, self._shapes):
            if decl is not None:
                return len(decl)
        return None

    def _label(self, i: int) -> str:
        return f"'{self._names[i]}'" if self._names is not None else str(i)

    def _flatten(self, vals: Any, batched: bool) -> List[Any]:
        """The components of an element (or batch) given as a value, tuple, list or dict."""
        if self._names is not None:
            if type(vals) is dict and len(vals) == len(self._names):  # the common case, fast
                try:
                    return [vals[k] for k in self._names]
                except KeyError:
                    pass  # a wrong key: the checks below say which
            if not isinstance(vals, Mapping):
                raise InvalidArgumentError(
                    f"Queue '{self._name}' has names {self._names}: enqueue a dict with exactly "
                    f"these keys, got {type(vals).__name__} (You must enqueue a dictionary in a "
                    f"Queue with names)")
            missing = [k for k in self._names if k not in vals]
            extra = [k for k in vals if k not in self._names]
            if missing or extra:
                raise InvalidArgumentError(
                    f"Queue '{self._name}' expects keys {self._names}: missing {missing}, "
                    f"unexpected {extra} (Keys in dictionary to enqueue do not match names of "
                    f"Queue)")
            return [vals[k] for k in self._names]
        if isinstance(vals, Mapping):
            raise InvalidArgumentError(
                f"Queue '{self._name}' has no names: enqueue a tuple of components, not a dict "
                f"(Queue must have names to enqueue a dictionary)")
        count = self._num_components()
        if count == 1:
            return [self._unwrap_single(vals, batched)]
        if not isinstance(vals, (list, tuple)) or isinstance(vals, SparseValue):
            if count is None:
                return [vals]
            raise InvalidArgumentError(
                f"Queue '{self._name}' has {count} components: enqueue a tuple of {count} "
                f"values, got {type(vals).__name__}")
        if count is not None and len(vals) != count:
            raise InvalidArgumentError(
                f"Queue '{self._name}' has {count} components, got {len(vals)} values")
        return list(vals)

    def _unwrap_single(self, vals: Any, batched: bool) -> Any:
        """A one-component queue takes the bare value, or the value wrapped in a 1-list/tuple.

        ``[x]`` is unwrapped unless it is itself a value of the declared rank (so ``[5]`` on a
        queue of shape ``[1]`` is the value ``[5]``).
        """
        if not isinstance(vals, (list, tuple)) or len(vals) != 1 or isinstance(vals, SparseValue):
            return vals
        shape = self._shapes[0] if self._shapes is not None else None
        if shape is None:
            if not batched:
                return vals[0]
            rank = None
        else:
            rank = len(shape) + (1 if batched else 0)
        try:
            inner = np.ndim(vals[0])
        except ValueError:  # ragged: not a value of any rank
            return vals
        if rank is None:
            return vals[0] if inner >= 1 else vals
        return vals[0] if inner == rank else vals

    def _structure(self, values: List[Any]) -> Any:
        """The element (or batch) the user sees: a dict, a tuple, or a bare single value."""
        if self._names is not None:
            return dict(zip(self._names, values))
        if len(values) == 1:
            return values[0]
        return tuple(values)

    def _bind(self, components: List[Any]) -> None:
        """Fixes the dtypes from the first element of a queue built with ``dtypes=None``."""
        with self._lock:
            if self._dtypes is None:
                self._dtypes = [_infer_dtype(value) for value in components]
                self._allocate()
            elif len(components) != len(self._dtypes):  # another thread bound it first
                raise InvalidArgumentError(
                    f"Queue '{self._name}' has {len(self._dtypes)} components, got "
                    f"{len(components)} values")

    def _is_sparse(self, i: int, value: Any) -> bool:
        """Whether component ``i`` holds SparseValues: fixed by its first value (always dense
        with a fully defined shape). Raises InvalidArgumentError, naming the component, for a
        value of the other kind."""
        if not self._sparse:
            with self._lock:
                if not self._sparse:
                    self._sparse = [False if self._dense_shape(j) is not None else None
                                    for j in range(len(self._dtypes))]
        kind = self._sparse[i]
        given = isinstance(value, SparseValue)
        if kind is None:
            with self._lock:
                if self._sparse[i] is None:
                    self._sparse[i] = given
                kind = self._sparse[i]
        if kind != given:
            raise InvalidArgumentError(
                f"Queue '{self._name}' component {self._label(i)} holds "
                f"{'SparseValues' if kind else 'dense values'}"
                f"{'' if kind or self._dense_shape(i) is None else ' of a fixed shape'}: got "
                f"{'a SparseValue' if given else _short(value)}")
        return kind

    def _allocate(self, rows: Optional[int] = None) -> None:
        """Creates one column per component: ``(rows, *shape)`` when the shape is fully
        defined, else a ``(rows,)`` object array holding each element's value. The first
        columns have room for ``_INITIAL_ROWS`` elements at most; :meth:`_grow` doubles them
        as elements arrive, up to the capacity, so a large capacity costs nothing until used."""
        self._rows = rows or min(self._capacity, _INITIAL_ROWS)
        self._columns = []
        for i, dtype in enumerate(self._dtypes):
            shape = self._dense_shape(i)
            if shape is None:
                self._columns.append(np.empty(self._rows, dtype=object))
            else:
                self._columns.append(np.empty((self._rows,) + shape, dtype=dtype))
        self._accept = self._acceptance()

    def _acceptance(self) -> Optional[Callable[[Any], Optional[List[Any]]]]:
        """A function of an element that returns its components when every one is a value
        :meth:`_convert` would return unchanged (a value of the component's exact scalar
        type, ``bytes`` for a string scalar, or an ndarray of its dtype and shape), else None.
        None when some component has no fixed shape (its values are copied, not kept) or is
        a string array.

        The function is generated as one expression per component, as ``namedtuple``
        generates its class: it runs for every element a grouping enqueue op stages, where a
        loop over per-component rules cost three times as much. Only indices enter its
        source; names, dtypes and shapes are passed in as values.
        """
        namespace: Dict[str, Any] = {"ndarray": np.ndarray}
        checks = []
        for i, dtype in enumerate(self._dtypes):
            shape = self._dense_shape(i)
            if shape is None or (dtype.kind == "O" and shape != ()):
                return None
            namespace[f"dtype{i}"], namespace[f"shape{i}"] = dtype, shape
            if dtype.kind == "O":
                checks.append(f"type(c{i}) is bytes")
                continue
            array = (f"type(c{i}) is ndarray and (c{i}.dtype is dtype{i} or c{i}.dtype == "
                     f"dtype{i}) and c{i}.shape == shape{i}")
            if shape == () and dtype.isnative:
                namespace[f"scalar{i}"] = dtype.type
                array = f"type(c{i}) is scalar{i} or {array}"
            checks.append(f"({array})")
        count = len(self._dtypes)
        values = ", ".join(f"c{i}" for i in range(count))
        if self._names is not None:
            namespace.update((f"name{i}", name) for i, name in enumerate(self._names))
            take = (f"    if type(vals) is not dict or len(vals) != {count}:\n"
                    f"        return None\n"
                    f"    try:\n"
                    + "".join(f"        c{i} = vals[name{i}]\n" for i in range(count)) +
                    f"    except KeyError:\n"
                    f"        return None\n")
        elif count == 1:
            take = "    c0 = vals\n"  # a wrapped value ([x]) takes the general path
        else:
            take = (f"    if type(vals) is not tuple and type(vals) is not list "
                    f"or len(vals) != {count}:\n"
                    f"        return None\n"
                    f"    {values}, = vals\n")
        source = (f"def accept(vals):\n{take}"
                  f"    if {' and '.join(checks)}:\n"
                  f"        return [{values}]\n"
                  f"    return None\n")
        exec(source, namespace)  # noqa: S102 - source made above from indices only
        return namespace["accept"]

    def _dense_shape(self, i: int) -> Optional[Tuple[int, ...]]:
        shape = self._shapes[i] if self._shapes is not None else None
        if shape is None or None in shape:
            return None
        return shape

    def _convert(self, i: int, value: Any, batched: bool) -> Any:
        """One component converted to its dtype and checked against its declared shape.

        Returns a NumPy array (with a leading batch axis when ``batched``), or ``bytes`` for a
        single string scalar.
        """
        dtype = self._dtypes[i]
        declared = self._shapes[i] if self._shapes is not None else None
        if type(value) is np.ndarray and value.dtype == dtype and dtype.kind != "O" \
                and (value.shape[1:] if batched and value.ndim else
                     None if batched else value.shape) == declared:
            return value  # the common case, as fast as it can be: nothing to convert
        if (declared is None or None in declared or isinstance(value, SparseValue)) \
                and self._is_sparse(i, value):
            what = f"Queue '{self._name}' component {self._label(i)}"
            value = sparse.as_sparse(value, dtype, what)
            if not batched:
                return value
            out = np.empty(sparse.batch_size(value), dtype=object)
            out[:] = sparse.split(value, what)
            return out
        if isinstance(value, np.generic) and value.dtype == dtype and declared == () \
                and not batched and dtype.kind != "O":
            return value  # a NumPy scalar of the right dtype, as parsers return them
        if dtype == _dtypes.string:
            arr = self._convert_strings(i, value)
        else:
            arr = self._convert_numeric(i, value, dtype)
        shape = np.shape(arr)
        if batched:
            if not shape:
                raise InvalidArgumentError(
                    f"Queue '{self._name}' component {self._label(i)}: enqueue_many needs a "
                    f"leading batch axis, got a scalar")
            ok = _shape_ok(shape[1:], declared)
        else:
            ok = _shape_ok(shape, declared)
        if not ok:
            what = "element shape" if batched else "shape"
            got = shape[1:] if batched else shape
            raise InvalidArgumentError(
                f"Queue '{self._name}' component {self._label(i)}: expected shape "
                f"{_fmt_shape(declared)}, got {what} {_fmt_shape(got)} (Shape mismatch in "
                f"tuple component {i}. Expected {_fmt_shape(declared, ',')}, got "
                f"{_fmt_shape(got, ',')})")
        return arr

    def _convert_numeric(self, i: int, value: Any, dtype: np.dtype) -> np.ndarray:
        try:
            arr = np.asarray(value)
            if arr.dtype != dtype:
                if arr.size == 0 and not isinstance(value, np.ndarray):
                    return np.asarray(value, dtype=dtype)  # [] converts to any dtype, as in TF
                if arr.dtype.kind not in _CASTABLE_KINDS[dtype.kind]:
                    raise TypeError(f"a value of dtype {arr.dtype}")
                if isinstance(value, np.ndarray):
                    arr = arr.astype(dtype)
                else:  # Python numbers: NumPy rejects the out-of-range ones
                    arr = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as e:
            raise _DtypeError(
                f"Queue '{self._name}' component {self._label(i)}: expected dtype {dtype}, "
                f"got {_short(value)} ({e})") from None
        return arr

    def _convert_strings(self, i: int, value: Any) -> Any:
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode("utf-8")
        try:
            arr = np.array(value, dtype=object)
        except ValueError as e:
            raise InvalidArgumentError(
                f"Queue '{self._name}' component {self._label(i)}: expected dtype string "
                f"(bytes), got {_short(value)} ({e})") from None
        flat = arr.reshape(-1)
        for j, item in enumerate(flat):
            if type(item) is bytes:
                continue
            if isinstance(item, (bytes, np.bytes_)):
                flat[j] = bytes(item)
            elif isinstance(item, str):
                flat[j] = item.encode("utf-8")
            else:
                raise InvalidArgumentError(
                    f"Queue '{self._name}' component {self._label(i)}: expected dtype string "
                    f"(bytes), got {_short(item)}")
        return arr[()] if arr.ndim == 0 else arr

    def _element(self, vals: Any) -> List[Any]:
        """The components of one element, converted and checked as the columns store them."""
        accept = self._accept
        if accept is not None:
            components = accept(vals)
            if components is not None:
                return components  # the common case: every value already as stored
        components = self._flatten(vals, batched=False)
        if self._dtypes is None:
            self._bind(components)
        values = [self._convert(i, v, batched=False) for i, v in enumerate(components)]
        for i, value in enumerate(values):
            if self._dense_shape(i) is None and isinstance(value, np.ndarray):
                values[i] = value.copy()  # stored by reference: do not alias the caller's array
        return values

    def _batch(self, vals: Any) -> Tuple[List[Any], int]:
        components = self._flatten(vals, batched=True)
        if self._dtypes is None:
            self._bind(components)
        batch = [self._convert(i, v, batched=True) for i, v in enumerate(components)]
        sizes = {len(b) for b in batch}
        if len(sizes) > 1:
            raise InvalidArgumentError(
                f"Queue '{self._name}': enqueue_many components disagree on the batch size: "
                f"{[len(b) for b in batch]}")
        n = sizes.pop() if sizes else 0
        for i in range(len(batch)):
            if self._dense_shape(i) is None and not (self._sparse and self._sparse[i]):
                batch[i] = _per_element(batch[i])  # (sparse ones were split already)
        return batch, n

    def _finish(self, raw: List[np.ndarray]) -> List[np.ndarray]:
        """A batch as read from the columns, with unknown-shape components stacked."""
        out = []
        for i, column in enumerate(raw):
            if self._sparse and self._sparse[i]:
                column = sparse.stack(column, self._dtypes[i],
                                      f"Queue '{self._name}' component {self._label(i)}")
            elif self._dense_shape(i) is None:
                column = self._stack(i, column)
            out.append(column)
        return out

    def _stack(self, i: int, items: np.ndarray) -> np.ndarray:
        """Stacks the per-element values of an unknown-shape component into one array.

        Raises:
          InvalidArgumentError: the elements' shapes differ (PaddingFIFOQueue pads instead).
        """
        shapes = {np.shape(item) for item in items}
        if len(shapes) > 1:
            raise InvalidArgumentError(
                f"Queue '{self._name}' component {self._label(i)}: dequeue_many needs equal "
                f"shapes to stack, got {sorted(shapes)}; use PaddingFIFOQueue to pad")
        shape = shapes.pop() if shapes else ()
        out = np.empty((len(items),) + shape, dtype=self._dtypes[i])
        for j, item in enumerate(items):
            out[j] = item
        return out

    def _output_one(self, values: List[Any]) -> Any:
        for i, value in enumerate(values):
            if isinstance(value, np.ndarray):
                values[i] = value[()] if value.ndim == 0 else value
        return self._structure(values)

    # -- storage hooks: run with self._lock held, never block ------------------------------

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

    def _grow(self, needed: int, keep: Any) -> None:
        """Reallocates the columns with at least ``needed`` rows (twice as many, up to the
        capacity), moving rows ``keep`` (a slice or index array, in order) to the front."""
        old = self._columns
        self._allocate(max(min(2 * self._rows, self._capacity), needed))
        for column, previous in zip(self._columns, old):
            kept = previous[keep]
            column[:len(kept)] = kept

    def _clear(self, index: Any) -> None:
        """Drops references held by object columns at ``index`` so memory can be freed."""
        for column in self._columns:
            if column.dtype == object:
                column[index] = None

    # -- blocking ---------------------------------------------------------------------------

    def _wait(self, condition: threading.Condition, deadline: Optional[float], op: str,
              started: float, need: Optional[int] = None, room: int = 1) -> None:
        """Waits once on ``condition`` (lock held) and accounts for the time.

        A dequeue passes ``need``, the size that lets it go on; enqueues notify only once it
        is reached (``close`` and ``abort`` always notify). Otherwise the caller is an enqueue
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
        if need is not None:
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
        return self._capacity - self._size()

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
        values = self._element(vals)
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
        batch, n = self._batch(vals)
        _let_holder_finish(self._lock)
        with self._lock:  # the C lock itself: see _wait
            self._check_open()
            started, deadline = self._deadline(timeout)
            done = 0
            while done < n:
                room = self._room()
                if self._cancelled:
                    raise CancelledError(f"Queue '{self._name}' is closed.")
                wanted = self._refill_wanted(n - done)
                if room <= 0 or (room < wanted and not self._needs):
                    self._wait(self._not_full, deadline, "enqueue_many", started, room=wanted)
                    continue
                k = min(room, n - done)
                part = batch if k == n else [b[done:done + k] for b in batch]
                self._put(part, k)
                done += k
                self._enqueued += k
                self._wake_consumers()

    # -- grouped enqueues (batching runners) -------------------------------------------------

    def _add_stage(self) -> collections.deque:
        """A new stage: where one enqueue op collects a group of elements before putting them.

        A batching runner thread calls its producer several times and then puts the group
        with :meth:`_put_staged`, under one lock and with one wake-up (the per-element lock,
        wake-up check and thread hand-overs were a third of the per-record pipeline's cost).
        Its elements must not wait on the producer's next call, which may block (a reader
        waiting for a file, a user's producer waiting for input): so the op appends each
        element, checked by :meth:`_element`, to the stage, and a dequeue about to wait takes
        what is staged first; and an op that stages an element while a dequeue waits puts
        its group at once. ``deque`` appends and pops are atomic, so every element is put
        once, in the order it was staged.
        """
        stage: collections.deque = collections.deque()
        with self._lock:
            self._stages.append(stage)
        return stage

    def _unstage(self, stage: collections.deque, limit: int) -> int:
        """Puts up to ``limit`` elements of ``stage``, oldest first. Lock held.

        Into numeric columns the elements go as one batch (one copy per component instead of
        one per element and component: 0.2 against 2 us for a 784-byte row).
        """
        moved = max(0, min(limit, len(stage)))  # only lock holders pop: all are there
        if moved > 1 and all(column.dtype.kind in "biufc" for column in self._columns):
            rows = [stage.popleft() for _ in range(moved)]
            self._put([_stack_rows(values, column)
                       for values, column in zip(zip(*rows), self._columns)], moved)
        else:
            for _ in range(moved):
                self._put_one(stage.popleft())
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

    def _staged(self, stage: collections.deque) -> None:
        """Called after an element was appended to ``stage`` while a dequeue waits: if the
        waiting dequeue could go on with what is staged, puts it now and wakes the dequeue.
        Takes the lock only then (the unlocked estimate errs high by the one element a
        concurrent put may hold). This stage alone is counted first: with one producer
        thread it is all there is."""
        need = min(self._needs, default=self._capacity + 1)
        size = self._size()
        if size < need and (need <= size + len(stage) + 1 or need <= size + len(self._stages)
                            + sum(map(len, self._stages))):
            with self._lock:
                self._wake_consumers()

    def _put_staged(self, stage: collections.deque) -> None:
        """Puts every element of ``stage``, blocking while the queue is full, as
        :meth:`enqueue` does for one element (the same errors, the same behaviour after close).
        Elements not put because the queue was closed are dropped, as their enqueues would be.

        Raises:
          CancelledError: the queue was closed before the call, or closed with
            ``cancel_pending_enqueues=True`` (or aborted) while it waited.
        """
        _let_holder_finish(self._lock)
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

    def _min_after(self) -> int:
        """Elements a dequeue must leave behind while the queue is open (0 but for shuffle)."""
        return 0

    def _insufficient(self, requested: int) -> Exception:
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
        return self._output_one(values)

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

    def _dequeue_batch(self, n: int, timeout: Optional[float], op: str,
                       allow_smaller: bool) -> Any:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InvalidArgumentError(f"{op}: n must be a non-negative int, got {n!r}")
        n = int(n)
        if n == 0:
            return self._empty_batch(op)
        # If n (plus what must stay behind) never fits at once, take elements as they come.
        piecemeal = n + self._min_after() > self._capacity
        chunks: List[List[np.ndarray]] = []
        got = 0
        with self._lock:  # the C lock itself: see _wait
            started, deadline = self._deadline(timeout)
            try:
                while got < n:
                    size = self._size()
                    available = size - (0 if self._closed else self._min_after())
                    if available >= n - got or (piecemeal and not self._closed
                                                and available > 0):
                        k = min(available, n - got)
                    elif self._closed and allow_smaller and available + got > 0:
                        k = available
                    elif self._closed:
                        raise self._restore_and_fail(chunks, got, n)
                    else:
                        self._wait(self._not_empty, deadline, op, started,
                                   need=self._min_after() + (1 if piecemeal else n - got))
                        continue
                    if k > 0:
                        chunks.append(self._take(k))
                        got += k
                        self._wake_producers()
                    if self._closed and allow_smaller:
                        break
                raw = chunks[0] if len(chunks) == 1 else [
                    np.concatenate(parts) for parts in zip(*chunks)]
                batch = self._finish(raw)
            except BaseException:
                if chunks and got:
                    self._restore(chunks, got)
                raise
            self._dequeued += got
        return self._structure(batch)

    def _empty_batch(self, op: str) -> Any:
        """A batch of no element, as TF's ``dequeue_many(0)`` gives one: possible only when
        every component's shape is known."""
        shapes = [self._dense_shape(i) for i in range(len(self._dtypes or ()))]
        if not shapes or any(shape is None for shape in shapes):
            raise InvalidArgumentError(
                f"Queue '{self._name}': {op}(0) requires the components to have specified "
                f"shapes, got {[_fmt_shape(s) for s in (self._shapes or [None])]}")
        return self._structure([np.empty((0,) + shape, dtype=dtype)
                                for shape, dtype in zip(shapes, self._dtypes)])

    def _restore(self, chunks: List[List[np.ndarray]], got: int) -> None:
        raw = chunks[0] if len(chunks) == 1 else [np.concatenate(p) for p in zip(*chunks)]
        chunks.clear()
        self._put_back(raw, got)
        self._not_empty.notify_all()

    def _restore_and_fail(self, chunks: List[List[np.ndarray]], got: int,
                          n: int) -> BaseException:
        if chunks:
            self._restore(chunks, got)
        return self._insufficient(n)

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


def _short(value: Any) -> str:
    """A one-line description of a bad value for an error message."""
    if isinstance(value, np.ndarray) and value.ndim:
        return f"an array of dtype {value.dtype} and shape {list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _per_element(arr: Any) -> np.ndarray:
    """A batch of an unknown-shape component as a ``(n,)`` object array of its elements."""
    out = np.empty(len(arr), dtype=object)
    for j in range(len(arr)):
        item = arr[j]
        out[j] = item.copy() if isinstance(item, np.ndarray) else item
    return out


def _row(column: np.ndarray, row: int) -> Any:
    """The value at ``row``, copied when it is a view into a preallocated column."""
    value = column[row]
    return value.copy() if column.ndim > 1 else value


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

    def _write(self, index: Any, batch: List[np.ndarray]) -> None:
        for column, values in zip(self._columns, batch):
            if isinstance(index, slice):
                _assign(column, index, values)
            else:  # wrapping around: a fancy index, copied by NumPy
                column[index] = values

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
        row = (self._head + self._count) % self._rows
        for column, value in zip(self._columns, values):
            _assign(column, row, value)
        self._count += 1

    def _take(self, n: int) -> List[np.ndarray]:
        index = self._ring(self._head, n)
        if isinstance(index, slice):
            out = [column[index].copy() for column in self._columns]
        else:
            out = [column[index] for column in self._columns]
        self._clear(index)
        self._head = (self._head + n) % self._rows
        self._count -= n
        return out

    def _take_one(self) -> List[Any]:
        out = [_row(column, self._head) for column in self._columns]
        self._clear(self._head)
        self._head = (self._head + 1) % self._rows
        self._count -= 1
        return out

    def _put_back(self, batch: List[np.ndarray], n: int) -> None:
        self._reserve(n)
        self._head = (self._head - n) % self._rows
        self._write(self._ring(self._head, n), batch)
        self._count += n


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
        self._slots: Optional[np.ndarray] = None
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

    def _allocate(self, rows: Optional[int] = None) -> None:
        super()._allocate(rows)
        known = 0 if self._slots is None else len(self._slots)  # _grow keeps those rows
        added = np.arange(known, self._rows)
        self._slots = added if self._slots is None else np.concatenate([self._slots, added])

    def _reserve(self, n: int) -> None:
        """Grows the columns (every row kept: the slots point into them) unless ``n`` more
        elements fit."""
        if self._count + n > self._rows:
            self._grow(self._count + n, slice(0, self._rows))

    def _put(self, batch: List[np.ndarray], n: int) -> None:
        self._reserve(n)
        rows = self._slots[self._count:self._count + n]
        for column, values in zip(self._columns, batch):
            column[rows] = values
        self._count += n
        self._appended += n

    _put_back = _put  # order means nothing here

    def _put_one(self, values: List[Any]) -> None:
        self._reserve(1)
        row = int(self._slots[self._count])
        for column, value in zip(self._columns, values):
            _assign(column, row, value)
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
        rows = slots[start:start + k].copy()
        places = self._rng.choice(start + k, size=k, replace=False)
        displaced = places[places < start]
        if len(displaced):
            open_ = np.ones(k, dtype=bool)
            open_[places[places >= start] - start] = False
            slots[np.flatnonzero(open_) + start] = slots[displaced]
        slots[places] = rows

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

    def _take(self, n: int) -> List[np.ndarray]:
        rows = self._draw(n)
        # take() gathers rows in about half the time of fancy indexing
        out = [column.take(rows, axis=0) for column in self._columns]
        self._clear(rows)
        return out

    def _take_one(self) -> List[Any]:
        row = int(self._draw(1)[0])
        out = [_row(column, row) for column in self._columns]
        self._clear(row)
        return out


class _ArrivalPoolShuffleQueue(RandomShuffleQueue):
    """A RandomShuffleQueue whose dequeue of ``n`` draws from the first ``min_after_dequeue +
    n`` elements it holds, in the order they arrived (from all, when it holds fewer).

    What it hands out then depends only on the order of its elements, not on how far ahead
    of the consumer the producer got: fed by one thread with a seed, it repeats exactly,
    while its producer still runs ahead into the rest of the capacity. (TF's queue, and
    :class:`RandomShuffleQueue`, draw from every element held.) The seeded one-thread
    batching functions use it.
    """

    def _pool(self, n: int) -> int:
        # Closed or not: a dequeue after the close may come sooner or later, and must draw
        # from the same pool. (Fewer than min_after_dequeue + n held: all of them.)
        shuffled = self._count - self._appended
        return min(self._appended, max(0, self._min_after_dequeue + n - shuffled))


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
                "PaddingFIFOQueue requires shapes (None for a dimension to pad), got None")
        flat = [i for i, shape in enumerate(shapes if isinstance(shapes, (list, tuple)) else ())
                if shape is None or isinstance(shape, (int, np.integer))]
        if not isinstance(shapes, (list, tuple)) or not shapes or flat:
            raise InvalidArgumentError(  # TF's ValueError: a flat [None] is no list of shapes
                f"When providing partial shapes, a list of shapes must be provided: "
                f"PaddingFIFOQueue needs the rank of every component: "
                f"{f'shapes[{flat[0]}] is {shapes[flat[0]]!r}' if flat else f'got {shapes!r}'}")
        super().__init__(capacity, dtypes, shapes, names, name)
        for i, shape in enumerate(self._shapes):
            if shape is None:
                raise InvalidArgumentError(
                    f"PaddingFIFOQueue needs the rank of every component: shapes[{i}] is None")

    def _stack(self, i: int, items: np.ndarray) -> np.ndarray:
        rank = len(self._shapes[i])
        item_shapes = [np.shape(item) for item in items]
        shape = tuple(max((s[d] for s in item_shapes), default=0) for d in range(rank))
        dtype = self._dtypes[i]
        out = np.full((len(items),) + shape, b"" if dtype == _dtypes.string else 0, dtype=dtype)
        for j, (item, item_shape) in enumerate(zip(items, item_shapes)):
            out[(j,) + tuple(slice(0, d) for d in item_shape)] = item
        return out


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
        types = _as_dtype_list(types)
        # With no component after the priority, shapes=[] lists no shape (as in TF), not
        # the scalar shape of one component.
        shapes = [] if not types and isinstance(shapes, (list, tuple)) and not shapes \
            else _as_shape_list(shapes)
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
        for column, values in zip(self._columns, batch):
            column[rows] = values
        for entry in zip(batch[0].tolist(), sequences, rows.tolist()):
            heapq.heappush(self._heap, entry)

    def _put(self, batch: List[np.ndarray], n: int) -> None:
        self._store(batch, itertools.islice(self._sequence, n))

    def _put_back(self, batch: List[np.ndarray], n: int) -> None:
        self._front -= n
        self._store(batch, range(self._front, self._front + n))

    def _put_one(self, values: List[Any]) -> None:
        row = int(self._claim(1)[0])
        for column, value in zip(self._columns, values):
            column[row] = value
        heapq.heappush(self._heap, (int(values[0]), next(self._sequence), row))

    def _take(self, n: int) -> List[np.ndarray]:
        rows = np.array([heapq.heappop(self._heap)[2] for _ in range(n)], dtype=np.intp)
        out = [column[rows] for column in self._columns]
        self._clear(rows)
        self._free.extend(rows.tolist())
        return out

    def _take_one(self) -> List[Any]:
        row = heapq.heappop(self._heap)[2]
        out = [_row(column, row) for column in self._columns]
        self._clear(row)
        self._free.append(row)
        return out
