"""Epochs of shuffled mini-batches (batch 128, shuffle buffer 10000; large: 1000) from one workload, by each peer.

mnist:  decoded to NumPy image[128,784] uint8 and label[128] int64.
float:  sha256[128] bytes, feature[128,128] float32 and label[128] int64.
tokens: tokens as a sparse batch (indices [n,2], values [n] int64, dense_shape) and label[128] int64.
wide:   200 features (tfdata only).
large:  payload[128] bytes (100 KiB each) and label[128] int64 (floor and tfdata).

usage: ~/.venvs/queuepipe-peers/bin/python benchmarks/bench_peers.py DATADIR PEER [--epochs 1]
       [--workload mnist|float|tokens|wide|large]
(bench.py --peers-python runs it so; benchmarks/README.md says how to make that virtualenv)
PEER: floor | tfdata | tfdata_single | tf1queue (mnist, float, tokens) |
      tfrecord_pkg | tfrecord_pkg_dl2 (mnist only)
Prints: PEER examples N seconds S rate R/s label_sum L [token_sum T] steady_cpu_us C
(C: the process's CPU, every thread, from the first batch to the end per record after it; the
floor, which has no batches, counts its whole run)
"""
import glob
import os
import sys
import time

import numpy as np

FIRST = []  # time and process CPU time the first batch reached the trainer
WORKLOAD = sys.argv[sys.argv.index("--workload") + 1] if "--workload" in sys.argv else "mnist"
# bench.py's BATCH and buffer_of(): 100 KiB records get a buffer of 1000 (10000 is 1 GiB)
BATCH, BUFFER = 128, 1000 if WORKLOAD == "large" else 10000
TOKEN_SUM = [0]  # tokens workload: the sum of every token id delivered


def mark():
    if not FIRST:
        FIRST.append((time.perf_counter(), time.process_time()))


def files_of(d):
    return sorted(glob.glob(os.path.join(d, WORKLOAD, "*.tfrecord")))


def peer_floor(files, epochs):
    """Read every byte and check both CRCs of every record: the physical floor in pure Python + crc32c."""
    import struct
    import crc32c

    def unmask(c):
        r = (c - 0xA282EAD8) & 0xFFFFFFFF
        return ((r >> 17) | (r << 15)) & 0xFFFFFFFF

    n = 0
    for _ in range(epochs):
        for f in files:
            buf = open(f, "rb").read()
            mv = memoryview(buf)
            off = 0
            while off < len(buf):
                (length,) = struct.unpack_from("<Q", buf, off)
                (lcrc,) = struct.unpack_from("<I", buf, off + 8)
                assert crc32c.crc32c(mv[off:off + 8]) == unmask(lcrc)
                data = mv[off + 12:off + 12 + length]
                (dcrc,) = struct.unpack_from("<I", buf, off + 12 + length)
                assert crc32c.crc32c(data) == unmask(dcrc)
                off += 16 + length
                n += 1
    return n, 0


def peer_tfdata(files, epochs, batched_parse=True):
    import tensorflow as tf
    if WORKLOAD == "tokens":
        return peer_tfdata_tokens(tf, files, epochs, batched_parse)
    if WORKLOAD == "wide":
        return peer_tfdata_wide(tf, files, epochs, batched_parse)
    if WORKLOAD in ("float", "large"):
        return peer_tfdata_dense(tf, files, epochs, batched_parse)
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files))
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.repeat(epochs).shuffle(BUFFER)
    if batched_parse:
        ds = ds.batch(BATCH)

        def parse(x):
            p = tf.io.parse_example(x, spec)
            return tf.io.decode_raw(p["image"], tf.uint8), p["label"]
        ds = ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    else:
        def parse1(x):
            p = tf.io.parse_single_example(x, spec)
            return tf.io.decode_raw(p["image"], tf.uint8), p["label"]
        ds = ds.map(parse1, num_parallel_calls=tf.data.AUTOTUNE).batch(BATCH)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    n, s = 0, 0
    for img, lab in ds:
        img, lab = img.numpy(), lab.numpy()
        mark()
        n += len(lab)
        s += int(lab.sum())
    return n, s


def wide_spec(tf):
    """make_data.py's wide schema: f0..f199 (int64, float, bytes by i % 3; even i FixedLen with a
    default, odd i VarLen) and label."""
    kinds = [(tf.int64, 0), (tf.float32, 0.0), (tf.string, b"")]
    spec = {"label": tf.io.FixedLenFeature([], tf.int64)}
    for i in range(200):
        dt, default = kinds[i % 3]
        spec[f"f{i}"] = tf.io.VarLenFeature(dt) if i % 2 else \
            tf.io.FixedLenFeature([], dt, default_value=default)
    return spec


def parsed_batches(tf, files, epochs, batched_parse, spec):
    """tf.data's shuffled, parsed batches of ``files`` (``spec`` parsed per batch or per record)."""
    ds = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files))
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=4, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.repeat(epochs).shuffle(BUFFER)
    if batched_parse:
        ds = ds.batch(BATCH).map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE)
    else:
        ds = ds.map(lambda x: tf.io.parse_single_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE)
        ds = ds.batch(BATCH)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    return ds


def peer_tfdata_wide(tf, files, epochs, batched_parse):
    spec = wide_spec(tf)
    ds = parsed_batches(tf, files, epochs, batched_parse, spec)
    n, s = 0, 0
    for p in ds:
        lab = p["label"].numpy()
        mark()
        n += len(lab)
        s += int(lab.sum())
    return n, s


