"""Sharded records read in parallel: write_shards, then shuffle_batch_join with one reader each.

The TF1 pattern for many files: several readers, each in its own thread, read different shards
at the same time and feed one shared RandomShuffleQueue, so every batch mixes records from
several files::

    filename_queue = qp.train.string_input_producer(shards, num_epochs=2)
    batches = qp.train.shuffle_batch_join(
        [read_chunk(filename_queue) for _ in range(readers)],   # one reader per thread
        batch_size=128, capacity=..., min_after_dequeue=..., enqueue_many=True)

The script writes the shards with ``qp.write_shards`` (worker processes in parallel, a
progress bar, each shard atomic), reads them back as above, checks that every record of every
epoch arrived exactly once, and prints the throughput and how full each queue was.
"""

import argparse
import sys
import tempfile
import time
from collections import Counter

import numpy as np

import queuepipe as qp
from queuepipe.monitor import QueueMonitor

FEATURES = {"id": qp.io.FixedLenFeature([], qp.int64),
            "vector": qp.io.FixedLenFeature([8], qp.float32)}


def read_chunk(filename_queue, chunk):
    """A producer with its own reader: up to ``chunk`` parsed records of one shard per call."""
    reader = qp.TFRecordReader()

    def produce():
        _, serialized = reader.read_up_to(filename_queue, chunk)
        return qp.io.parse_example(serialized, FEATURES)

    return produce


def main(argv=None):
    """Runs the example; returns ``{"records": ..., "exactly_once": ...}``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--processes", type=int, default=2, help="processes writing shards")
    parser.add_argument("--readers", type=int, default=3, help="reader threads")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    columns = {"id": np.arange(args.records),
               "vector": rng.normal(size=(args.records, 8)).astype(np.float32)}
    with tempfile.TemporaryDirectory(prefix="queuepipe-shards-") as tmp:
        started = time.perf_counter()
        shards = qp.write_shards(columns, tmp, args.shards, prefix="data",
                                 processes=args.processes, progress=not args.no_progress)
        print(f"wrote {args.records} records to {len(shards)} shards with {args.processes} "
              f"processes in {time.perf_counter() - started:.2f} s")

        pipeline = qp.Pipeline()
        with pipeline.as_default():
            filename_queue = qp.train.string_input_producer(shards, num_epochs=args.epochs,
                                                            seed=args.seed)
            batches = qp.train.shuffle_batch_join(
                [read_chunk(filename_queue, 256) for _ in range(args.readers)],
                args.batch_size, capacity=4000, min_after_dequeue=2000, seed=args.seed,
                enqueue_many=True, allow_smaller_final_batch=True)
        seen = Counter()
        started = time.perf_counter()
        monitor = QueueMonitor(pipeline)
        with qp.running(pipeline):
            for batch in batches:
                monitor.sample()  # how full the queues are each time a batch is taken
                seen.update(batch["id"].tolist())
                np.testing.assert_array_equal(batch["vector"], columns["vector"][batch["id"]])
        seconds = time.perf_counter() - started
    total = sum(seen.values())
    exactly_once = seen == Counter({i: args.epochs for i in range(args.records)})
    print(f"read {total} records in {seconds:.2f} s ({total / seconds:,.0f} records/s) with "
          f"{args.readers} reader threads")
    print(f"every record of every epoch exactly once: {exactly_once}")
    print(monitor.table())
    return {"records": total, "exactly_once": exactly_once}


if __name__ == "__main__":
    main(sys.argv[1:])
