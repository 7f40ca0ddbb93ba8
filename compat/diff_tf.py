"""queuepipe against TensorFlow itself, case by case: a differential test, not part of CI.

usage::

    python compat/diff_tf.py --peers-python /tmp/peers/bin/python --cases 12000 --seed 0

TensorFlow is not a dependency of queuepipe, so it runs in another interpreter (a virtualenv
with ``tensorflow-cpu``, as ``benchmarks/`` uses for its peers). The script:

1. generates ``--cases`` random cases from ``--seed``, of five kinds: ``parse_example`` (a
   batch of 1 to 4 Examples built at the wire level, with duplicate keys, empty Features,
   lists in several chunks, Features TF types otherwise than protobuf, malformed entries
   and byte damage, against a random spec),
   ``sequence`` (``parse_single_sequence_example``), ``decode_csv`` (quotes, spaces, hex and
   special floats, missing fields, ``na_value``, ``select_cols``), ``decode_raw`` (every out
   type, both byte orders, ``fixed_length``) and ``records`` (TFRecord files, plain, GZIP or
   ZLIB, intact or cut, flipped, extended with junk, or cut between records of a live
   writer's compressed stream, read with ``tf_record_iterator``);
2. runs every case through TensorFlow (the child interpreter) and through queuepipe (this
   one), each outcome being the values, or the error's class;
3. prints, per kind, how many cases agree, and the disagreements by class: values differ,
   TF accepts what queuepipe refuses, the reverse, or both refuse with different error
   classes. A disagreement that ``docs/migration.md`` documents as a choice is counted apart,
   with the choice it falls under; the rest are listed (``--show`` of each class) for a
   developer to look at. The exit status is 1 when an undocumented disagreement remains.

Error classes compare by name, with TF's ``ValueError`` (raised while building the op) the
same class as queuepipe's ``InvalidArgumentError`` (a ``ValueError``) and its ``TypeError``
as queuepipe's ``DtypeError``/``TypeError``: queuepipe has no build time apart from the call.
"""

from __future__ import annotations

import argparse
import collections
import os
import pickle
import random
import signal
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

KINDS = ("parse_example", "sequence", "decode_csv", "decode_raw", "records")
KEYS = ["a", "b", "c", "d"]


# -- the wire format, by hand (so that both sides read the same bytes) ---------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def field(number: int, wire: int, payload: bytes = b"") -> bytes:
    tag = varint(number << 3 | wire)
    return tag + (varint(len(payload)) + payload if wire == 2 else payload)


def feature_bytes(rng: random.Random, kind: str, values: list) -> bytes:
    """A Feature holding ``values`` as ``kind`` (bytes/float/int64), in one of the encodings
    protobuf allows: packed in one chunk, in two chunks, or unpacked."""
    if kind == "none":
        return b""
    if kind == "bytes":
        body = b"".join(field(1, 2, v) for v in values)
        return field(1, 2, body)
    if kind == "float":
        items = [struct.pack("<f", v) for v in values]
        number, wire = 2, 5
    else:
        items = [varint(v) for v in values]
        number, wire = 3, 0
    how = rng.choice(["packed"] * 8 + ["chunks", "unpacked"])
    if how == "unpacked" or not items:
        body = b"".join(field(1, wire, item) for item in items) if how == "unpacked" else \
            field(1, 2, b"")
    elif how == "chunks":
        cut = rng.randrange(len(items) + 1)
        body = field(1, 2, b"".join(items[:cut])) + field(1, 2, b"".join(items[cut:]))
    else:
        body = field(1, 2, b"".join(items))
    return field(number, 2, body)


def odd_feature(rng: random.Random, value: bytes) -> bytes:
    """``value`` (a Feature) made one TF types otherwise than protobuf: only an unknown field,
    a list's field number with another wire type, the list wrapped in a field numbered 0, an
    unknown field before the list, or one after it (which TF skips)."""
    return rng.choice([field(5, 0, b"\x01"), field(3, 0, b"\x05"), field(0, 2, value),
                       field(5, 0, b"\x01") + value, value + field(5, 0, b"\x01")])


