"""Fuzz target: TFRecord framing and Example parsing against simple reference decoders.

Run it with atheris (``pip install atheris``)::

    python fuzz/fuzz_records.py -atheris_runs=100000

``TestOneInput(data)`` takes the first byte as a mode and the rest as input:

* mode 0/1: the bytes as a TFRecord file, read with ``corrupt_records="raise"`` / ``"skip"``.
  A slow reference framer says which records are intact and where the first damage is. The
  "raise" reader must return exactly the intact records before the damage, then raise
  ``DataLossError`` at the reference's offset; the "skip" reader must return those same
  records first, only intact frames after them, and count a skip when there was damage.
* mode 2: the bytes as a serialized Example, parsed with a spec of every feature kind. The
  result must be what a reference built on protobuf's own decoder and a plain wire reader
  (for TensorFlow's rules on map entries, on Features TF cannot type and on damage in
  features not asked for: :func:`reference_example`) says, values or error. So must each
  record of ``parse_example`` on a batch (which takes the layout fast path), by the rules of
  its own TF kernel.

In modes 0 and 1, where the compiled core is built, the same bytes are also read with the
core's frame scan (its records made at once, and from copies of their frames) and with the
pure path, which must give equal records, skips and errors
(type, message, offset): :func:`check_core_agrees`.

Any other exception, or a disagreement, is a bug: it propagates and atheris reports it.
The tests in ``tests/stress/test_fuzz.py`` call ``TestOneInput`` on generated inputs.

Without atheris, ``python fuzz/fuzz_records.py --differential N [--seed S]`` runs only the
core-against-pure check on N generated hostile frame buffers (:func:`hostile_frames`) and
writes an input they disagree on to ``tests/corpus/frames/``, the regression corpus.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import importlib
import os
import random
import struct
import sys
import tempfile

import numpy as np
from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

import queuepipe as qp
from queuepipe import _frames, records
from queuepipe.records import RecordScanner, frame, masked_crc32c

_SPEC = {
    "i": qp.io.FixedLenFeature([], qp.int64, default_value=-1),
    "f": qp.io.FixedLenFeature([2], qp.float32, default_value=[0.5, 1.5]),
    "s": qp.io.VarLenFeature(qp.string),
    "v": qp.io.VarLenFeature(qp.int64),
    "q": qp.io.FixedLenSequenceFeature([], qp.float32, allow_missing=True),
}
_LISTS = {qp.int64: "int64_list", qp.float32: "float_list", qp.string: "bytes_list"}

_tmp = tempfile.NamedTemporaryFile(prefix="qp-fuzz-", suffix=".tfrecord", delete=False)
_tmp.close()
_PATH = _tmp.name
atexit.register(os.unlink, _PATH)


# -- TFRecord framing --------------------------------------------------------------------


def reference_frames(data: bytes):
    """``(records, damage_offset)``: intact ``(offset, payload)`` records up to the first
    damage, and the offset a reader must name for it (None when the file is intact)."""
    records, offset = [], 0
    while offset < len(data):
        if len(data) - offset < 12:
            return records, offset
        length, length_crc = struct.unpack_from("<QI", data, offset)
        if masked_crc32c(data[offset:offset + 8]) != length_crc:
            return records, offset
        end = offset + 12 + length
        if end + 4 > len(data):
            return records, offset
        payload = data[offset + 12:end]
        if masked_crc32c(payload) != struct.unpack_from("<I", data, end)[0]:
            return records, offset + 12
        records.append((offset, payload))
        offset = end + 4
    return records, None


def _scan(corrupt_records: str, batch_size: int = 7, compression: str = "",
          framed: bool = False):
    """What a scanner reads from the file at _PATH, batch by batch: ``(records, error,
    skipped)``; ``framed``: by ``next_framed``, its pieces cut into records by ``unframed``
    (as read_batch_features' plan reads)."""
    scanner = RecordScanner(_PATH, compression, corrupt_records=corrupt_records)
    out, error = [], None
    try:
        while True:
            if framed:
                offsets, pieces = scanner.next_framed(batch_size)
                batch = list(zip(offsets, records.unframed(pieces)))
            else:
                batch = scanner.next_batch(batch_size)
            if not batch:
                break
            out.extend(batch)
    except qp.errors.DataLossError as e:
        error = e
    finally:
        scanner.close()
    return out, error, scanner.skipped


def check_records(data: bytes, corrupt_records: str) -> None:
    with open(_PATH, "wb") as f:
        f.write(data)
    expected, damage = reference_frames(data)
    got, error, skipped = _scan(corrupt_records)
    if corrupt_records == "raise":
        assert got == expected, "the reader returned records the reference does not have"
        if damage is None:
            assert error is None, f"an intact file raised {error!r}"
        else:
            assert error is not None, f"damage at {damage} was not reported"
            assert error.offset == damage and error.path == _PATH, (error.offset, damage)
            assert f"in file '{_PATH}'" in str(error)
        return
    assert error is None, f"skip mode raised {error!r}"
    assert got[:len(expected)] == expected, "skip mode lost or changed an intact record"
    previous = -1
    for offset, payload in got[len(expected):]:  # after a resync: only intact frames
        assert offset > previous
        previous = offset
        assert reference_frames(data[offset:offset + len(payload) + 16])[0] == \
            [(0, payload)], f"skip mode returned a damaged frame at {offset}"
    assert (skipped > 0) == (damage is not None), (skipped, damage)
    check_core_agrees(data, corrupt_records)


# -- the compiled core against the pure path ---------------------------------------------

CORPUS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests",
                          "corpus", "frames")


