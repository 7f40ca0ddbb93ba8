"""Tests of queuepipe.protos: TF's Example messages in queuepipe's own descriptor pool."""

import os
import pickle
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from google.protobuf import descriptor_pool
from hypothesis import given
from hypothesis import strategies as st

from queuepipe.protos import (BytesList, Example, Feature, FeatureList, FeatureLists, Features,
                              FloatList, Int64List, SequenceExample, make_example,
                              make_sequence_example)
from queuepipe.records import tf_record_iterator


def _varint(data, pos):
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return result, pos


def _fields(data):
    """Splits a message into its top-level (field number, whole field bytes) pieces."""
    pos, pieces = 0, []
    while pos < len(data):
        start = pos
        tag, pos = _varint(data, pos)
        assert tag & 7 == 2, "only length-delimited fields expected here"
        size, pos = _varint(data, pos)
        pos += size
        pieces.append((tag >> 3, data[start:pos]))
    return pieces


def _map_entries(example_bytes):
    """The serialized ``Features.feature`` map entries of an Example, as a multiset."""
    (number, features), = _fields(example_bytes)
    assert number == 1
    _, body_start = _varint(features, _varint(features, 0)[1])
    return Counter(piece for _, piece in _fields(features[body_start:]))


def test_names_field_numbers_and_encodings_match_tensorflow():
    assert Example.DESCRIPTOR.full_name == "tensorflow.Example"
    assert Example.DESCRIPTOR.file.name == "tensorflow/core/example/example.proto"
    assert Features.DESCRIPTOR.file.name == "tensorflow/core/example/feature.proto"
    numbers = {msg.DESCRIPTOR.name: {f.name: f.number for f in msg.DESCRIPTOR.fields}
               for msg in (Example, SequenceExample, Features, Feature, FeatureList,
                           FeatureLists, BytesList, FloatList, Int64List)}
    assert numbers == {
        "Example": {"features": 1}, "SequenceExample": {"context": 1, "feature_lists": 2},
        "Features": {"feature": 1}, "FeatureList": {"feature": 1},
        "FeatureLists": {"feature_list": 1},
        "Feature": {"bytes_list": 1, "float_list": 2, "int64_list": 3},
        "BytesList": {"value": 1}, "FloatList": {"value": 1}, "Int64List": {"value": 1}}
    assert [f.name for f in Feature.DESCRIPTOR.oneofs_by_name["kind"].fields] == [
        "bytes_list", "float_list", "int64_list"]
    assert Features.DESCRIPTOR.fields_by_name["feature"].message_type.GetOptions().map_entry
    assert FloatList.DESCRIPTOR.fields_by_name["value"].GetOptions().packed
    assert Int64List.DESCRIPTOR.fields_by_name["value"].GetOptions().packed


def test_serializes_the_bytes_tensorflow_writes():
    # Written out by hand from the wire format: packed varints and packed little-endian floats.
    assert make_example({"a": [1, 2]}).SerializeToString() == (
        b"\x0a\x0d\x0a\x0b\x0a\x01a\x12\x06\x1a\x04\x0a\x02\x01\x02")
    assert make_example({"f": 1.5}).SerializeToString() == (
        b"\x0a\x0f\x0a\x0d\x0a\x01f\x12\x08\x12\x06\x0a\x04\x00\x00\xc0\x3f")
    assert make_example({"b": b"xy"}).SerializeToString() == (
        b"\x0a\x0d\x0a\x0b\x0a\x01b\x12\x06\x0a\x04\x0a\x02xy")


def test_unpacked_repeated_scalars_are_accepted():
    assert list(Int64List.FromString(b"\x08\x01\x08\x7f").value) == [1, 127]
    assert list(FloatList.FromString(b"\x0d\x00\x00\xc0\x3f").value) == [1.5]


def test_parses_tensorflow_golden_examples_and_reserializes_every_entry_identically(
        golden_records):
    assert len(golden_records) == 40
    for data in golden_records:
        example = Example.FromString(data)
        again = example.SerializeToString()
        # TF writes map entries in its hash map's order, protobuf-python in its own: the
        # entries (key and Feature bytes) must be identical, their order may differ.
        assert len(again) == len(data)
        assert _map_entries(again) == _map_entries(data)
        # (Bytes, not ==: a NaN float makes older protobufs' == false.)
        assert Example.FromString(again).SerializeToString(deterministic=True) == (
            example.SerializeToString(deterministic=True))
    first = Example.FromString(golden_records[0]).features.feature
    assert list(first["id"].int64_list.value) == [0]
    assert list(first["big"].int64_list.value) == [2**63 - 1, -2**63, -1, 0]
    assert first["name"].bytes_list.value[0] == "ex-0-é✓".encode("utf-8")


def test_parses_tensorflow_golden_sequence_examples(golden_dir):
    first = next(iter(tf_record_iterator(os.path.join(golden_dir, "sequence.tfrecord"))))
    sequence = SequenceExample.FromString(first)
    assert list(sequence.context.feature["length"].int64_list.value) == [4]
    assert list(sequence.context.feature["title"].bytes_list.value) == [b"seq-0"]
    steps = sequence.feature_lists.feature_list["words"].feature
    assert [list(step.int64_list.value) for step in steps] == [[53], [72], [75], [99]]
    assert SequenceExample.FromString(sequence.SerializeToString()) == sequence


