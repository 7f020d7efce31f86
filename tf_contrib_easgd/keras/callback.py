"""ElasticAverageCallback: Elastic Averaging SGD for Keras `model.fit` on a ps/worker cluster.

Every worker process runs its own `model.fit` with this callback, eagerly (TF2, Keras 3 or
tf-keras); every `communication_period` batches its weights and the centre held by the
parameter servers move towards each other. The centre is reached through a `CentreLink`
(a TF1 graph and session of the worker's own). docs/KERAS.md says how to use it.
"""

import concurrent.futures
import os

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import _validation
from tf_contrib_easgd.cluster.resolver import ClusterTask
from tf_contrib_easgd.job.recovery import train_with_recovery, wait_until_reachable
from tf_contrib_easgd.keras import model_weights
from tf_contrib_easgd.keras.centre_link import CentreLink

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
      `overlap=True`, at its next exchange, while this one travels);
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
    ):
        """Checks the arguments; the cluster is reached when `fit` begins.

        Args:
            cluster: this worker's `tf_contrib_easgd.ClusterTask` (`cluster_from_hosts`,
                `cluster_from_tf_config`, `cluster_from_slurm`); worker 0 is the chief.
            communication_period: batches between two exchanges (tau), at least 1.
            moving_rate: alpha in (0, 1]; None means 0.9 / communication_period /
                number of workers, as `ElasticAverageOptimizer`'s default.
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

        Raises:
            TypeError: if an argument has the wrong type (e.g. `cluster` is None).
            ValueError: if an argument is out of range, or `cluster` is a parameter server.
        """
        super().__init__()
        self._task = _checked_worker(cluster)
        self._period = _validation.check_int(communication_period, "communication_period", 1)
        moving_rate = _validation.check_number(moving_rate, "moving_rate", low=0.0, high=1.0)
        if moving_rate is None:
            moving_rate = 0.9 / self._period / self._task.num_workers
        self._moving_rate = moving_rate
        if model_dir is not None and not isinstance(model_dir, str | os.PathLike):
            raise TypeError(f"model_dir must be a path or None, got {model_dir!r}.")
        self._model_dir = None if model_dir is None else os.fspath(model_dir)
        self._timeout_secs = _validation.check_number(timeout_secs, "timeout_secs", low=0.0)
        if save_checkpoint_steps is not None:
            _validation.check_int(save_checkpoint_steps, "save_checkpoint_steps", 1)
        self._save_steps = save_checkpoint_steps
        self._stop_ps = _validation.check_bool(stop_parameter_servers, "stop_parameter_servers")
        if server is not None and not hasattr(server, "target"):
            raise TypeError(f"server must be a tf.distribute.Server or None, got {server!r}.")
        self._server = server
        self._overlap = _validation.check_bool(overlap, "overlap")
        self._sender = None  # With overlap: the thread that sends the exchanges.
        self._in_flight = None  # With overlap: the exchange sent and not landed yet.
        self._link = None
        self._keras_weights = []  # The model's averaged weights, as Keras holds them.
        self._weights = []  # The same, as the tf.Variables that hold them.
        self._steps = 0  # Batches trained by this process.
        self._epoch_batches = 0  # Batches of the current epoch seen so far.
        self._exchanges = 0
        self._global_step = 0
        self._lost = False  # A parameter server was lost: start again from the centre.
        self.recoveries = 0
        self.centre_found = None
        self.finished = None

    # What the callback has done, for logs and tests.

    @property
    def communication_period(self):
        """Batches between two exchanges (tau)."""
        return self._period

    @property
    def moving_rate(self):
        """The elastic rate alpha."""
        return self._moving_rate

    @property
    def overlap(self):
        """Whether exchanges overlap the batches that follow them."""
        return self._overlap

    @property
    def local_steps(self):
        """Batches this process has trained."""
        return self._steps

    @property
    def exchanges(self):
        """Exchanges this process has made."""
        return self._exchanges

    @property
    def global_step(self):
        """The exchanges of all workers, as of this worker's start, last exchange or end
        of `fit` (on the chief, after the others have finished)."""
        return self._global_step

    def centre_weights(self):
        """Returns the centre as `model.get_weights()` would: an array per weight (the
        model's own value for a weight without a centre). Reads it from the parameter
        servers: during `fit` only (e.g. from another callback).

        Raises:
            RuntimeError: outside `fit`.
        """
        centre = dict(zip((id(w) for w in self._keras_weights), self._read_centre(), strict=True))
        return [centre.get(id(w), np.asarray(w.numpy())) for w in self.model.weights]

    def elastic_distance(self):
        """The Euclidean norm of (the worker's weights - the centre) over every averaged
        weight: 0 right after a start. During `fit` only, as `centre_weights`."""
        pairs = zip(self._values(), self._read_centre(), strict=True)
        return float(np.sqrt(sum(np.sum(np.square(x - c, dtype=np.float64)) for x, c in pairs)))

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
        _check_eager()
        if self._link is None:
            self._keras_weights = model_weights.averaged_weights(self.model)
            self._weights = [model_weights.tf_variable(w) for w in self._keras_weights]
            self._link = self._make_link()
        self._epoch_batches = 0
        if self._link.connected:  # A later fit: its session is open, start from the centre.
            self._reliably(self._copy_centre)
        else:
            self._lost = True  # Nothing linked yet: connect, then copy the centre.
            self._reliably(lambda: None)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_batches = 0

    def on_train_batch_end(self, batch, logs=None):
        """Counts the batches (several per call with `steps_per_execution`); exchanges
        every `communication_period` of them."""
        taken = max(batch + 1 - self._epoch_batches, 1)
        self._epoch_batches = batch + 1
        before, self._steps = self._steps, self._steps + taken
        if self._steps // self._period > before // self._period:
            self._reliably(self._exchange)
        if self._saves_every_steps() and self._steps // self._save_steps > before // (
            self._save_steps
        ):
            self._reliably(self._link.save_checkpoint)

    def on_epoch_end(self, epoch, logs=None):
        if self._task.is_chief and self._model_dir and self._save_steps is None:
            self._reliably(self._link.save_checkpoint)

    def on_train_end(self, logs=None):
        """Ends the job's `fit` in order: see the class docstring."""
        self._reliably(self._land)  # With overlap, the last exchange's move.
        self.finished = self._reliably(lambda: self._link.finish(self._steps, self._timeout_secs))
        self._reliably(self._copy_centre)
        self._global_step = self._reliably(self._link.global_step)
        if self._task.is_chief and self._model_dir:
            self._reliably(self._link.save_checkpoint)
            self.model.save(os.path.join(self._model_dir, SAVED_MODEL))
            self.model.save_weights(os.path.join(self._model_dir, SAVED_WEIGHTS))
        if self._task.is_chief and self._stop_ps:
            self._link.close()
            self._link.stop_parameter_servers()

    # The work.

    def _make_link(self):
        config = tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", self._task.device],
            operation_timeout_in_ms=max(int(self._timeout_secs * 1000), 1),
        )
        if self._server is None:
            try:
                self._server = tf.distribute.Server(
                    self._task.cluster_spec(),
                    job_name=self._task.job_name,
                    task_index=self._task.task_index,
                    config=config,
                    start=True,
                )
            except tf.errors.UnknownError as error:
                raise RuntimeError(
                    f"Could not start {self._task.name}'s server on {self._task.address} "
                    f"({error.message}): is the port taken, by another process or by a "
                    "server this process started already (then pass it as server=)?"
                ) from None
        if self._model_dir and self._task.is_chief:
            os.makedirs(self._model_dir, exist_ok=True)
        return CentreLink(
            self._task,
            model_weights.centre_specs(self._keras_weights),
            self._moving_rate,
            self._server,
            config,
            self._model_dir if self._task.is_chief else None,
        )

    def _reliably(self, action):
        """Runs `action()`; after a lost parameter server, waits until the parameter servers
        are back, starts again from the centre, and runs `action()` again.

        Returns:
            What `action` returns.
        """

        def attempt():
            if self._lost:
                self._start()
            return action()

        return train_with_recovery(
            attempt, self._task.ps_hosts, self._timeout_secs, self._on_recovery
        )

    def _start(self):
        """Opens the link's session and copies the centre into the model."""
        wait_until_reachable(self._task.ps_hosts, self._timeout_secs)
        self.centre_found = self._link.connect(self._values(), self._timeout_secs)
        self._copy_centre()
        self._global_step = self._link.global_step()
        self._lost = False
        tf.compat.v1.logging.info(
            "%s started from the centre (%s), %d exchanges so far.",
            self._task.name,
            self.centre_found,
            self._global_step,
        )

    def _exchange(self):
        """One exchange: x and the centre move towards each other by the same d. With
        overlap, the last exchange's d lands first and this one is sent off."""
        if not self._overlap:
            self._apply(*self._link.exchange(self._values()))
            return
        self._land()
        if self._sender is None:
            self._sender = concurrent.futures.ThreadPoolExecutor(1, "easgd_exchange")
        # A copy: training goes on while the exchange reads it.
        values = [np.array(value) for value in self._values()]
        self._in_flight = self._sender.submit(self._link.exchange, values)

    def _land(self):
        """With overlap, waits for the exchange in flight, if any, and applies its d."""
        if self._in_flight is not None:
            in_flight, self._in_flight = self._in_flight, None
            self._apply(*in_flight.result())

    def _apply(self, deltas, global_step):
        for weight, delta in zip(self._weights, deltas, strict=True):
            weight.assign_sub(delta)
        self._global_step = global_step
        self._exchanges += 1

    def _on_recovery(self, error, recoveries):
        del error, recoveries  # `train_with_recovery` logs them.
        if self._in_flight is not None:
            # Lost with the session, or the centre has its move already: the worker
            # starts again from the centre either way. Not left running on the old session.
            concurrent.futures.wait([self._in_flight], self._timeout_secs)
            self._in_flight = None
        self._lost = True
        self.recoveries += 1

    def _read_centre(self):
        if not self._link or not self._link.connected:
            raise RuntimeError(
                "The centre is read during model.fit only: call this from a callback."
            )
        return self._link.read()

    def _copy_centre(self):
        for weight, value in zip(self._weights, self._link.read(), strict=True):
            weight.assign(value)

    def _values(self):
        return [np.asarray(weight.numpy()) for weight in self._weights]

    def _saves_every_steps(self):
        return self._task.is_chief and self._model_dir and self._save_steps is not None


