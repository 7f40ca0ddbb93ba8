"""queuepipe.integrations.torch: NumPy batches as tensors, and pipelines under a DataLoader."""

import collections
import functools
import importlib
import os
import runpy
import sys
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import wait_until  # noqa: E402 - after the importorskip

import queuepipe as qp  # noqa: E402
from queuepipe.distributed import Shard, shard_files  # noqa: E402
from queuepipe.integrations.torch import (  # noqa: E402
    Offsets, Padded, QueuePipeIterableDataset, TorchBatches, to_torch, worker_shard,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_missing_torch_names_the_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` sees without it
    monkeypatch.delitem(sys.modules, "queuepipe.integrations.torch")
    with pytest.raises(ImportError, match=r"^queuepipe\.integrations\.torch needs PyTorch: "
                                          r"pip install '<queuepipe checkout>\[torch\]'$"):
        importlib.import_module("queuepipe.integrations.torch")


# -- to_torch ---------------------------------------------------------------------------------

def test_to_torch_shares_memory_and_keeps_nested_structure():
    image = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    label = np.array([3, 7], dtype=np.int64)
    names = np.array([b"a", b"bc"], dtype=object)
    batch = {"x": (image, [label]), "name": names, "n": np.int32(5), "raw": b"xy"}

    out = to_torch(batch)

    assert list(out) == ["x", "name", "n", "raw"]
    x_image, (x_label,) = out["x"]
    assert isinstance(out["x"], tuple) and isinstance(out["x"][1], list)
    assert x_image.dtype == torch.float32 and tuple(x_image.shape) == (2, 3, 4)
    assert x_label.dtype == torch.int64 and x_label.tolist() == [3, 7]
    image[0, 0, 0] = 100.0  # zero copy: the tensor sees the NumPy write
    assert x_image[0, 0, 0].item() == 100.0
    assert out["name"] is names  # strings have no tensor type: the NumPy array itself
    assert out["n"].dtype == torch.int32 and out["n"].item() == 5 and out["n"].dim() == 0
    assert out["raw"] == b"xy"


def test_to_torch_rebuilds_namedtuples_and_tuple_batches():
    batch = qp.SparseValue(indices=np.array([[0, 0], [1, 2]], dtype=np.int64),
                           values=np.array([1.5, 2.5], dtype=np.float32),
                           dense_shape=np.array([2, 3], dtype=np.int64))
    out = to_torch((batch, np.array([True, False])))
    sparse, flags = out
    assert type(out) is tuple and type(sparse) is qp.SparseValue
    assert sparse.values.tolist() == [1.5, 2.5] and sparse.dense_shape.tolist() == [2, 3]
    assert flags.dtype == torch.bool and flags.tolist() == [True, False]


def token_batch():
    """Three token lists, [7, 8, 9], [4] and [], batched as a VarLenFeature parses them."""
    return qp.SparseValue(indices=np.array([[0, 0], [0, 1], [0, 2], [1, 0]], dtype=np.int64),
                          values=np.array([7, 8, 9, 4], dtype=np.int64),
                          dense_shape=np.array([3, 3], dtype=np.int64))


def test_to_torch_gives_ragged_rows_padded_with_their_lengths():
    out = to_torch({"tokens": token_batch()}, sparse="padded", padding_value=-1)
    padded = out["tokens"]
    assert type(padded) is Padded
    assert padded.values.tolist() == [[7, 8, 9], [4, -1, -1], [-1, -1, -1]]
    assert padded.lengths.dtype == torch.int64 and padded.lengths.tolist() == [3, 1, 0]
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        padded.values[:2], padded.lengths[:2], batch_first=True)  # what an RNN takes
    assert packed.data.tolist() == [7, 4, 8, 9]


def test_to_torch_gives_a_sparse_coo_tensor():
    coo = to_torch(token_batch(), sparse="coo")
    assert coo.is_sparse and tuple(coo.shape) == (3, 3)
    assert coo.to_dense().tolist() == [[7, 8, 9], [4, 0, 0], [0, 0, 0]]
    with pytest.raises(ValueError, match=r"sparse must be one of \('parts', 'padded', "
                                         r"'offsets', 'nested', 'coo'\), got 'dense'"):
        to_torch(token_batch(), sparse="dense")


def test_to_torch_gives_ids_and_offsets_that_an_embedding_bag_takes():
    pair = to_torch({"tokens": token_batch()}, sparse="offsets")["tokens"]
    assert type(pair) is Offsets and pair.per_sample_weights is None
    assert pair.ids.tolist() == [7, 8, 9, 4] and pair.offsets.tolist() == [0, 3, 4]
    assert pair.offsets.dtype == torch.int64
    bag = torch.nn.EmbeddingBag(10, 2, mode="sum")
    with torch.no_grad():
        bag.weight.copy_(torch.arange(20, dtype=torch.float32).reshape(10, 2))
        summed = bag(*pair)
    assert summed.tolist() == [[48.0, 51.0], [8.0, 9.0], [0.0, 0.0]]  # rows 7+8+9, 4, none


def test_offsets_follow_rows_whatever_the_order_of_the_indices():
    shuffled = token_batch()._replace(indices=token_batch().indices[[3, 2, 0, 1]],
                                      values=token_batch().values[[3, 2, 0, 1]])
    pair = to_torch(shuffled, sparse="offsets")
    assert pair.ids.tolist() == [7, 8, 9, 4] and pair.offsets.tolist() == [0, 3, 4]


def test_a_weight_feature_becomes_the_bags_per_sample_weights():
    weights = token_batch()._replace(values=np.array([0.5, 1.0, 2.0, 3.0], np.float32))
    batch = to_torch({"tokens": token_batch(), "weights": weights, "label": np.arange(3)},
                     sparse="offsets", weights={"tokens": "weights"})
    assert sorted(batch) == ["label", "tokens"]
    assert batch["tokens"].per_sample_weights.tolist() == [0.5, 1.0, 2.0, 3.0]
    bag = torch.nn.EmbeddingBag(10, 1, mode="sum")
    with torch.no_grad():
        bag.weight.copy_(torch.arange(10, dtype=torch.float32)[:, None])
        assert bag(*batch["tokens"]).flatten().tolist() == [7 * 0.5 + 8 + 18, 12.0, 0.0]
    short = weights._replace(indices=weights.indices[:3], values=weights.values[:3])
    with pytest.raises(ValueError, match=r"^batch component \['tokens'\]: its weights do not "
                                         r"have the same rows as its ids"):
        to_torch({"tokens": token_batch(), "weights": short}, sparse="offsets",
                 weights={"tokens": "weights"})
    with pytest.raises(ValueError, match=r"weights= gives EmbeddingBag's per_sample_weights: "
                                         r"it needs sparse='offsets', got sparse='padded'"):
        to_torch({"tokens": token_batch()}, sparse="padded", weights={"tokens": "w"})
    with pytest.raises(ValueError, match=r"batch component \['w'\] is not a sparse feature"):
        to_torch({"tokens": token_batch()}, sparse="offsets", weights={"tokens": "w"})


def test_to_torch_gives_a_jagged_nested_tensor():
    nested = to_torch(token_batch(), sparse="nested")
    assert nested.is_nested and nested.size(0) == 3
    assert [row.tolist() for row in nested.unbind()] == [[7, 8, 9], [4], []]


def test_token_lists_reach_a_torch_loop_padded(tmp_path):
    path = str(tmp_path / "tokens.tfrecord")
    lists = [list(range(1, i % 5 + 1)) for i in range(40)]
    with qp.io.TFRecordWriter(path) as writer:
        for i, tokens in enumerate(lists):
            writer.write(qp.make_example({"tokens": tokens, "label": i}).SerializeToString())
    features = {"tokens": qp.io.VarLenFeature(qp.int64),
                "label": qp.io.FixedLenFeature([], qp.int64)}
    batches = qp.train.read_batch_features(path, 8, features, num_epochs=1, randomize_input=False)
    seen = {}
    for batch in TorchBatches(batches, sparse="padded"):
        values, lengths = batch["tokens"]
        for label, row, length in zip(batch["label"].tolist(), values.tolist(), lengths.tolist()):
            seen[label] = row[:length]
            assert all(v == 0 for v in row[length:])
    assert seen == dict(enumerate(lists))


def test_to_torch_copies_what_torch_cannot_share():
    frozen = np.arange(4, dtype=np.int64)
    frozen.flags.writeable = False
    reversed_view = np.arange(4, dtype=np.int64)[::-1]
    big_endian = np.arange(3, dtype=">i4")

    out = to_torch([frozen, reversed_view, big_endian])

    assert [t.tolist() for t in out] == [[0, 1, 2, 3], [3, 2, 1, 0], [0, 1, 2]]
    assert out[2].dtype == torch.int32
    out[0][0] = 9  # a copy: writing to it leaves the read-only array alone
    assert frozen[0] == 0


def test_to_torch_names_the_component_it_cannot_convert():
    batch = {"when": np.array(["2024-01-01"], dtype="datetime64[D]")}
    with pytest.raises(TypeError, match=r"^batch component \['when'\] has dtype datetime64"):
        to_torch(batch)


def test_to_torch_moves_to_the_device():
    out = to_torch((np.ones(2, np.float32),), device="meta")
    assert out[0].device.type == "meta" and tuple(out[0].shape) == (2,)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-accelerator fallback")
def test_pin_memory_without_accelerator_is_ignored_with_a_warning():
    with pytest.warns(UserWarning, match=r"^pin_memory=True is ignored: no accelerator"):
        out = to_torch(np.zeros(3, np.float32), pin_memory=True)
    assert not out.is_pinned()


# -- TorchBatches -----------------------------------------------------------------------------

class _Closable:
    def __init__(self, batches):
        self.batches = iter(batches)
        self.closed = 0

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.batches)

    def close(self):
        self.closed += 1


def test_torch_batches_converts_each_batch_and_closes_its_source():
    source = _Closable([(np.array([i, i + 1]), np.array([b"k"], dtype=object))
                        for i in range(3)])
    with TorchBatches(source) as batches:
        got = [(x.tolist(), keys.tolist()) for x, keys in batches]
    assert got == [([0, 1], [b"k"]), ([1, 2], [b"k"]), ([2, 3], [b"k"])]
    assert source.closed == 1


# -- QueuePipeIterableDataset -----------------------------------------------------------------

FEATURES = {"id": qp.io.FixedLenFeature([], qp.int64),
            "pixels": qp.io.FixedLenFeature([4], qp.float32)}


def _write_dataset(folder, n, num_shards):
    """``n`` Examples (id i, pixels [i, i, i, i]) in ``num_shards`` shards with indexes."""
    ids = np.arange(n, dtype=np.int64)
    qp.write_shards({"id": ids, "pixels": np.repeat(ids[:, None], 4, 1).astype(np.float32)},
                    folder, num_shards, progress=False, processes=1)
    return os.path.join(str(folder), "*.tfrecord")


# DataLoader workers are forked (Linux's default, and far cheaper than spawning processes that
# import torch again). When JAX's tests ran earlier in this process, JAX warns that forking a
# process with its threads may deadlock; these workers never call JAX, so that cannot happen.
fork_after_jax = pytest.mark.filterwarnings(
    r"ignore:os\.fork\(\) was called\. os\.fork\(\) is incompatible with multithreaded "
    r"code, and JAX:RuntimeWarning")


def make_batches(shard, pattern, batch_size, num_epochs=1, fail_after=None):
    """The factory of the tests: this shard's files, parsed, batched; ids tagged with the shard.

    Module level, so that DataLoader workers can pickle it whatever the start method.
    """
    share = shard_files(pattern, *shard)
    names = qp.train.string_input_producer(share.files, num_epochs=num_epochs, shuffle=False)
    reader = share.reader()
    calls = iter(range(10**9))

    def examples():
        if next(calls) == fail_after:
            raise ValueError("the reader broke")
        _, serialized = reader.read_up_to(names, 3)
        parsed = qp.io.parse_example(serialized, FEATURES)
        return {"id": parsed["id"], "pixels": parsed["pixels"],
                "shard": np.full((len(serialized), 2), tuple(shard), dtype=np.int64)}

    return qp.train.batch(examples, batch_size, enqueue_many=True,
                          allow_smaller_final_batch=True)


def test_dataset_yields_tensor_batches_with_every_record_once_per_epoch(tmp_path):
    pattern = _write_dataset(tmp_path, 23, 3)
    dataset = QueuePipeIterableDataset(functools.partial(make_batches, pattern=pattern,
                                                         batch_size=5))
    assert isinstance(dataset, torch.utils.data.IterableDataset)
    loader = torch.utils.data.DataLoader(dataset, batch_size=None)
    for _ in range(2):  # each epoch builds and runs a fresh pipeline
        batches = list(loader)
        assert all(isinstance(b["id"], torch.Tensor) and b["pixels"].dtype == torch.float32
                   for b in batches)
        ids = [i for b in batches for i in b["id"].tolist()]
        assert collections.Counter(ids) == collections.Counter(range(23))
        assert all(b["pixels"][:, 0].tolist() == b["id"].tolist() for b in batches)
        assert {tuple(s) for b in batches for s in b["shard"].tolist()} == {(0, 1)}


@fork_after_jax
@pytest.mark.parametrize("num_shards", [4, 1], ids=["files", "records"])
def test_dataloader_workers_read_disjoint_shares(tmp_path, num_shards):
    pattern = _write_dataset(tmp_path, 30, num_shards)
    dataset = QueuePipeIterableDataset(functools.partial(make_batches, pattern=pattern,
                                                         batch_size=4))
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
    batches = list(loader)
    ids = [i for b in batches for i in b["id"].tolist()]
    assert collections.Counter(ids) == collections.Counter(range(30))
    shards = collections.Counter(tuple(s) for b in batches for s in b["shard"].tolist())
    assert set(shards) == {(0, 2), (1, 2)}  # each worker read its own half
    assert sum(shards.values()) == 30


@fork_after_jax
def test_dataset_splits_a_distributed_rank_across_workers(tmp_path):
    pattern = _write_dataset(tmp_path, 40, 8)
    seen = {}
    for rank in range(2):
        dataset = QueuePipeIterableDataset(
            functools.partial(make_batches, pattern=pattern, batch_size=4), rank=rank,
            world_size=2)
        loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=2)
        seen[rank] = [(i, tuple(s)) for b in loader
                      for i, s in zip(b["id"].tolist(), b["shard"].tolist())]
    assert {s for items in seen.values() for _, s in items} == {(r, 4) for r in range(4)}
    assert {s for _, s in seen[1]} == {(2, 4), (3, 4)}  # rank 1's workers: shares 2 and 3
    ids = [i for items in seen.values() for i, _ in items]
    assert collections.Counter(ids) == collections.Counter(range(40))


def test_worker_shard_outside_a_worker_is_the_process_share():
    assert worker_shard(1, 3) == Shard(1, 3)


def test_dataset_stops_its_pipeline_when_the_loop_stops_early(tmp_path):
    pattern = _write_dataset(tmp_path, 10, 2)
    dataset = QueuePipeIterableDataset(functools.partial(make_batches, pattern=pattern,
                                                         batch_size=2, num_epochs=None))
    before = set(threading.enumerate())
    batches = iter(dataset)  # endless: num_epochs=None
    first = [next(batches) for _ in range(3)]
    assert len({t for t in threading.enumerate() if t not in before}) > 0  # runners run
    batches.close()  # what dropping the DataLoader's iterator does
    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []
    assert all(len(b["id"]) == 2 for b in first)


def test_dataset_raises_a_pipeline_error_in_the_training_loop(tmp_path):
    pattern = _write_dataset(tmp_path, 30, 2)
    dataset = QueuePipeIterableDataset(functools.partial(make_batches, pattern=pattern,
                                                         batch_size=2, fail_after=2))
    with pytest.raises(ValueError, match=r"^the reader broke$"):
        for _ in torch.utils.data.DataLoader(dataset, batch_size=None):
            pass


def test_dataset_needs_a_callable():
    with pytest.raises(TypeError, match=r"^make_batches must be a callable taking a Shard"):
        QueuePipeIterableDataset("data/*.tfrecord")


def test_torch_cnn_example_trains_a_few_steps(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.syspath_prepend(os.path.join(ROOT, "examples"))  # for its `import digits`
    example = runpy.run_path(os.path.join(ROOT, "examples", "torch_cnn.py"))
    metrics = example["main"](["--steps", "6", "--workers", "0", "--data", str(tmp_path)])
    assert metrics["steps"] == 6 and metrics["examples"] == 6 * 32
    assert np.isfinite(metrics["loss"]) and 0.0 <= metrics["accuracy"] <= 1.0
    assert sorted(os.listdir(tmp_path)) == sorted(
        [f"digits-{i:05d}-of-00004.tfrecord{suffix}" for i in range(4) for suffix in ("",
                                                                                      ".index")])


def test_to_torch_refuses_a_whole_batches_and_the_adapter_says_what_it_wraps():
    pipeline = qp.Pipeline()
    with pipeline.as_default():
        batches = qp.train.batch(lambda: np.int64(1), 2, capacity=4)
    with batches:
        with pytest.raises(TypeError, match=r"^to_torch converts one batch; for a whole "
                                            r"Batches use TorchBatches\(batches\)"):
            to_torch(batches)
        assert repr(TorchBatches(batches)) == f"<TorchBatches over {batches!r}>"


class Source:
    """Batches 0, 1, 2, ... (then an error, if asked), counting how many were taken."""

    def __init__(self, n, fail=False):
        self.n, self.fail, self.taken, self.closed = n, fail, 0, False

    def __iter__(self):
        return self

    def __next__(self):
        if self.taken == self.n:
            if self.fail:
                raise qp.errors.DataLossError("bad record", path="f", offset=9)
            raise StopIteration
        self.taken += 1
        return {"x": np.full((2, 3), self.taken - 1, np.float32)}

    def close(self):
        self.closed = True


def prefetch_threads():
    return [t for t in threading.enumerate() if t.name == "queuepipe/torch-prefetch"]


def test_prefetch_converts_batches_ahead_on_a_thread_in_order():
    source = Source(6)
    with TorchBatches(source, prefetch=2) as batches:
        first = next(batches)
        assert torch.is_tensor(first["x"]) and first["x"][0, 0].item() == 0
        assert len(prefetch_threads()) == 1
        rest = [int(b["x"][0, 0]) for b in batches]
    assert rest == [1, 2, 3, 4, 5] and source.taken == 6 and source.closed
    assert prefetch_threads() == []


def test_prefetch_raises_the_sources_error_after_the_batches_before_it():
    batches = TorchBatches(Source(3, fail=True), prefetch=2)
    assert [int(next(batches)["x"][0, 0]) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(qp.errors.DataLossError, match="bad record"):
        next(batches)
    with pytest.raises(qp.errors.DataLossError):  # and again: the iterator stays failed
        next(batches)
    batches.close()


def test_closing_or_dropping_a_prefetching_iterator_stops_its_thread():
    source = Source(1000)
    batches = TorchBatches(source, prefetch=3)
    next(batches)
    batches.close()
    assert prefetch_threads() == [] and source.taken <= 1 + 3 + 1
    with pytest.raises(StopIteration):
        next(batches)
    dropped = TorchBatches(Source(1000), prefetch=2)
    next(dropped)
    del dropped
    import gc
    gc.collect()
    assert prefetch_threads() == []
    with pytest.raises(ValueError, match=r"prefetch must be an int >= 0, got -1"):
        TorchBatches(Source(1), prefetch=-1)


class Waiting:
    """A source whose next batch never comes: next() waits until the source is closed (as a
    Batches' dequeue waits until its queue closes)."""

    def __init__(self):
        self.closed = threading.Event()

    def __iter__(self):
        return self

    def __next__(self):
        self.closed.wait()
        raise StopIteration

    def close(self):
        self.closed.set()


def test_closing_a_prefetching_iterator_wakes_a_thread_waiting_for_the_next_batch():
    torch_batches = TorchBatches(Waiting(), prefetch=2)
    waiter = threading.Thread(target=lambda: list(torch_batches), name="test/consumer")
    waiter.start()
    wait_until(lambda: len(prefetch_threads()) == 1, "the prefetch thread waits in the source")
    torch_batches.close()  # closes the source first: the waiting thread wakes, then is joined
    waiter.join(10)
    assert not waiter.is_alive() and prefetch_threads() == []
