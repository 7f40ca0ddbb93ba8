"""The golden files in tests/golden/ are TensorFlow's bytes, as ../shared/golden/ holds them.

SHA256SUMS was written from the shared copy when the files were copied; a file changed, lost or
added here fails this test, so no test can pass against files TensorFlow did not write.
"""

import hashlib
import os


def test_the_golden_files_are_the_ones_tensorflow_wrote(golden_dir):
    with open(os.path.join(golden_dir, os.pardir, "SHA256SUMS")) as f:
        expected = dict(reversed(line.split()) for line in f if line.strip())
    got = {}
    for name in sorted(os.listdir(golden_dir)):
        with open(os.path.join(golden_dir, name), "rb") as f:
            got[name] = hashlib.sha256(f.read()).hexdigest()
    assert got == expected
    assert len(expected) == 13  # every file TensorFlow wrote (README.md lists them)
