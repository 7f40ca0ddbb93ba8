"""Watching the queues of a running pipeline: is training waiting for input?

TensorFlow 1 answered this with a summary per queue, ``fraction_of_N_full``: a batch queue that
is mostly empty means the readers and parsers cannot keep up and the trainer is *input-bound*;
a batch queue that stays full means the trainer is the slow part and faster input would not
help. :class:`QueueMonitor` samples every queue of a :class:`~queuepipe.Pipeline` on a timer
in a background thread and keeps the samples, so that it can print a table, give a verdict with
its reasoning, and draw the fill of each queue over time.

Usage::

    import queuepipe as qp
    from queuepipe.monitor import QueueMonitor

    batches = qp.shuffle_batch(...)
    with qp.running(), QueueMonitor(interval=0.5) as monitor:
        for batch in batches:
            train_step(batch)
    print(monitor.table())
    verdict = monitor.input_bound()
    print(verdict.reason)          # why it is (or is not) input-bound
    monitor.plot("queues.png")     # needs matplotlib: pip install '<queuepipe checkout>[plot]'

With ``logdir=``, every sample also goes to a TensorBoard event file in that directory
(:class:`~queuepipe.events.SummaryWriter`), under TF1's tag ``<queue>/fraction_of_<capacity>_full``
and beside it ``<queue>/enqueued_per_sec``, ``<queue>/dequeued_per_sec``,
``<queue>/consumers_blocked_secs_per_sec`` and ``<queue>/producers_blocked_secs_per_sec``
(each between this sample and the one before), at step = the sample's number::

    with qp.running(), QueueMonitor(interval=1.0, logdir="runs/input"):
        for batch in batches:
            train_step(batch)
    # tensorboard --logdir runs

What is measured: each sample reads :meth:`QueueBase.stats` of every queue (size, capacity,
elements enqueued and dequeued so far, and the total seconds dequeues and enqueues spent
blocked). Rates are differences between the first and the last sample of a window. A wait is
counted when it ends, so a dequeue still blocked at the last sample adds its time later.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Deque, Dict, List, NamedTuple, Optional

from queuepipe.coordinator import Coordinator, LooperThread
from queuepipe.events import SummaryWriter
from queuepipe.runner import Pipeline, get_default_pipeline

__all__ = ["Sample", "QueueRates", "Verdict", "QueueMonitor"]


class Sample(NamedTuple):
    """One reading of one queue's counters (see :meth:`QueueBase.stats`)."""

    time: float  # time.monotonic() when read
    size: int
    capacity: int
    enqueued: int
    dequeued: int
    consumer_wait_secs: float
    producer_wait_secs: float

    @property
    def fill(self) -> float:
        """``size / capacity``: TF's ``fraction_of_N_full``."""
        return self.size / self.capacity if self.capacity else 0.0


class QueueRates(NamedTuple):
    """What one queue did between the first and the last sample of a window.

    The wait shares are seconds blocked per second of the window, summed over the threads
    that waited, so several consumers that all wait the whole time make a share above 1.
    """

    queue: str
    samples: int
    seconds: float
    size: int
    capacity: int
    fill: float  # at the last sample
    mean_fill: float  # over the samples of the window
    enqueued_per_sec: float
    dequeued_per_sec: float
    consumer_wait_share: float
    producer_wait_share: float


class Verdict(NamedTuple):
    """The answer of :meth:`QueueMonitor.input_bound`; true when the pipeline is input-bound."""

    input_bound: bool
    reason: str
    queue: Optional[str]

    def __bool__(self) -> bool:
        return self.input_bound

    def __str__(self) -> str:
        return self.reason


def _rates(name: str, samples: List[Sample]) -> QueueRates:
    first, last = samples[0], samples[-1]
    seconds = last.time - first.time

    def per_sec(delta):
        return delta / seconds if seconds > 0 else 0.0

    return QueueRates(
        queue=name, samples=len(samples), seconds=seconds, size=last.size,
        capacity=last.capacity, fill=last.fill,
        mean_fill=sum(s.fill for s in samples) / len(samples),
        enqueued_per_sec=per_sec(last.enqueued - first.enqueued),
        dequeued_per_sec=per_sec(last.dequeued - first.dequeued),
        consumer_wait_share=per_sec(last.consumer_wait_secs - first.consumer_wait_secs),
        producer_wait_share=per_sec(last.producer_wait_secs - first.producer_wait_secs))


