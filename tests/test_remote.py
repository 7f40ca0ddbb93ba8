"""queuepipe.remote: fsspec paths, storage options, and whole pipelines over object storage."""

import collections
import gc
import json
import os
import socket
import uuid

import pytest

import queuepipe as qp
from queuepipe import remote

fsspec = pytest.importorskip("fsspec")


def _records(n_shards, per_shard):
    return [[b"shard-%d/record-%d" % (s, i) * (i % 3 + 1) for i in range(per_shard)]
            for s in range(n_shards)]


def _read_pipeline(pattern, num_epochs):
    """Every record that match_filenames_once + string_input_producer + TFRecordReader give."""
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        files = qp.train.string_input_producer(qp.train.match_filenames_once(pattern),
                                               num_epochs=num_epochs, seed=7)
    reader = qp.TFRecordReader()
    coord = qp.Coordinator()
    threads = qp.train.start_queue_runners(coord, pipeline=pipeline)
    got = []
    try:
        while True:
            try:
                keys, values = reader.read_up_to(files, 4)
            except qp.OutOfRangeError:
                break
            got.extend(zip(keys.tolist(), values.tolist()))
    finally:
        coord.request_stop()
        coord.join(threads)
    return got


# -- helpers over local and memory:// paths ---------------------------------------------------

def test_is_remote():
    assert remote.is_remote("s3://bucket/key") and remote.is_remote(b"memory://x")
    assert not remote.is_remote("/data/train.tfrecord") and not remote.is_remote("rel/path")


