"""Tests of queuepipe.parsing against TensorFlow 2.21's outputs and errors (shared/golden)."""

import os
import struct
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import queuepipe as qp
from queuepipe import parsing
from queuepipe.parsing import _walkers

# The ways parse_example can take a batch: each walker (the compiled one where it is loaded),
# and None, the per-record parser alone.
WALKERS = [_walkers.pure_walk, None] + ([_walkers.core_walk] if _walkers.core_available()
                                        else [])
from queuepipe.errors import InvalidArgumentError
from queuepipe.protos import Example, Feature, _ragged, make_example
from queuepipe.records import tf_record_iterator


# --- Golden data ----------------------------------------------------------------------------

@pytest.fixture
def golden(golden_dir, manifest, golden_records):
    """(manifest, expected outputs, the 40 serialized golden Examples, the folder)."""
    # Object arrays (TF's string outputs) are pickled in the npz; the file is ours to trust.
    expected = np.load(os.path.join(golden_dir, "expected.npz"), allow_pickle=True)
    return manifest, expected, golden_records, golden_dir


def _spec(feature):
    """A queuepipe spec from the manifest's JSON description of a TF spec."""
    if feature["kind"] == "fixed":
        return qp.FixedLenFeature(feature["shape"], feature["dtype"], feature.get("default"))
    if feature["kind"] == "var":
        return qp.VarLenFeature(feature["dtype"])
    return qp.FixedLenSequenceFeature(feature["shape"], feature["dtype"],
                                      feature.get("allow_missing", False),
                                      feature.get("default"))


def _specs(description):
    return {key: _spec(feature) for key, feature in description.items()}


def _cases(manifest, api):
    return [case for case in manifest["cases"] if case["api"] == api]


def _assert_same(got, want, what):
    """``got`` equals TF's ``want``: values (NaN == NaN), dtype and shape."""
    if want.dtype.kind == "S":  # npz stores a scalar string as a 0-d bytes array
        assert isinstance(got, bytes) and got == want[()], what
        return
    got_array = np.asarray(got)
    np.testing.assert_array_equal(got_array, want, err_msg=what)
    assert (got_array.dtype, got_array.shape) == (want.dtype, want.shape), what


def _assert_output(got, expected, prefix):
    for key, value in got.items():
        if isinstance(value, qp.SparseValue):
            for part in ("indices", "values", "dense_shape"):
                _assert_same(getattr(value, part), expected[f"{prefix}.{key}.{part}"],
                             f"{prefix}.{key}.{part}")
        else:
            _assert_same(value, expected[f"{prefix}.{key}"], f"{prefix}.{key}")


def _both_paths(records, spec, example_names=None):
    """parse_example's result by the fast path (the pure walker, and the compiled one when it
    is loaded) and by the per-record path, which must agree."""
    features = parsing._example_features(spec)
    fast = parsing._parse_batch(records, features, example_names, walker=_walkers.pure_walk)
    general = parsing._parse_batch(records, features, example_names, walker=None)
    _assert_equal_outputs(fast, general)
    if _walkers.core_available():
        _assert_equal_outputs(parsing._parse_batch(records, features, example_names,
                                                   walker=_walkers.core_walk), general)
    return fast


def _assert_equal_outputs(a, b):
    assert list(a) == list(b)
    for key in a:
        if isinstance(a[key], qp.SparseValue):
            for part_a, part_b in zip(a[key], b[key]):
                np.testing.assert_array_equal(part_a, part_b)
                assert part_a.dtype == part_b.dtype
        else:
            np.testing.assert_array_equal(a[key], b[key])
            assert (a[key].dtype, a[key].shape) == (b[key].dtype, b[key].shape)


def test_parse_example_matches_tensorflow_for_every_golden_spec(golden):
    manifest, expected, raw, _ = golden
    cases = _cases(manifest, "parse_example")
    assert len(cases) == 3
    for case in cases:
        spec = _specs(case["spec"])
        got = qp.parse_example(raw, spec)
        assert list(got) == list(spec)
        _assert_output(got, expected, f"parse_example.{case['spec_name']}")
        _assert_output(_both_paths(raw, spec), expected, f"parse_example.{case['spec_name']}")


def test_parse_single_example_matches_tensorflow_record_by_record(golden):
    manifest, expected, raw, _ = golden
    for case in _cases(manifest, "parse_example"):
        if not case["also_single"]:
            continue
        spec = _specs(case["spec"])
        for i, record in enumerate(raw):
            got = qp.parse_single_example(record, spec)
            _assert_output(got, expected, f"parse_single_example.{case['spec_name']}.{i}")


def test_parse_single_sequence_example_matches_tensorflow(golden):
    manifest, expected, _, path = golden
    (case,) = _cases(manifest, "parse_single_sequence_example")
    records = list(tf_record_iterator(os.path.join(path, case["file"])))
    assert len(records) == manifest["files"][case["file"]]["records"]
    for i, record in enumerate(records):
        context, sequence = qp.parse_single_sequence_example(
            record, _specs(case["context_spec"]), _specs(case["sequence_spec"]))
        _assert_output(context, expected, f"parse_single_sequence_example.{i}.context")
        _assert_output(sequence, expected, f"parse_single_sequence_example.{i}.sequence")


BAD_SPEC_MESSAGES = {
    "missing_required": r"^Name: <unknown>, Feature: opt \(data type: float\) is required but "
                        r"could not be found\. Record index: 1 \(give the FixedLenFeature a "
                        r"default_value if the feature may be absent\)$",
    "wrong_dtype": r"^Name: <unknown>, Key: label, Index: 0\.  Data types don't match\. Data "
                   r"type: int64 but expected type: float$",
    "wrong_shape": r"^Name: <unknown>, Key: pair, Index: 0\.  Number of float values != "
                   r"expected\.  Values size: 2 but output shape: \[3\]$",
}


@pytest.mark.parametrize("walker", WALKERS)
def test_bad_specs_raise_tensorflows_error(golden, walker):
    manifest, _, raw, _ = golden
    assert set(manifest["bad_specs"]) == set(BAD_SPEC_MESSAGES)
    for bad_name, bad in manifest["bad_specs"].items():
        # TF's own words (the part after its op prefix) are in ours.
        tf_words = bad["tf_error"].split("}} ", 1)[1].split(" [Op:")[0]
        tf_words = tf_words.replace("Name: <unknown>, ", "")
        features = parsing._example_features(_specs(bad["spec"]))
        with pytest.raises(InvalidArgumentError, match=BAD_SPEC_MESSAGES[bad_name]) as info:
            parsing._parse_batch(raw, features, None, walker=walker)
        assert tf_words in str(info.value)


