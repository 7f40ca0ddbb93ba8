"""31.8: a resumed state costs what the pipeline costs, never what its numbers say.

A saved ``read_batch_features`` state comes from wherever the user keeps it; a crafted one
must be refused before anything is allocated or read from it. Each hostile state is loaded
beside a benign one of the same pipeline, and its memory (tracemalloc's peak) and reads are
compared with the benign one's, as a ratio (tests/security, docs/security.md).
"""

import base64
import copy
import json
import tracemalloc
import zlib

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.errors import InvalidArgumentError
from queuepipe.features import read_batch_features
from queuepipe.plan import pack_ints, unpack_ints
from queuepipe.shards import write_shards

FEATURES = {"id": qp.io.FixedLenFeature([], qp.int64)}
OPTIONS = dict(num_epochs=2, seed=0, queue_capacity=60, read_batch_size=10,
               num_enqueue_threads=2)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("state")
    return write_shards([{"id": i} for i in range(300)], str(folder / "part"), num_shards=3,
                        progress=False)


def saved(shards, after=5, **options):
    """A benign state, after ``after`` batches, through JSON."""
    with qp.Pipeline().as_default(), \
            read_batch_features(shards, 8, FEATURES, **{**OPTIONS, **options}) as batches:
        for _ in range(after):
            batches.dequeue()
        return json.loads(json.dumps(batches.state_dict()))


def load(shards, state, **options):
    """Builds the pipeline from ``state``, takes its first batch, and returns the peak of
    memory traced meanwhile."""
    tracemalloc.start()
    try:
        with qp.Pipeline().as_default(), read_batch_features(
                shards, 8, FEATURES, state=state, **{**OPTIONS, **options}) as batches:
            batches.dequeue()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def refused(shards, state, match, **options):
    """Loads a hostile state, which must be refused; returns the memory peak meanwhile."""
    tracemalloc.start()
    try:
        with pytest.raises(InvalidArgumentError, match=match):
            with qp.Pipeline().as_default():
                read_batch_features(shards, 8, FEATURES, state=state,
                                    **{**OPTIONS, **options}).close()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_ordinal_is_refused_before_anything_is_allocated(shards):
    # Before the fix "ordinal" sized an array at once (and every later chunk copied it): a
    # 700-byte state reached 3.8 GB. Here 300 MB, which the fix must never allocate.
    state = saved(shards)
    benign = load(shards, state)
    hostile = copy.deepcopy(state)
    hostile["plan"]["ordinal"] = 300_000_000
    assert len(json.dumps(hostile)) < 2000
    peak = refused(shards, hostile, r"the state is damaged or not this pipeline's: it spans "
                                    r"\d+ records from its oldest open chunk to its next, "
                                    r"more than the \d+")
    assert peak < 4 * benign


def test_queue_contents_inflated_by_compression_are_refused_unread(shards):
    # Before the fix a few KB of zlib held millions of copies of one ordinal, each parsed:
    # a 1.4 MB state parsed one record 134 million times.
    state = saved(shards)
    benign = load(shards, state)
    hostile = copy.deepcopy(state)
    one = unpack_ints(state["queue"]["ordinals"], 60)[:1]
    hostile["queue"]["ordinals"] = base64.b64encode(zlib.compress(
        np.repeat(one, 4_000_000).astype("<i8").tobytes(), 9)).decode()
    assert len(json.dumps(hostile)) < 100_000
    peak = refused(shards, hostile, r"the state's queue ordinals \(at most the queue's "
                                    r"capacity and a batch, 68\): more than 68 integers")
    assert peak < 4 * benign


def test_a_record_listed_twice_in_the_queue_is_refused(shards):
    # Before the fix a repeat within the capacity delivered the record twice.
    state = saved(shards)
    queued = unpack_ints(state["queue"]["ordinals"], 60)
    hostile = copy.deepcopy(state)
    hostile["queue"]["ordinals"] = pack_ints(np.concatenate([queued[:-1], queued[:1]]))
    refused(shards, hostile, r"the state's queue lists record \d+ twice")


@pytest.mark.parametrize("field, value, match", [
    ("count", 10_000_000, r"open chunk 0 holds 10000000 records, more than read_batch_size "
                          r"10"),
    ("file", 7, r"open chunk 0 names file 7 of 3"),
    ("base", -5, r"open chunk 0 starts at record -5"),
    ("bits", "////", r"open chunk 0's marks are 3 bytes, 2 expected"),
])
def test_an_open_chunk_out_of_its_bounds_is_refused(shards, field, value, match):
    state = saved(shards, shuffle="buffer")
    hostile = copy.deepcopy(state)
    entry = hostile["plan"]["open"][0]  # [base, file, position, skip, count, bits]
    entry[{"base": 0, "file": 1, "count": 4, "bits": 5}[field]] = value
    refused(shards, hostile, match)


def test_a_global_chunk_past_its_epoch_is_refused(shards):
    state = saved(shards, shuffle="global")
    hostile = copy.deepcopy(state)
    hostile["plan"]["open"][0][2] = 10 ** 15  # [base, epoch, start, count, bits]
    refused(shards, hostile, r"open chunk 0 reads places 1000000000000000 to "
                             r"1000000000000010 of an epoch of 300", shuffle="global")


@pytest.mark.parametrize("value", [True, 1.5, "3", None, [1]])
def test_a_number_of_another_type_is_refused(shards, value):
    state = saved(shards)
    hostile = copy.deepcopy(state)
    hostile["plan"]["ticket"] = value
    refused(shards, hostile, r"the state's plan 'ticket' must be an integer")


def test_a_benign_state_still_resumes(shards):
    state = saved(shards)
    with qp.Pipeline().as_default(), \
            read_batch_features(shards, 8, FEATURES, state=state, **OPTIONS) as batches:
        rest = [i for batch in batches for i in batch["id"].tolist()]
    with qp.Pipeline().as_default(), \
            read_batch_features(shards, 8, FEATURES, **OPTIONS) as batches:
        whole = [i for batch in batches for i in batch["id"].tolist()]
    assert whole[40:] == rest
