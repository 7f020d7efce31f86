"""EASGD scenarios that run unchanged under tf.contrib.opt (TF 1.15) and tf_contrib_easgd.

tests/e2e/test_contrib_oracle.py runs this file as a program, once with the original
`tensorflow.contrib.opt.ElasticAverageOptimizer` on TensorFlow 1.15 (`.venv-tf115`, Python
3.7) and once per variable world with this package (the project's interpreter), each in a
process of its own, and compares what they write. The original is the oracle: where both
succeed they must agree; where contrib fails, the test says so next to our result.

Every scenario builds the same small model: a two-layer tanh network on a fixed batch per
worker (values on a 1/16 grid, exact in float32), its variables made with `get_variable`
under an `ElasticAverageCustomGetter` inside a `replica_device_setter` on an in-process
cluster of two ps tasks and two workers (`tf.compat.v1.train.Server`s on free loopback
ports). Each worker has a graph and a session of its own, as between-graph replication
has; the sessions run one at a time in the order of the scenario's `schedule`, so the
result does not depend on thread timing. After the start and after every step the program
reads every variable of every worker graph (the worker-local ones from each worker, the
global ones once) and writes them, with the variable collections and devices, the errors
met and the contents of the checkpoints written, to one JSON file per run
(`<scenario>.json`, `<scenario>@<source>-<kind>.json` for a run that continues from a
checkpoint).

This file runs on Python 3.7 (TensorFlow 1.15's last interpreter) as well as 3.11: no
assignment expressions, no `X | Y` types, no parenthesized context managers
(pyproject.toml gives ruff its own target version for it).

Usage:
    python contrib_scenarios.py --implementation=contrib --out=DIR --train
    python contrib_scenarios.py --implementation=package --world=tf2 --transport=direct \\
        --out=DIR --train --restore=contrib=CONTRIB_DIR/checkpoints
"""

import argparse
import json
import os
import sys
import threading
import time
import traceback
import uuid

import numpy as np

# Before TensorFlow starts: the package's exchanges need more inter-op threads than cores
# when the ps and the workers share a process (docs/API.md, "A whole cluster in one process").
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "16")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

# Sessions fail with DeadlineExceeded after this long instead of waiting forever.
OPERATION_TIMEOUT_MS = 20000
# The deadline of a restarted worker's start-up: contrib's barrier waits there for ever.
RESTART_TIMEOUT_MS = 8000
# Threads that start workers together (the synchronous barrier) must end by then.
THREAD_DEADLINE_SECS = 60.0

CHECKPOINT_KINDS = ("default", "full", "swapping")


class Scenario:
    """One training run, described in the package's terms.

    Attributes:
        name: the run's name, also its file name.
        checks: what the run checks, in a sentence.
        optimizer: the wrapped optimizer, a key of `OPTIMIZERS`.
        period: `communication_period`.
        moving_rate: `moving_rate`, None for the default.
        rho: `rho`, None for the default.
        workers: number of workers (`num_worker`); worker 0 is the chief.
        schedule: the worker of each local step, in order.
        partitioned: whether `w1` and `w2` are split in two partitions.
        reuse: None, "true" or "auto": a second tower reusing the variables with
            `reuse=True` or `reuse=tf.compat.v1.AUTO_REUSE`.
        synchronous: `synchronous`; the workers then start together (the barrier).
        restart: whether worker 1 is restarted at the end of the schedule.
        checkpoints: whether to write checkpoints at the end and continue from them.
        continue_steps: local steps of worker 0 after a restart from a checkpoint.
        layout: where the optimizer is built. "contrib": the model (and global_step)
            inside the getter's variable scope under the `replica_device_setter`, the
            optimizer and `minimize` after it under the worker device, as contrib's own
            tests did. "readme": all of it inside the getter's scope, as the README's
            migration example does.
    """

    def __init__(
        self,
        name,
        checks,
        optimizer,
        period,
        moving_rate=None,
        rho=None,
        workers=1,
        schedule=(0, 0, 0, 0, 0, 0, 0, 0),
        partitioned=False,
        reuse=None,
        synchronous=False,
        restart=False,
        checkpoints=False,
        continue_steps=6,
        layout="contrib",
    ):
        self.name = name
        self.checks = checks
        self.optimizer = optimizer
        self.period = period
        self.moving_rate = moving_rate
        self.rho = rho
        self.workers = workers
        self.schedule = tuple(schedule)
        self.partitioned = partitioned
        self.reuse = reuse
        self.synchronous = synchronous
        self.restart = restart
        self.checkpoints = checkpoints
        self.continue_steps = continue_steps
        self.layout = layout


