"""QueueRunner: the threads that fill a queue, and the Pipeline that collects them.

A :class:`QueueRunner` owns a queue and a list of enqueue ops (zero-argument callables, each
performing one enqueue). It runs every op in its own thread, in a loop, until the input is
exhausted, the queue is closed, or a :class:`~queuepipe.coordinator.Coordinator` says stop, and
it makes sure the queue is closed afterwards, so that no consumer waits forever. A
:class:`Pipeline` plays the role of TensorFlow's graph: producers and batching functions add
their QueueRunners to the default Pipeline, and :func:`start_queue_runners` starts them all.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Type

from queuepipe.coordinator import Coordinator
from queuepipe.errors import CancelledError, OutOfRangeError

__all__ = ["QueueRunner", "RunnerGroup", "Pipeline", "get_default_pipeline",
           "add_queue_runner", "start_queue_runners"]

_log = logging.getLogger(__name__)


# What a user's function may raise that a runner takes for the end of its input or a closed
# queue. Only a producer ends its input (by raising OutOfRangeError; CancelledError when the
# queue it reads closes): raised by any other function of the user (keep_input, parse_fn), or
# StopIteration by any (a next() past the end, PEP 479's problem), it is a failure.
END_LOOKALIKES = (StopIteration, OutOfRangeError, CancelledError)


def not_an_end(e: BaseException, what: str) -> RuntimeError:
    """The failure to raise (``from e``) when ``what``, a user's function named with its
    queue, raised ``e``, one of :data:`END_LOOKALIKES`, which must not end the input quietly
    (nor leave a seeded pipeline waiting for the turn of the chunk it dropped)."""
    if isinstance(e, StopIteration):
        why = ("(a next() past the end of an iterator?): a producer ends its input by raising "
               "OutOfRangeError")
    else:
        why = f"({str(e)[:80]!r}): only the producer ends the input, by raising OutOfRangeError"
    return RuntimeError(f"{what} raised {type(e).__name__}, an error, not the end of the "
                        f"input {why}")


def _run_ignoring_errors(op: Callable[[], Any], what: str) -> None:
    """Runs a close or cancel op; like TF, an error there is logged and ignored."""
    try:
        op()
    except Exception as e:  # noqa: BLE001 - closing is best effort, the queue may be gone
        _log.debug("Ignored exception from %s: %s", what, e)


class QueueRunner:
    """Holds a queue and the enqueue ops that fill it, and runs each op in its own thread.

    Usage:

    .. code-block:: python

        import itertools
        import queuepipe as qp

        queue = qp.FIFOQueue(capacity=4, dtypes=[qp.int64], name="numbers")
        counter = itertools.count()

        def enqueue_next():
            n = next(counter)
            if n >= 10:
                raise qp.OutOfRangeError("no more numbers")  # the runner then closes the queue
            queue.enqueue(n)

        runner = qp.QueueRunner(queue, [enqueue_next])
        coord = qp.Coordinator()
        threads = runner.create_threads(coord, start=True)
        print(sorted(int(queue.dequeue()) for _ in range(10)))   # [0, 1, ..., 9]
        coord.request_stop()
        coord.join(threads)

    Each thread calls its enqueue op again and again. It ends quietly when the op raises one of
    ``queue_closed_exception_types`` (by default :class:`OutOfRangeError`, "my input is
    exhausted", and :class:`CancelledError`, "the queue was closed"); the LAST thread of the
    runner to end that way runs ``close_op`` (by default ``queue.close()``), so consumers drain
    what is left and then get ``OutOfRangeError``. A thread also ends when its coordinator says
    stop.

    Exception handling:

    Any other exception ``e`` in an enqueue op (any ``BaseException``, ``SystemExit``
    included) ends its thread and is not lost: it is appended to :attr:`exceptions_raised`,
    passed to ``coord.request_stop(e)`` (so every thread of the pipeline stops and
    ``coord.join()`` re-raises it), and given to ``queue.abort(e)``: the queue is closed with its
    pending enqueues cancelled, and a consumer's dequeue, once the queue is drained, raises a
    copy of ``e`` chained to it instead of a bare "closed". It is logged at debug level only:
    the consumer's exception is where the user sees it, once. A custom ``cancel_op`` runs as
    well. A ``StopIteration`` (a ``next()`` past the end, in the op or a function it calls)
    is such a failure too, raised as a ``RuntimeError`` chained to it, unless
    ``queue_closed_exception_types`` names it: an end taken from it would end a consumer's
    ``for`` loop quietly.

    Stopping:

    With a coordinator, :meth:`create_threads` adds one more thread that waits for the stop and
    then wakes every thread blocked on the queue: it calls ``queue.abort(exc)`` when the
    coordinator holds an exception ``exc``, and runs ``cancel_op`` (by default
    ``queue.close(cancel_pending_enqueues=True)``) otherwise or when a custom one was given.
    """

    def __init__(self, queue: Any, enqueue_ops: Sequence[Callable[[], Any]],
                 close_op: Optional[Callable[[], Any]] = None,
                 cancel_op: Optional[Callable[[], Any]] = None,
                 queue_closed_exception_types: Optional[Sequence[Type[BaseException]]] = None):
        """Creates a QueueRunner; it starts no thread.

        Args:
          queue: the queue the ops fill.
          enqueue_ops: zero-argument callables, each performing one enqueue; one thread each.
          close_op: zero-argument callable run by the last thread to end quietly. Defaults to
            ``queue.close()``.
          cancel_op: zero-argument callable run when the pipeline stops or an op fails.
            Defaults to ``queue.close(cancel_pending_enqueues=True)``.
          queue_closed_exception_types: exception types on which a thread ends quietly.
            Defaults to ``(OutOfRangeError, CancelledError)``.

        Raises:
          ValueError: ``enqueue_ops`` or ``queue_closed_exception_types`` is empty.
          TypeError: an enqueue op is not callable, or an exception type is not a type of
            exception.
        """
        enqueue_ops = list(enqueue_ops)
        if not enqueue_ops:
            raise ValueError(f"QueueRunner for queue '{queue.name}' needs at least one enqueue "
                             "op, got none")
        for i, op in enumerate(enqueue_ops):
            if not callable(op):
                raise TypeError(f"enqueue op {i} of QueueRunner for queue '{queue.name}' must "
                                f"be a zero-argument callable, got {op!r}")
        if queue_closed_exception_types is None:
            queue_closed_exception_types = (OutOfRangeError, CancelledError)
        queue_closed_exception_types = tuple(queue_closed_exception_types)
        if not queue_closed_exception_types:
            raise ValueError("queue_closed_exception_types must name at least one exception "
                             "type, got ()")
        for t in queue_closed_exception_types:
            if not (isinstance(t, type) and issubclass(t, BaseException)):
                raise TypeError("queue_closed_exception_types must hold exception types, "
                                f"got {t!r}")
        self._queue = queue
        self._enqueue_ops = enqueue_ops
        self._close_op = close_op if close_op is not None else queue.close
        self._custom_cancel_op = cancel_op
        self._cancel_op = (cancel_op if cancel_op is not None
                           else functools.partial(queue.close, cancel_pending_enqueues=True))
        self._queue_closed_exception_types = queue_closed_exception_types
        # Guards _runs, _exceptions_raised and _told_started.
        self._lock = threading.Lock()
        self._runs = 0  # enqueue threads created and not yet ended
        self._exceptions_raised: List[BaseException] = []
        self._told_started = False
        queue._runner_added()

    @property
    def queue(self) -> Any:
        """The queue this runner fills."""
        return self._queue

    @property
    def name(self) -> str:
        """The queue's name."""
        return self._queue.name

    @property
    def enqueue_ops(self) -> List[Callable[[], Any]]:
        """The enqueue ops, one thread each."""
        return list(self._enqueue_ops)

    @property
    def close_op(self) -> Callable[[], Any]:
        """The op the last thread runs when the input is exhausted."""
        return self._close_op

    @property
    def cancel_op(self) -> Callable[[], Any]:
        """The op run on stop or failure to wake everything blocked on the queue."""
        return self._cancel_op

    @property
    def queue_closed_exception_types(self) -> tuple:
        """The exception types on which a thread ends quietly."""
        return self._queue_closed_exception_types

    @property
    def running(self) -> bool:
        """True from :meth:`create_threads` until the last of those threads has ended."""
        with self._lock:
            return self._runs > 0

    @property
    def exceptions_raised(self) -> List[BaseException]:
        """The exceptions raised by the enqueue ops since the threads were last created."""
        with self._lock:
            return list(self._exceptions_raised)

    def _tell_queue_started(self) -> None:
        with self._lock:
            told, self._told_started = self._told_started, True
        if not told:
            self._queue._runner_started()

    def _run(self, enqueue_op: Callable[[], Any], coord: Optional[Coordinator]) -> None:
        """Body of an enqueue thread: calls the op until the input or the pipeline ends."""
        ended_quietly = False
        try:
            self._tell_queue_started()
            while coord is None or not coord.should_stop():
                enqueue_op()
        except self._queue_closed_exception_types:
            ended_quietly = True
        except StopIteration as e:  # unless named above, never an end: see END_LOOKALIKES
            failure = not_an_end(e, f"an enqueue op of queue '{self.name}'")
            failure.__cause__ = e
            self._fail(failure, coord)
        except BaseException as e:  # noqa: BLE001 - SystemExit too must reach the consumer
            self._fail(e, coord)
        finally:
            # Every way this thread ends is counted, so the last one is always known.
            with self._lock:
                self._runs -= 1
                last = self._runs == 0
            if last and ended_quietly:
                _run_ignoring_errors(self._close_op, f"close op of queue '{self.name}'")

    def _fail(self, e: BaseException, coord: Optional[Coordinator]) -> None:
        """Sends an enqueue op's exception to the coordinator and to the queue's consumers.

        Any ``BaseException`` counts (``SystemExit``, ``GeneratorExit``, a custom one): if it
        ended the thread silently, a consumer would wait forever on a queue nobody fills."""
        with self._lock:
            self._exceptions_raised.append(e)
        # At debug level: the error reaches the user once, as the consumer's exception (and
        # coord.join's); an error log per failing thread repeated it.
        _log.debug("Exception in QueueRunner of queue '%s': %s: %s", self.name,
                   type(e).__name__, e, exc_info=e)
        if coord is not None and not coord.joined:
            coord.request_stop(e)
        self._queue.abort(e)
        if self._custom_cancel_op is not None:
            _run_ignoring_errors(self._custom_cancel_op, f"cancel op of queue '{self.name}'")

    def _close_on_stop(self, coord: Coordinator) -> None:
        """Body of the close-on-stop thread: wakes every thread blocked on the queue."""
        coord.wait_for_stop()
        exception = coord.requested_exception
        if exception is not None:
            self._queue.abort(exception)
        if exception is None or self._custom_cancel_op is not None:
            _run_ignoring_errors(self._cancel_op, f"cancel op of queue '{self.name}'")

    def create_threads(self, coord: Optional[Coordinator] = None, daemon: bool = False,
                       start: bool = False) -> List[threading.Thread]:
        """Creates (and optionally starts) the threads that run the enqueue ops.

        One thread per enqueue op, named ``queuepipe/<queue name>/runner-<i>``, and, when
        ``coord`` is given, a thread ``queuepipe/<queue name>/close-on-stop`` that wakes
        everything blocked on the queue once the coordinator stops. All are registered with
        ``coord``. If this runner's enqueue threads from an earlier call are still running, no
        new threads are made and the result is empty.

        Args:
          coord: the Coordinator that stops the threads and collects their errors.
          daemon: make the threads daemon threads (a backstop, not a way to stop them).
          start: start the threads before returning.

        Returns:
          The new threads (empty if this runner's threads are still running).
        """
        with self._lock:
            if self._runs > 0:
                return []
            self._runs = len(self._enqueue_ops)
            self._exceptions_raised = []
        prefix = f"queuepipe/{self.name}"
        threads = [threading.Thread(target=self._run, args=(op, coord), daemon=daemon,
                                    name=f"{prefix}/runner-{i}")
                   for i, op in enumerate(self._enqueue_ops)]
        if coord is not None:
            threads.append(threading.Thread(target=self._close_on_stop, args=(coord,),
                                            daemon=daemon, name=f"{prefix}/close-on-stop"))
        for thread in threads:
            if coord is not None:
                coord.register_thread(thread)
            if start:
                thread.start()
        return threads


class RunnerGroup:
    """The QueueRunners one owner starts, stops and joins together, under one Coordinator.

    A :class:`~queuepipe.batching.Batches` owns a group: its own runner, and the runners its
    producer reads from (see :meth:`Pipeline.claim`). Stopping a group stops those runners
    and no others, so two pipelines built on one :class:`Pipeline` (a train and an eval
    stream) end independently. A group holds no reference to its owner, so an owner that is
    garbage-collected can still stop its group from a finalizer.

    Args:
      pipeline: the pipeline the runners belong to; a stopped group's runners leave it.
      name: for messages and warnings (the owner's queue name).
    """

    def __init__(self, pipeline: "Pipeline", name: str) -> None:
        self._pipeline = pipeline
        self.name = name
        self.coord = Coordinator()
        # Guards _runners, _threads and _stopped.
        self._lock = threading.Lock()
        self._runners: List[QueueRunner] = []
        self._threads: List[threading.Thread] = []
        self._stopped = False

    @property
    def started(self) -> bool:
        """True once threads of this group's runners were created."""
        with self._lock:
            return bool(self._threads)

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopped

    def _add(self, runner: QueueRunner) -> None:
        with self._lock:
            self._runners.append(runner)

    def _create_threads(self, runner: QueueRunner) -> List[threading.Thread]:
        """Creates (without starting) ``runner``'s threads under this group's coordinator;
        none once the group is stopped."""
        with self._lock:
            if self._stopped:
                return []
            threads = runner.create_threads(self.coord, daemon=True)
            self._threads.extend(threads)
            return threads

    def stop(self, stop_grace_period_secs: float) -> None:
        """Stops this group's runners and joins their threads; idempotent.

        Requests stop of the group's coordinator, closes each runner's queue cancelling
        pending enqueues (so that no thread stays blocked), joins the threads (all but the
        calling one, when a finalizer runs in one of them) and removes the runners from the
        pipeline, so that no later start restarts them.

        Raises:
          Exception: a runner's exception, re-raised by the coordinator's join.
          RuntimeError: a thread did not end within the grace period.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            runners, threads = list(self._runners), list(self._threads)
        try:
            self.coord.request_stop()
            for runner in runners:
                runner.queue.close(cancel_pending_enqueues=True)
            current = threading.current_thread()
            self.coord.join([t for t in threads if t is not current],
                            stop_grace_period_secs=stop_grace_period_secs)
        finally:
            self._pipeline._forget(runners)

    def release(self) -> None:
        """Gives up the runners without stopping them: whoever starts the pipeline next
        owns them. For an owner that goes away before it started anything."""
        with self._lock:
            runners, self._runners = self._runners, []
        self._pipeline._disown(self, runners)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "started" if self._threads else "not started"
        return f"<RunnerGroup '{self.name}' of {len(self._runners)} runners, {state}>"


class Pipeline:
    """A collection of QueueRunners: what TensorFlow's graph was to queue runners.

    Producers and batching functions add the QueueRunner they build to the default Pipeline;
    :func:`start_queue_runners` then starts every runner of it. A module-level Pipeline is the
    default; ``with Pipeline().as_default():`` makes another one the default in this thread for
    the duration of the block (blocks nest), which keeps independent pipelines (and tests)
    apart.

    Usage:

    .. code-block:: python

        import queuepipe as qp

        pipeline = qp.Pipeline()
        with pipeline.as_default():
            queue = qp.range_input_producer(5, num_epochs=1, shuffle=False)
        coord = qp.Coordinator()
        threads = qp.start_queue_runners(coord, pipeline=pipeline)
        print([int(queue.dequeue()) for _ in range(5)])   # [0, 1, 2, 3, 4]
        coord.request_stop()
        coord.join(threads)
    """

    def __init__(self):
        # Guards _queue_runners and _owners.
        self._lock = threading.Lock()
        self._queue_runners: List[QueueRunner] = []
        self._owners: Dict[QueueRunner, RunnerGroup] = {}

    def __repr__(self) -> str:
        with self._lock:
            runners = list(self._queue_runners)
        running = sum(1 for qr in runners if qr.running)
        return (f"<Pipeline{' (default)' if self is _DEFAULT_PIPELINE else ''}: "
                f"{len(runners)} queue runner(s), {running} running; queues "
                f"{[qr.queue.name for qr in runners]}>")

    def add_queue_runner(self, qr: QueueRunner) -> None:
        """Adds ``qr`` to this pipeline (once; adding it again does nothing).

        Runners whose queue is closed and whose threads have all ended are forgotten first:
        they have nothing left to do, and a later start must not restart them (a failed
        pipeline would otherwise re-raise its old error in every pipeline after it).
        """
        if not isinstance(qr, QueueRunner):
            raise TypeError(f"add_queue_runner expects a QueueRunner, got {qr!r}")
        with self._lock:
            self._forget_finished()
            if qr not in self._queue_runners:
                self._queue_runners.append(qr)

    @property
    def queue_runners(self) -> List[QueueRunner]:
        """The QueueRunners of this pipeline, in the order they were added."""
        with self._lock:
            return list(self._queue_runners)

    def claim(self, group: RunnerGroup) -> None:
        """Gives ``group`` every runner of this pipeline that no group owns yet.

        A batching function calls this right after adding its own runner: the runners added
        since the previous batching function are the ones its producer was built on (its
        filename queue, ...). Build each pipeline's producers just before its batching call;
        runners built for another batching function that comes later would be claimed too.
        """
        with self._lock:
            for qr in self._queue_runners:
                if qr not in self._owners:
                    self._owners[qr] = group
                    group._add(qr)

    def _start_runners(self, default: RunnerGroup) -> List[threading.Thread]:
        """Creates the threads of every runner that has none running, each under its owning
        group's coordinator (``default`` takes the runners nobody owns); not started."""
        with self._lock:
            self._forget_finished()
            for qr in self._queue_runners:
                if qr not in self._owners:
                    self._owners[qr] = default
                    default._add(qr)
            owned = [(qr, self._owners[qr]) for qr in self._queue_runners]
        threads: List[threading.Thread] = []
        for qr, group in owned:
            if not qr.running:
                threads.extend(group._create_threads(qr))
        return threads

    def _disown(self, group: RunnerGroup, runners: Sequence[QueueRunner]) -> None:
        with self._lock:
            for qr in runners:
                if self._owners.get(qr) is group:
                    del self._owners[qr]

    def _forget(self, runners: Sequence[QueueRunner]) -> None:
        with self._lock:
            for qr in runners:
                self._owners.pop(qr, None)
                if qr in self._queue_runners:
                    self._queue_runners.remove(qr)

    def _forget_finished(self) -> None:
        """Drops the runners whose queue is closed and whose threads have ended (lock held)."""
        finished = [qr for qr in self._queue_runners
                    if qr.queue.is_closed() and not qr.running]
        for qr in finished:
            self._owners.pop(qr, None)
            self._queue_runners.remove(qr)

    @property
    def queues(self) -> list:
        """The queues of this pipeline's QueueRunners, each once, in the order they appeared."""
        queues: list = []
        for qr in self.queue_runners:
            if not any(q is qr.queue for q in queues):
                queues.append(qr.queue)
        return queues

    @contextlib.contextmanager
    def as_default(self) -> Iterator["Pipeline"]:
        """Makes this pipeline the default in the current thread inside a ``with`` block."""
        stack = _default_stack()
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()


_DEFAULT_PIPELINE = Pipeline()
_scopes = threading.local()


def _default_stack() -> List[Pipeline]:
    """This thread's stack of pipelines made default by ``as_default``."""
    if not hasattr(_scopes, "stack"):
        _scopes.stack = []
    return _scopes.stack


def get_default_pipeline() -> Pipeline:
    """The innermost pipeline of ``with Pipeline().as_default():`` in this thread, else the
    module-level default pipeline."""
    stack = _default_stack()
    return stack[-1] if stack else _DEFAULT_PIPELINE


def add_queue_runner(qr: QueueRunner, pipeline: Optional[Pipeline] = None) -> None:
    """Adds ``qr`` to ``pipeline`` (the default pipeline if None), as TF adds it to the graph."""
    (pipeline if pipeline is not None else get_default_pipeline()).add_queue_runner(qr)


def start_queue_runners(coord: Optional[Coordinator] = None, daemon: bool = True,
                        start: bool = True,
                        pipeline: Optional[Pipeline] = None) -> List[threading.Thread]:
    """Creates and starts the threads of every QueueRunner of a pipeline.

    Call it once the pipeline is built (producers, readers, batching) and before the first
    dequeue; a consumer waiting on a queue whose runners were never started is warned. Unlike
    TF, calling it again starts no duplicate threads for a runner whose threads are still
    running: only runners without live threads get new ones.

    Args:
      coord: the Coordinator that stops the threads; strongly recommended, since without one
        the threads stop only when their input ends or their queue is closed.
      daemon: make the threads daemon threads (a backstop: stop them with ``coord``).
      start: start the threads; if False they are only created.
      pipeline: the pipeline whose runners to start; the default pipeline if None.

    Returns:
      The threads created, for ``coord.join(threads)``.

    Raises:
      BaseException: whatever interrupted the start (``KeyboardInterrupt``, a thread that
        could not start), after the threads already running were stopped (``coord`` told to
        stop, every runner's cancel op run) and joined, so that none outlives the call.
    """
    pipeline = pipeline if pipeline is not None else get_default_pipeline()
    with pipeline._lock:
        pipeline._forget_finished()
    runners = pipeline.queue_runners
    if not runners:
        _log.warning("start_queue_runners: the pipeline has no QueueRunners, so no thread was "
                     "started; build the producers inside `with pipeline.as_default():` or "
                     "pass that pipeline as `pipeline=`")
    threads: List[threading.Thread] = []
    try:
        for qr in runners:
            threads.extend(qr.create_threads(coord, daemon=daemon, start=start))
    except BaseException:
        # Ctrl-C (or a failed thread start) part-way: the caller never gets the threads to
        # stop, so stop the ones already running here.
        _stop_started(runners, coord, threads)
        raise
    return threads


# How long start_queue_runners waits for the threads it started when starting was interrupted.
_START_ABORT_GRACE_SECS = 10.0


def _stop_started(runners: List[QueueRunner], coord: Optional[Coordinator],
                  threads: List[threading.Thread]) -> None:
    """Stops and joins the threads of an interrupted :func:`start_queue_runners`."""
    if coord is not None:
        coord.request_stop()
    for qr in runners:
        _run_ignoring_errors(qr.cancel_op, f"cancel op of queue '{qr.name}'")
    deadline = time.monotonic() + _START_ABORT_GRACE_SECS
    for thread in threads:
        if thread.is_alive():
            thread.join(max(0.0, deadline - time.monotonic()))
