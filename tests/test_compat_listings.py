"""TF1 listings (tests/listings/) run with their import line changed and nothing else, each
compared with what TensorFlow 2.21 gave when it ran the same file unchanged
(tests/golden/compat-tf2.21/listings.json, written by tests/listings/make_golden.py).

Shuffled batches are compared as TF's are reproducible: as the multiset of records read
across all epochs (TF's shuffle order comes from TF's random streams), with the number of
steps, the batch shapes and dtypes, and the static shapes exactly. Floats computed in float32
(a standardized image) are compared to 1e-5: NumPy and TF's kernels may round the last bit
differently; everything else must be equal.
"""

import json
import math
import os
import types

import pytest

HERE = os.path.dirname(__file__)
TF_IMPORT = "import tensorflow.compat.v1 as tf\n"
with open(os.path.join(HERE, "golden", "compat-tf2.21", "listings.json")) as _f:
    TF_RESULTS = json.load(_f)


def load_unchanged_but_the_import(name):
    """The listing as a module, with its TensorFlow import line swapped for queuepipe's."""
    path = os.path.join(HERE, "listings", f"{name}.py")
    with open(path) as f:
        source = f.read()
    assert source.count(TF_IMPORT) == 1 and "tensorflow" not in source.replace(TF_IMPORT, "")
    module = types.ModuleType(name)
    module.__file__ = path
    exec(compile(source.replace(TF_IMPORT, "import queuepipe.compat.v1 as tf\n"), path,
                 "exec"), module.__dict__)
    return module


def same(got, want):
    """Equal, floats to 1e-5 (see the module docstring)."""
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-5)
    if isinstance(want, list) and isinstance(got, list):
        return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict):
        return got.keys() == want.keys() and all(same(got[k], want[k]) for k in want)
    return type(got) is type(want) and got == want


@pytest.mark.parametrize("name", ["fully_connected_reader", "tf_data_reader", "cifar10_reader"])
def test_the_listing_gives_tensorflows_values(name, tmp_path):
    got = json.loads(json.dumps(load_unchanged_but_the_import(name).main(str(tmp_path))))
    assert same(got, TF_RESULTS[name])


def test_the_comparison_tells_values_apart():
    assert same({"a": [1, 0.5, "x"]}, {"a": [1, 0.5 + 1e-7, "x"]})
    assert not same({"a": [1, 0.5]}, {"a": [1, 0.5001]})
    assert not same([1, 2], [1, 2, 3]) and not same({"a": 1}, {"b": 1})
    assert not same(1, 1.0) and not same("1", 1)


def test_the_values_were_recorded_by_tensorflow_2_21():
    assert TF_RESULTS["tensorflow"] == "2.21.0"
