"""Parsing serialized Examples and SequenceExamples into NumPy arrays, as TF's parsing ops do.

A feature spec maps each feature key to :class:`FixedLenFeature` (a dense array of a fixed
shape), :class:`VarLenFeature` (a :class:`SparseValue`) or :class:`FixedLenSequenceFeature`
(rows of a fixed shape, as many as the record holds). The outputs, the defaults and the errors
are TensorFlow's (checked against TF 2.21): a missing required feature, a wrong data type or
a wrong number of values raises :class:`~queuepipe.errors.InvalidArgumentError` with TF's
words, naming the feature key, the record's index in the batch and its name (``Name:``), which
readers make ``b"<file>:<offset>"``. Strings come out as ``bytes`` (object arrays of bytes).

Usage::

    spec = {"image": qp.FixedLenFeature([], qp.string),
            "label": qp.FixedLenFeature([], qp.int64)}
    keys, records = reader.read_up_to(filename_queue, 128)
    batch = qp.parse_example(records, spec, example_names=keys)
    images = qp.decode_raw(batch["image"], qp.uint8)  # [128, 784]

``parse_example`` is the bulk path. Records in a batch usually share one layout: the same
features with values of the same sizes. It groups records by length, walks one of them (the
template) to find where each value lies, checks with NumPy that every other record's bytes
outside the values equal the template's, and decodes the values of the whole group at once
(see :mod:`queuepipe.protos._layout`). Records that differ are parsed one by one with
protobuf. Both paths give identical results; errors are always reported by the per-record
path, so they are the same whichever path saw the record first.

``decode_raw`` and ``decode_csv`` turn the parsed bytes into numbers.
"""

from __future__ import annotations

import collections
import decimal
import re
import types
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.errors import InvalidArgumentError
from queuepipe.protos import _layout, _ragged, _wire
from queuepipe.sparse import SparseValue, segments

__all__ = ["FixedLenFeature", "VarLenFeature", "FixedLenSequenceFeature", "SparseValue",
           "parse_single_example", "parse_example", "parse_single_sequence_example",
           "decode_raw", "decode_csv"]

# TF's DataTypeString for the three dtypes an Example holds, and each one's list in a Feature.
_TF_NAME = {_dtypes.int64: "int64", _dtypes.float32: "float", _dtypes.string: "string"}
_LIST = {_dtypes.int64: "int64_list", _dtypes.float32: "float_list",
         _dtypes.string: "bytes_list"}
_LIST_TF_NAME = {"int64_list": "int64", "float_list": "float", "bytes_list": "string"}
_LIST_TAG = {name: tag for tag, name in _layout._LIST_NAMES.items()}  # in a Feature
_VALUES_WORD = {_dtypes.int64: "int64", _dtypes.float32: "float", _dtypes.string: "bytes"}
_LITTLE_FLOAT32 = np.dtype("<f4")  # how a float_list stores its values
_frombuffer = np.frombuffer  # called with positional arguments: keywords cost NumPy a third more


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


# --- Output sinks: one per feature per batch --------------------------------------------------

class _DenseOut:
    """A FixedLenFeature's ``[batch, *shape]`` output, filled row by row or block by block."""

    def __init__(self, feature, batch):
        self.feature = feature
        self.out = np.empty((batch, feature.size), dtype=feature.dtype)

    def put(self, index, values):
        self.out[index] = values

    def put_block(self, rows, block):
        self.out[rows] = block

    def finish(self):
        return self.out.reshape((len(self.out),) + self.feature.shape)


class _RaggedOut:
    """A VarLenFeature's or FixedLenSequenceFeature's output: a different count per record."""

    def __init__(self, feature, batch):
        self.feature = feature
        self.counts = np.zeros(batch, dtype=np.int64)
        self.singles = []  # (index, 1-D values)
        self.blocks = []  # (rows, [len(rows), n] values)
        self.raggeds = []  # (rows, their counts, their values one after the other)

    def put(self, index, values):
        self.counts[index] = len(values)
        if len(values):
            self.singles.append((index, values))

    def put_block(self, rows, block):
        self.counts[rows] = block.shape[1]
        if block.shape[1]:
            self.blocks.append((rows, block))

    def put_ragged(self, rows, counts, values):
        self.counts[rows] = counts
        if len(values):
            self.raggeds.append((rows, counts, values))

    def finish(self):
        return self._sparse() if self.feature.kind == _VAR else self._padded()

    def _sparse(self):
        batch, counts = len(self.counts), self.counts
        starts = np.cumsum(counts) - counts
        total = int(counts.sum())
        row_ids = np.repeat(np.arange(batch, dtype=np.int64), counts)
        columns = np.arange(total, dtype=np.int64) - np.repeat(starts, counts)
        if len(self.raggeds) == 1 and len(self.raggeds[0][2]) == total:
            values = self.raggeds[0][2]  # every value came in one group, in record order
        else:
            values = np.empty(total, dtype=self.feature.dtype)
        for index, row in self.singles:
            values[starts[index]:starts[index] + len(row)] = row
        for rows, block in self.blocks:
            values[(starts[rows][:, None] + np.arange(block.shape[1])).ravel()] = block.ravel()
        for rows, row_counts, flat in self.raggeds:
            if flat is not values:
                values[segments(starts[rows], row_counts)] = flat
        longest = int(counts.max()) if batch else 0
        return SparseValue(np.stack([row_ids, columns], axis=1), values,
                           np.array([batch, longest], dtype=np.int64))

    def _padded(self):
        feature, batch = self.feature, len(self.counts)
        max_rows = int(self.counts.max()) // feature.size if batch and feature.size else 0
        out = np.empty((batch, max_rows * feature.size), dtype=feature.dtype)
        out.fill(feature.pad)  # (np.full would make b"ab\x00" a NumPy bytes_: NULs stripped)
        for index, row in self.singles:
            out[index, :len(row)] = row
        for rows, block in self.blocks:
            out[rows, :block.shape[1]] = block
        for rows, row_counts, flat in self.raggeds:
            out.reshape(-1)[segments(rows * out.shape[1], row_counts)] = flat
        return out.reshape((batch, max_rows) + feature.shape)


def _sink(feature, batch):
    return _DenseOut(feature, batch) if feature.kind == _FIXED else _RaggedOut(feature, batch)


# --- The per-record (general) parser ---------------------------------------------------------

_PROTOBUF = None


def _protobuf():
    """``(Example, SequenceExample, DecodeError)``, imported on first use: batches that take
    the layout path need no protobuf, and its import delays a pipeline's first batch."""
    global _PROTOBUF
    if _PROTOBUF is None:
        from google.protobuf.message import DecodeError
        from google.protobuf.unknown_fields import UnknownFieldSet

        from queuepipe.protos import Example, Feature, FeatureList, SequenceExample
        _PROTOBUF = (Example, SequenceExample, DecodeError, Feature, FeatureList,
                     UnknownFieldSet)
    return _PROTOBUF


