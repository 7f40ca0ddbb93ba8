"""write_shards: balanced, exact, atomic shards with index files; read_index."""

import concurrent.futures
import errno
import os
import signal
import stat
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from helpers import wait_until

import queuepipe as qp
from queuepipe import cli
from queuepipe.errors import NotFoundError
from queuepipe.protos import Example, make_example
from queuepipe.records import RecordScanner, TFRecordWriter, tf_record_iterator
from queuepipe.shards import read_index, shard_name, write_shards


def scan(path, options=None):
    scanner = RecordScanner(path, options)
    try:
        return list(scanner)
    finally:
        scanner.close()


def shard_contents(paths, options=None):
    return [[data for _, data in scan(p, options)] for p in paths]


def random_records(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(k)) for k in rng.integers(0, 300, size=n)]


def assert_nothing_temporary(folder):
    assert [name for name in os.listdir(folder) if name.endswith(".tmp")] == []


def test_bytes_round_trip_balanced_in_order_with_matching_indexes(tmp_path):
    records = random_records(103)
    paths = write_shards(records, tmp_path / "out", 4, processes=1, progress=False)
    assert paths == [str(tmp_path / "out" / f"shard-0000{s}-of-00004.tfrecord") for s in range(4)]
    assert shard_contents(paths) == [records[s::4] for s in range(4)]
    for path in paths:
        pairs = scan(path)
        index = read_index(path + ".index")
        assert index.dtype == np.int64 and index.shape == (len(pairs), 2)
        assert index.tolist() == [[offset, len(data) + 16] for offset, data in pairs]
        assert int(index[-1].sum()) == os.path.getsize(path)
    with open(paths[0] + ".index") as f:
        assert f.readline() == f"0 {len(records[0]) + 16}\n"  # the tfrecord package's format


@pytest.mark.parametrize("processes", [1, 2])
def test_dict_of_columns_round_trip(tmp_path, processes):
    n = 37
    rng = np.random.default_rng(3)
    columns = {"label": np.arange(n, dtype=np.int64),
               "image": [rng.bytes(12) for _ in range(n)],
               "xy": rng.random((n, 2)).astype(np.float32)}
    paths = write_shards(columns, tmp_path, 3, processes=processes, progress=False)
    expected = [make_example({key: column[i] for key, column in columns.items()})
                .SerializeToString(deterministic=True) for i in range(n)]
    assert shard_contents(paths) == [expected[s::3] for s in range(3)]
    first = Example.FromString(shard_contents(paths)[1][0]).features.feature
    assert list(first["label"].int64_list.value) == [1]
    assert first["image"].bytes_list.value == [columns["image"][1]]
    assert np.array_equal(np.array(first["xy"].float_list.value, np.float32), columns["xy"][1])


@pytest.mark.parametrize("processes", [None, 2])
def test_dicts_messages_and_generators_give_the_exact_multiset(tmp_path, processes):
    rows = [{"id": i, "name": f"row {i}", "weights": [i / 2, -i]} for i in range(50)]
    expected = [make_example(row).SerializeToString(deterministic=True) for row in rows]
    paths = write_shards(iter(rows), tmp_path / "dicts", 5, processes=processes,
                         progress=False)
    got = shard_contents(paths)
    assert got == [expected[s::5] for s in range(5)]
    assert Counter(r for shard in got for r in shard) == Counter(expected)
    messages = [make_example(row) for row in rows]
    paths = write_shards(messages, tmp_path / "messages", 5, processes=1, progress=False)
    assert shard_contents(paths) == [expected[s::5] for s in range(5)]


def test_compressed_shards_and_names(tmp_path):
    records = random_records(20, seed=5)
    paths = write_shards(records, tmp_path, 2, prefix="train.gz", options="GZIP", index=False,
                         progress=False)
    assert [os.path.basename(p) for p in paths] == [
        "train.gz-00000-of-00002.tfrecord", "train.gz-00001-of-00002.tfrecord"]
    assert shard_name("x", 12, 100) == "x-00012-of-00100.tfrecord"
    assert shard_contents(paths, "GZIP") == [records[0::2], records[1::2]]
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in paths)
    with pytest.raises(ValueError, match=r"^index=True needs uncompressed shards, got "
                                         r"compression 'ZLIB': pass index=False"):
        write_shards(records, tmp_path, 2, options=qp.TFRecordOptions("ZLIB"))


def test_empty_input_writes_empty_shards(tmp_path):
    paths = write_shards([], tmp_path, 2, progress=False)
    assert shard_contents(paths) == [[], []]
    assert read_index(paths[0] + ".index").shape == (0, 2)


def full_disk(shard, after):
    """A TFRecordWriter class whose disk fills up after ``after`` records of ``shard``."""

    class FullDisk(TFRecordWriter):
        written = 0

        def write(self, record):
            if shard in self.path and self.written == after:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.written += 1
            super().write(record)

    return FullDisk


