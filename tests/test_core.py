"""The compiled core (``queuepipe._qpcore``) against the pure path, and its switches.

The core's framing must read every input as the pure path does: equal records, equal skips,
equal errors (type, message, offset). The comparison lives in the fuzz target
(``fuzz/fuzz_records.py``: :func:`check_core_agrees`), fed here by hypothesis and by the
regression corpus ``tests/corpus/frames/``. Where the core is not built the comparisons are
skipped, except under ``QUEUEPIPE_REQUIRE_CORE=1``, where they fail.
"""

import glob
import gzip
import os
import random
import struct
import subprocess
import sys
import threading
from unittest import mock

import crc32c as crc32c_package
import numpy as np
import pytest
from helpers import fuzz_target, runs_beside
from hypothesis import given, settings, strategies as st

from queuepipe import _core, _frames, cli
from queuepipe.protos import make_example
from queuepipe.errors import DataLossError
from queuepipe.records import RecordScanner

fuzz_records = fuzz_target()
CORPUS = os.path.join(os.path.dirname(__file__), "corpus", "frames")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OK, SHORT_HEADER, LENGTH_CRC, SHORT_RECORD, DATA_CRC = range(5)  # qp_frames_status


@pytest.fixture(scope="module")
def core():
    module = fuzz_records.core_module()
    if module is None:
        if os.environ.get("QUEUEPIPE_REQUIRE_CORE", "") not in ("", "0"):
            pytest.fail("QUEUEPIPE_REQUIRE_CORE is set but queuepipe._qpcore does not import")
        pytest.skip("the compiled core is not built here (pip install -e . or make builds it)")
    return module


def header(length):
    encoded = struct.pack("<Q", length)
    return encoded + struct.pack("<I", _frames._masked_crc32c(encoded))


# -- CRC-32C and framing ----------------------------------------------------------------


def test_every_crc_implementation_gives_the_check_value_and_the_packages_crc(core):
    assert core.CRC_INSTRUCTION in ("sse4.2", "armv8", "table")
    for crc in (core.crc32c, core.crc32c_by_table):
        assert crc(b"123456789") == 0xE3069283  # the CRC-32C check value
        rng = random.Random(1)
        data = rng.randbytes(300_000)  # past the size the GIL is released at
        for start in range(9):  # every alignment
            for size in (0, 1, 7, 8, 9, 15, 16, 63, 1000, 70_000, 299_000):
                piece = data[start:start + size]
                assert crc(piece) == crc32c_package.crc32c(piece), (crc, start, size)
                assert crc(piece[5:], crc(piece[:5])) == crc32c_package.crc32c(piece)


@given(st.binary(max_size=300))
@settings(max_examples=200)
def test_masked_crc_and_frame_equal_the_pure_ones(data):
    core = fuzz_records.core_module()
    if core is None:
        pytest.skip("the compiled core is not built here")
    assert core.masked_crc32c(data) == _frames._masked_crc32c(data)
    assert core.frame(data) == _frames._frame(data)
    assert core.frame(memoryview(bytearray(data))) == _frames._frame(data)


def test_scan_stops_at_each_kind_of_damage_with_its_status(core):
    good = _frames._frame(b"abc") + _frames._frame(b"")
    cases = {
        "intact": (good, OK, len(good)),
        "short header": (good + b"\0" * 11, SHORT_HEADER, len(good)),
        "length crc": (good + bytes(12), LENGTH_CRC, len(good)),
        "short record": (good + header(5) + b"abcde", SHORT_RECORD, len(good)),
        "data crc": (good + _frames._frame(b"xyz")[:-1] + b"\0", DATA_CRC, len(good)),
    }
    for name, (buffer, status, stop) in cases.items():
        offsets, records, got_stop, got_status = core.scan_frames(buffer, 0, len(buffer),
                                                                  100, 1000)
        assert (offsets, records) == ([1000, 1019], [b"abc", b""]), name
        assert (got_stop, got_status) == (stop, status), name


