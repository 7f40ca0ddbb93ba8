"""Readers: TensorFlow's keys and values on the golden files, the work loop, counters, threads."""

import collections
import gzip
import os
import threading
import zlib
from collections import Counter

import numpy as np
import pytest

import queuepipe as qp
from queuepipe.errors import DataLossError, NotFoundError, OutOfRangeError
from queuepipe.readers import (
    FixedLengthRecordReader, ReaderBase, TFRecordReader, TextLineReader, WholeFileReader,
    _format_keys,
)
from queuepipe.records import TFRecordWriter


def filename_queue(names, close=True):
    """A FIFOQueue of file names (bytes), closed unless ``close`` is false."""
    queue = qp.FIFOQueue(max(1, len(names)), qp.string, shapes=[[]], name="filenames")
    if names:
        queue.enqueue_many([[os.fsencode(name) for name in names]])
    if close:
        queue.close()
    return queue


class StubQueue:
    """Any object with ``dequeue()`` can feed a reader; this one returns its items in turn."""

    def __init__(self, items):
        self._items = collections.deque(items)

    def dequeue(self):
        if not self._items:
            raise OutOfRangeError("no more items")
        return self._items.popleft()


def offsets_of(records):
    return list(np.cumsum([0] + [len(r) + 16 for r in records[:-1]]))


def keys_of(path, suffixes):
    return [os.fsencode(path) + b":%d" % s for s in suffixes]


def read_everything(reader, queue, n=None):
    """All (key, value) pairs until the queue runs out, by read() or read_up_to(n)."""
    keys, values = [], []
    while True:
        try:
            if n is None:
                key, value = reader.read(queue)
                keys.append(key)
                values.append(value)
            else:
                k, v = reader.read_up_to(queue, n)
                keys.extend(k)
                values.extend(v)
        except OutOfRangeError:
            return keys, values


# -- TFRecordReader ---------------------------------------------------------------------------


@pytest.mark.parametrize("name, options", [("examples.tfrecord", None),
                                           ("examples.gz.tfrecord", "GZIP"),
                                           ("examples.zlib.tfrecord", qp.TFRecordOptions("ZLIB"))])
def test_tfrecord_reader_keys_and_values_are_tensorflows(golden_dir, golden_records, name,
                                                         options):
    path = os.path.join(golden_dir, name)
    reader = qp.TFRecordReader(options=options)
    keys, values = read_everything(reader, filename_queue([path]))
    assert values == golden_records
    assert keys == keys_of(path, offsets_of(golden_records))
    assert keys[:3] == keys_of(path, [0, 248, 457])
    assert reader.num_records_produced() == 40
    assert reader.num_work_units_completed() == 1


def test_a_key_quotes_a_file_name_with_percent_signs_as_it_is(tmp_path):
    path = str(tmp_path / "shard-%d-100%%.tfrecord")
    with TFRecordWriter(path) as w:
        for record in (b"a", b"bb", b"ccc", b"dddd", b"eeee", b"ffff", b"gggg"):
            w.write(record)
    keys, _ = read_everything(TFRecordReader(), filename_queue([path]), n=4)
    assert keys == keys_of(path, [0, 17, 35, 54, 74, 94, 114])

def test_read_up_to_stays_within_one_file_and_returns_object_arrays(
        tmp_path, golden_dir, golden_records):
    plain = os.path.join(golden_dir, "examples.tfrecord")
    small = str(tmp_path / "small.tfrecord")
    empty = str(tmp_path / "empty.tfrecord")
    with TFRecordWriter(small) as w:
        for record in (b"x", b"yy", b"zzz"):
            w.write(record)
    TFRecordWriter(empty).close()
    reader = TFRecordReader()
    queue = filename_queue([plain, empty, small, plain.encode()])
    sizes, keys, values = [], [], []
    while True:
        try:
            k, v = reader.read_up_to(queue, 16)
        except OutOfRangeError:
            break
        assert k.dtype == v.dtype == object and k.shape == v.shape == (len(k),)
        assert all(type(x) is bytes for x in list(k) + list(v))
        sizes.append(len(k))
        keys.extend(k)
        values.extend(v)
    assert sizes == [16, 16, 8, 3, 16, 16, 8]  # fewer at each file's end; none at the empty one
    assert values == golden_records + [b"x", b"yy", b"zzz"] + golden_records
    offsets = offsets_of(golden_records)
    assert keys == keys_of(plain, offsets) + keys_of(small, [0, 17, 35]) + keys_of(plain, offsets)
    assert reader.num_records_produced() == 83
    assert reader.num_work_units_completed() == 4


