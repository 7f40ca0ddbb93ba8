"""queuepipe.integrations.torch: NumPy batches as tensors, and pipelines under a DataLoader."""

import collections
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import queuepipe as qp  # noqa: E402 - after the importorskip
from queuepipe.distributed import Shard  # noqa: E402
from queuepipe.integrations.torch import (  # noqa: E402
    QueuePipeIterableDataset, TorchBatches, to_torch, worker_shard,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
