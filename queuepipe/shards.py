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
import stat
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
    index_path = path + ".index"
    temps = []  # temporary files not yet renamed into place
    placed_index = done = False
    try:
        fd, tmp = _temporary_beside(path)
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
            offsets = np.cumsum([0] + lengths[:-1]) if lengths else np.zeros(0, np.int64)
            write_index(index_path, zip(offsets.tolist(), lengths))  # first, so a shard
            placed_index = True  # never appears without it
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


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the umask (0o644 with the usual
    0o022), as TensorFlow's writer gives its files. Read where the kernel shows it (Linux), so
    that the process's umask is not changed; elsewhere set and put back at once."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere the only way to read it: set it and put it back
    os.umask(mask)
    return 0o666 & ~mask


def _temporary_beside(path: str) -> Tuple[int, str]:
    """``(fd, name)`` of a new file beside ``path`` to be renamed onto it: created
    exclusively under an unpredictable name (never through a link another user or a dataset
    planted), with the mode a new file gets from the umask."""
    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(dir=folder or ".", prefix=f".{name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _new_file_mode())
    except BaseException:
        os.close(fd)
        os.remove(tmp)
        raise
    return fd, tmp


def write_index(path: str, entries: Iterable[Tuple[int, int]]) -> int:
    """Writes the index ``path`` (``"<offset> <length>"`` per entry) atomically: to a new
    temporary file beside it (see :func:`_temporary_beside`), synced and renamed onto
    ``path``, so that a link at ``path`` is replaced, never written through. ``entries`` may
    be a generator: it is written as it comes. Returns the number of entries."""
    fd, tmp = _temporary_beside(path)
    try:
        count = 0
        with os.fdopen(fd, "w", encoding="ascii") as f:
            for offset, length in entries:
                f.write(f"{offset} {length}\n")
                count += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    return count


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

    Shards and indexes get the mode a new file gets from the umask (0o644 with the usual
    one), as ``TFRecordWriter``'s files do.

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
    if not os.path.lexists(index):  # a link to nowhere is refused below, not taken as none
        return None, None
    try:
        entries = read_index(index)
    except ValueError as e:
        return None, str(e)
    mismatch = index_mismatch(entries, os.path.getsize(path))
    if mismatch is not None:
        return None, f"'{index}' does not match its file ({mismatch})"
    return len(entries), None


# An index is read and converted this many bytes at a time: what checking a chunk allocates
# (a few bytes per byte) stays bounded, and the entries take 16 bytes each.
_INDEX_CHUNK = 1 << 18
_INDEX_DIGITS = 18  # digits of an offset or length: any file's size fits, and int64 holds it
_QUOTED = 24  # bytes of a malformed line quoted in an error (escaped)


def _open_index(path: str):
    """Opens a local index for reading: a regular file reached without a symbolic link (an
    index a dataset ships as ``x.index -> ~/.netrc`` must not be read), never blocking on a
    named pipe."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as e:
        from queuepipe.errors import NotFoundError

        raise NotFoundError(f"file not found: '{path}'") from e
    except OSError:
        if os.path.islink(path):
            raise ValueError(f"'{path}' is a symbolic link: an index must be a regular file "
                             "beside its shard (it is not followed)") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"'{path}' is not a regular file: an index must be a regular "
                             "file beside its shard")
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _index_error(path: str, line: int, text: bytes) -> ValueError:
    """Names the malformed line, quoting a short escaped prefix of it, never all of it."""
    shown = repr(text[:_QUOTED])[2:-1] + ("..." if len(text) > _QUOTED else "")
    return ValueError(f"{path}:{line}: an index line is '<offset> <length>', got '{shown}'")


def _first_bad_line(chunk: bytes) -> Optional[int]:
    """The 0-based number of the first line of ``chunk`` (whole lines of an index) that is
    not two decimal numbers of at most ``_INDEX_DIGITS`` digits with blanks (space, tab)
    around them and an optional ``\\r`` before its ``\\n``; None when every line is. Checked with
    NumPy over the bytes, a few bytes of memory per byte (a regular expression's repeated
    group would keep hundreds per line)."""
    a = np.frombuffer(chunk, dtype=np.uint8)
    if not len(a):
        return None
    newline = a == 10
    digit = (a >= 48) & (a <= 57)
    cr_before_newline = (a == 13) & np.append(newline[1:], False)
    stray = ~(digit | newline | (a == 32) | (a == 9) | cr_before_newline)
    line = np.cumsum(newline, dtype=np.int32) - newline  # each byte's line
    lines = int(line[-1]) + 1
    starts = np.flatnonzero(digit & ~np.append(False, digit[:-1]))
    ends = np.flatnonzero(digit & ~np.append(digit[1:], False))
    numbers = np.bincount(line[starts], minlength=lines)
    bad = [np.flatnonzero(numbers != 2), line[stray],
           line[starts[ends - starts >= _INDEX_DIGITS]]]
    found = [int(b.min()) for b in bad if len(b)]
    return min(found) if found else None


def _convert_index(chunk: bytes, path: str, first_line: int) -> np.ndarray:
    """The ``(n, 2)`` entries of ``chunk``, whole lines of an index from line ``first_line``."""
    bad = _first_bad_line(chunk)
    if bad is not None:
        lines = chunk.split(b"\n", bad + 1)
        raise _index_error(path, first_line + bad, lines[bad])
    return np.fromstring(chunk, dtype=np.int64, sep=" ").reshape(-1, 2)  # checked: 2 a line


def read_index(path: Union[str, "os.PathLike[str]"]) -> np.ndarray:
    """Reads a ``.index`` file written by :func:`write_shards` (or the ``tfrecord`` package).

    The file is read and converted a megabyte at a time, so memory stays proportional to the
    entries it holds (16 bytes each) whatever its content. A local index must be a regular
    file, not a symbolic link.

    Returns:
      An ``(N, 2)`` int64 array: the byte offset and the framed length of each record.

    Raises:
      NotFoundError: the file does not exist.
      ValueError: a line is not two non-negative integers (the message names file and line,
        and quotes at most a short escaped prefix of it), or the index is a symbolic link or
        not a regular file.
    """
    from queuepipe.remote import is_remote, open_file

    path = os.fsdecode(path)
    parts = []
    line = 1
    rest = b""
    with (open_file(path, "rb") if is_remote(path) else _open_index(path)) as f:
        while True:
            data = f.read(_INDEX_CHUNK)
            chunk = rest + data
            cut = chunk.rfind(b"\n") + 1 if data else len(chunk)
            if not cut and len(chunk) > _INDEX_CHUNK:  # no line is this long
                raise _index_error(path, line, chunk)
            parts.append(_convert_index(chunk[:cut], path, line))
            line += chunk.count(b"\n", 0, cut)
            rest = chunk[cut:]
            if not data:
                break
    return np.concatenate(parts) if len(parts) > 1 else parts[0]
