"""Map entries read at the wire level: the ones TensorFlow rejects and protobuf reads, and the
entries of a record protobuf cannot parse as a whole.

TF's parser reads an Example's feature map by hand and rejects a map entry that holds a field
other than its key and value, or lacks the key or the value. protobuf reads all three: an
entry without a value is an empty Feature, and an entry with an unknown field is dropped (kept
aside as an unknown field of Features), so a requested feature would silently take its
default. Parsers call :func:`map_problem` where a record gives a feature its default (the
requested key absent, or its Feature empty): the one place where following protobuf would
hide such a record. Elsewhere they follow protobuf, as ``docs/migration.md`` says.

TF also parses a record whose damage lies only in features it was not asked for, where
protobuf refuses the whole record: :func:`entries` splits such a record into its map entries
without looking inside them, so that a parser can read the requested ones alone.
"""

from typing import Dict, Iterator, List, Optional, Tuple

__all__ = ["map_problem", "entries", "unlisted", "fields", "read_varint", "Malformed"]

_LEN = 2  # the wire type of length-delimited fields
# The first byte of a Feature that holds a list: the tag of bytes_list, float_list or
# int64_list (fields 1-3, length-delimited). TF's parser types a Feature by this byte alone.
_LIST_TAGS = (0x0A, 0x12, 0x1A)


class Malformed(Exception):
    """The bytes do not split into protobuf fields."""


def read_varint(data: bytes, pos: int, end: int) -> Tuple[int, int]:
    """The varint at ``pos`` (at most ten bytes) and the position after it."""
    value = shift = 0
    while pos < end and shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise Malformed


def fields(data: bytes, pos: int, end: int) -> Iterator[Tuple[int, int, int, int]]:
    """Yields ``(number, wire type, start, stop)`` of each field in ``data[pos:end]``. A group
    (no TF message has one, but protobuf skips it as an unknown field) spans its fields and
    its end tag; an end tag with no group open is Malformed, as protobuf has it."""
    while pos < end:
        number, wire, pos, stop = _field(data, pos, end, 0)
        yield number, wire, pos, stop
        pos = stop


# How deep groups may nest in one another: protobuf's default recursion limit.
_MAX_GROUP_DEPTH = 100
_START_GROUP, _END_GROUP = 3, 4


def _field(data: bytes, pos: int, end: int, depth: int) -> Tuple[int, int, int, int]:
    """``(number, wire type, start, stop)`` of the field whose tag is at ``pos``."""
    tag, pos = read_varint(data, pos, end)
    number, wire = tag >> 3, tag & 7
    if wire == 0:
        _, stop = read_varint(data, pos, end)
    elif wire == 1:
        stop = pos + 8
    elif wire == _LEN:
        size, pos = read_varint(data, pos, end)
        stop = pos + size
    elif wire == 5:
        stop = pos + 4
    elif wire == _START_GROUP and depth < _MAX_GROUP_DEPTH:
        stop = pos
        while True:  # the group's fields, up to the end tag of its number
            inner, inner_wire, _, stop = _field(data, stop, end, depth + 1)
            if inner_wire == _END_GROUP:
                if inner != number:
                    raise Malformed
                break
    elif wire == _END_GROUP and depth:
        stop = pos  # closes the group being read (the caller checks its number)
    else:
        raise Malformed
    if stop > end:
        raise Malformed
    return number, wire, pos, stop


def _map_entries(data: bytes, sequence: bool) -> Iterator[Tuple[int, int, int]]:
    """Yields ``(map, start, stop)`` of each map entry: map 1 is an Example's features (a
    SequenceExample's context), map 2 a SequenceExample's feature lists. A field numbered 0
    in a map's message is Malformed: protobuf and TF both refuse it there."""
    maps = (1, 2) if sequence else (1,)
    for number, wire, start, stop in fields(data, 0, len(data)):
        if number in maps and wire == _LEN:
            for entry, entry_wire, entry_start, entry_stop in fields(data, start, stop):
                if entry == 0:
                    raise Malformed
                if entry == 1 and entry_wire == _LEN:
                    yield number, entry_start, entry_stop


def _entry_problem(data: bytes, start: int, end: int) -> Optional[str]:
    parts = set()
    for number, wire, _, _ in fields(data, start, end):
        if number not in (1, 2) or wire != _LEN:
            return f"a map entry holds an unknown field {number}"
        parts.add(number)
    if 1 not in parts:
        return "a map entry has no key"
    if 2 not in parts:
        return "a map entry has no value"
    return None


def map_problem(data: bytes, sequence: bool = False) -> Optional[str]:
    """What TF rejects in the map entries of the serialized Example (``sequence``:
    SequenceExample, both of its maps) ``data``, in words, or None."""
    try:
        for _, start, stop in _map_entries(data, sequence):
            problem = _entry_problem(data, start, stop)
            if problem:
                return problem
    except Malformed:
        return "malformed wire format"
    return None


def entries(data: bytes, sequence: bool = False) -> Optional[Dict[int, List[Tuple[bytes, bytes]]]]:
    """The map entries of the serialized Example (``sequence``: SequenceExample) ``data``, in
    order, duplicates kept, as ``{map: [(key, value), ...]}`` (maps numbered as for
    :func:`_map_entries`), each value left as the bytes of its message (a value given twice
    is the two concatenated, which protobuf reads as their merge); None when the bytes do
    not split into entries. Nothing inside the values is looked at: TF reads only the
    features it was asked for.
    """
    found: Dict[int, List[Tuple[bytes, bytes]]] = {1: [], 2: []}
    try:
        for number, start, stop in _map_entries(data, sequence):
            key, value = b"", []
            for field, _, field_start, field_stop in fields(data, start, stop):
                if field == 1:
                    key = data[field_start:field_stop]
                elif field == 2:
                    value.append(data[field_start:field_stop])
            found[number].append((key, b"".join(value)))
    except Malformed:
        return None
    return found


def unlisted(data: bytes, key: bytes, sequence: bool = False,
             steps: bool = False) -> Optional[int]:
    """Where TF's parser refuses a Feature under ``key``: one that is not empty and does not
    begin with a list's tag (it holds only an unknown field, a list's field number with
    another wire type, a field numbered 0, or an unknown field before its list), which
    protobuf reads as an empty Feature or as its list.

    Looks at every entry of ``key`` in the Example ``data``'s features (with ``sequence``, a
    SequenceExample's context) and returns the entry's position among them; with ``steps``,
    at the steps of the feature list ``key`` of a SequenceExample, and returns the step.
    None when every such Feature begins with a list, or the record does not split into
    entries (its parser reports that).
    """
    found = entries(data, sequence or steps)
    if found is None:
        return None
    position = 0
    for entry_key, value in found[2 if steps else 1]:
        if entry_key != key:
            continue
        try:
            features = ([value[start:stop] for number, wire, start, stop
                         in fields(value, 0, len(value)) if number == 1 and wire == _LEN]
                        if steps else [value])
        except Malformed:
            return None
        for feature in features:
            if feature and feature[0] not in _LIST_TAGS:
                return position
            position += 1
        if steps:
            position = 0
    return None
