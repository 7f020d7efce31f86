"""Unit tests (no server, no child process): an exchange's calls to its ps tasks, in flight
together.

The tests of its other tiers are in tests/cluster/test_parallel_calls.py.
"""

import numpy as np
import pytest
import tensorflow as tf
from clusters import worker_scope

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange
from tf_contrib_easgd.exchange.overlap import OverlappedExchange

ALPHA = 0.3


SIZE = 100


WORKER = "/job:worker/task:0"


UNIT_CLUSTER = tf.train.ClusterSpec(
    {"ps": [f"ps{i}:2222" for i in range(4)], "worker": ["w0:2222"]}
)


def _queue(container, name):
    """The handle of queue `name` on the current device (its tokens are int32 scalars)."""
    return tf.raw_ops.FIFOQueueV2(
        component_types=[tf.int32], shapes=[[]], capacity=64, container=container,
        shared_name=name,
    )  # fmt: skip


def _held(container, tensor):
    """`tensor`, passed on only after the current task queued a token on "arrived" and took
    one from "release": built on a ps task, it holds that task's half of the exchange."""
    arrived = tf.raw_ops.QueueEnqueueV2(
        handle=_queue(container, "arrived"), components=[tf.constant(1)]
    )
    with tf.control_dependencies([arrived]):
        (token,) = tf.raw_ops.QueueDequeueV2(
            handle=_queue(container, "release"), component_types=[tf.int32]
        )
    with tf.control_dependencies([token]):
        return tf.identity(tensor)


class _HeldExchange(ElasticExchange):
    """The library's exchange, whose task halves each wait for the test to release them."""

    container = None  # Set per test (the queues live in the test's container).
    serial = False

    @property
    def _serial_calls(self):
        return self.serial

    def _move_centre(self, centre_address, value, centre):
        return super()._move_centre(centre_address, _held(self.container, value), centre)

    def _wire_centre_half(self, centre_address, reference_address, sent):
        return super()._wire_centre_half(
            centre_address, reference_address, _held(self.container, sent)
        )


class _HeldOverlappedExchange(OverlappedExchange):
    """The overlapped exchange, whose runner's moves on each ps wait for the test."""

    container = None

    def _exchange_one(self, entry, reference, copy):
        with tf.compat.v1.device(entry.global_center.device):
            copy = _held(self.container, copy)
        return super()._exchange_one(entry, reference, copy)

    def _exchange_one_narrowed(self, entry, reference, sent):
        with tf.compat.v1.device(entry.global_center.device):
            sent = _held(self.container, sent)
        return super()._exchange_one_narrowed(entry, reference, sent)


class _HeldOptimizer(ElasticAverageOptimizer):
    def _make_exchange(self, centered, global_step):
        common = (centered, self._getter.worker_device, self._moving_rate, global_step,
                  self._use_locking)  # fmt: skip
        if not self._overlap:
            return _HeldExchange(*common, self._transport, self._wire)
        self._overlapped.append(_HeldOverlappedExchange(*common, self._wire))
        return self._overlapped[-1]


def _build(cluster_spec, ps_tasks, container, optimizer_class=_HeldOptimizer, **kwargs):
    """Worker 0's graph on the first `ps_tasks` ps tasks: a variable w_i of SIZE values per
    task (the device setter puts w_i's centre on ps i, the global step after them on ps 0),
    period 1, lr 1, alpha 0.3; the loss -sum(g * w) adds the fed g to every w at each local
    step.

    Returns:
        (opt, train_op, the fed gradient step, the variables, their entries, global step).
    """
    getter = ElasticAverageCustomGetter(WORKER)
    jobs = {
        "ps": cluster_spec.job_tasks("ps")[:ps_tasks],
        "worker": cluster_spec.job_tasks("worker"),
    }
    with worker_scope(tf.train.ClusterSpec(jobs), 0, getter, container):
        rng = np.random.default_rng(ps_tasks)
        variables = [
            tf.compat.v1.get_variable(
                f"w{i}", initializer=tf.constant(rng.normal(size=SIZE).astype(np.float32))
            )
            for i in range(ps_tasks)
        ]
        global_step = tf.compat.v1.train.get_or_create_global_step()
        step = tf.compat.v1.placeholder(tf.float32, [SIZE])
        opt = optimizer_class(
            tf.compat.v1.train.GradientDescentOptimizer(1.0), 1, getter,
            communication_period=1, moving_rate=ALPHA, rho=0.0, **kwargs,
        )  # fmt: skip
        loss = -tf.add_n([tf.reduce_sum(step * w) for w in variables])
        train_op = opt.minimize(loss, global_step=global_step)
    entries = [getter.find(w) for w in variables]
    assert [entry.global_center.device for entry in entries] == [
        f"/job:ps/task:{i}" for i in range(ps_tasks)
    ]
    return opt, train_op, step, variables, entries, global_step


@pytest.mark.parametrize("ps_tasks", [2, 4])
def test_no_direct_call_waits_for_another_and_remote_calls_go_in_turn(world, ps_tasks):
    # Built without servers: every task's calls (both transports) are in the train op. No
    # direct call has another call among what it waits for; the RemoteCall of task k waits
    # for those of tasks 0..k-1 and for no direct call (TensorFlow aborts now and then when
    # one step starts RemoteCalls to several targets at once).
    with tf.Graph().as_default():
        _, train_op, *_ = _build(UNIT_CLUSTER, ps_tasks, "", ElasticAverageOptimizer)
        calls = [op for op in _closure(train_op) if "exchange_with_ps_" in op.name]
        calls = [op for op in calls if op.type == "StatefulPartitionedCall"]
        assert len(calls) == 2 * ps_tasks
        for call in calls:
            task = int(call.name.split("exchange_with_ps_")[1].split("_")[0])
            before = _closure(call) - {call}
            others = sorted(
                op.name.split("/")[-1] for op in before
                if "exchange_with_ps_" in op.name and op.type == "StatefulPartitionedCall"
            )  # fmt: skip
            if call.name.endswith("_direct"):
                assert others == [], f"the direct call to ps {task} waits for {others}"
            else:
                expected = [f"exchange_with_ps_{k}" for k in range(task)]
                assert others == expected, f"the RemoteCall to ps {task} waits for {others}"


def _closure(op):
    """Every op that `op` waits for (data and control inputs, transitively), and `op`."""
    seen, stack = set(), [op]
    while stack:
        current = stack.pop()
        if current not in seen:
            seen.add(current)
            stack.extend(t.op for t in current.inputs)
            stack.extend(current.control_inputs)
    return seen
