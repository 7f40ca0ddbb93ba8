"""TF1's two phases on queuepipe: build a graph of symbolic values once, run it many times.

TF1 input code first *builds* (``reader.read(q)``, ``parse_single_example``, ``shuffle_batch``
return tensors, not values) and then *runs* (``sess.run(fetches)``). Here a :class:`Tensor` is a
node: a function and the nodes it reads. Evaluating a set of fetches computes each node at most
once (a memo per evaluation), as TF computes each op once per ``run``::

    build:   read ---> (key, value) ---> parse ---> image ---> cast ---> x
                                                └--> label
    run:     sess.run([x, label])   -> read once, parse once, both values from that record
             runner thread          -> the same graph evaluated once per element it enqueues

A node is either *per run* (its value belongs to one evaluation: a read, a dequeue) or a plain
function of its inputs; there is no other state. An :class:`Operation` is a node run for its
effect (an enqueue, an initializer); ``sess.run`` gives None for it.
"""

from __future__ import annotations

import contextlib
import operator
import re
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, cast

import numpy as np

from queuepipe.compat.v1.shapes import TensorShape, as_shape
from queuepipe.dtypes import as_dtype
from queuepipe.runner import Pipeline, get_default_pipeline

__all__ = ["Tensor", "Operation", "evaluate", "compile_fetches", "Graph", "get_default_graph",
           "Session", "as_node", "no_op", "run_timeout", "OpRef"]


class Tensor:
    """A symbolic value: ``fn`` applied to the values of ``inputs`` when evaluated.

    Arithmetic, comparison and indexing on a Tensor build new Tensors (see
    :mod:`queuepipe.compat.v1.ops`), as on a TF1 tensor.
    """

    __array_priority__ = 1000  # ``numpy_value * tensor`` builds a Tensor too

    def __init__(self, fn: Callable[..., Any], inputs: Sequence[Any] = (), name: str = "op",
                 graph: Optional["Graph"] = None, shape: Any = None, dtype: Any = None,
                 output_of: Optional[str] = None):
        self.graph: Optional[Graph] = graph if graph is not None else get_default_graph()
        names = self.graph._names
        self._inputs = [as_node(x) for x in inputs]
        controls = names.controls()
        if controls:  # evaluated first, their values not passed on
            count = len(self._inputs)
            self._inputs += controls
            fn = _first_arguments(fn, count)
        self._fn = fn
        # ``output_of``: this is output ``i`` of an op already named (``ReaderReadV2:1``).
        self.name = output_of if output_of is not None else self._tensor_name(names.unique(name))
        self._shape = None if shape is None else as_shape(shape)  # None: not inferred here
        self._dtype = None if dtype is None else as_dtype(dtype)

    @staticmethod
    def _tensor_name(op_name: str) -> str:
        return f"{op_name}:0"

    @property
    def shape(self) -> TensorShape:
        """The static shape (an unknown one where it is not inferred)."""
        return self._shape if self._shape is not None else TensorShape(None)

    def get_shape(self) -> TensorShape:
        return self.shape

    def set_shape(self, shape: Any) -> None:
        """Narrows the static shape, as TF's ``set_shape``: ValueError (at build time) when
        ``shape`` contradicts what is known. Batching then checks each value against it."""
        self._shape = self.shape.merge_with(as_shape(shape))

    @property
    def dtype(self) -> Any:
        """The NumPy dtype of the value (``tf.string`` is object), None where not inferred."""
        return self._dtype

    @property
    def op(self) -> "OpRef":
        """The op that makes this tensor: its ``name`` (``input/Cast``) and ``graph``."""
        return OpRef(self.name.rsplit(":", 1)[0], self.graph)

    @property
    def device(self) -> str:
        return ""

    def output(self, index: Any, shape: Any = None, dtype: Any = None) -> "Tensor":
        """Output ``index`` (an int or a key) of this multi-output node, named TF's way."""
        op_name = self.name.rsplit(":", 1)[0]
        position = index if isinstance(index, int) else 0
        return Tensor(operator.itemgetter(index), [self], graph=self.graph, shape=shape,
                      dtype=dtype, output_of=f"{op_name}:{position}")

    def _compute(self, memo: Dict[int, Any]) -> Any:
        return self._fn(*(node._value(memo) for node in self._inputs))

    def _value(self, memo: Dict[int, Any]) -> Any:
        key = id(self)
        if key not in memo:
            memo[key] = self._compute(memo)
        return memo[key]

    def eval(self, session: Optional["Session"] = None) -> Any:
        """The value in one run of ``session`` (the default session if None)."""
        return (session or _default_session()).run(self)

    def __iter__(self):
        raise TypeError(f"Tensor '{self.name}' is a symbolic value: it has no elements to "
                        "iterate at graph-build time (run it with sess.run to get its value)")

    def __bool__(self) -> bool:
        raise TypeError(f"Tensor '{self.name}' is a symbolic value: it has no truth value at "
                        "graph-build time (run it with sess.run to get its value)")

    def __repr__(self) -> str:
        return f"<tf.Tensor '{self.name}' shape={self.shape} dtype={self.dtype}>"


