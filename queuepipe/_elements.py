"""What a queue's elements are, and how a value becomes one: structure, dtypes, shapes.

A queue's element is a tuple of components (a dict when the queue has names, a bare value for
one component). :class:`Components` holds the declared dtypes, shapes and names, and turns
what a producer enqueues into the component values the queue's columns store, checking each
against its declaration and raising TF's errors with the queue's and component's name. It
knows nothing of storage or blocking: :mod:`queuepipe.queues` calls it before taking the lock.

A component of no fixed shape may hold SparseValues or dense values; its first value decides
which (:meth:`Components.is_sparse`), and the queue is told, to store it in the right column.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, cast

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import sparse
from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing._items import all_exact_bytes
from queuepipe.sparse import SparseValue

__all__ = ["Components", "fmt_shape", "as_dtype_list", "as_shape_list", "unique_name",
           "DtypeError"]

# Source dtype kinds that may be converted to each numeric target kind without losing meaning.
_CASTABLE_KINDS = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}

_name_lock = threading.Lock()
_name_counts: Dict[str, int] = collections.Counter()


class DtypeError(InvalidArgumentError, TypeError):
    """A value that does not convert to its component's dtype (1.5 for an int64 priority):
    an InvalidArgumentError, and a TypeError as TF raises there."""


def unique_name(base: str) -> str:
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


def as_shape_list(shapes: Any) -> Optional[List[Optional[Tuple[Optional[int], ...]]]]:
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


def as_dtype_list(dtypes: Any) -> Optional[List[np.dtype]]:
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


def fmt_shape(shape: Optional[Tuple[Optional[int], ...]], sep: str = ", ") -> str:
    """``[3, ?]``, or with ``sep=","`` as TF's messages write it: ``[3,?]``."""
    if shape is None:
        return "<unknown>"
    return "[" + sep.join("?" if d is None else str(d) for d in shape) + "]"


