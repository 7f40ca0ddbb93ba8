"""Writes expected.npz: TensorFlow's decodings of the images beside this script.

Run with TensorFlow (2.21 here), never from the test suite:

    /tmp/peers/bin/python tests/golden/images-tf2.21/make_reference.py

Keys: ``<file>.jpeg.<channels>`` (TF's default IDCT), ``<file>.jpeg_accurate.<channels>``
(``dct_method="INTEGER_ACCURATE"``), ``<file>.jpeg_ratio2``, ``<file>.png.<channels>``,
``<file>.image`` (``decode_image``); for TF1's image ops on ``a.png`` decoded (RGB), with
``tf.compat.v1.image``: ``resize.bilinear.<h>x<w>``, ``resize.nearest.<h>x<w>``,
``resize.bilinear_aligned.<h>x<w>``, ``standardized``.
"""

import glob
import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))

out = {}
for path in sorted(glob.glob(os.path.join(HERE, "*.jpg")) + glob.glob(os.path.join(HERE, "*.png"))):
    with open(path, "rb") as f:
        data = f.read()
    name = os.path.basename(path)
    if name.endswith(".jpg"):
        for channels in (0, 1, 3):
            out[f"{name}.jpeg.{channels}"] = tf.io.decode_jpeg(data, channels=channels).numpy()
            out[f"{name}.jpeg_accurate.{channels}"] = tf.io.decode_jpeg(
                data, channels=channels, dct_method="INTEGER_ACCURATE").numpy()
        out[f"{name}.jpeg_ratio2"] = tf.io.decode_jpeg(
            data, ratio=2, dct_method="INTEGER_ACCURATE").numpy()
    else:
        for channels in (0, 1, 3, 4):
            out[f"{name}.png.{channels}"] = tf.io.decode_png(data, channels=channels).numpy()
    out[f"{name}.image"] = tf.io.decode_image(data).numpy()
rgb = tf.io.decode_png(open(os.path.join(HERE, "a.png"), "rb").read(), channels=3)
v1 = tf.compat.v1.image
for h, w in ((40, 50), (200, 300), (96, 128)):
    out[f"resize.bilinear.{h}x{w}"] = v1.resize_images(rgb, [h, w]).numpy()
    out[f"resize.nearest.{h}x{w}"] = v1.resize_images(
        rgb, [h, w], method=v1.ResizeMethod.NEAREST_NEIGHBOR).numpy()
    out[f"resize.bilinear_aligned.{h}x{w}"] = v1.resize_images(
        rgb, [h, w], align_corners=True).numpy()
out["standardized"] = tf.image.per_image_standardization(rgb).numpy()
np.savez_compressed(os.path.join(HERE, "expected.npz"), **out)
print(f"{len(out)} arrays, TensorFlow {tf.__version__}")
