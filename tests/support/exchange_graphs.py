"""A worker's graph of the exchange tests, and what they wait for and read in it.

`build_worker` is worker 0's model of tests/unit/test_exchange.py and
tests/cluster/test_exchange_cluster.py; `wait_for_exchanges` waits on the overlapped
exchange's runner (tests/unit/test_overlap.py, tests/cluster/test_overlap_cluster.py);
`wire_references` are the 16-bit wire's references (tests/unit/test_wire_unit.py,
tests/cluster/test_wire.py).
"""

import time

import tensorflow as tf
from clusters import worker_scope

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.wire import REFERENCE_SCOPE

WORKER = "/job:worker/task:0"  # The worker of `build_worker`.


def build_worker(cluster_spec, container="", period=10, shapes=((3,), (2, 2))):
    """Builds worker 0's model (a variable per shape, loss = sum) and returns its parts.

    Args:
        cluster_spec: The cluster whose ps tasks hold the centres.
        container: The container of the variables.
        period: The communication period.
        shapes: A variable of ones of each shape.

    Returns:
        `(getter, variables, global_step, opt, train_op)`; lr 0.5, moving rate 0.5, rho 0.
    """
    getter = ElasticAverageCustomGetter(WORKER)
    with worker_scope(cluster_spec, 0, getter, container):
        variables = [
            tf.compat.v1.get_variable(f"v{i}", shape, initializer=tf.compat.v1.ones_initializer())
            for i, shape in enumerate(shapes)
        ]
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5),
            1,
            getter,
            communication_period=period,
            moving_rate=0.5,
            rho=0.0,
        )
        loss = tf.add_n([tf.reduce_sum(v.read_value()) for v in variables])
        train_op = opt.minimize(loss, global_step=global_step)
    return getter, variables, global_step, opt, train_op


def wait_for_exchanges(session, global_step, count, timeout_secs=30):
    """Waits until the runner has moved the centre `count` times in all.

    The overlapped exchange's runner counts its exchanges in `global_step`; the wait fails
    the test after `timeout_secs`.
    """
    deadline = time.monotonic() + timeout_secs
    while session.run(global_step) < count:
        assert time.monotonic() < deadline, f"exchange {count} did not happen in time"
        time.sleep(0.005)


def wire_references():
    """The 16-bit wire's reference variables of the current graph (local variables)."""
    return [
        v
        for v in tf.compat.v1.get_collection(tf.compat.v1.GraphKeys.LOCAL_VARIABLES)
        if v.op.name.startswith(REFERENCE_SCOPE)
    ]
