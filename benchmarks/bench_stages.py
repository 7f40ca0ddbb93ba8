"""Where a record's time goes in the bulk pipeline: reading, parsing, the queue.

usage::

    python benchmarks/bench_stages.py --data ~/.cache/queuepipe/bench-data [--workload tokens] [--repeat 5]
    python benchmarks/bench_stages.py --data ~/.cache/queuepipe/bench-data --workload tokens --pipeline --threads 1 2
    python benchmarks/bench_stages.py --workload tokens --pipeline --threads 1 2 \
        --read-batch-size 2048
    python benchmarks/bench_stages.py --workload tokens --pipeline --threads 1 2 --epochs 20
    python benchmarks/bench_stages.py --workload tokens --pipeline --apart --threads 1 2
    python benchmarks/bench_stages.py --workload tokens --pipeline --processes --threads 1 2
    python benchmarks/bench_stages.py --workload tokens --bare [--apart] [--read-only] --threads 1 2
    python benchmarks/bench_stages.py --workload tokens --bare --shuffled --threads 1 2 --epochs 8

One thread, no pipeline around it: the first 15,000 records of ``bench.py``'s workload (two
shards; six of ``wide``'s smaller ones, so that its queue too fills past its minimum and
dequeues: with two, no batch left it and the dequeue figure timed only ``size()``) read in
chunks of 512 (``TFRecordReader.read_up_to``; ``--read-batch-size``), each chunk parsed by
one ``parse_example`` with ``bench.py``'s features, and the parsed chunks put through a
RandomShuffleQueue of ``bench.py``'s sizes (``enqueue_many`` of each chunk, ``dequeue_many``
of a batch while the queue holds more than its minimum). Printed: CPU time per record of
each stage, the least of ``--repeat`` rounds (the host's slow spells only ever add), and
where the compiled core parses, the part of the parse spent in its ``walk_examples`` call,
whose walk runs without the GIL (a bound on what a second thread can run in parallel: the
call also makes the string values' bytes objects, with the GIL); ``QUEUEPIPE_PURE=1`` for
the pure path.

``--pipeline`` measures ``bench.py``'s ``qp_bulk`` instead (``read_batch_features``, every
shard, 2 epochs or ``--epochs``) with each of ``--threads`` enqueue threads (default 1),
``--repeat`` rounds interleaved (``--read-batch-size``: records per chunk, by default
read_batch_features' own, as in ``bench.py``):
its records per second (the best round), its CPU per record (the least), the
share of that CPU spent in the core's ``walk_examples`` calls (``walk_examples`` time is
thread CPU time, added up over the threads), and the fastest round's thread CPU per record of
each step: the plan's chunk read (under the plan's lock), the parse (of the batches each
``enqueue_many`` draws ahead, outside the queue's lock; mnist's ``parse_fn`` parses each chunk
before it), ``enqueue_many`` without that parse (under the queue's lock, with the draws) and
the consumer's dequeue: what a second thread can run beside the first, and what it cannot;
then the consumer's thread CPU per record in all (the training loop's thread: its dequeues,
and the batches it parses itself), the share of the wall time each enqueue thread was on
a core (its CPU time over the wall time): what is left of it waited, for room, a lock or
the GIL; the read plan's lock: how long it was held a chunk (the median hold's wall time),
its holds over the wall time (what no second thread can share), and the threads' waits for
it; and the queue's own accounts of its waits: the enqueue threads' for room (all of them
added up; none means the consumer kept up) and the consumer's for a batch, over the wall
time (most of it means the enqueue threads are the bound); and the kernel's share of the
process's CPU with its voluntary and forced context switches every 1,000 records
(``getrusage``): a thread that waits for the GIL or a lock sleeps, and its wake-up by
another core is paid there.

``--pipeline --apart`` runs each of ``--threads`` as that many separate ``qp_bulk``
pipelines of one enqueue thread, each read by a thread of its own: they share no lock but
the GIL, a bound for what that many enqueue threads of one pipeline could reach.

``--pipeline --processes`` runs them in as many processes instead, started together once
each has imported queuepipe and run its pipeline once untimed: they share nothing but the
cores (and the page cache), what the machine gives that many pipelines with no GIL in
common. Printed: the records of them all over the time from the first one's start to the
last one's end.

``--bare --threads 1 2`` runs the read and the parse alone (with ``--read-only``, the read
alone), with no queue or consumer: that
many threads take the chunks of one ``read_batch_features`` read plan (2,048 records, or
``--read-batch-size``; as many epochs of every shard as threads), parse each chunk with one
``parse_example`` (and mnist's ``decode_raw``) and mark its records delivered; records a
second of them all (the best of ``--repeat`` interleaved rounds) and CPU a record (the
least). What the stages around the compiled core give two threads, against what the whole
pipeline gives them. With ``--apart`` each thread reads a plan of its own (one epoch): what
sharing the plan, whose lock is held while a chunk is read, costs them. ``--epochs E``
makes each thread's share ``E`` epochs (later passes read by offset, as a long run's are).
With ``--shuffled`` each chunk's records trade places with random ones of a pool the
threads share (the shuffle buffer's size) and those are parsed, in batches, as the enqueue
threads parse the batches they draw: a shared shuffle at its simplest, between the bare
read and parse and the whole pipeline.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time


HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402 - beside this file
import bench_host  # noqa: E402 - beside this file


def read_chunks(qp, files):
    chunks = []
    for path in files:
        names = qp.FIFOQueue(1, [qp.string])
        names.enqueue(path)
        names.close()
        reader = qp.TFRecordReader()
        while True:
            try:
                _, values = reader.read_up_to(names, bench.BULK_CHUNK or bench.READ_CHUNK)
            except qp.errors.OutOfRangeError:
                break
            chunks.append(list(values))
    return chunks


def through_queue(qp, parsed):
    """(enqueue seconds, dequeue seconds, records dequeued)."""
    first = parsed[0]
    dtypes = [v.values.dtype if isinstance(v, qp.SparseValue) else v.dtype
              for v in first.values()]
    shapes = [None if isinstance(v, qp.SparseValue) else list(v.shape[1:])
              for v in first.values()]
    queue = qp.RandomShuffleQueue(2 * bench.BUFFER, bench.BUFFER, dtypes, shapes,
                                  names=list(first), seed=0)
    put = take = 0.0
    taken = 0
    for chunk in parsed:
        start = time.process_time()
        queue.enqueue_many(chunk)
        put += time.process_time() - start
        start = time.process_time()
        while queue.size() >= bench.BUFFER + bench.BATCH:
            queue.dequeue_many(bench.BATCH)
            taken += bench.BATCH
        take += time.process_time() - start
    return put, take, taken


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bench_stages.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=bench.default_data(),
                    help="bench.py's workload folder (written when missing)")
    ap.add_argument("--workload", default="tokens", choices=bench.WORKLOADS)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--pipeline", action="store_true",
                    help="measure read_batch_features (qp_bulk) as a whole")
    ap.add_argument("--threads", type=int, nargs="+", default=[1],
                    help="with --pipeline: the enqueue thread counts to measure, each "
                         "--repeat times, interleaved")
    ap.add_argument("--epochs", type=int, default=None,
                    help="with --pipeline (not --apart, --processes): epochs of every shard "
                         "(2 if not given); with --bare: each thread's (1 if not given); a "
                         "file's first pass reads under the plan's lock, the later ones by "
                         "the offsets it noted")
    ap.add_argument("--apart", action="store_true",
                    help="with --pipeline: run each thread count as that many separate "
                         "pipelines instead, each of one enqueue thread and read by a consumer "
                         "thread of its own; with --bare: a read plan for each thread")
    ap.add_argument("--processes", action="store_true",
                    help="with --pipeline: as --apart, each pipeline in a process of its own")
    ap.add_argument("--bare", action="store_true",
                    help="the read and the parse alone (no queue or consumer), by each of "
                         "--threads threads at once")
    ap.add_argument("--shuffled", action="store_true",
                    help="with --bare: each chunk's records traded for random ones of a "
                         "pool the threads share, those parsed in batches")
    ap.add_argument("--read-only", action="store_true",
                    help="with --bare: the read alone, each chunk's records not parsed")
    ap.add_argument("--buffer", type=int, default=None,
                    help="with --shuffled: the pool's records (bench.py's shuffle buffer by "
                         "default)")
    ap.add_argument("--read-batch-size", type=int, default=None,
                    help="records per chunk (read_up_to's, 512 by default; with --pipeline, "
                         "qp_bulk's read_batch_size, read_batch_features' default by "
                         "default)")
    args = ap.parse_args(argv)
    if args.read_only and (args.shuffled or not args.bare):
        ap.error("--read-only goes with --bare, and not with --shuffled (which parses)")
    import queuepipe as qp

    data = os.path.abspath(args.data)
    if not os.path.exists(os.path.join(data, "truth.npz")):
        bench.write_workloads(data, 60000, 8)
    folder = os.path.join(data, args.workload)
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                   if f.endswith(".tfrecord"))[:6 if args.workload == "wide" else 2]
    specs = bench._specs(qp, args.workload)
    chunk, bench.BULK_CHUNK = bench.BULK_CHUNK, args.read_batch_size
    try:
        with _timed_walk() as walk_seconds:
            if args.bare:
                return _bare(qp, folder, specs, args)
            if args.pipeline and args.processes:
                return _processes(folder, args)
            if args.pipeline and args.apart:
                return _apart(qp, folder, args)
            if args.pipeline:
                return _pipeline(qp, folder, args, walk_seconds)
            return _stages(qp, files, specs, args, walk_seconds)
    finally:
        bench.BULK_CHUNK = chunk


def _stages(qp, files, specs, args, walk_seconds) -> int:
    read, parse, put, take, walk = [], [], [], [], []
    for _ in range(args.repeat):
        start = time.process_time()
        chunks = read_chunks(qp, files)
        read.append(time.process_time() - start)
        records = sum(map(len, chunks))
        start, walked = time.process_time(), walk_seconds[0]
        parsed = [qp.io.parse_example(chunk, specs) for chunk in chunks]
        parse.append(time.process_time() - start)
        walk.append(walk_seconds[0] - walked)
        seconds_in, seconds_out, taken = through_queue(qp, parsed)
        put.append(seconds_in)
        take.append(seconds_out / max(taken, 1) * records)
    per = {name: min(times) / records * 1e6
           for name, times in (("read", read), ("parse", parse), ("enqueue_many", put),
                               ("dequeue_many", take))}
    print(f"{args.workload}: {records} records, CPU per record (least of {args.repeat}): "
          + ", ".join(f"{name} {us:.2f} us" for name, us in per.items())
          + f"; total {sum(per.values()):.2f} us"
          + (f"; of the parse, in the core's walk_examples "
             f"{min(walk) / records * 1e6:.2f} us" if walk_seconds[1] else ""))
    return 0


def _pipeline(qp, folder, args, walk_seconds) -> int:
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".tfrecord"))
    rounds = {threads: [] for threads in args.threads}
    for _ in range(args.repeat):
        for threads in args.threads:  # interleaved: a slow spell of the host hits every count
            walked = walk_seconds[0]
            with _timed_steps() as steps, _runner_cpu() as runners, _plan_lock() as lock:
                usage = resource.getrusage(resource.RUSAGE_SELF)
                start, wall = time.process_time(), time.perf_counter()
                consumer = time.thread_time()
                batches = bench.pipeline_bulk(qp, files, args.epochs or 2, threads, args.workload,
                                              None)
                records = sum(len(batch["label"]) for batch in batches)
                consumer = time.thread_time() - consumer
                wall = time.perf_counter() - wall
                queue = getattr(batches._queue, "built", batches._queue)
                steps["(waits)"] = (queue._producer_wait, queue._consumer_wait / wall)
                steps["(kernel)"] = _kernel_share(usage, time.process_time() - start)
                steps["(consumer thread)"] = consumer
                steps["(enqueue threads, busy)"] = sum(runners) / len(runners) / wall \
                    if runners else 0.0
                holds = sorted(lock["holds"]) or [0.0]
                steps["(plan lock)"] = (holds[len(holds) // 2], sum(holds) / wall,
                                        lock["waited"])
                rounds[threads].append((wall, time.process_time() - start,
                                        walk_seconds[0] - walked, records, dict(steps)))
    for threads, measured in rounds.items():
        wall, cpu, walk, records, steps = min(measured, key=lambda m: m[0])  # the fastest
        print(f"{args.workload}: read_batch_features, {threads} enqueue thread(s), {records} "
              f"records: {records / wall / 1e3:.0f}k records/s (best of {args.repeat}; all: "
              + "/".join(f"{m[3] / m[0] / 1e3:.0f}k" for m in measured) + "), "
              f"{min(m[1] for m in measured) / records * 1e6:.2f} us of CPU per record"
              + (f", {walk / cpu:.0%} of it in the core's walk_examples"
                 if walk_seconds[1] else "")
              + "; thread CPU per record of the fastest round: "
              + ", ".join(f"{name} {seconds / records * 1e6:.2f} us"
                          for name, seconds in steps.items() if not name.startswith("("))
              + (f" (the walk {walk / records * 1e6:.2f} us)" if walk_seconds[1] else "")
              + f"; the consumer's thread in all {steps['(consumer thread)'] / records * 1e6:.2f}"
              f" us; each enqueue thread busy (its CPU) "
              f"{steps['(enqueue threads, busy)']:.0%} of the wall time; the plan's lock held "
              f"{steps['(plan lock)'][0] * 1e6:.0f} us a chunk (median), "
              f"{steps['(plan lock)'][1]:.0%} of the wall time, waited for "
              f"{steps['(plan lock)'][2] * 1e3:.0f} ms in all; the enqueue threads waited for "
              f"room in the queue {steps['(waits)'][0] * 1e3:.0f} ms in all, the consumer for "
              f"a batch {steps['(waits)'][1]:.0%} of the wall time; the kernel's share of the "
              f"CPU {steps['(kernel)'][0]:.0%}, {steps['(kernel)'][1] / records * 1e3:.1f} "
              f"voluntary and {steps['(kernel)'][2] / records * 1e3:.1f} forced context "
              f"switches every 1,000 records")
    return 0


def _kernel_share(before, cpu: float) -> tuple:
    """Since ``before`` (``getrusage``): the kernel's share of the process's CPU ``cpu``, and
    its threads' voluntary and forced context switches. A thread that waits for the GIL or a
    lock sleeps, and is woken by another core; on a virtual machine each of those costs tens
    of microseconds, counted in the kernel's share (the seventeenth and eighteenth sittings
    of docs/performance.md)."""
    after = resource.getrusage(resource.RUSAGE_SELF)
    return ((after.ru_stime - before.ru_stime) / cpu if cpu else 0.0,
            after.ru_nvcsw - before.ru_nvcsw, after.ru_nivcsw - before.ru_nivcsw)


def _print_rounds(rounds, args, what) -> int:
    """Prints, for each count ``n`` of ``rounds`` (``n`` -> ``(wall, cpu, records)`` of
    each round), ``what(n)``: records a second (the best round, and all of them) and CPU a
    record (the least), as ``--apart``, ``--processes`` and ``--bare`` report them."""
    for n, measured in rounds.items():
        wall, _, records = min(measured)
        print(f"{args.workload}: {what(n)}, {records} records: {records / wall / 1e3:.0f}k "
              f"records/s (best of {args.repeat}; all: "
              + "/".join(f"{m[2] / m[0] / 1e3:.0f}k" for m in measured)
              + f"), {min(m[1] / m[2] for m in measured) * 1e6:.2f} us of CPU per record")
    return 0


def _timed_threads(threads) -> tuple:
    """Starts ``threads`` and waits for them all: ``(wall seconds, process CPU seconds)``."""
    start, wall = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - wall, time.process_time() - start


def _apart(qp, folder, args) -> int:
    """``--pipeline --apart``: ``n`` separate ``qp_bulk`` pipelines at once (``n`` each of
    ``--threads``), each of one enqueue thread, 2 epochs, and a consumer thread of its own;
    records a second of them all (the best of ``--repeat`` interleaved rounds) and CPU a
    record (the least). They share no queue, plan or lock, only the GIL and the cores: what
    ``n`` threads could reach if the pipeline's threads shared nothing else."""
    import threading

    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".tfrecord"))
    rounds = {n: [] for n in args.threads}
    for _ in range(args.repeat):
        for n in args.threads:
            counts = [0] * n

            def consume(i: int) -> None:
                counts[i] = sum(len(batch["label"]) for batch in
                                bench.pipeline_bulk(qp, files, 2, 1, args.workload, None))

            consumers = [threading.Thread(target=consume, args=(i,)) for i in range(n)]
            rounds[n].append((*_timed_threads(consumers), sum(counts)))
    return _print_rounds(rounds, args, lambda n: f"{n} separate read_batch_features "
                         f"pipeline(s) of 1 enqueue thread")


