"""One process of the Keras section's cluster: a ps, or an eager `model.fit` worker.

Answers task.py's commands `build`, `run`, `train`, `close` and `reset`. `keras-fit` is
plain `model.fit` on each worker alone; `keras-easgd-P[-overlap]` adds
`ElasticAverageCallback` with tau P.
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.common import models, protocol  # noqa: E402
from tf_contrib_easgd import ElasticAverageCallback, cluster_from_hosts  # noqa: E402
from tf_contrib_easgd.trainer import data  # noqa: E402

EASGD_PREFIX = "keras-easgd-"
MAX_BATCHES = 10**8  # Of one `fit` call: more than any window takes; `_Window` stops it.
TIMEOUT_SECS = 120.0  # The EASGD callback's waits (the chief's centre, the others' end).


class KerasWorker:
    """A worker task: its server and the Keras model being measured."""

    def __init__(self, cluster, index):
        self.index, self.built = index, None
        self.task = cluster_from_hosts("worker", index, cluster["ps"], cluster["worker"])
        self.server = tf.distribute.Server(self.task.cluster_spec(), "worker", index, start=True)

    def build(self, config, model, num_workers, container, learning_rate=0.01):
        """Builds `config` for `model` (the digits model: on the digits, with a test set)."""
        del num_workers  # EASGD runs on every worker of the cluster; `keras-fit` alone.
        started, spec = time.monotonic(), protocol.MODELS[model]
        layers = [tf.keras.Input(spec.input_shape), tf.keras.layers.Flatten()]
        for i, units in enumerate((*spec.layers, spec.num_classes)):
            activation = "relu" if i < len(spec.layers) else None
            initializer = tf.keras.initializers.HeNormal(i)
            layers.append(tf.keras.layers.Dense(units, activation, kernel_initializer=initializer))
        keras_model = tf.keras.Sequential(layers, name=container)
        keras_model.compile(
            optimizer=tf.keras.optimizers.SGD(learning_rate),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        easgd = None
        if config.startswith(EASGD_PREFIX):
            period, _, overlap = config[len(EASGD_PREFIX) :].partition("-")
            easgd = ElasticAverageCallback(
                self.task, int(period), server=self.server, timeout_secs=TIMEOUT_SECS,
                stop_parameter_servers=False, overlap=overlap == "overlap",
            )  # fmt: skip
        elif config != "keras-fit":
            raise ValueError(
                f"config must be keras-fit or {EASGD_PREFIX}P[-overlap], got {config!r}."
            )
        self.built = (keras_model, easgd, _inputs(spec, self.index))
        return {"build_secs": time.monotonic() - started}

    def _fit(self, window):
        model, easgd, (dataset, _) = self.built
        callbacks = [c for c in (easgd, window) if c]
        model.fit(dataset, steps_per_epoch=MAX_BATCHES, verbose=0, callbacks=callbacks)
        return window

    def run(self, start_at, seconds):
        """Trains until wall time `start_at`, then counts the batches of the next `seconds`."""
        window = self._fit(_Window(start_at, seconds))
        return {"warm_steps": window.warm, "steps": window.steps,
                "steps_per_sec": window.steps / seconds}  # fmt: skip

    def train(self, start_at, seconds, eval_every):
        """Trains from `start_at` for `seconds`; worker 0 evaluates the shared model (the
        centre with EASGD, its own weights alone) every `eval_every` seconds."""
        _, easgd, (_, test) = self.built
        curve = _Curve(easgd, test, start_at, eval_every) if self.index == 0 else None
        window = self._fit(_Window(start_at, seconds, curve, wait=True))
        return {"steps": window.steps, "curve": curve.points if curve else []}

    def close(self):
        self.built = None
        return {}

    def reset(self, containers):
        return {}  # Nothing to free: builds share the centre (named by weight position).


class _Window(tf.keras.callbacks.Callback):
    """Counts the batches that end in [start_at, start_at + seconds] and then stops `fit`;
    calls `curve` after each. With `wait`, the first batch starts at `start_at`."""

    def __init__(self, start_at, seconds, curve=None, wait=False):
        super().__init__()
        self._start_at, self._end = start_at, start_at + seconds
        self._curve, self._wait, self.warm, self.steps = curve, wait, 0, 0

    def on_train_batch_begin(self, batch, logs=None):
        if self._wait:  # After the EASGD callback's start, which comes before any batch.
            time.sleep(max(self._start_at - time.time(), 0.0))
            self._wait = False

    def on_train_batch_end(self, batch, logs=None):
        now = time.time()
        if now > self._end:
            self.model.stop_training = True
        elif now < self._start_at:
            self.warm += 1
        else:
            self.steps += 1
            if self._curve is not None:
                self._curve.maybe_evaluate(self.model, now, self.steps)


class _Curve:
    """Worker 0's learning curve: (seconds, test accuracy, local steps) every `eval_every`."""

    def __init__(self, easgd, test, start_at, eval_every):
        self._easgd, (self._images, self._labels) = easgd, test
        self._start_at, self._eval_every, self._next = start_at, eval_every, start_at
        self._evaluator, self.points = None, []

    def maybe_evaluate(self, model, now, steps):
        if now < self._next:
            return
        self._next += self._eval_every
        if self._evaluator is None:
            self._evaluator = tf.keras.models.clone_model(model)
        self._evaluator.set_weights(
            self._easgd.centre_weights() if self._easgd else model.get_weights()
        )
        logits = self._evaluator.predict(self._images, batch_size=1000, verbose=0)
        accuracy = float(np.mean(logits.argmax(axis=1) == self._labels))
        self.points.append((now - self._start_at, accuracy, steps))


def _inputs(spec, index):
    """`(training dataset, (test images, test labels) or None)` of worker `index`."""
    if spec is not protocol.DIGITS_MLP:
        return tf.data.Dataset.from_tensors(
            protocol.synthetic_batch(spec, seed=index)
        ).repeat(), None
    digits = data.load_digits()
    images = digits.x_train.reshape(len(digits.x_train), -1)
    dataset = tf.data.Dataset.from_tensor_slices((images, digits.y_train))
    dataset = dataset.shuffle(len(images), seed=index + 1).repeat().batch(spec.batch_size)
    return dataset, (digits.x_test.reshape(len(digits.x_test), -1), digits.y_test)


if __name__ == "__main__":
    models.serve(KerasWorker)
