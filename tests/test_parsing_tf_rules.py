"""Where TensorFlow's Example parser and protobuf read the same bytes differently.

queuepipe's per-record path reads records with protobuf; these are the cases where that alone
would not give TF's answer. Each case was run through TensorFlow 2.21 (``compat/diff_tf.py``
builds such records at random): the expected values and verdicts are TF's, except where a test
says queuepipe chooses otherwise, as ``docs/migration.md`` explains.
"""

import pytest

import queuepipe as qp
from queuepipe import cli


def field(number, wire, payload=b""):
    """One protobuf field: a tag, a length for wire type 2, the payload."""
    out, size = bytearray([number << 3 | wire]), len(payload)
    if wire == 2:
        while True:
            out.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
            size >>= 7
            if not size:
                break
    return bytes(out) + payload


INTS = field(3, 2, field(1, 2, b"\x05\x06"))  # a Feature: int64_list [5, 6], packed


def example(*entries, features_extra=b"", example_extra=b""):
    return field(1, 2, b"".join(field(1, 2, e) for e in entries) + features_extra) \
        + example_extra


def entry(key, feature=INTS, extra=b""):
    return field(1, 2, key) + field(2, 2, feature) + extra


def parse_both(record, spec):
    """parse_example on a batch (fast paths, then the fallback) and parse_single_example must
    agree; returns the single record's result."""
    batch = qp.parse_example([record] * 6, spec)
    single = qp.parse_single_example(record, spec)
    for key, value in single.items():
        got = batch[key]
        if isinstance(value, qp.SparseValue):
            assert got.values.tolist() == value.values.tolist() * 6
        else:
            assert got.tolist() == [value.tolist()] * 6
    return single


DENSE = {"a": qp.FixedLenFeature([2], qp.int64, default_value=[0, 0])}
SPARSE = {"a": qp.VarLenFeature(qp.int64)}
EMPTY_A = qp.train.make_example({"a": []}).SerializeToString()  # "a": a Feature with no list
FULL_A = qp.train.make_example({"a": [7, 8]}).SerializeToString()


# -- a key twice -------------------------------------------------------------------------------


def test_a_dense_feature_keeps_its_value_when_a_later_entry_is_empty():
    assert parse_both(FULL_A + EMPTY_A, DENSE)["a"].tolist() == [7, 8]  # TF: [7, 8]
    assert parse_both(EMPTY_A + FULL_A, DENSE)["a"].tolist() == [7, 8]
    required = {"a": qp.FixedLenFeature([2], qp.int64)}
    assert parse_both(FULL_A + EMPTY_A, required)["a"].tolist() == [7, 8]
    sequence = {"a": qp.FixedLenSequenceFeature([], qp.int64, allow_missing=True)}
    assert parse_both(FULL_A + EMPTY_A, sequence)["a"].tolist() == [7, 8]


def test_a_sparse_feature_given_twice_keeps_tfs_answer_in_each_of_its_two_parsers():
    """TF's two kernels differ: parse_example takes the last entry even an empty one,
    parse_single_example skips the empty one and keeps the earlier value."""
    assert qp.parse_example([FULL_A + EMPTY_A] * 6, SPARSE)["a"].values.tolist() == []  # TF: []
    single = qp.parse_single_example(FULL_A + EMPTY_A, SPARSE)["a"]
    assert single.values.tolist() == [7, 8] and single.dense_shape.tolist() == [2]  # TF: [7, 8]
    assert parse_both(EMPTY_A + FULL_A, SPARSE)["a"].values.tolist() == [7, 8]


def test_of_two_listed_entries_the_last_wins_and_its_type_is_checked():
    other = qp.train.make_example({"a": [1, 2]}).SerializeToString()
    assert parse_both(FULL_A + other, DENSE)["a"].tolist() == [1, 2]
    floats = qp.train.make_example({"a": [0.5]}).SerializeToString()
    with pytest.raises(qp.errors.InvalidArgumentError,
                       match=r"Key: a, Index: 0\.  Data types don't match\. Data type: float "
                             r"but expected type: int64"):
        qp.parse_single_example(floats + EMPTY_A, DENSE)  # the earlier, float entry counts


# -- keys that are not UTF-8 -------------------------------------------------------------------


