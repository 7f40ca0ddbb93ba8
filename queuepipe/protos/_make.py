"""Examples and SequenceExamples from plain dicts of Python and NumPy values."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from queuepipe.protos._messages import (Example, Feature, FeatureList, FeatureLists, Features,
                                        SequenceExample)

__all__ = ["make_example", "make_sequence_example"]

_TEXT = (bytes, str)


def _as_bytes(value):
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _type_error(key, value, detail=""):
    return TypeError(f"feature {key!r}: cannot make a Feature from a value of type "
                     f"{type(value).__name__}{detail}: {value!r:.80}; expected bytes, str, "
                     f"int, float, a list or NumPy array of one of them, or a Feature")


def _fill(feature, key, value):
    """Sets ``feature`` (a :class:`Feature`) from ``value``, choosing the list by its type."""
    if isinstance(value, Feature):
        feature.CopyFrom(value)
    elif isinstance(value, _TEXT):
        feature.bytes_list.value.append(_as_bytes(value))
    elif isinstance(value, (int, np.integer, np.bool_)):  # bool is an int
        feature.int64_list.value.append(int(value))
    elif isinstance(value, (float, np.floating)):
        feature.float_list.value.append(float(value))
    elif isinstance(value, (list, tuple)) and not value:
        feature.SetInParent()  # an empty list: a present-but-empty Feature of no kind
    elif isinstance(value, (list, tuple, np.ndarray)):
        _fill_array(feature, key, value)
    else:
        raise _type_error(key, value)


def _fill_array(feature, key, value):
    """Sets ``feature`` from a list or array, flattened row-major."""
    try:
        array = np.asarray(value)
        if array.dtype.kind in "SU" and not isinstance(value, np.ndarray):
            array = np.asarray(value, dtype=object)  # keep each bytes/str as it is
    except ValueError as e:  # a ragged nested list
        raise _type_error(key, value, f" ({e})") from None
    flat = array.ravel().tolist()
    kind = array.dtype.kind
    if kind in "biu":
        target = feature.int64_list
    elif kind == "f":
        target = feature.float_list
    elif kind in "SU" or (kind == "O" and all(isinstance(item, _TEXT) for item in flat)):
        target = feature.bytes_list
        flat = [_as_bytes(item) for item in flat]
    else:
        raise _type_error(key, value, f" (dtype {array.dtype})")
    target.SetInParent()
    target.value.extend(flat)


def _features(values: Mapping[str, Any]):
    features = Features()
    for key, value in values.items():
        _fill(features.feature[key], key, value)
    return features


def make_example(features: Mapping[str, Any]) -> Example:
    """Builds an :class:`Example` from a dict of plain values.

    Each value chooses its list: ``bytes``/``str`` (or a list/array of them) a ``bytes_list``
    (``str`` is UTF-8 encoded); ``int``, ``bool`` or an integer/bool array an ``int64_list``;
    ``float`` or a float array a ``float_list``. Arrays of any rank are flattened in row-major
    order, as TF's parsers expect. A :class:`Feature` is copied as it is, and an empty list
    gives a present-but-empty Feature.

    Usage::

        example = make_example({"image": image.tobytes(), "label": 7, "xy": [0.5, 1.5]})
        writer.write(example.SerializeToString())

    Args:
      features: feature key -> value.

    Returns:
      The Example.

    Raises:
      TypeError: a value is of a type no list holds; the message names its key and type.
    """
    example = Example()
    example.features.CopyFrom(_features(features))
    return example


def make_sequence_example(context: Mapping[str, Any] | None = None,
                          feature_lists: Mapping[str, Any] | None = None) -> SequenceExample:
    """Builds a :class:`SequenceExample` from a context dict and a dict of per-step values.

    ``context`` is converted as in :func:`make_example`. Each ``feature_lists`` value is a
    sequence of steps (a list, or an array whose first axis is time), each step converted as in
    :func:`make_example`, or a ready :class:`FeatureList`.

    Args:
      context: feature key -> value, for features that apply to the whole sequence.
      feature_lists: feature key -> list of step values, or a FeatureList.

    Returns:
      The SequenceExample.

    Raises:
      TypeError: a value or step is of a type no list holds, or a feature list is not a
        sequence; the message names its key.
    """
    example = SequenceExample()
    example.context.CopyFrom(_features(context or {}))
    lists = FeatureLists()
    for key, steps in (feature_lists or {}).items():
        target = lists.feature_list[key]
        if isinstance(steps, FeatureList):
            target.CopyFrom(steps)
            continue
        if isinstance(steps, (bytes, str)) or not isinstance(steps, (list, tuple, np.ndarray)):
            raise TypeError(f"feature list {key!r}: expected a list of steps, an array or a "
                            f"FeatureList, got {type(steps).__name__}: {steps!r:.80}")
        for step, value in enumerate(steps):
            _fill(target.feature.add(), f"{key}[{step}]", value)
    example.feature_lists.CopyFrom(lists)
    return example
