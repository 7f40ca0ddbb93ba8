"""Batching: TF1's ``tf.train.batch`` family, returning an iterator of NumPy batches.

A batching function takes a *producer* (a zero-argument callable returning one element: a tuple,
a list, a dict, or a single value) and builds the last stage of a pipeline: a queue, and a
:class:`~queuepipe.runner.QueueRunner` whose threads call the producer again and again and
enqueue what it returns. The result is a :class:`Batches`: iterate it to get batches, each the
element's structure with every component stacked along a new leading axis.

Usage:

.. code-block:: python

    import numpy as np
    import queuepipe as qp

    with qp.Pipeline().as_default():
        row = qp.train.slice_input_producer([np.arange(100), np.arange(100) % 10],
                                            num_epochs=2, seed=0)
        batches = qp.train.shuffle_batch(row, batch_size=32, capacity=64,
                                         min_after_dequeue=16, seed=0,
                                         allow_smaller_final_batch=True)
        for features, labels in batches:   # starts the runners, stops them at the end
            print(features.shape)          # (32,) ... then (8,)

The iterator ends (``StopIteration``) once the input is exhausted and the final batch is
delivered; :meth:`Batches.dequeue` raises ``OutOfRangeError`` there instead, as TF's dequeue op
does. If nobody started the pipeline's runners, the first batch requested starts them under a
Coordinator the :class:`Batches` owns, and the end of the input, :meth:`Batches.close` or an
exception stops and joins them. Inside ``with qp.running():`` (or after
``qp.start_queue_runners(coord)``) a :class:`Batches` only dequeues.

How it differs from TF:

* There are no static shapes. The batch queue is built when the first element arrives, with
  that element's dtypes and shapes (or ``shapes=``, when given): fixed-shape components then
  live in the queue's preallocated arrays and a batch is one slice copy. A later element of
  another shape is an ``InvalidArgumentError`` naming the component; with ``dynamic_pad=True``
  every dimension of every component is padded per batch instead (unless ``shapes=`` says
  which).
* The structure of a batch is the structure of the element, also for one component: a
  producer returning ``(x,)`` gives batches ``(xs,)``, one returning ``x`` gives ``xs`` (TF
  unwrapped one-element lists).
* A component may be a :class:`~queuepipe.sparse.SparseValue` (a ``VarLenFeature``'s
  parse): a batch holds one SparseValue for it, with a leading batch column in ``indices``
  and ``dense_shape`` ``[batch, largest extent of each dimension]``, as TF's SparseTensor
  batching gives; with ``enqueue_many`` a batched SparseValue is split along its first index
  column.
* A producer's exception reaches the consumer: the batch that would have followed raises a copy
  of it, chained to the original.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import sparse
from queuepipe._elements import unique_name
from queuepipe._queue_base import wait_holding
from queuepipe.coordinator import Coordinator
from queuepipe.errors import CancelledError, DeadlineExceededError, InvalidArgumentError, \
    OutOfRangeError
from queuepipe.queues import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, \
    _ArrivalPoolShuffleQueue
from queuepipe.runner import Pipeline, QueueRunner, RunnerGroup, get_default_pipeline, \
    start_queue_runners
from queuepipe.sparse import SparseValue

__all__ = ["Batches", "batch", "shuffle_batch", "batch_join", "shuffle_batch_join",
           "maybe_batch", "maybe_shuffle_batch", "maybe_batch_join", "maybe_shuffle_batch_join",
           "running", "STOP_GRACE_PERIOD_SECS"]

_log = logging.getLogger(__name__)

# The state of a seeded batching function: the batches delivered, passed over on resuming.
_REPLAY_FORMAT = "queuepipe.batches/replay-1"

# How long stopping waits for runner threads before it names the ones still alive.
STOP_GRACE_PERIOD_SECS = 10.0

# Longest single wait, so that Ctrl-C reaches a waiting main thread promptly on every platform.
_WAIT_SLICE_SECS = 0.1

# The most elements a runner thread of a one-element batching function produces before it puts
# them in one step (fewer when the queue has less room, or is closed). A consumer that waits
# takes staged elements at once, so a group delays nothing; a larger group spreads the lock,
# the wake-up and the thread hand-overs of a put over more elements (mnist, 2 threads: 32 ->
# 128 took the per-record pipeline from about 60k to 72k records/s).
_GROUP_SIZE = 128

def _scope(name: Optional[str], default: str) -> str:
    """``name``, or ``default``, ``default_1``, ... unique in the process, like TF's scopes."""
    return name if name is not None else unique_name(default)


# -- argument checks ------------------------------------------------------------------------


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise InvalidArgumentError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _check_min_after_dequeue(min_after_dequeue: Any, capacity: int) -> int:
    if isinstance(min_after_dequeue, bool) \
            or not isinstance(min_after_dequeue, (int, np.integer)) or min_after_dequeue < 0:
        raise InvalidArgumentError(
            f"min_after_dequeue must be a non-negative integer, got {min_after_dequeue!r}")
    if capacity <= min_after_dequeue:
        raise InvalidArgumentError(
            f"capacity ({capacity}) must exceed min_after_dequeue ({min_after_dequeue}): the "
            f"queue could never hold an element to dequeue; TF1 code used "
            f"capacity = min_after_dequeue + 3 * batch_size")
    return int(min_after_dequeue)


def _check_producers(producers: Any, fn: str, join: bool) -> List[Callable[[], Any]]:
    if not join:
        producers = [producers]
    elif callable(producers) or not isinstance(producers, (list, tuple)):
        raise TypeError(f"{fn}() takes a list of producers (one thread each), got "
                        f"{producers!r}")
    elif not producers:
        raise ValueError(f"Expected at least one input in {fn}().")
    for i, producer in enumerate(producers):
        if not callable(producer):
            where = f"tensors_list[{i}]" if join else "tensors"
            raise TypeError(
                f"{fn}(): {where} must be a producer, a zero-argument callable returning one "
                f"element (a tuple, list, dict or single value), got {producer!r}")
    return list(producers)


def _check_keep_input(keep_input: Any, enqueue_many: bool) -> Any:
    """``keep_input`` as True, False, a 1-D bool mask, or a callable; checked as TF does."""
    if callable(keep_input):
        return keep_input
    mask = _as_mask(keep_input, enqueue_many)
    return bool(mask) if mask.ndim == 0 else mask


def _as_mask(keep: Any, enqueue_many: bool) -> np.ndarray:
    mask = np.asarray(keep)
    if mask.dtype != np.bool_:
        raise InvalidArgumentError(f"`keep_input` must be a bool or bools, got {keep!r}")
    if mask.ndim > 1:
        raise InvalidArgumentError(
            f"`keep_input` must be 0 or 1 dimensions, got shape {mask.shape}.")
    if mask.ndim == 1 and not enqueue_many:
        raise InvalidArgumentError("`keep_input` cannot be a vector when `enqueue_many=False`.")
    return mask