def random_values(rng: random.Random, kind: str, count: int) -> list:
    if kind == "bytes":
        return [bytes(rng.randrange(256) for _ in range(rng.randrange(4))) for _ in range(count)]
    if kind == "float":
        return [rng.choice([rng.uniform(-5, 5), 0.5, float("nan"), float("inf")])
                for _ in range(count)]
    return [rng.choice([rng.randrange(-5, 50), rng.randrange(-2**63, 2**63)])
            for _ in range(count)]


def features_bytes(rng: random.Random, malformed: bool) -> bytes:
    """A Features message: entries for some keys (some twice, some empty), rarely a key that is
    not UTF-8, and with ``malformed`` an entry TF rejects."""
    entries = []
    for key in rng.sample(KEYS, rng.randrange(len(KEYS) + 1)):
        for _ in range(rng.choice([1, 1, 1, 1, 2])):
            kind = rng.choice(["bytes", "float", "int64", "int64", "none"])
            value = feature_bytes(rng, kind, random_values(rng, kind, rng.choice(
                [0, 1, 1, 2, 2, 3, 4])))
            if rng.random() < 0.03:
                value = odd_feature(rng, value)
            entries.append(field(1, 2, key.encode()) + field(2, 2, value))
    if rng.random() < 0.05:
        entries.append(field(1, 2, b"\xff\xfe") + field(2, 2, feature_bytes(rng, "int64", [1])))
    if malformed:
        broken = rng.choice([field(2, 2, feature_bytes(rng, "int64", [1])),  # no key
                             field(1, 2, rng.choice(KEYS).encode()),  # no value
                             field(1, 2, rng.choice(KEYS).encode()) + field(2, 2, b"")
                             + field(3, 0, b"\x01")])  # an unknown field
        entries.insert(rng.randrange(len(entries) + 1), broken)
    rng.shuffle(entries)
    return b"".join(field(1, 2, e) for e in entries)


def damage(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    how = rng.choice(["flip", "cut", "junk"])
    if how == "flip" and data:
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "cut" and data:
        del data[rng.randrange(len(data)):]
    else:
        data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5)))
    return bytes(data)


# -- the cases -----------------------------------------------------------------------------------


def spec(rng: random.Random, sequence: bool = False) -> dict:
    """A random feature spec, as plain data: key -> (class, shape, dtype, default, missing)."""
    out = {}
    for key in rng.sample(KEYS, rng.randrange(1, 4)):
        dtype = rng.choice(["int64", "float32", "string"])
        cls = rng.choice(["FixedLenSequenceFeature", "VarLenFeature"] if sequence else
                         ["FixedLenFeature", "FixedLenFeature", "VarLenFeature",
                          "FixedLenSequenceFeature"])
        shape = rng.choice([[], [], [], [1], [2], [2]] * 4 + [[0]])
        size = int(np.prod(shape)) if shape else 1
        default = None
        if cls == "FixedLenFeature" and rng.random() < 0.6:
            count = rng.choice([size, size, size, size + 1])
            default = [b"x" if dtype == "string" else 7 for _ in range(count)]
        if cls == "FixedLenSequenceFeature" and rng.random() < 0.2:
            default = b"p" if dtype == "string" else 9
        out[key] = (cls, shape, dtype, default, rng.random() < 0.8)
    return out


