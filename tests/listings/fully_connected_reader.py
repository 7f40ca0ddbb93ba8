"""TF1's classic "fully_connected_reader" input pipeline, as TF1 scripts wrote it: MNIST-shaped
Examples converted to TFRecords, then read back by a queue-based graph built under
``tf.name_scope('input')`` (a reader, ``parse_single_example``, ``decode_raw`` and
``set_shape``, a cast and a normalisation, a ``VarLenFeature`` of tokens kept sparse) and
batched by ``tf.train.shuffle_batch``, in a Session loop with a Coordinator until
``OutOfRangeError``.

This file runs under TensorFlow 2.21 as it is; tests/test_compat_listings.py runs it with its
import line changed to ``import queuepipe.compat.v1 as tf`` and nothing else.
"""
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

IMAGE_PIXELS = 784
TRAIN_FILE = "train.tfrecords"


def _int64_feature(value):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=value))


def _bytes_feature(value):
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def convert_to(images, labels, path):
    with tf.python_io.TFRecordWriter(path) as writer:
        for index in range(len(images)):
            example = tf.train.Example(features=tf.train.Features(feature={
                "label": _int64_feature([int(labels[index])]),
                "tokens": _int64_feature(list(range(int(labels[index]) % 4))),
                "image_raw": _bytes_feature(images[index].tobytes())}))
            writer.write(example.SerializeToString())


def read_and_decode(filename_queue):
    reader = tf.TFRecordReader()
    _, serialized_example = reader.read(filename_queue)
    features = tf.parse_single_example(
        serialized_example,
        features={
            "image_raw": tf.FixedLenFeature([], tf.string),
            "label": tf.FixedLenFeature([], tf.int64),
            "tokens": tf.VarLenFeature(tf.int64),
        })
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape([IMAGE_PIXELS])
    image = tf.cast(image, tf.float32) * (1. / 255) - 0.5
    label = tf.cast(features["label"], tf.int32)
    return image, label, features["tokens"]


def inputs(train_dir, batch_size, num_epochs):
    filename = os.path.join(train_dir, TRAIN_FILE)
    with tf.name_scope("input"):
        filename_queue = tf.train.string_input_producer([filename], num_epochs=num_epochs)
        image, label, tokens = read_and_decode(filename_queue)
        images, sparse_labels, token_batch = tf.train.shuffle_batch(
            [image, label, tokens], batch_size=batch_size, num_threads=2,
            capacity=1000 + 3 * batch_size, min_after_dequeue=100)
    return images, sparse_labels, token_batch


def main(train_dir, batch_size=50, num_epochs=2):
    """Writes 300 records, reads them ``num_epochs`` times; returns what was read."""
    rng = np.random.RandomState(7)
    images = rng.randint(0, 256, size=(300, IMAGE_PIXELS)).astype(np.uint8)
    labels = rng.randint(0, 10, size=300)
    convert_to(images, labels, os.path.join(train_dir, TRAIN_FILE))
    seen, shapes = [], set()
    with tf.Graph().as_default():
        image_batch, label_batch, token_batch = inputs(train_dir, batch_size, num_epochs)
        static = [image_batch.shape.as_list(), label_batch.shape.as_list()]
        init_op = tf.group(tf.global_variables_initializer(),
                           tf.local_variables_initializer())
        with tf.Session() as sess:
            sess.run(init_op)
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            step = 0
            try:
                while not coord.should_stop():
                    x, y, t = sess.run([image_batch, label_batch, token_batch])
                    shapes.add((x.shape, str(x.dtype), y.shape, str(y.dtype),
                                tuple(t.dense_shape.tolist())[:1]))
                    rows = [t.values[t.indices[:, 0] == i].tolist() for i in range(len(y))]
                    for pixels, label, row in zip(x, y, rows):
                        raw = np.rint((pixels + 0.5) * 255).astype(np.int64)
                        seen.append([int(label), int(raw.sum()), int(raw[:5].sum()), row])
                    step += 1
            except tf.errors.OutOfRangeError:
                pass
            finally:
                coord.request_stop()
            coord.join(threads)
    return {"steps": step, "static": static, "shapes": sorted(map(str, shapes)),
            "records": sorted(seen)}
