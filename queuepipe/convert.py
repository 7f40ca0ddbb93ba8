"""Turn arrays kept in common formats into Examples: IDX (MNIST), CSV and NPZ.

``queuepipe convert`` uses these to write TFRecord shards from data that is not yet in
TFRecord form. Each ``*_examples`` function yields serialized :class:`~queuepipe.Example`
records, ready for :func:`queuepipe.write_shards` or a :class:`~queuepipe.TFRecordWriter`:

- IDX, the format of MNIST and Fashion-MNIST (raw or gzip-compressed; big-endian dimensions
  after a magic number, 2051 for the image file and 2049 for the label file): one Example per
  image, ``image`` holding the image's bytes in row-major order and ``label`` the int64 label.
- CSV with a header line: one Example per row, one feature per column, the column's type
  (int64, float or bytes) inferred from all its non-empty cells.
- NPZ (``numpy.savez``): one Example per index of the arrays' first axis, one feature per
  array, holding that slice flattened.

Usage::

    import queuepipe as qp
    from queuepipe.convert import idx_examples

    records = idx_examples("train-images-idx3-ubyte.gz")   # labels file found by its name
    qp.write_shards(records, "mnist/", num_shards=4)
"""

from __future__ import annotations

import csv
import gzip
import os
import re
import struct
from typing import Dict, Iterator, Optional

import numpy as np

from queuepipe.errors import DataLossError, InvalidArgumentError
from queuepipe.parsing._csv import _whole
from queuepipe.protos import make_example

__all__ = ["FORMATS", "guess_format", "read_idx", "find_idx_labels", "idx_examples",
           "csv_column_types", "csv_examples", "npz_examples", "examples_from"]

FORMATS = ("idx", "csv", "npz")

_GZIP_MAGIC = b"\x1f\x8b"
# IDX type byte -> big-endian NumPy dtype (http://yann.lecun.com/exdb/mnist/, "THE IDX FILE
# FORMAT").
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def guess_format(path: str) -> Optional[str]:
    """Returns ``"npz"``, ``"csv"`` or ``"idx"`` from the file name, or None if it says nothing."""
    name = os.path.basename(path).lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith(".npz"):
        return "npz"
    if name.endswith(".csv"):
        return "csv"
    if re.search(r"idx\d", name) or name.endswith((".idx", "-ubyte")):
        return "idx"
    return None


# ---------------------------------------------------------------------------------------------
# IDX


def read_idx(path: str) -> np.ndarray:
    """Reads an IDX file (raw, or gzip-compressed) into a NumPy array in native byte order.

    Args:
      path: the file; gzip compression is recognised by its magic bytes, not its name.

    Returns:
      The array, with the file's dimensions (``(60000, 28, 28)`` for MNIST training images).

    Raises:
      FileNotFoundError: ``path`` does not exist.
      InvalidArgumentError: the file does not start with an IDX magic number.
      DataLossError: the file holds fewer or more data bytes than its dimensions need.
    """
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == _GZIP_MAGIC:
        data = gzip.decompress(data)
    if len(data) < 4 or data[:2] != b"\0\0" or data[2] not in _IDX_DTYPES:
        raise InvalidArgumentError(
            f"'{path}' is not an IDX file: it starts with bytes {data[:4].hex(' ')!r}, expected "
            "00 00 <type> <ndim> (MNIST images: 00 00 08 03 = 2051, labels: 00 00 08 01 = 2049)")
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise DataLossError(f"'{path}' ends inside its IDX header ({len(data)} of {header} bytes)",
                            path=path, offset=len(data))
    dims = struct.unpack(f">{ndim}I", data[4:header])
    need = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    if len(data) - header != need:
        raise DataLossError(
            f"'{path}' holds {len(data) - header} data bytes after its header, but its "
            f"dimensions {list(dims)} of {dtype.itemsize}-byte values need {need}",
            path=path, offset=header + min(need, len(data) - header))
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)
    return array.astype(dtype.newbyteorder("="))


def find_idx_labels(images_path: str) -> str:
    """Returns the label file that goes with an IDX image file, found by MNIST's naming.

    ``train-images-idx3-ubyte.gz`` pairs with ``train-labels-idx1-ubyte.gz`` (also tried with
    and without ``.gz``); ``train-images.idx3-ubyte`` with ``train-labels.idx1-ubyte``.

    Raises:
      InvalidArgumentError: no such file exists; the message lists the names tried.
    """
    folder, name = os.path.split(images_path)
    guess = name.replace("images", "labels").replace("idx3", "idx1")
    stem = guess[:-3] if guess.endswith(".gz") else guess
    tried = []
    for candidate in dict.fromkeys([guess, stem, stem + ".gz"]):
        if candidate != name:
            tried.append(os.path.join(folder, candidate))
            if os.path.exists(tried[-1]):
                return tried[-1]
    raise InvalidArgumentError(
        f"no label file found for IDX images '{images_path}' (tried {tried}); "
        "name it with --labels")


