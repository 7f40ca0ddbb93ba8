"""Tests of the IDX, CSV and NPZ readers that ``queuepipe convert`` uses."""

import gzip
import struct

import numpy as np
import pytest
from helpers import IMAGE_SPEC, mnist_like, write_idx

import queuepipe as qp
from queuepipe.convert import (csv_column_types, csv_examples, examples_from, find_idx_labels,
                               guess_format, idx_examples, npz_examples, read_idx)
from queuepipe.errors import DataLossError, InvalidArgumentError


# -- IDX -----------------------------------------------------------------------------------


@pytest.mark.parametrize("compress", [False, True])
def test_idx_magic_numbers_are_mnists(tmp_path, compress):
    _, _, images_path, labels_path = mnist_like(tmp_path, compress=compress)
    for path, magic in ((images_path, 2051), (labels_path, 2049)):
        with (gzip.open if compress else open)(path, "rb") as f:
            assert struct.unpack(">I", f.read(4)) == (magic,)


@pytest.mark.parametrize("compress", [False, True])
def test_idx_examples_round_trip(tmp_path, compress):
    images, labels, images_path, _ = mnist_like(tmp_path, compress=compress)
    records = list(idx_examples(images_path))  # the label file is found by its name
    parsed = qp.parse_example(records, IMAGE_SPEC)
    decoded = np.stack([np.frombuffer(b, np.uint8) for b in parsed["image"]])
    np.testing.assert_array_equal(decoded.reshape(images.shape), images)
    np.testing.assert_array_equal(parsed["label"], labels.astype(np.int64))


@pytest.mark.parametrize("dtype", [np.int16, np.float32, np.float64])
def test_read_idx_multibyte_types_in_native_order(tmp_path, dtype):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    got = read_idx(write_idx(tmp_path / "a.idx", array))
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
    np.testing.assert_array_equal(got, array)


def test_find_idx_labels_names(tmp_path):
    (tmp_path / "t10k-labels.idx1-ubyte").write_bytes(b"")
    assert find_idx_labels(str(tmp_path / "t10k-images.idx3-ubyte")) == \
        str(tmp_path / "t10k-labels.idx1-ubyte")
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(b"")
    assert find_idx_labels(str(tmp_path / "train-images-idx3-ubyte.gz")) == \
        str(tmp_path / "train-labels-idx1-ubyte")
    with pytest.raises(InvalidArgumentError, match=r"^no label file found for IDX images "
                                                   r"'.*other-images-idx3-ubyte' \(tried .*\); "
                                                   r"name it with --labels$"):
        find_idx_labels(str(tmp_path / "other-images-idx3-ubyte"))


def test_idx_errors(tmp_path):
    not_idx = tmp_path / "x-images-idx3-ubyte"
    not_idx.write_bytes(b"PK\x03\x04junk")
    with pytest.raises(InvalidArgumentError, match=r"^'.*x-images-idx3-ubyte' is not an IDX "
                                                   r"file: it starts with bytes '50 4b 03 04'"):
        read_idx(str(not_idx))
    short = tmp_path / "short.idx"
    with open(write_idx(tmp_path / "full.idx", np.zeros((3, 2), np.uint8)), "rb") as f:
        short.write_bytes(f.read()[:-1])
    with pytest.raises(DataLossError, match=r"^'.*short\.idx' holds 5 data bytes after its "
                                            r"header, but its dimensions \[3, 2\] of 1-byte "
                                            r"values need 6$") as e:
        read_idx(str(short))
    assert e.value.path == str(short) and e.value.offset == 17
    images = write_idx(tmp_path / "i.idx", np.zeros((3, 2, 2), np.uint8))
    labels = write_idx(tmp_path / "l.idx", np.zeros(4, np.uint8))
    with pytest.raises(InvalidArgumentError, match=r"^'.*i\.idx' holds 3 images but '.*l\.idx' "
                                                   r"holds 4 labels$"):
        idx_examples(images, labels)
    with pytest.raises(InvalidArgumentError, match=r"^'.*i\.idx' is not an IDX label file: "
                                                   r"it has dimensions \[3, 2, 2\]"):
        idx_examples(labels, images)


# -- CSV -----------------------------------------------------------------------------------


