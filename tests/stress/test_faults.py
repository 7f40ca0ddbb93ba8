"""Faults: files that vanish or break under a running pipeline, full disks, slow stages.

Each fault must reach the consumer as an error naming its cause (the file, the byte offset,
the record), records already delivered must not come again, and with
``corrupt_records="skip"`` every intact record must arrive while the damage is counted.
"""

import collections
import errno
import os
import subprocess
import threading
import warnings

import pytest

import queuepipe as qp
from queuepipe.records import HEADER_BYTES
from stress_util import Shards, assert_no_repeats, drain, reading_stage


def _pipeline(shards, epochs=1, corrupt_records="raise", reader_threads=2):
    pipeline = qp.Pipeline()
    records, readers = reading_stage(
        shards, pipeline, epochs=epochs, readers=2, reader_threads=reader_threads, chunk=8,
        seed=3, capacity=32, corrupt_records=corrupt_records)
    with pipeline.as_default():
        batches = qp.train.batch(records.dequeue, 16, num_threads=2, capacity=64,
                                 allow_smaller_final_batch=True)
    return batches, readers


def _consume_until_error(batches):
    got = collections.Counter()

    def collect():
        more, _ = drain(batches)
        got.update(more)

    return got, collect


def _ids_of(shards, path):
    return [i for i, (p, _) in shards.where.items() if p == path]


def test_a_shard_deleted_after_the_queue_was_built_is_named(tmp_path):
    shards = Shards(tmp_path, 6, 40)
    batches, _ = _pipeline(shards)
    victim = shards.paths[3]
    os.remove(victim)
    got, collect = _consume_until_error(batches)
    with batches, pytest.raises(qp.errors.NotFoundError,
                                match=rf"^file not found: '{victim}'$"):
        collect()
    assert_no_repeats(got, shards.expected(1))
    assert not set(got) & set(_ids_of(shards, victim))


def test_a_shard_replaced_by_a_directory_is_named(tmp_path):
    shards = Shards(tmp_path, 4, 40)
    batches, _ = _pipeline(shards)
    victim = shards.paths[1]
    os.remove(victim)
    os.mkdir(victim)
    got, collect = _consume_until_error(batches)
    with batches, pytest.raises(IsADirectoryError, match=rf"Is a directory: '{victim}'$"):
        collect()
    assert_no_repeats(got, shards.expected(1))


def _damage(path, offset, how):
    with open(path, "r+b") as f:
        if how == "truncate":
            f.truncate(offset + HEADER_BYTES + 3)
        else:  # flip a bit of the record's data
            f.seek(offset + HEADER_BYTES + 2)
            byte = f.read(1)
            f.seek(offset + HEADER_BYTES + 2)
            f.write(bytes([byte[0] ^ 0x10]))


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_a_shard_damaged_after_the_queue_was_built_names_file_and_offset(tmp_path, how):
    shards = Shards(tmp_path, 5, 50)
    bad_id = 2 * 50 + 17
    path, offset = shards.where[bad_id]
    batches, _ = _pipeline(shards)
    _damage(path, offset, how)
    got, collect = _consume_until_error(batches)
    with batches, pytest.raises(qp.errors.DataLossError) as info:
        collect()
    error = info.value
    if how == "flip":
        assert error.offset == offset + HEADER_BYTES
        assert f"corrupted record at {offset + HEADER_BYTES}: data checksum mismatch" in str(error)
    else:
        assert error.offset == offset
        assert f"truncated record at {offset}" in str(error)
    assert error.path == path and f"in file '{path}'" in str(error)
    assert_no_repeats(got, shards.expected(1))
    assert bad_id not in got


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_skip_policy_delivers_every_intact_record_and_counts_the_damage(tmp_path, how):
    shards = Shards(tmp_path, 5, 50)
    epochs = 2
    flipped = [7, 2 * 50 + 17, 4 * 50 + 49]  # in shards 0, 2 and 4
    for record_id in flipped:
        _damage(*shards.where[record_id], how)
    lost = set(flipped)
    if how == "truncate":  # the file ends inside the record: the rest of the shard is gone
        lost = {i for i in shards.ids for r in flipped
                if shards.where[i][0] == shards.where[r][0] and i >= r}
    batches, readers = _pipeline(shards, epochs=epochs, corrupt_records="skip")
    with batches:
        got, _ = drain(batches)
    expected = collections.Counter([i for i in shards.ids if i not in lost] * epochs)
    assert got == expected
    assert sum(r.num_records_skipped() for r in readers) == len(flipped) * epochs


