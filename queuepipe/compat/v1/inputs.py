"""TF1's input functions in graph form: queues, readers, producers, batching, QueueRunners.

Each wraps queuepipe's native object and returns symbolic values: ``reader.read(q)`` a
``(key, value)`` pair of Tensors whose evaluation reads one record; ``queue.enqueue(x)`` an
Operation; ``shuffle_batch([image, label], ...)`` a list of Tensors, one per component, that
one ``sess.run`` dequeues one batch for. The batching functions hand the native ones a
producer that evaluates the per-element graph once per element, in the runner threads::

    TF1 code                          here
    reader = tf.TFRecordReader()      one native TFRecordReader, made at build time
    _, v = reader.read(filename_q)    Tensor: native reader.read(native queue) per evaluation
    x = tf.decode_raw(v, tf.uint8)    Tensor: decode_raw of that value
    xs, = tf.train.batch([x], 32)     native batch(producer=lambda: evaluate([x])) -> Batches
    sess.run(xs)                      Batches.dequeue(): one batch, computed once per run
"""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Sequence, cast

import numpy as np

from queuepipe import batching, producers, queues, readers, runner
from queuepipe.compat.v1.graph import (
    Operation, Tensor, as_node, compile_fetches, evaluate, get_default_graph, run_timeout,
)
from queuepipe.compat.v1.ops import constant_value
from queuepipe.compat.v1.shapes import TensorShape
from queuepipe.compat.v1.summary import scalar as _scalar_summary
from queuepipe.errors import OutOfRangeError

__all__ = [
    "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue", "PriorityQueue",
    "TFRecordReader", "TextLineReader", "FixedLengthRecordReader", "WholeFileReader",
    "IdentityReader",
    "string_input_producer", "range_input_producer", "input_producer", "slice_input_producer",
    "batch", "shuffle_batch", "batch_join", "shuffle_batch_join", "maybe_batch",
    "maybe_shuffle_batch", "maybe_batch_join", "maybe_shuffle_batch_join", "QueueRunner",
    "add_queue_runner", "start_queue_runners", "limit_epochs", "match_filenames_once",
]


# -- queues ------------------------------------------------------------------------------------


class _Queue:
    """A TF1 queue: its methods build Operations and Tensors on the native queue."""

    def __init__(self, native: Any):
        self.queue = native

    @property
    def name(self) -> str:
        return self.queue.name

    @property
    def dtypes(self) -> Any:
        return self.queue.dtypes

    @property
    def shapes(self) -> Any:
        return self.queue.shapes

    @property
    def names(self) -> Any:
        return self.queue.names

    def enqueue(self, vals: Any, name: Optional[str] = None) -> Operation:
        return Operation(lambda: self.queue.enqueue(evaluate(vals, strict=False)),
                         name=name or f"{self.name}_enqueue")

    def enqueue_many(self, vals: Any, name: Optional[str] = None) -> Operation:
        return Operation(lambda: self.queue.enqueue_many(evaluate(vals, strict=False)),
                         name=name or f"{self.name}_EnqueueMany")

    def dequeue(self, name: Optional[str] = None) -> Any:
        """One element per run; its wait bounded by the run's ``timeout_in_ms``."""
        node = Tensor(lambda: self.queue.dequeue(timeout=run_timeout()),
                      name=name or f"{self.name}_Dequeue")
        return _outputs(node, self.queue, [])

    def dequeue_many(self, n: int, name: Optional[str] = None) -> Any:
        node = Tensor(lambda: self.queue.dequeue_many(n, timeout=run_timeout()),
                      name=name or f"{self.name}_DequeueMany")
        return _outputs(node, self.queue, [n])

    def dequeue_up_to(self, n: int, name: Optional[str] = None) -> Any:
        node = Tensor(lambda: self.queue.dequeue_up_to(n, timeout=run_timeout()),
                      name=name or f"{self.name}_DequeueUpTo")
        return _outputs(node, self.queue, [None])

    def size(self, name: Optional[str] = None) -> Tensor:
        return Tensor(self.queue.size, name=name or f"{self.name}_Size", shape=[],
                      dtype=np.int32)

    def close(self, cancel_pending_enqueues: bool = False,
              name: Optional[str] = None) -> Operation:
        return Operation(lambda: self.queue.close(cancel_pending_enqueues),
                         name=name or f"{self.name}_Close")

    def is_closed(self, name: Optional[str] = None) -> Tensor:
        return Tensor(self.queue.is_closed, name=name or f"{self.name}_IsClosed", shape=[],
                      dtype=np.bool_)


