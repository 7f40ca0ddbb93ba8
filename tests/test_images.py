"""queuepipe.images: TF's decode_jpeg, decode_png and decode_image on Pillow.

Reference pixels: PNG is lossless, so a decoded PNG must be the array encoded. JPEG pixels are
those libjpeg-turbo's default integer IDCT gives (what TF's decode_jpeg gives by default), so a
JPEG decodes to what Pillow's own decoder gives, and close to the array encoded.
"""

import io
import os

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.errors import InvalidArgumentError

Image = pytest.importorskip("PIL.Image")


def encode(array, fmt, **kwargs):
    out = io.BytesIO()
    Image.fromarray(array).save(out, fmt, **kwargs)
    return out.getvalue()


def photo(h=24, w=32, seed=0):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 7, y * 9, (x + y) * 4], axis=-1) % 256
    return np.clip(base + rng.normal(0, 4, base.shape), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("channels, mode", [(0, "RGB"), (3, "RGB"), (1, "L")])
def test_decode_jpeg_gives_libjpeg_pixels_in_tf_shape(channels, mode):
    image = photo()
    data = encode(image, "JPEG", quality=95)
    got = qp.io.decode_jpeg(data, channels=channels)
    reference = Image.open(io.BytesIO(data))
    reference.draft(mode, reference.size)  # gray: libjpeg's own, from Y, as TF asks for it
    expected = np.asarray(reference.convert(mode))
    assert got.dtype == np.uint8 and got.shape == (24, 32, 1 if channels == 1 else 3)
    assert np.array_equal(got.reshape(expected.shape), expected)
    if channels != 1:
        assert np.abs(got.astype(int) - image).mean() < 6  # lossy, subsampled chroma: close


def test_decode_jpeg_ratio_downscales_while_decoding():
    data = encode(photo(64, 48), "JPEG")
    assert qp.io.decode_jpeg(data, ratio=2).shape == (32, 24, 3)
    assert qp.io.decode_jpeg(data, ratio=8).shape == (8, 6, 3)
    with pytest.raises(InvalidArgumentError, match=r"ratio must be 1, 2, 4 or 8, got 3"):
        qp.io.decode_jpeg(data, ratio=3)


@pytest.mark.parametrize("channels", [0, 1, 3, 4])
def test_decode_png_is_lossless_in_every_channel_count(channels):
    rgba = np.concatenate([photo(), np.full((24, 32, 1), 200, np.uint8)], axis=-1)
    data = encode(rgba, "PNG")
    got = qp.io.decode_png(data, channels=channels)
    if channels in (0, 4):
        assert np.array_equal(got, rgba)
    elif channels == 3:
        assert np.array_equal(got, rgba[..., :3])
    else:
        assert got.shape == (24, 32, 1)


def test_decode_png_of_16_bits_and_dtype_conversions():
    deep = (np.arange(24 * 32, dtype=np.uint16).reshape(24, 32) * 80)
    data = encode(deep, "PNG")
    got = qp.io.decode_png(data, dtype=qp.uint16)
    assert got.dtype == np.uint16 and np.array_equal(got[..., 0], deep)
    assert np.array_equal(qp.io.decode_png(data)[..., 0], (deep >> 8).astype(np.uint8))
    eight = encode(photo(), "PNG")
    assert np.array_equal(qp.io.decode_png(eight, dtype=qp.uint16),
                          photo().astype(np.uint16) * 257)


def test_decode_image_knows_the_formats_and_expands_animations():
    rgb = photo()
    assert np.array_equal(qp.io.decode_image(encode(rgb, "PNG")), rgb)
    assert np.array_equal(qp.io.decode_image(encode(rgb, "BMP")), rgb)
    scaled = qp.io.decode_image(encode(rgb, "PNG"), dtype=qp.float32)
    assert scaled.dtype == np.float32 and np.allclose(scaled, rgb / 255.0)
    frames = [Image.fromarray(photo(seed=s)) for s in range(3)]
    out = io.BytesIO()
    frames[0].save(out, "GIF", save_all=True, append_images=frames[1:])
    assert qp.io.decode_image(out.getvalue()).shape == (3, 24, 32, 3)
    assert qp.io.decode_image(out.getvalue(), expand_animations=False).shape == (24, 32, 3)


def test_bad_data_names_what_it_is():
    with pytest.raises(InvalidArgumentError, match=r"^decode_image: Unknown image file format\. "
                                                   r"One of JPEG, PNG, GIF, BMP required"):
        qp.io.decode_image(b"not an image")
    with pytest.raises(InvalidArgumentError, match=r"^decode_jpeg: the data is not a JPEG "
                                                   r"image \(PNG format"):
        qp.io.decode_jpeg(encode(photo(), "PNG"))
    truncated = encode(photo(), "PNG")[:60]
    with pytest.raises(InvalidArgumentError, match=r"^decode_png: cannot decode the PNG image"):
        qp.io.decode_png(truncated)


def test_decode_batch_decodes_on_threads_and_names_a_bad_image():
    images = [photo(seed=s) for s in range(6)]
    batch = np.array([encode(i, "PNG") for i in images], dtype=object)
    got = qp.io.decode_batch(batch, qp.io.decode_png, num_threads=3)
    assert got.shape == (6, 24, 32, 3) and np.array_equal(got, np.stack(images))
    batch[4] = b"\x89PNG broken"
    with pytest.raises(InvalidArgumentError, match=r"^image 4 of the batch: decode_png: "):
        qp.io.decode_batch(batch, qp.io.decode_png)
    with pytest.raises(InvalidArgumentError, match=r"differ in shape"):
        qp.io.decode_batch([encode(photo(8, 8), "PNG"), encode(photo(), "PNG")])


GOLDEN = os.path.join(os.path.dirname(__file__), "golden")


def golden_arrays(directory, name):
    with np.load(os.path.join(GOLDEN, directory, name)) as z:
        return {key: z[key] for key in z.files}


def golden_file(directory, name):
    with open(os.path.join(GOLDEN, directory, name), "rb") as f:
        return f.read()


def tf_reference():
    return golden_arrays("images-tf2.21", "expected.npz")


def golden_bytes(name):
    return golden_file("images-tf2.21", name)


@pytest.mark.parametrize("channels", [0, 1, 3, 4])
def test_png_pixels_are_tensorflows_in_every_channel_count(channels):
    expected = tf_reference()[f"a.png.png.{channels}"]
    assert np.array_equal(qp.io.decode_png(golden_bytes("a.png"), channels=channels), expected)
    with pytest.raises(InvalidArgumentError, match=r"`channels` must be 0, 1, 3 or 4 but got 2"):
        qp.io.decode_png(golden_bytes("a.png"), channels=2)


@pytest.mark.parametrize("name", ["q75.jpg", "q95.jpg", "s444.jpg"])
def test_jpeg_pixels_are_tensorflows_with_the_accurate_idct(name):
    reference, data = tf_reference(), golden_bytes(name)
    for channels in (0, 1, 3):
        got = qp.io.decode_jpeg(data, channels=channels)
        assert np.array_equal(got, reference[f"{name}.jpeg_accurate.{channels}"])
        fast = reference[f"{name}.jpeg.{channels}"]  # TF's default IDCT: a few levels off
        assert got.shape == fast.shape and np.abs(got.astype(int) - fast).max() <= 16
    assert np.array_equal(qp.io.decode_jpeg(data, ratio=2), reference[f"{name}.jpeg_ratio2"])
    assert qp.io.decode_image(data).shape == reference[f"{name}.image"].shape
    assert np.array_equal(qp.io.decode_image(golden_bytes("a.png")), reference["a.png.image"])


def test_a_damaged_jpeg_header_is_an_invalid_argument_naming_the_op():
    with pytest.raises(InvalidArgumentError, match=r"^decode_jpeg: cannot decode the JPEG image "
                                                   r"of 24 bytes"):
        qp.io.decode_jpeg(b"\xff\xd8\xff" + b"garbage" * 3)
    with pytest.raises(InvalidArgumentError, match=r"channels must be 0, 1 or 3, got 4"):
        qp.io.decode_jpeg(b"not even read", channels=4)


def tf_cases():
    return golden_arrays("image-cases-tf2.21", "decode.npz")


def case_bytes(name):
    return golden_file("image-cases-tf2.21", name)


def convert(pixels, dtype):
    """8-bit pixels in ``dtype`` as TF's convert_image_dtype does (uint16: * 256)."""
    if dtype == "uint16":
        return pixels.astype(np.uint16) * 256
    return pixels.astype(np.float32) / 255 if dtype == "float32" else pixels


DECODE_KEYS = sorted(key for key in tf_cases() if not key.startswith("convert."))


@pytest.mark.parametrize("key", DECODE_KEYS)
def test_edge_case_decodings_are_tensorflows(key):
    """16-bit PNGs of every color type in every channel count and dtype, gray+alpha kept as two
    channels, JPEG ratios on sides that are not multiples of the ratio, and decode_image's
    dtypes, each equal to what TF 2.21 decoded from the same bytes."""
    expected = tf_cases()[key]
    base, extension, op, *rest = key.split(".")
    name = f"{base}.{extension}"
    if op == "png":
        channels, dtype = rest
        got = qp.io.decode_png(case_bytes(name), channels=int(channels), dtype=dtype)
    elif op == "image":
        got = qp.io.decode_image(case_bytes(name), dtype=rest[0])
    else:
        got = qp.io.decode_jpeg(case_bytes(name), channels=int(rest[0]), ratio=int(op[5:]))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if extension == "jpg" and op == "image":  # decode_image uses TF's fast IDCT: a few levels
        scale = {"uint8": 1, "uint16": 256, "float32": 1 / 255}[rest[0]]
        assert np.abs(got.astype(np.float64) - expected).max() <= 16 * scale
        assert np.array_equal(got, convert(qp.io.decode_jpeg(case_bytes(name)), rest[0]))
    elif expected.dtype == np.float32:
        assert np.allclose(got, expected, rtol=0, atol=1e-7)
    else:
        assert np.array_equal(got, expected)
