"""One worker's training graph for each benchmark configuration.

- `local`: no ps; the worker trains its own variables (the ceiling).
- `async`: between-graph replication, variables on the ps, plain SGD; `sync`: the same
  with `SyncReplicasOptimizer` aggregating every worker's gradient.
- `easgd-P[-alphaA][-rhoR][-remotecall|-overlap][-bf16|-fp16]`: `ElasticAverageOptimizer`
  with period P, moving rate A and rho R (numbers, or `default`: the library's; rho 0
  without), exchanges by `RemoteCall` (a session without `share_cluster_devices_in_session`)
  or overlapped, over a 16-bit wire.
- `naive-easgd-P`: the first exchange design, a per-step `tf.cond` whose branch has ops on
  the ps (`NaiveElasticAverageOptimizer`), for comparison.
- `copy-easgd-P`: an exchange with EASGD's calls and bytes and no arithmetic: its floor
  (`CopyOnlyExchange`, checked on the cluster before it is measured: `check_copy_only`).
"""

import dataclasses
import re
import uuid

import numpy as np
import tensorflow as tf

from benchmarks import models
from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange

_EASGD = re.compile(
    r"^(naive-|copy-)?easgd-(\d+)(?:-alpha(default|[0-9.]+))?(?:-rho(default|[0-9.]+))?"
    r"(-remotecall|-overlap)?(-bf16|-fp16)?$"
)
_WIRE_DTYPES = {"-bf16": "bfloat16", "-fp16": "float16"}
BASELINES = ("local", "async", "sync")
OPERATION_TIMEOUT_MS = 60_000  # A blocked session.run fails instead of hanging.


@dataclasses.dataclass
class Built:
    """A configuration's graph: its step, the init ops of worker 0 (`chief_init`) and of
    the others, the shared model's parameters (centre, ps variables or own), the sync or
    EASGD optimizer, whether the session shares the cluster's devices, the loss, and
    EASGD's exchange as an op of its own (`build(standalone_exchange=True)`)."""

    graph: tf.Graph
    train_op: tf.Operation
    chief_init: list
    worker_init: list
    shared_params: dict
    sync_optimizer: object = None
    easgd_optimizer: object = None
    share_devices: bool = True
    loss: tf.Tensor = None
    exchange_op: tf.Tensor = None


def _number(text, absent):
    """The number in `text`; None for "default" (the library's); `absent` without one."""
    return absent if text is None else None if text == "default" else float(text)


def build(config, spec, cluster_spec, task_index, num_workers, learning_rate, inputs_fn,
          container="", standalone_exchange=False):  # fmt: skip
    """Builds worker `task_index`'s graph of `config` for `spec` (`specs.ModelSpec`);
    `inputs_fn()` gives a step's (images, labels) on the worker device. Returns a `Built`."""
    match = _EASGD.match(config)
    if config not in BASELINES and not match:
        raise ValueError(f"Unknown configuration {config!r}; see benchmarks/graphs.py.")
    if config.startswith("copy-") and cluster_spec is not None:
        check_copy_only(cluster_spec, task_index, not config.endswith("-remotecall"))
    spec = spec.as_json()
    worker = f"/job:worker/task:{task_index}" if cluster_spec else ""
    graph = tf.Graph()
    with graph.as_default(), tf.compat.v1.container(container):
        with tf.compat.v1.device(worker):
            batch = inputs_fn()
        sgd = tf.compat.v1.train.GradientDescentOptimizer(learning_rate)
        if config == "local":
            with tf.compat.v1.device(worker):
                params = models.make_params(spec)
                loss = models.loss(spec, params, *batch)
                train_op = sgd.minimize(loss)
            init = [
                tf.compat.v1.global_variables_initializer(),
                tf.compat.v1.local_variables_initializer(),
            ]
            return Built(graph, train_op, init, init, params, loss=loss)
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device=worker, cluster=cluster_spec
        )
        if config in ("async", "sync"):
            return _replicated(graph, config, spec, setter, sgd, batch, num_workers)
        getter = ElasticAverageCustomGetter(worker)
        with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
            params = models.make_params(spec)
            global_step = tf.compat.v1.train.get_or_create_global_step()
            opt = _elastic_optimizer(match.groups(), sgd, num_workers, getter)
            loss = models.loss(spec, params, *batch)
            train_op = opt.minimize(loss, global_step=global_step)
            exchange_op = None
            if standalone_exchange:  # Before the init op: a 16-bit wire refuses it after.
                centered = [getter.find(v) for v in params.values()]
                with tf.compat.v1.device(worker):
                    exchange_op = opt._make_exchange(centered, global_step)()
            worker_init = [tf.compat.v1.local_variables_initializer(), opt.get_init_op(task_index)]
            chief_init = [tf.compat.v1.global_variables_initializer(), *worker_init]
        centres = {name: getter.find(v).global_center for name, v in params.items()}
        share_devices = not config.endswith("-remotecall")
        return Built(graph, train_op, chief_init, worker_init, centres, None, opt, share_devices,
                     loss, exchange_op)  # fmt: skip


