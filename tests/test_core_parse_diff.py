"""The compiled Example walk against the pure path: equal values bit for bit (dtypes and shapes
included) and equal errors (type and message) on random and hostile inputs; the regression
corpus replayed; four threads parsing at once.

The generator and the comparison live in ``fuzz/fuzz_example.py``, whose command line runs
the same check over as many inputs as asked.
"""

import importlib.util
import os
import random
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import queuepipe as qp
from queuepipe import _core
from queuepipe.parsing import _walkers
from queuepipe.protos import make_example

_TARGET = os.path.join(os.path.dirname(__file__), os.pardir, "fuzz", "fuzz_example.py")
_spec = importlib.util.spec_from_file_location("fuzz_example", _TARGET)
fz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fz)

CORPUS = os.path.join(os.path.dirname(__file__), "corpus", "example")

pytestmark = pytest.mark.skipif(not _walkers.core_available(),
                                reason="the compiled core is not loaded: nothing to compare")


def _assert_agree(spec_index, records):
    problem = fz.check(spec_index, records)
    assert problem is None, problem


@settings(max_examples=300)
@given(st.integers(0, 2**32 - 1))
def test_both_walkers_agree_on_random_and_hostile_batches(seed):
    # a seed of the fuzz generator (hypothesis's own random draws make shrinking too slow):
    # `python fuzz/fuzz_example.py -n 1 --seed S` replays a failing one
    rng = random.Random(seed)
    _assert_agree(*fz.random_batch(rng))
    problem = fz.check_sequence(*fz.random_sequence(rng))
    assert problem is None, problem


def _entry(key, feature):
    return fz.field(1, fz.field(1, key) + fz.field(2, feature))


def _example(*entries):
    return fz.field(1, b"".join(entries))


