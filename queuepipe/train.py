"""``qp.train``: the names TF1 keeps under ``tf.train`` (producers, batching, runners, protos)."""

from queuepipe import _LAZY
from queuepipe._lazy import namespace

_MODULES = ("queuepipe.coordinator", "queuepipe.runner", "queuepipe.producers",
            "queuepipe.protos", "queuepipe.batching")
_TABLE = {name: module for name, module in _LAZY.items() if module in _MODULES}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
