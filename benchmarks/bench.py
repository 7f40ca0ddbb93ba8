"""queuepipe against tf.data, TF1 queue runners and the ``tfrecord`` package, on the same files.

usage::

    python benchmarks/bench.py --peers-python ~/.venvs/queuepipe-peers/bin/python \\
        --epochs 3 --repeat 3 --out results.json

What it does, in one run:

1. Makes sure the workloads exist: ``DATA/mnist/`` (``image``: 784 raw uint8 bytes, ``label``:
   int64), ``DATA/float/`` (``sha256`` bytes, ``feature``: float_list[128], ``label``) and
   ``DATA/tokens/`` (``tokens``: 8 to 256 int64 ids, a VarLenFeature; ``label``) and
   ``DATA/wide/`` (200 features ``f0``..``f199``, int64, float and bytes by ``i % 3``, even
   ``i`` a FixedLenFeature with a default and odd ``i`` a VarLenFeature of 0 to 2 values,
   each record holding a random 80% of them; ``label``; at most 20,000 records) and
   ``DATA/large/`` (``payload``: 102,400 random bytes, ``label``; at most 2,000 records),
   record ``i`` in shard ``i % shards``, the same content as ``make_data.py`` writes with
   TensorFlow (``--data`` reuses those files; without it queuepipe writes them, with
   ``--records`` and ``--shards``; a folder written before ``large/`` existed gets it added).
   ``DATA/mnist-gzip/`` holds GZIP copies for the scaling table.
   ``DATA`` defaults to a folder private to the user (:func:`default_data`); bench writes only
   into folders of the user's that others cannot write to, each file under a new temporary
   name renamed into place, so that it never writes through a link.
2. Runs each pipeline in its own subprocess, so that its time to the first batch counts from
   the process's launch (interpreter start and ``import queuepipe`` included, with the
   bytecode caches written first, as an install writes them) and its peak memory is its own
   (the child's ``ru_maxrss``, from ``os.wait4``):

   * ``qp_per_record``: the seeds' pattern, ``string_input_producer`` -> ``TFRecordReader.read``
     -> ``parse_single_example`` -> ``decode_raw`` -> ``shuffle_batch`` (2 threads);
   * ``qp_bulk``: ``read_batch_features`` whose ``parse_fn`` is one ``parse_example`` and one
     ``decode_raw`` per chunk (``read_batch_size``: read_batch_features' default, 2,048
     records but for large's 512), one enqueue thread (the default on 2 cores: see the
     scaling table and docs/performance.md).

   Their shuffle buffer holds 10,000 records (large: 1,000, 100 MiB).
3. With ``--peers-python``, runs ``bench_peers.py`` (beside this file) for the workload's peers
   (:data:`PEERS_OF`: ``floor``, ``tfdata``, ``tf1queue``, ``tfrecord_pkg``) under that
   interpreter, on the same files, the same way.
4. Prints the medians over ``--repeat`` runs (runs of the pipelines are interleaved, so that a
   busy moment of the machine hits all of them), with the steady CPU per record
   (``steady_cpu_us``: the process's CPU, every thread, from the first batch to the end, per
   record after the first batch), and each of issue 27's targets for the workload
   (:func:`targets`) with PASS/FAIL,
   and checks that every pipeline delivered every record of every epoch exactly once (the
   count and the label sum against ``truth.npz``). The exit status is 1 only when that check
   fails: a speed target missed on a busy host is a figure, not an error.
5. A scaling table: 1, 2 and 4 threads on the workload, mnist's GZIP shards, and the float
   workload.

``--pure`` runs queuepipe's pipelines on the pure-Python path (``QUEUEPIPE_PURE=1`` in the
children); ``matrix.py`` runs every workload on both paths and writes one table.

Every figure is in the format ``bench_peers.py`` prints, plus ``peak_rss_kib``. Our
``first_batch`` and ``seconds`` run from the subprocess's launch; the peers' from the start of
their ``main()`` (after the interpreter and NumPy are loaded), so the comparison favours them
slightly.
"""

from __future__ import annotations

# A child imports only what it runs: its time to the first batch counts from its launch, and
# the parent's tools (subprocess, tempfile, statistics, json: about 30 ms) are not queuepipe's.
import argparse
import os
import sys
import time
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS_SCRIPT = os.path.join(HERE, "bench_peers.py")  # run by --peers-python (README.md)
BATCH, BUFFER = 128, 10000
# The large workload's shuffle buffer (each of its records is 100 KiB: 10,000 would hold 1 GiB),
# the same in bench_peers.py.
LARGE_BUFFER = 1000
# qp_bulk's read_batch_size: None, read_batch_features' default (a user's choice where
# bench_stages.py --read-batch-size sets it).
BULK_CHUNK: Optional[int] = None
# Records per read_up_to in the scripts' own loops (bench_stages.py, instructions.py).
READ_CHUNK = 512
LAUNCH_ENV = "QUEUEPIPE_BENCH_LAUNCH"
# bench_peers.py's peers run on each workload (tfrecord_pkg decodes mnist only; TF1's queue
# runners are not run on wide, where a record costs them milliseconds, nor on large).
PEERS_OF = {"mnist": ("floor", "tfdata", "tf1queue", "tfrecord_pkg"),
            "float": ("floor", "tfdata", "tf1queue"), "tokens": ("floor", "tfdata", "tf1queue"),
            "wide": ("floor", "tfdata"), "large": ("floor", "tfdata")}