@pytest.mark.parametrize("length", fuzz_records.HOSTILE_LENGTHS)
def test_a_huge_length_with_a_right_checksum_is_a_short_record(core, length):
    buffer = bytearray(header(length) + b"x" * 100)
    assert core.scan_frames(buffer, 0, len(buffer), 10, 0) == ([], [], 0, SHORT_RECORD)


def test_scan_takes_at_most_max_records_from_pos_to_end(core):
    buffer = b"junk" + b"".join(_frames._frame(bytes([i]) * i) for i in range(5))
    offsets, records, stop, status = core.scan_frames(buffer, 4, len(buffer), 3, 10)
    assert records == [b"", b"\1", b"\2\2"] and offsets == [14, 30, 47] and status == OK
    assert stop == 4 + 16 + 17 + 18
    assert core.scan_frames(buffer, 4, 4 + 16 + 5, 3, 0) == ([4], [b""], 20, SHORT_HEADER)
    # (offsets false: the same scan, without the list of offsets)
    assert core.scan_frames(buffer, 4, len(buffer), 3, 10, False) == (
        None, [b"", b"\1", b"\2\2"], stop, OK)
    taken = core.scan_region(buffer, 4, len(buffer), 3, 10, False)
    assert taken[0] is None and core.cut_frames(taken[1]) == records


SCANS = ("scan_frames", "scan_region")


@pytest.mark.parametrize("scan", SCANS)
@pytest.mark.parametrize("args", [(-1, 4, 1, 0), (5, 4, 1, 0), (0, 1000, 1, 0)])
def test_scan_refuses_a_range_outside_the_buffer(core, scan, args):
    with pytest.raises(ValueError, match=rf"^{scan}: pos -?\d+ and end \d+ must satisfy "
                                         r"0 <= pos <= end <= 10, the buffer's length$"):
        getattr(core, scan)(bytes(10), *args)


@pytest.mark.parametrize("scan", SCANS)
def test_scan_refuses_a_negative_count(core, scan):
    with pytest.raises(ValueError, match=rf"^{scan}: max_records \(-1\) and base \(0\) "
                                         r"must be >= 0$"):
        getattr(core, scan)(bytes(10), 0, 10, -1, 0)


@pytest.mark.parametrize("scan", SCANS)
def test_scan_refuses_a_base_whose_offsets_would_overflow(core, scan):
    # base + pos + a frame's start is a signed sum: past 2**63 - 1 it was undefined (UBSan:
    # signed integer overflow) and gave negative offsets
    buffer = b"j" + _frames._frame(b"abc")
    with pytest.raises(ValueError, match=rf"^{scan}: base \(9223372036854775807\) \+ end "
                                         r"\(20\) passes 2\*\*63 - 1, the largest offset$"):
        getattr(core, scan)(buffer, 1, len(buffer), 1, 2**63 - 1)
    assert core.scan_frames(buffer, 1, len(buffer), 1, 2**63 - 21) == (
        [2**63 - 20], [b"abc"], 20, OK)


def test_a_region_holds_the_frames_a_scan_takes_and_cuts_into_their_records(core):
    buffer = b"junk" + b"".join(_frames._frame(bytes([i]) * i) for i in range(5)) + b"\0"
    for count in (0, 3, 5, 9):
        offsets, records, stop, status = core.scan_frames(buffer, 4, len(buffer), count, 10)
        region_offsets, region, region_stop, region_status = core.scan_region(
            buffer, 4, len(buffer), count, 10)
        assert (region_offsets, region_stop, region_status) == (offsets, stop, status)
        assert bytes(region) == buffer[4:stop] and core.cut_frames(region) == records


