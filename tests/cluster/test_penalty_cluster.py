"""In-process cluster tests: the elastic penalty's two forms and the default-rho warning.

The tests of its other tiers are in tests/unit/test_penalty.py.
"""

import penalties
import pytest
import tensorflow as tf
from clusters import worker_scope
from penalties import momentum as _momentum

from tf_contrib_easgd import (
    ElasticAverageCustomGetter,
    ElasticAverageOptimizer,
)

# The autouse fixture of penalties (shared with tests/unit/test_penalty.py): each test sees the
# default-rho warning as a fresh process would.
fresh_warning_registry = penalties.fresh_warning_registry


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_move_on_a_cluster_worker(world, cluster, container, partitioned):
    # Worker 0 of the in-process cluster (its copies on the worker, the centres on the two
    # ps tasks, one partition on each when partitioned), alone: num_worker 1. Every element
    # of w = [8, 8] follows the momentum move trajectory at period 2 worked out above.
    expected = [
        (4.0, 8.0, 8.0),
        (2.75, 8.0, 6.25),
        (0.6875, 8.0, 6.25),
        (1.92578125, 6.25, 4.80859375),
    ]
    getter = ElasticAverageCustomGetter("/job:worker/task:0")
    with tf.Graph().as_default() as graph, worker_scope(cluster.spec, 0, getter, container):
        w = tf.compat.v1.get_variable(
            "w",
            [2],
            initializer=tf.compat.v1.constant_initializer(8.0),
            partitioner=tf.compat.v1.fixed_size_partitioner(2) if partitioned else None,
        )
        value = w.as_tensor() if partitioned else w.read_value()
        opt = ElasticAverageOptimizer(
            _momentum(), 1, getter, communication_period=2, moving_rate=0.25, penalty="move"
        )
        train_op = opt.minimize(0.5 * tf.reduce_sum(tf.square(value)))
        entries = getter.centered_variables()
        fetch = [
            tf.concat([getattr(e, field).read_value() for e in entries], 0)
            for field in ("worker", "local_center", "global_center")
        ]
        init = [
            tf.compat.v1.global_variables_initializer(),
            tf.compat.v1.local_variables_initializer(),
            opt.get_init_op(0),
        ]
        # A resource variable's read has no device of its own: it runs with the variable.
        moves = [
            op
            for op in graph.get_operations()
            if op.name.startswith("elastic_move") and op.type != "ReadVariableOp"
        ]
    assert len(entries) == (2 if partitioned else 1)
    assert moves
    assert {op.device for op in moves} == {"/job:worker/task:0"}
    with cluster.session(0, graph) as session:
        for op in init:
            session.run(op)
        for row in expected:
            session.run(train_op)
            assert [v.tolist() for v in session.run(fetch)] == [[x, x] for x in row]