def test_default_pool_is_untouched():
    pool = descriptor_pool.Default()
    with pytest.raises(KeyError):
        pool.FindMessageTypeByName("tensorflow.Example")
    with pytest.raises(KeyError):
        pool.FindFileByName("tensorflow/core/example/feature.proto")


def test_imports_beside_another_tensorflow_example_in_the_default_pool():
    # Stands in for TensorFlow: a different "tensorflow.Example" is already in the default
    # pool when queuepipe is imported. Run in a child so this test's pool stays clean.
    script = r"""
from google.protobuf import descriptor_pb2, descriptor_pool
proto = descriptor_pb2.FileDescriptorProto(
    name="tensorflow/core/example/example.proto", package="tensorflow", syntax="proto3")
proto.message_type.add(name="Example").field.add(
    name="other", number=7, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
descriptor_pool.Default().Add(proto)
from queuepipe.protos import make_example, Example
data = make_example({"x": [3]}).SerializeToString()
print(list(Example.FromString(data).features.feature["x"].int64_list.value))
print([f.name for f in descriptor_pool.Default().FindMessageTypeByName(
    "tensorflow.Example").fields])
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=False, timeout=50)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["[3]", "['other']"]


def test_messages_pickle():
    example = make_example({"a": [1, 2], "b": "x"})
    assert pickle.loads(pickle.dumps(example)) == example


def _values(feature):
    kind = feature.WhichOneof("kind")
    return kind, (list(getattr(feature, kind).value) if kind else None)


def test_make_example_chooses_the_list_by_type():
    example = make_example({
        "bytes": b"\x00x", "text": "é", "texts": ["a", b"b"], "int": 7, "bool": True,
        "npint": np.uint8(200), "float": 0.25, "npfloat": np.float32(1.5),
        "ints": np.arange(6, dtype=np.int32).reshape(2, 3), "floats": [1, 2.5],
        "bytes_array": np.array([b"p", b"qr"]), "empty": [],
        "empty_floats": np.zeros(0, np.float32), "given": Feature(float_list={"value": [9]}),
    }).features.feature
    assert {key: _values(example[key]) for key in example} == {
        "bytes": ("bytes_list", [b"\x00x"]), "text": ("bytes_list", ["é".encode()]),
        "texts": ("bytes_list", [b"a", b"b"]), "int": ("int64_list", [7]),
        "bool": ("int64_list", [1]), "npint": ("int64_list", [200]),
        "float": ("float_list", [0.25]), "npfloat": ("float_list", [1.5]),
        "ints": ("int64_list", [0, 1, 2, 3, 4, 5]), "floats": ("float_list", [1.0, 2.5]),
        "bytes_array": ("bytes_list", [b"p", b"qr"]), "empty": (None, None),
        "empty_floats": ("float_list", []), "given": ("float_list", [9.0])}
    assert example["empty"].ByteSize() == 0


@pytest.mark.parametrize("value, shown", [
    (None, "NoneType"), ({}, "dict"), (1j, "complex"), ([1, "a"], r"list \(dtype object\)"),
    ([[1], [1, 2]], r"list \(.*inhomogeneous.*\)"), (np.array([1j]), r"ndarray \(dtype complex128\)"),
])
def test_make_example_rejects_other_types_naming_key_and_type(value, shown):
    with pytest.raises(TypeError, match=rf"^feature 'bad': cannot make a Feature from a value "
                                        rf"of type {shown}: .*; expected bytes, str, int"):
        make_example({"ok": 1, "bad": value})


def test_make_sequence_example():
    sequence = make_sequence_example(
        {"length": 2, "title": "t"},
        {"words": [[1, 2], [3]], "scores": np.ones((2, 3), np.float32),
         "given": FeatureList(feature=[Feature(bytes_list={"value": [b"z"]})])})
    assert _values(sequence.context.feature["length"]) == ("int64_list", [2])
    lists = sequence.feature_lists.feature_list
    assert [_values(f) for f in lists["words"].feature] == [
        ("int64_list", [1, 2]), ("int64_list", [3])]
    assert [_values(f) for f in lists["scores"].feature] == [("float_list", [1.0] * 3)] * 2
    assert [_values(f) for f in lists["given"].feature] == [("bytes_list", [b"z"])]
    assert make_sequence_example().SerializeToString() == b"\x0a\x00\x12\x00"
    with pytest.raises(TypeError, match=r"^feature list 'w': expected a list of steps"):
        make_sequence_example(feature_lists={"w": b"abc"})
    with pytest.raises(TypeError, match=r"^feature 'w\[1\]': cannot make a Feature"):
        make_sequence_example(feature_lists={"w": [1, None]})


_keys = st.text(min_size=1, max_size=8)
_leaf = st.one_of(
    st.binary(max_size=12), st.integers(-2**63, 2**63 - 1),
    st.floats(width=32, allow_nan=False),
    st.lists(st.binary(max_size=5), min_size=1, max_size=5),
    st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=5),
    st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=5))


@given(st.dictionaries(_keys, _leaf, max_size=6))
def test_make_example_round_trips_through_bytes(values):
    parsed = Example.FromString(make_example(values).SerializeToString()).features.feature
    assert set(parsed) == set(values)
    for key, value in values.items():
        _, got = _values(parsed[key])
        assert got == (value if isinstance(value, list) else [value])
