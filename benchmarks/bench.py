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
   each record holding a random 80% of them; ``label``; at most 20,000 records),
   record ``i`` in shard ``i % shards``, the same content as ``make_data.py`` writes with
   TensorFlow (``--data`` reuses those files; without it queuepipe writes them, with
   ``--records`` and ``--shards``). ``DATA/mnist-gzip/`` holds GZIP copies for the scaling table.
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
     ``decode_raw`` per chunk of 1024 records (``read_batch_size``), one enqueue thread (the
     fastest on 2 cores: see the scaling table and docs/performance.md).

3. With ``--peers-python``, runs ``bench_peers.py`` (beside this file) for ``floor``, ``tfdata``,
   ``tf1queue`` and ``tfrecord_pkg`` under that interpreter, on the same files, the same way.
4. Prints the medians over ``--repeat`` runs (runs of the pipelines are interleaved, so that a
   busy moment of the machine hits all of them) and each target as a ratio with PASS/FAIL,
   and checks that every pipeline delivered every record of every epoch exactly once (the
   count and the label sum against ``truth.npz``). The exit status is 1 only when that check
   fails: a speed target missed on a busy host is a figure, not an error.
5. A scaling table: 1, 2 and 4 threads, GZIP shards, and the float-feature workload.

``--pure`` runs queuepipe's pipelines on the pure-Python path (``QUEUEPIPE_PURE=1`` in the
children), so that one command measures each path on every workload.

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
BULK_CHUNK = 512  # records per read_up_to + parse_example in qp_bulk
LAUNCH_ENV = "QUEUEPIPE_BENCH_LAUNCH"
PEERS = ("floor", "tfdata", "tf1queue", "tfrecord_pkg")
# No seed, as the peers' shuffles have none. (A seeded read_batch_features with one enqueue
# thread draws each batch from the first elements in arrival order, so that it repeats
# exactly, at some cost in speed: see docs/performance.md.)
SEED = None
FIELDS = ("examples", "seconds", "first_batch", "rate", "steady", "label_sum", "token_sum",
          "peak_rss_kib", "cpu_us")


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
    """Writes ``mnist/``, ``float/``, ``tokens/``, ``wide/`` and ``truth.npz`` as
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

    return qp.train.shuffle_batch(example, batch_size=BATCH, capacity=BUFFER + 3 * BATCH,
                                  min_after_dequeue=BUFFER, num_threads=threads, seed=seed,
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
        num_epochs=epochs, queue_capacity=2 * BUFFER, num_enqueue_threads=threads,
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
    batch = tf.train.shuffle_batch(parsed, batch_size=BATCH, capacity=BUFFER + 3 * BATCH,
                                   min_after_dequeue=BUFFER, num_threads=threads, seed=SEED,
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
              compression: str) -> None:
    """Runs one pipeline to the end and prints its line (called in the child process)."""
    import resource

    launch = float(os.environ.get(LAUNCH_ENV, time.time()))
    import queuepipe as qp

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
        n += len(labels)
        label_sum += int(labels.sum())
        if workload == "tokens":
            token_sum += int(batch["tokens"].values.sum())
    end = time.time()
    steady = (n - BATCH) / (end - first) if first is not None and end > first else 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{name} examples {n} seconds {end - launch:.3f} first_batch {first - launch:.3f} "
          f"rate {n / (end - launch):.0f}/s steady {steady:.0f}/s label_sum {label_sum} "
          f"{f'token_sum {token_sum} ' if workload == 'tokens' else ''}peak_rss_kib {peak}",
          flush=True)


# -- running children and reading their lines ------------------------------------------------


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


def launch(argv: list, env: Optional[dict] = None) -> dict:
    """Runs ``argv``; returns its result line parsed, with the child's peak RSS from wait4."""
    import subprocess
    import tempfile

    env = dict(os.environ if env is None else env)
    env[LAUNCH_ENV] = repr(time.time())
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = subprocess.Popen(argv, stdout=out, stderr=err, env=env).pid
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


def child_argv(name, data, epochs, threads=2, workload="mnist", compression=""):
    return [sys.executable, "-c", _CHILD_MAIN, "--child", name, "--data", data,
            "--epochs", str(epochs), "--threads", str(threads), "--workload", workload,
            "--compression", compression]


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
    head = ("| pipeline | steady rate | whole run | time to first batch | peak memory "
            "| records, label sum |")
    lines = [head, "|---|---|---|---|---|---|"]
    for label, row in rows.items():
        m = row["median"]
        ok = ("floor reads only" if m.get("label_sum") == 0 and label == "floor" else
              "exact" if _exact(m, expected) else
              f"WRONG {int(m['examples'])}, {int(m['label_sum'])}")
        lines.append(f"| {label} | {m['steady'] / 1000:,.0f}k/s | {m['seconds']:.2f} s "
                     f"| {m['first_batch']:.2f} s | {m['peak_rss_kib'] / 1024:.0f} MiB | {ok} |")
    return "\n".join(lines)


def _exact(m: dict, expected: dict) -> bool:
    """Every record once: the count, the label sum and (tokens) the token-id sum."""
    return all(int(m.get(key, -1)) == value for key, value in expected.items())


