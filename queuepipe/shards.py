"""Write a dataset as N balanced TFRecord shards, in parallel and atomically, with index files.

Record ``i`` goes to shard ``i % num_shards``, so the shards are balanced and the layout depends
only on the order of the records. Each shard is written under a temporary name in the output
folder, synced to disk and renamed into place only when complete, so a shard name never holds a
partial file, even after a crash or a full disk.

Beside each shard, ``<shard>.index`` lists one line per record, ``"<byte offset> <byte length>"``
(the length of the whole framed record), the format the ``tfrecord`` package and NVIDIA DALI
read to enter a file at any record.

Usage::

    paths = qp.write_shards({"image": images, "label": labels}, "train/", num_shards=8)
    filenames = qp.train.string_input_producer(paths, num_epochs=1)
"""

from __future__ import annotations

import ast
import contextlib
import glob
import multiprocessing
import os
import re
import sys
import tempfile
import types
from collections.abc import Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np

from queuepipe.records import FRAME_BYTES, TFRecordOptions, TFRecordWriter

__all__ = ["write_shards", "read_index", "shard_name"]

_BYTES = (bytes, bytearray, memoryview)
_PARALLEL_FROM = 10_000  # records to serialize before processes=None starts worker processes


def shard_name(prefix: str, index: int, num_shards: int) -> str:
    """The file name of shard ``index``: ``"<prefix>-00003-of-00008.tfrecord"``."""
    return f"{prefix}-{index:05d}-of-{num_shards:05d}.tfrecord"


def _serialize(record: Any, number: int) -> bytes:
    """``record`` (bytes, an Example, or a dict for ``make_example``) as bytes."""
    if isinstance(record, _BYTES):
        return bytes(record)
    if isinstance(record, Mapping):
        from queuepipe.protos import make_example

        try:
            return make_example(record).SerializeToString(deterministic=True)
        except TypeError as e:
            raise TypeError(f"record {number}: {e}") from e
    if hasattr(record, "SerializeToString"):
        return record.SerializeToString(deterministic=True)
    raise TypeError(f"record {number} is a {type(record).__name__}: write_shards takes bytes, "
                    "Example messages, or dicts of feature values")


def _rows(part: Any, first: int, step: int):
    """Yields ``(record number, serialized record)`` of one shard's part of the input.

    ``part`` is a list of records, or a dict of columns whose row ``j`` is record
    ``first + j * step``.
    """
    if isinstance(part, Mapping):
        length = len(next(iter(part.values()))) if part else 0
        for j in range(length):
            number = first + j * step
            yield number, _serialize({key: column[j] for key, column in part.items()}, number)
    else:
        for j, record in enumerate(part):
            number = first + j * step
            yield number, _serialize(record, number)


def _write_shard(path: str, part: Any, first: int, step: int, options: TFRecordOptions,
                 index: bool) -> int:
    """Writes one shard (and its index) atomically; returns its number of records.

    Runs in a worker process (it is a top-level function, so "spawn" can import it) or in the
    caller's. On any failure the temporary files are removed and nothing appears under the
    final names; an OSError is raised again naming the shard.
    """
    folder, name = os.path.split(path)
    index_path = path + ".index"
    temps = []  # temporary files not yet renamed into place
    placed_index = done = False
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
        os.close(fd)
        temps.append(tmp)
        lengths = []
        with TFRecordWriter(tmp, options) as writer:
            for _, record in _rows(part, first, step):
                writer.write(record)
                lengths.append(len(record) + FRAME_BYTES)
            writer.flush()
            os.fsync(writer.fileno())
        if index:
            fd, tmp_index = tempfile.mkstemp(dir=folder, prefix=f".{name}.index.", suffix=".tmp")
            temps.append(tmp_index)
            offsets = np.cumsum([0] + lengths[:-1]) if lengths else np.zeros(0, np.int64)
            with os.fdopen(fd, "w") as f:
                f.writelines(f"{offset} {length}\n" for offset, length in zip(offsets, lengths))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp_index, index_path)  # first, so a shard never appears without it
            temps.remove(tmp_index)
            placed_index = True
        os.replace(tmp, path)
        temps.remove(tmp)
        done = True
        return len(lengths)
    except OSError as e:
        message = f"cannot write shard '{path}': {e.strerror or e}"
        raise (OSError(e.errno, message) if e.errno else OSError(message)) from e
    finally:
        for leftover in temps:
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
        if placed_index and not done:  # the index of a shard that never made it
            with contextlib.suppress(FileNotFoundError):
                os.remove(index_path)


