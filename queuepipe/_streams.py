"""The uncompressed bytes of a file, read ahead in large chunks: plain, ZLIB or GZIP.

:class:`ReadBuffer` is what the record scanner and the fixed-length reader cut records out of.
Offsets count bytes of the uncompressed stream, as TensorFlow's do. Paths with a protocol
(``s3://``, ``gs://``, ``memory://``, ...) are opened with fsspec (``queuepipe.remote``).
"""

from __future__ import annotations

import logging
import os
import zlib
from typing import IO, Optional, Union

from queuepipe.errors import DataLossError, QueuePipeError
from queuepipe.remote import open_file

__all__ = ["ReadBuffer", "CHUNK", "stored_size"]

logger = logging.getLogger("queuepipe.records")

PathLike = Union[str, bytes, "os.PathLike[str]"]

CHUNK = 1 << 20  # bytes asked of the file per read


def _file_size(f) -> Optional[int]:
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):
        size = getattr(f, "size", None)
        return size if isinstance(size, int) else None


def stored_size(path: PathLike) -> Optional[int]:
    """The size of ``path`` now, in stored (compressed) bytes; None where storage does not say
    or the file cannot be opened (removed, replaced by something that is not a file)."""
    try:
        with open_file(path, "rb") as f:
            return _file_size(f)
    except (OSError, QueuePipeError):
        return None


class _Inflater:
    """A file-like ``read(n)`` and ``readinto`` over a ZLIB or GZIP stream.

    As in TensorFlow, the data ends where the compressed input ends, whether or not the stream's
    end marker was reached: a file still being written (flushed, not closed) reads as the
    records written so far, and a later read picks up what was appended. ``unfinished`` then
    says so, for messages about a record cut short. A ZLIB stream ends at its end marker;
    bytes after it are ignored (logged once), as TF does. A GZIP file may hold several members
    (``cat a.gz b.gz``, RFC 1952); they are read one after another, where TF stops after the
    first and would lose the records of the others; bytes after the last member that do not
    start another are ignored (logged once), as ``gzip -d`` does.

    Damaged compressed data also ends the data, and ``damage`` then says what went wrong, so the
    record scanner reports it at the record it was reading; everything inflated before the
    damage is delivered first.
    """

    def __init__(self, raw, compression: str, path: str):
        self._raw = raw
        self._path = path
        self._compression = compression
        self._wbits = 31 if compression == "GZIP" else 15
        self._d = zlib.decompressobj(self._wbits)
        self._input = b""  # compressed bytes read from the file and not fed to self._d yet
        self._output = b""  # inflated bytes not returned yet
        self._ended = False  # the (last) stream's end marker was passed
        self.unfinished = False  # the input ended inside a stream
        self.damage: Optional[str] = None

    def read(self, n: int) -> bytes:
        while not self._output and not self._ended and self.damage is None:
            data = self._d.unconsumed_tail or self._input or self._raw.read(CHUNK)
            self._input = b""
            if not data:
                return b""  # the end of the input, for now: a writer may append more
            self.unfinished = True
            self._inflate(data, n)
            if self._d.eof:
                self._next_member(self._d.unused_data)
        out, self._output = self._output[:n], self._output[n:]
        return out

    def readinto(self, view: memoryview) -> int:
        out = self.read(len(view))
        view[:len(out)] = out
        return len(out)

    def close(self) -> None:
        self._raw.close()

    def _inflate(self, data: bytes, n: int) -> None:
        """Inflates up to ``n`` bytes of ``data`` into ``_output``. On damage, zlib gives none of
        that call's output: inflate again from a copy of the state, in small pieces and the
        failing piece byte by byte, to keep every byte that comes before the damage."""
        before = self._d.copy()
        try:
            self._output = self._d.decompress(data, n)
            return
        except zlib.error as e:
            self.damage = f"corrupted {self._compression} stream ({e})"
        self._d, out = before, []
        for piece in _pieces(data, 256):
            before = self._d.copy()
            try:
                out.append(self._d.decompress(piece))
                continue
            except zlib.error:
                self._d = before
            try:  # the damage is in this piece: up to it, byte by byte
                for byte in _pieces(piece, 1):
                    out.append(self._d.decompress(byte))
            except zlib.error:
                pass
            break
        self._output = b"".join(out)

    def _next_member(self, rest: bytes) -> None:
        """After a stream's end marker: starts the next GZIP member, or ends the data."""
        self.unfinished = False
        while len(rest) < 2:  # enough to tell whether another GZIP member starts
            more = self._raw.read(CHUNK)
            if not more:
                break
            rest += more
        if self._compression == "GZIP" and rest[:2] == b"\x1f\x8b":
            self._d = zlib.decompressobj(self._wbits)
            self._input = rest
            return
        self._ended = True
        if rest:
            logger.warning("file '%s': bytes after the end marker of its %s stream are "
                           "ignored%s", self._path, self._compression,
                           " (TensorFlow raises DataLossError there, after the records)"
                           if self._compression == "GZIP" else ", as TensorFlow does")


