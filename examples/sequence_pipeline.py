"""Variable-length sequences: SequenceExample records batched with ``dynamic_pad=True``.

Each record is a ``SequenceExample``: a context (the label and the length) and a feature list
``tokens`` with one int64 per step, of a different length in every record. The pipeline is
TF1's::

    _, serialized = reader.read(filename_queue)
    context, sequence = qp.io.parse_single_sequence_example(serialized, context_features=...,
                                                            sequence_features=...)
    batches = qp.train.batch(producer, batch_size, dynamic_pad=True)

``dynamic_pad=True`` pads every variable dimension to the longest element of each batch (with
0, or ``b""`` for strings), so a batch of tokens is ``[batch, longest]``; the context
``length`` recovers the mask. A NumPy bag-of-tokens classifier then learns whether token 7
occurs in a sequence.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

import queuepipe as qp
from _shared import MLP

VOCABULARY = 20  # token 0 is the padding
CONTEXT = {"label": qp.io.FixedLenFeature([], qp.int64),
           "length": qp.io.FixedLenFeature([], qp.int64)}
SEQUENCE = {"tokens": qp.io.FixedLenSequenceFeature([], qp.int64)}


def write_sequences(path, count, seed):
    """Writes ``count`` SequenceExamples of 3 to 30 tokens in 1..VOCABULARY-1."""
    rng = np.random.default_rng(seed)
    with qp.python_io.TFRecordWriter(path) as writer:
        for _ in range(count):
            tokens = rng.integers(1, VOCABULARY, rng.integers(3, 31))
            example = qp.train.make_sequence_example(
                context={"label": int(7 in tokens), "length": len(tokens)},
                feature_lists={"tokens": [int(t) for t in tokens]})
            writer.write(example.SerializeToString())


def padded_batches(path, batch_size, num_epochs):
    """Batches ``(tokens int64 [batch, longest], length [batch], label [batch])``."""
    filename_queue = qp.train.string_input_producer([path], num_epochs=num_epochs, seed=0)
    reader = qp.TFRecordReader()

    def produce():
        _, serialized = reader.read(filename_queue)
        context, sequence = qp.io.parse_single_sequence_example(
            serialized, context_features=CONTEXT, sequence_features=SEQUENCE)
        return sequence["tokens"], context["length"], context["label"]

    return qp.train.batch(produce, batch_size, num_threads=2, capacity=256, dynamic_pad=True,
                          allow_smaller_final_batch=True)


def bag_of_tokens(tokens):
    """Counts of each token per row; the padding (token 0) is dropped."""
    counts = np.zeros((len(tokens), VOCABULARY), np.float32)
    rows = np.repeat(np.arange(len(tokens)), tokens.shape[1])
    np.add.at(counts, (rows, tokens.reshape(-1)), 1.0)
    counts[:, 0] = 0
    return counts


def main(argv=None):
    """Runs the example; returns ``{"accuracy": ..., "sequences": ..., "longest": ...}``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sequences", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    model = MLP(VOCABULARY, 2, hidden=0, learning_rate=0.05, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="queuepipe-seq-") as tmp:
        path = os.path.join(tmp, "sequences.tfrecord")
        write_sequences(path, args.sequences, args.seed)
        with qp.Pipeline().as_default():
            batches = padded_batches(path, args.batch_size, args.epochs)
        total = seen = correct = longest = 0
        last_epoch_from = (args.epochs - 1) * args.sequences
        for i, (tokens, lengths, labels) in enumerate(batches):
            # every row is padded with zeros past its own length, up to the batch's longest
            assert tokens.shape[1] == lengths.max()
            assert ((tokens != 0).sum(axis=1) == lengths).all()
            if i == 0:
                print(f"first batch: tokens {tokens.shape} (longest {lengths.max()}), "
                      f"lengths {lengths[:8].tolist()}...")
                print(f"  row 0: {tokens[0].tolist()}")
            right = model.train_step(bag_of_tokens(tokens), labels)[1]
            if total >= last_epoch_from:
                correct += right
                seen += len(labels)
            total += len(labels)
            longest = max(longest, tokens.shape[1])
    print(f"{total} sequences in padded batches, longest {longest} steps")
    print(f"last-epoch training accuracy: {correct / seen:.4f}")
    return {"accuracy": correct / seen, "sequences": total, "longest": longest}


if __name__ == "__main__":
    main(sys.argv[1:])
