"""Parsing serialized Examples and SequenceExamples into NumPy arrays, as TF's parsing ops do.

A feature spec maps each feature key to :class:`FixedLenFeature` (a dense array of a fixed
shape), :class:`VarLenFeature` (a :class:`SparseValue`) or :class:`FixedLenSequenceFeature`
(rows of a fixed shape, as many as the record holds). The outputs, the defaults and the errors
are TensorFlow's (checked against TF 2.21): a missing required feature, a wrong data type or
a wrong number of values raises :class:`~queuepipe.errors.InvalidArgumentError` with TF's
words, naming the feature key, the record's index in the batch and its name (``Name:``), which
readers make ``b"<file>:<offset>"``. Strings come out as ``bytes`` (object arrays of bytes).

Usage::

    spec = {"image": qp.FixedLenFeature([], qp.string),
            "label": qp.FixedLenFeature([], qp.int64)}
    keys, records = reader.read_up_to(filename_queue, 128)
    batch = qp.parse_example(records, spec, example_names=keys)
    images = qp.decode_raw(batch["image"], qp.uint8)  # [128, 784]

``parse_example`` is the bulk path. Where the compiled core is loaded, it walks the whole
batch in C in one call, without the GIL (see :mod:`._walkers`); the pure path is this:
records in a batch usually share one layout: the same
features with values of the same sizes. It groups records by length, walks one of them (the
template) to find where each value lies, checks with NumPy that every other record's bytes
outside the values equal the template's, and decodes the values of the whole group at once
(see :mod:`queuepipe.protos._layout`). Records that differ are parsed one by one with
protobuf. Both paths give identical results; errors are always reported by the per-record
path, so they are the same whichever path saw the record first.

``decode_raw`` and ``decode_csv`` turn the parsed bytes into numbers.

The modules, in the order a record meets them: :mod:`._specs` (the feature specs),
:mod:`._example` (``parse_example``, ``parse_single_example``), :mod:`._items` (a batch's
records, and ``decode_raw``'s strings, checked and joined in one pass), :mod:`._walkers`
(the walk of a batch or of one record: the compiled core's, or the pure one), :mod:`._bulk`
(the layout and ragged paths), :mod:`._single` (one record without protobuf), :mod:`._record`
(the per-record parser, which raises every error), :mod:`._sinks` (the outputs),
:mod:`._sequence` (SequenceExamples), :mod:`._raw` (``decode_raw``) and :mod:`._csv`
(``decode_csv``).
"""

from queuepipe.parsing._bulk import _parse_fast
from queuepipe.parsing._csv import decode_csv
from queuepipe.parsing._example import (_example_features, _parse_batch, parse_example,
                                        parse_single_example)
from queuepipe.parsing._raw import decode_raw
from queuepipe.parsing._sequence import parse_sequence_example, parse_single_sequence_example
from queuepipe.parsing._single import _no_parser
from queuepipe.parsing._sinks import _sink, _unbatch
from queuepipe.parsing._specs import (FixedLenFeature, FixedLenSequenceFeature, SparseFeature,
                                      VarLenFeature)
from queuepipe.sparse import SparseValue

__all__ = ["FixedLenFeature", "VarLenFeature", "FixedLenSequenceFeature", "SparseFeature",
           "SparseValue",
           "parse_single_example", "parse_example", "parse_single_sequence_example",
           "parse_sequence_example", "decode_raw", "decode_csv"]