def core_module():
    """``queuepipe._qpcore`` where it is built, whatever ``QUEUEPIPE_PURE`` says; else None."""
    try:
        return importlib.import_module("queuepipe._qpcore")
    except ImportError:
        return None


@contextlib.contextmanager
def _framing(core):
    """Makes the record scanner use ``core``'s framing (None: the pure path's) meanwhile."""
    saved = (records._scan_frames, records._scan_region, records._cut_frames,
             records.masked_crc32c)
    # (looked up before any is set: a core lacking one changes nothing)
    framing = (core.scan_frames, core.scan_region, core.cut_frames, core.masked_crc32c) \
        if core else (None, None, None, _frames._masked_crc32c)
    (records._scan_frames, records._scan_region, records._cut_frames,
     records.masked_crc32c) = framing
    try:
        yield
    finally:
        (records._scan_frames, records._scan_region, records._cut_frames,
         records.masked_crc32c) = saved


def scan_both(data: bytes, corrupt_records: str, batch_size: int = 7, compression: str = "",
              framed: bool = False):
    """What the core and the pure path read from ``data`` (a file's bytes, compressed as
    ``compression`` says; ``framed``: see :func:`_scan`): ``(records, error, skipped)``
    each, the error as ``(type, message, offset, path)``; None when the core is not built."""
    core = core_module()
    if core is None:
        return None
    with open(_PATH, "wb") as f:
        f.write(data)
    results = []
    for implementation in (core, None):
        with _framing(implementation):
            got, error, skipped = _scan(corrupt_records, batch_size, compression, framed)
        results.append((got, error and (type(error), str(error), error.offset, error.path),
                        skipped))
    return results


def check_core_agrees(data: bytes, corrupt_records: str, batch_size: int = 7) -> None:
    """The core's frame scan and the pure path read ``data`` alike, the records made at once
    or from copies of their frames (nothing to compare when the core is not built)."""
    for framed in (False, True):
        both = scan_both(data, corrupt_records, batch_size, framed=framed)
        if both is not None:
            core, pure = both
            assert core == pure, (f"core and pure path disagree (framed: {framed}): "
                                  f"{core!r} != {pure!r}")


# Lengths a hostile header gives, its length checksum right: at and around 2**63 and 2**64.
HOSTILE_LENGTHS = (2**63 - 17, 2**63 - 16, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 17,
                   2**64 - 16, 2**64 - 1, 2**32, 2**31)


def _header(length: int) -> bytes:
    encoded = struct.pack("<Q", length)
    return encoded + struct.pack("<I", masked_crc32c(encoded))


