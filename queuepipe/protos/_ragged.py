"""Walk many serialized Examples at once, whatever their lengths: the ragged bulk path.

:mod:`queuepipe.protos._layout` decodes records that share one template byte for byte. Records
whose features have a different number of values (token lists, boxes) differ in every length
byte after the first variable feature, so each record would need its own template. This walk
instead advances one cursor per record through the same grammar, every step a NumPy operation
over all records at once::

    Example      0x0A len  Features
    Features     (0x0A len  entry)*
    entry        0x0A len key   0x12 len Feature
    Feature      0x0A|0x12|0x1A len  list       (bytes, float, int64)
    list         0x0A len payload               (packed floats or varints; bytes: one per value)

A record that strays from it (an unknown field, an unpacked list, a requested key twice,
malformed bytes) is marked and left to the caller's per-record parser, as are the records the
caller rejects afterwards; the others come back as flat values and counts per feature.
"""

import numpy as np

from queuepipe.protos._layout import _LIST_NAMES
from queuepipe.sparse import segments

__all__ = ["RaggedLists", "walk"]

_LIST_TAGS = tuple(_LIST_NAMES)  # a Feature's bytes_list, float_list, int64_list
_MAX_VARINT_BYTES = 10
# Spans this long on average are cut as slices; shorter ones gathered byte by byte.
_SLICED_SPAN = 64
# The walk reads bytes lists one value per step for all records at once: a record whose list
# holds more values than this is left to the per-record parser, whose cost is linear in the
# values (a step costs about as much as a record, so one list of 100,000 empty strings would
# take 100,000 steps).
_MAX_STRING_STEPS = 64


class RaggedLists:
    """One feature's values across the records walked.

    Attributes:
      list_tag: per record, the list's tag byte (0x0A, 0x12, 0x1A), 0 for an empty Feature,
        -1 where the key is absent.
      counts: per record, the number of values.
      values: the values of every record, in record order: int64, float32, or an object
        array of bytes.
    """

    def __init__(self, list_tag, counts, values):
        self.list_tag = list_tag
        self.counts = counts
        self.values = values


class _Cursor:
    """The records' bytes in one buffer (padded so that reads past an end stay inside), the
    records' start and end offsets, and which records still follow the grammar."""

    def __init__(self, records):
        lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
        self.ends = np.cumsum(lengths)
        self.starts = self.ends - lengths
        self.buf = np.frombuffer(b"".join(records) + bytes(_MAX_VARINT_BYTES + 1),
                                 dtype=np.uint8)
        self.ok = np.ones(len(records), dtype=bool)

    def at(self, pos):
        """The bytes at ``pos``; a position past the end (a record already marked bad, whose
        lengths are garbage) reads the last padding byte instead of failing."""
        return self.buf[np.minimum(pos, len(self.buf) - 1)]

    def payload(self, start, end):
        """The bytes ``[start[i], end[i])`` of every i, concatenated: long spans as slices
        joined, short ones (one varint each, say) by one gather."""
        sizes = end - start
        if len(start) and int(sizes.sum()) >= _SLICED_SPAN * len(start):
            buf = self.buf
            return np.concatenate([buf[a:b] for a, b in zip(start.tolist(), end.tolist())])
        return self.buf[segments(start, sizes)]

    def expect(self, rows, pos, tag, limit):
        """Reads ``tag`` and a varint length at ``pos`` for ``rows``; returns the payload's
        (start, end), marking the rows where the tag differs or the payload passes
        ``limit``."""
        good = self.at(pos) == tag
        size, start, done = self.varint(pos + 1)
        end = start + size
        good &= done & (end <= limit)
        self.ok[rows[~good]] = False
        return start, end

    def varint(self, pos):
        """The varints at ``pos`` (lengths: below 2**62 once clipped); returns (values,
        positions after them, whether each ended within 10 bytes). Each step reads one more
        byte of every varint (of those still going: the others add nothing), so that the
        usual one or two steps cost a few operations each."""
        byte = self.at(pos)
        value = (byte & 0x7F).astype(np.uint64)
        going = byte >= 0x80
        after = pos + 1
        for k in range(1, _MAX_VARINT_BYTES):
            if not going.any():
                break
            byte = self.at(pos + k)
            value |= ((byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)) * going
            after += going
            going &= byte >= 0x80
        return np.minimum(value, np.uint64(1 << 62)).astype(np.int64), after, ~going


