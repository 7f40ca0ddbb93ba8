"""Differential fuzzing of the Example walk: the compiled core against the pure path.

The same batch of serialized Examples is parsed twice, once with each walker behind
``parse_example`` (:mod:`queuepipe.parsing._walkers`), and the two answers must be equal:
values bit for bit with their dtypes and shapes, or errors of the same type with the same
message. Inputs come from :func:`random_batch`: Examples built at the wire level, plain and
hostile (truncated and overlong varints, lengths near 2**63 and 2**64 - 1, lengths past the
end, nested messages cut short, unknown fields and wire types, lists in several chunks or
unpacked, empty and huge lists, keys that are not UTF-8, repeated keys), then sometimes
damaged further at random.

Run N inputs (the figure the closing note quotes)::

    PYTHONPATH=. python fuzz/fuzz_example.py -n 100000 [--seed S] [--save tests/corpus/example]

A disagreement prints the seed of the input and, with ``--save``, writes the batch into the
corpus directory (replayed by ``tests/test_core_parse_diff.py``), then exits with status 1.
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

import queuepipe as qp
from queuepipe.errors import InvalidArgumentError
from queuepipe.parsing import _example, _sequence, _walkers
from queuepipe.parsing._sinks import _unbatch
from queuepipe.sparse import SparseValue

# The keys records are built from: the specs' keys, one nobody asks for, one that is not
# ASCII, one that is not UTF-8, and the empty key.
KEYS: List[bytes] = [b"i", b"f", b"s", b"v", b"q", b"x", "é".encode("utf-8"), b"\xff\xfe", b""]

SPECS: List[Dict[str, Any]] = [
    {"i": qp.io.FixedLenFeature([], qp.int64, default_value=-1),
     "f": qp.io.FixedLenFeature([2], qp.float32, default_value=[0.5, 1.5]),
     "s": qp.io.VarLenFeature(qp.string),
     "v": qp.io.VarLenFeature(qp.int64),
     "q": qp.io.FixedLenSequenceFeature([], qp.float32, allow_missing=True)},
    {"i": qp.io.FixedLenFeature([], qp.int64),
     "s": qp.io.FixedLenFeature([], qp.string)},
    {"f": qp.io.VarLenFeature(qp.float32),
     "v": qp.io.FixedLenFeature([2], qp.int64, default_value=[7, 8]),
     "s": qp.io.FixedLenSequenceFeature([2], qp.string, allow_missing=True,
                                        default_value=b"-")},
    {"é": qp.io.VarLenFeature(qp.string),
     "x": qp.io.FixedLenFeature([0], qp.float32),
     "q": qp.io.FixedLenSequenceFeature([0], qp.int64, allow_missing=True)},
    {"s": qp.io.FixedLenFeature([2], qp.string, default_value=[b"a", b"b"]),
     "i": qp.io.VarLenFeature(qp.int64),
     "f": qp.io.FixedLenFeature([], qp.float32)},
]


# (context features, sequence features) of parse_single_sequence_example.
SEQUENCE_SPECS: List[Tuple[Dict[str, Any], Dict[str, Any]]] = [
    ({"i": qp.io.FixedLenFeature([], qp.int64, default_value=-1),
      "s": qp.io.VarLenFeature(qp.string)},
     {"v": qp.io.VarLenFeature(qp.int64),
      "q": qp.io.FixedLenSequenceFeature([2], qp.float32, allow_missing=True)}),
    ({"f": qp.io.FixedLenFeature([2], qp.float32)},
     {"s": qp.io.FixedLenSequenceFeature([], qp.string),
      "f": qp.io.VarLenFeature(qp.float32)}),
    ({"x": qp.io.FixedLenFeature([0], qp.float32), "v": qp.io.VarLenFeature(qp.int64)},
     {"é": qp.io.VarLenFeature(qp.string),
      "i": qp.io.FixedLenSequenceFeature([0], qp.int64, allow_missing=True)}),
]
# A corpus file whose spec byte is at least this holds SequenceExamples (SEQUENCE_SPECS).
SEQUENCE_CORPUS = 128


# --- Building records at the wire level ---------------------------------------------------

def varint(value: int) -> bytes:
    """``value`` (taken mod 2**64) as a canonical varint."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def overlong(value: int, size: int) -> bytes:
    """``value`` as a varint padded to ``size`` bytes with continuation groups of zero."""
    out = bytearray(varint(value))
    while len(out) < size:
        out[-1] |= 0x80
        out.append(0)
    return bytes(out)


