"""``tf.image`` for TF1 input code: decoding (:mod:`queuepipe.images`), and resizing, crops,
flips, color and standardization (:mod:`queuepipe.augment`, the native ``qp.image``), as
symbolic ops.

``resize_images`` computes TF1's resize kernels (no half-pixel centers, ``align_corners`` as
given; bilinear, bicubic and area to float32, nearest neighbour keeping the dtype; an image
already of the size asked comes back as it is). The deterministic ops give TF's values. The
random ops draw what TF draws (one flip per image; one brightness delta, contrast, hue or
saturation factor per evaluation; one crop offset) from the distributions TF draws them from,
with a NumPy generator per op seeded by the op's ``seed``: TF's own random streams cannot be
reproduced outside TF, so the same seed gives a repeatable sequence here, not TF's sequence.
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Optional

import numpy as np

from queuepipe import augment
from queuepipe.compat.v1.graph import Tensor

__all__ = ["ResizeMethod", "decode_jpeg", "decode_png", "decode_image", "resize_images",
           "resize", "per_image_standardization", "flip_left_right", "flip_up_down",
           "random_flip_left_right", "random_flip_up_down", "random_crop", "central_crop",
           "resize_image_with_crop_or_pad", "random_brightness", "random_contrast",
           "random_hue", "random_saturation", "convert_image_dtype"]


class ResizeMethod(enum.IntEnum):
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def _images():  # Pillow is an extra: imported when a decoding op is built
    from queuepipe import images
    return images


def decode_jpeg(contents: Any, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1,
                dct_method: str = "", name: Optional[str] = None) -> Tensor:
    decode = _images().decode_jpeg
    return Tensor(lambda v: decode(v, channels=channels, ratio=ratio), [contents],
                  name=name or "DecodeJpeg")


def decode_png(contents: Any, channels: int = 0, dtype: Any = np.uint8,
               name: Optional[str] = None) -> Tensor:
    decode = _images().decode_png
    return Tensor(lambda v: decode(v, channels=channels, dtype=dtype), [contents],
                  name=name or "DecodePng")


def decode_image(contents: Any, channels: Optional[int] = None, dtype: Any = np.uint8,
                 name: Optional[str] = None, expand_animations: bool = True) -> Tensor:
    decode = _images().decode_image
    return Tensor(lambda v: decode(v, channels=channels, dtype=dtype,
                                   expand_animations=expand_animations), [contents],
                  name=name or "decode_image")


_METHODS = {ResizeMethod.BILINEAR: "bilinear", ResizeMethod.NEAREST_NEIGHBOR: "nearest",
            ResizeMethod.BICUBIC: "bicubic", ResizeMethod.AREA: "area"}


def _resize(images: np.ndarray, size: Any, method: str, align_corners: bool) -> np.ndarray:
    out_h, out_w = (int(s) for s in np.asarray(size).reshape(-1))
    if (out_h, out_w) == images.shape[-3:-1]:
        return images  # as TF1: an image of the size asked comes back as it is
    return augment.resample(images, (out_h, out_w), method, half_pixel_centers=False,
                            align_corners=align_corners)


def resize_images(images: Any, size: Any, method: int = ResizeMethod.BILINEAR,
                  align_corners: bool = False, preserve_aspect_ratio: bool = False,
                  name: Optional[str] = None) -> Tensor:
    """TF1's ``tf.image.resize_images`` of ``[h, w, c]`` or ``[n, h, w, c]``."""
    if preserve_aspect_ratio:
        raise NotImplementedError("tf.image.resize_images(preserve_aspect_ratio=True) is not "
                                  "provided by queuepipe.compat.v1: compute the size that "
                                  "keeps the ratio and resize to it")
    try:
        kernel = _METHODS[ResizeMethod(method)]
    except ValueError:
        raise ValueError(f"tf.image.resize_images: unknown method {method!r}: use a "
                         f"tf.image.ResizeMethod") from None
    return Tensor(lambda v, s: _resize(np.asarray(v), s, kernel, align_corners),
                  [images, size], name=name or "resize_images")


resize = resize_images  # tf.compat.v1.image.resize is TF1's resize_images


def _op(fn: Any, name: str, *inputs: Any) -> Tensor:
    return Tensor(lambda *values: fn(*(np.asarray(v) for v in values)), list(inputs), name=name)


