"""``running()``: a ``with`` block that starts a pipeline's runners and stops them however
it ends."""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Iterator, List, Optional

from queuepipe.batching._batches import STOP_GRACE_PERIOD_SECS
from queuepipe.coordinator import Coordinator
from queuepipe.runner import Pipeline, get_default_pipeline, start_queue_runners

_log = logging.getLogger(__name__)


@contextlib.contextmanager
def running(pipeline: Optional[Pipeline] = None,
            coord: Optional[Coordinator] = None) -> Iterator[Coordinator]:
    """Runs a pipeline's QueueRunners for the duration of a ``with`` block.

    On entry it starts every runner of ``pipeline`` under ``coord``; on exit, however the block
    ends (normally, by an exception, by Ctrl-C), it requests stop, closes every queue of the
    pipeline cancelling pending enqueues, so that no thread stays blocked, and joins every
    thread.

    Usage::

        with qp.running() as coord:
            for images, labels in batches:
                train_step(images, labels)

    Args:
      pipeline: the pipeline to run; the default pipeline if None.
      coord: the Coordinator to use; a new one if None.

    Yields:
      The Coordinator.

    Raises:
      Exception: on a normal exit, a runner's exception (the first one), re-raised by
        ``coord.join``. When the block itself raised, that exception propagates and a runner's
        exception is only logged.
      RuntimeError: a thread did not stop within ``STOP_GRACE_PERIOD_SECS``.
    """
    pipeline = pipeline if pipeline is not None else get_default_pipeline()
    coord = coord if coord is not None else Coordinator()
    threads: List[threading.Thread] = []  # the coordinator joins those it registered, too
    try:
        threads = start_queue_runners(coord, pipeline=pipeline)
        yield coord
    except BaseException as body_error:
        try:
            _stop_pipeline(pipeline, coord, threads)
        except Exception as e:  # noqa: BLE001 - never hide the exception of the with-body
            if not _raised_from(body_error, e):  # (else the caller sees it: said once)
                _log.warning("Error while stopping the pipeline after an exception",
                             exc_info=True)
        raise
    _stop_pipeline(pipeline, coord, threads)


def _stop_pipeline(pipeline: Pipeline, coord: Coordinator,
                   threads: List[threading.Thread]) -> None:
    """Request stop, unblock every queue, join (re-raising a runner's exception)."""
    coord.request_stop()
    for queue in pipeline.queues:
        queue.close(cancel_pending_enqueues=True)
    coord.join(threads, stop_grace_period_secs=STOP_GRACE_PERIOD_SECS)

def _raised_from(error: BaseException, cause: BaseException) -> bool:
    """Whether ``error`` is ``cause`` or was raised from it (a consumer's chained copy of a
    runner's exception, and what was raised from that)."""
    seen = set()
    link: Optional[BaseException] = error
    while link is not None and id(link) not in seen:
        if link is cause:
            return True
        seen.add(id(link))
        link = link.__cause__
    return False
