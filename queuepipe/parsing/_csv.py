"""``decode_csv``: CSV records to typed columns, split and converted as TF's kernel does."""

from __future__ import annotations

import decimal
import math
import re
from typing import Any, List, Optional, Sequence

import numpy as np

from queuepipe import dtypes as _dtypes
from queuepipe.errors import InvalidArgumentError


_CSV_DTYPES = {_dtypes.int32: "int32", _dtypes.int64: "int64", _dtypes.float32: "float",
               np.dtype(np.float64): "double", _dtypes.string: "string"}
# The number patterns are read with _whole, in one forward pass: no two parts of a pattern
# can take the same character (the digits after a decimal point come only after the point;
# "infinity" is tried before "inf"), so the first match, all greedy, is the longest, and a
# field is a number when it covers the whole field. fullmatch would backtrack through the
# digits of "1" * n + "x" before failing (Python's re backtracks about 150 times slower than
# it matches), and the pattern once written "[0-9]+\.?[0-9]*" tried every split of them:
# quadratic in n, 5 s for a 16 KB field.
_INT_TEXT = re.compile(rb"\s*([+-]?)([0-9]+)\s*")
_FLOAT_TEXT = re.compile(rb"\s*[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                         rb"|infinity|inf|nan)\s*", re.IGNORECASE)
# What strtod takes beyond decimals, as TF's parser does: hex floats, and nan(chars).
_HEX_FLOAT_TEXT = re.compile(rb"\s*[+-]?0x(?:[0-9a-f]+(?:\.[0-9a-f]*)?|\.[0-9a-f]+)"
                             rb"(?:p[+-]?[0-9]+)?\s*", re.IGNORECASE)
# More significant digits than any int64 has (19): out of range, and not given to int(), which
# refuses more than 4,300 digits and is quadratic in them below that.
_MAX_INT_DIGITS = 19
# How much of a bad field or record an error quotes.
_SHOWN = 40
_NAN_TEXT = re.compile(rb"\s*[+-]?nan\([0-9a-z_]*\)\s*", re.IGNORECASE)


def _is_dtype(value):
    return isinstance(value, np.dtype) or (isinstance(value, type)
                                           and issubclass(value, np.generic))


class _Column:
    """One decode_csv column: its dtype and its default (None: required)."""

    def __init__(self, index, default):
        self.index = index
        if _is_dtype(default):
            self.dtype, values = _dtypes.as_dtype(default), np.zeros(0)
        else:
            items = list(default) if isinstance(default, (list, tuple)) else [default]
            values = default if isinstance(default, np.ndarray) else np.asarray(items)
            typed = isinstance(default, np.ndarray) or any(
                isinstance(item, np.generic) for item in items)
            kind = values.dtype.kind
            if kind in "SUO":
                self.dtype = _dtypes.string
            elif typed:
                self.dtype = values.dtype
            else:  # Python numbers, or []: TF's int32 and float32
                self.dtype = {"i": _dtypes.int32, "u": _dtypes.int32,
                              "f": _dtypes.float32}.get(kind, values.dtype)
        if self.dtype not in _CSV_DTYPES:
            raise ValueError(f"record_defaults[{index}]: unsupported type {self.dtype} in "
                             f"{default!r}; use int32, int64, float32, float64 or string")
        if values.ndim > 1:
            raise InvalidArgumentError(f"Each record default should be at most rank 1: "
                                       f"record_defaults[{index}] has shape {values.shape}")
        if values.size > 1:
            raise InvalidArgumentError(f"There should only be 1 default per field but field "
                                       f"{index} has {values.size}")
        self.default = self.convert(values.ravel()[0], None) if values.size else None

    def convert(self, value, where):
        """``value`` (a field's bytes, or a default) as this column's type."""
        if self.dtype == _dtypes.string:
            return value.encode("utf-8") if isinstance(value, str) else bytes(value)
        if not isinstance(value, bytes):
            return self.dtype.type(value)
        if self.dtype.kind == "f" and _whole(_HEX_FLOAT_TEXT, value):
            return self.dtype.type(_from_hex(value.strip().decode("ascii")))
        if self.dtype.kind == "f" and _whole(_NAN_TEXT, value):
            return self.dtype.type("nan")
        if self.dtype.kind == "i":
            match = _whole(_INT_TEXT, value)
            digits = match[2].lstrip(b"0") if match else b""
            if match and len(digits) <= _MAX_INT_DIGITS:
                number = int(match[1] + digits) if digits else 0
                info = np.iinfo(self.dtype)
                if info.min <= number <= info.max:
                    return self.dtype.type(number)
        elif _whole(_FLOAT_TEXT, value):
            if self.dtype == _dtypes.float32:
                return _float32(value, float(value))
            return self.dtype.type(float(value))
        raise InvalidArgumentError(f"{where} is not a valid {_CSV_DTYPES[self.dtype]}: "
                                   f"{_shown(value)}")