def _name_text(name):
    if name is None:
        return "<unknown>"
    if isinstance(name, (bytes, bytearray)):
        return bytes(name).decode("utf-8", "backslashreplace")
    return str(name)


def _unparsable(data, where, problem):
    shown = repr(bytes(data[:48])) + ("..." if len(data) > 48 else "")
    return InvalidArgumentError(f"{where}.  Could not parse example input, value: {shown} "
                                f"({len(data)} bytes): {problem}")


def _check_entries(data, where, sequence=False):
    """Raises TF's error for a record whose map entries TF rejects (see
    :mod:`queuepipe.protos._wire`); called where such an entry could hide behind a default."""
    problem = _wire.map_problem(data, sequence)
    if problem:
        raise _unparsable(data, where, f"{problem} (TensorFlow rejects the record; protobuf "
                                       f"would read it)")


def _parse_record(data, index, name, features, sinks):
    """Parses record ``index`` of a batch into ``sinks``, raising TF's errors."""
    name = _name_text(name)
    fmap, suspicious = _feature_map(data, f"Name: {name}, Index: {index}", features)
    for feature, sink in zip(features, sinks):
        entry = fmap.get(feature.key)
        kind = None if entry is None else entry.WhichOneof("kind")
        if kind is None and suspicious:
            _check_entries(data, f"Name: {name}, Index: {index}")
            suspicious = False  # checked: the record's entries are sound
        if kind is None and entry is not None and feature.kind != _VAR:
            entry = _last_listed(data, feature.key)
            kind = None if entry is None else entry.WhichOneof("kind")
        where = f"Name: {name}, Key: {feature.key}, Index: {index}.  "
        if kind is None:  # absent, or a Feature with no list set: TF skips both
            if feature.kind != _FIXED:
                sink.put(index, ())
            elif feature.default is not None:
                sink.put(index, feature.default)
            else:
                raise InvalidArgumentError(
                    f"Name: {name}, Feature: {feature.key} (data type: {feature.tf_dtype}) is "
                    f"required but could not be found. Record index: {index} (give the "
                    f"FixedLenFeature a default_value if the feature may be absent)")
            continue
        if kind != feature.list_name:
            raise InvalidArgumentError(where + _dtype_mismatch(feature, kind))
        values = getattr(entry, kind).value
        count = len(values)
        if feature.kind == _FIXED and count != feature.size:
            raise InvalidArgumentError(
                f"{where}Number of {_VALUES_WORD[feature.dtype]} values != expected.  Values "
                f"size: {count} but output shape: {feature.shape_text}")
        if feature.kind == _SEQ and (count % feature.size if feature.size else count):
            raise InvalidArgumentError(
                f"{where}Number of {_VALUES_WORD[feature.dtype]} values is not a multiple of "
                f"stride length. Saw {count} values but output shape is: {feature.shape_text}")
        sink.put(index, feature.values(values))


def _feature_map(data, where, features):
    """``(map, suspicious)``: key -> Feature of the Example ``data``, as protobuf's map (when
    protobuf cannot parse the whole record, as TF reads it: see :func:`_lazy_maps`), and
    whether an entry TF rejects may hide behind a default (see :func:`_suspicious`)."""
    try:
        features_message = _protobuf()[0].FromString(data).features
    except _protobuf()[2] as e:
        return _lazy_maps(data, where, e, [feature.key for feature in features])[0], False
    return features_message.feature, _suspicious(features_message)


def _suspicious(*maps):
    """Whether protobuf's reading of these Features (or FeatureLists) messages shows a sign of
    a map entry TF rejects: one it dropped (protobuf keeps a map entry with an unknown field
    aside, as an unknown field of the map's message), one without a key (the key "") or one
    without a value (an empty message). Cheap beside the wire-level check it gates: a record
    that gives a requested feature its default pays for the check only when a sign shows."""
    unknown_fields = _protobuf()[5]
    for message in maps:
        features = hasattr(message, "feature")
        entries = message.feature if features else message.feature_list
        if "" in entries or len(unknown_fields(message)):
            return True
        try:
            for value in entries.values():
                if not (value.WhichOneof("kind") if features else value.feature):
                    return True
        except UnicodeDecodeError:  # a key that is not UTF-8: the wire-level check decides
            return True
    return False


def _lazy_maps(data, where, cause, keys, list_keys=None):
    """The maps of a record protobuf cannot parse as a whole, as TF reads it: the map entries
    must be whole (TF's rules), and only the requested features are parsed. Returns the
    context map (an Example's features) and, with ``list_keys``, a SequenceExample's feature
    lists, each a dict key -> message (last entry winning, as in a map).

    Raises:
      InvalidArgumentError: the record does not split into map entries, an entry breaks TF's
        rules, or a requested feature does not parse (the message names its key).
    """
    found = _wire.entries(data, sequence=list_keys is not None)
    if found is None:
        raise _unparsable(data, where, cause) from cause
    _check_entries(data, where, sequence=list_keys is not None)
    _, _, decode_error, feature, feature_list, _ = _protobuf()
    maps = []
    for entries, wanted, message in ((found[1], keys, feature),
                                     (found[2], list_keys, feature_list)):
        wanted = {key.encode("utf-8") for key in wanted or ()}
        parsed = {}
        for key, value in entries:
            if key in wanted:
                try:
                    parsed[key.decode("utf-8")] = message.FromString(value)
                except decode_error as e:
                    raise _unparsable(data, where, f"the {message.__name__} of key "
                                      f"{key.decode('utf-8')!r} does not parse: {e}") from e
        maps.append(parsed)
    return maps


def _last_listed(data, key):
    """The last Feature under ``key`` in the Example ``data`` that holds a list, or None.

    TF's rule for a dense feature whose key appears twice, the later entry an empty Feature:
    the empty one is skipped and the earlier value stays (a map, last entry winning, has lost
    it). Sparse features take the last entry, empty or not, as the map does.
    """
    name, found = key.encode("utf-8"), None
    for entry_key, value in _wire.entries(data)[1]:
        if entry_key == name:
            feature = _protobuf()[3].FromString(value)
            if feature.WhichOneof("kind") is not None:
                found = feature
    return found


def _dtype_mismatch(feature, kind):
    """TF's words for a Feature holding ``kind`` where ``feature`` expects another list."""
    actual = _LIST_TF_NAME[kind]
    if feature.kind == _FIXED:
        return (f"Data types don't match. Data type: {actual} but expected type: "
                f"{feature.tf_dtype}")
    if feature.kind == _SEQ:
        return f"Data types don't match. Expected type: {feature.tf_dtype}"
    return f"Data types don't match. Expected type: {feature.tf_dtype}, Actual type: {actual}"