def make_case(rng: random.Random, kind: str) -> dict:
    if kind == "parse_example":
        records = []
        for _ in range(rng.randrange(1, 5)):
            data = field(1, 2, features_bytes(rng, rng.random() < 0.05))
            if rng.random() < 0.03:
                data += field(rng.choice([2, 5]), 0, b"\x01")  # an unknown field of Example
            if rng.random() < 0.05:
                data = damage(rng, data)
            records.append(data)
        return {"kind": kind, "records": records, "spec": spec(rng)}
    if kind == "sequence":
        lists = []
        for key in rng.sample(KEYS, rng.randrange(len(KEYS) + 1)):
            steps = [field(1, 2, feature_bytes(rng, k, random_values(rng, k, rng.choice([0, 1, 2]))))
                     for k in [rng.choice(["int64", "float", "bytes"])] * rng.randrange(4)]
            lists.append(field(1, 2, field(1, 2, key.encode()) + field(2, 2, b"".join(steps))))
        data = field(1, 2, features_bytes(rng, False)) + field(2, 2, b"".join(lists))
        if rng.random() < 0.05:
            data = damage(rng, data)
        return {"kind": kind, "record": data, "context": spec(rng),
                "sequence": spec(rng, sequence=True)}
    if kind == "decode_csv":
        columns = rng.randrange(1, 5)
        types = [rng.choice(["int32", "int64", "float32", "float64", "string"])
                 for _ in range(columns)]
        defaults = [[] if rng.random() < 0.3 else
                    ([b"d"] if t == "string" else [1.5 if t.startswith("float") else 3])
                    for t in types]
        delim = rng.choice([",", ",", ";", " "])
        lines = []
        for _ in range(rng.randrange(1, 4)):
            count = max(0, columns + rng.choice([0, 0, 0, 0, -1, 1]))
            fields = [csv_field(rng, types[j % columns], delim) for j in range(count)]
            lines.append(delim.join(fields).encode())
        select = sorted(rng.sample(range(columns), rng.randrange(1, columns + 1))) \
            if rng.random() < 0.2 else None
        if select is not None:
            types = [types[i] for i in select]
            defaults = [defaults[i] for i in select]
        return {"kind": kind, "records": lines, "types": types, "defaults": defaults,
                "delim": delim, "quote": rng.random() < 0.8,
                "na": rng.choice(["", "", "NA"]), "select": select}
    if kind == "decode_raw":
        return {"kind": kind,
                "records": [bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 2, 4, 8, 12, 16])))
                            for _ in range(rng.randrange(1, 4))],
                "type": rng.choice(["uint8", "int8", "uint16", "int16", "int32", "int64",
                                    "float16", "float32", "float64", "complex64", "complex128"]),
                "little": rng.random() < 0.7,
                "fixed": rng.choice([None, None, 0, 4, 8, 9])}
    records = [bytes(rng.randrange(256) for _ in range(rng.choice([0, 3, 40, 300])))
               for _ in range(rng.randrange(1, 12))]
    return {"kind": kind, "records": records, "compression": rng.choice(["", "GZIP", "ZLIB"]),
            "damage": rng.choice(["none", "none", "cut", "flip", "junk", "flushed"]),
            "where": rng.random()}


def csv_field(rng: random.Random, dtype: str, delim: str) -> str:
    if rng.random() < 0.1:
        return ""
    if dtype.startswith("int"):
        return rng.choice(["12", "-3", " 7 ", "1e3", "0x1F", "99999999999", "+4", "abc"])
    if dtype.startswith("float"):
        return rng.choice(["1.5", " -2.25", "nan", "inf", "-0", "1e-40", "0x1p3",
                           "16777217.000000001", "nan(12)", "1.5.2", "3"])
    return rng.choice(["abc", '"q' + delim + 'q"', '"a""b"', 'a"b', " sp ", '"', "x\ry"])


def write_record_file(case: dict, path: str) -> None:
    """Writes ``case``'s records (framed, then compressed and damaged as it says) at ``path``."""
    from queuepipe.records import frame

    plain = b"".join(frame(r) for r in case["records"])
    if case["compression"]:
        wbits = 31 if case["compression"] == "GZIP" else 15
        c = zlib.compressobj(6, zlib.DEFLATED, wbits)
        if case["damage"] == "flushed":  # a live writer: every record flushed, no end marker
            data = b"".join(c.compress(frame(r)) + c.flush(zlib.Z_SYNC_FLUSH)
                            for r in case["records"])
        else:
            data = c.compress(plain) + c.flush()
    else:
        data = plain
    where = int(case["where"] * len(data))
    if case["damage"] == "cut":
        data = data[:where]
    elif case["damage"] == "flip" and data:
        data = data[:where] + bytes([data[min(where, len(data) - 1)] ^ 0x10]) + data[where + 1:]
    elif case["damage"] == "junk":
        data += b"\x00\x01junk"
    with open(path, "wb") as f:
        f.write(data)