def test_a_region_of_long_records_is_given_as_its_records(core):
    # (16 KiB or more on average: a copy of them would cost more than their bytes objects)
    long = [bytes([i]) * (16384 - 16 + i) for i in range(3)]
    buffer = b"".join(_frames._frame(record) for record in long)
    offsets, records, stop, status = core.scan_region(buffer, 0, len(buffer), 3, 0)
    assert records == long and (stop, status) == (len(buffer), OK)
    assert offsets == core.scan_frames(buffer, 0, len(buffer), 3, 0)[0]
    offsets, region, stop, status = core.scan_region(buffer + _frames._frame(b""), 0,
                                                     len(buffer) + 16, 4, 0)
    assert core.cut_frames(region) == long + [b""]  # (just below 16 KiB a frame: a region)


@pytest.mark.parametrize("frames", [
    _frames._frame(b"abc") + b"\0",  # a header cut short after a whole frame
    _frames._frame(b"abc")[:-1],  # a frame one byte short
    (2**64 - 1).to_bytes(8, "little") + bytes(20),  # a length past the end
    (2**63).to_bytes(8, "little") + bytes(20),
])
def test_cut_frames_refuses_what_is_not_whole_frames(core, frames):
    with pytest.raises(ValueError, match=r"^cut_frames: the buffer holds no whole frame at "
                                         rf"\d+ of its {len(frames)} bytes$"):
        core.cut_frames(frames)


# -- the core reads what the pure path reads ----------------------------------------------


@given(st.randoms(use_true_random=False), st.sampled_from(["raise", "skip"]),
       st.sampled_from([1, 7, 1000]))
@settings(max_examples=300)
def test_core_and_pure_path_read_hostile_buffers_alike(rng, policy, batch_size):
    if fuzz_records.core_module() is None:
        pytest.skip("the compiled core is not built here")
    fuzz_records.check_core_agrees(fuzz_records.hostile_frames(rng), policy, batch_size)


def corpus_inputs():
    return sorted(glob.glob(os.path.join(CORPUS, "*.bin")))


def test_the_corpus_is_there():
    assert len(corpus_inputs()) >= 5


@pytest.mark.parametrize("path", corpus_inputs(), ids=os.path.basename)
@pytest.mark.parametrize("policy", ["raise", "skip"])
def test_corpus_inputs_read_alike(core, path, policy):
    with open(path, "rb") as f:
        data = f.read()
    for batch_size in (1, 7, 1000):
        fuzz_records.check_core_agrees(data, policy, batch_size)


@given(st.randoms(use_true_random=False), st.sampled_from(["raise", "skip"]), st.booleans())
@settings(max_examples=100)
def test_core_and_pure_path_read_compressed_hostile_buffers_alike(rng, policy, cut):
    # Offsets count bytes of the inflated stream; a stream cut short is its own damage.
    if fuzz_records.core_module() is None:
        pytest.skip("the compiled core is not built here")
    data = gzip.compress(fuzz_records.hostile_frames(rng), mtime=0)
    if cut:
        data = data[:rng.randrange(len(data))]
    core_result, pure_result = fuzz_records.scan_both(data, policy, 7, "GZIP")
    assert core_result == pure_result


@pytest.mark.parametrize("lossy", ["scan_frames", "scan_region"])
def test_the_comparison_catches_a_core_that_loses_a_record(core, monkeypatch, lossy):
    class Lossy:  # a core whose scan (one of them) drops the last record it took
        masked_crc32c = core.masked_crc32c
        scan_frames, scan_region, cut_frames = core.scan_frames, core.scan_region, \
            core.cut_frames

    def scan_and_lose(*args):
        offsets, taken, stop, status = getattr(core, lossy)(*args)
        if not offsets:
            return offsets, taken, stop, status
        if lossy == "scan_region":  # (the region without its last frame)
            return offsets[:-1], bytes(taken)[:offsets[-1] - offsets[0]], stop, status
        return offsets[:-1], taken[:-1], stop, status

    setattr(Lossy, lossy, staticmethod(scan_and_lose))
    monkeypatch.setattr(fuzz_records, "core_module", lambda: Lossy)
    data = b"".join(_frames._frame(bytes([i])) for i in range(3))
    with pytest.raises(AssertionError, match="core and pure path disagree"):
        fuzz_records.check_core_agrees(data, "raise")


