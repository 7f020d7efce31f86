"""ElasticAverageOptimizer in one process: trajectories, defaults, penalty, slots.

No server here: one worker whose devices are all local, so the numbers are exact.
"""

import numpy as np
import pytest
import tensorflow as tf
from quadratic import build_quadratic, trajectory_row

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

LOCAL = tf.compat.v1.GraphKeys.LOCAL_VARIABLES
GLOBAL = tf.compat.v1.GraphKeys.GLOBAL_VARIABLES
CLUSTER = tf.train.ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": ["w0:2222"]})


def _initialize(session):
    session.run(
        [tf.compat.v1.global_variables_initializer(), tf.compat.v1.local_variables_initializer()]
    )


def _read(variable):
    return variable.read_value()


@pytest.mark.parametrize(
    ("period", "expected"),
    [
        # period 3, alpha 0.5, lr 0.5 on 0.5*w^2: each local step halves w.
        # w: 8 -> 4 -> 2 -> 1, exchange: d = 1 - 8 = -7, w = 1 + 3.5 = 4.5, c = 8 - 3.5 = 4.5
        # w: 4.5 -> 2.25 -> 1.125 -> 0.5625, exchange: d = 0.5625 - 4.5 = -3.9375,
        #    w = c = 2.53125.
        # Rows: (w, local centre, global centre, local_step, global_step) after each step.
        (
            3,
            [
                (4.0, 8.0, 8.0, 1, 0),
                (2.0, 8.0, 8.0, 2, 0),
                (4.5, 8.0, 4.5, 3, 1),
                (2.25, 8.0, 4.5, 4, 1),
                (1.125, 8.0, 4.5, 5, 1),
                (2.53125, 4.5, 2.53125, 6, 2),
            ],
        ),
        # period 1: w 8 -> 4, d = -4, w = c = 6; 6 -> 3, d = -3, w = c = 4.5;
        # 4.5 -> 2.25, d = -2.25, w = c = 3.375.
        (1, [(6.0, 8.0, 6.0, 1, 1), (4.5, 6.0, 4.5, 2, 2), (3.375, 4.5, 3.375, 3, 3)]),
    ],
)
def test_one_worker_trajectory(world, period, expected):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        w, opt, train_op, global_step = build_quadratic(
            getter, 8.0, communication_period=period, moving_rate=0.5
        )
        fetch = trajectory_row(getter, w, opt, global_step)
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(opt.get_init_op(0))
            observed = []
            for _ in expected:
                session.run(train_op)
                observed.append(tuple(session.run(fetch)))
    assert observed == expected


def test_global_step_is_optional(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(2.0))
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5),
            1,
            getter,
            communication_period=1,
            moving_rate=0.5,
            rho=0.0,
        )
        train_op = opt.minimize(0.5 * tf.square(w))
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(train_op)
            # w: 2 -> 1, exchange with c = 2: d = -1, w = c = 1.5.
            assert session.run([_read(w), _read(getter.find(w).global_center)]) == [1.5, 1.5]


def test_defaults_follow_the_paper():
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), num_worker=4, ea_custom_getter=getter
        )
    assert opt.communication_period == 10
    # moving_rate = BETA / tau / workers = 0.9 / 10 / 4.
    assert opt.moving_rate == pytest.approx(0.0225)
    assert opt.get_name() == "ElasticAverageOptimizer"
    assert (opt.BETA, opt.GATE_NONE, opt.GATE_OP, opt.GATE_GRAPH) == (0.9, 0, 1, 2)


_KINDS = {
    "sgd": tf.compat.v1.train.GradientDescentOptimizer,
    "momentum": lambda lr: tf.compat.v1.train.MomentumOptimizer(lr, 0.9),
    "nesterov": lambda lr: tf.compat.v1.train.MomentumOptimizer(lr, 0.9, use_nesterov=True),
    "adam": tf.compat.v1.train.AdamOptimizer,
    "adagrad": tf.compat.v1.train.AdagradOptimizer,
    "rmsprop": tf.compat.v1.train.RMSPropOptimizer,
}
_RATES = {
    "float": lambda: 0.1,
    "tensor": lambda: tf.constant(0.1),
    "callable": lambda: lambda: 0.1,
}


