"""``parse_example`` and ``parse_single_example``: the public Example parsers, and the cache
of normalized specs they share."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing import _composite, _walkers
from queuepipe.parsing._items import exact_bytes
from queuepipe.parsing._record import _parse_record
from queuepipe.parsing._single import _single_parser
from queuepipe.parsing._sinks import _finish, _sink, _unbatch
from queuepipe.parsing._specs import (_FIXED, _MAX_CACHED, _SEQ, FixedLenFeature,
                                      FixedLenSequenceFeature, VarLenFeature, _Feature,
                                      _features)


def _batch_records(serialized, kind="Example"):
    """The records of a batch of ``kind`` (Example, SequenceExample) as a list of bytes, or
    TypeError saying what is wrong."""
    if isinstance(serialized, (bytes, bytearray, memoryview, str)):
        function = "parse_example" if kind == "Example" else "parse_sequence_example"
        raise TypeError(f"{function} takes a batch (a list or 1-D array of serialized "
                        f"{kind}s); use parse_single_{function[6:]} for one record")
    if isinstance(serialized, np.ndarray):
        if serialized.dtype.kind == "S":
            raise TypeError("a NumPy bytes ('S') array drops the trailing zero bytes of each "
                            "record; pass a list or an object array of bytes")
        if serialized.ndim != 1:
            raise ValueError(f"serialized must be 1-D, got shape {serialized.shape}")
        if type(serialized) is not np.ndarray or serialized.dtype != object \
                or not serialized.flags.c_contiguous:  # (a masked array lists None)
            serialized = serialized.tolist()
    elif type(serialized) is not list and type(serialized) is not tuple:
        serialized = list(serialized)
    records = exact_bytes(serialized)  # (one pass: the common case)
    if records is not None:
        return records
    records = list(serialized)
    for index, data in enumerate(records):
        if not isinstance(data, bytes):
            if not isinstance(data, (bytearray, memoryview)):
                raise TypeError(f"serialized[{index}] must be bytes, got "
                                f"{type(data).__name__}: {data!r:.60}")
            records[index] = bytes(data)
    return records


def _batch_names(example_names, batch):
    """The records' names, or None; an empty ``example_names`` is no names, as in TF."""
    if example_names is None:
        return None
    names = list(np.asarray(example_names, dtype=object).ravel())
    if not names:
        return None
    if len(names) != batch:
        raise InvalidArgumentError(f"Expected names have the same shape as serialized: "
                                   f"name.shape=[{len(names)}], serialized.shape=[{batch}]")
    return names


