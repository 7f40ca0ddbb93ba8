"""TF1's ``tf.data`` in a Session, run by queuepipe's readers, queues and runner threads.

A :class:`Dataset` describes how elements are made (files read by queuepipe's readers, the
per-element graph of ``map``, ``shuffle``, ``batch``...); nothing runs when it is built. Its
iterator is the queue model doing tf.data's job::

    dataset.make_one_shot_iterator()   a FIFOQueue (the prefetch buffer) that one QueueRunner
                                       thread fills with the dataset's elements, in order;
                                       its input ends -> the queue closes
    iterator.get_next()                Tensors: one dequeue per sess.run; OutOfRangeError
                                       once every element was taken, as in TF

``map(fn)`` calls ``fn`` once, on Tensors standing for an element, and the graph it builds is
evaluated per element in the runner thread (with ``num_parallel_calls`` > 1, on that many
runner threads, the order kept). The thread starts at the first ``get_next`` run (or the
initializer's) and is stopped and joined when the session closes, when the input ends, or
when the initializer runs again.

``shuffle`` draws from a NumPy generator seeded with ``seed`` (TF's random stream is not
reproduced: the same seed repeats the same order here, not TF's order).
"""

from __future__ import annotations

import builtins
import itertools
import os
import threading
from typing import Any, Callable, Dict, Iterator as Iterates, List, Optional, Set

import numpy as np

from queuepipe import queues, readers, records, remote, runner, sparse
from queuepipe.compat.v1.graph import (
    Operation, Tensor, as_node, compile_fetches, evaluate, get_default_graph,
    run_timeout,
)
from queuepipe.compat.v1.ops import constant_value
from queuepipe.compat.v1.shapes import TensorShape
from queuepipe.dtypes import as_dtype
from queuepipe.coordinator import Coordinator
from queuepipe.errors import OutOfRangeError
from queuepipe.sparse import SparseValue

__all__ = ["Dataset", "TFRecordDataset", "TextLineDataset", "FixedLengthRecordDataset",
           "Iterator", "make_one_shot_iterator", "make_initializable_iterator", "AUTOTUNE",
           "experimental"]

AUTOTUNE = -1
_READ_CHUNK = 256  # records a reader hands over per call


# -- element structures ---------------------------------------------------------------------------


def _nested(structure: Any) -> bool:
    """A tuple or dict is a structure of components; a list is one component, as in TF."""
    return isinstance(structure, dict) or (isinstance(structure, tuple)
                                           and not isinstance(structure, SparseValue))


def _leaves(structure: Any) -> List[Any]:
    """The components of an element, in order (dict values by sorted key)."""
    if isinstance(structure, dict):
        return [leaf for key in sorted(structure) for leaf in _leaves(structure[key])]
    if _nested(structure):
        return [leaf for item in structure for leaf in _leaves(item)]
    return [structure]


def _rebuild(template: Any, leaves: Iterates[Any]) -> Any:
    """``template``'s structure with its components taken from ``leaves``."""
    if isinstance(template, dict):
        built = {key: _rebuild(template[key], leaves) for key in sorted(template)}
        return {key: built[key] for key in template}
    if _nested(template):
        return type(template)(_rebuild(item, leaves) for item in template)
    return next(leaves)


def _call(fn: Callable[..., Any], element: Any) -> Any:
    """``fn`` applied as tf.data applies it: a tuple element's components as arguments."""
    return fn(*element) if isinstance(element, tuple) else fn(element)


class _Failed:
    """An element whose computation raised: it flows on in its place (through batch, filter,
    shuffle...) and its ``sess.run`` raises ``error``; the next run goes on with the next
    element, as TF's iterators do."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


def _first_failure(elements: Any) -> Optional[_Failed]:
    return next((e for e in elements if isinstance(e, _Failed)), None)


class _Spec:
    """The static shape and dtype of each component of a dataset's elements (None: unknown)."""

    def __init__(self, template: Any, shapes: List[Optional[TensorShape]], dtypes: List[Any]):
        self.template, self.shapes, self.dtypes = template, shapes, dtypes

    @classmethod
    def of(cls, structure: Any) -> "_Spec":
        leaves = [as_node(leaf) for leaf in _leaves(structure)]
        return cls(structure, [leaf._shape for leaf in leaves], [leaf._dtype for leaf in leaves])

    def batched(self, rows: Optional[int]) -> "_Spec":
        return _Spec(self.template, [None if s is None or s.ndims is None
                                     else TensorShape([rows]).concatenate(s)
                                     for s in self.shapes], self.dtypes)

    def tensors(self, node_of: Callable[[int], Tensor]) -> Any:
        """Tensors with this spec's statics, ``node_of(i)`` giving component ``i``."""
        nodes = []
        for i, (shape, dtype) in enumerate(zip(self.shapes, self.dtypes)):
            node = node_of(i)
            node._shape, node._dtype = shape, dtype
            nodes.append(node)
        return _rebuild(self.template, iter(nodes))