# No seed, as the peers' shuffles have none. (A seeded read_batch_features with one enqueue
# thread draws each batch from the first elements in arrival order, so that it repeats
# exactly, at some cost in speed: see docs/performance.md.)
SEED = None
FIELDS = ("examples", "seconds", "first_batch", "rate", "steady", "label_sum", "token_sum",
          "peak_rss_kib", "cpu_us", "steady_cpu_us", "core")
WORKLOADS = ("mnist", "float", "tokens", "wide", "large")


def buffer_of(workload: str) -> int:
    """The shuffle buffer of ``workload``'s pipelines (``min_after_dequeue``)."""
    return LARGE_BUFFER if workload == "large" else BUFFER


# -- the workloads ---------------------------------------------------------------------------


def default_data() -> str:
    """The workload folder without ``--data``: ``queuepipe/bench-data`` in the user's cache
    folder (``$XDG_CACHE_HOME``, else ``~/.cache``). Never a fixed folder of the shared
    temporary directory, where whoever makes it first decides what bench reads and, through
    links planted there, what it overwrites."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "queuepipe", "bench-data")


def private_folder(path: str) -> str:
    """``path``, created with mode 0700 where missing, after checking that bench may write
    into it: a real folder (not a link), the user's own, that no other user can write to
    (who could otherwise plant links in it)."""
    import stat

    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise SystemExit(f"bench writes its workloads into '{path}', which is a link or not a "
                         "folder: give --data a folder of your own")
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        whose = "another user owns" if info.st_uid != os.getuid() else "others can write to"
        raise SystemExit(f"bench writes its workloads into '{path}', which {whose}: give "
                         "--data a folder of your own (mode 0700)")
    return path


def new_file(path: str):
    """``(temporary path, place)``: write to the temporary file (created exclusively beside
    ``path`` under a random name), then call ``place()`` to rename it onto ``path``; a link at
    ``path`` is replaced, never written through."""
    import tempfile

    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    os.close(fd)
    return tmp, lambda: os.replace(tmp, path)


def shard_paths(directory: str, shards: int) -> list:
    return [os.path.join(directory, f"shard-{i:05d}-of-{shards:05d}.tfrecord")
            for i in range(shards)]


def write_workloads(data: str, records: int, shards: int) -> None:
    """Writes ``mnist/``, ``float/``, ``tokens/``, ``wide/``, ``large/`` and ``truth.npz`` as
    ``make_data.py`` does (the same content from the same seed)."""
    import hashlib

    import numpy as np

    import queuepipe as qp
    from queuepipe.protos import make_example

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(records, 784), dtype=np.uint8)
    labels = rng.integers(0, 10, size=records)
    floats = rng.standard_normal((records, 128)).astype(np.float32)
    lengths = rng.integers(8, 257, size=records)
    tokens = np.split(rng.zipf(1.3, size=int(lengths.sum())) % 50000, np.cumsum(lengths)[:-1])
    private_folder(data)
    for name in ("mnist", "float", "tokens"):
        directory = private_folder(os.path.join(data, name))
        files = [new_file(path) for path in shard_paths(directory, shards)]
        writers = [qp.io.TFRecordWriter(tmp) for tmp, _ in files]
        for i in range(records):
            if name == "mnist":
                features = {"image": images[i].tobytes(), "label": int(labels[i])}
            elif name == "tokens":
                features = {"tokens": tokens[i], "label": int(labels[i])}
            else:
                features = {"sha256": hashlib.sha256(str(i).encode()).hexdigest().encode(),
                            "feature": floats[i], "label": int(labels[i])}
            writers[i % shards].write(make_example(features).SerializeToString())
        for writer, (_, place) in zip(writers, files):
            writer.close()
            place()
    write_wide(data, labels, records, shards)
    write_large(data, labels, shards)
    tmp, place = new_file(os.path.join(data, "truth.npz"))
    with open(tmp, "wb") as f:
        np.savez(f, images=images, labels=labels, floats=floats, token_lengths=lengths,
                 token_sum=np.int64(sum(int(t.sum()) for t in tokens)),
                 wide_records=np.int64(min(records, WIDE_MAX)))
    place()


WIDE_KEYS, WIDE_MAX = 200, 20000


def write_wide(data: str, labels, records: int, shards: int) -> None:
    """``DATA/wide/``: records holding different subsets of 200 features, as
    ``make_data.py`` writes them."""
    import numpy as np

    import queuepipe as qp
    from queuepipe.protos import make_example

    rng = np.random.default_rng(1)
    directory = private_folder(os.path.join(data, "wide"))
    files = [new_file(path) for path in shard_paths(directory, shards)]
    writers = [qp.io.TFRecordWriter(tmp) for tmp, _ in files]
    for r in range(min(records, WIDE_MAX)):
        present = rng.random(WIDE_KEYS) < 0.8
        counts = np.where(np.arange(WIDE_KEYS) % 2 == 0, 1, rng.integers(0, 3, WIDE_KEYS))
        features = {"label": [int(labels[r])]}
        for i in np.flatnonzero(present).tolist():
            k = int(counts[i])
            features[f"f{i}"] = ([7 * r + i] * k, [0.5 * i] * k, [b"v%d" % i] * k)[i % 3]
        writers[r % shards].write(make_example(features).SerializeToString())
    for writer, (_, place) in zip(writers, files):
        writer.close()
        place()


LARGE_BYTES, LARGE_MAX = 102400, 2000


def write_large(data: str, labels, shards: int) -> None:
    """``DATA/large/``: ``payload``, 100 KiB of random bytes (seed 2), and ``label``, for the
    first ``min(len(labels), LARGE_MAX)`` labels, as ``make_data.py`` writes them."""
    import numpy as np

    import queuepipe as qp
    from queuepipe.protos import make_example

    rng = np.random.default_rng(2)
    directory = private_folder(os.path.join(data, "large"))
    files = [new_file(path) for path in shard_paths(directory, shards)]
    writers = [qp.io.TFRecordWriter(tmp) for tmp, _ in files]
    for r in range(min(len(labels), LARGE_MAX)):
        payload = rng.integers(0, 256, LARGE_BYTES, dtype=np.uint8).tobytes()
        features = {"payload": payload, "label": int(labels[r])}
        writers[r % shards].write(make_example(features).SerializeToString())
    for writer, (_, place) in zip(writers, files):
        writer.close()
        place()


def prepare(data: str, records: int, shards: int, workloads, log) -> str:
    """``data``, with the workloads written where ``truth.npz`` is missing and ``large/`` added
    to a folder written before it existed; a missing other workload is an error."""
    import numpy as np

    if not os.path.exists(os.path.join(data, "truth.npz")):
        log(f"writing {records} records in {shards} shards under {data}")
        write_workloads(data, records, shards)
    if "large" in workloads and not os.path.isdir(os.path.join(data, "large")):
        with np.load(os.path.join(data, "truth.npz")) as z:
            labels = z["labels"]
        log(f"writing {min(len(labels), LARGE_MAX)} records of large/ under {data}")
        write_large(data, labels, shards)
    for workload in workloads:
        if not os.path.isdir(os.path.join(data, workload)):
            raise SystemExit(f"{data} has no {workload}/ workload: write the workloads "
                             f"again (make_data.py, or remove {data} for bench.py to)")
    return data


def write_gzip_copy(data: str) -> None:
    """``DATA/mnist-gzip/``: the mnist shards, record for record, GZIP-compressed."""
    import queuepipe as qp

    target = os.path.join(data, "mnist-gzip")
    sources = sorted(p for p in os.listdir(os.path.join(data, "mnist")) if p.endswith(".tfrecord"))
    if os.path.isdir(target) and sorted(os.listdir(target)) == sources:
        return
    private_folder(target)
    for name in sources:
        partial, place = new_file(os.path.join(target, name))
        with qp.io.TFRecordWriter(partial, qp.io.TFRecordOptions("GZIP")) as writer:
            for record in qp.io.tf_record_iterator(os.path.join(data, "mnist", name)):
                writer.write(record)
        place()


def truth(data: str, epochs: int, workload: str = "mnist") -> dict:
    import numpy as np

    with np.load(os.path.join(data, "truth.npz")) as z:
        labels = z["labels"]
        if workload == "wide":
            labels = labels[:int(z["wide_records"])]
        elif workload == "large":
            labels = labels[:LARGE_MAX]
        expected = {"examples": len(labels) * epochs, "label_sum": int(labels.sum()) * epochs}
        if workload == "tokens":
            expected["token_sum"] = int(z["token_sum"]) * epochs
    return expected


# -- the pipelines (each runs in a child process) --------------------------------------------


def _specs(qp, workload: str) -> dict:
    if workload == "mnist":
        return {"image": qp.io.FixedLenFeature([], qp.string),
                "label": qp.io.FixedLenFeature([], qp.int64)}
    if workload == "tokens":  # a VarLenFeature: SparseValues through the queues
        return {"tokens": qp.io.VarLenFeature(qp.int64),
                "label": qp.io.FixedLenFeature([], qp.int64)}
    if workload == "wide":  # bench_peers.py's wide_spec
        kinds = [(qp.int64, 0), (qp.float32, 0.0), (qp.string, b"")]
        spec = {"label": qp.io.FixedLenFeature([], qp.int64)}
        for i in range(WIDE_KEYS):
            dtype, default = kinds[i % 3]
            spec[f"f{i}"] = qp.io.VarLenFeature(dtype) if i % 2 else \
                qp.io.FixedLenFeature([], dtype, default_value=default)
        return spec
    if workload == "large":
        return {"payload": qp.io.FixedLenFeature([], qp.string),
                "label": qp.io.FixedLenFeature([], qp.int64)}
    return {"sha256": qp.io.FixedLenFeature([], qp.string),
            "feature": qp.io.FixedLenFeature([128], qp.float32),
            "label": qp.io.FixedLenFeature([], qp.int64)}


def _decoded(qp, parsed: dict, workload: str) -> dict:
    """The parsed features as the trainer wants them: mnist images decoded to uint8 rows."""
    if workload == "mnist":
        return {"image": qp.io.decode_raw(parsed["image"], qp.uint8), "label": parsed["label"]}
    return parsed


def pipeline_per_record(qp, files, epochs, threads, workload, options, seed=SEED):
    """The seeds' pattern: one record per call of the producer, ``threads`` threads."""
    filenames = qp.train.string_input_producer(files, num_epochs=epochs, shuffle=True, seed=seed)
    reader = qp.TFRecordReader(options=options)
    specs = _specs(qp, workload)

    def example():
        _, serialized = reader.read(filenames)
        return _decoded(qp, qp.io.parse_single_example(serialized, specs), workload)

    buffer = buffer_of(workload)
    return qp.train.shuffle_batch(example, batch_size=BATCH, capacity=buffer + 3 * BATCH,
                                  min_after_dequeue=buffer, num_threads=threads, seed=seed,
                                  allow_smaller_final_batch=True)