def _replicated(graph, config, spec, setter, sgd, batch, num_workers):
    """`async` or `sync`: the variables on the ps, the step's gradient sent there."""
    with tf.compat.v1.device(setter):
        params = models.make_params(spec)
        global_step = tf.compat.v1.train.get_or_create_global_step()
        loss = models.loss(spec, params, *batch)
        sync = None
        if config == "sync":
            sync = tf.compat.v1.train.SyncReplicasOptimizer(
                sgd, replicas_to_aggregate=num_workers, total_num_replicas=num_workers
            )
        train_op = (sync or sgd).minimize(loss, global_step=global_step)
    local_init = tf.compat.v1.local_variables_initializer()
    chief_init = [tf.compat.v1.global_variables_initializer(), local_init]
    worker_init = [local_init]
    if sync is not None:
        chief_init += [sync.chief_init_op, sync.get_init_tokens_op()]
        worker_init += [sync.local_step_init_op]
    return Built(graph, train_op, chief_init, worker_init, params, sync, loss=loss)


def _elastic_optimizer(groups, sgd, num_workers, getter):
    """The EASGD optimizer of a configuration's `_EASGD` groups."""
    variant, period, moving_rate, rho, suffix, wire = groups
    optimizer_class = {
        None: ElasticAverageOptimizer,
        "naive-": NaiveElasticAverageOptimizer,
        "copy-": CopyOnlyElasticAverageOptimizer,
    }[variant]
    options = {"overlap": True} if suffix == "-overlap" else {}
    if wire:
        options["wire_dtype"] = _WIRE_DTYPES[wire]
    return optimizer_class(
        sgd, num_workers, getter, communication_period=int(period),
        moving_rate=_number(moving_rate, None), rho=_number(rho, 0.0), **options,
    )  # fmt: skip


def with_empty_cond(built, never):
    """`built`'s step followed by the cheapest periodic check a graph can make: a step
    counter and a `tf.cond` whose branches do nothing (section 4's reference)."""
    with built.graph.as_default():
        counter = tf.compat.v1.get_variable(
            "period_counter",
            [],
            tf.int64,
            initializer=tf.compat.v1.zeros_initializer(),
            trainable=False,
            collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES],
        )
        with tf.control_dependencies([built.train_op]):
            count = tf.compat.v1.assign_add(counter, 1)
        due = tf.equal(tf.math.floormod(count, never), 0)
        checked = tf.compat.v1.cond(due, lambda: tf.constant(True), lambda: tf.constant(False))
        built.train_op = tf.group(checked)
        built.chief_init = [*built.chief_init, counter.initializer]
    return built


class NaiveElasticAverageOptimizer(ElasticAverageOptimizer):
    """The exchange as first written: a per-step `tf.cond` whose true branch has ops on the
    ps, so every step's graph has a ps partition (what the library's design saves)."""

    def _exchange_if_due(self, local_update, centered, global_step):
        worker, lock = self._getter.worker_device, self._use_locking
        with tf.compat.v1.device(worker), tf.control_dependencies([local_update]):
            step = tf.compat.v1.assign_add(self._local_step, 1, use_locking=lock)
            is_exchange_step = tf.equal(tf.math.floormod(step, self._period), 0)

        def exchange():
            updates = []
            for entry in centered:
                with tf.compat.v1.device(worker):
                    center = tf.identity(entry.global_center.read_value())
                    refresh = tf.compat.v1.assign(entry.local_center, center, use_locking=lock)
                    with tf.control_dependencies([refresh]):
                        rate = tf.cast(self._moving_rate, center.dtype)
                        delta = rate * (entry.worker.read_value() - center)
                    updates.append(
                        tf.compat.v1.assign_sub(entry.worker, delta, use_locking=lock).op
                    )
                updates.append(
                    tf.compat.v1.assign_add(entry.global_center, delta, use_locking=lock).op
                )
            if global_step is not None:
                with tf.control_dependencies(updates):
                    updates.append(tf.compat.v1.assign_add(global_step, 1, use_locking=lock).op)
            with tf.control_dependencies(updates):
                return tf.constant(True)

        return tf.cond(
            is_exchange_step, exchange, lambda: tf.constant(False), name="exchange_if_due"
        )


