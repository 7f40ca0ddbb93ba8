"""What a seed and the global shuffle cost, and how well each shuffle mixes.

usage::

    python benchmarks/bench_order.py --data ~/.cache/queuepipe/bench-data [--epochs 3] [--repeat 3]
                                     [--workload mnist float tokens] [--seed-only]

In one run, on ``bench.py``'s workloads (written there if missing):

1. **Seeded against unseeded** ``read_batch_features`` (``bench.py``'s ``qp_bulk``: its default
   chunks, one ``parse_example`` each), 1 and 2 enqueue threads, on mnist, float and tokens:
   the steady rate of each, and seeded / unseeded. A seeded pipeline enqueues its chunks in
   plan order (a thread waits for its turn) so that its batches repeat for any threads; the
   target is a seeded rate at least 0.90x the unseeded one on mnist. Also the per-record
   ``shuffle_batch`` pipeline (``qp_per_record``) on mnist, whose seeded threads take turns.
   ``--seed-only`` measures ``qp_bulk`` alone, unseeded against seeded, and stops there:
   more paired runs in the time, for a ratio this close to the host's noise.
2. **Global against buffer shuffle** (both seeded): speed on mnist, float and tokens
   (``.index`` files written beside the shards when missing, by ``queuepipe index``); and
   how well each mixes a dataset written in label order (``DATA/mnist-sorted/``: the mnist
   records sorted by label, 8 shards of consecutive records). For each label, the mean
   place of its records in one epoch (0 is the start, 1 the end): a uniform shuffle gives
   0.5 for every label, the sorted order 0.05 for label 0 and 0.95 for label 9. Printed:
   the largest distance from 0.5.

Each speed figure is the median of ``--repeat`` child processes, interleaved, as in
``bench.py`` (every record of every epoch is checked there too). A ratio is the median of the
runs' paired ratios (run k of one pipeline against run k of the other, launched one after the
other), which a shared host's slow spells disturb less than a ratio of two medians.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402 - beside this file

WORKLOADS = ("mnist", "float", "tokens")


def write_indexes(folder: str) -> None:
    """``queuepipe index`` for every shard of ``folder`` that has no ``.index``."""
    missing = [os.path.join(folder, f) for f in sorted(os.listdir(folder))
               if f.endswith(".tfrecord") and not os.path.exists(os.path.join(folder, f)
                                                                  + ".index")]
    if missing:
        subprocess.run([sys.executable, "-m", "queuepipe", "index", *missing], check=True,
                       stdout=subprocess.DEVNULL)


def write_sorted(data: str) -> str:
    """``DATA/mnist-sorted/``: the mnist records in label order, with indexes."""
    import queuepipe as qp

    target = os.path.join(data, "mnist-sorted")
    if os.path.isdir(target):
        return target
    source = os.path.join(data, "mnist")
    records = [r for f in sorted(os.listdir(source)) if f.endswith(".tfrecord")
               for r in qp.io.tf_record_iterator(os.path.join(source, f))]
    labels = qp.io.parse_example(np.array(records, dtype=object),
                                 {"label": qp.io.FixedLenFeature([], qp.int64)})["label"]
    ordered = [records[i] for i in np.argsort(labels, kind="stable")]
    partial = target + ".partial"
    os.makedirs(partial, exist_ok=True)
    for shard, part in enumerate(np.array_split(np.arange(len(ordered)), 8)):
        with qp.io.TFRecordWriter(os.path.join(partial, f"sorted-{shard}.tfrecord")) as w:
            for i in part:
                w.write(ordered[i])
    write_indexes(partial)
    os.replace(partial, target)
    return target


def mixing(folder: str, **options) -> float:
    """The largest distance from 0.5 of a label's mean place in one epoch."""
    import queuepipe as qp

    files = sorted(os.path.join(folder, f) for f in os.listdir(folder)
                   if f.endswith(".tfrecord"))
    spec = {"label": qp.io.FixedLenFeature([], qp.int64)}
    with qp.Pipeline().as_default(), qp.train.read_batch_features(
            files, bench.BATCH, spec, num_epochs=1, queue_capacity=2 * bench.BUFFER, seed=0,
            read_batch_size=bench.BULK_CHUNK, **options) as batches:
        labels = np.concatenate([batch["label"] for batch in batches])
    places = np.arange(len(labels)) / len(labels)
    return max(abs(places[labels == label].mean() - 0.5) for label in np.unique(labels))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bench_order.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=bench.default_data(),
                    help="bench.py's workload folder (written when missing)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workload", nargs="+", choices=WORKLOADS, default=list(WORKLOADS),
                    help="the workloads to measure (the per-record pipeline runs on mnist)")
    ap.add_argument("--seed-only", action="store_true",
                    help="only qp_bulk unseeded against seeded: the target's figure, in more "
                         "runs for the time")
    args = ap.parse_args(argv)
    log = bench.log
    bench.compile_library()
    data = os.path.abspath(args.data)
    if not os.path.exists(os.path.join(data, "truth.npz")):
        log(f"writing the workloads under {data}")
        bench.write_workloads(data, 60000, 8)
    configs = {}
    workloads = [w for w in WORKLOADS if w in args.workload]
    for workload in workloads:
        write_indexes(os.path.join(data, workload))
        names = ("qp_bulk", "qp_bulk_seeded") + (() if args.seed_only else ("qp_bulk_global",))
        for threads in (1, 2):
            for name in names:
                configs[(workload, threads, name)] = bench.child_argv(
                    name, data, args.epochs, threads, workload)
    per_record = "mnist" in workloads and not args.seed_only
    for threads in (1, 2) if per_record else ():
        for name in ("qp_per_record", "qp_per_record_seeded"):
            configs[("mnist", threads, name)] = bench.child_argv(
                name, data, args.epochs, threads, "mnist")
    log(f"{args.repeat} runs of {len(configs)} configurations")
    rows = bench.run_rows(configs, args.repeat, log)
    def ratio(key, base):
        """The median of the paired runs' steady-rate ratios."""
        return float(np.median([a["steady"] / b["steady"] for a, b in
                                zip(rows[key]["runs"], rows[base]["runs"])]))

    def table(base_title, other_title, base, other):
        """A table's head, and its rows for every workload and thread count."""
        print(f"| workload | threads | {base_title} | {other_title} | {other_title} / "
              f"{base_title} | CPU per record, {base_title} / {other_title} |")
        print("|---|---|---|---|---|---|")
        for workload in workloads:
            for threads in (1, 2):
                row(workload, workload, threads, base, other)

    def row(label, workload, threads, base, other):
        """A table row: ``base`` against ``other`` (pipeline names) on one configuration."""
        first, second = rows[(workload, threads, base)], rows[(workload, threads, other)]
        print(f"| {label} | {threads} | {first['median']['steady'] / 1000:,.0f}k/s "
              f"| {second['median']['steady'] / 1000:,.0f}k/s "
              f"| {ratio((workload, threads, other), (workload, threads, base)):.2f}x "
              f"| {first['median']['cpu_us']:.1f} us / {second['median']['cpu_us']:.1f} us |")

    print(f"\n{args.epochs} epochs, medians of {args.repeat} runs (ratios: of the paired runs), "
          f"{os.cpu_count()} CPUs\n")
    table("unseeded", "seeded", "qp_bulk", "qp_bulk_seeded")
    for threads in (1, 2) if per_record else ():
        row("mnist, per record (shuffle_batch)", "mnist", threads, "qp_per_record",
            "qp_per_record_seeded")
    if "mnist" in workloads:
        worst = min(ratio(("mnist", t, "qp_bulk_seeded"), ("mnist", t, "qp_bulk"))
                    for t in (1, 2))
        print(f"\nseeded >= 0.90x unseeded on mnist (qp_bulk): {worst:.2f}x "
              f"{'PASS' if worst >= 0.9 else 'FAIL'}")
    if args.seed_only:
        return 0
    print()
    table("buffer", "global", "qp_bulk_seeded", "qp_bulk_global")
    sorted_folder = write_sorted(data)
    buffer_mix, global_mix = mixing(sorted_folder), mixing(sorted_folder, shuffle="global")
    print(f"\nlabel-sorted mnist, largest distance of a label's mean place from 0.5: buffer "
          f"{buffer_mix:.3f}, global {global_mix:.3f}")
    print("\n(0.5 is the sorted order's own distance for a label at either end; 0 is uniform)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