def _checked_worker(cluster):
    """`cluster`, checked: a `ClusterTask` of a worker."""
    if not isinstance(cluster, ClusterTask):
        raise TypeError(
            "cluster must be the tf_contrib_easgd.ClusterTask of this worker (from "
            "cluster_from_hosts, cluster_from_tf_config or cluster_from_slurm), got "
            f"{cluster!r} of type {type(cluster).__name__}."
        )
    if cluster.is_ps:
        raise ValueError(
            f"cluster is {cluster.name}, a parameter server: a ps task serves the centre "
            "(tf_contrib_easgd.serve_until_done(server)) and runs no model.fit."
        )
    return cluster


def _keras_name():
    """Which Keras tf.keras is, e.g. "keras 3.15.1" or "tf_keras 2.21.0"."""
    package = tf.keras.__name__.split(".")[0]
    return f"{package} {getattr(tf.keras, '__version__', '')}".strip()


def _check_eager():
    if not tf.executing_eagerly():
        raise ValueError(
            "ElasticAverageCallback works with model.fit in eager mode (TF 2), but fit runs "
            "in graph mode here (eager execution disabled by tf.compat.v1."
            "disable_eager_execution() or disable_v2_behavior(), or a tf.Graph().as_default() "
            "block). In a TF1 graph, train with ElasticAverageOptimizer instead."
        )