def _parse_batch(records, features, names, walker=_walkers.walk, single=False, size=None):
    """Parses a list of serialized Examples with normalized ``features``: the ``walker``
    (see :mod:`._walkers`; None: none) takes what it can, the per-record parser the rest.
    ``size``: the outputs of each batch of ``size`` records, a list (see
    :func:`parse_example_batches`)."""
    sinks = [_sink(feature, len(records)) for feature in features]
    left = walker(records, features, sinks) if walker else range(len(records))
    for index in left:
        _parse_record(records[index], index, None if names is None else names[index],
                      features, sinks, single)
    if size is None:
        return {feature.key: output for feature, output in zip(features, _finish(sinks))}
    batches = _finish(sinks, size) if sinks else [[]] * (len(records) // size)
    return [{feature.key: output for feature, output in zip(features, outputs)}
            for outputs in batches]


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
        if len(_CONFIGS) >= _MAX_CACHED:
            _CONFIGS.clear()
        _CONFIGS[cache_key] = parsed
    if len(_SPECS) >= _MAX_CACHED:
        _SPECS.clear()
    _SPECS[id(features)] = (features, dict(features), parsed)
    return parsed


class _ExampleFeatures(list):
    """The normalized features of an Example spec, and the single-record parsers learned for
    it: record length -> a function of a record of that length that returns its outputs, or
    None when the record is not laid out as the length's template (see _single_parser)."""

    __slots__ = ("single_parsers", "lengths_seen", "composite", "core_spec", "single_plan")

    def __init__(self, features):
        super().__init__(features)
        self.core_spec = None  # the features as the compiled walk takes them (._walkers)
        self.single_plan = None  # the compiled walk's function of one record (._walkers)
        # The spec as given when it holds a SparseFeature (built from the outputs of the
        # VarLenFeatures it was expanded into: see _composite), else None.
        self.composite: Optional[Dict[str, Any]] = None
        # None when a feature is not a FixedLenFeature: no template serves such a spec.
        self.single_parsers: Optional[Dict[int, Callable[[bytes], Optional[Dict[str, Any]]]]] \
            = {} if all(feature.kind == _FIXED for feature in self) else None
        self.lengths_seen: set = set()


def _new_example_features(features):
    plain, composite = _composite.expand(features)
    parsed = _ExampleFeatures(_features(
        plain, (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature), "features"))
    for feature, spec in zip(parsed, plain.values()):
        if feature.kind == _SEQ and not spec.allow_missing:
            raise ValueError(f"feature {feature.key!r}: Unsupported: FixedLenSequenceFeature "
                             f"requires allow_missing to be True.")
    if composite:
        parsed.composite = dict(features)
    return parsed


def parse_example(serialized: Union[Sequence[bytes], np.ndarray], features: Mapping[str, Any],
                  name: Optional[str] = None,
                  example_names: Union[Sequence[Any], np.ndarray, None] = None) -> Dict[str, Any]:
    """Parses a batch of serialized ``Example`` protos, as ``tf.io.parse_example``.

    Args:
      serialized: the records: a list, tuple or 1-D object array of ``bytes``.
      features: feature key -> :class:`FixedLenFeature`, :class:`VarLenFeature`,
        :class:`SparseFeature` or :class:`FixedLenSequenceFeature` (``allow_missing=True``).
      name: accepted for TF compatibility; unused.
      example_names: one name per record (for instance the keys a reader returned), quoted
        in errors as ``Name:``; ``<unknown>`` when not given.

    Returns:
      feature key -> ``[batch, *shape]`` array for a FixedLenFeature,
      ``[batch, longest, *shape]`` (padded with its default) for a FixedLenSequenceFeature,
      and a :class:`SparseValue` with ``[N, 2]`` indices for a VarLenFeature
      (``[N, 1 + index keys]`` and dense shape ``[batch, *size]`` for a SparseFeature).

    Raises:
      InvalidArgumentError: a record does not parse, lacks a required feature, or holds a
        feature with the wrong data type or number of values. The message is TF's and names
        the record (its index and name) and the feature key.
      TypeError, ValueError: ``serialized`` or ``features`` is malformed.
    """
    del name
    records = _batch_records(serialized)
    parsed_features = _example_features(features)
    outputs = _parse_batch(records, parsed_features, _batch_names(example_names, len(records)))
    return _with_composites(outputs, parsed_features)


def parse_example_batches(serialized: Union[Sequence[bytes], np.ndarray],
                          features: Mapping[str, Any], size: int) -> List[Dict[str, Any]]:
    """:func:`parse_example` of each batch of ``size`` records of ``serialized`` (whose
    length is a multiple of ``size``), made by one parse of all of them: what
    ``read_batch_features`` parses the batches it draws ahead with (one call per few
    batches, not per batch: the parse's cost per call is a wide schema's few hundred
    outputs). A FixedLenFeature's batches are views of one array; the rest is as each
    batch's own parse gives it, its errors too (but for the index of a record that does not
    parse: its place in ``serialized``). ``features`` hold FixedLenFeatures and
    VarLenFeatures only (a FixedLenSequenceFeature's batches would be padded to the longest
    list of all of them, not of each)."""
    records = _batch_records(serialized)
    parsed_features = _example_features(features)
    if parsed_features.composite is not None or any(f.kind == _SEQ for f in parsed_features):
        raise ValueError("parse_example_batches: takes FixedLenFeatures and VarLenFeatures "
                         "only")
    if size <= 0 or len(records) % size:
        raise ValueError(f"parse_example_batches: {len(records)} records are not batches of "
                         f"{size}")
    return _parse_batch(records, parsed_features, None, size=size)


def _with_composites(outputs, parsed_features):
    """``outputs`` with the SparseFeatures of the spec built (see :mod:`._composite`)."""
    if parsed_features.composite is None:
        return outputs
    return _composite.merge(outputs, parsed_features.composite)


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
    parsers = parsed_features.single_parsers
    plain = None
    if parsers is not None:
        plain = (parsers.get(len(serialized)) or _single_parser(serialized, parsed_features))(
            serialized)
    if plain is None:
        plain = _walkers.single(serialized, parsed_features)
    if plain is None:
        names = None if example_names is None else [example_names]
        batch = _parse_batch([serialized], parsed_features, names, walker=None, single=True)
        plain = {key: _unbatch(value) for key, value in batch.items()}
    if parsed_features.composite is None:  # (_with_composites, without a call per record)
        return plain
    return _composite.merge(plain, parsed_features.composite)
