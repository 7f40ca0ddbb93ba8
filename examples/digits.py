"""The data of the framework examples: scikit-learn's 8x8 digits as TFRecord shards, read back
by one queuepipe pipeline as shuffled NumPy batches.

``write_digits`` writes the training digits as 4 shards of Examples (``image``: 64 floats in
[0, 1], ``label``: int64) with ``qp.write_shards`` and keeps 297 digits apart for testing.
``digit_batches`` is the pipeline: file names -> TFRecordReader.read_up_to -> parse_example ->
shuffle_batch, reading only its ``shard``'s share of the files (the whole of them by default).
``torch_cnn.py``, ``keras_model.py`` and ``jax_model.py`` feed it to their framework.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

import queuepipe as qp
from queuepipe.distributed import Shard, shard_files

FEATURES = {"image": qp.io.FixedLenFeature([64], qp.float32),
            "label": qp.io.FixedLenFeature([], qp.int64)}


def load_digits() -> Tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1797 digits: images ``(N, 64)`` uint8 in 0..16, labels ``(N,)`` int64."""
    # scikit-learn: pip install '<queuepipe checkout>[demo]'
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    return (digits.images.reshape(len(digits.images), -1).astype(np.uint8),
            digits.target.astype(np.int64))


def write_digits(folder: str, num_shards: int = 4,
                 test_size: int = 297) -> Tuple[List[str], Tuple[np.ndarray, np.ndarray]]:
    """Writes the training digits as shards in ``folder``.

    Returns:
      The shard paths, and the held-out ``(images, labels)``: images ``(N, 64)`` float32.
    """
    pixels, labels = load_digits()
    images = (pixels / 16.0).astype(np.float32)
    order = np.random.default_rng(0).permutation(len(labels))
    test, train = order[:test_size], order[test_size:]
    paths = qp.write_shards({"image": images[train], "label": labels[train]}, folder,
                            num_shards, prefix="digits", progress=False, processes=1)
    return paths, (images[test], labels[test])


@contextlib.contextmanager
def digits_data(folder: Optional[str] = None
                ) -> Iterator[Tuple[List[str], Tuple[np.ndarray, np.ndarray]]]:
    """``write_digits`` into ``folder``, or into a temporary folder removed afterwards."""
    with tempfile.TemporaryDirectory() as scratch:
        yield write_digits(folder or scratch)


def example_parser(doc: str) -> argparse.ArgumentParser:
    """The command line the examples share: ``--batch-size`` and ``--data``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data", help="folder for the shards (default: a temporary one)")
    return parser


def digit_batches(files: Sequence[str], batch_size: int, num_epochs=1,
                  shard: Shard = Shard(0, 1), seed=None) -> qp.Batches:
    """Shuffled batches ``{"image": (B, 64) float32, "label": (B,) int64}`` of ``shard``'s share.

    Build it inside ``with qp.Pipeline().as_default():`` (``QueuePipeIterableDataset`` does);
    iterating the result starts the pipeline's threads and stops them when it ends.
    """
    share = shard_files(files, *shard)
    filenames = qp.train.string_input_producer(share.files, num_epochs=num_epochs, seed=seed)
    reader = share.reader()

    def examples() -> Dict[str, np.ndarray]:
        # Up to 64 records of one file per call: parse them together, enqueue them together.
        _, serialized = reader.read_up_to(filenames, 64)
        return qp.io.parse_example(serialized, FEATURES)

    return qp.train.shuffle_batch(examples, batch_size, capacity=batch_size * 4 + 256,
                                  min_after_dequeue=256, seed=seed, enqueue_many=True,
                                  allow_smaller_final_batch=True)
