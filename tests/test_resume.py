"""read_batch_features' state: resuming where a run stopped, the same batches for the same
seed whatever the threads, and the global shuffle.

Every pipeline here reads 4 shards of ``RECORDS`` records (ids 0..RECORDS-1, a label, a token
list of 0 to 6 ids) for two epochs; a run is the list of its batches' ids.
"""

import functools
import dis
import gc
import gzip
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections import Counter

import numpy as np
import pytest

import queuepipe as qp
from helpers import interrupting_at, wait_until
from queuepipe.errors import InvalidArgumentError
from queuepipe.features import read_batch_features
from queuepipe.permutation import Permutation
from queuepipe.shards import write_shards

RECORDS = 600
EPOCHS = 2
FEATURES = {"id": qp.io.FixedLenFeature([], qp.int64),
            "label": qp.io.FixedLenFeature([], qp.int64),
            "tokens": qp.io.VarLenFeature(qp.int64)}
EVERY_RECORD = Counter(list(range(RECORDS)) * EPOCHS)


def tokens_of(i):
    return np.arange(i, i + i % 7, dtype=np.int64)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    directory = tmp_path_factory.mktemp("resume")
    records = [{"id": i, "label": i * 10 // RECORDS, "tokens": tokens_of(i)}
               for i in range(RECORDS)]  # labels in sorted order: 0 for the first tenth...
    return write_shards(records, str(directory / "part"), num_shards=4, progress=False)


def pipeline(shards, threads=2, seed=0, state=None, features=FEATURES, **kwargs):
    options = dict(num_epochs=EPOCHS, seed=seed, num_enqueue_threads=threads,
                   queue_capacity=120, read_batch_size=25, state=state)
    options.update(kwargs)
    return read_batch_features(shards, 16, features, **options)


def run(shards, stop_after=None, **kwargs):
    """The ids of each batch, and (with ``stop_after``) the state after that many batches,
    through JSON as a user would store it."""
    ids = []
    with qp.Pipeline().as_default(), pipeline(shards, **kwargs) as batches:
        for batch in batches:
            check_tokens(batch)
            ids.append(batch["id"].tolist())
            if len(ids) == stop_after:
                return ids, json.loads(json.dumps(batches.state_dict()))
    return ids, None


def column(files, key, batch_size, spec, stop_after=None, **options):
    """The values of ``key``, batch after batch; with ``stop_after`` values, also the state
    there."""
    got = []
    with qp.Pipeline().as_default(), \
            read_batch_features(files, batch_size, spec, **options) as batches:
        for batch in batches:
            got += batch[key].tolist()
            if len(got) == stop_after:
                return got, batches.state_dict()
    return got, None


def check_tokens(batch):
    """Each row's tokens are its own record's: rows and sparse values stayed together."""
    if "tokens" not in batch:  # (a spec without them)
        return
    tokens = batch["tokens"]
    for row, i in enumerate(batch["id"].tolist()):
        np.testing.assert_array_equal(tokens.values[tokens.indices[:, 0] == row], tokens_of(i))


def flat(runs):
    return [i for batch in runs for i in batch]


# -- the same seed, the same batches --------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"randomize_input": False}, {"shuffle": "global"}],
                         ids=["buffer", "in order", "global"])
def test_a_seed_gives_the_same_batches_whatever_the_threads(shards, kwargs):
    one, _ = run(shards, threads=1, **kwargs)
    assert Counter(flat(one)) == EVERY_RECORD
    for threads in (2, 4):
        assert run(shards, threads=threads, **kwargs)[0] == one, threads


class _OpenQueue:
    name = "turns"

    def is_closed(self):
        return False


class _ExitHook(threading.Condition):
    """A Condition that runs ``hook`` once, after its ``skip + 1``-th lock exit from now."""

    def arm(self, skip, hook):
        self._skip, self._hook = skip, hook

    def __exit__(self, *exc):
        result = super().__exit__(*exc)
        hook = getattr(self, "_hook", None)
        if hook is not None:
            if self._skip == 0:
                self._hook = None
                hook()
            else:
                self._skip -= 1
        return result


def test_a_seeded_turn_parked_as_the_drainer_stops_is_still_run():
    # A thread parks chunks whose turn has not come; the thread that parks the next ticket runs
    # it and the parked ones after it. The drainer found the next ticket missing in one locked
    # step and cleared its flag in a later one: a ticket parked between the two saw the flag
    # set and was left for nobody, and once the parked chunks reached their limit every thread
    # waited for that turn (the seeded 4-thread test hung once in a full run).
    from queuepipe.features import _Turns

    turns, done = _Turns(0, _OpenQueue(), limit=4), []
    turns._changed = _ExitHook()

    def run_first():
        done.append(0)
        # between the drainer's step that finds ticket 1 missing and whatever comes next,
        # ticket 1 is parked, as another thread would park it
        turns._changed.arm(1, lambda: turns.put(1, functools.partial(done.append, 1)))

    turns.put(0, run_first)
    assert done == [0, 1]


def test_another_seed_gives_other_batches(shards):
    assert run(shards, seed=0)[0] != run(shards, seed=1)[0]


# -- resuming -------------------------------------------------------------------------------


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("kwargs", [{}, {"shuffle": "global"}, {"randomize_input": False}],
                         ids=["buffer", "global", "in order"])
