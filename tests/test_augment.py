"""queuepipe.augment (``qp.image``): TF's image ops in NumPy, against TensorFlow 2.21's values
on the same images (tests/golden/image-cases-tf2.21/ops.npz, written by make_ops.py beside it)."""

import os
import threading

import numpy as np
import pytest

import queuepipe as qp
from queuepipe import augment
from queuepipe.errors import InvalidArgumentError

CASES = os.path.join(os.path.dirname(__file__), "golden", "image-cases-tf2.21")


def tf_ops():
    with np.load(os.path.join(CASES, "ops.npz")) as z:
        return {key: z[key] for key in z.files}


REFERENCE = tf_ops()
IMAGE = REFERENCE["input.uint8"]


def keys(prefix):
    return sorted(key for key in REFERENCE if key.startswith(prefix + "."))


def size_of(key):
    return [int(side) for side in key.rsplit(".", 1)[1].split("x")]


def assert_within_one_level(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.abs(got.astype(np.float64) - expected).max() <= 1.0


@pytest.mark.parametrize("key", keys("resize"))
def test_resize_is_tf2s_within_one_level_on_one_image_and_on_a_batch(key):
    _, method, antialias, _ = key.split(".")
    got = qp.image.resize(IMAGE, size_of(key), method=method, antialias=antialias == "True")
    assert_within_one_level(got, REFERENCE[key])
    batch = qp.image.resize(np.stack([IMAGE, IMAGE[::-1]]), size_of(key), method=method,
                            antialias=antialias == "True")
    assert np.allclose(batch[0], got, rtol=0, atol=1e-3)  # float sums in another order
    if method == "nearest":
        assert np.array_equal(got, REFERENCE[key])  # a choice of pixels: exactly TF's


@pytest.mark.parametrize("key", keys("resize_v1"))
def test_tf1_resize_kernels_are_tfs_within_one_level(key):
    _, method, align, _ = key.split(".")
    expected = REFERENCE[key]
    if expected.shape == IMAGE.shape and expected.dtype == np.uint8:
        return  # TF1 gives an image of the size asked back as it is (compat.v1 checks it)
    got = augment.resample(IMAGE, size_of(key), method, half_pixel_centers=False,
                           align_corners=align == "True")
    assert_within_one_level(got, expected)


@pytest.mark.parametrize("key", keys("central_crop"))
def test_central_crop_is_tfs(key):
    fraction = float(key.split(".", 1)[1])
    assert np.array_equal(qp.image.central_crop(IMAGE, fraction), REFERENCE[key])
    batch = qp.image.central_crop(np.stack([IMAGE, IMAGE]), fraction)
    assert np.array_equal(batch[1], REFERENCE[key])


@pytest.mark.parametrize("key", keys("crop_or_pad"))
def test_resize_with_crop_or_pad_is_tfs(key):
    got = qp.image.resize_with_crop_or_pad(IMAGE, *size_of(key))
    assert got.dtype == np.uint8 and np.array_equal(got, REFERENCE[key])


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_brightness_contrast_and_standardization_are_tfs(dtype):
    image = REFERENCE[f"input.{dtype}"]
    for key in keys(f"brightness.{dtype}"):
        got = qp.image.adjust_brightness(image, float(key.split(".", 2)[2]))
        assert got.dtype == image.dtype
        assert np.allclose(got, REFERENCE[key], rtol=0, atol=1e-6 if dtype == "float32" else 0)
    for key in keys(f"contrast.{dtype}"):
        got = qp.image.adjust_contrast(image, float(key.split(".", 2)[2]))
        assert_within_one_level(got, REFERENCE[key]) if dtype == "uint8" else \
            np.testing.assert_allclose(got, REFERENCE[key], rtol=0, atol=1e-5)
    np.testing.assert_allclose(qp.image.per_image_standardization(image),
                               REFERENCE[f"standardized.{dtype}"], rtol=0, atol=1e-5)


def test_random_ops_are_the_same_for_the_same_seed_in_any_thread():
    batch = np.stack([IMAGE] * 8)

    def augmented(seed):
        rng = np.random.default_rng(seed)
        images = qp.image.random_crop(batch, [24, 40], seed=rng)
        images = qp.image.random_flip_left_right(images, seed=rng)
        images = qp.image.random_flip_up_down(images, seed=rng)
        images = qp.image.random_brightness(images, 0.2, seed=rng)
        return qp.image.random_contrast(images, 0.5, 1.5, seed=rng)

    results = {}

    def run(name, seed):
        results[name] = augmented(seed)
    threads = [threading.Thread(target=run, args=(i, 7 if i < 2 else 8)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], augmented(7))
    assert not np.array_equal(results[0], results[2])
    assert results[0].shape == (8, 24, 40, 3) and results[0].dtype == np.uint8


def test_a_batch_draws_once_per_image():
    batch = np.stack([IMAGE] * 64)
    flipped = qp.image.random_flip_left_right(batch, seed=1)
    mirrored = np.array([np.array_equal(f, IMAGE[:, ::-1]) for f in flipped])
    kept = np.array([np.array_equal(f, IMAGE) for f in flipped])
    assert np.all(mirrored ^ kept) and 16 < mirrored.sum() < 48
    crops = qp.image.random_crop(batch, [10, 10], seed=2)
    corners = {tuple(map(int, np.argwhere(
        (np.lib.stride_tricks.sliding_window_view(IMAGE, (10, 10, 3))[..., 0, :, :, :]
         == crop).all(axis=(-3, -2, -1)))[0])) for crop in crops}
    assert len(corners) > 32
    brighter = qp.image.random_brightness(batch.astype(np.float32) / 255, 0.3, seed=3)
    deltas = (brighter - batch.astype(np.float32) / 255).reshape(64, -1)
    assert np.allclose(deltas, deltas[:, :1], atol=1e-6)  # one delta per image
    assert len(np.unique(np.round(deltas[:, 0], 5))) == 64
    assert np.all(np.abs(deltas[:, 0]) <= 0.3)


def test_bad_arguments_name_what_is_wrong():
    with pytest.raises(InvalidArgumentError, match=r"^resize: method must be one of bilinear, "
                                                   r"nearest, area, bicubic, got 'lanczos3'"):
        qp.image.resize(IMAGE, [4, 4], method="lanczos3")
    with pytest.raises(InvalidArgumentError, match=r"^resize: images must be \[height, width, "
                                                   r"channels\] or \[n, height, width, "
                                                   r"channels\], got shape \(31, 47\)"):
        qp.image.resize(IMAGE[..., 0], [4, 4])
    with pytest.raises(InvalidArgumentError, match=r"^random_crop: size \[40, 10\] is larger "
                                                   r"than the images \(31x47\)"):
        qp.image.random_crop(IMAGE, [40, 10])
    with pytest.raises(InvalidArgumentError, match=r"^central_crop: central_fraction must be "
                                                   r"within \(0, 1\], got 0"):
        qp.image.central_crop(IMAGE, 0)


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_hue_and_saturation_are_tfs(dtype):
    image = REFERENCE[f"input.{dtype}"]
    for op, name in ((qp.image.adjust_hue, "hue"), (qp.image.adjust_saturation, "saturation")):
        for key in keys(f"{name}.{dtype}"):
            got = op(image, float(key.split(".", 2)[2]))
            if dtype == "uint8":
                assert_within_one_level(got, REFERENCE[key])
            else:
                np.testing.assert_allclose(got, REFERENCE[key], rtol=0, atol=1e-5, err_msg=key)


def test_augmenting_in_a_parse_fn_gives_the_same_images_whatever_the_threads(tmp_path):
    """Seeded from each chunk's own bytes, the random ops give the same images in a seeded
    read_batch_features whichever of its threads parses which chunk."""
    import zlib
    path = str(tmp_path / "images.tfrecord")
    rng = np.random.default_rng(0)
    with qp.io.TFRecordWriter(path) as writer:
        for i in range(96):
            pixels = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
            writer.write(qp.make_example({"image": pixels.tobytes(), "label": i})
                         .SerializeToString())
    spec = {"image": qp.io.FixedLenFeature([], qp.string),
            "label": qp.io.FixedLenFeature([], qp.int64)}

    def augmented(serialized):
        chunk_rng = np.random.default_rng([5, zlib.crc32(b"".join(serialized))])
        rows = qp.io.parse_example(serialized, spec)
        images = qp.io.decode_raw(rows["image"], qp.uint8).reshape(-1, 12, 10, 3)
        images = qp.image.random_crop(images, [8, 8], seed=chunk_rng)
        images = qp.image.random_flip_left_right(images, seed=chunk_rng)
        return {"image": qp.image.random_brightness(images, 0.2, seed=chunk_rng),
                "label": rows["label"]}

    def run(threads):
        batches = qp.train.read_batch_features(path, 16, spec, num_epochs=1, seed=3,
                                               parse_fn=augmented, read_batch_size=8,
                                               num_enqueue_threads=threads)
        with batches:
            return [(batch["label"].tolist(), batch["image"]) for batch in batches]

    one, three = run(1), run(3)
    assert [labels for labels, _ in one] == [labels for labels, _ in three]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(one, three))
    assert sorted(sum((labels for labels, _ in one), [])) == list(range(96))
