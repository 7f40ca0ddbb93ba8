"""RecordChunk: records in one buffer give the same bytes whichever way they are cut."""

import numpy as np
import pytest

from queuepipe._chunks import RecordChunk


def chunk_of(records, gap):
    """``records`` in one buffer, ``gap`` bytes of 0xff before each and after the last."""
    filler = b"\xff" * gap
    buffer = filler + filler.join(records) + filler
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    starts = gap + np.concatenate(([0], np.cumsum(lengths + gap)[:-1])).astype(np.int64)
    return RecordChunk(buffer, starts[:len(records)], lengths)


@pytest.mark.parametrize("records", [
    [], [b"abc"], [b"abc", b"def", b"ghi"],  # one length, evenly spaced: the void view
    [b"abc", b"de", b"", b"fghij"], [b"", b""], [b"ab", b"cd", b"ef"][::-1]])
@pytest.mark.parametrize("gap", [0, 1, 16])
def test_a_chunk_gives_its_records_as_bytes(records, gap):
    chunk = chunk_of(records, gap)
    assert len(chunk) == len(records)
    got = chunk.tolist()
    assert got == records and all(type(r) is bytes for r in got)
    assert [chunk[i] for i in range(len(chunk))] == records


def test_records_of_one_length_unevenly_spaced_are_cut_one_by_one():
    buffer = b"aaXbbYYcc"
    chunk = RecordChunk(buffer, np.array([0, 3, 7]), np.array([2, 2, 2]))
    assert chunk.tolist() == [b"aa", b"bb", b"cc"]


@pytest.mark.parametrize("starts, lengths", [
    ([0, 8], [8, 8]),  # evenly spaced, the last past the end (the strided cut read past it)
    ([-1], [2]), ([0], [-1]), ([11], [0]), ([4], [7]), ([2**62], [2**62]), ([0, 1], [1]),
])
def test_a_chunk_refuses_records_that_do_not_lie_in_its_buffer(starts, lengths):
    with pytest.raises(ValueError, match=r"^RecordChunk: starts and lengths must be one run of "
                                         r"records each lying in the buffer of 10 bytes$"):
        RecordChunk(bytes(range(10)), np.array(starts), np.array(lengths))
