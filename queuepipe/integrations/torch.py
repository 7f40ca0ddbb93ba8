"""PyTorch: NumPy batches as tensors, and a pipeline as a ``DataLoader``'s IterableDataset.

Three levels, pick the one that fits the training loop:

- :func:`to_torch` converts one batch (a tuple, list or dict of NumPy arrays, nested), sharing
  memory with the NumPy arrays (``torch.from_numpy``) instead of copying them.
- :class:`TorchBatches` wraps a :class:`~queuepipe.batching.Batches` (or any iterator of
  batches) so that iterating it yields tensor batches, optionally on a device.
- :class:`QueuePipeIterableDataset` lets a ``torch.utils.data.DataLoader`` own the pipeline:
  each iteration (each epoch, in each DataLoader worker) builds a fresh pipeline from your
  factory, runs its threads, and stops them when the iteration ends or is abandoned.

Usage:

.. code-block:: python

    import queuepipe as qp
    from queuepipe.distributed import shard_files
    from queuepipe.integrations.torch import QueuePipeIterableDataset
    from torch.utils.data import DataLoader

    FEATURES = {"image": qp.io.FixedLenFeature([784], qp.float32),
                "label": qp.io.FixedLenFeature([], qp.int64)}

    def make_batches(shard):                  # called per epoch, in each DataLoader worker
        share = shard_files("data/train-*.tfrecord", *shard)   # this worker's files
        files = qp.train.string_input_producer(share.files, num_epochs=1)
        reader = share.reader()

        def examples():                       # up to 64 parsed records per call
            _, serialized = reader.read_up_to(files, 64)
            return qp.io.parse_example(serialized, FEATURES)

        return qp.train.shuffle_batch(examples, 32, capacity=1024, min_after_dequeue=512,
                                      enqueue_many=True, allow_smaller_final_batch=True)

    loader = DataLoader(QueuePipeIterableDataset(make_batches), batch_size=None, num_workers=2)
    for epoch in range(3):
        for batch in loader:                  # {"image": tensor, "label": tensor}
            ...                               # every record once per epoch

``examples/torch_cnn.py`` is a complete program.

Strings: a NumPy array of dtype object (a batch of ``bytes``) has no tensor type; it is passed
through unchanged, as the NumPy array. Decode it (``qp.io.decode_raw``) before batching to get
numbers.

Ragged features: a batched :class:`~queuepipe.sparse.SparseValue` (a ``VarLenFeature``) comes
out as ``sparse=`` says: ``"parts"`` (a SparseValue of three tensors), ``"padded"`` (a
:class:`Padded` pair: the dense tensor with ``padding_value`` in the gaps, and each row's
length, as ``torch.nn.utils.rnn.pack_padded_sequence`` takes them), ``"offsets"`` (an
:class:`Offsets` pair: every value in one flat tensor and where each row starts, as
``nn.EmbeddingBag(ids, offsets)`` takes them), ``"nested"`` (a jagged
``torch.nested`` tensor, where the installed torch has them) or ``"coo"`` (a
``torch.sparse_coo_tensor`` of the padded layout: a sparse matrix, not what an EmbeddingBag
takes)::

    token lists [7 8 9] [4] []   --padded-->   values [[7 8 9] [4 0 0] [0 0 0]], lengths [3 1 0]
                                 --offsets-->  ids [7 8 9 4], offsets [0 3 4]

With ``"offsets"``, ``weights={"tokens": "weights"}`` makes the ``"weights"`` feature (a
SparseValue with the same rows) the ``per_sample_weights`` of the ``"tokens"`` pair, and
drops it from the batch: ``bag(*batch["tokens"])`` is then a weighted bag.
"""

from __future__ import annotations

import queue as queue_module
import threading
import warnings
import weakref
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Optional

import numpy as np

from queuepipe.batching import Batches
from queuepipe.coordinator import Coordinator
from queuepipe.distributed import Shard, shard_info
from queuepipe.integrations import BatchIterator
from queuepipe.runner import Pipeline, start_queue_runners
from queuepipe.sparse import SparseValue

