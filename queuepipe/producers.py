"""Input producers: the queues at the head of a pipeline, fed epoch by epoch.

A producer turns a fixed list (file names, numbers, rows of arrays) into a queue that a
QueueRunner keeps full: each call of its enqueue op puts one whole epoch on the queue with
``enqueue_many`` (in a fresh random order when ``shuffle=True``), and after ``num_epochs``
epochs the op raises :class:`OutOfRangeError`, so the runner closes the queue and consumers see
the end of the input. ``num_epochs=None`` produces forever. The runner is added to the default
:class:`~queuepipe.runner.Pipeline`; nothing moves until :func:`start_queue_runners`.

Usage:

.. code-block:: python

    import queuepipe as qp

    with qp.Pipeline().as_default() as pipeline:
        files = qp.string_input_producer(["a.tfrecord", "b.tfrecord"], num_epochs=2, seed=1)
    coord = qp.Coordinator()
    threads = qp.start_queue_runners(coord, pipeline=pipeline)
    print(sorted(files.dequeue() for _ in range(4)))  # each name twice, as bytes
    coord.request_stop()
    coord.join(threads)

Randomness belongs to the producer: with ``seed`` given, epoch ``e`` is shuffled by
``np.random.default_rng((seed + e) % 2**32)``, so a seeded pipeline repeats exactly; without a
seed the producer draws from its own unseeded generator.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from queuepipe import dtypes
from queuepipe._elements import unique_name
from queuepipe.errors import InvalidArgumentError, OutOfRangeError
from queuepipe.queues import FIFOQueue
from queuepipe.remote import glob
from queuepipe.runner import QueueRunner, add_queue_runner

__all__ = ["string_input_producer", "input_producer", "range_input_producer",
           "slice_input_producer", "limit_epochs", "match_filenames_once",
           "record_position_producer"]


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value > 0)


def _check_num_epochs(num_epochs: Any) -> Optional[int]:
    if num_epochs is None:
        return None
    if not _is_positive_int(num_epochs):
        raise ValueError(f"num_epochs must be None or a positive integer, got {num_epochs!r}")
    return int(num_epochs)


def _check_capacity(capacity: Any) -> int:
    if not _is_positive_int(capacity):
        raise ValueError(f"capacity must be a positive integer, got {capacity!r}")
    return int(capacity)


def _check_seed(seed: Any) -> Optional[int]:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be None or an integer, got {seed!r}")
    return int(seed)


def _to_bytes(value: Any, what: str) -> bytes:
    """A string element of ``what`` as bytes: ``str`` and paths are encoded, as TF does.

    A ``str`` is UTF-8, with surrogate escapes turned back into the bytes they stand for: a
    file name that is not UTF-8, as ``os.listdir`` or ``shard_files`` return it, names the
    same file again."""
    if isinstance(value, bytes):
        return bytes(value)  # np.bytes_ becomes plain bytes
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    if isinstance(value, os.PathLike):
        return os.fsencode(value)
    raise TypeError(f"{what} must hold only str, bytes or paths, got {value!r}")


def _as_string_array(values: Any, what: str) -> np.ndarray:
    """``values`` (named ``what`` in errors) as a NumPy object array of bytes, same shape."""
    source = np.asarray(values, dtype=object)
    out = np.empty(source.shape, dtype=object)
    for index, value in np.ndenumerate(source):
        out[index] = _to_bytes(value, what)
    return out


def _as_rows(values: Any, what: str) -> np.ndarray:
    """A private copy of ``values`` with a leading axis; strings become an object array of bytes."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{what} must be a list or array with one entry per element, got the "
                        f"single string {values!r}; wrap it in a list")
    array = np.array(values)
    if array.ndim == 0:
        raise ValueError(f"{what} must have a leading axis to slice, got the scalar {values!r}")
    if array.dtype.kind in "SUO":
        # From the original values: NumPy would have turned a stray number into a string.
        array = _as_string_array(values if not isinstance(values, np.ndarray) else array, what)
    return array