def test_a_seeded_resume_gives_the_rest_of_the_uninterrupted_run(shards, threads, kwargs):
    whole, _ = run(shards, threads=threads, **kwargs)
    rng = np.random.default_rng(threads)
    for k in sorted(rng.choice(len(whole) - 1, size=3, replace=False) + 1):
        first, state = run(shards, stop_after=k, threads=threads, **kwargs)
        rest, _ = run(shards, state=state, threads=5 - threads, **kwargs)  # other threads
        assert first + rest == whole, k


@pytest.mark.parametrize("saved_on_core", [True, False])
def test_a_state_resumes_on_the_other_path_whose_default_chunk_differs(shards, monkeypatch,
                                                                       saved_on_core):
    # (a second reading: the core's default chunk, 2,048 short records, against the pure
    # path's 512 made a state of the core refused on the pure path, "cursor 'skip' is 2048,
    # out of [0, 512]"); here 100 records against 25
    from queuepipe import features

    monkeypatch.setattr(features, "_CHUNK_RECORDS", 25)
    monkeypatch.setattr(features, "_MOST_CHUNK_RECORDS", 100)

    def on_core(core):
        monkeypatch.setattr(features, "core_available", lambda: core)

    on_core(True)
    whole, _ = run(shards, read_batch_size=None)
    on_core(saved_on_core)
    first, state = run(shards, stop_after=30, read_batch_size=None)
    assert max(count for *_, count, _ in state["plan"]["open"]) > 25 or not saved_on_core
    on_core(not saved_on_core)
    rest, _ = run(shards, state=state, read_batch_size=None)
    assert first + rest == whole
    assert Counter(flat(first + rest)) == EVERY_RECORD
    # a read_batch_size given is the pipeline's: a state of bigger chunks is another's
    if saved_on_core:
        with pytest.raises(InvalidArgumentError, match="not this pipeline.s"):
            run(shards, state=state, read_batch_size=25)


@pytest.fixture
def parsed_before(monkeypatch):
    """Records of any length parsed a chunk at a time before the queue, as long ones are."""
    from queuepipe import features

    monkeypatch.setattr(features, "_PARSED_BEFORE_BYTES", 1)


FIXED = {key: spec for key, spec in FEATURES.items() if key != "tokens"}


def test_records_parsed_before_the_queue_give_the_same_batches(shards, parsed_before):
    # FixedLenFeatures: the queue holds the parsed columns, and the batches are those of the
    # records parsed after it; with a VarLenFeature the records stay serialized
    from queuepipe import features

    with qp.Pipeline().as_default(), pipeline(shards, features=FIXED) as batches:
        next(batches)
        assert "label" in batches.queue.names
        assert features.SERIALIZED not in batches.queue.names
    with qp.Pipeline().as_default(), pipeline(shards) as batches:
        next(batches)
        assert features.SERIALIZED in batches.queue.names
    before, _ = run(shards, features=FIXED)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(features, "_PARSED_BEFORE_BYTES", 1 << 40)
        after, _ = run(shards, features=FIXED)
    assert before == after


@pytest.mark.parametrize("threads", [1, 2])
def test_records_parsed_before_the_queue_resume_as_the_uninterrupted_run(shards, threads,
                                                                        parsed_before):
    whole, _ = run(shards, threads=threads, features=FIXED)
    for k in (1, 17, len(whole) - 1):
        first, state = run(shards, stop_after=k, threads=threads, features=FIXED)
        rest, _ = run(shards, state=state, threads=3 - threads, features=FIXED)
        assert first + rest == whole, k


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_an_unseeded_resume_delivers_every_record_once(shards, threads):
    for k in (1, 9, 60):
        first, state = run(shards, stop_after=k, seed=None, threads=threads)
        rest, _ = run(shards, state=state, seed=None, threads=threads)
        assert Counter(flat(first + rest)) == EVERY_RECORD, k


def test_a_resumed_run_can_be_saved_and_resumed_again(shards):
    whole, _ = run(shards)
    first, state = run(shards, stop_after=10)
    second, state = run(shards, stop_after=20, state=state)
    third, _ = run(shards, state=state)
    assert first + second + third == whole


def test_the_state_stays_small_and_names_positions_not_data(shards):
    _, state = run(shards, stop_after=30)
    text = json.dumps(state)
    assert len(text) < 4000
    assert "tokens" not in text and b"\x08" not in text.encode()
    plan = state["plan"]
    assert plan["ticket"] > 0 and plan["open"]


def test_resuming_reads_compressed_files_and_a_parse_fn_without_keys(tmp_path):
    paths = []
    for shard in range(2):
        path = str(tmp_path / f"part-{shard}.tfrecord.gz")
        with qp.TFRecordWriter(path, "GZIP") as writer:
            for i in range(shard * 100, shard * 100 + 100):
                writer.write(qp.make_example({"id": i}).SerializeToString())
        paths.append(path)
    spec = {"id": qp.io.FixedLenFeature([], qp.int64)}
    options = dict(reader=functools.partial(qp.TFRecordReader, options="GZIP"), num_epochs=1,
                   queue_capacity=50, read_batch_size=16, seed=3,
                   parse_fn=lambda values: qp.io.parse_example(values, spec))

    whole, _ = column(paths, "id", 8, spec, **options)
    first, state = column(paths, "id", 8, spec, stop_after=56, **options)
    assert first + column(paths, "id", 8, spec, state=state, **options)[0] == whole
    assert sorted(whole) == list(range(200))