_INT64_LIST = fz.field(3, fz.field(1, fz.varint(5)))  # a Feature: int64_list [5]
_HOSTILE = {
    "plain": _example(_entry(b"i", _INT64_LIST)),
    "truncated varint": _example(_entry(b"i", fz.field(3, fz.field(1, b"\x80\x80")))),
    "eleven-byte varint": _example(_entry(b"i", fz.field(3, fz.field(1, b"\xff" * 10 + b"\x01")))),
    "overlong varint value": _example(_entry(b"i", fz.field(3, fz.field(1, fz.overlong(5, 10))))),
    # the walk reads varints of one and of two bytes inline
    "two-byte varints": _example(_entry(b"v", fz.field(3, fz.field(1, b"".join(
        fz.varint(n) for n in (127, 128, 300, 16383, 16384)))))),
    "overlong two-byte varint": _example(_entry(b"i", fz.field(3, fz.field(1, b"\x85\x00")))),
    "two-byte varint cut short": _example(_entry(b"v", fz.field(3, fz.field(1, b"\x05\x85")))),
    "bits past the 64th": _example(_entry(b"i", fz.field(3, fz.field(1, b"\xff" * 9 + b"\x7f")))),
    "overlong length": b"\x0a" + fz.overlong(0, 10),
    "overlong tag": fz.overlong(0x0A, 5) + b"\x00",
    "length 2**63": b"\x0a" + fz.varint(2**63) + b"\x00",
    "length 2**63 - 1": b"\x0a" + fz.varint(2**63 - 1) + b"\x00",
    "length 2**64 - 1": b"\x0a" + fz.varint(2**64 - 1) + b"\x00",
    "entry length 2**64 - 1": fz.field(1, b"\x0a" + fz.varint(2**64 - 1) + b"\x0a\x01i"),
    "length past the end": b"\x0a\x05\x0a\x03",
    "entry cut short": _example(_entry(b"i", _INT64_LIST))[:-2],
    "feature cut short": fz.field(1, fz.field(1, fz.field(1, b"i") + b"\x12\x04\x1a\x02")),
    "unknown field in Example": _example(_entry(b"i", _INT64_LIST)) + fz.field(9, b"x"),
    "unknown field in entry": fz.field(1, fz.field(1, fz.field(1, b"i") + fz.field(2, _INT64_LIST)
                                                   + fz.field(3, b""))),
    "wire type 3": _example(_entry(b"i", _INT64_LIST)) + b"\x0b",
    "wire type 4": b"\x0c" + _example(_entry(b"i", _INT64_LIST)),
    "wire type 6": _example(_entry(b"i", _INT64_LIST)) + b"\x0e",
    "wire type 7": _example(_entry(b"i", b"\x1f")),
    "unpacked int64s": _example(_entry(b"i", fz.field(3, b"\x08\x05"))),
    "int64s in two chunks": _example(_entry(b"v", fz.field(3, fz.field(1, b"\x01")
                                                        + fz.field(1, b"\x02")))),
    "floats in two chunks": _example(_entry(b"f", fz.field(2, fz.field(1, b"\0" * 4)
                                                        + fz.field(1, b"\0" * 4)))),
    "floats not a multiple of 4": _example(_entry(b"q", fz.field(2, fz.field(1, b"\0" * 6)))),
    "empty list": _example(_entry(b"v", fz.field(3, b""))),
    "empty packed field": _example(_entry(b"v", fz.field(3, fz.field(1, b"")))),
    # the first values of a ragged float feature in a call: copied with memcpy to a scratch
    # that was not allocated yet (UBSan: null pointer passed to memcpy)
    "empty float list": _example(_entry(b"f", fz.field(2, b""))),
    "empty packed float field": _example(_entry(b"f", fz.field(2, fz.field(1, b"")))),
    "no list set": _example(_entry(b"i", b"")),
    "huge list": _example(_entry(b"v", fz.field(3, fz.field(1, b"\x01" * 100000)))),
    "key not UTF-8": _example(_entry(b"\xff\xfe", _INT64_LIST), _entry(b"i", _INT64_LIST)),
    "key repeated": _example(_entry(b"i", _INT64_LIST), _entry(b"i", _INT64_LIST)),
    "key repeated, the second empty": _example(_entry(b"i", _INT64_LIST), _entry(b"i", b"")),
    "Features twice": _example(_entry(b"i", _INT64_LIST)) + _example(_entry(b"v", _INT64_LIST)),
    "value before key": fz.field(1, fz.field(1, fz.field(2, _INT64_LIST) + fz.field(1, b"i"))),
    "no value": fz.field(1, fz.field(1, fz.field(1, b"i"))),
    "no key": fz.field(1, fz.field(1, fz.field(2, _INT64_LIST))),
    "two lists in a Feature": _example(_entry(b"i", fz.field(2, b"") + _INT64_LIST)),
    "empty record": b"",
}


@pytest.mark.parametrize("name", sorted(_HOSTILE))
@pytest.mark.parametrize("spec_index", range(len(fz.SPECS)))
def test_both_walkers_agree_on_hostile_records(name, spec_index):
    record = _HOSTILE[name]
    plain = _HOSTILE["plain"]
    _assert_agree(spec_index, [record])
    _assert_agree(spec_index, [plain, record, plain])


# -- walk_examples's own arguments ---------------------------------------------------------

_RAGGED_V = ((b"v", 0, True, 1, False),)  # a VarLenFeature(int64) "v"


def test_the_walk_refuses_counts_not_aligned_for_int64():
    # counts are stored as int64_t: at an odd address that store was undefined (UBSan:
    # store to misaligned address), whatever x86 made of it
    counts = memoryview(bytearray(9))[1:]
    with pytest.raises(ValueError, match=r"^walk_examples: counts starts at an address that "
                                         r"is not a multiple of 8 \(int64\)$"):
        _core.core.walk_examples([_HOSTILE["plain"]], _RAGGED_V, (None,), bytearray(1), counts,
                                 bytearray(1))


