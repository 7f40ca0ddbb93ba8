"""TF1's ``tf.summary``: summary ops that give serialized ``Summary`` protos, and ``FileWriter``.

As in TF1, ``tf.summary.scalar("loss", x)``, ``histogram`` and ``image`` build a string Tensor
(added to the graph's ``summaries`` collection) whose value in a ``sess.run`` is a serialized
``tensorflow.Summary`` holding what TF's kernel would put in it: the tag is the op's name
(name scopes included, made unique: ``input/loss``, ``loss_1``), a scalar as a float32
``simple_value``, a histogram in TF's default buckets (geometric, 1.1 apart, empty runs
collapsed), images as PNG (float images rescaled as TF does). ``merge`` / ``merge_all`` join
them; ``tf.summary.FileWriter(logdir).add_summary(summary, global_step)`` writes them to a
TensorBoard event file through :class:`queuepipe.events.SummaryWriter`. A summary op only
computes bytes: without a FileWriter nothing is written anywhere.

Evaluating a summary evaluates its input, in the same run as the other fetches (a batch shared
with a training fetch is dequeued once). TF1's input functions add their queues' fill
summaries (``<scope>/fraction_of_<capacity>_full``, ``shuffle_batch``'s
``fraction_over_<min>_of_<capacity - min>_full``) to the same collection, so ``merge_all``
includes them, as in TF. ``tf.Summary`` / ``tf.summary.Summary`` (and ``Event``) are TF's protos, for summaries a
training loop builds by hand. ``text``, ``audio`` and ``tensor_summary`` are accepted and give an
empty ``Summary``; ``FileWriter.add_graph`` is accepted and writes no graph (there is none).
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence

import numpy as np

from queuepipe import events
from queuepipe.compat.v1.graph import Tensor, get_default_graph
from queuepipe.errors import InvalidArgumentError
from queuepipe.protos._events import Event, Summary

__all__ = ["scalar", "image", "histogram", "text", "audio", "tensor_summary", "merge",
           "merge_all", "FileWriter", "Summary", "Event"]

SUMMARIES = "summaries"  # TF's GraphKeys.SUMMARIES
_BAD_COLOR = np.array([255, 0, 0, 255], dtype=np.uint8)  # ImageSummary's default bad_color


def _histogram_limits() -> np.ndarray:
    """TF's default histogram bucket limits (``histogram.cc``): ±1e-12 growing by 1.1 up to
    1e20, then ±DBL_MAX, mirrored around 0."""
    positive = []
    limit = 1.0e-12
    while limit < 1.0e20:
        positive.append(limit)
        limit *= 1.1
    positive.append(np.finfo(np.float64).max)
    return np.array([-v for v in reversed(positive)] + [0.0] + positive)


_LIMITS = _histogram_limits()


def _clean_tag(name: str) -> str:
    """TF's ``clean_tag``: characters outside ``[-/\\w.]`` become ``_``; no leading ``/``."""
    return re.sub(r"[^-/\w\.]", "_", name).lstrip("/") if name else name


def _summary_op(name: str, family: Optional[str], inputs: Sequence[Any], values_of: Any,
                collections: Any) -> Tensor:
    """A string Tensor named as TF names a summary op, whose value is a serialized Summary of
    ``values_of(tag, *input_values)``; added to ``collections`` (default: summaries)."""
    name = _clean_tag(name)
    base = name if family is None else f"{_clean_tag(family)}/{name}"
    graph = get_default_graph()
    op_name = graph.unique_name(base)  # under the name scope, made unique, as TF names it
    tag = op_name if family is None else f"{_clean_tag(family)}/{op_name}"
    def run(*values: Any) -> bytes:
        return Summary(value=values_of(tag, *values)).SerializeToString()

    node = Tensor(run, list(inputs), graph=graph, shape=[], dtype=np.dtype(object),
                  output_of=f"{op_name}:0")
    for key in (collections if collections is not None else [SUMMARIES]):
        graph.add_to_collection(key, node)
    return node