# A child of --processes: imports, runs qp_bulk once untimed (as the rounds of one process
# warm each other: its memory mapped, the files cached), says so, waits for the go (a line
# on its stdin), runs qp_bulk, prints the records and its wall-clock start and end.
_CHILD = """
import json, os, sys, time
sys.path.insert(0, {here!r})
import bench
import queuepipe as qp
files = sorted(os.path.join({folder!r}, f) for f in os.listdir({folder!r})
               if f.endswith(".tfrecord"))
for batch in bench.pipeline_bulk(qp, files, 2, 1, {workload!r}, None):
    pass
print("ready", flush=True)
sys.stdin.readline()
start, cpu = time.time(), time.process_time()
records = sum(len(batch["label"]) for batch in
              bench.pipeline_bulk(qp, files, 2, 1, {workload!r}, None))
print(json.dumps({{"records": records, "start": start, "end": time.time(),
                   "cpu": time.process_time() - cpu}}), flush=True)
"""


def _processes(folder, args) -> int:
    """``--pipeline --processes``: ``n`` ``qp_bulk`` pipelines of one enqueue thread, 2
    epochs, each in a process of its own, released together; records a second of them all
    (from the first start to the last end, the best of ``--repeat`` interleaved rounds) and
    CPU a record (the least)."""
    import json

    child = _CHILD.format(here=HERE, folder=folder, workload=args.workload)
    rounds = {n: [] for n in args.threads}
    for _ in range(args.repeat):
        for n in args.threads:
            results = [json.loads(out) for out in bench_host.run_together(
                [sys.executable, "-c", child], n, "a --processes child")]
            wall = max(r["end"] for r in results) - min(r["start"] for r in results)
            records = sum(r["records"] for r in results)
            rounds[n].append((wall, sum(r["cpu"] for r in results), records))
    return _print_rounds(rounds, args, lambda n: f"{n} read_batch_features pipeline(s) of "
                         f"1 enqueue thread, each in its own process")