class _Structured:
    """``output_shapes`` and ``output_types`` of what has a ``_spec``: a Dataset, an Iterator."""

    _spec: _Spec

    @property
    def output_shapes(self) -> Any:
        return _shapes_of(self._spec)

    @property
    def output_types(self) -> Any:
        return _rebuild(self._spec.template, iter(self._spec.dtypes))


class _ElementFunction:
    """A user function on elements, traced once into a per-element graph: ``fn`` is called on
    Tensors standing for an element's components; each call gives an element's values to
    them and evaluates the graph (any thread; the values are the calling thread's own)."""

    def __init__(self, fn: Callable[..., Any], spec: _Spec):
        self._slot = threading.local()
        inputs = spec.tensors(lambda i: Tensor(
            lambda i=i: self._slot.values[i], name="args"))
        self.output = _call(fn, inputs)
        self._run = compile_fetches(self.output)

    def __call__(self, element: Any) -> Any:
        """The graph's value for ``element``; a failure (of this element or an earlier
        stage) as a :class:`_Failed` element."""
        if isinstance(element, _Failed):
            return element
        self._slot.values = _leaves(element)
        try:
            return self._run()
        except Exception as e:  # noqa: BLE001 - the element's error, raised at its run
            return _Failed(e)
        finally:
            self._slot.values = None


# -- datasets ---------------------------------------------------------------------------------------