def test_a_key_that_is_not_utf8_does_not_stop_the_record_from_parsing():
    record = example(entry(b"\xff\xfe"), entry(b"a"))
    assert parse_both(record, DENSE)["a"].tolist() == [5, 6]  # TF: [5, 6]
    assert parse_both(record, SPARSE)["a"].values.tolist() == [5, 6]
    assert "features = {\n    \"a\": qp.io.FixedLenFeature([2], qp.int64),\n}" in \
        cli.infer_schema([record])  # the key no spec can name is left out


# -- zero-size features and sequence defaults --------------------------------------------------


def test_a_zero_size_feature_with_an_empty_default_is_required():
    spec = {"z": qp.FixedLenFeature([0], qp.float32, default_value=[])}
    absent = qp.train.make_example({"other": 1}).SerializeToString()
    for parse in (lambda: qp.parse_single_example(absent, spec),
                  lambda: qp.parse_example([absent], spec)):
        with pytest.raises(qp.errors.InvalidArgumentError,
                           match=r"Feature: z \(data type: float\) is required but could not "
                                 r"be found"):
            parse()
    present = qp.train.make_example({"z": qp.train.Feature(float_list=qp.train.FloatList())})
    assert parse_both(present.SerializeToString(), spec)["z"].shape == (0,)
    with pytest.raises(ValueError, match=r"has 1 elements but shape \[0\] needs 0"):
        qp.parse_example([absent], {"z": qp.FixedLenFeature([0], qp.float32, default_value=[1])})


def test_a_sequence_feature_with_a_default_is_refused_in_tfs_words():
    record = qp.train.make_sequence_example({"c": 1}, {}).SerializeToString()
    spec = {"s": qp.FixedLenSequenceFeature([], qp.int64, allow_missing=True, default_value=0)}
    with pytest.raises(ValueError, match=r"^Value feature_list\.dense_defaults\[s\] must be "
                                         r"None: a sequence feature has no default"):
        qp.parse_single_sequence_example(record, sequence_features=spec)


# -- map entries TF rejects, and the encodings queuepipe reads as protobuf does ----------------


@pytest.mark.parametrize("record, problem", [
    (example(entry(b"a", extra=field(3, 0, b"\x01"))), "a map entry holds an unknown field 3"),
    (example(field(2, 2, INTS)), "a map entry has no key"),
    (example(field(1, 2, b"a")), "a map entry has no value"),
], ids=["unknown field in entry", "no key", "no value"])
def test_map_entries_tf_rejects_are_errors_where_a_default_would_hide_them(record, problem):
    """protobuf reads each of these, and "a" would take its default: the first entry is
    dropped, the second is the key "", the third an empty Feature. TF rejects the record."""
    for parse in (lambda: qp.parse_single_example(record, DENSE),
                  lambda: qp.parse_example([record] * 6, SPARSE)):
        with pytest.raises(qp.errors.InvalidArgumentError,
                           match=rf"Index: 0\.  Could not parse example input, value: .*: "
                                 rf"{problem} \(TensorFlow rejects the record; protobuf would "
                                 rf"read it\)$"):
            parse()
    # The same entries as a SequenceExample's context: an error too (for the entry with no
    # value, TF's and queuepipe's error is the context feature's count of 0).
    sequence = qp.train.make_sequence_example({}, {}).SerializeToString()
    with pytest.raises(qp.errors.InvalidArgumentError,
                       match=f"{problem}|expected 2, but found 0"):
        qp.parse_single_sequence_example(sequence + record, context_features=DENSE)


def test_entries_tf_rejects_beside_every_requested_feature_are_read_as_protobuf_reads_them():
    """The documented choice: the check runs where a feature would take its default; a
    record whose requested features are all there gives their values."""
    record = example(entry(b"zz", extra=field(3, 0, b"\x01")), field(1, 2, b"b"), entry(b"a"))
    assert parse_both(record, DENSE)["a"].tolist() == [5, 6]  # TF rejects the record
    record = example(field(1, 2, b"b"), entry(b"c"))  # "b" has no value; "a" is absent
    with pytest.raises(qp.errors.InvalidArgumentError, match="a map entry has no value"):
        qp.parse_single_example(record, DENSE)  # "a" would take its default