def idx_examples(images_path: str, labels_path: Optional[str] = None) -> Iterator[bytes]:
    """Yields one serialized Example per image of an IDX image file and its label file.

    Each Example holds ``image`` (bytes: the image's values in row-major order, native byte
    order; for MNIST, ``rows * cols`` uint8 pixels) and ``label`` (int64). Both files are read
    and checked before the first record is yielded.

    Args:
      images_path: the IDX image file (raw or gzip).
      labels_path: its IDX label file; None finds it with :func:`find_idx_labels`.

    Raises:
      InvalidArgumentError: a file is not IDX, the label file is not one-dimensional, or the
        two files hold different numbers of items.
      DataLossError: a file is shorter or longer than its header says.
    """
    labels_path = labels_path or find_idx_labels(images_path)
    images, labels = read_idx(images_path), read_idx(labels_path)
    if labels.ndim != 1:
        raise InvalidArgumentError(f"'{labels_path}' is not an IDX label file: it has "
                                   f"dimensions {list(labels.shape)}, expected one")
    if images.ndim < 1 or len(images) != len(labels):
        raise InvalidArgumentError(
            f"'{images_path}' holds {images.shape[0] if images.ndim else 0} images but "
            f"'{labels_path}' holds {len(labels)} labels")

    def records():
        for image, label in zip(images, labels):
            yield make_example({"image": image.tobytes(), "label": int(label)}).SerializeToString()

    return records()


# ---------------------------------------------------------------------------------------------
# CSV

# Patterns whose first match is their longest, read with _whole in one pass as decode_csv's
# are (see queuepipe/parsing/_csv.py): "\d+\.?\d*" with fullmatch was quadratic in the digits
# of a cell of digits and one bad character.
_INT = re.compile(r"[+-]?(\d+)")
_FLOAT = re.compile(r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|nan|infinity|inf)", re.I)
_INT64_MAX = 2**63 - 1
_INT64_DIGITS = 19  # past them a cell is out of range, and not given to int() (4,300 at most)