def test_resuming_a_reader_that_cannot_seek_reads_up_to_its_position(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("".join(f"{i}\n" for i in range(90)))
    options = dict(reader=qp.TextLineReader, num_epochs=1, queue_capacity=30,
                   read_batch_size=7, seed=0, parse_fn=lambda lines: {"n": lines.astype(int)})

    whole, _ = column(str(path), "n", 5, {}, **options)
    first, state = column(str(path), "n", 5, {}, stop_after=40, **options)
    rest, _ = column(str(path), "n", 5, {}, state=state, **options)
    assert first + rest == whole and sorted(whole) == list(range(90))


def test_a_state_from_another_pipeline_is_refused(shards):
    _, state = run(shards, stop_after=3)
    with pytest.raises(InvalidArgumentError, match=r"saved for 4 files from .* in order "
                                                   r"'files'; this pipeline has 3 from"):
        pipeline(shards[:3], state=state)
    with pytest.raises(InvalidArgumentError, match="in order 'global'"):
        pipeline(shards, state=state, shuffle="global")
    with pytest.raises(InvalidArgumentError, match="not a state of read_batch_features"):
        pipeline(shards, state={"plan": {"format": "something else"}})


def test_a_state_is_loaded_before_the_first_batch(shards):
    _, state = run(shards, stop_after=3)
    with qp.Pipeline().as_default(), pipeline(shards) as batches:
        batches.dequeue()
        with pytest.raises(RuntimeError, match="before the first batch"):
            batches.load_state_dict(state)


def test_a_changed_file_is_named_when_resuming(shards, tmp_path):
    copies = []
    for path in shards:
        copy = tmp_path / os.path.basename(path)
        copy.write_bytes(open(path, "rb").read())
        copies.append(str(copy))
    _, state = run(copies, stop_after=5, randomize_input=False)
    with open(copies[0], "r+b") as f:  # the first file loses its last records
        f.truncate(os.path.getsize(copies[0]) // 3)
    with pytest.raises(Exception, match=r"shard-00000-of-00004.tfrecord.* (holds \d+ records "
                                        r"from position \d+ on where the state counted \d+"
                                        r"|at offset \d+: it holds \d+ bytes)"):
        run(copies, state=state, randomize_input=False)


def test_unseeded_batching_functions_with_a_producer_have_no_state():
    with qp.Pipeline().as_default():
        for batches in (qp.train.batch(lambda: 1, 2, num_threads=2),
                        qp.train.shuffle_batch(lambda: 1, 2, 10, 2)):
            with pytest.raises(TypeError, match=r"have no state: an unseeded batching function"
                                                r".*give a seed .*or use read_batch_features"):
                batches.state_dict()
            batches.close()


# -- the batching functions with a producer, seeded -------------------------------------------


def shuffled_ids(shards, threads, join=0, stop_after=None, state=None):
    """``shuffle_batch`` (or with ``join`` readers ``shuffle_batch_join``) over a seeded
    string_input_producer and TFRecordReaders: each batch's ids, and the state."""
    with qp.Pipeline().as_default():
        files = qp.train.string_input_producer(shards, num_epochs=EPOCHS, seed=3)

        def producer():
            reader = qp.TFRecordReader()
            return lambda: qp.io.parse_single_example(reader.read(files)[1], FEATURES)["id"]

        options = dict(batch_size=16, capacity=140, min_after_dequeue=100, seed=1,
                       allow_smaller_final_batch=True)
        batches = qp.train.shuffle_batch_join([producer() for _ in range(join)], **options) \
            if join else qp.train.shuffle_batch(producer(), num_threads=threads, **options)
        return taken(batches, stop_after, state)


def taken(batches, stop_after=None, state=None):
    """Each batch as a list, from ``state`` if given; with ``stop_after`` batches, also the
    state there, through JSON as a user would store it."""
    if state is not None:
        batches.load_state_dict(state)
    got = []
    with batches:
        for batch in batches:
            got.append(batch.tolist())
            if len(got) == stop_after:
                return got, json.loads(json.dumps(batches.state_dict()))
    return got, None


def test_a_seeded_shuffle_batch_gives_the_same_batches_for_any_num_threads(shards):
    one, _ = shuffled_ids(shards, 1)
    assert Counter(flat(one)) == EVERY_RECORD
    assert flat(one)[:RECORDS] != sorted(flat(one)[:RECORDS])
    for threads in (2, 4):
        assert shuffled_ids(shards, threads)[0] == one, threads


def test_a_seeded_shuffle_batch_join_repeats_its_interleaving(shards):
    first, _ = shuffled_ids(shards, 0, join=3)
    assert Counter(flat(first)) == EVERY_RECORD
    assert all(shuffled_ids(shards, 0, join=3)[0] == first for _ in range(2))


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_a_seeded_shuffle_batch_resumes_by_replaying_its_batches(shards, threads):
    whole, _ = shuffled_ids(shards, threads)
    for k in sorted(np.random.default_rng(threads).choice(len(whole) - 1, 2, replace=False)):
        first, state = shuffled_ids(shards, threads, stop_after=int(k) + 1)
        assert state == {"format": "queuepipe.batches/replay-1", "batches": int(k) + 1,
                         "batch_size": 16}
        rest, _ = shuffled_ids(shards, 5 - threads, state=state)
        assert first + rest == whole


def test_a_replay_state_of_another_batch_size_is_refused():
    with qp.Pipeline().as_default():
        batches = qp.train.shuffle_batch(lambda: 1, 4, 10, 2, seed=0)
        with pytest.raises(InvalidArgumentError, match=r"not a state of these batches "
                                                       r"\(queuepipe.batches/replay-1, "
                                                       r"batch_size 4\)"):
            batches.load_state_dict({"format": "queuepipe.batches/replay-1", "batches": 3,
                                     "batch_size": 8})
        batches.close()


# -- a hard kill --------------------------------------------------------------------------

CHILD = """
import json, os, sys
sys.path.insert(0, {tests!r})
import test_resume as t
shards, save_at, state_file, out = json.loads(sys.argv[1])
state = json.load(open(state_file)) if os.path.exists(state_file) else None
got = []
with t.pipeline(shards, state=state) as batches:
    for batch in batches:
        got.append(batch["id"].tolist())
        if len(got) == save_at and state is None:
            with open(state_file + ".tmp", "w") as f:
                json.dump({{"state": batches.state_dict(), "got": got}}, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(state_file + ".tmp", state_file + ".saved")
            print("saved", flush=True)
            sys.stdin.read()   # blocks, batches half-read, until the parent kills it
json.dump(got, open(out, "w"))
"""


def test_a_process_killed_after_a_save_resumes_exactly(shards, tmp_path):
    whole, _ = run(shards)
    state_file, out = str(tmp_path / "state.json"), str(tmp_path / "rest.json")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(tests=os.path.dirname(__file__)))
    args = [sys.executable, str(script), json.dumps([shards, 13, state_file, out])]
    child = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "saved\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdin.close()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    saved = json.load(open(state_file + ".saved"))
    json.dump(saved["state"], open(state_file, "w"))
    subprocess.run(args, check=True, timeout=50)
    assert saved["got"] + json.load(open(out)) == whole


# -- the global shuffle ---------------------------------------------------------------------


def test_the_global_shuffle_visits_every_record_once_per_epoch_in_new_orders(shards):
    with qp.Pipeline().as_default(), pipeline(shards, shuffle="global", num_epochs=3) as b:
        ids = flat(batch["id"].tolist() for batch in b)
    epochs = [ids[i * RECORDS:(i + 1) * RECORDS] for i in range(3)]
    assert all(sorted(epoch) == list(range(RECORDS)) for epoch in epochs)
    assert epochs[0] != epochs[1] != epochs[2] != epochs[0]


def test_the_global_shuffle_mixes_sorted_labels_where_a_buffer_cannot(tmp_path):
    """One file of records in label order (0 for the first tenth...). The mean place in
    the epoch of each label's records: a uniform shuffle gives 0.5 for every label."""
    records = [{"id": i, "label": i * 10 // RECORDS, "tokens": tokens_of(i)}
               for i in range(RECORDS)]
    one = write_shards(records, str(tmp_path / "sorted"), num_shards=1, progress=False)

    def mean_places(**kwargs):
        with qp.Pipeline().as_default(), pipeline(one, num_epochs=1, **kwargs) as b:
            labels = np.concatenate([batch["label"] for batch in b])
        places = np.arange(len(labels)) / len(labels)
        return np.array([places[labels == label].mean() for label in range(10)])

    buffer, whole = mean_places(), mean_places(shuffle="global")
    assert np.abs(whole - 0.5).max() < 0.15
    assert np.abs(buffer - 0.5).max() > 0.35  # a 60-record buffer keeps the sorted order


def test_the_global_shuffle_needs_an_index_and_plain_tfrecords(shards, tmp_path):
    bare = tmp_path / "bare.tfrecord"
    bare.write_bytes(open(shards[0], "rb").read())
    with pytest.raises(InvalidArgumentError, match=r"needs a .index beside every file: "
                                                   r"'.*bare.tfrecord.index' is missing"):
        pipeline([str(bare)], shuffle="global")
    with gzip.open(tmp_path / "z.tfrecord.gz", "wb"):
        pass
    with pytest.raises(InvalidArgumentError, match="needs an uncompressed TFRecordReader"):
        pipeline([str(tmp_path / "z.tfrecord.gz")], shuffle="global",
                 reader=functools.partial(qp.TFRecordReader, options="GZIP"))
    with pytest.raises(InvalidArgumentError, match="shuffle must be one of"):
        pipeline(shards, shuffle="everything")


def test_the_global_shuffle_names_a_damaged_record(shards, tmp_path):
    copy = tmp_path / "copy.tfrecord"
    data = bytearray(open(shards[0], "rb").read())
    data[40] ^= 0xFF  # inside the first record's data
    copy.write_bytes(bytes(data))
    (tmp_path / "copy.tfrecord.index").write_bytes(open(shards[0] + ".index", "rb").read())
    with pytest.raises(qp.errors.DataLossError, match=r"corrupted record at 12: data checksum "
                                                      r"mismatch in file '.*copy.tfrecord'"):
        run([str(copy)], shuffle="global")


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 1000, 4097])
def test_the_permutation_is_a_seeded_bijection(n):
    image = Permutation(n, [7, 1])(np.arange(n))
    assert sorted(image.tolist()) == list(range(n))
    np.testing.assert_array_equal(image, Permutation(n, [7, 1])(np.arange(n)))
    if n > 16:
        assert not np.array_equal(image, Permutation(n, [7, 2])(np.arange(n)))
        assert not np.array_equal(image, np.arange(n))


