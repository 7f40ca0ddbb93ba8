"""A TF1 program with summaries, run the same way through TensorFlow and queuepipe.compat.v1.

:func:`run` builds input queues (whose fill summaries TF1 adds by itself), summaries of a
batch, merges them and writes three steps with ``tf.summary.FileWriter``; it returns what the
program saw. :func:`encode_event` turns an event read back from the file into plain JSON.
``tests/golden/make_summary_answers.py`` recorded both from TensorFlow 2.21 into
``tests/golden/compat-tf2.21/summaries.json``; ``tests/test_compat_summary.py`` compares
queuepipe's with it. Not a test module: both sides import it.

The fill values are deterministic: every runner thread has ended (its input exhausted) before
the first summary is run, and no run both dequeues from a queue and reads its size.
"""

import io

import numpy as np
from PIL import Image


def build(tf):
    """The graph; returns ``(merged, user, shuffled)``: ``merge_all()``, the merge of the
    ``"user"`` collection (the summaries of a batch, which dequeue it), and a batch whose
    fill summary ``merged`` holds (kept, as a program keeps the batches it builds)."""
    numbers = tf.train.range_input_producer(10, num_epochs=1, shuffle=False, capacity=16)
    batch = tf.train.batch([tf.cast(numbers.dequeue(), tf.float32)], 4, capacity=12)
    words = tf.train.string_input_producer([b"a", b"b"], num_epochs=3, shuffle=False,
                                           capacity=8)
    shuffled = tf.train.shuffle_batch([words.dequeue()], 2, capacity=10, min_after_dequeue=2,
                                      seed=3)
    user = ["user"]
    with tf.name_scope("stats"):
        tf.summary.scalar("mean", tf.reduce_mean(batch), collections=user)
        tf.summary.scalar("mean", tf.reduce_max(batch), collections=user)
        tf.summary.histogram("values", batch, collections=user)
        tf.summary.histogram("centred", batch - 1.5, collections=user)
        tf.summary.image("pictures", tf.reshape(batch, [2, 1, 2, 1]), collections=user)
        tf.summary.image("signed", tf.reshape(batch - 2.0, [2, 1, 2, 1]), max_outputs=1,
                         collections=user)
        tf.summary.scalar("max", tf.reduce_max(batch), family="fam", collections=user)
    tf.summary.scalar("constant", tf.constant(2.5))
    tf.summary.image("rgb", tf.constant(np.arange(12, dtype=np.uint8).reshape(1, 2, 2, 3)),
                     max_outputs=1)
    return tf.summary.merge_all(), tf.summary.merge_all("user"), shuffled


def queue_summary_names(tf):
    """The summaries the other input functions add, by name (built, not run)."""
    with tf.Graph().as_default():
        x, = tf.train.slice_input_producer([tf.constant([1.0, 2.0, 3.0])], shuffle=False)
        with tf.name_scope("input"):
            kept = [tf.train.maybe_batch([x], tf.constant(True), 2, capacity=6),
                    tf.train.maybe_shuffle_batch([x], 2, 8, 3, tf.constant(True)),
                    tf.train.batch_join([[x], [x]], 2, capacity=5),
                    tf.train.shuffle_batch_join([[x]], 2, capacity=9, min_after_dequeue=4),
                    tf.train.input_producer(tf.constant([[1], [2]]), summary_name="mine")]
        return {"names": [t.name for t in tf.get_collection(tf.GraphKeys.SUMMARIES)],
                "built": len(kept)}


def run(tf, logdir):
    """Builds and runs the program, writing steps 0, 10 and 20 to ``logdir``."""
    seen = {"queue_summary_names": queue_summary_names(tf)}
    with tf.Graph().as_default():
        merged, user, shuffled = build(tf)  # shuffled kept, as a program keeps it
        seen["shuffled"] = shuffled.name
        seen["collection"] = [t.name for t in tf.get_collection(tf.GraphKeys.SUMMARIES)]
        seen["user_collection"] = [t.name for t in tf.get_collection("user")]
        seen["stats_scope"] = [t.name for t in tf.get_collection("user", scope="stats/m")]
        seen["empty_merge_all"] = tf.summary.merge_all("nothing") is None
        duplicate = tf.summary.merge([merged, merged])
        writer = tf.summary.FileWriter(logdir)
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            for thread in threads:  # a runner ends when its input is exhausted; a
                if "close_on_stop" not in thread.name.replace("-", "_"):  # closer waits
                    thread.join()  # for request_stop
            first = sess.run(merged)
            seen["run_type"] = type(first).__name__
            writer.add_graph(sess.graph)
            writer.add_summary(first, 0)
            writer.add_summary(sess.run(user), global_step=10)
            writer.add_summary(sess.run(merged), 20)
            try:
                sess.run(duplicate)
                seen["duplicate"] = None
            except Exception as e:  # noqa: BLE001 - the class is the answer
                seen["duplicate"] = type(e).__name__
            coord.request_stop()
            coord.join(threads)
        writer.close()
    return seen


def encode_event(event):
    """A summary event as plain JSON: step, and each value by tag (images decoded)."""
    values = []
    for value in event.summary.value:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            values.append({"tag": value.tag, "simple_value": value.simple_value})
        elif kind == "histo":
            h = value.histo
            values.append({"tag": value.tag, "histo": {
                "min": h.min, "max": h.max, "num": h.num, "sum": h.sum,
                "sum_squares": h.sum_squares, "bucket_limit": list(h.bucket_limit),
                "bucket": list(h.bucket)}})
        else:
            pixels = np.asarray(Image.open(io.BytesIO(value.image.encoded_image_string)))
            values.append({"tag": value.tag, "image": {
                "height": value.image.height, "width": value.image.width,
                "colorspace": value.image.colorspace, "pixels": pixels.tolist()}})
    return {"step": event.step, "values": values}