def _check_shapes(shapes: Any) -> Any:
    if shapes is not None and not isinstance(shapes, (list, tuple, Mapping)):
        raise InvalidArgumentError(
            f"shapes must be a list of shapes (one per component) or a dict of them by key, "
            f"got {shapes!r}")
    return shapes


# -- elements -------------------------------------------------------------------------------


class _Structure:
    """The layout of a producer's elements, fixed by the first one.

    An element goes onto the batch queue as the queue expects it (a dict, a tuple of two or
    more components, or the bare value of a one-component queue), and a batch comes back in
    the element's own form: the same container type, also around a single component.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kind: Optional[type] = None  # dict, tuple, list, or object for a bare value
        self._keys: Any = None  # the first element's keys, when it is a dict

    def to_queue(self, element: Any) -> Any:
        """The element as the batch queue takes it; the first element fixes the layout.

        Raises:
          InvalidArgumentError: a dict element whose keys differ from the first one's (from
            another producer of a ``*_join``, say), in TF's words.
        """
        if self._kind is None:
            with self._lock:
                if self._kind is None:
                    self._kind = self._kind_of(element)
                    if self._kind is dict:
                        self._keys = set(element)
        if type(element) is dict and element.keys() == self._keys:
            return element  # the usual element, checked without the ABC checks below
        if isinstance(element, (tuple, list)) and not isinstance(element, SparseValue):
            return element[0] if len(element) == 1 else tuple(element)
        if self._keys is not None and (not isinstance(element, Mapping)
                                       or element.keys() != self._keys):
            this = sorted(element, key=str) if isinstance(element, Mapping) else \
                f"no dict but {element!r}"
            raise InvalidArgumentError(
                f"the elements to batch must have the same keys: the first had "
                f"{sorted(self._keys, key=str)}, this one {this}")
        return element

    @staticmethod
    def _kind_of(element: Any) -> type:
        if isinstance(element, SparseValue):  # a value, though a namedtuple
            return object
        if isinstance(element, Mapping):
            kind: type = dict
        elif isinstance(element, list):
            kind = list
        elif isinstance(element, tuple):
            kind = tuple
        else:
            return object
        if not element:
            raise InvalidArgumentError(
                f"the producer returned an empty element {element!r}: it must return at least "
                f"one component")
        return kind

    def restore(self, batch: Any) -> Any:
        """A batch as the queue returned it, in the element's form."""
        # One component comes back bare (a SparseValue too, though a namedtuple).
        single = not isinstance(batch, tuple) or isinstance(batch, SparseValue)
        if self._kind is tuple:
            return (batch,) if single else batch
        if self._kind is list:
            return [batch] if single else list(batch)
        return batch


def _dtype_of(value: Any) -> np.dtype:
    """The queue dtype for a component: queuepipe's string dtype for bytes and str, the
    values' dtype for a SparseValue."""
    if isinstance(value, SparseValue):
        return _dtype_of(value.values)
    if isinstance(value, (bytes, str)):
        return _dtypes.string
    arr = np.asarray(value)
    return _dtypes.string if arr.dtype.kind in "SUO" else arr.dtype


def _select(value: Any, mask: np.ndarray) -> Any:
    """The elements of one batched component where ``mask`` is true."""
    if isinstance(value, np.ndarray):
        return value[mask]
    if isinstance(value, SparseValue):
        return sparse.select(value, mask)
    return [item for item, keep in zip(value, mask) if keep]