def test_a_full_disk_leaves_no_partial_or_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr("queuepipe.shards.TFRecordWriter", full_disk("shard-00001", 3))
    records = random_records(30)
    with pytest.raises(OSError, match=r"^\[Errno 28\] cannot write shard "
                                      r"'.*shard-00001-of-00003\.tfrecord': "
                                      r"No space left on device$") as info:
        write_shards(records, tmp_path, 3, processes=1, progress=False)
    assert info.value.errno == errno.ENOSPC
    assert sorted(os.listdir(tmp_path)) == ["shard-00000-of-00003.tfrecord",
                                            "shard-00000-of-00003.tfrecord.index"]
    assert shard_contents([str(tmp_path / "shard-00000-of-00003.tfrecord")]) == [records[0::3]]


def test_a_failed_rename_takes_the_index_back(tmp_path, monkeypatch):
    real_replace = os.replace

    def replace(src, dst):
        if dst.endswith(".tfrecord"):
            raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match=r"^\[Errno 18\] cannot write shard "
                                      r"'.*shard-00000-of-00001\.tfrecord'"):
        write_shards([b"a", b"b"], tmp_path, 1, progress=False)
    assert os.listdir(tmp_path) == []


def test_an_existing_shard_survives_a_failed_rewrite(tmp_path, monkeypatch):
    (old,) = write_shards([b"old"], tmp_path, 1, progress=False)
    monkeypatch.setattr("queuepipe.shards.TFRecordWriter", full_disk("shard-00000", 3))
    with pytest.raises(OSError, match=r"^\[Errno 28\] cannot write shard"):
        write_shards([b"new"] * 10, tmp_path, 1, progress=False)
    assert list(tf_record_iterator(old)) == [b"old"]
    assert read_index(old + ".index").tolist() == [[0, 19]]
    assert_nothing_temporary(tmp_path)


def test_an_error_in_a_worker_reaches_the_caller_and_other_shards_finish(tmp_path):
    rows = [{"a": i} for i in range(9)]
    rows[7] = {"a": object()}  # record 7 belongs to shard 1
    with pytest.raises(TypeError, match=r"^record 7: feature 'a': "):
        write_shards(rows, tmp_path, 3, processes=2, progress=False)
    assert sorted(os.listdir(tmp_path)) == [
        "shard-00000-of-00003.tfrecord", "shard-00000-of-00003.tfrecord.index",
        "shard-00002-of-00003.tfrecord", "shard-00002-of-00003.tfrecord.index"]


_WRITER = """
import sys
import queuepipe as qp
from queuepipe import cli

if __name__ == "__main__":
    # dict rows: the workers make the Examples, so the shards are written for a while
    rows = {"blob": [bytes(16384)] * 8000, "label": list(range(8000))}
    qp.write_shards(rows, sys.argv[1], 2, processes=2, progress=False)
"""


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="needs process groups")
def test_ctrl_c_to_the_process_group_leaves_no_temporary_file(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    out = tmp_path / "out"
    writer = subprocess.Popen([sys.executable, str(script), str(out)], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def writing():
            assert writer.poll() is None, "the shards were written before any Ctrl-C"
            return out.is_dir() and any(
                name.endswith(".tmp") and os.path.getsize(out / name) > (1 << 20)
                for name in os.listdir(out))

        wait_until(writing, "a worker was writing a shard", timeout=60)
        os.killpg(writer.pid, signal.SIGINT)  # as Ctrl-C in a terminal: parent and workers
        assert writer.wait(timeout=60) != 0
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
            writer.wait()
    assert_nothing_temporary(out)


_NO_GUARD = """
import os, sys
import queuepipe as qp
from queuepipe import cli
from queuepipe import shards

# No `if __name__ == "__main__":` here, as in write_shards' own docstring example: a spawned
# worker would import this script again and write the shards again, and fail.
rows = [{"label": i} for i in range(int(sys.argv[2]))]
paths = qp.write_shards(rows, sys.argv[1], 3, processes=2, progress=False)
print(shards._spawn_is_safe(), len(paths))
"""

_GUARDED = """
import sys
from queuepipe import shards

def main():
    return shards._spawn_is_safe()

print(main())  # the script's top level, outside the guard: a worker would run it again
if __name__ == "__main__":
    print(main())
"""


def test_a_script_without_the_main_guard_writes_its_shards_with_threads(tmp_path):
    script = tmp_path / "no_guard.py"
    script.write_text(_NO_GUARD)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "out"), "30"],
                         capture_output=True, text=True, timeout=50)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "False 3\n"
    labels = sorted(Example.FromString(r).features.feature["label"].int64_list.value[0]
                    for p in sorted((tmp_path / "out").glob("*.tfrecord"))
                    for _, r in scan(str(p)))
    assert labels == list(range(30))


def test_processes_are_used_only_from_inside_the_main_guard(tmp_path):
    script = tmp_path / "guarded.py"
    script.write_text(_GUARDED)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=50)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "False\nTrue\n"
    out = subprocess.run([sys.executable, "-c", "from queuepipe import shards; "
                          "print(shards._spawn_is_safe())"], capture_output=True, text=True,
                         timeout=50)
    assert out.stdout == "True\n"  # no script to import again


