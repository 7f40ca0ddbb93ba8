"""The benchmark scripts still run: bench.py's children and instructions.py's pipelines on a
small workload, every record delivered once. (Their figures are measured by running them,
never asserted here.)"""

import importlib.util
import os
import re

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


@pytest.mark.parametrize("kind", ["mnist", "tokens", "wide"])
@pytest.mark.parametrize("name, threads", [("qp_per_record", 2), ("qp_bulk", 1),
                                           ("compat_per_record", 2)])
def test_a_bench_child_delivers_every_record_of_every_epoch_once(workload, name, threads, kind):
    bench, data = workload
    result = bench.launch(bench.child_argv(name, data, 2, threads, kind))
    expected = bench.truth(data, 2, kind)
    assert {key: result[key] for key in expected} == expected  # tokens: the token-id sum too
    assert 0 < result["first_batch"] <= result["seconds"] and result["peak_rss_kib"] > 0


@pytest.mark.parametrize("pipeline, amount, records", [
    ("per_record", 1000, 1000), ("bulk", 1000, 1000),
    ("features", 1, 600), ("features_seeded", 2, 1200)])  # these two: epochs
def test_the_instruction_counts_pipelines_run(workload, monkeypatch, pipeline, amount, records):
    bench, data = workload
    monkeypatch.syspath_prepend(BENCHMARKS)
    assert load("instructions").run(pipeline, data, amount) == records


@pytest.mark.parametrize("kind", ["mnist", "float", "tokens", "wide"])
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


@pytest.mark.parametrize("kind", ["mnist", "tokens", "wide"])
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

    core = _core.core
    assert load("bench_stages").main(["--data", data, "--workload", "tokens", "--pipeline",
                                      "--threads", "1", "2", "--repeat", "2"]) == 0
    assert _core.core is core  # the timing wrapper is taken off again
    out = capsys.readouterr().out
    share = r", \d+% of it in the core's walk_examples" if _walkers.core_available() else ""
    for threads in (1, 2):
        assert re.search(rf"^tokens: read_batch_features, {threads} enqueue thread\(s\), 1200 "
                         r"records: \d+k records/s \(best of 2; all: \d+k/\d+k\), [\d.]+ us "
                         rf"of CPU per record{share}$", out, re.M), out


def test_the_sequence_benchmark_times_each_path(capsys):
    from queuepipe.parsing import _walkers

    assert load("bench_sequence").main(["--records", "20", "--repeat", "1"]) == 0
    paths = re.findall(r"^(pure|core): [\d.]+ us of CPU per SequenceExample",
                       capsys.readouterr().out, re.M)
    assert paths == (["pure", "core"] if _walkers.core_available() else ["pure"])