def test_open_file_and_glob_locally(tmp_path):
    for name in ("b-1", "a-0", "c.txt"):
        with remote.open_file(str(tmp_path / name), "wb") as f:
            f.write(name.encode())
    assert remote.glob(str(tmp_path / "?-*")) == [str(tmp_path / "a-0"), str(tmp_path / "b-1")]
    with remote.open_file(os.fsencode(str(tmp_path / "b-1"))) as f:
        assert f.read() == b"b-1"
    with pytest.raises(qp.errors.NotFoundError, match=r"^file not found: '.*missing'$"):
        remote.open_file(str(tmp_path / "missing"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_or_a_directory_is_refused_at_once_naming_it(tmp_path):
    fifo = str(tmp_path / "pipe.tfrecord")
    os.mkfifo(fifo)  # no writer will ever come: a plain open() would block forever
    with pytest.raises(qp.errors.InvalidArgumentError,
                       match=r"^cannot read '.*pipe\.tfrecord': it is a named pipe \(FIFO\)"):
        remote.open_file(fifo)
    with pytest.raises(IsADirectoryError, match=r"Is a directory: '.*'$"):
        remote.open_file(str(tmp_path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_named_pipe_among_the_input_files_reaches_the_consumer(tmp_path):
    good = str(tmp_path / "good.tfrecord")
    with qp.io.TFRecordWriter(good) as writer:
        writer.write(b"record")
    fifo = str(tmp_path / "pipe.tfrecord")
    os.mkfifo(fifo)
    with qp.Pipeline().as_default():
        files = qp.train.string_input_producer([good, fifo], num_epochs=1, shuffle=False)
        reader = qp.TFRecordReader()
        batches = qp.train.batch(lambda: reader.read(files)[1], 1)
    with batches, pytest.raises(qp.errors.InvalidArgumentError, match=r"pipe\.tfrecord"):
        for _ in batches:
            pass


@pytest.fixture
def memory_dir():
    """A fresh directory of fsspec's in-memory filesystem, removed afterwards."""
    root = f"memory://queuepipe-test-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


def test_open_file_and_glob_in_memory(memory_dir):
    for name in ("x-1", "x-0", "y"):
        with remote.open_file(f"{memory_dir}/{name}", "wb") as f:
            f.write(name.encode())
    matches = remote.glob(f"{memory_dir}/x-*")
    assert [m.rsplit("/", 1)[1] for m in matches] == ["x-0", "x-1"]
    assert all(m.startswith("memory://") for m in matches)
    with remote.open_file(matches[1]) as f:  # what glob gives opens again
        assert f.read() == b"x-1"
    assert remote.glob(f"{memory_dir}/none-*") == []
    with pytest.raises(qp.errors.NotFoundError, match=r"^file not found: 'memory://.*/nope'$"):
        remote.open_file(f"{memory_dir}/nope")


def test_pipeline_over_memory_filesystem(memory_dir):
    shards = _records(3, 5)
    for s, records in enumerate(shards):
        with qp.io.TFRecordWriter(f"{memory_dir}/shard-{s}.tfrecord") as writer:
            for record in records:
                writer.write(record)
    with remote.open_file(f"{memory_dir}/other.txt", "wb") as f:
        f.write(b"not a shard")

    got = _read_pipeline(f"{memory_dir}/shard-*.tfrecord", num_epochs=2)

    expected = [r for records in shards for r in records] * 2
    assert collections.Counter(value for _, value in got) == collections.Counter(expected)
    assert all(key.startswith(b"memory://") and b"/shard-" in key for key, _ in got)


def test_configure_sets_and_restores_fsspec_options():
    conf = fsspec.config.conf
    before = dict(conf.get("s3", {}))
    handle = remote.configure("s3", endpoint_url="http://a", anon=True)
    try:
        assert conf["s3"] == {**before, "endpoint_url": "http://a", "anon": True}
        with remote.configure("s3", endpoint_url="http://b"):
            assert conf["s3"]["endpoint_url"] == "http://b" and conf["s3"]["anon"] is True
        assert conf["s3"]["endpoint_url"] == "http://a"
    finally:
        handle.restore()
    assert conf.get("s3", {}) == before


@pytest.mark.parametrize("protocol", ["", "s3://"])
def test_configure_rejects_a_bad_protocol(protocol):
    with pytest.raises(ValueError, match=r"^protocol must be a name such as 's3', got "):
        remote.configure(protocol, anon=True)


# -- S3, served by moto on 127.0.0.1 ----------------------------------------------------------

def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_server():
    """moto's S3 server in a thread of this process, stopped after the module's tests.

    s3fs's event-loop threads are started here too (they live as long as the process), so
    that the per-test check for leftover threads sees only what a test itself starts.
    """
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    options = dict(endpoint_url=f"http://127.0.0.1:{port}", key="testing", secret="testing",
                   client_kwargs={"region_name": "us-east-1"})
    try:
        with remote.configure("s3", **options):
            fs = fsspec.filesystem("s3", skip_instance_cache=True)
            fs.call_s3("create_bucket", Bucket="warm-up")
            _forget_s3_clients()
        yield options
    finally:
        server.stop()


def _forget_s3_clients():
    """Drops cached S3 filesystems so that their connections (and moto's threads) close."""
    import s3fs
    s3fs.S3FileSystem.clear_instance_cache()
    gc.collect()


@pytest.fixture
def s3(s3_server):
    """A new bucket on the moto server, with queuepipe configured to reach it."""
    bucket = f"bucket-{uuid.uuid4().hex[:12]}"
    with remote.configure("s3", **s3_server):
        fs = fsspec.filesystem("s3")
        fs.call_s3("create_bucket", Bucket=bucket)
        yield fs, bucket
        _forget_s3_clients()


def _upload_shards(fs, bucket, tmp_path, shards):
    """Writes the shards with write_shards (with .index files) and uploads them all."""
    local = tmp_path / "shards"
    paths = qp.write_shards([r for records in shards for r in records], local, len(shards),
                            progress=False)
    fs.put(str(local) + "/", f"{bucket}/", recursive=True)
    fs.pipe(f"{bucket}/README.txt", b"not a shard")
    return [os.path.basename(path) for path in paths]


def test_pipeline_over_s3(s3, tmp_path):
    fs, bucket = s3
    shards = _records(4, 6)
    names = _upload_shards(fs, bucket, tmp_path, shards)
    assert sorted(fs.ls(bucket, detail=False)) == sorted(
        [f"{bucket}/README.txt"] + [f"{bucket}/{n}{ext}" for n in names for ext in ("", ".index")])

    got = _read_pipeline(f"s3://{bucket}/shard-*.tfrecord", num_epochs=2)

    expected = [r for records in shards for r in records] * 2
    assert collections.Counter(value for _, value in got) == collections.Counter(expected)
    files = collections.Counter(key.rsplit(b":", 1)[0] for key, _ in got)
    assert files == {b"s3://%s/%s" % (bucket.encode(), n.encode()): 12 for n in names}


def test_ranks_share_one_s3_shard_through_its_remote_index(s3, tmp_path):
    from queuepipe.distributed import ShardedTFRecordReader, shard_files
    fs, bucket = s3
    shards = _records(1, 9)
    (name,) = _upload_shards(fs, bucket, tmp_path, shards)
    # Damage record 1 (rank 1's) in S3: rank 0 seeks past it by the index and never sees it.
    data = bytearray(fs.cat(f"{bucket}/{name}"))
    offset = 12 + len(shards[0][0]) + 4
    data[offset + 12] ^= 0xFF
    fs.pipe(f"{bucket}/{name}", bytes(data))

    def read(rank):
        share = shard_files(f"s3://{bucket}/shard-*.tfrecord", rank, 2)
        reader = share.reader()
        assert isinstance(reader, ShardedTFRecordReader)
        files = qp.FIFOQueue(2, dtypes=[qp.string])
        files.enqueue(share.files[0].encode())
        files.close()
        return reader.read_up_to(files, 10)[1].tolist()  # one file: all of this rank's

    assert read(0) == shards[0][0::2]
    with pytest.raises(qp.errors.DataLossError, match=rf"^corrupted record at {offset + 12}: "
                                                      rf"data checksum mismatch .* in file "
                                                      rf"'s3://{bucket}/{name}'$"):
        read(1)


def test_a_pipeline_over_s3_resumes_from_its_state(s3, tmp_path):
    """The state names files and byte offsets, not open handles: a new pipeline over the
    same objects (a new process would do the same) goes on from them."""
    fs, bucket = s3
    records = [qp.make_example({"id": i}).SerializeToString() for i in range(120)]
    _upload_shards(fs, bucket, tmp_path, [records[s::3] for s in range(3)])
    spec = {"id": qp.io.FixedLenFeature([], qp.int64)}

    def ids(stop_after=None, state=None):
        got = []
        with qp.Pipeline().as_default(), qp.train.read_batch_features(
                f"s3://{bucket}/shard-*.tfrecord", 10, spec, num_epochs=1, seed=2,
                queue_capacity=40, read_batch_size=8, state=state) as batches:
            for batch in batches:
                got.append(batch["id"].tolist())
                if len(got) == stop_after:
                    return got, json.loads(json.dumps(batches.state_dict()))
        return got, None

    whole, _ = ids()
    first, state = ids(stop_after=5)
    assert first + ids(state=state)[0] == whole
    assert sorted(i for batch in whole for i in batch) == list(range(120))