def dense_spec(tf):
    """The float and large workloads' specs (bench.py's _specs)."""
    if WORKLOAD == "large":
        return {"payload": tf.io.FixedLenFeature([], tf.string),
                "label": tf.io.FixedLenFeature([], tf.int64)}
    return {"sha256": tf.io.FixedLenFeature([], tf.string),
            "feature": tf.io.FixedLenFeature([128], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64)}


def peer_tfdata_dense(tf, files, epochs, batched_parse):
    """float and large: every feature of every batch brought out as NumPy (bytes: objects)."""
    ds = parsed_batches(tf, files, epochs, batched_parse, dense_spec(tf))
    n, s = 0, 0
    for p in ds:
        arrays = {key: value.numpy() for key, value in p.items()}
        mark()
        n += len(arrays["label"])
        s += int(arrays["label"].sum())
    return n, s


def peer_tfdata_tokens(tf, files, epochs, batched_parse):
    spec = {"tokens": tf.io.VarLenFeature(tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
    ds = parsed_batches(tf, files, epochs, batched_parse, spec)
    n, s = 0, 0
    for p in ds:
        sp, lab = p["tokens"], p["label"].numpy()
        values, _indices = sp.values.numpy(), sp.indices.numpy()
        mark()
        n += len(lab)
        s += int(lab.sum())
        TOKEN_SUM[0] += int(values.sum())
    return n, s


def peer_tf1queue(files, epochs):
    """The seeds' own pattern: string_input_producer -> TFRecordReader -> parse_single_example -> shuffle_batch."""
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    fq = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=True)
    reader = tf.TFRecordReader()
    _, ser = reader.read(fq)
    if WORKLOAD == "tokens":
        p = tf.parse_single_example(ser, {"tokens": tf.VarLenFeature(tf.int64),
                                          "label": tf.FixedLenFeature([], tf.int64)})
        tensors = [p["tokens"]]  # a SparseTensor: shuffle_batch batches it into one SparseTensor
    elif WORKLOAD == "float":
        p = tf.parse_single_example(ser, dense_spec(tf))
        tensors = [p["sha256"], p["feature"]]  # shapes fully defined: [] and [128]
    else:
        p = tf.parse_single_example(ser, {"image": tf.FixedLenFeature([], tf.string),
                                          "label": tf.FixedLenFeature([], tf.int64)})
        tensors = [tf.reshape(tf.decode_raw(p["image"], tf.uint8), [784])]
    batch = tf.train.shuffle_batch(tensors + [p["label"]], batch_size=BATCH, capacity=BUFFER + 3 * BATCH,
                                   min_after_dequeue=BUFFER, num_threads=2,
                                   allow_smaller_final_batch=True)
    n, s = 0, 0
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess=sess, coord=coord)
        try:
            while not coord.should_stop():
                *features, lb = sess.run(batch)
                if WORKLOAD == "tokens":
                    TOKEN_SUM[0] += int(features[0].values.sum())
                mark()
                n += len(lb)
                s += int(lb.sum())
        except tf.errors.OutOfRangeError:
            pass
        finally:
            coord.request_stop()
        coord.join(threads)
    return n, s


def peer_tfrecord_pkg(files, epochs, workers=0):
    """The 'tfrecord' PyPI package with a PyTorch DataLoader (its documented usage)."""
    import torch
    from tfrecord.torch.dataset import MultiTFRecordDataset
    pattern = os.path.join(os.path.dirname(files[0]), "{}.tfrecord")

    def decode(d):
        return {"image": np.frombuffer(d["image"], np.uint8), "label": d["label"]}
    splits = {os.path.basename(f)[:-9]: 1.0 / len(files) for f in files}
    n, s = 0, 0
    for _ in range(epochs):
        ds = MultiTFRecordDataset(pattern, None, splits, {"image": "byte", "label": "int"},
                                  shuffle_queue_size=BUFFER, infinite=False, transform=decode)
        dl = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=workers)
        for b in dl:
            lab = b["label"].numpy().reshape(-1)
            img = b["image"].numpy()
            mark()
            n += len(lab)
            s += int(lab.sum())
    return n, s


def main():
    d, peer = sys.argv[1], sys.argv[2]
    epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 1
    files = files_of(d)
    t0, cpu0 = time.perf_counter(), time.process_time()
    if peer == "floor":
        n, s = peer_floor(files, epochs)
    elif peer == "tfdata":
        n, s = peer_tfdata(files, epochs)
    elif peer == "tfdata_single":
        n, s = peer_tfdata(files, epochs, batched_parse=False)
    elif peer == "tf1queue":
        n, s = peer_tf1queue(files, epochs)
    elif peer == "tfrecord_pkg":
        n, s = peer_tfrecord_pkg(files, epochs)
    elif peer == "tfrecord_pkg_dl2":
        n, s = peer_tfrecord_pkg(files, epochs, workers=2)
    else:
        raise SystemExit("unknown peer " + peer)
    t1, cpu1 = time.perf_counter(), time.process_time()
    dt = t1 - t0
    first = (FIRST[0][0] - t0) if FIRST else 0.0
    steady = (n - BATCH) / (t1 - FIRST[0][0]) if FIRST and t1 > FIRST[0][0] else n / dt
    if FIRST:
        steady_cpu_us = (cpu1 - FIRST[0][1]) / max(n - BATCH, 1) * 1e6
    else:  # the floor: its whole run
        steady_cpu_us = (cpu1 - cpu0) / max(n, 1) * 1e6
    tail = f" token_sum {TOKEN_SUM[0]}" if WORKLOAD == "tokens" and peer != "floor" else ""
    print(f"{peer} examples {n} seconds {dt:.3f} first_batch {first:.3f} rate {n / dt:.0f}/s "
          f"steady {steady:.0f}/s label_sum {s}{tail} steady_cpu_us {steady_cpu_us:.3f}")


if __name__ == "__main__":
    main()
