"""The benchmark scripts still run: bench.py's children and instructions.py's pipelines on a
small workload, every record delivered once. (Their figures are measured by running them,
never asserted here.)"""

import importlib.util
import os
import re
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "benchmarks")


def load(name):
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}",
                                                  os.path.join(BENCHMARKS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    bench = load("bench")
    data = str(tmp_path_factory.mktemp("bench-data"))
    bench.write_workloads(data, records=600, shards=2)
    return bench, data


@pytest.mark.parametrize("kind", ["mnist", "tokens", "wide", "large"])
@pytest.mark.parametrize("name, threads", [("qp_per_record", 2), ("qp_bulk", 1),
                                           ("compat_per_record", 2)])
def test_a_bench_child_delivers_every_record_of_every_epoch_once(workload, name, threads, kind):
    bench, data = workload
    result = bench.launch(bench.child_argv(name, data, 2, threads, kind))
    expected = bench.truth(data, 2, kind)
    assert {key: result[key] for key in expected} == expected  # tokens: the token-id sum too
    assert 0 < result["first_batch"] <= result["seconds"] and result["peak_rss_kib"] > 0
    # the steady CPU counts from the first batch: less than the whole life's per record
    assert 0 < result["steady_cpu_us"] < result["cpu_us"]


def test_the_large_workload_holds_100_kib_records(workload):
    bench, data = workload
    import queuepipe as qp

    records = [record for name in sorted(os.listdir(os.path.join(data, "large")))
               for record in qp.io.tf_record_iterator(os.path.join(data, "large", name))]
    assert len(records) == 600 == bench.truth(data, 1, "large")["examples"]
    parsed = qp.io.parse_example(records, bench._specs(qp, "large"))
    assert {len(payload) for payload in parsed["payload"]} == {bench.LARGE_BYTES}
    assert int(parsed["label"].sum()) == bench.truth(data, 1, "large")["label_sum"]


@pytest.mark.parametrize("path", ["pure", "core"])
def test_a_child_runs_the_path_it_is_given_and_says_which(workload, path):
    from queuepipe.parsing import _walkers

    bench, data = workload
    if path == "core" and not _walkers.core_available():
        pytest.skip("the compiled core is not built here")
    env = dict(os.environ, QUEUEPIPE_PURE="0" if path == "pure" else "1")  # the argv decides
    result = bench.launch(bench.child_argv("qp_bulk", data, 1, 1, "mnist", path=path), env=env)
    assert result["core"] == (path == "core")


def test_the_floor_peer_reads_every_large_record(workload):
    """bench_peers.py's floor needs only NumPy and crc32c: it runs here, under our python."""
    bench, data = workload
    pytest.importorskip("crc32c")
    result = bench.launch(bench.peer_argv(sys.executable, "floor", data, 2, "large"))
    assert result["examples"] == 1200 and result["steady_cpu_us"] > 0


def rows_of(**medians):
    """bench.run_rows' shape, one run per row: label -> {median, runs}."""
    rows = {}
    for label, m in medians.items():
        m = dict({"examples": 600, "label_sum": 2676, "seconds": 1.0, "first_batch": 0.2,
                  "peak_rss_kib": 50000, "steady_cpu_us": 1.0}, **m)
        rows[label] = {"median": m, "runs": [m]}
    return rows


EXPECTED = {"examples": 600, "label_sum": 2676}


def checks(rows, workload, path="core", baseline=None):
    bench = load("bench")
    return {(row, target): (measured, ok) for row, target, measured, ok
            in bench.targets(rows, EXPECTED, workload, path, baseline)}


def test_the_mnist_targets_are_issue_27s():
    rows = rows_of(qp_bulk={"steady": 600e3, "steady_cpu_us": 1.4},
                   qp_per_record={"steady": 150e3, "first_batch": 0.31},
                   tfdata={"steady": 100e3, "seconds": 3.0, "peak_rss_kib": 500000},
                   tf1queue={"steady": 30e3})
    got = checks(rows, "mnist")
    assert got[("qp_bulk", "steady rate >= 4x tfdata's")] == ("6.00x", True)
    assert got[("qp_per_record", "steady rate >= 6x tf1queue's")] == ("5.00x", False)
    assert got[("qp_bulk", "steady CPU <= 1.5 us per record")] == ("1.40 us", True)
    assert got[("qp_bulk", "first batch <= 0.3 s from launch")] == ("0.200 s", True)
    assert got[("qp_per_record", "first batch <= 0.3 s from launch")] == ("0.310 s", False)
    assert got[("qp_bulk", "whole run <= 0.5x tfdata's")] == ("0.33x", True)
    assert got[("qp_bulk", "every record once in every run")][1]
    assert not any("2x" in target or "4x tf1queue" in target for _, target in got)


@pytest.mark.parametrize("workload, row, peer, times, passed", [
    ("tokens", "qp_bulk", "tfdata", "3x", False), ("tokens", "qp_per_record", "tf1queue", "4x",
                                                   True),
    ("wide", "qp_bulk", "tfdata", "1x", True), ("large", "qp_bulk", "floor", "0.7x", True)])
def test_each_workload_has_its_ratio_target(workload, row, peer, times, passed):
    rows = rows_of(qp_bulk={"steady": 250e3}, qp_per_record={"steady": 50e3},
                   tfdata={"steady": 100e3}, tf1queue={"steady": 10e3}, floor={"steady": 200e3})
    got = checks(rows, workload)
    assert got[(row, f"steady rate >= {times} {peer}'s")][1] is passed
    assert ("qp_bulk", "steady CPU <= 1.5 us per record") not in got  # mnist's alone


def test_the_pure_path_is_held_to_the_baseline_not_to_the_ratios():
    baseline = {"tolerance": 1.1, "commit": "0123456789abcdef", "records": {"float": 600},
                "steady_cpu_us": {"float": {"pure": {"qp_bulk": 2.0, "qp_per_record": 4.0}}}}
    rows = rows_of(qp_bulk={"steady": 250e3, "steady_cpu_us": 2.1},
                   qp_per_record={"steady": 50e3, "steady_cpu_us": 4.8},
                   tfdata={"steady": 10e3}, tf1queue={"steady": 1e3})
    # the least of the runs counts: a busy moment slows one run, never speeds one up
    rows["qp_bulk"]["runs"].append(dict(rows["qp_bulk"]["median"], steady_cpu_us=3.0))
    got = checks(rows, "float", "pure", baseline)
    assert got[("qp_bulk", "least steady CPU <= 1.1x the baseline's (2.00 us, 01234567)")] == \
        ("1.05x (2.10 us)", True)
    assert got[("qp_per_record", "least steady CPU <= 1.1x the baseline's (4.00 us, "
                "01234567)")] == ("1.20x (4.80 us)", False)
    assert not any("rate" in target or "first batch" in target for _, target in got)
    assert not any("baseline" in target for _, target in checks(rows, "float", "core", baseline))
    # a run of other epochs is not held to it: its steady part holds another share of reading
    baseline["records"]["float"] = 1800
    assert checks(rows, "float", "pure", baseline)[
        ("qp_bulk", "least steady CPU <= 1.1x the baseline's (2.00 us, 01234567)")] == \
        ("not compared: 600 records, the baseline's 1,800", False)


def test_a_lost_record_fails_its_target_in_any_run():
    rows = rows_of(qp_bulk={"steady": 1.0})
    rows["qp_bulk"]["runs"].append(dict(rows["qp_bulk"]["median"], examples=599))
    assert checks(rows, "wide")[("qp_bulk", "every record once in every run")] == \
        ("count and label sum DIFFER", False)


def test_the_matrix_runs_both_paths_into_one_table(workload, capsys):
    from queuepipe.parsing import _walkers

    _, data = workload
    paths = ["pure", "core"] if _walkers.core_available() else ["pure"]
    md = os.path.join(data, "matrix.md")
    assert load("matrix").main(["--data", data, "--workload", "large", "--paths", *paths,
                                "--epochs", "1", "--repeat", "1", "--out-md", md]) == 0
    with open(md, encoding="utf-8") as f:
        table = f.read()
    assert table in capsys.readouterr().out
    assert table.startswith("| workload | pipeline | path | steady rate | ratio | steady CPU "
                            "/ record | first batch | records | targets |\n")
    for path in paths:
        for name in ("qp_per_record", "qp_bulk", "compat_per_record"):
            assert re.search(rf"^\| large \| {name} \| {path} \| [\d.,]+k/s \| - \| [\d.]+ us "
                             r"\| [\d.]+ s \| exact \| ", table, re.M), table


def test_the_ab_benchmark_runs_each_tree_in_turn(workload, capsys, monkeypatch):
    # this checkout against itself: a row per path and pipeline, each tree's median of its own
    # runs (a figure of the same code twice, so about 1); --data relative to the caller's
    # folder, though each child runs in its tree's
    _, data = workload
    here = os.path.dirname(BENCHMARKS)
    monkeypatch.chdir(os.path.dirname(data))
    data = os.path.basename(data)
    assert load("ab").main([here, "--data", data, "--workload", "large", "--pipeline",
                            "qp_bulk", "--paths", "pure", "--epochs", "1", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| pure \| large \| qp_bulk \| 1 \| [\d.]+k/s, [\d.]+ us \| "
                     r"[\d.]+k/s, [\d.]+ us \| [\d.]+ \|$", out, re.M), out
    assert "against" not in out  # one thread count: no scaling table


def test_the_ab_benchmark_sets_each_trees_threads_against_each_other(workload, capsys):
    # (the pure path: CI's clone without a compiler runs this too)
    _, data = workload
    here = os.path.dirname(BENCHMARKS)
    assert load("ab").main([here, "--data", data, "--workload", "tokens", "--pipeline",
                            "qp_bulk", "--paths", "pure", "--epochs", "1", "--repeat", "1",
                            "--threads", "1", "2"]) == 0
    out = capsys.readouterr().out
    for threads in (1, 2):
        assert re.search(rf"^\| pure \| tokens \| qp_bulk \| {threads} \| [\d.]+k/s", out,
                         re.M), out
    assert re.search(r"^\| pure \| tokens \| qp_bulk \| 2 against 1 \| [\d.]+x \| [\d.]+x \|$",
                     out, re.M), out


def test_the_ab_benchmark_runs_the_other_trees_queuepipe(tmp_path, monkeypatch):
    # run from this checkout (as its usage line says), a child for another tree imports that
    # tree's queuepipe, not this one's (a `python -c` child puts its working directory first)
    ab = load("ab")
    other = tmp_path / "other"
    (other / "queuepipe").mkdir(parents=True)
    (other / "queuepipe" / "__init__.py").write_text("")
    monkeypatch.chdir(os.path.dirname(BENCHMARKS))
    assert ab.imported_from(str(other)) == os.path.realpath(other / "queuepipe")
    with pytest.raises(SystemExit, match="imports queuepipe from nowhere"):
        ab.main([str(tmp_path / "no-checkout"), "--repeat", "1"])


@pytest.mark.parametrize("pipeline, amount, records", [
    ("per_record", 1000, 1000), ("bulk", 1000, 1000),
    ("features", 1, 600), ("features_seeded", 2, 1200)])  # these two: epochs
def test_the_instruction_counts_pipelines_run(workload, monkeypatch, pipeline, amount, records):
    bench, data = workload
    monkeypatch.syspath_prepend(BENCHMARKS)
    assert load("instructions").run(pipeline, data, amount) == records


def _counted_child(monkeypatch, instructions):
    """Replaces the counted child by one that counts 1234 instructions over 10 records;
    returns the environment it is run with, once it is."""
    seen = {}

    def run(argv, env, **kwargs):
        seen.update(env)
        return type("Done", (), {"returncode": 0, "stdout": "records 10\n",
                                 "stderr": "Collected : 1234"})()

    monkeypatch.setattr(instructions.subprocess, "run", run)
    return seen


def test_the_counted_child_runs_with_one_blas_thread(monkeypatch):
    # a BLAS thread pool's start-up and spinning swing the counts by thousands a record
    instructions = load("instructions")
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    seen = _counted_child(monkeypatch, instructions)
    assert instructions.instructions("parse", "data", 10, 1, "mnist") == (1234, 10)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        assert seen[name] == "1"


def test_a_count_of_the_gil_held_imports_the_counting_copy_first(monkeypatch):
    # --gil-held: the counted child must import the package whose core stops callgrind's
    # count where it lets go of the GIL, before any other on the path
    instructions = load("instructions")
    monkeypatch.setenv("PYTHONPATH", "elsewhere")
    seen = _counted_child(monkeypatch, instructions)
    assert instructions.instructions("parse", "data", 10, 1, "mnist", path="copy") == (1234,
                                                                                         10)
    assert seen["PYTHONPATH"] == os.pathsep.join(["copy", "elsewhere"])


@pytest.mark.parametrize("kind", ["mnist", "float", "tokens", "wide", "large"])
def test_the_parse_pipeline_counts_every_workload(workload, monkeypatch, kind):
    bench, data = workload
    monkeypatch.syspath_prepend(BENCHMARKS)
    assert load("instructions").run("parse", data, 600, workload=kind) == 600


def test_a_pure_bench_child_runs_on_the_pure_path(workload):
    bench, data = workload
    env = dict(os.environ, QUEUEPIPE_PURE="1")
    result = bench.launch(bench.child_argv("qp_bulk", data, 1, 1, "wide"), env=env)
    assert {key: result[key] for key in bench.truth(data, 1, "wide")} == \
        bench.truth(data, 1, "wide")


def test_the_seed_benchmark_pairs_seeded_and_unseeded_runs(workload, capsys):
    _, data = workload
    assert load("bench_order").main(["--data", data, "--epochs", "1", "--repeat", "2",
                                     "--workload", "mnist", "--seed-only"]) == 0
    out = capsys.readouterr().out
    for threads in (1, 2):
        assert re.search(rf"^\| mnist \| {threads} \| [\d,]+k/s \| [\d,]+k/s \| [\d.]+x \| "
                         rf"[\d.]+ us / [\d.]+ us \|$", out, re.M), out
    assert re.search(r"^seeded >= 0.90x unseeded on mnist \(qp_bulk\): [\d.]+x (PASS|FAIL)$",
                     out, re.M), out
    assert "shuffle_batch" not in out and "buffer" not in out  # the other tables


def test_the_image_benchmark_decodes_every_record(capsys):
    pytest.importorskip("PIL")
    assert load("bench_images").main(["--records", "300", "--repeat", "1"]) == 0
    assert re.search(r"^qp_bulk +steady +[\d,]+ records/s .* every record: True$",
                     capsys.readouterr().out, re.M)


def test_the_augment_benchmark_decodes_resizes_and_flips_every_record(capsys):
    pytest.importorskip("PIL")
    assert load("bench_images").main(["--records", "40", "--repeat", "1", "--augment"]) == 0
    out = capsys.readouterr().out
    assert "40 JPEG records of 375x500x3" in out and "resized to 224x224 and flipped" in out
    assert re.search(r"^qp_bulk +steady .* every record: True$", out, re.M)


@pytest.mark.parametrize("kind", ["mnist", "tokens", "wide", "large"])
def test_the_stage_benchmark_times_every_stage(workload, capsys, kind):
    _, data = workload
    assert load("bench_stages").main(["--data", data, "--workload", kind, "--repeat", "1"]) == 0
    assert re.search(rf"^{kind}: 600 records, CPU per record \(least of 1\): read [\d.]+ us, "
                     r"parse [\d.]+ us, enqueue_many [\d.]+ us, dequeue_many [\d.]+ us; total",
                     capsys.readouterr().out, re.M)


def test_the_peers_side_lives_in_the_clone():
    """30.4: the benchmarks run from a clone alone; the peers' scripts are beside bench.py and
    the README says how to make their virtualenv by hand."""
    bench = load("bench")
    assert os.path.dirname(bench.PEERS_SCRIPT) == BENCHMARKS
    argv = bench.peer_argv("python", "tfdata", "DATA", 1, "mnist")
    assert argv[1] == os.path.join(BENCHMARKS, "bench_peers.py") and os.path.isfile(argv[1])
    assert os.path.isfile(os.path.join(BENCHMARKS, "make_data.py"))
    with open(os.path.join(BENCHMARKS, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert "python3 -m venv ~/.venvs/queuepipe-peers" in readme
    assert "benchmarks/make_data.py" in readme and "--peers-python" in readme


def test_the_stage_benchmark_measures_the_whole_pipeline(workload, capsys):
    _, data = workload
    from queuepipe import _core
    from queuepipe.parsing import _walkers

    from queuepipe import features, plan
    from queuepipe._queue_base import QueueBase
    from queuepipe.runner import QueueRunner

    core = _core.core
    steps = [plan.ReadPlan.take, features._Planned.parse, features._Planned._element,
             QueueBase.enqueue_many, QueueBase.dequeue_many, QueueBase.dequeue_up_to,
             QueueRunner._run, plan.ReadPlan.__init__]
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--pipeline",
                                      "--threads", "1", "2", "--repeat", "2",
                                      "--read-batch-size", "256"]) == 0
    assert _core.core is core  # the timing wrappers are taken off again
    assert sys.modules["bench"].BULK_CHUNK is None  # (and bench.py's chunk put back)
    assert [plan.ReadPlan.take, features._Planned.parse, features._Planned._element,
            QueueBase.enqueue_many, QueueBase.dequeue_many, QueueBase.dequeue_up_to,
            QueueRunner._run, plan.ReadPlan.__init__] == steps
    out = capsys.readouterr().out
    on = _walkers.core_available()
    share = r", \d+% of it in the core's walk_examples" if on else ""
    walk = r" \(the walk [\d.]+ us\)" if on else ""
    for threads in (1, 2):
        assert re.search(rf"^tokens: read_batch_features, {threads} enqueue thread\(s\), 1200 "
                         r"records: \d+k records/s \(best of 2; all: \d+k/\d+k\), [\d.]+ us "
                         rf"of CPU per record{share}; thread CPU per record of the fastest "
                         r"round: chunk read [\d.]+ us, parse [\d.]+ us, enqueue_many [\d.]+ "
                         rf"us, consumer's dequeue [\d.]+ us{walk}; the consumer's thread in "
                         r"all [\d.]+ us; each enqueue thread busy \(its CPU\) \d+% of the wall "
                         r"time; the plan's lock held \d+ us a chunk \(median\), \d+% of the "
                         r"wall time, waited for \d+ ms in all; the enqueue threads waited for "
                         r"room in the queue \d+ ms in all, the consumer for a batch \d+% of "
                         r"the wall time; the kernel's share of the CPU \d+%, [\d.]+ voluntary "
                         r"and [\d.]+ forced context switches every 1,000 records$", out,
                         re.M), out
    assert not re.search(r"chunk read 0\.00 us, parse 0\.00", out), out  # (steps timed)
    assert not re.search(r"busy \(its CPU\) 0% ", out), out  # (the runners' threads timed)
    assert not re.search(r"lock held 0 us", out), out  # (the plan's lock timed)


def test_the_stage_benchmark_runs_pipelines_apart(workload, capsys):
    # each pipeline reads every record twice (2 epochs of the 600 records): two of them, 2,400
    _, data = workload
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--pipeline",
                                      "--apart", "--threads", "1", "2", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    for n, records in ((1, 1200), (2, 2400)):
        assert re.search(rf"^tokens: {n} separate read_batch_features pipeline\(s\) of 1 "
                         rf"enqueue thread, {records} records: \d+k records/s \(best of 2; "
                         r"all: \d+k/\d+k\), [\d.]+ us of CPU per record$", out, re.M), out


def test_the_stage_benchmark_runs_pipelines_in_processes(workload, capsys):
    # as apart, each pipeline in a child process: two of them read 2,400 records
    _, data = workload
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--pipeline",
                                      "--processes", "--threads", "1", "2", "--repeat",
                                      "2"]) == 0
    out = capsys.readouterr().out
    for n, records in ((1, 1200), (2, 2400)):
        assert re.search(rf"^tokens: {n} read_batch_features pipeline\(s\) of 1 enqueue "
                         rf"thread, each in its own process, {records} records: \d+k "
                         r"records/s \(best of 2; all: \d+k/\d+k\), [\d.]+ us of CPU per "
                         r"record$", out, re.M), out


