"""Writes the starting inputs of the two libFuzzer targets into fuzz/c/seeds/ (see README.md).

frames: the frame corpus of the tests (scanned as it is) and frames described for the target
to write and damage. wire: batches of fuzz/fuzz_example.py's generator (plain and hostile
Examples) with its specs, in fuzz_wire.c's format. sequence: its SequenceExamples with their
spec pairs, in fuzz_wire.c's SequenceExample mode.

    PYTHONPATH=. python fuzz/c/make_seeds.py
"""

import glob
import importlib.util
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KEYS = ["i", "f", "s", "v", "q", "x", "é", ""]  # fuzz_wire.c's KEYS


def _fuzz_example():
    spec = importlib.util.spec_from_file_location(
        "fuzz_example", os.path.join(ROOT, "fuzz", "fuzz_example.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _feature_byte(key, feature, is_list):
    """The spec byte pair fuzz_wire.c reads for one feature (a context one or an Example's,
    or with ``is_list`` a feature list)."""
    import queuepipe as qp
    codes = {qp.int64: 0, qp.float32: 1, qp.string: 2}
    if is_list:  # ragged: a VarLenFeature; else fixed steps, required without allow_missing
        ragged = isinstance(feature, qp.io.VarLenFeature)
        required = not ragged and not feature.allow_missing
    else:
        ragged = not isinstance(feature, qp.io.FixedLenFeature)
        required = not ragged and feature.default_value is None
    size = 1
    for dim in getattr(feature, "shape", ()) or ():
        size *= dim
    return bytes([KEYS.index(key) | codes[feature.dtype] << 3 | ragged << 5 | required << 6
                  | is_list << 7, size & 3])


def wire_input(spec, records):
    """A batch in fuzz_wire.c's format: the spec's first four features, then the records."""
    items = list(spec.items())[:4]
    out = bytearray([len(items) - 1])
    for key, feature in items:
        out += _feature_byte(key, feature, False)
    for record in records:
        if len(record) >= 255:
            out += b"\xff" + record  # the rest of the input: the batch ends here
            break
        out += bytes([len(record)]) + record
    return bytes(out)


def sequence_input(context, lists, record):
    """A SequenceExample in fuzz_wire.c's SequenceExample mode: the spec pair (four features
    at most), then the record."""
    items = [(key, feature, False) for key, feature in context.items()]
    items += [(key, feature, True) for key, feature in lists.items()]
    items = items[:4]
    out = bytearray([0x80 | len(items) - 1])
    for key, feature, is_list in items:
        out += _feature_byte(key, feature, is_list)
    return bytes(out) + record


def frames_inputs(rng):
    """Frame lists for fuzz_frames.c to write: intact, damaged, lying, cut short."""
    inputs = []
    for _ in range(20):
        body = bytearray([rng.choice([0, 2 * 127, 2 * 3])])
        for _ in range(rng.randrange(1, 8)):
            size = rng.choice([0, 1, 7, 60, 200])
            body += bytes([rng.choice([0, 0, 0, 1, 2, 3, 3 | 0x80, 3 | 4 << 2]), size])
            body += rng.randbytes(size)
        if rng.random() < 0.3:
            body += bytes([rng.randrange(1, 30)])
        inputs.append(bytes(body))
    big = bytearray([2 * 127])  # past the CRC's three-stream block size
    for _ in range(70):
        big += bytes([0, 255]) + rng.randbytes(255)
    inputs.append(bytes(big))
    return inputs


def main():
    rng = random.Random(2027)
    frames_dir = os.path.join(HERE, "seeds", "frames")
    wire_dir = os.path.join(HERE, "seeds", "wire")
    sequence_dir = os.path.join(HERE, "seeds", "sequence")
    for directory in (frames_dir, wire_dir, sequence_dir):
        os.makedirs(directory, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "corpus", "frames", "*.bin"))):
        with open(path, "rb") as f:
            raw = b"\xff" + f.read()  # odd first byte: scanned as it is, no limit
        with open(os.path.join(frames_dir, "raw-" + os.path.basename(path)), "wb") as f:
            f.write(raw)
    for index, data in enumerate(frames_inputs(rng)):
        with open(os.path.join(frames_dir, f"built-{index:02d}"), "wb") as f:
            f.write(data)
    fz = _fuzz_example()
    for seed in range(60):
        spec_index, records = fz.random_batch(random.Random(seed))
        with open(os.path.join(wire_dir, f"batch-{seed:03d}"), "wb") as f:
            f.write(wire_input(fz.SPECS[spec_index], records))
    for seed in range(60):
        index, record = fz.random_sequence(random.Random(seed))
        with open(os.path.join(sequence_dir, f"sequence-{seed:03d}"), "wb") as f:
            f.write(sequence_input(*fz.SEQUENCE_SPECS[index], record))


if __name__ == "__main__":
    main()