# -- running a case on either side --------------------------------------------------------------


def outcome_of(fn):
    """``("ok", value)`` or ``("error", class name)``."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - the class is the outcome
        return "error", type(e).__name__


def plain(value):
    """A result as comparable plain data: arrays as (dtype kind, shape, items)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):  # a string scalar (queuepipe gives bytes, TF a 0-d array)
        return ("str", (), [value])
    if isinstance(value, dict):
        return {k: plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)) and not hasattr(value, "indices"):
        return [plain(v) for v in value]
    if hasattr(value, "indices") and hasattr(value, "dense_shape"):
        return ("sparse", plain(value.indices), plain(value.values), plain(value.dense_shape))
    if hasattr(value, "numpy"):
        value = value.numpy()
    arr = np.asarray(value)
    if arr.dtype.kind in "OSU":
        return ("str", arr.shape, [bytes(x) for x in arr.ravel().tolist()])
    kind = "f" if arr.dtype.kind == "f" else "c" if arr.dtype.kind == "c" else "i"
    items = arr.ravel().tolist()
    if kind in "fc":  # NaN equals NaN here, and -0.0 differs from 0.0
        items = [repr(x) for x in items]
    return (kind + str(arr.dtype.itemsize), arr.shape, items)


def run_tf(indexed: list, workdir: str) -> list:
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")

    def feature(spec_):
        cls, shape, dtype, default, missing = spec_
        dt = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}[dtype]
        if cls == "VarLenFeature":
            return tf.io.VarLenFeature(dt)
        if cls == "FixedLenFeature":
            return tf.io.FixedLenFeature(shape, dt, default_value=default)
        return tf.io.FixedLenSequenceFeature(shape, dt, allow_missing=missing,
                                             default_value=default)

    def one(case, i):
        kind = case["kind"]
        if zero_size_sequence_feature(case):
            return KNOWN_CRASH
        if kind == "parse_example":
            spec_ = {k: feature(v) for k, v in case["spec"].items()}
            return tf.io.parse_example(case["records"], spec_)
        if kind == "sequence":
            return tf.io.parse_single_sequence_example(
                case["record"], {k: feature(v) for k, v in case["context"].items()
                                 if v[0] != "FixedLenSequenceFeature"},
                {k: feature(v) for k, v in case["sequence"].items()})
        if kind == "decode_csv":
            defaults = [tf.constant(d, dtype=getattr(tf, t)) if d else
                        tf.constant([], dtype=getattr(tf, t))
                        for d, t in zip(case["defaults"], case["types"])]
            return tf.io.decode_csv(case["records"], defaults, field_delim=case["delim"],
                                    use_quote_delim=case["quote"], na_value=case["na"],
                                    select_cols=case["select"])
        if kind == "decode_raw":
            if case["fixed"] is None:
                return tf.io.decode_raw(case["records"], getattr(tf, case["type"]),
                                        little_endian=case["little"])
            return tf.io.decode_raw(case["records"], getattr(tf, case["type"]),
                                    little_endian=case["little"], fixed_length=case["fixed"])
        return read_all(lambda p, c: tf.compat.v1.io.tf_record_iterator(p, c), case, workdir, i)

    outcomes = []
    for i, case in indexed:
        kind, value = outcome_of(lambda c=case, i=i: one(c, i))
        outcomes.append(("crash", value) if value is KNOWN_CRASH else
                        (kind, plain(value) if kind == "ok" else value))
    return outcomes


# TF divides by zero (SIGFPE, the process dies) on a FixedLenSequenceFeature of no elements
# in a spec; such cases are not run through TF, to spare a crash and restart for each.
KNOWN_CRASH = "SIGFPE (a FixedLenSequenceFeature of zero size)"


def zero_size_sequence_feature(case: dict) -> bool:
    specs = [case.get("spec", {}), case.get("sequence", {})]
    return any(cls == "FixedLenSequenceFeature" and 0 in shape
               for spec_ in specs for cls, shape, *_ in spec_.values())


