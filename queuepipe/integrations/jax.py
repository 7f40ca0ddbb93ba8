"""JAX: put NumPy batches on a device, a batch or two ahead of the step that needs them.

``jax.device_put`` returns at once and copies in the background, so an iterator that puts the
next batches on the device before the training step asks for them hides the copy behind the
step: :class:`JaxBatches` keeps ``prefetch`` batches in flight.

Usage:

.. code-block:: python

    import queuepipe as qp
    from queuepipe.integrations.jax import JaxBatches

    batches = qp.train.read_batch_features("data/train-*.tfrecord", 64, features, num_epochs=1)
    with qp.running(), JaxBatches(batches, prefetch=2) as device_batches:
        for batch in device_batches:       # dict of jax.Array, already on the device
            params, loss = train_step(params, batch)

Strings (NumPy arrays of dtype object holding ``bytes``) have no JAX type and stay NumPy.
"""

from __future__ import annotations

import collections
from typing import Any, Deque, Iterable, Optional

import numpy as np

from queuepipe.integrations import BatchIterator

try:
    import jax
except ImportError as e:  # only this module needs JAX; `import queuepipe` never does
    raise ImportError("queuepipe.integrations.jax needs JAX: "
                      "pip install '<queuepipe checkout>[jax]'") from e

__all__ = ["to_jax", "JaxBatches"]


def _on_device(leaf: Any) -> bool:
    return isinstance(leaf, (np.ndarray, np.generic)) and leaf.dtype.kind not in "OSUV"


def to_jax(batch: Any, device: Any = None) -> Any:
    """Puts every numeric array of a batch on a JAX device, in one ``jax.device_put`` call.

    The copy is asynchronous: this returns before it finishes, and a computation that uses the
    arrays waits for it. The structure is kept as JAX's pytrees keep it (tuples, lists,
    namedtuples, dicts: a dict comes back with its keys in sorted order). Arrays of strings
    and plain ``bytes`` are returned unchanged.

    Args:
      batch: one batch of NumPy arrays, as a :class:`~queuepipe.batching.Batches` yields it.
      device: a ``jax.Device`` (or sharding); None: JAX's default device.

    Returns:
      The batch with ``jax.Array`` in place of numeric NumPy arrays.
    """
    leaves, treedef = jax.tree_util.tree_flatten(batch)
    numeric = [i for i, leaf in enumerate(leaves) if _on_device(leaf)]
    placed = jax.device_put([leaves[i] for i in numeric], device)
    for i, array in zip(numeric, placed):
        leaves[i] = array
    return jax.tree_util.tree_unflatten(treedef, leaves)


class JaxBatches(BatchIterator):
    """An iterator of device batches that keeps the next ``prefetch`` batches in flight.

    Each ``next()`` first tops up the lookahead: it takes batches from ``batches`` (blocking as
    that iterator does, e.g. a :class:`~queuepipe.batching.Batches` waiting for its queue) and
    starts copying each to the device (:func:`to_jax`) until ``prefetch`` batches wait behind
    the one it returns. Iteration ends when ``batches`` ends and the lookahead is drained. An
    exception raised by ``batches`` while looking ahead is raised after the batches taken
    before it have been returned, so none is lost.

    Args:
      batches: a :class:`~queuepipe.batching.Batches` or any iterable of NumPy batches.
      device: as for :func:`to_jax`.
      prefetch: how many batches to copy ahead (0: none). 1 or 2 is enough to hide the copy;
        each costs one batch of device memory.

    Raises:
      ValueError: ``prefetch`` is negative.
    """

    def __init__(self, batches: Iterable[Any], device: Any = None, prefetch: int = 2):
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0, got {prefetch}")
        super().__init__(batches)
        self._device = device
        self._prefetch = prefetch
        self._ready: Deque[Any] = collections.deque()
        self._error: Optional[BaseException] = None
        self._exhausted = False

    def __next__(self) -> Any:
        while not self._exhausted and len(self._ready) <= self._prefetch:
            try:
                batch = next(self._batches)
            except StopIteration:
                self._exhausted = True
            except Exception as e:  # noqa: BLE001 - raised below, after the ready batches
                self._error, self._exhausted = e, True
            else:
                self._ready.append(to_jax(batch, self._device))
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        raise StopIteration

    def close(self) -> None:
        """Drops the lookahead and closes the underlying batches if they can be closed."""
        self._ready.clear()
        self._exhausted = True
        super().close()