class OpRef(NamedTuple):
    """``tensor.op``: the name of the op that makes a tensor, and its graph."""

    name: str
    graph: Any


def _first_arguments(fn: Callable[..., Any], count: int) -> Callable[..., Any]:
    return lambda *values: fn(*values[:count])


class Operation(Tensor):
    """A node run for its effect; ``sess.run`` gives None for it. Calling it runs it once
    (what a QueueRunner's thread does with each of its enqueue ops)."""

    @staticmethod
    def _tensor_name(op_name: str) -> str:
        return op_name

    def __call__(self) -> None:
        plan = self.__dict__.get("_plan")
        if plan is None:  # compiled at the first call (idempotent: no lock needed)
            plan = self._plan = compile_fetches(self)
        plan()

    def run(self, session: Optional["Session"] = None) -> None:
        (session or _default_session()).run(self)

    def __repr__(self) -> str:
        return f"<tf.Operation '{self.name}'>"


class _Constant(Tensor):
    """A value known at build time. A NumPy array keeps its dtype; a Python number or list
    has none of its own (as in TF, ``x * 2`` takes ``x``'s dtype)."""

    def __init__(self, value: Any):
        self._constant = value
        self._inputs = []
        self.name = "Const:0"
        self.graph = None
        self._shape = None if callable(value) else _static_shape(value)
        typed = isinstance(value, (np.ndarray, np.generic, bytes))
        self._dtype = as_dtype(np.asarray(value).dtype) if typed else None

    def _value(self, memo: Dict[int, Any]) -> Any:
        return self._constant


def _static_shape(value: Any) -> Optional[TensorShape]:
    """A constant's shape, None for a ragged nesting (NumPy gives it none)."""
    try:
        return as_shape(np.shape(value))
    except ValueError:
        return None