def test_the_stage_benchmark_runs_the_read_and_the_parse_alone(workload, capsys):
    # as many epochs of the 600 records as threads, from one plan or a plan each: two
    # threads read 1,200 records
    _, data = workload
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--bare",
                                      "--threads", "1", "2", "--repeat", "2"]) == 0
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--bare",
                                      "--apart", "--threads", "1", "2", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    for apart in ("", ", a plan each"):
        for n, records in ((1, 600), (2, 1200)):
            assert re.search(rf"^tokens: the read and the parse alone \(no queue\), {n} "
                             rf"thread\(s\){apart}, {records} records: \d+k records/s \(best "
                             r"of 2; all: \d+k/\d+k\), [\d.]+ us of CPU per record$", out,
                             re.M), out


def test_the_stage_benchmark_runs_the_read_alone(workload, capsys, monkeypatch):
    # every record read, none parsed
    _, data = workload
    import queuepipe as qp

    monkeypatch.setattr(qp.io, "parse_example", lambda *args: pytest.fail("a record parsed"))
    assert load("bench_stages").main(["--data", data, "--workload", "mnist", "--bare",
                                      "--read-only", "--threads", "1", "2", "--repeat",
                                      "1"]) == 0
    out = capsys.readouterr().out
    for n, records in ((1, 600), (2, 1200)):
        assert re.search(rf"^mnist: the read alone \(no parse, no queue\), {n} thread\(s\), "
                         rf"{records} records: \d+k records/s \(best of 1; all: \d+k\), "
                         r"[\d.]+ us of CPU per record$", out, re.M), out