def pipeline_per_record_seeded(qp, files, epochs, threads, workload, options):
    """``qp_per_record`` with seeds: its threads take turns (bench_order.py)."""
    return pipeline_per_record(qp, files, epochs, threads, workload, options, seed=0)


def pipeline_bulk(qp, files, epochs, threads, workload, options, seed=SEED, shuffle="buffer"):
    """``read_batch_features``: a chunk of records, one parse_example, enqueue_many. It
    parses with ``parse_example`` itself (the fast path: see docs/performance.md) but for
    mnist, whose ``parse_fn`` decodes the images too."""
    import functools

    specs = _specs(qp, workload)

    def parse(serialized):
        return _decoded(qp, qp.io.parse_example(serialized, specs), workload)

    return qp.train.read_batch_features(
        files, BATCH, specs, reader=functools.partial(qp.TFRecordReader, options=options),
        num_epochs=epochs, queue_capacity=2 * buffer_of(workload), num_enqueue_threads=threads,
        parse_fn=parse if workload == "mnist" else None, seed=seed,
        read_batch_size=BULK_CHUNK, shuffle=shuffle)


def pipeline_bulk_seeded(qp, files, epochs, threads, workload, options):
    """``qp_bulk`` with a seed: the same batches whatever the threads (bench_order.py)."""
    return pipeline_bulk(qp, files, epochs, threads, workload, options, seed=0)