class Dataset(_Structured):
    """TF1's ``tf.data.Dataset``: a description of elements; ``_elements()`` makes them, from
    the start, each time it is called (so ``repeat`` reads the input again)."""

    def __init__(self, elements: Callable[[], Iterates[Any]], spec: _Spec):
        self._elements = elements
        self._spec = spec

    # sources

    @staticmethod
    def from_tensor_slices(tensors: Any) -> "Dataset":
        """The rows of ``tensors`` (a tuple or dict of arrays with one first dimension)."""
        values = evaluate(tensors, strict=False)
        leaves = [constant_value(v, None) for v in _leaves(values)]  # TF's dtypes
        counts = {len(leaf) for leaf in leaves}
        if len(counts) != 1:
            raise ValueError(f"Dimensions of the tensors to slice differ: first dimensions "
                             f"{sorted(len(leaf) for leaf in leaves)}")
        rows = counts.pop()

        def elements() -> Iterates[Any]:
            for i in builtins.range(rows):
                yield _rebuild(values, (leaf[i] for leaf in leaves))
        return Dataset(elements, _Spec(values, [TensorShape(leaf.shape[1:]) for leaf in leaves],
                                       [leaf.dtype for leaf in leaves]))

    @staticmethod
    def from_tensors(tensors: Any) -> "Dataset":
        """One element: ``tensors``, Python values given TF's dtypes."""
        given = evaluate(tensors, strict=False)
        values = _rebuild(given, (constant_value(v, None) for v in _leaves(given)))
        return Dataset(lambda: iter([values]), _Spec.of(as_constants(values)))

    @staticmethod
    def from_generator(generator: Callable[..., Any], output_types: Any,
                       output_shapes: Any = None, args: Any = None) -> "Dataset":
        """The items ``generator(*args)`` yields, each converted to ``output_types`` (a
        structure of dtypes), called afresh each time the dataset is iterated."""
        types = [as_dtype(t) for t in _leaves(output_types)]
        shapes = _leaves(output_shapes) if output_shapes is not None else [None] * len(types)
        arguments = [evaluate(a, strict=False) for a in (args or ())]

        def elements() -> Iterates[Any]:
            for item in generator(*arguments):
                leaves = _leaves(item) if _nested(output_types) else [item]
                yield _rebuild(output_types, (_converted(v, t) for v, t in
                                              builtins.zip(leaves, types)))
        return Dataset(elements, _Spec(output_types,
                                       [None if s is None else TensorShape(s) for s in shapes],
                                       types))

    @staticmethod
    def range(*args: int) -> "Dataset":  # noqa: A003 - TF's name
        bounds = builtins.range(*args)
        return Dataset(lambda: (np.int64(i) for i in bounds),
                       _Spec(None, [TensorShape([])], [np.dtype(np.int64)]))

    @staticmethod
    def zip(datasets: Any) -> "Dataset":  # noqa: A003 - TF's name
        members = _leaves_of_datasets(datasets)

        def elements() -> Iterates[Any]:
            for items in builtins.zip(*(d._elements() for d in members)):
                yield _first_failure(items) or _rebuild(datasets, iter(items))
        return Dataset(elements, _Spec(_rebuild(datasets, iter(d._spec.template for d in members)),
                                       [s for d in members for s in d._spec.shapes],
                                       [t for d in members for t in d._spec.dtypes]))

    @staticmethod
    def list_files(file_pattern: Any, shuffle: Optional[bool] = None,
                   seed: Optional[int] = None) -> "Dataset":
        """The files matching ``file_pattern`` (a pattern or a list of them), matched when
        the iterator starts, shuffled each iteration unless ``shuffle=False``, as TF's (none
        matching: no element, then ``OutOfRangeError``)."""
        patterns = [_text(p) for p in np.atleast_1d(evaluate(file_pattern, strict=False))]
        iteration = itertools.count()

        def elements() -> Iterates[Any]:
            names = sorted({m for p in patterns for m in remote.glob(p)})
            if shuffle is not False:
                epoch = next(iteration)
                rng = np.random.default_rng(None if seed is None else (seed + epoch) % 2 ** 32)
                names = [names[i] for i in rng.permutation(len(names))]
            for name in names:
                yield name.encode()
        return Dataset(elements, _Spec(None, [TensorShape([])], [np.dtype(object)]))

    # transformations

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Optional[int] = None,
            deterministic: Any = None) -> "Dataset":
        """``map_func``'s graph per element; with ``num_parallel_calls`` > 1 (or AUTOTUNE)
        computed on that many runner threads, the elements kept in order."""
        function = _ElementFunction(map_func, self._spec)
        workers = 1 if not num_parallel_calls else (
            2 if num_parallel_calls == AUTOTUNE else int(num_parallel_calls))
        upstream = self._elements
        if workers == 1:
            return Dataset(lambda: (function(e) for e in upstream()), _Spec.of(function.output))
        return Dataset(lambda: _parallel_map(function, upstream(), workers),
                       _Spec.of(function.output))

    def filter(self, predicate: Callable[..., Any]) -> "Dataset":
        function = _ElementFunction(predicate, self._spec)
        upstream = self._elements

        def elements() -> Iterates[Any]:
            for element in upstream():
                keep = function(element)
                if isinstance(keep, _Failed):
                    yield keep
                elif keep:
                    yield element
        return Dataset(elements, self._spec)

    def flat_map(self, map_func: Callable[..., Any]) -> "Dataset":
        return self.interleave(map_func, cycle_length=1)

    def interleave(self, map_func: Callable[..., Any], cycle_length: Any = None,
                   block_length: int = 1, num_parallel_calls: Optional[int] = None,
                   deterministic: Any = None) -> "Dataset":
        """``map_func`` gives a Dataset per element (it is called with the element's values);
        ``cycle_length`` of them are read in turn (by default, or AUTOTUNE, as many as this
        process may use CPUs, as TF's), ``block_length`` elements at a time, in one thread."""
        cycle = _cpus() if cycle_length in (None, AUTOTUNE) else int(cycle_length)
        upstream = self._elements

        def inner(element: Any) -> Iterates[Any]:
            if isinstance(element, _Failed):
                return iter([element])
            return _call(map_func, as_constants(element))._elements()

        def elements() -> Iterates[Any]:
            yield from _interleave((inner(e) for e in upstream()), cycle, block_length)
        return Dataset(elements, _inner_spec(map_func, self._spec))

    def shuffle(self, buffer_size: int, seed: Optional[int] = None,
                reshuffle_each_iteration: bool = True) -> "Dataset":
        """TF's shuffle: a buffer of ``buffer_size`` elements, each output a random one of them,
        its place taken by the next input."""
        upstream = self._elements
        iteration = itertools.count()

        def elements() -> Iterates[Any]:
            epoch = next(iteration) if reshuffle_each_iteration else 0
            rng = np.random.default_rng(None if seed is None else (seed + epoch) % 2 ** 32)
            buffer: List[Any] = []
            for element in upstream():
                buffer.append(element)
                if len(buffer) >= buffer_size:
                    i = int(rng.integers(len(buffer)))
                    buffer[i], buffer[-1] = buffer[-1], buffer[i]
                    yield buffer.pop()
            while buffer:
                i = int(rng.integers(len(buffer)))
                buffer[i], buffer[-1] = buffer[-1], buffer[i]
                yield buffer.pop()
        return Dataset(elements, self._spec)

    def repeat(self, count: Optional[int] = None) -> "Dataset":
        """The elements ``count`` times (None or -1: forever, ending if an epoch is empty)."""
        upstream = self._elements

        def elements() -> Iterates[Any]:
            epochs = itertools.count() if count in (None, -1) else builtins.range(int(count))
            for _ in epochs:
                empty = True
                for element in upstream():
                    empty = False
                    yield element
                if empty:
                    return
        return Dataset(elements, self._spec)

    def take(self, count: int) -> "Dataset":
        upstream = self._elements
        return Dataset(lambda: upstream() if count == -1 else itertools.islice(upstream(),
                                                                                 int(count)),
                       self._spec)

    def skip(self, count: int) -> "Dataset":
        upstream = self._elements
        return Dataset(lambda: iter(()) if count == -1 else itertools.islice(upstream(),
                                                                            int(count), None),
                       self._spec)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        """Elements stacked in groups of ``batch_size``; a sparse component becomes one
        SparseValue with the batch index first, as TF batches a SparseTensor."""
        return self._batched(batch_size, drop_remainder, _stack)

    def padded_batch(self, batch_size: int, padded_shapes: Any = None,
                     padding_values: Any = None, drop_remainder: bool = False) -> "Dataset":
        """As :meth:`batch`, each dimension padded to ``padded_shapes`` (None or -1: the
        longest in the batch) with ``padding_values`` (0 or ``b""`` by default)."""
        shapes = _leaves(padded_shapes) if padded_shapes is not None \
            else [None] * len(self._spec.shapes)
        pads = _leaves(padding_values) if padding_values is not None \
            else [None] * len(self._spec.shapes)

        def stack(i: int, items: List[Any]) -> Any:
            return _pad_stack(items, shapes[i], pads[i])
        return self._batched(batch_size, drop_remainder, stack)

    def _batched(self, batch_size: int, drop_remainder: bool,
                 stack: Callable[[int, List[Any]], Any]) -> "Dataset":
        upstream = self._elements
        template = self._spec.template

        def elements() -> Iterates[Any]:
            source = upstream()
            while True:
                group = list(itertools.islice(source, int(batch_size)))
                if not group or (drop_remainder and len(group) < batch_size):
                    return
                failure = _first_failure(group)
                if failure is not None:
                    yield failure
                    continue
                columns = builtins.zip(*(_leaves(e) for e in group))
                yield _rebuild(template, iter([stack(i, list(c)) for i, c in enumerate(columns)]))
        return Dataset(elements, self._spec.batched(int(batch_size) if drop_remainder
                                                    else None))

    def prefetch(self, buffer_size: int) -> "Dataset":
        """Accepted: the iterator's queue already holds elements made ahead by its thread."""
        return self

    def cache(self, filename: str = "") -> "Dataset":
        """Elements kept in memory after the first pass (``filename`` is not written)."""
        upstream = self._elements
        kept: List[Any] = []
        complete = [False]

        def elements() -> Iterates[Any]:
            if complete[0]:
                yield from kept
                return
            kept.clear()
            for element in upstream():
                kept.append(element)
                yield element
            complete[0] = True
        return Dataset(elements, self._spec)

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        return transformation_func(self)

    def make_one_shot_iterator(self) -> "Iterator":
        return Iterator(self, initializable=False)

    def make_initializable_iterator(self, shared_name: Any = None) -> "Iterator":
        return Iterator(self, initializable=True)