def per_image_standardization(image: Any, name: Optional[str] = None) -> Tensor:
    """``(x - mean) / max(stddev, 1 / sqrt(N))`` over each image, float32, as TF."""
    return _op(augment.per_image_standardization, name or "per_image_standardization", image)


def flip_left_right(image: Any) -> Tensor:
    return _op(augment.flip_left_right, "flip_left_right", image)


def flip_up_down(image: Any) -> Tensor:
    return _op(augment.flip_up_down, "flip_up_down", image)


def central_crop(image: Any, central_fraction: float) -> Tensor:
    return _op(lambda v: augment.central_crop(v, central_fraction), "central_crop", image)


def resize_image_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> Tensor:
    return _op(lambda v: augment.resize_with_crop_or_pad(v, target_height, target_width),
               "resize_image_with_crop_or_pad", image)


class _Draws:
    """A seeded generator shared by the threads that evaluate one random op: each
    evaluation takes a child generator of its own under the lock, then computes without it."""

    def __init__(self, seed: Optional[int]):
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    def child(self) -> np.random.Generator:
        with self._lock:
            return self._rng.spawn(1)[0]


def _random(image: Any, name: str, apply: Any, seed: Optional[int]) -> Tensor:
    draws = _Draws(seed)
    return _op(lambda v: apply(v, draws.child()), name, image)


def random_flip_left_right(image: Any, seed: Optional[int] = None) -> Tensor:
    return _random(image, "random_flip_left_right", augment.random_flip_left_right, seed)


def random_flip_up_down(image: Any, seed: Optional[int] = None) -> Tensor:
    return _random(image, "random_flip_up_down", augment.random_flip_up_down, seed)


def random_brightness(image: Any, max_delta: float, seed: Optional[int] = None) -> Tensor:
    """``adjust_brightness`` by one delta uniform in ``[-max_delta, max_delta)``."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return _random(image, "random_brightness", lambda v, rng: augment.adjust_brightness(
        v, rng.uniform(-max_delta, max_delta)), seed)


def _random_factor(image: Any, name: str, adjust: Any, lower: float, upper: float,
                   seed: Optional[int]) -> Tensor:
    """``adjust`` by one factor uniform in ``[lower, upper)``, checked as TF checks it."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return _random(image, name, lambda v, rng: adjust(v, rng.uniform(lower, upper)), seed)


def random_contrast(image: Any, lower: float, upper: float, seed: Optional[int] = None) -> Tensor:
    """``adjust_contrast`` by one factor uniform in ``[lower, upper)``."""
    return _random_factor(image, "random_contrast", augment.adjust_contrast, lower, upper, seed)


def random_hue(image: Any, max_delta: float, seed: Optional[int] = None) -> Tensor:
    """``adjust_hue`` by one delta uniform in ``[-max_delta, max_delta)``."""
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return _random(image, "random_hue", lambda v, rng: augment.adjust_hue(
        v, rng.uniform(-max_delta, max_delta)), seed)


def random_saturation(image: Any, lower: float, upper: float,
                      seed: Optional[int] = None) -> Tensor:
    """``adjust_saturation`` by one factor uniform in ``[lower, upper)``."""
    return _random_factor(image, "random_saturation", augment.adjust_saturation, lower, upper,
                          seed)


def random_crop(value: Any, size: Any, seed: Optional[int] = None,
                name: Optional[str] = None) -> Tensor:
    """A crop of ``size`` at a uniformly random offset in every dimension, as
    ``tf.image.random_crop`` (one offset for the whole value, whatever its rank)."""
    draws = _Draws(seed)

    def crop(v: Any, s: Any) -> np.ndarray:
        v, s = np.asarray(v), np.asarray(s).astype(int)
        if np.any(s > v.shape):
            raise ValueError(f"Need value.shape >= size, got {list(v.shape)} and {s.tolist()}")
        start = draws.child().integers(0, np.array(v.shape) - s + 1)
        return v[tuple(slice(int(a), int(a + n)) for a, n in zip(start, s))].copy()
    return Tensor(crop, [value, size], name=name or "random_crop")


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False,
                        name: Optional[str] = None) -> Tensor:
    """TF's ``tf.image.convert_image_dtype``: values rescaled between the dtypes' ranges
    (integers to ``[0, max]``, floats to ``[0, 1]``) as TF computes them."""
    target = np.dtype(dtype)
    return Tensor(lambda v: augment.convert_image_dtype(v, target, saturate), [image],
                  name=name or "convert_image")
