"""TF1 cases run the same way through TensorFlow and through queuepipe.compat.v1.

Each ``case_*`` function takes the module (``tensorflow.compat.v1`` or
``queuepipe.compat.v1``) and a directory of input files, builds a graph and returns what to
check: ``{"static": <plain values read at build time>, "runs": [fetches, ...]}``, each fetch
run once by ``sess.run`` after the queue runners start. :func:`outcome` turns the whole into
plain JSON (values with their dtype, or the error's class), which
``tests/golden/make_compat_answers.py`` recorded from TensorFlow 2.21 into
``tests/golden/compat-tf2.21/answers.json`` and ``tests/test_compat_answers.py`` compares
queuepipe's with. Not a test module: both sides import it.
"""

import os

import numpy as np


def write_inputs(tf, directory):
    """The files the cases read, written with ``tf``'s writer (identical bytes either way)."""
    os.makedirs(directory, exist_ok=True)
    with tf.python_io.TFRecordWriter(os.path.join(directory, "a.tfrecord")) as writer:
        for i in range(5):
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "raw": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[bytes([i, i + 1, i + 2, 0])])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "tokens": tf.train.Feature(int64_list=tf.train.Int64List(
                    value=list(range(i)))),
            })).SerializeToString())
    for k, compression in ((0, None), (1, "GZIP"), (2, None)):
        suffix = ".gz" if compression else ""
        with tf.python_io.TFRecordWriter(os.path.join(directory, f"d{k}.tfrecord{suffix}"),
                                         compression) as writer:
            for i in range(5):
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[10 * k + i])),
                    "t": tf.train.Feature(int64_list=tf.train.Int64List(
                        value=list(range(i % 3)))),
                })).SerializeToString())
    with open(os.path.join(directory, "lines.txt"), "wb") as f:
        f.write(b"header\nline one\r\nline two\n\nlast")
    with open(os.path.join(directory, "fixed.bin"), "wb") as f:
        f.write(b"HH" + bytes(range(12)) + b"FFF")


# -- exact answers ------------------------------------------------------------------------------


def case_constant_bytes_keep_every_byte(tf, d):
    return {"runs": [tf.constant([b"\x01\x00", b"\x02\x00\x00"]), tf.constant(b"a\x00"),
                     tf.constant("ab"), tf.constant(["ab", "c"])]}


def case_constant_dtypes(tf, d):
    return {"runs": [tf.constant([1, 2]), tf.constant([1.5]), tf.constant(2 ** 40),
                     tf.constant(np.array([1, 2])), tf.constant(3, tf.int64),
                     tf.constant([1, 2], shape=[2, 2]), tf.constant(7, shape=[3]),
                     tf.constant([[1, 2], [3, 4]], shape=[4])]}


def case_decode_raw_of_unequal_lengths(tf, d):
    return {"runs": [tf.decode_raw(tf.constant([b"\x01\x00", b"\x02\x00\x00"]), tf.uint8),
                     tf.decode_raw(tf.constant([b"\x01\x00", b"\x02\x00"]), tf.uint8)]}


def case_reductions_keep_the_dtype(tf, d):
    return {"runs": [tf.reduce_mean(tf.constant([1, 2], tf.int64)),
                     tf.reduce_sum(tf.constant([1, 2], tf.int32)),
                     tf.reduce_mean(tf.constant([-1, -2], tf.int32)),
                     tf.reduce_sum(tf.constant([200, 200], tf.uint8)),
                     tf.reduce_prod(tf.constant([3, 4], tf.int32)),
                     tf.reduce_mean(tf.constant([[1, 2], [4, 7]], tf.int32), axis=1),
                     tf.reduce_mean(tf.constant([1, 2], tf.float16)),
                     tf.reduce_max(tf.constant([1, 9], tf.uint8), keepdims=True)]}


def case_reduce_sum_of_bool_is_refused(tf, d):
    return {"runs": [tf.reduce_sum(tf.constant([True, False]))]}


def case_producers_of_python_values_take_tfs_dtypes(tf, d):
    x, y = tf.train.slice_input_producer([[1, 2, 3], [0.5, 1.5, 2.5]], num_epochs=1,
                                         shuffle=False)
    row = tf.train.input_producer([[1, 2], [3, 4]], num_epochs=1, shuffle=False).dequeue()
    name = tf.train.string_input_producer(["a", "b"], num_epochs=1, shuffle=False).dequeue()
    return {"static": [x.dtype.name, y.dtype.name, x.shape.as_list()],
            "runs": [[x, y], [x, y], row, name]}


