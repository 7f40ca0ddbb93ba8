"""queuepipe.compat.v1.summary: TF1's summary ops and FileWriter, against TensorFlow 2.21.

The program of ``tests/summary_program.py`` is run here and its event file read back with the
``tensorboard`` package's own reader; TensorFlow's run of the same program is in
``tests/golden/compat-tf2.21/summaries.json`` (``tests/golden/make_summary_answers.py``)."""

import io
import json
import os

import numpy as np
import pytest
from PIL import Image
from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

import queuepipe.compat.v1 as tf
from queuepipe.protos._events import Summary

import summary_program

GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "compat-tf2.21", "summaries.json")


@pytest.fixture(scope="module")
def golden():
    with open(GOLDEN) as f:
        return json.load(f)


def _events(logdir):
    (name,) = os.listdir(logdir)
    return [summary_program.encode_event(event)
            for event in LegacyEventFileLoader(os.path.join(logdir, name)).Load()
            if event.HasField("summary")]


def test_the_program_writes_what_tensorflow_writes(tmp_path, golden):
    seen = summary_program.run(tf, str(tmp_path))
    assert seen == golden["seen"]
    assert _events(str(tmp_path)) == golden["events"]


def test_tensorflows_histogram_buckets(golden):
    (histo,) = [v["histo"] for e in golden["events"] for v in e["values"]
                if v["tag"] == "stats/centred"]
    with tf.Graph().as_default(), tf.Session() as sess:
        data = tf.constant(np.array([-1.5, -0.5, 0.5, 1.5], np.float32))
        got = Summary.FromString(sess.run(tf.summary.histogram("centred", data))).value[0]
    assert list(got.histo.bucket_limit) == histo["bucket_limit"]
    assert list(got.histo.bucket) == histo["bucket"]


def test_a_summary_op_runs_its_input_once_per_run():
    with tf.Graph().as_default():
        q = tf.FIFOQueue(4, [tf.int64], shapes=[[]])
        value = tf.cast(q.dequeue(), tf.float32)
        merged = tf.summary.merge([tf.summary.scalar("value", value),
                                   tf.summary.scalar("twice", value * 2)])
        with tf.Session() as sess:
            sess.run(q.enqueue_many([np.arange(3)]))
            got, number = sess.run([merged, value])
            assert [(v.tag, v.simple_value) for v in Summary.FromString(got).value] == \
                [("value", number), ("twice", 2 * number)]
            assert int(sess.run(q.size())) == 2  # one dequeue for all three fetches


def test_without_a_file_writer_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.summary.scalar("x", tf.constant(1.0))
        assert Summary.FromString(sess.run(tf.summary.merge_all())).value[0].tag == "x"
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("value, message", [
    (np.zeros(2, np.float32), r"^tags and values are not the same shape: \[\] != \[2\] "
                              r"\(tag 'bad'\)$"),
])
def test_a_scalar_summary_of_a_vector_fails_as_tf_does(value, message):
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run(tf.summary.scalar("bad", tf.constant(value)))


def test_a_histogram_with_nan_fails_as_tf_does():
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"^Nan in summary histogram for: h$"):
            sess.run(tf.summary.histogram("h", tf.constant([1.0, np.nan])))


def test_float_images_map_non_finite_pixels_to_red():
    pixels = np.array([[[[0.0, 0.5, 1.0], [np.inf, 0.0, 0.0]]]], np.float32)
    with tf.Graph().as_default(), tf.Session() as sess:
        got = Summary.FromString(sess.run(tf.summary.image("i", tf.constant(pixels),
                                                           max_outputs=1))).value[0]
    assert got.tag == "i/image" and (got.image.height, got.image.width) == (1, 2)
    png = Image.open(io.BytesIO(got.image.encoded_image_string))
    assert np.asarray(png).tolist() == [[[0, 127, 255], [255, 0, 0]]]


def test_a_summary_built_by_hand_is_written(tmp_path):
    writer = tf.summary.FileWriter(str(tmp_path))
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="loss", simple_value=0.5)]), 3)
    writer.flush()
    writer.close()
    writer.close()  # idempotent
    assert _events(str(tmp_path)) == [
        {"step": 3, "values": [{"tag": "loss", "simple_value": 0.5}]}]
    assert tf.summary.Summary is tf.Summary and tf.summary.Event is tf.Event


def test_queue_summaries_keep_neither_dropped_batches_nor_their_pipeline():
    import gc
    import weakref

    import queuepipe as qp

    def build():
        with qp.Pipeline().as_default() as pipeline:  # the process graph builds into it
            names = tf.train.string_input_producer([b"a"], num_epochs=1)
            tf.train.batch([names.dequeue()], 1)  # its output dropped
            assert [t.name for t in tf.get_collection(tf.GraphKeys.SUMMARIES)] == [
                "input_producer/fraction_of_32_full:0", "batch/fraction_of_32_full:0"]
            return weakref.ref(pipeline)

    pipeline = build()
    gc.collect()
    assert pipeline() is None
