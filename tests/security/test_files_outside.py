"""31.2, 31.3: a dataset reaches no file outside it: `queuepipe index` never writes through
a link, an index is never read through one, and errors quote only a short escaped prefix of
what a file holds (tests/security, docs/security.md)."""

import os
import threading

import pytest

from queuepipe import cli
from queuepipe.protos import make_example
from queuepipe.records import TFRecordWriter
from queuepipe.shards import read_index

SECRET = "API_TOKEN=hunter2-do-not-print"


def write_examples(path, n=10):
    with TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(make_example({"label": i}).SerializeToString())
    return str(path)


def run(capsys, *argv):
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture
def victim(tmp_path):
    """A file of the user's, outside the dataset, that a planted link points at."""
    path = tmp_path / "home" / ".netrc"
    path.parent.mkdir()
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture
def shard(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    return write_examples(folder / "a.tfrecord")


@pytest.mark.parametrize("planted", [".index.partial", ".index"])
def test_index_never_writes_through_a_planted_link(shard, victim, capsys, planted):
    os.symlink(victim, shard + planted)
    status, out, _ = run(capsys, "index", shard)
    assert status == 0 and out.endswith("a.tfrecord.index: 10 records\n")
    assert victim.read_text() == SECRET + "\n"
    assert not os.path.islink(shard + ".index")
    assert len(read_index(shard + ".index")) == 10
    leftovers = sorted(os.listdir(os.path.dirname(shard)))
    assert leftovers == sorted(["a.tfrecord", "a.tfrecord.index"] +
                               (["a.tfrecord.index.partial"] if planted == ".index.partial"
                                else []))


def test_index_is_written_under_an_unpredictable_exclusive_name(shard, monkeypatch):
    made = []
    real_open = os.open

    def spy(path, flags, *args, **kwargs):
        made.append((os.fsdecode(path), flags))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    assert cli.main(["index", shard]) == 0
    created = [(path, flags) for path, flags in made if flags & os.O_CREAT]
    assert len(created) == 1
    path, flags = created[0]
    assert flags & os.O_EXCL and os.path.dirname(path) == os.path.dirname(shard)
    assert os.path.basename(path).startswith(".a.tfrecord.index.")
    assert os.path.basename(path) != ".a.tfrecord.index..tmp"  # a random part in between


def test_an_index_linked_to_a_secret_is_refused_not_printed(shard, victim, capsys):
    os.symlink(victim, shard + ".index")
    status, out, err = run(capsys, "count", shard)
    assert status == 0 and out.split() == ["10", shard]  # counted from the records
    assert "hunter2" not in out + err
    assert "is a symbolic link: an index must be a regular file beside its shard" in err
    with pytest.raises(ValueError, match="symbolic link"):
        read_index(shard + ".index")


def test_a_dangling_link_is_refused_too(shard, tmp_path, capsys):
    os.symlink(tmp_path / "nowhere", shard + ".index")
    status, _, err = run(capsys, "count", shard)
    assert status == 0 and "symbolic link" in err


def test_an_index_that_is_a_named_pipe_is_refused_without_blocking(shard, capsys):
    os.mkfifo(shard + ".index")
    done = []
    worker = threading.Thread(target=lambda: done.append(cli.main(["count", shard])))
    worker.start()
    worker.join(30)
    if worker.is_alive():  # unblock it, so that the test fails instead of hanging
        with open(shard + ".index", "w"):
            pass
        worker.join()
    assert done == [0]
    assert "not a regular file" in capsys.readouterr().err


def test_a_malformed_index_is_quoted_short_and_escaped(shard, capsys):
    with open(shard + ".index", "wb") as f:
        f.write(b"0 20\n" + b"\x1b[2J" + SECRET.encode() * 100 + b"\n")
    status, _, err = run(capsys, "count", shard)
    assert status == 0
    assert "a.tfrecord.index:2: an index line is '<offset> <length>', got '\\x1b[2J" in err
    assert "\x1b" not in err and "hunter2-do-not-print" not in err
    assert len(err) < 400