def case_input_producer_over_nothing(tf, d):
    queue = tf.train.input_producer(tf.constant([], tf.string), num_epochs=1, shuffle=False)
    return {"runs": [queue.dequeue()]}


def case_limit_epochs_batched_with_enqueue_many(tf, d):
    counted = tf.train.limit_epochs(tf.constant([1, 2, 3]), 1)
    batched = tf.train.batch([counted], batch_size=2, enqueue_many=True,
                             allow_smaller_final_batch=True)
    return {"static": counted.shape.as_list(), "runs": [batched, batched, batched]}


def case_limit_epochs_and_from_tensors_of_python_values(tf, d):
    counted = tf.train.limit_epochs([1, 2], 1)
    one = tf.data.Dataset.from_tensors(([1.5, 2.5], 3)).make_one_shot_iterator().get_next()
    return {"runs": [counted, counted, one, one]}


def case_limit_epochs_of_a_scalar(tf, d):
    counted = tf.train.limit_epochs(tf.constant(5), 2)
    return {"runs": [counted, counted, counted]}


def case_match_filenames_once(tf, d):
    files = tf.train.match_filenames_once(os.path.join(d, "*.tfrecord"))
    names = tf.train.match_filenames_once(os.path.join(d, "*.none"))
    return {"static": files.shape.as_list(),
            "runs": [tf.size(files), tf.size(names)]}


def case_run_options_timeout(tf, d):
    queue = tf.FIFOQueue(2, tf.int32)
    return {"runs": [queue.dequeue()], "options": {"timeout_in_ms": 50}}


# -- shapes and names ----------------------------------------------------------------------------


def _record(tf, d):
    reader = tf.TFRecordReader()
    return reader.read(tf.train.string_input_producer([os.path.join(d, "a.tfrecord")],
                                                      num_epochs=1, shuffle=False))


def case_static_shapes_of_a_read_record(tf, d):
    key, value = _record(tf, d)
    f = tf.parse_single_example(value, {
        "raw": tf.FixedLenFeature([], tf.string), "label": tf.FixedLenFeature([], tf.int64),
        "pair": tf.FixedLenFeature([2], tf.int64, default_value=[0, 0])})
    raw = tf.decode_raw(f["raw"], tf.uint8)
    before = raw.shape.as_list()
    raw.set_shape([4])
    image = tf.reshape(raw, [2, 2])
    return {"static": {
        "key": key.shape.as_list(), "value": value.shape.as_list(), "raw": before,
        "set": raw.shape.as_list(), "ndims": raw.shape.ndims, "dim0": raw.shape[0],
        "label": f["label"].shape.as_list(), "pair": f["pair"].shape.as_list(),
        "image": image.shape.as_list(), "flat": tf.reshape(image, [-1]).shape.as_list(),
        "cast": tf.cast(image, tf.float32).shape.as_list(),
        "scaled": (tf.cast(image, tf.float32) * 2.0 - 1.0).shape.as_list(),
        "transposed": tf.transpose(tf.reshape(raw, [1, 2, 2]), [1, 2, 0]).shape.as_list(),
        "sliced": tf.slice(image, [0, 1], [2, 1]).shape.as_list(),
        "strided": tf.strided_slice(raw, [1], [3]).shape.as_list(),
        "indexed": image[1].shape.as_list(), "ranged": raw[1:].shape.as_list(),
        "fully": raw.shape.is_fully_defined(), "unknown_fully": before == [None],
        "str": str(image.shape), "dtype": raw.dtype.name, "label_dtype": f["label"].dtype.name,
    }, "runs": [[image, tf.cast(image, tf.float32)[1, :], tf.transpose(image), raw[1:3],
                 tf.strided_slice(raw, [0], [4], [2]), f["label"]]]}


def case_set_shape_contradicting_is_refused(tf, d):
    raw = tf.decode_raw(_record(tf, d)[1], tf.uint8)
    raw.set_shape([4])
    raw.set_shape([5])
    return {"runs": []}


