"""The choice of exchange transport (tf_contrib_easgd/exchange/transport.py).

Which transport the usual sessions get, and what each runs, is also tested where the
exchange runs: tests/test_exchange.py (RunMetadata of both) and tests/test_distributed.py
(the hook in MonitoredTrainingSession).
"""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope
from processes import child_env

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


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("soft_placement", "share_devices", "expected"),
    [(True, False, "remote_call"), (True, True, "direct"), (False, False, "remote_call")],
)
def test_the_probe_asks_the_ps_itself(
    world, cluster, container, soft_placement, share_devices, expected
):
    # A session that does not share the cluster's devices gets RemoteCall without a probe
    # (with soft placement a probe would run its ps ops on the worker, and without it fail
    # to place them); one that shares them gets a direct call once the ps says it holds
    # the centre. Either way the exchange then works: tau = 2, alpha = 0.25 (0.9 / 2 / 2 workers is
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


# A worker job in one process: a ps and a worker server on loopback ports, trained with the
# hook under MonitoredTrainingSession, in TF 2 graph mode and then in TF1 mode (each world
# in its own container on the same servers). Each phase starts with a "PHASE" line on
# stderr; the choices and the values read after each exchange go to stdout as JSON.
_LOGGING_JOB = """
import json
import sys

import portpicker
import tensorflow as tf

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO)
spec = tf.train.ClusterSpec(
    {
        "ps": [f"localhost:{portpicker.pick_unused_port()}"],
        "worker": [f"localhost:{portpicker.pick_unused_port()}"],
    }
)
servers = [tf.distribute.Server(spec, "ps", 0), tf.distribute.Server(spec, "worker", 0)]
SHARED = tf.compat.v1.ConfigProto(share_cluster_devices_in_session=True)
results = {}


def phase(name):
    print(f"PHASE {name}", file=sys.stderr, flush=True)


def train(world):
    record = results[world] = {"transports": []}
    with tf.Graph().as_default():
        getter = ElasticAverageCustomGetter("/job:worker/task:0")
        setter = tf.compat.v1.train.replica_device_setter(
            worker_device="/job:worker/task:0", cluster=spec
        )
        with (
            tf.compat.v1.container(world),
            tf.compat.v1.device(setter),
            tf.compat.v1.variable_scope("", custom_getter=getter),
        ):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
            step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.5),
                1,
                getter,
                communication_period=3,
                moving_rate=0.25,
                rho=0.0,
            )
            train_op = opt.minimize(tf.reduce_sum(w), global_step=step)
        hook = opt.make_session_run_hook(is_chief=True, task_index=0)
        reads = [w.read_value(), getter.find(w).global_center.read_value(), step.read_value()]

        def run(config, steps):
            with tf.compat.v1.train.MonitoredTrainingSession(
                master=servers[1].target,
                is_chief=True,
                hooks=[hook],
                config=config,
                log_step_count_steps=None,
                save_summaries_steps=None,
            ) as session:
                record["transports"].append(hook.exchange_transport)
                for _ in range(steps):
                    session.run(train_op)
                w_, centre, global_step = session.run(reads)
            return [w_.tolist(), centre.tolist(), int(global_step)]

        phase(f"{world} default config: two sessions, local steps")
        run(None, 2)
        run(None, 2)
        phase(f"{world} default config: an exchange")
        record["remote_call"] = run(None, 3)
        phase(f"{world} shared devices: an exchange")
        record["direct"] = run(SHARED, 3)


train("tf2")
tf.compat.v1.disable_v2_behavior()
train("tf1")
phase("end")
print(json.dumps(results))
"""

_PROBE_ERRORS = ("OP_REQUIRES failed", "Cannot assign a device")
_ABORTING = "Local rendezvous is aborting"
# TensorFlow 2.21 aborts a finished step's rendezvous with this status when the master
# cleans the step up while the rendezvous is still alive, and logs it as a warning (every
# power-of-two time in a process). It comes and goes with thread timing, in any step, and
# a plain model without EASGD under MonitoredTrainingSession logs it too: no error. The
# failed probe's aborts had other statuses (INVALID_ARGUMENT, "ABORTED: Stopping remaining
# executors").
_STEP_CLEANUP = "with status: ABORTED: Cleanup "


def _phases(stderr):
    """Splits a child's stderr at its "PHASE name" lines; returns {name: text}."""
    phases, name = {}, "start"
    for line in stderr.splitlines():
        if line.startswith("PHASE "):
            name = line[len("PHASE ") :]
        else:
            phases[name] = phases.get(name, "") + line + "\n"
    return phases


@pytest.mark.cluster
def test_choosing_the_transport_logs_no_error():
    # Before, every session created with the default ConfigProto (every migrated script)
    # logged "OP_REQUIRES failed ... Cannot assign a device for operation VariableV2" and
    # "Local rendezvous is aborting with status: INVALID_ARGUMENT": the probe learnt by
    # failing that the session did not share the cluster's devices.
    env = dict(child_env(), TF_CPP_MIN_LOG_LEVEL="0", TF_NUM_INTEROP_THREADS="16")
    done = subprocess.run(
        [sys.executable, "-c", _LOGGING_JOB],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    results = json.loads(done.stdout.splitlines()[-1])
    phases = _phases(done.stderr)
    assert "PHASE end" in done.stderr, done.stderr[-5000:]
    for world in ("tf2", "tf1"):
        record = results[world]
        assert record["transports"] == ["remote_call"] * 3 + ["direct"], world
        # Each chief session initialises the global variables anew (no checkpoint to
        # restore), and the hook starts w from the centre [1, 2]. lr 0.5 on sum(w), tau 3,
        # alpha 0.25: w = [1, 2] - 3 * 0.5 = [-0.5, 0.5]; the third step exchanges:
        # d = 0.25 * ([-0.5, 0.5] - [1, 2]) = [-0.375, -0.375]; w = w - d = [-0.125, 0.875],
        # centre = [1, 2] + d = [0.625, 1.625], global_step 1. Both transports alike.
        for transport in ("remote_call", "direct"):
            assert record[transport] == [[-0.125, 0.875], [0.625, 1.625], 1], (world, transport)

        # The choice is said once, and again only when it changes.
        default = phases[f"{world} default config: two sessions, local steps"]
        exchange = phases[f"{world} default config: an exchange"]
        shared = phases[f"{world} shared devices: an exchange"]
        said = default + exchange + shared
        assert said.count("exchanges use RemoteCall") == 1, said
        assert default.count("exchanges use RemoteCall") == 1, default
        assert said.count("exchanges call the parameter servers directly") == 1, said
        assert shared.count("exchanges call the parameter servers directly") == 1, shared

        # No phase logs an error: session creation, the choice, local steps, exchanges.
        for text in (default, exchange, shared):
            for pattern in _PROBE_ERRORS:
                assert pattern not in text, text
            aborting = [line for line in text.splitlines() if _ABORTING in line]
            assert all(_STEP_CLEANUP in line for line in aborting), aborting