class Components:
    """The element structure of one queue: dtypes, shapes and names, and the conversions.

    Args:
      queue: the queue's name, for messages.
      dtypes, shapes, names: as the queue was given them (see :class:`~queuepipe.queues.
        QueueBase`).
      lock: the queue's lock; held while the dtypes are bound or a component's kind decided.
      on_bound: called (lock held) once dtypes given as ``None`` are bound by a first element.
      on_kind: called with ``i`` (lock held) once component ``i``'s first value decided
        whether it holds SparseValues.

    Attributes:
      dtypes, shapes, names: the declarations (``dtypes`` None until bound).
      kinds: per component, True for SparseValues, False for dense values, None until the
        first value of a component with no fixed shape says.
      ranks: per component of SparseValues, the rank of its first value, which every later
        value must have (None until then).
    """

    def __init__(self, queue: str, dtypes: Any, shapes: Any, names: Any, lock: Any,
                 on_bound: Callable[[], None], on_kind: Callable[[int], None]) -> None:
        self.queue = queue
        self.dtypes = as_dtype_list(dtypes)
        self.shapes = as_shape_list(shapes)
        if isinstance(names, str):
            names = [names]
        self.names = None if names is None else list(names)
        self._check_lengths()
        self.lock = lock
        self._on_bound, self._on_kind = on_bound, on_kind
        self.kinds: List[Optional[bool]] = []
        self.ranks: List[Optional[int]] = []
        # Return an element's components when all are as stored (see _acceptance), else None:
        # ``accept`` the values themselves, ``accept_owned`` as :meth:`staged` keeps them.
        self.accept: Optional[Callable[[Any], Optional[List[Any]]]] = None
        self.accept_owned: Optional[Callable[[Any], Optional[List[Any]]]] = None
        if self.dtypes is not None:
            self._typed()

    def _check_lengths(self) -> None:
        counts = {}
        if self.dtypes is not None:
            counts["dtypes"] = len(self.dtypes)
        if self.shapes is not None:
            counts["shapes"] = len(self.shapes)
        if self.names is not None:
            for i, n in enumerate(self.names):
                if not isinstance(n, str):
                    raise InvalidArgumentError(f"names[{i}] must be a str, got {n!r}")
            if len(set(self.names)) != len(self.names):
                raise InvalidArgumentError(f"names must be distinct, got {self.names!r}")
            counts["names"] = len(self.names)
        if len(set(counts.values())) > 1:
            got = ", ".join(f"{k} has {v}" for k, v in counts.items())
            raise InvalidArgumentError(
                f"dtypes, shapes and names must have one entry per component: {got}")

    @property
    def known_dtypes(self) -> List[np.dtype]:
        """The dtypes, once known (a queue made without them takes its first element's)."""
        assert self.dtypes is not None, "the dtypes are not known before the first element"
        return self.dtypes

    def _typed(self) -> None:
        """Sets what depends on the dtypes, once they are known."""
        self.kinds = [False if self.dense_shape(j) is not None else None
                      for j in range(len(self.known_dtypes))]
        self.ranks = [None] * len(self.known_dtypes)
        self.accept, self.accept_owned = self._acceptance()

    def count(self) -> Optional[int]:
        for decl in (self.dtypes, self.names, self.shapes):
            if decl is not None:
                return len(decl)
        return None

    def label(self, i: int) -> str:
        return f"'{self.names[i]}'" if self.names is not None else str(i)

    def flatten(self, vals: Any, batched: bool) -> List[Any]:
        """The components of an element (or batch) given as a value, tuple, list or dict."""
        if self.names is not None:
            if type(vals) is dict and len(vals) == len(self.names):  # the common case, fast
                try:
                    return [vals[k] for k in self.names]
                except KeyError:
                    pass  # a wrong key: the checks below say which
            if not isinstance(vals, Mapping):
                raise InvalidArgumentError(
                    f"Queue '{self.queue}' has names {self.names}: enqueue a dict with exactly "
                    f"these keys, got {type(vals).__name__} (You must enqueue a dictionary in a "
                    f"Queue with names)")
            missing = [k for k in self.names if k not in vals]
            extra = [k for k in vals if k not in self.names]
            if missing or extra:
                raise InvalidArgumentError(
                    f"Queue '{self.queue}' expects keys {self.names}: missing {missing}, "
                    f"unexpected {extra} (Keys in dictionary to enqueue do not match names of "
                    f"Queue)")
            return [vals[k] for k in self.names]
        if isinstance(vals, Mapping):
            raise InvalidArgumentError(
                f"Queue '{self.queue}' has no names: enqueue a tuple of components, not a dict "
                f"(Queue must have names to enqueue a dictionary)")
        count = self.count()
        if count == 1:
            return [self._unwrap_single(vals, batched)]
        if not isinstance(vals, (list, tuple)) or isinstance(vals, SparseValue):
            if count is None:
                return [vals]
            raise InvalidArgumentError(
                f"Queue '{self.queue}' has {count} components: enqueue a tuple of {count} "
                f"values, got {type(vals).__name__}")
        if count is not None and len(vals) != count:
            raise InvalidArgumentError(
                f"Queue '{self.queue}' has {count} components, got {len(vals)} values")
        return list(vals)

    def _unwrap_single(self, vals: Any, batched: bool) -> Any:
        """A one-component queue takes the bare value, or the value wrapped in a 1-list/tuple.

        ``[x]`` is unwrapped unless it is itself a value of the declared rank (so ``[5]`` on a
        queue of shape ``[1]`` is the value ``[5]``).
        """
        if not isinstance(vals, (list, tuple)) or len(vals) != 1 or isinstance(vals, SparseValue):
            return vals
        shape = self.shapes[0] if self.shapes is not None else None
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

    def structure(self, values: List[Any]) -> Any:
        """The element (or batch) the user sees: a dict, a tuple, or a bare single value."""
        if self.names is not None:
            return dict(zip(self.names, values))
        if len(values) == 1:
            return values[0]
        return tuple(values)

    def bind(self, components: List[Any]) -> None:
        """Fixes the dtypes from the first element of a queue built with ``dtypes=None``."""
        with self.lock:
            if self.dtypes is None:
                self.dtypes = [_infer_dtype(value) for value in components]
                self._typed()
                self._on_bound()
            elif len(components) != len(self.dtypes):  # another thread bound it first
                raise InvalidArgumentError(
                    f"Queue '{self.queue}' has {len(self.dtypes)} components, got "
                    f"{len(components)} values")

    def is_sparse(self, i: int, value: Any) -> bool:
        """Whether component ``i`` holds SparseValues: fixed by its first value (always dense
        with a fully defined shape). Raises InvalidArgumentError, naming the component, for a
        value of the other kind."""
        kind = self.kinds[i]
        given = isinstance(value, SparseValue)
        if kind is None:
            with self.lock:
                if self.kinds[i] is None:
                    self.kinds[i] = given
                    self._on_kind(i)
                kind = self.kinds[i]
        if kind != given:
            raise InvalidArgumentError(
                f"Queue '{self.queue}' component {self.label(i)} holds "
                f"{'SparseValues' if kind else 'dense values'}"
                f"{'' if kind or self.dense_shape(i) is None else ' of a fixed shape'}: got "
                f"{'a SparseValue' if given else _short(value)}")
        return kind

    def _check_rank(self, i: int, rank: int) -> None:
        """Component ``i`` (of SparseValues) keeps the rank of its first value: a value of
        another rank could never be batched with it, so its enqueue fails, naming it."""
        self._check_ranks([(i, rank)])

    def _check_ranks(self, ranks: List[Tuple[int, int]]) -> None:
        """:meth:`_check_rank` of each ``(component, rank)``; the accept functions are made
        again once for all the ranks first seen (a wide schema's first batch has a hundred)."""
        if any(self.ranks[i] is None for i, _ in ranks):
            with self.lock:
                fresh = False
                for i, rank in ranks:
                    if self.ranks[i] is None:
                        self.ranks[i], fresh = rank, True
                if fresh:  # now they can take sparse values too
                    self.accept, self.accept_owned = self._acceptance()
        for i, rank in ranks:
            if rank != self.ranks[i]:
                raise InvalidArgumentError(
                    f"Queue '{self.queue}' component {self.label(i)}: cannot batch sparse "
                    f"values of ranks {sorted({rank, self.ranks[i] or 0})}")

    def _acceptance(self) -> Tuple[Optional[Callable[[Any], Optional[List[Any]]]],
                                   Optional[Callable[[Any], Optional[List[Any]]]]]:
        """Two functions of an element that return its components when every one is a value
        :meth:`convert` would return unchanged (a value of the component's exact scalar
        type, ``bytes`` for a string scalar, an ndarray of its dtype and shape, or a
        SparseValue of its dtype and rank), else None: ``accept`` returns the values,
        ``accept_owned`` what :meth:`staged` keeps of them. Both None
        when some component has no fixed shape and is not sparse (its values are copied,
        not kept), or is a string array. (A SparseValue of strings is taken too: its values,
        an object array, are kept as they are, as ``convert`` keeps them.)

        The functions are generated as one expression per component, as ``namedtuple``
        generates its class: they run for every element a grouping enqueue op stages, where
        a loop over per-component rules cost three times as much. Only indices enter their
        source; names, dtypes, shapes and ranks are passed in as values.
        """
        # (new_tuple: a SparseValue without its namedtuple's Python __new__)
        namespace: Dict[str, Any] = {"ndarray": np.ndarray, "SparseValue": SparseValue,
                                     "int64": np.dtype(np.int64), "new_tuple": tuple.__new__}
        checks, owned = [], []
        for i, dtype in enumerate(self.known_dtypes):
            shape = self.dense_shape(i)
            if self.ranks[i] is not None:  # as parsers make them
                namespace[f"dtype{i}"], namespace[f"rank{i}"] = dtype, self.ranks[i]
                # (each field read once, into i{i}, v{i}, d{i}: a namedtuple's field is a
                # call each time)
                owned.append(f"new_tuple(SparseValue, (i{i}.copy(), v{i}.copy(), "
                             f"d{i}.copy()))")
                checks.append(
                    f"(type(c{i}) is SparseValue and type(v{i} := c{i}.values) is ndarray "
                    f"and v{i}.dtype == dtype{i} and v{i}.ndim == 1 and "
                    f"type(i{i} := c{i}.indices) is ndarray and i{i}.dtype == int64 and "
                    f"type(d{i} := c{i}.dense_shape) is ndarray and d{i}.dtype == int64 "
                    f"and i{i}.shape == (len(v{i}), rank{i}) and d{i}.shape == (rank{i},))")
                continue
            if shape is None or (dtype.kind == "O" and shape != ()):
                return None, None
            namespace[f"dtype{i}"], namespace[f"shape{i}"] = dtype, shape
            if dtype.kind == "O":
                checks.append(f"type(c{i}) is bytes")
                owned.append(f"c{i}")
                continue
            array = (f"type(c{i}) is ndarray and (c{i}.dtype is dtype{i} or c{i}.dtype == "
                     f"dtype{i}) and c{i}.shape == shape{i}")
            owned.append(f"c{i}.tobytes()")
            if shape == () and dtype.isnative:
                namespace[f"scalar{i}"] = dtype.type
                array = f"type(c{i}) is scalar{i} or {array}"
                owned[-1] = f"c{i} if type(c{i}) is scalar{i} else c{i}.tobytes()"
            checks.append(f"({array})")
        count = len(self.known_dtypes)
        values = ", ".join(f"c{i}" for i in range(count))
        if self.names is not None:
            namespace.update((f"name{i}", name) for i, name in enumerate(self.names))
            take = (f"    if type(vals) is not dict or len(vals) != {count}:\n"
                    "        return None\n"
                    "    try:\n"
                    + "".join(f"        c{i} = vals[name{i}]\n" for i in range(count)) +
                    "    except KeyError:\n"
                    "        return None\n")
        elif count == 1:
            take = "    c0 = vals\n"  # a wrapped value ([x]) takes the general path
        else:
            take = (f"    if type(vals) is not tuple and type(vals) is not list "
                    f"or len(vals) != {count}:\n"
                    f"        return None\n"
                    f"    {values}, = vals\n")
        source = "".join(f"def {function}(vals):\n{take}"
                         f"    if {' and '.join(checks)}:\n"
                         f"        return [{returned}]\n"
                         f"    return None\n"
                         for function, returned in (("accept", values),
                                                    ("accept_owned", ", ".join(owned))))
        # Names, values and dtypes go into ``namespace``; the source holds only indices and
        # literal code, so nothing from data (a key, a value, a file) can enter it.
        exec(source, namespace)  # noqa: S102 - indices only: nothing from data enters it
        return namespace["accept"], namespace["accept_owned"]

    def dense_shape(self, i: int) -> Optional[Tuple[int, ...]]:
        shape = self.shapes[i] if self.shapes is not None else None
        if shape is None or None in shape:
            return None
        return cast(Tuple[int, ...], shape)

    def convert(self, i: int, value: Any, batched: bool) -> Any:
        """One component converted to its dtype and checked against its declared shape.

        Returns a NumPy array (with a leading batch axis when ``batched``), or ``bytes`` for a
        single string scalar; for a component of SparseValues, one (a batched one, which
        :meth:`batch` splits into elements together with the batch's other sparse ones).
        """
        dtype = self.known_dtypes[i]
        declared = self.shapes[i] if self.shapes is not None else None
        if type(value) is np.ndarray and value.dtype == dtype and dtype.kind != "O" \
                and (value.shape[1:] if batched and value.ndim else
                     None if batched else value.shape) == declared:
            return value  # the common case, as fast as it can be: nothing to convert
        if (declared is None or None in declared or isinstance(value, SparseValue)) \
                and self.is_sparse(i, value):
            what = f"Queue '{self.queue}' component {self.label(i)}"
            value = sparse.as_sparse(value, dtype, what)
            if not batched:
                self._check_rank(i, len(value.dense_shape))
            return value
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
                    f"Queue '{self.queue}' component {self.label(i)}: enqueue_many needs a "
                    f"leading batch axis, got a scalar")
            ok = _shape_ok(shape[1:], declared)
        else:
            ok = _shape_ok(shape, declared)
        if not ok:
            what = "element shape" if batched else "shape"
            got = shape[1:] if batched else shape
            # TF's words name the whole batch's shapes for enqueue_many.
            tf_expected = (shape[0],) + tuple(declared or ()) if batched else declared
            raise InvalidArgumentError(
                f"Queue '{self.queue}' component {self.label(i)}: expected shape "
                f"{fmt_shape(declared)}, got {what} {fmt_shape(got)} (Shape mismatch in "
                f"tuple component {i}. Expected {fmt_shape(tf_expected, ',')}, got "
                f"{fmt_shape(shape, ',')})")
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
            raise DtypeError(
                f"Queue '{self.queue}' component {self.label(i)}: expected dtype {dtype}, "
                f"got {_short(value)} ({e})") from None
        return arr

    def _convert_strings(self, i: int, value: Any) -> Any:
        if isinstance(value, bytes):
            return value
        if isinstance(value, str):
            return value.encode("utf-8")
        if type(value) is np.ndarray and value.dtype.kind == "O" and value.ndim and value.size \
                and value.flags.c_contiguous and all_exact_bytes(value.reshape(-1)):
            return value  # bytes already, as readers and parsers make them: one C loop
        try:
            arr = np.array(value, dtype=object)
        except ValueError as e:
            raise InvalidArgumentError(
                f"Queue '{self.queue}' component {self.label(i)}: expected dtype string "
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
                    f"Queue '{self.queue}' component {self.label(i)}: expected dtype string "
                    f"(bytes), got {_short(item)}")
        return arr[()] if arr.ndim == 0 else arr

    def element(self, vals: Any) -> List[Any]:
        """The components of one element, converted and checked as the columns store them."""
        accept = self.accept
        if accept is not None:
            components = accept(vals)
            if components is not None:
                return components  # the common case: every value already as stored
        components = self.flatten(vals, batched=False)
        if self.dtypes is None:
            self.bind(components)
        values = [self.convert(i, v, batched=False) for i, v in enumerate(components)]
        for i, value in enumerate(values):
            if self.dense_shape(i) is None and type(value) is np.ndarray:
                values[i] = value.copy()  # stored by reference: do not alias the caller's array
        return values

    def staged(self, vals: Any) -> List[Any]:
        """:meth:`element`, owning its values: for an element that waits on a stage for its
        put while its producer runs again. A producer may fill and return one reused array
        (a common speed idiom); ``enqueue`` copies into the columns at once, as TF does, and a
        stage must not keep a reference either. A numeric array of fixed shape is kept as its
        bytes (what a column's ``stack`` joins): ``tobytes`` copies with the GIL held, where
        NumPy's ``copy`` of more than 500 items lets go of it, and with two runner threads
        that is a hand-over of the GIL per element (a 784-byte image)."""
        accept_owned = self.accept_owned
        if accept_owned is not None:
            values = accept_owned(vals)
            if values is not None:
                return values  # the common case: every value as stored, its arrays copied
        values = self.element(vals)
        for i, value in enumerate(values):
            if type(value) is np.ndarray:
                if self.dense_shape(i) is not None:  # (element() copied the others)
                    values[i] = value.copy() if value.dtype.kind == "O" else value.tobytes()
            elif type(value) is SparseValue:
                values[i] = SparseValue(value.indices.copy(), value.values.copy(),
                                        value.dense_shape.copy())
        return values

    def batch(self, vals: Any) -> Tuple[List[Any], int]:
        components = self.flatten(vals, batched=True)
        if self.dtypes is None:
            self.bind(components)
        batch = [self.convert(i, v, batched=True) for i, v in enumerate(components)]
        lists = [i for i, value in enumerate(batch) if type(value) is SparseValue]
        if lists:
            whats = [f"Queue '{self.queue}' component {self.label(i)}" for i in lists]
            for i, rows in zip(lists, sparse.split_all([batch[i] for i in lists], whats)):
                batch[i] = rows
        self._check_ranks([(i, batch[i].shapes.shape[1]) for i in lists])
        sizes = {len(b) for b in batch}
        if len(sizes) > 1:
            raise InvalidArgumentError(
                f"Queue '{self.queue}': enqueue_many components disagree on the batch size: "
                f"{[len(b) for b in batch]}")
        n = sizes.pop() if sizes else 0
        for i in range(len(batch)):
            if self.dense_shape(i) is None and not (self.kinds and self.kinds[i]):
                batch[i] = _per_element(batch[i])  # (sparse ones are Rows already)
        return batch, n

    def output_one(self, values: List[Any]) -> Any:
        for i, value in enumerate(values):
            if isinstance(value, np.ndarray):
                values[i] = value[()] if value.ndim == 0 else value
        return self.structure(values)


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
