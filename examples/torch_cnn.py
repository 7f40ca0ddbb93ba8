"""Train a small CNN with PyTorch on TFRecord shards that queuepipe reads, parses and shuffles.

The 8x8 handwritten digits of scikit-learn are written as 4 TFRecord shards of Examples
(``digits.py``); then a ``torch.utils.data.DataLoader`` iterates a
:class:`QueuePipeIterableDataset`: each epoch, in each DataLoader worker, a fresh queuepipe
pipeline reads that worker's share of the shards (string_input_producer ->
TFRecordReader.read_up_to -> parse_example -> shuffle_batch) on background threads while the
model trains.

    python examples/torch_cnn.py                 # 300 steps, 2 DataLoader workers
    python examples/torch_cnn.py --steps 50 --workers 0
    torchrun --nproc_per_node 2 examples/torch_cnn.py   # each process reads its half

Needs ``pip install '<queuepipe checkout>[torch,demo]'`` (PyTorch and scikit-learn).
"""

from __future__ import annotations

import functools
import time
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

import queuepipe as qp
from digits import digit_batches, digits_data, example_parser
from queuepipe.distributed import Shard
from queuepipe.integrations.torch import QueuePipeIterableDataset

def make_batches(shard: Shard, files: Sequence[str], batch_size: int) -> qp.Batches:
    """One pass over this shard's records, shuffled: the pipeline of one epoch.

    ``QueuePipeIterableDataset`` calls it in each DataLoader worker, inside a fresh pipeline,
    with the worker's ``shard``: each worker reads a disjoint share of the files.
    """
    return digit_batches(files, batch_size, num_epochs=1, shard=shard)


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
            images = batch["image"].view(-1, 1, 8, 8)
            loss = nn.functional.cross_entropy(model(images), batch["label"])
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
        predicted = model(torch.from_numpy(test[0]).view(-1, 1, 8, 8)).argmax(1).numpy()
    accuracy = float((predicted == test[1]).mean())
    print(f"{step} steps, {seen} examples in {seconds:.1f} s ({seen / seconds:.0f}/s); "
          f"test accuracy {accuracy:.3f}")
    return {"steps": step, "examples": seen, "loss": loss.item(), "accuracy": accuracy}


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, float]:
    parser = example_parser(__doc__)
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    args = parser.parse_args(argv)
    with digits_data(args.data) as (files, test):
        return train(files, test, args.steps, args.batch_size, args.workers)


if __name__ == "__main__":
    main()