@pytest.mark.parametrize("flags", [["--read-only"], ["--bare", "--read-only", "--shuffled"]])
def test_the_stage_benchmark_reads_alone_only_in_the_bare_mode_that_parses_nothing(flags):
    with pytest.raises(SystemExit) as raised:
        load("bench_stages").main(flags)
    assert raised.value.code == 2


def test_the_stage_benchmark_trades_chunks_through_a_shared_pool(workload, capsys):
    # 600 records an epoch, 2 epochs a thread: one thread fills the pool of 256 with its
    # first chunk's records and parses the rest, as whole batches of 128 drawn from it
    _, data = workload
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--bare",
                                      "--shuffled", "--buffer", "256", "--epochs", "2",
                                      "--threads", "1", "2", "--repeat", "2",
                                      "--read-batch-size", "256"]) == 0
    out = capsys.readouterr().out
    for n in (1, 2):
        found = re.search(rf"^tokens: the read and the parse alone \(no queue\), each chunk "
                          rf"traded for records of a shared pool, {n} thread\(s\), (\d+) "
                          r"records: \d+k records/s \(best of 2; all: \d+k/\d+k\), [\d.]+ us "
                          r"of CPU per record$", out, re.M)
        assert found, out
        parsed = int(found.group(1))
        assert parsed % 128 == 0 and 0 < parsed <= 2 * n * 600 - 256, out


