"""Adapters from queuepipe's NumPy batches to training frameworks, each imported on demand.

- :mod:`queuepipe.integrations.torch`: ``to_torch``, ``TorchBatches`` and
  ``QueuePipeIterableDataset`` for a ``torch.utils.data.DataLoader``
  (``pip install '<queuepipe checkout>[torch]'``).
- :mod:`queuepipe.integrations.keras`: a generator and a ``keras.utils.PyDataset`` for
  ``model.fit`` (``pip install '<queuepipe checkout>[keras]'``).
- :mod:`queuepipe.integrations.jax`: ``to_jax`` and ``JaxBatches``, which put batches on a JAX
  device ahead of the step that needs them (``pip install '<queuepipe checkout>[jax]'``).

Importing this package imports no framework; each submodule imports its framework when it is
imported, and says which extra to install when that framework is missing.
"""

from typing import Any, Iterable

__all__ = ["BatchIterator"]


class BatchIterator:
    """The base of the adapters that wrap an iterator of batches: iteration, ``close``, ``with``.

    Subclasses implement ``__next__`` on top of ``self._batches``.

    Args:
      batches: a :class:`~queuepipe.batching.Batches` or any iterable of batches.
    """

    def __init__(self, batches: Iterable[Any]):
        self._source = batches
        self._batches = iter(batches)

    def __iter__(self) -> "BatchIterator":
        return self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} over {self._source!r}>"

    def __next__(self) -> Any:
        raise NotImplementedError

    def close(self) -> None:
        """Closes the underlying batches if they can be closed (their ``close()``)."""
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> "BatchIterator":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