class _DeferredQueue:
    """The batch queue, built from the first element enqueued.

    TF knows every dtype and shape before its pipeline runs; a producer does not, and calling it
    early could block (its reader waits on runners not started yet). So a batching function
    makes this stand-in, and the first enqueue builds the real queue with that element's dtypes,
    names and shapes (``shapes=`` when given; with ``dynamic_pad`` every dimension free), which
    keeps fixed-shape components in preallocated arrays. Everything is then forwarded to it. A
    ``close()`` or ``abort()`` before any element builds an empty queue and closes it; a
    dequeue before any element waits for one (or for the close).

    Args:
      make: ``make(dtypes, shapes, names)`` builds the real queue.
      shapes: the user's ``shapes=`` (per element), or None to infer them.
      dynamic_pad: infer every dimension as free, to be padded per batch.
      capacity, name: the real queue's, known before it is built.
    """

    def __init__(self, make: Callable[..., Any], shapes: Any, dynamic_pad: bool,
                 capacity: int, name: str) -> None:
        self._make = make
        self._declared = shapes
        self._dynamic_pad = dynamic_pad
        self._capacity = capacity
        self._name = name
        self._lock = threading.RLock()  # for its C-level owner: see _queue_base.wait_holding
        # Announces that the real queue exists.
        self._built = threading.Condition(self._lock)
        self._queue: Any = None
        self._stand_in = False  # the queue is an empty one, closed before any element came
        self._runners_added = 0
        self._runners_started = 0

    # -- building ------------------------------------------------------------------------------

    def _components(self, vals: Any) -> tuple:
        """``(components, names)`` of an element in the queue's form: a dict, a tuple of two
        or more components, or the value of the only one (which may be a list)."""
        if isinstance(vals, Mapping):
            return list(vals.values()), list(vals)
        if isinstance(vals, tuple) and not isinstance(vals, SparseValue):
            return list(vals), None
        return [vals], None

    def _shapes(self, components: List[Any], names: Optional[List[str]],
                batched: bool) -> List[Any]:
        declared = self._declared
        if declared is not None:
            if isinstance(declared, Mapping):
                if names is None or set(declared) != set(names):
                    raise InvalidArgumentError(
                        f"batch queue '{self._name}': shapes has keys {sorted(declared)} but "
                        f"the elements have {'no keys' if names is None else sorted(names)}")
                return [declared[k] for k in names]
            if len(components) == 1 and all(d is None or isinstance(d, (int, np.integer))
                                            for d in declared):
                return [declared]  # the shape of the one component
            if names is not None:  # TF lists the shapes of a dict in sorted key order
                by_key = dict(zip(sorted(names), declared))
                declared = [by_key.get(k) for k in names]
            if len(declared) != len(components):
                raise InvalidArgumentError(
                    f"batch queue '{self._name}': shapes has {len(declared)} entries but the "
                    f"elements have {len(components)} components")
            return list(declared)
        shapes = []
        for i, value in enumerate(components):
            label = repr(names[i]) if names is not None else str(i)
            if isinstance(value, SparseValue):  # kept per element, batched as one SparseValue
                shapes.append([None])
                continue
            try:
                shape = np.shape(value)
            except ValueError as e:
                raise InvalidArgumentError(
                    f"batch queue '{self._name}' component {label}: a ragged value has no "
                    f"shape ({e})") from None
            if batched:
                if not shape:
                    raise InvalidArgumentError(
                        f"batch queue '{self._name}' component {label}: enqueue_many needs a "
                        f"leading batch axis, got a scalar")
                shape = shape[1:]
            shapes.append([None] * len(shape) if self._dynamic_pad else list(shape))
        return shapes

    def _real(self, vals: Any = None, batched: bool = False) -> Any:
        """The real queue, built from ``vals`` (an element or batch) if it does not exist."""
        queue = self._queue
        if queue is not None and (vals is None or not self._stand_in):
            return queue
        with self._lock:
            if self._stand_in and vals is not None:
                # closed before its first element: that element finds a closed queue, as an
                # enqueue after close() does, not a stand-in that knows no components
                raise CancelledError(f"Queue '{self._name}' is closed.")
            if self._queue is None:
                if vals is None:  # closed before any element: an empty queue to close
                    queue = FIFOQueue(self._capacity, name=self._name)
                    self._stand_in = True
                else:
                    components, names = self._components(vals)
                    shapes = self._shapes(components, names, batched)
                    types = [_dtype_of(c) for c in components]
                    queue = self._make(types, shapes, names)
                for _ in range(self._runners_added):
                    queue._runner_added()
                for _ in range(self._runners_started):
                    queue._runner_started()
                self._queue = queue
                self._built.notify_all()
            return self._queue

    def _wait_built(self, timeout: Optional[float], op: str) -> tuple:
        """Waits until the real queue exists; returns it and the timeout left."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        with self._lock:  # the C lock, not the Condition: see QueueBase._wait
            while self._queue is None:
                wait = _WAIT_SLICE_SECS
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise DeadlineExceededError(
                            f"Queue '{self._name}': {op} timed out after {timeout:.3g} s (size "
                            f"0, capacity {self._capacity}): no element has arrived yet (Timed "
                            f"out waiting for notification)")
                    wait = min(wait, left)
                wait_holding(self._built, self._lock, wait)
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self._queue, remaining

    # -- the queue interface -------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The batch queue's name."""
        return self._name

    @property
    def capacity(self) -> int:
        """The most elements the batch queue holds."""
        return self._capacity

    @property
    def dtypes(self) -> Optional[List[np.dtype]]:
        """The component dtypes, None until the first element."""
        return None if self._queue is None else self._queue.dtypes

    @property
    def shapes(self) -> Any:
        """The component shapes, None until the first element."""
        return None if self._queue is None else self._queue.shapes

    @property
    def names(self) -> Optional[List[str]]:
        """The component names of dict elements, None otherwise or until the first element."""
        return None if self._queue is None else self._queue.names

    def size(self) -> int:
        """The number of elements in the queue now."""
        return 0 if self._queue is None else self._queue.size()

    def is_closed(self) -> bool:
        """True once the queue was closed or aborted."""
        return self._queue is not None and self._queue.is_closed()

    def stats(self) -> Dict[str, Any]:
        """As :meth:`QueueBase.stats <queuepipe.queues.QueueBase.stats>` (zeros before the
        first element)."""
        if self._queue is not None:
            return self._queue.stats()
        return {"enqueued": 0, "dequeued": 0, "size": 0, "capacity": self._capacity,
                "consumer_wait_secs": 0.0, "producer_wait_secs": 0.0}

    def enqueue(self, vals: Any, timeout: Optional[float] = None) -> None:
        """As ``QueueBase.enqueue``; the first element builds the queue."""
        self._real(vals).enqueue(vals, timeout=timeout)

    def enqueue_many(self, vals: Any, timeout: Optional[float] = None) -> None:
        """As ``QueueBase.enqueue_many``; the first batch builds the queue."""
        self._real(vals, batched=True).enqueue_many(vals, timeout=timeout)

    def dequeue(self, timeout: Optional[float] = None) -> Any:
        """As ``QueueBase.dequeue``; before the first element it waits for one."""
        queue, left = self._wait_built(timeout, "dequeue")
        return queue.dequeue(timeout=left)

    def dequeue_many(self, n: int, timeout: Optional[float] = None) -> Any:
        """As ``QueueBase.dequeue_many``; before the first element it waits for one."""
        queue, left = self._wait_built(timeout, "dequeue_many")
        return queue.dequeue_many(n, timeout=left)

    def dequeue_up_to(self, n: int, timeout: Optional[float] = None) -> Any:
        """As ``QueueBase.dequeue_up_to``; before the first element it waits for one."""
        queue, left = self._wait_built(timeout, "dequeue_up_to")
        return queue.dequeue_up_to(n, timeout=left)

    def close(self, cancel_pending_enqueues: bool = False) -> None:
        """As ``QueueBase.close``. Idempotent."""
        self._real().close(cancel_pending_enqueues=cancel_pending_enqueues)

    def abort(self, exc: BaseException) -> None:
        """As ``QueueBase.abort``: consumers get a chained copy of ``exc`` once drained."""
        self._real().abort(exc)

    def _runner_added(self) -> None:
        with self._lock:
            if self._queue is None:
                self._runners_added += 1
                return
        self._queue._runner_added()

    def _runner_started(self) -> None:
        with self._lock:
            if self._queue is None:
                self._runners_started += 1
                return
        self._queue._runner_started()

    def __getattr__(self, name: str) -> Any:
        """Other public attributes of the real queue (``min_after_dequeue``, ...)."""
        queue = self.__dict__.get("_queue")
        if name.startswith("_") or queue is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}"
                                 f"{'' if name.startswith('_') else ' before its first element'}")
        return getattr(queue, name)

    def __repr__(self) -> str:
        if self._queue is not None:
            return repr(self._queue)
        return f"<batch queue '{self._name}' capacity={self._capacity}, no element yet>"


class _Rotation:
    """The turns of a seeded batching runner's ops: one op call at a time, in a fixed round
    robin over the ops still running, so that the elements arrive in an order the threads'
    timing cannot change (the producers are Python holding the GIL: taking turns costs
    them nothing they had)."""

    def __init__(self, count: int, queue: "_DeferredQueue") -> None:
        self._live = list(range(count))
        self._at = 0  # the place in _live whose turn it is
        self._queue = queue
        self._changed = threading.Condition()

    def run(self, k: int, op: Callable[[], None]) -> None:
        """Runs op ``k`` in its turn; an op that raises (its input ended) leaves the round.

        Raises:
          CancelledError: the queue closed while the op waited for its turn.
        """
        with self._changed:
            while self._live[self._at] != k:
                if self._queue.is_closed():
                    raise CancelledError(f"Queue '{self._queue.name}' is closed.")
                self._changed.wait(_WAIT_SLICE_SECS)
        try:
            op()
        except BaseException:
            with self._changed:
                del self._live[self._at]
                self._at = self._at % len(self._live) if self._live else 0
                self._changed.notify_all()
            raise
        with self._changed:
            self._at = (self._at + 1) % len(self._live)
            self._changed.notify_all()