class _MatchFilenamesOnce:
    """The callable returned by :func:`match_filenames_once`: globs once, then remembers."""

    def __init__(self, pattern: Union[str, bytes, Sequence[Union[str, bytes]]]):
        patterns = [pattern] if isinstance(pattern, (str, bytes, os.PathLike)) else list(pattern)
        if not patterns:
            raise ValueError("match_filenames_once needs at least one pattern, got []")
        self.pattern = pattern
        self._patterns = [os.fsdecode(p) for p in patterns]
        self._lock = threading.Lock()
        self._matches: Optional[np.ndarray] = None

    def __call__(self) -> np.ndarray:
        with self._lock:
            if self._matches is None:
                names = sorted(name for p in self._patterns for name in glob(p))
                self._matches = _as_string_array([os.fsencode(n) for n in names], "matches")
            return self._matches.copy()

    def __repr__(self) -> str:
        return f"match_filenames_once({self.pattern!r})"


def match_filenames_once(pattern: Union[str, bytes, Sequence[Union[str, bytes]]],
                         name: Optional[str] = None) -> Callable[[], np.ndarray]:
    """Returns a callable that lists the files matching ``pattern``, globbing only once.

    The first call globs (local paths with :mod:`glob`; paths with a protocol such as
    ``s3://``, ``gs://`` or ``memory://`` through fsspec, see :mod:`queuepipe.remote` for
    credentials) and remembers the result, as TF's variable did; later calls return the same
    names, even if files appear or vanish. Pass the callable to :func:`string_input_producer`,
    which calls it when its runner first runs.

    Args:
      pattern: a glob pattern, or a list of them (their matches are merged).
      name: ignored; kept for TF compatibility.

    Returns:
      A zero-argument callable returning the sorted matches as a NumPy object array of bytes
      (empty if nothing matches). Its ``pattern`` attribute is ``pattern``.

    Raises:
      ValueError: ``pattern`` is an empty list.
      ImportError: (from the call) a pattern has a protocol and fsspec is not installed.
    """
    del name
    return _MatchFilenamesOnce(pattern)


class _EpochFeeder:
    """The enqueue op of a producer: each call enqueues one whole epoch, then the input ends."""

    def __init__(self, queue: FIFOQueue, items: Union[np.ndarray, Callable[[], np.ndarray]],
                 num_epochs: Optional[int], shuffle: bool, seed: Optional[int]):
        self._queue = queue
        self._items = items
        self._num_epochs = num_epochs
        self._shuffle = shuffle
        self._seed = seed
        self._rng = np.random.default_rng() if seed is None else None
        # Guards _epoch and _items, and keeps epochs whole if several threads share the op.
        self._lock = threading.Lock()
        self._epoch = 0

    @property
    def repeatable(self) -> bool:
        """Whether every run gives the same order (unshuffled, or seeded): what a replayed
        state of the batches downstream needs."""
        return not self._shuffle or self._seed is not None

    def _resolve(self) -> np.ndarray:
        """The items; a callable source (``match_filenames_once``) is called the first time."""
        if callable(self._items):
            source = self._items
            items = _as_string_array(source(), f"the names returned by {source!r}")
            if items.size == 0:
                pattern = getattr(source, "pattern", source)
                raise InvalidArgumentError(
                    "string_input_producer requires a non-empty input tensor: "
                    f"{pattern!r} matched no files")
            self._items = items
        return self._items

    def _order(self, epoch: int, n: int) -> np.ndarray:
        if self._seed is None:
            assert self._rng is not None  # made for an unseeded producer
            return self._rng.permutation(n)
        return np.random.default_rng((self._seed + epoch) % 2**32).permutation(n)

    def __call__(self) -> None:
        with self._lock:
            if self._num_epochs is not None and self._epoch >= self._num_epochs:
                raise OutOfRangeError(f"input producer '{self._queue.name}' has produced all "
                                      f"{self._num_epochs} epochs")
            items = self._resolve()
            if self._shuffle:
                items = items[self._order(self._epoch, len(items))]
            self._epoch += 1
            self._queue.enqueue_many(items)