def tf_outcomes(python: str, indexed: list, workdir: str) -> list:
    """TF's outcomes of ``indexed`` cases, from child processes. A case that kills TF (it
    divides by zero on some specs) is found by halving the chunk it is in, and its outcome is
    ``("crash", signal name)``."""
    cases_path, out_path = os.path.join(workdir, "cases.pkl"), os.path.join(workdir, "tf.pkl")
    with open(cases_path, "wb") as f:
        pickle.dump((indexed, workdir), f)
    done = subprocess.run([python, os.path.abspath(__file__), "--tf-side", cases_path, out_path],
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONWARNINGS="ignore"))
    if done.returncode == 0:
        with open(out_path, "rb") as f:
            return pickle.load(f)
    if done.returncode > 0:
        raise RuntimeError(f"the TensorFlow side failed (exit status {done.returncode})")
    if len(indexed) == 1:
        return [("crash", signal.Signals(-done.returncode).name)]
    half = len(indexed) // 2
    return tf_outcomes(python, indexed[:half], workdir) + \
        tf_outcomes(python, indexed[half:], workdir)


def read_all(iterate, case: dict, workdir: str, i: int):
    """The records of a case's file before its end or first error, and that error's class."""
    path = os.path.join(workdir, f"case{i}.tfrecord")
    got, error = [], None
    try:
        for record in iterate(path, case["compression"] or None):
            got.append(bytes(record))
    except Exception as e:  # noqa: BLE001 - the class is the outcome
        error = type(e).__name__
    return {"records": got, "error": error}


def run_queuepipe(cases: list, workdir: str) -> list:
    import logging
    import queuepipe as qp

    logging.getLogger("queuepipe.records").setLevel(logging.ERROR)

    def feature(spec_):
        cls, shape, dtype, default, missing = spec_
        dt = getattr(qp, dtype)
        if cls == "VarLenFeature":
            return qp.VarLenFeature(dt)
        if cls == "FixedLenFeature":
            return qp.FixedLenFeature(shape, dt, default_value=default)
        return qp.FixedLenSequenceFeature(shape, dt, allow_missing=missing, default_value=default)

    def one(case, i):
        kind = case["kind"]
        if kind == "parse_example":
            return qp.parse_example(case["records"], {k: feature(v) for k, v in case["spec"].items()})
        if kind == "sequence":
            return qp.parse_single_sequence_example(
                case["record"], {k: feature(v) for k, v in case["context"].items()
                                 if v[0] != "FixedLenSequenceFeature"},
                {k: feature(v) for k, v in case["sequence"].items()})
        if kind == "decode_csv":
            defaults = [np.array(d, dtype=getattr(qp, t)) for d, t in
                        zip(case["defaults"], case["types"])]
            return qp.decode_csv(case["records"], defaults, field_delim=case["delim"],
                                 use_quote_delim=case["quote"], na_value=case["na"],
                                 select_cols=case["select"])
        if kind == "decode_raw":
            return qp.decode_raw(case["records"], getattr(qp, case["type"]),
                                 little_endian=case["little"], fixed_length=case["fixed"])
        return read_all(qp.io.tf_record_iterator, case, workdir, i)

    return [(lambda r: (r[0], plain(r[1]) if r[0] == "ok" else r[1]))(outcome_of(
        lambda c=case, i=i: one(c, i))) for i, case in enumerate(cases)]


# -- comparing ----------------------------------------------------------------------------------

_SAME_CLASS = {("ValueError", "InvalidArgumentError"), ("TypeError", "DtypeError"),
               ("TypeError", "InvalidArgumentError"), ("InvalidArgumentError", "DtypeError"),
               # a bad spec: TF checks some of it when the op runs, queuepipe when it is read
               ("InvalidArgumentError", "ValueError"),
               # TF's Python layer fails to decode its own message about bytes not UTF-8
               ("UnicodeDecodeError", "InvalidArgumentError")}