@pytest.mark.parametrize("rate", sorted(_RATES))
@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_default_rho_is_moving_rate_over_learning_rate(world, kind, rate):
    # Contrib read a learning-rate attribute only plain SGD has: Adam crashed (contrib fix 1).
    # Here every optimizer and every form of rate works. With 2 workers and tau = 10,
    # moving_rate = 0.9 / 10 / 2 = 0.045 and rho = 0.045 / 0.1 = 0.45. The loss is 0 * w, so
    # the gradient is the penalty's alone: rho * (w - local centre) = 0.45 * (7 - 5) = 0.9.
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(5.0))
        opt = ElasticAverageOptimizer(_KINDS[kind](_RATES[rate]()), 2, getter)
        ((gradient, variable),) = opt.compute_gradients(0.0 * w)
        assert variable is w
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(tf.compat.v1.assign(w, 7.0))
            assert session.run(gradient) == pytest.approx(0.9)


def test_rho_zero_switches_the_penalty_off(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=tf.constant(5.0))
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), 1, getter, rho=0.0
        )
        ((gradient, _),) = opt.compute_gradients(3.0 * w)
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(tf.compat.v1.assign(w, 7.0))
            assert session.run(gradient) == 3.0


@pytest.mark.parametrize("order", [["b", "a"], ["b"], ["a", "b"]])
def test_each_variable_is_paired_with_its_own_centre(world, order):
    # Contrib paired var_list with the centres by list position (contrib fix 2): for
    # var_list [b, a] it penalised b against a's centre. With rho = 1, centres a: 1, b: 10
    # and copies a: 3, b: 30, the gradients must be a: 3 - 1 = 2 and b: 30 - 10 = 20.
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            variables = {
                "a": tf.compat.v1.get_variable("a", initializer=tf.constant(1.0)),
                "b": tf.compat.v1.get_variable("b", initializer=tf.constant(10.0)),
            }
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1), 1, getter, rho=1.0
        )
        grads_and_vars = opt.compute_gradients(
            0.0 * (variables["a"] + variables["b"]), var_list=[variables[n] for n in order]
        )
        assert [v for _, v in grads_and_vars] == [variables[n] for n in order]
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run([tf.compat.v1.assign(variables["a"], 3.0)])
            session.run([tf.compat.v1.assign(variables["b"], 30.0)])
            gradients = session.run([g for g, _ in grads_and_vars])
    assert gradients == [{"a": 2.0, "b": 20.0}[n] for n in order]


def _adam_on_cluster(getter):
    setter = tf.compat.v1.train.replica_device_setter(
        worker_device="/job:worker/task:0", cluster=CLUSTER
    )
    with tf.compat.v1.device(setter), tf.compat.v1.variable_scope("", custom_getter=getter):
        w = tf.compat.v1.get_variable("w", [4])
        b = tf.compat.v1.get_variable("b", [1])
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = ElasticAverageOptimizer(tf.compat.v1.train.AdamOptimizer(0.01), 1, getter)
        opt.minimize(tf.reduce_sum(w) + tf.reduce_sum(b), global_step=global_step)
    return w, b, opt


def test_wrapped_optimizer_slots_are_reachable_and_worker_local(world):
    # Contrib reported no slots (contrib fix 5) and moved the wrapped optimizer's variables
    # by editing the graph's private collections (item 6).
    getter = ElasticAverageCustomGetter("/job:worker/task:0")
    with tf.Graph().as_default():
        w, b, opt = _adam_on_cluster(getter)
        assert opt.get_slot_names() == ["m", "v"]
        slots = [opt.get_slot(v, name) for v in (w, b) for name in ("m", "v")]
        local = tf.compat.v1.get_collection(LOCAL)
        for slot in slots:
            assert slot is not None
            assert slot.device == "/job:worker/task:0"
            assert any(slot is v for v in local)
        global_names = sorted(v.op.name for v in tf.compat.v1.get_collection(GLOBAL))
        assert global_names == [
            "global_center_variable/b",
            "global_center_variable/w",
            "global_step",
        ]
        state = opt.variables()
        assert len(state) == len(slots) + 3  # Adam's two beta powers and local_step.
        assert {v.device for v in state} == {"/job:worker/task:0"}
        assert all(any(v is local_v for local_v in local) for v in state)


