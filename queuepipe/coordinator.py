"""Coordinator: stop a set of threads together, and report why they stopped.

A pipeline runs many threads (QueueRunner threads filling queues, the trainer consuming them).
When one of them fails, or the input is exhausted, or the user presses Ctrl-C, all of them must
stop, and the reason must reach the thread that waits for them. A :class:`Coordinator` is the
shared stop flag that makes this work, with TensorFlow's ``tf.train.Coordinator`` semantics.
:class:`LooperThread` is a thread that calls a function periodically until the coordinator
says stop.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Tuple, Type

from queuepipe.errors import OutOfRangeError

__all__ = ["Coordinator", "LooperThread"]

_log = logging.getLogger(__name__)

# Longest single uninterrupted wait. Every blocking wait in this module is a loop of waits no
# longer than this, so that Ctrl-C (KeyboardInterrupt) reaches the main thread promptly on
# every platform.
_WAIT_SLICE_SECS = 0.1


class Coordinator:
    """A coordinator for threads: one stop flag, the first error, and a join.

    Every thread checks :meth:`should_stop` in its loop and returns when it is true. Any thread
    may call :meth:`request_stop`, optionally with the exception that made it stop; the main
    thread then calls :meth:`join`, which waits for the threads and re-raises that exception.

    Usage:

    .. code-block:: python

        import threading
        import queuepipe as qp

        coord = qp.Coordinator()
        counts = []

        def worker(coord):
            with coord.stop_on_exception():
                while not coord.should_stop():
                    counts.append(1)
                    if len(counts) >= 100:
                        coord.request_stop()

        threads = [threading.Thread(target=worker, args=(coord,)) for _ in range(4)]
        for t in threads:
            t.start()
        coord.join(threads)   # returns once every thread has returned

    Exception handling:

    A thread reports an exception with ``coord.request_stop(e)``, or lets
    :meth:`stop_on_exception` do it::

        with coord.stop_on_exception():
            while not coord.should_stop():
                ...do some work...

    Only the FIRST exception reported while the coordinator is running is kept; later ones
    (and any reported after a plain ``request_stop()``) are dropped, because they are usually
    consequences of the first (for instance a consumer failing because its producer died).
    :meth:`join` re-raises the kept exception in the thread that calls it, with its original
    traceback. Exceptions of the clean-stop types (by default :class:`OutOfRangeError`: the
    input is exhausted) stop the coordinator without being recorded as an error.

    A ``KeyboardInterrupt`` is an exception like any other here: raised inside
    :meth:`stop_on_exception`, or while :meth:`join` waits, it requests stop with itself, so
    every thread winds down and :meth:`join` re-raises it.

    Grace period:

    After a stop is requested, :meth:`join` gives the threads ``stop_grace_period_secs`` to
    return. A thread still alive after that is reported: :meth:`join` raises ``RuntimeError``
    naming it (unless ``ignore_live_threads=True``), because a thread that ignores the stop
    flag is a bug (often a thread blocked on a queue that nobody closed). QueueRunner threads
    are woken by their close-on-stop thread, which cancels the queue when stop is requested.
    """

    def __init__(self, clean_stop_exception_types: Optional[Sequence[Type[BaseException]]] = None):
        """Creates a coordinator.

        Args:
          clean_stop_exception_types: exception types that stop the coordinator without being
            recorded as an error. Defaults to ``(OutOfRangeError,)``.
        """
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        # Guards _exception, _joined and _registered_threads.
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exception: Optional[BaseException] = None
        self._joined = False
        self._registered_threads: set = set()

    def __repr__(self) -> str:
        with self._lock:
            threads = sum(1 for t in self._registered_threads if t.is_alive())
            error = self._exception
        state = "stop requested" if self._stop_event.is_set() else "running"
        return (f"<Coordinator {state}, {threads} registered thread(s) alive"
                f"{f', error {type(error).__name__}: {error}' if error is not None else ''}>")

    def _as_exception(self, ex: Any) -> Optional[BaseException]:
        """Returns the exception instance in ``ex``, or None for no error or a clean stop."""
        if isinstance(ex, tuple):
            if len(ex) != 3:
                raise TypeError(f"ex must be an exception or a sys.exc_info() tuple, got {ex!r}")
            ex = ex[1]
        if ex is None:
            return None
        if not isinstance(ex, BaseException):
            raise TypeError(f"ex must be an exception or a sys.exc_info() tuple, got {ex!r}")
        if isinstance(ex, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex: Any = None) -> None:
        """Requests that the threads stop; never blocks.

        After this call :meth:`should_stop` returns True. The first exception reported while the
        coordinator is running is kept for :meth:`join` to re-raise; later ones are ignored.

        Args:
          ex: None, an exception, or a ``sys.exc_info()`` tuple. Exceptions of the clean-stop
            types request a stop without being recorded.

        Raises:
          BaseException: ``ex`` itself, if it is an error reported after :meth:`join` returned:
            nobody is left to report it, so it is raised here.
          TypeError: ``ex`` is neither an exception nor an exc_info tuple.
        """
        exception = self._as_exception(ex)
        with self._lock:
            if self._joined and exception is not None:
                raise exception
            if not self._stop_event.is_set():
                if exception is not None and self._exception is None:
                    _log.info("Error reported to Coordinator: %s: %s",
                              type(exception).__name__, exception)
                    self._exception = exception
                self._stop_event.set()

    def clear_stop(self) -> None:
        """Clears the stop flag and the recorded exception, so the coordinator can be reused."""
        with self._lock:
            self._joined = False
            self._exception = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        """True once a stop has been requested."""
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self) -> Iterator[None]:
        """Context manager that turns any exception in its body into :meth:`request_stop`.

        The exception (including ``KeyboardInterrupt`` and ``SystemExit``) is passed to
        ``request_stop`` and swallowed; :meth:`join` re-raises it in the joining thread. Use it
        as the body of a thread's ``run``::

            with coord.stop_on_exception():
                while not coord.should_stop():
                    ...do some work...
        """
        try:
            yield
        except BaseException:  # noqa: BLE001 - every exception must reach the coordinator
            self.request_stop(sys.exc_info())

    def wait_for_stop(self, timeout: Optional[float] = None) -> bool:
        """Blocks until a stop is requested or ``timeout`` seconds pass.

        The wait is made of short slices, so Ctrl-C interrupts it promptly.

        Args:
          timeout: seconds to wait at most; None waits without limit.

        Returns:
          True if a stop was requested, False if the timeout ran out first.
        """
        if timeout is None:
            while not self._stop_event.wait(_WAIT_SLICE_SECS):
                pass
            return True
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._stop_event.is_set()
            if self._stop_event.wait(min(remaining, _WAIT_SLICE_SECS)):
                return True

    def register_thread(self, thread: threading.Thread) -> None:
        """Registers ``thread`` so that :meth:`join` waits for it without being told."""
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads: Optional[Iterable[threading.Thread]] = None,
             stop_grace_period_secs: float = 120,
             ignore_live_threads: bool = False) -> None:
        """Waits for the threads to end, then re-raises the first reported exception.

        Blocks until every thread (the registered ones plus ``threads``) has ended or a stop is
        requested; then, if threads are still alive, gives them ``stop_grace_period_secs`` more
        to end. Threads registered after this call starts are not waited for. The wait is made
        of short slices: Ctrl-C interrupts it, requests stop with the ``KeyboardInterrupt``, and
        still waits the grace period (a second Ctrl-C cuts that short) before re-raising.

        Args:
          threads: threads to wait for besides the registered ones.
          stop_grace_period_secs: seconds the threads get to end after a stop is requested.
          ignore_live_threads: if True, threads alive after the grace period are logged
            instead of raising ``RuntimeError``.

        Raises:
          BaseException: the first exception passed to :meth:`request_stop`, re-raised.
          RuntimeError: no exception was reported but threads are still alive after the grace
            period; the message names them.
        """
        with self._lock:
            waited = list(self._registered_threads.union(threads or ()))

        def alive():
            return [t for t in waited if t.is_alive()]

        interrupt = None
        try:
            while alive() and not self.wait_for_stop(_WAIT_SLICE_SECS):
                pass
        except KeyboardInterrupt as e:
            interrupt = e
            self.request_stop(e)
        try:
            deadline = time.monotonic() + stop_grace_period_secs
            for thread in alive():
                while thread.is_alive() and time.monotonic() < deadline:
                    thread.join(min(_WAIT_SLICE_SECS, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt as e:
            interrupt = interrupt or e
        stragglers = [t.name for t in alive()]

        with self._lock:
            self._joined = True
            self._registered_threads = set()
            exception = self._exception if self._exception is not None else interrupt
        if exception is not None:
            raise exception
        if stragglers:
            message = "Coordinator stopped with threads still running: " + " ".join(stragglers)
            if not ignore_live_threads:
                raise RuntimeError(message)
            _log.info(message)

    @property
    def joined(self) -> bool:
        """True once :meth:`join` has returned (or raised), until :meth:`clear_stop`."""
        return self._joined

    @property
    def requested_exception(self) -> Optional[BaseException]:
        """The exception kept by :meth:`request_stop`, or None (a queuepipe addition)."""
        with self._lock:
            return self._exception

    def raise_requested_exception(self) -> None:
        """Re-raises the exception kept by :meth:`request_stop`, if there is one."""
        exception = self.requested_exception
        if exception is not None:
            raise exception


class LooperThread(threading.Thread):
    """A thread that runs code repeatedly, optionally on a timer, until its coordinator stops.

    Either pass ``target`` (called with ``args`` and ``kwargs`` on each iteration), or subclass
    and override :meth:`run_loop` (and optionally :meth:`start_loop` and :meth:`stop_loop`).
    The thread registers itself with the coordinator and is a daemon thread. An exception in
    the loop is reported to the coordinator, which stops it and every other thread.

    Usage:

    .. code-block:: python

        import queuepipe as qp

        coord = qp.Coordinator()
        ticks = []
        qp.LooperThread.loop(coord, 0.01, target=ticks.append, args=("tick",))
        coord.wait_for_stop(0.05)
        coord.request_stop()
        coord.join()
    """

    def __init__(self, coord: Coordinator, timer_interval_secs: Optional[float],
                 target: Optional[Callable[..., Any]] = None,
                 args: Optional[Sequence[Any]] = None,
                 kwargs: Optional[Mapping[str, Any]] = None):
        """Creates the thread; it does not start it.

        Args:
          coord: the :class:`Coordinator` that stops the loop.
          timer_interval_secs: seconds between the starts of two iterations, or None to
            iterate back to back.
          target: callable run on each iteration (if None, override :meth:`run_loop`).
          args: positional arguments for ``target``.
          kwargs: keyword arguments for ``target``.

        Raises:
          ValueError: ``coord`` is not a Coordinator, or ``args``/``kwargs`` without
            ``target``.
        """
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator, got {coord!r}")
        if target is None and (args or kwargs):
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        what = getattr(target, "__name__", None) or type(self).__name__
        super().__init__(name=f"queuepipe/looper/{what}", daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._loop_target = target
        self._loop_args: Tuple[Any, ...] = tuple(args or ())
        self._loop_kwargs = dict(kwargs or {})
        coord.register_thread(self)

    @classmethod
    def loop(cls, coord: Coordinator, timer_interval_secs: Optional[float],
             target: Callable[..., Any], args: Optional[Sequence[Any]] = None,
             kwargs: Optional[Mapping[str, Any]] = None) -> "LooperThread":
        """Starts a LooperThread that calls ``target(*args, **kwargs)`` periodically.

        Returns:
          The started thread, already registered with ``coord``.
        """
        looper = cls(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self) -> None:
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.monotonic()
                while not self._coord.wait_for_stop(next_time - time.monotonic()):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self) -> None:
        """Called once in the thread before the first iteration."""

    def stop_loop(self) -> None:
        """Called once in the thread after the last iteration."""

    def run_loop(self) -> None:
        """One iteration: calls ``target``, or does what a subclass puts here."""
        if self._loop_target is not None:
            self._loop_target(*self._loop_args, **self._loop_kwargs)