def test_reset_drops_the_file_and_zeroes_the_counters(tmp_path, golden_dir, golden_records):
    first = str(tmp_path / "first.tfrecord")
    with TFRecordWriter(first) as w:
        for record in golden_records[:5]:
            w.write(record)
    plain = os.path.join(golden_dir, "examples.tfrecord")
    reader = TFRecordReader(name="r")
    queue = filename_queue([first, first, plain])
    assert reader.read_up_to(queue, 5)[1].tolist() == golden_records[:5]
    reader.read(queue)  # finishes the first file, takes the second and reads its first record
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (6, 1)
    reader.reset()
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (0, 0)
    assert reader.read(queue) == (keys_of(plain, [0])[0], golden_records[0])
    assert reader.name == "r"


DAMAGE_OFFSETS = {"corrupt_data_crc.tfrecord": 12, "corrupt_length_crc.tfrecord": 0,
                  "truncated_mid_record.tfrecord": 248, "truncated_header.tfrecord": 248,
                  "garbage.tfrecord": 0}


@pytest.mark.parametrize("name", sorted(DAMAGE_OFFSETS))
def test_damage_is_raised_every_time_until_reset(golden_dir, golden_records, manifest, name):
    path = os.path.join(golden_dir, name)
    good = os.path.join(golden_dir, "examples.tfrecord")
    reader = TFRecordReader()
    queue = filename_queue([path, good])
    before = manifest["files"][name]["records_before_error"]
    k, v = (reader.read_up_to(queue, 100) if before else ([], []))
    assert list(v) == golden_records[:before]
    for _ in range(2):
        with pytest.raises(DataLossError, match=rf" at {DAMAGE_OFFSETS[name]}\b") as info:
            reader.read(queue)
        assert info.value.offset == DAMAGE_OFFSETS[name] and info.value.path == path
    reader.reset()
    assert reader.read(queue) == (keys_of(good, [0])[0], golden_records[0])


def test_skip_policy_counts_damage_across_files_and_delivers_the_rest(
        golden_dir, golden_records):
    names = ["corrupt_data_crc.tfrecord", "corrupt_length_crc.tfrecord",
             "truncated_mid_record.tfrecord", "truncated_header.tfrecord", "garbage.tfrecord"]
    reader = TFRecordReader(corrupt_records="skip")
    queue = filename_queue([os.path.join(golden_dir, n) for n in names])
    keys, values = read_everything(reader, queue, n=7)
    assert values == golden_records[1:] + golden_records[1:] + golden_records[:1] * 2
    assert keys[:2] == keys_of(os.path.join(golden_dir, names[0]), [248, 457])
    assert reader.num_records_skipped() == 5
    assert reader.num_work_units_completed() == 5
    reader.reset()
    assert reader.num_records_skipped() == 0


