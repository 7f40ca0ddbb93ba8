"""Image decoding, as TF's ``tf.io.decode_jpeg``, ``decode_png`` and ``decode_image``.

TF1 pipelines decode JPEG and PNG bytes in the reader threads (``WholeFileReader`` or a
``bytes`` feature, then ``tf.image.decode_jpeg``). These functions take the same arguments and
give TF's arrays: ``uint8`` (or ``uint16`` for 16-bit PNG) of shape ``[height, width,
channels]``, ``channels=0`` keeping the file's own. They run on Pillow (the ``[image]`` extra)
and release the GIL while decoding: :func:`decode_batch` decodes a batch of encoded images on a
few threads.

Against TensorFlow 2.21 (``tests/golden/images-tf2.21/`` and ``image-cases-tf2.21/``,
compared array for array): PNG pixels are TF's in every channel count and dtype, 16-bit color
included (color made gray with libpng's coefficients, as TF's decoder does); JPEG pixels are TF's with ``dct_method="INTEGER_ACCURATE"``, gray JPEG output
being libjpeg's own as in TF. TF's default JPEG IDCT is the fast one, a few levels off the
accurate one, which is the only one Pillow offers.

Usage::

    image = qp.io.decode_jpeg(features["image"], channels=3)       # uint8 [h, w, 3]
    images = qp.io.decode_batch(batch["image"], qp.io.decode_jpeg, channels=3)
"""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Optional

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.errors import InvalidArgumentError

try:
    from PIL import Image, UnidentifiedImageError
except ImportError as e:  # only this module needs Pillow; `import queuepipe` never does
    raise ImportError("queuepipe.images needs Pillow: "
                      "pip install '<queuepipe checkout>[image]'") from e

__all__ = ["decode_jpeg", "decode_png", "decode_image", "decode_batch"]

_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}
_FORMATS = {b"\xff\xd8\xff": "JPEG", b"\x89PNG": "PNG", b"GIF8": "GIF", b"BM": "BMP"}


def _format(contents: bytes) -> Optional[str]:
    for magic, name in _FORMATS.items():
        if contents[:len(magic)] == magic:
            return name
    return None


