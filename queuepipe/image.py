"""``qp.image``: the names TF keeps under ``tf.image``: augmentation (resize, crops, flips,
brightness, contrast, standardization: :mod:`queuepipe.augment`, NumPy only) and decoding
(``decode_jpeg`` and kin: :mod:`queuepipe.images`, which needs the ``[image]`` extra)."""

from typing import TYPE_CHECKING

from queuepipe import _LAZY
from queuepipe._lazy import namespace, table_of

if TYPE_CHECKING:  # for type checkers and the API pages; at run time the names load lazily
    from queuepipe.augment import (
        adjust_brightness, adjust_contrast, adjust_hue, adjust_saturation, central_crop,
        convert_image_dtype, flip_left_right, flip_up_down, per_image_standardization,
        random_brightness, random_contrast, random_crop, random_flip_left_right,
        random_flip_up_down, random_hue, random_saturation, resize, resize_with_crop_or_pad
    )
    from queuepipe.images import decode_batch, decode_image, decode_jpeg, decode_png

_TABLE = {
    **{name: module for name, module in _LAZY.items() if module == "queuepipe.images"},
    **table_of({"queuepipe.augment": [
        "resize", "central_crop", "resize_with_crop_or_pad", "random_crop", "flip_left_right",
        "flip_up_down", "random_flip_left_right", "random_flip_up_down", "adjust_brightness",
        "random_brightness", "adjust_contrast", "random_contrast", "adjust_hue", "random_hue",
        "adjust_saturation", "random_saturation", "per_image_standardization",
        "convert_image_dtype"]}),
}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