def _remove_temporaries(path: str) -> None:
    """Removes the temporary files of shard ``path`` (named as :func:`_write_shard` names them)."""
    folder, name = os.path.split(path)
    for leftover in glob.glob(os.path.join(glob.escape(folder), f".{glob.escape(name)}.*tmp")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(leftover)


def _write_shard_task(task: Tuple) -> int:
    return _write_shard(*task)


def _split(records: Any, num_shards: int) -> Tuple[List[Any], int]:
    """Each shard's part of the input, and the number of records."""
    if isinstance(records, Mapping):
        lengths = {key: len(column) for key, column in records.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"write_shards needs columns of equal length, got {lengths}")
        columns = {key: column if isinstance(column, (np.ndarray, list)) else list(column)
                   for key, column in records.items()}
        parts = [{key: column[s::num_shards] for key, column in columns.items()}
                 for s in range(num_shards)]
        return parts, next(iter(lengths.values()), 0)
    if not isinstance(records, Sequence):
        records = list(records)
    return [list(records[s::num_shards]) for s in range(num_shards)], len(records)


def _progress_bar(progress: bool, total: int, desc: str):
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            # Without tqdm's monitor thread, which would outlive the bar.
            quiet_monitor = type("ShardProgress", (tqdm,), {"monitor_interval": 0})
            return quiet_monitor(total=total, desc=desc, unit="records")
    return contextlib.nullcontext()


def write_shards(records: Union[Iterable[Any], Mapping[str, Sequence[Any]]],
                 out_dir: Union[str, "os.PathLike[str]"], num_shards: int, *,
                 prefix: str = "shard", options=None, processes: Optional[int] = None,
                 progress: bool = True, index: bool = True,
                 executor: Optional[Executor] = None) -> List[str]:
    """Writes ``records`` as TFRecord shards, record ``i`` to shard ``i % num_shards``.

    Args:
      records: serialized records (bytes), Example messages, or dicts of feature values (each
        made into an Example with ``qp.train.make_example``), as a sequence or any iterable
        (an iterable is read into memory first); or a dict of equal-length columns (arrays or
        lists), row ``i`` of every column making record ``i``.
      out_dir: the folder for the shards (created if missing); a local path.
      num_shards: how many shards (>= 1).
      prefix: shard names are ``<prefix>-00000-of-00008.tfrecord``, ...; add a suffix such
        as ``.gz`` to the prefix's files yourself if you want one.
      options: compression, as for ``TFRecordWriter`` (None, "GZIP", "ZLIB", TFRecordOptions).
      processes: worker processes (started with "spawn"); 1 writes in this process. None: in
        this process when every record is already bytes (writing is then I/O-bound) or there
        are fewer than 10,000, else one process per shard up to the number of CPUs. A spawned
        worker imports the calling script again, so processes are used only when that is
        safe: the call made from inside ``if __name__ == "__main__":`` (or from no script:
        ``python -c``, a notebook); otherwise the shards are written by as many threads.
      executor: any ``concurrent.futures.Executor`` to write the shards with, one task per
        shard, in place of ``processes``: a ``ProcessPoolExecutor`` of your own, or a cluster
        engine's (``dask.distributed.Client(...).get_executor()``, Ray's
        ``ray.util.ProcessPoolExecutor``, Spark's ``pyspark`` executors via joblib-spark). The
        workers must see ``out_dir``. The caller keeps owning it: it is not shut down.
      progress: show a tqdm progress bar (if tqdm is installed; quiet otherwise).
      index: also write ``<shard>.index`` beside each shard. Needs uncompressed shards: an
        index holds byte offsets into the file, and a compressed stream cannot be entered at
        an offset.

    Returns:
      The shard paths, in shard order.

    Raises:
      ValueError: a bad ``num_shards``/``processes``, columns of unequal length, or ``index``
        with compression.
      TypeError: a record of another type (the message names the record number).
      OSError: a shard could not be written (the message names it). Each shard is atomic:
        the failed one leaves neither a file under its name nor a temporary file; shards
        already complete stay.
    """
    if isinstance(num_shards, bool) or int(num_shards) != num_shards or num_shards < 1:
        raise ValueError(f"num_shards must be a positive integer, got {num_shards!r}")
    if processes is not None and (int(processes) != processes or processes < 1):
        raise ValueError(f"processes must be a positive integer or None, got {processes!r}")
    if executor is not None and not isinstance(executor, Executor):
        raise TypeError(f"executor must be a concurrent.futures.Executor, got {executor!r}")
    options = options if isinstance(options, TFRecordOptions) else TFRecordOptions(options)
    if index and options.compression_type:
        raise ValueError(f"index=True needs uncompressed shards, got compression "
                         f"{options.compression_type!r}: pass index=False (an index holds byte "
                         "offsets, and a compressed stream cannot be entered at an offset)")
    num_shards = int(num_shards)
    parts, total = _split(records, num_shards)
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, shard_name(prefix, s, num_shards)) for s in range(num_shards)]
    tasks = [(paths[s], parts[s], s, num_shards, options, index) for s in range(num_shards)]
    if processes is None:
        serialized = not isinstance(records, Mapping) and all(
            isinstance(r, _BYTES) for part in parts for r in part)
        few = total < _PARALLEL_FROM  # starting worker processes would cost more than it saves
        processes = 1 if serialized or few else min(num_shards, os.cpu_count() or 1)
    try:
        with _progress_bar(progress, total, f"write_shards {prefix}") as bar:
            advance = bar.update if bar is not None else (lambda n: None)
            if executor is not None:
                _write_with(executor, tasks, advance)
            elif processes == 1 or num_shards == 1:
                for task in tasks:
                    advance(_write_shard_task(task))
            elif _spawn_is_safe():
                # Futures rather than a multiprocessing.Pool: a worker that dies (killed, out
                # of memory) fails its shards with BrokenProcessPool instead of hanging.
                with ProcessPoolExecutor(min(processes, num_shards),
                                         mp_context=multiprocessing.get_context("spawn")) as pool:
                    _write_with(pool, tasks, advance)
            else:
                with ThreadPoolExecutor(min(processes, num_shards),
                                        thread_name_prefix="write_shards") as pool:
                    _write_with(pool, tasks, advance)
    except BaseException:
        # A failed shard, a worker that died, or Ctrl-C (which reaches the workers too, and
        # may stop one before its own clean-up): once every worker has ended, no temporary
        # file of any shard may stay behind (they can be as large as a whole shard).
        for path in paths:
            _remove_temporaries(path)
        raise
    return paths


