"""ReadPlan: chunks read as one buffer (with the compiled core) hold what the reader's object
arrays hold, with the same keys, tickets and ordinals."""

import functools
import os

import numpy as np
import pytest

import queuepipe as qp
from queuepipe._chunks import RecordChunk
from queuepipe._core import core
from queuepipe.plan import ReadPlan
from queuepipe.shards import write_shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """3 shards of 50 records of 0-99 bytes each."""
    rng = np.random.default_rng(3)
    records = [bytes(rng.integers(0, 256, rng.integers(0, 100), dtype=np.uint8))
               for _ in range(150)]
    return write_shards(records, tmp_path_factory.mktemp("plan"), 3, processes=1,
                        progress=False, index=False)


def taken(plan):
    chunks = []
    try:
        while True:
            chunks.append(plan.take())
    except qp.errors.OutOfRangeError:
        pass
    finally:
        plan.close()
    return chunks


@pytest.mark.parametrize("order", ["sorted", "files"])
def test_chunks_in_one_buffer_hold_the_records_and_keys_of_the_object_arrays(shards, order):
    files = sorted(os.fsdecode(path) for path in shards)
    make = functools.partial(ReadPlan, files, qp.TFRecordReader, 16, 2, order, 7, True)
    buffered, arrays = taken(make(chunks=True)), taken(make(chunks=False))
    assert len(buffered) == len(arrays) == 2 * 12  # 50 records a file: 16, 16, 16, 2
    for one, other in zip(buffered, arrays):
        assert isinstance(one.values, RecordChunk if core is not None else np.ndarray)
        assert isinstance(other.values, np.ndarray) and other.values.dtype == object
        assert one.values.tolist() == other.values.tolist()
        assert (one.ticket, one.where) == (other.ticket, other.where)
        assert one.ordinals.tolist() == other.ordinals.tolist()
        keys = [k() if callable(k) else k for k in (one.keys, other.keys)]
        assert keys[0].tolist() == keys[1].tolist()
        assert keys[0].tolist()[0] == b"%s:%d" % (files[one.where[0]].encode(), one.where[1])


def test_a_plan_of_large_records_goes_on_with_object_arrays_after_its_first_chunk(tmp_path):
    # records past the plan's largest mean record read as one buffer (16 KB): as chunks they
    # cost more than as the reader's object arrays; the chunks' bounds stay as they were
    rng = np.random.default_rng(5)
    records = [bytes(rng.integers(0, 256, 20_000, dtype=np.uint8)) for _ in range(40)]
    files = [os.fsdecode(path) for path in write_shards(records, tmp_path, 1, processes=1,
                                                        progress=False, index=False)]
    make = functools.partial(ReadPlan, files, qp.TFRecordReader, 16, 1, "sorted", 7, True)
    buffered, arrays = taken(make(chunks=True)), taken(make(chunks=False))
    kinds = [type(chunk.values) for chunk in buffered]
    assert kinds == ([RecordChunk] if core is not None else [np.ndarray]) + [np.ndarray] * 2
    assert [(c.ticket, c.where, c.ordinals.tolist()) for c in buffered] == \
        [(c.ticket, c.where, c.ordinals.tolist()) for c in arrays]
    assert [r for c in buffered for r in c.values.tolist()] == records
