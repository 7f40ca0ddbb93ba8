"""Mirrors TensorFlow's ``kernel_tests/io_ops/parsing_ops_test.py``: ``parse_example``,
``parse_single_example``, ``parse_single_sequence_example`` and the batched
``parse_sequence_example``, with ``SparseFeature``, and its ``DecodeRawTest``; plus the
batched ``parse_sequence_example`` against values recorded from TF 2.21
(``tests/golden/parsing-tf2.21``).

Each test names the TF tests it mirrors; the expected values are TF's. Differences, each
documented where it shows:

- A spec whose shape is not fully defined (``None``, ``(None, 2, 1)``, ``(1, None)``) is a
  ValueError when the spec is built, saying the shape must be fully defined; TF raises when
  it parses, in other words ("Missing shape for feature a", "First dimension of shape for
  feature a unknown", "All dimensions of shape ... need to be known").
- A FixedLenSequenceFeature ``default_value=[]`` is a ValueError saying the default pads rows
  and must be a scalar (TF: "Cannot reshape a tensor with 0 elements").
- ``FixedLenSequenceFeature(shape=[-1])`` is refused when built (TF 2.21 accepts it; newer TF
  refuses it); ``shape=[0]`` is accepted, as TF 2.21 does (newer TF refuses it), and does not
  crash a parse (the point of TF's test).

Left out, with the reason:

- ``testRaw*RejectsZero*Dimension``: calls of TF's raw ops (``gen_parsing_ops``), which
  queuepipe has no equivalent of.
- ``*RaggedFeature*``: ``RaggedFeature`` (TF 2's) is not in queuepipe, which is TF1's API.
  ``testSingleExampleWithAllFeatureTypes`` is ported without its ragged features.
- ``DecodeJSONExampleTest``, ``ParseTensorOpTest``: ops queuepipe does not have.
- Graph-mode shape checks (``_test``'s static shapes): queuepipe has no graph; the shapes of
  the arrays are checked instead.
"""

import os

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.errors import InvalidArgumentError
from queuepipe.protos import (BytesList, Example, Feature, FeatureList, FeatureLists, Features,
                              FloatList, Int64List, SequenceExample)
from queuepipe.records import tf_record_iterator

HERE = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.join(HERE, "..", "golden")


def example(**features):
    return Example(features=Features(feature=features))


def bytes_feature(values):
    return Feature(bytes_list=BytesList(value=values))


def int64_feature(values):
    return Feature(int64_list=Int64List(value=values))


def float_feature(values):
    return Feature(float_list=FloatList(value=values))


def sequence_example(context=None, feature_lists=None):
    return SequenceExample(
        context=Features(feature=context or {}),
        feature_lists=FeatureLists(feature_list={
            key: FeatureList(feature=steps) for key, steps in (feature_lists or {}).items()}))


def random_bytes(shape, seed):
    """TF's ``np.random.rand(*shape).astype(bytes)``: strings of random numbers."""
    return np.random.default_rng(seed).random(shape).astype(bytes).astype(object)


def assert_outputs(actual, expected):
    """TF's _compare_output_to_expected: a sparse output against ``(indices, values,
    dense_shape)``, a dense one against an array."""
    assert set(actual) == set(expected)
    for key, value in actual.items():
        want = expected[key]
        if isinstance(value, qp.SparseValue):
            assert isinstance(want, tuple) and len(want) == 3, key
            for got, part in zip(value, want):
                np.testing.assert_array_equal(got, np.asarray(part), err_msg=key)
        else:
            np.testing.assert_array_equal(np.asarray(value), np.asarray(want), err_msg=key)
            assert np.shape(value) == np.shape(want), key


def serialize(messages):
    return [m.SerializeToString() for m in messages]


# --- ParseExampleTest -------------------------------------------------------------------------

def test_empty_serialized_with_all_defaults():
    """testEmptySerializedWithAllDefaults (an empty example_names array is no names)"""
    a_default, b_default = [0, 42, 0], random_bytes((3, 3), 0)
    c_default = np.random.default_rng(1).random(2).astype(np.float32)
    out = qp.io.parse_example(
        ["", ""] and [b"", b""], {
            "st_a": qp.io.VarLenFeature(qp.int64),
            "a": qp.io.FixedLenFeature((1, 3), qp.int64, default_value=a_default),
            "b": qp.io.FixedLenFeature((3, 3), qp.string, default_value=b_default),
            "c:has_a_tricky_name": qp.io.FixedLenFeature((2,), qp.float32,
                                                         default_value=c_default)},
        example_names=np.empty((0,), dtype=bytes))
    assert_outputs(out, {
        "st_a": (np.empty((0, 2), np.int64), np.empty((0,), np.int64), [2, 0]),
        "a": np.array(2 * [[a_default]]), "b": np.array(2 * [b_default]),
        "c:has_a_tricky_name": np.array(2 * [c_default])})
    assert out["st_a"].values.dtype == np.int64 and out["a"].shape == (2, 1, 3)


