"""Files in object storage: the small fsspec layer that records, readers and producers share.

A path with a protocol (``s3://bucket/key``, ``gs://...``, ``memory://...``, ``file://...``) is
opened and globbed with `fsspec <https://filesystem-spec.readthedocs.io>`_
(``pip install '<queuepipe checkout>[remote]'``; add ``s3fs`` or ``gcsfs`` for the cloud you
use); a plain path uses the builtin ``open`` and :mod:`glob`, so the core never needs fsspec.

Storage options (credentials, an endpoint, a region) reach the filesystem in one of two ways,
both read by fsspec itself each time it builds a filesystem:

- in code, with :func:`configure`::

      qp.remote.configure("s3", endpoint_url="http://127.0.0.1:9000", key="...", secret="...")
      files = qp.train.match_filenames_once("s3://bucket/train-*.tfrecord")

  or scoped to a block: ``with qp.remote.configure("s3", anon=True): ...``;
- from the environment, without code: ``FSSPEC_S3_ENDPOINT_URL=http://127.0.0.1:9000``,
  ``FSSPEC_S3='{"anon": true}'`` (any ``FSSPEC_<PROTOCOL>_<OPTION>``, read when fsspec is
  imported), plus each backend's own variables (``AWS_ACCESS_KEY_ID``, ...).

Options given to :func:`configure` win over the environment's.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import stat
from typing import IO, Any, Dict, List, Optional, Union

from queuepipe.errors import InvalidArgumentError, NotFoundError

__all__ = ["is_remote", "open_file", "glob", "configure"]

PathLike = Union[str, bytes, "os.PathLike[str]"]


def is_remote(path: PathLike) -> bool:
    """True when ``path`` has a protocol (``scheme://``) and so is opened through fsspec."""
    return "://" in os.fsdecode(path)


def _fsspec(path: str):
    try:
        import fsspec
    except ImportError as e:
        raise ImportError(
            f"'{path}' has a protocol and needs fsspec: "
            f"pip install '<queuepipe checkout>[remote]'") from e
    return fsspec


def open_file(path: PathLike, mode: str = "rb") -> IO[bytes]:
    """Opens ``path`` in binary ``mode``: through fsspec when it has a protocol, else ``open``.

    Reads of a local file are unbuffered (the record scanner does its own buffering); remote
    files keep fsspec's read-ahead cache, which is what makes small reads over a network cheap.

    Args:
      path: a local path, or a URL with a protocol (``s3://bucket/key``).
      mode: ``"rb"``, ``"wb"`` or ``"ab"``.

    Returns:
      A binary file object; the caller closes it.

    Raises:
      NotFoundError: reading a file that does not exist (also a ``FileNotFoundError``).
      IsADirectoryError: reading a directory.
      InvalidArgumentError: reading something else that is not a regular file (a named
        pipe, a device, a socket): a named pipe would block the reader in ``open`` until a
        writer came, and none of them can be measured or read again for the next epoch.
      ImportError: a path with a protocol and fsspec (or the protocol's backend) is missing.
    """
    path = os.fsdecode(path)
    try:
        if is_remote(path):
            return _fsspec(path).open(path, mode).open()
        if mode == "rb":
            return _open_regular(path)
        return open(path, mode)
    except FileNotFoundError as e:
        raise NotFoundError(f"file not found: '{path}'") from e


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _open_regular(path: str) -> IO[bytes]:
    """Opens a local regular file for unbuffered reading; refuses anything else.

    The file is opened without blocking (``O_NONBLOCK``), which opening a named pipe that has
    no writer needs, and checked by ``fstat`` on what was opened, not by a ``stat`` before.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):  # what open() raises for one, as before
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise InvalidArgumentError(
                f"cannot read '{path}': it is {kind}, not a regular file; queuepipe reads "
                f"files it can measure and read again each epoch (copy the data to a file)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return open(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def glob(pattern: PathLike) -> List[str]:
    """The sorted paths matching ``pattern`` (``*``, ``?``, ``[...]``, and ``**`` remotely).

    A pattern with a protocol is matched by its fsspec filesystem and the matches keep the
    protocol (``s3://bucket/train-*`` gives ``s3://bucket/train-00000``, ...), so they can be
    opened again by :func:`open_file`. A plain pattern is matched by :func:`glob.glob`.

    Returns:
      The matches, sorted; an empty list when nothing matches.

    Raises:
      ImportError: a pattern with a protocol and fsspec (or the backend) is missing.
    """
    pattern = os.fsdecode(pattern)
    if not is_remote(pattern):
        return sorted(_glob.glob(pattern))
    fs, fs_pattern = _fsspec(pattern).core.url_to_fs(pattern)
    return sorted(fs.unstrip_protocol(match) for match in fs.glob(fs_pattern))


class _Configured:
    """What :func:`configure` returns: a context manager that puts the old options back."""

    def __init__(self, protocol: str, previous: Optional[Dict[str, Any]]):
        self._protocol = protocol
        self._previous = previous

    def __enter__(self) -> "_Configured":
        return self

    def __exit__(self, *exc_info) -> None:
        self.restore()

    def restore(self) -> None:
        """Puts back the options ``protocol`` had before the :func:`configure` call."""
        conf = _fsspec(self._protocol + "://").config.conf
        if self._previous is None:
            conf.pop(self._protocol, None)
        else:
            conf[self._protocol] = self._previous


def configure(protocol: str, **storage_options: Any) -> _Configured:
    """Sets the storage options fsspec uses for every later file of ``protocol``.

    They are fsspec's own per-protocol defaults (``fsspec.config.conf``), so every open and glob
    of that protocol uses them, from queuepipe or from any other library, in every thread.
    Options given again replace the earlier value of the same option; the others stay.
    Filesystems that fsspec built earlier with other options are not changed; new ones are.

    Args:
      protocol: ``"s3"``, ``"gcs"``, ``"memory"``, ... (as in ``s3://``).
      **storage_options: keyword arguments of that protocol's filesystem, for s3fs e.g.
        ``endpoint_url``, ``key``, ``secret``, ``anon``, ``client_kwargs``.

    Returns:
      A handle whose ``restore()`` (or leaving it as a context manager) puts the options back
      as they were.

    Raises:
      ValueError: ``protocol`` is empty or contains ``://``.
      ImportError: fsspec is not installed.
    """
    if not protocol or "://" in protocol:
        raise ValueError(f"protocol must be a name such as 's3', got {protocol!r}")
    conf = _fsspec(protocol + "://").config.conf
    previous = conf.get(protocol)
    conf[protocol] = {**(previous or {}), **storage_options}
    return _Configured(protocol, None if previous is None else dict(previous))
