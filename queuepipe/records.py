"""TFRecord files: compression options, a writer, and one buffered record scanner.

A TFRecord file is a sequence of records, each framed as (:mod:`queuepipe._frames`)::

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

little-endian, with ``masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2**32)``.
GZIP and ZLIB compress the whole stream, not single records; offsets (in reader keys and in
error messages) count bytes of the uncompressed stream, as TensorFlow's do.

Reading goes through :class:`RecordScanner`: it reads large chunks, parses frames out of its
buffer, checks both checksums of every record and hands out ``(offset, data)`` pairs one at a
time or in bulk (:meth:`RecordScanner.next_batch`). :func:`tf_record_iterator` and
``queuepipe.readers.TFRecordReader`` both use it. Damage raises :class:`DataLossError` naming
the file and byte offset, or, with ``corrupt_records="skip"``, is logged, counted and skipped.
Where the compiled core is loaded (``queuepipe._core``), the intact records of a buffer are
taken by one C call without the GIL; the record at which it stops, damaged or incomplete, goes
through the same Python code as on the pure path, which builds every error.

Paths with a protocol (``s3://``, ``gs://``, ``memory://``, ...) are opened with fsspec
(``pip install '<queuepipe checkout>[remote]'``); plain paths with the builtin ``open``.
"""

from __future__ import annotations

import enum
import logging
import os
import zlib
from typing import IO, Any, Iterator, List, NamedTuple, Optional, Tuple, Union, cast

import numpy as np

from queuepipe._frames import (  # noqa: F401 - frame, masked_crc32c: public here too
    _FOOTER, _HEADER, _LENGTH, _MASK_DELTA, _MIN_RUN, FRAME_BYTES, HEADER_BYTES, _crc,
    _data_intact, _header_matches, _length_checks_out, _mixed_run_checks_out, _run_checks_out,
    frame, masked_crc32c)
from queuepipe._core import core
from queuepipe._streams import CHUNK, ReadBuffer
from queuepipe.errors import DataLossError, FailedPreconditionError
from queuepipe.remote import open_file

__all__ = ["TFRecordWriter", "tf_record_iterator", "TFRecordOptions", "TFRecordCompressionType"]

logger = logging.getLogger(__name__)

# The compiled core's scans of a buffer of frames (see RecordScanner._take_buffered), or None.
_scan_frames = core.scan_frames if core else None
_scan_region = core.scan_region if core else None
_cut_frames = core.cut_frames if core else None  # (the records of _scan_region's pieces)

PathLike = Union[str, bytes, "os.PathLike[str]"]

_CORRUPT_POLICIES = ("raise", "skip")
_RESYNC_FIRST_WINDOW = 64  # bytes searched for a header first after damage (then doubled)


def check_corrupt_records(policy: str) -> str:
    """Returns ``policy`` if it is a ``corrupt_records`` policy ("raise" or "skip").

    Raises:
      ValueError: any other value.
    """
    if policy not in _CORRUPT_POLICIES:
        raise ValueError(f"corrupt_records must be 'raise' or 'skip', got {policy!r}")
    return policy


# ---------------------------------------------------------------------------------------------
# Options


class TFRecordCompressionType(enum.IntEnum):
    """The compression of a TFRecord file, as TF's ``tf.io.TFRecordCompressionType``."""

    NONE = 0
    ZLIB = 1
    GZIP = 2