def scalar(name: str, tensor: Any, collections: Any = None, family: Any = None) -> Tensor:
    """TF1's ``tf.summary.scalar``: ``tensor`` (one number) as a float32 ``simple_value``."""
    def values_of(tag: str, value: Any) -> List[Any]:
        array = np.asarray(value)
        if array.ndim != 0:
            raise InvalidArgumentError(f"tags and values are not the same shape: [] != "
                                       f"{list(array.shape)} (tag '{tag}')")
        return [events.scalar_value(tag, float(np.float32(array)))]
    return _summary_op(name, family, [tensor], values_of, collections)


def histogram(name: str, values: Any, collections: Any = None, family: Any = None) -> Tensor:
    """TF1's ``tf.summary.histogram``: ``values`` (any shape) in TF's default buckets."""
    def values_of(tag: str, value: Any) -> List[Any]:
        data = np.asarray(value, dtype=np.float64).reshape(-1)
        if not np.isfinite(data).all():
            raise InvalidArgumentError(f"Nan in summary histogram for: {tag}")
        summary_value = Summary.Value(tag=tag)
        histo = summary_value.histo
        histo.min = float(data.min()) if data.size else float(_LIMITS[-1])
        histo.max = float(data.max()) if data.size else float(-_LIMITS[-1])
        histo.num, histo.sum = float(data.size), float(data.sum())
        histo.sum_squares = float(np.dot(data, data))
        counts = np.bincount(np.searchsorted(_LIMITS, data, side="right"),
                             minlength=len(_LIMITS))
        i = 0
        while i < len(_LIMITS):  # a run of empty buckets becomes one, at its last limit
            end, count = _LIMITS[i], counts[i]
            i += 1
            if count <= 0:
                while i < len(_LIMITS) and counts[i] <= 0:
                    end, count = _LIMITS[i], counts[i]
                    i += 1
            histo.bucket_limit.append(float(end))
            histo.bucket.append(float(count))
        return [summary_value]
    return _summary_op(name, family, [values], values_of, collections)


def _to_uint8(pixels: np.ndarray) -> np.ndarray:
    """One float image ``[h, w, depth]`` as TF's ImageSummary maps it to uint8: scaled so the
    largest value is 255, or, with negative values, the largest magnitude is 127 around 128;
    pixels with a non-finite channel get ``bad_color`` (red)."""
    finite = np.isfinite(pixels).all(axis=-1)
    good = pixels[finite].astype(np.float32)
    low = good.min() if good.size else np.float32(np.inf)
    high = good.max() if good.size else np.float32(-np.inf)
    if low < 0:
        largest = max(abs(low), abs(high))
        scale, offset = (0.0 if largest < 1e-6 else np.float32(127.0) / largest), 128.0
    else:
        scale, offset = (0.0 if high < 1e-6 else np.float32(255.0) / high), 0.0
    kind = pixels.dtype.type
    with np.errstate(invalid="ignore"):
        mapped = (pixels * kind(scale) + kind(offset)).astype(np.uint8)
    mapped[~finite] = _BAD_COLOR[:pixels.shape[-1]]
    return mapped


def image(name: str, tensor: Any, max_outputs: int = 3, collections: Any = None,
          family: Any = None) -> Tensor:
    """TF1's ``tf.summary.image``: the first ``max_outputs`` images of ``tensor``
    (``[batch, h, w, 1|3|4]``, uint8 as they are, floats rescaled) as PNGs, tagged
    ``<tag>/image/<i>`` (``<tag>/image`` when ``max_outputs`` is 1)."""
    def values_of(tag: str, value: Any) -> List[Any]:
        images = np.asarray(value)
        if images.ndim != 4 or images.shape[3] not in (1, 3, 4):
            raise InvalidArgumentError(f"Tensor must be 4-D with last dim 1, 3, or 4, not "
                                       f"{list(images.shape)} (tag '{tag}')")
        if images.dtype != np.uint8 and images.dtype.kind != "f":
            raise InvalidArgumentError(f"image summary '{tag}' takes uint8, float16, float32 "
                                       f"or float64 images, got {images.dtype}")
        out = []
        for i in range(min(max_outputs, images.shape[0])):
            pixels = images[i] if images.dtype == np.uint8 else _to_uint8(images[i])
            suffix = f"/image/{i}" if max_outputs > 1 else "/image"
            out.append(events.image_value(tag + suffix, pixels))
        return out
    return _summary_op(name, family, [tensor], values_of, collections)


