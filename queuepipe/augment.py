"""Image augmentation in NumPy, as TF's ``tf.image`` computes it: ``qp.image.resize``, crops,
flips, brightness, contrast, standardization.

Every function takes one image ``[height, width, channels]`` or a batch ``[n, height, width,
channels]`` and works on the whole batch at once (NumPy over arrays, no Python loop per pixel
or per image), so it serves both inside a ``parse_fn`` (per record or per chunk) and as a
batch-level op on what the trainer receives.

Values are TF 2.21's (``tests/golden/image-cases-tf2.21/``): ``resize`` has ``tf.image.resize``'s
semantics (pixel centers at half-integers; ``antialias`` widens the kernel when downscaling),
within one 8-bit level of TF's output; the deterministic ops give TF's values. Like TF, resizing
gives float32 (nearest neighbour keeps the dtype), and brightness and contrast work in floats
and convert back to the image's dtype, saturating.

Randomness: each ``random_*`` function draws from a NumPy ``Generator`` made from its ``seed``
(an int, a sequence of ints, or a ``Generator`` the caller owns), never from global state. A
batch draws once per image. The same seed and images give the same result in any thread; an
unseeded call draws fresh entropy. Inside a ``parse_fn``, which runner threads call in
whatever order they run, derive the seed from the record itself so that timing cannot change
it::

    def parse_fn(serialized):
        rng = np.random.default_rng([SEED, zlib.crc32(b"".join(serialized))])
        batch = qp.parse_example(serialized, FEATURES)
        images = qp.io.decode_batch(batch["image"], qp.io.decode_jpeg, channels=3)
        images = qp.image.resize(images, [224, 224])
        batch["image"] = qp.image.random_flip_left_right(images, seed=rng)
        return batch

As a batch-level op, one ``Generator`` seeded once and used on the batches in order (they are
the same batches for a seeded pipeline) gives the same images run after run.
"""

from __future__ import annotations

from typing import Any, Sequence, Tuple, Union

import numpy as np

from queuepipe.errors import InvalidArgumentError

__all__ = ["resize", "resample", "central_crop", "resize_with_crop_or_pad", "random_crop",
           "flip_left_right", "flip_up_down", "random_flip_left_right", "random_flip_up_down",
           "adjust_brightness", "random_brightness", "adjust_contrast", "random_contrast",
           "adjust_hue", "random_hue", "adjust_saturation", "random_saturation",
           "per_image_standardization", "convert_image_dtype"]

Seed = Union[None, int, Sequence[int], np.random.Generator]
METHODS = ("bilinear", "nearest", "area", "bicubic")


def _batch(images: Any, op: str) -> Tuple[np.ndarray, bool]:
    """``images`` as ``[n, h, w, c]``, and whether it came as a batch."""
    array = np.asarray(images)
    if array.ndim not in (3, 4):
        raise InvalidArgumentError(f"{op}: images must be [height, width, channels] or [n, "
                                   f"height, width, channels], got shape {array.shape}")
    return (array, True) if array.ndim == 4 else (array[None], False)


def _generator(seed: Seed) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


# --- dtypes, as TF's convert_image_dtype ----------------------------------------------------

def _saturate_cast(values: np.ndarray, target: np.dtype) -> np.ndarray:
    """TF's ``saturate_cast``: clamp to the range both dtypes hold, then cast."""
    if target.kind == "f":
        return values.astype(target)
    low, high = int(np.iinfo(target).min), int(np.iinfo(target).max)
    if values.dtype.kind in "ui":
        low = max(low, int(np.iinfo(values.dtype).min))
        high = min(high, int(np.iinfo(values.dtype).max))
        return np.clip(values, low, high).astype(target)
    # bounds the float holds inside the range (int32's top is 2**31 - 128 in float32)
    kind = values.dtype.type
    high_f = kind(high)
    if int(high_f) > high:
        high_f = np.nextafter(high_f, kind(0))
    return np.clip(values, kind(low), high_f).astype(target)


