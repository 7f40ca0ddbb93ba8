"""queuepipe.events: TensorBoard event files written without TensorFlow, read back with the
``tensorboard`` package's own readers (the ``test`` extra installs it)."""

import os

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.compat.proto import event_pb2, histogram_pb2, summary_pb2

from queuepipe.events import SummaryWriter
from queuepipe.protos._events import Event, HistogramProto, Summary


def accumulated(logdir):
    run = EventAccumulator(str(logdir), size_guidance={"scalars": 0, "histograms": 0,
                                                       "images": 0})
    run.Reload()
    return run


@pytest.mark.parametrize("ours, theirs", [
    (Event, event_pb2.Event), (Summary, summary_pb2.Summary),
    (Summary.Value, summary_pb2.Summary.Value), (Summary.Image, summary_pb2.Summary.Image),
    (HistogramProto, histogram_pb2.HistogramProto)])
def test_the_protos_have_tensorboards_fields(ours, theirs):
    """Every field we declare has TensorBoard's (TF's) number and type."""
    fields = {f.name: (f.number, f.type) for f in theirs.DESCRIPTOR.fields}
    for field in ours.DESCRIPTOR.fields:
        assert fields[field.name] == (field.number, field.type), field.name


def test_tensorboard_reads_scalars_histograms_and_images(tmp_path):
    with SummaryWriter(str(tmp_path / "run")) as writer:
        for step in range(5):
            writer.scalars({"loss": 1.0 / (step + 1), "queue/fill": step / 4}, step=step,
                           wall_time=1000.0 + step)
        writer.histogram("ids", np.arange(100), step=2)
        writer.image("sample", np.full((6, 8, 3), 200, np.uint8), step=3)
    events = list(EventFileLoader(writer.path).Load())
    assert events[0].file_version == "brain.Event:2"
    run = accumulated(tmp_path / "run")
    assert [(s.step, s.wall_time, s.value) for s in run.Scalars("loss")] == \
        [(step, 1000.0 + step, pytest.approx(1.0 / (step + 1))) for step in range(5)]
    assert [s.value for s in run.Scalars("queue/fill")] == [0.0, 0.25, 0.5, 0.75, 1.0]
    histogram = run.Histograms("ids")[0].histogram_value
    assert (histogram.min, histogram.max, histogram.num, histogram.sum) == (0, 99, 100, 4950)
    assert sum(histogram.bucket) == 100
    image = run.Images("sample")[0]
    assert (image.step, image.height, image.width) == (3, 6, 8)
    assert image.encoded_image_string.startswith(b"\x89PNG")


def test_a_closed_writer_refuses_to_write_and_names_its_file(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    writer.close()
    writer.close()
    with pytest.raises(ValueError, match=r"^the SummaryWriter of .*events\.out\.tfevents\..* is "
                                         r"closed$"):
        writer.scalars({"x": 1.0}, step=0)
    assert os.path.basename(writer.path).startswith("events.out.tfevents.")
