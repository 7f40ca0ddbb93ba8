"""queuepipe.compat.v1: TF1 input code run as TF1 users write it, with only the import changed.

Each test is a TF1 listing (the idioms of ../shared/tf1_patterns.md: build the graph, then run
it in a session) and checks what TF1 gives: every record once per epoch, one dequeue per
``sess.run``, the ``OutOfRangeError`` at the end, TF's dtypes and shapes.
"""

import os
import sys
import threading
from collections import Counter

import numpy as np
import pytest

import queuepipe as qp
import queuepipe.compat.v1 as tf


def write_mnist_like(path, n, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 784), dtype=np.uint8)
    with qp.io.TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(qp.make_example({"image": images[i].tobytes(), "label": i})
                         .SerializeToString())
    return images


def read_my_file_format(filename_queue):
    reader = tf.TFRecordReader()  # created once, at graph-build time
    _, serialized = reader.read(filename_queue)
    f = tf.parse_single_example(serialized, {
        "image": tf.FixedLenFeature([], tf.string), "label": tf.FixedLenFeature([], tf.int64)})
    image = tf.cast(tf.reshape(tf.decode_raw(f["image"], tf.uint8), [784]), tf.float32)
    return image / 255.0 * 2.0 - 1.0, tf.cast(f["label"], tf.int32)


def test_the_classic_listing_gives_every_record_once_per_epoch_one_batch_per_run(tmp_path):
    files = [tmp_path / "a.tfrecord", tmp_path / "b.tfrecord"]
    images = np.concatenate([write_mnist_like(files[0], 24, 1), write_mnist_like(files[1], 24, 2)])
    labels_written = list(range(24)) * 2
    with tf.Graph().as_default():
        filename_queue = tf.train.string_input_producer([str(f) for f in files], num_epochs=2,
                                                        shuffle=True)
        image, label = read_my_file_format(filename_queue)
        images_b, labels_b = tf.train.shuffle_batch([image, label], batch_size=8, capacity=64,
                                                    min_after_dequeue=16, num_threads=2)
        runs, seen = 0, Counter()
        with tf.Session() as sess:
            sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            try:
                while not coord.should_stop():
                    x, y = sess.run([images_b, labels_b])  # one batch per run
                    runs += 1
                    assert x.shape == (8, 784) and x.dtype == np.float32
                    assert y.shape == (8,) and y.dtype == np.int32
                    for row, lab in zip(x, y):
                        raw = np.rint((row + 1.0) / 2.0 * 255.0).astype(np.uint8)
                        seen[(int(lab), raw.tobytes())] += 1
            except tf.errors.OutOfRangeError:
                pass
            finally:
                coord.request_stop()
            coord.join(threads)
    assert runs == 12  # 96 records in batches of 8: each run dequeued exactly one batch
    assert seen == Counter({(lab, img.tobytes()): 2 for lab, img in zip(labels_written, images)})


def test_a_queue_filled_by_a_queue_runner_of_enqueue_ops():
    with tf.Graph().as_default():
        queue = tf.RandomShuffleQueue(capacity=100, min_after_dequeue=10, dtypes=[tf.int32],
                                      shapes=[[]])
        counter = tf.train.range_input_producer(1000, num_epochs=1, shuffle=False).dequeue()
        qr = tf.train.QueueRunner(queue, [queue.enqueue(counter)] * 4)
        tf.train.add_queue_runner(qr)
        batch = queue.dequeue_many(32)
        got = []
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    got.extend(sess.run(batch).tolist())
            coord.request_stop()
            coord.join(threads)
    assert len(got) == 992 and len(set(got)) == 992  # 31 full batches, each value once
    assert set(got) <= set(range(1000)) and got != sorted(got)


