"""TF1's classic "fully_connected_reader" input pipeline, ported name for name to queuepipe.

The TensorFlow 1 tutorial converted Fashion-MNIST/MNIST to a TFRecord file of ``Example``
protos (``image_raw``: 784 raw uint8 bytes, ``label``: int64), then read it back with a queue
pipeline. The same code without TensorFlow::

    TF1                                   queuepipe
    tf.python_io.TFRecordWriter           qp.python_io.TFRecordWriter
    tf.train.string_input_producer        qp.train.string_input_producer
    tf.TFRecordReader().read(queue)       qp.TFRecordReader().read(queue)
    tf.parse_single_example               qp.io.parse_single_example
    tf.decode_raw                         qp.io.decode_raw
    tf.train.shuffle_batch([img, lbl])    qp.train.shuffle_batch(lambda: (img, lbl))
    sess.run(train_op) in a loop          for images, labels in batches: model.train_step(...)

Where TF built graph tensors once, queuepipe takes a *producer*: ``read_and_decode`` below is a
function the batching threads call for every example.

The data is synthetic but shaped like Fashion-MNIST (28x28 uint8 images of 10 classes, each a
noisy, shifted copy of its class's pattern), unless ``--idx-dir`` names a folder of real
(Fashion-)MNIST IDX files. A NumPy softmax regression (``--hidden 0``, the default) or MLP is
trained on the shuffled batches, then tested with ``qp.train.batch``.
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import queuepipe as qp
from _shared import MLP, load_idx_dir
from queuepipe.monitor import QueueMonitor


def synthetic_fashion_mnist(n, seed):
    """``n`` 28x28 uint8 images of 10 classes, each its class pattern shifted plus noise."""
    rng = np.random.default_rng(seed)
    patterns = np.clip(rng.normal(0, 1, (10, 28, 28)).cumsum(1).cumsum(2), 0, None)
    patterns = (patterns / patterns.max(axis=(1, 2), keepdims=True) * 220).astype(np.float32)
    labels = rng.integers(0, 10, n)
    shifts = rng.integers(-2, 3, (n, 2))
    images = np.stack([np.roll(patterns[label], tuple(shift), axis=(0, 1))
                       for label, shift in zip(labels, shifts)])
    images += rng.normal(0, 40, images.shape)
    return np.clip(images, 0, 255).astype(np.uint8).reshape(n, 784), labels.astype(np.int64)


def convert_to(images, labels, path):
    """Writes one ``Example`` per image, as TF1's ``convert_to_records.py`` did."""
    with qp.python_io.TFRecordWriter(path) as writer:
        for image, label in zip(images, labels):
            example = qp.train.Example(features=qp.train.Features(feature={
                "image_raw": qp.train.Feature(bytes_list=qp.train.BytesList(
                    value=[image.tobytes()])),
                "label": qp.train.Feature(int64_list=qp.train.Int64List(value=[int(label)])),
            }))
            writer.write(example.SerializeToString())


def read_and_decode(filename_queue):
    """A producer: one ``(image float32 [784], label int64)`` per call, as in TF1."""
    reader = qp.TFRecordReader()

    def produce():
        _, serialized = reader.read(filename_queue)
        features = qp.io.parse_single_example(serialized, features={
            "image_raw": qp.io.FixedLenFeature([], qp.string),
            "label": qp.io.FixedLenFeature([], qp.int64),
        })
        image = qp.io.decode_raw(features["image_raw"], qp.uint8)
        image = image.astype(np.float32) * (1.0 / 255) - 0.5
        return image, features["label"]

    return produce


def inputs(path, batch_size, num_epochs, train, seed):
    """TF1's ``inputs()``: shuffled training batches, or the test set in order."""
    filename_queue = qp.train.string_input_producer([path], num_epochs=num_epochs, seed=seed)
    example = read_and_decode(filename_queue)
    if train:
        return qp.train.shuffle_batch(example, batch_size=batch_size, num_threads=2,
                                      capacity=1000 + 3 * batch_size, min_after_dequeue=1000,
                                      seed=seed, allow_smaller_final_batch=True)
    return qp.train.batch(example, batch_size=batch_size, allow_smaller_final_batch=True)


def main(argv=None):
    """Runs the example; returns ``{"test_accuracy": ..., "steps": ...}``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idx-dir", help="folder of real (Fashion-)MNIST IDX files")
    parser.add_argument("--train-size", type=int, default=3000)
    parser.add_argument("--test-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=0, help="0: softmax regression")
    parser.add_argument("--learning-rate", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    if args.idx_dir:
        train_x, train_y, test_x, test_y = load_idx_dir(args.idx_dir)
        if test_x is None:
            train_x, test_x = train_x[args.test_size:], train_x[:args.test_size]
            train_y, test_y = train_y[args.test_size:], train_y[:args.test_size]
        train_x, train_y = train_x[:args.train_size], train_y[:args.train_size]
        test_x, test_y = test_x[:args.test_size], test_y[:args.test_size]
    else:
        images, labels = synthetic_fashion_mnist(args.train_size + args.test_size, args.seed)
        train_x, test_x = images[:args.train_size], images[args.train_size:]
        train_y, test_y = labels[:args.train_size], labels[args.train_size:]

    with tempfile.TemporaryDirectory(prefix="queuepipe-fashion-") as tmp:
        train_path, test_path = (os.path.join(tmp, n) for n in ("train.tfrecords",
                                                                "test.tfrecords"))
        convert_to(train_x, train_y, train_path)
        convert_to(test_x, test_y, test_path)
        print(f"wrote {len(train_x)} training and {len(test_x)} test Examples")

        model = MLP(784, 10, hidden=args.hidden, learning_rate=args.learning_rate,
                    seed=args.seed)
        pipeline = qp.Pipeline()
        with pipeline.as_default():
            batches = inputs(train_path, args.batch_size, args.epochs, True, args.seed)
        started, step, seen = time.perf_counter(), 0, 0
        monitor = QueueMonitor(pipeline)
        with batches:
            for images, labels in batches:
                monitor.sample()  # how full the queues are each time a batch is taken
                loss, correct = model.train_step(images, labels)
                step += 1
                seen += len(labels)
                if step % 20 == 0:
                    print(f"step {step:4d}: loss {loss:.3f}, batch accuracy "
                          f"{correct / len(labels):.2f}")
        seconds = time.perf_counter() - started
        print(f"{step} steps, {seen} examples, {args.epochs} epochs in {seconds:.1f} s")
        print(monitor.table())

        with qp.Pipeline().as_default():
            test_batches = inputs(test_path, 500, 1, False, args.seed)
        accuracy, total = model.accuracy(test_batches)
    print(f"test accuracy: {accuracy:.4f} on {total} images")
    return {"test_accuracy": accuracy, "steps": step}


if __name__ == "__main__":
    main(sys.argv[1:])