def _bare(qp, folder, specs, args) -> int:
    """``--bare``: ``n`` threads take the chunks of one read plan (``read_batch_features``'
    own, ``n`` epochs of every shard, ``n * --epochs`` where given; with ``--apart``, a plan
    each of one epoch, or ``--epochs``) and parse each one as ``qp_bulk``'s enqueue threads
    and consumer would (``parse_example``, and mnist's ``decode_raw``), then mark its
    records delivered; nothing else. With ``--shuffled`` a chunk's records first trade
    places with as many random ones of a pool the threads share (the shuffle buffer's size,
    or ``--buffer``, under a lock; the first chunks fill it), and the records drawn are
    parsed in batches of ``bench.BATCH``, in one call (as the enqueue threads parse the
    batches they draw ahead): a shared shuffle at its simplest, without the queue, its
    bookkeeping or a consumer. With ``--read-only`` the chunks are read and not parsed: the
    plan's work, the frames' checksums and the records' ``bytes`` objects alone. Records a
    second of them all (the records parsed, or read) and CPU a record, over ``--repeat``
    interleaved rounds."""
    import threading

    import numpy as np

    from queuepipe.parsing._example import parse_example_batches
    from queuepipe.plan import ReadPlan, reader_of

    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".tfrecord"))
    size = args.read_batch_size or 2048
    epochs = args.epochs or 1

    def drawn_for(values, pool) -> list:
        """The records ``values`` trade places with (none while the pool fills)."""
        k = len(values) // bench.BATCH * bench.BATCH
        with pool["lock"]:
            records, filled = pool["records"], pool["filled"]
            if filled < len(records):
                taken = min(len(values), len(records) - filled)
                records[filled:filled + taken] = values[:taken]
                pool["filled"] = filled + taken
                return []
            places = pool["rng"].choice(len(records), k, replace=False)
            drawn = records[places]
            records[places] = values[:k]
        return drawn.tolist()

    def read_and_parse(plan: ReadPlan, counts: list, pool) -> None:
        records = 0
        while True:
            try:
                chunk = plan.take()
            except (qp.errors.OutOfRangeError, qp.errors.CancelledError):
                break  # (cancelled: a Ctrl-C in the join closed the plan)
            if args.read_only:
                records += len(chunk.values)
            elif not args.shuffled:
                bench._decoded(qp, qp.io.parse_example(chunk.values, specs), args.workload)
                records += len(chunk.values)
            else:
                drawn = drawn_for(chunk.values, pool)
                if drawn:
                    for batch in parse_example_batches(drawn, specs, bench.BATCH):
                        bench._decoded(qp, batch, args.workload)
                records += len(drawn)
            plan.delivered(chunk.ordinals)
        counts.append(records)

    rounds = {n: [] for n in args.threads}
    for _ in range(args.repeat):
        for n in args.threads:
            plans = [ReadPlan(files, qp.TFRecordReader, size, epochs * (1 if args.apart else n),
                              "files", 0, keyed=False, reader=reader_of(qp.TFRecordReader()))
                     for _ in range(n if args.apart else 1)]
            pool = {"records": np.empty(args.buffer or bench.buffer_of(args.workload),
                                        dtype=object),
                    "filled": 0, "lock": threading.Lock(), "rng": np.random.default_rng(0)}
            counts: list = []
            threads = [threading.Thread(target=read_and_parse,
                                        args=(plans[i % len(plans)], counts, pool))
                       for i in range(n)]
            try:
                timed = _timed_threads(threads)
            finally:
                for plan in plans:
                    plan.close()
            rounds[n].append((*timed, sum(counts)))
    return _print_rounds(rounds, args, lambda n: (
        ("the read alone (no parse, no queue), " if args.read_only
         else "the read and the parse alone (no queue), ")
        + ("each chunk traded for records of a shared pool, " if args.shuffled else "")
        + f"{n} thread(s){', a plan each' if args.apart else ''}"))