def _outputs(node: Tensor, queue: Any, batch: List[Optional[int]]) -> Any:
    """A dequeue's result as TF1 gives it: one Tensor for one component, else a list (a dict
    for a queue with names) of Tensors, each with the queue's shape after ``batch``."""
    dtypes = queue.dtypes
    shapes = queue.shapes

    def static(i: int) -> Any:
        shape = None if shapes is None or shapes[i] is None else batch + list(shapes[i])
        return {"shape": shape, "dtype": None if dtypes is None else dtypes[i]}

    if queue.names is not None:
        return {key: node.output(key, **static(i)) for i, key in enumerate(queue.names)}
    count = len(dtypes) if dtypes is not None else 1
    if count == 1:
        info = static(0)
        node._shape = None if info["shape"] is None else TensorShape(info["shape"])
        node._dtype = info["dtype"]
        return node
    return [node.output(i, **static(i)) for i in range(count)]


def _scoped(name: str) -> str:
    """``name`` under the graph's name scope, unique (a queue's name, as TF's ops are)."""
    return get_default_graph().unique_name(name)


def FIFOQueue(capacity: int, dtypes: Any, shapes: Any = None, names: Any = None,  # noqa: N802
              shared_name: Optional[str] = None, name: str = "fifo_queue") -> _Queue:
    return _Queue(queues.FIFOQueue(capacity, dtypes, shapes, names, name=_scoped(name)))


def RandomShuffleQueue(capacity: int, min_after_dequeue: int, dtypes: Any,  # noqa: N802
                       shapes: Any = None, names: Any = None, seed: Optional[int] = None,
                       shared_name: Optional[str] = None,
                       name: str = "random_shuffle_queue") -> _Queue:
    return _Queue(queues.RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shapes, names,
                                            seed=seed, name=_scoped(name)))


def PaddingFIFOQueue(capacity: int, dtypes: Any, shapes: Any, names: Any = None,  # noqa: N802
                     shared_name: Optional[str] = None,
                     name: str = "padding_fifo_queue") -> _Queue:
    return _Queue(queues.PaddingFIFOQueue(capacity, dtypes, shapes, names, name=_scoped(name)))


def PriorityQueue(capacity: int, types: Any, shapes: Any = None, names: Any = None,  # noqa: N802
                  shared_name: Optional[str] = None, name: str = "priority_queue") -> _Queue:
    return _Queue(queues.PriorityQueue(capacity, types, shapes, names, name=_scoped(name)))


def _native_queue(queue: Any) -> Any:
    return queue.queue if isinstance(queue, _Queue) else queue


# -- readers -----------------------------------------------------------------------------------


class _Reader:
    """A TF1 reader: one native reader, made when the graph is built (not per record)."""

    _NATIVE: Callable[..., Any] = readers.TFRecordReader

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.pop("name", None)
        self.reader = self._NATIVE(*args, **kwargs)

    def read(self, queue: Any, name: Optional[str] = None) -> List[Tensor]:
        """``(key, value)``: one record per evaluation (both from the same record)."""
        native = _native_queue(queue)
        pair = Tensor(lambda: self.reader.read(native), name=name or "ReaderReadV2")
        return [pair.output(i, shape=[], dtype=np.dtype(object)) for i in (0, 1)]

    def read_up_to(self, queue: Any, num_records: int,
                   name: Optional[str] = None) -> List[Tensor]:
        native = _native_queue(queue)
        pair = Tensor(lambda: self.reader.read_up_to(native, num_records),
                      name=name or "ReaderReadUpToV2")
        return [pair.output(i, shape=[None], dtype=np.dtype(object)) for i in (0, 1)]

    def num_records_produced(self, name: Optional[str] = None) -> Tensor:
        return Tensor(self.reader.num_records_produced, name=name or "ReaderNumRecordsProduced")

    def reset(self, name: Optional[str] = None) -> Operation:
        return Operation(self.reader.reset, name=name or "ReaderReset")


