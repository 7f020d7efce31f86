"""One process of the Keras benchmark cluster: a parameter server, or an eager Keras worker.

    python -m benchmarks.keras_task --role=worker --index=1 --cluster='{"ps": [...], ...}'

Speaks `task.py`'s protocol (one JSON command a line on stdin, `BENCH <json>` answers), so
that `sections.throughput` and `sections.time_to_accuracy` drive it as they drive the TF1
workers. A configuration is `keras-fit` (plain `model.fit`, each worker alone) or
`keras-easgd-P` (`model.fit` with `ElasticAverageCallback`, tau P; `-overlap` with
`overlap=True`). `keras_section.py`
starts these processes.
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app  # noqa: E402

from benchmarks import specs, task  # noqa: E402
from tf_contrib_easgd import ElasticAverageCallback, cluster_from_hosts  # noqa: E402
from tf_contrib_easgd.trainer import data  # noqa: E402

PLAIN = "keras-fit"
EASGD_PREFIX = "keras-easgd-"
#: Batches of one `fit` call: more than any window takes; the window's callback stops it.
MAX_BATCHES = 10**8
#: Deadline of the EASGD callback's waits (the chief's centre, the other worker's end).
TIMEOUT_SECS = 120.0


class KerasWorker:
    """A worker task: its server and the Keras model of the configuration being measured."""

    def __init__(self, cluster, index):
        self.index = index
        self.task = cluster_from_hosts("worker", index, cluster["ps"], cluster["worker"])
        self.server = tf.distribute.Server(
            self.task.cluster_spec(), job_name="worker", task_index=index, start=True
        )
        self.built = None

    def build(self, config, model, num_workers, container, learning_rate=0.01):
        """Builds `config` for `model` (the digits model: on the digits, with a test set)."""
        del num_workers  # EASGD runs on every worker of the cluster; `keras-fit` alone.
        started = time.monotonic()
        spec = specs.MODELS[model]
        keras_model = _model(spec, name=container)  # Unique names: centres of their own.
        keras_model.compile(
            optimizer=tf.keras.optimizers.SGD(learning_rate),
            loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        easgd = None
        if config.startswith(EASGD_PREFIX):
            period, _, overlap = config[len(EASGD_PREFIX) :].partition("-")
            easgd = ElasticAverageCallback(
                self.task,
                int(period),
                server=self.server,
                timeout_secs=TIMEOUT_SECS,
                stop_parameter_servers=False,
                overlap=overlap == "overlap",
            )
        elif config != PLAIN:
            raise ValueError(
                f"config must be {PLAIN} or {EASGD_PREFIX}P[-overlap], got {config!r}."
            )
        self.built = (keras_model, easgd, _inputs(spec, self.index))
        return {"build_secs": time.monotonic() - started}

    def run(self, start_at, seconds):
        """Trains until wall time `start_at`, then counts the batches of the next `seconds`."""
        model, easgd, (dataset, _) = self.built
        window = _Window(start_at, seconds)
        model.fit(
            dataset,
            steps_per_epoch=MAX_BATCHES,
            verbose=0,
            callbacks=[c for c in (easgd, window) if c],
        )
        return {
            "warm_steps": window.warm,
            "steps": window.steps,
            "steps_per_sec": window.steps / seconds,
        }

    def train(self, start_at, seconds, eval_every):
        """Time to accuracy: trains for `seconds` from `start_at`; worker 0 evaluates the
        shared model (the centre with EASGD, its own weights alone) every `eval_every` s."""
        model, easgd, (dataset, test) = self.built
        curve = _Curve(easgd, test, start_at, eval_every) if self.index == 0 else None
        window = _Window(start_at, seconds, curve, wait=True)
        model.fit(
            dataset,
            steps_per_epoch=MAX_BATCHES,
            verbose=0,
            callbacks=[c for c in (easgd, window) if c],
        )
        return {"steps": window.steps, "curve": curve.points if curve else []}

    def close(self):
        self.built = None
        return {}

    def reset(self, containers):
        """Nothing to free: each build's centres have names of their own."""
        del containers  # Unused.
        return {}


class _Window(tf.keras.callbacks.Callback):
    """Counts the batches that end between `start_at` and `start_at + seconds` (wall time),
    then stops `fit`; calls `curve` after each batch, if given. With `wait`, the first
    batch starts at `start_at` (time to accuracy), else batches before it warm up."""

    def __init__(self, start_at, seconds, curve=None, wait=False):
        super().__init__()
        self._start_at, self._end = start_at, start_at + seconds
        self._curve = curve
        self._wait = wait
        self.warm = self.steps = 0

    def on_train_batch_begin(self, batch, logs=None):
        if self._wait:  # After the EASGD callback's start, which comes before any batch.
            time.sleep(max(self._start_at - time.time(), 0.0))
            self._wait = False

    def on_train_batch_end(self, batch, logs=None):
        now = time.time()
        if now > self._end:
            self.model.stop_training = True
            return
        if now < self._start_at:
            self.warm += 1
            return
        self.steps += 1
        if self._curve is not None:
            self._curve.maybe_evaluate(self.model, now, self.steps)


class _Curve:
    """Worker 0's learning curve: (seconds, test accuracy, local steps) every `eval_every`."""

    def __init__(self, easgd, test, start_at, eval_every):
        self._easgd = easgd
        self._images, self._labels = test
        self._start_at = start_at
        self._eval_every = eval_every
        self._next = start_at
        self._evaluator = None
        self.points = []

    def maybe_evaluate(self, model, now, steps):
        if now < self._next:
            return
        self._next += self._eval_every
        if self._evaluator is None:
            self._evaluator = tf.keras.models.clone_model(model)
        weights = self._easgd.centre_weights() if self._easgd else model.get_weights()
        self._evaluator.set_weights(weights)
        logits = self._evaluator.predict(self._images, batch_size=1000, verbose=0)
        accuracy = float(np.mean(logits.argmax(axis=1) == self._labels))
        self.points.append((now - self._start_at, accuracy, steps))


def _model(spec, name):
    """The benchmark MLP of `spec` as a Keras model (he_normal kernels, zero biases)."""
    if spec.kind != "mlp":
        raise ValueError(f"the Keras benchmark runs MLPs, got {spec.name} ({spec.kind}).")
    layers = [tf.keras.Input(spec.input_shape), tf.keras.layers.Flatten()]
    for i, units in enumerate(spec.layers):
        layers.append(
            tf.keras.layers.Dense(
                units, activation="relu", kernel_initializer=tf.keras.initializers.HeNormal(i)
            )
        )
    layers.append(
        tf.keras.layers.Dense(
            spec.num_classes, kernel_initializer=tf.keras.initializers.HeNormal(len(spec.layers))
        )
    )
    return tf.keras.Sequential(layers, name=name)


def _inputs(spec, index):
    """`(training dataset, (test images, test labels) or None)` of worker `index`."""
    if spec.name == specs.DIGITS_MLP.name:
        digits = data.load_digits()
        images = digits.x_train.reshape(len(digits.x_train), -1)
        dataset = (
            tf.data.Dataset.from_tensor_slices((images, digits.y_train))
            .shuffle(len(images), seed=index + 1)
            .repeat()
            .batch(spec.batch_size)
        )
        return dataset, (digits.x_test.reshape(len(digits.x_test), -1), digits.y_test)
    images, labels = specs.synthetic_batch(spec, seed=index)
    return tf.data.Dataset.from_tensors((images, labels)).repeat(), None


def main(argv):
    del argv  # Unused.
    task.serve(KerasWorker)


if __name__ == "__main__":
    app.run(main)