class _InTurn:
    """An op that runs in its turn of a :class:`_Rotation`."""

    def __init__(self, rotation: _Rotation, k: int, op: Callable[[], None]) -> None:
        self._rotation = rotation
        self._k = k
        self._op = op

    def __call__(self) -> None:
        self._rotation.run(self._k, self._op)


class _EnqueueOp:
    """One enqueue op of a batching runner: call the producer, filter, enqueue.

    With one-element producers, one call of the op produces a group of elements (up to
    ``_GROUP_SIZE``, no more than the queue has room for) and puts them in one step, under
    one lock with one wake-up: per element, that lock, the wake-up check and the thread
    hand-overs cost as much as reading the record. Each element is checked as ``enqueue``
    checks it as soon as it is produced and goes to the queue's stage (``_add_stage``), where
    a waiting dequeue takes it even while the producer's next call blocks. When the producer
    raises (``OutOfRangeError`` at the end of the input, or any error), the elements already
    produced are put first, so every element still arrives exactly once.
    """

    def __init__(self, producer: Callable[[], Any], queue: _DeferredQueue,
                 structure: _Structure, enqueue_many: bool, keep_input: Any,
                 fixed_group: bool = False) -> None:
        self._producer = producer
        self._queue = queue
        self._structure = structure
        self._enqueue_many = enqueue_many
        self._keep_input = keep_input
        # In a rotation the group is always _GROUP_SIZE elements: a size taken from the
        # queue's room would let timing decide how a join's producers interleave.
        self._fixed_group = fixed_group
        self._stage: Any = None  # this op's stage on the real queue, from the first element

    def __call__(self) -> None:
        if not self._enqueue_many:
            self._produce_group()
            return
        element = self._producer()
        vals = self._structure.to_queue(element)
        keep = self._keep_input
        if callable(keep):
            keep = _check_keep_input(keep(element), self._enqueue_many)
        if keep is False:
            return
        if keep is True:
            self._queue.enqueue_many(vals)
            return
        self._queue.enqueue_many(self._filter(vals, keep))

    def _produce_group(self) -> None:
        """Produces up to ``_GROUP_SIZE`` elements, then puts the kept ones (blocking while
        the queue is full, as ``enqueue``); also when the producer raises, before its
        exception propagates."""
        real = self._queue._queue
        group = _GROUP_SIZE if self._fixed_group else \
            1 if real is None else max(1, min(_GROUP_SIZE, real._room()))
        producer, to_queue, keep_input = self._producer, self._structure.to_queue, \
            self._keep_input
        try:
            for _ in range(group):
                element = producer()
                vals = to_queue(element)
                if keep_input is not True:
                    keep = keep_input
                    if callable(keep):
                        keep = _check_keep_input(keep(element), False)
                    if keep is False:
                        continue
                if self._stage is None:
                    real = self._queue._real(vals)
                    self._stage = real._add_stage()
                self._stage.append(real._spec.element(vals))
                if real._needs:  # a dequeue waits: it may go on with what is staged
                    real._staged(self._stage)
                if real._closed:  # stopping: put (or drop) what is staged now, not later
                    break
        finally:
            if self._stage:
                real._put_staged(self._stage)

    @staticmethod
    def _filter(vals: Any, mask: np.ndarray) -> Any:
        """The elements of a batch where ``mask`` is true."""
        several = isinstance(vals, tuple) and not isinstance(vals, SparseValue)
        lengths = {sparse.batch_size(v) if isinstance(v, SparseValue) else len(v)
                   for v in (vals.values() if isinstance(vals, Mapping) else
                             vals if several else [vals])}
        if lengths != {len(mask)}:
            raise InvalidArgumentError(
                f"`keep_input` has {len(mask)} entries but the batch has "
                f"{sorted(lengths)} elements")
        if isinstance(vals, Mapping):
            return {k: _select(v, mask) for k, v in vals.items()}
        if several:
            return tuple(_select(v, mask) for v in vals)
        return _select(vals, mask)


# -- the result -----------------------------------------------------------------------------