# The wrapped optimizers and their learning rates.
OPTIMIZERS = {
    "sgd": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.2),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.05, 0.9),
    "nesterov": lambda: tf.compat.v1.train.MomentumOptimizer(0.05, 0.9, use_nesterov=True),
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.02),
    "rmsprop": lambda: tf.compat.v1.train.RMSPropOptimizer(0.02),
}

# Two workers interleaved unevenly: worker 1 takes two steps in a row, then worker 0 does.
INTERLEAVED = (0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0)

SCENARIOS = [
    # Plain SGD, the optimizer contrib's default rho was written for.
    Scenario(
        "sgd_default_period1",
        "default moving_rate (0.9) and rho: an exchange after every local step",
        "sgd",
        period=1,
    ),
    Scenario(
        "sgd_default_period3",
        "default moving_rate (0.3) and rho; exchanges after local steps 3 and 6 only",
        "sgd",
        period=3,
    ),
    Scenario(
        "sgd_explicit_period3",
        "explicit moving_rate and rho replace both defaults",
        "sgd",
        period=3,
        moving_rate=0.3,
        rho=0.5,
    ),
    Scenario(
        "sgd_rho0_period2",
        "rho=0.0 switches the elastic penalty off; the exchanges still pull",
        "sgd",
        period=2,
        moving_rate=0.5,
        rho=0.0,
    ),
    # Momentum and Nesterov: the penalty's gradient goes through the wrapped optimizer's
    # slots, and the slots live on the worker.
    Scenario(
        "momentum_default_period1",
        "Momentum slots with the default rho, an exchange every step",
        "momentum",
        period=1,
    ),
    Scenario(
        "momentum_default_period3",
        "Momentum with the default rho between exchanges",
        "momentum",
        period=3,
    ),
    Scenario(
        "momentum_explicit_period4",
        "Momentum with explicit moving_rate and rho",
        "momentum",
        period=4,
        moving_rate=0.2,
        rho=0.1,
    ),
    Scenario(
        "nesterov_default_period3",
        "Nesterov momentum (EAMSGD) with the default rho",
        "nesterov",
        period=3,
    ),
    Scenario(
        "nesterov_explicit_period1",
        "Nesterov momentum with explicit moving_rate and rho, an exchange every step",
        "nesterov",
        period=1,
        moving_rate=0.4,
        rho=0.2,
    ),
    # Adam: contrib's default rho reads `opt._learning_rate`, which Adam does not have.
    Scenario(
        "adam_default_period3",
        "Adam with the default rho: contrib fails to construct, the package trains",
        "adam",
        period=3,
    ),
    Scenario(
        "adam_rho_spelled_out_period3",
        "Adam with rho = moving_rate / learning_rate = 0.3 / 0.02 given explicitly: "
        "what the default means, so contrib can run it",
        "adam",
        period=3,
        rho=0.3 / 0.02,
    ),
    Scenario(
        "adam_explicit_period2",
        "Adam with explicit moving_rate and rho (its m, v and beta powers on the worker)",
        "adam",
        period=2,
        moving_rate=0.25,
        rho=0.05,
    ),
    Scenario(
        "rmsprop_default_period3",
        "RMSProp with the default rho (RMSProp has the attribute contrib reads)",
        "rmsprop",
        period=3,
    ),
    Scenario(
        "rmsprop_explicit_period2",
        "RMSProp with explicit moving_rate and rho",
        "rmsprop",
        period=2,
        moving_rate=0.3,
        rho=0.2,
    ),
    # Partitioned variables: centres, exchange and swapping saver partition by partition.
    Scenario(
        "partitioned_sgd_period2",
        "w1 and w2 in two partitions each, default moving_rate and rho",
        "sgd",
        period=2,
        partitioned=True,
    ),
    Scenario(
        "partitioned_adam_period3",
        "partitioned variables with Adam's slots per partition, explicit rates",
        "adam",
        period=3,
        moving_rate=0.3,
        rho=0.1,
        partitioned=True,
    ),
    # Reuse: a second tower gets the same worker copies and makes no second centre.
    Scenario(
        "reuse_true_momentum_period2",
        "a second tower with reuse=True shares the variables (contrib's early return)",
        "momentum",
        period=2,
        reuse="true",
    ),
    Scenario(
        "reuse_auto_sgd_period3",
        "a second tower with reuse=AUTO_REUSE shares the variables and their centres",
        "sgd",
        period=3,
        reuse="auto",
    ),
    # The README's layout: optimizer and minimize inside the getter's scope too.
    Scenario(
        "readme_layout_sgd_period2",
        "the optimizer built inside the getter's scope: local_step through the getter",
        "sgd",
        period=2,
        layout="readme",
    ),
    Scenario(
        "readme_layout_momentum_period2",
        "the optimizer built inside the getter's scope with a slot optimizer: contrib's "
        "getter fails on the slot's collections=None, the package trains",
        "momentum",
        period=2,
        layout="readme",
    ),
    Scenario(
        "momentum_default_period2",
        "the same run in contrib's layout, the reference of readme_layout_momentum_period2",
        "momentum",
        period=2,
    ),
    # Two workers, two ps tasks, one step at a time in a fixed order.
    Scenario(
        "two_workers_sgd_period1",
        "two workers exchange with the same centres after each step; global_step "
        "counts the exchanges of both",
        "sgd",
        period=1,
        workers=2,
        schedule=INTERLEAVED,
    ),
    Scenario(
        "two_workers_momentum_period3_partitioned",
        "two workers with partitioned variables spread over both ps tasks, exchanging "
        "at different times",
        "momentum",
        period=3,
        workers=2,
        schedule=INTERLEAVED,
        partitioned=True,
    ),
    Scenario(
        "two_workers_synchronous_nesterov_period2",
        "synchronous=True: both workers pass the start-up barrier together, then train; "
        "worker 1 restarted afterwards waits for ever on contrib, passes here",
        "nesterov",
        period=2,
        workers=2,
        schedule=INTERLEAVED[:8],
        synchronous=True,
        restart=True,
    ),
    # Checkpoints: written here at the end, continued from by both implementations.
    Scenario(
        "checkpoint_momentum_period2",
        "Momentum with two workers; the default Saver's, a Saver of every variable's and "
        "swapping_saver's checkpoints restore and training continues",
        "momentum",
        period=2,
        workers=2,
        schedule=INTERLEAVED[:8],
        checkpoints=True,
    ),
]

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}