def test_the_walk_sets_present_whatever_the_buffer_held():
    # a record without the required "i": present must say so even where the caller's buffer
    # held 1 (the walk read it as "already present" and took the record)
    record = _example(_entry(b"v", _INT64_LIST))
    present, back = bytearray(b"\x01\x01"), bytearray(2)
    _core.core.walk_examples([record, _HOSTILE["plain"]], ((b"i", 0, False, 1, True),),
                             (np.zeros(2, np.int64),), present, bytearray(16), back)
    assert (list(back), list(present)) == ([1, 0], [0, 1])


_KEYS = ["", "\x00", "k", "k\x00", "key4", "seven_7", "eight__8", "eight__8x", "eight__8y",
         "sixteen_bytes_16", "sixteen_bytes_16!", "é" * 5]


@pytest.mark.parametrize("requested", [_KEYS, _KEYS[::2], _KEYS[1::2]])
def test_the_key_table_tells_apart_keys_of_every_length_and_shared_prefixes(requested):
    # the walk finds a key by its first 8 bytes as a word and its length (then the rest):
    # keys of 0-17 bytes, a key and the same with a NUL after it, keys that share their
    # first 8 bytes or are prefixes of others, requested or not, each read as its own
    records = [_example(*[_entry(key.encode(), fz.field(3, fz.field(1, fz.varint(10 * row + i))))
                          for i, key in enumerate(_KEYS) if (row + i) % 3])
               for row in range(6)]
    spec = {key: qp.io.VarLenFeature(qp.int64) for key in requested}
    features = qp.parsing._example_features(spec)
    sinks = [qp.parsing._sink(feature, len(records)) for feature in features]
    assert list(_walkers.core_walk(records, features, sinks)) == []
    for feature, sink in zip(features, sinks):
        i = _KEYS.index(feature.key)
        got = sink.finish()
        assert got.values.tolist() == [10 * row + i for row in range(6) if (row + i) % 3]
    _assert_agree_on(spec, records)


_LOOKALIKES = {
    # keys, each with unrequested lookalikes of the same first 8 bytes: NULs after it (the
    # same word, another length), or as long with another last byte
    "other lengths": {key: [key + b"\x00" * n for n in range(1, 8)]
                      for key in (b"a", b"b", b"c", b"d")},
    "other tails": {b"long_key_000": [b"long_key_%03d" % n for n in range(1, 200)]},
}


@pytest.mark.parametrize("kind", sorted(_LOOKALIKES))
def test_the_key_table_tells_apart_keys_from_their_lookalikes(kind):
    # few keys (a small table, where probes meet): a table that compared the first 8 bytes
    # only, or not the length, took a lookalike for its key (then found the key "twice" and
    # left the record to the pure path)
    keys = _LOOKALIKES[kind]
    entries = [_entry(lookalike, fz.field(3, fz.field(1, fz.varint(1))))
               for lookalikes in keys.values() for lookalike in lookalikes]
    entries += [_entry(key, fz.field(3, fz.field(1, fz.varint(2)))) for key in keys]
    spec = {key.decode(): qp.io.VarLenFeature(qp.int64) for key in keys}
    features = qp.parsing._example_features(spec)
    sinks = [qp.parsing._sink(feature, 1) for feature in features]
    assert list(_walkers.core_walk([_example(*entries)], features, sinks)) == []
    assert [sink.finish().values.tolist() for sink in sinks] == [[2]] * len(keys)


def _assert_agree_on(spec, records):
    pure = fz.outcome(_walkers.pure_walk, records, spec)
    core = fz.outcome(_walkers.core_walk, records, spec)
    assert fz.same(pure, core), (pure, core)


