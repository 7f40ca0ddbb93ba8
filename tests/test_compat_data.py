"""queuepipe.compat.v1's tf.data: what TF's answers (tests/test_compat_answers.py) cannot
show: the seeded shuffle, the threads that run the per-element graph, and that every one of
them is stopped when the session closes or the iterator starts again."""

import os
import subprocess
import sys
import threading
from collections import Counter

import numpy as np
import pytest

import queuepipe.compat.v1 as tf


def _all(session, element):
    out = []
    with pytest.raises(tf.errors.OutOfRangeError):
        while True:
            out.append(session.run(element))
    return out


def test_a_seeded_shuffle_repeats_and_gives_each_element_once_per_epoch():
    orders = []
    for _ in range(2):
        with tf.Graph().as_default():
            ds = tf.data.Dataset.range(20).shuffle(8, seed=5).repeat(3)
            element = ds.make_one_shot_iterator().get_next()
            with tf.Session() as sess:
                orders.append([int(v) for v in _all(sess, element)])
    assert orders[0] == orders[1]
    epochs = [orders[0][i:i + 20] for i in (0, 20, 40)]
    assert all(Counter(e) == Counter(range(20)) for e in epochs)
    assert epochs[0] != epochs[1] and epochs[0] != list(range(20))  # reshuffled each epoch


def test_map_runs_in_runner_threads_in_order_with_parallel_calls():
    seen = set()

    def where(x):
        seen.add(threading.current_thread().name)
        return x * 3

    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(50).map(
            lambda x: tf.py_func(where, [x], tf.int64), num_parallel_calls=4)
        element = ds.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            got = [int(v) for v in _all(sess, element)]
    assert got == [3 * i for i in range(50)]
    assert threading.current_thread().name not in seen and len(seen) >= 1
    assert all(name.startswith("queuepipe/map/done/runner-") for name in seen)


def test_closing_the_session_stops_an_endless_iterator_and_its_map_threads():
    before = set(threading.enumerate())
    with tf.Graph().as_default():
        ds = tf.data.Dataset.range(5).repeat().map(lambda x: x + 1, num_parallel_calls=3)
        element = ds.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            assert [int(sess.run(element)) for _ in range(7)] == [1, 2, 3, 4, 5, 1, 2]
            assert len(set(threading.enumerate()) - before) >= 4  # the iterator's and map's
    assert set(threading.enumerate()) - before == set()


def test_reinitializing_an_iterator_stops_its_thread_and_starts_from_the_first_element():
    with tf.Graph().as_default():
        it = tf.data.Dataset.range(100).repeat().make_initializable_iterator()
        element = it.get_next()
        with tf.Session() as sess:
            sess.run(it.initializer)
            first = threading.enumerate()
            assert [int(sess.run(element)) for _ in range(3)] == [0, 1, 2]
            sess.run(it.initializer)
            assert int(sess.run(element)) == 0
            alive = [t for t in threading.enumerate() if t.name.startswith("queuepipe/")]
            assert alive and not set(alive) & set(first)  # the old ones were joined


def test_the_iterator_thread_ends_with_its_input():
    with tf.Graph().as_default():
        element = tf.data.Dataset.range(3).make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            assert [int(v) for v in _all(sess, element)] == [0, 1, 2]
            runner = [t for t in threading.enumerate()
                      if t.name == "queuepipe/Iterator/buffer/runner-0"]
            for thread in runner:
                thread.join(timeout=10)  # it ends by itself: the session is still open
            assert not any(t.is_alive() for t in runner)


def test_a_timeout_bounds_get_next():
    with tf.Graph().as_default():
        def slow(x):
            threading.Event().wait(0.5)
            return x
        element = tf.data.Dataset.range(2).map(
            lambda x: tf.py_func(slow, [x], tf.int64)).make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            with pytest.raises(tf.errors.DeadlineExceededError):
                sess.run(element, options=tf.RunOptions(timeout_in_ms=20))
            assert int(sess.run(element)) == 0


def test_list_files_shuffles_by_default_with_a_seed(tmp_path):
    for i in range(6):
        (tmp_path / f"f{i}.txt").write_text(str(i))
    with tf.Graph().as_default():
        ds = tf.data.Dataset.list_files(str(tmp_path / "*.txt"), seed=1)
        names = ds.make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            got = [v.decode().rsplit("/", 1)[1] for v in _all(sess, names)]
    assert sorted(got) == [f"f{i}.txt" for i in range(6)] and got != sorted(got)
    with tf.Graph().as_default():  # as TF 2.21's graph mode: no element, then the end
        none = tf.data.Dataset.list_files(str(tmp_path / "*.none"))
        with tf.Session() as sess:
            assert _all(sess, none.make_one_shot_iterator().get_next()) == []


def test_dataset_elements_are_numpy_as_tfs():
    with tf.Graph().as_default():
        element = tf.data.Dataset.from_tensor_slices(
            {"a": np.arange(3, dtype=np.int32)}).make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            value = sess.run(element)
    assert value == {"a": 0} and value["a"].dtype == np.int32


def test_an_iterator_runs_again_in_a_second_session_of_its_graph():
    before = set(threading.enumerate())
    with tf.Graph().as_default() as graph:
        it = tf.data.Dataset.range(3).repeat().make_initializable_iterator()
        element = it.get_next()
        for _ in range(2):
            with tf.Session() as sess:
                sess.run(it.initializer)
                assert [int(sess.run(element)) for _ in range(4)] == [0, 1, 2, 0]
            assert set(threading.enumerate()) - before == set()
        assert graph._closers == []  # each close forgot what it stopped


def test_a_script_that_never_closes_its_session_still_exits():
    script = ("import queuepipe.compat.v1 as tf\n"
              "ds = tf.data.Dataset.range(10).repeat().map(lambda x: x + 1,"
              " num_parallel_calls=2)\n"
              "sess = tf.Session()\n"
              "print(sess.run(ds.make_one_shot_iterator().get_next()))\n")
    checkout = os.path.abspath(os.path.join(os.path.dirname(tf.__file__), "..", "..", ".."))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([checkout] + sys.path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=50, env=env)
    assert done.returncode == 0 and done.stdout == "1\n", done.stderr[-2000:]
