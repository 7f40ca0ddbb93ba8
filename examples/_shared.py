"""What the examples share: a small NumPy classifier, and finding the IDX files of a folder.

Not part of queuepipe: the examples import it as a sibling module (``python examples/x.py``
puts ``examples/`` on ``sys.path``).
"""

import glob
import os

import numpy as np

from queuepipe.convert import find_idx_labels, read_idx


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

    def accuracy(self, batches):
        """``(share of correct predictions, number of examples)`` over ``(x, y)`` batches."""
        correct = total = 0
        for x, y in batches:
            correct += int((self.predict(x) == y).sum())
            total += len(y)
        return correct / total, total

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


def load_idx_dir(idx_dir):
    """``(train_images, train_labels, test_images, test_labels)`` from an MNIST-style folder.

    Finds ``train-images*idx3*`` (and ``t10k-images*idx3*`` if there) in ``idx_dir`` and reads
    each with its label file through :mod:`queuepipe.convert`. Images come flattened to rows of
    uint8, labels as int64; the test pair is ``(None, None)`` when there are no t10k files.

    Raises:
      FileNotFoundError: ``idx_dir`` holds no training images; the message lists what it holds.
    """
    arrays = []
    for split in ("train", "t10k"):
        found = sorted(glob.glob(os.path.join(idx_dir, f"{split}-images?idx3-ubyte*")))
        if not found:
            if split == "train":
                raise FileNotFoundError(f"no train-images-idx3-ubyte[.gz] in {idx_dir!r} "
                                        f"(it holds {sorted(os.listdir(idx_dir))})")
            arrays += [None, None]
            continue
        images, labels = read_idx(found[0]), read_idx(find_idx_labels(found[0]))
        arrays += [images.reshape(len(images), -1), labels.astype(np.int64)]
    return tuple(arrays)