def _producer(items: Union[np.ndarray, Callable[[], np.ndarray]], dtype: Any,
              element_shape: Tuple[int, ...], num_epochs: Any, shuffle: bool, seed: Any,
              capacity: Any, name: Optional[str],
              cancel_op: Optional[Callable[[], Any]]) -> FIFOQueue:
    """Builds the queue and its runner (added to the default pipeline) for every producer."""
    num_epochs = _check_num_epochs(num_epochs)
    capacity = _check_capacity(capacity)
    seed = _check_seed(seed)
    queue = FIFOQueue(capacity, dtypes=[dtype], shapes=[element_shape],
                      name=name if name is not None else unique_name("input_producer"))
    feeder = _EpochFeeder(queue, items, num_epochs, shuffle, seed)
    add_queue_runner(QueueRunner(queue, [feeder], cancel_op=cancel_op))
    return queue


def input_producer(input_tensor: Any, element_shape: Optional[Sequence[int]] = None,
                   num_epochs: Optional[int] = None, shuffle: bool = True,
                   seed: Optional[int] = None, capacity: int = 32,
                   shared_name: Optional[str] = None, summary_name: Optional[str] = None,
                   name: Optional[str] = None,
                   cancel_op: Optional[Callable[[], Any]] = None) -> FIFOQueue:
    """Returns a queue fed with the rows of ``input_tensor``, epoch after epoch.

    Each row (``input_tensor[i]``) becomes one queue element. Every epoch enqueues every row
    once, in a new random order when ``shuffle`` is true. A QueueRunner doing this is added to
    the default pipeline; start it with :func:`start_queue_runners`.

    Args:
      input_tensor: an array (or nested list) with at least one axis; strings become bytes.
      element_shape: the shape of one row; if given, it must match ``input_tensor.shape[1:]``
        (``None`` entries match any size).
      num_epochs: produce each row this many times, then close the queue (consumers get
        ``OutOfRangeError`` once it is drained); None: forever.
      shuffle: shuffle the rows within each epoch.
      seed: seed of the per-epoch shuffle (see the module docstring).
      capacity: the queue's capacity.
      shared_name: ignored; kept for TF compatibility.
      summary_name: ignored (queuepipe writes no summaries); kept for TF compatibility.
      name: the queue's name (default ``input_producer``, made unique).
      cancel_op: passed to the QueueRunner as its cancel op.

    Returns:
      The :class:`~queuepipe.queues.FIFOQueue` of rows.

    Raises:
      ValueError: ``input_tensor`` is a scalar or empty, ``element_shape`` disagrees with it,
        or ``num_epochs`` or ``capacity`` is not a positive integer.
    """
    del shared_name, summary_name
    rows = _as_rows(input_tensor, "input_tensor")
    if len(rows) == 0:
        raise ValueError("input_producer requires a non-empty input_tensor, got an empty one "
                         f"of shape {rows.shape}")
    shape = rows.shape[1:]
    if element_shape is not None:
        wanted = tuple(element_shape)
        if len(wanted) != len(shape) or any(w is not None and w != s
                                            for w, s in zip(wanted, shape)):
            raise ValueError(f"element_shape {wanted} does not match the shape {shape} of the "
                             "rows of input_tensor")
    return _producer(rows, dtypes.as_dtype(rows.dtype), shape, num_epochs, shuffle, seed,
                     capacity, name, cancel_op)