def test_the_sequence_benchmark_times_each_path(capsys):
    from queuepipe.parsing import _walkers

    assert load("bench_sequence").main(["--records", "20", "--repeat", "1"]) == 0
    paths = re.findall(r"^(pure|core): [\d.]+ us of CPU per SequenceExample",
                       capsys.readouterr().out, re.M)
    assert paths == (["pure", "core"] if _walkers.core_available() else ["pure"])


def test_a_folder_written_before_the_large_workload_gets_it(tmp_path):
    bench = load("bench")
    data = str(tmp_path / "data")
    bench.write_workloads(data, records=40, shards=2)
    large = tmp_path / "data" / "large"
    written = {path.name: path.read_bytes() for path in large.iterdir()}
    for path in large.iterdir():
        path.unlink()
    large.rmdir()
    said = []
    assert bench.prepare(data, 40, 2, ["mnist", "large"], said.append) == data
    assert said == [f"writing 40 records of large/ under {data}"]
    # the same records, from the same seed
    assert {path.name: path.read_bytes() for path in large.iterdir()} == written
    os.rename(os.path.join(data, "float"), os.path.join(data, "float-gone"))
    with pytest.raises(SystemExit, match=r"has no float/ workload: write the workloads again"):
        bench.prepare(data, 40, 2, ["float"], said.append)