def pipeline_bulk_global(qp, files, epochs, threads, workload, options):
    """``qp_bulk`` seeded, with the global shuffle by the ``.index`` files (bench_order.py)."""
    return pipeline_bulk(qp, files, epochs, threads, workload, options, seed=0,
                         shuffle="global")


def pipeline_compat(qp, files, epochs, threads, workload, options):
    """The seeds' pattern written as TF1 code, run by ``queuepipe.compat.v1`` (a graph built
    once, ``sess.run`` per batch): what a legacy script costs against the native one."""
    import queuepipe.compat.v1 as tf

    filename_queue = tf.train.string_input_producer(files, num_epochs=epochs, shuffle=True,
                                                    seed=SEED)
    reader = tf.TFRecordReader(options=options)
    _, serialized = reader.read(filename_queue)
    parsed = tf.parse_single_example(serialized, _specs(qp, workload))
    if workload == "mnist":
        # As TF1 code does (and the peers' tf1queue): decode_raw's length is unknown to the
        # graph, and shuffle_batch wants every shape fully defined.
        parsed = {"image": tf.reshape(tf.decode_raw(parsed["image"], tf.uint8), [784]),
                  "label": parsed["label"]}
    buffer = buffer_of(workload)
    batch = tf.train.shuffle_batch(parsed, batch_size=BATCH, capacity=buffer + 3 * BATCH,
                                   min_after_dequeue=buffer, num_threads=threads, seed=SEED,
                                   allow_smaller_final_batch=True)

    def run():
        with tf.Session() as sess:
            coord = tf.train.Coordinator()
            threads_ = tf.train.start_queue_runners(sess=sess, coord=coord)
            try:
                while True:
                    yield sess.run(batch)
            except tf.errors.OutOfRangeError:
                pass
            finally:
                coord.request_stop()
                coord.join(threads_)

    return run()