def _reader_class(name: str, native: Any) -> type:
    return type(name, (_Reader,), {"_NATIVE": staticmethod(native),
                                   "__doc__": f"TF1's ``tf.{name}`` (see :class:`_Reader`)."})


TFRecordReader = _reader_class("TFRecordReader", readers.TFRecordReader)
TextLineReader = _reader_class("TextLineReader", readers.TextLineReader)
FixedLengthRecordReader = _reader_class("FixedLengthRecordReader",
                                        readers.FixedLengthRecordReader)
WholeFileReader = _reader_class("WholeFileReader", readers.WholeFileReader)
IdentityReader = _reader_class("IdentityReader", readers.IdentityReader)


# -- producers ---------------------------------------------------------------------------------


def _constant(value: Any) -> Any:
    """A build-time input: producers take values, not per-element Tensors (the files of
    ``match_filenames_once``, a callable, are listed when the producer first runs)."""
    if isinstance(value, _MatchedFiles):
        return value.native
    if isinstance(value, Tensor):
        return evaluate(value)
    if isinstance(value, (list, tuple)):
        return constant_value(value, None)  # Python lists take TF's dtypes (int32, float32)
    return value


def _static_dtype(value: Any) -> Any:
    return None if callable(value) else np.asarray(value).dtype


class _MatchedFiles(Tensor):
    """``match_filenames_once``: the files matching the pattern, listed once (at its first
    evaluation, or when a producer given it first runs)."""

    def __init__(self, native: Callable[[], Any], name: str):
        super().__init__(native, name=name, shape=[None], dtype=np.dtype(object))
        self.native = native


def match_filenames_once(pattern: Any, name: Optional[str] = None) -> Tensor:
    """TF1's ``tf.train.match_filenames_once``: a Tensor ``sess.run`` evaluates to the sorted
    matching names (an object array of bytes), the same on every run."""
    patterns = evaluate(pattern) if isinstance(pattern, Tensor) else pattern
    return _MatchedFiles(producers.match_filenames_once(patterns),
                         name=name or "matching_filenames")


def _fill_summary(scope: str, tag: str, fill: Callable[[], Any]) -> None:
    """TF1's summary of a queue's fill, ``<scope>/<tag>``, in the graph's summaries (what
    ``tf.summary.merge_all`` merges): ``fill()`` as float32 at every evaluation."""
    with get_default_graph().name_scope(f"{scope}/"):
        _scalar_summary(tag, Tensor(lambda: np.float32(fill()), name="fill", shape=[],
                                    dtype=np.float32))


def _fraction_of_full(scope: str, capacity: int, size: Callable[[], int],
                      tag: Optional[str] = None) -> None:
    """``<scope>/fraction_of_<capacity>_full`` (or ``tag``): ``size() / capacity``, as TF's
    producers and ``batch`` add it."""
    _fill_summary(scope, tag or f"fraction_of_{capacity}_full",
                  lambda: np.float32(size()) * np.float32(1.0 / capacity))


def limit_epochs(tensor: Any, num_epochs: Optional[int] = None,
                 name: Optional[str] = None) -> Tensor:
    """TF1's ``tf.train.limit_epochs``: ``tensor``'s value, ``num_epochs`` runs, then
    ``OutOfRangeError`` (which ends a QueueRunner enqueuing it, closing its queue)."""
    node = tensor if isinstance(tensor, Tensor) else as_node(constant_value(tensor, None))
    count = producers.limit_epochs(None, num_epochs)  # counts the runs, raises at the limit
    return Tensor(lambda value: (count(), value)[1], [node], name=name or "limit_epochs",
                  shape=node._shape, dtype=node._dtype)


