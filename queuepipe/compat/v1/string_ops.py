"""TF1's string ops of input code: ``tf.string_split``, ``tf.string_join`` and
``tf.strings``' ``split``, ``length``, ``join`` (``to_number`` is :mod:`ops`'
``string_to_number``), each as TF computes it on ``bytes``; a split gives one sparse value
(row, position) of pieces, as ``compat.v1``'s splits give a SparseTensor.
"""

from __future__ import annotations

import builtins
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.compat.v1.graph import Tensor, as_node
from queuepipe.compat.v1.ops import constant_value
from queuepipe.errors import InvalidArgumentError
from queuepipe.sparse import SparseValue

__all__ = ["string_split", "string_join", "strings_split", "string_length"]


def _split_rows(rows: Any, split: Callable[[bytes], List[bytes]], what: str) -> SparseValue:
    """The pieces ``split`` makes of each string of the 1-D ``rows``, as one SparseValue
    (row, position), as TF's string splits give them."""
    strings = constant_value(rows, _dtypes.string)
    if strings.ndim != 1:
        raise InvalidArgumentError(f"{what}: input must be a vector of strings, got shape "
                                   f"{strings.shape}")
    pieces = [split(text) for text in strings.tolist()]
    indices = [[i, j] for i, row in enumerate(pieces) for j in builtins.range(len(row))]
    values = np.empty(sum(map(len, pieces)), dtype=object)
    values[:] = [piece for row in pieces for piece in row]
    width = max(map(len, pieces), default=0)
    return SparseValue(np.array(indices, dtype=np.int64).reshape(-1, 2), values,
                       np.array([len(pieces), width], dtype=np.int64))


def string_split(source: Any, delimiter: Any = " ", skip_empty: bool = True) -> Tensor:
    """``tf.string_split``: each string of the vector ``source`` split at any one of the
    characters of ``delimiter`` (into characters if it is empty), empty pieces dropped unless
    ``skip_empty`` is False; one sparse value of strings."""
    marks = delimiter.encode() if isinstance(delimiter, str) else bytes(delimiter)

    def split(text: bytes) -> List[bytes]:
        if not marks:
            return [text[i:i + 1] for i in builtins.range(len(text))]
        pieces, start = [], 0
        for i, byte in enumerate(text):
            if byte in marks:
                pieces.append(text[start:i])
                start = i + 1
        pieces.append(text[start:])
        return [p for p in pieces if p or not skip_empty] if text else []
    node = as_node(source)
    if node._shape is not None and node._shape.ndims not in (None, 1):
        raise ValueError(f"Shape must be rank 1 but is rank {node._shape.ndims} for "
                         f"tf.string_split's source")
    return Tensor(lambda v: _split_rows(v, split, "string_split"), [node], name="StringSplit",
                  dtype=_dtypes.string)


def strings_split(input: Any, sep: Any = None, maxsplit: int = -1,  # noqa: A002
                  result_type: str = "SparseTensor", source: Any = None,
                  name: Optional[str] = None) -> Tensor:
    """``tf.strings.split`` of ``compat.v1``: Python's ``bytes.split`` of each string (runs of
    whitespace when ``sep`` is None), as one sparse value."""
    marker = sep.encode() if isinstance(sep, str) else sep
    limit = -1 if maxsplit is None else int(maxsplit)
    return Tensor(lambda v: _split_rows(v, lambda t: t.split(marker, limit), "strings.split"),
                  [input if source is None else source], name=name or "StringSplit",
                  dtype=_dtypes.string)


def string_length(input: Any, name: Optional[str] = None,  # noqa: A002
                  unit: str = "BYTE") -> Tensor:
    """``tf.strings.length``: bytes per string, int32."""
    def lengths(v: Any) -> Any:
        out = np.vectorize(len, otypes=[np.int32])(constant_value(v, _dtypes.string))
        return out[()] if out.ndim == 0 else out
    node = as_node(input)
    return Tensor(lengths, [node], name=name or "StringLength", shape=node._shape,
                  dtype=_dtypes.int32)


def string_join(inputs: Sequence[Any], separator: str = "",
                name: Optional[str] = None) -> Tensor:
    """``tf.strings.join``: the inputs joined element by element (broadcast), with
    ``separator`` between."""
    glue = separator.encode() if isinstance(separator, str) else separator

    def join(*values: Any) -> Any:
        arrays = np.broadcast_arrays(*(constant_value(v, _dtypes.string) for v in values))
        out = np.empty(arrays[0].shape, dtype=object)
        for index in np.ndindex(out.shape):
            out[index] = glue.join([bytes(a[index]) for a in arrays])
        return out[()] if out.ndim == 0 else out
    return Tensor(join, list(inputs), name=name or "StringJoin", dtype=_dtypes.string)