PIPELINES = {"qp_per_record": pipeline_per_record, "qp_bulk": pipeline_bulk,
             "compat_per_record": pipeline_compat, "qp_bulk_seeded": pipeline_bulk_seeded,
             "qp_bulk_global": pipeline_bulk_global,
             "qp_per_record_seeded": pipeline_per_record_seeded}
# The main table's threads: the seeds' 2 per record, the fastest 1 for bulk.
THREADS = {"qp_per_record": 2, "qp_bulk": 1, "compat_per_record": 2}
NATIVE = ("qp_per_record", "qp_bulk")  # the pipelines of the scaling table


def run_child(name: str, data: str, epochs: int, threads: int, workload: str,
              compression: str, path: str = "") -> None:
    """Runs one pipeline to the end and prints its line (called in the child process).

    ``path``: ``"pure"`` runs queuepipe's pure-Python path, ``"core"`` requires the compiled
    core (a missing one fails the child), ``""`` leaves the switches as the environment set
    them. The line says which ran (``core 1`` or ``core 0``).
    """
    import resource

    launch = float(os.environ.get(LAUNCH_ENV, time.time()))
    if path:
        os.environ.pop("QUEUEPIPE_PURE" if path == "core" else "QUEUEPIPE_REQUIRE_CORE", None)
        os.environ["QUEUEPIPE_REQUIRE_CORE" if path == "core" else "QUEUEPIPE_PURE"] = "1"
    import queuepipe as qp
    from queuepipe import _core

    folder = workload + ("-gzip" if compression else "")
    files = sorted(os.path.join(data, folder, f) for f in os.listdir(os.path.join(data, folder))
                   if f.endswith(".tfrecord"))
    options = qp.io.TFRecordOptions(compression or None)
    batches = PIPELINES[name](qp, files, epochs, threads, workload, options)
    first, n, label_sum, token_sum = None, 0, 0, 0
    for batch in batches:
        labels = batch["label"]
        if first is None:
            first = time.time()
            first_cpu, first_n = time.process_time(), len(labels)
        n += len(labels)
        label_sum += int(labels.sum())
        if workload == "tokens":
            token_sum += int(batch["tokens"].values.sum())
    end, end_cpu = time.time(), time.process_time()
    steady = (n - BATCH) / (end - first) if first is not None and end > first else 0.0
    # The CPU of every thread of the process from the first batch to the end, per record
    # delivered after the first batch: the pipeline's steady cost, without the interpreter's
    # start, the imports and the filling of the shuffle buffer.
    steady_cpu_us = (end_cpu - first_cpu) / (n - first_n) * 1e6 if n > first_n else 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{name} examples {n} seconds {end - launch:.3f} first_batch {first - launch:.3f} "
          f"rate {n / (end - launch):.0f}/s steady {steady:.0f}/s label_sum {label_sum} "
          f"{f'token_sum {token_sum} ' if workload == 'tokens' else ''}peak_rss_kib {peak} "
          f"steady_cpu_us {steady_cpu_us:.3f} core {int(_core.core is not None)}", flush=True)


# -- running children and reading their lines ------------------------------------------------


def log(text: str) -> None:
    """Progress, on stderr (the tables go to stdout)."""
    print(text, file=sys.stderr, flush=True)



def compile_library() -> None:
    """Writes queuepipe's bytecode caches (and this file's), as installing a package does.

    A source checkout installed in editable mode, run where ``PYTHONDONTWRITEBYTECODE`` is
    set, never writes them: every child would compile each module it imports before its
    first batch, a cost no installed copy pays.
    """
    import compileall

    import queuepipe

    compileall.compile_dir(os.path.dirname(queuepipe.__file__), quiet=2)
    compileall.compile_file(os.path.abspath(__file__), quiet=2)


def parse_line(line: str) -> dict:
    """``NAME examples N seconds S ...`` -> {field: number}."""
    words = line.split()
    out = {}
    for key, value in zip(words[1::2], words[2::2]):
        if key in FIELDS:
            out[key] = float(value.rstrip("/s"))
    return out