def _whole(pattern, text):
    """The match of ``pattern`` that covers all of ``text``, or None; for the patterns above,
    whose first match is their longest (see there), in one pass without backtracking."""
    match = pattern.match(text)
    return match if match is not None and match.end() == len(text) else None


def _from_hex(text):
    """A hex float as strtod reads it: past the largest double, an infinity (float.fromhex
    raises OverflowError)."""
    try:
        return float.fromhex(text)
    except OverflowError:
        return -math.inf if text.startswith("-") else math.inf


def _shown(text):
    """At most the first ``_SHOWN`` bytes of ``text``, as text, and its size if it is longer:
    an error names a field or record without quoting all of it."""
    shown = text[:_SHOWN].decode("utf-8", "backslashreplace")
    return shown if len(text) <= _SHOWN else f"{shown}... ({len(text)} bytes)"


def _float32(text, wide):
    """The float32 nearest the decimal ``text``, as TF's parser (strtof) gives it.

    Rounding the text to float64 first (``wide``), then to float32, errs only where ``wide``
    lies exactly halfway between two float32s while the text does not: ``16777217.000000001``
    is 16777218 in float32, but its float64, 16777217, is a tie that rounds to 16777216.
    There the text itself decides, compared exactly.
    """
    narrow = np.float32(wide)
    if not np.isfinite(narrow) or float(narrow) == wide:
        return narrow
    # (compared as Python floats: NumPy would compare wide in float32, where it is narrow)
    with np.errstate(over="ignore"):  # past the largest float32: inf, never a midpoint
        other = np.nextafter(narrow, np.float32(np.inf if wide > float(narrow) else -np.inf))
    if (float(narrow) + float(other)) / 2 != wide:
        return narrow
    exact = decimal.Decimal(text.strip().decode("ascii"))
    if exact == decimal.Decimal(wide):
        return narrow  # a true tie: to even, as NumPy rounded it
    up = exact > decimal.Decimal(wide)
    return max(narrow, other) if up else min(narrow, other)


def _csv_fields(record, delim, use_quote_delim, index, wanted=None):
    """Splits one record into its fields, TF's way: quotes double to escape, a CR or LF where
    a field would start is skipped, one inside an unquoted field is an error, and an empty
    record has no field at all. With ``wanted``, stops after that many fields (TF does not
    look past the last column ``select_cols`` asks for)."""
    fields, pos, size = [], 0, len(record)
    while pos < size:
        if wanted is not None and len(fields) >= wanted:
            return fields
        if record[pos] in b"\r\n":
            pos += 1
            continue
        if use_quote_delim and record[pos:pos + 1] == b'"':
            field, pos = bytearray(), pos + 1
            while True:
                end = record.find(b'"', pos)
                if end < 0:
                    raise InvalidArgumentError(
                        f"Quoted field has to end with quote followed by delim or end, in "
                        f"record {index}: {_shown(record)}")
                field += record[pos:end]
                if record[end + 1:end + 2] == b'"':
                    field += b'"'
                    pos = end + 2
                    continue
                pos = end + 1
                break
            if pos < size and record[pos:pos + 1] != delim:
                raise InvalidArgumentError(
                    f"Quoted field has to end with quote followed by delim or end, in record "
                    f"{index}: {_shown(record)}")
            fields.append(bytes(field))
        else:
            end = record.find(delim, pos)
            end = size if end < 0 else end
            field = record[pos:end]
            if (use_quote_delim and b'"' in field) or b"\r" in field or b"\n" in field:
                raise InvalidArgumentError(
                    f"Unquoted fields cannot have quotes/CRLFs inside, in record {index}: "
                    f"{_shown(record)}")
            fields.append(field)
            pos = end
        pos += 1  # past the delimiter
    if record[-1:] == delim:  # the last field is missing: an empty one
        fields.append(b"")
    return fields


