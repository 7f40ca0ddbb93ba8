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


OPS = golden("ops.npz")
IMAGE = OPS["input.uint8"]


def test_tf1_resize_images_is_tfs_for_every_method():
    """bilinear exactly (TF1's float arithmetic), the others within one 8-bit level; an image
    of the size asked comes back unchanged, as TF1 gives it."""
    methods = {"bilinear": tf.image.ResizeMethod.BILINEAR, "bicubic": tf.image.ResizeMethod.BICUBIC,
               "area": tf.image.ResizeMethod.AREA,
               "nearest": tf.image.ResizeMethod.NEAREST_NEIGHBOR}
    keys = sorted(key for key in OPS if key.startswith("resize_v1."))
    with tf.Graph().as_default():
        fetches = {}
        for key in keys:
            _, method, align, size = key.split(".")
            fetches[key] = tf.image.resize_images(IMAGE, [int(s) for s in size.split("x")],
                                                  method=methods[method],
                                                  align_corners=align == "True")
        got = run(fetches)
    for key in keys:
        expected = got[key], OPS[key]
        assert expected[0].dtype == expected[1].dtype and expected[0].shape == expected[1].shape
        tolerance = 0 if key.split(".")[1] in ("bilinear", "nearest") else 1
        assert np.abs(expected[0].astype(np.float64) - expected[1]).max() <= tolerance, key


def test_crops_and_pads_are_tfs():
    with tf.Graph().as_default():
        fetches = {key: tf.image.central_crop(IMAGE, float(key.split(".", 1)[1]))
                   for key in OPS if key.startswith("central_crop.")}
        for key in (key for key in OPS if key.startswith("crop_or_pad.")):
            h, w = (int(s) for s in key.split(".")[1].split("x"))
            fetches[key] = tf.image.resize_image_with_crop_or_pad(IMAGE, h, w)
        got = run(fetches)
    for key, value in got.items():
        assert value.dtype == OPS[key].dtype and np.array_equal(value, OPS[key]), key


def run_many(tensor, times):
    with tf.Session() as sess:
        return [sess.run(tensor) for _ in range(times)]


def test_random_color_ops_draw_tfs_distributions():
    """One delta or factor per evaluation, uniform in TF's range, applied as TF's adjust_*."""
    image = OPS["input.float32"]
    with tf.Graph().as_default():
        deltas = [float(np.mean(v - image))
                  for v in run_many(tf.image.random_brightness(image, 0.2, seed=1), 200)]
    assert all(-0.2 <= d < 0.2 for d in deltas) and min(deltas) < -0.15 < 0.15 < max(deltas)
    with tf.Graph().as_default():
        spreads = [float(np.std(v) / np.std(image))
                   for v in run_many(tf.image.random_contrast(image, 0.5, 1.5, seed=2), 200)]
    assert all(0.49 <= s <= 1.51 for s in spreads) and min(spreads) < 0.6 and max(spreads) > 1.4
    with tf.Graph().as_default():
        hued = run_many(tf.image.random_hue(IMAGE, 0.3, seed=3), 20)
        saturated = run_many(tf.image.random_saturation(IMAGE, 0.2, 1.8, seed=4), 20)
    assert len({v.tobytes() for v in hued}) == 20 and len({v.tobytes() for v in saturated}) == 20
    assert all(v.dtype == np.uint8 and v.shape == IMAGE.shape for v in hued + saturated)
    with pytest.raises(ValueError, match=r"max_delta must be <= 0\.5"):
        tf.image.random_hue(IMAGE, 0.6)


def test_a_seeded_random_op_repeats_its_sequence_and_flips_each_image_of_a_batch():
    batch = np.stack([IMAGE] * 32)
    with tf.Graph().as_default():
        first = run_many(tf.image.random_flip_left_right(batch, seed=5), 3)
    with tf.Graph().as_default():
        again = run_many(tf.image.random_flip_left_right(batch, seed=5), 3)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    flipped = [np.array_equal(image, IMAGE[:, ::-1]) for image in first[0]]
    assert 4 < sum(flipped) < 28  # TF draws one flip per image of a batch