def test_several_threads_sharing_one_reader_get_every_record_exactly_once(
        tmp_path, golden_dir, golden_records):
    paths = []
    for i in range(6):
        paths.append(str(tmp_path / f"part{i}.tfrecord"))
        with TFRecordWriter(paths[-1]) as w:
            for record in golden_records[i:]:
                w.write(record)
    reader = TFRecordReader()
    queue = filename_queue(paths)
    results = [None] * 4
    start = threading.Barrier(4)

    def work(i):
        start.wait()
        results[i] = read_everything(reader, queue, n=None if i % 2 else 3)

    threads = [threading.Thread(target=work, args=(i,), name=f"reader-{i}") for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = Counter(pair for keys, values in results for pair in zip(keys, values))
    expected = Counter()
    for i, path in enumerate(paths):
        expected.update(zip(keys_of(path, offsets_of(golden_records[i:])), golden_records[i:]))
    assert got == expected
    assert reader.num_records_produced() == sum(expected.values())


def test_missing_file_fails_then_the_reader_moves_on(tmp_path, golden_dir, golden_records):
    missing = str(tmp_path / "missing.tfrecord")
    reader = TFRecordReader()
    queue = filename_queue([missing, os.path.join(golden_dir, "examples.tfrecord")])
    with pytest.raises(NotFoundError, match=r"^file not found: '.*missing\.tfrecord'$"):
        reader.read(queue)
    assert reader.read(queue)[1] == golden_records[0]


def test_the_queue_may_give_str_bytes_or_one_element_tuples(golden_dir, golden_records):
    path = os.path.join(golden_dir, "examples.tfrecord")
    for item in (path, path.encode(), (path.encode(),), np.array(path.encode(), dtype=object)):
        key, value = TFRecordReader().read(StubQueue([item]))
        assert (key, value) == (path.encode() + b":0", golden_records[0])
    with pytest.raises(TypeError, match=r"^a reader's queue must give file names \(bytes or "
                                        r"str\), got 7$"):
        TFRecordReader().read(StubQueue([7]))


def test_a_read_blocks_until_the_queue_gives_a_file(golden_dir, golden_records):
    queue = filename_queue([], close=False)
    reader = TFRecordReader()
    got = []
    thread = threading.Thread(target=lambda: got.append(reader.read(queue)), name="blocked")
    thread.start()
    thread.join(0.1)
    assert thread.is_alive() and got == []
    assert reader.num_records_produced() == 0  # the counters never wait for the blocked read
    queue.enqueue(os.fsencode(os.path.join(golden_dir, "examples.tfrecord")))
    thread.join(5)
    assert not thread.is_alive()
    assert [value for _, value in got] == golden_records[:1]
    queue.close()
    reader.reset()
    with pytest.raises(OutOfRangeError, match=r"^Queue 'filenames' is closed and has "
                                              r"insufficient elements"):
        reader.read(queue)


def test_public_names_and_argument_checks():
    assert qp.io.TFRecordReader is qp.TFRecordReader is TFRecordReader
    assert issubclass(qp.WholeFileReader, ReaderBase)
    with pytest.raises(ValueError, match=r"^num_records must be a positive integer, got 0$"):
        TFRecordReader().read_up_to(filename_queue([]), 0)
    with pytest.raises(ValueError, match=r"^corrupt_records must be 'raise' or 'skip', "
                                         r"got 'drop'$"):
        TFRecordReader(corrupt_records="drop")
    with pytest.raises(ValueError, match=r'^Not a valid compression_type: "LZ4"$'):
        TFRecordReader(options="LZ4")
    with pytest.raises(ValueError, match=r"^record_bytes must be an integer >= 1, got 0$"):
        FixedLengthRecordReader(0)
    with pytest.raises(ValueError, match=r"^hop_bytes must be an integer >= 0, got -2$"):
        FixedLengthRecordReader(4, hop_bytes=-2)
    with pytest.raises(ValueError, match=r"^encoding must be None, 'ZLIB' or 'GZIP', "
                                         r"got 'BZ2'$"):
        FixedLengthRecordReader(4, encoding="BZ2")
    with pytest.raises(ValueError, match=r"^skip_header_lines must be a non-negative integer, "
                                         r"got -1$"):
        TextLineReader(skip_header_lines=-1)


# -- TextLineReader ---------------------------------------------------------------------------


def test_text_lines_are_tensorflows(golden_dir, manifest):
    path = os.path.join(golden_dir, "lines.txt")
    spec = manifest["files"]["lines.txt"]
    reader = TextLineReader(skip_header_lines=spec["skip_header_lines"])
    keys, values = read_everything(reader, filename_queue([path]), n=3)
    assert values == [line.encode() for line in spec["expected"]]
    assert keys == keys_of(path, range(2, 2 + len(spec["expected"])))


def test_text_line_endings_and_short_files(tmp_path):
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"h1\r\nh2\na\r\n\nb\r\nlast")
    short = tmp_path / "short.txt"
    short.write_bytes(b"only header\n")
    long_line = tmp_path / "long.txt"
    long_line.write_bytes(b"x" * (3 << 20) + b"\nsecond\ny")  # a line over several read chunks
    reader = TextLineReader(skip_header_lines=2)
    keys, values = read_everything(reader, filename_queue([str(crlf), str(short), str(long_line)]))
    assert values == [b"a", b"", b"b", b"last", b"y"]
    assert keys == keys_of(crlf, [3, 4, 5, 6]) + keys_of(long_line, [3])
    keys, values = read_everything(TextLineReader(), filename_queue([str(long_line)]))
    assert values == [b"x" * (3 << 20), b"second", b"y"]


