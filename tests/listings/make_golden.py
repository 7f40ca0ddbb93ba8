"""Records what TensorFlow 2.21 gives for each listing here (run once, in TF's venv):

    ~/.venvs/queuepipe-peers/bin/python tests/listings/make_golden.py

Writes tests/golden/compat-tf2.21/listings.json, which tests/test_compat_listings.py compares
queuepipe.compat.v1's results with. Not part of the test run.
"""
import importlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LISTINGS = ["fully_connected_reader", "tf_data_reader", "cifar10_reader"]


def main():
    sys.path.insert(0, HERE)
    results = {}
    for name in LISTINGS:
        module = importlib.import_module(name)
        with tempfile.TemporaryDirectory() as directory:
            results[name] = module.main(directory)
    results["tensorflow"] = sys.modules["tensorflow.compat.v1"].__version__
    out = os.path.join(os.path.dirname(HERE), "golden", "compat-tf2.21", "listings.json")
    with open(out, "w") as f:
        json.dump(results, f, sort_keys=True)
        f.write("\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