class TFRecordOptions:
    """How a TFRecord file is compressed, as TF's ``tf.io.TFRecordOptions``.

    Args:
      compression_type: ``None`` or ``""`` (none), ``"ZLIB"``, ``"GZIP"``, or a
        :class:`TFRecordCompressionType`.
      compression_level: 0 (none) to 9 (best), or -1/``None`` for zlib's default; only used
        when writing a compressed file.
      flush_mode: the zlib flush mode after each record written (``zlib.Z_NO_FLUSH``, the
        default, ``Z_PARTIAL_FLUSH``, ``Z_SYNC_FLUSH``, ``Z_FULL_FLUSH``); a sync flush makes
        every record readable as soon as it is written, at some cost in size.
      input_buffer_size, output_buffer_size: accepted as TF takes them; queuepipe sizes its
        own buffers (1 MiB reads), so they change nothing.
      window_bits: zlib's window, 8 to 15 (the default); writing only.
      compression_method: zlib's method; only ``zlib.DEFLATED`` (8) exists.
      mem_level: zlib's memory level, 1 to 9 (the default, as TF's).
      compression_strategy: zlib's strategy (``zlib.Z_DEFAULT_STRATEGY``, ``Z_FILTERED``,
        ``Z_HUFFMAN_ONLY``, ``Z_RLE``, ``Z_FIXED``).

    Raises:
      ValueError: an unknown compression type, or a zlib setting outside its range (the
        message names it and the value).
    """

    compression_type_map = {
        TFRecordCompressionType.ZLIB: "ZLIB",
        TFRecordCompressionType.GZIP: "GZIP",
        TFRecordCompressionType.NONE: "",
    }

    def __init__(self, compression_type=None, compression_level: Optional[int] = None, *,
                 flush_mode: Optional[int] = None, input_buffer_size: Optional[int] = None,
                 output_buffer_size: Optional[int] = None, window_bits: Optional[int] = None,
                 compression_method: Optional[int] = None, mem_level: Optional[int] = None,
                 compression_strategy: Optional[int] = None):
        self.compression_type = self.get_compression_type_string(compression_type)
        if compression_level is not None and not -1 <= compression_level <= 9:
            raise ValueError(f"compression_level must be -1..9 or None, got {compression_level!r}")
        self.compression_level = compression_level
        self.flush_mode = _zlib_setting("flush_mode", flush_mode, _FLUSH_MODES)
        self.input_buffer_size = _zlib_setting("input_buffer_size", input_buffer_size, None)
        self.output_buffer_size = _zlib_setting("output_buffer_size", output_buffer_size, None)
        self.window_bits = _zlib_setting("window_bits", window_bits, range(8, 16))
        self.compression_method = _zlib_setting("compression_method", compression_method,
                                                (zlib.DEFLATED,))
        self.mem_level = _zlib_setting("mem_level", mem_level, range(1, 10))
        self.compression_strategy = _zlib_setting("compression_strategy", compression_strategy,
                                                  range(0, 5))

    @classmethod
    def get_compression_type_string(cls, options) -> str:
        """Returns ``""``, ``"ZLIB"`` or ``"GZIP"`` for options, a type, a string or ``None``.

        Raises:
          ValueError: ``options`` names no known compression.
        """
        if not options:
            return ""
        if isinstance(options, TFRecordOptions):
            return options.compression_type
        if isinstance(options, str) and options in cls.compression_type_map.values():
            return options
        if isinstance(options, int) and options in cls.compression_type_map:
            return cls.compression_type_map[TFRecordCompressionType(options)]
        raise ValueError(f'Not a valid compression_type: "{options}"')

    def __repr__(self):
        settings = ", ".join(f"{name}={getattr(self, name)!r}" for name in (
            "flush_mode", "input_buffer_size", "output_buffer_size", "window_bits",
            "compression_method", "mem_level", "compression_strategy")
            if getattr(self, name) is not None)
        return (f"TFRecordOptions(compression_type={self.compression_type!r}, "
                f"compression_level={self.compression_level!r}{', ' if settings else ''}"
                f"{settings})")


_FLUSH_MODES = (zlib.Z_NO_FLUSH, zlib.Z_PARTIAL_FLUSH, zlib.Z_SYNC_FLUSH, zlib.Z_FULL_FLUSH)


def _zlib_setting(name: str, value: Optional[int], allowed) -> Optional[int]:
    """``value`` checked against ``allowed`` (None: any positive int); None stays None."""
    if value is None:
        return None
    ok = isinstance(value, int) and not isinstance(value, bool) and (
        value in allowed if allowed is not None else value > 0)
    if not ok:
        wanted = "a positive int" if allowed is None else f"one of {list(allowed)}"
        raise ValueError(f"TFRecordOptions: {name} must be {wanted} or None, got {value!r}")
    return value


