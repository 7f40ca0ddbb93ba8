"""What the GIL lets two threads gain over one, by the share of each step run without it.

usage::

    python benchmarks/bench_gil.py                   # shares 25%, 50%, 75%, 90% of a 400 us step
    python benchmarks/bench_gil.py --step-us 100 --shares 0.25 0.5 --repeat 5

Each step of a thread is ``--step-us`` of work: a share of it in a call that lets go of the
GIL (``hashlib.sha256`` of a buffer, which releases it for anything over 2 KiB), the rest in
Python, which holds it. Two threads that split the steps can overlap one's GIL-free call with
the other's Python, and nothing else: the Python of both runs one at a time. So two threads
are at most ``1 / (the share that holds the GIL)`` times as fast as one (and at most twice):
not Amdahl's ``1 / (s + (1 - s) / 2)``, which would let no thread run while another holds
the GIL. A step whose GIL-held share is a half can run twice as fast on two threads; one
whose share is three quarters, 1.33x; the issue's 1.7x needs at most 59%. The figures show
what the GIL's hand-overs between cores take off that bound on this machine.

A pipeline's share is measured by ``bench_stages.py --pipeline`` (the walk's share of the
CPU is the part without the GIL). Rates are the best of ``--repeat`` rounds, 1 and 2 threads
in turn within each round, so that a slow spell of a shared host hits both.
"""

from __future__ import annotations

import argparse
import hashlib
import threading
import time
from typing import List, Sequence, Tuple


def _calibrated(step_us: float, share: float) -> Tuple[bytes, int]:
    """A buffer whose sha256 takes ``share`` of ``step_us``, and a Python loop count for the
    rest."""
    probe, loops = b"x" * (1 << 20), 20_000
    start = time.perf_counter()
    for _ in range(20):
        hashlib.sha256(probe).digest()
    per_byte = (time.perf_counter() - start) / 20 / len(probe)
    start = time.perf_counter()
    _python(loops)
    per_loop = (time.perf_counter() - start) / loops
    free = int(share * step_us * 1e-6 / per_byte)
    held = int((1 - share) * step_us * 1e-6 / per_loop)
    return b"y" * max(free, 4096), held


def _python(loops: int) -> int:
    total = 0
    for i in range(loops):
        total += i
    return total


def _rate(steps: int, threads: int, data: bytes, loops: int) -> float:
    def work(count: int) -> None:
        for _ in range(count):
            hashlib.sha256(data).digest()  # (without the GIL)
            _python(loops)  # (with it)

    workers = [threading.Thread(target=work, args=(steps // threads,)) for _ in range(threads)]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return steps // threads * threads / (time.perf_counter() - start)


def measure(shares: Sequence[float], step_us: float, steps: int,
            repeat: int) -> List[Tuple[float, float, float]]:
    """For each share, (share, bound, two threads' rate over one's)."""
    rows = []
    for share in shares:
        data, loops = _calibrated(step_us, share)
        best = {1: 0.0, 2: 0.0}
        for _ in range(repeat):
            for threads in (1, 2):
                best[threads] = max(best[threads], _rate(steps, threads, data, loops))
        rows.append((share, min(2.0, 1 / max(1 - share, 1e-9)), best[2] / best[1]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bench_gil.py",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--shares", type=float, nargs="+", default=[0.25, 0.5, 0.75, 0.9],
                    help="shares of a step run without the GIL")
    ap.add_argument("--step-us", type=float, default=400.0, help="one step's work, in us")
    ap.add_argument("--steps", type=int, default=600, help="steps of a round")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (the best counts)")
    args = ap.parse_args(argv)
    print(f"| without the GIL | bound: min(2, 1 / the share with it) | 2 threads / 1 "
          f"(steps of {args.step_us:g} us, best of {args.repeat}) |")
    print("|---|---|---|")
    for share, bound, measured in measure(args.shares, args.step_us, args.steps, args.repeat):
        print(f"| {share:.0%} | {bound:.2f}x | {measured:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
