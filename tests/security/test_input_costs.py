"""31.5, 31.7, 31.9: no input costs much more than its size. Each bound is a ratio against a
benign input of the same size in the same test (or against the input's size), never a
wall-clock limit (tests/security, docs/security.md)."""

import contextlib
import gzip
import logging
import os
import struct
import time
import tracemalloc

import pytest

from queuepipe import cli
from queuepipe._frames import frame, masked_crc32c
from queuepipe.records import RecordScanner
from queuepipe.shards import indexed_count


def best_time(action, repeats=3):
    """The least time ``action()`` took over ``repeats`` runs (the least noisy figure on a
    shared machine)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def peak_memory(action):
    """The peak of Python's allocations (NumPy's included) while ``action()`` runs."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@contextlib.contextmanager
def quiet():
    """Output to /dev/null (a captured stream would grow with it) and no skip warnings."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


# -- 31.5: resynchronising past damaged headers is linear ----------------------------------

EMPTY_HEADER = struct.pack("<Q", 0) + struct.pack("<I", masked_crc32c(struct.pack("<Q", 0)))


def resync_bomb(units):
    """17-byte units: a byte that breaks the length checksum (the scanner resynchronises),
    then a valid header of an empty record whose data checksum fails."""
    return (b"\xff" + EMPTY_HEADER + b"\0\0\0\0") * units


def bad_data(units):
    """The benign input of the same size: 17-byte records whose data checksum fails, each
    skipped where it stands (no resynchronisation)."""
    good = frame(b"x")
    return (good[:-4] + bytes(4)) * units


def skip_all(path):
    scanner = RecordScanner(path, corrupt_records="skip")
    try:
        assert sum(1 for _ in scanner) == 0
        return scanner.skipped
    finally:
        scanner.close()


def test_resynchronising_costs_of_the_order_of_the_file(tmp_path):
    units = 8_000  # 136 KB: 78 s before resynchronisation was made linear (2 ms benign)
    bomb, benign = tmp_path / "bomb.tfrecord", tmp_path / "benign.tfrecord"
    bomb.write_bytes(resync_bomb(units))
    benign.write_bytes(bad_data(units))
    assert bomb.stat().st_size == benign.stat().st_size
    with quiet():
        assert skip_all(bomb) == 2 * units and skip_all(benign) == units
        ratio = best_time(lambda: skip_all(bomb)) / best_time(lambda: skip_all(benign))
    # A bomb unit costs two damages and a resynchronisation where a benign one costs one
    # damage: about 20x, whatever the size. Rescanning the read-ahead made it 30,000x
    # at this size, growing with it.
    assert ratio < 60, f"the bomb took {ratio:.1f}x the same-size benign file"


def test_verify_of_the_bomb_costs_of_the_order_of_the_file(tmp_path):
    bomb, benign = tmp_path / "bomb.tfrecord", tmp_path / "benign.tfrecord"
    bomb.write_bytes(resync_bomb(8_000))
    benign.write_bytes(bad_data(8_000))
    with quiet():
        ratio = best_time(lambda: cli.main(["verify", str(bomb)])) / \
            best_time(lambda: cli.main(["verify", str(benign)]))
    assert ratio < 60, f"verify took {ratio:.1f}x as long on the bomb"  # as above


# -- 31.9: verify keeps counts, not errors ---------------------------------------------------


def test_verify_memory_does_not_grow_with_the_damage(tmp_path):
    damaged, intact = tmp_path / "damaged.tfrecord", tmp_path / "intact.tfrecord"
    damaged.write_bytes(bad_data(20_000))  # 340 KB, every record damaged
    intact.write_bytes(frame(b"x") * 20_000)
    with quiet():
        assert cli.main(["verify", str(damaged)]) == 1
        assert cli.main(["verify", str(intact)]) == 0
        ratio = peak_memory(lambda: cli.main(["verify", str(damaged)])) / \
            peak_memory(lambda: cli.main(["verify", str(intact)]))
    assert ratio < 2, f"verify of the damaged file took {ratio:.1f}x the memory"


def test_verify_prints_damage_as_it_is_found(tmp_path, capsys, monkeypatch):
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(bad_data(3) + frame(b"ok"))
    seen_at_first_line = []
    real_report = cli._DamageReporter._damage

    def spy(self, offset, what, at_end=False):
        seen_at_first_line.append(self.offset)
        return real_report(self, offset, what, at_end)

    monkeypatch.setattr(cli._DamageReporter, "_damage", spy)
    assert cli.main(["verify", str(damaged)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in out[:3]] == [
        "BAD record at offset 12", "BAD record at offset 29", "BAD record at offset 46"]
    assert out[3].endswith("BAD (3 damaged, 1 good records)")
    assert seen_at_first_line[0] < damaged.stat().st_size  # reported mid-file


# -- 31.9: checking an index costs memory of the order of its size --------------------------


def test_checking_an_index_costs_memory_of_the_order_of_its_size(tmp_path):
    shard = tmp_path / "a.tfrecord"
    shard.write_bytes(b"")
    peaks = {}
    for name, last_line in [("benign", b"1 16\n"), ("malformed", b"1 1x\n")]:
        index = b"1 16\n" * 399_999 + last_line  # 2 MB; 5-byte lines cost 375 bytes each before
        (tmp_path / "a.tfrecord.index").write_bytes(index)
        result = []
        peaks[name] = peak_memory(lambda: result.append(indexed_count(str(shard))))
        assert result[0][0] is None and result[0][1]  # refused (it does not match), and why
    # The entries take 16 bytes per 5-byte line; the check adds a bounded amount.
    assert peaks["benign"] < 10 * len(index), f"{peaks['benign'] / len(index):.0f} B a byte"
    assert peaks["malformed"] < 1.5 * peaks["benign"], peaks


# -- 31.7: convert finds duplicate columns in linear time -----------------------------------


def test_many_csv_columns_cost_what_as_many_cells_in_rows_cost(tmp_path):
    from queuepipe.convert import csv_column_types

    columns = 30_000  # 8 s before (one list.count per column)
    wide, long = tmp_path / "wide.csv", tmp_path / "long.csv"
    wide.write_text(",".join(f"c{i:05d}" for i in range(columns)) + "\n" +
                    ",".join("1" * 6 for _ in range(columns)) + "\n")
    long.write_text("c00001,c00002,c00003\n" +
                    "".join("111111,111111,111111\n" for _ in range(2 * columns // 3 - 1)))
    assert abs(wide.stat().st_size - long.stat().st_size) < 100
    ratio = best_time(lambda: csv_column_types(str(wide))) / \
        best_time(lambda: csv_column_types(str(long)))
    assert ratio < 5, f"{columns} columns took {ratio:.1f}x as long as as many cells in rows"


def test_duplicate_columns_are_named_briefly(tmp_path):
    from queuepipe.convert import csv_column_types
    from queuepipe.errors import InvalidArgumentError

    path = tmp_path / "dup.csv"
    path.write_text(",".join(["x" * 500] * 2 + [f"d{i}" for i in range(100)] * 2) + "\n")
    with pytest.raises(InvalidArgumentError, match=r"and 96 more appear more than once") as e:
        csv_column_types(str(path))
    assert len(str(e.value)) < 400


# -- 31.9: convert reads an IDX header before inflating the data ---------------------------


def gzip_stream(parts):
    """A gzip file of the concatenated ``parts`` (each a bytes or a (byte, count) run),
    compressed as it goes, so that a bomb is made without holding what it inflates to."""
    import zlib

    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    out = []
    for part in parts:
        if isinstance(part, tuple):
            byte, count = part
            block = byte * (1 << 20)
            for _ in range(count >> 20):
                out.append(z.compress(block))
        else:
            out.append(z.compress(part))
    out.append(z.flush())
    return b"".join(out)


def test_a_gzip_idx_bomb_is_refused_from_its_header(tmp_path):
    from queuepipe.convert import read_idx
    from queuepipe.errors import DataLossError

    bomb = tmp_path / "bomb-labels-idx1-ubyte.gz"  # declares one label, inflates to 64 MiB
    bomb.write_bytes(gzip_stream([b"\0\0\x08\x01" + struct.pack(">I", 1) + b"\x07",
                                  (b"\0", 64 << 20)]))
    benign = tmp_path / "benign-labels-idx1-ubyte.gz"  # of about the same size
    labels = os.urandom(bomb.stat().st_size)
    benign.write_bytes(gzip.compress(b"\0\0\x08\x01" + struct.pack(">I", len(labels)) + labels))
    assert read_idx(str(benign)).tolist() == list(labels)

    def refuse_bomb():
        with pytest.raises(DataLossError, match=r"holds more than 1 data bytes after its header"):
            read_idx(str(bomb))

    ratio = peak_memory(refuse_bomb) / peak_memory(lambda: read_idx(str(benign)))
    assert ratio < 3, f"the bomb took {ratio:.1f}x the memory of a benign file of its size"


def test_an_idx_declaring_more_than_its_file_can_hold_is_refused_before_allocating(tmp_path):
    from queuepipe.convert import read_idx
    from queuepipe.errors import DataLossError

    huge = b"\0\0\x08\x03" + struct.pack(">3I", 2**32 - 1, 2**32 - 1, 2**20)
    for name, data in [("raw.idx", huge + b"\0" * 1000), ("packed.idx.gz", gzip.compress(huge))]:
        (tmp_path / name).write_bytes(data)

        def refuse():
            with pytest.raises(DataLossError, match=r"dimensions \[4294967295, 4294967295, "
                                                    r"1048576\] of 1-byte values need \d{25}"):
                read_idx(str(tmp_path / name))

        assert peak_memory(refuse) < 1 << 20
