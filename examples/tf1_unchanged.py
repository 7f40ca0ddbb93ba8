"""A TF1 input pipeline run unchanged but for its import line: ``queuepipe.compat.v1``.

The code below is TensorFlow 1's classic "fully_connected_reader" pipeline as TF1 scripts
wrote it: Examples written with ``tf.python_io.TFRecordWriter``, then read back by a graph
built once (``read_and_decode``: a reader, ``parse_single_example``, ``decode_raw``, a cast
and a normalisation), batched by ``tf.train.shuffle_batch``, and run in a ``tf.Session``
loop with a Coordinator until ``OutOfRangeError``. Only the import line differs from the TF1
script::

    import tensorflow.compat.v1 as tf      ->      import queuepipe.compat.v1 as tf

The data is real: scikit-learn's 8x8 handwritten digits. The model is a NumPy classifier
(examples/_shared.py) trained on the batches ``sess.run`` returns.
"""

import argparse
import os
import sys
import tempfile

import numpy as np

import queuepipe.compat.v1 as tf
from _shared import MLP


def convert_to(images, labels, path):
    """TF1's ``convert_to``: one Example per image (raw uint8 bytes and an int64 label)."""
    with tf.python_io.TFRecordWriter(path) as writer:
        for image, label in zip(images, labels):
            example = tf.train.Example(features=tf.train.Features(feature={
                "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[image.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
            }))
            writer.write(example.SerializeToString())


def read_and_decode(filename_queue):
    """TF1's ``read_and_decode``: built once; the runner threads run it per record."""
    reader = tf.TFRecordReader()
    _, serialized_example = reader.read(filename_queue)
    features = tf.parse_single_example(serialized_example, features={
        "image_raw": tf.FixedLenFeature([], tf.string),
        "label": tf.FixedLenFeature([], tf.int64),
    })
    image = tf.decode_raw(features["image_raw"], tf.uint8)
    image = tf.reshape(image, [64])
    image = tf.cast(image, tf.float32) * (1.0 / 16) - 0.5
    label = tf.cast(features["label"], tf.int32)
    return image, label


def inputs(path, batch_size, num_epochs):
    filename_queue = tf.train.string_input_producer([path], num_epochs=num_epochs)
    image, label = read_and_decode(filename_queue)
    return tf.train.shuffle_batch([image, label], batch_size=batch_size, num_threads=2,
                                  capacity=1000 + 3 * batch_size, min_after_dequeue=1000,
                                  allow_smaller_final_batch=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args(argv)
    from sklearn.datasets import load_digits

    digits = load_digits()
    images, labels = digits.images.astype(np.uint8), digits.target
    held_out = len(images) // 5
    model = MLP(64, 10, hidden=32, learning_rate=0.05, seed=0)
    with tempfile.TemporaryDirectory(prefix="tf1-unchanged-") as tmp:
        path = os.path.join(tmp, "train.tfrecords")
        convert_to(images[held_out:], labels[held_out:], path)
        print(f"wrote {len(images) - held_out} Examples to train.tfrecords")

        with tf.Graph().as_default():
            image_batch, label_batch = inputs(path, args.batch_size, args.epochs)
            init_op = tf.group(tf.global_variables_initializer(),
                               tf.local_variables_initializer())
            with tf.Session() as sess:
                sess.run(init_op)
                coord = tf.train.Coordinator()
                threads = tf.train.start_queue_runners(sess=sess, coord=coord)
                step, seen = 0, 0
                try:
                    while not coord.should_stop():
                        x, y = sess.run([image_batch, label_batch])
                        loss, _ = model.train_step(x, y)
                        step, seen = step + 1, seen + len(y)
                        if step % 100 == 0:
                            print(f"step {step}: loss {loss:.3f}")
                except tf.errors.OutOfRangeError:
                    print(f"done training for {args.epochs} epochs, {step} steps")
                finally:
                    coord.request_stop()
                coord.join(threads)
    print(f"trained on {seen} examples ({args.epochs} x {len(images) - held_out} expected)")
    x_test = images[:held_out].reshape(-1, 64).astype(np.float32) / 16 - 0.5
    accuracy = float(np.mean(model.predict(x_test) == labels[:held_out]))
    print(f"held-out accuracy: {accuracy:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
