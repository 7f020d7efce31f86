"""An eager worker's link to the centre: a TF1 graph and session of its own on the ps cluster.

The variables train eagerly (a custom loop, or Keras `model.fit`); the centre lives in the
parameter servers' resource managers as in a TF1 job, where every worker's session finds it
by name. `CentreLink` builds, once, the graph of everything a worker asks of the centre
(start, exchange, checkpoint, end of job), at full width or over a 16-bit wire
(`link_wire`), and opens its session with the library's session creators. docs/KERAS.md,
"How it works".
"""

import dataclasses
import os

import numpy as np
import tensorflow as tf

from tf_contrib_easgd.custom_getter import GLOBAL_STEP, GLOBAL_VARIABLE_NAME
from tf_contrib_easgd.eager.link_wire import LinkWire
from tf_contrib_easgd.job.completion import TrainingCompletion
from tf_contrib_easgd.job.sessions import CentreKeepingScaffold, CentreWaitingSessionCreator

#: Checkpoints the chief keeps in its model_dir.
MAX_CHECKPOINTS = 3
#: The file name prefix of those checkpoints.
CHECKPOINT_PREFIX = "centre.ckpt"


@dataclasses.dataclass(frozen=True)
class CentreSpec:
    """One averaged variable: its centre's name (without the prefix), shape and dtype."""

    name: str
    shape: tuple
    dtype: tf.DType


