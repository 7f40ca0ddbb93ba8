"""Batching: TF1's ``tf.train.batch`` family, returning an iterator of NumPy batches.

A batching function takes a *producer* (a zero-argument callable returning one element: a tuple,
a list, a dict, or a single value) and builds the last stage of a pipeline: a queue, and a
:class:`~queuepipe.runner.QueueRunner` whose threads call the producer again and again and
enqueue what it returns. The result is a :class:`Batches`: iterate it to get batches, each the
element's structure with every component stacked along a new leading axis.

Usage:

.. code-block:: python

    import numpy as np
    import queuepipe as qp

    with qp.Pipeline().as_default():
        row = qp.train.slice_input_producer([np.arange(100), np.arange(100) % 10],
                                            num_epochs=2, seed=0)
        batches = qp.train.shuffle_batch(row, batch_size=32, capacity=64,
                                         min_after_dequeue=16, seed=0,
                                         allow_smaller_final_batch=True)
        for features, labels in batches:   # starts the runners, stops them at the end
            print(features.shape)          # (32,) ... then (8,)

The iterator ends (``StopIteration``) once the input is exhausted and the final batch is
delivered; :meth:`Batches.dequeue` raises ``OutOfRangeError`` there instead, as TF's dequeue op
does. If nobody started the pipeline's runners, the first batch requested starts them under a
Coordinator the :class:`Batches` owns, and the end of the input, :meth:`Batches.close` or an
exception stops and joins them. Inside ``with qp.running():`` (or after
``qp.start_queue_runners(coord)``) a :class:`Batches` only dequeues.

How it differs from TF:

* There are no static shapes. The batch queue is built when the first element arrives, with
  that element's dtypes and shapes (or ``shapes=``, when given): fixed-shape components then
  live in the queue's preallocated arrays and a batch is one slice copy. A later element of
  another shape is an ``InvalidArgumentError`` naming the component; with ``dynamic_pad=True``
  every dimension of every component is padded per batch instead (unless ``shapes=`` says
  which).
* The structure of a batch is the structure of the element, also for one component: a
  producer returning ``(x,)`` gives batches ``(xs,)``, one returning ``x`` gives ``xs`` (TF
  unwrapped one-element lists).
* A component may be a :class:`~queuepipe.sparse.SparseValue` (a ``VarLenFeature``'s
  parse): a batch holds one SparseValue for it, with a leading batch column in ``indices``
  and ``dense_shape`` ``[batch, largest extent of each dimension]``, as TF's SparseTensor
  batching gives; with ``enqueue_many`` a batched SparseValue is split along its first index
  column.
* A producer's exception reaches the consumer: the batch that would have followed raises a copy
  of it, chained to the original.

The package, one concern a module: ``_arguments`` (argument checks, the element structure),
``_deferred`` (the batch queue built from the first element), ``_ops`` (the enqueue ops and
their rotation), ``_batches`` (:class:`Batches`), ``_functions`` (the eight batching
functions) and ``_running`` (:func:`running`).
"""

from queuepipe.batching._arguments import _positive_int, _scope, _Structure, sequence_of
from queuepipe.batching._batches import STOP_GRACE_PERIOD_SECS, Batches
from queuepipe.batching._deferred import _DeferredQueue
from queuepipe.batching._functions import _batching, batch, batch_join, maybe_batch, \
    maybe_batch_join, maybe_shuffle_batch, maybe_shuffle_batch_join, shuffle_batch, \
    shuffle_batch_join
from queuepipe.batching._ops import _EnqueueOp
from queuepipe.batching._running import running

__all__ = ["Batches", "batch", "shuffle_batch", "batch_join", "shuffle_batch_join",
           "maybe_batch", "maybe_shuffle_batch", "maybe_batch_join", "maybe_shuffle_batch_join",
           "running", "STOP_GRACE_PERIOD_SECS"]
