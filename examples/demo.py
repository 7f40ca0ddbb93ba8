"""queuepipe demo: real handwritten digits -> TFRecord shards -> shuffle_batch -> a NumPy model.

What it does, step by step (each step prints what it did):

1. Loads real data: scikit-learn's bundled 8x8 handwritten digits (1797 images, no download),
   or MNIST / Fashion-MNIST when ``--idx-dir`` names a folder of IDX files (raw or .gz).
2. Splits it into training and held-out examples.
3. Writes both as TFRecord shards of ``Example`` protos (``image``: raw uint8 bytes,
   ``label``: int64) with ``qp.write_shards``: one process per shard, a progress bar.
4. Builds TF1's input pipeline with no TensorFlow: ``string_input_producer`` over the shards
   (reshuffled each epoch) -> ``TFRecordReader.read_up_to`` -> ``parse_example`` +
   ``decode_raw`` on each chunk -> ``shuffle_batch(enqueue_many=True)`` on two threads.
5. Trains a one-hidden-layer NumPy network on the shuffled batches for several epochs, printing
   loss and accuracy per epoch, then measures held-out accuracy through a second pipeline
   (``batch``, one epoch, in order), and shows how full the queues were.

Run it with ``make demo`` (or ``.venv/bin/python examples/demo.py``); ``--help`` lists the
options.
"""

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import queuepipe as qp
from _shared import MLP, load_idx_dir
from digits import load_digits
from queuepipe.monitor import QueueMonitor

FEATURES = {"image": qp.io.FixedLenFeature([], qp.string),
            "label": qp.io.FixedLenFeature([], qp.int64)}


def load_data(args):
    """``(train_x, train_y, heldout_x, heldout_y, description, pixel_max)``: uint8 rows."""
    rng = np.random.default_rng(args.seed)
    if args.idx_dir:
        x, y, test_x, test_y = load_idx_dir(args.idx_dir)
        description = f"IDX files in {args.idx_dir}"
        pixel_max = 255.0
    else:
        x, y = load_digits()  # pixel values 0..16
        test_x = test_y = None
        description = "scikit-learn's 8x8 handwritten digits"
        pixel_max = 16.0
    if test_x is None:  # hold out a random share
        order = rng.permutation(len(x))
        cut = int(len(x) * (1 - args.heldout))
        x, y, test_x, test_y = x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]
    if args.limit:
        x, y = x[:args.limit], y[:args.limit]
        test_x, test_y = test_x[:args.limit], test_y[:args.limit]
    return x, y, test_x, test_y, description, pixel_max


def write(images, labels, out_dir, shards, prefix, args):
    """Writes ``images``/``labels`` as Example shards, one process per shard (at most
    ``--processes``), with a progress bar; returns the paths."""
    columns = {"image": [row.tobytes() for row in images], "label": labels}
    return qp.write_shards(columns, out_dir, shards, prefix=prefix,
                           processes=min(shards, args.processes),
                           progress=not args.no_progress)


def chunk_producer(filenames, pixel_max, chunk=256):
    """A producer of decoded chunks: ``(images float32 [n, d], labels int64 [n])``.

    One call reads up to ``chunk`` records of one file and parses and decodes them together,
    so no Python runs per record.
    """
    reader = qp.TFRecordReader()

    def produce():
        _, serialized = reader.read_up_to(filenames, chunk)
        parsed = qp.io.parse_example(serialized, FEATURES)
        images = qp.io.decode_raw(parsed["image"], qp.uint8).astype(np.float32) / pixel_max
        return images, parsed["label"]

    return produce


