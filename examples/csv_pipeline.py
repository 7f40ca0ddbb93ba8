"""CSV files through a queue pipeline: TextLineReader + decode_csv + shuffle_batch.

TF1's CSV recipe, without TensorFlow::

    filename_queue = tf.train.string_input_producer(files, num_epochs=...)
    reader = tf.TextLineReader(skip_header_lines=1)
    _, lines = reader.read_up_to(filename_queue, 128)
    columns = tf.decode_csv(lines, record_defaults=[[0.0], [0.0], [""], [0]])
    batch = tf.train.shuffle_batch(..., enqueue_many=True)

Each producer call reads up to 128 lines of one file and decodes them together, so no Python
runs per line; ``enqueue_many=True`` puts the decoded rows on the shuffle queue. The script
writes a few CSV files of two noisy classes (a header line, two features, a colour name and the
label), trains a NumPy logistic regression on the batches and reports its accuracy.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

import queuepipe as qp
from _shared import MLP

COLOURS = ["red", "green", "blue"]


def write_csv_files(directory, files, rows_per_file, seed):
    """Writes ``files`` CSV files with a header; returns their paths."""
    rng = np.random.default_rng(seed)
    paths = []
    for f in range(files):
        labels = rng.integers(0, 2, rows_per_file)
        points = rng.normal(0, 1, (rows_per_file, 2)) + np.where(labels[:, None], 1.5, -1.5)
        path = os.path.join(directory, f"part-{f}.csv")
        with open(path, "w") as out:
            out.write("x,y,colour,label\n")
            for (x, y), label in zip(points, labels):
                out.write(f"{x:.4f},{y:.4f},{COLOURS[rng.integers(3)]},{label}\n")
        paths.append(path)
    return paths


def csv_batches(paths, batch_size, num_epochs, seed):
    """Shuffled batches ``(features float32 [n, 2], colours bytes [n], labels int32 [n])``."""
    filename_queue = qp.train.string_input_producer(paths, num_epochs=num_epochs, seed=seed)
    reader = qp.TextLineReader(skip_header_lines=1)

    def rows():
        _, lines = reader.read_up_to(filename_queue, 128)
        x, y, colour, label = qp.io.decode_csv(lines, record_defaults=[[0.0], [0.0], [""], [0]])
        return np.stack([x, y], axis=1), colour, label

    return qp.train.shuffle_batch(rows, batch_size, capacity=500 + 3 * batch_size,
                                  min_after_dequeue=500, num_threads=2, seed=seed,
                                  enqueue_many=True, allow_smaller_final_batch=True)


def main(argv=None):
    """Runs the example; returns ``{"accuracy": ..., "rows": ...}``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--rows-per-file", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="queuepipe-csv-") as tmp:
        paths = write_csv_files(tmp, args.files, args.rows_per_file, args.seed)
        print(f"wrote {len(paths)} CSV files of {args.rows_per_file} rows")
        model = MLP(2, 2, hidden=0, learning_rate=0.1, seed=args.seed)
        rows = correct = 0
        colours = {}
        with qp.Pipeline().as_default():
            batches = csv_batches(paths, args.batch_size, args.epochs, args.seed)
        for features, colour, labels in batches:
            _, right = model.train_step(features, labels)
            rows += len(labels)
            correct += right
            for name in colour:
                colours[name] = colours.get(name, 0) + 1
    expected = args.files * args.rows_per_file * args.epochs
    print(f"trained on {rows} rows ({expected} expected: every line of every epoch once)")
    print("colours seen:", {k.decode(): v for k, v in sorted(colours.items())})
    print(f"training accuracy: {correct / rows:.4f}")
    return {"accuracy": correct / rows, "rows": rows}


if __name__ == "__main__":
    main(sys.argv[1:])
