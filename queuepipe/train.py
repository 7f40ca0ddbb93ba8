"""``qp.train``: the names TF1 keeps under ``tf.train`` (producers, batching, runners, protos)."""

from typing import TYPE_CHECKING

from queuepipe import _LAZY
from queuepipe._lazy import namespace

if TYPE_CHECKING:  # for type checkers and the API pages; at run time the names load lazily
    from queuepipe.batching import (
        batch, batch_join, Batches, maybe_batch, maybe_batch_join, maybe_shuffle_batch,
        maybe_shuffle_batch_join, running, shuffle_batch, shuffle_batch_join
    )
    from queuepipe.coordinator import Coordinator, LooperThread
    from queuepipe.features import read_batch_features
    from queuepipe.producers import (
        input_producer, limit_epochs, match_filenames_once, range_input_producer,
        record_position_producer, slice_input_producer, string_input_producer
    )
    from queuepipe.protos import (
        BytesList, Example, Feature, FeatureList, FeatureLists, Features, FloatList, Int64List,
        make_example, make_sequence_example, SequenceExample
    )
    from queuepipe.runner import (
        add_queue_runner, get_default_pipeline, Pipeline, QueueRunner, start_queue_runners
    )

_MODULES = ("queuepipe.coordinator", "queuepipe.runner", "queuepipe.producers",
            "queuepipe.protos", "queuepipe.batching", "queuepipe.features")
_TABLE = {name: module for name, module in _LAZY.items() if module in _MODULES}

__getattr__, __dir__ = namespace(__name__, _TABLE)
__all__ = sorted(_TABLE)