def test_the_walk_puts_dense_strings_into_an_object_array():
    # a record with "s", one without (keeps what the array held), one handed back (the
    # unpacked int64s: keeps it too); the item replaced is released, none other
    spec = ((b"s", 2, False, 1, False), (b"i", 0, False, 1, False))
    with_s = _example(_entry(b"s", fz.field(1, fz.field(1, b"abc"))), _entry(b"i", _INT64_LIST))
    handed = _example(_entry(b"s", fz.field(1, fz.field(1, b"xyz"))),
                      _entry(b"i", fz.field(3, b"\x08\x05")))
    kept = bytes(bytearray(b"default"))  # an object of its own, to count its references
    out = np.array([kept, kept, kept], dtype=object)
    before = sys.getrefcount(kept)
    present, back = bytearray(6), bytearray(3)
    results = _core.core.walk_examples([with_s, _HOSTILE["plain"], handed], spec,
                                       (out, np.zeros(3, np.int64)), present, bytearray(48),
                                       back)
    assert results == (None, None)
    assert out.tolist() == [b"abc", b"default", b"default"] and list(back) == [0, 0, 1]
    assert sys.getrefcount(kept) == before - 1


_NOT_OBJECTS = [
    (bytearray(16), r"^walk_examples: outs\[0\] must be or give a writable object array of "
                    r"at least 2 items$"),
    (np.zeros(2, np.int64), "must be or give a writable object array"),
    (np.empty(1, dtype=object), "of at least 2 items$"),
    (np.empty(4, dtype=object)[::2], "contiguous"),
]


@pytest.mark.parametrize("out, problem", _NOT_OBJECTS)
def test_the_walk_refuses_a_string_output_that_is_no_object_array_of_the_size(out, problem):
    with pytest.raises((ValueError, BufferError), match=problem):
        _core.core.walk_examples([_HOSTILE["plain"]] * 2, ((b"s", 2, False, 1, False),),
                                 (out,), bytearray(2), bytearray(16), bytearray(2))


def test_the_walk_fills_the_object_array_a_ragged_string_feature_asks_for():
    records = [_example(_entry(b"s", fz.field(1, fz.field(1, b"ab") + fz.field(1, b"")))),
               _HOSTILE["plain"], _example(_entry(b"s", fz.field(1, fz.field(1, b"c"))))]
    asked = []

    def make(n):
        asked.append(n)
        return np.empty(n, dtype=object)

    counts = np.zeros(3, np.int64)
    (values,) = _core.core.walk_examples(records, ((b"s", 2, True, 1, False),), (make,),
                                         bytearray(3), counts, bytearray(3))
    assert asked == [3] and values.tolist() == [b"ab", b"", b"c"]
    assert counts.tolist() == [2, 0, 1]


def test_the_walk_hands_its_ragged_numbers_over_in_blocks_of_their_own():
    # each feature's numbers in a writable buffer of exactly their bytes, owned by itself:
    # one feature's writes never show in another's, nor a call's in another call's, and the
    # values outlive the call (the block is freed with the last array on it)
    numbers = [np.arange(n, dtype=np.int64) * 3 - 7 for n in (200, 0, 5)]
    records = [make_example({"i": numbers[k].tolist(), "f": [0.5] * (k + 1)}).SerializeToString()
               for k in range(3)]
    spec = ((b"i", 0, True, 1, False), (b"f", 1, True, 1, False), (b"none", 0, True, 1, False))
    counts = np.zeros((3, 3), np.int64)

    def walk():
        return _core.core.walk_examples(records, spec, (None,) * 3, bytearray(9), counts,
                                        bytearray(3))

    ints, floats, empty = walk()
    assert memoryview(ints).nbytes == 8 * 205 and not memoryview(ints).readonly
    assert memoryview(floats).nbytes == 4 * 6 and type(empty) is bytearray and not empty
    values = np.frombuffer(ints, np.int64)
    assert values.flags.writeable and values.tolist() == np.concatenate(numbers).tolist()
    np.frombuffer(floats, np.float32)[:] = 9
    again, _, _ = walk()
    values[:] = 0
    assert np.frombuffer(again, np.int64).tolist() == np.concatenate(numbers).tolist()
    assert np.frombuffer(walk()[1], np.float32).tolist() == [0.5] * 6
    del ints, again
    assert values.tolist() == [0] * 205  # (the array keeps its block)
    with pytest.raises(TypeError):
        type(floats)()


