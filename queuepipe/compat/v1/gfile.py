"""TF1's ``tf.gfile`` and ``tf.io.gfile``: file helpers for local paths and, through fsspec,
paths with a protocol (``s3://``, ``gs://``, ``memory://``; see :mod:`queuepipe.remote`).

Both spellings are provided: TF1's (``Glob``, ``Exists``, ``GFile``, ``ListDirectory``,
``MakeDirs``, ...) in ``tf.gfile`` and TF2's (``glob``, ``exists``, ``GFile``, ``listdir``,
``makedirs``, ...) in ``tf.io.gfile``. Errors are TF's: a missing file or directory raises
``tf.errors.NotFoundError``, a copy or rename onto an existing file without ``overwrite``
``tf.errors.AlreadyExistsError``.
"""

from __future__ import annotations

import os
import shutil
from typing import IO, Any, Iterator, List, NamedTuple, Tuple

from queuepipe import remote
from queuepipe.errors import AlreadyExistsError, NotFoundError

__all__ = ["GFile", "exists", "glob", "listdir", "makedirs", "mkdir", "remove", "rmtree",
           "isdir", "copy", "rename", "stat", "walk", "StatResult", "TF1_NAMES", "TF2_NAMES"]


def _fs(path: Any) -> Tuple[Any, str]:
    """The fsspec filesystem of a path with a protocol, and the path as it knows it."""
    path = os.fsdecode(path)
    return remote._fsspec(path).core.url_to_fs(path)


def _not_found(path: Any, what: str = "No such file or directory") -> NotFoundError:
    return NotFoundError(f"{os.fsdecode(path)}; {what}")


class GFile:
    """A file opened as TF's ``tf.gfile.GFile(name, mode)``: ``"r"``/``"w"``/``"a"`` give
    ``str``, with ``"b"`` ``bytes``. A context manager; iterating gives lines.

    Raises:
      NotFoundError: (from the first read) reading a file that does not exist.
    """

    def __init__(self, name: Any, mode: str = "r"):
        self.name = os.fsdecode(name)
        self.mode = mode
        try:
            if remote.is_remote(self.name):
                self._file: IO[Any] = remote._fsspec(self.name).open(self.name, mode).open()
            else:
                self._file = open(self.name, mode)  # noqa: SIM115 - closed by close()
        except FileNotFoundError as e:
            raise _not_found(self.name) from e

    def __getattr__(self, name: str) -> Any:  # read, readline, write, seek, tell, flush...
        return getattr(self.__dict__["_file"], name)

    def readlines(self) -> List[Any]:
        return self._file.readlines()

    def size(self) -> int:
        return stat(self.name).length

    def close(self) -> None:
        self._file.close()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._file)

    def __enter__(self) -> "GFile":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _ask(path: Any, remote_question: str, local_question: Any) -> bool:
    if remote.is_remote(path):
        fs, inner = _fs(path)
        return bool(getattr(fs, remote_question)(inner))
    return bool(local_question(path))


def exists(path: Any) -> bool:
    return _ask(path, "exists", os.path.exists)


def isdir(path: Any) -> bool:
    return _ask(path, "isdir", os.path.isdir)


def glob(pattern: Any) -> List[str]:
    """The sorted paths matching ``pattern`` (an empty list when none does), as TF's."""
    return remote.glob(pattern)


def listdir(path: Any) -> List[str]:
    """The names of the entries of directory ``path`` (not their paths), as TF lists them."""
    if not isdir(path):
        raise _not_found(path, "Could not find directory") if not exists(path) \
            else NotFoundError(f"{os.fsdecode(path)} is not a directory")
    if remote.is_remote(path):
        fs, inner = _fs(path)
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(inner,
                                                                                detail=False))
    return sorted(os.listdir(path))


def makedirs(path: Any) -> None:
    """Creates ``path`` and its missing parents; an existing directory is fine."""
    if remote.is_remote(path):
        fs, inner = _fs(path)
        fs.makedirs(inner, exist_ok=True)
    else:
        os.makedirs(path, exist_ok=True)


