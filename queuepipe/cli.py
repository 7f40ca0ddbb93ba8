"""The ``queuepipe`` command: look into, check, index and make TFRecord files.

Subcommands (``queuepipe SUBCOMMAND --help`` describes each):

- ``inspect FILE [-n 3]``: the first records, as Example/SequenceExample text, with offsets.
- ``count FILE...``: records per file and in total (from ``.index`` files when present).
- ``verify FILE...``: checks both checksums of every record; names each damaged one.
- ``schema FILE [-n 100]``: feature specs inferred from the first records, as Python code.
- ``index FILE...``: writes ``FILE.index`` (``offset length`` per record, the format of the
  ``tfrecord`` package and NVIDIA DALI).
- ``convert SRC OUT_DIR --shards N``: IDX (MNIST), CSV or NPZ to TFRecord shards of Examples.
- ``bench``: the benchmark suite of a source checkout, or a small built-in throughput check.
- ``demo``: the end-to-end demo of a source checkout.
- ``info``: the version, whether the compiled core runs (and its CRC instruction), and the
  versions of Python, NumPy and protobuf.

Compression (GZIP/ZLIB) is recognised from the first bytes of a file unless
``--compression`` says otherwise. Long work shows a progress bar on a terminal when tqdm is
installed (``pip install '<queuepipe checkout>[progress]'``).

Exit status: 0 success; 1 bad data (a damaged record, a malformed source file); 2 a usage
error (bad arguments, a file that does not exist). Expected errors print one line on stderr,
never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import glob as glob_module
import importlib.util
import itertools
import os
import sys
import tempfile
import time
from collections import Counter
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from google.protobuf import text_format, unknown_fields
from google.protobuf.message import DecodeError

from queuepipe import __version__
from queuepipe.errors import DataLossError, InvalidArgumentError, NotFoundError
from queuepipe.protos import Example, SequenceExample
from queuepipe.records import FRAME_BYTES, HEADER_BYTES, RecordScanner, masked_crc32c, open_file

__all__ = ["main", "build_parser", "infer_schema"]

PROG = "queuepipe"
_COMPRESSIONS = {"auto": None, "none": "", "gzip": "GZIP", "zlib": "ZLIB"}
_SCAN_BATCH = 4096  # records taken from a scanner per progress-bar update
_BENCH_SAMPLE = 1000  # records bench FILE... infers the features from, without --features


class UsageError(Exception):
    """A command line that cannot be carried out as given (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# Helpers shared by the subcommands


@contextlib.contextmanager
def _progress(total: Optional[int], desc: str, unit: str) -> Iterator[Callable[[int], None]]:
    """Yields ``update(n)`` for a tqdm bar on a terminal; a no-op without tqdm or a terminal.

    tqdm is only imported for a terminal: it starts a monitor thread even for a disabled bar.
    """
    tqdm: Any = None
    if sys.stderr.isatty():
        with contextlib.suppress(ImportError):
            from tqdm import tqdm as bar
            tqdm = bar
    if tqdm is None:
        yield lambda n: None
        return
    with tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False) as bar:
        yield bar.update


def _detect_compression(path: str) -> str:
    """``""``, ``"GZIP"`` or ``"ZLIB"``, from the first bytes of a TFRecord file.

    A plain file starts with a record header whose length checksum holds; a GZIP stream starts
    with ``1f 8b``; a ZLIB stream with a two-byte header that is a multiple of 31 (RFC 1950).
    Anything else is read as plain, so the scanner reports the damage.
    """
    with open_file(path) as f:
        head = f.read(HEADER_BYTES)
    if len(head) == HEADER_BYTES and \
            masked_crc32c(head[:8]) == int.from_bytes(head[8:12], "little"):
        return ""
    if head[:2] == b"\x1f\x8b":
        return "GZIP"
    if len(head) >= 2 and head[0] & 0x0F == 8 and (head[0] << 8 | head[1]) % 31 == 0:
        return "ZLIB"
    return ""


def _compression(path: str, choice: str) -> str:
    given = _COMPRESSIONS[choice]
    return _detect_compression(path) if given is None else given


def _scanner(path: str, choice: str, scanner_type=None):
    return (scanner_type or RecordScanner)(path, _compression(path, choice))