def test_empty_serialized_without_defaults_should_fail():
    """testEmptySerializedWithoutDefaultsShouldFail"""
    spec = {"st_a": qp.io.VarLenFeature(qp.int64),
            "a": qp.io.FixedLenFeature((1, 3), qp.int64, default_value=[0, 42, 0]),
            "b": qp.io.FixedLenFeature((3, 3), qp.string, default_value=random_bytes((3, 3), 2)),
            "c": qp.io.FixedLenFeature((2,), dtype=qp.float32)}
    empty_c = example(c=Feature()).SerializeToString()  # the key there, its value empty
    for records, names in (([empty_c], ["in1"]), ([b"", b""], ["in1", "in2"])):
        with pytest.raises(InvalidArgumentError,
                           match=r"Name: in1, Feature: c \(data type: float\) is required"):
            qp.io.parse_example(records, spec, example_names=names)


def test_dense_not_matching_shape_should_fail():
    """testDenseNotMatchingShapeShouldFail"""
    records = serialize([example(a=float_feature([1, 1, 3])), example(a=float_feature([-1, -1]))])
    with pytest.raises(InvalidArgumentError,
                       match=r"Name: failing, Key: a, Index: 1\.  Number of float val"):
        qp.io.parse_example(records, {"a": qp.io.FixedLenFeature((1, 3), qp.float32)},
                            example_names=["passing", "failing"])


def test_dense_default_no_shape_should_fail():
    """testDenseDefaultNoShapeShouldFail, and the unknown dimensions of
    testSerializedContainingVarLenDense: refused when the spec is built (see the module
    docstring)."""
    for shape in (None, (None, 2, 1), (1, None)):
        with pytest.raises(ValueError, match=r"^FixedLenFeature: shape must be a fully "
                                             r"defined list"):
            qp.io.FixedLenFeature(shape, qp.float32)


def test_serialized_containing_sparse():
    """testSerializedContainingSparse"""
    records = serialize([
        example(st_c=float_feature([3, 4])),
        example(st_c=float_feature([])),
        example(st_d=Feature()),
        example(st_c=float_feature([1, 2, -1]), st_d=bytes_feature([b"hi"]))])
    out = qp.io.parse_example(records, {"st_c": qp.io.VarLenFeature(qp.float32),
                                        "st_d": qp.io.VarLenFeature(qp.string)})
    assert_outputs(out, {
        "st_c": ([[0, 0], [0, 1], [3, 0], [3, 1], [3, 2]], [3.0, 4.0, 1.0, 2.0, -1.0], [4, 3]),
        "st_d": ([[3, 0]], [b"hi"], [4, 1])})
    assert out["st_c"].values.dtype == np.float32


def test_serialized_containing_sparse_feature():
    """testSerializedContainingSparseFeature"""
    records = serialize([
        example(val=float_feature([3, 4]), idx=int64_feature([5, 10])),
        example(val=float_feature([]), idx=int64_feature([])),
        example(val=Feature()),  # the idx feature missing
        example(val=float_feature([1, 2, -1]), idx=int64_feature([0, 9, 3]))])  # unsorted
    out = qp.io.parse_example(records, {"sp": qp.io.SparseFeature(["idx"], "val", qp.float32,
                                                                  [13])})
    assert_outputs(out, {"sp": ([[0, 5], [0, 10], [3, 0], [3, 3], [3, 9]],
                                np.array([3.0, 4.0, 1.0, -1.0, 2.0], np.float32), [4, 13])})
    # A batch of 64 (the bulk paths), each row as TF gives it in the batch of 4.
    out = qp.io.parse_example(records * 16, {"sp": qp.io.SparseFeature(["idx"], "val",
                                                                       qp.float32, [13])})
    rows = np.array([[0, 5], [0, 10], [3, 0], [3, 3], [3, 9]])
    assert_outputs(out, {"sp": (np.concatenate([rows + [4 * i, 0] for i in range(16)]),
                                np.tile(np.array([3.0, 4.0, 1.0, -1.0, 2.0], np.float32), 16),
                                [64, 13])})


def test_serialized_containing_sparse_feature_reuse():
    """testSerializedContainingSparseFeatureReuse"""
    records = serialize([
        example(val1=float_feature([3, 4]), val2=float_feature([5, 6]),
                idx=int64_feature([5, 10])),
        example(val1=float_feature([]), idx=int64_feature([]))])
    out = qp.io.parse_example(records, {
        "sp1": qp.io.SparseFeature("idx", "val1", qp.float32, 13),
        "sp2": qp.io.SparseFeature("idx", "val2", qp.float32, size=7, already_sorted=True)})
    assert_outputs(out, {"sp1": ([[0, 5], [0, 10]], [3.0, 4.0], [2, 13]),
                         "sp2": ([[0, 5], [0, 10]], [5.0, 6.0], [2, 7])})