def case_set_shape_of_another_rank_is_refused(tf, d):
    tf.constant([[1, 2, 3], [4, 5, 6]]).set_shape([6])
    return {"runs": []}


def case_names_under_scopes(tf, d):
    c = tf.constant([1.0, 2.0])
    with tf.name_scope("input") as scope:
        x = tf.cast(c, tf.int32)
        with tf.name_scope("inner") as inner:
            y = x * 2
        z = x + 1
    with tf.name_scope("input") as again:
        w = tf.identity(c)
        queues = [tf.train.string_input_producer(["x"]).name,
                  tf.train.range_input_producer(3).name, tf.FIFOQueue(3, [tf.int32]).name]
    with tf.variable_scope("tower"):
        v = c + 1.0
    with tf.device("/cpu:0"):
        u = c - 1.0
    with tf.control_dependencies([x]):
        t = tf.identity(c)
    return {"static": [scope, inner, again, x.name, y.name, z.name, w.name, v.name, u.name,
                       t.name, queues, x.op.name, y.op.name],
            "runs": [[y, z, v, u, t]]}


def case_batch_of_a_shape_not_fully_defined_is_refused(tf, d):
    raw = tf.decode_raw(_record(tf, d)[1], tf.uint8)
    tf.train.batch([raw], batch_size=2)
    return {"runs": []}


def case_shuffle_batch_of_a_shape_not_fully_defined_is_refused(tf, d):
    raw = tf.decode_raw(_record(tf, d)[1], tf.uint8)
    tf.train.shuffle_batch([raw], batch_size=2, capacity=10, min_after_dequeue=2)
    return {"runs": []}


def case_batch_after_set_shape_and_with_shapes(tf, d):
    value = _record(tf, d)[1]
    f = tf.parse_single_example(value, {"raw": tf.FixedLenFeature([], tf.string),
                                        "label": tf.FixedLenFeature([], tf.int64)})
    raw = tf.decode_raw(f["raw"], tf.uint8)
    raw.set_shape([4])
    images, labels = tf.train.batch([raw, f["label"]], batch_size=2)
    given = tf.train.batch([tf.decode_raw(f["raw"], tf.uint8)], batch_size=2, shapes=[[4]])
    smaller = tf.train.batch({"raw": raw}, batch_size=2, allow_smaller_final_batch=True)
    return {"static": [images.shape.as_list(), labels.shape.as_list(), given.shape.as_list(),
                       smaller["raw"].shape.as_list(), images.dtype.name],
            "runs": []}  # three batches share one reader: which gets which record is a race


def case_dynamic_pad_batch_takes_free_dimensions(tf, d):
    value = _record(tf, d)[1]
    tokens = tf.sparse_tensor_to_dense(tf.parse_single_example(
        value, {"tokens": tf.VarLenFeature(tf.int64)})["tokens"])
    batched = tf.train.batch([tokens], batch_size=3, dynamic_pad=True)
    return {"runs": [batched]}


def case_sparse_tokens_to_dense(tf, d):
    value = _record(tf, d)[1]
    tokens = tf.parse_single_example(value, {"tokens": tf.VarLenFeature(tf.int64)})["tokens"]
    return {"runs": [[tf.sparse_tensor_to_dense(tokens), tf.sparse.to_dense(tokens, -1)]] * 3}


def case_py_func_in_the_graph(tf, d):
    three = tf.constant(3, tf.int64)
    doubled = tf.py_func(lambda a: (a * 2).astype(np.int64), [three], tf.int64)
    pair = tf.numpy_function(lambda a: (a, a + 1), [three], [tf.int64, tf.int64])
    text = tf.py_func(lambda a: b"x", [three], tf.string)
    narrowed = tf.py_func(lambda a: a * 1.5, [tf.constant(3.0)], tf.float32)
    return {"static": [doubled.shape.ndims, len(pair)],
            "runs": [doubled, pair, text, narrowed]}


def case_py_function_gives_eager_values(tf, d):
    def describe(text, number):
        return np.int64(len(text.numpy()) * 10 + int(number.numpy()))
    got = tf.py_function(describe, [tf.constant(b"abc"), tf.constant(4, tf.int64)], tf.int64)
    return {"runs": [got]}


