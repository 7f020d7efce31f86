"""EASGD over gRPC: in-process ps and worker servers, one tf.Graph per worker.

This is between-graph replication as TF1 scripts do it: every worker builds its own graph
with its own getter; the graphs share the centres on the ps by name.
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import InProcessCluster, worker_scope

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer


class Worker:
    """One worker's graph and session: loss = slope * sum(w), plain SGD with lr 0.5."""

    def __init__(self, cluster, index, container, slope, num_worker=2, **optimizer_kwargs):
        self.index = index
        self.getter = ElasticAverageCustomGetter(f"/job:worker/task:{index}")
        self.graph = tf.Graph()
        with self.graph.as_default(), worker_scope(cluster.spec, index, self.getter, container):
            self.w = tf.compat.v1.get_variable(
                "w",
                [2],
                initializer=tf.compat.v1.zeros_initializer(),
                partitioner=optimizer_kwargs.pop("partitioner", None),
            )
            self.global_step = tf.compat.v1.train.get_or_create_global_step()
            self.opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.5),
                num_worker=num_worker,
                ea_custom_getter=self.getter,
                rho=0.0,
                **optimizer_kwargs,
            )
            self.train_op = self.opt.minimize(
                slope * tf.reduce_sum(self._value(self.w)), global_step=self.global_step
            )
            self.init_op = self.opt.get_init_op(index)
            self.global_init = tf.compat.v1.global_variables_initializer()
            self.local_init = tf.compat.v1.local_variables_initializer()
            entries = self.getter.centered_variables()
            self.observed = [
                tf.concat([e.worker.read_value() for e in entries], 0)[0],
                tf.concat([e.local_center.read_value() for e in entries], 0)[0],
                tf.concat([e.global_center.read_value() for e in entries], 0)[0],
                self.global_step.read_value(),
            ]
        self.session = cluster.session(index, self.graph)

    @staticmethod
    def _value(w):
        return w.read_value() if isinstance(w, tf.Variable) else w.as_tensor()

    def start(self, chief):
        if chief:
            self.session.run(self.global_init)
        self.session.run(self.local_init)
        self.session.run(self.init_op)

    def step(self):
        self.session.run(self.train_op)
        return tuple(float(x) for x in self.session.run(self.observed))

    def close(self):
        self.session.close()


@pytest.fixture
def workers(request, cluster, container):
    made = []

    def make(*args, **kwargs):
        made.append(Worker(cluster, *args, container=container, **kwargs))
        return made[-1]

    yield make
    for worker in made:
        worker.close()


@pytest.mark.parametrize("partitioned", [False, True], ids=["whole", "partitioned"])
def test_two_workers_interleaved_trajectory(world, workers, partitioned):
    # Worker 0 has loss w (gradient 1, a step of -0.5), worker 1 loss -2w (a step of +1);
    # lr 0.5, tau 2, alpha 0.25, both start at 0. They step in turn, 0 1 0 1 ...
    # w0 s1: x0 = -0.5                    w1 s1: x1 = 1.0
    # w0 s2: x0 = -1.0; c = 0, d = -1:    x0 = -0.75, c = -0.25, gs 1
    # w1 s2: x1 = 2.0; c = -0.25, d = 2.25: x1 = 1.4375, c = 0.3125, gs 2
    # w0 s3: x0 = -1.25                   w1 s3: x1 = 2.4375
    # w0 s4: x0 = -1.75; c = 0.3125, d = -2.0625: x0 = -1.234375, c = -0.203125, gs 3
    # w1 s4: x1 = 3.4375; c = -0.203125, d = 3.640625: x1 = 2.52734375, c = 0.70703125, gs 4
    # Rows: (own copy, own local centre, centre, global_step) after that worker's step.
    partitioner = tf.compat.v1.fixed_size_partitioner(2) if partitioned else None
    w0 = workers(0, slope=1.0, communication_period=2, moving_rate=0.25, partitioner=partitioner)
    w1 = workers(1, slope=-2.0, communication_period=2, moving_rate=0.25, partitioner=partitioner)
    w0.start(chief=True)
    w1.start(chief=False)
    observed = [worker.step() for _ in range(4) for worker in (w0, w1)]
    assert observed == [
        (-0.5, 0.0, 0.0, 0),
        (1.0, 0.0, 0.0, 0),
        (-0.75, 0.0, -0.25, 1),
        (1.4375, -0.25, 0.3125, 2),
        (-1.25, 0.0, 0.3125, 2),
        (2.4375, -0.25, 0.3125, 2),
        (-1.234375, 0.3125, -0.203125, 3),
        (2.52734375, -0.203125, 0.70703125, 4),
    ]