def verdict(tf_out, qp_out) -> str:
    if tf_out == qp_out:
        return "agree"
    (tf_kind, tf_val), (qp_kind, qp_val) = tf_out, qp_out
    if tf_kind == "crash":
        return "TF crashes"
    if tf_kind == qp_kind == "error":
        return "agree" if (tf_val, qp_val) in _SAME_CLASS else "both refuse, other class"
    if tf_kind == "ok" and qp_kind == "ok":
        return "values differ"
    return "TF accepts, queuepipe refuses" if tf_kind == "ok" else \
        "queuepipe accepts, TF refuses"


def documented_choice(case: dict, tf_out, qp_out) -> str:
    """The migration guide's choice a disagreement falls under, or "" when none does."""
    kind = case["kind"]
    if tf_out[0] == "crash":
        specs = [case.get("spec", {}), case.get("context", {}), case.get("sequence", {})]
        if tf_out[1] == KNOWN_CRASH or any(0 in shape for spec_ in specs
                                           for _, shape, *_ in spec_.values()):
            return "TF crashes (SIGFPE, SIGSEGV) on features of zero size; queuepipe does not"
        return ""
    if kind == "decode_raw" and tf_out[0] == "error" and case["fixed"] is not None and \
            case["type"] in ("float16", "complex64", "complex128"):
        return "decode_raw(fixed_length=) decodes float16 and complex, which TF has no kernel for"
    if kind in ("parse_example", "sequence") and tf_out[0] == "ok" and qp_out[0] == "error" \
            and any(cut_short(r) for r in (case.get("records") or [case.get("record")])):
        return "a record cut short is an error (TF reads what is there, defaults for the rest)"
    if kind == "records" and tf_out[0] == qp_out[0] == "ok":
        tf_r, qp_r = tf_out[1], qp_out[1]
        if case["compression"] and tf_r["error"] == qp_r["error"] == "DataLossError" and \
                qp_r["records"][:len(tf_r["records"])] == tf_r["records"]:
            return "damaged deflate data: every whole record before the damage comes out"
        if tf_r["records"] == qp_r["records"] and tf_r["error"] is None and \
                qp_r["error"] == "DataLossError":
            return "a truncated record header at the end is an error"
        if case["compression"] == "GZIP" and case["damage"] == "junk" and \
                tf_r["records"] == qp_r["records"][:len(tf_r["records"])]:
            return "every member of a GZIP file is read; trailing bytes are ignored"
    if kind in ("parse_example", "sequence"):
        records = case["records"] if kind == "parse_example" else [case["record"]]
        if any(multi_chunk(r, kind == "sequence") for r in records):
            return "a list split over several chunks is all of its values (protobuf)"
        if tf_out[0] == "error" and qp_out[0] == "ok":
            keys = list(case["spec"] if kind == "parse_example" else case["context"])
            found = [unlisted_entry(r, keys, kind == "sequence") for r in records]
            if "last" in found:
                return ""  # TF's error for a Feature it cannot type: queuepipe must give it
            if "earlier" in found:
                return ("an earlier entry of a key given twice that TF cannot type is not "
                        "looked at when the last one is sound")
            return "encodings protobuf defines are read as protobuf reads them"
    return ""


def unlisted_entry(record: bytes, keys: list, sequence: bool) -> str:
    """Where ``record`` holds a Feature TF cannot type (not empty, not beginning with a list's
    tag) under one of ``keys``: "last" (the entry protobuf's map keeps), "earlier", or ""."""
    from queuepipe.protos import _wire

    found = _wire.entries(record, sequence) or {1: []}
    where = ""
    for key in keys:
        values = [value for entry_key, value in found[1] if entry_key == key.encode()]
        for position, value in enumerate(values):
            if value and value[0] not in (0x0A, 0x12, 0x1A):
                if position == len(values) - 1:
                    return "last"
                where = "earlier"
    return where


def cut_short(record: bytes) -> bool:
    """Whether a length in ``record``'s outer message points past its end."""
    try:
        _fields(record)
        return False
    except ValueError:
        return True


