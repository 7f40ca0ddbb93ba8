"""31.4: the benchmark's data folder is private to the user, and bench never writes through
a link there (tests/security, docs/security.md)."""

import importlib.util
import os
import stat
import tempfile

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "benchmarks")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "benchmarks_bench_security", os.path.join(BENCHMARKS, "bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_default_data_folder_is_the_users_not_the_shared_temporary_one(bench, monkeypatch,
                                                                           tmp_path):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    default = bench.default_data()
    assert default == str(tmp_path / "home" / ".cache" / "queuepipe" / "bench-data")
    assert not default.startswith(tempfile.gettempdir() + os.sep + "bench-data")
    for script in ("bench", "bench_parse", "bench_stages", "bench_order", "instructions"):
        with open(os.path.join(BENCHMARKS, f"{script}.py"), encoding="utf-8") as f:
            assert "/tmp/bench-data" not in f.read(), script
    made = bench.private_folder(default)
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700


def test_a_folder_others_can_write_or_a_link_is_refused(bench, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(SystemExit, match="others can write to"):
        bench.private_folder(str(shared))
    link = tmp_path / "link"
    own = tmp_path / "own"
    own.mkdir(mode=0o700)
    link.symlink_to(own)
    with pytest.raises(SystemExit, match="is a link or not a folder"):
        bench.private_folder(str(link))
    with pytest.raises(SystemExit, match="is a link or not a folder"):
        bench.write_workloads(str(link), 20, 2)


def test_writing_the_workloads_replaces_planted_links_instead_of_following_them(bench,
                                                                               tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    data = tmp_path / "data"
    (data / "mnist").mkdir(parents=True, mode=0o700)
    data.chmod(0o700)
    planted = [data / "truth.npz", data / "mnist" / "shard-00000-of-00002.tfrecord"]
    for path in planted:
        path.symlink_to(victim)
    bench.write_workloads(str(data), 20, 2)
    assert victim.read_text() == "precious"
    assert not any(path.is_symlink() for path in planted)
    assert bench.truth(str(data), 1)["examples"] == 20
    assert not [name for name in os.listdir(data / "mnist") if name.endswith(".tmp")]
