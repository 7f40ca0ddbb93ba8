"""parse_example's two paths on the same records: the layout fast path and the general one.

usage::

    python benchmarks/bench_parse.py [--data ~/.cache/queuepipe/bench-data] [--chunk 256] [--repeat 3]

Reads every record of ``DATA/mnist/`` and ``DATA/float/`` (see ``bench.py``; written there if
missing) into memory, then parses them in chunks of ``--chunk`` records with
``qp.io.parse_example`` (which decodes records that share a layout together, see
``queuepipe.protos._layout``) and with the general path alone (protobuf, record by record,
as ``parse_single_example`` does for records that are not plain), and checks that both give
the same arrays. Prints records/s, the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import queuepipe as qp
from queuepipe import parsing

SPECS = {
    "mnist": {"image": qp.io.FixedLenFeature([], qp.string),
              "label": qp.io.FixedLenFeature([], qp.int64)},
    "float": {"sha256": qp.io.FixedLenFeature([], qp.string),
              "feature": qp.io.FixedLenFeature([128], qp.float32),
              "label": qp.io.FixedLenFeature([], qp.int64)},
}


def general_path(chunk: list, specs: dict) -> dict:
    """parse_example without the layout fast path (queuepipe's per-record parser)."""
    return parsing._parse_batch(chunk, parsing._example_features(specs), None, walker=None)


def rate(fn, chunks: list, specs: dict, repeat: int) -> float:
    n = sum(len(c) for c in chunks)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for chunk in chunks:
            fn(chunk, specs)
        times.append(time.perf_counter() - start)
    return n / statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench

    ap.add_argument("--data", default=bench.default_data())
    ap.add_argument("--chunk", type=int, default=256, help="records per parse_example call")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    if not os.path.exists(os.path.join(args.data, "truth.npz")):
        bench.write_workloads(args.data, 60000, 8)
    print("| workload | records | fast path | general path | speed-up |\n|---|---|---|---|---|")
    for workload, specs in SPECS.items():
        folder = os.path.join(args.data, workload)
        records = [r for name in sorted(os.listdir(folder)) if name.endswith(".tfrecord")
                   for r in qp.io.tf_record_iterator(os.path.join(folder, name))]
        chunks = [records[i:i + args.chunk] for i in range(0, len(records), args.chunk)]
        fast = qp.io.parse_example(chunks[0], specs)
        slow = general_path(chunks[0], specs)
        for key in specs:
            assert np.array_equal(fast[key], slow[key]), f"the paths differ on {key!r}"
        fast_rate = rate(lambda c, s: qp.io.parse_example(c, s), chunks, specs, args.repeat)
        slow_rate = rate(general_path, chunks, specs, args.repeat)
        print(f"| {workload} | {len(records)} | {fast_rate:,.0f}/s | {slow_rate:,.0f}/s "
              f"| {fast_rate / slow_rate:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
