"""A chunk of records as one buffer: what the compiled core reads and walks without making a
Python object per record.

:class:`RecordChunk` holds the records of a chunk back to back in one ``bytes`` (with their
frames' headers and footers between them: the bytes the reader read, copied once), and
where each record's data starts and how long it is. ``parse_example`` walks it straight from
the buffer (``walk_examples_in``, the GIL released for the whole call); the per-record parser
(for a record the walk leaves) and the pure walker get the records as ``bytes`` (``chunk[i]``,
:meth:`RecordChunk.tolist`).
"""

from __future__ import annotations

from typing import List

import numpy as np

__all__ = ["RecordChunk"]


class RecordChunk:
    """Records lying in one buffer: record ``i`` is ``buffer[starts[i]:starts[i] +
    lengths[i]]``.

    Args:
      buffer: the bytes holding the records.
      starts, lengths: int64 arrays of one length, each record within ``buffer``.
    """

    __slots__ = ("buffer", "starts", "lengths")

    def __init__(self, buffer: bytes, starts: np.ndarray, lengths: np.ndarray) -> None:
        self.buffer = buffer
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int64)
        size = len(buffer)
        if self.starts.shape != self.lengths.shape or self.starts.ndim != 1 or (
                len(self.starts) and ((self.starts < 0) | (self.starts > size) | (self.lengths < 0)
                                      | (self.lengths > size - self.starts)).any()):
            raise ValueError(f"RecordChunk: starts and lengths must be one run of records "
                             f"each lying in the buffer of {size} bytes")

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> bytes:
        start = int(self.starts[index])
        return self.buffer[start:start + int(self.lengths[index])]

    def tolist(self) -> List[bytes]:
        """The records as a list of ``bytes``: records of one length, evenly spaced (fixed-size
        data), cut in one C loop by a void view; any others, one slice each."""
        n = len(self)
        if n > 1:
            length, stride = int(self.lengths[0]), int(self.starts[1] - self.starts[0])
            if 0 < length <= stride and (self.lengths == length).all() \
                    and (np.diff(self.starts) == stride).all():
                rows = np.lib.stride_tricks.as_strided(
                    np.frombuffer(self.buffer, np.uint8, offset=int(self.starts[0])),
                    shape=(n, length), strides=(stride, 1), writeable=False)
                return rows.view(f"V{length}")[:, 0].tolist()
        return list(map(self.buffer.__getitem__, map(slice, self.starts.tolist(),
                                                     (self.starts + self.lengths).tolist())))

    def __repr__(self) -> str:
        return f"<RecordChunk of {len(self)} records, {len(self.buffer)} bytes>"
