"""An exchange that moves the same bytes as EASGD's and does no arithmetic: its floor.

Kept only as a benchmark configuration ("copy-easgd-P"). On an exchange step each worker
sends its values to the ps and receives the centres, exactly as `easgd-P` does (same calls,
same transport, same bytes), but the ps only stores what it received and the worker only
stores the centres as its local centres: no difference, no product, no update of the
worker's copies. Training is meaningless; the throughput is the most that any exchange
carrying EASGD's traffic through TensorFlow's runtime can give on this machine, so it
tells how much of the gap between `easgd-P` and the local-only ceiling the exchange's
arithmetic costs and how much the transfers cost.

`check_exchange` checks that claim on the benchmark's own cluster; graphs.py runs it
before it builds a copy-easgd graph, so no copy-easgd figure is measured unchecked.
"""

import uuid

import numpy as np
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange

#: A blocked step of the check fails after this long instead of hanging the benchmark.
CHECK_TIMEOUT_MS = 60_000


class CopyOnlyExchange(ElasticExchange):
    """`ElasticExchange` whose two halves only store the values they receive."""

    def __init__(self, centered, worker_device, *args, **kwargs):
        super().__init__(centered, worker_device, *args, **kwargs)
        if self.local_centres:
            names = [centre.name for centre in self.local_centres]
            raise ValueError(f"CopyOnlyExchange needs every centre on a ps task, got {names}.")

    def _move_centre(self, centre_address, value, centre):
        """The centre takes the worker's value (one copy, like EASGD's one update), after the
        read that goes back to the worker (EASGD's update waits for it through d)."""
        with tf.control_dependencies([centre]):
            return centre_address.assign(value, self._use_locking)

    def _move_worker(self, worker, local_centre, value, centre):
        """The local centre takes the centre received; the worker's copy stays."""
        return [local_centre.assign(centre, self._use_locking)]


class CopyOnlyElasticAverageOptimizer(ElasticAverageOptimizer):
    """`ElasticAverageOptimizer` with `CopyOnlyExchange`."""

    def _make_exchange(self, centered, global_step):
        return CopyOnlyExchange(
            centered,
            self._getter.worker_device,
            self._moving_rate,
            global_step,
            self._use_locking,
            self._transport,
        )


def check_exchange(cluster_spec, task_index, share_devices):
    """Checks the copy-only exchange on a running cluster: it moves values, does no arithmetic.

    Worker `task_index` of `cluster_spec` (its server running in this process) trains a
    one-variable model for one step at period 1, in a container of its own that it resets
    afterwards, and checks what the exchange left. Then it checks that the exchange refuses
    a centre it could reach without a call (it would not move EASGD's bytes).

    Args:
        cluster_spec: the benchmark's `tf.train.ClusterSpec`, with a "ps" job.
        task_index: this process's worker index.
        share_devices: whether the session shares the cluster's devices, as the measured
            configuration's does: the exchange then calls the ps directly, else by
            `RemoteCall`.

    Raises:
        RuntimeError: if the exchange did anything else.
    """
    target = f"grpc://{cluster_spec.task_address('worker', task_index)}"
    worker_device = f"/job:worker/task:{task_index}"
    config = tf.compat.v1.ConfigProto(
        device_filters=["/job:ps", worker_device],
        operation_timeout_in_ms=CHECK_TIMEOUT_MS,
        share_cluster_devices_in_session=share_devices,
    )
    container = f"copyonlycheck{uuid.uuid4().hex}"
    try:
        found = _one_step(cluster_spec, worker_device, container, target, config)
    finally:
        tf.compat.v1.Session.reset(target, [container], config=config)
    # The local step takes x from 1 to 1 - 0.5 * 1 = 0.5. The copy-only exchange then stores
    # it as the centre, the old centre (1) as the local centre, and leaves x at 0.5; EASGD's
    # would have moved both by d = 0.5 * (0.5 - 1) = -0.25. The global step still counts it.
    expected = {
        "transport": "direct" if share_devices else "remote_call",
        "worker": [0.5] * 4,
        "local_centre": [1.0] * 4,
        "centre": [0.5] * 4,
        "global_step": 1,
    }
    if not _same(found, expected):
        raise RuntimeError(f"The copy-only exchange is broken: {found}, expected {expected}.")
    _check_refuses_local_centres()


def _one_step(cluster_spec, worker_device, container, target, config):
    """Trains x = [1, 1, 1, 1] for one step (loss sum(x), lr 0.5, period 1, alpha 0.5) with
    the copy-only exchange; returns the transport chosen and the values after the step."""
    with tf.Graph().as_default() as graph, tf.compat.v1.container(container):
        getter = ElasticAverageCustomGetter(worker_device)
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device=worker_device, cluster=cluster_spec
        )
        with (
            tf.compat.v1.device(setter),
            tf.compat.v1.variable_scope("", custom_getter=getter),
        ):
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
        variables = (x, entry.local_center, entry.global_center, global_step)
        reads = [variable.read_value() for variable in variables]
        init = tf.compat.v1.global_variables_initializer()
        local_init = tf.compat.v1.local_variables_initializer()
        init_op = opt.get_init_op(0)
    with tf.compat.v1.Session(target, graph=graph, config=config) as session:
        session.run(init)
        session.run(local_init)
        session.run(init_op)
        transport = opt.choose_exchange_transport(session)
        session.run(train_op)
        worker, local_centre, centre, step = session.run(reads)
    return {
        "transport": transport,
        "worker": worker.tolist(),
        "local_centre": local_centre.tolist(),
        "centre": centre.tolist(),
        "global_step": int(step),
    }


def _same(found, expected):
    return found.keys() == expected.keys() and all(
        np.array_equal(found[key], expected[key]) for key in expected
    )


def _check_refuses_local_centres():
    """Raises RuntimeError unless the copy-only exchange refuses a centre on the worker."""
    with tf.Graph().as_default():
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