def _scan(scanner, update: Callable[[int], None]) -> Iterator[Tuple[int, bytes]]:
    """Yields ``(offset, data)`` from ``scanner`` in bulk, reporting framed bytes to ``update``."""
    try:
        while True:
            batch = scanner.next_batch(_SCAN_BATCH)
            if not batch:
                return
            update(sum(len(data) for _, data in batch) + FRAME_BYTES * len(batch))
            yield from batch
    finally:
        scanner.close()


def _file_size(path: str) -> Optional[int]:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _decode(data: bytes):
    """``(kind, message)``: an Example or SequenceExample, or ``("raw bytes", None)``."""
    try:
        sequence = SequenceExample.FromString(data)
    except DecodeError:
        return "raw bytes", None
    if len(unknown_fields.UnknownFieldSet(sequence)):
        return "raw bytes", None
    if sequence.HasField("feature_lists"):
        return "SequenceExample", sequence
    return "Example", Example.FromString(data)


def _index_path(path: str) -> str:
    return path + ".index"


def _checkout_file(*parts: str) -> Optional[str]:
    """A file of queuepipe's source checkout (beside the package), or None if not there."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not os.path.exists(os.path.join(root, "setup.cfg")):
        return None
    path = os.path.join(root, *parts)
    return path if os.path.exists(path) else None


def _run_script_main(path: str, name: str, argv: List[str]) -> int:
    """Loads the script at ``path`` as module ``name``, runs ``main(argv)``, returns a status.

    The status is what ``main`` returns if that is an int, else 0, or the code of a
    ``SystemExit`` it raises.

    The script's folder leads ``sys.path`` while it runs, as for ``python path``, so that it
    imports the modules beside it.
    """
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load '{path}' as a module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        status = module.main(argv)
        return status if isinstance(status, int) else 0  # a main may return its results
    except SystemExit as e:  # the script's own argparse (--help, a usage error) or sys.exit
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        sys.path.remove(folder)


# ---------------------------------------------------------------------------------------------
# inspect


def _cmd_inspect(args) -> int:
    scanner = _scanner(args.file, args.compression)
    shown = 0
    for offset, data in itertools.islice(_scan(scanner, lambda n: None), args.n):
        kind, message = _decode(data)
        print(f"# record {shown} at offset {offset} of {args.file} ({len(data)} bytes): {kind}")
        if message is None:
            print(repr(data[:args.max_bytes]) + (" ..." if len(data) > args.max_bytes else ""))
        else:
            print(text_format.MessageToString(message).rstrip() or "(empty)")
        shown += 1
    if not shown:
        print(f"# {args.file} holds no records")
    return 0


# ---------------------------------------------------------------------------------------------
# count


def _count_from_index(path: str) -> Optional[int]:
    """The record count from ``path``'s index, or None when there is none or it does not
    match the file (with a warning)."""
    from queuepipe.shards import indexed_count

    count, problem = indexed_count(path)
    if problem is not None:
        print(f"{PROG} count: warning: {problem}; it is not used (queuepipe index rewrites "
              f"it)", file=sys.stderr)
    return count


def _cmd_count(args) -> int:
    """Scans every file (every checksum checked), so that the verdict on a damaged file does
    not depend on an index beside it; an index that disagrees is reported. ``--trust-index``
    counts from a matching index instead, reading no record."""
    total = 0
    for path in args.files:
        indexed = None if _compression(path, args.compression) else _count_from_index(path)
        if args.trust_index and indexed is not None:
            n = indexed
        else:
            with _progress(_file_size(path), f"count {os.path.basename(path)}", "B") as update:
                n = sum(1 for _ in _scan(_scanner(path, args.compression), update))
            if indexed is not None and indexed != n:
                print(f"{PROG} count: warning: '{path}.index' lists {indexed} records, the file "
                      f"holds {n}; it is not used (queuepipe index rewrites it)",
                      file=sys.stderr)
        total += n
        print(f"{n:>10}  {path}")
    if len(args.files) > 1:
        print(f"{total:>10}  total")
    return 0


# ---------------------------------------------------------------------------------------------
# verify


class _DamageCollector(RecordScanner):
    """A RecordScanner that records every damage and reads on past it, as "skip" would."""

    def __init__(self, path, options=None):
        super().__init__(path, options)
        self.damaged: List[DataLossError] = []

    def _damage(self, offset, what, at_end=False):
        try:
            super()._damage(offset, what, at_end)  # builds the DataLossError and raises it
        except DataLossError as e:
            self.damaged.append(e)
            self._error = None  # keep reading, as the "skip" policy does


def _cmd_verify(args) -> int:
    bad_files = 0
    for path in args.files:
        scanner = _scanner(path, args.compression, _DamageCollector)
        with _progress(_file_size(path), f"verify {os.path.basename(path)}", "B") as update:
            good = sum(1 for _ in _scan(scanner, update))
        for e in scanner.damaged:
            print(f"{path}: BAD record at offset {e.offset}: {e.message}")
        if scanner.damaged:
            bad_files += 1
            print(f"{path}: BAD ({len(scanner.damaged)} damaged, {good} good records)")
        elif scanner.unfinished:
            print(f"{path}: OK ({good} records; the compressed stream has no end marker: a "
                  "file still being written, or cut between two records)")
        else:
            print(f"{path}: OK ({good} records)")
    if len(args.files) > 1:
        print(f"{len(args.files) - bad_files} of {len(args.files)} files OK")
    return 1 if bad_files else 0


# ---------------------------------------------------------------------------------------------
# schema

_DTYPES = {"bytes_list": "qp.string", "int64_list": "qp.int64", "float_list": "qp.float32"}


class _FeatureStats:
    """What the sampled records hold under one key: kinds, value counts, presence."""

    def __init__(self):
        self.kinds: Counter = Counter()  # list kind -> features of that kind
        self.counts: set = set()  # numbers of values seen (per feature, or per step)
        self.present = 0  # records holding the key

    def add(self, feature) -> None:
        kind = feature.WhichOneof("kind")
        if kind:
            self.kinds[kind] += 1
        self.counts.add(len(getattr(feature, kind).value) if kind else 0)

    def spec(self, key: str, records: int, sequence: bool) -> str:
        """The line of Python that declares ``key``, or a comment saying why it is left out."""
        if len(self.kinds) > 1:
            return f"# {key!r} left out: its records disagree on the type {dict(self.kinds)}"
        # A key seen only with empty features parses as any dtype.
        dtype = _DTYPES[next(iter(self.kinds))] if self.kinds else "qp.string"
        if len(self.counts) != 1 or (not sequence and self.present < records):
            return f"{_py_str(key)}: qp.io.VarLenFeature({dtype}),"
        count = next(iter(self.counts))
        shape = "[]" if count == 1 else f"[{count}]"
        if not sequence:
            return f"{_py_str(key)}: qp.io.FixedLenFeature({shape}, {dtype}),"
        missing = ", allow_missing=True" if self.present < records else ""
        return f"{_py_str(key)}: qp.io.FixedLenSequenceFeature({shape}, {dtype}{missing}),"


def _specs(stats: Dict[str, _FeatureStats], records: int, sequence: bool = False) -> List[str]:
    return [stats[key].spec(key, records, sequence) for key in sorted(stats)]


def _collect(features, stats: Dict[str, _FeatureStats]) -> None:
    for key in features.feature:
        if not isinstance(key, str):  # not UTF-8 (it iterates as bytes): no spec can name it
            continue
        s = stats.setdefault(key, _FeatureStats())
        s.present += 1
        s.add(features.feature[key])


def _py_str(key: str) -> str:
    """``key`` as a Python string literal, in double quotes where it can be."""
    literal = repr(key)
    if literal.startswith("'") and '"' not in key:
        literal = f'"{literal[1:-1]}"'
    return literal


def _dict_code(name: str, lines: List[str]) -> str:
    body = "".join(f"    {line}\n" for line in lines)
    return f"{name} = {{\n{body}}}\n"


def infer_schema(records: Sequence[bytes], source: str = "the records") -> str:
    """Infers feature specs from serialized Examples or SequenceExamples, as Python code.

    A key becomes a ``FixedLenFeature`` when every record holds it with the same number of
    values (shape ``[]`` for one value, ``[n]`` for n), else a ``VarLenFeature``. For
    SequenceExamples, context features follow the same rule, and a feature list becomes a
    ``FixedLenSequenceFeature`` when every step holds the same number of values
    (``allow_missing=True`` if some records lack it), else a ``VarLenFeature``. The kind of the
    first record decides whether the records are read as Examples or SequenceExamples.

    Args:
      records: serialized records (at least one).
      source: named in the code's first comment line.

    Returns:
      Python code that defines ``features`` (Examples), or ``context_features`` and
      ``sequence_features`` (SequenceExamples), with ``import queuepipe as qp``.

    Raises:
      InvalidArgumentError: no records, or a record is neither an Example nor a
        SequenceExample.
    """
    if not records:
        raise InvalidArgumentError(f"cannot infer a schema: {source} holds no records")
    kind, _ = _decode(records[0])
    if kind == "raw bytes":
        raise InvalidArgumentError(f"cannot infer a schema: the first record of {source} is "
                                   "not an Example or SequenceExample")
    context: Dict[str, _FeatureStats] = {}
    sequence: Dict[str, _FeatureStats] = {}
    for data in records:
        if kind == "Example":
            _collect(Example.FromString(data).features, context)
            continue
        message = SequenceExample.FromString(data)
        _collect(message.context, context)
        lists = message.feature_lists.feature_list
        for key in lists:
            if not isinstance(key, str):  # not UTF-8, as above
                continue
            s = sequence.setdefault(key, _FeatureStats())
            s.present += 1
            for step in lists[key].feature:
                s.add(step)
    head = (f"# Feature specs inferred by `queuepipe schema` from {len(records)} "
            f"{kind}s of {source}.\nimport queuepipe as qp\n\n")
    if kind == "Example":
        return head + _dict_code("features", _specs(context, len(records)))
    return (head + _dict_code("context_features", _specs(context, len(records)))
            + "\n" + _dict_code("sequence_features", _specs(sequence, len(records), True)))


def _cmd_schema(args) -> int:
    records = _scan(_scanner(args.file, args.compression), lambda n: None)
    looked_at = [data for _, data in itertools.islice(records, args.sample)]
    skipped = sum(1 for _ in records)  # what --sample left out, counted so that it is said
    source = f"'{args.file}'" if not skipped else \
        f"'{args.file}' ({skipped} later records not looked at: --sample {args.sample})"
    print(infer_schema(looked_at, source), end="")
    return 0


# ---------------------------------------------------------------------------------------------
# index


def _cmd_index(args) -> int:
    for path in args.files:
        if _compression(path, args.compression):
            raise UsageError(f"cannot index compressed file '{path}': an index holds byte "
                             "offsets into the file, and a compressed stream cannot be entered "
                             "at an offset")
        index = _index_path(path)
        partial = index + ".partial"
        try:
            with open(partial, "w") as out, \
                    _progress(_file_size(path), f"index {os.path.basename(path)}", "B") as update:
                n = 0
                for offset, data in _scan(_scanner(path, "none"), update):
                    out.write(f"{offset} {len(data) + FRAME_BYTES}\n")
                    n += 1
            os.replace(partial, index)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(partial)
        print(f"{index}: {n} records")
    return 0


# ---------------------------------------------------------------------------------------------
# convert


def _cmd_convert(args) -> int:
    from queuepipe.convert import examples_from
    from queuepipe.shards import write_shards

    if not os.path.exists(args.src):
        raise NotFoundError(f"file not found: '{args.src}'")
    records = list(examples_from(args.src, args.format, labels=args.labels, empty=args.empty))
    options = _COMPRESSIONS[args.compression] or None
    paths = write_shards(records, args.out_dir, args.shards, prefix=args.prefix,
                         options=options, progress=sys.stderr.isatty(), index=not options)
    for path in paths:
        print(path)
    print(f"{len(records)} records from '{args.src}' in {len(paths)} shards under "
          f"'{args.out_dir}'")
    return 0


# ---------------------------------------------------------------------------------------------
# bench and demo


def _builtin_bench(records: int, batch_size: int) -> None:
    import numpy as np

    import queuepipe as qp
    from queuepipe.protos import make_example
    from queuepipe.shards import write_shards

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(records, 28 * 28), dtype=np.uint8)
    data = [make_example({"image": image.tobytes(), "label": i % 10}).SerializeToString()
            for i, image in enumerate(images)]
    features = {"image": qp.io.FixedLenFeature([], qp.string),
                "label": qp.io.FixedLenFeature([], qp.int64)}
    with tempfile.TemporaryDirectory(prefix="queuepipe-bench-") as tmp:
        start = time.perf_counter()
        paths = write_shards(data, tmp, 4, progress=False)
        write_secs = time.perf_counter() - start
        seen, read_secs, monitor = _read_once(paths, batch_size, features)
    if seen != records:
        raise RuntimeError(f"bench read {seen} records back but wrote {records}")
    print(f"write_shards:        {records / write_secs:12,.0f} records/s "
          f"({records} records, {write_secs:.2f} s)")
    print(f"read_batch_features: {records / read_secs:12,.0f} records/s "
          f"(batches of {batch_size}, {read_secs:.2f} s)")
    print(monitor.table())
    print(monitor.input_bound().reason)


def _read_once(paths: Sequence[str], batch_size: int, features: Dict[str, Any]) -> Tuple:
    """Reads ``paths`` once with ``read_batch_features`` in a pipeline of its own, watched by a
    QueueMonitor; returns (records, seconds, monitor)."""
    import queuepipe as qp
    from queuepipe.monitor import QueueMonitor
    from queuepipe.sparse import SparseValue, batch_size as sparse_batch_size

    start = time.perf_counter()
    seen = 0
    with qp.Pipeline().as_default() as pipeline:
        batches = qp.read_batch_features(paths, batch_size, features, num_epochs=1,
                                         randomize_input=False)
        with qp.running(pipeline), QueueMonitor(pipeline, interval=0.05) as monitor:
            for batch in batches:
                first = next(iter(batch.values()))
                seen += sparse_batch_size(first) if isinstance(first, SparseValue) \
                    else len(first)
    return seen, time.perf_counter() - start, monitor


def _bench_files(patterns: Sequence[str], features_file: Optional[str],
                 batch_size: int) -> None:
    """Reads the user's files once with ``read_batch_features`` and prints the rate; the
    features from ``features_file`` (``queuepipe schema``'s output) or inferred."""
    from queuepipe.remote import glob

    paths = [path for pattern in patterns for path in (glob(pattern) or [pattern])]
    if features_file is not None:
        namespace: Dict[str, Any] = {}
        with open(features_file, encoding="utf-8") as f:
            exec(compile(f.read(), features_file, "exec"), namespace)  # noqa: S102 - the user's
        if not isinstance(namespace.get("features"), dict):
            raise UsageError(f"'{features_file}' defines no dict 'features' (write one with "
                             f"queuepipe schema FILE > {features_file})")
        features, source = namespace["features"], f"'{features_file}'"
    else:
        sample = [data for _, data in itertools.islice(
            _scan(_scanner(paths[0], "auto"), lambda n: None), _BENCH_SAMPLE)]
        namespace = {}
        exec(infer_schema(sample, f"'{paths[0]}'"), namespace)  # noqa: S102 - code we wrote
        features = namespace.get("features")
        if not isinstance(features, dict):
            raise UsageError("bench reads Examples; give --features for other records")
        source = f"inferred from {len(sample)} records of '{paths[0]}'"
    size = sum(_file_size(path) or 0 for path in paths)
    seen, secs, monitor = _read_once(paths, batch_size, features)
    print(f"features: {sorted(features)} ({source})")
    print(f"read_batch_features: {seen / secs:12,.0f} records/s, {size / secs / 1e6:,.1f} MB/s "
          f"({seen} records in {len(paths)} file(s), batches of {batch_size}, {secs:.2f} s)")
    print(monitor.table())
    print(monitor.input_bound().reason)


def _cmd_bench(args) -> int:
    if args.suite_args and all(os.path.exists(a) or glob_module.glob(a)
                               for a in args.suite_args):  # the user's files, not the suite's
        _bench_files(args.suite_args, args.features, args.batch_size)
        return 0
    if args.features is not None:
        raise UsageError("--features goes with your own files: queuepipe bench FILE... "
                         "--features schema.py")
    suite = None if args.builtin else _checkout_file("benchmarks", "bench.py")
    if suite is not None:
        return _run_script_main(suite, "queuepipe_benchmarks_bench", args.suite_args)
    if args.suite_args:
        raise UsageError(f"arguments {args.suite_args} are for the benchmark suite, which "
                         "this installation does not have (it lives in a source checkout)")
    _builtin_bench(args.records, args.batch_size)
    return 0


def _cmd_demo(args) -> int:
    demo = _checkout_file("examples", "demo.py")
    if demo is None:
        raise UsageError("the demo lives in queuepipe's source checkout (examples/demo.py), "
                         "which this installation does not have")
    return _run_script_main(demo, "queuepipe_examples_demo", args.demo_args)


def _cmd_info(args) -> int:
    import platform

    import numpy
    from google.protobuf import __version__ as protobuf_version
    from google.protobuf.internal import api_implementation

    from queuepipe import _core

    crc = (f"{_core.core.CRC_INSTRUCTION} (the compiled core)" if _core.core else
           "the crc32c package (the pure-Python path)")
    print(f"queuepipe: {__version__}\n"
          f"core: {_core.description}\n"
          f"crc32c: {crc}\n"
          f"python: {platform.python_version()} ({platform.python_implementation()}, "
          f"{sys.executable})\n"
          f"numpy: {numpy.__version__}\n"
          f"protobuf: {protobuf_version} ({api_implementation.Type()})")
    return 0


# ---------------------------------------------------------------------------------------------
# The parser and main


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``queuepipe`` command, one subparser per subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG, description="Look into, check, index and make TFRecord files.",
        epilog="Exit status: 0 success, 1 bad data, 2 usage error (bad arguments, missing "
               "file). Run 'queuepipe SUBCOMMAND --help' for each subcommand.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    sub.required = True

    def command(name, func, help_text, description, tfrecords=None):
        """A subparser; ``tfrecords`` ("one"/"many") adds TFRecord inputs and --compression."""
        p = sub.add_parser(name, help=help_text, description=description)
        p.set_defaults(func=func)
        if tfrecords == "one":
            p.add_argument("file", metavar="FILE")
        elif tfrecords == "many":
            p.add_argument("files", metavar="FILE", nargs="+")
        if tfrecords:
            p.add_argument("--compression", choices=sorted(_COMPRESSIONS), default="auto",
                           help="compression of the TFRecord files (default: recognised from "
                                "their first bytes)")
        return p

    p = command("inspect", _cmd_inspect, "print the first records as Examples",
                "Print the first records of a TFRecord file as Example or SequenceExample "
                "text (protobuf text format), each with its byte offset.", "one")
    p.add_argument("-n", type=_positive_int, default=3, help="records to print (default 3)")
    p.add_argument("--max-bytes", type=_positive_int, default=200,
                   help="bytes of a record that is not an Example to print (default 200)")

    p = command("count", _cmd_count, "count the records of TFRecord files",
                "Print the number of records of each file and the total. Every file is "
                "scanned, every checksum checked, so a damaged file fails (exit 1) whether or "
                "not an index sits beside it; a FILE.index that disagrees is reported.", "many")
    p.add_argument("--trust-index", action="store_true",
                   help="count from an up-to-date FILE.index without reading the records "
                        "(fast; a damaged record is then not noticed)")

    command("verify", _cmd_verify, "check every checksum of every record",
            "Check the length and data checksums of every record and the framing of each "
            "file. Prints OK per good file, and the byte offset and the fault of every "
            "damaged record; reads on past a damaged record where the framing allows. Exit "
            "status 1 if any record is damaged.", "many")

    p = command("schema", _cmd_schema, "infer feature specs, printed as Python code",
                "Infer FixedLenFeature/VarLenFeature specs from the records: a key "
                "holding the same number of values in every record is FixedLen, else "
                "VarLen. Prints Python code to paste (features = {...}).", "one")
    p.add_argument("--sample", type=_positive_int, metavar="N",
                   help="look at the first N records only, and say how many were left out "
                        "(default: every record, so that a pasted schema fits them all)")

    command("index", _cmd_index, "write FILE.index files",
            "Write FILE.index for each file: one line 'offset length' per record (length "
            "includes the 16 framing bytes), the format of the tfrecord package and NVIDIA "
            "DALI. Compressed files cannot be indexed.", "many")

    p = command("convert", _cmd_convert, "convert IDX, CSV or NPZ to TFRecord shards",
                "Convert a source file to TFRecord shards of Examples (with .index files). "
                "IDX (MNIST/Fashion-MNIST, raw or gzip): features 'image' (the image's "
                "bytes) and 'label' (int64); the label file is found by its name, or given "
                "with --labels. CSV with a header: one feature per column, typed int64, "
                "float or bytes from its cells. NPZ: one feature per array, one record per "
                "index of the first axis.")
    p.add_argument("src", metavar="SRC")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.add_argument("--shards", type=_positive_int, required=True, metavar="N",
                   help="number of shards")
    p.add_argument("--format", choices=["idx", "csv", "npz"],
                   help="format of SRC (default: from its name)")
    p.add_argument("--labels", metavar="FILE", help="IDX label file (default: found by name)")
    p.add_argument("--prefix", default="shard", help="shard file name prefix (default shard)")
    p.add_argument("--empty", choices=["error", "default", "absent"], default="error",
                   help="an empty CSV cell of a number column: stop and name it (default), "
                        "write 0, or write no value (the column is then a VarLenFeature)")
    p.add_argument("--compression", choices=["none", "gzip", "zlib"], default="none",
                   help="compress the shards (then no .index files are written)")

    p = command("bench", _cmd_bench, "measure read throughput",
                "Measure your own files (bench FILE... [--features schema.py]: one pass of "
                "read_batch_features, the features from queuepipe schema's output or "
                "inferred), or run the benchmark suite of a source checkout "
                "(benchmarks/bench.py; arguments after '--' go to it), or, without one or with "
                "--builtin, a small check: write records to a temporary directory, read them "
                "back with read_batch_features, print records/s and what the queues did. "
                "Exit status 0 whatever the speed; 1 only when it cannot run or reads bad "
                "data.")
    p.add_argument("--features", metavar="FILE",
                   help="Python code defining 'features' (what queuepipe schema prints), for "
                        "your own files; by default inferred from their first records")
    p.add_argument("--builtin", action="store_true", help="run the built-in check")
    p.add_argument("--records", type=_positive_int, default=20000,
                   help="records for the built-in check (default 20000)")
    p.add_argument("--batch-size", type=_positive_int, default=128,
                   help="batch size for your files and the built-in check (default 128)")
    p.add_argument("suite_args", nargs="*", metavar="ARG", help=argparse.SUPPRESS)

    p = command("demo", _cmd_demo, "run the end-to-end demo",
                "Run examples/demo.py of a source checkout; arguments after '--' go to it.")
    p.add_argument("demo_args", nargs="*", metavar="ARG", help=argparse.SUPPRESS)

    command("info", _cmd_info, "print versions and whether the compiled core runs",
            "Print queuepipe's version, whether its compiled core is built and loaded (or why "
            "not) and the CRC-32C instruction it uses (sse4.2, armv8 or table), and the "
            "versions of Python, NumPy and protobuf.")
    return parser


def _error(command: Optional[str], message: str, status: int) -> int:
    where = f"{PROG} {command}" if command else PROG
    print(f"{where}: error: {message}", file=sys.stderr)
    return status


def _check_paths(args) -> None:
    """A directory given where a TFRecord file is wanted is a usage error (exit 2)."""
    for path in getattr(args, "files", None) or [getattr(args, "file", None)]:
        if path is not None and os.path.isdir(path):
            raise UsageError(f"'{path}' is a directory: give the TFRecord files in it "
                             f"('{os.path.join(path, '*.tfrecord')}')")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the ``queuepipe`` command with ``argv`` (``sys.argv[1:]`` if None).

    Returns:
      The exit status: 0 success, 1 bad data, 2 usage error; 130 after Ctrl-C.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help (0) or a usage error argparse already printed (2)
        return e.code if isinstance(e.code, int) else 2
    try:
        _check_paths(args)
        return args.func(args)
    except UsageError as e:
        return _error(args.command, str(e), 2)
    except BrokenPipeError:  # the reader of our output went away (`queuepipe inspect | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except FileNotFoundError as e:  # NotFoundError included
        return _error(args.command, getattr(e, "message", None) or str(e), 2)
    except (DataLossError, InvalidArgumentError) as e:
        return _error(args.command, e.message, 1)
    except OSError as e:
        return _error(args.command, str(e), 1)
    except KeyboardInterrupt:
        return _error(args.command, "interrupted", 130)
    finally:
        sys.stdout.flush()
