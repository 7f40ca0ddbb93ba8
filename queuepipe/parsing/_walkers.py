"""The Example walk of a batch, and of one record: one interface, two implementations.

A walker is ``walker(records, features, sinks) -> left``: it writes the values of every record
it takes into the features' sinks (:mod:`._sinks`) and returns, in order, the indices of the
records it leaves to the per-record parser (:func:`._record._parse_record`), which decides
their values or raises TF's error. A walker never raises for a record's content, so every
error is the per-record parser's and the same whichever walker ran.

- :func:`pure_walk`: the NumPy bulk parser (:func:`._bulk._parse_fast`), the reference.
- :func:`core_walk`: the compiled core's wire walk (``queuepipe/_core/wire.c``), one C call
  per batch with the GIL released. It takes a record only in the plain encoding and when it
  parses cleanly with the spec, and leaves every other record.

For one record (``parse_single_example``), ``single(record, features) -> outputs or None``
gives the record's outputs as ``parse_single_example`` returns them, or None to leave the
record to the general path (which raises the errors): :func:`pure_single` reads it with
protobuf (:func:`._single._parse_single_plain`), :func:`core_single` with the wire walk.
For one SequenceExample, ``sequence(record, context, lists, list_specs) -> (context
outputs, sequence outputs) or None`` likewise: :func:`pure_sequence` leaves every record
to the general path (protobuf), :func:`core_sequence` takes the plain ones.

:data:`walk`, :data:`single` and :data:`sequence` are the core's when the core is loaded
(see :mod:`queuepipe._core`), else the pure ones.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from queuepipe import _core
from queuepipe import dtypes as _dtypes
from queuepipe.parsing._bulk import _parse_fast
from queuepipe.parsing._single import _SMALL_INT64, _parse_single_plain
from queuepipe.parsing._sinks import _new_sparse, _RaggedOut, _shaped, _sparse_1d
from queuepipe.parsing._specs import _FIXED, _SEQ, _VAR, _frombuffer
from queuepipe.sparse import SparseValue, counted, counting

__all__ = ["Walker", "pure_walk", "core_walk", "pure_single", "core_single", "pure_sequence",
           "core_sequence", "core_available", "walk", "single", "sequence"]

Walker = Callable[[List[bytes], Sequence, Sequence], Sequence[int]]

_DTYPE_CODES = {_dtypes.int64: 0, _dtypes.float32: 1, _dtypes.string: 2}  # wire.h's qp_dtype
_INT64 = np.dtype(np.int64)


def pure_walk(records: List[bytes], features: Sequence, sinks: Sequence) -> Sequence[int]:
    """The pure-Python walker: :func:`._bulk._parse_fast`."""
    return _parse_fast(records, features, sinks)


def core_available() -> bool:
    """Whether the compiled core is loaded and has the Example walks."""
    return _core.core is not None and hasattr(_core.core, "walk_examples") \
        and hasattr(_core.core, "walk_sequence_example")


def _compiled() -> Any:
    """The compiled core (the core walkers run only where :func:`core_available`)."""
    return _core.core


def _core_spec(features) -> tuple:
    """The features as ``walk_examples`` takes them, kept on the features list when it can
    hold it (a parse_example spec's normalized features are cached and reused)."""
    spec = getattr(features, "core_spec", None)
    if spec is None:
        spec = tuple((feature.key.encode("utf-8"), _DTYPE_CODES[feature.dtype],
                      feature.kind != _FIXED, feature.size,
                      feature.kind == _FIXED and feature.default is None)
                     for feature in features)
        if hasattr(features, "core_spec"):
            features.core_spec = spec
    return spec


# How walk_examples makes a ragged string feature's values: an object array of n items.
_object_array = functools.partial(np.empty, dtype=object)


def core_walk(records: List[bytes], features: Sequence, sinks: Sequence) -> Sequence[int]:
    """The compiled walker: dense values, numbers and strings, are written straight into the
    sinks' arrays, over the defaults put there first (a record that lacks the feature keeps
    its default); ragged values come back per feature, strings in an object array the walk
    fills, and go into the sinks in one block."""
    n = len(records)
    for feature, sink in zip(features, sinks):
        if feature.kind == _FIXED and feature.default is not None:
            sink.out[...] = feature.default
    outs = tuple(sink.out if feature.kind == _FIXED
                 else _object_array if feature.dtype == _dtypes.string else None
                 for feature, sink in zip(features, sinks))
    present = np.empty((len(features), n), dtype=np.uint8)  # (the walk writes every cell)
    counts = np.empty((len(features), n), dtype=np.int64)  # (read for the records taken)
    handed_back = np.frombuffer(bytearray(n), dtype=np.uint8)  # (np.zeros lets go of the GIL)
    results = _compiled().walk_examples(records, _core_spec(features), outs, present, counts,
                                        handed_back)
    # (bytes' search, not NumPy's: its loops over n marks let go of the GIL from 500 items
    # on, and a chunk's walk is followed by three then, each a hand-over to another thread)
    everyone = 1 not in handed_back.tobytes()
    rows = counting(n) if everyone else np.flatnonzero(handed_back == 0)
    for feature, sink, result, count in zip(features, sinks, results, counts):
        if feature.kind == _FIXED:
            continue
        # strings: the object array made by _object_array; numbers: the block the walk
        # gathered them in, handed over without a copy (a writable buffer: the array owns
        # writable memory, as the pure path's do)
        values = result if feature.dtype == _dtypes.string else \
            np.frombuffer(result, dtype=feature.dtype)
        sink.put_ragged(rows, count if everyone else count[rows], values)
    return [] if everyone else np.flatnonzero(handed_back).tolist()


def pure_single(record: bytes, features: Sequence) -> Optional[Dict[str, Any]]:
    """One record's outputs read with protobuf: :func:`._single._parse_single_plain`."""
    return _parse_single_plain(record, features)


def _single_plan(features) -> Callable[[bytes], Optional[Dict[str, Any]]]:
    """The function of one record that :func:`core_single` runs for ``features``, made once
    per normalized spec (kept on the features list when it can hold it, as
    :func:`_core_spec`): it calls ``walk_one`` and makes each feature's output from what the
    walk gives, or returns None when the walk leaves the record.

    It is generated as one expression per feature, as ``._single._compile_single`` generates
    its parsers: a record then runs no loop over the features and no dispatch on their kinds
    (about 0.4 us of a tokens record's 2.9). Only names made here and the dtypes' item sizes
    (ints, through ``operator.index``) enter the source; the keys, dtypes, shapes and
    defaults are passed in ``namespace`` as values.
    """
    plan = getattr(features, "single_plan", None)
    if plan is not None:
        return plan
    namespace: Dict[str, Any] = {
        "walk_one": _core.core.walk_one, "spec": _core_spec(features),  # type: ignore[union-attr]
        "forms": bytes(feature.dtype == _INT64 and (
            feature.kind == _VAR or feature.kind == _FIXED and feature.shape == ())
            for feature in features),
        "_SMALL_INT64": _SMALL_INT64, "_int64": np.int64,
        "_counted": counted, "_INT64": _INT64, "_new_sparse": _new_sparse,
        "SparseValue": SparseValue, "_frombuffer": _frombuffer, "_sparse_1d": _sparse_1d,
        "_values": _values, "_rows": _rows}
    statements, outputs = [], []
    for i, feature in enumerate(features):
        namespace.update({f"key{i}": feature.key, f"dtype{i}": feature.dtype,
                          f"shape{i}": feature.shape, f"size{i}": feature.size})
        strings = feature.dtype == _dtypes.string
        if feature.kind == _VAR and feature.dtype == _INT64:
            # (see forms) 0, 1, ..., n and the n values in one buffer: indices, dense shape
            # and values are three views of it, disjoint
            statements += [f"w{i} = _frombuffer(r{i}, _INT64)", f"n{i} = len(w{i}) >> 1"]
            value = (f"_new_sparse(SparseValue, (w{i}[:n{i}, None], w{i}[n{i} + 1:], "
                     f"w{i}[n{i}:n{i} + 1]))")
        elif feature.kind == _VAR and not strings:  # (_sparse_1d inlined)
            statements += [f"n{i} = len(r{i}) // {operator.index(feature.dtype.itemsize)}",
                           f"numbers{i} = _counted(n{i} + 1)"]
            value = (f"_new_sparse(SparseValue, (numbers{i}[:n{i}, None], "
                     f"_frombuffer(r{i}, dtype{i}), numbers{i}[n{i}:]))")
        elif feature.kind == _VAR:
            value = f"_sparse_1d(_values(dtype{i}, r{i}))"
        elif feature.kind != _FIXED:
            value = f"_rows(_values(dtype{i}, r{i}), size{i}, shape{i})"
        else:
            # a scalar's default is a NumPy scalar or bytes: immutable, given as it is; a
            # required feature has none (the walk leaves a record that lacks it)
            default = feature.default
            scalar = feature.shape == ()
            namespace[f"default{i}"] = default[0] if default is not None and scalar \
                else default
            if scalar:
                # an int64 comes as an int (see forms): 0..127 from a table of NumPy scalars
                value = f"r{i}[0]" if strings else \
                    f"(_SMALL_INT64[r{i}] if 0 <= r{i} < 128 else _int64(r{i}))" \
                    if feature.dtype == _INT64 else f"_frombuffer(r{i}, dtype{i})[0]"
                value = f"default{i} if r{i} is None else {value}"
            else:
                made = f"_values(dtype{i}, r{i})" if strings else f"_frombuffer(r{i}, dtype{i})"
                value = f"(default{i}.copy() if r{i} is None else {made})"
                if strings or len(feature.shape) != 1:
                    value += f".reshape(shape{i})"
        outputs.append(f"key{i}: {value}")
    results = "".join(f"r{i}, " for i in range(len(features)))
    source = "".join(f"    {line}\n" for line in (
        "found = walk_one(record, spec, forms)", "if found is None:", "    return None",
        *([f"{results}= found"] if results else []), *statements,
        f"return {{{', '.join(outputs)}}}"))
    # noqa below: only names, indices and itemsizes are in the source; keys, dtypes, shapes
    # and defaults are values of the namespace
    exec(f"def plan(record):\n{source}", namespace)  # noqa: S102 - nothing from data
    plan = namespace["plan"]
    if hasattr(features, "single_plan"):
        features.single_plan = plan
    return plan


def core_single(record: bytes, features: Sequence) -> Optional[Dict[str, Any]]:
    """One record's outputs by the compiled walk (``walk_one``), shaped as
    ``parse_single_example`` returns them (a NumPy scalar or ``bytes`` for a scalar, an array
    of the shape, a SparseValue with ``[N, 1]`` indices); None when the walk leaves the
    record. Runs the spec's generated :func:`_single_plan`: this runs once per record."""
    try:
        plan = features.single_plan  # type: ignore[attr-defined]
    except AttributeError:  # a list that cannot keep it
        plan = None
    return (plan or _single_plan(features))(record)


def _rows(values: np.ndarray, size: int, shape: tuple) -> np.ndarray:
    """A FixedLenSequenceFeature's flat values as rows of its ``shape`` (``size`` values a
    row)."""
    return values.reshape(((len(values) // size if size else 0),) + shape)


def _values(dtype, result: Any) -> np.ndarray:
    """A feature's flat values (of ``dtype``) from what the walk left for it: a list of bytes
    (an object array), or a bytearray of numbers (the array owns writable memory)."""
    if type(result) is list:
        values = np.empty(len(result), dtype=object)
        values[:] = result
        return values
    return _frombuffer(result, dtype)


def pure_sequence(record: bytes, context: Sequence, lists: Sequence,
                  list_specs: Sequence) -> Optional[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """The pure path takes a SequenceExample with protobuf (in ``._sequence``): None."""
    return None


def core_sequence(record: bytes, context: Sequence, lists: Sequence,
                  list_specs: Sequence) -> Optional[Tuple[Dict[str, Any], Dict[str, Any]]]:
    """One SequenceExample's ``(context, sequence)`` outputs by the compiled walk, as
    ``parse_single_sequence_example`` returns them; None when the walk leaves the record."""
    outs = tuple(np.empty(feature.size, dtype=feature.dtype)
                 if feature.kind == _FIXED and feature.dtype != _dtypes.string else None
                 for feature in context)
    list_spec = tuple((feature.key.encode("utf-8"), _DTYPE_CODES[feature.dtype],
                       feature.kind == _SEQ, feature.size,
                       feature.kind == _SEQ and not spec.allow_missing)
                      for feature, spec in zip(lists, list_specs))
    found = _compiled().walk_sequence_example(record, _core_spec(context), list_spec, outs)
    if found is None:
        return None
    context_out: Dict[str, Any] = {}
    for feature, out, (held, _, result) in zip(context, outs, found[0]):
        values = out if result is None else _values(feature.dtype, result)
        if feature.kind == _VAR:
            context_out[feature.key] = _sparse_1d(values)
        else:
            context_out[feature.key] = _shaped(values if held else feature.default,
                                               feature.shape)
    sequence_out: Dict[str, Any] = {}
    for feature, (steps, result) in zip(lists, found[1]):
        values = _values(feature.dtype, result)
        counts = np.frombuffer(steps, dtype=np.int64)
        if feature.kind == _SEQ:
            sequence_out[feature.key] = values.reshape((len(counts),) + feature.shape)
            continue
        sink = _RaggedOut(feature, len(counts))
        sink.put_ragged(np.arange(len(counts)), counts, values)
        sequence_out[feature.key] = sink.finish()
    return context_out, sequence_out


walk: Walker = core_walk if core_available() else pure_walk
single: Callable[[bytes, Sequence], Optional[Dict[str, Any]]] = (
    core_single if core_available() else pure_single)
sequence: Callable[[bytes, Sequence, Sequence, Sequence],
                   Optional[Tuple[Dict[str, Any], Dict[str, Any]]]] = (
    core_sequence if core_available() else pure_sequence)