def _empty(name: str, collections: Any) -> Tensor:
    return _summary_op(name, None, [], lambda tag: [], collections)


def text(name: str, tensor: Any, collections: Any = None) -> Tensor:
    """Accepted: gives an empty Summary (queuepipe records no text summaries)."""
    return _empty(name, collections)


def audio(name: str, tensor: Any, sample_rate: Any, max_outputs: int = 3,
          collections: Any = None, family: Any = None) -> Tensor:
    """Accepted: gives an empty Summary (queuepipe records no audio summaries)."""
    return _empty(name, collections)


def tensor_summary(name: str, tensor: Any, summary_description: Any = None,
                   collections: Any = None, summary_metadata: Any = None,
                   family: Any = None, display_name: Any = None) -> Tensor:
    """Accepted: gives an empty Summary (queuepipe records no tensor summaries)."""
    return _empty(name, collections)


def merge(inputs: Sequence[Any], collections: Any = None, name: Optional[str] = None) -> Tensor:
    """TF1's ``tf.summary.merge``: one Summary with the values of every input, in order.

    Raises (at run time):
      InvalidArgumentError: two inputs hold the same tag, as in TF.
    """
    def merged(*serialized: bytes) -> bytes:
        out = Summary()
        seen = set()
        for data in serialized:
            for value in Summary.FromString(data).value:
                if value.tag in seen:
                    raise InvalidArgumentError(f"Duplicate tag {value.tag} found in summary "
                                               "inputs")
                seen.add(value.tag)
                out.value.append(value)
        return out.SerializeToString()

    graph = get_default_graph()
    with graph.name_scope(name or "Merge"):
        node = Tensor(merged, list(inputs), name="MergeSummary", shape=[],
                      dtype=np.dtype(object))
    for key in collections or ():
        graph.add_to_collection(key, node)
    return node


def merge_all(key: str = SUMMARIES, scope: Any = None,
              name: Optional[str] = None) -> Optional[Tensor]:
    """TF1's ``tf.summary.merge_all``: :func:`merge` of the collection ``key`` (filtered by
    ``scope``), or None when it is empty, as in TF."""
    summaries = get_default_graph().get_collection(key, scope)
    return merge(summaries, name=name) if summaries else None


class FileWriter:
    """TF1's ``tf.summary.FileWriter``: writes what summary ops give to a TensorBoard event
    file in ``logdir`` (a :class:`queuepipe.events.SummaryWriter`, flushed at every call).

    ``graph``, ``max_queue``, ``flush_secs`` and ``session`` are accepted; no graph is
    written. ``close()`` is idempotent; a ``with`` block closes it.
    """

    def __init__(self, logdir: str, graph: Any = None, max_queue: int = 10,
                 flush_secs: int = 120, graph_def: Any = None,
                 filename_suffix: Optional[str] = None, session: Any = None):
        self._logdir = str(logdir)
        self._writer = events.SummaryWriter(self._logdir, filename_suffix or "")

    def get_logdir(self) -> str:
        return self._logdir

    def add_summary(self, summary: Any, global_step: Any = None) -> None:
        """Writes ``summary`` (what ``sess.run`` gave for a summary op, or a ``Summary``
        proto) as one event at step ``global_step`` (0 if None)."""
        self._writer.add_summary(summary, 0 if global_step is None else int(global_step))

    def add_graph(self, graph: Any, global_step: Any = None, graph_def: Any = None) -> None:
        """Accepted; no graph is written (queuepipe's graph is not TF's GraphDef)."""

    def flush(self) -> None:
        """Every summary is flushed when added: nothing is left to flush."""

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "FileWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
