"""Readers: take file names from a queue and turn each file into ``(key, value)`` records.

As TF1's ``tf.compat.v1.*Reader``: a reader holds one file at a time. When it has none it
dequeues the next name from the queue it is given (blocking as that queue's ``dequeue`` does;
the queue's ``OutOfRangeError`` when it is closed and empty ends the pipeline), reads records
until the file is exhausted, and moves on. Keys are bytes exactly as TensorFlow makes them:

- :class:`TFRecordReader`: ``b"<file>:<byte offset of the record>"``
- :class:`TextLineReader`: ``b"<file>:<line number, 1-based, header lines counted>"``
- :class:`FixedLengthRecordReader`: ``b"<file>:<record index>"``
- :class:`WholeFileReader`: ``b"<file>"``

A reader is thread-safe: one lock serialises its calls, so several runner threads can share one
reader (each record goes to exactly one of them), as in TensorFlow. ``read`` takes a few dozen
records of its file at once and hands them out one per call without the lock, so threads that
share a reader do not queue on its lock for every record.

Usage::

    filenames = qp.train.string_input_producer(["a.tfrecord", "b.tfrecord"], num_epochs=1)
    reader = qp.TFRecordReader()
    key, value = reader.read(filenames)              # one record
    keys, values = reader.read_up_to(filenames, 256)  # up to 256, from one file
"""

from __future__ import annotations

import collections
import logging
import os
import threading
from typing import IO, Any, Callable, Dict, List, Optional, Tuple, TypeVar

import numpy as np

from queuepipe._columns import object_array, set_objects
from queuepipe._core import core
from queuepipe._frames import _HEADER, FRAME_BYTES, HEADER_BYTES, masked_crc32c, unframe_many
from queuepipe._streams import ReadBuffer, stored_size
from queuepipe.errors import DataLossError, InvalidArgumentError, OutOfRangeError
from queuepipe.records import CutShort, RecordScanner, TFRecordOptions, check_corrupt_records
from queuepipe.remote import open_file

__all__ = ["ReaderBase", "TFRecordReader", "TextLineReader", "FixedLengthRecordReader",
           "WholeFileReader", "IdentityReader", "KeyedRecordReader"]

logger = logging.getLogger("queuepipe.records")  # where the record scanner logs damage

# The records _read_records returns: their positions in the file (what the key names after
# the file name: a byte offset, a line number, an index), their values, whether the file is
# finished.
Records = Tuple[List[int], List[bytes], bool]

# A read() takes records from its file ahead, about _READ_AHEAD_BYTES of them (sized by the
# records it read last) and at most _READ_AHEAD; it hands them out one per call. Fewer takes
# cost more thread switches when threads share the reader (one blocks on its lock per take).
_READ_AHEAD = 512
_READ_AHEAD_BYTES = 1 << 20


T = TypeVar("T")


def _current(opened: Optional[T]) -> T:
    """What ``_start`` opened (a reader's hooks between ``_start`` and ``_stop`` see it)."""
    assert opened is not None, "no file is being read"
    return opened


def _filename(item: Any):
    """The file name in what a queue's ``dequeue`` returned (bytes, str, a 1-tuple, a 0-d array)."""
    if isinstance(item, (tuple, list)) and len(item) == 1:
        item = item[0]
    if isinstance(item, np.ndarray) and item.ndim == 0:
        item = item.item()
    if isinstance(item, (bytes, str, os.PathLike)):
        return item
    raise TypeError(f"a reader's queue must give file names (bytes or str), got {item!r}")


