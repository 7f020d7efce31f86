"""ElasticAverageCallback: Elastic Averaging SGD for Keras `model.fit` on a ps/worker cluster.

Every worker process runs its own `model.fit` with this callback, eagerly (TF2, Keras 3 or
tf-keras); every `communication_period` batches its weights and the centre held by the
parameter servers move towards each other. The callback adapts Keras's calls to an
`ElasticAverageWorker` (eager/worker.py), which does the work for custom training loops
too. docs/KERAS.md says how to use it.
"""

import os

import numpy as np
import tensorflow as tf

from tf_contrib_easgd.eager.settings import Settings, check_eager
from tf_contrib_easgd.eager.variables import NotBuiltError
from tf_contrib_easgd.eager.worker import ElasticAverageWorker

#: What the chief writes into model_dir at the end of training: the centre as a model.
SAVED_MODEL = "centre.keras"
SAVED_WEIGHTS = "centre.weights.h5"


class ElasticAverageCallback(tf.keras.callbacks.Callback):
    """Trains a Keras model with asynchronous Elastic Averaging SGD on a ps/worker cluster.

    Each worker task runs `model.fit(..., callbacks=[ElasticAverageCallback(cluster)])` in
    its own process, with any Keras optimizer. The callback

    * before the first batch, starts the worker from the centre: the chief (worker 0)
      sets the centre up from its own initial weights (or keeps the one the parameter
      servers hold, or restores the latest checkpoint of `model_dir` into them), the
      other workers wait for it, at most `timeout_secs`, then copy it;
    * every `communication_period` batches (tau), sends the worker's weights x to the
      parameter servers, which compute d = moving_rate * (x - c) once per weight, add d to
      the centre c and send d back; the worker subtracts the same d from x (with
      `overlap=True`, at its next exchange, while this one travels; with a 16-bit
      `wire_dtype`, both sides compute d from 16-bit differences);
    * after a lost parameter server, waits for it and starts again from the centre (the
      chief restores its latest checkpoint into a restarted ps);
    * at the end of `fit`, copies the centre into the model; the chief first waits for the
      other workers' `fit` to end (at most `timeout_secs`) and then writes the centre to
      `model_dir` as `centre.keras` and `centre.weights.h5`, which plain Keras loads.

    Every floating-point weight of `model.weights` has a centre (trainable ones and
    statistics such as batch normalization's); the optimizer's state stays the worker's.
    There is no elastic penalty between exchanges (rho = 0, the paper's asynchronous
    EASGD). The parameter servers are `tf.distribute.Server`s that run
    `tf_contrib_easgd.serve_until_done(server)`. docs/KERAS.md has a whole example.
    """

    def __init__(
        self,
        cluster,
        communication_period=10,
        moving_rate=None,
        model_dir=None,
        *,
        timeout_secs=600.0,
        save_checkpoint_steps=None,
        stop_parameter_servers=True,
        server=None,
        overlap=False,
        wire_dtype=None,
    ):
        """Checks the arguments; the cluster is reached when `fit` begins.

        Args:
            cluster: this worker's `tf_contrib_easgd.ClusterTask` (`cluster_from_hosts`,
                `cluster_from_tf_config`, `cluster_from_slurm`); worker 0 is the chief.
            communication_period: batches between two exchanges (tau), at least 1.
            moving_rate: alpha in (0, 1]; None means 0.9 / number of workers, the
                paper's beta / W (as easgd-train's; `ElasticAverageOptimizer` keeps
                contrib's 0.9 / communication_period / number of workers): the best
                measured (BENCHMARKS.md, "Against TF 2's strategies"); with `overlap`,
                at most 0.5.
            model_dir: where the chief writes checkpoints of the centre (every
                `save_checkpoint_steps` of its batches, else at each epoch's end) and the
                final centre; None writes nothing.
            timeout_secs: deadline of every wait on another task: the centre at the start,
                a lost parameter server, the other workers at the end.
            save_checkpoint_steps: see `model_dir`; None or an int >= 1.
            stop_parameter_servers: whether the chief stops the parameter servers'
                `serve_until_done` at the end of `fit`.
            server: this worker's started `tf.distribute.Server`; None starts one on the
                worker's address when `fit` begins.
            overlap: whether each exchange travels while the worker trains the next
                `communication_period` batches: its d, computed from the weights as they
                were sent, is subtracted at the next exchange (and at the end of `fit`),
                as `ElasticAverageOptimizer(overlap=True)` does.
            wire_dtype: None (or `tf.float32`) sends float32 values; `tf.bfloat16` or
                `tf.float16` (or their names) sends each float32/float64 weight as 16-bit
                differences, half the bytes, as `ElasticAverageOptimizer(wire_dtype=...)`
                (docs/DESIGN.md, "A 16-bit wire": no rounding error accumulates).

        Raises:
            TypeError: if an argument has the wrong type (e.g. `cluster` is None).
            ValueError: if an argument is out of range, or `cluster` is a parameter server.
        """
        super().__init__()
        self._settings = Settings.checked(
            cluster,
            communication_period,
            moving_rate,
            model_dir,
            timeout_secs,
            save_checkpoint_steps,
            stop_parameter_servers,
            server,
            overlap,
            wire_dtype,
        )
        self._worker = None  # The `ElasticAverageWorker` of the model, made by the first fit.
        self._epoch_batches = 0  # Batches of the current epoch seen so far.

    # What the callback has done, for logs and tests.

    @property
    def communication_period(self):
        """Batches between two exchanges (tau)."""
        return self._settings.period

    @property
    def moving_rate(self):
        """The elastic rate alpha."""
        return self._settings.moving_rate

    @property
    def overlap(self):
        """Whether exchanges overlap the batches that follow them."""
        return self._settings.overlap

    @property
    def wire_dtype(self):
        """The 16-bit dtype of the wire (`tf.bfloat16` or `tf.float16`), or None: float32."""
        return self._settings.wire_dtype

    @property
    def local_steps(self):
        """Batches this process has trained."""
        return self._worker.local_steps if self._worker is not None else 0

    @property
    def exchanges(self):
        """Exchanges this process has made."""
        return self._worker.exchanges if self._worker is not None else 0

    @property
    def global_step(self):
        """The exchanges of all workers, as of this worker's start, last exchange or end
        of `fit` (on the chief, after the others have finished)."""
        return self._worker.global_step if self._worker is not None else 0

    @property
    def recoveries(self):
        """Times this worker started again from the centre after a lost parameter server."""
        return self._worker.recoveries if self._worker is not None else 0

    @property
    def centre_found(self):
        """How the last start found the centre: "kept", "restored", "initialised" (the
        chief) or "waited" (another worker); None before `fit`."""
        return self._worker.centre_found if self._worker is not None else None

    @property
    def finished(self):
        """On the chief after `fit`, the other workers' `FinishedWorkers`; else None."""
        return self._worker.finished if self._worker is not None else None

    def centre_weights(self):
        """Returns the centre as `model.get_weights()` would: an array per weight (the
        model's own value for a weight without a centre). Reads it from the parameter
        servers: during `fit` only (e.g. from another callback).

        Raises:
            RuntimeError: outside `fit`.
        """
        centre = dict(zip(map(id, self._worker.variables), self._read_centre(), strict=True))
        return [centre.get(id(w), np.asarray(w.numpy())) for w in self.model.weights]

    def elastic_distance(self):
        """The Euclidean norm of (the worker's weights - the centre) over every averaged
        weight: 0 right after a start. During `fit` only, as `centre_weights`."""
        self._read_centre()  # The error outside fit.
        return self._worker.elastic_distance()

    # Keras's calls.

    def set_model(self, model):
        """Takes the model `fit` trains; it must be a `tf.keras` model."""
        if not isinstance(model, tf.keras.Model):
            raise TypeError(
                f"ElasticAverageCallback is a callback of tf.keras ({_keras_name()}), but "
                f"the model is a {type(model).__module__}.{type(model).__name__}. Use the "
                "Keras that tf.keras is: Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1 set "
                "before TensorFlow is first imported."
            )
        super().set_model(model)

    def on_train_begin(self, logs=None):
        """Links to the centre (once) and starts the worker from it."""
        check_eager("ElasticAverageCallback", "model.fit")
        if self._worker is None:  # Its variables: the model's, read by its first start.
            self._worker = _KerasWorker.from_settings(self._settings, self.model)
        self._epoch_batches = 0
        try:
            self._worker.start()
        except NotBuiltError:
            raise ValueError(
                f"model {self.model.name!r} has no floating-point weights to average: build "
                "it before fit (give it an Input, or call model.build(input_shape))."
            ) from None

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_batches = 0

    def on_train_batch_end(self, batch, logs=None):
        """Counts the batches (several per call with `steps_per_execution`); exchanges
        every `communication_period` of them."""
        taken = max(batch + 1 - self._epoch_batches, 1)
        self._epoch_batches = batch + 1
        self._worker.step(taken)

    def on_epoch_end(self, epoch, logs=None):
        if self._settings.save_steps is None:
            self._worker.save_checkpoint()  # The chief's, with a model_dir.

    def on_train_end(self, logs=None):
        """Ends the job's `fit` in order: see the class docstring."""
        self._worker.end()

    def _read_centre(self):
        if self._worker is None or not self._worker.started:
            raise RuntimeError(
                "The centre is read during model.fit only: call this from a callback."
            )
        return self._worker.centre_values()


class _KerasWorker(ElasticAverageWorker):
    """The callback's worker, of its model: the chief writes the centre as Keras files, not
    a checkpoint."""

    def _export(self, model_dir):
        model = self._averaged.owner
        model.save(os.path.join(model_dir, SAVED_MODEL))
        model.save_weights(os.path.join(model_dir, SAVED_WEIGHTS))


def _keras_name():
    """Which Keras tf.keras is, e.g. "keras 3.15.1" or "tf_keras 2.21.0"."""
    package = tf.keras.__name__.split(".")[0]
    return f"{package} {getattr(tf.keras, '__version__', '')}".strip()
