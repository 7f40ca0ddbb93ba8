"""Mirrors TensorFlow's ``kernel_tests/io_ops/decode_csv_op_test.py``: ``decode_csv``'s
values, defaults, quoting, ``na_value``, ``select_cols`` and errors, with TF's words.

Each test names the TF tests it mirrors; every case passes. TF's eager answers are the ones
taken where TF's graph mode differs (a rank-2 default: graph mode raises a ValueError while
building the graph, eager mode TF's InvalidArgumentError; ``record_defaults=np.zeros(5)``:
graph mode refuses it, eager mode reads five float64 columns), since queuepipe runs eagerly.
"""

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.errors import InvalidArgumentError


def decoded(**args):
    return [np.asarray(column).tolist() for column in qp.io.decode_csv(**args)]


def test_simple():
    """testSimple, testSimpleWithScalarDefaults, testScalar, test2D"""
    assert decoded(records=["1", "2", '"3"'], record_defaults=[[1]]) == [[1, 2, 3]]
    assert decoded(records=["1,4", "2,5", "3,6"], record_defaults=[1, 2]) == \
        [[1, 2, 3], [4, 5, 6]]
    assert decoded(records='1,""', record_defaults=[[3], [4]]) == [1, 4]
    assert decoded(records=[["1", "2"], ['""', "4"]], record_defaults=[[5]]) == [[[1, 2], [5, 4]]]


def test_a_default_of_rank_2_is_refused():
    """testSimpleWith2DDefaults (TF's eager error)"""
    for default in ([[0]], np.zeros((1, 0), np.int32)):
        with pytest.raises(InvalidArgumentError,
                           match=r"^Each record default should be at most rank 1"):
            qp.io.decode_csv(records=["1", "2", "3"], record_defaults=[default])
    with pytest.raises(InvalidArgumentError,
                       match=r"^There should only be 1 default per field but field 0 has 2"):
        qp.io.decode_csv(records=["1"], record_defaults=[[1, 2]])  # TF 2.21's words


def test_no_quote_delimiter():
    """testSimpleNoQuoteDelimiter, test2DNoQuoteDelimiter, testWithDefaultsAndNoQuoteDelimiter"""
    assert decoded(records=["1", "2", '"3"'], record_defaults=[[""]], use_quote_delim=False) \
        == [[b"1", b"2", b'"3"']]
    assert decoded(records=[["1", "2"], ['""', '"']], record_defaults=[[""]],
                   use_quote_delim=False) == [[[b"1", b"2"], [b'""', b'"']]]
    assert decoded(records=[",1,", "0.2,3,bcd", '3.0,,"'], record_defaults=[[1.0], [0], ["a"]],
                   use_quote_delim=False) == [[1.0, np.float32(0.2), 3.0], [1, 3, 0],
                                              [b"a", b"bcd", b'"']]


def test_types():
    """testDouble, testInt64, testComplexString, testMultiRecords"""
    assert decoded(records=["1.0", "-1.79e+308", '"1.79e+308"'],
                   record_defaults=[np.array([], dtype=np.double)]) == [[1.0, -1.79e308, 1.79e308]]
    assert decoded(records=["1", "2", '"2147483648"'],
                   record_defaults=[np.array([], dtype=np.int64)]) == [[1, 2, 2147483648]]
    assert decoded(records=['"1.0"', '"ab , c"', '"a\nbc"', '"ab""c"', " abc "],
                   record_defaults=[["1"]]) == [[b"1.0", b"ab , c", b"a\nbc", b'ab"c', b" abc "]]
    out = qp.io.decode_csv(records=["1.0,4,aa", "0.2,5,bb", "3,6,cc"],
                           record_defaults=[[1.0], [1], ["aa"]])
    np.testing.assert_allclose(out[0], [1.0, 0.2, 3])
    assert out[0].dtype == np.float32 and out[1].dtype == np.int32
    assert out[1].tolist() == [4, 5, 6] and out[2].tolist() == [b"aa", b"bb", b"cc"]