def _inner_spec(map_func: Callable[..., Any], spec: _Spec) -> _Spec:
    """The spec of the datasets ``map_func`` makes, from a call on Tensors standing for an
    element (unknown if it needs their values to build)."""
    try:
        return _call(map_func, spec.tensors(lambda i: Tensor(_no_value, name="args")))._spec
    except _NoValue:
        return _Spec(None, [None], [None])


class _NoValue(Exception):
    pass


def _no_value() -> Any:
    raise _NoValue()


def _shapes_of(spec: _Spec) -> Any:
    return _rebuild(spec.template, iter(s if s is not None else TensorShape(None)
                                        for s in spec.shapes))


def as_constants(values: Any) -> Any:
    """An element's values as constant Tensors (what ``interleave``'s function is given)."""
    return _rebuild(values, (as_node(np.asarray(v) if not isinstance(v, (bytes, SparseValue))
                                     else v) for v in _leaves(values)))


def _leaves_of_datasets(datasets: Any) -> List[Dataset]:
    if isinstance(datasets, Dataset):
        return [datasets]
    return _leaves(datasets)


def _converted(value: Any, dtype: np.dtype) -> Any:
    """A generator's value as ``dtype`` (str to bytes for strings), as TF converts it."""
    out = constant_value(value, dtype)
    return out[()] if out.ndim == 0 else out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _stack(i: int, items: List[Any]) -> Any:
    if isinstance(items[0], SparseValue):
        values = np.asarray(items[0].values)
        return sparse.stack(items, values.dtype, f"batch component {i}").to_sparse()
    if isinstance(items[0], bytes):
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out
    shapes = {np.shape(item) for item in items}
    if len(shapes) > 1:
        raise ValueError(f"Cannot batch tensors with different shapes in component {i}. "
                         f"First element had shape {np.shape(items[0])} and element "
                         f"{[np.shape(x) for x in items].index(sorted(shapes)[-1])} had "
                         f"shape {sorted(shapes)[-1]}.")
    return np.stack([np.asarray(item) for item in items])