def train(args, paths, n_train, n_features, pixel_max):
    """Trains a model from shuffled batches; returns ``(model, per-epoch metrics)``."""
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        filenames = qp.train.string_input_producer(paths, num_epochs=args.epochs,
                                                   seed=args.seed, name="train_files")
        min_after_dequeue = min(args.min_after_dequeue, n_train // 2)
        batches = qp.train.shuffle_batch(
            chunk_producer(filenames, pixel_max), args.batch_size,
            capacity=min_after_dequeue + 3 * args.batch_size,
            min_after_dequeue=min_after_dequeue, num_threads=2, seed=args.seed,
            enqueue_many=True, allow_smaller_final_batch=True)
    model = MLP(n_features, 10, hidden=args.hidden, learning_rate=args.learning_rate,
                seed=args.seed)
    # One sample per batch: keep them all.
    monitor = QueueMonitor(pipeline, history_size=args.epochs * n_train // args.batch_size + 2)
    epochs, seen, loss_sum, correct, started = [], 0, 0.0, 0, time.perf_counter()
    with batches:  # starts the runners on the first batch, stops them at the end
        for images, labels in batches:
            monitor.sample()  # how full every queue is each time the trainer takes a batch
            loss, right = model.train_step(images, labels)
            loss_sum += loss * len(labels)
            correct += right
            seen += len(labels)
            if seen >= (len(epochs) + 1) * n_train or seen == args.epochs * n_train:
                count = seen - len(epochs) * n_train
                epochs.append({"loss": loss_sum / count, "accuracy": correct / count})
                print(f"epoch {len(epochs):>2}/{args.epochs}  loss {epochs[-1]['loss']:.4f}  "
                      f"train accuracy {epochs[-1]['accuracy']:.4f}  "
                      f"({seen} examples, {time.perf_counter() - started:.1f} s)")
                loss_sum, correct = 0.0, 0
    seconds = time.perf_counter() - started
    print(f"trained on {seen} examples in {seconds:.2f} s ({seen / seconds:,.0f} examples/s)")
    print("how full the queues of the training pipeline were, sampled at every batch:")
    print(monitor.table())
    print(monitor.input_bound())
    return model, epochs


def evaluate(model, paths, pixel_max):
    """Held-out accuracy, reading the held-out shards once, in order, with ``batch``."""
    with qp.Pipeline().as_default():
        filenames = qp.train.string_input_producer(paths, num_epochs=1, shuffle=False,
                                                   name="heldout_files")
        batches = qp.train.batch(chunk_producer(filenames, pixel_max), 256, enqueue_many=True,
                                 allow_smaller_final_batch=True)
        return model.accuracy(batches)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--idx-dir", help="folder with MNIST/Fashion-MNIST IDX files "
                        "(train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], and "
                        "optionally the t10k pair as the held-out set)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="training epochs (default 12 for digits, 3 for IDX data)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=None,
                        help="hidden units; 0 for softmax regression (default 64, 128 for IDX)")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--min-after-dequeue", type=int, default=1000,
                        help="the shuffle buffer (at most half the training set)")
    parser.add_argument("--shards", type=int, default=4, help="training shards")
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="processes writing the training shards in parallel")
    parser.add_argument("--heldout", type=float, default=0.2,
                        help="share held out when the data has no test split")
    parser.add_argument("--limit", type=int, default=0, help="use at most this many examples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="where to write the shards (default: a temporary "
                        "folder, removed at the end)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.epochs is None:
        args.epochs = 3 if args.idx_dir else 12
    if args.hidden is None:
        args.hidden = 128 if args.idx_dir else 64
    for name in ("epochs", "batch_size", "shards", "processes"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    return args


def main(argv=None):
    """Runs the demo; returns its metrics (``heldout_accuracy``, ``epochs``, ...)."""
    args = parse_args(argv)
    started = time.perf_counter()
    x, y, test_x, test_y, description, pixel_max = load_data(args)
    print(f"data: {description}: {len(x)} training and {len(test_x)} held-out images of "
          f"{x.shape[1]} pixels, {len(np.unique(y))} classes")
    with tempfile.TemporaryDirectory(prefix="queuepipe-demo-") as tmp:
        workdir = args.workdir or tmp
        t = time.perf_counter()
        train_paths = write(x, y, os.path.join(workdir, "train"), args.shards, "train", args)
        heldout_paths = write(test_x, test_y, os.path.join(workdir, "heldout"), 1, "heldout",
                              args)
        print(f"wrote {len(x) + len(test_x)} Examples as {len(train_paths)} training shard(s) "
              f"({min(args.shards, args.processes)} processes) and {len(heldout_paths)} "
              f"held-out shard in {time.perf_counter() - t:.2f} s under {workdir}")
        model, epochs = train(args, train_paths, len(x), x.shape[1], pixel_max)
        accuracy, total = evaluate(model, heldout_paths, pixel_max)
    print(f"held-out accuracy: {accuracy:.4f} ({total} images never seen in training; "
          f"chance is 0.10)")
    print(f"done in {time.perf_counter() - started:.1f} s")
    return {"heldout_accuracy": accuracy, "heldout_examples": total, "epochs": epochs}


if __name__ == "__main__":
    main(sys.argv[1:])