def test_na_value_and_defaults():
    """testNA, testWithDefaults, testWithTabDelim"""
    out = decoded(records=["2.0,NA,aa", "NA,5,bb", "3,6,NA"],
                  record_defaults=[[0.0], [0], [""]], na_value="NA")
    assert out == [[2.0, 0.0, 3], [0, 5, 6], [b"aa", b"bb", b""]]
    out = decoded(records=[",1,", "0.2,3,bcd", "3.0,,"], record_defaults=[[1.0], [0], ["a"]])
    assert out == [[1.0, np.float32(0.2), 3.0], [1, 3, 0], [b"a", b"bcd", b"a"]]
    out = decoded(records=["1\t1", "0.2\t3", "3.0\t"], record_defaults=[[1.0], [0]],
                  field_delim="\t")
    assert out == [[1.0, np.float32(0.2), 3.0], [1, 3, 0]]


@pytest.mark.parametrize("records, defaults, error", [
    ([",1", "0.2,3", "3.0,"], [[1.0], np.array([], dtype=np.int32)],
     "Field 1 is required but missing in record 2!"),
    ([",1", "0.2,234a", "3.0,2"], [[1.0], np.array([], dtype=np.int32)],
     "Field 1 in record 1 is not a valid int32: 234a"),
    (["1", "9999999999999999999999999", "3"], [[1]], "Field 0 in record 1 is not a valid int32: "),
    ([",1", "0.2,2", "3.0adf,3"], [[1.0], np.array([], dtype=np.int32)],
     "Field 0 in record 2 is not a valid float: "),
    (['"1,a,"', "0.22", 'a"bc'], [["a"]], "Unquoted fields cannot have quotes/CRLFs inside"),
    ([",1", "0.2,2", "3.0adf,3"], [[1.0]], "Expect 1 fields but have 2 in record 0"),
    (['"'], [["default"]], "Quoted field has to end with quote followed.*"),
], ids=["testWithoutDefaultsError", "testWrongFieldIntError", "testOutOfRangeError",
        "testWrongFieldFloatError", "testWrongFieldStringError", "testWrongDefaults",
        "testShortQuotedString"])
def test_errors(records, defaults, error):
    with pytest.raises(InvalidArgumentError, match=error):
        qp.io.decode_csv(records=records, record_defaults=defaults)


def test_select_cols():
    """testSelectCols, testSelectColsInclLast, testWrongSelectColsInclLast,
    testWrongSelectColsIndicesTooHigh, testWrongSelectColsLen, testWrongSelectColsSorting,
    testWrongSelectColsIndicesNegative"""
    assert decoded(records=[",,", "4,5,6"], record_defaults=[[1], [2]], select_cols=[0, 1]) \
        == [[1, 4], [2, 5]]
    assert decoded(records=[",,", "4,5,6"], record_defaults=[[0], [1], [2]],
                   select_cols=[0, 1, 2]) == [[0, 4], [1, 5], [2, 6]]
    with pytest.raises(InvalidArgumentError, match="^Expect 3 fields but have 2 in record 0"):
        qp.io.decode_csv(records=[",,", "4,5,6"], record_defaults=[[0], [1], [2]],
                         select_cols=[0, 1, 3])
    with pytest.raises(InvalidArgumentError, match="^Expect 2 fields but have 1 in record 0"):
        qp.io.decode_csv(records=["1,2,3"], record_defaults=[[0], [1]], select_cols=[0, 3])
    for select, defaults, error in (
            ([0], [[0], [0], [0]], "Length of select_cols and record_defaults do not match."),
            ([1, 0], [[0], [1]], "select_cols is not strictly increasing."),
            ([-1, 0], [[0], [1]], "select_cols contains negative values.")):
        with pytest.raises(ValueError, match=error):
            qp.io.decode_csv(records=["1,2,3"], record_defaults=defaults, select_cols=select)


def test_numpy_record_defaults():
    """testNumpyAttribute (TF's eager answer: five float64 columns)"""
    out = qp.io.decode_csv(records="1,2,3,4,5", record_defaults=np.zeros(5))
    assert [value.item() for value in out] == [1, 2, 3, 4, 5]
    assert {np.asarray(value).dtype for value in out} == {np.dtype(np.float64)}