def _pad_stack(items: List[Any], shape: Any, pad: Any) -> np.ndarray:
    arrays = [np.asarray(item, dtype=object) if isinstance(item, bytes) or (
        isinstance(item, np.ndarray) and item.dtype == object) else np.asarray(item)
        for item in items]
    rank = arrays[0].ndim
    longest = [max(a.shape[d] for a in arrays) for d in builtins.range(rank)]
    wanted = [longest[d] if shape is None or list(shape)[d] in (None, -1) else int(list(shape)[d])
              for d in builtins.range(rank)]
    fill = pad if pad is not None else (b"" if arrays[0].dtype == object else 0)
    fill = evaluate(fill, strict=False)
    out = np.full([len(arrays)] + wanted, fill, dtype=arrays[0].dtype)
    for j, a in enumerate(arrays):
        if any(a.shape[d] > wanted[d] for d in builtins.range(rank)):
            raise ValueError(f"padded_batch: element {j} has shape {a.shape}, larger than the "
                             f"padded shape {wanted}")
        out[(j,) + tuple(builtins.slice(0, n) for n in a.shape)] = a
    return out


def _cpus() -> int:
    """The CPUs this process may run on: TF's AUTOTUNE cycle length."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def _interleave(sources: Iterates[Iterates[Any]], cycle: int, block: int) -> Iterates[Any]:
    """TF's deterministic interleave: ``cycle`` open inputs taken in turn, ``block`` elements
    from each; an input that ends is replaced by the next one."""
    open_inputs: List[Optional[Iterates[Any]]] = []
    for source in itertools.islice(sources, cycle):
        open_inputs.append(source)
    while any(s is not None for s in open_inputs):
        for k, current in enumerate(open_inputs):
            if current is None:
                continue
            for _ in builtins.range(block):
                try:
                    yield next(current)
                except StopIteration:
                    open_inputs[k] = next(sources, None)
                    break


def _parallel_map(function: _ElementFunction, upstream: Iterates[Any],
                  workers: int) -> Iterates[Any]:
    """``function`` over ``upstream`` on ``workers`` runner threads, in order: one QueueRunner
    numbers the elements into a FIFOQueue, another's threads take them, compute them and queue
    the numbers done; the consumer yields the results in number order. The queues carry the
    numbers (they bound the work in flight and stop it); the elements and results wait in
    dicts beside them, since a queue holds arrays, not any structure of values."""
    todo = queues.FIFOQueue(2 * workers, [np.int64], shapes=[[]], name="map/todo")
    done = queues.FIFOQueue(2 * workers, [np.int64], shapes=[[]], name="map/done")
    numbered = builtins.zip(itertools.count(), upstream)
    inputs: Dict[int, Any] = {}  # by number: an element is put here, then its number queued
    results: Dict[int, Any] = {}

    def feed() -> None:  # one thread: the generators are not shared
        item = next(numbered, None)
        if item is None:
            raise OutOfRangeError("map: the input is exhausted")
        inputs[item[0]] = item[1]
        todo.enqueue((item[0],))

    def work() -> None:
        number = int(todo.dequeue())
        results[number] = function(inputs.pop(number))
        done.enqueue((number,))

    coord = Coordinator()
    # Daemon threads as TF1's start_queue_runners makes them: a backstop for a script that
    # ends without closing its session (the plan is the stop below, and the session's close).
    threads = runner.QueueRunner(todo, [feed]).create_threads(coord, daemon=True, start=True)
    threads += runner.QueueRunner(done, [work] * workers).create_threads(coord, daemon=True,
                                                                         start=True)
    ready: Set[int] = set()
    turn = 0
    try:
        while True:
            while turn in ready:
                ready.discard(turn)
                yield results.pop(turn)
                turn += 1
            try:
                ready.add(int(done.dequeue()))
            except OutOfRangeError:
                coord.raise_requested_exception()
                return
    finally:
        coord.request_stop()
        todo.close(cancel_pending_enqueues=True)
        done.close(cancel_pending_enqueues=True)
        _join(coord, threads)
        _close(upstream)


def _join(coord: Coordinator, threads: List[threading.Thread]) -> None:
    """Joins runner threads being stopped. A runner's error is not raised again here: the
    consumer's dequeue raised it already (TF's session close does not raise it either)."""
    try:
        coord.join(threads, stop_grace_period_secs=10)
    except Exception:
        if any(thread.is_alive() for thread in threads):
            raise


def _close(elements: Optional[Iterates[Any]]) -> None:
    """Runs the ``finally`` blocks of a generator left midway (a reader closes its file)."""
    close = getattr(elements, "close", None)
    if close is not None:
        close()


def _file_records(reader_of: Callable[[], Any], filenames: Any,
                  num_parallel_reads: Optional[int]) -> Dataset:
    """A dataset of the records of ``filenames`` (read by a new queuepipe reader per file);
    ``num_parallel_reads`` files interleaved, one record from each in turn, as TF's."""
    def names() -> Iterates[Any]:  # read when iterated: an interleave's argument is given then
        yield from np.atleast_1d(np.asarray(evaluate(filenames, strict=False), dtype=object))

    def records_of(name: Any) -> Dataset:
        path = _text(evaluate(name, strict=False))

        def elements() -> Iterates[Any]:
            reader = reader_of()
            files = _OneFile(path)
            try:
                while True:
                    try:
                        _, values = reader.read_up_to(files, _READ_CHUNK)
                    except OutOfRangeError:
                        return
                    yield from values
            finally:
                reader.reset()  # closes the file if the iteration stopped inside it
        return Dataset(elements, _Spec(None, [TensorShape([])], [np.dtype(object)]))

    cycle = 1 if not num_parallel_reads else (
        _cpus() if num_parallel_reads == AUTOTUNE else int(num_parallel_reads))
    spec = _Spec(None, [TensorShape([])], [np.dtype(object)])
    return Dataset(lambda: _interleave((records_of(n)._elements() for n in names()), cycle, 1),
                   spec)