def _write_with(executor: Executor, tasks: List[Tuple], advance: Any) -> None:
    """Writes the shards of ``tasks`` on ``executor``; raises the first shard's error once
    every shard has ended (so that no shard is still being written when the caller cleans
    up after it)."""
    futures = [executor.submit(_write_shard_task, task) for task in tasks]
    try:
        for future in as_completed(futures):
            if future.exception() is None:
                advance(future.result())
    finally:  # Ctrl-C included: what has not started never will
        for future in futures:
            future.cancel()
    for future in futures:
        future.result()  # raises the first shard's error, if any


def _spawn_is_safe() -> bool:
    """Whether a spawned worker, which imports the ``__main__`` script again, would not run
    this call again: true when there is no script (``python -c``, a notebook, the REPL), or
    when the script's top-level code makes the call from inside ``if __name__ ==
    "__main__":``. False when that cannot be told (no source, a call from another thread)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None:
        return True
    frame: Optional[types.FrameType] = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "<module>"
                                     and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return False
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return False
    return any(node.lineno <= frame.f_lineno <= (node.end_lineno or node.lineno)
               for node in tree.body if isinstance(node, ast.If) and _is_main_guard(node.test))


def _is_main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(a, ast.Name) and a.id == "__name__" for a in sides) and \
        any(isinstance(b, ast.Constant) and b.value == "__main__" for b in sides)


def index_mismatch(entries: np.ndarray, size: int) -> Optional[str]:
    """Why an index does not describe a file of ``size`` bytes, or None when it does.

    An index that can be trusted tiles the file: its first record starts at byte 0, each
    record starts where the one before it ends, each is at least a frame's header and
    footer long, and the last ends at the file's end. A missing line would lose a record and
    a repeated one would deliver it twice, so any gap or overlap counts, not just the end.

    Args:
      entries: ``(N, 2)`` offsets and framed lengths, as :func:`read_index` returns them.
      size: the file's size in bytes.
    """
    offsets, lengths = entries[:, 0], entries[:, 1]
    ends = offsets + lengths
    end = int(ends[-1]) if len(entries) else 0
    if end != size:
        return f"its records end at byte {end}, the file has {size}"
    short = np.flatnonzero(lengths < FRAME_BYTES)
    if len(short):
        i = int(short[0])
        return (f"line {i + 1} gives a record of {int(lengths[i])} bytes, less than a frame's "
                f"{FRAME_BYTES}")
    starts = np.concatenate(([0], ends[:-1]))
    apart = np.flatnonzero(offsets != starts)
    if len(apart):
        i = int(apart[0])
        return (f"line {i + 1} puts a record at byte {int(offsets[i])}, where the record "
                f"before it ends at {int(starts[i])} (a line missing, repeated or out of order)")
    return None


def indexed_count(path: str) -> Tuple[Optional[int], Optional[str]]:
    """The number of records of the local file ``path`` from its ``path + ".index"``, if that
    index matches the file (:func:`index_mismatch`).

    Returns:
      ``(count, None)``; or ``(None, why)`` for an index that is malformed or does not match
      the file; or ``(None, None)`` when there is no index.
    """
    index = path + ".index"
    if not os.path.exists(index):
        return None, None
    try:
        entries = read_index(index)
    except ValueError as e:
        return None, str(e)
    mismatch = index_mismatch(entries, os.path.getsize(path))
    if mismatch is not None:
        return None, f"'{index}' does not match its file ({mismatch})"
    return len(entries), None


# Index lines as write_shards (and the tfrecord package) write them: two decimal numbers.
_INDEX_LINES = re.compile(rb"(?:[0-9]+[ \t]+[0-9]+[ \t]*(?:\r?\n|\Z))*")


def read_index(path: Union[str, "os.PathLike[str]"]) -> np.ndarray:
    """Reads a ``.index`` file written by :func:`write_shards` (or the ``tfrecord`` package).

    Returns:
      An ``(N, 2)`` int64 array: the byte offset and the framed length of each record.

    Raises:
      NotFoundError: the file does not exist.
      ValueError: a line is not two non-negative integers (the message names file and line).
    """
    from queuepipe.remote import open_file

    with open_file(path, "rb") as f:
        data = f.read()
    if _INDEX_LINES.fullmatch(data):  # the common case, checked and converted in C
        return np.array(data.split(), dtype=np.int64).reshape(-1, 2)
    lines = data.decode("ascii", errors="replace").splitlines()
    rows = []  # line by line, to name the first bad one
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if len(fields) != 2 or not all(field.isdigit() for field in fields):
            raise ValueError(f"{os.fsdecode(path)}:{number}: an index line is "
                             f"'<offset> <length>', got {line!r}")
        rows.append((int(fields[0]), int(fields[1])))
    return np.array(rows, dtype=np.int64).reshape(len(rows), 2)
