"""An exchange's direct calls to its P ps tasks are in flight together; its RemoteCalls
go one after the other.

Each ps task answers only when the test lets it: the task's half of the exchange first
queues a token on its ps ("arrived"), then waits for one the test queues there
("release"). The test lets no task answer until every task has arrived, so an exchange
whose calls went one after the other would never have more than one task arrived. Direct
calls, both variable worlds, the float32 and the bfloat16 wire, with and without
`overlap`, with 2 and 4 ps tasks; the moves are then checked to the bit. RemoteCalls are
released one task at a time, in order.
"""

import threading
import time

import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from clusters import OPERATION_TIMEOUT_MS, InProcessCluster
from exchange_graphs import WORKER
from held_exchanges import ALPHA, SIZE
from held_exchanges import HeldExchange as _HeldExchange
from held_exchanges import HeldOverlappedExchange as _HeldOverlappedExchange
from held_exchanges import build as _build
from held_exchanges import token_queue as _queue

DEADLINE_SECS = 30


# How long the test waits for every task to arrive before it releases them anyway: within
# the sessions' operation timeout, which would otherwise fail the held exchange first.
GATE_SECS = OPERATION_TIMEOUT_MS / 1000 / 2


@pytest.fixture(scope="module")
def four_ps():
    """Four ps tasks and one worker; the test's state lives in its own container."""
    return InProcessCluster(num_ps=4, num_workers=1)


class _Gates:
    """The "arrived" and "release" queues of each ps task, seen from worker 0's graph."""

    def __init__(self, container, ps_tasks):
        self.arrived, self.release, self.take = [], [], []
        for task in range(ps_tasks):
            with tf.compat.v1.device(f"/job:ps/task:{task}"):
                self.arrived.append(tf.raw_ops.QueueSizeV2(handle=_queue(container, "arrived")))
                self.release.append(
                    tf.raw_ops.QueueEnqueueV2(
                        handle=_queue(container, "release"), components=[tf.constant(1)]
                    )
                )
                self.take.append(
                    tf.raw_ops.QueueDequeueV2(
                        handle=_queue(container, "arrived"), component_types=[tf.int32]
                    )
                )

    def wait_for_all(self, session):
        """Waits (up to GATE_SECS) until every task has arrived, letting none answer; then
        releases them all, whatever happened. Returns how many had arrived."""
        deadline, arrived = time.monotonic() + GATE_SECS, 0
        try:
            while time.monotonic() < deadline:
                arrived = sum(int(size > 0) for size in session.run(self.arrived))
                if arrived == len(self.arrived):
                    break
                time.sleep(0.01)
        finally:
            session.run(self.release)  # Never leave a call waiting.
        session.run(self.take)
        return arrived


def _run_in_thread(function):
    """Starts `function()` in a daemon thread; returns a join that re-raises its error."""
    errors = []

    def guarded():
        try:
            function()
        except Exception as error:  # Re-raised in the test's thread.
            errors.append(error)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()

    def join():
        thread.join(DEADLINE_SECS)
        assert not thread.is_alive(), "the exchange did not end"
        if errors:
            raise errors[0]

    return join


def _assert_moved_as(session, variables, entries, replay):
    """Every variable, local centre and centre is the replay's, to the bit."""
    for i, entry in enumerate(entries):
        worker, local, centre = session.run([variables[i], entry.local_center, entry.global_center])
        np.testing.assert_array_equal(worker, replay.x[i])
        np.testing.assert_array_equal(local, replay.local[i])
        np.testing.assert_array_equal(centre, replay.centre[i])


def _start(cluster, graph, opt, share_devices):
    session = cluster.session(0, graph, share_devices)
    session.run(tf.compat.v1.global_variables_initializer())
    session.run(tf.compat.v1.local_variables_initializer())
    session.run(opt.get_init_op(0))
    return session


class _Replay:
    """The exchanges of `_build`'s variables in NumPy float32, as the library rounds them:
    plain (d = alpha * (x - c) in the gradient-descent kernel's order) or over the
    bfloat16 wire (s = bf16(x - r), e = bf16(c - r), d = alpha * (s - e))."""

    def __init__(self, initial, wire):
        self.x = [value.copy() for value in initial]
        self.centre = [value.copy() for value in initial]
        self.local = [value.copy() for value in initial]
        self.reference = [value.copy() for value in initial]
        self.wire = wire

    def local_step(self, gradient_step):
        self.x = [x + gradient_step for x in self.x]

    def exchange(self):
        alpha, f32, bf16 = np.float32(ALPHA), np.float32, ml_dtypes.bfloat16
        for i, (x, centre) in enumerate(zip(self.x, self.centre, strict=True)):
            if self.wire:
                sent = (x - self.local[i]).astype(bf16).astype(f32)
                e = (centre - self.reference[i]).astype(bf16).astype(f32)
                self.centre[i] = centre - alpha * (e - sent)
                self.x[i] = x - alpha * (sent - e)
                self.reference[i] = self.reference[i] + e
                self.local[i] = self.local[i] + e
            else:
                self.centre[i] = centre - alpha * (centre - x)
                self.x[i] = x - alpha * (x - centre)
                self.local[i] = centre


