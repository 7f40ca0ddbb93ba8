"""``tf.image`` for TF1 input code: decoding (queuepipe.images), resizing, standardizing and
the seeded random flips and crops, as symbolic ops computed with NumPy.

``resize_images`` computes TF1's resize (``align_corners=False``, no half-pixel centers):
bilinear to float32, or nearest neighbour keeping the dtype. The random ops draw from a NumPy
generator per op, seeded by the op's ``seed`` (TF's own random streams cannot be reproduced
outside TF: the same seed gives a repeatable sequence here, not TF's sequence).
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Optional

import numpy as np

from queuepipe.compat.v1.graph import Tensor

__all__ = ["ResizeMethod", "decode_jpeg", "decode_png", "decode_image", "resize_images",
           "per_image_standardization", "random_flip_left_right", "random_flip_up_down",
           "random_crop", "convert_image_dtype"]


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


def _axis_map(size_in: int, size_out: int, align_corners: bool) -> np.ndarray:
    """The input coordinate of each output pixel, in float32 as TF1's resize kernels compute
    it (``out * scale``, ``scale = in / out``)."""
    if align_corners and size_out > 1:
        scale = np.float32(size_in - 1) / np.float32(size_out - 1)
    else:
        scale = np.float32(size_in) / np.float32(size_out)
    return np.arange(size_out, dtype=np.float32) * scale


def _resize(image: np.ndarray, size: Any, method: int, align_corners: bool) -> np.ndarray:
    batched = image.ndim == 4
    images = image if batched else image[None]
    out_h, out_w = (int(s) for s in np.asarray(size).reshape(-1))
    in_h, in_w = images.shape[1:3]
    if (out_h, out_w) == (in_h, in_w):
        return image  # as TF: an image of the size asked comes back as it is
    ys, xs = _axis_map(in_h, out_h, align_corners), _axis_map(in_w, out_w, align_corners)
    if method == ResizeMethod.NEAREST_NEIGHBOR:
        rows = np.minimum(np.round(ys) if align_corners else np.floor(ys), in_h - 1).astype(int)
        cols = np.minimum(np.round(xs) if align_corners else np.floor(xs), in_w - 1).astype(int)
        out = images[:, rows][:, :, cols]
    elif method == ResizeMethod.BILINEAR:
        y0 = np.floor(ys).astype(int)
        x0 = np.floor(xs).astype(int)
        y1, x1 = np.minimum(y0 + 1, in_h - 1), np.minimum(x0 + 1, in_w - 1)
        ly = (ys - y0.astype(np.float32))[None, :, None, None]
        lx = (xs - x0.astype(np.float32))[None, None, :, None]
        data = images.astype(np.float32)
        top_left, top_right = data[:, y0][:, :, x0], data[:, y0][:, :, x1]
        bottom_left, bottom_right = data[:, y1][:, :, x0], data[:, y1][:, :, x1]
        top = top_left + (top_right - top_left) * lx
        bottom = bottom_left + (bottom_right - bottom_left) * lx
        out = top + (bottom - top) * ly
    else:
        raise NotImplementedError(f"tf.image.resize_images method {ResizeMethod(method).name} "
                                  f"is not provided by queuepipe.compat.v1: use BILINEAR or "
                                  f"NEAREST_NEIGHBOR")
    return out if batched else out[0]


def resize_images(images: Any, size: Any, method: int = ResizeMethod.BILINEAR,
                  align_corners: bool = False, preserve_aspect_ratio: bool = False,
                  name: Optional[str] = None) -> Tensor:
    """TF1's ``tf.image.resize_images`` of ``[h, w, c]`` or ``[n, h, w, c]``."""
    if method not in (ResizeMethod.BILINEAR, ResizeMethod.NEAREST_NEIGHBOR) or \
            preserve_aspect_ratio:
        raise NotImplementedError("tf.image.resize_images is provided for BILINEAR and "
                                  "NEAREST_NEIGHBOR without preserve_aspect_ratio")
    return Tensor(lambda v, s: _resize(np.asarray(v), s, method, align_corners),
                  [images, size], name=name or "resize_images")


def per_image_standardization(image: Any, name: Optional[str] = None) -> Tensor:
    """``(x - mean) / max(stddev, 1 / sqrt(N))`` over each image, float32, as TF."""
    def standardize(v: Any) -> np.ndarray:
        x = np.asarray(v, dtype=np.float32)
        axes = tuple(range(x.ndim - 3, x.ndim))
        count = np.prod([x.shape[a] for a in axes])
        mean = x.mean(axis=axes, keepdims=True)
        std = x.std(axis=axes, keepdims=True)
        return ((x - mean) / np.maximum(std, 1.0 / np.sqrt(count))).astype(np.float32)
    return Tensor(standardize, [image], name=name or "per_image_standardization")


