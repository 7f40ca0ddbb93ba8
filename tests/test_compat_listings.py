"""TF1 listings (tests/listings/) run with their import line changed and nothing else, each
compared with what TensorFlow 2.21 gave when it ran the same file unchanged
(tests/golden/compat-tf2.21/listings.json, written by tests/listings/make_golden.py).

Shuffled batches are compared as TF's are reproducible: as the multiset of records read
across all epochs (TF's shuffle order comes from TF's random streams), with the number of
steps, the batch shapes and dtypes, and the static shapes exactly.
"""

import json
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


@pytest.mark.parametrize("name", ["fully_connected_reader", "tf_data_reader"])
def test_the_listing_gives_tensorflows_values(name, tmp_path):
    got = load_unchanged_but_the_import(name).main(str(tmp_path))
    assert json.loads(json.dumps(got)) == TF_RESULTS[name]


def test_the_values_were_recorded_by_tensorflow_2_21():
    assert TF_RESULTS["tensorflow"] == "2.21.0"