try:
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError as e:  # only this module needs torch; `import queuepipe` never does
    raise ImportError("queuepipe.integrations.torch needs PyTorch: "
                      "pip install '<queuepipe checkout>[torch]'") from e

__all__ = ["to_torch", "TorchBatches", "QueuePipeIterableDataset", "worker_shard", "Padded",
           "Offsets"]

_SPARSE_FORMS = ("parts", "padded", "offsets", "nested", "coo")

# How often a prefetch thread waiting for room checks whether it was told to stop.
_STOP_POLL_SECS = 0.1


class Padded(NamedTuple):
    """A batch of ragged rows as a padded tensor and each row's length."""

    values: Any  # torch.Tensor [batch, longest row, ...]
    lengths: Any  # torch.Tensor int64 [batch]: how many values each row holds


class Offsets(NamedTuple):
    """A batch of ragged rows as ``nn.EmbeddingBag`` takes them: ``bag(*offsets)``."""

    ids: Any  # torch.Tensor [total values]: every row's values, row after row
    offsets: Any  # torch.Tensor int64 [batch]: where each row starts in ``ids``
    per_sample_weights: Any = None  # torch.Tensor [total values], or None


class _Form(NamedTuple):
    """How to convert: the device, pinning, the form of sparse values, and which sparse
    feature weighs which (``"offsets"``)."""

    device: Any
    pin_memory: bool
    sparse: str
    padding_value: Any
    weights: Mapping[str, str]


def _form(device: Any, pin_memory: bool, sparse: str = "parts", padding_value: Any = 0,
          weights: Optional[Mapping[str, str]] = None) -> _Form:
    if sparse not in _SPARSE_FORMS:
        raise ValueError(f"sparse must be one of {_SPARSE_FORMS}, got {sparse!r}")
    if weights and sparse != "offsets":
        raise ValueError(f"weights= gives EmbeddingBag's per_sample_weights: it needs "
                         f"sparse='offsets', got sparse={sparse!r}")
    if sparse == "nested" and not hasattr(getattr(torch, "nested", None),
                                          "nested_tensor_from_jagged"):
        raise ValueError(f"sparse='nested' needs torch.nested.nested_tensor_from_jagged "
                         f"(torch >= 2.3); this torch is {torch.__version__}: use "
                         f"sparse='offsets' or 'padded'")
    return _Form(device, _check_pin_memory(pin_memory), sparse, padding_value,
                 dict(weights or {}))


def _check_pin_memory(pin_memory: bool) -> bool:
    """Like DataLoader: ``pin_memory`` without an accelerator is ignored, with a warning."""
    accelerator = getattr(torch, "accelerator", None)  # torch >= 2.6; before it, CUDA only
    available = accelerator.is_available() if accelerator else torch.cuda.is_available()
    if pin_memory and not available:
        warnings.warn("pin_memory=True is ignored: no accelerator (CUDA, XPU, MPS, ...) is "
                      "available to pin memory for", UserWarning, stacklevel=3)
        return False
    return pin_memory


def _tensor(array: np.ndarray, where: str):
    """``torch.from_numpy`` (no copy), copying only what torch cannot share."""
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    elif not array.flags.writeable or any(stride < 0 for stride in array.strides):
        array = array.copy()  # torch shares neither read-only memory nor negative strides
    try:
        return torch.from_numpy(array)
    except TypeError as e:
        raise TypeError(f"batch component {where or '(the batch)'} has dtype {array.dtype}, "
                        "which has no torch tensor type") from e


