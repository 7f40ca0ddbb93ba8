"""``parse_single_sequence_example``: a SequenceExample's context and feature lists."""

from __future__ import annotations

import types
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing import _walkers
from queuepipe.parsing._example import _batch_names, _batch_records
from queuepipe.parsing._record import (_check_entries, _has_unknown_fields, _lazy_maps,
                                       _name_text, _protobuf, _suspicious)
from queuepipe.parsing._sinks import _RaggedOut, _shaped, _sparse_1d
from queuepipe.parsing._specs import (_SEQ, _VAR, FixedLenFeature, FixedLenSequenceFeature,
                                      VarLenFeature, _features)
from queuepipe.protos import _wire
from queuepipe.sparse import stack


def _values(feature, entry, where, unlisted):
    """The values of the Feature ``entry`` as ``feature``'s array; TF's error, after
    ``where``, when it holds another list, or when protobuf's reading shows a sign (no list,
    or unknown fields) and ``unlisted()`` finds the Feature is one TF cannot type (see
    :func:`queuepipe.protos._wire.unlisted`): TF reads a step's or a context feature's type
    from its first byte."""
    kind = entry.WhichOneof("kind")
    if (kind is not None and kind != feature.list_name) or (
            (kind is None or _has_unknown_fields(entry)) and unlisted() is not None):
        raise InvalidArgumentError(f"{where}.  Data types don't match. Expected type: "
                                   f"{feature.tf_dtype}")
    return feature.values(getattr(entry, kind).value if kind else [])


def _unlisted(data, key, steps):
    """A function that returns :func:`queuepipe.protos._wire.unlisted` for ``key`` in the
    SequenceExample ``data`` (its context, or with ``steps`` its feature list), walking the
    record once however often it is asked."""
    found = []

    def ask():
        if not found:
            found.append(_wire.unlisted(data, key.encode("utf-8"), sequence=True, steps=steps))
        return found[0]
    return ask


def _context(data, message, features, name):
    """The context outputs of the SequenceExample ``data`` (read as ``message``), with TF's
    errors."""
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
        values = _values(feature, entry, f"Name: {name}, Context feature: {feature.key}",
                         _unlisted(data, feature.key, steps=False))
        if feature.kind == _VAR:
            out[feature.key] = _sparse_1d(values)
        elif len(values) != feature.size:
            raise InvalidArgumentError(
                f"Name: {name}, Inconsistent max number of elements for feature "
                f"{feature.key}: expected {feature.size}, but found {len(values)}")
        else:
            out[feature.key] = _shaped(values, feature.shape)
    return out


def _sequence(data, message, features, specs, name):
    """The feature-list outputs of the SequenceExample ``data`` (read as ``message``), with
    TF's errors."""
    lists, out = message.feature_lists.feature_list, {}
    for feature, spec in zip(features, specs):
        entry = lists.get(feature.key)
        steps = None if entry is None else entry.feature
        if steps is None and feature.kind == _SEQ and not spec.allow_missing:
            raise InvalidArgumentError(
                f"Name: {name}, Feature list '{feature.key}' is required but could not be "
                f"found.  Did you mean to include it in feature_list_dense_missing_assumed_"
                f"empty or feature_list_dense_defaults? (set allow_missing=True)")
        unlisted = _unlisted(data, feature.key, steps=True)
        rows = [_values(feature, entry, f"Name: {name}, Feature list: {feature.key}, "
                        f"Index: {step}", unlisted) for step, entry in enumerate(steps or ())]
        if feature.kind == _SEQ:  # TF's order: every step's type, the total, each step
            _check_steps(feature, rows, name)
            flat = np.concatenate(rows) if rows else feature.values([])
            out[feature.key] = flat.reshape((len(rows),) + feature.shape)
            continue
        sink = _RaggedOut(feature, len(rows))
        for step, values in enumerate(rows):
            sink.put(step, values)
        out[feature.key] = sink.finish()
    return out


def _check_steps(feature, rows, name):
    """TF's errors for the steps of a FixedLenSequenceFeature that do not hold one row each."""
    total = sum(map(len, rows))
    if feature.size and total % feature.size:
        raise InvalidArgumentError(
            f"Name: {name}, Feature list '{feature.key}' has an unexpected number of values.  "
            f"Total values size: {total} is not consistent with output shape: "
            f"[?{''.join(f',{dim}' for dim in feature.shape)}]")
    for step, values in enumerate(rows):
        if len(values) != feature.size:
            raise InvalidArgumentError(
                f"Name: {name}, Key: {feature.key}, Index: {step}.  Number of values != "
                f"expected.  values size: {len(values)} but output shape: "
                f"{feature.shape_text}")


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
    context, sequence, sequence_specs = _sequence_specs(context_features, sequence_features)
    return _parse_one(bytes(serialized), context, sequence, sequence_specs,
                      _name_text(example_name))


def _sequence_specs(context_features, sequence_features):
    """The normalized context and sequence features, and the sequence specs as given."""
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
    return context, sequence, list(sequence_specs.values())