def test_csv_types_and_round_trip(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,score,name,big,mixed\n"
                    "1, 0.5,alice,9223372036854775807,3\n"
                    "-2,1e3,\"bob, jr\",1,x\n"
                    "\n"
                    "3,,carol,2,4.5\n", encoding="utf-8")
    assert csv_column_types(str(path)) == {"id": "int64", "score": "float", "name": "bytes",
                                           "big": "int64", "mixed": "bytes"}
    with pytest.raises(InvalidArgumentError, match=r"^'.*' line 5, column 'score' \(float\): "
                                                   r"the cell is empty; choose what it becomes"):
        list(csv_examples(str(path)))
    zero = qp.parse_example(list(csv_examples(str(path), empty="default")),
                            {"score": qp.io.FixedLenFeature([], qp.float32)})
    assert zero["score"].tolist() == [0.5, 1000.0, 0.0]
    records = list(csv_examples(str(path), empty="absent"))
    spec = {"id": qp.io.FixedLenFeature([], qp.int64),
            "score": qp.io.VarLenFeature(qp.float32),
            "name": qp.io.FixedLenFeature([], qp.string),
            "big": qp.io.FixedLenFeature([], qp.int64),
            "mixed": qp.io.FixedLenFeature([], qp.string)}
    parsed = qp.parse_example(records, spec)
    assert parsed["id"].tolist() == [1, -2, 3]
    assert parsed["score"].values.tolist() == [0.5, 1000.0]  # the empty cell: no value
    assert parsed["score"].indices.tolist() == [[0, 0], [1, 0]]
    assert parsed["name"].tolist() == [b"alice", b"bob, jr", b"carol"]
    assert parsed["big"].tolist() == [2**63 - 1, 1, 2]
    assert parsed["mixed"].tolist() == [b"3", b"x", b"4.5"]


def test_csv_out_of_range_integers_are_floats_and_empty_columns_bytes(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("huge,empty\n99999999999999999999,\n1,\n")
    assert csv_column_types(str(path)) == {"huge": "float", "empty": "bytes"}


@pytest.mark.parametrize("text, message", [
    ("", r"^'.*t\.csv' has no header line: the first line must name the columns$"),
    ("a,b,a\n1,2,3\n", r"^'.*t\.csv': column names \['a'\] appear more than once in the header$"),
    ("a,b\n1,2\n3\n", r"^'.*t\.csv' line 3: 1 fields, but the header names 2 columns$"),
])
def test_csv_errors(tmp_path, text, message):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(InvalidArgumentError, match=message):
        list(csv_examples(str(path)))


# -- NPZ -----------------------------------------------------------------------------------


def test_npz_round_trip(tmp_path):
    arrays = {"x": np.arange(12, dtype=np.float32).reshape(3, 2, 2),
              "y": np.array([7, 8, 9], dtype=np.int64),
              "ok": np.array([True, False, True]),
              "word": np.array(["a", "bb", "ccc"])}
    path = str(tmp_path / "d.npz")
    np.savez(path, **arrays)
    records = list(npz_examples(path))
    spec = {"x": qp.io.FixedLenFeature([2, 2], qp.float32),
            "y": qp.io.FixedLenFeature([], qp.int64),
            "ok": qp.io.FixedLenFeature([], qp.int64),
            "word": qp.io.FixedLenFeature([], qp.string)}
    parsed = qp.parse_example(records, spec)
    np.testing.assert_array_equal(parsed["x"], arrays["x"])
    np.testing.assert_array_equal(parsed["y"], arrays["y"])
    assert parsed["ok"].tolist() == [1, 0, 1]
    assert parsed["word"].tolist() == [b"a", b"bb", b"ccc"]


@pytest.mark.parametrize("arrays, message", [
    ({}, r"^'.*d\.npz' holds no arrays$"),
    ({"s": np.array(3)}, r"^array 's' in '.*d\.npz' is a scalar; every array needs a first "
                         r"axis that indexes the records$"),
    ({"c": np.ones(2, np.complex64)}, r"^array 'c' in '.*d\.npz' has dtype complex64; "),
    ({"a": np.ones(2), "b": np.ones(3)},
     r"^the arrays in '.*d\.npz' differ in their first dimension: \{'a': 2, 'b': 3\}; "),
])
def test_npz_errors(tmp_path, arrays, message):
    path = str(tmp_path / "d.npz")
    np.savez(path, **arrays)
    with pytest.raises(InvalidArgumentError, match=message):
        npz_examples(path)


# -- formats -------------------------------------------------------------------------------


@pytest.mark.parametrize("name, fmt", [
    ("train-images-idx3-ubyte.gz", "idx"), ("t10k-labels.idx1-ubyte", "idx"),
    ("data.CSV", "csv"), ("arrays.npz", "npz"), ("notes.txt", None),
])
def test_guess_format(name, fmt):
    assert guess_format(name) == fmt


def test_examples_from_checks_the_format(tmp_path):
    with pytest.raises(InvalidArgumentError, match=r"^cannot tell the format of 'notes\.txt' "
                                                   r"from its name; pass one of"):
        examples_from("notes.txt")
    with pytest.raises(InvalidArgumentError, match=r"^unknown format 'xls'; expected one of "):
        examples_from("a.csv", "xls")
    with pytest.raises(InvalidArgumentError, match=r"^a label file only goes with IDX images, "
                                                   r"not format 'csv'$"):
        examples_from("a.csv", labels="l.idx")