class ReaderBase:
    """The common machinery of the readers: the work loop, the counters and the lock.

    Subclasses implement three hooks, each called with the lock held: :meth:`_start` opens a
    file, :meth:`_read_records` returns up to ``n`` records of it and whether it is finished,
    and :meth:`_stop` closes it. Keys are made from the records' positions only when a caller
    wants them (:meth:`_keys`).

    Args:
      name: a name for messages and for ``name``; defaults to the class name.
    """

    def __init__(self, name: Optional[str] = None):
        self._name = name or type(self).__name__
        self._lock = threading.Lock()
        self._work = None  # the file being read, as the queue gave it; None between files
        self._key_prefix = b""
        # (key, value) records of the current file that read() took ahead and has not returned
        # yet. Popped without the lock (a deque's popleft is atomic), so that threads sharing a
        # reader do not queue on its lock for every record.
        self._ahead: collections.deque = collections.deque()
        self._ahead_finished = False  # the records ahead end the current file
        self._ahead_count = 1  # records the next read() takes: one until their size is known
        self._records_produced = 0  # records taken from files, those ahead included
        self._work_units_completed = 0

    @property
    def name(self) -> str:
        return self._name

    # -- the hooks, called with self._lock held ---------------------------------------------

    def _start(self, filename) -> None:
        """Opens ``filename`` for reading. Called with the lock held."""
        raise NotImplementedError

    def _read_records(self, n: int) -> Records:
        """Returns up to ``n`` records of the current file, as their positions and values, and
        whether it is finished.

        Returns fewer than ``n`` records only when the file is finished, or when damage waits
        to be raised by the next call. Called with the lock held.
        """
        raise NotImplementedError

    def _read_framed(self, n: int) -> Tuple[List[int], List[Any], bool]:
        """:meth:`_read_records`, but the values as pieces for
        :func:`~queuepipe.records.unframed` to make the records of, later and without the
        lock (``read_batch_features``' plan reads under its own): the records themselves
        here, copies of their frames for a TFRecordReader with the compiled core."""
        positions, values, finished = self._read_records(n)
        return list(positions), list(values), finished

    def _stop(self) -> None:
        """Closes the current file. Called with the lock held."""
        raise NotImplementedError

    def _records_end(self) -> int:
        """Where the records read so far end in the current file: a TFRecordReader's, which
        the chunk maps of ``read_batch_features``' plan ask (``queuepipe/_chunk_maps.py``)."""
        raise NotImplementedError

    def _reset(self) -> None:
        """Zeroes a subclass's own counters. Called with the lock held, after :meth:`_stop`."""

    def _input_ended(self) -> None:
        """The queue ended (``OutOfRangeError``): no file comes again. Called with the lock
        held, before the error reaches the caller."""

    def _keys(self, positions: List[int]) -> List[bytes]:
        """The keys of the current file's records at ``positions``: ``b"<file>:<position>"``.
        Called with the lock held."""
        return _format_keys(self._key_prefix, positions)

    def _seek(self, position: int) -> bool:
        """Moves the file just opened to its record at ``position``; False when this reader
        cannot (its caller then reads up to that record). Called with the lock held."""
        return False

    # -- reading by position (read_batch_features' plan) -----------------------------------

    def _start_at(self, filename, position: int) -> bool:
        """Opens ``filename`` at its record at ``position``, as its keys give positions, if
        the reader can seek there; False when it opened at the start instead. Called with
        the lock held; the caller reads with :meth:`_read_records` and closes with
        :meth:`_stop`."""
        self._start(filename)
        self._key_prefix = os.fsencode(filename)
        try:
            return position == 0 or self._seek(position)
        except BaseException:
            self._stop()
            raise

    # -- the work loop and the public methods ----------------------------------------------

    def _read(self, queue, n: int, keyed: bool = True) -> Tuple[List[bytes], List[bytes]]:
        """TF's ``ReaderBase::ReadUpTo``: records of one file, dequeuing files until some come.

        A call for one record (``read``) takes up to ``self._ahead_count`` and leaves the rest
        in ``self._ahead``; every call returns those first. A file whose last records were taken
        ahead counts as finished when the call after them finds it so, as without read-ahead.
        Without ``keyed``, no key is made or returned: the keys list stays empty.
        """
        with self._lock:
            keys: List[bytes] = []
            values: List[bytes] = []
            while len(values) < n:  # read() pops without the lock: take until empty
                try:
                    key, value = self._ahead.popleft()
                except IndexError:
                    break
                if keyed:
                    keys.append(key)
                values.append(value)
            if len(values) == n:
                return keys, values
            n -= len(values)
            if self._ahead_finished:
                self._ahead_finished = False
                self._finish_work()
                self._work_units_completed += 1
                if values:
                    return keys, values
            while True:
                if self._work is None:
                    try:
                        item = queue.dequeue()
                    except OutOfRangeError:
                        self._input_ended()
                        raise
                    filename = _filename(item)
                    self._start(filename)
                    self._work = filename
                    self._key_prefix = os.fsencode(filename)
                # An error leaves the file current, so the next call raises it again, as in
                # TensorFlow: a reader never moves silently past damage (reset() drops it).
                ahead = n == 1 and not values
                positions, more_values, finished = self._read_records(
                    self._ahead_count if ahead else n)
                if ahead and more_values:
                    size = sum(map(len, more_values)) or 1
                    self._ahead_count = max(1, min(
                        _READ_AHEAD, _READ_AHEAD_BYTES * len(more_values) // size))
                if len(more_values) > n:
                    self._ahead.extend(zip(self._keys(positions[n:]), more_values[n:]))
                    self._ahead_finished = finished
                    finished = False
                    del positions[n:], more_values[n:]
                self._records_produced += len(more_values) + len(self._ahead)
                if keyed:
                    keys += self._keys(positions)
                values += more_values
                if finished:
                    self._finish_work()
                    self._work_units_completed += 1
                if values:
                    return keys, values

    def _finish_work(self) -> None:
        self._ahead.clear()
        self._ahead_finished = False
        self._stop()
        self._work = None

    def read(self, queue) -> Tuple[bytes, bytes]:
        """Returns the next record as ``(key, value)``.

        Blocks while the reader needs a new file and ``queue`` has none, exactly as
        ``queue.dequeue()`` blocks, holding the reader's lock (other threads' reads wait; the
        counters do not). There is no timeout: closing the queue ends the wait with
        ``OutOfRangeError`` once it is empty. Files without records are passed over.

        Args:
          queue: any object whose ``dequeue()`` returns a file name (bytes or str), such as the
            queue from ``string_input_producer``.

        Raises:
          OutOfRangeError: from ``queue.dequeue()``: no file is left (the normal end).
          NotFoundError: the dequeued file does not exist; the next call takes the next file.
          DataLossError: the file is damaged (see each reader). The file stays current and
            every later call raises again, until :meth:`reset`.
        """
        try:
            return self._ahead.popleft()  # taken ahead by an earlier call: no lock needed
        except IndexError:
            keys, values = self._read(queue, 1)
            return keys[0], values[0]

    def read_up_to(self, queue, num_records: int) -> Tuple[np.ndarray, np.ndarray]:
        """Returns up to ``num_records`` records, all from one file, as two object arrays.

        Fewer come back at the end of a file, as in TensorFlow; it never returns none (it
        moves on to the next file instead), and blocks as :meth:`read` does.

        Returns:
          ``(keys, values)``: 1-D NumPy object arrays of bytes of equal length.

        Raises:
          ValueError: ``num_records`` is not a positive integer.
          The errors of :meth:`read`.
        """
        if isinstance(num_records, bool) or int(num_records) != num_records or num_records < 1:
            raise ValueError(f"num_records must be a positive integer, got {num_records!r}")
        keys, values = self._read(queue, int(num_records))
        return _object_array(keys), _object_array(values)

    def _read_values(self, queue, num_records: int) -> np.ndarray:
        """:meth:`read_up_to`'s values alone, without making their keys (for a caller that
        has no use for them, such as ``read_batch_features`` with a ``parse_fn``)."""
        return _object_array(self._read(queue, num_records, keyed=False)[1])

    # The counters are read without the lock (reading an int is atomic), so a monitor never
    # waits behind a reader thread that is blocked on its queue.

    def num_records_produced(self) -> int:
        """The records this reader returned since it was made or reset. Never blocks."""
        return self._records_produced - len(self._ahead)

    def num_work_units_completed(self) -> int:
        """The files this reader finished since it was made or reset. Never blocks."""
        return self._work_units_completed

    def reset(self) -> None:
        """Drops the current file and zeroes the counters; the next read dequeues a file."""
        with self._lock:
            if self._work is not None:
                self._finish_work()
            self._records_produced = 0
            self._work_units_completed = 0
            self._reset()

    def __repr__(self):
        return f"<{type(self).__name__} {self._name!r}>"


def _object_array(items: List[bytes]) -> np.ndarray:
    out = object_array(len(items))
    set_objects(out, None, items, None)  # (NumPy's out[:] = items looks into each item)
    return out


def _pure_format_keys(prefix: bytes, positions: List[int]) -> List[bytes]:
    """The keys ``b"<file>:<position>"`` of records at ``positions`` in the file ``prefix``.

    All are formatted by one ``%`` and cut apart at NUL bytes, which a local file name cannot
    hold: about half the cost of formatting each key on its own.
    """
    key = prefix.replace(b"%", b"%%") + b":%d"
    if not positions or b"\0" in prefix:
        return list(map(key.__mod__, positions))
    return (((key + b"\0") * (len(positions) - 1) + key) % tuple(positions)).split(b"\0")


# The keys of a list of positions: the compiled core's format_keys when it is loaded (one C
# pass, without the pure way's split of one formatted whole), else the pure twin. Both give
# the same keys (tests/test_core.py).
_format_keys: Callable[[bytes, List[int]], List[bytes]] = (
    core.format_keys if core is not None else _pure_format_keys)


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files, as TF's ``tf.compat.v1.TFRecordReader``.

    Keys are ``b"<file>:<byte offset of the record>"`` (offsets in the uncompressed stream).
    Both checksums of every record are checked; :meth:`read_up_to` cuts many records out of
    the read-ahead buffer at once.

    A file may be read while a writer appends to it, and read again (its name enqueued again)
    to follow it: with ``corrupt_records="skip"``, a record cut short by the end of the file
    (a writer caught mid-record) is counted and logged as damage only once it is known to be:
    when the queue ends (``OutOfRangeError``; with ``read_batch_features``, when its epochs are
    all read or it is closed) or the reader is reset, if the file did not grow since. It then counts once per pass that ended on it; a later pass that reads it whole
    forgets it. With ``"raise"`` it raises ``DataLossError`` at once, as in TensorFlow.

    Args:
      name: a name for messages.
      options: compression: a ``TFRecordOptions``, ``"GZIP"``, ``"ZLIB"``, ``""`` or None.
      corrupt_records: ``"raise"`` (default, as TF): damage raises ``DataLossError`` naming
        the file and byte offset, and every later read raises it again (the reader never moves
        silently past damage; ``reset()`` drops the file). ``"skip"``: damaged records are
        logged, counted in :meth:`num_records_skipped` and passed over; every intact record
        is delivered.
    """

    def __init__(self, name: Optional[str] = None, options=None,
                 corrupt_records: str = "raise"):
        super().__init__(name)
        self._compression = TFRecordOptions.get_compression_type_string(options)
        self._corrupt_records = check_corrupt_records(corrupt_records)
        self._scanner: Optional[RecordScanner] = None
        self._skipped_before = 0  # skips in files already closed
        self._skipped = 0  # skips in all files, kept current for num_records_skipped()
        # By path: the record the last pass over the file found cut short by its end, not
        # known as damage yet, and how many passes ended on it, the file not growing between.
        self._tails: Dict[str, Tuple[CutShort, int]] = {}

    def _start(self, filename) -> None:
        self._scanner = RecordScanner(filename, self._compression, self._corrupt_records,
                                      follow=True)

    def _read_records(self, n: int) -> Records:
        return self._scanned(lambda scanner: scanner.next_columns(n))

    def _read_framed(self, n: int) -> Tuple[List[int], List[Any], bool]:
        if type(self)._read_records is not TFRecordReader._read_records:
            return super()._read_framed(n)  # (a subclass's records: a shard's, say)
        return self._scanned(lambda scanner: scanner.next_framed(n))

    def _scanned(self, take: Callable[[RecordScanner], Tuple[Any, Any]]) -> Tuple[Any, Any, bool]:
        """What ``take`` reads from the current file's scanner, its skips counted, and
        whether the file is finished."""
        scanner = _current(self._scanner)
        try:
            positions, values = take(scanner)
        finally:
            self._skipped = self._skipped_before + scanner.skipped
        return positions, values, scanner.finished

    def _records_end(self) -> int:
        return _current(self._scanner).offset

    def _seek(self, position: int) -> bool:
        scanner = _current(self._scanner)
        self._scanner = RecordScanner(scanner.path, self._compression, self._corrupt_records,
                                      offset=position, follow=True)
        scanner.close()
        return True

    def _stop(self) -> None:
        scanner = _current(self._scanner)
        if scanner.finished:
            self._note_tail(scanner)
        self._skipped_before += scanner.skipped
        scanner.close()
        self._scanner = None

    def _note_tail(self, scanner: RecordScanner) -> None:
        """After a pass to the end of a file: remembers the record it found cut short there,
        or forgets the one an earlier pass found (this pass read past it)."""
        tail = scanner.take_cut_short()
        if tail is None:
            self._tails.pop(scanner.path, None)
            return
        seen, passes = self._tails.get(scanner.path, (None, 0))
        same = seen is not None and (seen.offset, seen.size) == (tail.offset, tail.size)
        self._tails[scanner.path] = (tail, passes + 1 if same else 1)

    def _settle_tails(self) -> None:
        """The reader reads no more: a record still cut short at the end of a file that did not
        grow since is damage, counted and logged once per pass that ended on it."""
        tails, self._tails = self._tails, {}
        for path, (tail, passes) in tails.items():
            if stored_size(path) != tail.size:
                continue  # grown (or gone) since: a writer was still on it
            for _ in range(passes):
                logger.warning("skipping damaged data: %s", tail.message)
            self._count_skipped(passes)

    def _input_ended(self) -> None:
        self._settle_tails()

    def num_records_skipped(self) -> int:
        """Damaged stretches passed over with ``corrupt_records="skip"`` since made or reset.

        Each is one record whose data checksum failed, or one run of bytes up to the next
        valid header, or a truncated end (counted when the queue ends or the reader is reset,
        if the file did not grow since: see the class). Never blocks.
        """
        return self._skipped

    def _count_skipped(self, n: int) -> None:
        """Counts ``n`` damaged records passed over by someone reading for this reader (the
        global shuffle reads its files by offset)."""
        self._skipped_before += n
        self._skipped += n

    def _reset(self) -> None:
        self._settle_tails()
        self._skipped_before = self._skipped = 0


class TextLineReader(ReaderBase):
    """Reads the lines of text files, as TF's ``tf.compat.v1.TextLineReader``.

    Values are the lines without their ``"\\n"`` (or ``"\\r\\n"``); a last line without a
    newline counts, an empty end does not. Keys are ``b"<file>:<line number>"``, 1-based and
    counting the skipped header lines.

    Args:
      skip_header_lines: lines to skip at the start of each file (None or 0: none).
      name: a name for messages.
    """

    def __init__(self, skip_header_lines: Optional[int] = None, name: Optional[str] = None):
        super().__init__(name)
        if skip_header_lines is not None and (
                int(skip_header_lines) != skip_header_lines or skip_header_lines < 0):
            raise ValueError(
                f"skip_header_lines must be a non-negative integer, got {skip_header_lines!r}")
        self._skip_header_lines = int(skip_header_lines or 0)
        self._in: Optional[ReadBuffer] = None
        self._line = 0

    def _start(self, filename) -> None:
        self._in = ReadBuffer(filename)
        self._line = 0
        for _ in range(self._skip_header_lines):
            if self._next_line() is None:
                break

    def _next_line(self) -> Optional[bytes]:
        b = _current(self._in)
        searched = 0  # bytes after b.pos already known to hold no newline
        while True:
            newline = b.buf.find(b"\n", b.pos + searched, b.end)
            if newline >= 0:
                line = bytes(b.view[b.pos:newline])
                b.pos = newline + 1
                break
            searched = b.available
            if not b.fill(b.available + 1):
                if not b.available:
                    return None
                line = bytes(b.view[b.pos:b.end])
                b.pos = b.end
                break
        self._line += 1
        return line[:-1] if line.endswith(b"\r") else line

    def _read_records(self, n: int) -> Records:
        lines: List[int] = []
        values: List[bytes] = []
        while len(values) < n:
            line = self._next_line()
            if line is None:
                return lines, values, True
            lines.append(self._line)
            values.append(line)
        return lines, values, False

    def _stop(self) -> None:
        _current(self._in).close()
        self._in = None


class FixedLengthRecordReader(ReaderBase):
    """Reads fixed-size records, as TF's ``tf.compat.v1.FixedLengthRecordReader``.

    Each file is ``header_bytes``, then records of ``record_bytes`` starting every
    ``hop_bytes``, then ``footer_bytes``: record ``i`` starts at ``header_bytes + i * hop_bytes``
    and exists when it and the footer fit in the file. Keys are ``b"<file>:<record index>"``.

    Args:
      record_bytes: the size of a record (> 0).
      header_bytes: bytes to skip at the start of each file (None: 0).
      footer_bytes: bytes to ignore at the end of each file (None: 0).
      hop_bytes: the distance between record starts (None or 0: ``record_bytes``, so records
        are contiguous; smaller values give overlapping records).
      name: a name for messages.
      encoding: None, ``"ZLIB"`` or ``"GZIP"``: the whole file is compressed, and header,
        records and footer are counted in its uncompressed bytes.
    """

    def __init__(self, record_bytes: int, header_bytes: Optional[int] = None,
                 footer_bytes: Optional[int] = None, hop_bytes: Optional[int] = None,
                 name: Optional[str] = None, encoding: Optional[str] = None):
        super().__init__(name)
        for arg, value, least in (("record_bytes", record_bytes, 1),
                                  ("header_bytes", header_bytes or 0, 0),
                                  ("footer_bytes", footer_bytes or 0, 0),
                                  ("hop_bytes", hop_bytes or 0, 0)):
            if isinstance(value, bool) or int(value) != value or value < least:
                raise ValueError(f"{arg} must be an integer >= {least}, got {value!r}")
        if encoding not in (None, "", "ZLIB", "GZIP"):
            raise ValueError(f"encoding must be None, 'ZLIB' or 'GZIP', got {encoding!r}")
        self._record_bytes = int(record_bytes)
        self._header_bytes = int(header_bytes or 0)
        self._footer_bytes = int(footer_bytes or 0)
        self._hop_bytes = int(hop_bytes or 0) or self._record_bytes
        self._encoding = encoding or ""
        self._in: Optional[ReadBuffer] = None
        self._index = 0

    def _start(self, filename) -> None:
        self._in = ReadBuffer(filename, self._encoding)
        self._index = 0
        self._advance = self._header_bytes  # bytes to pass before the next record starts

    def _read_records(self, n: int) -> Records:
        b = _current(self._in)
        size = self._record_bytes
        indices: List[int] = []
        values: List[bytes] = []
        while len(values) < n:
            if not b.fill(self._advance + size + self._footer_bytes):
                if b.damage:
                    raise DataLossError(
                        f"{b.damage}, reading record {self._index} in file '{b.path}'",
                        path=b.path, offset=b.offset)
                return indices, values, True
            b.pos += self._advance
            self._advance = self._hop_bytes
            values.append(bytes(b.view[b.pos:b.pos + size]))
            indices.append(self._index)
            self._index += 1
        return indices, values, False

    def _stop(self) -> None:
        _current(self._in).close()
        self._in = None


class WholeFileReader(ReaderBase):
    """Reads each file as one record, as TF's ``tf.compat.v1.WholeFileReader``.

    The key is the file name (as bytes), the value its whole content.

    Args:
      name: a name for messages.
    """

    def __init__(self, name: Optional[str] = None):
        super().__init__(name)
        self._file: Optional[IO[bytes]] = None

    def _start(self, filename) -> None:
        self._file = open_file(filename, "rb")

    def _read_records(self, n: int) -> Records:
        return [0], [_current(self._file).read()], True

    def _keys(self, positions: List[int]) -> List[bytes]:
        return [self._key_prefix] * len(positions)  # the key is the file name alone

    def _stop(self) -> None:
        _current(self._file).close()
        self._file = None


class IdentityReader(ReaderBase):
    """Gives each work item of its queue as one record, as TF's ``tf.compat.v1.IdentityReader``:
    key and value are both the item (as bytes). Opens no file; a way to see the reader
    machinery (the work loop, its counters) at work, or to pass names through a reader stage.

    Args:
      name: a name for messages.
    """

    def _start(self, filename) -> None:
        pass

    def _read_records(self, n: int) -> Records:
        return [0], [self._key_prefix], True

    def _keys(self, positions: List[int]) -> List[bytes]:
        return [self._key_prefix] * len(positions)  # the key is the work item alone

    def _stop(self) -> None:
        pass


# The most bytes asked of a file at once where its own header gives the size: a length
# checksum can be forged, and what a crafted length costs is then the file's size, never more.
_READ_PIECE = 1 << 24


def _read_up_to(f: IO[bytes], n: int) -> bytes:
    """Up to ``n`` bytes of ``f``, fewer at its end, asked for in pieces of at most
    ``_READ_PIECE``."""
    pieces = []
    while n > 0:
        piece = f.read(min(n, _READ_PIECE))
        if not piece:
            break
        pieces.append(piece)
        n -= len(piece)
    return b"".join(pieces)


class KeyedRecordReader(ReaderBase):
    """Reads the one TFRecord each work item of its queue names by its key,
    ``b"<file>:<byte offset>"``: the keys ``TFRecordReader`` gives, and the items of
    :func:`~queuepipe.producers.record_position_producer` (a dataset's records in a global
    random order). Key and value are the item and the record's data, both checksums
    checked. Each read opens the file, reads the record and closes the file.

    Usage::

        keys = qp.train.record_position_producer("data/*.tfrecord", num_epochs=1, seed=0)
        reader = qp.KeyedRecordReader()
        def example():
            _, serialized = reader.read(keys)
            return qp.io.parse_single_example(serialized, features)

    Args:
      name: a name for messages.

    Raises:
      (from reads) InvalidArgumentError: an item is not ``<file>:<offset>``.
      DataLossError: the record there is damaged or cut short (the message names the file
      and the offset). NotFoundError: the file does not exist.
    """

    def _start(self, filename) -> None:
        path, colon, offset = os.fsencode(filename).rpartition(b":")
        if not colon or not offset.isdigit():
            raise InvalidArgumentError(f"{self._name}: a work item is a record's key "
                                       f"b'<file>:<offset>', got {filename!r}")
        self._path, self._offset = os.fsdecode(path), int(offset)

    def _read_records(self, n: int) -> Records:
        with open_file(self._path) as f:
            f.seek(self._offset)
            header = f.read(HEADER_BYTES)
            size = len(header)
            if size == HEADER_BYTES:
                length, length_crc = _HEADER.unpack(header)
                if masked_crc32c(header[:8]) != length_crc:
                    raise DataLossError(
                        f"corrupted record at {self._offset}: length checksum mismatch in "
                        f"file '{self._path}'", path=self._path, offset=self._offset)
                size = length + FRAME_BYTES
            frame = header + _read_up_to(f, size - len(header))
        if len(frame) < size:  # also a length past int64, which no array holds
            raise DataLossError(f"truncated record at {self._offset}: the record needs {size} "
                                f"bytes, the file holds {len(frame)} from there, in file "
                                f"'{self._path}'", path=self._path, offset=self._offset)
        records = unframe_many([frame], np.array([size]), lambda i: (self._path, self._offset))
        return [self._offset], [records[0]], True

    def _keys(self, positions: List[int]) -> List[bytes]:
        return [self._key_prefix] * len(positions)  # the key is the work item itself

    def _stop(self) -> None:
        pass
