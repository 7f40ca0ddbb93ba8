"""``parse_single_sequence_example``: a SequenceExample's context and feature lists."""

from __future__ import annotations

import types
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing import _walkers
from queuepipe.parsing._record import (_check_entries, _lazy_maps, _name_text, _protobuf,
                                       _suspicious)
from queuepipe.parsing._sinks import _RaggedOut, _shaped, _sparse_1d
from queuepipe.parsing._specs import (_SEQ, _VAR, FixedLenFeature, FixedLenSequenceFeature,
                                      VarLenFeature, _features)


def _values(feature, entry, where):
    """The values of the Feature ``entry`` as ``feature``'s array; TF's error, after
    ``where``, when it holds another list."""
    kind = entry.WhichOneof("kind")
    if kind is not None and kind != feature.list_name:
        raise InvalidArgumentError(f"{where}.  Data types don't match. Expected type: "
                                   f"{feature.tf_dtype}")
    return feature.values(getattr(entry, kind).value if kind else [])


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
        values = _values(feature, entry, f"Name: {name}, Context feature: {feature.key}")
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
            values = _values(feature, entry,
                             f"Name: {name}, Feature list: {feature.key}, Index: {step}")
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
    return _parse_sequence(serialized, context_features, sequence_features, example_name,
                           _walkers.sequence)


def _parse_sequence(serialized, context_features, sequence_features, example_name, walker):
    """:func:`parse_single_sequence_example` with the walker that tries the record first
    (see :mod:`._walkers`; the general path below takes what it leaves)."""
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
    plain = walker(data, context, sequence, list(sequence_specs.values()))
    if plain is not None:
        return plain
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
