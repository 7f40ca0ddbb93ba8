"""Records TensorFlow's answers to tests/compat_cases.py (run once, with TensorFlow 2.21):

    ~/.venvs/queuepipe-peers/bin/python tests/golden/make_compat_answers.py

Writes tests/golden/compat-tf2.21/answers.json; tests/test_compat_answers.py compares
queuepipe.compat.v1's answers with it. Not part of the test run (TensorFlow is not a
dependency of queuepipe or its tests).
"""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tensorflow.compat.v1 as tf  # noqa: E402

import compat_cases  # noqa: E402


def main():
    tf.disable_eager_execution()
    answers = {"tensorflow": tf.__version__}
    with tempfile.TemporaryDirectory() as directory:
        compat_cases.write_inputs(tf, directory)
        for name, case in compat_cases.CASES.items():
            answers[name] = compat_cases.outcome(tf, case, directory)
    out = os.path.join(HERE, "compat-tf2.21", "answers.json")
    with open(out, "w") as f:
        json.dump(answers, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(answers) - 1} cases to {out}")


if __name__ == "__main__":
    main()