@pytest.mark.parametrize("made, problem", _NOT_OBJECTS[:2] + [
    (np.empty(2, dtype=object), "of at least 3 items$")])
def test_the_walk_refuses_what_a_ragged_string_feature_asks_for_when_it_is_no_array(made,
                                                                                      problem):
    records = [_example(_entry(b"s", fz.field(1, fz.field(1, b"ab") * 3)))]
    with pytest.raises(ValueError, match=problem.replace("at least 2", "at least 3")):
        _core.core.walk_examples(records, ((b"s", 2, True, 1, False),), (lambda n: made,),
                                 bytearray(1), bytearray(8), bytearray(1))
    with pytest.raises(ValueError, match=r"^walk_examples: outs\[0\] must be None or a "
                                         r"callable$"):
        _core.core.walk_examples(records, ((b"s", 2, True, 1, False),), (made,),
                                 bytearray(1), bytearray(8), bytearray(1))


_LISTS = fz.field(1, fz.field(1, b"v") + fz.field(2, fz.field(1, _INT64_LIST) * 2))
_SEQUENCE_HOSTILE = {
    "plain sequence": _example(_entry(b"i", _INT64_LIST)) + fz.field(2, _LISTS),
    "lists first": fz.field(2, _LISTS) + _example(_entry(b"i", _INT64_LIST)),
    "lists twice": fz.field(2, _LISTS) * 2,
    "a step with no list": fz.field(2, fz.field(1, fz.field(1, b"v") + fz.field(2, b"\x0a\x00"))),
    "a list of no steps": fz.field(2, fz.field(1, fz.field(1, b"q") + fz.field(2, b""))),
    "a list with no value": fz.field(2, fz.field(1, fz.field(1, b"v"))),
    "an unknown field in a list": fz.field(2, fz.field(1, fz.field(1, b"v") + fz.field(
        2, fz.field(1, _INT64_LIST) + fz.field(2, b"")))),
    "an empty context Feature": _example(_entry(b"i", b"")),
}


@pytest.mark.parametrize("name", sorted(_HOSTILE) + sorted(_SEQUENCE_HOSTILE))
@pytest.mark.parametrize("index", range(len(fz.SEQUENCE_SPECS)))
def test_both_walkers_agree_on_hostile_sequence_examples(name, index):
    problem = fz.check_sequence(index, {**_HOSTILE, **_SEQUENCE_HOSTILE}[name])
    assert problem is None, problem


def test_the_corpus_replays_without_disagreement():
    names = sorted(name for name in os.listdir(CORPUS) if not name.endswith(".md"))
    assert names, f"{CORPUS} is empty"
    for name in names:
        spec_index, records = fz.load(os.path.join(CORPUS, name))
        if spec_index >= fz.SEQUENCE_CORPUS:
            for record in records:
                assert fz.check_sequence(spec_index - fz.SEQUENCE_CORPUS, record) is None, name
        else:
            assert fz.check(spec_index, records) is None, name


def test_the_corpus_format_round_trips(tmp_path):
    records = [b"", b"\x0a\x00", bytes(range(200))]
    path = fz.save(str(tmp_path), 3, records, "x")
    assert fz.load(path) == (3, records)


