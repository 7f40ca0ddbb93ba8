"""Who holds the GIL in the bulk pipeline, and how often it changes hands: traced, not sampled.

usage (Linux, root, ``perf`` with uprobes)::

    python benchmarks/gil_trace.py --data ~/.cache/queuepipe/bench-data --workload tokens --threads 1 2
    python benchmarks/gil_trace.py --workload mnist --threads 1 --sites

Runs ``bench.py``'s ``qp_bulk`` (``read_batch_features``, ``--epochs`` epochs) in a child
under ``perf record`` with probes on the interpreter's own ``take_gil`` (entry and return)
and ``drop_gil``, added to its ``libpython`` if missing (``perf probe``) and left there. From
each thread's events it adds up, per record delivered, the time the thread held the GIL
(from a ``take_gil`` return to its next ``drop_gil``), waited for it (a ``take_gil`` call to
its return) and ran without it or slept (a ``drop_gil`` to its next ``take_gil``), and counts
its drops: each one, with another thread waiting, is a hand-over. Printed per thread: those
figures and the median held stretch; then all threads' held time over the child's CPU
time, the share of the work that runs one thread at a time.

``--sites`` says instead where the pipeline lets go of the GIL: a second run records the
call stack of each ``drop_gil`` (``perf record --call-graph dwarf``), and the drops are
counted by the first function below the interpreter's own let-go (``PyEval_SaveThread``,
the core's ``qp_gil_let_go``) with its two callers, per 2,048 records (a chunk of
``read_batch_features``' by default), imports left out. Each one, with another thread
waiting, is a hand-over: NumPy lets go of the GIL for most operations on 500 items or more
(an object array's ``calloc``, ``arange``, a copy), Python for every blocking call.

Last, over the pipeline's wall time, the share in which some thread held the GIL, and its
hand-overs: each drop while another thread waited, and the time from it until the waiter's
take returned, when nobody holds the GIL (the waiter's wake-up: 20-50 us on the 2-core
virtual machine of these measurements, where a futex wake of an idle core is slow).

Why it matters (``bench_gil.py``): two threads run at most ``1 / that share`` times as fast
as one, and only with long stretches; with stretches of tens of microseconds the hand-overs
take the gain. Sampling profilers (py-spy's ``--gil``) tell where the GIL is held, not how
long each stretch is. Only the time from the pipeline's first thread's first event to its
last thread's last one is counted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402 - beside this file

PROBES = ("take_gil", "take_gil_ret=take_gil%return", "drop_gil")

CHILD = """
import json, os, sys, time
sys.path.insert(0, {here!r})
import bench
import queuepipe as qp
folder = os.path.join({data!r}, {workload!r})
files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".tfrecord"))
cpu = time.process_time()
records = sum(len(b["label"]) for b in
              bench.pipeline_bulk(qp, files, {epochs}, {threads}, {workload!r}, None))
print(json.dumps({{"records": records, "cpu": time.process_time() - cpu, "pid": os.getpid()}}))
"""


def libpython() -> str:
    """The file that holds the interpreter's take_gil: its shared library, or itself."""
    shared = os.path.join(sysconfig.get_config_var("LIBDIR") or "",
                          sysconfig.get_config_var("INSTSONAME") or "")
    return shared if os.path.isfile(shared) else os.path.realpath(sys.executable)


def add_probes(target: str) -> List[str]:
    """The perf events of the three probes on ``target``, added where missing."""
    listed = subprocess.run(["perf", "probe", "--list"], capture_output=True, text=True).stdout
    events = []
    for probe in PROBES:
        name = probe.split("=")[0]
        event = f"{name}__return" if "%return" in probe else name
        if f":{event} " not in listed:
            subprocess.run(["perf", "probe", "-q", "-x", target, "--add", probe], check=True)
        group = [line.split()[0] for line in subprocess.run(
            ["perf", "probe", "--list"], capture_output=True, text=True).stdout.splitlines()
            if line.split() and line.split()[0].endswith(f":{event}")]
        events.append(group[0])
    return events


