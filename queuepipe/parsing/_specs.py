"""Feature specs (:class:`FixedLenFeature`, :class:`VarLenFeature`,
:class:`FixedLenSequenceFeature`) and their normalized form, :class:`_Feature`, which every
parser reads: the dtype's list in a Feature, the shape, the default, TF's names for both."""

from __future__ import annotations

import collections
from typing import Mapping

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.protos import _layout


# TF's DataTypeString for the three dtypes an Example holds, and each one's list in a Feature.
_TF_NAME = {_dtypes.int64: "int64", _dtypes.float32: "float", _dtypes.string: "string"}
_LIST = {_dtypes.int64: "int64_list", _dtypes.float32: "float_list",
         _dtypes.string: "bytes_list"}
_LIST_TF_NAME = {"int64_list": "int64", "float_list": "float", "bytes_list": "string"}
_LIST_TAG = {name: tag for tag, name in _layout._LIST_NAMES.items()}  # in a Feature
_VALUES_WORD = {_dtypes.int64: "int64", _dtypes.float32: "float", _dtypes.string: "bytes"}
_frombuffer = np.frombuffer  # called with positional arguments: keywords cost NumPy a third more
# The most entries each of parsing's caches (layouts, specs, single-record parsers, decode_raw's
# types) keeps; a full cache is emptied.
_MAX_CACHED = 256


# --- Feature specs --------------------------------------------------------------------------

def _spec_dtype(dtype, spec_name):
    """The NumPy dtype of a spec's ``dtype``; ValueError quoting it unless int64/float32/string."""
    try:
        resolved = _dtypes.as_dtype(dtype)
    except TypeError:
        resolved = None
    if resolved not in _TF_NAME:
        raise ValueError(f"{spec_name}: unsupported dtype {dtype!r}; an Example holds only "
                         f"int64, float32 and string (convert after parsing)")
    return resolved


_INT64 = np.iinfo(np.int64)


def _check_default(default_value, dtype, spec_name):
    """Refuses a ``default_value`` whose items are not of the spec's dtype, quoting it.

    NumPy would convert 3 to ``b"\\x00\\x00\\x00"`` for a string feature and 1.5 to 1 for an
    int64 one, silently; and "abc" or 2**70 would fail only at parse time, in a runner.
    """
    if default_value is None:
        return
    try:
        items = np.asarray(default_value, dtype=object).ravel().tolist()
    except ValueError:  # a ragged nesting: its size is wrong anyway, and reported later
        return
    resolved = _dtypes.as_dtype(dtype)
    for item in items:
        if resolved == _dtypes.string:
            ok = isinstance(item, (bytes, str))
        elif resolved == np.int64:
            ok = (isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))
                  and _INT64.min <= item <= _INT64.max)
        else:
            ok = isinstance(item, (int, float, np.integer, np.floating)) \
                and not isinstance(item, (bool, np.bool_))
        if not ok:
            raise ValueError(f"{spec_name}: default_value {default_value!r} does not fit dtype "
                             f"{_TF_NAME[resolved]}: {item!r} is not "
                             f"{_DEFAULT_ITEM[_TF_NAME[resolved]]}")


_DEFAULT_ITEM = {"string": "bytes or str", "int64": "an integer in int64's range",
                 "float": "a number"}


