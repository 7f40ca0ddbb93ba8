"""TensorFlow's ``Example`` protos, wire-identical and in a descriptor pool of queuepipe's own.

``Example``, ``SequenceExample`` and their parts are protobuf message classes with TF's names
(full names ``tensorflow.Example`` ...), field numbers and encodings, so bytes written by
either library parse in the other. They live outside protobuf's default pool, so importing
TensorFlow in the same process does not clash. :func:`make_example` and
:func:`make_sequence_example` build them from plain dicts.

Usage::

    from queuepipe.protos import make_example, Example

    data = make_example({"label": 3, "image": b"..."}).SerializeToString()
    assert Example.FromString(data).features.feature["label"].int64_list.value == [3]
"""

from typing import TYPE_CHECKING

from queuepipe._lazy import namespace, table_of

if TYPE_CHECKING:  # for type checkers and the API pages; at run time the names load lazily
    from queuepipe.protos._make import make_example, make_sequence_example
    from queuepipe.protos._messages import (BytesList, Example, Feature, FeatureList,
                                            FeatureLists, Features, FloatList, Int64List,
                                            SequenceExample)

# Imported on first use: building the messages imports protobuf (about 30 ms), which a
# pipeline whose records all take parse_example's layout path never needs.
_TABLE = table_of({
    "queuepipe.protos._make": ["make_example", "make_sequence_example"],
    "queuepipe.protos._messages": ["Example", "SequenceExample", "Features", "Feature",
                                   "FeatureList", "FeatureLists", "BytesList", "FloatList",
                                   "Int64List"],
})
__getattr__, __dir__ = namespace(__name__, _TABLE)

__all__ = ["Example", "SequenceExample", "Features", "Feature", "FeatureList", "FeatureLists",
           "BytesList", "FloatList", "Int64List", "make_example", "make_sequence_example"]