@pytest.mark.parametrize("record", [
    example(entry(b"a"), example_extra=field(2, 0, b"\x01")),  # unknown field in Example
    example(entry(b"a", field(3, 2, field(1, 2, b"\x05\x06") + field(2, 0, b"\x01")))),
    example(entry(b"a", INTS + field(4, 0, b"\x01"))),  # unknown field in Feature
    example(field(2, 2, INTS) + field(1, 2, b"a")),  # value before key
], ids=["in Example", "in Int64List", "in Feature", "value before key"])
def test_unknown_fields_tf_skips_are_skipped(record):
    assert parse_both(record, DENSE)["a"].tolist() == [5, 6]


@pytest.mark.parametrize("record, values", [
    (example(entry(b"a"), features_extra=field(2, 0, b"\x01")), [5, 6]),  # TF rejects it
    (example(entry(b"a", field(3, 2, field(1, 2, b"\x05") + field(1, 2, b"\x06")))),
     [5, 6]),  # TF: [5]
    (example(entry(b"a", field(3, 2, field(1, 0, b"\x05") + field(1, 2, b"\x06")))),
     [5, 6]),  # TF rejects it
    (example(entry(b"a") + field(2, 2, field(3, 2, field(1, 2, b"\x07")))),
     [5, 6, 7]),  # TF rejects it
    (example(entry(b"a", field(2, 2, field(1, 2, b"\x00\x00\x80\x3f")) + INTS)),
     [5, 6]),  # TF: the float list, a type error
], ids=["unknown field in Features", "two packed chunks", "packed and unpacked",
        "value twice", "two lists"])
def test_encodings_protobuf_defines_are_read_as_protobuf_reads_them(record, values):
    """The documented choices: an unknown field in Features is skipped as everywhere else; a
    list split over several chunks, packed or not, is all of them; a value given twice is
    merged; of two lists in one Feature the last counts (protobuf's rules)."""
    assert parse_both(record, SPARSE)["a"].values.tolist() == values


def test_damage_in_a_feature_not_asked_for_is_ignored_as_tf_ignores_it():
    """TF looks only at the requested features; protobuf would refuse the whole record."""
    broken = field(2, 2, field(1, 2, b"\x0b\x04"))  # a float list holding a group tag
    record = example(entry(b"a"), entry(b"z", broken))
    assert parse_both(record, DENSE)["a"].tolist() == [5, 6]
    with pytest.raises(qp.errors.InvalidArgumentError,
                       match=r"Could not parse example input, value: .*: the Feature of key "
                             r"'z' does not parse"):
        qp.parse_single_example(record, {"z": qp.VarLenFeature(qp.float32)})
    with pytest.raises(qp.errors.InvalidArgumentError, match="a map entry has no value"):
        qp.parse_single_example(record + example(field(1, 2, b"b")), DENSE)  # entries: TF's rule


def test_a_sequence_example_damaged_only_where_not_asked_parses_as_in_tf():
    steps = field(1, 2, INTS) + field(1, 2, INTS)
    lists = field(1, 2, field(1, 2, b"s") + field(2, 2, steps))
    broken = field(1, 2, field(1, 2, b"t") + field(2, 2, field(1, 2, b"\x0b")))
    record = example(entry(b"a")) + field(2, 2, lists + broken) + field(0, 2, b"")
    context, sequence = qp.parse_single_sequence_example(
        record, {"a": qp.FixedLenFeature([2], qp.int64)},
        {"s": qp.FixedLenSequenceFeature([2], qp.int64)})
    assert context["a"].tolist() == [5, 6] and sequence["s"].tolist() == [[5, 6], [5, 6]]
    with pytest.raises(qp.errors.InvalidArgumentError, match=r"the FeatureList of key 't' does "
                                                             r"not parse"):
        qp.parse_single_sequence_example(record, sequence_features={"t": qp.VarLenFeature(
            qp.int64)})


# -- a Feature TF's parser cannot type ---------------------------------------------------------


@pytest.mark.parametrize("feature", [
    field(5, 0, b"\x01"),  # only an unknown field
    field(5, 2, b"\x08\x01"),
    field(3, 0, b"\x05"),  # int64_list's field number with the varint wire type
    field(0, 2, INTS),  # the list wrapped in a field numbered 0
    field(5, 0, b"\x01") + INTS,  # an unknown field before the list
], ids=["unknown varint", "unknown message", "known field wrong wire type", "field 0",
        "unknown before the list"])
