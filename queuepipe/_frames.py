"""The TFRecord frame, and checking many frames at once.

A record is framed as::

    uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)

little-endian, with ``masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (mod 2**32)``.

Checking a record's two checksums one call each costs more in Python than the CRC itself.
So the readers check many frames at once: length checksums by a table-driven CRC-32C
vectorized over the headers (:func:`_length_checks_out`, and over every position of a
window to find the next header after damage, :func:`_header_matches`); data checksums by one
CRC-32C call over a whole run of frames against what intact frames give
(:func:`_run_checks_out` for records of one length, :func:`_mixed_run_checks_out` for any),
one call per record only to find the damaged one. :func:`unframe_many` does both for frames
read by offset (the global shuffle).

Where the compiled core is loaded (:mod:`queuepipe._core`), :func:`masked_crc32c` and
:func:`frame` are its C functions, and the record scanner takes the frames of a whole buffer
in one C call (``queuepipe.records``); the Python functions here are the reference they are
tested against and the path that runs without the core.
"""

from __future__ import annotations

import struct
from typing import Callable, Dict, List, Sequence, Tuple, Union

import numpy as np

from queuepipe._core import core
from queuepipe.errors import DataLossError

Buffer = Union[bytes, bytearray, memoryview]

_HEADER = struct.Struct("<QI")  # length, masked crc of the 8 length bytes
_LENGTH = struct.Struct("<Q")
_FOOTER = struct.Struct("<I")  # masked crc of the data
HEADER_BYTES = _HEADER.size
FRAME_BYTES = _HEADER.size + _FOOTER.size  # what framing adds to each record
_MASK_DELTA = 0xA282EAD8
_MIN_RUN = 8  # shorter runs of records are cheaper one by one


def _load_crc32c() -> Callable[..., int]:
    """``crc32c.crc32c``, taken from the package's C extension without running its
    ``__init__`` where the package is laid out so (crc32c 2.4 and later).

    That ``__init__`` imports ``importlib.metadata`` to read its own version: about 20 ms,
    spent before a pipeline's first batch. Any other layout is imported as usual.
    """
    import importlib.machinery
    import importlib.util
    import sys

    loaded = sys.modules.get("crc32c._crc32c") or sys.modules.get("crc32c")
    if loaded is None:
        package = importlib.util.find_spec("crc32c")  # finds it without importing it
        for folder in (package.submodule_search_locations or []) if package else []:
            finder = importlib.machinery.FileFinder(folder, (
                importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES))
            spec = finder.find_spec("crc32c._crc32c")
            if spec is not None and spec.loader is not None:
                loaded = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(loaded)
                sys.modules["crc32c._crc32c"] = loaded  # the package's own import reuses it
                break
    if loaded is None or not hasattr(loaded, "crc32c"):
        import crc32c
        return crc32c.crc32c
    return loaded.crc32c


_crc = _load_crc32c()