class Batches:
    """An iterator of NumPy batches taken from a batching function's queue.

    Each batch has the structure of the producer's elements (tuple, list, dict or single value),
    every component stacked along a new leading axis (object arrays of ``bytes`` for strings).

    Starting and stopping: if the pipeline's QueueRunners were not started when the first batch
    is requested, this object starts all of them under its own
    :class:`~queuepipe.coordinator.Coordinator`, and it stops and joins them when the input
    ends, when :meth:`close` is called, or when a dequeue fails (a runner's error, Ctrl-C). If
    they were already started (``qp.start_queue_runners(coord)``, ``with qp.running():``), the
    caller's coordinator owns them and this object only dequeues. Use it as a context manager to
    stop it whatever happens::

        with qp.train.batch(producer, 32) as batches:
            for images, labels in batches:
                ...

    Ownership: a :class:`Batches` owns a :class:`~queuepipe.runner.RunnerGroup`: its own
    runner and the runners built on its pipeline since the previous batching function (its
    producer's filename queue, ...). The first one to start starts every runner of the
    pipeline, each under the coordinator of the group that owns it; each stops only its own
    group. So several :class:`Batches` on one pipeline (a train and an eval stream) each run
    to their own end. One that is garbage-collected, or still running when the process exits,
    stops and joins its threads from a finalizer and warns (``ResourceWarning``) that it was
    not closed.

    A :class:`Batches` belongs to the process that built it: after a ``fork`` the child has
    none of its threads, and a dequeue there raises ``RuntimeError``.
    """

    def __init__(self, queue: _DeferredQueue, runner: QueueRunner, pipeline: Pipeline,
                 batch_size: int, allow_smaller_final_batch: bool,
                 structure: _Structure) -> None:
        self._queue = queue
        self._runner = runner
        self._pipeline = pipeline
        self._batch_size = batch_size
        self._allow_smaller = allow_smaller_final_batch
        self._structure = structure
        self._lock = threading.Lock()
        self._checked_start = False
        self._owner = False  # True once this object runs its group (not the caller's coord)
        self._group = RunnerGroup(pipeline, queue.name)
        pipeline.claim(self._group)
        self._raised: Optional[BaseException] = None
        self._pid = os.getpid()
        self._length: Optional[int] = None  # batches in all, where known (read_batch_features)
        self._saver: Any = None  # keeps the state, where there is one (read_batch_features)
        self._replayable = False  # seeded: a state is the number of batches delivered
        self._delivered = 0
        self._replay = 0  # batches a loaded state says to pass over before the next one
        self._on_stop: List[Callable[[], None]] = []  # closers of what the runners used
        # kept alive by weakref itself
        weakref.finalize(self, _stop_abandoned, self._group, self._on_stop)

    @property
    def queue(self) -> Any:
        """The batch queue (built from the first element; ``stats()`` works before)."""
        return self._queue

    @property
    def batch_size(self) -> int:
        """The number of elements in each batch (the last may be smaller when allowed)."""
        return self._batch_size

    @property
    def coord(self) -> Optional[Coordinator]:
        """The Coordinator of the runners this object owns, or None while none of them runs
        under it (not started yet, or started by the caller's coordinator)."""
        return self._group.coord if self._group.started else None

    def _ensure_started(self) -> None:
        """Starts the pipeline's runners if nobody did; decided once, at the first dequeue."""
        with self._lock:
            if self._checked_start:
                return
            self._checked_start = True
            if self._queue.is_closed():  # the pipeline already ran: just drain
                return
            if self._runner.running and not self._group.started:
                return  # started under the caller's coordinator: only dequeue
            self._owner = True
        try:
            for thread in self._pipeline._start_runners(self._group):
                thread.start()
        except BaseException:  # Ctrl-C among the starts: stop what already runs
            with contextlib.suppress(Exception):
                self._stop()
            raise

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError(
                f"batches of queue '{self._queue.name}' were built in process {self._pid}; "
                f"this is process {os.getpid()}, a fork, where none of its threads run: build "
                f"the pipeline in the process that reads it")

    def dequeue(self, timeout: Optional[float] = None) -> Any:
        """Returns the next batch, blocking until it is complete.

        Args:
          timeout: seconds to wait; None waits forever.

        Returns:
          ``batch_size`` elements stacked (fewer for the final batch when
          ``allow_smaller_final_batch=True``), in the element's structure.

        Raises:
          OutOfRangeError: the input is exhausted and every batch was delivered (with
            ``allow_smaller_final_batch=False``, fewer than ``batch_size`` elements were left
            over and are dropped).
          DeadlineExceededError: ``timeout`` ran out; nothing was dequeued, and the pipeline
            keeps running.
          Exception: a producer's (or reader's) exception, as a copy chained to the original.
        """
        self._check_process()
        self._ensure_started()
        while self._replay:  # a loaded replay state: the batches delivered before it
            self._take(None)
            self._replay -= 1
        batch = self._take(timeout)
        self._delivered += 1
        return batch

    def _take(self, timeout: Optional[float]) -> Any:
        try:
            if self._allow_smaller:
                batch = self._queue.dequeue_up_to(self._batch_size, timeout=timeout)
            else:
                batch = self._queue.dequeue_many(self._batch_size, timeout=timeout)
        except DeadlineExceededError:
            raise
        except OutOfRangeError:
            self._stop()
            raise
        except BaseException as e:
            self._raised = e
            self._stop()
            raise
        return self._structure.restore(batch)

    def __iter__(self) -> "Batches":
        return self

    def __next__(self) -> Any:
        try:
            return self.dequeue()
        except OutOfRangeError:
            raise StopIteration from None

    def close(self) -> None:
        """Stops producing batches. Idempotent.

        Unless the caller's coordinator runs the pipeline, it stops the runners this object
        owns (requests stop, closes their queues cancelling pending enqueues) and joins their
        threads; the runners of other :class:`Batches` on the same pipeline go on. Under the
        caller's coordinator it closes its own queue, cancelling pending enqueues, and leaves
        the rest to that coordinator.

        Raises:
          Exception: a runner's exception that no dequeue has raised yet.
          RuntimeError: a thread did not stop within ``STOP_GRACE_PERIOD_SECS``.
        """
        with self._lock:
            foreign = self._checked_start and not self._owner
        if foreign:
            self._queue.close(cancel_pending_enqueues=True)
        else:
            self._stop_group()

    def _stop(self) -> None:
        """At the end of the input or on a failed dequeue: stops the runners this object
        owns, if it started them (never those of the caller's coordinator)."""
        if self._owner:
            self._stop_group()

    def _stop_group(self) -> None:
        """Stops the runners this object owns (once), joins their threads, and closes what
        they read from."""
        try:
            self._group.stop(STOP_GRACE_PERIOD_SECS)
        except Exception as e:  # noqa: BLE001 - re-raised unless the consumer already has it
            raised = self._raised
            if raised is None or (raised is not e and raised.__cause__ is not e):
                raise
        finally:
            _close_all(self._on_stop)

    def state_dict(self) -> Dict[str, Any]:
        """Where the input is: a small JSON-serialisable dict.

        Taken after batch ``k`` (between two batches, on the thread that takes them) and
        given to :meth:`load_state_dict` of the same pipeline built in a new process, the
        pipeline goes on with exactly the records this one would deliver after batch ``k``:
        every record of the epoch once over the two runs, and with a ``seed`` the very same
        batches.

        * :func:`read_batch_features`: the epoch, the cursor in the files, the records read
          and not delivered (as positions in the files, never their data) and the shuffle's
          state; its size grows with the queue's capacity, never with the data (about 28 KB
          for a 10,000-element shuffle queue, a few KB with ``shuffle="global"``). Resuming
          reads only the records not delivered.
        * A seeded shuffle batching function (``shuffle_batch(seed=...)`` and kin), or a
          ``batch`` with one thread: the number of batches delivered. Its producers are
          functions, whose position cannot be saved; but its batches are then a function of
          the seeds and the input, so resuming passes over that many batches first (it costs
          the time they took). Its producers must repeat too: an input producer upstream
          that shuffles without a seed is refused.

        Raises:
          TypeError: these batches have no state: an unseeded batching function's with
            several threads, or one fed by an unseeded shuffling producer.
        """
        if self._saver is None and self._replayable:
            shuffled = [runner.name for runner in self._group._runners
                        for op in runner.enqueue_ops if not getattr(op, "repeatable", True)]
            if shuffled:
                raise TypeError(
                    f"batches of queue '{self._queue.name}' cannot be replayed: producer "
                    f"'{shuffled[0]}' upstream shuffles without a seed, so a new process "
                    f"would see another order; give it a seed")
            return {"format": _REPLAY_FORMAT, "batches": self._delivered,
                    "batch_size": self._batch_size}
        return self._state_keeper().state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from a :meth:`state_dict` saved by the same pipeline (same files and
        arguments), before the first batch is taken.

        Raises:
          TypeError: these batches have no state.
          RuntimeError: a batch was already taken.
          InvalidArgumentError: the state is not one of this pipeline's.
        """
        keeper = self._saver if self._saver is not None or not self._replayable \
            else None
        if keeper is None:
            if not isinstance(state, dict) or state.get("format") != _REPLAY_FORMAT \
                    or state.get("batch_size") != self._batch_size:
                raise InvalidArgumentError(
                    f"not a state of these batches ({_REPLAY_FORMAT}, batch_size "
                    f"{self._batch_size}): {str(state)[:80]!r}")
        else:
            keeper = self._state_keeper()
        with self._lock:
            if self._checked_start:
                raise RuntimeError("load_state_dict: load the state before the first batch")
            if keeper is None:
                self._replay = self._delivered = int(state["batches"])
        if keeper is not None:
            keeper.load_state_dict(state)

    def _state_keeper(self) -> Any:
        if self._saver is None:
            raise TypeError(
                f"batches of queue '{self._queue.name}' have no state: an unseeded batching "
                f"function's order depends on its threads' timing, and a producer function's "
                f"position cannot be saved; give a seed (its state is then the number of "
                f"batches delivered), or use read_batch_features")
        return self._saver

    def __enter__(self) -> "Batches":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never hide the exception of the with-body
            _log.debug("Ignored an error while closing batches after %r", exc, exc_info=True)

    def __len__(self) -> int:
        """The number of batches in all, where it is known: ``read_batch_features`` with
        ``num_epochs`` set and an up-to-date ``.index`` beside every file (``write_shards``
        and ``queuepipe index`` write them).

        Raises:
          TypeError: the number is not known (a producer function, no index, endless input).
        """
        if self._length is None:
            raise TypeError("the number of these batches is not known: len() is given for "
                            "read_batch_features with num_epochs set and an up-to-date .index "
                            "beside every file")
        return self._length

    def __bool__(self) -> bool:
        return True  # not len(): an iterator is true, whether or not its length is known

    def __repr__(self) -> str:
        return (f"<Batches of {self._batch_size} from {self._queue!r}"
                f"{', owns its runners' if self._group.started else ''}>")


def _close_all(closers: List[Callable[[], None]]) -> None:
    """Runs and forgets each closer, even when one raises (the first error is raised)."""
    with contextlib.ExitStack() as stack:
        for close in closers:
            stack.callback(close)
        closers.clear()


def _stop_abandoned(group: RunnerGroup, on_stop: List[Callable[[], None]]) -> None:
    """The finalizer of a :class:`Batches`: stops the runners it owns if nobody closed it."""
    if group.stopped:
        return
    if not group.started:  # never run: the runners stay, for whoever starts the pipeline
        group.release()
        return
    warnings.warn(f"batches of queue '{group.name}' were not closed: their threads are "
                  f"stopped now; close them, or use `with`", ResourceWarning, stacklevel=2)
    try:
        try:
            group.stop(STOP_GRACE_PERIOD_SECS)
        finally:
            _close_all(on_stop)
    except Exception:  # noqa: BLE001 - nobody is left to raise it to
        _log.debug("Ignored an error while stopping abandoned batches '%s'", group.name,
                   exc_info=True)


# -- the batching functions -----------------------------------------------------------------


def _batching(producers: Sequence[Callable[[], Any]], threads_per_producer: int, *, scope: str,
              batch_size: Any, capacity: Any, min_after_dequeue: Any = None,
              keep_input: Any = True, seed: Optional[int] = None, enqueue_many: bool = False,
              shapes: Any = None, dynamic_pad: bool = False,
              allow_smaller_final_batch: bool = False, ordered: bool = False,
              structure: Optional[_Structure] = None,
              make_op: Optional[Callable[..., Callable[[], None]]] = None) -> Batches:
    """What every batching function does: check, build the queue and runner, wrap.

    ``ordered``: the ops enqueue in a fixed order whatever the threads (read_batch_features'
    plan); ``structure`` and ``make_op(producer, queue, structure)`` replace the plain ones.
    """
    batch_size = _positive_int(batch_size, "batch_size")
    capacity = _positive_int(capacity, "capacity")
    shuffle = min_after_dequeue is not None
    if shuffle:
        min_after_dequeue = _check_min_after_dequeue(min_after_dequeue, capacity)
    # With a seed the elements arrive in a fixed order (the ops take turns, or are ordered
    # by their own plan), and each batch is drawn from the first elements in arrival order,
    # so that thread timing cannot change the pool it is drawn from: the pipeline then
    # repeats exactly, whatever the number of threads.
    shuffle_queue = _ArrivalPoolShuffleQueue if seed is not None else RandomShuffleQueue
    rotate = seed is not None and not ordered and len(producers) * threads_per_producer > 1
    keep_input = _check_keep_input(keep_input, enqueue_many)
    shapes = _check_shapes(shapes)

    def make(types: List[np.dtype], queue_shapes: List[Any], names: Optional[List[str]]) -> Any:
        if shuffle:
            return shuffle_queue(capacity, min_after_dequeue, types, queue_shapes, names,
                                 seed=seed, name=queue_name)
        if dynamic_pad:
            return PaddingFIFOQueue(capacity, types, queue_shapes, names, name=queue_name)
        return FIFOQueue(capacity, types, queue_shapes, names, name=queue_name)

    kind = ("random_shuffle_queue" if shuffle else
            "padding_fifo_queue" if dynamic_pad else "fifo_queue")
    queue_name = f"{scope}/{kind}"
    queue = _DeferredQueue(make, shapes, dynamic_pad, capacity, queue_name)
    structure = structure if structure is not None else _Structure()
    ops: List[Callable[[], None]] = [
        make_op(producer, queue, structure) if make_op is not None else
        _EnqueueOp(producer, queue, structure, enqueue_many, keep_input, fixed_group=rotate)
        for producer in producers for _ in range(threads_per_producer)]
    if rotate:
        rotation = _Rotation(len(ops), queue)
        ops = [_InTurn(rotation, k, op) for k, op in enumerate(ops)]
    runner = QueueRunner(queue, ops)
    pipeline = get_default_pipeline()
    pipeline.add_queue_runner(runner)
    batches = Batches(queue, runner, pipeline, batch_size, allow_smaller_final_batch, structure)
    # Repeatable, given repeatable producers: seeded (the threads take turns), or one
    # thread into a FIFO queue.
    batches._replayable = seed is not None or (not shuffle and len(ops) == 1)
    return batches




def batch(tensors: Callable[[], Any], batch_size: int, num_threads: int = 1,
          capacity: int = 32, enqueue_many: bool = False, shapes: Any = None,
          dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
          shared_name: Optional[str] = None, name: Optional[str] = None) -> Batches:
    """Batches a producer's elements in order, as ``tf.train.batch``.

    ``num_threads`` threads each call ``tensors`` and enqueue what it returns on a FIFOQueue
    (a PaddingFIFOQueue with ``dynamic_pad``); batches are dequeued from it in order. With one
    thread, the batches keep the producer's order.

    Args:
      tensors: the producer: a zero-argument callable returning one element (a tuple, list,
        dict or single value). It raises ``OutOfRangeError`` when its input is exhausted.
      batch_size: the number of elements per batch.
      num_threads: threads calling the producer.
      capacity: the most elements the queue holds.
      dynamic_pad: pad free dimensions per batch to the longest element (with 0 or ``b""``);
        without ``shapes`` every dimension is free.
      enqueue_many: each producer call returns a batch of elements (every component with a
        leading axis) instead of one.
      shapes: the shape of each component of an element (``None`` for a free dimension), as a
        list (dict components in sorted key order) or a dict by key; by default the shapes of
        the first element.
      allow_smaller_final_batch: deliver a final batch of fewer than ``batch_size`` elements
        when the input ends; if False they are dropped.
      shared_name: ignored; kept for TF compatibility.
      name: the scope of the queue's name (``<name>/fifo_queue``); by default the function's
        name, made unique.

    Returns:
      A :class:`Batches`.

    Raises:
      InvalidArgumentError: ``batch_size``, ``num_threads`` or ``capacity`` is not a positive
        integer, or ``shapes`` is malformed.
      TypeError: ``tensors`` is not callable.
    """
    del shared_name
    return maybe_batch(tensors, True, batch_size, num_threads, capacity, enqueue_many, shapes,
                       dynamic_pad, allow_smaller_final_batch, name=_scope(name, "batch"))


def maybe_batch(tensors: Callable[[], Any], keep_input: Any, batch_size: int,
                num_threads: int = 1, capacity: int = 32, enqueue_many: bool = False,
                shapes: Any = None, dynamic_pad: bool = False,
                allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
                name: Optional[str] = None) -> Batches:
    """:func:`batch`, keeping only the elements ``keep_input`` selects.

    Args:
      tensors, batch_size, num_threads, capacity, dynamic_pad: as for :func:`batch`.
      keep_input: a bool (False drops everything), with ``enqueue_many`` a 1-D bool mask over
        each batch the producer returns, or a callable taking the element (the batch) and
        returning such a bool (mask).
      enqueue_many, shapes, allow_smaller_final_batch, shared_name, name: as for
        :func:`batch`.

    Returns:
      A :class:`Batches`.

    Raises:
      InvalidArgumentError: as for :func:`batch`, or ``keep_input`` is a vector without
        ``enqueue_many``, or has more than one dimension.
      TypeError: ``tensors`` is not callable.
    """
    del shared_name
    threads = _positive_int(num_threads, "num_threads")
    return _batching(_check_producers(tensors, "batch", join=False), threads,
                     scope=_scope(name, "maybe_batch"), batch_size=batch_size,
                     capacity=capacity,
                     keep_input=keep_input, enqueue_many=enqueue_many, shapes=shapes,
                     dynamic_pad=dynamic_pad,
                     allow_smaller_final_batch=allow_smaller_final_batch)


def batch_join(tensors_list: Sequence[Callable[[], Any]], batch_size: int, capacity: int = 32,
               enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
               allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
               name: Optional[str] = None) -> Batches:
    """Batches the elements of several producers, one thread each, as ``tf.train.batch_join``.

    Use it to read several files in parallel (a reader per producer) while mixing their
    records into each batch. All producers must return elements of the same structure.

    Args:
      tensors_list: a non-empty list of producers.
      batch_size, capacity, dynamic_pad: as for :func:`batch`.
      enqueue_many, shapes, allow_smaller_final_batch, shared_name, name: as for
        :func:`batch`.

    Returns:
      A :class:`Batches`.

    Raises:
      ValueError: ``tensors_list`` is empty.
      TypeError: ``tensors_list`` is not a list, or holds something not callable.
      InvalidArgumentError: as for :func:`batch`.
    """
    del shared_name
    return maybe_batch_join(tensors_list, True, batch_size, capacity, enqueue_many, shapes,
                            dynamic_pad, allow_smaller_final_batch,
                            name=_scope(name, "batch_join"))


def maybe_batch_join(tensors_list: Sequence[Callable[[], Any]], keep_input: Any,
                     batch_size: int, capacity: int = 32, enqueue_many: bool = False,
                     shapes: Any = None, dynamic_pad: bool = False,
                     allow_smaller_final_batch: bool = False,
                     shared_name: Optional[str] = None, name: Optional[str] = None) -> Batches:
    """:func:`batch_join`, keeping only the elements ``keep_input`` selects.

    Args:
      tensors_list, batch_size, capacity, dynamic_pad: as for :func:`batch_join`.
      keep_input: as for :func:`maybe_batch`.
      enqueue_many, shapes, allow_smaller_final_batch, shared_name, name: as for
        :func:`batch`.

    Returns:
      A :class:`Batches`.

    Raises:
      The errors of :func:`batch_join` and :func:`maybe_batch`.
    """
    del shared_name
    return _batching(_check_producers(tensors_list, "batch_join", join=True), 1,
                     scope=_scope(name, "maybe_batch_join"), batch_size=batch_size,
                     capacity=capacity,
                     keep_input=keep_input, enqueue_many=enqueue_many, shapes=shapes,
                     dynamic_pad=dynamic_pad,
                     allow_smaller_final_batch=allow_smaller_final_batch)


def shuffle_batch(tensors: Callable[[], Any], batch_size: int, capacity: int,
                  min_after_dequeue: int, num_threads: int = 1, seed: Optional[int] = None,
                  enqueue_many: bool = False, shapes: Any = None,
                  allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
                  name: Optional[str] = None) -> Batches:
    """Batches a producer's elements in random order, as ``tf.train.shuffle_batch``.

    ``num_threads`` threads call ``tensors`` and enqueue on a RandomShuffleQueue; each batch is
    drawn at random from it while it holds more than ``min_after_dequeue`` elements (all of
    them once the input ends, so nothing is stranded). A larger ``min_after_dequeue`` mixes
    better and takes longer to fill; TF1 code used ``capacity = min_after_dequeue +
    3 * batch_size``.

    Reproducibility (beyond TF): with ``seed``, the ``num_threads`` threads take turns, one
    producer call (a group of elements) at a time in a fixed round robin, and each batch is
    drawn from the first elements held, in the order they arrived: at most
    ``min_after_dequeue + batch_size`` (arrivals join that pool a few batches at a time;
    later ones wait). With a deterministic producer (seeded
    producers and readers upstream) the batches are then a function of the seed and the
    input, whatever ``num_threads``, run after run; and :meth:`Batches.state_dict` is the
    number of batches delivered, which a new process passes over to resume. Taking turns
    costs nothing measurable: the producers are Python holding the GIL (see
    docs/performance.md). Without a seed the threads run freely: the multiset of each
    epoch is exact, the order is not.

    Args:
      tensors: the producer, as for :func:`batch`.
      batch_size: the number of elements per batch.
      capacity: the most elements the queue holds; more than ``min_after_dequeue``.
      min_after_dequeue: elements kept in the queue while it is open, to draw from.
      num_threads: threads calling the producer.
      seed: seeds the queue's generator.
      enqueue_many: each producer call returns a batch of elements (every component with a
        leading axis) instead of one.
      shapes: the shape of each component of an element (``None`` for a free dimension), as a
        list (dict components in sorted key order) or a dict by key; by default the shapes of
        the first element.
      allow_smaller_final_batch: deliver a final batch of fewer than ``batch_size`` elements
        when the input ends; if False they are dropped.
      shared_name: ignored; kept for TF compatibility.
      name: the scope of the queue's name (``<name>/random_shuffle_queue``); by default the
        function's name, made unique.

    Returns:
      A :class:`Batches`.

    Raises:
      InvalidArgumentError: ``batch_size``, ``num_threads`` or ``capacity`` is not a positive
        integer, ``min_after_dequeue`` is negative or not less than ``capacity``, or
        ``shapes`` is malformed.
      TypeError: ``tensors`` is not callable.
    """
    del shared_name
    return maybe_shuffle_batch(tensors, batch_size, capacity, min_after_dequeue, True,
                               num_threads, seed, enqueue_many, shapes,
                               allow_smaller_final_batch,
                               name=_scope(name, "shuffle_batch"))


def maybe_shuffle_batch(tensors: Callable[[], Any], batch_size: int, capacity: int,
                        min_after_dequeue: int, keep_input: Any, num_threads: int = 1,
                        seed: Optional[int] = None, enqueue_many: bool = False,
                        shapes: Any = None, allow_smaller_final_batch: bool = False,
                        shared_name: Optional[str] = None,
                        name: Optional[str] = None) -> Batches:
    """:func:`shuffle_batch`, keeping only the elements ``keep_input`` selects.

    Args:
      tensors, batch_size, capacity, min_after_dequeue, num_threads, seed: as for
        :func:`shuffle_batch`.
      keep_input: as for :func:`maybe_batch`.
      enqueue_many, shapes, allow_smaller_final_batch, shared_name, name: as for
        :func:`shuffle_batch`.

    Returns:
      A :class:`Batches`.

    Raises:
      The errors of :func:`shuffle_batch` and :func:`maybe_batch`.
    """
    del shared_name
    threads = _positive_int(num_threads, "num_threads")
    return _batching(_check_producers(tensors, "shuffle_batch", join=False), threads,
                     scope=_scope(name, "maybe_shuffle_batch"), batch_size=batch_size,
                     capacity=capacity,
                     min_after_dequeue=min_after_dequeue, keep_input=keep_input, seed=seed,
                     enqueue_many=enqueue_many, shapes=shapes,
                     allow_smaller_final_batch=allow_smaller_final_batch)


def shuffle_batch_join(tensors_list: Sequence[Callable[[], Any]], batch_size: int,
                       capacity: int, min_after_dequeue: int, seed: Optional[int] = None,
                       enqueue_many: bool = False, shapes: Any = None,
                       allow_smaller_final_batch: bool = False,
                       shared_name: Optional[str] = None,
                       name: Optional[str] = None) -> Batches:
    """Shuffles the elements of several producers, one thread each, into batches, as
    ``tf.train.shuffle_batch_join``.

    The usual way to read sharded files in parallel: one reader (and producer) per thread, all
    feeding one RandomShuffleQueue.

    Args:
      tensors_list: a non-empty list of producers.
      batch_size, capacity, min_after_dequeue, seed: as for :func:`shuffle_batch`.
      enqueue_many, shapes, allow_smaller_final_batch, shared_name, name: as for
        :func:`shuffle_batch`.

    Returns:
      A :class:`Batches`.

    Raises:
      The errors of :func:`shuffle_batch` and :func:`batch_join`.
    """
    del shared_name
    return maybe_shuffle_batch_join(tensors_list, batch_size, capacity, min_after_dequeue, True,
                                    seed, enqueue_many, shapes, allow_smaller_final_batch,
                                    name=_scope(name, "shuffle_batch_join"))


def maybe_shuffle_batch_join(tensors_list: Sequence[Callable[[], Any]], batch_size: int,
                             capacity: int, min_after_dequeue: int, keep_input: Any,
                             seed: Optional[int] = None, enqueue_many: bool = False,
                             shapes: Any = None, allow_smaller_final_batch: bool = False,
                             shared_name: Optional[str] = None,
                             name: Optional[str] = None) -> Batches:
    """:func:`shuffle_batch_join`, keeping only the elements ``keep_input`` selects.

    Args:
      tensors_list, batch_size, capacity, min_after_dequeue, seed: as for
        :func:`shuffle_batch_join`.
      keep_input: as for :func:`maybe_batch`.
      enqueue_many, shapes, allow_smaller_final_batch, shared_name, name: as for
        :func:`shuffle_batch`.

    Returns:
      A :class:`Batches`.

    Raises:
      The errors of :func:`shuffle_batch_join` and :func:`maybe_batch`.
    """
    del shared_name
    return _batching(_check_producers(tensors_list, "shuffle_batch_join", join=True), 1,
                     scope=_scope(name, "maybe_shuffle_batch_join"), batch_size=batch_size,
                     capacity=capacity, min_after_dequeue=min_after_dequeue,
                     keep_input=keep_input, seed=seed, enqueue_many=enqueue_many,
                     shapes=shapes, allow_smaller_final_batch=allow_smaller_final_batch)


# -- running a pipeline ---------------------------------------------------------------------


@contextlib.contextmanager
def running(pipeline: Optional[Pipeline] = None,
            coord: Optional[Coordinator] = None) -> Iterator[Coordinator]:
    """Runs a pipeline's QueueRunners for the duration of a ``with`` block.

    On entry it starts every runner of ``pipeline`` under ``coord``; on exit, however the block
    ends (normally, by an exception, by Ctrl-C), it requests stop, closes every queue of the
    pipeline cancelling pending enqueues, so that no thread stays blocked, and joins every
    thread.

    Usage::

        with qp.running() as coord:
            for images, labels in batches:
                train_step(images, labels)

    Args:
      pipeline: the pipeline to run; the default pipeline if None.
      coord: the Coordinator to use; a new one if None.

    Yields:
      The Coordinator.

    Raises:
      Exception: on a normal exit, a runner's exception (the first one), re-raised by
        ``coord.join``. When the block itself raised, that exception propagates and a runner's
        exception is only logged.
      RuntimeError: a thread did not stop within ``STOP_GRACE_PERIOD_SECS``.
    """
    pipeline = pipeline if pipeline is not None else get_default_pipeline()
    coord = coord if coord is not None else Coordinator()
    threads: List[threading.Thread] = []  # the coordinator joins those it registered, too
    try:
        threads = start_queue_runners(coord, pipeline=pipeline)
        yield coord
    except BaseException:
        try:
            _stop_pipeline(pipeline, coord, threads)
        except Exception:  # noqa: BLE001 - never hide the exception of the with-body
            _log.warning("Error while stopping the pipeline after an exception", exc_info=True)
        raise
    _stop_pipeline(pipeline, coord, threads)


def _stop_pipeline(pipeline: Pipeline, coord: Coordinator,
                   threads: List[threading.Thread]) -> None:
    """Request stop, unblock every queue, join (re-raising a runner's exception)."""
    coord.request_stop()
    for queue in pipeline.queues:
        queue.close(cancel_pending_enqueues=True)
    coord.join(threads, stop_grace_period_secs=STOP_GRACE_PERIOD_SECS)
