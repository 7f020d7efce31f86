"""The choice of exchange transport (tf_contrib_easgd/transport.py) without a cluster.

Which transport a cluster session gets is tested where the exchange runs: in
tests/test_exchange.py (RunMetadata of both) and tests/test_distributed.py (the hook).
"""

import numpy as np
import pytest
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.transport import ExchangeTransport

LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES


def _build(getter):
    with tf.compat.v1.variable_scope("", custom_getter=getter):
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
    opt = ElasticAverageOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.5), 1, getter, rho=0.0
    )
    return w, opt, opt.minimize(tf.reduce_sum(w))


def test_no_remote_centre_means_nothing_to_choose(world):
    # Every centre on the worker's own (unspecified) device: the exchange calls no task, so
    # there is no probe and nothing to choose.
    with tf.Graph().as_default() as graph:
        getter = ElasticAverageCustomGetter("")
        w, opt, train_op = _build(getter)
        init = opt.get_init_op(0)
        assert not [op for op in graph.get_operations() if op.type == "StatefulPartitionedCall"]
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
    # The choice is a marker resource, not a tf.Variable: the variable collections, and so
    # every Saver's default list, are exactly contrib's (tests/test_checkpoint_compat.py).
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("")
        _build(getter)
        names = sorted(v.op.name for v in tf.compat.v1.get_collection(LOCAL))
        assert names == ["local_center_variable/w", "local_step", "w"]


def test_the_marker_decides_which_call_runs(world):
    # Without a cluster: the marker's existence is the predicate the exchange switches on.
    with tf.Graph().as_default():
        transport = ExchangeTransport("")
        transport.add_targets(["/job:ps/replica:0/task:0"])
        is_direct = transport.is_direct()
        with tf.compat.v1.Session() as session:
            assert not session.run(is_direct)
            # The probe needs a ps task; here it fails, which keeps RemoteCall.
            assert transport.choose(session) == "remote_call"
            assert not session.run(is_direct)


def test_an_exchange_built_after_the_probe_is_refused(world):
    with tf.Graph().as_default():
        transport = ExchangeTransport("/job:worker/task:0")
        transport.add_targets(["/job:ps/replica:0/task:0"])
        transport.add_targets(["/job:ps/replica:0/task:0"])  # Repeats are fine.
        transport.build()
        with pytest.raises(RuntimeError, match="after the transport probe"):
            transport.add_targets(["/job:ps/replica:0/task:1"])