# -- FixedLengthRecordReader ------------------------------------------------------------------


def test_fixed_length_records_are_tensorflows(golden_dir, manifest):
    path = os.path.join(golden_dir, "fixed.bin")
    spec = manifest["files"]["fixed.bin"]
    with np.load(os.path.join(golden_dir, "expected.npz")) as expected:
        records = [row.tobytes() for row in expected["fixed.records"]]
    reader = FixedLengthRecordReader(spec["record_bytes"], header_bytes=spec["header_bytes"],
                                     footer_bytes=spec["footer_bytes"])
    keys, values = read_everything(reader, filename_queue([path]), n=2)
    assert values == records and len(records) == 5
    assert keys == keys_of(path, range(5))


@pytest.mark.parametrize("encoding", [None, "ZLIB", "GZIP"])
def test_fixed_length_hop_bytes_and_encodings(tmp_path, golden_dir, encoding):
    with open(os.path.join(golden_dir, "fixed.bin"), "rb") as f:
        data = f.read()  # 57 bytes: 3 header, 5 x 10, 4 footer
    path = tmp_path / "fixed"
    path.write_bytes({None: data, "ZLIB": zlib.compress(data),
                      "GZIP": gzip.compress(data)}[encoding])
    # Overlapping records every 5 bytes: record i at 3 + 5i exists while 3 + 5i + 10 + 4 <= 57.
    reader = FixedLengthRecordReader(10, header_bytes=3, footer_bytes=4, hop_bytes=5,
                                     encoding=encoding)
    keys, values = read_everything(reader, filename_queue([str(path)]), n=4)
    assert values == [data[3 + 5 * i:13 + 5 * i] for i in range(9)]
    assert keys == keys_of(path, range(9))
    # Hops longer than a record skip the bytes between.
    reader = FixedLengthRecordReader(4, header_bytes=3, hop_bytes=20, encoding=encoding)
    assert read_everything(reader, filename_queue([str(path)]))[1] == [
        data[3:7], data[23:27], data[43:47]]


def test_fixed_length_cut_compression_ends_and_damaged_compression_is_data_loss(tmp_path):
    data = os.urandom(1000)
    whole = gzip.compress(data)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(whole[:-30])  # a stream without its end marker ends where its bytes do, as TF
    reader = FixedLengthRecordReader(10, encoding="GZIP")
    values = read_everything(reader, filename_queue([str(cut)]))[1]
    assert 0 < len(values) < 100 and b"".join(values) == data[:10 * len(values)]
    damaged = tmp_path / "damaged.gz"
    damaged.write_bytes(whole[:20] + b"\xff" * 40 + whole[60:])
    with pytest.raises(DataLossError, match=r"^corrupted GZIP stream \(Error -3 while "
                                            r"decompressing data: .*\), reading record \d+ in "
                                            r"file '.*damaged\.gz'$"):
        read_everything(FixedLengthRecordReader(10, encoding="GZIP"),
                        filename_queue([str(damaged)]))


# -- WholeFileReader --------------------------------------------------------------------------


def test_whole_file_reader(tmp_path, golden_dir):
    lines = os.path.join(golden_dir, "lines.txt")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    reader = WholeFileReader()
    keys, values = read_everything(reader, filename_queue([lines, str(empty), lines.encode()]), n=5)
    with open(lines, "rb") as f:
        content = f.read()
    assert keys == [lines.encode(), os.fsencode(empty), lines.encode()]
    assert values == [content, b"", content]
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (3, 3)