def test_the_matrix_table_shows_each_rows_ratio_targets_and_a_wrong_run():
    bench, matrix = load("bench"), load("matrix")
    rows = rows_of(qp_bulk={"steady": 300e3, "steady_cpu_us": 1.6, "core": 1},
                   tfdata={"steady": 100e3}, floor={"steady": 200e3, "label_sum": 0})
    rows["qp_bulk"]["runs"] = [rows["qp_bulk"]["median"],
                               dict(rows["qp_bulk"]["median"], label_sum=2675)]
    keyed = {("qp_bulk", "core"): rows["qp_bulk"], ("tfdata", "-"): rows["tfdata"],
             ("floor", "-"): rows["floor"]}
    targets = {"core": bench.targets(matrix.on_path(keyed, "core"), EXPECTED, "mnist")}
    table = matrix.markdown({"workloads": {"mnist": {"rows": keyed, "expected": EXPECTED,
                                                     "targets": targets}}})
    assert table.splitlines()[2:] == [
        "| mnist | qp_bulk | core | 300k/s | 3.00x tfdata | 1.60 us | 0.20 s | WRONG in a run "
        "| FAIL steady rate >= 4x tfdata's (3.00x); FAIL steady CPU <= 1.5 us per record "
        "(1.60 us); PASS first batch <= 0.3 s from launch (0.200 s); FAIL whole run <= 0.5x "
        "tfdata's (1.00x); FAIL peak memory <= 0.25x tfdata's (1.00x) |",
        "| mnist | tfdata | - | 100k/s | - | 1.00 us | 0.20 s | exact | - |",
        "| mnist | floor | - | 200k/s | - | 1.00 us | 0.20 s | floor reads only | - |"]


