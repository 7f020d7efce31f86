"""In-process cluster tests: the overlapped exchange (`overlap=True`).

The tests of its other tiers are in tests/unit/test_overlap.py.
"""

import time

import numpy as np
import tensorflow as tf
from clusters import worker_scope
from exchange_graphs import wait_for_exchanges as _wait_for_exchanges
from quadratic import build_quadratic

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer

DEADLINE_SECS = 30


def test_monitored_sessions_run_the_exchange_and_stop_it(world, cluster, container):
    # Worker 0, the chief, trains 6 steps at tau 2 under MonitoredTrainingSession, which
    # starts the exchange's runner: exchanges are sent at steps 2, 4 and 6, and the moves
    # of the first two land at steps 4 and 6. Loss sum(w^2) from w = 1 with lr 0.1 (w
    # shrinks by 0.8 a step) and alpha 0.25: the centre moves towards w each time.
    # Then worker 1 joins and the hook starts it from the centre the chief left.
    def build(index):
        getter = ElasticAverageCustomGetter(f"/job:worker/task:{index}")
        with worker_scope(cluster.spec, index, getter, container):
            w = tf.compat.v1.get_variable("w", [3], initializer=tf.compat.v1.ones_initializer())
            step = tf.compat.v1.train.get_or_create_global_step()
            opt = ElasticAverageOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1), 2, getter,
                communication_period=2, moving_rate=0.25, rho=0.0, overlap=True,
            )  # fmt: skip
            train_op = opt.minimize(tf.reduce_sum(tf.square(w)), global_step=step)
        hook = opt.make_session_run_hook(is_chief=index == 0, task_index=index)
        reads = [w.read_value(), getter.find(w).global_center.read_value(), step.read_value()]
        return reads, train_op, hook

    with tf.Graph().as_default():
        reads, train_op, hook = build(0)
        with cluster.monitored_session(0, hook) as sess:
            assert hook.exchange_transport == "none"  # Plain ops in the runner's own run.
            for _ in range(6):
                sess.run(train_op)
            _wait_for_exchanges(sess, reads[2], 3)
            w, centre, steps = sess.run(reads)
            closing = time.monotonic()
    # Closing (the hook's end(), then the runner's stop: it waits for the next copy) is
    # prompt.
    assert time.monotonic() - closing < 5
    assert steps == 3
    # The hook's end() landed the third move: w = 0.422344 + 0.096264 (not read here).
    # w: 1 -> 0.8 -> 0.64 (sent: c = 1 + 0.25 * (0.64 - 1) = 0.91, d = -0.09)
    #   -> 0.512 -> 0.4096, + 0.09 = 0.4996 (sent: d = 0.25 * (0.4996 - 0.91) = -0.1026,
    #   c = 0.8074) -> 0.39968 -> 0.319744, + 0.1026 = 0.422344 (sent: d = 0.25 *
    #   (0.422344 - 0.8074) = -0.096264, c = 0.711136).
    np.testing.assert_allclose(w, [0.422344] * 3, rtol=1e-5)
    np.testing.assert_allclose(centre, [0.711136] * 3, rtol=1e-5)
    with tf.Graph().as_default():
        reads, _, hook = build(1)
        with cluster.monitored_session(1, hook) as sess:
            np.testing.assert_array_equal(sess.run(reads[0]), centre)


def test_the_runner_reads_the_centre_once_the_copy_has_arrived(world, cluster, container):
    # Period 1, alpha 0.5, lr 0.5 on 0.5 * w^2 (each step halves w), from w = 8. Between two
    # exchanges another worker moves the centre (here: +1 by hand). The runner's next step
    # starts as soon as it has queued a reply and then waits for the next copy; the centre
    # it moves must be read once that copy has come, not when it started waiting.
    # Step 1 sends 4: d = 0.5 (4 - 8) = -2, centre 6. The other worker: centre 7.
    # Step 2: w = 2, lands d: w = 4; sends 4: d = 0.5 (4 - 7) = -1.5, centre 5.5 (a centre
    # read before the other worker's move would give d = -1 and centre 6).
    # The finish op lands it: w = 5.5, local centre 7.
    getter = ElasticAverageCustomGetter("/job:worker/task:0")
    with tf.Graph().as_default() as graph:
        with worker_scope(cluster.spec, 0, getter, container):
            w, opt, train_op, global_step = build_quadratic(
                getter, 8.0, communication_period=1, moving_rate=0.5, overlap=True
            )
        entry = getter.find(w)
        other_worker = entry.global_center.assign_add(1.0)
        finish = opt.get_finish_op()
        coordinator = tf.train.Coordinator()
        with cluster.session(0, graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(opt.get_init_op(0))
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            session.run(train_op)
            _wait_for_exchanges(session, global_step, 1)
            time.sleep(0.1)  # The runner's next step has started and waits for a copy.
            assert session.run(other_worker) == 7.0
            session.run(train_op)
            _wait_for_exchanges(session, global_step, 2)
            assert session.run(entry.global_center) == 5.5
            session.run(finish)
            assert session.run([w, entry.local_center]) == [5.5, 7.0]
            coordinator.request_stop()
            coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)