@contextlib.contextmanager
def _timed_steps():
    """Yields a dict: the thread CPU time spent in each step of read_batch_features within
    the block (added up over the threads; a step's time leaves out the steps it calls: the
    parse of the batches an enqueue_many draws ahead counts as the parse); the steps'
    functions are put back after it."""
    import threading

    from queuepipe import features, plan
    from queuepipe._queue_base import QueueBase

    steps = {"chunk read": 0.0, "parse": 0.0, "enqueue_many": 0.0, "consumer's dequeue": 0.0}
    wrapped = [(plan.ReadPlan, "take", "chunk read"), (features._Planned, "parse", "parse"),
               (features._Planned, "_element", "parse"),  # (a parse_fn's parse of a chunk)
               (QueueBase, "enqueue_many", "enqueue_many"),
               (QueueBase, "dequeue_many", "consumer's dequeue"),
               (QueueBase, "dequeue_up_to", "consumer's dequeue")]
    nested = threading.local()  # per thread: the time of the steps the running one called

    def timed(function, step):
        def timed_step(*args, **kwargs):
            outer = getattr(nested, "seconds", 0.0)
            nested.seconds = 0.0
            start = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                seconds = time.thread_time() - start
                steps[step] += seconds - nested.seconds
                nested.seconds = outer + seconds
        return timed_step

    originals = [(owner, name, owner.__dict__[name]) for owner, name, _ in wrapped]
    for owner, name, step in wrapped:
        setattr(owner, name, timed(owner.__dict__[name], step))
    try:
        yield steps
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


