"""Instructions per record of queuepipe's two pipelines, counted by valgrind: a figure that a
busy, shared machine does not move.

usage::

    python benchmarks/instructions.py --data ~/.cache/queuepipe/bench-data            # both pipelines
    python benchmarks/instructions.py --data ~/.cache/queuepipe/bench-data per_record --records 20000
    python benchmarks/instructions.py --data ~/.cache/queuepipe/bench-data features features_seeded
    python benchmarks/instructions.py --data ~/.cache/queuepipe/bench-data parse features --workload tokens
    QUEUEPIPE_PURE=1 python benchmarks/instructions.py --data ~/.cache/queuepipe/bench-data read  # pure path

Wall-clock rates on a shared 2-core machine vary by half from run to run, too much to see a
change of a few percent. This runs each pipeline's work with the benchmark's own producer and
queue sizes (``bench.py``), under ``valgrind --tool=callgrind`` twice, for ``--records`` and
for 2,000 records (the features pipelines: 3 epochs and 1), and prints the difference divided
by the difference in records: the instructions one more record costs, imports and warm-up
excluded.

* ``per_record``: the seeds' ``example()`` (``TFRecordReader.read``, ``parse_single_example``,
  ``decode_raw``) called by ``shuffle_batch``'s enqueue op into a shuffle queue of 10,384
  elements, and ``dequeue_many(128)`` whenever it is nearly full. Fewer than about 10,200
  records only fill the queue: ``--warm 12000`` counts the steady state, batches leaving.
* ``bulk``: ``read_up_to(512)``, ``parse_example``, ``decode_raw`` and ``enqueue_many`` into a
  shuffle queue of 20,000 elements, drained by ``dequeue_many(128)`` down to 10,128.
* ``read``: ``read_up_to(512)`` alone: framing and both checksums of every record, what the
  compiled core does (``QUEUEPIPE_PURE=1``: the pure path's cost).
* ``features`` and ``features_seeded``: ``bench.py``'s ``qp_bulk`` itself
  (``read_batch_features``, its threads included), unseeded and with ``seed=0``: what a seed
  costs. These count whole epochs, 3 less 1 (``--records`` does not apply), with
  ``--threads`` enqueue threads (1 by default; valgrind runs one thread at a time).
* ``parse``: ``read_up_to(512)`` and ``parse_example`` alone, no queue: the record path.

``--workload`` (mnist, float, tokens, wide) applies to ``features``, ``parse`` and
``per_record``; the others run on mnist.

``--gil-held`` counts only the instructions run holding the GIL: the work two enqueue threads
cannot share, the bound on what a second one gives (``bench_gil.py``). It builds a copy of the
package in a temporary folder, its core compiled with ``QP_COUNT_GIL_HELD`` (``gil.h``: callgrind
stops counting where the core lets go of the GIL, and starts again where it takes it back), and
counts that copy. Python's own let-gos (a file read, NumPy's) still count: they add the
same to both sides of an A/B. Needs valgrind's ``callgrind.h`` (Debian's valgrind package).

The counted child runs with ``PYTHONHASHSEED=0`` and one BLAS/OpenMP thread
(``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and the like set to 1):
NumPy's OpenBLAS otherwise starts a pool of threads at import whose start-up and spinning
valgrind counts too, and the counts of the same run then swing by thousands of instructions a
record.

per_record, bulk and read leave threads out on purpose: what they add (GIL hand-overs, cache
traffic between cores) is measured by ``bench.py``, not here. Needs ``valgrind`` (Debian's
package) and the workload that ``bench.py`` writes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
BASELINE = 2000  # records of the run that is subtracted (imports, first file, warm-up)
PIPELINES = ("per_record", "bulk", "read", "features", "features_seeded", "parse")
EPOCHS = 3  # of the features pipelines' measured run (their baseline: one epoch)
# The variables that size NumPy's BLAS and OpenMP thread pools: one thread in the counted run.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def run(pipeline: str, data: str, records: int, threads: int = 1,
        workload: str = "mnist", warm: int = 0) -> int:
    """Runs ``pipeline`` over ``records`` records in this thread (the measured program), or
    for the features pipelines over ``records`` epochs; returns the records it ran over."""
    sys.path.insert(0, HERE)
    import bench
    import queuepipe as qp
    from queuepipe.batching import _DeferredQueue, _EnqueueOp, _Structure

    if not pipeline.startswith("features") and pipeline not in ("parse", "per_record"):
        workload = "mnist"
    folder = os.path.join(data, workload)
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".tfrecord"))
    if pipeline.startswith("features"):
        seed = 0 if pipeline == "features_seeded" else None
        batches = bench.pipeline_bulk(qp, files, records, threads, workload, None, seed=seed)
        return sum(len(batch["label"]) for batch in batches)
    filenames = qp.FIFOQueue(3 * len(files) + 1, qp.string)
    filenames.enqueue_many([files * 3])
    filenames.close()
    reader = qp.TFRecordReader()
    if pipeline == "read":
        done = 0
        while done < records:
            done += len(reader.read_up_to(filenames, bench.READ_CHUNK)[1])
        return records
    if pipeline == "parse":
        specs, done = bench._specs(qp, workload), 0
        while done < records:
            _, values = reader.read_up_to(filenames, bench.READ_CHUNK)
            qp.io.parse_example(values, specs)
            done += len(values)
        return done
    specs = bench._specs(qp, workload)
    if pipeline == "per_record":
        capacity = bench.BUFFER + 3 * bench.BATCH

        def example():
            _, serialized = reader.read(filenames)
            return bench._decoded(qp, qp.io.parse_single_example(serialized, specs), workload)

        deferred = _DeferredQueue(
            lambda dtypes, shapes, names: qp.RandomShuffleQueue(
                capacity, bench.BUFFER, dtypes=dtypes, shapes=shapes, names=names, seed=0),
            None, False, capacity, "per_record")
        op = _EnqueueOp(example, deferred, _Structure(), False, True)
        op()
        queue = deferred._queue
        while queue.stats()["enqueued"] < warm + records:
            op()
            if queue.size() > capacity - 200:
                queue.dequeue_many(bench.BATCH)
        return records
    queue = qp.RandomShuffleQueue(2 * bench.BUFFER, bench.BUFFER, dtypes=[qp.uint8, qp.int64],
                                  shapes=[[784], []], names=["image", "label"], seed=0)
    done = 0
    while done < records:
        _, values = reader.read_up_to(filenames, bench.READ_CHUNK)
        queue.enqueue_many(bench._decoded(qp, qp.io.parse_example(values, specs), "mnist"))
        done += len(values)
        while queue.size() >= bench.BUFFER + bench.BATCH + bench.READ_CHUNK:
            queue.dequeue_many(bench.BATCH)
    return records


def gil_counting_copy(folder: str) -> str:
    """A copy of the package in ``folder`` whose core is built with ``QP_COUNT_GIL_HELD``
    (callgrind counts only what runs holding the GIL); returns ``folder``, for PYTHONPATH."""
    root = os.path.dirname(HERE)
    shutil.copytree(os.path.join(root, "queuepipe"), os.path.join(folder, "queuepipe"),
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("setup.py", "setup.cfg", "README.md"):
        shutil.copy(os.path.join(root, name), folder)
    env = dict(os.environ, CFLAGS="-O2 -DQP_COUNT_GIL_HELD", QUEUEPIPE_REQUIRE_CORE="1",
               QUEUEPIPE_WERROR="1")
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=folder,
                   env=env, check=True, capture_output=True)
    found = subprocess.run([sys.executable, os.path.join(HERE, "instructions.py"),
                            "--core-file"], env=dict(os.environ, PYTHONPATH=folder),
                           capture_output=True, text=True, check=True).stdout.strip()
    if not found.startswith(folder):
        raise RuntimeError(f"the counting copy's core is not the one imported: {found}")
    return folder


def instructions(pipeline: str, data: str, amount: int, threads: int,
                 workload: str, warm: int = 0, path: str = "") -> Tuple[int, int]:
    """The instructions valgrind counts for a whole run of ``pipeline`` over ``amount``
    (records, or epochs), and the records it ran over; ``path``: the package's folder to
    import first (``gil_counting_copy``)."""
    env = dict(os.environ, PYTHONHASHSEED="0")  # the same dict layouts in every run
    if path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [path, env.get("PYTHONPATH")]))
    env.update(dict.fromkeys(BLAS_THREADS, "1"))  # no BLAS thread pool (see the docstring)
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
            os.path.abspath(__file__), pipeline, "--data", data, "--records", str(amount),
            "--threads", str(threads), "--workload", workload, "--warm", str(warm), "--run"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    found = re.search(r"Collected : (\d+)", done.stderr)
    records = re.search(r"^records (\d+)$", done.stdout, re.M)
    if done.returncode or not found or not records:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1)), int(records.group(1))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/instructions.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("pipelines", nargs="*", metavar="PIPELINE",
                    help=f"of {', '.join(PIPELINES)} (default: per_record and bulk)")
    sys.path.insert(0, HERE)
    import bench

    ap.add_argument("--data", default=bench.default_data(),
                    help="the workload (bench.py --data)")
    ap.add_argument("--records", type=int, default=22000,
                    help=f"records of the measured run (more than {BASELINE})")
    ap.add_argument("--threads", type=int, default=1,
                    help="enqueue threads of the features pipelines")
    ap.add_argument("--workload", default="mnist", choices=bench.WORKLOADS,
                    help="the workload of the features, parse and per_record pipelines")
    ap.add_argument("--warm", type=int, default=0,
                    help="per_record: records put (and batches taken) before the counted ones "
                         "of both runs; 12000 fills the queue, so that batches leave too")
    ap.add_argument("--gil-held", action="store_true",
                    help="count only the instructions run holding the GIL (see above)")
    ap.add_argument("--run", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--core-file", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.core_file:  # (the core a counted run imports, as it imports it)
        from queuepipe._core import core
        print(getattr(core, "__file__", None))
        return 0
    pipelines = args.pipelines or ["per_record", "bulk"]
    unknown = sorted(set(pipelines) - set(PIPELINES))
    if unknown:
        ap.error(f"unknown pipeline(s) {unknown}: choose from {', '.join(PIPELINES)}")
    if args.run:
        ran = run(pipelines[0], os.path.abspath(args.data), args.records, args.threads,
                  args.workload, args.warm)
        print(f"records {ran}")
        return 0
    if args.records <= BASELINE:
        ap.error(f"--records must exceed {BASELINE}")
    with tempfile.TemporaryDirectory() as folder:
        path = gil_counting_copy(folder) if args.gil_held else ""
        for pipeline in pipelines:
            amounts = (EPOCHS, 1) if pipeline.startswith("features") \
                else (args.records, BASELINE)
            (whole, records), (base, base_records) = (
                instructions(pipeline, args.data, amount, args.threads, args.workload,
                             args.warm, path)
                for amount in amounts)
            print(f"{pipeline}: {(whole - base) / (records - base_records):,.0f} instructions "
                  f"per record{' holding the GIL' if path else ''} (callgrind, "
                  f"{records - base_records:,} records)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
