"""TensorBoard event files, written by queuepipe itself (no TensorFlow, no TensorBoard).

An event file is a TFRecord file (:mod:`queuepipe.records`) whose records are serialized
``tensorflow.Event`` protos (:mod:`queuepipe.protos`): first one holding the file version, then
one per :meth:`SummaryWriter.scalars` (or ``histogram``, ``image``) call, each with its wall
time, step and summary values. TensorBoard reads every file named ``events.out.tfevents.*`` in
a run's directory::

    writer = SummaryWriter("runs/input")
    writer.scalars({"input/records_per_sec": 5120.0}, step=10)
    writer.close()
    # then: tensorboard --logdir runs

:class:`~queuepipe.monitor.QueueMonitor` writes its queue figures through one
(``QueueMonitor(logdir=...)``), with TF1's tags.
"""

from __future__ import annotations

import io
import itertools
import os
import socket
import threading
import time
from typing import Any, Mapping, Optional

import numpy as np

from queuepipe.records import TFRecordWriter

__all__ = ["SummaryWriter", "scalar_value", "image_value"]

_FILE_VERSION = "brain.Event:2"  # what TF's and TensorBoard's writers put in the first event
_writers = itertools.count()  # tells apart the files of writers made in the same second


class SummaryWriter:
    """Appends summaries to a new event file in ``logdir``; thread-safe.

    The file (``events.out.tfevents.<seconds>.<host>.<pid>.<n>``) is created with the writer
    and closed by :meth:`close` (idempotent) or at the end of a ``with`` block. Every call is
    flushed to the file at once, so a TensorBoard watching ``logdir`` sees it while the program
    runs.

    Args:
      logdir: the run's directory (created if missing).
      filename_suffix: appended to the file name.

    Raises:
      OSError: the directory or the file cannot be created.
    """

    def __init__(self, logdir: str, filename_suffix: str = ""):
        from queuepipe.protos._events import Event
        self._event = Event
        self._lock = threading.Lock()
        os.makedirs(logdir, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_writers)}{filename_suffix}")
        self.path = os.path.join(logdir, name)
        self._records: Optional[TFRecordWriter] = TFRecordWriter(self.path)
        try:
            self._write(self._event(wall_time=time.time(), step=0, file_version=_FILE_VERSION))
        except BaseException:
            self.close()
            raise

    def _write(self, event: Any) -> None:
        with self._lock:
            if self._records is None:
                raise ValueError(f"the SummaryWriter of {self.path} is closed")
            self._records.write(event.SerializeToString())
            self._records.flush()

    def add_summary(self, summary: Any, step: int, wall_time: Optional[float] = None) -> None:
        """Writes one event holding ``summary``: a ``Summary`` proto or its serialized bytes
        (what TF1's summary ops give; fields queuepipe's proto lacks are kept as they are)."""
        event = self._event(wall_time=time.time() if wall_time is None else wall_time,
                            step=int(step))
        data = summary if isinstance(summary, bytes) else summary.SerializeToString()
        event.summary.MergeFromString(data)
        self._write(event)

    def _summary(self, step: int, wall_time: Optional[float], values: list) -> None:
        summary = _summary_class()()
        summary.value.extend(values)
        self.add_summary(summary, step, wall_time)

    def scalars(self, values: Mapping[str, float], step: int,
                wall_time: Optional[float] = None) -> None:
        """Writes one event holding a scalar per tag (``tf.summary.scalar``'s form)."""
        self._summary(step, wall_time, [scalar_value(tag, number)
                                        for tag, number in values.items()])

    def histogram(self, tag: str, values: Any, step: int, bins: int = 30,
                  wall_time: Optional[float] = None) -> None:
        """Writes the distribution of ``values`` (any shape, flattened) in ``bins`` buckets
        (``tf.summary.histogram``'s form: each bucket's right edge and count)."""
        data = np.asarray(values, dtype=np.float64).reshape(-1)
        summary_value = _summary_class().Value(tag=tag)
        histo = summary_value.histo
        if data.size:
            counts, edges = np.histogram(data, bins=bins)
            histo.min, histo.max = float(data.min()), float(data.max())
            histo.sum, histo.sum_squares = float(data.sum()), float(np.dot(data, data))
            histo.bucket_limit.extend(edges[1:].tolist())
            histo.bucket.extend(counts.astype(np.float64).tolist())
        histo.num = float(data.size)
        self._summary(step, wall_time, [summary_value])

    def image(self, tag: str, image: Any, step: int, wall_time: Optional[float] = None) -> None:
        """Writes one image (uint8 ``[h, w]`` or ``[h, w, 1|3|4]``; floats taken as ``[0,
        1]``) as a PNG (``tf.summary.image``'s form). Needs Pillow (the ``[image]`` extra)."""
        pixels = np.asarray(image)
        if pixels.dtype.kind == "f":
            pixels = (np.clip(pixels, 0, 1) * 255 + 0.5).astype(np.uint8)
        self._summary(step, wall_time, [image_value(tag, pixels)])

    def close(self) -> None:
        """Closes the file. Idempotent."""
        with self._lock:
            records, self._records = self._records, None
        if records is not None:
            records.close()

    def __enter__(self) -> "SummaryWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _summary_class() -> Any:
    from queuepipe.protos._events import Summary
    return Summary


def scalar_value(tag: str, number: float) -> Any:
    """A ``Summary.Value`` holding one scalar (float32, as TF stores it)."""
    return _summary_class().Value(tag=tag, simple_value=float(number))


def image_value(tag: str, pixels: Any) -> Any:
    """A ``Summary.Value`` holding ``pixels`` (uint8 ``[h, w]`` or ``[h, w, 1|3|4]``) as a PNG.

    Raises:
      ValueError: another shape.
      ImportError: Pillow is missing (the ``[image]`` extra).
    """
    try:
        from PIL import Image
    except ImportError as e:
        raise ImportError("writing an image summary needs Pillow: "
                          "pip install '<queuepipe checkout>[image]'") from e
    pixels = np.asarray(pixels)
    if pixels.ndim == 3 and pixels.shape[2] == 1:
        pixels = pixels[..., 0]
    if pixels.ndim not in (2, 3) or pixels.ndim == 3 and pixels.shape[2] not in (3, 4):
        raise ValueError(f"image {tag!r}: need [h, w] or [h, w, 1|3|4], got shape "
                         f"{pixels.shape}")
    png = io.BytesIO()
    Image.fromarray(pixels.astype(np.uint8)).save(png, "PNG")
    summary_value = _summary_class().Value(tag=tag)
    summary_value.image.height, summary_value.image.width = pixels.shape[:2]
    summary_value.image.colorspace = 1 if pixels.ndim == 2 else pixels.shape[2]
    summary_value.image.encoded_image_string = png.getvalue()
    return summary_value
