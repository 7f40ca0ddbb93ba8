"""Write the benchmark workloads as TFRecord shards with TensorFlow's own writer.

usage: ~/.venvs/queuepipe-peers/bin/python benchmarks/make_data.py OUTDIR [--records 60000]
       [--shards 8]

Runs under the peers' virtualenv (TensorFlow; see benchmarks/README.md). OUTDIR is then
bench.py's ``--data``: give a folder of your own (bench.py's default is
``~/.cache/queuepipe/bench-data``), not a fixed one in the shared temporary directory.

Workloads (one folder each):
  mnist/   image: bytes (784 uint8), label: int64              (seed 000/004 shape)
  float/   sha256: bytes, feature: float_list[128], label: int64 (seed 002 shape)
  tokens/  tokens: int64_list of 8 to 256 ids (variable length, a VarLenFeature), label: int64
           (text-shaped data: the ragged case)
  wide/    200 features f0..f199 (by i % 3: int64, float, bytes; even i: one value, a
           FixedLenFeature with a default; odd i: 0-2 values, a VarLenFeature), each record holding
           a random 80% of them, and label: int64; at most 20,000 records (the wide schema case)
  large/   payload: 102,400 random bytes (100 KiB), label: int64; at most 2,000 records (the
           large-record case)
"""
import argparse
import hashlib
import os

import numpy as np
import tensorflow as tf


def feat_bytes(v):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=v))


def feat_int(v):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=v))


def feat_float(v):
    return tf.train.Feature(float_list=tf.train.FloatList(value=v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--shards", type=int, default=8)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(a.records, 784), dtype=np.uint8)
    labels = rng.integers(0, 10, size=a.records)
    floats = rng.standard_normal((a.records, 128)).astype(np.float32)
    lengths = rng.integers(8, 257, size=a.records)
    tokens = np.split(rng.zipf(1.3, size=int(lengths.sum())) % 50000, np.cumsum(lengths)[:-1])
    for name in ("mnist", "float", "tokens"):
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        writers = [tf.io.TFRecordWriter(os.path.join(d, f"shard-{i:05d}-of-{a.shards:05d}.tfrecord"))
                   for i in range(a.shards)]
        for i in range(a.records):
            if name == "mnist":
                f = {"image": feat_bytes([images[i].tobytes()]), "label": feat_int([int(labels[i])])}
            elif name == "tokens":
                f = {"tokens": feat_int(tokens[i].tolist()), "label": feat_int([int(labels[i])])}
            else:
                f = {"sha256": feat_bytes([hashlib.sha256(str(i).encode()).hexdigest().encode()]),
                     "feature": feat_float(floats[i].tolist()), "label": feat_int([int(labels[i])])}
            ex = tf.train.Example(features=tf.train.Features(feature=f))
            writers[i % a.shards].write(ex.SerializeToString())
        for w in writers:
            w.close()
    write_wide(a, labels)
    write_large(a, labels)
    np.savez(os.path.join(a.out, "truth.npz"), images=images, labels=labels, floats=floats,
             token_lengths=lengths, token_sum=np.int64(sum(int(t.sum()) for t in tokens)),
             wide_records=np.int64(min(a.records, WIDE_MAX)))


WIDE_KEYS, WIDE_MAX = 200, 20000


def write_wide(a, labels):
    """The wide workload: records holding different subsets of 200 features."""
    rng = np.random.default_rng(1)
    n = min(a.records, WIDE_MAX)
    d = os.path.join(a.out, "wide")
    os.makedirs(d, exist_ok=True)
    writers = [tf.io.TFRecordWriter(os.path.join(d, f"shard-{i:05d}-of-{a.shards:05d}.tfrecord"))
               for i in range(a.shards)]
    for r in range(n):
        present = rng.random(WIDE_KEYS) < 0.8
        counts = np.where(np.arange(WIDE_KEYS) % 2 == 0, 1, rng.integers(0, 3, WIDE_KEYS))
        f = {"label": feat_int([int(labels[r])])}
        for i in np.flatnonzero(present):
            k = int(counts[i])
            f[f"f{i}"] = (feat_int([7 * r + i] * k), feat_float([0.5 * i] * k),
                          feat_bytes([b"v%d" % i] * k))[i % 3]
        ex = tf.train.Example(features=tf.train.Features(feature=f))
        writers[r % a.shards].write(ex.SerializeToString())
    for w in writers:
        w.close()


LARGE_BYTES, LARGE_MAX = 102400, 2000


def write_large(a, labels):
    """The large workload: 100 KiB records, as bench.py's write_large writes them."""
    rng = np.random.default_rng(2)
    d = os.path.join(a.out, "large")
    os.makedirs(d, exist_ok=True)
    writers = [tf.io.TFRecordWriter(os.path.join(d, f"shard-{i:05d}-of-{a.shards:05d}.tfrecord"))
               for i in range(a.shards)]
    for r in range(min(a.records, LARGE_MAX)):
        payload = rng.integers(0, 256, LARGE_BYTES, dtype=np.uint8).tobytes()
        f = {"payload": feat_bytes([payload]), "label": feat_int([int(labels[r])])}
        ex = tf.train.Example(features=tf.train.Features(feature=f))
        writers[r % a.shards].write(ex.SerializeToString())
    for w in writers:
        w.close()


if __name__ == "__main__":
    main()
