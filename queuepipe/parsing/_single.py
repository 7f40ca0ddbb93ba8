"""The single-record Example parser: for records of a length seen before, a function compiled
from the template's layout takes the record apart without protobuf; else the record is read
with protobuf when it parses plainly. Anything else goes to :mod:`._record`."""

from __future__ import annotations

import operator

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.parsing._record import _has_unknown_fields, _protobuf, _suspicious
from queuepipe.parsing._sinks import _sparse_1d
from queuepipe.parsing._specs import _FIXED, _MAX_CACHED, _VAR, _frombuffer
from queuepipe.protos import _layout

_LITTLE_FLOAT32 = np.dtype("<f4")  # how a float_list stores its values
# What every number that enters a compiled parser's source passes: an int, or TypeError.
_int = operator.index


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
        if len(features.lengths_seen) >= _MAX_CACHED:
            features.lengths_seen.clear()
        features.lengths_seen.add(length)
        return _no_parser
    if len(parsers) >= _MAX_CACHED:
        parsers.clear()
    parsers[length] = parser = _compile_single(data, features)
    return parser


def _compile_single(data, features):
    """A function that takes apart, without protobuf, a record laid out as ``data``.

    Built from the template's :class:`~queuepipe.protos._layout.Layout` when every feature (a
    FixedLenFeature: ``features.single_parsers`` exists for no other spec) is present there
    with the right list and count (else :func:`_no_parser`).
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
            checks.append(f"data[{_int(start)}:{_int(stop)}] != run{i}")
        checks += [f"data[{_int(pos)}] & 0x80 != {_int(bit)}" for pos, bit in bits]
    outputs = []
    for i, feature in enumerate(features):
        namespace[f"key{i}"] = feature.key
        value = _value_source(feature, layout.features[feature.key], i, namespace)
        outputs.append(f"key{i}: {value}")
    source = (f"def parse(data):\n"
              f"    if {' or '.join(checks) or 'False'}:\n"
              f"        return None\n"
              f"    return {{{', '.join(outputs)}}}\n")
    # Nothing from the record or the spec enters the source as text: the template's offsets
    # and bytes pass through _int (integers, or TypeError), the expected runs and the feature
    # keys are passed in `namespace` as values, and every name is made here (run<i>, key<i>,
    # read<i>). So the source is digits and fixed text, whatever the data holds.
    exec(source, namespace)  # noqa: S102 - nothing from data enters the source (see above)
    return namespace["parse"]


def _value_source(feature, values, index, namespace):
    """The expression for one feature's output in a :func:`_compile_single` parser: a slice
    for a string scalar, a table lookup for a one-byte int64, else a call of the feature's
    reader (added to ``namespace``)."""
    if not feature.shape and values.list_name == "bytes_list":
        start, size = values.spans[0]
        return f"data[{_int(start)}:{_int(start + size)}]"
    if not feature.shape and values.list_name == "int64_list" and values.varints[0][1] == 1:
        # (the bit check makes the byte 0..127)
        return f"_SMALL_INT64[data[{_int(values.varints[0][0])}]]"
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
    None otherwise, for the general path to handle (absent features, sequence features, an
    empty Feature or one with unknown fields, errors with TF's words)."""
    example, _, decode_error, _, _, _ = _protobuf()
    try:
        features_message = example.FromString(data).features
    except decode_error:
        return None
    fmap, out, checked = features_message.feature, {}, False
    for feature in features:
        if feature.kind == _VAR:
            entry = fmap.get(feature.key)
            kind = None if entry is None else entry.WhichOneof("kind")
            if entry is not None and (kind is None or _has_unknown_fields(entry)):
                return None  # a Feature TF may not type, or an earlier entry that TF keeps
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
        if entry is None or entry.WhichOneof("kind") != feature.list_name \
                or _has_unknown_fields(entry):
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
