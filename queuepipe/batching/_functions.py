"""The eight public batching functions (``batch``, ``shuffle_batch``, their ``_join`` and
``maybe_`` variants) and what they share: check, build the queue and runner, wrap."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from queuepipe.batching._arguments import _check_keep_input, _check_min_after_dequeue, \
    _check_producers, _check_shapes, _positive_int, _scope, _Structure
from queuepipe.batching._batches import Batches
from queuepipe.batching._deferred import _DeferredQueue
from queuepipe.batching._ops import _EnqueueOp, _InTurn, _Rotation
from queuepipe.queues import FIFOQueue, PaddingFIFOQueue, RandomShuffleQueue, \
    _ArrivalPoolShuffleQueue
from queuepipe.runner import QueueRunner, get_default_pipeline



def _batching(producers: Sequence[Callable[[], Any]], threads_per_producer: int, *, scope: str,
              batch_size: Any, capacity: Any, min_after_dequeue: Any = None,
              keep_input: Any = True, seed: Optional[int] = None, enqueue_many: bool = False,
              shapes: Any = None, dynamic_pad: bool = False,
              allow_smaller_final_batch: bool = False, ordered: bool = False,
              structure: Optional[_Structure] = None,
              make_op: Optional[Callable[..., Callable[[], None]]] = None,
              draw_ahead: int = 0,
              finish: Optional[Callable[[List[Any]], List[Any]]] = None) -> Batches:
    """What every batching function does: check, build the queue and runner, wrap.

    ``ordered``: the ops enqueue in a fixed order whatever the threads (read_batch_features'
    plan); ``structure`` and ``make_op(producer, queue, structure)`` replace the plain ones;
    ``draw_ahead``: the producers' enqueues draw up to this many batches ahead of the
    consumer, and ``finish`` makes every batch what the consumer gets
    (``QueueBase._draw_ahead``).
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
        queue: Any
        if shuffle:
            queue = shuffle_queue(capacity, min_after_dequeue, types, queue_shapes, names,
                                  seed=seed, name=queue_name)
        elif dynamic_pad:
            queue = PaddingFIFOQueue(capacity, types, queue_shapes, names, name=queue_name)
        else:
            queue = FIFOQueue(capacity, types, queue_shapes, names, name=queue_name)
        if draw_ahead:
            queue._draw_ahead(batch_size, draw_ahead, finish)
        return queue

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


def _called_as(fn: str, tensors: Any, num_threads: Any, name: Optional[str],
               **options: Any) -> Batches:
    """What the four ``maybe_`` functions do (the others call them): check the producers
    as ``fn`` takes them (one, or with ``fn`` a ``*_join`` a list of them, one thread each)
    and ``num_threads``, and build, in the scope ``name`` or ``maybe_<fn>``."""
    join = fn.endswith("_join")
    threads = 1 if join else _positive_int(num_threads, "num_threads")
    return _batching(_check_producers(tensors, fn, join), threads,
                     scope=_scope(name, f"maybe_{fn}"), **options)


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
    return _called_as("batch", tensors, num_threads, name, batch_size=batch_size,
                      capacity=capacity, keep_input=keep_input, enqueue_many=enqueue_many,
                      shapes=shapes, dynamic_pad=dynamic_pad,
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
    return _called_as("batch_join", tensors_list, 1, name, batch_size=batch_size,
                      capacity=capacity, keep_input=keep_input, enqueue_many=enqueue_many,
                      shapes=shapes, dynamic_pad=dynamic_pad,
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
    return _called_as("shuffle_batch", tensors, num_threads, name, batch_size=batch_size,
                      capacity=capacity, min_after_dequeue=min_after_dequeue,
                      keep_input=keep_input, seed=seed, enqueue_many=enqueue_many,
                      shapes=shapes, allow_smaller_final_batch=allow_smaller_final_batch)


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
    return _called_as("shuffle_batch_join", tensors_list, 1, name, batch_size=batch_size,
                      capacity=capacity, min_after_dequeue=min_after_dequeue,
                      keep_input=keep_input, seed=seed, enqueue_many=enqueue_many,
                      shapes=shapes, allow_smaller_final_batch=allow_smaller_final_batch)
