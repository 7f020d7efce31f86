"""In-process cluster tests: the choice of exchange transport (exchange/transport.py).

The tests of its other tiers are in tests/unit/test_transport.py.
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
