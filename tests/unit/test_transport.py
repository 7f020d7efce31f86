"""The choice of exchange transport (tf_contrib_easgd/exchange/transport.py).

Which transport the usual sessions get, and what each runs, is also tested where the
exchange runs: tests/cluster/test_exchange_cluster.py (RunMetadata of both) and
tests/cluster/test_distributed.py (the hook in MonitoredTrainingSession).
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.transport import ExchangeTransport, shares_cluster_devices
from tf_contrib_easgd.exchange.variable_address import VariableAddress

LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES


GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES


CLUSTER = tf.train.ClusterSpec({"ps": ["ps0:2222"], "worker": ["w0:2222"]})


# A centre the probe would ask about on the ps task.
CENTRE = VariableAddress("resource", "", "centre", tf.float32, tf.TensorShape([2]))


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
    # Saver's default list, hold exactly contrib's names (tests/e2e/test_checkpoint_compat.py).
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


class _RecordingSession(tf.compat.v1.Session):
    """A session that records the names of the ops and tensors it was asked to run."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ran = []

    def run(self, fetches, *args, **kwargs):
        self.ran += [fetch.name for fetch in tf.nest.flatten(fetches)]
        return super().run(fetches, *args, **kwargs)


def _transport_with_marker_set():
    """Builds (in the default graph) a transport with a ps target, and the op that sets its
    marker by hand, as a successful probe would; returns (transport, is_direct, set_marker)."""
    transport = ExchangeTransport("")
    transport.add_targets({"/job:ps/replica:0/task:0": CENTRE})
    is_direct = transport.is_direct()
    set_marker = tf.raw_ops.AssignVariableOp(
        resource=transport._marker(),  # noqa: SLF001 (what a successful probe does)
        value=True,
    )
    return transport, is_direct, set_marker


def test_a_session_not_sharing_devices_gets_remote_call_without_a_probe(world):
    # A session without share_cluster_devices_in_session: whatever the marker said before
    # (here: set by hand), the choice is RemoteCall, the marker is gone, and the probe,
    # which could not be placed on the ps, never ran.
    with tf.Graph().as_default():
        transport, is_direct, set_marker = _transport_with_marker_set()
        transport.build()
        with _RecordingSession() as session:
            session.run(set_marker)
            assert session.run(is_direct)
            session.ran.clear()
            assert transport.choose(session) == "remote_call"
            assert not [name for name in session.ran if "probe" in name], session.ran
            assert not session.run(is_direct)


def test_a_probe_that_cannot_be_placed_clears_the_marker(world):
    # A local session given share_cluster_devices_in_session has no ps device to place the
    # probe's ps ops on (the one case left where the probe fails, and TensorFlow logs that
    # failure): the choice falls back to RemoteCall and the marker is gone.
    config = tf.compat.v1.ConfigProto(share_cluster_devices_in_session=True)
    with tf.Graph().as_default():
        transport, is_direct, set_marker = _transport_with_marker_set()
        with tf.compat.v1.Session(config=config) as session:
            session.run(set_marker)
            assert transport.choose(session) == "remote_call"
            assert not session.run(is_direct)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (None, False),
        (tf.compat.v1.ConfigProto(), False),
        (tf.compat.v1.ConfigProto(share_cluster_devices_in_session=True), True),
        (
            tf.compat.v1.ConfigProto(
                experimental=tf.compat.v1.ConfigProto.Experimental(
                    share_cluster_devices_in_session=True
                )
            ),
            True,
        ),
    ],
    ids=["no config", "default config", "option", "experimental option"],
)
def test_shares_cluster_devices_reads_the_session_config(config, expected):
    # The master reads both fields (the experimental one is the option's older name).
    with tf.Graph().as_default(), tf.compat.v1.Session(config=config) as session:
        assert shares_cluster_devices(session) is expected


def test_the_choice_is_logged_once_until_it_changes(world, monkeypatch):
    said = []
    monkeypatch.setattr(
        tf.compat.v1.logging, "info", lambda message, *args: said.append(message % args)
    )
    not_shared = tf.compat.v1.ConfigProto()
    shared = tf.compat.v1.ConfigProto(share_cluster_devices_in_session=True)
    with tf.Graph().as_default() as graph:
        transport, _, _ = _transport_with_marker_set()
        transport.build()
    choices = []
    # Three sessions without the option, one with it (its probe cannot be placed here, so
    # RemoteCall again, for another reason), one without: RemoteCall each time, said once.
    for config in (not_shared, not_shared, not_shared, shared, not_shared):
        with tf.compat.v1.Session(graph=graph, config=config) as session:
            choices.append(transport.choose(session))
    assert choices == ["remote_call"] * 5
    assert len(said) == 1, said
    assert "RemoteCall" in said[0] and "share_cluster_devices_in_session" in said[0]


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
