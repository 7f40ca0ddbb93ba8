"""The exception family of queuepipe, named after TensorFlow's ``tf.errors``.

Every error queuepipe raises on purpose derives from :class:`QueuePipeError`, so a training
loop can catch them all with one clause, and each subclass says when it is raised and whose
fault it is. This module imports nothing else from queuepipe.
"""

__all__ = [
    "QueuePipeError",
    "OutOfRangeError",
    "CancelledError",
    "DataLossError",
    "InvalidArgumentError",
    "DeadlineExceededError",
    "AbortedError",
    "NotFoundError",
    "AlreadyExistsError",
    "FailedPreconditionError",
]


class QueuePipeError(Exception):
    """Base class of every queuepipe error.

    ``message`` holds the text, as in TensorFlow's ``OpError``.
    """

    def __init__(self, message=""):
        super().__init__(message)
        self.message = message


class OutOfRangeError(QueuePipeError):
    """The input is exhausted: not a fault.

    Raised by a dequeue on a queue that is closed and holds fewer elements than requested, and
    by a producer after its last epoch. A QueueRunner thread ends quietly on it and a
    Coordinator treats it as a clean stop.
    """


class CancelledError(QueuePipeError):
    """An operation was cancelled because its queue was closed.

    Raised by ``enqueue`` on a closed queue, and by pending enqueues when the queue is closed
    with ``cancel_pending_enqueues=True``. Normal during shutdown.
    """


class DataLossError(QueuePipeError):
    """A file is damaged: a checksum failed, or the file ends inside a record.

    ``path`` names the file and ``offset`` the byte offset of the damaged record (or ``None``
    when unknown). The fault is in the data, not in the program.
    """

    def __init__(self, message="", path=None, offset=None):
        super().__init__(message)
        self.path = path
        self.offset = offset


class InvalidArgumentError(QueuePipeError, ValueError):
    """An argument or a value does not fit what was declared: the caller's fault.

    Raised for an element whose dtype or shape differs from its queue's declaration, and by
    parsing when a record lacks a required feature, holds the wrong type, or the wrong number
    of values. The message names the component or feature key and the record.
    """


class DeadlineExceededError(QueuePipeError, TimeoutError):
    """A blocking call's ``timeout=`` ran out before it could complete.

    Nothing was enqueued or dequeued by the call that timed out.
    """


class AbortedError(QueuePipeError):
    """An operation was aborted because the pipeline is shutting down after a failure."""


class NotFoundError(QueuePipeError, FileNotFoundError):
    """A file or pattern named by the caller does not exist (or no longer does)."""


class AlreadyExistsError(QueuePipeError, FileExistsError):
    """A file the caller asked to create already exists (``tf.gfile.Copy`` or ``Rename``
    onto one without ``overwrite=True``), as TF raises it."""


class FailedPreconditionError(QueuePipeError, ValueError):
    """An object was used in a state that does not allow the call: the caller's fault.

    Raised by a ``TFRecordWriter`` written to or flushed after ``close()``, as TF raises it.
    (Also a ``ValueError``, which queuepipe raised there before.)
    """
