"""TF1's static shapes: what a Tensor is known to be at graph-build time.

A :class:`TensorShape` is a list of dimensions, each an ``int`` or ``None`` (unknown), or an
unknown rank. It behaves as TF 2.21's ``tf.compat.v1`` TensorShape does (the v2 behaviour:
``shape[i]`` is an ``int`` or ``None``, not a ``Dimension``)::

    image = tf.decode_raw(value, tf.uint8)   # TensorShape([None])
    image.set_shape([784])                   # TensorShape([784]): merged, checked
    image.set_shape([2, 3])                  # ValueError, at build time, as in TF

``tf.train.batch`` reads these shapes: without ``dynamic_pad`` every component must be fully
defined, as TF requires when the graph is built.
"""

from __future__ import annotations

from typing import Any, List, Optional

__all__ = ["TensorShape", "as_shape", "unknown_shape"]


class TensorShape:
    """A static shape: ``dims`` is a list of ``int``/``None``, or None for an unknown rank."""

    def __init__(self, dims: Any):
        if dims is None:
            self._dims: Optional[List[Optional[int]]] = None
        elif isinstance(dims, TensorShape):
            self._dims = None if dims._dims is None else list(dims._dims)
        else:
            self._dims = [None if d is None else _dimension(d) for d in dims]

    @property
    def dims(self) -> Optional[List[Optional[int]]]:
        return None if self._dims is None else list(self._dims)

    @property
    def ndims(self) -> Optional[int]:
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def as_list(self) -> List[Optional[int]]:
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d is not None for d in self._dims)

    def num_elements(self) -> Optional[int]:
        if not self.is_fully_defined():
            return None
        total = 1
        for d in self._dims or ():
            total *= d  # type: ignore[operator]
        return total

    def is_compatible_with(self, other: Any) -> bool:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        return len(self._dims) == len(other._dims) and all(
            a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other: Any) -> "TensorShape":
        """The shape both describe; ValueError with TF's words when they contradict."""
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if len(self._dims) != len(other._dims):
            raise ValueError(f"Shapes must be equal rank, but are {len(self._dims)} and "
                             f"{len(other._dims)}")
        merged = []
        for i, (a, b) in enumerate(zip(self._dims, other._dims)):
            if a is not None and b is not None and a != b:
                raise ValueError(f"Dimension {i} in both shapes must be equal, but are {a} and "
                                 f"{b}. Shapes are {self._text()} and {other._text()}.")
            merged.append(a if a is not None else b)
        return TensorShape(merged)

    def concatenate(self, other: Any) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other._dims)

    def _text(self) -> str:
        return "[" + ",".join("?" if d is None else str(d) for d in self._dims or ()) + "]"

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            return TensorShape(None) if isinstance(key, slice) else None
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __eq__(self, other: Any) -> bool:
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self) -> int:
        return hash(None if self._dims is None else tuple(self._dims))

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._dims is None else f"TensorShape({self._dims})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        inner = ", ".join(str(d) for d in self._dims)
        return f"({inner},)" if len(self._dims) == 1 else f"({inner})"


def _dimension(value: Any) -> int:
    try:
        dim = int(value)
    except (TypeError, ValueError):
        raise TypeError(f"a shape's dimension must be an int or None, got {value!r}") from None
    if dim < 0:
        raise ValueError(f"Dimension {dim} must be >= 0")
    return dim


def as_shape(shape: Any) -> TensorShape:
    """``shape`` as a TensorShape (a TensorShape, a list of ints/None, an int, or None)."""
    if isinstance(shape, TensorShape):
        return shape
    if isinstance(shape, (int,)) and not isinstance(shape, bool):
        return TensorShape([shape])
    if shape is None:
        return TensorShape(None)
    return TensorShape(list(shape))


def unknown_shape(rank: Optional[int] = None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)