@pytest.mark.parametrize("wire_dtype", [None, "bfloat16"], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("ps_tasks", [2, 4])
def test_every_task_is_called_at_once(world, four_ps, container, ps_tasks, wire_dtype):
    # Direct calls: three exchanges, each held until all P tasks are in their half at the
    # same time; then every variable moved as the float32 replay says, to the bit.
    share_devices = True
    _HeldExchange.container, _HeldExchange.serial = container, False
    with tf.Graph().as_default() as graph:
        opt, train_op, step, variables, entries, global_step = _build(
            four_ps.spec, ps_tasks, container, wire_dtype=wire_dtype
        )
        gates = _Gates(container, ps_tasks)
        with _start(four_ps, graph, opt, share_devices) as session:
            assert opt.choose_exchange_transport(session) == (
                "direct" if share_devices else "remote_call"
            )
            replay = _Replay(session.run(variables), wire_dtype)
            rng = np.random.default_rng(0)
            for count in range(1, 4):
                gradient_step = rng.normal(scale=0.01, size=SIZE).astype(np.float32)
                join = _run_in_thread(lambda g=gradient_step: session.run(train_op, {step: g}))
                arrived = gates.wait_for_all(session)
                assert arrived == ps_tasks, f"exchange {count}: {arrived} of {ps_tasks} at once"
                join()
                replay.local_step(gradient_step)
                replay.exchange()
                _assert_moved_as(session, variables, entries, replay)
                assert session.run(global_step) == count


@pytest.mark.parametrize("wire_dtype", [None, "bfloat16"], ids=["float32", "bfloat16"])
def test_the_centres_come_back_while_the_values_go_out(world, four_ps, container, wire_dtype):
    # Direct calls on 2 tasks whose halves are held before they move their centres, that
    # is, until the test lets them take the worker's values. Each task's read of its
    # centre (or, on the 16-bit wire, its difference e) reaches the worker all the same:
    # a worker op of the test's HeldExchange reads it there and queues a token. Built
    # before any update, the reads ran first; had one been built after a move, as the
    # exchange built them before, a function's order of stateful ops would have held it
    # (and its token) until the release. tests/unit/test_parallel_calls_unit.py shows
    # that the replies the worker uses wait for nothing more. Then the moves are the
    # replay's, to the bit: the worker moved only once its task had its values.
    _HeldExchange.container, _HeldExchange.signal_replies = container, True
    try:
        with tf.Graph().as_default() as graph:
            opt, train_op, step, variables, entries, _ = _build(
                four_ps.spec, 2, container, wire_dtype=wire_dtype
            )
            gates = _Gates(container, 2)
            with tf.compat.v1.device(WORKER):
                replied = tf.raw_ops.QueueSizeV2(handle=_queue(container, "replied"))
            with _start(four_ps, graph, opt, True) as session:
                assert opt.choose_exchange_transport(session) == "direct"
                replay = _Replay(session.run(variables), wire_dtype)
                gradient_step = np.full(SIZE, 0.01, np.float32)
                join = _run_in_thread(lambda: session.run(train_op, {step: gradient_step}))
                try:
                    deadline = time.monotonic() + GATE_SECS
                    while session.run(replied) < 2 and time.monotonic() < deadline:
                        time.sleep(0.01)
                    assert session.run(replied) == 2, "a reply waited for its task's move"
                    assert sum(int(size > 0) for size in session.run(gates.arrived)) == 2
                    # Nothing moved on the worker yet: it waits for its tasks' moves.
                    worker, local = session.run([variables, [e.local_center for e in entries]])
                    np.testing.assert_array_equal(worker, [x + gradient_step for x in replay.x])
                    np.testing.assert_array_equal(local, replay.local)
                finally:
                    session.run(gates.release)
                join()
                replay.local_step(gradient_step)
                replay.exchange()
                _assert_moved_as(session, variables, entries, replay)
    finally:
        _HeldExchange.signal_replies = False


@pytest.mark.parametrize(
    "serial, share_devices", [(True, True), (False, False)], ids=["serial_form", "remote_call"]
)
def test_remote_calls_and_the_serial_form_call_one_task_at_a_time(
    world, four_ps, container, serial, share_devices
):
    # RemoteCalls (TensorFlow aborts now and then when one step starts them to several
    # targets at once), and the private serial form of direct calls (what
    # benchmarks/scale.py measures against), on 4 tasks: each time a task arrives it is the
    # only one, until the test releases it.
    _HeldExchange.container, _HeldExchange.serial = container, serial
    try:
        with tf.Graph().as_default() as graph:
            opt, train_op, step, *_ = _build(four_ps.spec, 4, container)
            gates = _Gates(container, 4)
            with _start(four_ps, graph, opt, share_devices) as session:
                assert opt.choose_exchange_transport(session) == (
                    "direct" if share_devices else "remote_call"
                )
                join = _run_in_thread(lambda: session.run(train_op, {step: np.zeros(SIZE)}))
                order = []
                for _ in range(4):
                    deadline = time.monotonic() + DEADLINE_SECS
                    while not any(session.run(gates.arrived)):
                        assert time.monotonic() < deadline, "no task was called"
                        time.sleep(0.01)
                    sizes = session.run(gates.arrived)
                    (task,) = np.flatnonzero(sizes)  # One task at a time.
                    order.append(int(task))
                    session.run([gates.release[task], gates.take[task]])
                join()
                assert order == [0, 1, 2, 3]
    finally:
        _HeldExchange.serial = False


@pytest.mark.parametrize("wire_dtype", [None, "bfloat16"], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("ps_tasks", [2, 4])
def test_the_overlapped_exchange_reaches_every_task_at_once(
    world, four_ps, container, ps_tasks, wire_dtype
):
    # The runner's exchange is one run of plain ops, a partition per ps task: its moves on
    # the P tasks are held together as well. Each reply lands at the next exchange step
    # (the finish op lands the last), so the replay lands it there too.
    _HeldOverlappedExchange.container = container
    with tf.Graph().as_default() as graph:
        opt, train_op, step, variables, entries, global_step = _build(
            four_ps.spec, ps_tasks, container, overlap=True, wire_dtype=wire_dtype
        )
        finish = opt.get_finish_op()
        gates = _Gates(container, ps_tasks)
        coordinator = tf.train.Coordinator()
        with _start(four_ps, graph, opt, True) as session:
            threads = tf.compat.v1.train.start_queue_runners(session, coordinator)
            try:
                replay = _Replay(session.run(variables), wire_dtype)
                in_flight, rng = None, np.random.default_rng(0)
                for count in range(1, 4):
                    gradient_step = rng.normal(scale=0.01, size=SIZE).astype(np.float32)
                    session.run(train_op, {step: gradient_step})  # Queues the copy.
                    arrived = gates.wait_for_all(session)
                    assert arrived == ps_tasks, f"exchange {count}: {arrived} of {ps_tasks}"
                    _wait_for(lambda c=count: session.run(global_step) >= c)
                    replay.local_step(gradient_step)
                    in_flight = _overlapped_exchange(replay, in_flight)
                session.run(finish)
                _land(replay, in_flight)
                _assert_moved_as(session, variables, entries, replay)
            finally:
                coordinator.request_stop()
                session.run(gates.release)  # A runner still held is let go.
                coordinator.join(threads, stop_grace_period_secs=DEADLINE_SECS)


def _overlapped_exchange(replay, in_flight):
    """One overlapped exchange step in `replay`: lands the reply `in_flight`, then sends x
    and moves the centre; returns the new reply (per variable: difference, received)."""
    _land(replay, in_flight)
    alpha, f32, bf16 = np.float32(ALPHA), np.float32, ml_dtypes.bfloat16
    reply = []
    for i, (x, centre) in enumerate(zip(replay.x, replay.centre, strict=True)):
        if replay.wire:
            sent = (x - replay.local[i]).astype(bf16).astype(f32)
            e = (centre - replay.reference[i]).astype(bf16).astype(f32)
            replay.centre[i] = centre - alpha * (e - sent)
            replay.reference[i] = replay.reference[i] + e
            reply.append((sent - e, e))
        else:
            replay.centre[i] = centre - alpha * (centre - x)
            reply.append((x - centre, centre))
    return reply


def _land(replay, reply):
    """Lands an overlapped reply in `replay`: x -= alpha * difference; the local centre
    takes the centre read (float32) or adds e (bfloat16 wire)."""
    if reply is None:
        return
    for i, (difference, received) in enumerate(reply):
        replay.x[i] = replay.x[i] - np.float32(ALPHA) * difference
        replay.local[i] = replay.local[i] + received if replay.wire else received


def _wait_for(condition):
    deadline = time.monotonic() + DEADLINE_SECS
    while not condition():
        assert time.monotonic() < deadline, "the exchange did not happen in time"
        time.sleep(0.005)