# --- The fast path: records that share one layout, decoded together ------------------------

# Groups smaller than this are parsed record by record: walking a template costs more.
_MIN_GROUP = 4
# In a batch of mixed lengths, a length group goes by its template when it holds at least
# this fraction (1/n) of the batch; smaller groups join the ragged walk.
_MIN_GROUP_SHARE = 8
# How many templates to walk within one group of equal-length records.
_MAX_TEMPLATES = 3
# (requested keys, record length) -> the Layout that last served; a batch tries it first.
_LAYOUTS: Dict[Tuple[Tuple[str, ...], int], _layout.Layout] = {}
_MAX_LAYOUTS = 256


def _parse_fast(records, features, sinks):
    """Parses every record it can in bulk; returns the indices left for the parser.

    Records of one length go by layout groups (a template each, whose byte positions the
    group's records share): the fast path for fixed-length data. The rest, and every record
    of a length shared by few (ragged data: token lists), go through one vectorized walk,
    :func:`_parse_ragged`. A group's values are written only when its template parses
    cleanly with ``features`` (present with the right list and count, or absent with a
    default); the records of a template that does not are left to :func:`_parse_record`,
    which raises TF's error for the first bad record in batch order.
    """
    lengths = np.fromiter(map(len, records), dtype=np.intp, count=len(records))
    keys = tuple(feature.key for feature in features)
    left = []
    uniform = len(lengths) and lengths.min() == lengths.max()
    # A length shared by fewer records is not worth a template walk: ragged records share
    # lengths by chance, and a template walk costs as much as parsing a record.
    if uniform:
        grouped = [lengths[0]] if len(records) >= _MIN_GROUP else []
        if not grouped:
            left.extend(range(len(records)))
    else:
        distinct, sizes = np.unique(lengths, return_counts=True)
        grouped = distinct[sizes >= max(_MIN_GROUP, len(records) // _MIN_GROUP_SHARE)].tolist()
        left.extend(np.flatnonzero(~np.isin(lengths, grouped)).tolist())
    for length in grouped:
        rows = np.arange(len(lengths)) if uniform else np.flatnonzero(lengths == length)
        group = records if uniform else list(map(records.__getitem__, rows.tolist()))
        block = np.frombuffer(b"".join(group), dtype=np.uint8).reshape(len(rows), length)
        left.extend(_parse_length_group(block, rows, keys, features, sinks, left).tolist())
    left.sort()
    if len(left) >= _MIN_GROUP:  # lengths differ (ragged features) or layouts do
        left = _parse_ragged(records, np.array(left), features, sinks).tolist()
    return left


def _parse_ragged(records, rows, features, sinks):
    """Parses the records ``rows`` of ``records`` (of any lengths) by one vectorized walk
    (:mod:`queuepipe.protos._ragged`); returns the rows left for the per-record parser: the
    records the walk does not follow, and those that would not parse cleanly with
    ``features`` (a list of another type, a wrong count, a required feature absent), so that
    the parser raises TF's error for the first of them."""
    ok, lists = _ragged.walk(list(map(records.__getitem__, rows.tolist())),
                             tuple(feature.key for feature in features))
    accept = ok.copy()
    for feature in features:
        found = lists[feature.key]
        present = found.list_tag > 0  # an empty Feature counts as absent, as in _template_fits
        accept &= ~present | (found.list_tag == _LIST_TAG[feature.list_name])
        if feature.kind == _FIXED:
            accept &= np.where(present, found.counts == feature.size, feature.default is not None)
        elif feature.kind == _SEQ:
            accept &= (found.counts % feature.size == 0) if feature.size else found.counts == 0
    for feature, sink in zip(features, sinks):
        found = lists[feature.key]
        counts = np.where(found.list_tag > 0, found.counts, 0)
        values = found.values
        if not accept[ok].all():  # keep the values of the accepted records only
            values = values[np.repeat(accept[ok], counts[ok])]
        if feature.kind != _FIXED:
            sink.put_ragged(rows[accept], counts[accept], values.astype(feature.dtype, copy=False))
            continue
        present = accept & (found.list_tag > 0)
        sink.put_block(rows[present], values.reshape(int(present.sum()), feature.size)
                       .astype(feature.dtype, copy=False))
        absent = accept & ~(found.list_tag > 0)
        if absent.any():
            sink.put_block(rows[absent], np.broadcast_to(feature.default,
                                                         (int(absent.sum()), feature.size)))
    return rows[~accept]


def _parse_length_group(block, rows, keys, features, sinks, left):
    """Decodes the rows of ``block`` (records of one length) that share a layout.

    Returns the rows not decoded; rows of a template that would not parse go to ``left``.
    """
    layout = _LAYOUTS.get((keys, block.shape[1]))
    for _ in range(_MAX_TEMPLATES + 1):
        if len(rows) < _MIN_GROUP:
            break
        if layout is None:
            layout = _layout.example_layout(block[0].tobytes(), keys)
            if layout is None:  # an encoding the walk does not handle: try the next record
                left.append(int(rows[0]))
                block, rows = block[1:], rows[1:]
                continue
            if len(_LAYOUTS) >= _MAX_LAYOUTS:
                _LAYOUTS.clear()
            _LAYOUTS[keys, block.shape[1]] = layout
        matched = layout.matches(block)
        every = matched.all()  # the common case: the whole block, used as it is
        if all(_template_fits(f, layout.features.get(f.key)) for f in features):
            _decode_group(block if every else block[matched], rows if every else rows[matched],
                          layout, features, sinks)
        else:
            left.extend(rows[matched].tolist())
        if every:
            return rows[:0]
        block, rows = block[~matched], rows[~matched]
        layout = None
    return rows


def _decode_group(block, rows, layout, features, sinks):
    """Writes the values of ``block``'s records, all laid out as ``layout``, into ``sinks``."""
    if not len(rows):
        return
    for feature, sink in zip(features, sinks):
        values = layout.features.get(feature.key)
        if values is not None and values.list_name is not None:
            sink.put_block(rows, values.decode(block))
        elif feature.kind == _FIXED:  # absent: the default
            sink.put_block(rows, np.broadcast_to(feature.default, (len(rows), feature.size)))
        else:  # absent: no values
            sink.put_block(rows, np.empty((len(rows), 0), dtype=feature.dtype))


def _template_fits(feature, values):
    """True when a record laid out with ``values`` for ``feature`` parses without an error."""
    if values is None or values.list_name is None:
        return feature.kind != _FIXED or feature.default is not None
    if values.list_name != feature.list_name:
        return False
    if feature.kind == _FIXED:
        return values.count == feature.size
    if feature.kind == _SEQ:
        return (values.count % feature.size == 0) if feature.size else values.count == 0
    return True


# --- Public parsing functions ----------------------------------------------------------------

def _batch_records(serialized):
    """The records of a batch as a list of bytes, or TypeError saying what is wrong."""
    if isinstance(serialized, (bytes, bytearray, memoryview, str)):
        raise TypeError("parse_example takes a batch (a list or 1-D array of serialized "
                        "Examples); use parse_single_example for one record")
    if isinstance(serialized, np.ndarray):
        if serialized.dtype.kind == "S":
            raise TypeError("a NumPy bytes ('S') array drops the trailing zero bytes of each "
                            "record; pass a list or an object array of bytes")
        if serialized.ndim != 1:
            raise ValueError(f"serialized must be 1-D, got shape {serialized.shape}")
        serialized = serialized.tolist()
    records = list(serialized)
    if set(map(type, records)) <= {bytes}:
        return records
    for index, data in enumerate(records):
        if not isinstance(data, bytes):
            if not isinstance(data, (bytearray, memoryview)):
                raise TypeError(f"serialized[{index}] must be bytes, got "
                                f"{type(data).__name__}: {data!r:.60}")
            records[index] = bytes(data)
    return records


def _batch_names(example_names, batch):
    if example_names is None:
        return None
    names = list(np.asarray(example_names, dtype=object).ravel())
    if len(names) != batch:
        raise ValueError(f"example_names has {len(names)} names for {batch} records")
    return names


def _parse_batch(records, features, names, fast=True):
    """Parses a list of serialized Examples with normalized ``features``."""
    sinks = [_sink(feature, len(records)) for feature in features]
    left = _parse_fast(records, features, sinks) if fast else range(len(records))
    for index in left:
        _parse_record(records[index], index, None if names is None else names[index],
                      features, sinks)
    return {feature.key: sink.finish() for feature, sink in zip(features, sinks)}


_CONFIGS: Dict[Any, List[_Feature]] = {}
# id(spec dict) -> (that dict, a copy of it, its normalized features): a spec used again is
# recognised by comparing it with the copy (a dict comparison in C, about a quarter of the
# cost of hashing its items), so a spec changed in place is normalized anew.
_SPECS: Dict[int, Tuple[Any, Dict[str, Any], List[_Feature]]] = {}


def _example_features(features):
    """The normalized features of a parse_example spec; cached while the spec is hashable."""
    entry = _SPECS.get(id(features))
    if entry is not None and entry[0] is features:
        try:
            if entry[1] == features:
                return entry[2]
        except ValueError:  # an array default compared with another array
            pass
    try:
        cache_key = tuple(features.items())
        parsed = _CONFIGS[cache_key]
    except (TypeError, AttributeError):  # unhashable (a list default), or not a dict
        return _new_example_features(features)
    except KeyError:
        parsed = _new_example_features(features)
        if len(_CONFIGS) >= _MAX_LAYOUTS:
            _CONFIGS.clear()
        _CONFIGS[cache_key] = parsed
    if len(_SPECS) >= _MAX_LAYOUTS:
        _SPECS.clear()
    _SPECS[id(features)] = (features, dict(features), parsed)
    return parsed


class _ExampleFeatures(list):
    """The normalized features of an Example spec, and the single-record parsers learned for
    it: record length -> a function of a record of that length that returns its outputs, or
    None when the record is not laid out as the length's template (see _single_parser)."""

    __slots__ = ("single_parsers", "lengths_seen")

    def __init__(self, features):
        super().__init__(features)
        self.single_parsers: Dict[int, Callable[[bytes], Optional[Dict[str, Any]]]] = {}
        self.lengths_seen: set = set()


def _new_example_features(features):
    parsed = _ExampleFeatures(_features(
        features, (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature), "features"))
    for feature, spec in zip(parsed, features.values()):
        if feature.kind == _SEQ and not spec.allow_missing:
            raise ValueError(f"feature {feature.key!r}: Unsupported: FixedLenSequenceFeature "
                             f"requires allow_missing to be True.")
    return parsed


def parse_example(serialized: Union[Sequence[bytes], np.ndarray], features: Mapping[str, Any],
                  name: Optional[str] = None,
                  example_names: Union[Sequence[Any], np.ndarray, None] = None) -> Dict[str, Any]:
    """Parses a batch of serialized ``Example`` protos, as ``tf.io.parse_example``.

    Args:
      serialized: the records: a list, tuple or 1-D object array of ``bytes``.
      features: feature key -> :class:`FixedLenFeature`, :class:`VarLenFeature` or
        :class:`FixedLenSequenceFeature` (``allow_missing=True``).
      name: accepted for TF compatibility; unused.
      example_names: one name per record (for instance the keys a reader returned), quoted
        in errors as ``Name:``; ``<unknown>`` when not given.

    Returns:
      feature key -> ``[batch, *shape]`` array for a FixedLenFeature,
      ``[batch, longest, *shape]`` (padded with its default) for a FixedLenSequenceFeature,
      and a :class:`SparseValue` with ``[N, 2]`` indices for a VarLenFeature.

    Raises:
      InvalidArgumentError: a record does not parse, lacks a required feature, or holds a
        feature with the wrong data type or number of values. The message is TF's and names
        the record (its index and name) and the feature key.
      TypeError, ValueError: ``serialized`` or ``features`` is malformed.
    """
    del name
    records = _batch_records(serialized)
    return _parse_batch(records, _example_features(features),
                        _batch_names(example_names, len(records)))


def parse_single_example(serialized: bytes, features: Mapping[str, Any],
                         name: Optional[str] = None,
                         example_names: Optional[Any] = None) -> Dict[str, Any]:
    """Parses one serialized ``Example``, as ``tf.io.parse_single_example``.

    Args:
      serialized: the record (``bytes``).
      features: as for :func:`parse_example`.
      name: accepted for TF compatibility; unused.
      example_names: the record's name, quoted in errors (``<unknown>`` when not given).

    Returns:
      feature key -> an array of the feature's ``shape`` (a NumPy scalar, or ``bytes`` for a
      scalar string), ``[rows, *shape]`` for a FixedLenSequenceFeature, or a
      :class:`SparseValue` with ``[N, 1]`` indices for a VarLenFeature.

    Raises:
      InvalidArgumentError: as :func:`parse_example`, for index 0.
    """
    del name
    if type(serialized) is not bytes:
        if not isinstance(serialized, (bytearray, memoryview)):
            raise TypeError(f"serialized must be bytes, got {type(serialized).__name__}: "
                            f"{serialized!r:.60}")
        serialized = bytes(serialized)
    parsed_features = _example_features(features)
    parser = parsed_features.single_parsers.get(len(serialized)) \
        or _single_parser(serialized, parsed_features)
    plain = parser(serialized)
    if plain is None:
        plain = _parse_single_plain(serialized, parsed_features)
    if plain is not None:
        return plain
    names = None if example_names is None else [example_names]
    batch = _parse_batch([serialized], parsed_features, names, fast=False)
    return {key: _unbatch(value) for key, value in batch.items()}


def _no_parser(data):
    """The parser of a record length that has no plan: every record takes the other paths."""
    return None


def _single_parser(data, features):
    """The parser for records of ``data``'s length under ``features``, learned on a miss.

    The first record of a length gets :func:`_no_parser` (one-off lengths are not worth a
    template walk); the second builds the length's parser with :func:`_compile_single`,
    which later records of that length use straight from ``features.single_parsers``.
    """
    parsers, length = features.single_parsers, len(data)
    if length not in features.lengths_seen:
        if len(features.lengths_seen) >= _MAX_LAYOUTS:
            features.lengths_seen.clear()
        features.lengths_seen.add(length)
        return _no_parser
    if len(parsers) >= _MAX_LAYOUTS:
        parsers.clear()
    parsers[length] = parser = _compile_single(data, features)
    return parser


def _compile_single(data, features):
    """A function that takes apart, without protobuf, a record laid out as ``data``.

    Built from the template's :class:`~queuepipe.protos._layout.Layout` when every feature is
    a FixedLenFeature present there with the right list and count (else :func:`_no_parser`).
    The function checks a record's structure bytes against the template's (as
    ``Layout.matches`` does for a batch) and returns its outputs, or None when they differ.
    It is generated as one expression per check and per value, as ``collections.namedtuple``
    generates its class: a per-record call then runs no loops over checks and readers (about
    half the time of a loop over them). Only positions and names made here enter the source;
    the template's bytes and the feature keys are passed in as values. The source stays small
    whatever the record: past ``_MAX_INLINE_CHECKS`` checks (a long int64 list has one per
    varint byte) the check is one NumPy comparison, and long int64 values are decoded
    by NumPy too, so that a record costs time and memory of the order of its size.
    """
    if any(feature.kind != _FIXED for feature in features):
        return _no_parser
    layout = _layout.example_layout(data, tuple(feature.key for feature in features))
    if layout is None:
        return _no_parser
    for feature in features:
        values = layout.features.get(feature.key)
        if values is None or values.list_name != feature.list_name \
                or values.count != feature.size:
            return _no_parser
        if values.list_name == "float_list" and values.count and \
                values.float_columns[-1] - values.float_columns[0] != 4 * values.count - 1:
            return _no_parser  # unpacked floats: protobuf gathers them
    namespace = {"_SMALL_INT64": _SMALL_INT64}
    checks = []
    inline = layout.checked_bytes <= _MAX_INLINE_BYTES
    runs, bits = layout.record_checks() if inline else ((), ())
    if not inline or len(runs) + len(bits) > _MAX_INLINE_CHECKS:
        namespace["differs"] = lambda data: not layout.matches(
            _frombuffer(data, np.uint8)[None])[0]
        checks.append("differs(data)")
    else:
        for i, (start, stop, expected) in enumerate(runs):
            namespace[f"run{i}"] = expected
            checks.append(f"data[{start}:{stop}] != run{i}")
        checks += [f"data[{pos}] & 0x80 != {bit}" for pos, bit in bits]
    outputs = []
    for i, feature in enumerate(features):
        namespace[f"key{i}"] = feature.key
        value = _value_source(feature, layout.features[feature.key], i, namespace)
        outputs.append(f"key{i}: {value}")
    source = (f"def parse(data):\n"
              f"    if {' or '.join(checks) or 'False'}:\n"
              f"        return None\n"
              f"    return {{{', '.join(outputs)}}}\n")
    exec(source, namespace)  # noqa: S102 - source made above from ints and names only
    return namespace["parse"]


def _value_source(feature, values, index, namespace):
    """The expression for one feature's output in a :func:`_compile_single` parser: a slice
    for a string scalar, a table lookup for a one-byte int64, else a call of the feature's
    reader (added to ``namespace``)."""
    if not feature.shape and values.list_name == "bytes_list":
        start, size = values.spans[0]
        return f"data[{start}:{start + size}]"
    if not feature.shape and values.list_name == "int64_list" and values.varints[0][1] == 1:
        return f"_SMALL_INT64[data[{values.varints[0][0]}]]"  # the bit check makes it 0..127
    namespace[f"read{index}"] = _value_reader(feature, values)
    return f"read{index}(data)"


# The most checks (runs of structure bytes, varint continuation bits) or int64 values that a
# compiled one-record parser spells out in its generated source; past it, NumPy does them.
_MAX_INLINE_CHECKS = 32
# Templates with more structure bytes than this are checked by NumPy without listing them.
_MAX_INLINE_BYTES = 512

# np.int64 of the one-byte varints 0..127, made once: NumPy scalars are immutable.
_SMALL_INT64 = tuple(np.int64(value) for value in range(128))


def _value_reader(feature, values):
    """The function of a record (laid out as the parser's template) that returns the output
    of a feature that :func:`_value_source` does not slice out itself: a NumPy scalar, or an
    array of the feature's shape."""
    shape = feature.shape
    if values.list_name == "bytes_list":
        spans = values.spans
        return lambda data: feature.values(
            [data[start:start + size] for start, size in spans]).reshape(shape)
    if values.list_name == "int64_list":
        varints = values.varints
        if not shape:
            start, size = varints[0]
            return lambda data: np.int64(_varint_int64(data, start, size))
        if len(varints) > _MAX_INLINE_CHECKS:
            return lambda data: values.decode(_frombuffer(data, np.uint8)[None])[0].reshape(shape)
        return lambda data: np.array([_varint_int64(data, start, size)
                                      for start, size in varints], dtype=np.int64).reshape(shape)
    start = values.float_columns[0] if values.count else 0
    stop = start + 4 * values.count
    if not shape:
        return lambda data: _frombuffer(data[start:stop], _LITTLE_FLOAT32).astype(np.float32)[0]
    if _LITTLE_FLOAT32 == np.float32 and shape == (values.count,):  # the common case
        return lambda data: _frombuffer(bytearray(data[start:stop]), _LITTLE_FLOAT32)
    return lambda data: _frombuffer(bytearray(data[start:stop]), _LITTLE_FLOAT32).astype(
        np.float32, copy=False).reshape(shape)


def _varint_int64(data, start, size):
    """The varint of ``size`` bytes at ``start`` as a signed 64-bit int (as protobuf reads it)."""
    value = 0
    for shift, byte in enumerate(data[start:start + size]):
        value |= (byte & 0x7F) << (7 * shift)
    value &= 0xFFFFFFFFFFFFFFFF
    return value - (1 << 64) if value >> 63 else value


def _parse_single_plain(data, features):
    """The outputs of one record whose FixedLenFeatures are all present with the right list
    and count, and whose VarLenFeatures hold the right list, built from the protobuf message;
    None otherwise, for the general path to handle (absent features, sequence features,
    errors with TF's words)."""
    example, _, decode_error, _, _, _ = _PROTOBUF or _protobuf()
    try:
        features_message = example.FromString(data).features
    except decode_error:
        return None
    fmap, out, checked = features_message.feature, {}, False
    for feature in features:
        if feature.kind == _VAR:
            entry = fmap.get(feature.key)
            kind = None if entry is None else entry.WhichOneof("kind")
            if kind is None:  # no values, unless an entry TF rejects hides there
                if not checked and _suspicious(features_message):
                    return None  # the general path checks the entries
                checked = True
                out[feature.key] = _sparse_1d(np.empty(0, dtype=feature.dtype))
            elif kind == feature.list_name:
                out[feature.key] = _sparse_1d(feature.values(getattr(entry, kind).value))
            else:
                return None
            continue
        entry = fmap.get(feature.key) if feature.kind == _FIXED else None
        if entry is None or entry.WhichOneof("kind") != feature.list_name:
            return None
        values = getattr(entry, feature.list_name).value
        if len(values) != feature.size:
            return None
        if not feature.shape:  # a scalar: bytes, or a NumPy scalar as the batch's [0] gives
            out[feature.key] = (values[0] if feature.dtype == _dtypes.string
                                else feature.dtype.type(values[0]))
        else:
            out[feature.key] = feature.values(values).reshape(feature.shape)
    return out


def _unbatch(value):
    if isinstance(value, SparseValue):
        return SparseValue(value.indices[:, 1:], value.values, value.dense_shape[1:])
    return value[0]


def _shaped(values, shape):
    """A flat array as ``shape``; a scalar comes out as a NumPy scalar or ``bytes``."""
    return values[0] if shape == () else values.reshape(shape)


def _sparse_1d(values):
    return SparseValue(np.arange(len(values), dtype=np.int64)[:, None], values,
                       np.array([len(values)], dtype=np.int64))


def _context(message, features, name):
    """The context outputs of a SequenceExample, with TF's errors."""
    fmap, out = message.context.feature, {}
    for feature in features:
        entry = fmap.get(feature.key)
        if entry is None:
            if feature.kind == _VAR:
                out[feature.key] = _sparse_1d(feature.values([]))
                continue
            if feature.default is None:
                raise InvalidArgumentError(
                    f"Name: {name}, Feature: {feature.key} (data type: {feature.tf_dtype}) is "
                    f"required but could not be found.")
            out[feature.key] = _shaped(feature.default, feature.shape)
            continue
        kind = entry.WhichOneof("kind")
        if kind is not None and kind != feature.list_name:
            raise InvalidArgumentError(
                f"Name: {name}, Context feature: {feature.key}.  Data types don't match. "
                f"Expected type: {feature.tf_dtype}")
        values = feature.values(getattr(entry, kind).value if kind else [])
        if feature.kind == _VAR:
            out[feature.key] = _sparse_1d(values)
        elif len(values) != feature.size:
            raise InvalidArgumentError(
                f"Name: {name}, Inconsistent max number of elements for feature "
                f"{feature.key}: expected {feature.size}, but found {len(values)}")
        else:
            out[feature.key] = _shaped(values, feature.shape)
    return out


def _sequence(message, features, specs, name):
    """The feature-list outputs of a SequenceExample, with TF's errors."""
    lists, out = message.feature_lists.feature_list, {}
    for feature, spec in zip(features, specs):
        entry = lists.get(feature.key)
        steps = None if entry is None else entry.feature
        if steps is None and feature.kind == _SEQ and not spec.allow_missing:
            raise InvalidArgumentError(
                f"Name: {name}, Feature list '{feature.key}' is required but could not be "
                f"found.  Did you mean to include it in feature_list_dense_missing_assumed_"
                f"empty or feature_list_dense_defaults? (set allow_missing=True)")
        rows = []
        for step, entry in enumerate(steps or ()):
            kind = entry.WhichOneof("kind")
            if kind is not None and kind != feature.list_name:
                raise InvalidArgumentError(
                    f"Name: {name}, Feature list: {feature.key}, Index: {step}.  Data types "
                    f"don't match. Expected type: {feature.tf_dtype}")
            values = feature.values(getattr(entry, kind).value if kind else [])
            if feature.kind == _SEQ and len(values) != feature.size:
                raise InvalidArgumentError(
                    f"Name: {name}, Key: {feature.key}, Index: {step}.  Number of values != "
                    f"expected.  values size: {len(values)} but output shape: "
                    f"{feature.shape_text}")
            rows.append(values)
        if feature.kind == _SEQ:
            flat = np.concatenate(rows) if rows else feature.values([])
            out[feature.key] = flat.reshape((len(rows),) + feature.shape)
            continue
        sink = _RaggedOut(feature, len(rows))
        for step, values in enumerate(rows):
            sink.put(step, values)
        out[feature.key] = sink.finish()
    return out


def parse_single_sequence_example(
        serialized: bytes, context_features: Optional[Mapping[str, Any]] = None,
        sequence_features: Optional[Mapping[str, Any]] = None,
        example_name: Optional[Any] = None,
        name: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """Parses one serialized ``SequenceExample``, as ``tf.io.parse_single_sequence_example``.

    Args:
      serialized: the record (``bytes``).
      context_features: key -> :class:`FixedLenFeature` or :class:`VarLenFeature`, for the
        features of the whole sequence.
      sequence_features: key -> :class:`FixedLenSequenceFeature` (one row per step) or
        :class:`VarLenFeature`, for the feature lists.
      example_name: the record's name, quoted in errors (``<unknown>`` when not given).
      name: accepted for TF compatibility; unused.

    Returns:
      ``(context, sequence)``: dicts of arrays (``[steps, *shape]`` for a sequence feature;
      ``[0, *shape]`` when an ``allow_missing`` list is absent) or :class:`SparseValue`
      (indices ``[N, 1]`` for context, ``[N, 2]`` (step, position) for feature lists).

    Raises:
      InvalidArgumentError: the record does not parse, a required feature or feature list is
        missing, or a step holds the wrong data type or number of values; TF's words.
    """
    del name
    context_specs = dict(context_features or {})
    sequence_specs = dict(sequence_features or {})
    for key, spec in sequence_specs.items():
        if getattr(spec, "default_value", None) is not None:
            raise ValueError(f"Value feature_list.dense_defaults[{key}] must be None: a "
                             f"sequence feature has no default (set allow_missing=True for "
                             f"an empty list where it is absent)")
    context = _features(context_specs, (FixedLenFeature, VarLenFeature), "context_features")
    sequence = _features(sequence_specs, (FixedLenSequenceFeature, VarLenFeature),
                         "sequence_features")
    label = _name_text(example_name)
    data = bytes(serialized)
    try:
        message = _protobuf()[1].FromString(data)
    except _protobuf()[2] as e:  # read as TF reads it, its entries checked
        context_map, lists = _lazy_maps(data, f"Name: {label}", e, [f.key for f in context],
                                        [f.key for f in sequence])
        message = types.SimpleNamespace(context=types.SimpleNamespace(feature=context_map),
                                        feature_lists=types.SimpleNamespace(feature_list=lists))
    else:
        context_map, lists = message.context.feature, message.feature_lists.feature_list
        if (any(f.key not in context_map for f in context)
                or any(f.key not in lists for f in sequence)) \
                and _suspicious(message.context, message.feature_lists):
            _check_entries(data, f"Name: {label}", sequence=True)  # before defaults are given
    return (_context(message, context, label),
            _sequence(message, sequence, list(sequence_specs.values()), label))


# --- decode_raw -----------------------------------------------------------------------------

# (out_type, little_endian) -> (dtype, dtype as stored): a per-record decode_raw skips the work.
_DECODE_TYPES: Dict[Tuple[Any, bool], Tuple[np.dtype, np.dtype]] = {}
# out_type -> dtype, for the types whose little-endian bytes are read as they are stored (every
# type on a little-endian machine): the one lookup a per-record decode_raw makes.
_AS_STORED: Dict[Any, np.dtype] = {}


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
        if len(_DECODE_TYPES) < _MAX_LAYOUTS:
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
        feature). All of its elements must have the same length.
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
                # copied as a bytearray: NumPy's own copy would release the GIL
                return _frombuffer(bytearray(input_bytes), dtype)
    dtype, wire = _decode_types(out_type, little_endian)
    if type(input_bytes) is bytes and fixed_length is None:  # one record: no joins, no loops
        if len(input_bytes) % dtype.itemsize:
            raise InvalidArgumentError(
                f"Input to DecodeRaw has length {len(input_bytes)} that is not a multiple of "
                f"{dtype.itemsize}, the size of {dtype}")
        if wire == dtype:
            return _frombuffer(bytearray(input_bytes), dtype)
        return np.frombuffer(input_bytes, dtype=wire).astype(dtype, copy=True)
    scalar = isinstance(input_bytes, (bytes, bytearray, memoryview))
    if scalar:
        items, shape = [bytes(input_bytes)], ()
    else:
        array = np.asarray(input_bytes, dtype=object)
        items, shape = array.ravel().tolist(), array.shape
    if not set(map(type, items)) <= {bytes}:
        for index, item in enumerate(items):
            if not isinstance(item, (bytes, bytearray)):
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
            f"{index} has size {lengths[index]} != {length} (the size of element 0)")
    if length % dtype.itemsize:
        raise InvalidArgumentError(
            f"Input to DecodeRaw has length {length} that is not a multiple of "
            f"{dtype.itemsize}, the size of {dtype}")
    if wire == dtype:  # joined into a bytearray: the array owns writable memory, no copy
        values = _frombuffer(bytearray().join(items), dtype)
    else:
        values = np.frombuffer(b"".join(items), dtype=wire).astype(dtype, copy=True)
    return values.reshape(shape + (length // dtype.itemsize,))


# --- decode_csv -----------------------------------------------------------------------------

_CSV_DTYPES = {_dtypes.int32: "int32", _dtypes.int64: "int64", _dtypes.float32: "float",
               np.dtype(np.float64): "double", _dtypes.string: "string"}
_INT_TEXT = re.compile(rb"\s*[+-]?[0-9]+\s*")
_FLOAT_TEXT = re.compile(rb"\s*[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+"
                         rb"(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)\s*", re.IGNORECASE)
# What strtod takes beyond decimals, as TF's parser does: hex floats, and nan(chars).
_HEX_FLOAT_TEXT = re.compile(rb"\s*[+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?"
                             rb"\s*", re.IGNORECASE)
_NAN_TEXT = re.compile(rb"\s*[+-]?nan\([0-9a-z_]*\)\s*", re.IGNORECASE)


def _is_dtype(value):
    return isinstance(value, np.dtype) or (isinstance(value, type)
                                           and issubclass(value, np.generic))


class _Column:
    """One decode_csv column: its dtype and its default (None: required)."""

    def __init__(self, index, default):
        self.index = index
        if _is_dtype(default):
            self.dtype, values = _dtypes.as_dtype(default), np.zeros(0)
        else:
            items = list(default) if isinstance(default, (list, tuple)) else [default]
            values = default if isinstance(default, np.ndarray) else np.asarray(items)
            typed = isinstance(default, np.ndarray) or any(
                isinstance(item, np.generic) for item in items)
            kind = values.dtype.kind
            if kind in "SUO":
                self.dtype = _dtypes.string
            elif typed:
                self.dtype = values.dtype
            else:  # Python numbers, or []: TF's int32 and float32
                self.dtype = {"i": _dtypes.int32, "u": _dtypes.int32,
                              "f": _dtypes.float32}.get(kind, values.dtype)
        if self.dtype not in _CSV_DTYPES:
            raise ValueError(f"record_defaults[{index}]: unsupported type {self.dtype} in "
                             f"{default!r}; use int32, int64, float32, float64 or string")
        if values.size > 1:
            raise ValueError(f"record_defaults[{index}] must hold one value or none, got "
                             f"{default!r}")
        self.default = self.convert(values.ravel()[0], None) if values.size else None

    def convert(self, value, where):
        """``value`` (a field's bytes, or a default) as this column's type."""
        if self.dtype == _dtypes.string:
            return value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if not isinstance(value, bytes):
            return self.dtype.type(value)
        if self.dtype.kind == "f" and _HEX_FLOAT_TEXT.fullmatch(value):
            return self.dtype.type(float.fromhex(value.strip().decode("ascii")))
        if self.dtype.kind == "f" and _NAN_TEXT.fullmatch(value):
            return self.dtype.type("nan")
        pattern = _INT_TEXT if self.dtype.kind == "i" else _FLOAT_TEXT
        if pattern.fullmatch(value):
            number = int(value) if self.dtype.kind == "i" else float(value)
            info = np.iinfo(self.dtype) if self.dtype.kind == "i" else None
            if self.dtype == _dtypes.float32:
                return _float32(value, number)
            if info is None or info.min <= number <= info.max:
                return self.dtype.type(number)
        raise InvalidArgumentError(f"{where} is not a valid {_CSV_DTYPES[self.dtype]}: "
                                   f"{value.decode('utf-8', 'backslashreplace')}")


def _float32(text, wide):
    """The float32 nearest the decimal ``text``, as TF's parser (strtof) gives it.

    Rounding the text to float64 first (``wide``), then to float32, errs only where ``wide``
    lies exactly halfway between two float32s while the text does not: ``16777217.000000001``
    is 16777218 in float32, but its float64, 16777217, is a tie that rounds to 16777216.
    There the text itself decides, compared exactly.
    """
    narrow = np.float32(wide)
    if not np.isfinite(narrow) or float(narrow) == wide:
        return narrow
    # (compared as Python floats: NumPy would compare wide in float32, where it is narrow)
    with np.errstate(over="ignore"):  # past the largest float32: inf, never a midpoint
        other = np.nextafter(narrow, np.float32(np.inf if wide > float(narrow) else -np.inf))
    if (float(narrow) + float(other)) / 2 != wide:
        return narrow
    exact = decimal.Decimal(text.strip().decode("ascii"))
    if exact == decimal.Decimal(wide):
        return narrow  # a true tie: to even, as NumPy rounded it
    up = exact > decimal.Decimal(wide)
    return max(narrow, other) if up else min(narrow, other)


def _csv_fields(record, delim, use_quote_delim, index, wanted=None):
    """Splits one record into its fields, TF's way: quotes double to escape, a CR or LF where
    a field would start is skipped, one inside an unquoted field is an error, and an empty
    record has no field at all. With ``wanted``, stops after that many fields (TF does not
    look past the last column ``select_cols`` asks for)."""
    fields, pos, size = [], 0, len(record)
    while pos < size:
        if wanted is not None and len(fields) >= wanted:
            return fields
        if record[pos] in b"\r\n":
            pos += 1
            continue
        if use_quote_delim and record[pos:pos + 1] == b'"':
            field, pos = bytearray(), pos + 1
            while True:
                end = record.find(b'"', pos)
                if end < 0:
                    raise InvalidArgumentError(
                        f"Quoted field has to end with quote followed by delim or end, in "
                        f"record {index}: {record!r}")
                field += record[pos:end]
                if record[end + 1:end + 2] == b'"':
                    field += b'"'
                    pos = end + 2
                    continue
                pos = end + 1
                break
            if pos < size and record[pos:pos + 1] != delim:
                raise InvalidArgumentError(
                    f"Quoted field has to end with quote followed by delim or end, in record "
                    f"{index}: {record!r}")
            fields.append(bytes(field))
        else:
            end = record.find(delim, pos)
            end = size if end < 0 else end
            field = record[pos:end]
            if (use_quote_delim and b'"' in field) or b"\r" in field or b"\n" in field:
                raise InvalidArgumentError(
                    f"Unquoted fields cannot have quotes/CRLFs inside, in record {index}: "
                    f"{record!r}")
            fields.append(field)
            pos = end
        pos += 1  # past the delimiter
    if record[-1:] == delim:  # the last field is missing: an empty one
        fields.append(b"")
    return fields


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",",
               use_quote_delim: bool = True, name: Optional[str] = None, na_value: str = "",
               select_cols: Optional[Sequence[int]] = None) -> List[Any]:
    """Converts CSV records to columns, as ``tf.io.decode_csv``.

    Args:
      records: one record (``str``/``bytes``) or an array/list of them.
      record_defaults: one entry per column: ``[value]`` gives the column's type and the value
        used for an empty field (an ``int`` makes an int32 column, a ``float`` float32, a
        ``str``/``bytes`` string; a NumPy scalar or 1-element array keeps its own type), and
        ``[]`` or an empty typed array (or a dtype) makes the column required.
      field_delim: the one-character delimiter.
      use_quote_delim: whether ``"`` quotes fields (a quoted field may hold the delimiter;
        ``""`` inside it is a quote).
      name: accepted for TF compatibility; unused.
      na_value: a field equal to this counts as empty.
      select_cols: increasing column indices to keep; then ``record_defaults`` has one entry
        per selected column.

    Returns:
      A list with one entry per (selected) column: a scalar for a scalar record, else an array
      of the records' shape (object of bytes for strings).

    Raises:
      InvalidArgumentError: a record has the wrong number of fields, a required field is
        empty, or a field does not parse as its column's type; the message names the column
        and the record.
      ValueError: ``record_defaults``, ``field_delim`` or ``select_cols`` is invalid.
    """
    del name
    delim = field_delim.encode("utf-8") if isinstance(field_delim, str) else field_delim
    if len(delim) != 1:
        raise ValueError(f"field_delim must be one character, got {field_delim!r}")
    na = na_value.encode("utf-8") if isinstance(na_value, str) else bytes(na_value)
    columns = [_Column(i, default) for i, default in enumerate(record_defaults)]
    if select_cols is not None:
        select = [int(col) for col in select_cols]
        if any(col < 0 for col in select):
            raise ValueError(f"select_cols contains negative values: {select}")
        if any(b <= a for a, b in zip(select, select[1:])):
            raise ValueError(f"select_cols is not strictly increasing: {select}")
        if len(select) != len(columns):
            raise ValueError(f"Length of select_cols ({len(select)}) and record_defaults "
                             f"({len(columns)}) do not match")
    scalar = isinstance(records, (str, bytes))
    array = np.asarray([records] if scalar else records, dtype=object)
    outputs = [np.empty(array.size, dtype=column.dtype) for column in columns]
    for index, record in enumerate(array.ravel().tolist()):
        if isinstance(record, str):
            record = record.encode("utf-8")
        fields = _csv_fields(bytes(record), delim, use_quote_delim, index,
                             None if select_cols is None else select[-1] + 1)
        if select_cols is None:
            if len(fields) != len(columns):
                raise InvalidArgumentError(f"Expect {len(columns)} fields but have "
                                           f"{len(fields)} in record {index}")
            chosen = fields
        else:
            if len(fields) <= select[-1]:
                raise InvalidArgumentError(f"Expect at least {select[-1] + 1} fields (for "
                                           f"select_cols) but have {len(fields)} in record "
                                           f"{index}")
            chosen = [fields[col] for col in select]
        for column, field, out in zip(columns, chosen, outputs):
            number = column.index if select_cols is None else select[column.index]
            if field == na or not field:
                if column.default is None:
                    raise InvalidArgumentError(f"Field {number} is required but missing in "
                                               f"record {index}!")
                out[index] = column.default
            else:
                out[index] = column.convert(field, f"Field {number} in record {index}")
    if scalar:
        return [out[0] for out in outputs]
    return [out.reshape(array.shape) for out in outputs]