def as_node(value: Any) -> Tensor:
    """A Tensor as it is; anything else (a number, an array, a list of Tensors) as a node."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return Tensor(lambda *items: np.stack([np.asarray(i) for i in items]),
                      list(value), name="pack")
    return _Constant(value)


def no_op(name: str = "NoOp") -> Operation:
    """An operation that does nothing (TF1's initializers, here: there are no variables)."""
    return Operation(lambda: None, name=name)


def evaluate(fetches: Any, memo: Optional[Dict[int, Any]] = None, strict: bool = True) -> Any:
    """The values of ``fetches`` (Tensors, Operations, and lists, tuples, dicts of them,
    nested), each node computed once; None for an Operation. Other leaves are an error when
    ``strict`` (as in ``sess.run``), else values as they are (what an enqueue op is given)."""
    memo = {} if memo is None else memo
    if isinstance(fetches, Operation):
        fetches._value(memo)
        return None
    if isinstance(fetches, Tensor):
        return fetches._value(memo)
    if isinstance(fetches, Mapping):
        return cast(Any, type(fetches))((k, evaluate(v, memo, strict)) for k, v in fetches.items())
    if isinstance(fetches, (list, tuple)):
        values = [evaluate(v, memo, strict) for v in fetches]
        return type(fetches)(*values) if hasattr(fetches, "_fields") else type(fetches)(values)
    if fetches is None or not strict:
        return fetches
    raise TypeError(f"Fetch argument {fetches!r} has invalid type {type(fetches).__name__}: "
                    "fetch Tensors, Operations, or lists, tuples and dicts of them")


def compile_fetches(fetches: Any) -> Callable[[], Any]:
    """A function that evaluates ``fetches`` as :func:`evaluate` does (non-Tensor leaves as
    values), with the nodes put in order once. What a runner thread calls per element.

    The function is generated as one line per node (``v3 = f3(v1, v2)``) and one expression
    for the result, as ``collections.namedtuple`` generates its class: a call then costs one
    call per node, not a memo look-up and an argument list each (a third of the per-record
    pipeline's cost). Only indices enter its source; the nodes' functions, the fetches' keys
    and constant leaves are passed in as values. Its size grows with the graph, not the data.
    """
    order: List[Tensor] = []
    position: Dict[int, int] = {}

    def visit(root: Tensor) -> None:
        stack = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if id(node) in position:
                continue
            if expanded:
                position[id(node)] = len(order)
                order.append(node)
                continue
            stack.append((node, True))
            stack.extend((i, False) for i in reversed(node._inputs) if id(i) not in position)

    namespace: Dict[str, Any] = {}

    def name(prefix: str, value: Any) -> str:
        """A new name in the function's namespace, bound to ``value``."""
        key = f"{prefix}{len(namespace)}"
        namespace[key] = value
        return key

    def result(value: Any) -> str:
        """The source of the expression that rebuilds ``value`` from the nodes' values."""
        if isinstance(value, Tensor):
            visit(value)
            return "None" if isinstance(value, Operation) else f"v{position[id(value)]}"
        if isinstance(value, Mapping):
            items = "{" + ", ".join(f"{name('k', key)}: {result(item)}"
                                    for key, item in value.items()) + "}"
            return items if type(value) is dict else f"{name('t', type(value))}({items})"
        if isinstance(value, (list, tuple)):
            parts = [result(item) for item in value]
            if type(value) is list:
                return "[" + ", ".join(parts) + "]"
            if type(value) is tuple:
                return "(" + "".join(f"{part}, " for part in parts) + ")"
            return f"{name('t', type(value))}({', '.join(parts)})"
        return name("c", value)

    returned = result(fetches)
    lines = []
    for i, node in enumerate(order):
        namespace[f"f{i}"] = _step_fn(node)
        args = ", ".join(f"v{position[id(x)]}" for x in node._inputs)
        lines.append(f"    v{i} = f{i}({args})\n")
    source = "def run():\n" + "".join(lines) + f"    return {returned}\n"
    # Keys, types and step functions go into ``namespace`` under generated names; the source
    # holds only those names and indices, so nothing from data (a key, a value) can enter it.
    exec(source, namespace)  # noqa: S102 - indices only: nothing from data enters it
    return namespace["run"]


def _step_fn(node: Tensor) -> Callable[..., Any]:
    if isinstance(node, _Constant):
        constant = node._constant
        return lambda: constant
    return node._fn


class Graph:
    """TF1's graph: here, the :class:`~queuepipe.runner.Pipeline` whose QueueRunners the
    graph's input functions add, and the names of its ops. ``with tf.Graph().as_default():``
    builds into a fresh one."""

    def __init__(self):
        self.pipeline = Pipeline()
        self._names = _Names()
        self._closers: List[Callable[[], None]] = []
        self._collections: Dict[str, List[Any]] = {}

    def as_default(self) -> "_GraphScope":
        return _GraphScope(self)

    def finalize(self) -> None:
        """Accepted for TF1 code; the graph is not frozen."""

    def unique_name(self, name: str) -> str:
        """``name`` in the current name scope, made unique in the graph (``add``, ``add_1``)."""
        return self._names.unique(name)

    def name_scope(self, name: Optional[str]) -> Any:
        return self._names.scope(name)

    def add_to_collection(self, name: str, value: Any) -> None:
        """Appends ``value`` to the collection ``name`` (TF's ``summaries`` holds the summary
        tensors ``tf.summary.merge_all`` merges)."""
        self._collections.setdefault(name, []).append(value)

    def get_collection(self, name: str, scope: Optional[str] = None) -> List[Any]:
        """The collection ``name`` (a copy), in the order added; with ``scope``, only the
        items whose ``name`` matches it from the start (``re.match``), as TF filters."""
        items = list(self._collections.get(name, ()))
        if scope is None:
            return items
        pattern = re.compile(scope)
        return [item for item in items if pattern.match(getattr(item, "name", ""))]

    def add_closer(self, close: Callable[[], None]) -> None:
        """``close`` runs when the next session of this graph closes (it stops the threads an
        iterator started), once."""
        self._closers.append(close)


class _Names:
    """A graph's op names and its name scopes (one stack per thread, as TF keeps them)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._used: Dict[str, int] = {}
        self._local = threading.local()

    def prefix(self) -> str:
        return getattr(self._local, "prefix", "")

    def controls(self) -> List[Tensor]:
        return list(getattr(self._local, "controls", ()))

    def unique(self, name: str) -> str:
        """TF's ``Graph.unique_name``: ``name`` under the scope, with ``_1``, ``_2``... added
        when taken."""
        full = self.prefix() + name
        key = full.lower()
        with self._lock:
            count = self._used.get(key, 0)
            self._used[key] = count + 1
            if count == 0:
                return full
            base = key
            while key in self._used:
                key = f"{base}_{count}"
                count += 1
            self._used[key] = 1
        return f"{full}_{count - 1}"

    @contextlib.contextmanager
    def scope(self, name: Optional[str]):
        """TF's ``name_scope``: yields the new prefix (``input/``); a name ending in ``/`` is
        taken as it is; None or ``""`` is the root."""
        if not name:
            prefix = ""
        elif name.endswith("/"):
            prefix = name
        else:
            prefix = self.unique(name) + "/"
        saved = self.prefix()
        self._local.prefix = prefix
        try:
            yield prefix
        finally:
            self._local.prefix = saved

    @contextlib.contextmanager
    def control_dependencies(self, control_inputs: Any):
        """Ops made inside evaluate ``control_inputs`` first (None clears them)."""
        saved = self.controls()
        if control_inputs is None:
            self._local.controls = []
        else:
            self._local.controls = saved + [as_node(c) for c in control_inputs]
        try:
            yield None
        finally:
            self._local.controls = saved


class _GraphScope:
    def __init__(self, graph: Graph):
        self._graph = graph
        self._pipeline_scope = graph.pipeline.as_default()

    def __enter__(self) -> Graph:
        _graphs().append(self._graph)
        self._pipeline_scope.__enter__()
        return self._graph

    def __exit__(self, *exc: Any) -> None:
        self._pipeline_scope.__exit__(*exc)
        _graphs().pop()


class _ProcessGraph(Graph):
    """The graph outside every ``Graph().as_default()``: it builds into queuepipe's default
    pipeline of the moment (so that native and compat code share it)."""

    def __init__(self):  # no pipeline of its own: see the property
        self._names = _Names()
        self._closers = []

    @property
    def pipeline(self) -> Pipeline:
        return get_default_pipeline()

    @property
    def _collections(self) -> Dict[str, List[Any]]:  # type: ignore[override]
        """The collections of the default pipeline of the moment, kept on it so that they
        go with it (a summary holds the batches of its queue, which hold the pipeline: a
        table beside it would keep both alive)."""
        pipeline = self.pipeline
        collections = getattr(pipeline, "_compat_collections", None)
        if collections is None:
            collections = pipeline._compat_collections = {}  # type: ignore[attr-defined]
        return collections


_local = threading.local()
_PROCESS_GRAPH = _ProcessGraph()


def _graphs() -> List[Graph]:
    if not hasattr(_local, "graphs"):
        _local.graphs = []
    return _local.graphs


def get_default_graph() -> Graph:
    """The innermost ``Graph().as_default()`` of this thread, else the process's graph (which
    builds into queuepipe's default pipeline)."""
    stack = _graphs()
    return stack[-1] if stack else _PROCESS_GRAPH


class Session:
    """Runs fetches of a graph: ``sess.run([images, labels])`` gives one batch of each.

    Each :meth:`run` evaluates its fetches with one memo, so a node shared by several fetches
    (the dequeue of a batch behind ``images`` and ``labels``) runs once. Closing the session
    (the end of ``with tf.Session() as sess:``) closes the graph's queues with their pending
    enqueues cancelled, as TF's session close does, so that no input thread stays blocked.

    Args:
      target: accepted for TF1 code; unused.
      config: a ``tf.ConfigProto``; its ``operation_timeout_in_ms`` bounds each run as
        ``RunOptions.timeout_in_ms`` does, the rest is accepted.
      graph: the graph to run (the default graph if None).
    """

    def __init__(self, target: str = "", graph: Optional[Graph] = None, config: Any = None):
        del target
        self.graph = graph if graph is not None else get_default_graph()
        self._closed = False
        self._timeout_ms = getattr(config, "operation_timeout_in_ms", 0) or 0

    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """The values of ``fetches`` (nested lists, tuples, dicts), each node run once.

        ``options=tf.RunOptions(timeout_in_ms=...)`` bounds the wait of every dequeue in the
        run: one that would wait longer raises ``DeadlineExceededError``, as in TF.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if feed_dict:
            raise NotImplementedError("feed_dict is not provided by queuepipe.compat.v1: an "
                                      "input pipeline has no placeholders to feed; pass the "
                                      "values to your model directly")
        del run_metadata
        timeout_ms = getattr(options, "timeout_in_ms", 0) or self._timeout_ms
        _local.deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None
        try:
            return evaluate(fetches)
        finally:
            _local.deadline = None

    def close(self) -> None:
        """Closes the graph's queues (pending enqueues cancelled) and stops the threads its
        iterators started. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for queue in self.graph.pipeline.queues:
            queue.close(cancel_pending_enqueues=True)
        closers, self.graph._closers = self.graph._closers, []
        for close in closers:
            close()

    def __enter__(self) -> "Session":
        _sessions().append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _sessions().pop()
        self.close()

    def as_default(self) -> "_SessionScope":
        """``with sess.as_default():`` makes ``tensor.eval()`` use this session."""
        return _SessionScope(self)


class _SessionScope:
    def __init__(self, session: Session):
        self._session = session

    def __enter__(self) -> Session:
        _sessions().append(self._session)
        return self._session

    def __exit__(self, *exc: Any) -> None:
        _sessions().pop()


def run_timeout() -> Optional[float]:
    """Seconds left of the ``timeout_in_ms`` of the ``sess.run`` this thread is in (None:
    no limit, as in the runner threads)."""
    deadline = getattr(_local, "deadline", None)
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _sessions() -> List[Session]:
    if not hasattr(_local, "sessions"):
        _local.sessions = []
    return _local.sessions


def _default_session() -> Session:
    if not _sessions():
        raise ValueError("Cannot evaluate tensor using `eval()`: No default session is "
                         "registered. Use `with sess.as_default()` or pass a session")
    return _sessions()[-1]
