"""``qp.io``: the names TF keeps under ``tf.io`` (parsing, decoding, TFRecord files, readers)."""

from queuepipe import _LAZY
from queuepipe._lazy import namespace

_MODULES = ("queuepipe.parsing", "queuepipe.records", "queuepipe.readers")
_TABLE = {name: module for name, module in _LAZY.items() if module in _MODULES}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