def test_a_record_longer_than_a_read_reads_alike(core):
    big = random.Random(2).randbytes(3 << 20)  # three of the scanner's 1 MiB reads
    data = _frames._frame(b"a") + _frames._frame(big) + _frames._frame(b"b")
    core_result, pure_result = fuzz_records.scan_both(data, "raise", 10)
    assert core_result == pure_result
    assert [record for _, record in core_result[0]] == [b"a", big, b"b"]
    damaged = bytearray(data)
    damaged[17 + 12 + 100] ^= 1
    core_result, pure_result = fuzz_records.scan_both(bytes(damaged), "raise", 10)
    assert core_result == pure_result and core_result[1][0] is DataLossError


def unframed(frames, lengths, core):
    """What unframe_many gives with ``core`` (None: the pure path): values or the error."""
    with mock.patch.object(_frames, "core", core):
        try:
            return list(_frames.unframe_many(frames, lengths, lambda i: ("f", 100 * i)))
        except DataLossError as e:
            return type(e), str(e), e.offset, e.path


@given(st.lists(st.binary(max_size=3), min_size=1, max_size=20), st.randoms(use_true_random=False),
       st.sampled_from(["none", "flip", "cut", "index"]))
@settings(max_examples=300)
def test_unframe_many_gives_the_pure_paths_values_and_errors(records, rng, damage):
    # Short records repeat lengths, so that the pure path's runs (8 or more) are taken too.
    core = fuzz_records.core_module()
    if core is None:
        pytest.skip("the compiled core is not built here")
    frames = [bytearray(_frames._frame(record)) for record in records]
    lengths = np.array([len(frame) for frame in frames])
    i = rng.randrange(len(frames))
    if damage == "flip":
        frames[i][rng.randrange(len(frames[i]))] ^= 1 << rng.randrange(8)
    elif damage == "cut":
        del frames[i][rng.randrange(len(frames[i])):]
    elif damage == "index":
        lengths[i] += rng.choice([-1, 1, 2**40])
    views = [memoryview(frame) for frame in frames]
    got = unframed(views, lengths, core)
    assert got == unframed(views, lengths, None)
    assert (got == records) == (damage == "none")


# -- threads ------------------------------------------------------------------------------


