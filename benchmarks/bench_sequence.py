"""``parse_single_sequence_example`` on both paths: CPU per record.

usage::

    python benchmarks/bench_sequence.py [--records 2000] [--repeat 3]

SequenceExamples of 5 to 39 steps, each step a list of 4 int64 token ids (``tokens``, a
VarLenFeature) and 8 floats (``frame``, a FixedLenSequenceFeature of shape [8]), with an int64
``label`` in the context, made here from a fixed seed. Each record is parsed once by the pure
path (protobuf) and once by the compiled walk (where the core is loaded); printed: the least
CPU time per record over ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import sys
import time


def records(n: int) -> list:
    import numpy as np

    from queuepipe.protos import SequenceExample

    rng = np.random.default_rng(0)
    out = []
    for r in range(n):
        example = SequenceExample()
        example.context.feature["label"].int64_list.value.append(r % 10)
        lists = example.feature_lists.feature_list
        for _ in range(int(rng.integers(5, 40))):
            lists["tokens"].feature.add().int64_list.value.extend(
                rng.integers(0, 50000, 4).tolist())
            lists["frame"].feature.add().float_list.value.extend(rng.random(8).tolist())
        out.append(example.SerializeToString())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bench_sequence.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    import queuepipe as qp
    from queuepipe.parsing import _sequence, _walkers

    data = records(args.records)
    context = {"label": qp.io.FixedLenFeature([], qp.int64)}
    lists = {"tokens": qp.io.VarLenFeature(qp.int64),
             "frame": qp.io.FixedLenSequenceFeature([8], qp.float32)}
    walkers = [("pure", _walkers.pure_sequence)]
    if _walkers.core_available():
        walkers.append(("core", _walkers.core_sequence))
    features = _sequence._sequence_specs(context, lists)
    for name, walker in walkers:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.process_time()
            for record in data:
                _sequence._parse_one(record, *features, "<unknown>", walker)
            best = min(best, time.process_time() - start)
        print(f"{name}: {best / len(data) * 1e6:.1f} us of CPU per SequenceExample "
              f"({sum(map(len, data)) / len(data):.0f} bytes on average)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