def string_input_producer(string_tensor: Any, num_epochs: Optional[int] = None,
                          shuffle: bool = True, seed: Optional[int] = None, capacity: int = 32,
                          shared_name: Optional[str] = None, name: Optional[str] = None,
                          cancel_op: Optional[Callable[[], Any]] = None) -> FIFOQueue:
    """Returns a queue of strings (usually file names for a reader), epoch after epoch.

    Args:
      string_tensor: a non-empty list or 1-D array of ``str``/``bytes``/paths, or a
        zero-argument callable returning one, such as :func:`match_filenames_once`; a callable
        is called once, when the runner first runs.
      num_epochs: produce each string this many times, then close the queue; None: forever.
      shuffle: shuffle the strings within each epoch.
      seed: seed of the per-epoch shuffle.
      capacity: the queue's capacity.
      shared_name: ignored; kept for TF compatibility.
      name: the queue's name (default ``input_producer``, made unique).
      cancel_op: passed to the QueueRunner as its cancel op.

    Returns:
      A :class:`~queuepipe.queues.FIFOQueue` whose elements are ``bytes``.

    Raises:
      ValueError: ``string_tensor`` is empty, or ``num_epochs`` or ``capacity`` is not a
        positive integer.
      TypeError: ``string_tensor`` is a single string, or holds something that is not one.
      InvalidArgumentError: (from a dequeue, chained) a callable ``string_tensor`` returned
        nothing, e.g. a pattern matched no files; the message names the pattern.
    """
    del shared_name
    if callable(string_tensor):
        items = string_tensor
    else:
        items = _as_rows(string_tensor, "string_tensor")
        if items.size == 0:
            raise ValueError("string_input_producer requires a non-empty input tensor, got "
                             f"{string_tensor!r}")
        if items.dtype != dtypes.string or items.ndim != 1:
            raise TypeError("string_input_producer expects a 1-D list of strings, got "
                            f"{items.dtype} of shape {items.shape}")
    return _producer(items, dtypes.string, (), num_epochs, shuffle, seed, capacity, name,
                     cancel_op)


class _PositionFeeder:
    """The enqueue op of :func:`record_position_producer`: the next chunk's keys."""

    def __init__(self, queue: FIFOQueue, plan: Any) -> None:
        self._queue = queue
        self._plan = plan

    def __call__(self) -> None:
        self._queue.enqueue_many(self._plan.keys())


def record_position_producer(files: Any, num_epochs: Optional[int] = None,
                             seed: Optional[int] = None, capacity: int = 4096,
                             name: Optional[str] = None) -> FIFOQueue:
    """Returns a queue of record keys ``b"<file>:<offset>"``: every record of every file,
    each epoch in one seeded random permutation of them all (a global shuffle).

    For hand-built pipelines: a :class:`~queuepipe.readers.KeyedRecordReader` reads the
    record each key names. The order comes from the ``.index`` beside each file
    (``write_shards`` and ``queuepipe index`` write them) and a seeded bijection of the
    record numbers (:class:`~queuepipe.permutation.Permutation`): nothing is stored per
    record but the index offsets, and each epoch visits every record once, in another order.
    ``read_batch_features(shuffle="global")`` is the same order, read in bulk.

    Args:
      files: a glob pattern, or a list of patterns or paths (uncompressed TFRecord files,
        each with its ``.index``).
      num_epochs: give every record this many times, then close the queue; None: forever.
      seed: seed of the permutations; None draws one.
      capacity: the queue's capacity.
      name: the queue's name (default ``record_position_producer``, made unique).

    Returns:
      A :class:`~queuepipe.queues.FIFOQueue` whose elements are ``bytes`` keys.

    Raises:
      NotFoundError: no file matches ``files``.
      InvalidArgumentError: a file has no ``.index`` that matches it.
    """
    from queuepipe.errors import NotFoundError
    from queuepipe.plan import ReadPlan
    from queuepipe.readers import TFRecordReader

    num_epochs = _check_num_epochs(num_epochs)
    capacity = _check_capacity(capacity)
    seed = _check_seed(seed)
    paths = [os.fsdecode(p) for p in match_filenames_once(files)()]
    if not paths:
        raise NotFoundError(f"record_position_producer: no file matches {files!r}")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
    plan = ReadPlan(paths, TFRecordReader, max(1, min(capacity, 512)), num_epochs, "global",
                    seed, keyed=True)
    queue = FIFOQueue(capacity, dtypes=[dtypes.string], shapes=[()],
                      name=name if name is not None else unique_name("record_position_producer"))
    add_queue_runner(QueueRunner(queue, [_PositionFeeder(queue, plan)]))
    return queue