def test_the_gil_benchmark_sets_two_threads_against_one_for_each_share(capsys):
    assert load("bench_gil").main(["--shares", "0.25", "0.75", "--step-us", "50", "--steps",
                                   "20", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\| 25% \| 1\.33x \| \d+\.\d\dx \|$", out, re.M)
    assert re.search(r"^\| 75% \| 2\.00x \| \d+\.\d\dx \|$", out, re.M)


def test_the_gil_trace_adds_up_each_threads_stretches_from_the_pipelines_start():
    trace = load("gil_trace")
    events = [(10, 0.0, "take_gil"), (10, 0.1, "take_gil_ret__return"), (10, 0.5, "drop_gil"),
              (11, 1.0, "take_gil"), (10, 1.05, "take_gil"), (11, 1.1, "take_gil_ret__return"),
              (11, 1.4, "drop_gil"), (10, 1.45, "take_gil_ret__return"), (10, 1.5, "drop_gil"),
              (11, 1.6, "take_gil"), (11, 1.6, "take_gil_ret__return"), (11, 1.7, "drop_gil")]
    script = "\n".join(f" {tid}  {t:.6f}:   probe_libpython3:{kind}: " for tid, t, kind in events)
    spans = trace.stretches(script)
    rounded = {tid: {k: [round(x, 6) for x in v] for k, v in s.items()}
               for tid, s in spans.items()}
    # (the main thread's first stretch, before the pipeline's thread began, is not counted)
    assert rounded == {10: {"hold": [0.05], "wait": [0.4], "free": []},
                       11: {"hold": [0.3, 0.1], "wait": [0.1, 0.0], "free": [0.2]}}
    text = trace.report(spans, records=1000, cpu=1.0, main=10, label="tokens")
    assert text.splitlines()[0] == ("tokens: 1000 records, GIL held 450.00 us a record of "
                                    "1000.00 us of CPU (0.45 of it)")
    assert "thread 11: held 400.00 us a record, waited for it 100.00 us, without it 200.00 us;"\
        " 2 drops (2.0 every 1,000 records), the median held stretch 200000 us" in text


def test_the_gil_trace_counts_the_drops_by_where_they_are_made():
    trace = load("gil_trace")

    def drop(*frames):
        lines = ["python 17 [000] 1.000001: probe_libpython3:drop_gil: (7f00)",
                 "\t  24f3e0 drop_gil+0x0 (/lib/libpython3.11.so.1.0)",
                 "\t  24fd29 PyEval_SaveThread+0x39 (/lib/libpython3.11.so.1.0)"]
        return "\n".join(lines + [f"\t  1234 {frame}+0x10 (/lib/x.so)" for frame in frames])

    script = "\n\n".join([
        drop("qp_gil_let_go", "walk_spans", "walk_examples", "cfunction_call", "main"),
        drop("walk_spans", "walk_examples", "cfunction_call"),
        drop("default_calloc", "PyDataMem_UserNEW_ZEROED"),
        drop("posix_do_stat", "os_stat", "PyImport_ImportModuleLevelObject"),  # an import
    ]) + "\n\n"
    sites = trace.drop_sites(script)
    assert sites == {"walk_spans < walk_examples < cfunction_call": 2,
                     "default_calloc < PyDataMem_UserNEW_ZEROED": 1}
    assert trace.sites_report(sites, records=4096, label="tokens").splitlines() == [
        "tokens: 3 drops of the GIL, 1.5 every 2,048 records; by where:",
        "   1.00  walk_spans < walk_examples < cfunction_call",
        "   0.50  default_calloc < PyDataMem_UserNEW_ZEROED"]


def test_the_gil_trace_counts_the_hand_overs_and_what_they_leave_free():
    trace = load("gil_trace")
    # main 10 holds; 11 waits from 1.0; 10 drops at 1.2 (a hand-over: 11 takes at 1.25), takes
    # again at 1.3 and waits; 11 drops at 1.5 (10 takes at 1.6); 10 drops at 1.8, nobody waits
    # (no hand-over); 11's last event at 2.0 ends the window, 10's exit after it is left out
    events = [(10, 0.0, "take_gil"), (10, 0.0, "take_gil_ret__return"),
              (11, 1.0, "take_gil"), (10, 1.2, "drop_gil"), (11, 1.25, "take_gil_ret__return"),
              (10, 1.3, "take_gil"), (11, 1.5, "drop_gil"), (10, 1.6, "take_gil_ret__return"),
              (10, 1.8, "drop_gil"), (11, 1.9, "take_gil"), (11, 1.9, "take_gil_ret__return"),
              (11, 2.0, "drop_gil"), (10, 3.0, "take_gil"), (10, 3.0, "take_gil_ret__return")]
    script = "\n".join(f" {tid}  {t:.6f}:   probe_libpython3:{kind}: " for tid, t, kind in events)
    summary = trace.handovers(script)
    assert summary["handovers"] == 2 and round(summary["window"], 6) == 1.0
    assert round(summary["gap"], 6) == 0.075 and round(summary["gaps"], 6) == 0.15
    assert round(summary["held"], 6) == round((0.2 + 0.25 + 0.2 + 0.1) / 1.0, 6)
    assert trace.busy(summary) == ("  the GIL held 75% of the pipeline's 1000 ms; 2 hand-overs to "
                                   "a waiting thread, each leaving it free for 75000 us (median), "
                                   "15% of the time")


def test_the_host_benchmark_sets_two_workers_against_one_for_each_kind(capsys):
    # two processes (the file run as a worker) and two threads against one, and a hand-over
    assert load("bench_host").main(["--kinds", "compute", "cached", "--seconds", "0.02",
                                    "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for kind, kib in (("compute", 64), ("cached", 1536)):
        assert re.search(rf"^{kind} \({kib} KiB a unit\): one [\d,]+ units/s; two processes "
                         r"[\d,]+ \(\d+\.\d\dx\); two threads [\d,]+ \(\d+\.\d\dx\)$", out,
                         re.M), out
    assert "memory" not in out
    assert re.search(r"^hand-over: \d+\.\d us there and back \(median\)$", out, re.M), out


def test_a_host_benchmark_thread_that_fails_stops_the_others_and_raises(monkeypatch):
    # the second thread's buffers cannot be made: the first does not wait for it forever
    bench_host = load("bench_host")
    made = []
    work = bench_host._work

    def failing(kind):
        made.append(kind)
        if len(made) == 2:
            raise MemoryError("no buffers")
        return work(kind)

    monkeypatch.setattr(bench_host, "_work", failing)
    with pytest.raises(MemoryError, match="no buffers"):
        bench_host._threads("compute", 0.02, 2)
