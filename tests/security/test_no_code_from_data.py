"""31.1: no code runs from a dataset: not from a file name taken for an option, not from a
features file, not from a file name printed into code (tests/security, docs/security.md)."""

import ast
import json
import os
import re
import subprocess

import pytest

import queuepipe as qp
from queuepipe import cli
from queuepipe._spec_files import SpecFileError, read_specs, spec_code
from queuepipe.protos import make_example
from queuepipe.records import TFRecordWriter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_examples(path, n=20):
    with TFRecordWriter(str(path)) as writer:
        for i in range(n):
            writer.write(make_example({"label": i, "name": f"r{i}"}).SerializeToString())
    return str(path)


def planted(folder, marker):
    """Python that, if run, creates ``marker``: what a hostile dataset ships."""
    return f"open({str(marker)!r}, 'w').close()\nfeatures = {{}}\n"


@pytest.fixture
def dataset(tmp_path, monkeypatch):
    """A dataset folder as `*.tfrecord` expands in it: a hostile name among the shards."""
    folder = tmp_path / "data"
    folder.mkdir()
    write_examples(folder / "a.tfrecord")
    marker = tmp_path / "ran"
    (folder / ".p.tfrecord").write_text(planted(folder, marker))
    (folder / "--features=.p.tfrecord").write_bytes(b"")
    monkeypatch.chdir(folder)
    return folder, marker


def run(capsys, *argv):
    status = cli.main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_a_file_named_like_the_features_option_runs_nothing(dataset, capsys):
    folder, marker = dataset
    shards = sorted(p for p in os.listdir(folder) if p.endswith(".tfrecord")
                    and not p.startswith("."))  # what the shell gives for *.tfrecord
    assert shards == ["--features=.p.tfrecord", "a.tfrecord"]
    status, _, err = run(capsys, "bench", *shards)
    assert not marker.exists()
    assert status == 2
    assert "put '--' before file names" in err


def test_an_abbreviated_option_is_not_accepted(dataset, capsys):
    folder, marker = dataset
    status, _, err = run(capsys, "bench", "--feat=.p.tfrecord", "a.tfrecord")
    assert not marker.exists()
    assert status == 2
    assert "unrecognized arguments: --feat=.p.tfrecord" in err


def test_after_double_dash_every_name_is_a_file(dataset, capsys):
    folder, marker = dataset
    write_examples(folder / "--features=.p.tfrecord")  # now a real shard with that name
    status, out, err = run(capsys, "bench", "--", "--features=.p.tfrecord", "a.tfrecord")
    assert (status, err) == (0, "")
    assert not marker.exists()
    assert "40 records in 2 file(s)" in out
    status, out, _ = run(capsys, "count", "--", "--features=.p.tfrecord")
    assert status == 0 and out.split() == ["20", "--features=.p.tfrecord"]


def test_a_features_file_is_read_as_data_never_run(tmp_path, capsys):
    shard = write_examples(tmp_path / "a.tfrecord")
    marker = tmp_path / "ran"
    hostile = tmp_path / "schema.py"
    hostile.write_text("import queuepipe as qp\n" + planted(tmp_path, marker))
    status, _, err = run(capsys, "bench", shard, "--features", str(hostile))
    assert status == 2 and not marker.exists()
    assert re.search(r"line 2: expected only 'import queuepipe as qp' and assignments of dicts "
                     r"of specs, got 'open\(", err), err
    # A spec call with a computed argument is refused too, not evaluated.
    hostile.write_text("features = {'x': qp.io.VarLenFeature(__import__('os').system('x'))}\n")
    status, _, err = run(capsys, "bench", shard, "--features", str(hostile))
    assert status == 2 and "a features file is read as data, never run" in err


def test_what_schema_prints_and_json_are_read_back(tmp_path, capsys):
    shard = write_examples(tmp_path / "a.tfrecord")
    status, code, _ = run(capsys, "schema", shard)
    assert status == 0
    specs = read_specs(code, "schema output")["features"]
    assert specs == {"label": qp.io.FixedLenFeature([], qp.int64),
                     "name": qp.io.FixedLenFeature([], qp.string)}
    (tmp_path / "schema.py").write_text(code)
    status, out, _ = run(capsys, "bench", shard, "--features", str(tmp_path / "schema.py"))
    assert status == 0 and "features: ['label', 'name']" in out
    as_json = {"label": {"type": "FixedLenFeature", "shape": [], "dtype": "int64"},
               "tags": {"type": "VarLenFeature", "dtype": "string"}}
    assert read_specs(json.dumps(as_json), "j")["features"] == {
        "label": qp.io.FixedLenFeature([], qp.int64), "tags": qp.io.VarLenFeature(qp.string)}


@pytest.mark.parametrize("spec", [
    qp.io.FixedLenFeature([28, 28], qp.float32, default_value=0.5),
    qp.io.FixedLenFeature([], qp.string, default_value=b"\n)\nimport os"),
    qp.io.VarLenFeature(qp.int64),
    qp.io.FixedLenSequenceFeature([3], qp.int64, allow_missing=True),
])
def test_spec_code_round_trips(spec):
    text = f"import queuepipe as qp\nfeatures = {{'k': {spec_code(spec)}}}\n"
    assert read_specs(text, "t")["features"]["k"] == spec


def test_an_error_quotes_only_a_short_escaped_prefix():
    with pytest.raises(SpecFileError) as info:
        read_specs("x = 1\n" + "y" * 10_000 + "\n", "f")
    assert len(str(info.value)) < 300
    with pytest.raises(SpecFileError) as info:
        read_specs("features = {'a': qp.io.VarLenFeature(b'\\n' * 5000)}", "f")
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


HOSTILE_NAME = "x\nopen('RAN', 'w').close()\n#.tfrecord"


def test_a_file_name_with_a_newline_stays_in_the_comment(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shard = write_examples(tmp_path / HOSTILE_NAME)
    status, code, _ = run(capsys, "schema", shard)
    assert status == 0
    tree = ast.parse(code)
    assert [type(node).__name__ for node in tree.body] == ["Import", "Assign"]
    assert code.splitlines()[0].startswith("# Feature specs") and "\\n" in code.splitlines()[0]
    status, out, _ = run(capsys, "bench", shard)  # inferred specs are objects, never run
    assert status == 0 and not (tmp_path / "RAN").exists()
    assert "features: ['label', 'name']" in out


def test_every_exec_in_the_package_says_why_data_cannot_reach_it():
    found = subprocess.run(["grep", "-rn", r"exec(\|compile(", "queuepipe/"], cwd=ROOT,
                           capture_output=True, text=True).stdout.splitlines()
    calls = [line for line in found if re.search(r"\bexec\(|[^.]\bcompile\(", line)
             and "re.compile(" not in line]
    assert calls, "the search finds the package's exec calls"
    for line in calls:
        assert "# noqa: S102 - " in line and "nothing from data" in line, line
