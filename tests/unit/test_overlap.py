"""The overlapped exchange (`overlap=True`): its moves, worked by hand.

The exchange runs in the queue runner's thread; a value is read once the runner has moved
the centre (global_step counts the exchanges done), so every value is determined. The
first tests have no server (one worker whose devices are all local); the last runs on an
in-process cluster under MonitoredTrainingSession.
"""

import time

import numpy as np
import pytest
import tensorflow as tf
from exchange_graphs import wait_for_exchanges as _wait_for_exchanges
from quadratic import build_quadratic, trajectory_row

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.overlap import OverlappedExchange, _subtract_scaled

DEADLINE_SECS = 30


def test_moves_land_one_period_later(world):
    # period 3, alpha 0.5, lr 0.5 on 0.5*w^2: each local step halves w.
    # Steps 1-3: w 8 -> 4 -> 2 -> 1. Step 3 sends x_s = 1 (nothing in flight to land);
    #   the runner reads c = 8, d = 0.5 * (1 - 8) = -3.5, c = 8 - 3.5 = 4.5.
    # Steps 4-6: w 1 -> 0.5 -> 0.25 -> 0.125. Step 6 lands d = -3.5: w = 3.625, local
    #   centre = 8 (the centre that exchange read); sends x_s = 3.625: c = 4.5,
    #   d = 0.5 * (3.625 - 4.5) = -0.4375, c = 4.0625.
    # Steps 7-9: w 3.625 -> 1.8125 -> 0.90625 -> 0.453125. Step 9 lands d = -0.4375:
    #   w = 0.890625, local centre = 4.5; sends 0.890625: d = 0.5 * (0.890625 - 4.0625)
    #   = -1.5859375, c = 4.0625 - 1.5859375 = 2.4765625.
    # Rows: (w, local centre, global centre, local_step, global_step) after each step.
    expected = [
        (4.0, 8.0, 8.0, 1, 0),
        (2.0, 8.0, 8.0, 2, 0),
        (1.0, 8.0, 4.5, 3, 1),
        (0.5, 8.0, 4.5, 4, 1),
        (0.25, 8.0, 4.5, 5, 1),
        (3.625, 8.0, 4.0625, 6, 2),
        (1.8125, 8.0, 4.0625, 7, 2),
        (0.90625, 8.0, 4.0625, 8, 2),
        (0.890625, 4.5, 2.4765625, 9, 3),
    ]
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        w, opt, train_op, global_step = build_quadratic(
            getter, 8.0, communication_period=3, moving_rate=0.5, overlap=True
        )
        fetch = trajectory_row(getter, w, opt, global_step)
        coordinator = tf.train.Coordinator()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(opt.get_init_op(0))
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            observed = []
            for step in range(1, len(expected) + 1):
                session.run(train_op)
                _wait_for_exchanges(session, global_step, step // 3)
                observed.append(tuple(session.run(fetch)))
            coordinator.request_stop()
            coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)
    assert observed == expected


def test_finish_op_lands_the_exchange_in_flight(world):
    # As above, period 3: step 3 sends x_s = 1 (d = -3.5, c = 4.5). The finish op waits
    # for it and lands it: w = 1 + 3.5 = 4.5, local centre = 8. Once landed, nothing is
    # in flight: a second run changes nothing, and step 4 halves w (4.5 -> 2.25).
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        w, opt, train_op, global_step = build_quadratic(
            getter, 8.0, communication_period=3, moving_rate=0.5, overlap=True
        )
        finish = opt.get_finish_op()
        entry = getter.find(w)
        fetch = [w.read_value(), entry.local_center.read_value(), entry.global_center.read_value()]
        coordinator = tf.train.Coordinator()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            for _ in range(3):
                session.run(train_op)
            session.run(finish)
            assert session.run(fetch) == [4.5, 8.0, 4.5]
            assert session.run(global_step) == 1
            session.run(finish)
            assert session.run(fetch) == [4.5, 8.0, 4.5]
            session.run(train_op)
            assert session.run(fetch) == [2.25, 8.0, 4.5]
            coordinator.request_stop()
            coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)


def test_default_builds_no_queue_and_no_runner(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default() as graph:
        build_quadratic(getter, 1.0, communication_period=2)
        assert not graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)
        assert not [op for op in graph.get_operations() if "Queue" in op.type]


def test_overlap_registers_one_queue_runner(world):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default() as graph:
        build_quadratic(getter, 1.0, communication_period=2, overlap=True)
        (runner,) = graph.get_collection(tf.compat.v1.GraphKeys.QUEUE_RUNNERS)
        assert len(runner.enqueue_ops) == 1


@pytest.mark.parametrize("overlap", [1, "yes", None])
def test_overlap_must_be_a_bool(overlap):
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default(), pytest.raises(TypeError, match=r"overlap.*" + repr(overlap)):
        ElasticAverageOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(0.5), 1, getter, overlap=overlap
        )


