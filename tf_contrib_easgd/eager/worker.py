"""ElasticAverageWorker: Elastic Averaging SGD for any variables trained eagerly in TF 2.

A custom training loop (`tf.GradientTape` and an optimizer, usually in a `tf.function`)
calls the worker once per step; `ElasticAverageCallback` is the same worker driven by
Keras's `model.fit`. The centre lives on the parameter servers of a ps/worker cluster and is
reached through a `CentreLink`. docs/KERAS.md ("A custom training loop") says how to use it.
"""

import os

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import _validation
from tf_contrib_easgd.eager.centre_link import CentreLink
from tf_contrib_easgd.eager.sender import ExchangeSender
from tf_contrib_easgd.eager.settings import Settings, check_eager
from tf_contrib_easgd.eager.variables import Averaged, centre_specs, tf_variable
from tf_contrib_easgd.job.recovery import train_with_recovery, wait_until_reachable

#: The chief's final centre in model_dir, as a `tf.train.Checkpoint` of the variables given.
CENTRE_CHECKPOINT = "centre"


class ElasticAverageWorker:
    """One worker of asynchronous Elastic Averaging SGD, for variables trained eagerly.

    Each worker task runs its own training loop in its own process, with any optimizer, and
    calls the worker once per local step:

        worker = ElasticAverageWorker(task, model, communication_period=10, model_dir=...)
        with worker:  # Starts from the centre; at the end, ends the job.
            for images, labels in dataset:
                train_step(images, labels)  # A tf.function: tape, gradients, optimizer.
                worker.step()

    * `start()` (entering `with`) starts the variables from the centre: the chief (worker 0)
      sets the centre up from its own variables (or keeps the one the parameter servers
      hold, or restores the latest checkpoint of `model_dir` into them), the other workers
      wait for it, at most `timeout_secs`, then copy it;
    * `step()`, every `communication_period` calls (tau), sends the variables x to the
      parameter servers, which compute d = moving_rate * (x - c) once per variable, add d
      to the centre c and send d back; the worker subtracts the same d from x (with
      `overlap=True`, at its next exchange, while this one travels; with a 16-bit
      `wire_dtype`, both sides compute d from 16-bit differences);
    * after a lost parameter server, waits for it and starts again from the centre (the
      chief restores its latest checkpoint into a restarted ps);
    * `end()` (leaving `with` without an error) copies the centre into the variables;
      another worker then reports itself done and closes its link; the chief first waits
      for the other workers' `end()` (at most `timeout_secs`), then, with a `model_dir`,
      checkpoints the centre there and writes it as a `tf.train.Checkpoint` (`centre`,
      which plain TF 2 reads), and with `stop_parameter_servers` stops them.

    The optimizer's state stays the worker's. There is no elastic penalty between exchanges
    (rho = 0, the paper's asynchronous EASGD). The parameter servers are
    `tf.distribute.Server`s that run `tf_contrib_easgd.serve_until_done(server)`.
    """

    def __init__(
        self,
        cluster,
        variables,
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
        """Checks the arguments; the cluster is reached by `start()`.

        Args:
            cluster: this worker's `tf_contrib_easgd.ClusterTask` (`cluster_from_hosts`,
                `cluster_from_tf_config`, `cluster_from_slurm`); worker 0 is the chief.
            variables: what to average: a list of floating-point variables (e.g.
                `model.trainable_variables` plus what else should be averaged), or a
                `tf.Module` or Keras model, whose every floating-point variable is averaged
                (read at `start()`: build it before).
            communication_period: steps between two exchanges (tau), at least 1.
            moving_rate: alpha in (0, 1]; None means 0.9 / number of workers, the
                paper's beta / W (as easgd-train's; `ElasticAverageOptimizer` keeps
                contrib's 0.9 / communication_period / number of workers): the best
                measured (BENCHMARKS.md, "Against TF 2's strategies"); with `overlap`,
                at most 0.5.
            model_dir: where the chief writes checkpoints of the centre (every
                `save_checkpoint_steps` steps, on `save_checkpoint()`, and at the end) and
                the final centre; None writes nothing.
            timeout_secs: deadline of every wait on another task: the centre at the start,
                a lost parameter server, the other workers at the end.
            save_checkpoint_steps: see `model_dir`; None or an int >= 1.
            stop_parameter_servers: whether the chief's `end()` stops the parameter
                servers' `serve_until_done`.
            server: this worker's started `tf.distribute.Server`; None starts one on the
                worker's address at `start()`.
            overlap: whether each exchange travels while the worker trains the next
                `communication_period` steps: its d, computed from the values as they were
                sent, is subtracted at the next exchange (and at `end()`), as
                `ElasticAverageOptimizer(overlap=True)` does.
            wire_dtype: None (or `tf.float32`) sends float32 values; `tf.bfloat16` or
                `tf.float16` (or their names) sends each float32/float64 variable as 16-bit
                differences, half the bytes, as `ElasticAverageOptimizer(wire_dtype=...)`
                (docs/DESIGN.md, "A 16-bit wire": no rounding error accumulates).

        Raises:
            TypeError: if an argument has the wrong type (e.g. `cluster` is None).
            ValueError: if an argument is out of range, `cluster` is a parameter server,
                a variable is not floating-point, or eager execution is off.
        """
        settings = Settings.checked(
            cluster, communication_period, moving_rate, model_dir, timeout_secs,
            save_checkpoint_steps, stop_parameter_servers, server, overlap, wire_dtype,
        )  # fmt: skip
        self._setup(settings, Averaged(variables))
        check_eager("ElasticAverageWorker", "a custom training loop")

    @classmethod
    def from_settings(cls, settings, variables):
        """A worker of checked `Settings` (the Keras callback checks them before `fit`)."""
        worker = cls.__new__(cls)
        worker._setup(settings, Averaged(variables))
        return worker

    def _setup(self, settings, averaged):
        self._settings = settings
        self._averaged = averaged
        self._server = settings.server
        self._sender = ExchangeSender(settings.timeout_secs, settings.task.name)  # Overlap.
        self._link = None
        self._variables = []  # The averaged variables, as given.
        self._weights = []  # The same, as the tf.Variables that hold them.
        self._steps = 0
        self._exchanges = 0
        self._global_step = 0
        self._lost = False  # A parameter server was lost: start again from the centre.
        self.recoveries = 0
        self.centre_found = None
        self.finished = None

    # What the worker has done, for logs and tests.

    @property
    def communication_period(self):
        """Steps between two exchanges (tau)."""
        return self._settings.period

    @property
    def moving_rate(self):
        """The elastic rate alpha."""
        return self._settings.moving_rate

    @property
    def overlap(self):
        """Whether exchanges overlap the steps that follow them."""
        return self._settings.overlap

    @property
    def wire_dtype(self):
        """The 16-bit dtype of the wire (`tf.bfloat16` or `tf.float16`), or None: float32."""
        return self._settings.wire_dtype

    @property
    def variables(self):
        """The averaged variables, as given, once each (found by `start()`; empty before)."""
        return list(self._variables)

    @property
    def local_steps(self):
        """Steps this process has counted."""
        return self._steps

    @property
    def exchanges(self):
        """Exchanges this process has made."""
        return self._exchanges

    @property
    def global_step(self):
        """The exchanges of all workers, as of this worker's start, last exchange or
        `end()` (on the chief, after the others have finished)."""
        return self._global_step

    @property
    def started(self):
        """Whether the worker is linked to the centre: from `start()` on, until `close()`,
        or `end()` (except on a chief that leaves the parameter servers running)."""
        return self._link is not None and self._link.connected

    def centre_values(self):
        """The centre, an array per averaged variable, read from the parameter servers.

        Raises:
            RuntimeError: unless `started`.
        """
        self._check_started("centre_values")
        return self._link.read()

    def elastic_distance(self):
        """The Euclidean norm of (the worker's values - the centre) over every averaged
        variable: 0 right after a start. Between `start()` and `end()`."""
        pairs = zip(self.values(), self.centre_values(), strict=True)
        return float(np.sqrt(sum(np.sum(np.square(x - c, dtype=np.float64)) for x, c in pairs)))

    def values(self):
        """The worker's own values, an array per averaged variable."""
        return [np.asarray(weight.numpy()) for weight in self._weights]

    # The loop's calls.

    def start(self):
        """Links to the centre (once) and starts the variables from it; returns self.

        Raises:
            ValueError: in graph mode, or if a module or model has no variables yet.
            TimeoutError: if the centre is not set up within `timeout_secs`, or an exchange
                left in flight (by a loop that raised) does not end within it.
        """
        check_eager("ElasticAverageWorker", "a custom training loop")
        if self._link is None:
            self._variables = self._averaged.collect()
            self._weights = [tf_variable(v) for v in self._variables]
            self._link = self._make_link()
        self._sender.discard()  # Its d must not land on the centre copied now.
        if self._link.connected:  # Started before: its session is open, copy the centre.
            self._reliably(self._copy_centre)
        else:
            self._lost = True  # Nothing linked yet: connect, then copy the centre.
            self._reliably(lambda: None)
        return self

    def step(self, steps=1):
        """Counts `steps` local steps, exchanging every `communication_period` of them and
        checkpointing (the chief) every `save_checkpoint_steps`.

        Raises:
            RuntimeError: unless `started`.
        """
        self._check_started("step")
        steps = _validation.check_int(steps, "steps", 1)
        before, self._steps = self._steps, self._steps + steps
        period, save_steps = self._settings.period, self._settings.save_steps
        if self._steps // period > before // period:
            self._reliably(self._exchange)
        if save_steps and self._steps // save_steps > before // save_steps:
            self.save_checkpoint()

    def save_checkpoint(self):
        """On the chief with a `model_dir`, writes a checkpoint of the centre (the one a
        restarted parameter server gets back); elsewhere does nothing. Returns its path.

        Raises:
            RuntimeError: unless `started`.
        """
        self._check_started("save_checkpoint")
        if self._settings.task.is_chief and self._settings.model_dir:
            return self._reliably(self._link.save_checkpoint)
        return None

    def end(self):
        """Ends the job in order (see the class docstring); the variables hold the centre.

        Returns:
            On the chief, the `FinishedWorkers` reports; elsewhere None.

        Raises:
            RuntimeError: unless `started`.
        """
        self._check_started("end")
        settings, chief = self._settings, self._settings.task.is_chief
        self._reliably(self._land)  # With overlap, the last exchange's move.
        if not chief:  # Its last call to the ps is `finish`: the chief may stop them then.
            self._take_centre()
        self.finished = self._reliably(
            lambda: self._link.finish(self._steps, settings.timeout_secs)
        )
        if chief:  # The others are done: the centre is final.
            self._take_centre()
            if settings.model_dir:
                self.save_checkpoint()
                self._export(settings.model_dir)
        self._sender.close()
        if not chief or settings.stop_ps:
            self._link.close()  # `start()` links it again.
        if chief and settings.stop_ps:
            self._link.stop_parameter_servers()
        return self.finished

    def close(self):
        """Closes the link without ending the job (after an error in the loop); an exchange
        in flight is waited for (at most `timeout_secs`) and dropped."""
        try:
            self._sender.close()
        finally:
            if self._link is not None:
                self._link.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, error_type, error, traceback):
        if error_type is None:
            self.end()
        else:
            self.close()

    # The work.

    def _check_started(self, call):
        if self._link is None:
            raise RuntimeError(
                f"ElasticAverageWorker.{call}() before start(): start the worker (or enter "
                "`with worker:`) before the first training step, so that it starts from "
                "the centre."
            )
        if not self.started:
            raise RuntimeError(
                f"ElasticAverageWorker.{call}() while its link to the centre is closed: the "
                "worker has ended or closed (or its last start failed); start() links it "
                "again and starts it from the centre."
            )

    def _export(self, model_dir):
        """The chief's final centre, as a `tf.train.Checkpoint` of what the user gave: a
        module or model as `model=`, a list as `variables=`."""
        owner = self._averaged.owner
        objects = {"model": owner} if owner is not None else {"variables": self._weights}
        tf.train.Checkpoint(**objects).write(os.path.join(model_dir, CENTRE_CHECKPOINT))

    def _make_link(self):
        specs = centre_specs(self._variables)
        link = self._link_class().of_worker(self._settings, specs, self._server)
        self._server = link.server  # Started once: a second server would find its port taken.
        return link

    def _link_class(self):
        return CentreLink

    def _reliably(self, action):
        """Runs `action()`; after a lost parameter server, waits until the parameter servers
        are back, starts again from the centre, and runs `action()` again.

        Returns:
            What `action` returns.
        """

        def attempt():
            if self._lost:
                self._connect()
            return action()

        task, timeout = self._settings.task, self._settings.timeout_secs
        return train_with_recovery(attempt, task.ps_hosts, timeout, self._on_recovery)

    def _connect(self):
        """Opens the link's session and copies the centre into the variables."""
        task, timeout = self._settings.task, self._settings.timeout_secs
        wait_until_reachable(task.ps_hosts, timeout)
        self.centre_found = self._link.connect(self.values(), timeout)
        self._copy_centre()
        self._global_step = self._link.global_step()
        self._lost = False
        tf.compat.v1.logging.info("%s started from the centre (%s), %d exchanges so far.",
                                  task.name, self.centre_found, self._global_step)  # fmt: skip

    def _exchange(self):
        """One exchange: x and the centre move towards each other by the same d. With
        overlap, the last exchange's d lands first and this one is sent off."""
        if not self._settings.overlap:
            self._apply(*self._link.exchange(self.values()))
            return
        self._land()
        # A copy: training goes on while the exchange reads it.
        values = [np.array(value) for value in self.values()]
        self._sender.send(self._link.exchange, values)

    def _land(self):
        """With overlap, waits for the exchange in flight, if any, and applies its d."""
        landed = self._sender.land()
        if landed is not None:
            self._apply(*landed)

    def _apply(self, deltas, global_step):
        for weight, delta in zip(self._weights, deltas, strict=True):
            weight.assign_sub(delta)
        self._global_step = global_step
        self._exchanges += 1

    def _on_recovery(self, error, recoveries):
        del error, recoveries  # `train_with_recovery` logs them.
        # Lost with the session, or the centre has its move already: the worker starts
        # again from the centre either way. Not left running on the old session.
        self._sender.discard()
        self._lost = True
        self.recoveries += 1

    def _take_centre(self):
        """Copies the centre into the variables and reads `global_step`, at the end."""
        self._reliably(self._copy_centre)
        self._global_step = self._reliably(self._link.global_step)

    def _copy_centre(self):
        """Starts the variables from the centre (over a 16-bit wire, the references too)."""
        for weight, value in zip(self._weights, self._link.start_values(), strict=True):
            weight.assign(value)
