"""``qp.io``: the names TF keeps under ``tf.io`` (parsing, decoding, TFRecord files, readers,
images: ``decode_jpeg`` and kin need the ``[image]`` extra)."""

from typing import TYPE_CHECKING

from queuepipe import _LAZY
from queuepipe._lazy import namespace

if TYPE_CHECKING:  # for type checkers and the API pages; at run time the names load lazily
    from queuepipe.images import decode_batch, decode_image, decode_jpeg, decode_png
    from queuepipe.parsing import (
        decode_csv, decode_raw, FixedLenFeature, FixedLenSequenceFeature, parse_example,
        parse_sequence_example, parse_single_example, parse_single_sequence_example,
        SparseFeature, SparseValue, VarLenFeature
    )
    from queuepipe.readers import (
        FixedLengthRecordReader, IdentityReader, KeyedRecordReader, ReaderBase, TextLineReader,
        TFRecordReader, WholeFileReader
    )
    from queuepipe.records import (
        tf_record_iterator, TFRecordCompressionType, TFRecordOptions, TFRecordWriter
    )

_MODULES = ("queuepipe.parsing", "queuepipe.records", "queuepipe.readers", "queuepipe.images")
_TABLE = {name: module for name, module in _LAZY.items() if module in _MODULES}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