def test_a_runner_step_longer_than_the_operation_timeout_loses_no_exchange(world, monkeypatch):
    # The runner's step takes the copy, then pauses 0.5 s before it exchanges: longer than
    # the session's 0.2 s operation timeout. A step failed by that timeout after taking the
    # copy would lose the exchange, and the finish op would wait for its reply until the
    # test's deadline. The runner's steps keep no operation timeout, so both exchanges land
    # as worked in the idle-worker test below: w = 5, local centre 6, centre 5.
    original = OverlappedExchange._exchange_with_centres

    def slow(self, copies):
        pause = tf.numpy_function(lambda: np.float32(time.sleep(0.5) or 0), [], tf.float32)
        with tf.control_dependencies([pause]):
            return original(self, tf.nest.map_structure(tf.identity, copies))

    monkeypatch.setattr(OverlappedExchange, "_exchange_with_centres", slow)
    assert _two_overlapped_exchanges(idle_secs=0.0) == [5.0, 6.0, 5.0]


def test_the_runner_waits_out_an_idle_worker_in_a_session_with_an_operation_timeout(world):
    # The runner's step blocks until the next copy, in a session with an operation timeout
    # of 0.2 s; the worker idles 1 s (five timeouts) between two steps, as a worker
    # evaluating or waiting for the others does, and the runner must simply wait (its
    # steps keep no timeout). Period 1, alpha 0.5, lr 0.5 on 0.5 * w^2, from w = 8:
    # step 1: w = 4, sent: d = 0.5 (4 - 8) = -2, centre 6; step 2: w = 2, lands: w = 4,
    # local centre 8; sent: d = 0.5 (4 - 6) = -1, centre 5; the finish op: w = 5, local
    # centre 6.
    assert _two_overlapped_exchanges(idle_secs=1.0) == [5.0, 6.0, 5.0]


def _two_overlapped_exchanges(idle_secs):
    """Two overlapped exchanges of `build_quadratic` (period 1, alpha 0.5, from w = 8) in a
    session with an operation timeout of 0.2 s, the worker idle `idle_secs` between them,
    then the finish op; returns [w, local centre, centre]. The test's own steps and the
    finish op (which waits for the runner's exchange in flight) may take as long as they
    need: under load a finish op took longer than 0.2 s (a fresh-clone CI run)."""
    getter = ElasticAverageCustomGetter("")
    with tf.Graph().as_default():
        w, opt, train_op, global_step = build_quadratic(
            getter, 8.0, communication_period=1, moving_rate=0.5, overlap=True
        )
        finish = opt.get_finish_op()
        entry = getter.find(w)
        config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=200)
        patient = tf.compat.v1.RunOptions(timeout_in_ms=DEADLINE_SECS * 1000)
        coordinator = tf.train.Coordinator()
        with tf.compat.v1.Session(config=config) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(tf.compat.v1.local_variables_initializer())
            session.run(opt.get_init_op(0))
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            for count in (1, 2):
                session.run(train_op, options=patient)
                _wait_for_exchanges(session, global_step, count)
                time.sleep(idle_secs if count == 1 else 0.0)
                assert not coordinator.should_stop()
            session.run(finish, options=patient)
            moved = session.run([w, entry.local_center, entry.global_center])
            coordinator.request_stop()
            coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)
    return moved


class _AssignSubOnly:
    """A variable that only `assign_sub` can move: neither a ref nor a resource op."""

    def __init__(self, variable):
        self._variable = variable
        self.dtype, self.device = variable.dtype, variable.device
        self.op = type("Op", (), {"type": "SomeOtherVariableOp"})()

    def assign_sub(self, value, use_locking=None, name=None, read_value=True):
        return self._variable.assign_sub(value, use_locking, name, read_value)


def test_every_landing_kernel_moves_by_the_same_bits(world):
    # x - alpha * difference, alpha 0.3, on 1000 random float32 values: the kernel of ref
    # and resource variables (TF1 / TF 2 worlds) and assign_sub of the product (any other
    # variable) both round alpha * difference before they subtract, as NumPy does here.
    rng = np.random.default_rng(2)
    x, difference = rng.normal(size=(2, 1000)).astype(np.float32)
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        kernel = tf.compat.v1.Variable(x)
        other = tf.compat.v1.Variable(x, use_resource=True)
        moves = [
            _subtract_scaled(kernel, 0.3, tf.constant(difference), use_locking=False),
            _subtract_scaled(_AssignSubOnly(other), 0.3, tf.constant(difference), False),
        ]
        assert [move.type for move in moves] == [
            "ApplyGradientDescent" if world == "tf1" else "ResourceApplyGradientDescent",
            "AssignSubVariableOp",
        ]
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(moves)
        expected = x - np.float32(0.3) * difference
        np.testing.assert_array_equal(session.run(kernel), expected)
        np.testing.assert_array_equal(session.run(other), expected)
