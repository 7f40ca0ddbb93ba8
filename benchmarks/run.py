"""Entry point of ``queuepipe bench`` in a source checkout: runs ``bench.py`` with the
arguments given after ``--`` (``queuepipe bench -- --peers-python /tmp/peers/bin/python``)."""

import importlib.util
import os


def main(argv=None) -> int:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench.py")
    spec = importlib.util.spec_from_file_location("queuepipe_benchmarks_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench.main(argv)
