"""Every workload on both of queuepipe's paths, with the peers, in one markdown table.

usage::

    python benchmarks/matrix.py --peers-python ~/.venvs/queuepipe-peers/bin/python \\
        --repeat 3 --out-md matrix.md --out matrix.json
    python benchmarks/matrix.py --record-baseline benchmarks/baseline.json \\
        --workload float large --repeat 5

For each workload (``--workload``, all of them by default), ``bench.py``'s pipelines run on
the compiled core (``QUEUEPIPE_REQUIRE_CORE=1`` in the child: a core that is not built fails
the run instead of falling back) and on the pure path (``QUEUEPIPE_PURE=1``), and with
``--peers-python`` the workload's peers (``bench.PEERS_OF``) once, shared by both paths; every
run of a workload is interleaved with the others, ``--repeat`` times, and the table gives the
medians. wide runs one epoch of its bulk pipeline alone (:data:`EPOCHS`,
:data:`PIPELINES_OF`) to keep the whole under 25 minutes on 2 cores. The targets are ``bench.targets``: issue 27's on the core, the recorded baseline
(``benchmarks/baseline.json``) on both paths, every record once.

``--record-baseline PATH`` runs only queuepipe's pipelines and writes their median steady CPU
per record, per workload and path, with the commit and the command, as the figures
"no slower than today" is checked against: the least of the runs, as ``bench.targets``
compares the least of its own runs.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (beside this file)

# Epochs per workload: 60,000 records each for mnist, float and tokens; wide has 20,000
# records and its per-record pipelines run at about 1k records/s; large has 2,000.
EPOCHS = {"mnist": 3, "float": 3, "tokens": 3, "wide": 1, "large": 3}
# wide runs its bulk pipeline alone: the per-record ones cost about 1.5 ms a record there (one
# epoch took 74-90 s per run and path at load 8, more than the rest of the matrix), and no
# target names them.
PIPELINES_OF = {"wide": ("qp_bulk",)}
PATHS = ("core", "pure")
PEER = "-"  # the path column of a peer's row
# "No slower than the baseline" allows this factor on the least steady CPU per record of the
# runs: CPU time moves less than wall clock on a busy host, but not nothing. Two recordings of
# the same code 5 minutes apart gave least figures up to 1.18x apart (README.md).
TOLERANCE = 1.2


def configs_of(data: str, workload: str, epochs: int, paths, peers_python) -> dict:
    """(pipeline, path) -> argv: queuepipe's pipelines on each path, then the peers."""
    names = PIPELINES_OF.get(workload, tuple(bench.THREADS))
    configs = {(name, path): bench.child_argv(name, data, epochs, bench.THREADS[name], workload,
                                              path=path)
               for path in paths for name in names}
    if peers_python:
        configs.update({(peer, PEER): bench.peer_argv(peers_python, peer, data, epochs, workload)
                        for peer in bench.PEERS_OF[workload]})
    return configs


def on_path(rows: dict, path: str) -> dict:
    """The rows ``bench.targets`` reads for ``path``: that path's pipelines and the peers."""
    return {name: row for (name, p), row in rows.items() if p in (path, PEER)}


def ratios(view: dict, workload: str, name: str) -> str:
    """``name``'s steady rate against the peers its issue 27 targets name, and tf.data's (the
    bulk pipeline) or TF1's queue runners' (the per-record ones)."""
    peers = [peer for label, peer, _ in bench.RATIO_TARGETS.get(workload, []) if label == name]
    usual = "tfdata" if name == "qp_bulk" else "tf1queue"
    peers += [usual] if usual not in peers else []
    m = view[name]["median"]
    return ", ".join(f"{m['steady'] / view[p]['median']['steady']:.2f}x {p}"
                     for p in peers if p in view) or "-"


def markdown(results: dict) -> str:
    """One table: workload x pipeline x path, with each row's targets."""
    lines = ["| workload | pipeline | path | steady rate | ratio | steady CPU / record "
             "| first batch | records | targets |", "|---|---|---|---|---|---|---|---|---|"]
    for workload, entry in results["workloads"].items():
        rows, expected = entry["rows"], entry["expected"]
        for (name, path), row in rows.items():
            m = row["median"]
            mine = [t for t in entry["targets"].get(path, [])
                    if t[0] == name and t[1] != bench.EXACT_TARGET]
            shown = "; ".join(f"{'PASS' if ok else 'FAIL'} {t} ({v})" for _, t, v, ok in mine)
            ratio = ratios(on_path(rows, path), workload, name) if path != PEER else "-"
            ran = bench.path_of(m) if path != PEER else PEER
            records = bench.exactly(name, m, expected)
            if records == "exact" and not all(bench._exact(r, expected) for r in row["runs"]):
                records = "WRONG in a run"  # the median's figures can hide one
            lines.append(f"| {workload} | {name} | {ran} | {bench.rate(m)} | {ratio} "
                         f"| {m['steady_cpu_us']:.2f} us | {m['first_batch']:.2f} s "
                         f"| {records} | {shown or '-'} |")
    return "\n".join(lines)