def _summaries(taken: Dict[str, Sample], previous: Dict[str, Sample]) -> Dict[str, float]:
    """TensorBoard scalars of one sample: TF1's fill tag, and the rates since the sample
    before (where there is one, at a different time)."""
    out = {}
    for name, sample in taken.items():
        out[f"{name}/fraction_of_{sample.capacity}_full"] = sample.fill
        before = previous.get(name)
        if before is not None and sample.time > before.time:
            rates = _rates(name, [before, sample])
            out[f"{name}/enqueued_per_sec"] = rates.enqueued_per_sec
            out[f"{name}/dequeued_per_sec"] = rates.dequeued_per_sec
            out[f"{name}/consumers_blocked_secs_per_sec"] = rates.consumer_wait_share
            out[f"{name}/producers_blocked_secs_per_sec"] = rates.producer_wait_share
    return out


class QueueMonitor:
    """Samples every queue of a pipeline on a timer, in a background thread.

    The monitor runs between :meth:`start` and :meth:`stop`, or for the body of a ``with``
    block. Its thread (named ``queuepipe/monitor``) takes one sample at once and then one every
    ``interval`` seconds; it ends on :meth:`stop`, on leaving the ``with`` block, or within one
    interval of ``coord`` being asked to stop. :meth:`sample` takes a sample from the calling
    thread, with or without the background thread. The queues are looked up at every sample,
    so queues added to the pipeline later are watched too.

    Args:
      pipeline: the pipeline whose queues to watch; the default pipeline (at construction)
        if None.
      interval: seconds between two samples of the background thread.
      coord: an optional :class:`~queuepipe.Coordinator`; the monitor thread registers with it
        (so ``coord.join()`` waits for it) and stops when it stops.
      history_size: samples kept per queue; older ones are dropped.
      logdir: a directory to write every sample to as TensorBoard summaries (see the module
        docstring for the tags); the event file is created at the first sample and closed by
        :meth:`stop`.

    Raises:
      ValueError: ``interval`` or ``history_size`` is not positive.
    """

    def __init__(self, pipeline: Optional[Pipeline] = None, interval: float = 1.0, *,
                 coord: Optional[Coordinator] = None, history_size: int = 3600,
                 logdir: Optional[str] = None):
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        if history_size < 2:
            raise ValueError(f"history_size must be >= 2, got {history_size!r}")
        self._pipeline = pipeline if pipeline is not None else get_default_pipeline()
        self._interval = interval
        self._user_coord = coord
        self._history_size = history_size
        self._lock = threading.Lock()  # guards _history; held for a whole sample
        self._history: Dict[str, Deque[Sample]] = {}
        self._coord: Optional[Coordinator] = None
        self._thread: Optional[LooperThread] = None
        self._logdir = logdir
        self._writer: Optional[SummaryWriter] = None  # opened at the first sample
        self._samples = 0  # samples taken: the step of TensorBoard's points

    def __repr__(self) -> str:
        running = self._thread is not None and self._thread.is_alive()
        with self._lock:
            queues = sorted(self._history)
        return (f"<QueueMonitor every {self._interval:g} s, {'running' if running else 'stopped'}"
                f", queues {queues}>")

    # -- running ------------------------------------------------------------------------------

    def start(self) -> "QueueMonitor":
        """Starts the sampling thread (does nothing if it is running). Returns ``self``."""
        if self._thread is not None:
            return self
        self._coord = Coordinator()
        self._thread = LooperThread(self._coord, self._interval, target=self._tick,
                                    args=(self._coord,))
        self._thread.name = "queuepipe/monitor"
        if self._user_coord is not None:
            self._user_coord.register_thread(self._thread)
        self._thread.start()
        return self

    def _tick(self, coord: Coordinator) -> None:
        if self._user_coord is not None and self._user_coord.should_stop():
            coord.request_stop()
            return
        self.sample()

    def stop(self) -> None:
        """Stops the sampling thread, waits for it, and takes a last sample. Idempotent.

        Blocks until the thread has ended (at most about 0.1 s plus one sample).

        Raises:
          Exception: whatever made a sample fail in the thread, re-raised here.
        """
        try:
            if self._thread is None:
                return
            coord, self._coord, self._thread = self._coord, None, None
            assert coord is not None  # made with the thread
            coord.request_stop()
            coord.join()
            self.sample()
        finally:
            with self._lock:
                writer, self._writer = self._writer, None
            if writer is not None:
                writer.close()

    @property
    def running(self) -> bool:
        """True while the sampling thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> "QueueMonitor":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- samples ------------------------------------------------------------------------------

    def sample(self) -> Dict[str, Sample]:
        """Reads every queue of the pipeline now and appends the readings to :attr:`history`.

        Returns:
          queue name -> this sample.
        """
        taken = {}
        with self._lock:  # one sample at a time, so each queue's history stays in time order
            for queue in self._pipeline.queues:
                stats = queue.stats()
                taken[queue.name] = Sample(
                    time.monotonic(), stats["size"], stats["capacity"], stats["enqueued"],
                    stats["dequeued"], stats["consumer_wait_secs"], stats["producer_wait_secs"])
            previous = {name: self._history[name][-1] for name in taken
                        if self._history.get(name)}
            for name, sample in taken.items():
                if name not in self._history:
                    self._history[name] = deque(maxlen=self._history_size)
                self._history[name].append(sample)
            if self._logdir is not None:
                if self._writer is None:
                    self._writer = SummaryWriter(self._logdir)
                self._writer.scalars(_summaries(taken, previous), step=self._samples)
            self._samples += 1
        return taken

    @property
    def history(self) -> Dict[str, List[Sample]]:
        """queue name -> its samples, oldest first (a copy), queues in pipeline order."""
        with self._lock:
            return {name: list(samples) for name, samples in self._history.items()}

    def rates(self, window: Optional[float] = None) -> Dict[str, QueueRates]:
        """What each queue did over the last ``window`` seconds of samples (all if None).

        Returns:
          queue name -> :class:`QueueRates`, for every queue sampled at least once.
        """
        out = {}
        for name, samples in self.history.items():
            if window is not None:
                samples = [s for s in samples if s.time >= samples[-1].time - window]
            out[name] = _rates(name, samples)
        return out

    # -- reports ------------------------------------------------------------------------------

    def table(self, window: Optional[float] = None) -> str:
        """A text table with one row per queue: fill, throughput and wait shares.

        Columns: ``size/cap``; ``fill`` (TF's ``fraction_of_N_full`` at the last sample) and
        ``mean fill`` over the window; elements enqueued and dequeued per second; and how long
        consumers (dequeues) and producers (enqueues) were blocked, in thread-seconds per second
        (summed over threads: two producers blocked all the time read 2.00).

        Args:
          window: seconds of history to summarise (the most recent); None for all of it.
        """
        rates = self.rates(window)
        if not rates:
            return "no samples yet: the pipeline has no queues, or the monitor has not sampled"
        span = max(r.seconds for r in rates.values())
        header = ("queue", "size/cap", "fill", "mean fill", "enqueued/s", "dequeued/s",
                  "consumers blocked s/s", "producers blocked s/s")
        rows = [header] + [
            (r.queue, f"{r.size}/{r.capacity}", f"{r.fill:.2f}", f"{r.mean_fill:.2f}",
             f"{r.enqueued_per_sec:.1f}", f"{r.dequeued_per_sec:.1f}",
             f"{r.consumer_wait_share:.2f}", f"{r.producer_wait_share:.2f}")
            for r in rates.values()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [f"queue statistics over {span:.1f} s "
                 f"({max(r.samples for r in rates.values())} samples)"]
        for row in rows:
            lines.append("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                   for i, (cell, w) in enumerate(zip(row, widths))))
        return "\n".join(lines)

    def input_bound(self, queue: Optional[str] = None, *, window: Optional[float] = None,
                    wait_threshold: float = 0.5, fill_threshold: float = 0.2) -> Verdict:
        """Says whether the consumer of ``queue`` is starved by its producers, and why.

        Input-bound means: the queue was on average less than ``fill_threshold`` full AND its
        consumers spent more than ``wait_threshold`` of the time blocked on dequeue. A queue
        that stays nearly full (mean fill above ``1 - fill_threshold``) means the consumer
        (the training step) is the slow part.

        Args:
          queue: the queue to judge (its name); None takes the pipeline's last queue, the one
            closest to the trainer (the batch queue, for a pipeline built by ``*batch*``).
          window: seconds of history to judge (the most recent); None for all of it.
          wait_threshold: share of the time spent waiting above which the consumer starves.
          fill_threshold: mean fill fraction below which the queue counts as mostly empty.

        Returns:
          A :class:`Verdict`: true when input-bound; ``reason`` explains it with the figures.

        Raises:
          KeyError: no queue of that name has been sampled.
        """
        rates = self.rates(window)
        if not rates:
            return Verdict(False, "cannot tell: no queue has been sampled yet", None)
        name = queue if queue is not None else list(rates)[-1]
        if name not in rates:
            raise KeyError(f"queue {name!r} has not been sampled; sampled queues: {list(rates)}")
        r = rates[name]
        if r.samples < 2 or r.seconds <= 0:
            return Verdict(False, f"cannot tell: queue '{name}' has {r.samples} sample(s); "
                                  "need two at different times", name)
        figures = (f"queue '{name}' was on average {r.mean_fill:.0%} full and its consumers "
                   f"spent {r.consumer_wait_share:.0%} of the {r.seconds:.1f} s blocked on "
                   "dequeue")
        if r.mean_fill < fill_threshold and r.consumer_wait_share > wait_threshold:
            upstream = [f"'{q}' {u.mean_fill:.0%}" for q, u in rates.items() if q != name]
            where = (f"; the other queues were on average {', '.join(upstream)} full (one "
                     "that stays full points at the stage reading from it)" if upstream else "")
            return Verdict(True, f"input-bound: {figures}, so the producers (reading, parsing) "
                                 "do not keep up: add reader/batching threads, or make parsing "
                                 f"cheaper{where}", name)
        if r.mean_fill > 1 - fill_threshold:
            return Verdict(False, f"not input-bound: {figures}; the queue stays full, so the "
                                  "consumer (the training step) is the slow part", name)
        return Verdict(False, f"not input-bound: {figures} (input-bound needs a mean fill "
                              f"under {fill_threshold:.0%} and waiting over "
                              f"{wait_threshold:.0%})", name)

    def plot(self, path: str, title: Optional[str] = None) -> str:
        """Draws each queue's fill fraction over time to a PNG file.

        Uses matplotlib's Agg canvas directly, so it works without a display and leaves
        pyplot's state alone.

        Args:
          path: the PNG file to write.
          title: the figure title; a default names the monitor's span.

        Returns:
          ``path``.

        Raises:
          ImportError: matplotlib is not installed (``pip install '<queuepipe checkout>[plot]'``).
        """
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as e:
            raise ImportError("QueueMonitor.plot needs matplotlib: "
                              "pip install '<queuepipe checkout>[plot]'") from e
        history = self.history
        start = min((s[0].time for s in history.values()), default=0.0)
        figure = Figure(figsize=(8, 4.5), dpi=100)
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        for name, samples in history.items():
            axes.plot([s.time - start for s in samples], [s.fill for s in samples],
                      marker="." if len(samples) < 50 else None,
                      label=f"{name} (capacity {samples[-1].capacity})")
        axes.set_title(title or "queuepipe: queue fill over time (fraction_of_N_full)")
        axes.set_xlabel("seconds since the first sample")
        axes.set_ylabel("fill fraction (size / capacity)")
        axes.set_ylim(-0.02, 1.05)
        axes.grid(True, alpha=0.3)
        if history:
            axes.legend(loc="best", fontsize="small")
        figure.tight_layout()
        figure.savefig(path, format="png")
        return path