def test_serialized_containing_3d_sparse_feature():
    """testSerializedContaining3DSparseFeature"""
    records = serialize([
        example(val=float_feature([3, 4]), idx0=int64_feature([5, 10]),
                idx1=int64_feature([0, 2])),
        example(val=float_feature([]), idx0=int64_feature([]), idx1=int64_feature([])),
        example(val=Feature()),
        example(val=float_feature([1, 2, -1]), idx0=int64_feature([0, 9, 3]),
                idx1=int64_feature([1, 0, 2]))])
    out = qp.io.parse_example(records, {"sp": qp.io.SparseFeature(["idx0", "idx1"], "val",
                                                                  qp.float32, [13, 3])})
    assert_outputs(out, {"sp": ([[0, 5, 0], [0, 10, 2], [3, 0, 1], [3, 3, 2], [3, 9, 0]],
                                [3.0, 4.0, 1.0, -1.0, 2.0], [4, 13, 3])})


DENSE_SPEC = {"a": qp.io.FixedLenFeature((1, 2, 1), dtype=qp.float32),
              "b*has+a:tricky_name": qp.io.FixedLenFeature((1, 1, 1, 1), dtype=qp.string)}


def test_serialized_containing_dense():
    """testSerializedContainingDense, testSerializedContainingDenseWithConcat"""
    b = "b*has+a:tricky_name"
    records = serialize([example(a=float_feature([1, 1]), **{b: bytes_feature([b"b0_str"])}),
                         example(a=float_feature([-1, -1]), **{b: bytes_feature([b""])})])
    expected = {"a": np.array([[1, 1], [-1, -1]], np.float32).reshape(2, 1, 2, 1),
                b: np.array([b"b0_str", b""], dtype=object).reshape(2, 1, 1, 1, 1)}
    assert_outputs(qp.io.parse_example(records, DENSE_SPEC), expected)
    concatenated = [
        example(a=float_feature([10, 10])).SerializeToString()
        + example(a=float_feature([1, 1]), **{b: bytes_feature([b"b0_str"])}).SerializeToString(),
        example(**{b: bytes_feature([b"b100"])}).SerializeToString()
        + example(a=float_feature([-1, -1]), **{b: bytes_feature([b"b1"])}).SerializeToString()]
    expected[b] = np.array([b"b0_str", b"b1"], dtype=object).reshape(2, 1, 1, 1, 1)
    assert_outputs(qp.io.parse_example(concatenated, DENSE_SPEC), expected)


def test_serialized_containing_dense_scalar_and_defaults():
    """testSerializedContainingDenseScalar, testSerializedContainingDenseWithDefaults"""
    records = serialize([example(a=float_feature([1])), example()])
    out = qp.io.parse_example(records, {"a": qp.io.FixedLenFeature((1,), qp.float32,
                                                                   default_value=-1)})
    assert_outputs(out, {"a": np.array([[1], [-1]], np.float32)})
    records = serialize([example(a=float_feature([1, 1])), example(b=bytes_feature([b"b1"])),
                         example(b=Feature())])
    out = qp.io.parse_example(records, {
        "a": qp.io.FixedLenFeature((1, 2, 1), qp.float32, default_value=[3.0, -3.0]),
        "b": qp.io.FixedLenFeature((1, 1, 1, 1), qp.string, default_value="tmp_str")})
    assert_outputs(out, {
        "a": np.array([[1, 1], [3, -3], [3, -3]], np.float32).reshape(3, 1, 2, 1),
        "b": np.array([b"tmp_str", b"b1", b"tmp_str"], dtype=object).reshape(3, 1, 1, 1, 1)})


def test_serialized_containing_sparse_and_sparse_feature_and_dense():
    """testSerializedContainingSparseAndSparseFeatureAndDenseWithNoDefault,
    testSerializedContainingSparseAndSparseFeatureWithReuse"""
    records = serialize([
        example(c=float_feature([3, 4]), val=bytes_feature([b"a", b"b"]),
                idx=int64_feature([0, 3])),
        example(c=float_feature([1, 2]), val=bytes_feature([b"c"]), idx=int64_feature([7]))])
    a_default, b_default = [1, 2, 3], random_bytes((3, 3), 3)
    out = qp.io.parse_example(records, {
        "st_a": qp.io.VarLenFeature(qp.int64),
        "sp": qp.io.SparseFeature("idx", "val", qp.string, 13),
        "a": qp.io.FixedLenFeature((1, 3), qp.int64, default_value=a_default),
        "b": qp.io.FixedLenFeature((3, 3), qp.string, default_value=b_default),
        "c": qp.io.FixedLenFeature((2,), qp.float32)}, example_names=["in1", "in2"])
    assert_outputs(out, {
        "st_a": (np.empty((0, 2), np.int64), np.empty((0,), np.int64), [2, 0]),
        "sp": ([[0, 0], [0, 3], [1, 7]], [b"a", b"b", b"c"], [2, 13]),
        "a": np.array(2 * [[a_default]]), "b": np.array(2 * [b_default]),
        "c": np.array([[3, 4], [1, 2]], np.float32)})
    records = serialize([
        example(val=bytes_feature([b"a", b"b"]), idx=int64_feature([0, 3])),
        example(val=bytes_feature([b"c", b"d"]), idx=int64_feature([7, 1]))])
    out = qp.io.parse_example(records, {
        "idx": qp.io.VarLenFeature(qp.int64),
        "sp": qp.io.SparseFeature(["idx"], "val", qp.string, [13])},
        example_names=["in1", "in2"])
    assert_outputs(out, {"idx": ([[0, 0], [0, 1], [1, 0], [1, 1]], [0, 3, 7, 1], [2, 2]),
                         "sp": ([[0, 0], [0, 3], [1, 1], [1, 7]], [b"a", b"b", b"d", b"c"],
                                [2, 13])})


