"""``qp.io``: the names TF keeps under ``tf.io`` (parsing, decoding, TFRecord files, readers,
images: ``decode_jpeg`` and kin need the ``[image]`` extra)."""

from queuepipe import _LAZY
from queuepipe._lazy import namespace

_MODULES = ("queuepipe.parsing", "queuepipe.records", "queuepipe.readers", "queuepipe.images")
_TABLE = {name: module for name, module in _LAZY.items() if module in _MODULES}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
