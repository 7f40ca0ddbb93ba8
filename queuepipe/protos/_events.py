"""TensorFlow's ``Event`` and ``Summary`` protos (what TensorBoard reads), in queuepipe's pool.

A TensorBoard event file is a TFRecord file whose records are serialized ``tensorflow.Event``
messages. These are the fields of TF's ``event.proto``, ``summary.proto`` and
``histogram.proto`` that scalars, images and histograms use, with TF's names, numbers and
encodings (a field left out is skipped by a parser, as an unknown field); they are added to
the private pool of :mod:`queuepipe.protos._messages`, so TensorFlow or TensorBoard can be
imported in the same process.
"""

from google.protobuf import descriptor_pb2

from queuepipe.protos._messages import _F, _PACKAGE, POOL, _class, _field

__all__ = ["Event", "Summary", "HistogramProto"]

_SUMMARY_FILE = "tensorflow/core/framework/summary.proto"
_EVENT_FILE = "tensorflow/core/util/event.proto"


def _fields(message, oneof, fields):
    """Appends ``fields`` (``(name, number, type, type_name)``) to ``message``; a field whose
    name is in ``oneof[1]`` belongs to the one-of named ``oneof[0]``."""
    message.oneof_decl.add(name=oneof[0])
    for name, number, type_, type_name in fields:
        _field(message, name, number, type_, type_name=type_name,
               oneof_index=0 if name in oneof[1] else None)


def _summary_file():
    proto = descriptor_pb2.FileDescriptorProto(name=_SUMMARY_FILE, package=_PACKAGE,
                                               syntax="proto2")
    histogram = proto.message_type.add(name="HistogramProto")
    for number, name in enumerate(("min", "max", "num", "sum", "sum_squares"), start=1):
        _field(histogram, name, number, _F.TYPE_DOUBLE)
    for number, name in ((6, "bucket_limit"), (7, "bucket")):
        _field(histogram, name, number, _F.TYPE_DOUBLE, label=_F.LABEL_REPEATED, packed=True)
    summary = proto.message_type.add(name="Summary")
    image = summary.nested_type.add(name="Image")
    for number, name in enumerate(("height", "width", "colorspace"), start=1):
        _field(image, name, number, _F.TYPE_INT32)
    _field(image, "encoded_image_string", 4, _F.TYPE_BYTES)
    _fields(summary.nested_type.add(name="Value"), ("value", {"simple_value", "image", "histo"}),
            [("node_name", 7, _F.TYPE_STRING, None), ("tag", 1, _F.TYPE_STRING, None),
             ("simple_value", 2, _F.TYPE_FLOAT, None),
             ("image", 4, _F.TYPE_MESSAGE, "Summary.Image"),
             ("histo", 5, _F.TYPE_MESSAGE, "HistogramProto")])
    _field(summary, "value", 1, _F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
           type_name="Summary.Value")
    return proto


def _event_file():
    proto = descriptor_pb2.FileDescriptorProto(name=_EVENT_FILE, package=_PACKAGE,
                                               syntax="proto2", dependency=[_SUMMARY_FILE])
    _fields(proto.message_type.add(name="Event"), ("what", {"file_version", "summary"}),
            [("wall_time", 1, _F.TYPE_DOUBLE, None), ("step", 2, _F.TYPE_INT64, None),
             ("file_version", 3, _F.TYPE_STRING, None),
             ("summary", 5, _F.TYPE_MESSAGE, "Summary")])
    return proto


POOL.Add(_summary_file())
POOL.Add(_event_file())

HistogramProto = _class("HistogramProto")
Summary = _class("Summary")
Event = _class("Event")