def convert_image_dtype(images: Any, dtype: Any, saturate: bool = False) -> np.ndarray:
    """Values rescaled between the ranges of two dtypes, as ``tf.image.convert_image_dtype``:
    integers cover ``[0, max]`` and floats ``[0, 1]``. Between integers TF rescales in
    integer arithmetic (a floor division down, uint16 to uint8 being ``>> 8``; a
    multiplication up, uint8 to uint16 being ``* 256``), wrapping unless ``saturate``;
    integers become floats by ``* (1 / max)`` and floats integers by ``* (max + 0.5)``, in the
    float's precision; floats are cast.

    Raises:
      InvalidArgumentError: a dtype that is neither an integer nor a float type.
    """
    values = np.asarray(images)
    source, target = values.dtype, np.dtype(dtype)
    for name, kind in (("image", source), ("dtype", target)):
        if kind.kind not in "uif":
            raise InvalidArgumentError(f"convert_image_dtype: {name} must be of an integer or "
                                       f"a float type, got {kind}")
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


def _as_float(images: np.ndarray) -> np.ndarray:
    """Images in the float TF's color ops work in: float16/32 kept, others float32."""
    if images.dtype in (np.float16, np.float32):
        return images
    return convert_image_dtype(images, np.float32)


# --- resizing ---------------------------------------------------------------------------------

def _scale(size_in: int, size_out: int, align_corners: bool) -> np.float32:
    """TF's ``CalculateResizeScale``, in float32 as TF computes it."""
    if align_corners and size_out > 1:
        return np.float32(size_in - 1) / np.float32(size_out - 1)
    return np.float32(size_in) / np.float32(size_out)


