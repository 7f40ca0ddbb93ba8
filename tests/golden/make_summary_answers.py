"""Records what TensorFlow writes for tests/summary_program.py (run once, with TF 2.21):

    ~/.venvs/queuepipe-peers/bin/python tests/golden/make_summary_answers.py

Writes tests/golden/compat-tf2.21/summaries.json: what the program saw, and every summary
event of the event file TF's FileWriter wrote (read with TF's own summary_iterator);
tests/test_compat_summary.py compares queuepipe.compat.v1's with it. Not part of the test run
(TensorFlow is not a dependency of queuepipe or its tests).
"""

import glob
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tensorflow.compat.v1 as tf  # noqa: E402

import summary_program  # noqa: E402


def main():
    tf.disable_eager_execution()
    with tempfile.TemporaryDirectory() as logdir:
        answers = {"tensorflow": tf.__version__, "seen": summary_program.run(tf, logdir)}
        (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
        answers["events"] = [summary_program.encode_event(event)
                             for event in tf.train.summary_iterator(path)
                             if event.HasField("summary")]
    out = os.path.join(HERE, "compat-tf2.21", "summaries.json")
    with open(out, "w") as f:
        json.dump(answers, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(answers['events'])} events to {out}")


if __name__ == "__main__":
    main()