class CentreLink:
    """The centre of a worker's variables on the parameter servers, and its session to it.

    Each variable has a centre `global_center_variable/NAME` on a parameter server (placed
    by size, the largest first on the least loaded task), and ps 0 holds `global_step`,
    which counts the exchanges of all workers. An exchange is one `session.run`: the worker
    feeds its values x; each parameter server computes d = alpha * (x - c) for its centres,
    adds d to them and returns d, which the worker subtracts from its variables. Each
    tensor crosses once each way. Over a 16-bit wire (`LinkWire`) the worker sends
    s = wire(x - r) instead, the parameter server answers e = wire(c - r), and both sides
    compute d = alpha * (s - e) from those two tensors with the same ops; r, a reference
    both hold, moves by e on each. The run's graph has a partition per parameter server,
    and the master starts them all at once: the calls to P parameter servers are in flight
    together, and the exchange ends when the last one has answered (`global_step` moves
    once every centre has).
    """

    def __init__(
        self, task, specs, moving_rate, server, session_config, model_dir, wire_dtype=None
    ):
        """Builds the graph. Nothing runs until `connect`.

        Args:
            task: the worker's `ClusterTask`.
            specs: a `CentreSpec` per averaged variable, in the worker's order.
            moving_rate: alpha, a float in (0, 1].
            server: the worker's started `tf.distribute.Server`.
            session_config: the `tf.compat.v1.ConfigProto` of the sessions.
            model_dir: where the chief checkpoints the centre, or None.
            wire_dtype: None (float32 values cross), or the checked 16-bit dtype of the
                wire, `tf.bfloat16` or `tf.float16`.
        """
        self._task = task
        self._server = server
        self._config = session_config
        self._model_dir = model_dir
        self._session = None
        self._run_exchange = None
        self.wire = None if wire_dtype is None else LinkWire(wire_dtype, task, moving_rate)
        self.graph = tf.Graph()
        with self.graph.as_default():
            self._build(task, specs, moving_rate)

    @classmethod
    def of_worker(cls, settings, specs, server=None):
        """The link of a worker of checked `Settings` (`eager.settings`): no op of its
        sessions waits longer than `timeout_secs`; the chief makes its `model_dir`.

        Args:
            settings: the worker's `Settings`.
            specs: a `CentreSpec` per averaged variable, in the worker's order.
            server: the worker's started `tf.distribute.Server`; None starts it.

        Raises:
            RuntimeError: if the worker's server cannot start (`start_server`).
        """
        task = settings.task
        config = session_config(task, settings.timeout_secs)
        if server is None:
            server = start_server(task, config)
        model_dir = settings.model_dir if task.is_chief else None
        if model_dir:
            os.makedirs(model_dir, exist_ok=True)
        return cls(task, specs, settings.moving_rate, server, config, model_dir,
                   wire_dtype=settings.wire_dtype)  # fmt: skip

    @property
    def server(self):
        """The worker's `tf.distribute.Server`, whose target the sessions use."""
        return self._server

    def _build(self, task, specs, moving_rate):
        worker = task.device
        devices = _balance(specs, task.num_ps)
        with tf.compat.v1.device(worker):
            self._values = [
                tf.compat.v1.placeholder(spec.dtype, spec.shape, name=f"value_{index}")
                for index, spec in enumerate(specs)
            ]
        centres, deltas, moves, starts, started = [], [], [], [], []
        for spec, value, device in zip(specs, self._values, devices, strict=True):
            with tf.compat.v1.device(device):
                centre = tf.Variable(
                    tf.zeros(spec.shape, spec.dtype),
                    name=f"{GLOBAL_VARIABLE_NAME}/{spec.name}",
                    trainable=False,
                )
            if self.wire is not None and self.wire.narrows(spec):
                delta, move = self.wire.exchange(spec, centre, value)
                start, assigned = self.wire.start(spec, centre)
                started.append(assigned)
            else:
                with tf.compat.v1.device(device):
                    delta, move = self._move_centre(spec, centre, value, moving_rate)
                start = centre.value()
            moves.append(move)
            centres.append(centre)
            deltas.append(delta)
            starts.append(start)
        with tf.compat.v1.device("/job:ps/task:0"):
            self._global_step = tf.Variable(
                tf.zeros([], tf.int64), name=GLOBAL_STEP, trainable=False
            )
            with tf.control_dependencies(moves):
                exchanged = self._global_step.assign_add(1)
        self._exchange = (deltas, exchanged)
        self._read = [centre.value() for centre in centres]
        self._start = (starts, tf.group(*started))
        self._read_step = self._global_step.value()
        with tf.compat.v1.device(worker):
            self._set = tf.group(*(c.assign(v) for c, v in zip(centres, self._values, strict=True)))
            self._saver = tf.compat.v1.train.Saver(
                [*centres, self._global_step],
                sharded=False,  # The chief writes the file, the ps need no model_dir.
                max_to_keep=MAX_CHECKPOINTS,
                save_relative_paths=True,
            )
            self._completion = TrainingCompletion(
                task.cluster_spec(), task.is_chief, task.task_index
            )

    def _move_centre(self, spec, centre, value, moving_rate):
        """On the centre's parameter server: d = alpha * (x - c) and the op adding d to c.

        d is computed once, here; the worker subtracts the same d. Returns `(d, move)`.
        """
        delta = tf.cast(moving_rate, spec.dtype) * (value - centre.value())
        return delta, centre.assign_add(delta, read_value=False)

    def connect(self, initial_values, timeout_secs):
        """Opens the session; the chief first sets up the centre, the others wait for it.

        The chief keeps a centre the parameter servers hold (a restarted chief), restores
        the latest checkpoint of `model_dir` when they lost part of it (a restarted ps),
        and otherwise initialises it from `initial_values`, its own values.

        Args:
            initial_values: the chief's values, an array per variable, used only to
                initialise the centre.
            timeout_secs: how long a non-chief waits for the chief's centre.

        Returns:
            How the centre was found: "kept", "restored", "initialised" (the chief) or
            "waited" (another worker).

        Raises:
            TimeoutError: if the centre is not set up within `timeout_secs`.
        """
        self.close()
        found = []
        with self.graph.as_default():
            if self._task.is_chief:

                def initialise(scaffold, session):
                    del scaffold  # Unused.
                    session.run(self._set, dict(zip(self._values, initial_values, strict=True)))

                scaffold = CentreKeepingScaffold(
                    saver=self._saver,
                    init_fn=initialise,
                    on_centre_ready=lambda session, how, path: found.append(how),
                )
                creator = tf.compat.v1.train.ChiefSessionCreator(
                    scaffold=scaffold,
                    master=self._server.target,
                    config=self._config,
                    checkpoint_dir=self._model_dir,
                )
            else:
                found.append("waited")
                creator = CentreWaitingSessionCreator(
                    scaffold=tf.compat.v1.train.Scaffold(saver=self._saver),
                    master=self._server.target,
                    config=self._config,
                    max_wait_secs=timeout_secs,
                )
            self._session = creator.create_session()
            self._run_exchange = self._session.make_callable(self._exchange, feed_list=self._values)
        return found[-1]

    @property
    def connected(self):
        """Whether the session is open."""
        return self._session is not None

    def read(self):
        """Returns the centre: an array per variable."""
        return self._session.run(self._read)

    def start_values(self):
        """Returns the centre, an array per variable, for the worker to start from: read
        once, and over a 16-bit wire also assigned to both sides' references."""
        return self._session.run(self._start)[0]

    def exchange(self, values):
        """Moves the centre towards `values` by d = alpha * (values - centre) (over a 16-bit
        wire, d = alpha * (s - e), see the class docstring).

        Args:
            values: the worker's values, an array per variable.

        Returns:
            `(deltas, global_step)`: the d of each variable, to subtract from the worker's
            variables, and the exchanges of all workers so far.
        """
        deltas, step = self._run_exchange(*values)
        return deltas, int(step)

    def global_step(self):
        """The exchanges of all workers so far."""
        return int(self._session.run(self._read_step))

    def save_checkpoint(self):
        """Writes a checkpoint of the centre and `global_step` to `model_dir`; its path."""
        prefix = os.path.join(self._model_dir, CHECKPOINT_PREFIX)
        with self.graph.as_default():  # A Saver runs in graph mode only.
            return self._saver.save(
                self._session, prefix, global_step=self.global_step(), write_meta_graph=False
            )

    def finish(self, local_steps, timeout_secs):
        """Reports this worker done; the chief waits for the others (`TrainingCompletion`).

        Returns:
            On the chief, the `FinishedWorkers`; elsewhere None.
        """
        return self._completion.finish(self._session, local_steps, timeout_secs)

    def stop_parameter_servers(self):
        """On the chief, ends every parameter server's `serve_until_done`."""
        self._completion.stop_parameter_servers(self._server.target, config=self._config)

    def close(self):
        """Closes the session, if one is open."""
        if self._session is not None:
            session, self._session = self._session, None
            session.close()