def _convert(value: Any, form: _Form, where: str) -> Any:
    if isinstance(value, dict):
        if form.weights:
            return _weighted(value, form, where)
        return type(value)((key, _convert(item, form, f"{where}[{key!r}]"))
                           for key, item in value.items())
    if isinstance(value, SparseValue) and form.sparse != "parts":
        return _sparse(value, form, where)
    if isinstance(value, (tuple, list)):
        items = [_convert(item, form, f"{where}[{i}]") for i, item in enumerate(value)]
        if hasattr(value, "_fields"):  # a namedtuple (qp.SparseValue among them)
            return type(value)(*items)
        return type(value)(items)
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind in "OSUV":  # bytes and strings have no tensor type
            return value
        tensor = _tensor(np.asarray(value), where)
    elif isinstance(value, (bool, int, float)):
        tensor = torch.as_tensor(value)
    else:
        return value  # bytes, str, None: nothing to convert
    return _place(tensor, form)


def _place(tensor: Any, form: _Form) -> Any:
    if form.pin_memory:
        tensor = tensor.pin_memory()
    if form.device is not None:
        tensor = tensor.to(form.device, non_blocking=form.pin_memory)
    return tensor


def _row_major(value: SparseValue, where: str) -> "tuple[np.ndarray, np.ndarray]":
    """A batched SparseValue's values, row after row, and where each row starts."""
    indices = np.asarray(value.indices, dtype=np.int64)
    if len(value.dense_shape) != 2:
        raise ValueError(f"batch component {where or '(the batch)'}: sparse='offsets' and "
                         f"'nested' take a batch of lists (dense_shape [batch, longest]), got "
                         f"dense_shape {np.asarray(value.dense_shape).tolist()}")
    values = np.asarray(value.values)
    if len(indices) and np.any(np.diff(indices[:, 0] * int(value.dense_shape[1])
                                       + indices[:, 1]) < 0):
        order = np.lexsort((indices[:, 1], indices[:, 0]))
        values = values[order]
    lengths = value.row_lengths()
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return values, starts


def _offsets(value: SparseValue, form: _Form, where: str, weights: Any = None) -> Offsets:
    ids, starts = _row_major(value, where)
    pair = Offsets(_place(_tensor(np.ascontiguousarray(ids), where), form),
                   _place(torch.from_numpy(starts), form))
    if weights is None:
        return pair
    weight_values, weight_starts = _row_major(weights, where)
    if not np.array_equal(weight_starts, starts) or len(weight_values) != len(ids):
        raise ValueError(f"batch component {where}: its weights do not have the same rows as "
                         f"its ids (row lengths {value.row_lengths()[:8].tolist()} against "
                         f"{weights.row_lengths()[:8].tolist()}, first 8)")
    return pair._replace(per_sample_weights=_place(
        _tensor(np.ascontiguousarray(weight_values), where), form))


def _weighted(batch: dict, form: _Form, where: str) -> dict:
    """A dict batch with each weighted feature as :class:`Offsets` carrying its weights, and
    the weight features dropped."""
    for ids_key, weights_key in form.weights.items():
        for key in (ids_key, weights_key):
            if not isinstance(batch.get(key), SparseValue):
                raise ValueError(f"weights={{{ids_key!r}: {weights_key!r}}}: batch component "
                                 f"{where}[{key!r}] is not a sparse feature (a VarLenFeature): "
                                 f"{'missing' if key not in batch else type(batch[key]).__name__}")
    out = type(batch)()
    for key, item in batch.items():
        if key in form.weights.values():
            continue
        if key in form.weights:
            out[key] = _offsets(item, form, f"{where}[{key!r}]", batch[form.weights[key]])
        else:
            out[key] = _convert(item, form._replace(weights={}), f"{where}[{key!r}]")
    return out


def _sparse(value: SparseValue, form: _Form, where: str) -> Any:
    """A batched SparseValue as a :class:`Padded` pair, an :class:`Offsets` pair, a jagged
    nested tensor or a ``torch.sparse_coo_tensor``."""
    if form.sparse == "offsets":
        return _offsets(value, form, where)
    if form.sparse == "nested":
        ids, starts = _row_major(value, where)
        ends = torch.from_numpy(np.append(starts, len(ids)))
        return _place(torch.nested.nested_tensor_from_jagged(
            _tensor(np.ascontiguousarray(ids), where), offsets=ends), form)
    if form.sparse == "padded":
        dense = _tensor(value.to_dense(form.padding_value), where)
        return Padded(_place(dense, form), _place(torch.from_numpy(value.row_lengths()), form))
    coo = torch.sparse_coo_tensor(_tensor(np.ascontiguousarray(value.indices.T), where),
                                  _tensor(np.asarray(value.values), where),
                                  size=tuple(int(d) for d in value.dense_shape),
                                  check_invariants=True)  # a bad index: an error, no crash
    return _place(coo, form)


