"""Soak, round three: the edges issue 29's adversary found, drawn again and again from fixed
seeds.

* ``reused_buffer``: producers (1-4 threads, or a join) that fill and return one reused NumPy
  buffer per thread, through ``batch``, ``shuffle_batch`` (seeded or not), ``maybe_batch``
  with a callable ``keep_input`` and the joins: every value arrives exactly once, each row
  whole.
* ``user_exception``: one user function (the producer, ``keep_input``, or
  ``read_batch_features``' ``parse_fn``) raises ``StopIteration``, ``OutOfRangeError``,
  ``CancelledError``, ``GeneratorExit`` or ``KeyboardInterrupt`` on one record, every pair
  drawn. Only a producer's ``OutOfRangeError`` or ``CancelledError`` ends its input (its
  thread's: the other threads deliver the rest); anything else reaches the consumer (a
  ``RuntimeError`` naming the function for what would look like an end), and nothing hangs.
* ``dropped``: one to three ``Batches`` built on a shared producer and dropped before their
  first batch (a notebook cell run again), then one that is read, by itself or under
  ``running()``: it gets the exact multiset.
* ``close_from_thread``: another thread closes the ``Batches`` (a batching function's or
  ``read_batch_features``') while the main thread iterates: the loop ends, nothing repeats,
  no thread is left.

Every dequeue returns within ``HANG_SECS`` and no thread outlives a test (the autouse fixture
in tests/conftest.py).
"""

import collections
import random
import threading

import numpy as np
import pytest

import queuepipe as qp
from stress_util import SPEC, Shards, assert_no_repeats, drain

SEEDS = list(range(60))
SCENARIOS = ["reused_buffer", "user_exception", "dropped", "close_from_thread"]
ERRORS = [StopIteration, qp.errors.OutOfRangeError, qp.errors.CancelledError, GeneratorExit,
          KeyboardInterrupt]
CALLABLES = ["producer", "keep_input", "parse_fn"]


def _numbers(n, trip=None, error=None):
    """A producer (thread-safe) of ``0 .. n-1``, then the end of the input; it raises
    ``error`` instead of returning ``trip``."""
    items = iter(range(n))
    lock = threading.Lock()

    def take():
        with lock:
            i = next(items, None)
        if i is None:
            raise qp.errors.OutOfRangeError("no more numbers")
        if i == trip:
            raise error
        return i
    return take


def _batching(rng, producers, keep_input=True):
    """One of the batching functions over ``producers`` (a list: more than one makes a join),
    drawn by ``rng``, delivering every element (a smaller final batch allowed)."""
    size = rng.choice([1, 5, 16])
    shuffle = rng.random() < 0.5
    seed = rng.choice([None, rng.randrange(1000)])
    args = dict(allow_smaller_final_batch=True)
    if len(producers) > 1:
        if shuffle:
            return qp.train.maybe_shuffle_batch_join(producers, size, 40, 4, keep_input,
                                                     seed=seed, **args)
        return qp.train.maybe_batch_join(producers, keep_input, size, capacity=24, **args)
    threads = rng.randint(1, 4)
    if shuffle:
        return qp.train.maybe_shuffle_batch(producers[0], size, 40, 4, keep_input,
                                            num_threads=threads, seed=seed, **args)
    return qp.train.maybe_batch(producers[0], keep_input, size, num_threads=threads,
                                capacity=24, **args)


def _reused_buffer(tmp_path, rng, k):
    n = rng.randint(1, 300)
    shape = rng.choice([(), (1,), (3,), (2, 2)])
    form = rng.choice(["tuple", "list", "dict", "bare"])
    numbers = _numbers(n)
    local = threading.local()  # one buffer per producer thread

    def produce():
        buffer = getattr(local, "buffer", None)
        if buffer is None:
            buffer = local.buffer = np.zeros(shape, np.int64)
        buffer[...] = numbers()
        return {"tuple": (buffer, 1), "list": [buffer, 1], "dict": {"x": buffer, "y": 1},
                "bare": buffer}[form]

    keep = rng.choice([True, lambda element: int(np.ravel(_values(element))[0]) % 3 != 0])
    with qp.Pipeline().as_default():
        batches = _batching(rng, [produce] * rng.choice([1, 1, 2, 3]), keep)
    got = collections.Counter()
    with batches:
        for b in batches:
            values = _values(b).reshape(len(_values(b)), -1)
            assert (values == values[:, :1]).all(), "a row mixes two elements' values"
            got.update(values[:, 0].tolist())
    kept = [i for i in range(n) if keep is True or i % 3 != 0]
    assert got == collections.Counter(kept)


def _values(element):
    """The buffer's component of an element or batch, whatever its form."""
    if isinstance(element, dict):
        return np.asarray(element["x"])
    if isinstance(element, (tuple, list)):
        return np.asarray(element[0])
    return np.asarray(element)


