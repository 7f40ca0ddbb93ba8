"""Plain helpers several test modules share (fixtures live in conftest.py).

Tests import them as ``from helpers import wait_until``: pytest puts ``tests/`` on ``sys.path``.
"""

import gzip
import importlib.util
import os
import struct
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import queuepipe as qp

# The features of the Examples queuepipe.convert makes from IDX files.
IMAGE_SPEC = {"image": qp.io.FixedLenFeature([], qp.string),
              "label": qp.io.FixedLenFeature([], qp.int64)}

_IDX_TYPE_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int16): 0x0B,
                   np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D,
                   np.dtype(np.float64): 0x0E}


def fuzz_target():
    """The atheris target ``fuzz/fuzz_records.py`` as a module (loaded once)."""
    module = _FUZZ_TARGET.get("module")
    if module is None:
        path = os.path.join(os.path.dirname(__file__), os.pardir, "fuzz", "fuzz_records.py")
        spec = importlib.util.spec_from_file_location("fuzz_records", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _FUZZ_TARGET["module"] = module
    return module


_FUZZ_TARGET = {}


def wait_until(condition, what="the condition held", timeout=10.0):
    """Polls ``condition`` until it is true; fails the test after ``timeout`` seconds.

    ``what`` completes "timed out waiting until ..." in the failure message.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        time.sleep(0.002)


def producers_and_consumers(queue, produce, consume, producers, consumers):
    """Runs ``produce(i)`` in ``producers`` threads and ``consume(i)`` in ``consumers``
    threads, closes ``queue`` once every producer is done, and waits for the consumers
    (which end at the queue's ``OutOfRangeError``); returns what any of them raised."""
    errors = []

    def guarded(fn, i):
        try:
            fn(i)
        except BaseException as e:  # noqa: B902 - reported by the test
            errors.append(e)

    making = [threading.Thread(target=guarded, args=(produce, i)) for i in range(producers)]
    taking = [threading.Thread(target=guarded, args=(consume, i)) for i in range(consumers)]
    for thread in making + taking:
        thread.start()
    for thread in making:
        thread.join(30)
    queue.close()
    for thread in taking:
        thread.join(30)
    return errors


def interrupting_at(code, line):
    """A trace function (for ``sys.settrace``) that raises KeyboardInterrupt the first time
    ``line`` of ``code`` runs in the thread that set it, as a Ctrl-C landing there would;
    and the list it notes that in."""
    fired = []

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(line)
            raise KeyboardInterrupt
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code is code else None

    return tracer, fired


def usage_block(obj):
    """The runnable code block (``.. code-block:: python``) of ``obj``'s docstring."""
    lines = obj.__doc__.split(".. code-block:: python", 1)[1].splitlines()[1:]
    first = next(line for line in lines if line.strip())
    indent = len(first) - len(first.lstrip())
    block = []
    for line in lines:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        block.append(line)
    return textwrap.dedent("\n".join(block))


def write_idx(path, array, compress=False):
    """Writes ``array`` as an IDX file (big-endian), the way MNIST's files are made."""
    header = bytes([0, 0, _IDX_TYPE_CODES[array.dtype], array.ndim])
    header += struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    with open(path, "wb") as f:
        f.write(gzip.compress(data) if compress else data)
    return str(path)


def mnist_like(tmp_path, n=5, compress=True):
    """``n`` random 28x28 images and labels written as MNIST's training pair in ``tmp_path``.

    Returns:
      ``(images, labels, images_path, labels_path)``.
    """
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, size=n, dtype=np.uint8)
    suffix = ".gz" if compress else ""
    images_path = write_idx(tmp_path / f"train-images-idx3-ubyte{suffix}", images, compress)
    labels_path = write_idx(tmp_path / f"train-labels-idx1-ubyte{suffix}", labels, compress)
    return images, labels, images_path, labels_path


def runs_beside(work) -> list:
    """Whether the main thread ran while a thread did ``work()``, per attempt (up to 5, until
    it did once).

    With a switch interval far longer than the test, a thread holding the GIL keeps it until
    it lets go itself. The main thread waits for the working thread to start; it can run
    again before the work ends only if the work let go of the GIL. (If the machine does not
    schedule the main thread during one attempt, the next one sees it.)"""
    switch = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    try:
        overlapped = []
        for _ in range(5):
            started, done = threading.Event(), threading.Event()

            def run():
                started.set()
                work()
                done.set()

            thread = threading.Thread(target=run, name="gil-work")
            thread.start()
            started.wait()
            overlapped.append(not done.is_set())
            thread.join()
            if overlapped[-1]:
                break
    finally:
        sys.setswitchinterval(switch)
    return overlapped