def case_small_ops_between_read_and_batch(tf, d):
    m = tf.constant([[1, -2, 3], [-4, 5, -6]])
    f = tf.constant([0.5, 1.5, 2.5, -0.5])
    return {"runs": [tf.zeros([2, 3]), tf.ones([2], tf.int64), tf.fill([2, 2], 7),
                     tf.fill([2], 0.5), tf.range(5), tf.range(1, 7, 2), tf.range(0.0, 1.0, 0.25),
                     tf.range(3, dtype=tf.int64), tf.tile(m, [2, 1]),
                     tf.pad(m, [[1, 0], [0, 2]]), tf.pad(m, [[0, 0], [2, 2]], "REFLECT"),
                     tf.pad(m, [[1, 1], [1, 1]], "SYMMETRIC"),
                     tf.pad(m, [[0, 0], [1, 1]], constant_values=9),
                     tf.where(m > 0, m, tf.zeros_like(m)), tf.where(m > 0),
                     tf.clip_by_value(m, -3, 3), tf.round(f), tf.floor(f),
                     tf.math.round(f * 2.0), tf.logical_and(m > 0, m < 4),
                     tf.logical_or(m > 4, m < -5), tf.logical_not(m > 0), tf.ones_like(f),
                     tf.zeros_like(m, tf.float32)],
            "static": [tf.zeros([2, 3]).shape.as_list(), tf.range(5).dtype.name,
                       tf.tile(m, [2, 1]).shape.as_list(), tf.pad(m, [[1, 0], [0, 2]]).shape.as_list()]}


def case_strings_split_joined_and_measured(tf, d):
    lines = tf.constant(["a b  c", "", "d"])
    return {"runs": [tf.string_split(lines), tf.string_split(["a,b;c"], delimiter=",;"),
                     tf.string_split(["a b  c"], skip_empty=False),
                     tf.string_split(["abc"], delimiter=""),
                     tf.strings.split(["a b  c", " d "]), tf.strings.split(["a,b,,c"], sep=","),
                     tf.strings.split(["a,b,,c"], sep=",", maxsplit=1),
                     tf.strings.length(["ab", ""]),
                     tf.strings.join([["a", "b"], ["c", "d"]], separator="-"),
                     tf.string_join(["x", ["1", "2"]]), tf.strings.to_number(["1.5", "2"]),
                     tf.sparse_tensor_to_dense(tf.string_split(lines), default_value="")]}


def case_string_split_of_a_scalar_is_refused(tf, d):
    tf.string_split(tf.constant("a b"))
    return {"runs": []}


def case_py_func_errors_reach_the_run(tf, d):
    def boom(a):
        raise ValueError("boom")
    wrong = tf.py_func(lambda a: a * 2, [tf.constant(3, tf.int64)], tf.int32)
    return {"runs": [wrong, tf.py_func(boom, [tf.constant(1)], tf.int32)]}


def case_batch_of_a_py_func_is_refused_without_a_shape(tf, d):
    value = _record(tf, d)[1]
    tf.train.batch([tf.py_func(lambda v: v, [value], tf.string)], batch_size=2)
    return {"runs": []}


def case_py_func_with_set_shape_batched(tf, d):
    value = _record(tf, d)[1]
    label = tf.parse_single_example(value, {"label": tf.FixedLenFeature([], tf.int64)})["label"]
    squared = tf.py_func(lambda v: v * v, [label], tf.int64)
    squared.set_shape([])
    return {"runs": [tf.train.batch([squared], batch_size=5)]}


def _answer(call):
    try:
        return call()
    except Exception as e:  # noqa: BLE001 - the class is the answer
        return type(e).__name__