def multi_chunk(record: bytes, sequence: bool) -> bool:
    """Whether a float or int64 list of ``record`` comes in several chunks (packed ones, or
    packed and unpacked mixed), which TF misreads or rejects."""
    try:
        for feature in _features_in(record, sequence):
            for number, w, start, stop in _fields(feature):
                if number in (2, 3) and w == 2:
                    parts = list(_fields(feature[start:stop]))
                    if len(parts) > 1 and any(p[1] == 2 for p in parts):
                        return True
    except ValueError:
        return False
    return False


def _features_in(record: bytes, sequence: bool):
    """The Feature messages of an Example (or a SequenceExample's context and steps)."""
    def inside(data, number):
        return [data[a:b] for n, w, a, b in _fields(data) if n == number and w == 2]

    for features in inside(record, 1):
        for entry in inside(features, 1):
            yield from inside(entry, 2)
    if sequence:
        for lists in inside(record, 2):
            for entry in inside(lists, 1):
                for feature_list in inside(entry, 2):
                    yield from inside(feature_list, 1)


def _fields(data: bytes):
    """The fields of ``data`` (raises ValueError where it does not split), by queuepipe's own
    wire reader: this is the judge of what a case holds, not of either side's answer."""
    from queuepipe.protos import _wire

    try:
        return list(_wire.fields(data, 0, len(data)))
    except _wire.Malformed as e:
        raise ValueError(e) from e


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers-python", help="an interpreter with tensorflow installed")
    parser.add_argument("--cases", type=int, default=12000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--show", type=int, default=3, help="examples shown per class")
    parser.add_argument("--tf-side", nargs=2, metavar=("CASES", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tf_side:  # the child: run TensorFlow on the pickled cases
        with open(args.tf_side[0], "rb") as f:
            indexed, workdir = pickle.load(f)
        with open(args.tf_side[1], "wb") as f:
            pickle.dump(run_tf(indexed, workdir), f)
        return 0
    if not args.peers_python:
        parser.error("--peers-python is required (an interpreter with tensorflow)")
    rng = random.Random(args.seed)
    cases = [make_case(rng, KINDS[i % len(KINDS)]) for i in range(args.cases)]
    with tempfile.TemporaryDirectory(prefix="diff-tf-") as workdir:
        for i, case in enumerate(cases):
            if case["kind"] == "records":
                write_record_file(case, os.path.join(workdir, f"case{i}.tfrecord"))
        indexed = list(enumerate(cases))
        tf_outs = [out for start in range(0, len(cases), 2000)
                   for out in tf_outcomes(args.peers_python, indexed[start:start + 2000], workdir)]
        qp_outs = run_queuepipe(cases, workdir)
    table = collections.defaultdict(collections.Counter)
    examples = collections.defaultdict(list)
    choices = collections.Counter()
    for case, tf_out, qp_out in zip(cases, tf_outs, qp_outs):
        v = verdict(tf_out, qp_out)
        if v != "agree":
            choice = documented_choice(case, tf_out, qp_out)
            if choice:
                choices[choice] += 1
                v = "documented choice"
            else:
                examples[(case["kind"], v)].append((case, tf_out, qp_out))
        table[case["kind"]][v] += 1
    print(f"{len(cases)} cases, seed {args.seed}")
    columns = ["agree", "documented choice", "values differ", "TF accepts, queuepipe refuses",
               "queuepipe accepts, TF refuses", "both refuse, other class", "TF crashes"]
    print(f"{'kind':<14}" + "".join(f"{c[:24]:>26}" for c in columns))
    for kind in KINDS:
        print(f"{kind:<14}" + "".join(f"{table[kind][c]:>26}" for c in columns))
    for choice, count in choices.most_common():
        print(f"  documented: {count:5d}  {choice}")
    for (kind, v), found in sorted(examples.items()):
        print(f"\n== {kind}: {v} ({len(found)})")
        for case, tf_out, qp_out in found[:args.show]:
            print(f"  case: {case!r:.600}\n  TF:        {tf_out!r:.400}\n"
                  f"  queuepipe: {qp_out!r:.400}")
    return 1 if examples else 0


if __name__ == "__main__":
    sys.exit(main())