class _OneFile:
    """What a reader dequeues its files from: one name, then the end."""

    def __init__(self, path: str):
        self._path: Optional[str] = path

    def dequeue(self) -> str:
        path, self._path = self._path, None
        if path is None:
            raise OutOfRangeError("no file left")
        return path


def TFRecordDataset(filenames: Any, compression_type: Any = None,  # noqa: N802 - TF's name
                    buffer_size: Any = None, num_parallel_reads: Optional[int] = None,
                    name: Any = None) -> Dataset:
    options = evaluate(compression_type, strict=False) or None
    return _file_records(lambda: readers.TFRecordReader(
        options=records.TFRecordOptions(_text(options)) if options else None),
        filenames, num_parallel_reads)


def TextLineDataset(filenames: Any, compression_type: Any = None,  # noqa: N802 - TF's name
                    buffer_size: Any = None, num_parallel_reads: Optional[int] = None,
                    name: Any = None) -> Dataset:
    """The lines of each file, without their line ending."""
    if evaluate(compression_type, strict=False):
        raise NotImplementedError("TextLineDataset: compressed text files are not provided by "
                                  "queuepipe.compat.v1 (decompress them first)")
    return _file_records(readers.TextLineReader, filenames, num_parallel_reads)


def FixedLengthRecordDataset(filenames: Any, record_bytes: int,  # noqa: N802 - TF's name
                             header_bytes: Optional[int] = None,
                             footer_bytes: Optional[int] = None, buffer_size: Any = None,
                             compression_type: Any = None,
                             num_parallel_reads: Optional[int] = None,
                             name: Any = None) -> Dataset:
    if evaluate(compression_type, strict=False):
        raise NotImplementedError("FixedLengthRecordDataset: compressed files are not provided "
                                  "by queuepipe.compat.v1 (decompress them first)")
    return _file_records(lambda: readers.FixedLengthRecordReader(
        record_bytes, header_bytes=header_bytes, footer_bytes=footer_bytes),
        filenames, num_parallel_reads)