def to_torch(batch: Any, device: Any = None, pin_memory: bool = False, sparse: str = "parts",
             padding_value: Any = 0, weights: Optional[Mapping[str, str]] = None) -> Any:
    """Converts a batch of NumPy arrays to torch tensors, keeping its structure.

    Dicts (of any mapping type built from pairs), lists, tuples and namedtuples are rebuilt
    with the same type and keys, nested to any depth. A numeric array becomes
    ``torch.from_numpy(array)``, which shares its memory: no copy, unless the array is
    read-only, has negative strides or a non-native byte order, which torch cannot share.
    NumPy scalars and Python numbers become 0-d tensors. Arrays of strings (dtype object
    holding ``bytes``, or NumPy ``S``/``U``) and plain ``bytes`` are returned unchanged.

    Args:
      batch: one batch, as a :class:`~queuepipe.batching.Batches` yields it.
      device: if given, every tensor is moved there (``tensor.to(device)``).
      pin_memory: copy each tensor into page-locked memory first, so that the copy to an
        accelerator runs asynchronously (``non_blocking=True``). Ignored, with a warning, when
        no accelerator is available (as ``DataLoader`` does).
      sparse: what a batched SparseValue becomes: ``"parts"`` (a SparseValue of tensors),
        ``"padded"`` (:class:`Padded`: ``to_dense(padding_value)`` and ``row_lengths()`` as
        tensors), ``"offsets"`` (:class:`Offsets`: the values row after row and each row's
        start, int64, for ``nn.EmbeddingBag``), ``"nested"`` (a ``torch.nested`` tensor of
        jagged layout, one row per record; torch >= 2.3) or ``"coo"``
        (``torch.sparse_coo_tensor(indices.T, values, dense_shape)``, the padded layout).
      padding_value: the number in the gaps of ``"padded"``.
      weights: with ``"offsets"``, ``{ids feature: weights feature}`` of a dict batch: the
        weights feature's values become the ids' ``Offsets.per_sample_weights``, and the
        weights feature leaves the batch.

    Returns:
      The same structure with tensors in place of numeric arrays.

    Raises:
      TypeError: an array's dtype has no torch type (the message names the component), or
        ``batch`` is a whole :class:`~queuepipe.batching.Batches` (use :class:`TorchBatches`).
      ValueError: ``sparse`` is not one of the forms, ``weights`` without ``"offsets"``,
        ``"nested"`` on a torch without jagged tensors, a weights feature whose rows differ
        from its ids', or a SparseValue of rank other than 2 for ``"offsets"``/``"nested"``.
    """
    if isinstance(batch, Batches):
        raise TypeError("to_torch converts one batch; for a whole Batches use "
                        "TorchBatches(batches), which converts each batch as it comes")
    return _convert(batch, _form(device, pin_memory, sparse, padding_value, weights), "")


