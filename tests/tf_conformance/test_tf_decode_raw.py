"""Mirrors TensorFlow's ``kernel_tests/io_ops/decode_raw_op_test.py`` (in TF 2.21's tree it
sits in ``kernel_tests/``): ``decode_raw`` of each dtype, both byte orders, and TF's errors.

Each test names the TF tests it mirrors. Left out, with the reason:

- ``testShapeInference``: a graph's static shape of a placeholder input; queuepipe has no
  graph (its ``compat.v1`` layer checks static shapes where it builds them).
"""

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.errors import InvalidArgumentError


def test_to_uint8():
    """testToUint8 (TF takes Python strings as their UTF-8 bytes, as queuepipe does)"""
    assert qp.io.decode_raw(["A", "a"], qp.uint8).tolist() == [[ord("A")], [ord("a")]]
    assert qp.io.decode_raw(["wer", "XYZ"], qp.uint8).tolist() == \
        [[ord("w"), ord("e"), ord("r")], [ord("X"), ord("Y"), ord("Z")]]
    with pytest.raises(InvalidArgumentError,
                       match="DecodeRaw requires input strings to all be the same size, but "
                             "element 1 has size 5 != 6"):
        qp.io.decode_raw(["short", "longer"], qp.uint8)


@pytest.mark.parametrize("dtype, word", [(np.int16, "int16"), (np.uint16, "uint16")])
def test_to_16_bits(dtype, word):
    """testToInt16, testToUInt16"""
    assert qp.io.decode_raw(["AaBC"], dtype).tolist() == \
        [[ord("A") + ord("a") * 256, ord("B") + ord("C") * 256]]
    assert qp.io.decode_raw([b"\xFF\xEE\xDD\xCC"], dtype).astype(np.uint16).tolist() == \
        [[0xFF + 0xEE * 256, 0xDD + 0xCC * 256]]
    with pytest.raises(InvalidArgumentError,
                       match=f"Input to DecodeRaw has length 3 that is not a multiple of 2, "
                             f"the size of {word}"):
        qp.io.decode_raw(["123", "456"], dtype)


def test_endianness():
    """testEndianness"""
    assert qp.io.decode_raw(["\x01\x02\x03\x04"], qp.int32, little_endian=True).tolist() == \
        [[0x04030201]]
    assert qp.io.decode_raw(["\x01\x02\x03\x04"], qp.int32, little_endian=False).tolist() == \
        [[0x01020304]]
    assert qp.io.decode_raw([b"\x00\x00\x80?\x00\x00\x00@"], np.complex64,
                            little_endian=True).tolist() == [[1 + 2j]]
    assert qp.io.decode_raw([b"?\x80\x00\x00@\x00\x00\x00"], np.complex64,
                            little_endian=False).tolist() == [[1 + 2j]]


@pytest.mark.parametrize("values, stored", [
    ([1, -2, -3, 4], "<f2"),
    ([True, False, False, True], "<b1"),
    ([1 + 1j, 2 - 2j, -3 + 3j, -4 - 4j], "<c8"),
    ([1 + 1j, 2 - 2j, -3 + 3j, -4 - 4j], "<c16"),
], ids=["testToFloat16", "testToBool", "testToComplex64", "testToComplex128"])
def test_to_each_type(values, stored):
    expected = np.array([values], dtype=stored)
    got = qp.io.decode_raw([expected.tobytes()], np.dtype(stored).newbyteorder("="))
    assert got.dtype == np.dtype(stored).newbyteorder("=")
    np.testing.assert_array_equal(got, expected)


def test_empty_string_input():
    """testEmptyStringInput"""
    for count in range(3):
        assert qp.io.decode_raw([""] * count, np.float16).shape == (count, 0)


def test_errors_name_tfs_types():
    """TF's words name its types: half, float, double."""
    for dtype, word in ((np.float16, "half"), (np.float32, "float"), (np.float64, "double")):
        with pytest.raises(InvalidArgumentError, match=rf"not a multiple of \d+, the size of "
                                                       rf"{word}$"):
            qp.io.decode_raw([b"\x00" * 3], dtype)
        with pytest.raises(InvalidArgumentError, match=rf"the size of {word}$"):
            qp.io.decode_raw(b"\x00" * 3, dtype)