# -- iterators ----------------------------------------------------------------------------------


class Iterator(_Structured):
    """TF1's dataset iterator: ``get_next()`` gives the element's Tensors, one element per
    ``sess.run``; ``initializer`` (an initializable iterator) starts it again from the first
    element. Its runner thread is stopped and joined when the session closes."""

    def __init__(self, dataset: Optional[Dataset], initializable: bool,
                 spec: Optional[_Spec] = None):
        self._dataset = dataset
        self._spec = spec if spec is not None else dataset._spec  # type: ignore[union-attr]
        self._initializable = initializable
        self._lock = threading.Lock()
        self._queue: Any = None
        self._coord: Optional[Coordinator] = None
        self._source: Optional[Iterates[Any]] = None
        self._values: Dict[int, Any] = {}
        self._threads: List[threading.Thread] = []
        self._graph = get_default_graph()
        self._name = self._graph.unique_name("Iterator")
        self._registered = False  # with the graph, to be stopped when its session closes
        self.initializer = Operation(self._start, name=f"{self._name}/MakeIterator") \
            if initializable else None

    @staticmethod
    def from_structure(output_types: Any, output_shapes: Any = None, shared_name: Any = None,
                       output_classes: Any = None) -> "Iterator":
        """TF1's reinitializable iterator: elements of this structure, from whichever dataset
        ``make_initializer(dataset)``'s op last started."""
        types = _leaves(output_types)
        shapes = _leaves(output_shapes) if output_shapes is not None else [None] * len(types)
        spec = _Spec(output_types, [None if s is None else TensorShape(s) for s in shapes],
                     [as_dtype(t) for t in types])
        return Iterator(None, initializable=True, spec=spec)

    def make_initializer(self, dataset: Dataset, name: Optional[str] = None) -> Operation:
        """An op that starts this iterator on ``dataset``'s first element."""
        return Operation(lambda: self._start(dataset), name=name or f"{self._name}/MakeIterator")


    def _start(self, dataset: Optional[Dataset] = None) -> None:
        with self._lock:
            self._stop_locked()
            self._dataset = dataset if dataset is not None else self._dataset
            if self._dataset is None:
                raise _not_initialized(self._name)
            queue = queues.FIFOQueue(2, [np.int64], shapes=[[]], name=f"{self._name}/buffer")
            source = self._dataset._elements()
            values: Dict[int, Any] = {}  # by number, as in _parallel_map
            numbers = itertools.count()

            def enqueue_next() -> None:
                try:
                    element = next(source)
                except StopIteration:
                    raise OutOfRangeError("End of sequence") from None
                number = next(numbers)
                values[number] = element
                queue.enqueue((number,))

            if not self._registered:
                self._graph.add_closer(self._stop)
                self._registered = True
            self._coord = Coordinator()
            self._threads = runner.QueueRunner(queue, [enqueue_next]).create_threads(
                self._coord, daemon=True, start=True)  # daemon: as in _parallel_map
            self._queue, self._source, self._values = queue, source, values

    def _stop(self) -> None:
        """What the session's close calls (which forgets it: a later start registers again)."""
        with self._lock:
            self._registered = False
            self._stop_locked()

    def _stop_locked(self) -> None:
        if self._coord is None:
            return
        self._coord.request_stop()
        self._queue.close(cancel_pending_enqueues=True)
        try:
            _join(self._coord, self._threads)
        finally:
            _close(self._source)  # after the join: no thread runs it any more
            self._coord, self._threads, self._source = None, [], None

    def _next(self) -> Any:
        with self._lock:
            if self._queue is None and self._initializable:
                raise _not_initialized(self._name)
        if self._queue is None:
            self._start()
        try:
            number = self._queue.dequeue(timeout=run_timeout())
        except OutOfRangeError:
            if self._coord is not None:
                self._coord.raise_requested_exception()
            raise OutOfRangeError("End of sequence") from None
        element = self._values.pop(int(number))
        if isinstance(element, _Failed):
            raise element.error
        return element

    def get_next(self, name: Optional[str] = None) -> Any:
        node = Tensor(self._next, name=name or f"{self._name}/IteratorGetNext")
        spec = self._spec
        if spec.template is None or not isinstance(spec.template, (tuple, list, dict)):
            node._shape, node._dtype = spec.shapes[0], spec.dtypes[0]
            return node
        return _outputs_like(node, spec)


