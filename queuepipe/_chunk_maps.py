"""Where each chunk of a file lies, learnt from the first pass over it, so that later epochs
read their chunks by offset, in parallel.

``read_batch_features``' plan, in its ``"files"`` order, cuts each file into chunks of the
next ``chunk_size`` records. Where a chunk ends is known only once its frames are read, so a
pass over a file reads under the plan's lock, one thread at a time (a third of a thread's
work on mnist's records: the file's bytes copied and checked). But the chunks of a file are
the same every epoch, the files being the same; so the first whole pass over a file notes
where each of its chunks begins and ends, and the passes after it take a chunk by its
offsets under the lock and read it after, each thread its own::

    epoch 0, file 3:  | chunk 0 | chunk 1 | chunk 2 |   read in order, under the lock,
                      0       41230     82511   98004  noting the offsets
    epoch 1, file 3:  thread A preads 0-41230, thread B 41230-82511, ... (the lock only
                      hands out the tickets)

Only files read whole with every check and nothing skipped are mapped: an uncompressed
local file, a plain ``TFRecordReader`` (``corrupt_records="raise"``) and the compiled core.
A file whose size changed since is read in order again (a file still growing gives its new
records, as it would without the map). A chunk that no longer holds what it held is read
again in order by a scanner of its own, whose ``DataLossError`` (the message and offset a
pass in order gives) is raised; where its frames are whole but others, a ``DataLossError``
says the file changed.
"""

from __future__ import annotations

import bisect
import os
from typing import Any, Dict, List, NamedTuple, Optional, cast

from queuepipe._core import core
from queuepipe._open_files import OpenFiles
from queuepipe.errors import DataLossError
from queuepipe.records import RecordScanner

__all__ = ["ChunkMaps", "MappedChunk"]

# A file with a chunk of more bytes than this is read in order every epoch: a chunk read by
# offset lands in a buffer of its size (read in order, through the reader's 1 MiB one), and
# buffers this big are not kept for the next chunk but come in fresh pages each time (100
# KiB records, 512 a chunk: 50 MB). read_batch_features' default chunks hold about 8 MiB.
_MOST_MAPPED_BYTES = 16 << 20


class MappedChunk(NamedTuple):
    """A chunk to read by its offsets: file ``file``'s ``records`` frames from ``start`` to
    ``end``."""

    file: int
    start: int
    end: int
    records: int


class _Map(NamedTuple):
    size: int  # the file's size when its pass ended
    starts: List[int]  # each chunk's first frame's offset
    ends: List[int]  # where its last frame ends
    counts: List[int]  # its records


class ChunkMaps:
    """The chunk maps of a plan's files (see the module docstring). Not thread-safe: the
    plan calls all but :meth:`read` holding its lock.

    Args:
      paths: the plan's files.
      open_files: the plan's descriptors, for :meth:`read`.
      enabled: whether the files may be mapped at all (the plan's reader reads them
        uncompressed, raising at damage, with the core).
    """

    def __init__(self, paths: List[str], open_files: OpenFiles, enabled: bool) -> None:
        self._paths = paths
        self._open_files = open_files
        self._enabled = enabled and core is not None and hasattr(os, "preadv")
        self._maps: Dict[int, _Map] = {}
        self._pass: Optional[_Map] = None  # the map of the pass under way (size unused)

    def begin(self, file: int, position: int, skip: int) -> None:
        """A pass over ``file`` opens at its record at ``position``, passing over ``skip``:
        noted when it opens at its start (a pass from the middle, resumed, maps nothing)."""
        self._pass = None
        if self._enabled and position == 0 and skip == 0:
            self._pass = _Map(0, [], [], [])

    @property
    def recording(self) -> bool:
        """Whether a pass that opened at its file's start is under way."""
        return self._pass is not None

    def read_chunk(self, start: int, end: int, count: int) -> None:
        """The pass read ``count`` records whose frames lie from ``start`` to ``end`` (a
        chunk past ``_MOST_MAPPED_BYTES`` leaves its file unmapped)."""
        if end - start > _MOST_MAPPED_BYTES:
            self._pass = None
        if self._pass is not None:
            self._pass.starts.append(start)
            self._pass.ends.append(end)
            self._pass.counts.append(count)

    def end(self, file: int, size: int) -> None:
        """The pass over ``file`` read it to its end, ``size`` bytes, with nothing skipped."""
        if self._pass is not None and self._pass.counts:
            self._maps[file] = self._pass._replace(size=size)
        self._pass = None

    def next_chunk(self, file: int, position: int, skip: int) -> Optional[MappedChunk]:
        """The chunk of ``file`` after the one at ``position`` of ``skip`` records (the
        plan's cursor; ``0, 0``: its first), if the file is mapped and its size the same
        (checked at its first chunk: else the map is dropped); None otherwise."""
        mapped = self._maps.get(file)
        if mapped is None:
            return None
        if position == 0 and skip == 0:
            k = 0
            try:
                same = os.stat(self._paths[file]).st_size == mapped.size
            except OSError:
                same = False
            if not same:
                del self._maps[file]
                return None
        else:  # (the starts ascend: a search, not a scan of a long file's thousands)
            k = bisect.bisect_left(mapped.starts, position) + 1
            if k > len(mapped.starts) or mapped.starts[k - 1] != position \
                    or mapped.counts[k - 1] != skip:
                return None
        if k == len(mapped.starts):
            return None
        return MappedChunk(file, mapped.starts[k], mapped.ends[k], mapped.counts[k])

    def is_last(self, chunk: MappedChunk) -> bool:
        """Whether ``chunk`` is its file's last."""
        return self._maps[chunk.file].starts[-1] == chunk.start

    def read(self, chunk: MappedChunk) -> List[bytes]:
        """The records of ``chunk``, read by offset and checked (any thread, no lock).

        Raises:
          DataLossError: its frames are not what the first pass found (the file was
            changed in place since): damage, as a pass in order names it, or else the
            change, naming the file and the offset.
        """
        path = self._paths[chunk.file]
        # (into one of the core's Blocks: a buffer an earlier chunk freed, not fresh pages)
        (data,) = cast(Any, core).blocks([chunk.end - chunk.start])
        with self._open_files.using(chunk.file) as fd:
            got = os.preadv(fd, [data], chunk.start)
        _, records, stop, _ = cast(Any, core).scan_frames(data, 0, got, chunk.records,
                                                       chunk.start, False)  # (no offsets)
        if len(records) != chunk.records or stop != chunk.end - chunk.start:
            _raise_damage(path, chunk)
            raise DataLossError(
                f"corrupted record at {chunk.start + stop}: file '{path}' changed since an "
                f"earlier epoch read it (its {chunk.records} records from offset {chunk.start} "
                f"to {chunk.end} are not there as they were)",
                path=path, offset=chunk.start + stop)
        return records


def _raise_damage(path: str, chunk: MappedChunk) -> None:
    """Reads ``chunk`` again in order, as a pass without the map would, and raises the
    ``DataLossError`` its scanner raises (the same message and offset); returns where it
    finds whole frames, though not those the map expects."""
    scanner = RecordScanner(path, offset=chunk.start)
    try:
        left = chunk.records
        while left:  # (records before damage come first; the next call raises it)
            offsets, _ = scanner.next_columns(left)
            if not offsets:
                return
            left -= len(offsets)
    finally:
        scanner.close()
