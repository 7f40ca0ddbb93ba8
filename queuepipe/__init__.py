"""queuepipe: TensorFlow 1's queue-based input pipeline in plain Python.

File names feed readers, readers feed parsers, QueueRunner threads fill FIFO and random-shuffle
queues, a Coordinator stops every thread together, and the trainer pulls shuffled NumPy
mini-batches. The TF1 names work at the top level (``qp.shuffle_batch``) and in TF-shaped
namespaces (``qp.train.shuffle_batch``, ``qp.io.parse_single_example``, ``qp.errors``).
Public names are imported lazily, on first use, so ``import queuepipe`` costs almost nothing.
"""

from typing import TYPE_CHECKING

from queuepipe import _core  # noqa: F401 - loads the compiled core once (see _core.py)
from queuepipe import errors
from queuepipe._lazy import namespace, table_of
from queuepipe.dtypes import (  # noqa: A004 - TF's dtype names, bool among them
    as_dtype, bool, complex64, complex128, double, float16, float32, float64, half, int8, int16,
    int32, int64, string, uint8, uint16, uint32, uint64,
)
from queuepipe.errors import (
    AbortedError, CancelledError, DataLossError, DeadlineExceededError,
    FailedPreconditionError, InvalidArgumentError, NotFoundError, OutOfRangeError,
    QueuePipeError,
)

__version__ = "0.1.0"

if TYPE_CHECKING:  # for type checkers and the API pages; at run time the names load lazily
    from queuepipe import (
        batching, coordinator, distributed, dtypes, features, images, integrations, io, monitor,
        parsing, producers, protos, python_io, queues, readers, records, remote, runner, shards,
        sparse, train
    )
    from queuepipe.batching import (
        batch, batch_join, Batches, maybe_batch, maybe_batch_join, maybe_shuffle_batch,
        maybe_shuffle_batch_join, running, shuffle_batch, shuffle_batch_join
    )
    from queuepipe.coordinator import Coordinator, LooperThread
    from queuepipe.features import read_batch_features
    from queuepipe.images import decode_batch, decode_image, decode_jpeg, decode_png
    from queuepipe.monitor import QueueMonitor
    from queuepipe.parsing import (
        decode_csv, decode_raw, FixedLenFeature, FixedLenSequenceFeature, parse_example,
        parse_sequence_example, parse_single_example, parse_single_sequence_example,
        SparseFeature, SparseValue, VarLenFeature
    )
    from queuepipe.producers import (
        input_producer, limit_epochs, match_filenames_once, range_input_producer,
        record_position_producer, slice_input_producer, string_input_producer
    )
    from queuepipe.protos import (
        BytesList, Example, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List,
        make_example, make_sequence_example, SequenceExample
    )
    from queuepipe.queues import (
        FIFOQueue, PaddingFIFOQueue, PriorityQueue, QueueBase, RandomShuffleQueue
    )
    from queuepipe.readers import (
        FixedLengthRecordReader, IdentityReader, KeyedRecordReader, ReaderBase, TextLineReader,
        TFRecordReader, WholeFileReader
    )
    from queuepipe.records import (
        tf_record_iterator, TFRecordCompressionType, TFRecordOptions, TFRecordWriter
    )
    from queuepipe.runner import (
        add_queue_runner, get_default_pipeline, Pipeline, QueueRunner, start_queue_runners
    )
    from queuepipe.shards import write_shards

_LAZY = table_of({
    "queuepipe.queues": ["QueueBase", "FIFOQueue", "RandomShuffleQueue", "PaddingFIFOQueue",
                         "PriorityQueue"],
    "queuepipe.coordinator": ["Coordinator", "LooperThread"],
    "queuepipe.runner": ["QueueRunner", "Pipeline", "add_queue_runner", "start_queue_runners",
                         "get_default_pipeline"],
    "queuepipe.producers": ["string_input_producer", "input_producer", "range_input_producer",
                            "slice_input_producer", "limit_epochs", "match_filenames_once",
                            "record_position_producer"],
    "queuepipe.records": ["TFRecordWriter", "tf_record_iterator", "TFRecordOptions",
                          "TFRecordCompressionType"],
    "queuepipe.readers": ["ReaderBase", "TFRecordReader", "TextLineReader",
                          "FixedLengthRecordReader", "WholeFileReader", "IdentityReader",
                          "KeyedRecordReader"],
    "queuepipe.protos": ["Example", "SequenceExample", "Features", "Feature", "FeatureList",
                         "FeatureLists", "BytesList", "FloatList", "Int64List", "make_example",
                         "make_sequence_example"],
    "queuepipe.parsing": ["FixedLenFeature", "VarLenFeature", "FixedLenSequenceFeature",
                          "SparseFeature", "SparseValue", "parse_single_example",
                          "parse_example", "parse_single_sequence_example",
                          "parse_sequence_example", "decode_raw", "decode_csv"],
    "queuepipe.batching": ["Batches", "batch", "shuffle_batch", "batch_join",
                           "shuffle_batch_join", "maybe_batch", "maybe_shuffle_batch",
                           "maybe_batch_join", "maybe_shuffle_batch_join", "running"],
    "queuepipe.features": ["read_batch_features"],
    "queuepipe.images": ["decode_jpeg", "decode_png", "decode_image", "decode_batch"],
    "queuepipe.shards": ["write_shards"],
    "queuepipe.monitor": ["QueueMonitor"],
})
_SUBMODULES = ("train", "io", "python_io", "dtypes", "sparse", "queues", "coordinator",
               "runner", "producers", "records", "readers", "protos", "parsing", "batching",
               "features", "shards", "remote", "distributed", "monitor", "integrations", "images")

__getattr__, __dir__ = namespace(__name__, _LAZY, _SUBMODULES)

__all__ = sorted(
    list(_LAZY) + list(errors.__all__)
    + ["errors", "train", "io", "python_io", "as_dtype", "__version__", "string", "bool",
       "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
       "float32", "float64", "double", "half", "complex64", "complex128"]
)