def test_four_threads_scan_at_once_and_every_value_is_right(core, tmp_path):
    records = [random.Random(i).randbytes(i % 700) for i in range(3000)]
    buffer = b"".join(map(_frames._frame, records))
    path = tmp_path / "four.tfrecord"
    path.write_bytes(buffer)
    results, errors = [None] * 4, []

    def scan(i):
        try:
            if i % 2:  # through the record scanner, in batches
                with RecordScanner(path) as scanner:
                    results[i] = [record for _, record in scanner.next_batch(len(records) + 1)]
            else:  # the core's call, over the one shared buffer, 100 times
                for _ in range(100):
                    got = core.scan_frames(buffer, 0, len(buffer), len(records), 0)[1]
                    if got != records:
                        results[i] = got
                        return
                results[i] = got
        except BaseException as e:  # noqa: B902 - reported by the test thread
            errors.append(e)

    threads = [threading.Thread(target=scan, args=(i,), name=f"scan-{i}") for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert all(result == records for result in results)


def test_the_scan_releases_the_gil(core):
    buffer = b"".join(_frames._frame(bytes(1 << 20)) for _ in range(64))
    overlapped = runs_beside(lambda: core.scan_frames(buffer, 0, len(buffer), 64, 0))
    assert overlapped[-1], f"the main thread never ran during a scan: {overlapped}"


_TOKENS = b"\n\x14\n\x12\n\x01t\x12\r\x1a\x0b\n\t" + bytes(range(1, 10))  # {t: int64 1..9}
_TOKENS_SPEC = ((b"t", 0, True, 1, False),)


def _walk(core, records) -> None:
    n = len(records)
    back = bytearray(n)
    core.walk_examples(records, _TOKENS_SPEC, (None,), bytearray(n), bytearray(8 * n), back)
    assert not any(back)


def test_the_walk_of_a_chunk_releases_the_gil(core):
    chunk = [_TOKENS] * 200_000
    overlapped = runs_beside(lambda: _walk(core, chunk))
    assert overlapped[-1], f"the main thread never ran during a walk: {overlapped}"


def test_a_long_join_releases_the_gil_and_gives_its_items_back(core):
    # decode_raw's join of a chunk's strings (mnist: 2,048 images of 784 bytes) held the GIL
    # for a quarter of a runner's time with it; the items are held by references of the call's
    # own while it copies, and let go after
    items = [bytes([i]) * (1 << 16) for i in range(64)]
    before = [sys.getrefcount(item) for item in items]
    joined = []
    overlapped = runs_beside(lambda: joined.append(core.join_equal(items)))
    assert overlapped[-1], f"the main thread never ran during a join: {overlapped}"
    assert all(bytes(j) == b"".join(items) for j in joined)
    assert [sys.getrefcount(item) for item in items] == before


def test_walks_of_one_small_record_each_keep_the_gil(core):
    # letting go of the GIL for one record cost more than the walk: two runner threads that
    # parse a record per call handed the GIL to each other on every call (_core/gil.h)
    overlapped = runs_beside(lambda: [_walk(core, [_TOKENS]) for _ in range(20_000)])
    assert overlapped == [False] * 5, overlapped


# -- the switches and `queuepipe info` -----------------------------------------------------


def python(code, **env):
    """Runs ``code`` in a fresh interpreter with ``env`` added; returns the finished process."""
    full = {k: v for k, v in os.environ.items()
            if k not in ("QUEUEPIPE_PURE", "QUEUEPIPE_REQUIRE_CORE")}
    full.update(env, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-W", "always::RuntimeWarning", "-c", code],
                          capture_output=True, text=True, env=full, cwd=ROOT, timeout=60)


UNLOADABLE = "import sys; sys.modules['queuepipe._qpcore'] = None\n"
STALE = ("import sys, types; stale = types.ModuleType('queuepipe._qpcore'); "
         "stale.ABI_VERSION = 0; stale.__file__ = 'old.so'; "
         "sys.modules['queuepipe._qpcore'] = stale\n")
SHOW = "import queuepipe, queuepipe._core as c; print(c.core is None, '|', c.description)"


def test_pure_switch_forces_the_pure_path(core):
    run = python(SHOW, QUEUEPIPE_PURE="1")
    assert run.returncode == 0 and run.stderr == ""
    assert run.stdout == "True | not used: the pure-Python path is forced (QUEUEPIPE_PURE=1)\n"
    run = python(SHOW)
    assert run.stdout.startswith("False | compiled and loaded from ") and run.stderr == ""


@pytest.mark.parametrize("setup, problem", [
    (UNLOADABLE, r"the compiled core queuepipe\._qpcore is not built or does not load \("
                 r"import of queuepipe\._qpcore halted; None in sys\.modules\)"),
    (STALE, r"the compiled core old\.so is stale: its ABI_VERSION is 0, this queuepipe "
            rf"needs {_core.ABI_VERSION}; rebuild it \(make, or pip install -e \. again\)"),
], ids=["unloadable", "stale"])
def test_a_core_that_cannot_be_used(setup, problem):
    import re

    run = python(setup + SHOW, QUEUEPIPE_REQUIRE_CORE="1")
    assert run.returncode == 1
    assert re.search(r"ImportError: QUEUEPIPE_REQUIRE_CORE is set but " + problem + "\n",
                     run.stderr), run.stderr
    run = python(setup + SHOW)  # without the switch: one warning, and the pure path
    assert run.returncode == 0 and run.stdout.startswith("True | not used: ")
    assert re.search(r"RuntimeWarning: queuepipe runs on its pure-Python path, correct but "
                     r"slower: " + problem + "\n", run.stderr), run.stderr
    assert run.stderr.count("RuntimeWarning") == 1


def test_abi_numbers_of_both_sides_are_one(core):
    assert core.ABI_VERSION == _core.ABI_VERSION


def test_info_says_which_path_runs(capsys):
    assert cli.main(["info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "queuepipe", "core", "crc32c", "python", "numpy", "protobuf"]
    assert lines[1] == f"core: {_core.description}"
    if _core.core is not None:
        assert lines[2] == f"crc32c: {_core.core.CRC_INSTRUCTION} (the compiled core)"
    else:
        assert lines[2] == "crc32c: the crc32c package (the pure-Python path)"


def test_info_in_a_fresh_process_under_each_switch(core):
    run = python("from queuepipe import cli; cli.main(['info'])", QUEUEPIPE_PURE="1")
    assert "core: not used: the pure-Python path is forced (QUEUEPIPE_PURE=1)\n" in run.stdout
    run = python("from queuepipe import cli; cli.main(['info'])", QUEUEPIPE_REQUIRE_CORE="1")
    assert f"crc32c: {core.CRC_INSTRUCTION} (the compiled core)\n" in run.stdout


@pytest.mark.parametrize("required", [False, True])
def test_a_build_without_a_compiler_warns_once_or_fails_when_the_core_is_required(
        tmp_path, required):
    env = {k: v for k, v in os.environ.items() if k != "QUEUEPIPE_REQUIRE_CORE"}
    env.update(CC="/bin/false", **({"QUEUEPIPE_REQUIRE_CORE": "1"} if required else {}))
    run = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--build-lib", str(tmp_path / "lib"),
         "--build-temp", str(tmp_path / "temp")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert not (tmp_path / "lib").exists()
    if required:
        assert run.returncode == 1 and "error: Command" in run.stderr
    else:
        assert run.returncode == 0
        assert run.stderr.count("WARNING: queuepipe's compiled core was not built (") == 1
        assert "queuepipe will run on its pure-Python path" in run.stderr


def test_unframe_refuses_lengths_not_aligned_for_int64(core):
    # lengths are read as int64_t: at an odd address that load was undefined (UBSan: load of
    # misaligned address), whatever x86 made of it
    lengths = memoryview(bytearray(9))[1:]
    with pytest.raises(ValueError, match=r"^unframe: lengths starts at an address that is not "
                                         r"a multiple of 8 \(int64\)$"):
        core.unframe([_frames._frame(b"x")], lengths)


# -- the keys of records ---------------------------------------------------------------------


@given(st.binary(max_size=40),
       st.lists(st.one_of(st.integers(-2**63, 2**63 - 1), st.booleans()), max_size=30))
@settings(max_examples=300, deadline=None)
def test_both_key_formatters_give_the_same_keys(core, prefix, positions):
    from queuepipe.readers import _pure_format_keys

    assert core.format_keys(prefix, positions) == _pure_format_keys(prefix, positions)


def test_the_key_formatter_gives_the_keys_of_every_kind_of_prefix(core):
    # a NUL or % in the name: the pure twin formats such keys one by one
    for prefix in (b"mem://a\0b%", b"f%d", b"", "é/x".encode()):
        for positions in ([], [0], [9, 10, 99, 100, 2**63 - 1, -2**63]):
            assert core.format_keys(prefix, positions) == [
                prefix + b":" + str(position).encode() for position in positions]


@pytest.mark.parametrize("positions, error, message", [
    ([0, 1.5], TypeError, r"^format_keys: positions\[1\] is float, not int$"),
    ([2**63], OverflowError, r"int too big to convert"),
    ((0, 1), TypeError, r"must be list, not tuple"),
])
def test_the_key_formatter_refuses_what_no_reader_gives(core, positions, error, message):
    with pytest.raises(error, match=message):
        core.format_keys(b"f", positions)


# -- Blocks and the buffers kept for them (module_blocks.c) ----------------------------------


def test_blocks_are_writable_buffers_of_the_sizes_asked(core):
    sizes = [0, 8, 1 << 16, 3 * (1 << 18) + 8]
    blocks = core.blocks(sizes)
    assert [memoryview(block).nbytes for block in blocks] == sizes
    for block in blocks:
        view = np.frombuffer(block, dtype=np.uint8)
        view[:] = 7
        assert view.flags.writeable and (view == 7).all()


@pytest.mark.parametrize("sizes, error, message", [
    ((1024,), TypeError, "sizes must be a list of ints"),
    ([8, -1], ValueError, r"sizes\[1\] is negative \(-1\)"),
    (["8"], TypeError, r"sizes\[0\] is not an int"),
    ([True], TypeError, r"sizes\[0\] is not an int"),
    ([1 << 70], OverflowError, r"sizes\[0\] is too large"),
])
def test_blocks_refuse_what_is_not_a_list_of_sizes(core, sizes, error, message):
    kept = core.blocks_kept()
    with pytest.raises(error, match=rf"^blocks: {message}$"):
        core.blocks(sizes)
    assert core.blocks_kept()[0] <= kept[0]  # (a block made before the refusal: let go)


def test_a_block_past_what_memory_holds_is_a_memory_error(core):
    with pytest.raises(MemoryError):
        core.blocks([1 << 62])


def test_a_freed_block_is_kept_and_given_again_within_the_bounds(core):
    core.blocks_release()  # (a buffer another test left kept could fit better than this one)
    size = 1_234_568
    block = core.blocks([size])[0]
    address = np.frombuffer(block, dtype=np.uint8).ctypes.data
    del block
    again = core.blocks([size - 8])[0]
    assert np.frombuffer(again, dtype=np.uint8).ctypes.data == address
    many = core.blocks([1 << 20] * 100)
    del many  # more than the pool keeps: the rest are freed
    buffers, kept_bytes = core.blocks_kept()
    assert 0 < buffers <= 32 and kept_bytes <= 32 << 20


def test_a_kept_buffer_left_dirty_changes_no_value_of_a_walk(core):
    # a walk's ragged numbers start in the biggest kept buffer: what an earlier batch left
    # there must never show through
    dirty = core.blocks([4 << 20] * 4)
    for block in dirty:
        np.frombuffer(block, dtype=np.uint8)[:] = 0xAB
    del dirty, block
    records = [_TOKENS] * 5000
    n = len(records)
    counts = np.zeros(n, dtype=np.int64)
    (values,) = core.walk_examples(records, _TOKENS_SPEC, (None,), bytearray(n), counts,
                                   bytearray(n))
    numbers = np.frombuffer(values, dtype=np.int64)
    assert (counts == 9).all() and len(numbers) == 9 * n
    assert (numbers.reshape(n, 9) == np.arange(1, 10)).all()


def test_a_walk_of_short_lists_gives_the_big_kept_buffer_back(core):
    # a walk's numbers start in the biggest kept buffer; a few short lists do not keep its
    # megabytes alive for as long as their arrays live: they are copied out to a buffer of
    # their size, and the big one is kept again
    core.blocks_release()
    big = core.blocks([8 << 20])[0]
    del big
    assert core.blocks_kept() == (1, 8 << 20)
    n = 3
    counts = np.zeros(n, dtype=np.int64)
    (values,) = core.walk_examples([_TOKENS] * n, _TOKENS_SPEC, (None,), bytearray(n),
                                   counts, bytearray(n))
    assert core.blocks_kept() == (1, 8 << 20)
    assert memoryview(values).nbytes == 9 * n * 8
    assert (np.frombuffer(values, dtype=np.int64).reshape(n, 9) == np.arange(1, 10)).all()


def _framed(records):
    return b"".join(_frames._frame(record) for record in records)


def test_records_let_go_of_are_made_again_with_their_new_bytes_and_hash(core):
    # Records of 600 bytes (malloc's, not CPython's small-object allocator's): once nobody
    # but the core holds one, the core makes it again for a later record. What a caller
    # sees is a new record: its bytes, its length, its hash (the old one, cached, forgotten).
    core.blocks_release()
    rng = random.Random(5)
    chunks = [[bytes(rng.randrange(256) for _ in range(600)) for _ in range(50)]
              for _ in range(4)]
    seen = {}
    for records in chunks:
        _, got, _, _ = core.scan_frames(_framed(records), 0, len(_framed(records)), 100, 0)
        assert got == records
        for record, expected in zip(got, records):
            assert hash(record) == hash(bytes(bytearray(expected)))
            seen.setdefault(id(record), 0)
            seen[id(record)] += 1
        del got, record
    assert max(seen.values()) > 1 and core.bytes_kept() > 0  # (made again, at least once)
    core.blocks_release()
    assert core.bytes_kept() == 0


def test_a_record_still_held_is_never_made_again(core):
    # a caller's reference keeps a record as it is, however many chunks come after it
    core.blocks_release()
    held = []
    for k in range(40):
        records = [bytes([k, i]) * 300 for i in range(64)]
        framed = _framed(records)
        _, got, _, _ = core.scan_frames(framed, 0, len(framed), 100, 0)
        held.append((got[k % 64], records[k % 64]))  # one of each chunk kept
        regions = core.scan_region(framed, 0, len(framed), 100, 0)[1]
        strings = core.cut_frames(regions)  # (the first pass's records too)
        assert strings == records
        del got, strings
    assert all(record == expected for record, expected in held)
    core.blocks_release()


def test_the_objects_kept_of_a_size_hold_a_few_mib_at_most(core):
    # a plain reader's long records are kept too, until a read plan closes: 4 MiB a size
    core.blocks_release()
    records = [bytes([i]) * 60000 for i in range(100)]
    framed = _framed(records)
    _, got, _, _ = core.scan_frames(framed, 0, len(framed), 100, 0)
    assert got == records
    del got
    assert 0 < core.bytes_kept() <= (4 << 20) // 60000
    core.blocks_release()


def test_string_values_are_made_again_only_once_let_go_of(core):
    # a dense string feature's values (an mnist image each) come from the same kept objects
    spec = ((b"image", 2, False, 1, True),)
    kept_values = []
    for k in range(30):
        images = [bytes([k]) * 784 + bytes([i]) for i in range(32)]
        records = [make_example({"image": image}).SerializeToString() for image in images]
        out = np.empty(32, dtype=object)
        core.walk_examples(records, spec, (out,), bytearray(32), np.zeros(32, np.int64),
                           bytearray(32))
        assert out.tolist() == images
        assert [hash(v) for v in out.tolist()] == [hash(bytes(bytearray(i))) for i in images]
        kept_values.append((out[k], images[k]))
        del out
    assert all(value == image for value, image in kept_values)
    core.blocks_release()


def test_releasing_the_kept_buffers_frees_them_all(core):
    del_me = core.blocks([1 << 20] * 4)
    del del_me
    assert core.blocks_kept()[0] >= 4
    core.blocks_release()
    assert core.blocks_kept() == (0, 0)
    block = core.blocks([1 << 20])[0]  # (and blocks are made as before)
    assert memoryview(block).nbytes == 1 << 20
