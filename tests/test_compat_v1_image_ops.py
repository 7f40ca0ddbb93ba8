"""queuepipe.compat.v1's tf.image ops against TensorFlow 2.21's values on the same inputs
(tests/golden/image-cases-tf2.21/, written by the scripts beside them)."""

import os

import numpy as np
import pytest

import queuepipe.compat.v1 as tf

CASES = os.path.join(os.path.dirname(__file__), "golden", "image-cases-tf2.21")


def golden(name):
    with np.load(os.path.join(CASES, name)) as z:
        return {key: z[key] for key in z.files}


def run(tensor):
    with tf.Session() as sess:
        return sess.run(tensor)


CONVERT_KEYS = sorted(key for key in golden("decode.npz")
                      if key.startswith("convert.") and not key.startswith("convert.input."))


@pytest.mark.parametrize("key", CONVERT_KEYS)
def test_convert_image_dtype_is_tensorflows_between_every_pair_of_dtypes(key):
    """Integers scale between ranges (uint16 to uint8 shifts right by 8, uint8 to uint16
    multiplies by 256), floats scale to and from [0, 1], as TF computes them."""
    reference = golden("decode.npz")
    _, source, target, saturate = key.split(".")
    values = reference[f"convert.input.{source}"]
    with tf.Graph().as_default():
        got = run(tf.image.convert_image_dtype(values, tf.as_dtype(target),
                                               saturate=saturate == "True"))
    expected = reference[key]
    assert got.dtype == expected.dtype
    assert np.array_equal(got, expected), (values, got, expected)
