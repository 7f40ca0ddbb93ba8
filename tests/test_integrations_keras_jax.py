"""queuepipe.integrations.keras and .jax: batches for model.fit and on JAX devices."""

import collections
import importlib
import json
import os
import runpy
import subprocess
import sys
import threading

import numpy as np
import pytest

import queuepipe as qp


@pytest.fixture(scope="module")
def jax():
    return pytest.importorskip("jax")


@pytest.fixture(scope="module")
def keras():
    # Keras picks its backend when first imported; TensorFlow is not a dependency of ours.
    os.environ.setdefault("KERAS_BACKEND", "jax")
    return pytest.importorskip("keras")


class Counting:
    """An iterator over ``batches`` that counts how many were taken and whether it was closed."""

    def __init__(self, batches, fail_after=None):
        self._batches = list(batches)
        self._fail_after = fail_after
        self.taken = 0
        self.closed = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.taken == self._fail_after:
            raise qp.errors.DataLossError("disk on fire", path="f", offset=3)
        if self.taken == len(self._batches):
            raise StopIteration
        self.taken += 1
        return self._batches[self.taken - 1]

    def close(self):
        self.closed = True


def _batches(n, size=4):
    rng = np.random.default_rng(0)
    return [{"x": rng.normal(size=(size, 3)).astype(np.float32),
             "y": np.arange(i * size, (i + 1) * size, dtype=np.int64) % 2} for i in range(n)]


@pytest.mark.parametrize("module, message", [
    ("jax", r"^queuepipe\.integrations\.jax needs JAX: pip install '<queuepipe checkout>\[jax\]'$"),
    ("keras", r"^queuepipe\.integrations\.keras needs Keras 3 and a backend it can load "
              r"\(KERAS_BACKEND=jax, torch or tensorflow\): pip install '<queuepipe checkout>\[keras\]'"),
])
def test_a_missing_framework_names_the_extra_to_install(monkeypatch, module, message):
    monkeypatch.setitem(sys.modules, module, None)  # what `import <module>` sees without it
    monkeypatch.delitem(sys.modules, f"queuepipe.integrations.{module}", raising=False)
    with pytest.raises(ImportError, match=message):
        importlib.import_module(f"queuepipe.integrations.{module}")


# -- JAX --------------------------------------------------------------------------------------

def test_to_jax_puts_numeric_arrays_on_the_device(jax):
    from queuepipe.integrations.jax import to_jax
    cpu = jax.devices("cpu")[0]
    names = np.array([b"a", b"b"], dtype=object)
    batch = {"image": np.arange(6, dtype=np.float32).reshape(2, 3),
             "meta": (np.array([1, 2], dtype=np.int32), names), "raw": b"r"}

    out = to_jax(batch, device=cpu)

    assert isinstance(out["image"], jax.Array) and out["image"].devices() == {cpu}
    np.testing.assert_array_equal(np.asarray(out["image"]), batch["image"])
    assert isinstance(out["meta"], tuple) and out["meta"][0].dtype == np.int32
    assert out["meta"][1] is names and out["raw"] == b"r"


@pytest.mark.parametrize("prefetch", [0, 1, 2])
def test_jax_batches_keeps_prefetch_batches_in_flight(jax, prefetch):
    from queuepipe.integrations.jax import JaxBatches
    source = Counting(_batches(5))
    batches = JaxBatches(source, prefetch=prefetch)

    first = next(batches)
    assert source.taken == 1 + prefetch  # the next `prefetch` batches are already on their way
    rest = list(batches)

    got = [first] + rest
    assert [np.asarray(b["y"]).tolist() for b in got] == [b["y"].tolist() for b in _batches(5)]
    assert all(isinstance(b["x"], jax.Array) for b in got)


def test_jax_batches_returns_ready_batches_before_a_source_error(jax):
    from queuepipe.integrations.jax import JaxBatches
    batches = JaxBatches(Counting(_batches(5), fail_after=2), prefetch=2)
    assert len([next(batches), next(batches)]) == 2  # taken before the error, none lost
    with pytest.raises(qp.errors.DataLossError, match=r"^disk on fire$"):
        next(batches)
    with pytest.raises(StopIteration):
        next(batches)


def test_jax_batches_close_and_arguments(jax):
    from queuepipe.integrations.jax import JaxBatches
    source = Counting(_batches(3))
    with JaxBatches(source, prefetch=1) as batches:
        next(batches)
    assert source.closed
    with pytest.raises(ValueError, match=r"^prefetch must be >= 0, got -1$"):
        JaxBatches([], prefetch=-1)


# -- Keras ------------------------------------------------------------------------------------

def _split(batch):
    return batch["x"], batch["y"]


