"""TF1's ``tf.summary`` calls, which input code is full of, accepted and recording nothing.

``tf.summary.image("input", images)``, ``scalar``, ``histogram``, ``text``, ``audio``,
``merge`` and ``merge_all`` return a string Tensor that ``sess.run`` evaluates to ``b""``
without running its inputs (no extra dequeue), and ``tf.summary.FileWriter`` accepts
``add_summary`` and writes nothing. queuepipe has no TensorBoard writer yet: a script that
needs its summaries should write them with its training framework.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from queuepipe.compat.v1.graph import Tensor

__all__ = ["scalar", "image", "histogram", "text", "audio", "tensor_summary", "merge",
           "merge_all", "FileWriter"]


def _summary(name: Optional[str]) -> Tensor:
    return Tensor(lambda: b"", name=name or "Summary", shape=[], dtype=np.dtype(object))


def scalar(name: str, tensor: Any, collections: Any = None, family: Any = None) -> Tensor:
    return _summary(name)


def image(name: str, tensor: Any, max_outputs: int = 3, collections: Any = None,
          family: Any = None) -> Tensor:
    return _summary(name)


def histogram(name: str, values: Any, collections: Any = None, family: Any = None) -> Tensor:
    return _summary(name)


def text(name: str, tensor: Any, collections: Any = None) -> Tensor:
    return _summary(name)


def audio(name: str, tensor: Any, sample_rate: Any, max_outputs: int = 3,
          collections: Any = None, family: Any = None) -> Tensor:
    return _summary(name)


def tensor_summary(name: str, tensor: Any, summary_description: Any = None,
                   collections: Any = None, summary_metadata: Any = None,
                   family: Any = None, display_name: Any = None) -> Tensor:
    return _summary(name)


def merge(inputs: Any, collections: Any = None, name: Optional[str] = None) -> Tensor:
    return _summary(name or "Merge/MergeSummary")


def merge_all(key: str = "summaries", scope: Any = None, name: Optional[str] = None) -> Tensor:
    return _summary(name or "Merge/MergeSummary")


class FileWriter:
    """Accepts TF1's ``FileWriter`` calls; writes nothing (see the module docstring)."""

    def __init__(self, logdir: Any, graph: Any = None, **kwargs: Any):
        self.logdir = logdir

    def add_summary(self, summary: Any, global_step: Any = None) -> None:
        """Accepted; nothing is recorded."""

    def add_graph(self, graph: Any, global_step: Any = None) -> None:
        """Accepted; nothing is recorded."""

    def flush(self) -> None:
        """Nothing to flush."""

    def close(self) -> None:
        """Nothing to close."""

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