def _parse_one(data, context, sequence, sequence_specs, label, walker=_walkers.sequence):
    """``(context, sequence)`` outputs of the SequenceExample ``data`` named ``label``: the
    ``walker`` (see :mod:`._walkers`) tries the record first, protobuf takes what it
    leaves."""
    plain = walker(data, context, sequence, sequence_specs)
    if plain is not None:
        return plain
    lead = f"Invalid protocol message input, example id: {label}"  # TF's words
    try:
        message = _protobuf()[1].FromString(data)
    except _protobuf()[2] as e:  # read as TF reads it, its entries checked
        context_map, lists = _lazy_maps(
            data, lead, e, [f.key for f in context], [f.key for f in sequence],
            check=lambda number, key: _check_unlisted(data, number, key, context, label))
        message = types.SimpleNamespace(context=types.SimpleNamespace(feature=context_map),
                                        feature_lists=types.SimpleNamespace(feature_list=lists))
    else:
        context_map, lists = message.context.feature, message.feature_lists.feature_list
        # An entry TF rejects hides where a feature is absent or empty (an entry with no
        # value reads as an empty Feature or FeatureList): look before defaults are given.
        if (any(not context_map[f.key].WhichOneof("kind") if f.key in context_map else True
                for f in context)
                or any(not lists[f.key].feature if f.key in lists else True
                       for f in sequence)) \
                and _suspicious(message.context, message.feature_lists):
            _check_entries(data, lead, sequence=True)
    return (_context(data, message, context, label),
            _sequence(data, message, sequence, sequence_specs, label))


def parse_sequence_example(
        serialized: Union[Sequence[bytes], np.ndarray],
        context_features: Optional[Mapping[str, Any]] = None,
        sequence_features: Optional[Mapping[str, Any]] = None,
        example_names: Union[Sequence[Any], np.ndarray, None] = None,
        name: Optional[str] = None) -> Tuple[Dict[str, Any], Dict[str, Any], Dict[str, Any]]:
    """Parses a batch of serialized ``SequenceExample``s, as TF1's
    ``tf.io.parse_sequence_example``.

    Args:
      serialized: the records: a list, tuple or 1-D object array of ``bytes``.
      context_features: as for :func:`parse_single_sequence_example`.
      sequence_features: as for :func:`parse_single_sequence_example`.
      example_names: one name per record, quoted in errors (``<unknown>`` when not given;
        an empty list is no names, as in TF).
      name: accepted for TF compatibility; unused.

    Returns:
      ``(context, feature_lists, lengths)``. ``context``: ``[batch, *shape]`` arrays for
      FixedLenFeatures, SparseValues with ``[N, 2]`` indices for VarLenFeatures.
      ``feature_lists``: ``[batch, longest, *shape]`` arrays for FixedLenSequenceFeatures
      (shorter sequences padded with 0 or ``b""``), SparseValues with ``[N, 3]`` indices
      (record, step, position) for VarLenFeatures. ``lengths``: for each
      FixedLenSequenceFeature, the int64 ``[batch]`` number of steps of each record.

    Raises:
      InvalidArgumentError: as :func:`parse_single_sequence_example`, for the first record
        that fails, named by its name.
    """
    del name
    records = _batch_records(serialized, "SequenceExample")
    names = _batch_names(example_names, len(records))
    context, sequence, sequence_specs = _sequence_specs(context_features, sequence_features)
    parsed = [_parse_one(data, context, sequence, sequence_specs,
                         _name_text(None if names is None else names[index]))
              for index, data in enumerate(records)]
    context_out = {f.key: _stacked(f, [one[0][f.key] for one in parsed], 1) for f in context}
    lists_out, lengths = {}, {}
    for f in sequence:
        rows = [one[1][f.key] for one in parsed]
        lists_out[f.key] = _stacked(f, rows, 2)
        if f.kind == _SEQ:
            lengths[f.key] = np.array([len(row) for row in rows], dtype=np.int64)
    return context_out, lists_out, lengths


def _stacked(feature, values, rank):
    """One output for a batch from each record's: SparseValues (of ``rank``) joined under a
    new leading index, as a batch of them is; arrays stacked, a sequence feature's padded to
    the longest (with 0 or b"")."""
    if feature.kind == _VAR:
        return stack(values, feature.dtype, f"feature {feature.key!r}", rank).to_sparse()
    if feature.kind != _SEQ:
        out = np.empty((len(values),) + feature.shape, dtype=feature.dtype)
        for index, value in enumerate(values):
            out[index] = value
        return out
    steps = max((len(value) for value in values), default=0)
    out = np.empty((len(values), steps) + feature.shape, dtype=feature.dtype)
    out.fill(feature.pad)  # (np.full would make b"ab\x00" a NumPy bytes_: NULs stripped)
    for index, value in enumerate(values):
        out[index, :len(value)] = value
    return out


def _check_unlisted(data, number, key, context, name):
    """For a record protobuf cannot read: TF's error when the context feature ``key`` (map
    ``number`` 1) holds a Feature TF cannot type, which protobuf might refuse with its own
    words (a field numbered 0). Feature lists (map 2) are left to protobuf's reading of the
    FeatureList: there TF's words depend on how the step is damaged."""
    if number != 1:
        return
    if _wire.unlisted(data, key.encode("utf-8"), sequence=True) is not None:
        dtype = next(f.tf_dtype for f in context if f.key == key)
        raise InvalidArgumentError(f"Name: {name}, Context feature: {key}.  Data types don't "
                                   f"match. Expected type: {dtype}")