def test_a_sparse_feature_whose_keys_conflict_is_refused_in_tfs_words():
    """TF 2.21's answers (parsing_config): one key with two types, or dense and sparse."""
    with pytest.raises(ValueError, match=r"^Conflicting type float32 vs int64 for feature val\."):
        qp.io.parse_example([b""], {"sp": qp.io.SparseFeature("idx", "val", qp.float32, 13),
                                    "val": qp.io.VarLenFeature(qp.int64)})
    with pytest.raises(ValueError, match=r"^Dense and sparse keys must not intersect"):
        qp.io.parse_example([b""], {"sp": qp.io.SparseFeature("idx", "val", qp.float32, 13),
                                    "val": qp.io.FixedLenFeature([], qp.float32, 0.0)})
    with pytest.raises(ValueError, match=r"^sp_ids and vocab_size have to have equal lengths"):
        qp.io.SparseFeature(["a", "b"], "val", qp.float32, [13])
    record = example(val=float_feature([1, 2]), idx=int64_feature([3])).SerializeToString()
    with pytest.raises(InvalidArgumentError, match=r"^SparseFeature 'sp': Dimensions 1 and 2 "
                                                   r"are not compatible"):  # TF's ValueError
        qp.io.parse_example([record], {"sp": qp.io.SparseFeature("idx", "val", qp.float32, 13)})


def _varlen_dense_larger_batch(batch_size, rng):
    truth_int = list(range(batch_size))
    truth_str = [[f"foo{i}".encode(), f"bar{i}".encode()] for i in range(batch_size)]
    expected_str = [list(row) for row in truth_str]
    for i in range(1, batch_size):
        col = 1
        if rng.random() < 0.25:
            expected_str[i][col] = b"default"
            col -= 1
            truth_str[i].pop()
        if rng.random() < 0.25:
            expected_str[i][col] = b"default"
            truth_str[i].pop()
    records = serialize([example(a=int64_feature([truth_int[i]]), b=bytes_feature(truth_str[i]))
                         for i in range(batch_size)])
    out = qp.io.parse_example(records, {
        "a": qp.io.FixedLenSequenceFeature((), qp.int64, allow_missing=True, default_value=-1),
        "b": qp.io.FixedLenSequenceFeature([], qp.string, allow_missing=True,
                                           default_value="default")})
    assert_outputs(out, {"a": np.array(truth_int, np.int64).reshape(batch_size, 1),
                         "b": np.array(expected_str, dtype=object).reshape(batch_size, 2)})


def test_serialized_containing_varlen_dense_larger_batch():
    """testSerializedContainingVarLenDenseLargerBatch"""
    rng = np.random.default_rng(3456)
    for batch_size in (1, 10, 20, 100, 256):
        _varlen_dense_larger_batch(batch_size, rng)


VARLEN_NAMES = ["in1", "in2", "in3", "in4"]
VARLEN_RECORDS = serialize([
    example(c=int64_feature([2])),
    example(a=float_feature([1, 1]), b=bytes_feature([b"b0_str", b"b1_str"])),
    example(a=float_feature([-1, -1, 2, 2]), b=bytes_feature([b"b1"])),
    example(a=float_feature([]), c=int64_feature([3]))])


