"""queuepipe.distributed: shares of files and of records; a real 2-process gloo job."""

import collections
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import queuepipe as qp
from queuepipe.distributed import FileShare, Shard, ShardedTFRecordReader, shard_files, shard_info
from queuepipe.records import RecordScanner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def no_dist_env(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


def _write(path, records):
    with qp.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    return path


def _filename_queue(files):
    queue = qp.FIFOQueue(len(files) + 1, dtypes=[qp.string])
    for name in files:
        queue.enqueue(os.fsencode(name))
    queue.close()
    return queue


def _read_all(reader, files, n=3):
    """Every ``(key, value)`` the reader gives for ``files``, with ``read_up_to(n)``."""
    queue = _filename_queue(files)
    got = []
    while True:
        try:
            keys, values = reader.read_up_to(queue, n)
        except qp.OutOfRangeError:
            return got
        got.extend(zip(keys.tolist(), values.tolist()))


def test_importing_queuepipe_and_this_module_imports_no_framework():
    code = ("import sys, queuepipe as qp, queuepipe.distributed, queuepipe.integrations; "
            "qp.shuffle_batch; qp.TFRecordReader; qp.write_shards; "
            "print(sorted(m for m in ('torch', 'jax', 'keras', 'fsspec') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.stdout.strip() == "[]"


# -- shard_info -------------------------------------------------------------------------------

def test_shard_info_takes_explicit_arguments_first(monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert shard_info(2, 3) == Shard(rank=2, world_size=3)


def test_shard_info_reads_torchrun_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert shard_info() == Shard(3, 4)


def test_shard_info_defaults_to_one_process(no_dist_env):
    assert shard_info() == Shard(0, 1)


@pytest.mark.parametrize("rank, world_size, message", [
    (2, 2, r"^rank must be in \[0, 2\), got 2 \(as given\)$"),
    (-1, 2, r"^rank must be in \[0, 2\), got -1 \(as given\)$"),
    (0, 0, r"^world_size must be >= 1, got 0 \(as given\)$"),
    (0.5, 2, r"^rank and world_size must be integers, got rank=0.5, world_size=2"),
    (1, None, r"^give both rank and world_size or neither, got rank=1, world_size=None$"),
])
def test_shard_info_rejects_bad_arguments(rank, world_size, message):
    with pytest.raises(qp.errors.InvalidArgumentError, match=message):
        shard_info(rank, world_size)


@pytest.mark.parametrize("env, message", [
    ({"RANK": "0"}, r"^set both RANK and WORLD_SIZE or neither \(from the environment: "
                    r"RANK='0', WORLD_SIZE=None\)$"),
    ({"RANK": "x", "WORLD_SIZE": "2"}, r"^RANK and WORLD_SIZE must be integers"),
    ({"RANK": "5", "WORLD_SIZE": "2"}, r"^rank must be in \[0, 2\), got 5 \(from the env"),
])
def test_shard_info_rejects_a_bad_environment(no_dist_env, monkeypatch, env, message):
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(qp.errors.InvalidArgumentError, match=message):
        shard_info()


# -- shard_files ------------------------------------------------------------------------------

def test_shard_files_splits_sorted_whole_files_disjointly():
    files = ["f3", "f0", "f4", "f1", "f2"]
    shares = [shard_files(files, rank, 2) for rank in range(2)]
    assert shares == [FileShare(["f0", "f2", "f4"], Shard(0, 1)),
                      FileShare(["f1", "f3"], Shard(0, 1))]
    assert collections.Counter(f for s in shares for f in s.files) == collections.Counter(files)
    assert type(shares[0].reader()) is qp.TFRecordReader


def test_shard_files_with_fewer_files_than_processes_shares_records():
    share = shard_files([b"b", b"a"], 2, 3)
    assert share == FileShare(["a", "b"], Shard(2, 3))
    reader = share.reader()
    assert isinstance(reader, ShardedTFRecordReader)


def test_shard_files_globs_a_pattern(tmp_path, no_dist_env):
    for i in (1, 0):
        (tmp_path / f"part-{i}.tfrecord").write_bytes(b"")
    (tmp_path / "other.txt").write_bytes(b"")
    share = shard_files(str(tmp_path / "part-*.tfrecord"))
    assert share.files == [str(tmp_path / "part-0.tfrecord"), str(tmp_path / "part-1.tfrecord")]


def test_shard_files_refuses_no_files(tmp_path):
    with pytest.raises(qp.errors.InvalidArgumentError, match=r"^shard_files: no file matches"):
        shard_files(str(tmp_path / "*.tfrecord"), 0, 1)
    with pytest.raises(qp.errors.InvalidArgumentError, match=r"^shard_files got an empty list"):
        shard_files([], 0, 1)


# -- ShardedTFRecordReader --------------------------------------------------------------------

@pytest.mark.parametrize("indexed", [False, True], ids=["scan", "index"])
@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_sharded_reader_ranks_together_read_every_record_once(tmp_path, indexed, world_size):
    records = [b"%d" % j * (j % 4 + 1) for j in range(21)]
    files = qp.write_shards(records, tmp_path, 2, progress=False, index=indexed)
    assert os.path.exists(files[0] + ".index") == indexed
    expected = _read_all(qp.TFRecordReader(), files)
    assert sorted(value for _, value in expected) == sorted(records)

    per_rank = [_read_all(ShardedTFRecordReader(rank, world_size), files)
                for rank in range(world_size)]

    got = [item for items in per_rank for item in items]
    assert collections.Counter(got) == collections.Counter(expected)  # same keys and values
    for rank, items in enumerate(per_rank):  # rank r has records r, r + world_size, ... of each
        mine = [item for path in files
                for item in [e for e in expected if e[0].startswith(os.fsencode(path) + b":")]
                [rank::world_size]]
        assert items == mine


def _corrupt_record(path, position):
    """Flips a data byte of the record at ``position``; returns that record's offset."""
    offset = [offset for offset, _ in RecordScanner(path)][position]
    with open(path, "r+b") as f:
        f.seek(offset + 12)
        byte = f.read(1)
        f.seek(offset + 12)
        f.write(bytes([byte[0] ^ 0xFF]))
    return offset


def _one_indexed_shard(tmp_path, records):
    (path,) = qp.write_shards(records, tmp_path, 1, progress=False)
    return path


def test_sharded_reader_with_an_index_reads_only_its_own_records(tmp_path):
    path = _one_indexed_shard(tmp_path, [b"record-%d" % i for i in range(6)])
    bad_offset = _corrupt_record(path, 3)  # a record of rank 1 of 2

    rank0 = _read_all(ShardedTFRecordReader(0, 2), [path])
    assert [value for _, value in rank0] == [b"record-0", b"record-2", b"record-4"]

    reader = ShardedTFRecordReader(1, 2)
    queue = _filename_queue([path])
    keys, values = reader.read_up_to(queue, 5)  # the records before the damage come first
    assert values.tolist() == [b"record-1"]
    message = (rf"^corrupted record at {bad_offset + 12}: data checksum mismatch over 8 data "
               rf"bytes of the record at {bad_offset} in file '{path}'$")
    for _ in range(2):  # raised again by every later read, as TFRecordReader does
        with pytest.raises(qp.errors.DataLossError, match=message) as caught:
            reader.read(queue)
        assert caught.value.path == path and caught.value.offset == bad_offset + 12


def test_sharded_reader_skips_damage_when_told_to(tmp_path):
    path = _one_indexed_shard(tmp_path, [b"record-%d" % i for i in range(6)])
    _corrupt_record(path, 3)
    reader = ShardedTFRecordReader(1, 2, corrupt_records="skip")
    assert [v for _, v in _read_all(reader, [path])] == [b"record-1", b"record-5"]
    assert reader.num_records_skipped() == 1


def test_sharded_reader_scans_when_the_index_is_stale(tmp_path, caplog):
    path = _one_indexed_shard(tmp_path, [b"r%d" % i for i in range(4)])
    _write(path, [b"r%d" % i for i in range(7)])  # the file grew; the index did not
    got = _read_all(ShardedTFRecordReader(0, 2), [path])
    assert [value for _, value in got] == [b"r0", b"r2", b"r4", b"r6"]
    assert f"'{path}.index' does not match its file (its records end at byte" in caplog.text


@pytest.mark.parametrize("edit", ["drop", "repeat", "swap"])
def test_sharded_reader_scans_when_an_index_line_is_missing_repeated_or_moved(tmp_path, caplog,
                                                                               edit):
    records = [b"r%d" % i for i in range(6)]
    path = _one_indexed_shard(tmp_path, records)
    with open(path + ".index") as f:
        lines = f.readlines()
    lines = {"drop": lines[:2] + lines[3:],
             "repeat": lines[:3] + lines[2:],
             "swap": lines[:1] + [lines[2], lines[1]] + lines[3:]}[edit]
    with open(path + ".index", "w") as f:
        f.writelines(lines)
    got = _read_all(ShardedTFRecordReader(0, 1), [path])
    assert [value for _, value in got] == records  # each record once, in file order
    assert "does not match its file" in caplog.text


def test_sharded_reader_rejects_a_bad_rank():
    with pytest.raises(qp.errors.InvalidArgumentError, match=r"^rank must be in \[0, 2\), got 2"):
        ShardedTFRecordReader(2, 2)


# -- a real 2-process job: torchrun, gloo on 127.0.0.1 ----------------------------------------

WORKER = textwrap.dedent('''
    """One rank of the test job: read each dataset's share for 2 epochs, gather at rank 0."""
    import functools
    import json
    import os
    import sys

    import torch.distributed as dist
    from torch.utils.data import DataLoader

    import queuepipe as qp
    from queuepipe.distributed import shard_files, shard_info
    from queuepipe.integrations.torch import QueuePipeIterableDataset

    def make_batches(shard, folder):
        share = shard_files(os.path.join(folder, "*.tfrecord"), *shard)
        files = qp.train.string_input_producer(share.files, num_epochs=1)
        reader = share.reader()
        return qp.train.shuffle_batch(lambda: reader.read_up_to(files, 3)[1], 4, capacity=32,
                                      min_after_dequeue=8, enqueue_many=True,
                                      allow_smaller_final_batch=True)

    out, folders = sys.argv[1], sys.argv[2:]
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    # torchrun's RANK/WORLD_SIZE first; without them, the process group answers.
    from_env = tuple(shard_info())
    del os.environ["RANK"], os.environ["WORLD_SIZE"]
    assert from_env == tuple(shard_info()) == (rank, world_size), (from_env, shard_info())
    results = {}
    for folder in folders:
        share = shard_files(os.path.join(folder, "*.tfrecord"))
        loader = DataLoader(QueuePipeIterableDataset(functools.partial(make_batches,
                                                                       folder=folder)),
                            batch_size=None)
        mine = {"files": [os.path.basename(f) for f in share.files],
                "record_shard": list(share.record_shard),
                "epochs": [[r.decode() for batch in loader for r in batch.tolist()]
                           for epoch in range(2)]}
        gathered = [None] * world_size
        dist.all_gather_object(gathered, mine)
        results[os.path.basename(folder)] = gathered
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()
''')


def run_two_process_job(tmp_path, worker, *args):
    """Runs ``worker`` (a script's text) as a 2-process torchrun job on 127.0.0.1, its first
    argument a file where rank 0 writes JSON; returns that JSON."""
    script = tmp_path / "worker.py"
    script.write_text(worker)
    out = tmp_path / "result.json"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=ROOT)
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
               "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(port),
               str(script), str(out), *map(str, args)]
    job = subprocess.run(command, env=env, capture_output=True, text=True, timeout=50)
    assert job.returncode == 0, job.stdout + job.stderr
    return json.loads(out.read_text())


def test_two_process_gloo_job_reads_every_record_once_per_epoch(tmp_path):
    pytest.importorskip("torch.distributed")
    datasets = {}
    for name, num_shards in (("four", 4), ("one", 1)):
        records = ["%s-%d" % (name, i) * (i % 3 + 1) for i in range(30 + num_shards)]
        qp.write_shards([r.encode() for r in records], tmp_path / name, num_shards,
                        progress=False)
        datasets[name] = records
    results = run_two_process_job(tmp_path, WORKER, tmp_path / "four", tmp_path / "one")
    four, one = results["four"], results["one"]
    # 4 shards: whole files, 2 each; 1 shard: both ranks open it and split its records.
    assert [r["files"] for r in four] == [["shard-00000-of-00004.tfrecord",
                                           "shard-00002-of-00004.tfrecord"],
                                          ["shard-00001-of-00004.tfrecord",
                                           "shard-00003-of-00004.tfrecord"]]
    assert [r["record_shard"] for r in four] == [[0, 1], [0, 1]]
    assert [r["files"] for r in one] == [["shard-00000-of-00001.tfrecord"]] * 2
    assert [r["record_shard"] for r in one] == [[0, 2], [1, 2]]
    for name, per_rank in results.items():
        for epoch in range(2):
            seen = [record for rank in per_rank for record in rank["epochs"][epoch]]
            assert collections.Counter(seen) == collections.Counter(datasets[name]), (name, epoch)
        assert all(rank["epochs"][0] and rank["epochs"][1] for rank in per_rank)


# -- even shares -------------------------------------------------------------------------------


def test_even_batches_drops_the_extra_batches_or_pads_with_the_first_ones():
    from queuepipe.distributed import EvenBatches, even_batches

    class Closing(list):
        closed = False

        def close(self):
            self.closed = True

    source = Closing(range(5))
    dropped = EvenBatches(source, 3, keep=0)
    assert len(dropped) == 3 and list(dropped) == [0, 1, 2] and source.closed
    assert list(EvenBatches(iter([0, 1]), 5, keep=3)) == [0, 1, 0, 1, 0]
    assert list(even_batches([7, 8], "pad", count=2)) == [7, 8]  # no process group: its own
    with pytest.raises(ValueError, match=r"even must be 'drop' or 'pad', got 'trim'"):
        even_batches([], "trim", count=0)
    with pytest.raises(ValueError, match=r"needs this rank's number of batches: pass count="):
        even_batches(iter([1]))


EVEN_WORKER = textwrap.dedent('''
    """One rank: its uneven share, evened by dropping, then by padding; gathered at rank 0."""
    import json
    import os
    import sys

    import torch.distributed as dist

    import queuepipe as qp
    from queuepipe.distributed import even_batches, shard_files

    out, folder = sys.argv[1], sys.argv[2]
    dist.init_process_group("gloo")
    share = shard_files(os.path.join(folder, "*.tfrecord"))
    features = {"label": qp.io.FixedLenFeature([], qp.int64)}
    mine = {}
    for even in ("drop", "pad"):
        with qp.Pipeline().as_default():
            batches = qp.train.read_batch_features(share.files, 4, features, num_epochs=1,
                                                   randomize_input=False)
            own = len(batches)
            labels = [batch["label"].tolist() for batch in even_batches(batches, even)]
        mine[even] = {"own": own, "labels": labels}
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine)
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()
''')


def test_uneven_shares_are_evened_across_a_two_process_gloo_job(tmp_path):
    pytest.importorskip("torch.distributed")
    # 3 shards of 10 records over 2 ranks: rank 0 reads shards 0 and 2 (20 records, 5
    # batches of 4), rank 1 shard 1 (10 records, 3 batches): uneven, a DDP job would hang.
    qp.write_shards({"label": list(range(30))}, tmp_path / "data", 3, progress=False)
    ranks = run_two_process_job(tmp_path, EVEN_WORKER, tmp_path / "data")
    assert [r["drop"]["own"] for r in ranks] == [5, 3]
    assert [len(r["drop"]["labels"]) for r in ranks] == [3, 3]  # the smallest share
    assert [len(r["pad"]["labels"]) for r in ranks] == [5, 5]  # the largest share
    short = ranks[1]["pad"]["labels"]
    assert short[3:] == short[:2]  # padded with its first batches
    assert sorted(v for b in ranks[1]["drop"]["labels"] for v in b) == \
        sorted(v for b in short[:3] for v in b)


@pytest.mark.parametrize("files, world_size", [(4, 2), (1, 2)], ids=["whole files", "records"])
def test_read_batch_features_reads_what_shard_files_returns(tmp_path, files, world_size):
    """30.5: shard_files' result goes straight to read_batch_features (it was a raw TypeError;
    `.files` was needed), and the ranks' shares read together every record once."""
    paths = [str(tmp_path / f"part-{f}.tfrecord") for f in range(files)]
    for f, path in enumerate(paths):
        _write(path, [qp.train.make_example({"label": 100 * f + i}).SerializeToString()
                      for i in range(10)])
    got = collections.Counter()
    for rank in range(world_size):
        share = shard_files(paths, rank=rank, world_size=world_size)
        with qp.Pipeline().as_default() as pipeline:
            batches = qp.read_batch_features(share, 4, {"label": qp.io.FixedLenFeature(
                [], qp.int64)}, num_epochs=1, randomize_input=False)
            with qp.running(pipeline):
                mine = [int(label) for batch in batches for label in batch["label"]]
        assert len(mine) == 10 * files // world_size
        got.update(mine)
    assert got == collections.Counter(100 * f + i for f in range(files) for i in range(10))


def test_read_batch_features_refuses_another_reader_for_a_record_share(tmp_path):
    path = str(tmp_path / "one.tfrecord")
    _write(path, [b"x"])
    share = shard_files([path], rank=0, world_size=2)
    with pytest.raises(qp.errors.InvalidArgumentError, match=r"share\.reader"):
        qp.read_batch_features(share, 1, {"x": qp.io.VarLenFeature(qp.string)},
                               reader=lambda: qp.TFRecordReader(), num_epochs=1)