def test_errors_name_the_record_by_its_example_name(golden):
    _, _, raw, _ = golden
    names = [f"examples.tfrecord:{i * 100}".encode() for i in range(len(raw))]
    with pytest.raises(InvalidArgumentError, match=r"^Name: examples\.tfrecord:100, Feature: "
                                                   r"opt \(data type: float\) is required"):
        qp.parse_example(raw, {"opt": qp.FixedLenFeature([], qp.float32)}, example_names=names)
    with pytest.raises(InvalidArgumentError, match=r"^Name: rec-7, Key: label, Index: 0\.  "
                                                   r"Data types don't match"):
        qp.parse_single_example(raw[7], {"label": qp.FixedLenFeature([], qp.string)},
                                example_names="rec-7")


def test_round_trip_through_make_example_with_the_golden_specs(golden):
    manifest, expected, raw, _ = golden
    # Rebuild every golden Example from TF's own parsed values, then parse it again.
    rebuilt = []
    for i in range(len(raw)):
        values = {key: expected[f"parse_example.fixed_scalars.{key}"][i]
                  for key in ("id", "label", "weight", "name", "image", "pair", "big")}
        values["name"] = [values["name"]]
        for key in ("tags", "words"):
            sparse = [expected[f"parse_example.defaults_and_varlen.{key}.{part}"]
                      for part in ("indices", "values")]
            values[key] = sparse[1][sparse[0][:, 0] == i].tolist()
        if expected["parse_example.defaults_and_varlen.opt"][i] != -7.0:
            values["opt"] = expected["parse_example.defaults_and_varlen.opt"][i]
        rebuilt.append(make_example(values).SerializeToString())
    for case in _cases(manifest, "parse_example"):
        _assert_output(_both_paths(rebuilt, _specs(case["spec"])), expected,
                       f"parse_example.{case['spec_name']}")


# --- Spec checking and TF's other rules -------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: qp.FixedLenFeature([], qp.int32), lambda: qp.VarLenFeature("float64"),
    lambda: qp.FixedLenSequenceFeature([2], np.uint8, allow_missing=True),
])
def test_only_int64_float32_and_string_are_parseable(make):
    with pytest.raises(ValueError, match=r"^\w+Feature: unsupported dtype .*(int32|float64|uint8)"
                                         r".*; an Example holds only int64, float32 and string"):
        make()


def test_dtypes_may_be_given_as_qp_dtypes_numpy_dtypes_or_names():
    record = make_example({"a": 3}).SerializeToString()
    for dtype in (qp.int64, np.int64, np.dtype("int64"), "int64"):
        assert qp.parse_single_example(record, {"a": qp.FixedLenFeature([], dtype)})["a"] == 3


def test_shape_must_be_fully_defined():
    with pytest.raises(ValueError, match=r"^FixedLenFeature: shape must be a fully defined"):
        qp.FixedLenFeature([None, 2], qp.float32)


def test_fixed_len_sequence_feature_in_parse_example_needs_allow_missing():
    with pytest.raises(ValueError, match=r"^feature 'x': Unsupported: FixedLenSequenceFeature "
                                         r"requires allow_missing to be True\.$"):
        qp.parse_example([b""], {"x": qp.FixedLenSequenceFeature([], qp.int64)})


def test_default_value_must_fit_the_shape():
    with pytest.raises(ValueError, match=r"^feature 'x': default_value \[1, 2\] has 2 elements "
                                         r"but shape \[3\] needs 3$"):
        qp.parse_example([b""], {"x": qp.FixedLenFeature([3], qp.int64, [1, 2])})


def test_packed_and_unpacked_lists_parse_alike():
    # Features {"f": float_list [1.5, -2]} and {"i": int64_list [1, 300]}, written by hand.
    floats = struct.pack("<2f", 1.5, -2.0)
    packed_f = b"\x12\x0a\x0a\x08" + floats
    unpacked_f = b"\x12\x0a\x0d" + floats[:4] + b"\x0d" + floats[4:]
    packed_i = b"\x1a\x05\x0a\x03\x01\xac\x02"
    unpacked_i = b"\x1a\x05\x08\x01\x08\xac\x02"

    def example(key, feature):
        entry = b"\x0a\x01" + key + b"\x12" + bytes([len(feature)]) + feature
        features = b"\x0a" + bytes([len(entry)]) + entry
        return b"\x0a" + bytes([len(features)]) + features

    spec = {"f": qp.FixedLenFeature([2], qp.float32, [0.0, 0.0]),
            "i": qp.FixedLenFeature([2], qp.int64, [0, 0])}
    records = [example(b"f", packed_f), example(b"f", unpacked_f),
               example(b"i", packed_i), example(b"i", unpacked_i)] * 4
    out = _both_paths(records, spec)
    np.testing.assert_array_equal(out["f"], [[1.5, -2]] * 2 + [[0, 0]] * 2 + ([[1.5, -2]] * 2
                                                                           + [[0, 0]] * 2) * 3)
    np.testing.assert_array_equal(out["i"][:4], [[0, 0], [0, 0], [1, 300], [1, 300]])


def test_a_feature_with_no_list_counts_as_absent_as_in_tensorflow():
    # TF's fast parser skips a Feature whose oneof is unset: FixedLen takes its default.
    record = make_example({"x": Feature(), "y": [], "z": 1}).SerializeToString()
    spec = {"x": qp.FixedLenFeature([], qp.float32, 9.0), "y": qp.VarLenFeature(qp.string),
            "z": qp.FixedLenFeature([], qp.int64)}
    out = _both_paths([record] * 5, spec)
    np.testing.assert_array_equal(out["x"], [9.0] * 5)
    assert out["y"].values.shape == (0,) and list(out["y"].dense_shape) == [5, 0]
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Feature: x \(data type: "
                                                   r"float\) is required"):
        qp.parse_single_example(record, {"x": qp.FixedLenFeature([], qp.float32)})


def test_an_empty_list_is_present_and_empty_not_the_default():
    record = make_example({"x": np.zeros(0, np.float32)}).SerializeToString()
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Key: x, Index: 0\.  "
                                                   r"Number of float values != expected\.  "
                                                   r"Values size: 0 but output shape: \[\]$"):
        qp.parse_single_example(record, {"x": qp.FixedLenFeature([], qp.float32, 1.0)})
    got = qp.parse_single_example(record, {"x": qp.FixedLenFeature([0], qp.float32, [])})
    assert got["x"].shape == (0,)


def test_varlen_and_sequence_dtype_mismatch_messages():
    records = [make_example({"x": [1.0]}).SerializeToString()] * 4
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Key: x, Index: 0\.  Data "
                                                   r"types don't match\. Expected type: int64, "
                                                   r"Actual type: float$"):
        qp.parse_example(records, {"x": qp.VarLenFeature(qp.int64)})
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Key: x, Index: 0\.  Data "
                                                   r"types don't match\. Expected type: string$"):
        qp.parse_example(records, {"x": qp.FixedLenSequenceFeature([], qp.string, True)})
    records = [make_example({"x": [1, 2, 3]}).SerializeToString()] * 4
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Key: x, Index: 0\.  "
                                                   r"Number of int64 values is not a multiple of "
                                                   r"stride length\. Saw 3 values but output "
                                                   r"shape is: \[2\]$"):
        qp.parse_example(records, {"x": qp.FixedLenSequenceFeature([2], qp.int64, True)})


