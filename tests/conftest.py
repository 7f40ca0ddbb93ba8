"""Fixtures every test gets: no thread may outlive its test, and hypothesis is deterministic;
and the golden files TensorFlow wrote, for the tests that ask for them.

The per-test timeout (pytest-timeout, ``timeout`` in setup.cfg) turns a deadlock into one
failed test instead of a hung CI run. Plain helper functions shared by several test modules
are in ``helpers.py``.
"""

import json
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "queuepipe", derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("queuepipe")

# Copied byte for byte from ../shared/golden/ (SHA256SUMS beside it), so a clone alone tests.
GOLDEN = os.path.join(os.path.dirname(__file__), "golden", "tf2.21")

# A thread that was told to stop gets this long to finish before the test is failed.
THREAD_GRACE_SECS = 5.0


@pytest.fixture(autouse=True)
def no_thread_left_behind():
    """Fails the test if a thread it started is still alive after a short grace period."""
    before = set(threading.enumerate())
    yield
    started = [t for t in threading.enumerate() if t not in before]
    deadline = time.monotonic() + THREAD_GRACE_SECS
    for thread in started:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in started if t.is_alive()]
    if alive:
        pytest.fail(f"test left threads alive: {alive}")


@pytest.fixture
def golden_dir():
    """The TensorFlow 2.21 reference files in tests/golden/tf2.21."""
    return os.path.abspath(GOLDEN)


@pytest.fixture
def manifest(golden_dir):
    """The golden files' ``manifest.json``: what TensorFlow wrote, and the cases it ran."""
    with open(os.path.join(golden_dir, "manifest.json")) as f:
        return json.load(f)


@pytest.fixture
def golden_records(golden_dir, manifest):
    """The serialized Examples of TensorFlow's ``examples.tfrecord`` (40 of them), as bytes."""
    count = manifest["files"]["examples.tfrecord"]["records"]
    with np.load(os.path.join(golden_dir, "expected.npz")) as expected:
        return [expected[f"raw.examples.{i}"].tobytes() for i in range(count)]
