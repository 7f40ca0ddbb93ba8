"""``Batches``: the consumer's iterator of batches, the runners it owns, and its state."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional

from queuepipe.batching._arguments import _Structure
from queuepipe.batching._deferred import _DeferredQueue
from queuepipe.coordinator import Coordinator
from queuepipe.errors import DeadlineExceededError, InvalidArgumentError, OutOfRangeError
from queuepipe.monitor import QueueMonitor
from queuepipe.runner import Pipeline, QueueRunner, RunnerGroup

_log = logging.getLogger(__name__)

# The state of a seeded batching function: the batches delivered, passed over on resuming.
_REPLAY_FORMAT = "queuepipe.batches/replay-1"

# How long stopping waits for runner threads before it names the ones still alive.
STOP_GRACE_PERIOD_SECS = 10.0

# Forks of this process so far, counted in each child: a Batches built before the last one
# belongs to an ancestor (a dequeue compares two ints, not os.getpid(), a system call).
_forks = [0]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _forks.__setitem__(0, _forks[0] + 1))


class Batches:
    """An iterator of NumPy batches taken from a batching function's queue.

    Each batch has the structure of the producer's elements (tuple, list, dict or single value),
    every component stacked along a new leading axis (object arrays of ``bytes`` for strings).

    Starting and stopping: if the pipeline's QueueRunners were not started when the first batch
    is requested, this object starts all of them under its own
    :class:`~queuepipe.coordinator.Coordinator`, and it stops and joins them when the input
    ends, when :meth:`close` is called, or when a dequeue fails (a runner's error, Ctrl-C). If
    they were already started (``qp.start_queue_runners(coord)``, ``with qp.running():``), the
    caller's coordinator owns them and this object only dequeues. Use it as a context manager to
    stop it whatever happens::

        with qp.train.batch(producer, 32) as batches:
            for images, labels in batches:
                ...

    Ownership: a :class:`Batches` owns a :class:`~queuepipe.runner.RunnerGroup`: its own
    runner and the runners built on its pipeline since the previous batching function (its
    producer's filename queue, ...). The first one to start starts every runner of the
    pipeline, each under the coordinator of the group that owns it; each stops only its own
    group. So several :class:`Batches` on one pipeline (a train and an eval stream) each run
    to their own end. One that is garbage-collected, or still running when the process exits,
    stops and joins its threads from a finalizer and warns (``ResourceWarning``) that it was
    not closed. One garbage-collected before it started its runners (a notebook cell run
    again) closes its queue, so that its runner takes nothing more from the producers it
    shares with the next one: no later start runs it.

    A :class:`Batches` belongs to the process that built it: after a ``fork`` the child has
    none of its threads, and a dequeue there raises ``RuntimeError``.
    """

    def __init__(self, queue: _DeferredQueue, runner: QueueRunner, pipeline: Pipeline,
                 batch_size: int, allow_smaller_final_batch: bool,
                 structure: _Structure) -> None:
        self._queue = queue
        self._runner = runner
        self._pipeline = pipeline
        self._batch_size = batch_size
        self._allow_smaller = allow_smaller_final_batch
        self._structure = structure
        self._lock = threading.Lock()
        self._checked_start = False
        self._owner = False  # True once this object runs its group (not the caller's coord)
        self._group = RunnerGroup(pipeline, queue.name)
        pipeline.claim(self._group)
        self._raised: Optional[BaseException] = None
        self._pid = os.getpid()
        self._forks = _forks[0]
        self._length: Optional[int] = None  # batches in all, where known (read_batch_features)
        self._saver: Any = None  # keeps the state, where there is one (read_batch_features)
        self._replayable = False  # seeded: a state is the number of batches delivered
        self._delivered = 0
        self._handed = False  # the last batch taken was returned, not yet counted delivered
        self._replay = 0  # batches a loaded state says to pass over before the next one
        self._on_stop: List[Callable[[], None]] = []  # closers of what the runners used
        self._monitors: List[QueueMonitor] = []  # the one monitor() started, if any
        # Kept alive by weakref itself until detached: once the group is stopped, or its
        # registry (a root) would keep alive what the group reaches, this object too (by the
        # traceback of a runner's error that a dequeue raised here), and the files it read.
        self._finalizer = weakref.finalize(self, _stop_abandoned, self._group, self._on_stop,
                                           queue, self._monitors)

    @property
    def queue(self) -> Any:
        """The batch queue (built from the first element; ``stats()`` works before)."""
        return self._queue

    @property
    def batch_size(self) -> int:
        """The number of elements in each batch (the last may be smaller when allowed)."""
        return self._batch_size

    @property
    def coord(self) -> Optional[Coordinator]:
        """The Coordinator of the runners this object owns, or None while none of them runs
        under it (not started yet, or started by the caller's coordinator)."""
        return self._group.coord if self._group.started else None

    def monitor(self, logdir: Optional[str] = None, interval: float = 1.0) -> QueueMonitor:
        """Starts a :class:`~queuepipe.monitor.QueueMonitor` of this pipeline's queues, owned
        by these batches: it stops (taking a last sample, closing its event file) when they
        end, whichever way: the input is exhausted, a dequeue fails (a runner's error,
        Ctrl-C), :meth:`close` or the end of a ``with`` block, or garbage collection. No
        thread of it outlives them::

            batches = qp.train.shuffle_batch(parse, 32, capacity=256, min_after_dequeue=64)
            monitor = batches.monitor(logdir="runs/input")   # tensorboard --logdir runs
            for batch in batches:
                train_step(batch)
            print(monitor.input_bound())

        Args:
          logdir: where to write TensorBoard event files (TF1's ``fraction_of_N_full`` tags
            and the monitor's rates, see ``docs/tensorboard.md``); None writes nothing (the
            monitor still keeps its samples for ``table()`` and ``input_bound()``).
          interval: seconds between two samples.

        Returns:
          The running monitor.

        Raises:
          RuntimeError: these batches already have a monitor, or have ended.
          ValueError: ``interval`` is not positive.
        """
        with self._lock:
            if self._monitors:
                raise RuntimeError(f"batches of queue '{self._queue.name}' already have a "
                                   "monitor: use the one monitor() returned")
            if self._group.stopped or self._queue.is_closed():
                raise RuntimeError(f"batches of queue '{self._queue.name}' have ended: start "
                                   "the monitor before taking the batches")
            monitor = QueueMonitor(self._pipeline, interval, logdir=logdir)
            self._monitors.append(monitor)
        monitor.start()
        return monitor

    def _stop_monitor(self, quiet: bool) -> None:
        """Stops the monitor, if any (once). ``quiet``: an error it raises is logged, not
        raised (another exception is on its way)."""
        try:
            _stop_monitors(self._monitors)
        except Exception:  # noqa: BLE001 - logged: the caller raises its own exception
            if not quiet:
                raise
            _log.debug("Ignored an error while stopping the monitor of '%s'",
                       self._queue.name, exc_info=True)

    def _ensure_started(self) -> None:
        """Starts the pipeline's runners if nobody did; decided once, at the first dequeue."""
        if self._checked_start:  # (set once, under the lock: read without it every batch)
            return
        with self._lock:
            if self._checked_start:
                return
            self._checked_start = True
            if self._queue.is_closed():  # the pipeline already ran: just drain
                return
            if self._runner.running and not self._group.started:
                return  # started under the caller's coordinator: only dequeue
            self._owner = True
        try:
            for thread in self._pipeline._start_runners(self._group):
                thread.start()
        except BaseException:  # Ctrl-C among the starts: stop what already runs
            with contextlib.suppress(Exception):
                self._stop()
            raise

    def _check_process(self) -> None:
        if _forks[0] != self._forks:
            raise RuntimeError(
                f"batches of queue '{self._queue.name}' were built in process {self._pid}; "
                f"this is process {os.getpid()}, a fork, where none of its threads run: build "
                f"the pipeline in the process that reads it")

    def dequeue(self, timeout: Optional[float] = None) -> Any:
        """Returns the next batch, blocking until it is complete.

        Args:
          timeout: seconds to wait; None waits forever.

        Returns:
          ``batch_size`` elements stacked (fewer for the final batch when
          ``allow_smaller_final_batch=True``), in the element's structure.

        Raises:
          OutOfRangeError: the input is exhausted and every batch was delivered (with
            ``allow_smaller_final_batch=False``, fewer than ``batch_size`` elements were left
            over and are dropped).
          DeadlineExceededError: ``timeout`` ran out; nothing was dequeued, and the pipeline
            keeps running.
          Exception: a producer's (or reader's) exception, as a copy chained to the original.
        """
        self._check_process()
        self._commit(now=False)
        self._ensure_started()
        while self._replay:  # a loaded replay state: the batches delivered before it
            self._take(None)
            self._replay -= 1
        # A batch counts as delivered only once this call has returned it (the next call,
        # or a state, counts it): a Ctrl-C landing anywhere before leaves it undelivered.
        try:
            batch = self._take(timeout)
            self._handed = True
            return batch
        except BaseException:
            self._handed = False
            self._structure.withhold()
            raise

    def _commit(self, now: bool = True) -> None:
        """Counts the batch the last dequeue returned as delivered; the structure may report
        it with the next few unless ``now`` (a state: every batch returned is reported). Whole
        whatever instant a Ctrl-C lands: the structure's commit may be done again, the count
        is one assignment."""
        if self._handed:
            self._structure.commit(now)
            self._delivered, self._handed = self._delivered + 1, False
        elif now:
            self._structure.commit(now)

    def _take(self, timeout: Optional[float]) -> Any:
        try:
            # (a batch the producers drew ahead and finished, picked up without the
            # queue's general dequeue: read_batch_features' consumer, every batch)
            built = self._queue.built
            batch = None if built is None else built._take_ahead(self._batch_size)
            if batch is None and self._allow_smaller:
                batch = self._queue.dequeue_up_to(self._batch_size, timeout=timeout)
            elif batch is None:
                batch = self._queue.dequeue_many(self._batch_size, timeout=timeout)
        except DeadlineExceededError:
            raise
        except OutOfRangeError:
            self._stop_monitor(quiet=True)  # first: its last sample still sees the queues
            self._stop()
            raise
        except BaseException as e:
            self._raised = e
            try:
                self._stop_monitor(quiet=True)
            finally:
                self._stop()
            raise
        return self._structure.restore(batch)

    def __iter__(self) -> "Batches":
        return self

    def __next__(self) -> Any:
        try:
            return self.dequeue()
        except OutOfRangeError:
            raise StopIteration from None

    def close(self) -> None:
        """Stops producing batches, and the :meth:`monitor` if there is one. Idempotent.

        Unless the caller's coordinator runs the pipeline, it stops the runners this object
        owns (requests stop, closes their queues cancelling pending enqueues) and joins their
        threads; the runners of other :class:`Batches` on the same pipeline go on. Under the
        caller's coordinator it closes its own queue, cancelling pending enqueues, and the
        files its runners read (``read_batch_features``: they stop at their next chunk), and
        leaves the rest to that coordinator.

        Raises:
          Exception: a runner's exception that no dequeue has raised yet.
          RuntimeError: a thread did not stop within ``STOP_GRACE_PERIOD_SECS``.
        """
        with self._lock:
            foreign = self._checked_start and not self._owner
        try:
            self._stop_monitor(quiet=False)  # first: its last sample still sees the queues
        finally:
            if foreign:
                try:
                    self._queue.close(cancel_pending_enqueues=True)
                finally:
                    _close_all(self._on_stop)
            else:
                self._stop_group()

    def _stop(self) -> None:
        """At the end of the input or on a failed dequeue: stops the runners this object
        owns, if it started them (never those of the caller's coordinator)."""
        if self._owner:
            self._stop_group()

    def _stop_group(self) -> None:
        """Stops the runners this object owns (once), joins their threads, and closes what
        they read from."""
        try:
            self._group.stop(STOP_GRACE_PERIOD_SECS)
        except Exception as e:  # noqa: BLE001 - re-raised unless the consumer already has it
            raised = self._raised
            if raised is None or (raised is not e and raised.__cause__ is not e):
                raise
        finally:
            if self._group.stopped:
                self._finalizer.detach()
            _close_all(self._on_stop)

    def state_dict(self) -> Dict[str, Any]:
        """Where the input is: a small JSON-serialisable dict.

        Taken after batch ``k`` (between two batches, on the thread that takes them) and
        given to :meth:`load_state_dict` of the same pipeline built in a new process, the
        pipeline goes on with exactly the records this one would deliver after batch ``k``:
        every record of the epoch once over the two runs, and with a ``seed`` the very same
        batches.

        * :func:`read_batch_features`: the epoch, the cursor in the files, the records read
          and not delivered (as positions in the files, never their data) and the shuffle's
          state; its size grows with the queue's capacity, never with the data (about 28 KB
          for a 10,000-element shuffle queue, a few KB with ``shuffle="global"``). Resuming
          reads only the records not delivered.
        * A seeded shuffle batching function (``shuffle_batch(seed=...)`` and kin), or a
          ``batch`` with one thread: the number of batches delivered. Its producers are
          functions, whose position cannot be saved; but its batches are then a function of
          the seeds and the input, so resuming passes over that many batches first (it costs
          the time they took). Its producers must repeat too: an input producer upstream
          that shuffles without a seed is refused.

        Raises:
          TypeError: these batches have no state: an unseeded batching function's with
            several threads, or one fed by an unseeded shuffling producer.
        """
        self._commit()  # the batch returned last is the caller's
        if self._saver is None and self._replayable:
            shuffled = [runner.name for runner in self._group._runners
                        for op in runner.enqueue_ops if not getattr(op, "repeatable", True)]
            if shuffled:
                raise TypeError(
                    f"batches of queue '{self._queue.name}' cannot be replayed: producer "
                    f"'{shuffled[0]}' upstream shuffles without a seed, so a new process "
                    f"would see another order; give it a seed")
            return {"format": _REPLAY_FORMAT, "batches": self._delivered,
                    "batch_size": self._batch_size}
        return self._state_keeper().state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Resumes from a :meth:`state_dict` saved by the same pipeline (same files and
        arguments), before the first batch is taken.

        Raises:
          TypeError: these batches have no state.
          RuntimeError: a batch was already taken.
          InvalidArgumentError: the state is not one of this pipeline's.
        """
        keeper = self._saver if self._saver is not None or not self._replayable \
            else None
        if keeper is None:
            if not isinstance(state, dict) or state.get("format") != _REPLAY_FORMAT \
                    or state.get("batch_size") != self._batch_size:
                raise InvalidArgumentError(
                    f"not a state of these batches ({_REPLAY_FORMAT}, batch_size "
                    f"{self._batch_size}): {str(state)[:80]!r}")
        else:
            keeper = self._state_keeper()
        with self._lock:
            if self._checked_start:
                raise RuntimeError("load_state_dict: load the state before the first batch")
            if keeper is None:
                self._replay = self._delivered = int(state["batches"])
        if keeper is not None:
            keeper.load_state_dict(state)

    def _state_keeper(self) -> Any:
        if self._saver is None:
            raise TypeError(
                f"batches of queue '{self._queue.name}' have no state: an unseeded batching "
                f"function's order depends on its threads' timing, and a producer function's "
                f"position cannot be saved; give a seed (its state is then the number of "
                f"batches delivered), or use read_batch_features")
        return self._saver

    def __enter__(self) -> "Batches":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never hide the exception of the with-body
            _log.debug("Ignored an error while closing batches after %r", exc, exc_info=True)

    def __len__(self) -> int:
        """The number of batches in all, where it is known: ``read_batch_features`` with
        ``num_epochs`` set and an up-to-date ``.index`` beside every file (``write_shards``
        and ``queuepipe index`` write them).

        Raises:
          TypeError: the number is not known (a producer function, no index, endless input).
        """
        if self._length is None:
            raise TypeError("the number of these batches is not known: len() is given for "
                            "read_batch_features with num_epochs set and an up-to-date .index "
                            "beside every file")
        return self._length

    def __bool__(self) -> bool:
        return True  # not len(): an iterator is true, whether or not its length is known

    def __repr__(self) -> str:
        return (f"<Batches of {self._batch_size} from {self._queue!r}"
                f"{', owns its runners' if self._group.started else ''}>")


def _close_all(closers: List[Callable[[], None]]) -> None:
    """Runs and forgets each closer, even when one raises (the first error is raised)."""
    with contextlib.ExitStack() as stack:
        for close in closers:
            stack.callback(close)
        closers.clear()


def _stop_monitors(monitors: List[QueueMonitor]) -> None:
    """Stops and forgets each monitor (its thread joined, its event file closed); each is
    stopped by one caller, whichever threads call this together."""
    while True:
        try:
            monitor = monitors.pop()
        except IndexError:
            return
        monitor.stop()


def _stop_abandoned(group: RunnerGroup, on_stop: List[Callable[[], None]],
                    queue: _DeferredQueue, monitors: List[QueueMonitor]) -> None:
    """The finalizer of a :class:`Batches`: stops its monitor, and the runners it owns if
    nobody closed it."""
    try:
        _stop_monitors(monitors)
    except Exception:  # noqa: BLE001 - nobody is left to raise it to
        _log.debug("Ignored an error while stopping the monitor of abandoned batches '%s'",
                   group.name, exc_info=True)
    if group.stopped:
        return
    if not group.started:
        # Never run by this object (dropped before its first batch, or run by the caller's
        # coordinator): nobody can read its queue now. Closed, it stops its runner from
        # draining the producers it shares, and the next start forgets that runner; the
        # runners it read from stay, for whoever starts the pipeline next.
        queue.close(cancel_pending_enqueues=True)
        group.release()
        return
    warnings.warn(f"batches of queue '{group.name}' were not closed: their threads are "
                  f"stopped now; close them, or use `with`", ResourceWarning, stacklevel=2)
    try:
        try:
            group.stop(STOP_GRACE_PERIOD_SECS)
        finally:
            _close_all(on_stop)
    except Exception:  # noqa: BLE001 - nobody is left to raise it to
        _log.debug("Ignored an error while stopping abandoned batches '%s'", group.name,
                   exc_info=True)
