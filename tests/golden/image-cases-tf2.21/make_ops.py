"""Writes ``ops.npz``: TensorFlow's image ops on two small images (``input.uint8``, a noisy
31x47 RGB photo, and ``input.float32``, the same divided by 255).

Run with TensorFlow (2.21 here), never from the test suite:

    ~/.venvs/queuepipe-peers/bin/python tests/golden/image-cases-tf2.21/make_ops.py

Keys: ``resize.<method>.<antialias>.<h>x<w>`` (``tf.image.resize`` of ``input.uint8``),
``resize_v1.<method>.<align_corners>.<h>x<w>`` (``tf.compat.v1.image.resize_images``),
``central_crop.<fraction>``, ``crop_or_pad.<h>x<w>`` (``resize_image_with_crop_or_pad``),
``brightness.<dtype>.<delta>``, ``contrast.<dtype>.<factor>``, ``hue.<dtype>.<delta>``,
``saturation.<dtype>.<factor>`` (``tf.image.adjust_*`` of ``input.<dtype>``),
``standardized.<dtype>``.
"""

import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))

rng = np.random.default_rng(30)
y, x = np.mgrid[0:31, 0:47]
base = np.stack([x * 5, y * 8, (x + y) * 3], axis=-1) % 256
image = np.clip(base + rng.normal(0, 30, base.shape), 0, 255).astype(np.uint8)
inputs = {"uint8": image, "float32": image.astype(np.float32) / 255}
out = {f"input.{dtype}": value for dtype, value in inputs.items()}

sizes = ((15, 20), (64, 100), (31, 47), (9, 120), (1, 1), (7, 3))
for method in ("bilinear", "nearest", "area", "bicubic"):
    for antialias in (False, True):
        for h, w in sizes:
            out[f"resize.{method}.{antialias}.{h}x{w}"] = tf.image.resize(
                image, [h, w], method=method, antialias=antialias).numpy()
v1 = tf.compat.v1.image
for name, method in (("bilinear", v1.ResizeMethod.BILINEAR),
                     ("nearest", v1.ResizeMethod.NEAREST_NEIGHBOR),
                     ("area", v1.ResizeMethod.AREA), ("bicubic", v1.ResizeMethod.BICUBIC)):
    for align in (False, True):
        for h, w in sizes:
            out[f"resize_v1.{name}.{align}.{h}x{w}"] = v1.resize_images(
                image, [h, w], method=method, align_corners=align).numpy()
for fraction in (0.1, 0.33, 0.5, 0.8, 1.0):
    out[f"central_crop.{fraction}"] = tf.image.central_crop(image, fraction).numpy()
for h, w in ((20, 30), (40, 60), (20, 60), (31, 47), (1, 2)):
    out[f"crop_or_pad.{h}x{w}"] = tf.image.resize_with_crop_or_pad(image, h, w).numpy()
for dtype, value in inputs.items():
    for delta in (-0.3, 0.1, 0.5):
        out[f"brightness.{dtype}.{delta}"] = tf.image.adjust_brightness(value, delta).numpy()
    for factor in (0.2, 1.0, 1.8):
        out[f"contrast.{dtype}.{factor}"] = tf.image.adjust_contrast(value, factor).numpy()
    for delta in (-0.4, 0.05, 0.3):
        out[f"hue.{dtype}.{delta}"] = tf.image.adjust_hue(value, delta).numpy()
    for factor in (0.0, 0.5, 1.7):
        out[f"saturation.{dtype}.{factor}"] = tf.image.adjust_saturation(value, factor).numpy()
    out[f"standardized.{dtype}"] = tf.image.per_image_standardization(value).numpy()
np.savez_compressed(os.path.join(HERE, "ops.npz"), **out)
print(f"{len(out)} arrays, TensorFlow {tf.__version__}")