def targets(rows: dict, expected: dict, workload: str = "mnist") -> list:
    """[(target, measured text, passed)] for the issues' targets (medians of one run); the
    tokens workload's are the ratios and exactly-once."""
    out = []

    def m(label, key):
        return rows[label]["median"][key]

    if "tf1queue" in rows:
        r = m("qp_per_record", "steady") / m("tf1queue", "steady")
        out.append(("qp_per_record steady rate >= 4x tf1queue", f"{r:.1f}x", r >= 4))
    if "tfdata" in rows:
        r = m("qp_bulk", "steady") / m("tfdata", "steady")
        out.append(("qp_bulk steady rate >= 2x tfdata", f"{r:.2f}x", r >= 2))
        if workload == "mnist":
            r = m("qp_bulk", "seconds") / m("tfdata", "seconds")
            out.append(("qp_bulk whole run <= 0.5x tfdata's", f"{r:.2f}x", r <= 0.5))
            for label in ("qp_bulk", "qp_per_record"):
                r = m(label, "peak_rss_kib") / m("tfdata", "peak_rss_kib")
                out.append((f"{label} peak memory <= 0.25x tfdata's", f"{r:.2f}x", r <= 0.25))
    if "compat_per_record" in rows:
        r = m("qp_per_record", "steady") / m("compat_per_record", "steady")
        out.append(("compat_per_record cost <= 1.5x qp_per_record's", f"{r:.2f}x", r <= 1.5))
    if workload == "mnist":
        t = m("qp_bulk", "first_batch")
        out.append(("qp_bulk first batch <= 0.3 s from process start", f"{t:.3f} s", t <= 0.3))
    for label, row in rows.items():
        if label == "floor":
            continue
        exact = all(_exact(r, expected) for r in row["runs"])
        sums = "count, label and token sums" if "token_sum" in expected else \
            "count and label sum"
        out.append((f"{label}: every record once in every run",
                    f"{sums} {'match' if exact else 'DIFFER'}", exact))
    return out


def target_table(results: list) -> str:
    lines = ["| target | measured | |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {'PASS' if ok else 'FAIL'} |" for t, v, ok in results]
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
    ap.add_argument("--workload", default="mnist", choices=("mnist", "float", "tokens", "wide"),
                    help="the main table's workload (tokens: a VarLenFeature of 8 to 256 ids; "
                    "wide: 200 features, each record holding 80%% of them)")
    ap.add_argument("--pure", action="store_true",
                    help="run queuepipe on its pure-Python path (QUEUEPIPE_PURE=1)")
    # the child's options
    ap.add_argument("--child", choices=sorted(PIPELINES), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--compression", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        run_child(args.child, args.data, args.epochs, args.threads, args.workload,
                  args.compression)
        return 0

    def log(text):
        print(text, file=sys.stderr, flush=True)

    if args.pure:  # inherited by every child (launch copies os.environ)
        os.environ["QUEUEPIPE_PURE"] = "1"
    compile_library()
    data = os.path.abspath(args.data)
    if not os.path.exists(os.path.join(data, "truth.npz")):
        log(f"writing {args.records} records in {args.shards} shards under {data}")
        write_workloads(data, args.records, args.shards)
    if not os.path.isdir(os.path.join(data, args.workload)):
        raise SystemExit(f"{data} has no {args.workload}/ workload: write the workloads "
                         f"again (make_data.py, or remove {data} for bench.py to)")
    expected = truth(data, args.epochs, args.workload)
    log(f"{expected['examples']} records expected, label sum {expected['label_sum']}")

    configs = {name: child_argv(name, data, args.epochs, threads, args.workload)
               for name, threads in THREADS.items()}
    if args.peers_python:
        peers = [p for p in PEERS if args.workload == "mnist" or p == "tfdata"
                 or (p == "tf1queue" and args.workload != "wide")]
        configs.update({peer: peer_argv(args.peers_python, peer, data, args.epochs,
                                        args.workload) for peer in peers})
    log(f"main table: {args.repeat} runs of {', '.join(configs)}")
    rows = run_rows(configs, args.repeat, log)
    results = {"epochs": args.epochs, "repeat": args.repeat, "expected": expected,
               "cpus": os.cpu_count(), "main": rows}
    checks = targets(rows, expected, args.workload)
    results["targets"] = [{"target": t, "measured": v, "passed": ok} for t, v, ok in checks]

    if not args.no_scaling:
        write_gzip_copy(data)
        scaling = {}
        for name in NATIVE:
            for threads in (1, 2, 4):
                label = f"{name}, {threads} thread{'s' if threads > 1 else ''}"
                scaling[label] = child_argv(name, data, args.epochs, threads)
            scaling[f"{name}, GZIP shards"] = child_argv(name, data, args.epochs, THREADS[name],
                                                         compression="GZIP")
            scaling[f"{name}, float workload"] = child_argv(name, data, args.epochs,
                                                            THREADS[name], workload="float")
        log(f"scaling table: {args.repeat} runs of {len(scaling)} configurations")
        results["scaling"] = run_rows(scaling, args.repeat, log)

    print(f"\n{args.epochs} epochs of {expected['examples'] // args.epochs} records, "
          f"medians of {args.repeat} runs, {os.cpu_count()} CPUs\n")
    print(table(rows, expected))
    print()
    print(target_table(checks))
    if "scaling" in results:
        print()
        print(table(results["scaling"], expected))
    if args.out:
        import json

        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    if args.plot:
        plot(rows, args.plot, f"{args.epochs} epochs of the {args.workload} workload, "
                              f"{os.cpu_count()} CPUs")
    # Speed is measured, not asserted (a busy host moves it by half): only a pipeline that lost
    # or repeated a record makes the run fail.
    return 0 if all(ok for target, _, ok in checks if "every record once" in target) else 1


if __name__ == "__main__":
    sys.exit(main())