def _outputs_like(node: Tensor, spec: _Spec) -> Any:
    paths = _paths(spec.template)
    return spec.tensors(lambda i: node.output(paths[i][0]) if len(paths[i]) == 1 else
                        Tensor(lambda v, p=paths[i]: _at(v, p), [node], name="element"))


def _paths(template: Any, prefix: tuple = ()) -> List[tuple]:
    if isinstance(template, dict):
        return [p for key in sorted(template) for p in _paths(template[key], prefix + (key,))]
    if _nested(template):
        return [p for i, item in enumerate(template) for p in _paths(item, prefix + (i,))]
    return [prefix]


def _at(value: Any, path: tuple) -> Any:
    for key in path:
        value = value[key]
    return value


def _not_initialized(name: str) -> Exception:
    from queuepipe.errors import FailedPreconditionError
    return FailedPreconditionError(f"GetNext() failed because the iterator '{name}' has not "
                                   f"been initialized. Ensure that you have run the "
                                   f"initializer operation for this iterator before getting "
                                   f"the next element.")


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    return dataset.make_one_shot_iterator()


def make_initializable_iterator(dataset: Dataset, shared_name: Any = None) -> Iterator:
    return dataset.make_initializable_iterator()


# -- tf.data.experimental -------------------------------------------------------------------------


def _map_and_batch(map_func: Callable[..., Any], batch_size: int,
                   num_parallel_batches: Optional[int] = None, drop_remainder: bool = False,
                   num_parallel_calls: Optional[int] = None) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.map(map_func, num_parallel_calls).batch(batch_size,
                                                                           drop_remainder)


def _shuffle_and_repeat(buffer_size: int, count: Optional[int] = None,
                        seed: Optional[int] = None) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.shuffle(buffer_size, seed).repeat(count)


def _parallel_interleave(map_func: Callable[..., Any], cycle_length: int,
                         block_length: int = 1, sloppy: bool = False,
                         buffer_output_elements: Any = None,
                         prefetch_input_elements: Any = None) -> Callable[[Dataset], Dataset]:
    return lambda dataset: dataset.interleave(map_func, cycle_length, block_length)


def _ignore_errors(log_warning: bool = False) -> Callable[[Dataset], Dataset]:
    def apply(dataset: Dataset) -> Dataset:
        upstream = dataset._elements

        def elements() -> Iterates[Any]:
            source = upstream()
            while True:
                try:
                    yield next(source)
                except StopIteration:
                    return
                except Exception:  # noqa: BLE001 - what ignore_errors is for
                    continue
        return Dataset(elements, dataset._spec)
    return apply


experimental = {"AUTOTUNE": AUTOTUNE, "map_and_batch": _map_and_batch,
                "shuffle_and_repeat": _shuffle_and_repeat,
                "parallel_interleave": _parallel_interleave, "ignore_errors": _ignore_errors}