def session_config(task, timeout_secs):
    """The `ConfigProto` of a worker's sessions and server: it sees the ps and itself only
    (so it starts while another worker is down), and no op waits longer than the timeout."""
    return tf.compat.v1.ConfigProto(
        device_filters=["/job:ps", task.device],
        operation_timeout_in_ms=max(int(timeout_secs * 1000), 1),
    )


def start_server(task, config):
    """Starts the worker's `tf.distribute.Server` on its address.

    Raises:
        RuntimeError: if the server cannot start, naming the address (a port taken).
    """
    try:
        return tf.distribute.Server(
            task.cluster_spec(),
            job_name=task.job_name,
            task_index=task.task_index,
            config=config,
            start=True,
        )
    except tf.errors.UnknownError as error:
        raise RuntimeError(
            f"Could not start {task.name}'s server on {task.address} ({error.message}): is "
            "the port taken, by another process or by a server this process started already "
            "(then pass it as server=)?"
        ) from None


def _balance(specs, num_ps):
    """The parameter server of each variable's centre: by size, the largest first, each on the
    task with the fewest bytes so far (ties: the lowest index)."""
    loads = [0] * num_ps
    devices = [None] * len(specs)
    order = sorted(
        range(len(specs)), key=lambda i: -int(np.prod(specs[i].shape)) * specs[i].dtype.size
    )
    for index in order:
        task = loads.index(min(loads))
        loads[task] += int(np.prod(specs[index].shape)) * specs[index].dtype.size
        devices[index] = f"/job:ps/task:{task}"
    return devices