def test_a_stopped_pipeline_waiting_for_its_turn_leaves_no_thread(shards):
    with qp.Pipeline().as_default():
        batches = pipeline(shards, threads=4, queue_capacity=40)
        batches.dequeue()  # threads now wait for room, and for their turn behind them
        wait_until(lambda: batches.queue.size() == 40, "the queue is full")
        batches.close()


def test_an_endless_input_of_empty_files_ends_instead_of_spinning(tmp_path):
    paths = [str(tmp_path / f"empty-{i}.tfrecord") for i in range(2)]
    for path in paths:
        open(path, "wb").close()
    with qp.Pipeline().as_default(), read_batch_features(paths, 4, FEATURES) as batches:
        assert list(batches) == []


def test_a_hand_built_pipeline_reads_the_global_order_by_keys(shards):
    with qp.Pipeline().as_default():
        keys = qp.train.record_position_producer(shards, num_epochs=2, seed=5, capacity=64)
        reader = qp.KeyedRecordReader()

        def example():
            key, serialized = reader.read(keys)
            return key, qp.io.parse_single_example(serialized, FEATURES)["id"]

        with qp.train.batch(example, 50, allow_smaller_final_batch=True) as batches:
            got = [(key, i) for key_batch, ids in batches
                   for key, i in zip(key_batch.tolist(), ids.tolist())]
    ids = [i for _, i in got]
    assert Counter(ids) == EVERY_RECORD
    assert ids[:RECORDS] != ids[RECORDS:] and ids[:RECORDS] != sorted(ids[:RECORDS])
    with qp.Pipeline().as_default(), pipeline(shards, threads=1, shuffle="global", seed=5,
                                              num_epochs=2) as batches:
        assert flat(b["id"].tolist() for b in batches) == ids  # read_batch_features' order
    first_epoch_keys = {key for key, _ in got[:RECORDS]}
    assert len(first_epoch_keys) == RECORDS
    assert {os.fsdecode(key.rsplit(b":", 1)[0]) for key in first_epoch_keys} == set(shards)