def test_the_first_bad_record_is_reported_whichever_path_sees_it():
    good = make_example({"a": 1}).SerializeToString()
    bad = make_example({"a": 2.0}).SerializeToString()  # same length, other list
    records = [good] * 6 + [bad] + [good] * 3 + [bad]
    for walker in WALKERS:
        with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Key: a, Index: 6\."):
            parsing._parse_batch(records, parsing._example_features(
                {"a": qp.FixedLenFeature([], qp.int64)}), None, walker=walker)


def test_parse_example_batches_gives_each_batchs_own_parse(golden):
    """read_batch_features' parse of the batches it draws ahead: one parse of several batches
    gives what each batch's own parse_example gives, SparseValues numbered in their batch
    with its longest list, dtypes and shapes included; the errors of a parse of all."""
    from queuepipe.parsing._example import parse_example_batches

    manifest, _, raw, _ = golden
    assert len(raw) == 40
    for case in _cases(manifest, "parse_example"):
        spec = {key: value for key, value in _specs(case["spec"]).items()
                if not isinstance(value, (qp.FixedLenSequenceFeature, qp.io.SparseFeature))}
        for size in (1, 8, 40):
            batches = parse_example_batches(raw, spec, size)
            assert len(batches) == len(raw) // size
            for k, got in enumerate(batches):
                want = qp.parse_example(raw[k * size:(k + 1) * size], spec)
                assert list(got) == list(want)
                for key, value in want.items():
                    parts = [(got[key], value)] if not isinstance(value, qp.SparseValue) else \
                        [(getattr(got[key], part), getattr(value, part))
                         for part in ("indices", "values", "dense_shape")]
                    for mine, theirs in parts:
                        np.testing.assert_array_equal(mine, theirs)
                        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
    assert parse_example_batches(raw[:0], {"a": qp.VarLenFeature(qp.int64)}, 4) == []
    records = [make_example({"a": [1, 2]}).SerializeToString()] * 3 + [b"\x0a\x05\x01"]
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Index: 3\.  Could not "
                                                   r"parse"):
        parse_example_batches(records, {"a": qp.VarLenFeature(qp.int64)}, 2)
    with pytest.raises(ValueError, match=r"^parse_example_batches: 4 records are not batches "
                                         r"of 3"):
        parse_example_batches(records, {"a": qp.VarLenFeature(qp.int64)}, 3)
    with pytest.raises(ValueError, match=r"^parse_example_batches: takes FixedLenFeatures and "
                                         r"VarLenFeatures only"):
        parse_example_batches(records, {"a": qp.FixedLenSequenceFeature(
            [], qp.int64, allow_missing=True)}, 2)


def test_undecodable_record_names_its_index():
    records = [make_example({"a": 1}).SerializeToString()] * 4 + [b"\x0a\x05\x01"]
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Index: 4\.  Could not "
                                                   r"parse example input, value: "):
        qp.parse_example(records, {"a": qp.FixedLenFeature([], qp.int64)})


def test_batch_input_forms():
    record = make_example({"a": 5}).SerializeToString()
    spec = {"a": qp.FixedLenFeature([], qp.int64)}
    objects = np.empty(2, dtype=object)
    objects[:] = [record, record]
    for batch in ([record, record], (record, record), objects, [bytearray(record), record]):
        np.testing.assert_array_equal(qp.parse_example(batch, spec)["a"], [5, 5])
    empty = qp.parse_example([], {"a": qp.FixedLenFeature([2], qp.int64),
                                  "v": qp.VarLenFeature(qp.string)})
    assert empty["a"].shape == (0, 2) and list(empty["v"].dense_shape) == [0, 0]
    with pytest.raises(TypeError, match=r"^parse_example takes a batch"):
        qp.parse_example(record, spec)
    with pytest.raises(TypeError, match=r"^a NumPy bytes \('S'\) array drops the trailing zero"):
        qp.parse_example(np.array([record]), spec)
    with pytest.raises(TypeError, match=r"^serialized\[1\] must be bytes, got str"):
        qp.parse_example([record, "text"], spec)
    with pytest.raises(InvalidArgumentError, match=r"^Expected names have the same shape as "
                                                   r"serialized: name\.shape=\[1\], "
                                                   r"serialized\.shape=\[2\]$"):  # TF's words
        qp.parse_example([record, record], spec, example_names=["x"])
    assert qp.parse_example([record], spec, example_names=[])  # no names, as in TF


def test_records_of_one_length_with_varints_in_other_places_are_told_apart():
    # [1, 300] and [300, 1] encode to the same length; only the varint boundaries differ.
    records = [make_example({"v": [1, 300]}).SerializeToString()] * 4 + [
        make_example({"v": [300, 1]}).SerializeToString()] * 4
    assert len(set(map(len, records))) == 1
    out = _both_paths(records, {"v": qp.FixedLenFeature([2], qp.int64)})
    np.testing.assert_array_equal(out["v"], [[1, 300]] * 4 + [[300, 1]] * 4)


def test_bits_past_64_in_a_ten_byte_varint_are_dropped_by_both_paths():
    # Int64List [-1] with the 10th varint byte 0x01 (canonical) or 0x7f (bits past 64).
    def record(last):
        feature = b"\x1a\x0c\x0a\x0a" + b"\xff" * 9 + bytes([last])
        entry = b"\x0a\x01v\x12" + bytes([len(feature)]) + feature
        return b"\x0a" + bytes([len(entry) + 2]) + b"\x0a" + bytes([len(entry)]) + entry

    records = [record(0x01)] * 4 + [record(0x7F)] * 4
    out = _both_paths(records, {"v": qp.FixedLenFeature([], qp.int64)})
    np.testing.assert_array_equal(out["v"], [-1] * 8)


def test_fast_path_decodes_uniform_batches_without_the_per_record_parser():
    rng = np.random.default_rng(7)
    records = [make_example({"image": rng.bytes(784), "label": int(rng.integers(10)),
                             "xy": rng.random(2).astype(np.float32),
                             "big": [-1, 2**62, 5]}).SerializeToString() for _ in range(64)]
    spec = {"image": qp.FixedLenFeature([], qp.string), "label": qp.FixedLenFeature([], qp.int64),
            "xy": qp.FixedLenFeature([2], qp.float32), "big": qp.VarLenFeature(qp.int64)}
    features = parsing._example_features(spec)
    sinks = [parsing._sink(feature, len(records)) for feature in features]
    assert parsing._parse_fast(records, features, sinks) == []
    out = _both_paths(records, spec)
    assert out["image"][3] == Example.FromString(records[3]).features.feature[
        "image"].bytes_list.value[0]
    assert out["big"].values.tolist() == [-1, 2**62, 5] * 64