def _source(size_in: int, size_out: int, half_pixel: bool, align_corners: bool) -> np.ndarray:
    """The input coordinate of each output pixel (TF's scalers, float32)."""
    scale = _scale(size_in, size_out, align_corners)
    out = np.arange(size_out, dtype=np.float32)
    return (out + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else out * scale


def _nearest_indices(size_in: int, size_out: int, half_pixel: bool,
                     align_corners: bool) -> np.ndarray:
    scale = _scale(size_in, size_out, align_corners)
    out = np.arange(size_out, dtype=np.float32)
    if half_pixel:
        at = np.floor((out + np.float32(0.5)) * scale)
    else:
        at = out * scale  # TF rounds halves up (roundf), NumPy's round to even
        at = np.floor(at + np.float32(0.5)) if align_corners else np.floor(at)
    return np.clip(at, 0, size_in - 1).astype(np.intp)


def _cubic(distance: np.ndarray, a: float) -> np.ndarray:
    """The cubic convolution kernel (Keys for ``a = -0.5``)."""
    x = np.abs(distance)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    return np.where(x <= 1, near, np.where(x < 2, far, 0.0))


def _bicubic_weights(size_in: int, size_out: int, half_pixel: bool,
                     align_corners: bool) -> np.ndarray:
    """``[out, in]`` weights of TF's ``resize_bicubic``: Keys' kernel (a = -0.5) with taps
    outside the image dropped and the rest renormalized when ``half_pixel``; the legacy
    kernel (a = -0.75) with edge taps repeated otherwise. The fraction is quantized to
    1/1024, as TF's coefficient table is."""
    at = _source(size_in, size_out, half_pixel, align_corners).astype(np.float64)
    start = np.floor(at)
    fraction = np.rint((at - start) * 1024) / 1024
    taps = start[:, None].astype(np.intp) + np.arange(-1, 3)
    weights = _cubic(fraction[:, None] - np.arange(-1, 3), -0.5 if half_pixel else -0.75)
    inside = (taps >= 0) & (taps < size_in)
    if half_pixel:
        weights = np.where(inside, weights, 0.0)
        weights /= weights.sum(axis=1, keepdims=True)
    matrix = np.zeros((size_out, size_in))
    np.add.at(matrix, (np.repeat(np.arange(size_out), 4), np.clip(taps, 0, size_in - 1).ravel()),
              weights.ravel())
    return matrix


def _area_weights(size_in: int, size_out: int, align_corners: bool) -> np.ndarray:
    """``[out, in]`` weights of TF's ``resize_area``: each output pixel averages the input
    box ``[o * scale, (o + 1) * scale)``, cells weighted by their overlap."""
    scale = float(_scale(size_in, size_out, align_corners))
    starts = np.arange(size_out) * scale
    ends = starts + scale
    cells = np.arange(int(np.ceil(scale)) + 2)
    index = np.floor(starts)[:, None] + cells
    overlap = np.minimum(index + 1, ends[:, None]) - np.maximum(index, starts[:, None])
    overlap = np.where(index < ends[:, None], np.maximum(overlap, 0.0), 0.0)
    matrix = np.zeros((size_out, size_in))
    rows = np.repeat(np.arange(size_out), len(cells))
    np.add.at(matrix, (rows, np.clip(index, 0, size_in - 1).astype(np.intp).ravel()),
              overlap.ravel() / scale)
    return matrix


def _antialias_weights(size_in: int, size_out: int, method: str) -> np.ndarray:
    """``[out, in]`` weights of TF's ``scale_and_translate`` (what ``antialias=True`` runs):
    the kernel (triangle for bilinear, Keys cubic for bicubic) widened by the downscale
    factor, sampled at input pixel centers and normalized."""
    inverse = size_in / size_out
    widen = max(inverse, 1.0)
    radius = 1.0 if method == "bilinear" else 2.0
    at = (np.arange(size_out) + 0.5) * inverse
    centers = np.arange(size_in) + 0.5
    distance = (centers[None, :] - at[:, None]) / widen
    if method == "bilinear":
        weights = np.maximum(0.0, 1.0 - np.abs(distance))
    else:
        weights = _cubic(distance, -0.5)
    weights = np.where(np.abs(distance) <= radius, weights, 0.0)
    total = weights.sum(axis=1, keepdims=True)
    return np.divide(weights, total, out=np.zeros_like(weights), where=np.abs(total) > 0)


def _weights(size_in: int, size_out: int, method: str, half_pixel: bool, align_corners: bool,
             antialias: bool) -> np.ndarray:
    if antialias:
        return _antialias_weights(size_in, size_out, method)
    if method == "area":
        return _area_weights(size_in, size_out, align_corners)
    return _bicubic_weights(size_in, size_out, half_pixel, align_corners)


def _bilinear(images: np.ndarray, size: Tuple[int, int], half_pixel: bool,
              align_corners: bool) -> np.ndarray:
    """TF's ``resize_bilinear``, its float32 arithmetic included (the same operations on
    the same values, so the same bits): interpolate along x on the two rows, then between
    them along y."""
    def axis(size_in: int, size_out: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        at = _source(size_in, size_out, half_pixel, align_corners)
        floor = np.floor(at)
        lower = np.maximum(floor, 0).astype(np.intp)
        upper = np.minimum(np.ceil(at), size_in - 1).astype(np.intp)
        return lower, upper, (at - floor).astype(np.float32)

    n, height, width, channels = images.shape
    top, bottom, y_lerp = axis(height, size[0])
    left, right, x_lerp = axis(width, size[1])
    # Rows flattened to [width * channels]: the gathers and the arithmetic then run along
    # long contiguous rows (a broadcast over a last axis of 3 channels runs 2x slower).
    flat = images.reshape(n, height, width * channels)
    left = (left[:, None] * channels + np.arange(channels)).ravel()
    right = (right[:, None] * channels + np.arange(channels)).ravel()
    x_lerp = np.repeat(x_lerp, channels)

    def interpolated(rows: np.ndarray) -> np.ndarray:
        """``left + (right - left) * x_lerp`` along the rows picked, in place."""
        picked = np.take(flat, rows, axis=1)  # in the images' dtype: uint8 is 4x smaller
        near = np.take(picked, left, axis=2).astype(np.float32)
        far = np.take(picked, right, axis=2).astype(np.float32)
        far -= near
        far *= x_lerp
        far += near
        return far

    upper, lower = interpolated(top), interpolated(bottom)
    lower -= upper
    lower *= y_lerp[None, :, None]
    lower += upper
    return lower.reshape(n, size[0], size[1], channels)


def resample(images: Any, size: Sequence[int], method: str = "bilinear", *,
             half_pixel_centers: bool = True, align_corners: bool = False,
             antialias: bool = False) -> np.ndarray:
    """The resize kernels of TF with every switch TF has: ``resize`` is this with TF2's
    defaults; ``compat.v1``'s ``resize_images`` calls it with TF1's (no half-pixel centers).

    ``antialias`` applies to bilinear and bicubic (TF's ``scale_and_translate``); area and
    nearest ignore it, as in TF.
    """
    if method not in METHODS:
        raise InvalidArgumentError(f"resize: method must be one of {', '.join(METHODS)}, got "
                                   f"{method!r}")
    batch, batched = _batch(images, "resize")
    try:
        out_h, out_w = (int(s) for s in np.asarray(size).reshape(-1))
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"resize: size must be [height, width], got {size!r}") \
            from None
    if out_h <= 0 or out_w <= 0:
        raise InvalidArgumentError(f"resize: size must be positive, got [{out_h}, {out_w}]")
    in_h, in_w = batch.shape[1:3]
    if method == "nearest":
        rows = _nearest_indices(in_h, out_h, half_pixel_centers, align_corners)
        cols = _nearest_indices(in_w, out_w, half_pixel_centers, align_corners)
        out = batch[:, rows][:, :, cols]
    elif method == "bilinear" and not antialias:
        out = _bilinear(batch, (out_h, out_w), half_pixel_centers, align_corners)
    else:
        antialias = antialias and method in ("bilinear", "bicubic")
        rows = _weights(in_h, out_h, method, half_pixel_centers, align_corners, antialias)
        cols = _weights(in_w, out_w, method, half_pixel_centers, align_corners, antialias)
        out = _weighted_sum(batch, rows, 1)
        out = _weighted_sum(out, cols, 2)
    return out if batched else out[0]


def _weighted_sum(images: np.ndarray, weights: np.ndarray, axis: int) -> np.ndarray:
    """``images`` ``[n, h, w, c]`` with ``axis`` (1 or 2) replaced by ``weights @ it``, as
    float32. A weight matrix is a band (each output pixel takes a few input pixels: 4 for
    bicubic, about ``2 * scale + 1`` for antialias), so the product runs as one gather and
    multiply-add per tap, over rows flattened to ``width * channels``."""
    n, height, width, channels = images.shape
    taps = int((weights != 0).sum(axis=1).max(initial=1))
    # per output pixel, the input pixels of non-zero weight first, in increasing order
    at = np.argsort(weights == 0, axis=1, kind="stable")[:, :taps]
    tap_weights = np.take_along_axis(weights, at, axis=1).astype(np.float32)
    flat = images.reshape(n, height, width * channels)
    out = None
    for k in range(taps):
        if axis == 1:
            term = np.take(flat, at[:, k], axis=1).astype(np.float32)
            term *= tap_weights[None, :, k, None]
        else:
            columns = (at[:, k, None] * channels + np.arange(channels)).ravel()
            term = np.take(flat, columns, axis=2).astype(np.float32)
            term *= np.repeat(tap_weights[:, k], channels)
        if out is None:
            out = term
        else:
            out += term
    assert out is not None  # taps >= 1
    size = weights.shape[0]
    return out.reshape((n, size, width, channels) if axis == 1 else (n, height, size, channels))


def resize(images: Any, size: Sequence[int], method: str = "bilinear",
           antialias: bool = False) -> np.ndarray:
    """Images resized to ``size = [height, width]``, as TF2's ``tf.image.resize``.

    Args:
      images: ``[h, w, c]`` or ``[n, h, w, c]``, any real dtype.
      size: the new ``[height, width]``.
      method: ``"bilinear"``, ``"nearest"``, ``"area"`` or ``"bicubic"``.
      antialias: when downscaling with bilinear or bicubic, widen the kernel so that every
        input pixel counts (TF's ``scale_and_translate``); less aliasing, a little slower.

    Returns:
      float32 images of the new size (nearest keeps the dtype), within one 8-bit level of TF's.

    Raises:
      InvalidArgumentError: a bad rank, size or method.
    """
    return resample(images, size, method, half_pixel_centers=method != "area",
                    antialias=antialias)


# --- crops and flips ------------------------------------------------------------------------

def central_crop(images: Any, central_fraction: float) -> np.ndarray:
    """The central ``central_fraction`` (in ``(0, 1]``) of each side, as
    ``tf.image.central_crop``: it starts at ``int((side - side * fraction) / 2)``."""
    if not 0.0 < central_fraction <= 1.0:
        raise InvalidArgumentError(f"central_crop: central_fraction must be within (0, 1], got "
                                   f"{central_fraction!r}")
    batch, batched = _batch(images, "central_crop")
    if central_fraction == 1.0:
        return np.asarray(images)
    h, w = batch.shape[1:3]
    top = int((h - h * central_fraction) / 2)
    left = int((w - w * central_fraction) / 2)
    out = batch[:, top:h - top, left:w - left]
    return out if batched else out[0]


def resize_with_crop_or_pad(images: Any, target_height: int, target_width: int) -> np.ndarray:
    """Images cropped centrally or padded with zeros around to ``[target_height,
    target_width]``, as ``tf.image.resize_with_crop_or_pad`` (TF1's
    ``resize_image_with_crop_or_pad``)."""
    if target_height <= 0 or target_width <= 0:
        raise InvalidArgumentError(f"resize_with_crop_or_pad: target size must be positive, "
                                   f"got {target_height}x{target_width}")
    batch, batched = _batch(images, "resize_with_crop_or_pad")
    h, w = batch.shape[1:3]
    top, left = max(h - target_height, 0) // 2, max(w - target_width, 0) // 2
    cropped = batch[:, top:top + min(h, target_height), left:left + min(w, target_width)]
    pad_top, pad_left = max(target_height - h, 0) // 2, max(target_width - w, 0) // 2
    out = np.zeros((batch.shape[0], target_height, target_width, batch.shape[3]), batch.dtype)
    out[:, pad_top:pad_top + cropped.shape[1], pad_left:pad_left + cropped.shape[2]] = cropped
    return out if batched else out[0]


def random_crop(images: Any, size: Sequence[int], seed: Seed = None) -> np.ndarray:
    """A ``size = [height, width]`` crop of each image at a uniformly random place (each image
    of a batch its own), as ``tf.image.random_crop`` does for one image.

    Raises:
      InvalidArgumentError: ``size`` larger than the images, or channels that differ.
    """
    batch, batched = _batch(images, "random_crop")
    crop = [int(s) for s in np.asarray(size).reshape(-1)]
    if len(crop) == 3 and crop[2] != batch.shape[3] or len(crop) not in (2, 3):
        raise InvalidArgumentError(f"random_crop: size must be [height, width] (or with the "
                                   f"image's {batch.shape[3]} channels), got {crop}")
    n, h, w = batch.shape[:3]
    if crop[0] > h or crop[1] > w:
        raise InvalidArgumentError(f"random_crop: size {crop[:2]} is larger than the images "
                                   f"({h}x{w})")
    rng = _generator(seed)
    tops = rng.integers(0, h - crop[0] + 1, size=n)
    lefts = rng.integers(0, w - crop[1] + 1, size=n)
    rows = tops[:, None] + np.arange(crop[0])
    cols = lefts[:, None] + np.arange(crop[1])
    out = batch[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
    return out if batched else out[0]


def flip_left_right(images: Any) -> np.ndarray:
    """Images mirrored: columns reversed."""
    batch, batched = _batch(images, "flip_left_right")
    out = batch[:, :, ::-1]
    return out if batched else out[0]


def flip_up_down(images: Any) -> np.ndarray:
    """Images upside down: rows reversed."""
    batch, batched = _batch(images, "flip_up_down")
    out = batch[:, ::-1]
    return out if batched else out[0]


def _random_flip(images: Any, axis: int, seed: Seed, op: str) -> np.ndarray:
    batch, batched = _batch(images, op)
    flip = np.asarray(_generator(seed).random(batch.shape[0])) < 0.5
    out = batch.copy()
    out[flip] = np.flip(batch[flip], axis=axis)
    return out if batched else out[0]


def random_flip_left_right(images: Any, seed: Seed = None) -> np.ndarray:
    """Each image mirrored with probability 1/2, as ``tf.image.random_flip_left_right``."""
    return _random_flip(images, 2, seed, "random_flip_left_right")


def random_flip_up_down(images: Any, seed: Seed = None) -> np.ndarray:
    """Each image upside down with probability 1/2, as ``tf.image.random_flip_up_down``."""
    return _random_flip(images, 1, seed, "random_flip_up_down")


# --- brightness, contrast, standardization --------------------------------------------------

def _per_image(value: Any, n: int) -> np.ndarray:
    """A scalar, or one value per image of a batch, shaped to broadcast over ``[n, h, w, c]``."""
    array = np.asarray(value, dtype=np.float64).reshape(-1)
    return array.reshape(-1, 1, 1, 1) if array.size == n > 1 else array.reshape(())


def adjust_brightness(images: Any, delta: Any) -> np.ndarray:
    """``delta`` (in ``[0, 1]`` units; a scalar or one per image) added to every value, as
    ``tf.image.adjust_brightness``: integer images go to float32 and back, saturating."""
    batch, batched = _batch(images, "adjust_brightness")
    floats = _as_float(batch)
    out = floats + _per_image(delta, batch.shape[0]).astype(floats.dtype)
    out = convert_image_dtype(out, batch.dtype, saturate=True)
    return out if batched else out[0]


def random_brightness(images: Any, max_delta: float, seed: Seed = None) -> np.ndarray:
    """Brightness moved by ``delta`` uniform in ``[-max_delta, max_delta)``, one per image, as
    ``tf.image.random_brightness``."""
    if max_delta < 0:
        raise InvalidArgumentError(f"random_brightness: max_delta must be non-negative, got "
                                   f"{max_delta!r}")
    batch, _ = _batch(images, "random_brightness")
    deltas = _generator(seed).uniform(-max_delta, max_delta, size=batch.shape[0])
    return adjust_brightness(images, deltas)


def adjust_contrast(images: Any, contrast_factor: Any) -> np.ndarray:
    """Each channel's distance from its mean over the image scaled by ``contrast_factor`` (a
    scalar or one per image), as ``tf.image.adjust_contrast``: ``(x - mean) * factor +
    mean``, integer images going to float32 and back, saturating."""
    batch, batched = _batch(images, "adjust_contrast")
    floats = _as_float(batch)
    mean = floats.mean(axis=(1, 2), keepdims=True, dtype=np.float32).astype(floats.dtype)
    factor = _per_image(contrast_factor, batch.shape[0]).astype(floats.dtype)
    out = convert_image_dtype((floats - mean) * factor + mean, batch.dtype, saturate=True)
    return out if batched else out[0]


def _random_factor(images: Any, op: str, adjust: Any, lower: float, upper: float,
                   seed: Seed) -> np.ndarray:
    """``adjust`` by one factor per image, uniform in ``[lower, upper)``."""
    if not 0 <= lower < upper:
        raise InvalidArgumentError(f"{op}: need 0 <= lower < upper, got lower={lower!r}, "
                                   f"upper={upper!r}")
    batch, _ = _batch(images, op)
    return adjust(images, _generator(seed).uniform(lower, upper, size=batch.shape[0]))


def random_contrast(images: Any, lower: float, upper: float, seed: Seed = None) -> np.ndarray:
    """Contrast scaled by a factor uniform in ``[lower, upper)``, one per image, as
    ``tf.image.random_contrast``."""
    return _random_factor(images, "random_contrast", adjust_contrast, lower, upper, seed)


def _rgb(images: Any, op: str) -> Tuple[np.ndarray, bool, np.ndarray]:
    batch, batched = _batch(images, op)
    if batch.shape[3] != 3:
        raise InvalidArgumentError(f"{op}: images must have 3 channels (RGB), got "
                                   f"{batch.shape[3]}")
    return batch, batched, _as_float(batch).astype(np.float32)


def adjust_hue(images: Any, delta: Any) -> np.ndarray:
    """Hue rotated by ``delta`` (in turns, within ``[-1, 1]``; a scalar or one per image), as
    ``tf.image.adjust_hue``: TF's kernel, which keeps each pixel's largest and smallest
    channel and moves the middle one along the hexagon of hues."""
    batch, batched, x = _rgb(images, "adjust_hue")
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    # TF's six categories: which channel is largest, which smallest
    category = np.select([(r < g) & (b < r), (r < g) & (b > g), r < g, b < g, b > r],
                         [1, 3, 2, 0, 4], 5)
    top = np.maximum(np.maximum(r, g), b)
    bottom = np.minimum(np.minimum(r, g), b)
    middle = r + g + b - top - bottom
    span = top - bottom
    ratio = np.divide(middle - bottom, span, out=np.zeros_like(span), where=span != 0)
    hue = np.where(span == 0, np.float32(0),
                   category + np.where(category % 2 == 0, ratio, 1 - ratio))
    hue = hue + _per_image(delta, batch.shape[0]).astype(np.float32) * np.float32(6)
    hue = np.mod(hue, np.float32(6))
    hue = np.where(hue >= 6, np.float32(0), hue)
    category = hue.astype(np.intp)
    ratio = hue - category
    ratio = np.where(category % 2 == 0, ratio, 1 - ratio)
    middle = bottom + ratio * span
    # the (r, g, b) of each category, as 0 top, 1 middle, 2 bottom
    order = np.array([[0, 1, 2], [1, 0, 2], [2, 0, 1], [2, 1, 0], [1, 2, 0], [0, 2, 1]])
    levels = np.stack([top, middle, bottom], axis=-1)
    out = np.take_along_axis(levels, order[np.minimum(category, 5)], axis=-1)
    out = convert_image_dtype(out.astype(_as_float(batch[:0]).dtype), batch.dtype, saturate=True)
    return out if batched else out[0]


def adjust_saturation(images: Any, saturation_factor: Any) -> np.ndarray:
    """Saturation (HSV's S) scaled by ``saturation_factor`` (a scalar or one per image) and
    clipped to ``[0, 1]``, as ``tf.image.adjust_saturation``."""
    batch, batched, x = _rgb(images, "adjust_saturation")
    value = x.max(axis=-1)
    span = value - x.min(axis=-1)
    saturation = np.divide(span, value, out=np.zeros_like(span), where=value > 0)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    norm = np.divide(np.float32(1), np.float32(6) * span, out=np.zeros_like(span),
                     where=span > 0)
    hue = np.where(r == value, norm * (g - b),
                   np.where(g == value, norm * (b - r) + np.float32(2 / 6),
                            norm * (r - g) + np.float32(4 / 6)))
    hue = np.where(span <= 0, np.float32(0), hue)
    hue = np.where(hue < 0, hue + 1, hue)
    factor = _per_image(saturation_factor, batch.shape[0]).astype(np.float32)
    saturation = np.clip(saturation * factor, 0, 1)
    chroma = saturation * value
    low = value - chroma
    sixths = hue * 6
    category = sixths.astype(np.intp)
    x_part = chroma * (1 - np.abs(np.mod(sixths, np.float32(2)) - 1))
    zero = np.zeros_like(chroma)
    table = np.stack([np.stack(t, axis=-1) for t in (
        (chroma, x_part, zero), (x_part, chroma, zero), (zero, chroma, x_part),
        (zero, x_part, chroma), (x_part, zero, chroma), (chroma, zero, x_part),
        (zero, zero, zero))], axis=-2)
    picked = np.take_along_axis(table, np.clip(category, 0, 6)[..., None, None], axis=-2)
    out = picked[..., 0, :] + low[..., None]
    out = convert_image_dtype(out.astype(_as_float(batch[:0]).dtype), batch.dtype, saturate=True)
    return out if batched else out[0]


def random_hue(images: Any, max_delta: float, seed: Seed = None) -> np.ndarray:
    """Hue rotated by ``delta`` uniform in ``[-max_delta, max_delta]`` (``max_delta`` within
    ``[0, 0.5]``), one per image, as ``tf.image.random_hue``."""
    if not 0 <= max_delta <= 0.5:
        raise InvalidArgumentError(f"random_hue: max_delta must be within [0, 0.5], got "
                                   f"{max_delta!r}")
    batch, _ = _batch(images, "random_hue")
    return adjust_hue(images, _generator(seed).uniform(-max_delta, max_delta, batch.shape[0]))


def random_saturation(images: Any, lower: float, upper: float, seed: Seed = None) -> np.ndarray:
    """Saturation scaled by a factor uniform in ``[lower, upper)``, one per image, as
    ``tf.image.random_saturation``."""
    return _random_factor(images, "random_saturation", adjust_saturation, lower, upper, seed)


def per_image_standardization(images: Any) -> np.ndarray:
    """Each image to mean 0 and variance 1, as ``tf.image.per_image_standardization``: the
    values cast to float32 (not rescaled), ``(x - mean) / max(stddev, 1 / sqrt(N))`` with N
    the values of one image."""
    batch, batched = _batch(images, "per_image_standardization")
    x = batch.astype(np.float32)
    count = np.prod(x.shape[1:])
    mean = x.mean(axis=(1, 2, 3), keepdims=True)
    std = x.std(axis=(1, 2, 3), keepdims=True)
    out = ((x - mean) / np.maximum(std, np.float32(1.0 / np.sqrt(count)))).astype(np.float32)
    return out if batched else out[0]