def _events(script: str) -> Tuple[List[Tuple[float, int, str]], float, float]:
    """``(time, thread, probe)`` of ``perf script -F tid,time,event`` lines, in time order,
    and the pipeline's time: from the first event of a thread other than the first one seen
    (the main thread) to the last one of such a thread (the interpreter's exit, after the
    pipeline, is left out)."""
    events: List[Tuple[float, int, str]] = []
    for line in script.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1].endswith(":"):
            kind = fields[2].rstrip(":").split(":")[-1]
            events.append((float(fields[1][:-1]), int(fields[0]), kind))
    events.sort()
    if not events:
        return [], 0.0, 0.0
    main = events[0][1]
    others = [t for t, tid, _ in events if tid != main]
    start, end = (others[0], others[-1]) if others else (events[0][0], events[-1][0])
    return events, start, end


def stretches(script: str) -> Dict[int, Dict[str, List[float]]]:
    """Each thread's stretches, in seconds, from ``perf script -F tid,time,event`` lines:
    ``hold``, ``wait`` and ``free`` (see the module docstring), over the pipeline's time
    (:func:`_events`)."""
    events, start, end = _events(script)
    state: Dict[int, Tuple[str, float]] = {}
    out: Dict[int, Dict[str, List[float]]] = {}
    for t, tid, kind in events:
        if not start <= t <= end:
            continue
        was, since = state.get(tid, ("", t))
        spans = out.setdefault(tid, {"hold": [], "wait": [], "free": []})
        if kind == "take_gil":
            if was == "drop":
                spans["free"].append(t - since)
            state[tid] = ("wait", t)
        elif kind.startswith("take_gil_ret"):
            if was == "wait":
                spans["wait"].append(t - since)
            state[tid] = ("hold", t)
        elif kind == "drop_gil":
            if was == "hold":
                spans["hold"].append(t - since)
            state[tid] = ("drop", t)
    return out


def handovers(script: str) -> Dict[str, float]:
    """How busy the GIL was over the pipeline's time (:func:`_events`), and what its
    hand-overs cost: ``window`` (seconds), ``held`` (the share of it some thread held the
    GIL), ``handovers`` (drops while another thread waited for it), ``gap`` (the median
    time, seconds, from such a drop to the next thread's take returning: nobody holds the
    GIL meanwhile, the waiter is being woken) and ``gaps`` (their sum's share of the
    window)."""
    events, start, end = _events(script)
    window = end - start
    held, gaps = 0.0, []
    waiting: set = set()
    holder: Optional[Tuple[int, float]] = None
    dropped: Optional[float] = None  # a drop with a thread waiting, not yet taken
    for t, tid, kind in events:  # (from the first: who holds the GIL when the window opens)
        if t > end:
            break
        if kind == "take_gil":
            waiting.add(tid)
        elif kind.startswith("take_gil_ret"):
            waiting.discard(tid)
            if dropped is not None and dropped >= start:
                gaps.append(t - dropped)
            dropped = None
            holder = (tid, t)
        elif kind == "drop_gil":
            if holder is not None and holder[0] == tid:
                held += max(0.0, t - max(holder[1], start))
            holder = None
            dropped = t if waiting - {tid} else None
    return {"window": window, "held": held / window if window else 0.0,
            "handovers": len(gaps), "gap": statistics.median(gaps) if gaps else 0.0,
            "gaps": sum(gaps) / window if window else 0.0}