def _user_exception(tmp_path, rng, k):
    error_type, where = ERRORS[k % len(ERRORS)], CALLABLES[k // len(ERRORS) % len(CALLABLES)]
    error = error_type("user's") if issubclass(error_type, qp.errors.QueuePipeError) \
        else error_type()
    ends = where == "producer" and isinstance(error, (qp.errors.OutOfRangeError,
                                                      qp.errors.CancelledError))
    if where == "parse_fn":
        shards = Shards(tmp_path, rng.randint(1, 3), rng.randint(10, 60))
        n, trip = len(shards.ids), rng.choice(shards.ids)

        def parse(serialized):
            parsed = qp.io.parse_example(serialized, SPEC)
            if (parsed["id"] == trip).any():
                raise error
            return parsed["id"], parsed["id"]  # (drain's form)

        with qp.Pipeline().as_default():
            batches = qp.train.read_batch_features(
                shards.paths, rng.choice([1, 4, 8]), SPEC, num_epochs=1, parse_fn=parse,
                seed=rng.choice([None, rng.randrange(1000)]),
                num_enqueue_threads=rng.randint(1, 3), read_batch_size=rng.choice([4, 16]))
    else:
        n = rng.randint(10, 200)
        trip = rng.randrange(n)
        numbers = _numbers(n, trip, error) if where == "producer" else _numbers(n)
        keep = True
        if where == "keep_input":
            def keep(element):
                if element[0] == trip:
                    raise error
                return True

        with qp.Pipeline().as_default():
            batches = _batching(rng, [lambda: (numbers(), b"")], keep)
    got = collections.Counter()
    if ends:  # its thread's input ended: the others deliver the rest
        with batches:
            drain(batches, got=got)
        assert got == collections.Counter(i for i in range(n) if i != trip)
        return
    expected = RuntimeError if isinstance(error, (StopIteration, qp.errors.OutOfRangeError,
                                                  qp.errors.CancelledError)) else error_type
    with pytest.raises(expected) as caught, batches:
        drain(batches, got=got)
    if expected is RuntimeError:
        name = "the producer" if where == "producer" else where
        assert str(caught.value).startswith(f"{name} of queue '"), caught.value
        assert isinstance(caught.value.__cause__.__cause__, error_type)
    assert_no_repeats(got, collections.Counter(range(n)))
    assert got[trip] == 0


def _dropped(tmp_path, rng, k):
    n = rng.randint(50, 400)
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        ids = np.arange(n)
        records = qp.train.slice_input_producer([ids, ids * 10], num_epochs=1,
                                                shuffle=rng.random() < 0.5,
                                                seed=rng.randrange(1000))
        for _ in range(rng.randint(1, 3)):
            _batching(rng, [records] * rng.choice([1, 2]))  # dropped at once (no cycle)
        batches = _batching(rng, [records] * rng.choice([1, 2]))
    if rng.random() < 0.5:
        with qp.train.running(pipeline):
            got, _ = drain(batches)
    else:
        with batches:
            got, _ = drain(batches)
    assert got == collections.Counter(range(n))


def _close_from_thread(tmp_path, rng, k):
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        if rng.random() < 0.5:
            shards = Shards(tmp_path, rng.randint(1, 3), rng.randint(10, 60))
            epochs = rng.choice([None, 2])
            batches = qp.train.read_batch_features(
                shards.paths, rng.choice([1, 4, 8]), SPEC, num_epochs=epochs,
                queue_capacity=rng.choice([16, 64]), seed=rng.choice([None, 3]),
                num_enqueue_threads=rng.randint(1, 3), read_batch_size=rng.choice([4, 16]))
            expected = shards.expected(epochs) if epochs else None

            def ids_of(batch):
                return batch["id"]
        else:
            endless = qp.train.range_input_producer(50, num_epochs=None, shuffle=False)
            batches = _batching(rng, [lambda: (endless.dequeue(), b"")])
            expected = None

            def ids_of(batch):
                return batch[0]
    after = rng.randint(0, 12)
    explicit = rng.random() < 0.3
    reached, errors = threading.Event(), []

    def close():
        reached.wait(30)
        try:
            batches.close()
        except BaseException as e:  # noqa: BLE001 - the test reports it
            errors.append(e)

    closer = threading.Thread(target=close, name="test/closer")
    closer.start()
    got = collections.Counter()
    try:
        with qp.train.running(pipeline) if explicit else batches:
            for i, batch in enumerate(batches):
                if i == after:
                    reached.set()
                got.update(ids_of(batch).tolist())
    finally:
        reached.set()
        closer.join()
    assert not errors, errors
    if expected is not None:
        assert_no_repeats(got, expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_soak_user(tmp_path, seed):
    rng = random.Random(seed)
    scenario = SCENARIOS[seed % len(SCENARIOS)]
    {"reused_buffer": _reused_buffer, "user_exception": _user_exception, "dropped": _dropped,
     "close_from_thread": _close_from_thread}[scenario](tmp_path, rng, seed // len(SCENARIOS))
