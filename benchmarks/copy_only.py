"""An exchange that moves the same bytes as EASGD's and does no arithmetic: its floor.

Kept only as a benchmark configuration ("copy-easgd-P"). On an exchange step each worker
sends its values to the ps and receives the centres, exactly as `easgd-P` does (same calls,
same transport, same bytes), but the ps only stores what it received and the worker only
stores the centres as its local centres: no difference, no product, no update of the
worker's copies. Training is meaningless; the throughput is the most that any exchange
carrying EASGD's traffic through TensorFlow's runtime can give on this machine, so it
tells how much of the gap between `easgd-P` and the local-only ceiling the exchange's
arithmetic costs and how much the transfers cost.
"""

import tensorflow as tf

from tf_contrib_easgd import ElasticAverageOptimizer
from tf_contrib_easgd.exchange import ElasticExchange, _remote_target


class CopyOnlyExchange(ElasticExchange):
    """`ElasticExchange` whose two halves only store the values they receive."""

    def __init__(self, centered, worker_device, *args, **kwargs):
        worker = tf.DeviceSpec.from_string(worker_device or "")
        local = [
            entry.global_center.name
            for entry in centered
            if _remote_target(entry.global_center, worker) is None
        ]
        if local:
            raise ValueError(f"CopyOnlyExchange needs every centre on a ps task, got {local}.")
        super().__init__(centered, worker_device, *args, **kwargs)

    def _move_centre(self, centre_address, value, centre):
        """The centre takes the worker's value (one copy, like EASGD's one update), after the
        read that goes back to the worker (EASGD's update waits for it through d)."""
        with tf.control_dependencies([centre]):
            return centre_address.assign(value, self._use_locking)

    def _move_worker(self, worker, local_centre, value, centre):
        """The local centre takes the centre received; the worker's copy stays."""
        return None, [local_centre.assign(centre, self._use_locking)]


class CopyOnlyElasticAverageOptimizer(ElasticAverageOptimizer):
    """`ElasticAverageOptimizer` with `CopyOnlyExchange`."""

    _exchange_class = CopyOnlyExchange
