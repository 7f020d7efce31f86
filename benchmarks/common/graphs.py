"""One worker's training graph for each benchmark configuration.

- `local`: no ps; the worker trains its own variables (the ceiling).
- `async`: variables on the ps, plain SGD; `sync`: with `SyncReplicasOptimizer`.
- `easgd-P[-alphaA][-rhoR][-remotecall|-overlap][-bf16]`: `ElasticAverageOptimizer`
  with period P, moving rate A and rho R (numbers, or `default`: the library's; rho 0
  without), exchanges by `RemoteCall` or overlapped, over a bfloat16 wire.
- `naive-easgd-P`: the first exchange design, a per-step `tf.cond` with ops on the ps.
- `copy-easgd-P`: an exchange with EASGD's calls and bytes and no arithmetic: its floor.
"""

import re
import uuid

import numpy as np
import tensorflow as tf

from benchmarks.common import models, protocol
from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange

_EASGD = re.compile(
    r"^(naive-|copy-)?easgd-(\d+)(?:-alpha(default|[0-9.]+))?(?:-rho(default|[0-9.]+))?"
    r"(-remotecall|-overlap)?(-bf16)?$"
)
v1 = tf.compat.v1
Built = models.Built


def _number(text, absent):
    """The number in `text`; None for "default" (the library's); `absent` without one."""
    return absent if text is None else None if text == "default" else float(text)


def plain(config, spec):
    """`config` for `spec` on its synthetic batch, for a session without a cluster."""
    images, labels = protocol.synthetic_batch(spec)
    return build(config, spec, None, 0, 1, 0.01, lambda: (tf.constant(images), tf.constant(labels)))


def build(config, spec, cluster_spec, task_index, num_workers, learning_rate, inputs_fn,
          container="", standalone_exchange=False):  # fmt: skip
    """Builds worker `task_index`'s graph of `config` for `spec` (`protocol.ModelSpec`);
    `inputs_fn()` gives a step's (images, labels) on the worker device. Returns a `Built`."""
    match = _EASGD.match(config)
    if config not in ("local", "async", "sync") and not match:
        raise ValueError(f"Unknown configuration {config!r}; see benchmarks/common/graphs.py.")
    if config.startswith("copy-") and cluster_spec is not None:
        check_copy_only(cluster_spec, task_index, not config.endswith("-remotecall"))
    worker = f"/job:worker/task:{task_index}" if cluster_spec else ""
    graph = tf.Graph()
    with graph.as_default(), v1.container(container):
        with v1.device(worker):
            batch = inputs_fn()
        sgd = v1.train.GradientDescentOptimizer(learning_rate)
        if config == "local":
            with v1.device(worker):
                params = models.make_params(spec)
                loss = models.loss(spec, params, *batch)
                train_op = sgd.minimize(loss)
            init = [v1.global_variables_initializer(), v1.local_variables_initializer()]
            return Built(graph, train_op, init, init, params, loss)
        setter = models.replica_setter(worker, cluster_spec)
        getter = None if config in ("async", "sync") else ElasticAverageCustomGetter(worker)
        with v1.device(setter), v1.variable_scope("", custom_getter=getter):
            params = models.make_params(spec)
            global_step = v1.train.get_or_create_global_step()
            loss = models.loss(spec, params, *batch)
            if getter is None:
                return _replicated(graph, config, params, loss, sgd, global_step, num_workers)
            opt = _elastic_optimizer(match.groups(), sgd, num_workers, getter)
            train_op = opt.minimize(loss, global_step=global_step)
            exchange_op = None
            if standalone_exchange:  # Before the init op: a 16-bit wire refuses it after.
                centered = [getter.find(v) for v in params.values()]
                with v1.device(worker):
                    exchange_op = opt._make_exchange(centered, global_step)()
            worker_init = [v1.local_variables_initializer(), opt.get_init_op(task_index)]
            chief_init = [v1.global_variables_initializer(), *worker_init]
        centres = {name: getter.find(v).global_center for name, v in params.items()}
        share_devices = not config.endswith("-remotecall")
        return Built(graph, train_op, chief_init, worker_init, centres, loss, None, opt,
                     share_devices, exchange_op)  # fmt: skip


def _replicated(graph, config, params, loss, sgd, global_step, num_workers):
    """`async` or `sync`: the variables on the ps, the step's gradient sent there."""
    sync = None
    if config == "sync":
        sync = v1.train.SyncReplicasOptimizer(sgd, num_workers, total_num_replicas=num_workers)
    train_op = (sync or sgd).minimize(loss, global_step=global_step)
    local_init = v1.local_variables_initializer()
    chief_init, worker_init = [v1.global_variables_initializer(), local_init], [local_init]
    if sync is not None:
        chief_init += [sync.chief_init_op, sync.get_init_tokens_op()]
        worker_init += [sync.local_step_init_op]
    return Built(graph, train_op, chief_init, worker_init, params, loss, sync)


