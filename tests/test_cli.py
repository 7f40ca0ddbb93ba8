"""Tests of the ``queuepipe`` command, run in-process through ``main(argv)``."""

import os
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
from helpers import IMAGE_SPEC, mnist_like, write_idx

import queuepipe as qp
from queuepipe import cli
from queuepipe.protos import make_example, make_sequence_example
from queuepipe.records import FRAME_BYTES, RecordScanner, TFRecordWriter


def run(capsys, *argv):
    """Runs the command; returns ``(status, stdout, stderr)``."""
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def write_records(path, records, options=None):
    with TFRecordWriter(str(path), options) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def examples(n):
    """n serialized Examples: a fixed scalar, a fixed vector, a ragged list and a string."""
    return [make_example({"id": i, "xy": [i * 0.5, -i * 0.5], "tags": list(range(i % 3)),
                          "name": f"item-{i}"}).SerializeToString() for i in range(n)]


def offsets_of(path):
    scanner = RecordScanner(path)
    try:
        return [(offset, len(data)) for offset, data in scanner]
    finally:
        scanner.close()


def corrupt_byte(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))


# -- verify --------------------------------------------------------------------------------


@pytest.mark.parametrize("name, status, line", [
    ("examples.tfrecord", 0, r"^.*examples\.tfrecord: OK \(40 records\)$"),
    ("examples.gz.tfrecord", 0, r"^.*examples\.gz\.tfrecord: OK \(40 records\)$"),
    ("sequence.tfrecord", 0, r"^.*sequence\.tfrecord: OK \(20 records\)$"),
    ("corrupt_data_crc.tfrecord", 1,
     r"^.*corrupt_data_crc\.tfrecord: BAD record at offset 12: corrupted record at 12: "
     r"data checksum mismatch .*$"),
    ("truncated_mid_record.tfrecord", 1,
     r"^.*truncated_mid_record\.tfrecord: BAD record at offset 248: truncated record at 248.*$"),
    ("corrupt_length_crc.tfrecord", 1,
     r"^.*corrupt_length_crc\.tfrecord: BAD record at offset 0: .*length checksum mismatch.*$"),
])
def test_verify_golden_files(capsys, golden_dir, name, status, line):
    got, out, err = run(capsys, "verify", os.path.join(golden_dir, name))
    assert got == status
    assert re.search(line, out, re.M), out
    assert err == ""