class TorchBatches(BatchIterator):
    """An iterator of tensor batches over an iterator of NumPy batches.

    Each ``next()`` takes the next NumPy batch (blocking as the underlying iterator does: a
    :class:`~queuepipe.batching.Batches` waits for its queue) and converts it with
    :func:`to_torch`. Iteration ends when the underlying iterator ends.

    With ``prefetch=k``, a thread of this object takes and converts the next ``k`` batches
    ahead (pinning them and starting their copy to ``device`` with ``non_blocking=True`` when
    ``pin_memory``), so the copy overlaps the training step::

        training thread:   step(b0)   step(b1)   step(b2) ...
        prefetch thread:   to_device(b1) to_device(b2) to_device(b3)   (k batches ahead)

    The thread starts at the first ``next()`` and ends when the batches end, on :meth:`close`
    (or the end of a ``with`` block), or when this object is garbage-collected. An exception
    of the underlying iterator is raised by ``next()`` after the batches taken before it.

    Args:
      batches: a :class:`~queuepipe.batching.Batches` or any iterable of batches.
      device: where to put the tensors, as for :func:`to_torch`.
      pin_memory: as for :func:`to_torch`.
      sparse, padding_value, weights: the form of SparseValues, as for :func:`to_torch`.
      prefetch: batches to convert ahead on a thread (0: none, in the calling thread).

    Raises:
      ValueError: ``prefetch`` is negative, or a bad ``sparse``.
    """

    def __init__(self, batches: Iterable[Any], device: Any = None, pin_memory: bool = False,
                 sparse: str = "parts", padding_value: Any = 0, prefetch: int = 0,
                 weights: Optional[Mapping[str, str]] = None):
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"prefetch must be an int >= 0, got {prefetch!r}")
        super().__init__(batches)
        self._form = _form(device, pin_memory, sparse, padding_value, weights)
        self._prefetch = prefetch
        self._ahead: Optional[_Lookahead] = None

    def __next__(self) -> Any:
        if not self._prefetch:
            return _convert(next(self._batches), self._form, "")
        if self._ahead is None:
            self._ahead = _Lookahead(self._batches, self._form, self._prefetch,
                                     getattr(self._source, "close", None))
            weakref.finalize(self, self._ahead.stop)
        return self._ahead.next()

    def close(self) -> None:
        """Closes the underlying batches and stops the prefetch thread (joined)."""
        if self._ahead is not None:
            self._ahead.stop()
        super().close()


_END = object()


class _Lookahead:
    """The prefetch thread of a :class:`TorchBatches` and the queue it fills. It holds no
    reference to the TorchBatches, so that an abandoned one can be collected (and stop it).

    Stopping closes the source first (``close_source``, a Batches' ``close``): a thread waiting
    in the source's next batch is woken by it, and then joined. (A source that cannot be closed
    and never yields again keeps the daemon thread waiting in it.)"""

    def __init__(self, batches: Iterator[Any], form: _Form, depth: int,
                 close_source: Optional[Callable[[], Any]]):
        self._close_source = close_source
        self._ready: "queue_module.Queue[Any]" = queue_module.Queue(maxsize=depth)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(batches, form),
                                        name="queuepipe/torch-prefetch", daemon=True)
        self._thread.start()

    def _run(self, batches: Iterator[Any], form: _Form) -> None:
        try:
            while not self._stopping.is_set():  # checked before each batch is taken
                try:
                    batch = next(batches)
                except StopIteration:
                    self._put(("end", _END))
                    return
                if not self._put(("batch", _convert(batch, form, ""))):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the consumer's next()
            self._put(("error", e))

    def _put(self, item: Any) -> bool:
        """Waits for room, a slice at a time so that stop() is seen; False once stopping."""
        while not self._stopping.is_set():
            try:
                self._ready.put(item, timeout=_STOP_POLL_SECS)
                return True
            except queue_module.Full:
                continue
        return False

    def next(self) -> Any:
        kind, value = self._ready.get()
        if kind == "batch":
            return value
        self._ready.put((kind, value))  # stays the answer for every later next()
        if kind == "error":
            raise value
        raise StopIteration

    def stop(self) -> None:
        """Stops and joins the thread; a later next() ends the iteration."""
        self._stopping.set()
        if self._close_source is not None:
            self._close_source()
        self._drain()  # unblocks a put waiting for room; it then sees the stop
        if self._thread is not threading.current_thread():
            self._thread.join()
        self._drain()
        self._ready.put(("end", _END))

    def _drain(self) -> None:
        while True:
            try:
                self._ready.get_nowait()
            except queue_module.Empty:
                return