def case_gfile_helpers(tf, d):
    g = tf.gfile
    top = os.path.join(d, "gfile")
    nested = os.path.join(top, "x", "y")
    answers = [_answer(lambda: g.MakeDirs(nested)), _answer(lambda: g.MkDir(top)),
               _answer(lambda: g.IsDirectory(top)), _answer(lambda: g.Exists(nested))]
    with g.GFile(os.path.join(top, "f.txt"), "w") as f:
        f.write("line one\nline two\n")
    with g.Open(os.path.join(top, "f.txt"), "rb") as f:
        answers.append(f.read(4).hex())
    with tf.io.gfile.GFile(os.path.join(top, "f.txt")) as f:
        answers.append(list(f))
    answers += [
        [os.path.basename(p) for p in g.Glob(os.path.join(top, "*"))],
        g.Glob(os.path.join(top, "*.none")), g.ListDirectory(top),
        tf.io.gfile.listdir(os.path.join(top, "x")), g.Stat(os.path.join(top, "f.txt")).length,
        [(os.path.relpath(w, d), sub, files) for w, sub, files in g.Walk(top)],
        _answer(lambda: g.Copy(os.path.join(top, "f.txt"), os.path.join(top, "g.txt"))),
        _answer(lambda: g.Copy(os.path.join(top, "f.txt"), os.path.join(top, "g.txt"))),
        _answer(lambda: g.Rename(os.path.join(top, "g.txt"), os.path.join(top, "f.txt"))),
        _answer(lambda: g.Rename(os.path.join(top, "g.txt"), os.path.join(top, "h.txt"),
                                 overwrite=True)),
        g.ListDirectory(top), _answer(lambda: g.Remove(os.path.join(top, "h.txt"))),
        _answer(lambda: g.Remove(os.path.join(top, "h.txt"))),
        _answer(lambda: g.GFile(os.path.join(top, "none.txt")).read()),
        _answer(lambda: g.ListDirectory(os.path.join(top, "none"))),
        _answer(lambda: g.DeleteRecursively(top)), g.Exists(top),
        tf.io.gfile.exists(top),
    ]
    return {"static": answers, "runs": []}


def case_options_accepted(tf, d):
    config = tf.ConfigProto(gpu_options=tf.GPUOptions(allow_growth=True),
                            allow_soft_placement=True, log_device_placement=False)
    config.gpu_options.per_process_gpu_memory_fraction = 0.5
    static = [config.gpu_options.allow_growth, config.allow_soft_placement,
              config.gpu_options.per_process_gpu_memory_fraction,
              tf.RunOptions(timeout_in_ms=5).timeout_in_ms, tf.RunOptions().timeout_in_ms,
              _answer(lambda: tf.ConfigProto(no_such_field=1)),
              tf.logging.DEBUG, tf.logging.INFO, tf.logging.WARN, tf.logging.ERROR,
              tf.logging.FATAL]
    with tf.Session(config=config) as sess:
        static.append(int(sess.run(tf.constant(3))))
    return {"static": static, "runs": [tf.constant(1)],
            "options": {"trace_level": 3}}


# -- tf.data in a Session -----------------------------------------------------------------------


def _parse_xt(tf, serialized):
    f = tf.parse_single_example(serialized, {"x": tf.FixedLenFeature([], tf.int64),
                                             "t": tf.VarLenFeature(tf.int64)})
    return f["x"] * 2, f["t"]


def _next_runs(iterator, count):
    element = iterator.get_next()
    return [element] * count


def case_data_slices_mapped_and_batched(tf, d):
    ds = tf.data.Dataset.from_tensor_slices(
        (np.arange(4), np.array([b"a", b"b", b"c", b"d"]))).map(lambda a, b: (a + 1, b))
    return {"runs": _next_runs(ds.batch(3).make_one_shot_iterator(), 3)}


def case_data_range_filter_skip_take_repeat_batch(tf, d):
    ds = tf.data.Dataset.range(10).filter(lambda x: x % 3 > 0).skip(1).take(4).repeat(2)
    return {"runs": _next_runs(ds.batch(3, drop_remainder=True).make_one_shot_iterator(), 3)}


def case_data_tfrecords_read_in_parallel_with_sparse_batches(tf, d):
    files = [os.path.join(d, "d0.tfrecord"), os.path.join(d, "d0.tfrecord")]
    ds = tf.data.TFRecordDataset(files, num_parallel_reads=2)
    ds = ds.map(lambda s: _parse_xt(tf, s), num_parallel_calls=3).batch(4).prefetch(2)
    return {"runs": _next_runs(tf.data.make_one_shot_iterator(ds), 4)}


def case_data_compressed_tfrecords(tf, d):
    ds = tf.data.TFRecordDataset([os.path.join(d, "d1.tfrecord.gz")], compression_type="GZIP")
    ds = ds.map(lambda s: _parse_xt(tf, s)[0])
    return {"runs": _next_runs(ds.batch(10).make_one_shot_iterator(), 2)}


