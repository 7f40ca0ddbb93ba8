"""TF1 input code, unchanged but for its import line: ``import queuepipe.compat.v1 as tf``.

TF1 builds a graph and then runs it; this module keeps those two phases (see
:mod:`queuepipe.compat.v1.graph`): ``reader.read``, ``parse_single_example``, the ops and
``tf.train.shuffle_batch`` return symbolic Tensors, ``tf.Session().run(fetches)`` evaluates
them, and the runner threads evaluate the per-element graph once per element. Queues, readers,
producers, the Coordinator and the errors are queuepipe's own, so results are TF's.

A TF1 name this module does not provide raises ``NotImplementedError`` naming it when the
code uses it (at graph-build time), with the native way to do it. New code should use the
native API (``import queuepipe as qp``): ops are plain functions there and batches are
iterators; see ``docs/migration.md``.
"""

from __future__ import annotations

from typing import Any, Dict

from queuepipe import errors, parsing, protos, records, sparse
from queuepipe import dtypes as _dtypes
from queuepipe.compat.v1 import image_ops, inputs, ops
from queuepipe.compat.v1.graph import (
    Graph, Operation, Session, Tensor, get_default_graph, no_op,
)
from queuepipe.coordinator import Coordinator, LooperThread
from queuepipe.producers import limit_epochs, match_filenames_once


class _Namespace:
    """A TF1 sub-namespace (``tf.train``, ``tf.io``, ...): its names, and for any other a
    ``NotImplementedError`` that names it."""

    def __init__(self, path: str, names: Dict[str, Any]):
        self._path = path
        self.__dict__.update(names)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(_missing(f"{self._path}.{name}"))

    def __repr__(self) -> str:
        return f"<queuepipe.compat.v1 namespace '{self._path}'>"


def _missing(name: str) -> str:
    return (f"{name} is not provided by queuepipe.compat.v1: compute it with NumPy on the "
            f"values sess.run gives, or port the pipeline to the native API "
            f"(import queuepipe as qp; docs/migration.md, 'Name by name')")


def _no_op_function(name: str) -> Any:
    def initializer(*args: Any, **kwargs: Any) -> Operation:
        return no_op(name)
    initializer.__name__ = name
    initializer.__doc__ = f"TF1's ``tf.{name}``: an op that does nothing (no variables here)."
    return initializer


def _accepted(*args: Any, **kwargs: Any) -> None:
    """Accepted for TF1 code (eager execution and v2 behaviour do not exist here)."""


global_variables_initializer = _no_op_function("global_variables_initializer")
local_variables_initializer = _no_op_function("local_variables_initializer")
initialize_all_variables = _no_op_function("initialize_all_variables")
initialize_local_variables = _no_op_function("initialize_local_variables")
tables_initializer = _no_op_function("tables_initializer")
disable_v2_behavior = disable_eager_execution = _accepted
InteractiveSession = Session
SparseTensorValue = sparse.SparseValue
FixedLenFeature = parsing.FixedLenFeature
VarLenFeature = parsing.VarLenFeature
SparseFeature = parsing.SparseFeature
FixedLenSequenceFeature = parsing.FixedLenSequenceFeature
as_dtype = _dtypes.as_dtype

for _name in ("float16", "half", "float32", "float64", "double", "int8", "int16", "int32",
              "int64", "uint8", "uint16", "uint32", "uint64", "string", "bool", "complex64",
              "complex128"):
    globals()[_name] = getattr(_dtypes, _name)

for _name in ops.__all__:
    globals()[_name] = getattr(ops, _name)
random_crop = image_ops.random_crop  # TF1 had it at the top level too

for _name in ("FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue", "PriorityQueue",
              "TFRecordReader", "TextLineReader", "FixedLengthRecordReader", "WholeFileReader",
              "IdentityReader"):
    globals()[_name] = getattr(inputs, _name)

_IO = {
    "TFRecordWriter": records.TFRecordWriter, "tf_record_iterator": records.tf_record_iterator,
    "TFRecordOptions": records.TFRecordOptions,
    "TFRecordCompressionType": records.TFRecordCompressionType,
}

train = _Namespace("tf.train", {
    **{name: getattr(inputs, name) for name in (
        "string_input_producer", "range_input_producer", "input_producer",
        "slice_input_producer", "batch", "shuffle_batch", "batch_join", "shuffle_batch_join",
        "maybe_batch", "maybe_shuffle_batch", "maybe_batch_join", "maybe_shuffle_batch_join",
        "QueueRunner", "add_queue_runner", "start_queue_runners")},
    **{name: getattr(protos, name) for name in (
        "Example", "SequenceExample", "Features", "Feature", "FeatureList", "FeatureLists",
        "BytesList", "FloatList", "Int64List")},
    "Coordinator": Coordinator, "LooperThread": LooperThread,
    "match_filenames_once": match_filenames_once, "limit_epochs": limit_epochs,
    "queue_runner": _Namespace("tf.train.queue_runner", {
        "QueueRunner": inputs.QueueRunner, "add_queue_runner": inputs.add_queue_runner}),
})
io = _Namespace("tf.io", {
    **_IO, "FixedLenFeature": FixedLenFeature, "VarLenFeature": VarLenFeature,
    "SparseFeature": SparseFeature,
    "FixedLenSequenceFeature": FixedLenSequenceFeature,
    **{name: getattr(ops, name) for name in (
        "parse_example", "parse_single_example", "parse_single_sequence_example",
        "parse_sequence_example", "decode_raw", "decode_csv")},
    **{name: getattr(image_ops, name) for name in ("decode_jpeg", "decode_png", "decode_image")},
})
python_io = _Namespace("tf.python_io", dict(_IO))
sparse_ns = _Namespace("tf.sparse", {"to_dense": ops.sparse_tensor_to_dense})
image = _Namespace("tf.image", {name: getattr(image_ops, name) for name in image_ops.__all__})
math = _Namespace("tf.math", {name: getattr(ops, name) for name in (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "abs", "sqrt", "square",
    "exp", "log", "equal", "not_equal", "greater", "less", "argmax", "argmin", "reduce_sum",
    "reduce_mean", "reduce_max", "reduce_min", "reduce_prod")})
globals()["sparse"] = sparse_ns
del sparse_ns

__all__ = sorted(name for name, value in globals().items()
                 if not name.startswith("_") and name not in ("annotations", "Any", "Dict")
                 and (not isinstance(value, type(errors)) or value is errors))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise NotImplementedError(_missing(f"tf.{name}"))