def launch(argv: list, env: Optional[dict] = None, cwd: Optional[str] = None) -> dict:
    """Runs ``argv`` (in ``cwd``); returns its result line parsed, with the child's peak RSS
    from wait4."""
    import subprocess
    import tempfile

    env = dict(os.environ if env is None else env)
    env[LAUNCH_ENV] = repr(time.time())
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=cwd).pid
        _, status, usage = os.wait4(pid, 0)  # the rusage of this child alone
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        lines = [ln for ln in out.read().decode().splitlines() if " examples " in ln]
        if code or not lines:
            raise RuntimeError(f"{' '.join(argv)} failed (exit {code}):\n"
                               f"{err.read().decode()[-3000:]}")
    result = parse_line(lines[-1])
    result["peak_rss_kib"] = usage.ru_maxrss
    # CPU time per record, the child's whole life (interpreter start included): a figure a
    # busy host moves less than the wall-clock rates.
    result["cpu_us"] = (usage.ru_utime + usage.ru_stime) / max(result["examples"], 1) * 1e6
    return result


# A child imports this file as a module, from its bytecode cache: run as a script, it would be
# compiled anew in every child, before its first batch.
_CHILD_MAIN = f"import sys; sys.path.insert(0, {HERE!r}); import bench; sys.exit(bench.main())"


def child_argv(name, data, epochs, threads=2, workload="mnist", compression="", path=""):
    """The argv of a child running pipeline ``name`` (``path``: see :func:`run_child`)."""
    return [sys.executable, "-c", _CHILD_MAIN, "--child", name, "--data", data,
            "--epochs", str(epochs), "--threads", str(threads), "--workload", workload,
            "--compression", compression, "--path", path]


def peer_argv(python, peer, data, epochs, workload="mnist"):
    return [python, PEERS_SCRIPT, data, peer, "--epochs", str(epochs), "--workload", workload]


def median_of(runs: list) -> dict:
    import statistics

    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def run_rows(configs: dict, repeat: int, log) -> dict:
    """Runs every config ``repeat`` times, round-robin; returns label -> {median, runs}."""
    runs = {label: [] for label in configs}
    for i in range(repeat):
        for label, argv in configs.items():
            result = launch(argv)
            runs[label].append(result)
            log(f"  [{i + 1}/{repeat}] {label}: " + " ".join(
                f"{k} {result[k]:g}" for k in FIELDS if k in result))
    return {label: {"median": median_of(r), "runs": r} for label, r in runs.items()}


# -- report ----------------------------------------------------------------------------------


def table(rows: dict, expected: dict) -> str:
    """The rows as a Markdown table, each checked against ``expected`` (a workload's truth,
    or one for each row's label)."""
    head = ("| pipeline | path | steady rate | steady CPU / record | whole run "
            "| time to first batch | peak memory | records, label sum |")
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for label, row in rows.items():
        m = row["median"]
        lines.append(f"| {label} | {path_of(m)} | {rate(m)} | {m['steady_cpu_us']:.2f} us "
                     f"| {m['seconds']:.2f} s | {m['first_batch']:.2f} s "
                     f"| {m['peak_rss_kib'] / 1024:.0f} MiB "
                     f"| {exactly(label, m, expected.get(label, expected))} |")
    return "\n".join(lines)


def path_of(m: dict) -> str:
    """Which of queuepipe's paths a row ran (its children say); ``-`` for a peer."""
    return "-" if "core" not in m else "core" if m["core"] else "pure"


def rate(m: dict) -> str:
    """The steady rate, in thousands of records per second (large: to 0.1k)."""
    return f"{m['steady'] / 1000:,.{0 if m['steady'] >= 10000 else 1}f}k/s"


def exactly(label: str, m: dict, expected: dict) -> str:
    """The median run's records against the truth: ``exact`` or what differs."""
    if label == "floor" and m.get("label_sum") == 0:
        return "floor reads only"
    return "exact" if _exact(m, expected) else \
        f"WRONG {int(m['examples'])}, {int(m['label_sum'])}"


def _exact(m: dict, expected: dict) -> bool:
    """Every record once: the count, the label sum and (tokens) the token-id sum."""
    return all(int(m.get(key, -1)) == value for key, value in expected.items())


# Issue 27's targets (item 8), for the compiled core: (pipeline, peer, at least this many
# times the peer's steady rate). The older issues' 2x tf.data and 4x TF1 are replaced by these
# on the core, and by "no slower than the baseline" on the pure path.
RATIO_TARGETS = {
    "mnist": [("qp_bulk", "tfdata", 4), ("qp_per_record", "tf1queue", 6)],
    "tokens": [("qp_bulk", "tfdata", 3), ("qp_per_record", "tf1queue", 4)],
    "wide": [("qp_bulk", "tfdata", 1)],
    "large": [("qp_bulk", "floor", 0.7)],  # bench_peers.py's floor: Python + crc32c
}
CPU_TARGETS = {"mnist": [("qp_bulk", 1.5)]}  # at most this many us of steady CPU per record
FIRST_BATCH_TARGET = 0.3  # seconds from the process's launch, every workload
BASELINE = os.path.join(HERE, "baseline.json")  # written by matrix.py --record-baseline