@contextlib.contextmanager
def _plan_lock():
    """Yields a dict: how long the read plans made within the block held their lock (the
    wall time of each hold, a list) and how long threads waited for it (seconds in all);
    ``ReadPlan.__init__`` is put back after it."""
    import threading

    from queuepipe import plan

    timed = {"holds": [], "waited": 0.0}
    original = plan.ReadPlan.__dict__["__init__"]

    class TimedLock:
        def __init__(self) -> None:
            self._lock = threading.Lock()
            self._since = 0.0

        def __enter__(self):
            start = time.perf_counter()
            self._lock.acquire()
            self._since = time.perf_counter()
            timed["waited"] += self._since - start
            return self

        def __exit__(self, *exc) -> None:
            timed["holds"].append(time.perf_counter() - self._since)
            self._lock.release()

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self._lock = TimedLock()

    plan.ReadPlan.__init__ = init
    try:
        yield timed
    finally:
        plan.ReadPlan.__init__ = original


@contextlib.contextmanager
def _runner_cpu():
    """Yields a list: the thread CPU time of each enqueue thread that ended within the block
    (a QueueRunner's thread, from its start to its end)."""
    from queuepipe import runner

    ended = []
    original = runner.QueueRunner.__dict__["_run"]

    def timed_run(self, *args, **kwargs):
        try:
            return original(self, *args, **kwargs)
        finally:
            ended.append(time.thread_time())

    runner.QueueRunner._run = timed_run
    try:
        yield ended
    finally:
        runner.QueueRunner._run = original


@contextlib.contextmanager
def _timed_walk():
    """Yields ``[seconds, on]``: the thread CPU time spent in the compiled walk
    (``walk_examples``) within the block, added up, and whether the core is loaded to be
    timed; the core is put back as it was after the block."""
    from queuepipe import _core

    total = [0.0, _core.core is not None]
    if _core.core is None:
        yield total
        return
    module = _core.core

    def timed(walk):
        def timed_walk(*args):
            start = time.thread_time()
            try:
                return walk(*args)
            finally:
                total[0] += time.thread_time() - start
        return staticmethod(timed_walk)

    class Timed:
        def __getattr__(self, name):
            return getattr(module, name)

        walk_examples = timed(module.walk_examples)

    _core.core = Timed()
    try:
        yield total
    finally:
        _core.core = module


if __name__ == "__main__":
    sys.exit(main())