def _grid(shape, seed):
    """Values in [-1, 1) on a 1/16 grid: the same float32 numbers on every numpy."""
    count = int(np.prod(shape))
    steps = (np.arange(count) * 7 + seed * 5 + 3) % 32 - 16
    return (steps / 16.0).astype(np.float32).reshape(shape)


def _initializer(seed):
    """A `get_variable` initializer of `_grid` values that also serves partitions."""

    def initialize(shape, dtype=tf.float32, partition_info=None):
        if partition_info is None:
            return tf.constant(_grid(shape, seed), dtype=dtype)
        full = _grid(partition_info.full_shape, seed)
        index = tuple(
            slice(offset, offset + size) for offset, size in zip(partition_info.var_offset, shape)
        )
        return tf.constant(full[index], dtype=dtype)

    return initialize


def _dense(variable):
    """A partitioned variable as one tensor (the concatenation of its partitions)."""
    return variable.as_tensor() if hasattr(variable, "as_tensor") else variable


def build_model(scenario, task_index):
    """Builds the network and its loss on worker `task_index`'s batch; returns the loss."""
    partitioner = tf.compat.v1.fixed_size_partitioner(2) if scenario.partitioned else None

    def tower(inputs, reuse):
        with tf.compat.v1.variable_scope("model", reuse=reuse):
            w1 = tf.compat.v1.get_variable(
                "w1", [4, 3], initializer=_initializer(1), partitioner=partitioner
            )
            b1 = tf.compat.v1.get_variable("b1", [3], initializer=_initializer(2))
            w2 = tf.compat.v1.get_variable(
                "w2", [3, 2], initializer=_initializer(3), partitioner=partitioner
            )
            b2 = tf.compat.v1.get_variable("b2", [2], initializer=_initializer(4))
        hidden = tf.tanh(tf.matmul(inputs, _dense(w1)) + b1)
        return tf.matmul(hidden, _dense(w2)) + b2

    inputs = tf.constant(_grid([6, 4], 10 + task_index))
    targets = tf.constant(_grid([6, 2], 20 + task_index))
    loss = tf.reduce_mean(tf.square(tower(inputs, None) - targets))
    if scenario.reuse is not None:
        reuse = True if scenario.reuse == "true" else tf.compat.v1.AUTO_REUSE
        second = tower(tf.constant(_grid([6, 4], 30 + task_index)), reuse)
        loss = loss + tf.reduce_mean(tf.square(second - targets))
    return loss