def test_serialized_containing_varlen_dense():
    """testSerializedContainingVarLenDense"""
    spec = {"a": qp.io.FixedLenSequenceFeature((2, 1), qp.float32, allow_missing=True),
            "b": qp.io.FixedLenSequenceFeature((1, 1, 1), qp.string, allow_missing=True),
            "c": qp.io.FixedLenSequenceFeature([], qp.int64, allow_missing=True),
            "d": qp.io.FixedLenSequenceFeature([], qp.string, allow_missing=True)}
    expected = {
        "a": np.array([[0, 0, 0, 0], [1, 1, 0, 0], [-1, -1, 2, 2], [0, 0, 0, 0]],
                      np.float32).reshape(4, 2, 2, 1),
        "b": np.array([[b"", b""], [b"b0_str", b"b1_str"], [b"b1", b""], [b"", b""]],
                      dtype=object).reshape(4, 2, 1, 1, 1),
        "c": np.array([2, 0, 0, 3], np.int64).reshape(4, 1),
        "d": np.empty((4, 0), dtype=object)}
    assert_outputs(qp.io.parse_example(VARLEN_RECORDS, spec, example_names=VARLEN_NAMES),
                   expected)
    spec["a"] = qp.io.FixedLenSequenceFeature((2, 1), qp.float32, allow_missing=True,
                                              default_value=-2.0)
    expected["a"] = np.array([[-2, -2, -2, -2], [1, 1, -2, -2], [-1, -1, 2, 2],
                              [-2, -2, -2, -2]], np.float32).reshape(4, 2, 2, 1)
    assert_outputs(qp.io.parse_example(VARLEN_RECORDS, spec, example_names=VARLEN_NAMES),
                   expected)
    with pytest.raises(InvalidArgumentError,
                       match=r"Name: in3, Key: b, Index: 2\.  Number of bytes values is not a "
                             r"multiple of stride length\."):
        qp.io.parse_example(VARLEN_RECORDS, {
            "a": qp.io.FixedLenSequenceFeature((2, 1), qp.float32, allow_missing=True),
            "b": qp.io.FixedLenSequenceFeature((2, 1, 1), qp.string, allow_missing=True)},
            example_names=VARLEN_NAMES)
    with pytest.raises(ValueError, match=r"default_value pads rows and must be a scalar"):
        qp.io.parse_example(VARLEN_RECORDS, {"a": qp.io.FixedLenSequenceFeature(
            (2, 1), qp.float32, allow_missing=True, default_value=[])})
    with pytest.raises(ValueError, match=r"Unsupported: FixedLenSequenceFeature requires "
                                         r"allow_missing to be True\."):
        qp.io.parse_example(VARLEN_RECORDS, {"c": qp.io.FixedLenSequenceFeature(
            shape=[], dtype=qp.int64, allow_missing=False)})


# --- ParseSingleExampleTest -------------------------------------------------------------------

def test_single_example_with_sparse_and_sparse_feature_and_dense():
    """testSingleExampleWithSparseAndSparseFeatureAndDense, testSingleExampleWithAllFeatureTypes
    (without its ragged features); a bare int shape (``FixedLenFeature(2, ...)``) is ``[2]``"""
    record = example(c=float_feature([3, 4]), d=float_feature([0.0, 1.0]),
                     val=bytes_feature([b"a", b"b"]), idx=int64_feature([0, 3]),
                     st_a=float_feature([3.0, 4.0])).SerializeToString()
    a_default, b_default = [1, 2, 3], random_bytes((3, 3), 4)
    spec = {"st_a": qp.io.VarLenFeature(qp.float32),
            "sp": qp.io.SparseFeature(["idx"], "val", qp.string, [13]),
            "a": qp.io.FixedLenFeature((1, 3), qp.int64, default_value=a_default),
            "b": qp.io.FixedLenFeature((3, 3), qp.string, default_value=b_default),
            "c": qp.io.FixedLenFeature(2, qp.float32),
            "d": qp.io.FixedLenSequenceFeature([], qp.float32, allow_missing=True)}
    expected = {"st_a": ([[0], [1]], [3.0, 4.0], [2]),
                "sp": ([[0], [3]], [b"a", b"b"], [13]),
                "a": [a_default], "b": b_default,
                "c": np.array([3, 4], np.float32), "d": np.array([0.0, 1.0], np.float32)}
    for names in ("in1", None):
        assert_outputs(qp.io.parse_single_example(record, spec, example_names=names), expected)
    assert qp.io.FixedLenFeature(2, qp.float32).shape == (2,)


# --- ParseSequenceExampleTest -----------------------------------------------------------------

def both(kwargs, context=None, lists=None, error=None):
    """TF's _testBoth: parse_single_sequence_example, then parse_sequence_example of a batch
    of one (the expected values given a batch dimension, lengths from the steps)."""
    context, lists = context or {}, lists or {}
    single = dict(kwargs)
    batch = {key: value for key, value in kwargs.items() if key != "example_name"}
    batch["serialized"] = [kwargs["serialized"]]
    batch["example_names"] = [kwargs["example_name"]] if "example_name" in kwargs else None
    if error:
        for parse, args in ((qp.io.parse_single_sequence_example, single),
                            (qp.io.parse_sequence_example, batch)):
            with pytest.raises(InvalidArgumentError, match=error):
                parse(**args)
        return
    got_context, got_lists = qp.io.parse_single_sequence_example(**single)
    assert_outputs(got_context, context)
    assert_outputs(got_lists, lists)
    lengths = {key: [np.shape(value)[0]] for key, value in lists.items()
               if isinstance(kwargs["sequence_features"][key], qp.io.FixedLenSequenceFeature)}

    def batched(value):
        if isinstance(value, tuple):
            indices = np.asarray(value[0], np.int64).reshape(len(value[1]), len(value[2]))
            return np.insert(indices, 0, 0, axis=1), value[1], np.insert(value[2], 0, 1)
        return np.expand_dims(value, axis=0)

    got_context, got_lists, got_lengths = qp.io.parse_sequence_example(**batch)
    assert_outputs(got_context, {key: batched(value) for key, value in context.items()})
    assert_outputs(got_lists, {key: batched(value) for key, value in lists.items()})
    assert_outputs(got_lengths, lengths)