def test_a_shard_truncated_while_being_read_is_reported(tmp_path):
    # The reader has the file open and has read its first chunk when the file is cut.
    shards = Shards(tmp_path, 1, 2000, payload=600)  # about 1.3 MB: more than one 1 MiB read
    path = shards.paths[0]
    names = qp.FIFOQueue(1, [qp.string], shapes=[[]])
    names.enqueue(path.encode())
    names.close()
    reader = qp.TFRecordReader()
    keys, _ = reader.read_up_to(names, 10)
    assert keys[0] == f"{path}:0".encode()
    cut_id = 1900
    _, cut_at = shards.where[cut_id]
    os.truncate(path, cut_at + 5)
    got = 10
    with pytest.raises(qp.errors.DataLossError) as info:
        while True:
            got += len(reader.read_up_to(names, 100)[0])
    assert got == cut_id
    assert info.value.path == path and info.value.offset == cut_at
    assert str(info.value).startswith(f"truncated record header at {cut_at}")


# -- disk full --------------------------------------------------------------------------------


def _assert_disk_full_names_the_shard(out_dir, error):
    assert error.errno == errno.ENOSPC
    assert str(error).startswith(f"[Errno {errno.ENOSPC}] cannot write shard '{out_dir}")
    leftovers = [n for n in os.listdir(out_dir) if n.endswith(".tmp")]
    assert leftovers == [], f"temporary files left after a full disk: {leftovers}"


def _records(n, size):
    return [bytes([i % 251]) * size for i in range(n)]


def test_disk_full_injected_names_the_shard_and_leaves_no_partial_file(tmp_path, monkeypatch):
    real_write = qp.io.TFRecordWriter._write
    written = {"bytes": 0}

    def write(self, data):
        written["bytes"] += len(data)
        if written["bytes"] > 50_000:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write(self, data)

    monkeypatch.setattr(qp.io.TFRecordWriter, "_write", write)
    out = tmp_path / "out"
    with pytest.raises(OSError) as info:
        qp.write_shards(_records(200, 1000), out, num_shards=4, processes=1, progress=False)
    _assert_disk_full_names_the_shard(str(out), info.value)
    complete = sorted(n for n in os.listdir(out) if n.endswith(".tfrecord"))
    for name in complete:  # shards written before the disk filled are whole
        assert len(list(qp.io.tf_record_iterator(os.path.join(out, name)))) == 50


def _mount_tmpfs(folder):
    """Mounts a 256 KiB tmpfs on ``folder``; returns why it could not, or None."""
    try:
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", folder],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    return None if result.returncode == 0 else (result.stderr.strip() or "mount failed")


def test_disk_full_on_a_real_small_filesystem(tmp_path, monkeypatch):
    out = tmp_path / "small"
    out.mkdir()
    why_not = _mount_tmpfs(str(out))
    if why_not is not None:
        warnings.warn(f"a tmpfs could not be mounted ({why_not}): ran the injected ENOSPC "
                      f"instead of a real full disk")
        test_disk_full_injected_names_the_shard_and_leaves_no_partial_file(tmp_path,
                                                                            monkeypatch)
        return
    try:
        with pytest.raises(OSError) as info:
            qp.write_shards(_records(600, 1000), out, num_shards=3, processes=1,
                            progress=False)
        _assert_disk_full_names_the_shard(str(out), info.value)
    finally:
        subprocess.run(["umount", str(out)], check=True, timeout=30)


# -- slow stages ------------------------------------------------------------------------------


def test_a_slow_producer_blocks_the_consumer_until_it_delivers():
    gate = threading.Event()
    produced = iter(range(20))

    def producer():
        gate.wait()
        item = next(produced, None)
        if item is None:
            raise qp.errors.OutOfRangeError("done")
        return item

    with qp.Pipeline().as_default():
        batches = qp.train.batch(producer, 5, num_threads=2, capacity=4,
                                 allow_smaller_final_batch=True)
    got = []
    consumer = threading.Thread(target=lambda: got.extend(
        int(x) for b in batches for x in b), name="test/consumer")
    with batches:
        consumer.start()
        consumer.join(0.2)
        assert consumer.is_alive() and got == []  # blocked: the producer has given nothing
        gate.set()
        consumer.join(30.0)
    assert not consumer.is_alive()
    assert collections.Counter(got) == collections.Counter(range(20))


def test_a_slow_consumer_holds_the_producers_at_capacity_and_loses_nothing(tmp_path):
    shards = Shards(tmp_path, 3, 60)
    batches, _ = _pipeline(shards, reader_threads=3)
    with batches:
        first, _ = drain(batches, stop_after=1)  # starts the runners
        queue = batches.queue
        # The consumer now stalls: the producers must fill the queue and then wait.
        pause = threading.Event()
        for _ in range(3000):
            if queue.size() == queue.capacity:
                break
            pause.wait(0.01)
        assert queue.size() == queue.capacity
        runner_threads = [t for t in threading.enumerate()
                          if t.name.startswith(f"queuepipe/{queue.name}/runner-")]
        assert runner_threads and all(t.is_alive() for t in runner_threads)
        rest, _ = drain(batches)
    assert first + rest == shards.expected(1)

