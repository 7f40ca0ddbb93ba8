"""Train a Keras 3 model on TFRecord shards that queuepipe reads, parses and shuffles.

The digits of ``digits.py`` (4 TFRecord shards) feed ``model.fit`` through
``keras_generator``: an endless pipeline (``num_epochs=None``) and Keras's ``steps_per_epoch``
decide the epochs. Keras runs on the backend ``KERAS_BACKEND`` names; when it is unset this
example picks JAX (PyTorch and TensorFlow work as well).

    python examples/keras_model.py                # 5 epochs of 40 steps
    KERAS_BACKEND=torch python examples/keras_model.py --epochs 2

Needs ``pip install '<queuepipe checkout>[keras,demo,jax]'`` (Keras 3, a backend and scikit-learn).
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is imported: it picks it then

import keras  # noqa: E402

import queuepipe as qp  # noqa: E402
from digits import digit_batches, digits_data, example_parser  # noqa: E402
from queuepipe.integrations.keras import keras_generator  # noqa: E402


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, float]:
    parser = example_parser(__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=40)
    args = parser.parse_args(argv)
    with digits_data(args.data) as (files, (test_images, test_labels)):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((64,)),
                                  keras.layers.Dense(64, activation="relu"),
                                  keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=keras.optimizers.Adam(3e-3),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        with qp.Pipeline().as_default():
            batches = digit_batches(files, args.batch_size, num_epochs=None)
        with batches:  # stops the pipeline's threads when training ends, however it ends
            history = model.fit(
                keras_generator(batches, lambda batch: (batch["image"], batch["label"])),
                steps_per_epoch=args.steps_per_epoch, epochs=args.epochs, shuffle=False,
                verbose=2)
        loss, accuracy = model.evaluate(test_images, test_labels, verbose=0)
    print(f"{keras.backend.backend()} backend: test loss {loss:.3f}, accuracy {accuracy:.3f}")
    return {"epochs": len(history.history["loss"]), "loss": float(loss),
            "accuracy": float(accuracy)}


if __name__ == "__main__":
    main()