def mkdir(path: Any) -> None:
    """Creates directory ``path`` (its parent must exist); an existing one is fine, as TF's."""
    if isdir(path):
        return
    if remote.is_remote(path):
        fs, inner = _fs(path)
        fs.mkdir(inner, create_parents=False)
        return
    try:
        os.mkdir(path)
    except FileNotFoundError as e:
        raise _not_found(path) from e


def remove(path: Any) -> None:
    if remote.is_remote(path):
        fs, inner = _fs(path)
        if not fs.exists(inner):
            raise _not_found(path)
        fs.rm_file(inner)
        return
    try:
        os.remove(path)
    except FileNotFoundError as e:
        raise _not_found(path) from e


def rmtree(path: Any) -> None:
    if not exists(path):
        raise _not_found(path)
    if remote.is_remote(path):
        fs, inner = _fs(path)
        fs.rm(inner, recursive=True)
    else:
        shutil.rmtree(path)


def _refuse_existing(path: Any, overwrite: bool) -> None:
    if not overwrite and exists(path):
        raise AlreadyExistsError(f"file already exists: '{os.fsdecode(path)}'")


def copy(oldpath: Any, newpath: Any, overwrite: bool = False) -> None:
    _refuse_existing(newpath, overwrite)
    with GFile(oldpath, "rb") as src, GFile(newpath, "wb") as dst:
        shutil.copyfileobj(src._file, dst._file)


def rename(oldpath: Any, newpath: Any, overwrite: bool = False) -> None:
    _refuse_existing(newpath, overwrite)
    if not exists(oldpath):
        raise _not_found(oldpath)
    if remote.is_remote(oldpath) or remote.is_remote(newpath):
        copy(oldpath, newpath, overwrite=True)
        remove(oldpath)
    else:
        os.replace(oldpath, newpath)


class StatResult(NamedTuple):
    """TF's ``FileStatistics``: ``length`` in bytes, ``mtime_nsec``, ``is_directory``."""

    length: int
    mtime_nsec: int
    is_directory: bool


def stat(path: Any) -> StatResult:
    if remote.is_remote(path):
        fs, inner = _fs(path)
        if not fs.exists(inner):
            raise _not_found(path)
        info = fs.info(inner)
        mtime = info.get("mtime", info.get("LastModified", 0))
        seconds = mtime.timestamp() if hasattr(mtime, "timestamp") else float(mtime or 0)
        return StatResult(int(info.get("size") or 0), int(seconds * 1e9),
                          info.get("type") == "directory")
    try:
        result = os.stat(path)
    except FileNotFoundError as e:
        raise _not_found(path) from e
    return StatResult(result.st_size, result.st_mtime_ns, os.path.isdir(path))


def walk(top: Any, in_order: bool = True) -> Iterator[Tuple[str, List[str], List[str]]]:
    """``(dirname, subdirectories, files)`` for ``top`` and each directory under it, top
    first unless ``in_order`` is False; nothing for a missing ``top``, as TF's."""
    if not isdir(top):
        return
    top = os.fsdecode(top)
    names = listdir(top)
    join = (lambda name: f"{top.rstrip('/')}/{name}") if remote.is_remote(top) \
        else (lambda name: os.path.join(top, name))
    subdirs = [n for n in names if isdir(join(n))]
    files = [n for n in names if n not in subdirs]
    if in_order:
        yield top, subdirs, files
    for name in subdirs:
        yield from walk(join(name), in_order)
    if not in_order:
        yield top, subdirs, files


TF2_NAMES = {"GFile": GFile, "exists": exists, "glob": glob, "isdir": isdir,
             "listdir": listdir, "makedirs": makedirs, "mkdir": mkdir, "remove": remove,
             "rmtree": rmtree, "copy": copy, "rename": rename, "stat": stat, "walk": walk}
TF1_NAMES = {"GFile": GFile, "Open": GFile, "FastGFile": GFile, "Exists": exists,
             "Glob": glob, "IsDirectory": isdir, "ListDirectory": listdir,
             "MakeDirs": makedirs, "MkDir": mkdir, "Remove": remove,
             "DeleteRecursively": rmtree, "Copy": copy, "Rename": rename, "Stat": stat,
             "Walk": walk}
