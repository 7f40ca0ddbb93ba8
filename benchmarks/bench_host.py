"""What this host gives two workers over one, by the kind of work a pipeline's record does.

usage::

    python benchmarks/bench_host.py                       # every kind, 3 rounds of 1 s
    python benchmarks/bench_host.py --kinds memory --seconds 2 --repeat 5

A record's way through ``read_batch_features`` is computing (checksums, the wire walk) and
moving bytes (the page cache to a buffer, the buffer to ``bytes`` objects, the queue's rows
and batches). Two workers share the host's cores and also its caches and memory: where that
share runs out, two threads of queuepipe cannot reach twice one, nor can two processes.
Each kind below is timed for one worker, then two at once, as two processes and as two
threads of one process (every kind runs without the GIL, so threads are not held by it):

* ``compute``: ``hashlib.sha256`` of a 64 KiB buffer, again and again: the cores alone.
* ``cached``: ``np.copyto`` between two 1.5 MiB arrays (a chunk of mnist's records): copies
  that stay in the caches.
* ``memory``: the same between two 64 MiB arrays: copies from and to memory, which the cores
  share (mnist's dataset, 48 MB, is read from the page cache at every epoch).

Printed for each: the units a second of one worker, of two (processes, threads), and the ratio
of two to one, the best of ``--repeat`` rounds (one worker and two in turn within a round, so
that a slow spell of a shared host hits both). Then ``hand-over``: the median time for two
threads to pass a turn there and back through a ``threading.Lock`` each (each pass wakes a
thread asleep on a lock, as a thread waiting for the GIL is woken): what every hand-over of
the GIL between the enqueue threads costs on this host, at the least.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Sequence

import numpy as np

KINDS = ("compute", "cached", "memory")
_SIZES = {"compute": 64 << 10, "cached": 3 << 19, "memory": 64 << 20}


def _work(kind: str) -> Callable[[], None]:
    """One unit of ``kind``'s work, its buffers made once."""
    size = _SIZES[kind]
    if kind == "compute":
        data = b"q" * size
        return lambda: hashlib.sha256(data).digest() and None
    source = np.ones(size, dtype=np.uint8)
    target = np.empty_like(source)
    return lambda: np.copyto(target, source)


def _units(kind: str, seconds: float, start: Callable[[], None]) -> float:
    """Units of ``kind`` a second, timed from ``start()`` (which waits until every worker is
    ready: all start at once)."""
    unit = _work(kind)
    unit()  # (its pages touched before the clock starts)
    start()
    done, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        unit()
        done += 1
    return done / (time.perf_counter() - began)


def _ready_then_go() -> None:
    """A child's start: says it is ready, then waits for the parent's word."""
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("bench_host.py --worker: no word to start")


def run_together(argv: List[str], n: int, what: str) -> List[str]:
    """Runs ``n`` children of ``argv`` released together: each prints ``ready`` once set up
    and waits for ``go`` on its input, and the word goes to all once all are ready. Returns
    what each printed after ``ready``; raises RuntimeError naming ``what`` if one fails."""
    procs = [subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(n)]
    try:
        for proc in procs:
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"{what} failed before its timing")
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate()[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if any(proc.returncode for proc in procs):
        raise RuntimeError(f"{what} failed")
    return outputs


def _processes(kind: str, seconds: float, n: int) -> float:
    """Units a second of ``n`` processes at once (this file run with ``--worker``), added
    up."""
    argv = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--seconds",
            str(seconds)]
    return sum(float(out) for out in run_together(argv, n, "a bench_host.py worker"))


def _threads(kind: str, seconds: float, n: int) -> float:
    """Units a second of ``n`` threads of this process at once, added up. A thread that
    fails (its buffers not made) breaks the others' wait for it, and its error is raised."""
    barrier, rates, errors = threading.Barrier(n), [], []

    def work() -> None:
        try:
            rates.append(_units(kind, seconds, barrier.wait))
        except BaseException as e:  # noqa: B902 - raised again below, in the caller
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if errors:
        raise (failed or errors)[0]
    return sum(rates)


def hand_over_us(passes: int = 2000) -> float:
    """The median time, in us, for two threads to pass a turn there and back, each waiting
    for it asleep on a lock of its own."""
    mine, theirs = threading.Lock(), threading.Lock()
    mine.acquire()
    theirs.acquire()
    times: List[float] = []

    def other() -> None:
        for _ in range(passes):
            if not theirs.acquire(timeout=1.0):
                return  # (the passes stopped short: a Ctrl-C; this thread ends too)
            mine.release()

    thread = threading.Thread(target=other)
    thread.start()
    try:
        for _ in range(passes):
            began = time.perf_counter()
            theirs.release()
            mine.acquire()
            times.append(time.perf_counter() - began)
    finally:
        thread.join()
    return statistics.median(times) * 1e6


def measure(kinds: Sequence[str], seconds: float, repeat: int) -> Dict[str, Dict[str, float]]:
    """For each kind: the best rate of one worker, two processes and two threads."""
    best = {kind: {"one": 0.0, "processes": 0.0, "threads": 0.0} for kind in kinds}
    for _ in range(repeat):
        for kind in kinds:
            for way, rate in (("one", lambda: _threads(kind, seconds, 1)),
                              ("processes", lambda: _processes(kind, seconds, 2)),
                              ("threads", lambda: _threads(kind, seconds, 2))):
                best[kind][way] = max(best[kind][way], rate())
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/bench_host.py", description=__doc__.split(
        "\n")[0])
    ap.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    ap.add_argument("--seconds", type=float, default=1.0, help="each timing's length")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the best of them is shown")
    ap.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)  # (a process's side)
    args = ap.parse_args(argv)
    if args.worker:
        print(_units(args.worker, args.seconds, _ready_then_go))
        return 0
    for kind, rates in measure(args.kinds, args.seconds, args.repeat).items():
        one = rates["one"]
        print(f"{kind} ({_SIZES[kind] >> 10} KiB a unit): one {one:,.0f} units/s; two "
              f"processes {rates['processes']:,.0f} ({rates['processes'] / one:.2f}x); two "
              f"threads {rates['threads']:,.0f} ({rates['threads'] / one:.2f}x)")
    print(f"hand-over: {hand_over_us():.1f} us there and back (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
