"""Exchanges whose calls to each ps task wait until the test lets them answer.

Each ps task's half of the exchange first queues a token on its ps ("arrived"), then waits
for one the test queues there ("release"): `token_queue` is such a queue, `held` builds
the gate, `HeldExchange` and
`HeldOverlappedExchange` put it in the library's two exchanges, `HeldOptimizer` makes them,
and `build` makes worker 0's graph with them. The tests are
tests/cluster/test_parallel_calls.py (on servers) and tests/unit/test_parallel_calls_unit.py
(the graph alone).
"""

import numpy as np
import tensorflow as tf
from clusters import worker_scope
from exchange_graphs import WORKER

from tf_contrib_easgd import ElasticAverageCustomGetter, ElasticAverageOptimizer
from tf_contrib_easgd.exchange.elastic_exchange import ElasticExchange
from tf_contrib_easgd.exchange.overlap import OverlappedExchange

ALPHA = 0.3  # The moving rate of `build`'s optimizer.


SIZE = 100  # Values per variable of `build`'s model.


def token_queue(container, name):
    """The handle of queue `name` on the current device (its tokens are int32 scalars)."""
    return tf.raw_ops.FIFOQueueV2(
        component_types=[tf.int32], shapes=[[]], capacity=64, container=container,
        shared_name=name,
    )  # fmt: skip


def held(container, tensor):
    """`tensor`, passed on only after the current task queued a token on "arrived" and took
    one from "release": built on a ps task, it holds that task's half of the exchange."""
    arrived = tf.raw_ops.QueueEnqueueV2(
        handle=token_queue(container, "arrived"), components=[tf.constant(1)]
    )
    with tf.control_dependencies([arrived]):
        (token,) = tf.raw_ops.QueueDequeueV2(
            handle=token_queue(container, "release"), component_types=[tf.int32]
        )
    with tf.control_dependencies([token]):
        return tf.identity(tensor)


class HeldExchange(ElasticExchange):
    """The library's exchange, whose task halves each wait for the test to release them.

    With `signal_replies`, a direct call also queues a token on the worker's "replied"
    queue once each reply of a task is on the worker (the reads come before any update,
    so the tokens wait for no move).
    """

    container = None  # Set per test (the queues live in the test's container).
    serial = False
    signal_replies = False

    @property
    def _serial_calls(self):
        return self.serial

    def _read_centre(self, centre_address, reference_address):
        read = super()._read_centre(centre_address, reference_address)
        if not self.signal_replies or "/job:ps" not in read.reply.device:
            return read  # Not a direct call's.
        with tf.compat.v1.device(self._worker_device):
            # Its value needs the reply's bytes on the worker.
            arrived = tf.cast(tf.size(read.reply), tf.int32) * 0 + 1
            tf.raw_ops.QueueEnqueueV2(
                handle=token_queue(self.container, "replied"), components=[arrived]
            )
        return read

    def _move_centre(self, centre_address, value, centre):
        return super()._move_centre(centre_address, held(self.container, value), centre)

    def _wire_centre_half(self, centre_address, reference_address, sent, reply):
        return super()._wire_centre_half(
            centre_address, reference_address, held(self.container, sent), reply
        )


class HeldOverlappedExchange(OverlappedExchange):
    """The overlapped exchange, whose runner's moves on each ps wait for the test."""

    container = None

    def _exchange_one(self, entry, reference, copy):
        with tf.compat.v1.device(entry.global_center.device):
            copy = held(self.container, copy)
        return super()._exchange_one(entry, reference, copy)

    def _exchange_one_narrowed(self, entry, reference, sent):
        with tf.compat.v1.device(entry.global_center.device):
            sent = held(self.container, sent)
        return super()._exchange_one_narrowed(entry, reference, sent)


class HeldOptimizer(ElasticAverageOptimizer):
    """The library's optimizer, with a `HeldExchange` (a `HeldOverlappedExchange` with
    `overlap`) in place of its exchange."""

    _exchange_class = HeldExchange
    _overlapped_exchange_class = HeldOverlappedExchange


def build(cluster_spec, ps_tasks, container, optimizer_class=HeldOptimizer, **kwargs):
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