def test_a_requested_feature_that_does_not_begin_with_a_list_is_tfs_error(feature):
    """TF reads a Feature's type from its first byte: anything but a list's tag is an error
    (protobuf reads the first three as an empty Feature, the default's case)."""
    record = example(entry(b"a", feature))
    for spec in (DENSE, SPARSE):
        for parse in (lambda: qp.parse_single_example(record, spec),
                      lambda: qp.parse_example([record] * 6, spec)):
            with pytest.raises(qp.errors.InvalidArgumentError,
                               match=r"^Name: <unknown>, Key: a, Index: 0\.  Unsupported "
                                     r"datatype\."):  # TF: "Unsupported datatype."
                parse()
    unasked = example(entry(b"z", feature), entry(b"a"))
    assert parse_both(unasked, DENSE)["a"].tolist() == [5, 6]  # TF: [5, 6]


def test_map_entries_wrapped_in_a_field_numbered_0_are_tfs_error():
    record = field(1, 2, field(0, 2, field(1, 2, entry(b"a"))))
    for parse in (lambda: qp.parse_single_example(record, DENSE),
                  lambda: qp.parse_example([record] * 6, SPARSE)):
        with pytest.raises(qp.errors.InvalidArgumentError,
                           match=r"Index: 0\.  Could not parse example input"):  # TF's words
            parse()


SEQUENCE = {"s": qp.FixedLenSequenceFeature([], qp.int64, allow_missing=True)}


def steps(*features):
    return b"".join(field(1, 2, feature) for feature in features)


def lists(*entries):
    return field(2, 2, b"".join(field(1, 2, e) for e in entries))


def test_a_feature_list_entry_with_no_value_is_tfs_error():
    record = lists(field(1, 2, b"s"))  # protobuf: an empty FeatureList, 0 steps
    for spec in (SEQUENCE, {"s": qp.VarLenFeature(qp.int64)}):
        with pytest.raises(qp.errors.InvalidArgumentError,
                           match=r"^Invalid protocol message input, example id: <unknown>.*a "
                                 r"map entry has no value"):  # TF's words
            qp.parse_single_sequence_example(record, sequence_features=spec)
    empty = lists(field(1, 2, b"s") + field(2, 2, b""))  # a value with no steps: TF's 0 steps
    assert qp.parse_single_sequence_example(empty, sequence_features=SEQUENCE)[1]["s"] \
        .shape == (0,)


@pytest.mark.parametrize("feature", [field(5, 0, b"\x01"), field(3, 0, b"\x05"),
                                     field(5, 0, b"\x01") + INTS],
                         ids=["unknown", "wrong wire type", "unknown before the list"])
def test_a_step_or_context_feature_that_does_not_begin_with_a_list_is_tfs_error(feature):
    record = lists(entry(b"s", steps(INTS, feature)))
    for spec in (qp.FixedLenSequenceFeature([2], qp.int64), qp.VarLenFeature(qp.int64)):
        with pytest.raises(qp.errors.InvalidArgumentError,
                           match=r"^Name: <unknown>, Feature list: s, Index: 1\.  Data types "
                                 r"don't match\. Expected type: int64$"):  # TF's words
            qp.parse_single_sequence_example(record, sequence_features={"s": spec})
    record = example(entry(b"c", feature))
    for spec in (qp.FixedLenFeature([], qp.int64, default_value=7), qp.VarLenFeature(qp.int64)):
        with pytest.raises(qp.errors.InvalidArgumentError,
                           match=r"^Name: <unknown>, Context feature: c\.  Data types don't "
                                 r"match\. Expected type: int64$"):  # TF's words
            qp.parse_single_sequence_example(record, context_features={"c": spec})


# -- group fields (wire types 3 and 4), which protobuf skips ------------------------------------


@pytest.mark.parametrize("sign", [b"", entry(b"z", b"")], ids=["alone", "beside an empty Feature"])
def test_a_group_in_an_example_is_skipped_whatever_else_the_record_holds(sign):
    """protobuf skips a group field in Example, as queuepipe does (TF rejects the record: see
    docs/migration.md); an empty Feature of a key not asked for does not change the verdict."""
    group = field(5, 3) + field(6, 0, b"\x01") + field(7, 3) + field(7, 4) + field(5, 4)
    record = example(entry(b"b"), *([sign] if sign else [])) + group
    assert parse_both(record, DENSE)["a"].tolist() == [0, 0]  # "a" absent: the default
