"""queuepipe.compat.v1 gives TensorFlow's answers: each case of tests/compat_cases.py (a TF1
graph: static shapes and names read at build time, values of each ``sess.run``, or the class
of the error) compared with what TensorFlow 2.21 gave for it, recorded once in
tests/golden/compat-tf2.21/answers.json by tests/golden/make_compat_answers.py.
"""

import json
import os

import pytest

import queuepipe.compat.v1 as tf

from compat_cases import CASES, outcome, write_inputs

ANSWERS = os.path.join(os.path.dirname(__file__), "golden", "compat-tf2.21", "answers.json")
with open(ANSWERS) as _f:
    TF_ANSWERS = json.load(_f)


def test_every_case_has_tensorflows_answer():
    assert sorted(CASES) == sorted(k for k in TF_ANSWERS if k != "tensorflow")
    assert TF_ANSWERS["tensorflow"] == "2.21.0"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("compat_inputs"))
    write_inputs(tf, directory)
    return directory


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_answer_is_tensorflows(name, inputs):
    assert outcome(tf, CASES[name], inputs) == TF_ANSWERS[name]