def load_baseline(path: str = BASELINE) -> Optional[dict]:
    """The recorded baseline (``matrix.py --record-baseline``), or None where there is none."""
    import json

    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def targets(rows: dict, expected: dict, workload: str = "mnist", path: str = "core",
            baseline: Optional[dict] = None) -> list:
    """[(row, target, measured text, passed)]: the targets for ``workload`` on ``path``
    (medians of one run), for the rows present.

    On the core: issue 27's ratios to the peers (:data:`RATIO_TARGETS`), mnist's steady CPU
    per record, the first batch of ``qp_bulk`` and ``qp_per_record``. On either path: the
    least steady CPU per record of the runs against ``baseline``'s (the least of its runs)
    wherever it holds a figure for the workload and the path, at most its ``tolerance`` times
    it ("no slower than today": the least of several runs is the figure a busy host moves
    least); the older targets
    that issue 27 does not replace (mnist: whole run and peak memory against tf.data; the TF1
    layer's cost); every record once in every run.
    """
    out = []

    def m(label, key):
        return rows[label]["median"][key]

    if path == "core":
        for label, peer, times in RATIO_TARGETS.get(workload, []):
            if label in rows and peer in rows:
                r = m(label, "steady") / m(peer, "steady")
                out.append((label, f"steady rate >= {times:g}x {peer}'s", f"{r:.2f}x",
                            r >= times))
        for label, most in CPU_TARGETS.get(workload, []):
            if label in rows:
                us = m(label, "steady_cpu_us")
                out.append((label, f"steady CPU <= {most:g} us per record", f"{us:.2f} us",
                            us <= most))
        for label in ("qp_bulk", "qp_per_record"):
            if label in rows:
                t = m(label, "first_batch")
                out.append((label, f"first batch <= {FIRST_BATCH_TARGET:g} s from launch",
                            f"{t:.3f} s", t <= FIRST_BATCH_TARGET))
    if baseline:
        tolerance = baseline["tolerance"]
        figures = baseline["steady_cpu_us"].get(workload, {}).get(path, {})
        # The steady figure leaves out the records read before the first batch (the shuffle
        # buffer's): it compares only runs of as many records.
        records = baseline["records"].get(workload)
        for label, figure in figures.items():
            if label not in rows:
                continue
            target = (f"least steady CPU <= {tolerance:g}x the baseline's ({figure:.2f} us, "
                      f"{baseline['commit'][:8]})")
            if records != expected["examples"]:
                out.append((label, target, f"not compared: {expected['examples']:,} records, "
                            f"the baseline's {records:,}", False))
                continue
            least = min(run["steady_cpu_us"] for run in rows[label]["runs"])
            r = least / figure
            out.append((label, target, f"{r:.2f}x ({least:.2f} us)", r <= tolerance))
    if workload == "mnist" and "tfdata" in rows:
        if "qp_bulk" in rows:
            r = m("qp_bulk", "seconds") / m("tfdata", "seconds")
            out.append(("qp_bulk", "whole run <= 0.5x tfdata's", f"{r:.2f}x", r <= 0.5))
        for label in ("qp_bulk", "qp_per_record"):
            if label in rows:
                r = m(label, "peak_rss_kib") / m("tfdata", "peak_rss_kib")
                out.append((label, "peak memory <= 0.25x tfdata's", f"{r:.2f}x", r <= 0.25))
    if "compat_per_record" in rows and "qp_per_record" in rows:
        r = m("qp_per_record", "steady") / m("compat_per_record", "steady")
        out.append(("compat_per_record", "cost <= 1.5x qp_per_record's", f"{r:.2f}x",
                    r <= 1.5))
    for label, row in rows.items():
        if label == "floor":
            continue
        exact = all(_exact(r, expected) for r in row["runs"])
        sums = "count, label and token sums" if "token_sum" in expected else \
            "count and label sum"
        out.append((label, EXACT_TARGET, f"{sums} {'match' if exact else 'DIFFER'}", exact))
    return out


EXACT_TARGET = "every record once in every run"


def target_table(results: list) -> str:
    lines = ["| pipeline | target | measured | |", "|---|---|---|---|"]
    lines += [f"| {row} | {t} | {v} | {'PASS' if ok else 'FAIL'} |"
              for row, t, v, ok in results]
    return "\n".join(lines)