def string_input_producer(string_tensor: Any, num_epochs: Optional[int] = None,
                          shuffle: bool = True, seed: Optional[int] = None, capacity: int = 32,
                          shared_name: Optional[str] = None, name: Optional[str] = None,
                          cancel_op: Any = None) -> _Queue:
    scoped = _scoped(name or "input_producer")
    queue = producers.string_input_producer(
        _constant(string_tensor), num_epochs=num_epochs, shuffle=shuffle, seed=seed,
        capacity=capacity, name=scoped)
    _fraction_of_full(scoped, capacity, queue.size)
    return _Queue(queue)


def range_input_producer(limit: int, num_epochs: Optional[int] = None, shuffle: bool = True,
                         seed: Optional[int] = None, capacity: int = 32,
                         shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> _Queue:
    scoped = _scoped(name or "input_producer")
    queue = producers.range_input_producer(
        _constant(limit), num_epochs=num_epochs, shuffle=shuffle, seed=seed, capacity=capacity,
        name=scoped)
    _fraction_of_full(scoped, capacity, queue.size)
    return _Queue(queue)


def input_producer(input_tensor: Any, element_shape: Any = None,
                   num_epochs: Optional[int] = None, shuffle: bool = True,
                   seed: Optional[int] = None, capacity: int = 32, shared_name: Any = None,
                   summary_name: Any = None, name: Optional[str] = None,
                   cancel_op: Any = None) -> _Queue:
    values = _constant(input_tensor)
    scoped = _scoped(name or "input_producer")
    if not callable(values) and np.ndim(values) >= 1 and len(values) == 0:
        made = _empty_producer(values, capacity, scoped)
    else:
        made = _Queue(producers.input_producer(
            values, element_shape, num_epochs=num_epochs, shuffle=shuffle, seed=seed,
            capacity=capacity, name=scoped))
    if summary_name is not None:
        _fraction_of_full(scoped, capacity, made.queue.size, summary_name)
    return made


def _empty_producer(values: Any, capacity: int, name: str) -> _Queue:
    """TF's producer over no rows: a queue that gets no element and is closed when its runner
    first runs, so that a dequeue raises ``OutOfRangeError`` (with ``num_epochs=None`` TF's
    runner spins forever enqueuing nothing: here the queue is closed all the same)."""
    array = np.asarray(values, dtype=object if np.asarray(values).dtype.kind in "SUO" else None)
    queue = queues.FIFOQueue(capacity, [array.dtype], shapes=[array.shape[1:]], name=name)

    def nothing_left() -> None:
        raise OutOfRangeError(f"{name}: the input has no rows")

    get_default_graph().pipeline.add_queue_runner(runner.QueueRunner(queue, [nothing_left]))
    return _Queue(queue)


def slice_input_producer(tensor_list: Sequence[Any], num_epochs: Optional[int] = None,
                         shuffle: bool = True, seed: Optional[int] = None, capacity: int = 32,
                         shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> List[Tensor]:
    """One Tensor per input tensor; each evaluation takes the next slice of all of them."""
    values = [_constant(t) for t in tensor_list]
    scoped = _scoped(name or "input_producer")
    take = producers.slice_input_producer(values, num_epochs=num_epochs, shuffle=shuffle,
                                          seed=seed, capacity=capacity, name=scoped)
    # TF makes the index queue with range_input_producer inside this scope
    index_queue = cast(Any, take).queue
    _fraction_of_full(get_default_graph().unique_name(f"{scoped}/input_producer"), capacity,
                      index_queue.size)
    row = Tensor(take, output_of=f"{scoped}:0")
    return [row.output(i, shape=np.shape(value)[1:], dtype=_static_dtype(value))
            for i, value in enumerate(values)]


# -- batching ----------------------------------------------------------------------------------


def _batches(native: Callable[..., Any], tensors_list: Sequence[Any], keep_input: Any,
             joined: bool, **kwargs: Any) -> Any:
    """The native batching call on producers that evaluate each per-element graph once per
    element (``keep_input``, a Tensor, in the same evaluation), and its output as Tensors of
    the first structure, one dequeue per run. The components' static shapes are checked and
    given to the queue, as TF does when the graph is built."""
    keeps = threading.local()  # the keep value of the element a thread just produced

    def producer(tensors: Any) -> Callable[[], Any]:
        if isinstance(keep_input, Tensor):
            both = compile_fetches([tensors, keep_input])

            def produce() -> Any:
                values, keeps.value = both()
                return tuple(values) if isinstance(values, list) else values
            return produce
        values_of = compile_fetches(tensors)
        if isinstance(tensors, list):
            return lambda: tuple(values_of())
        return values_of

    like = tensors_list[0]
    given = kwargs["shapes"]
    shapes = _static_shapes(like, kwargs["enqueue_many"], kwargs.get("dynamic_pad", False),
                            given)
    if shapes is not None:
        kwargs["shapes"] = [shapes[key] for key in sorted(shapes)] \
            if isinstance(like, dict) else shapes
    elif isinstance(given, (list, tuple)) and isinstance(like, dict):
        shapes = dict(zip(sorted(like), given))
    else:
        shapes = given
    producers_ = [producer(t) for t in tensors_list]
    if keep_input is not None:
        kwargs["keep_input"] = (lambda element: keeps.value) \
            if isinstance(keep_input, Tensor) else keep_input
    # TF's scope: maybe_batch's is "batch", maybe_shuffle_batch_join's "shuffle_batch_join"
    kwargs["name"] = _scoped(kwargs["name"] or native.__name__.replace("maybe_", ""))
    batches = native(producers_ if joined else producers_[0], **kwargs)
    _batch_fill_summary(kwargs["name"], batches.queue, kwargs.get("min_after_dequeue"))
    node = Tensor(lambda: batches.dequeue(timeout=run_timeout()),
                  output_of=f"{kwargs['name']}:0")
    rows = None if kwargs.get("allow_smaller_final_batch") else kwargs["batch_size"]

    def static(key: Any, component: Any) -> Any:
        element = _element_shape(component, kwargs["enqueue_many"]) if shapes is None \
            else TensorShape(shapes[key])
        shape = None if element is None or element.ndims is None \
            else TensorShape([rows]).concatenate(element)
        return {"shape": shape, "dtype": as_node(component)._dtype}

    if isinstance(like, dict):
        return {key: node.output(key, **static(key, like[key])) for key in like}
    if isinstance(like, (list, tuple)):  # TF: a list of one element gives a tensor, not a list
        outputs = [node.output(i, **static(i, t)) for i, t in enumerate(like)]
        return outputs if len(outputs) > 1 else outputs[0]
    info = static(0, like)
    node._shape, node._dtype = info["shape"], info["dtype"]
    return node


def _batch_fill_summary(scope: str, queue: Any, min_after_dequeue: Optional[int]) -> None:
    """The fill summary TF1's batching adds: ``fraction_of_<capacity>_full``, or for a shuffle
    ``fraction_over_<min>_of_<capacity - min>_full``, the fill above ``min_after_dequeue``.
    It holds the queue, not the batches: batches whose output nobody keeps are dropped as
    before (their queue closed, their runner never run), and so is the pipeline."""
    if min_after_dequeue is None:
        _fraction_of_full(scope, queue.capacity, queue.size)
        return
    above = queue.capacity - min_after_dequeue
    _fill_summary(scope, f"fraction_over_{min_after_dequeue}_of_{above}_full",
                  lambda: np.float32(max(0, queue.size() - min_after_dequeue))
                  * np.float32(1.0 / above))


def _element_shape(component: Any, enqueue_many: bool) -> Optional[TensorShape]:
    """The static shape of one element of ``component``, None where not inferred."""
    shape = as_node(component)._shape
    if shape is None or not enqueue_many:
        return shape
    return shape[1:]


def _static_shapes(like: Any, enqueue_many: bool, dynamic_pad: bool, shapes: Any) -> Any:
    """The components' static shapes (a list, or a dict by key), None unless every one is
    inferred. Without ``dynamic_pad`` a shape not fully defined is refused, as TF refuses it
    when the graph is built."""
    if shapes is not None:
        return None
    items = list(like.items()) if isinstance(like, dict) \
        else list(enumerate(like)) if isinstance(like, (list, tuple)) else [(0, like)]
    found = {key: _element_shape(component, enqueue_many) for key, component in items}
    if not dynamic_pad:
        for key, component in items:
            shape = found[key]
            if shape is not None and shape.ndims is None:
                raise ValueError(f"Cannot infer Tensor's rank: {as_node(component)!r}")
        if any(s is not None and not s.is_fully_defined() for s in found.values()):
            listed = ", ".join(repr(s if s is not None else TensorShape(None))
                               for s in found.values())
            raise ValueError(f"All shapes must be fully defined: [{listed}]")
    known = {key: s for key, s in found.items() if s is not None and s.ndims is not None}
    if len(known) < len(found):
        return None
    if isinstance(like, dict):
        return {key: s.as_list() for key, s in known.items()}
    return [s.as_list() for s in known.values()]


def batch(tensors: Any, batch_size: int, num_threads: int = 1, capacity: int = 32,
          enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
          allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
          name: Optional[str] = None) -> Any:
    return _batches(batching.batch, [tensors], None, False, batch_size=batch_size,
                    num_threads=num_threads, capacity=capacity, enqueue_many=enqueue_many,
                    shapes=shapes, dynamic_pad=dynamic_pad,
                    allow_smaller_final_batch=allow_smaller_final_batch, name=name)


def maybe_batch(tensors: Any, keep_input: Any, batch_size: int, num_threads: int = 1,
                capacity: int = 32, enqueue_many: bool = False, shapes: Any = None,
                dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
                shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    return _batches(batching.maybe_batch, [tensors], keep_input, False, batch_size=batch_size,
                    num_threads=num_threads, capacity=capacity, enqueue_many=enqueue_many,
                    shapes=shapes, dynamic_pad=dynamic_pad,
                    allow_smaller_final_batch=allow_smaller_final_batch, name=name)


def shuffle_batch(tensors: Any, batch_size: int, capacity: int, min_after_dequeue: int,
                  num_threads: int = 1, seed: Optional[int] = None, enqueue_many: bool = False,
                  shapes: Any = None, allow_smaller_final_batch: bool = False,
                  shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    return _batches(batching.shuffle_batch, [tensors], None, False, batch_size=batch_size,
                    capacity=capacity, min_after_dequeue=min_after_dequeue,
                    num_threads=num_threads, seed=seed, enqueue_many=enqueue_many,
                    shapes=shapes, allow_smaller_final_batch=allow_smaller_final_batch,
                    name=name)


def maybe_shuffle_batch(tensors: Any, batch_size: int, capacity: int, min_after_dequeue: int,
                        keep_input: Any, num_threads: int = 1, seed: Optional[int] = None,
                        enqueue_many: bool = False, shapes: Any = None,
                        allow_smaller_final_batch: bool = False,
                        shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    return _batches(batching.maybe_shuffle_batch, [tensors], keep_input, False,
                    batch_size=batch_size, capacity=capacity,
                    min_after_dequeue=min_after_dequeue, num_threads=num_threads, seed=seed,
                    enqueue_many=enqueue_many, shapes=shapes,
                    allow_smaller_final_batch=allow_smaller_final_batch, name=name)


def batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int = 32,
               enqueue_many: bool = False, shapes: Any = None, dynamic_pad: bool = False,
               allow_smaller_final_batch: bool = False, shared_name: Optional[str] = None,
               name: Optional[str] = None) -> Any:
    return _batches(batching.batch_join, tensors_list, None, True, batch_size=batch_size,
                    capacity=capacity, enqueue_many=enqueue_many, shapes=shapes,
                    dynamic_pad=dynamic_pad,
                    allow_smaller_final_batch=allow_smaller_final_batch, name=name)


def maybe_batch_join(tensors_list: Sequence[Any], keep_input: Any, batch_size: int,
                     capacity: int = 32, enqueue_many: bool = False, shapes: Any = None,
                     dynamic_pad: bool = False, allow_smaller_final_batch: bool = False,
                     shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    return _batches(batching.maybe_batch_join, tensors_list, keep_input, True,
                    batch_size=batch_size, capacity=capacity, enqueue_many=enqueue_many,
                    shapes=shapes, dynamic_pad=dynamic_pad,
                    allow_smaller_final_batch=allow_smaller_final_batch, name=name)


def shuffle_batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int,
                       min_after_dequeue: int, seed: Optional[int] = None,
                       enqueue_many: bool = False, shapes: Any = None,
                       allow_smaller_final_batch: bool = False,
                       shared_name: Optional[str] = None, name: Optional[str] = None) -> Any:
    return _batches(batching.shuffle_batch_join, tensors_list, None, True,
                    batch_size=batch_size, capacity=capacity,
                    min_after_dequeue=min_after_dequeue, seed=seed, enqueue_many=enqueue_many,
                    shapes=shapes, allow_smaller_final_batch=allow_smaller_final_batch,
                    name=name)


def maybe_shuffle_batch_join(tensors_list: Sequence[Any], batch_size: int, capacity: int,
                             min_after_dequeue: int, keep_input: Any,
                             seed: Optional[int] = None, enqueue_many: bool = False,
                             shapes: Any = None, allow_smaller_final_batch: bool = False,
                             shared_name: Optional[str] = None,
                             name: Optional[str] = None) -> Any:
    return _batches(batching.maybe_shuffle_batch_join, tensors_list, keep_input, True,
                    batch_size=batch_size, capacity=capacity,
                    min_after_dequeue=min_after_dequeue, seed=seed, enqueue_many=enqueue_many,
                    shapes=shapes, allow_smaller_final_batch=allow_smaller_final_batch,
                    name=name)


# -- runners -----------------------------------------------------------------------------------


class QueueRunner(runner.QueueRunner):
    """TF1's ``tf.train.QueueRunner``: a native QueueRunner whose threads each run one of
    ``enqueue_ops`` (Operations, such as ``queue.enqueue(x)``) again and again, and whose
    :meth:`create_threads` takes TF1's ``sess`` first."""

    def __init__(self, queue: Any = None, enqueue_ops: Sequence[Operation] = (),
                 close_op: Any = None, cancel_op: Any = None,
                 queue_closed_exception_types: Any = None):
        super().__init__(_native_queue(queue), list(enqueue_ops), close_op=close_op,
                         cancel_op=cancel_op,
                         queue_closed_exception_types=queue_closed_exception_types)

    def create_threads(self, sess: Any = None, coord: Any = None,  # type: ignore[override]
                       daemon: bool = False, start: bool = False) -> List[Any]:
        """TF1's signature: ``qr.create_threads(sess, coord=coord, start=True)``."""
        return super().create_threads(coord, daemon=daemon, start=start)


def add_queue_runner(qr: runner.QueueRunner, collection: Any = None) -> None:
    get_default_graph().pipeline.add_queue_runner(qr)


def start_queue_runners(sess: Any = None, coord: Any = None, daemon: bool = True,
                        start: bool = True, collection: Any = None) -> List[Any]:
    """Starts the threads of every QueueRunner of the session's graph; TF1's arguments."""
    graph = sess.graph if sess is not None else get_default_graph()
    return runner.start_queue_runners(coord, daemon=daemon, start=start,
                                      pipeline=graph.pipeline)