def walk(records, keys):
    """Walks the serialized Examples ``records`` (a list of bytes) for the feature ``keys``.

    Returns:
      ``(ok, lists)``: a bool per record, False where the record strays from the plain
      grammar (the caller parses those one by one), and key -> :class:`RaggedLists` (its
      counts and values cover the good records only).
    """
    cursor = _Cursor(records)
    rows = np.arange(len(records))
    found = {key: np.full(len(records), -1, dtype=np.int64) for key in keys}  # tag per row
    spans = {key: (np.zeros(len(records), np.int64), np.zeros(len(records), np.int64))
             for key in keys}
    nonempty = cursor.ends > cursor.starts
    pos, end = cursor.expect(rows[nonempty], cursor.starts[nonempty], 0x0A,
                             cursor.ends[nonempty])
    cursor.ok[rows[nonempty][end != cursor.ends[nonempty]]] = False
    live, pos, end = rows[nonempty], pos, end
    entries = []  # per step: the rows and the spans of their keys and Features
    while True:
        going = cursor.ok[live] & (pos < end)
        live, pos, end = live[going], pos[going], end[going]
        if not len(live):
            break
        entry_start, entry_end = cursor.expect(live, pos, 0x0A, end)
        key_start, key_end = cursor.expect(live, entry_start, 0x0A, entry_end)
        feature_start, feature_end = cursor.expect(live, key_end, 0x12, entry_end)
        cursor.ok[live[feature_end != entry_end]] = False
        entries.append((live, key_start, key_end, feature_start, feature_end))
        pos = entry_end
    if entries:
        _take_features(cursor, keys, [np.concatenate(part) for part in zip(*entries)],
                       found, spans)
    while True:  # a record rejected for one feature is left out of every feature's values
        rejected = int((~cursor.ok).sum())
        lists = {key: _values(cursor, found[key], spans[key]) for key in keys}
        if int((~cursor.ok).sum()) == rejected:
            return cursor.ok, lists


def _take_features(cursor, keys, entries, found, spans):
    """Reads the Features of the requested ``keys`` among every record's map ``entries``
    (rows, key starts and ends, Feature starts and ends, in walk order): the keys are looked
    up once each in a dict, then each requested key's Features are read together, so that
    the walk costs a few operations per key and per entry, not per key and entry."""
    rows, key_start, key_end, feature_start, feature_end = entries
    sizes = key_end - key_start
    index = {key.encode("utf-8"): i for i, key in enumerate(keys)}
    maybe = np.flatnonzero(cursor.ok[rows] & np.isin(sizes, [len(key) for key in index]))
    raw = cursor.buf.tobytes()
    ids = np.full(len(rows), -1, dtype=np.int64)
    ids[maybe] = [index.get(raw[a:b], -1)
                  for a, b in zip(key_start[maybe].tolist(), key_end[maybe].tolist())]
    wanted = np.flatnonzero(ids >= 0)
    order = wanted[np.argsort(ids[wanted], kind="stable")]  # by key, then in walk order
    groups = np.flatnonzero(np.diff(ids[order], prepend=-1, append=len(keys)))
    for first, stop in zip(groups[:-1].tolist(), groups[1:].tolist()):
        chosen = order[first:stop]
        hit = rows[chosen]
        key = keys[ids[chosen[0]]]
        twice = np.unique(hit, return_counts=True)
        cursor.ok[twice[0][twice[1] > 1]] = False  # a requested key twice
        _feature(cursor, hit, feature_start[chosen], feature_end[chosen], found[key],
                 spans[key])


def _feature(cursor, rows, start, end, tags, spans):
    """Records the list of each of ``rows``' Features: its tag, and its payload's span."""
    empty = start == end
    tags[rows[empty]] = 0
    spans[0][rows[empty]] = spans[1][rows[empty]] = 0
    rows, start, end = rows[~empty], start[~empty], end[~empty]
    tag = cursor.at(start)
    known = np.isin(tag, _LIST_TAGS)
    cursor.ok[rows[~known]] = False
    body_start, body_end = cursor.expect(rows, start, tag, end)
    cursor.ok[rows[body_end != end]] = False
    tags[rows] = tag
    packed = tag != 0x0A
    none = body_start == body_end
    spans[0][rows[none]] = spans[1][rows[none]] = 0
    numbers = rows[packed & ~none]
    payload_start, payload_end = cursor.expect(numbers, body_start[packed & ~none], 0x0A,
                                               body_end[packed & ~none])
    cursor.ok[numbers[payload_end != body_end[packed & ~none]]] = False
    spans[0][numbers], spans[1][numbers] = payload_start, payload_end
    strings = ~packed & ~none  # a bytes list: its body, walked value by value later
    spans[0][rows[strings]], spans[1][rows[strings]] = body_start[strings], body_end[strings]