def test_parse_single_sequence_example_rules():
    from queuepipe.protos import make_sequence_example
    record = make_sequence_example(
        {"n": 2}, {"w": [[1], [2]], "v": [[1.0, 2.0], [], [3.0]], "e": []}).SerializeToString()
    context, sequence = qp.parse_single_sequence_example(
        record, {"n": qp.FixedLenFeature([], qp.int64), "gone": qp.VarLenFeature(qp.string),
                 "d": qp.FixedLenFeature([2], qp.float32, [1.0, 2.0])},
        {"w": qp.FixedLenSequenceFeature([], qp.int64), "v": qp.VarLenFeature(qp.float32),
         "e": qp.FixedLenSequenceFeature([3], qp.float32),
         "missing": qp.FixedLenSequenceFeature([2], qp.string, allow_missing=True)})
    assert context["n"] == 2 and context["gone"].values.shape == (0,)
    np.testing.assert_array_equal(context["d"], [1.0, 2.0])
    np.testing.assert_array_equal(sequence["w"], [1, 2])
    assert sequence["v"].indices.tolist() == [[0, 0], [0, 1], [2, 0]]
    assert sequence["v"].dense_shape.tolist() == [3, 2]
    assert sequence["e"].shape == (0, 3) and sequence["missing"].shape == (0, 2)
    with pytest.raises(InvalidArgumentError, match=r"^Name: s-1, Feature list 'x' is required "
                                                   r"but could not be found\."):
        qp.parse_single_sequence_example(record, None, {"x": qp.FixedLenSequenceFeature(
            [], qp.int64)}, example_name=b"s-1")
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Key: w, Index: 0\.  "
                                                   r"Number of values != expected\.  values "
                                                   r"size: 1 but output shape: \[2\]$"):
        qp.parse_single_sequence_example(record, None, {"w": qp.FixedLenSequenceFeature(
            [2], qp.int64)})
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Feature list: w, Index: "
                                                   r"0\.  Data types don't match\. Expected "
                                                   r"type: float$"):
        qp.parse_single_sequence_example(record, None, {"w": qp.VarLenFeature(qp.float32)})
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Context feature: n\.  "
                                                   r"Data types don't match\. Expected type: "
                                                   r"string$"):
        qp.parse_single_sequence_example(record, {"n": qp.FixedLenFeature([], qp.string)})
    with pytest.raises(InvalidArgumentError, match=r"^Name: <unknown>, Feature: t \(data type: "
                                                   r"string\) is required but could not be "
                                                   r"found\.$"):
        qp.parse_single_sequence_example(record, {"t": qp.FixedLenFeature([], qp.string)})


# --- decode_raw -----------------------------------------------------------------------------

def test_decode_raw_matches_tensorflow_for_every_dtype_and_byte_order(golden):
    _, expected, _, _ = golden
    data = expected["decode_raw.input"].tobytes()
    keys = [key for key in expected.files if key.startswith("decode_raw.") and
            key != "decode_raw.input"]
    assert len(keys) == 9
    for key in keys:
        _, dtype, order = key.split(".")
        got = qp.decode_raw(data, dtype, little_endian=order == "little")
        _assert_same(got, expected[key], key)


def test_decode_raw_batches_and_checks_lengths():
    rows = [bytes(range(i, i + 8)) for i in range(3)]
    got = qp.decode_raw(rows, qp.uint16, little_endian=False)
    assert got.shape == (3, 4) and got.dtype == np.uint16
    assert got[1, 0] == 0x0102
    column = np.empty((2, 1), dtype=object)
    column[:, 0] = rows[:2]
    assert qp.decode_raw(column, qp.uint8).shape == (2, 1, 8)
    with pytest.raises(InvalidArgumentError, match=r"^DecodeRaw requires input strings to all "
                                                   r"be the same size, but element 2 has size 8 "
                                                   r"!= 5"):  # TF's order: element 0's first
        qp.decode_raw(rows[:2] + [b"12345"], qp.uint8)
    with pytest.raises(InvalidArgumentError, match=r"^Input to DecodeRaw has length 5 that is "
                                                   r"not a multiple of 4, the size of float$"):
        qp.decode_raw(b"12345", qp.float32)
    padded = qp.decode_raw([b"\x01", b"\x02\x00\x00\x00\x09"], qp.int32, fixed_length=4)
    np.testing.assert_array_equal(padded, [[1], [2]])
    with pytest.raises(TypeError, match=r"^decode_raw: out_type must be numeric"):
        qp.decode_raw(b"ab", qp.string)


@pytest.mark.parametrize("out_type, little_endian", [(qp.uint8, True), (qp.int32, True),
                                                     (qp.int32, False)])
def test_decode_raw_returns_writable_arrays_of_their_own(out_type, little_endian):
    rows = [bytes(range(i, i + 8)) for i in range(3)]
    for value in (rows, rows[0]):
        got = qp.decode_raw(value, out_type, little_endian=little_endian)
        want = got.copy()
        got[...] = 7  # as a trainer normalising a batch in place would
        assert (got == 7).all() and rows[0] == bytes(range(8))
        assert not np.shares_memory(got, want)


def test_parse_example_then_decode_raw_restores_the_arrays():
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, (20, 28, 28), dtype=np.uint8)
    images[:, -1, -1] = 0  # a trailing zero byte must survive
    records = [make_example({"image": image.tobytes()}).SerializeToString() for image in images]
    out = qp.parse_example(records, {"image": qp.FixedLenFeature([], qp.string)})
    np.testing.assert_array_equal(qp.decode_raw(out["image"], qp.uint8).reshape(20, 28, 28),
                                  images)


# --- decode_csv -----------------------------------------------------------------------------

def test_decode_csv_matches_tensorflow(golden):
    manifest, _, _, _ = golden
    case = manifest["decode_csv"]
    got = qp.decode_csv(case["lines"], case["defaults"])
    assert [column.dtype for column in got] == [np.int32, np.float32, object, np.int32]
    for column, want in zip(got, case["expected"]):
        if column.dtype == object:
            assert column.tolist() == [text.encode() for text in want]
        else:
            np.testing.assert_array_equal(column, np.asarray(want, dtype=column.dtype))
    scalars = qp.decode_csv(case["lines"][0], case["defaults"])
    assert scalars == [1, 2.5, b"abc", 7] and isinstance(scalars[0], np.int32)


