"""The arguments of the batching functions, checked as TF checks them, and the structure of
the elements they batch (fixed by the first element, restored on every batch)."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Mapping, Optional, Sequence

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe import sparse
from queuepipe._elements import unique_name
from queuepipe.errors import InvalidArgumentError
from queuepipe.sparse import SparseValue


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
        # dict, the element's tuple or list type (a namedtuple's too), or object for a bare
        # value
        self._kind: Optional[type] = None
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
        elif isinstance(element, (tuple, list)):
            kind = type(element)
        else:
            return object
        if not element:
            raise InvalidArgumentError(
                f"the producer returned an empty element {element!r}: it must return at least "
                f"one component")
        return kind

    def restore(self, batch: Any) -> Any:
        """A batch as the queue returned it, in the element's form."""
        if self._kind is None or self._kind is dict or self._kind is object:
            return batch
        # One component comes back bare (a SparseValue too, though a namedtuple).
        single = not isinstance(batch, tuple) or isinstance(batch, SparseValue)
        return sequence_of(self._kind, [batch] if single else batch)

    def commit(self, now: bool = True) -> None:
        """The batches restored reached their callers (a hook for a structure that keeps a
        state, called before the next batch, and before a state is taken with ``now``: the
        structure may report a few batches together, but all of them before a state)."""

    def withhold(self) -> None:
        """The batch restored last on this thread never reached its caller (a hook)."""


def sequence_of(kind: type, items: Sequence[Any]) -> Any:
    """``items`` in a sequence of type ``kind``, a tuple or list type: a namedtuple takes
    them as its fields."""
    make = getattr(kind, "_make", None)  # a namedtuple's
    return make(items) if make is not None else kind(items)


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