@pytest.mark.parametrize("rate", sorted(_RATES))
@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_every_wrapped_optimizer_trains(world, kind, rate):
    # Loss 0.5 * ||w - 3||^2 from w = 0 with default moving_rate and rho; tau = 2, so 20
    # local steps make 10 exchanges and global_step must read 10.
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", [2], initializer=tf.compat.v1.zeros_initializer())
            global_step = tf.compat.v1.train.get_or_create_global_step()
        loss = 0.5 * tf.reduce_sum(tf.square(w - 3.0))
        opt = ElasticAverageOptimizer(
            _KINDS[kind](_RATES[rate]()), 1, getter, communication_period=2
        )
        train_op = opt.minimize(loss, global_step=global_step)
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(opt.get_init_op(0))
            before = session.run(loss)
            for _ in range(20):
                session.run(train_op)
            after, steps = session.run([loss, _read(global_step)])
    assert before == 9.0
    assert after < before
    assert steps == 10


def test_partitioned_variable_trains_and_exchanges(world):
    # 0.5 * ||w||^2, lr 0.5, tau 1, alpha 0.5: as in the period-1 trajectory each element
    # goes 8 -> 6, so every partition of the worker copy and of the centre reads 6.
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable(
                "w",
                [4],
                initializer=tf.compat.v1.constant_initializer(8.0),
                partitioner=tf.compat.v1.fixed_size_partitioner(2),
            )
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5),
            1,
            getter,
            communication_period=1,
            moving_rate=0.5,
            rho=0.0,
        )
        train_op = opt.minimize(0.5 * tf.reduce_sum(tf.square(w.as_tensor())), var_list=[w])
        with tf.compat.v1.Session() as session:
            _initialize(session)
            session.run(train_op)
            for entry in getter.centered_variables():
                np.testing.assert_array_equal(session.run(_read(entry.worker)), [6.0, 6.0])
                np.testing.assert_array_equal(session.run(_read(entry.global_center)), [6.0, 6.0])


def test_worker_state_stays_on_the_worker_under_a_device_setter(world):
    # Two placements contrib left to the enclosing device function (both seen on TF 1.15):
    # built under replica_device_setter but outside the getter's scope, its `local_step`
    # landed on a ps task, where the workers would share one counter; and with
    # `get_init_op` built inside the device setter, its start-up barrier's queues landed on
    # each worker's own device, so no two workers ever met. Here `local_step` is on the
    # worker and the barrier's queues on the ps holding the first centre.
    worker = "/job:worker/task:0"
    cluster = tf.train.ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": ["w0:1", "w1:1"]})
    getter = ElasticAverageCustomGetter(worker)
    setter = tf.compat.v1.train.replica_device_setter(worker_device=worker, cluster=cluster)
    with tf.Graph().as_default(), tf.compat.v1.device(setter):
        with tf.compat.v1.variable_scope("", custom_getter=getter):
            w = tf.compat.v1.get_variable("w", initializer=1.0)
        opt = ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.1),
            num_worker=2,
            ea_custom_getter=getter,
            rho=0.0,
            synchronous=True,
        )
        opt.minimize(w * w)
        opt.get_init_op(0)
        queues = [
            op
            for op in tf.compat.v1.get_default_graph().get_operations()
            if op.type == "FIFOQueueV2"
        ]
        centre = getter.find(w).global_center
    assert tf.DeviceSpec.from_string(opt.local_step.device).job == "worker"
    assert len(queues) == 2  # One per worker.
    where = [tf.DeviceSpec.from_string(d) for d in (centre.device, *(q.device for q in queues))]
    assert {(spec.job, spec.task) for spec in where} == {("ps", 0)}