def _values(cursor, tags, spans):
    """The flat values and per-record counts of one feature, for the good records; marks
    the records whose list does not decode (the caller then walks again)."""
    good = cursor.ok
    tags = np.where(good, tags, -1)
    start, end = np.where(good, spans[0], 0), np.where(good, spans[1], 0)
    kinds = np.unique(tags[tags > 0]).tolist()
    if len(kinds) > 1:  # one key holding different lists: the parser reports it per record
        cursor.ok[tags > 0] = False
        return RaggedLists(tags, np.zeros(len(tags), dtype=np.int64), np.zeros(0))
    kind = kinds[0] if kinds else 0x1A
    sizes = end - start
    if kind == 0x0A:  # bytes lists: each value a 0x0A len payload
        values, counts = _strings(cursor, start, end)
        return RaggedLists(tags, counts, values)
    data = cursor.payload(start, end)
    if kind == 0x12:  # packed little-endian floats
        cursor.ok[sizes % 4 != 0] = False
        return RaggedLists(tags, sizes // 4, data[:len(data) // 4 * 4].view("<f4")
                           .astype(np.float32))
    last = np.cumsum(sizes) - 1  # packed varints: each span must end a varint
    cursor.ok[(sizes > 0) & (data[np.maximum(last, 0)] >= 0x80) if len(data) else
              np.zeros(len(sizes), dtype=bool)] = False
    ends = np.flatnonzero(data < 0x80)
    counts = np.diff(np.searchsorted(ends, np.concatenate(([0], np.cumsum(sizes)))))
    return RaggedLists(tags, counts, _varints(data, ends))


def _varints(data, ends):
    """The int64s of the varints of ``data`` ending at ``ends``, as protobuf reads them.

    Varints of up to 8 bytes (every value below 2**56) are decoded at once: each one's size
    (one more than the continuation bytes before its last byte), then the 4 or 8 bytes
    ending at its last byte read as one little-endian word, shifted so that its first byte
    comes lowest, and the 7-bit groups packed together. Longer ones (negative values take
    10 bytes) go byte by byte: :func:`_long_varints`.
    """
    if len(ends) == len(data):  # every varint one byte long: the bytes are the values
        return data.astype(np.int64)
    n = len(data)
    cont = data >= 0x80
    sizes = np.ones(n, dtype=np.uint8)  # at a varint's last byte: its size
    run, longest = cont[:-1], 1  # run[i]: the longest bytes before i + longest continue
    while run.any():
        if longest == 8:
            return _long_varints(data, ends)
        sizes[longest:] += run
        longest += 1
        run = run[1:] & cont[:n - longest]
    width = 4 if longest <= 4 else 8
    word = np.dtype(f"<u{width}")
    padded = np.zeros(n + width - 1, dtype=np.uint8)
    padded[width - 1:] = data
    # words[i]: the bytes i - width + 1 .. i of data (an unaligned view, copied aligned)
    words = np.ndarray((n,), dtype=word, buffer=padded, strides=(1,)).astype(word)
    words = words.take(ends)
    words >>= ((width - sizes.take(ends)) * 8).astype(word)
    out = words & word.type(0x7F)
    for k in range(1, longest):
        out |= (words >> word.type(k)) & word.type(0x7F << (7 * k))
    return out.astype(np.int64)


def _long_varints(data, ends):
    """:func:`_varints` of any length: the first byte of every varint, then the second
    byte of those longer than one, ..."""
    lengths = np.diff(ends, prepend=-1)
    starts = ends - lengths + 1
    value = (data[starts] & 0x7F).astype(np.uint64)
    longer = np.flatnonzero(lengths > 1)
    k = 1
    while len(longer):
        value[longer] |= (data[starts[longer] + k] & 0x7F).astype(np.uint64) \
            << np.uint64(7 * k)
        k += 1
        longer = longer[lengths[longer] > k]
    return value.view(np.int64)


def _strings(cursor, start, end):
    """The values of bytes lists whose bodies lie at ``[start, end)``, and their counts."""
    counts = np.zeros(len(start), dtype=np.int64)
    pieces = []  # (row, value start, value end)
    rows = np.flatnonzero(end > start)
    pos, limit = start[rows], end[rows]
    for _ in range(_MAX_STRING_STEPS):
        if not len(rows):
            break
        value_start, value_end = cursor.expect(rows, pos, 0x0A, limit)
        keep = cursor.ok[rows]
        pieces.append((rows[keep], value_start[keep], value_end[keep]))
        counts[rows[keep]] += 1
        going = keep & (value_end < limit)
        rows, pos, limit = rows[going], value_end[going], limit[going]
    cursor.ok[rows] = False  # longer lists: the per-record parser reads them in one pass
    if not pieces:
        return np.empty(0, dtype=object), counts
    order_rows = np.concatenate([p[0] for p in pieces])
    order = np.argsort(order_rows, kind="stable")  # record order, then value order
    starts = np.concatenate([p[1] for p in pieces])[order].tolist()
    stops = np.concatenate([p[2] for p in pieces])[order].tolist()
    raw = cursor.buf.tobytes()
    values = np.empty(len(starts), dtype=object)
    values[:] = [raw[a:b] for a, b in zip(starts, stops)]
    return values, counts
