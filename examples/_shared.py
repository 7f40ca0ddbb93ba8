"""What the examples share: a small NumPy classifier, the IDX reader, and queue reporting.

Not part of queuepipe: the examples import it as a sibling module (``python examples/x.py``
puts ``examples/`` on ``sys.path``).
"""

import gzip
import os
import struct

import numpy as np


class MLP:
    """Softmax regression (``hidden=0``) or a one-hidden-layer ReLU network, trained by SGD.

    Plain NumPy: a forward pass, the softmax cross-entropy gradient by hand, and SGD with
    momentum. Enough to show that batches from a queue pipeline really teach a model.

    Args:
      inputs: features per example.
      classes: number of classes.
      hidden: hidden units; 0 for softmax regression.
      learning_rate, momentum, weight_decay: the SGD settings.
      seed: seeds the initial weights.
    """

    def __init__(self, inputs, classes, hidden=64, learning_rate=0.1, momentum=0.9,
                 weight_decay=1e-4, seed=0):
        rng = np.random.default_rng(seed)
        sizes = [inputs] + ([hidden] if hidden else []) + [classes]
        self.params = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            self.params.append(rng.normal(0, np.sqrt(2.0 / fan_in), (fan_in, fan_out))
                               .astype(np.float32))
            self.params.append(np.zeros(fan_out, np.float32))
        self.velocity = [np.zeros_like(p) for p in self.params]
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.weight_decay = weight_decay

    def _forward(self, x):
        activations = [x]
        for i in range(0, len(self.params), 2):
            z = activations[-1] @ self.params[i] + self.params[i + 1]
            activations.append(np.maximum(z, 0) if i + 2 < len(self.params) else z)
        return activations

    def predict(self, x):
        """The predicted class of each row of ``x`` (float32, already scaled)."""
        return self._forward(x)[-1].argmax(axis=1)

    def train_step(self, x, y):
        """One SGD step on a batch; returns ``(mean loss, number of correct predictions)``."""
        activations = self._forward(x)
        logits = activations[-1]
        shifted = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(shifted)
        probs /= probs.sum(axis=1, keepdims=True)
        n = len(y)
        loss = float(-np.log(probs[np.arange(n), y] + 1e-12).mean())
        correct = int((logits.argmax(axis=1) == y).sum())
        grad = probs
        grad[np.arange(n), y] -= 1
        grad /= n
        for i in range(len(self.params) - 2, -1, -2):
            weights = self.params[i]
            grads = (activations[i // 2].T @ grad + self.weight_decay * weights, grad.sum(0))
            if i:
                grad = (grad @ weights.T) * (activations[i // 2] > 0)
            for j, g in zip((i, i + 1), grads):
                self.velocity[j] = self.momentum * self.velocity[j] - self.learning_rate * g
                self.params[j] += self.velocity[j]
        return loss, correct


def read_idx(path):
    """An IDX file (MNIST/Fashion-MNIST format, raw or gzip) as a uint8 NumPy array.

    Raises:
      ValueError: the file does not start with an IDX header of unsigned bytes.
    """
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, kind, rank = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes (header {data[:4]!r})")
    shape = struct.unpack(f">{rank}I", data[4:4 + 4 * rank])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(shape)


def find_idx(idx_dir, stem):
    """The path of ``<stem>`` or ``<stem>.gz`` (``-`` or ``.`` before ``idx``) in ``idx_dir``.

    Raises:
      FileNotFoundError: neither exists; the message lists what the folder holds.
    """
    for name in (stem, stem + ".gz", stem.replace("-idx", ".idx"),
                 stem.replace("-idx", ".idx") + ".gz"):
        path = os.path.join(idx_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"no {stem}[.gz] in {idx_dir!r} (it holds {sorted(os.listdir(idx_dir))})")


def load_idx_dir(idx_dir):
    """``(train_images, train_labels, test_images, test_labels)`` from an MNIST-style folder;
    images flattened to rows of uint8. The test pair is None when t10k files are absent."""
    train = (read_idx(find_idx(idx_dir, "train-images-idx3-ubyte")),
             read_idx(find_idx(idx_dir, "train-labels-idx1-ubyte")))
    try:
        test = (read_idx(find_idx(idx_dir, "t10k-images-idx3-ubyte")),
                read_idx(find_idx(idx_dir, "t10k-labels-idx1-ubyte")))
    except FileNotFoundError:
        test = (None, None)
    flat = [None if a is None else a.reshape(len(a), -1) for a in (train[0], test[0])]
    return flat[0], train[1].astype(np.int64), flat[1], \
        None if test[1] is None else test[1].astype(np.int64)


class FillMeter:
    """Samples how full a queue is each time the trainer takes a batch."""

    def __init__(self, queue):
        self.queue = queue
        self.fractions = []

    def sample(self):
        self.fractions.append(self.queue.size() / self.queue.capacity)

    def report(self, label="example queue"):
        """One line: mean fill, and how long the trainer and the producers waited."""
        stats = self.queue.stats()
        mean = 100 * float(np.mean(self.fractions)) if self.fractions else 0.0
        return (f"{label} '{self.queue.name}': {mean:.0f}% full on average (capacity "
                f"{stats['capacity']}), {stats['dequeued']} elements dequeued; the trainer "
                f"waited {stats['consumer_wait_secs']:.2f} s for batches, the producers "
                f"{stats['producer_wait_secs']:.2f} s for room")


def queue_table(pipeline):
    """Lines describing every queue of a pipeline from its ``stats()``."""
    lines = []
    for queue in pipeline.queues:
        s = queue.stats()
        lines.append(f"  {queue.name:<40} size {s['size']:>5}/{s['capacity']:<6} "
                     f"in {s['enqueued']:>7} out {s['dequeued']:>7}  "
                     f"consumers waited {s['consumer_wait_secs']:6.2f} s, "
                     f"producers {s['producer_wait_secs']:6.2f} s")
    return lines
