"""Train a small CNN with PyTorch on TFRecord shards that queuepipe reads, parses and shuffles.

The 8x8 handwritten digits of scikit-learn are written as 4 TFRecord shards of Examples
(``image``: 64 floats, ``label``: int64) with ``qp.write_shards``; then a
``torch.utils.data.DataLoader`` iterates a :class:`QueuePipeIterableDataset`: each epoch, in
each DataLoader worker, a fresh queuepipe pipeline reads that worker's share of the shards
(string_input_producer -> TFRecordReader.read_up_to -> parse_example -> shuffle_batch) on
background threads while the model trains.

    python examples/torch_cnn.py                 # 300 steps, 2 DataLoader workers
    python examples/torch_cnn.py --steps 50 --workers 0
    torchrun --nproc_per_node 2 examples/torch_cnn.py   # each process reads its half

Needs ``pip install queuepipe[torch,demo]`` (PyTorch and scikit-learn).
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

import queuepipe as qp
from queuepipe.distributed import Shard, shard_files
from queuepipe.integrations.torch import QueuePipeIterableDataset

FEATURES = {"image": qp.io.FixedLenFeature([64], qp.float32),
            "label": qp.io.FixedLenFeature([], qp.int64)}


def write_digits(folder: str, num_shards: int = 4,
                 test_size: int = 297) -> Tuple[List[str], Tuple[np.ndarray, np.ndarray]]:
    """Writes the training digits as shards in ``folder``; returns them and the test arrays."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32).reshape(-1, 64)
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    test, train = order[:test_size], order[test_size:]
    paths = qp.write_shards({"image": images[train], "label": labels[train]}, folder,
                            num_shards, prefix="digits", progress=False, processes=1)
    return paths, (images[test].reshape(-1, 1, 8, 8), labels[test])


def make_batches(shard: Shard, files: Sequence[str], batch_size: int) -> qp.Batches:
    """One pass over this shard's records, parsed and shuffled: the pipeline of one epoch.

    ``QueuePipeIterableDataset`` calls it in each DataLoader worker, inside a fresh pipeline,
    with the worker's ``shard``; ``shard_files`` turns that into a disjoint share of the files.
    """
    share = shard_files(files, *shard)
    filenames = qp.train.string_input_producer(share.files, num_epochs=1)
    reader = share.reader()

    def examples() -> Dict[str, np.ndarray]:
        # Up to 64 records of one file per call: parse them together, hand them over together.
        _, serialized = reader.read_up_to(filenames, 64)
        parsed = qp.io.parse_example(serialized, FEATURES)
        return {"image": parsed["image"].reshape(-1, 1, 8, 8), "label": parsed["label"]}

    return qp.train.shuffle_batch(examples, batch_size, capacity=batch_size * 4 + 256,
                                  min_after_dequeue=256, enqueue_many=True,
                                  allow_smaller_final_batch=True)


def small_cnn() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, 10))


def train(files: Sequence[str], test: Tuple[np.ndarray, np.ndarray], steps: int,
          batch_size: int = 32, workers: int = 2, log_every: int = 50) -> Dict[str, float]:
    """Trains ``steps`` steps (as many epochs as that takes) and returns the final metrics."""
    torch.manual_seed(0)
    # A model this small gains nothing from intra-op threads; they would only compete for the
    # cores with the pipeline's threads (and spin while waiting for them).
    torch.set_num_threads(1)
    model = small_cnn()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    dataset = QueuePipeIterableDataset(
        functools.partial(make_batches, files=list(files), batch_size=batch_size))
    loader = DataLoader(dataset, batch_size=None, num_workers=workers)
    step, epoch, seen, loss = 0, 0, 0, torch.tensor(float("nan"))
    start = time.perf_counter()
    while step < steps:
        for batch in loader:
            loss = nn.functional.cross_entropy(model(batch["image"]), batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            seen += len(batch["label"])
            if step % log_every == 0:
                print(f"step {step:4d}  epoch {epoch}  loss {loss.item():.3f}")
            if step == steps:
                break  # leaving the loop stops the pipeline's threads
        epoch += 1
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        predicted = model(torch.from_numpy(test[0])).argmax(1).numpy()
    accuracy = float((predicted == test[1]).mean())
    print(f"{step} steps, {seen} examples in {seconds:.1f} s ({seen / seconds:.0f}/s); "
          f"test accuracy {accuracy:.3f}")
    return {"steps": step, "examples": seen, "loss": loss.item(), "accuracy": accuracy}


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    parser.add_argument("--data", help="folder for the shards (default: a temporary one)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.data or os.path.join(scratch, "digits")
        files, test = write_digits(folder)
        return train(files, test, args.steps, args.batch_size, args.workers)


if __name__ == "__main__":
    main()