def test_decode_csv_rules():
    defaults = [np.array([], np.int64), [0.5], np.float64(1.0), ["-"]]
    out = qp.decode_csv(['7,NA,2e3,"a ""q"", b"'], defaults, na_value="NA")
    assert [column.dtype for column in out] == [np.int64, np.float32, np.float64, object]
    assert [column.tolist() for column in out] == [[7], [0.5], [2000.0], [b'a "q", b']]
    with pytest.raises(InvalidArgumentError, match=r"^Field 2 in record 0 is not a valid "
                                                   r"double: a \"q\", b$"):
        qp.decode_csv(['7,NA,"a ""q"", b",x'], defaults, na_value="NA")
    with pytest.raises(InvalidArgumentError, match=r"^Field 0 is required but missing in record "
                                                   r"1!$"):
        qp.decode_csv(["1,2,3,4", ",2,3,4"], defaults)
    with pytest.raises(InvalidArgumentError, match=r"^Expect 4 fields but have 3 in record 0$"):
        qp.decode_csv("1,2,3", defaults)
    with pytest.raises(InvalidArgumentError, match=r"^Field 0 in record 0 is not a valid int64: "
                                                   r"1\.5$"):
        qp.decode_csv("1.5,2,3,4", defaults)
    with pytest.raises(InvalidArgumentError, match=r"^Field 0 in record 0 is not a valid int32: "
                                                   r"3000000000$"):
        qp.decode_csv("3000000000", [[0]])
    picked = qp.decode_csv(["a|b|3|d", "e|f|4|h"], [[""], [0]], field_delim="|",
                           select_cols=[1, 2])
    assert picked[0].tolist() == [b"b", b"f"] and picked[1].tolist() == [3, 4]
    assert qp.decode_csv(['"x"y'], [[""]], use_quote_delim=False)[0].tolist() == [b'"x"y']
    with pytest.raises(ValueError, match=r"^select_cols is not strictly increasing: \[2, 1\]$"):
        qp.decode_csv("a,b,c", [[""], [""]], select_cols=[2, 1])
    grid = qp.decode_csv(np.array([["1", "2"], ["3", "4"]]), [[9]])
    np.testing.assert_array_equal(grid[0], [[1, 2], [3, 4]])


def test_decode_csv_treats_cr_lf_and_empty_records_as_tf_does():
    # a CR or LF where a field starts is skipped; inside an unquoted field it is an error;
    # an empty record has no field (TF's ExtractFields), so one column cannot default it
    assert [c.tolist() for c in qp.decode_csv([b"\r,2", b"1,\n5"], [[0], [0]])] == [[0, 1],
                                                                                  [2, 5]]
    with pytest.raises(InvalidArgumentError, match=r"^Unquoted fields cannot have "
                                                   r"quotes/CRLFs inside"):
        qp.decode_csv([b"1\r2,3"], [[0], [0]])
    with pytest.raises(InvalidArgumentError, match=r"^Expect 1 fields but have 0 in record 1$"):
        qp.decode_csv([b"7", b""], [[9]])
    assert qp.decode_csv([b"7,"], [[0], [5]])[1].tolist() == [5]  # a trailing delimiter


# --- Fast path == per-record path, on random batches ---------------------------------------

_VALUE = {
    "int": st.one_of(st.integers(-2**63, 2**63 - 1),
                     st.sampled_from([0, 1, 127, 128, 300, -1, 2**40])),
    "float": st.floats(width=32),
    "bytes": st.binary(min_size=2, max_size=3),
}


@st.composite
def _batches(draw):
    """A batch of Examples drawn around a few shared layouts, and a spec to parse it with.

    A "messy" batch may leave features out, vary their counts and ask for the wrong dtype,
    so that many parse with an error (which both paths must report alike); a clean one parses.
    """
    messy = draw(st.booleans())
    keys = draw(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True))
    kinds = {key: draw(st.sampled_from(sorted(_VALUE))) for key in keys}
    counts = {key: draw(st.integers(0, 3)) for key in keys}
    records = []
    for _ in range(draw(st.integers(0, 8))):
        values = {}
        for key in keys:
            if messy and draw(st.integers(0, 9)) == 0:
                continue  # absent
            vary = messy and draw(st.integers(0, 5)) == 0
            count = draw(st.integers(0, 3)) if vary else counts[key]
            values[key] = draw(st.lists(_VALUE[kinds[key]], min_size=count, max_size=count))
        records += [make_example(values).SerializeToString()] * draw(st.integers(1, 6))
        if draw(st.booleans()):  # the same length, each list reversed: varints move
            records += [make_example({k: v[::-1] for k, v in values.items()})
                        .SerializeToString()] * draw(st.integers(1, 5))
        if draw(st.booleans()):  # other values, maybe of the same length
            records += [make_example({k: [draw(_VALUE[kinds[k]]) for _ in v]
                                      for k, v in values.items()}).SerializeToString()]
    order = draw(st.permutations(range(len(records))))
    records = [records[i] for i in order]
    dtypes = {"int": qp.int64, "float": qp.float32, "bytes": qp.string}
    spec = {}
    for key in keys + ["zz"]:  # "zz" is in no record
        wrong = key == "zz" or (messy and draw(st.integers(0, 7)) == 0)
        dtype = qp.float32 if wrong else dtypes[kinds[key]]
        choices = ["fixed", "default", "var", "seq"] if messy or key != "zz" else [
            "default", "var", "seq"]
        choice = draw(st.sampled_from(choices))
        size = counts.get(key, 1)
        default = {qp.int64: 4, qp.float32: 0.5, qp.string: b"d"}[dtype]
        if choice == "fixed":
            spec[key] = qp.FixedLenFeature([size], dtype)
        elif choice == "default":
            spec[key] = qp.FixedLenFeature([size], dtype, [default] * size)
        elif choice == "var":
            spec[key] = qp.VarLenFeature(dtype)
        else:
            spec[key] = qp.FixedLenSequenceFeature([], dtype, True, default)
    return records, spec


def _outcome(records, spec, walker, single=False):
    try:
        return parsing._parse_batch(records, parsing._example_features(spec), None,
                                    walker=walker, single=single)
    except InvalidArgumentError as e:
        return str(e)


def _assert_fast_equals_general(records, spec):
    """The bulk paths give what the per-record parser gives: the outputs, or TF's error."""
    general = _outcome(records, spec, None)
    for walker in WALKERS:
        fast = _outcome(records, spec, walker)
        if isinstance(general, str):
            assert fast == general
        else:
            _assert_equal_outputs(fast, general)


@given(_batches())
def test_fast_path_equals_the_per_record_parser(batch):
    records, spec = batch
    _assert_fast_equals_general(records, spec)


@given(st.lists(st.dictionaries(st.sampled_from("pqrs"), st.one_of(
    st.lists(_VALUE["int"], min_size=1, max_size=3),
    st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=3),
    st.lists(st.binary(max_size=4), min_size=1, max_size=3))), max_size=12))
