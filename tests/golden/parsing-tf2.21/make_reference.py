"""Writes expected.npz: TensorFlow's batched ``tf.io.parse_sequence_example`` of the 20
SequenceExamples in ``../tf2.21/sequence.tfrecord``.

Run with TensorFlow (2.21 here), never from the test suite:

    ~/.venvs/queuepipe-peers/bin/python tests/golden/parsing-tf2.21/make_reference.py

The spec is ``SPEC`` below (tests/tf_conformance/test_tf_parsing.py builds the same one).
Keys: ``context.<key>``, ``feature_lists.<key>``, ``lengths.<key>``; a sparse output as
``<...>.indices`` / ``.values`` / ``.dense_shape``. Batches: all 20 records
(``all.<...>``) and records 3-5 (``part.<...>``).
"""

import os

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDS = os.path.join(HERE, "..", "tf2.21", "sequence.tfrecord")

CONTEXT = {"length": tf.io.FixedLenFeature([], tf.int64),
           "title": tf.io.VarLenFeature(tf.string),
           "absent": tf.io.FixedLenFeature([2], tf.float32, default_value=[0.5, -1.0])}
SEQUENCE = {"words": tf.io.VarLenFeature(tf.int64),
            "scores": tf.io.FixedLenSequenceFeature([3], tf.float32),
            "missing": tf.io.FixedLenSequenceFeature([2], tf.int64, allow_missing=True)}

records = [r.numpy() for r in tf.data.TFRecordDataset(RECORDS)]
out = {}
for batch, chosen in (("all", records), ("part", records[3:6])):
    context, lists, lengths = tf.io.parse_sequence_example(chosen, CONTEXT, SEQUENCE)
    for part, values in (("context", context), ("feature_lists", lists), ("lengths", lengths)):
        for key, value in values.items():
            if isinstance(value, tf.SparseTensor):
                for name in ("indices", "values", "dense_shape"):
                    out[f"{batch}.{part}.{key}.{name}"] = getattr(value, name).numpy()
            else:
                out[f"{batch}.{part}.{key}"] = value.numpy()
np.savez(os.path.join(HERE, "expected.npz"), **out)
print(len(out), "arrays")