def test_a_keyed_reader_names_a_bad_key_and_a_record_cut_short(shards, tmp_path):
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(open(shards[0], "rb").read()[:30])
    # A length damaged into 2**64 - 1 bytes, and one crafted so (its checksum matching): before
    # the fix the reader asked for that many bytes and raised a bare MemoryError.
    huge = (2 ** 64 - 1).to_bytes(8, "little")
    damaged, crafted = tmp_path / "damaged.tfrecord", tmp_path / "crafted.tfrecord"
    record = open(shards[0], "rb").read()[:100]
    damaged.write_bytes(huge + record[8:])
    crafted.write_bytes(huge + qp.records.masked_crc32c(huge).to_bytes(4, "little") +
                        record[12:])
    for item, error, message in (
            (b"no-offset", InvalidArgumentError, r"a work item is a record's key"),
            (f"{cut}:0".encode(), qp.errors.DataLossError,
             r"truncated record at 0: the record needs \d+ bytes, the file holds 30 from there, "
             r"in file '.*cut.tfrecord'"),
            (f"{damaged}:0".encode(), qp.errors.DataLossError,
             r"corrupted record at 0: length checksum mismatch in file '.*damaged.tfrecord'"),
            (f"{crafted}:0".encode(), qp.errors.DataLossError,
             rf"truncated record at 0: the record needs {2 ** 64 + 15} bytes, the file holds "
             r"100 from there, in file '.*crafted.tfrecord'")):
        with qp.Pipeline().as_default():
            queue = qp.FIFOQueue(4, [qp.string], [()])
            queue.enqueue(item)
            with pytest.raises(error, match=message):
                qp.KeyedRecordReader().read(queue)


def test_a_state_saved_before_the_first_batch_of_a_resumed_run_is_the_loaded_one(shards):
    whole, _ = run(shards)
    first, state = run(shards, stop_after=8)
    with qp.Pipeline().as_default(), pipeline(shards, state=state) as batches:
        again = json.loads(json.dumps(batches.state_dict()))
    assert again == state
    assert first + run(shards, state=again)[0] == whole


def test_a_replay_state_needs_repeatable_producers_upstream(shards):
    with qp.Pipeline().as_default():
        files = qp.train.string_input_producer(shards, num_epochs=1, name="unseeded_files")
        reader = qp.TFRecordReader()
        batches = qp.train.shuffle_batch(lambda: reader.read(files)[1], 4, 20, 5, seed=0)
        with pytest.raises(TypeError, match=r"producer 'unseeded_files' upstream shuffles "
                                            r"without a seed"):
            batches.state_dict()
        batches.close()


def test_a_one_thread_batch_resumes_by_replay(shards):
    def ids(state=None, stop_after=None):
        with qp.Pipeline().as_default():
            files = qp.train.string_input_producer(shards, num_epochs=1, shuffle=False)
            reader = qp.TFRecordReader()
            batches = qp.train.batch(lambda: reader.read(files)[0], 7,
                                     allow_smaller_final_batch=True)
            return taken(batches, stop_after, state)

    whole, _ = ids()
    first, state = ids(stop_after=30)
    assert first + ids(state=state)[0] == whole and len(flat(whole)) == RECORDS


