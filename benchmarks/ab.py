"""queuepipe against another checkout of itself: the same pipelines, in turn, on both paths.

usage::

    git worktree add --detach /tmp/before 03471a8 && (cd /tmp/before && python setup.py build_ext --inplace)
    python benchmarks/ab.py /tmp/before --workload mnist tokens --repeat 3

"Is this change slower?" on a shared host: a figure recorded in another session is taken on
another machine state (a recorded baseline moved by 1.9x between two sessions for code that
had not changed), so both trees run now, in turn. Each of ``bench.py``'s children (its
pipelines, its workloads in ``--data``, this file's ``bench.py``) runs ``--repeat`` times
with each tree's ``queuepipe`` first on ``PYTHONPATH`` (the other tree needs its compiled
core built in place for the core path), alternating trees; printed are the median steady
rate and steady CPU per record of each tree and their ratio, as a markdown table. Only
CPU per record that several runs agree on means anything: the per-record pattern's two
threads make its figure bimodal on this host.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _in_tree(tree: str) -> dict:
    """How a child runs ``tree``'s queuepipe: with ``tree`` as its working directory (a
    ``python -c`` child puts that first on ``sys.path``, before ``PYTHONPATH``: run from
    another checkout, every child imported that checkout's queuepipe, whatever the tree)
    and on ``PYTHONPATH``."""
    tree = os.path.abspath(tree)
    return {"env": dict(os.environ, PYTHONPATH=tree), "cwd": tree}


def imported_from(tree: str) -> str:
    """The folder of the queuepipe that a child run for ``tree`` imports ("" for none)."""
    import subprocess

    if not os.path.isdir(tree):
        return ""
    code = "import os, queuepipe; print(os.path.dirname(os.path.realpath(queuepipe.__file__)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          **_in_tree(tree))
    return done.stdout.strip()


def runs(tree: str, name: str, data: str, workload: str, path: str, epochs: int,
         threads: Optional[int] = None) -> dict:
    argv = bench.child_argv(name, data, epochs, threads or bench.THREADS[name], workload,
                            path=path)
    return bench.launch(argv, **_in_tree(tree))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="the other checkout (its queuepipe/ is measured)")
    ap.add_argument("--after", default=HERE, help="this checkout by default")
    ap.add_argument("--data", default=bench.default_data())
    ap.add_argument("--workload", nargs="+", default=["mnist"], choices=bench.WORKLOADS)
    ap.add_argument("--pipeline", nargs="+", default=["qp_bulk", "qp_per_record"],
                    choices=sorted(bench.THREADS))
    ap.add_argument("--paths", nargs="+", default=["core", "pure"], choices=["core", "pure"])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[None],
                    help="the pipeline's threads (enqueue threads of qp_bulk), each in turn "
                         "within a round; with several, a last table sets each tree's rate "
                         "with the last against the first (default: bench.py's)")
    args = ap.parse_args(argv)
    args.data = os.path.abspath(args.data)  # (each child runs in its tree's folder)
    for tree in (args.before, args.after):
        found, wanted = imported_from(tree), os.path.realpath(os.path.join(tree, "queuepipe"))
        if found != wanted:
            raise SystemExit(f"ab.py: a child run for {tree} imports queuepipe from "
                             f"{found or 'nowhere'}, not {wanted}")
    print("| path | workload | pipeline | threads | before: rate, CPU / record | after | CPU "
          "after / before |\n|---|---|---|---|---|---|---|")
    scaling = []
    for path in args.paths:
        for workload in args.workload:
            for name in args.pipeline:
                got: dict = {(tree, threads): [] for threads in args.threads
                             for tree in (args.before, args.after)}
                for _ in range(args.repeat):
                    for tree, threads in got:
                        got[tree, threads].append(runs(tree, name, args.data, workload, path,
                                                       args.epochs, threads))
                rate, cpu = ({key: statistics.median(r[field] for r in results)
                              for key, results in got.items()}
                             for field in ("steady", "steady_cpu_us"))
                for threads in args.threads:
                    cells = [f"{rate[t, threads] / 1000:.0f}k/s, {cpu[t, threads]:.2f} us"
                             for t in (args.before, args.after)]
                    print(f"| {path} | {workload} | {name} | {threads or bench.THREADS[name]} "
                          f"| {cells[0]} | {cells[1]} | "
                          f"{cpu[args.after, threads] / cpu[args.before, threads]:.2f} |",
                          flush=True)
                if len(args.threads) > 1:
                    first, last = args.threads[0], args.threads[-1]
                    scaling.append(f"| {path} | {workload} | {name} | {last} against {first} | "
                                   + " | ".join(f"{rate[t, last] / rate[t, first]:.2f}x"
                                                for t in (args.before, args.after)) + " |")
    if scaling:
        print("\n| path | workload | pipeline | threads | before: rate against rate | after |"
              "\n|---|---|---|---|---|---|\n" + "\n".join(scaling))
    return 0


if __name__ == "__main__":
    sys.exit(main())
