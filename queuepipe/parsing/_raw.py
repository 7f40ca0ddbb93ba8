"""``decode_raw``: the bytes of each string as a vector of numbers."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing._items import join_equal
from queuepipe.parsing._specs import _MAX_CACHED, _frombuffer


# (out_type, little_endian) -> (dtype, dtype as stored): a per-record decode_raw skips the work.
_DECODE_TYPES: Dict[Tuple[Any, bool], Tuple[np.dtype, np.dtype]] = {}
# out_type -> dtype, for the types whose little-endian bytes are read as they are stored (every
# type on a little-endian machine): the one lookup a per-record decode_raw makes.
_AS_STORED: Dict[Any, np.dtype] = {}


# Never changed: `_NO_BYTES + data` is a writable copy of bytes ``data``, made by one
# concatenation (a third of the instructions of ``bytearray(data)``, which parses its
# arguments as keywords and resizes).
_NO_BYTES = bytearray()

# TF's names of the types NumPy names otherwise, for TF's words in errors.
_TF_WORDS = {np.dtype(np.float16): "half", np.dtype(np.float32): "float",
             np.dtype(np.float64): "double"}


def _tf_word(dtype):
    return _TF_WORDS.get(dtype, str(dtype))


def _decode_types(out_type, little_endian):
    """The dtype decode_raw returns and the byte order it reads, or TypeError."""
    try:
        return _DECODE_TYPES[out_type, bool(little_endian)]
    except (KeyError, TypeError):  # TypeError: an unhashable out_type
        pass
    dtype = _dtypes.as_dtype(out_type)
    if dtype == _dtypes.string or dtype.kind not in "biufc":
        raise TypeError(f"decode_raw: out_type must be numeric, got {out_type!r}")
    types = (dtype, dtype.newbyteorder("<" if little_endian else ">"))
    try:
        if len(_DECODE_TYPES) < _MAX_CACHED:
            _DECODE_TYPES[out_type, bool(little_endian)] = types
            if little_endian and types[1] == dtype:
                _AS_STORED[out_type] = dtype
    except TypeError:
        pass
    return types


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True,
               fixed_length: Optional[int] = None) -> np.ndarray:
    """Reinterprets the bytes of each string as a vector of numbers, as ``tf.io.decode_raw``.

    Args:
      input_bytes: ``bytes``, or an array/list of bytes of any shape (a parsed string
        feature). All of its elements must have the same length. A ``str`` is taken as its
        UTF-8 bytes, as TF takes a Python string.
      out_type: a numeric dtype (``qp.uint8``, ``qp.float32``, ...).
      little_endian: whether multi-byte values are stored little-endian (as TF writes them).
      fixed_length: if given, each string is cut or zero-padded to this many bytes first; it
        must be a multiple of the size of ``out_type``.

    Returns:
      An array of ``out_type`` with the input's shape plus one axis of ``len // itemsize``
      values.

    Raises:
      InvalidArgumentError: a string's length is not a multiple of the type's size, or the
        strings differ in length (the message names the element and both lengths).
      TypeError: ``out_type`` is not numeric, or an element is not bytes.
    """
    if type(input_bytes) is bytes and fixed_length is None and little_endian is True:
        try:  # one record of a type read as stored: the pipeline's call, kept lean
            dtype = _AS_STORED[out_type]
        except (KeyError, TypeError):
            pass
        else:
            if len(input_bytes) % dtype.itemsize == 0:
                # copied as a bytearray (NumPy's own copy would release the GIL)
                return _frombuffer(_NO_BYTES + input_bytes, dtype)
    dtype, wire = _decode_types(out_type, little_endian)
    if type(input_bytes) is bytes and fixed_length is None:  # one record: no joins, no loops
        if len(input_bytes) % dtype.itemsize:
            raise InvalidArgumentError(
                f"Input to DecodeRaw has length {len(input_bytes)} that is not a multiple of "
                f"{dtype.itemsize}, the size of {_tf_word(dtype)}")
        if wire == dtype:
            return _frombuffer(_NO_BYTES + input_bytes, dtype)
        return np.frombuffer(input_bytes, dtype=wire).astype(dtype, copy=True)
    scalar = isinstance(input_bytes, (bytes, bytearray, memoryview, str))
    if not scalar and fixed_length is None:  # a batch of bytes of one length: one C pass
        flat: Any = None
        shape: Tuple[int, ...] = ()
        if type(input_bytes) is list:
            flat, shape = input_bytes, (len(input_bytes),)
        elif type(input_bytes) is np.ndarray and input_bytes.dtype == object:
            flat, shape = input_bytes.ravel(), input_bytes.shape
        joined = join_equal(flat) if flat is not None and len(flat) else None
        if joined is not None:
            return _decoded(joined, len(joined) // len(flat), dtype, wire, shape)
    if scalar:
        items, shape = [input_bytes], ()
    else:
        array = np.asarray(input_bytes, dtype=object)
        items, shape = array.ravel().tolist(), array.shape
    if not set(map(type, items)) <= {bytes}:
        for index, item in enumerate(items):
            if isinstance(item, str):  # as TF takes a Python string: its UTF-8 bytes
                items[index] = item.encode("utf-8")
            elif isinstance(item, (bytearray, memoryview)):
                items[index] = bytes(item)
            elif not isinstance(item, bytes):
                raise TypeError(f"decode_raw: element {index} is {type(item).__name__}, "
                                f"not bytes")
    if fixed_length is not None:
        if isinstance(fixed_length, bool) or not isinstance(fixed_length, (int, np.integer)) \
                or fixed_length <= 0:
            raise InvalidArgumentError(f"fixed_length must be a positive int, as TF requires, "
                                       f"got {fixed_length!r}")
        if fixed_length % dtype.itemsize:
            raise InvalidArgumentError(
                f"fixed_length ({fixed_length}) must be a multiple of the size of out_type "
                f"({dtype.itemsize} bytes for {dtype})")
        items = [bytes(item[:fixed_length]).ljust(fixed_length, b"\0") for item in items]
    length = len(items[0]) if items else (fixed_length or 0)  # no input: TF's [0, n] shape
    lengths = np.fromiter(map(len, items), dtype=np.intp, count=len(items))
    if (lengths != length).any():
        index = int(np.flatnonzero(lengths != length)[0])
        raise InvalidArgumentError(
            f"DecodeRaw requires input strings to all be the same size, but element "
            f"{index} has size {length} != {lengths[index]} (TF's words: element 0 has "
            f"{length} bytes, element {index} {lengths[index]})")
    return _decoded(bytearray().join(items), length, dtype, wire, shape)


def _decoded(joined, length, dtype, wire, shape):
    """The strings of ``length`` bytes each, ``joined`` in a bytearray, decoded as ``dtype``
    stored as ``wire``: an array of ``shape`` plus one axis; or TF's error when the length is
    not a multiple of the type's size."""
    if length % dtype.itemsize:
        raise InvalidArgumentError(
            f"Input to DecodeRaw has length {length} that is not a multiple of "
            f"{dtype.itemsize}, the size of {_tf_word(dtype)}")
    if wire == dtype:  # a bytearray: the array owns writable memory, no copy
        values = _frombuffer(joined, dtype)
    else:
        values = np.frombuffer(joined, dtype=wire).astype(dtype, copy=True)
    return values.reshape(shape + (length // dtype.itemsize,))
