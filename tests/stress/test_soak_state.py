"""Soak, state and files: ``read_batch_features`` pipelines drawn from fixed seeds.

* ``interrupt``: a thread sends a real SIGINT to the main thread at a random instant while it
  takes batches (inside a dequeue, in the plan's bookkeeping, between two batches); the state
  taken after the ``KeyboardInterrupt``, resumed in a new pipeline, must give exactly the
  records not received (seeded or not, buffer or global shuffle or file order).
* ``descriptors``: in a process whose ``RLIMIT_NOFILE`` is lower than the number of shards,
  global-shuffle pipelines (1-4 threads, 1-2 epochs), some closed from another thread while
  the main thread iterates, deliver their exact multiset (or stop cleanly when closed).

The trace-driven test in tests/test_resume.py lands an interrupt on every line of the state
path; this one lands real signals wherever the timing puts them.
"""

import _thread
import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading

import pytest

import queuepipe as qp
from queuepipe.features import read_batch_features
from stress_util import SPEC, Shards

SEEDS = list(range(30))


class _OneInterrupt:
    """A thread that sends SIGINT to the main thread once, ``delay`` seconds after it is
    armed, and waits for the main thread to say it caught it."""

    def __init__(self, delay, how):
        self._delay = delay
        self._how = how
        self._armed = threading.Event()
        self._caught = threading.Event()
        self._thread = threading.Thread(target=self._run, name="test/one-interrupt")
        self._thread.start()

    def _run(self):
        self._armed.wait()
        threading.Event().wait(self._delay)  # a random instant, not an ordering
        if self._how == "interrupt_main":
            _thread.interrupt_main()
        else:
            signal.raise_signal(signal.SIGINT)
        self._caught.wait(30.0)

    def arm(self):
        self._armed.set()

    def caught(self):
        self._caught.set()
        self._thread.join()


def _options(rng):
    return dict(num_epochs=rng.randint(1, 2), seed=rng.choice([None, rng.randint(0, 99)]),
                num_enqueue_threads=rng.randint(1, 4), queue_capacity=rng.choice([16, 40, 90]),
                read_batch_size=rng.choice([3, 10, 25]),
                shuffle=rng.choice(["buffer", "global"]),
                randomize_input=rng.random() < 0.8)


def _write_indexes(shards):
    for path in shards.paths:
        offsets = [offset for _, (p, offset) in sorted(shards.where.items()) if p == path]
        ends = offsets[1:] + [os.path.getsize(path)]
        with open(path + ".index", "w") as f:
            f.writelines(f"{start} {end - start}\n" for start, end in zip(offsets, ends))


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    made = Shards(tmp_path_factory.mktemp("soak-state"), num_shards=5, per_shard=40)
    _write_indexes(made)
    return made


@pytest.mark.parametrize("seed", SEEDS)
def test_interrupt_then_resume(shards, seed):
    rng = random.Random(seed)
    options = _options(rng)
    batch_size = rng.choice([1, 7, 16])
    received = []
    interrupt = _OneInterrupt(rng.uniform(0.0, 0.03), rng.choice(["interrupt_main",
                                                                 "raise_signal"]))
    with qp.Pipeline().as_default(), \
            read_batch_features(shards.paths, batch_size, SPEC, **options) as batches:
        try:
            interrupt.arm()
            for batch in batches:
                received += batch["id"].tolist()
            while True:  # the input ended first: the interrupt still comes, here
                threading.Event().wait(0.001)
        except KeyboardInterrupt:
            interrupt.caught()
        state = json.loads(json.dumps(batches.state_dict()))
    with qp.Pipeline().as_default(), read_batch_features(shards.paths, batch_size, SPEC,
                                                         state=state, **options) as batches:
        rest = [i for batch in batches for i in batch["id"].tolist()]
    expected = shards.expected(options["num_epochs"])
    got = collections.Counter(received + rest)
    assert got == expected, (seed, options, got - expected, expected - got)


_DESCRIPTORS_SCRIPT = r"""
import collections, random, resource, sys, threading
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
import queuepipe as qp
from queuepipe.features import read_batch_features
spec = {"id": qp.io.FixedLenFeature([], qp.int64)}
paths = sys.argv[3:]
for seed in range(int(sys.argv[1])):
    rng = random.Random(seed)
    epochs = rng.randint(1, 2)
    closing = rng.random() < 0.3
    with qp.Pipeline().as_default():
        batches = read_batch_features(
            paths, rng.choice([5, 16]), spec, num_epochs=epochs, shuffle="global",
            seed=rng.choice([None, seed]), num_enqueue_threads=rng.randint(1, 4),
            read_batch_size=rng.choice([7, 30]), queue_capacity=60)
        got = []
        closer = threading.Thread(target=batches.close) if closing else None
        try:
            for batch in batches:
                got += batch["id"].tolist()
                if closer is not None and closer.ident is None and len(got) > 40:
                    closer.start()
        except (qp.errors.CancelledError, qp.errors.OutOfRangeError):
            assert closing, seed
        finally:
            if closer is not None and closer.is_alive():
                closer.join()
            batches.close()
    counts = collections.Counter(got)
    expected = collections.Counter(list(range(len(paths) * 4)) * epochs)
    assert not counts - expected, (seed, counts - expected)
    assert closing or counts == expected, (seed, expected - counts)
print("ok")
"""


def test_more_shards_than_descriptors(tmp_path):
    many = Shards(tmp_path, num_shards=150, per_shard=4)
    _write_indexes(many)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(qp.__file__)))
    done = subprocess.run([sys.executable, "-c", _DESCRIPTORS_SCRIPT, "12", "64", *many.paths],
                          capture_output=True, text=True, timeout=55, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
