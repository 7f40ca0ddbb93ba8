"""``qp.python_io``: TF1's ``tf.python_io`` (TFRecord writer, iterator and options)."""

from queuepipe import _LAZY
from queuepipe._lazy import namespace

_TABLE = {name: module for name, module in _LAZY.items() if module == "queuepipe.records"}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