def case_data_padded_batch(tf, d):
    ds = tf.data.TFRecordDataset([os.path.join(d, "d0.tfrecord")])
    ds = ds.map(lambda s: tf.sparse_tensor_to_dense(_parse_xt(tf, s)[1]))
    fixed = ds.padded_batch(2, padded_shapes=[4], padding_values=tf.constant(-1, tf.int64),
                            drop_remainder=True)
    return {"runs": _next_runs(ds.padded_batch(3, padded_shapes=[None])
                               .make_one_shot_iterator(), 3)
            + _next_runs(fixed.make_one_shot_iterator(), 3)}


def case_data_interleave_of_files(tf, d):
    files = [os.path.join(d, "d0.tfrecord"), os.path.join(d, "d2.tfrecord")]
    ds = tf.data.Dataset.from_tensor_slices(files).interleave(
        lambda f: tf.data.TFRecordDataset(f).take(3), cycle_length=2, block_length=2)
    ds = ds.map(lambda s: _parse_xt(tf, s)[0])
    return {"runs": _next_runs(ds.batch(10).make_one_shot_iterator(), 2)}


def case_data_zip_of_a_dict_with_an_initializable_iterator(tf, d):
    ds = tf.data.Dataset.zip((tf.data.Dataset.range(3), tf.data.Dataset.from_tensor_slices(
        {"a": np.array([1.0, 2.0, 3.0], np.float32)})))
    it = ds.make_initializable_iterator()
    element = it.get_next()
    return {"runs": [it.initializer, element, element, it.initializer, element, element,
                     element, element]}


def case_data_uninitialized_iterator(tf, d):
    it = tf.data.Dataset.range(3).make_initializable_iterator()
    return {"runs": [it.get_next()]}


def case_data_static_shapes(tf, d):
    mapped = tf.data.Dataset.range(5).map(lambda x: tf.cast(x, tf.float32) * 2.0)
    element = mapped.make_one_shot_iterator().get_next()
    batched = tf.data.Dataset.range(5).batch(2).make_one_shot_iterator().get_next()
    dropped = tf.data.Dataset.range(5).batch(2, drop_remainder=True)
    pair = tf.data.Dataset.from_tensor_slices((np.zeros((4, 3), np.float32),
                                               np.arange(4))).make_one_shot_iterator()
    a, b = pair.get_next()
    return {"static": [element.shape.as_list(), element.dtype.name, batched.shape.as_list(),
                       dropped.make_one_shot_iterator().get_next().shape.as_list(),
                       a.shape.as_list(), b.shape.as_list(), a.dtype.name],
            "runs": [element, batched]}


def case_data_text_lines_and_fixed_length_records(tf, d):
    lines = tf.data.TextLineDataset([os.path.join(d, "lines.txt")]).skip(1)
    fixed = tf.data.FixedLengthRecordDataset([os.path.join(d, "fixed.bin")], 4,
                                             header_bytes=2, footer_bytes=3)
    return {"runs": _next_runs(lines.make_one_shot_iterator(), 5)
            + _next_runs(fixed.make_one_shot_iterator(), 4)}


def case_data_experimental_transformations(tf, d):
    batched = tf.data.Dataset.range(7).apply(
        tf.data.experimental.map_and_batch(lambda x: x * 10, 3, drop_remainder=True))
    repeated = tf.data.Dataset.range(3).apply(
        tf.data.experimental.shuffle_and_repeat(1, count=2, seed=3))
    return {"runs": _next_runs(batched.make_one_shot_iterator(), 3)
            + [repeated.batch(6).make_one_shot_iterator().get_next()]}


def case_data_list_files_unshuffled(tf, d):
    ds = tf.data.Dataset.list_files(os.path.join(d, "d*.tfrecord"), shuffle=False)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=1).map(lambda s: _parse_xt(tf, s)[0])
    return {"runs": _next_runs(ds.batch(20).make_one_shot_iterator(), 2)}


def case_data_a_parse_error_reaches_the_run(tf, d):
    ds = tf.data.TFRecordDataset([os.path.join(d, "d0.tfrecord")]).map(
        lambda s: tf.parse_single_example(s, {"x": tf.FixedLenFeature([2], tf.int64)})["x"])
    return {"runs": _next_runs(ds.make_one_shot_iterator(), 1)}