def test_make_example_values_come_back_from_parse_example(dicts):
    records = [make_example(values).SerializeToString() for values in dicts] * 2
    kinds = {}
    for values in dicts:
        for key, value in values.items():
            kinds.setdefault(key, type(value[0]))
    spec = {key: qp.VarLenFeature({int: qp.int64, float: qp.float32, bytes: qp.string}[kind])
            for key, kind in kinds.items()}
    _assert_fast_equals_general(records, spec)
    outcome = _outcome(records, spec, _walkers.walk)
    if isinstance(outcome, str):  # one key held two kinds of list: TF's dtype error
        assert "Data types don't match" in outcome
        return
    for key, sparse in outcome.items():
        want = [v for values in dicts * 2 for v in values.get(key, [])]
        assert sparse.values.tolist() == want


def _single_by_protobuf(record, spec):
    batch = parsing._parse_batch([record], parsing._example_features(spec), None, walker=None,
                                 single=True)
    return {key: parsing._unbatch(value) for key, value in batch.items()}


def test_parse_single_example_slices_records_of_a_seen_layout_as_protobuf_parses_them():
    rng = np.random.default_rng(3)
    spec = {"image": qp.FixedLenFeature([], qp.string), "label": qp.FixedLenFeature([], qp.int64),
            "xy": qp.FixedLenFeature([2, 2], qp.float32), "score": qp.FixedLenFeature([], qp.float32),
            "ids": qp.FixedLenFeature([3], qp.int64), "tags": qp.FixedLenFeature([2], qp.string),
            "vec": qp.FixedLenFeature([3], qp.float32)}
    records = [make_example({
        "image": rng.bytes(16), "label": int(rng.integers(0, 100)), "score": rng.random(),
        "xy": rng.standard_normal(4).astype(np.float32), "tags": [rng.bytes(3), rng.bytes(3)],
        "ids": [int(rng.integers(0, 100)), -2**63, 2**63 - 1],
        "vec": rng.standard_normal(3).astype(np.float32)}).SerializeToString()
        for _ in range(40)]
    # The same length, another layout: the label's varint a byte longer, the image a byte shorter.
    records.append(make_example({"image": b"x" * 15, "label": 300, "score": -1.5,
                                 "xy": np.zeros(4, np.float32),
                                 "tags": [b"abc", b"def"], "ids": [1, -2**63, 2**63 - 1],
                                 "vec": np.ones(3, np.float32)})
                   .SerializeToString())
    assert len(set(map(len, records))) == 1
    for record in records + records:  # the second time round, a plan serves each length
        got, want = qp.parse_single_example(record, spec), _single_by_protobuf(record, spec)
        assert sorted(got) == sorted(want)
        for key in spec:
            assert type(got[key]) is type(want[key]), key
            assert np.shape(got[key]) == np.shape(want[key]), key
            assert getattr(got[key], "dtype", None) == getattr(want[key], "dtype", None), key
            np.testing.assert_array_equal(got[key], want[key])
    parsers = parsing._example_features(spec).single_parsers
    assert any(parser is not parsing._no_parser for parser in parsers.values())


def test_a_spec_with_a_varlen_feature_learns_no_record_layouts():
    """No template serves a VarLenFeature: records of every length go straight to the walk,
    instead of each new length being noted (and the notes cleared when full) first."""
    spec = {"tokens": qp.VarLenFeature(qp.int64), "label": qp.FixedLenFeature([], qp.int64)}
    for n in range(40):
        record = make_example({"tokens": list(range(n)), "label": n}).SerializeToString()
        for _ in range(2):
            got = qp.parse_single_example(record, spec)
            assert got["tokens"].values.tolist() == list(range(n)) and got["label"] == n
    assert not parsing._example_features(spec).lengths_seen


def test_a_varlen_features_indices_and_dense_shape_are_separate_arrays():
    record = make_example({"tokens": [5, 6, 7]}).SerializeToString()
    got = qp.parse_single_example(record, {"tokens": qp.VarLenFeature(qp.int64)})["tokens"]
    got.indices[:] = 9
    assert got.dense_shape.tolist() == [3] and got.indices.shape == (3, 1)
    got.dense_shape[:] = 1
    assert got.indices.tolist() == [[9], [9], [9]]


def test_a_spec_changed_in_place_is_read_anew():
    record = make_example({"label": 7, "score": 0.5}).SerializeToString()
    spec = {"label": qp.FixedLenFeature([], qp.int64)}
    for _ in range(3):  # the spec is cached, and a plan is learned for the record's length
        assert qp.parse_single_example(record, spec) == {"label": 7}
    spec["score"] = qp.FixedLenFeature([], qp.float32)
    assert qp.parse_single_example(record, spec) == {"label": 7, "score": 0.5}
    spec["label"] = qp.FixedLenFeature([], qp.int64, default_value=np.array(1))
    del spec["score"]
    assert qp.parse_single_example(record, spec) == {"label": 7}
    assert qp.parse_example([record], spec)["label"].tolist() == [7]


@pytest.mark.parametrize("spec, default, message", [
    (qp.io.FixedLenFeature, ([], qp.string, 3), r"3 is not bytes or str"),
    (qp.io.FixedLenFeature, ([], qp.int64, 1.5), r"1\.5 is not an integer in int64's range"),
    (qp.io.FixedLenFeature, ([2], qp.int64, [1, 2**70]), r"\d+ is not an integer in int64"),
    (qp.io.FixedLenFeature, ([], qp.float32, "abc"), r"'abc' is not a number"),
    (qp.io.FixedLenFeature, ([], qp.int64, True), r"True is not an integer"),
    (qp.io.FixedLenSequenceFeature, ([], qp.string, True, 0), r"0 is not bytes or str"),
])
def test_a_default_value_of_the_wrong_type_is_refused_when_the_spec_is_built(spec, default,
                                                                              message):
    with pytest.raises(ValueError, match=rf"^{spec.__name__}: default_value .* does not fit "
                                         rf"dtype \w+: {message}"):
        spec(*default)


def test_defaults_of_the_right_type_are_kept():
    assert qp.io.FixedLenFeature([], qp.float32, 2).default_value == 2
    assert qp.io.FixedLenFeature([2], qp.string, ["a", b"b"]).default_value == ["a", b"b"]
    assert qp.io.FixedLenFeature([2], qp.int64, np.array([1, 2])).default_value.tolist() == [1, 2]


@pytest.mark.parametrize("count", [100_000])
def test_long_int64_lists_parse_in_memory_of_the_order_of_the_record(count):
    values = np.arange(count, dtype=np.int64) * 1_000_003 - 7  # varints of 1 to 10 bytes
    spec = {"ids": qp.io.FixedLenFeature([count], qp.int64),
            "label": qp.io.FixedLenFeature([], qp.int64)}
    records = [make_example({"ids": values + i, "label": i}).SerializeToString()
               for i in range(3)]
    assert len({len(r) for r in records}) == 1  # one length: the second compiles a parser
    tracemalloc.start()
    try:
        parsed = [qp.io.parse_single_example(r, spec) for r in records]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    for i, out in enumerate(parsed):
        assert out["ids"].tolist() == (values + i).tolist() and out["label"] == i
    assert peak < 100 * len(records[0]), f"peak {peak} bytes for records of {len(records[0])}"