def test_any_executor_writes_the_shards_and_stays_the_callers(tmp_path):
    records = random_records(50)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        paths = write_shards(records, tmp_path, 4, executor=pool, progress=False)
        assert pool.submit(lambda: 7).result() == 7  # not shut down by write_shards
    assert shard_contents(paths) == [records[s::4] for s in range(4)]
    with pytest.raises(TypeError, match=r"^executor must be a concurrent\.futures\.Executor"):
        write_shards(records, tmp_path, 2, executor="dask")


_DASK = """
import os, sys
import numpy as np
import distributed
import queuepipe as qp
from queuepipe import cli

if __name__ == "__main__":
    rows = {"label": np.arange(40), "blob": [bytes([i]) * 8 for i in range(40)]}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \\
            distributed.Client(cluster) as client:
        paths = qp.write_shards(rows, sys.argv[1], 4, executor=client.get_executor(),
                                progress=False)
        workers = set(client.run(os.getpid).values())
    labels = qp.parse_example([r for p in paths for r in qp.io.tf_record_iterator(p)],
                              {"label": qp.io.FixedLenFeature([], qp.int64)})["label"]
    print(len(workers), os.getpid() in workers, sorted(labels.tolist()) == list(range(40)))
"""


def test_a_dask_cluster_writes_the_shards(tmp_path):
    # In a process of its own: dask keeps threads of its own for the life of the process.
    pytest.importorskip("distributed")
    script = tmp_path / "dask_writer.py"
    script.write_text(_DASK)
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=55)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines()[-1] == "2 False True"  # two worker processes, not ours


def test_argument_errors(tmp_path):
    with pytest.raises(ValueError, match=r"^num_shards must be a positive integer, got 0$"):
        write_shards([b"x"], tmp_path, 0)
    with pytest.raises(ValueError, match=r"^processes must be a positive integer or None, "
                                         r"got 0$"):
        write_shards([b"x"], tmp_path, 1, processes=0)
    with pytest.raises(ValueError, match=r"^write_shards needs columns of equal length, got "
                                         r"\{'a': 3, 'b': 2\}$"):
        write_shards({"a": [1, 2, 3], "b": [1, 2]}, tmp_path, 1)
    with pytest.raises(TypeError, match=r"^record 1 is a int: write_shards takes bytes, "
                                        r"Example messages, or dicts of feature values$"):
        write_shards([b"x", 5], tmp_path, 1, progress=False)
    assert_nothing_temporary(tmp_path)


def test_progress_bar_with_and_without_tqdm(tmp_path, capsys, monkeypatch):
    import tqdm  # noqa: F401 - the demo extra installs it, so CI has it
    write_shards([b"x"] * 10, tmp_path, 2, progress=True)
    assert "write_shards shard" in capsys.readouterr().err
    write_shards([b"x"] * 10, tmp_path, 2, progress=False)
    assert capsys.readouterr().err == ""
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    paths = write_shards([b"x"] * 10, tmp_path, 2, progress=True)
    assert capsys.readouterr().err == ""
    assert shard_contents(paths) == [[b"x"] * 5] * 2


def test_read_index_errors(tmp_path):
    bad = tmp_path / "bad.index"
    bad.write_text("0 20\n20 x\n")
    with pytest.raises(ValueError, match=r"^.*bad\.index:2: an index line is "
                                         r"'<offset> <length>', got '20 x'$"):
        read_index(bad)
    with pytest.raises(NotFoundError, match=r"^file not found: '.*missing\.index'$"):
        read_index(tmp_path / "missing.index")


def test_read_index_line_forms(tmp_path):
    index = tmp_path / "forms.index"
    for text, rows in [("", []), ("0 20", [[0, 20]]), ("0 20\r\n20 7 \n", [[0, 20], [20, 7]]),
                       (" 0 20\n20\t7\n", [[0, 20], [20, 7]])]:  # the last by the slow path
        index.write_bytes(text.encode())
        assert read_index(index).tolist() == rows, text
    index.write_text("0 20\n\n")
    with pytest.raises(ValueError, match=r"forms\.index:2: an index line"):
        read_index(index)


def test_public_name():
    assert qp.write_shards is write_shards


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_shards_and_indexes_get_the_umask_mode(tmp_path, umask, mode):
    """29.14: as TF's writer, a new file's mode is 0o666 less the umask, not always 0o600."""
    old = os.umask(umask)
    try:
        paths = write_shards([b"a", b"bc", b"d"], tmp_path, 2, progress=False)
        assert cli.main(["convert", "--shards", "1", str(_csv(tmp_path)),
                         str(tmp_path / "csv")]) == 0
    finally:
        os.umask(old)
    made = paths + [p + ".index" for p in paths] + \
        [str(p) for p in (tmp_path / "csv").iterdir()]
    assert len(made) == 6
    assert {os.path.basename(p): stat.S_IMODE(os.stat(p).st_mode) for p in made} == \
        {os.path.basename(p): mode for p in made}


def _csv(folder):
    path = folder / "rows.csv"
    path.write_text("a,b\n1,x\n2,y\n")
    return path