def load_implementation(name):
    """Returns (ElasticAverageCustomGetter, ElasticAverageOptimizer) of `name`."""
    if name == "contrib":
        from tensorflow.contrib.opt import (  # noqa: PLC0415
            ElasticAverageCustomGetter,
            ElasticAverageOptimizer,
        )
    else:
        from tf_contrib_easgd import (  # noqa: PLC0415
            ElasticAverageCustomGetter,
            ElasticAverageOptimizer,
        )
    return ElasticAverageCustomGetter, ElasticAverageOptimizer


class Cluster:
    """Two ps tasks and two workers as servers of this process, on free loopback ports."""

    def __init__(self, num_ps=2, num_workers=2):
        import portpicker  # noqa: PLC0415

        def addresses(count):
            return [f"localhost:{portpicker.pick_unused_port()}" for _ in range(count)]

        self.spec = tf.train.ClusterSpec(
            {"ps": addresses(num_ps), "worker": addresses(num_workers)}
        )
        self.servers = {}
        for job, count in (("ps", num_ps), ("worker", num_workers)):
            for index in range(count):
                self.servers[job, index] = tf.compat.v1.train.Server(
                    self.spec, job_name=job, task_index=index
                )

    def target(self, index):
        """The session target of worker `index`."""
        return self.servers["worker", index].target


def _device_name(device):
    """A device as "/job:J/task:T", whatever the format it was given in ("" if none)."""
    if not device:
        return ""
    spec = tf.DeviceSpec.from_string(device)
    return f"/job:{spec.job}/task:{spec.task}"


def _error(exception, where):
    """An exception as JSON: its class, message and the phase it happened in."""
    return {
        "type": type(exception).__name__,
        "message": str(exception).splitlines()[0] if str(exception) else "",
        "where": where,
        "traceback": traceback.format_exc(),
    }


def _array(value):
    """A fetched value as JSON: dtype, shape and the values (exact for float32 and ints)."""
    value = np.asarray(value)
    return {"dtype": value.dtype.name, "shape": list(value.shape), "values": value.ravel().tolist()}