def test_create_sequence_example():
    """testCreateSequenceExample"""
    sequence_example(
        context={"global_feature": float_feature([1, 2, 3])},
        feature_lists={
            "repeated_feature_2_frames": [bytes_feature([b"a", b"b", b"c"]),
                                          bytes_feature([b"a", b"d", b"e"])],
            "repeated_feature_3_frames": [int64_feature([3, 4, 5, 6, 7]),
                                          int64_feature([-1, 0, 0, 0, 0]),
                                          int64_feature([1, 2, 3, 4, 5])]}).SerializeToString()


def test_fixed_len_sequence_feature_shapes():
    """testFixedLenSequenceFeatureInvalidShapes, testFixedLenSequenceFeatureZeroDimDoesNotCrash
    (TF 2.21's answers: see the module docstring)"""
    with pytest.raises(ValueError, match=r"non-negative"):
        qp.io.FixedLenSequenceFeature(shape=[-1], dtype=qp.float32)
    zero = qp.io.FixedLenSequenceFeature(shape=[0], dtype=qp.float32, allow_missing=True)
    record = sequence_example(feature_lists={"k": [Feature()]}).SerializeToString()
    assert qp.io.parse_single_sequence_example(record, sequence_features={"k": zero})[1]["k"] \
        .shape == (1, 0)
    assert qp.io.parse_example([b""], {"k": zero})["k"].shape == (1, 0, 0)


def test_sequence_example_with_sparse_and_dense_context():
    """testSequenceExampleWithSparseAndDenseContext"""
    record = sequence_example(context={"c": float_feature([3, 4]),
                                       "st_a": float_feature([3.0, 4.0])}).SerializeToString()
    a_default, b_default = [[1, 2, 3]], random_bytes((3, 3), 5)
    both({"example_name": "in1", "serialized": record, "context_features": {
        "st_a": qp.io.VarLenFeature(qp.float32),
        "a": qp.io.FixedLenFeature((1, 3), qp.int64, default_value=a_default),
        "b": qp.io.FixedLenFeature((3, 3), qp.string, default_value=b_default),
        "c": qp.io.FixedLenFeature((2,), qp.float32)}},
        context={"st_a": ([[0], [1]], [3.0, 4.0], [2]), "a": a_default, "b": b_default,
                 "c": np.array([3, 4], np.float32)})


def test_sequence_example_with_multiple_size_feature_lists():
    """testSequenceExampleWithMultipleSizeFeatureLists"""
    record = sequence_example(feature_lists={
        "a": [int64_feature([-1, 0, 1]), int64_feature([2, 3, 4]), int64_feature([5, 6, 7]),
              int64_feature([8, 9, 10])],
        "b": [bytes_feature([b"r00", b"r01", b"r10", b"r11"])],
        "c": [float_feature([3, 4]), float_feature([-1, 2])]}).SerializeToString()
    both({"example_name": "in1", "serialized": record, "sequence_features": {
        "a": qp.io.FixedLenSequenceFeature((1, 3), qp.int64),
        "b": qp.io.FixedLenSequenceFeature((2, 2), qp.string),
        "c": qp.io.FixedLenSequenceFeature(2, qp.float32),
        "d": qp.io.FixedLenSequenceFeature((5,), qp.float32, allow_missing=True)}},
        lists={"a": np.array([[[-1, 0, 1]], [[2, 3, 4]], [[5, 6, 7]], [[8, 9, 10]]], np.int64),
               "b": np.array([[[b"r00", b"r01"], [b"r10", b"r11"]]], dtype=object),
               "c": np.array([[3, 4], [-1, 2]], np.float32),
               "d": np.empty((0, 5), np.float32)})


SPARSE_LISTS = {
    "a": [int64_feature([3, 4]), int64_feature([1, 0])],
    "st_a": [float_feature([3.0, 4.0]), float_feature([5.0]), float_feature([])],
    "st_b": [bytes_feature([b"a"]), bytes_feature([]), bytes_feature([]),
             bytes_feature([b"b", b"c"])]}
SPARSE_LISTS_SPEC = {"st_a": qp.io.VarLenFeature(qp.float32),
                     "st_b": qp.io.VarLenFeature(qp.string),
                     "st_c": qp.io.VarLenFeature(qp.int64),
                     "a": qp.io.FixedLenSequenceFeature((2,), qp.int64)}