def test_csv_lines_through_decode_csv_and_stack(tmp_path):
    for name, rows in (("a.csv", [(1, 2, 0.5), (3, 4, 1.5)]), ("b.csv", [(5, 6, 2.5)])):
        (tmp_path / name).write_text("x,y,z\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    with tf.Graph().as_default():
        reader = tf.TextLineReader(skip_header_lines=1)
        _, line = reader.read(tf.train.string_input_producer(
            [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], num_epochs=1, shuffle=False))
        c1, c2, c3 = tf.decode_csv(line, record_defaults=[[1], [1], [1.0]])
        features = tf.stack([c1, c2])
        rows = []
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    f, z = sess.run([features, c3])  # one line read for both fetches
                    rows.append((f.tolist(), float(z)))
            coord.request_stop()
            coord.join(threads)
    assert rows == [([1, 2], 0.5), ([3, 4], 1.5), ([5, 6], 2.5)]


def test_sliced_tensors_batched_and_a_varlen_feature_batched_as_one_sparse_value(tmp_path):
    xs, ys = np.arange(50, dtype=np.int64), np.arange(50, dtype=np.int64) * 10
    path = tmp_path / "tags.tfrecord"
    with qp.io.TFRecordWriter(str(path)) as writer:
        for i in range(16):
            writer.write(qp.make_example({"tags": list(range(i % 4))}).SerializeToString())
    with tf.Graph().as_default():
        x, y = tf.train.slice_input_producer([xs, ys], num_epochs=3, shuffle=True)
        xb, yb = tf.train.batch([x, y], batch_size=19, allow_smaller_final_batch=True)
        reader = tf.TFRecordReader()
        _, serialized = reader.read(tf.train.string_input_producer([str(path)], num_epochs=1))
        tags = tf.parse_single_example(serialized, {"tags": tf.VarLenFeature(tf.int64)})["tags"]
        tag_batch = tf.train.batch([tags], batch_size=8)  # a list of one: one SparseTensor
        pairs, sizes, lengths = Counter(), [], []
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            for _ in range(2):
                sparse = sess.run(tag_batch)
                assert isinstance(sparse, tf.SparseTensorValue)
                assert sparse.dense_shape.tolist() == [8, 3]
                lengths += sparse.row_lengths().tolist()
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    a, b = sess.run([xb, yb])
                    sizes.append(len(a))
                    pairs.update(zip(a.tolist(), b.tolist()))
            coord.request_stop()
            coord.join(threads)
    assert sorted(lengths) == sorted([i % 4 for i in range(16)])
    assert sizes == [19] * 7 + [17]  # 150 slices, the last batch smaller
    assert pairs == Counter({(i, 10 * i): 3 for i in range(50)})


def test_threads_of_your_own_under_a_coordinator():
    done = Counter()

    def loop(coord):
        while not coord.should_stop():
            done[threading.current_thread().name] += 1
            if sum(done.values()) >= 100:
                coord.request_stop()

    coord = tf.train.Coordinator()
    threads = [threading.Thread(target=loop, args=(coord,), name=f"t{i}") for i in range(10)]
    for t in threads:
        t.start()
    coord.join(threads)
    assert sum(done.values()) >= 100 and not any(t.is_alive() for t in threads)


def test_session_run_computes_each_node_once_per_run_and_takes_nested_fetches():
    calls = Counter()
    with tf.Graph().as_default():
        q = tf.FIFOQueue(10, [tf.int64], shapes=[[]])
        with tf.Session() as sess:
            sess.run(q.enqueue_many([np.arange(6)]))
            value = q.dequeue()
            doubled, tripled = value * 2, 3 * value
            assert sess.run({"v": value, "pair": (doubled, [tripled])}) == \
                {"v": 0, "pair": (0, [0])}
            assert sess.run([doubled, tripled]) == [2, 3]  # one dequeue for both
            assert int(sess.run(q.size())) == 4
            assert sess.run(q.close()) is None
            assert value.eval(sess) == 2
    del calls


def test_an_op_that_is_not_provided_fails_at_graph_build_time_naming_it():
    with pytest.raises(NotImplementedError, match=r"^tf\.image\.adjust_hue is not provided by "
                                                  r"queuepipe\.compat\.v1"):
        tf.image.adjust_hue
    with pytest.raises(NotImplementedError, match=r"^tf\.nn is not provided"):
        tf.nn
    with pytest.raises(NotImplementedError, match=r"^tf\.train\.Saver is not provided"):
        tf.train.Saver
    with pytest.raises(TypeError, match=r"symbolic value: it has no truth value"):
        bool(tf.constant(1) + 1)


def test_the_per_element_ops_compute_what_numpy_and_tf_compute():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with tf.Session() as sess:
        t = tf.constant(x)
        got = sess.run({
            "cast": tf.cast(tf.constant([1.7, -1.7]), tf.int32),
            "one_hot": tf.one_hot(tf.constant([0, 2, 5]), 3),
            "reduce": tf.reduce_sum(t, axis=1), "mean": tf.reduce_mean(t),
            "argmax": tf.argmax(t, axis=1), "slice": tf.slice(t, [1, 1], [2, -1]),
            "gather": tf.gather(t, [2, 0]), "expand": tf.shape(tf.expand_dims(t, 0)),
            "concat": tf.concat([t, t], axis=0), "transpose": tf.transpose(t),
            "number": tf.string_to_number(tf.constant(b"2.5")),
            "ops": (t - 1.0) * 2.0 / 4.0, "neg": -t[0], "compare": t[1] > 5.0,
            "dense": tf.sparse_tensor_to_dense(tf.parse_single_example(
                tf.constant(qp.make_example({"t": [7, 8]}).SerializeToString()),
                {"t": tf.VarLenFeature(tf.int64)})["t"], -1),
        })
    assert got["cast"].tolist() == [1, -1]  # toward zero, as TF casts
    assert got["one_hot"].tolist() == [[1, 0, 0], [0, 0, 1], [0, 0, 0]]
    assert got["one_hot"].dtype == np.float32
    assert got["reduce"].tolist() == [6, 22, 38] and got["mean"] == 5.5
    assert got["argmax"].tolist() == [3, 3, 3] and got["argmax"].dtype == np.int64
    assert got["slice"].tolist() == [[5, 6, 7], [9, 10, 11]]
    assert got["gather"].tolist() == [x[2].tolist(), x[0].tolist()]
    assert got["expand"].tolist() == [1, 3, 4] and got["concat"].shape == (6, 4)
    assert got["transpose"].shape == (4, 3) and got["number"] == np.float32(2.5)
    assert np.array_equal(got["ops"], (x - 1.0) * 2.0 / 4.0) and got["ops"].dtype == np.float32
    assert got["neg"].tolist() == [0, -1, -2, -3]
    assert got["compare"].tolist() == [False, False, True, True]
    assert got["dense"].tolist() == [7, 8]


def test_dict_batches_enqueue_many_and_a_keep_input_tensor():
    with tf.Graph().as_default():
        n = tf.train.range_input_producer(40, num_epochs=1, shuffle=False).dequeue()
        kept = tf.train.maybe_batch({"n": n, "square": n * n}, keep_input=tf.equal(n % 2, 0),
                                    batch_size=5)
        chunks = tf.train.batch([tf.constant(np.arange(6)).__mul__(10)], batch_size=4,
                                enqueue_many=True)
        got, squares = [], []
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            for _ in range(4):
                batch = sess.run(kept)  # one read of n per element for n, its square and keep
                got += batch["n"].tolist()
                squares += batch["square"].tolist()
            assert sess.run(chunks).tolist() == [0, 10, 20, 30]  # a list of one: a tensor
            coord.request_stop()
            coord.join(threads)
    assert got == list(range(0, 40, 2)) and squares == [v * v for v in got]


GOLDEN_IMAGES = os.path.join(os.path.dirname(__file__), "golden", "images-tf2.21")


def test_image_ops_give_tensorflows_arrays():
    pytest.importorskip("PIL")
    with np.load(os.path.join(GOLDEN_IMAGES, "expected.npz")) as z:
        reference = {key: z[key] for key in z.files}
    with open(os.path.join(GOLDEN_IMAGES, "a.png"), "rb") as f:
        png = f.read()
    with tf.Graph().as_default(), tf.Session() as sess:
        rgb = tf.image.decode_png(tf.constant(png), channels=3)
        fetches = {"standardized": tf.image.per_image_standardization(rgb)}
        for h, w in ((40, 50), (200, 300), (96, 128)):
            fetches[f"resize.bilinear.{h}x{w}"] = tf.image.resize_images(rgb, [h, w])
            fetches[f"resize.nearest.{h}x{w}"] = tf.image.resize_images(
                rgb, [h, w], method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
            fetches[f"resize.bilinear_aligned.{h}x{w}"] = tf.image.resize_images(
                rgb, [h, w], align_corners=True)
        got = sess.run(fetches)
    for key, value in got.items():
        assert value.dtype == reference[key].dtype and np.array_equal(value, reference[key]), key


def test_whole_files_decoded_flipped_and_cropped_in_the_reader_threads(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    for i in range(6):
        Image.fromarray(np.full((12, 10, 3), i * 40, np.uint8)).save(tmp_path / f"{i}.png")
    with tf.Graph().as_default():
        files = tf.train.match_filenames_once(str(tmp_path / "*.png"))
        reader = tf.WholeFileReader()
        _, contents = reader.read(tf.train.string_input_producer(files, num_epochs=2))
        image = tf.image.decode_png(contents, channels=3)
        image = tf.image.random_crop(tf.image.random_flip_left_right(image, seed=1), [8, 8, 3],
                                     seed=2)
        batch = tf.train.batch([tf.image.convert_image_dtype(image, tf.float32)], batch_size=4)
        levels = Counter()
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            for _ in range(3):
                images = sess.run(batch)  # a list of one: a tensor
                assert images.shape == (4, 8, 8, 3) and images.dtype == np.float32
                levels.update(np.rint(images[:, 0, 0, 0] * 255).astype(int).tolist())
            coord.request_stop()
            coord.join(threads)
    assert levels == Counter({i * 40: 2 for i in range(6)})  # every file, once per epoch


def test_a_queue_runner_made_by_hand_takes_tf1s_create_threads_arguments():
    with tf.Graph().as_default():
        queue = tf.FIFOQueue(8, [tf.int64], shapes=[[]])
        counter = tf.train.range_input_producer(12, num_epochs=1, shuffle=False).dequeue()
        qr = tf.train.QueueRunner(queue, [queue.enqueue(counter * 10)])
        got = []
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = qr.create_threads(sess, coord=coord, start=True)  # TF1's order
            threads += tf.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.OutOfRangeError):
                while True:
                    got.append(int(sess.run(queue.dequeue())))
            coord.request_stop()
            coord.join(threads)
    assert got == [10 * i for i in range(12)]


def test_sequence_examples_parsed_and_padded_by_a_dynamic_pad_batch(tmp_path):
    path = tmp_path / "seq.tfrecord"
    with qp.io.TFRecordWriter(str(path)) as writer:
        for n in (1, 3, 2, 4):
            writer.write(qp.make_sequence_example(
                {"length": n}, {"tokens": [[t + 1] for t in range(n)]}).SerializeToString())
    with tf.Graph().as_default():
        reader = tf.TFRecordReader()
        _, serialized = reader.read(tf.train.string_input_producer([str(path)], num_epochs=1,
                                                                   shuffle=False))
        context, sequence = tf.parse_single_sequence_example(
            serialized, context_features={"length": tf.FixedLenFeature([], tf.int64)},
            sequence_features={"tokens": tf.FixedLenSequenceFeature([], tf.int64)})
        lengths, tokens = tf.train.batch([context["length"], sequence["tokens"]], batch_size=2,
                                         dynamic_pad=True)
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            first = sess.run([lengths, tokens])
            second = sess.run([lengths, tokens])
            coord.request_stop()
            coord.join(threads)
    assert first[0].tolist() == [1, 3] and first[1].tolist() == [[1, 0, 0], [1, 2, 3]]
    assert second[0].tolist() == [2, 4] and second[1].shape == (2, 4)


def test_flags_parse_the_command_line_and_app_run_passes_the_rest(monkeypatch):
    flags_module = sys.modules["queuepipe.compat.v1.flags"]  # tf.flags is the namespace
    monkeypatch.setattr(flags_module, "FLAGS", flags_module._FlagValues())
    monkeypatch.setattr(tf.flags, "FLAGS", flags_module.FLAGS)
    tf.app.flags.DEFINE_string("data_dir", "/tmp/data", "where the data is")
    tf.app.flags.DEFINE_integer("batch_size", 128, "examples per batch")
    tf.app.flags.DEFINE_boolean("fake_data", False, "use fake data")
    tf.app.flags.DEFINE_float("rate", 0.5, "a rate")
    seen = []

    def main(argv):
        f = tf.app.flags.FLAGS
        seen.append((argv, f.data_dir, f.batch_size, f.fake_data, f.rate))
        return 0

    with pytest.raises(SystemExit) as exit_info:
        tf.app.run(main, argv=["prog", "--batch_size=32", "--fake_data", "extra"])
    assert exit_info.value.code == 0
    assert seen == [(["prog", "extra"], "/tmp/data", 32, True, 0.5)]
    flags_module.FLAGS.parse(["prog", "--nofake_data", "--data_dir", "/d"])
    assert (flags_module.FLAGS.fake_data, flags_module.FLAGS.data_dir) == (False, "/d")
    with pytest.raises(AttributeError, match=r"^flag --nope is not defined"):
        flags_module.FLAGS.nope


def test_logging_prints_at_the_verbosity_set(capsys):
    tf.logging.set_verbosity(tf.logging.INFO)
    try:
        tf.logging.info("step %d", 3)
        tf.logging.debug("hidden")
        assert tf.logging.get_verbosity() == tf.logging.INFO
    finally:
        tf.logging.set_verbosity(tf.logging.WARN)
    assert capsys.readouterr().err == "INFO:queuepipe.tf1:step 3\n"


def test_names_outside_the_input_pipeline_say_so():
    with pytest.raises(NotImplementedError, match=r"^tf\.train\.Saver is not provided by "
                                                  r"queuepipe\.compat\.v1: it is outside the "
                                                  r"input pipeline"):
        tf.train.Saver
    with pytest.raises(NotImplementedError, match=r"^tf\.get_variable .* outside the input"):
        tf.get_variable
    with pytest.raises(NotImplementedError, match=r"^tf\.nn is not provided .* outside"):
        tf.nn
    with pytest.raises(NotImplementedError) as info:
        tf.string_to_hash_bucket_fast
    assert "outside" not in str(info.value) and "NumPy" not in str(info.value)


def test_a_run_timeout_from_the_session_config():
    with tf.Graph().as_default():
        q = tf.FIFOQueue(2, [tf.int32], shapes=[[]])
        with tf.Session(config=tf.ConfigProto(operation_timeout_in_ms=30)) as sess:
            with pytest.raises(tf.errors.DeadlineExceededError):
                sess.run(q.dequeue())
            sess.run(q.enqueue(5))
            assert sess.run(q.dequeue(), options=tf.RunOptions(timeout_in_ms=1000)) == 5


def test_control_dependencies_run_first_in_each_evaluation():
    with tf.Graph().as_default():
        q = tf.FIFOQueue(4, [tf.int64], shapes=[[]])
        with tf.Session() as sess:
            sess.run(q.enqueue_many([np.arange(3)]))
            first = q.dequeue()
            with tf.control_dependencies([first]):
                size = q.size()
            assert sess.run(size) == 2  # the dequeue ran before the size was read


def test_bytes_after_a_gzip_stream_are_logged_without_claiming_tf_ignores_them(tmp_path, caplog):
    path = str(tmp_path / "t.gz.tfrecord")
    with tf.python_io.TFRecordWriter(path, "GZIP") as writer:
        writer.write(b"abc")
        writer.write(b"de")
    with open(path, "ab") as f:
        f.write(b"junkjunk")
    assert list(tf.python_io.tf_record_iterator(path, "GZIP")) == [b"abc", b"de"]
    message = " ".join(r.getMessage() for r in caplog.records)
    assert "ignored (TensorFlow raises DataLossError there, after the records)" in message
    assert "as TensorFlow does" not in message


def test_gfile_reaches_paths_with_a_protocol_through_fsspec():
    pytest.importorskip("fsspec")
    root = "memory:///compat-gfile"
    tf.gfile.MakeDirs(f"{root}/sub")
    with tf.gfile.GFile(f"{root}/sub/a.txt", "wb") as f:
        f.write(b"abc")
    tf.io.gfile.copy(f"{root}/sub/a.txt", f"{root}/sub/b.txt")
    try:
        assert tf.gfile.Exists(f"{root}/sub/a.txt") and tf.gfile.IsDirectory(f"{root}/sub")
        assert tf.gfile.Glob(f"{root}/sub/*.txt") == [f"{root}/sub/a.txt", f"{root}/sub/b.txt"]
        assert tf.gfile.ListDirectory(f"{root}/sub") == ["a.txt", "b.txt"]
        assert tf.gfile.Stat(f"{root}/sub/b.txt").length == 3
        with tf.gfile.Open(f"{root}/sub/b.txt", "rb") as f:
            assert f.read() == b"abc"
        with pytest.raises(tf.errors.AlreadyExistsError):
            tf.gfile.Copy(f"{root}/sub/a.txt", f"{root}/sub/b.txt")
        tf.gfile.Remove(f"{root}/sub/a.txt")
        with pytest.raises(tf.errors.NotFoundError):
            tf.gfile.Remove(f"{root}/sub/a.txt")
    finally:
        tf.gfile.DeleteRecursively(root)
    assert not tf.gfile.Exists(root)


def test_a_py_func_error_in_a_runner_thread_reaches_sess_run_with_its_cause():
    def boom(x):
        raise KeyError(f"no entry for {int(x)}")

    with tf.Graph().as_default():
        n = tf.train.range_input_producer(10, num_epochs=1, shuffle=False).dequeue()
        value = tf.py_func(boom, [n], tf.int64)
        value.set_shape([])
        batch = tf.train.batch([value], batch_size=2)
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=r"^PyFunc: KeyError: 'no entry for 0'") as info:
                sess.run(batch)  # TF: OutOfRangeError here, the cause at coord.join
            cause = info.value.__cause__
            while cause is not None and not isinstance(cause, KeyError):
                cause = cause.__cause__
            assert isinstance(cause, KeyError)
            coord.request_stop()
            with pytest.raises(tf.errors.InvalidArgumentError):
                coord.join(threads)


def test_a_value_against_its_set_shape_fails_the_enqueue_as_in_tf(tmp_path):
    path = tmp_path / "short.tfrecord"
    with qp.io.TFRecordWriter(str(path)) as writer:
        writer.write(qp.make_example({"image": b"\x01\x02\x03"}).SerializeToString())
    with tf.Graph().as_default():
        reader = tf.TFRecordReader()
        _, serialized = reader.read(tf.train.string_input_producer([str(path)], num_epochs=1))
        image = tf.decode_raw(tf.parse_single_example(
            serialized, {"image": tf.FixedLenFeature([], tf.string)})["image"], tf.uint8)
        image.set_shape([4])  # the record holds 3 bytes
        batch = tf.train.batch([image], batch_size=1)
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            with pytest.raises(tf.errors.InvalidArgumentError):
                sess.run(batch)
            coord.request_stop()
            with pytest.raises(tf.errors.InvalidArgumentError):
                coord.join(threads)