def _delimited(tag, payload):
    """A length-delimited protobuf field: tag byte, varint length, payload."""
    size, length = len(payload), b""
    while True:
        byte, size = size & 0x7F, size >> 7
        length += bytes([byte | (0x80 if size else 0)])
        if not size:
            return bytes([tag]) + length + payload


def _unpacked_int64s(key, values):
    """An Example whose only feature ``key`` holds ``values`` as an unpacked int64 list
    (tag 0x08 per value): valid protobuf that TF reads, but not what writers make."""
    body = b"".join(b"\x08" + _varint_bytes(v) for v in values)
    feature = _delimited(0x1A, body)
    entry = _delimited(0x0A, key.encode()) + _delimited(0x12, feature)
    return _delimited(0x0A, _delimited(0x0A, entry))


def _varint_bytes(value):
    value &= (1 << 64) - 1
    out = b""
    while True:
        byte, value = value & 0x7F, value >> 7
        out += bytes([byte | (0x80 if value else 0)])
        if not value:
            return out


@st.composite
def _ragged_batches(draw):
    """Records whose lists differ in length from record to record (the ragged bulk path),
    some absent or empty, some encoded unusually or damaged, and a spec to parse them."""
    keys = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True))
    kinds = {key: draw(st.sampled_from(sorted(_VALUE))) for key in keys}
    records = []
    for _ in range(draw(st.integers(4, 24))):
        values = {}
        for key in keys:
            if draw(st.integers(0, 6)) == 0:
                continue  # absent
            count = draw(st.integers(0, 6))
            values[key] = draw(st.lists(_VALUE[kinds[key]], min_size=count, max_size=count))
        record = make_example(values).SerializeToString()
        odd = draw(st.integers(0, 11))
        if odd == 0 and kinds[keys[0]] == "int":  # unpacked: the walk leaves it to protobuf
            record = _unpacked_int64s(keys[0], draw(st.lists(_VALUE["int"], max_size=4)))
        elif odd == 1:  # a second Features field: protobuf merges the two
            record += make_example({keys[0]: []}).SerializeToString()
        elif odd == 2 and record:  # damage: a truncated record
            record = record[:draw(st.integers(0, len(record) - 1))]
        records.append(record)
    spec = {}
    dtypes = {"int": qp.int64, "float": qp.float32, "bytes": qp.string}
    for key in keys:
        dtype = dtypes[kinds[key]]
        choice = draw(st.sampled_from(["var", "var", "seq", "fixed", "default"]))
        if choice == "var":
            spec[key] = qp.VarLenFeature(dtype)
        elif choice == "seq":
            spec[key] = qp.FixedLenSequenceFeature([], dtype, True)
        else:
            size = draw(st.integers(0, 2))
            default = {qp.int64: [4], qp.float32: [0.5], qp.string: [b"d"]}[dtype] * size
            spec[key] = qp.FixedLenFeature([size], dtype,
                                           default if choice == "default" else None)
    return records, spec


@given(_ragged_batches())
def test_the_ragged_bulk_path_equals_the_per_record_parser(batch):
    records, spec = batch
    _assert_fast_equals_general(records, spec)


def test_ragged_records_take_the_bulk_walk(monkeypatch):
    records = [make_example({"tokens": list(range(i % 9)), "label": i}).SerializeToString()
               for i in range(64)]
    spec = {"tokens": qp.io.VarLenFeature(qp.int64), "label": qp.io.FixedLenFeature([], qp.int64)}
    monkeypatch.setattr(parsing._example, "_parse_record",
                        lambda *a: pytest.fail("per-record parse"))
    out = qp.io.parse_example(records, spec)
    assert out["label"].tolist() == list(range(64))
    assert out["tokens"].row_lengths().tolist() == [i % 9 for i in range(64)]


@pytest.mark.parametrize("bits", [7, 14, 28, 35, 56, 63, 64])
def test_the_ragged_walk_decodes_varints_of_every_size(monkeypatch, bits):
    # the words of 4 bytes (varints up to 4 bytes), of 8 (up to 8), and byte by byte (9 and
    # 10: negative values), each beside one-byte values
    rng = np.random.default_rng(bits)
    high = rng.integers(0, 2 ** min(bits, 63), 200, dtype=np.int64)
    if bits == 64:
        high = -high - 1
    lists = [[int(v), *range(i % 50)] for i, v in enumerate(high)]  # few of any one length
    records = [make_example({"ids": ids}).SerializeToString() for ids in lists]
    monkeypatch.setattr(parsing._example, "_parse_record",
                        lambda *a: pytest.fail("per-record parse"))
    out = qp.io.parse_example(records, {"ids": qp.io.VarLenFeature(qp.int64)})["ids"]
    assert out.values.tolist() == [v for ids in lists for v in ids]
    assert out.row_lengths().tolist() == list(map(len, lists))


@given(_ragged_batches())
def test_parse_single_example_equals_the_general_path_record_by_record(batch):
    records, spec = batch
    for record in records:
        general = _outcome([record], spec, None, single=True)
        try:
            single = qp.io.parse_single_example(record, spec)
        except InvalidArgumentError as e:
            assert general == str(e)
            continue
        assert not isinstance(general, str), general
        _assert_equal_outputs(single, {k: parsing._unbatch(v) for k, v in general.items()})


def test_decode_raw_of_no_input_keeps_the_fixed_length_and_refuses_a_length_of_zero():
    out = qp.io.decode_raw(np.array([], dtype=object), qp.int32, fixed_length=8)
    assert (out.shape, out.dtype) == ((0, 2), np.int32)  # TF's shape: [0, 8 / 4]
    for bad in (0, -4, 2.0):
        with pytest.raises(InvalidArgumentError, match=r"^fixed_length must be a positive int"):
            qp.io.decode_raw([b"abcd"], qp.int32, fixed_length=bad)


@given(st.lists(st.binary(max_size=40), min_size=4, max_size=12), st.integers(0, 3))
def test_lengths_pointing_past_the_batch_read_as_damage_not_as_an_index_error(junk, where):
    # an entry, then a key, whose lengths point far past the end of the whole batch: the
    # vectorized walk must mark the record bad, as the per-record parser reports it
    body = b"\x0a\xff\xff\xff\x0f\x0a\xff\xff\xff\x0f" + junk[0]
    damaged = b"\x0a" + bytes([len(body)]) + body
    records = [make_example({"a": list(range(i)), "b": i}).SerializeToString() + junk[i][:0]
               for i in range(len(junk))]
    records.insert(where, damaged)
    spec = {"a": qp.io.VarLenFeature(qp.int64), "b": qp.io.FixedLenFeature([], qp.int64, 0)}
    assert isinstance(_outcome(records, spec, None), str)
    _assert_fast_equals_general(records, spec)