def field(number: int, payload: bytes, wire: int = 2) -> bytes:
    if wire == 2:
        return varint(number << 3 | 2) + varint(len(payload)) + payload
    return varint(number << 3 | wire) + payload


def _int64s(rng: random.Random, n: int) -> List[int]:
    pick = (0, 1, 127, 128, -1, 2**63 - 1, -2**63, 300, 2**35)
    return [rng.choice(pick) if rng.random() < 0.5 else rng.randrange(-2**63, 2**63)
            for _ in range(n)]


def _floats(rng: random.Random, n: int) -> bytes:
    specials = (b"\x00\x00\xc0\x7f", b"\x01\x00\xc0\xff", b"\x00\x00\x80\x7f", b"\x00" * 4)
    return b"".join(rng.choice(specials) if rng.random() < 0.2
                    else struct.pack("<f", rng.uniform(-1e6, 1e6)) for _ in range(n))


def _count(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.15:
        return 0
    if roll < 0.2:
        return rng.randrange(100, 400)  # a long list
    return rng.choice((1, 1, 2, 2, 3, 4))


def random_list(rng: random.Random, kind: Optional[int] = None,
                n: Optional[int] = None) -> Tuple[int, bytes]:
    """``(list field number in a Feature, list message)``: of ``kind`` (1 bytes, 2 float,
    3 int64) with ``n`` values where given; plain mostly, else encoded as protobuf also
    reads it (unpacked, in several chunks, an unknown field) or not at all."""
    kind = kind or rng.choice((1, 2, 3))
    n = _count(rng) if n is None else n
    style = rng.random()
    if kind == 1:
        values = [rng.choice((b"", b"a", b"bc", bytes(rng.randrange(256) for _ in range(5))))
                  for _ in range(n)]
        body = b"".join(field(1, value) for value in values)
    elif kind == 2:
        data = _floats(rng, n)
        if style < 0.05:  # unpacked
            body = b"".join(field(1, data[i:i + 4], wire=5) for i in range(0, len(data), 4))
        elif style < 0.08 and n > 1:  # two packed chunks
            body = field(1, data[:4]) + field(1, data[4:])
        elif style < 0.1 and n:  # a length that is not a multiple of 4
            body = field(1, data[:-1])
        else:
            body = field(1, data) if n or rng.random() < 0.5 else b""
    else:
        data = b"".join(varint(value) for value in _int64s(rng, n))
        if style < 0.05:
            body = b"".join(varint(1 << 3) + varint(value) for value in _int64s(rng, n))
        elif style < 0.08:
            body = field(1, data) + field(1, varint(5))
        elif style < 0.12 and n:  # an overlong varint among the values
            body = field(1, data + overlong(rng.randrange(200), rng.randrange(2, 11)))
        elif style < 0.14:  # a value with bits past the 64th
            body = field(1, b"\xff" * 9 + bytes([rng.randrange(2, 128)]))
        elif style < 0.16 and n:  # the last varint cut short
            body = field(1, data + b"\x80")
        else:
            body = field(1, data) if n or rng.random() < 0.5 else b""
    if rng.random() < 0.02:
        body += field(rng.choice((2, 9)), b"\x01", wire=rng.choice((0, 2)))  # unknown field
    return kind, body


_KINDS = {qp.string: 1, qp.float32: 2, qp.int64: 3}


def random_feature(rng: random.Random, spec: Any = None, clean: bool = False) -> bytes:
    """A Feature: for a requested key (``spec``), mostly one that parses with it (``clean``:
    always, though perhaps in an encoding the walk hands back)."""
    roll = 0.5 if clean else rng.random()
    if roll < 0.03:
        return b""  # no list set
    if spec is not None and roll < 0.85:
        size = 1
        for dim in getattr(spec, "shape", ()):
            size *= dim
        if isinstance(spec, qp.io.FixedLenFeature):
            n = size
        elif isinstance(spec, qp.io.VarLenFeature):
            n = _count(rng)
        else:
            n = size * rng.choice((0, 1, 2, 3)) if size else 0
        kind, body = random_list(rng, _KINDS[spec.dtype], n)
    else:
        kind, body = random_list(rng)
    feature = field(kind, body)
    if roll > 0.97:  # a second list: the last one set wins (a oneof)
        other, more = random_list(rng)
        feature += field(other, more)
    elif roll > 0.96:
        feature += field(7, b"z")
    return feature


def random_entry(rng: random.Random, key: bytes, spec: Any, clean: bool) -> bytes:
    value = random_feature(rng, spec, clean)
    roll = 1.0 if clean else rng.random()
    if roll < 0.01:
        return field(2, value) + field(1, key)  # value first
    if roll < 0.02:
        return field(1, key)  # no value
    if roll < 0.03:
        return field(2, value)  # no key
    if roll < 0.04:
        return field(1, key) + field(2, value) + field(3, b"?")  # an unknown field
    if roll < 0.05:
        return field(1, key) + field(2, value) + field(2, random_feature(rng))  # value twice
    return field(1, key) + field(2, value)


def random_example(rng: random.Random, spec: Dict[str, Any], clean: bool) -> bytes:
    """A record for ``spec``; a ``clean`` one parses with it (its requested features present
    and of the right type and count), a hostile one is anything."""
    wanted = {key.encode("utf-8"): value for key, value in spec.items()}
    keys = [key for key in KEYS if (clean and key in wanted) or rng.random() < 0.6]
    if rng.random() < 0.1 and keys:
        keys.append(rng.choice(keys))  # a key twice
    rng.shuffle(keys)
    entries = [field(1, random_entry(rng, key, wanted.get(key), clean)) for key in keys]
    roll = 1.0 if clean else rng.random()
    if roll < 0.03 and entries:  # the Features message in two pieces: protobuf merges them
        cut = rng.randrange(len(entries) + 1)
        record = field(1, b"".join(entries[:cut])) + field(1, b"".join(entries[cut:]))
    elif roll < 0.05:
        record = field(1, b"".join(entries)) + field(5, b"u")
    elif roll < 0.07:
        record = b""
    else:
        record = field(1, b"".join(entries))
    return damage(rng, record) if not clean and rng.random() < 0.1 else record


def damage(rng: random.Random, record: bytes) -> bytes:
    """``record`` damaged in one of the ways a hostile input is."""
    roll = rng.random()
    pos = rng.randrange(len(record) + 1)
    if roll < 0.25:
        return record[:pos]  # cut short
    if roll < 0.45 and record:
        flipped = bytearray(record)
        flipped[min(pos, len(record) - 1)] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    if roll < 0.6:  # a length near 2**63 or 2**64 - 1, or just past the end
        size = rng.choice((2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1, 2**64 - 2, 2**32,
                           len(record) - pos + 1))
        return record[:pos] + b"\x0a" + varint(size) + record[pos:]
    if roll < 0.7:  # a varint with more than ten bytes, or truncated
        return record[:pos] + b"\x0a" + b"\xff" * rng.choice((9, 10, 11, 12)) + record[pos:]
    if roll < 0.8:  # wire types 3, 4, 6, 7 and unknown fields
        tag = varint(rng.randrange(1, 20) << 3 | rng.choice((0, 1, 3, 4, 5, 6, 7)))
        return record[:pos] + tag + record[pos:]
    if roll < 0.9:  # a tag written in more bytes than it needs
        return record[:pos] + overlong(0x0A, rng.randrange(2, 6)) + record[pos:]
    return bytes(rng.randrange(256) for _ in range(rng.randrange(12)))


def random_sequence_example(rng: random.Random, context: Dict[str, Any],
                            lists: Dict[str, Any], clean: bool) -> bytes:
    """A SequenceExample for the specs: a context built as an Example's features, and
    feature lists of 0 to 4 steps, each step a Feature (for a FixedLenSequenceFeature, of
    its row's size when ``clean``)."""
    context_record = random_example(rng, context, clean)
    wanted = {key.encode("utf-8"): value for key, value in lists.items()}
    keys = [key for key in KEYS if (clean and key in wanted) or rng.random() < 0.4]
    entries = []
    for key in keys:
        spec = wanted.get(key)
        if isinstance(spec, qp.io.FixedLenSequenceFeature):
            spec = qp.io.FixedLenFeature(spec.shape, spec.dtype)  # one step: one row
        steps = [random_feature(rng, spec, clean) for _ in range(rng.choice((0, 1, 2, 3, 4)))]
        entries.append(field(1, field(1, key) + field(2, b"".join(field(1, step)
                                                                  for step in steps))))
    # an Example is its Features in field 1, as a SequenceExample's context is
    parts = [context_record, field(2, b"".join(entries))]
    if rng.random() < 0.5:  # protobuf reads the two fields in either order
        parts.reverse()
    record = b"".join(parts)
    return damage(rng, record) if not clean and rng.random() < 0.1 else record


def random_sequence(rng: random.Random) -> Tuple[int, bytes]:
    """``(index of a spec pair in SEQUENCE_SPECS, record)``: half clean, half hostile."""
    index = rng.randrange(len(SEQUENCE_SPECS))
    context, lists = SEQUENCE_SPECS[index]
    return index, random_sequence_example(rng, context, lists, rng.random() < 0.5)


def random_batch(rng: random.Random) -> Tuple[int, List[bytes]]:
    """``(index of a spec in SPECS, records)``: half the batches clean, half hostile."""
    spec_index = rng.randrange(len(SPECS))
    clean = rng.random() < 0.5
    return spec_index, [random_example(rng, SPECS[spec_index], clean)
                        for _ in range(rng.choice((1, 1, 2, 3, 5, 8)))]


# --- Parsing with each walker, and comparing ----------------------------------------------

def outcome(walker: Optional[Callable], records: List[bytes], spec: Dict[str, Any]):
    """``("ok", outputs)`` or ``("error", type, message)`` of parsing ``records`` as
    ``parse_example`` does, with ``walker``. Only a parse error is an answer: any other
    exception is a bug and propagates."""
    try:
        return ("ok", _example._parse_batch(records, _example._example_features(spec), None,
                                            walker=walker))
    except InvalidArgumentError as e:
        return ("error", type(e), str(e))


def _same_array(a: np.ndarray, b: np.ndarray) -> bool:
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return type(a) is type(b) and (a == b if isinstance(a, bytes) else
                                       np.asarray(a).tobytes() == np.asarray(b).tobytes())
    if a.dtype != b.dtype or a.shape != b.shape or a.flags.writeable != b.flags.writeable:
        return False
    if a.dtype == object:
        return all(type(x) is type(y) and x == y for x, y in zip(a.ravel(), b.ravel()))
    return a.tobytes() == b.tobytes()


def same(one, other) -> bool:
    """Whether two outcomes are equal: errors by type and message, values bit for bit."""
    if one[0] != other[0]:
        return False
    if one[0] == "error":
        return one[1:] == other[1:]
    first, second = one[1], other[1]
    if list(first) != list(second):
        return False
    for key, value in first.items():
        theirs = second[key]
        if isinstance(value, SparseValue) != isinstance(theirs, SparseValue):
            return False
        pairs = zip(value, theirs) if isinstance(value, SparseValue) else [(value, theirs)]
        if not all(_same_array(a, b) for a, b in pairs):
            return False
    return True


def single_outcome(single: Callable, record: bytes, spec: Dict[str, Any]):
    """:func:`outcome` of one record as ``parse_single_example`` parses it with ``single``
    (see :mod:`queuepipe.parsing._walkers`), the general path taking what it leaves."""
    features = _example._example_features(spec)
    try:
        plain = single(record, features)
        if plain is None:
            batch = _example._parse_batch([record], features, None, walker=None, single=True)
            plain = {key: _unbatch(value) for key, value in batch.items()}
        return ("ok", plain)
    except InvalidArgumentError as e:
        return ("error", type(e), str(e))


def sequence_outcome(walker: Callable, record: bytes, index: int):
    """:func:`outcome` of one SequenceExample parsed with ``walker`` first."""
    context, lists = SEQUENCE_SPECS[index]
    try:
        context_features, list_features, list_specs = _sequence._sequence_specs(context, lists)
        found = _sequence._parse_one(record, context_features, list_features, list_specs,
                                     "<unknown>", walker)
        return ("ok", {**{"context." + k: v for k, v in found[0].items()},
                       **{"lists." + k: v for k, v in found[1].items()}})
    except InvalidArgumentError as e:
        return ("error", type(e), str(e))


def check_sequence(index: int, record: bytes) -> Optional[str]:
    """None when both walkers agree on the SequenceExample, else the two outcomes."""
    pure = sequence_outcome(_walkers.pure_sequence, record, index)
    core = sequence_outcome(_walkers.core_sequence, record, index)
    if same(pure, core):
        return None
    return f"SequenceExample:\npure: {pure!r:.600}\ncore: {core!r:.600}"


def check(spec_index: int, records: List[bytes]) -> Optional[str]:
    """None when both walkers agree on the batch, and both single-record parsers on each of
    its records; else the two outcomes that differ, in words."""
    spec = SPECS[spec_index]
    pure = outcome(_walkers.pure_walk, records, spec)
    core = outcome(_walkers.core_walk, records, spec)
    if not same(pure, core):
        return f"pure: {pure!r:.600}\ncore: {core!r:.600}"
    for index, record in enumerate(records):
        pure = single_outcome(_walkers.pure_single, record, spec)
        core = single_outcome(_walkers.core_single, record, spec)
        if not same(pure, core):
            return f"record {index} alone:\npure: {pure!r:.600}\ncore: {core!r:.600}"
    return None


def save(directory: str, spec_index: int, records: List[bytes], name: str) -> str:
    """Writes a batch as a corpus file: the spec's index, then each record length-prefixed."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(bytes([spec_index]))
        for record in records:
            f.write(varint(len(record)) + record)
    return path


def load(path: str) -> Tuple[int, List[bytes]]:
    """A corpus file as ``(spec index, records)``."""
    from queuepipe.protos._wire import read_varint
    with open(path, "rb") as f:
        data = f.read()
    records, pos = [], 1
    while pos < len(data):
        size, pos = read_varint(data, pos, len(data))
        records.append(data[pos:pos + size])
        pos += size
    return data[0], records


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=10000, help="how many batches")
    parser.add_argument("--seed", type=int, default=0, help="the first batch's seed")
    parser.add_argument("--save", help="a corpus directory for a batch that disagrees")
    args = parser.parse_args(argv)
    if not _walkers.core_available():
        print("the compiled core is not loaded: nothing to compare", file=sys.stderr)
        return 2
    records_seen = 0
    for seed in range(args.seed, args.seed + args.n):
        rng = random.Random(seed)
        spec_index, records = random_batch(rng)
        sequence_index, sequence_record = random_sequence(rng)
        records_seen += len(records) + 1
        problem = check(spec_index, records)
        if problem is None:
            problem = check_sequence(sequence_index, sequence_record)
            spec_index, records = SEQUENCE_CORPUS + sequence_index, [sequence_record]
        if problem:
            print(f"seed {seed}: the walkers disagree\n{problem}")
            if args.save:
                print("saved", save(args.save, spec_index, records, f"seed-{seed}"))
            return 1
    print(f"{args.n} batches and {args.n} SequenceExamples ({records_seen} records), seeds "
          f"{args.seed}.."
          f"{args.seed + args.n - 1}: no disagreement")
    return 0


if __name__ == "__main__":
    sys.exit(main())
