"""Bad input: random, flipped, truncated and oversized TFRecord bytes and Examples.

The checks live in the atheris target ``fuzz/fuzz_records.py`` (each input is compared with
a slow reference decoder); here hypothesis and a generated corpus feed it, and a huge length
field is shown to fail without allocating what it claims.
"""

import os
import random
import struct
import subprocess
import sys
import tracemalloc

import pytest
from helpers import fuzz_target
from hypothesis import given, settings, strategies as st

import queuepipe as qp
from queuepipe.records import frame, masked_crc32c

fuzz_records = fuzz_target()

CORPUS_SIZE = 600


def _example(rng):
    values = {}
    if rng.random() < 0.8:
        values["i"] = rng.choice([rng.randrange(-2**63, 2**63), [1, 2], 2.5, b"x"])
    if rng.random() < 0.8:
        values["f"] = rng.choice([[rng.random(), float("nan")], [1.0], [1, 2], b"ab"])
    if rng.random() < 0.8:
        values["s"] = [bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
                       for _ in range(rng.randrange(4))]
    if rng.random() < 0.5:
        values["v"] = rng.choice([[rng.randrange(100) for _ in range(rng.randrange(4))], [0.5]])
    if rng.random() < 0.5:
        values["q"] = [rng.random() for _ in range(rng.randrange(4))]
    values["other"] = rng.randrange(1000)
    return _serialize(qp.train.make_example(values))


def _serialize(example):
    """The Example's bytes, the same in every process: protobuf writes a map in an order of
    its own, which changes from one process to the next unless asked to be deterministic."""
    return example.SerializeToString(deterministic=True)