def range_input_producer(limit: int, num_epochs: Optional[int] = None, shuffle: bool = True,
                         seed: Optional[int] = None, capacity: int = 32,
                         shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> FIFOQueue:
    """Returns a queue of the int32 numbers ``0 .. limit - 1``, epoch after epoch.

    Args:
      limit: how many numbers; a positive integer.
      num_epochs, shuffle, seed, capacity, shared_name, name: as for :func:`input_producer`.

    Returns:
      A :class:`~queuepipe.queues.FIFOQueue` of int32 scalars.

    Raises:
      ValueError: ``limit``, ``num_epochs`` or ``capacity`` is not a positive integer.
    """
    del shared_name
    if not _is_positive_int(limit):
        raise ValueError(f"range_input_producer requires a positive integer limit, got {limit!r}")
    return _producer(np.arange(limit, dtype=np.int32), dtypes.int32, (), num_epochs, shuffle,
                     seed, capacity, name, None)


class _Slices:
    """The callable returned by :func:`slice_input_producer`: one row of every tensor."""

    def __init__(self, arrays: List[np.ndarray], queue: FIFOQueue):
        self._arrays = arrays
        self.queue = queue

    def __call__(self) -> Tuple[Any, ...]:
        index = int(self.queue.dequeue())
        return tuple(a[index].copy() if a.ndim > 1 else a[index] for a in self._arrays)


def slice_input_producer(tensor_list: Sequence[Any], num_epochs: Optional[int] = None,
                         shuffle: bool = True, seed: Optional[int] = None, capacity: int = 32,
                         shared_name: Optional[str] = None,
                         name: Optional[str] = None) -> Callable[[], Tuple[Any, ...]]:
    """Returns a callable giving one row of every tensor per call, the rows lined up.

    A :func:`range_input_producer` over the row indices does the epochs and the shuffling; each
    call dequeues one index ``i`` and returns ``(t[i] for t in tensor_list)``. Use it as the
    producer of ``batch``/``shuffle_batch``.

    Args:
      tensor_list: arrays (or lists) with the same length along their first axis.
      num_epochs, shuffle, seed, capacity, shared_name, name: as for :func:`input_producer`.

    Returns:
      A zero-argument callable returning a tuple with one row of each tensor; it blocks while
      the index queue is empty, and raises ``OutOfRangeError`` after the last epoch. Its
      ``queue`` attribute is the index queue.

    Raises:
      ValueError: ``tensor_list`` is empty, a tensor is a scalar or empty, or the tensors
        differ in length.
    """
    arrays = [_as_rows(t, f"tensor {i} of tensor_list") for i, t in enumerate(tensor_list)]
    if not arrays:
        raise ValueError("Expected at least one tensor in slice_input_producer(), got "
                         f"{tensor_list!r}")
    n = len(arrays[0])
    for i, array in enumerate(arrays):
        if len(array) != n:
            raise ValueError(f"slice_input_producer: tensor {i} of tensor_list has {len(array)} "
                             f"rows but tensor 0 has {n}; all must have the same first dimension")
    if n == 0:
        raise ValueError("slice_input_producer requires non-empty tensors, got 0 rows")
    queue = range_input_producer(n, num_epochs=num_epochs, shuffle=shuffle, seed=seed,
                                 capacity=capacity, shared_name=shared_name, name=name)
    return _Slices(arrays, queue)


def limit_epochs(tensor: Any, num_epochs: Optional[int] = None,
                 name: Optional[str] = None) -> Callable[[], Any]:
    """Returns a callable that returns ``tensor`` ``num_epochs`` times, then raises.

    Useful as a producer whose input is exhausted after a number of uses: a QueueRunner
    running it ends quietly, and the queue is closed.

    Args:
      tensor: any value.
      num_epochs: how many calls return ``tensor``; None: every call does.
      name: ignored; kept for TF compatibility.

    Returns:
      A zero-argument callable, safe to share between threads.

    Raises:
      ValueError: ``num_epochs`` is not None or a positive integer.
      OutOfRangeError: (from the callable) once it has returned ``tensor`` ``num_epochs`` times.
    """
    del name
    num_epochs = _check_num_epochs(num_epochs)
    lock = threading.Lock()
    used = [0]

    def produce() -> Any:
        if num_epochs is not None:
            with lock:
                if used[0] >= num_epochs:
                    raise OutOfRangeError(f"limit_epochs: all {num_epochs} epochs were used")
                used[0] += 1
        return tensor

    return produce