class Worker:
    """One worker's graph, optimizer, hook and session, as a between-graph script has."""

    def __init__(self, options, cluster, scenario, index, container, restore_kind=None):
        getter_class, optimizer_class = load_implementation(options.implementation)
        self.index = index
        self.options = options
        self.cluster = cluster
        self.graph = tf.Graph()
        self.session = None
        device = f"/job:worker/task:{index}"
        self.device = device
        with self.graph.as_default():
            self.getter = getter_class(worker_device=device)
            setter = tf.compat.v1.train.replica_device_setter(
                worker_device=device, cluster=cluster.spec
            )
            scope = tf.compat.v1.variable_scope("", custom_getter=self.getter)
            with tf.compat.v1.container(container), tf.compat.v1.device(setter), scope:
                loss = build_model(scenario, index)
                self.global_step = tf.compat.v1.train.get_or_create_global_step()
                if scenario.layout == "readme":
                    self._optimize(optimizer_class, scenario, loss)
            if scenario.layout == "contrib":
                with tf.compat.v1.container(container), tf.compat.v1.device(device):
                    self._optimize(optimizer_class, scenario, loss)
            with tf.compat.v1.container(container):
                # As MonitoredTrainingSession does: begin() outside the device scopes.
                self.hook = self.optimizer.make_session_run_hook(index == 0, index)
                self.hook.begin()
                self.global_init = tf.compat.v1.global_variables_initializer()
                self.local_init = tf.compat.v1.local_variables_initializer()
                self.savers = self._savers(restore_kind)
            self.global_variables = {v.op.name: v for v in tf.compat.v1.global_variables()}
            self.local_variables = {v.op.name: v for v in tf.compat.v1.local_variables()}
            self.collections = {
                "global_variables": _devices(tf.compat.v1.global_variables()),
                "local_variables": _devices(tf.compat.v1.local_variables()),
                "trainable_variables": _devices(tf.compat.v1.trainable_variables()),
            }
            self.resource = sorted(
                {
                    "resource" in v.handle.dtype.name if hasattr(v, "handle") else False
                    for v in tf.compat.v1.global_variables() + tf.compat.v1.local_variables()
                }
            )

    def _optimize(self, optimizer_class, scenario, loss):
        """Builds the optimizer and the train op."""
        self.optimizer = optimizer_class(
            OPTIMIZERS[scenario.optimizer](),
            num_worker=scenario.workers,
            ea_custom_getter=self.getter,
            communication_period=scenario.period,
            moving_rate=scenario.moving_rate,
            rho=scenario.rho,
            synchronous=scenario.synchronous,
        )
        self.train_op = self.optimizer.minimize(loss, global_step=self.global_step)

    def _savers(self, restore_kind):
        """The Savers of the three checkpoint kinds (for restoring: only `restore_kind`'s)."""
        everything = tf.compat.v1.global_variables() + tf.compat.v1.local_variables()
        savers = {}
        kinds = CHECKPOINT_KINDS if restore_kind is None else (restore_kind,)
        for kind in kinds:
            if kind == "default":  # What MonitoredTrainingSession's Scaffold makes.
                savers[kind] = tf.compat.v1.train.Saver(name="default_saver")
            elif kind == "full":  # Worker copies, local centres, slots, local_step too.
                savers[kind] = tf.compat.v1.train.Saver(everything, name="full_saver")
            elif restore_kind is None:  # Writing: swapping_saver() with its defaults.
                savers[kind] = self.optimizer.swapping_saver()
            else:
                # Restoring: contrib's default var_list (the trainable variables), so that a
                # checkpoint without global_step (contrib's) restores in both.
                savers[kind] = self.optimizer.swapping_saver(
                    var_list=tf.compat.v1.trainable_variables(), name="swapping_restorer"
                )
        return savers

    def open_session(self, timeout_ms=OPERATION_TIMEOUT_MS):
        """Creates the session (ps tasks and this worker only, every wait with a deadline)."""
        config = tf.compat.v1.ConfigProto(
            device_filters=["/job:ps", self.device], operation_timeout_in_ms=timeout_ms
        )
        if self.options.transport == "direct":
            config.share_cluster_devices_in_session = True
        self.session = tf.compat.v1.Session(
            self.cluster.target(self.index), graph=self.graph, config=config
        )

    def initialize(self, chief):
        """Initializes the global variables (`chief`) and this worker's local ones."""
        with self.graph.as_default():
            if chief:
                self.session.run(self.global_init)
            self.session.run(self.local_init)

    def start(self):
        """What the hook does after session creation (the barrier, then x, x~' <- x~)."""
        # In the graph: in TF 2 graph mode eager execution is on outside of it.
        with self.graph.as_default():
            self.hook.after_create_session(self.session, None)

    def transport(self):
        """The package's exchange transport, None for contrib."""
        return getattr(self.hook, "exchange_transport", None)

    def step(self):
        with self.graph.as_default():
            self.session.run(self.train_op)

    def save(self, kind, out_dir, scenario):
        """Saves with the `kind` Saver to OUT/checkpoints/SCENARIO/KIND/model.ckpt."""
        folder = os.path.join(out_dir, "checkpoints", scenario.name, kind)
        if not os.path.isdir(folder):
            os.makedirs(folder)
        path = os.path.join(folder, "model.ckpt")
        with self.graph.as_default():
            return self.savers[kind].save(self.session, path, write_meta_graph=False)

    def restore(self, kind, checkpoint):
        with self.graph.as_default():
            self.savers[kind].restore(self.session, checkpoint)

    def read(self, with_global):
        """This worker's variables (prefixed "workerN:"), and the global ones if asked."""
        fetches = {f"worker{self.index}:{n}": v for n, v in self.local_variables.items()}
        if with_global:
            fetches.update(self.global_variables)
        with self.graph.as_default():
            values = self.session.run(fetches)
        return {name: _array(value) for name, value in values.items()}

    def close(self):
        if self.session is not None:
            self.session.close()
            self.session = None