def _fails_at_3(x):
    if x == 3:
        raise ValueError("no 3")
    return x


def case_data_an_element_that_fails_and_the_ones_after_it(tf, d):
    runs = []
    for calls in (None, 2):
        ds = tf.data.Dataset.range(6).map(lambda x: tf.py_func(_fails_at_3, [x], tf.int64),
                                          num_parallel_calls=calls)
        runs += _next_runs(ds.make_one_shot_iterator(), 7)
    batched = tf.data.Dataset.range(8).map(lambda x: tf.py_func(_fails_at_3, [x], tf.int64))
    batched = batched.map(lambda x: tf.reshape(x, [])).batch(2)
    kept = tf.data.Dataset.range(6).filter(
        lambda x: tf.py_func(lambda v: _fails_at_3(v) % 2 == 0, [x], tf.bool))
    return {"runs": runs + _next_runs(batched.make_one_shot_iterator(), 5)
            + _next_runs(kept.make_one_shot_iterator(), 4)}


def _pairs(n):
    for i in range(n):
        yield i, "w%d" % i, [float(i)] * (i % 3)


def case_data_slices_of_python_values_take_tfs_dtypes(tf, d):
    ds = tf.data.Dataset.from_tensor_slices(([1, 2], [0.5, 1.5], ["a", "bc"]))
    return {"runs": _next_runs(ds.make_one_shot_iterator(), 3)}


def case_data_from_generator(tf, d):
    ds = tf.data.Dataset.from_generator(_pairs, (tf.int32, tf.string, tf.float32),
                                        ([], [], [None]), args=[4])
    element = ds.make_one_shot_iterator().get_next()
    return {"static": [element[0].shape.as_list(), element[2].shape.as_list(),
                       element[0].dtype.name],
            "runs": [element] * 5}


def case_data_reinitializable_iterator(tf, d):
    train = tf.data.Dataset.range(10).map(lambda x: x * 2).batch(3)
    valid = tf.data.Dataset.range(4).batch(3)
    it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    element = it.get_next()
    return {"static": [element.shape.as_list(), element.dtype.name],
            "runs": [it.make_initializer(train), element, element, it.make_initializer(valid),
                     element, element, element, it.make_initializer(train), element]}


def case_data_cache_and_repeat(tf, d):
    ds = tf.data.Dataset.range(3).map(lambda x: x + 1).cache().repeat(2)
    return {"runs": _next_runs(ds.batch(4).make_one_shot_iterator(), 3)}


CASES = {name[len("case_"):]: fn for name, fn in sorted(globals().items())
         if name.startswith("case_")}


# -- running a case ------------------------------------------------------------------------------


def encode(value):
    """A plain JSON form of a value ``sess.run`` gave (arrays keep their dtype; bytes hex)."""
    if hasattr(value, "dense_shape") and hasattr(value, "indices"):
        return {"sparse": [encode(np.asarray(value.indices)), encode(np.asarray(value.values)),
                           encode(np.asarray(value.dense_shape))]}
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        flat = [v.hex() if isinstance(v, bytes) else v for v in array.reshape(-1).tolist()]
        return {"dtype": array.dtype.name, "shape": list(array.shape), "values": flat}
    return value


def outcome(tf, case, directory):
    """What ``case`` gives in a fresh graph: its static values and each run's value, or the
    class of the error that stopped the build (``build``) or a run."""
    result = {}
    with tf.Graph().as_default():
        try:
            built = case(tf, directory)
        except Exception as e:  # noqa: BLE001 - the class is the answer
            return {"build": type(e).__name__}
        result["static"] = encode(built.get("static"))
        runs = []
        options = tf.RunOptions(**built["options"]) if "options" in built else None
        with tf.Session() as sess:
            sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess=sess, coord=coord)
            for fetches in built["runs"]:
                try:
                    runs.append(encode(sess.run(fetches, options=options)))
                except Exception as e:  # noqa: BLE001 - the class is the answer
                    runs.append({"error": type(e).__name__})
            coord.request_stop()
            try:
                coord.join(threads, stop_grace_period_secs=10)
            except Exception:  # noqa: BLE001 - a runner's error was already a run's answer
                pass
        result["runs"] = runs
    return result
