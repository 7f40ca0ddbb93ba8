"""The plan of ``read_batch_features``: its input as numbered chunks, to repeat and to resume.

A plan cuts the input into *chunks* of up to ``chunk_size`` records, numbered 0, 1, 2...
(their *tickets*), and numbers every record by its place in the whole sequence (its
*ordinal*). What each chunk holds is fixed by the files and the seed alone, never by which
thread read it or when::

    epoch 0, files in the epoch's order            epoch 1, another order
    | b.tfrecord            | a.tfrecord     | ... | a.tfrecord ...
    | ticket 0 | ticket 1 | t2 | ticket 3 | t4 | ... | ...
      ordinals 0-511, 512-1023, ...

Two orders:

* ``"files"`` (and ``"sorted"``): an epoch reads its files one after another (a seeded
  permutation per epoch, or sorted), each in record order, a chunk at a time. Reading and
  checking is serial, under the plan's lock (it is the cheap part); the chunk's records are
  made from a copy of their frames after it, and threads parse chunks in parallel.
* ``"global"``: every file has its ``.index``; an epoch is one seeded permutation of all the
  records of all the files (:class:`~queuepipe.permutation.Permutation`, nothing stored per
  record), and a chunk is its next ``chunk_size`` positions, read by offset outside the lock,
  so threads read in parallel too.

A chunk can be read again from its *where*, a few integers (``[file, position, skip,
count]``, or ``[epoch, start, count]`` for ``"global"``): a state stores those, never the
data. The plan also knows which records of each chunk were delivered (:meth:`delivered`), so
its :meth:`state` lists exactly the records read and not yet delivered.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import collections
import itertools
import logging
import os
import threading
import zlib
from typing import Any, Callable, Deque, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from queuepipe.errors import (CancelledError, DataLossError, InvalidArgumentError,
                              OutOfRangeError)
from queuepipe.permutation import Permutation
from queuepipe.readers import ReaderBase, TFRecordReader, _format_keys, _object_array
from queuepipe.records import unframed
from queuepipe._chunk_maps import ChunkMaps, MappedChunk
from queuepipe._core import core
from queuepipe._frames import unframe_many
from queuepipe._open_files import OpenFiles, descriptor_budget
from queuepipe.remote import is_remote
from queuepipe.shards import index_mismatch, read_index

__all__ = ["Chunk", "ReadPlan", "ORDERS", "REFUSED", "pack_ints", "unpack_ints"]

ORDERS = ("sorted", "files", "global")
STATE_FORMAT = "queuepipe.read_batch_features/1"

# How every refusal of a loaded state begins (a state may come from anywhere: it is checked
# before anything is allocated or read from it).
REFUSED = "the state is damaged or not this pipeline's"

_log = logging.getLogger("queuepipe.records")  # where the readers log a damaged record

_least = np.minimum.reduce  # (the ufunc itself: ndarray.min's Python wrapper costs more)

# What delivered passes as the limit when no ticket is open: below every place.
_NO_TICKET = -(1 << 63)

# The plans made and not closed yet: when the last one closes, the buffers the core keeps
# for the chunks to come (queuepipe/_core/module_blocks.c, up to 32 MiB) are freed.
_open_plans = [0]
_open_plans_lock = threading.Lock()

# The least room a plan's delivery marks get when they need more (see _marks_appended).
_MARKS_ROOM = 1 << 16


def _pure_mark_delivered(left: np.ndarray, ordinals: np.ndarray, low: int, limit: int,
                         due: bytearray) -> None:
    """Marks the records of ``ordinals`` (int64) delivered in ``left``, the marks of the
    ordinals from ``low`` on, passing over those below ``low`` (forgotten); first sets
    ``due[0]`` when one lies below ``limit`` (the oldest open ticket's end). An IndexError,
    nothing marked, for an ordinal past the marks. The core's ``mark_delivered`` does the same
    in one call: the consumer runs this once a batch, where its NumPy calls cost 4-5 us."""
    if not len(ordinals):
        return
    places = ordinals - low
    least = _least(places)
    if least < 0:  # (delivered again: forgotten since)
        places = places[places >= 0]
    if least < limit:
        due[0] = 1
    left[places] = False


_mark_delivered: Callable[[np.ndarray, np.ndarray, int, int, bytearray], None] = (
    getattr(core, "mark_delivered", None) if core is not None else None) or _pure_mark_delivered


class Chunk(NamedTuple):
    """A chunk of records: its ticket, the ordinals of its records, the serialized records
    (an object array), and where to read it again (their keys too:
    :meth:`ReadPlan.keys_of`). (Damaged records skipped with ``corrupt_records="skip"`` have
    no ordinal here: they count as delivered.)"""

    ticket: int
    ordinals: np.ndarray
    values: np.ndarray
    where: List[int]


def pack_ints(values: np.ndarray) -> str:
    """Non-negative integers as compact text for a JSON state (int64, zlib, base64)."""
    return base64.b64encode(zlib.compress(np.asarray(values, "<i8").tobytes(), 9)).decode()


def unpack_ints(text: Any, most: int) -> np.ndarray:
    """The integers :func:`pack_ints` wrote, inflating no more than ``most`` of them.

    Raises:
      ValueError: ``text`` is not what :func:`pack_ints` writes, or holds more than ``most``
        integers (which are then never inflated: a few KB of zlib can hold GBs).
    """
    if not isinstance(text, str):
        raise ValueError(f"packed integers are text, got {type(text).__name__}")
    try:
        inflater = zlib.decompressobj()
        data = inflater.decompress(base64.b64decode(text, validate=True), 8 * most + 8)
    except (binascii.Error, zlib.error) as e:
        raise ValueError(f"not packed integers ({e})") from e
    if len(data) > 8 * most or inflater.unconsumed_tail:
        raise ValueError(f"more than {most} integers")
    if len(data) % 8 or not inflater.eof:
        raise ValueError("not packed integers (cut short)")
    return np.frombuffer(data, "<i8").astype(np.int64)


class ReadPlan:
    """The numbered chunks of ``files`` (see the module docstring).

    Args:
      files: the paths, in their sorted order (the ``"sorted"`` order; ``file`` in a *where*
        is an index into it).
      make_reader: makes a reader (a :class:`~queuepipe.readers.ReaderBase`); the plan owns
        the one it reads with, and makes another to read chunks again.
      chunk_size: the most records per chunk.
      num_epochs: epochs to read, or None for no end.
      order: one of :data:`ORDERS`.
      seed: the seed of the epochs' orders.
      keyed: the records have keys ``b"<file>:<position>"`` (:meth:`keys_of`).
      reader: the reader to read with, made by ``make_reader`` already (for a caller that
        looks at it first); by default the plan makes it.
      loaded_chunk_size: the most records a loaded state's chunks may hold, where more than
        ``chunk_size`` (a state of the same pipeline saved where its default chunk was
        bigger); by default ``chunk_size``.

    Raises:
      InvalidArgumentError: ``"global"`` with a file that has no ``.index`` matching it, or a
        reader that is not an uncompressed ``TFRecordReader``.
    """

    def __init__(self, files: Sequence[str], make_reader: Callable[[], Any], chunk_size: int,
                 num_epochs: Optional[int], order: str, seed: int, keyed: bool,
                 reader: Optional[ReaderBase] = None, loaded_chunk_size: int = 0) -> None:
        if order not in ORDERS:
            raise InvalidArgumentError(f"the order must be one of {ORDERS}, got {order!r}")
        self._files = [os.fsdecode(f) for f in files]
        self._make_reader = make_reader
        self._reader = reader if reader is not None else reader_of(make_reader())
        self._chunk_size = chunk_size
        self._loaded_chunk_size = max(chunk_size, loaded_chunk_size)
        self._num_epochs = num_epochs
        self._order = order
        self._seed = int(seed)
        self._keyed = keyed
        self._lock = threading.Lock()
        self._closed = False
        self._ticket = 0  # the next chunk's ticket
        self._ordinal = 0  # the next record's ordinal
        self._epoch = 0
        self._epoch_began = 0  # the ordinal the epoch began at (-1: unknown, after a load)
        # "sorted"/"files": the next chunk starts in the file at _slot of the epoch's order,
        # at the record at _position, after passing over _skip records.
        self._slot = 0
        self._position = 0
        self._skip = 0
        self._opened = False
        self._files_order: Optional[Tuple[Tuple[int, int], np.ndarray]] = None
        self._carry: Optional[Tuple[List[int], List[bytes], bool]] = None
        # "global": the next chunk starts at this place of the epoch's permutation.
        self._start = 0
        self._permutation: Optional[Tuple[int, Permutation]] = None
        self._open_files = OpenFiles(self._files, descriptor_budget())
        # Where the chunks of each file read whole lie, for later epochs to read them by
        # offset after the lock ("files" order; see queuepipe/_chunk_maps.py).
        reader = self._reader
        self._maps = ChunkMaps(self._files, self._open_files, enabled=(
            type(reader) is TFRecordReader and not reader._compression
            and reader._corrupt_records == "raise"
            and not any(is_remote(path) for path in self._files)))
        # The open tickets (read, not all delivered), oldest first, as (base, where); and
        # for every ordinal from _low on, whether its record is not delivered yet. Their own
        # lock: the consumer marks deliveries while a thread reads under _lock.
        self._marks_lock = threading.Lock()
        self._tickets: Deque[Tuple[int, List[int]]] = collections.deque()
        self._low = 0
        self._left = np.zeros(0, dtype=bool)
        # The buffer _left views, from _marks_at on, with room after it for the next
        # chunks' marks (see _marks_appended).
        self._marks, self._marks_at = self._left, 0
        # 1 once a batch held a record of the oldest ticket (see delivered): a bytearray that
        # the core's mark_delivered sets in the call that marks
        self._forget_due = bytearray(1)
        if order == "global":
            self._offsets, self._lengths, self._first = self._load_indexes()
        with _open_plans_lock:
            _open_plans[0] += 1

    @property
    def chunk_size(self) -> int:
        """The most records per chunk."""
        return self._chunk_size

    @property
    def loaded_chunk_size(self) -> int:
        """The most records per chunk of a state the plan loads."""
        return self._loaded_chunk_size

    # -- the order ------------------------------------------------------------------------------

    def _epoch_files(self, epoch: int) -> np.ndarray:
        """The files of ``epoch`` in their order (the last epoch's kept: a generator costs
        tens of microseconds, and every take asks)."""
        cached = self._files_order
        if cached is None or cached[0] != (epoch, self._seed):
            order = np.arange(len(self._files)) if self._order == "sorted" else \
                np.random.default_rng([self._seed, epoch]).permutation(len(self._files))
            cached = self._files_order = ((epoch, self._seed), order)
        return cached[1]

    def _load_indexes(self) -> Tuple[List[np.ndarray], List[np.ndarray], np.ndarray]:
        reader = self._reader
        if not isinstance(reader, TFRecordReader) or reader._compression:
            raise InvalidArgumentError(
                f"shuffle='global' reads records by their offsets: it needs an uncompressed "
                f"TFRecordReader, got {reader!r}")
        offsets, lengths, counts = [], [], []
        for path in self._files:
            index = path + ".index"
            if is_remote(path) or not os.path.exists(index):
                raise InvalidArgumentError(
                    f"shuffle='global' needs a .index beside every file: '{index}' is missing "
                    f"(write it with `queuepipe index {path}`, or write the shards with "
                    f"write_shards)")
            entries = read_index(index)
            mismatch = index_mismatch(entries, os.path.getsize(path))
            if mismatch is not None:
                raise InvalidArgumentError(f"'{index}' does not match its file ({mismatch}): "
                                           f"write it again with `queuepipe index {path}`")
            offsets.append(entries[:, 0].copy())
            lengths.append(entries[:, 1].copy())
            counts.append(len(entries))
        first = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        return offsets, lengths, first

    # -- taking chunks --------------------------------------------------------------------------

    @property
    def reader(self) -> ReaderBase:
        """The reader the plan reads its chunks with."""
        return self._reader

    def take(self) -> Chunk:
        """The next chunk; reads it (``"files"``: under the lock, ``"global"``: after it).

        Raises:
          OutOfRangeError: every epoch is read (or no file holds a record).
          CancelledError: the plan is closed.
          The reader's errors (``DataLossError`` naming the file and offset...). With
          ``"files"`` the plan stays where it was, so the next call raises them again.
        """
        with self._lock:
            if self._closed:
                raise CancelledError("the read plan is closed (its batches were closed)")
            if self._order != "global":
                try:
                    ticket, base, pieces, where = self._take_from_files()
                except OutOfRangeError:
                    self._reader._input_ended()  # its input ends here, not at a queue's end
                    raise
            else:
                where = self._next_global()
                ticket, base = self._register(where, where[-1])
        if self._order != "global":  # (the records made outside the lock: see _take_from_files)
            count = where[-1]
            records = self._maps.read(pieces) if isinstance(pieces, MappedChunk) \
                else unframed(pieces)
            return Chunk(ticket, np.arange(base, base + count), _object_array(records), where)
        values, _, kept = self._read_global(where, keyed=False)
        if len(kept) < where[-1]:  # damaged records skipped: nobody will deliver them
            self.delivered(base + np.setdiff1d(np.arange(where[-1]), kept))
        return Chunk(ticket, base + kept, values, where)

    def keys(self) -> np.ndarray:
        """The keys ``b"<file>:<offset>"`` of the next chunk of the ``"global"`` order, as an
        object array, reading nothing (for a producer of positions; the plan keeps no
        record of them).

        Raises:
          OutOfRangeError: every epoch is given.
        """
        with self._lock:
            where = self._next_global()
        files, offsets, _ = self._located(where)
        return self._keys(files, offsets)

    def _ended(self) -> bool:
        return self._num_epochs is not None and self._epoch >= self._num_epochs

    def _register(self, where: List[int], count: int) -> Tuple[int, int]:
        ticket, base = self._ticket, self._ordinal
        self._ticket += 1
        self._ordinal += count
        with self._marks_lock:
            self._tickets.append((base, where))
            self._left = self._marks_appended(count)
        return ticket, base

    def _marks_appended(self, count: int) -> np.ndarray:
        """``_left`` and ``count`` marks set after it, in the room its buffer has after it,
        or in a new buffer of twice what they need. Marks lock held.

        A new ``_left`` for every chunk copied all the marks of the open tickets three times
        (tens of thousands behind a shuffle queue: 8% of what held the GIL on tokens, under
        the plan's lock). Copied and set as bytes, with the GIL held: NumPy's copies and
        fills let go of it from 500 items on, two hand-overs to another thread each."""
        n, at = len(self._left), self._marks_at
        if at + n + count > len(self._marks):
            grown = bytearray(max(2 * (n + count), _MARKS_ROOM))
            grown[:n] = self._left.data.cast("B")
            self._marks, at = np.frombuffer(grown, dtype=bool), 0
        self._marks.data.cast("B")[at + n:at + n + count] = b"\x01" * count
        self._marks_at = at
        return self._marks[at:at + n + count]

    def _take_from_files(self) -> Tuple[int, int, Any, List[int]]:
        """The next chunk of the ``"files"`` order as its ticket, its first ordinal, its
        records and its where. Lock held: the other enqueue threads wait for it meanwhile,
        so the records are made after it: read and checked here, as pieces for
        :func:`~queuepipe.records.unframed` (a copy of their frames, with the compiled
        core: a bytes object a record cost a third of the read), or, in a file that an
        earlier pass read whole, a :class:`~queuepipe._chunk_maps.MappedChunk` to read."""
        while True:
            if self._ended():
                raise OutOfRangeError("the plan's epochs are all read")
            order = self._epoch_files(self._epoch)
            if self._slot == len(order):
                if self._epoch_began == self._ordinal:  # else an endless input loops here
                    raise OutOfRangeError(f"none of the {len(order)} files holds a record")
                self._epoch, self._slot, self._position, self._skip = self._epoch + 1, 0, 0, 0
                self._epoch_began = self._ordinal
                continue
            file = int(order[self._slot])
            if not self._opened:
                mapped = self._maps.next_chunk(file, self._position, self._skip)
                if mapped is not None:
                    where = [file, mapped.start, 0, mapped.records]
                    ticket, base = self._register(where, mapped.records)
                    self._position, self._skip = mapped.start, mapped.records
                    if self._maps.is_last(mapped):
                        self._slot, self._position, self._skip = self._slot + 1, 0, 0
                    return ticket, base, mapped, where
                self._open(file)
            positions, pieces, finished = self._read_records()
            taken: Optional[Tuple[int, int, Any, List[int]]] = None
            if len(positions):
                where = [file, int(positions[0]), 0, len(positions)]
                taken = (*self._register(where, len(positions)), pieces, where)
                self._position, self._skip = int(positions[0]), len(positions)
                if self._maps.recording:
                    self._maps.read_chunk(int(positions[0]), self._reader._records_end(),
                                          len(positions))
            if finished:
                if self._maps.recording:
                    self._maps.end(file, self._reader._records_end())
                self._reader._stop()
                self._opened = False
                self._slot, self._position, self._skip = self._slot + 1, 0, 0
            if taken is not None:
                return taken

    def _open(self, file: int) -> None:
        """Opens ``file`` at the cursor: its record at ``_position``, then ``_skip`` on."""
        self._carry = _open_at(self._reader, self._files[file], self._position, self._skip,
                               self._chunk_size)
        self._opened = True
        self._maps.begin(file, self._position, self._skip)

    def _read_records(self) -> Tuple[List[int], List[Any], bool]:
        """The next records of the open file: positions and values (records, or pieces of
        them for :func:`~queuepipe.records.unframed`) as lists, and whether the file is
        finished."""
        if self._carry is not None:
            carried, self._carry = self._carry, None
            return carried
        return self._reader._read_framed(self._chunk_size)

    def _next_global(self) -> List[int]:
        """The next chunk's where, ``[epoch, start, count]``; moves past it."""
        total = int(self._first[-1])
        if self._ended() or total == 0:
            raise OutOfRangeError("the plan's epochs are all read")
        count = min(self._chunk_size, total - self._start)
        where = [self._epoch, self._start, count]
        self._start += count
        if self._start == total:
            self._epoch, self._start = self._epoch + 1, 0
        return where

    def _permuted(self, epoch: int) -> Permutation:
        cached = self._permutation
        if cached is None or cached[0] != epoch:
            cached = (epoch, Permutation(int(self._first[-1]), [self._seed, epoch]))
            self._permutation = cached
        return cached[1]

    def _read_global(self, where: List[int], keyed: bool, counted: bool = True
                     ) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray]:
        """The records at places ``[start, start + count)`` of epoch ``epoch``'s permutation,
        read by offset, file by file in offset order (kind to the page cache).

        Returns:
          The records (and, ``keyed``, their keys) and their places in the chunk: all of
          them, but for damaged ones skipped with ``corrupt_records="skip"`` (each logged and
          counted by the plan's reader where ``counted``: not when read again for keys).
        """
        count = where[-1]
        files, offsets, lengths = self._located(where)
        # Read and checked in file and offset order (kind to the page cache), put back in the
        # chunk's order at the end.
        visit = np.lexsort((offsets, files))
        files, offsets, lengths = files[visit], offsets[visit], lengths[visit]
        frames: List[bytes] = []
        bounds = [0, *(np.flatnonzero(np.diff(files)) + 1).tolist(), count]
        for start, end in zip(bounds[:-1], bounds[1:]) if count else []:  # one file each
            with self._open_files.using(int(files[start])) as fd:
                frames += map(os.pread, itertools.repeat(fd, end - start),
                              lengths[start:end].tolist(), offsets[start:end].tolist())

        def where_is(i: int) -> Tuple[str, int]:
            return self._files[int(files[i])], int(offsets[i])

        try:
            values, kept = unframe_many(frames, lengths, where_is), np.arange(count)
        except DataLossError:
            reader = self._reader  # a TFRecordReader: _load_indexes checked it
            if not isinstance(reader, TFRecordReader) or reader._corrupt_records != "skip":
                raise
            values, kept = self._skip_damaged(reader, frames, lengths, where_is, counted)
        places = visit[kept]  # in the chunk
        order = np.argsort(places)
        keys = self._keys(files[kept][order], offsets[kept][order]) if keyed else None
        return values[order], keys, places[order]

    def _skip_damaged(self, reader: TFRecordReader, frames: List[bytes], lengths: np.ndarray,
                      where_is: Callable[[int], Tuple[str, int]],
                      counted: bool) -> Tuple[np.ndarray, np.ndarray]:
        """The intact records of ``frames`` and their places, each damaged one logged and
        counted by ``reader`` (the plan's, as it counts its own skips) where ``counted``."""
        intact: List[bytes] = []
        kept: List[int] = []
        for i, framed in enumerate(frames):
            try:
                intact.append(unframe_many([framed], lengths[i:i + 1],
                                           lambda _: where_is(i))[0])
                kept.append(i)
            except DataLossError as e:
                if counted:
                    _log.warning("skipping damaged data: %s", e)
                    with self._marks_lock:
                        reader._count_skipped(1)
        return _object_array(intact), np.array(kept, dtype=np.int64)

    def _keys(self, files: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """The keys ``b"<file>:<offset>"`` of records, formatted file by file as a reader
        formats its own."""
        keys = np.empty(len(files), dtype=object)
        for file in np.unique(files).tolist():
            places = np.flatnonzero(files == file)
            keys[places] = _format_keys(os.fsencode(self._files[file]),
                                        offsets[places].tolist())
        return keys

    def _located(self, where: List[int]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The file, offset and framed length of each record of a ``"global"`` chunk."""
        epoch, start, count = where
        records = self._permuted(epoch)(np.arange(start, start + count))
        files = np.searchsorted(self._first, records, side="right") - 1
        within = records - self._first[files]
        offsets = np.empty(count, dtype=np.int64)
        lengths = np.empty(count, dtype=np.int64)
        for file in np.unique(files).tolist():
            places = np.flatnonzero(files == file)
            offsets[places] = self._offsets[file][within[places]]
            lengths[places] = self._lengths[file][within[places]]
        return files, offsets, lengths

    # -- reading a chunk again ------------------------------------------------------------------

    def reread(self, where: List[int], counted: bool = True
               ) -> Tuple[np.ndarray, Optional[np.ndarray], np.ndarray]:
        """The records (and keys) of the chunk at ``where``, read again (by a reader of its
        own, so that it can run beside :meth:`take`), and their places in the chunk (a
        damaged record skipped has none; logged and counted again where ``counted``)."""
        if self._order == "global":
            return self._read_global(where, self._keyed, counted)
        file, position, skip, count = where
        reader = reader_of(self._make_reader())
        positions: List[int] = []
        values: List[bytes] = []
        keys: List[bytes] = []
        carry = _open_at(reader, self._files[file], position, skip, count)
        try:
            finished = False
            while len(values) < count and not finished:
                more_positions, more_values, finished = carry if carry is not None else \
                    reader._read_records(count - len(values))
                carry = None
                take = count - len(values)
                more_positions = list(more_positions)[:take]
                if self._keyed:
                    keys += reader._keys(more_positions)
                positions += more_positions
                values += list(more_values)[:take]
        finally:
            reader._stop()
        if len(values) != count:
            raise InvalidArgumentError(
                f"resuming: file '{self._files[file]}' holds {len(values)} records from "
                f"position {position} on where the state counted {count}: the file changed "
                f"since the state was saved")
        return _object_array(values), _object_array(keys) if self._keyed else None, \
            np.arange(count)

    def keys_of(self, ordinals: np.ndarray) -> Optional[np.ndarray]:
        """The keys ``b"<file>:<offset>"`` of the records of ``ordinals`` (read and not
        delivered), read again chunk by chunk: for a message naming a record that does not
        parse. None where the plan has no keys or the records are no longer its own."""
        if not self._keyed:
            return None
        with self._marks_lock:
            tickets = list(self._tickets)
        bases = np.array([base for base, _ in tickets], dtype=np.int64)
        owners = np.searchsorted(bases, ordinals, side="right") - 1
        keys = np.empty(len(ordinals), dtype=object)
        for owner in np.unique(owners).tolist():
            if owner < 0:
                return None
            base, where = tickets[owner]
            places = np.flatnonzero(owners == owner)
            _, chunk_keys, kept = self.reread(where, counted=False)
            at = np.searchsorted(kept, ordinals[places] - base)
            if chunk_keys is None or (at >= len(kept)).any() \
                    or not np.array_equal(kept[at], ordinals[places] - base):
                return None
            keys[places] = chunk_keys[at]
        return keys

    # -- delivery and state ---------------------------------------------------------------------

    def delivered(self, ordinals: np.ndarray) -> None:
        """Marks the records of ``ordinals`` delivered; the oldest tickets whose records all
        are are forgotten.

        Idempotent (records already forgotten are passed over), and whole whatever instant a
        Ctrl-C lands: the marks change in place only by clearing, which may be done again,
        and the forgetting is one assignment.

        The oldest ticket always has a record left (:meth:`_forget_delivered` keeps it so,
        and a loaded state's open chunks each have one: :func:`_checked_marks`), so only a
        batch that holds one of its records can let tickets be forgotten. Most batches of a
        shuffle queue do not, and end after the marks (the consumer runs this once a batch;
        scanning the oldest ticket each time was a fifth of its CPU on tokens).
        """
        if not len(ordinals):
            return
        with self._marks_lock:
            limit = _NO_TICKET
            if self._tickets:
                base, where = self._tickets[0]
                limit = base - self._low + where[-1]
            # (the flag is set before the marks: a call cut short after them leaves the
            # search to the next call, whoever makes it)
            # (int64 whatever the caller's integers: the core takes nothing else, and the
            # pure twin's subtraction must wrap as the core's does)
            _mark_delivered(self._left, np.asarray(ordinals, dtype=np.int64), self._low, limit,
                            self._forget_due)
            if self._forget_due[0]:
                self._forget_delivered()

    def _forget_delivered(self) -> None:
        """Forgets the oldest tickets whose records are all delivered. Marks lock held."""
        low, left = self._low, self._left
        forgotten = end = 0
        for base, where in self._tickets:
            # (bytes' search, not NumPy's any(): the consumer runs this holding the marks
            # lock, and NumPy lets go of the GIL for 500 marks or more)
            if 1 in left[base - low:base - low + where[-1]].tobytes():
                break
            forgotten, end = forgotten + 1, base - low + where[-1]
        if forgotten:
            tickets = collections.deque(itertools.islice(self._tickets, forgotten, None))
            self._tickets, self._left, self._low, self._marks_at = \
                tickets, left[end:], low + end, self._marks_at + end
        self._forget_due[0] = 0

    def state(self) -> Dict[str, Any]:
        """Where the plan is, and every open ticket with the records it has not delivered."""
        with self._lock, self._marks_lock:
            tickets = []
            for base, where in self._tickets:
                left = self._left[base - self._low:base - self._low + where[-1]]
                if left.any():
                    tickets.append([base, *where, _pack_bits(left)])
            return {"format": STATE_FORMAT, "files": len(self._files),
                    "first_file": self._files[0] if self._files else None,
                    "order": self._order, "seed": self._seed, "epoch": self._epoch,
                    "ticket": self._ticket, "ordinal": self._ordinal,
                    "cursor": [self._slot, self._position, self._skip, self._start],
                    "open": tickets}

    def load(self, state: Dict[str, Any], max_span: int, queued: np.ndarray
             ) -> List[Tuple[int, List[int], np.ndarray]]:
        """Takes up ``state`` (made by :meth:`state` over the same files and arguments),
        after checking it against the plan and its files: every number of its type and in
        its bounds, the open chunks within their files (or epoch), in order, each of at most
        ``loaded_chunk_size`` records with marks of its size, from the oldest open chunk to the
        next record at most ``max_span`` records (the marks the plan allocates), and the
        ordinals ``queued`` (the state's queue) among the records left.

        Returns:
          The open tickets: ``(base, where, left)`` each, whose records not delivered yet
          come first when the pipeline resumes.

        Raises:
          InvalidArgumentError: the state is of another format, order or set of files, or
            fails a check (the message names the field).
        """
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise InvalidArgumentError(f"not a state of read_batch_features "
                                       f"({STATE_FORMAT}): {str(state)[:80]!r}")
        first = self._files[0] if self._files else None
        if state.get("files") != len(self._files) or state.get("first_file") != first \
                or state.get("order") != self._order:
            raise InvalidArgumentError(
                f"the state was saved for {str(state.get('files'))[:20]} files from "
                f"{str(state.get('first_file'))[:200]!r} in order "
                f"{str(state.get('order'))[:20]!r}; this pipeline has {len(self._files)} from "
                f"'{first}' in order {self._order!r}: build it with the same files, "
                f"randomize_input and shuffle")
        seed, ticket, ordinal = (_integer(state.get(key), f"the state's plan {key!r}")
                                 for key in ("seed", "ticket", "ordinal"))
        epoch = _integer(state.get("epoch"), "the state's plan 'epoch'", self._num_epochs)
        cursor = state.get("cursor")
        if not isinstance(cursor, list) or len(cursor) != 4:
            raise InvalidArgumentError(f"{REFUSED}: its plan 'cursor' is not 4 integers")
        total = int(self._first[-1]) if self._order == "global" else None
        slot, position, skip, start = (
            _integer(value, f"the state's plan cursor {name!r}", most)
            for value, name, most in zip(cursor, ("slot", "position", "skip", "start"),
                                         (len(self._files), None, self._loaded_chunk_size,
                                          total)))
        opened = self._checked_open(state.get("open"), ordinal, epoch, total)
        low = opened[0][0] if opened else ordinal
        if ordinal - low > max_span:
            raise InvalidArgumentError(
                f"{REFUSED}: it spans {ordinal - low} records from its oldest open chunk to "
                f"its next, more than the {max_span} this pipeline's queue and threads can "
                f"leave open")
        left = np.concatenate([base + np.flatnonzero(marks) for base, _, marks in opened]
                              + [np.empty(0, np.int64)])
        stray = np.setdiff1d(queued, left)
        if len(stray):
            raise InvalidArgumentError(f"{REFUSED}: its queue holds record {int(stray[0])}, "
                                       f"which no open chunk has left")
        with self._lock, self._marks_lock:
            self._seed, self._epoch = seed, epoch
            self._ticket, self._ordinal = ticket, ordinal
            self._slot, self._position, self._skip, self._start = slot, position, skip, start
            self._epoch_began = -1
            self._low = low
            self._left = np.zeros(ordinal - low, dtype=bool)
            self._marks, self._marks_at = self._left, 0
            self._tickets.clear()
            for base, where, left in opened:
                self._tickets.append((base, where))
                self._left[base - low:base - low + where[-1]] = left
        return opened

    def _checked_open(self, entries: Any, ordinal: int, epoch: int, total: Optional[int]
                      ) -> List[Tuple[int, List[int], np.ndarray]]:
        """The open chunks of a state, ``[base, *where, marks]`` each, checked (see
        :meth:`load`)."""
        width = 3 if total is not None else 4
        if not isinstance(entries, list):
            raise InvalidArgumentError(f"{REFUSED}: its plan 'open' is not a list")
        opened = []
        end = 0  # where the chunk before ends
        for k, entry in enumerate(entries):
            if not isinstance(entry, list) or len(entry) != width + 2:
                raise InvalidArgumentError(f"{REFUSED}: open chunk {k} is not {width + 2} "
                                           f"values")
            base, *where = (_integer(value, f"open chunk {k}'s values", low=None)
                            for value in entry[:-1])
            count = where[-1]
            if base < end:
                raise InvalidArgumentError(f"{REFUSED}: open chunk {k} starts at record "
                                           f"{base}, before {end}, where the one before ends")
            if not 1 <= count <= self._loaded_chunk_size:
                raise InvalidArgumentError(
                    f"{REFUSED}: open chunk {k} holds {count} records, more than "
                    f"read_batch_size {self._loaded_chunk_size}" if count > 0 else
                    f"{REFUSED}: open chunk {k} holds {count} records")
            if base + count > ordinal:
                raise InvalidArgumentError(f"{REFUSED}: open chunk {k} ends at record "
                                           f"{base + count}, past the plan's {ordinal}")
            self._check_where(k, where, epoch, total)
            opened.append((base, where, _checked_marks(k, entry[-1], count)))
            end = base + count
        return opened

    def _check_where(self, k: int, where: List[int], epoch: int,
                     total: Optional[int]) -> None:
        """Checks that open chunk ``k``'s ``where`` lies in the files (or the epochs)."""
        if total is not None:
            chunk_epoch, start, count = where
            if not 0 <= chunk_epoch <= epoch or not 0 <= start <= total - count:
                raise InvalidArgumentError(
                    f"{REFUSED}: open chunk {k} reads places {start} to {start + count} of an "
                    f"epoch of {total} (epoch {chunk_epoch}; the plan is in epoch {epoch})")
            return
        file, position, skip, _ = where
        if not 0 <= file < len(self._files):
            raise InvalidArgumentError(f"{REFUSED}: open chunk {k} names file {file} of "
                                       f"{len(self._files)}")
        if position < 0 or not 0 <= skip <= self._loaded_chunk_size:
            raise InvalidArgumentError(f"{REFUSED}: open chunk {k} starts at position "
                                       f"{position}, passing over {skip} records")

    def close(self) -> None:
        """Closes the files the plan has open (a read under way first ends); :meth:`take`
        then raises ``CancelledError``. Idempotent."""
        with self._lock:
            closing, self._closed = not self._closed, True
            if self._opened:
                self._reader._stop()
                self._opened = False
            self._reader._input_ended()
        self._open_files.close()
        if closing:
            with _open_plans_lock:
                _open_plans[0] -= 1
                if not _open_plans[0] and core is not None:
                    core.blocks_release()


class _OneFile:
    """A filename queue of one file, for a reader of another library."""

    def __init__(self, filename: str) -> None:
        self._filename: Optional[str] = filename

    def dequeue(self) -> str:
        filename, self._filename = self._filename, None
        if filename is None:
            raise OutOfRangeError("the file is read")
        return filename


class _ForeignReader(ReaderBase):
    """Any reader with TF's ``read_up_to(queue, n)`` (of another library, say), driven file
    by file; a record's position is its number in its file."""

    def __init__(self, reader: Any) -> None:
        super().__init__(f"{type(reader).__name__}")
        self._foreign = reader
        self._queue: Optional[_OneFile] = None
        self._taken = 0  # records of the current file read so far
        self._last_keys: Dict[int, bytes] = {}

    def _start(self, filename) -> None:
        self._queue, self._taken = _OneFile(filename), 0

    def _read_records(self, n: int) -> Tuple[List[int], List[bytes], bool]:
        try:
            keys, values = self._foreign.read_up_to(self._queue, n)
        except OutOfRangeError:
            return [], [], True
        positions = list(range(self._taken, self._taken + len(values)))
        self._taken += len(values)
        self._last_keys = dict(zip(positions, keys))
        return positions, list(values), False

    def _keys(self, positions: List[int]) -> List[bytes]:
        return [self._last_keys[p] for p in positions]

    def _stop(self) -> None:
        self._queue = None


def reader_of(reader: Any) -> ReaderBase:
    """``reader`` as the plan reads with it: a queuepipe reader as it is, any other one with
    ``read_up_to`` wrapped."""
    return reader if isinstance(reader, ReaderBase) else _ForeignReader(reader)


def _open_at(reader: ReaderBase, path: str, position: int, skip: int,
             chunk_size: int) -> Optional[Tuple[List[int], List[bytes], bool]]:
    """Opens ``path`` with ``reader`` at its record at ``position``, passing over ``skip``
    records from there; returns the records read beyond them (None if none were read)."""
    drop_before = None if reader._start_at(path, position) else position
    if drop_before is None and not skip:
        return None
    try:
        return _pass_over(reader, drop_before, skip, chunk_size)
    except BaseException:
        reader._stop()
        raise


def _pass_over(reader: ReaderBase, drop_before: Optional[int], skip: int,
               chunk_size: int) -> Tuple[List[int], List[bytes], bool]:
    """Reads on past the records before ``drop_before`` (if not None), then ``skip`` more."""
    while True:
        positions, values, finished = reader._read_records(max(chunk_size, skip))
        positions, values = list(positions), list(values)
        k = 0
        if drop_before is not None:
            k = bisect.bisect_left(positions, drop_before)
            if k < len(positions):
                drop_before = None
        if drop_before is None:
            passed = min(skip, len(values) - k)
            k += passed
            skip -= passed
        if (drop_before is None and not skip and k < len(values)) or finished:
            return positions[k:], values[k:], finished


def _pack_bits(mask: np.ndarray) -> str:
    return base64.b64encode(np.packbits(mask).tobytes()).decode()


def _checked_marks(k: int, text: Any, count: int) -> np.ndarray:
    """The marks of open chunk ``k`` (``count`` records), as :func:`_pack_bits` wrote them:
    exactly their bytes, with a record left."""
    try:
        bits = np.frombuffer(base64.b64decode(text, validate=True), dtype=np.uint8) \
            if isinstance(text, str) else None
    except binascii.Error:
        bits = None
    if bits is None:
        raise InvalidArgumentError(f"{REFUSED}: open chunk {k}'s marks are not base64 text")
    if len(bits) != (count + 7) // 8:
        raise InvalidArgumentError(f"{REFUSED}: open chunk {k}'s marks are {len(bits)} bytes, "
                                   f"{(count + 7) // 8} expected")
    left = np.unpackbits(bits)[:count].astype(bool)
    if not left.any():
        raise InvalidArgumentError(f"{REFUSED}: open chunk {k} has no record left")
    return left


def _integer(value: Any, what: str, most: Optional[int] = None,
             low: Optional[int] = 0) -> int:
    """``value``, a JSON integer from ``low`` (None: any) to ``most`` (None: any)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{REFUSED}: {what} must be an integer, got "
                                   f"{type(value).__name__}")
    if (low is not None and value < low) or (most is not None and value > most):
        raise InvalidArgumentError(f"{REFUSED}: {what} is {value}, out of "
                                   f"[{low if low is not None else ''}, "
                                   f"{most if most is not None else ''}]")
    return value
