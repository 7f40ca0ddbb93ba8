"""A TF1 input module in the style of the CIFAR-10 tutorial's: fixed-length binary records
(one label byte, then a 3x32x32 depth-major image) read by ``tf.FixedLengthRecordReader``,
split with ``tf.strided_slice``, reshaped and transposed to height-width-depth, cropped to
the centre by indexing, standardized by ``tf.image.per_image_standardization``, shapes set
with ``set_shape``, batched by ``tf.train.batch`` under a ``tf.summary.image``.

This file runs under TensorFlow 2.21 as it is; tests/test_compat_listings.py runs it with its
import line changed to ``import queuepipe.compat.v1 as tf`` and nothing else.
"""
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

IMAGE_SIZE = 24
LABEL_BYTES = 1
HEIGHT, WIDTH, DEPTH = 32, 32, 3


def read_record(filename_queue):
    image_bytes = HEIGHT * WIDTH * DEPTH
    reader = tf.FixedLengthRecordReader(record_bytes=LABEL_BYTES + image_bytes)
    key, value = reader.read(filename_queue)
    record = tf.decode_raw(value, tf.uint8)
    label = tf.cast(tf.strided_slice(record, [0], [LABEL_BYTES]), tf.int32)
    depth_major = tf.reshape(tf.strided_slice(record, [LABEL_BYTES],
                                              [LABEL_BYTES + image_bytes]),
                             [DEPTH, HEIGHT, WIDTH])
    return key, label, tf.transpose(depth_major, [1, 2, 0])


def inputs(data_dir, batch_size):
    filenames = [os.path.join(data_dir, "test_batch_%d.bin" % i) for i in range(2)]
    for f in filenames:
        if not tf.gfile.Exists(f):
            raise ValueError("Failed to find file: " + f)
    filename_queue = tf.train.string_input_producer(filenames, num_epochs=1, shuffle=False)
    key, label, image = read_record(filename_queue)
    image = tf.cast(image, tf.float32)
    offset = (HEIGHT - IMAGE_SIZE) // 2
    cropped = image[offset:offset + IMAGE_SIZE, offset:offset + IMAGE_SIZE, :]
    float_image = tf.image.per_image_standardization(cropped)
    float_image.set_shape([IMAGE_SIZE, IMAGE_SIZE, 3])
    label.set_shape([1])
    images, labels, keys = tf.train.batch([float_image, label, key], batch_size=batch_size,
                                          num_threads=1, capacity=100,
                                          allow_smaller_final_batch=True)
    tf.summary.image("images", images)
    return images, tf.reshape(labels, [-1]), keys


def main(data_dir, batch_size=16):
    rng = np.random.RandomState(3)
    for i in range(2):
        records = np.concatenate([rng.randint(0, 10, (20, 1)),
                                  rng.randint(0, 256, (20, 3072))], axis=1).astype(np.uint8)
        records.tofile(os.path.join(data_dir, "test_batch_%d.bin" % i))
    got = []
    with tf.Graph().as_default():
        images, labels, keys = inputs(data_dir, batch_size)
        static = [images.shape.as_list(), labels.shape.as_list()]
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            try:
                while not coord.should_stop():
                    x, y, k = sess.run([images, labels, keys])
                    for image, label, key in zip(x, y, k):
                        got.append([os.path.basename(key.decode()), int(label),
                                    image[::5, ::7, :].tolist()])
            except tf.errors.OutOfRangeError:
                pass
            finally:
                coord.request_stop()
            coord.join(threads)
    return {"static": static, "records": got}