def test_verify_reports_every_damaged_record_and_reads_on(capsys, tmp_path):
    path = write_records(tmp_path / "data.tfrecord", examples(6))
    frames = offsets_of(path)
    for i in (1, 4):  # damage the data of records 1 and 4
        corrupt_byte(path, frames[i][0] + 12 + frames[i][1] // 2)
    status, out, err = run(capsys, "verify", path)
    assert status == 1
    bad = re.findall(r"^.*: BAD record at offset (\d+): .*data checksum mismatch.*$", out, re.M)
    assert bad == [str(frames[1][0] + 12), str(frames[4][0] + 12)]
    assert re.search(r"^.*data\.tfrecord: BAD \(2 damaged, 4 good records\)$", out, re.M)


def test_verify_recognises_compression_and_reports_a_truncated_stream(capsys, tmp_path):
    records = [bytes([i]) * 100 for i in range(50)]
    path = write_records(tmp_path / "data.tfrecord", records, "GZIP")
    status, out, _ = run(capsys, "verify", path)
    assert (status, out) == (0, f"{path}: OK (50 records)\n")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    status, out, _ = run(capsys, "verify", path)
    assert status == 1
    assert re.search(r"^.*: BAD record at offset \d+: truncated record at \d+: .* \(the "
                     r"compressed stream ends there without its end marker", out, re.M)
    with TFRecordWriter(path, "GZIP") as w:  # a live writer's file, every record whole
        w.write(b"flushed")
        w.flush()
        status, out, _ = run(capsys, "verify", path)
    assert (status, out) == (0, f"{path}: OK (1 records; the compressed stream has no end "
                                "marker: a file still being written, or cut between two "
                                "records)\n")


def test_verify_several_files_summarises(capsys, golden_dir, tmp_path):
    good = write_records(tmp_path / "good.tfrecord", examples(3))
    status, out, _ = run(capsys, "verify", good,
                         os.path.join(golden_dir, "truncated_mid_record.tfrecord"))
    assert status == 1
    assert out.splitlines()[-1] == "1 of 2 files OK"
    status, out, _ = run(capsys, "verify", good, good)
    assert status == 0
    assert out.splitlines()[-1] == "2 of 2 files OK"


# -- count ---------------------------------------------------------------------------------


def test_count_golden_and_total(capsys, golden_dir):
    files = [os.path.join(golden_dir, n) for n in
             ("examples.tfrecord", "examples.zlib.tfrecord", "sequence.tfrecord")]
    status, out, err = run(capsys, "count", *files)
    assert status == 0 and err == ""
    assert out.splitlines() == [f"{40:>10}  {files[0]}", f"{40:>10}  {files[1]}",
                                f"{20:>10}  {files[2]}", f"{100:>10}  total"]


def test_count_scans_and_reports_an_index_that_lies_unless_told_to_trust_it(capsys, tmp_path):
    path = write_records(tmp_path / "data.tfrecord", examples(5))
    size = os.path.getsize(path)
    # An index that covers the whole file in one entry: only the index can say "1".
    with open(path + ".index", "w") as f:
        f.write(f"0 {size}\n")
    status, out, err = run(capsys, "count", path)
    assert (status, out) == (0, f"{5:>10}  {path}\n")
    assert err == (f"queuepipe count: warning: '{path}.index' lists 1 records, the file holds "
                   f"5; it is not used (queuepipe index rewrites it)\n")
    assert run(capsys, "count", "--trust-index", path)[1] == f"{1:>10}  {path}\n"


def test_count_gives_the_same_verdict_on_a_damaged_file_with_or_without_an_index(
        capsys, golden_dir, tmp_path):
    damaged = tmp_path / "damaged.tfrecord"
    damaged.write_bytes(open(os.path.join(golden_dir, "corrupt_data_crc.tfrecord"), "rb").read())
    without = run(capsys, "count", damaged)
    size = os.path.getsize(damaged)
    with open(f"{damaged}.index", "w") as f:  # an index that tiles the file
        f.write(f"0 {size}\n")
    assert run(capsys, "count", damaged)[:2] == without[:2] and without[0] == 1


def test_count_ignores_a_stale_index_with_a_warning(capsys, tmp_path):
    path = write_records(tmp_path / "data.tfrecord", examples(5))
    with open(path + ".index", "w") as f:
        f.write("0 10\n")
    status, out, err = run(capsys, "count", path)
    assert status == 0
    assert out == f"{5:>10}  {path}\n"
    assert re.fullmatch(r"queuepipe count: warning: '.*data\.tfrecord\.index' does not match "
                        r"its file \(its records end at byte 10, .*\); it is not used "
                        r"\(queuepipe index rewrites it\)\n", err)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
@pytest.mark.parametrize("command", ["inspect", "count", "verify", "schema", "index"])
def test_a_named_pipe_fails_every_subcommand_instead_of_hanging(capsys, tmp_path, command):
    fifo = str(tmp_path / "pipe.tfrecord")
    os.mkfifo(fifo)
    status, _, err = run(capsys, command, fifo)
    assert status != 0 and "it is a named pipe (FIFO)" in err


@pytest.mark.parametrize("edit", ["drop", "repeat"])
def test_count_scans_when_an_index_line_is_missing_or_repeated(capsys, tmp_path, edit):
    path = write_records(tmp_path / "data.tfrecord", examples(5))
    assert run(capsys, "index", path)[0] == 0
    with open(path + ".index") as f:
        lines = f.readlines()
    lines = lines[:2] + lines[3:] if edit == "drop" else lines[:3] + lines[2:]
    with open(path + ".index", "w") as f:
        f.writelines(lines)
    status, out, err = run(capsys, "count", path)
    assert (status, out) == (0, f"{5:>10}  {path}\n")
    assert re.search(r"line [34] puts a record at byte", err)


def test_count_ignores_a_malformed_index_with_a_warning(capsys, tmp_path):
    path = write_records(tmp_path / "data.tfrecord", examples(2))
    with open(path + ".index", "w") as f:
        f.write("0 x\n")
    status, out, err = run(capsys, "count", path)
    assert (status, out) == (0, f"{2:>10}  {path}\n")
    assert re.fullmatch(r"queuepipe count: warning: .*data\.tfrecord\.index:1: an index line is "
                        r"'<offset> <length>', got '0 x'; it is not used \(queuepipe index "
                        r"rewrites it\)\n", err)


def test_count_of_a_damaged_file_fails_with_one_line(capsys, golden_dir):
    status, out, err = run(capsys, "count", os.path.join(golden_dir, "corrupt_data_crc.tfrecord"))
    assert status == 1
    assert re.fullmatch(r"queuepipe count: error: corrupted record at 12: .*\n", err)


# -- inspect -------------------------------------------------------------------------------


def test_inspect_golden_shows_offsets_and_feature_names(capsys, golden_dir):
    path = os.path.join(golden_dir, "examples.tfrecord")
    status, out, err = run(capsys, "inspect", path)
    assert status == 0 and err == ""
    headers = re.findall(r"^# record (\d+) at offset (\d+) of .* \((\d+) bytes\): (\w+)$", out,
                         re.M)
    assert [(h[0], h[1], h[3]) for h in headers] == [
        ("0", "0", "Example"), ("1", "248", "Example"), ("2", "457", "Example")]
    keys = set(re.findall(r'^    key: "(\w+)"$', out, re.M))
    assert keys == {"big", "id", "image", "label", "name", "opt", "pair", "tags", "weight",
                    "words"}


def test_inspect_n_and_sequence_examples(capsys, golden_dir):
    status, out, _ = run(capsys, "inspect", "-n", 1, os.path.join(golden_dir, "sequence.tfrecord"))
    assert status == 0
    assert len(re.findall(r"^# record ", out, re.M)) == 1
    assert re.search(r"^# record 0 at offset 0 .*: SequenceExample$", out, re.M)
    assert re.search(r"^feature_lists \{$", out, re.M)


def test_inspect_raw_records_and_empty_files(capsys, tmp_path):
    path = write_records(tmp_path / "raw.tfrecord", [b"plain text, not a proto"])
    status, out, _ = run(capsys, "inspect", path)
    assert status == 0
    assert out.splitlines()[1:] == ["b'plain text, not a proto'"]
    assert out.splitlines()[0].endswith("(23 bytes): raw bytes")
    empty = write_records(tmp_path / "empty.tfrecord", [])
    assert run(capsys, "inspect", empty)[1] == f"# {empty} holds no records\n"


# -- index ---------------------------------------------------------------------------------


def test_index_writes_offset_and_framed_length(capsys, tmp_path):
    path = write_records(tmp_path / "data.tfrecord", examples(7))
    status, out, _ = run(capsys, "index", path)
    assert status == 0
    assert out == f"{path}.index: 7 records\n"
    with open(path + ".index") as f:
        lines = f.read().splitlines()
    assert lines == [f"{offset} {length + FRAME_BYTES}" for offset, length in offsets_of(path)]
    assert run(capsys, "count", path)[1] == f"{7:>10}  {path}\n"


def test_index_refuses_compressed_files(capsys, golden_dir, tmp_path):
    path = write_records(tmp_path / "data.tfrecord", examples(2), "GZIP")
    status, _, err = run(capsys, "index", path)
    assert status == 2
    assert re.fullmatch(r"queuepipe index: error: cannot index compressed file '.*'.*\n", err)
    assert not os.path.exists(path + ".index")


def test_index_of_a_damaged_file_leaves_no_index(capsys, golden_dir, tmp_path):
    damaged = tmp_path / "damaged.tfrecord"
    with open(os.path.join(golden_dir, "truncated_mid_record.tfrecord"), "rb") as f:
        damaged.write_bytes(f.read())
    status, _, err = run(capsys, "index", damaged)
    assert status == 1
    assert re.fullmatch(r"queuepipe index: error: truncated record at 248.*\n", err)
    assert sorted(os.listdir(tmp_path)) == ["damaged.tfrecord"]


# -- errors --------------------------------------------------------------------------------


def test_missing_file_is_a_usage_error_without_traceback(capsys, tmp_path):
    status, out, err = run(capsys, "verify", tmp_path / "nope.tfrecord")
    assert status == 2 and out == ""
    assert re.fullmatch(r"queuepipe verify: error: file not found: '.*nope\.tfrecord'\n", err)


def test_bad_arguments_exit_2(capsys):
    assert run(capsys)[0] == 2
    status, _, err = run(capsys, "count")
    assert status == 2
    assert re.search(r"^queuepipe count: error: the following arguments are required: FILE$",
                     err, re.M)
    assert run(capsys, "inspect", "-n", "many", "x")[0] == 2
    status, _, err = run(capsys, "schema", "--sample", "-1", "x")
    assert status == 2
    assert err.splitlines()[-1] == ("queuepipe schema: error: argument --sample: must be a "
                                    "positive integer, got '-1'")


@pytest.mark.parametrize("command", ["inspect", "count", "verify", "schema", "index"])
def test_a_directory_given_as_a_file_is_a_usage_error(capsys, tmp_path, command):
    status, out, err = run(capsys, command, tmp_path)
    assert status == 2 and out == ""
    assert err == (f"queuepipe {command}: error: '{tmp_path}' is a directory: give the "
                   f"TFRecord files in it ('{tmp_path / '*.tfrecord'}')\n")


def test_version(capsys):
    status, out, _ = run(capsys, "--version")
    assert status == 0 and out == f"queuepipe {qp.__version__}\n"


def test_not_a_tfrecord_file_is_bad_data(capsys, golden_dir):
    status, _, err = run(capsys, "inspect", os.path.join(golden_dir, "lines.txt"))
    assert status == 1
    assert re.fullmatch(r"queuepipe inspect: error: corrupted record at 0: length checksum "
                        r"mismatch \(Is this even a TFRecord file\?\) in file '.*lines\.txt'\n",
                        err)


@pytest.mark.parametrize("command", ["inspect", "count", "verify", "schema", "index", "convert",
                                     "bench", "demo"])
def test_every_subcommand_has_help(capsys, command):
    status, out, _ = run(capsys, command, "--help")
    assert status == 0
    assert out.startswith(f"usage: queuepipe {command} ")


def test_python_dash_m_queuepipe_help():
    result = subprocess.run([sys.executable, "-m", "queuepipe", "--help"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: queuepipe ")
    for command in ("inspect", "count", "verify", "schema", "index", "convert", "bench", "demo"):
        assert re.search(rf"^    {command} ", result.stdout, re.M), command


# -- schema --------------------------------------------------------------------------------


def schema_namespace(capsys, path, *args):
    status, out, err = run(capsys, "schema", path, *args)
    assert status == 0 and err == ""
    namespace = {}
    exec(compile(out, "schema", "exec"), namespace)
    return out, namespace


def test_schema_is_python_that_parses_the_records(capsys, tmp_path):
    records = examples(6)
    path = write_records(tmp_path / "data.tfrecord", records)
    out, namespace = schema_namespace(capsys, path)
    assert out.splitlines()[1:] == [
        "import queuepipe as qp",
        "",
        "features = {",
        '    "id": qp.io.FixedLenFeature([], qp.int64),',
        '    "name": qp.io.FixedLenFeature([], qp.string),',
        '    "tags": qp.io.VarLenFeature(qp.int64),',
        '    "xy": qp.io.FixedLenFeature([2], qp.float32),',
        "}",
    ]
    parsed = qp.parse_example(records, namespace["features"])
    assert parsed["id"].tolist() == list(range(6))
    assert parsed["name"].tolist() == [f"item-{i}".encode() for i in range(6)]
    assert parsed["xy"].tolist() == [[i * 0.5, -i * 0.5] for i in range(6)]
    assert parsed["tags"].values.tolist() == [v for i in range(6) for v in range(i % 3)]


def test_schema_looks_at_every_record_unless_sampled_and_says_what_it_left_out(capsys, tmp_path):
    # Records 0..499 hold one tag each; record 500 holds two: only all of them show VarLen.
    records = [make_example({"tags": [1] * (1 if i < 500 else 2)}).SerializeToString()
               for i in range(501)]
    path = write_records(tmp_path / "data.tfrecord", records)
    out = schema_namespace(capsys, path)[0].splitlines()
    assert '    "tags": qp.io.VarLenFeature(qp.int64),' in out
    assert out[0].startswith("# Feature specs inferred by `queuepipe schema` from 501 Examples")
    out = schema_namespace(capsys, path, "--sample", 3)[0].splitlines()
    assert '    "tags": qp.io.FixedLenFeature([], qp.int64),' in out
    assert out[0].endswith("(498 later records not looked at: --sample 3).")


def test_schema_missing_keys_and_mixed_types(capsys, tmp_path):
    records = [make_example({"a": 1, "b": 1.5, "odd key's": b"x"}).SerializeToString(),
               make_example({"b": 7}).SerializeToString()]
    path = write_records(tmp_path / "data.tfrecord", records)
    out, namespace = schema_namespace(capsys, path)
    assert out.splitlines()[3:] == [
        "features = {",
        '    "a": qp.io.VarLenFeature(qp.int64),',
        "    # 'b' left out: its records disagree on the type {'float_list': 1, 'int64_list': 1}",
        '    "odd key\'s": qp.io.VarLenFeature(qp.string),',
        "}",
    ]
    parsed = qp.parse_example(records, namespace["features"])
    assert parsed["a"].values.tolist() == [1]
    assert parsed["odd key's"].values.tolist() == [b"x"]


def test_schema_of_golden_examples_parses_them(capsys, golden_dir, golden_records):
    path = os.path.join(golden_dir, "examples.tfrecord")
    _, namespace = schema_namespace(capsys, path)
    records = list(qp.io.tf_record_iterator(path))
    parsed = qp.parse_example(records, namespace["features"])
    assert records == golden_records
    assert parsed["id"].tolist() == list(range(40))
    assert sorted(namespace["features"]) == ["big", "id", "image", "label", "name", "opt",
                                             "pair", "tags", "weight", "words"]


def test_schema_of_sequence_examples(capsys, tmp_path, golden_dir):
    records = [make_sequence_example({"length": n}, {"tokens": [[t] for t in range(n)],
                                                     "ragged": [[1] * (t + 1) for t in range(n)]}
                                     ).SerializeToString() for n in (1, 2, 3)]
    records.append(make_sequence_example({"length": 0}, {}).SerializeToString())
    path = write_records(tmp_path / "seq.tfrecord", records)
    out, namespace = schema_namespace(capsys, path)
    assert out.splitlines()[3:] == [
        "context_features = {",
        '    "length": qp.io.FixedLenFeature([], qp.int64),',
        "}",
        "",
        "sequence_features = {",
        '    "ragged": qp.io.VarLenFeature(qp.int64),',
        '    "tokens": qp.io.FixedLenSequenceFeature([], qp.int64, allow_missing=True),',
        "}",
    ]
    for n, record in zip((1, 2, 3, 0), records):
        context, sequence = qp.parse_single_sequence_example(
            record, namespace["context_features"], namespace["sequence_features"])
        assert int(context["length"]) == n
        assert sequence["tokens"].tolist() == list(range(n))
    _, namespace = schema_namespace(capsys, os.path.join(golden_dir, "sequence.tfrecord"))
    for record in qp.io.tf_record_iterator(os.path.join(golden_dir, "sequence.tfrecord")):
        qp.parse_single_sequence_example(record, namespace["context_features"],
                                         namespace["sequence_features"])


def test_schema_of_non_examples_is_bad_data(capsys, tmp_path):
    path = write_records(tmp_path / "raw.tfrecord", [b"plain text"])
    status, _, err = run(capsys, "schema", path)
    assert status == 1
    assert re.fullmatch(r"queuepipe schema: error: cannot infer a schema: the first record of "
                        r"'.*raw\.tfrecord' is not an Example or SequenceExample\n", err)
    empty = write_records(tmp_path / "empty.tfrecord", [])
    status, _, err = run(capsys, "schema", empty)
    assert status == 1
    assert re.fullmatch(r"queuepipe schema: error: cannot infer a schema: '.*empty\.tfrecord' "
                        r"holds no records\n", err)


# -- convert -------------------------------------------------------------------------------


def converted(capsys, *argv):
    """Runs ``convert``; returns the parsed records of all shards (in shard order)."""
    status, out, err = run(capsys, "convert", *argv)
    assert status == 0, err
    lines = out.splitlines()
    paths = lines[:-1]
    assert re.fullmatch(rf"(\d+) records from '.*' in {len(paths)} shards under '.*'", lines[-1])
    records = [r for path in paths for r in qp.io.tf_record_iterator(path)]
    assert len(records) == int(lines[-1].split()[0])
    return paths, records


def test_convert_idx_round_trip(capsys, tmp_path):
    images, labels, images_path, _ = mnist_like(tmp_path, n=10)
    paths, records = converted(capsys, images_path, tmp_path / "out", "--shards", 3)
    assert len(paths) == 3
    assert all(os.path.dirname(p) == str(tmp_path / "out") for p in paths)
    parsed = qp.parse_example(records, IMAGE_SPEC)
    got = Counter(zip(parsed["image"].tolist(), parsed["label"].tolist()))
    assert got == Counter(zip([image.tobytes() for image in images], labels.tolist()))
    for path in paths:  # each shard got its index
        assert run(capsys, "verify", path)[0] == 0
        with open(path + ".index") as f:
            assert f.read().splitlines() == [f"{o} {n + FRAME_BYTES}" for o, n in offsets_of(path)]


def test_convert_idx_with_explicit_labels_and_prefix(capsys, tmp_path):
    images, labels, images_path, _ = mnist_like(tmp_path, n=4, compress=False)
    other = write_idx(tmp_path / "my-labels.bin", (labels + 1).astype(np.uint8))
    paths, records = converted(capsys, "--format", "idx", "--labels", other, "--prefix", "mnist",
                               images_path, tmp_path / "out", "--shards", 1)
    assert [os.path.basename(p).startswith("mnist") for p in paths] == [True]
    parsed = qp.parse_example(records, {"label": qp.io.FixedLenFeature([], qp.int64)})
    assert Counter(parsed["label"].tolist()) == Counter((labels + 1).tolist())


def test_convert_csv_and_npz(capsys, tmp_path):
    csv_path = tmp_path / "table.csv"
    csv_path.write_text("id,score,name\n" + "".join(f"{i},{i / 4},n{i}\n" for i in range(9)))
    _, records = converted(capsys, csv_path, tmp_path / "csv", "--shards", 2)
    parsed = qp.parse_example(records, {"id": qp.io.FixedLenFeature([], qp.int64),
                                        "score": qp.io.FixedLenFeature([], qp.float32),
                                        "name": qp.io.FixedLenFeature([], qp.string)})
    assert Counter(zip(parsed["id"].tolist(), parsed["score"].tolist(),
                       parsed["name"].tolist())) == \
        Counter((i, i / 4, f"n{i}".encode()) for i in range(9))

    npz_path = str(tmp_path / "arrays.npz")
    x = np.arange(30, dtype=np.float32).reshape(5, 3, 2)
    np.savez(npz_path, x=x, y=np.arange(5))
    _, records = converted(capsys, npz_path, tmp_path / "npz", "--shards", 2)
    parsed = qp.parse_example(records, {"x": qp.io.FixedLenFeature([3, 2], qp.float32),
                                        "y": qp.io.FixedLenFeature([], qp.int64)})
    assert Counter((int(y), v.tobytes()) for y, v in zip(parsed["y"], parsed["x"])) == \
        Counter((i, x[i].tobytes()) for i in range(5))


def test_convert_stops_at_an_empty_number_cell_unless_told_what_it_becomes(capsys, tmp_path):
    csv_path = tmp_path / "table.csv"
    csv_path.write_text("id,score\n" + "".join(f"{i},{i / 4}\n" for i in range(600)) + "600,\n")
    status, out, err = run(capsys, "convert", csv_path, tmp_path / "out", "--shards", 2)
    assert status == 1 and out == ""
    assert re.fullmatch(r"queuepipe convert: error: '.*table\.csv' line 602, column 'score' "
                        r"\(float\): the cell is empty; .*\n", err)
    assert not (tmp_path / "out").exists()  # nothing half-written
    _, records = converted(capsys, csv_path, tmp_path / "out", "--shards", 2, "--empty", "default")
    scores = qp.parse_example(records, {"score": qp.io.FixedLenFeature([], qp.float32)})["score"]
    assert sorted(scores.tolist()) == sorted([i / 4 for i in range(600)] + [0.0])


def test_convert_compressed_shards(capsys, tmp_path):
    npz_path = str(tmp_path / "arrays.npz")
    np.savez(npz_path, y=np.arange(6))
    status, out, _ = run(capsys, "convert", npz_path, tmp_path / "out", "--shards", 2,
                         "--compression", "gzip")
    assert status == 0
    paths = out.splitlines()[:-1]
    assert all(not os.path.exists(p + ".index") for p in paths)
    records = [r for p in paths for r in qp.io.tf_record_iterator(p, "GZIP")]
    parsed = qp.parse_example(records, {"y": qp.io.FixedLenFeature([], qp.int64)})
    assert Counter(parsed["y"].tolist()) == Counter(range(6))


def test_convert_errors(capsys, tmp_path):
    status, _, err = run(capsys, "convert", tmp_path / "nope.csv", tmp_path / "out", "--shards", 1)
    assert (status, err) == (2, f"queuepipe convert: error: file not found: "
                                f"'{tmp_path / 'nope.csv'}'\n")
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1\n")
    status, _, err = run(capsys, "convert", bad, tmp_path / "out", "--shards", 1)
    assert status == 1
    assert re.fullmatch(r"queuepipe convert: error: '.*bad\.csv' line 2: 1 fields, but the "
                        r"header names 2 columns\n", err)
    status, _, err = run(capsys, "convert", bad, tmp_path / "out", "--shards", 0)
    assert status == 2
    assert err.splitlines()[-1] == ("queuepipe convert: error: argument --shards: must be a "
                                    "positive integer, got '0'")
    assert run(capsys, "convert", bad, tmp_path / "out")[0] == 2  # --shards is required


# -- bench and demo ------------------------------------------------------------------------


def test_bench_builtin_measures_throughput(capsys):
    status, out, err = run(capsys, "bench", "--builtin", "--records", 300, "--batch-size", 64)
    assert status == 0, err
    lines = out.splitlines()
    assert re.fullmatch(r"write_shards: +[\d,]+ records/s \(300 records, [\d.]+ s\)", lines[0])
    assert re.fullmatch(r"read_batch_features: +[\d,]+ records/s \(5 epochs, batches of 64, "
                        r"[\d.]+ s\)", lines[1])
    assert re.fullmatch(r"queue statistics over [\d.]+ s \(\d+ samples\)", lines[2])
    assert lines[3].split()[:2] == ["queue", "size/cap"]
    assert lines[-1].startswith("no verdict: 1500 records in ")  # 300 records, 5 epochs


def fake_checkout_file(monkeypatch, tmp_path, source):
    """Makes cli find ``source`` as the checkout's script; returns the file of its argv."""
    script = tmp_path / "script.py"
    argv_file = tmp_path / "argv.txt"
    script.write_text(source.format(argv_file=str(argv_file)))
    monkeypatch.setattr(cli, "_checkout_file", lambda *parts: str(script))
    return argv_file


SCRIPT = """
def main(argv):
    with open({argv_file!r}, "w") as f:
        f.write(repr(argv))
    return 3
"""


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_demo_and_bench_run_the_checkouts_main(capsys, monkeypatch, tmp_path, command):
    argv_file = fake_checkout_file(monkeypatch, tmp_path, SCRIPT)
    assert run(capsys, command, "--", "--quick", "-x")[0] == 3
    assert argv_file.read_text() == "['--quick', '-x']"


@pytest.mark.parametrize("body, status", [
    ("import sys\ndef main(argv):\n    sys.exit(4)\n", 4),
    ("def main(argv):\n    return dict(accuracy=0.9)\n", 0),  # results, not a status
    ("import helper\ndef main(argv):\n    return helper.STATUS\n", 5),  # imports beside it
])
def test_a_scripts_main_gives_the_status(capsys, monkeypatch, tmp_path, body, status):
    (tmp_path / "helper.py").write_text("STATUS = 5\n")
    fake_checkout_file(monkeypatch, tmp_path, body)
    assert run(capsys, "demo")[0] == status
    assert str(tmp_path) not in sys.path


def test_demo_and_bench_without_a_checkout(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_checkout_file", lambda *parts: None)
    status, _, err = run(capsys, "demo")
    assert status == 2
    assert re.fullmatch(r"queuepipe demo: error: the demo lives in queuepipe's source checkout "
                        r"\(examples/demo\.py\), which this installation does not have\n", err)
    status, _, err = run(capsys, "bench", "--", "--suite-flag")
    assert status == 2
    assert re.fullmatch(r"queuepipe bench: error: arguments \['--suite-flag'\] are for the "
                        r"benchmark suite, .*\n", err)


def test_checkout_files_are_found_beside_the_package():
    assert cli._checkout_file("queuepipe", "cli.py") == os.path.abspath(cli.__file__)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cli.__file__)))
    for parts in (("benchmarks", "bench.py"), ("examples", "demo.py")):
        expected = os.path.join(root, *parts)
        assert cli._checkout_file(*parts) == (expected if os.path.exists(expected) else None)
    assert cli._checkout_file("no", "such.file") is None


def test_demo_runs_the_real_demo(capsys, tmp_path):
    if cli._checkout_file("examples", "demo.py") is None:
        pytest.skip("examples/demo.py is not in this checkout")
    pytest.importorskip("sklearn")  # the demo's default data: queuepipe[demo]
    status, out, err = run(capsys, "demo", "--", "--limit", 300, "--epochs", 1, "--no-progress",
                           "--processes", 1, "--workdir", tmp_path)
    assert status == 0, err
    assert re.search(r"^held-out accuracy: [\d.]+ ", out, re.M), out


def test_bench_measures_your_own_files_with_a_schema_or_inferred_features(capsys, tmp_path):
    records = examples(50)
    paths = [write_records(tmp_path / f"part-{i}.tfrecord", records[i::2]) for i in range(2)]
    status, out, err = run(capsys, "bench", str(tmp_path / "part-*.tfrecord"),
                           "--batch-size", 16)
    assert status == 0, err
    assert re.search(r"^read_batch_features: +[\d,]+ records/s, [\d.,]+ MB/s \(50 records in "
                     r"2 file\(s\), batches of 16", out, re.M)
    assert "inferred from 25 records of" in out
    schema = tmp_path / "schema.py"
    schema.write_text(run(capsys, "schema", paths[0])[1])
    status, out, _ = run(capsys, "bench", *paths, "--features", schema)
    assert status == 0 and f"({schema!r})" not in out and f"'{schema}'" in out
    assert re.search(r"\(50 records in 2 file\(s\)", out)
    status, _, err = run(capsys, "bench", "--features", schema)
    assert status == 2 and "--features goes with your own files" in err


def test_bench_on_a_damaged_file_prints_its_one_line_error_and_no_traceback(tmp_path):
    path = write_records(tmp_path / "damaged.tfrecord", examples(2000))
    offset, length = offsets_of(path)[1000]
    corrupt_byte(path, offset + FRAME_BYTES - 4 + length // 2)
    result = subprocess.run([sys.executable, "-m", "queuepipe", "bench", path],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert re.fullmatch(r"queuepipe bench: error: corrupted record at \d+: data checksum "
                        r"mismatch .* in file '.*damaged\.tfrecord'\n", result.stderr)

class _Verdict:
    def __init__(self, input_bound, reason="not input-bound: the monitor's reason"):
        self.input_bound, self.reason = input_bound, reason


@pytest.mark.parametrize("records, seconds", [(300, 5.0), (50_000, 0.2)])
def test_bench_gives_no_verdict_from_too_little_data(records, seconds):
    """30.5: it judged from 0.0 s of data."""
    said = cli._bench_verdict(_Verdict(True), records, seconds, seconds, 2, 8)
    assert said.startswith(f"no verdict: {records} records in {seconds:.2f} s are too few")
    assert "thread" not in said


@pytest.mark.parametrize("cpu_seconds, cpus, advice", [
    (4.0, 2, "more threads would not help (no CPU is idle)"),  # the CPUs are saturated
    (0.6, 8, "more threads would not help: these are not CPU-bound"),  # waiting, not working
    (4.0, 8, "idle CPUs remain: more enqueue threads (num_enqueue_threads) may help"),
])
def test_bench_advises_threads_only_where_they_can_help(cpu_seconds, cpus, advice):
    """30.5: it said "add threads" whatever the CPUs did."""
    said = cli._bench_verdict(_Verdict(True), 100_000, 2.0, cpu_seconds, 2, cpus)
    assert said.startswith("input-bound, as bench always is (it has no training step")
    assert advice in said, said
    assert "add reader/batching threads" not in said


def test_bench_passes_on_the_monitors_verdict_when_not_input_bound():
    assert cli._bench_verdict(_Verdict(False), 100_000, 2.0, 1.0, 2, 2) == \
        "not input-bound: the monitor's reason"