def hostile_frames(rng: random.Random) -> bytes:
    """A buffer of TFRecord frames, intact and damaged: data or checksums flipped, lengths
    near 2**63 and 2**64 - 1 or a few bytes off (their checksums right), garbage between
    frames, and the whole cut short at a random place."""
    parts = []
    for _ in range(rng.randrange(1, 10)):
        data = rng.randbytes(rng.choice((0, 1, rng.randrange(64), rng.randrange(2000))))
        kind = rng.choice(("intact", "intact", "intact", "huge", "off_by", "length_crc",
                           "data", "data_crc", "garbage", "run"))
        framed = bytearray(frame(data))
        if kind == "huge":
            framed = bytearray(_header(rng.choice(HOSTILE_LENGTHS)) + data[:rng.randrange(40)])
        elif kind == "off_by":
            framed[:12] = _header(max(0, len(data) + rng.randrange(-20, 21)))
        elif kind == "length_crc":
            framed[rng.randrange(12)] ^= 1 << rng.randrange(8)
        elif kind == "data" and data:
            framed[12 + rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == "data_crc":
            framed[-rng.randrange(1, 5)] ^= 1 << rng.randrange(8)
        elif kind == "garbage":
            framed = bytearray(rng.randbytes(rng.randrange(1, 30)))
        elif kind == "run":  # records of one length back to back, as the pure run path takes
            framed = bytearray(frame(data[:40]) * rng.randrange(8, 40))
        parts.append(bytes(framed))
    buffer = b"".join(parts)
    if rng.random() < 0.3:
        buffer = buffer[:rng.randrange(len(buffer) + 1)]
    return buffer


def run_differential(count: int, seed: int) -> None:
    """Checks the core against the pure path on ``count`` hostile buffers, both policies
    and several batch sizes; saves the first input they disagree on to the corpus."""
    if core_module() is None:
        raise SystemExit("the compiled core is not built: nothing to compare with "
                         "(pip install -e . or make)")
    rng = random.Random(seed)
    for n in range(count):
        data = hostile_frames(rng)
        try:
            for policy in ("raise", "skip"):
                check_core_agrees(data, policy, rng.choice((1, 7, 1000)))
        except AssertionError:
            name = os.path.join(CORPUS_DIR, hashlib.sha256(data).hexdigest()[:16] + ".bin")
            with open(name, "wb") as f:
                f.write(data)
            print(f"input {n} (seed {seed}): disagreement, saved as {name}", file=sys.stderr)
            raise
    print(f"{count} inputs (seed {seed}): the core and the pure path agree on every one")


# -- Examples ----------------------------------------------------------------------------


def _values(feature, spec):
    """The reference's values of one feature, or a string naming the expected error."""
    kind = feature.WhichOneof("kind") if feature is not None else None
    if kind is None:
        return None
    if kind != _LISTS[spec.dtype]:
        return "Data types don't match"
    values = list(getattr(feature, kind).value)
    if spec.dtype == qp.string:
        return np.array(values, dtype=object)
    return np.array(values, dtype=spec.dtype)


def _split(buf: bytes):
    """Reference wire reader: ``[(field number, wire type, payload)]``, payloads of
    length-delimited fields as bytes; None when the bytes are not well formed."""
    out, i = [], 0
    try:
        while i < len(buf):
            tag, i = _read_varint(buf, i)
            start, i = _payload(buf, i, tag, 0)
            out.append((tag >> 3, tag & 7, buf[start:i]))
    except IndexError:
        return None
    return out


def _payload(buf: bytes, i: int, tag: int, depth: int):
    """``(start, stop)`` of the payload of a field whose ``tag`` ends at ``i`` (a group's:
    its fields and end tag, skipped as protobuf skips them, nested at most 100 deep);
    IndexError when it is not well formed."""
    wire = tag & 7
    if wire == 0:
        _, j = _read_varint(buf, i)
    elif wire in (1, 5):
        j = i + (8 if wire == 1 else 4)
    elif wire == 2:
        n, i = _read_varint(buf, i)
        j = i + n
    elif wire == 3 and depth < 100:
        j = i
        while True:
            inner, j = _read_varint(buf, j)
            if inner & 7 == 4:
                if inner >> 3 != tag >> 3:
                    raise IndexError("an end tag of another group")
                break
            _, j = _payload(buf, j, inner, depth + 1)
    else:
        raise IndexError(f"wire type {wire} here")
    if j > len(buf):
        raise IndexError("past the end")
    return i, j


def _read_varint(buf: bytes, i: int):
    shift = value = 0
    while shift < 70:  # at most ten bytes, as protobuf reads
        b = buf[i]
        value |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            return value, i
        shift += 7
    raise IndexError("a varint of more than ten bytes")


# The first byte of a Feature holding a list (bytes_list, float_list, int64_list: fields 1-3,
# length-delimited): TF types a Feature by that byte alone.
_LIST_FIRST_BYTES = (0x0A, 0x12, 0x1A)


def _entries(data: bytes):
    """``(entries, rejected)``: every map entry of an Example in order, duplicates kept, as
    ``(key, Feature bytes)`` (the last key given; values given twice joined, which protobuf
    reads as their merge), and whether TF rejects an entry: a field besides one key and one
    value (protobuf drops such an entry from its map), no key, or no value. ``entries`` is
    None when the record does not split into map entries: a part is not well formed, or a
    field numbered 0 sits in Features (protobuf and TF refuse it there)."""
    entries, rejected = [], False
    top = _split(data)
    if top is None:
        return None, True
    for number, wire, features in top:
        if (number, wire) != (1, 2):
            continue
        split = _split(features)
        if split is None:
            return None, True
        for number, wire, entry in split:
            if number == 0:
                return None, True
            if (number, wire) != (1, 2):
                continue  # an unknown field of Features: skipped, as protobuf does
            fields = _split(entry)
            if fields is None:
                return None, True
            keys = [f[2] for f in fields if f[:2] == (1, 2)]
            values = [f[2] for f in fields if f[:2] == (2, 2)]
            rejected = rejected or len(keys) + len(values) != len(fields) \
                or not keys or not values
            entries.append((keys[-1] if keys else b"", b"".join(values)))
    return entries, rejected


def _unlisted(entries, key: str) -> bool:
    """Whether an entry of ``key`` holds a Feature TF cannot type: not empty, and not
    beginning with a list's tag."""
    return any(k == key.encode() and value and value[0] not in _LIST_FIRST_BYTES
               for k, value in entries or ())


def _last_listed(entries, key: str):
    """The last Feature of ``key`` that holds a list: TF's pick for a dense feature whose
    key comes again with an empty Feature (and parse_single_example's for a sparse one)."""
    listed = [qp.train.Feature.FromString(value) for k, value in entries or ()
              if k == key.encode()]
    listed = [f for f in listed if f.WhichOneof("kind") is not None]
    return listed[-1] if listed else None


def _feature_map(data: bytes, entries, rejected):
    """``(map, lazy)``: key -> the Feature a requested key's map entry holds, or an error
    word. Where protobuf parses the record it is protobuf's map (last entry winning, entries
    with a stray field dropped); where it does not, TF's reading: the entries must be whole,
    no requested key may hold a Feature TF cannot type, and only requested Features are
    parsed (``lazy`` is then True)."""
    try:
        return qp.train.Example.FromString(data).features.feature, False
    except DecodeError:
        pass
    if entries is None or rejected:
        return "Could not parse example input", True
    for key in _SPEC:
        if _unlisted(entries, key):
            return "Unsupported datatype", True
    found = {}
    for key, value in entries:
        if key.decode("utf-8", "replace") in _SPEC:
            try:
                found[key.decode()] = qp.train.Feature.FromString(value)
            except DecodeError:
                return "Could not parse example input", True
    return found, True


def reference_example(data: bytes, single: bool = True):
    """What parse_single_example (``single``; else one record of parse_example) must return
    for ``data`` and ``_SPEC``, or a word of the expected error.

    TF's rules, as docs/migration.md states them, feature by feature in the spec's order:

    * A requested Feature TF cannot type (not empty, not beginning with a list) is
      "Unsupported datatype". queuepipe looks for one where protobuf's Feature shows a sign
      (no list, or unknown fields), and then at every entry of the key.
    * A feature that would take its default (absent, or its Feature holding no list) in a
      record whose map entries TF rejects is "Could not parse example input".
    * A dense feature whose key comes again with an empty Feature keeps the last entry that
      holds a list; a sparse one does too in parse_single_example, but parse_example takes
      the last entry, empty or not.
    * A record protobuf cannot parse as a whole still parses when its map entries are whole
      and the requested Features parse (TF looks at those only).
    """
    entries, rejected = _entries(data)
    fmap, lazy = _feature_map(data, entries, rejected)
    if isinstance(fmap, str):
        return fmap
    out = {}
    for key, spec in _SPEC.items():
        feature = fmap.get(key)
        kind = feature.WhichOneof("kind") if feature is not None else None
        if feature is not None and (kind is None or len(UnknownFieldSet(feature))) \
                and _unlisted(entries, key):
            return "Unsupported datatype"
        if kind is None and rejected and not lazy:
            return "Could not parse example input"
        if kind is None and feature is not None and \
                (single or not isinstance(spec, qp.io.VarLenFeature)):
            feature = _last_listed(entries, key)
        values = _values(feature, spec)
        if isinstance(values, str):
            return values
        if isinstance(spec, qp.io.FixedLenFeature):
            if values is None:
                values = np.array(spec.default_value, dtype=spec.dtype)
            if values.size != int(np.prod(spec.shape)):
                return "Number of"
            out[key] = values.reshape(spec.shape)
        elif isinstance(spec, qp.io.VarLenFeature):
            out[key] = values if values is not None else np.array([], dtype=spec.dtype)
        else:
            out[key] = values if values is not None else np.zeros(0, dtype=spec.dtype)
    return out


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and all(x == y for x, y in zip(a.ravel(), b.ravel()))
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _plain(parsed):
    """A parse result as comparable arrays (sparse values: their values)."""
    return {k: (v.values if isinstance(v, qp.io.SparseValue) else v) for k, v in parsed.items()}


def _parse_one(data: bytes):
    try:
        return _plain(qp.io.parse_single_example(data, _SPEC))
    except qp.errors.InvalidArgumentError as e:
        return e


def _check_verdict(expected, got, what: str) -> None:
    """``got`` (outputs or an error) is what the reference says: the same values, or an
    error holding the reference's word."""
    if isinstance(expected, str):
        assert isinstance(got, qp.errors.InvalidArgumentError), \
            f"{what}: expected an error ({expected}), got {got!r}"
        assert expected in str(got), (what, expected, str(got))
        return
    assert not isinstance(got, Exception), f"{what}: the reference parses it, queuepipe: {got!r}"
    assert set(got) == set(expected)
    for key in expected:
        assert _same(got[key], expected[key]), (what, key, got[key], expected[key])


def check_example(data: bytes) -> None:
    _check_verdict(reference_example(data), _parse_one(data), "parse_single_example")
    # parse_example on a batch (layout groups of records of one length, then the per-record
    # parser) must give each record what the reference says for parse_example's kernel, and
    # fail on the first record it does not parse, with that record's error.
    batch = [data] * 5 + [data[:-1], data + b"\x00"] if data else [data] * 5
    expected = [reference_example(record, single=False) for record in batch]
    try:
        parsed = qp.io.parse_example(batch, _SPEC)
    except qp.errors.InvalidArgumentError as e:
        first = next((row for row, rows in enumerate(expected) if isinstance(rows, str)), None)
        assert first is not None, f"parse_example failed where every record parses: {e}"
        _check_verdict(expected[first], e, "parse_example")
        assert f"Index: {first}." in str(e), (first, str(e))
        return
    for row, rows in enumerate(expected):
        assert not isinstance(rows, str), \
            f"parse_example accepted record {row}, where the reference says {rows}"
    for key, spec in _SPEC.items():
        column = parsed[key]
        for row, rows in enumerate(expected):
            if isinstance(column, qp.io.SparseValue):
                mine = column.values[column.indices[:, 0] == row]
            elif isinstance(spec, qp.io.FixedLenSequenceFeature):
                mine = column[row][:len(rows[key])]
            else:
                mine = column[row]
            assert _same(mine, rows[key]), (key, row, mine, rows[key])


def TestOneInput(data: bytes) -> None:  # noqa: N802 - the name atheris looks for
    """One fuzz input: mode byte, then TFRecord bytes (modes 0, 1) or an Example (mode 2)."""
    if not data:
        return
    mode, body = data[0] % 3, data[1:]
    if mode == 2:
        check_example(body)
    else:
        check_records(body, "raise" if mode == 0 else "skip")


def main() -> None:
    import logging

    logging.getLogger("queuepipe.records").setLevel(logging.ERROR)  # skips are expected
    if "--differential" in sys.argv:
        parser = argparse.ArgumentParser(description="the core against the pure path")
        parser.add_argument("--differential", type=int, metavar="N", required=True)
        parser.add_argument("--seed", type=int, default=0)
        args = parser.parse_args()
        run_differential(args.differential, args.seed)
        return

    import atheris

    atheris.instrument_all()
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
