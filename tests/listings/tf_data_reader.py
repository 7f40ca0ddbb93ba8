"""TF1 input code of the tf.data era in a Session: ``TFRecordDataset(...).map(...)
.shuffle(...).repeat(...).batch(...)`` under ``tf.name_scope('input')``, a
``make_one_shot_iterator().get_next()`` and a loop until ``OutOfRangeError``; a second,
unshuffled pipeline with ``padded_batch`` and an initializable iterator run twice.

This file runs under TensorFlow 2.21 as it is; tests/test_compat_listings.py runs it with its
import line changed to ``import queuepipe.compat.v1 as tf`` and nothing else.
"""
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()


def write_records(path, count):
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[bytes([(i * 7 + j) % 256 for j in range(16)])])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
                "words": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=[i + k for k in range(i % 3)])),
            })).SerializeToString())


def decode(serialized_example):
    features = tf.parse_single_example(serialized_example, features={
        "image_raw": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64),
    })
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image.set_shape((16))
    label = tf.cast(features["label"], tf.int32)
    return image, label


def normalize(image, label):
    image = tf.cast(image, tf.float32) * (1. / 255) - 0.5
    return image, label


def inputs(filenames, batch_size, num_epochs):
    with tf.name_scope("input"):
        dataset = tf.data.TFRecordDataset(filenames)
        dataset = dataset.map(decode)
        dataset = dataset.map(normalize, num_parallel_calls=2)
        dataset = dataset.shuffle(100 + 3 * batch_size, seed=1)
        dataset = dataset.repeat(num_epochs)
        dataset = dataset.batch(batch_size)
        iterator = dataset.make_one_shot_iterator()
    return iterator.get_next()


def words(filenames):
    dataset = tf.data.TFRecordDataset(filenames).map(
        lambda s: tf.parse_single_example(s, {"words": tf.VarLenFeature(tf.int64)})["words"])
    dense = dataset.map(tf.sparse_tensor_to_dense).padded_batch(4, padded_shapes=[None])
    return dataset.batch(4), dense


def main(data_dir, batch_size=32, num_epochs=3):
    filenames = [os.path.join(data_dir, "train-%d.tfrecords" % k) for k in range(2)]
    for k, filename in enumerate(filenames):
        write_records(filename, 40 + 10 * k)
    seen, shapes = [], set()
    with tf.Graph().as_default():
        image_batch, label_batch = inputs(filenames, batch_size, num_epochs)
        static = [image_batch.shape.as_list(), label_batch.shape.as_list()]
        sparse, dense = words(filenames)
        iterator = dense.make_initializable_iterator()
        padded = iterator.get_next()
        sparse_next = sparse.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            sess.run(tf.group(tf.global_variables_initializer(),
                              tf.local_variables_initializer()))
            step = 0
            try:
                while True:
                    x, y = sess.run([image_batch, label_batch])
                    shapes.add(str((x.shape, str(x.dtype), y.shape, str(y.dtype))))
                    for pixels, label in zip(x, y):
                        raw = np.rint((pixels + 0.5) * 255).astype(np.int64)
                        seen.append([int(label)] + raw.tolist())
                    step += 1
            except tf.errors.OutOfRangeError:
                pass
            passes = []
            for _ in range(2):
                sess.run(iterator.initializer)
                batches = [sess.run(padded).tolist() for _ in range(3)]
                passes.append(batches)
            first = sess.run(sparse_next)
    return {"steps": step, "static": static, "shapes": sorted(shapes), "records": sorted(seen),
            "padded": passes, "sparse": [first.indices.tolist(), first.values.tolist(),
                                         first.dense_shape.tolist()]}
