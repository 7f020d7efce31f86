"""The exchange as first written: a per-step `tf.cond` whose true branch has ops on the ps.

Kept only as a benchmark baseline (configuration "naive-easgd-P"), to show what the design
of `tf_contrib_easgd/exchange/elastic_exchange.py` saves. The arithmetic is the same; what
differs is that
the ops of the exchange sit on the parameter servers, so the train op's graph has a ps
partition that runs, and trades dead tensors with the worker, on every step.
"""

import tensorflow as tf

from tf_contrib_easgd import ElasticAverageOptimizer


class NaiveElasticAverageOptimizer(ElasticAverageOptimizer):
    """`ElasticAverageOptimizer` with the per-step cross-device `tf.cond` exchange."""

    def _exchange_if_due(self, local_update, centered, global_step):
        """Counts the local step, then the exchange in a `tf.cond` that spans worker and ps."""
        with (
            tf.compat.v1.device(self._getter.worker_device),
            tf.control_dependencies([local_update]),
        ):
            step = tf.compat.v1.assign_add(self._local_step, 1, use_locking=self._use_locking)
            is_exchange_step = tf.equal(tf.math.floormod(step, self._period), 0)
        return tf.cond(
            is_exchange_step,
            lambda: self._naive_exchange(centered, global_step),
            lambda: tf.constant(False),
            name="exchange_if_due",
        )

    def _naive_exchange(self, centered, global_step):
        updates = []
        for entry in centered:
            with tf.compat.v1.device(self._getter.worker_device):
                center = tf.identity(entry.global_center.read_value())
                refresh = tf.compat.v1.assign(
                    entry.local_center, center, use_locking=self._use_locking
                )
                with tf.control_dependencies([refresh]):
                    rate = tf.cast(self._moving_rate, center.dtype)
                    delta = rate * (entry.worker.read_value() - center)
                move_worker = tf.compat.v1.assign_sub(
                    entry.worker, delta, use_locking=self._use_locking
                )
            move_center = tf.compat.v1.assign_add(
                entry.global_center, delta, use_locking=self._use_locking
            )
            updates += [move_worker.op, move_center.op]
        if global_step is not None:
            with tf.control_dependencies(updates):
                updates.append(
                    tf.compat.v1.assign_add(global_step, 1, use_locking=self._use_locking).op
                )
        with tf.control_dependencies(updates):
            return tf.constant(True)