def run_workload(data, workload, epochs, paths, peers_python, repeat, baseline, log) -> dict:
    expected = bench.truth(data, epochs, workload)
    configs = configs_of(data, workload, epochs, paths, peers_python)
    log(f"{workload}: {repeat} runs of {len(configs)} configurations, {epochs} epochs")
    rows = bench.run_rows(configs, repeat, log)
    checks = {path: bench.targets(on_path(rows, path), expected, workload, path, baseline)
              for path in paths}
    return {"epochs": epochs, "expected": expected, "rows": rows, "targets": checks}


def record_baseline(path: str, results: dict, argv: list) -> None:
    """Writes the least steady CPU per record of the runs of each workload, path and pipeline,
    and every run's figure."""
    import json
    import subprocess
    import time

    import queuepipe

    # The code measured: the last commit of the queuepipe package imported, and whether its
    # files differ from it.
    package = os.path.dirname(os.path.abspath(queuepipe.__file__))

    def git(*args):
        return subprocess.run(["git", "-C", package, *args, "--", "."], capture_output=True,
                              text=True, check=True).stdout.strip()

    commit = git("log", "-1", "--format=%H") + (" (modified)" if git("status", "--porcelain")
                                                 else "")
    figures, runs = {}, {}
    records = {workload: entry["expected"]["examples"]
               for workload, entry in results["workloads"].items()}
    for workload, entry in results["workloads"].items():
        for (name, p), row in entry["rows"].items():
            every = [round(r["steady_cpu_us"], 3) for r in row["runs"]]
            figures.setdefault(workload, {}).setdefault(p, {})[name] = min(every)
            runs.setdefault(workload, {}).setdefault(p, {})[name] = every
    baseline = {"about": "steady CPU per record (us) of queuepipe's pipelines, the least of "
                         "the runs; bench.targets checks the least of its runs against "
                         "tolerance x this",
                "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "command": "python benchmarks/matrix.py " + " ".join(argv),
                "tolerance": TOLERANCE, "records": records, "steady_cpu_us": figures,
                "runs": runs}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(baseline, f, indent=1)
        f.write("\n")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="benchmarks/matrix.py", description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=bench.default_data(),
                    help=f"workload folder (default {bench.default_data()}; written when missing)")
    ap.add_argument("--records", type=int, default=60000, help="records when writing data")
    ap.add_argument("--shards", type=int, default=8, help="shards when writing data")
    ap.add_argument("--workload", nargs="+", choices=bench.WORKLOADS, default=list(EPOCHS))
    ap.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    ap.add_argument("--epochs", type=int, help="epochs of every workload (default: "
                    + ", ".join(f"{w} {e}" for w, e in EPOCHS.items()) + ")")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each configuration (median)")
    ap.add_argument("--peers-python", metavar="PATH",
                    help="python of a virtualenv with tensorflow, tfrecord and torch")
    ap.add_argument("--out-md", metavar="MD", help="write the table here too")
    ap.add_argument("--out", metavar="JSON", help="write every run's figures here")
    ap.add_argument("--record-baseline", metavar="JSON",
                    help="run queuepipe's pipelines only and write their figures here as the "
                    "baseline (benchmarks/baseline.json)")
    args = ap.parse_args(argv)
    log = bench.log
    bench.compile_library()
    data = bench.prepare(os.path.abspath(args.data), args.records, args.shards, args.workload,
                         log)
    peers_python = None if args.record_baseline else args.peers_python
    baseline = None if args.record_baseline else bench.load_baseline()
    results = {"repeat": args.repeat, "cpus": os.cpu_count(), "workloads": {}}
    for workload in args.workload:
        epochs = args.epochs or EPOCHS[workload]
        results["workloads"][workload] = run_workload(data, workload, epochs, args.paths,
                                                      peers_python, args.repeat, baseline, log)
    if args.record_baseline:
        record_baseline(args.record_baseline, results, argv)
    text = markdown(results)
    print(f"\nmedians of {args.repeat} runs, {os.cpu_count()} CPUs, epochs: "
          + ", ".join(f"{w} {e['epochs']}" for w, e in results["workloads"].items()) + "\n")
    print(text)
    if args.out_md:
        with open(args.out_md, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if args.out:
        import json

        for entry in results["workloads"].values():  # JSON keys are strings
            entry["rows"] = {f"{name} [{path}]": row for (name, path), row in entry["rows"].items()}
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    # Speed is measured, not asserted: only a pipeline that lost or repeated a record fails.
    exact = all(ok for entry in results["workloads"].values()
                for checks in entry["targets"].values()
                for _, target, _, ok in checks if target == bench.EXACT_TARGET)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