def report(spans: Dict[int, Dict[str, List[float]]], records: int, cpu: float, main: int,
           label: str) -> str:
    lines = []
    held = 0.0
    for tid, s in sorted(spans.items(), key=lambda item: -sum(item[1]["hold"])):
        held += sum(s["hold"])
        if not s["hold"]:
            continue
        per = 1e6 / records
        lines.append(f"  {'main' if tid == main else 'thread'} {tid}: held "
                     f"{sum(s['hold']) * per:.2f} us a record, waited for it "
                     f"{sum(s['wait']) * per:.2f} us, without it {sum(s['free']) * per:.2f}"
                     f" us; {len(s['hold'])} drops ({len(s['hold']) / records * 1e3:.1f} every"
                     f" 1,000 records), the median held stretch "
                     f"{statistics.median(s['hold']) * 1e6:.0f} us")
    return (f"{label}: {records} records, GIL held {held / records * 1e6:.2f} us a record of "
            f"{cpu / records * 1e6:.2f} us of CPU ({held / cpu:.2f} of it)\n" + "\n".join(lines))


def busy(summary: Dict[str, float]) -> str:
    return (f"  the GIL held {summary['held']:.0%} of the pipeline's {summary['window'] * 1e3:.0f}"
            f" ms; {summary['handovers']:.0f} hand-overs to a waiting thread, each leaving it "
            f"free for {summary['gap'] * 1e6:.0f} us (median), {summary['gaps']:.0%} of the time")


# The interpreter's and the core's own steps of a let-go: a drop is counted by what called
# them. (Inlined frames carry the name of the function inlined.)
_LET_GO = ("drop_gil", "PyEval_SaveThread", "qp_gil_let_go")


def drop_sites(script: str) -> Dict[str, int]:
    """How many drops of the GIL each call site made, from ``perf script`` of ``drop_gil``
    recorded with call stacks: a site is the first function outside :data:`_LET_GO` and
    its two callers (``site < caller < caller's caller``). Stacks that pass through an
    import are left out (the pipeline's start, not its steady state)."""
    sites: Dict[str, int] = {}
    for block in script.split("\n\n"):
        frames = [line.split()[1].split("+")[0] for line in block.splitlines()[1:]
                  if len(line.split()) >= 2]
        if not frames or any("import" in frame.lower() for frame in frames):
            continue
        outside = [frame for frame in frames if frame not in _LET_GO]
        site = " < ".join(outside[:3])
        sites[site] = sites.get(site, 0) + 1
    return sites


def sites_report(sites: Dict[str, int], records: int, label: str, top: int = 15) -> str:
    """The sites that dropped the GIL most often, per 2,048 records."""
    total = sum(sites.values())
    lines = [f"{label}: {total} drops of the GIL, {2048 * total / records:.1f} every 2,048 "
             f"records; by where:"]
    for site, count in sorted(sites.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {2048 * count / records:5.2f}  {site}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=bench.default_data(),
                    help="bench.py's data folder (python benchmarks/make_data.py writes it)")
    ap.add_argument("--workload", default="tokens", choices=bench.WORKLOADS)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--sites", action="store_true",
                    help="count the drops of the GIL by where they are made")
    args = ap.parse_args(argv)
    events = add_probes(libpython())
    for threads in args.threads:
        code = CHILD.format(here=HERE, data=args.data, workload=args.workload,
                            epochs=args.epochs, threads=threads)
        label = f"{args.workload}, {threads} enqueue thread(s)"
        # (the stacks: drop_gil alone, each sample with 16 KiB of the stack to unwind)
        recording = (["--call-graph", "dwarf,16384", f"-e{events[PROBES.index('drop_gil')]}"]
                     if args.sites
                     else [f"-e{event}" for event in events])
        with tempfile.TemporaryDirectory() as folder:
            recorded = os.path.join(folder, "perf.data")
            done = subprocess.run(["perf", "record", "-q", "-o", recorded] + recording
                                  + ["--", sys.executable, "-c", code],
                                  capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            script = subprocess.run(["perf", "script", "-i", recorded]
                                    + ([] if args.sites else ["-F", "tid,time,event"]),
                                    capture_output=True, text=True, check=True).stdout
        if args.sites:
            print(sites_report(drop_sites(script), result["records"], label))
            continue
        print(report(stretches(script), result["records"], result["cpu"], result["pid"],
                     label))
        print(busy(handovers(script)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