def test_keras_generator_splits_each_batch(keras):
    from queuepipe.integrations.keras import keras_generator
    source = _batches(3)
    got = list(keras_generator(source, _split))
    assert [y.tolist() for _, y in got] == [b["y"].tolist() for b in source]
    assert list(keras_generator([[1, 2], (3, 4)])) == [(1, 2), (3, 4)]  # lists become tuples


def test_py_dataset_is_a_stream_shared_safely_by_threads(keras):
    from queuepipe.integrations.keras import QueuePipePyDataset
    source = [(np.array([i]), np.array([i % 3])) for i in range(400)]
    dataset = QueuePipePyDataset(iter(source), steps_per_epoch=100)
    assert dataset.num_batches == 100 and isinstance(dataset, keras.utils.PyDataset)

    got = [[] for _ in range(4)]
    start = threading.Barrier(4)

    def take(out):
        start.wait()
        for i in range(100):
            out.append(int(dataset[i][0][0]))

    threads = [threading.Thread(target=take, args=(out,)) for out in got]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert collections.Counter(x for out in got for x in out) == collections.Counter(range(400))
    with pytest.raises(qp.OutOfRangeError, match=r"^the pipeline ended after 400 batches; "):
        dataset[0]


def test_py_dataset_arguments(keras):
    from queuepipe.integrations.keras import QueuePipePyDataset
    with pytest.raises(ValueError, match=r"^steps_per_epoch must be >= 1 or None, got 0$"):
        QueuePipePyDataset([], steps_per_epoch=0)
    with pytest.raises(ValueError, match=r"^use_multiprocessing=True is not supported"):
        QueuePipePyDataset([], use_multiprocessing=True)
    assert QueuePipePyDataset([]).num_batches is None


def _model(keras):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def test_model_fit_takes_exactly_the_batches_it_trains_on(keras):
    from queuepipe.integrations.keras import QueuePipePyDataset, keras_generator
    model = _model(keras)

    source = Counting(_batches(8))
    history = model.fit(keras_generator(source, _split), steps_per_epoch=3, epochs=2,
                        shuffle=False, verbose=0)
    assert source.taken == 6 and len(history.history["loss"]) == 2
    assert all(np.isfinite(history.history["loss"]))

    source = Counting(_batches(8))
    history = model.fit(QueuePipePyDataset(source, steps_per_epoch=4, split=_split), epochs=2,
                        verbose=0)
    assert source.taken == 8 and all(np.isfinite(history.history["loss"]))


_FIT_EVERY_BATCH_ONCE = """
import json, sys
import numpy as np
import keras
from queuepipe.integrations.keras import QueuePipePyDataset

steps, epochs, reads = 6, 2, {}
for workers in (1, 3):
    taken = []

    def stream():  # exactly the batches fit trains on: one more and fit fails
        for k in range(steps * epochs):
            taken.append(k)
            yield np.full((2, 3), k, "float32"), np.zeros(2, "int64")

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    dataset = QueuePipePyDataset(stream(), steps_per_epoch=steps, workers=workers)
    history = model.fit(dataset, epochs=epochs, verbose=0)
    reads[workers] = [len(taken), len(history.history["loss"])]
print(json.dumps(reads))
"""


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_model_fit_on_a_py_dataset_trains_on_every_batch_of_the_stream_once(keras, backend):
    # A model not built yet: fit first reads a pass of its own to build it (one batch, or
    # what 3 worker threads prefetch); those batches must be trained on, not dropped.
    pytest.importorskip(backend)
    env = dict(os.environ, KERAS_BACKEND=backend)
    out = subprocess.run([sys.executable, "-c", _FIT_EVERY_BATCH_ONCE], env=env, text=True,
                         capture_output=True, timeout=50)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == {"1": [12, 2], "3": [12, 2]}


# -- the examples -----------------------------------------------------------------------------

def _run_example(name, argv, monkeypatch):
    pytest.importorskip("sklearn")
    examples = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                            "examples")
    monkeypatch.syspath_prepend(examples)  # for their `import digits`
    return runpy.run_path(os.path.join(examples, name))["main"](argv)


def test_keras_example_fits_a_few_steps(keras, tmp_path, monkeypatch):
    metrics = _run_example("keras_model.py", ["--epochs", "2", "--steps-per-epoch", "3",
                                              "--data", str(tmp_path)], monkeypatch)
    assert metrics["epochs"] == 2 and np.isfinite(metrics["loss"])
    assert 0.0 <= metrics["accuracy"] <= 1.0


def test_jax_example_trains_a_few_steps(jax, tmp_path, monkeypatch):
    metrics = _run_example("jax_model.py", ["--steps", "5", "--data", str(tmp_path)],
                           monkeypatch)
    assert metrics["steps"] == 5 and np.isfinite(metrics["loss"])
    assert 0.0 <= metrics["accuracy"] <= 1.0