def plot(rows: dict, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(rows)
    rates = [rows[k]["median"]["steady"] / 1000 for k in labels]
    colors = ["tab:blue" if k.startswith("qp_") else "tab:gray" for k in labels]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    bars = ax.barh(labels[::-1], rates[::-1], color=colors[::-1])
    ax.bar_label(bars, [f"{r:,.0f}k" for r in rates[::-1]], padding=3)
    ax.set_xlabel("steady-state records/s (thousands), median of runs")
    ax.set_title(title)
    ax.set_xlim(0, max(rates) * 1.18)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main ------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bench.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="workload folder (mnist/, float/, truth.npz), e.g. written "
                    "by make_data.py; written by queuepipe when missing (default "
                    f"{default_data()}, private to you)", default=default_data())
    ap.add_argument("--records", type=int, default=60000, help="records when writing data")
    ap.add_argument("--shards", type=int, default=8, help="shards when writing data")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each pipeline (median)")
    ap.add_argument("--peers-python", metavar="PATH",
                    help="python of a virtualenv with tensorflow, tfrecord and torch")
    ap.add_argument("--out", metavar="JSON", help="write every run's figures here")
    ap.add_argument("--plot", metavar="PNG", help="draw steady rates here (needs matplotlib)")
    ap.add_argument("--no-scaling", action="store_true", help="skip the scaling table")
    ap.add_argument("--workload", default="mnist", choices=WORKLOADS,
                    help="the main table's workload (tokens: a VarLenFeature of 8 to 256 ids; "
                    "wide: 200 features, each record holding 80%% of them; large: 100 KiB "
                    "records)")
    ap.add_argument("--pure", action="store_true",
                    help="run queuepipe on its pure-Python path (QUEUEPIPE_PURE=1)")
    # the child's options
    ap.add_argument("--child", choices=sorted(PIPELINES), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--compression", default="", help=argparse.SUPPRESS)
    ap.add_argument("--path", default="", choices=("", "core", "pure"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(args.child, args.data, args.epochs, args.threads, args.workload,
                  args.compression, args.path)
        return 0
    if args.pure:  # inherited by every child (launch copies os.environ)
        os.environ["QUEUEPIPE_PURE"] = "1"
    compile_library()
    data = prepare(os.path.abspath(args.data), args.records, args.shards, [args.workload], log)
    expected = truth(data, args.epochs, args.workload)
    log(f"{expected['examples']} records expected, label sum {expected['label_sum']}")

    configs = {name: child_argv(name, data, args.epochs, threads, args.workload)
               for name, threads in THREADS.items()}
    if args.peers_python:
        configs.update({peer: peer_argv(args.peers_python, peer, data, args.epochs,
                                        args.workload) for peer in PEERS_OF[args.workload]})
    log(f"main table: {args.repeat} runs of {', '.join(configs)}")
    rows = run_rows(configs, args.repeat, log)
    results = {"epochs": args.epochs, "repeat": args.repeat, "expected": expected,
               "cpus": os.cpu_count(), "main": rows}
    checks = targets(rows, expected, args.workload, "pure" if args.pure else "core",
                     load_baseline())
    results["targets"] = [{"pipeline": row, "target": t, "measured": v, "passed": ok}
                          for row, t, v, ok in checks]

    if not args.no_scaling:
        prepare(data, args.records, args.shards, ["mnist", "float"], log)
        write_gzip_copy(data)
        scaling, scaling_expected = {}, {}
        for name in NATIVE:
            # (the threads on the table's workload; GZIP shards are mnist's, and the float
            # workload is float's, each checked against its own truth)
            rows_of = [(f"{name}, {threads} thread{'s' if threads > 1 else ''}"
                        + ("" if args.workload == "mnist" else f", {args.workload} workload"),
                        threads, args.workload, "") for threads in (1, 2, 4)]
            rows_of += [(f"{name}, GZIP shards", THREADS[name], "mnist", "GZIP"),
                        (f"{name}, float workload", THREADS[name], "float", "")]
            for label, threads, workload, compression in rows_of:
                scaling[label] = child_argv(name, data, args.epochs, threads, workload,
                                            compression=compression)
                scaling_expected[label] = truth(data, args.epochs, workload)
        log(f"scaling table: {args.repeat} runs of {len(scaling)} configurations")
        results["scaling"] = run_rows(scaling, args.repeat, log)

    print(f"\n{args.epochs} epochs of {expected['examples'] // args.epochs} records, "
          f"medians of {args.repeat} runs, {os.cpu_count()} CPUs\n")
    print(table(rows, expected))
    print()
    print(target_table(checks))
    if "scaling" in results:
        print()
        print(table(results["scaling"], scaling_expected))
    if args.out:
        import json

        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    if args.plot:
        plot(rows, args.plot, f"{args.epochs} epochs of the {args.workload} workload, "
                              f"{os.cpu_count()} CPUs")
    # Speed is measured, not asserted (a busy host moves it by half): only a pipeline that lost
    # or repeated a record makes the run fail.
    return 0 if all(ok for _, target, _, ok in checks if target == EXACT_TARGET) else 1


if __name__ == "__main__":
    sys.exit(main())