def _masked_crc32c(data: Buffer) -> int:
    """Returns the masked CRC-32C of ``data`` that TFRecord framing stores."""
    crc = _crc(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _frame(record: Buffer) -> bytes:
    """Returns ``record`` framed as one TFRecord: header, data, footer."""
    length = struct.pack("<Q", len(record))
    return b"".join((length, _FOOTER.pack(_masked_crc32c(length)), record,
                     _FOOTER.pack(_masked_crc32c(record))))


masked_crc32c: Callable[[Buffer], int] = core.masked_crc32c if core else _masked_crc32c
frame: Callable[[Buffer], bytes] = core.frame if core else _frame


def unframe_many(frames: Sequence[Buffer], lengths: np.ndarray,
                 where: Callable[[int], Tuple[str, int]]) -> np.ndarray:
    """The data of framed records (``frames[i]``: the bytes a ``.index`` entry of
    ``lengths[i]`` bytes points at, a memory map's slice say), as an object array of bytes,
    after checking each one's length and both checksums.

    The headers of all records are checked at once (a table-driven CRC vectorized over the
    records). The data of records that share their length with at least ``_MIN_RUN``
    others is checked by one CRC-32C call over all of them (see :func:`_run_checks_out`);
    the rest, one C call each, with no Python frame per record. With the compiled core, one
    C call checks them all, and these checks run only to name the damage it found.

    Args:
      where: ``i`` -> (file, offset) of record ``i``, for the messages.

    Raises:
      DataLossError: a damaged record, naming its file and offset as the record scanner's
        messages do.
    """
    n = len(frames)
    out = np.empty(n, dtype=object)
    if core is not None and n:
        # The core checks every frame in one call, without the GIL; on damage the checks
        # below find it and say what it is.
        records = core.unframe(frames, np.ascontiguousarray(lengths, dtype=np.int64))
        if records is not None:
            out[:] = records
            return out
    sizes = np.fromiter(map(len, frames), dtype=np.int64, count=n)
    short = np.flatnonzero((sizes != lengths) | (lengths < FRAME_BYTES))
    if len(short):
        i = int(short[0])
        path, offset = where(i)
        raise DataLossError(f"truncated record at {offset}: the record needs "
                            f"{int(lengths[i])} bytes, the file holds {int(sizes[i])} from "
                            f"there, in file '{path}'", path=path, offset=offset)
    if not n:
        return out
    headers = np.frombuffer(b"".join([frame[:HEADER_BYTES] for frame in frames]),
                            dtype=np.uint8).reshape(n, HEADER_BYTES)
    _check_headers(headers, lengths - FRAME_BYTES, where)
    strides, counts = np.unique(lengths, return_counts=True)
    for stride in strides[counts >= _MIN_RUN].tolist():
        group = np.flatnonzero(lengths == stride)
        rows = np.frombuffer(b"".join([frames[i] for i in group.tolist()]),
                             dtype=np.uint8).reshape(len(group), stride)
        out[group] = _run_data(rows, lambda k: where(int(group[k])))
    rest = np.flatnonzero(np.isin(lengths, strides[counts < _MIN_RUN])).tolist()
    if rest:
        records = [bytes(frames[i][HEADER_BYTES:-4]) for i in rest]
        stored = np.frombuffer(b"".join([frames[i][-4:] for i in rest]), dtype="<u4")
        _check_data(records, stored, lambda k: where(rest[k]))
        out[rest] = records
    return out


def _check_headers(headers: np.ndarray, sizes: np.ndarray,
                   where: Callable[[int], Tuple[str, int]]) -> None:
    """Checks ``[count, 12]`` uint8 record headers: their length checksums, and that each
    gives ``sizes`` data bytes."""
    intact = _length_checks_out(headers)
    given = np.ascontiguousarray(headers[:, :8]).view("<u8").ravel()
    damaged = np.flatnonzero(~intact | (given != sizes))
    if len(damaged):
        i = int(damaged[0])
        path, offset = where(i)
        what = "length checksum mismatch" if not intact[i] else \
            f"its header gives {int(given[i])} data bytes, its index entry {int(sizes[i])}"
        raise DataLossError(f"corrupted record at {offset}: {what} in file '{path}'",
                            path=path, offset=offset)


def _length_checks_out(headers: np.ndarray) -> np.ndarray:
    """Per ``[count, 12]`` uint8 record header, whether its length checksum holds (a
    table-driven CRC-32C vectorized over the headers)."""
    crc = np.full(len(headers), 0xFFFFFFFF, dtype=np.uint32)
    for k in range(8):
        crc = _CRC_TABLE[(crc ^ headers[:, k]) & 0xFF] ^ (crc >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    masked = ((crc >> 15) | (crc << 17)) + np.uint32(_MASK_DELTA)
    return masked == np.ascontiguousarray(headers[:, 8:HEADER_BYTES]).view("<u4").ravel()


def _data_intact(records: List[bytes], stored: np.ndarray) -> np.ndarray:
    """Per record, whether its data's masked CRC-32C equals ``stored`` (uint32): one C call
    each, by map (no Python frame per record), compared in one NumPy operation."""
    computed = np.fromiter(map(_crc, records), dtype=np.uint32, count=len(records))
    return ((computed >> np.uint32(15)) | (computed << np.uint32(17))) \
        + np.uint32(_MASK_DELTA) == stored


def _check_data(records: List[bytes], stored: np.ndarray,
                where: Callable[[int], Tuple[str, int]]) -> None:
    """Checks each record's data against its stored (masked) checksum, one C call each."""
    good = _data_intact(records, stored)
    if not good.all():
        path, offset = where(int(good.argmin()))
        raise DataLossError(f"corrupted record at {offset + HEADER_BYTES}: data checksum "
                            f"mismatch in file '{path}'", path=path,
                            offset=offset + HEADER_BYTES)


def _run_data(frames: np.ndarray, where: Callable[[int], Tuple[str, int]]) -> List[bytes]:
    """The data of ``frames``, ``[count, stride]`` uint8 rows of one length whose headers
    are checked, after checking it in one call (one call each only to find the damage)."""
    length = frames.shape[1] - FRAME_BYTES
    records = frames[:, HEADER_BYTES:HEADER_BYTES + length].view(f"V{length}")[:, 0] \
        .tolist() if length else [b""] * len(frames)
    if not _run_checks_out(frames, length):
        _check_data(records, np.ascontiguousarray(
            frames[:, HEADER_BYTES + length:]).view("<u4").ravel(), where)
    return records


def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1)
    return table.astype(np.uint32)


_CRC_TABLE = _crc_table()


def _header_matches(window: Buffer) -> np.ndarray:
    """Positions ``i`` in ``window`` where the 12 bytes from ``i`` form a valid record header.

    Computes the masked CRC-32C of every 8-byte window at once (table-driven CRC, vectorized
    over positions), so a resynchronising scan is linear in the bytes it passes over.
    """
    a = np.frombuffer(window, dtype=np.uint8)
    n = len(a) - HEADER_BYTES + 1
    if n <= 0:
        return np.zeros(0, dtype=np.intp)
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    for k in range(8):
        crc = _CRC_TABLE[(crc ^ a[k:k + n]) & 0xFF] ^ (crc >> 8)
    crc ^= np.uint32(0xFFFFFFFF)
    masked = ((crc >> 15) | (crc << 17)) + np.uint32(_MASK_DELTA)
    stored = np.zeros(n, dtype=np.uint32)
    for k in range(4):
        stored |= a[8 + k:8 + k + n].astype(np.uint32) << (8 * k)
    return np.flatnonzero(masked == stored)


# The header of a run's frames -> the CRC-32C of k intact frames with that header back to
# back, their stored checksums unmasked, for k = 0, 1, ... (see _run_checks_out)
_RUN_CRCS: Dict[bytes, List[int]] = {}
_MAX_RUN_TABLES = 64
_RUN_CHECK_FRAMES = 4096  # frames checked by one call, so that a table stays this short


def _run_crc(header: bytes, length: int, count: int) -> int:
    """What :func:`_run_checks_out` expects of ``count`` intact frames with ``header``."""
    table = _RUN_CRCS.get(header)
    if table is None or len(table) <= count:
        # The data do not matter (see _run_checks_out): frames of zeros stand for any.
        table = list(table or [0])
        frame_ = header + bytes(length) + _FOOTER.pack(_crc(bytes(length)))
        while len(table) <= count:
            table.append(_crc(frame_, table[-1]))
        if len(_RUN_CRCS) >= _MAX_RUN_TABLES:
            _RUN_CRCS.clear()
        _RUN_CRCS[header] = table  # published whole: other threads may read it meanwhile
    return table[count]


def _run_checks_out(frames: np.ndarray, length: int) -> bool:
    """True when every frame of ``frames`` (``[count, stride]`` uint8, records of ``length``
    data bytes whose headers are equal and checked) stores the checksum of its data.

    One CRC-32C call over the whole run replaces one per record. The CRC-32C of any bytes
    followed by their own (unmasked, little-endian) CRC-32C does not depend on those bytes,
    and the CRC is affine in what came before; so, with every stored checksum unmasked, the
    run's CRC-32C depends only on the header and the count (:func:`_run_crc`) when every
    record is intact. One damaged record changes it exactly when its own check would fail (a
    CRC's remainder is shifted by the record's place, which keeps it nonzero); damage in
    several records could cancel out only by the same 1-in-2**32 chance at which one damaged
    record passes its own check. The single call runs the CPU's CRC instruction on three
    streams at once over the whole run, without the GIL, where a call per record of about
    800 bytes waits on the instruction's latency.
    """
    header = frames[0, :HEADER_BYTES].tobytes()
    for start in range(0, len(frames), _RUN_CHECK_FRAMES):
        check = frames[start:start + _RUN_CHECK_FRAMES].copy()
        footers = check[:, HEADER_BYTES + length:].view("<u4")
        masked = footers - np.uint32(_MASK_DELTA)
        footers[:] = (masked << np.uint32(15)) | (masked >> np.uint32(17))  # rotated back
        if _crc(check) != _run_crc(header, length, len(check)):
            return False
    return True


# Data length -> the CRC-32C of that many zero bytes (see _mixed_run_checks_out).
_ZEROS_CRCS: Dict[int, int] = {}
_MAX_ZEROS_CRCS = 4096


def _zeros_crcs(sizes: np.ndarray) -> np.ndarray:
    """The CRC-32C of ``sizes[i]`` zero bytes, for every i (uint32)."""
    distinct, where = np.unique(sizes, return_inverse=True)
    crcs = []
    for size in distinct.tolist():
        crc = _ZEROS_CRCS.get(size)
        if crc is None:
            if len(_ZEROS_CRCS) >= _MAX_ZEROS_CRCS:
                _ZEROS_CRCS.clear()
            crc = _ZEROS_CRCS[size] = _crc(bytes(size))
        crcs.append(crc)
    return np.array(crcs, dtype=np.uint32)[where]


def _mixed_run_checks_out(frames: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> bool:
    """True when every frame of ``frames`` (uint8: frames back to back, of any data
    lengths, starting at ``starts`` with ``sizes`` data bytes, their headers checked) stores
    the checksum of its data.

    :func:`_run_checks_out` for frames of different lengths: with every stored checksum
    unmasked, the CRC-32C of the frames depends only on their headers (the lengths), so
    that it equals that of a stand-in with the same headers, zeros for data and the
    checksums of those zeros, when every record is intact.
    """
    footers = (starts + HEADER_BYTES + sizes)[:, None] + np.arange(4)
    actual = frames.copy()
    masked = np.ascontiguousarray(actual[footers]).view("<u4").ravel() - np.uint32(_MASK_DELTA)
    actual[footers] = ((masked << np.uint32(15)) | (masked >> np.uint32(17))) \
        .view(np.uint8).reshape(-1, 4)
    stand_in = np.zeros(len(frames), dtype=np.uint8)
    headers = starts[:, None] + np.arange(HEADER_BYTES)
    stand_in[headers] = frames[headers]
    stand_in[footers] = _zeros_crcs(sizes).astype("<u4").view(np.uint8).reshape(-1, 4)
    return _crc(actual) == _crc(stand_in)
