"""The per-record (general) Example parser: protobuf reads the record, and every error is
raised here, with TF's words, so that the bulk paths agree with it on every record."""

from __future__ import annotations

from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing._specs import _FIXED, _LIST_TF_NAME, _SEQ, _VALUES_WORD, _VAR
from queuepipe.protos import _wire


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


def _unparsable(data, lead, problem):
    """TF's error for a record it cannot read: ``lead`` (TF's words, naming the record), a
    short prefix of the record, and the ``problem``."""
    shown = repr(bytes(data[:48])) + ("..." if len(data) > 48 else "")
    return InvalidArgumentError(f"{lead}, value: {shown} ({len(data)} bytes): {problem}")


def _example_lead(name, index):
    """TF's words for an Example it cannot read (a SequenceExample's are
    ``Invalid protocol message input, example id: <name>``)."""
    return f"Name: {name}, Index: {index}.  Could not parse example input"


def _check_entries(data, lead, sequence=False):
    """Raises TF's error for a record whose map entries TF rejects (see
    :mod:`queuepipe.protos._wire`); called where such an entry could hide behind a default."""
    problem = _wire.map_problem(data, sequence)
    if problem:
        raise _unparsable(data, lead, f"{problem} (TensorFlow rejects the record; protobuf "
                                      f"would read it)")


def _has_unknown_fields(message):
    return len(_protobuf()[5](message)) > 0


def _refuse_unlisted(data, key, name, index):
    """Raises TF's error when an entry of ``key`` in the Example ``data`` holds a Feature that
    TF's parser cannot type (see :func:`queuepipe.protos._wire.unlisted`). Called where
    protobuf's reading shows a sign of one: a Feature with no list, or with unknown fields."""
    if _wire.unlisted(data, key.encode("utf-8")) is not None:
        raise InvalidArgumentError(
            f"Name: {name}, Key: {key}, Index: {index}.  Unsupported datatype. (the Feature "
            f"does not begin with an int64_list, float_list or bytes_list: TensorFlow rejects "
            f"it; protobuf would skip what comes first)")


def _parse_record(data, index, name, features, sinks, single=False):
    """Parses record ``index`` of a batch into ``sinks``, raising TF's errors. ``single``:
    for parse_single_example, whose TF kernel keeps the earlier value of a VarLenFeature
    whose key comes again with an empty Feature (parse_example's takes the empty one)."""
    name = _name_text(name)
    fmap, suspicious = _feature_map(data, name, index, features)
    for feature, sink in zip(features, sinks):
        entry = fmap.get(feature.key)
        kind = None if entry is None else entry.WhichOneof("kind")
        if entry is not None and (kind is None or _has_unknown_fields(entry)):
            _refuse_unlisted(data, feature.key, name, index)
        if kind is None and suspicious:
            _check_entries(data, _example_lead(name, index))
            suspicious = False  # checked: the record's entries are sound
        if kind is None and entry is not None and (feature.kind != _VAR or single):
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


def _feature_map(data, name, index, features):
    """``(map, suspicious)``: key -> Feature of the Example ``data``, as protobuf's map (when
    protobuf cannot parse the whole record, as TF reads it: see :func:`_lazy_maps`), and
    whether an entry TF rejects may hide behind a default (see :func:`_suspicious`)."""
    try:
        features_message = _protobuf()[0].FromString(data).features
    except _protobuf()[2] as e:
        return _lazy_maps(data, _example_lead(name, index), e,
                          [feature.key for feature in features],
                          check=lambda _, key: _refuse_unlisted(data, key, name, index))[0], False
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


def _lazy_maps(data, lead, cause, keys, list_keys=None, *, check):
    """The maps of a record protobuf cannot parse as a whole, as TF reads it: the map entries
    must be whole (TF's rules), and only the requested features are parsed. Returns the
    context map (an Example's features) and, with ``list_keys``, a SequenceExample's feature
    lists, each a dict key -> message (last entry winning, as in a map). ``check(map, key)``
    (map 1: features, 2: feature lists) runs for each requested key once the entries are
    found sound, before its messages are parsed: it raises TF's error for a Feature TF cannot
    type, which protobuf might refuse with its own.

    Raises:
      InvalidArgumentError: the record does not split into map entries, an entry breaks TF's
        rules, or a requested feature does not parse (the message names its key).
    """
    found = _wire.entries(data, sequence=list_keys is not None)
    if found is None:
        raise _unparsable(data, lead, cause) from cause
    _check_entries(data, lead, sequence=list_keys is not None)
    for number, wanted in ((1, keys), (2, list_keys)):
        for key in wanted or ():
            check(number, key)
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
                    raise _unparsable(data, lead, f"the {message.__name__} of key "
                                      f"{key.decode('utf-8')!r} does not parse: {e}") from e
        maps.append(parsed)
    return maps


def _last_listed(data, key):
    """The last Feature under ``key`` in the Example ``data`` that holds a list, or None.

    TF's rule for a dense feature whose key appears twice, the later entry an empty Feature
    (and for a sparse one in parse_single_example): the empty one is skipped and the earlier
    value stays (a map, last entry winning, has lost it).
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
