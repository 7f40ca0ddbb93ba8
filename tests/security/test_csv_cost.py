"""CSV text that costs more than its size: numbers whose check backtracks, integers too long
for Python's int().

A field of digits followed by one bad character made decode_csv's float pattern backtrack
quadratically (a 16 KB field took 5 s, a 1 MB line hours), and the same pattern typed the
columns in ``queuepipe convert``. Each cost is measured as a ratio against a benign input of
the same size in the same test, not against a wall-clock limit.
"""

import math
import time

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.convert import csv_column_types
from queuepipe.errors import InvalidArgumentError

SIZE = 8192  # bytes per field: quadratic backtracking takes seconds here, linear work microseconds
# A linear check costs about what the benign input costs; a quadratic one thousands of times it.
MAX_RATIO = 20


def _seconds(call, repeat=5):
    """The least time of ``repeat`` calls (the least is the one least disturbed by the host)."""
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            call()
        except InvalidArgumentError:
            pass
        best = min(best, time.perf_counter() - start)
    return best


def _ratio(hostile, benign):
    return _seconds(hostile) / max(_seconds(benign), 1e-6)


@pytest.mark.parametrize("default", [0.0, np.float64(0.0)], ids=["float32", "float64"])
@pytest.mark.parametrize("benign, hostile", [
    (b"1" * SIZE, b"1" * (SIZE - 1) + b"x"),  # digits, then one bad character
    (b"1." + b"1" * (SIZE - 2), b"1." + b"1" * (SIZE - 3) + b"x"),
    (b"0x" + b"1" * (SIZE - 2), b"0x" + b"1" * (SIZE - 3) + b"z"),  # hex, as strtod reads it
    (b" " * (SIZE - 1) + b"1", b" " * (SIZE - 1) + b"x"),
], ids=["digits", "fraction", "hex", "spaces"])
def test_a_float_field_costs_of_the_order_of_its_size(default, benign, hostile):
    with pytest.raises(InvalidArgumentError, match=r"^Field 0 in record 0 is not a valid "):
        qp.io.decode_csv([hostile], [[default]])
    ratio = _ratio(lambda: qp.io.decode_csv([hostile], [[default]]),
                   lambda: qp.io.decode_csv([benign], [[default]]))
    assert ratio < MAX_RATIO, f"{ratio:.0f}x the benign field's time"


def test_a_one_megabyte_line_costs_of_the_order_of_its_size():
    """The issue's 1 MB line (hours before): a record of 64 fields of 16 KB, the last one
    bad, against the same record all good."""
    field = b"1" * (16 * 1024)
    benign = b",".join([field] * 64)
    hostile = benign[:-1] + b"x"
    defaults = [[0.0]] * 64
    with pytest.raises(InvalidArgumentError, match=r"^Field 63 in record 0 is not a valid float"):
        qp.io.decode_csv([hostile], defaults)
    ratio = _ratio(lambda: qp.io.decode_csv([hostile], defaults),
                   lambda: qp.io.decode_csv([benign], defaults))
    assert ratio < MAX_RATIO, f"{ratio:.0f}x the benign line's time"


@pytest.mark.parametrize("default, word", [(0, "int32"), (np.int64(0), "int64")])
def test_an_integer_field_past_pythons_digit_limit_is_tfs_error_naming_the_cell(default, word):
    """Python's int() refuses more than 4,300 digits with a bare ValueError; TF says the field
    is not a valid int. The message quotes a short prefix of the field, not all of it."""
    record = b"7," + b"9" * 5000
    with pytest.raises(InvalidArgumentError,
                       match=rf"^Field 1 in record 1 is not a valid {word}: 9{{20,60}}\.\.\. "
                             rf"\(5000 bytes\)$"):
        qp.io.decode_csv([b"1,2", record], [[0], [default]])
    ratio = _ratio(lambda: qp.io.decode_csv([record], [[0], [default]]),
                   lambda: qp.io.decode_csv([b"7," + b"9" * 4999 + b"x"], [[0], [default]]))
    assert ratio < MAX_RATIO, f"{ratio:.0f}x the benign field's time"


def _csv_file(tmp_path, name, cell):
    path = tmp_path / name
    path.write_bytes(b"a,b\n1," + cell + b"\n")
    return str(path)


def test_convert_types_a_column_in_time_of_the_order_of_its_cells(tmp_path):
    hostile = _csv_file(tmp_path, "hostile.csv", b"1" * (SIZE - 1) + b"x")
    benign = _csv_file(tmp_path, "benign.csv", b"1" * (SIZE - 2) + b".5")
    assert csv_column_types(hostile) == {"a": "int64", "b": "bytes"}
    assert csv_column_types(benign) == {"a": "int64", "b": "float"}
    ratio = _ratio(lambda: csv_column_types(hostile), lambda: csv_column_types(benign))
    assert ratio < MAX_RATIO, f"{ratio:.0f}x the benign file's time"


def test_convert_types_an_integer_past_pythons_digit_limit_as_a_float(tmp_path):
    """Out of int64's range, as a shorter one is (Python's int() would raise ValueError)."""
    assert csv_column_types(_csv_file(tmp_path, "long.csv", b"9" * 5000)) == \
        {"a": "int64", "b": "float"}


def test_a_hex_float_past_the_largest_double_is_an_infinity_as_in_tf():
    """strtod's answer, which TF 2.21 gives (float.fromhex raises OverflowError)."""
    values = qp.io.decode_csv([b"0x" + b"1" * 300, b"-0x1p99999"], [[np.float64(0.0)]])[0]
    assert values.tolist() == [math.inf, -math.inf]
