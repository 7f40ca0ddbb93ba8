"""JPEG images in TFRecords, decoded in the input pipeline, batched, and learned from.

The layout the TF1 tutorials used for image datasets: each Example holds an image's encoded JPEG
bytes (``image/encoded``) and its label. The pipeline decodes them where TF1 did, in the input
threads, so the trainer receives uint8 arrays::

    read_batch_features(parse_fn=...)    one chunk of records at a time:
        qp.io.parse_example              -> image/encoded bytes, label
        qp.io.decode_batch(decode_jpeg)  -> uint8 [n, 32, 32, 3], on 2 threads
    -> RandomShuffleQueue -> batches of 64 -> a NumPy classifier

The data is real: scikit-learn's 8x8 handwritten digits, upscaled to 32x32, tinted, and saved
as JPEG (lossy: the model learns from what the decoder gives back). Needs the ``[image]`` and
``[demo]`` extras.
"""

import argparse
import io
import os
import sys
import tempfile

import numpy as np
from PIL import Image

import queuepipe as qp
from _shared import MLP

FEATURES = {"image/encoded": qp.io.FixedLenFeature([], qp.string),
            "label": qp.io.FixedLenFeature([], qp.int64)}


def jpeg_bytes(digit, tint):
    """An 8x8 digit (0..16) as a 32x32 RGB JPEG of one colour."""
    gray = np.kron(digit * 15, np.ones((4, 4))).astype(np.uint8)
    rgb = (gray[..., None] * tint[None, None, :]).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, "JPEG", quality=85)
    return out.getvalue()


def parse(serialized):
    """One chunk: its Examples parsed, then its JPEGs decoded on 2 threads."""
    parsed = qp.io.parse_example(serialized, FEATURES)
    images = qp.io.decode_batch(parsed["image/encoded"], qp.io.decode_jpeg, channels=3)
    return {"image": images, "label": parsed["label"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=5)
    args = ap.parse_args(argv)
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(0)
    tints = rng.uniform(0.5, 1.0, size=(len(digits.images), 3))
    rows = {"image/encoded": [jpeg_bytes(d, t) for d, t in zip(digits.images, tints)],
            "label": digits.target}
    held_out = len(digits.target) // 5
    model = MLP(32 * 32 * 3, 10, hidden=64, learning_rate=0.02, seed=0)
    with tempfile.TemporaryDirectory(prefix="jpeg-pipeline-") as tmp:
        train = {k: v[held_out:] for k, v in rows.items()}
        paths = qp.write_shards(train, os.path.join(tmp, "train"), 2, progress=False)
        print(f"wrote {len(train['label'])} JPEG Examples in {len(paths)} shards")
        batches = qp.train.read_batch_features(paths, 64, FEATURES, num_epochs=args.epochs,
                                               parse_fn=parse, seed=0)
        seen = 0
        with batches:
            for batch in batches:
                assert batch["image"].dtype == np.uint8 and batch["image"].shape[1:] == (32, 32, 3)
                x = batch["image"].reshape(len(batch["label"]), -1).astype(np.float32) / 255
                model.train_step(x, batch["label"])
                seen += len(batch["label"])
    print(f"trained on {seen} decoded images ({args.epochs} x {len(train['label'])} expected)")
    test = np.stack([qp.io.decode_jpeg(b, channels=3) for b in rows["image/encoded"][:held_out]])
    x_test = test.reshape(held_out, -1).astype(np.float32) / 255
    accuracy = float(np.mean(model.predict(x_test) == digits.target[:held_out]))
    print(f"held-out accuracy: {accuracy:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
