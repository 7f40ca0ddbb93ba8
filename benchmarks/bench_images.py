"""JPEG records to decoded uint8 batches: queuepipe (Pillow) against tf.data's decode_jpeg.

usage::

    python benchmarks/bench_images.py --peers-python ~/.venvs/queuepipe-peers/bin/python --records 6000
    python benchmarks/bench_images.py --peers-python ~/.venvs/queuepipe-peers/bin/python --augment

With ``--augment`` the images are about 100 KB (375x500 RGB, quality 90) and both pipelines
also resize each to 224x224 (bilinear, TF2's ``tf.image.resize``: ``qp.image.resize`` on the
chunk) and flip it left-right at random (``qp.image.random_flip_left_right``, seeded from the
chunk's bytes; ``tf.image.random_flip_left_right``): float32 batches. The pixel check then
compares the sums of the resized first channel (equal within float rounding).

Writes ``--records`` Examples (``image``: a 96x96 RGB JPEG of quality 90, ``label``) in 4
shards under a temporary folder, then reads them once with each pipeline in its own process
and prints its steady records/s and the ratio:

* ``qp_bulk``: ``read_batch_features`` whose ``parse_fn`` parses a chunk and decodes its images
  with ``qp.io.decode_batch`` (Pillow, on 2 threads: the decoder releases the GIL);
* ``tfdata``: ``TFRecordDataset`` -> ``map(parse_single_example + decode_jpeg,
  num_parallel_calls=AUTOTUNE)`` -> ``batch``, under the peers' interpreter.

tf.data runs with TF's default (fast) IDCT for the speed figures; one more run with
``dct_method="INTEGER_ACCURATE"`` checks that both pipelines decoded every pixel alike (the sum
of every decoded pixel's first channel, equal), and every run checks the record count.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time

BATCH = 128
SIZE = 96

AUGMENTED = 224  # the side images are resized to with --augment
LARGE = (375, 500)  # with --augment: about 100 KB a JPEG

TFDATA = r'''
import json, sys, time
import tensorflow as tf
files, batch, dct, side = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
def parse(record):
    f = tf.io.parse_single_example(record, spec)
    image = tf.io.decode_jpeg(f["image"], channels=3, dct_method=dct)
    if side:
        image = tf.image.random_flip_left_right(tf.image.resize(image, [side, side]), seed=1)
    return image, f["label"]
ds = tf.data.TFRecordDataset(files).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
ds = ds.batch(batch).prefetch(2)
start, first, n, total = time.time(), None, 0, 0
for images, labels in ds:
    if first is None:
        first = time.time()
    n += int(labels.shape[0])
    total += float(tf.reduce_sum(tf.cast(images[..., 0], tf.float64)))
end = time.time()
print(json.dumps({"records": n, "pixel_sum": total, "steady": (n - batch) / (end - first)}))
'''


def write_records(folder, records, seed=0, shape=(SIZE, SIZE), noise=12):
    import numpy as np
    from PIL import Image

    import queuepipe as qp

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:shape[0], 0:shape[1]]
    rows = []
    for i in range(records):
        base = np.stack([x * (1 + i % 3), y * (1 + i % 5), x + y + i], axis=-1) % 256
        pixels = np.clip(base + rng.normal(0, noise, base.shape), 0, 255).astype(np.uint8)
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, "JPEG", quality=90)
        rows.append({"image": out.getvalue(), "label": i % 10})
    return qp.write_shards(rows, folder, 4, progress=False)


def run_queuepipe(files, side):
    import zlib

    import numpy as np

    import queuepipe as qp

    features = {"image": qp.io.FixedLenFeature([], qp.string),
                "label": qp.io.FixedLenFeature([], qp.int64)}

    def parse(serialized):
        parsed = qp.io.parse_example(serialized, features)
        images = qp.io.decode_batch(parsed["image"], qp.io.decode_jpeg, channels=3)
        if side:
            rng = np.random.default_rng([1, zlib.crc32(b"".join(serialized))])
            images = qp.image.random_flip_left_right(qp.image.resize(images, [side, side]),
                                                     seed=rng)
        return {"image": images, "label": parsed["label"]}

    batches = qp.train.read_batch_features(files, BATCH, features, num_epochs=1,
                                           randomize_input=False, parse_fn=parse)
    first, n, total = None, 0, 0
    for batch in batches:
        if first is None:
            first = time.time()
        n += len(batch["label"])
        total += float(batch["image"][..., 0].sum(dtype=np.float64))
    end = time.time()
    return {"records": n, "pixel_sum": total, "steady": (n - BATCH) / (end - first)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=6000)
    ap.add_argument("--peers-python", help="an interpreter with TensorFlow (for tfdata)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--augment", action="store_true",
                    help=f"100 KB images, resized to {AUGMENTED}x{AUGMENTED} and flipped")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    side = AUGMENTED if args.augment else 0
    if args.child:
        print(json.dumps(run_queuepipe(json.loads(args.child), side)))
        return 0
    shape = LARGE if args.augment else (SIZE, SIZE)
    with tempfile.TemporaryDirectory(prefix="bench-images-") as folder:
        files = write_records(folder, args.records, shape=shape, noise=20 if side else 12)
        megabytes = sum(os.path.getsize(f) for f in files) / 1e6
        runs = {"qp_bulk": [], "tfdata": []}
        for _ in range(args.repeat):
            child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                    json.dumps(files)] + ["--augment"] * bool(side),
                                   capture_output=True, text=True, check=True)
            runs["qp_bulk"].append(json.loads(child.stdout.splitlines()[-1]))
            if args.peers_python:
                peer = subprocess.run([args.peers_python, "-c", TFDATA, json.dumps(files),
                                       str(BATCH), "", str(side)], capture_output=True,
                                      text=True, check=True)
                runs["tfdata"].append(json.loads(peer.stdout.splitlines()[-1]))
        accurate = None
        if args.peers_python:
            peer = subprocess.run([args.peers_python, "-c", TFDATA, json.dumps(files),
                                   str(BATCH), "INTEGER_ACCURATE", str(side)],
                                  capture_output=True, text=True, check=True)
            accurate = json.loads(peer.stdout.splitlines()[-1])["pixel_sum"]
    work = f", resized to {side}x{side} and flipped" if side else ""
    print(f"{args.records} JPEG records of {shape[0]}x{shape[1]}x3 ({megabytes:.1f} MB){work}, "
          f"batches of {BATCH}, medians of {args.repeat} runs, {os.cpu_count()} CPUs")
    medians = {}
    for name, rows in runs.items():
        if not rows:
            continue
        rates = sorted(r["steady"] for r in rows)
        medians[name] = rates[len(rates) // 2]
        exact = all(r["records"] == args.records for r in rows)
        print(f"{name:8} steady {medians[name]:10,.0f} records/s  runs "
              f"{', '.join(f'{r:,.0f}' for r in rates)}  every record: {exact}")
    same = True
    if len(medians) == 2:
        ours = runs["qp_bulk"][0]["pixel_sum"]
        same = abs(ours - accurate) <= 1e-6 * abs(accurate) if side else ours == accurate
        print(f"qp_bulk / tfdata: {medians['qp_bulk'] / medians['tfdata']:.2f}x; pixel sums: "
              f"queuepipe {ours}, tf.data with the accurate IDCT {accurate} "
              f"({'equal' if same else 'DIFFERENT'}), with its default fast IDCT "
              f"{runs['tfdata'][0]['pixel_sum']}")
    exact = all(r["records"] == args.records for rows in runs.values() for r in rows)
    return 0 if exact and same else 1


if __name__ == "__main__":
    sys.exit(main())