def worker_shard(rank: Optional[int] = None, world_size: Optional[int] = None) -> Shard:
    """This process's share of the data: its distributed rank, split across DataLoader workers.

    The process's ``(rank, world_size)`` comes from :func:`queuepipe.distributed.shard_info`.
    Inside a DataLoader worker (``num_workers=W``, worker ``w``) the share is split further:
    ``Shard(rank * W + w, world_size * W)``, so that every worker of every process reads a
    different share and together they read everything once.

    Raises:
      InvalidArgumentError: as :func:`~queuepipe.distributed.shard_info`.
    """
    shard = shard_info(rank, world_size)
    info = get_worker_info()
    if info is None:
        return shard
    return Shard(shard.rank * info.num_workers + info.id, shard.world_size * info.num_workers)


class QueuePipeIterableDataset(IterableDataset):
    """A ``torch.utils.data.IterableDataset`` that runs a fresh queuepipe pipeline per iteration.

    Give it to ``DataLoader(dataset, batch_size=None, ...)``: the pipeline already batches, so
    the DataLoader must not batch again. Each ``iter(dataset)`` (each epoch, and each
    DataLoader worker) does this:

    1. works out its share, ``shard = worker_shard()`` (the distributed rank, split across
       DataLoader workers);
    2. calls ``make_batches(shard)`` inside a new ``qp.Pipeline().as_default()``; the factory
       builds producers, readers and a batching call and returns its
       :class:`~queuepipe.batching.Batches`; to read a disjoint share it passes ``shard`` to
       :func:`queuepipe.distributed.shard_files` (``shard_files(files, *shard)``);
    3. starts that pipeline's QueueRunners under a new Coordinator and yields each batch as
       tensors (:func:`to_torch`);
    4. when the batches end, or the loop stops early (``break``, an exception, the iterator
       being dropped), stops the Coordinator, closes the batches and joins every thread. An
       exception from a pipeline thread is re-raised in the training loop.

    A factory whose producers use ``num_epochs=1`` gives one pass over its share per
    iteration, so ``for epoch in range(E): for batch in loader:`` sees each record once per
    epoch. With ``num_epochs=None`` the iteration never ends: stop it yourself.

    Args:
      make_batches: ``make_batches(shard) -> Batches``; called once per iteration, in the
        process (DataLoader worker) that iterates. With ``num_workers > 0`` and a ``spawn``
        start method it must be picklable (a module-level function or ``functools.partial``).
      device: as for :func:`to_torch`; leave None with DataLoader workers (tensors cross
        processes on the CPU; move them in the training loop or use the DataLoader's
        ``pin_memory``).
      pin_memory: as for :func:`to_torch`.
      sparse, padding_value, weights: the form of SparseValues, as for :func:`to_torch`.
      rank, world_size: this process's place among several processes; both None (the
        default) reads them with :func:`queuepipe.distributed.shard_info`.
    """

    def __init__(self, make_batches: Callable[[Shard], Any], device: Any = None,
                 pin_memory: bool = False, rank: Optional[int] = None,
                 world_size: Optional[int] = None, sparse: str = "parts",
                 padding_value: Any = 0, weights: Optional[Mapping[str, str]] = None):
        if not callable(make_batches):
            raise TypeError(f"make_batches must be a callable taking a Shard, got "
                            f"{make_batches!r}")
        self._make_batches = make_batches
        self._form = (device, pin_memory, sparse, padding_value)
        self._weights = dict(weights or {})
        _form(None, False, sparse, 0, weights)  # a bad form fails here, not in a worker
        self._rank = rank
        self._world_size = world_size

    def __iter__(self) -> Iterator[Any]:
        shard = worker_shard(self._rank, self._world_size)
        pipeline = Pipeline()
        with pipeline.as_default():
            batches = self._make_batches(shard)
        coord = Coordinator()
        threads = start_queue_runners(coord, pipeline=pipeline)
        try:
            yield from TorchBatches(batches, *self._form, weights=self._weights)
        finally:
            coord.request_stop()
            close = getattr(batches, "close", None)
            if close is not None:
                close()
            coord.join(threads)

