"""Memory stays bounded by the queue capacities, whatever the size of the dataset.

The same shuffle_batch pipeline (4 shards, 2 readers, a 64-record reading queue, a
256-record shuffle queue) reads 2,000 and then 20,000 records of about 4 KB (every shard
larger than the 1 MiB read-ahead); tracemalloc's peak over each run (NumPy's buffers
included) must not grow with the dataset.
"""

import tracemalloc

import numpy as np


import queuepipe as qp
from stress_util import Shards, reading_stage

SMALL, LARGE = 2_000, 20_000


def _peak(tmp_path, records):
    folder = tmp_path / str(records)
    folder.mkdir()
    shards = Shards(folder, 4, records // 4, payload=4000)
    pipeline = qp.Pipeline()
    queue, _ = reading_stage(shards, pipeline, epochs=1, readers=2, reader_threads=2,
                             chunk=32, seed=1, capacity=64)
    with pipeline.as_default():
        batches = qp.train.shuffle_batch(queue.dequeue, 32, capacity=256,
                                         min_after_dequeue=128, num_threads=2, seed=1,
                                         allow_smaller_final_batch=True)
    seen = np.zeros(records, dtype=np.int64)  # allocated before tracing: it grows with n
    tracemalloc.start()
    try:
        with batches:
            for ids, _ in batches:
                np.add.at(seen, ids, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (seen == 1).all(), f"records lost or repeated: {np.flatnonzero(seen != 1)[:10]}"
    return peak


def test_peak_memory_does_not_grow_with_the_dataset(tmp_path):
    small = _peak(tmp_path, SMALL)
    large = _peak(tmp_path, LARGE)
    print(f"tracemalloc peak: {SMALL} records {small / 2**20:.2f} MiB, "
          f"{LARGE} records {large / 2**20:.2f} MiB")
    # Anything holding every record would add about 80 MiB (20,000 x 4 KB) to the larger run.
    assert large < 2 * small, (small, large)