def _bytes(contents: Any, op: str) -> bytes:
    if isinstance(contents, np.ndarray) and contents.ndim == 0:
        contents = contents[()]
    if not isinstance(contents, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(f"{op}: contents must be the bytes of one encoded image, got "
                                   f"{type(contents).__name__}")
    return bytes(contents)


def _open(contents: bytes, op: str, expected: Optional[str]) -> Any:
    found = _format(contents)
    if expected is not None and found != expected:
        raise InvalidArgumentError(
            f"{op}: the data is not a {expected} image ({found or 'unknown'} format, "
            f"{len(contents)} bytes starting {contents[:4]!r})")
    if found is None:
        raise InvalidArgumentError(f"{op}: Unknown image file format. One of JPEG, PNG, GIF, "
                                   f"BMP required (got {len(contents)} bytes starting "
                                   f"{contents[:4]!r})")
    try:
        image = Image.open(io.BytesIO(contents))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise InvalidArgumentError(f"{op}: cannot decode the {found} image of {len(contents)} "
                                   f"bytes: {e}") from None
    return image


def _png_gray(image: Any) -> np.ndarray:
    """A color PNG made gray as TF's PNG decoder (libpng's ``png_set_rgb_to_gray`` with
    0.299 and 0.587) does it: ``(9797 R + 19234 G + 3737 B) >> 15``, alpha dropped."""
    rgb = np.asarray(image.convert("RGB") if image.mode not in ("RGB", "RGBA") else image)
    r, g, b = (rgb[..., i].astype(np.uint32) for i in range(3))
    return ((9797 * r + 19234 * g + 3737 * b) >> 15).astype(rgb.dtype)[..., None]


def _file_channels(image: Any) -> int:
    """The channels TF keeps for ``channels=0``: the file's own (a palette with
    transparency becomes RGBA, as libpng expands it)."""
    mode = image.mode
    if mode in ("1", "L", "I;16", "I;16B", "I"):
        return 1
    if mode == "LA":
        return 2
    if mode in ("RGBA", "PA") or (mode == "P" and "transparency" in image.info):
        return 4
    return 3


def _channels(image: Any, channels: int, op: str) -> np.ndarray:
    """The 8-bit pixels as ``[h, w, c]``: the file's channels for 0, else converted as TF
    does."""
    if channels not in (0, 1, 2, 3, 4):
        raise InvalidArgumentError(f"{op}: channels must be 0, 1, 2, 3 or 4, got {channels!r}")
    channels = channels or _file_channels(image)
    if channels == 1 and image.format == "PNG" and image.mode not in ("1", "L", "LA"):
        return _png_gray(image)
    converted = image if image.mode == _MODES[channels] else image.convert(_MODES[channels])
    pixels = np.asarray(converted)
    return pixels.reshape(pixels.shape[:2] + (channels,))


_PNG16_RAWMODES = {0: "I;16B", 4: "LA;16B", 2: "RGB;16B", 6: "RGBA;16B"}


def _png16_rawmode(data: bytes) -> Optional[str]:
    """Pillow's raw mode for a 16-bit PNG's samples, from its IHDR (bit depth at byte 24,
    color type at 25), None for any other image."""
    if _format(data) != "PNG" or len(data) < 26 or data[24] != 16:
        return None
    return _PNG16_RAWMODES.get(data[25])


def _decode_as(data: bytes, rawmode: str) -> np.ndarray:
    """The PNG's pixel bytes unpacked with ``rawmode`` in place of the one Pillow chose: the
    way to every byte of a 16-bit color PNG, which Pillow's modes hold at 8 bits only."""
    image = Image.open(io.BytesIO(data))
    tile = image.tile[0]
    args = rawmode if isinstance(tile.args, (str, type(None))) else \
        (rawmode,) + tuple(tile.args[1:])
    image.tile = [tile._replace(args=args)]
    image.load()
    return np.asarray(image).astype(np.uint16)


def _png16_pixels(image: Any, data: bytes, rawmode: str) -> np.ndarray:
    """Every 16-bit sample of a 16-bit PNG, as uint16 ``[h, w, the file's channels]``.

    Pillow keeps 16-bit gray whole (mode ``I;16``) but color at 8 bits. Its decoder still
    inflates and unfilters every byte: unpacked as big-endian samples it keeps the high
    bytes, as little-endian ones the low bytes; gray+alpha (4 bytes a pixel) comes whole
    as the 4 bytes of an RGBA pixel."""
    if image.mode.startswith("I"):
        pixels = np.asarray(image).astype(np.uint16)
        return pixels.reshape(pixels.shape[:2] + (1,))
    if rawmode == "LA;16B":
        raw = _decode_as(data, "RGBA")
        return np.stack([raw[..., 0] << 8 | raw[..., 1], raw[..., 2] << 8 | raw[..., 3]], -1)
    high = _decode_as(data, rawmode)
    return high << 8 | _decode_as(data, rawmode[:-1] + "L")


def _png16_channels(pixels: np.ndarray, channels: int) -> np.ndarray:
    """16-bit samples in ``channels`` as libpng converts them for TF: gray made color by
    repeating it, alpha added opaque or dropped, color made gray with libpng's coefficients
    (rounded at 16 bits)."""
    have = pixels.shape[-1]
    if channels in (0, have):
        return pixels
    color = pixels[..., :3] if have >= 3 else np.repeat(pixels[..., :1], 3, axis=-1)
    alpha = pixels[..., have - 1:] if have in (2, 4) else np.full_like(pixels[..., :1], 65535)
    if channels == 1:
        if have <= 2:
            return pixels[..., :1]
        r, g, b = (color[..., i].astype(np.uint32) for i in range(3))
        return ((9797 * r + 19234 * g + 3737 * b + 16384) >> 15).astype(np.uint16)[..., None]
    if channels == 2:
        return np.concatenate([_png16_channels(pixels, 1), alpha], axis=-1)
    return color if channels == 3 else np.concatenate([color, alpha], axis=-1)


def _pixels(image: Any, data: bytes, channels: int, op: str) -> np.ndarray:
    """The decoded pixels in ``channels``: uint16 for a 16-bit PNG, else uint8."""
    rawmode = _png16_rawmode(data)
    if rawmode is not None:
        if channels not in (0, 1, 2, 3, 4):
            raise InvalidArgumentError(f"{op}: channels must be 0, 1, 2, 3 or 4, got "
                                       f"{channels!r}")
        return _png16_channels(_png16_pixels(image, data, rawmode), channels)
    return _channels(image, channels, op)


def decode_jpeg(contents: Any, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1,
                dct_method: str = "", name: Optional[str] = None) -> np.ndarray:
    """A JPEG image as uint8 ``[height, width, channels]``, as ``tf.io.decode_jpeg``.

    Args:
      contents: the encoded bytes (a ``bytes`` feature value).
      channels: 0 keeps the file's (1 or 3), 1 gives grayscale, 3 RGB.
      ratio: 1, 2, 4 or 8: downscale while decoding, as libjpeg's scaling (TF's ``ratio``).
      fancy_upscaling, try_recover_truncated, acceptable_fraction, dct_method, name: accepted
        for TF's signature. The pixels are TF's with ``dct_method="INTEGER_ACCURATE"`` (the
        accurate integer IDCT, bit for bit: checked against TF 2.21); TF's default, the fast
        IDCT, gives pixels a few levels off (``dct_method`` is a hint in TF as well).

    Raises:
      InvalidArgumentError: the data is not a JPEG image or does not decode, or a bad
        ``channels`` or ``ratio``.
    """
    del fancy_upscaling, try_recover_truncated, acceptable_fraction, dct_method, name
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"decode_jpeg: ratio must be 1, 2, 4 or 8, got {ratio!r}")
    if channels not in (0, 1, 3):
        raise InvalidArgumentError(f"decode_jpeg: channels must be 0, 1 or 3, got {channels!r}")
    data = _bytes(contents, "decode_jpeg")
    if _format(data) != "JPEG":
        _open(data, "decode_jpeg", "JPEG")  # raises, naming the format found
    try:
        image = Image.open(io.BytesIO(data))
        if ratio > 1 or channels == 1:  # libjpeg scales, and makes gray from Y, as for TF
            # Pillow picks the largest scale that keeps the size asked: asking the floor
            # gives libjpeg's 1/ratio, whose output rounds up (375 rows at 2: 188, as TF)
            image.draft("L" if channels == 1 else image.mode,
                        (max(1, image.width // ratio), max(1, image.height // ratio)))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise InvalidArgumentError(f"decode_jpeg: cannot decode the JPEG image of {len(data)} "
                                   f"bytes: {e}") from None
    return _channels(image, channels, "decode_jpeg")


def decode_png(contents: Any, channels: int = 0, dtype: Any = _dtypes.uint8,
               name: Optional[str] = None) -> np.ndarray:
    """A PNG image as ``[height, width, channels]`` of ``dtype`` (uint8 or uint16), as
    ``tf.io.decode_png``: 16-bit files scaled to uint8 by ``>> 8`` when uint8 is asked, 8-bit
    files to uint16 by ``* 257`` (libpng's expansion); every sample of a 16-bit file kept
    when uint16 is asked.

    Raises:
      InvalidArgumentError: the data is not a PNG image or does not decode, or a bad
        ``channels`` or ``dtype``.
    """
    del name
    dtype = _dtypes.as_dtype(dtype)
    if dtype not in (_dtypes.uint8, _dtypes.uint16):
        raise InvalidArgumentError(f"decode_png: dtype must be uint8 or uint16, got {dtype}")
    if channels not in (0, 1, 3, 4):
        raise InvalidArgumentError(f"decode_png: `channels` must be 0, 1, 3 or 4 but got "
                                   f"{channels!r}")
    data = _bytes(contents, "decode_png")
    pixels = _pixels(_open(data, "decode_png", "PNG"), data, channels, "decode_png")
    return _convert_depth(pixels, dtype, widen=257)


def _convert_depth(pixels: np.ndarray, dtype: np.dtype, widen: int) -> np.ndarray:
    """8 or 16-bit pixels in ``dtype``: 16 to 8 bits by ``>> 8``; 8 to 16 bits by ``* widen``
    (libpng expands PNG samples by 257; TF's ``convert_image_dtype`` scales the other
    formats by 256); to float32 in ``[0, 1]``."""
    if pixels.dtype == dtype:
        return pixels
    if dtype == np.float32:
        return pixels.astype(np.float32) / np.float32(np.iinfo(pixels.dtype).max)
    if dtype == np.uint16:
        return pixels.astype(np.uint16) * np.uint16(widen)
    return (pixels >> 8).astype(np.uint8)


def decode_image(contents: Any, channels: Optional[int] = None, dtype: Any = _dtypes.uint8,
                 name: Optional[str] = None, expand_animations: bool = True) -> np.ndarray:
    """A JPEG, PNG, GIF or BMP image, as ``tf.io.decode_image``: ``[h, w, c]``, or ``[frames,
    h, w, 3]`` for a GIF when ``expand_animations`` (its first frame ``[h, w, 3]`` otherwise).
    ``dtype`` float32 scales to ``[0, 1]``; uint16 scales 8-bit PNG samples by 257 (as
    ``decode_png``) and JPEG, GIF and BMP ones by 256 (as TF, which decodes them at 8 bits and
    converts with ``convert_image_dtype``).

    Raises:
      InvalidArgumentError: an unknown format, data that does not decode, a bad argument.
    """
    del name
    dtype = _dtypes.as_dtype(dtype)
    if dtype not in (_dtypes.uint8, _dtypes.uint16, _dtypes.float32):
        raise InvalidArgumentError(f"decode_image: dtype must be uint8, uint16 or float32, got "
                                   f"{dtype}")
    data = _bytes(contents, "decode_image")
    image = _open(data, "decode_image", None)
    if image.format == "GIF":
        frames = []
        for index in range(getattr(image, "n_frames", 1) if expand_animations else 1):
            image.seek(index)
            frames.append(_channels(image.convert("RGB"), 3, "decode_image"))
        pixels = np.stack(frames) if expand_animations else frames[0]
        if channels not in (None, 0, 3):
            raise InvalidArgumentError(f"decode_image: a GIF has 3 channels, got channels="
                                       f"{channels!r}")
    else:
        pixels = _pixels(image, data, channels or 0, "decode_image")
    return _convert_depth(pixels, dtype, widen=257 if image.format == "PNG" else 256)


def decode_batch(contents: Any, decoder: Callable[..., np.ndarray] = decode_image,
                 num_threads: int = 2, **kwargs: Any) -> np.ndarray:
    """Decodes a batch of encoded images (an object array or list of ``bytes``) with
    ``decoder`` on ``num_threads`` threads (Pillow decodes without the GIL), and stacks them.

    The threads live for the call only.

    Raises:
      InvalidArgumentError: an image does not decode (its index named), or the images differ
        in shape and cannot be stacked (resize them with ``qp.image.resize``, or decode per
        record).
    """
    items = list(np.asarray(contents, dtype=object).reshape(-1))

    def decode(index: int) -> np.ndarray:
        try:
            return decoder(items[index], **kwargs)
        except InvalidArgumentError as e:
            raise InvalidArgumentError(f"image {index} of the batch: {e.message}") from None

    if num_threads <= 1 or len(items) < 2:
        decoded = [decode(i) for i in range(len(items))]
    else:
        with ThreadPoolExecutor(min(num_threads, len(items)),
                                thread_name_prefix="queuepipe/decode") as pool:
            decoded = list(pool.map(decode, range(len(items))))
    shapes = {image.shape for image in decoded}
    if len(shapes) > 1:
        raise InvalidArgumentError(f"decode_batch: the images differ in shape "
                                   f"{sorted(shapes)[:4]}: resize them to one size to batch "
                                   f"them (qp.image.resize per image, or decode and resize "
                                   f"in one decoder function)")
    if not decoded:
        return np.zeros((0, 0, 0, 0), dtype=np.uint8)
    return np.stack(decoded)