def _csv(path: str, delimiter: str):
    """Yields the checked header (a list of column names), then ``(line_number, row)`` per row."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter=delimiter)
        header = next(reader, None)
        if not header or not any(header):
            raise InvalidArgumentError(f"'{path}' has no header line: the first line must name "
                                       "the columns")
        duplicates = sorted({name for name in header if header.count(name) > 1})
        if duplicates:
            raise InvalidArgumentError(f"'{path}': column names {duplicates} appear more than "
                                       "once in the header")
        yield header
        for row in reader:
            if not row:
                continue  # a blank line
            if len(row) != len(header):
                raise InvalidArgumentError(
                    f"'{path}' line {reader.line_num}: {len(row)} fields, but the header names "
                    f"{len(header)} columns")
            yield reader.line_num, row


def csv_column_types(path: str, delimiter: str = ",") -> Dict[str, str]:
    """Infers each column's feature type from all of its non-empty cells.

    A column is ``"int64"`` when every non-empty cell is an integer in int64's range,
    ``"float"`` when every one is a number, else ``"bytes"`` (also when every cell is empty).

    Returns:
      column name -> ``"int64"``, ``"float"`` or ``"bytes"``, in header order.

    Raises:
      InvalidArgumentError: no header, duplicate column names, or a row of the wrong length.
    """
    rows = _csv(path, delimiter)
    header = next(rows)
    types = dict.fromkeys(header, "int64")
    seen = set()  # columns with a non-empty cell
    for _, row in rows:
        for name, cell in zip(header, row):
            cell = cell.strip()
            if not cell or types[name] == "bytes":
                continue
            seen.add(name)
            if types[name] == "int64" and not _is_int64(cell):
                types[name] = "float"
            if types[name] == "float" and not _whole(_FLOAT, cell):
                types[name] = "bytes"
    return {name: kind if name in seen else "bytes" for name, kind in types.items()}


def _is_int64(cell: str) -> bool:
    match = _whole(_INT, cell)
    return bool(match) and len(match[1].lstrip("0")) <= _INT64_DIGITS \
        and abs(int(cell)) <= _INT64_MAX


EMPTY_CELLS = ("error", "default", "absent")


def csv_examples(path: str, delimiter: str = ",", empty: str = "error") -> Iterator[bytes]:
    """Yields one serialized Example per data row of a CSV file with a header line.

    Every column becomes a feature named after it, typed by :func:`csv_column_types` (the file
    is read twice: once to infer the types, once to convert). A cell of a bytes column is its
    UTF-8 text, as it is (empty included).

    Args:
      path: the CSV file.
      delimiter: the field separator.
      empty: what an empty cell of a number column becomes: ``"error"`` stops at it, naming
        its line and column; ``"default"`` writes 0; ``"absent"`` writes a present-but-empty
        feature (no value: such a column parses as a ``VarLenFeature``, not a FixedLen one).

    Raises:
      InvalidArgumentError: no header, duplicate column names, a row of the wrong length (the
        message names the line), an empty number cell with ``empty="error"``, or an unknown
        ``empty``.
    """
    if empty not in EMPTY_CELLS:
        raise InvalidArgumentError(f"empty must be one of {list(EMPTY_CELLS)}, got {empty!r}")
    types = csv_column_types(path, delimiter)
    convert = {"int64": int, "float": float}

    def records():
        rows = _csv(path, delimiter)
        header = next(rows)
        for line, row in rows:
            values = {}
            for name, cell in zip(header, row):
                kind = types[name]
                if kind == "bytes":
                    values[name] = cell.encode("utf-8")
                    continue
                cell = cell.strip()
                if cell:
                    values[name] = [convert[kind](cell)]
                elif empty == "error":
                    raise InvalidArgumentError(
                        f"'{path}' line {line}, column '{name}' ({kind}): the cell is empty; "
                        f"choose what it becomes: empty='default' (0) or 'absent' (no value)")
                else:
                    values[name] = [convert[kind](0)] if empty == "default" else []
            yield make_example(values).SerializeToString()

    return records()


# ---------------------------------------------------------------------------------------------
# NPZ


def npz_examples(path: str) -> Iterator[bytes]:
    """Yields one serialized Example per index of the first axis of the arrays in a ``.npz``.

    Each array becomes a feature named after it: integer and bool arrays int64, float arrays
    float, string arrays bytes; the slice ``array[i]`` is flattened row-major.

    Raises:
      InvalidArgumentError: the file holds no arrays, a scalar (0-d) array, an array of
        another dtype, or arrays whose first dimensions differ.
    """
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    if not arrays:
        raise InvalidArgumentError(f"'{path}' holds no arrays")
    lengths = {}
    for name, array in arrays.items():
        if array.ndim == 0:
            raise InvalidArgumentError(f"array '{name}' in '{path}' is a scalar; every array "
                                       "needs a first axis that indexes the records")
        if array.dtype.kind not in "biufSU":
            raise InvalidArgumentError(f"array '{name}' in '{path}' has dtype {array.dtype}; "
                                       "expected integers, bools, floats or strings")
        lengths[name] = len(array)
    if len(set(lengths.values())) > 1:
        raise InvalidArgumentError(f"the arrays in '{path}' differ in their first dimension: "
                                   f"{lengths}; each index of it must be one record")

    def records():
        for i in range(next(iter(lengths.values()))):
            yield make_example({name: array[i] for name, array in arrays.items()}
                               ).SerializeToString()

    return records()


def examples_from(path: str, fmt: Optional[str] = None, *,
                  labels: Optional[str] = None, empty: str = "error") -> Iterator[bytes]:
    """Yields serialized Examples from ``path`` in format ``fmt`` (guessed from the name if None).

    Args:
      path: the source file.
      fmt: ``"idx"``, ``"csv"`` or ``"npz"``; None guesses with :func:`guess_format`.
      labels: for IDX, the label file (None finds it by name).
      empty: for CSV, what an empty number cell becomes (see :func:`csv_examples`).

    Raises:
      InvalidArgumentError: ``fmt`` is unknown or cannot be guessed, or the data is bad (see
        the ``*_examples`` functions).
    """
    fmt = fmt or guess_format(path)
    if fmt not in FORMATS:
        raise InvalidArgumentError(
            f"cannot tell the format of '{path}' from its name; pass one of {list(FORMATS)}"
            if fmt is None else f"unknown format {fmt!r}; expected one of {list(FORMATS)}")
    if labels is not None and fmt != "idx":
        raise InvalidArgumentError(f"a label file only goes with IDX images, not format {fmt!r}")
    if fmt == "idx":
        return idx_examples(path, labels)
    if fmt == "csv":
        return csv_examples(path, empty=empty)
    return npz_examples(path)