def test_four_threads_parse_at_once_and_every_value_is_right():
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 40, 512)
    records = [make_example({"tokens": rng.integers(-2**40, 2**40, n).tolist(), "label": i,
                             "name": [b"r%d" % i], "xy": [float(i), -float(i)]})
               .SerializeToString() for i, n in enumerate(lengths)]
    spec = {"tokens": qp.io.VarLenFeature(qp.int64), "label": qp.io.FixedLenFeature([], qp.int64),
            "name": qp.io.FixedLenFeature([], qp.string),
            "xy": qp.io.FixedLenFeature([2], qp.float32)}
    want = fz.outcome(_walkers.pure_walk, records, spec)
    assert want[0] == "ok" and want[1]["label"].tolist() == list(range(512))
    barrier = threading.Barrier(4)
    failures = []

    def parse():
        barrier.wait()
        for _ in range(20):
            got = fz.outcome(_walkers.core_walk, records, spec)
            if not fz.same(got, want):
                failures.append(got)
                return

    threads = [threading.Thread(target=parse, name=f"queuepipe/test/parser-{i}")
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_the_core_takes_a_plain_sequence_example_itself():
    from queuepipe.parsing import _specs

    context, lists = fz.SEQUENCE_SPECS[0]
    record = _SEQUENCE_HOSTILE["plain sequence"]
    found = _walkers.core_sequence(
        record, _specs._features(context, (qp.io.FixedLenFeature, qp.io.VarLenFeature), "c"),
        _specs._features(lists, (qp.io.FixedLenSequenceFeature, qp.io.VarLenFeature), "s"),
        list(lists.values()))
    assert found is not None
    assert found[0]["i"] == 5 and found[1]["v"].values.tolist() == [5, 5]
    assert found[1]["v"].dense_shape.tolist() == [2, 1] and found[1]["q"].shape == (0, 2)


@pytest.mark.parametrize("argument", [3, 4, 5])
def test_the_walk_refuses_an_object_array_for_its_numbers(argument):
    # present, counts and handed_back get raw bytes: written over an object array's
    # references they crashed the interpreter when the array was freed
    arguments = [[_HOSTILE["plain"]], ((b"s", 2, False, 1, False),), (None,), bytearray(1),
                 bytearray(8), bytearray(1)]
    arguments[argument] = np.empty(8, dtype=object)
    with pytest.raises(ValueError, match=r"is a buffer of Python objects, not of numbers$"):
        _core.core.walk_examples(*arguments)


# -- walk_one: one record, every output made by the core ------------------------------------

def test_one_record_walk_gives_every_record_its_own_writable_arrays():
    # walk_one makes a bytearray per dense number feature: two records' outputs never share
    # memory, and a default handed out is a copy, so writing to one output changes no other
    spec = fz.SPECS[0]
    held = _example(_entry(b"i", fz.field(3, fz.field(1, fz.varint(3)))),
                    _entry(b"f", fz.field(2, fz.field(1, np.float32([1, 2]).tobytes()))),
                    _entry(b"v", _INT64_LIST))
    features = qp.parsing._example._example_features(spec)
    first, second, bare = (_walkers.core_single(record, features)
                           for record in (held, held, _example()))
    assert first["i"] == 3 and first["f"].tolist() == [1.0, 2.0]
    assert bare["i"] == -1 and bare["f"].tolist() == [0.5, 1.5]
    for name in ("f", "v"):
        values = [out[name] if name == "f" else out[name].values
                  for out in (first, second, bare)]
        assert all(v.flags.writeable for v in values)
        assert not np.shares_memory(values[0], values[1])
    bare["f"][:] = 9
    assert _walkers.core_single(_example(), features)["f"].tolist() == [0.5, 1.5]


def test_one_record_walk_leaves_what_the_batch_walk_leaves():
    features = qp.parsing._example._example_features(fz.SPECS[1])
    assert _walkers.core_single(_HOSTILE["truncated varint"], features) is None
    assert _walkers.core_single(_example(_entry(b"i", _INT64_LIST)), features) is None  # no "s"


@pytest.mark.parametrize("value", [-2**63, -1, 0, 1, 127, 128, 300, 2**31, 2**63 - 1])
def test_one_record_walk_gives_an_int64_scalar_as_both_parsers_do(value):
    # walk_one hands a scalar int64 over as an int (forms), which the plan makes a NumPy
    # scalar: from a table for 0..127, else np.int64; the same value and type as the pure
    # single parser's, over the whole int64 range
    spec = {"label": qp.io.FixedLenFeature([], qp.int64),
            "one": qp.io.FixedLenFeature([1], qp.int64),
            "ids": qp.io.VarLenFeature(qp.int64)}
    record = make_example({"label": [value], "one": [value], "ids": [value, 1]}).SerializeToString()
    features = qp.parsing._example._example_features(spec)
    core, pure = (single(record, features)
                  for single in (_walkers.core_single, _walkers.pure_single))
    assert type(core["label"]) is type(pure["label"]) is np.int64
    assert core["label"] == pure["label"] == value
    assert core["one"].dtype == np.int64 and core["one"].tolist() == pure["one"].tolist()
    assert core["ids"].values.tolist() == pure["ids"].values.tolist() == [value, 1]


def test_one_record_walk_gives_its_forms_only_where_asked():
    record = make_example({"a": [-7], "b": [9], "c": [1.5], "d": [4, -5],
                           "e": []}).SerializeToString()
    spec = ((b"a", 0, False, 1, True), (b"b", 0, False, 1, True), (b"c", 1, False, 1, True),
            (b"d", 0, True, 1, False), (b"e", 0, True, 1, False))
    a, b, c, d, e = _core.core.walk_one(record, spec, b"\1\1\1\1\1")
    assert (a, b) == (-7, 9) and c == bytearray(np.float32(1.5).tobytes())  # a float: bytes
    assert np.frombuffer(d, np.int64).tolist() == [0, 1, 2, 4, -5]  # 0..n, then the values
    assert np.frombuffer(e, np.int64).tolist() == [0]  # no values: n = 0 alone
    a, b, c, d, e = _core.core.walk_one(record, spec, b"\0")  # flags past the bytes given: 0
    assert np.frombuffer(a, np.int64).tolist() == [-7] and type(b) is bytearray
    assert np.frombuffer(d, np.int64).tolist() == [4, -5] and e == bytearray()
    assert _core.core.walk_one(record, spec) == _core.core.walk_one(record, spec, b"")


def test_one_record_walk_gives_sparse_int64_outputs_as_the_pure_parser_does():
    spec = {"ids": qp.io.VarLenFeature(qp.int64)}
    features = qp.parsing._example._example_features(spec)
    for ids in ([], [7], list(range(-3, 300))):
        record = make_example({"ids": ids}).SerializeToString()
        core = _walkers.core_single(record, features)["ids"]
        wanted = {"indices": np.arange(len(ids), dtype=np.int64)[:, None],
                  "values": np.array(ids, dtype=np.int64),
                  "dense_shape": np.array([len(ids)], dtype=np.int64)}
        if ids:  # (the pure parser leaves an empty list to the general path)
            pure = _walkers.pure_single(record, features)["ids"]
            assert all(getattr(pure, name).tolist() == want.tolist()
                       for name, want in wanted.items())
        for name, want in wanted.items():
            got = getattr(core, name)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tolist() == want.tolist() and got.flags.writeable
        core.values[:] = -1  # three disjoint views: writing one changes no other
        assert core.indices.ravel().tolist() == list(range(len(ids)))
        assert core.dense_shape.tolist() == [len(ids)]


@pytest.mark.parametrize("record, spec, problem", [
    ("not bytes", ((b"i", 0, False, 1, True),), r"^walk_one\(\) argument 1 must be bytes"),
    (b"", ((b"i", 0, False, 1, True), (b"i", 1, True, 1, False)),
     r"^walk_one: spec\[1\] repeats a key$"),
    (b"", ((b"i", 3, False, 1, True),), r"^walk_one: spec\[0\] has dtype 3 \(not 0-2\)"),
    (b"", ((b"i", 0, False, 1, True), 5), r"^walk_one: spec\[1\] must be \(key bytes, "),
])
def test_one_record_walk_refuses_bad_arguments(record, spec, problem):
    with pytest.raises((TypeError, ValueError), match=problem):
        _core.core.walk_one(record, spec)


@pytest.mark.parametrize("size", [2**40, 2**61])
def test_one_record_walk_hands_back_a_dense_size_memory_cannot_hold(size):
    # (the core raised its own MemoryError or OverflowError; the pure path raises NumPy's)
    features = qp.parsing._example._example_features(
        {"a": qp.io.FixedLenFeature([size], qp.int64), "b": qp.io.VarLenFeature(qp.int64)})
    assert _walkers.core_single(_example(_entry(b"b", _INT64_LIST)), features) is None


def test_the_walk_reads_a_spec_of_other_number_types_as_the_same_spec():
    # spec items as queuepipe makes them are read directly; numbers of other types (NumPy
    # ints, 0 and 1 for the flags) go through the argument parser, to the same walk
    plain = ((b"v", 0, True, 1, False), (b"i", 0, False, 1, True))
    other = ((b"v", np.int32(0), 1, np.int64(1), 0), (b"i", 0, 0, np.uint8(1), 1))
    record = _example(_entry(b"v", _INT64_LIST), _entry(b"i", _INT64_LIST))
    for walk in (lambda spec: _core.core.walk_one(record, spec),
                 lambda spec: _core.core.walk_examples(
                     [record], spec, (None, np.zeros(1, np.int64)), bytearray(2),
                     bytearray(16), bytearray(1))):
        found = [walk(spec) for spec in (plain, other)]
        assert [list(map(bytes, f[:1])) for f in found] == [[np.int64([5]).tobytes()]] * 2


# -- exact_bytes and join_equal: a batch of bytes checked and joined in one pass -------------

class _Bytes(bytes):
    """A bytes subclass: not exactly bytes, so both twins leave it to the general path."""


_ITEMS = st.lists(st.one_of(st.binary(max_size=3), st.binary(min_size=2, max_size=2),
                            st.builds(bytearray, st.binary(max_size=2)),
                            st.builds(_Bytes, st.binary(max_size=2)), st.text(max_size=2),
                            st.none(), st.integers(0, 3)), max_size=5)


@settings(max_examples=300)
@given(_ITEMS, st.sampled_from(["list", "tuple", "object array"]))
def test_both_batch_checks_agree(items, form):
    from queuepipe.parsing import _items

    if form == "object array":
        batch = np.empty(len(items), dtype=object)
        batch[:] = items
    else:
        batch = tuple(items) if form == "tuple" else list(items)
    for core, pure in ((_core.core.exact_bytes, _items.pure_exact_bytes),
                       (_core.core.all_exact_bytes, _items.pure_all_exact_bytes),
                       (_core.core.join_equal, _items.pure_join_equal)):
        got, expected = core(batch), pure(batch)
        assert type(got) is type(expected) and got == expected
        assert got in (None, True, False) or list(map(type, got)) == list(map(type, expected))
    assert _core.core.all_exact_bytes(batch) is (_items.pure_exact_bytes(batch) is not None)


class _List(list):
    pass


@pytest.mark.parametrize("batch", [np.empty((2, 2), dtype=object), np.empty(4, object)[::2],
                                   np.array(None, dtype=object), np.zeros(3),
                                   np.array([b"a"]), "text", b"ab", iter([b"a"]), {b"a": 1},
                                   _List([b"a"]), None, 3])
def test_the_batch_checks_refuse_what_is_no_list_tuple_or_flat_object_array(batch):
    from queuepipe.parsing import _items

    for function in ("exact_bytes", "all_exact_bytes", "join_equal"):
        for check in (getattr(_core.core, function), getattr(_items, "pure_" + function)):
            with pytest.raises(TypeError, match=rf"^{function} takes a list, a tuple or a "
                                                rf"C-contiguous 1-D object array$"):
                check(batch)