@pytest.mark.parametrize("damaged", [3, 20])
def test_indexed_records_of_every_length_are_checked(damaged):
    """Records read by offset: 16 of one length (checked as a run) and 8 of lengths of
    their own (checked one by one); a flipped data byte is named in either."""
    from queuepipe._frames import frame, unframe_many

    data = [b"r%02d" % i + b"x" * (0 if i < 16 else i) for i in range(24)]
    frames = [frame(record) for record in data]
    lengths = np.array([len(f) for f in frames])
    where = lambda i: ("f", 100 * i)  # noqa: E731
    np.testing.assert_array_equal(unframe_many(frames, lengths, where), np.array(data, object))
    broken = bytearray(frames[damaged])
    broken[14] ^= 1
    frames[damaged] = bytes(broken)
    with pytest.raises(qp.errors.DataLossError,
                       match=rf"^corrupted record at {100 * damaged + 12}: data checksum "):
        unframe_many(frames, lengths, where)


# -- the global shuffle's files -------------------------------------------------------------


def descriptors_of(paths):
    """How many of this process's descriptors are open on one of ``paths``."""
    wanted = {os.path.realpath(path) for path in paths}
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") in wanted
        except FileNotFoundError:  # the listing's own descriptor, closed since
            pass
    return count


def run_script(script, *args):
    """Runs ``script`` in a fresh interpreter (this tree's queuepipe); its output and code."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(qp.__file__)))
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=50, env=env)
    return done.returncode, done.stdout + done.stderr


def test_the_global_shuffle_reads_more_shards_than_the_process_may_open(tmp_path):
    # Before the fix every shard stayed mapped with its descriptor: 100 shards against a
    # limit of 48 failed with "Too many open files".
    records = [{"id": i, "label": 0, "tokens": tokens_of(i)} for i in range(400)]
    write_shards(records, str(tmp_path / "many"), num_shards=100, progress=False)
    code, output = run_script(
        "import glob, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (48, resource.getrlimit("
        "resource.RLIMIT_NOFILE)[1]))\n"
        "import queuepipe as qp\n"
        "from queuepipe.features import read_batch_features\n"
        "spec = {'id': qp.io.FixedLenFeature([], qp.int64)}\n"
        "files = sorted(glob.glob(sys.argv[1] + '/*.tfrecord'))\n"
        "with read_batch_features(files, 50, spec, num_epochs=2, shuffle='global', seed=1,\n"
        "                         read_batch_size=100, num_enqueue_threads=3) as batches:\n"
        "    ids = sorted(i for b in batches for i in b['id'].tolist())\n"
        "assert ids == sorted(list(range(400)) * 2), ids[:10]\n"
        "print('read', len(ids))\n", str(tmp_path / "many"))
    assert code == 0 and "read 800" in output, output


def test_a_shard_truncated_while_the_global_shuffle_reads_it_is_named(shards, tmp_path):
    # Before the fix the shard was memory-mapped: reading past its new end killed the
    # process with SIGBUS.
    copy = tmp_path / "shrinks.tfrecord"
    copy.write_bytes(open(shards[0], "rb").read())
    (tmp_path / "shrinks.tfrecord.index").write_bytes(open(shards[0] + ".index", "rb").read())
    code, output = run_script(
        "import os, sys\n"
        "import queuepipe as qp\n"
        "from queuepipe.features import read_batch_features\n"
        "spec = {'id': qp.io.FixedLenFeature([], qp.int64)}\n"
        "with read_batch_features([sys.argv[1]], 4, spec, num_epochs=20, shuffle='global',\n"
        "                         seed=1, queue_capacity=8, read_batch_size=4,\n"
        "                         num_enqueue_threads=1) as batches:\n"
        "    batches.dequeue()\n"
        "    os.truncate(sys.argv[1], 100)\n"
        "    try:\n"
        "        for batch in batches:\n"
        "            pass\n"
        "    except qp.errors.DataLossError as e:\n"
        "        print('DataLossError:', e)\n", str(copy))
    assert code == 0, output
    assert re.search(r"DataLossError: truncated record at \d+: the record needs \d+ bytes, "
                     r"the file holds \d+ from there, in file '.*shrinks.tfrecord'", output), \
        output


def test_closing_a_global_shuffle_from_another_thread_while_it_is_read(shards):
    # Before the fix close() unmapped the files while runner threads sliced them: the
    # reading loop raised BufferError (2 runs in 3).
    for _ in range(6):
        with qp.Pipeline().as_default():
            batches = pipeline(shards, shuffle="global", num_epochs=None, threads=3,
                               queue_capacity=32, read_batch_size=8)
            batches.dequeue()
            closer = threading.Thread(target=batches.close, name="test/closer")
            closer.start()
            try:
                for batch in batches:  # endless: ended by the close (BufferError before)
                    check_tokens(batch)
            except (qp.errors.CancelledError, qp.errors.OutOfRangeError):
                pass
            finally:
                closer.join()
                batches.close()


@pytest.mark.parametrize("kwargs", [{}, {"randomize_input": False}], ids=["buffer", "in order"])
def test_a_plan_counts_a_record_cut_short_for_good_once_per_epoch(shards, tmp_path, caplog,
                                                                    kwargs):
    # The plan drives its reader file by file, never through a queue's end: before the fix
    # the record cut short was remembered as a writer's unfinished one and never counted.
    data = open(shards[0], "rb").read()
    entries = qp.shards.read_index(shards[0] + ".index")
    last = int(entries[-1, 0])
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(data[:last + 20])  # the last record cut short for good
    readers = []

    def make_reader():
        readers.append(qp.TFRecordReader(corrupt_records="skip"))
        return readers[-1]

    with caplog.at_level("WARNING", logger="queuepipe.records"), qp.Pipeline().as_default(), \
            read_batch_features([str(cut)], 16, FEATURES, reader=make_reader, num_epochs=2,
                                seed=0, read_batch_size=25, **kwargs) as batches:
        ids = flat(batch["id"].tolist() for batch in batches)
    assert len(ids) == 2 * (len(entries) - 1)
    assert readers[0].num_records_skipped() == 2
    assert [f"truncated record at {last}" in m for m in caplog.messages] == [True, True]


def test_the_global_shuffle_skips_and_counts_damaged_records(shards, tmp_path):
    copy = tmp_path / "copy.tfrecord"
    data = bytearray(open(shards[0], "rb").read())
    entries = qp.shards.read_index(shards[0] + ".index")
    for offset, _ in entries[[3, 40, 41]].tolist():
        data[offset + 14] ^= 0xFF  # inside those records' data
    data[int(entries[90, 0])] ^= 0xFF  # a length: its checksum fails
    copy.write_bytes(bytes(data))
    (tmp_path / "copy.tfrecord.index").write_bytes(open(shards[0] + ".index", "rb").read())
    readers = []

    def make_reader():
        readers.append(qp.TFRecordReader(corrupt_records="skip"))
        return readers[-1]

    with qp.Pipeline().as_default(), read_batch_features(
            [str(copy)], 16, FEATURES, reader=make_reader, num_epochs=2, shuffle="global",
            seed=0, read_batch_size=25, queue_capacity=120) as batches:
        ids = flat(batch["id"].tolist() for batch in batches)
    intact = [int(i) for i in qp.parse_example(
        np.array([r for r in qp.io.tf_record_iterator(shards[0])], dtype=object),
        FEATURES)["id"]]
    damaged = {intact[k] for k in (3, 40, 41, 90)}
    assert Counter(ids) == Counter([i for i in intact if i not in damaged] * 2)
    assert readers[0].num_records_skipped() == 8


def test_closing_under_a_callers_coordinator_closes_the_global_shuffles_files(shards):
    # Before the fix close() left every shard mapped until garbage collection.
    for threads in (1, 3):
        with qp.Pipeline().as_default():
            batches = pipeline(shards, shuffle="global", threads=threads, queue_capacity=32)
            with qp.running():
                batches.dequeue()
                assert descriptors_of(shards) > 0
                batches.close()
                wait_until(lambda: descriptors_of(shards) == 0,
                           "the closed pipeline's files are closed", timeout=5)


@pytest.mark.parametrize("shuffle", ["buffer", "global"])
def test_closing_under_a_callers_coordinator_stops_reading(shards, shuffle):
    with qp.Pipeline().as_default():
        batches = pipeline(shards, shuffle=shuffle, num_epochs=None, queue_capacity=32)
        with qp.running():
            batches.dequeue()
            batches.close()
            with pytest.raises(qp.errors.CancelledError, match="closed"):
                batches._saver.plan.take()


def test_a_failed_per_record_pipeline_closes_its_damaged_file(shards, tmp_path):
    # Before the fix the Batches' finalizer, a root, kept the runner's error alive, whose
    # traceback held the Batches and the reader: one descriptor more per failure.
    bad = tmp_path / "bad.tfrecord"
    data = bytearray(open(shards[0], "rb").read())
    data[40] ^= 0xFF
    bad.write_bytes(bytes(data))
    spec = {"id": qp.io.FixedLenFeature([], qp.int64)}
    for _ in range(3):
        with qp.Pipeline().as_default():
            files = qp.train.string_input_producer([str(bad)], num_epochs=1)
            reader = qp.TFRecordReader()

            def one():
                return qp.io.parse_single_example(reader.read(files)[1], spec)["id"]

            batches = qp.train.batch(one, 4)
            with pytest.raises(qp.errors.DataLossError):
                list(batches)
        del batches, reader, files, one
        gc.collect()
        assert descriptors_of([bad]) == 0


# -- sparse features ------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{"randomize_input": False}, {"shuffle": "global"}, {}],
                         ids=["in order", "global", "buffer"])
def test_a_batchs_sparse_dense_shape_is_its_own_longest_list(tmp_path, kwargs):
    # TF parses read_batch_features' records a batch at a time: a VarLenFeature's
    # dense_shape is [batch, the batch's longest list]. Before the fix it was the longest
    # list of the chunk the rows were read in (here 9, from one record of 100).
    records = [{"id": i, "tokens": np.arange(9 if i == 50 else i % 3, dtype=np.int64)}
               for i in range(100)]
    paths = write_shards(records, str(tmp_path / "ragged"), num_shards=1, progress=False)
    spec = {"id": qp.io.FixedLenFeature([], qp.int64), "tokens": qp.io.VarLenFeature(qp.int64)}
    with qp.Pipeline().as_default(), read_batch_features(
            paths, 4, spec, num_epochs=1, read_batch_size=100, queue_capacity=40, seed=0,
            **kwargs) as batches:
        shapes = [(batch["tokens"].dense_shape.tolist(), batch["id"].tolist())
                  for batch in batches]
    assert len(shapes) == 25
    for shape, ids in shapes:
        assert shape == [len(ids), max(9 if i == 50 else i % 3 for i in ids)], ids


# -- batches larger than the shuffle buffer -------------------------------------------------


def test_a_seed_repeats_batches_larger_than_half_the_queue(shards):
    # A batch of 50 from a queue of 60 keeping 30 behind never fits at once: it is taken in
    # pieces. Before the fix a piece was whatever had arrived, so the pool each piece was
    # drawn from, and the batches, changed run to run; a resume did not reproduce them.
    options = dict(num_epochs=EPOCHS, seed=3, queue_capacity=60, read_batch_size=10)
    whole, _ = column(shards, "id", 50, FEATURES, num_enqueue_threads=1, **options)
    assert Counter(whole) == EVERY_RECORD
    for threads in (2, 4, 3):
        assert column(shards, "id", 50, FEATURES, num_enqueue_threads=threads,
                      **options)[0] == whole, threads
    first, state = column(shards, "id", 50, FEATURES, stop_after=350, num_enqueue_threads=2,
                          **options)
    rest, _ = column(shards, "id", 50, FEATURES, state=json.loads(json.dumps(state)),
                     num_enqueue_threads=3, **options)
    assert first + rest == whole



# -- Ctrl-C on the state path ---------------------------------------------------------------


def state_path_lines():
    """Every line of the code a batch and its delivery pass through in the consumer's
    thread, as ``(code, line)``."""
    from queuepipe.batching._batches import Batches
    from queuepipe.features import _Tagged
    from queuepipe.plan import ReadPlan
    codes = [Batches.__next__.__code__, Batches.dequeue.__code__, Batches._take.__code__,
             Batches.state_dict.__code__, _Tagged.restore.__code__,
             ReadPlan.delivered.__code__]
    codes += [getattr(cls, name).__code__ for cls in (Batches, _Tagged)
              for name in ("_commit", "commit") if hasattr(cls, name)]
    return [(code, line) for code in codes
            for line in sorted({line for _, line in dis.findlinestarts(code) if line})]


@pytest.mark.parametrize("seed", [None, 4], ids=["unseeded", "seeded"])
def test_a_state_after_ctrl_c_anywhere_on_the_state_path_lists_the_batches_received(
        tmp_path, seed):
    # Before the fix the plan counted a batch delivered inside dequeue(), before the caller
    # had it: a Ctrl-C after that lost a whole batch on resume; one inside the plan's
    # bookkeeping left it half updated.
    records = [{"id": i, "label": 0, "tokens": tokens_of(i)} for i in range(150)]
    files = write_shards(records, str(tmp_path / "small"), num_shards=2, progress=False)
    options = dict(num_epochs=1, seed=seed, num_enqueue_threads=2, queue_capacity=40,
                   read_batch_size=10)
    fired_at = 0
    for code, line in state_path_lines():
        received = []
        with qp.Pipeline().as_default(), \
                read_batch_features(files, 8, FEATURES, **options) as batches:
            for _ in range(3):
                received += next(batches)["id"].tolist()
            tracer, fired = interrupting_at(code, line)
            sys.settrace(tracer)
            try:
                for _ in range(3):
                    batch = next(batches)
                    sys.settrace(None)
                    received += batch["id"].tolist()
                    sys.settrace(tracer)
                state = batches.state_dict()
            except KeyboardInterrupt:
                sys.settrace(None)
                state = batches.state_dict()
            finally:
                sys.settrace(None)
            fired_at += bool(fired)
            state = json.loads(json.dumps(state))
        rest, _ = column(files, "id", 8, FEATURES, state=state, **options)
        where = f"{code.co_name}, line {line}"
        assert Counter(received + rest) == Counter(range(150)), where
    assert fired_at >= 20  # the interrupts did land


def test_a_record_that_does_not_parse_is_named_without_counting_damaged_ones_again(tmp_path,
                                                                                   caplog):
    # the global order skips damaged records (corrupt_records="skip"); naming a record that
    # does not parse reads its chunk again, which must not log or count them a second time
    records = [{"id": i} if i != 57 else {"id": b"bad"} for i in range(100)]
    [path] = write_shards(records, str(tmp_path / "p"), num_shards=1, progress=False)
    entries = qp.shards.read_index(path + ".index")
    data = bytearray(open(path, "rb").read())
    for k in (3, 10, 55, 56):
        data[int(entries[k, 0]) + 14] ^= 0xFF  # a data byte: the record's checksum fails
    with open(path, "wb") as f:
        f.write(bytes(data))
    readers = []

    def make_reader():
        readers.append(qp.TFRecordReader(corrupt_records="skip"))
        return readers[-1]

    offset = int(entries[57, 0])
    with pytest.raises(InvalidArgumentError, match=rf"^Name: {re.escape(path)}:{offset}, "
                                                   r"Key: id, Index: \d+\.  Data types"):
        with read_batch_features([path], 4, {"id": qp.io.FixedLenFeature([], qp.int64)},
                                 reader=make_reader, num_epochs=1, shuffle="global", seed=0,
                                 read_batch_size=100, queue_capacity=200,
                                 num_enqueue_threads=1) as batches:
            for _ in batches:
                pass
    assert readers[0].num_records_skipped() == 4
    assert sum("skipping damaged data" in r.getMessage() for r in caplog.records) == 4