def _as_options(options) -> TFRecordOptions:
    return options if isinstance(options, TFRecordOptions) else TFRecordOptions(options)


# ---------------------------------------------------------------------------------------------
# Writing


class TFRecordWriter:
    """Writes records to a TFRecord file, as TF's ``tf.io.TFRecordWriter``.

    Uncompressed output is byte-identical to TensorFlow's. Use it as a context manager, or
    call :meth:`close` (idempotent) when done.

    Args:
      path: the file to create (overwritten if it exists); a path with a protocol is
        written through fsspec.
      options: a :class:`TFRecordOptions`, a compression type string or enum, or None.
    """

    def __init__(self, path: PathLike, options=None):
        self._path = os.fsdecode(path)
        options = _as_options(options)
        self._file: Optional[IO[bytes]] = open_file(self._path, "wb")
        self._compressor = None
        self._flush_mode = options.flush_mode or zlib.Z_NO_FLUSH
        if options.compression_type:
            level = -1 if options.compression_level is None else options.compression_level
            wbits = options.window_bits or 15
            self._compressor = zlib.compressobj(
                level, zlib.DEFLATED, wbits + 16 if options.compression_type == "GZIP" else wbits,
                options.mem_level or 9, options.compression_strategy or zlib.Z_DEFAULT_STRATEGY)

    @property
    def path(self) -> str:
        return self._path

    def write(self, record: Union[bytes, str]) -> None:
        """Appends one record (bytes; a str is written as UTF-8).

        Raises:
          FailedPreconditionError: the writer is closed (also a ValueError).
        """
        if isinstance(record, str):
            record = record.encode("utf-8")
        self._write(frame(record))

    def _write(self, data: bytes) -> None:
        if self._file is None:
            raise FailedPreconditionError(
                f"write to a closed TFRecordWriter for '{self._path}': the file is already "
                f"closed")
        if self._compressor is not None:
            data = self._compressor.compress(data)
            if self._flush_mode != zlib.Z_NO_FLUSH:
                data += self._compressor.flush(self._flush_mode)
        self._file.write(data)

    def flush(self) -> None:
        """Pushes everything written so far to the file (a compressed stream is sync-flushed)."""
        if self._file is None:
            raise FailedPreconditionError(
                f"flush of a closed TFRecordWriter for '{self._path}': the file is already "
                f"closed")
        if self._compressor is not None:
            self._file.write(self._compressor.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def fileno(self) -> int:
        """The OS file descriptor (plain local files only), e.g. for ``os.fsync``.

        Raises:
          FailedPreconditionError: the writer is closed (also a ValueError).
        """
        if self._file is None:
            raise FailedPreconditionError(
                f"fileno of a closed TFRecordWriter for '{self._path}': the file is already "
                f"closed")
        return self._file.fileno()

    def __repr__(self) -> str:
        compression = "uncompressed" if self._compressor is None else "compressed"
        return (f"<TFRecordWriter '{self._path}' {compression}, "
                f"{'closed' if self._file is None else 'open'}>")

    def close(self) -> None:
        """Finishes the compressed stream, if any, and closes the file. Idempotent."""
        if self._file is None:
            return
        f, self._file = self._file, None
        try:
            if self._compressor is not None:
                f.write(self._compressor.flush(zlib.Z_FINISH))
        finally:
            f.close()

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Reading


class CutShort(NamedTuple):
    """A record of a followed file cut short by the end of the data read so far: damage, or a
    record a writer is still writing."""

    offset: int
    message: str  # what it is, as a damage message
    size: Optional[int]  # the file's stored size when it was found so (None: not known)


def unframed(pieces: List[Any]) -> List[bytes]:
    """The records of what :meth:`RecordScanner.next_framed` gave: a record (``bytes``) as it
    is, a copy of frames cut into the records it holds (the core's ``cut_frames``)."""
    records: List[bytes] = []
    for piece in pieces:
        if type(piece) is bytes:
            records.append(piece)
        else:  # (only the core's scan_region makes the other pieces)
            records += cast(Any, _cut_frames)(piece)
    return records


class RecordScanner:
    """Reads the records of one TFRecord file in order, checking both checksums of each.

    The file is read in large chunks; records are cut out of the buffer. Not thread-safe: a
    reader that shares one scanner between threads holds its own lock around the calls.

    Args:
      path: the file (a protocol path goes through fsspec).
      options: compression, as for :class:`TFRecordOptions`.
      corrupt_records: ``"raise"`` (default): damage raises :class:`DataLossError`, and every
        later call raises it again. ``"skip"``: a record whose data checksum fails is skipped;
        after a header whose length checksum fails the scanner resynchronises at the next
        offset where a valid header starts; a truncated end or a broken compressed stream ends
        the file. Each skip is logged (``queuepipe.records`` logger) and counted in
        :attr:`skipped`.
      offset: where to start, a record's offset in the uncompressed stream (as the scanner
        gives them; for a compressed file, reading starts at the beginning and passes over
        the bytes before).
      follow: the file may still be growing (as after :meth:`look_again`): with ``"skip"``,
        a record cut short by the end of the data is not counted or logged at once (see
        :meth:`take_cut_short`).

    Raises:
      NotFoundError: the file does not exist.
      DataLossError: ``offset`` lies past the end of the data.
      ValueError: an unknown ``corrupt_records`` policy or compression.
    """

    def __init__(self, path: PathLike, options=None, corrupt_records: str = "raise",
                 offset: int = 0, follow: bool = False):
        self._skip = check_corrupt_records(corrupt_records) == "skip"
        self._in = ReadBuffer(path, TFRecordOptions.get_compression_type_string(options), offset)
        self.path = self._in.path
        self._error: Optional[DataLossError] = None
        self._error_at_end = False  # the error is a record cut short by the end of the data
        self._done = False  # the end of the file is reached (or damage in skip mode ends it)
        self.skipped = 0
        # Followed (look_again called, or follow): a record cut short by the end, in skip mode,
        # is not damage yet (a writer may be completing it); held here until the scanner reads
        # past it, is closed, or a caller takes it (take_cut_short).
        self._following = follow
        self._cut_short: Optional[CutShort] = None

    # -- damage ---------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        """True once the end of the file is reached; never while damage waits to be raised."""
        return self._done

    @property
    def offset(self) -> int:
        """The offset of the next record to read (in the uncompressed stream)."""
        return self._in.offset

    @property
    def unfinished(self) -> bool:
        """True when the data read so far ends inside a compressed stream, before its end
        marker (a file still being written, or cut short)."""
        return self._in.unfinished

    def look_again(self) -> None:
        """For a reader following a file that grows: forgets that the end of the data was
        reached, and a record found cut short there (a writer may be completing it), so that
        the next call reads on from the first record not returned. Damage inside the data
        stays, and is raised again. With ``corrupt_records="skip"``, a record found cut short
        there is counted and logged only if it still is when the scanner is closed."""
        self._following = True
        self._done = False
        if self._error_at_end:
            self._error, self._error_at_end = None, False

    def _damage(self, offset: int, what: str, at_end: bool = False) -> None:
        """Raises (policy "raise") or logs and counts (policy "skip") damage at ``offset``;
        ``at_end``: a record cut short by the end of the data read so far."""
        damage = self._in.damage
        if damage:
            what, at_end = f"{damage}, reading the record at {offset}", False
        elif at_end and self._in.unfinished:
            what += " (the compressed stream ends there without its end marker: a file still " \
                    "being written, or cut short)"
        message = f"{what} in file '{self.path}'"
        if not self._skip:
            self._error = DataLossError(message, path=self.path, offset=offset)
            self._error_at_end = at_end
            raise self._error
        if at_end and self._following:
            self._cut_short = CutShort(offset, message, self._in.file_size())
            return
        self.skipped += 1
        logger.warning("skipping damaged data: %s", message)

    def _resync(self) -> None:
        """Moves to the next offset after the current one where a valid header starts.

        Looks in windows that start small and double up to a chunk, so that finding a
        header ``d`` bytes on costs of the order of ``d``, never of the read-ahead: a file of
        damaged units each a few bytes apart is passed over in time linear in its size.
        """
        b = self._in
        b.pos += 1
        span = _RESYNC_FIRST_WINDOW
        while True:
            more = b.fill(span + HEADER_BYTES - 1)  # moves at most what a window holds
            window = b.view[b.pos:min(b.end, b.pos + span + HEADER_BYTES - 1)]
            found = _header_matches(window)
            if len(found):
                b.pos += int(found[0])
                return
            if not more:  # no header before the end: the rest of the file is damage
                b.pos = b.end
                return
            b.pos += len(window) - HEADER_BYTES + 1
            span = min(2 * span, CHUNK)

    # -- records --------------------------------------------------------------------------

    def _next_checked(self) -> Optional[Tuple[int, bytes]]:
        """The general path: one record with every check, or None at the end of the file."""
        b = self._in
        while not self._done:
            offset = b.offset
            if not b.fill(HEADER_BYTES):
                if b.available or b.damage:
                    self._damage(offset, f"truncated record header at {offset}: the file ends "
                                 f"{b.available} bytes into the {HEADER_BYTES}-byte header",
                                 at_end=True)
                self._done = True
                return None
            length, length_crc = _HEADER.unpack_from(b.buf, b.pos)
            if masked_crc32c(b.buf[b.pos:b.pos + 8]) != length_crc:
                self._damage(offset, f"corrupted record at {offset}: length checksum mismatch "
                             "(Is this even a TFRecord file?)")
                self._resync()
                continue
            need = length + FRAME_BYTES
            remaining = b.remaining(need)
            if (remaining is not None and need > remaining) or not b.fill(need):
                rest = b.available if remaining is None else remaining
                self._damage(offset, f"truncated record at {offset}: the record needs {need} "
                             f"bytes (data length {length}) but the file ends after {rest}",
                             at_end=True)
                self._done = True  # the file ends inside this record
                return None
            start = b.pos + HEADER_BYTES
            data = bytes(b.view[start:start + length])
            (data_crc,) = _FOOTER.unpack_from(b.buf, start + length)
            b.pos += need
            actual = masked_crc32c(data)
            if actual != data_crc:
                # Like TensorFlow, name the offset of the data whose checksum failed.
                self._damage(offset + HEADER_BYTES,
                             f"corrupted record at {offset + HEADER_BYTES}: data checksum "
                             f"mismatch (stored 0x{data_crc:08x}, computed 0x{actual:08x} over "
                             f"{length} data bytes of the record at {offset})")
                continue
            return offset, data
        return None

    def _take_buffered(self, offsets: List[int], values: List[Any], n: int,
                       framed: bool = False) -> None:
        """The fast path: appends intact records lying wholly in the buffer, up to ``n``.

        A record as long as the one before it starts a run of equal-length records, which
        :meth:`_take_run` checks together; one of another length starts a run of records of
        any lengths (ragged data), :meth:`_take_mixed`. Stops, without consuming it, at the
        first record that is incomplete or fails a check; :meth:`_next_checked` then deals
        with it.

        With the compiled core, one C call does all of it, without the GIL, and stops at the
        same record; ``framed``, it appends the records' frames as one piece, a copy of them
        all, for :func:`unframed` to cut into records later (see :meth:`next_framed`), but
        for records of 16 KiB or more on average, which it appends as they are.
        """
        scan = _scan_region if framed else _scan_frames
        if scan is not None:
            b = self._in
            taken_offsets, taken, b.pos, _ = scan(b.buf, b.pos, b.end, n - len(offsets), b.base)
            offsets.extend(taken_offsets)
            if type(taken) is list:  # (records: scan_frames', or scan_region's of long ones)
                values.extend(taken)
            elif taken_offsets:
                values.append(taken)
            return
        buf, view, pos, base = self._in.buf, self._in.view, self._in.pos, self._in.base
        size = self._in.end
        unpack_header, unpack_footer, crc = _HEADER.unpack_from, _FOOTER.unpack_from, _crc
        previous = -1  # the length of the record before, when it was taken one by one
        while len(values) < n:
            if pos + HEADER_BYTES > size:
                break
            length, length_crc = unpack_header(buf, pos)
            if previous >= 0 and n - len(values) >= _MIN_RUN:
                if length == previous:
                    taken = self._take_run(offsets, values, n, pos, length) * (length + FRAME_BYTES)
                else:
                    taken = self._take_mixed(offsets, values, n, pos)
                previous = -1
                if taken:
                    pos += taken
                    continue
            c = crc(buf[pos:pos + 8])
            if (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF != length_crc:
                break
            start = pos + HEADER_BYTES
            end = start + length
            if end + 4 > size:
                break
            data = bytes(view[start:end])
            c = crc(data)
            if (((c >> 15) | (c << 17)) + _MASK_DELTA) & 0xFFFFFFFF != unpack_footer(buf, end)[0]:
                break
            offsets.append(base + pos)
            values.append(data)
            pos = end + 4
            previous = length
        self._in.pos = pos

    def _take_run(self, offsets: List[int], values: List[bytes], n: int, pos: int,
                  length: int) -> int:
        """Appends the intact records of ``length`` data bytes lying back to back from ``pos``
        in the buffer, up to ``n`` in ``values``; returns how many (0 when fewer than _MIN_RUN).

        Their headers must equal the first one byte for byte, so one length checksum checks
        them all; their data checksums are checked together by :func:`_run_checks_out`, and
        one by one only when that fails, to find the first damaged record. The run ends before
        the first record that differs, is incomplete or fails a check, for the one-by-one path
        to handle.
        """
        buf, stride = self._in.buf, length + FRAME_BYTES
        count = min(n - len(values), (self._in.end - pos) // stride)
        if count < _MIN_RUN:
            return 0
        frames = np.frombuffer(buf, dtype=np.uint8, count=count * stride,
                               offset=pos).reshape(count, stride)
        same = (frames[:, :HEADER_BYTES] == frames[0, :HEADER_BYTES]).all(axis=1)
        if not same.all():
            count = int(same.argmin())
        if count < _MIN_RUN or masked_crc32c(buf[pos:pos + 8]) != _HEADER.unpack_from(buf, pos)[1]:
            return 0
        # A void view's tolist() cuts one bytes object per record in one C loop (no slice
        # objects).
        records = frames[:count, HEADER_BYTES:HEADER_BYTES + length].view(f"V{length}")[:, 0] \
            .tolist() if length else [b""] * count
        if not _run_checks_out(frames[:count], length):
            # Find the first damaged record, one checksum each.
            stored = np.ascontiguousarray(frames[:count, HEADER_BYTES + length:]).view("<u4")
            good = _data_intact(records, stored.ravel())
            if not good.all():
                count = int(good.argmin())
                if not count:
                    return 0
                del records[count:]
        start = self._in.base + pos
        offsets.extend(range(start, start + count * stride, stride))
        values.extend(records)
        return count

    def _take_mixed(self, offsets: List[int], values: List[bytes], n: int, pos: int) -> int:
        """Appends the intact records of any lengths lying back to back from ``pos`` in the
        buffer, up to ``n`` in ``values``; returns the bytes they take (0 when fewer than
        _MIN_RUN records).

        Their length checksums are checked at once, their data checksums by
        :func:`_mixed_run_checks_out`, and one by one only when that fails, to find the first
        damaged record. The run ends before the first record that is incomplete or fails a
        check, for the one-by-one path to handle.
        """
        buf, end, unpack = self._in.buf, self._in.end, _LENGTH.unpack_from
        starts: List[int] = []
        lengths: List[int] = []
        stop, want = pos, n - len(values)
        while len(starts) < want and stop + HEADER_BYTES <= end:
            (length,) = unpack(buf, stop)
            if length > end - stop - FRAME_BYTES:
                break
            starts.append(stop)
            lengths.append(length)
            stop += length + FRAME_BYTES
        if len(starts) < _MIN_RUN:
            return 0
        frames = np.frombuffer(buf, dtype=np.uint8, count=stop - pos, offset=pos)
        at, sizes = np.array(starts, dtype=np.int64) - pos, np.array(lengths, dtype=np.int64)
        intact = _length_checks_out(frames[at[:, None] + np.arange(HEADER_BYTES)])
        count = len(starts) if intact.all() else int(intact.argmin())
        if count < _MIN_RUN:
            return 0
        stop = int(at[count - 1] + sizes[count - 1]) + FRAME_BYTES
        frames, at, sizes = frames[:stop], at[:count], sizes[:count]
        raw = frames.tobytes()  # one copy, each record a slice of it
        records = [raw[a:a + size] for a, size in zip((at + HEADER_BYTES).tolist(), lengths)]
        if not _mixed_run_checks_out(frames, at, sizes):
            footers = (at + HEADER_BYTES + sizes)[:, None] + np.arange(4)
            good = _data_intact(records, np.ascontiguousarray(frames[footers]).view("<u4").ravel())
            count = int(good.argmin())  # (the run check failed: one record at least did)
            if not count:
                return 0
            del records[count:]
            stop = int(at[count])
        offsets.extend((at[:count] + self._in.base + pos).tolist())
        values.extend(records)
        return stop

    def next_columns(self, n: int) -> Tuple[List[int], List[bytes]]:
        """Returns up to ``n`` records as two lists, their offsets and their data; fewer only
        at the end of the file.

        Damage found after some records were collected is held back: those records are
        returned and the next call raises.

        Raises:
          DataLossError: (policy "raise") the next record is damaged; raised again by every
            later call.
        """
        return self._next(n, framed=False)

    def next_framed(self, n: int) -> Tuple[List[int], List[Any]]:
        """:meth:`next_columns`, every record read and checked, but its data as pieces for
        :func:`unframed` to make the records of: with the compiled core, the runs of records
        that lay whole in the buffer as one copy of their frames each. A reader that must
        read in order, holding a lock, makes the records after it (2,048 bytes objects a
        chunk of token lists, a third of the read, held the lock of
        ``read_batch_features``' plan, which two enqueue threads then took turns on)."""
        return self._next(n, framed=True)

    def _next(self, n: int, framed: bool) -> Tuple[List[int], List[Any]]:
        if self._error is not None:
            raise self._error
        offsets: List[int] = []
        values: List[Any] = []
        try:
            while len(offsets) < n:
                self._take_buffered(offsets, values, n, framed)
                if len(offsets) >= n:
                    break
                record = self._next_checked()
                if record is None:
                    break
                offsets.append(record[0])
                values.append(record[1])
        except DataLossError:
            if not offsets:
                raise
        return offsets, values

    def next_batch(self, n: int) -> List[Tuple[int, bytes]]:
        """Returns up to ``n`` records as ``(offset, data)`` pairs (see :meth:`next_columns`)."""
        return list(zip(*self.next_columns(n)))

    def take_cut_short(self) -> Optional[CutShort]:
        """For a followed file: the record found cut short by the end of the data and not read
        past since, or None. The caller takes it over: :meth:`close` then does not count it
        (the caller decides whether it is damage)."""
        cut_short, self._cut_short = self._cut_short, None
        return cut_short if cut_short is not None and self.offset <= cut_short.offset else None

    def close(self) -> None:
        """Closes the file (counting, for a followed file, a record still cut short at its
        end as damage). Idempotent."""
        cut_short = self.take_cut_short()
        if cut_short is not None:
            self.skipped += 1
            logger.warning("skipping damaged data: %s", cut_short.message)
        self._in.close()

    def __enter__(self) -> "RecordScanner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self) -> Iterator[Tuple[int, bytes]]:
        while True:
            batch = self.next_batch(1024)
            if not batch:
                return
            yield from batch


class RecordIterator:
    """The iterator :func:`tf_record_iterator` returns: the records of one file, in order, from
    an offset that only moves forward, as TF's.

    At the end of the file ``next`` raises ``StopIteration`` and keeps its place: a later
    ``next`` returns the records a writer appended since (reading a file that grows, as
    TensorBoard does with event files). A record cut short at the end raises
    ``DataLossError`` each time, until the writer completes it; with
    ``corrupt_records="skip"`` it is not counted or logged as damage unless it is still cut
    short when the iterator is closed (the file stopped growing). Damage inside the file is
    raised again by every later ``next``, as TF's reader never moves past it.
    """

    def __init__(self, path: PathLike, options=None, corrupt_records: str = "raise"):
        self._path, self._options, self._policy = os.fsdecode(path), options, corrupt_records
        self._scanner: Optional[RecordScanner] = RecordScanner(path, options, corrupt_records)
        self._offsets: List[int] = []
        self._records: List[bytes] = []
        self._next = 0  # index into _records of the next record to return
        self._closed_at = 0  # the offset when close() was called

    @property
    def offset(self) -> int:
        """The offset of the next record to return, in the uncompressed stream."""
        if self._next < len(self._records):
            return self._offsets[self._next]
        return self._scanner.offset if self._scanner is not None else self._closed_at

    def __iter__(self) -> "RecordIterator":
        return self

    def __next__(self) -> bytes:
        if self._next == len(self._records):
            if self._scanner is None:
                raise FailedPreconditionError(f"the record iterator of '{self._path}' is closed")
            self._scanner.look_again()
            self._offsets, self._records = self._scanner.next_columns(256)
            self._next = 0
            if not self._records:
                raise StopIteration
        self._next += 1
        return self._records[self._next - 1]

    def reopen(self) -> None:
        """Opens the file again and reads on from :attr:`offset` (for storage whose open
        handles do not see what was appended, such as object stores)."""
        offset = self.offset
        if self._scanner is not None:  # still followed: the new scanner finds it again
            self._scanner.take_cut_short()
        self.close()
        self._scanner = RecordScanner(self._path, self._options, self._policy, offset)

    def close(self) -> None:
        """Closes the file; ``next`` then raises ``FailedPreconditionError``. Idempotent."""
        if self._scanner is not None:
            self._closed_at = self.offset
            self._scanner.close()
            self._scanner = None
            self._offsets, self._records, self._next = [], [], 0

    def __del__(self):
        if getattr(self, "_scanner", None) is not None:
            self._scanner.close()

    def __repr__(self) -> str:
        state = "closed" if self._scanner is None else "open"
        return f"<RecordIterator '{self._path}' at offset {self.offset}, {state}>"


def tf_record_iterator(path: PathLike, options=None, *,
                       corrupt_records: str = "raise") -> RecordIterator:
    """Returns an iterator over the records of a TFRecord file, as TF's
    ``tf.compat.v1.io.tf_record_iterator``; see :class:`RecordIterator`.

    The file is opened at once (so a missing file fails here, not at the first ``next``) and
    closed by ``close()`` or when the iterator is garbage-collected.

    Args:
      path: the file; a path with a protocol is read through fsspec.
      options: compression: a :class:`TFRecordOptions`, "GZIP", "ZLIB", "" or None.
      corrupt_records: ``"raise"`` or ``"skip"``, see :class:`RecordScanner`.

    Raises:
      NotFoundError: the file does not exist.
      DataLossError: (while iterating) a record is damaged; the message names the file and
        the byte offset of the record in the uncompressed stream.
    """
    return RecordIterator(path, options, corrupt_records)