def _pieces(data: bytes, size: int):
    return (data[i:i + size] for i in range(0, len(data), size))


class ReadBuffer:
    """The uncompressed bytes of one file, read ahead in large chunks into one reused buffer.

    ``buf[pos:end]`` (a ``bytearray``; ``view`` is a memoryview of it) has been read from the
    file but not consumed yet; ``base`` is the stream offset of ``buf[0]``. Parsers copy what
    they need out of it, since the next :meth:`fill` overwrites it, and advance ``pos``.
    Reading into the same buffer each time, rather than into a new ``bytes`` per chunk joined
    to the rest of the last one, keeps it in the CPU's cache and spares the memory allocator a
    fresh megabyte (and its page faults) per chunk.

    Args:
      path: the file; a path with a protocol is opened through fsspec.
      compression: "", "ZLIB" or "GZIP" (the whole stream is compressed).
      offset: where to start, in bytes of the uncompressed stream: a seek in a plain file; a
        compressed one is inflated from its start and the bytes before are passed over.

    Raises:
      NotFoundError: the file does not exist.
      DataLossError: ``offset`` lies past the end of the data.
    """

    def __init__(self, path: PathLike, compression: str = "", offset: int = 0):
        self.path = os.fsdecode(path)
        self._raw = raw = open_file(self.path, "rb")
        self._stream: Union[_Inflater, IO[bytes]]
        try:
            if compression:
                self._stream, self._size = _Inflater(raw, compression, self.path), None
            else:
                self._stream, self._size = raw, _file_size(raw)
                if offset:
                    raw.seek(offset)
            self._readinto = getattr(self._stream, "readinto", None)
            self.buf = bytearray(CHUNK)
            self.view = memoryview(self.buf)
            self.pos = self.end = 0
            self.base = 0 if compression else offset
            while self.offset < offset:  # compressed: inflate and pass over the bytes before
                if not self.fill(1):
                    break
                self.pos += min(offset - self.offset, self.available)
            if self.offset < offset or (self._size is not None and offset > self._size):
                held = self.offset if compression else self._size
                raise DataLossError(
                    f"cannot start reading file '{self.path}' at offset {offset}: it holds "
                    f"{held} bytes{' (uncompressed)' if compression else ''}",
                    path=self.path, offset=offset)
        except BaseException:
            raw.close()
            raise

    @property
    def offset(self) -> int:
        """The stream offset of the next unconsumed byte."""
        return self.base + self.pos

    @property
    def available(self) -> int:
        """Bytes read ahead and not consumed."""
        return self.end - self.pos

    @property
    def damage(self) -> Optional[str]:
        """What broke the compressed stream (it then reads as ended early), or None."""
        return getattr(self._stream, "damage", None)

    @property
    def unfinished(self) -> bool:
        """True when the data read so far ends inside a compressed stream, before its end
        marker (a file still being written, or cut short)."""
        return getattr(self._stream, "unfinished", False)

    def remaining(self, wanted: int = 0) -> Optional[int]:
        """Bytes left in the file from :attr:`offset`, when known without reading, else None.

        When fewer than ``wanted`` are left, the file is measured again first: a writer may
        have appended to it since it was opened (a trainer reading a file being written).
        """
        if self._size is None:
            return None
        left = self._size - self.offset
        if left < wanted:
            self._size = _file_size(self._stream)
            left = left if self._size is None else self._size - self.offset
        return left

    def file_size(self) -> Optional[int]:
        """The file's size now, in stored (compressed) bytes; None where storage does not say."""
        return _file_size(self._raw)

    def fill(self, n: int) -> bool:
        """Makes ``n`` bytes available from ``pos``; False when the stream ends first.

        Moves the unconsumed bytes to the front, then reads into the rest of the buffer. For
        a larger ``n`` the buffer doubles each time it is full, so asking for an absurd ``n``
        allocates at most twice what the file really holds.
        """
        have = self.end - self.pos
        if have >= n:
            return True
        if self.pos:
            self.buf[:have] = self.buf[self.pos:self.end]
            self.base += self.pos
            self.pos, self.end = 0, have
        while self.end < n:
            if self.end == len(self.buf):  # full: double it, as the data comes
                self.buf = self.buf + bytes(len(self.buf))  # a new one: views may hold the old
                self.view = memoryview(self.buf)
            if self._readinto is not None:
                got = self._readinto(self.view[self.end:])
            else:
                chunk = self._stream.read(len(self.buf) - self.end)
                got = len(chunk)
                self.view[self.end:self.end + got] = chunk
            if not got:
                return False
            self.end += got
        return True

    def close(self) -> None:
        """Closes the file. Idempotent."""
        self._stream.close()


