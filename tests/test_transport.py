"""The choice of exchange transport (tf_contrib_easgd/transport.py).

Which transport the usual sessions get, and what each runs, is also tested where the
exchange runs: tests/test_exchange.py (RunMetadata of both) and tests/test_distributed.py
(the hook in MonitoredTrainingSession).
"""

import numpy as np
import pytest
import tensorflow as tf
from conftest import worker_scope

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange import _VariableAddress
from tf_contrib_easgd.transport import ExchangeTransport

LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES
CLUSTER = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222"]})
# A centre the probe would ask about on the ps task.
CENTRE = _VariableAddress("resource", "", "centre", tf.float32, tf.TensorShape([2]))


def _build(getter, period=10):
    with tf.compat.v1.variable_scope("", custom_getter=getter):
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        global_step = tf.compat.v1.train.get_or_create_global_step()
    opt = ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.5),
        1,
        getter,
        communication_period=period,
        rho=0.0,
    )
    return w, opt, opt.minimize(tf.reduce_sum(w), global_step=global_step)


def test_no_remote_centre_means_nothing_to_choose(world):
    # Every centre on the worker's own (unspecified) device: the exchange calls no task, so
    # there is no probe and nothing to choose.
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("")
        w, opt, train_op = _build(getter)
        init = opt.get_init_op(0)
        calls = [op for op in graph.get_operations() if op.type == "StatefulPartitionedCall"]
        # Only the exchange's own call (exchange.py), no probe.
        assert [op.name.rsplit("/", 1)[-1] for op in calls] == ["exchange_locally"]
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(init)
            assert opt.choose_exchange_transport(session) == "none"
            for _ in range(10):  # Period 10: the tenth step exchanges, by the plain path.
                session.run(train_op)
            # w: [1, 2] - 10 * 0.5 = [-4, -3]; centre [1, 2]; alpha = 0.9 / 10 = 0.09;
            # d = 0.09 * ([-4, -3] - [1, 2]) = [-0.45, -0.45]; w -= d.
            np.testing.assert_allclose(session.run(w.read_value()), [-3.55, -2.55], rtol=1e-6)


def test_the_choice_is_no_variable(world):
    # With the centre on a ps, the graph has both calls, the marker and the probe; the
    # marker is a resource, not a tf.Variable: the variable collections, and so every
    # Saver's default list, hold exactly contrib's names (tests/test_checkpoint_compat.py).
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("/job:worker/task:0")
        with worker_scope(CLUSTER, 0, getter, ""):
            _, opt, _ = _build(getter)
        opt.get_init_op(0)
        types = {op.type for op in graph.get_operations()}
        assert {"StatefulPartitionedCall", "VarIsInitializedOp"} <= types
        library = [f.signature.name for f in graph.as_graph_def().library.function]
        for name in ("easgd_exchange_with_task_0_", "easgd_exchange_with_task_0_direct_"):
            assert [f for f in library if name in f], library
        local = sorted(v.op.name for v in tf.compat.v1.get_collection(LOCAL))
        assert local == ["local_center_variable/w", "local_step", "w"]
        global_ = sorted(v.op.name for v in tf.compat.v1.get_collection(GLOBAL))
        assert global_ == ["global_center_variable/w", "global_step"]


def test_a_failed_probe_clears_the_marker(world):
    # Without a cluster the probe cannot reach its ps task: whatever the marker said before
    # (here: set by hand), the choice falls back to RemoteCall and the marker is gone.
    with tf.Graph().as_default():
        transport = ExchangeTransport("")
        transport.add_targets({"/job:ps/replica:0/task:0": CENTRE})
        is_direct = transport.is_direct()
        set_marker = tf.raw_ops.AssignVariableOp(
            resource=transport._marker(),  # noqa: SLF001 (what a successful probe does)
            value=True,
        )
        with tf.compat.v1.Session() as session:
            assert not session.run(is_direct)
            session.run(set_marker)
            assert session.run(is_direct)
            assert transport.choose(session) == "remote_call"
            assert not session.run(is_direct)


def test_an_exchange_built_after_the_probe_is_refused(world):
    with tf.Graph().as_default():
        transport = ExchangeTransport("/job:worker/task:0")
        transport.add_targets({"/job:ps/replica:0/task:0": CENTRE})
        transport.add_targets({"/job:ps/replica:0/task:0": CENTRE})  # Repeats are fine.
        transport.build()
        with pytest.raises(RuntimeError, match="after the transport probe"):
            transport.add_targets({"/job:ps/replica:0/task:1": CENTRE})


def test_choose_refuses_a_monitored_session(world):
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("")
        _, opt, _ = _build(getter)
        with (
            tf.compat.v1.train.MonitoredSession() as session,
            pytest.raises(
                TypeError,
                match=r"session must be a tf.compat.v1.Session.*"
                r"MonitoredSession",
            ),
        ):
            opt.choose_exchange_transport(session)


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("soft_placement", "share_devices", "expected"),
    [(True, False, "remote_call"), (True, True, "direct"), (False, False, "remote_call")],
)
def test_the_probe_asks_the_ps_itself(
    world, cluster, container, soft_placement, share_devices, expected
):
    # With soft placement a session may run a function's ps ops on the worker when it does
    # not know the ps devices; the probe then finds no centre there and keeps RemoteCall.
    # Either way the exchange then works: tau = 2, alpha = 0.25 (0.9 / 2 / 2 workers is
    # the default; here 0.25 is set), lr 0.5 on sum(w): w = [1, 2] - 2 * 0.5 = [0, 1];
    # d = 0.25 * ([0, 1] - [1, 2]) = -0.25; w = [0.25, 1.25], centre = [0.75, 1.75].
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("/job:worker/task:0")
        with worker_scope(cluster.spec, 0, getter, container):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
            global_step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.5),
                2,
                getter,
                communication_period=2,
                moving_rate=0.25,
                rho=0.0,
            )
            train_op = opt.minimize(tf.reduce_sum(w), global_step=global_step)
        centre = getter.find(w).global_center.read_value()
        init = opt.get_init_op(0)
        global_init = tf.compat.v1.global_variables_initializer()
        local_init = tf.compat.v1.local_variables_initializer()
    config = cluster.session_config(0, share_devices)
    config.allow_soft_placement = soft_placement
    with tf.compat.v1.Session(cluster.target(0), graph=graph, config=config) as session:
        session.run([global_init, local_init])
        session.run(init)
        assert opt.choose_exchange_transport(session) == expected
        session.run(train_op)
        session.run(train_op)
        np.testing.assert_allclose(session.run(w.read_value()), [0.25, 1.25])
        np.testing.assert_allclose(session.run(centre), [0.75, 1.75])
        assert session.run(global_step.read_value()) == 1
