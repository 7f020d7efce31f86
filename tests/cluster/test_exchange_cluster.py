"""In-process cluster tests: the exchange design
(tf_contrib_easgd/exchange/elastic_exchange.py).

The tests of its other tiers are in tests/unit/test_exchange.py.
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope
from exchange_graphs import WORKER
from exchange_graphs import build_worker as _build

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer


def _traced_step(session, train_op):
    metadata = tf.compat.v1.RunMetadata()
    options = tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE, output_partition_graphs=True
    )
    session.run(train_op, options=options, run_metadata=metadata)
    nodes = {
        (stats.device, node.node_name)
        for stats in metadata.step_stats.dev_stats
        for node in stats.node_stats
    }
    return metadata, nodes


@pytest.mark.parametrize("transport", ["remote_call", "direct"])
def test_non_exchange_steps_touch_no_remote_device(world, cluster, container, transport):
    # Period 3: steps 1 and 2 do not exchange, step 3 does. What the session ran is read
    # from RunMetadata: partition graphs (one per task that takes part) and step stats.
    # Either transport: the session config decides which one the probe keeps.
    with tf.Graph().as_default() as graph:
        getter, variables, global_step, opt, train_op = _build(
            cluster.spec, container, period=3, shapes=((1000,), (30, 30))
        )
        entries = getter.centered_variables()
        centre = entries[0].global_center.read_value()
        init = [tf.compat.v1.global_variables_initializer()]
        local_init = tf.compat.v1.local_variables_initializer()
        opt.get_init_op(0)  # Builds the transport probe too.
    with cluster.session(0, graph, share_devices=transport == "direct") as session:
        session.run(init)
        session.run(local_init)
        assert opt.choose_exchange_transport(session) == transport
        for step in (1, 2):
            metadata, nodes = _traced_step(session, train_op)
            assert len(metadata.partition_graphs) == 1, f"step {step}: more than one task ran"
            devices = {device for device, _ in nodes}
            assert all("/job:worker/replica:0/task:0/" in d for d in devices), devices
            transfers = [n for _, n in nodes if "_Send" in n or "_Recv" in n]
            assert transfers == [], f"step {step} moved tensors: {transfers}"
            calls = [n for _, n in nodes if "exchange_with_ps" in n]
            assert calls == [], f"step {step} called the ps: {calls}"
        # Step 3 exchanges: the worker calls each ps task once, and the centre moves.
        before = session.run(centre)
        metadata, nodes = _traced_step(session, train_op)
        assert len(metadata.partition_graphs) == 1
        suffix = "_direct" if transport == "direct" else ""
        names = [f"exchange_with_ps_0{suffix}", f"exchange_with_ps_1{suffix}"]
        calls = sorted(n.rsplit("/", 1)[-1] for _, n in nodes if n.endswith(tuple(names)))
        assert calls == names
        after = session.run(centre)
        # x: 1 -> -0.5 after three steps of lr 0.5 on sum(x); d = 0.5 * (-0.5 - 1) = -0.75.
        np.testing.assert_array_equal(before, np.ones(1000))
        np.testing.assert_array_equal(after, np.full(1000, 0.25))
        assert session.run(global_step.read_value()) == 1
        np.testing.assert_array_equal(session.run(variables[0].read_value()), np.full(1000, 0.25))


@pytest.mark.parametrize("share_devices", [True, False], ids=["direct", "remote_call"])
def test_an_exchange_moves_both_sides_by_the_same_d_to_the_bit(
    world, cluster, container, share_devices
):
    # Each side computes d in one kernel of its own (centre -= alpha * (centre - x) on the
    # ps, x -= alpha * (x - centre) on the worker); both must equal, to the bit, the
    # float32 arithmetic of d = alpha * (x - centre), centre + d, x - d, here worked by
    # NumPy on random values, with alpha = 0.3 (not a power of two: every product rounds).
    rng = np.random.default_rng(7)
    start = rng.normal(size=1000).astype(np.float32)
    gradient = rng.normal(size=1000).astype(np.float32)
    getter = ElasticAverageCustomGetter(WORKER)
    with tf.Graph().as_default() as graph:
        with worker_scope(cluster.spec, 0, getter, container):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(start))
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter,
                communication_period=1, moving_rate=0.3, rho=0.0,
            )  # fmt: skip
            train_op = opt.minimize(tf.reduce_sum(tf.constant(gradient) * w))
        entry = getter.find(w)
        with cluster.session(0, graph, share_devices) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(opt.get_init_op(0))
            assert opt.choose_exchange_transport(session) == (
                "direct" if share_devices else "remote_call"
            )
            session.run(train_op)
            worker, local, centre = session.run([w, entry.local_center, entry.global_center])
    x = start - gradient  # The local step, lr 1.
    d = np.float32(0.3) * (x - start)
    np.testing.assert_array_equal(centre, start + d)
    np.testing.assert_array_equal(worker, x - d)
    np.testing.assert_array_equal(local, start)