SPARSE_LISTS_EXPECTED = {
    "a": np.array([[3, 4], [1, 0]], np.int64),
    "st_a": ([[0, 0], [0, 1], [1, 0]], [3.0, 4.0, 5.0], [3, 2]),
    "st_b": ([[0, 0], [3, 0], [3, 1]], [b"a", b"b", b"c"], [4, 2]),
    "st_c": (np.empty((0, 2), np.int64), np.empty((0,), np.int64), [0, 0])}


@pytest.mark.parametrize("name", [None, "in1"])
def test_sequence_example_with_sparse_and_dense_feature_lists(name):
    """testSequenceExampleWithoutDebugName, testSequenceExampleWithSparseAndDenseFeatureLists"""
    kwargs = {"serialized": sequence_example(feature_lists=SPARSE_LISTS).SerializeToString(),
              "sequence_features": SPARSE_LISTS_SPEC}
    if name:
        kwargs["example_name"] = name
    both(kwargs, lists=SPARSE_LISTS_EXPECTED)


def test_sequence_example_with_empty_feature_in_feature_lists():
    """testSequenceExampleWithEmptyFeatureInFeatureLists"""
    record = sequence_example(feature_lists={
        "st_a": [float_feature([3.0, 4.0]), Feature(), float_feature([5.0])]})
    both({"example_name": "in1", "serialized": record.SerializeToString(),
          "sequence_features": {"st_a": qp.io.VarLenFeature(qp.float32)}},
         lists={"st_a": ([[0, 0], [0, 1], [2, 0]], [3.0, 4.0, 5.0], [3, 2])})


@pytest.mark.parametrize("steps, error", [
    ([int64_feature([-1, 0]), float_feature([2, 3])],
     r"Feature list: a, Index: 1\.  Data types don't match\. Expected type: int64"),
    ([float_feature([2, 3])],
     r"Feature list: a, Index: 0\.  Data types don't match\. Expected type: int64"),
    ([int64_feature([3, 4]), int64_feature([1, 2]), float_feature([2.0, 3.0])],
     r"Name: in1, Feature list: a, Index: 2\.  Data types don't match\. Expected type: int64"),
    ([int64_feature([2, 3]), int64_feature([2, 3, 4])],
     r"Name: in1, Key: a, Index: 1\.  Number of int64 values != expected\.  values size: 3 "
     r"but output shape: \[2\]|Feature list 'a' has an unexpected number of values\.  Total "
     r"values size: 5 is not consistent with output shape: \[\?,2\]"),
    ([int64_feature([2]), int64_feature([2, 3, 4])],
     r"Name: in1, Key: a, Index: 0\.  Number of (int64 )?values != expected\.  values size: 1 "
     r"but output shape: \[2\]"),
], ids=["testSequenceExampleListWithInconsistentDataFails",
        "testSequenceExampleListWithWrongDataTypeFails",
        "testSequenceExampleListWithWrongSparseDataTypeFails",
        "testSequenceExampleListWithWrongShapeFails",
        "testSequenceExampleListWithWrongShapeFails2"])
def test_sequence_example_list_errors(steps, error):
    record = sequence_example(feature_lists={"a": steps}).SerializeToString()
    both({"example_name": "in1", "serialized": record,
          "sequence_features": {"a": qp.io.FixedLenSequenceFeature((2,), qp.int64)}},
         error=error)


def test_sequence_example_with_missing_feature_list_fails():
    """testSequenceExampleWithMissingFeatureListFails"""
    both({"example_name": "in1", "serialized": sequence_example().SerializeToString(),
          "sequence_features": {"a": qp.io.FixedLenSequenceFeature((2,), qp.int64)}},
         error=r"Name: in1, Feature list 'a' is required but could not be found\.  Did you "
               r"mean to include it in feature_list_dense_missing_assumed_empty or "
               r"feature_list_dense_defaults\?")


def test_sequence_example_batch():
    """testSequenceExampleBatch"""
    first = sequence_example(feature_lists={"a": [
        int64_feature([-1, 0, 1]), int64_feature([2, 3, 4]), int64_feature([5, 6, 7]),
        int64_feature([8, 9, 10])]})
    second = sequence_example(context={"c": float_feature([7])}, feature_lists={
        "a": [int64_feature([21, 2, 11])], "b": [int64_feature([5])]})
    context, lists, lengths = qp.io.parse_sequence_example(
        serialize([first, second]),
        context_features={"c": qp.io.FixedLenFeature((), qp.float32, default_value=-1)},
        sequence_features={
            "a": qp.io.FixedLenSequenceFeature((1, 3), qp.int64),
            "b": qp.io.FixedLenSequenceFeature((), qp.int64, allow_missing=True),
            "d": qp.io.FixedLenSequenceFeature((5,), qp.float32, allow_missing=True)},
        example_names=["in1", "in2"])
    assert_outputs(context, {"c": np.array([-1, 7], np.float32)})
    assert_outputs(lists, {
        "a": np.array([[[[-1, 0, 1]], [[2, 3, 4]], [[5, 6, 7]], [[8, 9, 10]]],
                       [[[21, 2, 11]], [[0, 0, 0]], [[0, 0, 0]], [[0, 0, 0]]]], np.int64),
        "b": np.array([[0], [5]], np.int64),
        "d": np.empty((2, 0, 5), np.float32)})
    assert_outputs(lengths, {"a": [4, 1], "b": [0, 1], "d": [0, 0]})
    with pytest.raises(TypeError, match=r"^parse_sequence_example takes a batch .*; use "
                                        r"parse_single_sequence_example for one record$"):
        qp.io.parse_sequence_example(first.SerializeToString())