class _Draws:
    """A seeded generator shared by the threads that evaluate one random op."""

    def __init__(self, seed: Optional[int]):
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()

    def uniform(self) -> float:
        with self._lock:
            return float(self._rng.random())

    def integers(self, highs: Any) -> np.ndarray:
        with self._lock:
            return self._rng.integers(0, np.asarray(highs) + 1)


def _random_flip(image: Any, axis: int, seed: Optional[int], name: str) -> Tensor:
    draws = _Draws(seed)

    def flip(v: Any) -> np.ndarray:
        v = np.asarray(v)
        return np.flip(v, axis=v.ndim - 3 + axis).copy() if draws.uniform() < 0.5 else v
    return Tensor(flip, [image], name=name)


def random_flip_left_right(image: Any, seed: Optional[int] = None) -> Tensor:
    return _random_flip(image, 1, seed, "random_flip_left_right")


def random_flip_up_down(image: Any, seed: Optional[int] = None) -> Tensor:
    return _random_flip(image, 0, seed, "random_flip_up_down")


def random_crop(value: Any, size: Any, seed: Optional[int] = None,
                name: Optional[str] = None) -> Tensor:
    """A crop of ``size`` at a uniformly random offset, as ``tf.image.random_crop``."""
    draws = _Draws(seed)

    def crop(v: Any, s: Any) -> np.ndarray:
        v, s = np.asarray(v), np.asarray(s).astype(int)
        if np.any(s > v.shape):
            raise ValueError(f"Need value.shape >= size, got {list(v.shape)} and {s.tolist()}")
        start = draws.integers(np.array(v.shape) - s)
        return v[tuple(slice(int(a), int(a + n)) for a, n in zip(start, s))].copy()
    return Tensor(crop, [value, size], name=name or "random_crop")


def _saturate_cast(values: np.ndarray, target: np.dtype) -> np.ndarray:
    """TF's ``saturate_cast``: clamp to the range both dtypes hold, then cast."""
    if target.kind == "f":
        return values.astype(target)
    low, high = np.iinfo(target).min, np.iinfo(target).max
    if values.dtype.kind in "ui":
        low = max(low, np.iinfo(values.dtype).min)
        high = min(high, np.iinfo(values.dtype).max)
        return np.clip(values, low, high).astype(target)
    # float bounds the float can hold within the range (int32's max is 2**31 - 128 in float32)
    kind = values.dtype.type
    low_f, high_f = kind(low), kind(high)
    if int(high_f) > high:
        high_f = np.nextafter(high_f, kind(0))
    return np.clip(values, low_f, high_f).astype(target)


def _convert(values: np.ndarray, target: np.dtype, saturate: bool) -> np.ndarray:
    """TF's ``convert_image_dtype`` on one value: integers rescaled in integer arithmetic (a
    floor division down, a multiplication up, wrapping unless ``saturate``), integers to
    floats by ``1 / max`` and floats to integers by ``max + 0.5`` in the float's precision,
    floats to floats cast."""
    source = values.dtype
    if source == target:
        return values
    cast = _saturate_cast if saturate else (lambda v, t: v.astype(t))
    with np.errstate(over="ignore", invalid="ignore"):
        if source.kind in "ui" and target.kind in "ui":
            top_in, top_out = int(np.iinfo(source).max), int(np.iinfo(target).max)
            if top_in > top_out:
                return cast(values // source.type((top_in + 1) // (top_out + 1)), target)
            return cast(values, target) * target.type((top_out + 1) // (top_in + 1))
        if source.kind == "f" and target.kind == "f":
            return values.astype(target)
        if source.kind in "ui":
            return values.astype(target) * target.type(1.0 / np.iinfo(source).max)
        return cast(values * source.type(np.iinfo(target).max + 0.5), target)


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False,
                        name: Optional[str] = None) -> Tensor:
    """TF's ``tf.image.convert_image_dtype``: values rescaled between the dtypes' ranges
    (integers to ``[0, max]``, floats to ``[0, 1]``) as TF computes them."""
    target = np.dtype(dtype)
    if target.kind not in "uif" or target == np.bool_:
        raise TypeError(f"convert_image_dtype: dtype must be an integer or a float type, got "
                        f"{target}")
    return Tensor(lambda v: _convert(np.asarray(v), target, saturate), [image],
                  name=name or "convert_image")