def _spec_shape(shape, spec_name):
    """``shape`` as a tuple of ints (a bare int ``n`` is ``[n]``, as TF reads it)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        dims = tuple(int(dim) for dim in shape)
    except (TypeError, ValueError):
        dims = None
    if dims is None or any(dim < 0 for dim in dims):
        raise ValueError(f"{spec_name}: shape must be a fully defined list of non-negative "
                         f"ints, got {shape!r}")
    return dims


class FixedLenFeature(collections.namedtuple(
        "FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature with a fixed number of values, parsed into a dense array of ``shape``.

    Attributes:
      shape: the shape of one record's value (``[]`` for a scalar), kept as a tuple.
      dtype: ``qp.int64``, ``qp.float32`` or ``qp.string`` (or a NumPy dtype or name of one).
      default_value: used when a record lacks the feature; ``None`` makes it required. It must
        have ``prod(shape)`` elements (a scalar for ``shape=[]``) of the feature's dtype.

    Raises:
      ValueError: ``dtype`` is not int64, float32 or string, ``shape`` is not fully defined,
        or ``default_value`` holds an item of another type (3 for a string, 1.5 or 2**70 for
        an int64, "abc" for a float).
    """

    __slots__ = ()

    def __new__(cls, shape, dtype, default_value=None):
        shape = _spec_shape(shape, "FixedLenFeature")
        _spec_dtype(dtype, "FixedLenFeature")
        _check_default(default_value, dtype, "FixedLenFeature")
        return super().__new__(cls, shape, dtype, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature with any number of values, parsed into a :class:`SparseValue`.

    Raises:
      ValueError: ``dtype`` is not int64, float32 or string.
    """

    __slots__ = ()

    def __new__(cls, dtype):
        _spec_dtype(dtype, "VarLenFeature")
        return super().__new__(cls, dtype)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
    """A feature holding any number of rows of ``shape``, parsed into ``[rows, *shape]``.

    In a SequenceExample's feature lists each step is one row. In ``parse_example`` the values
    of an Example's feature are split into rows, ``allow_missing`` must be ``True``, and the
    batch is padded to its longest record with ``default_value`` (``0`` or ``b""`` if None).

    Raises:
      ValueError: ``dtype`` is not int64, float32 or string, or ``shape`` is not fully defined.
    """

    __slots__ = ()

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        shape = _spec_shape(shape, "FixedLenSequenceFeature")
        _spec_dtype(dtype, "FixedLenSequenceFeature")
        _check_default(default_value, dtype, "FixedLenSequenceFeature")
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class SparseFeature(collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"])):
    """A sparse tensor built from an index feature (or several) and a value feature, as TF1's
    ``tf.io.SparseFeature``.

    Each record's ``value_key`` feature holds the values and each ``index_key`` feature the
    index of every value along one dimension; the output is a :class:`SparseValue` with
    indices ``[row, index...]`` (``[index...]`` from ``parse_single_example``), dense shape
    ``[batch, *size]``, sorted by index unless ``already_sorted``.

    Attributes:
      index_key: the int64 feature holding the indices (a list of them for several
        dimensions).
      value_key: the feature holding the values.
      dtype: ``qp.int64``, ``qp.float32`` or ``qp.string``: the values' type.
      size: the dense size of the dimension (a list, one per index key).
      already_sorted: whether the indices are sorted in each record (no sort is done).

    Raises:
      ValueError: a key is not a string, ``dtype`` is not int64, float32 or string, or
        ``size`` does not give one non-negative size per index key.
    """

    __slots__ = ()

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        keys = [index_key] if isinstance(index_key, str) else list(index_key)
        if not keys or not all(isinstance(key, str) for key in keys) \
                or not isinstance(value_key, str):
            raise ValueError(f"SparseFeature: index_key must be a feature key or a list of "
                             f"them and value_key a feature key, got {index_key!r} and "
                             f"{value_key!r}")
        _spec_dtype(dtype, "SparseFeature")
        sizes = _spec_shape(size, "SparseFeature")
        if len(sizes) != len(keys):
            raise ValueError(f"sp_ids and vocab_size have to have equal lengths. "
                             f"(SparseFeature: {len(keys)} index keys, size {size!r})")
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)

    @property
    def index_keys(self):
        return [self.index_key] if isinstance(self.index_key, str) else list(self.index_key)

    @property
    def sizes(self):
        return _spec_shape(self.size, "SparseFeature")


# --- Normalized specs -----------------------------------------------------------------------

_FIXED, _VAR, _SEQ = "fixed", "var", "seq"


class _Feature:
    """One requested feature, normalized: what the parsers and the output sinks need."""

    __slots__ = ("key", "kind", "dtype", "list_name", "shape", "size", "default", "pad")

    def __init__(self, key, spec, allowed):
        if not isinstance(spec, allowed):
            raise TypeError(f"feature {key!r}: expected one of "
                            f"{', '.join(c.__name__ for c in allowed)}, got {spec!r}")
        self.key = key
        self.dtype = _spec_dtype(spec.dtype, type(spec).__name__)
        self.list_name = _LIST[self.dtype]
        self.default = self.pad = None
        if isinstance(spec, VarLenFeature):
            self.kind, self.shape, self.size = _VAR, (), 1
            return
        self.shape = _spec_shape(spec.shape, type(spec).__name__)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        if isinstance(spec, FixedLenFeature):
            self.kind = _FIXED
            if spec.default_value is not None:
                default = self._array(spec.default_value)
                if default.size != self.size:
                    raise ValueError(
                        f"feature {key!r}: default_value {spec.default_value!r} has "
                        f"{default.size} elements but shape {list(self.shape)} needs {self.size}")
                # An empty default (a feature of no elements) leaves the feature required, as
                # TF reads an empty default tensor.
                self.default = default.reshape(self.size) if self.size else None
        else:
            self.kind = _SEQ
            pad = b"" if self.dtype == _dtypes.string else 0
            if spec.default_value is not None:
                pad = self._array(spec.default_value)
                if pad.size != 1:
                    raise ValueError(f"feature {key!r}: a FixedLenSequenceFeature's "
                                     f"default_value pads rows and must be a scalar, got "
                                     f"{spec.default_value!r}")
                pad = pad.item()
            self.pad = pad

    def _array(self, value):
        """``value`` as a flat array of this feature's dtype (str encoded as UTF-8)."""
        if self.dtype == _dtypes.string:
            items = np.asarray(value, dtype=object).ravel().tolist()
            out = np.empty(len(items), dtype=object)
            out[:] = [item.encode("utf-8") if isinstance(item, str) else bytes(item)
                      for item in items]
            return out
        return np.asarray(value, dtype=self.dtype).ravel()

    @property
    def tf_dtype(self):
        return _TF_NAME[self.dtype]

    @property
    def shape_text(self):
        """The shape as TF's ``TensorShape::DebugString`` writes it: ``[2,2]``, ``[]``."""
        return "[" + ",".join(str(dim) for dim in self.shape) + "]"

    def values(self, container):
        """A protobuf repeated container as a 1-D array (object of bytes for strings)."""
        if self.dtype == _dtypes.string:
            out = np.empty(len(container), dtype=object)
            out[:] = list(container)
            return out
        return np.array(container, dtype=self.dtype)


def _features(features, allowed, what):
    if not isinstance(features, Mapping):
        raise TypeError(f"{what} must be a dict of feature key -> spec, got {features!r:.80}")
    return [_Feature(key, spec, allowed) for key, spec in features.items()]
