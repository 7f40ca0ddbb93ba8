"""Files read by offset from many threads, with a bounded number of them open.

The global shuffle reads each record of a chunk from wherever it lies, in any of thousands of
shards. Keeping every shard open (or memory-mapped) costs a descriptor each, more than a
process may hold (1,024 shards against the usual soft ``RLIMIT_NOFILE`` of 1,024), and a
map turns a file truncated by someone else into ``SIGBUS``. So shards are read with
``os.pread`` (a file that shrank gives fewer bytes, which the caller reports as a truncated
record), through descriptors kept in a least-recently-used set of at most ``limit``::

    thread 1: using(3) -> fd --pread--pread--> release --+
    thread 2: using(7) -> fd --pread---------> release --+--> idle descriptors, oldest closed
                                                              first once more than ``limit``

A descriptor is closed only when no thread uses it, so :meth:`OpenFiles.close` from another
thread never pulls a file from under a read (nor lets its number be reused mid-read).
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import resource
import threading
from typing import Dict, Iterator, List, Sequence

from queuepipe.errors import CancelledError, NotFoundError

__all__ = ["OpenFiles", "descriptor_budget"]

# The share of the process's descriptor limit the idle descriptors may take, and the most
# kept whatever the limit: the rest belongs to the program (sockets, other readers, logs).
_SHARE_OF_LIMIT = 4
_MOST_KEPT = 256


def descriptor_budget() -> int:
    """How many idle descriptors a set of files may keep: a quarter of the soft
    ``RLIMIT_NOFILE``, at least 1 and at most 256."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return _MOST_KEPT
    return max(1, min(_MOST_KEPT, soft // _SHARE_OF_LIMIT))


class OpenFiles:
    """Descriptors of ``paths`` (by their number in the list), opened on demand.

    Args:
      paths: the local files.
      limit: the most descriptors kept open while no thread uses them.
    """

    def __init__(self, paths: Sequence[str], limit: int) -> None:
        self._paths = list(paths)
        self._limit = limit
        self._lock = threading.Lock()
        self._idle: "collections.OrderedDict[int, int]" = collections.OrderedDict()  # LRU
        self._busy: Dict[int, List[int]] = {}  # file -> [descriptor, threads using it]
        self._closed = False

    @contextlib.contextmanager
    def using(self, file: int) -> Iterator[int]:
        """A descriptor of file ``file`` for ``os.pread``, kept from closing meanwhile.

        Raises:
          CancelledError: :meth:`close` was called (the pipeline stops).
          NotFoundError: the file does not exist any more.
          OSError: it cannot be opened (the message names it).
        """
        with self._lock:
            if self._closed:
                raise CancelledError(f"the files of '{self._paths[file]}' are closed")
            held = self._busy.get(file)
            if held is None:
                fd = self._idle.pop(file, None)
                if fd is None:
                    fd = self._open(file)
                held = self._busy[file] = [fd, 0]
            held[1] += 1
        try:
            yield held[0]
        finally:
            with self._lock:
                held[1] -= 1
                if not held[1]:
                    del self._busy[file]
                    if self._closed:
                        os.close(held[0])
                    else:
                        self._idle[file] = held[0]
                        self._trim()

    def _open(self, file: int) -> int:
        """Opens ``file`` (lock held), making room first when the process has none left."""
        path = self._paths[file]
        try:
            try:
                return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError as e:
                if e.errno != errno.EMFILE or not self._idle:
                    raise
                idle, self._idle = list(self._idle.values()), collections.OrderedDict()
                for fd in idle:
                    os.close(fd)
                return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError as e:
            raise NotFoundError(f"file not found: '{path}'") from e
        except OSError as e:
            raise OSError(e.errno, f"cannot open '{path}': {e.strerror}") from e

    def _trim(self) -> None:
        """Closes the least recently used idle descriptors beyond the limit (lock held)."""
        while len(self._idle) > self._limit:
            _, fd = self._idle.popitem(last=False)
            os.close(fd)

    def close(self) -> None:
        """Closes every idle descriptor now and each busy one when its read ends; later
        :meth:`using` calls raise ``CancelledError``. Idempotent; safe from any thread."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle.values()), collections.OrderedDict()
        for fd in idle:
            os.close(fd)