def _devices(variables):
    return {v.op.name: _device_name(v.device) for v in variables}


def _read_checkpoint(path):
    """Every tensor of a checkpoint, by name."""
    return {
        name: _array(tf.train.load_variable(path, name))
        for name, _ in tf.train.list_variables(path)
    }


def _snapshot(workers, stepped):
    """Every variable of every worker after a step of worker `stepped` (None: the start)."""
    values = {}
    live = [worker for worker in workers if worker is not None]
    for worker in live:
        values.update(worker.read(with_global=worker is live[0]))
    return {"worker": stepped, "values": values}


def _start_together(workers):
    """Runs the workers' start-ups in threads (the barrier needs them all at once)."""
    outcomes = {}

    def start(worker):
        try:
            worker.start()
            outcomes[worker.index] = "ok"
        except Exception as exception:  # noqa: BLE001 (recorded for the comparison)
            outcomes[worker.index] = type(exception).__name__

    threads = [threading.Thread(target=start, args=(w,), daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + THREAD_DEADLINE_SECS
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    for worker in workers:
        outcomes.setdefault(worker.index, "still waiting")
    return outcomes


def _new_container():
    """A container of the run's own, so that no state leaks between runs on the servers."""
    return "c" + uuid.uuid4().hex  # Letters and digits only.


def run_scenario(options, cluster, scenario, out_dir):
    """Trains `scenario`; writes checkpoints when it asks; returns the result as JSON."""
    result = {"scenario": scenario.name, "steps": [], "graphs": [], "events": {}, "error": None}
    container = _new_container()
    workers = []
    where = "build"
    try:
        workers = [
            Worker(options, cluster, scenario, index, container)
            for index in range(scenario.workers)
        ]
        result["graphs"] = [_graph_record(worker) for worker in workers]
        where = "start"
        for worker in workers:
            worker.open_session()
        for worker in workers:
            worker.initialize(chief=worker.index == 0)
        if scenario.synchronous:
            result["events"]["start"] = _start_together(workers)
        else:
            for worker in workers:
                worker.start()
            result["events"]["start"] = {str(w.index): "ok" for w in workers}
        result["events"]["transport"] = [worker.transport() for worker in workers]
        result["steps"].append(_snapshot(workers, None))
        for number, index in enumerate(scenario.schedule):
            where = f"step {number + 1} (worker {index})"
            workers[index].step()
            result["steps"].append(_snapshot(workers, index))
        where = "swapping_saver"
        saved = workers[0].save("swapping", out_dir, scenario)
        result["swapping_checkpoint"] = _read_checkpoint(saved)
        if scenario.checkpoints:
            where = "checkpoints"
            result["checkpoints"] = {}
            for kind in ("default", "full"):
                saved = workers[0].save(kind, out_dir, scenario)
                result["checkpoints"][kind] = _read_checkpoint(saved)
        if scenario.restart:
            where = "restart"
            result["events"]["restart"] = _restart_worker(
                options, cluster, scenario, workers, container, result
            )
    except Exception as exception:  # noqa: BLE001 (recorded for the comparison)
        result["error"] = _error(exception, where)
    finally:
        for worker in workers:
            worker.close()
    return result


def _restart_worker(options, cluster, scenario, workers, container, result):
    """Restarts worker 1 after the barrier: a new graph and session, start-up again.

    The start-up has a short deadline (`RESTART_TIMEOUT_MS`): contrib's barrier waits for
    tokens no other worker will send again. When it passes, worker 1 takes one more step
    and its variables are recorded.

    Returns:
        "ok" or the class name of the error the start-up ended with.
    """
    workers[1].close()
    restarted = Worker(options, cluster, scenario, 1, container)
    workers[1] = restarted
    result["graphs"].append(_graph_record(restarted))
    restarted.open_session(timeout_ms=RESTART_TIMEOUT_MS)
    restarted.initialize(chief=False)
    try:
        restarted.start()
    except tf.errors.DeadlineExceededError as exception:
        return type(exception).__name__
    result["steps"].append(_snapshot(workers, None))
    restarted.step()
    result["steps"].append(_snapshot(workers, 1))
    return "ok"


def _graph_record(worker):
    return {"worker": worker.index, "collections": worker.collections, "resource": worker.resource}


def continue_from(options, cluster, scenario, checkpoint, kind):
    """Restores `checkpoint` (of `kind`) into a new job and trains worker 0 on.

    Everything is initialized, then the checkpoint restored, then the hook's start-up run
    (worker copies and local centres <- centre), as a restarted chief would. The first
    snapshot is taken right after the restore, the second after the start-up.
    """
    result = {"scenario": scenario.name, "checkpoint": checkpoint, "kind": kind}
    result.update(steps=[], graphs=[], events={}, error=None)
    worker = None
    where = "build"
    try:
        # One worker continues, as the chief of a job restarted from the checkpoint.
        worker = Worker(options, cluster, scenario, 0, _new_container(), restore_kind=kind)
        result["graphs"] = [_graph_record(worker)]
        where = "restore"
        worker.open_session()
        worker.initialize(chief=True)
        worker.restore(kind, checkpoint)
        result["steps"].append(_snapshot([worker], None))
        worker.start()
        result["steps"].append(_snapshot([worker], None))
        for number in range(scenario.continue_steps):
            where = f"step {number + 1}"
            worker.step()
            result["steps"].append(_snapshot([worker], 0))
    except Exception as exception:  # noqa: BLE001 (recorded for the comparison)
        result["error"] = _error(exception, where)
    finally:
        if worker is not None:
            worker.close()
    return result


def _write(out_dir, name, result, options):
    result["implementation"] = options.implementation
    result["world"] = options.world
    result["tensorflow"] = tf.__version__
    with open(os.path.join(out_dir, name + ".json"), "w") as file:
        json.dump(result, file)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--implementation", choices=("contrib", "package"), required=True)
    parser.add_argument("--world", choices=("tf1", "tf2"), default="tf1")
    parser.add_argument("--transport", choices=("remote_call", "direct"), default="remote_call")
    parser.add_argument("--out", required=True)
    parser.add_argument("--train", action="store_true", help="run every scenario")
    parser.add_argument(
        "--restore",
        action="append",
        default=[],
        metavar="SOURCE=DIR",
        help="continue from the checkpoints SOURCE wrote under DIR",
    )
    parser.add_argument("--only", default="", help="comma-separated scenario names")
    options = parser.parse_args(argv)
    if options.implementation == "contrib" and options.world != "tf1":
        parser.error("contrib runs in TF1 mode only")
    if options.world == "tf1":
        # On TF 2 the package's users call this; TF 1.15 is in TF1 mode already.
        tf.compat.v1.disable_v2_behavior()
    own_label = options.implementation
    if options.implementation == "package":
        own_label = "package-" + options.world
    scenarios = [BY_NAME[n] for n in options.only.split(",") if n] or SCENARIOS
    if not os.path.isdir(options.out):
        os.makedirs(options.out)

    began = time.monotonic()
    cluster = Cluster()
    written = []
    if options.train:
        for scenario in scenarios:
            began_scenario = time.monotonic()
            result = run_scenario(options, cluster, scenario, options.out)
            result["seconds"] = time.monotonic() - began_scenario
            _write(options.out, scenario.name, result, options)
            written.append(scenario.name)
        # Then its own continuations, the reference for the other implementation's.
        options.restore.insert(0, f"{own_label}={os.path.join(options.out, 'checkpoints')}")
    for source in options.restore:
        label, directory = source.split("=", 1)
        for scenario in scenarios:
            if not scenario.checkpoints:
                continue
            for kind in CHECKPOINT_KINDS:
                checkpoint = os.path.join(directory, scenario.name, kind, "model.ckpt")
                name = f"{scenario.name}@{label}-{kind}"
                result = continue_from(options, cluster, scenario, checkpoint, kind)
                result["source"] = label
                _write(options.out, name, result, options)
                written.append(name)
    summary = {
        "written": written,
        "seconds": time.monotonic() - began,
        "tensorflow": tf.__version__,
    }
    _write(options.out, "index", summary, options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