def test_period_one_every_step_exchanges(world, workers):
    # tau 1, alpha 0.5. w0 step: x0 = -0.5, d = -0.5, x0 = c = -0.25 (gs 1).
    # w1 step: x1 = 1.0; c = -0.25, d = 1.25: x1 = c = 0.375 (gs 2).
    w0 = workers(0, slope=1.0, communication_period=1, moving_rate=0.5)
    w1 = workers(1, slope=-2.0, communication_period=1, moving_rate=0.5)
    w0.start(chief=True)
    w1.start(chief=False)
    assert w0.step() == (-0.25, 0.0, -0.25, 1)
    assert w1.step() == (0.375, -0.25, 0.375, 2)


def test_late_worker_starts_from_the_current_centre(world, workers):
    # A worker that joins (or rejoins) after training went on reads the centre, not its
    # initializer: after w0's two steps at tau 1, alpha 0.5 (c = -0.25, then x0 -0.75,
    # d = -0.5, c = -0.5), worker 1 starts at -0.5.
    w0 = workers(0, slope=1.0, communication_period=1, moving_rate=0.5)
    w0.start(chief=True)
    w0.step()
    assert w0.step()[2] == -0.5
    late = workers(1, slope=-2.0, communication_period=1, moving_rate=0.5)
    late.start(chief=False)
    assert late.session.run(late.observed)[0] == -0.5


def test_synchronous_barrier_waits_once_and_lets_restarted_workers_through(world, workers):
    # contrib fix 9: contrib's start-up barrier trapped a worker restarted after it.
    w0 = workers(0, slope=1.0, synchronous=True)
    w0.session.run(w0.global_init)
    w0.session.run(w0.local_init)
    short = tf.compat.v1.RunOptions(timeout_in_ms=1000)
    with pytest.raises(tf.errors.DeadlineExceededError):
        w0.session.run(w0.init_op, options=short)  # Worker 1 has not arrived: it waits.
    w1 = workers(1, slope=-2.0, synchronous=True)
    w1.start(chief=False)  # Worker 0 has arrived: no wait.
    w0.session.run(w0.init_op, options=short)
    for index, slope in ((1, -2.0), (0, 1.0), (1, -2.0)):  # Restarts, each with a new graph.
        again = workers(index, slope=slope, synchronous=True)
        again.session.run(again.local_init)
        again.session.run(again.init_op, options=short)
        again.step()


def test_worker_session_does_not_wait_for_a_dead_worker(world, container):
    # contrib fix 10: a session that lists every task cannot be created while another worker
    # is down. Here worker 1's address has no server at all; with device filters worker 0
    # still trains.
    partial = InProcessCluster(num_ps=1, num_workers=1, dead_workers=1)
    worker = Worker(partial, 0, container, slope=1.0, communication_period=1, moving_rate=0.5)
    try:
        worker.start(chief=True)
        assert worker.step() == (-0.25, 0.0, -0.25, 1)
    finally:
        worker.close()


@pytest.mark.parametrize("share_devices", [False, True])
def test_hook_in_monitored_training_session(world, cluster, container, share_devices):
    # The chief trains 4 steps at tau 2 under MonitoredTrainingSession; then worker 1 joins
    # as a non-chief and the hook starts it from the centre the chief left. The hook also
    # picks the exchange transport the session config allows (transport.py).
    transport = "direct" if share_devices else "remote_call"

    def build(index):
        getter = ElasticAverageCustomGetter(f"/job:worker/task:{index}")
        with worker_scope(cluster.spec, index, getter, container):
            w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.ones_initializer())
            step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.AdamOptimizer(0.1), 2, getter, communication_period=2
            )
            train_op = opt.minimize(tf.reduce_sum(tf.square(w)), global_step=step)
        hook = opt.make_session_run_hook(is_chief=index == 0, task_index=index)
        reads = [w.read_value(), getter.find(w).global_center.read_value(), step.read_value()]
        return reads, train_op, hook

    with tf.Graph().as_default():
        reads, train_op, hook = build(0)
        with cluster.monitored_session(0, hook, share_devices) as sess:
            assert hook.exchange_transport == transport
            for _ in range(4):
                sess.run(train_op)
            _, chief_centre, steps = sess.run(reads)
    assert steps == 2  # 4 local steps at tau 2.
    assert np.all(chief_centre < 1.0)
    with tf.Graph().as_default():
        reads, _, hook = build(1)
        with cluster.monitored_session(1, hook, share_devices) as sess:
            assert hook.exchange_transport == transport
            np.testing.assert_array_equal(sess.run(reads[0]), chief_centre)
