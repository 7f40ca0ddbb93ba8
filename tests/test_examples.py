"""Runs every example script as a user would (a subprocess), with small sizes, and checks
what it prints: the demo must learn, the pipelines must deliver every record once."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from helpers import write_idx

EXAMPLES = os.path.join(os.path.dirname(__file__), os.pardir, "examples")
# The scripts run here. The framework examples (torch_cnn.py, keras_model.py, jax_model.py and
# their digits.py) are run by the integration tests.
SCRIPTS = ["demo.py", "fashion_mnist_pipeline.py", "csv_pipeline.py", "sharded_join.py",
           "sequence_pipeline.py", "read_speed.py", "tf1_unchanged.py", "jpeg_pipeline.py"]


def run(script, *args):
    """Runs ``examples/<script> args`` to completion; returns its stdout."""
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def number_after(label, text):
    match = re.search(rf"^{label}: ([0-9.]+)", text, re.MULTILINE)
    assert match, f"no '{label}:' line in:\n{text}"
    return float(match.group(1))


@pytest.fixture(scope="module")
def idx_dir(tmp_path_factory):
    """MNIST-format files of learnable 28x28 images: 10 class patterns plus noise."""
    out = tmp_path_factory.mktemp("idx")
    rng = np.random.default_rng(0)
    patterns = rng.integers(0, 256, (10, 28, 28))
    for split, n in (("train", 800), ("t10k", 200)):
        labels = rng.integers(0, 10, n)
        images = np.clip(patterns[labels] + rng.normal(0, 60, (n, 28, 28)), 0, 255)
        write_idx(out / f"{split}-images-idx3-ubyte.gz", images.astype(np.uint8), compress=True)
        write_idx(out / f"{split}-labels-idx1-ubyte.gz", labels.astype(np.uint8), compress=True)
    return str(out)


def test_the_scripts_exist():
    assert all(os.path.isfile(os.path.join(EXAMPLES, name)) for name in SCRIPTS)


def test_demo_learns_the_real_digits():
    out = run("demo.py", "--epochs", "4", "--no-progress")
    assert "scikit-learn's 8x8 handwritten digits: 1437 training and 360 held-out" in out
    assert re.search(r"wrote 1797 Examples as 4 training shard\(s\) \(\d+ processes\)", out)
    epochs = re.findall(r"^epoch +(\d+)/4  loss ([0-9.]+)  train accuracy ([0-9.]+)", out,
                        re.MULTILINE)
    assert [int(e) for e, _, _ in epochs] == [1, 2, 3, 4]
    assert float(epochs[-1][1]) < float(epochs[0][1])  # the loss went down
    assert "trained on 5748 examples" in out  # 4 epochs of 1437: nothing lost
    # QueueMonitor's table has a row per queue, then its verdict on the shuffle queue.
    assert re.search(r"^shuffle_batch/random_shuffle_queue +\d+/\d+ +[0-9.]+ +[0-9.]+ ", out,
                     re.MULTILINE)
    assert re.search(r"^(not )?input-bound: queue 'shuffle_batch/random_shuffle_queue' was on "
                     r"average \d+% full", out, re.MULTILINE)
    assert number_after("held-out accuracy", out) > 0.6


def test_demo_reads_idx_files(idx_dir):
    out = run("demo.py", "--idx-dir", idx_dir, "--epochs", "2", "--no-progress",
              "--shards", "2", "--hidden", "32")
    assert "800 training and 200 held-out images of 784 pixels" in out
    assert number_after("held-out accuracy", out) > 0.6


@pytest.mark.parametrize("with_idx", [False, True])
def test_fashion_mnist_pipeline_trains_from_shuffle_batch(idx_dir, with_idx):
    # 6 epochs: after 2 (19 steps) the accuracy of the synthetic set still ranged from 0.49
    # to 0.90 with the batch order of 2 threads; after 6 it was 0.98 to 1.0 in 8 runs.
    args = ["--train-size", "600", "--test-size", "200", "--epochs", "6"]
    out = run("fashion_mnist_pipeline.py", *args, *(["--idx-dir", idx_dir] if with_idx else []))
    assert "wrote 600 training and 200 test Examples" in out
    assert "3600 examples, 6 epochs" in out
    assert number_after("test accuracy", out) > 0.6


def test_csv_pipeline_reads_every_line_of_every_epoch():
    out = run("csv_pipeline.py", "--rows-per-file", "200", "--epochs", "2")
    assert "trained on 1200 rows (1200 expected" in out
    assert number_after("training accuracy", out) > 0.8


def test_sharded_join_delivers_every_record_once():
    out = run("sharded_join.py", "--records", "3000", "--shards", "4", "--no-progress")
    assert "wrote 3000 records to 4 shards with 2 processes" in out
    assert "read 6000 records" in out
    assert "every record of every epoch exactly once: True" in out


def test_sequence_pipeline_pads_each_batch_to_its_longest_sequence():
    out = run("sequence_pipeline.py", "--sequences", "300", "--epochs", "2")
    assert re.search(r"^first batch: tokens \(32, (\d+)\) \(longest \1\)", out, re.MULTILINE)
    assert "600 sequences in padded batches" in out
    assert number_after("last-epoch training accuracy", out) > 0.6


def test_read_speed_measures_read_batch_features_and_checks_every_record():
    out = run("read_speed.py", "--records", "3000", "--shards", "3", "--repeats", "1")
    assert re.search(r"^read_batch_features: 3000 records in [0-9.]+ s = [0-9,]+ records/s$",
                     out, re.MULTILINE)
    assert re.search(r"^best: [0-9,]+ records/s \(batch 128, shuffle queue 10000", out,
                     re.MULTILINE)


def test_a_tf1_listing_runs_unchanged_through_compat_v1_and_learns():
    with open(os.path.join(EXAMPLES, "tf1_unchanged.py")) as f:
        imports = [line for line in f if line.startswith(("import ", "from "))
                   and "queuepipe" in line]
    assert imports == ["import queuepipe.compat.v1 as tf\n"]  # the one line changed
    out = run("tf1_unchanged.py", "--epochs", "3")
    assert "wrote 1438 Examples to train.tfrecords" in out
    assert "done training for 3 epochs, 135 steps" in out  # the OutOfRangeError at the end
    assert "trained on 4314 examples (3 x 1438 expected)" in out
    assert number_after("held-out accuracy", out) > 0.8


def test_jpeg_records_are_decoded_in_the_pipeline_and_learned_from():
    pytest.importorskip("PIL")
    out = run("jpeg_pipeline.py", "--epochs", "3")
    assert "wrote 1438 JPEG Examples in 2 shards" in out
    assert "trained on 4314 decoded images (3 x 1438 expected)" in out
    assert number_after("held-out accuracy", out) > 0.6