def test_parse_sequence_example_matches_tensorflow_on_the_golden_records():
    """Values recorded from TF 2.21 (tests/golden/parsing-tf2.21/make_reference.py)."""
    expected = np.load(os.path.join(GOLDEN, "parsing-tf2.21", "expected.npz"),
                       allow_pickle=True)  # the npz is ours (object arrays of TF's strings)
    records = list(tf_record_iterator(os.path.join(GOLDEN, "tf2.21", "sequence.tfrecord")))
    context_spec = {"length": qp.io.FixedLenFeature([], qp.int64),
                    "title": qp.io.VarLenFeature(qp.string),
                    "absent": qp.io.FixedLenFeature([2], qp.float32, default_value=[0.5, -1.0])}
    sequence_spec = {"words": qp.io.VarLenFeature(qp.int64),
                     "scores": qp.io.FixedLenSequenceFeature([3], qp.float32),
                     "missing": qp.io.FixedLenSequenceFeature([2], qp.int64,
                                                              allow_missing=True)}
    compared = 0
    for batch, chosen in (("all", records), ("part", records[3:6])):
        outputs = qp.io.parse_sequence_example(chosen, context_spec, sequence_spec)
        for part, values in zip(("context", "feature_lists", "lengths"), outputs):
            for key, value in values.items():
                parts = zip(("indices", "values", "dense_shape"), value) \
                    if isinstance(value, qp.SparseValue) else [(None, value)]
                for name, got in parts:
                    want = expected[".".join(filter(None, (batch, part, key, name)))]
                    np.testing.assert_array_equal(got, want, err_msg=f"{batch}.{part}.{key}")
                    assert (got.dtype, got.shape) == (want.dtype, want.shape), (batch, key)
                    compared += 1
    assert compared == len(expected.files)


# --- DecodeRawTest ----------------------------------------------------------------------------

def ordinalize(words, fixed_length=None):
    fixed_length = fixed_length or len(words[0])
    return np.array([[ord(word[i]) if i < len(word) else 0 for i in range(fixed_length)]
                     for word in words])


def test_decode_raw():
    """DecodeRawTest: testDecodeRawV1EqualLength, testDecodeRawV2FallbackEqualLength,
    testDecodeRawV1VariableLength, testDecodeRawV2FallbackVariableLength,
    testDecodeRawV2VariableLength, testDecodeRawInvalidFixedLengthSize,
    testDecodeRawExtendedInputBytesLittleEndian, testDecodeRawExtendedInputBytesBigEndian"""
    words = ["string1", "string2"]
    np.testing.assert_array_equal(qp.io.decode_raw(np.array(words), qp.uint8), ordinalize(words))
    with pytest.raises(InvalidArgumentError):
        qp.io.decode_raw(["string", "longer_string"], qp.uint8)
    words = ["string", "longer_string"]
    np.testing.assert_array_equal(qp.io.decode_raw(words, qp.uint8, fixed_length=8),
                                  ordinalize(words, fixed_length=8))
    with pytest.raises(InvalidArgumentError, match="must be a multiple of|evenly divisible by"):
        qp.io.decode_raw(["1"], qp.float32, fixed_length=7)
    assert qp.io.decode_raw(["\x01\x23"], qp.int32, fixed_length=8, little_endian=True) \
        .tolist() == [[0x00002301, 0]]
    assert qp.io.decode_raw([b"\x01\x23"], qp.int32, fixed_length=8, little_endian=False) \
        .tolist() == [[0x01230000, 0]]


def test_parse_sequence_example_in_a_tf1_session():
    """``tf.io.parse_sequence_example`` through ``queuepipe.compat.v1``, run by a Session."""
    import queuepipe.compat.v1 as tf
    records = serialize([sequence_example(context={"c": float_feature([7])},
                                          feature_lists={"a": [int64_feature([1])]}),
                         sequence_example(feature_lists={"a": [int64_feature([2]),
                                                               int64_feature([3])]})])
    with tf.Graph().as_default():
        context, lists, lengths = tf.io.parse_sequence_example(
            records, {"c": tf.io.FixedLenFeature([], tf.float32, default_value=0)},
            {"a": tf.io.FixedLenSequenceFeature([], tf.int64)})
        with tf.Session() as sess:
            got = sess.run([context["c"], lists["a"], lengths["a"]])
    assert [value.tolist() for value in got] == [[7.0, 0.0], [[1, 0], [2, 3]], [1, 2]]