def _mutate(rng, data):
    data = bytearray(data)
    how = rng.choice(["flip", "truncate", "insert", "none", "repeat"])
    if how == "repeat":  # a second Example appended: its keys repeat the first one's
        empty = {key: [] for key in rng.sample("ifsvq", 2)}
        data += rng.choice([_example(rng), _serialize(qp.train.make_example(empty))])
    if how == "flip" and data:
        for _ in range(rng.randrange(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "truncate" and data:
        del data[rng.randrange(len(data)):]
    elif how == "insert":
        at = rng.randrange(len(data) + 1)
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
    return bytes(data)


def _huge_length_frame(length):
    header = struct.pack("<Q", length)
    return header + struct.pack("<I", masked_crc32c(header)) + b"tiny"


def corpus(size=CORPUS_SIZE, seed=0):
    """Deterministic fuzz inputs: a mode byte (0/1 TFRecord raise/skip, 2 Example) + body."""
    rng = random.Random(seed)
    out = []
    for n in range(size):
        kind = n % 6
        if kind in (0, 1, 2):  # TFRecord files: intact, damaged, or with a huge length
            records = [_example(rng) if rng.random() < 0.5 else
                       bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
                       for _ in range(rng.randrange(5))]
            body = b"".join(frame(r) for r in records)
            if kind == 1:
                body = _mutate(rng, body)
            elif kind == 2:
                body += _huge_length_frame(rng.choice([2**31, 2**40, 2**63, 2**64 - 1]))
            out.append(bytes([rng.randrange(2)]) + body)
        elif kind in (3, 4):  # Examples, intact or mutated
            body = _example(rng)
            out.append(b"\x02" + (_mutate(rng, body) if kind == 4 else body))
        else:  # random bytes, either way
            out.append(bytes([rng.randrange(3)]) +
                       bytes(rng.randrange(256) for _ in range(rng.randrange(64))))
    return out


def test_the_corpus_is_the_same_in_every_process():
    """The corpus depends on its seed alone: a run that fails, fails again in any order."""
    program = ("import sys, hashlib; sys.path[:0] = sys.argv[1:]; import test_fuzz; "
               "print(hashlib.sha256(b''.join(test_fuzz.corpus(60))).hexdigest())")
    here = os.path.dirname(os.path.abspath(__file__))
    digests = {subprocess.run([sys.executable, "-c", program, here, os.path.dirname(here)],
                              capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout
               for seed in ("1", "2", "3")}
    assert len(digests) == 1, digests


def test_the_fuzz_target_holds_on_a_generated_corpus():
    inputs = corpus()
    modes = [data[0] % 3 for data in inputs]
    assert len(inputs) == CORPUS_SIZE and set(modes) == {0, 1, 2}
    for data in inputs:
        fuzz_records.TestOneInput(data)


def test_the_reference_framer_can_disagree():
    # The oracle is not vacuous: a flipped data byte is damage at the data's offset.
    body = frame(b"abc") + frame(b"defg")
    flipped = bytearray(body)
    flipped[len(frame(b"abc")) + 12] ^= 1
    assert fuzz_records.reference_frames(body) == ([(0, b"abc"), (19, b"defg")], None)
    assert fuzz_records.reference_frames(bytes(flipped)) == ([(0, b"abc")], 31)


# A field-0 tag in Features after an unknown field 209: protobuf and TF refuse the record.
FIELD_0_IN_FEATURES = bytes.fromhex(
    "0a3a0a0f0a056f7468657212061a040a02ec040a050a017112008a0d0a017612081a060a040000003f0a11"
    "0a0166120c120a0a08b358773e0000c07f")


def _entry(key, feature):
    return b"\x0a" + bytes([len(key) + len(feature) + 4, 0x0a, len(key)]) + key + \
        b"\x12" + bytes([len(feature)]) + feature


def _record(*entries):
    body = b"".join(entries)
    return b"\x0a" + bytes([len(body)]) + body


def test_the_reference_decoder_states_tfs_rules_on_damaged_features():
    """The reference gives TF's verdicts (docs/migration.md), and queuepipe agrees."""
    floats = b"\x12\x06\x0a\x04\x00\x00\x80\x3f"  # float_list [1.0]
    ints = b"\x1a\x04\x0a\x02\x07\x08"  # int64_list [7, 8]
    cases = {
        FIELD_0_IN_FEATURES: "Could not parse example input",
        # an unknown varint before a float list: TF cannot type it, whatever the list holds
        _record(_entry(b"i", b"\x28\x01" + floats)): "Unsupported datatype",
        # the Feature of "i" holds float_list where int64_list is expected
        _record(_entry(b"i", floats)): "Data types don't match",
        # a map entry with no value, and "i" absent: its default would hide the entry
        _record(b"\x0a\x03\x0a\x01z"): "Could not parse example input",
    }
    for record, word in cases.items():
        assert fuzz_records.reference_example(record) == word
        fuzz_records.check_example(record)
    # "v" given again with an empty Feature: parse_single_example keeps [7, 8], parse_example
    # takes the empty one.
    twice = _record(_entry(b"v", ints), _entry(b"v", b""))
    assert fuzz_records.reference_example(twice)["v"].tolist() == [7, 8]
    assert fuzz_records.reference_example(twice, single=False)["v"].tolist() == []
    fuzz_records.check_example(twice)


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_random_bytes_as_tfrecord_files(data):
    fuzz_records.check_records(data, "raise")
    fuzz_records.check_records(data, "skip")


@given(st.lists(st.binary(max_size=40), max_size=5), st.integers(0, 400), st.integers(0, 7))
@settings(max_examples=300)
def test_tfrecord_files_with_one_bit_flipped_or_cut(records, at, bit):
    body = bytearray(b"".join(frame(r) for r in records))
    if body:
        body[at % len(body)] ^= 1 << bit
    for data in (bytes(body), bytes(body[:at])):
        fuzz_records.check_records(data, "raise")
        fuzz_records.check_records(data, "skip")


@given(st.binary(max_size=200))
@settings(max_examples=300)
def test_random_bytes_as_examples(data):
    fuzz_records.check_example(data)


_value = st.one_of(st.integers(-2**63, 2**63 - 1), st.floats(width=32), st.binary(max_size=8))


@given(st.dictionaries(st.sampled_from(["i", "f", "s", "v", "q", "x"]),
                       st.one_of(_value, st.lists(_value.filter(lambda v: True), max_size=3)),
                       max_size=6))
@settings(max_examples=300)
def test_examples_with_features_of_wrong_types_and_counts(values):
    try:
        example = qp.train.make_example(values)
    except TypeError:  # a mixed list no Feature holds
        return
    fuzz_records.check_example(_serialize(example))


@pytest.mark.parametrize("length", [2**40, 2**63, 2**64 - 1])
@pytest.mark.parametrize("how", ["plain", "GZIP"])
def test_a_huge_length_field_fails_without_allocating_it(tmp_path, length, how):
    path = str(tmp_path / "huge.tfrecord")
    data = frame(b"fine") + _huge_length_frame(length) + b"\x00" * 1000
    options = None
    if how == "GZIP":
        import gzip
        data = gzip.compress(data)
        options = "GZIP"
    with open(path, "wb") as f:
        f.write(data)
    tracemalloc.start()
    try:
        records = []
        with pytest.raises(qp.errors.DataLossError,
                           match=rf"^truncated record at 20: the record needs {length + 16} "):
            for record in qp.io.tf_record_iterator(path, options):
                records.append(record)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert records == [b"fine"]
    assert peak < 64 * 2**20, f"peak {peak} bytes for a {len(data)}-byte file"