class CopyOnlyExchange(ElasticExchange):
    """`ElasticExchange` whose halves only store what they receive: the ps takes the
    worker's values, the worker takes the centres as its local centres."""

    def __init__(self, centered, worker_device, *args, **kwargs):
        super().__init__(centered, worker_device, *args, **kwargs)
        if self.local_centres:
            names = [centre.name for centre in self.local_centres]
            raise ValueError(f"CopyOnlyExchange needs every centre on a ps task, got {names}.")

    def _move_centre(self, centre_address, value, centre):
        with tf.control_dependencies([centre]):  # After the read that goes back (EASGD's d).
            return centre_address.assign(value, self._use_locking)

    def _move_worker(self, worker, local_centre, value, centre):
        return [local_centre.assign(centre, self._use_locking)]


class CopyOnlyElasticAverageOptimizer(ElasticAverageOptimizer):
    def _make_exchange(self, centered, global_step):
        return CopyOnlyExchange(
            centered,
            self._getter.worker_device,
            self._moving_rate,
            global_step,
            self._use_locking,
            self._transport,
        )


def check_copy_only(cluster_spec, task_index, share_devices):
    """Raises RuntimeError unless the copy-only exchange, on this running cluster, moves
    values and does no arithmetic, by the transport measured.

    One step of x = [1] * 4 (loss sum(x), lr 0.5, period 1, alpha 0.5) takes x to 0.5; the
    exchange then stores 0.5 as the centre, the old centre 1 as the local centre, and
    leaves x (EASGD's would move both by d = 0.5 * (0.5 - 1)); global_step counts it.
    """
    target = f"grpc://{cluster_spec.task_address('worker', task_index)}"
    device = f"/job:worker/task:{task_index}"
    config = tf.compat.v1.ConfigProto(
        device_filters=["/job:ps", device],
        operation_timeout_in_ms=OPERATION_TIMEOUT_MS,
        share_cluster_devices_in_session=share_devices,
    )
    container = f"copyonlycheck{uuid.uuid4().hex}"
    with tf.Graph().as_default() as graph, tf.compat.v1.container(container):
        getter = ElasticAverageCustomGetter(device)
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device=device, cluster=cluster_spec
        )
        with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
            x = tf.compat.v1.get_variable("x", (4,), initializer=tf.compat.v1.ones_initializer())
            global_step = tf.compat.v1.train.get_or_create_global_step()
            opt = CopyOnlyElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.5),
                1,
                getter,
                communication_period=1,
                moving_rate=0.5,
                rho=0.0,
            )
            train_op = opt.minimize(tf.reduce_sum(x.read_value()), global_step=global_step)
        (entry,) = getter.centered_variables()
        reads = [v.read_value() for v in (x, entry.local_center, entry.global_center, global_step)]
        init = [
            tf.compat.v1.global_variables_initializer(),
            tf.compat.v1.local_variables_initializer(),
            opt.get_init_op(0),
        ]
    try:
        with tf.compat.v1.Session(target, graph=graph, config=config) as session:
            for op in init:
                session.run(op)
            transport = opt.choose_exchange_transport(session)
            session.run(train_op)
            found = [transport, *(np.asarray(v).tolist() for v in session.run(reads))]
    finally:
        tf.compat.v1.Session.reset(target, [container], config=config)
    expected = ["direct" if share_devices else "remote_call", [0.5] * 4, [1.0] * 4, [0.5] * 4, 1]
    if found != expected:
        raise RuntimeError(f"The copy-only exchange is broken: {found}, expected {expected}.")
    with tf.Graph().as_default():  # It must refuse a centre it could reach without a call.
        getter = ElasticAverageCustomGetter("")
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            x = tf.compat.v1.get_variable("x", (2,))
        opt = CopyOnlyElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5), 1, getter, rho=0.0
        )
        try:
            opt.minimize(tf.reduce_sum(x))
        except ValueError as error:
            if "every centre on a ps task" in str(error):
                return
            raise
    raise RuntimeError("The copy-only exchange took a centre on the worker without a call.")