def decode_csv(records: Any, record_defaults: Sequence[Any], field_delim: str = ",",
               use_quote_delim: bool = True, name: Optional[str] = None, na_value: str = "",
               select_cols: Optional[Sequence[int]] = None) -> List[Any]:
    """Converts CSV records to columns, as ``tf.io.decode_csv``.

    Args:
      records: one record (``str``/``bytes``) or an array/list of them.
      record_defaults: one entry per column: ``[value]`` gives the column's type and the value
        used for an empty field (an ``int`` makes an int32 column, a ``float`` float32, a
        ``str``/``bytes`` string; a NumPy scalar or 1-element array keeps its own type), and
        ``[]`` or an empty typed array (or a dtype) makes the column required.
      field_delim: the one-character delimiter.
      use_quote_delim: whether ``"`` quotes fields (a quoted field may hold the delimiter;
        ``""`` inside it is a quote).
      name: accepted for TF compatibility; unused.
      na_value: a field equal to this counts as empty.
      select_cols: increasing column indices to keep; then ``record_defaults`` has one entry
        per selected column.

    Returns:
      A list with one entry per (selected) column: a scalar for a scalar record, else an array
      of the records' shape (object of bytes for strings).

    Raises:
      InvalidArgumentError: a record has the wrong number of fields, a required field is
        empty, or a field does not parse as its column's type; the message names the column
        and the record.
      ValueError: ``record_defaults``, ``field_delim`` or ``select_cols`` is invalid.
    """
    del name
    delim = field_delim.encode("utf-8") if isinstance(field_delim, str) else field_delim
    if len(delim) != 1:
        raise ValueError(f"field_delim must be one character, got {field_delim!r}")
    na = na_value.encode("utf-8") if isinstance(na_value, str) else bytes(na_value)
    columns = [_Column(i, default) for i, default in enumerate(record_defaults)]
    if select_cols is not None:
        select = [int(col) for col in select_cols]
        if any(col < 0 for col in select):
            raise ValueError(f"select_cols contains negative values: {select}")
        if any(b <= a for a, b in zip(select, select[1:])):
            raise ValueError(f"select_cols is not strictly increasing: {select}")
        if len(select) != len(columns):
            raise ValueError(f"Length of select_cols and record_defaults do not match. "
                             f"(select_cols has {len(select)} columns, record_defaults "
                             f"{len(columns)})")
    scalar = isinstance(records, (str, bytes))
    array = np.asarray([records] if scalar else records, dtype=object)
    outputs = [np.empty(array.size, dtype=column.dtype) for column in columns]
    for index, record in enumerate(array.ravel().tolist()):
        if isinstance(record, str):
            record = record.encode("utf-8")
        fields = _csv_fields(bytes(record), delim, use_quote_delim, index,
                             None if select_cols is None else select[-1] + 1)
        if select_cols is None:
            if len(fields) != len(columns):
                raise InvalidArgumentError(f"Expect {len(columns)} fields but have "
                                           f"{len(fields)} in record {index}")
            chosen = fields
        else:
            if len(fields) <= select[-1]:  # TF counts the selected columns found
                found = sum(col < len(fields) for col in select)
                raise InvalidArgumentError(f"Expect {len(select)} fields but have {found} in "
                                           f"record {index}")
            chosen = [fields[col] for col in select]
        for column, field, out in zip(columns, chosen, outputs):
            number = column.index if select_cols is None else select[column.index]
            if field == na or not field:
                if column.default is None:
                    raise InvalidArgumentError(f"Field {number} is required but missing in "
                                               f"record {index}!")
                out[index] = column.default
            else:
                out[index] = column.convert(field, f"Field {number} in record {index}")
    if scalar:
        return [out[0] for out in outputs]
    return [out.reshape(array.shape) for out in outputs]