def _elastic_optimizer(groups, sgd, num_workers, getter):
    """The EASGD optimizer of a configuration's `_EASGD` groups."""
    variant, period, moving_rate, rho, suffix, wire = groups
    optimizer_class = {None: ElasticAverageOptimizer, "naive-": NaiveElasticAverageOptimizer,
                       "copy-": CopyOnlyElasticAverageOptimizer}[variant]  # fmt: skip
    return optimizer_class(
        sgd, num_workers, getter, communication_period=int(period),
        moving_rate=_number(moving_rate, None), rho=_number(rho, 0.0),
        overlap=suffix == "-overlap", wire_dtype="bfloat16" if wire else None,
    )  # fmt: skip


def with_empty_cond(built, never):
    """`built`'s step followed by the cheapest periodic check a graph can make: a step
    counter and a `tf.cond` whose branches do nothing (section 4's reference)."""
    with built.graph.as_default():
        local = {"trainable": False, "collections": [v1.GraphKeys.LOCAL_VARIABLES]}
        counter = v1.get_variable("period_counter", [], tf.int64, v1.zeros_initializer(), **local)
        with tf.control_dependencies([built.train_op]):
            count = v1.assign_add(counter, 1)
        due = tf.equal(tf.math.floormod(count, never), 0)
        built.train_op = tf.group(
            v1.cond(due, lambda: tf.constant(True), lambda: tf.constant(False))
        )
        built.chief_init = [*built.chief_init, counter.initializer]
    return built


class NaiveElasticAverageOptimizer(ElasticAverageOptimizer):
    """The exchange as first written: a per-step `tf.cond` whose true branch has ops on the
    ps, so every step's graph has a ps partition (what the library's design saves)."""

    def _exchange_if_due(self, local_update, centered, global_step):
        worker, lock = self._getter.worker_device, self._use_locking
        with v1.device(worker), tf.control_dependencies([local_update]):
            step = v1.assign_add(self._local_step, 1, use_locking=lock)
            is_exchange_step = tf.equal(tf.math.floormod(step, self._period), 0)

        def exchange():
            updates = []
            for entry in centered:
                with v1.device(worker):
                    center = tf.identity(entry.global_center.read_value())
                    refresh = v1.assign(entry.local_center, center, use_locking=lock)
                    with tf.control_dependencies([refresh]):
                        delta = tf.cast(self._moving_rate, center.dtype) * (
                            entry.worker.read_value() - center
                        )
                    updates.append(v1.assign_sub(entry.worker, delta, use_locking=lock).op)
                updates.append(v1.assign_add(entry.global_center, delta, use_locking=lock).op)
            if global_step is not None:
                with tf.control_dependencies(updates):
                    updates.append(v1.assign_add(global_step, 1, use_locking=lock).op)
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
    _exchange_class = CopyOnlyExchange


def check_copy_only(cluster_spec, task_index, share_devices):
    """Raises RuntimeError unless the copy-only exchange, on this running cluster, moves
    values and does no arithmetic, by the transport measured (`CopyOnlyExchange` itself
    refuses a centre it could reach without a call). One step of x = [1] * 4 (loss sum(x),
    lr 0.5, period 1, alpha 0.5) takes x to 0.5; the exchange then stores 0.5 as the
    centre, the old centre 1 as the local centre, and leaves x (EASGD's would move both);
    global_step counts it."""
    target = f"grpc://{cluster_spec.task_address('worker', task_index)}"
    device, container = f"/job:worker/task:{task_index}", f"copyonlycheck{uuid.uuid4().hex}"
    config = v1.ConfigProto(
        device_filters=["/job:ps", device],
        operation_timeout_in_ms=models.OPERATION_TIMEOUT_MS,
        share_cluster_devices_in_session=share_devices,
    )
    with tf.Graph().as_default() as graph, v1.container(container):
        getter = ElasticAverageCustomGetter(device)
        setter = v1.train.replica_device_setter(worker_device=device, cluster=cluster_spec)
        with v1.device(setter), v1.variable_scope("", custom_getter=getter):
            x = v1.get_variable("x", (4,), initializer=v1.ones_initializer())
            global_step = v1.train.get_or_create_global_step()
            sgd = v1.train.GradientDescentOptimizer(0.5)
            opt = CopyOnlyElasticAverageOptimizer(sgd, 1, getter, 1, moving_rate=0.5, rho=0.0)
            train_op = opt.minimize(tf.reduce_sum(x.read_value()), global_step=global_step)
        (entry,) = getter.centered_variables()
        reads = [v.read_value() for v in (x, entry.local_center, entry.global_center, global_step)]
        init = [
            v1.global_variables_initializer(),
            v1.local_variables_initializer(),
            opt.get_init_op(0),
        ]
    try:
        with v1.Session(target, graph=graph, config=config) as session:
            for op in init:
                session.run(op)
            transport = opt.choose_exchange_transport(session)
            session.run(train_op)
            found = [transport, *(np.asarray(v).tolist() for v in session.run(reads))]
    finally:
        v1.Session.reset(target, [container], config=config)
    expected = ["direct" if share_devices else "remote_call", [0.5] * 4, [1.0] * 4, [0.5] * 4, 1]
    if found != expected:
        raise RuntimeError(f"The copy-only exchange is broken: {found}, expected {expected}.")
