"""Writes the edge-case images beside this script and ``decode.npz``: TensorFlow's decodings
of them, and ``convert_image_dtype`` between dtypes.

Run with TensorFlow (2.21 here), never from the test suite:

    ~/.venvs/queuepipe-peers/bin/python tests/golden/image-cases-tf2.21/make_decode.py

Images: 16-bit PNGs of each color type (``g16``, ``ga16``, ``rgb16``, ``rgba16``, written here
with zlib since Pillow cannot write 16-bit color), an 8-bit gray+alpha PNG (``ga8``), a 375x500
JPEG (``big.jpg``, sides not multiples of 8), an 8-bit PNG, a small JPEG, GIF and BMP.

Keys: ``<file>.png.<channels>.<dtype>`` (``decode_png``), ``<file>.image.<dtype>``
(``decode_image``), ``big.jpg.ratio<r>.<channels>`` (``decode_jpeg``, accurate IDCT),
``convert.<from>.<to>.<saturate>`` of ``convert.input.<from>``.
"""

import io
import os
import struct
import zlib

import numpy as np
import tensorflow as tf
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))


def png16(pixels, color_type):
    """A non-interlaced 16-bit PNG of ``pixels`` ([h, w, c] uint16), rows filtered with
    filter types 0-4 in turn so that every unfiltering path is taken."""
    h, w, _ = pixels.shape
    rows = []
    previous = np.zeros(pixels[0].size * 2, np.int64)
    bpp = pixels.shape[2] * 2
    for y in range(h):
        line = np.frombuffer(pixels[y].astype(">u2").tobytes(), np.uint8).astype(np.int64)
        left = np.concatenate([np.zeros(bpp, np.int64), line[:-bpp]])
        upper_left = np.concatenate([np.zeros(bpp, np.int64), previous[:-bpp]])
        kind = y % 5
        if kind == 0:
            filtered = line
        elif kind == 1:
            filtered = line - left
        elif kind == 2:
            filtered = line - previous
        elif kind == 3:
            filtered = line - (left + previous) // 2
        else:
            p = left + previous - upper_left
            pa, pb, pc = abs(p - left), abs(p - previous), abs(p - upper_left)
            predictor = np.where((pa <= pb) & (pa <= pc), left,
                                 np.where(pb <= pc, previous, upper_left))
            filtered = line - predictor
        rows.append(bytes([kind]) + (filtered % 256).astype(np.uint8).tobytes())
        previous = line

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))


def encode(array, fmt, **kwargs):
    out = io.BytesIO()
    Image.fromarray(array).save(out, fmt, **kwargs)
    return out.getvalue()


def photo(h, w, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 3, y * 5, (x + y) * 2], axis=-1) % 256
    return np.clip(base + rng.normal(0, 6, base.shape), 0, 255).astype(np.uint8)


rng = np.random.default_rng(29)
files = {}
for name, (channels, color_type) in {"g16": (1, 0), "ga16": (2, 4), "rgb16": (3, 2),
                                     "rgba16": (4, 6)}.items():
    files[name + ".png"] = png16(rng.integers(0, 65536, (13, 17, channels), dtype=np.uint16),
                                 color_type)
files["ga8.png"] = encode(np.stack([photo(13, 17, 1)[..., 0],
                                    photo(13, 17, 2)[..., 1]], axis=-1), "PNG")
files["rgb8.png"] = encode(photo(13, 17, 3), "PNG")
files["big.jpg"] = encode(photo(375, 500, 4), "JPEG", quality=90)
files["small.jpg"] = encode(photo(13, 17, 7), "JPEG", quality=90)
files["small.gif"] = encode(photo(13, 17, 5), "GIF")
files["small.bmp"] = encode(photo(13, 17, 6), "BMP")
for name, data in files.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)

out = {}
for name, data in files.items():
    if name.endswith(".png"):
        for channels in (0, 1, 3, 4):
            for dtype in (tf.uint8, tf.uint16):
                out[f"{name}.png.{channels}.{dtype.name}"] = tf.io.decode_png(
                    data, channels=channels, dtype=dtype).numpy()
    for dtype in (tf.uint8, tf.uint16, tf.float32):
        if name == "big.jpg":
            continue
        out[f"{name}.image.{dtype.name}"] = tf.io.decode_image(data, dtype=dtype).numpy()
for ratio in (2, 4, 8):
    for channels in (0, 1, 3):
        out[f"big.jpg.ratio{ratio}.{channels}"] = tf.io.decode_jpeg(
            files["big.jpg"], channels=channels, ratio=ratio,
            dct_method="INTEGER_ACCURATE").numpy()

samples = {
    "uint8": np.array([0, 1, 2, 127, 128, 254, 255], np.uint8),
    "uint16": np.array([0, 1, 255, 256, 257, 32767, 32768, 65280, 65535], np.uint16),
    "int8": np.array([-128, -1, 0, 1, 64, 127], np.int8),
    "int16": np.array([-32768, -1, 0, 1, 255, 256, 32767], np.int16),
    "int32": np.array([-2**31, -1, 0, 1, 2**23, 2**31 - 1], np.int32),
    "float32": np.array([0.0, 1e-6, 0.25, 0.5, 0.999, 1.0], np.float32),
}
for source, values in samples.items():
    out[f"convert.input.{source}"] = values
    for target in samples:
        for saturate in (False, True):
            out[f"convert.{source}.{target}.{saturate}"] = tf.image.convert_image_dtype(
                values, tf.as_dtype(target), saturate=saturate).numpy()
np.savez_compressed(os.path.join(HERE, "decode.npz"), **out)
print(f"{len(out)} arrays, TensorFlow {tf.__version__}")