def test_reads_ahead_yet_counts_and_finishes_files_as_record_by_record(tmp_path, golden_records):
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    for path, records in zip(paths, (golden_records[:30], golden_records[:5])):
        with TFRecordWriter(path) as w:
            for record in records:
                w.write(record)
    keys = [keys_of(path, offsets_of(golden_records[:n])) for path, n in zip(paths, (30, 5))]
    reader = TFRecordReader()
    queue = filename_queue(paths)
    assert [reader.read(queue) for _ in range(3)] == list(zip(keys[0], golden_records))[:3]
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (3, 0)
    k, v = reader.read_up_to(queue, 10)  # the records read() took ahead come first
    assert (list(k), list(v)) == (keys[0][3:13], golden_records[3:13])
    k, v = reader.read_up_to(queue, 100)  # the rest of the file: finished in this call
    assert (list(k), list(v)) == (keys[0][13:30], golden_records[13:30])
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (30, 1)
    got = [reader.read(queue) for _ in range(5)]
    assert got == list(zip(keys[1], golden_records))
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (35, 1)
    with pytest.raises(OutOfRangeError):  # the read after the last record finishes the file
        reader.read(queue)
    assert (reader.num_records_produced(), reader.num_work_units_completed()) == (35, 2)



@pytest.mark.parametrize("make", [TFRecordReader, TextLineReader, WholeFileReader,
                                  lambda: FixedLengthRecordReader(7)],
                         ids=["tfrecord", "text", "whole", "fixed"])
def test_values_without_keys_are_read_up_to_s_values(tmp_path, golden_records, make):
    paths = [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
    for path, records in zip(paths, (golden_records[:30], golden_records[:5])):
        with TFRecordWriter(path) as w:
            for record in records:
                w.write(record)
    keyed, unkeyed = make(), make()
    keyed_queue, unkeyed_queue = filename_queue(paths * 2), filename_queue(paths * 2)
    # read() first, so that records taken ahead (with their keys) are in the mix
    assert keyed.read(keyed_queue) == unkeyed.read(unkeyed_queue)
    while True:
        try:
            _, values = keyed.read_up_to(keyed_queue, 4)
        except OutOfRangeError:
            with pytest.raises(OutOfRangeError):
                unkeyed._read_values(unkeyed_queue, 4)
            break
        got = unkeyed._read_values(unkeyed_queue, 4)
        assert got.dtype == object and list(got) == list(values)
    for count in ("num_records_produced", "num_work_units_completed"):
        assert getattr(unkeyed, count)() == getattr(keyed, count)() > 0


def test_keys_of_a_name_with_a_nul_byte_are_formatted_one_by_one():
    # _format_keys cuts keys apart at NUL bytes; a name holding one (possible only for a
    # protocol path) takes the one-by-one way and still gives whole keys.
    assert _format_keys(b"mem://a\0b%", [0, 16]) == [b"mem://a\0b%:0", b"mem://a\0b%:16"]
    assert _format_keys(b"f", []) == []
    assert _format_keys(b"f%d", [5, 70]) == [b"f%d:5", b"f%d:70"]


def test_an_unkeyed_read_returns_no_keys_even_for_records_taken_ahead(tmp_path, golden_records):
    path = str(tmp_path / "a.tfrecord")
    with TFRecordWriter(path) as w:
        for record in golden_records[:30]:
            w.write(record)
    reader = TFRecordReader()
    queue = filename_queue([path])
    reader.read(queue)
    reader.read(queue)  # the second takes records ahead, with their keys
    keys, values = reader._read(queue, 5, keyed=False)
    assert keys == [] and values == golden_records[2:7]


@pytest.mark.parametrize("length, checksum_right, message", [
    (2**62, False, r"^corrupted record at 0: length checksum mismatch in file '.*huge\.tfrecord'$"),
    (2**63, True, r"^truncated record at 0: the record needs 9223372036854775824 bytes, the "
                  r"file holds 112 from there, in file '.*huge\.tfrecord'$"),
])
def test_a_keyed_read_allocates_nothing_from_a_huge_length(tmp_path, length, checksum_right,
                                                          message):
    # A length is used only after its checksum matched, and read only as far as the file goes.
    from queuepipe._frames import _masked_crc32c

    encoded = length.to_bytes(8, "little")
    crc = _masked_crc32c(encoded) if checksum_right else 0
    path = tmp_path / "huge.tfrecord"
    path.write_bytes(encoded + crc.to_bytes(4, "little") + b"x" * 100)
    with qp.Pipeline().as_default():
        queue = qp.FIFOQueue(4, [qp.string], [()])
        queue.enqueue(f"{path}:0".encode())
        with pytest.raises(DataLossError, match=message):
            qp.KeyedRecordReader().read(queue)
