"""The batch queue of a batching function, built when its first element arrives."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np

from queuepipe._queue_base import wait_holding
from queuepipe.batching._arguments import _dtype_of
from queuepipe.errors import CancelledError, DeadlineExceededError, InvalidArgumentError
from queuepipe.queues import FIFOQueue
from queuepipe.sparse import SparseValue

# Longest single wait, so that Ctrl-C reaches a waiting main thread promptly on every platform.
_WAIT_SLICE_SECS = 0.1


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

    @property
    def built(self) -> Any:
        """The real queue, once an element built it; None before, and after a close before
        any element (the empty queue closed then has no components)."""
        return None if self._stand_in else self._queue

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
