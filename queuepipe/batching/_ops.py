"""The enqueue ops of a batching runner (call the producer, filter, enqueue) and, when
seeded, the rotation that makes their threads take turns."""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

import numpy as np

from queuepipe import sparse
from queuepipe.batching._arguments import _check_keep_input, _select, _Structure
from queuepipe.batching._deferred import _WAIT_SLICE_SECS, _DeferredQueue
from queuepipe.errors import CancelledError, InvalidArgumentError
from queuepipe.runner import END_LOOKALIKES, not_an_end
from queuepipe.sparse import SparseValue

# The most elements a runner thread of a one-element batching function produces before it puts
# them in one step (fewer when the queue has less room, or is closed). A consumer that waits
# takes staged elements at once, so a group delays nothing; a larger group spreads the lock,
# the wake-up and the thread hand-overs of a put over more elements (mnist, 2 threads: 32 ->
# 128 took the per-record pipeline from about 60k to 72k records/s).
_GROUP_SIZE = 128


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
    checks it as soon as it is produced (its arrays copied, as ``enqueue`` copies them: a
    producer may refill the buffer it returned) and goes to the queue's stage
    (``_add_stage``), where a waiting dequeue takes it even while the producer's next call
    blocks. When the producer raises (``OutOfRangeError`` at the end of the input, or any
    error), the elements already produced are put first, so every element still arrives
    exactly once. Only the producer ends the input: its ``StopIteration``, and whatever looks
    like an end from ``keep_input``, is raised as a failure naming it (see
    ``runner.END_LOOKALIKES``).
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
        try:
            element = self._producer()
        except StopIteration as e:
            raise not_an_end(e, f"the producer of queue '{self._queue.name}'") from e
        vals = self._structure.to_queue(element)
        keep = self._keep_input
        if callable(keep):
            keep = self._kept(element)
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
        stage = self._stage
        until_check = 0  # elements to stage before the next look at a waiting dequeue
        try:
            for _ in range(group):
                element = producer()
                vals = to_queue(element)
                if keep_input is not True:
                    keep = keep_input
                    if callable(keep):
                        keep = self._kept(element)
                    if keep is False:
                        continue
                if stage is None:
                    real = self._queue._real(vals)
                    stage = self._stage = real._add_stage()
                stage.append(real._spec.staged(vals))
                if not real._needs:
                    until_check = 0
                else:  # a dequeue waits: it may go on with what is staged
                    until_check -= 1
                    if until_check <= 0:
                        until_check = real._staged(stage)
                if real._closed:  # stopping: put (or drop) what is staged now, not later
                    break
        except StopIteration as e:  # (keep_input's were translated by _kept)
            raise not_an_end(e, f"the producer of queue '{self._queue.name}'") from e
        finally:
            if self._stage:
                real._put_staged(self._stage)

    def _kept(self, element: Any) -> Any:
        """What the ``keep_input`` callable says of ``element``: a bool, or with
        ``enqueue_many`` a mask. Nothing it raises is taken for the end of the input."""
        try:
            keep = self._keep_input(element)
        except END_LOOKALIKES as e:
            raise not_an_end(e, f"keep_input of queue '{self._queue.name}'") from e
        return _check_keep_input(keep, self._enqueue_many)

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