def test_decode_csv_rounds_float32_columns_once_as_tf_does():
    texts = [b"16777217.000000001", b"-16777217.000000001", b"16777217", b"16777216.999999999",
             b"3.4028235e38", b"0.1"]
    (out,) = qp.io.decode_csv(texts, [[1.0]])
    # strtof's results: the float32 nearest each text (16777217 itself is a tie, to even)
    assert out.tolist() == [16777218.0, -16777218.0, 16777216.0, 16777216.0,
                            float(np.float32(3.4028235e38)), float(np.float32(0.1))]


def test_a_string_default_keeps_its_trailing_nul_bytes():
    # TF pads a string FixedLenSequenceFeature with the default as given, NULs included.
    records = [qp.make_example({"a": [b"x"]}).SerializeToString(),
               qp.make_example({}).SerializeToString()]
    spec = {"a": qp.io.FixedLenSequenceFeature([], qp.string, allow_missing=True,
                                               default_value=b"ab\x00")}
    assert qp.io.parse_example(records, spec)["a"].tolist() == [[b"x"], [b"ab\x00"]]
    sparse = qp.SparseValue(np.array([[0]]), np.array([b"x"], dtype=object), np.array([2]))
    assert sparse.to_dense(b"\x00\x00").tolist() == [b"x", b"\x00\x00"]


@pytest.mark.parametrize("record, defaults, select, expected", [
    (b"0x1p3,1", [[0.0], [0]], None, [8.0, 1]),              # a hex float, as strtof reads it
    (b"-0x1.8p1,0X.8", [[0.0], [0.0]], None, [-3.0, 0.5]),
    (b'1,2,x"y', [[0], [0]], [0, 1], [1, 2]),                # past the last selected column:
    (b"1,2,", [[0], [0]], [0, 1], [1, 2]),                   # not looked at
])
def test_decode_csv_reads_what_tf_reads(record, defaults, select, expected):
    # Each case checked against TensorFlow 2.21's tf.io.decode_csv.
    assert [v.item() for v in qp.io.decode_csv(record, defaults, select_cols=select)] == expected


def test_decode_csv_takes_nan_with_characters_as_strtof_does():
    value, count = qp.io.decode_csv(b"nan(123),1", [[0.0], [0]])
    assert np.isnan(value) and value.dtype == np.float32 and count == 1


def test_the_ragged_walk_reads_each_requested_key_once_however_many_keys(monkeypatch):
    # 300 keys, every record holding a different 80% of them: the walk looked every key up
    # at every step (300 x 260 reads of Features, seconds); now once per key
    rng = np.random.default_rng(5)
    keys = [f"feature_{i}" for i in range(300)]
    records = [make_example({k: [int(rng.integers(100))] for k in keys if rng.random() < 0.8})
               .SerializeToString() for _ in range(64)]
    spec = {key: qp.io.VarLenFeature(qp.int64) for key in keys}
    calls = []
    real = _ragged._feature
    monkeypatch.setattr(_ragged, "_feature", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(parsing._example, "_parse_record",
                        lambda *a: pytest.fail("per-record parse"))
    out = parsing._parse_batch(records, parsing._example_features(spec), None,
                               walker=_walkers.pure_walk)
    assert len(calls) <= len(keys)
    for i, record in enumerate(records):
        held = Example.FromString(record).features.feature
        for key in keys[:20]:
            value = out[key]
            got = value.values[value.indices[:, 0] == i].tolist()
            assert got == (list(held[key].int64_list.value) if key in held else [])


@pytest.mark.parametrize("walker", WALKERS)
def test_the_varlen_features_of_a_wide_batch_each_get_their_own_indices(walker):
    # the SparseValues of a batch's VarLenFeatures are built together (one indices array cut
    # into the features' rows): each must still say exactly where its own values sit
    rng = np.random.default_rng(11)
    kinds = [(qp.int64, "int64_list"), (qp.float32, "float_list"), (qp.string, "bytes_list")]
    keys = [f"f{i}" for i in range(12)]
    records = []
    for r in range(40):
        held = {}
        for i, key in enumerate(keys):
            if rng.random() < 0.7:
                values = [r * 10 + i + j for j in range(int(rng.integers(0, 1 + i % 4)))]
                held[key] = [str(v).encode() for v in values] if i % 3 == 2 else \
                    [float(v) for v in values] if i % 3 == 1 else values
        records.append(make_example(held).SerializeToString())
    spec = {key: qp.VarLenFeature(kinds[i % 3][0]) for i, key in enumerate(keys)}
    out = parsing._parse_batch(records, parsing._example_features(spec), None, walker=walker)
    for i, key in enumerate(keys):
        lists = [getattr(Example.FromString(record).features.feature[key], kinds[i % 3][1])
                 .value for record in records]
        value = out[key]
        assert value.indices.tolist() == [[r, j] for r, held in enumerate(lists)
                                          for j in range(len(held))], key
        assert value.values.tolist() == [v for held in lists for v in held], key
        assert value.dense_shape.tolist() == [len(records), max(map(len, lists))], key
        assert value.indices.dtype == value.dense_shape.dtype == np.int64


def _cpu_secs(fn, repeat=3):
    """The least CPU time of ``repeat`` calls of ``fn`` (the machine may be busy)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("walker", [w for w in WALKERS if w is not None])
def test_many_empty_strings_cost_about_what_protobuf_takes_to_read_them(walker):
    # 100,000 empty strings in a bytes list: the ragged walk took one step per value (1.8 s
    # for four such records, 100 times protobuf); now long lists go to the per-record
    # parser, linear in the values. A benign record of the same size (50 strings) is no
    # yardstick here: 100,000 values cost 100,000 Python objects whoever makes them, so the
    # floor is protobuf's own reading of the same records.
    hostile = [make_example({"s": [b""] * (100000 + i)}).SerializeToString() for i in range(4)]
    features = parsing._example_features({"s": qp.io.VarLenFeature(qp.string)})

    def protobuf():
        for record in hostile:
            np.array(Example.FromString(record).features.feature["s"].bytes_list.value,
                     dtype=object)

    ratio = (_cpu_secs(lambda: parsing._parse_batch(hostile, features, None, walker=walker))
             / _cpu_secs(protobuf))
    assert ratio < 8, ratio


def test_parse_example_reads_a_masked_array_of_records_as_its_list():
    # the records go by their list (tolist: None where masked), not by the array's raw items
    record = qp.train.Example().SerializeToString()
    records = np.ma.masked_array(np.array([record, record], dtype=object), mask=[False, True])
    with pytest.raises(TypeError, match=r"^serialized\[1\] must be bytes, got NoneType"):
        qp.io.parse_example(records, {"x": qp.io.VarLenFeature(qp.int64)})
